/*
 * Data types and the local reduction kernels. These loops are on the hot
 * path of every reducing collective, so they are written to auto-vectorise:
 * restrict-qualified pointers, no calls, branch-free f16/bf16 conversions
 * (checked with -fopt-info-vec in the build; see docs/ARCHITECTURE.md).
 */
#include <string.h>
#include <strings.h>

#include "gs_internal.h"

static const struct {
  const char *name;
  size_t size;
} dtype_info[GS_DTYPE_COUNT] = {
    [GS_F32] = {"f32", 4}, [GS_F64] = {"f64", 8}, [GS_F16] = {"f16", 2},
    [GS_BF16] = {"bf16", 2}, [GS_I32] = {"i32", 4}, [GS_I64] = {"i64", 8},
    [GS_U8] = {"u8", 1},
};

static const char *redop_names[GS_REDOP_COUNT] = {
    [GS_SUM] = "sum", [GS_AVG] = "avg", [GS_MIN] = "min", [GS_MAX] = "max",
    [GS_PROD] = "prod",
};

size_t gs_dtype_size(gs_dtype dtype) {
  if ((unsigned)dtype >= GS_DTYPE_COUNT) return 0;
  return dtype_info[dtype].size;
}

const char *gs_dtype_name(gs_dtype dtype) {
  if ((unsigned)dtype >= GS_DTYPE_COUNT) return "invalid-dtype";
  return dtype_info[dtype].name;
}

gs_status gs_dtype_parse(const char *name, gs_dtype *out) {
  if (name == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "dtype name is NULL");
  for (int i = 0; i < GS_DTYPE_COUNT; i++) {
    if (strcasecmp(name, dtype_info[i].name) == 0) {
      *out = (gs_dtype)i;
      return GS_OK;
    }
  }
  return gs_error(GS_ERR_INVALID_ARG,
                  "unknown dtype '%s' (expected f32, f64, f16, bf16, i32, "
                  "i64 or u8)", name);
}

const char *gs_redop_name(gs_redop op) {
  if ((unsigned)op >= GS_REDOP_COUNT) return "invalid-op";
  return redop_names[op];
}

gs_status gs_redop_parse(const char *name, gs_redop *out) {
  if (name == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "reduction op name is NULL");
  for (int i = 0; i < GS_REDOP_COUNT; i++) {
    if (strcasecmp(name, redop_names[i]) == 0) {
      *out = (gs_redop)i;
      return GS_OK;
    }
  }
  return gs_error(GS_ERR_INVALID_ARG,
                  "unknown reduction op '%s' (expected sum, avg, min, max or "
                  "prod)", name);
}

/* ---- f16 and bf16 ---------------------------------------------------------
 * Branch-free conversions after F. Giesen's public-domain half<->float code:
 * every case is computed and one is selected, so loops over them vectorise. */

static inline uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline float h2f(uint16_t h) {
  const float magic = u2f(113u << 23);
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t bits = (uint32_t)(h & 0x7fffu) << 13;
  uint32_t exp = bits & (0x7c00u << 13);
  bits += (127u - 15u) << 23;
  uint32_t inf_nan = bits + ((128u - 16u) << 23);
  float denorm = u2f(bits + (1u << 23)) - magic;
  uint32_t m_special = -(uint32_t)(exp == (0x7c00u << 13));
  uint32_t m_denorm = -(uint32_t)(exp == 0);
  uint32_t out = (inf_nan & m_special) | (f2u(denorm) & m_denorm) |
                 (bits & ~(m_special | m_denorm));
  return u2f(out | sign);
}

static inline uint16_t f2h(float x) {
  const uint32_t f32infty = 255u << 23;
  const uint32_t f16max = (127u + 16u) << 23;
  const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t u = f2u(x);
  uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t big = 0x7c00u | (0x200u & -(uint32_t)(u > f32infty));
  uint32_t small = f2u(u2f(u) + u2f(denorm_magic)) - denorm_magic;
  uint32_t mant_odd = (u >> 13) & 1u;
  uint32_t normal = (u + (uint32_t)((15 - 127) * (1 << 23)) + 0xfffu + mant_odd) >> 13;
  uint32_t m_big = -(uint32_t)(u >= f16max);
  uint32_t m_small = -(uint32_t)(u < (113u << 23)) & ~m_big;
  uint32_t out = (big & m_big) | (small & m_small) | (normal & ~(m_big | m_small));
  return (uint16_t)(out | (sign >> 16));
}

static inline float b2f(uint16_t h) { return u2f((uint32_t)h << 16); }

static inline uint16_t f2b(float x) {
  uint32_t u = f2u(x);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | 0x40u;
  uint32_t m_nan = -(uint32_t)((u & 0x7fffffffu) > 0x7f800000u);
  return (uint16_t)((nan & m_nan) | (rounded & ~m_nan));
}

float gs_f16_to_f32(uint16_t h) { return h2f(h); }
uint16_t gs_f32_to_f16(float f) { return f2h(f); }
float gs_bf16_to_f32(uint16_t h) { return b2f(h); }
uint16_t gs_f32_to_bf16(float f) { return f2b(f); }

/* The same conversions over arrays: inlined and vectorised here (the
 * one-element calls from another file cost a call each), and cloned for
 * AVX2 and AVX-512 (8 and 16 lanes instead of SSE2's 4), chosen by the
 * loader. Integer bit operations and one exact float addition: every clone
 * gives the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(GRADSYNC_EMBED_NO_CLONES)
#define CVT_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CVT_CLONES
#endif
CVT_CLONES void gs_f32_to_f16_n(uint16_t *restrict dst, const float *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = f2h(src[i]);
}
CVT_CLONES void gs_f16_to_f32_n(float *restrict dst, const uint16_t *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = h2f(src[i]);
}
CVT_CLONES void gs_f32_to_bf16_n(uint16_t *restrict dst, const float *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = f2b(src[i]);
}
CVT_CLONES void gs_bf16_to_f32_n(float *restrict dst, const uint16_t *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = b2f(src[i]);
}

/* ---- Kernels ------------------------------------------------------------- */

#define OP_SUM(a, b) ((a) + (b))
#define OP_PROD(a, b) ((a) * (b))
#define OP_MIN(a, b) ((b) < (a) ? (b) : (a))
#define OP_MAX(a, b) ((b) > (a) ? (b) : (a))

#define DEFINE_KERNEL(name, T, OP)                                          \
  static void name(T *restrict x, const T *restrict y, size_t n) {         \
    for (size_t i = 0; i < n; i++) x[i] = OP(x[i], y[i]);                   \
  }

/* Unsigned and signed integer sums and products wrap as unsigned types do,
 * so overflow is defined (two's complement) instead of undefined behaviour. */
#define DEFINE_KERNEL_WRAP(name, T, U, OP)                                  \
  static void name(T *restrict x, const T *restrict y, size_t n) {         \
    for (size_t i = 0; i < n; i++) x[i] = (T)OP((U)x[i], (U)y[i]);          \
  }

#define DEFINE_KERNEL_HALF(name, TO_F, FROM_F, OP)                          \
  static void name(uint16_t *restrict x, const uint16_t *restrict y,       \
                   size_t n) {                                              \
    for (size_t i = 0; i < n; i++) x[i] = FROM_F(OP(TO_F(x[i]), TO_F(y[i]))); \
  }

#define DEFINE_FAMILY(T, sfx)                                               \
  DEFINE_KERNEL(sum_##sfx, T, OP_SUM)                                       \
  DEFINE_KERNEL(prod_##sfx, T, OP_PROD)                                     \
  DEFINE_KERNEL(min_##sfx, T, OP_MIN)                                       \
  DEFINE_KERNEL(max_##sfx, T, OP_MAX)

#define DEFINE_INT_FAMILY(T, U, sfx)                                        \
  DEFINE_KERNEL_WRAP(sum_##sfx, T, U, OP_SUM)                               \
  DEFINE_KERNEL_WRAP(prod_##sfx, T, U, OP_PROD)                             \
  DEFINE_KERNEL(min_##sfx, T, OP_MIN)                                       \
  DEFINE_KERNEL(max_##sfx, T, OP_MAX)

#define DEFINE_HALF_FAMILY(sfx, TO_F, FROM_F)                               \
  DEFINE_KERNEL_HALF(sum_##sfx, TO_F, FROM_F, OP_SUM)                       \
  DEFINE_KERNEL_HALF(prod_##sfx, TO_F, FROM_F, OP_PROD)                     \
  DEFINE_KERNEL_HALF(min_##sfx, TO_F, FROM_F, OP_MIN)                       \
  DEFINE_KERNEL_HALF(max_##sfx, TO_F, FROM_F, OP_MAX)

DEFINE_FAMILY(float, f32)
DEFINE_FAMILY(double, f64)
DEFINE_INT_FAMILY(int32_t, uint32_t, i32)
DEFINE_INT_FAMILY(int64_t, uint64_t, i64)
DEFINE_INT_FAMILY(uint8_t, uint8_t, u8)
DEFINE_HALF_FAMILY(f16, h2f, f2h)
DEFINE_HALF_FAMILY(bf16, b2f, f2b)

typedef void (*kernel_fn)(void *restrict, const void *restrict, size_t);

#define ROW(sfx)                                                            \
  {(kernel_fn)sum_##sfx, (kernel_fn)sum_##sfx, (kernel_fn)min_##sfx,        \
   (kernel_fn)max_##sfx, (kernel_fn)prod_##sfx}

/* Indexed [dtype][op]; GS_AVG reduces as a sum. */
static const kernel_fn kernels[GS_DTYPE_COUNT][GS_REDOP_COUNT] = {
    [GS_F32] = ROW(f32), [GS_F64] = ROW(f64), [GS_F16] = ROW(f16),
    [GS_BF16] = ROW(bf16), [GS_I32] = ROW(i32), [GS_I64] = ROW(i64),
    [GS_U8] = ROW(u8),
};

gs_status gs_reduce_local(void *inout, const void *in, size_t count,
                          gs_dtype dtype, gs_redop op) {
  if ((unsigned)dtype >= GS_DTYPE_COUNT)
    return gs_error(GS_ERR_INVALID_ARG, "reduce: invalid dtype %d", (int)dtype);
  if ((unsigned)op >= GS_REDOP_COUNT)
    return gs_error(GS_ERR_INVALID_ARG, "reduce: invalid op %d", (int)op);
  if (count == 0) return GS_OK;
  if (inout == NULL || in == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "reduce: NULL buffer with count %zu",
                    count);
  kernels[dtype][op](inout, in, count);
  return GS_OK;
}

#define DEFINE_SCALE(name, T)                                               \
  static void name(T *restrict x, size_t n, int d) {                        \
    for (size_t i = 0; i < n; i++) x[i] = (T)(x[i] / (T)d);                 \
  }
DEFINE_SCALE(scale_f64, double)
DEFINE_SCALE(scale_i32, int32_t)
DEFINE_SCALE(scale_i64, int64_t)
DEFINE_SCALE(scale_u8, uint8_t)

/* Floats multiply by the reciprocal (one rounding more than a division, but
 * vectorised); NCCL and PyTorch DDP scale the same way. */
static void scale_f32(float *restrict x, size_t n, int d) {
  const float r = 1.0f / (float)d;
  for (size_t i = 0; i < n; i++) x[i] *= r;
}

static void scale_f16(uint16_t *restrict x, size_t n, int d) {
  const float r = 1.0f / (float)d;
  for (size_t i = 0; i < n; i++) x[i] = f2h(h2f(x[i]) * r);
}

static void scale_bf16(uint16_t *restrict x, size_t n, int d) {
  const float r = 1.0f / (float)d;
  for (size_t i = 0; i < n; i++) x[i] = f2b(b2f(x[i]) * r);
}

gs_status gs_scale_div(void *buf, size_t count, gs_dtype dtype, int divisor) {
  if (divisor <= 0)
    return gs_error(GS_ERR_INVALID_ARG, "scale: divisor %d <= 0", divisor);
  if (count == 0 || divisor == 1) return GS_OK;
  if (buf == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "scale: NULL buffer with count %zu",
                    count);
  switch (dtype) {
    case GS_F32: scale_f32(buf, count, divisor); break;
    case GS_F64: scale_f64(buf, count, divisor); break;
    case GS_F16: scale_f16(buf, count, divisor); break;
    case GS_BF16: scale_bf16(buf, count, divisor); break;
    case GS_I32: scale_i32(buf, count, divisor); break;
    case GS_I64: scale_i64(buf, count, divisor); break;
    case GS_U8: scale_u8(buf, count, divisor); break;
    default:
      return gs_error(GS_ERR_INVALID_ARG, "scale: invalid dtype %d", (int)dtype);
  }
  return GS_OK;
}
