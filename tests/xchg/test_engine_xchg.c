/*
 * The engine with compression, under mpirun (tests/xchg/CMakeLists.txt):
 *
 *   test_engine_xchg main   every group compressed (top-k with error
 *                           feedback, policy single): each iteration's f32
 *                           result is bitwise the exchange layer's on the
 *                           fused buffer with a state of its own, the f16
 *                           tensor stays dense (bitwise gs_allreduce AVG),
 *                           bytes sent < dense bytes; a compression spec or
 *                           error-feedback flag that differs on one rank,
 *                           and a bad spec on one rank, fail creation on
 *                           every rank; required compression with dear is
 *                           refused; with compress_merged, bitwise the
 *                           exchange layer's selection over the whole buffer
 *   test_engine_xchg groups topk: one fused message (single) and one
 *                           message per tensor (wfbp) give bitwise the same
 *                           results (selection within each tensor); merged
 *                           selection does not
 *   test_engine_xchg dense  auto:topk on a fast network (GRADSYNC_BETA
 *                           small): the plan keeps every group dense
 *   test_engine_xchg sparse auto:topk on a slow network: the large tensor
 *                           goes compressed
 *   test_engine_xchg regroup the mgwfbp plan after the warm-up merges the
 *                           compressed tensors: their density warm-up goes
 *                           on and their error-feedback memory is kept
 *                           (the results sum to the gradients' sum)
 *   test_engine_xchg resume per-tensor memory read from one engine and set on
 *                           a new one (another plan) continues bitwise as
 *                           the uninterrupted run (gs_engine_memory_get/set)
 * Prints "FAIL rank R ..." on a failed check; exit status non-zero.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync.h"

static int g_rank, g_size, g_fail;
static gs_comm *g_comm;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      printf("FAIL rank %d line %d: ", g_rank, __LINE__); \
      printf(__VA_ARGS__);                                 \
      printf("\n");                                        \
      fflush(stdout);                                      \
      g_fail++;                                            \
    }                                                      \
  } while (0)

static uint64_t rng;
static float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 - 0.5);
}

enum { NT = 4 };
static const size_t counts[NT] = {300, 5000, 17, 20000};

static void fill(float *const bufs[NT], uint16_t *half, size_t nhalf, int iter) {
  rng = (uint64_t)(g_rank + 1) * 1000003u + (uint64_t)iter * 7919u;
  for (int t = 0; t < NT; t++)
    for (size_t i = 0; i < counts[t]; i++) bufs[t][i] = frand();
  for (size_t i = 0; i < nhalf; i++) half[i] = (uint16_t)(0x3C00 + (i % 64)); /* ~1 */
}

static void test_main(int merged) {
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = "single";
  cfg.compress = "topk:0.05";
  cfg.compress_merged = merged;
  gs_engine *e = NULL;
  CHECK(gs_engine_create(g_comm, &cfg, &e) == GS_OK, "create: %s", gs_last_error());
  if (e == NULL) return;
  float *bufs[NT], *ins[NT];
  size_t total = 0;
  int ids[NT + 1];
  for (int t = 0; t < NT; t++) {
    bufs[t] = malloc(counts[t] * sizeof(float));
    ins[t] = malloc(counts[t] * sizeof(float));
    total += counts[t];
  }
  const size_t nhalf = 64;
  uint16_t half[64], half_ref[64];
  char name[16];
  for (int t = 0; t < NT; t++) {
    snprintf(name, sizeof name, "w%d", t);
    gs_engine_register(e, name, bufs[t], counts[t], GS_F32, &ids[t]);
  }
  gs_engine_register(e, "h", half, nhalf, GS_F16, &ids[NT]);
  /* The reference: the exchange layer on the fused f32 buffer (fusion
   * order is registration order) with its own state, selecting within each
   * tensor unless the selection is merged. */
  gs_compressor *c = NULL;
  gs_compress_state *st = NULL;
  gs_compressor_create("topk:0.05", &c);
  gs_compress_opts o = gs_compress_opts_default();
  o.rank = g_rank;
  o.nranks = g_size;
  gs_compress_state_create(c, total, &o, &st);
  if (!merged) gs_compress_set_segments(st, counts, NT);
  float *fused = malloc(total * sizeof(float));
  for (int it = 0; it < 4; it++) {
    fill(bufs, half, nhalf, it);
    for (int t = 0; t < NT; t++) memcpy(ins[t], bufs[t], counts[t] * sizeof(float));
    memcpy(half_ref, half, sizeof half);
    for (int t = NT; t >= 0; t--) gs_engine_grad_ready(e, ids[t]);
    CHECK(gs_engine_wait(e) == GS_OK, "wait: %s", gs_last_error());
    size_t off = 0;
    for (int t = 0; t < NT; t++) {
      memcpy(fused + off, ins[t], counts[t] * sizeof(float));
      off += counts[t];
    }
    /* The exchange the plan chose for the group (all-gather or gTop-k). */
    gs_plan *pl = NULL;
    gs_engine_get_plan(e, &pl);
    gs_xchg how = pl && pl->group_xchg ? (gs_xchg)pl->group_xchg[0] : GS_XCHG_COUNT;
    gs_plan_free(pl);
    CHECK(how == GS_XCHG_ALLGATHER || how == GS_XCHG_GTOPK, "iteration %d: group sent "
          "through %s", it, gs_xchg_name(how));
    CHECK(gs_compress_allreduce(g_comm, c, st, fused, total, how, NULL, NULL) == GS_OK,
          "reference: %s", gs_last_error());
    off = 0;
    for (int t = 0; t < NT; t++) {
      CHECK(memcmp(fused + off, bufs[t], counts[t] * sizeof(float)) == 0,
            "iteration %d: tensor w%d differs from the exchange layer's result", it, t);
      off += counts[t];
    }
    gs_allreduce(g_comm, GS_IN_PLACE, half_ref, nhalf, GS_F16, GS_AVG, GS_ALGO_AUTO);
    CHECK(memcmp(half, half_ref, sizeof half) == 0,
          "iteration %d: the f16 tensor is not the dense average", it);
  }
  gs_engine_stats s;
  gs_engine_get_stats(e, &s);
  CHECK(s.compressed_messages == 4, "%llu compressed messages, expected 4",
        (unsigned long long)s.compressed_messages);
  CHECK(s.compressed_groups == 1, "%zu compressed groups", s.compressed_groups);
  CHECK(s.bytes_sent > 0 && s.bytes_sent * 4 < s.bytes_dense,
        "bytes sent %llu, dense %llu", (unsigned long long)s.bytes_sent,
        (unsigned long long)s.bytes_dense);
  gs_plan *pl = NULL;
  gs_engine_get_plan(e, &pl);
  CHECK(pl && pl->group_xchg && pl->group_xchg[0] >= 0,
        "the plan does not show the compressed group");
  gs_plan_free(pl);
  CHECK(gs_engine_destroy(e) == GS_OK, "destroy: %s", gs_last_error());
  for (int t = 0; t < NT; t++) {
    free(bufs[t]);
    free(ins[t]);
  }
  free(fused);
  gs_compress_state_destroy(st);
  gs_compressor_destroy(c);
  if (merged) return;

  /* A spec, an error-feedback flag, a selection, or a bad spec on one rank. */
  const int odd = g_size - 1;
  for (int k = 0; k < 4 && g_size > 1; k++) {
    gs_engine_config_init(&cfg);
    cfg.compress = "topk:0.1";
    if (g_rank == odd) {
      if (k == 0) cfg.compress = "auto:topk:0.2";
      if (k == 1) cfg.error_feedback = 0;
      if (k == 2) cfg.compress = "topk:2";
      if (k == 3) cfg.compress_merged = 1;
    }
    e = NULL;
    gs_status r = gs_engine_create(g_comm, &cfg, &e);
    CHECK(r != GS_OK && e == NULL, "case %d: creation succeeded", k);
    const char *msg = gs_last_error();
    char want[64];
    snprintf(want, sizeof want, "rank %d", odd);
    if (k != 2) {
      const char *what = k == 0 ? "auto:topk:0.2" : k == 1 ? "error feedback" : "merged";
      CHECK(r == GS_ERR_MISMATCH, "case %d: status %d", k, (int)r);
      CHECK(strstr(msg, want) && strstr(msg, what), "case %d: message: %s", k, msg);
    } else if (g_rank == odd) {
      CHECK(r == GS_ERR_INVALID_ARG && strstr(msg, "topk:2"), "bad spec: %d %s", (int)r,
            msg);
    } else {
      CHECK(strstr(msg, want) != NULL, "bad spec elsewhere: %s", msg);
    }
    gs_engine_destroy(e);
  }
  gs_engine_config_init(&cfg);
  cfg.compress = "topk:0.1";
  cfg.policy = "dear";
  e = NULL;
  CHECK(gs_engine_create(g_comm, &cfg, &e) == GS_ERR_INVALID_ARG &&
            strstr(gs_last_error(), "dear"), "required compression with dear: %s",
        gs_last_error());
  gs_engine_destroy(e);
}

/* auto:topk with wfbp planned at once from the communicator's cost model
 * (GRADSYNC_ALPHA / GRADSYNC_BETA): on a fast network every group stays
 * dense, on a slow one the 4 MB tensor goes compressed. */
static void test_auto(int want_compressed) {
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = "wfbp";
  cfg.warmup_iters = 0;
  cfg.compress = "auto:topk:0.01";
  gs_engine *e = NULL;
  CHECK(gs_engine_create(g_comm, &cfg, &e) == GS_OK, "create: %s", gs_last_error());
  if (e == NULL) return;
  size_t big = 1u << 20, small = 100;
  float *a = calloc(big, sizeof(float)), *b = calloc(small, sizeof(float));
  int ia, ib;
  gs_engine_register(e, "big", a, big, GS_F32, &ia);
  gs_engine_register(e, "small", b, small, GS_F32, &ib);
  for (int it = 0; it < 2; it++) {
    for (size_t i = 0; i < big; i++) a[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
    gs_engine_grad_ready(e, ib);
    gs_engine_grad_ready(e, ia);
    CHECK(gs_engine_wait(e) == GS_OK, "wait: %s", gs_last_error());
  }
  gs_engine_stats s;
  gs_engine_get_stats(e, &s);
  gs_plan *pl = NULL;
  gs_engine_get_plan(e, &pl);
  int big_compressed = 0, small_compressed = 0;
  for (size_t g = 0; pl && g < pl->ngroups; g++) {
    int z = pl->group_xchg && pl->group_xchg[g] >= 0;
    for (size_t k = pl->offsets[g]; k < pl->offsets[g + 1]; k++) {
      if (pl->tensors[k] == 0) big_compressed = z;
      else small_compressed = z;
    }
  }
  CHECK(big_compressed == want_compressed, "the 4 MB tensor: compressed %d, expected %d",
        big_compressed, want_compressed);
  /* On the slow network the small tensor may go either way: the model has
   * the same latency terms for both and fewer bytes compressed. */
  CHECK(want_compressed || !small_compressed, "the 400-byte tensor went compressed");
  CHECK(want_compressed ? s.bytes_sent * 10 < s.bytes_dense
                        : s.bytes_sent == s.bytes_dense,
        "bytes sent %llu, dense %llu", (unsigned long long)s.bytes_sent,
        (unsigned long long)s.bytes_dense);
  gs_plan_free(pl);
  CHECK(gs_engine_destroy(e) == GS_OK, "destroy: %s", gs_last_error());
  free(a);
  free(b);
}

/* A replan that regroups compressed tensors carries their memory: under
 * mgwfbp the wfbp warm-up plan (a message per tensor) gives way to merged
 * groups. The density warm-up goes on (the first merged step sends
 * 8 * floor(d(step) * count) bytes per tensor, not 25% of it), and
 * no unsent gradient is lost: after zero gradients drain the residuals, the
 * sum of every iteration's result equals the sum of the ranks' average
 * gradients. */
static void test_regroup(void) {
  enum { WARM = 3, ZWARM = 6, GRAD_ITERS = 8, ITERS = 400 };
  gs_compress_opts zo = gs_compress_opts_default();
  zo.warmup_steps = ZWARM;
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = "mgwfbp";
  cfg.warmup_iters = WARM;
  cfg.replan_interval = 1000000; /* only the plan after the warm-up */
  cfg.compress = "topk:0.01";
  cfg.compress_opts = &zo;
  gs_engine *e = NULL;
  CHECK(gs_engine_create(g_comm, &cfg, &e) == GS_OK, "create: %s", gs_last_error());
  if (e == NULL) return;
  float *bufs[NT];
  double *sum_out[NT], *sum_in[NT];
  int ids[NT];
  size_t total = 0;
  char name[16];
  for (int t = 0; t < NT; t++) {
    bufs[t] = malloc(counts[t] * sizeof(float));
    sum_out[t] = calloc(counts[t], sizeof(double));
    sum_in[t] = calloc(counts[t], sizeof(double));
    snprintf(name, sizeof name, "w%d", t);
    gs_engine_register(e, name, bufs[t], counts[t], GS_F32, &ids[t]);
    total += counts[t];
  }
  uint64_t sent_before = 0;
  size_t groups = NT;
  int merged_at = -1;
  for (int it = 0; it < ITERS; it++) {
    /* Every rank's gradients, to sum their average here. */
    for (int r = 0; r < g_size; r++) {
      rng = (uint64_t)(r + 1) * 1000003u + (uint64_t)it * 7919u;
      for (int t = 0; t < NT; t++)
        for (size_t i = 0; i < counts[t]; i++) {
          const float v = it < GRAD_ITERS ? frand() : 0.0f;
          if (r == g_rank) bufs[t][i] = v;
          sum_in[t][i] += (double)v / g_size;
        }
    }
    for (int t = NT - 1; t >= 0; t--) gs_engine_grad_ready(e, ids[t]);
    CHECK(gs_engine_wait(e) == GS_OK, "wait: %s", gs_last_error());
    for (int t = 0; t < NT; t++)
      for (size_t i = 0; i < counts[t]; i++) sum_out[t][i] += bufs[t][i];
    gs_engine_stats s;
    gs_engine_get_stats(e, &s);
    gs_plan *pl = NULL;
    gs_engine_get_plan(e, &pl);
    if (merged_at < 0 && pl && pl->ngroups < groups) {
      merged_at = it;
      /* The first step of the merged plan: each merged group's warm-up
       * density is that of step `it` (its tensors' furthest step). */
      const double d = 0.25 * pow(0.01 / 0.25, (double)it / ZWARM);
      uint64_t want = 0;
      int all_gather = 1;
      for (size_t g = 0; g < pl->ngroups; g++) {
        for (size_t k = pl->offsets[g]; k < pl->offsets[g + 1]; k++) {
          const double kt = floor(d * (double)counts[pl->tensors[k]]);
          want += 8 * (uint64_t)(kt < 1 ? 1 : kt); /* each tensor's own top k */
        }
        all_gather &= pl->group_xchg && pl->group_xchg[g] == GS_XCHG_ALLGATHER;
      }
      const uint64_t got = s.bytes_sent - sent_before;
      const uint64_t fresh = 8 * (uint64_t)floor(0.25 * (double)total);
      CHECK(got < fresh / 2, "iteration %d, the first merged one: %llu bytes sent, as "
            "many as a restarted warm-up's %llu", it, (unsigned long long)got,
            (unsigned long long)fresh);
      CHECK(!all_gather || got == want, "iteration %d: %llu bytes sent, expected %llu "
            "(density %g over the merged groups)", it, (unsigned long long)got,
            (unsigned long long)want, d);
    }
    if (pl) groups = pl->ngroups;
    sent_before = s.bytes_sent;
    gs_plan_free(pl);
  }
  CHECK(merged_at == WARM || merged_at == WARM + 1,
        "the plan after the warm-up did not merge the %d tensors (merged at "
        "iteration %d)", NT, merged_at);
  /* Conservation: nothing unsent was lost at the regrouping. */
  double err = 0, norm = 0;
  for (int t = 0; t < NT; t++)
    for (size_t i = 0; i < counts[t]; i++) {
      err += fabs(sum_out[t][i] - sum_in[t][i]);
      norm += fabs(sum_in[t][i]);
    }
  CHECK(err <= 1e-4 * norm, "sum of the results differs from the sum of the average "
        "gradients by %g (L1; the gradients' L1 is %g): memory was lost", err, norm);
  CHECK(gs_engine_destroy(e) == GS_OK, "destroy: %s", gs_last_error());
  for (int t = 0; t < NT; t++) {
    free(bufs[t]);
    free(sum_out[t]);
    free(sum_in[t]);
  }
}

/* Allocates the NT f32 tensors w0.. (counts[]) and registers them in order. */
static void register_f32(gs_engine *e, float **bufs, int *ids) {
  char name[16];
  for (int t = 0; t < NT; t++) {
    bufs[t] = malloc(counts[t] * sizeof(float));
    snprintf(name, sizeof name, "w%d", t);
    gs_engine_register(e, name, bufs[t], counts[t], GS_F32, &ids[t]);
  }
}

/* Runs ITERS iterations of topk:0.02 with error feedback and a density
 * warm-up under `policy`, writing every iteration's results to out. */
enum { GROUP_ITERS = 6 };
static void run_policy(const char *policy, int merged, float *out) {
  gs_compress_opts zo = gs_compress_opts_default();
  zo.warmup_steps = 4;
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = policy;
  cfg.compress = "topk:0.02";
  cfg.compress_opts = &zo;
  cfg.compress_merged = merged;
  gs_engine *e = NULL;
  CHECK(gs_engine_create(g_comm, &cfg, &e) == GS_OK, "%s: create: %s", policy,
        gs_last_error());
  if (e == NULL) return;
  float *bufs[NT];
  int ids[NT];
  uint16_t half[1];
  register_f32(e, bufs, ids);
  for (int it = 0; it < GROUP_ITERS; it++) {
    fill(bufs, half, 0, it);
    /* Tensors of very different scales: a merged selection starves w0. */
    for (size_t i = 0; i < counts[0]; i++) bufs[0][i] *= 1e-3f;
    for (int t = NT - 1; t >= 0; t--) gs_engine_grad_ready(e, ids[t]);
    CHECK(gs_engine_wait(e) == GS_OK, "%s: wait: %s", policy, gs_last_error());
    for (int t = 0; t < NT; t++) {
      memcpy(out, bufs[t], counts[t] * sizeof(float));
      out += counts[t];
    }
  }
  gs_plan *pl = NULL;
  gs_engine_get_plan(e, &pl);
  const size_t want = strcmp(policy, "single") == 0 ? 1 : NT;
  CHECK(pl && pl->ngroups == want, "%s: %zu groups, expected %zu", policy,
        pl ? pl->ngroups : 0, want);
  gs_plan_free(pl);
  CHECK(gs_engine_destroy(e) == GS_OK, "%s: destroy: %s", policy, gs_last_error());
  for (int t = 0; t < NT; t++) free(bufs[t]);
}

/* Layer-wise selection: one message per tensor (wfbp) and one fused message
 * (single) send the same entries, so their results are bitwise equal; a
 * merged selection over the fused message differs. */
static void test_groups(void) {
  size_t total = 0;
  for (int t = 0; t < NT; t++) total += counts[t];
  const size_t n = total * GROUP_ITERS;
  float *a = calloc(n, sizeof(float)), *b = calloc(n, sizeof(float)),
        *c = calloc(n, sizeof(float));
  run_policy("wfbp", 0, a);
  run_policy("single", 0, b);
  run_policy("single", 1, c);
  size_t differ = 0;
  for (size_t i = 0; i < n; i++) differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
  CHECK(differ == 0, "single (one fused message) differs from wfbp (a message per "
        "tensor) in %zu of %zu results", differ, n);
  differ = 0;
  for (size_t i = 0; i < n; i++) differ += memcmp(&a[i], &c[i], sizeof(float)) != 0;
  CHECK(differ > 0, "merged selection sent the same entries as layer-wise selection");
  free(a);
  free(b);
  free(c);
}

/* Runs iterations [from, to) of topk:0.02 with error feedback and a density
 * warm-up under `policy` on an engine given `mem` (per tensor, NULL: none)
 * before its first iteration, writing each iteration's results to out
 * (NULL: not kept) and, when keep is not NULL, the memory at the end. The
 * gradients of iteration `it` are fill()'s, whatever engine runs it. */
static void run_span(const char *policy, int from, int to, gs_compress_memory *mem,
                     float *out, gs_compress_memory *keep) {
  gs_compress_opts zo = gs_compress_opts_default();
  zo.warmup_steps = 4;
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = policy;
  cfg.compress = "topk:0.02";
  cfg.compress_opts = &zo;
  gs_engine *e = NULL;
  CHECK(gs_engine_create(g_comm, &cfg, &e) == GS_OK, "%s: create: %s", policy,
        gs_last_error());
  if (e == NULL) return;
  CHECK(gs_engine_memory_kinds(e) == GS_COMPRESS_MEM_RESIDUAL, "kinds %u",
        gs_engine_memory_kinds(e));
  float *bufs[NT];
  int ids[NT];
  uint16_t half[1];
  register_f32(e, bufs, ids);
  for (int t = 0; mem && t < NT; t++)
    CHECK(gs_engine_memory_set(e, ids[t], &mem[t]) == GS_OK, "set w%d: %s", t,
          gs_last_error());
  for (int it = from; it < to; it++) {
    fill(bufs, half, 0, it);
    for (int t = NT - 1; t >= 0; t--) gs_engine_grad_ready(e, ids[t]);
    if (it == from) {
      /* Inside an iteration the memory is the launch thread's. */
      gs_compress_memory m = {0};
      CHECK(gs_engine_memory_get(e, ids[0], &m) == GS_ERR_STATE, "get inside an "
            "iteration: %s", gs_last_error());
    }
    CHECK(gs_engine_wait(e) == GS_OK, "%s: wait: %s", policy, gs_last_error());
    for (int t = 0; out && t < NT; t++) {
      memcpy(out, bufs[t], counts[t] * sizeof(float));
      out += counts[t];
    }
  }
  for (int t = 0; keep && t < NT; t++)
    CHECK(gs_engine_memory_get(e, ids[t], &keep[t]) == GS_OK &&
              keep[t].have == GS_COMPRESS_MEM_RESIDUAL && keep[t].step == (uint64_t)to,
          "get w%d: have %u, step %llu: %s", t, keep[t].have,
          (unsigned long long)keep[t].step, gs_last_error());
  CHECK(gs_engine_destroy(e) == GS_OK, "%s: destroy: %s", policy, gs_last_error());
  for (int t = 0; t < NT; t++) free(bufs[t]);
}

/* Per-tensor memory through gs_engine_memory_get/set, as a trainer's
 * checkpoint takes it: iterations 0..CUT under wfbp, the memory read, then
 * CUT..END on a new engine given it before its first iteration (pending
 * until the plan exists) under single (one fused message: other offsets)
 * give bitwise the uninterrupted run's results; without the memory they
 * differ. Memory set while a plan is in use lands in its message at once;
 * memory of a tensor that is never compressed (f16) stays pending and is
 * read back; an engine without compression refuses a set. */
static void test_resume(void) {
  enum { CUT = 3, END = 8 };
  size_t total = 0;
  for (int t = 0; t < NT; t++) total += counts[t];
  float *ref = calloc(total * END, sizeof(float)), *got = calloc(total * END, sizeof(float));
  gs_compress_memory mem[NT], back[NT];
  for (int t = 0; t < NT; t++) {
    mem[t] = (gs_compress_memory){.residual = calloc(counts[t], sizeof(float))};
    back[t] = (gs_compress_memory){.residual = calloc(counts[t], sizeof(float))};
  }
  run_span("wfbp", 0, END, NULL, ref, NULL);
  run_span("wfbp", 0, CUT, NULL, NULL, mem);
  run_span("single", CUT, END, mem, got + total * CUT, NULL);
  size_t differ = 0;
  for (size_t i = total * CUT; i < total * END; i++)
    differ += memcmp(&ref[i], &got[i], sizeof(float)) != 0;
  CHECK(differ == 0, "resumed with the memory: %zu of %zu results differ from the "
        "uninterrupted run's", differ, total * (END - CUT));
  run_span("single", CUT, END, NULL, got + total * CUT, NULL);
  differ = 0;
  for (size_t i = total * CUT; i < total * END; i++)
    differ += memcmp(&ref[i], &got[i], sizeof(float)) != 0;
  CHECK(differ > 0, "resumed without the memory, the results are the same: the test "
        "cannot tell");

  /* Set while a plan is in use, and a tensor never compressed. */
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = "wfbp";
  cfg.compress = "topk:0.02";
  gs_engine *e = NULL;
  CHECK(gs_engine_create(g_comm, &cfg, &e) == GS_OK, "create: %s", gs_last_error());
  if (e != NULL) {
    float *bufs[NT];
    int ids[NT + 1];
    uint16_t half[300];
    register_f32(e, bufs, ids);
    gs_engine_register(e, "h", half, 300, GS_F16, &ids[NT]);
    fill(bufs, half, 300, 0);
    for (int t = NT; t >= 0; t--) gs_engine_grad_ready(e, ids[t]);
    CHECK(gs_engine_wait(e) == GS_OK, "wait: %s", gs_last_error());
    CHECK(gs_engine_memory_set(e, ids[1], &mem[1]) == GS_OK, "set: %s", gs_last_error());
    gs_compress_memory half_mem = mem[0]; /* w0 and h have 300 elements */
    CHECK(gs_engine_memory_set(e, ids[NT], &half_mem) == GS_OK, "set h: %s",
          gs_last_error());
    fill(bufs, half, 300, 1);
    for (int t = NT; t >= 0; t--) gs_engine_grad_ready(e, ids[t]);
    CHECK(gs_engine_wait(e) == GS_OK, "wait: %s", gs_last_error());
    /* w1's state took the memory at once: its step is CUT + 1 now. */
    CHECK(gs_engine_memory_get(e, ids[1], &back[1]) == GS_OK &&
              back[1].step == CUT + 1,
          "w1 after a set into its message: step %llu, expected %d",
          (unsigned long long)back[1].step, CUT + 1);
    CHECK(gs_engine_memory_get(e, ids[NT], &back[0]) == GS_OK &&
              back[0].have == GS_COMPRESS_MEM_RESIDUAL &&
              memcmp(back[0].residual, mem[0].residual, 300 * sizeof(float)) == 0,
          "h (f16, sent dense): its pending memory was not kept (have %u)", back[0].have);
    CHECK(gs_engine_memory_get(e, NT + 1, &back[0]) == GS_ERR_INVALID_ARG, "unknown id");
    CHECK(gs_engine_destroy(e) == GS_OK, "destroy: %s", gs_last_error());
    for (int t = 0; t < NT; t++) free(bufs[t]);
  }
  gs_engine_config_init(&cfg);
  e = NULL;
  CHECK(gs_engine_create(g_comm, &cfg, &e) == GS_OK, "create: %s", gs_last_error());
  if (e != NULL) {
    int id;
    float w[300];
    gs_engine_register(e, "w", w, 300, GS_F32, &id);
    CHECK(gs_engine_memory_kinds(e) == 0, "dense engine: kinds %u",
          gs_engine_memory_kinds(e));
    CHECK(gs_engine_memory_set(e, id, &mem[0]) == GS_ERR_INVALID_ARG &&
              strstr(gs_last_error(), "compresses nothing"),
          "dense engine: set: %s", gs_last_error());
    CHECK(gs_engine_memory_get(e, id, &back[0]) == GS_OK && back[0].have == 0,
          "dense engine: get: have %u", back[0].have);
    CHECK(gs_engine_destroy(e) == GS_OK, "destroy: %s", gs_last_error());
  }
  for (int t = 0; t < NT; t++) {
    free(mem[t].residual);
    free(back[t].residual);
  }
  free(ref);
  free(got);
}

int main(int argc, char **argv) {
  if (gs_init(&argc, &argv) != GS_OK ||
      gs_comm_create(MPI_COMM_WORLD, &g_comm) != GS_OK) {
    fprintf(stderr, "FAIL setup: %s\n", gs_last_error());
    return 1;
  }
  g_rank = gs_comm_rank(g_comm);
  g_size = gs_comm_size(g_comm);
  const char *mode = argc > 1 ? argv[1] : "main";
  if (strcmp(mode, "main") == 0) {
    test_main(0);
    test_main(1);
  } else if (strcmp(mode, "groups") == 0) test_groups();
  else if (strcmp(mode, "dense") == 0) test_auto(0);
  else if (strcmp(mode, "sparse") == 0) test_auto(1);
  else if (strcmp(mode, "regroup") == 0) test_regroup();
  else if (strcmp(mode, "resume") == 0) test_resume();
  else CHECK(0, "unknown mode %s", mode);
  int all = 0;
  gs_allreduce(g_comm, &g_fail, &all, 1, GS_I32, GS_SUM, GS_ALGO_AUTO);
  if (g_rank == 0) printf("%s: %d failed checks\n", mode, all);
  gs_comm_destroy(g_comm);
  gs_finalize();
  return all != 0;
}
