/*
 * gradsync's training library: data-parallel training of the C models
 * (gradsync/nn.h) on Fashion-MNIST or a synthetic set, on the communicator
 * it is given. `gradsync train` is one caller (it parses flags into a
 * gs_train_config and prints the events); a program of its own, or two
 * jobs on two halves of one MPI world, are others.
 *
 * Per step and rank: forward (before each layer uses its parameters, the
 * sync mode applies that tensor's pending update), loss, backward (each
 * gradient goes to the sync mode the moment it is final), end of backward
 * (the sync mode waits for the averages), the learning rate for the step,
 * the update (by the optimizer, called by the loop or by the sync mode).
 * Around it: data loading and checks, the model, the optimizer, the
 * sampler, rank 0's initial weights broadcast, the learning-rate schedule,
 * evaluation, the divergence check, checkpoints and resuming.
 *
 * Output. The library prints nothing but errors (on stderr, prefixed
 * "gradsync JOB: rank R:"). Progress, the epochs and the summary reach the
 * caller as events (gs_train_events) on the first worker rank; printing
 * them, as text or JSON, is the caller's. Messages about an option name it
 * as the caller does (gs_train_events.option): "--ps 3" from the command
 * line, "ps_servers 3" in the library's own words.
 *
 * Failures. Where a rank can fail alone before a collective phase (data,
 * resuming, the model, the sync mode's set-up, the output paths,
 * evaluation, checkpoints), the ranks agree on the outcome and stop
 * together. A failure inside a step, where collectives may be in flight,
 * cannot be agreed on: that rank ends the job (gs_train_rank_abort).
 * Divergence is no such failure: it is detected on the averaged gradients,
 * bitwise the same on every rank, so every rank stops at the same step.
 *
 * Link with gradsync::train (CMake) or pkg-config gradsync-train.
 */
#ifndef GRADSYNC_TRAIN_PUBLIC_H
#define GRADSYNC_TRAIN_PUBLIC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "gradsync/comm.h"
#include "gradsync/core.h"
#include "gradsync/kfac.h"
#include "gradsync/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

/* ---- Ranks and their agreement ------------------------------------------
 *
 * Where a rank can fail alone before a collective phase (options, a missing
 * file, an allocation, an unwritable path), every rank first learns every
 * rank's outcome, and all stop together instead of some waiting forever in
 * a collective the others never reach.
 *
 * Once the communicator exists, the agreements travel on it (its progress
 * thread makes the MPI calls), so call them only where nothing else is in
 * flight on it on any rank. Before it exists (comm NULL), they use
 * MPI_COMM_WORLD from the calling thread. */
typedef struct gs_train_ranks {
  const char *job; /* the job's name in messages: "gradsync JOB: rank R: ..." */
  gs_comm *comm;   /* borrowed; NULL before the communicator exists */
  int rank, size;
  /* Appended to a bad-input message that ends the job with status 2 (a
   * front end's " (see --help)"); NULL for none. */
  const char *usage_note;
} gs_train_ranks;

/* Prints "gradsync JOB: rank R: message" on stderr (no rank prefix while
 * size is 0, before MPI knows the ranks). */
void gs_train_rank_error(const gs_train_ranks *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gs_train_rank_verror(const gs_train_ranks *r, const char *fmt, va_list ap);

/* Ends the job from any thread when the others cannot be told through a
 * collective: prints "gradsync: rank R: fatal: JOB: message" and aborts
 * every rank. */
GS_NORETURN void gs_train_rank_abort(const gs_train_ranks *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
GS_NORETURN void gs_train_rank_vabort(const gs_train_ranks *r, const char *fmt, va_list ap);

/* Collective: returns 0 if no rank failed, else 1 on every rank. A failed
 * rank has already printed its error; reason (its first line) is the short
 * form the others print ("stopping: rank K failed (reason)"). If the
 * agreement's own collective fails, the job is aborted. */
int gs_train_agree(const gs_train_ranks *r, int failed, const char *reason);
/* gs_train_agree for a status, whose message (gs_last_error()) this call
 * prints: once, by rank 0 and ending "(on every rank)", when every rank
 * failed with the same status and message; else by each rank that failed. */
int gs_train_agree_status(const gs_train_ranks *r, gs_status st);
/* gs_train_agree_status, telling how the ranks failed: 0 when none did; 2
 * when every rank failed alike (one status, one message, said once by rank
 * 0, ending with r->usage_note) with bad input (GS_ERR_INVALID_ARG,
 * GS_ERR_PARSE: a checkpoint that does not fit the run; gs_train_run makes
 * a checkpoint file it cannot parse GS_ERR_IO), a command's usage exit;
 * else 1. gs_train_agree_status's callers end with 1 whatever the
 * failure, so it adds no usage note. */
int gs_train_agree_outcome(const gs_train_ranks *r, gs_status st);
/* Values that must be equal on every rank: 0 if every rank's vals[i]
 * equals rank 0's, else 1 on every rank, each naming the first difference
 * (names[i], the ranks and their values). */
int gs_train_agree_equal(const gs_train_ranks *r, const int64_t *vals,
                         const char *const *names, int n);

/* Whether a file can be created at path: its directory exists and is
 * writable, and path is no directory nor a read-only file (GS_ERR_IO naming
 * the path and what it is for, otherwise). */
gs_status gs_train_check_writable(const char *path, const char *what);
/* Whether files can be created in directory dir: creates and removes a
 * probe file there (access() says yes to root even where creating fails).
 * GS_ERR_IO naming what the directory is for otherwise. */
gs_status gs_train_probe_dir(const char *dir, const char *what);

/* ---- Where the time went ------------------------------------------------
 *
 * Named buckets of seconds. The loop fills "compute" (forward, loss,
 * backward and the optimizer, without the time spent waiting for
 * communication), "comm" (time the synchronisation had collectives in
 * flight, hidden or not) and "exposed_comm" (time the training thread
 * waited for it); a sync mode, the optimizer or a step hook adds its own
 * ("factor_comm", "inversion", ...). Names are identifiers. */
enum { GS_TRAIN_BREAKDOWN_MAX = 12, GS_TRAIN_BREAKDOWN_NAME = 32 };

typedef struct gs_train_breakdown {
  int n;
  struct {
    char name[GS_TRAIN_BREAKDOWN_NAME];
    double seconds;
  } bucket[GS_TRAIN_BREAKDOWN_MAX];
} gs_train_breakdown;

/* Adds seconds to the bucket called name, which is created (in order of
 * first use) if it does not exist. Beyond GS_TRAIN_BREAKDOWN_MAX buckets, or
 * for a name longer than GS_TRAIN_BREAKDOWN_NAME - 1, nothing is recorded
 * and -1 is returned; 0 otherwise. */
int gs_train_breakdown_add(gs_train_breakdown *b, const char *name, double seconds);
/* The seconds in the bucket called name (0 if there is none). */
double gs_train_breakdown_get(const gs_train_breakdown *b, const char *name);

/* Cumulative communication counters of a run's sync mode on one rank. */
typedef struct gs_train_stats {
  uint64_t messages; /* collectives (or messages) issued */
  uint64_t bytes;    /* payload bytes this rank handed to communication */
  double comm_s;     /* time communication was in flight, hidden or not */
  double wait_s;     /* time the training thread waited for it (exposed) */
} gs_train_stats;

/* The hidden share of communication: 1 - wait / comm, clamped to [0, 1]
 * (1 when nothing was communicated). */
double gs_train_hidden(const gs_train_stats *s);

/* ---- Events: what the caller shows ------------------------------------- */

/* A step done (final = 0), or the epoch's steps done (final = 1). */
typedef struct gs_train_progress {
  int epoch, epochs;      /* 0-based epoch; the run's epochs */
  long step, steps;       /* steps done in the epoch; the epoch's steps */
  double loss, accuracy;  /* the epoch's running means on this rank's batches */
  double samples_per_s;   /* of the whole job, since the epoch began */
  double comm_hidden;     /* gs_train_hidden of the epoch so far */
  int final;
} gs_train_progress;

/* An epoch done and evaluated. */
typedef struct gs_train_epoch {
  long epoch; /* 1-based: epochs done */
  double seconds, train_loss, test_loss, test_accuracy, samples_per_s;
  gs_train_stats comm; /* this epoch's, on the reporting rank */
  /* The samples of the epoch's permutation trained, each once, by this run
   * and the runs it resumed (world sizes may differ); of how many. */
  long samples, dataset_samples;
} gs_train_epoch;

/* The run's end. Strings and the JSON object are the library's, valid
 * during the call. */
typedef struct gs_train_summary {
  const char *model, *sync, *optimizer, *data; /* data: "source", "cache", ... */
  const char *backend, *precision;             /* the layers' kernels: "dnnl", "fp32" */
  int ranks, epochs, batch;                    /* ranks: the job's, servers included */
  int workers, servers;             /* the ranks that train, and the parameter
                                       servers among ranks (0 without them);
                                       until 2026-12-06 ranks was the workers */
  double momentum;
  const char *sync_text;            /* the sync mode's one-line description */
  const struct cJSON *sync_json;    /* its fields, for a JSON summary (or NULL) */
  double train_s, wall_s, samples_per_s, test_accuracy;
  long commits;                     /* inside epochs; and their seconds */
  double commit_s;
  gs_train_stats comm;              /* the whole run's */
  const gs_train_breakdown *breakdown;
  int epochs_done;                  /* whole epochs done (of epochs) */
  long stopped_at_step;             /* > 0: stopped at a commit after this
                                       global step (gs_train_result's) */
  int stop_requested;               /* 1: that stop was asked for (SIGUSR1) */
} gs_train_summary;

/* Every callback may be NULL; they run on the first worker rank, on the
 * thread that called gs_train_run, between steps. */
typedef struct gs_train_events {
  void *user;
  /* After every step and at the end of each epoch's steps: the caller
   * throttles (a terminal redraws a bar, a log prints every few %). */
  void (*progress)(void *user, const gs_train_progress *p);
  void (*epoch)(void *user, const gs_train_epoch *e);
  void (*summary)(void *user, const gs_train_summary *s);
  /* A line of information ("data: read from the cache DIR"). */
  void (*note)(void *user, const char *text);
  /* How the caller names the configuration field `field` (a member name of
   * gs_train_config, e.g. "ps_servers") in messages: "--ps" makes them read
   * "--ps 3: ...". NULL, or a NULL callback: the field's name ("ps_servers
   * 3: ..."). */
  const char *(*option)(void *user, const char *field);
} gs_train_events;

/* ---- K-FAC ---------------------------------------------------------------- */

/* The K-FAC options of a run (gs_train_config.kfac; NULL: the defaults of
 * gs_kfac_config_default). The SGD part comes from the run's lr, momentum,
 * weight decay and Nesterov options. */
typedef struct gs_train_kfac_options {
  gs_kfac_dist dist;       /* dkfac */
  gs_kfac_inverse inverse; /* chol */
  int cov_every;           /* 1 */
  int inv_every;           /* 10 */
  float damping;           /* 0.003 */
  float decay;             /* 0.95 */
  float kl_clip;           /* 0.001 */
} gs_train_kfac_options;

void gs_train_kfac_options_init(gs_train_kfac_options *o);

/* The momentum of a K-FAC run whose user gave none (the default, 0.9, is
 * SGD's). The preconditioned step is already scaled by curvature; with 0.9
 * on top, the cnn's training loss climbed to 7-19 over the first 30 steps
 * (warm-up included), and its test accuracy after them was 66% against 85%
 * with 0.5 (docs/KFAC.md, "Momentum"). */
#define GS_TRAIN_KFAC_MOMENTUM 0.5f

/* ---- A run ---------------------------------------------------------------- */

enum { GS_TRAIN_MAX_HOOKS = 4 };

/* The model's input: Fashion-MNIST's images, 1 channel of 28 x 28 pixels,
 * in 10 classes. */
enum { GS_TRAIN_IN_C = 1, GS_TRAIN_IN_H = 28, GS_TRAIN_IN_W = 28, GS_TRAIN_CLASSES = 10 };

/* Extension tables (src/train/sync.h, optim.h, hooks.h): the library's own
 * modes are chosen by name; a table given here takes their place. */
struct train_sync_ops;
struct train_optim_ops;
struct train_hook_ops;

/* Every option of a run. gs_train_config_init sets the defaults; a new
 * option is a new field here (and its default there). Strings are
 * borrowed: they must outlive gs_train_run. */
typedef struct gs_train_config {
  gs_nn_model model;       /* cnn */
  int epochs;              /* 1 */
  int batch;               /* 64 samples per rank and step */
  int global_batch;        /* > 0: samples per step over all ranks instead (each
                              rank takes global_batch / ranks, which must
                              divide it); kept when the world size changes */
  int scale_lr_linear;     /* 1: the world size may change with the per-rank
                              batch kept; lr is for the first run's world
                              size W0 and is scaled by W / W0 */
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
  int no_ef;               /* 1: no error feedback */
  float ef_decay;          /* gs_compress_opts.ef_decay; 0: the compressor's default */
  long compress_warmup_steps; /* DGC's exponential density warm-up (steps) */
  float compress_momentum; /* DGC's momentum correction (the optimizer's
                              momentum is then 0: gs_compress_spec_momentum
                              says how to split it); 0: the default 0.9 */
  const char *data_dir;    /* NULL: $GRADSYNC_FASHION_MNIST_DIR or the default */
  long synthetic;          /* > 0: a synthetic set of this many samples */
  const char *checkpoint_dir; /* NULL: none; else DIR/checkpoint.gsck, written at
                                 every epoch's end and at each commit, with
                                 per-rank files beside it: K-FAC's factors,
                                 and with compression each rank's compressor
                                 memory (DIR/compress.rank<R>.step<S>.gsck;
                                 docs/TRAIN.md) */
  int resume;              /* continue from the checkpoint (an epoch's end or a
                              commit inside one: the next step), each rank
                              with its compressor memory (on another world
                              size: the mean over the old ranks');
                              GS_TRAIN_RESUME_IF_ANY: if there is one */
  long commit_every;       /* > 0: commit every this many global steps inside
                              epochs too (needs checkpoint_dir; not with the
                              asynchronous sync modes, whose workers' steps
                              differ) */
  double commit_every_s;   /* > 0 (instead of commit_every): commit once this
                              many seconds of training have passed since the
                              last commit, by rank 0's clock, at a step the
                              ranks agree on at a check about every 0.5 s
                              (where a stop asked is also taken, and rank 0
                              writes the run's position to
                              checkpoint_dir/progress.json) */
  long stop_at_step;       /* > 0: commit after this global step and return
                              (gs_train_result.stopped_at_step) */
  uint64_t seed;           /* 1: initialisation and shuffling */
  long max_steps;          /* > 0: at most this many steps per epoch */
  float dropout;           /* 0 */
  const char *precision;   /* NULL or "fp32"; "bf16": convolutions and linear
                              layers compute in bfloat16 on oneDNN, with fp32
                              weights, gradients and reductions
                              (gs_nn_set_precision; needs AVX-512 BF16 or AMX) */
  const char *data_cache;  /* NULL, or a directory keeping the decoded data set */
  int prefetch;            /* 1: a background thread gathers the next batch */
  const char *sync;        /* "engine"; or with ps_servers: bsp, asp, ssp:S,
                              switch:offline:F, switch:online[:F]; or local:H,
                              post-local:H[:F], delayed:D (docs/SYNC.md) */
  int ps_servers;          /* the last ps_servers ranks are parameter servers */
  const char *straggler;   /* RANK:FACTOR or RANK:+DELAY[:FROM-TO]: slow a
                              worker down (hook_straggler.c), or NULL */
  float async_lr_scale;    /* ASP/SSP pushes' learning-rate factor; 0: 1/W
                              (gs_ps_config.async_lr_scale) */
  float async_momentum;    /* ASP/SSP pushes' momentum; < 0: the momentum
                              less 1 - 1/W (docs/SYNC.md) */
  const char *optimizer;   /* "sgd" or "kfac" */
  const gs_train_kfac_options *kfac; /* for "kfac": NULL, the defaults */
  const gs_train_events *events;     /* NULL: nothing shown */
  /* Explicit extension tables (tests, or a caller's own mode): when
   * non-NULL they take the place of the named sync mode / optimizer; hooks
   * run before the ones the options imply (K-FAC's, the straggler's). */
  const struct train_sync_ops *sync_ops;
  const struct train_optim_ops *optim_ops;
  const struct train_hook_ops *hooks[GS_TRAIN_MAX_HOOKS];
  int nhooks;
} gs_train_config;

void gs_train_config_init(gs_train_config *cfg);

enum { GS_TRAIN_RESUME_IF_ANY = 2 };

/* Asks the running job to stop at its next commit (gs_train_config
 * commit_every; the next check of commit_every_s; or its epoch's end):
 * async-signal-safe, for a SIGUSR1 handler. The ranks agree at the commit
 * (one that was asked is enough), commit and return with gs_train_result.stop_requested = 1. A supervisor
 * resizing an elastic job uses it; --resume continues exactly there. */
void gs_train_request_stop(void);

/* Checks the names in cfg that the library resolves (the sync mode and its
 * parameters, the optimizer, the straggler spec, the schedule), without
 * side effects: GS_ERR_PARSE naming the field as events->option does. */
gs_status gs_train_config_check(const gs_train_config *cfg);

/* The sync modes' names, comma-separated ("engine, bsp, ..."). */
const char *gs_train_sync_names(void);
/* Whether the sync spec's mode runs on parameter servers (0 for unknown
 * ones). */
int gs_train_sync_uses_servers(const char *spec);

/* What a finished run leaves to the caller (all may be ignored). */
typedef struct gs_train_result {
  float *weights;        /* a copy of the final weights (gs_train_result_free) */
  size_t nweights;
  long epochs_done;      /* the epoch the run ended at */
  long stopped_at_step;  /* > 0: the global step it stopped and committed at */
  int stop_requested;    /* it stopped because gs_train_request_stop asked */
  long resumed_samples;  /* the resumed commit's position in its epoch (samples) */
  long commits;          /* commits inside epochs (commit_every, stop_at_step) */
  double commit_s;       /* seconds they took (flush and save) */
  double test_accuracy;  /* of the last evaluation */
  gs_train_stats sync;   /* the sync mode's counters at the end */
  gs_train_breakdown breakdown;
} gs_train_result;

/* Runs training on every rank of ranks->comm (collective; ranks->comm must
 * exist), computing with gs_nn_threads() threads per rank, set to 1 if the
 * caller set none (one thread per rank is gradsync's default: ranks share
 * a machine's cores, and the result is then bitwise repeatable). Returns the exit status: 0; 2 when an option is invalid
 * (gs_train_config_check) or does not fit the job's ranks (parameter
 * servers, the straggler): every rank finds it, rank 0 prints it; or 1
 * after a failure, which has been printed and on which every rank agreed. result may be NULL; otherwise it is overwritten, and
 * on success holds a copy of the final weights. */
int gs_train_run(const gs_train_config *cfg, const gs_train_ranks *ranks,
                 gs_train_result *result);

/* Frees the result's weights (and leaves it empty). */
void gs_train_result_free(gs_train_result *result);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_TRAIN_PUBLIC_H */
