/*
 * Multi-rank tests of the engine (src/engine/engine*.c), run under mpirun on
 * 1, 2, 3, 4, 5 and 8 ranks.
 *
 *   test_engine             every policy trains a few iterations on a model
 *                           with tensors of size 0 and 1 and of dtypes f32,
 *                           f16 and bf16; each rank checks every element
 *                           against the average it computes serially from
 *                           the inputs all ranks generate deterministically;
 *                           unready tensors; mismatched registration; misuse;
 *                           the names of its threads
 *   test_engine --latency [MAX_US]
 *                           prints the median cost of gs_engine_grad_ready
 *                           and fails if it exceeds MAX_US (if given)
 *
 * A failing check prints "FAIL rank R case C: ..."; rank 0 prints
 * "N passed, M failed" (summed over ranks); the exit status is non-zero if
 * any case failed on any rank.
 */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gradsync.h"
#include "mrt.h"

/* ---- The model --------------------------------------------------------------- */

#define NT 12
static const size_t t_count[NT] = {3, 0, 1, 1000, 257, 16, 4097, 1, 0, 64, 20000, 5};
static const gs_dtype t_dtype[NT] = {GS_F32, GS_F32, GS_F16, GS_F32, GS_BF16, GS_F32,
                                     GS_F16, GS_BF16, GS_F32, GS_F32, GS_F32, GS_BF16};

/* Rank r's gradient element j of tensor t in iteration it: small integers,
 * exact in every dtype. */
static double input(int r, int it, int t, size_t j) {
  return (double)(r * 3) + (double)((j + 5 * (size_t)t + (size_t)it) % 11);
}

/* The unready rule under test: in iteration `skip_it`, rank 1 % p never
 * marks tensor 3, and no rank marks tensor 6. */
static int marks(int r, int it, int t, int skip_it) {
  if (it != skip_it) return 1;
  if (t == 6) return 0;
  if (t == 3 && r == 1 % g_size) return 0;
  return 1;
}

static double expected(int it, int t, size_t j, int skip_it) {
  double s = 0;
  for (int r = 0; r < g_size; r++)
    if (marks(r, it, t, skip_it)) s += input(r, it, t, j);
  return s / g_size;
}

static void store(void *buf, gs_dtype dt, size_t j, double v) {
  switch (dt) {
    case GS_F32: ((float *)buf)[j] = (float)v; break;
    case GS_F16: ((uint16_t *)buf)[j] = gs_f32_to_f16((float)v); break;
    case GS_BF16: ((uint16_t *)buf)[j] = gs_f32_to_bf16((float)v); break;
    default: break;
  }
}

static double load(const void *buf, gs_dtype dt, size_t j) {
  switch (dt) {
    case GS_F32: return ((const float *)buf)[j];
    case GS_F16: return gs_f16_to_f32(((const uint16_t *)buf)[j]);
    case GS_BF16: return gs_bf16_to_f32(((const uint16_t *)buf)[j]);
    default: return NAN;
  }
}

static void check_tensor(void **bufs, int it, int t, int skip_it) {
  double tol = t_dtype[t] == GS_F32 ? 1e-6 : t_dtype[t] == GS_F16 ? 1e-3 : 8e-3;
  for (size_t j = 0; j < t_count[t]; j++) {
    double want = expected(it, t, j, skip_it), got = load(bufs[t], t_dtype[t], j);
    if (!(fabs(got - want) <= tol * fmax(1.0, fabs(want)))) {
      fail("iteration %d tensor %d element %zu: got %g, expected %g", it, t, j, got,
           want);
      return;
    }
  }
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* Trains `iters` iterations under a policy and checks every result. With
 * overlap, the trainer calls wait_tensor in forward order (DeAR's use);
 * results of a dear iteration are then checked there. */
static void train(const char *policy, int overlap, int iters) {
  begin_case("train policy=%s overlap=%d", policy, overlap);
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = policy;
  cfg.warmup_iters = 2;
  cfg.replan_interval = 2;
  cfg.replan_drift = 0; /* replan at every check: exercises plan changes */
  cfg.forward_overlap = overlap;
  gs_engine *e = NULL;
  void *bufs[NT] = {0};
  int ids[NT];
  CHECK_ST(gs_engine_create(g_comm, &cfg, &e), GS_OK);
  if (e == NULL) {
    end_case();
    return;
  }
  for (int t = 0; t < NT; t++) {
    bufs[t] = t_count[t] ? malloc(t_count[t] * gs_dtype_size(t_dtype[t])) : NULL;
    char name[32];
    snprintf(name, sizeof name, "layer%d.%s", t / 2, t % 2 ? "bias" : "weight");
    CHECK_ST(gs_engine_register(e, name, bufs[t], t_count[t], t_dtype[t], &ids[t]),
             GS_OK);
  }
  int skip_it = iters - 2, deferred = -1; /* iteration whose check waits */
  int dear_seen = 0;
  for (int it = 0; it < iters && !g_case_failed; it++) {
    /* Forward: DeAR's trainer waits for each layer's all-gather. */
    if (overlap)
      for (int t = 0; t < NT; t++) {
        CHECK_ST(gs_engine_wait_tensor(e, ids[t]), GS_OK);
        if (deferred >= 0) check_tensor(bufs, deferred, t, skip_it);
      }
    deferred = -1;
    for (int t = 0; t < NT; t++)
      for (size_t j = 0; j < t_count[t]; j++)
        store(bufs[t], t_dtype[t], j,
              marks(g_rank, it, t, skip_it) ? input(g_rank, it, t, j) : 1000.0);
    for (int t = NT - 1; t >= 0; t--) {
      if (t % 4 == 0) sleep_us(200 + 100 * g_rank);
      if (marks(g_rank, it, t, skip_it)) CHECK_ST(gs_engine_grad_ready(e, ids[t]), GS_OK);
    }
    CHECK_ST(gs_engine_wait(e), GS_OK);
    gs_engine_stats s;
    gs_engine_get_stats(e, &s);
    if (s.chosen == GS_PLAN_DEAR) dear_seen = 1;
    if (overlap && s.chosen == GS_PLAN_DEAR)
      deferred = it;
    else
      for (int t = 0; t < NT; t++) check_tensor(bufs, it, t, skip_it);
  }
  if (deferred >= 0)
    for (int t = 0; t < NT; t++) {
      CHECK_ST(gs_engine_wait_tensor(e, ids[t]), GS_OK);
      check_tensor(bufs, deferred, t, skip_it);
    }
  gs_engine_stats s;
  CHECK_ST(gs_engine_get_stats(e, &s), GS_OK);
  if (s.iterations != (uint64_t)iters)
    fail("stats.iterations %llu, expected %d", (unsigned long long)s.iterations, iters);
  if (s.warming_up) fail("still warming up after %d iterations", iters);
  int fixed = strncmp(policy, "wfbp", 4) == 0 || strncmp(policy, "single", 6) == 0 ||
              strncmp(policy, "bucket", 6) == 0;
  if (s.plans < (fixed ? 1u : 2u))
    fail("%llu plans installed", (unsigned long long)s.plans);
  if (s.unready != 1 + (g_rank == 1 % g_size))
    fail("stats.unready %llu", (unsigned long long)s.unready);
  if (strcmp(policy, "dear") == 0 && !dear_seen) fail("dear never ran");
  gs_plan *pl = NULL;
  CHECK_ST(gs_engine_get_plan(e, &pl), GS_OK);
  if (pl == NULL || gs_plan_check(pl, NT - 2) != GS_OK) fail("bad plan copy");
  gs_plan_free(pl);
  gs_profile *pr = NULL;
  CHECK_ST(gs_engine_get_profile(e, &pr), GS_OK);
  if (pr == NULL || pr->ntensors != NT - 2) fail("bad profile copy");
  gs_profile_free(pr);
  CHECK_ST(gs_engine_destroy(e), GS_OK);
  for (int t = 0; t < NT; t++) free(bufs[t]);
  end_case();
}

/* The last rank registers something else: every rank must get
 * GS_ERR_MISMATCH from the first wait, with a message naming the rank. */
static void mismatch(int extra) {
  if (g_size < 2) return;
  begin_case("mismatch %s", extra ? "extra tensor" : "different count");
  gs_engine *e = NULL;
  CHECK_ST(gs_engine_create(g_comm, NULL, &e), GS_OK);
  float buf[64] = {0};
  int last = g_rank == g_size - 1, id;
  CHECK_ST(gs_engine_register(e, "a", buf, 10, GS_F32, &id), GS_OK);
  CHECK_ST(gs_engine_register(e, "b", buf + 10, (!extra && last) ? 11 : 10, GS_F32, &id),
           GS_OK);
  if (extra && last) CHECK_ST(gs_engine_register(e, "c", buf + 30, 4, GS_F32, &id), GS_OK);
  int n = (extra && last) ? 3 : 2;
  for (int t = n - 1; t >= 0; t--) CHECK_ST(gs_engine_grad_ready(e, t), GS_OK);
  gs_status st = gs_engine_wait(e);
  char want[64];
  snprintf(want, sizeof want, "rank %d", g_size - 1);
  if (st != GS_ERR_MISMATCH)
    fail("wait returned %s (%s), expected a mismatch", gs_strerror(st), gs_last_error());
  else if (!strstr(gs_last_error(), "registered different") ||
           !strstr(gs_last_error(), want))
    fail("unclear message: %s", gs_last_error());
  else if (g_rank == 0)
    printf("  (mismatch message: %s)\n", gs_last_error());
  /* Later calls keep failing with the same error, and do not hang. */
  CHECK_ST(gs_engine_grad_ready(e, 0), GS_ERR_MISMATCH);
  CHECK_ST(gs_engine_wait(e), GS_ERR_MISMATCH);
  CHECK_ST(gs_engine_destroy(e), GS_OK);
  end_case();
}

static void misuse(void) {
  begin_case("misuse");
  gs_engine *e = NULL;
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = "fastest";
  CHECK_ST(gs_engine_create(g_comm, &cfg, &e), GS_ERR_INVALID_ARG);
  cfg.policy = "wfbp";
  cfg.replan_interval = 0;
  CHECK_ST(gs_engine_create(g_comm, &cfg, &e), GS_ERR_INVALID_ARG);
  CHECK_ST(gs_engine_create(NULL, NULL, &e), GS_ERR_INVALID_ARG);
  CHECK_ST(gs_engine_create(g_comm, NULL, &e), GS_OK);
  float buf[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  int id = -1;
  CHECK_ST(gs_engine_register(e, "w", NULL, 8, GS_F32, &id), GS_ERR_INVALID_ARG);
  CHECK_ST(gs_engine_register(e, "", buf, 8, GS_F32, &id), GS_ERR_INVALID_ARG);
  CHECK_ST(gs_engine_register(e, "w", buf, 8, (gs_dtype)99, &id), GS_ERR_INVALID_ARG);
  CHECK_ST(gs_engine_register(e, "w", buf, 8, GS_F32, &id), GS_OK);
  CHECK_ST(gs_engine_set_lr(NULL, 0.1), GS_ERR_INVALID_ARG);
  CHECK_ST(gs_engine_set_lr(e, -0.1), GS_ERR_INVALID_ARG);
  CHECK_ST(gs_engine_set_lr(e, NAN), GS_ERR_INVALID_ARG);
  CHECK_ST(gs_engine_set_lr(e, INFINITY), GS_ERR_INVALID_ARG);
  CHECK_ST(gs_engine_set_lr(e, 0.0), GS_OK);
  CHECK_ST(gs_engine_set_lr(e, 0.1), GS_OK);
  CHECK_ST(gs_engine_grad_ready(e, 1), GS_ERR_INVALID_ARG);
  CHECK_ST(gs_engine_grad_ready(e, -1), GS_ERR_INVALID_ARG);
  CHECK_ST(gs_engine_grad_ready(e, id), GS_OK);
  CHECK_ST(gs_engine_grad_ready(e, id), GS_ERR_STATE);
  CHECK_ST(gs_engine_register(e, "late", buf, 1, GS_F32, NULL), GS_ERR_STATE);
  CHECK_ST(gs_engine_wait(e), GS_OK);
  for (int j = 0; j < 8; j++)
    if (buf[j] != 1.0f) fail("buf[%d] = %g, expected 1", j, buf[j]);
  CHECK_ST(gs_engine_wait_tensor(e, id), GS_OK);
  CHECK_ST(gs_engine_wait_tensor(e, 7), GS_ERR_INVALID_ARG);
  /* An iteration where nothing is marked: all zero (every rank unready). */
  CHECK_ST(gs_engine_wait(e), GS_OK);
  for (int j = 0; j < 8; j++)
    if (buf[j] != 0.0f) fail("unready: buf[%d] = %g, expected 0", j, buf[j]);
  CHECK_ST(gs_engine_destroy(e), GS_OK);
  CHECK_ST(gs_engine_destroy(NULL), GS_OK);
  end_case();
}

/* An engine with nothing registered still runs iterations (and joins the
 * registration check). */
static void empty(void) {
  begin_case("empty engine");
  gs_engine *e = NULL;
  CHECK_ST(gs_engine_create(g_comm, NULL, &e), GS_OK);
  for (int it = 0; it < 3; it++) CHECK_ST(gs_engine_wait(e), GS_OK);
  CHECK_ST(gs_engine_destroy(e), GS_OK);
  end_case();
}

/* The names of this process's threads, as top -H and gdb show them: has
 * `name` among them? */
static int has_thread(const char *name) {
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) return -1;
  int found = 0;
  struct dirent *de;
  while (!found && (de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    char path[300], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    if (fgets(comm, sizeof comm, f) != NULL) comm[strcspn(comm, "\n")] = '\0';
    fclose(f);
    found = strcmp(comm, name) == 0;
  }
  closedir(d);
  return found;
}

/* gradsync's threads carry names, so a user who sees CPU in top -H knows
 * whose it is; the engine's start with its first iteration and end with it. */
static void thread_names(void) {
  begin_case("thread names");
  gs_engine *e = NULL;
  CHECK_ST(gs_engine_create(g_comm, NULL, &e), GS_OK);
  CHECK_ST(gs_engine_wait(e), GS_OK);
  static const char *names[] = {"gs-comm", "gs-launch", "gs-complete"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
    if (has_thread(names[k]) != 1) fail("no thread named %s while an engine runs", names[k]);
  CHECK_ST(gs_engine_destroy(e), GS_OK);
  if (has_thread("gs-launch") != 0) fail("a thread named gs-launch outlives its engine");
  end_case();
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* grad_ready's cost as the training thread sees it, with the backward's
 * gaps replayed by sleeping (the launch thread then sleeps between events)
 * and by spinning (it is still polling). */
static void latency(double max_us) {
  enum { L = 200, ITERS = 30 };
  static float bufs[L][256];
  double *lat = malloc(sizeof(double) * L * ITERS);
  const long gaps_us[2] = {100, 5};
  for (int mode = 0; mode < 2; mode++) {
    gs_engine_config cfg;
    gs_engine_config_init(&cfg);
    cfg.policy = "wfbp";
    gs_engine *e = NULL;
    if (gs_engine_create(g_comm, &cfg, &e) != GS_OK) {
      fail("create: %s", gs_last_error());
      break;
    }
    for (int t = 0; t < L; t++) {
      char name[16];
      snprintf(name, sizeof name, "t%d", t);
      gs_engine_register(e, name, bufs[t], 256, GS_F32, NULL);
    }
    size_t n = 0;
    for (int it = 0; it < ITERS; it++) {
      for (int t = L - 1; t >= 0; t--) {
        if (mode == 0) {
          sleep_us(gaps_us[0]);
        } else {
          double until = gs_now() + gaps_us[1] * 1e-6;
          while (gs_now() < until) {
          }
        }
        uint64_t t0 = gs_now_ns();
        gs_engine_grad_ready(e, t);
        uint64_t t1 = gs_now_ns();
        if (it >= 2) lat[n++] = (double)(t1 - t0) * 1e-3;
      }
      gs_engine_wait(e);
    }
    gs_engine_destroy(e);
    qsort(lat, n, sizeof *lat, cmp_double);
    if (g_rank == 0)
      printf("grad_ready latency (%s gaps of %ld us, %d ranks): median %.3f us, "
             "p90 %.3f us, max %.1f us over %zu calls\n",
             mode == 0 ? "sleeping" : "busy", gaps_us[mode], g_size, lat[n / 2],
             lat[n * 9 / 10], lat[n - 1], n);
    if (max_us > 0 && lat[n / 2] > max_us)
      fail("grad_ready's median %.3f us (%s gaps) exceeds %.1f us", lat[n / 2],
           mode == 0 ? "sleeping" : "busy", max_us);
  }
  free(lat);
}

int main(int argc, char **argv) {
  int lat = argc > 1 && strcmp(argv[1], "--latency") == 0;
  double max_us = lat && argc > 2 ? atof(argv[2]) : 0;
  if (argc > 1 && !lat) {
    fprintf(stderr, "usage: %s [--latency [MAX_US]]\n", argv[0]);
    return 2;
  }
  mrt_init(&argc, &argv);
  if (lat) {
    begin_case("latency");
    latency(max_us);
    end_case();
  } else {
    misuse();
    empty();
    thread_names();
    static const char *policies[] = {"wfbp", "single", "bucket", "bucket:0.01,first=0.001",
                                     "mgwfbp", "optimal", "dear", "auto"};
    for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++) {
      train(policies[k], 0, 7);
      if (strcmp(policies[k], "dear") == 0 || strcmp(policies[k], "auto") == 0 ||
          strcmp(policies[k], "wfbp") == 0)
        train(policies[k], 1, 7);
    }
    mismatch(0);
    mismatch(1);
  }
  CHECK_ST(gs_comm_destroy(g_comm), GS_OK);
  return mrt_finish();
}
