/*
 * 2-D convolution by im2col and cblas_sgemm (Chellapilla, Puri & Simard
 * 2006, "High performance convolutional neural networks for document
 * processing", section 2.1).
 *
 * With K = cin*k*k and HW = oh*ow, one image is the product
 *   y[cout][HW] = W[cout][K] col[K][HW].
 * Three shapes of work:
 * - Stride 1 with "same" padding (every 3x3 and 5x5 convolution of the
 *   models) and HW >= NN_CONV_COLUMNS: one image at a time, in chunks of
 *   output positions so that col[K][chunk] stays in L2 between im2col and
 *   the GEMM; the GEMM writes the NCHW output in place (ldc = HW).
 * - Small HW (7x7 = 49 in the ResNet's last stage) makes a poor GEMM, so g
 *   images share one: col[K][g*HW], output [cout][g*HW] scattered to NCHW.
 *   g is chosen so that g*HW is about NN_CONV_COLUMNS.
 * - Otherwise (stride 2, 1x1) g images as above, usually g = 1.
 * Bias, a fused ReLU and the following batch-norm's statistics are applied
 * or gathered while the output is still in cache.
 *
 * Backward: for stride-1 "same" layers with cout <= cin, same_backward
 * computes dW and dx from a single im2col of dy (see there). Otherwise two
 * passes over the images: the first rebuilds col from x and accumulates dW
 * (then reports it final), the second computes dcol = W^T dy and scatters
 * it back with col2im, so the weight gradient is ready before the input
 * gradient is started.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

#ifndef NN_CONV_COLUMNS
#define NN_CONV_COLUMNS 128
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

/* Output positions per chunk on the one-image "same" path: col[K][chunk]
 * near NN_CONV_CHUNK_FLOATS floats (256 KiB, a slice that stays in L2), at
 * least 128 columns, chunks of equal size. */
#ifndef NN_CONV_CHUNK_FLOATS
#define NN_CONV_CHUNK_FLOATS 65536
#endif

/* M is the GEMM's row count (output channels, or input channels for the
 * input gradient). OpenBLAS (0.3.17 on, SkylakeX-class kernels) sends
 * products with M*N*K <= 10^6 and 8, 16 or 32 rows to its small-matrix
 * kernels, which skip packing: measured ~105 GFLOP/s for 16x392x144 and
 * 32x98x288 against ~75-80 for the same shapes with twice the columns. So
 * narrow layers get chunks that stay under that bound. */
static int chunk_for(int M, int K, int hw) {
  static int target = 0;
  if (!target) {
    const char *e = getenv("GRADSYNC_NN_CONV_CHUNK"); /* for tuning */
    target = e && atoi(e) > 0 ? atoi(e) : NN_CONV_CHUNK_FLOATS;
  }
  int nc = GS_MAX(128, target / K);
  if (M <= 32 && (long)M * K * nc > 1000000L)
    nc = (int)GS_MAX(32L, 1000000L / ((long)M * K));
  int chunks = (hw + nc - 1) / nc;
  return (hw + chunks - 1) / chunks;
}

static int chunk_size(const nn_layer *l) {
  return chunk_for(l->out.c, l->in.c * l->k * l->k, l->out.h * l->out.w);
}

/* Leading dimension of a col slice of n columns: a multiple of 16 floats,
 * so that every row starts on a 64-byte line and the vector stores of
 * im2col never straddle two lines. */
static inline size_t col_ld(int n) { return ((size_t)n + 15) & ~(size_t)15; }

static int is_pointwise(const nn_layer *l) {
  return l->k == 1 && l->stride == 1 && l->pad == 0;
}

void nn_conv_workspace(const nn_layer *l, int batch, size_t *col,
                       size_t *tmp) {
  size_t K = (size_t)l->in.c * (size_t)l->k * (size_t)l->k;
  size_t hw = (size_t)l->out.h * (size_t)l->out.w;
  size_t Kt = (size_t)l->out.c * (size_t)l->k * (size_t)l->k;
  size_t g = (size_t)group_size(l, batch);
  size_t wide = (size_t)GS_MAX(l->in.c, l->out.c);
  *col = GS_MAX(K, Kt) * col_ld((int)(g * hw));
  *tmp = g > 1 ? wide * g * hw : 0;
}

/* col[(c*k + ky)*k + kx][oy*ow + ox] = x[c][oy*s - p + ky][ox*s - p + kx]
 * (0 outside), rows ld floats apart. */
static int is_same_stride1(const nn_layer *l) {
  return l->stride == 1 && l->out.h == l->in.h && l->out.w == l->in.w &&
         2 * l->pad == l->k - 1;
}

/* The fast path for stride 1 and "same" padding: row (c, ky, kx) of col is
 * the plane x[c] shifted by d = (ky - p) W + (kx - p), with zeros where the
 * source is outside the image. The shift is one contiguous copy; the
 * columns that wrapped around to the neighbouring image row are then
 * zeroed. Rows of 7 to 28 floats made the row-by-row copy the largest cost
 * after the GEMM itself. These work on output positions [n0, n1) of one
 * image, so that a chunk of col stays in the L2 cache between im2col and
 * the GEMM that reads it. */

/* Zeroes row[n - n0] for positions n in [n0, n1) whose column wraps: ox <
 * -sx (sx < 0) or ox >= W - sx (sx > 0). */
static inline void zero_wrapped(float *row, int sx, int W, int n0, int n1) {
  if (sx == 0) return;
  int a = sx < 0 ? 0 : W - sx, b = sx < 0 ? -sx : W;
  for (int oy = n0 / W; oy * W < n1; oy++)
    for (int ox = a; ox < b; ox++) {
      int n = oy * W + ox;
      if (n >= n0 && n < n1) row[n - n0] = 0.0f;
    }
}

NN_CLONES
static void im2col_same(const nn_layer *l, int C, const float *x, float *col,
                        size_t ld, int n0, int n1) {
  const int H = l->in.h, W = l->in.w, k = l->k, p = l->pad;
  const int HW = H * W;
  for (int c = 0; c < C; c++) {
    const float *xc = x + (size_t)c * HW;
    for (int ky = 0; ky < k; ky++)
      for (int kx = 0; kx < k; kx++) {
        float *row = col + ((size_t)(c * k + ky) * k + kx) * ld - n0;
        int d = (ky - p) * W + (kx - p);
        int lo = GS_MAX(n0, -d), hi = GS_MIN(n1, HW - d);
        if (hi < lo) hi = lo;
        for (int i = n0; i < lo; i++) row[i] = 0.0f;
        const float *src = xc + d;
        for (int i = lo; i < hi; i++) row[i] = src[i];
        for (int i = hi; i < n1; i++) row[i] = 0.0f;
        zero_wrapped(row + n0, kx - p, W, n0, n1);
      }
  }
}

/* The adjoint of im2col_same. It zeroes the wrapped entries of col (a
 * scratch buffer) so that the shifted add stays contiguous. */
NN_CLONES
static void col2im_same(const nn_layer *l, float *col, size_t ld, float *dx,
                        int n0, int n1) {
  const int C = l->in.c, H = l->in.h, W = l->in.w, k = l->k, p = l->pad;
  const int HW = H * W;
  for (int c = 0; c < C; c++) {
    float *xc = dx + (size_t)c * HW;
    for (int ky = 0; ky < k; ky++)
      for (int kx = 0; kx < k; kx++) {
        float *row = col + ((size_t)(c * k + ky) * k + kx) * ld - n0;
        int d = (ky - p) * W + (kx - p);
        int lo = GS_MAX(n0, -d), hi = GS_MIN(n1, HW - d);
        zero_wrapped(row + n0, kx - p, W, n0, n1);
        float *dst = xc + d;
        for (int i = lo; i < hi; i++) dst[i] += row[i];
      }
  }
}

NN_CLONES
static void im2col(const nn_layer *l, const float *x, float *col, size_t ld) {
  const int C = l->in.c, H = l->in.h, W = l->in.w, k = l->k, s = l->stride,
            p = l->pad, OH = l->out.h, OW = l->out.w;
  if (is_same_stride1(l)) {
    im2col_same(l, C, x, col, ld, 0, OH * OW);
    return;
  }
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
            /* Rows are short (7 to 28 floats): an inline loop beats a
             * memcpy call (conv.c is built without loop-to-memcpy). */
            for (int ox = lo; ox < hi; ox++) d[ox] = src[ox];
          } else {
            for (int ox = lo; ox < hi; ox++) d[ox] = src[ox * s];
          }
          for (int ox = hi; ox < OW; ox++) d[ox] = 0.0f;
        }
      }
    }
  }
}

/* The adjoint of im2col: dx[c][iy][ix] += col[...] (dx zeroed by caller;
 * col is scratch and may be modified). */
NN_CLONES
static void col2im(const nn_layer *l, float *col, size_t ld, float *dx) {
  const int C = l->in.c, H = l->in.h, W = l->in.w, k = l->k, s = l->stride,
            p = l->pad, OH = l->out.h, OW = l->out.w;
  if (is_same_stride1(l)) {
    col2im_same(l, col, ld, dx, 0, OH * OW);
    return;
  }
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

NN_CLONES
void nn_conv_stats(nn_layer *l, int b0, int n) {
  nn_layer *bn = l->stats_to;
  const size_t hw = (size_t)l->out.h * l->out.w;
  for (int j = b0; j < b0 + n; j++)
    for (int c = 0; c < l->out.c; c++) {
      const float *yp = l->y + (size_t)j * l->out_size + (size_t)c * hw;
      float s, q;
      nn_sum_dot(yp, yp, hw, &s, &q);
      bn->stats[2 * c] += s;
      bn->stats[2 * c + 1] += q;
    }
}

/* Bias and fused ReLU on one output plane, src -> dst (may alias). */
NN_CLONES
static void conv_epilogue(const nn_layer *l, const float *src, float *dst,
                          int hw, float bias) {
  if (l->fuse_relu) {
    for (int i = 0; i < hw; i++) {
      float v = src[i] + bias;
      dst[i] = v > 0.0f ? v : 0.0f;
    }
  } else {
    for (int i = 0; i < hw; i++) dst[i] = src[i] + bias;
  }
}

void nn_conv_im2col(const nn_layer *l, const float *x, float *col, size_t ld) {
  im2col(l, x, col, ld);
}

void nn_conv_forward(gs_nn_net *net, nn_layer *l, const float *x, int batch) {
  const int Cout = l->out.c, K = l->in.c * l->k * l->k;
  const int HW = l->out.h * l->out.w;
  const int g = group_size(l, batch);
  const int epilogue = l->b || l->fuse_relu;
  const int stats = l->stats_to && net->training;
  if (stats) memset(l->stats_to->stats, 0, 2 * (size_t)Cout * sizeof(double));
  if (g == 1 && is_same_stride1(l)) {
    const int nc = chunk_size(l);
    for (int b = 0; b < batch; b++) {
      const float *xb = x + (size_t)b * l->in_size;
      float *yb = l->y + (size_t)b * l->out_size;
      for (int n0 = 0; n0 < HW; n0 += nc) {
        int n1 = GS_MIN(HW, n0 + nc), N = n1 - n0;
        im2col_same(l, l->in.c, xb, net->col, col_ld(N), n0, n1);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Cout, N, K, 1.0f,
                    l->w, K, net->col, (int)col_ld(N), 0.0f, yb + n0, HW);
        if (epilogue)
          for (int c = 0; c < Cout; c++)
            conv_epilogue(l, yb + (size_t)c * HW + n0, yb + (size_t)c * HW + n0,
                          N, l->b ? l->b[c] : 0.0f);
      }
      if (stats) nn_conv_stats(l, b, 1);
    }
    if (stats) l->stats_to->stats_from = l->y;
    return;
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
               col_ld(N));
    }
    const int ldb = colp == net->col ? (int)col_ld(N) : N;
    float *out = gn == 1 ? l->y + (size_t)b0 * l->out_size : net->gemm_tmp;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Cout, N, K, 1.0f,
                l->w, K, colp, ldb, 0.0f, out, N);
    /* The group's output is still in cache: bias, ReLU and the scatter to
     * NCHW happen here rather than in separate passes. */
    if (gn > 1 || epilogue)
      for (int j = 0; j < gn; j++)
        for (int c = 0; c < Cout; c++) {
          const float *src = out + (size_t)c * N + (size_t)j * HW;
          float *dst = l->y + (size_t)(b0 + j) * l->out_size + (size_t)c * HW;
          if (epilogue)
            conv_epilogue(l, src, dst, HW, l->b ? l->b[c] : 0.0f);
          else
            memcpy(dst, src, (size_t)HW * sizeof(float));
        }
    if (stats) nn_conv_stats(l, b0, gn);
  }
  if (stats) l->stats_to->stats_from = l->y;
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

/* The backward of a stride-1 "same" convolution with cout <= cin (every
 * ResNet block) from one im2col, of dy instead of x.
 *
 * The input gradient is itself a "same" convolution, of dy with the kernel
 * transposed (in and out channels swapped) and flipped in both spatial
 * directions:
 *   dx[ci][y][x] = sum W[co][ci][ky][kx] dy[co][y + p - ky][x + p - kx],
 * and with ky' = k - 1 - ky (2p = k - 1) that is the forward formula with
 * W'[ci][co][ky'][kx']: dx = W' col(dy), an inner dimension of cout*k*k in
 * place of W^T dy's cout (16 in the first stage: a GEMM bound by writing its
 * output) followed by the col2im scatter-add.
 *
 * The weight gradient reads the same col(dy): substituting m = n + d(ky,kx),
 *   dW[co][ci][ky][kx] = sum_m x[ci][m] dy[co][m - d(ky,kx)]
 * and -d(ky,kx) = d(ky',kx'), so dW'[ci][co][ky'][kx'] = (x col(dy)^T)
 * [ci][(co,ky',kx')], the transposed and flipped layout of dW. Out-of-range
 * and wrapped positions are zero in col(dy) exactly where they are invalid
 * for the forward. This drops the second im2col of x the usual dW pass
 * needs. The weight gradient is final, and reported, when the loop ends. */
static void same_backward(gs_nn_net *net, nn_layer *l, const float *x,
                          const float *dy, float *dx, int batch, int g) {
  const int Cin = l->in.c, Cout = l->out.c, k = l->k, kk = k * k;
  const int Kt = Cout * kk, HW = l->out.h * l->out.w;
  for (int co = 0; co < Cout; co++)
    for (int ci = 0; ci < Cin; ci++) {
      const float *w = l->w + ((size_t)co * Cin + ci) * kk;
      float *wt = l->wt + ((size_t)ci * Cout + co) * kk;
      for (int t = 0; t < kk; t++) wt[kk - 1 - t] = w[t];
    }
  if (l->db) memset(l->db, 0, (size_t)Cout * sizeof(float));
  int first = 1;
  const int nc = g == 1 ? chunk_for(Cin, Kt, HW) : HW;
  for (int b0 = 0; b0 < batch; b0 += g) {
    int gn = GS_MIN(g, batch - b0);
    if (l->fuse_relu)
      nn_relu_mask_inplace(l->dy + (size_t)b0 * l->out_size,
                           l->y + (size_t)b0 * l->out_size,
                           (size_t)gn * l->out_size);
    if (l->db)
      for (int j = 0; j < gn; j++)
        for (int c = 0; c < Cout; c++)
          l->db[c] += nn_sum(dy + (size_t)(b0 + j) * l->out_size + (size_t)c * HW,
                             (size_t)HW);
    if (g == 1) {
      const float *dyb = dy + (size_t)b0 * l->out_size;
      const float *xb = x + (size_t)b0 * l->in_size;
      for (int n0 = 0; n0 < HW; n0 += nc) {
        int n1 = GS_MIN(HW, n0 + nc), N = n1 - n0, ld = (int)col_ld(N);
        im2col_same(l, Cout, dyb, net->col, (size_t)ld, n0, n1);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Cin, Kt, N, 1.0f,
                    xb + n0, HW, net->col, ld, first ? 0.0f : 1.0f, l->dwt, Kt);
        first = 0;
        if (dx)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Cin, N, Kt, 1.0f,
                      l->wt, Kt, net->col, ld, 0.0f,
                      dx + (size_t)b0 * l->in_size + n0, HW);
      }
      continue;
    }
    const int N = gn * HW, ld = (int)col_ld(N);
    for (int j = 0; j < gn; j++)
      im2col_same(l, Cout, dy + (size_t)(b0 + j) * l->out_size,
                  net->col + (size_t)j * HW, (size_t)ld, 0, HW);
    for (int j = 0; j < gn; j++) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Cin, Kt, HW, 1.0f,
                  x + (size_t)(b0 + j) * l->in_size, HW, net->col + (size_t)j * HW,
                  ld, first ? 0.0f : 1.0f, l->dwt, Kt);
      first = 0;
    }
    if (!dx) continue;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Cin, N, Kt, 1.0f,
                l->wt, Kt, net->col, ld, 0.0f, net->gemm_tmp, N);
    for (int j = 0; j < gn; j++)
      for (int c = 0; c < Cin; c++)
        memcpy(dx + (size_t)(b0 + j) * l->in_size + (size_t)c * HW,
               net->gemm_tmp + (size_t)c * N + (size_t)j * HW,
               (size_t)HW * sizeof(float));
  }
  for (int co = 0; co < Cout; co++)
    for (int ci = 0; ci < Cin; ci++) {
      const float *src = l->dwt + ((size_t)ci * Cout + co) * kk;
      float *dst = l->dw + ((size_t)co * Cin + ci) * kk;
      for (int t = 0; t < kk; t++) dst[t] = src[kk - 1 - t];
    }
  if (l->db) nn_grad_ready(net, l->param0 + 1);
  nn_grad_ready(net, l->param0);
}

/* Layers where cout > cin (the LeNet's 32 -> 64 convolution) keep the
 * usual form: dW from a second im2col of x, dx = W^T dy and col2im, since
 * im2col of dy would copy more data than col2im adds back. */
NN_CLONES
void nn_conv_backward(gs_nn_net *net, nn_layer *l, const float *x,
                      const float *dy, float *dx, int batch) {
  const int Cout = l->out.c, K = l->in.c * l->k * l->k;
  const int HW = l->out.h * l->out.w;
  const int g = group_size(l, batch);
  if (is_same_stride1(l) && Cout <= l->in.c) {
    same_backward(net, l, x, dy, dx, batch, g);
    return;
  }
  const int chunked = g == 1 && is_same_stride1(l);
  const int nc = chunked ? chunk_size(l) : HW;
  if (l->db) memset(l->db, 0, (size_t)Cout * sizeof(float));
  for (int b0 = 0; b0 < batch; b0 += g) {
    int gn = GS_MIN(g, batch - b0);
    int N = gn * HW;
    /* A fused ReLU masks this layer's own dy buffer in place, one group at
     * a time, so the GEMM below reads it from cache. */
    if (l->fuse_relu)
      nn_relu_mask_inplace(l->dy + (size_t)b0 * l->out_size,
                           l->y + (size_t)b0 * l->out_size,
                           (size_t)gn * l->out_size);
    if (l->db) {
      for (int j = 0; j < gn; j++)
        for (int c = 0; c < Cout; c++) {
          const float *d = dy + (size_t)(b0 + j) * l->out_size + (size_t)c * HW;
          l->db[c] += nn_sum(d, (size_t)HW);
        }
    }
    if (chunked) {
      const float *xb = x + (size_t)b0 * l->in_size;
      const float *dyb = dy + (size_t)b0 * l->out_size;
      for (int n0 = 0; n0 < HW; n0 += nc) {
        int n1 = GS_MIN(HW, n0 + nc), Nc = n1 - n0;
        im2col_same(l, l->in.c, xb, net->col, col_ld(Nc), n0, n1);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Cout, K, Nc, 1.0f,
                    dyb + n0, HW, net->col, (int)col_ld(Nc),
                    b0 == 0 && n0 == 0 ? 0.0f : 1.0f, l->dw, K);
      }
      continue;
    }
    const float *colp = net->col;
    if (gn == 1 && is_pointwise(l)) {
      colp = x + (size_t)b0 * l->in_size;
    } else {
      for (int j = 0; j < gn; j++)
        im2col(l, x + (size_t)(b0 + j) * l->in_size, net->col + (size_t)j * HW,
               col_ld(N));
    }
    const int ldb = colp == net->col ? (int)col_ld(N) : N;
    const float *dyg = group_dy(net, l, dy, b0, gn);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Cout, K, N, 1.0f, dyg,
                N, colp, ldb, b0 == 0 ? 0.0f : 1.0f, l->dw, K);
  }
  if (l->db) nn_grad_ready(net, l->param0 + 1);
  nn_grad_ready(net, l->param0);
  if (!dx) return;
  if (chunked) {
    for (int b = 0; b < batch; b++) {
      const float *dyb = dy + (size_t)b * l->out_size;
      float *dxb = dx + (size_t)b * l->in_size;
      memset(dxb, 0, l->in_size * sizeof(float));
      for (int n0 = 0; n0 < HW; n0 += nc) {
        int n1 = GS_MIN(HW, n0 + nc), Nc = n1 - n0;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, Nc, Cout, 1.0f,
                    l->w, K, dyb + n0, HW, 0.0f, net->col, Nc);
        col2im_same(l, net->col, (size_t)Nc, dxb, n0, n1);
      }
    }
    return;
  }
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
