/* K-FAC behind the trainer's extension points: `gradsync train --optimizer
 * kfac` (docs/KFAC.md). Two tables: the optimizer (optim.h), and a step hook
 * (hooks.h) that sets K-FAC up once every rank has agreed on the run, since
 * K-FAC's communicator is created collectively and an optimizer's create
 * runs before that agreement. The loop lists the hook for a run whose
 * optimizer is "kfac". */
#ifndef GRADSYNC_TRAIN_OPTIM_KFAC_H
#define GRADSYNC_TRAIN_OPTIM_KFAC_H

#include "gradsync/kfac.h"
#include "gradsync/train.h"
#include "hooks.h"
#include "optim.h"

extern const train_optim_ops train_optim_kfac;
extern const train_hook_ops train_hook_kfac;

/* The momentum buffer of K-FAC's update (the SGD on the preconditioned
 * gradient), flat as gs_nn_weights_flat: before the hook has created K-FAC
 * the one --resume loads, which the hook hands over. A sync mode whose
 * ranks keep their own momentum (local SGD) saves and restores it. */
float *train_optim_kfac_momentum(void *self);

#endif /* GRADSYNC_TRAIN_OPTIM_KFAC_H */
