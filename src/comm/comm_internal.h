/*
 * Internals of the communicator: the queued collective, the progress thread's
 * state, and the algorithms' entry points. Only src/comm/ includes this.
 */
#ifndef GS_COMM_INTERNAL_H
#define GS_COMM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include <mpi.h>

#include "gradsync/comm.h"
#include "gradsync/cost.h"
#include "gs_internal.h"

typedef enum {
  COLL_ALLREDUCE = 1,
  COLL_REDUCE_SCATTER,
  COLL_ALLGATHER,
  COLL_ALLGATHERV,
  COLL_BCAST,
  COLL_ALLTOALL,
  COLL_ALLTOALLV,
  COLL_BARRIER,
  /* The sparse collectives (sparse_*.c); their arguments are in `sparse`. */
  COLL_SPARSE_ALLGATHER,
  COLL_SPARSE_ALLREDUCE,
  COLL_GTOPK,
  COLL_HITOPK,
} coll_kind;

#define COLL_IS_SPARSE(kind) ((kind) >= COLL_SPARSE_ALLGATHER)

const char *coll_kind_name(coll_kind kind);

/* One collective as issued. Count arrays are owned copies. */
typedef struct coll_args {
  coll_kind kind;
  gs_algo algo;          /* resolved: never GS_ALGO_AUTO */
  const void *sendbuf;   /* NULL when in place */
  void *recvbuf;
  size_t count;          /* allreduce: count; RS: recvcount; AG: sendcount;
                            bcast: count; alltoall: per-peer count */
  gs_dtype dtype;
  gs_redop op;
  int root;
  size_t *counts, *displs;    /* allgatherv: recv; alltoallv: send */
  size_t *rcounts, *rdispls;  /* alltoallv: recv */
  struct sparse_args *sparse; /* sparse collectives: owned, sparse_args_free */
} coll_args;

struct gs_request {
  coll_args args;
  struct gs_request *next;
  gs_comm *comm;
  gs_status status;
  atomic_int done;       /* set under comm->mu; read without it to spin */
  char message[1024];
};

/* The group an algorithm runs on: the whole communicator, or one of its
 * node-local or cross-node sub-communicators (hierarchical allreduce). */
typedef struct coll_group {
  MPI_Comm mpi;
  int rank, size;
  /* The communicator's progress stamp (see gs_comm.progress_ns): waits that
   * complete store the time in it, so the watchdog can tell a long healthy
   * collective from a stalled one. */
  _Atomic uint64_t *progress;
  /* The communicator the group belongs to, or NULL (agree.c's bare
   * exchange): comm_waitall looks for peers that left on its behalf. */
  struct gs_comm *owner;
} coll_group;

/* Stamps progress on a group's communicator: one clock read (vDSO, no
 * system call) and one relaxed atomic store. */
static inline void comm_progress(const coll_group *g) {
  if (g->progress)
    atomic_store_explicit(g->progress, gs_now_ns(), memory_order_relaxed);
}

/* GRADSYNC_FAULT: the test-only fault injector (fault.c). */
typedef enum { FAULT_NONE = 0, FAULT_ERROR, FAULT_STALL } fault_kind;

struct gs_comm {
  MPI_Comm given;        /* the communicator gs_comm_create was given (not ours) */
  coll_group world, local, cross;
  int node, nodes;
  int uniform_nodes;     /* every node has the same number of ranks */
  gs_cost_params cost;
  int check;             /* GRADSYNC_CHECK */
  gs_algo forced_allreduce; /* GRADSYNC_ALLREDUCE_ALGO or GS_ALGO_AUTO */
  size_t segment_bytes;  /* pipelining segment of ring and chain */
  size_t calibrate_bytes; /* GRADSYNC_CALIBRATE: start-up fit up to this */
  double timeout_s;       /* GRADSYNC_TIMEOUT: 0 = never */
  double stall_warn_s;    /* GRADSYNC_STALL_WARN: 0 = never */
  int cost_from_env;      /* GRADSYNC_COST_FILE or GRADSYNC_ALPHA/BETA set it */
  const char *cost_cache; /* GRADSYNC_COST_CACHE: rank 0 saves the calibration there */
  int have_env_cost;      /* GRADSYNC_ALPHA and GRADSYNC_BETA are both set */
  double env_alpha, env_beta;
  uint64_t cost_file_hash; /* FNV-1a of GRADSYNC_COST_FILE's bytes; 0 unset */
  uint64_t cost_cache_hash; /* FNV-1a of GRADSYNC_COST_CACHE's path; 0 unset */
  int env_node;           /* GRADSYNC_NODE, or -1 */
  int thread_level;       /* MPI_Query_thread at gs_comm_create */

  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv_work, cv_done;
  gs_request *head, *tail;   /* guarded by mu */
  int stopping;              /* guarded by mu */
  atomic_int queued;         /* requests enqueued, read without mu to spin */
  int thread_sleeping;       /* guarded by mu: the thread waits on cv_work */
  int waiters;               /* guarded by mu: threads waiting on cv_done */
  double spin_s;             /* GRADSYNC_SPIN_US: spin before sleeping */
  atomic_int failed;         /* set after an MPI error or by gs_comm_abort */
  char failure[1024];        /* written before `failed`, by the progress thread */

  /* The watchdog. The progress thread publishes the request it runs: its
   * description, then its sequence number in run_seq (0 between requests),
   * and stamps progress_ns when it starts it and whenever a wait inside it
   * completes. The watchdog thread (and gs_wait, as a backstop) read them
   * without locks; a stall is run_seq != 0 with progress_ns too old. */
  _Atomic uint64_t seq;         /* requests started; written by the thread */
  _Atomic uint64_t run_seq;
  _Atomic uint64_t progress_ns;
  atomic_int run_kind, run_dtype, run_algo;
  _Atomic size_t run_count;
  _Atomic uint64_t warned_seq;  /* the last request warned about */
  atomic_int aborting;
  /* Set by the progress thread while it blocks inside MPI (MPI's own
   * collectives, GRADSYNC_CHECK's allgather): only then does the watchdog
   * read the goodbyes itself (see watchdog_leave_look). */
  atomic_int in_mpi_block;
  _Atomic uint64_t user_base;   /* seq when gs_comm_create returned */
  double wd_tick_s;             /* how often the watchdog looks */
  pthread_t watchdog;
  int watchdog_running;
  pthread_mutex_t wd_mu;
  pthread_cond_t wd_cv;
  int wd_stop;                  /* guarded by wd_mu */

  /* Leaving (leave.c): ctrl, a duplicate of the world's, carries goodbyes;
   * enqueued counts the requests ever queued (the number of the last one);
   * left and byes (what this rank sent) are guarded by mu, peer_bye (what
   * each peer sent last, and when it came) by bye_mu. */
  MPI_Comm ctrl;
  uint64_t nonce;      /* rank 0's at config_agree: this communicator's identity */
  uint64_t enqueued;
  int left;
  struct bye_msg *byes;
  struct peer_bye {
    uint64_t count; /* the peer's last count + 1; 0 = it has not left */
    double at;      /* gs_now() when that count arrived */
  } *peer_bye;
  pthread_mutex_t bye_mu;

  /* GRADSYNC_FAULT: on rank fault_rank, the fault_call-th collective after
   * gs_comm_create fails (FAULT_ERROR) or never completes (FAULT_STALL). */
  fault_kind fault;
  int fault_rank;
  uint64_t fault_call;
  char fault_spec[128];

  /* Node-local shared memory (shm.c): shm_seg is NULL when it is unused.
   * Local rank r's area starts at r * 2 * local.size pieces: two halves of
   * local.size pieces. */
  char *shm_seg;             /* the node's segment, mapped */
  size_t shm_seg_bytes;
  size_t shm_piece;          /* bytes of one piece */
  uint64_t shm_round;        /* rounds run: which half is next (thread) */

  /* Scratch memory, touched only by the progress thread. */
  void *scratch;
  size_t scratch_bytes;
  void *work;
  size_t work_bytes;
};

/* Grows one of the comm's scratch areas to at least `bytes`. */
gs_status comm_scratch(gs_comm *c, void **area, size_t *cap, size_t bytes,
                       void **out);

/* Queues a request for the progress thread. */
gs_status comm_enqueue(gs_comm *c, gs_request *req);

/* Leaving (leave.c). leave_usable: the communicator can send and read
 * goodbyes (a control duplicate, MPI_THREAD_MULTIPLE). leave_send_locked
 * (c->mu held): tells every peer this rank's count of enqueued requests.
 * leave_check: during a stall of request `seq` (described by `what`) for
 * `stalled` seconds, ends the job if a peer has left without enqueuing it. leave_free: at destroy. */
int leave_usable(const gs_comm *c);
gs_status leave_send_locked(gs_comm *c, uint64_t count);
void leave_check(gs_comm *c, uint64_t seq, double stalled, const char *what);
void leave_free(gs_comm *c);

/* Keeps memory MPI may still touch until gs_finalize has finalized MPI. */
void orphan_free_later(void *p);

/* Marks c failed, and this process as one whose MPI gs_finalize leaves
 * running (comm.c). */
void comm_mark_failed(gs_comm *c);

/* Turns an MPI error code into a gs_status with a message. */
gs_status comm_mpi_error(const coll_group *g, const char *what, int rc);
#define MPI_TRY(g, call)                                                  \
  do {                                                                    \
    int mpi__rc = (call);                                                 \
    if (mpi__rc != MPI_SUCCESS) return comm_mpi_error((g), #call, mpi__rc); \
  } while (0)

/* Bounds that keep large messages working in bounded memory (p2p.c).
 * comm_window_bytes(): the scratch memory one algorithm may use (64 MiB);
 * larger messages are processed in windows of this size.
 * comm_mpi_max_bytes(): the bytes one MPI call moves at most (1 GiB), so that
 * no count, element or byte, reaches INT_MAX. MPI's own temporary buffers
 * are MPI's: Open MPI's allreduce takes half a call's bytes. 64 MiB calls
 * would bound them further but made a 2 GiB allreduce of MPI's slower (74 s
 * against 45 s on a loaded 2-core machine: a fresh temporary per call). GRADSYNC_TEST_WINDOW_BYTES
 * lowers both, so that tests reach the windowed paths with small messages;
 * like every setting that changes what a rank sends, it must be the same on
 * every rank. */
size_t comm_window_bytes(void);
size_t comm_mpi_max_bytes(void);
/* The bytes of one allgatherv/alltoallv MPI call, which cannot be cut into
 * windows: INT_MAX (or the test window). */
size_t comm_mpi_v_max_bytes(void);

/* Balanced split of `count` elements into `parts` blocks: block i starts at
 * i*(count/parts) + min(i, count%parts). */
void split_blocks(size_t count, int parts, size_t *off, size_t *len);

/* ---- Algorithms (run on the progress thread) ----------------------------
 * `buf` is the in-place working buffer. */

/* Pipelined ring over a chunk table of g->size chunks. With do_rs, a
 * reduce-scatter leaves rank r with the reduction of chunk r; with do_ag, an
 * allgather then spreads chunk r of every rank r. scale_avg divides the owned
 * chunk by `avg_div` between the phases (GS_AVG). */
gs_status ring_run(gs_comm *c, const coll_group *g, void *buf, const size_t *off,
                   const size_t *len, gs_dtype dtype, gs_redop op, int do_rs,
                   int do_ag, int avg_div);

/* Node-local shared memory (shm.c). shm_init (collective over the world, at
 * gs_comm_create) maps one POSIX shared-memory segment per node of several
 * ranks that share memory, unless some rank set GRADSYNC_SHM=0; shm_free
 * unmaps it (local, never blocks). shm_run does what ring_run does on the local group, through
 * that memory; local_run takes it when it is there and the ring otherwise.
 * Their src (NULL: buf) is where a reduce-scatter reads the whole tensor
 * from; it writes only this rank's shard of buf (the ring first copies src
 * into buf), so the caller need not copy the input into buf beforehand.
 * shm_calibrate measures its latency and time per byte for the cost model
 * (collective over the local group). */
gs_status shm_init(gs_comm *c);
void shm_free(gs_comm *c);
int shm_active(const gs_comm *c);
gs_status shm_run(gs_comm *c, const void *src, void *buf, const size_t *off,
                  const size_t *len, gs_dtype dtype, gs_redop op, int do_rs,
                  int do_ag, int avg_div);
gs_status local_run(gs_comm *c, const void *src, void *buf, const size_t *off,
                    const size_t *len, gs_dtype dtype, gs_redop op, int do_rs,
                    int do_ag, int avg_div);
gs_status shm_calibrate(gs_comm *c, double *alpha, double *beta);

/* The two exchange sizes whose time difference gives a group's time per byte
 * at start-up (calibrate_group in calibrate.c, shm_calibrate). */
#define CALIB_MID_BYTES ((size_t)512 * 1024)
#define CALIB_BIG_BYTES ((size_t)2 * 1024 * 1024)

/* Reduce-scatter of `count` elements per rank with the ring. Out of place
 * (sendbuf != NULL), the input is copied into scratch one window of every
 * block at a time, so scratch stays within comm_window_bytes(). */
gs_status reduce_scatter_ring(gs_comm *c, const coll_group *g,
                              const void *sendbuf, void *recvbuf, size_t count,
                              gs_dtype dtype, gs_redop op, int avg_div);
gs_status allreduce_ring(gs_comm *c, const coll_group *g, void *buf,
                         size_t count, gs_dtype dtype, gs_redop op, int avg_div);
gs_status allreduce_rd(gs_comm *c, const coll_group *g, void *buf, size_t count,
                       gs_dtype dtype, gs_redop op, int avg_div);
gs_status allreduce_rabenseifner(gs_comm *c, const coll_group *g, void *buf,
                                 size_t count, gs_dtype dtype, gs_redop op,
                                 int avg_div);
gs_status allreduce_hier(gs_comm *c, void *buf, size_t count, gs_dtype dtype,
                         gs_redop op);
gs_status bcast_pipeline(gs_comm *c, const coll_group *g, void *buf,
                         size_t bytes, int root);
gs_status bcast_binomial(gs_comm *c, const coll_group *g, void *buf,
                         size_t bytes, int root);
gs_status alltoallv_pairwise(gs_comm *c, const coll_group *g,
                             const void *sendbuf, const size_t *scounts,
                             const size_t *sdispls, void *recvbuf,
                             const size_t *rcounts, const size_t *rdispls,
                             size_t esize);
gs_status barrier_dissemination(const coll_group *g);

/* Non-power-of-two groups in recursive doubling and Rabenseifner: of the
 * first 2*rem ranks each even one folds its vector into the odd one above
 * (fold_in) and gets the result back at the end (fold_out); the others are
 * renumbered into a power-of-two core. fold_newrank is -1 for a folded
 * rank. */
int fold_newrank(int rank, int rem);
int fold_realrank(int newrank, int rem);
gs_status fold_in(const coll_group *g, void *buf, void *tmp, size_t count,
                  gs_dtype dtype, gs_redop op, int rem, int tag);
gs_status fold_out(const coll_group *g, void *buf, size_t bytes, int rem,
                   int tag);

/* MPI's own collectives, the peer (mpi_coll.c): one per collective. */
gs_status mpi_allreduce(gs_comm *c, coll_args *a);
gs_status mpi_reduce_scatter(gs_comm *c, coll_args *a);
gs_status mpi_allgather(gs_comm *c, coll_args *a);
gs_status mpi_allgatherv(gs_comm *c, coll_args *a);
gs_status mpi_bcast(gs_comm *c, coll_args *a);
gs_status mpi_alltoall(gs_comm *c, coll_args *a);
gs_status mpi_alltoallv(gs_comm *c, coll_args *a);
gs_status mpi_barrier(gs_comm *c, coll_args *a);

/* Completes n requests, polling briefly and then sleeping between polls
 * (see p2p.c); the MPI error of a failure becomes a message naming `what`. */
gs_status comm_waitall(const coll_group *g, int n, MPI_Request *reqs,
                       const char *what);

/* Point-to-point exchange, in 1 MiB pieces posted together. */
gs_status p2p_sendrecv(const coll_group *g, const void *sbuf, size_t sbytes,
                       int dst, void *rbuf, size_t rbytes, int src, int tag);

/* n such exchanges at once (at most P2P_MAX_PAIRS): pair i sends sbytes[i]
 * from sbuf[i] to dst[i] and receives rbytes[i] into rbuf[i] from src[i],
 * every pair's pieces posted together (in batches) before any is waited on.
 * The destinations are distinct, and so are the sources; the peers call it
 * with the same n. */
#define P2P_MAX_PAIRS 16
gs_status p2p_sendrecv_n(const coll_group *g, int n, const void *const *sbuf,
                         const size_t *sbytes, const int *dst, void *const *rbuf,
                         const size_t *rbytes, const int *src, int tag);

/* Tags of gradsync's point-to-point traffic, one per algorithm. */
enum {
  TAG_RING = 100,
  TAG_RD,
  TAG_RAB,
  TAG_BCAST,
  TAG_A2A,
  TAG_BARRIER,
  TAG_CALIB,
  TAG_SPARSE,
  TAG_BYE, /* leave.c, on the control duplicate */
};

/* ---- Sparse collectives (sparse_coll.c) ---------------------------------- */
struct sparse_args;
void sparse_args_free(struct sparse_args *s);

/* ---- The table of algorithms (dispatch.c) ---------------------------------
 * One row per collective and algorithm that implements it: adding an
 * algorithm is one row. coll.c rejects an algorithm without a row ("does not
 * implement it"); the progress thread runs the row's function. */
typedef gs_status (*coll_run_fn)(gs_comm *c, coll_args *a);
typedef struct coll_algo_row {
  coll_kind kind;
  gs_algo algo;     /* GS_ALGO_AUTO: the collective chooses itself (sparse) */
  coll_run_fn run;  /* on the progress thread */
} coll_algo_row;

/* The row of `kind` implemented by `algo`, or NULL. */
const coll_algo_row *coll_algo_find(coll_kind kind, gs_algo algo);
/* The collective's first row's algorithm: its default where the cost model
 * has no say. */
gs_algo coll_algo_default(coll_kind kind);
/* The algorithms implementing `kind` in table order, at most max; returns
 * their number. */
size_t coll_algo_list(coll_kind kind, gs_algo *out, size_t max);
/* Runs a request on the progress thread: GRADSYNC_CHECK's consistency
 * check, then its row of the table. */
gs_status coll_execute(gs_comm *c, coll_args *a);

/* ---- The progress thread (progress.c) ------------------------------------ */
void *progress_main(void *arg);

/* ---- The watchdog (watchdog.c) --------------------------------------------
 * watchdog_begin/end publish the request the progress thread runs;
 * watchdog_check looks at it once (from the watchdog thread, or gs_wait as a
 * backstop), warns or ends the job; watchdog_tick is how often, 0 for
 * never. */
void watchdog_begin(gs_comm *c, const coll_args *a, uint64_t seq);
void watchdog_end(gs_comm *c);
void watchdog_check(gs_comm *c);
/* Reads the peers' goodbyes during a stall of the running request and ends
 * the job if one left without issuing it (leave_check). MPI is called only
 * from the thread that runs the request (comm_waitall, on the progress
 * thread), or from the watchdog while that thread blocks inside MPI: two
 * threads of one process in Open MPI's progress engine at once can deadlock
 * in its shared-memory transport (it takes two locks in both orders; see
 * tests/tsan.supp): the likeliest cause of comm_mismatch_np3's one hang
 * under TSan, where the watchdog's reads were the only second caller. */
void watchdog_leave_look(gs_comm *c);
double watchdog_tick(const gs_comm *c);
void *watchdog_main(void *arg);
/* Stops the watchdog thread; after the progress thread, which it may have to
 * end. */
void watchdog_stop(gs_comm *c);
/* An absolute CLOCK_MONOTONIC time `secs` from now. */
struct timespec watchdog_deadline(double secs);
/* What a user reads for request `seq`: "collective #N, KIND(count=...)",
 * N counted from 1 after gs_comm_create returned, or "start-up collective
 * #N" for gs_comm_create's own. */
void comm_describe_request(const gs_comm *c, uint64_t seq, coll_kind kind,
                           size_t count, gs_dtype dtype, gs_algo algo,
                           char *out, size_t n);

/* ---- Fault injection (fault.c) -------------------------------------------- */
gs_status fault_parse(gs_comm *c, const char *spec);
/* Whether request `seq` is the one GRADSYNC_FAULT names on this rank. */
int fault_due(const gs_comm *c, uint64_t seq);
/* Fails the request as a transport error would, or never returns (stall). */
gs_status fault_inject(gs_comm *c, const coll_args *a, uint64_t seq);

/* ---- Configuration (config.c) and cost model (calibrate.c) ----------------
 * Collective over the world, on the caller's thread, at gs_comm_create:
 * config_read reads this rank's GRADSYNC_* settings (local), config_agree
 * agrees on its status and on the settings; calibrate_setup sets the cost
 * model up. */
gs_status config_read(gs_comm *c);
gs_status config_agree(gs_comm *c, gs_status local);
gs_status calibrate_setup(gs_comm *c);
/* GRADSYNC_COST_CACHE: rank 0 saves the model just calibrated (a warning
 * if it cannot: the job goes on). */
void calibrate_cache_save(gs_comm *c);

#endif /* GS_COMM_INTERNAL_H */
