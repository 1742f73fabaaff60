/*
 * The training loop's state as its extensions see it (sync.h, optim.h,
 * hooks.h): the public API is include/gradsync/train.h.
 *
 * Extension points, each a small table of functions in its own header:
 *   sync.h    how gradients are synchronised (engine; PS, local SGD)
 *   optim.h   the optimizer (SGD; K-FAC)
 *   hooks.h   per-step hooks around forward and backward
 * An extension reaches the run's state through train_ctx below.
 */
#ifndef GRADSYNC_TRAIN_CTX_H
#define GRADSYNC_TRAIN_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync.h"
#include "gradsync/nn.h"
#include "gradsync/train.h"
#include "hooks.h"
#include "optim.h"
#include "step.h"
#include "sync.h"

/* A run's state, as the extensions see it. The loop owns every pointer. */
struct train_ctx {
  const gs_train_config *cfg;
  const gs_train_ranks *ranks; /* every rank of the job (for gs_train_rank_abort) */
  /* The ranks that run the loop and their communicator: all of them, on
   * ranks->comm, unless the sync mode's create narrows comm, rank and size
   * to the workers (a communicator it owns), e.g. with parameter servers.
   * The loop's own collectives (the steps' agreement, metrics,
   * checkpoints' agreement) then run on the workers only. */
  gs_comm *comm;
  int rank, size;
  gs_train_ranks workers; /* agreement among those ranks (set after create) */
  gs_nn_net *net;
  size_t nparams;        /* parameter tensors */
  train_optim optim;
  train_sync sync;
  gs_engine *engine;     /* the engine mode's engine (its timeline), or NULL */
  int profile_saved;     /* rank 0 wrote this launch's DIR/profile.json (train_profile_save) */
  struct {
    const train_hook_ops *ops;
    void *self;
  } hooks[GS_TRAIN_MAX_HOOKS];
  int nhooks;
  /* Set-up is agreed: from here a rank that is not a worker serves
   * (train_sync_ops.serve) until every worker's mode has said it is done,
   * whether or not that worker trains a step (a resume with nothing left). */
  int serving;
  long steps_per_epoch;
  const char *data_origin; /* "source", "cache", "written cache", "rebuilt cache" */
  int data_crc_known;     /* data_crc is the train split's CRC-32 (the cache's check) */
  uint32_t data_crc;
  int batch;              /* samples per rank and step (global_batch / size, or batch) */
  int base_ranks;         /* the world size the learning rate is for (scale_lr_linear) */
  /* Commits (gs_train_config.commit_every): the epoch's position the next
   * save records (samples of the epoch's permutation done; 0 at its end),
   * and what a resumed checkpoint recorded (resume.c). */
  long save_samples_in_epoch;
  long resume_samples_in_epoch;
  /* Timed commits (commit_every_s, timed_check): the global step of the
   * next check, and rank 0's clock at the last commit and at the last
   * check (at global step check_step). */
  long next_check, check_step;
  double commit_t, check_t;
  int progress_warned;    /* a progress report could not be written: said once */
  int resume_ranks;       /* the checkpoint's world size (0: none resumed) */
  long resume_step;       /* the resumed checkpoint's training step; -1: none */
  /* The sync mode's per-rank files (train_sync_ops.save_rank): the world
   * size that wrote those of the checkpoint resumed (0: it has none), and
   * of the checkpoint being written. */
  int resume_sync_files;
  int sync_files;
  long commits;
  double commit_s;
  struct train_bg_commit *bg; /* a commit being written in the background, or NULL */
  gs_status cb_status;   /* first failure inside an nn callback */
  char cb_error[512];
};

/* How the caller names the configuration field `field` in messages
 * (gs_train_events.option), else the field's own name (report.c). */
const char *train_option(const gs_train_config *c, const char *field);

/* A line for the run's caller (gs_train_events.note) about what the run
 * does that the user should know (report.c): from the first worker rank
 * only, so a decision every rank takes alike is said once. */
void train_note(const train_ctx *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* GRADSYNC_TRAIN_CTX_H */
