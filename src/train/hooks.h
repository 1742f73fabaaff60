/* Per-step hooks: code that runs around forward and backward on every
 * step (K-FAC collects layer inputs and output gradients there, through the
 * layer hooks it adds in src/nn; a profiler could time phases). A hook may
 * also add time buckets to the summary. Several hooks run in the order the
 * configuration lists them. Every callback may be NULL. A failing callback
 * ends the job (as a sync mode's step callbacks do). */
#ifndef GRADSYNC_TRAIN_HOOKS_H
#define GRADSYNC_TRAIN_HOOKS_H

#include "gradsync/train.h"
#include "gradsync.h"
#include "step.h"

typedef struct train_hook_ops {
  const char *name;
  /* After the model, optimizer and sync mode exist. */
  gs_status (*create)(train_ctx *t, void **self);
  gs_status (*before_forward)(void *self, const train_step *s);
  gs_status (*after_forward)(void *self, const train_step *s);  /* after the loss */
  gs_status (*before_backward)(void *self, const train_step *s);
  gs_status (*after_backward)(void *self, const train_step *s); /* after end_backward */
  void (*breakdown)(void *self, gs_train_breakdown *b);
  void (*destroy)(void *self);
} train_hook_ops;


#endif /* GRADSYNC_TRAIN_HOOKS_H */
