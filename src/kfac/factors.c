/*
 * Kronecker factors: A from a layer's inputs, G from its output gradients,
 * with OpenBLAS ssyrk (the symmetric rank-k update writes one triangle, half
 * the flops of a GEMM), running averages and upper-triangle packing.
 */
#include <cblas.h>
#include <string.h>

#include "kfac_internal.h"

void kfac_symmetrize(float *M, int d) {
  for (int i = 0; i < d; i++)
    for (int j = i + 1; j < d; j++) M[(size_t)j * d + i] = M[(size_t)i * d + j];
}

void kfac_factor_a_linear(const float *x, int batch, int d_in, int bias,
                          float *A) {
  const int dA = d_in + (bias ? 1 : 0);
  const float s = 1.0f / (float)batch;
  cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, d_in, batch, s, x, d_in,
              0.0f, A, dA);
  if (bias) {
    for (int i = 0; i < d_in; i++) {
      double sum = 0.0;
      for (int b = 0; b < batch; b++) sum += x[(size_t)b * d_in + i];
      A[(size_t)i * dA + d_in] = (float)(sum * s);
    }
    A[(size_t)d_in * dA + d_in] = 1.0f;
  }
  kfac_symmetrize(A, dA);
}

void kfac_factor_a_conv_add(const float *col, int d_in, int S, int batch,
                            int bias, float *A) {
  const int dA = d_in + (bias ? 1 : 0);
  const double s3 = (double)S * S * S;
  const float alpha = (float)(1.0 / ((double)batch * s3));
  cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, d_in, S, alpha, col, S,
              1.0f, A, dA);
  if (bias) {
    for (int i = 0; i < d_in; i++) {
      double sum = 0.0;
      const float *r = col + (size_t)i * S;
      for (int p = 0; p < S; p++) sum += r[p];
      A[(size_t)i * dA + d_in] += (float)(sum * alpha);
    }
    A[(size_t)d_in * dA + d_in] += alpha * (float)S;
  }
}

void kfac_factor_g_linear(const float *dy, int batch, int d_out, float *G) {
  cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, d_out, batch,
              (float)batch, dy, d_out, 0.0f, G, d_out);
  kfac_symmetrize(G, d_out);
}

void kfac_factor_g_conv(const float *dy, int batch, int d_out, int S,
                        float *G) {
  const float alpha = (float)batch * (float)S;
  for (int b = 0; b < batch; b++)
    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, d_out, S, alpha,
                dy + (size_t)b * d_out * S, S, b ? 1.0f : 0.0f, G, d_out);
  kfac_symmetrize(G, d_out);
}

void kfac_running_average(float *F, const float *Fnew, size_t n, float xi,
                          int first) {
  if (first) {
    memcpy(F, Fnew, n * sizeof(float));
    return;
  }
  const float a = 1.0f - xi;
  for (size_t i = 0; i < n; i++) F[i] = xi * F[i] + a * Fnew[i];
}

void kfac_triangle_pack(const float *M, int d, float *tri) {
  for (int i = 0; i < d; i++) {
    size_t n = (size_t)(d - i);
    memcpy(tri, M + (size_t)i * d + i, n * sizeof(float));
    tri += n;
  }
}

void kfac_triangle_unpack(const float *tri, int d, float *M) {
  for (int i = 0; i < d; i++) {
    size_t n = (size_t)(d - i);
    memcpy(M + (size_t)i * d + i, tri, n * sizeof(float));
    tri += n;
  }
  kfac_symmetrize(M, d);
}
