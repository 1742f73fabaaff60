/*
 * gs_compress_allreduce on any number of ranks (ctest runs 1, 2, 3, 4, 5
 * and 8), for every compressor:
 *   - against a reference built from the compressor alone: a second state
 *     per rank compresses the same input, every rank's payload is gathered
 *     (gradsync's all-gatherv), summed in rank order for summable payloads,
 *     and decoded, exactly as the definition says; sparse and opaque
 *     payloads must match bit for bit, summed ones within the rounding of
 *     a different summation order;
 *   - the result is the same bits on every rank;
 *   - the error-feedback residual matches the reference state's;
 *   - `none` is bitwise the dense all-reduce (GS_AVG);
 *   - gTop-k's tree merge: the same bits on every rank, at most k entries;
 *   - one rank alone failing (NaN in its buffer) fails every rank with a
 *     clear message, and the communicator stays usable (no rank is left in
 *     a collective the others skipped).
 * Output: "FAIL rank R case C: ..." per failing case; exit status non-zero
 * if any case failed on any rank.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync.h"
#include "mrt.h"

static uint64_t rng;
static double urand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

/* Roughly normal values (sum of uniforms), some of them large. */
static void fill(float *x, size_t n, uint64_t seed) {
  rng = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    double v = urand() + urand() + urand() - 1.5;
    if (urand() < 0.01) v *= 20;
    x[i] = (float)v;
  }
}

/* ---- The reference ----------------------------------------------------------- */

/* Gathers every rank's payload (bytes may differ per rank) into *all, with
 * counts and 8-aligned displacements. */
static int gather_payloads(const void *mine, size_t bytes, char **all, size_t *counts,
                           size_t *displs) {
  int64_t b = (int64_t)bytes, *sizes = malloc((size_t)g_size * sizeof *sizes);
  if (gs_allgather(g_comm, &b, sizes, 1, GS_I64, GS_ALGO_AUTO) != GS_OK) return -1;
  size_t total = 0;
  for (int r = 0; r < g_size; r++) {
    counts[r] = (size_t)sizes[r];
    displs[r] = total;
    total += (counts[r] + 7) / 8 * 8;
  }
  free(sizes);
  *all = malloc(total ? total : 8);
  return gs_allgatherv(g_comm, mine, bytes, *all, counts, displs, GS_U8, GS_ALGO_AUTO) ==
                 GS_OK
             ? 0
             : -1;
}

/* The definition of one averaged step through compressor c: ref gets the
 * mean of the decoded contributions. */
static int reference(const gs_compressor *c, gs_compress_state *st, const float *in,
                     size_t n, float *ref) {
  gs_compressor_info info;
  gs_compressor_info_get(c, &info);
  size_t counts[16], displs[16];
  size_t cap = gs_compress_capacity(st, 0), bytes = 0;
  char *own = malloc(cap ? cap : 8), *all = NULL;
  if (gs_compress(st, in, n, own, cap, &bytes) != GS_OK) return -1;
  memset(ref, 0, n * sizeof *ref);
  if (info.exchange != GS_EXCHANGE_DENSE) {
    if (gather_payloads(own, bytes, &all, counts, displs)) return -1;
    for (int r = 0; r < g_size; r++)
      if (gs_decompress_add(st, all + displs[r], counts[r], ref, n) != GS_OK) return -1;
  } else {
    size_t es = gs_dtype_size(info.dense_dtype);
    char *sum = NULL;
    for (int round = 0; round < info.rounds; round++) {
      if (round > 0) {
        size_t cap_r = gs_compress_capacity(st, round);
        free(own);
        own = malloc(cap_r ? cap_r : 8);
        if (gs_compress_round(st, round, sum, bytes, own, cap_r, &bytes) != GS_OK)
          return -1;
      }
      if (gather_payloads(own, bytes, &all, counts, displs)) return -1;
      free(sum);
      sum = malloc(bytes ? bytes : 8);
      memcpy(sum, all, bytes);
      for (int r = 1; r < g_size; r++)
        gs_reduce_local(sum, all + displs[r], bytes / es, info.dense_dtype, GS_SUM);
      free(all);
      all = NULL;
    }
    if (gs_decompress_add(st, sum, bytes, ref, n) != GS_OK) return -1;
    free(sum);
  }
  gs_scale_div(ref, n, GS_F32, g_size);
  free(own);
  free(all);
  return 0;
}

/* 1 if every rank holds the same bytes as rank 0. */
static int same_on_every_rank(const float *x, size_t n) {
  float *r0 = malloc((n ? n : 1) * sizeof *r0);
  memcpy(r0, x, n * sizeof *x);
  gs_bcast(g_comm, r0, n, GS_F32, 0, GS_ALGO_AUTO);
  int32_t same = memcmp(r0, x, n * sizeof *x) == 0, all = 0;
  gs_allreduce(g_comm, &same, &all, 1, GS_I32, GS_SUM, GS_ALGO_AUTO);
  free(r0);
  return all == g_size;
}

static double max_diff(const float *a, const float *b, size_t n) {
  double d = 0;
  for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - (double)b[i]));
  return d;
}

/* The largest |input| on any rank: sums in another order differ by at most
 * a few roundings of the contributions, whatever the sum's own size. */
static double input_scale(const float *x, size_t n) {
  double m = 0, all = 0;
  for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
  gs_allreduce(g_comm, &m, &all, 1, GS_F64, GS_MAX, GS_ALGO_AUTO);
  return all > 0 ? all : 1;
}

static const char *specs[] = {"none",    "fp16",      "bf16",      "topk:0.05",
                              "mstopk:0.05", "randomk:0.1", "dgc:0.05", "sidco:0.05",
                              "qsgd:16", "terngrad",  "efsignsgd", "powersgd:2"};
#define NSPECS (sizeof specs / sizeof specs[0])

static void test_against_reference(void) {
  const size_t sizes[] = {1, 1000, 4099};
  for (size_t s = 0; s < NSPECS; s++) {
    for (size_t z = 0; z < 3; z++) {
      size_t n = sizes[z];
      begin_case("%s n=%zu", specs[s], n);
      gs_compressor *c = NULL;
      if (gs_compressor_create(specs[s], &c) != GS_OK) {
        fail("create: %s", gs_last_error());
        end_case();
        continue;
      }
      gs_compressor_info info;
      gs_compressor_info_get(c, &info);
      gs_compress_opts o = gs_compress_opts_default();
      o.rank = g_rank;
      o.nranks = g_size;
      gs_compress_state *a = NULL, *b = NULL;
      gs_compress_state_create(c, n, &o, &a);
      gs_compress_state_create(c, n, &o, &b);
      float *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out),
            *ref = malloc(n * sizeof *ref);
      gs_xchg_ws *ws = NULL;
      gs_xchg_ws_create(&ws);
      gs_xchg_stats stats = {0};
      gs_xchg x = gs_compress_default_xchg(&info);
      /* Relative to the largest input: exact for gathered payloads (the
       * same decoding order); a few ulps per rank for summed ones. */
      double tol = info.exchange != GS_EXCHANGE_DENSE ? 0
                   : info.dense_dtype == GS_F32      ? 1e-6 * g_size
                   : info.dense_dtype == GS_F16      ? 2.0 * g_size / 1024
                                                     : 2.0 * g_size / 128;
      for (int step = 0; step < 3 && !g_case_failed; step++) {
        fill(in, n, (uint64_t)(g_rank * 1000 + s * 10 + z) * 7 + (uint64_t)step);
        memcpy(out, in, n * sizeof *in);
        gs_status st = gs_compress_allreduce(g_comm, c, a, out, n, x, step ? ws : NULL,
                                             &stats);
        CHECK(st == GS_OK, "step %d: %s", step, gs_last_error());
        if (st != GS_OK) break;
        CHECK(reference(c, b, in, n, ref) == 0, "reference: %s", gs_last_error());
        double scale = input_scale(in, n);
        double err = max_diff(out, ref, n) / scale;
        CHECK(err <= tol, "step %d: relative error %.3g against the reference "
              "(tolerance %.3g)", step, err, tol);
        CHECK(same_on_every_rank(out, n), "step %d: ranks hold different results",
              step);
        const float *ea = gs_compress_residual(a), *eb = gs_compress_residual(b);
        CHECK((ea == NULL) == (eb == NULL), "residual present on one state only");
        if (ea && eb)
          CHECK(max_diff(ea, eb, n) / scale <= (info.rounds > 1 ? 1e-3 : tol),
                "step %d: residuals differ (%.3g)", step, max_diff(ea, eb, n) / scale);
      }
      CHECK(stats.calls == 3 && stats.dense_bytes == 3 * n * 4,
            "stats: %llu calls, %llu dense bytes", (unsigned long long)stats.calls,
            (unsigned long long)stats.dense_bytes);
      if (info.lossless == 0 && n >= 1000 && strncmp(specs[s], "randomk", 7) != 0)
        CHECK(stats.payload_bytes < stats.dense_bytes, "payload %llu >= dense %llu",
              (unsigned long long)stats.payload_bytes,
              (unsigned long long)stats.dense_bytes);
      gs_xchg_ws_destroy(ws);
      free(in);
      free(out);
      free(ref);
      gs_compress_state_destroy(a);
      gs_compress_state_destroy(b);
      gs_compressor_destroy(c);
      end_case();
    }
  }
}

/* `none` through the exchange is the dense all-reduce, bit for bit. */
static void test_none_is_dense(void) {
  const size_t sizes[] = {1, 777, 100003};
  for (size_t z = 0; z < 3; z++) {
    size_t n = sizes[z];
    begin_case("none bitwise n=%zu", n);
    gs_compressor *c = NULL;
    gs_compress_state *st = NULL;
    gs_compressor_create("none", &c);
    gs_compress_state_create(c, n, NULL, &st);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    fill(a, n, (uint64_t)g_rank * 31 + z);
    memcpy(b, a, n * sizeof *a);
    CHECK(gs_compress_allreduce(g_comm, c, st, a, n, GS_XCHG_ALLREDUCE, NULL, NULL) ==
              GS_OK, "%s", gs_last_error());
    CHECK(gs_allreduce(g_comm, GS_IN_PLACE, b, n, GS_F32, GS_AVG, GS_ALGO_AUTO) == GS_OK,
          "%s", gs_last_error());
    CHECK(memcmp(a, b, n * sizeof *a) == 0, "differs from the dense all-reduce");
    free(a);
    free(b);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
    end_case();
  }
}

/* One rank alone fails to compress: every rank fails, the others naming it
 * (gathered payloads) or saying another rank failed (summed payloads); the
 * next exchange works again on every rank. */
static void test_one_rank_fails(void) {
  const char *cases[] = {"topk:0.1", "qsgd:8", "fp16", "powersgd:1"};
  const int bad = g_size - 1;
  for (size_t k = 0; k < 4; k++) {
    begin_case("one rank fails: %s", cases[k]);
    size_t n = 500;
    gs_compressor *c = NULL;
    gs_compress_state *st = NULL;
    gs_compressor_create(cases[k], &c);
    gs_compressor_info info;
    gs_compressor_info_get(c, &info);
    gs_compress_state_create(c, n, NULL, &st);
    float *x = malloc(n * sizeof *x);
    fill(x, n, (uint64_t)g_rank + 5);
    if (g_rank == bad) x[123] = NAN;
    gs_status s = gs_compress_allreduce(g_comm, c, st, x, n, gs_compress_default_xchg(&info),
                                        NULL, NULL);
    CHECK(s != GS_OK, "a rank's NaN went unnoticed");
    const char *msg = gs_last_error();
    if (g_rank == bad)
      CHECK(strstr(msg, "NaN") || strstr(msg, "nan") || strstr(msg, "123"),
            "the failing rank's message does not say why: %s", msg);
    else if (info.exchange != GS_EXCHANGE_DENSE) {
      char want[32];
      snprintf(want, sizeof want, "rank %d", bad);
      CHECK(strstr(msg, want) != NULL, "message does not name %s: %s", want, msg);
    } else {
      CHECK(strstr(msg, "another rank") != NULL, "message: %s", msg);
    }
    fill(x, n, (uint64_t)g_rank + 6);
    s = gs_compress_allreduce(g_comm, c, st, x, n, gs_compress_default_xchg(&info), NULL,
                              NULL);
    CHECK(s == GS_OK, "the next exchange failed: %s", gs_last_error());
    free(x);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
    end_case();
  }
  /* An exchange the payload cannot take. */
  begin_case("unsupported exchange");
  gs_compressor *c = NULL;
  gs_compress_state *st = NULL;
  gs_compressor_create("topk:0.1", &c);
  gs_compress_state_create(c, 10, NULL, &st);
  float x[10] = {0};
  CHECK(gs_compress_allreduce(g_comm, c, st, x, 10, GS_XCHG_ALLREDUCE, NULL, NULL) ==
            GS_ERR_UNSUPPORTED, "top-k through an all-reduce was accepted");
  CHECK(strstr(gs_last_error(), "topk") && strstr(gs_last_error(), "allreduce"),
        "message: %s", gs_last_error());
  gs_compress_state_destroy(st);
  gs_compressor_destroy(c);
  end_case();
}

/* gTop-k through the exchange layer: the same bits on every rank, at most
 * k non-zeros, fewer bytes than dense; one rank failing fails every rank
 * naming it. */
static void test_gtopk(void) {
  const char *cases[] = {"gtopk:0.02", "topk:0.02"};
  for (int k = 0; k < 2; k++) {
    size_t n = 5003;
    begin_case("%s through gtopk", cases[k]);
    gs_compressor *c = NULL;
    gs_compress_state *st = NULL;
    gs_compressor_create(cases[k], &c);
    gs_compressor_info info;
    gs_compressor_info_get(c, &info);
    CHECK(k == 1 || gs_compress_default_xchg(&info) == GS_XCHG_GTOPK,
          "gtopk's default exchange is %s", gs_xchg_name(gs_compress_default_xchg(&info)));
    gs_compress_state_create(c, n, NULL, &st);
    size_t kk = gs_compress_capacity(st, 0) / 8;
    float *x = malloc(n * sizeof *x);
    gs_xchg_stats stats = {0};
    for (int step = 0; step < 3; step++) {
      fill(x, n, (uint64_t)g_rank * 77 + (uint64_t)step);
      CHECK(gs_compress_allreduce(g_comm, c, st, x, n, GS_XCHG_GTOPK, NULL, &stats) ==
                GS_OK, "step %d: %s", step, gs_last_error());
      size_t nnz = 0;
      for (size_t i = 0; i < n; i++) nnz += x[i] != 0;
      CHECK(nnz <= kk && nnz > 0, "step %d: %zu non-zeros, k = %zu", step, nnz, kk);
      CHECK(same_on_every_rank(x, n), "step %d: ranks differ", step);
    }
    CHECK(stats.payload_bytes * 10 < stats.dense_bytes, "payload %llu, dense %llu",
          (unsigned long long)stats.payload_bytes, (unsigned long long)stats.dense_bytes);
    fill(x, n, 1);
    if (g_rank == g_size - 1) x[7] = NAN;
    gs_status s = gs_compress_allreduce(g_comm, c, st, x, n, GS_XCHG_GTOPK, NULL, NULL);
    char want[32];
    snprintf(want, sizeof want, "rank %d", g_size - 1);
    CHECK(s != GS_OK, "a rank's NaN went unnoticed");
    if (g_rank != g_size - 1)
      CHECK(strstr(gs_last_error(), want) != NULL, "message does not name %s: %s", want,
            gs_last_error());
    fill(x, n, 2);
    CHECK(gs_compress_allreduce(g_comm, c, st, x, n, GS_XCHG_GTOPK, NULL, NULL) == GS_OK,
          "the next exchange failed: %s", gs_last_error());
    free(x);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
    end_case();
  }
}

/* gTop-k's error feedback conserves: over a few steps, what the exchange
 * delivered (the average times the rank count) plus what every rank's
 * residual holds equals the sum of every rank's inputs, entry by entry. A
 * value a merge dropped whose index a later merge took back with other
 * ranks' values alone was once neither delivered nor put back (3 or more
 * ranks). */
static void test_gtopk_conserves(void) {
  const size_t n = 1000;
  begin_case("gtopk:0.01 conserves sent + residual");
  gs_compressor *c = NULL;
  gs_compress_state *st = NULL;
  CHECK(gs_compressor_create("gtopk:0.01", &c) == GS_OK, "%s", gs_last_error());
  CHECK(gs_compress_state_create(c, n, NULL, &st) == GS_OK, "%s", gs_last_error());
  float *x = malloc(n * sizeof *x);
  double *in = calloc(n, sizeof *in), *out = calloc(n, sizeof *out);
  double *mag = calloc(n, sizeof *mag), *res = malloc(n * sizeof *res);
  for (int step = 0; step < 4 && !g_case_failed; step++) {
    fill(x, n, (uint64_t)g_rank * 131 + (uint64_t)step + 5);
    for (size_t i = 0; i < n; i++) in[i] += x[i], mag[i] += fabs(x[i]);
    CHECK(gs_compress_allreduce(g_comm, c, st, x, n, GS_XCHG_GTOPK, NULL, NULL) ==
              GS_OK, "step %d: %s", step, gs_last_error());
    for (size_t i = 0; i < n; i++) out[i] += (double)x[i] * g_size;
  }
  const float *e = gs_compress_residual(st);
  for (size_t i = 0; i < n; i++) res[i] = in[i] - e[i];
  gs_allreduce(g_comm, GS_IN_PLACE, res, n, GS_F64, GS_SUM, GS_ALGO_AUTO);
  gs_allreduce(g_comm, GS_IN_PLACE, mag, n, GS_F64, GS_SUM, GS_ALGO_AUTO);
  for (size_t i = 0; i < n && !g_case_failed; i++)
    CHECK(fabs(res[i] - out[i]) <= 1e-5 * (mag[i] + 1), "index %zu: inputs less "
          "residuals %g, delivered %g", i, res[i], out[i]);
  free(x);
  free(in);
  free(out);
  free(mag);
  free(res);
  gs_compress_state_destroy(st);
  gs_compressor_destroy(c);
  end_case();
}

/* A half-precision sum that overflows anywhere is an error on every rank,
 * naming the element, not inf or NaN returned with GS_OK (until 2026-12-07
 * only element 0 was looked at); one that does not overflow is exact. */
static void test_fp16_overflow(void) {
  if (g_size < 2) return;
  const size_t n = 8;
  for (int pos = 0; pos < 2; pos++) {
    begin_case("fp16 sum overflowing at element %d", pos ? 7 : 5);
    gs_compressor *c = NULL;
    gs_compress_state *st = NULL;
    gs_compressor_create("fp16", &c);
    gs_compress_state_create(c, n, NULL, &st);
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 0};
    /* +-40000 on every rank: +-inf in half precision from 2 ranks on,
     * whatever the order of the sum */
    if (pos == 0) x[5] = 40000;
    else x[7] = -40000;
    gs_status s = gs_compress_allreduce(g_comm, c, st, x, n, GS_XCHG_ALLREDUCE, NULL, NULL);
    CHECK(s != GS_OK, "an overflowed fp16 sum returned GS_OK: x[5] %g x[7] %g", x[5], x[7]);
    char want[32];
    snprintf(want, sizeof want, "element %d", pos ? 7 : 5);
    CHECK(strstr(gs_last_error(), "overflowed") && strstr(gs_last_error(), want),
          "message: %s", gs_last_error());
    float y[8] = {1, 2, 3, 4, 5, 6, 7, 0};
    CHECK(gs_compress_allreduce(g_comm, c, st, y, n, GS_XCHG_ALLREDUCE, NULL, NULL) == GS_OK,
          "the next exchange failed: %s", gs_last_error());
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
    end_case();
  }
}

/* gTop-k under a density warm-up: each step's global set has at most that
 * step's k entries (until 2026-12-07 k stayed the warm-up's first, 25%,
 * for the whole run: every rank's pairs were kept, 8000 where k was
 * 2000). */
static void test_gtopk_warmup(void) {
  const size_t n = 20000;
  begin_case("topk:0.001 through gtopk with a density warm-up of 2 steps");
  gs_compressor *c = NULL;
  gs_compress_state *st = NULL;
  gs_compress_opts o = gs_compress_opts_default();
  o.warmup_steps = 2;
  CHECK(gs_compressor_create("topk:0.001", &c) == GS_OK, "%s", gs_last_error());
  CHECK(gs_compress_state_create(c, n, &o, &st) == GS_OK, "%s", gs_last_error());
  float *x = malloc(n * sizeof *x);
  gs_xchg_stats stats = {0};
  for (int step = 0; step < 5 && !g_case_failed; step++) {
    fill(x, n, (uint64_t)g_rank * 31 + (uint64_t)step + 9);
    uint64_t before = stats.payload_bytes;
    CHECK(gs_compress_allreduce(g_comm, c, st, x, n, GS_XCHG_GTOPK, NULL, &stats) == GS_OK,
          "step %d: %s", step, gs_last_error());
    /* the warm-up's density: 0.25 down to 0.001 exponentially over 2 steps */
    double d = step >= 2 ? 0.001 : 0.25 * pow(0.001 / 0.25, step / 2.0);
    size_t nnz = 0, k = (size_t)(d * (double)n);
    for (size_t i = 0; i < n; i++) nnz += x[i] != 0;
    CHECK(nnz > 0 && nnz <= k, "step %d: %zu non-zeros, this step's k = %zu", step, nnz, k);
    CHECK(stats.payload_bytes - before <= 8 * k, "step %d: a payload of %llu bytes, k = %zu",
          step, (unsigned long long)(stats.payload_bytes - before), k);
    CHECK(same_on_every_rank(x, n), "step %d: ranks differ", step);
  }
  free(x);
  gs_compress_state_destroy(st);
  gs_compressor_destroy(c);
  end_case();
}

/* Ranks that disagree on the tensor's size or the compressor through the
 * all-gather exchange: every rank fails naming the rank, and the next
 * exchange works (until 2026-12-07 some ranks failed and the others
 * returned GS_OK, or all returned GS_OK with mixed payloads decoded). */
static void test_gather_mismatch(void) {
  if (g_size < 2) return;
  const int odd = g_size - 1;
  for (int what = 0; what < 3; what++) {
    begin_case("all-gather exchange, rank %d with another %s", odd,
               what == 0 ? "size" : what == 1 ? "density" : "density by 1e-8");
    const char *spec = g_rank == odd && what == 1 ? "topk:0.2"
                       : g_rank == odd && what == 2 ? "topk:0.10000001" : "topk:0.1";
    size_t n = g_rank == odd && what == 0 ? 999 : 1000;
    gs_compressor *c = NULL;
    gs_compress_state *st = NULL;
    CHECK(gs_compressor_create(spec, &c) == GS_OK, "%s", gs_last_error());
    CHECK(gs_compress_state_create(c, n, NULL, &st) == GS_OK, "%s", gs_last_error());
    float *x = malloc(1000 * sizeof *x);
    fill(x, n, (uint64_t)g_rank + 3);
    gs_status s = gs_compress_allreduce(g_comm, c, st, x, n, GS_XCHG_ALLGATHER, NULL, NULL);
    char want[32];
    snprintf(want, sizeof want, "rank %d", odd);
    CHECK(s == GS_ERR_MISMATCH && strstr(gs_last_error(), want),
          "status %d: %s", (int)s, s == GS_OK ? "(ok)" : gs_last_error());
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
    /* the communicator is still usable */
    CHECK(gs_compressor_create("topk:0.1", &c) == GS_OK, "%s", gs_last_error());
    CHECK(gs_compress_state_create(c, 1000, NULL, &st) == GS_OK, "%s", gs_last_error());
    fill(x, 1000, (uint64_t)g_rank + 4);
    CHECK(gs_compress_allreduce(g_comm, c, st, x, 1000, GS_XCHG_ALLGATHER, NULL, NULL) == GS_OK,
          "the next exchange failed: %s", gs_last_error());
    free(x);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
    end_case();
  }
}

/* An empty tensor goes through every kind (PowerSGD's failed: its second
 * round got no buffer). */
static void test_empty(void) {
  for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
    begin_case("%s on 0 elements", specs[k]);
    gs_compressor *c = NULL;
    gs_compress_state *st = NULL;
    gs_compressor_create(specs[k], &c);
    gs_compressor_info info;
    gs_compressor_info_get(c, &info);
    CHECK(gs_compress_state_create(c, 0, NULL, &st) == GS_OK, "%s", gs_last_error());
    float x[1] = {42};
    CHECK(gs_compress_allreduce(g_comm, c, st, x, 0, gs_compress_default_xchg(&info), NULL,
                                NULL) == GS_OK, "%s", gs_last_error());
    CHECK(x[0] == 42, "an element past the end written: %g", x[0]);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
    end_case();
  }
}

int main(int argc, char **argv) {
  mrt_init(&argc, &argv);
  if (g_size > 16) {
    fprintf(stderr, "FAIL: at most 16 ranks\n");
    return 1;
  }
  test_against_reference();
  test_none_is_dense();
  test_one_rank_fails();
  test_gtopk();
  test_gtopk_conserves();
  test_fp16_overflow();
  test_gtopk_warmup();
  test_empty();
  test_gather_mismatch();
  gs_comm_destroy(g_comm);
  return mrt_finish();
}
