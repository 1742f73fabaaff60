/*
 * "fp16": each value rounded to nearest even in IEEE binary16 (Horovod's and DDP's fp16_compress_hook). Values beyond the
 * largest finite half (65504) saturate to it rather than becoming infinite, so
 * that the residual stays finite under error feedback.
 * The payload is all-reduced as fp16 (the reduction widens to f32 and rounds
 * back); the conversions are core's (src/core/dtype.c).
 */
#include "compress_internal.h"

static size_t fp16_bytes(const gs_compressor *c, const gs_compress_state *st,
                         size_t n, int round, double d) {
  (void)c, (void)st, (void)round, (void)d;
  return 2 * n;
}

static gs_status fp16_compress(gs_compress_state *st, const float *p,
                               void *payload, size_t cap, size_t *bytes) {
  (void)cap;
  uint16_t *h = payload;
  for (size_t i = 0; i < st->n; i++) {
    float v = p[i];
    if (v > 65504.0f) v = 65504.0f;
    if (v < -65504.0f) v = -65504.0f;
    h[i] = gs_f32_to_f16(v);
  }
  *bytes = 2 * st->n;
  return GS_OK;
}

static gs_status fp16_decompress_add(gs_compress_state *st, const void *payload,
                                     size_t bytes, float *out, float alpha) {
  if (bytes != 2 * st->n)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor fp16: payload of %zu bytes, expected %zu", bytes,
                    2 * st->n);
  const uint16_t *h = payload;
  for (size_t i = 0; i < st->n; i++) out[i] += alpha * gs_f16_to_f32(h[i]);
  return GS_OK;
}

const gs_compress_kind gs__kind_fp16 = {
    .name = "fp16", .param = GS_PARAM_NONE, .exchange = GS_EXCHANGE_DENSE,
    .dense_dtype = GS_F16, .rounds = 1, .fixed_size = 1,
    .cbytes = 22, .dbytes = 10, .payload_bytes = fp16_bytes,
    .compress = fp16_compress, .decompress_add = fp16_decompress_add};
