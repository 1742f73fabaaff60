/*
 * D-KFAC: every rank builds every layer's factors from its own batch; on a
 * factor step all of them are all-reduced in one message. The inversions
 * are placed round-robin over the ranks and each result is broadcast from
 * its owner to all, so that every rank preconditions every layer.
 */
#include <string.h>

#include "kfac_scheme.h"

typedef struct {
  float *fused;           /* all factors, A then G of each layer */
  size_t fused_n;
  int *fowner;            /* 2 L: the rank that inverts factor f */
} dkfac;

static gs_status dkfac_create(kfac *k) {
  dkfac *s = gs_calloc(1, sizeof *s);
  if (!s) return GS_ERR_NOMEM;
  k->scheme = s;
  for (size_t i = 0; i < k->L; i++) {
    const kfac_layer *l = &k->layers[i];
    s->fused_n += (size_t)l->dA * l->dA + (size_t)l->dG * l->dG;
  }
  s->fowner = gs_calloc(2 * k->L, sizeof *s->fowner);
  s->fused = kfac_zalloc(s->fused_n);
  if (!s->fowner || !s->fused) return GS_ERR_NOMEM;
  kfac_place_round_robin(2 * k->L, k->size, s->fowner);
  return GS_OK;
}

static void dkfac_destroy(kfac *k) {
  dkfac *s = k->scheme;
  if (!s) return;
  gs_free(s->fused);
  gs_free(s->fowner);
  gs_free(s);
  k->scheme = NULL;
}

static gs_status dkfac_exchange_factors(kfac *k) {
  dkfac *s = k->scheme;
  float inv_p = 1.0f / (float)k->size;
  size_t off = 0;
  for (size_t i = 0; i < k->L; i++) {
    kfac_layer *l = &k->layers[i];
    size_t na = (size_t)l->dA * l->dA, ng = (size_t)l->dG * l->dG;
    memcpy(s->fused + off, l->Anew, na * sizeof(float));
    memcpy(s->fused + off + na, l->Gnew, ng * sizeof(float));
    off += na + ng;
  }
  GS_CHECK(gs_allreduce(k->comm, GS_IN_PLACE, s->fused, off, GS_F32, GS_SUM,
                        GS_ALGO_AUTO));
  k->stats.factor_bytes += (double)off * sizeof(float);
  off = 0;
  for (size_t i = 0; i < k->L; i++) {
    kfac_layer *l = &k->layers[i];
    size_t na = (size_t)l->dA * l->dA, ng = (size_t)l->dG * l->dG;
    for (size_t j = 0; j < na; j++) l->Anew[j] = s->fused[off + j] * inv_p;
    for (size_t j = 0; j < ng; j++) l->Gnew[j] = s->fused[off + na + j] * inv_p;
    off += na + ng;
  }
  return GS_OK;
}

/* Each rank inverts its share, then every factor's inverse is broadcast
 * from its owner, all broadcasts posted before any is waited for. */
static gs_status dkfac_update_inverses(kfac *k) {
  dkfac *s = k->scheme;
  size_t F = 2 * k->L;
  double t0 = gs_now();
  for (size_t f = 0; f < F; f++)
    if (s->fowner[f] == k->rank) GS_CHECK(kfac_invert_factor(k, f));
  double t1 = gs_now();
  k->stats.inversion_s += t1 - t0;
  gs_status st = GS_OK;
  for (size_t f = 0; f < F && st == GS_OK; f++) {
    int d = kfac_factor_dim(k, f);
    gs_request *r = NULL;
    st = gs_ibcast(k->comm, kfac_factor_inv(k, f), (size_t)d * d, GS_F32,
                   s->fowner[f], GS_ALGO_AUTO, &r);
    if (st == GS_OK) {
      kfac_push_req(k, r);
      k->stats.bcast_bytes += (double)d * d * sizeof(float);
    }
  }
  double t2 = gs_now();
  gs_status wst = kfac_wait_all(k);
  double t3 = gs_now();
  k->stats.bcast_s += t3 - t1;
  kfac_trace(k, "inverse broadcast", t2, t3);
  GS_CHECK(st);
  GS_CHECK(wst);
  return GS_OK;
}

const kfac_scheme_ops kfac_scheme_dkfac = {
    .name = "dkfac",
    .create = dkfac_create,
    .destroy = dkfac_destroy,
    .exchange_factors = dkfac_exchange_factors,
    .update_inverses = dkfac_update_inverses,
};
