/*
 * gradsync's engine: averages a model's gradients across the ranks of a
 * communicator while the backward pass runs, following a merge plan
 * (gradsync/plan.h) that it makes from its own measurements.
 *
 * Use (docs/ENGINE.md has the full story):
 *
 *   gs_engine_create(comm, &cfg, &e);
 *   for each gradient tensor, in forward order (input side first):
 *     gs_engine_register(e, name, grad_buffer, count, dtype, &id);
 *   each iteration:
 *     forward:  (dear with cfg.forward_overlap) gs_engine_wait_tensor(e, id)
 *               before a layer uses its parameters
 *     backward: gs_engine_grad_ready(e, id) as each gradient is final
 *     gs_engine_wait(e);  then the optimizer step
 *   gs_engine_destroy(e);
 *
 * Threads. The engine runs two background threads: the launch thread packs
 * the tensors of each message into a fusion buffer and issues the collective,
 * in the plan's order; the completion thread waits for the collectives in
 * issue order and scatters the results back. Neither calls MPI: the
 * communicator's progress thread does (the one exception is the stall
 * timeout below, which ends the job through gs_comm_abort from the thread
 * that detects it). grad_ready, wait, wait_tensor and register must all be
 * called from one thread (the training thread).
 *
 * Buffer ownership. The caller owns every registered gradient buffer; the
 * engine never frees one, and the buffer must stay valid until
 * gs_engine_destroy returns. The engine may read and write a tensor's buffer
 * from the gs_engine_grad_ready call for it (or, for a tensor never marked
 * ready, from gs_engine_wait) until its result is in place: for all-reduce
 * plans, until gs_engine_wait returns; for dear with cfg.forward_overlap,
 * until gs_engine_wait_tensor for that tensor returns (or the next
 * iteration's first grad_ready, or gs_engine_destroy). In between the caller
 * must neither write nor read the buffer. Outside those windows the engine
 * never touches it. DeAR's all-gathers that the trainer skipped are issued
 * and finished inside that first grad_ready (or a wait without one), before
 * it returns, so backward may then write every buffer; the tensor that call
 * marks was written before it, so its wait_tensor must have been called: if
 * its average was not yet in place the call fails with GS_ERR_STATE (the
 * engine would have overwritten the new gradient).
 *
 * Unready tensors (PyTorch DDP's unused parameters, as with
 * find_unused_parameters=True): a tensor not marked ready when
 * gs_engine_wait is called contributes zeros on this rank, without its
 * buffer being read, and receives the average like every other tensor.
 *
 * Errors. Every call returns a gs_status with a message in gs_last_error().
 * An error in a background thread (an MPI failure, ranks that registered
 * different tensors) fails the engine: the failing call and every later call
 * return the first error, on every rank that saw it, instead of hanging.
 *
 * Agreement. Where a rank can fail locally before an exchange, every rank
 * learns every rank's status (one all-reduce of a flag per rank) and all
 * fail together: at gs_engine_create (a bad policy or setting, a timeline
 * file that cannot be opened, no memory), at each plan install (a rank that
 * cannot build its plan's fusion buffers) and at the first iteration's
 * registration check. The failing rank returns its own error; the others
 * the same status with a message naming the failing rank(s).
 *
 * Stalls. No engine call waits forever. When the engine makes no progress
 * (no collective completing, no tensor becoming ready, no control exchange
 * ending) for gs_comm_stall_warn_s(comm) seconds (GRADSYNC_STALL_WARN,
 * default 60; 0 never), a call that waits (wait, wait_tensor, the first
 * grad_ready finishing dear's all-gathers, destroy) logs one warning naming
 * the tensors it waits for and their state: not marked ready on this rank,
 * or packed and in a collective that waits for the other ranks (then every
 * tensor of it was ready here, and the rank that has not marked it names it
 * in its own warning). An iteration open on this rank (first grad_ready
 * done, no wait yet) whose next group this rank has not completed warns the
 * same way, naming the tensors it has not marked. After
 * gs_comm_timeout_s(comm) seconds (GRADSYNC_TIMEOUT, default 300; 0 never)
 * without progress the job ends through gs_comm_abort with a message naming
 * the tensors and the stall. So a rank must not leave an iteration open
 * (between its first grad_ready and wait) for longer than the timeout.
 */
#ifndef GRADSYNC_ENGINE_H
#define GRADSYNC_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/comm.h"
#include "gradsync/core.h"
#include "gradsync/compress.h"
#include "gradsync/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gs_engine gs_engine;

typedef struct gs_engine_config {
  /* A planner policy (gs_plan_policy_parse): wfbp, single, bucket[:...],
   * mgwfbp, optimal, dear or auto. NULL means "auto". */
  const char *policy;
  /* Iterations run under wfbp while the profiler measures, before policies
   * that need a profile (mgwfbp, optimal, dear, auto) make their plan.
   * Default 5; 0 plans at once from the communicator's cost model and zero
   * compute times. */
  int warmup_iters;
  /* After the warm-up, every `replan_interval` iterations rank 0 checks the
   * profile and remakes the plan when the current plan's predicted time under
   * the new measurements differs from its prediction by more than
   * `replan_drift` (relative). Defaults 10 and 0.10. */
  int replan_interval;
  double replan_drift;
  /* 1: the trainer calls gs_engine_wait_tensor for each tensor during the
   * next forward, before using its parameters, so dear may finish its
   * all-gathers there. 0 (default): gs_engine_wait finishes every
   * collective, dear runs its all-gathers inside wait, and auto never
   * chooses dear. */
  int forward_overlap;
  /* 0 (default): plans use the affine fit T(M) = a + b*M of the engine's
   * own messages, MG-WFBP's model. 1: plans use their measured curve
   * (gs_cost_curve: one point per power-of-two size class, interpolated),
   * for links whose time is a function of the size but not affine in it.
   * On a token-bucket link a message's time depends on the link's recent
   * idle time as much as on its size, and the curve, measured under the
   * warm-up's schedule, misjudges others (docs/PLANNING.md); hence not the
   * default. GRADSYNC_PLAN_COST=curve sets 1. */
  int cost_curve;
  /* Chrome-trace JSON written at gs_engine_destroy (docs/ENGINE.md), one
   * file per rank ("t.json" -> "t.rank3.json" when there are several).
   * NULL: the GRADSYNC_TIMELINE environment variable, if set. */
  const char *timeline;
  /* Gradient compression (docs/COMPRESSED_EXCHANGE.md). A compressor spec
   * of gradsync/compress.h ("topk:0.01", "fp16", "powersgd:4", ...): every
   * group of f32 tensors is sent compressed, through the compressor's own
   * exchange (gs_compress_default_xchg); "auto:SPEC": each group is sent
   * dense or compressed with SPEC through whichever exchange the plan
   * predicts fastest (so on a fast network it stays dense). topk and
   * mstopk select within each tensor (compress_merged below), so their
   * result does not depend on the grouping; the other compressors select
   * or scale within a group: with the same seed a run is reproducible when
   * its groups are (wfbp, single, bucket; not the policies that plan from
   * measured times), and, for SPEC alone, not otherwise timing-dependent.
   * NULL, "" or "none": dense. Read by gs_compress_spec_parse; a SPEC
   * without auto: and policy dear is GS_ERR_INVALID_ARG
   * (gs_plan_policy_check_compress). Every rank must give the same spec,
   * error_feedback and compress_merged (checked at creation,
   * GS_ERR_MISMATCH naming both). Each compressed message keeps its own
   * compressor state (error-feedback residual, DGC momentum, PowerSGD's Q);
   * a replan that regroups tensors carries each tensor's residual and
   * momentum, and the warm-up step, into its new message
   * (gs_compress_state_carry); only PowerSGD's Q starts afresh. A trainer
   * checkpoints each tensor's memory and sets it on a resumed run's engine
   * with gs_engine_memory_get/set (below). */
  const char *compress;
  /* 1 (default from gs_engine_config_init): keep the error-feedback
   * residual; 0: --no-ef. */
  int error_feedback;
  /* 0 (default): a compressed message that fuses several tensors selects
   * within each tensor (gs_compress_set_segments: topk and mstopk keep
   * each tensor's own k largest, so the plan's grouping does not change
   * what is sent); 1: over the whole message (merged selection, OMGS-SGD).
   * Every rank must agree (checked with the spec). */
  int compress_merged;
  /* Options for the compressor states (seed, DGC's momentum, clipping and
   * warm-up steps; NULL: gs_compress_opts_default). DGC's momentum is the
   * optimizer's, whose own is then 0 (gs_compress_spec_momentum: the
   * caller applies the rule). rank, nranks and
   * error_feedback are set by the engine. Copied. */
  const struct gs_compress_opts *compress_opts;
} gs_engine_config;

/* Fills cfg with the defaults above. */
void gs_engine_config_init(gs_engine_config *cfg);

/* Creates an engine on a communicator. Collective over it (one small
 * all-reduce): if any rank fails (configuration, timeline file, memory),
 * every rank fails, the others with a message naming that rank; arguments
 * that make the call impossible (out or comm NULL) fail at once, locally.
 * cfg may be NULL for the defaults; its strings are copied. The timeline
 * file, if any, is created here. The communicator must outlive the engine. */
gs_status gs_engine_create(gs_comm *comm, const gs_engine_config *cfg,
                           gs_engine **out);

/* Registers a gradient tensor. Call in forward order, before the first
 * grad_ready or wait; every rank must register the same tensors (names,
 * counts, dtypes, order): the first iteration checks this and fails with
 * GS_ERR_MISMATCH on every rank otherwise. `name` is copied; `buf` stays
 * the caller's (see ownership above) and may be NULL only if count is 0.
 * *id receives the tensor's index (0, 1, ... in registration order). */
gs_status gs_engine_register(gs_engine *e, const char *name, void *buf,
                             size_t count, gs_dtype dtype, int *id);

/* Marks tensor `id`'s gradient of this iteration as final. Cheap (a
 * timestamp and a push onto a lock-free queue) and non-blocking, except the
 * first call of an iteration after a dear iteration whose all-gathers the
 * trainer skipped: it finishes them (see Buffer ownership). Marking a tensor
 * twice in one iteration is GS_ERR_STATE. */
gs_status gs_engine_grad_ready(gs_engine *e, int id);

/* The learning rate this iteration's averaged gradients will be applied
 * with; call before the iteration's first gs_engine_grad_ready. Compressed
 * messages hand it to their compressor state (gs_compress_set_lr) before
 * compressing, so error feedback carries rate-scaled gradient across rate
 * changes (warm-up, decay). Without the call, or without compression, it
 * changes nothing. GS_ERR_INVALID_ARG unless lr is finite and >= 0; 0
 * leaves the memory as it is for that iteration. */
gs_status gs_engine_set_lr(gs_engine *e, double lr);

/* Ends the iteration's backward pass. Returns when every gradient of the
 * iteration is averaged in place; with dear and cfg.forward_overlap, when
 * every reduce-scatter is done (each tensor's average then arrives through
 * gs_engine_wait_tensor during the next forward). */
gs_status gs_engine_wait(gs_engine *e);

/* Returns when tensor `id`'s averaged gradient of the last iteration that
 * marked it is in place. With dear and cfg.forward_overlap this is where
 * the all-gathers run: call it in forward order before a layer uses its
 * parameters; it also launches the all-gather of the next group. Otherwise
 * it waits for the tensor's message (useful during backward), or returns at
 * once after gs_engine_wait. */
gs_status gs_engine_wait_tensor(gs_engine *e, int id);

/* Finishes the collectives already issued (and dear's pending all-gathers),
 * stops the threads, writes the timeline and frees the engine. Call after
 * gs_engine_wait, on every rank. Its waits have the stall watchdog too. NULL
 * is a no-op. */
gs_status gs_engine_destroy(gs_engine *e);

/* Records a caller's event in the engine's timeline (cfg.timeline /
 * GRADSYNC_TIMELINE), on a row of its own named `track` (at most 8 such
 * rows; "kfac" for K-FAC's factors, inversions and broadcasts in the
 * trainer). start_s and end_s are seconds of CLOCK_MONOTONIC, the clock the
 * timeline's other events use. Thread-safe; a no-op without a timeline or
 * once the rows are used up. */
gs_status gs_engine_trace(gs_engine *e, const char *track, const char *name,
                          double start_s, double end_s);

/* ---- Compressor memory, per tensor ------------------------------------------
 *
 * For a trainer that checkpoints compressed training and resumes it: each
 * tensor's part of its compressed message's memory (gs_compress_memory: the
 * error-feedback residual, DGC's momentum, the step counter and the rate the
 * residual is scaled to), read and written by registered tensor id, whatever
 * messages the plan in use fuses it into.
 *
 * The plan may not exist yet when memory is set (it is made at the first
 * iteration, again after the warm-up, and at replans), and a tensor may be
 * sent dense under it. So a set memory waits, pending, with the tensor until
 * a plan puts the tensor in a compressed message, and is moved into that
 * message's state when the plan is installed (gs_compress_state_carry: the
 * residual rescaled to the state's rate, the step counter at least the
 * memory's); into the message in use at once when there is one. A tensor
 * sent dense keeps its pending memory (a get returns it, so that a
 * checkpoint written meanwhile keeps it too) and sends it with its first
 * compressed message: the memory is gradient not yet sent, which a dense
 * exchange has no place for, and dropping it would lose that gradient. (A
 * replan that moves a tensor from a compressed message to a dense one drops
 * its memory, as before.)
 *
 * Both calls are the training thread's, between iterations (after
 * gs_engine_wait, before the next iteration's first grad_ready): inside an
 * iteration they are GS_ERR_STATE. Every rank may set different memory
 * (it is each rank's own); they are local calls. */

/* The kinds of memory (GS_COMPRESS_MEM_* bits) the engine's compressed
 * messages keep: 0 without compression. */
unsigned gs_engine_memory_kinds(gs_engine *e);

/* Tensor id's memory into out's arrays (out->residual and out->momentum:
 * the caller's buffers of the tensor's count floats, or NULL for a kind not
 * wanted): from its compressed message in the plan in use, else its
 * pending memory; out->have = 0 (step and lr 0) for a tensor with neither
 * (no compression, sent dense, or no plan yet). GS_ERR_INVALID_ARG for an
 * unknown id, GS_ERR_STATE inside an iteration. */
gs_status gs_engine_memory_get(gs_engine *e, int id, gs_compress_memory *out);

/* Sets tensor id's memory (in's arrays hold the tensor's count floats;
 * copied), as described above: into its compressed message now, or pending.
 * It replaces the tensor's memory: kinds the messages keep that in->have
 * lacks are zero afterwards; kinds they do not keep are ignored. GS_ERR_INVALID_ARG
 * without compression, for an unknown id, or memory that
 * gs_compress_memory_put refuses (a value that is not finite, a bad lr);
 * GS_ERR_STATE inside an iteration. */
gs_status gs_engine_memory_set(gs_engine *e, int id, const gs_compress_memory *in);

/* ---- Introspection --------------------------------------------------------- */

typedef struct gs_engine_stats {
  uint64_t iterations;          /* completed gs_engine_wait calls */
  gs_plan_policy_kind policy;   /* asked for */
  gs_plan_policy_kind chosen;   /* making the plan in use (wfbp in warm-up) */
  int warming_up;               /* 1 while the warm-up plan is in use */
  uint64_t plans;               /* plans installed so far */
  size_t ngroups;               /* groups of the plan in use */
  double predicted_iter_s;      /* the planner's time for the plan in use,
                                   under the profile and cost it was made
                                   with (0 in warm-up) */
  gs_plan_cost cost;            /* the costs the plan in use was made with */
  int cost_measured;            /* 1: fitted from the engine's collectives;
                                   0: the communicator's cost model */
  int rsag_measured;            /* 1: cost.rs and cost.ag fitted from the
                                   engine's own reduce-scatters and
                                   all-gathers (dear); 0: halves of cost.ar
                                   when that is measured, else the model's */
  uint64_t messages;            /* collectives issued */
  double comm_s;                /* total time the communicator spent on
                                   them (start: issue or previous end) */
  double wait_s;                /* total time the training thread blocked in
                                   wait and wait_tensor */
  uint64_t unready;             /* tensors zero-filled at wait */
  /* Bytes this rank put on the wire for gradients, summed over iterations:
   * dense messages count their size, compressed ones their payload. */
  uint64_t bytes_sent;
  uint64_t bytes_dense;         /* the dense size of the same messages */
  uint64_t compressed_messages; /* messages sent compressed */
  size_t compressed_groups;     /* groups of the plan in use sent compressed */
  double compress_s;            /* time spent compressing and decoding */
} gs_engine_stats;

gs_status gs_engine_get_stats(gs_engine *e, gs_engine_stats *out);

/* A copy of the plan in use (gs_plan_free), or NULL before the first
 * iteration. Its tensor indices count only the tensors with count > 0, in
 * registration order (the zero-size ones never communicate). The same on
 * every rank: rank 0 makes it and broadcasts it. */
gs_status gs_engine_get_plan(gs_engine *e, gs_plan **out);

/* A copy of the profile the plan in use was made from (gs_profile_free):
 * rank 0's measurements, broadcast with the plan; NULL before the first
 * iteration. Indexed like gs_engine_get_plan. */
gs_status gs_engine_get_profile(gs_engine *e, gs_profile **out);

/* ---- Replaying a profile ------------------------------------------------
 *
 * A model profile's schedule without its math: compute by sleeping (the
 * forward pass, each layer waiting first for its parameters as DeAR's
 * all-gathers require, then each tensor's backward time in reverse order),
 * communication for real: buffers of the profile's sizes through an engine
 * with the policy asked for. `gradsync replay` and the benchmarks use it. */
typedef struct gs_replay_result {
  gs_plan_policy_kind chosen;  /* the plan the engine ran */
  size_t ngroups;
  double iter_s;               /* median iteration, the slowest rank's */
  double predicted_s;          /* the planner's, under the engine's fitted costs */
  double engine_predicted_s;   /* gs_engine_stats.predicted_iter_s */
  double comm_s, exposed_s;    /* medians per iteration (this rank) */
  double hidden_frac;          /* 1 - exposed / comm, clamped to [0, 1] */
  gs_plan_cost cost;           /* the engine's fit at the end */
  int cost_measured, rsag_measured;
  /* What this rank put on the wire for gradients per measured iteration
   * (gs_engine_stats.bytes_sent: compressed messages count their payload),
   * and the groups of the plan sent compressed. */
  double bytes_per_step;
  size_t compressed_groups;
} gs_replay_result;

/* Collective over comm: an engine with `policy` (gs_engine_config's
 * warm-up, forward overlap on), bufs[i] registered as the profile's tensor
 * i, then warmup + iters iterations; *out on every rank. A failure before
 * the iterations (the engine, registration, memory) is agreed between the
 * ranks (gs_agree): every rank returns it. A failure during them leaves
 * collectives in flight that the others wait in: *in_flight = 1, and the
 * caller must end the job (gs_comm_abort). */
gs_status gs_engine_replay(gs_comm *comm, const gs_profile *profile, void **bufs,
                           const char *policy, int warmup, int iters,
                           gs_replay_result *out, int *in_flight);

/* The same with gradient compression: `compress` is a spec of
 * gs_engine_config.compress (NULL or "none": dense, exactly
 * gs_engine_replay). The compressors see whatever bufs hold, so a caller
 * fills them with values of a gradient's kind (zeros make selection
 * degenerate). */
gs_status gs_engine_replay_compress(gs_comm *comm, const gs_profile *profile, void **bufs,
                                    const char *policy, const char *compress, int warmup,
                                    int iters, gs_replay_result *out, int *in_flight);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_ENGINE_H */
