/*
 * The oneDNN backend of the layers (GRADSYNC_NN_BACKEND=dnnl): convolution,
 * linear (inner product), max- and average-pooling, batch normalisation and
 * ReLU through oneDNN's primitives. Every oneDNN call of the library is in
 * this file, written against the C API of oneDNN 2.x (Debian's 2.6), whose
 * operation descriptors (*_desc_init) version 3 removed.
 *
 * Primitives are created on a layer's first pass with a given batch size
 * and kept in the layer, a few batch sizes per
 * layer (a smaller last batch, an evaluation batch), so that a step creates
 * nothing. Activations stay NCHW between layers, the layout the rest of the
 * library (residual adds, dropout, the loss, K-FAC's layer hooks, the input
 * gradient) reads and writes; a convolution lets oneDNN choose its own
 * layouts (format_tag any: blocked nChw16c or nChw8c where the CPU's
 * kernels want them) and reorders at its edges only where the choice
 * differs, and weights are reordered from gs_nn's OIHW once per pass, since
 * the optimizer updates them in place between steps. Weight and bias
 * gradients land in gs_nn's flat gradient buffers in gs_nn's layout, so the
 * engine's callbacks, the optimizer and checkpoints see no difference.
 *
 * Batch-norm runs on oneDNN only with GRADSYNC_NN_DNNL_BN=1 (see
 * dnnl_bn_on).
 *
 * Bias and a following ReLU are fused into the convolution and the inner
 * product (the bias as their argument, the ReLU as an eltwise post-op); a
 * batch-norm followed by a ReLU uses oneDNN's fused norm + ReLU, whose
 * backward masks the gradient from its workspace.
 *
 * Scratchpads are the caller's (dnnl_scratchpad_mode_user), one buffer per
 * net grown when a new primitive needs more, so that a primitive may run on
 * a thread other than the one that created it.
 *
 * A layer whose primitive cannot be created (an unsupported shape) falls
 * back to the BLAS kernels, with one warning; nn_dnnl_fallbacks counts them.
 */
#include <dlfcn.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

#define NN_DNNL_SLOTS 6

/* One operand of a primitive as gs_nn holds it (user: NCHW, OIHW, ...) and
 * as the primitive wants it; when the two differ, a reorder between them
 * and a buffer of the primitive's layout. */
/* A primitive and its scratchpad memory (NULL when it needs none). */
typedef struct {
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t p;
  dnnl_memory_t scratch;
} prim;

typedef struct {
  dnnl_memory_desc_t user_md, prim_md;
  dnnl_memory_t user; /* handle set on each call */
  dnnl_memory_t prim; /* == user when no reorder is needed */
  prim reorder;       /* .p NULL when no reorder is needed */
} port;

typedef struct {
  int batch, used; /* key; used: 0 = empty slot */
  nn_precision prec; /* key too: the precision the slot computes in */
  int blk;           /* key too: for a blocked pass (the layer's blk_in and
                      * blk_out then say which operands are blocked) */
  int failed;                /* creation failed: BLAS for this shape */
  prim fwd, bwd_data, bwd_weights;
  /* conv / linear: forward src, weights, dst; backward data's weights,
   * diff_dst, diff_src; backward weights' src, diff_dst, diff_weights */
  port src, wei, dst, bd_wei, bd_ddst, bd_dsrc, bw_src, bw_ddst, bw_dwei;
  dnnl_memory_t bias, dbias;
  /* batch-norm: scale, shift, mean, variance and their gradients; pooling
   * and batch-norm + ReLU: the workspace */
  dnnl_memory_t scale, shift, mean, var, dscale, dshift, ws;
  int bwd_tried; /* backward primitives created (or failed) */
  int bwd_failed;
} slot;

struct nn_dnnl_layer {
  slot slots[NN_DNNL_SLOTS];
  int next; /* slot to evict */
  int warned;
};

struct nn_dnnl_net {
  dnnl_engine_t engine;
  dnnl_stream_t stream;
  void *scratch;
  size_t scratch_size;
  long fallbacks;
  int block; /* the blocked activations' channel block (net->blk_block) */
};

/* ---- Threads --------------------------------------------------------------
 * oneDNN, as Debian builds it, runs on OpenMP and uses as many threads as
 * omp_get_max_threads() says on the calling thread; a primitive must run
 * with the thread count it was created with. The count is an OpenMP setting
 * of each calling thread, so it is set before every call. The OpenMP
 * runtime is the one libdnnl loaded, found by name rather than linked, so
 * the library does not pick an OpenMP of its own. */
static void apply_threads(void) {
  static void (*set_num_threads)(int);
  static int looked;
  int nn_threads = gs_nn_threads();
  if (!nn_threads) return;
  if (!looked) {
    *(void **)&set_num_threads = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    looked = 1;
  }
  if (set_num_threads) set_num_threads(nn_threads);
}

/* ---- Context -------------------------------------------------------------- */

#define DNNL_TRY(call)                     \
  do {                                     \
    if ((call) != dnnl_success) goto fail; \
  } while (0)

static nn_dnnl_net *ctx_get(gs_nn_net *net) {
  if (net->dnnl) return net->dnnl;
  nn_dnnl_net *c = gs_calloc(1, sizeof *c);
  if (!c) return NULL;
  if (dnnl_engine_create(&c->engine, dnnl_cpu, 0) != dnnl_success ||
      dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags) !=
          dnnl_success) {
    if (c->engine) dnnl_engine_destroy(c->engine);
    gs_free(c);
    return NULL;
  }
  c->block = net->blk_block; /* fixed when the net was finalized */
  net->dnnl = c;
  return c;
}

void nn_dnnl_net_free(gs_nn_net *net) {
  nn_dnnl_net *c = net->dnnl;
  if (!c) return;
  dnnl_stream_destroy(c->stream);
  dnnl_engine_destroy(c->engine);
  nn_buf_free(c->scratch);
  gs_free(c);
  net->dnnl = NULL;
}

long nn_dnnl_fallbacks(const gs_nn_net *net) {
  return net->dnnl ? net->dnnl->fallbacks : 0;
}

/* Grows the shared scratchpad to hold md. */
static int scratch_reserve(nn_dnnl_net *c, const dnnl_memory_desc_t *md) {
  size_t need = dnnl_memory_desc_get_size(md);
  if (need <= c->scratch_size) return 0;
  void *p = nn_buf_alloc(need);
  if (!p) return -1;
  nn_buf_free(c->scratch);
  c->scratch = p;
  c->scratch_size = need;
  return 0;
}

static void mem_free(dnnl_memory_t *m) {
  if (*m) dnnl_memory_destroy(*m);
  *m = NULL;
}

static void prim_free(prim *p) {
  if (p->p) dnnl_primitive_destroy(p->p);
  if (p->pd) dnnl_primitive_desc_destroy(p->pd);
  mem_free(&p->scratch);
  memset(p, 0, sizeof *p);
}

static void port_free(port *pt) {
  if (pt->prim != pt->user) mem_free(&pt->prim);
  mem_free(&pt->user);
  pt->prim = NULL;
  prim_free(&pt->reorder);
}

static void slot_free(slot *s) {
  prim_free(&s->fwd);
  prim_free(&s->bwd_data);
  prim_free(&s->bwd_weights);
  port *ports[] = {&s->src, &s->wei, &s->dst, &s->bd_wei, &s->bd_ddst,
                   &s->bd_dsrc, &s->bw_src, &s->bw_ddst, &s->bw_dwei};
  for (size_t i = 0; i < sizeof ports / sizeof *ports; i++) port_free(ports[i]);
  dnnl_memory_t *mems[] = {&s->bias, &s->dbias, &s->scale, &s->shift, &s->mean,
                           &s->var, &s->dscale, &s->dshift, &s->ws};
  for (size_t i = 0; i < sizeof mems / sizeof *mems; i++) mem_free(mems[i]);
  memset(s, 0, sizeof *s);
}

void nn_dnnl_layer_free(nn_layer *l) {
  if (!l->dnnl) return;
  for (int i = 0; i < NN_DNNL_SLOTS; i++) slot_free(&l->dnnl->slots[i]);
  gs_free(l->dnnl);
  l->dnnl = NULL;
}

/* An attribute with a user scratchpad and, if relu, a ReLU post-op. */
static dnnl_primitive_attr_t make_attr(int relu) {
  dnnl_primitive_attr_t a = NULL;
  if (dnnl_primitive_attr_create(&a) != dnnl_success) return NULL;
  dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user);
  if (relu) {
    dnnl_post_ops_t po;
    if (dnnl_post_ops_create(&po) == dnnl_success) {
      dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
      dnnl_primitive_attr_set_post_ops(a, po);
      dnnl_post_ops_destroy(po);
    }
  }
  return a;
}

static int prim_finish(nn_dnnl_net *c, prim *p);

/* Creates p from an operation descriptor (hint: the forward pd, for
 * backward ones) and its scratchpad memory. */
static int prim_create(nn_dnnl_net *c, prim *p, const void *op, int relu,
                       const_dnnl_primitive_desc_t hint) {
  dnnl_primitive_attr_t a = make_attr(relu);
  if (!a) return -1;
  dnnl_status_t st = dnnl_primitive_desc_create(&p->pd, op, a, c->engine, hint);
  dnnl_primitive_attr_destroy(a);
  if (st != dnnl_success) {
    p->pd = NULL;
    return -1;
  }
  return prim_finish(c, p);
}

/* The primitive of p->pd and its scratchpad memory. */
static int prim_finish(nn_dnnl_net *c, prim *p) {
  const dnnl_memory_desc_t *smd =
      dnnl_primitive_desc_query_md(p->pd, dnnl_query_scratchpad_md, 0);
  if (smd && dnnl_memory_desc_get_size(smd) > 0) {
    if (scratch_reserve(c, smd) ||
        dnnl_memory_create(&p->scratch, smd, c->engine, DNNL_MEMORY_NONE) !=
            dnnl_success)
      return -1;
  }
  return dnnl_primitive_create(&p->p, p->pd) == dnnl_success ? 0 : -1;
}

static const dnnl_memory_desc_t *query(const prim *p, dnnl_query_t what) {
  return dnnl_primitive_desc_query_md(p->pd, what, 0);
}

/* A reorder from one layout to another, as a primitive with its scratchpad. */
static int reorder_create(nn_dnnl_net *c, prim *p, const dnnl_memory_desc_t *from,
                          const dnnl_memory_desc_t *to) {
  dnnl_primitive_attr_t a = make_attr(0);
  if (!a) return -1;
  dnnl_status_t st =
      dnnl_reorder_primitive_desc_create(&p->pd, from, c->engine, to, c->engine, a);
  dnnl_primitive_attr_destroy(a);
  if (st != dnnl_success) {
    p->pd = NULL;
    return -1;
  }
  return prim_finish(c, p);
}

/* Sets up a port: user memory of user_md and, if want differs, a buffer of
 * want and the reorder between them (to_prim: user -> primitive, else
 * primitive -> user). */
static int port_init(nn_dnnl_net *c, port *pt, const dnnl_memory_desc_t *user_md,
                     const dnnl_memory_desc_t *want, int to_prim) {
  pt->user_md = *user_md;
  pt->prim_md = *want;
  if (dnnl_memory_create(&pt->user, user_md, c->engine, DNNL_MEMORY_NONE) !=
      dnnl_success)
    return -1;
  if (dnnl_memory_desc_equal(user_md, want)) {
    pt->prim = pt->user;
    return 0;
  }
  if (dnnl_memory_create(&pt->prim, want, c->engine, DNNL_MEMORY_ALLOCATE) !=
      dnnl_success)
    return -1;
  return to_prim ? reorder_create(c, &pt->reorder, user_md, want)
                 : reorder_create(c, &pt->reorder, want, user_md);
}

static int exec(nn_dnnl_net *c, dnnl_primitive_t p, dnnl_memory_t scratch,
                int nargs, dnnl_exec_arg_t *args) {
  if (scratch) {
    dnnl_memory_set_data_handle(scratch, c->scratch);
    args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scratch};
  }
  dnnl_status_t st = dnnl_primitive_execute(p, c->stream, nargs, args);
  if (st != dnnl_success) gs_log(GS_LOG_DEBUG, "nn: dnnl_primitive_execute: status %d", (int)st);
  return st == dnnl_success ? 0 : -1;
}

static int run(nn_dnnl_net *c, prim *p, int nargs, dnnl_exec_arg_t *args) {
  return exec(c, p->p, p->scratch, nargs, args);
}

/* The primitive-side memory of an input port holding the user's data. */
static dnnl_memory_t port_in(nn_dnnl_net *c, port *pt, const void *data) {
  dnnl_memory_set_data_handle(pt->user, (void *)data);
  if (pt->reorder.p) {
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, pt->user}, {DNNL_ARG_TO, pt->prim}};
    if (run(c, &pt->reorder, 2, a)) return NULL;
  }
  return pt->prim;
}

/* The memory an output port's primitive writes to (data: the user's). */
static dnnl_memory_t port_out_mem(port *pt, void *data) {
  dnnl_memory_set_data_handle(pt->user, data);
  return pt->prim;
}

/* After the primitive: the reorder of an output port into the user's data. */
static int port_out_done(nn_dnnl_net *c, port *pt) {
  if (!pt->reorder.p) return 0;
  dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, pt->prim}, {DNNL_ARG_TO, pt->user}};
  return run(c, &pt->reorder, 2, a);
}

static int user_mem(nn_dnnl_net *c, dnnl_memory_t *m, const dnnl_memory_desc_t *md) {
  return dnnl_memory_create(m, md, c->engine, DNNL_MEMORY_NONE) == dnnl_success ? 0 : -1;
}

static int alloc_mem(nn_dnnl_net *c, dnnl_memory_t *m, const dnnl_memory_desc_t *md) {
  return dnnl_memory_create(m, md, c->engine, DNNL_MEMORY_ALLOCATE) == dnnl_success ? 0 : -1;
}

static dnnl_memory_t with(dnnl_memory_t m, const void *data) {
  dnnl_memory_set_data_handle(m, (void *)data);
  return m;
}

/* ---- Memory descriptors ------------------------------------------------- */

static void md4t(dnnl_memory_desc_t *md, int n, int c, int h, int w,
                 dnnl_data_type_t dt, dnnl_format_tag_t tag) {
  dnnl_dims_t d = {n, c, h, w};
  dnnl_memory_desc_init_by_tag(md, 4, d, dt, tag);
}

static void md4(dnnl_memory_desc_t *md, int n, int c, int h, int w,
                dnnl_format_tag_t tag) {
  md4t(md, n, c, h, w, dnnl_f32, tag);
}

static void md2t(dnnl_memory_desc_t *md, int a, int b, dnnl_data_type_t dt,
                 dnnl_format_tag_t tag) {
  dnnl_dims_t d = {a, b};
  dnnl_memory_desc_init_by_tag(md, 2, d, dt, tag);
}

static void md2(dnnl_memory_desc_t *md, int a, int b, dnnl_format_tag_t tag) {
  md2t(md, a, b, dnnl_f32, tag);
}

static void md1(dnnl_memory_desc_t *md, int n) {
  dnnl_dims_t d = {n};
  dnnl_memory_desc_init_by_tag(md, 1, d, dnnl_f32, dnnl_x);
}

/* An activation as gs_nn stores it: NCHW, or in a blocked pass, where the
 * plan says so (blocked), channel-blocked (nChw16c or nChw8c). */
static void act_md(const nn_dnnl_net *c, dnnl_memory_desc_t *md, nn_shape s,
                   int batch, int blocked) {
  dnnl_format_tag_t tag = dnnl_nchw;
  if (blocked) tag = c->block == 16 ? dnnl_nChw16c : dnnl_nChw8c;
  md4(md, batch, s.c, s.h, s.w, tag);
}

/* ---- Slots ----------------------------------------------------------------
 * A layer's primitives for one batch size. Training and evaluation share
 * them: every primitive is created for training propagation (the backward
 * ones take the forward one as their hint, and gs_nn allows a backward pass
 * after an evaluation forward), and batch-norm in evaluation mode runs on
 * the loops. */

static slot *slot_find(nn_layer *l, int batch, nn_precision prec, int blk) {
  if (!l->dnnl) {
    l->dnnl = gs_calloc(1, sizeof *l->dnnl);
    if (!l->dnnl) return NULL;
  }
  nn_dnnl_layer *d = l->dnnl;
  for (int i = 0; i < NN_DNNL_SLOTS; i++) {
    slot *s = &d->slots[i];
    if (s->used && s->batch == batch && s->prec == prec && s->blk == blk) return s;
  }
  slot *s = &d->slots[d->next];
  d->next = (d->next + 1) % NN_DNNL_SLOTS;
  slot_free(s);
  s->batch = batch;
  s->prec = prec;
  s->blk = blk;
  return s;
}

static void fail_layer(gs_nn_net *net, nn_layer *l, slot *s, const char *what) {
  nn_dnnl_net *c = net->dnnl;
  s->failed = 1;
  if (c) c->fallbacks++;
  if (!l->dnnl->warned) {
    l->dnnl->warned = 1;
    gs_log(GS_LOG_WARN,
           "nn: layer '%s': oneDNN has no %s for batch %d; this layer runs on "
           "the BLAS kernels", l->name, what, s->batch);
  }
}

/* ---- Convolution and linear ------------------------------------------------ */

static void conv_geometry(const nn_layer *l, dnnl_dims_t strides, dnnl_dims_t pl,
                          dnnl_dims_t pr) {
  strides[0] = strides[1] = l->stride;
  pl[0] = pl[1] = l->pad;
  /* The padding on the far side that makes oneDNN's output size equal the
   * floor formula's exactly (it may be smaller than pad: a stride that
   * leaves the last rows out). */
  pr[0] = (l->out.h - 1) * l->stride + l->k - l->in.h - l->pad;
  pr[1] = (l->out.w - 1) * l->stride + l->k - l->in.w - l->pad;
}

/* The forward primitive of a conv or linear layer and its ports. */
/* A conv or linear layer's memory descriptors for batch B: the user's
 * layouts (gs_nn's NCHW / OIHW, or plain matrices) and what the primitives
 * may choose (any, for convolutions). */
/* In bf16 (lo_*), the primitives read bf16 sources, weights and output
 * gradients and write fp32 outputs, input gradients and weight gradients:
 * the ports' reorders convert from and to gs_nn's fp32 buffers. In fp32,
 * lo_* equal any_*. */
typedef struct {
  dnnl_memory_desc_t x, w, y, b, any_x, any_w, any_y, lo_x, lo_w, lo_y;
} gemm_mds;

static void gemm_layer_mds(const nn_dnnl_net *c, const nn_layer *l, const slot *s,
                           gemm_mds *m) {
  const int B = s->batch;
  const dnnl_data_type_t lo = s->prec == NN_PREC_BF16 ? dnnl_bf16 : dnnl_f32;
  if (l->kind == NN_CONV) {
    act_md(c, &m->x, l->in, B, s->blk && l->blk_in);
    md4(&m->w, l->out.c, l->in.c, l->k, l->k, dnnl_oihw);
    act_md(c, &m->y, l->out, B, s->blk && l->blk_out);
    md4(&m->any_x, B, l->in.c, l->in.h, l->in.w, dnnl_format_tag_any);
    md4(&m->any_w, l->out.c, l->in.c, l->k, l->k, dnnl_format_tag_any);
    md4(&m->any_y, B, l->out.c, l->out.h, l->out.w, dnnl_format_tag_any);
    md4t(&m->lo_x, B, l->in.c, l->in.h, l->in.w, lo, dnnl_format_tag_any);
    md4t(&m->lo_w, l->out.c, l->in.c, l->k, l->k, lo, dnnl_format_tag_any);
    md4t(&m->lo_y, B, l->out.c, l->out.h, l->out.w, lo, dnnl_format_tag_any);
  } else {
    /* Plain layouts: the weight matrix is the optimizer's, and a 1.6M-float
     * reorder per pass would cost more than the blocked kernels save (in
     * bf16 the weights are converted each pass anyway: the primitive picks
     * their layout). */
    md2(&m->x, B, (int)l->in_size, dnnl_nc);
    md2(&m->w, (int)l->out_size, (int)l->in_size, dnnl_oi);
    md2(&m->y, B, (int)l->out_size, dnnl_nc);
    m->any_x = m->x;
    m->any_w = m->w;
    m->any_y = m->y;
    md2t(&m->lo_x, B, (int)l->in_size, lo, dnnl_nc);
    md2t(&m->lo_w, (int)l->out_size, (int)l->in_size, lo,
         lo == dnnl_f32 ? dnnl_oi : dnnl_format_tag_any);
    md2t(&m->lo_y, B, (int)l->out_size, lo, dnnl_nc);
  }
  md1(&m->b, l->out.c);
}

static int gemm_layer_fwd_create(nn_dnnl_net *c, nn_layer *l, slot *s) {
  const int conv = l->kind == NN_CONV;
  gemm_mds m;
  gemm_layer_mds(c, l, s, &m);
  dnnl_memory_desc_t x_md = m.x, w_md = m.w, y_md = m.y, b_md = m.b, lo_x = m.lo_x,
                     lo_w = m.lo_w, any_y = m.any_y;
  /* Training propagation even in evaluation mode: the backward
   * primitives take this one as their hint, and gs_nn allows a backward
   * pass after an evaluation forward. */
  const dnnl_prop_kind_t prop = dnnl_forward_training;
  if (conv) {
    dnnl_convolution_desc_t op;
    dnnl_dims_t st, pl, pr;
    conv_geometry(l, st, pl, pr);
    DNNL_TRY(dnnl_convolution_forward_desc_init(
        &op, prop, dnnl_convolution_direct, &lo_x, &lo_w, l->b ? &b_md : NULL,
        &any_y, st, pl, pr));
    if (prim_create(c, &s->fwd, &op, l->fuse_relu, NULL)) return -1;
  } else {
    dnnl_inner_product_desc_t op;
    DNNL_TRY(dnnl_inner_product_forward_desc_init(&op, prop, &lo_x, &lo_w,
                                                  l->b ? &b_md : NULL, &any_y));
    if (prim_create(c, &s->fwd, &op, l->fuse_relu, NULL)) return -1;
  }
  if (port_init(c, &s->src, &x_md, query(&s->fwd, dnnl_query_src_md), 1) ||
      port_init(c, &s->wei, &w_md, query(&s->fwd, dnnl_query_weights_md), 1) ||
      port_init(c, &s->dst, &y_md, query(&s->fwd, dnnl_query_dst_md), 0))
    return -1;
  if (l->b && user_mem(c, &s->bias, &b_md)) return -1;
  return 0;
fail:
  return -1;
}

static int gemm_layer_bwd_create(nn_dnnl_net *c, nn_layer *l, slot *s) {
  const int conv = l->kind == NN_CONV;
  gemm_mds m;
  gemm_layer_mds(c, l, s, &m);
  dnnl_memory_desc_t x_md = m.x, w_md = m.w, y_md = m.y, b_md = m.b, any_x = m.any_x,
                     any_w = m.any_w, lo_x = m.lo_x, lo_w = m.lo_w, lo_y = m.lo_y;
  if (conv) {
    dnnl_convolution_desc_t bw, bd;
    dnnl_dims_t st, pl, pr;
    conv_geometry(l, st, pl, pr);
    DNNL_TRY(dnnl_convolution_backward_weights_desc_init(
        &bw, dnnl_convolution_direct, &lo_x, &any_w, l->b ? &b_md : NULL, &lo_y,
        st, pl, pr));
    DNNL_TRY(dnnl_convolution_backward_data_desc_init(
        &bd, dnnl_convolution_direct, &any_x, &lo_w, &lo_y, st, pl, pr));
    if (prim_create(c, &s->bwd_weights, &bw, 0, s->fwd.pd) ||
        prim_create(c, &s->bwd_data, &bd, 0, s->fwd.pd))
      return -1;
  } else {
    dnnl_inner_product_desc_t bw, bd;
    DNNL_TRY(dnnl_inner_product_backward_weights_desc_init(
        &bw, &lo_x, &any_w, l->b ? &b_md : NULL, &lo_y));
    DNNL_TRY(dnnl_inner_product_backward_data_desc_init(&bd, &any_x, &lo_w, &lo_y));
    if (prim_create(c, &s->bwd_weights, &bw, 0, s->fwd.pd) ||
        prim_create(c, &s->bwd_data, &bd, 0, s->fwd.pd))
      return -1;
  }
  if (port_init(c, &s->bw_src, &x_md, query(&s->bwd_weights, dnnl_query_src_md), 1) ||
      port_init(c, &s->bw_ddst, &y_md,
                query(&s->bwd_weights, dnnl_query_diff_dst_md), 1) ||
      port_init(c, &s->bw_dwei, &w_md,
                query(&s->bwd_weights, dnnl_query_diff_weights_md), 0) ||
      port_init(c, &s->bd_wei, &w_md, query(&s->bwd_data, dnnl_query_weights_md), 1) ||
      port_init(c, &s->bd_ddst, &y_md, query(&s->bwd_data, dnnl_query_diff_dst_md), 1) ||
      port_init(c, &s->bd_dsrc, &x_md, query(&s->bwd_data, dnnl_query_diff_src_md), 0))
    return -1;
  if (l->b && user_mem(c, &s->dbias, &b_md)) return -1;
  return 0;
fail:
  return -1;
}

static int gemm_layer_forward(nn_dnnl_net *c, nn_layer *l, slot *s,
                              const float *x) {
  dnnl_memory_t src = port_in(c, &s->src, x), wei = port_in(c, &s->wei, l->w);
  if (!src || !wei) return -1;
  dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, src},
                          {DNNL_ARG_WEIGHTS, wei},
                          {DNNL_ARG_DST, port_out_mem(&s->dst, l->y)}};
  int n = 3;
  if (l->b) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, with(s->bias, l->b)};
  if (run(c, &s->fwd, n, a)) return -1;
  return port_out_done(c, &s->dst);
}

/* Weight (and bias) gradients first, reported as soon as they are final,
 * then the input gradient: the order of the BLAS kernels. An input already
 * in the primitive's layout from the forward pass, or a gradient already
 * reordered for the other backward primitive, is reused rather than
 * reordered twice. */
static int gemm_layer_backward(gs_nn_net *net, nn_dnnl_net *c, nn_layer *l,
                               slot *s, const float *x, const float *dy,
                               float *dx) {
  if (l->fuse_relu) /* dy is this layer's own buffer */
    nn_relu_mask_inplace(l->dy, l->y, (size_t)s->batch * l->out_size);
  dnnl_memory_t src;
  if (s->src.reorder.p && dnnl_memory_desc_equal(&s->src.prim_md, &s->bw_src.prim_md))
    src = s->src.prim; /* x is unchanged since the forward pass */
  else
    src = port_in(c, &s->bw_src, x);
  dnnl_memory_t ddst = port_in(c, &s->bw_ddst, dy);
  if (!src || !ddst) return -1;
  dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, src},
                          {DNNL_ARG_DIFF_DST, ddst},
                          {DNNL_ARG_DIFF_WEIGHTS, port_out_mem(&s->bw_dwei, l->dw)}};
  int n = 3;
  if (l->db) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, with(s->dbias, l->db)};
  if (run(c, &s->bwd_weights, n, a) || port_out_done(c, &s->bw_dwei)) return -1;
  if (l->db) nn_grad_ready(net, l->param0 + 1);
  nn_grad_ready(net, l->param0);
  if (!dx) return 0;
  dnnl_memory_t wei;
  if (s->wei.reorder.p && dnnl_memory_desc_equal(&s->wei.prim_md, &s->bd_wei.prim_md))
    wei = s->wei.prim; /* the weights are unchanged since the forward pass */
  else
    wei = port_in(c, &s->bd_wei, l->w);
  if (s->bw_ddst.reorder.p &&
      dnnl_memory_desc_equal(&s->bw_ddst.prim_md, &s->bd_ddst.prim_md))
    ddst = s->bw_ddst.prim;
  else
    ddst = port_in(c, &s->bd_ddst, dy);
  if (!wei || !ddst) return -1;
  dnnl_exec_arg_t b[4] = {{DNNL_ARG_DIFF_DST, ddst},
                          {DNNL_ARG_WEIGHTS, wei},
                          {DNNL_ARG_DIFF_SRC, port_out_mem(&s->bd_dsrc, dx)}};
  if (run(c, &s->bwd_data, 3, b)) return -1;
  return port_out_done(c, &s->bd_dsrc);
}

/* ---- Pooling ------------------------------------------------------------ */

static int pool_create(nn_dnnl_net *c, nn_layer *l, slot *s) {
  dnnl_memory_desc_t x_md, y_md;
  act_md(c, &x_md, l->in, s->batch, s->blk && l->blk_in);
  act_md(c, &y_md, l->out, s->batch, s->blk && l->blk_out);
  dnnl_dims_t st = {l->stride, l->stride}, k = {l->k, l->k}, dil = {0, 0},
              pl = {0, 0}, pr = {0, 0};
  /* As the BLAS kernels: windows that do not fit are left out. */
  pr[0] = (l->out.h - 1) * l->stride + l->k - l->in.h;
  pr[1] = (l->out.w - 1) * l->stride + l->k - l->in.w;
  const dnnl_alg_kind_t alg =
      l->kind == NN_MAXPOOL ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
  dnnl_pooling_v2_desc_t f, b;
  /* Always the training forward: a backward pass may follow an evaluation
   * forward (gs_nn_backward does not forbid it), and max-pooling's backward
   * needs the workspace. */
  DNNL_TRY(dnnl_pooling_v2_forward_desc_init(&f, dnnl_forward_training, alg, &x_md,
                                             &y_md, st, k, dil, pl, pr));
  DNNL_TRY(dnnl_pooling_v2_backward_desc_init(&b, alg, &x_md, &y_md, st, k, dil,
                                              pl, pr));
  if (prim_create(c, &s->fwd, &f, 0, NULL) || prim_create(c, &s->bwd_data, &b, 0, s->fwd.pd))
    return -1;
  const dnnl_memory_desc_t *ws = query(&s->fwd, dnnl_query_workspace_md);
  if (ws && dnnl_memory_desc_get_size(ws) > 0 && alloc_mem(c, &s->ws, ws)) return -1;
  if (user_mem(c, &s->src.user, &x_md) || user_mem(c, &s->dst.user, &y_md)) return -1;
  s->bwd_tried = 1;
  return 0;
fail:
  return -1;
}

static int pool_forward(nn_dnnl_net *c, nn_layer *l, slot *s, const float *x) {
  dnnl_exec_arg_t a[4] = {{DNNL_ARG_SRC, with(s->src.user, x)},
                          {DNNL_ARG_DST, with(s->dst.user, l->y)}};
  int n = 2;
  if (s->ws) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, s->ws};
  return run(c, &s->fwd, n, a);
}

static int pool_backward(nn_dnnl_net *c, slot *s, const float *dy, float *dx) {
  dnnl_exec_arg_t a[4] = {{DNNL_ARG_DIFF_DST, with(s->dst.user, dy)},
                          {DNNL_ARG_DIFF_SRC, with(s->src.user, dx)}};
  int n = 2;
  if (s->ws) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, s->ws};
  return run(c, &s->bwd_data, n, a);
}

/* ---- ReLU ------------------------------------------------------------------ */

static int relu_create(nn_dnnl_net *c, nn_layer *l, slot *s) {
  dnnl_memory_desc_t md;
  md2(&md, s->batch, (int)l->out_size, dnnl_nc); /* elementwise: any shape */
  dnnl_eltwise_desc_t f, b;
  DNNL_TRY(dnnl_eltwise_forward_desc_init(&f, dnnl_forward_training,
                                          dnnl_eltwise_relu_use_dst_for_bwd, &md,
                                          0.0f, 0.0f));
  DNNL_TRY(dnnl_eltwise_backward_desc_init(&b, dnnl_eltwise_relu_use_dst_for_bwd,
                                           &md, &md, 0.0f, 0.0f));
  if (prim_create(c, &s->fwd, &f, 0, NULL) || prim_create(c, &s->bwd_data, &b, 0, s->fwd.pd))
    return -1;
  if (user_mem(c, &s->src.user, &md) || user_mem(c, &s->dst.user, &md) ||
      user_mem(c, &s->bd_ddst.user, &md) || user_mem(c, &s->bd_dsrc.user, &md))
    return -1;
  s->bwd_tried = 1;
  return 0;
fail:
  return -1;
}

static int relu_forward(nn_dnnl_net *c, nn_layer *l, slot *s, const float *x) {
  dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, with(s->src.user, x)},
                          {DNNL_ARG_DST, with(s->dst.user, l->y)}};
  return run(c, &s->fwd, 2, a);
}

static int relu_backward(nn_dnnl_net *c, nn_layer *l, slot *s, const float *dy,
                         float *dx) {
  dnnl_exec_arg_t a[4] = {{DNNL_ARG_DST, with(s->dst.user, l->y)},
                          {DNNL_ARG_DIFF_DST, with(s->bd_ddst.user, dy)},
                          {DNNL_ARG_DIFF_SRC, with(s->bd_dsrc.user, dx)}};
  return run(c, &s->bwd_data, 3, a);
}

/* ---- Flatten of a blocked input ---------------------------------------------
 * In a blocked pass the flatten before a linear layer is where the
 * activations return to NCHW: forward reorders the blocked input into the
 * layer's own buffer (blk_y), backward the NCHW gradient into the blocked
 * input gradient. */

static int flatten_create(nn_dnnl_net *c, nn_layer *l, slot *s) {
  dnnl_memory_desc_t b_md, p_md;
  act_md(c, &b_md, l->in, s->batch, 1);
  act_md(c, &p_md, l->in, s->batch, 0);
  if (reorder_create(c, &s->fwd, &b_md, &p_md) ||
      reorder_create(c, &s->bwd_data, &p_md, &b_md) ||
      user_mem(c, &s->src.user, &b_md) || user_mem(c, &s->dst.user, &p_md))
    return -1;
  s->bwd_tried = 1;
  return 0;
}

static int flatten_forward(nn_dnnl_net *c, nn_layer *l, slot *s, const float *x) {
  dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, with(s->src.user, x)},
                          {DNNL_ARG_TO, with(s->dst.user, l->blk_y)}};
  if (run(c, &s->fwd, 2, a)) return -1;
  l->y = l->blk_y;
  return 0;
}

static int flatten_backward(nn_dnnl_net *c, slot *s, const float *dy, float *dx) {
  dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, with(s->dst.user, dy)},
                          {DNNL_ARG_TO, with(s->src.user, dx)}};
  return run(c, &s->bwd_data, 2, a);
}

/* ---- Batch normalisation ---------------------------------------------------
 * Training mode only (batch statistics); evaluation mode, with the running
 * statistics, stays on the BLAS build's loops, which are one multiply-add
 * per element. oneDNN returns the biased batch variance; the running
 * statistics are updated here as torch.nn.BatchNorm2d does (momentum 0.1,
 * unbiased variance), and mean and 1/std are kept in the layer as the BLAS
 * kernels keep them. */

static unsigned bn_flags(const nn_layer *l) {
  return dnnl_use_scale | dnnl_use_shift | (l->fuse_relu ? dnnl_fuse_norm_relu : 0u);
}

static int bn_create(nn_dnnl_net *c, nn_layer *l, slot *s) {
  dnnl_memory_desc_t x_md, c_md;
  act_md(c, &x_md, l->in, s->batch, s->blk && l->blk_in);
  md1(&c_md, l->in.c);
  dnnl_batch_normalization_desc_t f, b;
  DNNL_TRY(dnnl_batch_normalization_forward_desc_init(&f, dnnl_forward_training,
                                                      &x_md, l->eps, bn_flags(l)));
  DNNL_TRY(dnnl_batch_normalization_backward_desc_init(&b, dnnl_backward, &x_md,
                                                       &x_md, l->eps, bn_flags(l)));
  if (prim_create(c, &s->fwd, &f, 0, NULL) || prim_create(c, &s->bwd_data, &b, 0, s->fwd.pd))
    return -1;
  const dnnl_memory_desc_t *ws = query(&s->fwd, dnnl_query_workspace_md);
  if (ws && dnnl_memory_desc_get_size(ws) > 0 && alloc_mem(c, &s->ws, ws)) return -1;
  if (user_mem(c, &s->src.user, &x_md) || user_mem(c, &s->dst.user, &x_md) ||
      user_mem(c, &s->bd_ddst.user, &x_md) || user_mem(c, &s->bd_dsrc.user, &x_md) ||
      user_mem(c, &s->scale, &c_md) || user_mem(c, &s->shift, &c_md) ||
      user_mem(c, &s->mean, &c_md) || user_mem(c, &s->var, &c_md) ||
      user_mem(c, &s->dscale, &c_md) || user_mem(c, &s->dshift, &c_md))
    return -1;
  s->bwd_tried = 1;
  return 0;
fail:
  return -1;
}

static int bn_forward(nn_dnnl_net *c, nn_layer *l, slot *s, const float *x) {
  dnnl_exec_arg_t a[8] = {{DNNL_ARG_SRC, with(s->src.user, x)},
                          {DNNL_ARG_DST, with(s->dst.user, l->y)},
                          {DNNL_ARG_SCALE, with(s->scale, l->w)},
                          {DNNL_ARG_SHIFT, with(s->shift, l->b)},
                          {DNNL_ARG_MEAN, with(s->mean, l->mean)},
                          {DNNL_ARG_VARIANCE, with(s->var, l->var)}};
  int n = 6;
  if (s->ws) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, s->ws};
  if (run(c, &s->fwd, n, a)) return -1;
  l->train_mode = 1;
  l->stats_from = NULL;
  const double m = (double)s->batch * l->in.h * l->in.w;
  for (int ch = 0; ch < l->in.c; ch++) {
    double var = l->var[ch];
    l->inv_std[ch] = (float)(1.0 / sqrt(var + (double)l->eps));
    double unbiased = m > 1 ? var * m / (m - 1) : var;
    l->run_mean[ch] = (1.0f - l->momentum) * l->run_mean[ch] + l->momentum * l->mean[ch];
    l->run_var[ch] = (1.0f - l->momentum) * l->run_var[ch] + l->momentum * (float)unbiased;
  }
  return 0;
}

static int bn_backward(gs_nn_net *net, nn_dnnl_net *c, nn_layer *l, slot *s,
                       const float *x, const float *dy, float *dx) {
  /* oneDNN 2.6 counts the shift as an input of the backward pass too. */
  dnnl_exec_arg_t a[11] = {{DNNL_ARG_SRC, with(s->src.user, x)},
                           {DNNL_ARG_DIFF_DST, with(s->bd_ddst.user, dy)},
                           {DNNL_ARG_MEAN, with(s->mean, l->mean)},
                           {DNNL_ARG_VARIANCE, with(s->var, l->var)},
                           {DNNL_ARG_SCALE, with(s->scale, l->w)},
                           {DNNL_ARG_SHIFT, with(s->shift, l->b)},
                           {DNNL_ARG_DIFF_SRC, with(s->bd_dsrc.user, dx)},
                           {DNNL_ARG_DIFF_SCALE, with(s->dscale, l->dw)},
                           {DNNL_ARG_DIFF_SHIFT, with(s->dshift, l->db)}};
  int n = 9;
  if (s->ws) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, s->ws};
  if (run(c, &s->bwd_data, n, a)) return -1;
  nn_grad_ready(net, l->param0 + 1);
  nn_grad_ready(net, l->param0);
  return 0;
}

/* ---- Entry points --------------------------------------------------------- */

/* oneDNN's batch-norm on NCHW data (its ncsp kernel) measured 2x slower
 * than the library's loops on the ResNet (bench/nn, docs/COMPUTE.md): its
 * fast kernels want the blocked layouts, which the activations do not keep
 * between layers yet. So batch-norm runs on the loops unless
 * GRADSYNC_NN_DNNL_BN=1 (which the tests set, to keep this path checked). */
static int dnnl_bn_on(void) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("GRADSYNC_NN_DNNL_BN");
    on = e && strcmp(e, "1") == 0;
  }
  return on;
}

/* Whether layer l's operands in this pass are blocked: the key of its
 * slot. */
static int slot_blk(const gs_nn_net *net, const nn_layer *l) {
  return net->blk_pass && (l->blk_in || l->blk_out);
}

/* Whether oneDNN runs l in this pass. In a blocked pass it must run every
 * layer that reads or writes a blocked layout except the elementwise ones
 * (ReLU, dropout, the residual add), which the loops run on any layout:
 * batch-norm too (its fast kernels want the blocked layout), and the
 * flatten that returns to NCHW. */
static int handles(const gs_nn_net *net, const nn_layer *l) {
  switch (l->kind) {
    case NN_CONV:
    case NN_LINEAR:
    case NN_MAXPOOL:
    case NN_AVGPOOL:
    case NN_RELU:
      return 1;
    case NN_BATCHNORM:
      return slot_blk(net, l) || (net->training && dnnl_bn_on());
    case NN_FLATTEN:
      return slot_blk(net, l);
    default:
      return 0;
  }
}

/* The precision l's slot computes in: only convolutions and linear layers
 * compute in bf16. */
static nn_precision slot_prec(const gs_nn_net *net, const nn_layer *l) {
  return l->kind == NN_CONV || l->kind == NN_LINEAR ? net->precision : NN_PREC_FP32;
}

static int create_fwd(nn_dnnl_net *c, nn_layer *l, slot *s) {
  switch (l->kind) {
    case NN_CONV:
    case NN_LINEAR: return gemm_layer_fwd_create(c, l, s);
    case NN_MAXPOOL:
    case NN_AVGPOOL: return pool_create(c, l, s);
    case NN_RELU: return relu_create(c, l, s);
    case NN_BATCHNORM: return bn_create(c, l, s);
    case NN_FLATTEN: return flatten_create(c, l, s);
    default: return -1;
  }
}

int nn_dnnl_forward(gs_nn_net *net, nn_layer *l, const float *x, int batch) {
  if (!handles(net, l)) return 0;
  if (l->kind == NN_RELU && l->fused_away) return 1;
  nn_dnnl_net *c = ctx_get(net);
  if (!c) return 0;
  apply_threads();
  slot *s = slot_find(l, batch, slot_prec(net, l), slot_blk(net, l));
  if (!s) return 0;
  if (!s->used) {
    s->used = 1;
    if (create_fwd(c, l, s)) fail_layer(net, l, s, "forward primitive");
  }
  if (s->failed) return 0;
  int rc;
  switch (l->kind) {
    case NN_CONV:
    case NN_LINEAR: rc = gemm_layer_forward(c, l, s, x); break;
    case NN_MAXPOOL:
    case NN_AVGPOOL: rc = pool_forward(c, l, s, x); break;
    case NN_RELU: rc = relu_forward(c, l, s, x); break;
    case NN_FLATTEN: rc = flatten_forward(c, l, s, x); break;
    default: rc = bn_forward(c, l, s, x); break;
  }
  if (rc && s->blk) {
    /* The loops cannot take over a blocked layout. nn_dnnl_prepare made
     * every primitive, so this is an execution error (out of memory). */
    gs_log(GS_LOG_ERROR, "nn: layer '%s': a oneDNN primitive failed in a blocked "
           "pass; this step's output is wrong, and later passes stay NCHW", l->name);
    net->blk_broken = 1;
    return 1;
  }
  if (rc) {
    /* An execution error leaves y undefined: redo it on the BLAS kernels. */
    fail_layer(net, l, s, "working forward primitive");
    return 0;
  }
  return 1;
}

int nn_dnnl_backward(gs_nn_net *net, nn_layer *l, const float *x, const float *dy,
                     float *dx, int batch) {
  if (!l->dnnl) return 0;
  if (l->kind == NN_RELU && l->fused_away) return 1;
  /* The slot of the forward pass this backward follows. */
  nn_precision prec = slot_prec(net, l);
  int blk = slot_blk(net, l);
  slot *s = NULL;
  for (int i = 0; i < NN_DNNL_SLOTS; i++) {
    slot *t = &l->dnnl->slots[i];
    if (t->used && t->batch == batch && t->prec == prec && t->blk == blk) s = t;
  }
  if (!s || s->failed) return 0;
  /* Batch-norm in evaluation mode, or whose input gradient nobody wants,
   * goes back on the loops (its forward left mean and 1/std for them);
   * in a blocked pass it is in training mode and has an input gradient
   * (a blocked input comes from a convolution before it). */
  if (l->kind == NN_BATCHNORM && !blk && (!l->train_mode || !dx || !net->training))
    return 0;
  nn_dnnl_net *c = net->dnnl;
  apply_threads();
  if ((l->kind == NN_CONV || l->kind == NN_LINEAR) && !s->bwd_tried) {
    s->bwd_tried = 1;
    if (gemm_layer_bwd_create(c, l, s)) {
      s->bwd_failed = 1;
      fail_layer(net, l, s, "backward primitive");
    }
  }
  if (s->bwd_failed) return 0;
  int rc = 0;
  switch (l->kind) {
    case NN_CONV:
    case NN_LINEAR: rc = gemm_layer_backward(net, c, l, s, x, dy, dx); break;
    case NN_MAXPOOL:
    case NN_AVGPOOL:
      if (dx) rc = pool_backward(c, s, dy, dx);
      break;
    case NN_RELU:
      if (dx) rc = relu_backward(c, l, s, dy, dx);
      break;
    case NN_BATCHNORM: rc = bn_backward(net, c, l, s, x, dy, dx); break;
    case NN_FLATTEN:
      if (dx) rc = flatten_backward(c, s, dy, dx);
      break;
    default: return 0;
  }
  if (rc) {
    gs_log(GS_LOG_ERROR, "nn: layer '%s': a oneDNN backward primitive failed",
           l->name);
    if (blk) { /* the loops cannot take over a blocked layout */
      net->blk_broken = 1;
      return 1;
    }
    return 0;
  }
  return 1;
}

/* ---- Blocked passes --------------------------------------------------------- */

int nn_dnnl_act_block(void) {
  const char *e = getenv("GRADSYNC_NN_BLOCKED");
  if (e && strcmp(e, "0") == 0) return 0;
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  if ((isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core) return 16;
  if ((isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2) return 8;
  return 0;
}

/* The layers of s that a blocked pass must run on oneDNN (those whose
 * slot is blocked, apart from the elementwise ones), their forward and
 * backward primitives made now; -1 with the first that cannot be made. */
static int prepare_seq(gs_nn_net *net, nn_dnnl_net *c, nn_seq *seq, int batch,
                       const nn_layer **bad) {
  for (int i = 0; i < seq->n; i++) {
    nn_layer *l = seq->layers[i];
    if (l->kind == NN_RESIDUAL) {
      if (prepare_seq(net, c, &l->main, batch, bad) ||
          prepare_seq(net, c, &l->shortcut, batch, bad))
        return -1;
      continue;
    }
    if (!slot_blk(net, l) || l->kind == NN_RELU || l->kind == NN_DROPOUT) continue;
    slot *s = slot_find(l, batch, slot_prec(net, l), 1);
    if (!s) return *bad = l, -1;
    if (!s->used) {
      s->used = 1;
      s->failed = create_fwd(c, l, s) != 0;
    }
    if (!s->failed && (l->kind == NN_CONV || l->kind == NN_LINEAR) && !s->bwd_tried) {
      s->bwd_tried = 1;
      s->bwd_failed = gemm_layer_bwd_create(c, l, s) != 0;
    }
    if (s->failed || s->bwd_failed) return *bad = l, -1;
  }
  return 0;
}

int nn_dnnl_prepare(gs_nn_net *net, int batch) {
  nn_dnnl_net *c = ctx_get(net);
  if (!c) return -1;
  apply_threads();
  const nn_layer *bad = NULL;
  int rc = prepare_seq(net, c, &net->top, batch, &bad);
  if (rc) {
    net->blk_broken = 1;
    gs_log(GS_LOG_WARN,
           "nn: layer '%s': oneDNN has no primitive for it on blocked activations "
           "(batch %d); this net keeps its activations NCHW from now on",
           bad ? bad->name : "?", batch);
  }
  return rc;
}

const char *nn_dnnl_version(void) {
  static char buf[32];
  const dnnl_version_t *v = dnnl_version();
  snprintf(buf, sizeof buf, "%d.%d.%d", v->major, v->minor, v->patch);
  return buf;
}

/* oneDNN says which ISA it dispatches to (capped by ONEDNN_MAX_CPU_ISA);
 * the CPU says whether it has the bf16 instructions at all. */
int nn_dnnl_bf16_native(char *why, size_t why_len) {
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  int hw = 0;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  hw = __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
#endif
  int lib = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
  if (hw && lib) return 1;
  if (why && why_len) {
    if (!hw)
      snprintf(why, why_len, "this CPU has neither AVX-512 BF16 nor AMX");
    else
      snprintf(why, why_len, "oneDNN %s dispatches to ISA 0x%x here, below "
                             "avx512_core_bf16 (ONEDNN_MAX_CPU_ISA set?)",
               nn_dnnl_version(), (unsigned)isa);
  }
  return 0;
}
