/*
 * "sidco:D[:exp|gpareto|gamma]": SIDCo (Abdelmoniem et al., "An Efficient
 * Statistical-based Gradient Compression Technique for Distributed Training
 * Systems", MLSys 2021). The threshold comes from a distribution fitted to
 * |p| instead of a selection: with M stages, stage 1 fits all of |p| and
 * targets the density delta^(1/M); each later stage fits the exceedances of
 * the previous threshold, shifted by it (peaks over threshold), and targets
 * delta^(1/M) of them, so the product is delta. The fits, as in the
 * authors' compression.py:
 *   exponential   eta = -mean * ln(delta_i)
 *   gen. Pareto   k = (mu^2/sigma^2 - 1)/2, alpha = mu (mu^2/sigma^2 + 1)/2,
 *                 eta = alpha (1 - delta_i^k) / k   (method of moments)
 *   gamma         s = ln(mean) - mean(ln a), shape = (3 - s +
 *                 sqrt((s-3)^2 + 24 s)) / (12 s), scale = mean / shape,
 *                 eta = scale * P^-1(shape, 1 - delta_i)   (stage 1 only;
 *                 later stages use the generalised Pareto fit)
 * "exp" (the default) uses the exponential fit at every stage.
 * Each stage is one pass over p; one more collects the selection. The
 * number of stages adapts: when the achieved count is off the target by
 * more than 2x, M grows (up to 5), as SIDCo adapts its stage count to the
 * ratio of achieved to target density. More than 2k entries (a badly fitted
 * tail) fall back to the exact top k, so the payload is at most 2k pairs;
 * the count varies by rank and step.
 */
#include <math.h>

#include "compress_internal.h"

enum { FIT_EXP = 0, FIT_GPARETO, FIT_GAMMA };

typedef struct {
  int stages;
} sidco_priv;

static size_t sidco_bytes(const gs_compressor *c, const gs_compress_state *st,
                          size_t n, int round, double d) {
  (void)c, (void)st, (void)round;
  size_t most = 2 * gs__density_k(n, d);
  return 8 * (most < n ? most : n);
}

static gs_status sidco_init(gs_compress_state *st) {
  sidco_priv *s = gs_calloc(1, sizeof *s);
  if (s == NULL) return GS_ERR_NOMEM;
  s->stages = st->c->param < 0.01 ? 2 : 1;
  st->priv = s;
  return GS_OK;
}

static void sidco_fini(gs_compress_state *st) { gs_free(st->priv); }

/* The stage count is memory: it only grows as fits miss, and a resumed run
 * that started again from the initial count would select differently. */
static uint32_t sidco_adapt_get(const gs_compress_state *st) {
  return (uint32_t)((const sidco_priv *)st->priv)->stages;
}

static void sidco_adapt_set(gs_compress_state *st, uint32_t v) {
  ((sidco_priv *)st->priv)->stages = (int)v;
}

/* The regularised lower incomplete gamma function P(a, x) (series for
 * x < a + 1, Lentz's continued fraction otherwise; Numerical Recipes 6.2). */
static double gamma_p(double a, double x) {
  if (x <= 0) return 0;
  const double lg = lgamma(a);
  if (x < a + 1) {
    double term = 1 / a, sum = term;
    for (int i = 1; i < 500; i++) {
      term *= x / (a + i);
      sum += term;
      if (fabs(term) < fabs(sum) * 1e-15) break;
    }
    return sum * exp(-x + a * log(x) - lg);
  }
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 500; i++) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (fabs(del - 1) < 1e-15) break;
  }
  return 1 - exp(-x + a * log(x) - lg) * h;
}

/* x with P(a, x) = p, by bisection on a bracket grown geometrically. */
static double gamma_p_inv(double a, double p) {
  double lo = 0, hi = a + 1;
  while (gamma_p(a, hi) < p && hi < 1e300) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
    const double mid = 0.5 * (lo + hi);
    if (gamma_p(a, mid) < p) lo = mid;
    else hi = mid;
  }
  return 0.5 * (lo + hi);
}

/* Statistics of (|p_i| - t) over the entries with |p_i| > t (t < 0: all,
 * unshifted). */
typedef struct {
  size_t count, npos;
  double sum, sumsq, sumlog, sumpos;
} tail_stats;

static tail_stats stats_above(const float *p, size_t n, double t, int logs) {
  tail_stats s = {0};
  const double shift = t < 0 ? 0 : t;
  for (size_t i = 0; i < n; i++) {
    const double a = fabsf(p[i]);
    if (t >= 0 && !(a > t)) continue;
    const double y = a - shift;
    s.count++;
    s.sum += y;
    s.sumsq += y * y;
    if (logs && y > 0) {
      s.npos++;
      s.sumpos += y;
      s.sumlog += log(y);
    }
  }
  return s;
}

/* The threshold above the shift that a fraction delta of the exceedances
 * pass, from the fit `fit`. */
static double fit_eta(const tail_stats *s, double delta, int fit) {
  if (s->count == 0) return 0;
  const double mu = s->sum / (double)s->count;
  if (fit == FIT_GAMMA && s->npos > 1) {
    const double mpos = s->sumpos / (double)s->npos;
    const double sl = log(mpos) - s->sumlog / (double)s->npos;
    if (sl > 0) {
      const double shape = (3 - sl + sqrt((sl - 3) * (sl - 3) + 24 * sl)) / (12 * sl);
      const double scale = mpos / shape;
      return scale * gamma_p_inv(shape, 1 - delta);
    }
  }
  if (fit != FIT_EXP) {
    const double var = s->sumsq / (double)s->count - mu * mu;
    if (var > 0) {
      const double r = mu * mu / var;
      const double k = 0.5 * (r - 1), alpha = 0.5 * mu * (r + 1);
      if (fabs(k) > 1e-6) return alpha * (1 - pow(delta, k)) / k;
      return -alpha * log(delta);
    }
  }
  return -mu * log(delta);
}

static gs_status sidco_compress(gs_compress_state *st, const float *p,
                                void *payload, size_t cap, size_t *bytes) {
  sidco_priv *sp = st->priv;
  const size_t n = st->n, k = gs__density_k(n, st->density);
  uint32_t *idx = payload;
  if (k == 0) {
    *bytes = 0;
    return GS_OK;
  }
  const int M = sp->stages;
  const double delta_i = pow(st->density, 1.0 / M);
  double t = -1;
  for (int stage = 0; stage < M; stage++) {
    const int fit = stage == 0 ? st->c->variant
                               : (st->c->variant == FIT_EXP ? FIT_EXP : FIT_GPARETO);
    const tail_stats s = stats_above(p, n, t, fit == FIT_GAMMA);
    if (s.count == 0) break;
    t = (t < 0 ? 0 : t) + fit_eta(&s, delta_i, fit);
  }
  size_t count = 0;
  (void)cap;
  const size_t most = gs_compress_capacity(st, 0) / 8;
  for (size_t i = 0; i < n; i++) {
    if (fabsf(p[i]) >= t) {
      if (count == most) {
        count = most + 1;
        break;
      }
      idx[count++] = (uint32_t)i;
    }
  }
  if (count > most || count == 0) {
    /* The fit missed (more than 2k, or nothing): the exact top k. */
    GS_CHECK(gs__topk_exact(p, n, k, idx));
    count = k;
    if (sp->stages < 5) sp->stages++;
  } else if ((double)count < 0.5 * (double)k || (double)count > 2.0 * (double)k) {
    if (sp->stages < 5) sp->stages++;
  }
  float *val = (float *)(void *)(idx + count);
  for (size_t i = 0; i < count; i++) val[i] = p[idx[i]];
  *bytes = 8 * count;
  return GS_OK;
}

static gs_status sidco_decompress_add(gs_compress_state *st, const void *payload,
                                      size_t bytes, float *out, float alpha) {
  return gs__sparse_add(st, payload, bytes, out, alpha);
}

const gs_compress_kind gs__kind_sidco = {
    .name = "sidco", .param = GS_PARAM_DENSITY, .exchange = GS_EXCHANGE_SPARSE,
    .rounds = 1, .fixed_size = 0, .cbytes = 32, .dbytes = 0,
    .payload_bytes = sidco_bytes, .init = sidco_init, .fini = sidco_fini,
    .adapt_get = sidco_adapt_get, .adapt_set = sidco_adapt_set, .adapt_max = 5,
    .compress = sidco_compress, .decompress_add = sidco_decompress_add};
