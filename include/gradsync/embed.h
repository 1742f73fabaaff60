/*
 * Embedding bags: the sparse half of a recommendation model (DLRM).
 *
 * A table is `rows` x `dim` fp32 weights, row-major. A batch of bags is CSR
 * input: bag b (one sample's lookups into this table) holds the ids
 * ids[offsets[b] .. offsets[b+1]), int32 or int64. The forward pools each
 * bag's rows (sum, or mean: the sum over the bag's length; an empty bag is
 * zeros) straight into the batch's output at the table's column offset, so
 * that every table of a model writes its own columns of one [batch x width]
 * matrix without a copy.
 *
 * The backward never forms a dense gradient of the table. It groups the
 * lookups by row (a stable radix sort of (row, lookup) pairs: within a row
 * the lookups stay in input order), sums each touched row's gradient once
 * in that order, and applies the optimizer to that row in place:
 *   SGD:               w_r -= lr * g_r
 *   row-wise Adagrad:  G_r += mean_d(g_r[d]^2);  w_r -= lr * g_r / (sqrt(G_r) + eps)
 * (the DLRM reference's `rwsadagrad`, facebookresearch/dlrm optim/rwsadagrad.py:
 * one accumulator per row, 1/dim of Adagrad's state, the duplicates of a row
 * coalesced before the update because it is not linear in g). The order of
 * every sum is fixed by the input, so repeated runs give bitwise-identical
 * tables whatever the machine's thread count.
 *
 * Ownership: the caller owns every buffer; a gs_embed_work holds only
 * scratch, reused across calls and freed by gs_embed_work_free.
 */
#ifndef GRADSYNC_EMBED_H
#define GRADSYNC_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { GS_EMBED_SUM = 0, GS_EMBED_MEAN } gs_embed_pool;

/* A table and, for row-wise Adagrad, its accumulator (one float per row,
 * starting at 0; NULL for SGD). name is for messages only. */
typedef struct gs_embed_table {
  const char *name;
  float *weights; /* rows x dim */
  float *state;   /* rows, or NULL */
  size_t rows, dim;
} gs_embed_table;

/* One batch of bags for one table. first_sample is the global index of bag
 * 0, for messages (a rank may hold a slice of the batch). */
typedef struct gs_embed_bags {
  size_t nbags;
  const int64_t *offsets; /* nbags + 1, offsets[0] = 0, nondecreasing */
  const void *ids;        /* offsets[nbags] ids */
  int ids64;              /* 1: int64_t ids; 0: int32_t */
  size_t first_sample;
} gs_embed_bags;

typedef enum { GS_EMBED_SGD = 0, GS_EMBED_ROWWISE_ADAGRAD } gs_embed_optim_kind;

typedef struct gs_embed_optim {
  gs_embed_optim_kind kind;
  float lr;
  float eps; /* row-wise Adagrad's; the reference's default 1e-10 */
} gs_embed_optim;

/* Scratch of the backward (the sorted pairs, the row's gradient). */
typedef struct gs_embed_work gs_embed_work;
void gs_embed_work_free(gs_embed_work *w);

/* Checks a batch against a table: offsets well formed and every id in
 * [0, rows). GS_ERR_INVALID_ARG naming the table, the id, the sample and
 * the lookup otherwise. The forward and backward check first and change
 * nothing on an error. */
gs_status gs_embed_check(const gs_embed_table *t, const gs_embed_bags *bags);

/* out[b * out_stride + out_col + d] = pool(bag b)[d] for d < dim. */
gs_status gs_embed_forward(const gs_embed_table *t, const gs_embed_bags *bags,
                           gs_embed_pool pool, float *out, size_t out_stride,
                           size_t out_col);

/* The backward fused with the update: dout is the gradient of the pooled
 * output, laid out as the forward's out. *work may be NULL (allocated on
 * first use). Row-wise Adagrad needs t->state. */
gs_status gs_embed_backward_update(gs_embed_table *t, const gs_embed_bags *bags,
                                   gs_embed_pool pool, const float *dout,
                                   size_t dout_stride, size_t dout_col,
                                   const gs_embed_optim *opt, gs_embed_work **work);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_EMBED_H */
