/*
 * The layers without a GEMM: ReLU, max- and average-pooling, batch
 * normalisation, dropout, and the softmax cross-entropy loss. The loops are
 * written flat over contiguous planes so that -O3 vectorises them.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "nn_internal.h"

/* ---- ReLU ------------------------------------------------------------------- */

NN_CLONES
void nn_relu_forward(nn_layer *l, const float *x, int batch) {
  size_t n = (size_t)batch * l->out_size;
  float *y = l->y;
  for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* dx = dy where the output was positive (the subgradient 0 at x = 0). */
NN_CLONES
void nn_relu_backward(nn_layer *l, const float *dy, float *dx, int batch) {
  size_t n = (size_t)batch * l->out_size;
  const float *y = l->y;
  /* Both loads unconditional, so that the select vectorises. */
  for (size_t i = 0; i < n; i++) {
    float g = dy[i];
    dx[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

NN_CLONES
void nn_relu_mask_inplace(float *restrict dy, const float *restrict y,
                          size_t n) {
  for (size_t i = 0; i < n; i++) {
    float g = dy[i];
    dy[i] = y[i] > 0.0f ? g : 0.0f;
  }
}

/* ---- Pooling ------------------------------------------------------------- */

void nn_maxpool_forward(nn_layer *l, const float *x, int batch) {
  const int H = l->in.h, W = l->in.w, OH = l->out.h, OW = l->out.w;
  const int k = l->k, s = l->stride;
  const size_t planes = (size_t)batch * (size_t)l->in.c;
  for (size_t pl = 0; pl < planes; pl++) {
    const float *xp = x + pl * (size_t)H * W;
    float *yp = l->y + pl * (size_t)OH * OW;
    int32_t *ap = l->argmax + pl * (size_t)OH * OW;
    if (k == 2 && s == 2) {
      for (int oy = 0; oy < OH; oy++) {
        const float *r0 = xp + (size_t)(2 * oy) * W, *r1 = r0 + W;
        for (int ox = 0; ox < OW; ox++) {
          int i0 = 2 * ox;
          float a = r0[i0], b = r0[i0 + 1], c = r1[i0], d = r1[i0 + 1];
          int ia = 2 * oy * W + i0;
          float m = a;
          int im = ia;
          if (b > m) { m = b; im = ia + 1; }
          if (c > m) { m = c; im = ia + W; }
          if (d > m) { m = d; im = ia + W + 1; }
          yp[oy * OW + ox] = m;
          ap[oy * OW + ox] = im;
        }
      }
      continue;
    }
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++) {
        int im = (oy * s) * W + ox * s;
        float m = xp[im];
        for (int ky = 0; ky < k; ky++)
          for (int kx = 0; kx < k; kx++) {
            int i = (oy * s + ky) * W + ox * s + kx;
            if (xp[i] > m) {
              m = xp[i];
              im = i;
            }
          }
        yp[oy * OW + ox] = m;
        ap[oy * OW + ox] = im;
      }
  }
}

void nn_maxpool_backward(nn_layer *l, const float *dy, float *dx, int batch) {
  const size_t in_plane = (size_t)l->in.h * l->in.w;
  const size_t out_plane = (size_t)l->out.h * l->out.w;
  const size_t planes = (size_t)batch * (size_t)l->in.c;
  const int W = l->in.w, OH = l->out.h, OW = l->out.w;
  if (l->k == 2 && l->stride == 2 && l->in.h == 2 * OH && W == 2 * OW) {
    /* The windows tile the input exactly: one write pass, no memset. */
    for (size_t pl = 0; pl < planes; pl++) {
      float *d = dx + pl * in_plane;
      const float *g = dy + pl * out_plane;
      const int32_t *a = l->argmax + pl * out_plane;
      for (int oy = 0; oy < OH; oy++) {
        float *r0 = d + (size_t)(2 * oy) * W, *r1 = r0 + W;
        int base = 2 * oy * W;
        for (int ox = 0; ox < OW; ox++) {
          int o = oy * OW + ox, i0 = base + 2 * ox, am = a[o];
          float v = g[o];
          r0[2 * ox] = am == i0 ? v : 0.0f;
          r0[2 * ox + 1] = am == i0 + 1 ? v : 0.0f;
          r1[2 * ox] = am == i0 + W ? v : 0.0f;
          r1[2 * ox + 1] = am == i0 + W + 1 ? v : 0.0f;
        }
      }
    }
    return;
  }
  memset(dx, 0, planes * in_plane * sizeof(float));
  for (size_t pl = 0; pl < planes; pl++) {
    float *d = dx + pl * in_plane;
    const float *g = dy + pl * out_plane;
    const int32_t *a = l->argmax + pl * out_plane;
    for (size_t i = 0; i < out_plane; i++) d[a[i]] += g[i];
  }
}

NN_CLONES
void nn_avgpool_forward(nn_layer *l, const float *x, int batch) {
  const int H = l->in.h, W = l->in.w, OH = l->out.h, OW = l->out.w;
  const int k = l->k, s = l->stride;
  const float scale = 1.0f / (float)(k * k);
  const size_t planes = (size_t)batch * (size_t)l->in.c;
  for (size_t pl = 0; pl < planes; pl++) {
    const float *xp = x + pl * (size_t)H * W;
    float *yp = l->y + pl * (size_t)OH * OW;
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++) {
        float acc = 0.0f;
        for (int ky = 0; ky < k; ky++) {
          const float *r = xp + (size_t)(oy * s + ky) * W + ox * s;
          for (int kx = 0; kx < k; kx++) acc += r[kx];
        }
        yp[oy * OW + ox] = acc * scale;
      }
  }
}

NN_CLONES
void nn_avgpool_backward(nn_layer *l, const float *dy, float *dx, int batch) {
  const int H = l->in.h, W = l->in.w, OH = l->out.h, OW = l->out.w;
  const int k = l->k, s = l->stride;
  const float scale = 1.0f / (float)(k * k);
  const size_t planes = (size_t)batch * (size_t)l->in.c;
  memset(dx, 0, planes * (size_t)H * W * sizeof(float));
  for (size_t pl = 0; pl < planes; pl++) {
    float *d = dx + pl * (size_t)H * W;
    const float *g = dy + pl * (size_t)OH * OW;
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++) {
        float v = g[oy * OW + ox] * scale;
        for (int ky = 0; ky < k; ky++) {
          float *r = d + (size_t)(oy * s + ky) * W + ox * s;
          for (int kx = 0; kx < k; kx++) r[kx] += v;
        }
      }
  }
}

/* ---- Batch normalisation ------------------------------------------------
 * Ioffe & Szegedy 2015, algorithm 1; running statistics as torch.nn
 * BatchNorm2d (momentum 0.1, unbiased variance for the running value).
 * The normalised input is not stored: backward recomputes it from x and the
 * saved mean and 1/std, which saves a write and a read of a whole
 * activation per layer. */

/* The loops run image by image and channel by channel, the order of the
 * NCHW memory, so that every pass is one linear sweep (small planes, 7x7 in
 * the ResNet's last stage, made a channel-outer order jump through memory).
 * Per channel the images are still summed in order, so the results do not
 * depend on the loop order. */
NN_CLONES
void nn_bn_forward(gs_nn_net *net, nn_layer *l, const float *x, int batch) {
  const int C = l->in.c;
  const size_t hw = (size_t)l->in.h * l->in.w;
  const size_t m = (size_t)batch * hw;
  double *st = l->stats; /* [c][sum, sum of squares] */
  l->train_mode = net->training;
  if (net->training) {
    /* The conv before this layer already summed its output planes
     * (nn_conv_stats) when that output is this layer's input. Sums per
     * plane in f32 (at most a few thousand terms), across planes in f64;
     * var = E[x^2] - mean^2 in f64. */
    if (l->stats_from != x) {
      memset(st, 0, 2 * (size_t)C * sizeof(double));
      for (int n = 0; n < batch; n++)
        for (int c = 0; c < C; c++) {
          const float *xp = x + (size_t)n * l->in_size + (size_t)c * hw;
          float s, q;
          nn_sum_dot(xp, xp, hw, &s, &q);
          st[2 * c] += s;
          st[2 * c + 1] += q;
        }
    }
    for (int c = 0; c < C; c++) {
      double mu = st[2 * c] / (double)m;
      double var = st[2 * c + 1] / (double)m - mu * mu;
      if (var < 0.0) var = 0.0;
      float mean = (float)mu;
      l->mean[c] = mean;
      l->inv_std[c] = (float)(1.0 / sqrt(var + (double)l->eps));
      double unbiased = m > 1 ? var * (double)m / (double)(m - 1) : var;
      l->run_mean[c] = (1.0f - l->momentum) * l->run_mean[c] + l->momentum * mean;
      l->run_var[c] = (1.0f - l->momentum) * l->run_var[c] +
                      l->momentum * (float)unbiased;
    }
  } else {
    for (int c = 0; c < C; c++) {
      l->mean[c] = l->run_mean[c];
      l->inv_std[c] = 1.0f / sqrtf(l->run_var[c] + l->eps);
    }
  }
  l->stats_from = NULL;
  for (int n = 0; n < batch; n++)
    for (int c = 0; c < C; c++) {
      const float scale = l->w[c] * l->inv_std[c];
      const float shift = l->b[c] - l->mean[c] * scale;
      size_t off = (size_t)n * l->in_size + (size_t)c * hw;
      const float *xp = x + off;
      float *y = l->y + off;
      if (l->fuse_relu) {
        for (size_t i = 0; i < hw; i++) {
          float o = xp[i] * scale + shift;
          y[i] = o > 0.0f ? o : 0.0f;
        }
      } else {
        for (size_t i = 0; i < hw; i++) y[i] = xp[i] * scale + shift;
      }
    }
}

/* Training mode: with M values per channel and xhat = (x - mean) inv_std,
 *   dx = gamma * inv_std * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
 * (Ioffe & Szegedy 2015, the gradients below algorithm 1).
 * Evaluation mode: dx = gamma * inv_std * dy. */
NN_CLONES
void nn_bn_backward(gs_nn_net *net, nn_layer *l, const float *x,
                    const float *dy, float *dx, int batch) {
  const int C = l->in.c;
  const size_t hw = (size_t)l->in.h * l->in.w;
  const float m = (float)((size_t)batch * hw);
  double *st = l->stats; /* scratch here: [c][sum(dy), sum(dy * x)] */
  memset(st, 0, 2 * (size_t)C * sizeof(double));
  for (int n = 0; n < batch; n++)
    for (int c = 0; c < C; c++) {
      size_t off = (size_t)n * l->in_size + (size_t)c * hw;
      const float *g = dy + off, *xp = x + off;
      /* A fused ReLU: dy is this layer's own buffer, masked in place. */
      if (l->fuse_relu) nn_relu_mask_inplace(l->dy + off, l->y + off, hw);
      float a, b;
      nn_sum_dot(g, xp, hw, &a, &b);
      st[2 * c] += a;
      st[2 * c + 1] += b;
    }
  for (int c = 0; c < C; c++) {
    /* sum(dy * xhat) = inv_std * (sum(dy * x) - mean * sum(dy)) */
    double sdy = st[2 * c], sdyx = st[2 * c + 1];
    l->db[c] = (float)sdy;
    l->dw[c] = (float)((sdyx - (double)l->mean[c] * sdy) * (double)l->inv_std[c]);
  }
  nn_grad_ready(net, l->param0 + 1);
  nn_grad_ready(net, l->param0);
  if (!dx) return;
  for (int n = 0; n < batch; n++)
    for (int c = 0; c < C; c++) {
      const float inv = l->inv_std[c], mean = l->mean[c];
      const float k = l->w[c] * inv;
      const float sdy = l->db[c] / m, sdyx = l->dw[c] / m;
      size_t off = (size_t)n * l->in_size + (size_t)c * hw;
      const float *g = dy + off, *xp = x + off;
      float *d = dx + off;
      if (l->train_mode)
        for (size_t i = 0; i < hw; i++)
          d[i] = k * (g[i] - sdy - (xp[i] - mean) * inv * sdyx);
      else
        for (size_t i = 0; i < hw; i++) d[i] = k * g[i];
    }
}

/* ---- Dropout (inverted: kept units scaled by 1 / (1 - p)) ---------------- */

void nn_dropout_forward(gs_nn_net *net, nn_layer *l, const float *x,
                        int batch) {
  size_t n = (size_t)batch * l->out_size;
  l->train_mode = net->training && l->p > 0.0f;
  if (!l->train_mode) {
    memcpy(l->y, x, n * sizeof(float));
    return;
  }
  if (!net->dropout_frozen) {
    const float scale = 1.0f / (1.0f - l->p);
    for (size_t i = 0; i < n; i++)
      l->mask[i] = nn_rng_uniform(&net->rng) >= l->p ? scale : 0.0f;
  }
  for (size_t i = 0; i < n; i++) l->y[i] = x[i] * l->mask[i];
}

NN_CLONES
void nn_dropout_backward(nn_layer *l, const float *dy, float *dx, int batch) {
  size_t n = (size_t)batch * l->out_size;
  if (!l->train_mode) {
    memcpy(dx, dy, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; i++) dx[i] = dy[i] * l->mask[i];
}

/* ---- Softmax cross-entropy ------------------------------------------------ */

gs_status gs_nn_softmax_ce(const float *logits, const int32_t *labels,
                           int batch, int classes, float *dlogits,
                           float *loss, int *correct) {
  if (!logits || !labels || !loss || batch <= 0 || classes <= 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_softmax_ce: NULL buffer or batch %d, classes %d",
                    batch, classes);
  for (int n = 0; n < batch; n++)
    if (labels[n] < 0 || labels[n] >= classes)
      return gs_error(GS_ERR_INVALID_ARG,
                      "gs_nn_softmax_ce: label %d of sample %d is not in "
                      "[0, %d)", (int)labels[n], n, classes);
  double total = 0.0;
  int hits = 0;
  const float inv_batch = 1.0f / (float)batch;
  for (int n = 0; n < batch; n++) {
    const float *z = logits + (size_t)n * classes;
    float mx = z[0];
    int arg = 0;
    for (int j = 1; j < classes; j++)
      if (z[j] > mx) {
        mx = z[j];
        arg = j;
      }
    hits += arg == labels[n];
    double sum = 0.0;
    for (int j = 0; j < classes; j++) sum += exp((double)(z[j] - mx));
    double lse = (double)mx + log(sum);
    total += lse - (double)z[labels[n]];
    if (dlogits) {
      float *d = dlogits + (size_t)n * classes;
      for (int j = 0; j < classes; j++)
        d[j] = (float)(exp((double)z[j] - lse)) * inv_batch;
      d[labels[n]] -= inv_batch;
    }
  }
  *loss = (float)(total / batch);
  if (correct) *correct = hits;
  return GS_OK;
}
