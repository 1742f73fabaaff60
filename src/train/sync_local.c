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
 * as in Lin et al. The averages run on the loop's gs_comm; flush (before
 * evaluation, checkpoints and the end) completes what is in flight and
 * averages once more, so every replica evaluates the same weights. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync_ps.h"
#include "train_ctx.h"

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
  long steps;        /* steps done */
  long since_avg;    /* steps since the last average started */
  int due;           /* average before the next forward */
  long bsp_steps;    /* post-local: BSP steps so far */
  long total_steps;  /* post-local: the run's steps (known at the first step) */
  gs_train_stats st;
  long averages;
} local_sync;

static int parse_long(const char *s, long lo, long hi, long *out, const char **rest) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || v < lo || v > hi) return -1;
  *out = v;
  *rest = end;
  return 0;
}

/* Parses "local:H", "post-local:H[:F]" or "delayed:D". */
gs_status train_local_parse(const char *text, int *kind, long *h, double *frac) {
  const char *rest = NULL;
  *frac = 0.5;
  if (strncmp(text, "local:", 6) == 0) {
    *kind = LOCAL_SGD;
    if (parse_long(text + 6, 1, 1000000, h, &rest) == 0 && *rest == '\0') return GS_OK;
  } else if (strncmp(text, "post-local:", 11) == 0) {
    *kind = LOCAL_POST;
    if (parse_long(text + 11, 1, 1000000, h, &rest) == 0) {
      if (*rest == '\0') return GS_OK;
      if (*rest == ':') {
        char *end;
        errno = 0;
        double f = strtod(rest + 1, &end);
        if (!errno && end != rest + 1 && *end == '\0' && f >= 0 && f <= 1) {
          *frac = f;
          return GS_OK;
        }
      }
    }
  } else if (strncmp(text, "delayed:", 8) == 0) {
    *kind = LOCAL_DELAYED;
    if (parse_long(text + 8, 1, 1000000, h, &rest) == 0 && *rest == '\0') return GS_OK;
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

static gs_status average_now(local_sync *s) {
  double t0 = gs_now();
  gs_status st = gs_allreduce(s->t->comm, GS_IN_PLACE, s->w, s->n, GS_F32, GS_AVG, GS_ALGO_AUTO);
  double dt = gs_now() - t0;
  s->st.messages++;
  s->st.bytes += s->n * sizeof(float);
  s->st.comm_s += dt;
  s->st.wait_s += dt;
  s->averages++;
  return st;
}

/* Delayed: waits for the average in flight and applies it with the local
 * progress since its snapshot. */
static gs_status delayed_apply(local_sync *s) {
  if (!s->req) return GS_OK;
  double t0 = gs_now();
  gs_status st = gs_wait(s->req);
  s->req = NULL;
  s->st.wait_s += gs_now() - t0;
  if (st != GS_OK) return st;
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
  if (s->kind == LOCAL_POST && s->steps <= (long)(s->bsp_frac * (double)s->total_steps + 0.5)) {
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
                              .stats = local_stats,                                    \
                              .describe = local_describe,                              \
                              .destroy = local_destroy}

LOCAL_OPS(train_sync_local, "local");
LOCAL_OPS(train_sync_post_local, "post-local");
LOCAL_OPS(train_sync_delayed, "delayed");
