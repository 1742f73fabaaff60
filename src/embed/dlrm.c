/*
 * The DLRM model on one process (include/gradsync/dlrm.h; docs/DLRM.md).
 *
 * The MLPs are written here with cblas_sgemm rather than built from
 * src/nn's layers: src/nn is a library above this one (gradsync_nn links
 * libgradsync), and keeping both MLPs' weights and gradients in one flat
 * buffer each (one all-reduce for the data-parallel half of the hybrid
 * step) is simpler with layers that are only slices of that buffer.
 *
 * Every loop that sums runs in a fixed order, and OpenBLAS's GEMMs split
 * their work the same way for the same thread count, so a step is
 * deterministic.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlrm_internal.h"
#include "gradsync/dlrm.h"
#include "gs_internal.h"

typedef struct mlp_layer {
  size_t in, out;
  int relu;
  size_t w_off, b_off;    /* where w and b start in the flat buffers */
  float *w, *b, *dw, *db; /* slices of the flat buffers */
  float *y;               /* max_batch x out: the activation (after ReLU) */
} mlp_layer;

/* A DCN-v2 cross layer: y = x0 * (W (V x) + b) + x, x its input. */
typedef struct cross_layer {
  size_t v_off, w_off, b_off;       /* in the flat buffers */
  float *V, *W, *b, *dV, *dW, *db;  /* slices of them: V [r x d], W [d x r], b [d] */
  float *u, *v, *y;                 /* max_batch x r, x d, x d: V x, W u + b, the output */
} cross_layer;

struct gs_dlrm {
  size_t F, D, T, width, max_batch, n;
  gs_dlrm_interaction interaction;
  int nbot, ntop, ncross;
  size_t rank;                      /* dcn: the cross layers' rank */
  mlp_layer bot[GS_DLRM_MAX_LAYERS], top[GS_DLRM_MAX_LAYERS];
  cross_layer cross[GS_DLRM_MAX_CROSS];
  float *x0, *gx0, *gcross[2], *dv, *du; /* dcn: max_batch x width (du: x rank) */
  float *weights, *grads;
  size_t nweights;
  gs_dlrm_param *params;
  size_t nparams;
  char (*param_names)[32];
  gs_embed_table *tables;
  char **table_names;
  float *dense;             /* max_batch x F: the last forward's input */
  float *pooled, *dpooled;  /* max_batch x T*D */
  float *inter, *dinter;    /* max_batch x width */
  float *dbottom;           /* max_batch x D */
  float *scratch[2];        /* max_batch x widest layer: gradients in flight */
  float *logits, *dlogits;  /* max_batch: gs_dlrm_train_step's */
  gs_embed_work *work;
  int have_bottom, have_pooled, have_top, have_backward;
  int have_dbottom; /* backward_top done, backward_bottom not yet */
};

/* ---- Parsing --------------------------------------------------------------- */

gs_status gs_dlrm_interaction_parse(const char *s, gs_dlrm_interaction *out) {
  if (s && strcmp(s, "dot") == 0) *out = GS_DLRM_DOT;
  else if (s && strcmp(s, "cat") == 0) *out = GS_DLRM_CAT;
  else if (s && strcmp(s, "dcn") == 0) *out = GS_DLRM_DCN;
  else
    return gs_error(GS_ERR_PARSE, "DLRM interaction '%s': expected dot, cat or dcn",
                    s ? s : "(null)");
  return GS_OK;
}

gs_status gs_dlrm_mlp_parse(const char *spec, int *widths, int cap, int *n) {
  if (spec == NULL || *spec == '\0')
    return gs_error(GS_ERR_PARSE, "MLP spec: empty (expected widths such as 13-512-256-64)");
  int k = 0;
  const char *p = spec;
  for (;;) {
    char *end;
    if (*p < '0' || *p > '9')
      return gs_error(GS_ERR_PARSE, "MLP spec '%s': expected a width at offset %d", spec,
                      (int)(p - spec));
    long v = strtol(p, &end, 10);
    if (v < 1 || v > 1000000)
      return gs_error(GS_ERR_PARSE, "MLP spec '%s': width %ld outside 1 to 1000000", spec, v);
    if (k >= cap)
      return gs_error(GS_ERR_PARSE, "MLP spec '%s': more than %d widths", spec, cap);
    widths[k++] = (int)v;
    p = end;
    if (*p == '\0') break;
    if (*p != '-')
      return gs_error(GS_ERR_PARSE, "MLP spec '%s': unexpected '%c' at offset %d (widths are "
                      "separated by '-')", spec, *p, (int)(p - spec));
    p++;
  }
  *n = k;
  return GS_OK;
}

/* ---- Creation -------------------------------------------------------------- */

void gs_dlrm_destroy(gs_dlrm *m) {
  if (m == NULL) return;
  for (size_t t = 0; t < m->T && m->tables; t++) {
    gs_free(m->tables[t].weights);
    gs_free(m->tables[t].state);
  }
  for (size_t t = 0; t < m->T && m->table_names; t++) gs_free(m->table_names[t]);
  gs_free(m->tables);
  gs_free(m->table_names);
  for (int i = 0; i < m->nbot; i++) gs_free(m->bot[i].y);
  for (int i = 0; i < m->ntop; i++) gs_free(m->top[i].y);
  for (int i = 0; i < m->ncross; i++) {
    gs_free(m->cross[i].u);
    gs_free(m->cross[i].v);
    gs_free(m->cross[i].y);
  }
  float *dcn[] = {m->x0, m->gx0, m->gcross[0], m->gcross[1], m->dv, m->du};
  for (size_t i = 0; i < sizeof dcn / sizeof dcn[0]; i++) gs_free(dcn[i]);
  gs_free(m->weights);
  gs_free(m->grads);
  gs_free(m->params);
  gs_free(m->param_names);
  gs_free(m->dense);
  gs_free(m->pooled);
  gs_free(m->dpooled);
  gs_free(m->inter);
  gs_free(m->dinter);
  gs_free(m->dbottom);
  gs_free(m->scratch[0]);
  gs_free(m->scratch[1]);
  gs_free(m->logits);
  gs_free(m->dlogits);
  gs_embed_work_free(m->work);
  gs_free(m);
}

/* n floats, or NULL with a message naming what they were for. */
static float *alloc_floats(size_t a, size_t b, const char *what, gs_status *st) {
  size_t n;
  if (gs_mul_size(a, b, &n) != GS_OK || n > SIZE_MAX / sizeof(float)) {
    *st = gs_error(GS_ERR_NOMEM, "DLRM: %s: %zu x %zu floats overflow", what, a, b);
    return NULL;
  }
  float *p = gs_calloc(n ? n : 1, sizeof(float));
  if (p == NULL) *st = gs_error(GS_ERR_NOMEM, "DLRM: out of memory for %s (%zu floats)", what, n);
  return p;
}

/* Lays out one MLP's layers in the flat buffers from *off on. */
static void mlp_layout(mlp_layer *l, int nlayers, const int *widths, int relu_last, size_t *off,
                       size_t *nparams) {
  for (int i = 0; i < nlayers; i++) {
    l[i].in = (size_t)widths[i];
    l[i].out = (size_t)widths[i + 1];
    l[i].relu = i + 1 < nlayers || relu_last;
    size_t nw = l[i].in * l[i].out;
    l[i].w_off = *off;
    *off += nw;
    l[i].b_off = *off;
    *off += l[i].out;
    *nparams += 2;
  }
}

static gs_status mlp_bind(gs_dlrm *m, mlp_layer *l, int nlayers, const char *prefix,
                          size_t *pi) {
  gs_status st = GS_OK;
  for (int i = 0; i < nlayers; i++) {
    size_t ow = l[i].w_off, ob = l[i].b_off;
    l[i].w = m->weights + ow;
    l[i].dw = m->grads + ow;
    l[i].b = m->weights + ob;
    l[i].db = m->grads + ob;
    l[i].y = alloc_floats(m->max_batch, l[i].out, "an MLP activation", &st);
    if (l[i].y == NULL) return st;
    snprintf(m->param_names[*pi], sizeof m->param_names[0], "%s.%d.weight", prefix, i);
    m->params[*pi] = (gs_dlrm_param){m->param_names[*pi], l[i].w, l[i].dw, l[i].in * l[i].out};
    (*pi)++;
    snprintf(m->param_names[*pi], sizeof m->param_names[0], "%s.%d.bias", prefix, i);
    m->params[*pi] = (gs_dlrm_param){m->param_names[*pi], l[i].b, l[i].db, l[i].out};
    (*pi)++;
  }
  return GS_OK;
}

/* dcn's cross layers: their slices of the flat buffers, their tensors
 * (V, W, bias each) and activations, and the interaction's buffers. */
static gs_status cross_bind(gs_dlrm *m, size_t *pi) {
  gs_status st = GS_OK;
  size_t W = m->width, r = m->rank, B = m->max_batch;
  if (m->ncross == 0) return GS_OK;
  for (int i = 0; i < m->ncross; i++) {
    cross_layer *c = &m->cross[i];
    c->V = m->weights + c->v_off, c->dV = m->grads + c->v_off;
    c->W = m->weights + c->w_off, c->dW = m->grads + c->w_off;
    c->b = m->weights + c->b_off, c->db = m->grads + c->b_off;
    if (!(c->u = alloc_floats(B, r, "a cross layer's activation", &st)) ||
        !(c->v = alloc_floats(B, W, "a cross layer's activation", &st)) ||
        !(c->y = alloc_floats(B, W, "a cross layer's activation", &st)))
      return st;
    const char *what[3] = {"V", "W", "bias"};
    float *w[3] = {c->V, c->W, c->b}, *g[3] = {c->dV, c->dW, c->db};
    size_t count[3] = {r * W, W * r, W};
    for (int k = 0; k < 3; k++) {
      snprintf(m->param_names[*pi], sizeof m->param_names[0], "cross.%d.%s", i, what[k]);
      m->params[*pi] = (gs_dlrm_param){m->param_names[*pi], w[k], g[k], count[k]};
      (*pi)++;
    }
  }
  if (!(m->x0 = alloc_floats(B, W, "the cross layers' input", &st)) ||
      !(m->gx0 = alloc_floats(B, W, "the cross layers' gradient", &st)) ||
      !(m->gcross[0] = alloc_floats(B, W, "the cross layers' gradient", &st)) ||
      !(m->gcross[1] = alloc_floats(B, W, "the cross layers' gradient", &st)) ||
      !(m->dv = alloc_floats(B, W, "the cross layers' gradient", &st)) ||
      !(m->du = alloc_floats(B, r, "the cross layers' gradient", &st)))
    return st;
  return GS_OK;
}

/* The DLRM reference's create_mlp: W ~ N(0, sqrt(2 / (in + out))), b ~ N(0, sqrt(1 / out)). */
static void mlp_init(mlp_layer *l, int nlayers, uint64_t *rng) {
  for (int i = 0; i < nlayers; i++) {
    double sw = sqrt(2.0 / (double)(l[i].in + l[i].out)), sb = sqrt(1.0 / (double)l[i].out);
    for (size_t k = 0; k < l[i].in * l[i].out; k++) l[i].w[k] = (float)(sw * dlrm_gauss(rng));
    for (size_t k = 0; k < l[i].out; k++) l[i].b[k] = (float)(sb * dlrm_gauss(rng));
  }
}

/* TorchRec's LowRankCrossNet: V and W Xavier-normal
 * (N(0, sqrt(2 / (fan_in + fan_out)))), the bias 0. */
static void cross_init(cross_layer *c, int n, size_t d, size_t r, uint64_t *rng) {
  double s = sqrt(2.0 / (double)(d + r));
  for (int i = 0; i < n; i++) {
    for (size_t k = 0; k < r * d; k++) c[i].V[k] = (float)(s * dlrm_gauss(rng));
    for (size_t k = 0; k < d * r; k++) c[i].W[k] = (float)(s * dlrm_gauss(rng));
    memset(c[i].b, 0, d * sizeof(float));
  }
}

/* Rows [r_lo, r_hi) and columns [c_lo, c_hi) of table t, as the whole
 * table's initialisation makes them (the reference's create_emb:
 * U(-sqrt(1/rows), sqrt(1/rows))): element (r, d) is draw r*D + d of the
 * table's own splitmix64 stream, and a splitmix64 stream jumps ahead by
 * adding to its state, so any block of any table comes out as it would in
 * the whole table, which is what lets a rank make only its shards. */
void dlrm_table_init(float *w, size_t ld, uint64_t seed, size_t t, size_t rows, size_t D,
                     size_t r_lo, size_t r_hi, size_t c_lo, size_t c_hi) {
  uint64_t base = dlrm_mix(seed ^ dlrm_mix(0x656d62ULL + t)); /* "emb" */
  float bound = (float)sqrt(1.0 / (double)rows);
  for (size_t r = r_lo; r < r_hi; r++) {
    uint64_t s = base + (uint64_t)(r * D + c_lo) * 0x9e3779b97f4a7c15ULL;
    float *row = w + (r - r_lo) * ld;
    for (size_t d = c_lo; d < c_hi; d++) row[d - c_lo] = bound * (float)(2.0 * dlrm_unif(&s) - 1.0);
  }
}

gs_status gs_dlrm_create(const gs_dlrm_config *cfg, gs_dlrm **out) {
  return dlrm_create(cfg, 1, out);
}

gs_status dlrm_create(const gs_dlrm_config *cfg, int with_tables, gs_dlrm **out) {
  if (cfg == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM: NULL config or output");
  *out = NULL;
  int bw[GS_DLRM_MAX_LAYERS + 1], tw[GS_DLRM_MAX_LAYERS + 1], nb, nt;
  GS_CHECK(gs_dlrm_mlp_parse(cfg->bottom_mlp, bw, GS_DLRM_MAX_LAYERS + 1, &nb));
  /* The bottom spec names its input (the dense features) and its output
   * (the tables' dim); the top spec only its layers' widths ("1": one
   * layer from the interaction to the logit). */
  if (nb < 2)
    return gs_error(GS_ERR_PARSE, "MLP spec '%s': a bottom MLP needs at least two widths (the "
                    "dense features and the tables' dim)", cfg->bottom_mlp);
  GS_CHECK(gs_dlrm_mlp_parse(cfg->top_mlp, tw + 1, GS_DLRM_MAX_LAYERS, &nt));
  if (tw[nt] != 1)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM top MLP '%s': the last width must be 1 (the "
                    "logit), not %d", cfg->top_mlp, tw[nt]);
  if (cfg->ntables < 0 || (cfg->ntables > 0 && cfg->tables == NULL))
    return gs_error(GS_ERR_INVALID_ARG, "DLRM: %d tables and no specs", cfg->ntables);
  if (cfg->max_batch == 0)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM: max_batch 0");
  if (cfg->interaction != GS_DLRM_DOT && cfg->interaction != GS_DLRM_CAT &&
      cfg->interaction != GS_DLRM_DCN)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM: unknown interaction %d", (int)cfg->interaction);
  size_t D = (size_t)bw[nb - 1], T = (size_t)cfg->ntables;
  int ncross = 0;
  size_t crank = 0;
  if (cfg->interaction == GS_DLRM_DCN) {
    dlrm_dcn_shape(cfg, (T + 1) * D, &ncross, &crank);
    if (ncross < 1 || ncross > GS_DLRM_MAX_CROSS)
      return gs_error(GS_ERR_INVALID_ARG, "DLRM dcn: %d cross layers (1 to %d)", ncross,
                      GS_DLRM_MAX_CROSS);
    if (crank > (T + 1) * D)
      return gs_error(GS_ERR_INVALID_ARG, "DLRM dcn: rank %zu above the cross layers' width "
                      "%zu ((T + 1) D = (%zu + 1) x %zu): a rank that high adds weights and "
                      "no expressiveness", crank, (T + 1) * D, T, D);
  }
  for (size_t t = 0; t < T; t++) {
    const gs_embed_spec *s = &cfg->tables[t];
    const char *name = s->name ? s->name : "(unnamed)";
    if (s->dim != 0 && s->dim != D)
      return gs_error(GS_ERR_INVALID_ARG, "DLRM table %zu '%s': dim %zu, but the bottom MLP "
                      "'%s' ends at %zu (every table is D wide)", t, name, s->dim,
                      cfg->bottom_mlp, D);
    if (s->rows == 0 || s->rows > INT32_MAX)
      return gs_error(GS_ERR_INVALID_ARG, "DLRM table %zu '%s': %zu rows (1 to 2^31 - 1: "
                      "ids are int32)", t, name, s->rows);
  }
  gs_status st = GS_OK;
  gs_dlrm *m = gs_calloc(1, sizeof *m);
  if (m == NULL) return gs_error(GS_ERR_NOMEM, "DLRM: out of memory");
  m->F = (size_t)bw[0];
  m->D = D;
  m->T = T;
  m->max_batch = cfg->max_batch;
  m->interaction = cfg->interaction;
  m->width = cfg->interaction == GS_DLRM_DOT ? D + (T + 1) * T / 2 : (T + 1) * D;
  tw[0] = (int)m->width;
  m->nbot = nb - 1;
  m->ntop = nt;
  m->ncross = ncross;
  m->rank = crank;
  size_t off = 0, W = m->width;
  mlp_layout(m->bot, m->nbot, bw, 1, &off, &m->nparams);
  for (int i = 0; i < ncross; i++) {
    cross_layer *c = &m->cross[i];
    c->v_off = off;
    off += crank * W;
    c->w_off = off;
    off += W * crank;
    c->b_off = off;
    off += W;
    m->nparams += 3;
  }
  mlp_layout(m->top, m->ntop, tw, 0, &off, &m->nparams);
  m->nweights = off;
  size_t widest = m->width;
  for (int i = 0; i < m->nbot; i++) widest = GS_MAX(widest, m->bot[i].out);
  for (int i = 0; i < m->ntop; i++) widest = GS_MAX(widest, m->top[i].out);
  m->weights = alloc_floats(off, 1, "the MLP weights", &st);
  m->grads = alloc_floats(off, 1, "the MLP gradients", &st);
  m->params = gs_calloc(m->nparams, sizeof *m->params);
  m->param_names = gs_calloc(m->nparams, sizeof *m->param_names);
  m->tables = gs_calloc(T ? T : 1, sizeof *m->tables);
  m->table_names = gs_calloc(T ? T : 1, sizeof *m->table_names);
  if (!m->weights || !m->grads || !m->params || !m->param_names || !m->tables ||
      !m->table_names) {
    if (st == GS_OK) st = gs_error(GS_ERR_NOMEM, "DLRM: out of memory");
    goto fail;
  }
  size_t pi = 0;
  GS_CHECK_GOTO(mlp_bind(m, m->bot, m->nbot, "bottom", &pi), st, fail);
  GS_CHECK_GOTO(cross_bind(m, &pi), st, fail);
  GS_CHECK_GOTO(mlp_bind(m, m->top, m->ntop, "top", &pi), st, fail);
  if (!(m->dense = alloc_floats(m->max_batch, m->F, "the dense input", &st)) ||
      !(m->pooled = alloc_floats(m->max_batch, T * D + 1, "the pooled embeddings", &st)) ||
      !(m->dpooled = alloc_floats(m->max_batch, T * D + 1, "the pooled gradient", &st)) ||
      !(m->inter = alloc_floats(m->max_batch, m->width, "the interaction", &st)) ||
      !(m->dinter = alloc_floats(m->max_batch, m->width, "the interaction's gradient", &st)) ||
      !(m->dbottom = alloc_floats(m->max_batch, D, "the bottom output's gradient", &st)) ||
      !(m->scratch[0] = alloc_floats(m->max_batch, widest, "scratch", &st)) ||
      !(m->scratch[1] = alloc_floats(m->max_batch, widest, "scratch", &st)) ||
      !(m->logits = alloc_floats(m->max_batch, 1, "logits", &st)) ||
      !(m->dlogits = alloc_floats(m->max_batch, 1, "logits", &st)))
    goto fail;
  uint64_t rng = dlrm_mix(cfg->seed ^ 0x646c726dULL); /* "dlrm" */
  mlp_init(m->bot, m->nbot, &rng);
  mlp_init(m->top, m->ntop, &rng);
  cross_init(m->cross, m->ncross, m->width, m->rank, &rng); /* after: dot's and cat's stay */
  for (size_t t = 0; t < T; t++) {
    const gs_embed_spec *s = &cfg->tables[t];
    char buf[32];
    if (s->name == NULL) snprintf(buf, sizeof buf, "table%zu", t);
    const char *name = s->name ? s->name : buf;
    size_t len = strlen(name) + 1;
    m->table_names[t] = gs_malloc(len);
    if (m->table_names[t] == NULL) {
      st = gs_error(GS_ERR_NOMEM, "DLRM: out of memory");
      goto fail;
    }
    memcpy(m->table_names[t], name, len);
    gs_embed_table *e = &m->tables[t];
    e->name = m->table_names[t];
    e->rows = s->rows;
    e->dim = D;
    char what[96];
    snprintf(what, sizeof what, "table '%s'", name);
    if (!with_tables) continue; /* the hybrid-parallel step holds shards instead */
    if (!(e->weights = alloc_floats(s->rows, D, what, &st)) ||
        !(e->state = alloc_floats(s->rows, 1, what, &st)))
      goto fail;
    /* Each table from its own stream, so that adding a table leaves the
     * others alone. */
    dlrm_table_init(e->weights, D, cfg->seed, t, s->rows, D, 0, s->rows, 0, D);
  }
  *out = m;
  return GS_OK;
fail:
  gs_dlrm_destroy(m);
  return st;
}

size_t gs_dlrm_dim(const gs_dlrm *m) { return m->D; }
size_t gs_dlrm_ndense(const gs_dlrm *m) { return m->F; }
int gs_dlrm_ntables(const gs_dlrm *m) { return (int)m->T; }
size_t gs_dlrm_interaction_width(const gs_dlrm *m) { return m->width; }
size_t gs_dlrm_param_count(const gs_dlrm *m) { return m->nparams; }
const gs_dlrm_param *gs_dlrm_param_at(const gs_dlrm *m, size_t i) {
  return i < m->nparams ? &m->params[i] : NULL;
}
float *gs_dlrm_mlp_weights(gs_dlrm *m, size_t *count) {
  if (count) *count = m->nweights;
  return m->weights;
}
float *gs_dlrm_mlp_grads(gs_dlrm *m, size_t *count) {
  if (count) *count = m->nweights;
  return m->grads;
}
gs_embed_table *gs_dlrm_table(gs_dlrm *m, int t) {
  return t >= 0 && (size_t)t < m->T ? &m->tables[t] : NULL;
}
float *gs_dlrm_pooled(gs_dlrm *m) { return m->pooled; }
float *gs_dlrm_pooled_grad(gs_dlrm *m) { return m->dpooled; }

/* ---- Forward --------------------------------------------------------------- */

static gs_status check_batch(const gs_dlrm *m, const gs_dlrm_batch *b) {
  if (b == NULL) return gs_error(GS_ERR_INVALID_ARG, "DLRM: NULL batch");
  if (b->n == 0 || b->n > m->max_batch)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM: batch of %zu samples (the model takes 1 to "
                    "%zu)", b->n, m->max_batch);
  if (b->ndense != m->F || (size_t)b->ntables != m->T)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM: batch of %zu dense features and %d tables; "
                    "the model has %zu and %zu", b->ndense, b->ntables, m->F, m->T);
  return GS_OK;
}

static void mlp_forward(mlp_layer *l, int nlayers, const float *x, size_t n) {
  for (int i = 0; i < nlayers; i++) {
    int in = (int)l[i].in, out = (int)l[i].out;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, out, in, 1.0f, x, in, l[i].w,
                in, 0.0f, l[i].y, out);
    for (size_t s = 0; s < n; s++) {
      float *y = l[i].y + s * (size_t)out;
      for (int o = 0; o < out; o++) y[o] += l[i].b[o];
      if (l[i].relu)
        for (int o = 0; o < out; o++) y[o] = y[o] > 0.0f ? y[o] : 0.0f;
    }
    x = l[i].y;
  }
}

gs_status gs_dlrm_forward_bottom(gs_dlrm *m, const gs_dlrm_batch *b) {
  GS_CHECK(check_batch(m, b));
  memcpy(m->dense, b->dense, b->n * m->F * sizeof(float));
  mlp_forward(m->bot, m->nbot, m->dense, b->n);
  m->n = b->n;
  m->have_bottom = 1;
  m->have_pooled = m->have_top = m->have_backward = 0;
  return GS_OK;
}

void dlrm_mark_pooled(gs_dlrm *m) { m->have_pooled = 1; }

gs_status gs_dlrm_forward_embed(gs_dlrm *m, const gs_dlrm_batch *b) {
  GS_CHECK(check_batch(m, b));
  if (m->T > 0 && m->tables[0].weights == NULL)
    return gs_error(GS_ERR_STATE, "DLRM: forward_embed on a model whose tables are sharded "
                    "(gs_dlrm_dist_* look them up)");
  if (!m->have_bottom || b->n != m->n)
    return gs_error(GS_ERR_STATE, "DLRM: forward_embed of %zu samples without the bottom "
                    "forward of the same batch", b->n);
  size_t stride = m->T * m->D;
  for (size_t t = 0; t < m->T; t++) {
    gs_embed_bags bags = dlrm_batch_bags(b, t);
    GS_CHECK(gs_embed_forward(&m->tables[t], &bags, GS_EMBED_SUM, m->pooled, stride, t * m->D));
  }
  m->have_pooled = 1;
  return GS_OK;
}

static inline float dot(const float *a, const float *b, size_t d) {
  float s = 0.0f;
  for (size_t k = 0; k < d; k++) s += a[k] * b[k];
  return s;
}

/* Z_0 is the bottom output, Z_t (t >= 1) table t - 1's pooled vector. */
static inline const float *z_row(const gs_dlrm *m, const float *x, const float *e, size_t i) {
  return i == 0 ? x : e + (i - 1) * m->D;
}

/* dcn: x0 = inter (the concatenation), then each layer from the last's
 * output (x0 for the first) to its own; inter = the last's. */
static void cross_forward(gs_dlrm *m, size_t n) {
  size_t W = m->width, r = m->rank;
  memcpy(m->x0, m->inter, n * W * sizeof(float));
  const float *x = m->x0;
  for (int i = 0; i < m->ncross; i++) {
    cross_layer *c = &m->cross[i];
    /* u = x V^T [n x r]; v = u W^T + b [n x W]; y = x0 * v + x */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)r, (int)W, 1.0f, x,
                (int)W, c->V, (int)W, 0.0f, c->u, (int)r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)W, (int)r, 1.0f, c->u,
                (int)r, c->W, (int)r, 0.0f, c->v, (int)W);
    for (size_t s = 0; s < n; s++) {
      float *restrict v = c->v + s * W, *restrict y = c->y + s * W;
      const float *restrict x0 = m->x0 + s * W, *restrict xs = x + s * W;
      for (size_t k = 0; k < W; k++) {
        v[k] += c->b[k];
        y[k] = x0[k] * v[k] + xs[k];
      }
    }
    x = c->y;
  }
  memcpy(m->inter, x, n * W * sizeof(float));
}

static void interact_forward(gs_dlrm *m, size_t n) {
  const float *xb = m->bot[m->nbot - 1].y;
  size_t D = m->D, T = m->T, W = m->width;
  for (size_t s = 0; s < n; s++) {
    const float *x = xb + s * D, *e = m->pooled + s * T * D;
    float *r = m->inter + s * W;
    memcpy(r, x, D * sizeof(float));
    if (m->interaction != GS_DLRM_DOT) { /* cat, and dcn's x0 */
      memcpy(r + D, e, T * D * sizeof(float));
      continue;
    }
    /* The reference's order: (1,0), (2,0), (2,1), (3,0), ... */
    size_t k = D;
    for (size_t i = 1; i <= T; i++)
      for (size_t j = 0; j < i; j++) r[k++] = dot(z_row(m, x, e, i), z_row(m, x, e, j), D);
  }
  if (m->interaction == GS_DLRM_DCN) cross_forward(m, n);
}

gs_status gs_dlrm_forward_top(gs_dlrm *m, size_t n, float *logits) {
  if (!m->have_bottom || !m->have_pooled || n != m->n)
    return gs_error(GS_ERR_STATE, "DLRM: forward_top of %zu samples needs the bottom output "
                    "and the pooled embeddings of the same %zu", n, m->n);
  interact_forward(m, n);
  mlp_forward(m->top, m->ntop, m->inter, n);
  if (logits) memcpy(logits, m->top[m->ntop - 1].y, n * sizeof(float));
  m->have_top = 1;
  return GS_OK;
}

gs_status gs_dlrm_forward(gs_dlrm *m, const gs_dlrm_batch *b, float *logits) {
  GS_CHECK(gs_dlrm_forward_bottom(m, b));
  GS_CHECK(gs_dlrm_forward_embed(m, b));
  return gs_dlrm_forward_top(m, b->n, logits);
}

/* ---- Backward -------------------------------------------------------------- */

/* From dy, the gradient of the last layer's output (in a scratch buffer: it
 * is masked in place), to the layers' gradients and, when dx is not NULL,
 * the gradient of the MLP's input x. Layer i's weight and bias are tensors
 * first + 2i and first + 2i + 1 of m->params, handed to ready when final. */
static gs_status mlp_backward(gs_dlrm *m, mlp_layer *l, int nlayers, const float *x, size_t n,
                              float *dy, float *dx, size_t first, gs_dlrm_grad_ready_fn ready,
                              void *arg) {
  int which = dy == m->scratch[0] ? 1 : 0;
  for (int i = nlayers - 1; i >= 0; i--) {
    int in = (int)l[i].in, out = (int)l[i].out;
    const float *xin = i > 0 ? l[i - 1].y : x;
    /* The ReLU's mask as a select, not a branch: the outputs are zero or
     * not at random (a mispredicted branch each), and a store on both
     * paths lets the loop vectorise. */
    if (l[i].relu) {
      const float *restrict y = l[i].y;
      float *restrict g = dy;
      for (size_t k = 0; k < n * (size_t)out; k++) g[k] = y[k] > 0.0f ? g[k] : 0.0f;
    }
    memset(l[i].db, 0, (size_t)out * sizeof(float));
    for (size_t s = 0; s < n; s++) {
      const float *g = dy + s * (size_t)out;
      for (int o = 0; o < out; o++) l[i].db[o] += g[o];
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, (int)n, 1.0f, dy, out, xin,
                in, 0.0f, l[i].dw, in);
    if (ready) {
      GS_CHECK(ready(arg, first + 2 * (size_t)i + 1));
      GS_CHECK(ready(arg, first + 2 * (size_t)i));
    }
    float *dprev = i > 0 ? m->scratch[which] : dx;
    if (dprev)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, in, out, 1.0f, dy, out,
                  l[i].w, in, 0.0f, dprev, in);
    dy = dprev;
    which ^= 1;
  }
  return GS_OK;
}

static inline void axpy(float *restrict y, float a, const float *restrict x, size_t d) {
  for (size_t k = 0; k < d; k++) y[k] += a * x[k];
}

/* dcn: from d inter (the last layer's output) back to d x0, left in
 * m->gx0; each layer's V, W and bias handed to ready when final (bias, W,
 * V, last layer first), as tensors first + 3i .. first + 3i + 2. */
static gs_status cross_backward(gs_dlrm *m, size_t n, size_t first,
                                gs_dlrm_grad_ready_fn ready, void *arg) {
  size_t W = m->width, r = m->rank;
  memset(m->gx0, 0, n * W * sizeof(float));
  const float *g = m->dinter; /* d y of layer i */
  for (int i = m->ncross - 1; i >= 0; i--) {
    cross_layer *c = &m->cross[i];
    const float *x = i > 0 ? m->cross[i - 1].y : m->x0;
    /* d v = g * x0; d x0 += g * v; d b = sum of d v over the samples. */
    memset(c->db, 0, W * sizeof(float));
    for (size_t s = 0; s < n; s++) {
      const float *restrict gs_ = g + s * W, *restrict x0 = m->x0 + s * W,
                            *restrict v = c->v + s * W;
      float *restrict dv = m->dv + s * W, *restrict gx0 = m->gx0 + s * W;
      for (size_t k = 0; k < W; k++) {
        dv[k] = gs_[k] * x0[k];
        gx0[k] += gs_[k] * v[k];
        c->db[k] += dv[k];
      }
    }
    /* d W = d v^T u [W x r]; d u = d v W [n x r]; d V = d u^T x [r x W]. */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)W, (int)r, (int)n, 1.0f, m->dv,
                (int)W, c->u, (int)r, 0.0f, c->dW, (int)r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)r, (int)W, 1.0f, m->dv,
                (int)W, c->W, (int)r, 0.0f, m->du, (int)r);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)r, (int)W, (int)n, 1.0f, m->du,
                (int)r, x, (int)W, 0.0f, c->dV, (int)W);
    if (ready) {
      size_t at = first + 3 * (size_t)i;
      GS_CHECK(ready(arg, at + 2));
      GS_CHECK(ready(arg, at + 1));
      GS_CHECK(ready(arg, at));
    }
    /* d x = g (the residual) + d u V: the next layer down's d y, or x0's. */
    float *dx = m->gcross[i & 1];
    memcpy(dx, g, n * W * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)W, (int)r, 1.0f, m->du,
                (int)r, c->V, (int)W, 1.0f, dx, (int)W);
    g = dx;
  }
  for (size_t k = 0; k < n * W; k++) m->gx0[k] += g[k];
  return GS_OK;
}

static void interact_backward(gs_dlrm *m, size_t n) {
  const float *xb = m->bot[m->nbot - 1].y;
  size_t D = m->D, T = m->T, W = m->width;
  const float *dinter = m->interaction == GS_DLRM_DCN ? m->gx0 : m->dinter;
  for (size_t s = 0; s < n; s++) {
    const float *x = xb + s * D, *e = m->pooled + s * T * D, *dr = dinter + s * W;
    float *dx = m->dbottom + s * D, *de = m->dpooled + s * T * D;
    memcpy(dx, dr, D * sizeof(float));
    if (m->interaction != GS_DLRM_DOT) { /* cat, and dcn's x0 */
      memcpy(de, dr + D, T * D * sizeof(float));
      continue;
    }
    memset(de, 0, T * D * sizeof(float));
    size_t k = D;
    for (size_t i = 1; i <= T; i++)
      for (size_t j = 0; j < i; j++) {
        float g = dr[k++];
        float *di = de + (i - 1) * D, *dj = j == 0 ? dx : de + (j - 1) * D;
        axpy(di, g, z_row(m, x, e, j), D);
        axpy(dj, g, z_row(m, x, e, i), D);
      }
  }
}

gs_status gs_dlrm_backward_top(gs_dlrm *m, const float *dlogits, gs_dlrm_grad_ready_fn ready,
                               void *arg) {
  if (!m->have_top)
    return gs_error(GS_ERR_STATE, "DLRM: backward without a forward");
  if (dlogits == NULL) return gs_error(GS_ERR_INVALID_ARG, "DLRM: backward: NULL gradient");
  size_t n = m->n;
  m->have_backward = 0;
  m->have_dbottom = 0;
  memcpy(m->scratch[0], dlogits, n * sizeof(float));
  size_t first_cross = 2 * (size_t)m->nbot;
  GS_CHECK(mlp_backward(m, m->top, m->ntop, m->inter, n, m->scratch[0], m->dinter,
                        first_cross + 3 * (size_t)m->ncross, ready, arg));
  if (m->interaction == GS_DLRM_DCN) GS_CHECK(cross_backward(m, n, first_cross, ready, arg));
  interact_backward(m, n);
  m->have_dbottom = 1;
  return GS_OK;
}

gs_status gs_dlrm_backward_bottom(gs_dlrm *m, gs_dlrm_grad_ready_fn ready, void *arg) {
  if (!m->have_dbottom)
    return gs_error(GS_ERR_STATE, "DLRM: backward_bottom without backward_top");
  m->have_dbottom = 0;
  memcpy(m->scratch[0], m->dbottom, m->n * m->D * sizeof(float));
  GS_CHECK(mlp_backward(m, m->bot, m->nbot, m->dense, m->n, m->scratch[0], NULL, 0, ready,
                        arg));
  m->have_backward = 1;
  return GS_OK;
}

gs_status gs_dlrm_backward(gs_dlrm *m, const float *dlogits) {
  GS_CHECK(gs_dlrm_backward_top(m, dlogits, NULL, NULL));
  return gs_dlrm_backward_bottom(m, NULL, NULL);
}

/* ---- Updates --------------------------------------------------------------- */

gs_status gs_dlrm_update_embed(gs_dlrm *m, const gs_dlrm_batch *b, const gs_embed_optim *opt) {
  GS_CHECK(check_batch(m, b));
  if (m->T > 0 && m->tables[0].weights == NULL)
    return gs_error(GS_ERR_STATE, "DLRM: update_embed on a model whose tables are sharded "
                    "(gs_dlrm_dist_* update them)");
  if (!m->have_backward || b->n != m->n)
    return gs_error(GS_ERR_STATE, "DLRM: update_embed of %zu samples needs the backward of "
                    "the same batch", b->n);
  size_t stride = m->T * m->D;
  for (size_t t = 0; t < m->T; t++) {
    gs_embed_bags bags = dlrm_batch_bags(b, t);
    GS_CHECK(gs_embed_backward_update(&m->tables[t], &bags, GS_EMBED_SUM, m->dpooled, stride,
                                      t * m->D, opt, &m->work));
  }
  return GS_OK;
}

void gs_dlrm_update_mlp(gs_dlrm *m, float lr) {
  float *restrict w = m->weights;
  const float *restrict g = m->grads;
  for (size_t k = 0; k < m->nweights; k++) w[k] -= lr * g[k];
}

gs_status gs_dlrm_train_step(gs_dlrm *m, const gs_dlrm_batch *b, const gs_dlrm_optim *opt,
                             float *loss, float *logits) {
  if (opt == NULL) return gs_error(GS_ERR_INVALID_ARG, "DLRM: train step: NULL optimizer");
  GS_CHECK(gs_dlrm_forward(m, b, m->logits));
  double l;
  GS_CHECK(gs_dlrm_bce_with_logits(m->logits, b->labels, b->n, &l, m->dlogits));
  GS_CHECK(gs_dlrm_backward(m, m->dlogits));
  GS_CHECK(gs_dlrm_update_embed(m, b, &opt->embed));
  gs_dlrm_update_mlp(m, opt->mlp_lr);
  if (loss) *loss = (float)l;
  if (logits) memcpy(logits, m->logits, b->n * sizeof(float));
  return GS_OK;
}

/* ---- Loss ------------------------------------------------------------------ */

gs_status gs_dlrm_bce_with_logits(const float *logits, const float *labels, size_t n,
                                  double *loss, float *dlogits) {
  if (logits == NULL || labels == NULL || loss == NULL || n == 0)
    return gs_error(GS_ERR_INVALID_ARG, "binary cross-entropy: NULL input or %zu samples", n);
  double sum;
  GS_CHECK(dlrm_bce(logits, labels, n, (double)n, 0, &sum, dlogits));
  *loss = sum / (double)n;
  return GS_OK;
}

gs_status dlrm_bce(const float *logits, const float *labels, size_t n, double denom,
                   size_t first_sample, double *loss_sum, float *dlogits) {
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    double z = logits[i], y = labels[i];
    if (!(y >= 0.0 && y <= 1.0))
      return gs_error(GS_ERR_INVALID_ARG, "binary cross-entropy: sample %zu has label %g (a "
                      "label in [0, 1] expected)", first_sample + i, y);
    if (!isfinite(z))
      return gs_error(GS_ERR_INVALID_ARG, "binary cross-entropy: sample %zu has logit %g (a "
                      "finite logit expected; a model that diverged gives it: a learning rate "
                      "too large?)", first_sample + i, z);
    sum += (z > 0 ? z : 0) - z * y + log1p(exp(-fabs(z)));
    if (dlogits) {
      double p = z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
      dlogits[i] = (float)((p - y) / denom);
    }
  }
  *loss_sum = sum;
  return GS_OK;
}
