/*
 * DLRM's batches, the Zipf sampler and the synthetic data with a planted
 * teacher (include/gradsync/dlrm.h; docs/DLRM.md).
 */
#include <math.h>
#include <string.h>

#include "dlrm_internal.h"
#include "gradsync/dlrm.h"
#include "gs_internal.h"

/* ---- Batches --------------------------------------------------------------- */

void gs_dlrm_batch_free(gs_dlrm_batch *b) {
  if (b == NULL) return;
  gs_free(b->dense);
  gs_free(b->labels);
  gs_free(b->offsets);
  gs_free(b->ids);
  gs_free(b->bags);
  memset(b, 0, sizeof *b);
}

gs_status gs_dlrm_batch_alloc(gs_dlrm_batch *b, size_t max_n, size_t ndense, int ntables,
                              size_t max_ids) {
  if (b == NULL || max_n == 0 || ntables < 0)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM batch: NULL, 0 samples or %d tables", ntables);
  memset(b, 0, sizeof *b);
  size_t T = (size_t)ntables, nd, no, ni;
  if (gs_mul_size(max_n, ndense, &nd) != GS_OK || gs_mul_size(T, max_n + 1, &no) != GS_OK ||
      gs_mul_size(T, max_ids, &ni) != GS_OK)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM batch: %zu samples, %zu dense, %d tables and "
                    "%zu ids overflow", max_n, ndense, ntables, max_ids);
  b->dense = gs_calloc(nd ? nd : 1, sizeof(float));
  b->labels = gs_calloc(max_n, sizeof(float));
  b->offsets = gs_calloc(no ? no : 1, sizeof(int64_t));
  b->ids = gs_calloc(ni ? ni : 1, sizeof(int32_t));
  b->bags = gs_calloc(T ? T : 1, sizeof(gs_embed_bags));
  if (!b->dense || !b->labels || !b->offsets || !b->ids || !b->bags) {
    gs_dlrm_batch_free(b);
    return gs_error(GS_ERR_NOMEM, "DLRM batch: out of memory for %zu samples and %zu ids",
                    max_n, ni);
  }
  b->max_n = max_n;
  b->ndense = ndense;
  b->ntables = ntables;
  b->max_ids = max_ids;
  for (size_t t = 0; t < T; t++)
    b->bags[t] = (gs_embed_bags){0, b->offsets + t * (max_n + 1), b->ids + t * max_ids, 0, 0};
  return GS_OK;
}

/* ---- Zipf by rejection-inversion --------------------------------------------
 * Hormann & Derflinger (1996): with h(x) = x^-s and H its integral
 * ((x^(1-s) - 1) / (1 - s), log x at s = 1), a uniform u between H(n + 1/2)
 * and H(3/2) - 1 gives x = H^-1(u); k = round(x) is accepted when k - x is
 * within the squeeze or u >= H(k + 1/2) - h(k). The two helpers keep H and
 * its inverse accurate as s approaches 1 (the layout of Apache Commons'
 * RejectionInversionZipfSampler). */

/* log1p(x) / x */
static double helper1(double x) {
  return fabs(x) > 1e-8 ? log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - x * 0.25));
}
/* expm1(x) / x */
static double helper2(double x) {
  return fabs(x) > 1e-8 ? expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + x * 0.25));
}
static double zipf_h(const gs_zipf *z, double x) { return exp(-z->s * log(x)); }
static double zipf_H(const gs_zipf *z, double x) {
  double lx = log(x);
  return helper2((1.0 - z->s) * lx) * lx;
}
static double zipf_Hinv(const gs_zipf *z, double x) {
  double t = x * (1.0 - z->s);
  if (t < -1.0) t = -1.0;
  return exp(helper1(t) * x);
}

gs_status gs_zipf_init(gs_zipf *z, uint64_t n, double s) {
  if (z == NULL || n == 0 || n > (1ULL << 53) || !(s >= 0) || !isfinite(s))
    return gs_error(GS_ERR_INVALID_ARG, "Zipf law: %llu ranks and exponent %g (1 to 2^53 "
                    "ranks, exponent >= 0)", (unsigned long long)n, s);
  z->n = n;
  z->s = s;
  if (s > 0) {
    z->h_x1 = zipf_H(z, 1.5) - 1.0;
    z->h_n = zipf_H(z, (double)n + 0.5);
    z->squeeze = 2.0 - zipf_Hinv(z, zipf_H(z, 2.5) - zipf_h(z, 2.0));
  }
  return GS_OK;
}

uint64_t gs_zipf_draw(const gs_zipf *z, uint64_t *state) {
  if (z->s == 0 || z->n == 1) {
    uint64_t k = (uint64_t)(dlrm_unif(state) * (double)z->n);
    return (k < z->n ? k : z->n - 1) + 1;
  }
  for (;;) {
    double u = z->h_n + dlrm_unif(state) * (z->h_x1 - z->h_n);
    double x = zipf_Hinv(z, u);
    double kd = floor(x + 0.5);
    uint64_t k = kd < 1 ? 1 : kd > (double)z->n ? z->n : (uint64_t)kd;
    if ((double)k - x <= z->squeeze || u >= zipf_H(z, (double)k + 0.5) - zipf_h(z, (double)k))
      return k;
  }
}

/* ---- Synthetic data ---------------------------------------------------------- */

struct gs_dlrm_synth {
  gs_dlrm_synth_config cfg;
  size_t T;
  size_t *rows;
  gs_zipf *zipf;
  size_t *pool;                  /* ids per bag (the most, with pooling_random) */
  size_t max_pool;
  uint64_t *perm_mul, *perm_add; /* id = (mul * (rank - 1) + add) mod rows */
  float *w;                      /* the teacher's dense weights */
  double v_std;
  uint64_t data_seed, teacher_seed;
};

gs_dlrm_synth_config gs_dlrm_synth_defaults(void) {
  gs_dlrm_synth_config c;
  memset(&c, 0, sizeof c);
  c.ndense = 13;
  c.zipf_s = 1.05;
  c.pooling = 1;
  c.scramble = 1;
  c.teacher_bias = -1.0;
  c.dense_std = 1.0;
  c.sparse_std = 1.5;
  c.seed = 1;
  return c;
}

void gs_dlrm_synth_destroy(gs_dlrm_synth *g) {
  if (g == NULL) return;
  gs_free(g->rows);
  gs_free(g->zipf);
  gs_free(g->pool);
  gs_free(g->perm_mul);
  gs_free(g->perm_add);
  gs_free(g->w);
  gs_free(g);
}

/* Table t's ids per bag: its spec's pooling rounded, or the config's; 0
 * when out of range. */
static size_t table_pool(const gs_dlrm_synth_config *cfg, int t) {
  if (!cfg->table_pooling) return cfg->pooling >= 1 ? (size_t)cfg->pooling : 0;
  double p = round(cfg->tables[t].pooling);
  return p >= 1 && p <= 1000000 ? (size_t)p : 0;
}

int gs_dlrm_synth_max_pooling(const gs_dlrm_synth_config *cfg) {
  if (cfg == NULL) return 0;
  if (!cfg->table_pooling) return cfg->pooling;
  size_t mx = 0;
  for (int t = 0; t < cfg->ntables; t++) {
    size_t p = table_pool(cfg, t);
    if (p == 0) return 0;
    if (p > mx) mx = p;
  }
  return mx > 0 ? (int)mx : 1;
}

gs_status gs_dlrm_synth_create(const gs_dlrm_synth_config *cfg, gs_dlrm_synth **out) {
  if (cfg == NULL || out == NULL) return gs_error(GS_ERR_INVALID_ARG, "synthetic data: NULL");
  *out = NULL;
  if (cfg->ntables < 0 || (cfg->ntables > 0 && cfg->tables == NULL))
    return gs_error(GS_ERR_INVALID_ARG, "synthetic data: %d tables and no specs", cfg->ntables);
  if (!cfg->table_pooling && (cfg->pooling < 1 || cfg->pooling > 1000000))
    return gs_error(GS_ERR_INVALID_ARG, "synthetic data: pooling %d (1 to 1000000)",
                    cfg->pooling);
  for (int t = 0; cfg->table_pooling && t < cfg->ntables; t++)
    if (table_pool(cfg, t) == 0)
      return gs_error(GS_ERR_INVALID_ARG, "synthetic data: table %d '%s' has pooling %g "
                      "(ids per sample: 1 to 1000000 once rounded)", t,
                      cfg->tables[t].name ? cfg->tables[t].name : "(unnamed)",
                      cfg->tables[t].pooling);
  if (!(cfg->zipf_s >= 0) || !isfinite(cfg->zipf_s))
    return gs_error(GS_ERR_INVALID_ARG, "synthetic data: Zipf exponent %g (>= 0)", cfg->zipf_s);
  if (!isfinite(cfg->teacher_bias) || !(cfg->dense_std >= 0) || !(cfg->sparse_std >= 0) ||
      !isfinite(cfg->dense_std) || !isfinite(cfg->sparse_std))
    return gs_error(GS_ERR_INVALID_ARG, "synthetic data: teacher bias %g, dense std %g, sparse "
                    "std %g (finite, stds >= 0)", cfg->teacher_bias, cfg->dense_std,
                    cfg->sparse_std);
  size_t T = (size_t)cfg->ntables;
  gs_dlrm_synth *g = gs_calloc(1, sizeof *g);
  if (g == NULL) return gs_error(GS_ERR_NOMEM, "synthetic data: out of memory");
  g->cfg = *cfg;
  g->cfg.tables = NULL;
  g->T = T;
  g->rows = gs_calloc(T + 1, sizeof *g->rows);
  g->zipf = gs_calloc(T + 1, sizeof *g->zipf);
  g->pool = gs_calloc(T + 1, sizeof *g->pool);
  g->perm_mul = gs_calloc(T + 1, sizeof *g->perm_mul);
  g->perm_add = gs_calloc(T + 1, sizeof *g->perm_add);
  g->w = gs_calloc(cfg->ndense + 1, sizeof *g->w);
  if (!g->rows || !g->zipf || !g->pool || !g->perm_mul || !g->perm_add || !g->w) {
    gs_dlrm_synth_destroy(g);
    return gs_error(GS_ERR_NOMEM, "synthetic data: out of memory for %zu tables", T);
  }
  g->data_seed = dlrm_mix(cfg->seed ^ 0x64617461ULL);    /* "data" */
  g->teacher_seed = dlrm_mix(cfg->seed ^ 0x74656163ULL); /* "teac" */
  uint64_t rng = g->teacher_seed;
  for (size_t k = 0; k < cfg->ndense; k++)
    g->w[k] = (float)(cfg->dense_std / sqrt((double)cfg->ndense) * dlrm_gauss(&rng));
  /* The mean ids per sample over the tables (each table's mean with
   * pooling_random): the teacher's sparse part keeps its variance. */
  double mean_pool = 0;
  g->max_pool = 1;
  for (size_t t = 0; t < T; t++) {
    g->pool[t] = table_pool(cfg, (int)t);
    if (g->pool[t] > g->max_pool) g->max_pool = g->pool[t];
    mean_pool += cfg->pooling_random ? (g->pool[t] + 1) / 2.0 : (double)g->pool[t];
  }
  if (T) mean_pool /= (double)T;
  g->v_std = T ? cfg->sparse_std / sqrt((double)T * mean_pool) : 0;
  for (size_t t = 0; t < T; t++) {
    size_t rows = cfg->tables[t].rows;
    if (rows == 0 || rows > INT32_MAX) {
      gs_dlrm_synth_destroy(g);
      return gs_error(GS_ERR_INVALID_ARG, "synthetic data: table %zu '%s' has %zu rows (1 to "
                      "2^31 - 1)", t, cfg->tables[t].name ? cfg->tables[t].name : "(unnamed)",
                      rows);
    }
    g->rows[t] = rows;
    gs_status st = gs_zipf_init(&g->zipf[t], rows, cfg->zipf_s);
    if (st != GS_OK) {
      gs_dlrm_synth_destroy(g);
      return st;
    }
    uint64_t prng = dlrm_mix(cfg->seed ^ dlrm_mix(0x7065726dULL + t)); /* "perm" */
    uint64_t mul = 1, add = 0;
    if (cfg->scramble && rows > 1) {
      mul = 1 + dlrm_rng_next(&prng) % (rows - 1);
      while (dlrm_gcd(mul, rows) != 1) mul = mul % (rows - 1) + 1;
      add = dlrm_rng_next(&prng) % rows;
    }
    g->perm_mul[t] = mul;
    g->perm_add[t] = add;
  }
  *out = g;
  return GS_OK;
}

uint64_t gs_dlrm_synth_id_of_rank(const gs_dlrm_synth *g, int t, uint64_t k) {
  return (g->perm_mul[t] * (k - 1) + g->perm_add[t]) % g->rows[t];
}

/* The teacher's scalar weight of row id in table t: a normal from a hash of
 * the seed, the table and the row (no table of weights held). */
static double teacher_v(const gs_dlrm_synth *g, size_t t, uint64_t id) {
  uint64_t st = dlrm_mix(g->teacher_seed ^ dlrm_mix(((uint64_t)t << 40) ^ id));
  return g->v_std * dlrm_gauss(&st);
}

static double teacher_logit(const gs_dlrm_synth *g, const gs_dlrm_batch *b, size_t s) {
  double z = g->cfg.teacher_bias;
  const float *x = b->dense + s * b->ndense;
  for (size_t k = 0; k < g->cfg.ndense; k++) z += (double)g->w[k] * x[k];
  for (size_t t = 0; t < g->T; t++) {
    const gs_embed_bags *bg = &b->bags[t];
    const int32_t *ids = bg->ids;
    for (int64_t j = bg->offsets[s]; j < bg->offsets[s + 1]; j++)
      z += teacher_v(g, t, (uint64_t)ids[j]);
  }
  return z;
}

static gs_status check_fill(const gs_dlrm_synth *g, size_t n, const gs_dlrm_batch *b) {
  if (b == NULL || n == 0 || n > b->max_n)
    return gs_error(GS_ERR_INVALID_ARG, "synthetic data: %zu samples into a batch of %zu", n,
                    b ? b->max_n : 0);
  if (b->ndense != g->cfg.ndense || (size_t)b->ntables != g->T)
    return gs_error(GS_ERR_INVALID_ARG, "synthetic data: a batch of %zu dense and %d tables; "
                    "the data has %zu and %zu", b->ndense, b->ntables, g->cfg.ndense, g->T);
  if (b->max_ids / g->max_pool < n)
    return gs_error(GS_ERR_INVALID_ARG, "synthetic data: room for %zu ids per table, %zu "
                    "samples of up to %zu need more", b->max_ids, n, g->max_pool);
  return GS_OK;
}

gs_status gs_dlrm_synth_fill(const gs_dlrm_synth *g, size_t first, size_t n, gs_dlrm_batch *b) {
  GS_CHECK(check_fill(g, n, b));
  size_t F = g->cfg.ndense;
  for (size_t t = 0; t < g->T; t++) b->offsets[t * (b->max_n + 1)] = 0;
  for (size_t s = 0; s < n; s++) {
    /* Sample first + s's own stream: the same sample whatever the batch. */
    uint64_t st = dlrm_mix(g->data_seed ^ dlrm_mix(first + s));
    float *x = b->dense + s * F;
    for (size_t k = 0; k < F; k++) x[k] = (float)dlrm_gauss(&st);
    for (size_t t = 0; t < g->T; t++) {
      int64_t *off = b->offsets + t * (b->max_n + 1);
      int32_t *ids = b->ids + t * b->max_ids;
      size_t P = g->pool[t], len = P;
      if (g->cfg.pooling_random) {
        len = 1 + (size_t)(dlrm_unif(&st) * (double)P);
        if (len > P) len = P;
      }
      int64_t j = off[s];
      for (size_t l = 0; l < len; l++)
        ids[j++] = (int32_t)gs_dlrm_synth_id_of_rank(g, (int)t, gs_zipf_draw(&g->zipf[t], &st));
      off[s + 1] = j;
    }
    /* The label: the teacher's own draw, a uniform of the sample's stream. */
    double u = dlrm_unif(&st);
    b->n = s + 1;
    double z = teacher_logit(g, b, s);
    double p = z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
    b->labels[s] = u < p ? 1.0f : 0.0f;
  }
  b->n = n;
  b->first_sample = first;
  for (size_t t = 0; t < g->T; t++) {
    b->bags[t].nbags = n;
    b->bags[t].first_sample = first;
  }
  return GS_OK;
}

gs_status gs_dlrm_synth_teacher_logits(const gs_dlrm_synth *g, const gs_dlrm_batch *b,
                                       float *out) {
  if (b == NULL || out == NULL) return gs_error(GS_ERR_INVALID_ARG, "teacher: NULL batch");
  if (b->ndense != g->cfg.ndense || (size_t)b->ntables != g->T)
    return gs_error(GS_ERR_INVALID_ARG, "teacher: a batch of %zu dense and %d tables; the "
                    "data has %zu and %zu", b->ndense, b->ntables, g->cfg.ndense, g->T);
  for (size_t s = 0; s < b->n; s++) out[s] = (float)teacher_logit(g, b, s);
  return GS_OK;
}

gs_status gs_dlrm_synth_teacher_auc(const gs_dlrm_synth *g, size_t first, size_t n,
                                    double *auc) {
  if (n == 0) return gs_error(GS_ERR_INVALID_ARG, "teacher AUC: no samples");
  size_t chunk = n < 4096 ? n : 4096;
  gs_dlrm_batch b;
  GS_CHECK(gs_dlrm_batch_alloc(&b, chunk, g->cfg.ndense, (int)g->T,
                               chunk * g->max_pool));
  float *z = gs_malloc(n * sizeof(float)), *y = gs_malloc(n * sizeof(float));
  gs_status st = GS_OK;
  if (z == NULL || y == NULL) {
    st = gs_error(GS_ERR_NOMEM, "teacher AUC: out of memory for %zu samples", n);
    goto out;
  }
  for (size_t s = 0; s < n; s += chunk) {
    size_t k = n - s < chunk ? n - s : chunk;
    GS_CHECK_GOTO(gs_dlrm_synth_fill(g, first + s, k, &b), st, out);
    GS_CHECK_GOTO(gs_dlrm_synth_teacher_logits(g, &b, z + s), st, out);
    memcpy(y + s, b.labels, k * sizeof(float));
  }
  st = gs_metric_auc(z, y, n, auc);
out:
  gs_free(z);
  gs_free(y);
  gs_dlrm_batch_free(&b);
  return st;
}
