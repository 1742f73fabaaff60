/*
 * Fully connected layer, row-major: y[B][out] = x[B][in] W[out][in]^T + b.
 * All three products are single cblas_sgemm calls.
 */
#include <cblas.h>
#include <string.h>

#include "nn_internal.h"

NN_CLONES
void nn_linear_forward(gs_nn_net *net, nn_layer *l, const float *x, int batch) {
  (void)net;
  int in = (int)l->in_size, out = (int)l->out_size;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x,
              in, l->w, in, 0.0f, l->y, out);
  if (l->b || l->fuse_relu) {
    for (int n = 0; n < batch; n++) {
      float *y = l->y + (size_t)n * out;
      const float *b = l->b;
      if (b)
        for (int o = 0; o < out; o++) y[o] += b[o];
      if (l->fuse_relu)
        for (int o = 0; o < out; o++) y[o] = y[o] > 0.0f ? y[o] : 0.0f;
    }
  }
}

/* db first, then dW, each announced as soon as it is final, then dx. */
void nn_linear_backward(gs_nn_net *net, nn_layer *l, const float *x,
                        const float *dy, float *dx, int batch) {
  int in = (int)l->in_size, out = (int)l->out_size;
  if (l->fuse_relu) nn_relu_mask_inplace(l->dy, l->y, (size_t)batch * out);
  if (l->db) {
    float *db = l->db;
    memset(db, 0, (size_t)out * sizeof(float));
    for (int n = 0; n < batch; n++) {
      const float *g = dy + (size_t)n * out;
      for (int o = 0; o < out; o++) db[o] += g[o];
    }
    nn_grad_ready(net, l->param0 + 1);
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dy,
              out, x, in, 0.0f, l->dw, in);
  nn_grad_ready(net, l->param0);
  if (dx)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f,
                dy, out, l->w, in, 0.0f, dx, in);
}
