/* Parameter servers as a sync mode (--ps S --sync bsp|asp|ssp:S|
 * switch:offline:F|switch:online[:F]): the last S ranks serve shards of the
 * parameters (src/ps, include/gradsync/ps.h) and run the optimizer's
 * update on them; the other ranks are the workers, and the loop's
 * collectives (metrics, agreements) run on a gs_comm over the workers only.
 *
 * A worker pushes its whole gradient after backward and gets the servers'
 * parameters back (the mode owns the step). The servers' SGD is src/nn's
 * (gs_nn_sgd_update) with the run's momentum, weight decay and Nesterov
 * setting; the learning rate of each step comes with its push. The sample
 * budget of Sync-Switch's policies is the run's: epochs x steps per epoch x
 * workers x batch.
 *
 * Checkpoints keep the servers' momentum: worker 0 pulls it into its own
 * (idle) SGD optimizer before the checkpoint is written, so the file holds
 * the whole vector as a replica's would; a resumed run sends it back with
 * the initial parameters and the samples done (gs_ps_worker_resume). The
 * servers' shards are cut afresh for the new job, so a run resumes on
 * another number of servers or workers (--global-batch keeps the batch).
 * BSP's workers step together: it runs the epoch's steps and commits inside
 * it; the asynchronous modes end an epoch by samples (epoch_done). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "gradsync/plan.h"
#include "gradsync/ps.h"
#include "step_prof.h"
#include "sync_ps.h"
#include "train_ctx.h"

static gs_status psm_check(const char *spec) {
  gs_ps_sync s;
  return gs_ps_sync_parse(spec, &s);
}

/* The switches the JSON summary lists, and the text one (the count covers
 * them all). */
#define PS_SWITCH_LOG 32
#define PS_SWITCH_TEXT 8

typedef struct {
  long step;            /* this worker's steps so far, the switching one's
                           included, a resumed run's before it too */
  gs_ps_mode to;
  int straggler;        /* the reason for ASP: a straggler, or -1 */
} ps_switch;

typedef struct ps_sync {
  train_ctx *t;
  gs_ps *ps;
  gs_comm *workers;      /* the loop's communicator on a worker */
  gs_ps_sync sync;
  gs_nn_sgd_config sgd;  /* the servers' update */
  int started;           /* worker: initial parameters sent and pulled */
  long switches;
  ps_switch log[PS_SWITCH_LOG];
  double switch_step_s;  /* time of the steps at which the mode changed */
  double step_s;         /* time of all steps' exchanges */
  long steps;
  long step0;            /* the global step this process began at (a resume's) */
  long samples;          /* the servers' count in the last answer: samples
                            of the whole run, a resumed one's before it
                            included */
  gs_train_stats st;
  step_prof prof; /* the worker's profile of its steps (psm_profile) */
} ps_sync;

static void ps_update(void *ctx, float *w, const float *grad, float *state, size_t n, float lr,
                      float mu) {
  gs_nn_sgd_config c = *(const gs_nn_sgd_config *)ctx;
  c.lr = lr;
  c.momentum = mu;
  gs_nn_sgd_update(&c, w, grad, state, n);
}

static gs_status psm_destroy(void *self);
static float *ps_momentum(ps_sync *s);

static gs_status psm_create(train_ctx *t, void **self) {
  ps_sync *s = gs_calloc(1, sizeof *s);
  if (!s) return gs_error(GS_ERR_NOMEM, "out of memory for the parameter-server sync mode");
  *self = s;
  s->t = t;
  const gs_train_config *c = t->cfg;
  if (c->ps_servers < 1)
    return gs_error(GS_ERR_INVALID_ARG, "%s %s runs over parameter servers: it needs %s S",
                    train_option(c, "sync"), c->sync, train_option(c, "ps_servers"));
  gs_status st = gs_ps_sync_parse(c->sync, &s->sync);
  if (st != GS_OK) return st;
  s->sgd = (gs_nn_sgd_config){.lr = c->lr, .momentum = c->momentum,
                              .weight_decay = c->weight_decay, .nesterov = c->nesterov};
  size_t n = t->nparams;
  size_t *counts = gs_malloc((n ? n : 1) * sizeof *counts);
  if (!counts) return gs_error(GS_ERR_NOMEM, "out of memory for %zu tensor sizes", n);
  for (size_t i = 0; i < n; i++) counts[i] = gs_nn_param_at(t->net, i)->count;
  gs_ps_config cfg = {.servers = c->ps_servers, .sync = s->sync,
                      .sample_budget = GS_PS_BUDGET_AT_INIT,
                      .momentum_ramp_steps = 20, .comm = t->comm,
                      .async_lr_scale = c->async_lr_scale};
  /* gs_ps_config's offset: 0 means 1 - 1/W and a negative one none. */
  if (c->async_momentum >= 0) {
    float off = c->momentum - c->async_momentum;
    cfg.async_momentum_offset = off > 0 ? off : -1.0f;
  }
  st = gs_ps_create(gs_comm_mpi(t->comm), &cfg, counts, n, &s->ps);
  gs_free(counts);
  if (st != GS_OK) return st;
  if (gs_ps_is_server(s->ps)) return GS_OK;
  st = step_prof_init(&s->prof, n);
  if (st != GS_OK) return st;
  /* The workers' own communicator: the loop's collectives leave the
   * servers out from here on. */
  st = gs_comm_create(gs_ps_worker_comm(s->ps), &s->workers);
  if (st != GS_OK) return st;
  t->comm = s->workers;
  t->rank = gs_comm_rank(s->workers);
  t->size = gs_comm_size(s->workers);
  return GS_OK;
}

static int psm_is_worker(void *self) { return !gs_ps_is_server(((ps_sync *)self)->ps); }

static gs_status psm_serve(void *self) {
  ps_sync *s = self;
  return gs_ps_serve(s->ps, ps_update, &s->sgd);
}

static gs_status psm_before_forward(void *self, size_t index) {
  step_prof_forward(&((ps_sync *)self)->prof, index);
  return GS_OK;
}

static gs_status psm_grad_ready(void *self, size_t index) {
  step_prof_ready(&((ps_sync *)self)->prof, index);
  return GS_OK;
}

static gs_status psm_end_backward(void *self, const train_step *step) {
  ps_sync *s = self;
  step_prof_end(&s->prof);
  float *w = gs_nn_weights_flat(s->t->net);
  double t0 = gs_now();
  if (!s->started) {
    const train_ctx *t = s->t;
    long per_epoch = step->steps_per_epoch * (long)t->size * (long)step->batch;
    long budget = per_epoch * (long)t->cfg->epochs;
    /* A resumed run: the momentum its checkpoint kept (loaded into this
     * worker's SGD optimizer), and the samples trained before. */
    const float *state = NULL;
    long done = 0;
    if (t->resume_step >= 0) {
      state = ps_momentum(s);
      done = step->epoch * per_epoch + t->resume_samples_in_epoch;
    }
    gs_status st = gs_ps_worker_resume(s->ps, w, state, budget, done);
    if (st != GS_OK) return st;
    s->started = 1;
    s->step0 = step->global_step;
  }
  gs_ps_step_info info = {.batch = step->batch, .lr = step->lr,
                          .momentum = s->t->cfg->momentum};
  gs_ps_step_result res;
  gs_status st = gs_ps_step(s->ps, gs_nn_grads_flat(s->t->net), w, &info, &res);
  double dt = gs_now() - t0;
  if (st == GS_OK) s->samples = res.samples;
  s->steps++;
  s->step_s += dt;
  if (st == GS_OK && res.switched) {
    if (s->switches < PS_SWITCH_LOG)
      s->log[s->switches] = (ps_switch){.step = s->step0 + s->steps, .to = res.next_mode,
                                        .straggler = res.straggler};
    s->switches++;
    s->switch_step_s += dt;
  }
  size_t bytes = gs_nn_param_total(s->t->net) * sizeof(float);
  s->st.messages += 2;
  s->st.bytes += 2 * bytes;
  s->st.comm_s += dt;
  s->st.wait_s += dt;
  return st;
}

/* An asynchronous mode's epoch is its samples: under ASP a straggler's
 * pushes are fewer and the others' more, and every worker leaves once the
 * servers have applied the epoch's share. (The global batch is the same
 * whatever the world size, so the run's count marks each epoch's end.) */
static int psm_epoch_done(void *self, const train_step *step) {
  ps_sync *s = self;
  long per_epoch = step->steps_per_epoch * (long)s->t->size * (long)step->batch;
  return s->samples >= (step->epoch + 1) * per_epoch;
}

/* The momentum buffer a checkpoint keeps: the worker's own SGD optimizer's,
 * which the servers' update leaves idle. NULL with another optimizer. */
static float *ps_momentum(ps_sync *s) {
  const train_ctx *t = s->t;
  return t->optim.ops == &train_optim_sgd ? gs_nn_sgd_momentum_flat(t->optim.self) : NULL;
}

/* Before a checkpoint (every worker parked by the flush): worker 0 pulls
 * the servers' momentum into its optimizer, which the checkpoint writes.
 * No file of its own. */
static gs_status psm_save_rank(void *self, const char *dir, long step, int *files) {
  ps_sync *s = self;
  (void)dir;
  (void)step;
  *files = 0;
  float *m = ps_momentum(s);
  if (s->t->rank != 0 || m == NULL || !s->started) return GS_OK;
  return gs_ps_pull_state(s->ps, m);
}

/* Before evaluation, checkpoints and the end: nothing is in flight (each
 * step waits for its answers), but under ASP the workers reach the epoch's
 * end at different times: parked, a worker is left out of BSP rounds and
 * SSP's slowest clock until its next push. */
static gs_status psm_flush(void *self) {
  ps_sync *s = self;
  return s->started ? gs_ps_park(s->ps) : GS_OK;
}

static void psm_stats(void *self, gs_train_stats *out) { *out = ((ps_sync *)self)->st; }

static void psm_describe(void *self, cJSON *json, char *text, size_t n) {
  ps_sync *s = self;
  gs_ps_stats ps;
  gs_ps_get_stats(s->ps, &ps);
  char sync[64];
  gs_ps_sync_format(&s->sync, sync, sizeof sync);
  if (json) {
    cJSON_AddStringToObject(json, "sync", sync);
    cJSON_AddNumberToObject(json, "servers", s->t->cfg->ps_servers);
    cJSON_AddNumberToObject(json, "bsp_steps", (double)ps.bsp_steps);
    cJSON_AddNumberToObject(json, "asp_steps", (double)ps.asp_steps);
    cJSON_AddNumberToObject(json, "ssp_steps", (double)ps.ssp_steps);
    cJSON_AddNumberToObject(json, "switches", (double)ps.switches);
    cJSON *log = cJSON_AddArrayToObject(json, "switch_log");
    for (long i = 0; log && i < s->switches && i < PS_SWITCH_LOG; i++) {
      cJSON *e = cJSON_CreateObject();
      if (!e) break;
      cJSON_AddNumberToObject(e, "step", (double)s->log[i].step);
      cJSON_AddStringToObject(e, "to", gs_ps_mode_name(s->log[i].to));
      cJSON_AddNumberToObject(e, "straggler", s->log[i].straggler);
      cJSON_AddItemToArray(log, e);
    }
    /* What an asynchronous push uses (--async-lr-scale, --async-momentum,
     * or their defaults), as a factor of --lr and as a momentum. */
    float alr, amu;
    gs_ps_async_hparams(s->ps, 1.0f, s->t->cfg->momentum, &alr, &amu);
    /* Six significant digits, the float's own: four decimals showed
     * --async-lr-scale 1e-9 as 0. */
    char num[32];
    snprintf(num, sizeof num, "%.6g", (double)alr);
    cJSON_AddNumberToObject(json, "async_lr_scale", strtod(num, NULL));
    snprintf(num, sizeof num, "%.6g", (double)amu);
    cJSON_AddNumberToObject(json, "async_momentum", strtod(num, NULL));
  }
  if (text) {
    int len = snprintf(text, n,
                       "%d parameter server%s, sync %s: this worker ran %ld BSP, %ld ASP, "
                       "%ld SSP steps, %ld switch%s",
                       s->t->cfg->ps_servers, s->t->cfg->ps_servers == 1 ? "" : "s", sync,
                       ps.bsp_steps, ps.asp_steps, ps.ssp_steps, ps.switches,
                       ps.switches == 1 ? "" : "es");
    /* Where the first switches happened and why. */
    long shown = s->switches < PS_SWITCH_TEXT ? s->switches : PS_SWITCH_TEXT;
    for (long i = 0; i < shown && len > 0 && (size_t)len < n; i++) {
      const ps_switch *e = &s->log[i];
      char why[48] = "";
      if (e->to != GS_PS_BSP && e->straggler >= 0)
        snprintf(why, sizeof why, " (straggler: worker %d)", e->straggler);
      else if (e->to != GS_PS_BSP)
        snprintf(why, sizeof why, " (BSP share done)");
      len += snprintf(text + len, n - (size_t)len, "%s after step %ld to %s%s", i ? ";" : ":",
                      e->step, gs_ps_mode_name(e->to), why);
    }
    if (s->switches > shown && len > 0 && (size_t)len < n)
      snprintf(text + len, n - (size_t)len, "; ...");
  }
}

/* The switch's own cost: a switch step's exchange beyond the mean one. */
static void psm_breakdown(void *self, gs_train_breakdown *b) {
  ps_sync *s = self;
  double mean = s->steps ? s->step_s / (double)s->steps : 0;
  double extra = s->switch_step_s - (double)s->switches * mean;
  gs_train_breakdown_add(b, "switch", extra > 0 ? extra : 0);
}

/* The worker's profile: its compute per step (the tensors' numbers and
 * names are the net's), for the cluster manager's prediction of the job on
 * other sizes (train_profile_save). NULL until STEP_PROF_MIN steps are in. */
static gs_status psm_profile(void *self, gs_profile **out) {
  ps_sync *s = self;
  return step_prof_make(&s->prof, s->t->net, "ps", out);
}

static gs_status psm_destroy(void *self) {
  ps_sync *s = self;
  if (!s) return GS_OK;
  step_prof_free(&s->prof);
  gs_status st = GS_OK;
  /* The servers serve once the set-up is agreed, and end when every worker
   * has finished: also a worker that never started (a resume with nothing
   * left to train; until 2026-12-07 the servers then waited for it, and
   * the job ended at GRADSYNC_TIMEOUT, exit 1). */
  if (s->ps && !gs_ps_is_server(s->ps) && (s->started || s->t->serving))
    st = gs_ps_finish(s->ps);
  if (s->workers) gs_comm_destroy(s->workers);
  gs_ps_destroy(s->ps);
  gs_free(s);
  return st;
}

#define PS_OPS(sym, nm, done)                                                           \
  const train_sync_ops sym = {.name = nm,                                              \
                              .servers = 1,                                            \
                              .owns_step = 1,                                          \
                              .check = psm_check,                                      \
                              .create = psm_create,                                    \
                              .is_worker = psm_is_worker,                              \
                              .serve = psm_serve,                                      \
                              .before_forward = psm_before_forward,                    \
                              .grad_ready = psm_grad_ready,                            \
                              .end_backward = psm_end_backward,                        \
                              .flush = psm_flush,                                      \
                              .stats = psm_stats,                                      \
                              .describe = psm_describe,                                \
                              .breakdown = psm_breakdown,                              \
                              .save_rank = psm_save_rank,                              \
                              .profile = psm_profile,                                  \
                              .epoch_done = done,                                      \
                              .destroy = psm_destroy}

PS_OPS(train_sync_ps_bsp, "bsp", NULL);
PS_OPS(train_sync_ps_asp, "asp", psm_epoch_done);
PS_OPS(train_sync_ps_ssp, "ssp", psm_epoch_done);
PS_OPS(train_sync_ps_switch, "switch", psm_epoch_done);
