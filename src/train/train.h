/*
 * gradsync's training loop as a library: data-parallel training of the C
 * models (src/nn) on Fashion-MNIST or a synthetic set. `gradsync train`
 * parses its options into a train_config and calls train_run; tests drive
 * the loop directly the same way.
 *
 * Per step and rank: forward (before each layer uses its parameters, the
 * sync mode applies that tensor's pending update), loss, backward (each
 * gradient goes to the sync mode the moment it is final), end of backward
 * (the sync mode waits for the averages), the learning rate for the step,
 * the update (by the optimizer, called by the loop or by the sync mode).
 * Around it: data loading and checks, the model, the optimizer, the
 * sampler, rank 0's initial weights broadcast, the learning-rate schedule,
 * evaluation, the divergence check, checkpoints and --resume, progress and
 * the per-epoch and summary output (text or JSON lines) on rank 0.
 *
 * Extension points, each a small table of functions in its own header:
 *   sync.h    how gradients are synchronised (engine today; PS, local SGD)
 *   optim.h   the optimizer (SGD today; K-FAC)
 *   hooks.h   per-step hooks around forward and backward
 *   breakdown.h  named time buckets in the summary
 * An extension reaches the run's state through train_ctx below.
 *
 * Failures. Where a rank can fail alone before a collective phase (data,
 * --resume, the model, the sync mode's set-up, the output paths,
 * evaluation, checkpoints), the ranks agree on the outcome (agree.h) and
 * stop together. A failure inside a step, where collectives may be in
 * flight, cannot be agreed on: that rank ends the job (train_rank_abort).
 * Divergence is no such failure: it is detected on the averaged gradients,
 * bitwise the same on every rank, so every rank stops at the same step.
 */
#ifndef GRADSYNC_TRAIN_H
#define GRADSYNC_TRAIN_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "agree.h"
#include "breakdown.h"
#include "gradsync.h"
#include "gradsync/nn.h"
#include "hooks.h"
#include "optim.h"
#include "step.h"
#include "sync.h"

/* Every option of a run. train_config_init sets the defaults; a new option
 * is a new field here (and its default there). Strings are borrowed: they
 * must outlive train_run. */
typedef struct train_config {
  gs_nn_model model;       /* cnn */
  int epochs;              /* 1 */
  int batch;               /* 64 samples per rank and step */
  float lr;                /* 0.05 */
  float momentum;          /* 0.9 */
  float weight_decay;      /* 0 */
  int nesterov;            /* 0 */
  const char *schedule;    /* "const", "step" (x0.1 every third) or "cosine" */
  double warmup_epochs;    /* 0 */
  const char *policy;      /* the engine's scheduling policy: "auto" */
  /* Gradient compression in the engine (gs_engine_config.compress): a
   * compressor spec, "auto:SPEC", or NULL for dense. */
  const char *compress;
  int no_ef;               /* 1: no error feedback (--no-ef) */
  float ef_decay;          /* --ef-decay (gs_compress_opts.ef_decay); 0: the
                              compressor's default */
  long compress_warmup_steps; /* DGC's exponential density warm-up (steps) */
  float compress_momentum; /* DGC's momentum correction (the optimizer's
                              momentum is then 0: gs_compress_spec_momentum,
                              applied by cmd_train); 0: the default 0.9 */
  const char *data_dir;    /* NULL: $GRADSYNC_FASHION_MNIST_DIR or the default */
  long synthetic;          /* > 0: a synthetic set of this many samples */
  const char *checkpoint_dir; /* NULL: none; else DIR/checkpoint.gsck */
  int resume;              /* continue from the checkpoint */
  int json;                /* JSON lines instead of text */
  uint64_t seed;           /* 1: initialisation and shuffling */
  long max_steps;          /* > 0: at most this many steps per epoch */
  float dropout;           /* 0 */
  int quiet;               /* 1: no output at all (tests) */
  const char *data_cache;  /* NULL, or a directory keeping the decoded data set */
  int prefetch;            /* 1: a background thread gathers the next batch */
  const char *sync;        /* "engine"; or with ps_servers: bsp, asp, ssp:S,
                              switch:offline:F, switch:online[:F]; or local:H,
                              post-local:H[:F], delayed:D (docs/SYNC.md) */
  int ps_servers;          /* --ps S: the last S ranks are parameter servers */
  const char *straggler;   /* --straggler RANK:FACTOR[:FROM-TO], or NULL */
  float async_lr_scale;    /* --async-lr-scale: ASP/SSP pushes' learning-rate
                              factor; 0: 1/W (gs_ps_config.async_lr_scale) */
  float async_momentum;    /* --async-momentum: ASP/SSP pushes' momentum;
                              < 0: the momentum less 1 - 1/W (docs/SYNC.md) */
  const char *optimizer;   /* "sgd" */
  const struct train_kfac_options *kfac; /* --optimizer kfac: NULL, the defaults (optim_kfac.h) */
  /* Explicit extension tables (tests, or a caller's own mode): when
   * non-NULL they take the place of the named sync mode / optimizer. */
  const train_sync_ops *sync_ops;
  const train_optim_ops *optim_ops;
  const train_hook_ops *hooks[TRAIN_MAX_HOOKS];
  int nhooks;
} train_config;

void train_config_init(train_config *cfg);

/* The model's input: Fashion-MNIST's images, 1 channel of 28 x 28 pixels,
 * in 10 classes. */
enum { TRAIN_IN_C = 1, TRAIN_IN_H = 28, TRAIN_IN_W = 28, TRAIN_CLASSES = 10 };

/* A run's state, as the extensions see it. The loop owns every pointer. */
struct train_ctx {
  const train_config *cfg;
  const train_ranks *ranks; /* every rank of the job (for train_rank_abort) */
  /* The ranks that run the loop and their communicator: all of them, on
   * ranks->comm, unless the sync mode's create narrows comm, rank and size
   * to the workers (a communicator it owns), e.g. with parameter servers.
   * The loop's own collectives (the steps' agreement, metrics,
   * checkpoints' agreement) then run on the workers only. */
  gs_comm *comm;
  int rank, size;
  train_ranks workers; /* agreement among those ranks (set after create) */
  gs_nn_net *net;
  size_t nparams;        /* parameter tensors */
  train_optim optim;
  train_sync sync;
  gs_engine *engine;     /* the engine mode's engine (its timeline), or NULL */
  struct {
    const train_hook_ops *ops;
    void *self;
  } hooks[TRAIN_MAX_HOOKS];
  int nhooks;
  long steps_per_epoch;
  const char *data_origin; /* "source", "cache", "written cache", "rebuilt cache" */
  gs_status cb_status;   /* first failure inside an nn callback */
  char cb_error[512];
};

/* What a finished run leaves to the caller (all may be ignored). */
typedef struct train_result {
  float *weights;        /* gs_malloc'd copy of the final weights (free with gs_free) */
  size_t nweights;
  long epochs_done;      /* the epoch the run ended at */
  double test_accuracy;  /* of the last evaluation */
  train_sync_stats sync; /* the sync mode's counters at the end */
  train_breakdown breakdown;
} train_result;

/* Runs training on every rank of ranks->comm (collective; ranks->comm must
 * exist). Returns the exit status: 0; 2 when an option does not fit the
 * job's ranks (--ps, --straggler: every rank finds it, rank 0 prints it);
 * or 1 after a failure, which has been printed and on which every rank
 * agreed. result may be NULL; otherwise it
 * is overwritten, and on success holds a copy of the final weights. */
int train_run(const train_config *cfg, const train_ranks *ranks, train_result *result);

/* JSON output shared by the trainer and every verb (report.c): one home. */
struct cJSON;
/* Adds v as fmt would print it (NaN and infinities become null: strict JSON). */
void train_json_add(struct cJSON *obj, const char *name, double v, const char *fmt);
/* Prints obj as one line on f and frees it. */
void train_json_print(FILE *f, struct cJSON *obj);

#endif /* GRADSYNC_TRAIN_H */
