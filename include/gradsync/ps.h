/*
 * gradsync parameter servers: BSP, ASP, SSP and Sync-Switch over MPI.
 *
 * A job of N ranks splits into W = N - S workers (ranks 0 .. W-1 of the
 * job's communicator) and S servers (ranks W .. N-1). The parameters, one
 * flat f32 vector of all tensors in order, are cut into S contiguous shards
 * of balanced bytes (a large tensor is split between servers, a small one is
 * not cut: gs_ps_shard_plan). Each server holds its shard and the optimizer
 * state for it and runs the update (a callback: gradsync_nn's
 * gs_nn_sgd_update for SGD with momentum). Workers push gradients and pull
 * parameters with non-blocking point-to-point messages on the parameter
 * servers' own communicator (an MPI_Comm_dup of the job's), cut into chunks
 * (gs_ps_config.chunk_bytes). A server polls every worker's outstanding
 * messages, so one slow worker or one large message never holds up another.
 *
 * Protocols (the mode of each push, chosen per step):
 *   BSP  the server waits for one push from every worker, averages them in
 *        worker order, applies one update and answers every worker;
 *   ASP  each push is applied on arrival and answered at once, chunk by
 *        chunk as its chunks arrive (staleness is unbounded);
 *   SSP:s each push is applied on arrival, chunk by chunk; the answer to
 *        a worker whose clock (pushes so far) is more than s ahead of the
 *        slowest worker's is held back until it is not (Ho et al., NIPS'13);
 *        one within the bound streams as ASP's does. SSP:0 keeps the
 *        workers in step, with one update per push.
 * ASP and SSP pushes are applied with the learning rate scaled for the
 * per-worker batch (gs_ps_config.async_lr_scale, default 1/W) and with less
 * momentum: W asynchronous workers add about 1 - 1/W of momentum by
 * themselves (Mitliagkas et al., "Asynchrony begets momentum", 2016), so a
 * push's momentum is max(0, mu - (1 - 1/W)) by default
 * (gs_ps_config.async_momentum_offset). Without it, ASP at BSP's mu = 0.9
 * left the CNN of `gradsync train` at chance in some runs.
 *
 * Sync-Switch (Li et al., ICDCS'21) switches inside the running job: the
 * first server decides the mode of each worker's next step and sends it in
 * its answer. Offline: BSP until a fraction F of the sample budget has been
 * trained, then ASP. Online: BSP, but ASP while a straggler is detected
 * (a worker whose median compute time over the last `window` steps is more
 * than `straggler_ratio` times the median of the others'), back to BSP once
 * window x workers decisions in a row have seen none, until the BSP share F
 * is done; then ASP. After a switch to ASP the momentum ramps from
 * 1/W of ASP's momentum, doubling every momentum_ramp_steps pushes of that
 * worker, back to it. The servers' parameters and optimizer state are
 * untouched by a switch.
 *
 * Threads and MPI: every MPI call of a gs_ps is made by the thread that calls
 * its functions, on its own communicator. MPI_THREAD_FUNNELED is enough for
 * a job that uses nothing else; a job that also has a gs_comm (whose
 * progress thread makes MPI calls at the same time) needs
 * MPI_THREAD_MULTIPLE, and gs_ps_create refuses a lower level when
 * gs_ps_config.comm is set.
 *
 * No rank waits forever: a worker that gets no answer from a server within
 * the timeout ends the job naming that server ("parameter server 1 (rank 5)
 * sent no answer to step 17 within 5 s"), and a server that hears nothing
 * from a worker for 1.5 times the timeout (longer, so that a worker that
 * waits for a dead server names it first) ends the job naming the worker.
 * The timeout is gs_ps_config.timeout_s, else the gs_comm's GRADSYNC_TIMEOUT,
 * else GRADSYNC_TIMEOUT, else 300 s.
 *
 * GRADSYNC_PS_FAULT="rank=R,step=N[,kind=exit|stall]" (tests only): rank R,
 * a server after its N-th push received or a worker before its N-th push,
 * exits at once with status 3 (exit) or stops answering (stall).
 *
 * Ownership: the caller owns every buffer passed in; a call returns only when
 * gradsync no longer uses it.
 */
#ifndef GRADSYNC_PS_H
#define GRADSYNC_PS_H

#include <mpi.h>

#include "gradsync/comm.h"
#include "gradsync/core.h"
#include "gradsync/cost.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { GS_PS_BSP = 0, GS_PS_ASP, GS_PS_SSP, GS_PS_MODE_COUNT } gs_ps_mode;

typedef enum {
  GS_PS_POLICY_FIXED = 0, /* the mode of gs_ps_sync.mode throughout */
  GS_PS_POLICY_OFFLINE,   /* Sync-Switch offline: BSP for F, then ASP */
  GS_PS_POLICY_ONLINE     /* Sync-Switch online: ASP while a straggler lasts */
} gs_ps_policy;

typedef struct {
  gs_ps_policy policy;
  gs_ps_mode mode;         /* FIXED: the protocol */
  int staleness;           /* SSP's bound s >= 0 */
  double bsp_fraction;     /* OFFLINE/ONLINE: F in [0, 1] */
  double straggler_ratio;  /* ONLINE: > 1 (default 1.5) */
  int window;              /* ONLINE: steps per worker in the median (8) */
} gs_ps_sync;

/* Parses "bsp", "asp", "ssp:S", "switch:offline:F", "switch:online" or
 * "switch:online:F" (F defaults to 0.25, the straggler ratio to 1.5, the
 * window to 8). GS_ERR_PARSE with a message naming the value otherwise. */
gs_status gs_ps_sync_parse(const char *text, gs_ps_sync *out);
/* Writes the canonical text of s ("ssp:3", "switch:offline:0.25") to buf. */
void gs_ps_sync_format(const gs_ps_sync *s, char *buf, size_t n);
const char *gs_ps_mode_name(gs_ps_mode mode);
/* The share of a job's steps that `s` runs asynchronously, as the cost
 * model prices them (gs_search_config.ps_async): 0 for BSP and SSP:0 (the
 * workers kept in step), 1 for ASP and SSP:s >= 1 (among workers of one
 * speed the bound does not bind), 1 - F for Sync-Switch, offline or online
 * (online's ASP while a straggler lasts is not foreseen). */
double gs_ps_sync_async_share(const gs_ps_sync *s);
/* 1 when every worker runs the same steps (BSP throughout), so that a step
 * number is one point of the training for all of them and a job can commit
 * or stop there (gradsync train --commit-every, --stop-at-step); 0 when
 * their step counts differ (ASP, SSP, Sync-Switch: epochs end by samples
 * and commits come at their ends). */
int gs_ps_sync_lockstep(const gs_ps_sync *s);

/* The shards: server k holds flat elements [begin[k], begin[k+1]) of the
 * concatenation of counts[0 .. n-1]; begin has servers + 1 entries, begin[0]
 * = 0 and begin[servers] = the total. The cut points are the equal-bytes
 * points, each moved to the nearer tensor edge when the tensor it falls in is
 * small (under a quarter of a shard), so that large tensors are split and
 * small ones are not. A shard may be empty (fewer parameters than servers,
 * or none): its server still takes part in every step, with no data. */
gs_status gs_ps_shard_plan(const size_t *counts, size_t n, int servers,
                           size_t *begin);

/* The server's update of its shard for one (averaged) gradient: w, grad and
 * state (one float per parameter, zero at start: the momentum buffer) of n
 * elements, with the learning rate and momentum of this step. It must be
 * elementwise: a BSP round applies it one chunk (cfg.chunk_bytes) at a time,
 * each as soon as every worker's part of it has arrived, and sends that
 * chunk back while the next ones arrive. */
typedef void (*gs_ps_update_fn)(void *ctx, float *w, const float *grad,
                                float *state, size_t n, float lr,
                                float momentum);

typedef struct {
  int servers;              /* S, 1 .. N-1 */
  gs_ps_sync sync;
  long sample_budget;       /* samples over all workers; 0: workers decide
                               when to stop; GS_PS_BUDGET_AT_INIT: given to
                               gs_ps_worker_init (the switch policies need
                               one or the other) */
  size_t chunk_bytes;       /* largest message piece; 0: GS_PS_CHUNK_BYTES,
                               256 KiB (gradsync/cost.h) */
  double timeout_s;         /* 0: from comm, GRADSYNC_TIMEOUT, or 300 s */
  float async_lr_scale;     /* ASP/SSP learning-rate factor; 0: 1/W */
  float async_momentum_offset; /* ASP/SSP momentum is max(0, mu - this);
                               0: 1 - 1/W, the momentum asynchrony adds by
                               itself; < 0: none (mu as given) */
  int momentum_ramp_steps;  /* after a switch to ASP; 0: no ramp */
  gs_comm *comm;            /* the job's gs_comm if it has one, or NULL */
} gs_ps_config;

/* gs_ps_config.sample_budget: the budget comes with gs_ps_worker_init. */
#define GS_PS_BUDGET_AT_INIT (-1L)

typedef struct gs_ps gs_ps;

/* Collective over job. counts: the parameter tensors' element counts in
 * order (the same on every rank). Every rank checks the configuration and
 * the MPI thread level; a rank that fails makes every rank fail, with
 * GS_ERR_MISMATCH naming the values that differ between ranks. */
gs_status gs_ps_create(MPI_Comm job, const gs_ps_config *cfg,
                       const size_t *counts, size_t n, gs_ps **out);
/* Frees the handle and its communicators. It waits for no other rank (a
 * rank may reach it after another failed); a worker calls gs_ps_finish
 * first. NULL: no-op. */
gs_status gs_ps_destroy(gs_ps *ps);

int gs_ps_is_server(const gs_ps *ps);
int gs_ps_workers(const gs_ps *ps);       /* W */
int gs_ps_worker_index(const gs_ps *ps);  /* 0 .. W-1, or -1 on a server */
/* The workers' own communicator (MPI_COMM_NULL on a server): evaluation
 * and logging among workers only. */
MPI_Comm gs_ps_worker_comm(const gs_ps *ps);
size_t gs_ps_total(const gs_ps *ps);
void gs_ps_shard(const gs_ps *ps, int server, size_t *begin, size_t *end);

/* Server: serves until every worker has called gs_ps_finish. update runs
 * the optimizer on the shard (ctx is passed through). */
gs_status gs_ps_serve(gs_ps *ps, gs_ps_update_fn update, void *ctx);

/* Worker: worker 0 sends w (gs_ps_total floats) as the servers' initial
 * parameters and, with GS_PS_BUDGET_AT_INIT, sample_budget (> 0) as the
 * budget; then every worker pulls them into w. Every worker calls it
 * before its first step (it waits for the servers, not for the other
 * workers). sample_budget is ignored on workers other than 0. */
gs_status gs_ps_worker_init(gs_ps *ps, float *w, long sample_budget);
/* Worker: gs_ps_worker_init for a run that continues a saved one: worker
 * 0 also sends state (the optimizer's momentum, gs_ps_total floats, the
 * whole vector: NULL for zeros) and the samples trained before
 * (samples_done >= 0: the switch policies' budget counts on from it). The
 * state is not a shard: a run saved with some servers and workers resumes
 * on any others. Ignored on workers other than 0. */
gs_status gs_ps_worker_resume(gs_ps *ps, float *w, const float *state, long sample_budget,
                              long samples_done);
/* Worker: the servers' optimizer state (momentum), gs_ps_total floats, as
 * of their last whole update (a BSP round in progress is waited for). For
 * a checkpoint, with every worker parked or between steps. */
gs_status gs_ps_pull_state(gs_ps *ps, float *state);

typedef struct {
  int batch;          /* samples in this gradient */
  float lr;           /* the schedule's learning rate (for BSP's average) */
  float momentum;     /* the configured momentum */
} gs_ps_step_info;

typedef struct {
  gs_ps_mode mode;       /* the protocol this step ran under */
  gs_ps_mode next_mode;  /* what the next step runs under */
  int stop;              /* the sample budget is used up: finish now */
  int switched;          /* next_mode differs from mode */
  int straggler;         /* Sync-Switch online: the worker the first server
                            last detected as a straggler (the reason for a
                            switch to ASP), or -1 */
  double wait_s;         /* from the push to the answer */
  long samples;          /* samples applied by the servers so far, this
                            push's included (first server's count) */
} gs_ps_step_result;

/* Worker: pushes grad (gs_ps_total floats), waits for the answers and
 * writes the servers' parameters into w. */
gs_status gs_ps_step(gs_ps *ps, const float *grad, float *w,
                     const gs_ps_step_info *info, gs_ps_step_result *res);
/* Worker: the servers' current parameters, without pushing. */
gs_status gs_ps_pull(gs_ps *ps, float *w);
/* Worker: steps out until its next push: BSP rounds and SSP's slowest
 * clock leave it out meanwhile. For a pause every worker takes but not at
 * the same step (an epoch's end under ASP, where the workers meet to
 * evaluate): a worker held in a BSP round would otherwise wait for one that
 * already left for the meeting. No silence timeout runs while parked.
 * Every worker parks the same number of times, its k-th park being the
 * k-th meeting: a BSP round after meeting k waits for every worker that has
 * not yet parked for meeting k+1, so the first push after a meeting waits
 * for the others to come back rather than making a round of its own. */
gs_status gs_ps_park(gs_ps *ps);
/* Worker: tells the servers this worker is done (no call after it but
 * gs_ps_stats and gs_ps_destroy). */
gs_status gs_ps_finish(gs_ps *ps);

typedef struct {
  long pushes;            /* worker: pushed; server: received */
  long bsp_steps, asp_steps, ssp_steps; /* worker: steps per protocol */
  long switches;          /* worker: mode changes seen */
  double wait_s;          /* worker: time waiting for answers */
  double bytes_pushed, bytes_pulled; /* worker, payload only */
  long updates;           /* server: updates applied to its shard */
  long max_clock_gap;     /* server: largest (clock - slowest clock) of a
                             worker at the moment it was answered */
  long max_staleness;     /* server: most updates between a worker's
                             answer and its next push */
  double policy_s;        /* server 0: time spent deciding modes */
  double busy_s;          /* server: time applying updates */
} gs_ps_stats;

void gs_ps_get_stats(const gs_ps *ps, gs_ps_stats *out);

/* The learning rate and momentum an asynchronous (ASP or SSP) push uses
 * when the job's are lr and momentum: lr x async_lr_scale, and momentum
 * less async_momentum_offset (at least 0), before any ramp after a switch.
 * For reports; gs_ps_step applies them itself. */
void gs_ps_async_hparams(const gs_ps *ps, float lr, float momentum, float *async_lr,
                         float *async_momentum);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_PS_H */
