/*
 * gradsync's merge planner: model profiles, communication plans and their
 * predicted iteration time.
 *
 * A plan groups a model's gradient tensors into messages. Every group is a
 * contiguous run of tensor indices (profile order, 0 next to the input), and
 * groups are listed in launch order, which is backward order: the group
 * holding the last tensor goes first. docs/PLANNING.md describes the model
 * and the policies in full.
 *
 * The model of wfbp, single, bucket, mgwfbp and optimal (MG-WFBP, Shi, Chu &
 * Li, TPDS 2021, Eqs. 6-8): tensor i's gradient is ready at
 *   r(i) = forward_s + sum_{j >= i} backward_s[j];
 * messages are sent one at a time in launch order; a message starts when its
 * last tensor is ready and the previous message has ended, and takes
 * T(bytes); the predicted iteration time is the end of the last message.
 * T is a + b * bytes for costs given as a and b (gradsync plan) and the
 * measured curve of the engine's own messages at run time (gs_cost_curve:
 * piecewise linear through measured points, affine beyond them).
 * gs_plan_predict is the one implementation of that model.
 *
 * Costs are never computed here: gs_plan_cost_from_net takes them from the
 * cost module (gradsync/cost.h).
 */
#ifndef GRADSYNC_PLAN_H
#define GRADSYNC_PLAN_H

#include <stddef.h>

#include "gradsync/compress.h"
#include "gradsync/core.h"
#include "gradsync/cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Model profiles ------------------------------------------------------ */

typedef struct gs_profile_tensor {
  char *name;         /* e.g. "layer1.0.conv1.weight" */
  size_t numel;       /* number of elements, > 0 */
  gs_dtype dtype;     /* element type ("dtype" in JSON, default f32) */
  double backward_s;  /* time from the previous gradient (tensor i+1) being
                         ready to this one being ready, >= 0 */
} gs_profile_tensor;

typedef struct gs_profile {
  char *name;                 /* model name */
  int batch_size;             /* per-worker batch the times were measured at
                                 (0 if the file does not say) */
  char *device;               /* where the times come from ("" if absent) */
  char *source;               /* how the numbers were obtained ("" if absent) */
  double forward_s;           /* forward pass, >= 0 */
  size_t ntensors;            /* >= 1 */
  gs_profile_tensor *tensors; /* forward order: index 0 next to the input */
} gs_profile;

/* Reads a profile (JSON, docs/PLANNING.md "Profiles"). Required: "name",
 * "forward_s", "tensors" (non-empty), and per tensor "name", "numel" and
 * "backward_s"; optional: "batch_size", "device", "source", "dtype". Errors
 * (GS_ERR_IO, GS_ERR_PARSE) name the file, the field and what was expected,
 * e.g. "profiles/x.json: tensors[3].numel: expected a positive integer".
 * On success *out is a new profile owned by the caller, to be released with
 * gs_profile_free; on failure *out is NULL. */
gs_status gs_profile_load(const char *path, gs_profile **out);

/* The same from JSON text in memory; `origin` names it in error messages. */
gs_status gs_profile_parse(const char *json, const char *origin,
                           gs_profile **out);

/* Releases a profile from gs_profile_load or gs_profile_parse (NULL is a
 * no-op). Profiles the caller built itself are the caller's to free. */
void gs_profile_free(gs_profile *profile);

/* Bytes of tensor i's gradient (numel * dtype size). */
size_t gs_profile_tensor_bytes(const gs_profile *profile, size_t i);

/* One profiled step folded into running sums, as a profiler measures a
 * profile: ready_ns[i] is when gradient i (forward order, n >= 1 of them)
 * became final, start_ns when the step began. A gradient's ready time is
 * taken as the latest of its own and every later one's (autograd may
 * reorder them); backward_s[i] gains the gap from the next one up to it
 * (backward_s[n - 1] nothing). Returns the time from start_ns to the first
 * gradient (the forward, with the last tensor's backward), in seconds. The
 * engine's profiler and a parameter-server worker's call it. */
double gs_profile_fold_step(const uint64_t *ready_ns, size_t n, uint64_t start_ns,
                            double *backward_s);

/* Checks a profile built by the caller as gs_profile_load checks a file. */
gs_status gs_profile_validate(const gs_profile *profile);

/* The profile as JSON text in the format gs_profile_parse reads (one line;
 * the caller frees it with gs_free). NULL without memory or for a NULL
 * profile. */
char *gs_profile_to_json(const gs_profile *profile);

/* ---- Costs ----------------------------------------------------------------- */

/* Costs of one message of M bytes, in seconds, each evaluated with
 * gs_cost_curve_eval: without points a curve is the line a + b*M, which for
 * the all-reduce is MG-WFBP's T_ar (TPDS 2021, Eq. 10); with points it is
 * the measured curve. DeAR's reduce-scatter and all-gather costs take M as
 * the fused group's full size in both. mgwfbp's merge test (Algorithm 1)
 * reads the all-reduce's start-up cost as ar.a. */
typedef struct gs_plan_cost {
  gs_cost_curve ar;  /* all-reduce */
  gs_cost_curve rs;  /* reduce-scatter (dear) */
  gs_cost_curve ag;  /* all-gather (dear) */
} gs_plan_cost;

/* Costs given directly as T(M) = a + b*M. Reduce-scatter and all-gather are
 * each taken as half an all-reduce, a/2 + (b/2)*M, which is exact for the
 * ring all-reduce without reduction cost and a documented approximation
 * otherwise. a and b must be finite and >= 0. */
gs_status gs_plan_cost_from_ab(double a, double b, gs_plan_cost *out);

/* Costs from the cost module for `topo` and a network's parameters: the
 * all-reduce's a and b from gs_cost_allreduce_linear with `algo`
 * (GS_ALGO_AUTO: the best at large sizes); reduce-scatter from the ring
 * (the split DeAR uses) and all-gather from the best algorithm, both as
 * read from gs_cost_reduce_scatter / gs_cost_allgather, each message with
 * the engine's own cost per message (gs_cost_message). For a calibrated
 * preset (params->ncalib > 0) and GS_ALGO_AUTO, ar is the curve of the
 * fastest algorithm at every power of two from 64 B to 4 GiB (as the
 * communicator chooses per message), with a the smallest message's time
 * and b the large messages' slope. */
gs_status gs_plan_cost_from_net(const gs_cost_params *params, gs_cost_topo topo,
                                gs_algo algo, gs_plan_cost *out);

/* The same costs, with the all-reduce's measured points where `params`
 * carries them (gs_cost_fit_algo, `gradsync bench --cost-out`): ar becomes
 * the curve through the sizes measured, each taking the measured time of
 * `algo` there (GS_ALGO_AUTO: of the fastest algorithm at that size, as
 * the communicator chooses), made non-decreasing by a running maximum; a
 * and b stay gs_plan_cost_from_net's (b is the slope beyond the last
 * point). Reduce-scatter and all-gather then take half of that curve each,
 * as gs_plan_cost_from_ab does. Without measured points (a preset, or an
 * algorithm never calibrated) the result is gs_plan_cost_from_net's. Links
 * whose time is not affine in the size (TCP windows, a token bucket) are
 * priced at every measured size instead of by one line; `gradsync
 * simulate --cost` prices its messages so. */
gs_status gs_plan_cost_measured(const gs_cost_params *params, gs_cost_topo topo,
                                gs_algo algo, gs_plan_cost *out);

/* ---- Policies ---------------------------------------------------------------- */

typedef enum {
  GS_PLAN_WFBP = 0,  /* one message per tensor */
  GS_PLAN_SINGLE,    /* one message after backward */
  GS_PLAN_BUCKET,    /* PyTorch DDP's static buckets */
  GS_PLAN_MGWFBP,    /* MG-WFBP, TPDS 2021 Algorithm 1 */
  GS_PLAN_OPTIMAL,   /* the exact minimum of the model (dynamic program;
                        among plans that tie to the last bit, large-model
                        plans may pick another than small ones) */
  GS_PLAN_DEAR,      /* DeAR, ICDCS 2023: reduce-scatter + all-gather */
  GS_PLAN_AUTO,      /* the policy with the smallest predicted time */
  GS_PLAN_POLICY_COUNT
} gs_plan_policy_kind;

typedef struct gs_plan_policy {
  gs_plan_policy_kind kind;
  double bucket_mb;  /* GS_PLAN_BUCKET: cap in MiB (default 25) */
  double first_mb;   /* GS_PLAN_BUCKET: first bucket's cap in MiB (default 1) */
} gs_plan_policy;

/* Parses "wfbp", "single", "bucket[:<MB>[,first=<MB>]]", "mgwfbp",
 * "optimal", "dear" or "auto" (case-sensitive). */
gs_status gs_plan_policy_parse(const char *spec, gs_plan_policy *out);

/* The policy's name as parse accepts it ("bucket" without its sizes). */
const char *gs_plan_policy_name(gs_plan_policy_kind kind);

/* ---- Plans ------------------------------------------------------------------- */

typedef struct gs_plan {
  gs_plan_policy policy;   /* the policy asked for */
  gs_plan_policy_kind chosen; /* the policy that made the groups (differs
                                 from policy.kind only for auto) */
  size_t ntensors;
  size_t ngroups;
  /* Group g holds tensors[offsets[g]] .. tensors[offsets[g+1]-1], in profile
   * order (ascending); groups are in launch order (descending indices). */
  size_t *tensors;         /* ntensors entries */
  size_t *offsets;         /* ngroups + 1 entries, offsets[0] = 0 */
  double predicted_iter_s; /* the model's iteration time for this plan */
  /* dear only (0 otherwise): in an iteration that starts when the previous
   * one's last reduce-scatter ends, the end of the forward pass (delayed by
   * all-gathers it waits for) and the time forward waited on all-gathers. */
  double dear_forward_end_s;
  double dear_ag_wait_s;
  /* Compression (gs_plan_make_xchg): per group in launch order, -1 when the
   * group is a dense all-reduce, else the gs_xchg it is sent compressed
   * through. NULL: every group is dense (gs_plan_make never sets it). */
  int *group_xchg;
} gs_plan;

/* Makes the plan of `policy_spec` (see gs_plan_policy_parse) for a profile
 * under `cost`. *out is a new plan owned by the caller (gs_plan_free); the
 * plan keeps no pointer to the profile or the cost. Planning time is bounded
 * for any costs: O(L) for wfbp, single, bucket and mgwfbp, O(P * L) for
 * optimal with a curve of P linear pieces (P = 1 for a + b*M, at most
 * GS_COST_CURVE_POINTS + 2), and dear and auto a bounded number of those
 * plus a local search on a fixed budget; 100,000 tensors plan in well
 * under a second (bench/results/plan_scaling.md). Profiles whose total
 * size exceeds 2^53 bytes are refused (GS_ERR_INVALID_ARG). */
gs_status gs_plan_make(const gs_profile *profile, const gs_plan_cost *cost,
                       const char *policy_spec, gs_plan **out);

/* The same from a parsed policy. */
gs_status gs_plan_make_policy(const gs_profile *profile, const gs_plan_cost *cost,
                              const gs_plan_policy *policy, gs_plan **out);

void gs_plan_free(gs_plan *plan);

/* The model of wfbp, single, bucket, mgwfbp and optimal (see the top of this
 * file) for any grouping: `ngroups` groups in launch order, group g being
 * tensors[offsets[g]] .. tensors[offsets[g+1]-1]; every tensor must appear
 * exactly once (groups need not be contiguous here: a group is ready when its
 * last-ready tensor is). Writes the end of the last message to *iter_s. */
gs_status gs_plan_predict(const gs_profile *profile, const gs_plan_cost *cost,
                          const size_t *tensors, const size_t *offsets,
                          size_t ngroups, double *iter_s);

/* DeAR's model for contiguous groups in launch order (docs/PLANNING.md):
 * one iteration starts when the previous one's last reduce-scatter ends.
 * Forward: tensor i takes f(i) = forward_s * backward_s[i] / sum(backward_s)
 * (forward_s / L each if backward is all zero), in profile order. The
 * all-gather of the group holding tensor 0 starts at 0; the forward of a
 * group's first tensor waits for that group's all-gather, and when it starts
 * the all-gather of the next group (forward order) is launched (DeAR's
 * one-group look-ahead). Backward starts when forward ends, gradients become
 * ready as in the all-reduce model, and each group's reduce-scatter starts
 * when its last tensor is ready and the previous reduce-scatter has ended.
 * The iteration time is the end of the last reduce-scatter. Any of the three
 * outputs may be NULL. */
gs_status gs_plan_predict_dear(const gs_profile *profile, const gs_plan_cost *cost,
                               const size_t *tensors, const size_t *offsets,
                               size_t ngroups, double *iter_s,
                               double *forward_end_s, double *ag_wait_s);

/* Checks that a plan's groups are contiguous, in launch order, and cover
 * every tensor of a profile with `ntensors` tensors exactly once. */
gs_status gs_plan_check(const gs_plan *plan, size_t ntensors);

/* ---- Compression inside the plan ------------------------------------------
 *
 * A group can be sent compressed: its message then costs the compressed
 * exchange's curve of the dense size M (gs_cost_compressed gives one from
 * a compressor's figures) instead of the dense all-reduce's. The groups
 * are planned under the lower envelope of the alternatives' affine costs
 * (each curve's a + b*M), so a policy merges as it would for the cheaper
 * exchange at each size; then each group takes the alternative whose curve
 * is fastest at its size (dense on ties) and the plan's time is predicted
 * with those choices. DeAR's reduce-scatter + all-gather groups stay
 * dense. */

#define GS_PLAN_MAX_XCHG 4

typedef struct gs_plan_xchg {
  int n;          /* alternatives, 0 .. GS_PLAN_MAX_XCHG; 0: dense only */
  int required;   /* 1: every group compressed (dear is then refused, and
                     auto does not consider it); 0: each group dense or
                     compressed, whichever is faster */
  gs_xchg kind[GS_PLAN_MAX_XCHG];
  gs_cost_curve cost[GS_PLAN_MAX_XCHG]; /* time of M dense bytes sent so */
} gs_plan_xchg;

/* gs_plan_make_policy with compressed alternatives (x NULL or x->n == 0:
 * exactly gs_plan_make_policy's plan, group_xchg left NULL). auto compares
 * the policies with their choices made; `allow_dear` 0 leaves dear out of
 * auto (the engine without forward overlap). */
gs_status gs_plan_make_xchg(const gs_profile *profile, const gs_plan_cost *cost,
                            const gs_plan_xchg *x, const gs_plan_policy *policy,
                            int allow_dear, gs_plan **out);

/* The alternatives a compressor offers on a network: with required, its
 * own exchange only (gs_compress_default_xchg: the exchange changes a
 * sparse result, which must not depend on timings); otherwise one per
 * exchange its payloads can travel through (gs_compress_xchg_check). Each
 * is priced at every size M by gs_cost_compressed with the compressor's
 * figures (gs_compress_cost_figures) at the coding rate of M / 4 elements
 * (gs_cost_coding_time of `coding`: measured at the plan's sizes by
 * gs_compress_measure_coding, or one rate, gs_cost_coding_rate). The curve
 * holds the price at 0 and at each measured size, linear between them and
 * beyond the last (one rate: the line a + b*M); its a and b, which the
 * envelope of gs_plan_make_xchg takes, are the price at 0 and the slope
 * beyond the measured sizes: the price of large messages.
 * `dense` (may be NULL) is the dense all-reduce's cost as the planner sees
 * it: params' alpha and beta are then refitted to its line (ring formula,
 * gs_cost_calibrate_allreduce) so that dense and compressed messages are
 * priced on the same network. required: see gs_plan_xchg. */
gs_status gs_plan_xchg_from_compressor(const gs_compressor *c, const gs_cost_coding *coding,
                                       const gs_cost_params *params, gs_cost_topo topo,
                                       const gs_cost_curve *dense, int required,
                                       gs_plan_xchg *out);

/* The one rule between a compression spec (gs_compress_spec_parse) and a
 * policy: a spec that compresses every group (not auto:) cannot be combined
 * with dear, whose reduce-scatter + all-gather groups cannot be sent
 * compressed. GS_ERR_INVALID_ARG naming the spec and the auto:SPEC to use
 * instead; GS_OK for any other pair (z off or automatic, another policy). */
gs_status gs_plan_policy_check_compress(const gs_plan_policy *policy,
                                        const gs_compress_spec *z);

/* gs_plan_predict with a per-group choice (group_xchg[g] = -1: dense, else
 * a kind present in x; group_xchg NULL: all dense). */
gs_status gs_plan_predict_xchg(const gs_profile *profile, const gs_plan_cost *cost,
                               const gs_plan_xchg *x, const size_t *tensors,
                               const size_t *offsets, size_t ngroups,
                               const int *group_xchg, double *iter_s);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_PLAN_H */
