/*
 * "powersgd:R": PowerSGD (Vogels, Karimireddy & Jaggi, NeurIPS 2019,
 * Algorithm 1) with rank R. The tensor p = g + e is viewed as an
 * rows x cols matrix M (opts.rows, or ceil(sqrt(n)) rows; zero-padded), and
 * one step of subspace iteration from the warm-started Q (cols x R) gives a
 * rank-R approximation P Q^T:
 *   round 0  P = M Q                       -> all-reduce P (rows*R floats)
 *   round 1  P = orthonormal(P)            (LAPACKE sgeqrf + sorgqr)
 *            Q_local = M^T P               -> all-reduce Q (cols*R floats)
 *            e = M - P Q_local^T           (error feedback)
 *   decompress: out += P Q^T with the reduced Q, which is also the next
 *            step's warm start.
 * Both payloads are linear in M, so the sums over ranks are exact: the sum of
 * the ranks' P Q_local^T is P (sum Q_local)^T. Q starts from normal values of
 * a stream seeded by opts.seed, the same on every rank (as PyTorch's
 * PowerSGDState's random_seed), and rank min(R, rows, cols).
 */
#include <math.h>
#include <string.h>

#include <cblas.h>
#include <lapacke.h>

#include "compress_internal.h"

typedef struct {
  size_t rows, cols, r;
  float *m;      /* rows x cols: M, later M - P Q^T or P Q^T */
  float *p;      /* rows x r */
  float *q;      /* cols x r, the warm start */
  float *tau;    /* r */
} psgd_priv;

static void psgd_shape(size_t n, size_t want_rows, double rank, size_t *rows,
                       size_t *cols, size_t *r) {
  if (n == 0) {
    *rows = *cols = *r = 0;
    return;
  }
  size_t R = want_rows ? want_rows : (size_t)ceil(sqrt((double)n));
  if (R > n) R = n;
  const size_t C = (n + R - 1) / R;
  size_t k = (size_t)rank;
  if (k > R) k = R;
  if (k > C) k = C;
  *rows = R;
  *cols = C;
  *r = k;
}

static size_t psgd_bytes(const gs_compressor *c, const gs_compress_state *st,
                         size_t n, int round, double d) {
  (void)d;
  size_t R, C, r;
  psgd_shape(n, st ? st->opts.rows : 0, c->param, &R, &C, &r);
  return 4 * r * (round == 0 ? R : C);
}

static gs_status psgd_init(gs_compress_state *st) {
  psgd_priv *w = gs_calloc(1, sizeof *w);
  if (w == NULL) return GS_ERR_NOMEM;
  st->priv = w;
  if (st->opts.rows > st->n && st->n > 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: rows = %zu exceeds n = %zu", st->c->spec,
                    st->opts.rows, st->n);
  psgd_shape(st->n, st->opts.rows, st->c->param, &w->rows, &w->cols, &w->r);
  const size_t R = w->rows, C = w->cols, r = w->r;
  /* gs_malloc(0) is a valid pointer: an empty tensor needs no special case. */
  w->m = gs_malloc(R * C * sizeof(float));
  w->p = gs_malloc(R * r * sizeof(float));
  w->q = gs_malloc(C * r * sizeof(float));
  w->tau = gs_malloc(r * sizeof(float));
  if (st->opts.error_feedback)
    st->residual = gs_calloc(st->n ? st->n : 1, sizeof(float));
  if (w->m == NULL || w->p == NULL || w->q == NULL || w->tau == NULL ||
      (st->opts.error_feedback && st->residual == NULL))
    return GS_ERR_NOMEM;
  uint64_t rng = st->opts.seed ^ 0x706f77657273ULL; /* "powers" */
  for (size_t i = 0; i < C * r; i++) {
    const float u = gs__rand_unit(&rng) + 1e-7f, v = gs__rand_unit(&rng);
    w->q[i] = sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
  }
  return GS_OK;
}

static void psgd_fini(gs_compress_state *st) {
  psgd_priv *w = st->priv;
  if (w == NULL) return;
  gs_free(w->m);
  gs_free(w->p);
  gs_free(w->q);
  gs_free(w->tau);
  gs_free(st->residual);
  st->residual = NULL;
  gs_free(w);
}

static gs_status psgd_compress(gs_compress_state *st, const float *g,
                               void *payload, size_t cap, size_t *bytes) {
  (void)cap;
  psgd_priv *w = st->priv;
  const size_t n = st->n, R = w->rows, C = w->cols, r = w->r;
  if (st->residual != NULL)
    for (size_t i = 0; i < n; i++) w->m[i] = g[i] + st->residual[i];
  else
    memcpy(w->m, g, n * sizeof *g);
  memset(w->m + n, 0, (R * C - n) * sizeof(float));
  if (r > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)R, (int)r, (int)C,
                1.0f, w->m, (int)C, w->q, (int)r, 0.0f, payload, (int)r);
  *bytes = 4 * R * r;
  return GS_OK;
}

static gs_status psgd_round(gs_compress_state *st, int round, const void *in,
                            size_t in_bytes, void *out, size_t cap, size_t *bytes) {
  (void)round, (void)cap;
  psgd_priv *w = st->priv;
  const size_t n = st->n, R = w->rows, C = w->cols, r = w->r;
  memcpy(w->p, in, in_bytes);
  if (r > 0) {
    lapack_int info = LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, (lapack_int)R, (lapack_int)r,
                                     w->p, (lapack_int)r, w->tau);
    if (info == 0)
      info = LAPACKE_sorgqr(LAPACK_ROW_MAJOR, (lapack_int)R, (lapack_int)r,
                            (lapack_int)r, w->p, (lapack_int)r, w->tau);
    if (info != 0)
      return gs_error(GS_ERR_INTERNAL,
                      "compressor %s: QR of P (%zu x %zu) failed, LAPACK info %d",
                      st->c->spec, R, r, (int)info);
    float *qloc = out;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)C, (int)r, (int)R,
                1.0f, w->m, (int)C, w->p, (int)r, 0.0f, qloc, (int)r);
    if (st->residual != NULL) {
      /* M <- M - P Q_local^T: the part of p this rank did not send. */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)R, (int)C, (int)r,
                  -1.0f, w->p, (int)r, qloc, (int)r, 1.0f, w->m, (int)C);
    }
  }
  if (st->residual != NULL) memcpy(st->residual, w->m, n * sizeof(float));
  *bytes = 4 * C * r;
  return GS_OK;
}

static gs_status psgd_decompress_add(gs_compress_state *st, const void *payload,
                                     size_t bytes, float *out, float alpha) {
  psgd_priv *w = st->priv;
  const size_t n = st->n, R = w->rows, C = w->cols, r = w->r;
  if (bytes != 4 * C * r)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: payload of %zu bytes, expected the reduced Q "
                    "(%zu x %zu floats, %zu bytes)", st->c->spec, bytes, C, r,
                    4 * C * r);
  if (r == 0) return GS_OK;
  memcpy(w->q, payload, bytes);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)R, (int)C, (int)r, 1.0f,
              w->p, (int)r, w->q, (int)r, 0.0f, w->m, (int)C);
  for (size_t i = 0; i < n; i++) out[i] += alpha * w->m[i];
  return GS_OK;
}

const gs_compress_kind gs__kind_powersgd = {
    .name = "powersgd", .param = GS_PARAM_INT, .pmin = 1, .pmax = 1024,
    .exchange = GS_EXCHANGE_DENSE, .dense_dtype = GS_F32, .rounds = 2,
    .own_ef = 1, .cbytes = 40, .dbytes = 12, .payload_bytes = psgd_bytes,
    .init = psgd_init, .fini = psgd_fini, .compress = psgd_compress,
    .round = psgd_round, .decompress_add = psgd_decompress_add};
