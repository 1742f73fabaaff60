/*
 * K-FAC's kernels against explicit computations in double precision: the
 * preconditioned gradient of a small random layer equals the solve of the
 * damped Kronecker system ((A + dA I) (x) (G + dG I)) vec(v) = vec(grad)
 * for both inverse methods; the damping split; the KL clip; the factors of
 * linear and conv layers against their definitions; triangles; and the
 * placements (every factor exactly once, LPT's balance, the local rule).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kfac_internal.h"

static uint64_t rng = 12345;
static double urand(void) { /* in [-1, 1) */
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* A random symmetric positive semi-definite d x d matrix X^T X / m. */
static void random_spd(float *M, int d, int m) {
  double *X = calloc((size_t)d * m, sizeof(double));
  for (int i = 0; i < d * m; i++) X[i] = urand();
  for (int i = 0; i < d; i++)
    for (int j = 0; j < d; j++) {
      double s = 0;
      for (int r = 0; r < m; r++) s += X[r * d + i] * X[r * d + j];
      M[i * d + j] = (float)(s / m);
    }
  free(X);
}

/* Gaussian elimination with partial pivoting on an n x n system. */
static void solve(double *K, double *b, int n) {
  for (int c = 0; c < n; c++) {
    int p = c;
    for (int r = c + 1; r < n; r++)
      if (fabs(K[r * n + c]) > fabs(K[p * n + c])) p = r;
    for (int j = 0; j < n; j++) {
      double t = K[c * n + j];
      K[c * n + j] = K[p * n + j];
      K[p * n + j] = t;
    }
    double t = b[c];
    b[c] = b[p];
    b[p] = t;
    for (int r = c + 1; r < n; r++) {
      double f = K[r * n + c] / K[c * n + c];
      for (int j = c; j < n; j++) K[r * n + j] -= f * K[c * n + j];
      b[r] -= f * b[c];
    }
  }
  for (int c = n - 1; c >= 0; c--) {
    for (int j = c + 1; j < n; j++) b[c] -= K[c * n + j] * b[j];
    b[c] /= K[c * n + c];
  }
}

static void check_kronecker(int dA, int dG, float gamma, gs_kfac_inverse m,
                            int rank_deficient) {
  float *A = calloc((size_t)dA * dA, 4), *G = calloc((size_t)dG * dG, 4);
  /* fewer samples than the dimension: singular factors, as small batches give */
  random_spd(A, dA, rank_deficient ? dA / 2 + 1 : 3 * dA);
  random_spd(G, dG, rank_deficient ? dG / 2 + 1 : 3 * dG);
  for (int i = 0; i < dG * dG; i++) G[i] *= 7.0f; /* unequal scales: pi != 1 */
  float *grad = calloc((size_t)dG * dA, 4), *v = calloc((size_t)dG * dA, 4),
        *tmp = calloc((size_t)dG * dA, 4);
  for (int i = 0; i < dG * dA; i++) grad[i] = (float)urand();
  float da, dg;
  kfac_damping_split(A, dA, G, dG, gamma, &da, &dg);
  assert_true(fabs((double)da * dg - gamma) <= 1e-6 * gamma);
  int dmax = dA > dG ? dA : dG;
  float *work = calloc(kfac_inverse_work(dmax, m), 4);
  float *Ai = calloc((size_t)dA * dA, 4), *Gi = calloc((size_t)dG * dG, 4);
  assert_int_equal(kfac_invert(A, dA, da, m, Ai, work, "A"), GS_OK);
  assert_int_equal(kfac_invert(G, dG, dg, m, Gi, work, "G"), GS_OK);
  kfac_precondition(Gi, dG, grad, dA, Ai, v, tmp);
  /* vec stacks columns: vec(M)[j*dG + i] = M[i][j]; (A (x) G) vec(V) =
   * vec(G V A) for symmetric A, so vec(v) solves that system. */
  int n = dA * dG;
  double *K = calloc((size_t)n * n, sizeof(double)), *b = calloc((size_t)n, sizeof(double));
  for (int a1 = 0; a1 < dA; a1++)
    for (int g1 = 0; g1 < dG; g1++)
      for (int a2 = 0; a2 < dA; a2++)
        for (int g2 = 0; g2 < dG; g2++) {
          double ka = A[a1 * dA + a2] + (a1 == a2 ? da : 0.0);
          double kg = G[g1 * dG + g2] + (g1 == g2 ? dg : 0.0);
          K[(size_t)(a1 * dG + g1) * n + (a2 * dG + g2)] = ka * kg;
        }
  for (int j = 0; j < dA; j++)
    for (int i = 0; i < dG; i++) b[j * dG + i] = grad[i * dA + j];
  solve(K, b, n);
  double maxv = 0, err = 0;
  for (int j = 0; j < dA; j++)
    for (int i = 0; i < dG; i++) {
      maxv = fmax(maxv, fabs(b[j * dG + i]));
      err = fmax(err, fabs(b[j * dG + i] - v[i * dA + j]));
    }
  assert_true(maxv > 0);
  if (!(err <= 2e-3 * maxv)) fail_msg("dA %d dG %d %s: error %g of %g", dA, dG,
                                      m == GS_KFAC_INV_CHOL ? "chol" : "eig", err, maxv);
  free(A); free(G); free(grad); free(v); free(tmp); free(work); free(Ai); free(Gi);
  free(K); free(b);
}

static void test_kronecker_identity(void **s) {
  (void)s;
  for (int m = 0; m < GS_KFAC_INV_COUNT; m++) {
    check_kronecker(5, 3, 0.01f, (gs_kfac_inverse)m, 0);
    check_kronecker(9, 4, 0.003f, (gs_kfac_inverse)m, 0);
    check_kronecker(12, 7, 0.03f, (gs_kfac_inverse)m, 1);
    check_kronecker(1, 6, 0.1f, (gs_kfac_inverse)m, 0);
  }
}

static void test_damping(void **s) {
  (void)s;
  /* tr A / dA = 4, tr G / dG = 1: pi = 2 */
  float A[4] = {4, 1, 1, 4}, G[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  float da, dg;
  kfac_damping_split(A, 2, G, 3, 0.01f, &da, &dg);
  assert_true(fabs(da - 0.2f) < 1e-6 && fabs(dg - 0.05f) < 1e-6);
  /* a zero factor: pi = 1 */
  float Z[4] = {0};
  kfac_damping_split(Z, 2, G, 3, 0.04f, &da, &dg);
  assert_true(fabs(da - 0.2f) < 1e-6 && fabs(dg - 0.2f) < 1e-6);
  /* a huge damping makes the preconditioner gamma^-1 I: v = grad / gamma */
  float Ai[4], Gi[9], work[64], grad[6] = {1, -2, 3, 0.5f, 0, -1}, v[6], tmp[6];
  kfac_damping_split(A, 2, G, 3, 1e8f, &da, &dg);
  assert_int_equal(kfac_invert(A, 2, da, GS_KFAC_INV_CHOL, Ai, work, "A"), GS_OK);
  assert_int_equal(kfac_invert(G, 3, dg, GS_KFAC_INV_CHOL, Gi, work, "G"), GS_OK);
  kfac_precondition(Gi, 3, grad, 2, Ai, v, tmp);
  for (int i = 0; i < 6; i++) assert_true(fabs(v[i] * 1e8 - grad[i]) < 5e-3);
  /* no damping on an indefinite matrix: a clear error, not garbage */
  float bad[4] = {1, 2, 2, 1};
  assert_int_equal(kfac_invert(bad, 2, 0.0f, GS_KFAC_INV_CHOL, Ai, work, "A of layer 'x'"),
                   GS_ERR_INTERNAL);
  assert_non_null(strstr(gs_last_error(), "layer 'x'"));
}

static void test_kl_clip(void **s) {
  (void)s;
  /* |vg| lr^2 = 4 * 0.01 = 0.04; nu = sqrt(0.001 / 0.04) */
  assert_true(fabs(kfac_kl_nu(4.0, 0.1, 0.001) - sqrt(0.025)) < 1e-12);
  assert_true(fabs(kfac_kl_nu(-4.0, 0.1, 0.001) - sqrt(0.025)) < 1e-12);
  assert_true(kfac_kl_nu(0.001, 0.1, 0.001) == 1.0); /* small step: no clip */
  assert_true(kfac_kl_nu(4.0, 0.1, 0.0) == 1.0);     /* off */
  assert_true(kfac_kl_nu(0.0, 0.1, 0.001) == 1.0);
  assert_true(kfac_kl_nu(NAN, 0.1, 0.001) == 1.0);
}

static void test_factors_linear(void **s) {
  (void)s;
  const int B = 5, din = 4, dout = 3, dA = din + 1;
  float x[20], dy[15], A[25], G[9];
  for (int i = 0; i < 20; i++) x[i] = (float)urand();
  for (int i = 0; i < 15; i++) dy[i] = (float)urand();
  kfac_factor_a_linear(x, B, din, 1, A);
  kfac_factor_g_linear(dy, B, dout, G);
  for (int i = 0; i < dA; i++)
    for (int j = 0; j < dA; j++) {
      double e = 0;
      for (int b = 0; b < B; b++)
        e += (i < din ? x[b * din + i] : 1.0) * (j < din ? x[b * din + j] : 1.0);
      assert_true(fabs(A[i * dA + j] - e / B) < 1e-5);
    }
  for (int i = 0; i < dout; i++)
    for (int j = 0; j < dout; j++) {
      double e = 0;
      for (int b = 0; b < B; b++) e += dy[b * dout + i] * dy[b * dout + j];
      assert_true(fabs(G[i * dout + j] - e * B) < 1e-4);
    }
}

static void test_factors_conv(void **s) {
  (void)s;
  const int B = 2, din = 3, S = 4, dout = 2, dA = din + 1;
  float col[2][12], dy[16], A[16] = {0}, G[4];
  for (int b = 0; b < B; b++)
    for (int i = 0; i < 12; i++) col[b][i] = (float)urand();
  for (int i = 0; i < 16; i++) dy[i] = (float)urand();
  for (int b = 0; b < B; b++) kfac_factor_a_conv_add(col[b], din, S, B, 1, A);
  kfac_symmetrize(A, dA);
  kfac_factor_g_conv(dy, B, dout, S, G);
  /* kfac-pytorch: rows a/S (+ the ones column, also / S), cov over B*S rows */
  for (int i = 0; i < dA; i++)
    for (int j = 0; j < dA; j++) {
      double e = 0;
      for (int b = 0; b < B; b++)
        for (int p = 0; p < S; p++) {
          double ai = (i < din ? col[b][i * S + p] : 1.0) / S;
          double aj = (j < din ? col[b][j * S + p] : 1.0) / S;
          e += ai * aj;
        }
      assert_true(fabs(A[i * dA + j] - e / (B * S)) < 1e-6);
    }
  for (int i = 0; i < dout; i++)
    for (int j = 0; j < dout; j++) {
      double e = 0;
      for (int b = 0; b < B; b++)
        for (int p = 0; p < S; p++) {
          double gi = dy[(b * dout + i) * S + p] * B * S;
          double gj = dy[(b * dout + j) * S + p] * B * S;
          e += gi * gj;
        }
      assert_true(fabs(G[i * dout + j] - e / (B * S)) < 1e-3);
    }
}

static void test_triangle_and_average(void **s) {
  (void)s;
  float M[16], R[16], tri[10];
  random_spd(M, 4, 6);
  assert_int_equal(kfac_triangle_size(4), 10);
  kfac_triangle_pack(M, 4, tri);
  memset(R, 0, sizeof R);
  kfac_triangle_unpack(tri, 4, R);
  assert_memory_equal(M, R, sizeof M);
  float F[3] = {1, 2, 3}, N[3] = {3, 2, 1};
  kfac_running_average(F, N, 3, 0.95f, 1);
  assert_memory_equal(F, N, sizeof F);
  float H[3] = {1, 1, 1};
  kfac_running_average(H, N, 3, 0.95f, 0);
  assert_true(fabs(H[0] - (0.95 + 0.05 * 3)) < 1e-6);
}

static void test_placement(void **s) {
  (void)s;
  for (int ranks = 1; ranks <= 8; ranks++) {
    for (size_t n = 1; n <= 40; n += 7) {
      double cost[40], local[40], load[8];
      int owner[40];
      double total = 0, maxc = 0;
      for (size_t i = 0; i < n; i++) {
        cost[i] = pow(fabs(urand()) * 300 + 1, 3);
        total += cost[i];
        maxc = fmax(maxc, cost[i]);
      }
      kfac_place_lpt(cost, NULL, n, ranks, owner, load);
      double sum = 0, mx = 0;
      for (size_t i = 0; i < n; i++) assert_true(owner[i] >= 0 && owner[i] < ranks);
      /* each factor exactly once: the loads add up to the total */
      for (int r = 0; r < ranks; r++) {
        double lr = 0;
        for (size_t i = 0; i < n; i++)
          if (owner[i] == r) lr += cost[i];
        assert_true(fabs(lr - load[r]) <= 1e-9 * total);
        sum += lr;
        mx = fmax(mx, lr);
      }
      assert_true(fabs(sum - total) <= 1e-9 * total);
      /* Graham: LPT's makespan is within 4/3 of optimal, and the optimum
       * is at least max(total / ranks, largest item) */
      double lower = fmax(total / ranks, maxc);
      assert_true(mx <= 4.0 / 3.0 * lower + 1e-9 * total);
      /* the local rule: items cheaper than their broadcast stay local */
      for (size_t i = 0; i < n; i++) local[i] = i % 3 == 0 ? cost[i] * 2 : cost[i] / 2;
      kfac_place_lpt(cost, local, n, ranks, owner, NULL);
      for (size_t i = 0; i < n; i++)
        assert_int_equal(owner[i] == -1, i % 3 == 0);
    }
  }
  /* a hand case: 7,5,4,3,3 on 2 ranks -> LPT {7,3,?}... loads 11 and 11 */
  double c[5] = {3, 7, 4, 5, 3}, ld[2];
  int o[5];
  kfac_place_lpt(c, NULL, 5, 2, o, ld);
  assert_int_equal(o[1], 0); /* the largest goes first, to rank 0 */
  assert_int_equal(o[3], 1);
  assert_true(fmax(ld[0], ld[1]) <= 12.0);
  int rr[7];
  kfac_place_round_robin(7, 3, rr);
  for (int i = 0; i < 7; i++) assert_int_equal(rr[i], i % 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kronecker_identity),
      cmocka_unit_test(test_damping),
      cmocka_unit_test(test_kl_clip),
      cmocka_unit_test(test_factors_linear),
      cmocka_unit_test(test_factors_conv),
      cmocka_unit_test(test_triangle_and_average),
      cmocka_unit_test(test_placement),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
