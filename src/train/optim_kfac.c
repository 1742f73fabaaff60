/*
 * K-FAC (src/kfac) as the trainer's optimizer.
 *
 * Set-up in two parts. The optimizer's create (before the ranks agree on
 * the run) makes only local state: an SGD holding the momentum and lr that
 * a --resume checkpoint restores. The step hook's create (after the
 * agreement and the sync mode's set-up, on every rank) creates K-FAC's own
 * communicator over the same ranks, so that its collectives never
 * interleave with the engine's, and the K-FAC optimizer, which takes over
 * the restored momentum and lr and installs the layer hooks.
 *
 * The update needs every layer's averaged gradient at once (the KL clip
 * sums over layers), while a sync mode that owns the step applies updates
 * per tensor, lazily, before forward reads each tensor (the engine mode;
 * under DeAR a tensor's average is complete only there). So the first
 * per-tensor update of a step first completes the synchronisation of every
 * tensor through the sync mode's before_forward (whose nested update calls
 * are then no-ops) and then runs the whole K-FAC step; the other tensors'
 * calls of that step do nothing. The loop's set_lr, called once per step
 * before any update, marks a new step. Modes that leave the step to the
 * loop call step, the same K-FAC step.
 *
 * Checkpoints carry the weights, the momentum and the lr (as SGD's do), and
 * beside them each rank's K-FAC state (factors, inverses, step count; under
 * dp the ranks hold different layers) in DIR/kfac.rank<R>.step<S>.gsck,
 * written before the checkpoint and removed once a later checkpoint is in:
 * a resumed run continues with the factors an uninterrupted one has.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "optim_kfac.h"
#include "train_ctx.h"

typedef struct kfac_train {
  train_ctx *t;
  gs_kfac_config cfg;
  gs_nn_sgd *boot;   /* momentum and lr until K-FAC exists */
  gs_comm *comm;     /* K-FAC's own */
  gs_nn_optim *opt;
  int need_step;     /* set_lr seen, the step not yet done */
  int in_step;       /* completing the synchronisation: updates are no-ops */
  /* Checkpoints: the state file of the last checkpoint (removed once a
   * newer one is in), the one just written, and the one to resume from. */
  char kept[4096], written[4096], resume[4096];
  long resume_step;
  /* Resumed on another world size: the old ranks' files of stale_step that
   * this rank removes once a newer checkpoint is in (ranks stale_first,
   * + stale_stride, ... below stale_upto; none when stale_upto is 0). */
  const char *stale_dir;
  long stale_step;
  int stale_first, stale_stride, stale_upto;
} kfac_train;

static void state_path(char *buf, size_t n, const char *dir, int rank, long step) {
  snprintf(buf, n, "%s/kfac.rank%d.step%ld.gsck", dir, rank, step);
}

void gs_train_kfac_options_init(gs_train_kfac_options *o) {
  gs_kfac_config c;
  gs_kfac_config_default(&c, NULL);
  o->dist = c.dist;
  o->inverse = c.inverse;
  o->cov_every = c.cov_every;
  o->inv_every = c.inv_every;
  o->damping = c.damping;
  o->decay = c.factor_decay;
  o->kl_clip = c.kl_clip;
}

static gs_status kt_create(train_ctx *t, void **self) {
  kfac_train *k = gs_calloc(1, sizeof *k);
  *self = k;
  if (!k) return gs_error(GS_ERR_NOMEM, "out of memory for K-FAC");
  k->t = t;
  const gs_train_config *c = t->cfg;
  gs_train_kfac_options o;
  if (c->kfac) o = *c->kfac;
  else gs_train_kfac_options_init(&o);
  gs_nn_sgd_config sgd = {.lr = c->lr, .momentum = c->momentum,
                          .weight_decay = c->weight_decay, .nesterov = c->nesterov};
  gs_kfac_config_default(&k->cfg, &sgd);
  k->cfg.dist = o.dist;
  k->cfg.inverse = o.inverse;
  k->cfg.cov_every = o.cov_every;
  k->cfg.inv_every = o.inv_every;
  k->cfg.damping = o.damping;
  k->cfg.factor_decay = o.decay;
  k->cfg.kl_clip = o.kl_clip;
  return gs_nn_sgd_create(&k->boot, t->net, &sgd);
}

/* K-FAC's phases on the engine's timeline, in a row of their own. */
static void kt_trace(void *ctx, const char *name, double start_s, double end_s) {
  (void)gs_engine_trace(ctx, "kfac", name, start_s, end_s);
}

/* The step hook's create: every rank is here (after the agreement). */
static gs_status kh_create(train_ctx *t, void **self) {
  *self = NULL;
  if (t->optim.ops != &train_optim_kfac)
    return gs_error(GS_ERR_INVALID_ARG, "the kfac step hook needs the kfac optimizer");
  kfac_train *k = t->optim.self;
  *self = k;
  int world = t->ranks->size;
  if (t->size > 1 && world != t->size)
    return gs_error(GS_ERR_UNSUPPORTED,
                    "K-FAC needs every rank of the job to train (%d of %d do)", t->size,
                    world);
  if (t->engine) {
    k->cfg.trace = kt_trace;
    k->cfg.trace_ctx = t->engine;
  }
  gs_status st = t->size > 1 ? gs_comm_create(gs_comm_mpi(t->comm), &k->comm) : GS_OK;
  if (st == GS_OK) st = gs_kfac_create(&k->opt, t->net, k->comm, &k->cfg);
  if (st != GS_OK) return st;
  gs_nn_sgd *s = gs_nn_optim_sgd(k->opt);
  memcpy(gs_nn_sgd_momentum_flat(s), gs_nn_sgd_momentum_flat(k->boot),
         gs_nn_param_total(t->net) * sizeof(float));
  gs_nn_sgd_set_lr(s, gs_nn_sgd_lr(k->boot));
  gs_nn_sgd_destroy(k->boot);
  k->boot = NULL;
  if (k->resume[0]) {
    st = gs_kfac_state_load(k->opt, k->resume, k->resume_step);
    if (st == GS_OK) snprintf(k->kept, sizeof k->kept, "%s", k->resume);
  }
  return st;
}

static gs_status kt_ready(const kfac_train *k) {
  if (k->opt) return GS_OK;
  return gs_error(GS_ERR_STATE,
                  "K-FAC is not set up: the run lacks the kfac step hook "
                  "(the loop lists it for the kfac optimizer)");
}

static gs_status kt_full_step(kfac_train *k) {
  k->need_step = 0;
  train_ctx *t = k->t;
  if (t->sync.ops && t->sync.ops->owns_step && t->sync.ops->before_forward) {
    k->in_step = 1;
    gs_status st = GS_OK;
    for (size_t i = 0; i < t->nparams && st == GS_OK; i++)
      st = t->sync.ops->before_forward(t->sync.self, i);
    k->in_step = 0;
    if (st != GS_OK) return st;
  }
  return gs_nn_optim_step(k->opt);
}

static gs_status kt_step_param(void *self, size_t index) {
  kfac_train *k = self;
  (void)index;
  if (k->in_step || !k->need_step) return GS_OK;
  gs_status st = kt_ready(k);
  return st == GS_OK ? kt_full_step(k) : st;
}

static gs_status kt_step(void *self) {
  kfac_train *k = self;
  gs_status st = kt_ready(k);
  if (st != GS_OK) return st;
  k->need_step = 0;
  return gs_nn_optim_step(k->opt);
}

static void kt_set_lr(void *self, float lr) {
  kfac_train *k = self;
  if (k->opt) gs_nn_optim_set_lr(k->opt, lr);
  else gs_nn_sgd_set_lr(k->boot, lr);
  k->need_step = 1;
}

static gs_nn_sgd *kt_sgd(kfac_train *k) { return k->opt ? gs_nn_optim_sgd(k->opt) : k->boot; }

float *train_optim_kfac_momentum(void *self) { return gs_nn_sgd_momentum_flat(kt_sgd(self)); }

static gs_status kt_save(void *self, const char *path, const gs_nn_net *net,
                         const gs_nn_train_state *st) {
  return gs_nn_checkpoint_save(path, net, kt_sgd(self), st);
}

static gs_status kt_load(void *self, const char *path, gs_nn_net *net,
                         gs_nn_train_state *st) {
  return gs_nn_checkpoint_load(path, net, kt_sgd(self), st);
}

static gs_status kt_save_rank(void *self, const char *dir, int rank, long step) {
  kfac_train *k = self;
  gs_status st = kt_ready(k);
  if (st != GS_OK) return st;
  state_path(k->written, sizeof k->written, dir, rank, step);
  return gs_kfac_state_save(k->opt, k->written);
}

static void kt_commit_rank(void *self) {
  kfac_train *k = self;
  if (k->kept[0] && strcmp(k->kept, k->written) != 0) (void)unlink(k->kept);
  snprintf(k->kept, sizeof k->kept, "%s", k->written);
  /* The files of another world size's checkpoint: no longer needed once
   * this one is in (until 2026-12-07 they stayed for good, a whole set of
   * factors for each resize of an elastic job). */
  for (int r = k->stale_first; r < k->stale_upto; r += k->stale_stride) {
    char old[4200];
    state_path(old, sizeof old, k->stale_dir, r, k->stale_step);
    if (strcmp(old, k->written) != 0) (void)unlink(old);
  }
  k->stale_upto = 0;
}

/* K-FAC does not exist yet (the step hook creates it): the file is checked
 * for now and read then. Another world size's files hold factors of other
 * batches (dp: of other layers): the factors start afresh, and the files
 * go at the next commit. */
static gs_status kt_load_rank(void *self, const char *dir, int rank, int size, long step,
                              int files_size) {
  kfac_train *k = self;
  if (files_size != size) {
    k->stale_dir = dir;
    k->stale_step = step;
    k->stale_first = rank;
    k->stale_stride = size > 0 ? size : 1;
    k->stale_upto = files_size;
    return GS_OK;
  }
  state_path(k->resume, sizeof k->resume, dir, rank, step);
  k->resume_step = step;
  if (access(k->resume, R_OK) != 0)
    return gs_error(GS_ERR_IO,
                    "K-FAC state %s: %s: the checkpoint (step %ld) needs this rank's "
                    "factors from it", k->resume, strerror(errno), step);
  return GS_OK;
}

static void kt_breakdown(void *self, gs_train_breakdown *b) {
  kfac_train *k = self;
  gs_kfac_stats s;
  if (!k->opt || gs_kfac_stats_get(k->opt, &s) != GS_OK) return;
  gs_train_breakdown_add(b, "kfac_factor_compute", s.factor_compute_s);
  gs_train_breakdown_add(b, "kfac_factor_comm", s.factor_comm_s);
  gs_train_breakdown_add(b, "kfac_inversion", s.inversion_s);
  gs_train_breakdown_add(b, "kfac_broadcast", s.bcast_s);
  gs_train_breakdown_add(b, "kfac_precondition", s.precondition_s);
  gs_train_breakdown_add(b, "kfac_exposed_comm", s.exposed_comm_s);
}

static void kt_destroy(void *self) {
  kfac_train *k = self;
  if (!k) return;
  gs_nn_optim_destroy(k->opt);
  gs_nn_sgd_destroy(k->boot);
  gs_comm_destroy(k->comm);
  gs_free(k);
}

const train_optim_ops train_optim_kfac = {
    .name = "kfac",
    .create = kt_create,
    .step_param = kt_step_param,
    .step = kt_step,
    .set_lr = kt_set_lr,
    .save = kt_save,
    .load = kt_load,
    .save_rank = kt_save_rank,
    .commit_rank = kt_commit_rank,
    .load_rank = kt_load_rank,
    .breakdown = kt_breakdown,
    .destroy = kt_destroy,
};

/* The optimizer owns everything; the hook only sets it up. */
const train_hook_ops train_hook_kfac = {
    .name = "kfac",
    .create = kh_create,
};
