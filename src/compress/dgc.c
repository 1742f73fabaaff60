/*
 * "dgc:D": Deep Gradient Compression (Lin et al., ICLR 2018), its four
 * parts:
 *   - local gradient clipping (Sec. 3.2): g is scaled down to the norm
 *     clip_norm / sqrt(nranks) when larger (opts.clip_norm; 0: off);
 *   - momentum correction (Sec. 3.2, Eq. 6): u <- m u + g; v <- v + u, and
 *     the selection is over v (so the optimizer must not add momentum);
 *   - momentum factor masking (Sec. 3.2): u and v are zeroed where sent;
 *   - exponential density warm-up (Sec. 3.3) over opts.warmup_steps.
 * The threshold comes from a strided 1% sample of |v| (at least 64
 * entries): its k_sample-th largest value. Then, as in the authors' code, up
 * to 10 rounds lower it by 0.7x while fewer than 0.8k entries pass; where
 * more than 1.3k pass the exact top k is sent instead. The count therefore
 * varies between ranks and steps (fixed_size = 0): at most 1.3k + 1.
 * v is the residual (gs_compress_residual); without error feedback v is
 * cleared after every step and the unsent momentum is all that carries
 * over.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "compress_internal.h"

typedef struct {
  float *u;      /* momentum */
  float *vbuf;   /* v when error feedback is off (cleared every step) */
} dgc_priv;

static size_t dgc_bytes(const gs_compressor *c, const gs_compress_state *st,
                        size_t n, int round, double d) {
  (void)c, (void)st, (void)round;
  const size_t k = gs__density_k(n, d);
  size_t most = (size_t)(1.3 * (double)k) + 1;
  if (most > n) most = n;
  return 8 * most;
}

static gs_status dgc_init(gs_compress_state *st) {
  dgc_priv *d = gs_calloc(1, sizeof *d);
  if (d == NULL) return GS_ERR_NOMEM;
  st->priv = d;
  const size_t n = st->n ? st->n : 1;
  d->u = gs_calloc(n, sizeof *d->u);
  float *v = gs_calloc(n, sizeof *v);
  if (st->opts.error_feedback) st->residual = v;
  else d->vbuf = v;
  if (d->u == NULL || v == NULL) return GS_ERR_NOMEM;
  return GS_OK;
}

static void dgc_fini(gs_compress_state *st) {
  dgc_priv *d = st->priv;
  if (d == NULL) return;
  gs_free(d->u);
  gs_free(d->vbuf);
  gs_free(st->residual);
  st->residual = NULL;
  gs_free(d);
}

static size_t count_at_least(const float *v, size_t n, float t) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += fabsf(v[i]) >= t;
  return c;
}

static gs_status dgc_compress(gs_compress_state *st, const float *g,
                              void *payload, size_t cap, size_t *bytes) {
  dgc_priv *d = st->priv;
  const size_t n = st->n;
  float *u = d->u, *v = st->residual ? st->residual : d->vbuf;
  float scale = 1.0f;
  if (st->opts.clip_norm > 0) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)g[i] * g[i];
    const double limit = st->opts.clip_norm / sqrt((double)st->opts.nranks);
    if (sqrt(ss) > limit) scale = (float)(limit / sqrt(ss));
  }
  const float m = st->opts.momentum;
  /* u and v may overflow where g did not: refused before either changes
   * (gs_compress refuses a g that is not finite). */
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    const float ui = m * u[i] + scale * g[i];
    bad |= !(fabsf(ui) <= FLT_MAX) | !(fabsf(v[i] + ui) <= FLT_MAX);
  }
  for (size_t i = 0; bad && i < n; i++) {
    const float ui = m * u[i] + scale * g[i];
    if (!(fabsf(ui) <= FLT_MAX) || !(fabsf(v[i] + ui) <= FLT_MAX))
      return gs_error(GS_ERR_INVALID_ARG, "gs_compress (compressor %s): grad[%zu] "
                      "(%g) overflows float in the %s; the state is unchanged",
                      st->c->spec, i, (double)g[i],
                      !(fabsf(ui) <= FLT_MAX) ? "momentum" : "accumulated gradient");
  }
  for (size_t i = 0; i < n; i++) {
    u[i] = m * u[i] + scale * g[i];
    v[i] += u[i];
  }
  const size_t k = gs__density_k(n, st->density);
  uint32_t *idx = payload;
  size_t count = 0;
  if (k > 0) {
    /* The sampled threshold. */
    size_t ns = n / 100;
    if (ns < 64) ns = n < 64 ? n : 64;
    const size_t stride = n / ns;
    float *sample = gs_malloc(ns * sizeof *sample);
    uint32_t *sidx = gs_malloc(ns * sizeof *sidx);
    if (sample == NULL || sidx == NULL) {
      gs_free(sample);
      gs_free(sidx);
      return GS_ERR_NOMEM;
    }
    for (size_t i = 0; i < ns; i++) sample[i] = v[i * stride];
    const size_t ks = gs__density_k(ns, st->density);
    gs_status s = gs__topk_exact(sample, ns, ks, sidx);
    float thr = INFINITY;
    for (size_t i = 0; i < ks && s == GS_OK; i++) thr = fminf(thr, fabsf(sample[sidx[i]]));
    gs_free(sample);
    gs_free(sidx);
    GS_CHECK(s);
    count = count_at_least(v, n, thr);
    for (int round = 0; round < 10 && (double)count < 0.8 * (double)k && thr > 0;
         round++) {
      thr *= 0.7f;
      count = count_at_least(v, n, thr);
    }
    if ((double)count > 1.3 * (double)k || 8 * count > cap) {
      GS_CHECK(gs__topk_exact(v, n, k, idx));
      count = k;
    } else {
      size_t j = 0;
      for (size_t i = 0; i < n; i++)
        if (fabsf(v[i]) >= thr) idx[j++] = (uint32_t)i;
    }
  }
  float *val = (float *)(void *)(idx + count);
  for (size_t i = 0; i < count; i++) {
    val[i] = v[idx[i]];
    v[idx[i]] = 0;   /* sent: the accumulation restarts here */
    u[idx[i]] = 0;   /* momentum factor masking */
  }
  if (st->residual == NULL) memset(v, 0, n * sizeof *v);
  *bytes = 8 * count;
  return GS_OK;
}

static gs_status dgc_decompress_add(gs_compress_state *st, const void *payload,
                                    size_t bytes, float *out, float alpha) {
  return gs__sparse_add(st, payload, bytes, out, alpha);
}

static float *dgc_momentum(const gs_compress_state *st) {
  const dgc_priv *d = st->priv;
  return d->u;
}

const gs_compress_kind gs__kind_dgc = {
    .name = "dgc", .param = GS_PARAM_DENSITY, .exchange = GS_EXCHANGE_SPARSE,
    .rounds = 1, .fixed_size = 0, .own_ef = 1, .warmup = 1, .own_momentum = 1,
    .cbytes = 36,
    .dbytes = 0, .payload_bytes = dgc_bytes, .init = dgc_init, .fini = dgc_fini,
    .momentum = dgc_momentum, .compress = dgc_compress, .decompress_add = dgc_decompress_add};
