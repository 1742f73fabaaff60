/*
 * Tests of the configuration search (src/sim/search.c, gradsync/search.h) on
 * synthetic profiles whose answer is known: a network that costs nothing
 * (efficiency 1 everywhere, the most workers for throughput), a very slow
 * one (no count meets the target: the fewest), a hand-computed crossing of
 * the target, efficiency that never rises with more workers, the counts
 * tried, the search's figures equal to the planner's, the parameter
 * servers' count and price, the per-worker batch within a global limit,
 * compression (recommended for a huge gradient on a slow network, not for
 * a compute-bound model, figures equal to the planner's compressed plan,
 * the margin) and the refusals.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gradsync.h"

#define TEST_PROFILE_MAXL 8
#include "../common/test_profile.h"

#define NEAR(x, y) assert_true(fabs((double)(x) - (double)(y)) <= 1e-12 + 1e-9 * fabs((double)(y)))

/* Network parameters with inter-node alpha and beta only. */
static gs_cost_params net_ab(double alpha, double beta) {
  gs_cost_params c;
  memset(&c, 0, sizeof c);
  c.alpha = alpha;
  c.beta = beta;
  return c;
}

/* Three tensors, 30 ms of compute, 12 MB of f32 gradients, batch 32. */
static void three_tensors(test_profile *tp) {
  tp_init(tp, 0.01, 3, (double[]){0.004, 0.006, 0.01},
          (size_t[]){1000000, 1000000, 1000000});
  tp->p.batch_size = 32;
}

static gs_search_config config(const gs_cost_params *net, int max_workers, int per_node,
                               double target) {
  gs_search_config c = {.net = net, .algo = GS_ALGO_RING, .workers = 0,
                        .max_workers = max_workers, .per_node = per_node,
                        .target_efficiency = target};
  return c;
}

/* A network that costs nothing: every count scales perfectly, so the
 * throughput pick is the most workers, and so is the pick for E = 1. */
static void test_free_network(void **state) {
  (void)state;
  test_profile tp;
  three_tensors(&tp);
  gs_cost_params net = net_ab(0, 0);
  gs_search_config cfg = config(&net, 64, 1, 0);
  gs_search_result r;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  NEAR(r.one_worker_s, 0.03);
  NEAR(r.backward_s, 0.02);
  NEAR(r.gradient_bytes, 12e6);
  assert_int_equal(r.npoints, 7); /* 1, 2, 4, ..., 64 */
  for (size_t i = 0; i < r.npoints; i++) {
    assert_int_equal(r.points[i].workers, 1 << i);
    NEAR(r.points[i].efficiency, 1.0);
    NEAR(r.points[i].samples_s, (1 << i) * 32 / 0.03);
  }
  assert_int_equal(r.points[r.pick].workers, 64);
  assert_int_equal(r.target_met, 1);
  assert_true(r.allreduce_all_s == 0);
  /* Free links: one server keeps up, and the all-reduce (no slower than
   * one worker) stays. */
  for (size_t i = 0; i < r.npoints; i++) {
    assert_int_equal(r.points[i].ps_servers, 1);
    NEAR(r.points[i].ps_iter_s, 0.03);
  }
  assert_int_equal(r.sync, GS_SEARCH_ALLREDUCE);
  gs_search_result_free(&r);
  cfg.target_efficiency = 1.0;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.points[r.pick].workers, 64);
  assert_int_equal(r.target_met, 1);
  gs_search_result_free(&r);
  gs_search_result_free(&r); /* released twice: a no-op */
}

/* 1 kB/s: 12 MB take hours, against 30 ms of compute. From 2 workers up
 * nothing meets 0.5, and the search says so and picks the fewest; for
 * throughput one worker (no communication) beats every other count. */
static void test_slow_network(void **state) {
  (void)state;
  test_profile tp;
  three_tensors(&tp);
  gs_cost_params net = net_ab(1e-3, 1e-3);
  /* As slow inside a node: 2 workers are one node of 2, priced on its
   * links. */
  net.alpha_local = net.alpha;
  net.beta_local = net.beta;
  gs_search_config cfg = config(&net, 16, 2, 0.5);
  gs_search_result r;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.npoints, 4); /* 2, 4, 8, 16 */
  assert_int_equal(r.pick, 0);
  assert_int_equal(r.points[0].workers, 2);
  assert_int_equal(r.target_met, 0);
  for (size_t i = 0; i < r.npoints; i++) assert_true(r.points[i].efficiency < 1e-4);
  /* One all-reduce of all 12 MB at the pick (2 workers, one node of 2):
   * the ring's line, a + b * M, from the cost module. */
  double a, b;
  gs_cost_allreduce_linear(&net, (gs_cost_topo){2, 1}, GS_ALGO_RING, &a, &b);
  NEAR(r.allreduce_all_s, a + b * 12e6);
  gs_search_result_free(&r);
  cfg = config(&net, 16, 1, 0);
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.points[r.pick].workers, 1);
  assert_int_equal(r.target_met, 1);
  NEAR(r.points[0].efficiency, 1.0);
  gs_search_result_free(&r);
}

/* With the algorithm left to the cost module (auto), one all-reduce of
 * every gradient at the pick is priced with its best algorithm, as the
 * plans price it: 16 workers, 1 ms a message, 1 kB of gradients, where
 * the ring's 30 steps cost 10 times recursive doubling's 4 (until
 * 2026-12-06 the ring's line always). */
static void test_allreduce_all_auto(void **state) {
  (void)state;
  test_profile tp;
  tp_init(&tp, 0.01, 1, (double[]){0.02}, (size_t[]){256});
  gs_cost_params net = net_ab(1e-3, 1e-9);
  gs_search_config cfg = config(&net, 16, 1, 0);
  cfg.algo = GS_ALGO_AUTO;
  cfg.workers = 16;
  cfg.max_workers = 0;
  gs_search_result r;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.points[r.pick].workers, 16);
  gs_cost_topo topo = {16, 16};
  double ring = gs_cost_allreduce(&net, topo, GS_ALGO_RING, 1024);
  double best = INFINITY;
  for (gs_algo a = GS_ALGO_RING; a <= GS_ALGO_RABENSEIFNER; a++) {
    double v = gs_cost_allreduce(&net, topo, a, 1024);
    if (v >= 0 && v < best) best = v;
  }
  assert_true(best < ring / 5);
  NEAR(r.allreduce_all_s, best);
  gs_search_result_free(&r);
}

/* One tensor, forward 10 ms, backward 20 ms, M*beta = 15 ms, alpha 0: the
 * ring all-reduce takes 2(p-1)/p * 15 ms after the backward, whatever the
 * policy, so the efficiency is 0.03 / (0.03 + 0.03 (p-1)/p):
 * 2/3 at 2 workers, 4/7 at 4, 8/15 at 8. A target of 0.55 stops at 4. */
static void test_target_crossing(void **state) {
  (void)state;
  test_profile tp;
  tp_init(&tp, 0.01, 1, (double[]){0.02}, (size_t[]){1000000});
  gs_cost_params net = net_ab(0, 0.015 / 4e6);
  gs_search_config cfg = config(&net, 8, 1, 0.55);
  gs_search_result r;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.npoints, 4);
  NEAR(r.points[1].efficiency, 2.0 / 3);
  NEAR(r.points[2].efficiency, 4.0 / 7);
  NEAR(r.points[3].efficiency, 8.0 / 15);
  NEAR(r.points[2].iter_s[r.points[2].best], 0.03 + 0.0225);
  assert_int_equal(r.points[r.pick].workers, 4);
  assert_int_equal(r.target_met, 1);
  NEAR(r.allreduce_all_s, 0.0225);
  assert_true(r.points[0].samples_s == 0); /* no batch size in the profile */
  /* Parameter servers: without a reduction cost a server keeps up with W
   * workers' pushes once there are W of them, and a round then takes
   * M beta = 15 ms (push and pull overlapping) and the drain: the answers
   * run a chunk behind the pushes, so a whole 256 KiB chunk's answers
   * follow the last push, from W servers (a shard of one chunk: the shard).
   * At 4 workers a shard of 1 MB is 3 chunks and 213,568 bytes, and the
   * drain a whole chunk: 15 + 3.9 ms, below the ring's 22.5 ms, which one
   * tensor cannot hide: parameter servers win. */
  for (size_t i = 0; i < r.npoints; i++) {
    int w = r.points[i].workers;
    assert_int_equal(r.points[i].ps_servers, w);
    double shard = 4e6 / w, q = (double)GS_PS_CHUNK_BYTES;
    NEAR(r.points[i].ps_round_s, 0.015 + w * fmin(shard, q) * net.beta);
    NEAR(r.points[i].ps_iter_s, 0.03 + r.points[i].ps_round_s);
  }
  NEAR(r.points[2].ps_round_s, 0.015 + 4 * 262144 * net.beta);
  assert_int_equal(r.sync, GS_SEARCH_PS);
  gs_search_result_free(&r);
  /* With the sums as slow as the link (gamma = beta), twice the servers. */
  net.gamma = net.beta;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  for (size_t i = 0; i < r.npoints; i++)
    assert_int_equal(r.points[i].ps_servers, 2 * r.points[i].workers);
  net.gamma = 0;
  gs_search_result_free(&r);
  /* Throughput: p / (0.03 + 0.03 (p-1)/p) grows with p: the most. */
  cfg.target_efficiency = 0;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.points[r.pick].workers, 8);
  gs_search_result_free(&r);
}

/* On a 1 Gbit/s preset with the ring (whose a and b both grow with p), the
 * efficiency never rises with more workers, and every figure is the
 * planner's: each policy's time at each count is gs_plan_make's on
 * gs_plan_cost_from_net, and the best is their minimum. */
static void test_monotone_and_planner(void **state) {
  (void)state;
  test_profile tp;
  three_tensors(&tp);
  gs_cost_params net;
  assert_int_equal(gs_cost_preset("1gbit", &net), GS_OK);
  gs_search_config cfg = config(&net, 96, 4, 0);
  gs_search_result r;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.npoints, 6); /* 4, 8, 16, 32, 64, 96 */
  assert_int_equal(r.points[5].workers, 96);
  for (size_t i = 0; i < r.npoints; i++) {
    const gs_search_point *p = &r.points[i];
    assert_int_equal(p->nodes, p->workers / 4);
    assert_true(p->efficiency > 0 && p->efficiency <= 1 + 1e-12);
    if (i > 0) assert_true(p->efficiency <= r.points[i - 1].efficiency + 1e-12);
    gs_plan_cost cost;
    assert_int_equal(gs_plan_cost_from_net(&net, (gs_cost_topo){p->workers, p->nodes},
                                           GS_ALGO_RING, &cost), GS_OK);
    for (int k = 0; k < GS_SEARCH_POLICIES; k++) {
      gs_plan *pl = NULL;
      assert_int_equal(gs_plan_make(&tp.p, &cost, gs_plan_policy_name((gs_plan_policy_kind)k),
                                    &pl), GS_OK);
      assert_true(pl->predicted_iter_s == p->iter_s[k]);
      assert_true(p->iter_s[p->best] <= p->iter_s[k]);
      gs_plan_free(pl);
    }
    NEAR(p->efficiency, r.one_worker_s / p->iter_s[p->best]);
    /* The servers' count is the fewest that keep up, priced by the cost
     * model with the workers 4 a node (their pushes share its link) and
     * each server on a node of its own. Until 2026-12-01 the workers were
     * priced one a node: a round 4 times too short on the workers' side. */
    gs_cost_ps_nodes kinds[4];
    int nk;
    gs_cost_ps_out o, fewer, alone;
    assert_int_equal(gs_cost_ps_layout(p->workers, p->ps_servers, 4, 1, kinds, &nk), GS_OK);
    assert_int_equal(nk, 2);
    assert_true(kinds[0].count == p->workers / 4 && kinds[0].workers == 4);
    assert_int_equal(gs_cost_ps_nodes_round(&net, kinds, nk, 12e6, GS_PS_CHUNK_BYTES, &o),
                     GS_OK);
    assert_true(o.server_s <= o.worker_s);
    assert_true(o.round_s == p->ps_round_s);
    assert_int_equal(gs_cost_ps(&net, p->workers, p->ps_servers, 12e6, GS_PS_CHUNK_BYTES,
                                &alone), GS_OK);
    assert_true(o.worker_s - net.alpha > 3.9 * (alone.worker_s - net.alpha));
    assert_true(o.round_s > alone.round_s);
    if (p->ps_servers > 1) {
      assert_int_equal(gs_cost_ps_layout(p->workers, p->ps_servers - 1, 4, 1, kinds, &nk),
                       GS_OK);
      assert_int_equal(gs_cost_ps_nodes_round(&net, kinds, nk, 12e6, GS_PS_CHUNK_BYTES,
                                              &fewer), GS_OK);
      assert_true(fewer.server_s > fewer.worker_s);
    }
  }
  const gs_search_point *q = &r.points[r.pick];
  assert_int_equal(r.sync, q->ps_iter_s < q->iter_s[q->best] ? GS_SEARCH_PS
                                                              : GS_SEARCH_ALLREDUCE);
  gs_search_result_free(&r);
  /* One count only. */
  cfg.max_workers = 0;
  cfg.workers = 12;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.npoints, 1);
  assert_int_equal(r.points[0].workers, 12);
  assert_int_equal(r.pick, 0);
  gs_search_result_free(&r);
}

/* The per-worker batch within a global limit of 80 samples, the profile
 * measured at 10 (one tensor, 30 ms of compute, M beta = 15 ms): each count
 * takes B = 80 / W (80, 40, 20, 10), its compute 30 ms x B / 10, and the
 * ring's 2(W-1)/W x 15 ms after it: efficiency 1, 0.12 / 0.135, 0.06 /
 * 0.0825, 0.03 / 0.05625; samples per second 80 / iteration, the most at 8
 * workers; 0.75 stops at 2. A cap of 20 per worker (memory) binds below 4. */
static void test_batch(void **state) {
  (void)state;
  test_profile tp;
  tp_init(&tp, 0.01, 1, (double[]){0.02}, (size_t[]){1000000});
  tp.p.batch_size = 10;
  gs_cost_params net = net_ab(0, 0.015 / 4e6);
  gs_search_config cfg = config(&net, 8, 1, 0);
  cfg.max_global_batch = 80;
  gs_search_result r;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  static const int batch[] = {80, 40, 20, 10};
  static const double t1[] = {0.24, 0.12, 0.06, 0.03}, comm[] = {0, 0.015, 0.0225, 0.02625};
  for (size_t i = 0; i < 4; i++) {
    const gs_search_point *p = &r.points[i];
    assert_int_equal(p->batch, batch[i]);
    NEAR(p->one_worker_s, t1[i]);
    NEAR(p->iter_s[p->best], t1[i] + comm[i]);
    NEAR(p->efficiency, t1[i] / (t1[i] + comm[i]));
    NEAR(p->samples_s, 80 / (t1[i] + comm[i]));
  }
  NEAR(r.one_worker_s, 0.03); /* at the profile's own batch */
  assert_int_equal(r.points[r.pick].workers, 8);
  gs_search_result_free(&r);
  cfg.target_efficiency = 0.75;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.points[r.pick].workers, 2);
  gs_search_result_free(&r);
  cfg.max_worker_batch = 20;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.points[0].batch, 20);
  assert_int_equal(r.points[1].batch, 20);
  assert_int_equal(r.points[3].batch, 10);
  NEAR(r.points[1].efficiency, 0.06 / 0.075);
  gs_search_result_free(&r);
  /* Refused: a global batch below the workers, and no batch to scale. */
  cfg.max_global_batch = 4;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_ERR_INVALID_ARG);
  cfg.max_global_batch = 80;
  cfg.max_worker_batch = -1;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_ERR_INVALID_ARG);
  cfg.max_worker_batch = 0;
  tp.p.batch_size = 0;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_ERR_INVALID_ARG);
  assert_null(r.points);
}

/* Refusals: GS_ERR_INVALID_ARG (or UNSUPPORTED for a collective that is no
 * all-reduce), and the result left empty. */
static void test_bad_arguments(void **state) {
  (void)state;
  test_profile tp;
  three_tensors(&tp);
  gs_cost_params net = net_ab(1e-5, 1e-9);
  gs_search_result r;
  struct {
    gs_search_config cfg;
    gs_status want;
  } bad[] = {
      {{.net = NULL, .max_workers = 8, .per_node = 1}, GS_ERR_INVALID_ARG},
      {{.net = &net, .per_node = 1}, GS_ERR_INVALID_ARG},
      {{.net = &net, .workers = 4, .max_workers = 8, .per_node = 1}, GS_ERR_INVALID_ARG},
      {{.net = &net, .max_workers = -8, .per_node = 1}, GS_ERR_INVALID_ARG},
      {{.net = &net, .max_workers = 6, .per_node = 4}, GS_ERR_INVALID_ARG},
      {{.net = &net, .max_workers = 8, .per_node = 0}, GS_ERR_INVALID_ARG},
      {{.net = &net, .max_workers = 8, .per_node = 1, .target_efficiency = 1.5},
       GS_ERR_INVALID_ARG},
      {{.net = &net, .max_workers = 8, .per_node = 1, .target_efficiency = NAN},
       GS_ERR_INVALID_ARG},
      {{.net = &net, .algo = GS_ALGO_PIPELINE, .max_workers = 8, .per_node = 1},
       GS_ERR_UNSUPPORTED},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&r, 0xff, sizeof r);
    assert_int_equal(gs_search_run(&tp.p, &bad[i].cfg, &r), bad[i].want);
    assert_true(strstr(gs_last_error(), "search") != NULL || bad[i].want != GS_ERR_INVALID_ARG);
    assert_null(r.points);
    assert_int_equal(r.npoints, 0);
  }
  gs_search_config ok = config(&net, 8, 1, 0);
  assert_int_equal(gs_search_run(NULL, &ok, &r), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_search_run(&tp.p, &ok, NULL), GS_ERR_INVALID_ARG);
  tp.t[1].backward_s = -1; /* a profile the planner refuses */
  assert_int_equal(gs_search_run(&tp.p, &ok, &r), GS_ERR_INVALID_ARG);
  assert_null(r.points);
}

/* Compression where the answer is known. A small compute (100 ms) and one
 * 100 MB gradient on a 100 MB/s network: the ring all-reduce on 4 workers
 * moves 1.5 x 100 MB (1.5 s) and parameter servers 1 x 100 MB each way,
 * while top-k at 1% gathers 2 MB payloads (8 bytes per kept element) and
 * fp16 halves the ring's bytes: both beat dense by more than the margin,
 * the faster (top-k) is recommended, and every figure equals the planner's
 * own compressed plan. */
static void test_compression_slow_network(void **state) {
  (void)state;
  test_profile tp;
  tp_init(&tp, 0.05, 1, (double[]){0.05}, (size_t[]){25000000});
  tp.p.batch_size = 8;
  gs_cost_params net = net_ab(1e-4, 1e-8);
  gs_search_compressor cand[] = {{.spec = "fp16", .secs_per_elem = 1e-10},
                                 {.spec = "topk:0.01", .secs_per_elem = 1e-9}};
  gs_search_config cfg = {.net = &net, .algo = GS_ALGO_RING, .workers = 4, .per_node = 1,
                          .compress = cand, .ncompress = 2,
                          .compress_min_gain = GS_SEARCH_COMPRESS_MIN_GAIN};
  gs_search_result r;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  const gs_search_point *pt = &r.points[r.pick];
  assert_int_equal(pt->workers, 4);
  assert_int_equal(r.ncompressed, 2);
  assert_int_equal(r.compress_pick, 1);
  assert_string_equal(r.compressed[0].spec, "fp16");
  assert_string_equal(r.compressed[1].spec, "topk:0.01");
  NEAR(r.dense_iter_s, fmin(pt->iter_s[pt->best], pt->ps_iter_s));
  NEAR(r.dense_bytes_per_step, 1e8);
  assert_int_equal(r.sync, GS_SEARCH_ALLREDUCE);
  for (size_t i = 0; i < 2; i++) {
    const gs_search_compressed *e = &r.compressed[i];
    /* Beyond the margin. */
    assert_true(e->iter_s < (1 - GS_SEARCH_COMPRESS_MIN_GAIN) * r.dense_iter_s);
    NEAR(e->gain, 1 - e->iter_s / r.dense_iter_s);
    NEAR(e->efficiency, pt->one_worker_s / e->iter_s);
    assert_int_equal(e->groups, 1);
    assert_int_equal(e->compressed_groups, 1);
    /* The same plan as the planner's compressed path makes. */
    gs_compressor *c = NULL;
    assert_int_equal(gs_compressor_create(e->spec, &c), GS_OK);
    gs_cost_topo topo = {4, 4};
    gs_plan_cost cost;
    gs_plan_xchg x;
    gs_plan_policy pol;
    gs_plan *pl = NULL;
    assert_int_equal(gs_plan_cost_from_net(&net, topo, GS_ALGO_RING, &cost), GS_OK);
    gs_cost_coding coding;
    assert_int_equal(gs_cost_coding_rate(cand[i].secs_per_elem, &coding), GS_OK);
    assert_int_equal(gs_plan_xchg_from_compressor(c, &coding, &net, topo, NULL, 1, &x), GS_OK);
    assert_int_equal(gs_plan_policy_parse("auto", &pol), GS_OK);
    assert_int_equal(gs_plan_make_xchg(&tp.p, &cost, &x, &pol, 1, &pl), GS_OK);
    NEAR(e->iter_s, pl->predicted_iter_s);
    assert_int_equal(e->policy, pl->chosen);
    assert_int_equal(e->exchange, pl->group_xchg[0]);
    gs_plan_free(pl);
    size_t b = 0;
    assert_int_equal(gs_compressor_payload_bytes(c, 25000000, 0, &b), GS_OK);
    NEAR(e->bytes_per_step, (double)b);
    gs_compressor_destroy(c);
  }
  /* Dense is the parameter servers' 1.1 s (100 MB each way at 100 MB/s,
   * after the compute), below the ring's 1.6 s; fp16's ring moves half the
   * ring's bytes (0.85 s), top-k's gather 6 MB and codes 25 M elements (at
   * most 0.2 s in all). */
  NEAR(r.dense_iter_s, r.points[r.pick].ps_iter_s);
  assert_true(r.compressed[0].iter_s > 0.8 && r.compressed[0].iter_s < 0.9);
  assert_true(r.compressed[1].iter_s < 0.2);
  NEAR(r.compressed[0].bytes_per_step, 5e7);  /* fp16: 2 bytes an element */
  NEAR(r.compressed[1].bytes_per_step, 2e6);  /* 250,000 x (index + value) */
  assert_int_equal(r.compressed[1].exchange, GS_XCHG_ALLGATHER);
  gs_search_result_free(&r);
  assert_null(r.compressed);

  /* A margin no candidate meets keeps dense; "auto:" lets each group choose
   * and still compresses this one. */
  cfg.compress_min_gain = 0.99;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.compress_pick, -1);
  gs_search_result_free(&r);
  cfg.compress_min_gain = GS_SEARCH_COMPRESS_MIN_GAIN;
  /* The count is chosen with compression: dense scales to nothing here
   * (one worker's 100 ms against seconds of all-reduce: one worker has the
   * most throughput), while top-k (about 0.2 s an iteration on 4) makes 4
   * workers the most. */
  cfg.workers = 0;
  cfg.max_workers = 4;
  cfg.ncompress = 0;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.points[r.pick].workers, 1);
  assert_null(r.compressed);
  gs_search_result_free(&r);
  cfg.ncompress = 2;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.points[r.pick].workers, 4);
  assert_int_equal(r.points[0].compress_pick, -1); /* one worker sends nothing */
  assert_int_equal(r.points[1].compress_pick, 1);
  assert_int_equal(r.points[2].compress_pick, 1);
  assert_int_equal(r.compress_pick, 1);
  NEAR(r.points[2].pick_iter_s, r.compressed[1].iter_s);
  NEAR(r.points[2].pick_efficiency, r.points[2].one_worker_s / r.compressed[1].iter_s);
  gs_search_result_free(&r);
  cfg.workers = 4;
  cfg.max_workers = 0;
  gs_search_compressor autoz = {.spec = "auto:topk:0.01", .secs_per_elem = 1e-9};
  cfg.compress = &autoz;
  cfg.ncompress = 1;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.compress_pick, 0);
  assert_string_equal(r.compressed[0].spec, "auto:topk:0.01");
  assert_int_equal(r.compressed[0].compressed_groups, 1);
  gs_search_result_free(&r);
}

/* Compute dominates: 2 s of compute and a 4 MB gradient on a 10 GB/s
 * network, where dense's all-reduce (0.6 ms) hides behind the backward
 * pass. fp16 saves a sliver of the exposed tail at most, far below the
 * margin: dense is recommended. With no margin at all, the strictly faster
 * candidate is taken, and never one that is slower. */
static void test_compression_compute_bound(void **state) {
  (void)state;
  test_profile tp;
  tp_init(&tp, 1.0, 2, (double[]){0.5, 0.5}, (size_t[]){500000, 500000});
  gs_cost_params net = net_ab(1e-5, 1e-10);
  gs_search_compressor cand[] = {{.spec = "fp16", .secs_per_elem = 0},
                                 {.spec = "topk:0.01", .secs_per_elem = 1e-6}};
  gs_search_config cfg = {.net = &net, .algo = GS_ALGO_RING, .max_workers = 8, .per_node = 1,
                          .compress = cand, .ncompress = 2,
                          .compress_min_gain = GS_SEARCH_COMPRESS_MIN_GAIN};
  gs_search_result r;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.points[r.pick].workers, 8);
  assert_int_equal(r.compress_pick, -1);
  assert_true(r.compressed[0].gain < 0.01);
  /* top-k's coding (1 us an element, 1 s for the model) makes it slower. */
  assert_true(r.compressed[1].iter_s > r.dense_iter_s);
  assert_true(r.compressed[1].gain < 0);
  gs_search_result_free(&r);
  cfg.compress_min_gain = 0;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  if (r.compressed[0].iter_s < r.dense_iter_s)
    assert_int_equal(r.compress_pick, 0);
  else
    assert_int_equal(r.compress_pick, -1);
  gs_search_result_free(&r);
  /* No candidates: dense, nothing allocated. */
  cfg.ncompress = 0;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_OK);
  assert_int_equal(r.compress_pick, -1);
  assert_null(r.compressed);
  gs_search_result_free(&r);
}

/* Bad compression arguments are refused before any planning, naming the
 * spec, and leave the result empty. */
static void test_compression_refusals(void **state) {
  (void)state;
  test_profile tp;
  three_tensors(&tp);
  gs_cost_params net = net_ab(1e-5, 1e-9);
  gs_search_compressor bad[] = {{.spec = "nonsense:1", .secs_per_elem = 0},
                                {.spec = "topk:2", .secs_per_elem = 0},
                                {.spec = "none", .secs_per_elem = 0},
                                {.spec = "auto:", .secs_per_elem = 0},
                                {.spec = NULL, .secs_per_elem = 0},
                                {.spec = "topk:0.01", .secs_per_elem = -1},
                                {.spec = "topk:0.01", .secs_per_elem = NAN}};
  gs_search_result r;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gs_search_compressor two[2] = {{.spec = "fp16"}, bad[i]};
    gs_search_config cfg = {.net = &net, .max_workers = 4, .per_node = 1, .compress = two,
                            .ncompress = 2, .compress_min_gain = 0.1};
    memset(&r, 0xff, sizeof r);
    assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_ERR_INVALID_ARG);
    assert_null(r.points);
    assert_null(r.compressed);
  }
  gs_search_compressor ok = {.spec = "fp16"};
  gs_search_config cfg = {.net = &net, .max_workers = 4, .per_node = 1, .compress = NULL,
                          .ncompress = 1};
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_ERR_INVALID_ARG);
  cfg.compress = &ok;
  cfg.compress_min_gain = 1;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_ERR_INVALID_ARG);
  cfg.compress_min_gain = -0.1;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_ERR_INVALID_ARG);
  cfg.compress_min_gain = NAN;
  assert_int_equal(gs_search_run(&tp.p, &cfg, &r), GS_ERR_INVALID_ARG);
  assert_true(strstr(gs_last_error(), "search") != NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_free_network),      cmocka_unit_test(test_slow_network),
      cmocka_unit_test(test_target_crossing),   cmocka_unit_test(test_monotone_and_planner),
      cmocka_unit_test(test_allreduce_all_auto),
      cmocka_unit_test(test_batch),             cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_compression_slow_network),
      cmocka_unit_test(test_compression_compute_bound),
      cmocka_unit_test(test_compression_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
