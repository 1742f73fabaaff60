/*
 * The compressors (include/gradsync/compress.h) against straightforward
 * references:
 *   - specs: every kind parses, bad specs name the spec and the accepted
 *     forms;
 *   - error feedback, on 3 simulated ranks whose payloads are exchanged the
 *     way each compressor declares (dense: summed with core's reduction;
 *     sparse and opaque: every rank decodes every payload): over several
 *     steps, the decompressed sum plus every rank's final residual equals
 *     the sum of all the gradients;
 *   - top-k payloads are the exact top k of g + e; DGC's momentum
 *     correction and factor masking against a reference loop; warm-up and
 *     clipping; layer-wise selection in a fused message (segments) equals
 *     separate states; SIDCo's fits on data they model; QSGD's and TernGrad's
 *     unbiasedness (fixed seed, tolerances of several standard errors);
 *     PowerSGD reconstructs a low-rank matrix; random-k agrees across
 *     ranks; determinism; the failure paths;
 *   - a state's memory read and written (gs_compress_memory_get/put): a
 *     fresh state given another's memory sends the same payloads.
 */
#include "gradsync/compress.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint64_t rng_state = 777;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static double unif(void) { return ((double)(rnd() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
static float normal(void) {
  return (float)(sqrt(-2.0 * log(unif())) * cos(6.283185307179586 * unif()));
}

static const char *const all_specs[] = {
    "none",     "fp16",        "bf16",        "topk:0.01", "mstopk:0.01",
    "gtopk:0.01", "dgc:0.01",  "sidco:0.01",  "sidco:0.001:gpareto",
    "sidco:0.01:gamma", "randomk:0.05", "qsgd:256", "qsgd:4",
    "terngrad", "efsignsgd",   "powersgd:4",  "powersgd:1"};
#define NSPECS (sizeof all_specs / sizeof all_specs[0])

static gs_compressor *make(const char *spec) {
  gs_compressor *c = NULL;
  if (gs_compressor_create(spec, &c) != GS_OK) fail_msg("%s: %s", spec, gs_last_error());
  return c;
}

static gs_compress_state *state(const gs_compressor *c, size_t n, int ef, int rank,
                                int nranks) {
  gs_compress_opts o = gs_compress_opts_default();
  o.error_feedback = ef;
  o.rank = rank;
  o.nranks = nranks;
  o.momentum = 0; /* DGC then accumulates plain gradients */
  o.ef_decay = 1; /* undamped, so that sent + residual = sum of g for all */
  gs_compress_state *st = NULL;
  if (gs_compress_state_create(c, n, &o, &st) != GS_OK)
    fail_msg("%s n=%zu: %s", gs_compressor_spec(c), n, gs_last_error());
  return st;
}

/* ---- Specs ----------------------------------------------------------------- */

static void test_specs(void **unused) {
  (void)unused;
  for (size_t i = 0; i < NSPECS; i++) {
    gs_compressor *c = make(all_specs[i]);
    gs_compressor_info info;
    assert_int_equal(gs_compressor_info_get(c, &info), GS_OK);
    assert_non_null(strstr(gs_compressor_kinds(), info.name));
    assert_true(info.rounds >= 1);
    gs_compressor_destroy(c);
  }
  gs_compressor *c = make("TopK:0.0010");
  assert_string_equal(gs_compressor_spec(c), "topk:0.001");
  gs_compressor_destroy(c);
  /* The parameter's every digit that tells it apart (until 2026-12-07 "%g":
   * randomk:0.01000001 and randomk:0.01000004 were one spec). */
  c = make("randomk:0.01000001");
  assert_string_equal(gs_compressor_spec(c), "randomk:0.01000001");
  gs_compressor_destroy(c);
  c = make("qsgd:16");
  assert_string_equal(gs_compressor_spec(c), "qsgd:16");
  gs_compressor_destroy(c);
  /* Buckets: the default is left out of the normalised spec. */
  const char *buckets[][2] = {{"qsgd:16:512", "qsgd:16"}, {"qsgd:16:0", "qsgd:16:0"},
                              {"terngrad:4096", "terngrad:4096"},
                              {"efsignsgd:512", "efsignsgd"}};
  for (size_t i = 0; i < 4; i++) {
    c = make(buckets[i][0]);
    assert_string_equal(gs_compressor_spec(c), buckets[i][1]);
    gs_compressor_destroy(c);
  }
  const char *bad[] = {"", "topk", "topk:", "topk:0", "topk:-0.1", "topk:1.5",
                       "topk:abc", "topk:0.1x", "topk:nan", "qsgd:0", "qsgd:2.5",
                       "qsgd:40000", "powersgd:0", "powersgd:", "fp16:3",
                       "none:1", "zip", "sidco:0.01:normal", "randomk:inf",
                       "qsgd:4:-1", "qsgd:4:x", "qsgd:4:2000000000", "terngrad:abc",
                       "efsignsgd:1.5", "topk:0.1:512", "terngrad:", "topk: 0.1",
                       "topk:0x1p-7", "qsgd:0x10"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    c = (gs_compressor *)0x1;
    assert_int_equal(gs_compressor_create(bad[i], &c), GS_ERR_INVALID_ARG);
    assert_null(c);
    char want[40];
    snprintf(want, sizeof want, "'%s", bad[i]);
    if (strstr(gs_last_error(), want) == NULL)
      fail_msg("spec '%s': message '%s' does not name it", bad[i], gs_last_error());
  }
  assert_int_equal(gs_compressor_create("zip", &c), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "topk:D"));
  assert_non_null(strstr(gs_last_error(), "powersgd:R"));
  assert_int_equal(gs_compressor_create("qsgd:0", &c), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "1..32767"));
  assert_int_equal(gs_compressor_create(NULL, &c), GS_ERR_INVALID_ARG);
  gs_compressor_destroy(NULL);
}

static void test_info_and_bytes(void **unused) {
  (void)unused;
  struct {
    const char *spec;
    gs_compress_exchange ex;
    int rounds;
    size_t n, round, bytes;
  } cases[] = {
      {"none", GS_EXCHANGE_DENSE, 1, 1000, 0, 4000},
      {"fp16", GS_EXCHANGE_DENSE, 1, 1000, 0, 2000},
      {"bf16", GS_EXCHANGE_DENSE, 1, 1000, 0, 2000},
      {"topk:0.01", GS_EXCHANGE_SPARSE, 1, 1000, 0, 80},
      {"topk:0.00001", GS_EXCHANGE_SPARSE, 1, 1000, 0, 8}, /* at least 1 */
      {"gtopk:0.5", GS_EXCHANGE_SPARSE, 1, 7, 0, 24},
      {"randomk:0.01", GS_EXCHANGE_DENSE, 1, 1000, 0, 40},
      /* header 8, a 4-byte scale per bucket of 512 (or B), the codes */
      {"qsgd:4", GS_EXCHANGE_OPAQUE, 1, 1000, 0, 8 + 8 + 1000},
      {"qsgd:256", GS_EXCHANGE_OPAQUE, 1, 1000, 0, 8 + 8 + 2000},
      {"qsgd:4:0", GS_EXCHANGE_OPAQUE, 1, 1000, 0, 8 + 4 + 1000},
      {"terngrad", GS_EXCHANGE_OPAQUE, 1, 1001, 0, 8 + 8 + 251},
      {"terngrad:100", GS_EXCHANGE_OPAQUE, 1, 1001, 0, 8 + 44 + 251},
      {"efsignsgd", GS_EXCHANGE_OPAQUE, 1, 1001, 0, 8 + 8 + 126},
      {"powersgd:4", GS_EXCHANGE_DENSE, 2, 1000, 0, 4 * 32 * 4},
      {"powersgd:4", GS_EXCHANGE_DENSE, 2, 1000, 1, 4 * 32 * 4},
      {"powersgd:4", GS_EXCHANGE_DENSE, 2, 10, 1, 4 * 3 * 3}, /* 4 x 3, rank 3 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gs_compressor *c = make(cases[i].spec);
    gs_compressor_info info;
    assert_int_equal(gs_compressor_info_get(c, &info), GS_OK);
    assert_int_equal(info.exchange, cases[i].ex);
    assert_int_equal(info.rounds, cases[i].rounds);
    assert_true(info.compress_bytes_per_elem > 0);
    /* The default damping: random-k's, every other kind undamped. */
    assert_true(info.ef_decay == (strncmp(cases[i].spec, "randomk", 7) == 0
                                      ? GS_COMPRESS_RANDOMK_EF_DECAY
                                      : 1.0f));
    size_t b = 0;
    assert_int_equal(gs_compressor_payload_bytes(c, cases[i].n, (int)cases[i].round, &b),
                     GS_OK);
    if (b != cases[i].bytes)
      fail_msg("%s n=%zu round %zu: %zu bytes, expected %zu", cases[i].spec,
               cases[i].n, cases[i].round, b, cases[i].bytes);
    assert_int_equal(gs_compressor_payload_bytes(c, 10, 2, &b), GS_ERR_INVALID_ARG);
    gs_compressor_destroy(c);
  }
  gs_compressor *c = make("fp16");
  gs_compressor_info info;
  gs_compressor_info_get(c, &info);
  assert_int_equal(info.dense_dtype, GS_F16);
  double rate = 0;
  assert_int_equal(gs_compressor_measure(c, 4096, &rate), GS_OK);
  assert_true(rate > 0 && rate < 1e-3);
  gs_compressor_destroy(c);
  c = make("dgc:0.01");
  gs_compressor_info_get(c, &info);
  assert_int_equal(info.fixed_size, 0);
  gs_compressor_destroy(c);
}

/* ---- Error feedback over simulated ranks ---------------------------------------- */

#define RANKS 3

/* Runs `steps` steps of `spec` on RANKS simulated ranks with n elements;
 * checks (with error feedback) that the decompressed total plus the final
 * residuals equals the total of the gradients, and returns the largest
 * relative deviation. */
static double ef_identity(const char *spec, size_t n, int steps, double tol) {
  gs_compressor *c = make(spec);
  gs_compressor_info info;
  gs_compressor_info_get(c, &info);
  gs_compress_state *st[RANKS];
  for (int r = 0; r < RANKS; r++) st[r] = state(c, n, 1, r, RANKS);
  size_t cap = 0;
  for (int rd = 0; rd < info.rounds; rd++)
    if (gs_compress_capacity(st[0], rd) > cap) cap = gs_compress_capacity(st[0], rd);
  cap += 8;
  float *g = malloc((n + 1) * sizeof *g);
  double *total = calloc(n + 1, sizeof *total);
  float *acc[RANKS];
  void *pay[RANKS];
  size_t bytes[RANKS];
  for (int r = 0; r < RANKS; r++) {
    acc[r] = calloc(n + 1, sizeof(float));
    pay[r] = malloc(cap);
  }
  void *red = malloc(cap);
  double scale = 0;
  for (int step = 0; step < steps; step++) {
    for (int r = 0; r < RANKS; r++) {
      for (size_t i = 0; i < n; i++) {
        g[i] = normal() * (1.0f + (float)(i % 7)) + (r == 1 ? 0.5f : 0.0f);
        total[i] += g[i];
        scale = fmax(scale, fabs(total[i]));
      }
      if (gs_compress(st[r], g, n, pay[r], cap, &bytes[r]) != GS_OK)
        fail_msg("%s step %d rank %d: %s", spec, step, r, gs_last_error());
      assert_true(bytes[r] <= gs_compress_capacity(st[r], 0));
    }
    if (info.exchange == GS_EXCHANGE_DENSE) {
      for (int rd = 0; rd < info.rounds; rd++) {
        for (int r = 1; r < RANKS; r++) assert_int_equal(bytes[r], bytes[0]);
        const size_t es = gs_dtype_size(info.dense_dtype);
        memcpy(red, pay[0], bytes[0]);
        for (int r = 1; r < RANKS; r++)
          assert_int_equal(gs_reduce_local(red, pay[r], bytes[0] / es,
                                           info.dense_dtype, GS_SUM), GS_OK);
        if (rd + 1 < info.rounds) {
          const size_t in_bytes = bytes[0];
          for (int r = 0; r < RANKS; r++)
            if (gs_compress_round(st[r], rd + 1, red, in_bytes, pay[r], cap,
                                  &bytes[r]) != GS_OK)
              fail_msg("%s round %d: %s", spec, rd + 1, gs_last_error());
        }
      }
      for (int r = 0; r < RANKS; r++)
        assert_int_equal(gs_decompress_add(st[r], red, bytes[0], acc[r], n), GS_OK);
    } else {
      for (int r = 0; r < RANKS; r++)
        for (int q = 0; q < RANKS; q++)
          if (gs_decompress_add(st[r], pay[q], bytes[q], acc[r], n) != GS_OK)
            fail_msg("%s: %s", spec, gs_last_error());
    }
  }
  /* Every rank decoded the same sum. */
  for (int r = 1; r < RANKS; r++)
    for (size_t i = 0; i < n; i++)
      if (fabsf(acc[r][i] - acc[0][i]) > 1e-5f * (float)scale)
        fail_msg("%s: rank %d decoded %g at %zu, rank 0 %g", spec, r,
                 (double)acc[r][i], i, (double)acc[0][i]);
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double sum = acc[0][i];
    for (int r = 0; r < RANKS; r++) {
      const float *e = gs_compress_residual(st[r]);
      if (!info.lossless) assert_non_null(e);
      if (e) sum += e[i];
    }
    const double dev = fabs(sum - total[i]) / scale;
    if (dev > worst) worst = dev;
    if (dev > tol)
      fail_msg("%s n=%zu: decompressed + residuals = %.9g at %zu, gradients sum "
               "to %.9g (deviation %.3g of the scale, tolerance %g)", spec, n, sum,
               i, total[i], dev, tol);
  }
  for (int r = 0; r < RANKS; r++) {
    assert_int_equal(gs_compress_step(st[r]), (uint64_t)steps);
    gs_compress_state_destroy(st[r]);
    free(acc[r]);
    free(pay[r]);
  }
  free(red);
  free(g);
  free(total);
  gs_compressor_destroy(c);
  return worst;
}

static void test_error_feedback(void **unused) {
  (void)unused;
  const size_t sizes[] = {1, 7, 1000, 4099};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    for (size_t i = 0; i < NSPECS; i++) {
      /* Half precision sums round in the all-reduce itself (2^-11 and 2^-8
       * per addition), outside what the residual can account for. */
      double tol = strcmp(all_specs[i], "fp16") == 0   ? 3e-3
                   : strcmp(all_specs[i], "bf16") == 0 ? 2e-2
                                                      : 2e-5;
      ef_identity(all_specs[i], sizes[s], 6, tol);
    }
  }
}

/* Without error feedback there is no residual; top-k sends exactly the k
 * largest of g itself, each step afresh. */
static void test_no_ef(void **unused) {
  (void)unused;
  const size_t n = 5000;
  gs_compressor *c = make("topk:0.01");
  gs_compress_state *st = state(c, n, 0, 0, 1);
  assert_null(gs_compress_residual(st));
  float *g = malloc(n * sizeof *g);
  size_t cap = gs_compress_capacity(st, 0), bytes;
  void *pay = malloc(cap);
  uint32_t ref[50];
  for (int step = 0; step < 3; step++) {
    for (size_t i = 0; i < n; i++) g[i] = normal();
    assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
    assert_int_equal(bytes, 400);
    const uint32_t *idx;
    const float *val;
    size_t count;
    assert_int_equal(gs_sparse_view(pay, bytes, &idx, &val, &count), GS_OK);
    assert_int_equal(gs_topk_f32(g, n, 50, "exact", ref), GS_OK);
    float minsel = INFINITY;
    for (size_t i = 0; i < count; i++) {
      assert_true(val[i] == g[idx[i]]);
      minsel = fminf(minsel, fabsf(val[i]));
    }
    for (size_t i = 0; i < 50; i++) assert_true(fabsf(g[ref[i]]) >= minsel);
  }
  /* Nothing to return to. */
  uint32_t i0 = 3;
  float v0 = 1;
  assert_int_equal(gs_compress_return(st, &i0, &v0, 1), GS_OK);
  gs_compress_state_destroy(st);
  gs_compressor_destroy(c);
  free(g);
  free(pay);
}

/* gs_compress_return puts dropped entries back into the residual. */
static void test_return(void **unused) {
  (void)unused;
  const size_t n = 100;
  gs_compressor *c = make("gtopk:0.05");
  gs_compress_state *st = state(c, n, 1, 0, 1);
  float g[100];
  for (size_t i = 0; i < n; i++) g[i] = (float)i;
  size_t cap = gs_compress_capacity(st, 0), bytes;
  void *pay = malloc(cap);
  assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
  const uint32_t *idx;
  const float *val;
  size_t count;
  gs_sparse_view(pay, bytes, &idx, &val, &count);
  assert_int_equal(count, 5);
  const float *e = gs_compress_residual(st);
  for (size_t i = 0; i < count; i++) assert_true(e[idx[i]] == 0);
  assert_int_equal(gs_compress_return(st, idx, val, count), GS_OK);
  for (size_t i = 0; i < n; i++) assert_true(e[i] == g[i]);
  uint32_t bad = 100;
  assert_int_equal(gs_compress_return(st, &bad, val, 1), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "index 100"));
  gs_compress_state_destroy(st);
  gs_compressor_destroy(c);
  free(pay);
}

/* ---- DGC ----------------------------------------------------------------------- */

static void test_dgc_momentum(void **unused) {
  (void)unused;
  const size_t n = 20000;
  gs_compressor *c = make("dgc:0.01");
  gs_compress_opts o = gs_compress_opts_default();
  o.momentum = 0.9f;
  gs_compress_state *st;
  assert_int_equal(gs_compress_state_create(c, n, &o, &st), GS_OK);
  float *g = malloc(n * sizeof *g), *u = calloc(n, sizeof *u), *v = calloc(n, sizeof *v);
  unsigned char *sent = malloc(n);
  size_t cap = gs_compress_capacity(st, 0), bytes;
  void *pay = malloc(cap);
  for (int step = 0; step < 8; step++) {
    for (size_t i = 0; i < n; i++) {
      g[i] = normal();
      u[i] = 0.9f * u[i] + g[i];
      v[i] += u[i];
    }
    assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
    const uint32_t *idx;
    const float *val;
    size_t count;
    assert_int_equal(gs_sparse_view(pay, bytes, &idx, &val, &count), GS_OK);
    assert_true(count >= 1 && count <= (size_t)(1.3 * 200) + 1);
    memset(sent, 0, n);
    float minsent = INFINITY;
    for (size_t i = 0; i < count; i++) {
      if (sent[idx[i]]) fail_msg("dgc: index %u twice", idx[i]);
      sent[idx[i]] = 1;
      if (val[i] != v[idx[i]])
        fail_msg("dgc step %d: sent %g at %u, reference v = %g", step,
                 (double)val[i], idx[i], (double)v[idx[i]]);
      minsent = fminf(minsent, fabsf(val[i]));
      u[idx[i]] = 0; /* momentum factor masking */
      v[idx[i]] = 0;
    }
    const float *e = gs_compress_residual(st);
    for (size_t i = 0; i < n; i++) {
      if (!sent[i] && fabsf(v[i]) > minsent)
        fail_msg("dgc: unsent |v[%zu]| = %g above the smallest sent %g", i,
                 (double)fabsf(v[i]), (double)minsent);
      if (e[i] != v[i]) fail_msg("dgc: residual %g at %zu, reference %g",
                                 (double)e[i], i, (double)v[i]);
    }
  }
  gs_compress_state_destroy(st);
  free(g), free(u), free(v), free(sent), free(pay);
  gs_compressor_destroy(c);
}

/* topk and mstopk warm up as DGC does: exactly k = floor(d_t * n) pairs at
 * step t, d_t falling from 25% to the target, and error feedback keeps
 * whatever a step did not send (p = g + e equals sent + new residual). */
static void test_topk_warmup(void **unused) {
  (void)unused;
  const size_t n = 20000;
  const char *specs[] = {"topk:0.001", "mstopk:0.001"};
  for (size_t si = 0; si < 2; si++) {
    gs_compressor *c = make(specs[si]);
    gs_compress_opts o = gs_compress_opts_default();
    o.warmup_steps = 6;
    gs_compress_state *st;
    assert_int_equal(gs_compress_state_create(c, n, &o, &st), GS_OK);
    size_t cap = gs_compress_capacity(st, 0), bytes;
    assert_int_equal(cap, 8 * (size_t)(0.25 * n));
    float *g = malloc(n * sizeof *g), *p = malloc(n * sizeof *p);
    float *sent = malloc(n * sizeof *sent);
    void *pay = malloc(cap);
    size_t prev = n + 1;
    for (int step = 0; step < 8; step++) {
      const float *e = gs_compress_residual(st);
      for (size_t i = 0; i < n; i++) {
        g[i] = normal();
        p[i] = g[i] + e[i];
      }
      assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
      const double d = gs_compress_density(st);
      const double want = step >= 6 ? 0.001 : 0.25 * pow(0.001 / 0.25, step / 6.0);
      if (fabs(d - want) > 1e-12) fail_msg("%s step %d: density %g, expected %g",
                                           specs[si], step, d, want);
      const size_t k = (size_t)floor(want * (double)n);
      if (bytes != 8 * k) fail_msg("%s step %d: %zu pairs, expected %zu", specs[si],
                                   step, bytes / 8, k);
      assert_true(k < prev || step >= 6);
      prev = k;
      memset(sent, 0, n * sizeof *sent);
      assert_int_equal(gs_decompress_add(st, pay, bytes, sent, n), GS_OK);
      e = gs_compress_residual(st);
      for (size_t i = 0; i < n; i++)
        if (fabsf(sent[i] + e[i] - p[i]) > 1e-6f)
          fail_msg("%s step %d: sent + residual != g + old residual at %zu", specs[si],
                   step, i);
    }
    gs_compress_state_destroy(st);
    free(g), free(p), free(sent), free(pay);
    gs_compressor_destroy(c);
  }
}

/* gs_compress_set_lr: the first rate is only recorded; a change scales the
 * memory by old / new (the residual for topk, DGC's accumulated velocity),
 * so memory * lr stays what it was; a bad rate is refused and changes
 * nothing. */
static void test_set_lr_scales_memory(void **unused) {
  (void)unused;
  const size_t n = 5000;
  const char *specs[] = {"topk:0.01", "dgc:0.01", "qsgd:16"};
  for (size_t si = 0; si < 3; si++) {
    gs_compressor *c = make(specs[si]);
    gs_compress_opts o = gs_compress_opts_default();
    gs_compress_state *st;
    assert_int_equal(gs_compress_state_create(c, n, &o, &st), GS_OK);
    size_t cap = gs_compress_capacity(st, 0), bytes;
    float *g = malloc(n * sizeof *g), *before = malloc(n * sizeof *before);
    void *pay = malloc(cap);
    assert_int_equal(gs_compress_set_lr(st, 0.1), GS_OK);
    for (size_t i = 0; i < n; i++) g[i] = normal();
    assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
    const float *e = gs_compress_residual(st);
    assert_non_null(e);
    double norm = 0;
    for (size_t i = 0; i < n; i++) {
      before[i] = e[i];
      norm += fabs(e[i]);
    }
    if (!(norm > 0)) fail_msg("%s: empty memory after a lossy step", specs[si]);
    assert_int_equal(gs_compress_set_lr(st, 0.1), GS_OK); /* same rate: as is */
    for (size_t i = 0; i < n; i++) assert_true(e[i] == before[i]);
    assert_int_equal(gs_compress_set_lr(st, 0.025), GS_OK); /* rate / 4 */
    for (size_t i = 0; i < n; i++)
      if (fabsf(e[i] - 4.0f * before[i]) > 1e-6f * (1 + fabsf(before[i])))
        fail_msg("%s: residual[%zu] %g after the rate fell 4x, expected %g", specs[si], i,
                 (double)e[i], 4.0 * before[i]);
    assert_int_equal(gs_compress_set_lr(st, 0.0), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_compress_set_lr(st, NAN), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_compress_set_lr(st, -1.0), GS_ERR_INVALID_ARG);
    for (size_t i = 0; i < n; i++)
      if (fabsf(e[i] - 4.0f * before[i]) > 1e-6f * (1 + fabsf(before[i])))
        fail_msg("%s: a refused rate changed the memory", specs[si]);
    gs_compress_state_destroy(st);
    free(g), free(before), free(pay);
    gs_compressor_destroy(c);
  }
  assert_int_equal(gs_compress_set_lr(NULL, 0.1), GS_ERR_INVALID_ARG);
}

/* gs_compress_state_carry, as the engine uses it when a replan regroups
 * tensors. (1) A state that takes all of another's memory behaves exactly
 * like it: the same payloads on the same gradients (topk's residual and
 * warm-up step; DGC's momentum and velocity too). (2) Two states fused into
 * one: the residuals land at their offsets, the second rescaled to the
 * first's learning rate, and the warm-up goes on from the furthest step.
 * (3) Misuse is refused and changes nothing. */
static void run_steps(gs_compress_state *st, size_t n, int steps, void *pay, size_t cap) {
  float *g = malloc(n * sizeof *g);
  size_t bytes;
  for (int s = 0; s < steps; s++) {
    for (size_t i = 0; i < n; i++) g[i] = normal();
    assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
  }
  free(g);
}

/* gs_compress_set_segments: topk and mstopk select within each tensor of a
 * fused message exactly as separate states would (indices shifted, values
 * equal, residuals equal); the capacity counts each tensor's k; gtopk keeps
 * its merged selection; bad sizes are refused and change nothing. */
static void test_segments(void **unused) {
  (void)unused;
  enum { NSEG = 3 };
  const size_t sizes[NSEG] = {4000, 30, 900}, n = 4930;
  const char *specs[] = {"topk:0.01", "mstopk:0.01"};
  float *g = malloc(n * sizeof *g);
  for (size_t si = 0; si < 2; si++) {
    gs_compressor *c = make(specs[si]);
    gs_compress_opts o = gs_compress_opts_default();
    o.warmup_steps = 3;
    gs_compress_state *f, *sep[NSEG];
    assert_int_equal(gs_compress_state_create(c, n, &o, &f), GS_OK);
    const size_t merged_cap = gs_compress_capacity(f, 0);
    assert_int_equal(gs_compress_set_segments(f, sizes, NSEG), GS_OK);
    size_t want_cap = 0;
    for (int t = 0; t < NSEG; t++) {
      assert_int_equal(gs_compress_state_create(c, sizes[t], &o, &sep[t]), GS_OK);
      want_cap += gs_compress_capacity(sep[t], 0);
    }
    assert_int_equal(gs_compress_capacity(f, 0), want_cap);
    assert_true(want_cap >= merged_cap && want_cap <= merged_cap + 8 * NSEG);
    void *pay = malloc(want_cap), *one = malloc(want_cap);
    for (int step = 0; step < 5; step++) {
      /* The middle tensor is 1000x smaller: a merged selection skips it. */
      for (size_t i = 0; i < n; i++) g[i] = normal() * (i >= 4000 && i < 4030 ? 1e-3f : 1);
      size_t bytes;
      assert_int_equal(gs_compress(f, g, n, pay, want_cap, &bytes), GS_OK);
      const uint32_t *idx;
      const float *val;
      size_t count;
      assert_int_equal(gs_sparse_view(pay, bytes, &idx, &val, &count), GS_OK);
      size_t at = 0, off = 0;
      for (int t = 0; t < NSEG; t++) {
        size_t b1;
        assert_int_equal(gs_compress(sep[t], g + off, sizes[t], one, want_cap, &b1),
                         GS_OK);
        const uint32_t *i1;
        const float *v1;
        size_t c1;
        assert_int_equal(gs_sparse_view(one, b1, &i1, &v1, &c1), GS_OK);
        if (at + c1 > count) fail_msg("%s step %d: payload too short", specs[si], step);
        for (size_t j = 0; j < c1; j++)
          if (idx[at + j] != i1[j] + off || val[at + j] != v1[j])
            fail_msg("%s step %d tensor %d pair %zu: (%u, %g), alone (%u, %g)",
                     specs[si], step, t, j, idx[at + j], (double)val[at + j],
                     (unsigned)(i1[j] + off), (double)v1[j]);
        if (memcmp(gs_compress_residual(f) + off, gs_compress_residual(sep[t]),
                   sizes[t] * sizeof(float)) != 0)
          fail_msg("%s step %d tensor %d: residual differs", specs[si], step, t);
        at += c1;
        off += sizes[t];
      }
      assert_int_equal(at, count);
    }
    /* Refused: sizes not summing to n, a zero size, NULL; the segments hold. */
    const size_t bad_sum[2] = {4000, 900}, zero[4] = {4000, 0, 30, 900};
    assert_int_equal(gs_compress_set_segments(f, bad_sum, 2), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "4900"));
    assert_int_equal(gs_compress_set_segments(f, zero, 4), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_compress_set_segments(f, NULL, 2), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_compress_set_segments(NULL, sizes, NSEG), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_compress_capacity(f, 0), want_cap);
    /* Back to one segment. */
    assert_int_equal(gs_compress_set_segments(f, NULL, 0), GS_OK);
    assert_int_equal(gs_compress_capacity(f, 0), merged_cap);
    for (int t = 0; t < NSEG; t++) gs_compress_state_destroy(sep[t]);
    gs_compress_state_destroy(f);
    gs_compressor_destroy(c);
    free(pay);
    free(one);
  }
  /* gtopk merges globally: its selection ignores the tensors. */
  gs_compressor *c = make("gtopk:0.01");
  gs_compress_state *f = state(c, n, 1, 0, 1);
  const size_t cap = gs_compress_capacity(f, 0);
  assert_int_equal(gs_compress_set_segments(f, sizes, NSEG), GS_OK);
  assert_int_equal(gs_compress_capacity(f, 0), cap);
  gs_compress_state_destroy(f);
  gs_compressor_destroy(c);
  free(g);
}

static void test_state_carry(void **unused) {
  (void)unused;
  const size_t n1 = 3000, n2 = 2000;
  const char *specs[] = {"topk:0.01", "dgc:0.01"};
  for (size_t si = 0; si < 2; si++) {
    gs_compressor *c = make(specs[si]);
    gs_compress_opts o = gs_compress_opts_default();
    o.warmup_steps = 10;
    gs_compress_state *a, *b, *same, *f;
    assert_int_equal(gs_compress_state_create(c, n1, &o, &a), GS_OK);
    assert_int_equal(gs_compress_state_create(c, n2, &o, &b), GS_OK);
    assert_int_equal(gs_compress_state_create(c, n1, &o, &same), GS_OK);
    assert_int_equal(gs_compress_state_create(c, n1 + n2, &o, &f), GS_OK);
    const size_t cap = gs_compress_capacity(f, 0);
    void *pay = malloc(cap), *pay2 = malloc(cap);
    assert_int_equal(gs_compress_set_lr(a, 0.1), GS_OK);
    assert_int_equal(gs_compress_set_lr(b, 0.05), GS_OK);
    run_steps(a, n1, 3, pay, cap);
    run_steps(b, n2, 5, pay, cap);

    /* (1) */
    assert_int_equal(gs_compress_state_carry(same, 0, a, 0, n1), GS_OK);
    assert_int_equal(gs_compress_step(same), 3);
    float *g = malloc(n1 * sizeof *g);
    for (int step = 0; step < 3; step++) {
      for (size_t i = 0; i < n1; i++) g[i] = normal();
      size_t b1, b2;
      assert_int_equal(gs_compress(a, g, n1, pay, cap, &b1), GS_OK);
      assert_int_equal(gs_compress(same, g, n1, pay2, cap, &b2), GS_OK);
      if (b1 != b2 || memcmp(pay, pay2, b1) != 0)
        fail_msg("%s step %d: the state that took all the memory sent another "
                 "payload (%zu vs %zu bytes)", specs[si], step, b2, b1);
    }
    free(g);

    /* (2) a has now run 6 steps at lr 0.1, b 5 at lr 0.05. */
    assert_int_equal(gs_compress_state_carry(f, 0, a, 0, n1), GS_OK);
    assert_int_equal(gs_compress_state_carry(f, n1, b, 0, n2), GS_OK);
    assert_int_equal(gs_compress_step(f), 6);
    const float *ef = gs_compress_residual(f), *ea = gs_compress_residual(a),
                *eb = gs_compress_residual(b);
    for (size_t i = 0; i < n1; i++)
      if (ef[i] != ea[i]) fail_msg("%s: residual[%zu] not carried", specs[si], i);
    for (size_t i = 0; i < n2; i++)
      if (fabsf(ef[n1 + i] - 0.5f * eb[i]) > 1e-7f * (1 + fabsf(eb[i])))
        fail_msg("%s: residual[%zu] %g, expected %g (b's memory at a's rate)", specs[si],
                 n1 + i, (double)ef[n1 + i], 0.5 * eb[i]);
    /* The warm-up goes on at step 6, not from 25% again. */
    run_steps(f, n1 + n2, 1, pay, cap);
    const double want = 0.25 * pow(0.01 / 0.25, 6 / 10.0);
    if (fabs(gs_compress_density(f) - want) > 1e-12)
      fail_msg("%s: density %g after the carry, expected step 6's %g", specs[si],
               gs_compress_density(f), want);

    /* (3) */
    float before = gs_compress_residual(f)[0];
    gs_compressor *other = make("topk:0.02");
    gs_compress_state *x;
    assert_int_equal(gs_compress_state_create(other, n1, &o, &x), GS_OK);
    assert_int_equal(gs_compress_state_carry(f, 0, x, 0, n1), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_compress_state_carry(f, n2 + 1, a, 0, n1), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_compress_state_carry(f, 0, a, 1, n1), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_compress_state_carry(f, 0, f, 0, 1), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_compress_state_carry(NULL, 0, a, 0, 1), GS_ERR_INVALID_ARG);
    assert_true(gs_compress_residual(f)[0] == before);
    o.error_feedback = 0;
    gs_compress_state *noef;
    assert_int_equal(gs_compress_state_create(c, n1, &o, &noef), GS_OK);
    assert_int_equal(gs_compress_state_carry(noef, 0, a, 0, n1), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "error feedback"));
    gs_compress_state_destroy(noef);
    gs_compress_state_destroy(x);
    gs_compressor_destroy(other);
    gs_compress_state_destroy(a);
    gs_compress_state_destroy(b);
    gs_compress_state_destroy(same);
    gs_compress_state_destroy(f);
    free(pay), free(pay2);
    gs_compressor_destroy(c);
  }
}

/* gs_compress_memory_get/put, as a trainer's checkpoint uses them.
 * (1) A fresh state given all of another's memory continues exactly like it:
 * the same payloads on the same gradients, bitwise (topk's residual and
 * warm-up step, DGC's momentum and velocity, random-k's step-seeded
 * indices); without the put it would not. (2) A range lands at its offset
 * and reads back; memory at another rate is rescaled to the state's.
 * (3) The kinds each state keeps. (4) Misuse is refused and writes nothing. */
static void test_memory_get_put(void **unused) {
  (void)unused;
  const size_t n = 3000;
  const char *specs[] = {"topk:0.01", "dgc:0.01", "randomk:0.05", "qsgd:4"};
  float *g = malloc(n * sizeof *g), *res = malloc(n * sizeof *res),
        *mom = malloc(n * sizeof *mom);
  for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++) {
    gs_compressor *c = make(specs[si]);
    gs_compress_opts o = gs_compress_opts_default();
    o.warmup_steps = 10;
    gs_compress_state *a, *b, *fresh;
    assert_int_equal(gs_compress_state_create(c, n, &o, &a), GS_OK);
    assert_int_equal(gs_compress_state_create(c, n, &o, &b), GS_OK);
    assert_int_equal(gs_compress_state_create(c, n, &o, &fresh), GS_OK);
    const size_t cap = gs_compress_capacity(a, 0);
    void *pay = malloc(cap), *pay2 = malloc(cap), *pay3 = malloc(cap);
    assert_int_equal(gs_compress_set_lr(a, 0.1), GS_OK);
    run_steps(a, n, 4, pay, cap);

    /* (1) */
    gs_compress_memory m = {.residual = res, .momentum = mom};
    assert_int_equal(gs_compress_memory_get(a, 0, n, &m), GS_OK);
    assert_int_equal(m.have, gs_compress_memory_kinds(a));
    assert_int_equal(m.step, 4);
    assert_true(m.lr == 0.1);
    assert_int_equal(gs_compress_memory_put(b, 0, n, &m), GS_OK);
    assert_int_equal(gs_compress_step(b), 4);
    assert_int_equal(gs_compress_set_lr(b, 0.1), GS_OK);
    assert_int_equal(gs_compress_set_lr(fresh, 0.1), GS_OK);
    int fresh_differs = 0;
    for (int step = 0; step < 3; step++) {
      for (size_t i = 0; i < n; i++) g[i] = normal();
      size_t b1, b2, b3;
      assert_int_equal(gs_compress(a, g, n, pay, cap, &b1), GS_OK);
      assert_int_equal(gs_compress(b, g, n, pay2, cap, &b2), GS_OK);
      assert_int_equal(gs_compress(fresh, g, n, pay3, cap, &b3), GS_OK);
      if (b1 != b2 || memcmp(pay, pay2, b1) != 0)
        fail_msg("%s step %d: the state given the memory sent another payload (%zu vs "
                 "%zu bytes)", specs[si], step, b2, b1);
      fresh_differs |= b1 != b3 || memcmp(pay, pay3, b1) != 0;
    }
    if (!fresh_differs)
      fail_msg("%s: a state without the memory sent the same payloads: the test "
               "cannot tell", specs[si]);

    /* (2) The middle third into a fresh state at another rate: read back
     * at that state's rate; the rest untouched. */
    gs_compress_state *f;
    assert_int_equal(gs_compress_state_create(c, n, &o, &f), GS_OK);
    assert_int_equal(gs_compress_set_lr(f, 0.2), GS_OK);
    assert_int_equal(gs_compress_memory_get(a, 0, n, &m), GS_OK);
    assert_int_equal(gs_compress_memory_put(f, n / 3, n / 3, &m), GS_OK);
    float *back = calloc(n, sizeof *back), *backu = calloc(n, sizeof *backu);
    gs_compress_memory r = {.residual = back, .momentum = backu};
    assert_int_equal(gs_compress_memory_get(f, 0, n, &r), GS_OK);
    assert_true(r.lr == 0.2);
    assert_int_equal(r.step, 7);
    for (size_t i = 0; i < n; i++) {
      const int in = i >= n / 3 && i < 2 * (n / 3);
      if ((r.have & GS_COMPRESS_MEM_RESIDUAL) &&
          back[i] != (in ? res[i - n / 3] * 0.5f : 0.0f))
        fail_msg("%s: residual[%zu] %g read back, expected %g", specs[si], i,
                 (double)back[i], in ? 0.5 * res[i - n / 3] : 0.0);
      if ((r.have & GS_COMPRESS_MEM_MOMENTUM) && backu[i] != (in ? mom[i - n / 3] : 0.0f))
        fail_msg("%s: momentum[%zu] not in place", specs[si], i);
    }

    /* (4) Refused, nothing written. */
    const float before = back[n / 3];
    assert_int_equal(gs_compress_memory_put(f, n - 10, 11, &m), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_compress_memory_get(f, n + 1, 0, &r), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_compress_memory_put(NULL, 0, 1, &m), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_compress_memory_put(f, 0, 1, NULL), GS_ERR_INVALID_ARG);
    gs_compress_memory bad = m;
    bad.lr = -1;
    assert_int_equal(gs_compress_memory_put(f, n / 3, 10, &bad), GS_ERR_INVALID_ARG);
    bad = m;
    bad.residual = NULL;
    bad.have = GS_COMPRESS_MEM_RESIDUAL;
    assert_int_equal(gs_compress_memory_put(f, n / 3, 10, &bad), GS_ERR_INVALID_ARG);
    if (m.have & GS_COMPRESS_MEM_RESIDUAL) {
      res[5] = NAN;
      assert_int_equal(gs_compress_memory_put(f, n / 3, 10, &m), GS_ERR_INVALID_ARG);
      assert_non_null(strstr(gs_last_error(), "residual[5]"));
    }
    assert_int_equal(gs_compress_memory_get(f, 0, n, &r), GS_OK);
    assert_true(back[n / 3] == before);

    gs_compress_state_destroy(a);
    gs_compress_state_destroy(b);
    gs_compress_state_destroy(fresh);
    gs_compress_state_destroy(f);
    gs_compressor_destroy(c);
    free(pay), free(pay2), free(pay3), free(back), free(backu);
  }
  /* (3) */
  const struct {
    const char *spec;
    int ef;
    unsigned kinds;
  } k[] = {{"none", 1, 0},
           {"topk:0.01", 1, GS_COMPRESS_MEM_RESIDUAL},
           {"topk:0.01", 0, 0},
           {"dgc:0.01", 1, GS_COMPRESS_MEM_RESIDUAL | GS_COMPRESS_MEM_MOMENTUM},
           {"dgc:0.01", 0, GS_COMPRESS_MEM_MOMENTUM},
           {"powersgd:2", 1, GS_COMPRESS_MEM_RESIDUAL}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    gs_compressor *c = make(k[i].spec);
    gs_compress_state *st = state(c, 100, k[i].ef, 0, 1);
    if (gs_compress_memory_kinds(st) != k[i].kinds)
      fail_msg("%s (error feedback %d): kinds %u, expected %u", k[i].spec, k[i].ef,
               gs_compress_memory_kinds(st), k[i].kinds);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
  }
  assert_int_equal(gs_compress_memory_kinds(NULL), 0);
  free(g), free(res), free(mom);
}

static void test_dgc_warmup_and_clip(void **unused) {
  (void)unused;
  const size_t n = 40000;
  gs_compressor *c = make("dgc:0.001");
  gs_compress_opts o = gs_compress_opts_default();
  o.warmup_steps = 8;
  o.momentum = 0;
  gs_compress_state *st;
  assert_int_equal(gs_compress_state_create(c, n, &o, &st), GS_OK);
  /* Capacity covers the first step's 25%. */
  assert_true(gs_compress_capacity(st, 0) >= 8 * (size_t)(0.25 * n));
  float *g = malloc(n * sizeof *g);
  size_t cap = gs_compress_capacity(st, 0), bytes, prev = n;
  void *pay = malloc(cap);
  double prevd = 1;
  for (int step = 0; step < 10; step++) {
    for (size_t i = 0; i < n; i++) g[i] = normal();
    assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
    const double d = gs_compress_density(st);
    if (step == 0) assert_true(fabs(d - 0.25) < 1e-12);
    if (step >= 8) assert_true(fabs(d - 0.001) < 1e-12);
    assert_true(d <= prevd);
    const size_t k = (size_t)(d * n);
    if (bytes / 8 > (size_t)(1.3 * k) + 1 || bytes / 8 < 1)
      fail_msg("dgc warm-up step %d: %zu pairs for k = %zu", step, bytes / 8, k);
    if (step > 0 && step < 8) assert_true(bytes / 8 < prev);
    prev = bytes / 8;
    prevd = d;
  }
  gs_compress_state_destroy(st);
  /* Clipping: ||g|| is scaled to clip_norm / sqrt(nranks). */
  o = gs_compress_opts_default();
  o.momentum = 0;
  o.clip_norm = 0.01f;
  o.nranks = 4;
  assert_int_equal(gs_compress_state_create(c, n, &o, &st), GS_OK);
  double ss = 0;
  for (size_t i = 0; i < n; i++) ss += (double)g[i] * g[i];
  assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
  float *acc = calloc(n, sizeof *acc);
  assert_int_equal(gs_decompress_add(st, pay, bytes, acc, n), GS_OK);
  const float *e = gs_compress_residual(st);
  const double f = 0.005 / sqrt(ss);
  for (size_t i = 0; i < n; i++)
    if (fabs(acc[i] + e[i] - f * g[i]) > 1e-9)
      fail_msg("dgc clipping at %zu: %g, expected %g", i, (double)(acc[i] + e[i]),
               f * g[i]);
  gs_compress_state_destroy(st);
  gs_compressor_destroy(c);
  free(g), free(pay), free(acc);
}

/* ---- SIDCo --------------------------------------------------------------------- */

/* Each fit models exponential magnitudes exactly (exponential; generalised
 * Pareto with shape 0; gamma with shape 1), so one or two stages hit the
 * target count within sampling noise. */
static void test_sidco_fits(void **unused) {
  (void)unused;
  const size_t n = 200000;
  float *g = malloc(n * sizeof *g);
  for (size_t i = 0; i < n; i++) g[i] = (float)(-log(unif()) * 0.01) * ((rnd() & 1) ? 1 : -1);
  const char *specs[] = {"sidco:0.01", "sidco:0.01:gpareto", "sidco:0.01:gamma",
                         "sidco:0.001", "sidco:0.001:gpareto", "sidco:0.001:gamma"};
  for (size_t s = 0; s < 6; s++) {
    gs_compressor *c = make(specs[s]);
    gs_compress_state *st = state(c, n, 0, 0, 1);
    size_t cap = gs_compress_capacity(st, 0), bytes;
    void *pay = malloc(cap);
    assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
    const double k = strstr(specs[s], "0.001") ? 200 : 2000;
    const double got = (double)(bytes / 8);
    if (got < 0.75 * k || got > 1.25 * k)
      fail_msg("%s on exponential data: %g pairs, expected about %g", specs[s], got, k);
    /* A threshold selection: everything sent is at least everything kept. */
    const uint32_t *idx;
    const float *val;
    size_t count;
    gs_sparse_view(pay, bytes, &idx, &val, &count);
    float minsent = INFINITY;
    unsigned char *sent = calloc(n, 1);
    for (size_t i = 0; i < count; i++) {
      minsent = fminf(minsent, fabsf(val[i]));
      sent[idx[i]] = 1;
    }
    for (size_t i = 0; i < n; i++) assert_true(sent[i] || fabsf(g[i]) <= minsent);
    free(sent);
    free(pay);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
  }
  free(g);
}

/* ---- Unbiased quantisers ------------------------------------------------------- */

static void unbiased(const char *spec, double tol) {
  const size_t n = 256;
  const int steps = 4000;
  gs_compressor *c = make(spec);
  gs_compress_state *st = state(c, n, 0, 2, 4);
  float g[256], ref[256];
  double mean_g = 0, var_g = 0;
  for (size_t i = 0; i < n; i++) {
    g[i] = normal();
    mean_g += g[i];
  }
  mean_g /= n;
  for (size_t i = 0; i < n; i++) var_g += (g[i] - mean_g) * (g[i] - mean_g);
  /* TernGrad's expectation is the tensor clipped to 2.5 standard deviations. */
  const float clip = (float)(2.5 * sqrt(var_g / n));
  for (size_t i = 0; i < n; i++)
    ref[i] = strcmp(spec, "terngrad") == 0 ? fmaxf(-clip, fminf(clip, g[i])) : g[i];
  float *acc = calloc(n, sizeof *acc);
  size_t cap = gs_compress_capacity(st, 0), bytes;
  void *pay = malloc(cap), *first = malloc(cap);
  for (int s = 0; s < steps; s++) {
    assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
    if (s == 0) memcpy(first, pay, bytes);
    if (s == 1) assert_memory_not_equal(first, pay, bytes); /* fresh noise */
    assert_int_equal(gs_decompress_add(st, pay, bytes, acc, n), GS_OK);
  }
  double worst = 0;
  for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(acc[i] / steps - ref[i]));
  if (worst > tol)
    fail_msg("%s: mean of %d decompressions deviates by %g from the input "
             "(tolerance %g)", spec, steps, worst, tol);
  /* Determinism: a second state with the same seed and rank repeats the
   * first payload; another rank draws other noise. */
  gs_compress_state *again = state(c, n, 0, 2, 4), *other = state(c, n, 0, 1, 4);
  assert_int_equal(gs_compress(again, g, n, pay, cap, &bytes), GS_OK);
  assert_memory_equal(first, pay, bytes);
  assert_int_equal(gs_compress(other, g, n, pay, cap, &bytes), GS_OK);
  assert_memory_not_equal(first, pay, bytes);
  gs_compress_state_destroy(again);
  gs_compress_state_destroy(other);
  gs_compress_state_destroy(st);
  gs_compressor_destroy(c);
  free(acc), free(pay), free(first);
}

static void test_unbiased(void **unused) {
  (void)unused;
  /* Per-element standard error over 4000 draws: QSGD with 64 levels of
   * ||g|| ~ 16, at most 0.125 / sqrt(4000) = 0.002; TernGrad with s ~ 2.7,
   * at most 1.35 / sqrt(4000) = 0.021. Deterministic rounding would be off
   * by up to 0.25 and 1.3. */
  unbiased("qsgd:64", 0.012);
  unbiased("qsgd:64:32", 0.012); /* 8 buckets: smaller norms, less noise */
  unbiased("qsgd:1000", 0.002);
  unbiased("terngrad", 0.11);
}

/* Buckets keep a small layer fused with a large one apart: a message of
 * 1024 values of |g| ~ 1 then 1024 of |g| ~ 0.001. With buckets of 512 the
 * small half comes back at its own scale: relative error of one draw about
 * 0.6 (EF-signSGD, sqrt(1 - 2/pi); QSGD) or 1 (TernGrad's variance). With
 * one scale for the whole message it comes back at the large half's scale
 * (EF-signSGD: tens) or mostly as zeros (QSGD, TernGrad: 1 or more). */
static void test_buckets(void **unused) {
  (void)unused;
  const size_t n = 2048, h = 1024;
  float g[2048], out[2048];
  double small = 0;
  for (size_t i = 0; i < n; i++) {
    g[i] = normal() * (i < h ? 1.0f : 0.001f);
    if (i >= h) small += (double)g[i] * g[i];
  }
  small = sqrt(small);
  const struct {
    const char *spec;
    double lo, hi; /* the relative error's expected range */
  } cases[] = {{"efsignsgd", 0.4, 0.8}, {"efsignsgd:0", 5, 1e9},
               {"qsgd:16", 0.3, 0.9},   {"qsgd:16:0", 0.99, 1e9},
               {"terngrad", 0.6, 1.5},  {"terngrad:0", 0.99, 1e9}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    gs_compressor *c = make(cases[ci].spec);
    gs_compress_state *st = state(c, n, 0, 0, 1);
    size_t cap = gs_compress_capacity(st, 0), bytes;
    void *pay = malloc(cap);
    assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
    memset(out, 0, sizeof out);
    assert_int_equal(gs_decompress_add(st, pay, bytes, out, n), GS_OK);
    double err = 0;
    for (size_t i = h; i < n; i++) err += (double)(out[i] - g[i]) * (out[i] - g[i]);
    const double rel = sqrt(err) / small;
    if (rel < cases[ci].lo || rel > cases[ci].hi)
      fail_msg("%s: the small half comes back with relative error %g, expected "
               "%g..%g", cases[ci].spec, rel, cases[ci].lo, cases[ci].hi);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
    free(pay);
  }
}

/* Error feedback with the unbiased quantizers stays bounded: with one scale
 * for 4096 values, QSGD with 4 levels has variance omega ~ 16 times the
 * signal, and an unscaled residual would grow about sqrt(1 + omega) times
 * per step (to infinity in 100 steps). Scaled by 1 / (1 + omega) it stays
 * within a few dozen gradients' norm. */
static void test_ef_bounded(void **unused) {
  (void)unused;
  const size_t n = 4096;
  const char *specs[] = {"qsgd:4:0", "qsgd:16", "terngrad:0", "terngrad"};
  float *g = malloc(n * sizeof *g);
  for (size_t si = 0; si < 4; si++) {
    gs_compressor *c = make(specs[si]);
    gs_compress_state *st = state(c, n, 1, 0, 1);
    size_t cap = gs_compress_capacity(st, 0), bytes;
    void *pay = malloc(cap);
    double worst = 0;
    for (int step = 0; step < 100; step++) {
      double gn = 0, en = 0;
      for (size_t i = 0; i < n; i++) {
        g[i] = normal();
        gn += (double)g[i] * g[i];
      }
      assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
      const float *e = gs_compress_residual(st);
      for (size_t i = 0; i < n; i++) en += (double)e[i] * e[i];
      worst = fmax(worst, sqrt(en / gn));
    }
    if (!(worst < 100))
      fail_msg("%s with error feedback: the residual reached %g times the gradient's "
               "norm", specs[si], worst);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
    free(pay);
  }
  free(g);
}

/* ---- PowerSGD ------------------------------------------------------------------ */

/* On 3 ranks whose gradients share a column space of rank 2, rank-2
 * PowerSGD reconstructs the sum in one step from any warm start. */
static void test_powersgd_low_rank(void **unused) {
  (void)unused;
  const size_t R = 40, C = 30, n = R * C;
  gs_compressor *c = make("powersgd:2");
  gs_compress_opts o = gs_compress_opts_default();
  o.rows = R;
  gs_compress_state *st[RANKS];
  float A[40 * 2], *g[RANKS], *sum = calloc(n, sizeof *sum);
  for (size_t i = 0; i < R * 2; i++) A[i] = normal();
  for (int r = 0; r < RANKS; r++) {
    o.rank = r;
    o.nranks = RANKS;
    assert_int_equal(gs_compress_state_create(c, n, &o, &st[r]), GS_OK);
    g[r] = malloc(n * sizeof(float));
    float B[30 * 2];
    for (size_t i = 0; i < C * 2; i++) B[i] = normal();
    for (size_t i = 0; i < R; i++)
      for (size_t j = 0; j < C; j++) {
        g[r][i * C + j] = A[i * 2] * B[j * 2] + A[i * 2 + 1] * B[j * 2 + 1];
        sum[i * C + j] += g[r][i * C + j];
      }
  }
  size_t p_bytes = gs_compress_capacity(st[0], 0), q_bytes = gs_compress_capacity(st[0], 1);
  assert_int_equal(p_bytes, 4 * R * 2);
  assert_int_equal(q_bytes, 4 * C * 2);
  float *pay[RANKS], *red = malloc(4 * n), *out = calloc(n, sizeof *out);
  size_t bytes;
  for (int r = 0; r < RANKS; r++) {
    pay[r] = malloc(4 * n);
    assert_int_equal(gs_compress(st[r], g[r], n, pay[r], 4 * n, &bytes), GS_OK);
    assert_int_equal(bytes, p_bytes);
  }
  memcpy(red, pay[0], p_bytes);
  for (int r = 1; r < RANKS; r++) gs_reduce_local(red, pay[r], R * 2, GS_F32, GS_SUM);
  for (int r = 0; r < RANKS; r++) {
    assert_int_equal(gs_compress_round(st[r], 1, red, p_bytes, pay[r], 4 * n, &bytes),
                     GS_OK);
    assert_int_equal(bytes, q_bytes);
  }
  memcpy(red, pay[0], q_bytes);
  for (int r = 1; r < RANKS; r++) gs_reduce_local(red, pay[r], C * 2, GS_F32, GS_SUM);
  assert_int_equal(gs_decompress_add(st[0], red, q_bytes, out, n), GS_OK);
  double err = 0, norm = 0;
  for (size_t i = 0; i < n; i++) {
    err += (out[i] - sum[i]) * (double)(out[i] - sum[i]);
    norm += (double)sum[i] * sum[i];
  }
  if (sqrt(err / norm) > 1e-4)
    fail_msg("powersgd: relative reconstruction error %g", sqrt(err / norm));
  for (int r = 0; r < RANKS; r++) {
    const float *e = gs_compress_residual(st[r]);
    double en = 0;
    for (size_t i = 0; i < n; i++) en += (double)e[i] * e[i];
    if (sqrt(en / norm) > 1e-4) fail_msg("powersgd: residual %g", sqrt(en / norm));
    /* The round must be called in order. */
    assert_int_equal(gs_compress_round(st[r], 2, red, q_bytes, pay[r], 4 * n, &bytes),
                     GS_ERR_INVALID_ARG);
    gs_compress_state_destroy(st[r]);
    free(g[r]);
    free(pay[r]);
  }
  free(sum), free(red), free(out);
  gs_compressor_destroy(c);
}

/* ---- random-k and determinism -------------------------------------------------- */

static void test_randomk(void **unused) {
  (void)unused;
  const size_t n = 1000;
  gs_compressor *c = make("randomk:0.1");
  gs_compress_state *a = state(c, n, 0, 0, 2), *b = state(c, n, 0, 1, 2);
  float g[1000];
  for (size_t i = 0; i < n; i++) g[i] = (float)i + 1;
  size_t cap = gs_compress_capacity(a, 0), bytes;
  float *pa = malloc(cap), *pb = malloc(cap), *acc = calloc(n, sizeof *acc);
  uint64_t seen_steps = 0;
  for (int step = 0; step < 4; step++) {
    assert_int_equal(gs_compress(a, g, n, pa, cap, &bytes), GS_OK);
    assert_int_equal(gs_compress(b, g, n, pb, cap, &bytes), GS_OK);
    assert_int_equal(bytes, 400);
    /* Both ranks picked the same indices: the same values of the same g. */
    assert_memory_equal(pa, pb, bytes);
    memset(acc, 0, n * sizeof *acc);
    assert_int_equal(gs_decompress_add(a, pa, bytes, acc, n), GS_OK);
    size_t nz = 0;
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++)
      if (acc[i] != 0) {
        assert_true(acc[i] == g[i]);
        nz++;
        h = h * 31 + i;
      }
    assert_int_equal(nz, 100); /* distinct indices */
    assert_true(h != seen_steps); /* another choice each step */
    seen_steps = h;
  }
  gs_compress_state_destroy(a);
  gs_compress_state_destroy(b);
  gs_compressor_destroy(c);
  free(pa), free(pb), free(acc);
}

/* A damped residual: e <- gamma * e + g, then e -= D(C(e)). Random-k damps
 * by default (its undamped residual diverged the cnn); the others keep
 * gamma = 1 unless the options say; bad gammas are refused. */
static void test_ef_decay(void **unused) {
  (void)unused;
  const size_t n = 2000;
  const char *specs[] = {"randomk:0.01", "topk:0.01", "qsgd:4"};
  const float gammas[] = {0, 0.75f, 0};     /* 0: the kind's default */
  const float expect[] = {GS_COMPRESS_RANDOMK_EF_DECAY, 0.75f, 1.0f};
  float *g = malloc(n * sizeof *g), *ref = calloc(n, sizeof *ref),
        *dec = malloc(n * sizeof *dec);
  for (size_t t = 0; t < 3; t++) {
    gs_compressor *c = make(specs[t]);
    gs_compress_opts o = gs_compress_opts_default();
    o.ef_decay = gammas[t];
    gs_compress_state *st = NULL;
    assert_int_equal(gs_compress_state_create(c, n, &o, &st), GS_OK);
    size_t cap = gs_compress_capacity(st, 0), bytes;
    void *pay = malloc(cap);
    memset(ref, 0, n * sizeof *ref);
    for (int step = 0; step < 40; step++) {
      for (size_t i = 0; i < n; i++) {
        g[i] = 1.0f + 0.25f * normal();
        ref[i] = expect[t] * ref[i] + g[i];
      }
      assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_OK);
      memset(dec, 0, n * sizeof *dec);
      assert_int_equal(gs_decompress_add(st, pay, bytes, dec, n), GS_OK);
      const float *e = gs_compress_residual(st);
      for (size_t i = 0; i < n; i++) {
        ref[i] -= dec[i];
        if (fabsf(e[i] - ref[i]) > 1e-5f * (1 + fabsf(ref[i])))
          fail_msg("%s gamma %g step %d: residual[%zu] = %g, expected %g", specs[t],
                   (double)expect[t], step, i, (double)e[i], (double)ref[i]);
      }
    }
    if (t == 0) {
      /* Damped, an element random-k has not sent holds at most about
       * 1/(1 - gamma) steps' gradients (each about 1, below 2), not 40. */
      const float *e = gs_compress_residual(st);
      for (size_t i = 0; i < n; i++)
        assert_true(e[i] < 2.0f / (1.0f - GS_COMPRESS_RANDOMK_EF_DECAY));
    }
    free(pay);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
  }
  gs_compressor *c = make("randomk:0.01");
  const float bad[] = {-0.1f, 1.5f, NAN};
  for (size_t i = 0; i < 3; i++) {
    gs_compress_opts o = gs_compress_opts_default();
    o.ef_decay = bad[i];
    gs_compress_state *st = (gs_compress_state *)&o; /* must become NULL */
    assert_int_equal(gs_compress_state_create(c, n, &o, &st), GS_ERR_INVALID_ARG);
    assert_null(st);
    assert_non_null(strstr(gs_last_error(), "ef_decay"));
  }
  gs_compressor_destroy(c);
  free(g), free(ref), free(dec);
}

static void test_determinism(void **unused) {
  (void)unused;
  const size_t n = 3001;
  float *g = malloc(n * sizeof *g);
  for (size_t s = 0; s < NSPECS; s++) {
    gs_compressor *c = make(all_specs[s]);
    gs_compress_state *a = state(c, n, 1, 1, 3), *b = state(c, n, 1, 1, 3);
    size_t cap = gs_compress_capacity(a, 0) + gs_compress_capacity(a, 0) % 4;
    void *pa = malloc(cap + 4), *pb = malloc(cap + 4);
    for (int step = 0; step < 3; step++) {
      for (size_t i = 0; i < n; i++) g[i] = normal();
      size_t ba, bb;
      assert_int_equal(gs_compress(a, g, n, pa, cap, &ba), GS_OK);
      assert_int_equal(gs_compress(b, g, n, pb, cap, &bb), GS_OK);
      assert_int_equal(ba, bb);
      if (memcmp(pa, pb, ba) != 0) fail_msg("%s: payloads differ", all_specs[s]);
      if (gs_compress_capacity(a, 1) > 0) { /* PowerSGD: finish the step */
        size_t c1 = gs_compress_capacity(a, 1);
        void *qa = malloc(c1), *qb = malloc(c1);
        assert_int_equal(gs_compress_round(a, 1, pa, ba, qa, c1, &ba), GS_OK);
        assert_int_equal(gs_compress_round(b, 1, pb, bb, qb, c1, &bb), GS_OK);
        assert_memory_equal(qa, qb, ba);
        free(qa), free(qb);
      }
    }
    gs_compress_state_destroy(a);
    gs_compress_state_destroy(b);
    gs_compressor_destroy(c);
    free(pa), free(pb);
  }
  free(g);
}

/* ---- Failure paths ---------------------------------------------------------------- */

/* An infinity is refused as a NaN is, by every kind, naming the element,
 * with the state unchanged: before, topk kept -nan in its residual, qsgd
 * and efsignsgd sent nan or inf, terngrad sent 0, fp16 sent 65504 and kept
 * inf, powersgd failed in LAPACK. */
static void test_non_finite(void **unused) {
  (void)unused;
  const size_t n = 64;
  float g[64];
  for (size_t k = 0; k < NSPECS; k++) {
    gs_compressor *c = make(all_specs[k]);
    gs_compress_state *st = state(c, n, 1, 0, 1);
    size_t cap = gs_compress_capacity(st, 0), bytes = 0;
    uint32_t *pay = malloc(cap + 4);
    const float bad[3] = {INFINITY, -INFINITY, NAN};
    const char *word[3] = {"grad[5] is infinite (+inf)", "grad[5] is infinite (-inf)",
                           "grad[5] is NaN"};
    for (int b = 0; b < 3; b++) {
      for (size_t i = 0; i < n; i++) g[i] = (float)i - 20;
      g[5] = bad[b];
      assert_int_equal(gs_compress(st, g, n, pay, cap, &bytes), GS_ERR_INVALID_ARG);
      if (strstr(gs_last_error(), word[b]) == NULL)
        fail_msg("%s: '%s' not in: %s", all_specs[k], word[b], gs_last_error());
      assert_int_equal(gs_compress_step(st), 0);
      const float *e = gs_compress_residual(st);
      for (size_t i = 0; e != NULL && i < n; i++)
        if (e[i] != 0) fail_msg("%s: residual[%zu] = %g", all_specs[k], i, e[i]);
    }
    g[5] = 1;
    if (gs_compress(st, g, n, pay, cap, &bytes) != GS_OK)
      fail_msg("%s: a finite gradient after: %s", all_specs[k], gs_last_error());
    free(pay);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
  }
}

/* Finite gradients near FLT_MAX: each step either succeeds with a finite
 * payload and residual, or fails and leaves the state as it was (no NaN or
 * infinity kept in the residual with GS_OK). The second step's g + e
 * overflows float where the first sent little. */
static void test_huge_finite(void **unused) {
  (void)unused;
  const size_t n = 64;
  float g[64], before[64], out[64];
  for (size_t k = 0; k < NSPECS; k++) {
    gs_compressor *c = make(all_specs[k]);
    gs_compress_state *st = state(c, n, 1, 0, 1);
    size_t cap = gs_compress_capacity(st, 0), bytes = 0;
    uint32_t *pay = malloc(cap + 4);
    for (int step = 0; step < 3; step++) {
      for (size_t i = 0; i < n; i++)
        g[i] = (i % 3 == 0 ? 3.0e38f : 1.0f) * (i % 2 ? -1.0f : 1.0f);
      const float *e = gs_compress_residual(st);
      if (e != NULL) memcpy(before, e, sizeof before);
      const int s0 = gs_compress_step(st);
      gs_status s = gs_compress(st, g, n, pay, cap, &bytes);
      e = gs_compress_residual(st);
      if (s != GS_OK) {
        if (strstr(gs_last_error(), all_specs[k]) == NULL)
          fail_msg("%s: the error does not name the compressor: %s", all_specs[k],
                   gs_last_error());
        assert_int_equal(gs_compress_step(st), s0);
        if (e != NULL && memcmp(before, e, sizeof before) != 0)
          fail_msg("%s step %d: failed (%s) but changed the residual", all_specs[k],
                   step, gs_last_error());
        continue;
      }
      for (size_t i = 0; e != NULL && i < n; i++)
        if (!isfinite(e[i]))
          fail_msg("%s step %d: GS_OK but residual[%zu] = %g", all_specs[k], step, i,
                   (double)e[i]);
      gs_compressor_info info;
      assert_int_equal(gs_compressor_info_get(c, &info), GS_OK);
      if (info.rounds == 1) {
        memset(out, 0, sizeof out);
        if (gs_decompress_add(st, pay, bytes, out, n) == GS_OK)
          for (size_t i = 0; i < n; i++)
            if (!isfinite(out[i]))
              fail_msg("%s step %d: GS_OK but decoded[%zu] = %g", all_specs[k], step,
                       i, (double)out[i]);
      }
    }
    for (size_t i = 0; i < n; i++) g[i] = 1.0f;
    if (gs_compress(st, g, n, pay, cap, &bytes) != GS_OK)
      fail_msg("%s: a small gradient after: %s", all_specs[k], gs_last_error());
    free(pay);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
  }
}

static void test_failures(void **unused) {
  (void)unused;
  const size_t n = 100;
  gs_compressor *c = make("topk:0.1");
  gs_compress_state *st = state(c, n, 1, 0, 1);
  float g[100];
  for (size_t i = 0; i < n; i++) g[i] = (float)i;
  uint32_t pay32[64];
  size_t bytes;
  /* Wrong n, small buffer, NULLs. */
  assert_int_equal(gs_compress(st, g, 99, pay32, sizeof pay32, &bytes), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "created for n = 100"));
  assert_int_equal(gs_compress(st, g, n, pay32, 79, &bytes), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "at least 80"));
  assert_int_equal(gs_compress(st, NULL, n, pay32, 80, &bytes), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_compress((gs_compress_state *)st, g, n, (char *)pay32 + 1, 80,
                               &bytes), GS_ERR_INVALID_ARG);
  /* NaN: refused, and the residual and step are untouched. */
  g[42] = NAN;
  assert_int_equal(gs_compress(st, g, n, pay32, sizeof pay32, &bytes), GS_ERR_ARG);
  assert_non_null(strstr(gs_last_error(), "grad[42] is NaN"));
  assert_int_equal(gs_compress_step(st), 0);
  for (size_t i = 0; i < n; i++) assert_true(gs_compress_residual(st)[i] == 0);
  g[42] = 42;
  assert_int_equal(gs_compress(st, g, n, pay32, sizeof pay32, &bytes), GS_OK);
  /* Corrupt sparse payloads: index out of range, odd size, too large. */
  float out[100] = {0};
  pay32[0] = 100;
  assert_int_equal(gs_decompress_add(st, pay32, bytes, out, n), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "index 100"));
  assert_int_equal(gs_decompress_add(st, pay32, 12, out, n), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_decompress_add(st, pay32, 88, out, n), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_decompress_add(st, pay32, 0, out, n), GS_OK); /* none sent */
  /* A single-round compressor has no round 1. */
  assert_int_equal(gs_compress_round(st, 1, pay32, 80, pay32, 80, &bytes),
                   GS_ERR_INVALID_ARG);
  gs_compress_state_destroy(st);
  gs_compressor_destroy(c);
  /* Opaque payloads carry their count: decoding against another tensor fails. */
  c = make("qsgd:8");
  gs_compress_state *a = state(c, 100, 1, 0, 1), *b = state(c, 92, 1, 0, 1);
  unsigned char buf[200];
  assert_int_equal(gs_compress(a, g, 100, buf, sizeof buf, &bytes), GS_OK);
  assert_int_equal(gs_decompress_add(b, buf, bytes - 8, out, 92), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "encodes 100 elements"));
  assert_int_equal(gs_decompress_add(a, buf, bytes - 1, out, 100), GS_ERR_INVALID_ARG);
  gs_compress_state_destroy(a);
  gs_compress_state_destroy(b);
  gs_compressor_destroy(c);
  /* Options out of range. */
  c = make("dgc:0.1");
  gs_compress_opts o = gs_compress_opts_default();
  o.momentum = 1.5f;
  assert_int_equal(gs_compress_state_create(c, 10, &o, &st), GS_ERR_INVALID_ARG);
  o = gs_compress_opts_default();
  o.rank = 4;
  o.nranks = 4;
  assert_int_equal(gs_compress_state_create(c, 10, &o, &st), GS_ERR_INVALID_ARG);
  gs_compressor_destroy(c);
  c = make("powersgd:2");
  o = gs_compress_opts_default();
  o.rows = 11;
  assert_int_equal(gs_compress_state_create(c, 10, &o, &st), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "rows = 11"));
  gs_compressor_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_specs),
      cmocka_unit_test(test_info_and_bytes),
      cmocka_unit_test(test_error_feedback),
      cmocka_unit_test(test_no_ef),
      cmocka_unit_test(test_return),
      cmocka_unit_test(test_dgc_momentum),
      cmocka_unit_test(test_dgc_warmup_and_clip),
      cmocka_unit_test(test_topk_warmup),
      cmocka_unit_test(test_set_lr_scales_memory),
      cmocka_unit_test(test_state_carry),
      cmocka_unit_test(test_memory_get_put),
      cmocka_unit_test(test_segments),
      cmocka_unit_test(test_sidco_fits),
      cmocka_unit_test(test_unbiased),
      cmocka_unit_test(test_buckets),
      cmocka_unit_test(test_ef_bounded),
      cmocka_unit_test(test_powersgd_low_rank),
      cmocka_unit_test(test_randomk),
      cmocka_unit_test(test_ef_decay),
      cmocka_unit_test(test_determinism),
      cmocka_unit_test(test_failures),
      cmocka_unit_test(test_non_finite),
      cmocka_unit_test(test_huge_finite),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
