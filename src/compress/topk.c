/*
 * "topk:D" and "gtopk:D": the k = D*n entries of largest |p| (exact
 * selection, gs_topk_f32's "exact"), sent as (index, value) pairs (Aji &
 * Heafield, "Sparse Communication for Distributed Gradient Descent", EMNLP
 * 2017). With error feedback the residual keeps everything not sent.
 *
 * topk selects within each tensor of a fused message when told its tensors
 * (gs_compress_set_segments). gtopk selects over the whole message: its
 * global merge keeps the k largest of all, whatever the tensors.
 *
 * gtopk compresses locally exactly as topk; what differs is the exchange:
 * gTop-k's tree merge (Shi et al., ICDCS 2019) keeps only the global top k
 * and hands the entries this rank sent but the merge dropped back to
 * gs_compress_return.
 */
#include "compress_internal.h"

gs_status gs__topk_compress_with(gs_compress_state *st, const float *p,
                                 void *payload, size_t *bytes, int mstopk) {
  size_t one[2];
  const size_t *seg;
  const size_t nseg = gs__segments(st, one, &seg);
  uint32_t *idx = payload;
  size_t k = 0; /* pairs so far */
  /* Each segment's own top k_s, its indices shifted to the message's. */
  for (size_t s = 0; s < nseg; s++) {
    const size_t off = seg[s], ns = seg[s + 1] - off;
    const size_t ks = gs__density_k(ns, st->density);
    GS_CHECK(mstopk ? gs__topk_mstopk(p + off, ns, ks, idx + k)
                    : gs__topk_exact(p + off, ns, ks, idx + k));
    for (size_t i = k; i < k + ks; i++) idx[i] += (uint32_t)off;
    k += ks;
  }
  float *val = (float *)(void *)(idx + k);
  for (size_t i = 0; i < k; i++) val[i] = p[idx[i]];
  *bytes = 8 * k;
  return GS_OK;
}

static gs_status topk_compress(gs_compress_state *st, const float *p,
                               void *payload, size_t cap, size_t *bytes) {
  (void)cap;
  return gs__topk_compress_with(st, p, payload, bytes, 0);
}

static gs_status topk_decompress_add(gs_compress_state *st, const void *payload,
                                     size_t bytes, float *out, float alpha) {
  return gs__sparse_add(st, payload, bytes, out, alpha);
}

/* Selection reads p about twice (4 B + 4 B per element) and updates the
 * residual (e += g: 12 B); decompressing touches only k entries. */
const gs_compress_kind gs__kind_topk = {
    .name = "topk", .param = GS_PARAM_DENSITY, .exchange = GS_EXCHANGE_SPARSE,
    .rounds = 1, .fixed_size = 1, .warmup = 1, .segmented = 1, .cbytes = 20,
    .dbytes = 0,
    .payload_bytes = gs__sparse_bytes, .compress = topk_compress,
    .decompress_add = topk_decompress_add};

const gs_compress_kind gs__kind_gtopk = {
    .name = "gtopk", .param = GS_PARAM_DENSITY, .exchange = GS_EXCHANGE_SPARSE,
    .rounds = 1, .fixed_size = 1, .cbytes = 20, .dbytes = 0,
    .payload_bytes = gs__sparse_bytes, .compress = topk_compress,
    .decompress_add = topk_decompress_add};
