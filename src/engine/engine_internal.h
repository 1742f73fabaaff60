/*
 * Internals of the engine (src/engine/engine*.c, timeline.c). Not installed.
 *
 * Three threads share a gs_engine:
 *   - the training thread calls the public API. grad_ready pushes an event
 *     onto a single-producer single-consumer ring (no lock);
 *   - the launch thread pops events, tracks which groups are complete,
 *     packs each message and issues its collective, strictly in plan order.
 *     At the start of each iteration it also runs the control exchanges:
 *     the registration check (first iteration) and the plan broadcast,
 *     which ends with an agreement on every rank's status. While an
 *     iteration is open it also watches for this rank's own stall;
 *   - the completion thread waits for the collectives in issue order and
 *     scatters the results back into the caller's buffers.
 * `mu` guards everything marked (mu); the rest belongs to one thread, named.
 */
#ifndef GS_ENGINE_INTERNAL_H
#define GS_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "gradsync/compress_comm.h"
#include "gradsync/engine.h"
#include "gs_internal.h"

/* ---- Events from the training thread to the launch thread --------------- */

enum { EV_START = 1, EV_READY, EV_FLUSH, EV_STOP };

typedef struct eng_event {
  uint32_t kind;
  uint32_t id;    /* EV_READY: registered tensor id */
  uint64_t t_ns;  /* EV_READY: ready stamp; EV_START: iteration start */
  uint64_t aux;   /* EV_START: time blocked in wait_tensor since then (ns) */
} eng_event;

typedef struct eng_ring {
  eng_event *slots;
  uint32_t mask;
  _Atomic uint32_t tail;  /* written by the producer; the futex word */
  _Atomic uint32_t head;  /* written by the consumer */
  _Atomic int sleeping;   /* the consumer is (about to be) in futex_wait */
  int spin_iters;         /* polls before sleeping */
  uint64_t poll_min_ns, poll_max_ns; /* sleep between polls in an iteration */
} eng_ring;

/* ---- Plans as the engine runs them --------------------------------------- */

/* One collective: the tensors of a plan group that share a dtype. */
typedef struct eng_msg {
  size_t group;       /* launch-order index of its plan group */
  gs_dtype dtype;
  size_t n;           /* tensors */
  int *ids;           /* registered ids, ascending */
  size_t *off;        /* element offset of each in the fusion buffer */
  size_t count;       /* elements */
  size_t padded;      /* dear: count rounded up to a multiple of p */
  size_t bytes;       /* count * dtype size */
  void *fusion;       /* NULL: reduced in place in its one tensor's buffer */
  char *label;        /* tensor names, for the timeline */
  int xchg;           /* -1: dense; else the gs_xchg it is sent compressed
                         through (f32 messages only) */
  gs_compress_state *zst; /* its compressor state when compressed */
} eng_msg;

typedef struct eng_plan {
  gs_plan *plan;        /* groups over comm indices (tensors with count > 0) */
  gs_profile *profile;  /* the profile it was made from */
  gs_plan_cost cost;
  int cost_measured;
  int warmup;           /* the warm-up plan (wfbp) */
  int dear;             /* reduce-scatter + all-gather */
  size_t ngroups;
  size_t *gmsg;         /* messages of group g: gmsg[g] .. gmsg[g+1]-1 */
  eng_msg *msgs;
  size_t nmsgs;
  size_t *group_of;     /* comm index -> group */
  size_t *gsize;        /* comm tensors per group */
} eng_plan;

/* OP_XCHG: a compressed exchange, run to completion by the launch thread
 * (gs_compress_allreduce) before it is queued; its request is NULL. */
typedef enum { OP_ALLREDUCE = 0, OP_RS, OP_AG, OP_XCHG, OP_COUNT } eng_op;

typedef struct eng_inflight {
  gs_request *req;
  gs_status xst;      /* OP_XCHG: the exchange's status */
  uint64_t xbytes;    /* OP_XCHG: payload bytes this rank sent */
  eng_op op;
  eng_msg *msg;
  uint64_t seq;
  uint64_t iter;
  uint64_t issue_ns;
} eng_inflight;

typedef struct eng_tensor {
  char *name;
  void *buf;
  size_t count;
  gs_dtype dtype;
  long comm;            /* index among tensors with count > 0, or -1 */
  uint64_t marked;      /* training thread: iteration + 1 of the last mark */
  /* (mu) Compressor memory set for the tensor (gs_engine_memory_set) that
   * no compressed message holds yet: a state of the tensor's own, moved
   * into its message when a plan puts it in a compressed one. */
  gs_compress_state *zpending;
} eng_tensor;

/* One message's duration, for the cost fit. */
typedef struct eng_sample {
  eng_op op;
  double bytes, secs;
} eng_sample;

#define ENG_SAMPLES 4096

typedef gs__timeline eng_timeline;

struct gs_engine {
  gs_comm *comm;
  int rank, size;
  gs_plan_policy policy;
  char *policy_spec;
  int warmup_iters, replan_interval, forward_overlap;
  int cost_curve;                 /* plan with the measured curve */
  int rsag_measured;              /* rank 0: cost.rs/ag fitted, not halves */
  double replan_drift;
  int needs_profile;    /* mgwfbp, optimal, dear, auto */

  eng_tensor *tensors;
  size_t ntensors, cap_tensors;
  size_t ncomm;         /* tensors with count > 0 */
  long *comm_ids;       /* comm index -> registered id */
  int frozen;           /* registration closed, threads running */

  /* Training thread. */
  uint64_t iter;        /* completed gs_engine_wait calls */
  int started;          /* EV_START pushed for the current iteration */
  uint64_t iter_start_ns, fwd_wait_ns;

  eng_ring ring;
  pthread_t launch_thread, completion_thread;
  int threads_started;

  pthread_mutex_t mu;
  pthread_cond_t cv_inflight;   /* completion thread: work arrived */
  pthread_cond_t cv_done;       /* waiters: progress was made */
  _Atomic int failed;           /* a gs_status, 0 while healthy */
  char failure[1024];           /* (mu) */
  eng_plan *plan;               /* (mu) to swap; the launch thread installs */
  eng_inflight *fifo;           /* (mu) ring of issued collectives */
  size_t fifo_cap, fifo_head, fifo_len;
  uint64_t issued_seq, completed_seq;   /* (mu) */
  uint64_t flushed_iter;        /* (mu) iterations whose flush was processed */
  uint64_t flush_seq;           /* (mu) last seq issued by that flush */
  int flush_dear;               /* (mu) that iteration ran a dear plan */
  uint64_t *t_iter, *t_seq;     /* (mu) per comm tensor: the result of
                                   iteration t_iter-1 arrives with t_seq */
  /* Dear's all-gathers of iteration ag_iter, issued in forward order. */
  int ag_pending;               /* (mu) */
  uint64_t ag_iter;             /* (mu) */
  size_t ag_next;               /* (mu) forward-order index of the next */
  uint64_t ag_last_seq;         /* (mu) */
  int stopping;                 /* (mu) completion thread may exit */
  uint64_t prev_end_ns;         /* (mu) end of the previous collective */
  eng_sample *samples;          /* (mu) ring of ENG_SAMPLES */
  size_t nsamples;              /* (mu) total ever recorded */
  gs_engine_stats stats;        /* (mu) */

  /* Launch thread. */
  uint64_t liter;               /* the iteration it is processing */
  int iter_open;                /* between START and FLUSH */
  unsigned char *ready;         /* per comm tensor, this iteration */
  uint64_t *stamp;              /* per comm tensor, ready stamp (ns) */
  size_t *pending;              /* per group, tensors not yet ready */
  size_t next_group;
  uint64_t it_start_ns, it_fwd_wait_ns;
  /* Profiler window (rank 0 uses it to plan). */
  double *w_bwd;                /* per comm tensor, summed backward_s */
  double w_fwd;
  size_t w_n;
  gs_plan_cost cost;            /* latest cost known on this rank */
  int cost_measured;

  eng_timeline *timeline;

  /* Compression (NULL zc: dense). The launch thread runs the exchanges. */
  gs_compressor *zc;
  int zrequired;                /* spec without "auto:": every f32 group */
  int zef;                      /* error feedback */
  int zmerged;                   /* select over whole messages */
  gs_compress_opts zopts;
  _Atomic uint64_t zlr_bits;    /* gs_engine_set_lr's rate (double bits; 0:
                                   none), read by the launch thread */
  char *zspec;                  /* as given, for messages */
  unsigned zkinds;              /* GS_COMPRESS_MEM_* its states keep */
  gs_xchg_ws *zws;              /* launch thread */
  gs_cost_coding zcoding;       /* the coding time the plan prices
                                   (npoints 0 until the first plan): every
                                   rank measures it then, at the model's
                                   sizes, and keeps the slowest rank's
                                   (eng_measure_coding): the same on every
                                   rank */

  /* Agreement points (engine_plan.c): a per-rank status vector, summed. */
  double *plan_body;            /* launch thread: the plan broadcast's body */

  /* The stall watchdog. Progress is any collective completing, any event
   * the launch thread handles and any control exchange ending. */
  double warn_s, timeout_s;     /* gs_comm_stall_warn_s / gs_comm_timeout_s */
  _Atomic uint64_t progress_ns; /* time of the last progress */
  const char *ctl_phase;        /* (mu) the control exchange under way */
  uint64_t ctl_iter;            /* (mu) its iteration */
  eng_inflight cur;             /* (mu) the collective the completion thread */
  int cur_valid;                /*      waits for, if any */
  int launch_exited, completion_exited; /* (mu) */
};

/* A training-thread wait with the stall watchdog (engine.c). */
typedef struct eng_watch {
  const char *call;     /* "gs_engine_wait", ... */
  int id;               /* wait_tensor's tensor, else -1 */
  uint64_t start_ns;
  uint64_t warned_for;  /* the progress time the warning was printed for */
} eng_watch;

/* engine.c */
void eng_fail(gs_engine *e, gs_status st, const char *msg);
gs_status eng_issue_locked(gs_engine *e, eng_msg *m, eng_op op, uint64_t iter);
/* Queues a compressed exchange that the launch thread has already run
 * (status xst, xbytes payload bytes sent), with mu held. */
void eng_push_xchg_locked(gs_engine *e, eng_msg *m, uint64_t iter, uint64_t issue_ns,
                          gs_status xst, uint64_t xbytes);
void eng_wait_drained_locked(gs_engine *e);
void eng_progress(gs_engine *e);
void eng_set_phase(gs_engine *e, const char *phase, uint64_t iter);

/* engine_plan.c: control exchanges and the profiler (launch thread). */
gs_status eng_check_registration(gs_engine *e);
gs_status eng_plan_step(gs_engine *e, uint64_t iter);
void eng_profile_iteration(gs_engine *e, uint64_t flush_ns);
void eng_plan_free(eng_plan *p);
gs_status eng_copy_plan(const eng_plan *p, gs_plan **out);
gs_status eng_copy_profile(const gs_profile *p, gs_profile **out);
/* Moves the tensors' pending compressor memory into the compressed
 * messages of plan p that hold them (with mu held, no exchange running). */
void eng_install_memory(gs_engine *e, eng_plan *p);
/* The compressed alternatives for the planner under the engine's current
 * cost (rank 0); x->n = 0 without compression. */
gs_status eng_xchg_costs(gs_engine *e, gs_plan_xchg *x);
/* Agreement point: every rank contributes its status (`mine`, with its
 * message in gs_last_error() when not GS_OK) to one gs_agree on the
 * communicator. Returns GS_OK on every rank if all are;
 * otherwise the failing ranks keep their own error and the others get the
 * first failing rank's status with a message naming the ranks that failed
 * to do `what`. */
gs_status eng_agree_on(gs_comm *comm, gs_status mine, const char *what);
gs_status eng_agree(gs_engine *e, gs_status mine, const char *what);

/* The engine's timeline (src/core/timeline.c): the compute, comm and wait
 * rows of a rank, then callers' (gs_engine_trace). */
enum { TL_COMPUTE = 1, TL_COMM = 2, TL_WAIT = 3 };
static inline gs_status tl_open(const char *path, int rank, int size, eng_timeline **out) {
  static const char *const tracks[] = {"compute", "comm", "wait"};
  return gs__timeline_open(path, rank, size, "gradsync engine",
                           "GRADSYNC_TIMELINE or cfg.timeline", tracks, 3, out);
}
#define tl_free gs__timeline_free
#define tl_event gs__timeline_event
#define tl_write gs__timeline_write
#define tl_caller_track gs__timeline_track

#endif /* GS_ENGINE_INTERNAL_H */
