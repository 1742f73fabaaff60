/*
 * Internals of the sparse collectives (sparse_*.c): the arguments of a
 * queued sparse collective, the agreement every one of them starts with, and
 * the pieces the algorithms share. Only src/comm/sparse_*.c include this.
 */
#ifndef GS_SPARSE_INTERNAL_H
#define GS_SPARSE_INTERNAL_H

#include "comm_internal.h"

/* One sparse collective as issued (owned by its request). */
typedef struct sparse_args {
  gs_sparse_algo algo;      /* as requested; AUTO is resolved on the thread */
  const uint32_t *idx;      /* input pairs (not copied) */
  const void *val;
  size_t count, k, n;       /* k: fixed-k all-gather, gTop-k, HiTopKComm */
  gs_dtype dtype;
  int fixed;                /* all-gather with the same k on every rank */
  uint32_t *out_idx;        /* all-gathers, gTop-k */
  void *out_val;
  size_t capacity;          /* all-gatherv: pairs out_idx/out_val hold */
  size_t *counts;           /* all-gatherv: per-rank counts (caller's) */
  size_t *out_count;        /* gTop-k */
  uint8_t *kept;            /* gTop-k, may be NULL */
  void *dense;              /* sparse all-reduce */
  const float *sendbuf;     /* HiTopKComm: NULL when in place */
  float *recvbuf;
  gs_topk_fn select;
  char method[64];
  /* What the caller's thread found wrong with this rank's pairs, told to
   * every rank by the agreement: 0, SPARSE_BAD_INDEX, SPARSE_BAD_COUNT or
   * SPARSE_BAD_K. */
  int bad;
  size_t bad_pos;           /* the position of the bad index */
  uint64_t bad_value;       /* the bad index */
} sparse_args;

/* SPARSE_BAD_K: k above n (HiTopKComm), which until 2026-12-07 was told as
 * SPARSE_BAD_COUNT and read "gives k pairs, more than k". */
enum { SPARSE_BAD_INDEX = 1, SPARSE_BAD_COUNT = 2, SPARSE_BAD_K = 3 };

/* The agreement every sparse collective starts with: one all-gather of each
 * rank's n, k, count, capacity and validity over `g`. Fails on every rank
 * alike when n (or, where `same_k`, k) differs between ranks, when a rank's
 * pairs are invalid, or when the total exceeds a rank's capacity (capacity
 * SIZE_MAX: none). On success counts[r] (g->size entries, may be NULL) is
 * rank r's count and *total their sum. */
gs_status sparse_agree(gs_comm *c, const coll_group *g, const char *what,
                       const sparse_args *s, int same_k, size_t capacity,
                       size_t *counts, size_t *total);

/* All-gathers every rank's pairs (counts[r] on rank r) over g with the ring:
 * block r of the result, at byte offset boff[r] (g->size + 1 entries, the
 * last the total), is rank r's indices followed by its values of esize
 * bytes, padded to a multiple of 4 bytes. *packed is gs_malloc'ed (the caller frees it). */
gs_status sparse_gather(gs_comm *c, const coll_group *g, const uint32_t *idx,
                        const void *val, size_t esize, const size_t *counts,
                        char **packed, size_t **boff);

/* dense[idx[i]] += val[i] for i < count, values of dtype (f32, f16, bf16;
 * the half types are added in f32 and rounded back). */
void sparse_scatter_add(void *dense, const uint32_t *idx, const void *val,
                        size_t count, gs_dtype dtype);

/* All-reduces (sum) a dense buffer in place with the algorithm the cost
 * model picks for it, over the whole communicator. */
gs_status sparse_dense_allreduce(gs_comm *c, void *buf, size_t n,
                                 gs_dtype dtype);

/* The algorithms, on the progress thread. */
gs_status sparse_run_allgather(gs_comm *c, sparse_args *s);
gs_status sparse_run_allreduce(gs_comm *c, sparse_args *s);
gs_status sparse_run_gtopk(gs_comm *c, sparse_args *s);
gs_status sparse_run_hitopk(gs_comm *c, sparse_args *s);

/* gTop-k's merge step, exposed to the other sparse files: the union of two
 * index-sorted pair lists with values summed, keeping the k largest by
 * magnitude (ties: the smaller index), still sorted by index. out has room
 * for na + nb pairs; returns the number kept. keybuf: na + nb floats. */
size_t sparse_merge_topk(const uint32_t *ia, const float *va, size_t na,
                         const uint32_t *ib, const float *vb, size_t nb,
                         size_t k, uint32_t *io, float *vo, float *keybuf);

#endif /* GS_SPARSE_INTERNAL_H */
