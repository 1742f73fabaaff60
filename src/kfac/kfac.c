/*
 * The K-FAC optimizer (gradsync/kfac.h): per-layer state, the layer hooks
 * that build the factors, and the step's skeleton, which calls the
 * scheme's ops (kfac_scheme.h; scheme_dkfac.c, scheme_spd.c, scheme_dp.c)
 * where the schemes differ. One iteration of step k:
 *
 *   forward   hook per layer: A_l from its input      (cov step); the
 *             scheme may start exchanging it (spd)
 *   backward  hook per layer: G_l from its output gradient, likewise
 *   step      1. factors: the scheme exchanges them (dkfac, spd; dp uses
 *                the owner's own); then running averages (decay xi)
 *             2. inverses (every inv_every steps), placed and shared as
 *                the scheme does
 *             3. v = G^-1 grad A^-1 per layer by the layer's holder, shared
 *                as the scheme does (dp), KL clip, SGD with momentum on
 *                every parameter
 *
 * Without a communicator or on one rank, every scheme runs the one-process
 * table below: every layer held, nothing exchanged.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kfac_scheme.h"

/* ---- Configuration ------------------------------------------------------ */

/* The schemes by gs_kfac_dist: their names are what gs_kfac_dist_parse
 * accepts. */
static const kfac_scheme_ops *const schemes[GS_KFAC_DIST_COUNT] = {
    [GS_KFAC_DIST_DKFAC] = &kfac_scheme_dkfac,
    [GS_KFAC_DIST_SPD] = &kfac_scheme_spd,
    [GS_KFAC_DIST_DP] = &kfac_scheme_dp,
};
static const char *const inv_names[GS_KFAC_INV_COUNT] = {"chol", "eig"};

/* One process: every layer held and inverted here, nothing exchanged. */
static const kfac_scheme_ops one_process = {
    .name = "one process",
    .update_inverses = kfac_invert_held,
};

void gs_kfac_config_default(gs_kfac_config *cfg, const gs_nn_sgd_config *sgd) {
  memset(cfg, 0, sizeof *cfg);
  if (sgd) cfg->sgd = *sgd;
  cfg->damping = 0.003f;
  cfg->factor_decay = 0.95f;
  cfg->kl_clip = 0.001f;
  cfg->cov_every = 1;
  cfg->inv_every = 10;
  cfg->inverse = GS_KFAC_INV_CHOL;
  cfg->dist = GS_KFAC_DIST_DKFAC;
}

gs_status gs_kfac_dist_parse(const char *s, gs_kfac_dist *out) {
  for (int i = 0; s && i < GS_KFAC_DIST_COUNT; i++)
    if (strcmp(s, schemes[i]->name) == 0) {
      *out = (gs_kfac_dist)i;
      return GS_OK;
    }
  return gs_error(GS_ERR_PARSE,
                  "K-FAC scheme '%s': expected dkfac, spd or dp", s ? s : "");
}

const char *gs_kfac_dist_name(gs_kfac_dist d) {
  return (unsigned)d < GS_KFAC_DIST_COUNT ? schemes[d]->name : "?";
}

gs_status gs_kfac_inverse_parse(const char *s, gs_kfac_inverse *out) {
  for (int i = 0; s && i < GS_KFAC_INV_COUNT; i++)
    if (strcmp(s, inv_names[i]) == 0) {
      *out = (gs_kfac_inverse)i;
      return GS_OK;
    }
  return gs_error(GS_ERR_PARSE, "K-FAC inverse '%s': expected chol or eig",
                  s ? s : "");
}

const char *gs_kfac_inverse_name(gs_kfac_inverse m) {
  return (unsigned)m < GS_KFAC_INV_COUNT ? inv_names[m] : "?";
}

static gs_status check_config(const gs_kfac_config *c) {
  if (!(c->damping > 0.0f) || !isfinite(c->damping))
    return gs_error(GS_ERR_INVALID_ARG, "K-FAC: damping %g must be > 0",
                    (double)c->damping);
  if (!(c->factor_decay >= 0.0f && c->factor_decay < 1.0f))
    return gs_error(GS_ERR_INVALID_ARG,
                    "K-FAC: factor decay %g must be in [0, 1)",
                    (double)c->factor_decay);
  if (!(c->kl_clip >= 0.0f) || !isfinite(c->kl_clip))
    return gs_error(GS_ERR_INVALID_ARG, "K-FAC: KL clip %g must be >= 0",
                    (double)c->kl_clip);
  if (c->cov_every < 1 || c->inv_every < 1)
    return gs_error(GS_ERR_INVALID_ARG,
                    "K-FAC: factor interval %d and inverse interval %d must "
                    "be >= 1", c->cov_every, c->inv_every);
  if ((unsigned)c->dist >= GS_KFAC_DIST_COUNT ||
      (unsigned)c->inverse >= GS_KFAC_INV_COUNT)
    return gs_error(GS_ERR_INVALID_ARG, "K-FAC: unknown scheme or inverse");
  return GS_OK;
}

/* ---- Helpers ------------------------------------------------------------- */

void kfac_trace(const kfac *k, const char *name, double t0, double t1) {
  if (k->cfg.trace) k->cfg.trace(k->cfg.trace_ctx, name, t0, t1);
}

static void trace_layer(const kfac *k, const char *factor, const kfac_layer *l,
                        double t0, double t1) {
  if (!k->cfg.trace) return;
  char name[160];
  snprintf(name, sizeof name, "%s %s", factor, l->info.name);
  k->cfg.trace(k->cfg.trace_ctx, name, t0, t1);
}

static int cov_step(const kfac *k) { return k->step % k->cfg.cov_every == 0; }
static int inv_step(const kfac *k) { return k->step % k->cfg.inv_every == 0; }

void kfac_push_req(kfac *k, gs_request *r) { k->reqs[k->nreqs++] = r; }

gs_status kfac_wait_all(kfac *k) {
  gs_status first = GS_OK;
  for (size_t i = 0; i < k->nreqs; i++) {
    gs_status st = gs_wait(k->reqs[i]);
    if (st != GS_OK && first == GS_OK) first = st;
  }
  k->nreqs = 0;
  return first;
}

/* ---- Hooks ------------------------------------------------------------------ */

/* Hands factor f, just built, to the scheme; a failure waits for step. */
static void factor_built(kfac *k, size_t f) {
  if (!k->ops->factor_built) return;
  gs_status st = k->ops->factor_built(k, f);
  if (st != GS_OK && k->hook_error == GS_OK) k->hook_error = st;
}

static void hook_forward(void *ctx, size_t layer, const float *x, int batch) {
  kfac *k = ctx;
  kfac_layer *l = &k->layers[layer];
  if (!cov_step(k) || !l->mine) return;
  double t0 = gs_now();
  if (l->info.kind == GS_NN_HOOK_LINEAR) {
    kfac_factor_a_linear(x, batch, l->info.d_in, l->bias, l->Anew);
  } else {
    memset(l->Anew, 0, (size_t)l->dA * l->dA * sizeof(float));
    for (int b = 0; b < batch; b++) {
      gs_nn_layer_patches(k->net, layer, x + (size_t)b * l->info.in_size,
                          k->col, (size_t)l->info.spatial);
      kfac_factor_a_conv_add(k->col, l->info.d_in, l->info.spatial, batch,
                             l->bias, l->Anew);
    }
    kfac_symmetrize(l->Anew, l->dA);
  }
  l->fresh_a = 1;
  double t1 = gs_now();
  k->stats.factor_compute_s += t1 - t0;
  trace_layer(k, "A", l, t0, t1);
  l->a_ready = t1;
  factor_built(k, 2 * layer);
}

static void hook_backward(void *ctx, size_t layer, const float *dy, int batch) {
  kfac *k = ctx;
  kfac_layer *l = &k->layers[layer];
  if (!cov_step(k) || !l->mine) return;
  double t0 = gs_now();
  if (l->info.kind == GS_NN_HOOK_LINEAR)
    kfac_factor_g_linear(dy, batch, l->dG, l->Gnew);
  else
    kfac_factor_g_conv(dy, batch, l->dG, l->info.spatial, l->Gnew);
  l->fresh_g = 1;
  double t1 = gs_now();
  k->stats.factor_compute_s += t1 - t0;
  trace_layer(k, "G", l, t0, t1);
  l->g_ready = t1;
  factor_built(k, 2 * layer + 1);
}

/* ---- Step ------------------------------------------------------------------- */

static gs_status update_factors(kfac *k) {
  double t0 = gs_now();
  if (k->ops->exchange_factors) GS_CHECK(k->ops->exchange_factors(k));
  double t1 = gs_now();
  k->stats.factor_comm_s += t1 - t0;
  if (k->ops->exchange_factors) kfac_trace(k, "factor exchange", t0, t1);
  for (size_t i = 0; i < k->L; i++) {
    kfac_layer *l = &k->layers[i];
    if (!l->mine) continue;
    kfac_running_average(l->A, l->Anew, (size_t)l->dA * l->dA,
                         k->cfg.factor_decay, !l->have_factors);
    kfac_running_average(l->G, l->Gnew, (size_t)l->dG * l->dG,
                         k->cfg.factor_decay, !l->have_factors);
    l->have_factors = 1;
    l->fresh_a = l->fresh_g = 0;
  }
  k->stats.factor_updates++;
  if (k->ops->factors_updated) GS_CHECK(k->ops->factors_updated(k));
  return GS_OK;
}

gs_status kfac_invert_factor(kfac *k, size_t f) {
  kfac_layer *l = &k->layers[f / 2];
  float da, dg;
  kfac_damping_split(l->A, l->dA, l->G, l->dG, k->cfg.damping, &da, &dg);
  char what[96];
  snprintf(what, sizeof what, "%s of layer '%s'", f % 2 ? "G" : "A",
           l->info.name);
  double t0 = gs_now();
  gs_status st =
      f % 2 == 0 ? kfac_invert(l->A, l->dA, da, k->cfg.inverse, l->Ainv, k->work, what)
                 : kfac_invert(l->G, l->dG, dg, k->cfg.inverse, l->Ginv, k->work, what);
  trace_layer(k, f % 2 ? "inverse G" : "inverse A", l, t0, gs_now());
  return st;
}

int kfac_factor_dim(const kfac *k, size_t f) {
  const kfac_layer *l = &k->layers[f / 2];
  return f % 2 ? l->dG : l->dA;
}
float *kfac_factor_inv(kfac *k, size_t f) {
  kfac_layer *l = &k->layers[f / 2];
  return f % 2 ? l->Ginv : l->Ainv;
}

gs_status kfac_invert_held(kfac *k) {
  size_t F = 2 * k->L;
  double t0 = gs_now();
  for (size_t f = 0; f < F; f++)
    if (k->layers[f / 2].mine) GS_CHECK(kfac_invert_factor(k, f));
  k->stats.inversion_s += gs_now() - t0;
  return GS_OK;
}

static gs_status update_inverses(kfac *k) {
  GS_CHECK(k->ops->update_inverses(k));
  k->have_inverses = 1;
  k->stats.inverse_updates++;
  return GS_OK;
}

static void grad_gather(gs_nn_net *net, const kfac_layer *l, float *m) {
  const gs_nn_param *w = gs_nn_param_at(net, l->info.weight_index);
  const gs_nn_param *b =
      l->bias ? gs_nn_param_at(net, l->info.bias_index) : NULL;
  int din = l->info.d_in;
  for (int o = 0; o < l->dG; o++) {
    memcpy(m + (size_t)o * l->dA, w->grad + (size_t)o * din,
           (size_t)din * sizeof(float));
    if (b) m[(size_t)o * l->dA + din] = b->grad[o];
  }
}

static void grad_scatter(gs_nn_net *net, const kfac_layer *l, const float *m,
                         float scale) {
  const gs_nn_param *w = gs_nn_param_at(net, l->info.weight_index);
  const gs_nn_param *b =
      l->bias ? gs_nn_param_at(net, l->info.bias_index) : NULL;
  int din = l->info.d_in;
  for (int o = 0; o < l->dG; o++) {
    for (int i = 0; i < din; i++)
      w->grad[(size_t)o * din + i] = scale * m[(size_t)o * l->dA + i];
    if (b) b->grad[o] = scale * m[(size_t)o * l->dA + din];
  }
}

static gs_status precondition_all(kfac *k) {
  size_t L = k->L;
  double t0 = gs_now(), bwait = 0.0;
  gs_status st = GS_OK;
  for (size_t i = 0; i < L; i++) {
    kfac_layer *l = &k->layers[i];
    grad_gather(k->net, l, l->grad);
    if (l->mine)
      kfac_precondition(l->Ginv, l->dG, l->grad, l->dA, l->Ainv, l->v, l->tmp);
    if (k->ops->share_v && st == GS_OK) st = k->ops->share_v(k, i);
  }
  if (k->ops->share_v) {
    double tw = gs_now();
    gs_status wst = kfac_wait_all(k);
    double tw1 = gs_now();
    bwait = tw1 - tw;
    kfac_trace(k, "gradient broadcast", tw, tw1);
    k->stats.bcast_s += bwait;
    if (st == GS_OK) st = wst;
  }
  GS_CHECK(st);
  double vg = 0.0;
  for (size_t i = 0; i < L; i++) {
    kfac_layer *l = &k->layers[i];
    vg += kfac_dot(l->v, l->grad, (size_t)l->dG * l->dA);
  }
  double nu = kfac_kl_nu(vg, gs_nn_sgd_lr(k->sgd), k->cfg.kl_clip);
  for (size_t i = 0; i < L; i++)
    grad_scatter(k->net, &k->layers[i], k->layers[i].v, (float)nu);
  double t1 = gs_now();
  k->stats.precondition_s += t1 - t0 - bwait;
  kfac_trace(k, "precondition", t0, t1);
  return GS_OK;
}

static gs_status kfac_step(void *impl) {
  kfac *k = impl;
  if (k->hook_error != GS_OK) {
    gs_status st = k->hook_error;
    k->hook_error = GS_OK;
    kfac_wait_all(k);
    return st;
  }
  if (cov_step(k)) {
    for (size_t i = 0; i < k->L; i++) {
      const kfac_layer *l = &k->layers[i];
      if (l->mine && (!l->fresh_a || !l->fresh_g)) {
        kfac_wait_all(k);
        return gs_error(GS_ERR_STATE,
                        "K-FAC step %ld: layer '%s' has no %s from this "
                        "iteration (forward and backward in training mode "
                        "must come before the step)", k->step, l->info.name,
                        l->fresh_a ? "G" : "A");
      }
    }
    GS_CHECK(update_factors(k));
  }
  if (inv_step(k) || !k->have_inverses) GS_CHECK(update_inverses(k));
  GS_CHECK(precondition_all(k));
  double t0 = gs_now();
  GS_CHECK(gs_nn_sgd_step(k->sgd));
  k->stats.precondition_s += gs_now() - t0;
  k->step++;
  k->stats.steps++;
  k->stats.exposed_comm_s = k->stats.factor_comm_s + k->stats.bcast_s;
  return GS_OK;
}

/* ---- Creation ------------------------------------------------------------- */

static void kfac_free(void *impl) {
  kfac *k = impl;
  if (!k) return;
  kfac_wait_all(k);
  if (k->net) gs_nn_set_layer_hooks(k->net, NULL, NULL, NULL);
  if (k->ops && k->ops->destroy) k->ops->destroy(k);
  for (size_t i = 0; k->layers && i < k->L; i++) {
    kfac_layer *l = &k->layers[i];
    gs_free(l->A);
    gs_free(l->G);
    gs_free(l->Anew);
    gs_free(l->Gnew);
    gs_free(l->Ainv);
    gs_free(l->Ginv);
    gs_free(l->grad);
    gs_free(l->v);
    gs_free(l->tmp);
  }
  gs_free(k->layers);
  gs_free(k->work);
  gs_free(k->col);
  gs_free(k->reqs);
  gs_nn_sgd_destroy(k->sgd);
  gs_free(k);
}

static void op_set_lr(void *impl, float lr) {
  gs_nn_sgd_set_lr(((kfac *)impl)->sgd, lr);
}
static float op_lr(const void *impl) {
  return gs_nn_sgd_lr(((const kfac *)impl)->sgd);
}
static gs_nn_sgd *op_sgd(void *impl) { return ((kfac *)impl)->sgd; }

static const gs_nn_optim_ops kfac_ops = {
    .name = "kfac",
    .step = kfac_step,
    .step_param = NULL,
    .set_lr = op_set_lr,
    .lr = op_lr,
    .sgd = op_sgd,
    .destroy = kfac_free,
};

static gs_status alloc_layer(kfac_layer *l, int factors) {
  size_t na = (size_t)l->dA * l->dA, ng = (size_t)l->dG * l->dG;
  size_t nw = (size_t)l->dG * l->dA;
  l->grad = kfac_zalloc(nw);
  l->v = kfac_zalloc(nw);
  l->tmp = kfac_zalloc(nw);
  if (!l->grad || !l->v || !l->tmp) return GS_ERR_NOMEM;
  if (!factors) return GS_OK;
  l->A = kfac_zalloc(na);
  l->Anew = kfac_zalloc(na);
  l->Ainv = kfac_zalloc(na);
  l->G = kfac_zalloc(ng);
  l->Gnew = kfac_zalloc(ng);
  l->Ginv = kfac_zalloc(ng);
  if (!l->A || !l->Anew || !l->Ainv || !l->G || !l->Gnew || !l->Ginv)
    return GS_ERR_NOMEM;
  return GS_OK;
}

gs_status gs_kfac_create(gs_nn_optim **out, gs_nn_net *net, gs_comm *comm,
                         const gs_kfac_config *cfg) {
  if (!out || !net || !cfg)
    return gs_error(GS_ERR_INVALID_ARG, "gs_kfac_create: a NULL argument");
  *out = NULL;
  GS_CHECK(check_config(cfg));
  size_t L = gs_nn_hook_layer_count(net);
  if (L == 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_kfac_create: the net has no linear or conv layer");
  kfac *k = gs_calloc(1, sizeof *k);
  if (!k) return GS_ERR_NOMEM;
  k->cfg = *cfg;
  k->comm = comm;
  k->rank = comm ? gs_comm_rank(comm) : 0;
  k->size = comm ? gs_comm_size(comm) : 1;
  k->L = L;
  k->ops = comm && k->size > 1 ? schemes[cfg->dist] : &one_process;
  gs_status st = gs_nn_sgd_create(&k->sgd, net, &cfg->sgd);
  if (st != GS_OK) {
    kfac_free(k);
    return st;
  }
  k->layers = gs_calloc(L, sizeof *k->layers);
  k->reqs = gs_calloc(4 * L + 4, sizeof *k->reqs);
  if (!k->layers || !k->reqs) st = GS_ERR_NOMEM;
  size_t max_d = 1, max_col = 1;
  for (size_t i = 0; st == GS_OK && i < L; i++) {
    kfac_layer *l = &k->layers[i];
    st = gs_nn_hook_layer_info(net, i, &l->info);
    if (st != GS_OK) break;
    l->bias = l->info.bias_index != SIZE_MAX;
    l->dA = l->info.d_in + l->bias;
    l->dG = l->info.d_out;
    l->mine = 1;
    max_d = GS_MAX(max_d, (size_t)GS_MAX(l->dA, l->dG));
    if (l->info.kind == GS_NN_HOOK_CONV)
      max_col = GS_MAX(max_col, (size_t)l->info.d_in * l->info.spatial);
  }
  if (st == GS_OK && k->ops->create) st = k->ops->create(k);
  for (size_t i = 0; st == GS_OK && i < L; i++)
    st = alloc_layer(&k->layers[i], k->layers[i].mine);
  if (st == GS_OK) {
    k->work = kfac_zalloc(kfac_inverse_work((int)max_d, cfg->inverse));
    k->col = kfac_zalloc(max_col);
    if (!k->work || !k->col) st = GS_ERR_NOMEM;
  }
  if (st == GS_OK) st = gs_nn_set_layer_hooks(net, hook_forward, hook_backward, k);
  if (st != GS_OK) {
    kfac_free(k);
    return st;
  }
  k->net = net;
  return gs_nn_optim_create(out, &kfac_ops, k);
}

gs_status gs_kfac_stats_get(gs_nn_optim *opt, gs_kfac_stats *out) {
  if (!opt || !out || strcmp(gs_nn_optim_name(opt), "kfac") != 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_kfac_stats_get: not a K-FAC optimizer");
  *out = ((kfac *)gs_nn_optim_impl(opt))->stats;
  return GS_OK;
}

void gs_kfac_stats_reset(gs_nn_optim *opt) {
  if (!opt || strcmp(gs_nn_optim_name(opt), "kfac") != 0) return;
  kfac *k = gs_nn_optim_impl(opt);
  size_t a = k->stats.merge_groups_a, g = k->stats.merge_groups_g;
  int loc = k->stats.inverted_locally;
  memset(&k->stats, 0, sizeof k->stats);
  k->stats.merge_groups_a = a;
  k->stats.merge_groups_g = g;
  k->stats.inverted_locally = loc;
}

/* ---- State files --------------------------------------------------------- */

static const char KFAC_MAGIC[8] = {'G', 'S', 'K', 'F', 'A', 'C', 0, 0};
#define KFAC_STATE_VERSION 1u

/* A state file (host byte order): this header; per layer a kfac_state_layer
 * and, when the rank holds the layer's factors, A, G, Ainv and Ginv
 * (dA^2, dG^2, dA^2, dG^2 floats); the crc32 of all that (gs_nn_file). */
typedef struct {
  char magic[8];
  uint32_t version, dist, inverse, layers;
  int32_t rank, size;
  int64_t step;
  uint32_t have_inverses, reserved;
} kfac_state_header;

typedef struct {
  uint32_t dA, dG, holds, have_factors;
} kfac_state_layer;

static gs_status kfac_of(gs_nn_optim *opt, const char *fn, kfac **out) {
  if (!opt || strcmp(gs_nn_optim_name(opt), "kfac") != 0)
    return gs_error(GS_ERR_INVALID_ARG, "%s: not a K-FAC optimizer", fn);
  *out = gs_nn_optim_impl(opt);
  return GS_OK;
}

static size_t layer_state_floats(const kfac_layer *l) {
  return 2 * ((size_t)l->dA * l->dA + (size_t)l->dG * l->dG);
}

gs_status gs_kfac_state_save(gs_nn_optim *opt, const char *path) {
  kfac *k = NULL;
  GS_CHECK(kfac_of(opt, "gs_kfac_state_save", &k));
  if (!path) return gs_error(GS_ERR_INVALID_ARG, "gs_kfac_state_save: path NULL");
  kfac_state_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, KFAC_MAGIC, sizeof h.magic);
  h.version = KFAC_STATE_VERSION;
  h.dist = (uint32_t)k->cfg.dist;
  h.inverse = (uint32_t)k->cfg.inverse;
  h.layers = (uint32_t)k->L;
  h.rank = k->rank;
  h.size = k->size;
  h.step = k->step;
  h.have_inverses = (uint32_t)k->have_inverses;
  gs_nn_file f;
  GS_CHECK(gs_nn_file_create(&f, path, "K-FAC state"));
  gs_status st = gs_nn_file_write(&f, &h, sizeof h);
  for (size_t i = 0; st == GS_OK && i < k->L; i++) {
    const kfac_layer *l = &k->layers[i];
    kfac_state_layer sl = {(uint32_t)l->dA, (uint32_t)l->dG, l->A != NULL,
                           (uint32_t)l->have_factors};
    st = gs_nn_file_write(&f, &sl, sizeof sl);
    if (st != GS_OK || !l->A) continue;
    size_t na = (size_t)l->dA * l->dA, ng = (size_t)l->dG * l->dG;
    st = gs_nn_file_write(&f, l->A, na * sizeof(float));
    if (st == GS_OK) st = gs_nn_file_write(&f, l->G, ng * sizeof(float));
    if (st == GS_OK) st = gs_nn_file_write(&f, l->Ainv, na * sizeof(float));
    if (st == GS_OK) st = gs_nn_file_write(&f, l->Ginv, ng * sizeof(float));
  }
  if (st != GS_OK) {
    gs_nn_file_abort(&f);
    return st;
  }
  return gs_nn_file_commit(&f);
}

/* Checks a state file against this optimizer; *why says what differs. */
static int state_fits(const kfac *k, const unsigned char *data, size_t size,
                      char *why, size_t n) {
  kfac_state_header h;
  if (size < sizeof h + sizeof(uint32_t)) {
    snprintf(why, n, "truncated (%zu bytes)", size);
    return 0;
  }
  memcpy(&h, data, sizeof h);
  if (memcmp(h.magic, KFAC_MAGIC, sizeof h.magic) != 0) {
    snprintf(why, n, "bad magic: not a gradsync K-FAC state file");
    return 0;
  }
  if (h.version != KFAC_STATE_VERSION) {
    snprintf(why, n, "version %u, this build reads %u", h.version, KFAC_STATE_VERSION);
    return 0;
  }
  if (!gs_nn_file_crc_ok(data, size)) {
    snprintf(why, n, "checksum mismatch (corrupt file)");
    return 0;
  }
  if (h.dist != (uint32_t)k->cfg.dist || h.layers != k->L || h.rank != k->rank ||
      h.size != k->size) {
    snprintf(why, n,
             "written by rank %d of %d for %s over %u layers; this is rank %d of "
             "%d running %s over %zu layers", (int)h.rank, (int)h.size,
             h.dist < GS_KFAC_DIST_COUNT ? schemes[h.dist]->name : "an unknown scheme",
             h.layers, k->rank, k->size, schemes[k->cfg.dist]->name, k->L);
    return 0;
  }
  if (h.step < 0) {
    snprintf(why, n, "bad step %lld", (long long)h.step);
    return 0;
  }
  size_t off = sizeof h;
  for (size_t i = 0; i < k->L; i++) {
    const kfac_layer *l = &k->layers[i];
    kfac_state_layer sl;
    if (size - sizeof(uint32_t) - off < sizeof sl) {
      snprintf(why, n, "truncated at layer %zu (%s)", i, l->info.name);
      return 0;
    }
    memcpy(&sl, data + off, sizeof sl);
    off += sizeof sl;
    if (sl.dA != (uint32_t)l->dA || sl.dG != (uint32_t)l->dG ||
        sl.holds != (uint32_t)(l->A != NULL)) {
      snprintf(why, n,
               "layer %zu (%s): factors of %ux%u and %ux%u%s in the file, "
               "%dx%d and %dx%d%s here", i, l->info.name, sl.dA, sl.dA, sl.dG, sl.dG,
               sl.holds ? "" : " (not held)", l->dA, l->dA, l->dG, l->dG,
               l->A ? "" : " (not held)");
      return 0;
    }
    size_t bytes = sl.holds ? layer_state_floats(l) * sizeof(float) : 0;
    if (size - sizeof(uint32_t) - off < bytes) {
      snprintf(why, n, "truncated in layer %zu (%s)", i, l->info.name);
      return 0;
    }
    off += bytes;
  }
  if (off != size - sizeof(uint32_t)) {
    snprintf(why, n, "%zu trailing bytes", size - sizeof(uint32_t) - off);
    return 0;
  }
  return 1;
}

gs_status gs_kfac_state_load(gs_nn_optim *opt, const char *path, long expect_step) {
  kfac *k = NULL;
  GS_CHECK(kfac_of(opt, "gs_kfac_state_load", &k));
  if (!path) return gs_error(GS_ERR_INVALID_ARG, "gs_kfac_state_load: path NULL");
  size_t max = sizeof(kfac_state_header) + sizeof(uint32_t);
  for (size_t i = 0; i < k->L; i++)
    max += sizeof(kfac_state_layer) + layer_state_floats(&k->layers[i]) * sizeof(float);
  unsigned char *data = NULL;
  size_t size = 0;
  GS_CHECK(gs_nn_file_read(path, "K-FAC state", max, &data, &size));
  char why[256];
  gs_status st = GS_OK;
  if (!state_fits(k, data, size, why, sizeof why)) {
    st = gs_error(GS_ERR_PARSE, "K-FAC state %s: %s", path, why);
  } else {
    kfac_state_header h;
    memcpy(&h, data, sizeof h);
    if (expect_step >= 0 && h.step != expect_step) {
      st = gs_error(GS_ERR_PARSE,
                    "K-FAC state %s: from step %lld, the checkpoint is at step %ld "
                    "(a save was cut between the two files)", path,
                    (long long)h.step, expect_step);
    } else {
      const unsigned char *p = data + sizeof h;
      for (size_t i = 0; i < k->L; i++) {
        kfac_layer *l = &k->layers[i];
        kfac_state_layer sl;
        memcpy(&sl, p, sizeof sl);
        p += sizeof sl;
        l->have_factors = sl.have_factors != 0;
        if (!sl.holds) continue;
        size_t na = (size_t)l->dA * l->dA, ng = (size_t)l->dG * l->dG;
        memcpy(l->A, p, na * sizeof(float));
        p += na * sizeof(float);
        memcpy(l->G, p, ng * sizeof(float));
        p += ng * sizeof(float);
        memcpy(l->Ainv, p, na * sizeof(float));
        p += na * sizeof(float);
        memcpy(l->Ginv, p, ng * sizeof(float));
        p += ng * sizeof(float);
      }
      k->step = h.step;
      k->have_inverses = h.have_inverses != 0;
    }
  }
  gs_free(data);
  return st;
}
