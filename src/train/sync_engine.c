/* The engine sync mode: every rank a worker, gradients averaged by
 * gradsync's engine during backward under the configured scheduling policy
 * (wfbp, mgwfbp, dear, ...).
 *
 * Updates are applied lazily: after gs_engine_wait every tensor's update is
 * pending, and it is applied right before forward first reads the tensor
 * (under DeAR the tensor's all-gather finishes there, gs_engine_wait_tensor).
 * That is the same arithmetic as stepping right after the wait, and lets
 * DeAR overlap its all-gathers with the next forward pass; flush applies
 * what is pending before evaluation, checkpoints and the end.
 *
 * One rank alone, uncompressed, has nothing to average: the mode then runs
 * without the engine ("solo"), the updates applied in the same order with
 * the same arithmetic (the average of one rank is its gradient, bitwise),
 * with no threads to hand each gradient to. Under a CPU cap (run
 * --node-cpus) each such hand-off could wait out the cgroup's period; a
 * one-rank job spent half its steps there. The steps are profiled from the
 * hooks' stamps (step_prof.h) for the cluster manager. GRADSYNC_TIMELINE
 * (the engine's timeline) keeps the engine. */
#include <math.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "step_prof.h"
#include "sync_memory.h"
#include "train_ctx.h"
#include "train_internal.h"

typedef struct engine_sync {
  train_ctx *t;
  gs_engine *engine; /* NULL: solo, one rank without the engine */
  step_prof prof;    /* solo: the steps' profile */
  int *ids;
  unsigned char *pending; /* per tensor: an update waits to be applied */
  uint64_t steps;
  train_rank_files files; /* the compressor memory's files (sync_memory.h) */
  /* How a resumed run's memory came back, for the summary: "own", "mean",
   * "zero" or "dropped"; "" when not resumed. from: the ranks it came from. */
  const char *resumed;
  int resumed_from;
} engine_sync;

static gs_status engine_destroy(void *self);

/* Whether a run needs no engine: one rank, no compression (whose error
 * feedback would change the gradient even alone), no timeline asked for. */
static int runs_solo(const train_ctx *t) {
  if (t->size != 1) return 0;
  gs_compress_spec z;
  if (t->cfg->compress && (gs_compress_spec_parse(t->cfg->compress, &z) != GS_OK || !z.off))
    return 0;
  const char *tl = getenv("GRADSYNC_TIMELINE");
  return tl == NULL || *tl == '\0';
}

static gs_status engine_create(train_ctx *t, void **self) {
  engine_sync *s = gs_calloc(1, sizeof *s);
  if (s == NULL) return gs_error(GS_ERR_NOMEM, "out of memory for the engine sync mode");
  *self = s;
  s->t = t;
  train_rank_files_init(&s->files);
  s->resumed = "";
  s->pending = gs_calloc(t->nparams ? t->nparams : 1, 1);
  if (!s->pending) return gs_error(GS_ERR_NOMEM, "out of memory for %zu tensors", t->nparams);
  if (runs_solo(t)) return step_prof_init(&s->prof, t->nparams);
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = t->cfg->policy;
  cfg.forward_overlap = 1;
  /* Compression: the engine sends groups compressed, with each message's
   * error feedback; DGC's options come from the trainer's. */
  cfg.compress = t->cfg->compress;
  cfg.error_feedback = !t->cfg->no_ef;
  gs_compress_opts zopts = gs_compress_opts_default();
  zopts.seed ^= t->cfg->seed;
  zopts.warmup_steps = t->cfg->compress_warmup_steps > 0
                           ? (uint64_t)t->cfg->compress_warmup_steps : 0;
  if (t->cfg->compress_momentum > 0) zopts.momentum = t->cfg->compress_momentum;
  zopts.ef_decay = t->cfg->ef_decay;
  cfg.compress_opts = &zopts;
  gs_status st = gs_engine_create(t->comm, &cfg, &s->engine);
  if (st != GS_OK) return st;
  t->engine = s->engine;
  s->ids = gs_calloc(t->nparams ? t->nparams : 1, sizeof *s->ids);
  if (!s->ids)
    return gs_error(GS_ERR_NOMEM, "out of memory for %zu tensors", t->nparams);
  for (size_t i = 0; i < t->nparams && st == GS_OK; i++) {
    const gs_nn_param *p = gs_nn_param_at(t->net, i);
    st = gs_engine_register(s->engine, p->name, p->grad, p->count, GS_F32, &s->ids[i]);
  }
  return st;
}

static gs_status engine_grad_ready(void *self, size_t i) {
  engine_sync *s = self;
  if (s->engine == NULL) {
    step_prof_ready(&s->prof, i);
    return GS_OK;
  }
  return gs_engine_grad_ready(s->engine, s->ids[i]);
}

/* Applies tensor i's pending update once its average is in place. */
static gs_status apply_pending(engine_sync *s, size_t i) {
  if (!s->pending[i]) return GS_OK;
  gs_status st = s->engine ? gs_engine_wait_tensor(s->engine, s->ids[i]) : GS_OK;
  if (st == GS_OK) st = train_optim_step_param(&s->t->optim, i);
  if (st == GS_OK) s->pending[i] = 0;
  return st;
}

static gs_status engine_before_forward(void *self, size_t i) {
  engine_sync *s = self;
  if (s->engine == NULL) step_prof_forward(&s->prof, i);
  return apply_pending(s, i);
}

static gs_status engine_end_backward(void *self, const train_step *step) {
  (void)step;
  engine_sync *s = self;
  gs_status st = GS_OK;
  if (s->engine) st = gs_engine_wait(s->engine);
  else step_prof_end(&s->prof);
  if (st != GS_OK) return st;
  memset(s->pending, 1, s->t->nparams);
  s->steps++;
  return GS_OK;
}

static gs_status engine_flush(void *self) {
  engine_sync *s = self;
  gs_status st = GS_OK;
  for (size_t i = 0; i < s->t->nparams && st == GS_OK; i++) st = apply_pending(s, i);
  return st;
}

static void engine_stats(void *self, gs_train_stats *out) {
  engine_sync *s = self;
  gs_engine_stats es;
  memset(out, 0, sizeof *out);
  if (s->engine == NULL || gs_engine_get_stats(s->engine, &es) != GS_OK) return;
  out->messages = es.messages;
  /* What went on the wire: payloads for compressed messages. */
  out->bytes = es.bytes_sent;
  out->comm_s = es.comm_s;
  out->wait_s = es.wait_s;
}

static void engine_describe(void *self, cJSON *json, char *text, size_t n) {
  engine_sync *s = self;
  gs_plan *plan = NULL;
  if (s->engine) gs_engine_get_plan(s->engine, &plan);
  /* Solo: one rank, nothing exchanged, no plan. */
  const char *chosen = plan ? gs_plan_policy_name(plan->chosen) : s->engine ? "-" : "none";
  size_t groups = plan ? plan->ngroups : 0;
  gs_engine_stats es;
  memset(&es, 0, sizeof es);
  if (s->engine) gs_engine_get_stats(s->engine, &es);
  const char *z = s->t->cfg->compress;
  /* The engine has parsed the same spec: it cannot fail here. */
  gs_compress_spec zs;
  const int zon = gs_compress_spec_parse(z, &zs) == GS_OK && !zs.off;
  /* The error feedback's damping in use: --ef-decay, else the kind's. */
  double decay = 0;
  if (zon && !s->t->cfg->no_ef)
    decay = s->t->cfg->ef_decay > 0 ? s->t->cfg->ef_decay : zs.ef_decay;
  decay = round(decay * 1e6) / 1e6; /* the float's value as given: 0.9, not 0.8999... */
  char damp[64] = "";
  if (decay > 0 && decay < 1)
    snprintf(damp, sizeof damp, " with error feedback damped by %g", decay);
  /* Bytes this rank sent per step, and the dense size over them. */
  double per_step = es.iterations ? (double)es.bytes_sent / (double)es.iterations : 0;
  double ratio = es.bytes_sent ? (double)es.bytes_dense / (double)es.bytes_sent : 1;
  char exch[128] = "dense";
  if (plan && plan->group_xchg) {
    /* The exchanges the plan uses, e.g. "gtopk" or "allgather+dense". */
    int seen[GS_XCHG_COUNT + 1] = {0};
    size_t len = 0;
    exch[0] = '\0';
    for (size_t g = 0; g < plan->ngroups; g++) {
      int k = plan->group_xchg[g] < 0 ? GS_XCHG_COUNT : plan->group_xchg[g];
      if (seen[k]++ || len >= sizeof exch) continue;
      len += (size_t)snprintf(exch + len, sizeof exch - len, "%s%s", len ? "+" : "",
                              k == GS_XCHG_COUNT ? "dense" : gs_xchg_name((gs_xchg)k));
    }
  }
  if (json) {
    cJSON_AddStringToObject(json, "policy", s->t->cfg->policy);
    cJSON_AddStringToObject(json, "chosen", chosen);
    cJSON_AddNumberToObject(json, "groups", (double)groups);
    cJSON_AddStringToObject(json, "compress", zon ? zs.normalised : "none");
    cJSON_AddBoolToObject(json, "error_feedback", zon && !s->t->cfg->no_ef);
    if (decay > 0) cJSON_AddNumberToObject(json, "ef_decay", decay);
    cJSON_AddNumberToObject(json, "compressed_groups", (double)es.compressed_groups);
    cJSON_AddStringToObject(json, "exchanges", exch);
    cJSON_AddNumberToObject(json, "bytes_per_step", per_step);
    cJSON_AddNumberToObject(json, "compression_ratio", ratio);
    if (*s->resumed) {
      cJSON *r = cJSON_AddObjectToObject(json, "memory_resumed");
      cJSON_AddStringToObject(r, "rule", s->resumed);
      cJSON_AddNumberToObject(r, "from_ranks", s->resumed_from);
    }
  }
  /* The bytes cover the whole run; the groups the plan in use, which under
   * auto:SPEC may send dense what earlier steps sent compressed. */
  char vs[64];
  if (ratio >= 1.05) snprintf(vs, sizeof vs, "%.1fx fewer than dense", ratio);
  else if (ratio > 0 && ratio <= 0.95) snprintf(vs, sizeof vs, "%.1fx more than dense", 1 / ratio);
  else snprintf(vs, sizeof vs, "as many as dense");
  if (text && zon && s->t->size == 1)
    snprintf(text, n, "one rank: compression %s%s runs as it would on several (its "
             "messages would carry %.0f bytes a step, %s), and nothing leaves the process",
             zs.normalised, s->t->cfg->no_ef ? " without error feedback" : damp, per_step, vs);
  else if (text && zon)
    snprintf(text, n, "policy %s (plan: %s, %zu message%s per step), compression %s%s: "
             "%.0f bytes sent per step over the run, %s; the plan in use sends %zu of %zu "
             "group%s compressed (%s)", s->t->cfg->policy, chosen, groups,
             groups == 1 ? "" : "s", zs.normalised,
             s->t->cfg->no_ef ? " without error feedback" : damp, per_step, vs,
             es.compressed_groups, groups, groups == 1 ? "" : "s", exch);
  else if (text && s->engine == NULL)
    snprintf(text, n, "one rank: nothing to exchange (the engine not started, policy %s "
             "unused)", s->t->cfg->policy);
  else if (text)
    snprintf(text, n, "policy %s (plan: %s, %zu message%s per step), %.0f bytes sent "
             "per step", s->t->cfg->policy, chosen, groups, groups == 1 ? "" : "s", per_step);
  gs_plan_free(plan);
}

/* ---- The compressor memory in checkpoints ------------------------------------
 *
 * Each compressed message's state keeps memory that differs between ranks
 * (the error-feedback residual: gradient this rank has not sent yet; DGC's
 * momentum) and memory the ranks share (the step counter, the learning rate
 * the residual is scaled to). At every commit each rank writes its own, per
 * tensor (gs_engine_memory_get), and a resumed run sets it back
 * (gs_engine_memory_set) before its first step, so that it continues as if
 * it had not stopped.
 *
 * On another world size no rank's memory is any new rank's. The engine
 * averages the ranks' messages, so the next step applies the unsent
 * gradient of N old ranks, sum_r e_r / N, exactly when every new rank
 * starts from the mean over the old ranks' memories: the residuals are
 * summed into the first step. DGC's momentum takes the mean too; the step
 * counter the largest (a density warm-up goes on); the learning rate the
 * saved one (the residual is rescaled from it at the first step, as
 * gs_compress_set_lr does). */

/* A train_memory over one buffer: arrays for the engine's kinds. */
static gs_status memory_alloc(engine_sync *s, unsigned kinds, train_memory *m, size_t **counts,
                              float **buf) {
  const size_t T = s->t->nparams;
  size_t total = 0;
  memset(m, 0, sizeof *m);
  *counts = gs_calloc(T + 1, sizeof **counts);
  m->mem = gs_calloc(T + 1, sizeof *m->mem);
  for (size_t i = 0; *counts && i < T; i++) {
    (*counts)[i] = gs_nn_param_at(s->t->net, i)->count;
    total += (*counts)[i];
  }
  const size_t per = (size_t)((kinds & GS_COMPRESS_MEM_RESIDUAL) != 0) +
                     (size_t)((kinds & GS_COMPRESS_MEM_MOMENTUM) != 0);
  *buf = gs_calloc(per * total + 1, sizeof **buf);
  if (*counts == NULL || m->mem == NULL || *buf == NULL) {
    gs_free(*counts);
    gs_free(m->mem);
    gs_free(*buf);
    *counts = NULL;
    *buf = NULL;
    m->mem = NULL;
    return gs_error(GS_ERR_NOMEM, "out of memory for the compressor memory of %zu elements",
                    total);
  }
  float *p = *buf;
  for (size_t i = 0; i < T; i++) {
    if (kinds & GS_COMPRESS_MEM_RESIDUAL) {
      m->mem[i].residual = p;
      p += (*counts)[i];
    }
    if (kinds & GS_COMPRESS_MEM_MOMENTUM) {
      m->mem[i].momentum = p;
      p += (*counts)[i];
    }
  }
  m->ntensors = T;
  m->counts = *counts;
  return GS_OK;
}

static void memory_free(train_memory *m, size_t *counts, float *buf) {
  gs_free(m->mem);
  gs_free(counts);
  gs_free(buf);
}

/* The run's compression spec, normalised ("topk:0.01", "auto:dgc:0.001"). */
static void spec_of(const char *spec, gs_compress_spec *z) {
  /* The engine has parsed the same spec: it cannot fail here. */
  if (gs_compress_spec_parse(spec, z) != GS_OK) {
    memset(z, 0, sizeof *z);
    z->kind = "none";
  }
}

static gs_status engine_save_rank(void *self, const char *dir, long step, int *files) {
  engine_sync *s = self;
  *files = 0;
  const unsigned kinds = gs_engine_memory_kinds(s->engine);
  train_rank_files_saving(&s->files);
  if (kinds == 0) return GS_OK;
  train_memory m;
  size_t *counts;
  float *buf;
  gs_status st = memory_alloc(s, kinds, &m, &counts, &buf);
  if (st != GS_OK) return st;
  gs_compress_spec z;
  spec_of(s->t->cfg->compress, &z);
  snprintf(m.spec, sizeof m.spec, "%s", z.normalised);
  for (size_t i = 0; i < m.ntensors && st == GS_OK; i++)
    st = gs_engine_memory_get(s->engine, s->ids[i], &m.mem[i]);
  char path[4200];
  train_memory_path(path, sizeof path, dir, s->t->rank, step);
  if (st == GS_OK) st = train_memory_write(path, &m, s->t->rank, s->t->size, step);
  memory_free(&m, counts, buf);
  if (st != GS_OK) return st;
  train_rank_files_written(&s->files, step);
  *files = 1;
  return GS_OK;
}

/* Called once a checkpoint is in place, and again (a no-op) where the
 * loop settles a background commit that was not in flight. */
static void engine_commit_rank(void *self) {
  engine_sync *s = self;
  train_rank_files_commit(&s->files, s->t, train_memory_path);
}

static gs_status engine_load_rank(void *self, const char *dir, long step, int files_size) {
  engine_sync *s = self;
  train_ctx *t = s->t;
  const unsigned kinds = gs_engine_memory_kinds(s->engine);
  train_rank_files_resumed(&s->files, t, step, files_size);
  if (files_size <= 0) {
    if (kinds != 0) {
      s->resumed = "zero";
      train_note(t, "resume: the checkpoint in %s keeps no compressor memory (written "
                 "without compression): the error-feedback memory starts at zero", dir);
    }
    return GS_OK;
  }
  if (kinds == 0) {
    s->resumed = "dropped";
    train_note(t, "resume: the compressor memory of %d rank%s in %s is not used: this run "
               "keeps none (%s%s)", files_size, files_size == 1 ? "" : "s", dir,
               t->cfg->compress ? t->cfg->compress : "no compression",
               t->cfg->no_ef ? " without error feedback" : "");
    return GS_OK;
  }
  const int same = files_size == t->size;
  train_memory m;
  size_t *counts;
  float *buf;
  gs_status st = memory_alloc(s, kinds, &m, &counts, &buf);
  if (st != GS_OK) return st;
  st = train_memory_load(dir, step, files_size, same ? t->rank : -1, &m);
  gs_compress_spec was, now;
  if (st == GS_OK) {
    spec_of(m.spec, &was);
    spec_of(t->cfg->compress, &now);
  }
  if (st == GS_OK && strcmp(was.kind, now.kind) != 0) {
    /* Another compressor's memory means something else (DGC's is velocity
     * under momentum correction, top-k's plain gradient). */
    s->resumed = "dropped";
    train_note(t, "resume: the compressor memory in %s is %s's, this run compresses with "
               "%s: it starts at zero", dir, was.normalised, now.normalised);
    memory_free(&m, counts, buf);
    return GS_OK;
  }
  for (size_t i = 0; i < m.ntensors && st == GS_OK; i++)
    if (m.mem[i].have != 0) /* nothing for a tensor sent dense at the commit */
      st = gs_engine_memory_set(s->engine, s->ids[i], &m.mem[i]);
  memory_free(&m, counts, buf);
  if (st != GS_OK) return st;
  s->resumed = same ? "own" : "mean";
  s->resumed_from = files_size;
  if (same)
    train_note(t, "resume: each rank's compressor memory restored from %s (step %ld)", dir,
               step);
  else
    train_note(t, "resume: the compressor memory of %d rank%s averaged onto %d (every rank "
               "starts from their mean, so the first step sends the old ranks' unsent "
               "gradient summed)", files_size, files_size == 1 ? "" : "s", t->size);
  return GS_OK;
}

/* Every path here has the engine idle on every rank: destroying it issues
 * no collective (it writes the timeline, which can fail alone). */
static gs_status engine_destroy(void *self) {
  engine_sync *s = self;
  if (s == NULL) return GS_OK;
  gs_status st = GS_OK;
  if (s->t->engine == s->engine) s->t->engine = NULL;
  if (s->engine) st = gs_engine_destroy(s->engine);
  step_prof_free(&s->prof);
  gs_free(s->ids);
  gs_free(s->pending);
  gs_free(s);
  return st;
}

static gs_status engine_check(const char *spec) {
  if (strcmp(spec, "engine") == 0) return GS_OK;
  return gs_error(GS_ERR_PARSE, "sync mode '%s': engine takes no parameters", spec);
}

/* Solo's profile (with the engine the loop asks the engine for its own). */
static gs_status engine_profile(void *self, gs_profile **out) {
  engine_sync *s = self;
  *out = NULL;
  if (s->engine) return GS_OK;
  return step_prof_make(&s->prof, s->t->net, "solo", out);
}

const train_sync_ops train_sync_engine = {
    .name = "engine",
    .owns_step = 1,
    .check = engine_check,
    .create = engine_create,
    .before_forward = engine_before_forward,
    .grad_ready = engine_grad_ready,
    .end_backward = engine_end_backward,
    .flush = engine_flush,
    .stats = engine_stats,
    .describe = engine_describe,
    .save_rank = engine_save_rank,
    .commit_rank = engine_commit_rank,
    .load_rank = engine_load_rank,
    .profile = engine_profile,
    .destroy = engine_destroy,
};
