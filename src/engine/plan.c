/*
 * Merge plans under the all-reduce model of MG-WFBP (Shi, Chu & Li, TPDS
 * 2021, Eqs. 6-8) and the policies that make them: wfbp, single, bucket
 * (PyTorch DDP), mgwfbp (Algorithm 1), optimal (a dynamic program) and auto.
 * DeAR lives in plan_dear.c. gs_plan_predict is the one simulation of the
 * model; every policy's predicted time comes from it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

/* ---- Context: prefix sums every policy reads --------------------------- */

/* A cost curve the planner can trust: finite, non-negative, points by
 * increasing size with non-decreasing times (gs_cost_curve_fit's output). */
static gs_status check_curve(const gs_cost_curve *c, const char *what) {
  if (!isfinite(c->a) || !isfinite(c->b) || c->a < 0 || c->b < 0)
    return gs_error(GS_ERR_INVALID_ARG, "plan: %s cost: a and b must be finite "
                    "and >= 0 (a=%g, b=%g)", what, c->a, c->b);
  if (c->npoints < 0 || c->npoints > GS_COST_CURVE_POINTS)
    return gs_error(GS_ERR_INVALID_ARG, "plan: %s cost: %d points (0-%d allowed)",
                    what, c->npoints, GS_COST_CURVE_POINTS);
  for (int i = 0; i < c->npoints; i++) {
    if (!isfinite(c->bytes[i]) || !isfinite(c->secs[i]) || c->secs[i] < 0 ||
        (i > 0 && (c->bytes[i] <= c->bytes[i - 1] || c->secs[i] < c->secs[i - 1])))
      return gs_error(GS_ERR_INVALID_ARG, "plan: %s cost: point %d (%g B, %g s) "
                      "breaks the increasing sizes / non-decreasing times",
                      what, i, c->bytes[i], c->secs[i]);
  }
  return GS_OK;
}

gs_status plan_ctx_init(plan_ctx *ctx, const gs_profile *p, const gs_plan_cost *c) {
  memset(ctx, 0, sizeof *ctx);
  GS_CHECK(gs_profile_validate(p));
  if (c == NULL) return gs_error(GS_ERR_INVALID_ARG, "plan: NULL cost");
  GS_CHECK(check_curve(&c->ar, "all-reduce"));
  GS_CHECK(check_curve(&c->rs, "reduce-scatter"));
  GS_CHECK(check_curve(&c->ag, "all-gather"));
  size_t L = p->ntensors;
  ctx->profile = p;
  ctx->cost = c;
  ctx->L = L;
  ctx->ready = gs_malloc(L * sizeof(double));
  ctx->bwd_after = gs_malloc((L + 1) * sizeof(double));
  ctx->fwd_before = gs_malloc((L + 1) * sizeof(double));
  ctx->bytes_before = gs_malloc((L + 1) * sizeof(uint64_t));
  if (!ctx->ready || !ctx->bwd_after || !ctx->fwd_before || !ctx->bytes_before) {
    plan_ctx_free(ctx);
    return GS_ERR_NOMEM;
  }
  /* Eq. 6: tau_b(L) = t_f, tau_b(l) = tau_b(l+1) + t_b(l+1); tensor i is
   * ready at tau_b + t_b of its layer. */
  double acc = p->forward_s;
  ctx->bwd_after[L] = 0.0;
  for (size_t i = L; i-- > 0;) {
    acc += p->tensors[i].backward_s;
    ctx->ready[i] = acc;
    ctx->bwd_after[i] = ctx->bwd_after[i + 1] + p->tensors[i].backward_s;
  }
  /* DeAR's forward model: forward_s spread over tensors in proportion to
   * their backward time (evenly if backward is all zero). */
  double total_bwd = ctx->bwd_after[0];
  ctx->fwd_before[0] = 0.0;
  ctx->bytes_before[0] = 0;
  for (size_t i = 0; i < L; i++) {
    double share = total_bwd > 0 ? p->tensors[i].backward_s / total_bwd
                                 : 1.0 / (double)L;
    ctx->fwd_before[i + 1] = ctx->fwd_before[i] + p->forward_s * share;
    ctx->bytes_before[i + 1] =
        ctx->bytes_before[i] + (uint64_t)gs_profile_tensor_bytes(p, i);
  }
  return GS_OK;
}

void plan_ctx_free(plan_ctx *ctx) {
  gs_free(ctx->ready);
  gs_free(ctx->bwd_after);
  gs_free(ctx->fwd_before);
  gs_free(ctx->bytes_before);
  memset(ctx, 0, sizeof *ctx);
}

/* ---- Costs --------------------------------------------------------------- */

gs_status gs_plan_cost_from_ab(double a, double b, gs_plan_cost *out) {
  if (out == NULL) return gs_error(GS_ERR_INVALID_ARG, "plan cost: NULL output");
  if (!isfinite(a) || !isfinite(b) || a < 0 || b < 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "plan cost: a and b must be finite and >= 0 (a=%g, b=%g)", a, b);
  GS_CHECK(gs_cost_curve_affine(a, b, &out->ar));
  GS_CHECK(gs_cost_curve_affine(a / 2, b / 2, &out->rs));
  return gs_cost_curve_affine(a / 2, b / 2, &out->ag);
}

/* Reads the affine coefficients of one of the cost module's collectives by
 * evaluating it at two sizes; every formula there is affine in the size. */
static gs_status affine_of(double (*fn)(const gs_cost_params *, gs_cost_topo,
                                        gs_algo, double),
                           const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                           const char *what, gs_cost_curve *out) {
  double t0 = fn(c, t, algo, 0.0), t1 = fn(c, t, algo, 1e6);
  if (t0 < 0 || t1 < 0)
    return gs_error(GS_ERR_UNSUPPORTED, "plan cost: %s has no %s cost",
                    gs_algo_name(algo), what);
  return gs_cost_curve_affine(t0, (t1 - t0) / 1e6, out);
}

gs_status gs_plan_cost_from_net(const gs_cost_params *params, gs_cost_topo topo,
                                gs_algo algo, gs_plan_cost *out) {
  if (params == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "plan cost: NULL argument");
  if (topo.ranks < 1)
    return gs_error(GS_ERR_INVALID_ARG, "plan cost: %d workers", topo.ranks);
  if (gs_cost_allreduce(params, topo, algo, 1e6) < 0)
    return gs_error(GS_ERR_UNSUPPORTED, "plan cost: %s is not an allreduce "
                    "algorithm", gs_algo_name(algo));
  double a, b;
  gs_cost_allreduce_linear(params, topo, algo, &a, &b);
  GS_CHECK(gs_cost_curve_affine(a, b, &out->ar));
  GS_CHECK(affine_of(gs_cost_reduce_scatter, params, topo, GS_ALGO_RING,
                     "reduce-scatter", &out->rs));
  GS_CHECK(affine_of(gs_cost_allgather, params, topo, GS_ALGO_AUTO, "allgather",
                     &out->ag));
  return GS_OK;
}

/* ---- Policies ------------------------------------------------------------ */

static const char *policy_names[GS_PLAN_POLICY_COUNT] = {
    "wfbp", "single", "bucket", "mgwfbp", "optimal", "dear", "auto"};

const char *gs_plan_policy_name(gs_plan_policy_kind kind) {
  return (unsigned)kind < GS_PLAN_POLICY_COUNT ? policy_names[kind] : "unknown";
}

static int parse_mb(const char *s, const char *end, double *out) {
  if (s == end) return -1;
  char buf[64];
  size_t n = (size_t)(end - s);
  if (n >= sizeof buf) return -1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  char *e;
  double v = strtod(buf, &e);
  if (*e != '\0' || !isfinite(v) || v <= 0 || v > 1e9) return -1;
  *out = v;
  return 0;
}

gs_status gs_plan_policy_parse(const char *spec, gs_plan_policy *out) {
  if (spec == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "policy: NULL argument");
  out->bucket_mb = 25.0;
  out->first_mb = 1.0;
  for (int k = 0; k < GS_PLAN_POLICY_COUNT; k++) {
    if (strcmp(spec, policy_names[k]) == 0) {
      out->kind = (gs_plan_policy_kind)k;
      return GS_OK;
    }
  }
  if (strncmp(spec, "bucket:", 7) == 0) {
    const char *s = spec + 7, *comma = strchr(s, ',');
    const char *end = comma ? comma : s + strlen(s);
    if (parse_mb(s, end, &out->bucket_mb) != 0)
      return gs_error(GS_ERR_PARSE, "policy '%s': bucket size must be a positive "
                      "number of MB", spec);
    if (comma) {
      if (strncmp(comma + 1, "first=", 6) != 0 ||
          parse_mb(comma + 7, comma + 7 + strlen(comma + 7), &out->first_mb) != 0)
        return gs_error(GS_ERR_PARSE, "policy '%s': expected bucket:<MB>,first=<MB>"
                        " with positive sizes", spec);
    }
    out->kind = GS_PLAN_BUCKET;
    return GS_OK;
  }
  return gs_error(GS_ERR_PARSE, "unknown policy '%s' (expected wfbp, single, "
                  "bucket[:<MB>[,first=<MB>]], mgwfbp, optimal, dear or auto)",
                  spec);
}

/* PyTorch DDP's bucket assignment (torch/csrc/distributed/c10d/reducer.cpp,
 * compute_bucket_assignment_by_size): parameters in model.parameters() order
 * go into the open bucket; once it holds at least the current limit it is
 * closed and the limit moves from the first bucket's cap to the general
 * cap; a parameter is never split. DDP then reverses the bucket list
 * (distributed.py) so buckets launch in backward order. DDP separates
 * dtypes into different buckets; here a mixed-dtype profile shares them. */
size_t plan_threshold_starts(const plan_ctx *ctx, double first, double cap,
                             size_t *starts) {
  size_t L = ctx->L, G = 0;
  double limit = first, size = 0;
  size_t open = 0;
  /* Collect bucket starts in forward order, then reverse. */
  for (size_t i = 0; i < L; i++) {
    size += (double)plan_bytes(ctx, i, i);
    if (size >= limit || i == L - 1) {
      starts[G++] = open;
      open = i + 1;
      size = 0;
      limit = cap;
    }
  }
  for (size_t g = 0; g < G / 2; g++) {
    size_t t = starts[g];
    starts[g] = starts[G - 1 - g];
    starts[G - 1 - g] = t;
  }
  return G;
}

/* MG-WFBP, TPDS 2021, Algorithm 1, with layers l = 1..L as tensors i = l-1.
 * t_c(l) = a + b p(l); tau_c(L) = tau_b(L) + t_b(L); tau_c(l) =
 * max{tau_c(l+1) + t_c(l+1), tau_b(l) + t_b(l)} (Eq. 7). Scanning l = L..2,
 * layer l is merged into l-1 iff tau_b(l-1) + t_b(l-1) < tau_c(l) + a
 * (Eqs. 35/38), which sets t_c(l) = 0, p(l-1) += p(l) and recomputes
 * t_c(l-1). The paper recomputes every tau_c after a merge; a merge at l
 * changes only t_c(l) and t_c(l-1), which enter tau_c(k) for k <= l-1 only,
 * none of them read yet, so computing tau_c(l-1) right after the decision at
 * l gives the same values in O(L). */
size_t plan_mgwfbp_starts(const plan_ctx *ctx, const gs_cost_curve *cost,
                          size_t *starts) {
  size_t L = ctx->L, G = 0;
  double a = cost->a;
  uint64_t p_cur = plan_bytes(ctx, L - 1, L - 1); /* p(l) after merges into it */
  double tau_c = ctx->ready[L - 1];               /* tau_c(L) */
  for (size_t i = L - 1; i >= 1; i--) {
    double ready_below = ctx->ready[i - 1]; /* tau_b(l-1) + t_b(l-1) */
    uint64_t p_below = plan_bytes(ctx, i - 1, i - 1);
    double t_c;
    if (ready_below < tau_c + a) {
      t_c = 0.0; /* merged: layer l sends nothing of its own */
      p_below += p_cur;
    } else {
      t_c = plan_msg_time(cost, p_cur);
      starts[G++] = i; /* layer l is a normal layer: a group starts at i */
    }
    tau_c = GS_MAX(tau_c + t_c, ready_below);
    p_cur = p_below;
  }
  starts[G++] = 0; /* layer 1 is always a normal layer */
  return G;
}

/*
 * The optimal plan, by dynamic programming over contiguous groups.
 *
 * Let E(k) be the smallest end time of the last message over all plans of
 * the tensors k..L-1 (the first L-k tensors in launch order) into contiguous
 * groups, and E(L) = -infinity. A plan of k..L-1 ends with a group k..m-1 for
 * some m in k+1..L, whose message starts at max(end of the plan of m..L-1,
 * r(k)) (its last-ready tensor is k, r being non-increasing in the index)
 * and ends c(k,m) = T(bytes(k..m-1)) later. So
 *     E(k) = min over m of  max(E(m), r(k)) + c(k,m).
 * Proof that this is the optimum over contiguous plans: the plan of m..L-1
 * inside any plan of k..L-1 is followed by messages that never affect it
 * (messages go one at a time in launch order, each depending only on the
 * previous end), and the end of the plan of k..L-1 is non-decreasing in the
 * end of its plan of m..L-1. Replacing that prefix plan by one ending at
 * E(m) therefore never makes the total later, so some optimal plan uses an
 * optimal prefix for its last split, and induction on L-k gives E(k). The
 * answer is E(0), in O(L^2) time and O(L) memory. The argument uses
 * nothing of T but that it is a non-negative function of the group, so it
 * holds for measured curves (gs_cost_curve) as for T(M) = a + b*M.
 * Contiguity loses nothing when T(M) = a + b*M: for any plan (any partition, any order) with
 * messages 1..n, let R(g) be the latest ready time among messages 1..g. Its
 * end is max over g of R(g) + sum_{h>=g} c(h) (a FIFO chain), with
 * c(h) = a + b*bytes(h). The contiguous plan whose g-th group is the tensors
 * ready by R(g) and not in earlier groups (empty groups dropped) has, for
 * each g, a ready time <= R(g), no more messages from g on, and from g on
 * only tensors ready after R(g-1), none of which the original plan sent
 * before g, hence no more bytes; so it ends no later. (Under a measured
 * curve, fewer bytes in fewer messages need not cost less in sum, so there
 * the optimum is over contiguous plans, which are the plans the engine
 * runs.) Ties between m keep the
 * largest group (m scanned from L down, strict improvement).
 */
size_t plan_optimal_starts(const plan_ctx *ctx, const gs_cost_curve *cost,
                           size_t *starts) {
  size_t L = ctx->L;
  double *E = gs_malloc((L + 1) * sizeof(double));
  size_t *next = gs_malloc((L + 1) * sizeof(size_t));
  if (E == NULL || next == NULL) {
    gs_free(E);
    gs_free(next);
    return 0;
  }
  E[L] = -INFINITY;
  for (size_t k = L; k-- > 0;) {
    double r = ctx->ready[k];
    const uint64_t base = ctx->bytes_before[k];
    /* E is non-increasing in m (dropping tensor m from a plan of m..L-1
     * leaves no message later, T being non-decreasing), so the m with
     * E(m) <= r(k) form a suffix m0..L, where the value r(k) + c(k,m) grows
     * with m: m0 is the best of them (with the largest m of equal value,
     * the tie rule of a scan from L down). Below m0 the value is at least
     * E(m), which only grows as m falls: the scan stops once E(m) reaches
     * the best value. The result is that of the full scan, in far fewer
     * steps. */
    size_t lo = k + 1, hi = L;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (E[mid] <= r) hi = mid;
      else lo = mid + 1;
    }
    int hint = cost->npoints;
    size_t best_m = lo;
    double best = GS_MAX(E[lo], r) + plan_msg_time_hint(cost, ctx->bytes_before[lo] - base,
                                                        &hint);
    while (best_m < L && GS_MAX(E[best_m + 1], r) +
                                 plan_msg_time_hint(cost, ctx->bytes_before[best_m + 1] - base,
                                                    &hint) == best)
      best_m++;
    for (size_t m = lo - 1; m > k && E[m] < best; m--) {
      double v = GS_MAX(E[m], r) +
                 plan_msg_time_hint(cost, ctx->bytes_before[m] - base, &hint);
      if (v < best) {
        best = v;
        best_m = m;
      }
    }
    E[k] = best;
    next[k] = best_m;
  }
  /* next[] walks the plan from tensor 0 (the last group launched); write the
   * group starts, then reverse them into launch order. */
  size_t G = 0;
  for (size_t k = 0; k < L; k = next[k]) starts[G++] = k;
  for (size_t g = 0; g < G / 2; g++) {
    size_t t = starts[g];
    starts[g] = starts[G - 1 - g];
    starts[G - 1 - g] = t;
  }
  gs_free(E);
  gs_free(next);
  return G;
}

/* ---- Plans --------------------------------------------------------------- */

void gs_plan_free(gs_plan *plan) {
  if (plan == NULL) return;
  gs_free(plan->tensors);
  gs_free(plan->offsets);
  gs_free(plan);
}

static gs_plan *plan_from_starts(size_t L, const size_t *starts, size_t G) {
  gs_plan *pl = gs_calloc(1, sizeof *pl);
  if (pl == NULL) return NULL;
  pl->tensors = gs_malloc(L * sizeof(size_t));
  pl->offsets = gs_malloc((G + 1) * sizeof(size_t));
  if (pl->tensors == NULL || pl->offsets == NULL) {
    gs_plan_free(pl);
    return NULL;
  }
  pl->ntensors = L;
  pl->ngroups = G;
  size_t n = 0, hi = L; /* group g covers starts[g] .. hi-1 */
  for (size_t g = 0; g < G; g++) {
    pl->offsets[g] = n;
    for (size_t i = starts[g]; i < hi; i++) pl->tensors[n++] = i;
    hi = starts[g];
  }
  pl->offsets[G] = n;
  return pl;
}

gs_status gs_plan_check(const gs_plan *plan, size_t ntensors) {
  if (plan == NULL) return gs_error(GS_ERR_INVALID_ARG, "plan check: NULL plan");
  if (plan->ntensors != ntensors || plan->ngroups < 1 || plan->offsets[0] != 0 ||
      plan->offsets[plan->ngroups] != ntensors)
    return gs_error(GS_ERR_INVALID_ARG,
                    "plan check: %zu groups over %zu tensors, expected to cover "
                    "%zu tensors", plan->ngroups, plan->ntensors, ntensors);
  size_t hi = ntensors; /* the next group must end at hi-1 */
  for (size_t g = 0; g < plan->ngroups; g++) {
    size_t o = plan->offsets[g], e = plan->offsets[g + 1];
    if (e <= o)
      return gs_error(GS_ERR_INVALID_ARG, "plan check: group %zu is empty", g);
    if (plan->tensors[e - 1] + 1 != hi)
      return gs_error(GS_ERR_INVALID_ARG, "plan check: group %zu ends at tensor "
                      "%zu, expected %zu (launch order)", g, plan->tensors[e - 1],
                      hi - 1);
    for (size_t k = o + 1; k < e; k++)
      if (plan->tensors[k] != plan->tensors[k - 1] + 1)
        return gs_error(GS_ERR_INVALID_ARG, "plan check: group %zu is not a "
                        "contiguous ascending run at tensor %zu", g,
                        plan->tensors[k]);
    hi = plan->tensors[o];
  }
  if (hi != 0)
    return gs_error(GS_ERR_INVALID_ARG, "plan check: tensors 0..%zu not covered",
                    hi - 1);
  return GS_OK;
}

/* Validates a grouping given as tensors/offsets: every index in range and
 * used exactly once. */
static gs_status check_grouping(size_t L, const size_t *tensors,
                                const size_t *offsets, size_t ngroups) {
  if (tensors == NULL || offsets == NULL || ngroups == 0)
    return gs_error(GS_ERR_INVALID_ARG, "plan predict: no groups");
  if (offsets[0] != 0 || offsets[ngroups] != L)
    return gs_error(GS_ERR_INVALID_ARG, "plan predict: offsets cover %zu..%zu, "
                    "expected 0..%zu", offsets[0], offsets[ngroups], L);
  unsigned char *seen = gs_calloc(L, 1);
  if (seen == NULL) return GS_ERR_NOMEM;
  gs_status st = GS_OK;
  for (size_t g = 0; g < ngroups && st == GS_OK; g++) {
    if (offsets[g + 1] <= offsets[g]) {
      st = gs_error(GS_ERR_INVALID_ARG, "plan predict: group %zu is empty", g);
      break;
    }
    for (size_t k = offsets[g]; k < offsets[g + 1]; k++) {
      size_t i = tensors[k];
      if (i >= L || seen[i]) {
        st = gs_error(GS_ERR_INVALID_ARG, "plan predict: tensor %zu %s", i,
                      i >= L ? "out of range" : "in two groups");
        break;
      }
      seen[i] = 1;
    }
  }
  gs_free(seen);
  return st;
}

gs_status gs_plan_predict(const gs_profile *profile, const gs_plan_cost *cost,
                          const size_t *tensors, const size_t *offsets,
                          size_t ngroups, double *iter_s) {
  if (iter_s == NULL) return gs_error(GS_ERR_INVALID_ARG, "plan predict: NULL output");
  plan_ctx ctx;
  GS_CHECK(plan_ctx_init(&ctx, profile, cost));
  gs_status st = check_grouping(ctx.L, tensors, offsets, ngroups);
  if (st == GS_OK) {
    /* Eq. 7 with merged layers: each message starts at the later of the
     * previous message's end and its last-ready tensor. */
    double end = -INFINITY;
    for (size_t g = 0; g < ngroups; g++) {
      size_t lowest = ctx.L;
      uint64_t bytes = 0;
      for (size_t k = offsets[g]; k < offsets[g + 1]; k++) {
        lowest = GS_MIN(lowest, tensors[k]);
        bytes += plan_bytes(&ctx, tensors[k], tensors[k]);
      }
      end = GS_MAX(end, ctx.ready[lowest]) + plan_msg_time(&cost->ar, bytes);
    }
    *iter_s = end;
  }
  plan_ctx_free(&ctx);
  return st;
}

/* Makes the groups of one (non-auto) policy as starts. */
static gs_status policy_starts(const plan_ctx *ctx, const gs_plan_policy *pol,
                               size_t *starts, size_t *G) {
  const gs_plan_cost *c = ctx->cost;
  size_t L = ctx->L;
  switch (pol->kind) {
    case GS_PLAN_WFBP:
      for (size_t g = 0; g < L; g++) starts[g] = L - 1 - g;
      *G = L;
      return GS_OK;
    case GS_PLAN_SINGLE:
      starts[0] = 0;
      *G = 1;
      return GS_OK;
    case GS_PLAN_BUCKET:
      *G = plan_threshold_starts(ctx, pol->first_mb * 1048576.0,
                                 pol->bucket_mb * 1048576.0, starts);
      return GS_OK;
    case GS_PLAN_MGWFBP:
      *G = plan_mgwfbp_starts(ctx, &c->ar, starts);
      return GS_OK;
    case GS_PLAN_OPTIMAL:
      *G = plan_optimal_starts(ctx, &c->ar, starts);
      return *G ? GS_OK : GS_ERR_NOMEM;
    case GS_PLAN_DEAR:
      return plan_dear_starts(ctx, starts, G);
    default:
      return gs_error(GS_ERR_INVALID_ARG, "plan: bad policy %d", (int)pol->kind);
  }
}

/* One non-auto policy's plan with its prediction. */
static gs_status make_one(const plan_ctx *ctx, const gs_plan_policy *pol,
                          size_t *starts, gs_plan **out) {
  size_t G = 0;
  GS_CHECK(policy_starts(ctx, pol, starts, &G));
  gs_plan *pl = plan_from_starts(ctx->L, starts, G);
  if (pl == NULL) return GS_ERR_NOMEM;
  pl->policy = *pol;
  pl->chosen = pol->kind;
  gs_status st;
  if (pol->kind == GS_PLAN_DEAR) {
    st = gs_plan_predict_dear(ctx->profile, ctx->cost, pl->tensors, pl->offsets,
                              G, &pl->predicted_iter_s, &pl->dear_forward_end_s,
                              &pl->dear_ag_wait_s);
  } else {
    st = gs_plan_predict(ctx->profile, ctx->cost, pl->tensors, pl->offsets, G,
                         &pl->predicted_iter_s);
  }
  if (st != GS_OK) {
    gs_plan_free(pl);
    return st;
  }
  *out = pl;
  return GS_OK;
}

gs_status gs_plan_make_policy(const gs_profile *profile, const gs_plan_cost *cost,
                              const gs_plan_policy *policy, gs_plan **out) {
  if (out) *out = NULL;
  if (policy == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "plan: NULL argument");
  if ((unsigned)policy->kind >= GS_PLAN_POLICY_COUNT)
    return gs_error(GS_ERR_INVALID_ARG, "plan: bad policy %d", (int)policy->kind);
  plan_ctx ctx;
  GS_CHECK(plan_ctx_init(&ctx, profile, cost));
  size_t *starts = gs_malloc(ctx.L * sizeof(size_t));
  gs_status st = starts ? GS_OK : GS_ERR_NOMEM;
  if (st == GS_OK && policy->kind != GS_PLAN_AUTO) {
    st = make_one(&ctx, policy, starts, out);
  } else if (st == GS_OK) {
    /* auto: every other policy (bucket with DDP's defaults); ties go to the
     * first in enum order, so the simpler plan wins. */
    gs_plan *best = NULL;
    for (int k = 0; k < GS_PLAN_AUTO && st == GS_OK; k++) {
      gs_plan_policy pk = {(gs_plan_policy_kind)k, 25.0, 1.0};
      gs_plan *pl = NULL;
      st = make_one(&ctx, &pk, starts, &pl);
      if (st != GS_OK) break;
      if (best == NULL || pl->predicted_iter_s < best->predicted_iter_s) {
        gs_plan_free(best);
        best = pl;
      } else {
        gs_plan_free(pl);
      }
    }
    if (st == GS_OK) {
      best->policy = *policy;
      *out = best;
    } else {
      gs_plan_free(best);
    }
  }
  gs_free(starts);
  plan_ctx_free(&ctx);
  return st;
}

gs_status gs_plan_make(const gs_profile *profile, const gs_plan_cost *cost,
                       const char *policy_spec, gs_plan **out) {
  if (out) *out = NULL;
  gs_plan_policy pol;
  GS_CHECK(gs_plan_policy_parse(policy_spec, &pol));
  return gs_plan_make_policy(profile, cost, &pol, out);
}
