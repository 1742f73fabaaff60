/*
 * Unit tests of the core module: status codes and messages, data type names,
 * the local reduction kernels against a serial reference, the f16/bf16
 * conversions (exhaustively for the 16-bit side), gs_scale_div and the
 * allocation helpers.
 *
 * The reference conversions below are written independently of
 * src/core/dtype.c: they round in double precision with rint() (round to
 * nearest, ties to even, the default floating-point environment), which is
 * slow but obviously correct, so they can judge the branch-free kernels.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gradsync.h"

/* ---- Reference conversions ------------------------------------------------ */

static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* A binary floating-point format with `mant` stored mantissa bits, exponent
 * bias `bias` and all-ones exponent for inf/NaN (IEEE 754 layout). */
typedef struct {
  int mant, bias, ebits;
} fmt16;

static const fmt16 FMT_F16 = {10, 15, 5};
static const fmt16 FMT_BF16 = {7, 127, 8};

static double ref_decode(fmt16 f, uint16_t h) {
  int sign = h >> 15;
  int e = (h >> f.mant) & ((1 << f.ebits) - 1);
  int m = h & ((1 << f.mant) - 1);
  double v;
  if (e == (1 << f.ebits) - 1)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = ldexp((double)m, 1 - f.bias - f.mant);
  else
    v = ldexp((double)((1 << f.mant) + m), e - f.bias - f.mant);
  return sign ? -v : v;
}

static int ref_is_nan(fmt16 f, uint16_t h) {
  int e = (h >> f.mant) & ((1 << f.ebits) - 1);
  return e == (1 << f.ebits) - 1 && (h & ((1 << f.mant) - 1)) != 0;
}

/* Round-to-nearest-even encoding of a finite or infinite non-NaN double. */
static uint16_t ref_encode(fmt16 f, double x) {
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  double a = fabs(x);
  uint32_t inf = ((1u << f.ebits) - 1) << f.mant;
  if (isinf(a)) return (uint16_t)(sign | inf);
  int emin = 1 - f.bias;
  int k;
  frexp(a, &k); /* a = m * 2^k, m in [0.5, 1) */
  int e = k - 1;
  uint32_t bits;
  if (a == 0.0) {
    bits = 0;
  } else if (e < emin) {
    /* Subnormal: units of 2^(emin - mant). rint may give 2^mant, which is
     * the encoding of the smallest normal number: the layout is monotone. */
    bits = (uint32_t)rint(ldexp(a, f.mant - emin));
  } else {
    double m = rint(ldexp(a, f.mant - e)); /* in [2^mant, 2^(mant+1)] */
    bits = ((uint32_t)(e + f.bias) << f.mant) + (uint32_t)m - (1u << f.mant);
  }
  if (bits >= inf) bits = inf; /* overflow rounds to infinity */
  return (uint16_t)(sign | bits);
}

/* ---- Status and messages --------------------------------------------------- */

static void test_strerror_every_status(void **state) {
  (void)state;
  for (int s = 0; s < GS_STATUS_COUNT; s++) {
    const char *m = gs_strerror((gs_status)s);
    assert_non_null(m);
    assert_true(strlen(m) > 0);
    assert_string_not_equal(m, "unknown status");
    for (int t = 0; t < s; t++) assert_string_not_equal(m, gs_strerror((gs_status)t));
  }
  assert_string_equal(gs_strerror(GS_OK), "success");
  assert_non_null(gs_strerror(GS_STATUS_COUNT));
  assert_non_null(gs_strerror((gs_status)-1));
  assert_non_null(gs_strerror((gs_status)12345));
}

static void test_error_formats_message(void **state) {
  (void)state;
  gs_clear_error();
  assert_string_equal(gs_last_error(), "");
  assert_int_equal(gs_error(GS_ERR_IO, "cannot open %s on rank %d", "x.json", 3),
                   GS_ERR_IO);
  assert_string_equal(gs_last_error(), "cannot open x.json on rank 3");
  assert_int_equal(gs_error(GS_ERR_PARSE, "%zu bytes", (size_t)7), GS_ERR_PARSE);
  assert_string_equal(gs_last_error(), "7 bytes");
  gs_clear_error();
  assert_string_equal(gs_last_error(), "");
}

static void test_error_long_message_truncated(void **state) {
  (void)state;
  char big[5000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(gs_error(GS_ERR_INTERNAL, "%s", big), GS_ERR_INTERNAL);
  size_t n = strlen(gs_last_error());
  assert_true(n > 100 && n < sizeof big - 1);
}

static void *thread_reads_error(void *arg) {
  const char **out = arg;
  *out = strlen(gs_last_error()) == 0 ? "empty" : "set";
  gs_error(GS_ERR_STATE, "from the other thread");
  return NULL;
}

/* The message is per thread: another thread neither sees nor clobbers it. */
static void test_error_is_thread_local(void **state) {
  (void)state;
  gs_error(GS_ERR_IO, "main thread message");
  const char *seen = NULL;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, thread_reads_error, &seen), 0);
  pthread_join(t, NULL);
  assert_string_equal(seen, "empty");
  assert_string_equal(gs_last_error(), "main thread message");
}

/* ---- Names ------------------------------------------------------------------ */

static void test_dtype_size_name_parse(void **state) {
  (void)state;
  static const struct {
    gs_dtype d;
    const char *name;
    size_t size;
  } want[] = {{GS_F32, "f32", 4}, {GS_F64, "f64", 8}, {GS_F16, "f16", 2},
              {GS_BF16, "bf16", 2}, {GS_I32, "i32", 4}, {GS_I64, "i64", 8},
              {GS_U8, "u8", 1}};
  assert_int_equal(sizeof want / sizeof want[0], GS_DTYPE_COUNT);
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    assert_int_equal(gs_dtype_size(want[i].d), want[i].size);
    assert_string_equal(gs_dtype_name(want[i].d), want[i].name);
    gs_dtype d = GS_DTYPE_COUNT;
    assert_int_equal(gs_dtype_parse(want[i].name, &d), GS_OK);
    assert_int_equal(d, want[i].d);
  }
  assert_int_equal(gs_dtype_size(GS_DTYPE_COUNT), 0);
  assert_int_equal(gs_dtype_size((gs_dtype)-1), 0);
  assert_non_null(gs_dtype_name(GS_DTYPE_COUNT));
  assert_non_null(gs_dtype_name((gs_dtype)-1));
}

static void test_dtype_parse_invalid(void **state) {
  (void)state;
  const char *bad[] = {"f8", "", "float32", "f32 ", "i16", "bf"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gs_dtype d = GS_F64;
    gs_clear_error();
    assert_int_equal(gs_dtype_parse(bad[i], &d), GS_ERR_INVALID_ARG);
    assert_int_equal(d, GS_F64); /* untouched */
    char quoted[64];
    snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
    if (strstr(gs_last_error(), quoted) == NULL)
      fail_msg("message for '%s' does not name it: %s", bad[i], gs_last_error());
  }
  gs_dtype d;
  assert_int_equal(gs_dtype_parse(NULL, &d), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_dtype_parse("f32", NULL), GS_ERR_INVALID_ARG);
}

static void test_redop_name_parse(void **state) {
  (void)state;
  const char *names[GS_REDOP_COUNT] = {"sum", "avg", "min", "max", "prod"};
  for (int i = 0; i < GS_REDOP_COUNT; i++) {
    assert_string_equal(gs_redop_name((gs_redop)i), names[i]);
    gs_redop op = GS_REDOP_COUNT;
    assert_int_equal(gs_redop_parse(names[i], &op), GS_OK);
    assert_int_equal(op, i);
  }
  assert_non_null(gs_redop_name(GS_REDOP_COUNT));
  gs_redop op = GS_MAX;
  assert_int_equal(gs_redop_parse("mean", &op), GS_ERR_INVALID_ARG);
  assert_int_equal(op, GS_MAX);
  assert_non_null(strstr(gs_last_error(), "'mean'"));
  assert_int_equal(gs_redop_parse("", &op), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_redop_parse(NULL, &op), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_redop_parse("sum", NULL), GS_ERR_INVALID_ARG);
}

/* ---- f16 / bf16 conversions -------------------------------------------------- */

static void check_all_16bit(fmt16 f, float (*to_f32)(uint16_t),
                            uint16_t (*from_f32)(float), const char *what) {
  int subnormals = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float got = to_f32((uint16_t)h);
    double want = ref_decode(f, (uint16_t)h);
    if (isnan(want)) {
      if (!isnan(got)) fail_msg("%s 0x%04x: NaN decoded as %a", what, h, got);
      uint16_t back = from_f32(got);
      if (!ref_is_nan(f, back))
        fail_msg("%s 0x%04x: NaN round-trips to 0x%04x", what, h, back);
      continue;
    }
    if ((double)got != want || !signbit(got) != !signbit(want))
      fail_msg("%s 0x%04x: decoded %a, want %a", what, h, got, want);
    if (((h >> f.mant) & ((1u << f.ebits) - 1)) == 0 && (h & 0x7fff)) subnormals++;
    uint16_t back = from_f32(got);
    if (back != h) fail_msg("%s 0x%04x: round-trips to 0x%04x", what, h, back);
  }
  assert_true(subnormals > 0);
}

static void test_f16_all_patterns_round_trip(void **state) {
  (void)state;
  check_all_16bit(FMT_F16, gs_f16_to_f32, gs_f32_to_f16, "f16");
}

static void test_bf16_all_patterns_round_trip(void **state) {
  (void)state;
  check_all_16bit(FMT_BF16, gs_bf16_to_f32, gs_f32_to_bf16, "bf16");
}

static void expect_encode(uint16_t (*from_f32)(float), fmt16 f, float x,
                          const char *what) {
  uint16_t got = from_f32(x);
  if (isnan(x)) {
    if (!ref_is_nan(f, got)) fail_msg("%s(%a) = 0x%04x, want NaN", what, x, got);
    return;
  }
  uint16_t want = ref_encode(f, x);
  if (got != want)
    fail_msg("%s(%a) = 0x%04x, want 0x%04x", what, (double)x, got, want);
}

/* Every midpoint between adjacent representable values (a tie, which must go
 * to the even neighbour) and the floats just either side of it. */
static void check_midpoints(fmt16 f, uint16_t (*from_f32)(float),
                            const char *what) {
  uint16_t inf = (uint16_t)(((1u << f.ebits) - 1) << f.mant);
  for (uint32_t h = 0; h < inf; h++) {
    double lo = ref_decode(f, (uint16_t)h);
    double hi = h + 1 == inf ? ldexp(1.0, (1 << (f.ebits - 1))) /* 2^emax+1 */
                             : ref_decode(f, (uint16_t)(h + 1));
    float mid = (float)((lo + hi) / 2); /* exact: one more bit than fmt */
    assert_true((double)mid == (lo + hi) / 2);
    float below = nextafterf(mid, 0.0f), above = nextafterf(mid, INFINITY);
    float xs[] = {mid, below, above, -mid, -below, -above};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++)
      expect_encode(from_f32, f, xs[i], what);
  }
}

static void test_f16_rounding(void **state) {
  (void)state;
  /* Hand-picked cases: ties to even, overflow, subnormals, signed zero. */
  assert_int_equal(gs_f32_to_f16(1.0f), 0x3c00);
  assert_int_equal(gs_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);          /* tie -> even */
  assert_int_equal(gs_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);      /* tie -> even */
  assert_int_equal(gs_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  assert_int_equal(gs_f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(gs_f32_to_f16(65519.0f), 0x7bff);
  assert_int_equal(gs_f32_to_f16(65520.0f), 0x7c00);                 /* to inf */
  assert_int_equal(gs_f32_to_f16(1e9f), 0x7c00);
  assert_int_equal(gs_f32_to_f16(-1e9f), 0xfc00);
  assert_int_equal(gs_f32_to_f16(INFINITY), 0x7c00);
  assert_int_equal(gs_f32_to_f16(-INFINITY), 0xfc00);
  assert_int_equal(gs_f32_to_f16(0x1p-24f), 0x0001);                 /* min subnormal */
  assert_int_equal(gs_f32_to_f16(0x1p-25f), 0x0000);                 /* tie -> 0 */
  assert_int_equal(gs_f32_to_f16(0x1p-25f + 0x1p-40f), 0x0001);
  assert_int_equal(gs_f32_to_f16(3 * 0x1p-25f), 0x0002);             /* tie -> even */
  assert_int_equal(gs_f32_to_f16(0x1p-14f), 0x0400);                 /* min normal */
  assert_int_equal(gs_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400);      /* tie -> even */
  assert_int_equal(gs_f32_to_f16(1e-30f), 0x0000);
  assert_int_equal(gs_f32_to_f16(-0.0f), 0x8000);
  assert_int_equal(gs_f32_to_f16(0x1p-149f), 0x0000);                /* f32 subnormal */
  assert_true(ref_is_nan(FMT_F16, gs_f32_to_f16(NAN)));
  assert_true(ref_is_nan(FMT_F16, gs_f32_to_f16(-NAN)));
  assert_true(ref_is_nan(FMT_F16, gs_f32_to_f16(u2f(0x7f800001u)))); /* sNaN */
  check_midpoints(FMT_F16, gs_f32_to_f16, "f16");
}

static void test_bf16_rounding(void **state) {
  (void)state;
  assert_int_equal(gs_f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(gs_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);          /* tie -> even */
  assert_int_equal(gs_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);      /* tie -> even */
  assert_int_equal(gs_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  assert_int_equal(gs_f32_to_bf16(u2f(0x7f7f8000u)), 0x7f80);       /* tie -> inf */
  assert_int_equal(gs_f32_to_bf16(u2f(0x7f7f7fffu)), 0x7f7f);
  assert_int_equal(gs_f32_to_bf16(u2f(0x7f7fffffu)), 0x7f80);       /* FLT_MAX */
  assert_int_equal(gs_f32_to_bf16(INFINITY), 0x7f80);
  assert_int_equal(gs_f32_to_bf16(-INFINITY), 0xff80);
  assert_int_equal(gs_f32_to_bf16(-0.0f), 0x8000);
  assert_int_equal(gs_f32_to_bf16(u2f(0x00000001u)), 0x0000);        /* tiny subnormal */
  assert_int_equal(gs_f32_to_bf16(u2f(0x00018000u)), 0x0002);        /* tie -> even */
  assert_true(ref_is_nan(FMT_BF16, gs_f32_to_bf16(NAN)));
  /* A NaN whose payload sits only in the low 16 bits must stay a NaN. */
  assert_true(ref_is_nan(FMT_BF16, gs_f32_to_bf16(u2f(0x7f800001u))));
  assert_true(ref_is_nan(FMT_BF16, gs_f32_to_bf16(u2f(0xff800001u))));
  check_midpoints(FMT_BF16, gs_f32_to_bf16, "bf16");
  /* Random floats of every magnitude. */
  uint32_t s = 12345;
  for (int i = 0; i < 200000; i++) {
    s = s * 1664525u + 1013904223u;
    float x = u2f(s);
    expect_encode(gs_f32_to_bf16, FMT_BF16, x, "bf16");
  }
}

static void test_f16_random_floats(void **state) {
  (void)state;
  uint32_t s = 777;
  for (int i = 0; i < 200000; i++) {
    s = s * 1664525u + 1013904223u;
    /* Bias the exponents to the f16 range so most cases are interesting. */
    uint32_t u = (s & 0x807fffffu) | ((uint32_t)(95 + (s >> 23) % 60) << 23);
    if (i % 8 == 0) u = s;
    expect_encode(gs_f32_to_f16, FMT_F16, u2f(u), "f16");
  }
}

/* The array conversions equal the one-element ones, bit for bit: every
 * 16-bit pattern widened, and random floats (every exponent) narrowed,
 * with lengths that leave a tail after any vector width. */
static void test_half_arrays_match_scalar(void **state) {
  (void)state;
  enum { N = 65536 + 13 };
  uint16_t *h = malloc(N * sizeof *h), *h2 = malloc(N * sizeof *h2);
  float *f = malloc(N * sizeof *f), *f2 = malloc(N * sizeof *f2);
  assert_true(h && h2 && f && f2);
  for (size_t i = 0; i < N; i++) h[i] = (uint16_t)i;
  for (int bf = 0; bf < 2; bf++) {
    if (bf) gs_bf16_to_f32_n(f, h, N);
    else gs_f16_to_f32_n(f, h, N);
    for (size_t i = 0; i < N; i++) {
      float want = bf ? gs_bf16_to_f32(h[i]) : gs_f16_to_f32(h[i]);
      if (f2u(f[i]) != f2u(want))
        fail_msg("%s widening of 0x%04x: 0x%08x, one at a time 0x%08x", bf ? "bf16" : "f16",
                 h[i], f2u(f[i]), f2u(want));
    }
  }
  uint32_t s = 4242;
  for (size_t i = 0; i < N; i++) {
    s = s * 1664525u + 1013904223u;
    f2[i] = u2f(s);
  }
  for (int bf = 0; bf < 2; bf++) {
    if (bf) gs_f32_to_bf16_n(h2, f2, N);
    else gs_f32_to_f16_n(h2, f2, N);
    for (size_t i = 0; i < N; i++) {
      uint16_t want = bf ? gs_f32_to_bf16(f2[i]) : gs_f32_to_f16(f2[i]);
      if (h2[i] != want)
        fail_msg("%s narrowing of 0x%08x: 0x%04x, one at a time 0x%04x", bf ? "bf16" : "f16",
                 f2u(f2[i]), h2[i], want);
    }
  }
  free(h);
  free(h2);
  free(f);
  free(f2);
}

/* ---- Local reductions -------------------------------------------------------- */

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Random bits, but no NaN for the float types: min/max of NaN is not part of
 * the contract, and sums of infinities of opposite sign give NaN, compared
 * as "both NaN". */
static void fill_random(void *buf, size_t n, gs_dtype d) {
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rng();
    switch (d) {
      case GS_F32: {
        float f = u2f((uint32_t)r);
        if (isnan(f)) f = 1.5f;
        if (r >> 60 < 8) f = (float)((int64_t)(r >> 40) % 1000) / 8.0f;
        ((float *)buf)[i] = f;
        break;
      }
      case GS_F64: {
        double v;
        memcpy(&v, &r, sizeof v);
        if (isnan(v)) v = -2.25;
        if (r >> 60 < 8) v = (double)((int64_t)(r >> 30) % 100000) / 16.0;
        ((double *)buf)[i] = v;
        break;
      }
      case GS_F16:
      case GS_BF16: {
        fmt16 f = d == GS_F16 ? FMT_F16 : FMT_BF16;
        uint16_t h = (uint16_t)r;
        if (ref_is_nan(f, h)) h = ref_encode(f, 1.0);
        if ((r >> 60) < 8) h = ref_encode(f, (double)((int)((r >> 32) % 64) - 32) / 4);
        ((uint16_t *)buf)[i] = h;
        break;
      }
      case GS_I32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)r; break;
      case GS_I64: ((int64_t *)buf)[i] = (int64_t)r; break;
      case GS_U8: ((uint8_t *)buf)[i] = (uint8_t)r; break;
      default: break;
    }
  }
}

#define MINOP(a, b) ((b) < (a) ? (b) : (a))
#define MAXOP(a, b) ((b) > (a) ? (b) : (a))

static float apply_f(gs_redop op, float a, float b) {
  switch (op) {
    case GS_SUM: case GS_AVG: return a + b;
    case GS_PROD: return a * b;
    case GS_MIN: return MINOP(a, b);
    default: return MAXOP(a, b);
  }
}

static double apply_d(gs_redop op, double a, double b) {
  switch (op) {
    case GS_SUM: case GS_AVG: return a + b;
    case GS_PROD: return a * b;
    case GS_MIN: return MINOP(a, b);
    default: return MAXOP(a, b);
  }
}

/* Integers: sums and products wrap modulo 2^bits (src/core/dtype.c computes
 * them in the unsigned type of the same width). */
#define APPLY_INT(T, U, op, a, b)                                             \
  ((op) == GS_SUM || (op) == GS_AVG ? (T)((U)(a) + (U)(b))                    \
   : (op) == GS_PROD               ? (T)((U)(a) * (U)(b))                     \
   : (op) == GS_MIN                ? MINOP(a, b)                              \
                                   : MAXOP(a, b))

static void reference_reduce(void *x, const void *y, size_t n, gs_dtype d,
                             gs_redop op) {
  for (size_t i = 0; i < n; i++) {
    switch (d) {
      case GS_F32: {
        float *a = x;
        a[i] = apply_f(op, a[i], ((const float *)y)[i]);
        break;
      }
      case GS_F64: {
        double *a = x;
        a[i] = apply_d(op, a[i], ((const double *)y)[i]);
        break;
      }
      case GS_F16:
      case GS_BF16: {
        fmt16 f = d == GS_F16 ? FMT_F16 : FMT_BF16;
        uint16_t *a = x;
        float r = apply_f(op, (float)ref_decode(f, a[i]),
                          (float)ref_decode(f, ((const uint16_t *)y)[i]));
        a[i] = isnan(r) ? 0x7fff : ref_encode(f, r);
        break;
      }
      case GS_I32: {
        int32_t *a = x, b = ((const int32_t *)y)[i];
        a[i] = APPLY_INT(int32_t, uint32_t, op, a[i], b);
        break;
      }
      case GS_I64: {
        int64_t *a = x, b = ((const int64_t *)y)[i];
        a[i] = APPLY_INT(int64_t, uint64_t, op, a[i], b);
        break;
      }
      case GS_U8: {
        uint8_t *a = x, b = ((const uint8_t *)y)[i];
        a[i] = (uint8_t)APPLY_INT(uint8_t, uint8_t, op, a[i], b);
        break;
      }
      default: break;
    }
  }
}

/* Equal bit for bit, except that any two NaNs are equal. */
static int same_elem(const void *a, const void *b, size_t i, gs_dtype d) {
  size_t es = gs_dtype_size(d);
  const char *pa = (const char *)a + i * es, *pb = (const char *)b + i * es;
  if (memcmp(pa, pb, es) == 0) return 1;
  if (d == GS_F32) {
    float x, y;
    memcpy(&x, pa, 4);
    memcpy(&y, pb, 4);
    return isnan(x) && isnan(y);
  }
  if (d == GS_F64) {
    double x, y;
    memcpy(&x, pa, 8);
    memcpy(&y, pb, 8);
    return isnan(x) && isnan(y);
  }
  if (d == GS_F16 || d == GS_BF16) {
    fmt16 f = d == GS_F16 ? FMT_F16 : FMT_BF16;
    uint16_t x, y;
    memcpy(&x, pa, 2);
    memcpy(&y, pb, 2);
    return ref_is_nan(f, x) && ref_is_nan(f, y);
  }
  return 0;
}

static void test_reduce_local_matches_reference(void **state) {
  (void)state;
  static const size_t counts[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 65,
                                  127, 1000, 1023, 4099};
  enum { MAXN = 4099 + 1 };
  /* +1 element: every case also runs on a buffer misaligned by one element,
   * which exercises the vectorised loops' peeling. */
  char *x = malloc(MAXN * 8 + 8), *y = malloc(MAXN * 8 + 8), *ref = malloc(MAXN * 8 + 8);
  assert_non_null(x);
  assert_non_null(y);
  assert_non_null(ref);
  for (int d = 0; d < GS_DTYPE_COUNT; d++) {
    size_t es = gs_dtype_size((gs_dtype)d);
    for (int op = 0; op < GS_REDOP_COUNT; op++) {
      for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        for (int shift = 0; shift < 2; shift++) {
          size_t n = counts[ci];
          char *xs = x + shift * es, *ys = y + (1 - shift) * es;
          fill_random(xs, n + 1, (gs_dtype)d); /* +1: a guard element */
          fill_random(ys, n, (gs_dtype)d);
          memcpy(ref, xs, (n + 1) * es);
          reference_reduce(ref, ys, n, (gs_dtype)d, (gs_redop)op);
          assert_int_equal(gs_reduce_local(xs, ys, n, (gs_dtype)d, (gs_redop)op),
                           GS_OK);
          for (size_t i = 0; i < n + 1; i++)
            if (!same_elem(xs, ref, i, (gs_dtype)d))
              fail_msg("reduce %s %s count %zu shift %d: element %zu differs",
                       gs_dtype_name((gs_dtype)d), gs_redop_name((gs_redop)op), n,
                       shift, i);
        }
      }
    }
  }
  free(x);
  free(y);
  free(ref);
}

/* Documented integer semantics at the edges: wraparound, not saturation. */
static void test_reduce_local_integer_wraparound(void **state) {
  (void)state;
  int32_t a32[] = {INT32_MAX, INT32_MIN, -1, 65536}, b32[] = {1, -1, INT32_MIN, 65536};
  assert_int_equal(gs_reduce_local(a32, b32, 4, GS_I32, GS_SUM), GS_OK);
  assert_int_equal(a32[0], INT32_MIN);
  assert_int_equal(a32[1], INT32_MAX);
  assert_int_equal(a32[2], INT32_MAX);
  assert_int_equal(a32[3], 131072);
  int32_t p32[] = {65536, INT32_MIN}, q32[] = {65536, -1};
  assert_int_equal(gs_reduce_local(p32, q32, 2, GS_I32, GS_PROD), GS_OK);
  assert_int_equal(p32[0], 0);
  assert_int_equal(p32[1], INT32_MIN);
  int64_t a64[] = {INT64_MAX}, b64[] = {1};
  assert_int_equal(gs_reduce_local(a64, b64, 1, GS_I64, GS_SUM), GS_OK);
  assert_true(a64[0] == INT64_MIN);
  uint8_t a8[] = {250, 16, 3, 200}, b8[] = {10, 16, 255, 100};
  assert_int_equal(gs_reduce_local(a8, b8, 4, GS_U8, GS_SUM), GS_OK);
  assert_int_equal(a8[0], 4);
  assert_int_equal(a8[1], 32);
  assert_int_equal(a8[2], 2);
  assert_int_equal(a8[3], 44);
  uint8_t m8[] = {16, 255}, n8[] = {16, 255};
  assert_int_equal(gs_reduce_local(m8, n8, 2, GS_U8, GS_PROD), GS_OK);
  assert_int_equal(m8[0], 0);
  assert_int_equal(m8[1], 1);
  uint8_t lo[] = {0, 255}, hi[] = {255, 0};
  assert_int_equal(gs_reduce_local(lo, hi, 2, GS_U8, GS_MIN), GS_OK);
  assert_int_equal(lo[0], 0);
  assert_int_equal(lo[1], 0);
}

/* Halves reduce in f32 and round once: 2048 + 1 is a tie in f16 (rounds to
 * even 2048), and bf16 sums of small integers stay exact up to 256. */
static void test_reduce_local_half_rounding(void **state) {
  (void)state;
  uint16_t x = gs_f32_to_f16(2048.0f), y = gs_f32_to_f16(1.0f);
  assert_int_equal(gs_reduce_local(&x, &y, 1, GS_F16, GS_SUM), GS_OK);
  assert_true(gs_f16_to_f32(x) == 2048.0f);
  x = gs_f32_to_f16(2050.0f);
  assert_int_equal(gs_reduce_local(&x, &y, 1, GS_F16, GS_SUM), GS_OK);
  assert_true(gs_f16_to_f32(x) == 2052.0f); /* 2051 ties to even 2052 */
  uint16_t b = gs_f32_to_bf16(200.0f), c = gs_f32_to_bf16(56.0f);
  assert_int_equal(gs_reduce_local(&b, &c, 1, GS_BF16, GS_SUM), GS_OK);
  assert_true(gs_bf16_to_f32(b) == 256.0f);
  uint16_t big = gs_f32_to_f16(60000.0f);
  uint16_t two = gs_f32_to_f16(2.0f);
  assert_int_equal(gs_reduce_local(&big, &two, 1, GS_F16, GS_PROD), GS_OK);
  assert_int_equal(big, 0x7c00); /* overflow to +inf */
}

static void test_reduce_local_invalid(void **state) {
  (void)state;
  float a[2] = {1, 2}, b[2] = {3, 4};
  assert_int_equal(gs_reduce_local(NULL, b, 2, GS_F32, GS_SUM), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "NULL"));
  assert_int_equal(gs_reduce_local(a, NULL, 2, GS_F32, GS_SUM), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_reduce_local(a, b, 2, GS_DTYPE_COUNT, GS_SUM), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_reduce_local(a, b, 2, (gs_dtype)-1, GS_SUM), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_reduce_local(a, b, 2, GS_F32, GS_REDOP_COUNT), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_reduce_local(a, b, 2, GS_F32, (gs_redop)-3), GS_ERR_INVALID_ARG);
  assert_true(a[0] == 1 && a[1] == 2); /* nothing written on error */
  /* count 0 needs no buffers */
  assert_int_equal(gs_reduce_local(NULL, NULL, 0, GS_F32, GS_SUM), GS_OK);
}

/* ---- gs_scale_div ---------------------------------------------------------------- */

static void test_scale_div_integers_truncate(void **state) {
  (void)state;
  int32_t a[] = {7, -7, 6, -1, INT32_MIN, 0};
  assert_int_equal(gs_scale_div(a, 6, GS_I32, 2), GS_OK);
  assert_int_equal(a[0], 3);
  assert_int_equal(a[1], -3);
  assert_int_equal(a[2], 3);
  assert_int_equal(a[3], 0);
  assert_int_equal(a[4], INT32_MIN / 2);
  assert_int_equal(a[5], 0);
  int64_t b[] = {-10, 10, INT64_MAX};
  assert_int_equal(gs_scale_div(b, 3, GS_I64, 3), GS_OK);
  assert_true(b[0] == -3 && b[1] == 3 && b[2] == INT64_MAX / 3);
  uint8_t c[] = {255, 7, 1};
  assert_int_equal(gs_scale_div(c, 3, GS_U8, 4), GS_OK);
  assert_int_equal(c[0], 63);
  assert_int_equal(c[1], 1);
  assert_int_equal(c[2], 0);
}

static void test_scale_div_floats(void **state) {
  (void)state;
  for (int d = 1; d <= 9; d++) {
    float f[101];
    double g[101];
    uint16_t h[101], bh[101];
    for (int i = 0; i < 101; i++) {
      f[i] = (float)(i - 50) * 1.25f;
      g[i] = (double)(i - 50) * 1.25;
      h[i] = gs_f32_to_f16((float)(i - 50));
      bh[i] = gs_f32_to_bf16((float)(i - 50));
    }
    assert_int_equal(gs_scale_div(f, 101, GS_F32, d), GS_OK);
    assert_int_equal(gs_scale_div(g, 101, GS_F64, d), GS_OK);
    assert_int_equal(gs_scale_div(h, 101, GS_F16, d), GS_OK);
    assert_int_equal(gs_scale_div(bh, 101, GS_BF16, d), GS_OK);
    for (int i = 0; i < 101; i++) {
      double want = (double)(i - 50) * 1.25 / d;
      /* f32 multiplies by the reciprocal: within 1 ulp of the quotient. */
      assert_true(fabs(f[i] - want) <= fabs(want) * 0x1p-23 + 1e-30);
      assert_true(fabs(g[i] - want) <= fabs(want) * 0x1p-52);
      double hw = (double)(i - 50) / d;
      assert_true(fabs(gs_f16_to_f32(h[i]) - hw) <= fabs(hw) * 0x1p-10 + 1e-7);
      assert_true(fabs(gs_bf16_to_f32(bh[i]) - hw) <= fabs(hw) * 0x1p-7 + 1e-30);
      if (d == 1 || d == 2 || d == 4 || d == 8) {
        assert_true((double)f[i] == want); /* powers of two are exact */
      }
    }
  }
}

static void test_scale_div_invalid(void **state) {
  (void)state;
  float f[2] = {2, 4};
  assert_int_equal(gs_scale_div(f, 2, GS_F32, 0), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_scale_div(f, 2, GS_F32, -2), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_scale_div(NULL, 2, GS_F32, 2), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_scale_div(f, 2, GS_DTYPE_COUNT, 2), GS_ERR_INVALID_ARG);
  assert_true(f[0] == 2 && f[1] == 4);
  assert_int_equal(gs_scale_div(NULL, 0, GS_F32, 2), GS_OK);
  assert_int_equal(gs_scale_div(f, 2, GS_F32, 1), GS_OK);
  assert_true(f[0] == 2 && f[1] == 4);
}

/* ---- Allocation ------------------------------------------------------------- */

static void test_mul_size(void **state) {
  (void)state;
  size_t s = 123;
  assert_int_equal(gs_mul_size(6, 7, &s), GS_OK);
  assert_int_equal(s, 42);
  assert_int_equal(gs_mul_size(0, SIZE_MAX, &s), GS_OK);
  assert_int_equal(s, 0);
  assert_int_equal(gs_mul_size(SIZE_MAX, 1, &s), GS_OK);
  assert_true(s == SIZE_MAX);
  s = 5;
  assert_int_equal(gs_mul_size(SIZE_MAX, 2, &s), GS_ERR_INVALID_ARG);
  assert_int_equal(s, 5);
  assert_int_equal(gs_mul_size(SIZE_MAX / 2 + 1, 2, &s), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_mul_size((size_t)1 << (sizeof(size_t) * 4),
                               (size_t)1 << (sizeof(size_t) * 4), &s),
                   GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "overflow"));
}

static void test_alloc(void **state) {
  (void)state;
  void *a = gs_malloc(0), *b = gs_malloc(0);
  assert_non_null(a);
  assert_non_null(b);
  assert_ptr_not_equal(a, b);
  gs_free(a);
  gs_free(b);
  int *c = gs_calloc(100, sizeof(int));
  assert_non_null(c);
  for (int i = 0; i < 100; i++) assert_int_equal(c[i], 0);
  c[99] = 5;
  c = gs_realloc(c, 1000 * sizeof(int));
  assert_non_null(c);
  assert_int_equal(c[99], 5);
  gs_free(c);
  void *z = gs_calloc(0, 8);
  assert_non_null(z);
  gs_free(z);
  gs_clear_error();
  assert_null(gs_calloc(SIZE_MAX / 2, 4));
  assert_true(strlen(gs_last_error()) > 0);
  gs_free(NULL);
}

/* The allocator's count (gs_mem_used, gs_mem_peak): a block's bytes (at
 * least what was asked) added while it lives, its growth by realloc, the
 * peak kept until reset; a thread's allocations counted (the count is
 * atomic). */
static void *alloc_many(void *arg) {
  (void)arg;
  for (int i = 0; i < 10000; i++) gs_free(gs_malloc(64));
  return NULL;
}

static void test_alloc_count(void **state) {
  (void)state;
  size_t u0 = gs_mem_used();
  gs_mem_reset_peak();
  assert_int_equal(gs_mem_peak(), u0);
  char *a = gs_malloc(1 << 20);
  assert_non_null(a);
  size_t u1 = gs_mem_used();
  assert_true(u1 >= u0 + (1 << 20) && u1 < u0 + (1 << 20) + 8192);
  a = gs_realloc(a, 3 << 20);
  assert_non_null(a);
  size_t u2 = gs_mem_used();
  assert_true(u2 >= u0 + (3 << 20) && u2 < u0 + (3 << 20) + 8192);
  float *c = gs_calloc(1 << 18, sizeof(float));
  assert_non_null(c);
  assert_true(gs_mem_used() >= u2 + (1 << 20));
  size_t peak = gs_mem_peak();
  assert_true(peak >= gs_mem_used());
  gs_free(a);
  gs_free(c);
  assert_int_equal(gs_mem_used(), u0);
  assert_int_equal(gs_mem_peak(), peak); /* kept after the frees */
  gs_mem_reset_peak();
  assert_int_equal(gs_mem_peak(), u0);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, alloc_many, NULL), 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  assert_int_equal(gs_mem_used(), u0);
}

/* ---- Logging and time --------------------------------------------------------- */

static void test_log_level(void **state) {
  (void)state;
  gs_log_level old = gs_log_get_level();
  assert_true(old >= GS_LOG_DEBUG && old <= GS_LOG_OFF);
  gs_log_set_level(GS_LOG_OFF);
  assert_int_equal(gs_log_get_level(), GS_LOG_OFF);
  gs_log(GS_LOG_ERROR, "this line must not appear (%d)", 1);
  gs_log_set_level(GS_LOG_ERROR);
  assert_int_equal(gs_log_get_level(), GS_LOG_ERROR);
  gs_log_set_level(old);
}

static void test_time_monotonic(void **state) {
  (void)state;
  double t0 = gs_now();
  uint64_t n0 = gs_now_ns();
  for (int i = 0; i < 1000; i++) {
    double t = gs_now();
    assert_true(t >= t0);
    t0 = t;
    uint64_t n = gs_now_ns();
    assert_true(n >= n0);
    n0 = n;
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strerror_every_status),
      cmocka_unit_test(test_error_formats_message),
      cmocka_unit_test(test_error_long_message_truncated),
      cmocka_unit_test(test_error_is_thread_local),
      cmocka_unit_test(test_dtype_size_name_parse),
      cmocka_unit_test(test_dtype_parse_invalid),
      cmocka_unit_test(test_redop_name_parse),
      cmocka_unit_test(test_f16_all_patterns_round_trip),
      cmocka_unit_test(test_bf16_all_patterns_round_trip),
      cmocka_unit_test(test_f16_rounding),
      cmocka_unit_test(test_bf16_rounding),
      cmocka_unit_test(test_f16_random_floats),
      cmocka_unit_test(test_half_arrays_match_scalar),
      cmocka_unit_test(test_reduce_local_matches_reference),
      cmocka_unit_test(test_reduce_local_integer_wraparound),
      cmocka_unit_test(test_reduce_local_half_rounding),
      cmocka_unit_test(test_reduce_local_invalid),
      cmocka_unit_test(test_scale_div_integers_truncate),
      cmocka_unit_test(test_scale_div_floats),
      cmocka_unit_test(test_scale_div_invalid),
      cmocka_unit_test(test_mul_size),
      cmocka_unit_test(test_alloc),
      cmocka_unit_test(test_alloc_count),
      cmocka_unit_test(test_log_level),
      cmocka_unit_test(test_time_monotonic),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
