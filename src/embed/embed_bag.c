/*
 * Embedding bags: pooled lookups and the backward fused with the update
 * (include/gradsync/embed.h; docs/DLRM.md).
 *
 * The backward's grouping is a stable LSD radix sort of 64-bit pairs
 * (row << 32 | bag) on the row's bits only, in as few passes as the table's
 * size needs (at most 11 bits a pass: the counts of a pass stay in L1).
 * Being stable, it keeps each row's lookups in input order, so the sum of a
 * row's gradient is always taken in the same order: the update is
 * deterministic without atomics (FBGEMM's design: sort, segment-reduce,
 * fused optimizer).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gradsync/embed.h"
#include "gs_internal.h"

#define RADIX_MAX_BITS 11

struct gs_embed_work {
  uint64_t *pairs, *tmp;
  size_t cap;
  float *grad;
  size_t grad_cap;
  size_t *counts; /* 1 << RADIX_MAX_BITS */
};

void gs_embed_work_free(gs_embed_work *w) {
  if (w == NULL) return;
  gs_free(w->pairs);
  gs_free(w->tmp);
  gs_free(w->grad);
  gs_free(w->counts);
  gs_free(w);
}

static inline int64_t id_at(const gs_embed_bags *bags, int64_t j) {
  return bags->ids64 ? ((const int64_t *)bags->ids)[j] : ((const int32_t *)bags->ids)[j];
}

static const char *table_name(const gs_embed_table *t) {
  return t->name && *t->name ? t->name : "(unnamed)";
}

gs_status gs_embed_check(const gs_embed_table *t, const gs_embed_bags *bags) {
  if (t == NULL || bags == NULL || t->weights == NULL || bags->offsets == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "embedding bags: NULL table, weights or offsets");
  if (t->dim == 0)
    return gs_error(GS_ERR_INVALID_ARG, "embedding table '%s': dimension 0", table_name(t));
  if (t->rows > UINT32_MAX)
    return gs_error(GS_ERR_UNSUPPORTED, "embedding table '%s': %zu rows (at most 2^32 - 1 "
                    "in one shard)", table_name(t), t->rows);
  if (bags->nbags > UINT32_MAX)
    return gs_error(GS_ERR_UNSUPPORTED, "embedding bags of table '%s': %zu bags in one "
                    "batch (at most 2^32 - 1)", table_name(t), bags->nbags);
  if (bags->offsets[0] != 0)
    return gs_error(GS_ERR_INVALID_ARG, "embedding bags of table '%s': offsets[0] is %lld, "
                    "not 0", table_name(t), (long long)bags->offsets[0]);
  for (size_t b = 0; b < bags->nbags; b++)
    if (bags->offsets[b + 1] < bags->offsets[b])
      return gs_error(GS_ERR_INVALID_ARG, "embedding bags of table '%s': offsets decrease "
                      "at sample %zu (%lld then %lld)", table_name(t),
                      bags->first_sample + b, (long long)bags->offsets[b],
                      (long long)bags->offsets[b + 1]);
  if (bags->offsets[bags->nbags] > 0 && bags->ids == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "embedding bags of table '%s': %lld lookups and "
                    "no ids", table_name(t), (long long)bags->offsets[bags->nbags]);
  for (size_t b = 0; b < bags->nbags; b++)
    for (int64_t j = bags->offsets[b]; j < bags->offsets[b + 1]; j++) {
      int64_t id = id_at(bags, j);
      if (id < 0 || (uint64_t)id >= t->rows)
        return gs_error(GS_ERR_INVALID_ARG, "embedding table '%s': id %lld out of range "
                        "[0, %zu) in sample %zu (its lookup %lld)", table_name(t),
                        (long long)id, t->rows, bags->first_sample + b,
                        (long long)(j - bags->offsets[b]));
    }
  return GS_OK;
}

/* The loops are built for AVX-512, AVX2 and the baseline, the loader
 * picking the best the CPU has (GCC's function multi-versioning, as in
 * src/nn); not under ThreadSanitizer, whose runtime is not up when the
 * loader resolves them. The file is compiled with -ffp-contract=off: every
 * clone rounds as the baseline does, so results do not depend on the CPU. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(GRADSYNC_EMBED_NO_CLONES)
#define EMBED_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define EMBED_CLONES
#endif

/* The rows ahead are fetched while the current one is added: a lookup is a
 * random row of a table far larger than the caches, and without the
 * prefetch each one waits for memory (FBGEMM's kernels do the same). The
 * whole row, every 64-byte line of it. */
#define PREFETCH_AHEAD 16

/* Fetches lookup J + AHEAD's row, every line of its DIM floats (w, ids and
 * n, the lookups, are the caller's). */
#define FETCH_AHEAD(J, DIM, AHEAD)                                                      \
  if ((J) + (AHEAD) < n) {                                                              \
    const float *ahead = w + (size_t)ids[(J) + (AHEAD)] * (DIM);                        \
    for (size_t c = 0; c < (DIM); c += 16) __builtin_prefetch(ahead + c);               \
  }

/* dst[d] += src[d], for the widths without a kernel of their own. (With
 * the width a runtime value, pooling a bag in column blocks held in
 * registers was twice as slow here: the row-at-a-time loop lets the loads
 * of successive lookups overlap. With the width a constant, the whole row
 * stays in registers: FORWARD_FIXED.) */
static inline void add_row(float *restrict dst, const float *restrict src, size_t dim) {
  for (size_t d = 0; d < dim; d++) dst[d] += src[d];
}

#define FORWARD_ROWS(NAME, ID_T)                                                        \
  static EMBED_CLONES void NAME(const gs_embed_table *t, const gs_embed_bags *bags,     \
                                gs_embed_pool pool, float *out, size_t out_stride,      \
                                size_t out_col) {                                       \
    const ID_T *ids = bags->ids;                                                       \
    const float *w = t->weights;                                                       \
    size_t dim = t->dim;                                                               \
    int64_t n = bags->offsets[bags->nbags];                                            \
    for (size_t b = 0; b < bags->nbags; b++) {                                         \
      float *dst = out + b * out_stride + out_col;                                     \
      int64_t lo = bags->offsets[b], hi = bags->offsets[b + 1];                        \
      memset(dst, 0, dim * sizeof(float));                                             \
      for (int64_t j = lo; j < hi; j++) {                                              \
        FETCH_AHEAD(j, dim, PREFETCH_AHEAD)                                            \
        add_row(dst, w + (size_t)ids[j] * dim, dim);                                   \
      }                                                                                \
      if (pool == GS_EMBED_MEAN && hi - lo > 1) {                                      \
        float s = 1.0f / (float)(hi - lo);                                             \
        for (size_t d = 0; d < dim; d++) dst[d] *= s;                                  \
      }                                                                                \
    }                                                                                  \
  }
FORWARD_ROWS(forward_rows32, int32_t)
FORWARD_ROWS(forward_rows64, int64_t)

/* The common widths with the width a constant: a bag's sum is held in
 * vectors of 16 floats (GCC's vector extension: as a float array of 128
 * the compiler zeroed it with rep stos and spilled it to the stack for
 * every bag, which cost 128 columns half their speed at one to two ids a
 * bag) and stored once, scaled by 1 for sums (x * 1 is x), so that one
 * store path keeps it in registers; narrow rows are fetched further ahead,
 * so that about as many bytes are in flight. The sums run in the same order
 * as forward_rows', bit for bit (bench/results/embed_kernels.md). */
/* 16 floats, unaligned: the rows are any float's address. */
typedef float embed_v16 __attribute__((vector_size(64), aligned(4)));

#define FORWARD_FIXED(NAME, ID_T, DIM, AHEAD)                                           \
  static EMBED_CLONES void NAME(const gs_embed_table *t, const gs_embed_bags *bags,     \
                                gs_embed_pool pool, float *out, size_t out_stride,      \
                                size_t out_col) {                                       \
    const ID_T *ids = bags->ids;                                                       \
    const float *w = t->weights;                                                       \
    int64_t n = bags->offsets[bags->nbags];                                            \
    enum { V = DIM / 16 };                                                             \
    for (size_t b = 0; b < bags->nbags; b++) {                                         \
      int64_t lo = bags->offsets[b], hi = bags->offsets[b + 1];                        \
      embed_v16 *dst = (embed_v16 *)(out + b * out_stride + out_col);                  \
      embed_v16 acc[V];                                                                \
      for (int v = 0; v < V; v++) acc[v] = (embed_v16){0};                             \
      for (int64_t j = lo; j < hi; j++) {                                              \
        FETCH_AHEAD(j, DIM, AHEAD)                                                     \
        const embed_v16 *src = (const embed_v16 *)(w + (size_t)ids[j] * DIM);          \
        for (int v = 0; v < V; v++) acc[v] += src[v];                                  \
      }                                                                                \
      float s = pool == GS_EMBED_MEAN && hi - lo > 1 ? 1.0f / (float)(hi - lo) : 1.0f; \
      for (int v = 0; v < V; v++) dst[v] = acc[v] * s;                                 \
    }                                                                                  \
  }
FORWARD_FIXED(forward32_d16, int32_t, 16, 64)
FORWARD_FIXED(forward64_d16, int64_t, 16, 64)
FORWARD_FIXED(forward32_d32, int32_t, 32, 64)
FORWARD_FIXED(forward64_d32, int64_t, 32, 64)
FORWARD_FIXED(forward32_d64, int32_t, 64, 32)
FORWARD_FIXED(forward64_d64, int64_t, 64, 32)
FORWARD_FIXED(forward32_d128, int32_t, 128, 32)
FORWARD_FIXED(forward64_d128, int64_t, 128, 32)

typedef void (*forward_fn)(const gs_embed_table *, const gs_embed_bags *, gs_embed_pool,
                           float *, size_t, size_t);

static forward_fn forward_kernel(size_t dim, int ids64) {
  switch (dim) {
    case 16: return ids64 ? forward64_d16 : forward32_d16;
    case 32: return ids64 ? forward64_d32 : forward32_d32;
    case 64: return ids64 ? forward64_d64 : forward32_d64;
    case 128: return ids64 ? forward64_d128 : forward32_d128;
    default: return ids64 ? forward_rows64 : forward_rows32;
  }
}

gs_status gs_embed_forward(const gs_embed_table *t, const gs_embed_bags *bags,
                           gs_embed_pool pool, float *out, size_t out_stride,
                           size_t out_col) {
  GS_CHECK(gs_embed_check(t, bags));
  if (out == NULL || out_col + t->dim > out_stride)
    return gs_error(GS_ERR_INVALID_ARG, "embedding table '%s': output columns [%zu, %zu) "
                    "outside a row of %zu", table_name(t), out_col, out_col + t->dim,
                    out_stride);
  forward_kernel(t->dim, bags->ids64)(t, bags, pool, out, out_stride, out_col);
  return GS_OK;
}

static gs_status work_reserve(gs_embed_work **wp, size_t n, size_t dim) {
  if (*wp == NULL) {
    *wp = gs_calloc(1, sizeof **wp);
    if (*wp == NULL) return gs_error(GS_ERR_NOMEM, "embedding bags: out of memory for scratch");
  }
  gs_embed_work *w = *wp;
  if (w->counts == NULL) {
    w->counts = gs_malloc(sizeof(size_t) << RADIX_MAX_BITS);
    if (w->counts == NULL) return gs_error(GS_ERR_NOMEM, "embedding bags: out of memory");
  }
  if (n > w->cap) {
    gs_free(w->pairs);
    gs_free(w->tmp);
    w->pairs = gs_malloc(n * sizeof(uint64_t));
    w->tmp = gs_malloc(n * sizeof(uint64_t));
    w->cap = w->pairs && w->tmp ? n : 0;
    if (w->cap == 0)
      return gs_error(GS_ERR_NOMEM, "embedding bags: out of memory for %zu lookups", n);
  }
  if (dim > w->grad_cap) {
    gs_free(w->grad);
    w->grad = gs_malloc(dim * sizeof(float));
    w->grad_cap = w->grad ? dim : 0;
    if (w->grad == NULL) return gs_error(GS_ERR_NOMEM, "embedding bags: out of memory");
  }
  return GS_OK;
}

/* Sorts n pairs by their high 32 bits (the row, below 2^bits), stably;
 * returns the buffer holding the result (pairs or tmp). */
static uint64_t *radix_sort_rows(gs_embed_work *w, size_t n, int bits) {
  uint64_t *src = w->pairs, *dst = w->tmp;
  int passes = (bits + RADIX_MAX_BITS - 1) / RADIX_MAX_BITS;
  if (passes == 0) return src; /* one row: already grouped */
  int per = (bits + passes - 1) / passes;
  size_t buckets = (size_t)1 << per, mask = buckets - 1;
  for (int p = 0; p < passes; p++) {
    int shift = 32 + p * per;
    size_t *cnt = w->counts;
    memset(cnt, 0, buckets * sizeof(size_t));
    for (size_t i = 0; i < n; i++) cnt[(src[i] >> shift) & mask]++;
    size_t sum = 0;
    for (size_t k = 0; k < buckets; k++) {
      size_t c = cnt[k];
      cnt[k] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++) dst[cnt[(src[i] >> shift) & mask]++] = src[i];
    uint64_t *x = src;
    src = dst;
    dst = x;
  }
  return src;
}

static inline void axpy(float *restrict g, float a, const float *restrict x, size_t dim) {
  for (size_t d = 0; d < dim; d++) g[d] += a * x[d];
}

static inline void copy_scaled(float *restrict g, float a, const float *restrict x, size_t dim) {
  for (size_t d = 0; d < dim; d++) g[d] = a * x[d];
}

static gs_status check_optim(const gs_embed_table *t, const gs_embed_optim *opt) {
  if (opt->kind == GS_EMBED_ROWWISE_ADAGRAD && t->state == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "embedding table '%s': row-wise Adagrad needs its "
                    "accumulator (one float per row)", table_name(t));
  if (opt->kind != GS_EMBED_SGD && opt->kind != GS_EMBED_ROWWISE_ADAGRAD)
    return gs_error(GS_ERR_INVALID_ARG, "embedding table '%s': unknown optimizer %d",
                    table_name(t), (int)opt->kind);
  return GS_OK;
}

#if defined(__GNUC__)
#define EMBED_INLINE static inline __attribute__((always_inline))
#else
#define EMBED_INLINE static inline
#endif

/* One row's update from its gradient summed over the batch. Row-wise
 * Adagrad adds sq / sq_dim to the row's accumulator: the mean of g^2 over
 * the row's sq_dim columns, sq their sum of squares (the block's own when
 * the table is whole; all column blocks' when it is split). */
EMBED_INLINE void update_row_sq(gs_embed_table *t, size_t row, const float *g, size_t dim,
                               float sq, size_t sq_dim, const gs_embed_optim *opt) {
  float *wr = t->weights + row * dim;
  if (opt->kind == GS_EMBED_SGD) {
    for (size_t d = 0; d < dim; d++) wr[d] -= opt->lr * g[d];
  } else {
    t->state[row] += sq / (float)sq_dim;
    float step = opt->lr / (sqrtf(t->state[row]) + opt->eps);
    for (size_t d = 0; d < dim; d++) wr[d] -= step * g[d];
  }
}

EMBED_INLINE float sum_sq(const float *g, size_t dim) {
  float sq = 0;
  for (size_t d = 0; d < dim; d++) sq += g[d] * g[d];
  return sq;
}

/* dim: the table's, passed so that a constant can stand for it. */
EMBED_INLINE void update_row(gs_embed_table *t, size_t row, const float *g, size_t dim,
                             const gs_embed_optim *opt) {
  update_row_sq(t, row, g, dim, opt->kind == GS_EMBED_SGD ? 0 : sum_sq(g, dim), dim, opt);
}

/* Checks the backward's arguments and groups the batch's lookups by row:
 * *sorted receives the n pairs (row << 32 | bag), rows ascending and each
 * row's lookups in input order. */
static gs_status group_rows(const gs_embed_table *t, const gs_embed_bags *bags,
                            const float *dout, size_t dout_stride, size_t dout_col,
                            gs_embed_work **work, size_t *n, const uint64_t **sorted) {
  GS_CHECK(gs_embed_check(t, bags));
  if (dout == NULL || work == NULL || dout_col + t->dim > dout_stride)
    return gs_error(GS_ERR_INVALID_ARG, "embedding table '%s': backward: NULL gradient or "
                    "work, or columns [%zu, %zu) outside a row of %zu", table_name(t),
                    dout_col, dout_col + t->dim, dout_stride);
  *n = (size_t)bags->offsets[bags->nbags];
  *sorted = NULL;
  if (*n == 0) return GS_OK;
  GS_CHECK(work_reserve(work, *n, t->dim));
  gs_embed_work *w = *work;
  for (size_t b = 0, j = 0; b < bags->nbags; b++)
    for (; j < (size_t)bags->offsets[b + 1]; j++)
      w->pairs[j] = (uint64_t)id_at(bags, (int64_t)j) << 32 | (uint64_t)b;
  int bits = 0;
  while (bits < 32 && ((size_t)1 << bits) < t->rows) bits++;
  *sorted = radix_sort_rows(w, *n, bits);
  return GS_OK;
}

/* The gradient of the row whose lookups start at sorted[i] into g: its
 * lookups' shares of dout in input order (the sort is stable). Returns
 * where the next row starts. Inlined into each caller (a call per row cost
 * 15-30% of the fused backward at 16 columns), where dim may be a
 * constant. */
EMBED_INLINE size_t row_grad(const uint64_t *sorted, size_t i, size_t n, const gs_embed_bags *bags,
                       gs_embed_pool pool, const float *dout, size_t dout_stride,
                       size_t dout_col, size_t dim, float *g) {
  uint32_t row = (uint32_t)(sorted[i] >> 32);
  size_t k = i;
  for (; k < n && (uint32_t)(sorted[k] >> 32) == row; k++) {
    size_t b = (size_t)(sorted[k] & 0xffffffffu);
    float s = 1.0f;
    if (pool == GS_EMBED_MEAN) s = 1.0f / (float)(bags->offsets[b + 1] - bags->offsets[b]);
    const float *src = dout + b * dout_stride + dout_col;
    if (k == i) copy_scaled(g, s, src, dim);
    else axpy(g, s, src, dim);
  }
  return k;
}

/* The rows updated this many lookups on are fetched (for writing) while
 * this one is: with ids spread over a table beyond the caches, each update
 * otherwise waits for its row (3-10x PyTorch's sparse update with it, 1.8-5x
 * without, bench/results/embed_kernels.md). */
#define FUSED_AHEAD 16

/* Fetches row `row` of t (dim floats) and its accumulator for writing. */
EMBED_INLINE void fetch_for_update(const gs_embed_table *t, size_t row, size_t dim) {
  const float *wa = t->weights + row * dim;
  for (size_t c = 0; c < dim; c += 16) __builtin_prefetch(wa + c, 1);
  if (t->state) __builtin_prefetch(t->state + row, 1);
}

/* The fused backward's loop over the sorted lookups: each row's gradient,
 * then its update. At the common widths the width is a constant and the
 * row's gradient stays in registers (2-4x at 16 columns); the same sums in
 * the same order, bit for bit. */
#define FUSED_BODY(DIM, G)                                                               \
  for (size_t i = 0; i < n;) {                                                          \
    uint32_t row = (uint32_t)(sorted[i] >> 32);                                         \
    if (i + FUSED_AHEAD < n)                                                            \
      fetch_for_update(t, (size_t)(sorted[i + FUSED_AHEAD] >> 32), DIM);                \
    i = row_grad(sorted, i, n, bags, pool, dout, dout_stride, dout_col, DIM, G);        \
    update_row(t, row, G, DIM, opt);                                                    \
  }

#define FUSED_FIXED(NAME, DIM)                                                           \
  static EMBED_CLONES void NAME(gs_embed_table *t, const gs_embed_bags *bags,           \
                                gs_embed_pool pool, const float *dout, size_t dout_stride, \
                                size_t dout_col, const gs_embed_optim *opt,             \
                                const uint64_t *sorted, size_t n, float *scratch) {     \
    (void)scratch;                                                                      \
    float g[DIM] = {0}; /* written before read: the warning cannot see it */  \
    FUSED_BODY(DIM, g)                                                                  \
  }
FUSED_FIXED(fused_d16, 16)
FUSED_FIXED(fused_d32, 32)
FUSED_FIXED(fused_d64, 64)
FUSED_FIXED(fused_d128, 128)

static EMBED_CLONES void fused_any(gs_embed_table *t, const gs_embed_bags *bags,
                                   gs_embed_pool pool, const float *dout, size_t dout_stride,
                                   size_t dout_col, const gs_embed_optim *opt,
                                   const uint64_t *sorted, size_t n, float *scratch) {
  FUSED_BODY(t->dim, scratch)
}

typedef void (*fused_fn)(gs_embed_table *, const gs_embed_bags *, gs_embed_pool,
                         const float *, size_t, size_t, const gs_embed_optim *,
                         const uint64_t *, size_t, float *);

static fused_fn fused_kernel(size_t dim) {
  switch (dim) {
    case 16: return fused_d16;
    case 32: return fused_d32;
    case 64: return fused_d64;
    case 128: return fused_d128;
    default: return fused_any;
  }
}

gs_status gs_embed_backward_update(gs_embed_table *t, const gs_embed_bags *bags,
                                   gs_embed_pool pool, const float *dout,
                                   size_t dout_stride, size_t dout_col,
                                   const gs_embed_optim *opt, gs_embed_work **work) {
  size_t n = 0;
  const uint64_t *sorted = NULL;
  if (t != NULL && opt == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "embedding table '%s': backward: NULL optimizer",
                    table_name(t));
  GS_CHECK(group_rows(t, bags, dout, dout_stride, dout_col, work, &n, &sorted));
  GS_CHECK(check_optim(t, opt));
  if (n > 0) fused_kernel(t->dim)(t, bags, pool, dout, dout_stride, dout_col, opt, sorted, n,
                                  (*work)->grad);
  return GS_OK;
}

void gs_embed_rows_free(gs_embed_rows *r) {
  if (r == NULL) return;
  gs_free(r->row);
  gs_free(r->grad);
  gs_free(r->sq);
  memset(r, 0, sizeof *r);
}

gs_status gs_embed_backward_rows(const gs_embed_table *t, const gs_embed_bags *bags,
                                 gs_embed_pool pool, const float *dout, size_t dout_stride,
                                 size_t dout_col, gs_embed_rows *out, gs_embed_work **work) {
  size_t n = 0;
  const uint64_t *sorted = NULL;
  if (t != NULL && out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "embedding table '%s': backward: NULL rows' output",
                    table_name(t));
  GS_CHECK(group_rows(t, bags, dout, dout_stride, dout_col, work, &n, &sorted));
  size_t dim = t->dim, need;
  /* At most n rows: room for n, kept across calls (freeing clears *out). */
  if (n > out->cap || out->row == NULL) {
    if (gs_mul_size(n ? n : 1, dim * sizeof(float), &need) != GS_OK)
      return gs_error(GS_ERR_NOMEM, "embedding table '%s': %zu rows' gradients overflow",
                      table_name(t), n);
    gs_embed_rows_free(out);
    out->row = gs_malloc((n ? n : 1) * sizeof *out->row);
    out->sq = gs_malloc((n ? n : 1) * sizeof *out->sq);
    out->grad = gs_malloc(need);
    if (!out->row || !out->sq || !out->grad) {
      gs_embed_rows_free(out);
      return gs_error(GS_ERR_NOMEM, "embedding table '%s': out of memory for %zu rows' "
                      "gradients", table_name(t), n);
    }
    out->cap = n ? n : 1;
  }
  out->n = 0;
  out->dim = dim;
  for (size_t i = 0; i < n;) {
    float *g = out->grad + out->n * dim;
    out->row[out->n] = (uint32_t)(sorted[i] >> 32);
    i = row_grad(sorted, i, n, bags, pool, dout, dout_stride, dout_col, dim, g);
    out->sq[out->n++] = sum_sq(g, dim);
  }
  return GS_OK;
}

gs_status gs_embed_rows_update(gs_embed_table *t, const gs_embed_rows *r, const float *sq,
                               size_t sq_dim, const gs_embed_optim *opt) {
  if (t == NULL || r == NULL || opt == NULL || r->dim != t->dim || sq_dim < t->dim)
    return gs_error(GS_ERR_INVALID_ARG, "embedding table '%s': rows' update: NULL argument, "
                    "rows of %zu columns for a table of %zu, or a row of %zu columns",
                    t ? table_name(t) : "?", r ? r->dim : 0, t ? t->dim : 0, sq_dim);
  GS_CHECK(check_optim(t, opt));
  if (sq == NULL) sq = r->sq;
  for (size_t i = 0; i < r->n; i++) {
    if (i + FUSED_AHEAD < r->n) fetch_for_update(t, r->row[i + FUSED_AHEAD], r->dim);
    update_row_sq(t, r->row[i], r->grad + i * r->dim, r->dim, sq[i], sq_dim, opt);
  }
  return GS_OK;
}

gs_status gs_embed_backward_dense(const gs_embed_table *t, const gs_embed_bags *bags,
                                  gs_embed_pool pool, const float *dout, size_t dout_stride,
                                  size_t dout_col, float *grad) {
  GS_CHECK(gs_embed_check(t, bags));
  if (dout == NULL || grad == NULL || dout_col + t->dim > dout_stride)
    return gs_error(GS_ERR_INVALID_ARG, "embedding table '%s': dense backward: NULL gradient "
                    "or output, or columns [%zu, %zu) outside a row of %zu", table_name(t),
                    dout_col, dout_col + t->dim, dout_stride);
  size_t dim = t->dim;
  for (size_t b = 0; b < bags->nbags; b++) {
    int64_t lo = bags->offsets[b], hi = bags->offsets[b + 1];
    float s = pool == GS_EMBED_MEAN && hi - lo > 1 ? 1.0f / (float)(hi - lo) : 1.0f;
    const float *src = dout + b * dout_stride + dout_col;
    for (int64_t j = lo; j < hi; j++) axpy(grad + (size_t)id_at(bags, j) * dim, s, src, dim);
  }
  return GS_OK;
}

gs_status gs_embed_update_dense(gs_embed_table *t, const float *grad,
                                const gs_embed_optim *opt) {
  if (t == NULL || grad == NULL || opt == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "embedding table: dense update: NULL argument");
  GS_CHECK(check_optim(t, opt));
  size_t dim = t->dim;
  for (size_t row = 0; row < t->rows; row++) {
    const float *g = grad + row * dim;
    size_t d = 0;
    while (d < dim && g[d] == 0.0f) d++;
    if (d < dim) update_row(t, row, g, dim, opt); /* an all-zero row would not move */
  }
  return GS_OK;
}
