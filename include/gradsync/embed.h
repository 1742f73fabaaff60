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
#include "gradsync/cost.h"

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

/* The fused backward in two halves, for a column block of a table trained
 * with row-wise Adagrad: the accumulator is the mean of g^2 over the whole
 * row, so the owners of a row's column blocks add their sums of squares
 * (gs_dlrm_dist) between the halves. gs_embed_backward_rows groups the
 * lookups as the fused backward does and writes each touched row (ascending),
 * its summed gradient and its sum of squares over the block's columns into
 * *out (caller-owned, reused across calls; zero-initialise it, free it with
 * gs_embed_rows_free). gs_embed_rows_update then updates each row with
 * sq[i] / sq_dim as its accumulator's increment (sq NULL: out's own sums,
 * sq_dim the table's width: exactly gs_embed_backward_update). */
typedef struct gs_embed_rows {
  size_t n, cap, dim;
  uint32_t *row; /* the touched rows, ascending */
  float *grad;   /* n x dim: each row's gradient */
  float *sq;     /* n: the sum of squares of each row's gradient */
} gs_embed_rows;
gs_status gs_embed_backward_rows(const gs_embed_table *t, const gs_embed_bags *bags,
                                 gs_embed_pool pool, const float *dout, size_t dout_stride,
                                 size_t dout_col, gs_embed_rows *out, gs_embed_work **work);
gs_status gs_embed_rows_update(gs_embed_table *t, const gs_embed_rows *r, const float *sq,
                               size_t sq_dim, const gs_embed_optim *opt);
void gs_embed_rows_free(gs_embed_rows *r);

/* The backward alone, for a replicated table whose gradient is summed
 * across ranks before the update (dp): grad (rows x dim, row-major) +=
 * every lookup's share of dout, in input order. */
gs_status gs_embed_backward_dense(const gs_embed_table *t, const gs_embed_bags *bags,
                                  gs_embed_pool pool, const float *dout, size_t dout_stride,
                                  size_t dout_col, float *grad);

/* The update of gs_embed_backward_update from a summed dense gradient:
 * every row whose gradient is not all zero (the rows the batch touched)
 * takes the same step it would from the fused backward. */
gs_status gs_embed_update_dense(gs_embed_table *t, const float *grad,
                                const gs_embed_optim *opt);

/* ---- Sharding plans ------------------------------------------------------
 * Where each table's rows and columns live (docs/DLRM.md). The planner
 * prices every candidate sharding of a table with gs_cost_shard (the cost
 * module's one formula), picks one per table (or the one forced), places
 * the shards longest-first on the rank with the least estimated time whose
 * memory cap they fit, then moves or swaps shards off the busiest rank while
 * that lowers the maximum, splitting its largest whole table into column
 * blocks while it is over 1.10x the mean. */

/* A table as the planner sees it. name is borrowed. */
typedef struct gs_embed_spec {
  const char *name;
  size_t rows, dim;
  double pooling; /* mean ids per sample */
} gs_embed_spec;

typedef struct gs_shard_config {
  int ranks, ranks_per_node;
  double batch;           /* global batch */
  double mem_cap;         /* bytes per rank for tables and state; 0: none */
  double wire_elem_bytes; /* 4: fp32 all-to-all; 2: fp16/bf16 */
  gs_cost_params net;     /* the network (gs_cost_preset, a cost file) */
  gs_cost_lookup lookup;  /* this machine's lookup cost (gs_embed_calibrate) */
  int force;              /* -1: choose per table; else a gs_shard_kind for all */
  /* 1: never split a table's columns (no cw unless forced, no balancing
   * split). */
  int whole_rows;
  /* 1: the tables train with row-wise Adagrad, whose accumulator is the
   * mean of g^2 over a whole row: a column block's owner exchanges its
   * touched rows' sums of squares with the row's other blocks every step
   * (gs_dlrm_dist), priced by gs_cost_shard. */
  int row_sums;
  /* The ids' Zipf exponent over each table's rows (0: uniform), and the
   * bytes the rest of a training step touches on a rank (the MLPs'
   * weights, activations and gradients, the exchange's buffers), for the
   * cache model of gs_cost_lookup. */
  double zipf, step_bytes;
  /* Che's characteristic time (steps) the planner prices shards at before
   * they have a rank: 0 computes the mean rank's (every table whole over
   * ranks x lookup.cache_bytes). The plan's final estimates are each rank's
   * own (gs_shard_plan_price). */
  double cache_t;
} gs_shard_config;

/* One placed piece of a table: rows [row_lo, row_hi) and columns
 * [col_lo, col_hi) on `rank` (dp: a replica on every rank, one entry each). */
typedef struct gs_shard {
  int table, rank;
  gs_shard_kind kind;
  size_t row_lo, row_hi, col_lo, col_hi;
  double est_s, mem_bytes, wire_bytes; /* per step; bytes of weights + state */
} gs_shard;

typedef struct gs_shard_plan {
  int ranks, ntables;
  size_t nshards;
  gs_shard *shards;
  gs_shard_kind *kind;  /* per table */
  char (*why)[200];     /* per table: why it got its sharding */
  double *rank_s, *rank_mem, *rank_wire; /* per rank estimates */
  int torchrec;         /* 1: TorchRec's greedy proposal was better than the
                         * planner's own, and is this plan */
  int row_state;        /* 1: its memory counts row-wise Adagrad's float a
                         * row (the config's row_sums; 0: SGD, none) */
} gs_shard_plan;

/* Measures this machine's lookup cost (forward + fused backward with
 * row-wise Adagrad, one thread, uniform ids; four widths fitted by least
 * squares, over a table beyond the caches, one inside them and one of a few
 * rows, which parts the lookups' price from the rows' updates; a bag's own
 * cost from `bags` empty bags pooled into rows of `width` floats, the shape
 * of the rank's pooled matrix that a step's bags write) and reads its
 * caches' sizes (a core's own and its share of the shared one): about
 * 0.3 s. */
gs_status gs_embed_calibrate_shape(size_t bags, size_t width, gs_cost_lookup *out);
/* gs_embed_calibrate_shape for 8192 bags of 512 floats. */
gs_status gs_embed_calibrate(gs_cost_lookup *out);
/* gs_embed_calibrate_shape for a job's pooled matrix: `batch` bags (the
 * global batch, which a shard serves) by a rank's share of the tables'
 * columns over `ranks`. */
gs_status gs_embed_calibrate_job(const gs_embed_spec *tables, int ntables, size_t batch,
                                 int ranks, gs_cost_lookup *out);

const char *gs_shard_kind_name(gs_shard_kind k);
/* "tw", "rw", "cw", "twrw", "dp", or "auto" (-1). */
gs_status gs_shard_kind_parse(const char *s, int *out);

/* Presets of the Criteo data sets' tables: "kaggle" (26 tables, dim 16),
 * "terabyte" (26, dim 64, ids capped at 10 M as the DLRM reference's
 * --max-ind-range), "mlperf" (26, dim 128, capped at 40 M); rows scaled by
 * `scale` (at least 1 row). Writes up to `cap` specs with names "C1".. into
 * out (names are static). *n receives the count. */
gs_status gs_embed_preset(const char *name, double scale, gs_embed_spec *out, int cap,
                          int *n);

/* A table set from a JSON file {"tables": [{"name", "rows" (1 to 1e12),
 * "dim" (1 to 65536), "pooling" (optional, ids per sample, default 1)}]},
 * at most GS_EMBED_MAX_TABLES tables; *out (names included) is freed by
 * gs_embed_specs_free. GS_ERR_PARSE naming the file and the table. */
#define GS_EMBED_MAX_TABLES 100000
gs_status gs_embed_specs_load(const char *path, gs_embed_spec **out, int *n);
/* gs_embed_specs_load with every table's rows times `scale` (0 < scale <= 1;
 * rounded up, at least 1 row, as gs_embed_preset scales) and `pooling` for
 * the tables that give none (0 to 1e6). */
gs_status gs_embed_specs_load_scaled(const char *path, double scale, double pooling,
                                     gs_embed_spec **out, int *n);
void gs_embed_specs_free(gs_embed_spec *specs);

/* One shard of table t priced as the planner prices it (gs_cost_shard with
 * cfg's network and lookup cost): out->lookup_s, wire_s, total_s (-1 for
 * an unknown kind), per step. */
void gs_shard_price(const gs_shard_config *cfg, const gs_embed_spec *t, const gs_shard *s,
                    gs_cost_shard_out *out);
gs_status gs_shard_plan_make(const gs_embed_spec *tables, int ntables,
                             const gs_shard_config *cfg, gs_shard_plan **out);
/* Every shard of p priced where it is: with its rank's own cache, Che's
 * characteristic time of the shards that rank holds in
 * cfg->lookup.cache_bytes (gs_cost_cache_time; cfg->cache_t is ignored).
 * out: p->nshards entries. */
gs_status gs_shard_plan_price(const gs_shard_plan *p, const gs_embed_spec *tables,
                              const gs_shard_config *cfg, gs_cost_shard_out *out);
/* Every row and column of every table owned exactly once (dp: on every
 * rank), every rank in range, memory under the cap. GS_ERR_INVALID_ARG
 * naming the table and what is wrong otherwise. */
gs_status gs_shard_plan_check(const gs_shard_plan *p, const gs_embed_spec *tables,
                              int ntables, double mem_cap);
void gs_shard_plan_free(gs_shard_plan *p);
/* The baseline of the DLRM reference: every table whole, dealt out in
 * contiguous blocks of index (its get_my_slice); the worst rank's estimated
 * time under the same cost as the planner's (INFINITY where a rank's
 * tables miss the memory cap, or out of memory). */
double gs_shard_contiguous_max(const gs_embed_spec *tables, int ntables,
                               const gs_shard_config *cfg);
/* The baseline of TorchRec's default planner: its greedy proposer (every
 * table on its best-rated option of tw, rw, cw, twrw and dp, rated by the
 * costliest shard; then the worst-rated table's next option, and so on)
 * and GreedyPerfPartitioner (shards largest storage first, each on the
 * least busy rank with memory for it), priced with the planner's cost; the
 * best proposal's worst rank (INFINITY if nothing fits the memory cap, or
 * out of memory). */
double gs_shard_torchrec_max(const gs_embed_spec *tables, int ntables,
                             const gs_shard_config *cfg);
/* The per-rank maximum and mean of the estimated time. */
void gs_shard_plan_balance(const gs_shard_plan *p, double *max_s, double *mean_s);
/* JSON: the tables it was made for, the ranks and every shard. load checks
 * the file against the tables and the ranks given (a plan for other tables
 * or another world size is refused) and with gs_shard_plan_check. */
gs_status gs_shard_plan_save(const gs_shard_plan *p, const gs_embed_spec *tables,
                             const char *path);
/* The same JSON as one line, malloc'ed for the caller to free(); NULL when
 * out of memory. */
char *gs_shard_plan_text(const gs_shard_plan *p, const gs_embed_spec *tables);
gs_status gs_shard_plan_load(const char *path, const gs_embed_spec *tables, int ntables,
                             int ranks, gs_shard_plan **out);
/* (ranks <= 0: whatever world size the plan was made for, as a check
 * before the world is known does; the plan's ranks are then (*out)->ranks.) */

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_EMBED_H */
