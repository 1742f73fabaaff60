/*
 * Sparse all-gather of (index, value) pairs, fixed k and varying counts, and
 * the sparse all-reduce built on it: the pairs of every rank gathered and
 * scatter-added into a dense result, or, where the cost model predicts the
 * dense all-reduce faster (density x ranks past the break-even point), the
 * pairs scattered into the dense buffer and all-reduced.
 *
 * The counts come from the agreement every sparse collective starts with,
 * so the varying-count gather needs no exchange of its own; the pairs then
 * travel in one pipelined ring all-gatherv of bytes, each rank's block its
 * indices followed by its values (padded to 4 bytes). Empty blocks (a rank that selected
 * nothing) send no message, and all-empty gathers none at all.
 */
#include <string.h>

#include "sparse_internal.h"

gs_status sparse_gather(gs_comm *c, const coll_group *g, const uint32_t *idx,
                        const void *val, size_t esize, const size_t *counts,
                        char **packed, size_t **boff_out) {
  int p = g->size, me = g->rank;
  size_t pair = sizeof(uint32_t) + esize;
  size_t *boff = gs_malloc(sizeof(size_t) * (2 * (size_t)p + 1));
  if (boff == NULL) return GS_ERR_NOMEM;
  size_t *blen = boff + p + 1;
  size_t total = 0;
  for (int r = 0; r < p; r++) {
    boff[r] = total;
    /* Padded to 4 bytes, so that every block's indices stay aligned. */
    blen[r] = (counts[r] * pair + 3) & ~(size_t)3;
    total += blen[r];
  }
  boff[p] = total;
  char *buf = gs_malloc(total);
  if (buf == NULL) {
    gs_free(boff);
    return GS_ERR_NOMEM;
  }
  size_t mine = counts[me];
  memcpy(buf + boff[me], idx, mine * sizeof(uint32_t));
  memcpy(buf + boff[me] + mine * sizeof(uint32_t), val, mine * esize);
  gs_status st = GS_OK;
  if (p > 1 && total > 0)
    st = ring_run(c, g, buf, boff, blen, GS_U8, GS_SUM, 0, 1, 1);
  if (st != GS_OK) {
    gs_free(buf);
    gs_free(boff);
    return st;
  }
  *packed = buf;
  *boff_out = boff;
  return GS_OK;
}

void sparse_scatter_add(void *dense, const uint32_t *idx, const void *val,
                        size_t count, gs_dtype dtype) {
  if (dtype == GS_F32) {
    float *d = dense;
    const float *v = val;
    for (size_t i = 0; i < count; i++) d[idx[i]] += v[i];
    return;
  }
  uint16_t *d = dense;
  const uint16_t *v = val;
  if (dtype == GS_F16) {
    for (size_t i = 0; i < count; i++)
      d[idx[i]] = gs_f32_to_f16(gs_f16_to_f32(d[idx[i]]) + gs_f16_to_f32(v[i]));
  } else {
    for (size_t i = 0; i < count; i++)
      d[idx[i]] = gs_f32_to_bf16(gs_bf16_to_f32(d[idx[i]]) + gs_bf16_to_f32(v[i]));
  }
}

gs_status sparse_dense_allreduce(gs_comm *c, void *buf, size_t n, gs_dtype dtype) {
  if (c->world.size <= 1 || n == 0) return GS_OK;
  switch (gs_comm_choose_allreduce(c, n * gs_dtype_size(dtype))) {
    case GS_ALGO_RD:
      return allreduce_rd(c, &c->world, buf, n, dtype, GS_SUM, 1);
    case GS_ALGO_RABENSEIFNER:
      return allreduce_rabenseifner(c, &c->world, buf, n, dtype, GS_SUM, 1);
    case GS_ALGO_HIER:
      return allreduce_hier(c, buf, n, dtype, GS_SUM);
    default:
      return allreduce_ring(c, &c->world, buf, n, dtype, GS_SUM, 1);
  }
}

gs_status sparse_run_allgather(gs_comm *c, sparse_args *s) {
  int p = c->world.size;
  const char *what = s->fixed ? "sparse_allgather" : "sparse_allgatherv";
  size_t *counts = gs_malloc(sizeof(size_t) * (size_t)p);
  if (counts == NULL) return GS_ERR_NOMEM;
  size_t total = 0;
  gs_status st = sparse_agree(c, &c->world, what, s, s->fixed, s->capacity,
                              counts, &total);
  char *packed = NULL;
  size_t *boff = NULL, esize = gs_dtype_size(s->dtype);
  if (st == GS_OK)
    st = sparse_gather(c, &c->world, s->idx, s->val, esize, counts, &packed, &boff);
  if (st == GS_OK) {
    size_t at = 0;
    for (int r = 0; r < p; r++) {
      const char *blk = packed + boff[r];
      memcpy(s->out_idx + at, blk, counts[r] * sizeof(uint32_t));
      memcpy((char *)s->out_val + at * esize, blk + counts[r] * sizeof(uint32_t),
             counts[r] * esize);
      at += counts[r];
    }
    if (s->counts) memcpy(s->counts, counts, sizeof(size_t) * (size_t)p);
  }
  gs_free(packed);
  gs_free(boff);
  gs_free(counts);
  return st;
}

gs_status sparse_run_allreduce(gs_comm *c, sparse_args *s) {
  int p = c->world.size;
  size_t *counts = gs_malloc(sizeof(size_t) * (size_t)p);
  if (counts == NULL) return GS_ERR_NOMEM;
  size_t total = 0, esize = gs_dtype_size(s->dtype);
  gs_status st = sparse_agree(c, &c->world, "sparse_allreduce", s, 0, SIZE_MAX,
                              counts, &total);
  gs_sparse_algo algo = s->algo;
  /* Every rank knows the total now, and the cost model is rank 0's: the
   * choice is the same everywhere. */
  if (algo == GS_SPARSE_AUTO)
    algo = gs_comm_choose_sparse(c, GS_SPARSE_ALLGATHER, s->n, total, s->dtype,
                                 NULL, NULL);
  if (st == GS_OK) memset(s->dense, 0, s->n * esize);
  if (st == GS_OK && algo == GS_SPARSE_DENSE) {
    sparse_scatter_add(s->dense, s->idx, s->val, s->count, s->dtype);
    st = sparse_dense_allreduce(c, s->dense, s->n, s->dtype);
  } else if (st == GS_OK) {
    char *packed = NULL;
    size_t *boff = NULL;
    st = sparse_gather(c, &c->world, s->idx, s->val, esize, counts, &packed, &boff);
    /* Added in rank order, so every rank computes the same sums. */
    for (int r = 0; r < p && st == GS_OK; r++) {
      const char *blk = packed + boff[r];
      sparse_scatter_add(s->dense, (const uint32_t *)blk,
                         blk + counts[r] * sizeof(uint32_t), counts[r], s->dtype);
    }
    gs_free(packed);
    gs_free(boff);
  }
  gs_free(counts);
  return st;
}
