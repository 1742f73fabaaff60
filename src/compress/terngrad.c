/*
 * "terngrad": TernGrad (Wen et al., NeurIPS 2017): values clipped to 2.5
 * standard deviations (their Sec. 3.3), s = max |clipped p|, and each
 * element sent as s * sign(p_i) * b_i with b_i ~ Bernoulli(|p_i| / s): an
 * unbiased estimate of the clipped tensor in 2 bits per element. The
 * Bernoulli stream is seeded by (seed, rank, step).
 * Payload: header (n, s), then 2-bit codes, four per byte (0: 0, 1: +s,
 * 2: -s).
 */
#include <math.h>

#include "opaque.h"

static size_t terngrad_bytes(const gs_compressor *c, const gs_compress_state *st,
                             size_t n, int round, double d) {
  (void)c, (void)st, (void)round, (void)d;
  return sizeof(gs_opaque_header) + (n + 3) / 4;
}

static gs_status terngrad_compress(gs_compress_state *st, const float *p,
                                   void *payload, size_t cap, size_t *bytes) {
  (void)cap;
  const size_t n = st->n;
  double sum = 0, ss = 0;
  for (size_t i = 0; i < n; i++) {
    sum += p[i];
    ss += (double)p[i] * p[i];
  }
  const double mean = n ? sum / (double)n : 0;
  const double var = n ? ss / (double)n - mean * mean : 0;
  const float clip = (float)(2.5 * sqrt(var > 0 ? var : 0));
  float s = 0;
  for (size_t i = 0; i < n; i++) s = fmaxf(s, fminf(fabsf(p[i]), clip));
  gs__opaque_put(payload, n, s);
  unsigned char *codes = (unsigned char *)payload + sizeof(gs_opaque_header);
  memset(codes, 0, (n + 3) / 4);
  uint64_t rng = gs__rank_stream(st);
  for (size_t i = 0; i < n; i++) {
    const float a = fminf(fabsf(p[i]), clip);
    if (s > 0 && gs__rand_unit(&rng) < a / s)
      codes[i / 4] |= (unsigned char)((p[i] < 0 ? 2u : 1u) << (2 * (i % 4)));
  }
  *bytes = terngrad_bytes(st->c, st, n, 0, 0);
  return GS_OK;
}

static gs_status terngrad_decompress_add(gs_compress_state *st,
                                         const void *payload, size_t bytes,
                                         float *out, float alpha) {
  float s = 0;
  GS_CHECK(gs__opaque_get(st, payload, bytes,
                          terngrad_bytes(st->c, st, st->n, 0, 0), &s));
  const unsigned char *codes = (const unsigned char *)payload + sizeof(gs_opaque_header);
  const float v[4] = {0, alpha * s, -alpha * s, 0};
  for (size_t i = 0; i < st->n; i++) out[i] += v[(codes[i / 4] >> (2 * (i % 4))) & 3u];
  return GS_OK;
}

const gs_compress_kind gs__kind_terngrad = {
    .name = "terngrad", .param = GS_PARAM_NONE, .exchange = GS_EXCHANGE_OPAQUE,
    .rounds = 1, .fixed_size = 1, .cbytes = 25, .dbytes = 8.25,
    .payload_bytes = terngrad_bytes, .compress = terngrad_compress,
    .decompress_add = terngrad_decompress_add};
