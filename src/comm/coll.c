/*
 * The public collective calls: argument checking, algorithm resolution and
 * queueing. Nothing here touches MPI; the progress thread runs the work.
 */
#include <limits.h>
#include <string.h>

#include "comm_internal.h"

/* Limits of one collective: element counts whose byte size fits in a
 * ptrdiff_t, so that every offset computed from them is defined. */
static gs_status check_common(gs_comm *c, const char *what, gs_dtype dtype,
                              size_t count, size_t multiplier) {
  if (c == NULL) return gs_error(GS_ERR_INVALID_ARG, "%s: communicator is NULL", what);
  if ((unsigned)dtype >= GS_DTYPE_COUNT)
    return gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: invalid dtype %d", what,
                    c->world.rank, (int)dtype);
  size_t elems, bytes;
  if (gs_mul_size(count, multiplier, &elems) != GS_OK ||
      gs_mul_size(elems, gs_dtype_size(dtype), &bytes) != GS_OK ||
      bytes > (size_t)PTRDIFF_MAX)
    return gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: count %zu x %zu of %s "
                    "overflows the address space", what, c->world.rank, count,
                    multiplier, gs_dtype_name(dtype));
  return GS_OK;
}

static gs_status check_buf(gs_comm *c, const char *what, const char *name,
                           const void *buf, size_t count) {
  if (buf == NULL && count > 0)
    return gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: %s is NULL with count "
                    "%zu", what, c->world.rank, name, count);
  return GS_OK;
}

static gs_status check_op(gs_comm *c, const char *what, gs_redop op) {
  if ((unsigned)op >= GS_REDOP_COUNT)
    return gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: invalid reduction op %d",
                    what, c->world.rank, (int)op);
  return GS_OK;
}

/* What GS_ALGO_AUTO means for a collective: the cost model's choice for
 * allreduce and bcast, the table's first row otherwise (the sparse
 * collectives' is GS_ALGO_AUTO: they choose on the progress thread). */
static gs_algo choose_auto(gs_comm *c, coll_kind kind, size_t bytes) {
  if (kind == COLL_ALLREDUCE) return gs_comm_choose_allreduce(c, bytes);
  if (kind == COLL_BCAST) {
    gs_cost_topo t = {c->world.size, c->world.size};
    double chain = gs_cost_bcast(&c->cost, t, GS_ALGO_PIPELINE, (double)bytes);
    double tree = gs_cost_bcast(&c->cost, t, GS_ALGO_BINOMIAL, (double)bytes);
    return tree <= chain ? GS_ALGO_BINOMIAL : GS_ALGO_PIPELINE;
  }
  return coll_algo_default(kind);
}

/* Resolves GS_ALGO_AUTO and rejects an algorithm the collective lacks (one
 * without a row in the table of algorithms, dispatch.c). */
static gs_status resolve_algo(gs_comm *c, coll_kind kind, gs_algo algo,
                              size_t bytes, gs_algo *out) {
  if ((unsigned)algo >= GS_ALGO_COUNT)
    return gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: invalid algorithm %d",
                    coll_kind_name(kind), c->world.rank, (int)algo);
  if (algo != GS_ALGO_AUTO && coll_algo_find(kind, algo) == NULL)
    return gs_error(GS_ERR_UNSUPPORTED, "%s on rank %d: algorithm %s does not "
                    "implement it", coll_kind_name(kind), c->world.rank,
                    gs_algo_name(algo));
  if (algo == GS_ALGO_AUTO) algo = choose_auto(c, kind, bytes);
  if (kind == COLL_ALLREDUCE && algo == GS_ALGO_HIER && !c->uniform_nodes)
    return gs_error(GS_ERR_UNSUPPORTED, "allreduce on rank %d: hier needs "
                    "the same number of ranks on every node", c->world.rank);
  *out = algo;
  return GS_OK;
}

static gs_status issue(gs_comm *c, coll_args *a, size_t bytes, gs_algo algo,
                       gs_request **req) {
  gs_status st = resolve_algo(c, a->kind, algo, bytes, &a->algo);
  if (st == GS_OK) {
    gs_request *r = gs_calloc(1, sizeof *r);
    if (r == NULL) {
      st = GS_ERR_NOMEM;
    } else {
      r->args = *a;
      r->comm = c;
      st = comm_enqueue(c, r);
      if (st == GS_OK) {
        *req = r;
        return GS_OK;
      }
      gs_free(r);
    }
  }
  gs_free(a->counts);
  gs_free(a->displs);
  gs_free(a->rcounts);
  gs_free(a->rdispls);
  return st;
}

#define BEGIN(what, reqp)                                                   \
  if ((reqp) == NULL)                                                       \
    return gs_error(GS_ERR_INVALID_ARG, "%s: request pointer is NULL", what); \
  *(reqp) = NULL;                                                           \
  if (c == NULL)                                                            \
    return gs_error(GS_ERR_INVALID_ARG, "%s: communicator is NULL", what)

gs_status gs_iallreduce(gs_comm *c, const void *sendbuf, void *recvbuf,
                        size_t count, gs_dtype dtype, gs_redop op, gs_algo algo,
                        gs_request **req) {
  BEGIN("allreduce", req);
  GS_CHECK(check_common(c, "allreduce", dtype, count, 1));
  GS_CHECK(check_op(c, "allreduce", op));
  GS_CHECK(check_buf(c, "allreduce", "recvbuf", recvbuf, count));
  if (sendbuf != GS_IN_PLACE)
    GS_CHECK(check_buf(c, "allreduce", "sendbuf", sendbuf, count));
  coll_args a = {.kind = COLL_ALLREDUCE,
                 .sendbuf = sendbuf == GS_IN_PLACE || sendbuf == recvbuf ? NULL : sendbuf,
                 .recvbuf = recvbuf, .count = count, .dtype = dtype, .op = op};
  return issue(c, &a, count * gs_dtype_size(dtype), algo, req);
}

gs_status gs_ireduce_scatter(gs_comm *c, const void *sendbuf, void *recvbuf,
                             size_t recvcount, gs_dtype dtype, gs_redop op,
                             gs_algo algo, gs_request **req) {
  BEGIN("reduce_scatter", req);
  GS_CHECK(check_common(c, "reduce_scatter", dtype, recvcount,
                        (size_t)c->world.size));
  GS_CHECK(check_op(c, "reduce_scatter", op));
  size_t total = recvcount * (size_t)c->world.size;
  if (sendbuf == GS_IN_PLACE) {
    GS_CHECK(check_buf(c, "reduce_scatter", "recvbuf", recvbuf, total));
  } else {
    GS_CHECK(check_buf(c, "reduce_scatter", "recvbuf", recvbuf, recvcount));
    GS_CHECK(check_buf(c, "reduce_scatter", "sendbuf", sendbuf, total));
  }
  coll_args a = {.kind = COLL_REDUCE_SCATTER,
                 .sendbuf = sendbuf == GS_IN_PLACE ? NULL : sendbuf,
                 .recvbuf = recvbuf, .count = recvcount, .dtype = dtype, .op = op};
  return issue(c, &a, total * gs_dtype_size(dtype), algo, req);
}

gs_status gs_iallgather(gs_comm *c, const void *sendbuf, void *recvbuf,
                        size_t sendcount, gs_dtype dtype, gs_algo algo,
                        gs_request **req) {
  BEGIN("allgather", req);
  GS_CHECK(check_common(c, "allgather", dtype, sendcount, (size_t)c->world.size));
  size_t total = sendcount * (size_t)c->world.size;
  GS_CHECK(check_buf(c, "allgather", "recvbuf", recvbuf, total));
  if (sendbuf != GS_IN_PLACE)
    GS_CHECK(check_buf(c, "allgather", "sendbuf", sendbuf, sendcount));
  coll_args a = {.kind = COLL_ALLGATHER,
                 .sendbuf = sendbuf == GS_IN_PLACE ? NULL : sendbuf,
                 .recvbuf = recvbuf, .count = sendcount, .dtype = dtype};
  return issue(c, &a, total * gs_dtype_size(dtype), algo, req);
}

/* Copies a per-rank count or displacement array. */
static gs_status copy_table(gs_comm *c, const char *what, const char *name,
                            const size_t *src, size_t **dst) {
  if (src == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: %s is NULL", what,
                    c->world.rank, name);
  size_t n = (size_t)c->world.size;
  *dst = gs_malloc(n * sizeof(size_t));
  if (*dst == NULL) return GS_ERR_NOMEM;
  memcpy(*dst, src, n * sizeof(size_t));
  return GS_OK;
}

/* Checks that count/displacement pairs fit in a buffer of `extent` elements
 * and returns the extent they need. */
static gs_status table_extent(gs_comm *c, const char *what, gs_dtype dtype,
                              const size_t *counts, const size_t *displs,
                              size_t *extent) {
  size_t ext = 0;
  for (int i = 0; i < c->world.size; i++) {
    if (counts[i] > SIZE_MAX - displs[i])
      return gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: entry %d: count %zu + "
                      "displacement %zu overflows", what, c->world.rank, i,
                      counts[i], displs[i]);
    if (counts[i] > 0) ext = GS_MAX(ext, counts[i] + displs[i]);
  }
  GS_CHECK(check_common(c, what, dtype, ext, 1));
  *extent = ext;
  return GS_OK;
}

gs_status gs_iallgatherv(gs_comm *c, const void *sendbuf, size_t sendcount,
                         void *recvbuf, const size_t *recvcounts,
                         const size_t *displs, gs_dtype dtype, gs_algo algo,
                         gs_request **req) {
  BEGIN("allgatherv", req);
  GS_CHECK(check_common(c, "allgatherv", dtype, sendcount, 1));
  coll_args a = {.kind = COLL_ALLGATHERV,
                 .sendbuf = sendbuf == GS_IN_PLACE ? NULL : sendbuf,
                 .recvbuf = recvbuf, .count = sendcount, .dtype = dtype};
  gs_status st = copy_table(c, "allgatherv", "recvcounts", recvcounts, &a.counts);
  if (st == GS_OK) st = copy_table(c, "allgatherv", "displs", displs, &a.displs);
  size_t ext = 0;
  if (st == GS_OK) st = table_extent(c, "allgatherv", dtype, a.counts, a.displs, &ext);
  if (st == GS_OK && a.counts[c->world.rank] != sendcount)
    st = gs_error(GS_ERR_INVALID_ARG, "allgatherv on rank %d: sendcount %zu "
                  "differs from recvcounts[%d] = %zu", c->world.rank, sendcount,
                  c->world.rank, a.counts[c->world.rank]);
  if (st == GS_OK) st = check_buf(c, "allgatherv", "recvbuf", recvbuf, ext);
  if (st == GS_OK && sendbuf != GS_IN_PLACE)
    st = check_buf(c, "allgatherv", "sendbuf", sendbuf, sendcount);
  if (st != GS_OK) {
    gs_free(a.counts);
    gs_free(a.displs);
    return st;
  }
  return issue(c, &a, ext * gs_dtype_size(dtype), algo, req);
}

gs_status gs_ibcast(gs_comm *c, void *buf, size_t count, gs_dtype dtype,
                    int root, gs_algo algo, gs_request **req) {
  BEGIN("bcast", req);
  GS_CHECK(check_common(c, "bcast", dtype, count, 1));
  GS_CHECK(check_buf(c, "bcast", "buf", buf, count));
  if (root < 0 || root >= c->world.size)
    return gs_error(GS_ERR_INVALID_ARG, "bcast on rank %d: root %d is not in "
                    "[0, %d)", c->world.rank, root, c->world.size);
  coll_args a = {.kind = COLL_BCAST, .recvbuf = buf, .count = count,
                 .dtype = dtype, .root = root};
  return issue(c, &a, count * gs_dtype_size(dtype), algo, req);
}

gs_status gs_ialltoall(gs_comm *c, const void *sendbuf, void *recvbuf,
                       size_t count, gs_dtype dtype, gs_algo algo,
                       gs_request **req) {
  BEGIN("alltoall", req);
  GS_CHECK(check_common(c, "alltoall", dtype, count, (size_t)c->world.size));
  size_t total = count * (size_t)c->world.size;
  if (sendbuf == GS_IN_PLACE)
    return gs_error(GS_ERR_UNSUPPORTED, "alltoall on rank %d: GS_IN_PLACE is "
                    "not supported; pass separate buffers", c->world.rank);
  GS_CHECK(check_buf(c, "alltoall", "sendbuf", sendbuf, total));
  GS_CHECK(check_buf(c, "alltoall", "recvbuf", recvbuf, total));
  coll_args a = {.kind = COLL_ALLTOALL, .sendbuf = sendbuf, .recvbuf = recvbuf,
                 .count = count, .dtype = dtype};
  return issue(c, &a, total * gs_dtype_size(dtype), algo, req);
}

gs_status gs_ialltoallv(gs_comm *c, const void *sendbuf,
                        const size_t *sendcounts, const size_t *sdispls,
                        void *recvbuf, const size_t *recvcounts,
                        const size_t *rdispls, gs_dtype dtype, gs_algo algo,
                        gs_request **req) {
  BEGIN("alltoallv", req);
  GS_CHECK(check_common(c, "alltoallv", dtype, 0, 1));
  if (sendbuf == GS_IN_PLACE)
    return gs_error(GS_ERR_UNSUPPORTED, "alltoallv on rank %d: GS_IN_PLACE is "
                    "not supported; pass separate buffers", c->world.rank);
  coll_args a = {.kind = COLL_ALLTOALLV, .sendbuf = sendbuf,
                 .recvbuf = recvbuf, .dtype = dtype};
  size_t sext = 0, rext = 0;
  gs_status st = copy_table(c, "alltoallv", "sendcounts", sendcounts, &a.counts);
  if (st == GS_OK) st = copy_table(c, "alltoallv", "sdispls", sdispls, &a.displs);
  if (st == GS_OK) st = copy_table(c, "alltoallv", "recvcounts", recvcounts, &a.rcounts);
  if (st == GS_OK) st = copy_table(c, "alltoallv", "rdispls", rdispls, &a.rdispls);
  if (st == GS_OK) st = table_extent(c, "alltoallv", dtype, a.counts, a.displs, &sext);
  if (st == GS_OK) st = table_extent(c, "alltoallv", dtype, a.rcounts, a.rdispls, &rext);
  if (st == GS_OK) st = check_buf(c, "alltoallv", "sendbuf", sendbuf, sext);
  if (st == GS_OK) st = check_buf(c, "alltoallv", "recvbuf", recvbuf, rext);
  if (st != GS_OK) {
    gs_free(a.counts);
    gs_free(a.displs);
    gs_free(a.rcounts);
    gs_free(a.rdispls);
    return st;
  }
  size_t total = 0;
  for (int i = 0; i < c->world.size; i++) total += a.counts[i];
  a.count = total;
  return issue(c, &a, total * gs_dtype_size(dtype), algo, req);
}

gs_status gs_ibarrier(gs_comm *c, gs_algo algo, gs_request **req) {
  BEGIN("barrier", req);
  coll_args a = {.kind = COLL_BARRIER};
  return issue(c, &a, 0, algo, req);
}

/* ---- Blocking wrappers --------------------------------------------------- */

#define WAIT_ON(call)              \
  do {                             \
    gs_request *r_;                \
    GS_CHECK(call);                \
    return gs_wait(r_);            \
  } while (0)

gs_status gs_allreduce(gs_comm *c, const void *s, void *r, size_t n,
                       gs_dtype d, gs_redop op, gs_algo algo) {
  WAIT_ON(gs_iallreduce(c, s, r, n, d, op, algo, &r_));
}
gs_status gs_reduce_scatter(gs_comm *c, const void *s, void *r, size_t n,
                            gs_dtype d, gs_redop op, gs_algo algo) {
  WAIT_ON(gs_ireduce_scatter(c, s, r, n, d, op, algo, &r_));
}
gs_status gs_allgather(gs_comm *c, const void *s, void *r, size_t n,
                       gs_dtype d, gs_algo algo) {
  WAIT_ON(gs_iallgather(c, s, r, n, d, algo, &r_));
}
gs_status gs_allgatherv(gs_comm *c, const void *s, size_t n, void *r,
                        const size_t *counts, const size_t *displs, gs_dtype d,
                        gs_algo algo) {
  WAIT_ON(gs_iallgatherv(c, s, n, r, counts, displs, d, algo, &r_));
}
gs_status gs_bcast(gs_comm *c, void *b, size_t n, gs_dtype d, int root,
                   gs_algo algo) {
  WAIT_ON(gs_ibcast(c, b, n, d, root, algo, &r_));
}
gs_status gs_alltoall(gs_comm *c, const void *s, void *r, size_t n, gs_dtype d,
                      gs_algo algo) {
  WAIT_ON(gs_ialltoall(c, s, r, n, d, algo, &r_));
}
gs_status gs_alltoallv(gs_comm *c, const void *s, const size_t *sc,
                       const size_t *sd, void *r, const size_t *rc,
                       const size_t *rd, gs_dtype d, gs_algo algo) {
  WAIT_ON(gs_ialltoallv(c, s, sc, sd, r, rc, rd, d, algo, &r_));
}
gs_status gs_barrier(gs_comm *c, gs_algo algo) {
  WAIT_ON(gs_ibarrier(c, algo, &r_));
}
