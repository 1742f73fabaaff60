/*
 * "none": the gradient itself, all-reduced as f32. The reference every other
 * compressor is compared with (N ranks with "none" equal dense training).
 */
#include <string.h>

#include "compress_internal.h"

static size_t none_bytes(const gs_compressor *c, const gs_compress_state *st,
                         size_t n, int round, double d) {
  (void)c, (void)st, (void)round, (void)d;
  return 4 * n;
}

static gs_status none_compress(gs_compress_state *st, const float *p,
                               void *payload, size_t cap, size_t *bytes) {
  (void)cap;
  memcpy(payload, p, st->n * sizeof *p);
  *bytes = st->n * sizeof *p;
  return GS_OK;
}

static gs_status none_decompress_add(gs_compress_state *st, const void *payload,
                                     size_t bytes, float *out, float alpha) {
  if (bytes != 4 * st->n)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor none: payload of %zu bytes, expected %zu", bytes,
                    4 * st->n);
  const float *v = payload;
  for (size_t i = 0; i < st->n; i++) out[i] += alpha * v[i];
  return GS_OK;
}

const gs_compress_kind gs__kind_none = {
    .name = "none", .param = GS_PARAM_NONE, .exchange = GS_EXCHANGE_DENSE,
    .dense_dtype = GS_F32, .rounds = 1, .lossless = 1, .fixed_size = 1,
    .cbytes = 8, .dbytes = 12, .payload_bytes = none_bytes,
    .compress = none_compress, .decompress_add = none_decompress_add};
