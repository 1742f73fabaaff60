/* K-FAC behind the trainer's extension points: `gradsync train --optimizer
 * kfac` (docs/KFAC.md). Two tables: the optimizer (optim.h), and a step hook
 * (hooks.h) that sets K-FAC up once every rank has agreed on the run, since
 * K-FAC's communicator is created collectively and an optimizer's create
 * runs before that agreement. A run with --optimizer kfac lists the hook
 * (train_kfac_config does both). */
#ifndef GRADSYNC_TRAIN_OPTIM_KFAC_H
#define GRADSYNC_TRAIN_OPTIM_KFAC_H

#include "gradsync/kfac.h"
#include "hooks.h"
#include "optim.h"

/* The K-FAC options of a run (train_config.kfac; NULL: the defaults of
 * gs_kfac_config_default). The SGD part comes from the run's lr, momentum,
 * weight decay and Nesterov options. */
typedef struct train_kfac_options {
  gs_kfac_dist dist;       /* --kfac-dist: dkfac */
  gs_kfac_inverse inverse; /* --kfac-inverse: chol */
  int cov_every;           /* --kfac-cov-every: 1 */
  int inv_every;           /* --kfac-inv-every: 10 */
  float damping;           /* --kfac-damping: 0.003 */
  float decay;             /* --kfac-decay: 0.95 */
  float kl_clip;           /* --kfac-kl-clip: 0.001 */
} train_kfac_options;

void train_kfac_options_init(train_kfac_options *o);

/* The momentum of a K-FAC run whose user gave none (the trainer's default,
 * 0.9, is SGD's). The preconditioned step is already scaled by curvature;
 * with 0.9 on top, the cnn's training loss climbed to 7-19 over the first
 * 30 steps (warm-up included), and its test accuracy after them was 66%
 * against 85% with 0.5 (docs/KFAC.md, "Momentum"). */
#define TRAIN_KFAC_MOMENTUM 0.5f

extern const train_optim_ops train_optim_kfac;
extern const train_hook_ops train_hook_kfac;

struct train_config;
/* Makes cfg a K-FAC run with options o (borrowed: it must outlive the
 * run): the optimizer, its hook and the options. GS_ERR_INVALID_ARG if the
 * hook table is full. */
gs_status train_kfac_config(struct train_config *cfg, const train_kfac_options *o);

#endif /* GRADSYNC_TRAIN_OPTIM_KFAC_H */
