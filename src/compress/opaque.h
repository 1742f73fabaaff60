/*
 * The opaque payloads of the scaled quantizers (QSGD, TernGrad,
 * EF-signSGD): a header with the element count (to catch a payload decoded
 * against the wrong tensor) and the bucket size, one float scale per bucket
 * of `bucket` consecutive elements (the last one may be shorter; bucket 0:
 * one scale for the whole message), then the codes.
 *
 * Buckets matter because the engine fuses several layers' gradients into one
 * message: one scale over all of them (a norm, a mean |p|) is set by the
 * largest layer and swamps the small ones, and the quantizer's variance
 * grows with the bucket (QSGD's bound is min(b/s^2, sqrt(b)/s) for bucket
 * b; Alistarh et al. use b = 512). Per-bucket scales bound both.
 */
#ifndef GS_COMPRESS_OPAQUE_H
#define GS_COMPRESS_OPAQUE_H

#include <string.h>

#include "compress_internal.h"

typedef struct {
  uint32_t n;
  uint32_t bucket;
} gs_opaque_header;

/* Buckets of n elements. */
static inline size_t gs__opaque_nb(size_t n, size_t bucket) {
  if (n == 0) return 0;
  return bucket == 0 ? 1 : (n + bucket - 1) / bucket;
}

/* The elements of bucket b: [*lo, *hi). */
static inline void gs__opaque_range(size_t n, size_t bucket, size_t b, size_t *lo,
                                    size_t *hi) {
  *lo = bucket == 0 ? 0 : b * bucket;
  *hi = bucket == 0 || *lo + bucket > n ? n : *lo + bucket;
}

/* Payload size for n elements with `code_bytes` bytes of codes. */
static inline size_t gs__opaque_bytes(size_t n, size_t bucket, size_t code_bytes) {
  return sizeof(gs_opaque_header) + 4 * gs__opaque_nb(n, bucket) + code_bytes;
}

static inline float *gs__opaque_scales(void *payload) {
  return (float *)(void *)((unsigned char *)payload + sizeof(gs_opaque_header));
}

static inline unsigned char *gs__opaque_codes(void *payload, size_t n, size_t bucket) {
  return (unsigned char *)payload + sizeof(gs_opaque_header) +
         4 * gs__opaque_nb(n, bucket);
}

static inline void gs__opaque_put(void *payload, size_t n, size_t bucket) {
  gs_opaque_header h = {(uint32_t)n, (uint32_t)bucket};
  memcpy(payload, &h, sizeof h);
}

/* out += alpha * D(payload) for codes of `width` bits (1 or 2), packed
 * little-end first within each byte: element i of bucket b decodes to
 * scale_b * mult[code_i]. */
static inline void gs__opaque_add_codes(const void *payload, size_t n, size_t bucket,
                                        unsigned width, const float mult[4],
                                        float alpha, float *out) {
  const float *scales = gs__opaque_scales((void *)payload);
  const unsigned char *codes = gs__opaque_codes((void *)payload, n, bucket);
  const unsigned mask = (1u << width) - 1u;
  for (size_t b = 0, nb = gs__opaque_nb(n, bucket); b < nb; b++) {
    size_t lo, hi;
    gs__opaque_range(n, bucket, b, &lo, &hi);
    const float a = alpha * scales[b];
    const float v[4] = {a * mult[0], a * mult[1], a * mult[2], a * mult[3]};
    for (size_t i = lo; i < hi; i++)
      out[i] += v[(codes[i * width / 8] >> (i * width % 8)) & mask];
  }
}

/* Checks the payload's size, count and bucket against the state. */
static inline gs_status gs__opaque_check(const gs_compress_state *st,
                                         const void *payload, size_t bytes,
                                         size_t expect) {
  gs_opaque_header h;
  if (bytes != expect)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: payload of %zu bytes, expected %zu for n = %zu",
                    st->c->spec, bytes, expect, st->n);
  memcpy(&h, payload, sizeof h);
  if (h.n != st->n || h.bucket != st->c->bucket)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: payload encodes %u elements in buckets of %u, the "
                    "tensor has %zu in buckets of %zu", st->c->spec, h.n, h.bucket,
                    st->n, st->c->bucket);
  return GS_OK;
}

#endif /* GS_COMPRESS_OPAQUE_H */
