/*
 * Algorithm "mpi": MPI's own collectives, always available as the peer that
 * benchmarks compare against. f16 and bf16, which MPI lacks, travel as
 * 16-bit words with user-defined operators that call gradsync's kernels;
 * GS_AVG is MPI_SUM followed by the division.
 */
#include <limits.h>
#include <string.h>

#include "comm_internal.h"

#define HALF_OP_FN(name, DT, OP)                                          \
  static void name(void *in, void *inout, int *len, MPI_Datatype *dt) {   \
    (void)dt;                                                             \
    gs_reduce_local(inout, in, (size_t)*len, DT, OP);                     \
  }
HALF_OP_FN(f16_sum, GS_F16, GS_SUM)
HALF_OP_FN(f16_min, GS_F16, GS_MIN)
HALF_OP_FN(f16_max, GS_F16, GS_MAX)
HALF_OP_FN(f16_prod, GS_F16, GS_PROD)
HALF_OP_FN(bf16_sum, GS_BF16, GS_SUM)
HALF_OP_FN(bf16_min, GS_BF16, GS_MIN)
HALF_OP_FN(bf16_max, GS_BF16, GS_MAX)
HALF_OP_FN(bf16_prod, GS_BF16, GS_PROD)

static MPI_User_function *half_fns[2][GS_REDOP_COUNT] = {
    {f16_sum, f16_sum, f16_min, f16_max, f16_prod},
    {bf16_sum, bf16_sum, bf16_min, bf16_max, bf16_prod},
};

/* Created on first use; MPI ops live until MPI_Finalize. The lock guards
 * the lazy creation: several communicators' progress threads may get here
 * at once. */
static pthread_mutex_t half_ops_mu = PTHREAD_MUTEX_INITIALIZER;
static MPI_Op half_ops[2][GS_REDOP_COUNT];
static int half_ops_ready[2][GS_REDOP_COUNT];

static MPI_Datatype mpi_type(gs_dtype d) {
  switch (d) {
    case GS_F32: return MPI_FLOAT;
    case GS_F64: return MPI_DOUBLE;
    case GS_F16:
    case GS_BF16: return MPI_UINT16_T;
    case GS_I32: return MPI_INT32_T;
    case GS_I64: return MPI_INT64_T;
    case GS_U8: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
  }
}

static gs_status mpi_op(const coll_group *g, gs_dtype d, gs_redop op,
                        MPI_Op *out) {
  if (d == GS_F16 || d == GS_BF16) {
    int h = d == GS_BF16;
    int rc = MPI_SUCCESS;
    pthread_mutex_lock(&half_ops_mu);
    if (!half_ops_ready[h][op]) {
      rc = MPI_Op_create(half_fns[h][op], 1, &half_ops[h][op]);
      half_ops_ready[h][op] = rc == MPI_SUCCESS;
    }
    *out = half_ops[h][op];
    pthread_mutex_unlock(&half_ops_mu);
    if (rc != MPI_SUCCESS) return comm_mpi_error(g, "MPI_Op_create", rc);
    return GS_OK;
  }
  static const MPI_Op ops[GS_REDOP_COUNT] = {MPI_SUM, MPI_SUM, MPI_MIN, MPI_MAX,
                                             MPI_PROD};
  *out = ops[op];
  return GS_OK;
}

static gs_status to_int(const coll_group *g, const char *what, size_t v,
                        int *out) {
  if (v > INT_MAX)
    return gs_error(GS_ERR_UNSUPPORTED, "%s on rank %d: algorithm mpi takes int "
                    "counts; %zu is too large (use a gradsync algorithm)",
                    what, g->rank, v);
  *out = (int)v;
  return GS_OK;
}

static gs_status int_table(const coll_group *g, const char *what,
                           const size_t *src, int *dst) {
  for (int i = 0; i < g->size; i++) GS_CHECK(to_int(g, what, src[i], &dst[i]));
  return GS_OK;
}

gs_status coll_mpi(gs_comm *c, coll_args *a) {
  const coll_group *g = &c->world;
  MPI_Datatype t = mpi_type(a->dtype);
  const char *what = coll_kind_name(a->kind);
  const void *sbuf = a->sendbuf ? a->sendbuf : MPI_IN_PLACE;
  int n = 0, p = g->size;
  switch (a->kind) {
    case COLL_ALLREDUCE: {
      MPI_Op op = MPI_OP_NULL;
      GS_CHECK(mpi_op(g, a->dtype, a->op, &op));
      size_t esize = gs_dtype_size(a->dtype);
      /* Counts above INT_MAX go in int-sized pieces. */
      for (size_t done = 0; done < a->count || done == 0;) {
        int m = (int)GS_MIN(a->count - done, (size_t)INT_MAX);
        const void *s = a->sendbuf ? (const char *)a->sendbuf + done * esize
                                   : MPI_IN_PLACE;
        MPI_TRY(g, MPI_Allreduce(s, (char *)a->recvbuf + done * esize, m, t, op,
                                 g->mpi));
        done += (size_t)m;
        if (m == 0) break;
      }
      if (a->op == GS_AVG) GS_CHECK(gs_scale_div(a->recvbuf, a->count, a->dtype, p));
      return GS_OK;
    }
    case COLL_REDUCE_SCATTER: {
      MPI_Op op = MPI_OP_NULL;
      GS_CHECK(mpi_op(g, a->dtype, a->op, &op));
      GS_CHECK(to_int(g, what, a->count * (size_t)p, &n));
      n = (int)a->count;
      MPI_TRY(g, MPI_Reduce_scatter_block(sbuf, a->recvbuf, n, t, op, g->mpi));
      if (a->op == GS_AVG) GS_CHECK(gs_scale_div(a->recvbuf, a->count, a->dtype, p));
      return GS_OK;
    }
    case COLL_ALLGATHER:
      GS_CHECK(to_int(g, what, a->count * (size_t)p, &n));
      n = (int)a->count;
      MPI_TRY(g, MPI_Allgather(sbuf, n, t, a->recvbuf, n, t, g->mpi));
      return GS_OK;
    case COLL_BCAST:
      GS_CHECK(to_int(g, what, a->count, &n));
      MPI_TRY(g, MPI_Bcast(a->recvbuf, n, t, a->root, g->mpi));
      return GS_OK;
    case COLL_ALLTOALL:
      GS_CHECK(to_int(g, what, a->count * (size_t)p, &n));
      n = (int)a->count;
      MPI_TRY(g, MPI_Alltoall(a->sendbuf, n, t, a->recvbuf, n, t, g->mpi));
      return GS_OK;
    case COLL_BARRIER:
      MPI_TRY(g, MPI_Barrier(g->mpi));
      return GS_OK;
    case COLL_ALLGATHERV:
    case COLL_ALLTOALLV: {
      int *tab = gs_malloc(sizeof(int) * 4 * (size_t)p);
      if (tab == NULL) return GS_ERR_NOMEM;
      gs_status st = int_table(g, what, a->counts, tab);
      if (st == GS_OK) st = int_table(g, what, a->displs, tab + p);
      if (st == GS_OK && a->kind == COLL_ALLGATHERV) {
        st = to_int(g, what, a->count, &n);
        int rc = st == GS_OK ? MPI_Allgatherv(sbuf, n, t, a->recvbuf, tab,
                                              tab + p, t, g->mpi)
                             : MPI_SUCCESS;
        if (rc != MPI_SUCCESS) st = comm_mpi_error(g, "MPI_Allgatherv", rc);
      } else if (st == GS_OK) {
        st = int_table(g, what, a->rcounts, tab + 2 * p);
        if (st == GS_OK) st = int_table(g, what, a->rdispls, tab + 3 * p);
        int rc = st == GS_OK ? MPI_Alltoallv(a->sendbuf, tab, tab + p, t,
                                             a->recvbuf, tab + 2 * p,
                                             tab + 3 * p, t, g->mpi)
                             : MPI_SUCCESS;
        if (rc != MPI_SUCCESS) st = comm_mpi_error(g, "MPI_Alltoallv", rc);
      }
      gs_free(tab);
      return st;
    }
  }
  return gs_error(GS_ERR_INTERNAL, "mpi: unknown collective %d", (int)a->kind);
}
