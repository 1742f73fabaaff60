/*
 * Internals of K-FAC: the per-layer kernels (factors, damping, inverses,
 * preconditioning, KL clip; factors.c and inverse.c) and the placements
 * (placement.c). Pure functions on caller-owned buffers, no communication,
 * so the tests drive them directly. Matrices are row-major and dense;
 * symmetric ones are stored in full unless a name says "triangle".
 */
#ifndef GS_KFAC_INTERNAL_H
#define GS_KFAC_INTERNAL_H

#include <stddef.h>

#include "gs_internal.h"
#include "gradsync/kfac.h"

/* ---- Factors (factors.c) ----------------------------------------------------
 * As kfac-pytorch builds them (its ComputeA / ComputeG with batch-averaged
 * losses), for a layer whose weight is [d_out][d_in] (+1 bias column):
 *   linear  A = (1/B) sum_b a_b a_b^T,  a_b = [x_b; 1]
 *           G = B sum_b g_b g_b^T       (g = dL/dy of the batch-mean loss)
 *   conv    a = im2col patch (+1), one per image b and output position p,
 *           A = 1/(B S) sum_{b,p} (a/S)(a/S)^T   (S = spatial positions)
 *           G = 1/(B S) sum_{b,p} (g B S)(g B S)^T = B S sum g g^T
 * The batch scaling makes G the per-sample statistic again, so that N
 * ranks of batch b averaging their factors equal one rank of batch N b. */

/* A of a linear layer from x[batch][d_in] into A[dA][dA], dA = d_in + bias. */
void kfac_factor_a_linear(const float *x, int batch, int d_in, int bias,
                          float *A);
/* Adds one image's patches col[d_in][S] to A (zeroed by the caller before
 * the first image) with weight 1 / (B S^3); bias adds the ones column. */
void kfac_factor_a_conv_add(const float *col, int d_in, int S, int batch,
                            int bias, float *A);
/* G of a linear layer from dy[batch][d_out]. */
void kfac_factor_g_linear(const float *dy, int batch, int d_out, float *G);
/* G of a conv layer from dy[batch][d_out][S]. */
void kfac_factor_g_conv(const float *dy, int batch, int d_out, int S,
                        float *G);
/* Copies the upper triangle (written by ssyrk) to the lower one. */
void kfac_symmetrize(float *M, int d);
/* F = xi F + (1 - xi) Fnew over n floats (first: F = Fnew). */
void kfac_running_average(float *F, const float *Fnew, size_t n, float xi,
                          int first);
/* The upper triangle, row by row: d (d + 1) / 2 floats. */
static inline size_t kfac_triangle_size(int d) {
  return (size_t)d * ((size_t)d + 1) / 2;
}
void kfac_triangle_pack(const float *M, int d, float *tri);
void kfac_triangle_unpack(const float *tri, int d, float *M);

/* ---- Damping, inverses, preconditioning (inverse.c) ------------------------
 * Factored Tikhonov damping (Martens & Grosse 2015, section 6.3):
 *   pi = sqrt((tr A / dA) / (tr G / dG)),
 *   A + pi sqrt(gamma) I  and  G + sqrt(gamma) / pi I;
 * pi is 1 when either trace is not positive. */
void kfac_damping_split(const float *A, int dA, const float *G, int dG,
                        float gamma, float *delta_a, float *delta_g);
/* inv = (F + delta I)^-1 of the symmetric F[d][d]. work holds at least
 * kfac_inverse_work(d) floats. GS_ERR_INTERNAL (with `what` named) if F +
 * delta I is not positive definite (chol) or ssyevd fails (eig). */
size_t kfac_inverse_work(int d, gs_kfac_inverse method);
gs_status kfac_invert(const float *F, int d, float delta,
                      gs_kfac_inverse method, float *inv, float *work,
                      const char *what);
/* v = Ginv grad Ainv for grad[dG][dA]; tmp holds dG * dA floats. */
void kfac_precondition(const float *Ginv, int dG, const float *grad, int dA,
                       const float *Ainv, float *v, float *tmp);
/* KL clip (kfac-pytorch): nu = min(1, sqrt(kappa / |sum lr^2 <v, g>|)),
 * from vg = sum over layers of <v, g>; 1 when kappa <= 0 or vg == 0. */
double kfac_kl_nu(double vg, double lr, double kappa);
double kfac_dot(const float *a, const float *b, size_t n);

/* ---- Placements (placement.c) ---------------------------------------------- */

/* owner[i] = i mod ranks. */
void kfac_place_round_robin(size_t n, int ranks, int *owner);
/* Longest processing time first (Graham 1969): items by decreasing cost,
 * each to the rank with the smallest load so far (ties: lowest rank). With
 * local_cost non-NULL, an item whose cost is <= local_cost[i] (the
 * broadcast its result would need) is done by every rank (owner -1), and
 * its cost is added to every rank's load. load (may be NULL) receives each
 * rank's total. */
void kfac_place_lpt(const double *cost, const double *local_cost, size_t n,
                    int ranks, int *owner, double *load);

#endif /* GS_KFAC_INTERNAL_H */
