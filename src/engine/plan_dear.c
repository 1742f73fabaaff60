/*
 * DeAR (Zhang, Shi, Chu, Wang, Li & Liu, ICDCS 2023): each fused group's
 * all-reduce is split into a reduce-scatter, run during backward, and an
 * all-gather, run during the next forward pass just before the group's
 * layers need their updated parameters. The model follows the published
 * code (lzhangbv/dear_pytorch, dear/dopt_rsag.py): the step waits for every
 * reduce-scatter and starts the all-gather of the first group; a forward
 * pre-hook at a group's first module waits for that group's all-gather and
 * launches the next group's (one group of look-ahead).
 *
 * DeAR fuses to a fixed 25 MB threshold or tunes it by Bayesian optimisation
 * over 1-256 MB. Here the grouping is chosen by the model itself: a search
 * over candidate groupings (every power-of-2^(1/4) threshold, the optimal
 * all-reduce plan, the optimal and MG-WFBP plans under the reduce-scatter
 * cost, one message per tensor, a single message), then a local search that
 * merges adjacent groups and moves group boundaries while the predicted time
 * falls. It is not claimed optimal: the objective couples the forward and
 * backward phases through one grouping.
 */
#include <math.h>
#include <string.h>

#include "plan_internal.h"

double plan_dear_eval(const plan_ctx *ctx, const size_t *starts, size_t G,
                      double *forward_end_s, double *ag_wait_s) {
  const gs_plan_cost *c = ctx->cost;
  size_t L = ctx->L;
  /* Forward phase: groups in forward order are launch-order groups G-1..0.
   * Group g covers starts[g] .. hi(g)-1 with hi(0) = L, hi(g) = starts[g-1]. */
  double fwd_end = 0.0, wait = 0.0;
  double ag_end = plan_msg_time(&c->ag,
                                plan_bytes(ctx, starts[G - 1],
                                           (G >= 2 ? starts[G - 2] : L) - 1));
  for (size_t h = G; h-- > 0;) {
    size_t lo = starts[h], hi = h > 0 ? starts[h - 1] : L;
    double fstart = GS_MAX(fwd_end, ag_end); /* waits for its all-gather */
    wait += fstart - fwd_end;
    if (h > 0) { /* the pre-hook launches the next group's all-gather */
      size_t nlo = starts[h - 1], nhi = h > 1 ? starts[h - 2] : L;
      ag_end = fstart + plan_msg_time(&c->ag, plan_bytes(ctx, nlo, nhi - 1));
    }
    fwd_end = fstart + (ctx->fwd_before[hi] - ctx->fwd_before[lo]);
  }
  /* Backward phase: reduce-scatters in launch order, one at a time. Every
   * all-gather has ended before the last group's forward began, so the
   * channel is free. */
  double end = -INFINITY;
  for (size_t g = 0; g < G; g++) {
    size_t lo = starts[g], hi = g > 0 ? starts[g - 1] : L;
    double ready = fwd_end + ctx->bwd_after[lo];
    end = GS_MAX(end, ready) +
          plan_msg_time(&c->rs, plan_bytes(ctx, lo, hi - 1));
  }
  if (forward_end_s) *forward_end_s = fwd_end;
  if (ag_wait_s) *ag_wait_s = wait;
  return end;
}

gs_status gs_plan_predict_dear(const gs_profile *profile, const gs_plan_cost *cost,
                               const size_t *tensors, const size_t *offsets,
                               size_t ngroups, double *iter_s,
                               double *forward_end_s, double *ag_wait_s) {
  plan_ctx ctx;
  GS_CHECK(plan_ctx_init(&ctx, profile, cost));
  gs_status st = GS_OK;
  size_t *starts = NULL;
  gs_plan view = {.ntensors = ctx.L, .ngroups = ngroups,
                  .tensors = (size_t *)tensors, .offsets = (size_t *)offsets};
  if (tensors == NULL || offsets == NULL || ngroups == 0)
    st = gs_error(GS_ERR_INVALID_ARG, "dear predict: no groups");
  else
    st = gs_plan_check(&view, ctx.L);
  if (st == GS_OK) {
    starts = gs_malloc(ngroups * sizeof(size_t));
    if (starts == NULL) st = GS_ERR_NOMEM;
  }
  if (st == GS_OK) {
    for (size_t g = 0; g < ngroups; g++) starts[g] = tensors[offsets[g]];
    double t = plan_dear_eval(&ctx, starts, ngroups, forward_end_s, ag_wait_s);
    if (iter_s) *iter_s = t;
  }
  gs_free(starts);
  plan_ctx_free(&ctx);
  return st;
}

/* The most groups the local search evaluates in all: above what it needs for
 * a whole pass of any plan of up to 2,000 groups (a third of it under
 * measured curves, whose evaluation costs more: there up to 1,150). */
#define DEAR_REFINE_BUDGET 1.3e7

/* Keeps the better of a candidate and the best so far. */
static void consider(const plan_ctx *ctx, const size_t *cand, size_t n,
                     size_t *best, size_t *best_n, double *best_t) {
  double t = plan_dear_eval(ctx, cand, n, NULL, NULL);
  if (t < *best_t) {
    *best_t = t;
    *best_n = n;
    memcpy(best, cand, n * sizeof(size_t));
  }
}

/* Local search: merge two adjacent groups, or move a boundary by one tensor,
 * whenever that lowers the predicted time; at most `passes` sweeps, and at
 * most `budget` groups evaluated in all (each evaluation of a plan of G
 * groups costs G). */
static void refine(const plan_ctx *ctx, size_t *s, size_t *n, double *t,
                   size_t *tmp, int passes, double budget) {
  double spent = 0;
  /* A group under measured curves costs about three times as much. */
  if (ctx->cost->rs.npoints > 0 || ctx->cost->ag.npoints > 0) budget /= 3;
  for (int pass = 0; pass < passes && spent <= budget; pass++) {
    int improved = 0;
    for (size_t g = 0; g + 1 < *n && spent <= budget; g++) { /* remove start g */
      spent += (double)*n;
      memcpy(tmp, s, g * sizeof(size_t));
      memcpy(tmp + g, s + g + 1, (*n - g - 1) * sizeof(size_t));
      double v = plan_dear_eval(ctx, tmp, *n - 1, NULL, NULL);
      if (v < *t) {
        *t = v;
        memcpy(s, tmp, (*n - 1) * sizeof(size_t));
        (*n)--;
        improved = 1;
        if (g > 0) g--;
      }
    }
    for (size_t g = 0; g + 1 < *n && spent <= budget; g++) { /* s[g] in (s[g+1], hi) */
      size_t hi = g > 0 ? s[g - 1] : ctx->L;
      for (int d = -1; d <= 1; d += 2) {
        size_t old = s[g];
        size_t nv = (size_t)((long long)old + d);
        if (nv <= s[g + 1] || nv >= hi) continue;
        spent += (double)*n;
        s[g] = nv;
        double v = plan_dear_eval(ctx, s, *n, NULL, NULL);
        if (v < *t) {
          *t = v;
          improved = 1;
        } else {
          s[g] = old;
        }
      }
    }
    if (!improved) break;
  }
}

gs_status plan_dear_starts(const plan_ctx *ctx, size_t *starts, size_t *ngroups) {
  size_t L = ctx->L;
  const gs_plan_cost *c = ctx->cost;
  size_t *cand = gs_malloc(L * sizeof(size_t));
  size_t *tmp = gs_malloc(L * sizeof(size_t));
  if (cand == NULL || tmp == NULL) {
    gs_free(cand);
    gs_free(tmp);
    return GS_ERR_NOMEM;
  }
  size_t best_n = 1;
  starts[0] = 0; /* a single message */
  double best_t = plan_dear_eval(ctx, starts, 1, NULL, NULL);
  size_t n;
  for (size_t g = 0; g < L; g++) cand[g] = L - 1 - g; /* one per tensor */
  consider(ctx, cand, L, starts, &best_n, &best_t);
  /* Thresholds: a plan equal to the previous candidate (every threshold
   * below the smallest tensor gives one per tensor) would evaluate the same
   * and is skipped, so the evaluations add up to O(L) per factor of 2 in
   * sizes, not O(L) per threshold. `tmp` holds the previous candidate. */
  size_t prev_n = L;
  memcpy(tmp, cand, L * sizeof(size_t));
  double total = (double)ctx->bytes_before[L];
  for (double th = 1024.0; th < total * 2; th *= 1.189207115002721) { /* 2^(1/4) */
    n = plan_threshold_starts(ctx, th, th, cand);
    if (n == prev_n && memcmp(cand, tmp, n * sizeof(size_t)) == 0) continue;
    consider(ctx, cand, n, starts, &best_n, &best_t);
    size_t *t = tmp;
    tmp = cand;
    cand = t;
    prev_n = n;
  }
  n = plan_optimal_starts(ctx, &c->ar, cand);
  if (n) consider(ctx, cand, n, starts, &best_n, &best_t);
  n = plan_optimal_starts(ctx, &c->rs, cand);
  if (n) consider(ctx, cand, n, starts, &best_n, &best_t);
  n = plan_mgwfbp_starts(ctx, &c->rs, cand);
  consider(ctx, cand, n, starts, &best_n, &best_t);
  /* A pass costs O(G^2); keep the search within a few million steps so a
   * 1,000-tensor plan stays in milliseconds. Up to 2,000 groups that allows
   * at least one whole pass (at most 3 * 4e6 groups evaluated); past that
   * the budget stops the search part way through its first pass, so that
   * planning stays bounded (100,000 groups: one pass would be 3e10). */
  double work = (double)best_n * (double)best_n + 1.0;
  int passes = work * 16 <= 4e6 ? 16 : (int)GS_MAX(1.0, 4e6 / work);
  refine(ctx, starts, &best_n, &best_t, tmp, passes, DEAR_REFINE_BUDGET);
  gs_free(cand);
  gs_free(tmp);
  *ngroups = best_n;
  return GS_OK;
}
