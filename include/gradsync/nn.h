/*
 * gradsync nn: a small single-threaded training engine (f32, NCHW) whose
 * backward pass reports each parameter gradient the moment it is final, so
 * that gradient communication overlaps the rest of the backward pass as it
 * does in a framework.
 *
 * Layers: linear, conv2d (oneDNN or im2col + OpenBLAS sgemm: see
 * "Backends" below), ReLU, max-pool,
 * average-pool, batch-norm, dropout, flatten, residual blocks; softmax
 * cross-entropy; SGD with momentum, Nesterov and weight decay; learning-rate
 * warm-up with step or cosine decay. Models: mlp, cnn (LeNet-like) and a
 * small ResNet for 28x28 inputs. Data: IDX files (plain or gzip) such as
 * Fashion-MNIST, a synthetic data set, and a distributed sampler.
 *
 * Threads: a gs_nn_net, gs_nn_sgd or gs_nn_sampler is used by one thread at a
 * time. The callbacks run on the thread that calls gs_nn_forward or
 * gs_nn_backward.
 *
 * Wiring with the engine (what the lead does):
 *   for i in 0 .. gs_nn_param_count(net)-1:           (forward order)
 *     p = gs_nn_param_at(net, i)
 *     gs_engine_register(engine, p->name, p->grad, p->count, GS_F32)
 *   gs_nn_set_callbacks(net, on_grad_ready, before_forward, engine)
 *     on_grad_ready(ctx, i)  -> grad_ready(engine, i)
 *     before_forward(ctx, i) -> wait_tensor(engine, i)        (DeAR only)
 *   each step: forward, loss, backward (callbacks fire, highest index
 *   first), engine wait, gs_nn_sgd_step (or gs_nn_sgd_step_param per tensor
 *   as each tensor's reduction completes).
 */
#ifndef GRADSYNC_NN_H
#define GRADSYNC_NN_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Networks --------------------------------------------------------------- */

typedef struct gs_nn_net gs_nn_net;

/* One parameter tensor. Parameters are numbered in forward order: index 0
 * is nearest the input; inside a residual block the main path comes before
 * the projection shortcut. The net owns every pointer here; they stay valid
 * (and at the same address) until gs_nn_net_destroy. */
typedef struct {
  const char *name;  /* "conv1.weight", "stage2.block0.bn1.bias", ... */
  float *weights;
  float *grad;       /* overwritten (not accumulated) by each backward */
  size_t count;
} gs_nn_param;

/* Called by gs_nn_backward once per parameter tensor, as soon as that
 * tensor's gradient is final and before the backward pass goes on to the
 * layers nearer the input: indices arrive in strictly decreasing order. The
 * callback may read the gradient and must not write it or the weights. */
typedef void (*gs_nn_grad_ready_fn)(void *ctx, size_t param_index);
/* Called by gs_nn_forward right before a layer first reads parameter
 * param_index (in increasing order), e.g. to wait for its update (DeAR). */
typedef void (*gs_nn_before_forward_fn)(void *ctx, size_t param_index);

typedef enum {
  GS_NN_INIT_KAIMING = 0, /* normal, std sqrt(2 / fan_in) (He et al. 2015, eq. 10) */
  GS_NN_INIT_XAVIER,      /* uniform, bound sqrt(6 / (fan_in + fan_out)) (Glorot 2010, eq. 16) */
} gs_nn_init;

/* A net for inputs of shape [batch, c, h, w] with batch <= max_batch. Layers
 * are then appended with gs_nn_add_* and the net is made usable by
 * gs_nn_finalize. */
gs_status gs_nn_net_create(gs_nn_net **out, int c, int h, int w, int max_batch);
void gs_nn_net_destroy(gs_nn_net *net);

/* Layer builders: each appends to the net (or to the open residual block)
 * and names its parameters "<name>.weight" / "<name>.bias"; name may be NULL
 * for an automatic one. Shapes are checked here. */
gs_status gs_nn_add_linear(gs_nn_net *net, const char *name, int out_features,
                           int bias);
gs_status gs_nn_add_conv2d(gs_nn_net *net, const char *name, int out_channels,
                           int kernel, int stride, int pad, int bias);
gs_status gs_nn_add_relu(gs_nn_net *net);
gs_status gs_nn_add_maxpool(gs_nn_net *net, int kernel, int stride);
/* kernel 0: global average pooling (kernel = input height and width). */
gs_status gs_nn_add_avgpool(gs_nn_net *net, int kernel, int stride);
gs_status gs_nn_add_batchnorm(gs_nn_net *net, const char *name);
gs_status gs_nn_add_dropout(gs_nn_net *net, float p);
gs_status gs_nn_add_flatten(gs_nn_net *net);

/* A residual block y = main(x) + shortcut(x). Layers added after
 * gs_nn_residual_begin form the main path; after gs_nn_residual_shortcut
 * they form the shortcut (none: identity); gs_nn_residual_end closes the
 * block and checks that both paths give the same shape. Blocks do not nest. */
gs_status gs_nn_residual_begin(gs_nn_net *net, const char *name);
gs_status gs_nn_residual_shortcut(gs_nn_net *net);
gs_status gs_nn_residual_end(gs_nn_net *net);
/* The ResNet basic block (He et al. 2016): conv3x3-BN-ReLU-conv3x3-BN plus
 * the input (through a 1x1 conv + BN where stride or width changes), then
 * ReLU. */
gs_status gs_nn_add_basic_block(gs_nn_net *net, const char *name,
                                int out_channels, int stride);

/* Allocates parameters, gradients and activations (nothing is allocated by
 * forward or backward after this) and initialises the weights from seed:
 * the same seed gives bitwise-identical weights on every rank. Biases and
 * batch-norm shifts start at 0, batch-norm scales at 1. */
gs_status gs_nn_finalize(gs_nn_net *net, gs_nn_init init, uint64_t seed);
/* Re-initialises the parameters (and batch-norm running statistics). */
gs_status gs_nn_init_params(gs_nn_net *net, gs_nn_init init, uint64_t seed);

/* Training mode (default) uses batch statistics and dropout; evaluation
 * mode uses running statistics and no dropout. */
void gs_nn_set_training(gs_nn_net *net, int training);
/* Seeds the dropout generator (default: the finalize seed). */
void gs_nn_set_rng_seed(gs_nn_net *net, uint64_t seed);
/* For tests: when frozen, dropout reuses the masks of the previous forward. */
void gs_nn_freeze_dropout(gs_nn_net *net, int frozen);
/* When on, backward also computes the gradient with respect to the input
 * (off by default: the first layer then skips that work). */
void gs_nn_set_input_grad(gs_nn_net *net, int on);
void gs_nn_set_callbacks(gs_nn_net *net, gs_nn_grad_ready_fn on_grad_ready,
                         gs_nn_before_forward_fn before_forward, void *ctx);

size_t gs_nn_param_count(const gs_nn_net *net);      /* tensors */
const gs_nn_param *gs_nn_param_at(const gs_nn_net *net, size_t index);
size_t gs_nn_param_total(const gs_nn_net *net);      /* scalars */
/* All parameters (and gradients) are slices of one contiguous buffer each,
 * in index order: flat[i] for i < gs_nn_param_total. */
float *gs_nn_weights_flat(gs_nn_net *net);
float *gs_nn_grads_flat(gs_nn_net *net);
/* Non-trainable state (batch-norm running means and variances), contiguous;
 * count may be 0. */
float *gs_nn_buffers_flat(gs_nn_net *net, size_t *count);
size_t gs_nn_output_size(const gs_nn_net *net);   /* per sample (classes) */
size_t gs_nn_input_size(const gs_nn_net *net);    /* per sample, c*h*w */
int gs_nn_max_batch(const gs_nn_net *net);
/* One line per layer: kind, name, output shape, parameters. */
void gs_nn_net_print(const gs_nn_net *net, void *file /* FILE* */);

/* Forward pass over batch samples x[batch][c][h][w]. x must stay unchanged
 * until the next backward returns. *logits points into the net (valid until
 * the next forward). */
gs_status gs_nn_forward(gs_nn_net *net, const float *x, int batch,
                        const float **logits);
/* Mean softmax cross-entropy of the last forward's logits against labels in
 * [0, classes); also stores the gradient of that loss for gs_nn_backward.
 * correct (may be NULL) receives the number of argmax hits. */
gs_status gs_nn_loss(gs_nn_net *net, const int32_t *labels, float *loss,
                     int *correct);
/* Backward from the gradient stored by gs_nn_loss. */
gs_status gs_nn_backward(gs_nn_net *net);
/* Backward from an arbitrary output gradient dy[batch][classes]. */
gs_status gs_nn_backward_from(gs_nn_net *net, const float *dy);
/* The gradient with respect to the last forward's input (NULL unless
 * gs_nn_set_input_grad was on during backward). */
const float *gs_nn_input_grad(const gs_nn_net *net);

/* The first parameter, in backward order (highest index first), whose
 * gradient holds a NaN or an infinity: its name, or NULL if all are finite.
 * index may be NULL. */
const char *gs_nn_first_nonfinite_grad(const gs_nn_net *net, size_t *index);

/* Softmax cross-entropy on its own: loss = mean over rows of
 * -log softmax(logits)[label]; dlogits (may be NULL) = (softmax - onehot) /
 * batch. */
gs_status gs_nn_softmax_ce(const float *logits, const int32_t *labels,
                           int batch, int classes, float *dlogits,
                           float *loss, int *correct);

/* ---- Backends and threads ------------------------------------------------ */

/* The kernels that run the layers: "dnnl", oneDNN's primitives (built when
 * the library was configured with GRADSYNC_NN_BACKEND=dnnl, the default
 * where oneDNN is installed), or "blas", im2col + OpenBLAS's sgemm and the
 * library's own loops. A net starts on $GRADSYNC_NN_BACKEND if set (an
 * unknown or unbuilt name makes gs_nn_net_create fail), else on
 * gs_nn_default_backend(). Both give the same results within float
 * rounding; gradients land in the same buffers in the same layout (OIHW
 * conv weights), so the callbacks, optimizers and hooks see no difference.
 * Where oneDNN has no primitive for a layer's shape, that layer runs on the
 * BLAS kernels (with one warning). May be called between passes. */
gs_status gs_nn_set_backend(gs_nn_net *net, const char *name);
const char *gs_nn_backend(const gs_nn_net *net);
const char *gs_nn_default_backend(void);
/* Whether this build has the named backend. */
int gs_nn_backend_available(const char *name);

/* The precision the convolutions and linear layers compute in: "fp32"
 * (the default), or "bf16": bfloat16 inputs, weights and output gradients
 * in oneDNN's kernels with fp32 accumulation, fp32 outputs and fp32 weight
 * and bias gradients. The weights the optimizer updates stay fp32 (the
 * master copy; each pass converts them), and so does everything else
 * (pooling, batch-norm, the loss, the gradients the engine reduces). bf16
 * needs the dnnl backend and a CPU whose kernels compute bf16 natively
 * (AVX-512 BF16 or AMX: gs_nn_bf16_native); elsewhere GS_ERR_UNSUPPORTED
 * with a message saying which. A net starts on $GRADSYNC_NN_PRECISION if
 * set, else fp32. May be called between passes (primitives are rebuilt). */
gs_status gs_nn_set_precision(gs_nn_net *net, const char *name);
const char *gs_nn_precision(const gs_nn_net *net);
/* Whether this CPU and build compute bf16 natively (see above); if not and
 * why is given, a sentence saying why (the ISA oneDNN found, or the build). */
int gs_nn_bf16_native(char *why, size_t why_len);

/* Compute threads of the layers, process-wide: OpenBLAS's and, on the
 * dnnl backend, oneDNN's OpenMP threads (set on the calling thread before
 * each layer, since OpenMP's count is a per-thread setting). Ranks sharing
 * a machine's cores set it to cores / ranks so that their pools do not
 * oversubscribe the cores. 0 (the default): the libraries' own defaults
 * (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, else one per core). */
void gs_nn_set_threads(int threads);
int gs_nn_threads(void);

/* ---- Models ---------------------------------------------------------------- */

typedef enum {
  GS_NN_MODEL_MLP = 0, /* 784-256-128-10, ReLU */
  GS_NN_MODEL_CNN,     /* conv5x5(32)-pool-conv5x5(64)-pool-fc512-fc10 */
  GS_NN_MODEL_RESNET,  /* conv3x3(16) + 3 stages x 2 basic blocks (16/32/64) */
  GS_NN_MODEL_COUNT
} gs_nn_model;

typedef struct {
  int c, h, w;    /* input shape; 0: 1x28x28 */
  int classes;    /* 0: 10 */
  float dropout;  /* cnn/mlp: dropout before the last linear layer; 0: none */
  gs_nn_init init;
} gs_nn_model_options;

const char *gs_nn_model_name(gs_nn_model model);
gs_status gs_nn_model_parse(const char *name, gs_nn_model *out);
/* Builds and finalizes a model; opts may be NULL for the defaults. */
gs_status gs_nn_model_create(gs_nn_net **out, gs_nn_model model,
                             int max_batch, uint64_t seed,
                             const gs_nn_model_options *opts);

/* ---- Optimizer and learning-rate schedule ------------------------------- */

typedef struct {
  float lr;
  float momentum;      /* 0: plain SGD */
  float weight_decay;  /* L2, added to the gradient (as torch.optim.SGD) */
  int nesterov;
} gs_nn_sgd_config;

typedef struct gs_nn_sgd gs_nn_sgd;

/* SGD over all parameters of net (which must outlive it), as
 * torch.optim.SGD with dampening 0:
 *   g = grad + wd * w;  v = mu * v + g;  g = nesterov ? g + mu * v : v;
 *   w -= lr * g. */
gs_status gs_nn_sgd_create(gs_nn_sgd **out, gs_nn_net *net,
                           const gs_nn_sgd_config *cfg);
void gs_nn_sgd_destroy(gs_nn_sgd *opt);
void gs_nn_sgd_set_lr(gs_nn_sgd *opt, float lr);
float gs_nn_sgd_lr(const gs_nn_sgd *opt);
gs_status gs_nn_sgd_step(gs_nn_sgd *opt);
/* Updates one parameter tensor only (DeAR: as soon as its reduction ends). */
gs_status gs_nn_sgd_step_param(gs_nn_sgd *opt, size_t index);
/* The same update on n flat floats outside a gs_nn_sgd: w, grad and the
 * momentum buffer v (for a parameter server's shard). */
void gs_nn_sgd_update(const gs_nn_sgd_config *cfg, float *w,
                      const float *grad, float *v, size_t n);
/* The momentum buffers, flat, gs_nn_param_total floats. */
float *gs_nn_sgd_momentum_flat(gs_nn_sgd *opt);

typedef enum {
  GS_NN_LR_CONSTANT = 0,
  GS_NN_LR_STEP,   /* base * gamma^floor((s - warmup) / step_size) */
  GS_NN_LR_COSINE, /* min + (base - min)(1 + cos(pi t / T)) / 2, Loshchilov &
                      Hutter 2017 (SGDR, eq. 5) without restarts */
} gs_nn_lr_decay;

typedef struct {
  float base_lr;
  long warmup_steps;   /* linear: base * (s + 1) / warmup for s < warmup */
  gs_nn_lr_decay decay;
  long step_size;      /* STEP */
  float gamma;         /* STEP */
  long total_steps;    /* COSINE: T = total - warmup; constant min after */
  float min_lr;        /* COSINE */
} gs_nn_lr_schedule;

/* The learning rate for step s (0-based; steps may be iterations or epochs,
 * as the caller counts them). */
float gs_nn_lr_at(const gs_nn_lr_schedule *sched, long step);

/* ---- Data ------------------------------------------------------------------ */

/* An IDX file (LeCun's MNIST format) with unsigned-byte data. */
typedef struct {
  int ndims;
  uint32_t dims[4];
  size_t count;   /* product of dims */
  uint8_t *data;  /* owned; gs_nn_idx_free */
} gs_nn_idx;

/* Reads path, gzip-compressed or plain (zlib detects which). A missing
 * file, a bad magic number, an unsupported type, a truncated body or
 * trailing bytes give GS_ERR_IO or GS_ERR_PARSE naming the path. */
gs_status gs_nn_idx_read(const char *path, gs_nn_idx *out);
void gs_nn_idx_free(gs_nn_idx *idx);

typedef struct {
  size_t n;
  int c, h, w, classes;
  float *images;   /* n * c * h * w, normalised */
  int32_t *labels; /* n */
  /* 0: images and labels are heap memory the data set owns; else they lie
   * in one read-only mapping of this many bytes from images on (a data
   * cache's file), which gs_nn_dataset_free unmaps. */
  size_t mapped;
} gs_nn_dataset;

/* Where Debian's dataset-fashion-mnist package puts the files. */
#define GS_NN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Loads Fashion-MNIST's train (60,000) or test (10,000) split from dir
 * (NULL: $GRADSYNC_FASHION_MNIST_DIR, else GS_NN_FASHION_MNIST_DIR).
 * Pixels become (x / 255 - 0.2860) / 0.3530. */
gs_status gs_nn_fashion_mnist_load(const char *dir, int train,
                                   gs_nn_dataset *out);
/* A seeded, linearly separable data set: per-class random prototypes (one
 * standard normal draw per pixel) plus Gaussian noise of standard deviation
 * noise, scaled by 1 / sqrt(1 + noise^2) to unit variance per pixel, as a
 * normalised real data set has. */
gs_status gs_nn_dataset_synthetic(gs_nn_dataset *out, size_t n, int c, int h,
                                  int w, int classes, float noise,
                                  uint64_t seed);
/* The same, one split of it: every split of a seed shares its prototypes;
 * split 0 is gs_nn_dataset_synthetic's samples, and each other split
 * (a test set: 1) draws samples of its own. */
gs_status gs_nn_dataset_synthetic_split(gs_nn_dataset *out, size_t n, int c,
                                        int h, int w, int classes, float noise,
                                        uint64_t seed, int split);
void gs_nn_dataset_free(gs_nn_dataset *ds);
/* Copies samples idx[0..batch) into x and y. x must hold batch * c * h * w
 * floats of the data set's shape: gs_nn_dataset_gather_n checks that. */
gs_status gs_nn_dataset_gather(const gs_nn_dataset *ds, const size_t *idx,
                               int batch, float *x, int32_t *y);
/* gs_nn_dataset_gather into an x of x_count floats: a batch that does not
 * fit (a data set whose images are larger than the buffer's owner, a net,
 * expects) is GS_ERR_INVALID_ARG, never a write past the buffer. */
gs_status gs_nn_dataset_gather_n(const gs_nn_dataset *ds, const size_t *idx,
                                 int batch, float *x, size_t x_count, int32_t *y);

/* Shards each epoch's seeded shuffle of [0, n) across ranks: rank r takes
 * perm[r], perm[r + size], ... Every rank computes the same permutation.
 * With drop_remainder, the last n % size entries of the permutation are left
 * out so that every rank has the same count; without it, the shards cover
 * the epoch exactly once and their counts differ by at most one. */
typedef struct {
  size_t n, count;
  int rank, size, drop_remainder;
  uint64_t seed;
  long epoch;
  size_t *perm;    /* n, owned */
  size_t *indices; /* count, owned */
} gs_nn_sampler;

gs_status gs_nn_sampler_init(gs_nn_sampler *s, size_t n, int rank, int size,
                             uint64_t seed, int drop_remainder);
gs_status gs_nn_sampler_set_epoch(gs_nn_sampler *s, long epoch);
void gs_nn_sampler_free(gs_nn_sampler *s);

/* ---- State files ---------------------------------------------------------- */

/* A file written atomically and durably, ending in the crc32 (zlib) of
 * what precedes it: create opens a temporary file beside path; write
 * appends; commit writes the checksum, fsyncs, renames the temporary file
 * over path and fsyncs the directory; abort (after a failed write) removes
 * the temporary file. A reader sees the old file or the new one, never a
 * mix. `what` names the kind of file in messages ("checkpoint"). */
typedef struct {
  int fd;
  const char *path, *what; /* borrowed until commit or abort */
  char *tmp;
  unsigned long crc;
} gs_nn_file;

gs_status gs_nn_file_create(gs_nn_file *f, const char *path, const char *what);
gs_status gs_nn_file_write(gs_nn_file *f, const void *buf, size_t n);
/* On failure the temporary file is already gone (no abort needed). */
gs_status gs_nn_file_commit(gs_nn_file *f);
/* commit in two halves, for a caller that makes the file durable in the
 * background: finish appends the checksum (the bytes are then in the page
 * cache: fast; abort after a failure); sync fsyncs, renames over path and
 * fsyncs the directory (slow; from any thread; on failure the temporary
 * file is already gone). */
gs_status gs_nn_file_finish(gs_nn_file *f);
gs_status gs_nn_file_sync(gs_nn_file *f);
void gs_nn_file_abort(gs_nn_file *f);
/* Reads a whole regular file of at most max bytes into *data (the caller's,
 * gs_free); a larger one fails before anything is allocated for it. */
gs_status gs_nn_file_read(const char *path, const char *what, size_t max,
                          unsigned char **data, size_t *size);
/* Whether data's last 4 bytes are the crc32 of the rest. */
int gs_nn_file_crc_ok(const unsigned char *data, size_t size);

/* ---- Checkpoints ---------------------------------------------------------- */

typedef struct {
  int64_t epoch;
  int64_t step;
  uint64_t seed;  /* the caller's data seed, stored as given */
} gs_nn_train_state;

/* Writes all parameters, batch-norm buffers, the dropout generator, the
 * optimizer's momentum and lr (opt may be NULL) and st to path atomically:
 * a temporary file in the same directory, fsync, rename, fsync of the
 * directory. A reader sees the old file or the new one, never a mix. */
gs_status gs_nn_checkpoint_save(const char *path, const gs_nn_net *net,
                                const gs_nn_sgd *opt,
                                const gs_nn_train_state *st);
/* The first half of a save: everything written into *out's temporary file
 * (a copy of the state as it is now), not yet durable nor in place; the
 * caller finishes with gs_nn_file_sync (or gs_nn_file_abort), possibly on
 * another thread while training goes on. */
gs_status gs_nn_checkpoint_save_begin(const char *path, const gs_nn_net *net,
                                      const gs_nn_sgd *opt, const gs_nn_train_state *st,
                                      gs_nn_file *out);
/* Restores what save wrote into a net of the same architecture (the
 * parameter count and every tensor's size are checked) and opt (may be NULL;
 * then the momentum in the file is skipped). Bad magic, a different
 * architecture, truncation or a checksum mismatch give GS_ERR_PARSE and
 * leave net and opt unchanged. */
gs_status gs_nn_checkpoint_load(const char *path, gs_nn_net *net,
                                gs_nn_sgd *opt, gs_nn_train_state *st);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_NN_H */
