/*
 * "efsignsgd": EF-signSGD (Karimireddy et al., ICML 2019, Algorithm 1):
 * C(p) = (||p||_1 / n) * sign(p), one bit per element plus the scale, with
 * the error feedback of the generic layer. sign(0) is sent as +.
 * Payload: header (n, ||p||_1 / n), then n bits, bit i of byte i/8 set for
 * a negative value.
 */
#include <math.h>

#include "opaque.h"

static size_t efsign_bytes(const gs_compressor *c, const gs_compress_state *st,
                           size_t n, int round, double d) {
  (void)c, (void)st, (void)round, (void)d;
  return sizeof(gs_opaque_header) + (n + 7) / 8;
}

static gs_status efsign_compress(gs_compress_state *st, const float *p,
                                 void *payload, size_t cap, size_t *bytes) {
  (void)cap;
  const size_t n = st->n;
  double l1 = 0;
  for (size_t i = 0; i < n; i++) l1 += fabsf(p[i]);
  gs__opaque_put(payload, n, n ? (float)(l1 / (double)n) : 0.0f);
  unsigned char *bits = (unsigned char *)payload + sizeof(gs_opaque_header);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    unsigned b = 0;
    for (unsigned j = 0; j < 8; j++) b |= (unsigned)(p[i + j] < 0) << j;
    bits[i / 8] = (unsigned char)b;
  }
  if (i < n) {
    unsigned b = 0;
    for (unsigned j = 0; i + j < n; j++) b |= (unsigned)(p[i + j] < 0) << j;
    bits[i / 8] = (unsigned char)b;
  }
  *bytes = efsign_bytes(st->c, st, n, 0, 0);
  return GS_OK;
}

static gs_status efsign_decompress_add(gs_compress_state *st, const void *payload,
                                       size_t bytes, float *out, float alpha) {
  float scale = 0;
  GS_CHECK(gs__opaque_get(st, payload, bytes, efsign_bytes(st->c, st, st->n, 0, 0),
                          &scale));
  const unsigned char *bits = (const unsigned char *)payload + sizeof(gs_opaque_header);
  const float v[2] = {alpha * scale, -alpha * scale};
  for (size_t i = 0; i < st->n; i++) out[i] += v[(bits[i / 8] >> (i % 8)) & 1u];
  return GS_OK;
}

const gs_compress_kind gs__kind_efsignsgd = {
    .name = "efsignsgd", .param = GS_PARAM_NONE, .exchange = GS_EXCHANGE_OPAQUE,
    .rounds = 1, .fixed_size = 1, .cbytes = 24, .dbytes = 8.125,
    .payload_bytes = efsign_bytes, .compress = efsign_compress,
    .decompress_add = efsign_decompress_add};
