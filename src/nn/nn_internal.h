/*
 * Internals of the training engine: the layer record, the net, the kernels
 * of each layer kind and the seeded generator. Not installed.
 *
 * Buffers: every layer owns its output y[batch][out]; a layer that is not
 * the last of its sequence also owns dy, the gradient with respect to y.
 * Backward of layer i reads dy_i and writes dx into dy_{i-1} (or into the
 * sequence's dx), overwriting it.
 */
#ifndef GS_NN_INTERNAL_H
#define GS_NN_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "gs_internal.h"
#include "gradsync/nn.h"
#include "gradsync/optim.h"

/* The elementwise and copy loops are built for AVX-512, AVX2 and the
 * baseline, the loader picking the best the CPU has (GCC's function
 * multi-versioning): the library stays portable and the loops move 32 or 64
 * bytes per instruction instead of 16. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(GRADSYNC_NN_NO_CLONES)
#define NN_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NN_CLONES
#endif

/* Reductions with NN_LANES independent partial sums, combined in a fixed
 * order at the end. Without -ffast-math the compiler must keep a single
 * running sum in program order (one add per 4 cycles of latency); spelled
 * out like this the lanes vectorise, and the result is the same on every
 * instruction set since the order of operations is the code's. */
#define NN_LANES 16

static inline float nn_lanes_total(const float *acc) {
  float t = 0.0f;
  for (int j = 0; j < NN_LANES; j++) t += acc[j];
  return t;
}

/* *sum = sum(a), *dot = sum(a * b) (b may equal a). */
static inline void nn_sum_dot(const float *a, const float *b, size_t n,
                              float *sum, float *dot) {
  float s[NN_LANES] = {0}, d[NN_LANES] = {0};
  size_t i = 0;
  for (; i + NN_LANES <= n; i += NN_LANES)
    for (int j = 0; j < NN_LANES; j++) {
      s[j] += a[i + j];
      d[j] += a[i + j] * b[i + j];
    }
  float ts = nn_lanes_total(s), td = nn_lanes_total(d);
  for (; i < n; i++) {
    ts += a[i];
    td += a[i] * b[i];
  }
  *sum = ts;
  *dot = td;
}

static inline float nn_sum(const float *a, size_t n) {
  float s[NN_LANES] = {0};
  size_t i = 0;
  for (; i + NN_LANES <= n; i += NN_LANES)
    for (int j = 0; j < NN_LANES; j++) s[j] += a[i + j];
  float t = nn_lanes_total(s);
  for (; i < n; i++) t += a[i];
  return t;
}

/* ---- Generator: splitmix64 (Steele, Lea & Flood 2014) ---------------------- */
static inline uint64_t nn_rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* Uniform in [0, 1) with 24 random bits. */
static inline float nn_rng_uniform(uint64_t *state) {
  return (float)(nn_rng_next(state) >> 40) * (1.0f / 16777216.0f);
}
/* Uniform in [0, n) (n > 0), by Lemire's multiply-shift; bias < n / 2^64. */
static inline uint64_t nn_rng_below(uint64_t *state, uint64_t n) {
  return (uint64_t)(((unsigned __int128)nn_rng_next(state) * n) >> 64);
}
double nn_rng_normal(uint64_t *state);

/* ---- Layers ------------------------------------------------------------- */

typedef enum {
  NN_LINEAR = 0,
  NN_CONV,
  NN_RELU,
  NN_MAXPOOL,
  NN_AVGPOOL,
  NN_BATCHNORM,
  NN_DROPOUT,
  NN_FLATTEN,
  NN_RESIDUAL,
} nn_kind;

typedef struct {
  int c, h, w;
} nn_shape;

static inline size_t nn_shape_size(nn_shape s) {
  return (size_t)s.c * (size_t)s.h * (size_t)s.w;
}

typedef struct nn_layer nn_layer;

typedef struct {
  nn_layer **layers;
  int n, cap;
} nn_seq;

struct nn_layer {
  nn_kind kind;
  char name[64];
  nn_shape in, out;
  size_t in_size, out_size; /* per sample */

  /* Parameters: indices into the net's table (weight first, then bias). */
  int nparams;
  size_t param0;
  float *w, *b, *dw, *db;

  /* conv / pool / linear geometry */
  int k, stride, pad, has_bias;
  /* dropout */
  float p;
  /* whether the last forward ran in training mode (batch-norm, dropout) */
  int train_mode;
  /* ReLU fusion (finalize): a conv, linear, batch-norm or residual layer
   * followed by a ReLU applies it to its output while that is in cache
   * (fuse_relu) and masks its dy in place in backward; the ReLU layer is
   * then a view of the producer's y and dy (fused_away) and does nothing. */
  int fuse_relu, fused_away;
  /* Batch-norm statistics fusion (finalize): a conv followed by a batch-norm
   * adds each output plane's sum and sum of squares to the batch-norm's
   * stats (2 x channels doubles) while the plane is in cache, in the order
   * the batch-norm would (image by image, so the result is bitwise the
   * same), and the batch-norm skips its first pass over the input. */
  nn_layer *stats_to;
  double *stats;
  const float *stats_from; /* batch-norm: the conv output stats describe */
  /* batch-norm: running statistics live in the net's buffer area */
  float eps, momentum;
  float *run_mean, *run_var;
  size_t buf0; /* offset in the buffer area */

  /* activations and workspaces (per max_batch) */
  float *y, *dy;
  float *mean;     /* batch-norm: per channel, of the last forward */
  float *inv_std;  /* batch-norm: per channel */
  float *var;      /* batch-norm: per channel, biased (the oneDNN backend) */
  float *mask;     /* dropout: 0 or 1 / (1 - p) */
  int32_t *argmax; /* max-pool: index in the input plane */
  float *dx_tmp;   /* residual with a projection: the main path's dx */
  float *wt;       /* conv: transposed, flipped weights (input gradient) */
  float *dwt;      /* conv: the weight gradient in that layout */

  /* residual */
  nn_seq main, shortcut;

  /* layer hooks (optim_hooks.c): 1 + this layer's index among the hooked
   * (linear and conv) layers, 0 for other kinds */
  size_t hook_slot;

  /* Blocked activations (the dnnl backend, net.c's blocked_plan): whether
   * this layer's input (blk_in) and output (blk_out) are in oneDNN's
   * channel-blocked layout (nChw16c or nChw8c) in a blocked pass, and,
   * for a flatten with a blocked input, the NCHW copy it outputs there. */
  int blk_in, blk_out;
  float *blk_y;

  /* the oneDNN backend's primitives for this layer (dnnl.c); NULL until the
   * layer first runs on it */
  struct nn_dnnl_layer *dnnl;
};

/* Which kernels run the layers (gs_nn_set_backend). */
typedef enum { NN_BACKEND_BLAS = 0, NN_BACKEND_DNNL } nn_backend;
/* What convolutions and linear layers compute in (gs_nn_set_precision). */
typedef enum { NN_PREC_FP32 = 0, NN_PREC_BF16 } nn_precision;

struct gs_nn_net {
  nn_shape in;
  int max_batch;
  int finalized;
  nn_seq top;
  /* builder: the open residual block and which path gets new layers */
  nn_layer *open_block;
  int in_shortcut;
  nn_shape block_in;
  int layer_counter;

  /* parameters */
  gs_nn_param *params;
  char **names;
  size_t nparams, cap_params;
  size_t *param_offset; /* in flat */
  size_t total;
  float *flat_w, *flat_g;
  size_t nbuffers;
  float *buffers;

  /* workspaces shared by all layers (sized in finalize) */
  float *col;    /* im2col / col2im */
  size_t col_size;
  float *gemm_tmp; /* conv output of a group, [cout][g*hw] */
  size_t gemm_tmp_size;

  /* the layers' kernels, and the oneDNN backend's engine, stream and
   * scratchpad (dnnl.c; NULL until first used) */
  nn_backend backend;
  nn_precision precision;
  struct nn_dnnl_net *dnnl;
  /* Blocked passes: the channel block of the blocked activation layout
   * (16 or 8; 0: this net has no plan for one), whether the current pass
   * runs blocked, whether a primitive for it failed (then none does), and
   * how many passes ran blocked. */
  int blk_block, blk_pass, blk_broken;
  long blk_passes;

  /* run state */
  int training, input_grad, dropout_frozen;
  uint64_t rng;
  int batch;
  const float *x;   /* the last forward's input */
  float *dx_in;     /* input gradient (if input_grad) */
  float *dlogits;
  gs_nn_grad_ready_fn on_grad_ready;
  gs_nn_before_forward_fn before_forward;
  void *cb_ctx;

  /* layer hooks (optim_hooks.c): the linear and conv layers in forward
   * order, built on first use, and the optimizer's callbacks */
  nn_layer **hooked;
  size_t nhooked;
  gs_nn_layer_io_fn hook_forward, hook_backward;
  void *hook_ctx;
};

/* Layer hooks, called by net.c after a hooked layer's forward (with its
 * input) and after its backward kernel (with its output gradient). */
static inline void nn_hook_forward(gs_nn_net *net, const nn_layer *l,
                                   const float *x, int batch) {
  if (net->hook_forward && l->hook_slot && net->training)
    net->hook_forward(net->hook_ctx, l->hook_slot - 1, x, batch);
}
static inline void nn_hook_backward(gs_nn_net *net, const nn_layer *l,
                                    const float *dy, int batch) {
  if (net->hook_backward && l->hook_slot && net->training)
    net->hook_backward(net->hook_ctx, l->hook_slot - 1, dy, batch);
}
void nn_hooks_free(gs_nn_net *net);
/* im2col of one image x[cin][h][w] into col[cin*k*k][ld] (conv.c). */
void nn_conv_im2col(const nn_layer *l, const float *x, float *col, size_t ld);

/* Activation buffers: zeroed, 64-byte aligned, and on transparent huge
 * pages when large (fewer TLB misses on the multi-megabyte activations).
 * Allocated through gs_malloc; freed with nn_buf_free. */
void *nn_buf_alloc(size_t bytes);
void nn_buf_free(void *p);

/* Callbacks, in the order the hook contract promises. */
static inline void nn_before_forward(gs_nn_net *net, const nn_layer *l) {
  if (net->before_forward)
    for (int i = 0; i < l->nparams; i++)
      net->before_forward(net->cb_ctx, l->param0 + (size_t)i);
}
static inline void nn_grad_ready(gs_nn_net *net, size_t index) {
  if (net->on_grad_ready) net->on_grad_ready(net->cb_ctx, index);
}

/* Adds the plane sums of images [b0, b0 + n) of a conv output to the
 * following batch-norm's statistics (conv.c). */
void nn_conv_stats(nn_layer *l, int b0, int n);

/* Kernels: forward reads x[batch][in_size] and writes l->y; backward reads
 * x, dy and writes the parameter gradients (firing grad_ready as each is
 * final) and, if dx is not NULL, dx. */
void nn_linear_forward(gs_nn_net *net, nn_layer *l, const float *x, int batch);
void nn_linear_backward(gs_nn_net *net, nn_layer *l, const float *x,
                        const float *dy, float *dx, int batch);
void nn_conv_forward(gs_nn_net *net, nn_layer *l, const float *x, int batch);
void nn_conv_backward(gs_nn_net *net, nn_layer *l, const float *x,
                      const float *dy, float *dx, int batch);
/* Workspace floats a conv layer needs for batch samples (col, gemm_tmp). */
void nn_conv_workspace(const nn_layer *l, int batch, size_t *col,
                       size_t *tmp);
void nn_relu_forward(nn_layer *l, const float *x, int batch);
void nn_relu_backward(nn_layer *l, const float *dy, float *dx, int batch);
/* dy[i] = 0 where y[i] <= 0: the backward of a fused ReLU. */
void nn_relu_mask_inplace(float *restrict dy, const float *restrict y,
                          size_t n);
void nn_maxpool_forward(nn_layer *l, const float *x, int batch);
void nn_maxpool_backward(nn_layer *l, const float *dy, float *dx, int batch);
void nn_avgpool_forward(nn_layer *l, const float *x, int batch);
void nn_avgpool_backward(nn_layer *l, const float *dy, float *dx, int batch);
void nn_bn_forward(gs_nn_net *net, nn_layer *l, const float *x, int batch);
void nn_bn_backward(gs_nn_net *net, nn_layer *l, const float *x,
                    const float *dy, float *dx, int batch);
void nn_dropout_forward(gs_nn_net *net, nn_layer *l, const float *x,
                        int batch);
void nn_dropout_backward(nn_layer *l, const float *dy, float *dx, int batch);

/* The oneDNN backend (dnnl.c, built with GRADSYNC_NN_DNNL). forward and
 * backward run layer l on oneDNN and return 1, or return 0 when the layer
 * is not one it runs (dropout, flatten, residual, batch-norm in evaluation
 * mode) or has no primitive for it: the caller then runs the BLAS kernel.
 * Backward fires grad_ready as the BLAS kernels do. */
#ifdef GRADSYNC_NN_DNNL
typedef struct nn_dnnl_layer nn_dnnl_layer;
typedef struct nn_dnnl_net nn_dnnl_net;
int nn_dnnl_forward(gs_nn_net *net, nn_layer *l, const float *x, int batch);
int nn_dnnl_backward(gs_nn_net *net, nn_layer *l, const float *x,
                     const float *dy, float *dx, int batch);
void nn_dnnl_layer_free(nn_layer *l);
void nn_dnnl_net_free(gs_nn_net *net);
/* Blocked passes (training, no layer hooks): a conv whose output channels
 * are a multiple of the block writes oneDNN's channel-blocked layout, and
 * the layers after it (batch-norm and pooling on oneDNN; ReLU, dropout and
 * the residual add elementwise, which any common layout suits) keep it
 * until a flatten reorders it to NCHW. nn_dnnl_act_block: the block the
 * CPU's kernels use (16 on AVX-512, 8 on AVX2), 0 where none or
 * GRADSYNC_NN_BLOCKED=0. nn_dnnl_prepare, called with blk_pass set,
 * creates every primitive a blocked pass of this batch needs; -1 (and
 * blk_broken set, with a warning) when one cannot be made. */
int nn_dnnl_act_block(void);
int nn_dnnl_prepare(gs_nn_net *net, int batch);
/* Layers (per shape) that fell back to the BLAS kernels so far. */
long nn_dnnl_fallbacks(const gs_nn_net *net);
/* "2.6.3" */
const char *nn_dnnl_version(void);
/* 1 if oneDNN computes bf16 natively on this CPU (AVX-512 BF16 or AMX),
 * else 0 with the ISA it found in why. */
int nn_dnnl_bf16_native(char *why, size_t why_len);
#endif

/* Opaque optimizer (optim.c), visible to checkpoint.c. */
struct gs_nn_sgd {
  gs_nn_net *net;
  gs_nn_sgd_config cfg;
  /* total floats; zero at creation, so the first step gives v = g exactly
   * as torch's lazily cloned buffer does. */
  float *momentum_buf;
  /* the fused parallel update's workers (optim_fused.c); NULL: one thread */
  struct gs_nn_pool *pool;
};

/* SGD's elementwise update of n floats (optim.c) and the fused step over
 * the pool (optim_fused.c). */
void nn_sgd_update(const gs_nn_sgd_config *c, float *restrict w,
                   const float *restrict grad, float *restrict v, size_t n);
gs_status nn_sgd_step_fused(gs_nn_sgd *opt);

#endif /* GS_NN_INTERNAL_H */
