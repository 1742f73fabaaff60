/*
 * The K-FAC optimizer (gradsync/kfac.h): per-layer state, the layer hooks
 * that build the factors, and the step. One iteration of step k:
 *
 *   forward   hook per layer: A_l from its input      (cov step)
 *             spd: A_l's upper triangle joins its merge group; a full
 *             group is all-reduced at once (non-blocking)
 *   backward  hook per layer: G_l from its output gradient, likewise
 *   step      1. factors: dkfac all-reduces all of them in one message;
 *                spd waits for its group messages; dp uses the owner's
 *                own; then running averages (decay xi)
 *             2. inverses (every inv_every steps): dkfac inverts its
 *                round-robin share and broadcasts; spd inverts its LPT
 *                share, broadcasting each result as soon as it is ready
 *                while it inverts the next, and inverts the small factors
 *                locally; dp owners invert their layers
 *             3. v = G^-1 grad A^-1 per layer (dp: by the owner, then
 *                broadcast), KL clip, SGD with momentum on every parameter
 *
 * Every rank issues the same collectives in the same order on `comm`: the
 * groups and placements that decide them are computed on rank 0 and
 * broadcast, or derived from data every rank has.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gradsync/plan.h"
#include "kfac_internal.h"

typedef struct {
  gs_nn_layer_info info;
  int dA, dG, bias;
  int mine;               /* this rank holds the layer's factors (dp) */
  int dp_owner;           /* dp: the rank that owns the layer */
  float *A, *G;           /* running averages */
  float *Anew, *Gnew;     /* this step's */
  float *Ainv, *Ginv;     /* damped inverses */
  float *grad, *v, *tmp;  /* [dG][dA] */
  int have_factors;       /* running averages initialised */
  int fresh_a, fresh_g;   /* Anew / Gnew built this iteration */
  size_t a_off, g_off;    /* spd: triangle offsets in the stream buffer */
  double a_ready, g_ready;/* spd: when the factor was ready (profiling) */
} kfac_layer;

typedef struct {
  gs_nn_net *net;
  gs_comm *comm;
  int rank, size;
  gs_kfac_config cfg;
  gs_nn_sgd *sgd;
  size_t L;
  kfac_layer *layers;
  long step;
  int have_inverses;
  float *work;            /* inversion workspace */
  float *col;             /* one image's patches */
  float *fused;           /* dkfac: all factors; spd: the triangle streams */
  size_t fused_n;
  /* spd */
  size_t a_stream_n;      /* floats of the A stream (the G stream follows) */
  int *a_end, *g_end;     /* by layer: 1 if the layer closes a message */
  size_t a_begin, g_begin;/* offset where the open message starts */
  gs_request **reqs;
  size_t nreqs;
  int planned;
  long profile_step;      /* the cov step whose times the plan uses */
  int *fowner;            /* 2L factors (A of l = 2l, G = 2l + 1): owner,
                             -1 inverted by every rank */
  int placed;
  float *tri;             /* spd: inverse triangles, for broadcasts */
  size_t *tri_off;        /* 2L */
  gs_kfac_stats stats;
  /* A hook cannot return an error: the first one is kept for step. */
  gs_status hook_error;
} kfac;

/* ---- Configuration ------------------------------------------------------ */

static const char *const dist_names[GS_KFAC_DIST_COUNT] = {"dkfac", "spd", "dp"};
static const char *const inv_names[GS_KFAC_INV_COUNT] = {"chol", "eig"};

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
    if (strcmp(s, dist_names[i]) == 0) {
      *out = (gs_kfac_dist)i;
      return GS_OK;
    }
  return gs_error(GS_ERR_PARSE,
                  "K-FAC scheme '%s': expected dkfac, spd or dp", s ? s : "");
}

const char *gs_kfac_dist_name(gs_kfac_dist d) {
  return (unsigned)d < GS_KFAC_DIST_COUNT ? dist_names[d] : "?";
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

static void trace(const kfac *k, const char *name, double t0, double t1) {
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
static int distributed(const kfac *k) { return k->comm && k->size > 1; }

static gs_status push_req(kfac *k, gs_request *r) {
  k->reqs[k->nreqs++] = r;
  return GS_OK;
}

/* Waits for every outstanding request, returning the first error. */
static gs_status wait_all(kfac *k) {
  gs_status first = GS_OK;
  for (size_t i = 0; i < k->nreqs; i++) {
    gs_status st = gs_wait(k->reqs[i]);
    if (st != GS_OK && first == GS_OK) first = st;
  }
  k->nreqs = 0;
  return first;
}

static double factor_cost(int d) { return (double)d * d * d; }

/* ---- Hooks ------------------------------------------------------------------ */

static gs_status spd_send(kfac *k, size_t *begin, size_t end) {
  gs_request *r = NULL;
  float *p = k->fused + *begin;
  GS_CHECK(gs_iallreduce(k->comm, GS_IN_PLACE, p, end - *begin, GS_F32,
                         GS_SUM, GS_ALGO_AUTO, &r));
  k->stats.factor_bytes += (double)(end - *begin) * sizeof(float);
  *begin = end;
  return push_req(k, r);
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
  if (k->cfg.dist == GS_KFAC_DIST_SPD && distributed(k)) {
    kfac_triangle_pack(l->Anew, l->dA, k->fused + l->a_off);
    if (k->a_end[layer]) {
      gs_status st = spd_send(k, &k->a_begin, l->a_off + kfac_triangle_size(l->dA));
      if (st != GS_OK && k->hook_error == GS_OK) k->hook_error = st;
    }
  }
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
  if (k->cfg.dist == GS_KFAC_DIST_SPD && distributed(k)) {
    kfac_triangle_pack(l->Gnew, l->dG, k->fused + l->g_off);
    if (k->g_end[layer]) {
      gs_status st = spd_send(k, &k->g_begin, l->g_off + kfac_triangle_size(l->dG));
      if (st != GS_OK && k->hook_error == GS_OK) k->hook_error = st;
    }
  }
}

/* ---- spd: merge groups from the planner ------------------------------------ */

/* The factor streams as gradsync's planner sees a gradient stream: the
 * factor produced first is the profile's last tensor, its "backward time"
 * the time since the previous factor of its stream was ready. The optimal
 * policy's groups are contiguous runs of production order; a layer closes
 * a message if it is the last produced of its group. Rank 0 plans from its
 * own times; every rank receives the result. */
static gs_status spd_plan_stream(kfac *k, int forward, int *end) {
  size_t L = k->L;
  gs_profile prof;
  memset(&prof, 0, sizeof prof);
  prof.name = forward ? "kfac-A" : "kfac-G";
  prof.device = "";
  prof.source = "K-FAC factor ready times of this run";
  prof.ntensors = L;
  prof.tensors = gs_calloc(L, sizeof *prof.tensors);
  if (!prof.tensors) return GS_ERR_NOMEM;
  char name[] = "factor";
  for (size_t p = 0; p < L; p++) {
    /* production position p: forward layer p, backward layer L-1-p */
    size_t layer = forward ? p : L - 1 - p;
    size_t idx = L - 1 - p; /* profile index */
    const kfac_layer *l = &k->layers[layer];
    double t = forward ? l->a_ready : l->g_ready;
    double prev = 0.0;
    if (p > 0) {
      const kfac_layer *q = &k->layers[forward ? layer - 1 : layer + 1];
      prev = forward ? q->a_ready : q->g_ready;
    }
    prof.tensors[idx].name = name;
    prof.tensors[idx].numel = kfac_triangle_size(forward ? l->dA : l->dG);
    prof.tensors[idx].dtype = GS_F32;
    prof.tensors[idx].backward_s = p > 0 && t > prev ? t - prev : 0.0;
  }
  gs_plan_cost cost;
  gs_cost_topo topo = {.ranks = k->size, .nodes = gs_comm_nodes(k->comm)};
  gs_status st = gs_plan_cost_from_net(gs_comm_cost(k->comm), topo,
                                       GS_ALGO_AUTO, &cost);
  gs_plan *plan = NULL;
  if (st == GS_OK) st = gs_plan_make(&prof, &cost, "optimal", &plan);
  if (st == GS_OK) {
    for (size_t i = 0; i < L; i++) end[i] = 0;
    for (size_t g = 0; g < plan->ngroups; g++) {
      size_t min_idx = plan->tensors[plan->offsets[g]];
      size_t p = L - 1 - min_idx; /* last produced of the group */
      end[forward ? p : L - 1 - p] = 1;
    }
  }
  gs_plan_free(plan);
  gs_free(prof.tensors);
  return st;
}

static gs_status spd_plan(kfac *k) {
  size_t L = k->L;
  int32_t *ends = gs_calloc(2 * L + 1, sizeof *ends);
  if (!ends) return GS_ERR_NOMEM;
  gs_status st = GS_OK;
  if (k->rank == 0) {
    int *ea = gs_calloc(L, sizeof *ea), *eg = gs_calloc(L, sizeof *eg);
    if (!ea || !eg) st = GS_ERR_NOMEM;
    if (st == GS_OK) st = spd_plan_stream(k, 1, ea);
    if (st == GS_OK) st = spd_plan_stream(k, 0, eg);
    if (st == GS_OK)
      for (size_t i = 0; i < L; i++) {
        ends[i] = ea[i];
        ends[L + i] = eg[i];
      }
    ends[2 * L] = st == GS_OK ? 1 : -1; /* the other ranks learn a failure */
    gs_free(ea);
    gs_free(eg);
  }
  gs_status bst = gs_bcast(k->comm, ends, 2 * L + 1, GS_I32, 0, GS_ALGO_AUTO);
  if (bst == GS_OK && ends[2 * L] != 1 && st == GS_OK)
    st = gs_error(GS_ERR_INTERNAL, "K-FAC spd: rank 0 could not plan the factor messages");
  if (bst != GS_OK) st = bst;
  if (st == GS_OK) {
    size_t na = 0, ng = 0;
    for (size_t i = 0; i < L; i++) {
      k->a_end[i] = ends[i];
      k->g_end[i] = ends[L + i];
      na += (size_t)ends[i];
      ng += (size_t)ends[L + i];
    }
    k->stats.merge_groups_a = na;
    k->stats.merge_groups_g = ng;
    k->planned = 1;
  }
  gs_free(ends);
  return st;
}

/* ---- Step ------------------------------------------------------------------- */

static gs_status update_factors(kfac *k) {
  size_t L = k->L;
  float inv_p = 1.0f / (float)(distributed(k) ? k->size : 1);
  double t0 = gs_now();
  if (distributed(k) && k->cfg.dist == GS_KFAC_DIST_DKFAC) {
    size_t off = 0;
    for (size_t i = 0; i < L; i++) {
      kfac_layer *l = &k->layers[i];
      size_t na = (size_t)l->dA * l->dA, ng = (size_t)l->dG * l->dG;
      memcpy(k->fused + off, l->Anew, na * sizeof(float));
      memcpy(k->fused + off + na, l->Gnew, ng * sizeof(float));
      off += na + ng;
    }
    GS_CHECK(gs_allreduce(k->comm, GS_IN_PLACE, k->fused, off, GS_F32, GS_SUM,
                          GS_ALGO_AUTO));
    k->stats.factor_bytes += (double)off * sizeof(float);
    off = 0;
    for (size_t i = 0; i < L; i++) {
      kfac_layer *l = &k->layers[i];
      size_t na = (size_t)l->dA * l->dA, ng = (size_t)l->dG * l->dG;
      for (size_t j = 0; j < na; j++) l->Anew[j] = k->fused[off + j] * inv_p;
      for (size_t j = 0; j < ng; j++) l->Gnew[j] = k->fused[off + na + j] * inv_p;
      off += na + ng;
    }
  } else if (distributed(k) && k->cfg.dist == GS_KFAC_DIST_SPD) {
    GS_CHECK(wait_all(k));
    for (size_t i = 0; i < L; i++) {
      kfac_layer *l = &k->layers[i];
      kfac_triangle_unpack(k->fused + l->a_off, l->dA, l->Anew);
      kfac_triangle_unpack(k->fused + l->g_off, l->dG, l->Gnew);
      size_t na = (size_t)l->dA * l->dA, ng = (size_t)l->dG * l->dG;
      for (size_t j = 0; j < na; j++) l->Anew[j] *= inv_p;
      for (size_t j = 0; j < ng; j++) l->Gnew[j] *= inv_p;
    }
  }
  double t1 = gs_now();
  k->stats.factor_comm_s += t1 - t0;
  if (distributed(k) && k->cfg.dist != GS_KFAC_DIST_DP) trace(k, "factor exchange", t0, t1);
  for (size_t i = 0; i < L; i++) {
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
  return GS_OK;
}

static gs_status invert_factor(kfac *k, size_t f) {
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

static int factor_dim(const kfac *k, size_t f) {
  const kfac_layer *l = &k->layers[f / 2];
  return f % 2 ? l->dG : l->dA;
}
static float *factor_inv(kfac *k, size_t f) {
  kfac_layer *l = &k->layers[f / 2];
  return f % 2 ? l->Ginv : l->Ainv;
}

/* spd, first inverse update: every rank inverts everything, timing each;
 * rank 0 fits seconds per d^3 and places the factors by LPT, each factor
 * whose inversion is cheaper than broadcasting its triangle being inverted
 * by every rank. */
static gs_status spd_first_inversion(kfac *k) {
  size_t F = 2 * k->L;
  double sec = 0.0, cube = 0.0;
  for (size_t f = 0; f < F; f++) {
    double t0 = gs_now();
    GS_CHECK(invert_factor(k, f));
    sec += gs_now() - t0;
    cube += factor_cost(factor_dim(k, f));
  }
  int32_t *owner = gs_calloc(F + 1, sizeof *owner);
  double *cost = gs_calloc(F, sizeof *cost), *bc = gs_calloc(F, sizeof *bc);
  int *o = gs_calloc(F, sizeof *o);
  gs_status st = owner && cost && bc && o ? GS_OK : GS_ERR_NOMEM;
  if (st == GS_OK && k->rank == 0) {
    double c = cube > 0.0 ? sec / cube : 0.0;
    gs_cost_topo topo = {.ranks = k->size, .nodes = gs_comm_nodes(k->comm)};
    for (size_t f = 0; f < F; f++) {
      int d = factor_dim(k, f);
      cost[f] = c * factor_cost(d);
      bc[f] = gs_cost_bcast(gs_comm_cost(k->comm), topo, GS_ALGO_AUTO,
                            (double)kfac_triangle_size(d) * sizeof(float));
    }
    kfac_place_lpt(cost, bc, F, k->size, o, NULL);
    for (size_t f = 0; f < F; f++) owner[f] = o[f];
    owner[F] = 1;
  }
  if (st == GS_OK || k->rank != 0) {
    gs_status bst = gs_bcast(k->comm, owner, F + 1, GS_I32, 0, GS_ALGO_AUTO);
    if (bst != GS_OK) st = bst;
  }
  if (st == GS_OK) {
    int local = 0;
    for (size_t f = 0; f < F; f++) {
      k->fowner[f] = owner[f];
      local += owner[f] < 0;
    }
    k->stats.inverted_locally = local;
    k->placed = 1;
  }
  gs_free(owner);
  gs_free(cost);
  gs_free(bc);
  gs_free(o);
  return st;
}

/* spd: broadcasts in the order the owners finish (each owner inverts its
 * share largest first); a rank inverts its next own factor just before it
 * posts that factor's broadcast, so the broadcasts already posted proceed
 * on the progress thread meanwhile. The locally inverted factors come last,
 * under the broadcasts still running. */
static gs_status spd_inversion(kfac *k) {
  size_t F = 2 * k->L;
  size_t *order = gs_calloc(F, sizeof *order);
  double *finish = gs_calloc(F, sizeof *finish);
  double *load = gs_calloc((size_t)k->size, sizeof *load);
  if (!order || !finish || !load) {
    gs_free(order);
    gs_free(finish);
    gs_free(load);
    return GS_ERR_NOMEM;
  }
  /* each owner's factors largest first; finish time = its running load */
  size_t n = 0;
  for (size_t f = 0; f < F; f++)
    if (k->fowner[f] >= 0) order[n++] = f;
  for (size_t i = 1; i < n; i++) { /* by decreasing d, then index */
    size_t v = order[i], j = i;
    while (j > 0 && factor_dim(k, order[j - 1]) < factor_dim(k, v)) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = v;
  }
  for (size_t i = 0; i < n; i++) {
    int r = k->fowner[order[i]];
    load[r] += factor_cost(factor_dim(k, order[i]));
    finish[order[i]] = load[r];
  }
  for (size_t i = 1; i < n; i++) { /* by finish time (stable) */
    size_t v = order[i], j = i;
    while (j > 0 && finish[order[j - 1]] > finish[v]) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = v;
  }
  gs_status st = GS_OK;
  double inv_s = 0.0;
  for (size_t i = 0; i < n && st == GS_OK; i++) {
    size_t f = order[i];
    int d = factor_dim(k, f);
    float *tri = k->tri + k->tri_off[f];
    if (k->fowner[f] == k->rank) {
      double t0 = gs_now();
      st = invert_factor(k, f);
      inv_s += gs_now() - t0;
      if (st != GS_OK) break;
      kfac_triangle_pack(factor_inv(k, f), d, tri);
    }
    gs_request *r = NULL;
    st = gs_ibcast(k->comm, tri, kfac_triangle_size(d), GS_F32, k->fowner[f],
                   GS_ALGO_AUTO, &r);
    if (st == GS_OK) {
      push_req(k, r);
      k->stats.bcast_bytes += (double)kfac_triangle_size(d) * sizeof(float);
    }
  }
  for (size_t f = 0; f < F && st == GS_OK; f++)
    if (k->fowner[f] < 0) {
      double t0 = gs_now();
      st = invert_factor(k, f);
      inv_s += gs_now() - t0;
    }
  double t0 = gs_now();
  gs_status wst = wait_all(k);
  double t1 = gs_now();
  k->stats.bcast_s += t1 - t0;
  trace(k, "inverse broadcast", t0, t1);
  k->stats.inversion_s += inv_s;
  if (st == GS_OK) st = wst;
  if (st == GS_OK)
    for (size_t i = 0; i < n; i++) {
      size_t f = order[i];
      if (k->fowner[f] != k->rank)
        kfac_triangle_unpack(k->tri + k->tri_off[f], factor_dim(k, f),
                             factor_inv(k, f));
    }
  gs_free(order);
  gs_free(finish);
  gs_free(load);
  return st;
}

static gs_status update_inverses(kfac *k) {
  size_t F = 2 * k->L;
  if (!distributed(k) || k->cfg.dist == GS_KFAC_DIST_DP) {
    double t0 = gs_now();
    for (size_t f = 0; f < F; f++)
      if (k->layers[f / 2].mine) GS_CHECK(invert_factor(k, f));
    k->stats.inversion_s += gs_now() - t0;
  } else if (k->cfg.dist == GS_KFAC_DIST_DKFAC) {
    double t0 = gs_now();
    for (size_t f = 0; f < F; f++)
      if (k->fowner[f] == k->rank) GS_CHECK(invert_factor(k, f));
    double t1 = gs_now();
    k->stats.inversion_s += t1 - t0;
    gs_status st = GS_OK;
    for (size_t f = 0; f < F && st == GS_OK; f++) {
      int d = factor_dim(k, f);
      gs_request *r = NULL;
      st = gs_ibcast(k->comm, factor_inv(k, f), (size_t)d * d, GS_F32,
                     k->fowner[f], GS_ALGO_AUTO, &r);
      if (st == GS_OK) {
        push_req(k, r);
        k->stats.bcast_bytes += (double)d * d * sizeof(float);
      }
    }
    double t2 = gs_now();
    gs_status wst = wait_all(k);
    double t3 = gs_now();
    k->stats.bcast_s += t3 - t1;
    trace(k, "inverse broadcast", t2, t3);
    GS_CHECK(st);
    GS_CHECK(wst);
  } else if (!k->placed) {
    double t0 = gs_now();
    GS_CHECK(spd_first_inversion(k));
    k->stats.inversion_s += gs_now() - t0;
  } else {
    GS_CHECK(spd_inversion(k));
  }
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
  int dp = distributed(k) && k->cfg.dist == GS_KFAC_DIST_DP;
  gs_status st = GS_OK;
  for (size_t i = 0; i < L; i++) {
    kfac_layer *l = &k->layers[i];
    grad_gather(k->net, l, l->grad);
    if (l->mine)
      kfac_precondition(l->Ginv, l->dG, l->grad, l->dA, l->Ainv, l->v, l->tmp);
    if (dp && st == GS_OK) {
      gs_request *r = NULL;
      size_t n = (size_t)l->dG * l->dA;
      st = gs_ibcast(k->comm, l->v, n, GS_F32, l->dp_owner, GS_ALGO_AUTO, &r);
      if (st == GS_OK) {
        push_req(k, r);
        k->stats.bcast_bytes += (double)n * sizeof(float);
      }
    }
  }
  if (dp) {
    double tw = gs_now();
    gs_status wst = wait_all(k);
    double tw1 = gs_now();
    bwait = tw1 - tw;
    trace(k, "gradient broadcast", tw, tw1);
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
  trace(k, "precondition", t0, t1);
  return GS_OK;
}

static gs_status kfac_step(void *impl) {
  kfac *k = impl;
  if (k->hook_error != GS_OK) {
    gs_status st = k->hook_error;
    k->hook_error = GS_OK;
    wait_all(k);
    return st;
  }
  if (cov_step(k)) {
    for (size_t i = 0; i < k->L; i++) {
      const kfac_layer *l = &k->layers[i];
      if (l->mine && (!l->fresh_a || !l->fresh_g)) {
        wait_all(k);
        return gs_error(GS_ERR_STATE,
                        "K-FAC step %ld: layer '%s' has no %s from this "
                        "iteration (forward and backward in training mode "
                        "must come before the step)", k->step, l->info.name,
                        l->fresh_a ? "G" : "A");
      }
    }
    GS_CHECK(update_factors(k));
    if (k->cfg.dist == GS_KFAC_DIST_SPD && distributed(k) && !k->planned &&
        k->step >= k->profile_step)
      GS_CHECK(spd_plan(k));
  }
  if (inv_step(k) || !k->have_inverses) GS_CHECK(update_inverses(k));
  GS_CHECK(precondition_all(k));
  double t0 = gs_now();
  GS_CHECK(gs_nn_sgd_step(k->sgd));
  k->stats.precondition_s += gs_now() - t0;
  k->a_begin = 0;
  k->g_begin = k->a_stream_n;
  k->step++;
  k->stats.steps++;
  k->stats.exposed_comm_s = k->stats.factor_comm_s + k->stats.bcast_s;
  return GS_OK;
}

/* ---- Creation ------------------------------------------------------------- */

static void kfac_free(void *impl) {
  kfac *k = impl;
  if (!k) return;
  wait_all(k);
  if (k->net) gs_nn_set_layer_hooks(k->net, NULL, NULL, NULL);
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
  gs_free(k->fused);
  gs_free(k->a_end);
  gs_free(k->g_end);
  gs_free(k->reqs);
  gs_free(k->fowner);
  gs_free(k->tri);
  gs_free(k->tri_off);
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

static float *zalloc(size_t n) { return gs_calloc(n ? n : 1, sizeof(float)); }

static gs_status alloc_layer(kfac_layer *l, int factors) {
  size_t na = (size_t)l->dA * l->dA, ng = (size_t)l->dG * l->dG;
  size_t nw = (size_t)l->dG * l->dA;
  l->grad = zalloc(nw);
  l->v = zalloc(nw);
  l->tmp = zalloc(nw);
  if (!l->grad || !l->v || !l->tmp) return GS_ERR_NOMEM;
  if (!factors) return GS_OK;
  l->A = zalloc(na);
  l->Anew = zalloc(na);
  l->Ainv = zalloc(na);
  l->G = zalloc(ng);
  l->Gnew = zalloc(ng);
  l->Ginv = zalloc(ng);
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
  k->profile_step = 2L * cfg->cov_every; /* the third factor pass: warm */
  gs_status st = gs_nn_sgd_create(&k->sgd, net, &cfg->sgd);
  if (st != GS_OK) {
    kfac_free(k);
    return st;
  }
  k->layers = gs_calloc(L, sizeof *k->layers);
  k->a_end = gs_calloc(L, sizeof *k->a_end);
  k->g_end = gs_calloc(L, sizeof *k->g_end);
  k->reqs = gs_calloc(4 * L + 4, sizeof *k->reqs);
  k->fowner = gs_calloc(2 * L, sizeof *k->fowner);
  k->tri_off = gs_calloc(2 * L, sizeof *k->tri_off);
  double *lcost = gs_calloc(L, sizeof *lcost);
  int *lowner = gs_calloc(L, sizeof *lowner);
  if (!k->layers || !k->a_end || !k->g_end || !k->reqs || !k->fowner ||
      !k->tri_off || !lcost || !lowner)
    st = GS_ERR_NOMEM;
  size_t max_d = 1, max_col = 1, a_stream = 0, g_stream = 0, full = 0, tri = 0;
  for (size_t i = 0; st == GS_OK && i < L; i++) {
    kfac_layer *l = &k->layers[i];
    st = gs_nn_hook_layer_info(net, i, &l->info);
    if (st != GS_OK) break;
    l->bias = l->info.bias_index != SIZE_MAX;
    l->dA = l->info.d_in + l->bias;
    l->dG = l->info.d_out;
    lcost[i] = factor_cost(l->dA) + factor_cost(l->dG);
    max_d = GS_MAX(max_d, (size_t)GS_MAX(l->dA, l->dG));
    if (l->info.kind == GS_NN_HOOK_CONV)
      max_col = GS_MAX(max_col, (size_t)l->info.d_in * l->info.spatial);
    full += (size_t)l->dA * l->dA + (size_t)l->dG * l->dG;
    k->tri_off[2 * i] = tri;
    tri += kfac_triangle_size(l->dA);
    k->tri_off[2 * i + 1] = tri;
    tri += kfac_triangle_size(l->dG);
    /* spd streams: A in forward order, then G in backward order */
    l->a_off = a_stream;
    a_stream += kfac_triangle_size(l->dA);
  }
  for (size_t i = L; st == GS_OK && i-- > 0;) {
    k->layers[i].g_off = a_stream + g_stream;
    g_stream += kfac_triangle_size(k->layers[i].dG);
    /* until planned, every factor is a message of its own */
    k->a_end[i] = k->g_end[i] = 1;
  }
  k->a_stream_n = a_stream;
  k->g_begin = a_stream;
  int dist = comm && k->size > 1;
  if (st == GS_OK) {
    if (dist && cfg->dist == GS_KFAC_DIST_DP)
      kfac_place_lpt(lcost, NULL, L, k->size, lowner, NULL);
    for (size_t i = 0; i < L; i++) {
      kfac_layer *l = &k->layers[i];
      l->dp_owner = dist && cfg->dist == GS_KFAC_DIST_DP ? lowner[i] : k->rank;
      l->mine = l->dp_owner == k->rank;
      st = alloc_layer(l, l->mine || cfg->dist != GS_KFAC_DIST_DP);
      if (st != GS_OK) break;
    }
  }
  if (st == GS_OK && dist && cfg->dist == GS_KFAC_DIST_DKFAC)
    kfac_place_round_robin(2 * L, k->size, k->fowner);
  if (st == GS_OK) {
    k->work = zalloc(kfac_inverse_work((int)max_d, cfg->inverse));
    k->col = zalloc(max_col);
    if (dist && cfg->dist == GS_KFAC_DIST_DKFAC) k->fused_n = full;
    if (dist && cfg->dist == GS_KFAC_DIST_SPD) k->fused_n = a_stream + g_stream;
    k->fused = k->fused_n ? zalloc(k->fused_n) : NULL;
    k->tri = dist && cfg->dist == GS_KFAC_DIST_SPD ? zalloc(tri) : NULL;
    if (!k->work || !k->col || (k->fused_n && !k->fused) ||
        (dist && cfg->dist == GS_KFAC_DIST_SPD && !k->tri))
      st = GS_ERR_NOMEM;
  }
  gs_free(lcost);
  gs_free(lowner);
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
             h.dist < GS_KFAC_DIST_COUNT ? dist_names[h.dist] : "an unknown scheme",
             h.layers, k->rank, k->size, dist_names[k->cfg.dist], k->L);
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
