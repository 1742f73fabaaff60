/*
 * gradsync kfac: distributed K-FAC (Martens & Grosse 2015), the second-order
 * optimizer that preconditions each linear and conv layer's gradient with
 * the inverses of two Kronecker factors, in three distributed schemes:
 *
 *   dkfac  factors all-reduced after backward in one fused message, the
 *          inversions assigned round-robin and their results broadcast
 *          (MPD-KFAC, the kfac-pytorch baseline);
 *   spd    SPD-KFAC (Shi, Zhang & Li, ICDCS 2021): each layer's A is
 *          all-reduced as soon as forward computes it and G as soon as
 *          backward does, in messages merged by gradsync's optimal planner
 *          over the factor stream, upper triangles only; inversions placed
 *          by longest-processing-time, small factors inverted by every rank
 *          when that is cheaper than a broadcast, broadcasts overlapping the
 *          remaining inversions;
 *   dp     DP-KFAC (Zhang, Shi, Wang & Li, arXiv 2206.15143): each layer's
 *          owner builds its factors from its own batch, inverts, and
 *          broadcasts the preconditioned gradient.
 *
 * docs/KFAC.md gives the math and the schemes in full.
 *
 * Use: the net's gradients must be averaged over ranks (by the engine)
 * before gs_nn_optim_step; K-FAC's own collectives run on `comm`, which must
 * be a communicator of its own (not the engine's), since its collectives
 * are issued from the training thread while the engine issues its own.
 * Every rank must call forward, backward and step in the same sequence.
 *
 * Threads: the optimizer, its hooks and its step run on the training
 * thread; comm's progress thread makes the MPI calls.
 */
#ifndef GRADSYNC_KFAC_H
#define GRADSYNC_KFAC_H

#include <stddef.h>

#include "gradsync/comm.h"
#include "gradsync/core.h"
#include "gradsync/nn.h"
#include "gradsync/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GS_KFAC_DIST_DKFAC = 0,
  GS_KFAC_DIST_SPD,
  GS_KFAC_DIST_DP,
  GS_KFAC_DIST_COUNT
} gs_kfac_dist;

typedef enum {
  GS_KFAC_INV_CHOL = 0, /* LAPACK spotrf + spotri */
  GS_KFAC_INV_EIG,      /* LAPACK ssyevd: Q diag(1 / (lambda + delta)) Q^T */
  GS_KFAC_INV_COUNT
} gs_kfac_inverse;

typedef struct {
  gs_nn_sgd_config sgd;  /* the step after preconditioning (lr, momentum,
                            weight decay, Nesterov); batch-norm parameters
                            get this step on their plain gradient */
  float damping;         /* Tikhonov gamma, > 0 (default 0.003) */
  float factor_decay;    /* running average xi in [0, 1) (default 0.95) */
  float kl_clip;         /* kappa; 0 turns the clip off (default 0.001) */
  int cov_every;         /* factors every N steps, >= 1 (default 1) */
  int inv_every;         /* inverses every N steps, >= 1 (default 10) */
  gs_kfac_inverse inverse;
  gs_kfac_dist dist;
  /* Optional: called (in the training thread) with each timed phase:
   * "A <layer>" and "G <layer>" (building a factor), "factor exchange"
   * (waiting for the factors' all-reduce), "inversions", "inverse
   * broadcast" / "gradient broadcast" (waiting), "precondition". Times are
   * seconds of CLOCK_MONOTONIC. The trainer sends them to the engine's
   * timeline (gs_engine_trace). NULL (default): none. */
  void (*trace)(void *ctx, const char *name, double start_s, double end_s);
  void *trace_ctx;
} gs_kfac_config;

/* The defaults above, with the given SGD step. */
void gs_kfac_config_default(gs_kfac_config *cfg, const gs_nn_sgd_config *sgd);
/* "dkfac" | "spd" | "dp" and "chol" | "eig"; GS_ERR_PARSE otherwise. */
gs_status gs_kfac_dist_parse(const char *s, gs_kfac_dist *out);
const char *gs_kfac_dist_name(gs_kfac_dist d);
gs_status gs_kfac_inverse_parse(const char *s, gs_kfac_inverse *out);
const char *gs_kfac_inverse_name(gs_kfac_inverse m);

/* K-FAC over net's linear and conv layers behind the optimizer interface.
 * It installs the net's layer hooks (gradsync/optim.h), which it owns until
 * destroyed. comm may be NULL for a single process. A bad configuration is
 * GS_ERR_INVALID_ARG with the field named; nothing collective happens here.
 * The optimizer has no per-tensor step (the KL clip needs every layer). */
gs_status gs_kfac_create(gs_nn_optim **out, gs_nn_net *net, gs_comm *comm,
                         const gs_kfac_config *cfg);

/* Time and traffic, summed over the steps since creation (or the last
 * reset). Times are the training thread's, in seconds. */
typedef struct {
  long steps;             /* optimizer steps */
  long factor_updates;    /* steps that updated the factors */
  long inverse_updates;   /* steps that updated the inverses */
  double factor_compute_s;/* building A and G (in the hooks) */
  double factor_comm_s;   /* waiting for factor all-reduces (dkfac: all of
                             it; spd: the part not hidden behind compute) */
  double inversion_s;     /* damped inverses */
  double bcast_s;         /* waiting for inverse (dkfac, spd) or
                             preconditioned-gradient (dp) broadcasts */
  double precondition_s;  /* v = G^-1 grad A^-1, KL clip, SGD */
  double exposed_comm_s;  /* factor_comm_s + bcast_s */
  double factor_bytes;    /* payload bytes of factor all-reduces */
  double bcast_bytes;     /* payload bytes of broadcasts */
  size_t merge_groups_a, merge_groups_g; /* spd: messages per factor pass */
  int inverted_locally;   /* spd: factors every rank inverts */
} gs_kfac_stats;

/* This rank's K-FAC state, for checkpoints: the step count, and the
 * factors' running averages and damped inverses the rank holds (all of
 * them under dkfac and spd; its own layers' under dp), written atomically
 * to path (gs_nn_file). Local: each rank writes its own file. */
gs_status gs_kfac_state_save(gs_nn_optim *opt, const char *path);
/* Restores what save wrote on the same rank of a job of the same size,
 * scheme and layers; expect_step >= 0 also requires the file's step to be
 * that one (the checkpoint's). A file that does not fit is GS_ERR_PARSE
 * naming what differs, and leaves the optimizer unchanged. */
gs_status gs_kfac_state_load(gs_nn_optim *opt, const char *path, long expect_step);

gs_status gs_kfac_stats_get(gs_nn_optim *opt, gs_kfac_stats *out);
void gs_kfac_stats_reset(gs_nn_optim *opt);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_KFAC_H */
