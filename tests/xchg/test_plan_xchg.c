/*
 * Compression inside the cost model and the plan: the compressed exchanges'
 * costs against the collectives they are built from, the envelope planner
 * against an exhaustive search over groupings and per-group choices, and
 * auto keeping dense on a fast network while compressing on a slow one;
 * the policy rule of compression specs (dear takes no spec on every group).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gradsync.h"

#define MAXL 10

#define TEST_PROFILE_MAXL MAXL
#include "../common/test_profile.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static int close_to(double a, double b) {
  return fabs(a - b) <= 1e-9 * fmax(1.0, fmax(fabs(a), fabs(b)));
}

/* ---- Cost terms ------------------------------------------------------------- */

static void test_cost_terms(void **state) {
  (void)state;
  gs_cost_params c;
  assert_int_equal(gs_cost_preset("1GbE", &c), GS_OK);
  gs_cost_topo t = {4, 4};
  const double M = 8e6;
  gs_cost_compress z = {.ratio = 0.02, .fixed = 64, .encode_s_per_byte = 1e-9,
                        .decode_s_per_byte = 2e-9, .decode_s_per_byte_dense = 5e-10};
  double payload = 0.02 * M + 64;
  /* All-gather: the output is every rank's payload; decoding reads it all. */
  double want = 1e-9 * M + gs_cost_allgather(&c, t, GS_ALGO_AUTO, 4 * 16) +
                gs_cost_allgather(&c, t, GS_ALGO_AUTO, 4 * payload) +
                2e-9 * 4 * payload + 5e-10 * M;
  assert_true(close_to(gs_cost_compressed(&c, t, GS_XCHG_ALLGATHER, &z, M), want));
  /* All-reduce of a summable payload. */
  double ar;
  gs_cost_best_allreduce(&c, t, payload, &ar);
  want = 1e-9 * M + ar + 2e-9 * payload + 5e-10 * M;
  assert_true(close_to(gs_cost_compressed(&c, t, GS_XCHG_ALLREDUCE, &z, M), want));
  /* PowerSGD: two all-reduces of half the payload each. */
  gs_cost_best_allreduce(&c, t, payload / 2, &ar);
  want = 1e-9 * M + 2 * ar + 2e-9 * payload + 5e-10 * M;
  assert_true(close_to(gs_cost_compressed(&c, t, GS_XCHG_POWERSGD, &z, M), want));
  /* gTop-k: the payload as 8-byte pairs, the sparse collectives' formula. */
  want = 1e-9 * M + gs_cost_gtopk(&c, t, payload / 8, 8) + 2e-9 * payload + 5e-10 * M;
  assert_true(close_to(gs_cost_compressed(&c, t, GS_XCHG_GTOPK, &z, M), want));
  /* Affine in M: the planner reads it as a + b*M. */
  double t0 = gs_cost_compressed(&c, t, GS_XCHG_ALLGATHER, &z, 0);
  double t1 = gs_cost_compressed(&c, t, GS_XCHG_ALLGATHER, &z, 1e6);
  assert_true(close_to(gs_cost_compressed(&c, t, GS_XCHG_ALLGATHER, &z, 3e6),
                       t0 + 3 * (t1 - t0)));
  /* One rank: coding only. */
  gs_cost_topo one = {1, 1};
  assert_true(close_to(gs_cost_compressed(&c, one, GS_XCHG_ALLGATHER, &z, M),
                       1e-9 * M + 2e-9 * payload + 5e-10 * M));
  /* Top-k at 1% on a 1 Gbit/s network: fewer bytes win. */
  double dense;
  gs_cost_best_allreduce(&c, t, M, &dense);
  assert_true(gs_cost_compressed(&c, t, GS_XCHG_ALLGATHER, &z, M) < dense);
  /* What the model cannot predict, or cannot take. */
  assert_true(gs_cost_compressed(&c, t, GS_XCHG_COUNT, &z, M) < 0);
  gs_cost_compress bad = z;
  bad.ratio = 0;
  assert_true(gs_cost_compressed(&c, t, GS_XCHG_ALLGATHER, &bad, M) < 0);
  assert_int_equal(gs_cost_compress_check(&bad), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "ratio"));
  bad = z;
  bad.encode_s_per_byte = NAN;
  assert_int_equal(gs_cost_compress_check(&bad), GS_ERR_INVALID_ARG);
  assert_true(gs_cost_compressed(&c, t, GS_XCHG_ALLGATHER, &z, -1) < 0);
  assert_string_equal(gs_xchg_name(GS_XCHG_GTOPK), "gtopk");
  assert_string_equal(gs_xchg_name(GS_XCHG_COUNT), "unknown");
}

/* ---- The envelope planner against exhaustive search ------------------------------ */

/* The minimum over every contiguous grouping and every per-group choice
 * (dense or one of x's alternatives): for a fixed grouping the model's end
 * time only grows with each message's time, so the best choice per group is
 * its fastest alternative; this enumerates both anyway. */
static double exhaustive_min(const gs_profile *p, const gs_plan_cost *c,
                             const gs_plan_xchg *x) {
  size_t L = p->ntensors;
  size_t tensors[MAXL], offsets[MAXL + 1];
  int choice[MAXL];
  int nalt = x->n + (x->required ? 0 : 1);
  double best = INFINITY;
  for (unsigned long mask = 0; mask < (1ul << (L - 1)); mask++) {
    size_t G = 0, n = 0, hi = L;
    for (size_t i = L; i-- > 0;) {
      if (i == 0 || (mask >> (i - 1) & 1)) {
        offsets[G++] = n;
        for (size_t k = i; k < hi; k++) tensors[n++] = k;
        hi = i;
      }
    }
    offsets[G] = n;
    unsigned long combos = 1;
    for (size_t g = 0; g < G; g++) combos *= (unsigned long)nalt;
    for (unsigned long cmb = 0; cmb < combos; cmb++) {
      unsigned long r = cmb;
      for (size_t g = 0; g < G; g++) {
        int a = (int)(r % (unsigned long)nalt) - (x->required ? 0 : 1);
        r /= (unsigned long)nalt;
        choice[g] = a < 0 ? -1 : (int)x->kind[a];
      }
      double t;
      assert_int_equal(gs_plan_predict_xchg(p, c, x, tensors, offsets, G, choice, &t),
                       GS_OK);
      if (t < best) best = t;
    }
  }
  return best;
}

static void random_case(test_profile *tp, gs_plan_cost *c, gs_plan_xchg *x) {
  size_t L = 1 + (size_t)(urand() * 7);
  double bwd[MAXL];
  size_t numel[MAXL];
  for (size_t i = 0; i < L; i++) {
    bwd[i] = urand() * 1e-2;
    numel[i] = 1 + (size_t)(urand() * (urand() < 0.5 ? 1e3 : 4e6));
  }
  tp_init(tp, urand() * 0.05, L, bwd, numel);
  assert_int_equal(gs_plan_cost_from_ab(urand() * 2e-3, urand() * 8e-9, c), GS_OK);
  memset(x, 0, sizeof *x);
  x->n = 1 + (int)(urand() * 2);
  x->required = urand() < 0.3;
  for (int j = 0; j < x->n; j++) {
    x->kind[j] = j == 0 ? GS_XCHG_ALLGATHER : GS_XCHG_ALLREDUCE;
    assert_int_equal(gs_cost_curve_affine(urand() * 4e-3, urand() * 4e-9,
                                          &x->cost[j]), GS_OK);
  }
}

static void test_optimal_matches_exhaustive(void **state) {
  (void)state;
  test_profile tp;
  gs_plan_cost c;
  gs_plan_xchg x;
  gs_plan_policy opt;
  assert_int_equal(gs_plan_policy_parse("optimal", &opt), GS_OK);
  for (int rep = 0; rep < 150; rep++) {
    random_case(&tp, &c, &x);
    gs_plan *pl = NULL;
    assert_int_equal(gs_plan_make_xchg(&tp.p, &c, &x, &opt, 1, &pl), GS_OK);
    assert_int_equal(gs_plan_check(pl, tp.p.ntensors), GS_OK);
    assert_non_null(pl->group_xchg);
    double want = exhaustive_min(&tp.p, &c, &x);
    if (!close_to(pl->predicted_iter_s, want))
      fail_msg("rep %d: optimal with compression %.12g, exhaustive %.12g", rep,
               pl->predicted_iter_s, want);
    /* The plan's own prediction is the model's for its choices. */
    double t;
    assert_int_equal(gs_plan_predict_xchg(&tp.p, &c, &x, pl->tensors, pl->offsets,
                                          pl->ngroups, pl->group_xchg, &t), GS_OK);
    assert_true(t == pl->predicted_iter_s);
    for (size_t g = 0; g < pl->ngroups; g++)
      if (x.required) assert_true(pl->group_xchg[g] >= 0);
    gs_plan_free(pl);
  }
}

/* ---- auto: dense on a fast network, compressed on a slow one -------------------- */

/* A CNN-like profile: small early tensors, a large fully connected layer. */
static void cnn_profile(test_profile *tp) {
  const size_t numel[6] = {800, 32, 51200, 64, 3211264, 10250};
  const double bwd[6] = {2e-3, 1e-5, 4e-3, 1e-5, 6e-3, 2e-4};
  tp_init(tp, 0.01, 6, bwd, numel);
}

/* Top-k at 1% through an all-gather on 4 ranks: each rank sends 2% of the
 * bytes (value + index), 4 payloads arrive; coding at 1 ns per byte. */
static void topk_alternative(double a_dense, double b_dense, gs_plan_xchg *x) {
  memset(x, 0, sizeof *x);
  x->n = 1;
  x->kind[0] = GS_XCHG_ALLGATHER;
  /* The all-gather of 4 payloads costs about the all-reduce of 4 x 2% of
   * the bytes at half the all-reduce's per-byte time, plus coding. */
  assert_int_equal(gs_cost_curve_affine(a_dense, b_dense / 2 * 4 * 0.02 + 1e-9,
                                        &x->cost[0]), GS_OK);
}

static void test_auto_dense_fast_compressed_slow(void **state) {
  (void)state;
  test_profile tp;
  cnn_profile(&tp);
  gs_plan_policy au;
  assert_int_equal(gs_plan_policy_parse("auto", &au), GS_OK);
  struct {
    double a, b;
    int want_compressed;
  } nets[] = {
      {50e-6, 1.0 / 40e9, 0},  /* fast: 40 GB/s, coding dominates */
      {1e-3, 1.0 / 6e6, 1},    /* slow: 100 Mbit/s-like, 6 MB/s bus */
  };
  for (size_t i = 0; i < 2; i++) {
    gs_plan_cost c;
    assert_int_equal(gs_plan_cost_from_ab(nets[i].a, nets[i].b, &c), GS_OK);
    gs_plan_xchg x;
    topk_alternative(nets[i].a, nets[i].b, &x);
    gs_plan *pl = NULL, *dense = NULL;
    assert_int_equal(gs_plan_make_xchg(&tp.p, &c, &x, &au, 1, &pl), GS_OK);
    assert_int_equal(gs_plan_make_policy(&tp.p, &c, &au, &dense), GS_OK);
    int any = 0;
    for (size_t g = 0; g < pl->ngroups; g++)
      if (pl->group_xchg && pl->group_xchg[g] >= 0) any = 1;
    if (any != nets[i].want_compressed)
      fail_msg("network %zu (b=%g s/B): compressed groups %d, expected %d", i,
               nets[i].b, any, nets[i].want_compressed);
    /* With compression allowed the plan is never predicted slower than
     * dense: dense is among its choices. */
    assert_true(pl->predicted_iter_s <= dense->predicted_iter_s * (1 + 1e-12));
    if (!nets[i].want_compressed)
      assert_true(close_to(pl->predicted_iter_s, dense->predicted_iter_s));
    else
      assert_true(pl->predicted_iter_s < 0.7 * dense->predicted_iter_s);
    gs_plan_free(pl);
    gs_plan_free(dense);
  }
}

/* ---- Refusals --------------------------------------------------------------------- */

static void test_required_and_errors(void **state) {
  (void)state;
  test_profile tp;
  cnn_profile(&tp);
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(50e-6, 1.0 / 40e9, &c), GS_OK);
  gs_plan_xchg x;
  topk_alternative(50e-6, 1.0 / 40e9, &x);
  x.required = 1;
  gs_plan_policy pol;
  /* Required: compressed even where dense is faster; auto leaves dear out. */
  assert_int_equal(gs_plan_policy_parse("auto", &pol), GS_OK);
  gs_plan *pl = NULL;
  assert_int_equal(gs_plan_make_xchg(&tp.p, &c, &x, &pol, 1, &pl), GS_OK);
  assert_int_not_equal(pl->chosen, GS_PLAN_DEAR);
  for (size_t g = 0; g < pl->ngroups; g++)
    assert_int_equal(pl->group_xchg[g], GS_XCHG_ALLGATHER);
  gs_plan_free(pl);
  assert_int_equal(gs_plan_policy_parse("dear", &pol), GS_OK);
  assert_int_equal(gs_plan_make_xchg(&tp.p, &c, &x, &pol, 1, &pl), GS_ERR_UNSUPPORTED);
  assert_null(pl);
  assert_non_null(strstr(gs_last_error(), "dear"));
  /* Not required: dear stays dense. */
  x.required = 0;
  assert_int_equal(gs_plan_make_xchg(&tp.p, &c, &x, &pol, 1, &pl), GS_OK);
  assert_null(pl->group_xchg);
  gs_plan_free(pl);
  /* No alternatives: exactly gs_plan_make_policy's plan. */
  gs_plan_xchg none = {0};
  gs_plan *a = NULL, *b = NULL;
  assert_int_equal(gs_plan_policy_parse("mgwfbp", &pol), GS_OK);
  assert_int_equal(gs_plan_make_xchg(&tp.p, &c, &none, &pol, 1, &a), GS_OK);
  assert_int_equal(gs_plan_make_policy(&tp.p, &c, &pol, &b), GS_OK);
  assert_int_equal(a->ngroups, b->ngroups);
  assert_true(a->predicted_iter_s == b->predicted_iter_s);
  assert_null(a->group_xchg);
  gs_plan_free(a);
  gs_plan_free(b);
  /* Bad alternatives. */
  x.n = GS_PLAN_MAX_XCHG + 1;
  assert_int_equal(gs_plan_make_xchg(&tp.p, &c, &x, &pol, 1, &pl), GS_ERR_INVALID_ARG);
  x.n = 2;
  x.kind[1] = x.kind[0];
  x.cost[1] = x.cost[0];
  assert_int_equal(gs_plan_make_xchg(&tp.p, &c, &x, &pol, 1, &pl), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "twice"));
  x.n = 1;
  x.cost[0].b = -1;
  assert_int_equal(gs_plan_make_xchg(&tp.p, &c, &x, &pol, 1, &pl), GS_ERR_INVALID_ARG);
  /* A choice the costs do not have. */
  topk_alternative(50e-6, 1.0 / 40e9, &x);
  size_t tensors[6] = {0, 1, 2, 3, 4, 5}, offsets[2] = {0, 6};
  int choice[1] = {GS_XCHG_POWERSGD};
  double t;
  assert_int_equal(gs_plan_predict_xchg(&tp.p, &c, &x, tensors, offsets, 1, choice, &t),
                   GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "powersgd"));
}

/* The policy rule of compression specs (gs_plan_policy_check_compress):
 * a spec on every group cannot go with dear; auto:SPEC, none and the other
 * policies can. */
static void test_policy_check_compress(void **state) {
  (void)state;
  const char *policies[] = {"wfbp", "single", "bucket", "mgwfbp", "optimal", "dear", "auto"};
  const char *specs[] = {"topk:0.01", "auto:topk:0.01", "none", "dgc:0.001"};
  for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
    gs_plan_policy pol;
    assert_int_equal(gs_plan_policy_parse(policies[i], &pol), GS_OK);
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
      gs_compress_spec z;
      assert_int_equal(gs_compress_spec_parse(specs[k], &z), GS_OK);
      const int conflict = pol.kind == GS_PLAN_DEAR && !z.off && !z.automatic;
      gs_status st = gs_plan_policy_check_compress(&pol, &z);
      assert_int_equal(st, conflict ? GS_ERR_INVALID_ARG : GS_OK);
      if (conflict) {
        char use[128];
        snprintf(use, sizeof use, "(use auto:%s)", z.normalised);
        if (strstr(gs_last_error(), use) == NULL || strstr(gs_last_error(), "dear") == NULL)
          fail_msg("%s with %s: %s", specs[k], policies[i], gs_last_error());
      }
    }
  }
  gs_plan_policy pol = {.kind = GS_PLAN_DEAR};
  assert_int_equal(gs_plan_policy_check_compress(&pol, NULL), GS_ERR_INVALID_ARG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_policy_check_compress),
      cmocka_unit_test(test_cost_terms),
      cmocka_unit_test(test_optimal_matches_exhaustive),
      cmocka_unit_test(test_auto_dense_fast_compressed_slow),
      cmocka_unit_test(test_required_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
