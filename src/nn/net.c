/*
 * The net: building a sequence of layers (with residual blocks), the
 * parameter table, allocation of every buffer at finalize, and the forward
 * and backward passes that walk the layers.
 *
 * Parameters are indexed in the order layers are built, which is forward
 * order (a residual block's main path before its shortcut). Backward visits
 * the shortcut before the main path, so gradients become final in strictly
 * decreasing index order: the order a framework's autograd reports them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cblas.h>

#include "nn_internal.h"

static const char *kind_name(nn_kind k) {
  switch (k) {
    case NN_LINEAR: return "linear";
    case NN_CONV: return "conv2d";
    case NN_RELU: return "relu";
    case NN_MAXPOOL: return "maxpool";
    case NN_AVGPOOL: return "avgpool";
    case NN_BATCHNORM: return "batchnorm";
    case NN_DROPOUT: return "dropout";
    case NN_FLATTEN: return "flatten";
    case NN_RESIDUAL: return "residual";
  }
  return "?";
}

/* ---- Building ------------------------------------------------------------ */

gs_status gs_nn_net_create(gs_nn_net **out, int c, int h, int w,
                           int max_batch) {
  if (!out)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_net_create: out is NULL");
  *out = NULL;
  if (c <= 0 || h <= 0 || w <= 0 || max_batch <= 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_net_create: input %dx%dx%d, max batch %d: all must "
                    "be positive", c, h, w, max_batch);
  gs_nn_net *net = gs_calloc(1, sizeof *net);
  if (!net) return GS_ERR_NOMEM;
  net->in = (nn_shape){c, h, w};
  net->max_batch = max_batch;
  net->training = 1;
  const char *be = getenv("GRADSYNC_NN_BACKEND");
  gs_status st = gs_nn_set_backend(net, be && *be ? be : gs_nn_default_backend());
  if (st != GS_OK) {
    char why[256];
    snprintf(why, sizeof why, "%s", gs_last_error());
    gs_free(net);
    return gs_error(st, "gs_nn_net_create: GRADSYNC_NN_BACKEND=%s: %s", be, why);
  }
  const char *prec = getenv("GRADSYNC_NN_PRECISION");
  if (prec && *prec && (st = gs_nn_set_precision(net, prec)) != GS_OK) {
    char why[256];
    snprintf(why, sizeof why, "%s", gs_last_error());
    gs_free(net);
    return gs_error(st, "gs_nn_net_create: GRADSYNC_NN_PRECISION=%s: %s", prec, why);
  }
  *out = net;
  return GS_OK;
}

/* ---- Backends and threads ------------------------------------------------ */

const char *gs_nn_default_backend(void) {
#ifdef GRADSYNC_NN_DNNL
  return "dnnl";
#else
  return "blas";
#endif
}

int gs_nn_backend_available(const char *name) {
  if (!name) return 0;
  if (strcmp(name, "blas") == 0) return 1;
#ifdef GRADSYNC_NN_DNNL
  if (strcmp(name, "dnnl") == 0) return 1;
#endif
  return 0;
}

gs_status gs_nn_set_backend(gs_nn_net *net, const char *name) {
  if (!net || !name)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_set_backend: net or name is NULL");
  if (strcmp(name, "blas") != 0 && strcmp(name, "dnnl") != 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "unknown nn backend '%s' (expected dnnl or blas)", name);
  if (!gs_nn_backend_available(name))
    return gs_error(GS_ERR_UNSUPPORTED,
                    "nn backend '%s' is not in this build (configured with "
                    "GRADSYNC_NN_BACKEND=blas, or oneDNN was not found)", name);
  net->backend = strcmp(name, "dnnl") == 0 ? NN_BACKEND_DNNL : NN_BACKEND_BLAS;
  return GS_OK;
}

const char *gs_nn_backend(const gs_nn_net *net) {
  return net && net->backend == NN_BACKEND_DNNL ? "dnnl" : "blas";
}

int gs_nn_bf16_native(char *why, size_t why_len) {
#ifdef GRADSYNC_NN_DNNL
  return nn_dnnl_bf16_native(why, why_len);
#else
  if (why && why_len)
    snprintf(why, why_len, "this build has no oneDNN (configured with "
                           "GRADSYNC_NN_BACKEND=blas, or oneDNN was not found)");
  return 0;
#endif
}

gs_status gs_nn_set_precision(gs_nn_net *net, const char *name) {
  if (!net || !name)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_set_precision: net or name is NULL");
  if (strcmp(name, "fp32") == 0) {
    net->precision = NN_PREC_FP32;
    return GS_OK;
  }
  if (strcmp(name, "bf16") != 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "unknown precision '%s' (expected fp32 or bf16)", name);
  if (net->backend != NN_BACKEND_DNNL)
    return gs_error(GS_ERR_UNSUPPORTED,
                    "precision bf16 needs the dnnl backend (this net runs on "
                    "'%s')", gs_nn_backend(net));
  char why[160];
  if (!gs_nn_bf16_native(why, sizeof why))
    return gs_error(GS_ERR_UNSUPPORTED,
                    "precision bf16: %s; it would run emulated, slower than "
                    "fp32 (use fp32 here)", why);
  net->precision = NN_PREC_BF16;
  return GS_OK;
}

const char *gs_nn_precision(const gs_nn_net *net) {
  return net && net->precision == NN_PREC_BF16 ? "bf16" : "fp32";
}

static int nn_threads; /* 0: the libraries' defaults */

void gs_nn_set_threads(int threads) {
  nn_threads = threads > 0 ? threads : 0;
  if (nn_threads) openblas_set_num_threads(nn_threads);
}

int gs_nn_threads(void) { return nn_threads; }

/* ---- Buffers ---------------------------------------------------------------- */

#define NN_HUGE_PAGE ((size_t)2 << 20)

void *nn_buf_alloc(size_t bytes) {
  size_t align = bytes >= 2 * NN_HUGE_PAGE ? NN_HUGE_PAGE : 64;
  if (bytes > SIZE_MAX - align - sizeof(void *)) {
    gs_error(GS_ERR_NOMEM, "nn: a buffer of %zu bytes is too large", bytes);
    return NULL;
  }
  char *raw = gs_malloc(bytes + align + sizeof(void *));
  if (!raw) return NULL;
  uintptr_t a = ((uintptr_t)(raw + sizeof(void *)) + align - 1) & ~(uintptr_t)(align - 1);
  char *p = (char *)a;
  memcpy(p - sizeof(void *), &raw, sizeof raw);
#ifdef MADV_HUGEPAGE
  if (align == NN_HUGE_PAGE)
    (void)madvise(p, bytes & ~(NN_HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
  memset(p, 0, bytes);
  return p;
}

void nn_buf_free(void *p) {
  if (!p) return;
  char *raw;
  memcpy(&raw, (char *)p - sizeof(void *), sizeof raw);
  gs_free(raw);
}

static void seq_free(nn_seq *s);

static void layer_free(nn_layer *l) {
  if (!l) return;
  if (l->kind != NN_FLATTEN && !l->fused_away) nn_buf_free(l->y);
  if (!l->fused_away) nn_buf_free(l->dy);
  nn_buf_free(l->mean);
  nn_buf_free(l->inv_std);
  nn_buf_free(l->var);
#ifdef GRADSYNC_NN_DNNL
  nn_dnnl_layer_free(l);
#endif
  nn_buf_free(l->mask);
  nn_buf_free(l->argmax);
  nn_buf_free(l->dx_tmp);
  nn_buf_free(l->wt);
  nn_buf_free(l->dwt);
  nn_buf_free(l->stats);
  nn_buf_free(l->blk_y);
  seq_free(&l->main);
  seq_free(&l->shortcut);
  gs_free(l);
}

static void seq_free(nn_seq *s) {
  for (int i = 0; i < s->n; i++) layer_free(s->layers[i]);
  gs_free(s->layers);
  s->layers = NULL;
  s->n = s->cap = 0;
}

void gs_nn_net_destroy(gs_nn_net *net) {
  if (!net) return;
  nn_hooks_free(net);
  seq_free(&net->top);
#ifdef GRADSYNC_NN_DNNL
  nn_dnnl_net_free(net);
#endif
  if (net->open_block) layer_free(net->open_block);
  for (size_t i = 0; i < net->nparams; i++) gs_free(net->names[i]);
  gs_free(net->names);
  gs_free(net->params);
  gs_free(net->param_offset);
  nn_buf_free(net->flat_w);
  nn_buf_free(net->flat_g);
  nn_buf_free(net->buffers);
  nn_buf_free(net->col);
  nn_buf_free(net->gemm_tmp);
  nn_buf_free(net->dx_in);
  nn_buf_free(net->dlogits);
  gs_free(net);
}

static nn_seq *current_seq(gs_nn_net *net) {
  if (!net->open_block) return &net->top;
  return net->in_shortcut ? &net->open_block->shortcut : &net->open_block->main;
}

static nn_shape current_shape(gs_nn_net *net) {
  nn_seq *s = current_seq(net);
  if (s->n) return s->layers[s->n - 1]->out;
  if (net->open_block) return net->open_block->in;
  if (net->top.n) return net->top.layers[net->top.n - 1]->out;
  return net->in;
}

static gs_status check_building(gs_nn_net *net, const char *what) {
  if (!net) return gs_error(GS_ERR_INVALID_ARG, "%s: net is NULL", what);
  if (net->finalized)
    return gs_error(GS_ERR_STATE, "%s: the net is already finalized", what);
  return GS_OK;
}

static gs_status seq_push(nn_seq *s, nn_layer *l) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 8;
    nn_layer **p = gs_realloc(s->layers, (size_t)cap * sizeof *p);
    if (!p) return GS_ERR_NOMEM;
    s->layers = p;
    s->cap = cap;
  }
  s->layers[s->n++] = l;
  return GS_OK;
}

static nn_layer *layer_new(gs_nn_net *net, nn_kind kind, const char *name) {
  nn_layer *l = gs_calloc(1, sizeof *l);
  if (!l) return NULL;
  l->kind = kind;
  l->in = current_shape(net);
  l->out = l->in;
  if (name && *name)
    snprintf(l->name, sizeof l->name, "%s", name);
  else
    snprintf(l->name, sizeof l->name, "%s%d", kind_name(kind),
             net->layer_counter);
  net->layer_counter++;
  return l;
}

/* Records one parameter tensor of l; its storage comes at finalize. */
static gs_status add_param(gs_nn_net *net, nn_layer *l, const char *suffix,
                           size_t count) {
  if (net->nparams == net->cap_params) {
    size_t cap = net->cap_params ? 2 * net->cap_params : 16;
    char **names = gs_realloc(net->names, cap * sizeof *names);
    if (!names) return GS_ERR_NOMEM;
    net->names = names;
    size_t *off = gs_realloc(net->param_offset, cap * sizeof *off);
    if (!off) return GS_ERR_NOMEM;
    net->param_offset = off;
    net->cap_params = cap;
  }
  size_t len = strlen(l->name) + strlen(suffix) + 2;
  char *name = gs_malloc(len);
  if (!name) return GS_ERR_NOMEM;
  snprintf(name, len, "%s.%s", l->name, suffix);
  if (l->nparams == 0) l->param0 = net->nparams;
  l->nparams++;
  net->names[net->nparams] = name;
  net->param_offset[net->nparams] = count; /* the count, until finalize */
  net->nparams++;
  return GS_OK;
}

static gs_status push_layer(gs_nn_net *net, nn_layer *l) {
  l->in_size = nn_shape_size(l->in);
  l->out_size = nn_shape_size(l->out);
  gs_status st = seq_push(current_seq(net), l);
  if (st != GS_OK) layer_free(l);
  return st;
}

gs_status gs_nn_add_linear(gs_nn_net *net, const char *name, int out_features,
                           int bias) {
  GS_CHECK(check_building(net, "gs_nn_add_linear"));
  if (out_features <= 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_add_linear: out_features %d must be positive",
                    out_features);
  nn_layer *l = layer_new(net, NN_LINEAR, name);
  if (!l) return GS_ERR_NOMEM;
  l->out = (nn_shape){out_features, 1, 1};
  l->has_bias = bias != 0;
  gs_status st = add_param(net, l, "weight",
                           (size_t)out_features * nn_shape_size(l->in));
  if (st == GS_OK && bias) st = add_param(net, l, "bias", (size_t)out_features);
  if (st != GS_OK) {
    layer_free(l);
    return st;
  }
  return push_layer(net, l);
}

gs_status gs_nn_add_conv2d(gs_nn_net *net, const char *name, int out_channels,
                           int kernel, int stride, int pad, int bias) {
  GS_CHECK(check_building(net, "gs_nn_add_conv2d"));
  nn_shape in = current_shape(net);
  if (out_channels <= 0 || kernel <= 0 || stride <= 0 || pad < 0 ||
      in.h + 2 * pad < kernel || in.w + 2 * pad < kernel)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_add_conv2d: %d channels, kernel %d, stride %d, pad "
                    "%d do not fit an input of %dx%dx%d",
                    out_channels, kernel, stride, pad, in.c, in.h, in.w);
  nn_layer *l = layer_new(net, NN_CONV, name);
  if (!l) return GS_ERR_NOMEM;
  l->k = kernel;
  l->stride = stride;
  l->pad = pad;
  l->has_bias = bias != 0;
  l->out = (nn_shape){out_channels, (in.h + 2 * pad - kernel) / stride + 1,
                      (in.w + 2 * pad - kernel) / stride + 1};
  gs_status st = add_param(net, l, "weight",
                           (size_t)out_channels * (size_t)in.c *
                               (size_t)kernel * (size_t)kernel);
  if (st == GS_OK && bias) st = add_param(net, l, "bias", (size_t)out_channels);
  if (st != GS_OK) {
    layer_free(l);
    return st;
  }
  return push_layer(net, l);
}

gs_status gs_nn_add_relu(gs_nn_net *net) {
  GS_CHECK(check_building(net, "gs_nn_add_relu"));
  nn_layer *l = layer_new(net, NN_RELU, NULL);
  if (!l) return GS_ERR_NOMEM;
  return push_layer(net, l);
}

static gs_status add_pool(gs_nn_net *net, nn_kind kind, int kernel,
                          int stride) {
  const char *what = kind == NN_MAXPOOL ? "gs_nn_add_maxpool" : "gs_nn_add_avgpool";
  GS_CHECK(check_building(net, what));
  nn_shape in = current_shape(net);
  if (kind == NN_AVGPOOL && kernel == 0) {
    if (in.h != in.w)
      return gs_error(GS_ERR_INVALID_ARG,
                      "%s: global pooling needs a square input, not %dx%d",
                      what, in.h, in.w);
    kernel = in.h;
    stride = in.h;
  }
  if (kernel <= 0 || stride <= 0 || kernel > in.h || kernel > in.w)
    return gs_error(GS_ERR_INVALID_ARG,
                    "%s: kernel %d, stride %d do not fit an input of %dx%d",
                    what, kernel, stride, in.h, in.w);
  nn_layer *l = layer_new(net, kind, NULL);
  if (!l) return GS_ERR_NOMEM;
  l->k = kernel;
  l->stride = stride;
  l->out = (nn_shape){in.c, (in.h - kernel) / stride + 1,
                      (in.w - kernel) / stride + 1};
  return push_layer(net, l);
}

gs_status gs_nn_add_maxpool(gs_nn_net *net, int kernel, int stride) {
  return add_pool(net, NN_MAXPOOL, kernel, stride);
}

gs_status gs_nn_add_avgpool(gs_nn_net *net, int kernel, int stride) {
  return add_pool(net, NN_AVGPOOL, kernel, stride);
}

gs_status gs_nn_add_batchnorm(gs_nn_net *net, const char *name) {
  GS_CHECK(check_building(net, "gs_nn_add_batchnorm"));
  nn_layer *l = layer_new(net, NN_BATCHNORM, name);
  if (!l) return GS_ERR_NOMEM;
  l->eps = 1e-5f;
  l->momentum = 0.1f;
  l->buf0 = net->nbuffers;
  net->nbuffers += 2 * (size_t)l->in.c;
  gs_status st = add_param(net, l, "weight", (size_t)l->in.c);
  if (st == GS_OK) st = add_param(net, l, "bias", (size_t)l->in.c);
  if (st != GS_OK) {
    layer_free(l);
    return st;
  }
  return push_layer(net, l);
}

gs_status gs_nn_add_dropout(gs_nn_net *net, float p) {
  GS_CHECK(check_building(net, "gs_nn_add_dropout"));
  if (!(p >= 0.0f && p < 1.0f))
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_add_dropout: p = %g is not in [0, 1)", (double)p);
  nn_layer *l = layer_new(net, NN_DROPOUT, NULL);
  if (!l) return GS_ERR_NOMEM;
  l->p = p;
  return push_layer(net, l);
}

gs_status gs_nn_add_flatten(gs_nn_net *net) {
  GS_CHECK(check_building(net, "gs_nn_add_flatten"));
  nn_layer *l = layer_new(net, NN_FLATTEN, NULL);
  if (!l) return GS_ERR_NOMEM;
  l->out = (nn_shape){(int)nn_shape_size(l->in), 1, 1};
  return push_layer(net, l);
}

gs_status gs_nn_residual_begin(gs_nn_net *net, const char *name) {
  GS_CHECK(check_building(net, "gs_nn_residual_begin"));
  if (net->open_block)
    return gs_error(GS_ERR_STATE,
                    "gs_nn_residual_begin: block '%s' is still open (blocks "
                    "do not nest)", net->open_block->name);
  nn_layer *l = layer_new(net, NN_RESIDUAL, name);
  if (!l) return GS_ERR_NOMEM;
  net->open_block = l;
  net->in_shortcut = 0;
  return GS_OK;
}

gs_status gs_nn_residual_shortcut(gs_nn_net *net) {
  GS_CHECK(check_building(net, "gs_nn_residual_shortcut"));
  if (!net->open_block || net->in_shortcut)
    return gs_error(GS_ERR_STATE,
                    "gs_nn_residual_shortcut: no residual block's main path "
                    "is open");
  net->in_shortcut = 1;
  return GS_OK;
}

gs_status gs_nn_residual_end(gs_nn_net *net) {
  GS_CHECK(check_building(net, "gs_nn_residual_end"));
  nn_layer *l = net->open_block;
  if (!l)
    return gs_error(GS_ERR_STATE, "gs_nn_residual_end: no residual block is open");
  nn_shape a = l->main.n ? l->main.layers[l->main.n - 1]->out : l->in;
  nn_shape b = l->shortcut.n ? l->shortcut.layers[l->shortcut.n - 1]->out : l->in;
  if (a.c != b.c || a.h != b.h || a.w != b.w)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_residual_end: block '%s': main path gives %dx%dx%d, "
                    "shortcut %dx%dx%d", l->name, a.c, a.h, a.w, b.c, b.h, b.w);
  l->out = a;
  net->open_block = NULL;
  net->in_shortcut = 0;
  return push_layer(net, l);
}

gs_status gs_nn_add_basic_block(gs_nn_net *net, const char *name,
                                int out_channels, int stride) {
  char n[64];
  const char *base = name ? name : "block";
  GS_CHECK(check_building(net, "gs_nn_add_basic_block"));
  nn_shape in = current_shape(net);
  GS_CHECK(gs_nn_residual_begin(net, base));
  snprintf(n, sizeof n, "%s.conv1", base);
  GS_CHECK(gs_nn_add_conv2d(net, n, out_channels, 3, stride, 1, 0));
  snprintf(n, sizeof n, "%s.bn1", base);
  GS_CHECK(gs_nn_add_batchnorm(net, n));
  GS_CHECK(gs_nn_add_relu(net));
  snprintf(n, sizeof n, "%s.conv2", base);
  GS_CHECK(gs_nn_add_conv2d(net, n, out_channels, 3, 1, 1, 0));
  snprintf(n, sizeof n, "%s.bn2", base);
  GS_CHECK(gs_nn_add_batchnorm(net, n));
  GS_CHECK(gs_nn_residual_shortcut(net));
  if (stride != 1 || in.c != out_channels) {
    snprintf(n, sizeof n, "%s.proj", base);
    GS_CHECK(gs_nn_add_conv2d(net, n, out_channels, 1, stride, 0, 0));
    snprintf(n, sizeof n, "%s.proj_bn", base);
    GS_CHECK(gs_nn_add_batchnorm(net, n));
  }
  GS_CHECK(gs_nn_residual_end(net));
  return gs_nn_add_relu(net);
}

/* ---- Finalize: storage for everything ----------------------------------- */

static gs_status alloc_floats(float **p, size_t n) {
  size_t bytes;
  GS_CHECK(gs_mul_size(n, sizeof(float), &bytes));
  *p = nn_buf_alloc(bytes);
  return *p ? GS_OK : GS_ERR_NOMEM;
}

static void bind_params(gs_nn_net *net, nn_layer *l) {
  if (l->nparams > 0) {
    l->w = net->params[l->param0].weights;
    l->dw = net->params[l->param0].grad;
  }
  if (l->nparams > 1) {
    l->b = net->params[l->param0 + 1].weights;
    l->db = net->params[l->param0 + 1].grad;
  }
  if (l->kind == NN_BATCHNORM) {
    l->run_mean = net->buffers + l->buf0;
    l->run_var = net->buffers + l->buf0 + l->in.c;
  }
}

static gs_status seq_alloc(gs_nn_net *net, nn_seq *s);

static gs_status layer_alloc(gs_nn_net *net, nn_layer *l, int last) {
  size_t B = (size_t)net->max_batch;
  bind_params(net, l);
  if (l->fused_away) return GS_OK; /* views, bound by seq_alloc */
  if (l->kind != NN_FLATTEN) GS_CHECK(alloc_floats(&l->y, B * l->out_size));
  else if (l->blk_in) GS_CHECK(alloc_floats(&l->blk_y, B * l->out_size));
  if (!last) GS_CHECK(alloc_floats(&l->dy, B * l->out_size));
  switch (l->kind) {
    case NN_BATCHNORM:
      GS_CHECK(alloc_floats(&l->mean, (size_t)l->in.c));
      l->stats = nn_buf_alloc(2 * (size_t)l->in.c * sizeof(double));
      if (!l->stats) return GS_ERR_NOMEM;
      GS_CHECK(alloc_floats(&l->inv_std, (size_t)l->in.c));
      GS_CHECK(alloc_floats(&l->var, (size_t)l->in.c));
      break;
    case NN_DROPOUT:
      GS_CHECK(alloc_floats(&l->mask, B * l->out_size));
      break;
    case NN_MAXPOOL: {
      size_t bytes;
      GS_CHECK(gs_mul_size(B * l->out_size, sizeof(int32_t), &bytes));
      l->argmax = nn_buf_alloc(bytes);
      if (!l->argmax) return GS_ERR_NOMEM;
      break;
    }
    case NN_CONV: {
      size_t col, tmp;
      nn_conv_workspace(l, net->max_batch, &col, &tmp);
      GS_CHECK(alloc_floats(&l->wt, (size_t)l->out.c * (size_t)l->in.c *
                                        (size_t)l->k * (size_t)l->k));
      GS_CHECK(alloc_floats(&l->dwt, (size_t)l->out.c * (size_t)l->in.c *
                                         (size_t)l->k * (size_t)l->k));
      if (col > net->col_size) net->col_size = col;
      if (tmp > net->gemm_tmp_size) net->gemm_tmp_size = tmp;
      break;
    }
    case NN_RESIDUAL:
      if (l->shortcut.n) GS_CHECK(alloc_floats(&l->dx_tmp, B * l->in_size));
      GS_CHECK(seq_alloc(net, &l->main));
      GS_CHECK(seq_alloc(net, &l->shortcut));
      break;
    default:
      break;
  }
  return GS_OK;
}

static gs_status seq_alloc(gs_nn_net *net, nn_seq *s) {
  for (int i = 0; i < s->n; i++) {
    nn_layer *l = s->layers[i];
    GS_CHECK(layer_alloc(net, l, i == s->n - 1));
    if (l->fused_away) {
      l->y = s->layers[i - 1]->y;
      l->dy = s->layers[i - 1]->dy;
    }
  }
  return GS_OK;
}

/* Marks producer + ReLU pairs for fusion (the ReLU must not be the last
 * layer of its sequence: its dy then comes from outside and cannot alias
 * the producer's) and conv + batch-norm pairs for statistics fusion.
 * GRADSYNC_NN_FUSE=0 turns both off. */
static void seq_fuse(nn_seq *s) {
  for (int i = 0; i + 2 < s->n; i++) {
    nn_layer *p = s->layers[i], *r = s->layers[i + 1];
    if (r->kind == NN_RELU &&
        (p->kind == NN_CONV || p->kind == NN_LINEAR || p->kind == NN_BATCHNORM ||
         p->kind == NN_RESIDUAL)) {
      p->fuse_relu = 1;
      r->fused_away = 1;
    }
  }
  for (int i = 0; i + 1 < s->n; i++)
    if (s->layers[i]->kind == NN_CONV && s->layers[i + 1]->kind == NN_BATCHNORM)
      s->layers[i]->stats_to = s->layers[i + 1];
  for (int i = 0; i < s->n; i++)
    if (s->layers[i]->kind == NN_RESIDUAL) {
      seq_fuse(&s->layers[i]->main);
      seq_fuse(&s->layers[i]->shortcut);
    }
}

#ifdef GRADSYNC_NN_DNNL
/* The blocked pass's layouts (see nn_dnnl_act_block): given whether s's
 * input is blocked, sets each layer's blk_in and blk_out and returns
 * whether s's output is, or -1 where the layers cannot keep a blocked
 * layout (a linear layer reading one, a residual whose paths end in
 * different layouts). A blocked output has a multiple of the block in
 * channels, so its buffer holds exactly batch x out_size floats. */
static int blocked_plan(nn_seq *s, int fin, int block, int *any) {
  for (int i = 0; i < s->n; i++) {
    nn_layer *l = s->layers[i];
    int fout;
    switch (l->kind) {
      case NN_CONV: fout = l->out.c % block == 0; break;
      case NN_LINEAR:
        if (fin) return -1;
        fout = 0;
        break;
      case NN_FLATTEN: fout = 0; break;
      case NN_RESIDUAL: {
        int a = blocked_plan(&l->main, fin, block, any);
        int b = l->shortcut.n ? blocked_plan(&l->shortcut, fin, block, any) : fin;
        if (a < 0 || a != b) return -1;
        fout = a;
        break;
      }
      default: fout = fin; break; /* batch-norm, pooling, elementwise */
    }
    l->blk_in = fin;
    l->blk_out = fout;
    *any |= fout;
    fin = fout;
  }
  return fin;
}

static void blocked_clear(nn_seq *s) {
  for (int i = 0; i < s->n; i++) {
    nn_layer *l = s->layers[i];
    l->blk_in = l->blk_out = 0;
    blocked_clear(&l->main);
    blocked_clear(&l->shortcut);
  }
}
#endif

gs_status gs_nn_finalize(gs_nn_net *net, gs_nn_init init, uint64_t seed) {
  GS_CHECK(check_building(net, "gs_nn_finalize"));
  if (net->open_block)
    return gs_error(GS_ERR_STATE,
                    "gs_nn_finalize: residual block '%s' is still open",
                    net->open_block->name);
  if (net->top.n == 0)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_finalize: the net has no layers");
  net->params = gs_calloc(net->nparams ? net->nparams : 1, sizeof *net->params);
  if (!net->params) return GS_ERR_NOMEM;
  size_t total = 0;
  for (size_t i = 0; i < net->nparams; i++) {
    size_t count = net->param_offset[i];
    net->param_offset[i] = total;
    net->params[i].name = net->names[i];
    net->params[i].count = count;
    total += count;
  }
  net->total = total;
  GS_CHECK(alloc_floats(&net->flat_w, total));
  GS_CHECK(alloc_floats(&net->flat_g, total));
  GS_CHECK(alloc_floats(&net->buffers, net->nbuffers));
  for (size_t i = 0; i < net->nparams; i++) {
    net->params[i].weights = net->flat_w + net->param_offset[i];
    net->params[i].grad = net->flat_g + net->param_offset[i];
  }
  const char *fuse = getenv("GRADSYNC_NN_FUSE");
  if (!fuse || strcmp(fuse, "0") != 0) seq_fuse(&net->top);
#ifdef GRADSYNC_NN_DNNL
  /* The logits leave in NCHW; a net with no blocked output gains nothing. */
  int any = 0;
  net->blk_block = nn_dnnl_act_block();
  if (net->blk_block && (blocked_plan(&net->top, 0, net->blk_block, &any) != 0 || !any)) {
    blocked_clear(&net->top);
    net->blk_block = 0;
  }
#endif
  GS_CHECK(seq_alloc(net, &net->top));
  GS_CHECK(alloc_floats(&net->col, net->col_size));
  GS_CHECK(alloc_floats(&net->gemm_tmp, net->gemm_tmp_size));
  size_t B = (size_t)net->max_batch;
  GS_CHECK(alloc_floats(&net->dx_in, B * nn_shape_size(net->in)));
  GS_CHECK(alloc_floats(&net->dlogits, B * gs_nn_output_size(net)));
  net->finalized = 1;
  return gs_nn_init_params(net, init, seed);
}

static void init_layer(nn_layer *l, gs_nn_init init, uint64_t *rng) {
  if (l->kind == NN_LINEAR || l->kind == NN_CONV) {
    size_t kk = l->kind == NN_CONV ? (size_t)l->k * (size_t)l->k : 1;
    size_t fan_in = (l->kind == NN_CONV ? (size_t)l->in.c : l->in_size) * kk;
    size_t fan_out = (size_t)l->out.c * kk;
    size_t n = (size_t)l->out.c * fan_in;
    if (init == GS_NN_INIT_XAVIER) {
      float bound = sqrtf(6.0f / (float)(fan_in + fan_out));
      for (size_t i = 0; i < n; i++)
        l->w[i] = (2.0f * nn_rng_uniform(rng) - 1.0f) * bound;
    } else {
      double std = sqrt(2.0 / (double)fan_in);
      for (size_t i = 0; i < n; i++) l->w[i] = (float)(std * nn_rng_normal(rng));
    }
    if (l->b) memset(l->b, 0, (size_t)l->out.c * sizeof(float));
  } else if (l->kind == NN_BATCHNORM) {
    for (int c = 0; c < l->in.c; c++) {
      l->w[c] = 1.0f;
      l->b[c] = 0.0f;
      l->run_mean[c] = 0.0f;
      l->run_var[c] = 1.0f;
    }
  } else if (l->kind == NN_RESIDUAL) {
    for (int i = 0; i < l->main.n; i++) init_layer(l->main.layers[i], init, rng);
    for (int i = 0; i < l->shortcut.n; i++)
      init_layer(l->shortcut.layers[i], init, rng);
  }
}

gs_status gs_nn_init_params(gs_nn_net *net, gs_nn_init init, uint64_t seed) {
  if (!net || !net->finalized)
    return gs_error(GS_ERR_STATE, "gs_nn_init_params: the net is not finalized");
  if (init != GS_NN_INIT_KAIMING && init != GS_NN_INIT_XAVIER)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_init_params: unknown scheme %d",
                    (int)init);
  uint64_t rng = seed;
  for (int i = 0; i < net->top.n; i++) init_layer(net->top.layers[i], init, &rng);
  net->rng = seed ^ 0xD1B54A32D192ED03ull;
  memset(net->flat_g, 0, net->total * sizeof(float));
  return GS_OK;
}

/* ---- Settings and accessors -------------------------------------------- */

void gs_nn_set_training(gs_nn_net *net, int training) { net->training = training != 0; }
void gs_nn_set_rng_seed(gs_nn_net *net, uint64_t seed) { net->rng = seed; }
void gs_nn_freeze_dropout(gs_nn_net *net, int frozen) { net->dropout_frozen = frozen != 0; }
void gs_nn_set_input_grad(gs_nn_net *net, int on) { net->input_grad = on != 0; }

void gs_nn_set_callbacks(gs_nn_net *net, gs_nn_grad_ready_fn on_grad_ready,
                         gs_nn_before_forward_fn before_forward, void *ctx) {
  net->on_grad_ready = on_grad_ready;
  net->before_forward = before_forward;
  net->cb_ctx = ctx;
}

size_t gs_nn_param_count(const gs_nn_net *net) { return net->nparams; }

const gs_nn_param *gs_nn_param_at(const gs_nn_net *net, size_t index) {
  if (!net->finalized || index >= net->nparams) return NULL;
  return &net->params[index];
}

size_t gs_nn_param_total(const gs_nn_net *net) { return net->total; }
float *gs_nn_weights_flat(gs_nn_net *net) { return net->flat_w; }
float *gs_nn_grads_flat(gs_nn_net *net) { return net->flat_g; }

float *gs_nn_buffers_flat(gs_nn_net *net, size_t *count) {
  if (count) *count = net->nbuffers;
  return net->buffers;
}

size_t gs_nn_output_size(const gs_nn_net *net) {
  const nn_seq *s = &net->top;
  return s->n ? s->layers[s->n - 1]->out_size : nn_shape_size(net->in);
}

size_t gs_nn_input_size(const gs_nn_net *net) { return nn_shape_size(net->in); }
int gs_nn_max_batch(const gs_nn_net *net) { return net->max_batch; }

static size_t layer_param_scalars(const gs_nn_net *net, const nn_layer *l) {
  size_t n = 0;
  for (int i = 0; i < l->nparams; i++) {
    size_t idx = l->param0 + (size_t)i;
    n += net->finalized ? net->params[idx].count : net->param_offset[idx];
  }
  return n;
}

static void seq_print(const gs_nn_net *net, const nn_seq *s, FILE *f,
                      int indent) {
  for (int i = 0; i < s->n; i++) {
    const nn_layer *l = s->layers[i];
    fprintf(f, "%*s%-10s %-24s -> %4d x %3d x %3d  %zu params\n", indent, "",
            kind_name(l->kind), l->name, l->out.c, l->out.h, l->out.w,
            layer_param_scalars(net, l));
    if (l->kind == NN_RESIDUAL) {
      seq_print(net, &l->main, f, indent + 2);
      if (l->shortcut.n) {
        fprintf(f, "%*sshortcut:\n", indent + 2, "");
        seq_print(net, &l->shortcut, f, indent + 2);
      }
    }
  }
}

void gs_nn_net_print(const gs_nn_net *net, void *file) {
  FILE *f = file ? (FILE *)file : stdout;
  fprintf(f, "input %d x %d x %d, %zu parameter tensors, %zu parameters\n",
          net->in.c, net->in.h, net->in.w, net->nparams, net->total);
  seq_print(net, &net->top, f, 2);
}

/* ---- Forward and backward ------------------------------------------------- */

static const float *seq_forward(gs_nn_net *net, nn_seq *s, const float *x,
                                int batch);

NN_CLONES
static void residual_forward(gs_nn_net *net, nn_layer *l, const float *x,
                             int batch) {
  const float *a = seq_forward(net, &l->main, x, batch);
  const float *b = seq_forward(net, &l->shortcut, x, batch);
  float *y = l->y;
  size_t n = (size_t)batch * l->out_size;
  if (l->fuse_relu) {
    for (size_t i = 0; i < n; i++) {
      float v = a[i] + b[i];
      y[i] = v > 0.0f ? v : 0.0f;
    }
  } else {
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
  }
}

static void layer_forward(gs_nn_net *net, nn_layer *l, const float *x,
                          int batch) {
  nn_before_forward(net, l);
#ifdef GRADSYNC_NN_DNNL
  if (net->backend == NN_BACKEND_DNNL && nn_dnnl_forward(net, l, x, batch)) {
    if (l->kind == NN_LINEAR || l->kind == NN_CONV)
      nn_hook_forward(net, l, x, batch);
    return;
  }
#endif
  switch (l->kind) {
    case NN_LINEAR:
      nn_linear_forward(net, l, x, batch);
      nn_hook_forward(net, l, x, batch);
      break;
    case NN_CONV:
      nn_conv_forward(net, l, x, batch);
      nn_hook_forward(net, l, x, batch);
      break;
    case NN_RELU:
      if (!l->fused_away) nn_relu_forward(l, x, batch);
      break;
    case NN_MAXPOOL: nn_maxpool_forward(l, x, batch); break;
    case NN_AVGPOOL: nn_avgpool_forward(l, x, batch); break;
    case NN_BATCHNORM: nn_bn_forward(net, l, x, batch); break;
    case NN_DROPOUT: nn_dropout_forward(net, l, x, batch); break;
    case NN_FLATTEN: l->y = (float *)x; break; /* a view: never written */
    case NN_RESIDUAL: residual_forward(net, l, x, batch); break;
  }
}

static const float *seq_forward(gs_nn_net *net, nn_seq *s, const float *x,
                                int batch) {
  for (int i = 0; i < s->n; i++) {
    layer_forward(net, s->layers[i], x, batch);
    x = s->layers[i]->y;
  }
  return x;
}

static void seq_backward(gs_nn_net *net, nn_seq *s, const float *x,
                         const float *dy, float *dx, int batch);

/* The shortcut first: its parameters have the higher indices. With an
 * identity shortcut the main path writes dx directly and dy is added. */
NN_CLONES
static void residual_backward(gs_nn_net *net, nn_layer *l, const float *x,
                              const float *dy, float *dx, int batch) {
  size_t n = (size_t)batch * l->in_size;
  if (l->fuse_relu) /* dy is this block's own buffer */
    nn_relu_mask_inplace(l->dy, l->y, (size_t)batch * l->out_size);
  if (l->shortcut.n) {
    seq_backward(net, &l->shortcut, x, dy, dx, batch);
    seq_backward(net, &l->main, x, dy, dx ? l->dx_tmp : NULL, batch);
    if (dx) {
      const float *t = l->dx_tmp;
      for (size_t i = 0; i < n; i++) dx[i] += t[i];
    }
  } else {
    seq_backward(net, &l->main, x, dy, dx, batch);
    if (dx)
      for (size_t i = 0; i < n; i++) dx[i] += dy[i];
  }
}

static void layer_backward(gs_nn_net *net, nn_layer *l, const float *x,
                           const float *dy, float *dx, int batch) {
#ifdef GRADSYNC_NN_DNNL
  if (net->backend == NN_BACKEND_DNNL &&
      nn_dnnl_backward(net, l, x, dy, dx, batch)) {
    if (l->kind == NN_LINEAR || l->kind == NN_CONV)
      nn_hook_backward(net, l, dy, batch);
    return;
  }
#endif
  switch (l->kind) {
    case NN_LINEAR:
      nn_linear_backward(net, l, x, dy, dx, batch);
      nn_hook_backward(net, l, dy, batch);
      break;
    case NN_CONV:
      nn_conv_backward(net, l, x, dy, dx, batch);
      nn_hook_backward(net, l, dy, batch);
      break;
    case NN_RELU:
      if (dx && !l->fused_away) nn_relu_backward(l, dy, dx, batch);
      break;
    case NN_MAXPOOL: if (dx) nn_maxpool_backward(l, dy, dx, batch); break;
    case NN_AVGPOOL: if (dx) nn_avgpool_backward(l, dy, dx, batch); break;
    case NN_BATCHNORM: nn_bn_backward(net, l, x, dy, dx, batch); break;
    case NN_DROPOUT: if (dx) nn_dropout_backward(l, dy, dx, batch); break;
    case NN_FLATTEN:
      if (dx) memcpy(dx, dy, (size_t)batch * l->in_size * sizeof(float));
      break;
    case NN_RESIDUAL: residual_backward(net, l, x, dy, dx, batch); break;
  }
}

static void seq_backward(gs_nn_net *net, nn_seq *s, const float *x,
                         const float *dy, float *dx, int batch) {
  for (int i = s->n - 1; i >= 0; i--) {
    nn_layer *l = s->layers[i];
    const float *xin = i ? s->layers[i - 1]->y : x;
    const float *g = i == s->n - 1 ? dy : l->dy;
    float *d = i ? s->layers[i - 1]->dy : dx;
    layer_backward(net, l, xin, g, d, batch);
  }
}

gs_status gs_nn_forward(gs_nn_net *net, const float *x, int batch,
                        const float **logits) {
  if (!net || !x)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_forward: net or x is NULL");
  if (!net->finalized)
    return gs_error(GS_ERR_STATE, "gs_nn_forward: the net is not finalized");
  if (batch <= 0 || batch > net->max_batch)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_forward: batch %d is not in [1, %d] (the net's "
                    "max batch)", batch, net->max_batch);
  net->x = x;
  net->batch = batch;
  net->blk_pass = 0;
#ifdef GRADSYNC_NN_DNNL
  /* Layer hooks read NCHW activations, and evaluation runs batch-norm on
   * the loops: blocked passes are training passes without hooks. */
  net->blk_pass = net->blk_block && !net->blk_broken && net->backend == NN_BACKEND_DNNL &&
                  net->training && !net->hook_forward && !net->hook_backward;
  if (net->blk_pass && nn_dnnl_prepare(net, batch) != 0) net->blk_pass = 0;
  net->blk_passes += net->blk_pass;
#endif
  const float *y = seq_forward(net, &net->top, x, batch);
  if (logits) *logits = y;
  return GS_OK;
}

gs_status gs_nn_backward_from(gs_nn_net *net, const float *dy) {
  if (!net || !dy)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_backward: net or dy is NULL");
  if (!net->x)
    return gs_error(GS_ERR_STATE, "gs_nn_backward: no forward pass to go back through");
  seq_backward(net, &net->top, net->x, dy, net->input_grad ? net->dx_in : NULL,
               net->batch);
  return GS_OK;
}

gs_status gs_nn_backward(gs_nn_net *net) {
  if (!net) return gs_error(GS_ERR_INVALID_ARG, "gs_nn_backward: net is NULL");
  return gs_nn_backward_from(net, net->dlogits);
}

const float *gs_nn_input_grad(const gs_nn_net *net) {
  return net->input_grad ? net->dx_in : NULL;
}

gs_status gs_nn_loss(gs_nn_net *net, const int32_t *labels, float *loss,
                     int *correct) {
  if (!net || !labels || !loss)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_loss: a NULL argument");
  if (!net->x)
    return gs_error(GS_ERR_STATE, "gs_nn_loss: no forward pass yet");
  const nn_layer *last = net->top.layers[net->top.n - 1];
  return gs_nn_softmax_ce(last->y, labels, net->batch, (int)last->out_size,
                          net->dlogits, loss, correct);
}

const char *gs_nn_first_nonfinite_grad(const gs_nn_net *net, size_t *index) {
  for (size_t i = net->nparams; i-- > 0;) {
    const float *g = net->params[i].grad;
    size_t n = net->params[i].count;
    int bad = 0;
    for (size_t j = 0; j < n; j++) bad |= !isfinite(g[j]);
    if (bad) {
      if (index) *index = i;
      return net->params[i].name;
    }
  }
  return NULL;
}
