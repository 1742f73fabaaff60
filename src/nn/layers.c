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

void nn_relu_forward(nn_layer *l, const float *x, int batch) {
  size_t n = (size_t)batch * l->out_size;
  float *y = l->y;
  for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* dx = dy where the output was positive (the subgradient 0 at x = 0). */
void nn_relu_backward(nn_layer *l, const float *dy, float *dx, int batch) {
  size_t n = (size_t)batch * l->out_size;
  const float *y = l->y;
  for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
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
  memset(dx, 0, planes * in_plane * sizeof(float));
  for (size_t pl = 0; pl < planes; pl++) {
    float *d = dx + pl * in_plane;
    const float *g = dy + pl * out_plane;
    const int32_t *a = l->argmax + pl * out_plane;
    for (size_t i = 0; i < out_plane; i++) d[a[i]] += g[i];
  }
}

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
 * BatchNorm2d (momentum 0.1, unbiased variance for the running value). */

void nn_bn_forward(gs_nn_net *net, nn_layer *l, const float *x, int batch) {
  const int C = l->in.c;
  const size_t hw = (size_t)l->in.h * l->in.w;
  const size_t m = (size_t)batch * hw;
  l->train_mode = net->training;
  for (int c = 0; c < C; c++) {
    float mean, inv;
    if (net->training) {
      double sum = 0.0;
      for (int n = 0; n < batch; n++) {
        const float *xp = x + (size_t)n * l->in_size + (size_t)c * hw;
        float s = 0.0f;
        for (size_t i = 0; i < hw; i++) s += xp[i];
        sum += s;
      }
      mean = (float)(sum / (double)m);
      double sq = 0.0;
      for (int n = 0; n < batch; n++) {
        const float *xp = x + (size_t)n * l->in_size + (size_t)c * hw;
        float s = 0.0f;
        for (size_t i = 0; i < hw; i++) {
          float d = xp[i] - mean;
          s += d * d;
        }
        sq += s;
      }
      double var = sq / (double)m;
      inv = (float)(1.0 / sqrt(var + (double)l->eps));
      double unbiased = m > 1 ? sq / (double)(m - 1) : var;
      l->run_mean[c] = (1.0f - l->momentum) * l->run_mean[c] + l->momentum * mean;
      l->run_var[c] = (1.0f - l->momentum) * l->run_var[c] +
                      l->momentum * (float)unbiased;
    } else {
      mean = l->run_mean[c];
      inv = 1.0f / sqrtf(l->run_var[c] + l->eps);
    }
    l->inv_std[c] = inv;
    const float gamma = l->w[c], beta = l->b[c];
    for (int n = 0; n < batch; n++) {
      size_t off = (size_t)n * l->in_size + (size_t)c * hw;
      const float *xp = x + off;
      float *xh = l->xhat + off, *y = l->y + off;
      for (size_t i = 0; i < hw; i++) {
        float v = (xp[i] - mean) * inv;
        xh[i] = v;
        y[i] = gamma * v + beta;
      }
    }
  }
}

/* Training mode: with M values per channel,
 *   dx = gamma * inv_std / M * (M dy - sum(dy) - xhat * sum(dy * xhat)).
 * Evaluation mode: dx = gamma * inv_std * dy. */
void nn_bn_backward(gs_nn_net *net, nn_layer *l, const float *dy, float *dx,
                    int batch) {
  const int C = l->in.c;
  const size_t hw = (size_t)l->in.h * l->in.w;
  const float m = (float)((size_t)batch * hw);
  for (int c = 0; c < C; c++) {
    float sdy = 0.0f, sdyx = 0.0f;
    for (int n = 0; n < batch; n++) {
      size_t off = (size_t)n * l->in_size + (size_t)c * hw;
      const float *g = dy + off, *xh = l->xhat + off;
      float a = 0.0f, b = 0.0f;
      for (size_t i = 0; i < hw; i++) {
        a += g[i];
        b += g[i] * xh[i];
      }
      sdy += a;
      sdyx += b;
    }
    l->db[c] = sdy;
    l->dw[c] = sdyx;
  }
  nn_grad_ready(net, l->param0 + 1);
  nn_grad_ready(net, l->param0);
  if (!dx) return;
  for (int c = 0; c < C; c++) {
    const float k = l->w[c] * l->inv_std[c];
    const float sdy = l->db[c] / m, sdyx = l->dw[c] / m;
    for (int n = 0; n < batch; n++) {
      size_t off = (size_t)n * l->in_size + (size_t)c * hw;
      const float *g = dy + off, *xh = l->xhat + off;
      float *d = dx + off;
      if (l->train_mode)
        for (size_t i = 0; i < hw; i++) d[i] = k * (g[i] - sdy - xh[i] * sdyx);
      else
        for (size_t i = 0; i < hw; i++) d[i] = k * g[i];
    }
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
