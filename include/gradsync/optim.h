/*
 * gradsync optimizers: one interface over the first-order SGD of nn.h and
 * second-order optimizers (K-FAC, gradsync/kfac.h), so that a trainer is
 * not hard-wired to one update rule; and the fused parallel update, which
 * applies SGD to every parameter in one multi-threaded pass over the flat
 * parameter array instead of a loop over tensors.
 *
 * Threads: an optimizer is used by one thread at a time (its own worker
 * threads, if any, run only inside gs_nn_optim_step).
 *
 * Ownership: gs_nn_optim_create takes the implementation `impl`; the
 * optimizer frees it through ops->destroy in gs_nn_optim_destroy. The net
 * must outlive every optimizer made over it.
 */
#ifndef GRADSYNC_OPTIM_H
#define GRADSYNC_OPTIM_H

#include <stddef.h>

#include "gradsync/core.h"
#include "gradsync/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gs_nn_optim gs_nn_optim;

/* ---- Layer hooks ------------------------------------------------------------
 * What a second-order optimizer needs from the net: each linear and conv2d
 * layer's input in forward and its output gradient in backward, handed over
 * as pointers into the net's own buffers (no copies). Hooked layers are
 * numbered 0 .. gs_nn_hook_layer_count - 1 in forward order (the order of
 * their weight tensors). */

typedef enum { GS_NN_HOOK_LINEAR = 0, GS_NN_HOOK_CONV } gs_nn_hook_kind;

typedef struct {
  gs_nn_hook_kind kind;
  const char *name;      /* the layer's name ("conv1", "fc2", ...) */
  size_t weight_index;   /* parameter index of the weight */
  size_t bias_index;     /* parameter index of the bias; SIZE_MAX: none */
  int d_in;              /* weight columns: in_features, or cin * k * k */
  int d_out;             /* weight rows: out_features, or cout */
  int spatial;           /* output positions per sample (oh * ow; 1 linear) */
  size_t in_size;        /* input floats per sample */
} gs_nn_layer_info;

/* forward: data = the layer's input x[batch][in_size], after the layer's
 * forward; it stays valid and unchanged until the next forward.
 * backward: data = the gradient of the loss with respect to the layer's
 * output (pre-activation, after a fused ReLU's mask), dy[batch][d_out]
 * [spatial], after the layer's parameter gradients are final; valid only
 * during the call. Hooks fire in training mode only (gs_nn_set_training),
 * so evaluation passes leave an optimizer's statistics alone. Both run on the thread calling gs_nn_forward /
 * gs_nn_backward and must not write the net's buffers. */
typedef void (*gs_nn_layer_io_fn)(void *ctx, size_t layer, const float *data,
                                  int batch);

/* The number of hooked layers of a finalized net (0 if not finalized). */
size_t gs_nn_hook_layer_count(gs_nn_net *net);
gs_status gs_nn_hook_layer_info(gs_nn_net *net, size_t layer,
                                gs_nn_layer_info *out);
/* Installs (or, with NULLs, removes) the hooks. */
gs_status gs_nn_set_layer_hooks(gs_nn_net *net, gs_nn_layer_io_fn forward,
                                gs_nn_layer_io_fn backward, void *ctx);
/* A conv layer's im2col patches of one image x[cin][h][w]:
 * col[d_in][spatial] (row r = input channel r / (k*k), kernel offset
 * r % (k*k); column = output position), rows ld >= spatial floats apart.
 * For a linear layer the input itself is the patch matrix (no call needed;
 * this copies x to col[d_in][1]). */
gs_status gs_nn_layer_patches(gs_nn_net *net, size_t layer, const float *x,
                              float *col, size_t ld);

/* What an implementation provides. step and name are required; step_param
 * may be NULL (gs_nn_optim_step_param then refuses: the optimizer needs
 * every gradient at once, as K-FAC's KL clip does); sgd may be NULL (no
 * state to checkpoint). */
typedef struct gs_nn_optim_ops {
  const char *name;                                 /* "sgd", "kfac" */
  gs_status (*step)(void *impl);                    /* all tensors */
  gs_status (*step_param)(void *impl, size_t index);/* one tensor */
  void (*set_lr)(void *impl, float lr);
  float (*lr)(const void *impl);
  /* The SGD whose momentum and lr a checkpoint carries. */
  gs_nn_sgd *(*sgd)(void *impl);
  void (*destroy)(void *impl);
} gs_nn_optim_ops;

/* Wraps an implementation. On failure impl is destroyed through ops. */
gs_status gs_nn_optim_create(gs_nn_optim **out, const gs_nn_optim_ops *ops,
                             void *impl);
void gs_nn_optim_destroy(gs_nn_optim *opt);

/* SGD (gs_nn_sgd) behind the interface. threads > 1 makes gs_nn_optim_step
 * the fused parallel update over that many threads (the caller's thread is
 * one of them); 0 or 1: a single pass on the caller's thread. */
gs_status gs_nn_optim_sgd_create(gs_nn_optim **out, gs_nn_net *net,
                                 const gs_nn_sgd_config *cfg, int threads);

const char *gs_nn_optim_name(const gs_nn_optim *opt);
gs_status gs_nn_optim_step(gs_nn_optim *opt);
gs_status gs_nn_optim_step_param(gs_nn_optim *opt, size_t index);
/* Whether step_param is available (per-tensor updates, e.g. under DeAR). */
int gs_nn_optim_has_step_param(const gs_nn_optim *opt);
void gs_nn_optim_set_lr(gs_nn_optim *opt, float lr);
float gs_nn_optim_lr(const gs_nn_optim *opt);
/* The state gs_nn_checkpoint_save/load carry (momentum, lr); NULL if none. */
gs_nn_sgd *gs_nn_optim_sgd(gs_nn_optim *opt);
/* The implementation passed to gs_nn_optim_create. */
void *gs_nn_optim_impl(gs_nn_optim *opt);

/* ---- The fused parallel update -------------------------------------------- */

/* Runs SGD's step over `threads` threads (>= 1): the flat parameter array is
 * cut into equal chunks aligned to 64 bytes, one per thread, and each thread
 * applies the same elementwise update as gs_nn_sgd_step, so the result is
 * bitwise the same as gs_nn_sgd_step and as gs_nn_sgd_step_param over every
 * tensor. The workers are started here and live until gs_nn_sgd_destroy or
 * the next call. */
gs_status gs_nn_sgd_set_threads(gs_nn_sgd *opt, int threads);
int gs_nn_sgd_threads(const gs_nn_sgd *opt);

/* The small thread pool behind it, usable by other optimizers: run(ctx, i)
 * for every i in [0, ntasks), spread over the pool's threads and the
 * caller's; returns when all are done. */
typedef struct gs_nn_pool gs_nn_pool;
gs_status gs_nn_pool_create(gs_nn_pool **out, int threads);
void gs_nn_pool_destroy(gs_nn_pool *pool);
int gs_nn_pool_threads(const gs_nn_pool *pool);
void gs_nn_pool_run(gs_nn_pool *pool, void (*run)(void *ctx, int task),
                    void *ctx, int ntasks);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_OPTIM_H */
