/*
 * Embedding bags (include/gradsync/embed.h) against a naive reference:
 *   - forward, sum and mean, int32 and int64 ids, empty bags, bags with a
 *     row repeated, into a column range of a wider output, bitwise the
 *     naive sum, at the widths with their own kernels (16-128) and others;
 *   - the fused backward + SGD and + row-wise Adagrad against a dense
 *     reference (every lookup's gradient added to a dense table gradient in
 *     input order, then each touched row updated): bitwise equal, since the
 *     kernel sums a row's lookups in input order too; untouched rows and
 *     their accumulators unchanged;
 *   - the backward in two halves (touched rows, then their update) bitwise
 *     the fused kernel; a table in two column blocks whose sums of squares
 *     are added takes the whole table's row-wise Adagrad step;
 *   - determinism: two runs from the same start give identical tables;
 *   - bad input: an id out of range (negative, = rows) names the table, the
 *     id, the sample (with first_sample) and the lookup, and changes nothing;
 *     decreasing offsets; Adagrad without its state; output columns outside
 *     the row;
 *   - tables of 1 row and of 70,000 rows (two radix passes), Zipf-skewed ids.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gradsync.h"

#define TEST_RNG_SEED 99
#include "../common/test_rng.h"

/* A batch: nbags bags of 0..maxlen ids below rows; Zipf-like skew when
 * skew > 0 (id = rows * u^(1 + skew), so low ids are hot). */
typedef struct {
  size_t nbags;
  int64_t *offsets;
  int32_t *ids32;
  int64_t *ids64;
} batch;

static batch make_batch(size_t nbags, int maxlen, size_t rows, double skew) {
  batch b = {nbags, calloc(nbags + 1, sizeof(int64_t)), NULL, NULL};
  assert_non_null(b.offsets);
  for (size_t i = 0; i < nbags; i++)
    b.offsets[i + 1] = b.offsets[i] + (int64_t)(rnd() % (uint64_t)(maxlen + 1));
  size_t n = (size_t)b.offsets[nbags];
  b.ids32 = malloc((n + 1) * sizeof(int32_t));
  b.ids64 = malloc((n + 1) * sizeof(int64_t));
  assert_non_null(b.ids32);
  assert_non_null(b.ids64);
  for (size_t j = 0; j < n; j++) {
    size_t id = skew > 0 ? (size_t)((double)rows * pow(unif(), 1.0 + skew))
                         : (size_t)(rnd() % rows);
    if (id >= rows) id = rows - 1;
    b.ids32[j] = (int32_t)id;
    b.ids64[j] = (int64_t)id;
  }
  return b;
}

static void free_batch(batch *b) {
  free(b->offsets);
  free(b->ids32);
  free(b->ids64);
}

static gs_embed_bags bags_of(const batch *b, int ids64) {
  gs_embed_bags g = {b->nbags, b->offsets, ids64 ? (const void *)b->ids64 : (const void *)b->ids32,
                     ids64, 0};
  return g;
}

static float *random_floats(size_t n) {
  float *x = malloc((n + 1) * sizeof(float));
  assert_non_null(x);
  for (size_t i = 0; i < n; i++) x[i] = (float)(unif() * 2 - 1);
  return x;
}

static void check_forward(size_t rows, size_t dim, size_t nbags, int maxlen, double skew) {
  float *w = random_floats(rows * dim);
  batch b = make_batch(nbags, maxlen, rows, skew);
  size_t stride = dim + 5, col = 3;
  float *out = malloc(nbags * stride * sizeof(float)), *want = malloc(nbags * dim * sizeof(float));
  assert_non_null(out);
  assert_non_null(want);
  gs_embed_table t = {"t", w, NULL, rows, dim};
  for (int pool = 0; pool < 2; pool++)
    for (int ids64 = 0; ids64 < 2; ids64++) {
      for (size_t i = 0; i < nbags * stride; i++) out[i] = -7.0f; /* guards */
      gs_embed_bags g = bags_of(&b, ids64);
      assert_int_equal(gs_embed_forward(&t, &g, (gs_embed_pool)pool, out, stride, col), GS_OK);
      for (size_t i = 0; i < nbags; i++) {
        int64_t lo = b.offsets[i], hi = b.offsets[i + 1];
        for (size_t d = 0; d < dim; d++) {
          float s = 0;
          for (int64_t j = lo; j < hi; j++) s += w[(size_t)b.ids32[j] * dim + d];
          if (pool == GS_EMBED_MEAN && hi - lo > 1) s *= 1.0f / (float)(hi - lo);
          float got = out[i * stride + col + d];
          if (got != s)
            fail_msg("forward pool %d ids64 %d rows %zu dim %zu: bag %zu [%zu] = %g, want %g",
                     pool, ids64, rows, dim, i, d, got, s);
        }
        for (size_t c = 0; c < stride; c++)
          if ((c < col || c >= col + dim) && out[i * stride + c] != -7.0f)
            fail_msg("forward wrote column %zu outside [%zu, %zu)", c, col, col + dim);
      }
    }
  free(w);
  free(out);
  free(want);
  free_batch(&b);
}

static void test_forward(void **state) {
  (void)state;
  check_forward(1, 4, 9, 3, 0);
  check_forward(37, 16, 64, 10, 0);
  check_forward(1000, 64, 50, 55, 1.5);
  check_forward(70000, 8, 40, 20, 0);
  /* The widths with their own kernels (16, 32, 64, 128) and one beside. */
  check_forward(500, 32, 100, 12, 1.0);
  check_forward(300, 128, 60, 30, 0);
  check_forward(300, 128, 5, 1, 0);
  check_forward(200, 96, 30, 8, 0);
}

/* The dense reference of the backward + update. */
static void reference_update(float *w, float *state, size_t rows, size_t dim, const batch *b,
                             int pool, const float *dout, size_t stride, size_t col,
                             const gs_embed_optim *opt) {
  float *g = calloc(rows * dim, sizeof(float));
  unsigned char *touched = calloc(rows, 1);
  assert_non_null(g);
  assert_non_null(touched);
  size_t n = (size_t)b->offsets[b->nbags];
  (void)n;
  for (size_t i = 0; i < b->nbags; i++) {
    int64_t lo = b->offsets[i], hi = b->offsets[i + 1];
    float s = pool == GS_EMBED_MEAN ? 1.0f / (float)(hi - lo) : 1.0f;
    for (int64_t j = lo; j < hi; j++) {
      size_t r = (size_t)b->ids32[j];
      for (size_t d = 0; d < dim; d++) {
        /* The kernel's first lookup of a row sets (s * x), later ones add. */
        if (!touched[r]) g[r * dim + d] = s * dout[i * stride + col + d];
        else g[r * dim + d] += s * dout[i * stride + col + d];
      }
      touched[r] = 1;
    }
  }
  for (size_t r = 0; r < rows; r++) {
    if (!touched[r]) continue;
    float *gr = g + r * dim, *wr = w + r * dim;
    if (opt->kind == GS_EMBED_SGD) {
      for (size_t d = 0; d < dim; d++) wr[d] -= opt->lr * gr[d];
    } else {
      float sq = 0;
      for (size_t d = 0; d < dim; d++) sq += gr[d] * gr[d];
      state[r] += sq / (float)dim;
      float step = opt->lr / (sqrtf(state[r]) + opt->eps);
      for (size_t d = 0; d < dim; d++) wr[d] -= step * gr[d];
    }
  }
  free(g);
  free(touched);
}

static void check_backward(size_t rows, size_t dim, size_t nbags, int maxlen, double skew,
                           gs_embed_optim_kind kind) {
  batch b = make_batch(nbags, maxlen, rows, skew);
  size_t stride = dim * 2 + 1, col = dim;
  float *dout = random_floats(nbags * stride);
  float *w0 = random_floats(rows * dim);
  float *s0 = malloc(rows * sizeof(float));
  assert_non_null(s0);
  for (size_t r = 0; r < rows; r++) s0[r] = (float)unif();
  gs_embed_optim opt = {kind, 0.05f, 1e-10f};
  gs_embed_work *work = NULL;
  for (int pool = 0; pool < 2; pool++)
    for (int ids64 = 0; ids64 < 2; ids64++) {
      float *w = malloc(rows * dim * sizeof(float)), *ww = malloc(rows * dim * sizeof(float));
      float *st = malloc(rows * sizeof(float)), *sw = malloc(rows * sizeof(float));
      assert_non_null(w);
      assert_non_null(ww);
      assert_non_null(st);
      assert_non_null(sw);
      memcpy(w, w0, rows * dim * sizeof(float));
      memcpy(ww, w0, rows * dim * sizeof(float));
      memcpy(st, s0, rows * sizeof(float));
      memcpy(sw, s0, rows * sizeof(float));
      gs_embed_table t = {"t", w, kind == GS_EMBED_SGD ? NULL : st, rows, dim};
      gs_embed_bags g = bags_of(&b, ids64);
      /* Twice over the same batch: the second pass reads updated state. */
      for (int rep = 0; rep < 2; rep++) {
        assert_int_equal(gs_embed_backward_update(&t, &g, (gs_embed_pool)pool, dout, stride,
                                                  col, &opt, &work),
                         GS_OK);
        reference_update(ww, sw, rows, dim, &b, pool, dout, stride, col, &opt);
      }
      if (memcmp(w, ww, rows * dim * sizeof(float)) != 0) {
        for (size_t i = 0; i < rows * dim; i++)
          if (w[i] != ww[i])
            fail_msg("backward kind %d pool %d ids64 %d rows %zu dim %zu: weight %zu = %.9g, "
                     "reference %.9g", (int)kind, pool, ids64, rows, dim, i, w[i], ww[i]);
      }
      if (kind != GS_EMBED_SGD && memcmp(st, sw, rows * sizeof(float)) != 0)
        fail_msg("row-wise Adagrad: accumulators differ from the reference (rows %zu)", rows);
      free(w);
      free(ww);
      free(st);
      free(sw);
    }
  gs_embed_work_free(work);
  free(dout);
  free(w0);
  free(s0);
  free_batch(&b);
}

static void test_backward(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    gs_embed_optim_kind kind = (gs_embed_optim_kind)k;
    check_backward(1, 4, 9, 3, 0, kind);
    check_backward(37, 16, 64, 10, 0, kind);
    check_backward(1000, 64, 50, 55, 1.5, kind);
    check_backward(70000, 8, 40, 20, 0, kind);
    check_backward(5000, 128, 200, 1, 2.0, kind);
  }
}

/* The dp tables' split backward (gs_embed_backward_dense, then
 * gs_embed_update_dense on the summed gradient) takes the fused kernel's
 * step bit for bit: each row's lookups are summed in input order by both. */
static void check_dense(size_t rows, size_t dim, size_t nbags, int maxlen, double skew,
                        gs_embed_optim_kind kind, int pool) {
  batch b = make_batch(nbags, maxlen, rows, skew);
  size_t stride = dim * 3, col = dim;
  float *dout = random_floats(nbags * stride);
  float *w = random_floats(rows * dim), *ww = malloc(rows * dim * sizeof(float));
  float *st = calloc(rows, sizeof(float)), *sw = calloc(rows, sizeof(float));
  float *grad = calloc(rows * dim + 1, sizeof(float));
  assert_non_null(ww);
  assert_non_null(st);
  assert_non_null(sw);
  assert_non_null(grad);
  memcpy(ww, w, rows * dim * sizeof(float));
  gs_embed_optim opt = {kind, 0.05f, 1e-10f};
  gs_embed_table t = {"t", w, st, rows, dim}, u = {"u", ww, sw, rows, dim};
  gs_embed_bags g = bags_of(&b, 0);
  gs_embed_work *work = NULL;
  for (int rep = 0; rep < 2; rep++) {
    assert_int_equal(gs_embed_backward_update(&t, &g, (gs_embed_pool)pool, dout, stride, col,
                                              &opt, &work), GS_OK);
    memset(grad, 0, rows * dim * sizeof(float));
    assert_int_equal(gs_embed_backward_dense(&u, &g, (gs_embed_pool)pool, dout, stride, col,
                                             grad), GS_OK);
    assert_int_equal(gs_embed_update_dense(&u, grad, &opt), GS_OK);
  }
  for (size_t i = 0; i < rows * dim; i++)
    if (w[i] != ww[i])
      fail_msg("dense backward kind %d pool %d rows %zu: weight %zu = %.9g, fused %.9g",
               (int)kind, pool, rows, i, ww[i], w[i]);
  if (memcmp(st, sw, rows * sizeof(float)) != 0)
    fail_msg("dense backward: accumulators differ from the fused kernel's (rows %zu)", rows);
  /* Errors: an id out of range names the table; NULL gradient refused. */
  if (b.offsets[nbags] > 0) {
    int32_t keep = b.ids32[0];
    b.ids32[0] = (int32_t)rows;
    assert_int_equal(gs_embed_backward_dense(&u, &g, GS_EMBED_SUM, dout, stride, col, grad),
                     GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "'u'"));
    b.ids32[0] = keep;
  }
  assert_int_equal(gs_embed_backward_dense(&u, &g, GS_EMBED_SUM, dout, stride, col, NULL),
                   GS_ERR_INVALID_ARG);
  gs_embed_table nost = {"v", ww, NULL, rows, dim};
  gs_embed_optim ada = {GS_EMBED_ROWWISE_ADAGRAD, 0.05f, 1e-10f};
  assert_int_equal(gs_embed_update_dense(&nost, grad, &ada), GS_ERR_INVALID_ARG);
  gs_embed_work_free(work);
  free(dout);
  free(w);
  free(ww);
  free(st);
  free(sw);
  free(grad);
  free_batch(&b);
}

static void test_dense(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++)
    for (int pool = 0; pool < 2; pool++) {
      check_dense(1, 4, 9, 3, 0, (gs_embed_optim_kind)k, pool);
      check_dense(37, 16, 64, 10, 1.0, (gs_embed_optim_kind)k, pool);
      check_dense(300, 64, 100, 4, 0, (gs_embed_optim_kind)k, pool);
    }
}

/* The fused backward's two halves (gs_embed_backward_rows, then
 * gs_embed_rows_update): with the rows' own sums of squares bitwise the
 * fused kernel; a table split into two column blocks whose sums of squares
 * are added, the whole table's update within rounding (the accumulators
 * the same in both blocks, bitwise). */
static void check_rows(size_t rows, size_t dim, size_t nbags, int maxlen, double skew, int pool) {
  batch b = make_batch(nbags, maxlen, rows, skew);
  size_t stride = dim + 3, col = 2, h = dim / 2;
  float *dout = random_floats(nbags * stride);
  float *w = random_floats(rows * dim), *ww = malloc(rows * dim * sizeof(float));
  float *wa = malloc(rows * h * sizeof(float)), *wb = malloc(rows * (dim - h) * sizeof(float));
  float *st = calloc(rows, sizeof(float)), *sw = calloc(rows, sizeof(float));
  float *sa = calloc(rows, sizeof(float)), *sb = calloc(rows, sizeof(float));
  assert_true(ww && wa && wb && st && sw && sa && sb);
  memcpy(ww, w, rows * dim * sizeof(float));
  for (size_t r = 0; r < rows; r++) {
    memcpy(wa + r * h, w + r * dim, h * sizeof(float));
    memcpy(wb + r * (dim - h), w + r * dim + h, (dim - h) * sizeof(float));
  }
  gs_embed_optim opt = {GS_EMBED_ROWWISE_ADAGRAD, 0.05f, 1e-10f};
  gs_embed_table t = {"t", w, st, rows, dim}, u = {"u", ww, sw, rows, dim};
  gs_embed_table ta = {"a", wa, sa, rows, h}, tb = {"b", wb, sb, rows, dim - h};
  gs_embed_bags g = bags_of(&b, 1);
  gs_embed_work *work = NULL;
  gs_embed_rows ru = {0}, ra = {0}, rb = {0};
  float *sq = malloc((nbags * (size_t)maxlen + 1) * sizeof(float));
  assert_non_null(sq);
  for (int rep = 0; rep < 2; rep++) {
    assert_int_equal(gs_embed_backward_update(&t, &g, (gs_embed_pool)pool, dout, stride, col,
                                              &opt, &work), GS_OK);
    assert_int_equal(gs_embed_backward_rows(&u, &g, (gs_embed_pool)pool, dout, stride, col,
                                            &ru, &work), GS_OK);
    assert_int_equal(gs_embed_rows_update(&u, &ru, NULL, dim, &opt), GS_OK);
    assert_int_equal(gs_embed_backward_rows(&ta, &g, (gs_embed_pool)pool, dout, stride, col,
                                            &ra, &work), GS_OK);
    assert_int_equal(gs_embed_backward_rows(&tb, &g, (gs_embed_pool)pool, dout, stride,
                                            col + h, &rb, &work), GS_OK);
    assert_int_equal(ra.n, rb.n);
    assert_int_equal(ra.n, ru.n);
    for (size_t i = 0; i < ra.n; i++) {
      assert_int_equal(ra.row[i], rb.row[i]);
      if (i > 0) assert_true(ra.row[i] > ra.row[i - 1]);
      sq[i] = ra.sq[i] + rb.sq[i];
    }
    assert_int_equal(gs_embed_rows_update(&ta, &ra, sq, dim, &opt), GS_OK);
    assert_int_equal(gs_embed_rows_update(&tb, &rb, sq, dim, &opt), GS_OK);
  }
  if (memcmp(w, ww, rows * dim * sizeof(float)) != 0 || memcmp(st, sw, rows * sizeof(float)))
    fail_msg("rows' halves differ from the fused kernel (rows %zu, pool %d)", rows, pool);
  if (memcmp(sa, sb, rows * sizeof(float)) != 0)
    fail_msg("two column blocks' accumulators differ (rows %zu)", rows);
  for (size_t r = 0; r < rows; r++) {
    if (fabsf(sa[r] - st[r]) > 1e-6f * fabsf(st[r]))
      fail_msg("column blocks: row %zu's accumulator %.9g, whole table's %.9g", r, sa[r], st[r]);
    for (size_t c = 0; c < dim; c++) {
      float x = c < h ? wa[r * h + c] : wb[r * (dim - h) + c - h], y = w[r * dim + c];
      if (fabsf(x - y) > 1e-6f * fabsf(y) + 1e-7f)
        fail_msg("column blocks: row %zu col %zu = %.9g, whole table's %.9g", r, c, x, y);
    }
  }
  /* Bad input: rows of another width, no accumulator, an id out of range. */
  assert_int_equal(gs_embed_rows_update(&ta, &rb, NULL, dim, &opt),
                   dim - h == h ? GS_OK : GS_ERR_INVALID_ARG);
  gs_embed_table nost = {"n", wa, NULL, rows, h};
  assert_int_equal(gs_embed_rows_update(&nost, &ra, sq, dim, &opt), GS_ERR_INVALID_ARG);
  if (b.offsets[nbags] > 0) {
    int64_t keep = b.ids64[0];
    b.ids64[0] = (int64_t)rows;
    assert_int_equal(gs_embed_backward_rows(&ta, &g, GS_EMBED_SUM, dout, stride, col, &ra,
                                            &work), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "'a'"));
    b.ids64[0] = keep;
  }
  gs_embed_rows_free(&ru);
  gs_embed_rows_free(&ra);
  gs_embed_rows_free(&rb);
  gs_embed_work_free(work);
  void *bufs[] = {dout, w, ww, wa, wb, st, sw, sa, sb, sq};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
  free_batch(&b);
}

static void test_rows(void **state) {
  (void)state;
  for (int pool = 0; pool < 2; pool++) {
    check_rows(1, 4, 9, 3, 0, pool);
    check_rows(37, 16, 64, 10, 1.0, pool);
    check_rows(3000, 17, 200, 20, 0, pool);
    check_rows(70000, 64, 50, 55, 1.5, pool);
  }
}

/* The same batch from the same start, twice, with fresh work each time:
 * identical tables and accumulators, bit for bit. */
static void test_deterministic(void **state) {
  (void)state;
  size_t rows = 3000, dim = 32, nbags = 256;
  batch b = make_batch(nbags, 30, rows, 1.15);
  float *dout = random_floats(nbags * dim), *w0 = random_floats(rows * dim);
  float *out[2], *st[2];
  for (int run = 0; run < 2; run++) {
    out[run] = malloc(rows * dim * sizeof(float));
    st[run] = calloc(rows, sizeof(float));
    assert_non_null(out[run]);
    assert_non_null(st[run]);
    memcpy(out[run], w0, rows * dim * sizeof(float));
    gs_embed_table t = {"t", out[run], st[run], rows, dim};
    gs_embed_bags g = bags_of(&b, 0);
    gs_embed_optim opt = {GS_EMBED_ROWWISE_ADAGRAD, 0.1f, 1e-10f};
    gs_embed_work *work = NULL;
    for (int step = 0; step < 5; step++)
      assert_int_equal(gs_embed_backward_update(&t, &g, GS_EMBED_MEAN, dout, dim, 0, &opt,
                                                &work), GS_OK);
    gs_embed_work_free(work);
  }
  assert_memory_equal(out[0], out[1], rows * dim * sizeof(float));
  assert_memory_equal(st[0], st[1], rows * sizeof(float));
  /* And the update did something. */
  assert_true(memcmp(out[0], w0, rows * dim * sizeof(float)) != 0);
  for (int run = 0; run < 2; run++) {
    free(out[run]);
    free(st[run]);
  }
  free(dout);
  free(w0);
  free_batch(&b);
}

static void test_bad_input(void **state) {
  (void)state;
  size_t rows = 10, dim = 4;
  float *w = random_floats(rows * dim), *copy = malloc(rows * dim * sizeof(float));
  float st[10] = {0}, out[3 * 4], dout[3 * 4] = {0};
  assert_non_null(copy);
  memcpy(copy, w, rows * dim * sizeof(float));
  int64_t off[4] = {0, 2, 2, 5};
  int32_t ids[5] = {1, 2, 3, 10, 4}; /* id 10 = rows: sample 2's second lookup */
  gs_embed_table t = {"C7", w, st, rows, dim};
  gs_embed_bags g = {3, off, ids, 0, 1000};
  gs_embed_optim opt = {GS_EMBED_ROWWISE_ADAGRAD, 0.1f, 1e-10f};
  gs_embed_work *work = NULL;
  assert_int_equal(gs_embed_forward(&t, &g, GS_EMBED_SUM, out, dim, 0), GS_ERR_INVALID_ARG);
  const char *msg = gs_last_error();
  if (!strstr(msg, "'C7'") || !strstr(msg, "id 10") || !strstr(msg, "sample 1002") ||
      !strstr(msg, "lookup 1"))
    fail_msg("message '%s' does not name the table, id, sample and lookup", msg);
  assert_int_equal(gs_embed_backward_update(&t, &g, GS_EMBED_SUM, dout, dim, 0, &opt, &work),
                   GS_ERR_INVALID_ARG);
  assert_memory_equal(w, copy, rows * dim * sizeof(float));
  /* Negative ids, in int64. */
  int64_t ids64[5] = {1, 2, 3, -1, 4};
  gs_embed_bags g64 = {3, off, ids64, 1, 0};
  assert_int_equal(gs_embed_forward(&t, &g64, GS_EMBED_SUM, out, dim, 0), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "id -1"));
  /* Offsets that decrease, or do not start at 0. */
  int64_t bad_off[4] = {0, 3, 2, 5};
  int32_t good_ids[5] = {1, 2, 3, 4, 5};
  gs_embed_bags gb = {3, bad_off, good_ids, 0, 0};
  assert_int_equal(gs_embed_check(&t, &gb), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "decrease at sample 1"));
  int64_t off1[2] = {1, 2};
  gs_embed_bags g1 = {1, off1, good_ids, 0, 0};
  assert_int_equal(gs_embed_check(&t, &g1), GS_ERR_INVALID_ARG);
  /* Adagrad without its state; columns outside the row. */
  gs_embed_bags ok = {3, off, good_ids, 0, 0};
  gs_embed_table nostate = {"C7", w, NULL, rows, dim};
  assert_int_equal(gs_embed_backward_update(&nostate, &ok, GS_EMBED_SUM, dout, dim, 0, &opt,
                                            &work), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "accumulator"));
  assert_int_equal(gs_embed_forward(&t, &ok, GS_EMBED_SUM, out, dim, 1), GS_ERR_INVALID_ARG);
  assert_memory_equal(w, copy, rows * dim * sizeof(float));
  /* Empty batch and empty bags are fine. */
  int64_t zero[3] = {0, 0, 0};
  gs_embed_bags empty = {2, zero, NULL, 0, 0};
  for (size_t i = 0; i < 2 * dim; i++) out[i] = 5;
  assert_int_equal(gs_embed_forward(&t, &empty, GS_EMBED_MEAN, out, dim, 0), GS_OK);
  for (size_t i = 0; i < 2 * dim; i++) assert_true(out[i] == 0.0f);
  assert_int_equal(gs_embed_backward_update(&t, &empty, GS_EMBED_MEAN, dout, dim, 0, &opt,
                                            &work), GS_OK);
  assert_memory_equal(w, copy, rows * dim * sizeof(float));
  gs_embed_work_free(work);
  free(w);
  free(copy);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward),
      cmocka_unit_test(test_backward),
      cmocka_unit_test(test_dense),
      cmocka_unit_test(test_rows),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
