/*
 * "qsgd:S[:B]": QSGD (Alistarh et al., NeurIPS 2017, Sec. 3.1) with s = S
 * levels in buckets of B elements (default 512, as in their experiments; 0:
 * one bucket for the whole message): Q(p_i) = ||p_b||_2 * sign(p_i) *
 * xi_i / s, where p_b is p_i's bucket and xi_i is l or l+1 (l = floor(s
 * |p_i| / ||p_b||_2)) by stochastic rounding, so E[Q(p)] = p, with variance
 * at most min(B/s^2, sqrt(B)/s) ||p||^2 (their Lemma 3.1 per bucket).
 * Codes are int8 for s <= 127 (GRACE sends int8 below 128) and int16 up to
 * 32767; the rounding stream is seeded by (seed, rank, step).
 * Under error feedback an unbiased quantizer whose variance exceeds the
 * signal (omega = E||Q(p) - p||^2 / ||p||^2 >= 1) makes the residual grow
 * every step, so each bucket is sent scaled by 1 / (1 + omega_b), with
 * omega_b that draw's own rounding variance: Q / (1 + omega) is a
 * contraction (Stich and Karimireddy, 2020; Karimireddy et al., ICML 2019,
 * Remark 1), so the residual stays bounded. Without error feedback it is
 * sent unscaled and stays unbiased.
 * Payload (opaque.h): header, a norm per bucket, then n codes.
 */
#include <float.h>
#include <math.h>

#include "opaque.h"

static size_t qsgd_width(const gs_compressor *c) { return c->param <= 127 ? 1 : 2; }

static size_t qsgd_bytes(const gs_compressor *c, const gs_compress_state *st,
                         size_t n, int round, double d) {
  (void)st, (void)round, (void)d;
  return gs__opaque_bytes(n, c->bucket, qsgd_width(c) * n);
}

static gs_status qsgd_compress(gs_compress_state *st, const float *p,
                               void *payload, size_t cap, size_t *bytes) {
  (void)cap;
  const size_t n = st->n, B = st->c->bucket;
  const float s = (float)st->c->param;
  gs__opaque_put(payload, n, B);
  float *norms = gs__opaque_scales(payload);
  unsigned char *codes = gs__opaque_codes(payload, n, B);
  uint64_t rng = gs__rank_stream(st);
  const int wide = qsgd_width(st->c) == 2;
  for (size_t b = 0, nb = gs__opaque_nb(n, B); b < nb; b++) {
    size_t lo, hi;
    gs__opaque_range(n, B, b, &lo, &hi);
    double ss = 0;
    for (size_t i = lo; i < hi; i++) ss += (double)p[i] * p[i];
    /* The scale is a float: a bucket whose norm passes FLT_MAX is coded
     * against FLT_MAX, so its largest elements saturate at s levels (error
     * feedback keeps the rest) rather than decode to inf * 0. */
    const double nd = sqrt(ss);
    const float norm = nd > FLT_MAX ? FLT_MAX : (float)nd;
    double var = 0; /* sum of f (1 - f): the rounding variance in units^2 */
    for (size_t i = lo; i < hi; i++) {
      int q = 0;
      if (norm > 0) {
        /* |p_i| / norm <= 1 first: s |p_i| may overflow. */
        const float r = fminf(fabsf(p[i]) / norm, 1.0f) * s;
        float l = floorf(r);
        const double f = r - l;
        var += f * (1 - f);
        if (gs__rand_unit(&rng) < r - l) l += 1;
        if (l > s) l = s;
        q = p[i] < 0 ? -(int)l : (int)l;
      }
      if (wide) {
        int16_t v = (int16_t)q;
        memcpy(codes + 2 * i, &v, 2);
      } else {
        codes[i] = (unsigned char)(int8_t)q;
      }
    }
    /* omega_b = var * (norm / s)^2 / norm^2 */
    const double omega = var / ((double)s * s);
    norms[b] = st->opts.error_feedback && norm > 0 ? (float)(norm / (1 + omega)) : norm;
  }
  *bytes = qsgd_bytes(st->c, st, n, 0, 0);
  return GS_OK;
}

static gs_status qsgd_decompress_add(gs_compress_state *st, const void *payload,
                                     size_t bytes, float *out, float alpha) {
  const size_t n = st->n, B = st->c->bucket;
  GS_CHECK(gs__opaque_check(st, payload, bytes, qsgd_bytes(st->c, st, n, 0, 0)));
  const float *norms = gs__opaque_scales((void *)payload);
  const unsigned char *codes = gs__opaque_codes((void *)payload, n, B);
  const int wide = qsgd_width(st->c) == 2;
  for (size_t b = 0, nb = gs__opaque_nb(n, B); b < nb; b++) {
    size_t lo, hi;
    gs__opaque_range(n, B, b, &lo, &hi);
    const float unit = alpha * norms[b] / (float)st->c->param;
    if (wide) {
      for (size_t i = lo; i < hi; i++) {
        int16_t v;
        memcpy(&v, codes + 2 * i, 2);
        out[i] += unit * (float)v;
      }
    } else {
      for (size_t i = lo; i < hi; i++) out[i] += unit * (float)(int8_t)codes[i];
    }
  }
  return GS_OK;
}

const gs_compress_kind gs__kind_qsgd = {
    .name = "qsgd", .param = GS_PARAM_INT, .pmin = 1, .pmax = 32767,
    .exchange = GS_EXCHANGE_OPAQUE, .rounds = 1, .fixed_size = 1, .bucketed = 1,
    .cbytes = 25, .dbytes = 9, .payload_bytes = qsgd_bytes,
    .compress = qsgd_compress, .decompress_add = qsgd_decompress_add};
