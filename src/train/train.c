/* The training loop (train.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "optim_kfac.h"
#include "sync_ps.h"
#include "train_internal.h"

void gs_train_config_init(gs_train_config *c) {
  memset(c, 0, sizeof *c);
  c->model = GS_NN_MODEL_CNN;
  c->epochs = 1;
  c->batch = 64;
  c->lr = 0.05f;
  c->momentum = 0.9f;
  c->schedule = "const";
  c->policy = "auto";
  c->seed = 1;
  c->sync = "engine";
  c->optimizer = "sgd";
  c->prefetch = 1;
  c->async_momentum = -1;
}

/* Set from a signal handler; read between steps. */
static atomic_int stop_asked; /* lock-free: safe in a handler, and from gs_signal_route's thread */

void gs_train_request_stop(void) { atomic_store(&stop_asked, 1); }

/* Whether any worker was asked to stop: collective over the workers, at a
 * commit point (nothing in flight). */
static int agree_stop(train_ctx *t, long epoch, long step) {
  int32_t any = atomic_load(&stop_asked) ? 1 : 0;
  if (t->size > 1 &&
      gs_allreduce(t->comm, GS_IN_PLACE, &any, 1, GS_I32, GS_MAX, GS_ALGO_MPI) != GS_OK)
    gs_train_rank_abort(t->ranks, "epoch %ld, step %ld: cannot agree on a stop: %s", epoch + 1,
                        step + 1, gs_last_error());
  return any != 0;
}

/* The checks of timed commits (commit_every_s) aim at this many seconds
 * apart: a stop asked waits about this long for its commit, and a check
 * costs one small all-reduce. */
#define TRAIN_CHECK_S 0.5

/* Timed commits: at the global step t->next_check the workers agree, in
 * one all-reduce, on a stop asked of any, on whether rank 0's clock says a
 * commit is due (commit_every_s since the last), and on the step of the
 * next check, which rank 0 sets about TRAIN_CHECK_S ahead at the rate of
 * the steps since the last check. Every worker runs the same steps, so
 * every one reaches the check. Returns 0 where there is none; 1 at a
 * check, with *commit and *asked set. */
static int timed_check(train_ctx *t, long epoch, long step, long global, int *commit,
                       int *asked) {
  if (global < t->next_check) return 0;
  int32_t v[3] = {atomic_load(&stop_asked) ? 1 : 0, 0, 0};
  if (t->rank == 0) {
    const double every = t->cfg->commit_every_s, now = gs_now();
    const double aim = every < TRAIN_CHECK_S ? every : TRAIN_CHECK_S;
    const double per_step = (now - t->check_t) / (double)(global - t->check_step);
    const double gap = per_step > 0 ? aim / per_step : 1;
    v[1] = now - t->commit_t >= every;
    v[2] = gap < 1 ? 1 : gap > 1e6 ? 1000000 : (int32_t)(gap + 0.5);
    t->check_t = now;
    t->check_step = global;
  }
  if (t->size > 1 &&
      gs_allreduce(t->comm, GS_IN_PLACE, v, 3, GS_I32, GS_MAX, GS_ALGO_MPI) != GS_OK)
    gs_train_rank_abort(t->ranks, "epoch %ld, step %ld: cannot agree on a commit: %s",
                        epoch + 1, step + 1, gs_last_error());
  t->next_check = global + (v[2] > 0 ? v[2] : 1);
  *asked = v[0] != 0;
  *commit = v[1] != 0;
  return 1;
}

/* At each timed check rank 0 reports the run's position in
 * CHECKPOINT_DIR/progress.json, in the form an --exec program's progress
 * takes ({"epoch", "samples_in_epoch", "epoch_samples", "epochs"}, and the
 * global batch): a cluster manager reads the job's progress and speed from
 * it between commits, which may then be minutes apart. Not a commit: no
 * fsync, and a run resumes from checkpoint.json only. A report that cannot
 * be written is said once; the training goes on. */
static void report_progress(train_ctx *t, long epoch, long samples_in_epoch, long epoch_samples) {
  const gs_train_config *c = t->cfg;
  if (t->rank != 0 || c->checkpoint_dir == NULL) return;
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/progress.json", c->checkpoint_dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  int ok = f != NULL;
  if (ok)
    ok = fprintf(f, "{\"epoch\": %ld, \"samples_in_epoch\": %ld, \"epoch_samples\": %ld, "
                 "\"epochs\": %d, \"global_batch\": %ld}\n", epoch, samples_in_epoch,
                 epoch_samples, c->epochs, (long)t->batch * t->size) > 0;
  int err = errno;
  if (f != NULL && fclose(f) != 0 && ok) {
    ok = 0;
    err = errno;
  }
  if (ok && rename(tmp, path) != 0) {
    ok = 0;
    err = errno;
  }
  if (!ok && !t->progress_warned) {
    train_note(t, "warning: cannot write the progress report %s: %s (the training goes on)",
               path, strerror(err));
    t->progress_warned = 1;
  }
  if (!ok) unlink(tmp);
}

void gs_train_result_free(gs_train_result *r) {
  if (r == NULL) return;
  gs_free(r->weights);
  r->weights = NULL;
  r->nweights = 0;
}

/* ---- The nn callbacks, into the sync mode --------------------------------- */

static void fail_cb(train_ctx *t, gs_status st) {
  if (t->cb_status == GS_OK) {
    t->cb_status = st;
    snprintf(t->cb_error, sizeof t->cb_error, "%s", gs_last_error());
  }
}

static void on_grad_ready(void *ctx, size_t i) {
  train_ctx *t = ctx;
  if (t->sync.ops->grad_ready == NULL) return;
  gs_status st = t->sync.ops->grad_ready(t->sync.self, i);
  if (st != GS_OK) fail_cb(t, st);
}

static void on_before_forward(void *ctx, size_t i) {
  train_ctx *t = ctx;
  if (t->sync.ops->before_forward == NULL) return;
  gs_status st = t->sync.ops->before_forward(t->sync.self, i);
  if (st != GS_OK) fail_cb(t, st);
}

static gs_status callbacks_status(train_ctx *t) {
  if (t->cb_status != GS_OK) return gs_error(t->cb_status, "%s", t->cb_error);
  return GS_OK;
}

static void set_callbacks(train_ctx *t, int on) {
  if (on) gs_nn_set_callbacks(t->net, on_grad_ready, on_before_forward, t);
  else gs_nn_set_callbacks(t->net, NULL, NULL, NULL);
}

typedef enum { HOOK_BEFORE_FORWARD, HOOK_AFTER_FORWARD, HOOK_BEFORE_BACKWARD,
               HOOK_AFTER_BACKWARD } hook_point;

static gs_status run_hooks(train_ctx *t, hook_point p, const train_step *s) {
  for (int i = 0; i < t->nhooks; i++) {
    const train_hook_ops *h = t->hooks[i].ops;
    gs_status (*fn)(void *, const train_step *) =
        p == HOOK_BEFORE_FORWARD    ? h->before_forward
        : p == HOOK_AFTER_FORWARD   ? h->after_forward
        : p == HOOK_BEFORE_BACKWARD ? h->before_backward
                                    : h->after_backward;
    if (fn == NULL) continue;
    gs_status st = fn(t->hooks[i].self, s);
    if (st != GS_OK) return st;
  }
  return GS_OK;
}

static void sync_stats(train_ctx *t, gs_train_stats *out) {
  memset(out, 0, sizeof *out);
  if (t->sync.ops->stats) t->sync.ops->stats(t->sync.self, out);
}

static gs_train_stats stats_diff(const gs_train_stats *a, const gs_train_stats *b) {
  return (gs_train_stats){.messages = b->messages - a->messages, .bytes = b->bytes - a->bytes,
                            .comm_s = b->comm_s - a->comm_s, .wait_s = b->wait_s - a->wait_s};
}

/* ---- Evaluation ------------------------------------------------------------------ */

/* Accuracy on the test set: each rank evaluates a shard; the counts are
 * summed. Batch-norm statistics come from rank 0 first (as DDP broadcasts
 * buffers), so every rank evaluates the same model. Called with nothing in
 * flight (after the sync mode's flush). Returns 0, or 1 on every rank after
 * a failure on any. */
static int evaluate(train_ctx *t, const gs_nn_dataset *test, double *acc, double *loss) {
  size_t nbuf = 0;
  float *buffers = gs_nn_buffers_flat(t->net, &nbuf);
  gs_status st = GS_OK;
  if (nbuf > 0) st = gs_bcast(t->comm, buffers, nbuf, GS_F32, 0, GS_ALGO_AUTO);
  int b = gs_nn_max_batch(t->net);
  size_t in = gs_nn_input_size(t->net);
  float *x = gs_malloc((size_t)b * in * sizeof(float));
  int32_t *y = gs_malloc((size_t)b * sizeof(int32_t));
  size_t *idx = gs_malloc((size_t)b * sizeof(size_t));
  if (st == GS_OK && !(x && y && idx))
    st = gs_error(GS_ERR_NOMEM, "out of memory for an evaluation batch of %d", b);
  double sums[3] = {0, 0, 0}; /* correct, loss * n, n */
  /* Rank r takes samples r, r + size, ...; no callbacks during evaluation. */
  gs_nn_set_training(t->net, 0);
  set_callbacks(t, 0);
  for (size_t s = (size_t)t->rank; s < test->n && st == GS_OK;) {
    int n = 0;
    for (; n < b && s < test->n; s += (size_t)t->size) idx[n++] = s;
    st = gs_nn_dataset_gather(test, idx, n, x, y);
    float l = 0;
    int correct = 0;
    if (st == GS_OK) st = gs_nn_forward(t->net, x, n, NULL);
    if (st == GS_OK) st = gs_nn_loss(t->net, y, &l, &correct);
    sums[0] += correct;
    sums[1] += (double)l * n;
    sums[2] += n;
  }
  set_callbacks(t, 1);
  gs_nn_set_training(t->net, 1);
  gs_free(x);
  gs_free(y);
  gs_free(idx);
  if (gs_train_agree_status(&t->workers, st)) return 1;
  st = gs_allreduce(t->comm, GS_IN_PLACE, sums, 3, GS_F64, GS_SUM, GS_ALGO_MPI);
  if (gs_train_agree_status(&t->workers, st)) return 1;
  *acc = sums[2] > 0 ? sums[0] / sums[2] : 0;
  *loss = sums[2] > 0 ? sums[1] / sums[2] : 0;
  return 0;
}

/* ---- Checkpoints and other outputs --------------------------------------------------- */

static void checkpoint_path(const gs_train_config *c, char *buf, size_t n) {
  snprintf(buf, n, "%s/checkpoint.gsck", c->checkpoint_dir);
}

/* ---- Commits written in the background --------------------------------------------
 *
 * A commit inside an epoch copies the state into the page cache (the file's
 * bytes written, fast) on rank 0, and a thread makes it durable and puts it
 * in place (fsync, rename, the description, the final rename: the order
 * that survives a kill anywhere) while training goes on. Its outcome is
 * agreed at the next commit or checkpoint, or at the run's end. Optimizers
 * with per-rank state (K-FAC) commit in the foreground. */
struct train_bg_commit {
  pthread_t thread;
  gs_nn_file file;                 /* the checkpoint's temporary file */
  struct cJSON *meta;              /* the run's description, taken by the thread */
  char next[4224], path[4200], meta_path[4200];
  gs_status st;                    /* the thread's outcome, and its message */
  char err[1024];
};

static void *bg_main(void *arg) {
  struct train_bg_commit *b = arg;
  gs_status st = gs_nn_file_sync(&b->file);
  if (st == GS_OK) {
    st = train_meta_write(b->meta_path, b->meta, b->next);
    b->meta = NULL;
  }
  if (st == GS_OK && rename(b->next, b->path) != 0)
    st = gs_error(GS_ERR_IO, "%s: cannot rename %s over it: %s", b->path, b->next,
                  strerror(errno));
  b->st = st;
  if (st != GS_OK) snprintf(b->err, sizeof b->err, "%s", gs_last_error());
  return NULL;
}

/* Waits for the commit in flight, if any: its status, with its message. */
static gs_status bg_join(train_ctx *t) {
  struct train_bg_commit *b = t->bg;
  if (b == NULL) return GS_OK;
  double w0 = gs_now();
  pthread_join(b->thread, NULL);
  t->commit_s += gs_now() - w0;
  gs_status st = b->st;
  if (st != GS_OK) st = gs_error(st, "the commit written in the background: %s", b->err);
  if (b->meta) cJSON_Delete(b->meta);
  gs_free(b);
  t->bg = NULL;
  return st;
}

/* Starts writing the commit of (epoch, step) in the background on rank 0:
 * GS_OK, or the failure of its first half (nothing started). */
static gs_status bg_start(train_ctx *t, const train_data_id *data, long epoch, long step) {
  struct train_bg_commit *b = gs_calloc(1, sizeof *b);
  if (b == NULL) return gs_error(GS_ERR_NOMEM, "out of memory for a commit");
  checkpoint_path(t->cfg, b->path, sizeof b->path);
  snprintf(b->next, sizeof b->next, "%s.next", b->path);
  train_meta_path(t->cfg, b->meta_path, sizeof b->meta_path);
  gs_nn_train_state ts = {.epoch = epoch, .step = step, .seed = t->cfg->seed};
  gs_status st = t->optim.ops->save_begin(t->optim.self, b->next, t->net, &ts, &b->file);
  if (st == GS_OK) {
    b->meta = train_meta_describe(t, data, epoch);
    train_profile_save(t);
    if (b->meta == NULL) {
      gs_nn_file_abort(&b->file);
      st = gs_error(GS_ERR_NOMEM, "out of memory for the commit's description");
    }
  }
  if (st == GS_OK && pthread_create(&b->thread, NULL, bg_main, b) != 0) {
    gs_nn_file_abort(&b->file);
    st = gs_error(GS_ERR_INTERNAL, "cannot start the commit's writer thread");
  }
  if (st != GS_OK) {
    if (b->meta) cJSON_Delete(b->meta);
    gs_free(b);
    return st;
  }
  t->bg = b;
  return GS_OK;
}

/* Whether commits go to the background: an optimizer that can split its
 * save and keeps no per-rank state. (The sync mode's per-rank state, the
 * compressor memory, is small: save_ranks writes it in the foreground,
 * before the background commit starts.) */
static int bg_capable(const train_ctx *t) {
  return t->optim.ops->save_begin != NULL && t->optim.ops->save_rank == NULL &&
         getenv("GRADSYNC_COMMIT_SYNC") == NULL;
}

/* State that differs between ranks (the optimizer's K-FAC factors, the sync
 * mode's compressor memory), written by every rank before the checkpoint of
 * training step `step` that needs it, so that a checkpoint on disk always
 * has its ranks' files. Collective over the workers, at a commit point;
 * returns 0, or 1 on every worker. */
static int save_ranks(train_ctx *t, long step) {
  gs_status st = GS_OK;
  const train_optim_ops *o = t->optim.ops;
  const train_sync_ops *y = t->sync.ops;
  int files = 0;
  if (o->save_rank) st = o->save_rank(t->optim.self, t->cfg->checkpoint_dir, t->rank, step);
  if (st == GS_OK && y->save_rank)
    st = y->save_rank(t->sync.self, t->cfg->checkpoint_dir, step, &files);
  /* Every rank runs the same configuration: rank 0's word, recorded in the
   * checkpoint's description, is every rank's. */
  t->sync_files = files ? t->size : 0;
  return (o->save_rank || y->save_rank) && gs_train_agree_status(&t->workers, st);
}

/* Once a checkpoint is in place, the per-rank files of the one before it go. */
static void commit_ranks(train_ctx *t) {
  if (t->optim.ops->commit_rank) t->optim.ops->commit_rank(t->optim.self);
  if (t->sync.ops->commit_rank) t->sync.ops->commit_rank(t->sync.self);
}

/* The previous background commit's outcome, agreed (before anything that
 * replaces it, and at the run's end); once it is in place, the per-rank
 * files of the commit before it go. Returns 0, or 1 on every worker. */
static int bg_settle(train_ctx *t) {
  gs_status st = bg_join(t);
  if (gs_train_agree_status(&t->workers, st)) return 1;
  commit_ranks(t);
  return 0;
}

/* Replicas are identical: rank 0 writes; every rank learns the outcome.
 * State that differs between ranks is written first, by every rank
 * (save_ranks). Returns 0, or 1 on every rank. */
static int save_checkpoint(train_ctx *t, const train_data_id *data, long epoch, long step) {
  /* A commit still being written in the background finishes first. */
  if (bg_capable(t) && bg_settle(t)) return 1;
  char path[4096];
  checkpoint_path(t->cfg, path, sizeof path);
  gs_status st = GS_OK;
  if (save_ranks(t, step)) return 1;
  if (t->rank == 0) {
    /* The order that survives a kill anywhere: resume.c. */
    char next[4200];
    snprintf(next, sizeof next, "%s.next", path);
    gs_nn_train_state ts = {.epoch = epoch, .step = step, .seed = t->cfg->seed};
    st = t->optim.ops->save(t->optim.self, next, t->net, &ts);
    if (st == GS_OK) st = train_meta_save(t, next, data, epoch);
    if (st == GS_OK) train_profile_save(t);
    if (st == GS_OK && rename(next, path) != 0)
      st = gs_error(GS_ERR_IO, "%s: cannot rename %s over it: %s", path, next, strerror(errno));
  }
  if (gs_train_agree_status(&t->workers, st)) return 1;
  commit_ranks(t);
  return 0;
}

/* The checkpoint directory, on rank 0 (which writes it; created here). */
static gs_status check_checkpoint_dir(const train_ctx *t) {
  const char *dir = t->cfg->checkpoint_dir;
  const char *opt = train_option(t->cfg, "checkpoint_dir");
  struct stat sb;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return gs_error(GS_ERR_IO, "%s %s: cannot create the directory: %s", opt, dir,
                    strerror(errno));
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return gs_error(GS_ERR_IO, "%s %s: not a directory", opt, dir);
  if (access(dir, W_OK | X_OK) != 0)
    return gs_error(GS_ERR_IO, "%s %s: cannot write there: %s", opt, dir, strerror(errno));
  char what[4200];
  snprintf(what, sizeof what, "%s %s", opt, dir);
  return gs_train_probe_dir(dir, what);
}

/* Everything the run will write is checked before any work: the checkpoint
 * directory and each rank's timeline. Collective (every rank calls it, st
 * its outcome so far): rank 0's verdict on the directory is every rank's,
 * a usage error (exit 2: a relaunch would not cure it), said once. */
static gs_status check_outputs(const train_ctx *t, gs_status st) {
  if (t->cfg->checkpoint_dir) {
    struct {
      int32_t status;
      char msg[1020];
    } v = {GS_OK, ""};
    if (t->rank == 0 && st == GS_OK && check_checkpoint_dir(t) != GS_OK) {
      v.status = GS_ERR_INVALID_ARG;
      snprintf(v.msg, sizeof v.msg, "%s", gs_last_error());
    }
    if (t->size > 1) {
      gs_status bst = gs_bcast(t->comm, &v, sizeof v, GS_U8, 0, GS_ALGO_AUTO);
      if (bst != GS_OK) return st != GS_OK ? st : bst;
    }
    if (st != GS_OK) return st; /* this rank's own failure first */
    if (v.status != GS_OK) return gs_error(GS_ERR_INVALID_ARG, "%s", v.msg);
  }
  if (st != GS_OK) return st;
  const char *timeline = getenv("GRADSYNC_TIMELINE");
  if (timeline && *timeline && t->sync.ops != &train_sync_engine) {
    /* The timeline is the engine's: a mode with its own exchange has none. */
    if (t->rank == 0)
      train_note(t, "GRADSYNC_TIMELINE: %s %s exchanges without the engine, whose timeline "
                 "it is: none is written", train_option(t->cfg, "sync"), t->sync.ops->name);
    return GS_OK;
  }
  /* A bad path is bad input, exit 2 as the checkpoint directory's and
   * replay's (it was 1, an I/O failure, until 2026-12-06). */
  if (timeline && *timeline && gs_train_check_writable(timeline, "GRADSYNC_TIMELINE") != GS_OK)
    return gs_error(GS_ERR_INVALID_ARG, "%s", gs_last_error());
  return GS_OK;
}

/* ---- The loop ------------------------------------------------------------------------ */

/* Stops training whose averaged gradients are not finite, naming where. */
static gs_status check_finite(train_ctx *t, long epoch, long step) {
  size_t index;
  const char *bad = gs_nn_first_nonfinite_grad(t->net, &index);
  if (bad == NULL) return GS_OK;
  return gs_error(GS_ERR_INVALID_ARG,
                  "training diverged at epoch %ld, step %ld: the averaged gradient "
                  "of %s (the first layer in backward order that is not finite) "
                  "holds a NaN or an infinity; lower %s or check the data",
                  epoch + 1, step + 1, bad, train_option(t->cfg, "lr"));
}

/* A failure inside a step: collectives may be in flight on this rank,
 * which the others are waiting in, so no agreement can reach them. */
static _Noreturn void step_failed(train_ctx *t, long epoch, long step) {
  gs_train_rank_abort(t->ranks, "epoch %ld, step %ld: %s", epoch + 1, step + 1, gs_last_error());
}

static gs_nn_lr_schedule make_schedule(const gs_train_config *c, long steps) {
  gs_nn_lr_schedule sched = {.base_lr = c->lr,
                             .warmup_steps = (long)(c->warmup_epochs * steps),
                             .total_steps = (long)c->epochs * steps};
  if (strcmp(c->schedule, "step") == 0) {
    sched.decay = GS_NN_LR_STEP;
    long third = (long)c->epochs * steps / 3;
    sched.step_size = third > 1 ? third : 1;
    sched.gamma = 0.1f;
  } else if (strcmp(c->schedule, "cosine") == 0) {
    sched.decay = GS_NN_LR_COSINE;
  }
  return sched;
}

/* The extensions' tables: explicit ones first, else by name. */
static gs_status find_extensions(const gs_train_config *c, const train_sync_ops **sync,
                                 const train_optim_ops **optim) {
  *sync = c->sync_ops ? c->sync_ops : train_sync_find(c->sync ? c->sync : "engine");
  if (*sync == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "unknown sync mode '%s' (%s)", c->sync,
                    gs_train_sync_names());
  *optim = c->optim_ops ? c->optim_ops : train_optim_find(c->optimizer ? c->optimizer : "sgd");
  if (*optim == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "unknown optimizer '%s' (sgd or kfac)", c->optimizer);
  if (c->nhooks < 0 || c->nhooks > GS_TRAIN_MAX_HOOKS)
    return gs_error(GS_ERR_INVALID_ARG, "%d step hooks: at most %d", c->nhooks,
                    GS_TRAIN_MAX_HOOKS);
  return GS_OK;
}

/* The step hooks of a run: the configuration's explicit ones, then those its
 * options imply (K-FAC sets itself up in a hook; the straggler is one). */
static gs_status list_hooks(const gs_train_config *c, const train_optim_ops *optim,
                            const train_hook_ops **hooks, int *n) {
  *n = 0;
  for (int i = 0; i < c->nhooks; i++) hooks[(*n)++] = c->hooks[i];
  const train_hook_ops *implied[2];
  int k = 0;
  if (optim == &train_optim_kfac) implied[k++] = &train_hook_kfac;
  if (c->straggler) implied[k++] = &train_hook_straggler;
  for (int i = 0; i < k; i++) {
    if (*n >= GS_TRAIN_MAX_HOOKS)
      return gs_error(GS_ERR_INVALID_ARG, "%d step hooks and %s's: at most %d", c->nhooks,
                      implied[i]->name, GS_TRAIN_MAX_HOOKS);
    hooks[(*n)++] = implied[i];
  }
  return GS_OK;
}

/* Prefixes the last error with the field's name (a copy first: gs_error
 * writes where gs_last_error points). */
static gs_status field_error(const gs_train_config *c, const char *field, const char *sep) {
  char why[1024];
  snprintf(why, sizeof why, "%s", gs_last_error());
  return gs_error(GS_ERR_PARSE, "%s%s%s", train_option(c, field), sep, why);
}

gs_status gs_train_config_check(const gs_train_config *c) {
  if (c->sync_ops == NULL && c->sync && train_sync_check(c->sync) != GS_OK)
    return field_error(c, "sync", ": ");
  if (c->optim_ops == NULL && c->optimizer && train_optim_find(c->optimizer) == NULL)
    return gs_error(GS_ERR_PARSE, "%s '%s' must be sgd or kfac", train_option(c, "optimizer"),
                    c->optimizer);
  if (c->schedule && strcmp(c->schedule, "const") && strcmp(c->schedule, "step") &&
      strcmp(c->schedule, "cosine"))
    return gs_error(GS_ERR_PARSE, "%s '%s' must be const, step or cosine",
                    train_option(c, "schedule"), c->schedule);
  if (c->global_batch < 0)
    return gs_error(GS_ERR_PARSE, "%s %d: must be 0 (none) or a sample count",
                    train_option(c, "global_batch"), c->global_batch);
  if (c->precision && strcmp(c->precision, "fp32") && strcmp(c->precision, "bf16"))
    return gs_error(GS_ERR_PARSE, "%s '%s' must be fp32 or bf16",
                    train_option(c, "precision"), c->precision);
  const int commits = c->commit_every > 0 || c->commit_every_s > 0;
  const char *commit_field = c->commit_every > 0 ? "commit_every" : "commit_every_s";
  if (c->commit_every > 0 && c->commit_every_s > 0)
    return gs_error(GS_ERR_PARSE, "commit_every %ld and commit_every_s %g: give steps or "
                    "seconds, not both", c->commit_every, c->commit_every_s);
  if (!(c->commit_every_s >= 0) || c->commit_every_s > 1e9)
    return gs_error(GS_ERR_PARSE, "%s %g: must be 0 (none) or seconds up to 1e9",
                    train_option(c, "commit_every_s"), c->commit_every_s);
  if ((commits || c->stop_at_step > 0) && !c->checkpoint_dir)
    return gs_error(GS_ERR_PARSE, "%s needs %s (where commits go)",
                    train_option(c, commits ? commit_field : "stop_at_step"),
                    train_option(c, "checkpoint_dir"));
  const train_sync_ops *so = c->sync_ops ? c->sync_ops : train_sync_find(c->sync ? c->sync
                                                                               : "engine");
  if ((commits || c->stop_at_step > 0) && so && so->epoch_done)
    return gs_error(GS_ERR_PARSE, "%s %s: its workers run different step counts, so no step "
                    "is common to %s at (it commits at epochs' ends: leave %s out)",
                    train_option(c, "sync"), c->sync_ops ? so->name : c->sync,
                    commits ? "commit" : "stop",
                    train_option(c, commits ? commit_field : "stop_at_step"));
  /* What travels through the engine only: under a sync mode with its own
   * exchange (parameter servers, local SGD) it would be silently unused. */
  const int engine = so == NULL || so == &train_sync_engine;
  gs_compress_spec z = {.off = 1};
  if (c->compress && gs_compress_spec_parse(c->compress, &z) != GS_OK)
    return field_error(c, "compress", " ");
  if (!engine && !z.off)
    return gs_error(GS_ERR_PARSE, "%s %s: compression is the engine's, and %s %s exchanges "
                    "through its own %s: leave it out", train_option(c, "compress"),
                    c->compress, train_option(c, "sync"), so->name,
                    c->ps_servers > 0 ? "parameter servers" : "averaging");
  if (engine && !z.off && c->policy) {
    gs_plan_policy pol;
    if (gs_plan_policy_parse(c->policy, &pol) == GS_OK &&
        gs_plan_policy_check_compress(&pol, &z) != GS_OK) {
      char why[1024];
      snprintf(why, sizeof why, "%s", gs_last_error());
      return gs_error(GS_ERR_PARSE, "%s %s with %s %s: %s", train_option(c, "compress"),
                      c->compress, train_option(c, "policy"), c->policy, why);
    }
  }
  if (c->compress_warmup_steps > 0 && !z.off && !z.warmup)
    return gs_error(GS_ERR_PARSE, "%s: %s has no density warm-up (topk, mstopk and dgc do)",
                    train_option(c, "compress_warmup_steps"), z.kind);
  if (c->ps_servers > 0 && ((c->optim_ops && c->optim_ops == &train_optim_kfac) ||
                            (!c->optim_ops && c->optimizer && strcmp(c->optimizer, "kfac") == 0)))
    return gs_error(GS_ERR_PARSE, "%s kfac with %s: K-FAC needs every rank to train and "
                    "exchange its factors, and parameter servers train none",
                    train_option(c, "optimizer"), train_option(c, "ps_servers"));
  if (c->commit_every < 0 || c->stop_at_step < 0)
    return gs_error(GS_ERR_PARSE, "%s %ld: must be 0 (none) or a step count",
                    train_option(c, c->commit_every < 0 ? "commit_every" : "stop_at_step"),
                    c->commit_every < 0 ? c->commit_every : c->stop_at_step);
  if (c->straggler) {
    int r;
    double f, d;
    long a, b;
    if (train_straggler_parse(c->straggler, &r, &f, &d, &a, &b) != GS_OK)
      return field_error(c, "straggler", " ");
  }
  return GS_OK;
}

/* A commit inside the epoch after its step `step` (0-based), collective over
 * the workers: every pending update applied (the sync mode's flush), then
 * the checkpoint, whose train state says the epoch is unfinished and how
 * many global steps are done. Returns 0, or 1 on every worker. */
static int commit_step(train_ctx *t, const train_data_id *data, long epoch, long step,
                       long samples_in_epoch) {
  double c0 = gs_now();
  const train_sync_ops *y = t->sync.ops;
  if (y->commit_flush ? y->commit_flush(t->sync.self) != GS_OK
                      : y->flush && y->flush(t->sync.self) != GS_OK)
    step_failed(t, epoch, step);
  t->save_samples_in_epoch = samples_in_epoch;
  const long global = epoch * t->steps_per_epoch + step + 1;
  int rc;
  if (bg_capable(t)) {
    /* The previous commit's outcome first: this one replaces it. Then the
     * per-rank files, before the checkpoint that needs them. */
    rc = bg_settle(t);
    if (!rc) rc = save_ranks(t, global);
    gs_status st = !rc && t->rank == 0 ? bg_start(t, data, epoch, global) : GS_OK;
    if (!rc) rc = gs_train_agree_status(&t->workers, st);
  } else {
    rc = save_checkpoint(t, data, epoch, global);
  }
  if (y->commit_done) y->commit_done(t->sync.self);
  t->save_samples_in_epoch = 0;
  t->commits++;
  t->commit_t = gs_now();
  t->commit_s += t->commit_t - c0;
  return rc;
}

/* The first step of an epoch of `steps` whose samples before position g0
 * of its permutation are done (a commit inside it): the steps left from g0
 * at this world size (global samples a step) are counted as the epoch's
 * last ones, by the schedule too. */
static long epoch_first_step(long steps, long n, long g0, long global) {
  long left = (n - g0) / global;
  if (left > steps - g0 / global) left = steps - g0 / global;
  if (left < 0) left = 0; /* a smaller global batch's commit may leave no full step */
  return steps - left;
}

/* The steps of one epoch from step `first` (whose samples start at
 * position g0 of the epoch's permutation), then its flush: returns the
 * status (divergence, which every rank sees at the same step) for the
 * caller to agree on. Failures that cannot be agreed on end the job. */
static gs_status run_epoch(train_ctx *t, train_batches *batches,
                           const gs_nn_lr_schedule *sched, long epoch, long first, long g0,
                           const train_data_id *data, int *stopped, long *done,
                           double *loss_sum, long *correct, long *seen, double *steps_s,
                           double e0, const gs_train_stats *s0) {
  const gs_train_config *c = t->cfg;
  const long steps = t->steps_per_epoch;
  const int owns_step = t->sync.ops->owns_step;
  /* By samples (the sync mode's epoch_done): as many steps as it takes. */
  const int by_samples = t->sync.ops->epoch_done != NULL;
  gs_status st = GS_OK;
  long step = first;
  for (; by_samples || step < steps; step++) {
    double s_start = gs_now();
    float *x = NULL;
    int32_t *y = NULL;
    if (train_batches_get(batches, step - first, by_samples ? LONG_MAX : steps - first, &x,
                          &y) != GS_OK)
      step_failed(t, epoch, step);
    /* The schedule's position: a worker past the epoch's steps stays at
     * its last one. */
    long in_epoch = step < steps ? step : steps - 1;
    train_step ts = {.epoch = epoch, .step = step, .global_step = epoch * steps + in_epoch,
                     .steps_per_epoch = steps, .batch = t->batch, .x = x, .y = y};
    ts.lr = gs_nn_lr_at(sched, ts.global_step);
    float loss = 0;
    int ok = 0;
    if (run_hooks(t, HOOK_BEFORE_FORWARD, &ts) != GS_OK ||
        gs_nn_forward(t->net, x, t->batch, NULL) != GS_OK || callbacks_status(t) != GS_OK)
      step_failed(t, epoch, step);
    /* The forward pass applied the previous step's updates, so the
     * gradient buffers hold that step's averages, the same on every rank:
     * every rank takes the same decision without communicating, with
     * nothing in flight. */
    if (step > first && (st = check_finite(t, epoch, step - 1)) != GS_OK) break;
    if (gs_nn_loss(t->net, y, &loss, &ok) != GS_OK ||
        run_hooks(t, HOOK_AFTER_FORWARD, &ts) != GS_OK ||
        run_hooks(t, HOOK_BEFORE_BACKWARD, &ts) != GS_OK ||
        (t->engine && gs_engine_set_lr(t->engine, ts.lr) != GS_OK) ||
        gs_nn_backward(t->net) != GS_OK ||
        callbacks_status(t) != GS_OK || t->sync.ops->end_backward(t->sync.self, &ts) != GS_OK)
      step_failed(t, epoch, step);
    train_optim_set_lr(&t->optim, ts.lr);
    if (!owns_step && train_optim_step(&t->optim) != GS_OK) step_failed(t, epoch, step);
    if (run_hooks(t, HOOK_AFTER_BACKWARD, &ts) != GS_OK) step_failed(t, epoch, step);
    *steps_s += gs_now() - s_start;
    *loss_sum += loss;
    *correct += ok;
    *seen += t->batch;
    if (by_samples && t->sync.ops->epoch_done(t->sync.self, &ts)) {
      step++;
      break;
    }
    /* Commits between steps (not after the epoch's last: its checkpoint
     * follows the evaluation). A stop asked for at this step commits and
     * leaves the loop: *stopped = 1; a failed commit (agreed on, printed):
     * *stopped = -1. */
    const long global = epoch * steps + step + 1;
    int stop = c->stop_at_step > 0 && global >= c->stop_at_step;
    int commit_point = 0, asked = 0;
    if (step + 1 < steps && c->checkpoint_dir && !stop) {
      if (c->commit_every > 0) {
        commit_point = global % c->commit_every == 0;
        asked = commit_point && agree_stop(t, epoch, step);
      } else if (c->commit_every_s > 0 &&
                 timed_check(t, epoch, step, global, &commit_point, &asked)) {
        report_progress(t, epoch, g0 + (step + 1 - first) * (long)t->batch * t->size,
                        (long)data->samples);
      }
    }
    if (asked) stop = 2; /* asked to (gs_train_request_stop) */
    if (step + 1 < steps && c->checkpoint_dir && (commit_point || stop)) {
      long g = g0 + (step + 1 - first) * (long)t->batch * t->size;
      if (commit_step(t, data, epoch, step, g)) {
        *stopped = -1;
        *done = step + 1;
        train_batches_finish(batches);
        return GS_OK;
      }
      if (stop) {
        *stopped = stop;
        step++;
        break;
      }
    }
    if (step + 1 < steps && train_wants_progress(t)) {
      gs_train_stats s1, d;
      sync_stats(t, &s1);
      d = stats_diff(s0, &s1);
      double el = gs_now() - e0;
      gs_train_progress p = {.epoch = (int)epoch, .epochs = c->epochs, .step = step + 1,
                             .steps = steps, .loss = *loss_sum / (step + 1 - first),
                             .accuracy = (double)*correct / *seen,
                             .samples_per_s = el > 0 ? *seen * t->size / el : 0,
                             .comm_hidden = gs_train_hidden(&d)};
      train_progress(t, &p);
    }
  }
  train_batches_finish(batches);
  *done = step;
  if (st == GS_OK) {
    double f0 = gs_now();
    if (t->sync.ops->flush && t->sync.ops->flush(t->sync.self) != GS_OK)
      step_failed(t, epoch, step - 1);
    *steps_s += gs_now() - f0;
    st = check_finite(t, epoch, step - 1);
  }
  return st;
}

void train_epoch_indices(const size_t *perm, long g0, int size, int rank, int batch,
                         long nsteps, size_t *out) {
  const long global = (long)size * batch;
  for (long i = 0; i < nsteps; i++)
    for (int j = 0; j < batch; j++)
      out[i * batch + j] = perm[g0 + i * global + (long)j * size + rank];
}

/* The workers' part, after set-up: the epochs. Returns 0 or 1 (agreed). */
static int train_epochs(train_ctx *t, const gs_nn_dataset *train, const gs_nn_dataset *test,
                        const train_data_id *data, long start_epoch, gs_train_result *res) {
  const gs_train_config *c = t->cfg;
  gs_nn_sampler sampler = {0};
  train_batches *batches = NULL;
  size_t *idx = NULL;
  int rc = 1;
  /* Every step takes the next global batch of the epoch's permutation
   * (the same on every rank), rank r every size-th sample of it from r:
   * keyed by the position in the permutation, an epoch uses each sample
   * once whatever world sizes run its parts (train_epoch_indices). */
  const long global = (long)t->batch * t->size, n = (long)train->n;
  long steps = n / global;
  if (c->max_steps > 0 && steps > c->max_steps) steps = c->max_steps;
  gs_status st = gs_nn_sampler_init(&sampler, train->n, 0, 1, c->seed, 0);
  if (st == GS_OK && steps == 0)
    st = gs_error(GS_ERR_INVALID_ARG, "%ld samples give no full step of %ld (%d ranks x %d)",
                  n, global, t->size, t->batch);
  if (st == GS_OK) {
    idx = gs_malloc((size_t)steps * (size_t)t->batch * sizeof *idx);
    if (idx == NULL)
      st = gs_error(GS_ERR_NOMEM, "out of memory for %ld steps' sample indices", steps);
  }
  if (st == GS_OK)
    st = train_batches_create(&batches, train, t->batch, gs_nn_input_size(t->net),
                              c->prefetch);
  if (gs_train_agree_status(&t->workers, st)) goto out;
  /* The ranks must run the same collectives: the same number of steps. */
  const int64_t shared[] = {steps};
  static const char *const shared_names[] = {"the steps per epoch"};
  if (gs_train_agree_equal(&t->workers, shared, shared_names, 1)) goto out;
  t->steps_per_epoch = steps;
  /* A density warm-up the run never finishes trains at lower densities
   * throughout: allowed (a short trial of a long job's settings), said. */
  if (t->rank == 0 && c->compress && c->compress_warmup_steps > (long)c->epochs * steps)
    train_note(t, "%s %ld is longer than the run (%ld steps): the density never reaches "
               "the spec's", train_option(c, "compress_warmup_steps"),
               (long)c->compress_warmup_steps, (long)c->epochs * steps);

  /* A commit inside an epoch resumes at its position: the samples of the
   * permutation done (by whatever world size). */
  long g0 = t->resume_samples_in_epoch;
  res->resumed_samples = g0;
  if (g0 < 0 || g0 >= n)
    st = gs_error(GS_ERR_INVALID_ARG, "%s: the checkpoint in %s is at sample %ld of an epoch "
                  "of %ld", train_option(c, "resume"), c->checkpoint_dir, g0, n);
  /* A stop at a step the checkpoint is at or past would train on past it. */
  const long resumed_at = start_epoch * steps + epoch_first_step(steps, n, g0, global);
  if (st == GS_OK && c->stop_at_step > 0 && t->resume_step >= 0 &&
      resumed_at >= c->stop_at_step)
    st = gs_error(GS_ERR_INVALID_ARG, "%s %ld: the checkpoint in %s resumes after global step "
                  "%ld, at or past it: nothing to train before the stop (give a later step, "
                  "or none)", train_option(c, "stop_at_step"), c->stop_at_step,
                  c->checkpoint_dir, resumed_at);
  if (st == GS_OK && c->stop_at_step > (long)c->epochs * steps)
    st = gs_error(GS_ERR_INVALID_ARG, "%s %ld: the run has %ld steps (%d epoch%s of %ld at "
                  "this world size): it would never stop there", train_option(c, "stop_at_step"),
                  c->stop_at_step, (long)c->epochs * steps, c->epochs, c->epochs == 1 ? "" : "s",
                  steps);
  /* Refused alike by every worker: said once, the usage exit (2). */
  int agreed = gs_train_agree_outcome(&t->workers, st);
  if (agreed) {
    rc = agreed;
    goto out;
  }
  /* Timed commits count from here; the first check comes after one step. */
  t->commit_t = t->check_t = gs_now();
  t->check_step = resumed_at;
  t->next_check = resumed_at + 1;
  gs_nn_lr_schedule sched = make_schedule(c, steps);
  if (c->scale_lr_linear) sched.base_lr *= (float)t->size / (float)t->base_ranks;
  /* No epoch's end, no evaluation: the accuracy is NAN (null, "-"), not 0
   * (a stop inside the first epoch, a resume with nothing left). */
  double t_start = gs_now(), train_s = 0, last_acc = NAN, compute_s = 0;
  long images = 0;
  gs_train_stats first_stats;
  sync_stats(t, &first_stats);
  for (long epoch = start_epoch; epoch < c->epochs; epoch++) {
    st = gs_nn_sampler_set_epoch(&sampler, epoch);
    if (gs_train_agree_status(&t->workers, st)) goto out;
    double e0 = gs_now(), loss_sum = 0, steps_s = 0;
    long correct = 0, seen = 0;
    gs_train_stats s0, s1;
    sync_stats(t, &s0);
    const long first = epoch_first_step(steps, n, g0, global), left = steps - first;
    train_epoch_indices(sampler.perm, g0, t->size, t->rank, t->batch, left, idx);
    train_batches_start(batches, idx, left);
    long done = 0;
    int stopped = 0;
    st = run_epoch(t, batches, &sched, epoch, first, g0, data, &stopped, &done, &loss_sum,
                   &correct, &seen, &steps_s, e0, &s0);
    if (stopped < 0) goto out; /* a failed commit, agreed on */
    if (gs_train_agree_status(&t->workers, st)) goto out;
    double epoch_s = gs_now() - e0;
    train_s += epoch_s;
    /* The samples of every worker (they may have run different steps). */
    int64_t all_seen = seen;
    if (t->sync.ops->epoch_done) {
      st = gs_allreduce(t->comm, GS_IN_PLACE, &all_seen, 1, GS_I64, GS_SUM, GS_ALGO_MPI);
      if (gs_train_agree_status(&t->workers, st)) goto out;
    } else {
      all_seen *= t->size;
    }
    /* A stop's part of the epoch counts in the throughput and the compute
     * as a whole epoch does (until 2026-12-06 its time did, its images
     * not). */
    images += all_seen;
    sync_stats(t, &s1);
    gs_train_stats d = stats_diff(&s0, &s1);
    compute_s += steps_s - d.wait_s;
    if (stopped) {
      res->stopped_at_step = epoch * steps + done;
      res->stop_requested = stopped == 2;
      train_note(t, "stopped after global step %ld (committed in %s%s)", res->stopped_at_step,
                 c->checkpoint_dir, stopped == 2 ? ", as asked" : "");
      break;
    }
    done -= first;
    /* The epoch's samples from every worker's count, not this one's steps
     * times the global batch: under ASP and SSP the workers run different
     * numbers of steps (done * global when they run the same). */
    const long epoch_samples = g0 + (long)all_seen;
    g0 = 0;
    double acc = 0, test_loss = 0;
    if (evaluate(t, test, &acc, &test_loss)) goto out;
    if (c->checkpoint_dir && save_checkpoint(t, data, epoch + 1, (epoch + 1) * steps))
      goto out;
    t->commit_t = gs_now();
    last_acc = acc;
    res->epochs_done = epoch + 1;
    gs_train_progress p = {.epoch = (int)epoch, .epochs = c->epochs, .step = steps,
                           .steps = steps, .loss = done > 0 ? loss_sum / done : NAN,
                           .accuracy = seen > 0 ? (double)correct / seen : NAN,
                           .samples_per_s = all_seen / epoch_s,
                           .comm_hidden = gs_train_hidden(&d), .final = 1};
    train_progress(t, &p);
    gs_train_epoch ep = {.epoch = epoch + 1, .seconds = epoch_s,
                         .train_loss = done > 0 ? loss_sum / done : NAN,
                         .test_loss = test_loss, .test_accuracy = acc,
                         .samples_per_s = all_seen / epoch_s, .comm = d,
                         .samples = epoch_samples, .dataset_samples = n};
    train_epoch_done(t, &ep);
    /* A stop at the epoch's last step: its commit is the epoch's end, just
     * written (run_epoch leaves the last step to it; the run went on into
     * the next epoch's first step). */
    if (c->stop_at_step > 0 && (epoch + 1) * steps >= c->stop_at_step &&
        epoch + 1 < c->epochs) {
      res->stopped_at_step = (epoch + 1) * steps;
      train_note(t, "stopped after global step %ld (committed in %s)", res->stopped_at_step,
                 c->checkpoint_dir);
      break;
    }
    if (c->checkpoint_dir && epoch + 1 < c->epochs && agree_stop(t, epoch, steps - 1)) {
      res->stopped_at_step = (epoch + 1) * steps;
      res->stop_requested = 1;
      train_note(t, "stopped after epoch %ld (committed in %s, as asked)", epoch + 1,
                 c->checkpoint_dir);
      break;
    }
  }
  /* The last commit is on disk before the run reports (and before a stop's
   * exit tells a supervisor to resume from it). */
  if (bg_capable(t) && bg_settle(t)) goto out;
  gs_train_stats last;
  sync_stats(t, &last);
  gs_train_stats all = stats_diff(&first_stats, &last);
  gs_train_breakdown_add(&res->breakdown, "compute", compute_s > 0 ? compute_s : 0);
  gs_train_breakdown_add(&res->breakdown, "comm", all.comm_s);
  gs_train_breakdown_add(&res->breakdown, "exposed_comm", all.wait_s);
  if (t->commits > 0) gs_train_breakdown_add(&res->breakdown, "commit", t->commit_s);
  res->commits = t->commits;
  res->commit_s = t->commit_s;
  if (t->sync.ops->breakdown) t->sync.ops->breakdown(t->sync.self, &res->breakdown);
  if (t->optim.ops->breakdown) t->optim.ops->breakdown(t->optim.self, &res->breakdown);
  for (int i = 0; i < t->nhooks; i++)
    if (t->hooks[i].ops->breakdown) t->hooks[i].ops->breakdown(t->hooks[i].self, &res->breakdown);
  res->sync = last;
  res->test_accuracy = last_acc;
  train_summary(t, train_s, gs_now() - t_start, images, last_acc, &last, res);
  rc = 0;
out:
  (void)bg_join(t); /* after an agreed failure: the outcome no longer matters */
  train_batches_destroy(batches);
  gs_nn_sampler_free(&sampler);
  gs_free(idx);
  return rc;
}

/* The ranks that train: the job's less its parameter servers (at least 1
 * once check_job_size has passed). */
static int train_workers(const gs_train_config *c, int size) {
  int w = size - (c->ps_servers > 0 ? c->ps_servers : 0);
  return w > 0 ? w : 1;
}

/* Everything each rank does alone before the first collective phase:
 * data, model, optimizer, checkpoint; then the outputs, whose checkpoint
 * directory rank 0 judges for every rank (check_outputs: one broadcast,
 * which every rank reaches whatever failed before it). */
static gs_status setup_local(train_ctx *t, gs_nn_dataset *train, gs_nn_dataset *test,
                             int loaded, train_data_id *data, long *start_epoch) {
  const gs_train_config *c = t->cfg;
  const train_sync_ops *sync_ops = NULL;
  const train_optim_ops *optim_ops = NULL;
  gs_status st = find_extensions(c, &sync_ops, &optim_ops);
  t->sync.ops = sync_ops;
  if (st == GS_OK && !loaded) st = train_load_data(c, train, test);
  if (st == GS_OK) st = train_check_data(c, train, 1);
  if (st == GS_OK) st = train_check_data(c, test, 0);
  /* A training set without one full step is the inputs' fault: refused
   * here, alike on every rank (exit 2, said once), not by the loop's
   * agreement (exit 1 until 2026-12-06). t->size is still the job's. */
  if (st == GS_OK) {
    const int workers = train_workers(c, t->size);
    const long global = (long)t->batch * workers;
    if ((long)train->n < global)
      st = gs_error(GS_ERR_INVALID_ARG, "%ld samples give no full step of %ld (%d %s x %d)",
                    (long)train->n, global, workers,
                    c->ps_servers > 0 ? (workers == 1 ? "worker" : "workers")
                                      : (workers == 1 ? "rank" : "ranks"),
                    t->batch);
  }
  if (st == GS_OK && c->checkpoint_dir)
    train_data_identify(c, train, t->data_crc_known ? &t->data_crc : NULL, data);
  gs_nn_model_options mopt = {.c = GS_TRAIN_IN_C, .h = GS_TRAIN_IN_H, .w = GS_TRAIN_IN_W,
                              .classes = GS_TRAIN_CLASSES, .dropout = c->dropout};
  if (st == GS_OK) st = gs_nn_model_create(&t->net, c->model, t->batch, c->seed, &mopt);
  if (st == GS_OK && c->precision && gs_nn_set_precision(t->net, c->precision) != GS_OK) {
    char why[256];
    snprintf(why, sizeof why, "%s", gs_last_error());
    st = gs_error(GS_ERR_UNSUPPORTED, "%s %s: %s", train_option(c, "precision"),
                  c->precision, why);
  }
  if (st == GS_OK) {
    t->nparams = gs_nn_param_count(t->net);
    t->optim.ops = optim_ops;
    st = optim_ops->create(t, &t->optim.self);
    if (st != GS_OK) t->optim.ops = NULL;
  }
  char path[4096] = "";
  if (c->checkpoint_dir) checkpoint_path(c, path, sizeof path);
  /* GS_TRAIN_RESUME_IF_ANY: a first run starts afresh (every rank looks at
   * the same directory; the ranks then agree on the start). */
  int resume = c->resume == 1 || (c->resume == GS_TRAIN_RESUME_IF_ANY && access(path, F_OK) == 0);
  /* A plain --resume with nothing to resume is bad input (exit 2): a
   * restart would not cure it. */
  if (st == GS_OK && c->resume == 1 && access(path, F_OK) != 0)
    st = gs_error(GS_ERR_INVALID_ARG,
                  "%s: there is no checkpoint to resume from (%s: %s); %s=auto starts "
                  "afresh when there is none",
                  train_option(c, "resume"), path, strerror(errno), train_option(c, "resume"));
  if (st == GS_OK && resume) {
    gs_nn_train_state ts;
    st = train_meta_check_model(t);
    if (st == GS_OK) st = t->optim.ops->load(t->optim.self, path, t->net, &ts);
    if (st == GS_OK) st = train_meta_check(t, path, data, (long)ts.epoch);
    /* Per-rank state (K-FAC's factors) is of the ranks that wrote it: on
     * another world size it starts afresh (the factors are recomputed from
     * the next steps). */
    if (st == GS_OK && t->optim.ops->load_rank)
      st = t->optim.ops->load_rank(t->optim.self, c->checkpoint_dir, t->rank, t->size,
                                   (long)ts.step, t->resume_ranks);
    if (st == GS_OK && t->resume_ranks != t->size && t->optim.ops->load_rank)
      train_note(t, "resume: %s's per-rank state is of %d ranks, not %d: it starts afresh",
                 t->optim.ops->name, t->resume_ranks, t->size);
    if (st == GS_OK) {
      *start_epoch = ts.epoch;
      t->resume_step = (long)ts.step;
    }
    /* A checkpoint or description that cannot be parsed (truncated,
     * corrupt, not JSON) is a failure of the run's files, exit 1 as an
     * unreadable one is, not the usage exit that the agreement gives
     * GS_ERR_PARSE: the options are not at fault (until 2026-12-06 exit 2,
     * "(see --help)"). A checkpoint that does not fit the run stays
     * GS_ERR_INVALID_ARG, exit 2. */
    if (st == GS_ERR_PARSE) st = gs_error(GS_ERR_IO, "%s", gs_last_error());
  }
  return check_outputs(t, st);
}

/* Options that name ranks, checked against the job's size before anything
 * is loaded: every rank has the same options and size, so every rank finds
 * the same answer, and rank 0 alone says it. GS_OK or GS_ERR_INVALID_ARG
 * with the message. */
static gs_status check_job_size(const gs_train_config *c, int size) {
  const int servers = c->ps_servers > 0 ? c->ps_servers : 0, workers = size - servers;
  const char *ps = train_option(c, "ps_servers"), *strag = train_option(c, "straggler");
  if (c->scale_lr_linear && c->ps_servers > 0)
    return gs_error(GS_ERR_INVALID_ARG, "%s with %s: a parameter-server job resized keeps "
                    "its global batch (%s) instead", train_option(c, "scale_lr_linear"), ps,
                    train_option(c, "global_batch"));
  /* The workers share the global batch (the servers train on none). */
  if (c->global_batch > 0 && workers >= 1 && c->global_batch % workers != 0) {
    char fits[256] = "";
    size_t len = 0;
    for (int w = 1; w <= c->global_batch && w + servers <= 4 * size && len < sizeof fits; w++)
      if (c->global_batch % w == 0) {
        int k = snprintf(fits + len, sizeof fits - len, "%s%d", len ? ", " : "", w + servers);
        len += k > 0 ? (size_t)k : 0;
      }
    if (servers > 0)
      return gs_error(GS_ERR_INVALID_ARG, "%s %d: %d ranks less %s %d leave %d workers, who "
                      "cannot share it equally (world sizes that can, up to %d: %s)",
                      train_option(c, "global_batch"), c->global_batch, size, ps, servers,
                      workers, 4 * size, fits);
    return gs_error(GS_ERR_INVALID_ARG, "%s %d: %d ranks cannot share it equally (world sizes "
                    "that can, up to %d: %s)", train_option(c, "global_batch"), c->global_batch,
                    size, 4 * size, fits);
  }
  if (c->ps_servers > 0 && workers < 1 && size == 1)
    return gs_error(GS_ERR_INVALID_ARG, "%s %d: a job of 1 rank can have no parameter "
                    "server (a server needs at least one worker rank beside it)", ps,
                    c->ps_servers);
  if (c->ps_servers > 0 && workers < 1)
    return gs_error(GS_ERR_INVALID_ARG, "%s %d: a job of %d ranks can have at most %d "
                    "parameter server%s (at least one rank must be a worker)", ps,
                    c->ps_servers, size, size - 1, size - 1 == 1 ? "" : "s");
  if (c->straggler) {
    int r = -1;
    double f, d;
    long a, b;
    gs_status st = train_straggler_parse(c->straggler, &r, &f, &d, &a, &b);
    if (st != GS_OK) return st;
    if (r >= workers && c->ps_servers > 0 && r < size)
      return gs_error(GS_ERR_INVALID_ARG, "%s %s: rank %d is a parameter server, "
                      "not a worker: this job's workers are ranks 0 to %d (%s %d makes "
                      "the last %d rank%s servers)", strag, c->straggler, r, workers - 1, ps,
                      c->ps_servers, c->ps_servers, c->ps_servers == 1 ? "" : "s");
    if (r >= workers)
      return gs_error(GS_ERR_INVALID_ARG, "%s %s: this job has no rank %d "
                      "(its ranks are 0 to %d)", strag, c->straggler, r, size - 1);
  }
  return GS_OK;
}

/* A parameter-server job's outcome on every rank, once the servers have
 * served (every rank passes here, after the workers' gs_ps_finish): the
 * workers' checks after the servers split off (a --stop-at-step past the
 * run, a checkpoint's position) refuse the run as usage (2) on the workers
 * alone, so a server that served well takes their 2. Until 2026-12-07 it
 * ended with 1 ("stopping: ranks 0, 1 failed"), and the job's exit was 1 or
 * 2 by whichever rank mpirun named first. */
static int servers_outcome(const gs_train_ranks *ranks, int rc) {
  const int32_t mine[2] = {rc != 0 && rc != 2, rc == 2};
  int32_t any[2] = {0, 0};
  if (ranks->comm == NULL) return rc;
  if (gs_allreduce(ranks->comm, mine, any, 2, GS_I32, GS_MAX, GS_ALGO_AUTO) != GS_OK)
    return rc ? rc : 1;
  return rc == 0 && any[1] && !any[0] ? 2 : rc;
}

int gs_train_run(const gs_train_config *cfg, const gs_train_ranks *ranks, gs_train_result *result) {
  gs_train_result local_result;
  gs_train_result *res = result ? result : &local_result;
  memset(res, 0, sizeof *res);
  /* One compute thread per rank unless the caller chose (gs_nn_set_threads):
   * ranks usually share a machine's cores, and oneDNN's multi-threaded
   * kernels gave other bits from run to run (tests/train/test_two_jobs.c). */
  if (gs_nn_threads() == 0) gs_nn_set_threads(1);
  if (gs_train_config_check(cfg) != GS_OK || check_job_size(cfg, ranks->size) != GS_OK) {
    if (ranks->rank == 0) {
      gs_train_ranks whole = *ranks;
      whole.size = 0; /* the job's options: no rank prefix */
      gs_train_rank_error(&whole, "%s%s", gs_last_error(),
                          ranks->usage_note ? ranks->usage_note : "");
    }
    return 2;
  }
  train_ctx ctx = {.cfg = cfg, .ranks = ranks, .comm = ranks->comm, .rank = ranks->rank,
                   .size = ranks->size, .base_ranks = ranks->size, .resume_ranks = ranks->size,
                   .resume_step = -1,
                   .batch = cfg->global_batch > 0 ? cfg->global_batch / train_workers(cfg, ranks->size)
                                                  : cfg->batch};
  train_ctx *t = &ctx;
  gs_nn_dataset train = {0}, test = {0};
  train_data_id data;
  memset(&data, 0, sizeof data);
  long start_epoch = 0;
  int rc = 1;

  gs_status st = GS_OK;
  t->data_origin = "source";
  /* The cache's agreed failure is 2 for bad input (a directory it cannot
   * use, a missing or truncated data set), as without the cache; until
   * 2026-12-07 every failure there ended the run with 1. */
  int cached = cfg->data_cache ? train_data_cached(t, &train, &test, &st) : 0;
  if (cached) {
    rc = cached;
    goto out;
  }
  if (st == GS_OK) st = setup_local(t, &train, &test, cfg->data_cache != NULL, &data,
                                    &start_epoch);
  /* A checkpoint that does not fit the run is refused alike by every rank:
   * said once, and the usage exit (2). */
  int agreed = gs_train_agree_outcome(ranks, st);
  if (agreed) {
    rc = agreed;
    goto out;
  }
  /* The ranks must run the same collectives: the same parameters and the
   * same epochs. */
  const int64_t shared[] = {(int64_t)gs_nn_param_total(t->net), cfg->epochs, start_epoch};
  const char *const shared_names[] = {"the parameter count", train_option(cfg, "epochs"),
                                      "the checkpoint's epoch"};
  if (gs_train_agree_equal(ranks, shared, shared_names, 3)) goto out;
  if (start_epoch >= cfg->epochs)
    train_note(t, "the checkpoint in %s is at epoch %ld: nothing left to train",
               cfg->checkpoint_dir, start_epoch);
  res->epochs_done = start_epoch;

  /* Every replica starts from rank 0's weights; then the sync mode and the
   * hooks are set up. */
  st = gs_bcast(t->comm, gs_nn_weights_flat(t->net), gs_nn_param_total(t->net), GS_F32, 0,
                GS_ALGO_AUTO);
  if (st == GS_OK) {
    st = t->sync.ops->create(t, &t->sync.self);
    if (st == GS_OK) set_callbacks(t, 1);
  }
  /* The sync mode's per-rank state (the compressor memory) comes back once
   * the mode exists: each rank's own, or on another world size a rule of
   * the mode's (a missing or corrupt file is an error naming it). */
  if (st == GS_OK && t->resume_step >= 0 && t->sync.ops->load_rank)
    st = t->sync.ops->load_rank(t->sync.self, cfg->checkpoint_dir, t->resume_step,
                                t->resume_sync_files);
  t->workers = (gs_train_ranks){.job = ranks->job, .comm = t->comm, .rank = t->rank,
                                .size = t->size, .usage_note = ranks->usage_note};
  const train_hook_ops *hooks[GS_TRAIN_MAX_HOOKS];
  int nhooks = 0;
  if (st == GS_OK) st = list_hooks(cfg, t->optim.ops, hooks, &nhooks);
  for (int i = 0; i < nhooks && st == GS_OK; i++) {
    t->hooks[i].ops = hooks[i];
    st = hooks[i]->create ? hooks[i]->create(t, &t->hooks[i].self) : GS_OK;
    t->nhooks = i + 1;
  }
  if (gs_train_agree_status(ranks, st)) goto out;
  t->serving = 1;

  if (t->sync.ops->is_worker && !t->sync.ops->is_worker(t->sync.self)) {
    /* Not a worker (a server): the mode runs this rank's part. */
    st = t->sync.ops->serve(t->sync.self);
    if (st != GS_OK) gs_train_rank_error(ranks, "%s", gs_last_error());
    rc = st != GS_OK;
    goto out;
  }
  rc = train_epochs(t, &train, &test, &data, start_epoch, res);
  if (rc == 0 && result) {
    size_t n = gs_nn_param_total(t->net);
    res->weights = gs_malloc(n * sizeof(float));
    if (res->weights) {
      memcpy(res->weights, gs_nn_weights_flat(t->net), n * sizeof(float));
      res->nweights = n;
    }
  }
out:
  /* Every path here has nothing in flight on any rank: destroying the
   * extensions issues no collective (the engine writes its timeline, which
   * can fail alone: the caller's final agreement covers that). */
  for (int i = t->nhooks - 1; i >= 0; i--)
    if (t->hooks[i].ops->destroy) t->hooks[i].ops->destroy(t->hooks[i].self);
  if (t->sync.self && t->sync.ops->destroy(t->sync.self) != GS_OK) {
    gs_train_rank_error(ranks, "%s", gs_last_error());
    rc = 1;
  }
  if (t->optim.ops) t->optim.ops->destroy(t->optim.self);
  gs_nn_net_destroy(t->net);
  gs_nn_dataset_free(&train);
  gs_nn_dataset_free(&test);
  if (t->serving && t->sync.ops && t->sync.ops->servers) rc = servers_outcome(ranks, rc);
  return rc;
}
