/* The gradient-synchronisation extension point ("sync mode").
 *
 * A sync mode decides how the ranks' gradients become the update: today's
 * engine path (sync_engine.c: gradients averaged by gradsync's engine during
 * backward, updates applied lazily before each tensor's next use in
 * forward) is one; parameter servers and local SGD are others, each a new
 * file with its ops here and one line in sync.c's table.
 *
 * The loop calls, per rank:
 *   create      after the model and the optimizer exist and every rank holds
 *               rank 0's initial weights: register tensors, start threads;
 *   is_worker   (may be NULL: every rank trains) 0 for a rank that does not
 *               run the training loop (a parameter server): the loop calls
 *               serve instead, which returns when the workers are done;
 *   per step:   before_forward(i) before forward first reads tensor i
 *               (apply its pending update); grad_ready(i) the moment
 *               backward makes gradient i final (highest index first);
 *               end_backward after backward (wait for the averages and apply
 *               or schedule the update);
 *   flush       before evaluation, checkpoints and the end: every pending
 *               update applied, nothing in flight;
 *   stats       cumulative counters, read between steps;
 *   describe    the mode's part of the summary;
 *   destroy     (must issue no collective: ranks may reach it after a
 *               failure) returns whether the mode's last outputs (a
 *               timeline) could be written.
 *
 * Updates: a mode with owns_step = 0 leaves the update to the loop, which
 * calls the optimizer's step for all tensors after end_backward. A mode
 * with owns_step = 1 applies updates itself, through t->optim (per tensor,
 * when it likes) or elsewhere (on servers); the loop then never steps.
 *
 * Failures: a hook's non-zero status during a step ends the job
 * (gs_train_rank_abort), since collectives may be in flight; create, flush
 * and serve run where the loop can agree on the outcome. */
#ifndef GRADSYNC_TRAIN_SYNC_H
#define GRADSYNC_TRAIN_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/train.h"
#include "gradsync.h"
#include "step.h"

struct cJSON;
struct gs_profile;

typedef struct train_sync_ops {
  const char *name; /* the mode's name, the part of its spec before ':' */
  int servers;      /* runs on parameter servers: the job has server ranks */
  int owns_step;
  /* Checks a whole spec of this mode ("ssp:2"), without side effects;
   * GS_ERR_PARSE naming the spec and the forms the mode accepts. */
  gs_status (*check)(const char *spec);
  gs_status (*create)(train_ctx *t, void **self);
  int (*is_worker)(void *self);
  gs_status (*serve)(void *self);
  gs_status (*before_forward)(void *self, size_t index);
  gs_status (*grad_ready)(void *self, size_t index);
  gs_status (*end_backward)(void *self, const train_step *step);
  gs_status (*flush)(void *self);
  /* Optional (NULL: flush): at a commit inside an epoch, in place of flush,
   * for a mode whose flush would change the run (local SGD's extra
   * average): the net holds the weights the checkpoint gets, and
   * commit_done, once the checkpoint is written or failed, puts back what
   * the run goes on from; save_rank keeps the rest, so that a resumed run
   * equals the run never stopped. */
  gs_status (*commit_flush)(void *self);
  void (*commit_done)(void *self);
  void (*stats)(void *self, gs_train_stats *out);
  /* Optional: adds the mode's fields to the JSON summary (json) and writes
   * its one-line description for the text summary into text, e.g.
   * "policy auto (plan: mgwfbp, 3 messages per step)". */
  void (*describe)(void *self, struct cJSON *json, char *text, size_t n);
  /* Optional: adds the mode's own time buckets. */
  void (*breakdown)(void *self, gs_train_breakdown *b);
  /* Optional: the epoch ends by samples, not by steps. For modes whose
   * workers may run different numbers of steps (asynchronous ones: a
   * straggler does fewer, the others more). Called after each step's
   * end_backward; returns 1 once the epoch's samples (steps_per_epoch x
   * workers x batch) have been applied, and the worker leaves the epoch
   * whatever its own step count. Batches past the worker's shard of the
   * epoch wrap around it. NULL: every worker runs steps_per_epoch steps. */
  int (*epoch_done)(void *self, const train_step *step);
  /* Optional (may be NULL): the mode's state that differs between ranks
   * (the engine's compressor memory), in files of each rank's own beside
   * the checkpoint in dir, kept as the optimizer's per-rank state is
   * (optim.h): at a commit point (after flush: nothing in flight) every
   * rank calls save_rank before rank 0 writes the checkpoint of training
   * step `step`, and sets *files to 1 when it wrote a file (the
   * checkpoint's description records it); commit_rank once that
   * checkpoint is in place, to drop the files of the one before it. On a
   * resumed run, load_rank runs on every rank after create, with the
   * checkpoint's step and the world size that wrote its files (0: it has
   * none: written without them); that size may differ from this run's. */
  gs_status (*save_rank)(void *self, const char *dir, long step, int *files);
  void (*commit_rank)(void *self);
  gs_status (*load_rank)(void *self, const char *dir, long step, int files_size);
  /* Optional (may be NULL): the mode's own profile of this rank's steps
   * (gs_profile: forward and each tensor's backward), a new one for
   * gs_profile_free, where no engine profiles them; *out NULL while too
   * few steps are measured. train_profile_save writes it beside the
   * checkpoint on rank 0 for the cluster manager's prediction. */
  gs_status (*profile)(void *self, struct gs_profile **out);
  gs_status (*destroy)(void *self);
} train_sync_ops;

typedef struct train_sync {
  const train_sync_ops *ops;
  void *self;
} train_sync;

extern const train_sync_ops train_sync_engine;

/* The sync mode called name ("engine"), or NULL. */
const train_sync_ops *train_sync_find(const char *name);
/* Checks a whole sync spec ("ssp:2") with its mode's check: GS_ERR_PARSE
 * naming the spec for an unknown mode or a bad parameter. */
gs_status train_sync_check(const char *spec);
#endif /* GRADSYNC_TRAIN_SYNC_H */
