/*
 * The communicator: MPI set-up, the progress thread and its queue, requests,
 * the GRADSYNC_CHECK consistency check and the cost calibration.
 *
 * Threading: gs_comm_create and gs_comm_destroy make MPI calls on the
 * caller's thread, before the progress thread starts and after it stopped.
 * In between, only the progress thread calls MPI (Horovod's shape).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm_internal.h"

static int mpi_inited_by_us;

const char *coll_kind_name(coll_kind kind) {
  switch (kind) {
    case COLL_ALLREDUCE: return "allreduce";
    case COLL_REDUCE_SCATTER: return "reduce_scatter";
    case COLL_ALLGATHER: return "allgather";
    case COLL_ALLGATHERV: return "allgatherv";
    case COLL_BCAST: return "bcast";
    case COLL_ALLTOALL: return "alltoall";
    case COLL_ALLTOALLV: return "alltoallv";
    case COLL_BARRIER: return "barrier";
    case COLL_SPARSE_ALLGATHER: return "sparse_allgather";
    case COLL_SPARSE_ALLREDUCE: return "sparse_allreduce";
    case COLL_GTOPK: return "gtopk";
    case COLL_HITOPK: return "hitopk";
  }
  return "unknown";
}

/* Open MPI's TCP transport sends a message above btl_tcp_eager_limit (64 KB
 * by default) by rendezvous: the sender waits for the receiver to match it
 * and answer before the data moves, and both sides advance only while their
 * progress thread polls, which it does between naps (p2p.c). Measured on 4
 * emulated nodes at 1 Gbit/s, ring all-reduce, twice each: 256 KB 4.2-4.4 ->
 * 3.4 ms, 1 MB 19.1 -> 14.8 ms, 4 MB 62-63 -> 56 ms, 16 MB 230-233 -> 225 ms
 * with the limit at 1 MB + 64 KB, which sends the transfers' 1 MB pieces
 * (p2p.c) and the ring's segments at once; MPI's own all-reduce gained as
 * much up to 1 MB (22 -> 14 ms). The variable is set only where the
 * environment has none (a user's value wins; it overrides an MCA parameter
 * file's, as every OMPI_MCA_ variable does), and only when gradsync starts
 * MPI itself. */
#define TCP_EAGER_LIMIT "1114112"

gs_status gs_init(int *argc, char ***argv) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) return GS_OK;
  setenv("OMPI_MCA_btl_tcp_eager_limit", TCP_EAGER_LIMIT, 0);
  int provided = 0;
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS)
    return gs_error(GS_ERR_MPI, "MPI_Init_thread failed (code %d)", rc);
  mpi_inited_by_us = 1;
  if (provided < MPI_THREAD_SERIALIZED)
    return gs_error(GS_ERR_UNSUPPORTED,
                    "the MPI library provides thread level %d; gradsync's "
                    "progress thread needs MPI_THREAD_SERIALIZED or better",
                    provided);
  return GS_OK;
}

gs_status gs_finalize(void) {
  if (!mpi_inited_by_us) return GS_OK;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
  mpi_inited_by_us = 0;
  return GS_OK;
}

gs_status comm_mpi_error(const coll_group *g, const char *what, int rc) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return gs_error(GS_ERR_MPI, "rank %d of %d: %s failed: %s", g->rank, g->size,
                  what, text);
}

gs_status comm_scratch(gs_comm *c, void **area, size_t *cap, size_t bytes,
                       void **out) {
  (void)c;
  if (*cap < bytes) {
    void *p = gs_realloc(*area, bytes);
    if (p == NULL) return GS_ERR_NOMEM;
    *area = p;
    *cap = bytes;
  }
  *out = *area;
  return GS_OK;
}

void split_blocks(size_t count, int parts, size_t *off, size_t *len) {
  size_t q = count / (size_t)parts, r = count % (size_t)parts;
  for (int i = 0; i < parts; i++) {
    off[i] = (size_t)i * q + GS_MIN((size_t)i, r);
    len[i] = q + ((size_t)i < r ? 1 : 0);
  }
}

/* ---- Execution on the progress thread ---------------------------------- */

/* GRADSYNC_CHECK: every rank contributes its call's signature; a rank whose
 * signature differs from rank 0's is named in an error raised on all ranks.
 * The check itself is one fixed-size allgather, so it cannot hang on a
 * mismatch of counts. */
static gs_status check_signature(gs_comm *c, const coll_args *a) {
  enum { NSIG = 6 };
  /* The v-variants' own counts legitimately differ between ranks. */
  int v = a->kind == COLL_ALLGATHERV || a->kind == COLL_ALLTOALLV;
  int64_t mine[NSIG] = {a->kind, v ? -1 : (int64_t)a->count, a->dtype,
                        a->kind == COLL_ALLREDUCE || a->kind == COLL_REDUCE_SCATTER
                            ? (int64_t)a->op : -1,
                        a->kind == COLL_BCAST ? a->root : -1, a->algo};
  int p = c->world.size;
  int64_t *all = gs_malloc(sizeof(int64_t) * NSIG * (size_t)p);
  if (all == NULL) return GS_ERR_NOMEM;
  int rc = MPI_Allgather(mine, NSIG, MPI_INT64_T, all, NSIG, MPI_INT64_T,
                         c->world.mpi);
  if (rc != MPI_SUCCESS) {
    gs_free(all);
    return comm_mpi_error(&c->world, "MPI_Allgather (GRADSYNC_CHECK)", rc);
  }
  char msg[900];
  size_t n = 0;
  int bad = 0;
  for (int r = 1; r < p; r++) {
    if (memcmp(all, all + (size_t)r * NSIG, sizeof mine) == 0) continue;
    const int64_t *s = all + (size_t)r * NSIG;
    if (bad++ < 4 && n < sizeof msg)
      n += (size_t)snprintf(msg + n, sizeof msg - n,
                            "; rank %d called %s(count=%lld, dtype=%s, op=%s, "
                            "root=%lld, algo=%s)",
                            r, coll_kind_name((coll_kind)s[0]), (long long)s[1],
                            gs_dtype_name((gs_dtype)s[2]),
                            s[3] < 0 ? "-" : gs_redop_name((gs_redop)s[3]),
                            (long long)s[4], gs_algo_name((gs_algo)s[5]));
  }
  int64_t s0[NSIG];
  memcpy(s0, all, sizeof s0);
  gs_free(all);
  if (!bad) return GS_OK;
  return gs_error(GS_ERR_MISMATCH,
                  "GRADSYNC_CHECK on rank %d: %d rank(s) differ from rank 0, "
                  "which called %s(count=%lld, dtype=%s, op=%s, root=%lld, "
                  "algo=%s)%s%s",
                  c->world.rank, bad, coll_kind_name((coll_kind)s0[0]),
                  (long long)s0[1], gs_dtype_name((gs_dtype)s0[2]),
                  s0[3] < 0 ? "-" : gs_redop_name((gs_redop)s0[3]),
                  (long long)s0[4], gs_algo_name((gs_algo)s0[5]), msg,
                  bad > 4 ? "; ..." : "");
}

/* The block table of the uniform collectives: block i of `count` elements
 * at offset i*count. Returns 2p entries, offsets then lengths (gs_free). */
static size_t *uniform_blocks(int p, size_t count) {
  size_t *t = gs_malloc(2 * sizeof(size_t) * (size_t)p);
  if (t == NULL) return NULL;
  for (int i = 0; i < p; i++) {
    t[i] = (size_t)i * count;
    t[p + i] = count;
  }
  return t;
}

static gs_status run_allreduce(gs_comm *c, coll_args *a) {
  size_t esize = gs_dtype_size(a->dtype);
  if (a->sendbuf != NULL && a->count > 0)
    memcpy(a->recvbuf, a->sendbuf, a->count * esize);
  int div = a->op == GS_AVG ? c->world.size : 1;
  switch (a->algo) {
    case GS_ALGO_RING:
      return allreduce_ring(c, &c->world, a->recvbuf, a->count, a->dtype, a->op,
                            div);
    case GS_ALGO_RD:
      return allreduce_rd(c, &c->world, a->recvbuf, a->count, a->dtype, a->op,
                          div);
    case GS_ALGO_RABENSEIFNER:
      return allreduce_rabenseifner(c, &c->world, a->recvbuf, a->count,
                                    a->dtype, a->op, div);
    case GS_ALGO_HIER:
      return allreduce_hier(c, a->recvbuf, a->count, a->dtype, a->op);
    default:
      return gs_error(GS_ERR_INTERNAL, "allreduce: algorithm %s reached the "
                      "progress thread", gs_algo_name(a->algo));
  }
}

static gs_status run_reduce_scatter(gs_comm *c, coll_args *a) {
  int p = c->world.size;
  return reduce_scatter_ring(c, &c->world, a->sendbuf, a->recvbuf, a->count,
                             a->dtype, a->op, a->op == GS_AVG ? p : 1);
}

static gs_status run_allgatherv(gs_comm *c, coll_args *a, const size_t *counts,
                                const size_t *displs) {
  int r = c->world.rank;
  size_t esize = gs_dtype_size(a->dtype);
  if (a->sendbuf != NULL && counts[r] > 0)
    memcpy((char *)a->recvbuf + displs[r] * esize, a->sendbuf,
           counts[r] * esize);
  return ring_run(c, &c->world, a->recvbuf, displs, counts, a->dtype, GS_SUM,
                  0, 1, 1);
}

static gs_status run_allgather(gs_comm *c, coll_args *a) {
  int p = c->world.size;
  size_t *off = uniform_blocks(p, a->count);
  if (off == NULL) return GS_ERR_NOMEM;
  gs_status st = run_allgatherv(c, a, off + p, off);
  gs_free(off);
  return st;
}

static gs_status run_alltoall(gs_comm *c, coll_args *a) {
  int p = c->world.size;
  size_t esize = gs_dtype_size(a->dtype);
  if (a->kind == COLL_ALLTOALLV)
    return alltoallv_pairwise(c, &c->world, a->sendbuf, a->counts, a->displs,
                              a->recvbuf, a->rcounts, a->rdispls, esize);
  size_t *tab = uniform_blocks(p, a->count);
  if (tab == NULL) return GS_ERR_NOMEM;
  gs_status st = alltoallv_pairwise(c, &c->world, a->sendbuf, tab + p, tab,
                                    a->recvbuf, tab + p, tab, esize);
  gs_free(tab);
  return st;
}

static gs_status execute(gs_comm *c, coll_args *a) {
  if (c->check) GS_CHECK(check_signature(c, a));
  if (a->algo == GS_ALGO_MPI) return coll_mpi(c, a);
  size_t esize = gs_dtype_size(a->dtype);
  switch (a->kind) {
    case COLL_ALLREDUCE: return run_allreduce(c, a);
    case COLL_REDUCE_SCATTER: return run_reduce_scatter(c, a);
    case COLL_ALLGATHER: return run_allgather(c, a);
    case COLL_ALLGATHERV: return run_allgatherv(c, a, a->counts, a->displs);
    case COLL_BCAST:
      if (a->algo == GS_ALGO_BINOMIAL)
        return bcast_binomial(c, &c->world, a->recvbuf, a->count * esize,
                              a->root);
      return bcast_pipeline(c, &c->world, a->recvbuf, a->count * esize, a->root);
    case COLL_ALLTOALL:
    case COLL_ALLTOALLV: return run_alltoall(c, a);
    case COLL_BARRIER: return barrier_dissemination(&c->world);
    case COLL_SPARSE_ALLGATHER:
    case COLL_SPARSE_ALLREDUCE:
    case COLL_GTOPK:
    case COLL_HITOPK: return sparse_run(c, a);
  }
  return gs_error(GS_ERR_INTERNAL, "unknown collective %d", (int)a->kind);
}

/* Spins until `flag` is non-zero or spin_s has passed. A blocking wait on a
 * condition variable costs two scheduler wake-ups (about 10 us here) per
 * collective, which small messages on a fast network cannot afford; a short
 * spin, yielding the core, catches work that arrives right away. */
static int spin_until(atomic_int *flag, double spin_s) {
  if (spin_s <= 0) return atomic_load(flag) != 0;
  double end = gs_now() + spin_s;
  for (int i = 0;; i++) {
    if (atomic_load_explicit(flag, memory_order_acquire)) return 1;
    if ((i & 63) == 63) {
      if (gs_now() > end) return 0;
      sched_yield();
    }
  }
}

/* ---- Watchdog ------------------------------------------------------------
 * MPI offers no timeout, and MPI's own collectives (GS_ALGO_MPI) block inside
 * MPI, so no check on the progress thread could notice a peer that never
 * arrives. A separate thread watches what the progress thread publishes
 * (run_seq, progress_ns): a request that made no progress for
 * GRADSYNC_STALL_WARN seconds is reported once, and one that made none for
 * GRADSYNC_TIMEOUT seconds fails the communicator and ends the job with
 * MPI_Abort (as PyTorch's NCCL watchdog does). Progress is the start of a
 * request and every completed wait inside gradsync's own algorithms
 * (comm_waitall), so a long healthy collective is not mistaken for a stall;
 * an idle communicator (no request running) is never one. */

/* The number a user sees for request `seq`: calls are counted from 1 after
 * gs_comm_create returned; gs_comm_create's own collectives are "start-up". */
static void describe_request(const gs_comm *c, uint64_t seq, coll_kind kind,
                             size_t count, gs_dtype dtype, gs_algo algo,
                             char *out, size_t n) {
  uint64_t base = atomic_load_explicit(&c->user_base, memory_order_relaxed);
  int user = base != UINT64_MAX && seq > base;
  snprintf(out, n, "%scollective #%llu, %s(count=%zu, dtype=%s, algo=%s)",
           user ? "" : "start-up ",
           (unsigned long long)(user ? seq - base : seq), coll_kind_name(kind),
           count, kind == COLL_BARRIER ? "-" : gs_dtype_name(dtype),
           gs_algo_name(algo));
}

/* Looks at the running request once; warns, or ends the job. Safe from any
 * thread: each request is warned about once, and one thread aborts. */
static void watchdog_check(gs_comm *c) {
  uint64_t seq = atomic_load_explicit(&c->run_seq, memory_order_acquire);
  if (seq == 0) return;
  uint64_t last = atomic_load_explicit(&c->progress_ns, memory_order_relaxed);
  coll_kind kind = (coll_kind)atomic_load_explicit(&c->run_kind, memory_order_relaxed);
  size_t count = atomic_load_explicit(&c->run_count, memory_order_relaxed);
  gs_dtype dtype = (gs_dtype)atomic_load_explicit(&c->run_dtype, memory_order_relaxed);
  gs_algo algo = (gs_algo)atomic_load_explicit(&c->run_algo, memory_order_relaxed);
  /* A request that ended meanwhile may have left a mixed description. */
  if (atomic_load_explicit(&c->run_seq, memory_order_acquire) != seq) return;
  uint64_t now = gs_now_ns();
  double stalled = now > last ? (double)(now - last) * 1e-9 : 0;
  int timed_out = c->timeout_s > 0 && stalled >= c->timeout_s;
  int warn = c->stall_warn_s > 0 && stalled >= c->stall_warn_s;
  if (!timed_out && !warn) return;
  char what[256];
  describe_request(c, seq, kind, count, dtype, algo, what, sizeof what);
  if (timed_out) {
    if (atomic_exchange(&c->aborting, 1)) return; /* another thread is at it */
    gs_comm_abort(c, 1, "%s made no progress for %.1f s (GRADSYNC_TIMEOUT=%g "
                  "s): another rank failed, stalled or never issued it; "
                  "ending the job", what, stalled, c->timeout_s);
  }
  uint64_t prev = atomic_load(&c->warned_seq);
  if (prev != seq && atomic_compare_exchange_strong(&c->warned_seq, &prev, seq)) {
    char tail[96] = "";
    if (c->timeout_s > 0)
      snprintf(tail, sizeof tail, "; the job ends if it makes none for %g s "
               "(GRADSYNC_TIMEOUT)", c->timeout_s);
    fprintf(stderr, "gradsync: rank %d: warning: %s has made no progress for "
            "%.1f s (GRADSYNC_STALL_WARN=%g s): another rank may have failed, "
            "stalled or not issued it%s\n", c->world.rank, what, stalled,
            c->stall_warn_s, tail);
    fflush(stderr);
  }
}

/* An absolute CLOCK_MONOTONIC time `secs` from now. */
static struct timespec deadline_in(double secs) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long ns = ts.tv_nsec + (long)((secs - (double)(long)secs) * 1e9);
  ts.tv_sec += (time_t)secs + ns / 1000000000L;
  ts.tv_nsec = ns % 1000000000L;
  return ts;
}

static void *watchdog_main(void *arg) {
  gs_comm *c = arg;
  pthread_mutex_lock(&c->wd_mu);
  while (!c->wd_stop) {
    struct timespec ts = deadline_in(c->wd_tick_s);
    pthread_cond_timedwait(&c->wd_cv, &c->wd_mu, &ts);
    if (c->wd_stop) break;
    pthread_mutex_unlock(&c->wd_mu);
    watchdog_check(c);
    pthread_mutex_lock(&c->wd_mu);
  }
  pthread_mutex_unlock(&c->wd_mu);
  return NULL;
}

/* Publishes the request the progress thread starts (or 0: none runs). */
static void watch_begin(gs_comm *c, const coll_args *a, uint64_t seq) {
  atomic_store_explicit(&c->run_kind, (int)a->kind, memory_order_relaxed);
  atomic_store_explicit(&c->run_count, a->count, memory_order_relaxed);
  atomic_store_explicit(&c->run_dtype, (int)a->dtype, memory_order_relaxed);
  atomic_store_explicit(&c->run_algo, (int)a->algo, memory_order_relaxed);
  atomic_store_explicit(&c->progress_ns, gs_now_ns(), memory_order_relaxed);
  atomic_store_explicit(&c->run_seq, seq, memory_order_release);
}

static void watch_end(gs_comm *c) {
  atomic_store_explicit(&c->run_seq, 0, memory_order_release);
}

/* ---- Fault injection (tests only) ----------------------------------------
 * GRADSYNC_FAULT="rank=R,call=N[,kind=error|stall]": on rank R of every
 * communicator created with it, the N-th collective issued after
 * gs_comm_create returned (counting from 1) fails with GS_ERR_MPI inside
 * the progress thread, as a transport error would (kind=error, the
 * default), or never completes (kind=stall). The other ranks then see a
 * peer that never arrives. */
static gs_status parse_fault(gs_comm *c, const char *spec) {
  c->fault = FAULT_NONE;
  if (spec == NULL || *spec == '\0') return GS_OK;
  snprintf(c->fault_spec, sizeof c->fault_spec, "%s", spec);
  char buf[128];
  if (strlen(spec) >= sizeof buf)
    return gs_error(GS_ERR_PARSE, "GRADSYNC_FAULT is too long");
  strcpy(buf, spec);
  long rank = -1;
  long long call = 0;
  fault_kind kind = FAULT_ERROR;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '='), *end = NULL;
    if (eq == NULL) goto bad;
    *eq++ = '\0';
    if (strcmp(tok, "rank") == 0) {
      rank = strtol(eq, &end, 10);
      if (*eq == '\0' || *end || rank < 0 || rank > INT_MAX) goto bad;
    } else if (strcmp(tok, "call") == 0) {
      call = strtoll(eq, &end, 10);
      if (*eq == '\0' || *end || call < 1) goto bad;
    } else if (strcmp(tok, "kind") == 0) {
      if (strcmp(eq, "error") == 0) kind = FAULT_ERROR;
      else if (strcmp(eq, "stall") == 0) kind = FAULT_STALL;
      else goto bad;
    } else {
      goto bad;
    }
  }
  if (rank < 0 || call < 1) goto bad;
  c->fault = kind;
  c->fault_rank = (int)rank;
  c->fault_call = (uint64_t)call;
  return GS_OK;
bad:
  return gs_error(GS_ERR_PARSE, "GRADSYNC_FAULT=%s: expected "
                  "rank=R,call=N[,kind=error|stall] (N counts from 1)", spec);
}

static gs_status inject_fault(gs_comm *c, const coll_args *a, uint64_t seq) {
  char what[256];
  describe_request(c, seq, a->kind, a->count, a->dtype, a->algo, what,
                   sizeof what);
  if (c->fault == FAULT_STALL) {
    fprintf(stderr, "gradsync: rank %d: GRADSYNC_FAULT=%s: %s stalls\n",
            c->world.rank, c->fault_spec, what);
    fflush(stderr);
    for (;;) { /* never completes: only the watchdog ends this */
      struct timespec ts = {0, 100000000L};
      nanosleep(&ts, NULL);
    }
  }
  return gs_error(GS_ERR_MPI, "rank %d of %d: %s failed: injected fault "
                  "(GRADSYNC_FAULT=%s)", c->world.rank, c->world.size, what,
                  c->fault_spec);
}

static int fault_due(const gs_comm *c, uint64_t seq) {
  if (c->fault == FAULT_NONE || c->world.rank != c->fault_rank) return 0;
  uint64_t base = atomic_load_explicit(&c->user_base, memory_order_relaxed);
  return base != UINT64_MAX && seq - base == c->fault_call;
}

/* ---- The progress thread ------------------------------------------------- */

static void *progress_main(void *arg) {
  gs_comm *c = arg;
  for (;;) {
    spin_until(&c->queued, c->spin_s);
    pthread_mutex_lock(&c->mu);
    while (c->head == NULL && !c->stopping) {
      c->thread_sleeping = 1;
      pthread_cond_wait(&c->cv_work, &c->mu);
      c->thread_sleeping = 0;
    }
    gs_request *req = c->head;
    if (req == NULL) { /* stopping with an empty queue */
      pthread_mutex_unlock(&c->mu);
      break;
    }
    pthread_mutex_unlock(&c->mu);
    int failed = atomic_load(&c->failed);

    uint64_t seq = atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed) + 1;
    gs_status st;
    gs_clear_error();
    watch_begin(c, &req->args, seq);
    if (failed) {
      st = gs_error(GS_ERR_STATE, "rank %d: the communicator failed earlier "
                    "and cannot run %s: %s", c->world.rank,
                    coll_kind_name(req->args.kind), c->failure);
    } else {
      st = fault_due(c, seq) ? inject_fault(c, &req->args, seq)
                             : execute(c, &req->args);
      if (st == GS_ERR_MPI) {
        /* The message streams between ranks may now be out of step. */
        snprintf(c->failure, sizeof c->failure, "%s", gs_last_error());
        atomic_store(&c->failed, 1);
      }
    }
    watch_end(c);
    gs__error_copy(req->message, sizeof req->message);

    pthread_mutex_lock(&c->mu);
    c->head = req->next;
    if (c->head == NULL) c->tail = NULL;
    atomic_fetch_sub(&c->queued, 1);
    req->status = st;
    atomic_store_explicit(&req->done, 1, memory_order_release);
    if (c->waiters) pthread_cond_broadcast(&c->cv_done);
    pthread_mutex_unlock(&c->mu);
  }
  return NULL;
}

gs_status comm_enqueue(gs_comm *c, gs_request *req) {
  pthread_mutex_lock(&c->mu);
  if (c->stopping) {
    pthread_mutex_unlock(&c->mu);
    return gs_error(GS_ERR_STATE, "the communicator is being destroyed");
  }
  req->next = NULL;
  if (c->tail) c->tail->next = req;
  else c->head = req;
  c->tail = req;
  atomic_fetch_add_explicit(&c->queued, 1, memory_order_release);
  if (c->thread_sleeping) pthread_cond_signal(&c->cv_work);
  pthread_mutex_unlock(&c->mu);
  return GS_OK;
}

static void request_free(gs_request *req) {
  gs_free(req->args.counts);
  gs_free(req->args.displs);
  gs_free(req->args.rcounts);
  gs_free(req->args.rdispls);
  sparse_args_free(req->args.sparse);
  gs_free(req);
}

gs_status gs_wait(gs_request *req) {
  if (req == NULL) return GS_OK;
  gs_comm *c = req->comm;
  if (!spin_until(&req->done, c->spin_s)) {
    /* Never forever: the wait wakes every watchdog tick and looks for a
     * stall itself, so it ends even where the watchdog thread could not
     * run. */
    pthread_mutex_lock(&c->mu);
    c->waiters++;
    while (!atomic_load(&req->done)) {
      if (c->wd_tick_s <= 0) {
        pthread_cond_wait(&c->cv_done, &c->mu);
        continue;
      }
      struct timespec ts = deadline_in(c->wd_tick_s);
      pthread_cond_timedwait(&c->cv_done, &c->mu, &ts);
      if (atomic_load(&req->done)) break;
      pthread_mutex_unlock(&c->mu);
      watchdog_check(c);
      pthread_mutex_lock(&c->mu);
    }
    c->waiters--;
    pthread_mutex_unlock(&c->mu);
  }
  gs_status st = req->status;
  if (st != GS_OK) gs__error_set_message(req->message);
  request_free(req);
  return st;
}

gs_status gs_test(gs_request *req, int *done) {
  if (done == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_test: done is NULL");
  if (req == NULL) {
    *done = 1;
    return GS_OK;
  }
  *done = atomic_load_explicit(&req->done, memory_order_acquire);
  return GS_OK;
}

/* ---- Creation ----------------------------------------------------------- */

static gs_status group_init(gs_comm *c, coll_group *g, MPI_Comm mpi) {
  g->mpi = mpi;
  g->progress = &c->progress_ns;
  MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN);
  MPI_Comm_rank(mpi, &g->rank);
  MPI_Comm_size(mpi, &g->size);
  return GS_OK;
}

/* Times a ring exchange (send right, receive left) of `bytes` bytes. */
static gs_status time_exchange(const coll_group *g, void *buf, size_t bytes,
                               int reps, double *secs) {
  int right = (g->rank + 1) % g->size, left = (g->rank - 1 + g->size) % g->size;
  char *sbuf = buf, *rbuf = (char *)buf + bytes;
  double best = 1e30;
  for (int i = 0; i < reps + 1; i++) {
    MPI_TRY(g, MPI_Barrier(g->mpi));
    double t0 = gs_now();
    MPI_TRY(g, MPI_Sendrecv(sbuf, (int)bytes, MPI_BYTE, right, TAG_CALIB, rbuf,
                            (int)bytes, MPI_BYTE, left, TAG_CALIB, g->mpi,
                            MPI_STATUS_IGNORE));
    double t = gs_now() - t0;
    if (i > 0 && t < best) best = t; /* the first is a warm-up */
  }
  *secs = best;
  return GS_OK;
}

/* Measures alpha and beta of a group with ring exchanges, agreed on by all
 * ranks (the maximum), so that every rank chooses the same algorithm. Beta
 * comes from the difference of two large exchanges, which cancels what a
 * token-bucket burst or a warm TCP window lets through at first. */
static gs_status calibrate_group(const coll_group *g, double *alpha,
                                 double *beta) {
  const size_t mid = CALIB_MID_BYTES, big = CALIB_BIG_BYTES;
  void *buf = gs_calloc(2, big);
  if (buf == NULL) return GS_ERR_NOMEM;
  double t_small = 0, t_mid = 0, t_big = 0;
  gs_status st = time_exchange(g, buf, 8, 20, &t_small);
  if (st == GS_OK) st = time_exchange(g, buf, mid, 3, &t_mid);
  if (st == GS_OK) st = time_exchange(g, buf, big, 3, &t_big);
  gs_free(buf);
  GS_CHECK(st);
  double v[2] = {t_small, (t_big - t_mid) / (double)(big - mid)};
  MPI_TRY(g, MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, g->mpi));
  *alpha = v[0];
  *beta = v[1] > 0 ? v[1] : 1e-12;
  return GS_OK;
}

static double measure_gamma(void) {
  enum { N = 1 << 18 };
  float *a = gs_calloc(2 * N, sizeof(float));
  if (a == NULL) return 1.0 / 5e9;
  double best = 1e30;
  for (int i = 0; i < 4; i++) {
    double t0 = gs_now();
    gs_reduce_local(a, a + N, N, GS_F32, GS_SUM);
    double t = gs_now() - t0;
    if (t < best) best = t;
  }
  gs_free(a);
  return best / (N * sizeof(float));
}

static gs_status setup_cost(gs_comm *c) {
  const char *file = getenv("GRADSYNC_COST_FILE");
  gs_cost_topo topo = {c->world.size, c->nodes};
  if (file && *file) {
    /* A calibration saved by `gradsync bench --cost-out` on this topology.
     * Every rank reads the same file; all must succeed or none uses it. */
    gs_cost_params loaded;
    gs_status lst = gs_cost_load(file, topo, &loaded);
    int ok = lst == GS_OK, all_ok = 0;
    MPI_TRY(&c->world, MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN,
                                     c->world.mpi));
    if (all_ok) {
      c->cost = loaded;
      c->cost_from_env = 1;
      gs_log(GS_LOG_INFO, "cost model loaded from %s", file);
      return GS_OK;
    }
    gs_log(GS_LOG_WARN, "GRADSYNC_COST_FILE ignored: %s",
           ok ? "another rank could not load it" : gs_last_error());
  }
  gs_cost_preset("1GbE", &c->cost);
  double gamma = measure_gamma();
  MPI_TRY(&c->world, MPI_Allreduce(MPI_IN_PLACE, &gamma, 1, MPI_DOUBLE, MPI_MAX,
                                   c->world.mpi));
  c->cost.gamma = gamma;
  if (c->have_env_cost) {
    c->cost_from_env = 1;
    c->cost.alpha = c->env_alpha;
    c->cost.beta = c->env_beta;
  } else if (c->world.size > 1) {
    /* With several ranks per node, the flat ring's slowest hop crosses
     * nodes: the world ring's timing is the inter-node cost. */
    GS_CHECK(calibrate_group(&c->world, &c->cost.alpha, &c->cost.beta));
  }
  /* Node-local parameters, measured on nodes with several ranks. Every rank
   * joins the world-wide maximum (the decision to measure is per node, so
   * the agreement must not be). */
  double v[2] = {0, 0};
  if (c->local.size > 1 && c->nodes > 1)
    GS_CHECK(shm_active(c) ? shm_calibrate(c, &v[0], &v[1])
                           : calibrate_group(&c->local, &v[0], &v[1]));
  MPI_TRY(&c->world, MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX,
                                   c->world.mpi));
  c->cost.alpha_local = v[1] > 0 ? v[0] : c->cost.alpha;
  c->cost.beta_local = v[1] > 0 ? v[1] : c->cost.beta;
  gs_log(GS_LOG_INFO, "cost model: alpha=%.3g s beta=%.3g s/B (%.3g GB/s) "
         "alpha_local=%.3g beta_local=%.3g gamma=%.3g", c->cost.alpha,
         c->cost.beta, 1e-9 / c->cost.beta, c->cost.alpha_local,
         c->cost.beta_local, c->cost.gamma);
  return GS_OK;
}

static gs_status setup_nodes(gs_comm *c) {
  MPI_Comm local, cross;
  int color = c->env_node;
  /* All ranks must take the same path: agree on whether every rank has a
   * GRADSYNC_NODE. */
  int have = color >= 0, all_have = 0;
  MPI_TRY(&c->world, MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN,
                                   c->world.mpi));
  int rc;
  if (all_have)
    rc = MPI_Comm_split(c->world.mpi, color, c->world.rank, &local);
  else
    rc = MPI_Comm_split_type(c->world.mpi, MPI_COMM_TYPE_SHARED, c->world.rank,
                             MPI_INFO_NULL, &local);
  if (rc != MPI_SUCCESS) return comm_mpi_error(&c->world, "split (node)", rc);
  GS_CHECK(group_init(c, &c->local, local));
  rc = MPI_Comm_split(c->world.mpi, c->local.rank, c->world.rank, &cross);
  if (rc != MPI_SUCCESS) return comm_mpi_error(&c->world, "split (cross)", rc);
  GS_CHECK(group_init(c, &c->cross, cross));
  /* Node index: rank in the cross communicator of local rank 0's. */
  int node = c->cross.rank;
  MPI_TRY(&c->local, MPI_Bcast(&node, 1, MPI_INT, 0, c->local.mpi));
  c->node = node;
  int lsize[2] = {c->local.size, -c->local.size};
  MPI_TRY(&c->world, MPI_Allreduce(MPI_IN_PLACE, lsize, 2, MPI_INT, MPI_MAX,
                                   c->world.mpi));
  c->uniform_nodes = lsize[0] == -lsize[1];
  int leaders = c->local.rank == 0;
  MPI_TRY(&c->world, MPI_Allreduce(&leaders, &c->nodes, 1, MPI_INT, MPI_SUM,
                                   c->world.mpi));
  return GS_OK;
}

/* A duration in seconds from the environment: a non-negative number, 0 for
 * "never", at most a year. */
static gs_status env_seconds(const char *name, double def, double *out) {
  *out = def;
  const char *s = getenv(name);
  if (s == NULL || *s == '\0') return GS_OK;
  char *end;
  double v = strtod(s, &end);
  if (*end || !(v >= 0) || v > 365.0 * 86400)
    return gs_error(GS_ERR_PARSE, "%s=%s: expected seconds from 0 (never) to "
                    "31536000", name, s);
  *out = v;
  return GS_OK;
}

/* FNV-1a over a file's bytes: 0 stands for "not set", 1 for "unreadable".
 * Every rank reads its own copy of GRADSYNC_COST_FILE; comparing these
 * catches copies that differ between nodes. */
static uint64_t file_hash(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return 1;
  uint64_t h = 1469598103934665603ull;
  unsigned char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    for (size_t i = 0; i < n; i++) h = (h ^ buf[i]) * 1099511628211ull;
  int bad = ferror(f);
  fclose(f);
  if (bad) return 1;
  return h > 1 ? h : h + 2;
}

static gs_status read_env(gs_comm *c) {
  const char *s = getenv("GRADSYNC_CHECK");
  c->check = s && *s && strcmp(s, "0") != 0;
  c->forced_allreduce = GS_ALGO_AUTO;
  s = getenv("GRADSYNC_ALLREDUCE_ALGO");
  if (s && *s) {
    gs_algo a;
    if (gs_algo_parse(s, &a) != GS_OK ||
        !(a == GS_ALGO_AUTO || a == GS_ALGO_MPI || a == GS_ALGO_RING ||
          a == GS_ALGO_RD || a == GS_ALGO_RABENSEIFNER || a == GS_ALGO_HIER))
      return gs_error(GS_ERR_PARSE, "GRADSYNC_ALLREDUCE_ALGO=%s: expected "
                      "ring, rd, rabenseifner, hier, mpi or auto", s);
    c->forced_allreduce = a;
  }
  /* GRADSYNC_CALIBRATE: 0 turns the start-up fit of each algorithm off; a
   * size (bytes) sets the largest message it times (default 4 MiB). */
  c->calibrate_bytes = 4u << 20;
  s = getenv("GRADSYNC_CALIBRATE");
  if (s && *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || (v != 0 && (v < 65536 || v > (1ull << 30))))
      return gs_error(GS_ERR_PARSE, "GRADSYNC_CALIBRATE=%s: expected 0 (off) or "
                      "a byte count from 65536 to 2^30", s);
    c->calibrate_bytes = (size_t)v;
  }
  c->spin_s = 50e-6;
  s = getenv("GRADSYNC_SPIN_US");
  if (s && *s) {
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v >= 0) || v > 1e6)
      return gs_error(GS_ERR_PARSE, "GRADSYNC_SPIN_US=%s: expected microseconds "
                      "from 0 to 1e6", s);
    c->spin_s = v * 1e-6;
  }
  GS_CHECK(env_seconds("GRADSYNC_TIMEOUT", 300, &c->timeout_s));
  GS_CHECK(env_seconds("GRADSYNC_STALL_WARN", 60, &c->stall_warn_s));
  const char *ea = getenv("GRADSYNC_ALPHA"), *eb = getenv("GRADSYNC_BETA");
  c->have_env_cost = ea && *ea && eb && *eb;
  if (c->have_env_cost) {
    char *end1, *end2;
    c->env_alpha = strtod(ea, &end1);
    c->env_beta = strtod(eb, &end2);
    /* Finite only: an infinite cost would reach every prediction and the
     * JSON records (which have no infinity). */
    if (*end1 || *end2 || !(c->env_alpha >= 0) || !(c->env_beta >= 0) ||
        !isfinite(c->env_alpha) || !isfinite(c->env_beta))
      return gs_error(GS_ERR_PARSE, "GRADSYNC_ALPHA=%s / GRADSYNC_BETA=%s: "
                      "expected finite non-negative numbers (seconds, s/byte)", ea, eb);
  }
  c->env_node = -1;
  s = getenv("GRADSYNC_NODE");
  if (s && *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v > INT_MAX)
      return gs_error(GS_ERR_PARSE, "GRADSYNC_NODE=%s is not a node index", s);
    c->env_node = (int)v;
  }
  s = getenv("GRADSYNC_COST_FILE");
  c->cost_file_hash = s && *s ? file_hash(s) : 0;
  GS_CHECK(parse_fault(c, getenv("GRADSYNC_FAULT")));
  c->segment_bytes = 256 * 1024;
  s = getenv("GRADSYNC_SEGMENT_BYTES");
  if (s && *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v < 1024 || v > (1ull << 30))
      return gs_error(GS_ERR_PARSE, "GRADSYNC_SEGMENT_BYTES=%s: expected a "
                      "byte count between 1024 and 2^30", s);
    c->segment_bytes = (size_t)v;
  }
  return GS_OK;
}

/* ---- One agreed configuration --------------------------------------------
 * Every setting that changes what a rank sends must be the same on every
 * rank, or ranks run different algorithms, segmentations or timeouts on
 * one message stream and hang or corrupt data. gs_comm_create gathers each
 * rank's status of reading its settings and the settings themselves in one
 * fixed-size allgather (which cannot hang on a difference), so that a bad
 * value on one rank, or a value that differs between ranks, is an error on
 * every rank naming the setting and the ranks. The cost model's fitted
 * values are then taken from rank 0 (gs_comm_create's last step). */
enum {
  CFG_SEGMENT, CFG_ALGO, CFG_CALIBRATE, CFG_SPIN, CFG_CHECK, CFG_TIMEOUT,
  CFG_STALL_WARN, CFG_ALPHA, CFG_BETA, CFG_COST_FILE, CFG_COUNT
};

static const struct {
  const char *name;
  char type; /* u: integer, a: algorithm, d: double, h: file hash */
} cfg_fields[CFG_COUNT] = {
    [CFG_SEGMENT] = {"GRADSYNC_SEGMENT_BYTES", 'u'},
    [CFG_ALGO] = {"GRADSYNC_ALLREDUCE_ALGO", 'a'},
    [CFG_CALIBRATE] = {"GRADSYNC_CALIBRATE", 'u'},
    [CFG_SPIN] = {"GRADSYNC_SPIN_US", 'd'},
    [CFG_CHECK] = {"GRADSYNC_CHECK", 'u'},
    [CFG_TIMEOUT] = {"GRADSYNC_TIMEOUT", 'd'},
    [CFG_STALL_WARN] = {"GRADSYNC_STALL_WARN", 'd'},
    [CFG_ALPHA] = {"GRADSYNC_ALPHA", 'd'},
    [CFG_BETA] = {"GRADSYNC_BETA", 'd'},
    [CFG_COST_FILE] = {"GRADSYNC_COST_FILE (its contents)", 'h'},
};

#define CFG_UNSET UINT64_MAX

typedef struct cfg_record {
  int32_t status;
  int32_t unused;
  uint64_t v[CFG_COUNT];
  char message[240];
} cfg_record;

static uint64_t dbits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static void cfg_format(int field, uint64_t v, char *out, size_t n) {
  double d;
  memcpy(&d, &v, sizeof d);
  if (v == CFG_UNSET) {
    snprintf(out, n, "unset");
    return;
  }
  switch (cfg_fields[field].type) {
    case 'a': snprintf(out, n, "%s", gs_algo_name((gs_algo)v)); break;
    case 'd': snprintf(out, n, "%g", field == CFG_SPIN ? d * 1e6 : d); break;
    case 'h':
      if (v == 0) snprintf(out, n, "unset");
      else if (v == 1) snprintf(out, n, "unreadable");
      else snprintf(out, n, "hash %016llx", (unsigned long long)v);
      break;
    default: snprintf(out, n, "%llu", (unsigned long long)v);
  }
}

static void cfg_collect(const gs_comm *c, cfg_record *r) {
  r->v[CFG_SEGMENT] = c->segment_bytes;
  r->v[CFG_ALGO] = (uint64_t)c->forced_allreduce;
  r->v[CFG_CALIBRATE] = c->calibrate_bytes;
  r->v[CFG_SPIN] = dbits(c->spin_s);
  r->v[CFG_CHECK] = (uint64_t)c->check;
  r->v[CFG_TIMEOUT] = dbits(c->timeout_s);
  r->v[CFG_STALL_WARN] = dbits(c->stall_warn_s);
  r->v[CFG_ALPHA] = c->have_env_cost ? dbits(c->env_alpha) : CFG_UNSET;
  r->v[CFG_BETA] = c->have_env_cost ? dbits(c->env_beta) : CFG_UNSET;
  r->v[CFG_COST_FILE] = c->cost_file_hash;
}

/* Agrees on `local` (this rank's status of its local set-up, with its
 * message in gs_last_error) and on the configuration. Returns the same
 * failure on every rank when any rank failed or the settings differ. */
static gs_status agree_config(gs_comm *c, gs_status local) {
  int p = c->world.size, me = c->world.rank;
  cfg_record mine;
  memset(&mine, 0, sizeof mine);
  mine.status = (int32_t)local;
  if (local != GS_OK) gs__error_copy(mine.message, sizeof mine.message);
  else cfg_collect(c, &mine);
  cfg_record *all = gs_calloc((size_t)p, sizeof *all);
  if (all == NULL) return GS_ERR_NOMEM; /* the others then time out */
  int rc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all,
                         (int)sizeof mine, MPI_BYTE, c->world.mpi);
  if (rc != MPI_SUCCESS) {
    gs_free(all);
    return comm_mpi_error(&c->world, "MPI_Allgather (configuration)", rc);
  }
  char msg[1024];
  size_t n = 0;
  gs_status st = GS_OK;
  int nfailed = 0;
  for (int r = 0; r < p; r++) {
    if (all[r].status == GS_OK) continue;
    if (st == GS_OK) st = (gs_status)all[r].status;
    if (nfailed++ < 3 && r != me && n < sizeof msg)
      n += (size_t)snprintf(msg + n, sizeof msg - n, "; rank %d failed (%s): %.*s",
                            r, gs_strerror((gs_status)all[r].status),
                            (int)sizeof all[r].message - 1, all[r].message);
  }
  if (st != GS_OK) {
    gs_free(all);
    if (local != GS_OK) {
      char own[1024];
      gs__error_copy(own, sizeof own);
      return gs_error(local, "gs_comm_create on rank %d: %s%s", me, own,
                      nfailed > 1 ? " (and other ranks failed too)" : "");
    }
    return gs_error(st, "gs_comm_create on rank %d: %d rank(s) could not set "
                    "up%s%s", me, nfailed, msg, nfailed > 3 ? "; ..." : "");
  }
  int bad_fields = 0;
  for (int f = 0; f < CFG_COUNT; f++) {
    int differ = 0;
    for (int r = 1; r < p; r++) differ |= all[r].v[f] != all[0].v[f];
    if (!differ) continue;
    if (bad_fields++ >= 3) continue;
    char v0[64];
    cfg_format(f, all[0].v[f], v0, sizeof v0);
    if (n < sizeof msg)
      n += (size_t)snprintf(msg + n, sizeof msg - n, "; %s is %s on rank 0 but",
                            cfg_fields[f].name, v0);
    int shown = 0;
    for (int r = 1; r < p && n < sizeof msg; r++) {
      if (all[r].v[f] == all[0].v[f]) continue;
      char vr[64];
      cfg_format(f, all[r].v[f], vr, sizeof vr);
      if (shown++ < 4)
        n += (size_t)snprintf(msg + n, sizeof msg - n, "%s %s on rank %d",
                              shown > 1 ? "," : "", vr, r);
      else if (shown == 5)
        n += (size_t)snprintf(msg + n, sizeof msg - n, ", ...");
    }
  }
  gs_free(all);
  if (bad_fields == 0) return GS_OK;
  return gs_error(GS_ERR_MISMATCH, "gs_comm_create on rank %d: %d setting(s) "
                  "differ between ranks and must be the same on every rank%s%s",
                  me, bad_fields, msg, bad_fields > 3 ? "; ..." : "");
}

/* MPI's thread level decides what may call MPI when. gradsync's progress
 * thread makes every MPI call of the collectives, and the watchdog may call
 * MPI_Abort, so MPI must allow calls from any thread, one at a time. */
static gs_status check_thread_level(gs_comm *c) {
  int provided = MPI_THREAD_SINGLE;
  int rc = MPI_Query_thread(&provided);
  if (rc != MPI_SUCCESS) return comm_mpi_error(&c->world, "MPI_Query_thread", rc);
  c->thread_level = provided;
  if (provided >= MPI_THREAD_SERIALIZED) return GS_OK;
  return gs_error(GS_ERR_UNSUPPORTED,
                  "MPI was initialised with thread level %s; gradsync's "
                  "progress thread needs MPI_THREAD_SERIALIZED (and an "
                  "application that calls MPI itself while a gs_comm exists, "
                  "MPI_THREAD_MULTIPLE): initialise MPI with gs_init or "
                  "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)",
                  provided == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE"
                                                : "MPI_THREAD_FUNNELED");
}

static void comm_free_mpi(gs_comm *c) {
  shm_free(c);
  if (c->cross.mpi != MPI_COMM_NULL) MPI_Comm_free(&c->cross.mpi);
  if (c->local.mpi != MPI_COMM_NULL) MPI_Comm_free(&c->local.mpi);
  if (c->world.mpi != MPI_COMM_NULL) MPI_Comm_free(&c->world.mpi);
}

/* The interval at which stalls are looked for: a quarter of the shortest
 * configured interval, between 50 ms and 1 s; 0 when neither is set. */
static double watchdog_tick(const gs_comm *c) {
  double m = 0;
  if (c->timeout_s > 0) m = c->timeout_s;
  if (c->stall_warn_s > 0 && (m == 0 || c->stall_warn_s < m)) m = c->stall_warn_s;
  if (m == 0) return 0;
  m /= 4;
  return m < 0.05 ? 0.05 : m > 1.0 ? 1.0 : m;
}

static int cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
  return rc;
}

/* Stops the watchdog; after the progress thread, which it may have to end. */
static void watchdog_stop(gs_comm *c) {
  if (!c->watchdog_running) return;
  pthread_mutex_lock(&c->wd_mu);
  c->wd_stop = 1;
  pthread_cond_signal(&c->wd_cv);
  pthread_mutex_unlock(&c->wd_mu);
  pthread_join(c->watchdog, NULL);
  c->watchdog_running = 0;
}

/* Fails a half-made communicator: its threads run, so destroy it. */
static gs_status create_fail(gs_comm *c, gs_status st) {
  char msg[1024];
  gs__error_copy(msg, sizeof msg);
  gs_comm_destroy(c);
  gs__error_set_message(msg);
  return st;
}

gs_status gs_comm_create(MPI_Comm mpi_comm, gs_comm **out) {
  if (out == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_comm_create: out is NULL");
  *out = NULL;
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited)
    return gs_error(GS_ERR_STATE, "gs_comm_create: MPI is not initialised "
                    "(call gs_init or MPI_Init_thread first)");
  if (mpi_comm == MPI_COMM_NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_comm_create: MPI_COMM_NULL");
  gs_comm *c = gs_calloc(1, sizeof *c);
  if (c == NULL) return GS_ERR_NOMEM;
  c->world.mpi = c->local.mpi = c->cross.mpi = MPI_COMM_NULL;
  c->given = mpi_comm;
  atomic_store(&c->user_base, UINT64_MAX);
  gs_status st;
  MPI_Comm dup;
  int rc = MPI_Comm_dup(mpi_comm, &dup);
  if (rc != MPI_SUCCESS) {
    gs_free(c);
    return gs_error(GS_ERR_MPI, "gs_comm_create: MPI_Comm_dup failed (%d)", rc);
  }
  GS_CHECK_GOTO(group_init(c, &c->world, dup), st, fail);
  /* Everything that can fail on one rank alone is checked before the first
   * collective that depends on it, and agreed on. */
  st = check_thread_level(c);
  if (st == GS_OK) st = read_env(c);
  GS_CHECK_GOTO(agree_config(c, st), st, fail);
  GS_CHECK_GOTO(setup_nodes(c), st, fail);
  GS_CHECK_GOTO(shm_init(c), st, fail);
  GS_CHECK_GOTO(setup_cost(c), st, fail);
  c->wd_tick_s = watchdog_tick(c);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv_work, NULL);
  cond_init_monotonic(&c->cv_done);
  pthread_mutex_init(&c->wd_mu, NULL);
  cond_init_monotonic(&c->wd_cv);
  if (pthread_create(&c->thread, NULL, progress_main, c) != 0) {
    st = gs_error(GS_ERR_INTERNAL, "gs_comm_create: cannot start the progress "
                  "thread");
    pthread_cond_destroy(&c->wd_cv);
    pthread_mutex_destroy(&c->wd_mu);
    pthread_cond_destroy(&c->cv_done);
    pthread_cond_destroy(&c->cv_work);
    pthread_mutex_destroy(&c->mu);
    goto fail;
  }
  /* Names for top -H, gdb and /proc: whose thread uses the CPU. */
  pthread_setname_np(c->thread, "gs-comm");
  /* Without the watchdog thread, gs_wait still looks for stalls itself. */
  if (c->wd_tick_s > 0)
    c->watchdog_running =
        pthread_create(&c->watchdog, NULL, watchdog_main, c) == 0;
  if (c->watchdog_running) pthread_setname_np(c->watchdog, "gs-watchdog");
  if (c->calibrate_bytes > 0 && c->world.size > 1 && !c->cost_from_env) {
    /* Fit every allreduce algorithm on this network (collective: every rank
     * took the same branch, since the settings are agreed on). */
    st = gs_comm_calibrate(c, c->calibrate_bytes);
    if (st != GS_OK) return create_fail(c, st);
  }
  if (c->world.size > 1) {
    /* Rank 0's cost model for all: the measurements are maxima over ranks,
     * but one broadcast makes the algorithm choice agree by construction. */
    st = gs_bcast(c, &c->cost, sizeof c->cost, GS_U8, 0, GS_ALGO_MPI);
    if (st != GS_OK) return create_fail(c, st);
  }
  /* Every start-up collective has completed (gs_wait synchronised with the
   * progress thread), so seq is stable here. */
  atomic_store(&c->user_base, atomic_load(&c->seq));
  *out = c;
  return GS_OK;
fail:
  comm_free_mpi(c);
  gs_free(c);
  return st;
}

gs_status gs_comm_destroy(gs_comm *c) {
  if (c == NULL) return GS_OK;
  pthread_mutex_lock(&c->mu);
  c->stopping = 1;
  pthread_cond_signal(&c->cv_work);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->thread, NULL);
  watchdog_stop(c);
  pthread_cond_destroy(&c->wd_cv);
  pthread_mutex_destroy(&c->wd_mu);
  pthread_cond_destroy(&c->cv_done);
  pthread_cond_destroy(&c->cv_work);
  pthread_mutex_destroy(&c->mu);
  comm_free_mpi(c);
  gs_free(c->scratch);
  gs_free(c->work);
  gs_free(c);
  return GS_OK;
}

double gs_comm_timeout_s(const gs_comm *c) { return c->timeout_s; }
double gs_comm_stall_warn_s(const gs_comm *c) { return c->stall_warn_s; }
int gs_comm_thread_level(const gs_comm *c) { return c->thread_level; }

/* Set by the first thread of this process to end the job: MPI_Abort is not
 * safe from two threads at once (measured: the engine's watchdog and the
 * communicator's, timing out on the same stall, crashed inside it). */
static atomic_int abort_started;

_Noreturn void gs_comm_abort(gs_comm *c, int code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int rank = c ? c->world.rank : -1;
  fprintf(stderr, "gradsync: rank %d: fatal: %s\n", rank, msg);
  fflush(stderr);
  if (c) {
    /* No lock: the progress thread may hold it while stuck. A torn read of
     * this flag cannot matter, the job is ending. */
    atomic_store(&c->failed, 1);
  }
  if (atomic_exchange(&abort_started, 1)) {
    /* Another thread is in MPI_Abort: let it end the job, and end this
     * process only if it has not after a while. */
    struct timespec left = {10, 0};
    while (nanosleep(&left, &left) != 0) {
    }
    _exit(code ? code : 1);
  }
  MPI_Abort(c ? c->world.mpi : MPI_COMM_WORLD, code ? code : 1);
  /* MPI_Abort can return when every rank aborts at once (ORTE loses the
   * race). End this rank with the code then, by _exit, not abort(): a
   * SIGABRT runs Open MPI's backtrace handler, which is not signal-safe. */
  _exit(code ? code : 1);
}

int gs_comm_rank(const gs_comm *c) { return c->world.rank; }
MPI_Comm gs_comm_mpi(const gs_comm *c) { return c ? c->given : MPI_COMM_NULL; }
int gs_comm_size(const gs_comm *c) { return c->world.size; }
int gs_comm_local_rank(const gs_comm *c) { return c->local.rank; }
int gs_comm_local_size(const gs_comm *c) { return c->local.size; }
int gs_comm_node(const gs_comm *c) { return c->node; }
int gs_comm_nodes(const gs_comm *c) { return c->nodes; }
int gs_comm_shared_memory(const gs_comm *c) { return shm_active(c); }
const gs_cost_params *gs_comm_cost(const gs_comm *c) { return &c->cost; }
void gs_comm_set_cost(gs_comm *c, const gs_cost_params *p) { c->cost = *p; }

gs_algo gs_comm_choose_allreduce(const gs_comm *c, size_t bytes) {
  gs_algo a = c->forced_allreduce;
  if (a == GS_ALGO_AUTO) {
    gs_cost_topo t = {c->world.size, c->nodes};
    if (!c->uniform_nodes) t.nodes = c->world.size; /* hier not applicable */
    a = gs_cost_best_allreduce(&c->cost, t, (double)bytes, NULL);
  }
  if (a == GS_ALGO_HIER && !c->uniform_nodes) a = GS_ALGO_RING;
  return a;
}

/* ---- Per-algorithm calibration ------------------------------------------ */

static size_t pow_size(size_t b, int e) {
  size_t r = 1;
  while (e-- > 0 && r < ((size_t)1 << 40)) r *= b;
  return r;
}

/* Times one allreduce algorithm at one size: the minimum over reps of the
 * slowest rank, so every rank fits the same numbers. */
static gs_status time_allreduce(gs_comm *c, gs_algo algo, float *buf,
                                size_t count, int reps, double *secs) {
  double t[8];
  GS_CHECK(gs_allreduce(c, GS_IN_PLACE, buf, count, GS_F32, GS_SUM, algo));
  for (int i = 0; i < reps; i++) {
    GS_CHECK(gs_barrier(c, GS_ALGO_MPI));
    double t0 = gs_now();
    GS_CHECK(gs_allreduce(c, GS_IN_PLACE, buf, count, GS_F32, GS_SUM, algo));
    t[i] = gs_now() - t0;
  }
  GS_CHECK(gs_allreduce(c, GS_IN_PLACE, t, (size_t)reps, GS_F64, GS_MAX,
                        GS_ALGO_MPI));
  double best = t[0];
  for (int i = 1; i < reps; i++) best = GS_MIN(best, t[i]);
  *secs = best;
  return GS_OK;
}

gs_status gs_comm_calibrate(gs_comm *c, size_t max_bytes) {
  if (c == NULL) return gs_error(GS_ERR_INVALID_ARG, "calibrate: comm is NULL");
  if (max_bytes < 64 * 1024) max_bytes = 64 * 1024;
  if (c->world.size < 2) return GS_OK;
  gs_algo algos[4] = {GS_ALGO_RING, GS_ALGO_RD, GS_ALGO_RABENSEIFNER, GS_ALGO_HIER};
  int nalgo = c->uniform_nodes && c->nodes > 1 && c->local.size > 1 ? 4 : 3;
  double bytes[12], secs[12];
  size_t nsize = 0;
  /* Sizes from 4 KB to max_bytes, at most 8 of them, the largest included. */
  size_t step = 4;
  while (4096 * pow_size(step, 7) < max_bytes) step *= 2;
  for (size_t b = 4096; b < max_bytes && nsize < 7; b *= step) bytes[nsize++] = (double)b;
  bytes[nsize++] = (double)max_bytes;
  float *buf = gs_calloc(max_bytes / sizeof(float) + 1, sizeof(float));
  if (buf == NULL) return GS_ERR_NOMEM;
  gs_cost_topo t = {c->world.size, c->nodes};
  gs_cost_params fitted = c->cost;
  gs_status st = GS_OK;
  for (int a = 0; a < nalgo && st == GS_OK; a++) {
    for (size_t i = 0; i < nsize && st == GS_OK; i++)
      st = time_allreduce(c, algos[a], buf, (size_t)bytes[i] / sizeof(float), 3,
                          &secs[i]);
    if (st == GS_OK) st = gs_cost_fit_algo(&fitted, t, algos[a], bytes, secs, nsize);
    if (st == GS_OK)
      gs_log(GS_LOG_INFO, "calibrated %s: alpha %.3g s, beta %.3g s/B",
             gs_algo_name(algos[a]), fitted.fit[algos[a]].alpha,
             fitted.fit[algos[a]].beta);
  }
  gs_free(buf);
  if (st == GS_OK) c->cost = fitted;
  return st;
}
