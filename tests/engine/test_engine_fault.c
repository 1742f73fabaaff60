/*
 * The engine's failure paths, under mpirun (tests/engine/CMakeLists.txt):
 *
 *   test_engine_fault stall R       rank R never marks tensor 'fc.weight'
 *                                   ready in iteration 3 and sleeps instead
 *                                   of calling gs_engine_wait; the others
 *                                   wait. Run with a short GRADSYNC_TIMEOUT:
 *                                   the job must end (MPI_Abort), so this
 *                                   mode "passes" only by being killed, and
 *                                   test_engine_stall.sh checks the messages
 *                                   and the time it took
 *   test_engine_fault agree R       agreement points with rank R failing
 *                                   alone: an unwritable timeline and an
 *                                   unknown policy at gs_engine_create, no
 *                                   memory for the fusion buffers at the
 *                                   first plan. Every rank must fail, with a
 *                                   message naming rank R, and nothing hangs
 *   test_engine_fault dear          DeAR's buffer contract: the trainer skips
 *                                   gs_engine_wait_tensor, writes the
 *                                   gradients right after the next
 *                                   iteration's first grad_ready, and the
 *                                   averages stay exact (under TSan too);
 *                                   a trainer that never calls wait_tensor
 *                                   gets GS_ERR_STATE on every rank
 *
 * A failing check prints "FAIL rank R case C: ..."; the exit status is
 * non-zero if any case failed on any rank.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gradsync.h"

static int g_rank, g_size;
static gs_comm *g_comm;
static long g_fail;
static char g_case[120];

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("FAIL rank %d case %s: %s\n", g_rank, g_case, msg);
  g_fail++;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* ---- stall --------------------------------------------------------------------- */

static int stall(int culprit) {
  snprintf(g_case, sizeof g_case, "stall");
  static const char *names[4] = {"conv1.weight", "conv1.bias", "fc.weight", "fc.bias"};
  static float bufs[4][1000];
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = "wfbp";
  gs_engine *e = NULL;
  if (gs_engine_create(g_comm, &cfg, &e) != GS_OK) {
    fail("create: %s", gs_last_error());
    return 1;
  }
  for (int t = 0; t < 4; t++) gs_engine_register(e, names[t], bufs[t], 1000, GS_F32, NULL);
  for (int it = 0; it < 4; it++) {
    for (int t = 3; t >= 0; t--) {
      if (it == 3 && t == 2 && g_rank == culprit) continue;
      if (gs_engine_grad_ready(e, t) != GS_OK) fail("grad_ready: %s", gs_last_error());
    }
    if (it == 3 && g_rank == culprit) {
      /* Stays inside the iteration, as a rank stuck in its backward pass. */
      printf("rank %d: not marking 'fc.weight' ready, sleeping\n", g_rank);
      sleep_ms(60000);
      fail("still running after 60 s: the watchdog did not end the job");
      return 1;
    }
    if (gs_engine_wait(e) != GS_OK) fail("wait: %s", gs_last_error());
  }
  fail("iteration 3 completed although rank %d never marked 'fc.weight'", culprit);
  return 1;
}

/* ---- agree --------------------------------------------------------------------- */

static void expect_all_fail(gs_status st, gs_status want, int culprit, const char *own) {
  char name[32];
  snprintf(name, sizeof name, "rank %d", culprit);
  if (st != want) {
    fail("returned %s, expected %s (%s)", gs_strerror(st), gs_strerror(want),
         gs_last_error());
  } else if (g_rank == culprit ? !strstr(gs_last_error(), own)
                               : !strstr(gs_last_error(), name)) {
    fail("unclear message: %s", gs_last_error());
  } else if (g_rank == 0 || g_rank == culprit) {
    printf("  case %s, rank %d: %s\n", g_case, g_rank, gs_last_error());
  }
}

static void agree(int culprit) {
  gs_engine_config cfg;
  gs_engine *e = NULL;

  snprintf(g_case, sizeof g_case, "unwritable timeline on rank %d", culprit);
  gs_engine_config_init(&cfg);
  if (g_rank == culprit) cfg.timeline = "/nonexistent-gradsync-dir/trace.json";
  gs_status st = gs_engine_create(g_comm, &cfg, &e);
  expect_all_fail(st, GS_ERR_IO, culprit, "/nonexistent-gradsync-dir/trace.rank");
  if (e) gs_engine_destroy(e);
  e = NULL;

  snprintf(g_case, sizeof g_case, "unknown policy on rank %d", culprit);
  gs_engine_config_init(&cfg);
  cfg.policy = g_rank == culprit ? "fastest" : "wfbp";
  st = gs_engine_create(g_comm, &cfg, &e);
  expect_all_fail(st, GS_ERR_INVALID_ARG, culprit, "fastest");
  if (e) gs_engine_destroy(e);
  e = NULL;

  /* The first plan's fusion buffers fail on the culprit only (the hook
   * compares the variable with the rank). */
  snprintf(g_case, sizeof g_case, "no memory for the plan on rank %d", culprit);
  char v[16];
  snprintf(v, sizeof v, "%d", culprit);
  setenv("GRADSYNC_TEST_ENGINE_PLAN_FAIL", v, 1);
  gs_engine_config_init(&cfg);
  cfg.policy = "single";
  cfg.warmup_iters = 0;
  float bufs[3][16] = {{0}};
  if (gs_engine_create(g_comm, &cfg, &e) != GS_OK) {
    fail("create: %s", gs_last_error());
    return;
  }
  for (int t = 0; t < 3; t++) gs_engine_register(e, t ? "b" : "a", bufs[t], 16, GS_F32, NULL);
  for (int t = 2; t >= 0; t--) gs_engine_grad_ready(e, t);
  st = gs_engine_wait(e);
  expect_all_fail(st, GS_ERR_NOMEM, culprit, "fusion buffer");
  if (gs_engine_wait(e) != st) fail("a later wait did not return the same error");
  if (gs_engine_destroy(e) != GS_OK) fail("destroy: %s", gs_last_error());
  unsetenv("GRADSYNC_TEST_ENGINE_PLAN_FAIL");
}

/* ---- dear ---------------------------------------------------------------------- */

#define DT 6
static const size_t d_count[DT] = {2000000, 17, 1500000, 1, 3000000, 64};

static float d_input(int r, int it, int t, size_t j) {
  return (float)(r * 4 + (int)((j + 3 * (size_t)t + 7 * (size_t)it) % 13));
}

static float d_avg(int it, int t, size_t j) {
  double s = 0;
  for (int r = 0; r < g_size; r++) s += d_input(r, it, t, j);
  return (float)(s / g_size);
}

static void d_check(float **bufs, int it, int t, const char *when) {
  for (size_t j = 0; j < d_count[t]; j++)
    if (fabsf(bufs[t][j] - d_avg(it, t, j)) > 1e-4f) {
      fail("%s: tensor %d element %zu is %g, expected iteration %d's average %g", when,
           t, j, bufs[t][j], it, d_avg(it, t, j));
      return;
    }
}

/* Dear after a warm-up of two wfbp iterations whose backward has 20 ms
 * between gradients (trainers sleep, see d_compute): with that much compute
 * to hide the messages behind, the plan has several groups. */
static gs_engine *d_engine(float **bufs) {
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = "dear";
  cfg.warmup_iters = 2;
  cfg.replan_interval = 100;
  cfg.forward_overlap = 1;
  gs_engine *e = NULL;
  if (gs_engine_create(g_comm, &cfg, &e) != GS_OK) {
    fail("create: %s", gs_last_error());
    return NULL;
  }
  for (int t = 0; t < DT; t++) {
    char name[32];
    snprintf(name, sizeof name, "layer%d.weight", t);
    gs_engine_register(e, name, bufs[t], d_count[t], GS_F32, NULL);
  }
  return e;
}

static void d_compute(void) { sleep_ms(30); }

static void d_fill(float **bufs, int it, int t) {
  for (size_t j = 0; j < d_count[t]; j++) bufs[t][j] = d_input(g_rank, it, t, j);
}

static void dear(void) {
  float *bufs[DT];
  for (int t = 0; t < DT; t++) bufs[t] = calloc(d_count[t], sizeof(float));

  /* The trainer waits only for the tensor it marks first, the input
   * layer's (as when autograd reorders gradients): its all-gather comes
   * first in forward order, so the others are still to come. Every other
   * buffer is written right after that first grad_ready returns. */
  snprintf(g_case, sizeof g_case, "dear, wait_tensor skipped");
  gs_engine *e = d_engine(bufs);
  const int iters = 8;
  for (int it = 0; e && it < iters && g_fail == 0; it++) {
    if (it > 0) {
      if (gs_engine_wait_tensor(e, 0) != GS_OK) fail("wait_tensor: %s", gs_last_error());
      d_check(bufs, it - 1, 0, "after wait_tensor");
    }
    d_compute();
    d_fill(bufs, it, 0);
    if (gs_engine_grad_ready(e, 0) != GS_OK) fail("grad_ready: %s", gs_last_error());
    for (int t = DT - 1; t >= 1; t--) {
      if (it > 0) d_check(bufs, it - 1, t, "after the first grad_ready");
      d_fill(bufs, it, t);
      d_compute();
      if (gs_engine_grad_ready(e, t) != GS_OK) fail("grad_ready: %s", gs_last_error());
    }
    if (gs_engine_wait(e) != GS_OK) fail("wait: %s", gs_last_error());
  }
  if (e) {
    gs_engine_stats s;
    gs_engine_get_stats(e, &s);
    if (s.chosen != GS_PLAN_DEAR) fail("the plan is %s, not dear", gs_plan_policy_name(s.chosen));
    for (int t = 0; t < DT; t++) {
      if (gs_engine_wait_tensor(e, t) != GS_OK) fail("wait_tensor: %s", gs_last_error());
      d_check(bufs, iters - 1, t, "at the end");
    }
    if (gs_engine_destroy(e) != GS_OK) fail("destroy: %s", gs_last_error());
  }

  /* A trainer that never calls wait_tensor: the first tensor marked in the
   * next iteration was written while its all-gather was still to come. */
  snprintf(g_case, sizeof g_case, "dear, wait_tensor never called");
  e = d_engine(bufs);
  for (int it = 0; e && it < 4 && g_fail == 0; it++) {
    gs_status st = GS_OK;
    d_compute();
    for (int t = DT - 1; t >= 0 && st == GS_OK; t--) {
      d_fill(bufs, it, t);
      st = gs_engine_grad_ready(e, t);
      d_compute();
    }
    if (it < 2) {
      if (st != GS_OK || gs_engine_wait(e) != GS_OK) fail("warm-up: %s", gs_last_error());
    } else if (it == 2) {
      gs_plan *pl = NULL;
      if (st != GS_OK || gs_engine_wait(e) != GS_OK || gs_engine_get_plan(e, &pl) != GS_OK ||
          pl == NULL) {
        fail("iteration 2: %s", gs_last_error());
        break;
      }
      /* One group would be all-gathered at wait; the check needs two. */
      if (pl->chosen != GS_PLAN_DEAR || pl->ngroups < 2)
        fail("the plan is %s with %zu group(s); the case needs dear with 2+",
             gs_plan_policy_name(pl->chosen), pl->ngroups);
      gs_plan_free(pl);
    } else if (st != GS_ERR_STATE || !strstr(gs_last_error(), "layer5.weight")) {
      fail("iteration 3's first grad_ready returned %s (%s), expected GS_ERR_STATE "
           "naming layer5.weight", gs_strerror(st), gs_last_error());
    } else if (g_rank == 0) {
      printf("  case %s: %s\n", g_case, gs_last_error());
    }
  }
  if (e && gs_engine_destroy(e) != GS_OK) fail("destroy: %s", gs_last_error());
  for (int t = 0; t < DT; t++) free(bufs[t]);
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "dear") != 0 && argc < 3)) {
    fprintf(stderr, "usage: %s stall RANK | agree RANK | dear\n", argv[0]);
    return 2;
  }
  if (gs_init(&argc, &argv) != GS_OK) {
    fprintf(stderr, "gs_init: %s\n", gs_last_error());
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (gs_comm_create(MPI_COMM_WORLD, &g_comm) != GS_OK) {
    fprintf(stderr, "FAIL rank %d case gs_comm_create: %s\n", g_rank, gs_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int culprit = argc > 2 ? atoi(argv[2]) % g_size : 0;
  if (strcmp(argv[1], "stall") == 0) return stall(culprit); /* ends by MPI_Abort */
  if (strcmp(argv[1], "agree") == 0) agree(culprit);
  else dear();
  gs_comm_destroy(g_comm);
  long total = 0;
  MPI_Allreduce(&g_fail, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("%s: %ld failure(s)\n", argv[1], total);
  gs_finalize();
  return total == 0 ? 0 : 1;
}
