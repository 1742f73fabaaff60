/*
 * HiTopKComm (Shi et al., "Towards Scalable Distributed Training of Deep
 * Learning on Public Cloud Clusters", MLSys 2021): a sparse all-reduce for
 * ranks spread over nodes, where links inside a node are fast and links
 * between nodes slow.
 *
 *   1. node-local reduce-scatter of the dense tensor (shared memory, or the
 *      ring), read from the input where it is: local rank l holds the node's
 *      sum of shard l (split_blocks over the L local ranks) in the output;
 *   2. top-k of that shard, k_l = ceil(k * |shard l| / n), by the caller's
 *      selection function (gs_topk_f32 or another);
 *   3. sparse all-gather of those pairs between the ranks with local rank l
 *      on every node (the cross-node group): L such gathers run at once,
 *      each carrying 1/L of the pairs, and each node's link carries
 *      (N-1) k pairs instead of the (p-1) k of a flat all-gather;
 *   4. a node-local all-gather of those N k_l pairs of every shard (sparse:
 *      N k pairs in all, where the dense shards would be n elements), and a
 *      scatter-add of all of them, in the same order on every rank, into the
 *      zeroed output: the dense result, the same on every rank.
 *
 * A selection that fails on one rank (NaN input, say) must not leave the
 * others waiting: that rank still takes part in every exchange (with pairs
 * of value zero), and a last all-reduce of every rank's status makes every
 * rank fail, naming it, with its message (broadcast from it only then).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sparse_internal.h"

/* Pairs kept from a shard of `len` of the n elements: k scaled to the
 * shard, rounded up, at most the shard. */
static size_t shard_k(size_t k, size_t len, size_t n) {
  if (n == 0 || len == 0) return 0;
  double v = ceil((double)k * (double)len / (double)n);
  size_t ks = v >= (double)len ? len : (size_t)v;
  return ks;
}

/* Selects the shard's pairs; a failure is reported in *status (with its
 * message in *msg) while the pairs become harmless zeros. The shard is the
 * node's sum of elements [first, first + len) of the tensor, selected on
 * this rank, its owner: a NaN in it came from the input of some rank of the
 * node, at the same element. So a NaN is named by its index in the whole
 * tensor as the node's sum (until 2026-12-07 the message gave the
 * selection's own words: an index within the shard, as if in this rank's
 * input). */
static void select_shard(const sparse_args *s, const float *shard, size_t len,
                         size_t first, size_t ks, uint32_t *idx, float *val,
                         int rank, int node, gs_status *status, char *msg,
                         size_t msglen) {
  gs_status st = GS_OK;
  if (ks > 0) {
    gs_clear_error();
    st = s->select(shard, len, ks, s->method, idx);
    if (st != GS_OK) {
      size_t nan_at = len;
      for (size_t i = 0; i < len && nan_at == len; i++)
        if (isnan(shard[i])) nan_at = i;
      if (nan_at < len)
        snprintf(msg, msglen, "hitopk on rank %d: the sum over node %d of rank "
                 "%d's shard (elements %zu to %zu) holds NaN at element %zu of "
                 "the tensor (a NaN in the input of a rank of that node), and "
                 "the top-%zu selection (%s) failed", rank, node, rank, first,
                 first + len - 1, first + nan_at, ks, s->method);
      else
        snprintf(msg, msglen, "hitopk on rank %d: top-%zu selection (%s) of the "
                 "sum over node %d of its shard (elements %zu to %zu) failed: %s",
                 rank, ks, s->method, node, first, first + len - 1,
                 gs_last_error());
    } else {
      for (size_t i = 0; i < ks; i++) {
        if (idx[i] >= len) {
          st = GS_ERR_INVALID_ARG;
          snprintf(msg, msglen, "hitopk on rank %d: the selection (%s) "
                   "returned index %u at position %zu, outside the shard of "
                   "%zu elements", rank, s->method, idx[i], i, len);
          break;
        }
      }
    }
  }
  for (size_t i = 0; i < ks; i++) {
    if (st != GS_OK) {
      idx[i] = 0;
      val[i] = 0.0f;
    } else {
      val[i] = shard[idx[i]];
    }
  }
  *status = st;
}

static gs_status hitopk(gs_comm *c, const sparse_args *s, gs_status *sel_st,
                        char *msg, size_t msglen) {
  int L = c->local.size, lr = c->local.rank, N = c->cross.size;
  float *buf = s->recvbuf;
  size_t *off = gs_malloc(sizeof(size_t) * (3 * (size_t)L + (size_t)N));
  if (off == NULL) return GS_ERR_NOMEM;
  size_t *len = off + L, *lcounts = off + 2 * L, *counts = off + 3 * L;
  split_blocks(s->n, L, off, len);
  gs_status st = GS_OK;
  /* The input is read where it is: the reduce-scatter writes only this
   * rank's shard of the output, and a node of one rank selects from the
   * input itself (no copy of the whole tensor first). */
  const float *src = s->sendbuf != NULL ? s->sendbuf : buf;
  if (L > 1) st = local_run(c, src, buf, off, len, GS_F32, GS_SUM, 1, 0, 1);
  const float *shard = (L > 1 ? buf : src) + off[lr];
  size_t ks = shard_k(s->k, len[lr], s->n);
  /* Room for this rank's pairs, then for the N nodes' pairs of its shard. */
  uint32_t *idx = gs_malloc(((size_t)N * ks + 1) * sizeof(uint32_t));
  float *val = gs_malloc(((size_t)N * ks + 1) * sizeof(float));
  if (idx == NULL || val == NULL) st = GS_ERR_NOMEM;
  char *packed = NULL, *lpacked = NULL;
  size_t *boff = NULL, *lboff = NULL;
  if (st == GS_OK) {
    select_shard(s, shard, len[lr], off[lr], ks, idx, val, c->world.rank,
                 c->node, sel_st, msg, msglen);
    /* Every rank of the cross-node group has local rank lr, hence the same
     * shard and the same k. */
    for (int r = 0; r < N; r++) counts[r] = ks;
    st = sparse_gather(c, &c->cross, idx, val, sizeof(float), counts, &packed,
                       &boff);
  }
  if (st == GS_OK) {
    /* The shard's pairs of every node, in node order, with indices into the
     * whole tensor; each local rank's count follows from the split. */
    for (int r = 0; r < N; r++) {
      const char *blk = packed + boff[r];
      const uint32_t *bi = (const uint32_t *)blk;
      memcpy(val + (size_t)r * ks, blk + ks * sizeof(uint32_t), ks * sizeof(float));
      for (size_t j = 0; j < ks; j++)
        idx[(size_t)r * ks + j] = bi[j] + (uint32_t)off[lr];
    }
    for (int l = 0; l < L; l++) lcounts[l] = (size_t)N * shard_k(s->k, len[l], s->n);
    st = sparse_gather(c, &c->local, idx, val, sizeof(float), lcounts, &lpacked,
                       &lboff);
  }
  if (st == GS_OK) {
    /* Every rank adds the same pairs in the same order: the same result. */
    memset(buf, 0, s->n * sizeof(float));
    for (int l = 0; l < L; l++) {
      const char *blk = lpacked + lboff[l];
      sparse_scatter_add(buf, (const uint32_t *)blk,
                         blk + lcounts[l] * sizeof(uint32_t), lcounts[l], GS_F32);
    }
  }
  gs_free(packed);
  gs_free(boff);
  gs_free(lpacked);
  gs_free(lboff);
  gs_free(idx);
  gs_free(val);
  gs_free(off);
  return st;
}

gs_status sparse_run_hitopk(gs_comm *c, sparse_args *s) {
  GS_CHECK(sparse_agree(c, &c->world, "hitopk", s, 1, SIZE_MAX, NULL, NULL));
  gs_sparse_algo algo = s->algo;
  if (algo == GS_SPARSE_AUTO)
    algo = gs_comm_choose_sparse(c, GS_SPARSE_HITOPK, s->n, s->k, GS_F32, NULL,
                                 NULL);
  if (algo == GS_SPARSE_DENSE) {
    if (s->sendbuf != NULL && s->n > 0)
      memcpy(s->recvbuf, s->sendbuf, s->n * sizeof(float));
    return sparse_dense_allreduce(c, s->recvbuf, s->n, GS_F32);
  }
  gs_status sel = GS_OK;
  char msg[512] = "";
  GS_CHECK(hitopk(c, s, &sel, msg, sizeof msg));
  /* Every rank learns whether a selection failed anywhere. */
  int mine[2] = {sel != GS_OK ? (int)sel : 0, c->world.rank}, any[2];
  MPI_TRY(&c->world, MPI_Allreduce(mine, any, 1, MPI_2INT, MPI_MAXLOC,
                                   c->world.mpi));
  comm_progress(&c->world);
  if (any[0] == 0) return GS_OK;
  /* The failed rank's message, to every rank: the selection that failed was
   * of the node's sum of that rank's shard, so the element to look at is
   * there, not in the named rank's input (until 2026-12-07 the others said
   * only "failed on rank R"). */
  char why[sizeof msg];
  memcpy(why, msg, sizeof why);
  MPI_TRY(&c->world, MPI_Bcast(why, (int)sizeof why, MPI_CHAR, any[1],
                               c->world.mpi));
  comm_progress(&c->world);
  why[sizeof why - 1] = '\0';
  if (sel != GS_OK) return gs_error(sel, "%s", msg);
  return gs_error((gs_status)any[0], "hitopk on rank %d: the top-k selection "
                  "of rank %d's shard failed, so no rank's result is complete: "
                  "%s", c->world.rank, any[1], why);
}
