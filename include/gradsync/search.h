/*
 * gradsync's configuration search: for a model profile and a network, how
 * many workers to train on and which scheduling policy to plan with, for a
 * target (the most workers that keep a weak-scaling efficiency, or the most
 * throughput). `gradsync plan --search` prints it (docs/PLANNING.md,
 * "Search").
 *
 * Every figure is a prediction, none a measurement: at each worker count
 * tried the costs come from the cost model (gs_plan_cost_from_net) and each
 * policy's iteration time from the planner (gs_plan_make), so the search
 * states no formula of its own. It is Zou et al.'s guideline on the number
 * of workers ("Distributed training large-scale deep architectures", ADMA
 * 2017, arXiv 1709.06622) computed from the model instead of read from a table: past
 * the last count whose efficiency meets the target, adding workers buys
 * less than the target's share of their compute.
 *
 * Like plan.h and sim.h, this header compiles without MPI.
 */
#ifndef GRADSYNC_SEARCH_H
#define GRADSYNC_SEARCH_H

#include <stddef.h>

#include "gradsync/core.h"
#include "gradsync/cost.h"
#include "gradsync/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The policies a search compares: wfbp .. dear, indexed by their
 * gs_plan_policy_kind (auto is their minimum, so it is not planned again). */
#define GS_SEARCH_POLICIES ((int)GS_PLAN_AUTO)

struct gs_search_compressor;

typedef struct gs_search_config {
  const gs_cost_params *net; /* the network (gs_cost_preset); borrowed for
                                the call only */
  gs_algo algo;              /* all-reduce algorithm; GS_ALGO_AUTO: the best
                                at large sizes, as gs_plan_cost_from_net */
  int workers;               /* > 0: this count only (max_workers 0) */
  int max_workers;           /* > 0 (workers 0): per_node, 2 per_node,
                                4 per_node, ... and max_workers itself */
  int per_node;              /* workers per node, >= 1, dividing the count
                                given; nodes = workers / per_node */
  double target_efficiency;  /* 0: the most throughput; 0 < E <= 1: the
                                most workers whose efficiency is >= E */
  int max_global_batch;      /* 0: every worker at the profile's batch_size;
                                > 0: each count at the largest per-worker
                                batch B with workers * B <= this (and B <=
                                max_worker_batch when that is > 0), its
                                compute scaled by B / batch_size (taken as
                                linear in the batch; the gradients' bytes do
                                not change); the throughput pick is then the
                                most samples per second. Needs a profile
                                with a batch size, and at least one sample
                                per worker */
  int max_worker_batch;      /* 0: no cap; > 0: a memory cap on B */
  int ps_servers;            /* the parameter servers priced at each count:
                                0: the fewest whose side of a round is no
                                slower than a worker's; > 0: this many (a
                                job's own --ps S) */
  double ps_async;           /* 0 <= f <= 1: the share of the steps the
                                parameter servers run asynchronously (1
                                for ASP, 1 - F for Sync-Switch's BSP share
                                F; 0, BSP, by default): ps_iter_s is then
                                (1 - f) BSP's step and f gs_cost_ps_async's */
  int ps_slots;              /* where the parameter servers run: 0, each on
                                a node of its own beside the workers'
                                per_node a node (S more machines); > 0,
                                the job's workers and ps_servers (> 0)
                                ps_slots a node in rank order, the servers
                                last, as gradsync launches a --ps job (the
                                cluster manager's prediction) */
  /* Compression, weighed at every count of two workers or more: each
   * candidate planned through the planner's compressed path
   * (gs_plan_xchg_from_compressor, then gs_plan_make_xchg with auto), and
   * the fastest chosen when its iteration is at most (1 -
   * compress_min_gain) x the dense one's (the faster of the all-reduce and
   * the parameter servers). The count is then picked on that choice: on a
   * slow network dense may not scale at all while a compressor does. NULL
   * / 0: dense only. */
  const struct gs_search_compressor *compress; /* ncompress candidates,
                                                  borrowed for the call */
  size_t ncompress;
  double compress_min_gain;  /* 0 <= g < 1: the share of the dense
                                iteration a compressor must save to be
                                recommended (callers normally pass
                                GS_SEARCH_COMPRESS_MIN_GAIN); 0: any
                                saving at all */
} gs_search_config;

/* The default margin a compressor must win by: 10% of the iteration,
 * twice the planner's measured error against replay on the emulated
 * cluster (within 5.4%, docs/SIMULATE.md), since a compressor costs
 * accuracy that the prediction does not see. */
#define GS_SEARCH_COMPRESS_MIN_GAIN 0.10

/* A compressor the search may recommend. The coding time comes in with it
 * (measured by the caller at the profile's sizes,
 * gs_compress_measure_coding, or a rate fixed by a test) so that the
 * search itself is deterministic. */
typedef struct gs_search_compressor {
  const char *spec;      /* a compression spec (gs_compress_spec_parse):
                            "topk:0.01" sends every f32 group compressed
                            through the compressor's own exchange,
                            "auto:topk:0.01" lets each group choose dense
                            or any exchange; borrowed for the call */
  double secs_per_elem;  /* >= 0: compressing and decoding one element, at
                            every size (used when coding.npoints is 0) */
  gs_cost_coding coding; /* npoints > 0: the coding time at each size
                            (gradsync/cost.h), instead of secs_per_elem */
} gs_search_compressor;

/* One compression candidate at the pick's count, at its batch. */
typedef struct gs_search_compressed {
  char spec[80];               /* normalised ("topk:0.01", "auto:qsgd:16") */
  gs_plan_policy_kind policy;  /* the policy auto chose with it (the
                                  fastest, the first on ties; dear only
                                  for auto:SPEC) */
  double iter_s;               /* the planner's iteration time */
  double efficiency;           /* the pick's one_worker_s over iter_s */
  double gain;                 /* 1 - iter_s / the dense recommendation's */
  size_t groups;               /* groups of the plan */
  size_t compressed_groups;    /* of which sent compressed */
  gs_xchg exchange;            /* the exchange of the first compressed
                                  group (the compressor's own with a plain
                                  spec); GS_XCHG_COUNT when none is */
  double bytes_per_step;       /* what one worker puts on the wire for
                                  gradients per step, as the engine counts
                                  bytes_sent: each compressed group's
                                  payload (gs_compressor_payload_bytes,
                                  every round), each dense group's size */
} gs_search_compressed;

/* One worker count tried. */
typedef struct gs_search_point {
  int workers;
  int nodes;                          /* workers / per_node */
  int batch;                          /* per-worker batch (the profile's
                                         without max_global_batch) */
  double one_worker_s;                /* one worker's iteration at `batch` */
  double backward_s;                  /* its backward pass, summed */
  double iter_s[GS_SEARCH_POLICIES];  /* predicted iteration time of each
                                         policy, by gs_plan_policy_kind */
  gs_plan_policy_kind best;           /* the smallest iter_s (the first
                                         policy on ties) */
  double efficiency;                  /* weak scaling: one worker's iteration
                                         time at `batch` over iter_s[best]
                                         (1 when both are 0) */
  double samples_s;                   /* workers * batch / iter_s[best];
                                         0 when the profile has no batch
                                         size or the time is 0 */
  /* Parameter servers instead of the all-reduce (BSP, one server per
   * host and per_node workers a host, or as ps_slots lays them out;
   * gs_cost_ps_nodes_round in gradsync's chunks, GS_PS_CHUNK_BYTES): Zou et al.'s rule, as many servers as keep the
   * server side from being the bottleneck: the fewest S (up to 4 workers)
   * whose server_s is no longer than a worker's worker_s (their aggregate
   * bandwidth against the workers' push); the iteration is one worker's
   * compute and then the round, since gradsync's workers push after the
   * backward pass (gradsync/ps.h); with ps_async f > 0, f of the steps
   * are asynchronous ones (gs_cost_ps_async) instead. */
  int ps_servers;
  double ps_round_s;                  /* the round's round_s at ps_servers */
  double ps_iter_s;                   /* this point's one_worker_s +
                                         ps_round_s (BSP; the mean step
                                         with ps_async) */
  /* Compression at this count (cfg->compress; -1 and 0 without
   * candidates or on one worker): the fastest candidate that saves at
   * least compress_min_gain of min(iter_s[best], ps_iter_s), and its
   * iteration time. */
  int compress_pick;
  double compress_iter_s;
  /* What the count is chosen on: the all-reduce, compressed when
   * compress_pick >= 0 (compress_iter_s), else iter_s[best]; neither needs
   * machines beyond the workers. Efficiency and samples per second as
   * above, at that time. Without candidates, iter_s[best], efficiency and
   * samples_s. */
  double pick_iter_s;
  double pick_efficiency;
  double pick_samples_s;
} gs_search_point;

/* How the recommended configuration synchronises its gradients. */
typedef enum {
  GS_SEARCH_ALLREDUCE = 0, /* the engine's all-reduce, planned by `best` */
  GS_SEARCH_PS             /* parameter servers, ps_servers of them */
} gs_search_sync;

typedef struct gs_search_result {
  double one_worker_s;     /* one worker's iteration at the profile's
                              batch: the plan with no communication
                              (forward + every backward) */
  double backward_s;       /* the profile's backward, summed */
  double gradient_bytes;   /* every gradient's bytes, summed */
  size_t npoints;          /* >= 1 */
  gs_search_point *points; /* by increasing workers; owned by the result */
  size_t pick;             /* the recommendation, an index into points:
                              with a target efficiency the most workers
                              whose pick_efficiency meets it (none met: the
                              fewest, points[0]); for throughput the most
                              workers per second of pick_iter_s (with a
                              global batch, the most pick_samples_s; the
                              first on ties) */
  int target_met;          /* 1 when points[pick] meets the target (always
                              for throughput) */
  gs_search_sync sync;     /* at the pick's count (chosen on the all-reduce's
                              times, the workers being the machines both
                              share): parameter servers when their
                              ps_iter_s is below iter_s[best], on
                              ps_servers more machines; else the
                              all-reduce */
  /* Compression at the pick's count: one entry per candidate, in the
   * config's order (NULL when there were none or the pick is one
   * worker). */
  size_t ncompressed;
  gs_search_compressed *compressed; /* owned by the result */
  int compress_pick;       /* -1: dense; else the index of the recommended
                              candidate (the fastest, when it saves at least
                              compress_min_gain of dense_iter_s; sync is
                              then GS_SEARCH_ALLREDUCE, compressed exchanges
                              being the engine's) */
  double dense_iter_s;     /* the dense recommendation's iteration at the
                              pick: min(iter_s[best], ps_iter_s) */
  double dense_bytes_per_step; /* every gradient's bytes (gradient_bytes) */
  double allreduce_all_s;  /* at the pick's count, one all-reduce of every
                              gradient in one message (the cost module's
                              line for algo, the ring's for auto); 0 on one
                              worker: what the policies overlap with the
                              backward pass, for explanations */
} gs_search_result;

/* Runs the search for `profile` (left unchanged) under `cfg`. On success
 * *out holds the points (gs_search_result_free releases them); on failure
 * *out holds no memory. Errors: GS_ERR_INVALID_ARG naming the bad field
 * (no network, neither or both of workers and max_workers, per_node not
 * dividing the count, a target outside [0, 1], a compression spec that
 * does not parse, is "none" or whose rate is negative or not finite, a
 * gain outside [0, 1)) or a profile the planner refuses;
 * GS_ERR_UNSUPPORTED for an algo that is no all-reduce; GS_ERR_NOMEM. */
gs_status gs_search_run(const gs_profile *profile, const gs_search_config *cfg,
                        gs_search_result *out);

/* Releases a result's points and compression entries (the struct itself
 * is the caller's); a zeroed or already released result is a no-op. */
void gs_search_result_free(gs_search_result *r);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_SEARCH_H */
