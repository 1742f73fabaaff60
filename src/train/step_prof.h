/* A step profiler for sync modes that run without the engine (a
 * parameter-server worker, one rank alone): the hooks' stamps (the step's
 * start, each gradient's ready time) folded as the engine's profiler folds
 * them (gs_profile_fold_step), into the profile train_profile_save writes
 * for the cluster manager's prediction of the job on other sizes. */
#ifndef GS_TRAIN_STEP_PROF_H
#define GS_TRAIN_STEP_PROF_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync.h"

struct gs_nn_net;
struct gs_profile;

typedef struct step_prof {
  size_t n;         /* tensors */
  uint64_t start;   /* this step's forward start */
  uint64_t *ready;  /* this step's ready stamps */
  double fwd, *bwd; /* sums over the steps folded */
  long folded;      /* steps folded */
  long seen;        /* steps ended */
} step_prof;

/* n tensors; GS_ERR_NOMEM naming what. */
gs_status step_prof_init(step_prof *p, size_t n);
void step_prof_free(step_prof *p);
/* The hooks: before_forward(index), grad_ready(index). */
void step_prof_forward(step_prof *p, size_t index);
void step_prof_ready(step_prof *p, size_t index);
/* At end_backward: folds the step (past the first STEP_PROF_SKIP, up to
 * STEP_PROF_STEPS, and only a step whose stamps are all its own). */
void step_prof_end(step_prof *p);
/* The profile of the steps folded (tensors named as net's), named `name`,
 * or *out NULL before STEP_PROF_MIN steps. */
gs_status step_prof_make(const step_prof *p, const struct gs_nn_net *net, const char *name,
                         struct gs_profile **out);

#define STEP_PROF_SKIP 2
#define STEP_PROF_STEPS 50
#define STEP_PROF_MIN 5

#endif
