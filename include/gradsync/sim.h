/*
 * gradsync's simulator: a discrete-event simulation of data-parallel
 * training iterations on N workers (docs/SIMULATE.md).
 *
 * What is simulated is what the planner models (gradsync/plan.h), played
 * out event by event on every worker instead of once: each worker runs the
 * profile's forward pass and its backward pass tensor by tensor (optionally
 * with seeded compute jitter, so that stragglers appear); a collective
 * starts once every worker has the group's gradients ready (or, for DeAR's
 * all-gathers, has reached the point that launches it) and the job's one
 * network stream has finished the messages before it in launch order; it
 * takes the time the plan's cost curves give (gs_cost_curve_eval of the
 * all-reduce, reduce-scatter, all-gather or the group's compressed
 * exchange). The groups are a gs_plan made by gs_plan_make /
 * gs_plan_make_xchg, the same code the engine runs; the costs are a
 * gs_plan_cost (and gs_plan_xchg) from the cost module. Nothing here
 * restates a cost formula or a policy: with no jitter, one iteration's
 * simulated time is the planner's prediction (gs_plan_predict,
 * gs_plan_predict_xchg, gs_plan_predict_dear), which the tests check.
 *
 * The event loop keeps one entity per worker plus one for the network
 * stream in a binary heap keyed by (time, entity): O(E log N) for E events
 * (about N * (L + 1) per iteration for L tensors). With one factor per
 * worker and iteration (GS_SIM_SCOPE_ITERATION, also without jitter), the
 * worker of the largest factor is the last to arrive at every message, so
 * worker 0 and that worker stand for all N: O(N) draws and O(L) events per
 * iteration, with results equal to the whole loop's (every_worker).
 */
#ifndef GRADSYNC_SIM_H
#define GRADSYNC_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/core.h"
#include "gradsync/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GS_SIM_JITTER_LOGNORMAL = 0, /* factor exp(mu + sigma z), mean 1, CV cv */
  GS_SIM_JITTER_NORMAL         /* factor max(0, 1 + cv z) */
} gs_sim_jitter;

/* What one jitter factor covers. */
typedef enum {
  GS_SIM_SCOPE_ITERATION = 0, /* one factor per worker and iteration, for all
                                 its operations: a worker slow for a whole
                                 iteration (a straggler) */
  GS_SIM_SCOPE_OPERATION      /* one factor per worker, iteration and
                                 operation (the forward and the backward of
                                 each tensor): independent noise */
} gs_sim_jitter_scope;

typedef struct gs_sim_config {
  int workers;           /* N >= 1 */
  int iters;             /* iterations simulated, >= 1 */
  double jitter_cv;      /* coefficient of variation of compute, 0 .. 10 */
  gs_sim_jitter jitter;  /* distribution of the factor */
  gs_sim_jitter_scope scope; /* what one factor covers */
  uint64_t seed;         /* the factors are a function of (seed, iteration,
                            worker, operation): the same seed gives the same
                            result whatever the event order */
  int trace;             /* 1: keep the spans of the last iteration for
                            worker 0 and the straggler (gs_sim_result.spans) */
  int every_worker;      /* 1: run every worker's events even where two
                            stand for all (scope ITERATION: the tests
                            compare the two, the benchmark times the loop) */
} gs_sim_config;

/* One span of the trace: a compute operation of a worker, or a message on
 * the network stream (worker -1). */
typedef enum {
  GS_SIM_SPAN_FORWARD = 0,  /* forward of tensor `index` */
  GS_SIM_SPAN_BACKWARD,     /* backward of tensor `index` */
  GS_SIM_SPAN_WAIT,         /* a worker waiting for an all-gather (dear) */
  GS_SIM_SPAN_ALLREDUCE,    /* group `index` (launch order), dense */
  GS_SIM_SPAN_COMPRESSED,   /* group `index` sent through exchange `xchg` */
  GS_SIM_SPAN_REDUCE_SCATTER,
  GS_SIM_SPAN_ALLGATHER
} gs_sim_span_kind;

typedef struct gs_sim_span {
  int worker;              /* -1 for the network stream */
  gs_sim_span_kind kind;
  size_t index;            /* tensor (backward), group (messages, dear forward) */
  int xchg;                /* GS_SIM_SPAN_COMPRESSED: the gs_xchg; else -1 */
  double bytes;            /* messages: dense bytes of the group; else 0 */
  double start_s, end_s;   /* from the start of the iteration */
} gs_sim_span;

typedef struct gs_sim_result {
  int workers, iters;
  double iter_s;          /* mean iteration time */
  double iter_min_s, iter_max_s;
  double compute_s;       /* T_1: forward_s + sum backward_s, one worker's
                             iteration without communication or jitter
                             (summed as the workers sum it) */
  double straggler_s;     /* mean over iterations of (the slowest worker's
                             compute time) - T_1: what jitter costs */
  double exposed_comm_s;  /* iter_s - T_1 - straggler_s: the communication
                             not hidden behind the slowest worker's compute */
  double efficiency;      /* T_1 / iter_s: N workers' throughput against N
                             times one worker's (1 = linear scaling) */
  double comm_s;          /* sum of the message times of one iteration */
  size_t messages;        /* per iteration */
  double bytes;           /* dense bytes of those messages (a compressed
                             group counts its dense size) */
  uint64_t events;        /* events processed, all iterations */
  int straggler;          /* the worker whose compute ended last in the last
                             iteration (0 on ties) */
  size_t nspans;          /* with cfg.trace: spans of worker 0, the
                             straggler (if not 0) and the stream */
  gs_sim_span *spans;     /* owned by the result (gs_sim_result_free) */
} gs_sim_result;

/* Simulates cfg->iters iterations of `plan` (from gs_plan_make* for this
 * profile and these costs; x may be NULL when the plan has no compressed
 * groups) on cfg->workers workers. *out is filled (spans owned by it, to be
 * released with gs_sim_result_free). Errors: GS_ERR_INVALID_ARG naming the
 * bad argument (workers, iterations, jitter, a plan that does not cover the
 * profile, a compressed group whose exchange has no cost in x), GS_ERR_NOMEM. */
gs_status gs_sim_run(const gs_profile *profile, const gs_plan_cost *cost,
                     const gs_plan_xchg *x, const gs_plan *plan,
                     const gs_sim_config *cfg, gs_sim_result *out);

/* Releases the spans of a result (the struct itself is the caller's). */
void gs_sim_result_free(gs_sim_result *r);

/* Writes a result's spans as a Chrome trace (the JSON array format that
 * chrome://tracing and Perfetto read): one process per worker traced and
 * one for the network, times in microseconds. `label` names the run
 * (e.g. the policy). GS_ERR_IO naming the path, GS_ERR_INVALID_ARG when the
 * result has no spans. */
gs_status gs_sim_write_trace(const gs_sim_result *r, const gs_profile *profile,
                             const char *label, const char *path);

/* The span kind's name ("forward", "backward", "wait", "allreduce",
 * "compressed", "reduce_scatter", "allgather"). */
const char *gs_sim_span_name(gs_sim_span_kind kind);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_SIM_H */
