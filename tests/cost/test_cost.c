/*
 * Unit tests of the cost model: the properties that users and the algorithm
 * choice rely on, rather than the formulas restated (include/gradsync/cost.h
 * makes src/cost/cost.c their single home).
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

#include "gradsync.h"

static const char *const presets[] = {"1GbE", "10GbE", "25GbE", "100GbIB", "shm"};
#define NPRESETS (sizeof presets / sizeof presets[0])

static const gs_algo allreduce_algos[] = {GS_ALGO_RING, GS_ALGO_RABENSEIFNER,
                                          GS_ALGO_RD, GS_ALGO_HIER};

static int close_rel(double a, double b, double rel) {
  return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-300;
}

#define assert_close(a, b, rel)                                                \
  do {                                                                         \
    double a_ = (a), b_ = (b);                                                 \
    if (!close_rel(a_, b_, rel))                                               \
      fail_msg("%s = %.17g, expected %.17g (%s)", #a, a_, b_, #b);             \
  } while (0)

static int is_pow2(int p) { return p > 0 && (p & (p - 1)) == 0; }

/* ---- Presets ------------------------------------------------------------------- */

/* One vocabulary: run's rate names and the older fabric names mean the same
 * link, and the preset's beta follows the rate run shapes to (the faster
 * names at 85% of it; 100mbit at 1gbit's calibration, bytes ten times
 * slower). */
static void test_net_names(void **state) {
  (void)state;
  static const struct { const char *rate, *alias; double bps; } same[] = {
      {"1gbit", "1GbE", 1e9}, {"10gbit", "10GbE", 10e9}, {"25gbit", "25GbE", 25e9},
      {"100gbit", "100GbIB", 100e9}};
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
    double r1 = 0, r2 = 0;
    gs_cost_params a, b;
    assert_int_equal(gs_net_rate(same[i].rate, &r1), GS_OK);
    assert_int_equal(gs_net_rate(same[i].alias, &r2), GS_OK);
    assert_true(r1 == same[i].bps && r2 == same[i].bps);
    assert_int_equal(gs_cost_preset(same[i].rate, &a), GS_OK);
    assert_int_equal(gs_cost_preset(same[i].alias, &b), GS_OK);
    assert_memory_equal(&a, &b, sizeof a);
    if (a.ncalib == 0) /* calibrated presets: test_presets */
      assert_true(fabs(a.beta * same[i].bps * 0.85 / 8 - 1) < 1e-12);
  }
  double r = 0;
  gs_cost_params c, g;
  assert_int_equal(gs_net_rate("100mbit", &r), GS_OK);
  assert_true(r == 100e6);
  assert_int_equal(gs_cost_preset("100mbit", &c), GS_OK);
  assert_int_equal(gs_cost_preset("1gbit", &g), GS_OK);
  assert_true(fabs(c.beta / g.beta - 10) < 1e-12); /* the rate's bytes */
  assert_int_equal(gs_net_rate("2.5gbit", &r), GS_OK);
  assert_true(r == 2.5e9);
  assert_int_equal(gs_net_rate(".5gbit", &r), GS_OK); /* docs/CLI.md's reals */
  assert_true(r == 0.5e9);
  /* Unknown names fail with the list of names. */
  static const char *const bad[] = {"1gb", "gbit", "1e9bit", "0x10gbit", "0.5bit", "2tbit",
                                    "-1gbit", "1 gbit", "", "shm2", ".gbit", "..5gbit"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(gs_net_rate(bad[i], &r), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_cost_preset(bad[i], &c), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "1gbit, 10gbit"));
  }
  assert_int_equal(gs_net_rate("shm", &r), GS_ERR_INVALID_ARG); /* no rate */
  assert_int_equal(gs_net_rate(NULL, &r), GS_ERR_INVALID_ARG);
}

static void test_presets(void **state) {
  (void)state;
  for (size_t i = 0; i < NPRESETS; i++) {
    gs_cost_params c;
    memset(&c, 0xff, sizeof c);
    assert_int_equal(gs_cost_preset(presets[i], &c), GS_OK);
    assert_true(c.alpha > 0 && c.beta > 0 && c.gamma > 0);
    assert_true(c.alpha_local > 0 && c.beta_local > 0);
  }
  /* Faster fabrics have more bandwidth. */
  gs_cost_params g1, g10, ib;
  gs_cost_preset("1GbE", &g1);
  gs_cost_preset("10GbE", &g10);
  gs_cost_preset("100GbIB", &ib);
  assert_true(g1.beta > g10.beta && g10.beta > ib.beta);
  assert_close(g10.beta, 8.0 / (0.85 * 10e9), 1e-12); /* 10 Gbit/s at 85% */
  /* 1gbit is the emulated link's calibration (bench/net_calibrate.sh; its
   * constants against the committed result: tests/cost/test_net_calib.py):
   * several cluster sizes, each algorithm's constants. */
  assert_true(g1.ncalib >= 2);
  for (int i = 0; i < g1.ncalib; i++) {
    assert_true(i == 0 || g1.calib[i].nodes > g1.calib[i - 1].nodes);
    assert_true(g1.calib[i].alpha_msg >= 0);
    for (int a = GS_ALGO_RING; a <= GS_ALGO_RABENSEIFNER; a++)
      assert_true(g1.calib[i].alpha[a] >= 0 && g1.calib[i].beta[a] > 0);
    /* No algorithm moves bytes faster than the line rate. */
    assert_true(g1.calib[i].beta[GS_ALGO_RING] >= 8.0 / 1e9);
  }
  /* 100mbit: the same steps, bytes ten times slower. */
  gs_cost_params m100;
  gs_cost_preset("100mbit", &m100);
  assert_int_equal(m100.ncalib, g1.ncalib);
  assert_close(m100.calib[0].alpha[GS_ALGO_RING], g1.calib[0].alpha[GS_ALGO_RING], 1e-15);
  assert_close(m100.calib[0].beta[GS_ALGO_RING], 10 * g1.calib[0].beta[GS_ALGO_RING], 1e-15);
  /* What the preset assumes, in one line naming its constants. */
  char line[1024];
  assert_int_equal(gs_net_describe("1GbE", line, sizeof line), GS_OK);
  assert_non_null(strstr(line, "1GbE: 1 Gbit/s links"));
  assert_non_null(strstr(line, "bench/results/net_calibrate.md"));
  assert_non_null(strstr(line, "(rabenseifner)"));
  assert_non_null(strstr(line, "us a message"));
  char nodes4[32];
  snprintf(nodes4, sizeof nodes4, "on %d nodes", g1.calib[0].nodes);
  assert_non_null(strstr(line, nodes4));
  assert_int_equal(gs_net_describe("10gbit", line, sizeof line), GS_OK);
  assert_non_null(strstr(line, "10gbit fabric's published latency"));
  assert_int_equal(gs_net_describe("2.5gbit", line, sizeof line), GS_OK);
  assert_non_null(strstr(line, "1gbit's, bytes scaled to the rate"));
  assert_int_equal(gs_net_describe("shm", line, sizeof line), GS_OK);
  assert_non_null(strstr(line, "one host"));
  char tiny[8];
  assert_int_equal(gs_net_describe("1gbit", tiny, sizeof tiny), GS_OK);
  assert_int_equal(strlen(tiny), 7); /* truncated, terminated */
  assert_int_equal(gs_net_describe("2GbE", line, sizeof line), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_net_describe(NULL, line, sizeof line), GS_ERR_INVALID_ARG);
  gs_cost_params c = {.alpha = 1, .beta = 2, .alpha_local = 3, .beta_local = 4,
                      .gamma = 5};
  assert_int_equal(gs_cost_preset("2GbE", &c), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "'2GbE'"));
  assert_true(c.alpha == 1 && c.beta == 2); /* untouched */
  assert_int_equal(gs_cost_preset("", &c), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_preset(NULL, &c), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_preset("1GbE", NULL), GS_ERR_INVALID_ARG);
}

/* ---- Formulas' properties ---------------------------------------------------- */

/* With latency and reduction free, ring and Rabenseifner move the
 * bandwidth-optimal 2(p-1)/p n bytes per rank (Thakur et al. 2005, Sec. 4.4).
 * Rabenseifner reaches it for powers of two; otherwise its fold costs more. */
static void test_bandwidth_term(void **state) {
  (void)state;
  gs_cost_params c = {.beta = 1e-9, .beta_local = 1e-9};
  for (int p = 2; p <= 64; p++) {
    gs_cost_topo t = {p, p};
    for (double n = 1; n <= 1e9; n *= 31) {
      double bw = 2.0 * (p - 1) / p * n * c.beta;
      assert_close(gs_cost_allreduce(&c, t, GS_ALGO_RING, n), bw, 1e-12);
      double rab = gs_cost_allreduce(&c, t, GS_ALGO_RABENSEIFNER, n);
      if (is_pow2(p))
        assert_close(rab, bw, 1e-12);
      else
        assert_true(rab > bw);
      /* Recursive doubling sends the whole vector lg p times. */
      assert_true(gs_cost_allreduce(&c, t, GS_ALGO_RD, n) >= bw * (1 - 1e-12));
    }
  }
}

/* The two-level all-reduce on nodes of one link each, shared by the node's
 * L ranks: its L concurrent cross-node rings carry n bytes in all through
 * every node's link, so with free node-local steps it costs what the ring
 * between the N nodes costs (latency, bytes), whatever L is, and never
 * less than the bandwidth term 2(N-1)/N n b. E.g. ResNet-50's 102 MB on 2
 * nodes of 8 at 1e-7 s/B takes at least 10.2 s, not 1/8 of it. */
static void test_hier_shares_node_link(void **state) {
  (void)state;
  gs_cost_params c = {.alpha = 1e-3, .beta = 1e-7};
  const double m = 102.2e6;
  for (int nodes = 2; nodes <= 8; nodes *= 2) {
    double flat = gs_cost_allreduce(&c, (gs_cost_topo){nodes, nodes}, GS_ALGO_RING, m);
    for (int local = 1; local <= 8; local *= 2) {
      gs_cost_topo t = {nodes * local, nodes};
      double hier = gs_cost_allreduce(&c, t, GS_ALGO_HIER, m);
      double bound = 2.0 * (nodes - 1) / nodes * m * c.beta;
      if (hier < bound * (1 - 1e-12))
        fail_msg("hier %d nodes of %d: %g s < the link's %g s", nodes, local, hier, bound);
      assert_close(hier, flat, 1e-12);
      double a, b;
      gs_cost_allreduce_linear(&c, t, GS_ALGO_HIER, &a, &b);
      assert_close(b, 2.0 * (nodes - 1) / nodes * c.beta, 1e-9);
      assert_close(a, 2.0 * (nodes - 1) * c.alpha, 1e-9);
    }
  }
}

/* Recursive doubling and Rabenseifner on N nodes of L ranks: the exchanges
 * with mask < L stay inside a node, the others cross it with all L ranks
 * sending through its one link. With free node-local steps, on 8 ranks of 2
 * a node (2 of 3 exchanges across): recursive doubling 2 (a + 2 n b), not
 * 3 (a + n b); Rabenseifner 4 a + 2 * 2 * (3/4) n b, not 6 a + 2 (7/8) n b.
 * Until 2026-12-07 each rank was priced with a link of its own, so that
 * Rabenseifner looked faster than the ring and the two-level algorithm
 * on nodes of 8. */
static void test_exchanges_share_node_link(void **state) {
  (void)state;
  gs_cost_params c = {.alpha = 1e-3, .beta = 1e-7};
  const double n = 64e6;
  gs_cost_topo t = {8, 4};
  assert_close(gs_cost_allreduce(&c, t, GS_ALGO_RD, n), 2 * (c.alpha + 2 * n * c.beta), 1e-12);
  assert_close(gs_cost_allreduce(&c, t, GS_ALGO_RABENSEIFNER, n), 4 * c.alpha + 3 * n * c.beta,
               1e-12);
  /* One rank a node: the textbook formulas. */
  gs_cost_topo flat = {8, 8};
  assert_close(gs_cost_allreduce(&c, flat, GS_ALGO_RD, n), 3 * (c.alpha + n * c.beta), 1e-12);
  assert_close(gs_cost_allreduce(&c, flat, GS_ALGO_RABENSEIFNER, n),
               6 * c.alpha + 2 * 0.875 * n * c.beta, 1e-12);
  /* A node's link carries at least what the ring puts through it, on any
   * split into nodes of L (the bandwidth term), and the node-local steps
   * are priced on the node's links. */
  gs_cost_params cl = c;
  cl.alpha_local = 2e-6;
  cl.beta_local = 1e-10;
  for (int nodes = 2; nodes <= 16; nodes *= 2)
    for (int local = 2; local <= 8; local *= 2) {
      gs_cost_topo tl = {nodes * local, nodes};
      double ring = 2.0 * (nodes * local - 1) / (nodes * local) * n * c.beta;
      for (size_t a = 1; a < 3; a++) {
        double v = gs_cost_allreduce(&cl, tl, allreduce_algos[a], n);
        if (v < ring * (1 - 1e-12))
          fail_msg("%s on %d nodes of %d: %g s, below the ring's bytes through a link (%g s)",
                   gs_algo_name(allreduce_algos[a]), nodes, local, v, ring);
      }
    }
  /* Nodes of 8 on 100GbIB: the fastest is not Rabenseifner. */
  gs_cost_params ib;
  assert_int_equal(gs_cost_preset("100GbIB", &ib), GS_OK);
  gs_cost_topo t64 = {64, 8};
  double best = -1;
  gs_algo pick = gs_cost_best_allreduce(&ib, t64, 102.2e6, &best);
  if (pick == GS_ALGO_RABENSEIFNER || pick == GS_ALGO_RD)
    fail_msg("64 ranks, 8 a node, 100GbIB: %s chosen (%g s)", gs_algo_name(pick), best);
}

/* Every worker on one node: no byte crosses a node, so every algorithm is
 * priced on the node's links (alpha_local, beta_local), the hierarchical
 * formula is the node-local ring, and the best costs no more than it. */
static void test_one_node_prices_node_links(void **state) {
  (void)state;
  gs_cost_params c = {.alpha = 1e-3, .beta = 1e-7, .alpha_local = 2e-6,
                      .beta_local = 1e-10};
  gs_cost_params node = {.alpha = c.alpha_local, .beta = c.beta_local};
  const double m = 102.2e6;
  for (int p = 2; p <= 16; p++) {
    gs_cost_topo t = {p, 1}, flat = {p, p};
    for (size_t a = 0; a < 3; a++)
      assert_close(gs_cost_allreduce(&c, t, allreduce_algos[a], m),
                   gs_cost_allreduce(&node, flat, allreduce_algos[a], m), 1e-12);
    double hier = gs_cost_allreduce(&c, t, GS_ALGO_HIER, m);
    assert_close(hier, gs_cost_allreduce(&node, flat, GS_ALGO_RING, m), 1e-12);
    double best = -1;
    gs_cost_best_allreduce(&c, t, m, &best);
    if (best > hier * (1 + 1e-12)) fail_msg("p=%d on one node: best %g s > hier %g s", p, best, hier);
    assert_close(gs_cost_allgather(&c, t, GS_ALGO_RING, m),
                 gs_cost_allgather(&node, flat, GS_ALGO_RING, m), 1e-12);
    assert_close(gs_cost_bcast(&c, t, GS_ALGO_AUTO, m),
                 gs_cost_bcast(&node, flat, GS_ALGO_AUTO, m), 1e-12);
  }
  /* A line fitted on one node is the node's, and prices it back. */
  gs_cost_topo t8 = {8, 1};
  const double sz[2] = {1 << 20, 16 << 20};
  double secs[2] = {gs_cost_allreduce(&c, t8, GS_ALGO_RING, sz[0]) * 2,
                    gs_cost_allreduce(&c, t8, GS_ALGO_RING, sz[1]) * 2};
  gs_cost_params f = c;
  assert_int_equal(gs_cost_calibrate_allreduce(&f, t8, GS_ALGO_RING, sz, secs, 2), GS_OK);
  assert_close(gs_cost_allreduce(&f, t8, GS_ALGO_RING, sz[1]), secs[1], 1e-9);
}

static void test_p1_costs_zero(void **state) {
  (void)state;
  for (size_t i = 0; i < NPRESETS; i++) {
    gs_cost_params c;
    gs_cost_preset(presets[i], &c);
    gs_cost_topo t = {1, 1};
    for (double n = 0; n <= 1e9; n = n * 10 + 1) {
      for (size_t a = 0; a < 4; a++)
        assert_true(gs_cost_allreduce(&c, t, allreduce_algos[a], n) == 0.0);
      assert_true(gs_cost_allreduce(&c, t, GS_ALGO_AUTO, n) == 0.0);
      assert_true(gs_cost_reduce_scatter(&c, t, GS_ALGO_RING, n) == 0.0);
      assert_true(gs_cost_allgather(&c, t, GS_ALGO_RING, n) == 0.0);
      assert_true(gs_cost_bcast(&c, t, GS_ALGO_BINOMIAL, n) == 0.0);
      assert_true(gs_cost_bcast(&c, t, GS_ALGO_PIPELINE, n) == 0.0);
      assert_true(gs_cost_alltoall(&c, t, GS_ALGO_PAIRWISE, n) == 0.0);
      double best = -1;
      gs_cost_best_allreduce(&c, t, n, &best);
      assert_true(best == 0.0);
    }
  }
}

/* Costs are non-negative and grow with the message. */
static void test_costs_monotone(void **state) {
  (void)state;
  for (size_t i = 0; i < NPRESETS; i++) {
    gs_cost_params c;
    gs_cost_preset(presets[i], &c);
    for (int p = 2; p <= 17; p++) {
      for (int nodes = 1; nodes <= p; nodes++) {
        if (p % nodes) continue;
        gs_cost_topo t = {p, nodes};
        for (size_t a = 0; a < 4; a++) {
          double prev = 0;
          for (double n = 0; n <= 1e10; n = n * 4 + 1) {
            double v = gs_cost_allreduce(&c, t, allreduce_algos[a], n);
            if (!(v >= prev)) /* also catches NaN */
              fail_msg("%s %s p=%d nodes=%d n=%g: %g < %g", presets[i],
                       gs_algo_name(allreduce_algos[a]), p, nodes, n, v, prev);
            prev = v;
          }
        }
        double prev[4] = {0, 0, 0, 0};
        for (double n = 0; n <= 1e10; n = n * 4 + 1) {
          double v[4] = {gs_cost_reduce_scatter(&c, t, GS_ALGO_RING, n),
                         gs_cost_allgather(&c, t, GS_ALGO_RING, n),
                         gs_cost_bcast(&c, t, GS_ALGO_PIPELINE, n),
                         gs_cost_alltoall(&c, t, GS_ALGO_PAIRWISE, n)};
          for (int k = 0; k < 4; k++) {
            assert_true(v[k] >= prev[k]);
            prev[k] = v[k];
          }
        }
      }
    }
  }
}

/* The choice users see: a latency-bound algorithm for tiny messages, a
 * bandwidth-optimal one for large ones, on commodity Ethernet. */
static void test_regimes_1gbe(void **state) {
  (void)state;
  gs_cost_params c;
  assert_int_equal(gs_cost_preset("1GbE", &c), GS_OK);
  for (int p = 2; p <= 64; p++) {
    gs_cost_topo t = {p, p};
    double tiny = gs_cost_allreduce(&c, t, GS_ALGO_RD, 8);
    assert_true(tiny <= gs_cost_allreduce(&c, t, GS_ALGO_RING, 8));
    /* A latency-bound algorithm of lg p steps: recursive doubling, or
     * Rabenseifner where the calibration measured its step cheaper. */
    gs_algo small = gs_cost_best_allreduce(&c, t, 8, NULL);
    if (p > 2 && small != GS_ALGO_RD && small != GS_ALGO_RABENSEIFNER)
      fail_msg("p=%d: an 8-byte allreduce picks %s", p, gs_algo_name(small));
    gs_algo big = gs_cost_best_allreduce(&c, t, 256e6, NULL);
    if (big != GS_ALGO_RING && big != GS_ALGO_RABENSEIFNER)
      fail_msg("p=%d: 256 MB allreduce picks %s", p, gs_algo_name(big));
    double rd = gs_cost_allreduce(&c, t, GS_ALGO_RD, 256e6);
    assert_true(gs_cost_allreduce(&c, t, big, 256e6) < rd || p == 2);
  }
}

/* gs_cost_best_allreduce is the argmin of gs_cost_allreduce, with ties to the
 * first of ring, rabenseifner, rd, hier, except that the ring stays unless
 * the argmin is more than 10% faster; AUTO and MPI cost what it chooses. */
static void test_best_is_argmin(void **state) {
  (void)state;
  for (size_t i = 0; i < NPRESETS; i++) {
    gs_cost_params c;
    gs_cost_preset(presets[i], &c);
    for (int p = 1; p <= 24; p++) {
      for (int nodes = 1; nodes <= p; nodes++) {
        if (p % nodes) continue;
        gs_cost_topo t = {p, nodes};
        int hier_ok = nodes > 1 && nodes < p;
        for (double n = 0; n <= 4e9; n = n * 3 + 1) {
          double best_t = -1;
          gs_algo best = gs_cost_best_allreduce(&c, t, n, &best_t);
          double want = INFINITY;
          gs_algo want_algo = GS_ALGO_RING;
          for (size_t a = 0; a < 4; a++) {
            if (allreduce_algos[a] == GS_ALGO_HIER && !hier_ok) continue;
            double v = gs_cost_allreduce(&c, t, allreduce_algos[a], n);
            if (v < want) {
              want = v;
              want_algo = allreduce_algos[a];
            }
          }
          double ring = gs_cost_allreduce(&c, t, GS_ALGO_RING, n);
          if (want_algo != GS_ALGO_RING && want > 0.9 * ring) {
            want = ring;
            want_algo = GS_ALGO_RING;
          }
          if (p == 1) want = 0;
          if (p > 1 && best != want_algo)
            fail_msg("%s p=%d nodes=%d n=%g: best %s, argmin %s", presets[i], p,
                     nodes, n, gs_algo_name(best), gs_algo_name(want_algo));
          assert_true(best_t == want);
          assert_true(gs_cost_best_allreduce(&c, t, n, NULL) == best);
          assert_true(gs_cost_allreduce(&c, t, GS_ALGO_AUTO, n) == want);
          assert_true(gs_cost_allreduce(&c, t, GS_ALGO_MPI, n) == want);
        }
      }
    }
  }
  /* All equal (p = 2, no latency, no reduction cost): ring wins the tie. */
  gs_cost_params free_lat = {.beta = 1e-9, .beta_local = 1e-9};
  gs_cost_topo t2 = {2, 2};
  assert_close(gs_cost_allreduce(&free_lat, t2, GS_ALGO_RD, 1e6),
               gs_cost_allreduce(&free_lat, t2, GS_ALGO_RING, 1e6), 1e-12);
  assert_int_equal(gs_cost_best_allreduce(&free_lat, t2, 1e6, NULL), GS_ALGO_RING);
}

/* Algorithms that do not implement a collective cost a negative number. */
static void test_unsupported_negative(void **state) {
  (void)state;
  gs_cost_params c;
  gs_cost_preset("10GbE", &c);
  for (int p = 2; p <= 9; p++) {
    gs_cost_topo t = {p, p};
    const gs_algo not_ar[] = {GS_ALGO_PIPELINE, GS_ALGO_BINOMIAL,
                              GS_ALGO_PAIRWISE, GS_ALGO_DISSEMINATION,
                              GS_ALGO_COUNT};
    for (size_t i = 0; i < sizeof not_ar / sizeof not_ar[0]; i++)
      assert_true(gs_cost_allreduce(&c, t, not_ar[i], 1e6) < 0);
    assert_true(gs_cost_reduce_scatter(&c, t, GS_ALGO_RD, 1e6) < 0);
    assert_true(gs_cost_reduce_scatter(&c, t, GS_ALGO_PIPELINE, 1e6) < 0);
    assert_true(gs_cost_allgather(&c, t, GS_ALGO_RABENSEIFNER, 1e6) < 0);
    assert_true(gs_cost_allgather(&c, t, GS_ALGO_PAIRWISE, 1e6) < 0);
    assert_true(gs_cost_allgather(&c, t, GS_ALGO_RD, 1e6) < 0); /* as gs_allgather */
    assert_true(gs_cost_allgather(&c, t, GS_ALGO_RING, 1e6) >= 0);
    assert_true(gs_cost_bcast(&c, t, GS_ALGO_RING, 1e6) < 0);
    assert_true(gs_cost_bcast(&c, t, GS_ALGO_RD, 1e6) < 0);
    assert_true(gs_cost_alltoall(&c, t, GS_ALGO_RING, 1e6) < 0);
    assert_true(gs_cost_alltoall(&c, t, GS_ALGO_BINOMIAL, 1e6) < 0);
    assert_true(gs_cost_alltoall(&c, t, GS_ALGO_PAIRWISE, 1e6) >= 0);
    assert_true(gs_cost_bcast(&c, t, GS_ALGO_PIPELINE, 1e6) >= 0);
    assert_true(gs_cost_bcast(&c, t, GS_ALGO_AUTO, 1e6) >= 0);
  }
}

/* The header promises a negative cost for an algorithm lacking the
 * collective; that must not depend on the communicator size. */
static void test_unsupported_negative_p1(void **state) {
  (void)state;
  gs_cost_params c;
  gs_cost_preset("10GbE", &c);
  gs_cost_topo t = {1, 1};
  assert_true(gs_cost_allreduce(&c, t, GS_ALGO_PIPELINE, 1e6) < 0);
  assert_true(gs_cost_reduce_scatter(&c, t, GS_ALGO_RD, 1e6) < 0);
  assert_true(gs_cost_bcast(&c, t, GS_ALGO_RING, 1e6) < 0);
  assert_true(gs_cost_alltoall(&c, t, GS_ALGO_RING, 1e6) < 0);
}

/* ---- Linear forms and fits ------------------------------------------------------ */

static void test_allreduce_linear(void **state) {
  (void)state;
  for (size_t i = 0; i < NPRESETS; i++) {
    gs_cost_params c;
    gs_cost_preset(presets[i], &c);
    for (int p = 2; p <= 16; p++) {
      gs_cost_topo t = {p, p};
      for (size_t k = 0; k < 3; k++) {
        gs_algo algo = allreduce_algos[k];
        double a = -1, b = -1;
        gs_cost_allreduce_linear(&c, t, algo, &a, &b);
        assert_true(a > 0 && b > 0);
        const double sizes[] = {0, 4096, 1e6, 3e8};
        for (size_t s = 0; s < 4; s++)
          assert_close(a + b * sizes[s], gs_cost_allreduce(&c, t, algo, sizes[s]),
                       1e-9);
      }
      /* AUTO: the algorithm fastest for large messages (the argmin, without
       * the ring's margin). */
      double a, b;
      gs_cost_allreduce_linear(&c, t, GS_ALGO_AUTO, &a, &b);
      gs_algo big = GS_ALGO_RING;
      for (size_t k = 0; k < 3; k++)
        if (gs_cost_allreduce(&c, t, allreduce_algos[k], 64.0 * 1024 * 1024) <
            gs_cost_allreduce(&c, t, big, 64.0 * 1024 * 1024))
          big = allreduce_algos[k];
      assert_close(a + b * 5e7, gs_cost_allreduce(&c, t, big, 5e7), 1e-9);
      assert_close(a + b * 1e3, gs_cost_allreduce(&c, t, big, 1e3), 1e-9);
    }
  }
}

static void test_fit_linear(void **state) {
  (void)state;
  double x[] = {1, 2, 4, 8, 1000, 1e6}, y[6];
  for (int i = 0; i < 6; i++) y[i] = 3.5e-5 + 2.25e-9 * x[i];
  double a = 0, b = 0;
  assert_int_equal(gs_cost_fit_linear(x, y, 6, &a, &b), GS_OK);
  assert_close(a, 3.5e-5, 1e-9);
  assert_close(b, 2.25e-9, 1e-12);
  assert_int_equal(gs_cost_fit_linear(x, y, 2, &a, &b), GS_OK);
  assert_close(a, 3.5e-5, 1e-9);
  assert_close(b, 2.25e-9, 1e-9);
  /* Least squares through noisy-but-symmetric data. */
  double x2[] = {0, 1, 2, 3}, y2[] = {1, 2.5, 2.5, 4};
  assert_int_equal(gs_cost_fit_linear(x2, y2, 4, &a, &b), GS_OK);
  assert_close(b, 0.9, 1e-12);
  assert_close(a, 1.15, 1e-12);

  a = b = 42;
  assert_int_equal(gs_cost_fit_linear(x, y, 1, &a, &b), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_fit_linear(x, y, 0, &a, &b), GS_ERR_INVALID_ARG);
  double same[] = {5, 5, 5};
  assert_int_equal(gs_cost_fit_linear(same, y, 3, &a, &b), GS_ERR_INVALID_ARG);
  assert_true(a == 42 && b == 42);
  assert_int_equal(gs_cost_fit_linear(NULL, y, 3, &a, &b), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_fit_linear(x, NULL, 3, &a, &b), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_fit_linear(x, y, 3, NULL, &b), GS_ERR_INVALID_ARG);
}

/* Times generated by the model itself give back the model's alpha and beta,
 * and the fit leaves gamma and the node-local terms alone. */
static void check_calibration(gs_algo algo, gs_cost_topo t) {
  const gs_cost_params truth = {.alpha = 37e-6, .beta = 1.0 / 1.1e9,
                                .alpha_local = 2e-6, .beta_local = 1.0 / 7e9,
                                .gamma = 1.0 / 4e9};
  const double bytes[] = {8, 1024, 65536, 1 << 20, 16 << 20, 100e6};
  enum { N = sizeof bytes / sizeof bytes[0] };
  double secs[N];
  for (int i = 0; i < N; i++) secs[i] = gs_cost_allreduce(&truth, t, algo, bytes[i]);
  gs_cost_params c;
  gs_cost_preset("shm", &c);
  c.gamma = truth.gamma;
  c.alpha_local = truth.alpha_local;
  c.beta_local = truth.beta_local;
  gs_status st = gs_cost_calibrate_allreduce(&c, t, algo, bytes, secs, N);
  if (st != GS_OK) fail_msg("%s p=%d: %s", gs_algo_name(algo), t.ranks, gs_last_error());
  if (!close_rel(c.alpha, truth.alpha, 1e-6) || !close_rel(c.beta, truth.beta, 1e-6))
    fail_msg("%s p=%d nodes=%d: fitted alpha %.6g beta %.6g, want %.6g %.6g",
             gs_algo_name(algo), t.ranks, t.nodes, c.alpha, c.beta, truth.alpha,
             truth.beta);
  assert_true(c.gamma == truth.gamma);
  assert_true(c.alpha_local == truth.alpha_local);
  assert_true(c.beta_local == truth.beta_local);
}

static void test_calibrate_recovers_params(void **state) {
  (void)state;
  const int ps[] = {2, 3, 4, 8};
  const gs_algo algos[] = {GS_ALGO_RING, GS_ALGO_RD, GS_ALGO_RABENSEIFNER};
  for (size_t i = 0; i < 4; i++)
    for (size_t k = 0; k < 3; k++) check_calibration(algos[k], (gs_cost_topo){ps[i], ps[i]});
}

/* The hierarchical formula contains a choice of the cross-node algorithm,
 * which calibration must also see through. */
static void test_calibrate_hier(void **state) {
  (void)state;
  check_calibration(GS_ALGO_HIER, (gs_cost_topo){8, 2});
  check_calibration(GS_ALGO_HIER, (gs_cost_topo){12, 4});
  /* And the exchanges' formulas on nodes of several ranks, whose
   * node-local steps the fit leaves to alpha_local and beta_local. */
  check_calibration(GS_ALGO_RD, (gs_cost_topo){8, 2});
  check_calibration(GS_ALGO_RABENSEIFNER, (gs_cost_topo){8, 2});
  check_calibration(GS_ALGO_RABENSEIFNER, (gs_cost_topo){12, 4});
}

static void test_calibrate_invalid(void **state) {
  (void)state;
  gs_cost_params c;
  gs_cost_preset("1GbE", &c);
  double b[] = {1, 2, 3}, s[] = {1e-5, 2e-5, 3e-5};
  gs_cost_topo t = {4, 4};
  assert_int_equal(gs_cost_calibrate_allreduce(&c, t, GS_ALGO_RING, b, s, 1),
                   GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_calibrate_allreduce(&c, (gs_cost_topo){1, 1},
                                               GS_ALGO_RING, b, s, 3),
                   GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_calibrate_allreduce(&c, t, GS_ALGO_PIPELINE, b, s, 3),
                   GS_ERR_UNSUPPORTED);
  assert_int_equal(gs_cost_calibrate_allreduce(NULL, t, GS_ALGO_RING, b, s, 3),
                   GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_calibrate_allreduce(&c, t, GS_ALGO_RING, NULL, s, 3),
                   GS_ERR_INVALID_ARG);
  double same[] = {7, 7, 7};
  assert_int_equal(gs_cost_calibrate_allreduce(&c, t, GS_ALGO_RING, same, s, 3),
                   GS_ERR_INVALID_ARG);
  /* Times falling with size would fit a negative beta: clamped to 0. */
  double down[] = {3e-3, 2e-3, 1e-3};
  assert_int_equal(gs_cost_calibrate_allreduce(&c, t, GS_ALGO_RING,
                                               (double[]){1e3, 1e5, 1e7}, down, 3),
                   GS_OK);
  assert_true(c.beta == 0.0 && c.alpha >= 0.0);
}

/* The ring stays unless another algorithm is more than 10% faster, inside
 * the measured sizes and past them: Rabenseifner's moves the ring's bytes,
 * and a draw that timed it a little faster made it every large message's
 * algorithm for a whole job, which then trained at 0.75x DDP's rate
 * (gradsync.torch, 4 nodes at 100 Mbit/s; 0.98x with the ring). */
static void test_best_prefers_ring(void **state) {
  (void)state;
  gs_cost_params c;
  assert_int_equal(gs_cost_preset("1GbE", &c), GS_OK);
  c.ncalib = 0;
  gs_cost_topo t = {4, 4};
  double bytes[3] = {262144, 1048576, 4194304};
  /* 100 Mbit/s-like times. Rabenseifner's 2-3% faster at 1 and 4 MB, its
   * slope (1 MB to 4 MB) 3% lower; 25% faster at 256 KB. Recursive
   * doubling's, twice the ring's, never competes. */
  double ring[3] = {0.033, 0.135, 0.540};
  double rab[3] = {0.025, 0.132, 0.525};
  double rd[3] = {0.066, 0.270, 1.080};
  assert_int_equal(gs_cost_fit_algo(&c, t, GS_ALGO_RING, bytes, ring, 3), GS_OK);
  assert_int_equal(gs_cost_fit_algo(&c, t, GS_ALGO_RABENSEIFNER, bytes, rab, 3), GS_OK);
  assert_int_equal(gs_cost_fit_algo(&c, t, GS_ALGO_RD, bytes, rd, 3), GS_OK);
  double big = 64.0 * 1048576;
  double tr = gs_cost_allreduce(&c, t, GS_ALGO_RING, big);
  double tb = gs_cost_allreduce(&c, t, GS_ALGO_RABENSEIFNER, big);
  /* The premise: Rabenseifner's is the faster, by less than 10%, at 4 MB
   * (measured) and at 64 MB (its line). */
  assert_true(rab[2] < ring[2] && rab[2] > 0.9 * ring[2]);
  assert_true(tb < tr && tb > 0.9 * tr);
  assert_int_equal(gs_cost_best_allreduce(&c, t, 4194304, NULL), GS_ALGO_RING);
  double best_t = -1;
  assert_int_equal(gs_cost_best_allreduce(&c, t, big, &best_t), GS_ALGO_RING);
  assert_close(best_t, tr, 1e-12);
  assert_close(gs_cost_allreduce(&c, t, GS_ALGO_AUTO, big), tr, 1e-12);
  /* More than 10% faster: taken, inside the measured sizes ... */
  assert_int_equal(gs_cost_best_allreduce(&c, t, 262144, NULL), GS_ALGO_RABENSEIFNER);
  /* ... and past them (a 20% lower slope). */
  rab[1] = 0.525 - (0.540 - 0.135) * 0.8;
  assert_int_equal(gs_cost_fit_algo(&c, t, GS_ALGO_RABENSEIFNER, bytes, rab, 3), GS_OK);
  assert_true(gs_cost_allreduce(&c, t, GS_ALGO_RABENSEIFNER, big) < 0.9 * tr);
  assert_int_equal(gs_cost_best_allreduce(&c, t, big, NULL), GS_ALGO_RABENSEIFNER);
}

/* Measured points are interpolated inside their range, the fitted formula
 * is used outside it, the affine T(M) = a + bM ignores the points, and the
 * whole model survives a save/load round trip. */
static void test_fit_points_interpolate_and_persist(void **state) {
  (void)state;
  gs_cost_params c;
  assert_int_equal(gs_cost_preset("1GbE", &c), GS_OK);
  gs_cost_topo t = {4, 4};
  /* A link whose small messages are burst-fast: not affine. */
  double bytes[4] = {4096, 65536, 1048576, 4194304};
  double secs[4] = {100e-6, 150e-6, 12e-3, 50e-3};
  assert_int_equal(gs_cost_fit_algo(&c, t, GS_ALGO_RING, bytes, secs, 4), GS_OK);
  assert_int_equal(c.fit[GS_ALGO_RING].npoints, 4);
  for (int i = 0; i < 4; i++)
    assert_true(fabs(gs_cost_allreduce(&c, t, GS_ALGO_RING, bytes[i]) - secs[i]) < 1e-12);
  double mid = gs_cost_allreduce(&c, t, GS_ALGO_RING, (65536.0 + 1048576.0) / 2);
  assert_true(fabs(mid - (150e-6 + 12e-3) / 2) < 1e-9);
  /* Outside: the formula with the fitted alpha and beta, which grows. */
  double big = gs_cost_allreduce(&c, t, GS_ALGO_RING, 64.0 * 1048576);
  assert_true(big > 50e-3);
  double a, b;
  gs_cost_allreduce_linear(&c, t, GS_ALGO_RING, &a, &b);
  assert_true(fabs(a + b * 64.0 * 1048576 - big) < 1e-9 * big + 1e-12);

  char path[] = "/tmp/gs_test_cost_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(gs_cost_save(path, &c, t), GS_OK);
  gs_cost_params back;
  assert_int_equal(gs_cost_load(path, t, &back), GS_OK);
  assert_int_equal(back.fit[GS_ALGO_RING].npoints, 4);
  assert_true(fabs(gs_cost_allreduce(&back, t, GS_ALGO_RING, 300000) -
                   gs_cost_allreduce(&c, t, GS_ALGO_RING, 300000)) < 1e-12);
  /* Another topology is refused, with a message naming the file. */
  gs_cost_topo other = {8, 8};
  assert_int_equal(gs_cost_load(path, other, &back), GS_ERR_MISMATCH);
  assert_non_null(strstr(gs_last_error(), path));
  unlink(path);
  assert_int_equal(gs_cost_load(path, t, &back), GS_ERR_IO);
}

/* A curve from raw samples: one point per power-of-two class (median time,
 * mean size), the line through them, and an isotonic correction. */
/* gs_cost_fit_totals: exact totals of a known a and b come back; noisy ones
 * are fitted on the relative error; a negative latency is clamped to 0 with
 * b refitted alone; bad observations are refused, naming them. */
static void test_fit_totals(void **state) {
  (void)state;
  const double a = 8e-4, b = 2e-8;
  /* Plans of 1, 4, 161 and 604 messages over gradients of 26, 102, 80 MB. */
  double g[4] = {1, 4, 161, 604}, B[4] = {26.5e6, 102.2e6, 102.2e6, 80.1e6}, y[4];
  for (int i = 0; i < 4; i++) y[i] = a * g[i] + b * B[i];
  double fa = -1, fb = -1;
  assert_int_equal(gs_cost_fit_totals(g, B, y, 4, &fa, &fb), GS_OK);
  assert_true(fabs(fa - a) <= 1e-9 * a);
  assert_true(fabs(fb - b) <= 1e-9 * b);
  /* Relative, not absolute, least squares: one observation 10% slow moves
   * the fit, but every fitted total stays within 10% of its measurement. */
  y[3] *= 1.10;
  assert_int_equal(gs_cost_fit_totals(g, B, y, 4, &fa, &fb), GS_OK);
  for (int i = 0; i < 4; i++) {
    double rel = (fa * g[i] + fb * B[i] - y[i]) / y[i];
    assert_true(fabs(rel) < 0.10);
  }
  /* Totals that fall with the message count would need a < 0: a = 0 and b
   * is the weighted mean of y/B, here exactly 2e-8 on both. */
  double g2[2] = {1, 100}, B2[2] = {1e6, 1e6}, y2[2] = {0.021, 0.019};
  assert_int_equal(gs_cost_fit_totals(g2, B2, y2, 2, &fa, &fb), GS_OK);
  assert_true(fa == 0);
  double w0 = 1 / (y2[0] * y2[0]), w1 = 1 / (y2[1] * y2[1]);
  double want = (w0 * 1e6 * y2[0] + w1 * 1e6 * y2[1]) / (w0 * 1e12 + w1 * 1e12);
  assert_true(fabs(fb - want) <= 1e-12 * want);
  /* One observation: a and b are not separable; b alone. */
  assert_int_equal(gs_cost_fit_totals(g, B, y, 1, &fa, &fb), GS_OK);
  assert_true(fa == 0 && fabs(fb * B[0] - y[0]) <= 1e-12 * y[0]);
  /* Errors. */
  double bad[2] = {1, -1}, zero[2] = {0, 0};
  assert_int_equal(gs_cost_fit_totals(g, B, y, 0, &fa, &fb), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_fit_totals(NULL, B, y, 2, &fa, &fb), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_fit_totals(g, bad, y, 2, &fa, &fb), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "observation 1"));
  assert_int_equal(gs_cost_fit_totals(g, B, zero, 2, &fa, &fb), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_fit_totals(g, zero, y, 2, &fa, &fb), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "any bytes"));
  double nan_y[2] = {NAN, 1};
  assert_int_equal(gs_cost_fit_totals(g, B, nan_y, 2, &fa, &fb), GS_ERR_INVALID_ARG);
}

static void test_curve_fit(void **state) {
  (void)state;
  /* Three samples per class at 1 KiB, 16 KiB, 1 MiB; one wild outlier per
   * class that the median ignores. Times: a token-bucket-like curve. */
  double bytes[12], secs[12];
  const double sz[3] = {1024, 16384, 1048576}, t[3] = {1e-4, 2e-4, 9e-3};
  int n = 0;
  for (int k = 0; k < 3; k++) {
    bytes[n] = sz[k]; secs[n++] = t[k];
    bytes[n] = sz[k]; secs[n++] = t[k] * 0.9;
    bytes[n] = sz[k]; secs[n++] = t[k] * 1.1;
    bytes[n] = sz[k]; secs[n++] = t[k] * 50; /* outlier */
  }
  gs_cost_curve c;
  assert_int_equal(gs_cost_curve_fit(bytes, secs, (size_t)n, &c), GS_OK);
  assert_int_equal(c.npoints, 3);
  /* Median of four: the upper middle sample, 1.1 t. */
  for (int k = 0; k < 3; k++) {
    assert_true(c.bytes[k] == sz[k]);
    assert_true(fabs(c.secs[k] - 1.1 * t[k]) < 1e-15);
  }
  /* b: the slope over the larger half (here the two largest classes); a:
   * the smallest class's time less b times its size. */
  double b = (c.secs[2] - c.secs[1]) / (sz[2] - sz[1]);
  assert_true(fabs(c.b - b) <= 1e-9 * b);
  assert_true(fabs(c.a - fmax(0.0, c.secs[0] - c.b * sz[0])) < 1e-15);
  assert_true(c.b > 0 && c.a >= 0);
  /* Between points: linear; at a point: the point; beyond: slope b. */
  double mid = 0.5 * (sz[1] + sz[2]);
  assert_true(fabs(gs_cost_curve_eval(&c, mid) - 0.5 * (c.secs[1] + c.secs[2])) < 1e-15);
  assert_true(gs_cost_curve_eval(&c, sz[1]) == c.secs[1]);
  assert_true(fabs(gs_cost_curve_eval(&c, 2 * sz[2]) - (c.secs[2] + c.b * sz[2])) < 1e-15);
  assert_true(gs_cost_curve_eval(&c, 1) >= 0 && gs_cost_curve_eval(&c, 1) <= c.secs[0]);
  /* Non-decreasing everywhere. */
  double prev = -1;
  for (double m = 1; m < 1e8; m *= 1.3) {
    double v = gs_cost_curve_eval(&c, m);
    assert_true(v >= prev);
    prev = v;
  }
}

static void test_curve_isotonic(void **state) {
  (void)state;
  /* The 4 KiB class is slower than the 8 KiB one: pooled to their mean,
   * both keep their sizes. */
  double bytes[4] = {1024, 4096, 8192, 65536}, secs[4] = {1e-4, 5e-4, 3e-4, 1e-3};
  gs_cost_curve c;
  assert_int_equal(gs_cost_curve_fit(bytes, secs, 4, &c), GS_OK);
  assert_int_equal(c.npoints, 4);
  assert_true(c.bytes[1] == 4096 && c.bytes[2] == 8192);
  assert_true(fabs(c.secs[1] - 4e-4) < 1e-15 && fabs(c.secs[2] - 4e-4) < 1e-15);
  for (int i = 1; i < c.npoints; i++) assert_true(c.secs[i] >= c.secs[i - 1]);
}

static void test_curve_errors(void **state) {
  (void)state;
  gs_cost_curve c, keep;
  assert_int_equal(gs_cost_curve_affine(1e-3, 2e-9, &c), GS_OK);
  assert_int_equal(c.npoints, 0);
  assert_true(gs_cost_curve_eval(&c, 1e6) == 1e-3 + 2e-9 * 1e6);
  keep = c;
  /* One class only, bad samples ignored, slope not positive: refused and
   * *out unchanged. */
  double b1[3] = {1000, 1020, 0}, s1[3] = {1e-3, 1e-3, 1e-3};
  assert_int_equal(gs_cost_curve_fit(b1, s1, 3, &c), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "need 2"));
  double b2[2] = {1000, 1e6}, s2[2] = {1e-3, 1e-4};
  assert_int_equal(gs_cost_curve_fit(b2, s2, 2, &c), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "does not grow"));
  double b3[2] = {1000, 1e6}, s3[2] = {NAN, -1};
  assert_int_equal(gs_cost_curve_fit(b3, s3, 2, &c), GS_ERR_INVALID_ARG);
  assert_memory_equal(&c, &keep, sizeof c);
  assert_int_equal(gs_cost_curve_fit(NULL, NULL, 2, &c), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_curve_affine(-1, 0, &c), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_curve_affine(0, INFINITY, &c), GS_ERR_INVALID_ARG);
  /* More classes than points: the largest are kept. */
  double bb[50], ss[50];
  for (int i = 0; i < 50; i++) {
    bb[i] = ldexp(1.0, i);
    ss[i] = 1e-6 * (i + 1);
  }
  assert_int_equal(gs_cost_curve_fit(bb, ss, 50, &c), GS_OK);
  assert_int_equal(c.npoints, GS_COST_CURVE_POINTS);
  assert_true(c.bytes[GS_COST_CURVE_POINTS - 1] == ldexp(1.0, 49));
  assert_true(c.bytes[0] == ldexp(1.0, 50 - GS_COST_CURVE_POINTS));
}

/* ---- Hostile cost files ------------------------------------------------- */

static char cost_path[64];

/* Writes n bytes of text to cost_path and loads it for 4 ranks on 2 nodes. */
static gs_status load_cost_bytes(const char *text, size_t n, gs_cost_params *out) {
  snprintf(cost_path, sizeof cost_path, "/tmp/gs_test_costfile_%d.json", (int)getpid());
  FILE *f = fopen(cost_path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, n, f), n);
  fclose(f);
  gs_cost_topo t = {4, 2};
  gs_status st = gs_cost_load(cost_path, t, out);
  unlink(cost_path);
  return st;
}

static void expect_cost_error(const char *text, gs_status want, const char *needle) {
  gs_cost_params c;
  gs_status st = load_cost_bytes(text, strlen(text), &c);
  if (st != want || strstr(gs_last_error(), needle) == NULL ||
      strstr(gs_last_error(), cost_path) == NULL)
    fail_msg("%s: got %s \"%s\", want %s with \"%s\"", text, gs_strerror(st),
             gs_last_error(), gs_strerror(want), needle);
}

#define COST_HEAD "{\"ranks\": 4, \"nodes\": 2, \"alpha\": 1e-5, \"beta\": 1e-9, " \
                  "\"alpha_local\": 1e-6, \"beta_local\": 1e-10, \"gamma\": 1e-10"

/* The file is read whole (it was cut at 16 KiB), up to a cap with a clear
 * error above it; numbers out of range, unknown or repeated algorithms, too
 * many points and non-text are errors naming the file, never a crash,
 * undefined behaviour (a float-to-int overflow) or a silent truncation. */
static void test_cost_load_hostile(void **state) {
  (void)state;
  /* A valid file past 16 KiB (indentation and a long fit list) loads. */
  size_t big = 40 * 1024;
  char *text = malloc(big + 512);
  assert_non_null(text);
  int n = snprintf(text, big + 512, COST_HEAD ", \"fit\": {\"ring\": {\"alpha\": 1e-5, "
                   "\"beta\": 2e-9, \"points\": [[1024, 1e-5],");
  memset(text + n, ' ', big);
  n += (int)big;
  n += snprintf(text + n, 128, "[4096, 2e-5]]}}}");
  gs_cost_params c;
  if (load_cost_bytes(text, (size_t)n, &c) != GS_OK) fail_msg("%s", gs_last_error());
  assert_int_equal(c.fit[GS_ALGO_RING].npoints, 2);
  assert_true(c.fit[GS_ALGO_RING].bytes[1] == 4096);
  free(text);

  /* Above the cap (1 MiB): refused before parsing. */
  text = malloc((2 << 20) + 256);
  assert_non_null(text);
  n = snprintf(text, 256, COST_HEAD);
  memset(text + n, ' ', (2 << 20) - 16);
  memcpy(text + n + (2 << 20) - 16, "}", 1);
  assert_int_equal(load_cost_bytes(text, (size_t)n + (2 << 20) - 15, &c), GS_ERR_PARSE);
  assert_non_null(strstr(gs_last_error(), "more than"));
  free(text);

  /* A NUL byte inside. */
  static const char nul[] = COST_HEAD "}\0garbage";
  assert_int_equal(load_cost_bytes(nul, sizeof nul, &c), GS_ERR_PARSE);
  assert_non_null(strstr(gs_last_error(), "NUL"));

  expect_cost_error("{\"ranks\": 1e300, \"nodes\": 2}", GS_ERR_PARSE, "ranks");
  expect_cost_error("{\"ranks\": 4.5, \"nodes\": 2}", GS_ERR_PARSE, "ranks");
  expect_cost_error("{\"ranks\": 4, \"nodes\": -2}", GS_ERR_PARSE, "nodes");
  expect_cost_error("[1, 2]", GS_ERR_PARSE, "object");
  expect_cost_error(COST_HEAD "}", GS_OK, "");
  expect_cost_error("{\"ranks\": 4, \"nodes\": 2, \"alpha\": 1e999, \"beta\": 1}",
                    GS_ERR_PARSE, "alpha");
  expect_cost_error(COST_HEAD ", \"fit\": {\"hir\": {\"alpha\": 0, \"beta\": 1e-9}}}",
                    GS_ERR_PARSE, "fit.hir");
  expect_cost_error(COST_HEAD ", \"fit\": [{\"alpha\": 0, \"beta\": 1e-9}]}",
                    GS_ERR_PARSE, "fit");
  expect_cost_error(COST_HEAD ", \"fit\": {\"ring\": {\"alpha\": 0, \"beta\": 1e-9},"
                    " \"RING\": {\"alpha\": 0, \"beta\": 1e-9}}}", GS_ERR_PARSE, "twice");
  expect_cost_error(COST_HEAD ", \"fit\": {\"ring\": {\"alpha\": 0, \"beta\": 0}}}",
                    GS_ERR_PARSE, "positive");
  expect_cost_error(COST_HEAD ", \"fit\": {\"ring\": {\"alpha\": 0, \"beta\": 1e-9, "
                    "\"points\": [[1, 1], [2]]}}}", GS_ERR_PARSE, "points[1]");
  /* A size measured twice: which of its times is meant? */
  expect_cost_error(COST_HEAD ", \"fit\": {\"ring\": {\"alpha\": 0, \"beta\": 1e-9, "
                    "\"points\": [[4096, 1e-5], [4096, 2e-5]]}}}", GS_ERR_PARSE,
                    "points[1]: expected [bytes, seconds], non-negative, by strictly increasing");
  expect_cost_error(COST_HEAD ", \"fit\": {\"ring\": {\"alpha\": 0, \"beta\": 1e-9, "
                    "\"points\": [[1,1],[2,1],[3,1],[4,1],[5,1],[6,1],[7,1],[8,1],"
                    "[9,1],[10,1],[11,1],[12,1],[13,1]]}}}", GS_ERR_PARSE, "at most");
  /* A directory is not a cost file. */
  gs_cost_topo t = {4, 2};
  assert_int_equal(gs_cost_load("/tmp", t, &c), GS_ERR_IO);
  assert_non_null(strstr(gs_last_error(), "/tmp"));
}

/* One BSP round of parameter servers (gs_cost_ps), by hand: W = 4 workers
 * push M = 1000 bytes in chunks of 100 to S = 2 servers, a = 1 ms,
 * b = 1 us/B, g = 0: a server's share is 2000 bytes, so worker_s = 2 ms,
 * server_s = 3 ms and the round 2 a + 2000 b = 4 ms and the drain: each
 * shard of 500 bytes ends in a chunk of 100 that a server answers to 4
 * workers after the last push, 0.4 ms. With S = 8 > W the worker's link
 * sets the pace and its drain: a shard of 125 bytes is 2 chunks, 100 and
 * 25, and when the 25 arrive the answer of the 100 still holds the link,
 * so a whole chunk from each of 8 servers, 0.8 ms. Unchunked, the drain is
 * the whole answer: a push, then a pull. */
static void test_ps_round(void **state) {
  (void)state;
  gs_cost_params c;
  memset(&c, 0, sizeof c);
  c.alpha = 1e-3;
  c.beta = 1e-6;
  gs_cost_ps_out o;
  assert_int_equal(gs_cost_ps(&c, 4, 2, 1000, 100, &o), GS_OK);
  assert_true(fabs(o.worker_s - 2e-3) < 1e-15);
  assert_true(fabs(o.server_s - 3e-3) < 1e-15);
  assert_true(fabs(o.drain_s - 0.4e-3) < 1e-15);
  assert_true(fabs(o.round_s - 4.4e-3) < 1e-15);
  assert_int_equal(gs_cost_ps(&c, 4, 8, 1000, 100, &o), GS_OK);
  assert_true(fabs(o.drain_s - 8 * 100e-6) < 1e-15);
  assert_true(fabs(o.round_s - 3.8e-3) < 1e-15);
  assert_true(o.server_s < o.worker_s);
  /* unchunked, or chunks no smaller than a shard: push, then pull */
  assert_int_equal(gs_cost_ps(&c, 4, 2, 1000, 0, &o), GS_OK);
  assert_true(fabs(o.round_s - (2e-3 + 2 * 2000e-6)) < 1e-15);
  assert_int_equal(gs_cost_ps(&c, 4, 2, 1000, 500, &o), GS_OK);
  assert_true(fabs(o.round_s - 6e-3) < 1e-15);
  /* 2 chunks of a 500-byte shard, 300 and 200: the drain is the 300's
   * answer's time, not the 200's */
  assert_int_equal(gs_cost_ps(&c, 4, 2, 1000, 300, &o), GS_OK);
  assert_true(fabs(o.drain_s - 4 * 300e-6) < 1e-15);
  /* finer chunks drain sooner */
  gs_cost_ps_out coarse;
  assert_int_equal(gs_cost_ps(&c, 4, 2, 1000, 250, &coarse), GS_OK);
  assert_int_equal(gs_cost_ps(&c, 4, 2, 1000, 50, &o), GS_OK);
  assert_true(o.round_s < coarse.round_s);
  c.gamma = 1e-6; /* the servers' sums: W M / S g */
  assert_int_equal(gs_cost_ps(&c, 4, 4, 1000, 100, &o), GS_OK);
  assert_true(fabs(o.server_s - 3e-3) < 1e-15);
  assert_true(fabs(o.round_s - 4.4e-3) < 1e-15); /* a drain of 4 chunks of 100 */
  assert_int_equal(gs_cost_ps(&c, 0, 1, 1000, 0, &o), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_ps(&c, 1, 0, 1000, 0, &o), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_ps(&c, 1, 1, -1, 0, &o), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_ps(&c, 1, 1, NAN, 0, &o), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_ps(&c, 1, 1, 1000, -1, &o), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_ps(&c, 1, 1, 1000, NAN, &o), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "chunks"));
  assert_int_equal(gs_cost_ps(NULL, 1, 1, 1, 0, &o), GS_ERR_INVALID_ARG);
}

/* Parameter servers sharing nodes (gs_cost_ps_layout,
 * gs_cost_ps_nodes_round and _async), by hand. 3 workers and 1 server, 2
 * ranks a node in rank order: node A holds workers 0 and 1, node B worker
 * 2 and the server. M = 1000 bytes in chunks of 100, a = 1 ms, b = 1 us/B:
 * A's link carries its 2 workers' 2000 bytes each way, B's the server's
 * answers to A's workers, 2000, and worker 2's push stays in memory; the
 * round is 2 a + 2000 b and the drain, 2 last chunks of 100 on either
 * node's link: 4.2 ms, where one rank a node prices the server's link at
 * 3000 bytes and the drain at 3 chunks: 5.3 ms. Through a slow memory
 * (2 us/B) B's 2000 bytes between its own ranks set the pace: 6.2 ms.
 * Asynchronous, C = 1 ms: A's workers cycle C + 2 a + M b + K b = 4.1 ms,
 * B's C + 2 a = 3 ms, the links are busy 2 ms: 4.1 ms. */
static void test_ps_nodes(void **state) {
  (void)state;
  gs_cost_ps_nodes k[4];
  int n = -1;
  assert_int_equal(gs_cost_ps_layout(3, 1, 2, 0, k, &n), GS_OK);
  assert_int_equal(n, 2);
  assert_true(k[0].count == 1 && k[0].workers == 2 && k[0].servers == 0);
  assert_true(k[1].count == 1 && k[1].workers == 1 && k[1].servers == 1);
  gs_cost_params c;
  memset(&c, 0, sizeof c);
  c.alpha = 1e-3;
  c.beta = 1e-6;
  gs_cost_ps_out o, alone;
  assert_int_equal(gs_cost_ps_nodes_round(&c, k, n, 1000, 100, &o), GS_OK);
  assert_true(fabs(o.worker_s - 3e-3) < 1e-15);
  assert_true(fabs(o.server_s - 3e-3) < 1e-15);
  assert_true(fabs(o.drain_s - 0.2e-3) < 1e-15);
  assert_true(fabs(o.round_s - 4.2e-3) < 1e-15);
  assert_int_equal(gs_cost_ps(&c, 3, 1, 1000, 100, &alone), GS_OK);
  assert_true(fabs(alone.round_s - 5.3e-3) < 1e-15);
  double t = -1;
  assert_int_equal(gs_cost_ps_nodes_async(&c, k, n, 1000, 100, 1e-3, &t), GS_OK);
  assert_true(fabs(t - 4.1e-3) < 1e-15);
  c.beta_local = 2e-6;
  assert_int_equal(gs_cost_ps_nodes_round(&c, k, n, 1000, 100, &o), GS_OK);
  assert_true(fabs(o.round_s - 6.2e-3) < 1e-15);
  /* Rank order with a node of each kind: 3 workers and 4 servers, 2 a
   * node: 2 workers; a worker and a server; 2 servers; the last server. */
  assert_int_equal(gs_cost_ps_layout(3, 4, 2, 0, k, &n), GS_OK);
  assert_int_equal(n, 4);
  assert_true(k[2].count == 1 && k[2].workers == 0 && k[2].servers == 2);
  assert_true(k[3].count == 1 && k[3].workers == 0 && k[3].servers == 1);
  /* The planner's layout: 8 workers 4 a node, 3 servers on nodes of their
   * own; their link carries 4 M, 4 times one worker's. */
  assert_int_equal(gs_cost_ps_layout(8, 3, 4, 1, k, &n), GS_OK);
  assert_true(n == 2 && k[0].count == 2 && k[0].workers == 4 && k[1].count == 3 &&
              k[1].servers == 1);
  c.beta_local = 0;
  assert_int_equal(gs_cost_ps_nodes_round(&c, k, n, 1000, 0, &o), GS_OK);
  assert_true(fabs(o.worker_s - (1e-3 + 4000e-6)) < 1e-15);
  /* Refusals: nodes that do not divide the workers, no worker or server,
   * a kind below 0. */
  assert_int_equal(gs_cost_ps_layout(6, 1, 4, 1, k, &n), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "no whole number of nodes"));
  assert_int_equal(gs_cost_ps_layout(0, 1, 1, 0, k, &n), GS_ERR_INVALID_ARG);
  gs_cost_ps_nodes none[1] = {{2, 0, 1}}, neg[2] = {{1, 1, 0}, {-1, 0, 1}};
  assert_int_equal(gs_cost_ps_nodes_round(&c, none, 1, 1000, 0, &o), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_ps_nodes_round(&c, neg, 2, 1000, 0, &o), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_ps_nodes_round(&c, k, 0, 1000, 0, &o), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_ps_nodes_async(&c, none, 1, 1000, 0, 0, &t), GS_ERR_INVALID_ARG);
  /* Never slower than BSP, over layouts of 1 to 4 ranks a node. */
  c.gamma = 1e-7;
  c.beta_local = 1e-7;
  for (int w = 1; w <= 9; w += 2)
    for (int sv = 1; sv <= 4; sv++)
      for (int pn = 1; pn <= 4; pn++) {
        assert_int_equal(gs_cost_ps_layout(w, sv, pn, 0, k, &n), GS_OK);
        assert_int_equal(gs_cost_ps_nodes_round(&c, k, n, 1e5, 3000, &o), GS_OK);
        assert_int_equal(gs_cost_ps_nodes_async(&c, k, n, 1e5, 3000, 2e-3, &t), GS_OK);
        assert_true(t <= 2e-3 + o.round_s + 1e-15);
      }
}

/* Asynchronous steps (gs_cost_ps_async), by hand, on the round above
 * (W = 4, M = 1000 in chunks of 100, S = 2, a = 1 ms, b = 1 us/B): with
 * C = 1 ms a worker's cycle is C + 2 a + M b and the last chunks of its 2
 * shards answered after its push, 4.2 ms, and a server's 4 pushes of 500
 * bytes keep it busy 2 ms, so the steps take 4.2 ms where BSP takes
 * C + round = 5.4 ms; with C = 0 and one server the server is the
 * bottleneck, W M b = 4 ms against a cycle of 3.1 ms. One worker: BSP's
 * time. */
static void test_ps_async(void **state) {
  (void)state;
  gs_cost_params c;
  memset(&c, 0, sizeof c);
  c.alpha = 1e-3;
  c.beta = 1e-6;
  double t = -1;
  gs_cost_ps_out o;
  assert_int_equal(gs_cost_ps_async(&c, 4, 2, 1000, 100, 1e-3, &t), GS_OK);
  assert_true(fabs(t - 4.2e-3) < 1e-15);
  assert_int_equal(gs_cost_ps(&c, 4, 2, 1000, 100, &o), GS_OK);
  assert_true(t < 1e-3 + o.round_s);
  assert_int_equal(gs_cost_ps_async(&c, 4, 1, 1000, 100, 0, &t), GS_OK);
  assert_true(fabs(t - 4e-3) < 1e-15);
  c.gamma = 1e-7;
  for (double q = 0; q <= 1200; q += 300) {
    assert_int_equal(gs_cost_ps_async(&c, 1, 1, 1000, q, 2e-3, &t), GS_OK);
    assert_int_equal(gs_cost_ps(&c, 1, 1, 1000, q, &o), GS_OK);
    assert_true(fabs(t - (2e-3 + o.round_s)) < 1e-15);
  }
  /* Never slower than BSP, over a sweep of workers, servers, chunks and
   * compute. */
  const double chunks[] = {0, 1000, (double)GS_PS_CHUNK_BYTES};
  for (int w = 1; w <= 16; w *= 2)
    for (int s = 1; s <= 8; s *= 2)
      for (int q = 0; q < 3; q++)
        for (double comp = 0; comp < 0.02; comp += 0.004) {
          assert_int_equal(gs_cost_ps_async(&c, w, s, 1e5, chunks[q], comp, &t), GS_OK);
          assert_int_equal(gs_cost_ps(&c, w, s, 1e5, chunks[q], &o), GS_OK);
          assert_true(t <= comp + o.round_s + 1e-15);
        }
  assert_int_equal(gs_cost_ps_async(&c, 1, 1, 1000, 0, -1, &t), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_ps_async(&c, 1, 1, 1000, 0, NAN, &t), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_ps_async(&c, 0, 1, 1000, 0, 0, &t), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_ps_async(&c, 1, 1, 1000, -5, 0, &t), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_cost_ps_async(&c, 1, 1, 1000, 0, 0, NULL), GS_ERR_INVALID_ARG);
}

/* ---- Calibrated presets --------------------------------------------------
 * Known small cases of the per-cluster-size constants (gs_cost_params.calib)
 * and the cost of a collective once (alpha_msg). */

static gs_cost_params two_clusters(void) {
  gs_cost_params c;
  memset(&c, 0, sizeof c);
  c.gamma = 1e-10;
  c.ncalib = 2;
  c.calib[0].nodes = 4;
  c.calib[0].alpha_msg = 100e-6;
  c.calib[0].alpha[GS_ALGO_RING] = 10e-6;
  c.calib[0].beta[GS_ALGO_RING] = 8e-9;
  c.calib[0].alpha[GS_ALGO_RD] = 20e-6;
  c.calib[0].beta[GS_ALGO_RD] = 9e-9;
  c.calib[0].alpha[GS_ALGO_RABENSEIFNER] = 30e-6;
  c.calib[0].beta[GS_ALGO_RABENSEIFNER] = 10e-9;
  c.calib[1] = c.calib[0];
  c.calib[1].nodes = 8;
  c.calib[1].alpha_msg = 300e-6;
  c.calib[1].alpha[GS_ALGO_RING] = 50e-6;
  c.calib[1].beta[GS_ALGO_RING] = 12e-9;
  return c;
}

static void test_calib_known_cases(void **state) {
  (void)state;
  gs_cost_params c = two_clusters();
  double n = 1e6;
  /* 4 nodes, ring: 2(p-1) a + 2(p-1)/p n b + (p-1)/p n g. */
  gs_cost_topo t4 = {4, 4};
  assert_close(gs_cost_allreduce(&c, t4, GS_ALGO_RING, n),
               6 * 10e-6 + 1.5 * n * 8e-9 + 0.75 * n * 1e-10, 1e-15);
  /* Recursive doubling with its own constants: lg p (a + n b + n g). */
  assert_close(gs_cost_allreduce(&c, t4, GS_ALGO_RD, n),
               2 * (20e-6 + n * 9e-9 + n * 1e-10), 1e-15);
  /* 8 nodes: the second row. */
  gs_cost_topo t8 = {8, 8};
  assert_close(gs_cost_allreduce(&c, t8, GS_ALGO_RING, n),
               14 * 50e-6 + 1.75 * n * 12e-9 + 0.875 * n * 1e-10, 1e-15);
  /* 6 nodes: halfway, every constant interpolated. */
  gs_cost_topo t6 = {6, 6};
  assert_close(gs_cost_allreduce(&c, t6, GS_ALGO_RING, n),
               10 * 30e-6 + 10.0 / 6 * n * 10e-9 + 5.0 / 6 * n * 1e-10, 1e-15);
  /* Outside the calibrated sizes: the nearest one's constants. */
  gs_cost_topo t2 = {2, 2}, t16 = {16, 16};
  assert_close(gs_cost_allreduce(&c, t2, GS_ALGO_RING, n),
               2 * 10e-6 + 1.0 * n * 8e-9 + 0.5 * n * 1e-10, 1e-15);
  assert_close(gs_cost_allreduce(&c, t16, GS_ALGO_RING, n),
               30 * 50e-6 + 30.0 / 16 * n * 12e-9 + 15.0 / 16 * n * 1e-10, 1e-15);
  /* The engine's cost per message, by cluster size the same way. */
  assert_close(gs_cost_message(&c, t4), 100e-6, 1e-15);
  assert_close(gs_cost_message(&c, t6), 200e-6, 1e-15);
  assert_close(gs_cost_message(&c, t8), 300e-6, 1e-15);
  assert_close(gs_cost_message(&c, t2), 100e-6, 1e-15);
  assert_close(gs_cost_message(&c, t16), 300e-6, 1e-15);
  /* Reduce-scatter and all-gather: the ring's constants. */
  assert_close(gs_cost_reduce_scatter(&c, t4, GS_ALGO_RING, n),
               3 * 10e-6 + 0.75 * n * (8e-9 + 1e-10), 1e-15);
  assert_close(gs_cost_allgather(&c, t4, GS_ALGO_RING, n),
               3 * 10e-6 + 0.75 * n * 8e-9, 1e-15);
  /* auto is the fastest algorithm. */
  double best;
  gs_cost_best_allreduce(&c, t4, 256, &best);
  assert_close(gs_cost_allreduce(&c, t4, GS_ALGO_AUTO, 256), best, 1e-15);
  assert_close(best, 2 * (20e-6 + 256 * 9e-9 + 256 * 1e-10), 1e-15);
  /* One rank: nothing to send, nothing paid. */
  gs_cost_topo t1 = {1, 1};
  assert_true(gs_cost_allreduce(&c, t1, GS_ALGO_RING, n) == 0.0);
  assert_true(gs_cost_message(&c, t1) == 0.0);
  /* Without calibrated rows, the shared alpha_msg. */
  gs_cost_params plain = {.alpha = 1e-6, .beta = 1e-9, .alpha_msg = 5e-5};
  assert_close(gs_cost_message(&plain, t4), 5e-5, 1e-15);
  /* A measured fit of an algorithm wins over the preset's row. */
  c.fit[GS_ALGO_RING].alpha = 1e-6;
  c.fit[GS_ALGO_RING].beta = 1e-9;
  assert_close(gs_cost_allreduce(&c, t4, GS_ALGO_RING, n),
               6 * 1e-6 + 1.5 * n * 1e-9 + 0.75 * n * 1e-10, 1e-15);
}

/* Fitting an algorithm's alpha and beta to times a calibrated preset
 * predicts recovers that algorithm's row: the fit ignores the preset's
 * rows. */
static void test_calib_fit_recovers(void **state) {
  (void)state;
  gs_cost_params c = two_clusters();
  gs_cost_topo t4 = {4, 4};
  double x[6] = {4096, 65536, 1 << 20, 1 << 22, 1 << 24, 1 << 26}, y[6];
  for (int i = 0; i < 6; i++) y[i] = gs_cost_allreduce(&c, t4, GS_ALGO_RING, x[i]);
  gs_cost_params f = c;
  f.ncalib = 0;
  assert_int_equal(gs_cost_fit_algo(&f, t4, GS_ALGO_RING, x, y, 6), GS_OK);
  assert_close(f.fit[GS_ALGO_RING].beta, 8e-9, 1e-15);
  assert_close(f.fit[GS_ALGO_RING].alpha, 10e-6, 1e-12);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_presets),
      cmocka_unit_test(test_net_names),
      cmocka_unit_test(test_bandwidth_term),
      cmocka_unit_test(test_hier_shares_node_link),
      cmocka_unit_test(test_exchanges_share_node_link),
      cmocka_unit_test(test_one_node_prices_node_links),
      cmocka_unit_test(test_p1_costs_zero),
      cmocka_unit_test(test_costs_monotone),
      cmocka_unit_test(test_regimes_1gbe),
      cmocka_unit_test(test_best_is_argmin),
      cmocka_unit_test(test_unsupported_negative),
      cmocka_unit_test(test_unsupported_negative_p1),
      cmocka_unit_test(test_allreduce_linear),
      cmocka_unit_test(test_fit_linear),
      cmocka_unit_test(test_calibrate_recovers_params),
      cmocka_unit_test(test_calibrate_hier),
      cmocka_unit_test(test_calibrate_invalid),
      cmocka_unit_test(test_fit_points_interpolate_and_persist),
      cmocka_unit_test(test_best_prefers_ring),
      cmocka_unit_test(test_curve_fit),
      cmocka_unit_test(test_fit_totals),
      cmocka_unit_test(test_curve_isotonic),
      cmocka_unit_test(test_curve_errors),
      cmocka_unit_test(test_cost_load_hostile),
      cmocka_unit_test(test_ps_round),
      cmocka_unit_test(test_ps_nodes),
      cmocka_unit_test(test_ps_async),
      cmocka_unit_test(test_calib_known_cases),
      cmocka_unit_test(test_calib_fit_recovers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
