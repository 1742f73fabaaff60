/*
 * Parameter servers under mpirun: test_ps CASE SERVERS
 *   bsp      BSP over servers equals all-reduce SGD (same seed, momentum,
 *            chunked messages) up to summation order, on every worker
 *   ssp      SSP:2 with one slow worker never lets a worker run more than
 *            2 steps ahead of the slowest (the servers' instrumented gap)
 *   asp      the same job under ASP does run ahead (the instrument sees it)
 *   asp_momentum  an ASP push's momentum is mu - (1 - 1/W) (floored at 0) by
 *            default, and mu when the offset is turned off
 *   switch   offline Sync-Switch at half the budget: the switch happens on
 *            every worker at the same step, inside the job, the weights
 *            after it are the weights before it, the first ASP update is
 *            exactly w - lr/W * g, and the budget stops every worker
 *   online   a worker 4x slower over a range of steps: online Sync-Switch
 *            goes to ASP while it lasts and back to BSP after
 *   resume   a BSP job's parameters and optimizer state, pulled after 6
 *            steps with SERVERS servers, continue on another server and
 *            worker count (gs_ps_worker_resume) exactly as one SGD run
 *            would; a resumed switch:offline:0.5 job whose samples done
 *            pass its BSP share goes to ASP at its first answer
 *   empty_bsp, empty_asp  SERVERS servers over fewer parameters than
 *            servers (2 parameters, then none), so that a server holds an
 *            empty shard: the job runs, pushes and pulls to the end, and
 *            (with parameters) BSP still equals all-reduce SGD, ASP with one
 *            worker plain SGD
 *   badcfg   a configuration bad on one rank fails gs_ps_create on every
 *            rank (no hang), naming that rank
 *   fault    a plain BSP job, to be killed by GRADSYNC_PS_FAULT (the
 *            wrapping script checks the exit and the messages)
 * Prints "FAIL ..." and exits non-zero on a failed check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gradsync/nn.h"
#include "gradsync/ps.h"

static int rank, size;
static int failures;

#define EXPECT_RANK rank
#include "expect.h"

static const size_t counts[] = {7, 3000, 5, 20000, 1, 1500};
#define NT (sizeof counts / sizeof *counts)

static void sgd_shard(void *ctx, float *w, const float *g, float *v, size_t n,
                      float lr, float mu) {
  gs_nn_sgd_config c = *(const gs_nn_sgd_config *)ctx;
  c.lr = lr;
  c.momentum = mu;
  gs_nn_sgd_update(&c, w, g, v, n);
}

/* A deterministic gradient of worker p at step t: a quadratic pull towards
 * a per-worker target plus a step-dependent term. */
static void gradient(float *g, const float *w, size_t n, int p, long t) {
  for (size_t i = 0; i < n; i++) {
    float target = (float)((i * 7 + (size_t)p * 13) % 17) / 17.0f - 0.5f;
    g[i] = 0.5f * (w[i] - target) + 0.01f * (float)sin((double)(i + 31 * t + 5 * p));
  }
}

static void nap_ms(double ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(fmod(ms, 1000) * 1e6)};
  nanosleep(&ts, NULL);
}

static gs_ps *make(int servers, const char *sync, long budget, size_t chunk,
                   int ramp) {
  gs_ps_config cfg = {.servers = servers, .sample_budget = budget,
                      .chunk_bytes = chunk, .momentum_ramp_steps = ramp};
  if (gs_ps_sync_parse(sync, &cfg.sync) != GS_OK) {
    EXPECT(0, "parse %s: %s", sync, gs_last_error());
    return NULL;
  }
  gs_ps *ps = NULL;
  gs_status st = gs_ps_create(MPI_COMM_WORLD, &cfg, counts, NT, &ps);
  EXPECT(st == GS_OK, "gs_ps_create: %s", gs_last_error());
  return ps;
}

static size_t total_count(void) {
  size_t t = 0;
  for (size_t i = 0; i < NT; i++) t += counts[i];
  return t;
}

static void init_weights(float *w, size_t n) {
  for (size_t i = 0; i < n; i++) w[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
}

static gs_nn_sgd_config sgd = {.lr = 0.1f, .momentum = 0.9f,
                               .weight_decay = 1e-4f, .nesterov = 0};

static void serve(gs_ps *ps) {
  EXPECT(gs_ps_serve(ps, sgd_shard, &sgd) == GS_OK, "serve: %s", gs_last_error());
}

static long reduce_max(long v) {
  long out = 0;
  MPI_Allreduce(&v, &out, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

static void case_bsp(int servers) {
  gs_ps *ps = make(servers, "bsp", 0, 4096, 0);
  if (!ps) return;
  size_t n = total_count();
  if (gs_ps_is_server(ps)) {
    serve(ps);
  } else {
    int p = gs_ps_worker_index(ps), W = gs_ps_workers(ps);
    MPI_Comm wc = gs_ps_worker_comm(ps);
    float *w = malloc(n * sizeof *w), *ref = malloc(n * sizeof *ref);
    float *g = malloc(n * sizeof *g), *gr = malloc(n * sizeof *gr);
    float *v = calloc(n, sizeof *v);
    init_weights(w, n);
    memcpy(ref, w, n * sizeof *w);
    EXPECT(gs_ps_worker_init(ps, w, 0) == GS_OK, "init: %s", gs_last_error());
    double worst = 0;
    for (long t = 0; t < 15; t++) {
      gradient(g, w, n, p, t);
      gs_ps_step_info info = {.batch = 32, .lr = sgd.lr, .momentum = sgd.momentum};
      gs_ps_step_result res;
      EXPECT(gs_ps_step(ps, g, w, &info, &res) == GS_OK, "step: %s", gs_last_error());
      EXPECT(res.mode == GS_PS_BSP && !res.switched, "mode %d", (int)res.mode);
      /* The reference: all-reduce average and the same SGD locally. */
      gradient(gr, ref, n, p, t);
      MPI_Allreduce(MPI_IN_PLACE, gr, (int)n, MPI_FLOAT, MPI_SUM, wc);
      for (size_t i = 0; i < n; i++) gr[i] /= (float)W;
      gs_nn_sgd_update(&sgd, ref, gr, v, n);
      for (size_t i = 0; i < n; i++) {
        double d = fabs((double)w[i] - ref[i]) / (1.0 + fabs(ref[i]));
        if (d > worst) worst = d;
      }
    }
    EXPECT(worst < 1e-5, "BSP over servers differs from all-reduce SGD by %g", worst);
    /* Every worker holds the same parameters. */
    float *w0 = malloc(n * sizeof *w0);
    memcpy(w0, w, n * sizeof *w);
    MPI_Bcast(w0, (int)n, MPI_FLOAT, 0, wc);
    EXPECT(memcmp(w0, w, n * sizeof *w) == 0, "workers hold different parameters");
    gs_ps_stats s;
    gs_ps_get_stats(ps, &s);
    EXPECT(s.bsp_steps == 15 && s.pushes == 15, "steps %ld", s.bsp_steps);
    EXPECT(gs_ps_finish(ps) == GS_OK, "finish");
    if (p == 0) printf("bsp: %d workers, %d servers, max relative difference %.3g\n", W, servers, worst);
    free(w); free(ref); free(g); free(gr); free(v); free(w0);
  }
  gs_ps_stats s;
  gs_ps_get_stats(ps, &s);
  long gap = reduce_max(gs_ps_is_server(ps) ? s.max_clock_gap : 0);
  EXPECT(gap == 0, "BSP let a worker run %ld steps ahead", gap);
  gs_ps_destroy(ps);
}

/* The reference for case_resume: one SGD run on every rank, averaging the
 * gradients of W workers at step t. */
static void ref_step(float *ref, float *v, float *gr, float *gp, size_t n, int W, long t) {
  memset(gr, 0, n * sizeof *gr);
  for (int q = 0; q < W; q++) {
    gradient(gp, ref, n, q, t);
    for (size_t i = 0; i < n; i++) gr[i] += gp[i];
  }
  for (size_t i = 0; i < n; i++) gr[i] /= (float)W;
  gs_nn_sgd_update(&sgd, ref, gr, v, n);
}

static double rel_diff(const float *a, const float *b, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]) / (1.0 + fabs(b[i]));
    if (d > worst) worst = d;
  }
  return worst;
}

static void case_resume(int servers) {
  size_t n = total_count();
  float *w = malloc(n * sizeof *w), *state = calloc(n, sizeof *state);
  float *g = malloc(n * sizeof *g), *ref = malloc(n * sizeof *ref);
  float *v = calloc(n, sizeof *v), *gr = malloc(n * sizeof *gr), *gp = malloc(n * sizeof *gp);
  init_weights(w, n);
  memcpy(ref, w, n * sizeof *w);
  /* Phase 1: SERVERS servers, 6 BSP steps, then the state is pulled. */
  gs_ps *ps = make(servers, "bsp", 0, 4096, 0);
  if (!ps) return;
  int W1 = gs_ps_workers(ps);
  for (long t = 0; t < 6; t++) ref_step(ref, v, gr, gp, n, W1, t);
  if (gs_ps_is_server(ps)) {
    serve(ps);
  } else {
    int p = gs_ps_worker_index(ps);
    EXPECT(gs_ps_worker_init(ps, w, 0) == GS_OK, "init: %s", gs_last_error());
    for (long t = 0; t < 6; t++) {
      gradient(g, w, n, p, t);
      gs_ps_step_info info = {.batch = 32, .lr = sgd.lr, .momentum = sgd.momentum};
      EXPECT(gs_ps_step(ps, g, w, &info, NULL) == GS_OK, "step: %s", gs_last_error());
    }
    EXPECT(gs_ps_park(ps) == GS_OK, "park: %s", gs_last_error());
    if (p == 0) {
      EXPECT(gs_ps_pull_state(ps, state) == GS_OK, "pull state: %s", gs_last_error());
      double ds = rel_diff(state, v, n);
      EXPECT(ds < 1e-5, "the pulled state differs from SGD's momentum by %g", ds);
    }
    EXPECT(gs_ps_finish(ps) == GS_OK, "finish");
  }
  gs_ps_destroy(ps);
  /* Phase 2: one server fewer (or more), so every worker count changes;
   * the weights and state of worker 0 go on. */
  MPI_Bcast(w, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
  int servers2 = servers > 1 ? servers - 1 : servers + 1;
  ps = make(servers2, "bsp", 0, 4096, 0);
  if (!ps) return;
  int W2 = gs_ps_workers(ps);
  for (long t = 6; t < 12; t++) ref_step(ref, v, gr, gp, n, W2, t);
  if (gs_ps_is_server(ps)) {
    serve(ps);
  } else {
    int p = gs_ps_worker_index(ps);
    EXPECT(gs_ps_worker_resume(ps, w, state, 0, 6 * 32 * W1) == GS_OK, "resume: %s",
           gs_last_error());
    for (long t = 6; t < 12; t++) {
      gradient(g, w, n, p, t);
      gs_ps_step_info info = {.batch = 32, .lr = sgd.lr, .momentum = sgd.momentum};
      EXPECT(gs_ps_step(ps, g, w, &info, NULL) == GS_OK, "step: %s", gs_last_error());
    }
    double d = rel_diff(w, ref, n);
    EXPECT(d < 1e-5, "resumed on %d servers and %d workers (from %d and %d): %g from one "
           "SGD run", servers2, W2, servers, W1, d);
    if (p == 0)
      printf("resume: %d servers x %d workers -> %d x %d, max relative difference %.3g\n",
             servers, W1, servers2, W2, d);
    EXPECT(gs_ps_finish(ps) == GS_OK, "finish");
  }
  gs_ps_destroy(ps);
  /* Phase 3: a resumed offline switch past its BSP share answers ASP. */
  ps = make(servers2, "switch:offline:0.5", 1000, 4096, 0);
  if (!ps) return;
  if (gs_ps_is_server(ps)) {
    serve(ps);
  } else {
    EXPECT(gs_ps_worker_resume(ps, w, state, 0, 600) == GS_OK, "resume: %s", gs_last_error());
    for (int k = 0; k < 2; k++) {
      gradient(g, w, n, gs_ps_worker_index(ps), k);
      gs_ps_step_info info = {.batch = 8, .lr = 0.001f, .momentum = 0.5f};
      gs_ps_step_result res;
      EXPECT(gs_ps_step(ps, g, w, &info, &res) == GS_OK, "step: %s", gs_last_error());
      EXPECT(res.next_mode == GS_PS_ASP && res.samples > 600 && !res.stop,
             "after 600 of 1000 samples (BSP share 500) step %d: next mode %s, samples %ld, "
             "stop %d", k, gs_ps_mode_name(res.next_mode), res.samples, res.stop);
    }
    EXPECT(gs_ps_finish(ps) == GS_OK, "finish");
  }
  gs_ps_destroy(ps);
  free(w); free(state); free(g); free(ref); free(v); free(gr); free(gp);
}

/* Worker 0 is slow: 4 ms a step; the others take none. */
static void case_stale(int servers, const char *sync, int bound, int expect_within) {
  gs_ps *ps = make(servers, sync, 0, 0, 0);
  if (!ps) return;
  size_t n = total_count();
  if (gs_ps_is_server(ps)) {
    serve(ps);
  } else {
    int p = gs_ps_worker_index(ps);
    float *w = malloc(n * sizeof *w), *g = malloc(n * sizeof *g);
    init_weights(w, n);
    EXPECT(gs_ps_worker_init(ps, w, 0) == GS_OK, "init: %s", gs_last_error());
    for (long t = 0; t < 30; t++) {
      if (p == 0) nap_ms(4);
      gradient(g, w, n, p, t);
      gs_ps_step_info info = {.batch = 8, .lr = 0.01f, .momentum = 0.0f};
      EXPECT(gs_ps_step(ps, g, w, &info, NULL) == GS_OK, "step: %s", gs_last_error());
    }
    EXPECT(gs_ps_finish(ps) == GS_OK, "finish");
    free(w); free(g);
  }
  gs_ps_stats s;
  gs_ps_get_stats(ps, &s);
  long gap = reduce_max(gs_ps_is_server(ps) ? s.max_clock_gap : 0);
  long stale = reduce_max(gs_ps_is_server(ps) ? s.max_staleness : 0);
  if (rank == 0) printf("%s: largest clock gap %ld (bound %d), staleness %ld\n", sync, gap, bound, stale);
  if (expect_within) {
    EXPECT(gap <= bound, "%s: a worker ran %ld steps ahead of the slowest", sync, gap);
    EXPECT(gap >= 1, "%s: no worker ever ran ahead: the slow worker was not slow", sync);
  } else {
    EXPECT(gap > bound, "%s: gap %ld: ASP should have run ahead of %d", sync, gap, bound);
  }
  gs_ps_destroy(ps);
}

static void case_switch(int servers) {
  const int B = 16, K = 10;
  /* momentum 0 so the first ASP update can be computed here exactly */
  gs_ps_config bad = {.servers = servers};
  gs_ps_sync_parse("switch:offline:0.5", &bad.sync);
  gs_ps *ps = NULL;
  EXPECT(gs_ps_create(MPI_COMM_WORLD, &bad, counts, NT, &ps) ==
                 GS_ERR_INVALID_ARG && ps == NULL &&
             strstr(gs_last_error(), "sample budget"),
         "a switch policy without a sample budget: %s", gs_last_error());
  int W = size - servers;
  ps = make(servers, "switch:offline:0.5", (long)W * B * K, 8192, 0);
  if (!ps) return;
  size_t n = total_count();
  gs_nn_sgd_config plain = {.lr = 0.05f};
  if (gs_ps_is_server(ps)) {
    EXPECT(gs_ps_serve(ps, sgd_shard, &plain) == GS_OK, "serve");
  } else {
    int p = gs_ps_worker_index(ps);
    MPI_Comm wc = gs_ps_worker_comm(ps);
    float *w = malloc(n * sizeof *w), *g = malloc(n * sizeof *g);
    float *wb = malloc(n * sizeof *wb), *pulled = malloc(n * sizeof *pulled);
    init_weights(w, n);
    EXPECT(gs_ps_worker_init(ps, w, 0) == GS_OK, "init");
    gs_ps_step_info info = {.batch = B, .lr = plain.lr, .momentum = 0};
    gs_ps_step_result res = {0};
    long t = 0, switched_at = -1;
    /* BSP until told otherwise. */
    while (!res.stop) {
      gradient(g, w, n, p, t);
      EXPECT(gs_ps_step(ps, g, w, &info, &res) == GS_OK, "step");
      t++;
      if (res.switched) {
        switched_at = t;
        break;
      }
    }
    EXPECT(switched_at == K / 2, "switched after step %ld, expected %d", switched_at, K / 2);
    EXPECT(res.next_mode == GS_PS_ASP, "switched to %d", (int)res.next_mode);
    long first = -1;
    MPI_Allreduce(&switched_at, &first, 1, MPI_LONG, MPI_MIN, wc);
    EXPECT(first == switched_at, "workers switched at different steps");
    memcpy(wb, w, n * sizeof *w);
    /* The servers still hold the BSP weights. */
    MPI_Barrier(wc);
    EXPECT(gs_ps_pull(ps, pulled) == GS_OK, "pull");
    EXPECT(memcmp(pulled, wb, n * sizeof *w) == 0, "the switch changed the weights");
    MPI_Barrier(wc);
    /* Worker 0's first ASP push, alone: w - lr/W * g exactly. */
    if (p == 0) {
      gradient(g, w, n, p, t);
      float *expect = malloc(n * sizeof *expect), *zero = calloc(n, sizeof *zero);
      memcpy(expect, w, n * sizeof *w);
      gs_nn_sgd_config c = {.lr = plain.lr * (1.0f / (float)W)};
      gs_nn_sgd_update(&c, expect, g, zero, n);
      EXPECT(gs_ps_step(ps, g, w, &info, &res) == GS_OK, "step");
      EXPECT(res.mode == GS_PS_ASP, "first step after the switch ran %d", (int)res.mode);
      EXPECT(memcmp(expect, w, n * sizeof *w) == 0,
             "the first ASP update is not w - lr/W * g");
      t++;
      free(expect); free(zero);
    }
    MPI_Barrier(wc);
    while (!res.stop) {
      gradient(g, w, n, p, t);
      EXPECT(gs_ps_step(ps, g, w, &info, &res) == GS_OK, "step");
      t++;
    }
    long pushes = t, sum = 0;
    MPI_Allreduce(&pushes, &sum, 1, MPI_LONG, MPI_SUM, wc);
    EXPECT(sum * B >= (long)W * B * K && sum * B < (long)W * B * K + (long)W * B,
           "%ld samples trained, budget %ld", sum * B, (long)W * B * K);
    gs_ps_stats s;
    gs_ps_get_stats(ps, &s);
    EXPECT(s.switches == 1 && s.bsp_steps == K / 2, "switches %ld, BSP steps %ld",
           s.switches, s.bsp_steps);
    EXPECT(gs_ps_finish(ps) == GS_OK, "finish");
    free(w); free(g); free(wb); free(pulled);
  }
  gs_ps_destroy(ps);
}

static void case_online(int servers) {
  const int B = 8;
  int W = size - servers;
  /* The budget comes with the initial parameters, as in the trainer. */
  gs_ps *ps = make(servers, "switch:online:0.9", GS_PS_BUDGET_AT_INIT, 0, 4);
  if (!ps) return;
  size_t n = total_count();
  if (gs_ps_is_server(ps)) {
    serve(ps);
  } else {
    int p = gs_ps_worker_index(ps);
    float *w = malloc(n * sizeof *w), *g = malloc(n * sizeof *g);
    init_weights(w, n);
    EXPECT(gs_ps_worker_init(ps, w, (long)W * B * 160) == GS_OK, "init");
    gs_ps_step_info info = {.batch = B, .lr = 0.01f, .momentum = 0.9f};
    gs_ps_step_result res = {0};
    char modes[512];
    (void)W;
    int nm = 0, first_asp_straggler = -2;
    long t = 0;
    /* Worker 1 is 5x slower (25 ms against 5 ms) during its steps 10-29. */
    while (!res.stop && nm < 511) {
      nap_ms(p == 1 && t >= 10 && t < 30 ? 25 : 5);
      gradient(g, w, n, p, t);
      EXPECT(gs_ps_step(ps, g, w, &info, &res) == GS_OK, "step");
      modes[nm++] = res.mode == GS_PS_BSP ? 'b' : 'a';
      if (res.switched && res.next_mode == GS_PS_ASP && first_asp_straggler == -2)
        first_asp_straggler = res.straggler;
      t++;
    }
    /* The answer that switched to ASP names the reason. */
    EXPECT(first_asp_straggler == 1, "the switch to ASP named worker %d as the straggler, "
           "not worker 1", first_asp_straggler);
    modes[nm] = '\0';
    if (p == 0) printf("online, worker 0's steps: %s\n", modes);
    const char *a = strchr(modes, 'a');
    EXPECT(modes[0] == 'b', "did not start in BSP");
    EXPECT(a && a - modes >= 10, "went to ASP at step %ld, before the straggler",
           a ? (long)(a - modes) : -1L);
    EXPECT(a && strchr(a, 'b'), "never went back to BSP after the straggler");
    EXPECT(gs_ps_finish(ps) == GS_OK, "finish");
    free(w); free(g);
  }
  gs_ps_destroy(ps);
}

/* BSP with parking: worker 2 parks after 5 steps while workers 0 and 1 go
 * on in rounds of two to step 10 and park; all then run 2 rounds of three.
 * Without parking the rounds of two would wait for worker 2 forever. */
static void case_park(int servers) {
  const int B = 4;
  gs_ps *ps = make(servers, "switch:offline:1", GS_PS_BUDGET_AT_INIT, 0, 0);
  if (!ps) return;
  size_t n = total_count();
  if (gs_ps_is_server(ps)) {
    serve(ps);
  } else {
    int p = gs_ps_worker_index(ps);
    EXPECT(gs_ps_workers(ps) == 3, "needs 3 workers");
    MPI_Comm wc = gs_ps_worker_comm(ps);
    float *w = malloc(n * sizeof *w), *g = malloc(n * sizeof *g);
    init_weights(w, n);
    EXPECT(gs_ps_worker_init(ps, w, 1000000) == GS_OK, "init");
    gs_ps_step_info info = {.batch = B, .lr = 0.01f, .momentum = 0.9f};
    gs_ps_step_result res = {0};
    long t = 0;
    for (; t < (p == 2 ? 5 : 10); t++) {
      gradient(g, w, n, p, t);
      EXPECT(gs_ps_step(ps, g, w, &info, &res) == GS_OK, "step");
    }
    EXPECT(gs_ps_park(ps) == GS_OK, "park");
    MPI_Barrier(wc);
    /* Workers 1 and 2 come back late: worker 0's first push after the
     * meeting must still wait for them (it once made a round of its own). */
    if (p > 0) nanosleep(&(struct timespec){0, 200 * 1000000L}, NULL);
    for (int k = 0; k < 2; k++, t++) {
      gradient(g, w, n, p, t);
      EXPECT(gs_ps_step(ps, g, w, &info, &res) == GS_OK, "step");
      EXPECT(res.mode == GS_PS_BSP, "mode %d", (int)res.mode);
      /* 5 rounds of three, 5 of two, then k + 1 rounds of three. */
      EXPECT(res.samples == (25 + 3 * (k + 1)) * B,
             "round %d after the meeting: the servers counted %ld samples, "
             "expected %d", k + 1, res.samples, (25 + 3 * (k + 1)) * B);
    }
    EXPECT(gs_ps_finish(ps) == GS_OK, "finish");
    free(w); free(g);
  }
  gs_ps_destroy(ps);
}

/* ASP's momentum: worker 0 pushes twice alone, with mu = 0.9. The second
 * update must use max(0, mu - (1 - 1/W)) by default, and mu itself when
 * async_momentum_offset < 0; both are computed here with the same SGD.
 * With chunk > 0 (bytes) each server's shard is many chunks, each applied
 * and answered as it arrives (the server's ASP pipeline): the same weights,
 * bitwise. */
static void case_asp_momentum(int servers, float offset, size_t chunk, const char *sync) {
  gs_ps_config cfg = {.servers = servers, .async_momentum_offset = offset,
                      .chunk_bytes = chunk};
  gs_ps_sync_parse(sync, &cfg.sync);
  gs_ps *ps = NULL;
  if (gs_ps_create(MPI_COMM_WORLD, &cfg, counts, NT, &ps) != GS_OK) {
    EXPECT(0, "gs_ps_create: %s", gs_last_error());
    return;
  }
  size_t n = total_count();
  gs_nn_sgd_config plain = {.lr = 0.05f};
  if (gs_ps_is_server(ps)) {
    EXPECT(gs_ps_serve(ps, sgd_shard, &plain) == GS_OK, "serve: %s", gs_last_error());
  } else {
    int W = size - servers, p = gs_ps_worker_index(ps);
    float mu = 0.9f, want_mu = offset < 0 ? mu : mu - (1.0f - 1.0f / (float)W);
    if (want_mu < 0) want_mu = 0;
    float *w = malloc(n * sizeof *w), *g = malloc(n * sizeof *g);
    float *expect = malloc(n * sizeof *expect), *v = calloc(n, sizeof *v);
    init_weights(w, n);
    memcpy(expect, w, n * sizeof *w);
    EXPECT(gs_ps_worker_init(ps, w, 0) == GS_OK, "init: %s", gs_last_error());
    MPI_Comm wc = gs_ps_worker_comm(ps);
    if (p == 0) {
      for (long t = 0; t < 2; t++) {
        gradient(g, w, n, p, t);
        /* The first step's momentum multiplies a zero state, so only the
         * second tells which was used. */
        gs_nn_sgd_config c = {.lr = plain.lr / (float)W, .momentum = want_mu};
        gs_nn_sgd_update(&c, expect, g, v, n);
        gs_ps_step_info info = {.batch = 8, .lr = plain.lr, .momentum = mu};
        EXPECT(gs_ps_step(ps, g, w, &info, NULL) == GS_OK, "step: %s", gs_last_error());
      }
      EXPECT(memcmp(expect, w, n * sizeof *w) == 0,
             "%s, W=%d, offset %g, chunks of %zu bytes: the second update did not use "
             "momentum %g", sync, W, (double)offset, chunk, (double)want_mu);
    }
    MPI_Barrier(wc);
    EXPECT(gs_ps_finish(ps) == GS_OK, "finish");
    free(w); free(g); free(expect); free(v);
  }
  gs_ps_destroy(ps);
}

/* A server with an empty shard (fewer parameters than servers, or none at
 * all) takes part in every exchange with no data: the job must neither
 * crash nor hang, and the parameters must still be right. */
static void case_empty(int servers, const char *sync) {
  static const size_t two[] = {2};
  for (int pass = 0; pass < 2; pass++) {
    size_t nt = pass == 0 ? 1 : 0, n = pass == 0 ? 2 : 0;
    gs_ps_config cfg = {.servers = servers};
    gs_ps_sync_parse(sync, &cfg.sync);
    gs_ps *ps = NULL;
    if (gs_ps_create(MPI_COMM_WORLD, &cfg, nt ? two : NULL, nt, &ps) != GS_OK) {
      EXPECT(0, "gs_ps_create with %zu parameters, %d servers: %s", n, servers,
             gs_last_error());
      return;
    }
    gs_nn_sgd_config plain = {.lr = 0.1f};
    if (gs_ps_is_server(ps)) {
      EXPECT(gs_ps_serve(ps, sgd_shard, &plain) == GS_OK, "serve: %s", gs_last_error());
    } else {
      int p = gs_ps_worker_index(ps), W = gs_ps_workers(ps);
      MPI_Comm wc = gs_ps_worker_comm(ps);
      float w[2] = {0.25f, -0.5f}, ref[2] = {0.25f, -0.5f}, g[2], gr[2], v[2] = {0, 0};
      EXPECT(gs_ps_worker_init(ps, w, 0) == GS_OK, "init: %s", gs_last_error());
      long steps = 6;
      for (long t = 0; t < steps; t++) {
        gradient(g, w, n, p, t);
        gs_ps_step_info info = {.batch = 4, .lr = plain.lr, .momentum = 0};
        EXPECT(gs_ps_step(ps, g, w, &info, NULL) == GS_OK, "step %ld: %s", t,
               gs_last_error());
        gradient(gr, ref, n, p, t);
        if (strcmp(sync, "bsp") == 0) {
          MPI_Allreduce(MPI_IN_PLACE, gr, (int)n, MPI_FLOAT, MPI_SUM, wc);
          for (size_t i = 0; i < n; i++) gr[i] /= (float)W;
        }
        gs_nn_sgd_update(&plain, ref, gr, v, n);
      }
      if (strcmp(sync, "bsp") == 0 || W == 1)
        for (size_t i = 0; i < n; i++)
          EXPECT(fabsf(w[i] - ref[i]) <= 1e-6f * (1 + fabsf(ref[i])),
                 "%s, %zu parameters, %d servers: w[%zu] %g, expected %g", sync, n,
                 servers, i, (double)w[i], (double)ref[i]);
      gs_ps_stats s;
      gs_ps_get_stats(ps, &s);
      EXPECT(s.pushes == steps, "%ld pushes, expected %ld", s.pushes, steps);
      MPI_Barrier(wc);
      EXPECT(gs_ps_finish(ps) == GS_OK, "finish: %s", gs_last_error());
    }
    gs_ps_destroy(ps);
    if (rank == 0) printf("empty %s: %zu parameters over %d servers ok\n", sync, n, servers);
  }
}

static void case_badcfg(int servers) {
  gs_ps_config cfg = {.servers = rank == 1 ? size : servers};
  gs_ps_sync_parse("bsp", &cfg.sync);
  gs_ps *ps = NULL;
  gs_status st = gs_ps_create(MPI_COMM_WORLD, &cfg, counts, NT, &ps);
  EXPECT(st != GS_OK && ps == NULL, "a bad server count on rank 1 was accepted");
  if (rank == 1)
    EXPECT(strstr(gs_last_error(), "servers in a communicator of") != NULL, "message: %s", gs_last_error());
  else
    EXPECT(strstr(gs_last_error(), "rank 1 failed") != NULL, "message: %s", gs_last_error());
  /* Agreed values that differ: a mismatch everywhere. */
  cfg.servers = servers;
  size_t other[NT];
  memcpy(other, counts, sizeof counts);
  if (rank == 0) other[1]++;
  st = gs_ps_create(MPI_COMM_WORLD, &cfg, other, NT, &ps);
  EXPECT(st == GS_ERR_MISMATCH && strstr(gs_last_error(), "parameter count"),
         "differing parameter counts: %s", gs_last_error());
}

static void case_fault(int servers) {
  gs_ps *ps = make(servers, getenv("PS_SYNC") ? getenv("PS_SYNC") : "bsp", 0, 0, 0);
  if (!ps) return;
  size_t n = total_count();
  if (gs_ps_is_server(ps)) {
    serve(ps);
  } else {
    int p = gs_ps_worker_index(ps);
    float *w = malloc(n * sizeof *w), *g = malloc(n * sizeof *g);
    init_weights(w, n);
    gs_ps_worker_init(ps, w, 0);
    for (long t = 0; t < 200; t++) {
      nap_ms(2);
      gradient(g, w, n, p, t);
      gs_ps_step_info info = {.batch = 8, .lr = 0.01f, .momentum = 0.9f};
      gs_ps_step(ps, g, w, &info, NULL);
    }
    gs_ps_finish(ps);
    free(w); free(g);
  }
  gs_ps_destroy(ps);
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *c = argc > 1 ? argv[1] : "";
  int servers = argc > 2 ? atoi(argv[2]) : 1;
  if (strcmp(c, "bsp") == 0) case_bsp(servers);
  else if (strcmp(c, "ssp") == 0) case_stale(servers, "ssp:2", 2, 1);
  else if (strcmp(c, "asp") == 0) case_stale(servers, "asp", 2, 0);
  else if (strcmp(c, "switch") == 0) case_switch(servers);
  else if (strcmp(c, "online") == 0) case_online(servers);
  else if (strcmp(c, "resume") == 0) case_resume(servers);
  else if (strcmp(c, "badcfg") == 0) case_badcfg(servers);
  else if (strcmp(c, "empty_bsp") == 0) case_empty(servers, "bsp");
  else if (strcmp(c, "empty_asp") == 0) case_empty(servers, "asp");
  else if (strcmp(c, "asp_momentum") == 0) {
    case_asp_momentum(servers, 0, 0, "asp");
    case_asp_momentum(servers, -1, 0, "asp");
    case_asp_momentum(servers, 0, 4096, "asp"); /* about 12 chunks a server */
    /* SSP:2 with the other workers idle: worker 0's two pushes stay within
     * the bound, so their answers stream too */
    case_asp_momentum(servers, 0, 4096, "ssp:2");
  }
  else if (strcmp(c, "park") == 0) case_park(servers);
  else if (strcmp(c, "fault") == 0) case_fault(servers);
  else {
    EXPECT(0, "unknown case '%s'", c);
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  if (all == 0 && rank == 0) printf("ok ps %s\n", c);
  return all ? 1 : 0;
}
