/* The optimizer extension point: the loop updates the weights only
 * through this interface, so a second-order optimizer (K-FAC) is a new
 * implementation, not an edit of the loop. SGD (optim_sgd.c, a thin wrapper
 * of src/nn's gs_nn_sgd) is the one today.
 *
 * Who calls what: the sync mode applies the updates (step_param per tensor
 * as each tensor's average lands, or step for all) unless it owns the step
 * itself (a parameter server updates on the servers); the loop sets the
 * learning rate once per step, before any update of that step is applied,
 * and saves and loads the optimizer's state with the checkpoints. */
#ifndef GRADSYNC_TRAIN_OPTIM_H
#define GRADSYNC_TRAIN_OPTIM_H

#include <stddef.h>

#include "gradsync/train.h"
#include "gradsync.h"
#include "gradsync/nn.h"

typedef struct train_ctx train_ctx;

typedef struct train_optim_ops {
  const char *name; /* as --optimizer names it */
  /* Builds the optimizer for t->net (which exists; the weights are not yet
   * broadcast) from t->cfg. */
  gs_status (*create)(train_ctx *t, void **self);
  /* Updates parameter tensor index (forward order) from its gradient. */
  gs_status (*step_param)(void *self, size_t index);
  /* Updates every tensor. */
  gs_status (*step)(void *self);
  void (*set_lr)(void *self, float lr);
  /* The optimizer's state goes into checkpoints with the net's (atomically,
   * one file): save writes path, load restores net and optimizer from it
   * and fills st; a file that does not fit leaves both unchanged. */
  gs_status (*save)(void *self, const char *path, const gs_nn_net *net,
                    const gs_nn_train_state *st);
  gs_status (*load)(void *self, const char *path, gs_nn_net *net, gs_nn_train_state *st);
  /* Optional (may be NULL): save's first half (gs_nn_checkpoint_save_begin):
   * the state copied into *out's temporary file; the loop makes it durable
   * and puts it in place in the background while training goes on. */
  gs_status (*save_begin)(void *self, const char *path, const gs_nn_net *net,
                          const gs_nn_train_state *st, gs_nn_file *out);
  /* Optional (may be NULL): state that differs between ranks (K-FAC's
   * factors), in files of each rank's own beside the checkpoint in dir.
   * Every rank calls save_rank before rank 0 writes the checkpoint of
   * training step `step`, and commit_rank once that checkpoint is in (to
   * drop the files of the previous one). load_rank runs on every rank of
   * `size` after load, with the world size that wrote the checkpoint's
   * files (files_size): on the same size it must find the state of load's
   * step, or fail naming the file; on another it loads nothing (the state
   * starts afresh) and leaves the old files to commit_rank to remove, once
   * a newer checkpoint is in: every size-th from its own rank's. */
  gs_status (*save_rank)(void *self, const char *dir, int rank, long step);
  void (*commit_rank)(void *self);
  gs_status (*load_rank)(void *self, const char *dir, int rank, int size, long step,
                         int files_size);
  /* Optional (may be NULL): adds the optimizer's own time buckets. */
  void (*breakdown)(void *self, gs_train_breakdown *b);
  void (*destroy)(void *self);
} train_optim_ops;

typedef struct train_optim {
  const train_optim_ops *ops;
  void *self;
} train_optim;

extern const train_optim_ops train_optim_sgd;

/* The optimizer called name ("sgd"), or NULL. */
const train_optim_ops *train_optim_find(const char *name);

static inline gs_status train_optim_step_param(train_optim *o, size_t index) {
  return o->ops->step_param(o->self, index);
}
static inline gs_status train_optim_step(train_optim *o) { return o->ops->step(o->self); }
static inline void train_optim_set_lr(train_optim *o, float lr) { o->ops->set_lr(o->self, lr); }

#endif /* GRADSYNC_TRAIN_OPTIM_H */
