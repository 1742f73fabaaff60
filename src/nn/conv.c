/*
 * 2-D convolution by im2col and cblas_sgemm (Chellapilla, Puri & Simard
 * 2006, "High performance convolutional neural networks for document
 * processing", section 2.1).
 *
 * With K = cin*k*k and HW = oh*ow, one image is the product
 *   y[cout][HW] = W[cout][K] col[K][HW].
 * Late layers have small HW (7x7 = 49 in the ResNet's last stage), which
 * makes a poor GEMM, so images are processed in groups of g with
 * col[K][g*HW]: the product is then [cout][g*HW] and is scattered back to
 * NCHW. g is chosen so that g*HW is about NN_CONV_COLUMNS; with g = 1 the
 * GEMM writes (and reads) the NCHW tensors directly.
 *
 * Backward makes two passes over the groups: the first rebuilds col and
 * accumulates dW (then reports it final), the second computes
 * dcol = W^T dy and scatters it back with col2im, so the weight gradient is
 * ready before the input gradient is started.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

#ifndef NN_CONV_COLUMNS
#define NN_CONV_COLUMNS 512
#endif

static int conv_columns(void) {
  static int cols = 0;
  if (!cols) {
    const char *e = getenv("GRADSYNC_NN_CONV_COLUMNS"); /* for tuning */
    cols = e && atoi(e) > 0 ? atoi(e) : NN_CONV_COLUMNS;
  }
  return cols;
}

static int group_size(const nn_layer *l, int batch) {
  int hw = l->out.h * l->out.w;
  int g = (conv_columns() + hw - 1) / hw;
  if (g < 1) g = 1;
  if (g > batch) g = batch;
  return g;
}

static int is_pointwise(const nn_layer *l) {
  return l->k == 1 && l->stride == 1 && l->pad == 0;
}

void nn_conv_workspace(const nn_layer *l, int batch, size_t *col,
                       size_t *tmp) {
  size_t K = (size_t)l->in.c * (size_t)l->k * (size_t)l->k;
  size_t hw = (size_t)l->out.h * (size_t)l->out.w;
  size_t g = (size_t)group_size(l, batch);
  *col = K * g * hw;
  *tmp = g > 1 ? (size_t)l->out.c * g * hw : 0;
}

/* col[(c*k + ky)*k + kx][oy*ow + ox] = x[c][oy*s - p + ky][ox*s - p + kx]
 * (0 outside), rows ld floats apart. */
static void im2col(const nn_layer *l, const float *x, float *col, size_t ld) {
  const int C = l->in.c, H = l->in.h, W = l->in.w, k = l->k, s = l->stride,
            p = l->pad, OH = l->out.h, OW = l->out.w;
  for (int c = 0; c < C; c++) {
    const float *xc = x + (size_t)c * H * W;
    for (int ky = 0; ky < k; ky++) {
      for (int kx = 0; kx < k; kx++) {
        float *row = col + ((size_t)(c * k + ky) * k + kx) * ld;
        /* ox range whose ix = ox*s - p + kx is inside [0, W) */
        int lo = p - kx > 0 ? (p - kx + s - 1) / s : 0;
        int hi = (W - 1 + p - kx) >= 0 ? (W - 1 + p - kx) / s + 1 : 0;
        if (hi > OW) hi = OW;
        if (lo > hi) lo = hi;
        for (int oy = 0; oy < OH; oy++) {
          float *d = row + (size_t)oy * OW;
          int iy = oy * s - p + ky;
          if (iy < 0 || iy >= H) {
            memset(d, 0, (size_t)OW * sizeof(float));
            continue;
          }
          const float *src = xc + (size_t)iy * W + (kx - p);
          for (int ox = 0; ox < lo; ox++) d[ox] = 0.0f;
          if (s == 1) {
            memcpy(d + lo, src + lo, (size_t)(hi - lo) * sizeof(float));
          } else {
            for (int ox = lo; ox < hi; ox++) d[ox] = src[ox * s];
          }
          for (int ox = hi; ox < OW; ox++) d[ox] = 0.0f;
        }
      }
    }
  }
}

/* The adjoint of im2col: dx[c][iy][ix] += col[...] (dx zeroed by caller). */
static void col2im(const nn_layer *l, const float *col, size_t ld, float *dx) {
  const int C = l->in.c, H = l->in.h, W = l->in.w, k = l->k, s = l->stride,
            p = l->pad, OH = l->out.h, OW = l->out.w;
  for (int c = 0; c < C; c++) {
    float *xc = dx + (size_t)c * H * W;
    for (int ky = 0; ky < k; ky++) {
      for (int kx = 0; kx < k; kx++) {
        const float *row = col + ((size_t)(c * k + ky) * k + kx) * ld;
        int lo = p - kx > 0 ? (p - kx + s - 1) / s : 0;
        int hi = (W - 1 + p - kx) >= 0 ? (W - 1 + p - kx) / s + 1 : 0;
        if (hi > OW) hi = OW;
        if (lo > hi) lo = hi;
        for (int oy = 0; oy < OH; oy++) {
          int iy = oy * s - p + ky;
          if (iy < 0 || iy >= H) continue;
          const float *d = row + (size_t)oy * OW;
          float *dst = xc + (size_t)iy * W + (kx - p);
          if (s == 1) {
            for (int ox = lo; ox < hi; ox++) dst[ox] += d[ox];
          } else {
            for (int ox = lo; ox < hi; ox++) dst[ox * s] += d[ox];
          }
        }
      }
    }
  }
}

void nn_conv_forward(gs_nn_net *net, nn_layer *l, const float *x, int batch) {
  const int Cout = l->out.c, K = l->in.c * l->k * l->k;
  const int HW = l->out.h * l->out.w;
  const int g = group_size(l, batch);
  for (int b0 = 0; b0 < batch; b0 += g) {
    int gn = GS_MIN(g, batch - b0);
    int N = gn * HW;
    const float *colp = net->col;
    if (gn == 1 && is_pointwise(l)) {
      colp = x + (size_t)b0 * l->in_size;
    } else {
      for (int j = 0; j < gn; j++)
        im2col(l, x + (size_t)(b0 + j) * l->in_size, net->col + (size_t)j * HW,
               (size_t)N);
    }
    float *out = gn == 1 ? l->y + (size_t)b0 * l->out_size : net->gemm_tmp;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Cout, N, K, 1.0f,
                l->w, K, colp, N, 0.0f, out, N);
    if (gn > 1) {
      for (int j = 0; j < gn; j++)
        for (int c = 0; c < Cout; c++)
          memcpy(l->y + (size_t)(b0 + j) * l->out_size + (size_t)c * HW,
                 out + (size_t)c * N + (size_t)j * HW, (size_t)HW * sizeof(float));
    }
  }
  if (l->b) {
    for (int n = 0; n < batch; n++)
      for (int c = 0; c < Cout; c++) {
        float *y = l->y + (size_t)n * l->out_size + (size_t)c * HW;
        const float bc = l->b[c];
        for (int i = 0; i < HW; i++) y[i] += bc;
      }
  }
}

/* dy of group [b0, b0 + gn) as a [Cout][gn*HW] matrix: in place when gn = 1,
 * else gathered into the net's gemm_tmp. */
static const float *group_dy(gs_nn_net *net, const nn_layer *l,
                             const float *dy, int b0, int gn) {
  const int Cout = l->out.c, HW = l->out.h * l->out.w, N = gn * HW;
  if (gn == 1) return dy + (size_t)b0 * l->out_size;
  for (int j = 0; j < gn; j++)
    for (int c = 0; c < Cout; c++)
      memcpy(net->gemm_tmp + (size_t)c * N + (size_t)j * HW,
             dy + (size_t)(b0 + j) * l->out_size + (size_t)c * HW,
             (size_t)HW * sizeof(float));
  return net->gemm_tmp;
}

void nn_conv_backward(gs_nn_net *net, nn_layer *l, const float *x,
                      const float *dy, float *dx, int batch) {
  const int Cout = l->out.c, K = l->in.c * l->k * l->k;
  const int HW = l->out.h * l->out.w;
  const int g = group_size(l, batch);
  if (l->db) {
    for (int c = 0; c < Cout; c++) {
      float acc = 0.0f;
      for (int n = 0; n < batch; n++) {
        const float *d = dy + (size_t)n * l->out_size + (size_t)c * HW;
        for (int i = 0; i < HW; i++) acc += d[i];
      }
      l->db[c] = acc;
    }
    nn_grad_ready(net, l->param0 + 1);
  }
  for (int b0 = 0; b0 < batch; b0 += g) {
    int gn = GS_MIN(g, batch - b0);
    int N = gn * HW;
    const float *colp = net->col;
    if (gn == 1 && is_pointwise(l)) {
      colp = x + (size_t)b0 * l->in_size;
    } else {
      for (int j = 0; j < gn; j++)
        im2col(l, x + (size_t)(b0 + j) * l->in_size, net->col + (size_t)j * HW,
               (size_t)N);
    }
    const float *dyg = group_dy(net, l, dy, b0, gn);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Cout, K, N, 1.0f, dyg,
                N, colp, N, b0 == 0 ? 0.0f : 1.0f, l->dw, K);
  }
  nn_grad_ready(net, l->param0);
  if (!dx) return;
  for (int b0 = 0; b0 < batch; b0 += g) {
    int gn = GS_MIN(g, batch - b0);
    int N = gn * HW;
    const float *dyg = group_dy(net, l, dy, b0, gn);
    if (gn == 1 && is_pointwise(l)) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, Cout, 1.0f,
                  l->w, K, dyg, N, 0.0f, dx + (size_t)b0 * l->in_size, N);
      continue;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, Cout, 1.0f, l->w,
                K, dyg, N, 0.0f, net->col, N);
    for (int j = 0; j < gn; j++) {
      float *d = dx + (size_t)(b0 + j) * l->in_size;
      memset(d, 0, l->in_size * sizeof(float));
      col2im(l, net->col + (size_t)j * HW, (size_t)N, d);
    }
  }
}
