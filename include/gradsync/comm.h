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
 * (gs_finalize then finalizes it). Either may be called with NULL args.
 * MPI cannot start twice in a process: gs_init (and gs_comm_create) after
 * MPI was finalized is GS_ERR_STATE.
 *
 * After a collective of this process failed (an MPI error, a watchdog
 * abort), gs_finalize leaves MPI running and returns: MPI_Finalize waits for
 * every rank, and the peers may be stuck in the failed call. The process
 * should then exit (non-zero); the launcher ends the job when it does. */
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

/* Another communicator over parent's ranks (parent's MPI communicator,
 * duplicated), with a progress thread of its own, for collectives that must
 * not queue behind parent's: an engine beside a trainer's own exchanges.
 * It takes parent's cost model instead of measuring its own, so both choose
 * the same algorithm for the same message (and a run's sums do not depend
 * on a second calibration). Collective over parent's ranks, as
 * gs_comm_create (settings read and agreed the same way). */
gs_status gs_comm_create_like(gs_comm *parent, gs_comm **out);

/* Waits for the queued collectives, stops the progress thread and frees the
 * communicator (collective). NULL is a no-op. A communicator on which a
 * collective failed may leave that call's messages posted (a peer that
 * disagreed on the count, a dead one): its own scratch memory is then kept
 * until gs_finalize has finalized MPI, and the failed call's buffers may
 * be read or written by MPI until then too. */
gs_status gs_comm_destroy(gs_comm *comm);

/* Says that this rank's program is ending: it will enqueue no collective on
 * comm but those its own shutdown issues (each of which it reports too).
 * A peer whose collective then makes no progress for 0.2 s, and which this
 * rank left before issuing (its last count a second old), ends the job
 * (the lowest such peer at once, the others 5 s later) with "gradsync: rank P:
 * fatal: rank R has left (its program is ending: gs_comm_leave) after
 * issuing N collectives, and this rank waits for it in collective #M ...",
 * instead of waiting for GRADSYNC_TIMEOUT. A peer still busy elsewhere
 * (evaluating, saving) is not disturbed; a healthy end, every rank leaving
 * and then destroying, is unchanged. Call it where one rank may end while
 * the others still run (the PyTorch binding does at exit), before the
 * shutdown's own collective calls. A second call is a no-op. Not
 * collective, but a program that calls it on one rank must call it on
 * every rank before gs_comm_destroy: a rank that left waits in
 * gs_comm_destroy for every peer's goodbye (where MPI_Finalize would wait
 * for them anyway), so that a peer that ends the job finds it there and
 * not in MPI_Finalize, where mpirun could hang. It needs MPI_THREAD_MULTIPLE (the goodbyes are read by the
 * watchdog while the progress thread is inside MPI) and a watchdog
 * (GRADSYNC_TIMEOUT or GRADSYNC_STALL_WARN set): without them it does
 * nothing, as on one rank and after a failure. */
gs_status gs_comm_leave(gs_comm *comm);

int gs_comm_rank(const gs_comm *comm);
int gs_comm_size(const gs_comm *comm);
/* The MPI communicator gs_comm_create was given: the ranks this gs_comm
 * spans, for modules that set up their own communication over the same
 * ranks (parameter servers, K-FAC's communicator) instead of assuming
 * MPI_COMM_WORLD. Not a copy: the caller of gs_comm_create owns it. The
 * gs_comm's own collectives run on a duplicate, so calls on this one do
 * not mix with them. MPI_COMM_NULL for a NULL comm. */
MPI_Comm gs_comm_mpi(const gs_comm *comm);
int gs_comm_local_rank(const gs_comm *comm);  /* rank within the node */
int gs_comm_local_size(const gs_comm *comm);  /* ranks on this node */
int gs_comm_node(const gs_comm *comm);        /* index of this node */
int gs_comm_nodes(const gs_comm *comm);       /* number of nodes */
/* 1 when this node's ranks exchange node-local data (the hierarchical
 * all-reduce's and HiTopKComm's node-local steps) through a shared-memory
 * segment, 0 when through point-to-point messages: a node of one rank,
 * ranks that do not share memory, or GRADSYNC_SHM=0 on any rank. */
int gs_comm_shared_memory(const gs_comm *comm);

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
 * learn through a collective (a stalled collective, a dead peer). Several
 * threads may call it at once: each prints its message, the first ends the
 * job, the others wait for that (and end the process after 10 s if it has
 * not). */
GS_NORETURN void gs_comm_abort(gs_comm *comm, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- Agreement points ------------------------------------------------------
 * Where one rank can fail alone before a collective phase (a bad setting, an
 * allocation, a plan it cannot install), every rank must learn it, or the
 * others wait forever in a collective that rank never issues. gs_agree is
 * that agreement, for the library and its applications alike: every rank
 * contributes its status, a message saying why when it failed, and
 * optionally `payload_bytes` bytes of its own (values the ranks must share),
 * and every rank learns every rank's, in one fixed-size all-gather that
 * cannot hang on a difference. What to do about a failure is the caller's:
 * each knows what went wrong in its own words.
 *
 * Transport: through `comm`'s progress thread when comm is not NULL (call it
 * where nothing else is in flight on comm), otherwise over `mpi` from the
 * calling thread (before a gs_comm exists, on a communicator of the
 * caller's own, or on the progress thread itself). `what` names the
 * agreement in the error of a failed exchange. A message is cut to
 * GS_VOTE_MESSAGE - 1 bytes; NULL is "". On success *out holds size votes
 * and payloads in rank order, which the caller releases with
 * gs_agreement_free; on failure (GS_ERR_NOMEM, an MPI error) nothing is
 * held, and ranks that did not fail wait until their timeout, so the caller
 * should end the job. */
#define GS_VOTE_MESSAGE 240

typedef struct gs_vote {
  int32_t status;                /* the rank's gs_status */
  int32_t reserved;
  char message[GS_VOTE_MESSAGE]; /* why it failed, NUL-terminated; "" if none */
} gs_vote;

typedef struct gs_agreement {
  int size;        /* ranks */
  int failed;      /* ranks whose status is not GS_OK */
  int first;       /* the lowest of them, or -1 */
  gs_vote *votes;  /* size votes, owned */
  void *payloads;  /* size * payload_bytes bytes, owned; NULL without payload */
} gs_agreement;

gs_status gs_agree(gs_comm *comm, MPI_Comm mpi, const char *what,
                   gs_status mine, const char *message, const void *payload,
                   size_t payload_bytes, gs_agreement *out);
void gs_agreement_free(gs_agreement *a);
/* 1 when every rank failed, with one status and one message. */
int gs_agreement_unanimous(const gs_agreement *a);

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

/* ---- Sparse collectives --------------------------------------------------
 * A sparse tensor of n elements is `count` (index, value) pairs with
 * idx[i] < n; duplicate indices add (within a rank and across ranks).
 * Values are GS_F32, GS_F16 or GS_BF16 for the all-gathers and the sparse
 * all-reduce, GS_F32 for gTop-k and HiTopKComm.
 *
 * Same conventions as the dense collectives: argument errors of the call
 * itself (NULL buffers, a bad dtype) are returned on the caller's thread and
 * nothing is queued; the work runs on the progress thread, completes through
 * gs_wait, and the watchdog, GRADSYNC_TIMEOUT and GRADSYNC_FAULT apply.
 * Every sparse collective starts with one small all-gather in which every
 * rank states n, k, its count and whether its pairs are valid (an index
 * >= n, count > k): a mismatch of n or k between ranks is GS_ERR_MISMATCH,
 * and an invalid rank's input GS_ERR_INVALID_ARG, on EVERY rank, naming
 * the rank, never a hang. Zero pairs on some or all ranks is legal.
 *
 * Buffers are the caller's from issue to gs_wait, as for every collective;
 * the pairs are read on the progress thread, not copied at issue. */

typedef enum {
  GS_SPARSE_AUTO = 0,  /* the cost model picks (gs_comm_choose_sparse) */
  GS_SPARSE_ALLGATHER, /* all-gather every rank's pairs, scatter-add */
  GS_SPARSE_GTOPK,     /* gTop-k's tree merge */
  GS_SPARSE_HITOPK,    /* HiTopKComm */
  GS_SPARSE_DENSE,     /* densify and all-reduce (the fall-back) */
  GS_SPARSE_COUNT
} gs_sparse_algo;

/* "auto", "allgather", "gtopk", "hitopk", "dense". */
const char *gs_sparse_algo_name(gs_sparse_algo algo);
gs_status gs_sparse_algo_parse(const char *name, gs_sparse_algo *out);

/* Top-k selection as gs_topk_f32 (gradsync/compress.h) does it: writes k
 * distinct indices of the entries of x[0..n) of largest magnitude. HiTopKComm
 * calls it on the progress thread, so it must be thread-safe. */
typedef gs_status (*gs_topk_fn)(const float *x, size_t n, size_t k,
                                const char *method, uint32_t *idx);

/* Sparse all-gather, fixed k: every rank gives k pairs of an n-element
 * tensor; rank r's pairs land at out_idx/out_val[r*k .. (r+1)*k). */
gs_status gs_isparse_allgather(gs_comm *comm, const uint32_t *idx,
                               const void *val, size_t k, size_t n,
                               gs_dtype dtype, uint32_t *out_idx,
                               void *out_val, gs_request **req);

/* Sparse all-gather, varying counts: the counts are exchanged first, then
 * the pairs with an all-gatherv; rank r's pairs land after those of ranks
 * < r, and counts[r] (p entries, written by the collective) says how many.
 * If the total exceeds `capacity` pairs, every rank fails with
 * GS_ERR_INVALID_ARG and nothing is written. */
gs_status gs_isparse_allgatherv(gs_comm *comm, const uint32_t *idx,
                                const void *val, size_t count, size_t n,
                                gs_dtype dtype, uint32_t *out_idx,
                                void *out_val, size_t capacity, size_t *counts,
                                gs_request **req);

/* Sparse all-reduce with a dense result: dense[0..n) = the sum over ranks of
 * every rank's pairs. algo GS_SPARSE_ALLGATHER gathers the pairs;
 * GS_SPARSE_DENSE scatters them into `dense` and all-reduces it;
 * GS_SPARSE_AUTO picks whichever the cost model predicts faster for the
 * total number of pairs (known after the count exchange, so the same on every
 * rank): dense once density x ranks passes the break-even point. */
gs_status gs_isparse_allreduce(gs_comm *comm, const uint32_t *idx,
                               const void *val, size_t count, size_t n,
                               gs_dtype dtype, void *dense,
                               gs_sparse_algo algo, gs_request **req);

/* gTop-k (Shi et al., ICDCS 2019): every rank gives count <= k f32 pairs.
 * Pairs of ranks exchange their current set of at most k pairs, add them
 * (union of indices, values summed) and keep the top k by magnitude (ties:
 * the smaller index); with recursive doubling every rank of the
 * power-of-two core ends with the same set, and the p - 2^floor(lg p)
 * remainder ranks, folded in first, receive it at the end. Results on every
 * rank, identical: out_idx/out_val (capacity k) sorted by index, their number
 * in *out_count (< k only when fewer distinct indices were given). kept
 * (count flags, may be NULL): kept[i] = 1 if this rank's value at idx[i]
 * is part of the global sum (not merely idx[i] in the global set: an early
 * merge may drop the value and a later one take the index back without
 * it); for error feedback, the caller puts back the entries not kept, and
 * the kept values of all ranks add up to the global set. */
gs_status gs_igtopk(gs_comm *comm, const uint32_t *idx, const float *val,
                    size_t count, size_t k, size_t n, uint32_t *out_idx,
                    float *out_val, size_t *out_count, uint8_t *kept,
                    gs_request **req);

/* HiTopKComm (Shi et al., MLSys 2021) of a dense f32 tensor: a node-local
 * reduce-scatter (local rank l holds the node's sum of shard l of a balanced
 * split), top-k of the shard with `select`/`method` and
 * k_l = ceil(k * shard / n), a sparse all-gather of those pairs between the
 * ranks of the same local rank on every node, a node-local all-gather of
 * the gathered pairs and their scatter-add: recvbuf = sum over nodes of the
 * top k_l of each shard of each node's sum, the same on every rank. sendbuf
 * may be GS_IN_PLACE. Needs the same number of ranks on every node
 * (GS_ERR_UNSUPPORTED otherwise). algo: GS_SPARSE_HITOPK, GS_SPARSE_DENSE
 * (all-reduce of the dense tensor, no sparsification) or GS_SPARSE_AUTO (the
 * cost model). A selection that fails on one rank fails the call on every
 * rank. */
gs_status gs_ihitopk(gs_comm *comm, const float *sendbuf, float *recvbuf,
                     size_t n, size_t k, gs_topk_fn select, const char *method,
                     gs_sparse_algo algo, gs_request **req);

/* What GS_SPARSE_AUTO resolves to for `pairs` pairs in total over all ranks
 * (gs_isparse_allreduce) or k per rank (gTop-k: "algo" GS_SPARSE_GTOPK; and
 * HiTopKComm: GS_SPARSE_HITOPK) of an n-element tensor of dtype: `algo`
 * itself, or GS_SPARSE_DENSE where src/cost predicts the dense all-reduce
 * faster. Same on every rank (the cost model is rank 0's). *sparse_s and
 * *dense_s (may be NULL) receive the two predictions. */
gs_sparse_algo gs_comm_choose_sparse(const gs_comm *comm, gs_sparse_algo algo,
                                     size_t n, size_t pairs, gs_dtype dtype,
                                     double *sparse_s, double *dense_s);

/* Blocking forms: issue, then gs_wait. */
gs_status gs_sparse_allgather(gs_comm *comm, const uint32_t *idx,
                              const void *val, size_t k, size_t n,
                              gs_dtype dtype, uint32_t *out_idx, void *out_val);
gs_status gs_sparse_allgatherv(gs_comm *comm, const uint32_t *idx,
                               const void *val, size_t count, size_t n,
                               gs_dtype dtype, uint32_t *out_idx, void *out_val,
                               size_t capacity, size_t *counts);
gs_status gs_sparse_allreduce(gs_comm *comm, const uint32_t *idx,
                              const void *val, size_t count, size_t n,
                              gs_dtype dtype, void *dense, gs_sparse_algo algo);
gs_status gs_gtopk(gs_comm *comm, const uint32_t *idx, const float *val,
                   size_t count, size_t k, size_t n, uint32_t *out_idx,
                   float *out_val, size_t *out_count, uint8_t *kept);
gs_status gs_hitopk(gs_comm *comm, const float *sendbuf, float *recvbuf,
                    size_t n, size_t k, gs_topk_fn select, const char *method,
                    gs_sparse_algo algo);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_COMM_H */
