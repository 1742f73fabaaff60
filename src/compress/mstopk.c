/*
 * "mstopk:D": k = D*n entries chosen by MSTopK's threshold search (Shi et
 * al., MLSys 2021; gs_topk_f32's "mstopk"): exactly k pairs, entries at or
 * above the best threshold found plus a seeded choice just below it. On a
 * GPU the count passes are cheaper than a sort; here they are memory-bound
 * passes (up to 24 of them, fewer when a threshold hits k exactly).
 */
#include "compress_internal.h"

gs_status gs__topk_compress_with(gs_compress_state *st, const float *p,
                                 void *payload, size_t *bytes, int mstopk);

static gs_status mstopk_compress(gs_compress_state *st, const float *p,
                                 void *payload, size_t cap, size_t *bytes) {
  (void)cap;
  return gs__topk_compress_with(st, p, payload, bytes, 1);
}

static gs_status mstopk_decompress_add(gs_compress_state *st, const void *payload,
                                       size_t bytes, float *out, float alpha) {
  return gs__sparse_add(st, payload, bytes, out, alpha);
}

const gs_compress_kind gs__kind_mstopk = {
    .name = "mstopk", .param = GS_PARAM_DENSITY, .exchange = GS_EXCHANGE_SPARSE,
    .rounds = 1, .fixed_size = 1, .warmup = 1, .segmented = 1, .cbytes = 60,
    .dbytes = 0,
    .payload_bytes = gs__sparse_bytes, .compress = mstopk_compress,
    .decompress_add = mstopk_decompress_add};
