/*
 * Tests of the simulator (src/sim, gradsync/sim.h): hand-computed cases (one
 * tensor, two tensors with a known overlap, a hierarchical ring on 2 nodes
 * of 2, DeAR, a compressed group), the equality with the planner's
 * prediction for every profile and policy, jitter (seeded, growing with N),
 * the trace and the argument checks.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "gradsync.h"

#define MAXL 8

#define TEST_PROFILE_MAXL MAXL
#include "../common/test_profile.h"

static gs_sim_config config(int workers) {
  gs_sim_config c = {.workers = workers, .iters = 1, .jitter_cv = 0,
                     .jitter = GS_SIM_JITTER_LOGNORMAL, .scope = GS_SIM_SCOPE_ITERATION,
                     .seed = 1, .trace = 0};
  return c;
}

/* Simulates `spec` and returns the mean iteration time. */
static double sim_time(const gs_profile *p, const gs_plan_cost *c, const char *spec,
                       const gs_sim_config *cfg, gs_sim_result *keep) {
  gs_plan *pl = NULL;
  assert_int_equal(gs_plan_make(p, c, spec, &pl), GS_OK);
  gs_sim_result r;
  assert_int_equal(gs_sim_run(p, c, NULL, pl, cfg, &r), GS_OK);
  gs_plan_free(pl);
  double t = r.iter_s;
  if (keep) *keep = r;
  else gs_sim_result_free(&r);
  return t;
}

#define NEAR(x, y) assert_true(fabs((double)(x) - (double)(y)) <= 1e-12 + 1e-9 * fabs((double)(y)))

/* One tensor of M = 4000 bytes: T = fwd + bwd + a + b*M
 * = 0.01 + 0.02 + 0.001 + 1e-6 * 4000 = 0.035 s, whatever the policy and
 * the number of workers (the cost is given as a and b). */
static void test_one_tensor(void **state) {
  (void)state;
  test_profile tp;
  tp_init(&tp, 0.01, 1, (double[]){0.02}, (size_t[]){1000});
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(0.001, 1e-6, &c), GS_OK);
  gs_sim_config cfg = config(8);
  gs_sim_result r;
  NEAR(sim_time(&tp.p, &c, "wfbp", &cfg, &r), 0.035);
  NEAR(r.compute_s, 0.03);
  NEAR(r.exposed_comm_s, 0.005);
  NEAR(r.straggler_s, 0.0);
  NEAR(r.efficiency, 0.03 / 0.035);
  assert_int_equal(r.messages, 1);
  NEAR(r.bytes, 4000);
  /* Two workers stand for the 8: each one's forward and backward, and the
   * message. */
  assert_int_equal(r.events, 2 * 2 + 1);
  gs_sim_result_free(&r);
  NEAR(sim_time(&tp.p, &c, "single", &cfg, NULL), 0.035);
  cfg.iters = 5;
  NEAR(sim_time(&tp.p, &c, "mgwfbp", &cfg, &r), 0.035);
  NEAR(r.iter_min_s, 0.035);
  NEAR(r.iter_max_s, 0.035);
  gs_sim_result_free(&r);
}

/* Two tensors: t0 (1000 f32 = 4000 B, backward 0.02 s), t1 (2000 f32 =
 * 8000 B, backward 0.01 s), forward 0.01 s, a = 0.001 s, b = 5e-6 s/B.
 * wfbp: t1 is ready at 0.01 + 0.01 = 0.02 and its message takes
 * 0.001 + 0.04 = 0.041, ending at 0.061; t0 is ready at 0.04 but waits for
 * the link until 0.061 and takes 0.001 + 0.02 = 0.021: T = 0.082 (t1's
 * message overlaps t0's backward for 0.02 s).
 * single: ready at 0.04, 0.001 + 12000 * 5e-6 = 0.061: T = 0.101.
 * With b = 1e-6 t1's message (0.009 s, ending 0.029) hides entirely behind
 * t0's backward: T = 0.04 + 0.005 = 0.045. */
static void test_two_tensors_overlap(void **state) {
  (void)state;
  test_profile tp;
  tp_init(&tp, 0.01, 2, (double[]){0.02, 0.01}, (size_t[]){1000, 2000});
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(0.001, 5e-6, &c), GS_OK);
  gs_sim_config cfg = config(4);
  gs_sim_result r;
  NEAR(sim_time(&tp.p, &c, "wfbp", &cfg, &r), 0.082);
  NEAR(r.exposed_comm_s, 0.082 - 0.04);
  assert_int_equal(r.messages, 2);
  gs_sim_result_free(&r);
  NEAR(sim_time(&tp.p, &c, "single", &cfg, NULL), 0.101);
  assert_int_equal(gs_plan_cost_from_ab(0.001, 1e-6, &c), GS_OK);
  NEAR(sim_time(&tp.p, &c, "wfbp", &cfg, NULL), 0.045);
}

/* A hierarchical ring on 2 nodes of 2 workers: one tensor's time is the
 * compute plus the cost module's hierarchical all-reduce of its size and
 * the engine's cost per message (the formula is affine in the size, so the
 * plan's line is exact). */
static void test_hierarchical_ring(void **state) {
  (void)state;
  test_profile tp;
  tp_init(&tp, 0.01, 1, (double[]){0.02}, (size_t[]){1 << 20});
  gs_cost_params params;
  assert_int_equal(gs_cost_preset("1GbE", &params), GS_OK);
  params.alpha_local = 2e-6;
  params.beta_local = 1.0 / 5e9;
  gs_cost_topo topo = {4, 2};
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_net(&params, topo, GS_ALGO_HIER, &c), GS_OK);
  double hier = gs_cost_allreduce(&params, topo, GS_ALGO_HIER, 4.0 * (1 << 20)) +
                gs_cost_message(&params, topo);
  assert_true(hier > 0);
  gs_sim_config cfg = config(4);
  double t = sim_time(&tp.p, &c, "wfbp", &cfg, NULL);
  NEAR(t, 0.03 + hier);
  /* ... and differs from the flat ring on the same 4 workers. */
  double ring = gs_cost_allreduce(&params, topo, GS_ALGO_RING, 4.0 * (1 << 20));
  assert_true(fabs(ring - hier) > 1e-6);
}

/* DeAR on the two tensors above with a = 0.001, b = 1e-6: reduce-scatter
 * and all-gather each cost a/2 + (b/2) M. Launch-order groups {t1}, {t0}.
 * The all-gather of {t0} (4000 B, 0.0025 s) runs 0 - 0.0025; t0's forward
 * (0.01 * 0.02/0.03 = 0.006667 s) starts at 0.0025 and launches {t1}'s
 * all-gather (8000 B, 0.0045 s, ending 0.007); t0's forward ends 0.009167,
 * t1's forward (0.003333 s) needs no wait and ends 0.0125. Backward: t1
 * ready 0.0225, its reduce-scatter ends 0.027; t0 ready 0.0425, its
 * reduce-scatter (0.0025 s) ends T = 0.045. */
static void test_dear(void **state) {
  (void)state;
  test_profile tp;
  tp_init(&tp, 0.01, 2, (double[]){0.02, 0.01}, (size_t[]){1000, 2000});
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(0.001, 1e-6, &c), GS_OK);
  size_t tensors[2] = {1, 0}, offsets[3] = {0, 1, 2};
  gs_plan pl = {.policy = {.kind = GS_PLAN_DEAR}, .chosen = GS_PLAN_DEAR, .ntensors = 2,
                .ngroups = 2, .tensors = tensors, .offsets = offsets};
  gs_sim_config cfg = config(3);
  cfg.trace = 1;
  gs_sim_result r;
  assert_int_equal(gs_sim_run(&tp.p, &c, NULL, &pl, &cfg, &r), GS_OK);
  NEAR(r.iter_s, 0.045);
  assert_int_equal(r.messages, 4);
  double model, fwd_end;
  assert_int_equal(gs_plan_predict_dear(&tp.p, &c, tensors, offsets, 2, &model, &fwd_end,
                                        NULL), GS_OK);
  NEAR(r.iter_s, model);
  NEAR(fwd_end, 0.0125);
  /* The stream: all-gathers of {t0} then {t1}, then the reduce-scatters. */
  int ag = 0, rs = 0;
  for (size_t i = 0; i < r.nspans; i++) {
    const gs_sim_span *s = &r.spans[i];
    if (s->worker != -1) continue;
    if (s->kind == GS_SIM_SPAN_ALLGATHER && s->index == 1) { NEAR(s->end_s, 0.0025); ag++; }
    if (s->kind == GS_SIM_SPAN_ALLGATHER && s->index == 0) { NEAR(s->end_s, 0.007); ag++; }
    if (s->kind == GS_SIM_SPAN_REDUCE_SCATTER && s->index == 0) { NEAR(s->end_s, 0.027); rs++; }
    if (s->kind == GS_SIM_SPAN_REDUCE_SCATTER && s->index == 1) { NEAR(s->end_s, 0.045); rs++; }
  }
  assert_int_equal(ag, 2);
  assert_int_equal(rs, 2);
  gs_sim_result_free(&r);
  /* With 3 iterations every one takes the same time. */
  cfg.iters = 3;
  cfg.trace = 0;
  assert_int_equal(gs_sim_run(&tp.p, &c, NULL, &pl, &cfg, &r), GS_OK);
  NEAR(r.iter_min_s, 0.045);
  NEAR(r.iter_max_s, 0.045);
}

/* A compressed exchange: one tensor sent through an all-gather costing
 * 0.002 + 1e-7 * M: T = 0.03 + 0.002 + 0.0004 = 0.0324. */
static void test_compressed(void **state) {
  (void)state;
  test_profile tp;
  tp_init(&tp, 0.01, 1, (double[]){0.02}, (size_t[]){1000});
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(0.001, 1e-6, &c), GS_OK);
  gs_plan_xchg x = {.n = 1, .required = 1};
  x.kind[0] = GS_XCHG_ALLGATHER;
  assert_int_equal(gs_cost_curve_affine(0.002, 1e-7, &x.cost[0]), GS_OK);
  gs_plan_policy pol = {.kind = GS_PLAN_WFBP};
  gs_plan *pl = NULL;
  assert_int_equal(gs_plan_make_xchg(&tp.p, &c, &x, &pol, 1, &pl), GS_OK);
  assert_non_null(pl->group_xchg);
  gs_sim_config cfg = config(16);
  cfg.trace = 1;
  gs_sim_result r;
  assert_int_equal(gs_sim_run(&tp.p, &c, &x, pl, &cfg, &r), GS_OK);
  NEAR(r.iter_s, 0.0324);
  NEAR(r.iter_s, pl->predicted_iter_s);
  int found = 0;
  for (size_t i = 0; i < r.nspans; i++)
    if (r.spans[i].worker == -1 && r.spans[i].kind == GS_SIM_SPAN_COMPRESSED &&
        r.spans[i].xchg == GS_XCHG_ALLGATHER)
      found++;
  assert_int_equal(found, 1);
  gs_sim_result_free(&r);
  /* Without the exchange's cost the group cannot be priced. */
  assert_int_equal(gs_sim_run(&tp.p, &c, NULL, pl, &cfg, &r), GS_ERR_INVALID_ARG);
  gs_plan_free(pl);
}

/* Every committed profile under every policy, on flat and hierarchical
 * clusters: without jitter, the simulation is the planner's prediction. */
static void test_equals_prediction(void **state) {
  (void)state;
  static const char *profiles[] = {"bert_base", "densenet201", "googlenet",
                                   "resnet152", "resnet50",    "vgg16"};
  static const char *specs[] = {"wfbp", "single", "bucket", "mgwfbp",
                                "optimal", "dear", "auto"};
  static const struct { const char *net; int n, k; } clusters[] = {
      {"1GbE", 4, 1}, {"10GbE", 16, 4}, {"100GbIB", 64, 8}};
  int checked = 0;
  for (size_t p = 0; p < sizeof profiles / sizeof *profiles; p++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.json", GS_PROFILES_DIR, profiles[p]);
    gs_profile *prof = NULL;
    assert_int_equal(gs_profile_load(path, &prof), GS_OK);
    for (size_t k = 0; k < sizeof clusters / sizeof *clusters; k++) {
      gs_cost_params params;
      assert_int_equal(gs_cost_preset(clusters[k].net, &params), GS_OK);
      gs_cost_topo topo = {clusters[k].n, clusters[k].n / clusters[k].k};
      gs_plan_cost c;
      assert_int_equal(gs_plan_cost_from_net(&params, topo,
                                             clusters[k].k > 1 ? GS_ALGO_HIER : GS_ALGO_AUTO,
                                             &c), GS_OK);
      for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
        gs_plan *pl = NULL;
        assert_int_equal(gs_plan_make(prof, &c, specs[s], &pl), GS_OK);
        double model;
        if (pl->chosen == GS_PLAN_DEAR)
          assert_int_equal(gs_plan_predict_dear(prof, &c, pl->tensors, pl->offsets,
                                                pl->ngroups, &model, NULL, NULL), GS_OK);
        else
          assert_int_equal(gs_plan_predict(prof, &c, pl->tensors, pl->offsets,
                                           pl->ngroups, &model), GS_OK);
        gs_sim_config cfg = config(clusters[k].n);
        cfg.iters = 2;
        gs_sim_result r;
        assert_int_equal(gs_sim_run(prof, &c, NULL, pl, &cfg, &r), GS_OK);
        if (fabs(r.iter_s - model) > 1e-9 * model) {
          fprintf(stderr, "%s %s %s x%d: simulated %.12g, predicted %.12g\n", profiles[p],
                  specs[s], clusters[k].net, clusters[k].n, r.iter_s, model);
          fail();
        }
        NEAR(r.iter_s, pl->predicted_iter_s);
        NEAR(r.iter_max_s, r.iter_min_s);
        gs_plan_free(pl);
        checked++;
      }
    }
    gs_profile_free(prof);
  }
  assert_int_equal(checked, 6 * 3 * 7);
}

/* Jitter: the same seed gives the same result, another seed another; the
 * iteration time grows with N (the slowest of more workers); the mean is
 * never below the jitter-free time by more than noise. */
static void test_jitter(void **state) {
  (void)state;
  test_profile tp;
  size_t numel[4] = {1000, 50000, 20000, 100000};
  tp_init(&tp, 0.02, 4, (double[]){0.01, 0.02, 0.005, 0.01}, numel);
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(1e-4, 1e-9, &c), GS_OK);
  for (int scope = 0; scope < 2; scope++) {
    for (int dist = 0; dist < 2; dist++) {
      gs_sim_config cfg = config(4);
      cfg.jitter_cv = 0.2;
      cfg.iters = 50;
      cfg.scope = (gs_sim_jitter_scope)scope;
      cfg.jitter = (gs_sim_jitter)dist;
      double a = sim_time(&tp.p, &c, "mgwfbp", &cfg, NULL);
      double b = sim_time(&tp.p, &c, "mgwfbp", &cfg, NULL);
      assert_true(a == b);
      cfg.seed = 2;
      double other = sim_time(&tp.p, &c, "mgwfbp", &cfg, NULL);
      assert_true(other != a);
      double prev = 0;
      for (int n = 1; n <= 1024; n *= 16) {
        cfg.workers = n;
        cfg.seed = 1;
        gs_sim_result r;
        double t = sim_time(&tp.p, &c, "wfbp", &cfg, &r);
        /* Strictly longer with 16 times the workers (the straggler's
         * expected compute grows by several percent, far beyond the noise of
         * a 50-iteration mean at these sizes). */
        assert_true(t > prev * 1.01);
        assert_true(r.straggler_s >= (n == 1 ? -0.2 * r.compute_s : 0));
        gs_sim_result_free(&r);
        prev = t;
      }
    }
  }
}

/* One factor per worker and iteration: two workers (0 and the largest
 * factor's) stand for all N, and every figure, the straggler and the trace
 * equal those of the loop over every worker, for each distribution, policy
 * (dear's waits included) and N; far fewer events. */
static void test_stand_ins(void **state) {
  (void)state;
  test_profile tp;
  size_t numel[4] = {1000, 50000, 20000, 100000};
  tp_init(&tp, 0.02, 4, (double[]){0.01, 0.02, 0.005, 0.01}, numel);
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(1e-3, 1e-8, &c), GS_OK);
  static const char *specs[] = {"wfbp", "single", "mgwfbp", "dear"};
  static const int ns[] = {1, 2, 3, 37, 500};
  static const double cvs[] = {0, 0.1, 0.5};
  int stragglers = 0;
  for (size_t k = 0; k < sizeof specs / sizeof *specs; k++)
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
      for (size_t v = 0; v < sizeof cvs / sizeof *cvs; v++)
        for (int dist = 0; dist < 2; dist++) {
          gs_sim_config cfg = config(ns[i]);
          cfg.jitter_cv = cvs[v];
          cfg.jitter = (gs_sim_jitter)dist;
          cfg.iters = 7;
          cfg.trace = 1;
          gs_sim_result a, b;
          sim_time(&tp.p, &c, specs[k], &cfg, &a);
          cfg.every_worker = 1;
          sim_time(&tp.p, &c, specs[k], &cfg, &b);
          assert_true(a.iter_s == b.iter_s && a.straggler_s == b.straggler_s);
          assert_true(a.iter_min_s == b.iter_min_s && a.iter_max_s == b.iter_max_s);
          assert_true(a.exposed_comm_s == b.exposed_comm_s);
          assert_int_equal(a.workers, ns[i]);
          assert_int_equal(a.straggler, b.straggler);
          stragglers += a.straggler != 0;
          assert_int_equal(a.nspans, b.nspans);
          for (size_t j = 0; j < a.nspans; j++) {
            assert_int_equal(a.spans[j].worker, b.spans[j].worker);
            assert_true(a.spans[j].start_s == b.spans[j].start_s &&
                        a.spans[j].end_s == b.spans[j].end_s);
          }
          if (ns[i] > 2) assert_true(a.events * (uint64_t)ns[i] <= 3 * b.events);
          gs_sim_result_free(&a);
          gs_sim_result_free(&b);
        }
  assert_true(stragglers > 0); /* jitter made another worker the slowest */
}

/* The trace: a Chrome trace JSON with worker 0, the straggler and every
 * message; an unwritable path is an error naming it. */
static void test_trace(void **state) {
  (void)state;
  test_profile tp;
  tp_init(&tp, 0.01, 2, (double[]){0.02, 0.01}, (size_t[]){1000, 2000});
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(0.001, 1e-6, &c), GS_OK);
  gs_sim_config cfg = config(32);
  cfg.trace = 1;
  cfg.jitter_cv = 0.3;
  cfg.iters = 3;
  gs_sim_result r;
  sim_time(&tp.p, &c, "wfbp", &cfg, &r);
  assert_true(r.straggler >= 0 && r.straggler < 32);
  char path[] = "/tmp/gs_sim_traceXXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(gs_sim_write_trace(&r, &tp.p, "wfbp", path), GS_OK);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  unlink(path);
  buf[n] = '\0';
  cJSON *root = cJSON_Parse(buf);
  assert_non_null(root);
  cJSON *ev = cJSON_GetObjectItem(root, "traceEvents");
  assert_true(cJSON_IsArray(ev));
  int x = 0, comm = 0, pids_straggler = 0;
  cJSON *e;
  cJSON_ArrayForEach(e, ev) {
    const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
    if (ph && strcmp(ph, "X") == 0) {
      x++;
      if (cJSON_GetObjectItem(e, "pid")->valueint == 0) comm++;
      if (r.straggler != 0 && cJSON_GetObjectItem(e, "pid")->valueint == r.straggler + 1)
        pids_straggler++;
    }
  }
  assert_int_equal(comm, 2);
  /* Worker 0: 2 forward + 2 backward; the straggler the same if not 0. */
  assert_int_equal(x, 2 + 4 + (r.straggler != 0 ? 4 : 0));
  if (r.straggler != 0) assert_int_equal(pids_straggler, 4);
  cJSON_Delete(root);
  assert_int_equal(gs_sim_write_trace(&r, &tp.p, "wfbp", "/nonexistent-dir/t.json"),
                   GS_ERR_IO);
  assert_non_null(strstr(gs_last_error(), "/nonexistent-dir/t.json"));
  gs_sim_result_free(&r);
  /* No spans, no trace. */
  cfg.trace = 0;
  sim_time(&tp.p, &c, "wfbp", &cfg, &r);
  assert_int_equal(gs_sim_write_trace(&r, &tp.p, "wfbp", "/tmp/x.json"), GS_ERR_INVALID_ARG);
}

static void test_bad_arguments(void **state) {
  (void)state;
  test_profile tp, other;
  tp_init(&tp, 0.01, 2, (double[]){0.02, 0.01}, (size_t[]){1000, 2000});
  tp_init(&other, 0.01, 3, (double[]){0.02, 0.01, 0.01}, (size_t[]){1, 2, 3});
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(0.001, 1e-6, &c), GS_OK);
  gs_plan *pl = NULL;
  assert_int_equal(gs_plan_make(&tp.p, &c, "wfbp", &pl), GS_OK);
  gs_sim_result r;
  gs_sim_config cfg = config(0);
  assert_int_equal(gs_sim_run(&tp.p, &c, NULL, pl, &cfg, &r), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "0 workers"));
  cfg = config(2);
  cfg.iters = 0;
  assert_int_equal(gs_sim_run(&tp.p, &c, NULL, pl, &cfg, &r), GS_ERR_INVALID_ARG);
  cfg = config(2);
  cfg.jitter_cv = -0.1;
  assert_int_equal(gs_sim_run(&tp.p, &c, NULL, pl, &cfg, &r), GS_ERR_INVALID_ARG);
  cfg.jitter_cv = NAN;
  assert_int_equal(gs_sim_run(&tp.p, &c, NULL, pl, &cfg, &r), GS_ERR_INVALID_ARG);
  cfg = config(2);
  /* A plan made for another profile. */
  assert_int_equal(gs_sim_run(&other.p, &c, NULL, pl, &cfg, &r), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_sim_run(&tp.p, &c, NULL, NULL, &cfg, &r), GS_ERR_INVALID_ARG);
  gs_plan_free(pl);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_tensor),        cmocka_unit_test(test_two_tensors_overlap),
      cmocka_unit_test(test_hierarchical_ring), cmocka_unit_test(test_dear),
      cmocka_unit_test(test_compressed),        cmocka_unit_test(test_equals_prediction),
      cmocka_unit_test(test_jitter),            cmocka_unit_test(test_stand_ins),
      cmocka_unit_test(test_trace),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
