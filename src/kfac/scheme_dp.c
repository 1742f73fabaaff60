/*
 * DP-KFAC: each layer is owned by one rank, placed by LPT on the cost of
 * inverting its two factors. Only the owner builds the layer's factors
 * (from its own batch: no factor exchange), keeps their running averages,
 * inverts them and preconditions the layer's gradient, which it then
 * broadcasts to every rank.
 */
#include "kfac_scheme.h"

typedef struct {
  int *owner;             /* by layer: the rank that owns it */
} dp;

static gs_status dp_create(kfac *k) {
  size_t L = k->L;
  dp *s = gs_calloc(1, sizeof *s);
  if (!s) return GS_ERR_NOMEM;
  k->scheme = s;
  s->owner = gs_calloc(L, sizeof *s->owner);
  double *lcost = gs_calloc(L, sizeof *lcost);
  gs_status st = s->owner && lcost ? GS_OK : GS_ERR_NOMEM;
  if (st == GS_OK) {
    for (size_t i = 0; i < L; i++) {
      const kfac_layer *l = &k->layers[i];
      lcost[i] = kfac_factor_cost(l->dA) + kfac_factor_cost(l->dG);
    }
    kfac_place_lpt(lcost, NULL, L, k->size, s->owner, NULL);
    for (size_t i = 0; i < L; i++) k->layers[i].mine = s->owner[i] == k->rank;
  }
  gs_free(lcost);
  return st;
}

static void dp_destroy(kfac *k) {
  dp *s = k->scheme;
  if (!s) return;
  gs_free(s->owner);
  gs_free(s);
  k->scheme = NULL;
}

static gs_status dp_share_v(kfac *k, size_t layer) {
  dp *s = k->scheme;
  kfac_layer *l = &k->layers[layer];
  gs_request *r = NULL;
  size_t n = (size_t)l->dG * l->dA;
  GS_CHECK(gs_ibcast(k->comm, l->v, n, GS_F32, s->owner[layer], GS_ALGO_AUTO, &r));
  kfac_push_req(k, r);
  k->stats.bcast_bytes += (double)n * sizeof(float);
  return GS_OK;
}

const kfac_scheme_ops kfac_scheme_dp = {
    .name = "dp",
    .create = dp_create,
    .destroy = dp_destroy,
    .update_inverses = kfac_invert_held,
    .share_v = dp_share_v,
};
