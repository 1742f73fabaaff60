/*
 * "terngrad[:B]": TernGrad (Wen et al., NeurIPS 2017) in buckets of B
 * consecutive elements (default 512; 0: the whole message, their per-layer
 * form when a message is one layer): in each bucket, values clipped to 2.5
 * standard deviations (their Sec. 3.3), s = max |clipped p|, and each
 * element sent as s * sign(p_i) * b_i with b_i ~ Bernoulli(|p_i| / s): an
 * unbiased estimate of the clipped tensor in 2 bits per element. The
 * Bernoulli stream is seeded by (seed, rank, step). Under error feedback
 * each bucket is sent scaled by 1 / (1 + omega_b), omega_b = sum (s a_i -
 * a_i^2) / sum a_i^2 its variance relative to the clipped values a, so that
 * the residual stays bounded (as for QSGD: qsgd.c).
 * Payload (opaque.h): header, s per bucket, then 2-bit codes, four per byte
 * (0: 0, 1: +s, 2: -s).
 */
#include <math.h>

#include "opaque.h"

static size_t terngrad_bytes(const gs_compressor *c, const gs_compress_state *st,
                             size_t n, int round, double d) {
  (void)st, (void)round, (void)d;
  return gs__opaque_bytes(n, c->bucket, (n + 3) / 4);
}

static gs_status terngrad_compress(gs_compress_state *st, const float *p,
                                   void *payload, size_t cap, size_t *bytes) {
  (void)cap;
  const size_t n = st->n, B = st->c->bucket;
  gs__opaque_put(payload, n, B);
  float *scales = gs__opaque_scales(payload);
  unsigned char *codes = gs__opaque_codes(payload, n, B);
  memset(codes, 0, (n + 3) / 4);
  uint64_t rng = gs__rank_stream(st);
  for (size_t b = 0, nb = gs__opaque_nb(n, B); b < nb; b++) {
    size_t lo, hi;
    gs__opaque_range(n, B, b, &lo, &hi);
    double sum = 0, ss = 0;
    for (size_t i = lo; i < hi; i++) {
      sum += p[i];
      ss += (double)p[i] * p[i];
    }
    const double m = (double)(hi - lo), mean = sum / m, var = ss / m - mean * mean;
    const float clip = (float)(2.5 * sqrt(var > 0 ? var : 0));
    float s = 0;
    for (size_t i = lo; i < hi; i++) s = fmaxf(s, fminf(fabsf(p[i]), clip));
    double a1 = 0, a2 = 0;
    for (size_t i = lo; i < hi; i++) {
      const float a = fminf(fabsf(p[i]), clip);
      a1 += a;
      a2 += (double)a * a;
      if (s > 0 && gs__rand_unit(&rng) < a / s)
        codes[i / 4] |= (unsigned char)((p[i] < 0 ? 2u : 1u) << (2 * (i % 4)));
    }
    const double omega = a2 > 0 ? ((double)s * a1 - a2) / a2 : 0;
    scales[b] = st->opts.error_feedback ? (float)(s / (1 + omega)) : s;
  }
  *bytes = terngrad_bytes(st->c, st, n, 0, 0);
  return GS_OK;
}

static gs_status terngrad_decompress_add(gs_compress_state *st,
                                         const void *payload, size_t bytes,
                                         float *out, float alpha) {
  const size_t n = st->n;
  GS_CHECK(gs__opaque_check(st, payload, bytes, terngrad_bytes(st->c, st, n, 0, 0)));
  static const float tern[4] = {0, 1, -1, 0}; /* codes 0, +s, -s */
  gs__opaque_add_codes(payload, n, st->c->bucket, 2, tern, alpha, out);
  return GS_OK;
}

const gs_compress_kind gs__kind_terngrad = {
    .name = "terngrad", .param = GS_PARAM_NONE, .exchange = GS_EXCHANGE_OPAQUE,
    .rounds = 1, .fixed_size = 1, .bucketed = 1, .cbytes = 25, .dbytes = 8.25,
    .payload_bytes = terngrad_bytes, .compress = terngrad_compress,
    .decompress_add = terngrad_decompress_add};
