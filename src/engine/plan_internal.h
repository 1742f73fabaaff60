/*
 * Internals shared by the planner's files (src/engine/plan*.c). Not installed.
 *
 * Inside the planner a contiguous plan is a list of group starts in launch
 * order: group g covers tensors starts[g] .. end(g), where end(0) = L-1 and
 * end(g) = starts[g-1]-1, so starts[] is strictly decreasing and its last
 * entry is 0.
 */
#ifndef GS_PLAN_INTERNAL_H
#define GS_PLAN_INTERNAL_H

#include <stdint.h>

#include "gradsync/plan.h"
#include "gs_internal.h"

/* A plan computed once per context (see plan_optimal_starts). */
typedef struct plan_memo {
  size_t *starts; /* NULL until computed */
  size_t n;
} plan_memo;

typedef struct plan_ctx {
  const gs_profile *profile;
  const gs_plan_cost *cost;
  size_t L;
  double *ready;      /* ready[i] = forward_s + sum_{j>=i} backward_s[j] */
  double *bwd_after;  /* bwd_after[i] = sum_{j>=i} backward_s[j]; [L] = 0 */
  double *fwd_before; /* fwd_before[i] = forward time of tensors 0..i-1 (dear) */
  uint64_t *bytes_before; /* bytes of tensors 0..i-1; [L] = total */
  plan_memo *memo_ar;     /* the optimal plan under the all-reduce cost */
} plan_ctx;

gs_status plan_ctx_init(plan_ctx *ctx, const gs_profile *p, const gs_plan_cost *c);

/* The auto policy's search, its one home: makes the plan of every policy
 * kind below GS_PLAN_AUTO whose bit is not in skip (1u << kind) with
 * make(arg, ...), bucket with DDP's defaults, and keeps the plan with the
 * smallest predicted iteration; ties go to the first in enum order, so the
 * simpler plan wins. The kept plan's policy becomes *asked (auto). */
typedef gs_status (*plan_make_fn)(void *arg, const gs_plan_policy *policy, gs_plan **out);
gs_status plan_auto_search(plan_make_fn make, void *arg, unsigned skip,
                           const gs_plan_policy *asked, gs_plan **out);
void plan_ctx_free(plan_ctx *ctx);

/* Bytes of tensors lo..hi inclusive. */
static inline uint64_t plan_bytes(const plan_ctx *ctx, size_t lo, size_t hi) {
  return ctx->bytes_before[hi + 1] - ctx->bytes_before[lo];
}

/* The time of one message of `bytes` under a cost curve. Every use of the
 * model goes through this, so that the dynamic program and gs_plan_predict
 * compute bit-identical times. */
static inline double plan_msg_time(const gs_cost_curve *cost, uint64_t bytes) {
  if (cost->npoints == 0) return cost->a + cost->b * (double)bytes;
  return gs_cost_curve_eval(cost, (double)bytes);
}

/* The same, walking from the curve segment *hint (the dynamic program's
 * sizes move monotonically). */
static inline double plan_msg_time_hint(const gs_cost_curve *cost, uint64_t bytes,
                                        int *hint) {
  if (cost->npoints == 0) return cost->a + cost->b * (double)bytes;
  return gs_cost_curve_eval_hint(cost, (double)bytes, hint);
}

/* The optimal plan of the all-reduce model for message costs `cost`
 * (plan.c): writes the starts and returns the number of groups (0: out of
 * memory). The direct scan while it is cheap, else the windows: bounded by
 * O(P * L) for a curve of P linear pieces, whatever the costs. */
size_t plan_optimal_starts(const plan_ctx *ctx, const gs_cost_curve *cost,
                           size_t *starts);
/* The minimum by sliding windows, one per linear piece of the curve,
 * O(P * L) (0: out of memory). */
size_t plan_optimal_starts_windowed(const plan_ctx *ctx, const gs_cost_curve *cost,
                                    size_t *starts);
/* The minimum by the direct scan, O(L^2) at worst; gives up with 0 groups
 * and *over = 1 after about max_steps steps (0: never). 0 groups with
 * *over = 0: out of memory. */
size_t plan_optimal_starts_scan(const plan_ctx *ctx, const gs_cost_curve *cost,
                                size_t *starts, uint64_t max_steps, int *over);
/* MG-WFBP Algorithm 1 with message costs `cost` (plan.c). */
size_t plan_mgwfbp_starts(const plan_ctx *ctx, const gs_cost_curve *cost,
                          size_t *starts);
/* Fuses tensors in forward order, closing a group once it holds at least
 * `first` bytes (the first group) or `cap` bytes (the others), and returns
 * the groups in launch order: PyTorch DDP's bucket assignment (plan.c). */
size_t plan_threshold_starts(const plan_ctx *ctx, double first, double cap,
                             size_t *starts);

/* DeAR's model for contiguous groups (plan_dear.c). */
double plan_dear_eval(const plan_ctx *ctx, const size_t *starts, size_t ngroups,
                      double *forward_end_s, double *ag_wait_s);
/* DeAR's grouping: the best found under plan_dear_eval (plan_dear.c).
 * Writes starts (room for L entries) and returns the number of groups. */
gs_status plan_dear_starts(const plan_ctx *ctx, size_t *starts, size_t *ngroups);

#endif /* GS_PLAN_INTERNAL_H */
