/*
 * "efsignsgd[:B]": EF-signSGD (Karimireddy et al., ICML 2019, Algorithm 1):
 * C(p) = (||p_b||_1 / |b|) * sign(p) for each bucket b of B consecutive
 * elements (default 512; 0: the whole message), one bit per element plus a
 * scale per bucket, with the error feedback of the generic layer. The paper
 * scales each layer by its own mean |p|; a message fuses layers, and
 * buckets keep one layer's scale from setting another's. sign(0) is sent
 * as +.
 * Payload (opaque.h): header, a scale per bucket, then n bits, bit i of byte
 * i/8 set for a negative value.
 */
#include <math.h>

#include "opaque.h"

static size_t efsign_bytes(const gs_compressor *c, const gs_compress_state *st,
                           size_t n, int round, double d) {
  (void)st, (void)round, (void)d;
  return gs__opaque_bytes(n, c->bucket, (n + 7) / 8);
}

static gs_status efsign_compress(gs_compress_state *st, const float *p,
                                 void *payload, size_t cap, size_t *bytes) {
  (void)cap;
  const size_t n = st->n, B = st->c->bucket;
  gs__opaque_put(payload, n, B);
  float *scales = gs__opaque_scales(payload);
  for (size_t b = 0, nb = gs__opaque_nb(n, B); b < nb; b++) {
    size_t lo, hi;
    gs__opaque_range(n, B, b, &lo, &hi);
    double l1 = 0;
    for (size_t i = lo; i < hi; i++) l1 += fabsf(p[i]);
    scales[b] = (float)(l1 / (double)(hi - lo));
  }
  unsigned char *bits = gs__opaque_codes(payload, n, B);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    unsigned v = 0;
    for (unsigned j = 0; j < 8; j++) v |= (unsigned)(p[i + j] < 0) << j;
    bits[i / 8] = (unsigned char)v;
  }
  if (i < n) {
    unsigned v = 0;
    for (unsigned j = 0; i + j < n; j++) v |= (unsigned)(p[i + j] < 0) << j;
    bits[i / 8] = (unsigned char)v;
  }
  *bytes = efsign_bytes(st->c, st, n, 0, 0);
  return GS_OK;
}

static gs_status efsign_decompress_add(gs_compress_state *st, const void *payload,
                                       size_t bytes, float *out, float alpha) {
  const size_t n = st->n;
  GS_CHECK(gs__opaque_check(st, payload, bytes, efsign_bytes(st->c, st, n, 0, 0)));
  static const float sign[4] = {1, -1, 0, 0}; /* bit set: negative */
  gs__opaque_add_codes(payload, n, st->c->bucket, 1, sign, alpha, out);
  return GS_OK;
}

const gs_compress_kind gs__kind_efsignsgd = {
    .name = "efsignsgd", .param = GS_PARAM_NONE, .exchange = GS_EXCHANGE_OPAQUE,
    .rounds = 1, .fixed_size = 1, .bucketed = 1, .cbytes = 24, .dbytes = 8.125,
    .payload_bytes = efsign_bytes, .compress = efsign_compress,
    .decompress_add = efsign_decompress_add};
