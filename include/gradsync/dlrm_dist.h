/*
 * Hybrid-parallel DLRM training: the embedding tables sharded across the
 * ranks of a communicator by a plan (gradsync/embed.h's gs_shard_plan), the
 * MLPs replicated (docs/DLRM.md). Above the communicator and the one-process
 * model (gradsync/dlrm.h), which know nothing of it.
 */
#ifndef GRADSYNC_DLRM_DIST_H
#define GRADSYNC_DLRM_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/comm.h"
#include "gradsync/core.h"
#include "gradsync/dlrm.h"
#include "gradsync/embed.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tables sharded by a plan (gs_shard_plan: tw, rw, cw, twrw, dp), the
 * MLPs replicated. Each rank trains on its own local batch; the global
 * batch is the ranks' local batches in rank order, and a step is the
 * single-process step on that global batch (mean loss over it):
 *
 *   1. ids: every rank checks its batch, then one all-to-all of a header
 *      (status, samples, ids for that rank) and one all-to-allv of the
 *      bags' lengths and ids, routed to each shard's owner (rw/twrw: each
 *      id to the owner of its row, rebased to the shard);
 *   2. the owners pool their shards' rows for every rank's samples (rw:
 *      partial sums; cw: column blocks); dp tables are looked up locally;
 *   3. one all-to-allv returns the pooled vectors to the samples' ranks,
 *      which add the partial sums of a row-wise table in rank order into
 *      the [n x T*D] matrix, then the interaction and top MLP, the loss;
 *   4. backward: one all-to-allv sends each shard's pooled gradient to its
 *      owner, which runs the fused backward + update over the global
 *      batch's bags (rank order, so a row's gradient sums in the global
 *      sample order); dp tables all-gather their bags and gradients and
 *      every replica makes the same update;
 *   5. the MLP gradients (of the global mean) are summed by one all-reduce
 *      of the flat buffer, issued before the embedding updates so that it
 *      runs under them, or by the engine during the backward
 *      (gs_dlrm_dist_set_mlp_policy), then SGD.
 * All through gs_comm's collectives (gs_alltoall, gs_alltoallv,
 * gs_allgatherv, gs_allreduce). Deterministic: repeated runs of one plan
 * on the same ranks are bitwise identical while the all-reduce's algorithm
 * for a size is the same (one communicator's cost model; across processes,
 * GRADSYNC_ALLREDUCE_ALGO or GRADSYNC_COST_FILE pins it). Row-wise Adagrad on cw shards is
 * the single-process update: the owners of a row's column blocks add their
 * sums of squares (one all-to-allv a step) so that every block of the row
 * takes the same accumulator over all D columns.
 *
 * Every call below is collective over the communicator: every rank calls it
 * in the same order. A failure on one rank (a bad id, a batch too large) is
 * learnt by every rank in the step's first exchange: every rank returns
 * GS_ERR_INVALID_ARG, the failing rank with its own message, the others
 * with one naming that rank and repeating its message; nothing has changed
 * on any rank, and no rank is left waiting. */

typedef struct gs_dlrm_dist gs_dlrm_dist;

/* Builds this rank's part of the model: the replicated MLPs (as
 * gs_dlrm_create's, from the same seed), its shards of the tables (each
 * row as the single-process model's) with their row-wise Adagrad state, and
 * a replica of every dp table. plan: for cfg's tables (dims 0 or D) and
 * gs_comm_size(comm) ranks, checked with gs_shard_plan_check, the same on
 * every rank (compared by a hash). The plan and cfg are not kept; comm is
 * borrowed until gs_dlrm_dist_destroy. */
gs_status gs_dlrm_dist_create(const gs_dlrm_config *cfg, const gs_shard_plan *plan,
                              gs_comm *comm, gs_dlrm_dist **out);
/* Not collective. NULL is a no-op. */
void gs_dlrm_dist_destroy(gs_dlrm_dist *d);

/* The exchanged pooled vectors' element type: fp32, or fp16 forward and
 * bf16 backward (Neo's choice: the forward's values are small and want
 * fp16's precision, the gradients want bf16's range). Same on every rank. */
typedef enum { GS_DLRM_A2A_FP32 = 0, GS_DLRM_A2A_FP16, GS_DLRM_A2A_BF16 } gs_dlrm_a2a_precision;
/* "fp32", "fp16" (fp16 forward, bf16 backward) or "bf16" (both bf16). */
gs_status gs_dlrm_a2a_precision_parse(const char *s, gs_dlrm_a2a_precision *out);
void gs_dlrm_dist_set_precision(gs_dlrm_dist *d, gs_dlrm_a2a_precision p);

/* How the MLPs' gradients (and the dense dp tables') are summed. NULL or
 * "fused" (the default): one all-reduce of the flat buffer after the
 * backward, run under the gradients' all-to-all and the embedding updates.
 * "auto": whichever of fused and the engine's auto plan (below) steps
 * faster here, measured over the first 22 steps (gs_dlrm_mlp_choice): the
 * engine's overlap pays only where a rank has a core to spare for it. Otherwise an engine policy (gradsync/engine.h, gs_plan_policy_parse:
 * wfbp, single, bucket[:...], mgwfbp, optimal, dear): each tensor is
 * handed to gradsync's engine as the backward makes it final (the top MLP's
 * first, then the dense dp tables', then the bottom MLP's, which runs under
 * the gradients' all-to-all), and the engine's plan merges and issues them
 * on a communicator of its own (created here: a second progress thread), so
 * the all-reduces overlap the rest of the backward and the all-to-all.
 * Policies that plan from measured times (mgwfbp, optimal, auto) may group
 * the tensors differently from run to run, and a sum's rounding follows its
 * message: runs are then equal within rounding, not bitwise (fused, wfbp,
 * single and bucket are). Collective; call between steps. A policy the
 * engine refuses is refused on every rank, naming it. */
gs_status gs_dlrm_dist_set_mlp_policy(gs_dlrm_dist *d, const char *policy);

/* Policy "auto"'s choice. The engine (its auto policy) is made at once and
 * runs its warm-up and first planned step (6 steps); then 8 steps fused
 * (the engine idle) and 8 under the engine's plan, in turn, so that a
 * host's drift falls on both; then the slower way is dropped. Each way's
 * time is the median of its steps on the slowest rank (an all-reduce of
 * the ranks' medians), so every rank keeps the same; the engine is kept
 * only if it is at least 2% faster (fused runs no second progress thread,
 * and is bitwise repeatable). The steps are counted across epochs from
 * set_mlp_policy("auto"); a resumed run measures afresh. */
typedef struct gs_dlrm_mlp_choice {
  int active;          /* 1: the policy is "auto" */
  int decided;         /* 1: the choice below is made; 0: still measuring */
  int engine;          /* 1: the engine kept, 0: fused */
  double fused_ms;     /* median step, the slowest rank's (0 until decided) */
  double engine_ms;    /* the same under the engine's plan */
  char plan[16];       /* the engine plan's policy when timed ("mgwfbp", ...) */
  uint64_t step;       /* steps since "auto" was set (then: the step it was made after) */
} gs_dlrm_mlp_choice;
void gs_dlrm_dist_mlp_choice_get(const gs_dlrm_dist *d, gs_dlrm_mlp_choice *out);

/* One training step on this rank's batch b (1 to max_batch samples; the
 * ranks' n may differ). loss (may be NULL): the global batch's mean log
 * loss, the same on every rank; logits (may be NULL, else b->n floats):
 * this rank's samples'. */
gs_status gs_dlrm_dist_train_step(gs_dlrm_dist *d, const gs_dlrm_batch *b,
                                  const gs_dlrm_optim *opt, double *loss, float *logits);
/* The same step, which also sends the next batch's ids to their owners
 * under its embedding updates (next: the batch of this rank's next step,
 * on every rank or on none; NULL: no prefetch). next must stay unchanged until it is
 * stepped; the next step given another batch (or an evaluation) waits for
 * the exchange and drops it. A batch of next refused on any rank (an id out
 * of range, a bad size) does not fail this step: next's own step returns
 * the error on every rank, as without the prefetch. */
gs_status gs_dlrm_dist_train_step_next(gs_dlrm_dist *d, const gs_dlrm_batch *b,
                                       const gs_dlrm_batch *next, const gs_dlrm_optim *opt,
                                       double *loss, float *logits);
/* The forward alone (evaluation): logits of this rank's b->n samples. */
gs_status gs_dlrm_dist_forward(gs_dlrm_dist *d, const gs_dlrm_batch *b, float *logits);

/* The replicated MLPs (gs_dlrm_mlp_weights, gs_dlrm_param_at ...), owned
 * by d. Its tables hold no rows: look them up through d. */
gs_dlrm *gs_dlrm_dist_model(gs_dlrm_dist *d);

/* This rank's shards: i < gs_dlrm_dist_nshards, a dp replica counting as
 * one. *where (may be NULL) receives the plan's shard (a dp replica: the
 * whole table on this rank); the table (its weights: rows x columns of the
 * shard, and state) is owned by d. NULL when i is out of range. */
size_t gs_dlrm_dist_nshards(const gs_dlrm_dist *d);
gs_embed_table *gs_dlrm_dist_shard(gs_dlrm_dist *d, size_t i, gs_shard *where);

/* Time and bytes since creation (or the last reset), this rank's. The
 * phases: lookup (the owners' pooling, the fused backward and update, dp
 * tables' too), mlp (bottom, interaction, top, the loss, backward, SGD),
 * a2a (waiting in the id, pooled and gradient all-to-alls and the dp
 * all-gathers), of which ids (the headers and ids, or the wait for those
 * sent ahead), pooled and grads (the pooled vectors' and their gradients'
 * exchanges, 16-bit conversions included), allreduce (waiting for the MLP
 * all-reduce after the embedding updates: its exposed part). Bytes are
 * what this rank sends, its own share excluded (a message to itself moves
 * nothing). */
typedef struct gs_dlrm_dist_stats {
  uint64_t steps, forwards;
  double lookup_s, mlp_s, a2a_s, allreduce_s, total_s;
  double ids_s, pooled_s, grads_s; /* parts of a2a_s */
  double id_bytes, pooled_bytes, grad_bytes, dp_bytes, allreduce_bytes;
} gs_dlrm_dist_stats;
void gs_dlrm_dist_stats_get(const gs_dlrm_dist *d, gs_dlrm_dist_stats *out);
void gs_dlrm_dist_stats_reset(gs_dlrm_dist *d);
/* Adds each of this rank's shards' lookup seconds since the stats' reset
 * (its forward, backward and update; part of lookup_s) into out[i], i its
 * index in the plan's shards (a dp table's: this rank's replica). out has
 * the plan's nshards entries; others' shards are left as they are. */
void gs_dlrm_dist_shard_lookup_s(const gs_dlrm_dist *d, double *out);

/* ---- The training loop (gradsync train --model dlrm) ------------------------
 * Epochs of steps on planted synthetic data (gs_dlrm_synth: the teacher's
 * AUC is the ceiling) or a Criteo file, each rank training on its own slice of every global
 * batch, then an evaluation of AUC and log loss on held-out samples. The
 * library decides and reports; its caller prints (through `cb`). */
typedef struct gs_dlrm_train_config {
  gs_dlrm_config model;       /* tables, MLPs, interaction, seed; max_batch: ignored */
  gs_dlrm_optim optim;
  gs_dlrm_synth_config data;  /* ndense, tables, seed: taken from model */
  /* A Criteo TSV day file (plain or gzip; gs_criteo_open) instead of the
   * synthetic data, or NULL: its first steps x ranks x batch lines are the
   * training set (every epoch passes over them), the next eval_samples
   * (read rounded up as below) are held out; 26 tables and 13 dense features;
   * no teacher (teacher_auc NaN). Every rank reads the file (a path all
   * see) and parses its own slices, as the reference's loader does. */
  const char *criteo_file;
  /* With criteo_file, > 0: the ids through a vocabulary of the training
   * lines (gs_criteo_vocab_build, TorchRec's frequency threshold): values
   * seen at least this many times there get their own rows, the rest one
   * row for all; table t gets min(its vocabulary's ids, its rows here)
   * rows, ids beyond taken modulo them. Every rank counts the lines itself
   * (the same file: the same vocabulary). 0: each value modulo the rows,
   * as the reference's --max-ind-range. */
  uint64_t criteo_min_count;
  int sharding;               /* -1 auto (the planner), else a gs_shard_kind */
  const char *plan_file;      /* a saved plan instead (gs_shard_plan_load), or NULL */
  gs_dlrm_a2a_precision precision;
  int no_prefetch;            /* 1: no step sends the next one's ids under its
                               * updates (gs_dlrm_dist_train_step_next) */
  const char *mlp_policy;     /* gs_dlrm_dist_set_mlp_policy's: NULL or "fused", "auto"
                               * (measured), or an engine policy */
  const char *timeline;       /* a Chrome trace per rank ("t.json" -> "t.rank1.json"):
                               * each step's phases (compute and comm tracks), the
                               * steps, evaluations and commits, the checkpoint
                               * writer; NULL: GRADSYNC_TIMELINE's, "" none */
  size_t batch;               /* per rank and step */
  int epochs;
  size_t steps;               /* per epoch (the training set: steps x ranks x batch) */
  size_t eval_samples;        /* held out and evaluated after each epoch, exactly these
                               * (read in whole rounds of ranks x batch: a Criteo file
                               * must hold the rounded-up count); 0: no evaluation */
  int ranks_per_node;         /* for the planner's twrw; 0: the communicator's */
  /* Checkpoints (docs/DLRM.md, "Checkpoints"): with checkpoint_dir (a
   * directory every rank sees: one machine or a shared file system), a
   * commit at every epoch's end (after its evaluation), and every
   * commit_every global steps if not 0. stop_at_step (not 0): commit after
   * that global step and return GS_OK (an event with stopped = 1). resume:
   * 0 starts afresh; GS_DLRM_RESUME continues from the last commit in
   * checkpoint_dir (none is an error); GS_DLRM_RESUME_IF_ANY does so if
   * there is one. A resumed run continues bitwise as the run that was
   * never stopped: the same world size, tables, MLPs, seed, data, batch,
   * steps per epoch and sharding (its plan is the checkpoint's) are
   * required, and anything else is refused on every rank, naming it.
   * Learning rates, the exchange's precision, the epochs and the held-out
   * samples may change. Another world size resumes when the global batch
   * (ranks x batch) stays the same: the same samples in the same steps,
   * the tables re-sharded under a new plan (equal within rounding, not
   * bitwise: sums run in another order). A commit the run goes on after
   * is made durable in the background: its bytes are written at the
   * commit point, and a thread checksums, fsyncs and renames them while
   * training goes on; the ranks put it in place (the manifest) a few steps
   * later, when the last one's measured writer time says it is done (the
   * next commit point before anything is measured). The last commit and a
   * stop's are made durable before the run returns. commit_foreground (or
   * GRADSYNC_COMMIT_SYNC set in rank 0's environment): every commit in
   * place before training goes on. */
  const char *checkpoint_dir;
  size_t commit_every, stop_at_step;
  int resume;
  int commit_foreground;
  /* This machine's lookup cost (e.g. a previous run's or `gradsync shard`'s
   * figures), or NULL: measured at start on every rank
   * (gs_embed_calibrate_job, seconds on a host with a large last-level
   * cache) and priced at the ranks' mean. Given, it is not measured: every
   * rank must be given the same (compared: another on any rank is refused
   * on every rank), each figure finite and >= 0 (gs_cost_lookup_check). It
   * prices the auto plan and the lookup times the epochs predict; borrowed
   * for the call. */
  const gs_cost_lookup *lookup;
} gs_dlrm_train_config;

enum { GS_DLRM_RESUME = 1, GS_DLRM_RESUME_IF_ANY = 2 };

typedef enum {
  GS_DLRM_EV_PLAN = 0,
  GS_DLRM_EV_STEP,
  GS_DLRM_EV_EPOCH,
  GS_DLRM_EV_RESUME, /* before the first step: global_step is the commit's */
  GS_DLRM_EV_COMMIT  /* after a commit: global_step, commit_s, commit_bytes, stopped */
} gs_dlrm_train_event_kind;

typedef struct gs_dlrm_train_event {
  gs_dlrm_train_event_kind kind;
  const gs_shard_plan *plan;  /* PLAN: the plan in use (valid during the call) */
  int epoch;                  /* from 1 */
  size_t step, steps;         /* STEP: within the epoch, from 1 */
  double loss;                /* STEP: the global batch's; EPOCH: the epoch's mean */
  double auc, log_loss, teacher_auc; /* EPOCH: on the held-out samples (NaN: none) */
  double ne, calibration;     /* EPOCH: on them too (gs_metric_ne; NaN: undefined or none) */
  size_t eval_samples;        /* EPOCH: the held-out samples evaluated (0: none) */
  double epoch_s, samples_per_s;
  gs_dlrm_dist_stats stats;   /* EPOCH: this rank's, the epoch's training steps */
  gs_dlrm_mlp_choice mlp_choice; /* EPOCH: policy "auto"'s choice so far */
  int ranks;                  /* EPOCH: the entries of the two arrays below */
  const double *rank_lookup_ms;      /* EPOCH: each rank's measured lookup ms a step
                                      * (stats.lookup_s's), valid during the call */
  const double *rank_lookup_pred_ms; /* EPOCH: the cost model's for each rank, from the
                                      * plan's shards and the lookup cost (below) */
  size_t nshards;                    /* EPOCH: the plan's shards, the entries of: */
  const double *shard_lookup_ms;     /* EPOCH: each shard's measured lookup ms a step
                                      * (gs_dlrm_dist_shard_lookup_s), plan order */
  const double *shard_lookup_pred_ms; /* EPOCH: the cost model's for each shard */
  size_t peak_rss_bytes;      /* EPOCH: this process's peak resident memory, 0 if unknown */
  size_t base_rss_bytes;      /* EPOCH: its resident memory before its shards and model
                               * were made (the process, MPI, the plan), 0 if unknown */
  double shard_mem_bytes;     /* EPOCH: its shards' weights and row-wise state as the
                               * planner prices them (gs_shard_plan.rank_mem) */
  size_t alloc_bytes;         /* EPOCH: the most the library held (gs_mem_peak) over what
                               * it held at base_rss_bytes: the shards, their state, the
                               * MLPs and every buffer of the training */
  const double *rank_peak_rss, *rank_base_rss, *rank_alloc, *rank_shard_mem; /* EPOCH:
                               * every rank's peak_rss_bytes, base_rss_bytes, alloc_bytes
                               * and shard_mem_bytes (ranks entries each; 0: unknown),
                               * valid during the call */
  size_t global_step;         /* RESUME, COMMIT: global steps done (epochs x steps + step) */
  double commit_s;            /* COMMIT: the training it stalled on this rank, agreements
                               * included (the whole commit in the foreground);
                               * RESUME: the load's */
  size_t commit_bytes;        /* COMMIT: the bytes this rank wrote */
  int stopped;                /* COMMIT: the run stops here: 1 stop_at_step, 2 asked
                               * (gs_dlrm_train_request_stop) */
  size_t published_step;      /* COMMIT: the global step after which it was put in place
                               * (global_step itself in the foreground) */
  double write_s;             /* COMMIT: its background writer's seconds on this rank
                               * (checksum, fsync, rename); 0 in the foreground */
  int from_ranks;             /* RESUME: the checkpoint's world size (another: re-sharded) */
  size_t from_step;           /* RESUME: the commit's own global step, in its run's steps
                               * (global_step where the global batch is the same) */
  size_t from_global_batch;   /* RESUME: the checkpoint's global batch (another: its
                               * position regrouped into this run's steps) */
  const char *auc_undefined;  /* EPOCH: why auc is NaN ("the held-out labels are all one
                               * class"), NULL when it is defined; static */
  const gs_cost_lookup *lookup; /* PLAN, EPOCH: the lookup cost the run prices with: the
                                 * config's, or the ranks' mean measured at start-up;
                                 * valid during the call */
  const gs_criteo_vocab *vocab; /* PLAN: the Criteo file's vocabulary (criteo_min_count),
                                 * or NULL; valid during the call */
  double vocab_s;               /* PLAN: the seconds it took (gs_criteo_vocab_build_comm) */
  const gs_embed_spec *tables;  /* PLAN: the tables trained (their rows the vocabulary's
                                 * where it has fewer), cfg->model.ntables of them */
} gs_dlrm_train_event;

typedef void (*gs_dlrm_train_cb)(const gs_dlrm_train_event *ev, void *user);

/* Asks a running gs_dlrm_train_run with a checkpoint directory to stop at
 * its next commit point (commit_every, or its epoch's end): it commits and
 * returns GS_OK, its last event a commit with stopped = 2. The ranks agree
 * at every commit point whether any rank was asked. Async-signal-safe, for
 * a SIGUSR1 handler (an elastic supervisor's cue); the request is consumed
 * by the stop. */
void gs_dlrm_train_request_stop(void);

/* gs_criteo_vocab_build (gradsync/dlrm.h) over the ranks of comm,
 * collective: rank r counts the lines whose index is r modulo the ranks
 * (the others passed over unparsed),
 * each value's counts are summed by one rank (by the value) and the kept
 * values sent to every rank: every rank gets the vocabulary
 * gs_criteo_vocab_build gives, for 1/P of the parsing and counting and of
 * the counts' memory. A bad line is its counter's: every rank returns its
 * error, in its words. */
gs_status gs_criteo_vocab_build_comm(const char *path, size_t lines, uint64_t min_count,
                                     gs_comm *comm, gs_criteo_vocab **out);

/* Collective over comm. Every rank receives every event (cb may be NULL);
 * a failure on any rank is every rank's (the step's agreement, or gs_agree
 * around set-up). The auto plan uses the communicator's cost model and
 * the lookup cost (cfg->lookup, or the mean of the ranks' measured at
 * start-up), agreed, so every rank makes the same plan. */
gs_status gs_dlrm_train_run(const gs_dlrm_train_config *cfg, gs_comm *comm,
                            gs_dlrm_train_cb cb, void *user);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_DLRM_DIST_H */
