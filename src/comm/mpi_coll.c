/*
 * Algorithm "mpi": MPI's own collectives, always available as the peer that
 * benchmarks compare against. f16 and bf16, which MPI lacks, travel as
 * 16-bit words with user-defined operators that call gradsync's kernels;
 * GS_AVG is MPI_SUM followed by the division.
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
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

/* u8 sums wrap, as gradsync's own algorithms' do: Open MPI 4.1's op/avx
 * component adds MPI_UINT8_T with saturation (255 + 2 = 255), so MPI's own
 * collective disagreed with every other algorithm (found on 2-5 ranks;
 * `--mca op ^avx` gave the wrapped sums). gradsync's kernel instead. */
HALF_OP_FN(u8_sum, GS_U8, GS_SUM)

static MPI_User_function *half_fns[3][GS_REDOP_COUNT] = {
    {f16_sum, f16_sum, f16_min, f16_max, f16_prod},
    {bf16_sum, bf16_sum, bf16_min, bf16_max, bf16_prod},
    {u8_sum, u8_sum, NULL, NULL, NULL},
};

/* Created on first use; MPI ops live until MPI_Finalize. The lock guards
 * the lazy creation: several communicators' progress threads may get here
 * at once. */
static pthread_mutex_t half_ops_mu = PTHREAD_MUTEX_INITIALIZER;
static MPI_Op half_ops[3][GS_REDOP_COUNT];
static int half_ops_ready[3][GS_REDOP_COUNT];

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
  int u8_sum = d == GS_U8 && (op == GS_SUM || op == GS_AVG);
  if (d == GS_F16 || d == GS_BF16 || u8_sum) {
    int h = u8_sum ? 2 : d == GS_BF16;
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

/* ---- Large messages -------------------------------------------------------
 * MPI counts are int, and some of Open MPI's paths compute byte counts in an
 * int as well, so every call below moves at most comm_mpi_max_bytes() (1
 * GiB): larger collectives become a sequence of calls on windows of the
 * data. The allgather and all-to-all windows are strided (a piece of every
 * rank's block), described by a datatype whose extent is the whole block;
 * reduce-scatter, whose MPI_Op needs plain elements, packs its windows into
 * scratch instead (at most comm_window_bytes() of it). */

/* Elements of type `esize` one call may move when it moves `parts` blocks. */
static size_t window_elems(size_t esize, int parts) {
  return GS_MAX((size_t)1, comm_mpi_max_bytes() / (esize * (size_t)parts));
}

/* `m` elements of `t` laid out every `stride_bytes`: one block window. */
static gs_status strided_type(const coll_group *g, MPI_Datatype t, size_t m,
                              size_t stride_bytes, MPI_Datatype *out) {
  MPI_Datatype block;
  MPI_TRY(g, MPI_Type_contiguous((int)m, t, &block));
  int rc = MPI_Type_create_resized(block, 0, (MPI_Aint)stride_bytes, out);
  MPI_Type_free(&block);
  if (rc != MPI_SUCCESS) return comm_mpi_error(g, "MPI_Type_create_resized", rc);
  rc = MPI_Type_commit(out);
  if (rc != MPI_SUCCESS) {
    MPI_Type_free(out);
    return comm_mpi_error(g, "MPI_Type_commit", rc);
  }
  return GS_OK;
}

gs_status mpi_allreduce(gs_comm *c, coll_args *a) {
  MPI_Datatype t = mpi_type(a->dtype);
  const coll_group *g = &c->world;
  MPI_Op op = MPI_OP_NULL;
  GS_CHECK(mpi_op(g, a->dtype, a->op, &op));
  size_t esize = gs_dtype_size(a->dtype), w = window_elems(esize, 1);
  for (size_t done = 0; done < a->count;) {
    size_t m = GS_MIN(a->count - done, w);
    const void *s = a->sendbuf ? (const char *)a->sendbuf + done * esize : MPI_IN_PLACE;
    MPI_TRY(g, MPI_Allreduce(s, (char *)a->recvbuf + done * esize, (int)m, t, op,
                             g->mpi));
    done += m;
  }
  if (a->op == GS_AVG) GS_CHECK(gs_scale_div(a->recvbuf, a->count, a->dtype, g->size));
  return GS_OK;
}

/* In place, the input is the whole recvbuf and the result lands at its
 * start; a window's result overwrites only block 0's part of that same
 * window, which is already packed. */
gs_status mpi_reduce_scatter(gs_comm *c, coll_args *a) {
  MPI_Datatype t = mpi_type(a->dtype);
  const coll_group *g = &c->world;
  int p = g->size;
  MPI_Op op = MPI_OP_NULL;
  GS_CHECK(mpi_op(g, a->dtype, a->op, &op));
  size_t esize = gs_dtype_size(a->dtype), w = window_elems(esize, p);
  const char *in = a->sendbuf ? a->sendbuf : a->recvbuf;
  char *out = a->recvbuf;
  if (a->count <= w) {
    MPI_TRY(g, MPI_Reduce_scatter_block(a->sendbuf ? a->sendbuf : MPI_IN_PLACE,
                                        out, (int)a->count, t, op, g->mpi));
  } else {
    /* The packed windows are bounded by the scratch window. */
    w = GS_MAX((size_t)1, comm_window_bytes() / (esize * (size_t)p));
    void *area;
    GS_CHECK(comm_scratch(c, &c->work, &c->work_bytes, (size_t)p * w * esize, &area));
    char *pack = area;
    for (size_t done = 0; done < a->count;) {
      size_t m = GS_MIN(a->count - done, w);
      for (int i = 0; i < p; i++)
        memcpy(pack + (size_t)i * m * esize, in + ((size_t)i * a->count + done) * esize,
               m * esize);
      MPI_TRY(g, MPI_Reduce_scatter_block(MPI_IN_PLACE, pack, (int)m, t, op, g->mpi));
      memcpy(out + done * esize, pack, m * esize);
      done += m;
    }
  }
  if (a->op == GS_AVG) GS_CHECK(gs_scale_div(a->recvbuf, a->count, a->dtype, p));
  return GS_OK;
}

gs_status mpi_allgather(gs_comm *c, coll_args *a) {
  MPI_Datatype t = mpi_type(a->dtype);
  const coll_group *g = &c->world;
  int p = g->size;
  size_t esize = gs_dtype_size(a->dtype), w = window_elems(esize, p);
  if (a->count <= w) {
    MPI_TRY(g, MPI_Allgather(a->sendbuf ? a->sendbuf : MPI_IN_PLACE, (int)a->count,
                             t, a->recvbuf, (int)a->count, t, g->mpi));
    return GS_OK;
  }
  for (size_t done = 0; done < a->count;) {
    size_t m = GS_MIN(a->count - done, w);
    MPI_Datatype rt;
    GS_CHECK(strided_type(g, t, m, a->count * esize, &rt));
    const void *s = a->sendbuf ? (const char *)a->sendbuf + done * esize : MPI_IN_PLACE;
    int rc = MPI_Allgather(s, (int)m, t, (char *)a->recvbuf + done * esize, 1, rt,
                           g->mpi);
    MPI_Type_free(&rt);
    if (rc != MPI_SUCCESS) return comm_mpi_error(g, "MPI_Allgather", rc);
    done += m;
  }
  return GS_OK;
}

gs_status mpi_alltoall(gs_comm *c, coll_args *a) {
  MPI_Datatype t = mpi_type(a->dtype);
  const coll_group *g = &c->world;
  int p = g->size;
  size_t esize = gs_dtype_size(a->dtype), w = window_elems(esize, p);
  if (a->count <= w) {
    MPI_TRY(g, MPI_Alltoall(a->sendbuf, (int)a->count, t, a->recvbuf, (int)a->count,
                            t, g->mpi));
    return GS_OK;
  }
  for (size_t done = 0; done < a->count;) {
    size_t m = GS_MIN(a->count - done, w);
    MPI_Datatype bt;
    GS_CHECK(strided_type(g, t, m, a->count * esize, &bt));
    int rc = MPI_Alltoall((const char *)a->sendbuf + done * esize, 1, bt,
                          (char *)a->recvbuf + done * esize, 1, bt, g->mpi);
    MPI_Type_free(&bt);
    if (rc != MPI_SUCCESS) return comm_mpi_error(g, "MPI_Alltoall", rc);
    done += m;
  }
  return GS_OK;
}

gs_status mpi_bcast(gs_comm *c, coll_args *a) {
  MPI_Datatype t = mpi_type(a->dtype);
  const coll_group *g = &c->world;
  size_t esize = gs_dtype_size(a->dtype), w = window_elems(esize, 1);
  for (size_t done = 0; done < a->count;) {
    size_t m = GS_MIN(a->count - done, w);
    MPI_TRY(g, MPI_Bcast((char *)a->recvbuf + done * esize, (int)m, t, a->root,
                         g->mpi));
    done += m;
  }
  return GS_OK;
}

/* Whether a v-variant's table fits one MPI call: every count and
 * displacement an int, and all the blocks together at most INT_MAX bytes
 * (comm_mpi_v_max_bytes()). */
static int v_fits(const coll_group *g, const size_t *counts, const size_t *displs,
                  size_t esize) {
  size_t total = 0;
  for (int i = 0; i < g->size; i++) {
    if (counts[i] > INT_MAX || displs[i] > INT_MAX) return 0;
    total += counts[i] * esize;
  }
  return total <= comm_mpi_v_max_bytes();
}

/* The v-variants cannot be cut into windows without knowing every rank's
 * table, so a table beyond MPI's int counts (or beyond the bytes of one
 * call) runs on gradsync's own algorithm instead, said once per process.
 * Displacements (and alltoallv's counts) differ between ranks, so the ranks
 * agree on the choice with one small allreduce of their verdicts. */
static void log_fallback(const coll_group *g, const char *what, const char *algo) {
  static atomic_int said;
  if (atomic_exchange(&said, 1)) return;
  fprintf(stderr, "gradsync: rank %d: %s: counts beyond MPI's int (or over %zu "
          "bytes): running gradsync's %s algorithm instead of MPI's\n", g->rank, what,
          comm_mpi_v_max_bytes(), algo);
}

gs_status mpi_allgatherv(gs_comm *c, coll_args *a) {
  MPI_Datatype t = mpi_type(a->dtype);
  const coll_group *g = &c->world;
  int p = g->size, r = g->rank;
  size_t esize = gs_dtype_size(a->dtype);
  int fits = v_fits(g, a->counts, a->displs, esize);
  MPI_TRY(g, MPI_Allreduce(MPI_IN_PLACE, &fits, 1, MPI_INT, MPI_MIN, g->mpi));
  if (!fits) {
    log_fallback(g, "allgatherv", "ring");
    if (a->sendbuf != NULL && a->counts[r] > 0)
      memcpy((char *)a->recvbuf + a->displs[r] * esize, a->sendbuf,
             a->counts[r] * esize);
    return ring_run(c, g, a->recvbuf, a->displs, a->counts, a->dtype, GS_SUM, 0, 1, 1);
  }
  int *tab = gs_malloc(sizeof(int) * 2 * (size_t)p);
  if (tab == NULL) return GS_ERR_NOMEM;
  for (int i = 0; i < p; i++) {
    tab[i] = (int)a->counts[i];
    tab[p + i] = (int)a->displs[i];
  }
  int rc = MPI_Allgatherv(a->sendbuf ? a->sendbuf : MPI_IN_PLACE, (int)a->count, t,
                          a->recvbuf, tab, tab + p, t, g->mpi);
  gs_free(tab);
  if (rc != MPI_SUCCESS) return comm_mpi_error(g, "MPI_Allgatherv", rc);
  return GS_OK;
}

gs_status mpi_alltoallv(gs_comm *c, coll_args *a) {
  MPI_Datatype t = mpi_type(a->dtype);
  const coll_group *g = &c->world;
  int p = g->size;
  size_t esize = gs_dtype_size(a->dtype);
  int fits = v_fits(g, a->counts, a->displs, esize) &&
             v_fits(g, a->rcounts, a->rdispls, esize);
  MPI_TRY(g, MPI_Allreduce(MPI_IN_PLACE, &fits, 1, MPI_INT, MPI_MIN, g->mpi));
  if (!fits) {
    log_fallback(g, "alltoallv", "pairwise");
    return alltoallv_pairwise(c, g, a->sendbuf, a->counts, a->displs, a->recvbuf,
                              a->rcounts, a->rdispls, esize);
  }
  int *tab = gs_malloc(sizeof(int) * 4 * (size_t)p);
  if (tab == NULL) return GS_ERR_NOMEM;
  for (int i = 0; i < p; i++) {
    tab[i] = (int)a->counts[i];
    tab[p + i] = (int)a->displs[i];
    tab[2 * p + i] = (int)a->rcounts[i];
    tab[3 * p + i] = (int)a->rdispls[i];
  }
  int rc = MPI_Alltoallv(a->sendbuf, tab, tab + p, t, a->recvbuf, tab + 2 * p,
                         tab + 3 * p, t, g->mpi);
  gs_free(tab);
  if (rc != MPI_SUCCESS) return comm_mpi_error(g, "MPI_Alltoallv", rc);
  return GS_OK;
}

gs_status mpi_barrier(gs_comm *c, coll_args *a) {
  (void)a;
  MPI_TRY(&c->world, MPI_Barrier(c->world.mpi));
  return GS_OK;
}
