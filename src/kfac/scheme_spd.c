/*
 * SPD-KFAC: pipelined, fused factor communication and load-balanced
 * inversions. Every rank builds every layer's factors from its own batch.
 *
 *   forward   each A's upper triangle joins its merge group in the A
 *             stream (layers in forward order); a full group is
 *             all-reduced at once (non-blocking) while forward goes on
 *   backward  likewise each G in the G stream (layers in backward order)
 *   step      1. waits for the group messages; on the third factor pass,
 *                rank 0 groups each stream with the planner from the times
 *                the factors were ready, and every rank receives the groups
 *             2. first inverse update: every rank inverts everything,
 *                timing it, and rank 0 places the factors by LPT; later
 *                ones: each rank inverts its LPT share, broadcasting each
 *                result as soon as it is ready while it inverts the next,
 *                and inverts the small factors (cheaper than their
 *                broadcast) locally
 */
#include <stdint.h>
#include <string.h>

#include "gradsync/plan.h"
#include "kfac_scheme.h"

typedef struct {
  float *fused;           /* the A stream of triangles, then the G stream */
  size_t a_stream_n;      /* floats of the A stream */
  size_t *a_off, *g_off;  /* by layer: triangle offsets in `fused` */
  int *a_end, *g_end;     /* by layer: 1 if the layer closes a message */
  size_t a_begin, g_begin;/* offset where the open message starts */
  int planned;
  long profile_step;      /* the cov step whose times the plan uses */
  int *fowner;            /* 2 L: owner, -1 inverted by every rank */
  int placed;
  float *tri;             /* inverse triangles, for broadcasts */
  size_t *tri_off;        /* 2 L */
} spd;

static gs_status spd_create(kfac *k) {
  size_t L = k->L;
  spd *s = gs_calloc(1, sizeof *s);
  if (!s) return GS_ERR_NOMEM;
  k->scheme = s;
  s->profile_step = 2L * k->cfg.cov_every; /* the third factor pass: warm */
  s->a_off = gs_calloc(L, sizeof *s->a_off);
  s->g_off = gs_calloc(L, sizeof *s->g_off);
  s->a_end = gs_calloc(L, sizeof *s->a_end);
  s->g_end = gs_calloc(L, sizeof *s->g_end);
  s->fowner = gs_calloc(2 * L, sizeof *s->fowner);
  s->tri_off = gs_calloc(2 * L, sizeof *s->tri_off);
  if (!s->a_off || !s->g_off || !s->a_end || !s->g_end || !s->fowner ||
      !s->tri_off)
    return GS_ERR_NOMEM;
  size_t a_stream = 0, g_stream = 0, tri = 0;
  for (size_t i = 0; i < L; i++) {
    const kfac_layer *l = &k->layers[i];
    s->tri_off[2 * i] = tri;
    tri += kfac_triangle_size(l->dA);
    s->tri_off[2 * i + 1] = tri;
    tri += kfac_triangle_size(l->dG);
    /* streams: A in forward order, then G in backward order */
    s->a_off[i] = a_stream;
    a_stream += kfac_triangle_size(l->dA);
  }
  for (size_t i = L; i-- > 0;) {
    s->g_off[i] = a_stream + g_stream;
    g_stream += kfac_triangle_size(k->layers[i].dG);
    /* until planned, every factor is a message of its own */
    s->a_end[i] = s->g_end[i] = 1;
  }
  s->a_stream_n = a_stream;
  s->a_begin = 0;
  s->g_begin = a_stream;
  s->fused = kfac_zalloc(a_stream + g_stream);
  s->tri = kfac_zalloc(tri);
  if (!s->fused || !s->tri) return GS_ERR_NOMEM;
  return GS_OK;
}

static void spd_destroy(kfac *k) {
  spd *s = k->scheme;
  if (!s) return;
  gs_free(s->fused);
  gs_free(s->a_off);
  gs_free(s->g_off);
  gs_free(s->a_end);
  gs_free(s->g_end);
  gs_free(s->fowner);
  gs_free(s->tri);
  gs_free(s->tri_off);
  gs_free(s);
  k->scheme = NULL;
}

/* ---- Factor messages ------------------------------------------------------- */

/* All-reduces the open message of a stream, [*begin, end), and opens the
 * next one at end. */
static gs_status spd_send(kfac *k, size_t *begin, size_t end) {
  spd *s = k->scheme;
  gs_request *r = NULL;
  float *p = s->fused + *begin;
  GS_CHECK(gs_iallreduce(k->comm, GS_IN_PLACE, p, end - *begin, GS_F32,
                         GS_SUM, GS_ALGO_AUTO, &r));
  k->stats.factor_bytes += (double)(end - *begin) * sizeof(float);
  *begin = end;
  kfac_push_req(k, r);
  return GS_OK;
}

static gs_status spd_factor_built(kfac *k, size_t f) {
  spd *s = k->scheme;
  size_t layer = f / 2;
  const kfac_layer *l = &k->layers[layer];
  if (f % 2 == 0) {
    kfac_triangle_pack(l->Anew, l->dA, s->fused + s->a_off[layer]);
    if (s->a_end[layer])
      return spd_send(k, &s->a_begin, s->a_off[layer] + kfac_triangle_size(l->dA));
  } else {
    kfac_triangle_pack(l->Gnew, l->dG, s->fused + s->g_off[layer]);
    if (s->g_end[layer])
      return spd_send(k, &s->g_begin, s->g_off[layer] + kfac_triangle_size(l->dG));
  }
  return GS_OK;
}

/* Waits for this pass's messages and unpacks the averages; the streams'
 * next messages start at their beginnings again. */
static gs_status spd_exchange_factors(kfac *k) {
  spd *s = k->scheme;
  float inv_p = 1.0f / (float)k->size;
  GS_CHECK(kfac_wait_all(k));
  s->a_begin = 0;
  s->g_begin = s->a_stream_n;
  for (size_t i = 0; i < k->L; i++) {
    kfac_layer *l = &k->layers[i];
    kfac_triangle_unpack(s->fused + s->a_off[i], l->dA, l->Anew);
    kfac_triangle_unpack(s->fused + s->g_off[i], l->dG, l->Gnew);
    size_t na = (size_t)l->dA * l->dA, ng = (size_t)l->dG * l->dG;
    for (size_t j = 0; j < na; j++) l->Anew[j] *= inv_p;
    for (size_t j = 0; j < ng; j++) l->Gnew[j] *= inv_p;
  }
  return GS_OK;
}

/* ---- Merge groups from the planner ----------------------------------------- */

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
  spd *s = k->scheme;
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
      s->a_end[i] = ends[i];
      s->g_end[i] = ends[L + i];
      na += (size_t)ends[i];
      ng += (size_t)ends[L + i];
    }
    k->stats.merge_groups_a = na;
    k->stats.merge_groups_g = ng;
    s->planned = 1;
  }
  gs_free(ends);
  return st;
}

static gs_status spd_factors_updated(kfac *k) {
  spd *s = k->scheme;
  if (!s->planned && k->step >= s->profile_step) return spd_plan(k);
  return GS_OK;
}

/* ---- Inversions ------------------------------------------------------------ */

/* The first inverse update: every rank inverts everything, timing each;
 * rank 0 fits seconds per d^3 and places the factors by LPT, each factor
 * whose inversion is cheaper than broadcasting its triangle being inverted
 * by every rank. */
static gs_status spd_first_inversion(kfac *k) {
  spd *s = k->scheme;
  size_t F = 2 * k->L;
  double sec = 0.0, cube = 0.0;
  for (size_t f = 0; f < F; f++) {
    double t0 = gs_now();
    GS_CHECK(kfac_invert_factor(k, f));
    sec += gs_now() - t0;
    cube += kfac_factor_cost(kfac_factor_dim(k, f));
  }
  int32_t *owner = gs_calloc(F + 1, sizeof *owner);
  double *cost = gs_calloc(F, sizeof *cost), *bc = gs_calloc(F, sizeof *bc);
  int *o = gs_calloc(F, sizeof *o);
  gs_status st = owner && cost && bc && o ? GS_OK : GS_ERR_NOMEM;
  if (st == GS_OK && k->rank == 0) {
    double c = cube > 0.0 ? sec / cube : 0.0;
    gs_cost_topo topo = {.ranks = k->size, .nodes = gs_comm_nodes(k->comm)};
    for (size_t f = 0; f < F; f++) {
      int d = kfac_factor_dim(k, f);
      cost[f] = c * kfac_factor_cost(d);
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
      s->fowner[f] = owner[f];
      local += owner[f] < 0;
    }
    k->stats.inverted_locally = local;
    s->placed = 1;
  }
  gs_free(owner);
  gs_free(cost);
  gs_free(bc);
  gs_free(o);
  return st;
}

/* The later inverse updates: broadcasts in the order the owners finish
 * (each owner inverts its share largest first); a rank inverts its next own
 * factor just before it posts that factor's broadcast, so the broadcasts
 * already posted proceed on the progress thread meanwhile. The locally
 * inverted factors come last, under the broadcasts still running. */
static gs_status spd_inversion(kfac *k) {
  spd *s = k->scheme;
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
    if (s->fowner[f] >= 0) order[n++] = f;
  for (size_t i = 1; i < n; i++) { /* by decreasing d, then index */
    size_t v = order[i], j = i;
    while (j > 0 && kfac_factor_dim(k, order[j - 1]) < kfac_factor_dim(k, v)) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = v;
  }
  for (size_t i = 0; i < n; i++) {
    int r = s->fowner[order[i]];
    load[r] += kfac_factor_cost(kfac_factor_dim(k, order[i]));
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
    int d = kfac_factor_dim(k, f);
    float *tri = s->tri + s->tri_off[f];
    if (s->fowner[f] == k->rank) {
      double t0 = gs_now();
      st = kfac_invert_factor(k, f);
      inv_s += gs_now() - t0;
      if (st != GS_OK) break;
      kfac_triangle_pack(kfac_factor_inv(k, f), d, tri);
    }
    gs_request *r = NULL;
    st = gs_ibcast(k->comm, tri, kfac_triangle_size(d), GS_F32, s->fowner[f],
                   GS_ALGO_AUTO, &r);
    if (st == GS_OK) {
      kfac_push_req(k, r);
      k->stats.bcast_bytes += (double)kfac_triangle_size(d) * sizeof(float);
    }
  }
  for (size_t f = 0; f < F && st == GS_OK; f++)
    if (s->fowner[f] < 0) {
      double t0 = gs_now();
      st = kfac_invert_factor(k, f);
      inv_s += gs_now() - t0;
    }
  double t0 = gs_now();
  gs_status wst = kfac_wait_all(k);
  double t1 = gs_now();
  k->stats.bcast_s += t1 - t0;
  kfac_trace(k, "inverse broadcast", t0, t1);
  k->stats.inversion_s += inv_s;
  if (st == GS_OK) st = wst;
  if (st == GS_OK)
    for (size_t i = 0; i < n; i++) {
      size_t f = order[i];
      if (s->fowner[f] != k->rank)
        kfac_triangle_unpack(s->tri + s->tri_off[f], kfac_factor_dim(k, f),
                             kfac_factor_inv(k, f));
    }
  gs_free(order);
  gs_free(finish);
  gs_free(load);
  return st;
}

static gs_status spd_update_inverses(kfac *k) {
  spd *s = k->scheme;
  if (s->placed) return spd_inversion(k);
  double t0 = gs_now();
  GS_CHECK(spd_first_inversion(k));
  k->stats.inversion_s += gs_now() - t0;
  return GS_OK;
}

const kfac_scheme_ops kfac_scheme_spd = {
    .name = "spd",
    .create = spd_create,
    .destroy = spd_destroy,
    .factor_built = spd_factor_built,
    .exchange_factors = spd_exchange_factors,
    .factors_updated = spd_factors_updated,
    .update_inverses = spd_update_inverses,
};
