/*
 * The K-FAC optimizer's state and the ops table of its distribution
 * schemes. kfac.c owns what every scheme shares: the per-layer state, the
 * layer hooks that build the factors, the running averages, the
 * preconditioning with the KL clip, the SGD step and the state files. A
 * scheme decides how the ranks share the work in between, through the ops
 * below, one file each:
 *
 *   scheme_dkfac.c  D-KFAC: all factors all-reduced in one message, the
 *                   inversions placed round-robin and their results
 *                   broadcast
 *   scheme_spd.c    SPD-KFAC: factor triangles all-reduced in merge groups
 *                   while forward and backward run, inversions placed by
 *                   LPT and broadcast as each one finishes
 *   scheme_dp.c     DP-KFAC: each layer owned by one rank (LPT), which
 *                   builds and inverts its factors and broadcasts the
 *                   preconditioned gradient
 *
 * and, in kfac.c, the one-process table that every scheme uses without a
 * communicator or on one rank. Every rank issues the same collectives in the
 * same order on `comm`: the groups and placements that decide them are
 * computed on rank 0 and broadcast, or derived from data every rank has.
 */
#ifndef GS_KFAC_SCHEME_H
#define GS_KFAC_SCHEME_H

#include "kfac_internal.h"

typedef struct {
  gs_nn_layer_info info;
  int dA, dG, bias;
  int mine;               /* this rank holds the layer's factors */
  float *A, *G;           /* running averages (NULL where not mine) */
  float *Anew, *Gnew;     /* this step's */
  float *Ainv, *Ginv;     /* damped inverses */
  float *grad, *v, *tmp;  /* [dG][dA] */
  int have_factors;       /* running averages initialised */
  int fresh_a, fresh_g;   /* Anew / Gnew built this iteration */
  double a_ready, g_ready;/* when the factor was ready (profiling) */
} kfac_layer;

typedef struct kfac_scheme_ops kfac_scheme_ops;

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
  gs_request **reqs;      /* outstanding requests, up to 4 L + 4 */
  size_t nreqs;
  gs_kfac_stats stats;
  /* A hook cannot return an error: the first one is kept for step. */
  gs_status hook_error;
  const kfac_scheme_ops *ops;
  void *scheme;           /* the scheme's own state, owned by its ops */
} kfac;

/* Factor f of the 2 L: A of layer l is 2 l, G is 2 l + 1. */

/*
 * What a scheme does in the step's skeleton (kfac.c). NULL members do
 * nothing. Each member runs on every rank with the same arguments, so the
 * collectives it issues match across ranks.
 */
struct kfac_scheme_ops {
  const char *name; /* as gs_kfac_dist_parse accepts it */
  /* At creation, once each layer's dimensions are known and before its
   * buffers are allocated: places the layers (a layer left `mine` = 0 gets
   * no factor buffers) and allocates k->scheme. NULL: every rank holds every
   * layer. On failure, destroy still runs. */
  gs_status (*create)(kfac *k);
  /* Frees k->scheme, after every request has been waited for. */
  void (*destroy)(kfac *k);
  /* In a layer hook: factor f of a held layer has just been built into
   * Anew or Gnew; may start exchanging it. */
  gs_status (*factor_built)(kfac *k, size_t f);
  /* Step 1 on factor steps: makes each held layer's Anew and Gnew the
   * average over the ranks (timed and traced as "factor exchange"). NULL:
   * each rank's own. */
  gs_status (*exchange_factors)(kfac *k);
  /* Step 1, after the running averages. */
  gs_status (*factors_updated)(kfac *k);
  /* Step 2: leaves Ainv and Ginv of every layer this rank preconditions
   * (every held layer) up to date, counting stats.inversion_s and, for
   * the broadcasts of results, stats.bcast_s and stats.bcast_bytes. */
  gs_status (*update_inverses)(kfac *k);
  /* Step 3: the holder of a layer has computed its v; posts v's sharing,
   * with kfac_push_req. The step waits for all of them after the last
   * layer (traced as "gradient broadcast"). NULL: every rank holds every
   * layer. */
  gs_status (*share_v)(kfac *k, size_t layer);
};

extern const kfac_scheme_ops kfac_scheme_dkfac;
extern const kfac_scheme_ops kfac_scheme_spd;
extern const kfac_scheme_ops kfac_scheme_dp;

/* ---- What kfac.c lends the schemes ---------------------------------------- */

/* Reports a phase to cfg.trace, if set. */
void kfac_trace(const kfac *k, const char *name, double t0, double t1);
/* Keeps a posted request for kfac_wait_all. */
void kfac_push_req(kfac *k, gs_request *r);
/* Waits for every outstanding request, returning the first error. */
gs_status kfac_wait_all(kfac *k);
/* Damps and inverts factor f of a held layer into its Ainv or Ginv. */
gs_status kfac_invert_factor(kfac *k, size_t f);
/* Inverts every factor of the held layers (counted as inversion time). */
gs_status kfac_invert_held(kfac *k);
int kfac_factor_dim(const kfac *k, size_t f);
float *kfac_factor_inv(kfac *k, size_t f);

/* The inversion's cost model: d^3. */
static inline double kfac_factor_cost(int d) { return (double)d * d * d; }
/* n zeroed floats (at least one), through gs_calloc. */
static inline float *kfac_zalloc(size_t n) {
  return gs_calloc(n ? n : 1, sizeof(float));
}

#endif /* GS_KFAC_SCHEME_H */
