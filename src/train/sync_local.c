/* All-reduce relatives of BSP that average parameters, not gradients:
 *
 *   local:H         local SGD: every worker steps on its own gradient and
 *                   the parameters are averaged every H steps (Lin et al.,
 *                   "Don't use large mini-batches, use local SGD", ICLR'20,
 *                   Algorithm 1; also Stich, ICLR'19);
 *   post-local:H[:F]  BSP (gradients averaged every step) for the first
 *                   fraction F of the steps (default 0.5), then local:H
 *                   (Lin et al.'s post-local SGD, which switches after the
 *                   first learning-rate decay);
 *   delayed:D       DaSGD-style delayed averaging (Zhou et al., arXiv
 *                   2006.00441): every D steps the parameters' average is
 *                   started on a snapshot and runs under the next D local
 *                   steps; when it is applied the local progress since the
 *                   snapshot is kept, w <- avg(snapshot) + (w - snapshot).
 *
 * Every rank is a worker; the loop's optimizer steps on the local (or, in
 * post-local's BSP phase, averaged) gradient. Momentum buffers stay local,
 * as in Lin et al., so each rank writes its own beside a checkpoint
 * (DIR/local.rank<R>.step<S>.gsck) and a resumed run of the same size reads
 * it back. The averages run on the loop's gs_comm; flush (before
 * evaluation, an epoch's end and the run's) completes what is in flight and
 * averages once more, so every replica evaluates the same weights.
 *
 * A commit inside an epoch (--commit-every, a stop) changes nothing of the
 * run: the checkpoint gets the replicas' average (the model a user takes
 * from it), but every rank goes on from its own weights, its place in the
 * averaging period and delayed averaging's snapshot and average, which its
 * file keeps beside its momentum; a resumed run of the same size takes them
 * back, so that it equals the run never stopped, bit for bit. Until
 * 2026-12-07 a commit flushed: an extra average and a restarted period
 * changed what the model learnt (tests/apps/test_train_local.sh). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradsync/nn.h"
#include "gs_internal.h"
#include "optim.h"
#include "optim_kfac.h"
#include "sync_ps.h"
#include "train_ctx.h"
#include "train_internal.h"

typedef enum { LOCAL_SGD, LOCAL_POST, LOCAL_DELAYED } local_kind;

typedef struct local_sync {
  train_ctx *t;
  local_kind kind;
  long h;            /* averaging period (steps) */
  double bsp_frac;   /* post-local: BSP share of the steps */
  size_t n;          /* parameters */
  float *w;          /* the net's flat weights */
  float *snap, *avg; /* delayed: the snapshot and its average in flight */
  gs_request *req;   /* delayed: the average in flight, or NULL */
  int have_avg;      /* delayed: avg holds a finished average not yet applied */
  float *own;        /* at a commit: this rank's own weights, while the net
                      * holds the replicas' average for the checkpoint */
  int own_saved;
  long steps;        /* steps done by this launch */
  long since_avg;    /* steps since the last average started */
  int due;           /* average before the next forward */
  long bsp_steps;    /* post-local: BSP steps so far */
  long total_steps;  /* post-local: the run's steps (known at the first step) */
  gs_train_stats st;
  long averages;
  train_rank_files files; /* the per-rank momentum files */
} local_sync;

/* Parses "local:H", "post-local:H[:F]" or "delayed:D". */
gs_status train_local_parse(const char *text, int *kind, long *h, double *frac) {
  const char *rest = NULL;
  *frac = 0.5;
  if (strncmp(text, "local:", 6) == 0) {
    *kind = LOCAL_SGD;
    if (gs__parse_long(text + 6, 1, 1000000, h, &rest) == 0 && *rest == '\0') return GS_OK;
  } else if (strncmp(text, "post-local:", 11) == 0) {
    *kind = LOCAL_POST;
    if (gs__parse_long(text + 11, 1, 1000000, h, &rest) == 0) {
      if (*rest == '\0') return GS_OK;
      if (*rest == ':') {
        if (gs__parse_double(rest + 1, 0.0, 1.0, frac, NULL) == 0) return GS_OK;
      }
    }
  } else if (strncmp(text, "delayed:", 8) == 0) {
    *kind = LOCAL_DELAYED;
    if (gs__parse_long(text + 8, 1, 1000000, h, &rest) == 0 && *rest == '\0') return GS_OK;
  }
  return gs_error(GS_ERR_PARSE,
                  "sync mode '%s': expected local:H, post-local:H[:F] or delayed:D with "
                  "H, D integers >= 1 and F from 0 to 1",
                  text);
}

static gs_status local_destroy(void *self);

static gs_status local_create(train_ctx *t, void **self) {
  local_sync *s = gs_calloc(1, sizeof *s);
  if (!s) return gs_error(GS_ERR_NOMEM, "out of memory for the local SGD sync mode");
  *self = s;
  s->t = t;
  if (t->cfg->ps_servers > 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "%s %s averages parameters by all-reduce: not with %s",
                    train_option(t->cfg, "sync"), t->cfg->sync, train_option(t->cfg, "ps_servers"));
  int kind = 0;
  gs_status st = train_local_parse(t->cfg->sync, &kind, &s->h, &s->bsp_frac);
  if (st != GS_OK) return st;
  s->kind = (local_kind)kind;
  train_rank_files_init(&s->files);
  s->n = gs_nn_param_total(t->net);
  s->w = gs_nn_weights_flat(t->net);
  if (s->kind == LOCAL_DELAYED) {
    s->snap = gs_malloc(s->n * sizeof(float));
    s->avg = gs_malloc(s->n * sizeof(float));
    if (!s->snap || !s->avg)
      return gs_error(GS_ERR_NOMEM, "out of memory for delayed averaging's %zu-parameter buffers",
                      s->n);
  }
  return GS_OK;
}

/* The replicas' average of the weights, in place, counted in the stats. */
static gs_status average_weights(local_sync *s) {
  double t0 = gs_now();
  gs_status st = gs_allreduce(s->t->comm, GS_IN_PLACE, s->w, s->n, GS_F32, GS_AVG, GS_ALGO_AUTO);
  double dt = gs_now() - t0;
  s->st.messages++;
  s->st.bytes += s->n * sizeof(float);
  s->st.comm_s += dt;
  s->st.wait_s += dt;
  return st;
}

/* One of the run's averages (a commit's, which the run does not go on
 * from, is not counted among them). */
static gs_status average_now(local_sync *s) {
  s->averages++;
  return average_weights(s);
}

/* Delayed: waits for the average in flight and applies it with the local
 * progress since its snapshot. */
static gs_status delayed_wait(local_sync *s) {
  if (!s->req) return GS_OK;
  double t0 = gs_now();
  gs_status st = gs_wait(s->req);
  s->req = NULL;
  s->st.wait_s += gs_now() - t0;
  if (st == GS_OK) s->have_avg = 1;
  return st;
}

static gs_status delayed_apply(local_sync *s) {
  gs_status st = delayed_wait(s);
  if (st != GS_OK || !s->have_avg) return st;
  s->have_avg = 0;
  for (size_t i = 0; i < s->n; i++) s->w[i] = s->avg[i] + (s->w[i] - s->snap[i]);
  s->averages++;
  return GS_OK;
}

static gs_status delayed_start(local_sync *s) {
  memcpy(s->snap, s->w, s->n * sizeof(float));
  memcpy(s->avg, s->w, s->n * sizeof(float));
  s->st.messages++;
  s->st.bytes += s->n * sizeof(float);
  return gs_iallreduce(s->t->comm, GS_IN_PLACE, s->avg, s->n, GS_F32, GS_AVG, GS_ALGO_AUTO,
                       &s->req);
}

/* Before forward reads the first tensor of a step: the average that the
 * previous step made due (its update has been applied by now). */
static gs_status local_before_forward(void *self, size_t index) {
  (void)index;
  local_sync *s = self;
  if (!s->due) return GS_OK;
  s->due = 0;
  if (s->kind != LOCAL_DELAYED) return average_now(s);
  double t0 = gs_now();
  gs_status st = delayed_apply(s);
  if (st == GS_OK) st = delayed_start(s);
  s->st.comm_s += gs_now() - t0;
  return st;
}

static gs_status local_grad_ready(void *self, size_t index) {
  (void)self;
  (void)index;
  return GS_OK;
}

static gs_status local_end_backward(void *self, const train_step *step) {
  local_sync *s = self;
  if (s->total_steps == 0) s->total_steps = step->steps_per_epoch * (long)s->t->cfg->epochs;
  s->steps++;
  /* The BSP phase is by the run's position (global_step, which a resumed
   * run continues), not by this launch's steps. */
  if (s->kind == LOCAL_POST &&
      step->global_step + 1 <= (long)(s->bsp_frac * (double)s->total_steps + 0.5)) {
    /* BSP phase: the loop's update uses the gradients' average. */
    double t0 = gs_now();
    gs_status st = gs_allreduce(s->t->comm, GS_IN_PLACE, gs_nn_grads_flat(s->t->net), s->n,
                                GS_F32, GS_AVG, GS_ALGO_AUTO);
    double dt = gs_now() - t0;
    s->st.messages++;
    s->st.bytes += s->n * sizeof(float);
    s->st.comm_s += dt;
    s->st.wait_s += dt;
    s->bsp_steps++;
    s->since_avg = 0;
    return st;
  }
  if (++s->since_avg >= s->h) {
    s->since_avg = 0;
    s->due = 1;
  }
  return GS_OK;
}

static gs_status local_flush(void *self) {
  local_sync *s = self;
  gs_status st = GS_OK;
  s->due = 0;
  s->since_avg = 0;
  if (s->kind == LOCAL_DELAYED) st = delayed_apply(s);
  if (st == GS_OK) st = average_now(s);
  return st;
}

/* A commit inside an epoch: the net holds the replicas' average for the
 * checkpoint, this rank's own weights wait in own (local_commit_done puts
 * them back); delayed averaging's average in flight is finished, not
 * applied (its values do not depend on when it is waited for). */
static gs_status local_commit_flush(void *self) {
  local_sync *s = self;
  gs_status st = s->kind == LOCAL_DELAYED ? delayed_wait(s) : GS_OK;
  if (st != GS_OK) return st;
  if (s->own == NULL && (s->own = gs_malloc(s->n * sizeof(float))) == NULL)
    return gs_error(GS_ERR_NOMEM, "out of memory for a commit's %zu weights", s->n);
  memcpy(s->own, s->w, s->n * sizeof(float));
  s->own_saved = 1;
  return average_weights(s);
}

static void local_commit_done(void *self) {
  local_sync *s = self;
  if (!s->own_saved) return;
  memcpy(s->w, s->own, s->n * sizeof(float));
  s->own_saved = 0;
}

/* The per-rank file: this header, then n floats each of the rank's
 * momentum (flag LOCAL_F_MOMENTUM), its own weights, delayed averaging's
 * snapshot (LOCAL_F_SNAP) and its finished average not yet applied
 * (LOCAL_F_AVG), and the crc32 of all that (gs_nn_file), in host byte
 * order. Version 1 (until 2026-12-07) held the momentum alone. */
static const char MOMENTUM_MAGIC[8] = {'G', 'S', 'L', 'M', 'O', 'M', 0, 0};
#define MOMENTUM_VERSION 2u
enum { LOCAL_F_MOMENTUM = 1, LOCAL_F_SNAP = 2, LOCAL_F_AVG = 4 };

typedef struct {
  char magic[8];
  uint32_t version;
  int32_t rank, size;
  uint32_t flags;
  int64_t step;
  uint64_t count;
  int64_t since_avg; /* steps into the averaging period */
  int32_t due;       /* an average due before the next forward */
  uint32_t reserved;
} momentum_header;

static void momentum_path(char *buf, size_t n, const char *dir, int rank, long step) {
  snprintf(buf, n, "%s/local.rank%d.step%ld.gsck", dir, rank, step);
}

/* The loop's momentum, which stays on its rank: SGD's, or that of K-FAC's
 * update (until 2026-12-07 K-FAC's was not kept here, and every rank of a
 * resumed run went on with rank 0's, from the checkpoint); NULL under
 * another optimizer. */
static float *local_momentum(const local_sync *s) {
  const train_ctx *t = s->t;
  if (t->optim.ops == &train_optim_sgd) return gs_nn_sgd_momentum_flat(t->optim.self);
  if (t->optim.ops == &train_optim_kfac) return train_optim_kfac_momentum(t->optim.self);
  return NULL;
}

/* At a commit point (after flush or commit_flush): this rank's momentum
 * and its own state, beside the checkpoint of step `step` that rank 0
 * writes next (with rank 0's momentum and the replicas' average). */
static gs_status local_save_rank(void *self, const char *dir, long step, int *files) {
  local_sync *s = self;
  const train_ctx *t = s->t;
  *files = 0;
  train_rank_files_saving(&s->files);
  const float *m = local_momentum(s);
  momentum_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, MOMENTUM_MAGIC, sizeof h.magic);
  h.version = MOMENTUM_VERSION;
  h.rank = t->rank;
  h.size = t->size;
  h.flags = (m ? LOCAL_F_MOMENTUM : 0) | (s->kind == LOCAL_DELAYED ? LOCAL_F_SNAP : 0) |
            (s->have_avg ? LOCAL_F_AVG : 0);
  h.step = step;
  h.count = s->n;
  h.since_avg = s->since_avg;
  h.due = s->due;
  char path[4200];
  momentum_path(path, sizeof path, dir, t->rank, step);
  gs_nn_file f;
  gs_status st = gs_nn_file_create(&f, path, "local SGD state");
  if (st != GS_OK) return st;
  const size_t nb = s->n * sizeof(float);
  st = gs_nn_file_write(&f, &h, sizeof h);
  if (st == GS_OK && m) st = gs_nn_file_write(&f, m, nb);
  if (st == GS_OK) st = gs_nn_file_write(&f, s->own_saved ? s->own : s->w, nb);
  if (st == GS_OK && (h.flags & LOCAL_F_SNAP)) st = gs_nn_file_write(&f, s->snap, nb);
  if (st == GS_OK && (h.flags & LOCAL_F_AVG)) st = gs_nn_file_write(&f, s->avg, nb);
  if (st != GS_OK) {
    gs_nn_file_abort(&f);
    return st;
  }
  st = gs_nn_file_commit(&f);
  if (st != GS_OK) return st;
  train_rank_files_written(&s->files, step);
  *files = 1;
  return GS_OK;
}

/* Once the checkpoint is in place: the files of the one before it go. */
static void local_commit_rank(void *self) {
  local_sync *s = self;
  train_rank_files_commit(&s->files, s->t, momentum_path);
}

/* On a resumed run (after the optimizer loaded the checkpoint's momentum,
 * rank 0's): this rank's own, when the checkpoint's ranks were as many as
 * this run's. On another world size the old ranks' momenta belong to no
 * new rank, so every rank keeps rank 0's (as after a resize the engine's
 * compressor memory is one for all ranks), and says so. */
static gs_status local_load_rank(void *self, const char *dir, long step, int files_size) {
  local_sync *s = self;
  train_ctx *t = s->t;
  float *m = local_momentum(s);
  train_rank_files_resumed(&s->files, t, step, files_size);
  if (files_size <= 0) {
    if (m == NULL) return GS_OK;
    train_note(t, "resume: the checkpoint in %s keeps one momentum, not each rank's: every "
               "rank starts from rank 0's", dir);
    return GS_OK;
  }
  if (files_size != t->size) {
    train_note(t, "resume: the checkpoint in %s keeps the local states of %d ranks, this run "
               "has %d: every rank starts from the checkpoint's average and rank 0's momentum",
               dir, files_size, t->size);
    return GS_OK;
  }
  char path[4200];
  momentum_path(path, sizeof path, dir, t->rank, step);
  const size_t nb = s->n * sizeof(float), most = sizeof(momentum_header) + 4 * nb + 4;
  unsigned char *data = NULL;
  size_t size = 0;
  gs_status st = gs_nn_file_read(path, "local SGD state", most, &data, &size);
  if (st != GS_OK) {
    char what[900];
    snprintf(what, sizeof what, "%s", gs_last_error());
    return gs_error(st, "%s (the checkpoint at step %ld keeps each of its %d ranks' local "
                    "state in %s/local.rank<R>.step%ld.gsck; resuming needs it)", what, step,
                    files_size, dir, step);
  }
  momentum_header h;
  memset(&h, 0, sizeof h);
  const char *why = NULL;
  /* version 1: a shorter header (up to count) and the momentum alone */
  const size_t h1 = offsetof(momentum_header, since_avg);
  if (size >= h1) memcpy(&h, data, size >= sizeof h ? sizeof h : h1);
  size_t want = 0;
  if (size < h1 || memcmp(h.magic, MOMENTUM_MAGIC, sizeof h.magic) != 0 ||
      (h.version != 1 && h.version != MOMENTUM_VERSION)) {
    why = "not a gradsync local SGD state file of a known version";
  } else {
    if (h.version == 1) h.flags = LOCAL_F_MOMENTUM;
    int arrays = !!(h.flags & LOCAL_F_MOMENTUM) + (h.version == 1 ? 0 : 1) +
                 !!(h.flags & LOCAL_F_SNAP) + !!(h.flags & LOCAL_F_AVG);
    want = (h.version == 1 ? h1 : sizeof h) + (size_t)arrays * nb + sizeof(uint32_t);
    if (size != want)
      why = "of the wrong size (truncated, or another model)";
    else if (!gs_nn_file_crc_ok(data, size))
      why = "corrupt (checksum mismatch)";
    else if (h.rank != t->rank || h.size != files_size || h.step != step || h.count != s->n)
      why = "of another rank, world size, step or model";
    else if (((h.flags & LOCAL_F_MOMENTUM) && !m) ||
             (!(h.flags & LOCAL_F_MOMENTUM) && m && t->optim.ops != &train_optim_kfac) ||
             (h.version != 1 && !!(h.flags & LOCAL_F_SNAP) != (s->kind == LOCAL_DELAYED)) ||
             h.since_avg < 0 || h.since_avg >= s->h || (h.due != 0 && h.due != 1))
      why = "of another optimizer or sync mode";
  }
  if (why == NULL) {
    const unsigned char *p = data + (h.version == 1 ? h1 : sizeof h);
    if (h.flags & LOCAL_F_MOMENTUM) memcpy(m, p, nb), p += nb;
    if (h.version != 1) {
      /* this rank's own weights and place in the period (version 1: the
       * checkpoint's, as its commit averaged them) */
      memcpy(s->w, p, nb), p += nb;
      s->since_avg = h.since_avg;
      s->due = h.due;
      if (h.flags & LOCAL_F_SNAP) memcpy(s->snap, p, nb), p += nb;
      if (h.flags & LOCAL_F_AVG) memcpy(s->avg, p, nb), s->have_avg = 1;
    }
  }
  gs_free(data);
  if (why != NULL)
    return gs_error(GS_ERR_PARSE, "local SGD state %s: %s (rank %d of %d at step %ld expected)",
                    path, why, t->rank, files_size, step);
  /* K-FAC's files written before its momentum was kept here. */
  if (m && !(h.flags & LOCAL_F_MOMENTUM))
    train_note(t, "resume: the checkpoint in %s keeps no rank's own K-FAC momentum: every "
               "rank starts from rank 0's", dir);
  return GS_OK;
}

static void local_stats(void *self, gs_train_stats *out) { *out = ((local_sync *)self)->st; }

static void local_describe(void *self, cJSON *json, char *text, size_t n) {
  local_sync *s = self;
  if (json) {
    cJSON_AddStringToObject(json, "sync", s->t->cfg->sync);
    cJSON_AddNumberToObject(json, "averages", (double)s->averages);
    if (s->kind == LOCAL_POST) cJSON_AddNumberToObject(json, "bsp_steps", (double)s->bsp_steps);
  }
  if (text) {
    if (s->kind == LOCAL_POST)
      snprintf(text, n, "%s: %ld BSP steps, then %ld parameter averages", s->t->cfg->sync,
               s->bsp_steps, s->averages);
    else
      snprintf(text, n, "%s: %ld parameter averages", s->t->cfg->sync, s->averages);
  }
}

static gs_status local_destroy(void *self) {
  local_sync *s = self;
  if (!s) return GS_OK;
  /* Nothing is in flight here: flush ran before the end (a failed run
   * aborts instead). */
  gs_free(s->snap);
  gs_free(s->avg);
  gs_free(s->own);
  gs_free(s);
  return GS_OK;
}

static gs_status local_check(const char *spec) {
  int kind;
  long h;
  double frac;
  return train_local_parse(spec, &kind, &h, &frac);
}

#define LOCAL_OPS(sym, nm)                                                              \
  const train_sync_ops sym = {.name = nm,                                              \
                              .owns_step = 0,                                          \
                              .check = local_check,                                    \
                              .create = local_create,                                  \
                              .before_forward = local_before_forward,                  \
                              .grad_ready = local_grad_ready,                          \
                              .end_backward = local_end_backward,                      \
                              .flush = local_flush,                                    \
                              .commit_flush = local_commit_flush,                      \
                              .commit_done = local_commit_done,                        \
                              .save_rank = local_save_rank,                            \
                              .commit_rank = local_commit_rank,                        \
                              .load_rank = local_load_rank,                            \
                              .stats = local_stats,                                    \
                              .describe = local_describe,                              \
                              .destroy = local_destroy}

LOCAL_OPS(train_sync_local, "local");
LOCAL_OPS(train_sync_post_local, "post-local");
LOCAL_OPS(train_sync_delayed, "delayed");
