/*
 * The communicator: MPI set-up, the progress thread and its queue, requests,
 * the GRADSYNC_CHECK consistency check and the cost calibration.
 *
 * Threading: gs_comm_create and gs_comm_destroy make MPI calls on the
 * caller's thread, before the progress thread starts and after it stopped.
 * In between, only the progress thread calls MPI (Horovod's shape).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>

#include "comm_internal.h"

static int mpi_inited_by_us;

static const char *algo_names[GS_ALGO_COUNT] = {
    [GS_ALGO_AUTO] = "auto",         [GS_ALGO_MPI] = "mpi",
    [GS_ALGO_RING] = "ring",         [GS_ALGO_RD] = "rd",
    [GS_ALGO_RABENSEIFNER] = "rabenseifner", [GS_ALGO_HIER] = "hier",
    [GS_ALGO_PIPELINE] = "pipeline", [GS_ALGO_BINOMIAL] = "binomial",
    [GS_ALGO_PAIRWISE] = "pairwise", [GS_ALGO_DISSEMINATION] = "dissemination",
};

const char *gs_algo_name(gs_algo algo) {
  if ((unsigned)algo >= GS_ALGO_COUNT) return "invalid-algo";
  return algo_names[algo];
}

gs_status gs_algo_parse(const char *name, gs_algo *out) {
  if (name == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "algorithm name is NULL");
  for (int i = 0; i < GS_ALGO_COUNT; i++) {
    if (strcasecmp(name, algo_names[i]) == 0) {
      *out = (gs_algo)i;
      return GS_OK;
    }
  }
  return gs_error(GS_ERR_INVALID_ARG,
                  "unknown algorithm '%s' (expected auto, mpi, ring, rd, "
                  "rabenseifner, hier, pipeline, binomial, pairwise or "
                  "dissemination)", name);
}

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
  }
  return "unknown";
}

gs_status gs_init(int *argc, char ***argv) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) return GS_OK;
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
    int failed = c->failed;
    pthread_mutex_unlock(&c->mu);

    gs_status st;
    gs_clear_error();
    if (failed) {
      st = gs_error(GS_ERR_STATE, "rank %d: the communicator failed earlier "
                    "and cannot run %s: %s", c->world.rank,
                    coll_kind_name(req->args.kind), c->failure);
    } else {
      st = execute(c, &req->args);
      if (st == GS_ERR_MPI) {
        /* The message streams between ranks may now be out of step. */
        snprintf(c->failure, sizeof c->failure, "%s", gs_last_error());
      }
    }
    gs__error_copy(req->message, sizeof req->message);

    pthread_mutex_lock(&c->mu);
    if (st == GS_ERR_MPI) c->failed = 1;
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
  gs_free(req);
}

gs_status gs_wait(gs_request *req) {
  if (req == NULL) return GS_OK;
  gs_comm *c = req->comm;
  if (!spin_until(&req->done, c->spin_s)) {
    pthread_mutex_lock(&c->mu);
    c->waiters++;
    while (!atomic_load(&req->done)) pthread_cond_wait(&c->cv_done, &c->mu);
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

static gs_status group_init(coll_group *g, MPI_Comm mpi) {
  g->mpi = mpi;
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
  const size_t mid = 512 * 1024, big = 2 * 1024 * 1024;
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
  const char *ea = getenv("GRADSYNC_ALPHA"), *eb = getenv("GRADSYNC_BETA");
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
  if (ea && eb) {
    c->cost_from_env = 1;
    char *end1, *end2;
    c->cost.alpha = strtod(ea, &end1);
    c->cost.beta = strtod(eb, &end2);
    if (*end1 || *end2 || c->cost.alpha < 0 || c->cost.beta < 0)
      return gs_error(GS_ERR_PARSE, "GRADSYNC_ALPHA=%s / GRADSYNC_BETA=%s: "
                      "expected non-negative numbers (seconds, s/byte)", ea, eb);
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
    GS_CHECK(calibrate_group(&c->local, &v[0], &v[1]));
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
  const char *env_node = getenv("GRADSYNC_NODE");
  int color = -1;
  if (env_node && *env_node) {
    char *end;
    long v = strtol(env_node, &end, 10);
    if (*end || v < 0 || v > INT_MAX)
      return gs_error(GS_ERR_PARSE, "GRADSYNC_NODE=%s is not a node index",
                      env_node);
    color = (int)v;
  }
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
  GS_CHECK(group_init(&c->local, local));
  rc = MPI_Comm_split(c->world.mpi, c->local.rank, c->world.rank, &cross);
  if (rc != MPI_SUCCESS) return comm_mpi_error(&c->world, "split (cross)", rc);
  GS_CHECK(group_init(&c->cross, cross));
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

static void comm_free_mpi(gs_comm *c) {
  if (c->cross.mpi != MPI_COMM_NULL) MPI_Comm_free(&c->cross.mpi);
  if (c->local.mpi != MPI_COMM_NULL) MPI_Comm_free(&c->local.mpi);
  if (c->world.mpi != MPI_COMM_NULL) MPI_Comm_free(&c->world.mpi);
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
  gs_status st;
  MPI_Comm dup;
  int rc = MPI_Comm_dup(mpi_comm, &dup);
  if (rc != MPI_SUCCESS) {
    gs_free(c);
    return gs_error(GS_ERR_MPI, "gs_comm_create: MPI_Comm_dup failed (%d)", rc);
  }
  GS_CHECK_GOTO(group_init(&c->world, dup), st, fail);
  GS_CHECK_GOTO(read_env(c), st, fail);
  GS_CHECK_GOTO(setup_nodes(c), st, fail);
  GS_CHECK_GOTO(setup_cost(c), st, fail);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv_work, NULL);
  pthread_cond_init(&c->cv_done, NULL);
  if (pthread_create(&c->thread, NULL, progress_main, c) != 0) {
    st = gs_error(GS_ERR_INTERNAL, "gs_comm_create: cannot start the progress "
                  "thread");
    pthread_cond_destroy(&c->cv_done);
    pthread_cond_destroy(&c->cv_work);
    pthread_mutex_destroy(&c->mu);
    goto fail;
  }
  if (c->calibrate_bytes > 0 && c->world.size > 1 && !c->cost_from_env) {
    /* Fit every allreduce algorithm on this network (collective: every rank
     * took the same branch, since the settings come from the launcher's
     * environment and the file load is agreed on). */
    st = gs_comm_calibrate(c, c->calibrate_bytes);
    if (st != GS_OK) {
      char msg[1024];
      gs__error_copy(msg, sizeof msg);
      gs_comm_destroy(c);
      gs__error_set_message(msg);
      return st;
    }
  }
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
    c->failed = 1;
  }
  MPI_Abort(c ? c->world.mpi : MPI_COMM_WORLD, code ? code : 1);
  abort(); /* MPI_Abort does not return; if it did, end this rank anyway */
}

int gs_comm_rank(const gs_comm *c) { return c->world.rank; }
int gs_comm_size(const gs_comm *c) { return c->world.size; }
int gs_comm_local_rank(const gs_comm *c) { return c->local.rank; }
int gs_comm_local_size(const gs_comm *c) { return c->local.size; }
int gs_comm_node(const gs_comm *c) { return c->node; }
int gs_comm_nodes(const gs_comm *c) { return c->nodes; }
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
