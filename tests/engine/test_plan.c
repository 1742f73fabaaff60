/*
 * Tests of the merge planner: the optimal policy against exhaustive search,
 * MG-WFBP against a literal implementation of the paper's Algorithm 1 and
 * hand-worked cases, DDP's buckets, plan shape, DeAR's model and costs.
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
/* The planner's internals: the windowed and the scanning dynamic programs. */
#include "../../src/engine/plan_internal.h"

#define MAXL 64

#define TEST_PROFILE_MAXL MAXL
#include "../common/test_profile.h"

static uint64_t rng_state = 88172645463325252ull;
static double urand(void) { /* xorshift64, uniform in [0, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* A random instance; `integral` makes times and costs small integers, which
 * produces ties. */
static void random_instance(test_profile *tp, size_t L, int integral,
                            gs_plan_cost *cost) {
  double bwd[MAXL];
  size_t numel[MAXL];
  for (size_t i = 0; i < L; i++) {
    if (integral) {
      bwd[i] = (double)(int)(urand() * 6);
      numel[i] = 1 + (size_t)(urand() * 10);
    } else {
      bwd[i] = urand() * 1e-2 * (urand() < 0.2 ? 0.01 : 1.0);
      numel[i] = 1 + (size_t)(urand() * (urand() < 0.5 ? 1e3 : 4e6));
    }
  }
  double fwd = integral ? (double)(int)(urand() * 4) : urand() * 0.05;
  tp_init_as(tp, fwd, L, bwd, numel, integral ? GS_U8 : GS_F32);
  if (integral) {
    assert_int_equal(gs_plan_cost_from_ab((double)(int)(urand() * 5),
                                          (double)(int)(urand() * 3), cost), GS_OK);
  } else {
    double a = urand() < 0.5 ? urand() * 1e-3 : urand() * 2e-2;
    double b = urand() * 4e-9;
    assert_int_equal(gs_plan_cost_from_ab(a, b, cost), GS_OK);
  }
}

static double plan_time(const gs_profile *p, const gs_plan_cost *c,
                        const char *spec, gs_plan **keep) {
  gs_plan *pl = NULL;
  assert_int_equal(gs_plan_make(p, c, spec, &pl), GS_OK);
  assert_non_null(pl);
  assert_int_equal(gs_plan_check(pl, p->ntensors), GS_OK);
  double t = pl->predicted_iter_s;
  if (keep)
    *keep = pl;
  else
    gs_plan_free(pl);
  return t;
}

/* Every contiguous plan: bit k of mask set = a group boundary between
 * tensors k+1 and k (launch order runs from L-1 down). */
static double exhaustive_min(const gs_profile *p, const gs_plan_cost *c) {
  size_t L = p->ntensors;
  size_t tensors[MAXL], offsets[MAXL + 1];
  double best = INFINITY;
  for (unsigned long mask = 0; mask < (1ul << (L - 1)); mask++) {
    size_t G = 0, n = 0, hi = L;
    for (size_t i = L; i-- > 0;) {
      int boundary = (i == 0) || (mask >> (i - 1) & 1);
      if (boundary) { /* group i .. hi-1 */
        offsets[G++] = n;
        for (size_t k = i; k < hi; k++) tensors[n++] = k;
        hi = i;
      }
    }
    offsets[G] = n;
    double t;
    assert_int_equal(gs_plan_predict(p, c, tensors, offsets, G, &t), GS_OK);
    if (t < best) best = t;
  }
  return best;
}

static void test_optimal_equals_exhaustive(void **state) {
  (void)state;
  test_profile tp;
  gs_plan_cost c;
  int checked = 0;
  for (int rep = 0; rep < 600; rep++) {
    size_t L = 1 + (size_t)(urand() * 12);
    random_instance(&tp, L, rep % 2, &c);
    double best = exhaustive_min(&tp.p, &c);
    double opt = plan_time(&tp.p, &c, "optimal", NULL);
    /* Same expression, same order of operations: the times agree to
     * rounding of the comparison only. */
    assert_true(fabs(opt - best) <= 1e-12 * fmax(1.0, fabs(best)));
    checked++;
  }
  assert_int_equal(checked, 600);
}

/* The paper's Algorithm 1 written out literally, layers 1..L: after each
 * merge every tau_c is recomputed from Eq. 7. */
static void algorithm1_reference(const gs_profile *p, const gs_plan_cost *c,
                                 int *merged /* [L+1], layer l merged into l-1 */) {
  size_t L = p->ntensors;
  double tb[MAXL + 2], taub[MAXL + 2], tc[MAXL + 2], taue[MAXL + 2], pp[MAXL + 2];
  for (size_t l = 1; l <= L; l++) {
    tb[l] = p->tensors[l - 1].backward_s;
    pp[l] = (double)(p->tensors[l - 1].numel * gs_dtype_size(p->tensors[l - 1].dtype));
    tc[l] = c->ar.a + c->ar.b * pp[l];
    merged[l] = 0;
  }
  taub[L] = p->forward_s;
  for (size_t l = L - 1; l >= 1; l--) taub[l] = taub[l + 1] + tb[l + 1];
#define RECOMPUTE_TAUC()                                                  \
  do {                                                                    \
    taue[L] = taub[L] + tb[L];                                            \
    for (size_t k = L - 1; k >= 1; k--)                                   \
      taue[k] = fmax(taue[k + 1] + tc[k + 1], taub[k] + tb[k]);           \
  } while (0)
  RECOMPUTE_TAUC();
  for (size_t l = L; l >= 2; l--) {
    if (taub[l - 1] + tb[l - 1] < taue[l] + c->ar.a) {
      merged[l] = 1;
      tc[l] = 0;
      pp[l - 1] += pp[l];
      tc[l - 1] = c->ar.a + c->ar.b * pp[l - 1];
      RECOMPUTE_TAUC();
    }
  }
#undef RECOMPUTE_TAUC
}

static void assert_mgwfbp_matches_reference(const gs_profile *p,
                                            const gs_plan_cost *c) {
  int merged[MAXL + 2];
  algorithm1_reference(p, c, merged);
  gs_plan *pl = NULL;
  plan_time(p, c, "mgwfbp", &pl);
  /* Group boundaries of the plan: tensor i starts a group iff i == 0 or
   * layer i+1 was not merged into layer i. */
  int starts[MAXL] = {0};
  for (size_t g = 0; g < pl->ngroups; g++) starts[pl->tensors[pl->offsets[g]]] = 1;
  for (size_t i = 1; i < p->ntensors; i++)
    assert_int_equal(starts[i], !merged[i + 1]);
  assert_int_equal(starts[0], 1);
  gs_plan_free(pl);
}

static void test_mgwfbp_three_layer_case(void **state) {
  (void)state;
  /* The case: t_f = 0, t_b = 5, 1, 2, sizes 1, 2, 8 bytes, a = 2,
   * b = 1. Algorithm 1 merges layers 3 and 2 and ends at 18; layer 3 alone
   * and 2 with 1 ends at 17, which optimal finds. */
  const double bwd[] = {5, 1, 2};
  const size_t numel[] = {1, 2, 8};
  test_profile tp;
  tp_init_as(&tp, 0, 3, bwd, numel, GS_U8);
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(2, 1, &c), GS_OK);
  gs_plan *mg = NULL, *opt = NULL;
  assert_true(plan_time(&tp.p, &c, "mgwfbp", &mg) == 18.0);
  assert_true(plan_time(&tp.p, &c, "optimal", &opt) == 17.0);
  assert_int_equal(mg->ngroups, 2); /* [1 2] then [0] */
  assert_int_equal(mg->tensors[0], 1);
  assert_int_equal(mg->tensors[1], 2);
  assert_int_equal(mg->tensors[2], 0);
  assert_int_equal(opt->ngroups, 2); /* [2] then [0 1] */
  assert_int_equal(opt->tensors[0], 2);
  assert_int_equal(opt->tensors[1], 0);
  assert_int_equal(opt->tensors[2], 1);
  assert_mgwfbp_matches_reference(&tp.p, &c);
  gs_plan_free(mg);
  gs_plan_free(opt);
}

static void test_mgwfbp_hand_cases(void **state) {
  (void)state;
  gs_plan_cost c;
  test_profile tp;
  gs_plan *pl = NULL;
  /* Communication fully hidden: a = 1, b = 0; each layer's message (1)
   * ends before the next gradient (3 later) is ready, and 3 >= 1 + a: no
   * merge, the plan is WFBP, ending at 1 + 4*3 ... = ready(0) + 1. */
  {
    const double bwd[] = {3, 3, 3, 3};
    const size_t numel[] = {4, 4, 4, 4};
    tp_init_as(&tp, 1, 4, bwd, numel, GS_F32);
    assert_int_equal(gs_plan_cost_from_ab(1, 0, &c), GS_OK);
    assert_true(plan_time(&tp.p, &c, "mgwfbp", &pl) == 14.0);
    assert_int_equal(pl->ngroups, 4);
    gs_plan_free(pl);
    assert_mgwfbp_matches_reference(&tp.p, &c);
  }
  /* Start-up cost dominates: every next gradient is ready within a of the
   * previous message's start, so everything merges into one message:
   * ready(0) = 4, end = 4 + 10 + 4*4 bytes... = 4 + 10 + 16*0.5 = 22. */
  {
    const double bwd[] = {1, 1, 1, 1};
    const size_t numel[] = {1, 1, 1, 1};
    tp_init_as(&tp, 0, 4, bwd, numel, GS_F32);
    assert_int_equal(gs_plan_cost_from_ab(10, 0.5, &c), GS_OK);
    assert_true(plan_time(&tp.p, &c, "mgwfbp", &pl) == 22.0);
    assert_int_equal(pl->ngroups, 1);
    gs_plan_free(pl);
    assert_mgwfbp_matches_reference(&tp.p, &c);
  }
  /* Worked by hand, a = 2, b = 1, u8 sizes 4, 1, 1, 3, t_f = 0,
   * t_b = 1, 4, 1, 1 for layers 1..4. Ready: l4 = 1, l3 = 2, l2 = 6,
   * l1 = 7. tau_c(4) = 1; l3 ready 2 < 1 + 2: merge 4 into 3 (p3 = 4,
   * t_c3 = 6), tau_c(3) = max(1 + 0, 2) = 2. l2 ready 6 < 2 + 2? no:
   * normal; tau_c(2) = max(2 + 6, 6) = 8. l1 ready 7 < 8 + 2: merge 2 into
   * 1 (p1 = 5, t_c1 = 7), tau_c(1) = max(8, 7) = 8, end 15. */
  {
    const double bwd[] = {1, 4, 1, 1};
    const size_t numel[] = {4, 1, 1, 3};
    tp_init_as(&tp, 0, 4, bwd, numel, GS_U8);
    assert_int_equal(gs_plan_cost_from_ab(2, 1, &c), GS_OK);
    assert_true(plan_time(&tp.p, &c, "mgwfbp", &pl) == 15.0);
    assert_int_equal(pl->ngroups, 2);
    assert_int_equal(pl->offsets[1], 2); /* [2 3] then [0 1] */
    assert_int_equal(pl->tensors[0], 2);
    assert_int_equal(pl->tensors[2], 0);
    gs_plan_free(pl);
    assert_mgwfbp_matches_reference(&tp.p, &c);
  }
}

static void test_mgwfbp_matches_algorithm1_random(void **state) {
  (void)state;
  test_profile tp;
  gs_plan_cost c;
  for (int rep = 0; rep < 500; rep++) {
    size_t L = 1 + (size_t)(urand() * 40);
    random_instance(&tp, L, rep % 2, &c);
    assert_mgwfbp_matches_reference(&tp.p, &c);
  }
}

static void test_policies_contiguous_and_ordered(void **state) {
  (void)state;
  static const char *specs[] = {"wfbp", "single", "bucket", "bucket:0.01,first=0.002",
                                "mgwfbp", "optimal", "dear", "auto"};
  test_profile tp;
  gs_plan_cost c;
  for (int rep = 0; rep < 200; rep++) {
    size_t L = 1 + (size_t)(urand() * MAXL);
    random_instance(&tp, L, rep % 3 == 0, &c);
    double t[8];
    for (size_t k = 0; k < 8; k++) {
      gs_plan *pl = NULL;
      t[k] = plan_time(&tp.p, &c, specs[k], &pl);
      /* The plan's time is the model's time for its groups. */
      double again;
      if (pl->chosen == GS_PLAN_DEAR)
        assert_int_equal(gs_plan_predict_dear(&tp.p, &c, pl->tensors, pl->offsets,
                                              pl->ngroups, &again, NULL, NULL), GS_OK);
      else
        assert_int_equal(gs_plan_predict(&tp.p, &c, pl->tensors, pl->offsets,
                                         pl->ngroups, &again), GS_OK);
      assert_true(again == pl->predicted_iter_s);
      if (k == 0) assert_int_equal(pl->ngroups, L);
      if (k == 1) assert_int_equal(pl->ngroups, 1);
      gs_plan_free(pl);
    }
    /* optimal is no worse than any other all-reduce plan, auto no worse
     * than anything. */
    for (size_t k = 0; k < 5; k++) assert_true(t[5] <= t[k] + 1e-12 * t[k]);
    /* (within rounding: a tie goes to the earlier candidate, gs__faster) */
    for (size_t k = 0; k < 8; k++)
      if (k != 3) assert_true(t[7] <= t[k] * (1 + 1e-9)); /* k = 3 is not a candidate */
  }
}

static void test_bucket_ddp_semantics(void **state) {
  (void)state;
  /* Forward order sizes in MiB (f32 elements of 1/4 MiB each unit):
   * 0.5, 0.75, 10, 20, 3, 30. DDP: 0.5 + 0.75 >= 1 closes the first
   * (1 MiB) bucket [0 1]; then 10 + 20 >= 25 closes [2 3]; 3 + 30 >= 25
   * closes [4 5]. Reversed: [4 5], [2 3], [0 1]. */
  const double mib = 1024.0 * 1024.0 / 4.0; /* f32 elements per MiB */
  const size_t numel[] = {(size_t)(0.5 * mib), (size_t)(0.75 * mib), (size_t)(10 * mib),
                          (size_t)(20 * mib), (size_t)(3 * mib), (size_t)(30 * mib)};
  const double bwd[] = {1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3};
  test_profile tp;
  tp_init_as(&tp, 0.01, 6, bwd, numel, GS_F32);
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(1e-3, 1e-9, &c), GS_OK);
  gs_plan *pl = NULL;
  plan_time(&tp.p, &c, "bucket", &pl);
  assert_int_equal(pl->ngroups, 3);
  const size_t expect[] = {4, 5, 2, 3, 0, 1};
  for (size_t k = 0; k < 6; k++) assert_int_equal(pl->tensors[k], expect[k]);
  assert_true(pl->policy.bucket_mb == 25.0 && pl->policy.first_mb == 1.0);
  gs_plan_free(pl);
  /* bucket:12,first=2: 0.5+0.75 < 2, +10 >= 2 closes [0 1 2]; 20 >= 12
   * closes [3]; 3 < 12, + 30 closes [4 5]. */
  plan_time(&tp.p, &c, "bucket:12,first=2", &pl);
  const size_t expect2[] = {4, 5, 3, 0, 1, 2};
  assert_int_equal(pl->ngroups, 3);
  for (size_t k = 0; k < 6; k++) assert_int_equal(pl->tensors[k], expect2[k]);
  gs_plan_free(pl);
  /* bucket:40: 0.5 + 0.75 closes [0 1]; 10 + 20 + 3 = 33 < 40, + 30
   * closes [2..5]. */
  plan_time(&tp.p, &c, "bucket:40", &pl);
  assert_int_equal(pl->ngroups, 2);
  assert_int_equal(pl->offsets[1], 4);
  assert_int_equal(pl->tensors[0], 2);
  gs_plan_free(pl);
}

static void test_policy_parse(void **state) {
  (void)state;
  gs_plan_policy p;
  assert_int_equal(gs_plan_policy_parse("optimal", &p), GS_OK);
  assert_int_equal(p.kind, GS_PLAN_OPTIMAL);
  assert_int_equal(gs_plan_policy_parse("bucket:50,first=4", &p), GS_OK);
  assert_int_equal(p.kind, GS_PLAN_BUCKET);
  assert_true(p.bucket_mb == 50.0 && p.first_mb == 4.0);
  assert_int_equal(gs_plan_policy_parse("bucket:2.5", &p), GS_OK);
  assert_true(p.bucket_mb == 2.5 && p.first_mb == 1.0);
  const char *bad[] = {"", "Optimal", "bucket:", "bucket:0", "bucket:-1",
                       "bucket:x", "bucket:25,first=", "bucket:25,last=1",
                       "bucket:25,first=0", "mg-wfbp", "all"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
    assert_int_not_equal(gs_plan_policy_parse(bad[k], &p), GS_OK);
  assert_int_equal(gs_plan_policy_parse("nope", &p), GS_ERR_PARSE);
  assert_non_null(strstr(gs_last_error(), "nope"));
}

static void test_dear_model_hand_case(void **state) {
  (void)state;
  /* The three-layer profile with a = 2, b = 1, so reduce-scatter and
   * all-gather cost 1 + 0.5 M each. Groups [2], [0 1]; forward_s = 0.
   * All-gather of [0 1] (3 B): 0 -> 2.5; forward of [0 1] starts at 2.5
   * and takes 0, launching the all-gather of [2] (8 B): 2.5 -> 7.5;
   * forward of [2] waits until 7.5. Backward from 7.5: tensor 2 ready at
   * 9.5, reduce-scatter 5 -> 14.5; tensors 0-1 ready at 15.5, + 2.5 = 18. */
  const double bwd[] = {5, 1, 2};
  const size_t numel[] = {1, 2, 8};
  test_profile tp;
  tp_init_as(&tp, 0, 3, bwd, numel, GS_U8);
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(2, 1, &c), GS_OK);
  const size_t tensors[] = {2, 0, 1}, offsets[] = {0, 1, 3};
  double t, fend, wait;
  assert_int_equal(gs_plan_predict_dear(&tp.p, &c, tensors, offsets, 2, &t, &fend,
                                        &wait), GS_OK);
  assert_true(t == 18.0);
  assert_true(fend == 7.5);
  assert_true(wait == 7.5);
  /* Non-contiguous groups are refused by the DeAR model. */
  const size_t bad_t[] = {2, 0, 1}, bad_o[] = {0, 2, 3};
  assert_int_not_equal(gs_plan_predict_dear(&tp.p, &c, bad_t, bad_o, 2, &t, NULL,
                                            NULL), GS_OK);
  /* Forward time spread by backward share: forward 8 over t_b 5, 1, 2 is
   * 5, 1, 2. With free communication the iteration is forward + backward. */
  tp_init_as(&tp, 8, 3, bwd, numel, GS_U8);
  assert_int_equal(gs_plan_cost_from_ab(0, 0, &c), GS_OK);
  assert_true(plan_time(&tp.p, &c, "dear", NULL) == 16.0);
}

static void test_predict_rejects_bad_groupings(void **state) {
  (void)state;
  const double bwd[] = {1, 1, 1};
  const size_t numel[] = {1, 1, 1};
  test_profile tp;
  tp_init_as(&tp, 0, 3, bwd, numel, GS_F32);
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(1, 0, &c), GS_OK);
  double t;
  const size_t dup[] = {2, 2, 0}, off[] = {0, 1, 3};
  assert_int_equal(gs_plan_predict(&tp.p, &c, dup, off, 2, &t), GS_ERR_INVALID_ARG);
  const size_t range[] = {2, 3, 0};
  assert_int_equal(gs_plan_predict(&tp.p, &c, range, off, 2, &t), GS_ERR_INVALID_ARG);
  const size_t short_off[] = {0, 1, 2};
  assert_int_equal(gs_plan_predict(&tp.p, &c, dup, short_off, 2, &t),
                   GS_ERR_INVALID_ARG);
  /* Non-contiguous is allowed by the all-reduce model: {0, 2} then {1}. */
  const size_t nc[] = {0, 2, 1}, nco[] = {0, 2, 3};
  assert_int_equal(gs_plan_predict(&tp.p, &c, nc, nco, 2, &t), GS_OK);
  assert_true(t == 5.0); /* {0,2} ready at 3, ends 4; {1} ready 2, ends 5 */
  assert_int_equal(gs_plan_cost_from_ab(-1, 0, &c), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_plan_cost_from_ab(NAN, 0, &c), GS_ERR_INVALID_ARG);
}

static void test_cost_from_net(void **state) {
  (void)state;
  gs_cost_params params;
  assert_int_equal(gs_cost_preset("10GbE", &params), GS_OK);
  gs_cost_topo topo = {16, 16};
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_net(&params, topo, GS_ALGO_RING, &c), GS_OK);
  double a, b;
  gs_cost_allreduce_linear(&params, topo, GS_ALGO_RING, &a, &b);
  assert_true(c.ar.a == a && c.ar.b == b && c.ar.npoints == 0);
  for (double m = 1e3; m < 1e9; m *= 10) {
    double rs = gs_cost_reduce_scatter(&params, topo, GS_ALGO_RING, m);
    double ag = gs_cost_allgather(&params, topo, GS_ALGO_AUTO, m);
    assert_true(fabs(c.rs.a + c.rs.b * m - rs) <= 1e-9 * rs);
    assert_true(fabs(c.ag.a + c.ag.b * m - ag) <= 1e-9 * ag);
  }
  assert_int_equal(gs_plan_cost_from_net(&params, topo, GS_ALGO_PIPELINE, &c),
                   GS_ERR_UNSUPPORTED);
  assert_int_equal(gs_plan_cost_from_ab(2e-3, 4e-9, &c), GS_OK);
  assert_true(c.rs.a == 1e-3 && c.ag.a == 1e-3 && c.rs.b == 2e-9 && c.ag.b == 2e-9);
}

/* A calibrated preset (1gbit): the all-reduce is priced per message at the
 * fastest algorithm for its size, as the communicator chooses, through every
 * power of two from 64 B to 4 GiB, plus the engine's cost per message; a is
 * the smallest message's time, b the large messages' slope; a named
 * algorithm keeps its own line. */
static void test_cost_envelope(void **state) {
  (void)state;
  gs_cost_params params;
  assert_int_equal(gs_cost_preset("1gbit", &params), GS_OK);
  assert_true(params.ncalib > 0);
  for (int p = 2; p <= 16; p += 6) {
    gs_cost_topo topo = {p, p};
    gs_plan_cost c;
    assert_int_equal(gs_plan_cost_from_net(&params, topo, GS_ALGO_AUTO, &c), GS_OK);
    assert_int_equal(c.ar.npoints, 27);
    double prev = 0, msg = gs_cost_message(&params, topo);
    assert_true(msg > 0);
    for (int i = 0; i < c.ar.npoints; i++) {
      double best;
      gs_cost_best_allreduce(&params, topo, c.ar.bytes[i], &best);
      best += msg; /* every engine message pays its own work once */
      prev = prev > best ? prev : best;
      assert_true(c.ar.bytes[i] == ldexp(1.0, 6 + i) && c.ar.secs[i] == prev);
    }
    double a, b;
    gs_cost_allreduce_linear(&params, topo, GS_ALGO_AUTO, &a, &b);
    assert_true(c.ar.b == b);
    assert_true(fabs(c.ar.a - (c.ar.secs[0] - b * 64)) <= 1e-12 * c.ar.secs[0]);
    /* 64 B: recursive doubling's lg p steps beat the ring's 2(p-1). */
    assert_true(c.ar.secs[0] <= msg + gs_cost_allreduce(&params, topo, GS_ALGO_RD, 64) *
                                          (1 + 1e-12));
    assert_true(c.ar.secs[0] < msg + gs_cost_allreduce(&params, topo, GS_ALGO_RING, 64));
    /* A message between two points costs no less than the fastest algorithm. */
    double mid = 3 << 20;
    gs_cost_best_allreduce(&params, topo, mid, &a);
    assert_true(gs_cost_curve_eval(&c.ar, mid) >= (a + msg) * (1 - 1e-12));
    /* DeAR's halves pay it too. */
    double rs0 = gs_cost_reduce_scatter(&params, topo, GS_ALGO_RING, 0);
    assert_true(fabs(c.rs.a - (rs0 + msg)) <= 1e-12 * c.rs.a);
    gs_plan_cost ring;
    assert_int_equal(gs_plan_cost_from_net(&params, topo, GS_ALGO_RING, &ring), GS_OK);
    assert_int_equal(ring.ar.npoints, 0);
  }
}

/* Costs with measured points: the all-reduce's curve passes through the
 * sizes measured, at the chosen algorithm's time (running maximum), or at
 * the fastest algorithm's with GS_ALGO_AUTO; DeAR's halves follow it; a and
 * b stay those of gs_plan_cost_from_net; without points nothing changes. */
static void test_cost_measured(void **state) {
  (void)state;
  gs_cost_params params;
  assert_int_equal(gs_cost_preset("1gbit", &params), GS_OK);
  gs_cost_topo topo = {4, 4};
  gs_plan_cost net, c;
  assert_int_equal(gs_plan_cost_from_net(&params, topo, GS_ALGO_AUTO, &net), GS_OK);
  assert_int_equal(gs_plan_cost_measured(&params, topo, GS_ALGO_AUTO, &c), GS_OK);
  assert_memory_equal(&c, &net, sizeof c); /* a preset has no points */
  /* ring measured at three sizes, the middle one noisy (below the first). */
  const double rb[] = {4096, 65536, 1048576}, rs[] = {2e-3, 1e-3, 5e-3};
  assert_int_equal(gs_cost_fit_algo(&params, topo, GS_ALGO_RING, rb, rs, 3), GS_OK);
  assert_int_equal(gs_plan_cost_from_net(&params, topo, GS_ALGO_RING, &net), GS_OK);
  assert_int_equal(gs_plan_cost_measured(&params, topo, GS_ALGO_RING, &c), GS_OK);
  assert_int_equal(c.ar.npoints, 3);
  assert_true(c.ar.a == net.ar.a && c.ar.b == net.ar.b);
  const double want[] = {2e-3, 2e-3, 5e-3};
  for (int i = 0; i < 3; i++) {
    assert_true(c.ar.bytes[i] == rb[i] && c.ar.secs[i] == want[i]);
    assert_true(c.rs.bytes[i] == rb[i] && c.rs.secs[i] == want[i] / 2);
    assert_true(c.ag.secs[i] == want[i] / 2);
  }
  assert_true(c.rs.a == net.ar.a / 2 && c.ag.b == net.ar.b / 2);
  /* 1 MB costs the point, not the line; halfway to 64 KB, the mean. */
  assert_true(gs_cost_curve_eval(&c.ar, 1048576) == 5e-3);
  assert_true(fabs(gs_cost_curve_eval(&c.ar, (65536 + 1048576) / 2.0) - 3.5e-3) < 1e-15);
  /* rd measured at other sizes, cheaper at small ones: with AUTO the
   * points are every size measured, each at the fastest algorithm. */
  const double db[] = {4096, 16384, 262144}, ds[] = {1e-4, 2e-4, 9e-3};
  assert_int_equal(gs_cost_fit_algo(&params, topo, GS_ALGO_RD, db, ds, 3), GS_OK);
  assert_int_equal(gs_plan_cost_measured(&params, topo, GS_ALGO_AUTO, &c), GS_OK);
  assert_int_equal(c.ar.npoints, 5);
  double prev = 0;
  const double xs[] = {4096, 16384, 65536, 262144, 1048576};
  for (int i = 0; i < 5; i++) {
    double best;
    gs_cost_best_allreduce(&params, topo, xs[i], &best);
    prev = prev > best ? prev : best;
    assert_true(c.ar.bytes[i] == xs[i] && c.ar.secs[i] == prev);
  }
  assert_true(c.ar.secs[0] <= 1e-4); /* rd's, not ring's 2 ms */
  /* The chosen algorithm alone: rd's three sizes. */
  assert_int_equal(gs_plan_cost_measured(&params, topo, GS_ALGO_RD, &c), GS_OK);
  assert_int_equal(c.ar.npoints, 3);
  assert_true(c.ar.secs[2] == 9e-3);
  /* One worker: nothing to price. */
  assert_int_equal(gs_plan_cost_measured(&params, (gs_cost_topo){1, 1}, GS_ALGO_AUTO, &c),
                   GS_OK);
  assert_int_equal(c.ar.npoints, 0);
  assert_int_equal(gs_plan_cost_measured(&params, topo, GS_ALGO_PIPELINE, &c),
                   GS_ERR_UNSUPPORTED);
}

/* A random measured curve: non-decreasing times at increasing sizes,
 * with a burst region (small messages nearly free) as on a token bucket. */
static void random_curve(gs_cost_curve *cv) {
  cv->npoints = 2 + (int)(urand() * 10);
  double x = 1 + urand() * 50, y = urand() * 2e-3;
  for (int i = 0; i < cv->npoints; i++) {
    cv->bytes[i] = x;
    cv->secs[i] = y;
    x *= 1.5 + urand() * 20;
    y += urand() < 0.3 ? 0.0 : urand() * 5e-3;
  }
  cv->b = urand() * 4e-9;
}

/* The dynamic program's optimum holds under measured curves too (its proof
 * needs only a non-negative cost per group): optimal equals the best
 * contiguous plan, and dear's and mgwfbp's plans are valid and predicted
 * by the same model. */
static void test_optimal_exhaustive_with_curves(void **state) {
  (void)state;
  test_profile tp;
  gs_plan_cost c;
  for (int rep = 0; rep < 400; rep++) {
    size_t L = 1 + (size_t)(urand() * 12);
    random_instance(&tp, L, 0, &c);
    random_curve(&c.ar);
    random_curve(&c.rs);
    random_curve(&c.ag);
    double best = exhaustive_min(&tp.p, &c);
    double opt = plan_time(&tp.p, &c, "optimal", NULL);
    assert_true(fabs(opt - best) <= 1e-12 * fmax(1.0, fabs(best)));
    for (int k = 0; k < GS_PLAN_POLICY_COUNT; k++) {
      gs_plan *pl = NULL;
      double t = plan_time(&tp.p, &c, gs_plan_policy_name((gs_plan_policy_kind)k), &pl);
      double again = -1;
      if (pl->chosen == GS_PLAN_DEAR)
        assert_int_equal(gs_plan_predict_dear(&tp.p, &c, pl->tensors, pl->offsets,
                                              pl->ngroups, &again, NULL, NULL), GS_OK);
      else
        assert_int_equal(gs_plan_predict(&tp.p, &c, pl->tensors, pl->offsets,
                                         pl->ngroups, &again), GS_OK);
      assert_true(again == t);
      if (k != GS_PLAN_DEAR && pl->chosen != GS_PLAN_DEAR) assert_true(t >= opt - 1e-12);
      gs_plan_free(pl);
    }
  }
}

/* A message's time under a curve is the curve's, not a + b*M: a plan of one
 * tensor is predicted as ready time + curve(bytes). */
static void test_predict_reads_curve(void **state) {
  (void)state;
  size_t numel[2] = {1000, 250000};
  double bwd[2] = {0.0, 0.0};
  test_profile tp;
  tp_init_as(&tp, 0.5, 2, bwd, numel, GS_F32);
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(1.0, 1.0, &c), GS_OK); /* absurd line */
  c.ar.npoints = 2;
  c.ar.bytes[0] = 4000;
  c.ar.secs[0] = 0.001;
  c.ar.bytes[1] = 1e6;
  c.ar.secs[1] = 0.01;
  size_t tensors[2] = {1, 0}, offsets[3] = {0, 1, 2};
  double t;
  assert_int_equal(gs_plan_predict(&tp.p, &c, tensors, offsets, 2, &t), GS_OK);
  assert_true(fabs(t - (0.5 + 0.01 + 0.001)) < 1e-12);
  /* Invalid curves are refused with the offending point named. */
  c.ar.secs[1] = 0.0005;
  assert_int_equal(gs_plan_predict(&tp.p, &c, tensors, offsets, 2, &t), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "all-reduce cost: point 1"));
  c.ar.secs[1] = 0.01;
  c.ar.npoints = GS_COST_CURVE_POINTS + 1;
  assert_int_equal(gs_plan_predict(&tp.p, &c, tensors, offsets, 2, &t), GS_ERR_INVALID_ARG);
}

/* ---- The windowed dynamic program against the scan ------------------------ */

/* A profile of any size on the heap. */
typedef struct big_profile {
  gs_profile p;
  gs_profile_tensor *t;
} big_profile;

static void big_init(big_profile *bp, size_t L, double forward_s) {
  bp->t = calloc(L, sizeof *bp->t);
  assert_non_null(bp->t);
  bp->p = (gs_profile){.name = "big", .device = "", .source = "",
                       .forward_s = forward_s, .ntensors = L, .tensors = bp->t};
  for (size_t i = 0; i < L; i++) {
    bp->t[i].name = "t";
    bp->t[i].dtype = GS_F32;
  }
}

/* The predicted time of a plan given as starts, through the public model. */
static double starts_time(const gs_profile *p, const gs_plan_cost *c,
                          const size_t *starts, size_t G) {
  size_t L = p->ntensors;
  size_t *tensors = malloc(L * sizeof(size_t)), *offsets = malloc((G + 1) * sizeof(size_t));
  assert_true(tensors != NULL && offsets != NULL);
  size_t n = 0, hi = L;
  for (size_t g = 0; g < G; g++) {
    assert_true(starts[g] < hi); /* contiguous, launch order */
    offsets[g] = n;
    for (size_t i = starts[g]; i < hi; i++) tensors[n++] = i;
    hi = starts[g];
  }
  assert_int_equal(hi, 0);
  offsets[G] = n;
  double t;
  assert_int_equal(gs_plan_predict(p, c, tensors, offsets, G, &t), GS_OK);
  free(tensors);
  free(offsets);
  return t;
}

/* Both algorithms on one instance under the all-reduce cost: the same
 * optimum (to rounding); returns whether the plans are identical. */
static int windowed_vs_scan(const gs_profile *p, const gs_plan_cost *c) {
  plan_ctx ctx;
  assert_int_equal(plan_ctx_init(&ctx, p, c), GS_OK);
  size_t L = p->ntensors;
  size_t *sw = malloc(L * sizeof(size_t)), *ss = malloc(L * sizeof(size_t));
  assert_true(sw != NULL && ss != NULL);
  int over = 1;
  size_t gs = plan_optimal_starts_scan(&ctx, &c->ar, ss, 0, &over);
  assert_int_equal(over, 0);
  size_t gw = plan_optimal_starts_windowed(&ctx, &c->ar, sw);
  assert_true(gs > 0 && gw > 0);
  double ts = starts_time(p, c, ss, gs), tw = starts_time(p, c, sw, gw);
  if (!(fabs(tw - ts) <= 1e-12 * fmax(1e-300, fabs(ts))))
    fail_msg("windowed %.17g (%zu groups) != scan %.17g (%zu groups), L=%zu a=%g b=%g "
             "points=%d", tw, gw, ts, gs, L, c->ar.a, c->ar.b, c->ar.npoints);
  int same = gw == gs && memcmp(sw, ss, gw * sizeof(size_t)) == 0;
  free(sw);
  free(ss);
  plan_ctx_free(&ctx);
  return same;
}

/* The costs that defeat the scan's pruning or make ties, and ordinary ones. */
static void random_medium_cost(int kind, gs_plan_cost *c) {
  switch (kind % 6) {
    case 0: assert_int_equal(gs_plan_cost_from_ab(0.0, urand() * 4e-9, c), GS_OK); break;
    case 1: assert_int_equal(gs_plan_cost_from_ab(10 + urand() * 1e3, urand() * 4e-9, c), GS_OK); break;
    case 2: assert_int_equal(gs_plan_cost_from_ab(urand() * 1e-2, 0.0, c), GS_OK); break;
    case 3: assert_int_equal(gs_plan_cost_from_ab(urand() * 1e-3, urand() * 4e-9, c), GS_OK); break;
    case 4: assert_int_equal(gs_plan_cost_from_ab(0.0, 0.0, c), GS_OK); break;
    default:
      assert_int_equal(gs_plan_cost_from_ab(urand() * 1e-3, urand() * 4e-9, c), GS_OK);
      random_curve(&c->ar);
      break;
  }
}

static void test_windowed_equals_scan_medium(void **state) {
  (void)state;
  int same = 0, total = 0;
  for (int rep = 0; rep < 240; rep++) {
    size_t L = 200 + (size_t)(urand() * 200);
    big_profile bp;
    int integral = rep % 4 == 3; /* small integers: exact ties */
    big_init(&bp, L, integral ? (double)(int)(urand() * 4) : urand() * 0.05);
    for (size_t i = 0; i < L; i++) {
      bp.t[i].dtype = integral ? GS_U8 : GS_F32;
      bp.t[i].numel = integral ? 1 + (size_t)(urand() * 10)
                               : 1 + (size_t)(urand() * (urand() < 0.5 ? 1e3 : 4e6));
      bp.t[i].backward_s = integral ? (double)(int)(urand() * 6)
                                    : urand() * 1e-3 * (urand() < 0.2 ? 0.01 : 1.0);
    }
    gs_plan_cost c;
    if (integral)
      assert_int_equal(gs_plan_cost_from_ab((double)(int)(urand() * 5),
                                            (double)(int)(urand() * 3), &c), GS_OK);
    else
      random_medium_cost(rep, &c);
    same += windowed_vs_scan(&bp.p, &c);
    total++;
    free(bp.t);
  }
  /* Plans differ only where several share the optimum to the last bits. */
  print_message("windowed == scan: %d of %d plans identical, all times equal\n", same,
                total);
  assert_true(same * 2 > total);
}

/* The windows against exhaustive search on small instances, affine and
 * curves (the scan is what "optimal" runs at these sizes). */
static void test_windowed_equals_exhaustive(void **state) {
  (void)state;
  test_profile tp;
  gs_plan_cost c;
  for (int rep = 0; rep < 600; rep++) {
    size_t L = 1 + (size_t)(urand() * 12);
    random_instance(&tp, L, rep % 2, &c);
    if (rep % 3 == 2) random_curve(&c.ar);
    if (rep % 5 == 4) assert_int_equal(gs_plan_cost_from_ab(0.0, c.ar.b, &c), GS_OK);
    double best = exhaustive_min(&tp.p, &c);
    plan_ctx ctx;
    assert_int_equal(plan_ctx_init(&ctx, &tp.p, &c), GS_OK);
    size_t starts[MAXL];
    size_t G = plan_optimal_starts_windowed(&ctx, &c.ar, starts);
    plan_ctx_free(&ctx);
    double t = starts_time(&tp.p, &c, starts, G);
    assert_true(fabs(t - best) <= 1e-12 * fmax(1.0, fabs(best)));
  }
}

/* The scan gives up past its step budget, and plan_optimal_starts then
 * answers with the windows: a = 0 on 3,000 tensors takes ~L^2/2 steps. */
static void test_scan_budget_hands_over(void **state) {
  (void)state;
  size_t L = 3000;
  big_profile bp;
  big_init(&bp, L, 0.01);
  for (size_t i = 0; i < L; i++) {
    bp.t[i].numel = 1000 + (i * 7919) % 5000;
    bp.t[i].backward_s = 1e-7;
  }
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(0.0, 1e-9, &c), GS_OK);
  plan_ctx ctx;
  assert_int_equal(plan_ctx_init(&ctx, &bp.p, &c), GS_OK);
  size_t *s1 = malloc(L * sizeof(size_t)), *s2 = malloc(L * sizeof(size_t));
  int over = 0;
  assert_int_equal(plan_optimal_starts_scan(&ctx, &c.ar, s1, 100000, &over), 0);
  assert_int_equal(over, 1);
  size_t g1 = plan_optimal_starts(&ctx, &c.ar, s1);
  size_t g2 = plan_optimal_starts_windowed(&ctx, &c.ar, s2);
  assert_int_equal(g1, g2);
  assert_memory_equal(s1, s2, g1 * sizeof(size_t));
  over = 1;
  size_t g3 = plan_optimal_starts_scan(&ctx, &c.ar, s2, 0, &over);
  assert_int_equal(over, 0);
  double t1 = starts_time(&bp.p, &c, s1, g1), t3 = starts_time(&bp.p, &c, s2, g3);
  assert_true(fabs(t1 - t3) <= 1e-12 * t3);
  free(s1);
  free(s2);
  plan_ctx_free(&ctx);
  free(bp.t);
}

/* Degenerate profiles: one tensor plans under every policy; no tensors, a
 * tensor of 0 elements and sizes past 2^53 bytes are refused, not crashed on. */
static void test_degenerate_profiles(void **state) {
  (void)state;
  static const char *specs[] = {"wfbp", "single", "bucket", "mgwfbp", "optimal",
                                "dear", "auto"};
  gs_plan_cost c;
  assert_int_equal(gs_plan_cost_from_ab(1e-3, 1e-9, &c), GS_OK);
  const double bwd1[] = {0.0};
  const size_t numel1[] = {1};
  test_profile tp;
  tp_init_as(&tp, 0.0, 1, bwd1, numel1, GS_F32);
  for (size_t k = 0; k < 7; k++) {
    gs_plan *pl = NULL;
    double t = plan_time(&tp.p, &c, specs[k], &pl);
    assert_int_equal(pl->ngroups, 1);
    assert_true(t == 1e-3 + 4e-9);
    gs_plan_free(pl);
  }
  gs_plan *pl = NULL;
  tp.p.ntensors = 0;
  assert_int_equal(gs_plan_make(&tp.p, &c, "auto", &pl), GS_ERR_INVALID_ARG);
  assert_null(pl);
  tp.p.ntensors = 1;
  tp.t[0].numel = 0;
  assert_int_equal(gs_plan_make(&tp.p, &c, "optimal", &pl), GS_ERR_INVALID_ARG);
  assert_null(pl);
  tp.t[0].numel = ((size_t)1 << 53) / 4 + 1; /* f32: just over 2^53 bytes */
  assert_int_equal(gs_plan_make(&tp.p, &c, "optimal", &pl), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "2^53"));
  tp.t[0].numel = SIZE_MAX / 2; /* bytes would wrap around */
  assert_int_equal(gs_plan_make(&tp.p, &c, "dear", &pl), GS_ERR_INVALID_ARG);
  const double bwd2[] = {1.0, 1.0};
  const size_t numel2[] = {((size_t)1 << 52) / 4, ((size_t)1 << 52) / 4 + 1};
  tp_init_as(&tp, 0.0, 2, bwd2, numel2, GS_F32); /* each fits, the sum does not */
  assert_int_equal(gs_plan_make(&tp.p, &c, "wfbp", &pl), GS_ERR_INVALID_ARG);
  assert_null(pl);
  /* Times or costs whose sums overflow: refused, never an infinite
   * prediction (a finite a of 1e307 s over a few messages would be). */
  const double bwd_big[] = {1e308, 1e308};
  const size_t numel_one[] = {1, 1};
  tp_init_as(&tp, 0.0, 2, bwd_big, numel_one, GS_F32);
  assert_int_equal(gs_plan_make(&tp.p, &c, "wfbp", &pl), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "overflow"));
  tp_init_as(&tp, 0.0, 2, bwd2, numel_one, GS_F32);
  assert_int_equal(gs_plan_cost_from_ab(1e307, 0, &c), GS_OK);
  assert_int_equal(gs_plan_make(&tp.p, &c, "auto", &pl), GS_ERR_INVALID_ARG);
  assert_null(pl);
  assert_int_equal(gs_plan_cost_from_ab(1e300, 1e280, &c), GS_OK); /* large, finite */
  for (size_t k = 0; k < 7; k++) assert_true(isfinite(plan_time(&tp.p, &c, specs[k], NULL)));
  /* Zero backward and forward times, free communication: every policy
   * plans and predicts 0. */
  const double bwd0[] = {0, 0, 0};
  const size_t numel3[] = {1, 1, 1};
  tp_init_as(&tp, 0.0, 3, bwd0, numel3, GS_F32);
  assert_int_equal(gs_plan_cost_from_ab(0, 0, &c), GS_OK);
  for (size_t k = 0; k < 7; k++) assert_true(plan_time(&tp.p, &c, specs[k], NULL) == 0.0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_optimal_exhaustive_with_curves),
      cmocka_unit_test(test_predict_reads_curve),
      cmocka_unit_test(test_optimal_equals_exhaustive),
      cmocka_unit_test(test_mgwfbp_three_layer_case),
      cmocka_unit_test(test_mgwfbp_hand_cases),
      cmocka_unit_test(test_mgwfbp_matches_algorithm1_random),
      cmocka_unit_test(test_policies_contiguous_and_ordered),
      cmocka_unit_test(test_bucket_ddp_semantics),
      cmocka_unit_test(test_policy_parse),
      cmocka_unit_test(test_dear_model_hand_case),
      cmocka_unit_test(test_predict_rejects_bad_groupings),
      cmocka_unit_test(test_cost_from_net), cmocka_unit_test(test_cost_measured),
      cmocka_unit_test(test_cost_envelope),
      cmocka_unit_test(test_windowed_equals_exhaustive),
      cmocka_unit_test(test_windowed_equals_scan_medium),
      cmocka_unit_test(test_scan_budget_hands_over),
      cmocka_unit_test(test_degenerate_profiles),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
