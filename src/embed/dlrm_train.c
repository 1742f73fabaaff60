/*
 * The hybrid-parallel DLRM training loop (gs_dlrm_train_run,
 * include/gradsync/dlrm_dist.h): a plan, epochs of gs_dlrm_dist steps on
 * planted synthetic data, and an evaluation after each epoch. It decides
 * and reports; `gradsync train --model dlrm` (apps/cmd_train_dlrm.c)
 * prints.
 *
 * Data layout: global step g of the run covers samples g*P*B .. (g+1)*P*B - 1
 * of the training set (P ranks, B per rank), rank r the r-th slice of B; an
 * epoch is `steps` steps, and every epoch passes over the same samples. The
 * held-out set starts at sample 2^40, far past any training sample. A
 * Criteo file (cfg->criteo_file) is read by the same sample indices: its
 * first steps*P*B lines are the training set, the held-out ones follow.
 *
 * Checkpoints (dlrm_ckpt.c): commits between steps (commit_every,
 * stop_at_step, a stop asked for) and after each epoch's evaluation; a
 * resumed run starts at its commit's global step, which is all the data's
 * position there is.
 */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "dlrm_internal.h"
#include "gradsync/dlrm_dist.h"
#include "gs_internal.h"

#define EVAL_FIRST (1ULL << 40)

static atomic_int stop_asked; /* lock-free: safe in a handler, and from gs_signal_route's thread */

void gs_dlrm_train_request_stop(void) { atomic_store(&stop_asked, 1); }

/* At a commit point: whether any rank was asked to stop (agreed). */
static gs_status agree_stop(gs_comm *comm, int *stop) {
  int32_t any = atomic_load(&stop_asked) ? 1 : 0;
  if (gs_comm_size(comm) > 1)
    GS_CHECK(gs_allreduce(comm, GS_IN_PLACE, &any, 1, GS_I32, GS_MAX, GS_ALGO_AUTO));
  if (any) *stop = 2;
  return GS_OK;
}

static void emit(gs_dlrm_train_cb cb, void *user, const gs_dlrm_train_event *ev) {
  if (cb) cb(ev, user);
}

/* The ids' skew as the cost model's cache sees it: the generator's Zipf
 * exponent; a Criteo file's ids taken as uniform (their skew unknown). */
static double ids_zipf(const gs_dlrm_train_config *cfg) {
  return cfg->criteo_file ? 0.0 : cfg->data.zipf_s;
}

/* A "KEY: N kB" line's bytes of /proc/self/status (0 if unknown). */
static size_t status_bytes(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  size_t kb = 0, len = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, len) == 0 && line[len] == ':' &&
        sscanf(line + len + 1, "%zu kB", &kb) == 1)
      break;
  if (f) fclose(f);
  return kb * 1024;
}

/* The process's peak resident memory since reset_peak_rss (VmHWM; the
 * whole life's ru_maxrss where that cannot be read). */
static size_t peak_rss(void) {
  size_t b = status_bytes("VmHWM");
  if (b > 0) return b;
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (size_t)ru.ru_maxrss * 1024; /* kilobytes on Linux */
}

/* The process's resident memory now (VmRSS; 0 if unknown). */
static size_t rss_now(void) { return status_bytes("VmRSS"); }

/* Resets the peak (Linux 4.0 and later: "5" to /proc/self/clear_refs), so
 * that the calibration's buffers (a 256 MB sweep and a 64 MB table, freed
 * before training) do not count as the training's peak. Where it cannot,
 * the peak is the process's. */
static void reset_peak_rss(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f == NULL) return;
  fputs("5", f);
  fclose(f);
}

/* What the rest of a step touches on a rank, for the cost model's cache
 * (gs_shard_config.step_bytes): the MLPs' weights with their gradients and
 * the optimizer's copy (3 floats a parameter); for each of the rank's B
 * samples every layer's output and its gradient, the interaction's input
 * (T + 1 vectors of D) and output and their gradients (2 floats each). The
 * pooled vectors of the rank's shards the cost model counts itself, shard
 * by shard (gs_cost_cache_time). An estimate from the shapes: the caches
 * see what is touched, not what is allocated. */
static double step_bytes(const gs_dlrm_train_config *cfg, size_t D) {
  int bw[GS_DLRM_MAX_LAYERS + 1], tw[GS_DLRM_MAX_LAYERS + 1], nb = 0, nt = 0;
  if (gs_dlrm_mlp_parse(cfg->model.bottom_mlp, bw, GS_DLRM_MAX_LAYERS + 1, &nb) != GS_OK ||
      gs_dlrm_mlp_parse(cfg->model.top_mlp, tw + 1, GS_DLRM_MAX_LAYERS, &nt) != GS_OK)
    return 0.0;
  double T = cfg->model.ntables, B = (double)cfg->batch, params = 0, acts = 0;
  tw[0] = (int)(cfg->model.interaction == GS_DLRM_DOT ? (double)D + T * (T + 1) / 2
                                                      : (T + 1) * (double)D);
  for (int i = 0; i + 1 < nb; i++) params += bw[i] * (bw[i + 1] + 1.0), acts += bw[i + 1];
  for (int i = 0; i < nt; i++) params += tw[i] * (tw[i + 1] + 1.0), acts += tw[i + 1];
  acts += (T + 1) * (double)D + tw[0];
  if (cfg->model.interaction == GS_DLRM_DCN) {
    int L;
    size_t rank;
    dlrm_dcn_shape(&cfg->model, (size_t)tw[0], &L, &rank);
    double W = tw[0], r = (double)rank;
    params += L * (2.0 * r * W + W);
    acts += L * (r + 2.0 * W);
  }
  return 4.0 * (3.0 * params + 2.0 * B * acts);
}

/* What a rank brings to the lookup cost's agreement: its cost (measured,
 * or the one it was given) and whether it was given. */
typedef struct lookup_vote {
  gs_cost_lookup lk;
  double given; /* 1: cfg->lookup; 0: measured */
} lookup_vote;

/* The mean, field by field, of every rank's measured lookup cost (the
 * agreement's payloads, in rank order: every rank computes the same). */
static gs_cost_lookup mean_lookup(const gs_agreement *a) {
  enum { NF = sizeof(gs_cost_lookup) / sizeof(double) };
  _Static_assert(sizeof(gs_cost_lookup) == NF * sizeof(double), "gs_cost_lookup: doubles only");
  double sum[NF] = {0};
  for (int r = 0; r < a->size; r++) {
    const lookup_vote *v = (const lookup_vote *)a->payloads + r;
    const double *f = (const double *)&v->lk;
    for (int k = 0; k < NF; k++) sum[k] += f[k];
  }
  gs_cost_lookup m;
  double *mf = (double *)&m;
  for (int k = 0; k < NF; k++) mf[k] = sum[k] / a->size;
  return m;
}

/* A given lookup cost is every rank's alike, or the ranks would plan apart:
 * the first rank whose cost (or its being given at all) differs from rank
 * 0's. Every rank sees the same payloads, so every rank decides the same.
 * GS_OK, or GS_ERR_INVALID_ARG naming that rank. */
static gs_status same_given_lookup(const gs_agreement *a) {
  const lookup_vote *v = a->payloads;
  for (int r = 1; r < a->size; r++) {
    if (v[r].given == v[0].given && (v[0].given == 0 || memcmp(&v[r].lk, &v[0].lk,
                                                               sizeof v[0].lk) == 0))
      continue;
    gs_status st =
        v[r].given != v[0].given
            ? gs_error(GS_ERR_INVALID_ARG, "DLRM lookup cost: given to rank %d and not to "
                       "rank %d (give it to every rank or to none)", v[r].given ? r : 0,
                       v[r].given ? 0 : r)
            : gs_error(GS_ERR_INVALID_ARG, "DLRM lookup cost: rank %d was given another than "
                       "rank 0's (alpha %g and %g s, beta %g and %g s a byte, ...): every "
                       "rank must be given the same", r, v[r].lk.alpha, v[0].lk.alpha,
                       v[r].lk.beta, v[0].lk.beta);
    gs__error_mark_shared(); /* every rank says the same */
    return st;
  }
  return GS_OK;
}

/* The plan every rank makes alike. Unless the lookup cost is given
 * (cfg->lookup), every rank measures it at once (after an agreement on the
 * plan file, so that they start together), so that ranks sharing a host's
 * memory and its shared cache measure each other's traffic as their
 * lookups meet it in training (measured alone, rank 0's prices were 9-21%
 * under 2 ranks' measured lookup times on one host, within 8% for 1 rank);
 * the price is the mean of the ranks', agreed with the network's (the
 * communicator's agreed cost model). A given cost is checked on every rank
 * and agreed too (one small all-gather, no measurement): another on any
 * rank, or one refused, fails every rank. A failure is every rank's. The
 * lookup cost is had whatever the plan (*lookup_out: the per-rank
 * predictions the epochs report are priced with it); a forced sharding is
 * placed with a fixed one, as before. */
static gs_status make_plan(const gs_dlrm_train_config *cfg, gs_comm *comm,
                           const gs_embed_spec *specs, gs_shard_plan **out,
                           gs_cost_lookup *lookup_out) {
  int P = gs_comm_size(comm);
  gs_status st = GS_OK;
  char msg[GS_VOTE_MESSAGE] = "";
  gs_cost_lookup lk = {0};
  if (cfg->plan_file && *out == NULL)
    st = gs_shard_plan_load(cfg->plan_file, specs, cfg->model.ntables, P, out);
  /* A plan made for plain SGD priced no row-wise Adagrad state: under a
   * memory cap its ranks may not hold it. (One made for Adagrad serves
   * SGD: it priced more than SGD keeps.) */
  if (st == GS_OK && cfg->plan_file && !(*out)->row_state &&
      cfg->optim.embed.kind == GS_EMBED_ROWWISE_ADAGRAD)
    st = gs_error(GS_ERR_INVALID_ARG, "sharding plan %s: made for plain SGD on the tables "
                  "(\"row_state\": false: no Adagrad state priced), and this run trains them "
                  "with row-wise Adagrad: give --embed-sgd, or make the plan without "
                  "--embed-sgd", cfg->plan_file);
  if (st != GS_OK) gs__error_copy(msg, sizeof msg);
  gs_agreement a;
  GS_CHECK(gs_agree(comm, gs_comm_mpi(comm), "DLRM plan", st, msg, NULL, 0, &a));
  if (st == GS_OK && a.failed)
    st = gs_error((gs_status)a.votes[a.first].status, "DLRM plan on rank %d: %s", a.first,
                  a.votes[a.first].message);
  else if (st != GS_OK && gs_agreement_unanimous(&a))
    gs__error_mark_shared(); /* one file, one message: said once */
  gs_agreement_free(&a);
  if (st == GS_OK) {
    lookup_vote mine = {.given = cfg->lookup != NULL};
    if (cfg->lookup == NULL) {
      st = gs_embed_calibrate_job(specs, cfg->model.ntables, cfg->batch * (size_t)P, P,
                                  &mine.lk);
      reset_peak_rss(); /* its buffers are freed: not the training's peak */
    } else if (gs_cost_lookup_check(cfg->lookup) != GS_OK) {
      char why[GS_VOTE_MESSAGE];
      gs__error_copy(why, sizeof why);
      st = gs_error(GS_ERR_INVALID_ARG, "the given %s (gs_dlrm_train_config's lookup)", why);
    } else {
      mine.lk = *cfg->lookup;
    }
    if (st != GS_OK) gs__error_copy(msg, sizeof msg);
    GS_CHECK(gs_agree(comm, gs_comm_mpi(comm), "DLRM lookup cost", st, msg, &mine,
                      sizeof mine, &a));
    if (st == GS_OK && a.failed)
      st = gs_error((gs_status)a.votes[a.first].status, "DLRM lookup cost on rank %d: %s",
                    a.first, a.votes[a.first].message);
    else if (st != GS_OK && gs_agreement_unanimous(&a))
      gs__error_mark_shared(); /* the same cost refused alike: said once */
    if (st == GS_OK) st = same_given_lookup(&a);
    if (st == GS_OK) lk = mine.given ? mine.lk : mean_lookup(&a);
    gs_agreement_free(&a);
  }
  *lookup_out = lk;
  if (st != GS_OK || *out != NULL) {
    if (st != GS_OK && cfg->plan_file) {
      gs_shard_plan_free(*out);
      *out = NULL;
    }
    return st;
  }
  gs_shard_config sc = {.ranks = P,
                        .ranks_per_node = cfg->ranks_per_node > 0 ? cfg->ranks_per_node
                                                                  : gs_comm_local_size(comm),
                        .batch = (double)(cfg->batch * (size_t)P),
                        .wire_elem_bytes = cfg->precision == GS_DLRM_A2A_FP32 ? 4 : 2,
                        .force = cfg->sharding,
                        .mem_cap = 0,
                        .row_sums = cfg->optim.embed.kind == GS_EMBED_ROWWISE_ADAGRAD,
                        .zipf = ids_zipf(cfg),
                        .step_bytes = step_bytes(cfg, specs[0].dim)};
  if (P % sc.ranks_per_node != 0) sc.ranks_per_node = 1;
  sc.net = *gs_comm_cost(comm);
  sc.lookup = cfg->sharding < 0 ? lk : (gs_cost_lookup){.alpha = 2e-8, .beta = 1e-10};
  return gs_shard_plan_make(specs, cfg->model.ntables, &sc, out);
}

/* The cost model's lookup time a step on each rank (ms): every shard's
 * lookups, forward and fused backward, priced as the planner prices them
 * where they are (gs_shard_plan_price: each rank with its own cache) with
 * the measured lookup cost, summed over the shards a rank holds (a dp
 * table: every rank its share of the batch). */
static gs_status predict_lookups(const gs_dlrm_train_config *cfg, const gs_embed_spec *specs,
                                 const gs_shard_plan *plan, const gs_cost_lookup *lk,
                                 double *ms, double *shard_ms) {
  gs_shard_config sc = {.ranks = plan->ranks, .ranks_per_node = 1,
                        .batch = (double)(cfg->batch * (size_t)plan->ranks),
                        .wire_elem_bytes = 4, .lookup = *lk,
                        .row_sums = cfg->optim.embed.kind == GS_EMBED_ROWWISE_ADAGRAD,
                        .zipf = ids_zipf(cfg),
                        .step_bytes = step_bytes(cfg, specs[0].dim)};
  gs_cost_shard_out *o = gs_malloc((plan->nshards + 1) * sizeof *o);
  if (o == NULL) return gs_error(GS_ERR_NOMEM, "out of memory pricing %zu shards", plan->nshards);
  gs_status st = gs_shard_plan_price(plan, specs, &sc, o);
  for (size_t i = 0; st == GS_OK && i < plan->nshards; i++) {
    const gs_shard *sh = &plan->shards[i];
    shard_ms[i] = o[i].total_s != -1.0 ? 1e3 * o[i].lookup_s : 0; /* -1: no kind */
    if (sh->rank >= 0 && sh->rank < plan->ranks) ms[sh->rank] += shard_ms[i];
  }
  gs_free(o);
  return st;
}

/* The last steps' lookup times (ms), this rank's and each of its shards',
 * for the medians an epoch reports: the cost model prices a step in its
 * stride, and the median leaves out the epoch's first steps (the buffers'
 * first touch) and the steps another process took the core from. */
enum { STEP_WINDOW = 256 };
typedef struct step_window {
  size_t cap, n, nshards;  /* steps kept (at most STEP_WINDOW), recorded */
  double *rank, *shard;    /* cap; cap x nshards, step-major */
  double *before, *after;  /* nshards: the shards' running sums */
  double rank_before, *tmp; /* tmp: cap */
} step_window;

static gs_status window_init(step_window *w, size_t steps, size_t nshards) {
  w->cap = steps < STEP_WINDOW ? (steps > 0 ? steps : 1) : STEP_WINDOW;
  w->nshards = nshards;
  w->rank = gs_calloc(w->cap, sizeof *w->rank);
  w->shard = gs_calloc(w->cap * nshards + 1, sizeof *w->shard);
  w->before = gs_calloc(nshards + 1, sizeof *w->before);
  w->after = gs_calloc(nshards + 1, sizeof *w->after);
  w->tmp = gs_calloc(w->cap, sizeof *w->tmp);
  if (!w->rank || !w->shard || !w->before || !w->after || !w->tmp)
    return gs_error(GS_ERR_NOMEM, "out of memory for %zu steps' lookup times", w->cap);
  return GS_OK;
}

static void window_free(step_window *w) {
  gs_free(w->rank);
  gs_free(w->shard);
  gs_free(w->before);
  gs_free(w->after);
  gs_free(w->tmp);
}

static void window_before(step_window *w, const gs_dlrm_dist *d) {
  gs_dlrm_dist_stats s;
  gs_dlrm_dist_stats_get(d, &s);
  w->rank_before = s.lookup_s;
  memset(w->before, 0, w->nshards * sizeof *w->before);
  gs_dlrm_dist_shard_lookup_s(d, w->before);
}

static void window_after(step_window *w, const gs_dlrm_dist *d) {
  gs_dlrm_dist_stats s;
  gs_dlrm_dist_stats_get(d, &s);
  memset(w->after, 0, w->nshards * sizeof *w->after);
  gs_dlrm_dist_shard_lookup_s(d, w->after);
  size_t at = w->n % w->cap;
  w->rank[at] = 1e3 * (s.lookup_s - w->rank_before);
  for (size_t i = 0; i < w->nshards; i++)
    w->shard[at * w->nshards + i] = 1e3 * (w->after[i] - w->before[i]);
  w->n++;
}

/* The medians over the steps kept: *rank_ms, and shard_ms[i] for each
 * shard of the plan (0 for those on other ranks). */
static void window_medians(step_window *w, double *rank_ms, double *shard_ms) {
  size_t n = w->n < w->cap ? w->n : w->cap;
  memcpy(w->tmp, w->rank, n * sizeof *w->tmp);
  *rank_ms = gs__median(w->tmp, n);
  for (size_t i = 0; i < w->nshards; i++) {
    for (size_t k = 0; k < n; k++) w->tmp[k] = w->shard[k * w->nshards + i];
    shard_ms[i] = gs__median(w->tmp, n);
  }
}

/* Where samples come from: the synthetic generator (any sample at once) or
 * a Criteo file read forward (rewound for a sample before the position,
 * the lines between skipped unparsed). */
typedef struct data_src {
  gs_dlrm_synth *g;
  gs_criteo_reader *r;
  const char *path;
  size_t pos;        /* the file's next sample */
  size_t eval_first; /* the held-out set's first sample */
} data_src;

static gs_status src_fill(data_src *src, size_t first, size_t n, gs_dlrm_batch *b) {
  if (src->g) return gs_dlrm_synth_fill(src->g, first, n, b);
  if (first < src->pos) {
    GS_CHECK(gs_criteo_rewind(src->r));
    src->pos = 0;
  }
  size_t skipped = 0, got = 0;
  GS_CHECK(gs_criteo_skip(src->r, first - src->pos, &skipped));
  src->pos += skipped;
  if (src->pos == first) {
    size_t keep = b->max_n;
    b->max_n = n; /* exactly n lines */
    gs_status st = gs_criteo_read(src->r, b, &got);
    b->max_n = keep;
    GS_CHECK(st);
    src->pos += got;
  }
  if (got < n)
    return gs_error(GS_ERR_INVALID_ARG, "Criteo file '%s': %zu samples, fewer than the run "
                    "needs (samples %zu to %zu: the training set is steps x ranks x batch, "
                    "the held-out samples follow it)", src->path, src->pos, first,
                    first + n - 1);
  return GS_OK;
}

/* A batch of this rank's samples, the outcome agreed before the collective
 * step that uses it: a file can end, or hold a bad line, on one rank's
 * slice only, and a rank that stopped there would leave the others in the
 * step's all-to-all. Synthetic samples cannot fail: no agreement. `what`
 * names the phase in a failure seen on another rank. */
static gs_status fill_agreed(gs_comm *comm, data_src *src, size_t first, size_t n,
                             gs_dlrm_batch *b, const char *what) {
  gs_status lst = src_fill(src, first, n, b);
  if (src->g) return lst;
  char msg[GS_VOTE_MESSAGE] = "";
  if (lst != GS_OK) gs__error_copy(msg, sizeof msg);
  gs_agreement a;
  GS_CHECK(gs_agree(comm, gs_comm_mpi(comm), what, lst, msg, NULL, 0, &a));
  gs_status st = GS_OK;
  if (a.failed)
    st = lst != GS_OK ? gs_error(lst, "%s", msg)
                      : gs_error((gs_status)a.votes[a.first].status, "%s on rank %d: %s", what,
                                 a.first, a.votes[a.first].message);
  gs_agreement_free(&a);
  return st;
}

/* AUC, log loss, NE and calibration over the held-out samples: every rank evaluates its
 * slices, the logits and labels are gathered on every rank. */
static gs_status evaluate(const gs_dlrm_train_config *cfg, gs_comm *comm, gs_dlrm_dist *d,
                          data_src *src, gs_dlrm_batch *b, size_t rounds, float *all,
                          float *labels, double *auc, double *ll, double *teacher,
                          const char **auc_why, double *ne, double *calibration) {
  size_t P = (size_t)gs_comm_size(comm), r = (size_t)gs_comm_rank(comm), B = cfg->batch;
  size_t R = rounds * P * B, N = cfg->eval_samples; /* read, and evaluated (N <= R) */
  float *mine = gs_malloc(2 * rounds * B * sizeof(float));
  if (mine == NULL) return gs_error(GS_ERR_NOMEM, "DLRM evaluation: out of memory");
  gs_status st = GS_OK;
  for (size_t k = 0; k < rounds && st == GS_OK; k++) {
    st = fill_agreed(comm, src, src->eval_first + (k * P + r) * B, B, b, "DLRM held-out data");
    if (st == GS_OK) st = gs_dlrm_dist_forward(d, b, mine + k * B);
    if (st == GS_OK) memcpy(mine + rounds * B + k * B, b->labels, B * sizeof(float));
  }
  /* Rank-major: rank r's logits of every round, then its labels. */
  if (st == GS_OK)
    st = gs_allgather(comm, mine, all, 2 * rounds * B, GS_F32, GS_ALGO_AUTO);
  gs_free(mine);
  GS_CHECK(st);
  /* Back in the held-out set's order (its sample (k P + q) B + j is rank
   * q's j-th of round k), so that the first N are the ones evaluated. */
  float *logits = labels + R;
  for (size_t q = 0; q < P; q++)
    for (size_t k = 0; k < rounds; k++) {
      const float *from = all + q * 2 * rounds * B + k * B;
      memcpy(logits + (k * P + q) * B, from, B * sizeof(float));
      memcpy(labels + (k * P + q) * B, from + rounds * B, B * sizeof(float));
    }
  GS_CHECK(gs_metric_log_loss(logits, labels, N, ll));
  (void)gs_metric_ne(logits, labels, N, ne, calibration); /* NaN where undefined */
  *auc_why = NULL;
  if (gs_metric_auc(logits, labels, N, auc) != GS_OK) {
    *auc = NAN;
    size_t pos = 0;
    for (size_t i = 0; i < N; i++) pos += labels[i] == 1.0f;
    *auc_why = pos == 0 || pos == N ? "the held-out labels are all one class"
                                    : "a held-out score is not a number";
  }
  if (!src->g || gs_dlrm_synth_teacher_auc(src->g, EVAL_FIRST, N, teacher) != GS_OK)
    *teacher = NAN; /* a file has no teacher */
  return GS_OK;
}

/* The error of a phase of the run (a training step, its data, the
 * evaluation), its message prefixed with the phase. What is refused there
 * (a loss of infinite logits, an id out of range, a malformed line or the
 * end of a data file) is a failure of the run, found after work began, not
 * of the caller's arguments: GS_ERR_STATE (exit 1 in the CLI). */
static gs_status in_phase(gs_status st, const char *fmt, ...) {
  char phase[128], msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(phase, sizeof phase, fmt, ap);
  va_end(ap);
  gs__error_copy(msg, sizeof msg);
  int input = st == GS_ERR_INVALID_ARG || st == GS_ERR_PARSE || st == GS_ERR_IO;
  return gs_error(input ? GS_ERR_STATE : st, "%s: %s", phase, msg);
}

/* A commit put in place: its event (stop: the run stops after it). */
static void commit_event(const dlrm_ckpt_done *done, int stop, gs_dlrm_train_cb cb, void *user) {
  if (done->step == 0) return;
  gs_dlrm_train_event ce = {.kind = GS_DLRM_EV_COMMIT, .global_step = done->step,
                            .commit_s = done->stall_s, .commit_bytes = done->bytes,
                            .stopped = stop, .published_step = done->published_step,
                            .write_s = done->write_s};
  emit(cb, user, &ce);
}

/* The commit in the background, if any, put in place after global step
 * gstep (dlrm_ckpt_publish), and its event. */
static gs_status publish(dlrm_ckpt *ck, gs_dlrm_dist *d, size_t gstep, gs_dlrm_train_cb cb,
                         void *user) {
  dlrm_ckpt_done done;
  GS_CHECK(dlrm_ckpt_publish(ck, d, gstep, &done));
  commit_event(&done, 0, cb, user);
  return GS_OK;
}

/* A commit after global step gstep: the one still in the background put in
 * place first; this one in the background unless the run stops after it
 * or it is the run's last (last). */
static gs_status commit(dlrm_ckpt *ck, gs_dlrm_dist *d, const gs_shard_plan *plan, size_t gstep,
                        double lsum, int stop, int last, gs_dlrm_train_cb cb, void *user) {
  GS_CHECK(publish(ck, d, gstep, cb, user));
  dlrm_ckpt_done done;
  GS_CHECK(dlrm_ckpt_commit(ck, d, plan, gstep, lsum, !stop && !last, &done));
  commit_event(&done, stop, cb, user);
  return GS_OK;
}

/* The run's timeline (cfg->timeline, else GRADSYNC_TIMELINE; none when
 * empty), opened on every rank or none. Collective. */
static gs_status open_timeline(const gs_dlrm_train_config *cfg, gs_comm *comm,
                               gs__timeline **tl) {
  const char *path = cfg->timeline ? cfg->timeline : getenv("GRADSYNC_TIMELINE");
  gs_status mine = GS_OK;
  *tl = NULL;
  if (path && *path) {
    static const char *const tracks[] = {"compute", "comm", "steps", "checkpoint"};
    mine = gs__timeline_open(path, gs_comm_rank(comm), gs_comm_size(comm), "DLRM training",
                             "GRADSYNC_TIMELINE or the config's timeline", tracks, 4, tl);
  }
  char msg[GS_VOTE_MESSAGE] = "";
  if (mine != GS_OK) gs__error_copy(msg, sizeof msg);
  gs_agreement a;
  GS_CHECK(gs_agree(comm, gs_comm_mpi(comm), "DLRM timeline", mine, msg, NULL, 0, &a));
  gs_status st = GS_OK;
  if (a.failed)
    st = mine != GS_OK ? gs_error(mine, "%s", msg)
                       : gs_error((gs_status)a.votes[a.first].status, "rank %d: %s", a.first,
                                  a.votes[a.first].message);
  gs_agreement_free(&a);
  if (st != GS_OK) {
    gs__timeline_free(*tl);
    *tl = NULL;
  }
  return st;
}

/* A span of the run's on the timeline (none: nothing). */
static void trace(gs__timeline *tl, int track, double t0, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void trace(gs__timeline *tl, int track, double t0, const char *fmt, ...) {
  if (tl == NULL) return;
  double t1 = gs_now();
  char name[96];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  gs__timeline_event(tl, track, name, (uint64_t)(t0 * 1e9), (uint64_t)(t1 * 1e9), NULL);
}

/* ---- The options every rank must share ------------------------------------ */

/* One option as a rank was given it: a whole number, a real (its bits) or
 * a text's (or a set's) hash. */
enum { OPT_WHOLE, OPT_REAL, OPT_HASH };
typedef struct run_opt {
  const char *label;
  int kind;
  uint64_t v;
} run_opt;
enum { NRUN_OPTS = 32 }; /* room for the options run_options lists */

static uint64_t real_bits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

/* Every option that the ranks' collectives, plans or replicas depend on,
 * in the order a difference is named. A launcher gives each rank its own
 * command line (a wrapper, a host's own script): until 2026-12-06 another
 * --steps or --batch hung the job, another --bottom-mlp failed inside MPI,
 * and another --seed or --lr trained apart in silence. */
static size_t run_options(const gs_dlrm_train_config *cfg, run_opt *o) {
  size_t n = 0;
  const gs_dlrm_config *m = &cfg->model;
  uint64_t tables = GS_FNV1A_BASIS;
  for (int t = 0; t < m->ntables && m->tables; t++) {
    uint64_t v[2] = {m->tables[t].rows, real_bits(m->tables[t].pooling)};
    tables = gs_fnv1a(gs_fnv1a_str(tables, m->tables[t].name), v, sizeof v);
  }
  const gs_dlrm_synth_config *g = &cfg->data;
  double synth[] = {g->zipf_s, g->pooling, g->pooling_random, g->scramble,
                    g->teacher_bias, g->dense_std, g->sparse_std, g->table_pooling};
#define OPT(label, kind, v) o[n++] = (run_opt){label, kind, (uint64_t)(v)}
  OPT("the batch per rank (--batch, or --global-batch over the ranks)", OPT_WHOLE, cfg->batch);
  OPT("the steps per epoch (--steps)", OPT_WHOLE, cfg->steps);
  OPT("the epochs (--epochs)", OPT_WHOLE, cfg->epochs);
  OPT("the held-out samples (--eval)", OPT_WHOLE, cfg->eval_samples);
  OPT("the seed (--seed)", OPT_WHOLE, m->seed);
  OPT("the tables (--tables: their names, rows and pooling)", OPT_HASH, tables);
  OPT("the tables' count (--tables)", OPT_WHOLE, m->ntables);
  OPT("the bottom MLP (--bottom-mlp)", OPT_HASH, gs_fnv1a_str(GS_FNV1A_BASIS, m->bottom_mlp));
  OPT("the top MLP (--top-mlp)", OPT_HASH, gs_fnv1a_str(GS_FNV1A_BASIS, m->top_mlp));
  OPT("the interaction (--interaction, 0 dot, 1 cat, 2 dcn)", OPT_WHOLE, m->interaction);
  OPT("dcn's cross layers (--dcn-layers; 0 the default)", OPT_WHOLE, m->dcn_layers);
  OPT("dcn's rank (--dcn-rank; 0 the default)", OPT_WHOLE, m->dcn_rank);
  OPT("the MLPs' learning rate (--lr)", OPT_REAL, real_bits(cfg->optim.mlp_lr));
  OPT("the tables' optimizer (--embed-sgd: 0 row-wise Adagrad, 1 SGD)", OPT_WHOLE,
      cfg->optim.embed.kind != GS_EMBED_ROWWISE_ADAGRAD);
  OPT("the tables' learning rate (--embed-lr)", OPT_REAL, real_bits(cfg->optim.embed.lr));
  OPT("row-wise Adagrad's epsilon", OPT_REAL, real_bits(cfg->optim.embed.eps));
  OPT("a Criteo file (--data: 1 given, 0 not)", OPT_WHOLE, cfg->criteo_file != NULL);
  OPT("the vocabulary's threshold (--frequency-threshold)", OPT_WHOLE, cfg->criteo_min_count);
  OPT("the synthetic data (--zipf, --pooling)", OPT_HASH,
      cfg->criteo_file ? 0 : gs_fnv1a(GS_FNV1A_BASIS, synth, sizeof synth));
  OPT("the sharding (--sharding)", OPT_WHOLE, cfg->sharding + 1);
  OPT("the all-to-all's precision (--a2a-precision: 0 fp32, 1 fp16, 2 bf16)", OPT_WHOLE,
      cfg->precision);
  OPT("sending the next batch's ids ahead (--no-prefetch: 1 off)", OPT_WHOLE, cfg->no_prefetch);
  OPT("the MLP gradients' policy (--policy)", OPT_HASH,
      gs_fnv1a_str(GS_FNV1A_BASIS, cfg->mlp_policy ? cfg->mlp_policy : "fused"));
  OPT("the commits (--commit-every)", OPT_WHOLE, cfg->checkpoint_dir ? cfg->commit_every : 0);
  OPT("the stop (--stop-at-step)", OPT_WHOLE, cfg->checkpoint_dir ? cfg->stop_at_step : 0);
  OPT("resuming (--resume: 1, =auto: 2)", OPT_WHOLE, cfg->checkpoint_dir ? cfg->resume : 0);
#undef OPT
  return n;
}

/* The first collective of a run: every rank's options against rank 0's
 * (and each rank's own check of them), the first difference named alike
 * on every rank (said once; a usage error, exit 2 on the command line). */
static gs_status same_options(const gs_dlrm_train_config *cfg, gs_comm *comm, gs_status mine) {
  run_opt o[NRUN_OPTS];
  uint64_t v[NRUN_OPTS] = {0};
  size_t n = run_options(cfg, o);
  for (size_t i = 0; i < n; i++) v[i] = o[i].v;
  char msg[GS_VOTE_MESSAGE] = "";
  if (mine != GS_OK) gs__error_copy(msg, sizeof msg);
  gs_agreement a;
  GS_CHECK(gs_agree(comm, gs_comm_mpi(comm), "DLRM options", mine, msg, v, sizeof v, &a));
  gs_status st = mine;
  if (st == GS_OK && a.failed)
    st = gs_error((gs_status)a.votes[a.first].status, "DLRM training on rank %d: %s", a.first,
                  a.votes[a.first].message);
  else if (st != GS_OK && gs_agreement_unanimous(&a))
    gs__error_mark_shared();
  const uint64_t *all = a.payloads;
  for (size_t i = 0; i < n && st == GS_OK; i++)
    for (int r = 1; r < a.size && st == GS_OK; r++) {
      uint64_t x = all[i], y = all[(size_t)r * NRUN_OPTS + i];
      if (x == y) continue;
      char vals[96];
      double dx, dy;
      memcpy(&dx, &x, sizeof dx);
      memcpy(&dy, &y, sizeof dy);
      if (o[i].kind == OPT_WHOLE)
        snprintf(vals, sizeof vals, "is %llu on rank 0 and %llu on rank %d",
                 (unsigned long long)x, (unsigned long long)y, r);
      else if (o[i].kind == OPT_REAL)
        snprintf(vals, sizeof vals, "is %g on rank 0 and %g on rank %d", dx, dy, r);
      else
        snprintf(vals, sizeof vals, "differs between rank 0 and rank %d", r);
      st = gs_error(GS_ERR_INVALID_ARG, "the ranks were given different options: %s %s "
                    "(every rank must be given the same)", o[i].label, vals);
      gs__error_mark_shared(); /* every rank finds the same first difference */
    }
  gs_agreement_free(&a);
  return st;
}

/* Whether a Criteo file fits the model and holds the samples the run
 * reads: its first steps x P x B lines train, and the held-out set follows
 * in whole rounds of P x B (evaluate). The model's shape is the options',
 * every rank's alike (agreed before): a mismatch is said once. The lines
 * each rank counts on its own host (up to what the run needs: a plain file
 * at memory speed), the outcome agreed. */
static gs_status criteo_fits(const gs_dlrm_train_config *cfg, gs_comm *comm,
                             const gs_embed_spec *specs, int ndense) {
  size_t P = (size_t)gs_comm_size(comm), B = cfg->batch;
  int T = cfg->model.ntables;
  gs_dlrm_synth_config sc = cfg->data;
  sc.tables = specs;
  sc.ntables = T;
  int maxpool = gs_dlrm_synth_max_pooling(&sc);
  if (ndense != GS_CRITEO_DENSE || T != GS_CRITEO_SPARSE || maxpool != 1) {
    gs_status st = gs_error(GS_ERR_INVALID_ARG, "Criteo file '%s': its samples have %d dense "
                            "features, %d tables and one id per bag; this model has %d, %d "
                            "and pooling %d", cfg->criteo_file, GS_CRITEO_DENSE,
                            GS_CRITEO_SPARSE, ndense, T, maxpool);
    gs__error_mark_shared();
    return st;
  }
  size_t train = cfg->steps * P * B, rounds = (cfg->eval_samples + P * B - 1) / (P * B);
  size_t need = train + rounds * P * B, lines = 0;
  gs_status mine = gs_criteo_count_lines(cfg->criteo_file, need, &lines);
  if (mine == GS_OK && lines < need) {
    char held[160] = "";
    if (rounds > 0)
      snprintf(held, sizeof held, " and %zu held out (--eval %zu, read in whole steps of "
               "%zu)", rounds * P * B, cfg->eval_samples, P * B);
    mine = gs_error(GS_ERR_INVALID_ARG, "Criteo file '%s' has %zu line%s; the run needs %zu: "
                    "%zu steps x %zu samples (the global batch) to train%s", cfg->criteo_file,
                    lines, lines == 1 ? "" : "s", need, cfg->steps, P * B, held);
  }
  char msg[GS_VOTE_MESSAGE] = "";
  if (mine != GS_OK) gs__error_copy(msg, sizeof msg);
  gs_agreement a;
  GS_CHECK(gs_agree(comm, gs_comm_mpi(comm), "the Criteo file's lines", mine, msg, NULL, 0, &a));
  gs_status st = mine;
  if (st == GS_OK && a.failed)
    st = gs_error((gs_status)a.votes[a.first].status, "the Criteo file on rank %d: %s",
                  a.first, a.votes[a.first].message);
  else if (st != GS_OK && gs_agreement_unanimous(&a))
    gs__error_mark_shared(); /* one file, one message: said once */
  gs_agreement_free(&a);
  return st;
}

gs_status gs_dlrm_train_run(const gs_dlrm_train_config *cfg, gs_comm *comm,
                            gs_dlrm_train_cb cb, void *user) {
  if (cfg == NULL || comm == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM training: NULL config or communicator");
  gs_status own = GS_OK;
  if (cfg->batch == 0 || cfg->epochs < 1 || cfg->steps == 0)
    own = gs_error(GS_ERR_INVALID_ARG, "DLRM training: batch %zu, %d epochs, %zu steps an "
                   "epoch (each at least 1)", cfg->batch, cfg->epochs, cfg->steps);
  GS_CHECK(same_options(cfg, comm, own));
  size_t P = (size_t)gs_comm_size(comm), rank = (size_t)gs_comm_rank(comm), B = cfg->batch;
  int T = cfg->model.ntables;
  gs_dlrm_config mc = cfg->model;
  mc.max_batch = B;
  gs_embed_spec *specs = gs_calloc(T > 0 ? (size_t)T : 1, sizeof *specs);
  gs_embed_spec *tables = gs_calloc(T > 0 ? (size_t)T : 1, sizeof *tables);
  if (specs == NULL || tables == NULL) {
    gs_free(specs);
    gs_free(tables);
    return gs_error(GS_ERR_NOMEM, "DLRM training: out of memory");
  }
  int widths[GS_DLRM_MAX_LAYERS + 1], nw = 0;
  gs_status st = gs_dlrm_mlp_parse(mc.bottom_mlp, widths, GS_DLRM_MAX_LAYERS + 1, &nw);
  for (int t = 0; t < T && st == GS_OK; t++) {
    tables[t] = mc.tables[t];
    specs[t] = mc.tables[t];
    specs[t].dim = (size_t)widths[nw - 1];
  }
  mc.tables = tables;
  /* A Criteo file that cannot feed this run is refused before anything is
   * counted, priced or sharded (the plan and the lookup cost were printed
   * before, and a file too short failed in the step that ran out). */
  if (st == GS_OK && cfg->criteo_file) st = criteo_fits(cfg, comm, specs, widths[0]);
  /* A Criteo file's vocabulary, before anything is priced or sharded: it
   * sets the tables' rows. */
  gs_criteo_vocab *vocab = NULL;
  double vocab_s = gs_now();
  if (st == GS_OK && cfg->criteo_file && cfg->criteo_min_count > 0) {
    gs_status vst = T == GS_CRITEO_SPARSE
                        ? gs_criteo_vocab_build_comm(cfg->criteo_file, cfg->steps * P * B,
                                                     cfg->criteo_min_count, comm, &vocab)
                        : gs_error(GS_ERR_INVALID_ARG, "Criteo file '%s': %d tables, the file "
                                   "has %d categorical features", cfg->criteo_file, T,
                                   GS_CRITEO_SPARSE);
    char vmsg[GS_VOTE_MESSAGE] = "";
    if (vst != GS_OK) gs__error_copy(vmsg, sizeof vmsg);
    gs_agreement va;
    st = gs_agree(comm, gs_comm_mpi(comm), "the Criteo file's vocabulary", vst, vmsg, NULL, 0,
                  &va);
    if (st == GS_OK) {
      if (vst != GS_OK) {
        st = gs_error(vst, "%s", vmsg);
        if (gs_agreement_unanimous(&va)) gs__error_mark_shared(); /* one file: said once */
      } else if (va.failed) {
        st = gs_error((gs_status)va.votes[va.first].status, "the Criteo file's vocabulary "
                      "on rank %d: %s", va.first, va.votes[va.first].message);
      }
      gs_agreement_free(&va);
    }
    vocab_s = gs_now() - vocab_s;
    for (int t = 0; t < T && st == GS_OK; t++) {
      size_t rows = gs_criteo_vocab_rows(vocab, t);
      if (rows < specs[t].rows) specs[t].rows = tables[t].rows = rows;
    }
    if (st != GS_OK) {
      gs_criteo_vocab_free(vocab);
      gs_free(specs);
      gs_free(tables);
      return st;
    }
  }
  gs_shard_plan *plan = NULL;
  gs_dlrm_dist *d = NULL;
  size_t base_rss = 0, base_alloc = 0; /* before the rank's tables and model exist */
  data_src src = {.path = cfg->criteo_file, .eval_first = EVAL_FIRST};
  gs_dlrm_batch b = {0}, b2 = {0}; /* this step's and the next's */
  float *all = NULL, *labels = NULL;
  dlrm_ckpt *ck = NULL;
  gs__timeline *tl = NULL;
  double *pred_ms = NULL, *meas_ms = NULL; /* per rank: lookup ms a step */
  double *mem = NULL; /* per rank, 4 arrays: peak, base (resident bytes), allocated, shards' */
  double *shard_pred = NULL, *shard_meas = NULL; /* per shard of the plan: the same */
  step_window win = {0};
  size_t start = 0;
  double resumed_lsum = 0;
  /* The checkpoint directory, and the commit to resume from with its plan
   * (agreed: every rank reaches it whatever failed before). */
  gs_status pst = dlrm_ckpt_open(cfg, comm, specs, &ck, &plan);
  if (st == GS_OK) st = pst;
  if (st != GS_OK) goto out;
  int from_ranks = 0;
  size_t from_step = 0, from_gb = 0;
  int resumed = dlrm_ckpt_resumed(ck, &start, &resumed_lsum, &from_ranks, &from_step, &from_gb);
  /* A stop past the run's last step would never come (the options are
   * agreed: every rank refuses alike). */
  if (cfg->stop_at_step > (size_t)cfg->epochs * cfg->steps) {
    st = gs_error(GS_ERR_INVALID_ARG, "the stop at global step %zu comes after the run's last, "
                  "step %zu (%d epoch%s of %zu steps): give a step up to it, or none",
                  cfg->stop_at_step, (size_t)cfg->epochs * cfg->steps, cfg->epochs,
                  cfg->epochs == 1 ? "" : "s", cfg->steps);
    gs__error_mark_shared();
    goto out;
  }
  /* A stop at a step the checkpoint is at or past would never come (the
   * manifest is agreed: every rank refuses alike). */
  if (resumed && cfg->stop_at_step > 0 && start >= cfg->stop_at_step) {
    st = gs_error(GS_ERR_INVALID_ARG, "the stop at global step %zu comes at or before the "
                  "checkpoint's, in %s, at step %zu: nothing to train before it (give a "
                  "later step, or none)", cfg->stop_at_step, cfg->checkpoint_dir, start);
    gs__error_mark_shared();
    goto out;
  }
  /* Every rank reaches make_plan's agreement: without a plan of the
   * checkpoint's (none, or of another world size). */
  gs_cost_lookup lk;
  GS_CHECK_GOTO(make_plan(cfg, comm, specs, &plan, &lk), st, out);
  pred_ms = gs_calloc((size_t)P, sizeof *pred_ms);
  meas_ms = gs_calloc((size_t)P, sizeof *meas_ms);
  mem = gs_calloc(4 * (size_t)P, sizeof *mem);
  shard_pred = gs_calloc(plan->nshards + 1, sizeof *shard_pred);
  shard_meas = gs_calloc(plan->nshards + 1, sizeof *shard_meas);
  if (pred_ms == NULL || meas_ms == NULL || mem == NULL || shard_pred == NULL ||
      shard_meas == NULL)
    GS_CHECK_GOTO(gs_error(GS_ERR_NOMEM, "out of memory for %d ranks' lookup times", (int)P),
                  st, out);
  GS_CHECK_GOTO(predict_lookups(cfg, specs, plan, &lk, pred_ms, shard_pred), st, out);
  GS_CHECK_GOTO(window_init(&win, cfg->steps, plan->nshards), st, out);
  base_rss = rss_now();
  base_alloc = gs_mem_used();
  gs_mem_reset_peak();
  GS_CHECK_GOTO(gs_dlrm_dist_create(&mc, plan, comm, &d), st, out);
  gs_dlrm_dist_set_precision(d, cfg->precision);
  GS_CHECK_GOTO(open_timeline(cfg, comm, &tl), st, out);
  dlrm_dist_set_timeline(d, tl);
  dlrm_ckpt_set_timeline(ck, tl);
  GS_CHECK_GOTO(gs_dlrm_dist_set_mlp_policy(d, cfg->mlp_policy), st, out);
  double load_s = gs_now();
  if (resumed) GS_CHECK_GOTO(dlrm_ckpt_load(ck, d), st, out);
  load_s = gs_now() - load_s;
  gs_dlrm_train_event ev = {.kind = GS_DLRM_EV_PLAN, .plan = plan, .lookup = &lk,
                            .vocab = vocab, .vocab_s = vocab_s, .tables = specs};
  emit(cb, user, &ev);
  if (resumed) {
    gs_dlrm_train_event re = {.kind = GS_DLRM_EV_RESUME, .epoch = (int)(start / cfg->steps) + 1,
                              .step = start % cfg->steps, .steps = cfg->steps,
                              .global_step = start, .from_ranks = from_ranks,
                              .from_step = from_step, .from_global_batch = from_gb,
                              .commit_s = load_s};
    emit(cb, user, &re);
  }

  gs_dlrm_synth_config sc = cfg->data;
  sc.ndense = gs_dlrm_ndense(gs_dlrm_dist_model(d));
  sc.tables = specs;
  sc.ntables = T;
  sc.seed = cfg->model.seed;
  /* The held-out samples are read in whole rounds of ranks x batch (every
   * rank's forward is one batch); the first eval_samples are evaluated. */
  size_t rounds = (cfg->eval_samples + P * B - 1) / (P * B);
  int maxpool = gs_dlrm_synth_max_pooling(&sc);
  if (maxpool < 1) maxpool = 1; /* a bad table's pooling: gs_dlrm_synth_create says which */
  /* Every rank's set-up, agreed: a failure here would leave the others in
   * the first step's exchange. */
  gs_status lst = GS_OK;
  if (cfg->criteo_file) {
    src.eval_first = cfg->steps * P * B;
    if (sc.ndense != GS_CRITEO_DENSE || T != GS_CRITEO_SPARSE || maxpool != 1)
      lst = gs_error(GS_ERR_INVALID_ARG, "Criteo file '%s': its samples have %d dense "
                     "features, %d tables and one id per bag; this model has %zu, %d and "
                     "pooling %d", cfg->criteo_file, GS_CRITEO_DENSE, GS_CRITEO_SPARSE,
                     sc.ndense, T, maxpool);
    else
      lst = gs_criteo_open(cfg->criteo_file, specs, T, &src.r);
    if (lst == GS_OK) lst = gs_criteo_set_vocab(src.r, vocab);
  } else {
    lst = gs_dlrm_synth_create(&sc, &src.g);
  }
  if (lst == GS_OK) lst = gs_dlrm_batch_alloc(&b, B, sc.ndense, T, B * (size_t)maxpool);
  if (lst == GS_OK) lst = gs_dlrm_batch_alloc(&b2, B, sc.ndense, T, B * (size_t)maxpool);
  if (lst == GS_OK && rounds > 0) {
    all = gs_malloc(2 * rounds * P * B * sizeof(float));
    labels = gs_malloc(2 * rounds * P * B * sizeof(float));
    if (all == NULL || labels == NULL)
      lst = gs_error(GS_ERR_NOMEM, "DLRM training: out of memory for the evaluation");
  }
  char msg[GS_VOTE_MESSAGE] = "";
  if (lst != GS_OK) gs__error_copy(msg, sizeof msg);
  gs_agreement a;
  GS_CHECK_GOTO(gs_agree(comm, gs_comm_mpi(comm), "DLRM data", lst, msg, NULL, 0, &a), st, out);
  if (a.failed)
    st = lst != GS_OK ? gs_error(lst, "%s", msg)
                      : gs_error((gs_status)a.votes[a.first].status, "DLRM data on rank %d: %s",
                                 a.first, a.votes[a.first].message);
  gs_agreement_free(&a);
  if (st != GS_OK) goto out;

  for (int e = (int)(start / cfg->steps) + 1; e <= cfg->epochs && st == GS_OK; e++) {
    gs_dlrm_dist_stats_reset(d);
    win.n = 0;
    /* A commit inside this epoch resumes at its next step, with the loss
     * sum of the steps before it. */
    size_t first = (size_t)(e - 1) * cfg->steps < start ? start % cfg->steps : 0;
    double t0 = gs_now(), lsum = first ? resumed_lsum : 0, commit_s = 0;
    gs_dlrm_batch *cur = &b, *nxt = &b2;
    int filled = 0; /* cur holds step s's samples (the step before sent their ids) */
    for (size_t s = first; s < cfg->steps && st == GS_OK; s++) {
      if (!filled && (st = fill_agreed(comm, &src, (s * P + rank) * B, B, cur,
                                       "DLRM training data")) != GS_OK) {
        st = in_phase(st, "the data of training step %zu of epoch %d", s + 1, e);
        goto out;
      }
      /* A commit point after this step (the epoch's last step commits
       * after the evaluation). */
      size_t gstep = (size_t)(e - 1) * cfg->steps + s + 1;
      int stop = cfg->stop_at_step == gstep;
      int point = cfg->commit_every && gstep % cfg->commit_every == 0;
      /* The next step's ids go out under this step's updates, unless an
       * evaluation or a commit comes between. */
      /* A background commit put in place here (a collective, as a commit). */
      int due = ck && dlrm_ckpt_due(ck) == gstep && !(s + 1 < cfg->steps && (stop || point));
      int ahead = !cfg->no_prefetch && s + 1 < cfg->steps && !(ck && (stop || point)) && !due;
      if (ahead && (st = fill_agreed(comm, &src, ((s + 1) * P + rank) * B, B, nxt,
                                     "DLRM training data")) != GS_OK) {
        st = in_phase(st, "the data of training step %zu of epoch %d", s + 2, e);
        goto out;
      }
      double loss, ts0 = gs_now();
      window_before(&win, d);
      st = gs_dlrm_dist_train_step_next(d, cur, ahead ? nxt : NULL, &cfg->optim, &loss, NULL);
      if (st != GS_OK) {
        st = in_phase(st, "training step %zu of epoch %d", s + 1, e);
        goto out;
      }
      window_after(&win, d);
      trace(tl, DLRM_TL_STEPS, ts0, "step %zu", gstep);
      filled = ahead;
      if (ahead) {
        gs_dlrm_batch *x = cur;
        cur = nxt;
        nxt = x;
      }
      lsum += loss;
      gs_dlrm_train_event se = {.kind = GS_DLRM_EV_STEP, .epoch = e, .step = s + 1,
                                .steps = cfg->steps, .loss = loss};
      emit(cb, user, &se);
      if (ck && s + 1 < cfg->steps && point && !stop)
        GS_CHECK_GOTO(agree_stop(comm, &stop), st, out);
      if (due) {
        double c0 = gs_now();
        GS_CHECK_GOTO(publish(ck, d, gstep, cb, user), st, out);
        commit_s += gs_now() - c0;
        trace(tl, DLRM_TL_CHECKPOINT, c0, "put in place after step %zu", gstep);
      }
      if (ck && s + 1 < cfg->steps && (stop || point)) {
        double c0 = gs_now();
        GS_CHECK_GOTO(commit(ck, d, plan, gstep, lsum, stop, 0, cb, user), st, out);
        commit_s += gs_now() - c0;
        trace(tl, DLRM_TL_CHECKPOINT, c0, "commit after step %zu", gstep);
        if (stop == 2) atomic_store(&stop_asked, 0);
        if (stop) goto out;
      }
    }
    double dt = gs_now() - t0 - commit_s;
    size_t ran = cfg->steps - first;
    gs_dlrm_train_event ee = {.kind = GS_DLRM_EV_EPOCH, .epoch = e, .steps = cfg->steps,
                              .loss = lsum / (double)cfg->steps, .epoch_s = dt,
                              .samples_per_s = (double)(ran * P * B) / dt, .lookup = &lk};
    gs_dlrm_dist_stats_get(d, &ee.stats);
    gs_dlrm_dist_mlp_choice_get(d, &ee.mlp_choice);
    /* Every rank's measured lookup time a step (the median over the
     * epoch's steps), beside the cost model's. */
    memset(meas_ms, 0, (size_t)P * sizeof *meas_ms);
    memset(shard_meas, 0, plan->nshards * sizeof *shard_meas);
    window_medians(&win, &meas_ms[gs_comm_rank(comm)], shard_meas);
    GS_CHECK_GOTO(gs_allreduce(comm, GS_IN_PLACE, meas_ms, (size_t)P, GS_F64, GS_SUM,
                               GS_ALGO_MPI), st, out);
    ee.ranks = (int)P;
    ee.rank_lookup_ms = meas_ms;
    ee.rank_lookup_pred_ms = pred_ms;
    /* And every shard's (each on its rank; a dp table's replicas each). */
    GS_CHECK_GOTO(gs_allreduce(comm, GS_IN_PLACE, shard_meas, plan->nshards, GS_F64, GS_SUM,
                               GS_ALGO_MPI), st, out);
    ee.nshards = plan->nshards;
    ee.shard_lookup_ms = shard_meas;
    ee.shard_lookup_pred_ms = shard_pred;
    ee.eval_samples = cfg->eval_samples;
    ee.auc = ee.log_loss = ee.teacher_auc = ee.ne = ee.calibration = NAN; /* none asked for */
    double ev0 = gs_now();
    if (rounds > 0)
      st = evaluate(cfg, comm, d, &src, &b, rounds, all, labels, &ee.auc, &ee.log_loss,
                    &ee.teacher_auc, &ee.auc_undefined, &ee.ne, &ee.calibration);
    if (st != GS_OK) {
      st = in_phase(st, "the held-out evaluation after epoch %d", e);
      goto out;
    }
    if (rounds > 0) trace(tl, DLRM_TL_STEPS, ev0, "evaluation after epoch %d", e);
    ee.peak_rss_bytes = peak_rss();
    ee.base_rss_bytes = base_rss;
    ee.shard_mem_bytes = plan->rank_mem[gs_comm_rank(comm)];
    size_t ap = gs_mem_peak();
    ee.alloc_bytes = ap > base_alloc ? ap - base_alloc : 0;
    /* every rank's memory, for the worst rank's */
    memset(mem, 0, 4 * (size_t)P * sizeof *mem);
    mem[gs_comm_rank(comm)] = (double)ee.peak_rss_bytes;
    mem[P + gs_comm_rank(comm)] = (double)base_rss;
    mem[2 * P + gs_comm_rank(comm)] = (double)ee.alloc_bytes;
    GS_CHECK_GOTO(gs_allreduce(comm, GS_IN_PLACE, mem, 3 * (size_t)P, GS_F64, GS_SUM,
                               GS_ALGO_MPI), st, out);
    for (size_t r = 0; r < P; r++) mem[3 * P + r] = plan->rank_mem[r];
    ee.rank_peak_rss = mem;
    ee.rank_base_rss = mem + P;
    ee.rank_alloc = mem + 2 * P;
    ee.rank_shard_mem = mem + 3 * P;
    emit(cb, user, &ee);
    if (ck) {
      size_t gstep = (size_t)e * cfg->steps;
      /* (at the run's last step the run is complete, not stopped: a
       * resume would have nothing to continue) */
      int stop = cfg->stop_at_step == gstep && e < cfg->epochs;
      if (!stop && e < cfg->epochs) GS_CHECK_GOTO(agree_stop(comm, &stop), st, out);
      double c0 = gs_now();
      GS_CHECK_GOTO(commit(ck, d, plan, gstep, 0, stop, e == cfg->epochs, cb, user), st, out);
      trace(tl, DLRM_TL_CHECKPOINT, c0, "commit after step %zu", gstep);
      if (stop == 2) atomic_store(&stop_asked, 0);
      if (stop) goto out;
    }
  }
out:
  gs_free(pred_ms);
  gs_free(meas_ms);
  gs_free(mem);
  gs_free(shard_pred);
  gs_free(shard_meas);
  window_free(&win);
  gs_free(all);
  gs_free(labels);
  gs_dlrm_batch_free(&b);
  gs_dlrm_batch_free(&b2);
  gs_dlrm_synth_destroy(src.g);
  gs_criteo_close(src.r);
  gs_dlrm_dist_destroy(d);
  gs_shard_plan_free(plan);
  dlrm_ckpt_close(ck); /* its writer joined: nothing records on the timeline after */
  if (tl) {
    gs_status wst = gs__timeline_write(tl, (int)rank, (int)P);
    if (st == GS_OK) st = wst;
    gs__timeline_free(tl);
  }
  gs_criteo_vocab_free(vocab);
  gs_free(specs);
  gs_free(tables);
  return st;
}
