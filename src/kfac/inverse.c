/*
 * Damped inverses of the Kronecker factors (LAPACKE spotrf + spotri, or
 * ssyevd), the preconditioned gradient v = G^-1 grad A^-1 (two ssymm), and
 * the KL clip.
 */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <string.h>

#include "kfac_internal.h"

static double trace(const float *M, int d) {
  double t = 0.0;
  for (int i = 0; i < d; i++) t += M[(size_t)i * d + i];
  return t;
}

void kfac_damping_split(const float *A, int dA, const float *G, int dG,
                        float gamma, float *delta_a, float *delta_g) {
  double ta = trace(A, dA) / dA, tg = trace(G, dG) / dG;
  double pi = (ta > 0.0 && tg > 0.0 && isfinite(ta) && isfinite(tg))
                  ? sqrt(ta / tg) : 1.0;
  double sg = sqrt((double)gamma);
  *delta_a = (float)(pi * sg);
  *delta_g = (float)(sg / pi);
}

size_t kfac_inverse_work(int d, gs_kfac_inverse method) {
  size_t n = (size_t)d * (size_t)d;
  return method == GS_KFAC_INV_EIG ? 2 * n + (size_t)d : n;
}

gs_status kfac_invert(const float *F, int d, float delta,
                      gs_kfac_inverse method, float *inv, float *work,
                      const char *what) {
  size_t n = (size_t)d * (size_t)d;
  if (method == GS_KFAC_INV_CHOL) {
    memcpy(inv, F, n * sizeof(float));
    for (int i = 0; i < d; i++) inv[(size_t)i * d + i] += delta;
    lapack_int info = LAPACKE_spotrf(LAPACK_ROW_MAJOR, 'U', d, inv, d);
    if (info == 0) info = LAPACKE_spotri(LAPACK_ROW_MAJOR, 'U', d, inv, d);
    if (info != 0)
      return gs_error(GS_ERR_INTERNAL,
                      "K-FAC: %s (%dx%d) plus damping %g is not positive "
                      "definite (LAPACK spotrf/spotri info %d): raise "
                      "--kfac-damping or use --kfac-inverse eig",
                      what, d, d, (double)delta, (int)info);
    kfac_symmetrize(inv, d);
    return GS_OK;
  }
  float *Q = work, *lam = work + n, *QD = work + n + d;
  memcpy(Q, F, n * sizeof(float));
  /* The workspace sized here, in integers: LAPACKE_ssyevd's query returns
   * it as a float, which above n = 2896 rounds 1 + 6n + 2n^2 down by one
   * (fc1 of the CNN, 3137: LAPACK refused, info -9). */
  size_t lwork = 1 + 6 * (size_t)d + 2 * (size_t)d * (size_t)d, liwork = 3 + 5 * (size_t)d;
  float *wk = gs_malloc(lwork * sizeof *wk);
  lapack_int *iwk = gs_malloc(liwork * sizeof *iwk);
  lapack_int info = -1000;
  if (wk != NULL && iwk != NULL)
    info = LAPACKE_ssyevd_work(LAPACK_ROW_MAJOR, 'V', 'U', d, Q, d, lam, wk,
                               (lapack_int)lwork, iwk, (lapack_int)liwork);
  gs_free(wk);
  gs_free(iwk);
  if (info == -1000)
    return gs_error(GS_ERR_NOMEM, "K-FAC: out of memory for the eigendecomposition of %s "
                    "(%dx%d)", what, d, d);
  if (info != 0)
    return gs_error(GS_ERR_INTERNAL,
                    "K-FAC: eigendecomposition of %s (%dx%d) failed (LAPACK "
                    "ssyevd info %d)", what, d, d, (int)info);
  /* Q's columns are eigenvectors; QD = Q diag(1 / (max(lambda, 0) + delta)) */
  for (int j = 0; j < d; j++) {
    float l = lam[j] > 0.0f ? lam[j] : 0.0f;
    lam[j] = 1.0f / (l + delta);
  }
  for (int i = 0; i < d; i++)
    for (int j = 0; j < d; j++)
      QD[(size_t)i * d + j] = Q[(size_t)i * d + j] * lam[j];
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d, d, d, 1.0f, QD, d, Q,
              d, 0.0f, inv, d);
  /* exactly symmetric, as the Cholesky path's result is */
  kfac_symmetrize(inv, d);
  return GS_OK;
}

void kfac_precondition(const float *Ginv, int dG, const float *grad, int dA,
                       const float *Ainv, float *v, float *tmp) {
  cblas_ssymm(CblasRowMajor, CblasLeft, CblasUpper, dG, dA, 1.0f, Ginv, dG,
              grad, dA, 0.0f, tmp, dA);
  cblas_ssymm(CblasRowMajor, CblasRight, CblasUpper, dG, dA, 1.0f, Ainv, dA,
              tmp, dA, 0.0f, v, dA);
}

double kfac_dot(const float *a, const float *b, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

double kfac_kl_nu(double vg, double lr, double kappa) {
  double s = fabs(vg * lr * lr);
  if (kappa <= 0.0 || s == 0.0 || !isfinite(s)) return 1.0;
  double nu = sqrt(kappa / s);
  return nu < 1.0 ? nu : 1.0;
}
