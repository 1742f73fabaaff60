/*
 * Execution of a request on the progress thread: the GRADSYNC_CHECK
 * consistency check, then the one table of algorithms, which says for each
 * collective which algorithms implement it and which function runs each.
 * An algorithm arrives as a file of its own and one row here; coll.c
 * consults the same table to reject an algorithm a collective lacks.
 */
#include <stdio.h>
#include <string.h>

#include "sparse_internal.h"

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

/* The allreduce algorithms work in place in recvbuf: copy the input there
 * first. GS_AVG divides by the group's size once, inside the algorithm. */
static int allreduce_input(gs_comm *c, coll_args *a) {
  size_t esize = gs_dtype_size(a->dtype);
  if (a->sendbuf != NULL && a->count > 0)
    memcpy(a->recvbuf, a->sendbuf, a->count * esize);
  return a->op == GS_AVG ? c->world.size : 1;
}

static gs_status run_allreduce_ring(gs_comm *c, coll_args *a) {
  int div = allreduce_input(c, a);
  return allreduce_ring(c, &c->world, a->recvbuf, a->count, a->dtype, a->op, div);
}

static gs_status run_allreduce_rd(gs_comm *c, coll_args *a) {
  int div = allreduce_input(c, a);
  return allreduce_rd(c, &c->world, a->recvbuf, a->count, a->dtype, a->op, div);
}

static gs_status run_allreduce_rabenseifner(gs_comm *c, coll_args *a) {
  int div = allreduce_input(c, a);
  return allreduce_rabenseifner(c, &c->world, a->recvbuf, a->count, a->dtype,
                                a->op, div);
}

static gs_status run_allreduce_hier(gs_comm *c, coll_args *a) {
  (void)allreduce_input(c, a); /* hier divides by the size itself */
  return allreduce_hier(c, a->recvbuf, a->count, a->dtype, a->op);
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

static gs_status run_allgatherv_ring(gs_comm *c, coll_args *a) {
  return run_allgatherv(c, a, a->counts, a->displs);
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

static gs_status run_bcast_pipeline(gs_comm *c, coll_args *a) {
  return bcast_pipeline(c, &c->world, a->recvbuf,
                        a->count * gs_dtype_size(a->dtype), a->root);
}

static gs_status run_bcast_binomial(gs_comm *c, coll_args *a) {
  return bcast_binomial(c, &c->world, a->recvbuf,
                        a->count * gs_dtype_size(a->dtype), a->root);
}

static gs_status run_barrier(gs_comm *c, coll_args *a) {
  (void)a;
  return barrier_dissemination(&c->world);
}

static gs_status run_sparse_allgather(gs_comm *c, coll_args *a) {
  return sparse_run_allgather(c, a->sparse);
}

static gs_status run_sparse_allreduce(gs_comm *c, coll_args *a) {
  return sparse_run_allreduce(c, a->sparse);
}

static gs_status run_gtopk(gs_comm *c, coll_args *a) {
  return sparse_run_gtopk(c, a->sparse);
}

static gs_status run_hitopk(gs_comm *c, coll_args *a) {
  return sparse_run_hitopk(c, a->sparse);
}

/* ---- The table of algorithms ----------------------------------------------
 * One row per (collective, algorithm). A collective's first row is its
 * default where the cost model has no say (coll_algo_default); allreduce
 * and bcast are chosen by the cost model (coll.c). The sparse collectives
 * choose their algorithm themselves on the progress thread, so their one
 * row is GS_ALGO_AUTO, and MPI, which has no sparse collectives, has none. */
static const coll_algo_row coll_algos[] = {
    {COLL_ALLREDUCE, GS_ALGO_RING, run_allreduce_ring},
    {COLL_ALLREDUCE, GS_ALGO_RD, run_allreduce_rd},
    {COLL_ALLREDUCE, GS_ALGO_RABENSEIFNER, run_allreduce_rabenseifner},
    {COLL_ALLREDUCE, GS_ALGO_HIER, run_allreduce_hier},
    {COLL_ALLREDUCE, GS_ALGO_MPI, mpi_allreduce},
    {COLL_REDUCE_SCATTER, GS_ALGO_RING, run_reduce_scatter},
    {COLL_REDUCE_SCATTER, GS_ALGO_MPI, mpi_reduce_scatter},
    {COLL_ALLGATHER, GS_ALGO_RING, run_allgather},
    {COLL_ALLGATHER, GS_ALGO_MPI, mpi_allgather},
    {COLL_ALLGATHERV, GS_ALGO_RING, run_allgatherv_ring},
    {COLL_ALLGATHERV, GS_ALGO_MPI, mpi_allgatherv},
    {COLL_BCAST, GS_ALGO_PIPELINE, run_bcast_pipeline},
    {COLL_BCAST, GS_ALGO_BINOMIAL, run_bcast_binomial},
    {COLL_BCAST, GS_ALGO_MPI, mpi_bcast},
    {COLL_ALLTOALL, GS_ALGO_PAIRWISE, run_alltoall},
    {COLL_ALLTOALL, GS_ALGO_MPI, mpi_alltoall},
    {COLL_ALLTOALLV, GS_ALGO_PAIRWISE, run_alltoall},
    {COLL_ALLTOALLV, GS_ALGO_MPI, mpi_alltoallv},
    {COLL_BARRIER, GS_ALGO_DISSEMINATION, run_barrier},
    {COLL_BARRIER, GS_ALGO_MPI, mpi_barrier},
    {COLL_SPARSE_ALLGATHER, GS_ALGO_AUTO, run_sparse_allgather},
    {COLL_SPARSE_ALLREDUCE, GS_ALGO_AUTO, run_sparse_allreduce},
    {COLL_GTOPK, GS_ALGO_AUTO, run_gtopk},
    {COLL_HITOPK, GS_ALGO_AUTO, run_hitopk},
};

#define COLL_NALGOS (sizeof coll_algos / sizeof coll_algos[0])

const coll_algo_row *coll_algo_find(coll_kind kind, gs_algo algo) {
  for (size_t i = 0; i < COLL_NALGOS; i++)
    if (coll_algos[i].kind == kind && coll_algos[i].algo == algo)
      return &coll_algos[i];
  return NULL;
}

gs_algo coll_algo_default(coll_kind kind) {
  for (size_t i = 0; i < COLL_NALGOS; i++)
    if (coll_algos[i].kind == kind) return coll_algos[i].algo;
  return GS_ALGO_AUTO;
}

size_t coll_algo_list(coll_kind kind, gs_algo *out, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < COLL_NALGOS; i++)
    if (coll_algos[i].kind == kind && n < max) out[n++] = coll_algos[i].algo;
  return n;
}

/* in_mpi_block: the check's allgather and MPI's own collectives block
 * inside MPI, where comm_waitall cannot look for peers that left; the
 * watchdog looks instead (watchdog_leave_look). */
gs_status coll_execute(gs_comm *c, coll_args *a) {
  if (c->check) {
    atomic_store_explicit(&c->in_mpi_block, 1, memory_order_release);
    gs_status st = check_signature(c, a);
    atomic_store_explicit(&c->in_mpi_block, 0, memory_order_release);
    GS_CHECK(st);
  }
  const coll_algo_row *row = coll_algo_find(a->kind, a->algo);
  if (row == NULL)
    return gs_error(GS_ERR_INTERNAL, "%s: algorithm %s reached the progress "
                    "thread", coll_kind_name(a->kind), gs_algo_name(a->algo));
  int blocks = a->algo == GS_ALGO_MPI;
  if (blocks) atomic_store_explicit(&c->in_mpi_block, 1, memory_order_release);
  gs_status st = row->run(c, a);
  if (blocks) atomic_store_explicit(&c->in_mpi_block, 0, memory_order_release);
  return st;
}
