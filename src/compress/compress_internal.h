/*
 * Internal interface of src/compress: the selection kernels and the seeded
 * random numbers the compressors share. Not installed.
 */
#ifndef GS_COMPRESS_INTERNAL_H
#define GS_COMPRESS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/compress.h"
#include "gs_internal.h"

/* gs_topk_f32's two methods without the argument checks (n < 2^32,
 * k <= n, idx has room for k). */
gs_status gs__topk_exact(const float *x, size_t n, size_t k, uint32_t *idx);
gs_status gs__topk_mstopk(const float *x, size_t n, size_t k, uint32_t *idx);

/* SplitMix64 (Steele, Lea & Flood, OOPSLA 2014): a counter-based generator,
 * so a stream is fully determined by its seed. */
static inline uint64_t gs__rand_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Uniform in [0, bound) for bound >= 1 (Lemire's multiply-shift; the bias
 * is below 2^-32 for the bounds used here, under 2^32). */
static inline uint64_t gs__rand_below(uint64_t *s, uint64_t bound) {
  return (uint64_t)(((unsigned __int128)gs__rand_next(s) * bound) >> 64);
}

/* Uniform float in [0, 1) with 24 random bits. */
static inline float gs__rand_unit(uint64_t *s) {
  return (float)(gs__rand_next(s) >> 40) * (1.0f / 16777216.0f);
}

#endif /* GS_COMPRESS_INTERNAL_H */
