/*
 * gradsync communicators and collectives.
 *
 * A gs_comm wraps an MPI communicator. It duplicates it (so gradsync's
 * messages never mix with the application's), splits it into node-local and
 * cross-node sub-communicators, and owns one background progress thread that
 * makes every MPI call of gradsync's collectives. The public API is
 * non-blocking: a collective is queued and returns a gs_request; requests run
 * in the order they were issued, one at a time. Blocking wrappers issue and
 * wait.
 *
 * Ownership: the caller owns every buffer. From the call that issues a
 * collective until gs_wait (or a gs_test that reports completion) the caller
 * must neither free nor write the buffers, nor read the output buffer; after
 * that gradsync never touches them again. Count arrays of the v-variants
 * (allgatherv, alltoallv) are copied at issue time.
 *
 * Every rank must issue the same collectives, in the same order, with the
 * same count, dtype, op and root, as with MPI. GRADSYNC_CHECK=1 verifies this
 * before each collective and turns a mismatch into GS_ERR_MISMATCH on every
 * rank, naming the ranks that differ.
 */
#ifndef GRADSYNC_COMM_H
#define GRADSYNC_COMM_H

#include <mpi.h>

#include "gradsync/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pass as the send buffer to reduce in place in the receive buffer. */
#define GS_IN_PLACE ((const void *)1)

typedef struct gs_comm gs_comm;
typedef struct gs_request gs_request;

/* ---- The MPI thread contract ----------------------------------------------
 * Between gs_comm_create and gs_comm_destroy a communicator's progress
 * thread makes every MPI call of its collectives, and its watchdog thread
 * may call MPI_Abort (see Reliability below). What MPI must provide:
 *   - gradsync alone (the application makes no MPI call while a gs_comm
 *     exists): MPI_THREAD_SERIALIZED. gs_comm_create refuses a lower level
 *     with GS_ERR_UNSUPPORTED, also when the application initialised MPI.
 *   - an application that calls MPI itself (on its own communicators, or
 *     MPI_Abort) while a gs_comm exists, or several gs_comms used from
 *     different threads: MPI_THREAD_MULTIPLE, since its calls may overlap
 *     the progress thread's. gs_comm_thread_level says which it got.
 * The watchdog's MPI_Abort may overlap a progress thread blocked inside
 * MPI; MPI guarantees that only under MPI_THREAD_MULTIPLE (Open MPI and
 * MPICH abort the job at any level, through their process manager).
 * gs_init asks for MPI_THREAD_MULTIPLE.
 *
 * Initialises MPI with MPI_THREAD_MULTIPLE if the application has not done so
 * (gs_finalize then finalizes it). Either may be called with NULL args. */
gs_status gs_init(int *argc, char ***argv);
gs_status gs_finalize(void);

/* Creates a communicator over the ranks of mpi_comm (collective over it).
 * The node of a rank is the set of ranks sharing memory with it, or, when
 * GRADSYNC_NODE is set (as `gradsync run --net` does), the ranks with the
 * same GRADSYNC_NODE value. The cost model's parameters come from
 * GRADSYNC_COST_FILE (saved by gradsync bench --cost-out) or
 * GRADSYNC_ALPHA/GRADSYNC_BETA (seconds, seconds per byte) if set; otherwise
 * from a ring exchange agreed on by all ranks, refined by timing each
 * allreduce algorithm up to 4 MiB (gs_comm_calibrate; GRADSYNC_CALIBRATE=0
 * turns that off, GRADSYNC_CALIBRATE=BYTES sets the largest size). On a
 * 1 Gbit/s network with 8 nodes this takes about two seconds.
 *
 * Every setting that changes what a rank sends must be the same on every
 * rank: GRADSYNC_SEGMENT_BYTES, GRADSYNC_ALLREDUCE_ALGO, GRADSYNC_CALIBRATE,
 * GRADSYNC_SPIN_US, GRADSYNC_CHECK, GRADSYNC_TIMEOUT, GRADSYNC_STALL_WARN,
 * GRADSYNC_ALPHA/GRADSYNC_BETA and the contents of GRADSYNC_COST_FILE.
 * gs_comm_create compares them across ranks and returns GS_ERR_MISMATCH on
 * every rank, naming the settings and the ranks that differ; the measured
 * cost model is then rank 0's on every rank. A rank that cannot set up
 * (a malformed setting, a thread level below MPI_THREAD_SERIALIZED) fails
 * with its own error, and every other rank with an error naming it: no
 * rank is left waiting in a collective the failed one never joins. */
gs_status gs_comm_create(MPI_Comm mpi_comm, gs_comm **out);

/* Waits for the queued collectives, stops the progress thread and frees the
 * communicator (collective). NULL is a no-op. */
gs_status gs_comm_destroy(gs_comm *comm);

int gs_comm_rank(const gs_comm *comm);
int gs_comm_size(const gs_comm *comm);
int gs_comm_local_rank(const gs_comm *comm);  /* rank within the node */
int gs_comm_local_size(const gs_comm *comm);  /* ranks on this node */
int gs_comm_node(const gs_comm *comm);        /* index of this node */
int gs_comm_nodes(const gs_comm *comm);       /* number of nodes */

/* Cost model parameters the communicator chooses algorithms with. */
struct gs_cost_params;
const struct gs_cost_params *gs_comm_cost(const gs_comm *comm);
void gs_comm_set_cost(gs_comm *comm, const struct gs_cost_params *params);

/* The algorithm GS_ALGO_AUTO resolves to for an allreduce of `bytes` bytes
 * (GRADSYNC_ALLREDUCE_ALGO overrides the model). Same on every rank. */
gs_algo gs_comm_choose_allreduce(const gs_comm *comm, size_t bytes);

/* Measures every allreduce algorithm over sizes from 4 KB up to max_bytes
 * (collective; it takes seconds on a 1 Gbit/s network), fits each one's
 * alpha and beta with gs_cost_fit_algo, and makes GS_ALGO_AUTO choose with
 * the fits. `gradsync bench` does this first unless told not to; save the
 * result with gs_cost_save and load it through GRADSYNC_COST_FILE. */
gs_status gs_comm_calibrate(gs_comm *comm, size_t max_bytes);

/* The thread level MPI provides (MPI_THREAD_SERIALIZED or
 * MPI_THREAD_MULTIPLE, as from MPI_Query_thread at gs_comm_create). An
 * application may call MPI from its own threads while this communicator
 * exists only if it is MPI_THREAD_MULTIPLE. */
int gs_comm_thread_level(const gs_comm *comm);

/* ---- Reliability ---------------------------------------------------------
 * No rank waits forever. GRADSYNC_TIMEOUT (seconds, default 300; 0 turns it
 * off) bounds how long a collective or an engine wait may make no progress
 * before the job is ended with a message; GRADSYNC_STALL_WARN (seconds,
 * default 60 as in Horovod; 0 turns it off) is when a stall is first
 * reported. Both are read by gs_comm_create and agreed across ranks.
 *
 * A watchdog thread (one per communicator, started by gs_comm_create when
 * either is set, waking every quarter of the shorter one, at most once a
 * second) watches the collective the progress thread runs. Progress is the
 * start of a collective and, inside gradsync's own algorithms, every
 * completed message piece; an idle communicator never stalls. After
 * GRADSYNC_STALL_WARN seconds without progress it prints, once per
 * collective, "gradsync: rank R: warning: collective #N, KIND(count=...,
 * dtype=..., algo=...) has made no progress for S s ..."; after
 * GRADSYNC_TIMEOUT seconds it fails the communicator and ends the job
 * through gs_comm_abort ("gradsync: rank R: fatal: collective #N ...").
 * N counts the collectives issued since gs_comm_create returned, from 1.
 * MPI's own collectives (GS_ALGO_MPI) block inside MPI and show progress
 * only when they start, so GRADSYNC_TIMEOUT must exceed the longest of
 * them. gs_wait looks for the same stall while it waits, so it never
 * blocks forever while a timeout is set.
 *
 * A collective that fails on one rank (an MPI error) returns the error on
 * that rank and fails its communicator; the other ranks, waiting for it,
 * end through their watchdog within GRADSYNC_TIMEOUT.
 *
 * GRADSYNC_FAULT="rank=R,call=N[,kind=error|stall]" (tests only) makes
 * the N-th collective after gs_comm_create on rank R fail with GS_ERR_MPI
 * inside the progress thread (kind=error, the default) or never complete
 * (kind=stall). */
double gs_comm_timeout_s(const gs_comm *comm);
double gs_comm_stall_warn_s(const gs_comm *comm);

/* Ends the whole job from any thread: prints "gradsync: rank R: fatal:
 * <message>" on stderr, marks the communicator failed, and calls MPI_Abort
 * on it with `code`. Never returns. For failures that the other ranks cannot
 * learn through a collective (a stalled collective, a dead peer). */
_Noreturn void gs_comm_abort(gs_comm *comm, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- Requests ---------------------------------------------------------- */

/* Blocks until the request completes, frees it and returns its status (with
 * its message in gs_last_error()). NULL is GS_OK. */
gs_status gs_wait(gs_request *req);

/* Sets *done to 1 if the request completed, without blocking. A completed
 * request must still be released with gs_wait, which then returns at once. */
gs_status gs_test(gs_request *req, int *done);

/* ---- Collectives (non-blocking) -----------------------------------------
 * count is in elements. sendbuf may be GS_IN_PLACE where noted. On an
 * argument error nothing is queued and *req is set to NULL. */

/* recvbuf[i] = op over ranks of sendbuf[i], i < count, on every rank. */
gs_status gs_iallreduce(gs_comm *comm, const void *sendbuf, void *recvbuf,
                        size_t count, gs_dtype dtype, gs_redop op,
                        gs_algo algo, gs_request **req);

/* Rank r receives elements [r*recvcount, (r+1)*recvcount) of the reduction of
 * sendbuf (size*recvcount elements). With GS_IN_PLACE, recvbuf holds the
 * size*recvcount input and the result lands in its first recvcount. */
gs_status gs_ireduce_scatter(gs_comm *comm, const void *sendbuf, void *recvbuf,
                             size_t recvcount, gs_dtype dtype, gs_redop op,
                             gs_algo algo, gs_request **req);

/* recvbuf[r*sendcount ...] = rank r's sendbuf. GS_IN_PLACE: each rank's
 * input already sits at its place in recvbuf. */
gs_status gs_iallgather(gs_comm *comm, const void *sendbuf, void *recvbuf,
                        size_t sendcount, gs_dtype dtype, gs_algo algo,
                        gs_request **req);

/* Rank r's sendcount (== recvcounts[r]) elements land at recvbuf + displs[r]
 * (displacements in elements). */
gs_status gs_iallgatherv(gs_comm *comm, const void *sendbuf, size_t sendcount,
                         void *recvbuf, const size_t *recvcounts,
                         const size_t *displs, gs_dtype dtype, gs_algo algo,
                         gs_request **req);

gs_status gs_ibcast(gs_comm *comm, void *buf, size_t count, gs_dtype dtype,
                    int root, gs_algo algo, gs_request **req);

/* Block r of sendbuf (count elements) goes to rank r; block r of recvbuf
 * comes from rank r. */
gs_status gs_ialltoall(gs_comm *comm, const void *sendbuf, void *recvbuf,
                       size_t count, gs_dtype dtype, gs_algo algo,
                       gs_request **req);

gs_status gs_ialltoallv(gs_comm *comm, const void *sendbuf,
                        const size_t *sendcounts, const size_t *sdispls,
                        void *recvbuf, const size_t *recvcounts,
                        const size_t *rdispls, gs_dtype dtype, gs_algo algo,
                        gs_request **req);

gs_status gs_ibarrier(gs_comm *comm, gs_algo algo, gs_request **req);

/* ---- Collectives (blocking): issue, then gs_wait ------------------------ */

gs_status gs_allreduce(gs_comm *comm, const void *sendbuf, void *recvbuf,
                       size_t count, gs_dtype dtype, gs_redop op, gs_algo algo);
gs_status gs_reduce_scatter(gs_comm *comm, const void *sendbuf, void *recvbuf,
                            size_t recvcount, gs_dtype dtype, gs_redop op,
                            gs_algo algo);
gs_status gs_allgather(gs_comm *comm, const void *sendbuf, void *recvbuf,
                       size_t sendcount, gs_dtype dtype, gs_algo algo);
gs_status gs_allgatherv(gs_comm *comm, const void *sendbuf, size_t sendcount,
                        void *recvbuf, const size_t *recvcounts,
                        const size_t *displs, gs_dtype dtype, gs_algo algo);
gs_status gs_bcast(gs_comm *comm, void *buf, size_t count, gs_dtype dtype,
                   int root, gs_algo algo);
gs_status gs_alltoall(gs_comm *comm, const void *sendbuf, void *recvbuf,
                      size_t count, gs_dtype dtype, gs_algo algo);
gs_status gs_alltoallv(gs_comm *comm, const void *sendbuf,
                       const size_t *sendcounts, const size_t *sdispls,
                       void *recvbuf, const size_t *recvcounts,
                       const size_t *rdispls, gs_dtype dtype, gs_algo algo);
gs_status gs_barrier(gs_comm *comm, gs_algo algo);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_COMM_H */
