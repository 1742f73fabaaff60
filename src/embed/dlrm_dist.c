/*
 * Hybrid-parallel DLRM training (include/gradsync/dlrm_dist.h; docs/DLRM.md): the
 * tables sharded across the ranks by a plan, the MLPs replicated.
 *
 * One routing covers every sharding. A plan's non-dp shard is a block of a
 * table: rows [row_lo, row_hi) and columns [col_lo, col_hi) on one rank.
 * For every shard, every rank sends its samples' ids that fall in the
 * shard's rows (rebased) to the owner; the owner pools the shard's columns
 * for each of those samples (a partial sum when the table's rows are split)
 * and sends the vector back; the sample's rank adds the vectors of a table's
 * shards, in rank order, into the table's columns of the pooled matrix. So
 * tw is one shard per table, rw and twrw are row blocks whose partial sums
 * add (the reduce-scatter of TorchRec's row-wise sharding, as an
 * all-to-allv), cw is column blocks that each fill their own columns. The
 * backward sends each shard the gradient of its columns for every sample
 * (rw: every row block gets the whole vector, the all-gather), and the owner
 * runs the fused backward + update over the global batch's bags (column
 * blocks under row-wise Adagrad first add their rows' sums of squares:
 * split_update).
 *
 * Layouts. Rank k owns the shards sh[first[k] .. first[k] + count[k]) (sorted
 * by rank, table, columns, rows), whose columns sit side by side in a row of
 * W[k] floats (shard s at column sh[s].col). Everything rank r sends rank k
 * about its n_r samples is sample-major with that row: the owner's pooled
 * vectors for r are an [n_r x W[k]] block, and the owner's blocks for ranks
 * 0..P-1 one after the other are an [N x W[k]] matrix (N the global batch)
 * that one gs_embed_forward per shard fills at out_col = sh[s].col over the
 * bags of all ranks concatenated in rank order. The ids rank r sends rank k
 * are, per shard of k in order, the n_r bag lengths, then the ids of every
 * shard in the same order.
 *
 * dp tables are looked up locally. A small one's dense gradient (rows x
 * dim) is summed in the MLPs' all-reduce, one fused message, and every
 * replica applies the sum; a table with more rows than that pays for
 * (gs_cost_dp_dense, the rule the planner prices) all-gathers every rank's
 * bags and gradients instead, and every replica runs the update over the
 * global batch in rank order. Both are the single-process update (up to the
 * order of the sums, for the dense ones).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlrm_internal.h"
#include "gradsync/dlrm_dist.h"
#include "gradsync/engine.h"
#include "gs_internal.h"

/* A non-dp shard of the plan, on any rank. */
typedef struct dist_shard {
  int table, rank;
  size_t row_lo, row_hi, col_lo, col_hi;
  size_t col;     /* its columns' start in its owner's row of W floats */
  size_t plan_at; /* its index in the plan's shards */
} dist_shard;

/* Policy "auto" (gs_dlrm_mlp_choice): the steps timed each way, and how
 * much faster the engine must be to be kept. */
#define CHOOSE_TIMED 8
#define CHOOSE_MARGIN 0.02
enum choose_phase { CHOOSE_OFF = 0, CHOOSE_WARMUP, CHOOSE_TIMING, CHOOSE_DONE };

/* Runs `call`, adding its seconds to local shard k's lookup time
 * (gs_dlrm_dist_shard_lookup_s). */
#define SHARD_TIMED(d, k, call)          \
  do {                                   \
    double t_ = gs_now();                \
    call;                                \
    (d)->shard_s[k] += gs_now() - t_;    \
  } while (0)

/* What a rank learns of every rank in the header exchange. */
enum { HDR_STATUS, HDR_N, HDR_IDS, HDR_DP_IDS, HDR_LEN };

struct gs_dlrm_dist {
  gs_comm *comm;
  /* Per local shard (this rank's, then the dp tables'): its lookup seconds
   * (forward, backward and update) since the stats' reset, and its index
   * in the plan's shards. */
  double *shard_s;
  size_t *shard_plan_at;
  int rank, size;
  gs_dlrm *m;
  size_t D, T, max_batch;
  uint64_t seed;
  char **names;
  size_t *rows;
  int *is_dp; /* per table */
  int ndp, *dp_table;
  int *dp_dense;    /* per dp table: summed densely (1) or gathered (0) */
  size_t *dense_at; /* per dp table: its gradient's offset in fused */
  int ngat, *gat;   /* the gathered dp tables (indices into dp_table) */
  size_t nfused;    /* MLP gradients, then the dense dp tables' */
  float *fused;
  gs_dlrm_a2a_precision precision;

  dist_shard *sh;
  size_t nsh;
  size_t *first, *count, *W; /* per rank */

  /* Mine: shards first[rank] .. + count[rank], then the dp replicas. */
  gs_embed_table *local; /* count[rank] + ndp */
  gs_embed_work *work;

  /* The step's exchanges. */
  int64_t *hdr_send, *hdr_recv; /* size x HDR_LEN */
  size_t *n_of, *n_first, N;    /* every rank's samples, where they start */
  size_t *sc, *sd, *rc, *rd;    /* counts and displacements, size each */
  int32_t *id_send, *id_recv;
  size_t id_send_cap, id_recv_cap;
  /* The next batch's header and ids, exchanged under this step's backward
   * (gs_dlrm_dist_train_step_next); swapped with the above when it runs. */
  int64_t *nhdr_send, *nhdr_recv;
  int32_t *nid_send, *nid_recv;
  size_t nid_send_cap, nid_recv_cap;
  size_t *nsc, *nsd, *nrc, *nrd;
  gs_request *nreq;         /* the ids' all-to-allv in flight */
  const gs_dlrm_batch *next; /* the batch they are for; NULL: none */
  gs_status nstatus;         /* a refusal of the next batch, kept for its step */
  char nmsg[GS_VOTE_MESSAGE];
  int64_t *bag_off; /* count[rank] x (N + 1): the owner's bags, all ranks */
  size_t bag_off_cap;
  int32_t *bag_ids; /* the owner's ids, shard after shard */
  size_t bag_ids_cap, *bag_ids_at; /* where shard j's ids start */
  float *own_pooled, *mine_pooled; /* [N x W[rank]] and [n x sum_k W[k]] */
  size_t own_cap, mine_cap;
  uint16_t *half_send, *half_recv;
  size_t half_send_cap, half_recv_cap;
  /* dp: every rank's bags and gradients. */
  int32_t *dp_send, *dp_recv;
  size_t dp_send_cap, dp_recv_cap;
  float *dp_gsend, *dp_grecv;
  size_t dp_gsend_cap, dp_grecv_cap;
  int64_t *dp_off;
  size_t dp_off_cap;
  int32_t *dp_ids;
  size_t dp_ids_cap;

  /* Row-wise Adagrad on column blocks: the owners of a row's blocks add
   * their sums of squares (split_update). band_order lists the non-dp
   * shards by table, columns, rows (band_first[t]: table t's first). */
  int any_split; /* some table of the plan has more than one column band */
  size_t *band_order, *band_first;
  gs_embed_rows *urows; /* count[rank]: each local shard's touched rows */
  float *xsend, *xrecv, *xsum;
  size_t xsend_cap, xrecv_cap, xsum_cap;
  size_t *xc, *xd, *xcur; /* size each: counts and displacements, both ways */
  size_t *xoff;                          /* nsh: a pair's sums in xrecv */

  float *logits, *dlogits;
  gs_dlrm_dist_stats stats;
  gs__timeline *tl; /* borrowed (dlrm_dist_set_timeline), or NULL */

  /* The MLP and dense dp gradients through the engine
   * (gs_dlrm_dist_set_mlp_policy), on a communicator of its own so that its
   * collectives run beside the all-to-alls instead of queueing with them
   * (and in an order every rank agrees on). NULL: one fused all-reduce. */
  gs_comm *ecomm;
  gs_engine *eng;
  int *eid;    /* engine id: per MLP tensor (gs_dlrm_param_at's order), then per dp table */
  int eopen;   /* an iteration's grad_ready calls made, its wait not yet */

  /* Policy "auto": the trial of fused against the engine (mlp_choose). */
  int choose;                     /* a choose_phase */
  int choose_n;                   /* steps of the phase so far */
  int engine_off;                 /* 1: the next step is fused though eng exists */
  double choose_fused[CHOOSE_TIMED], choose_engine[CHOOSE_TIMED]; /* seconds */
  gs_dlrm_mlp_choice choice;
};

/* ---- Small helpers ----------------------------------------------------------- */

/* *p holds at least n elements of elem bytes afterwards (contents kept). */
static gs_status grow(void *pp, size_t *cap, size_t n, size_t elem, const char *what) {
  void **p = (void **)pp;
  if (n <= *cap && *p != NULL) return GS_OK;
  size_t want = GS_MAX(n, *cap + *cap / 2), bytes;
  if (gs_mul_size(want ? want : 1, elem, &bytes) != GS_OK)
    return gs_error(GS_ERR_NOMEM, "DLRM step: %s: %zu elements overflow", what, n);
  void *q = gs_realloc(*p, bytes);
  if (q == NULL)
    return gs_error(GS_ERR_NOMEM, "DLRM step: out of memory for %s (%zu bytes)", what, bytes);
  *p = q;
  *cap = want;
  return GS_OK;
}

/* A span of this rank's work, from t0 to t1, on the timeline if one is
 * set (dlrm_dist_set_timeline). */
static void span(gs_dlrm_dist *d, int track, const char *name, double t0, double t1) {
  if (d->tl) gs__timeline_event(d->tl, track, name, (uint64_t)(t0 * 1e9), (uint64_t)(t1 * 1e9),
                                NULL);
}

/* Time since t0 into *acc, and on the timeline's compute (timed) or comm
 * (timed_comm) track. */
static void timed(gs_dlrm_dist *d, double *acc, const char *name, double t0) {
  double t1 = gs_now();
  *acc += t1 - t0;
  span(d, DLRM_TL_COMPUTE, name, t0, t1);
}

static void timed_comm(gs_dlrm_dist *d, double *acc, const char *name, double t0) {
  double t1 = gs_now();
  *acc += t1 - t0;
  span(d, DLRM_TL_COMM, name, t0, t1);
}

/* Time since t0 into the all-to-alls' total and one phase of it. */
static void a2a_time(gs_dlrm_dist *d, double *phase, double t0) {
  double t1 = gs_now(), dt = t1 - t0;
  d->stats.a2a_s += dt;
  *phase += dt;
  span(d, DLRM_TL_COMM, phase == &d->stats.ids_s      ? "ids all-to-all"
                        : phase == &d->stats.pooled_s ? "pooled all-to-all"
                        : phase == &d->stats.grads_s  ? "gradients all-to-all"
                                                      : "all-to-all", t0, t1);
}

void dlrm_dist_set_timeline(gs_dlrm_dist *d, gs__timeline *tl) { d->tl = tl; }

static int cmp_shard(const void *a, const void *b) {
  const dist_shard *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->table != y->table) return x->table < y->table ? -1 : 1;
  if (x->col_lo != y->col_lo) return x->col_lo < y->col_lo ? -1 : 1;
  return x->row_lo < y->row_lo ? -1 : x->row_lo > y->row_lo;
}

/* A shard's place in the column bands: by table, columns, rows. */
typedef struct band_key {
  int table;
  size_t col_lo, row_lo, idx;
} band_key;

static int cmp_band(const void *a, const void *b) {
  const band_key *x = a, *y = b;
  if (x->table != y->table) return x->table < y->table ? -1 : 1;
  if (x->col_lo != y->col_lo) return x->col_lo < y->col_lo ? -1 : 1;
  return x->row_lo < y->row_lo ? -1 : x->row_lo > y->row_lo;
}

/* FNV-1a over the plan's shards: ranks compare plans by it. */
static uint64_t plan_hash(const dist_shard *sh, size_t n, const int *is_dp, size_t T) {
  uint64_t h = GS_FNV1A_BASIS;
  uint64_t v[6];
  for (size_t i = 0; i < n; i++) {
    v[0] = (uint64_t)sh[i].table;
    v[1] = (uint64_t)sh[i].rank;
    v[2] = sh[i].row_lo;
    v[3] = sh[i].row_hi;
    v[4] = sh[i].col_lo;
    v[5] = sh[i].col_hi;
    h = gs_fnv1a(h, v, sizeof v);
  }
  return gs_fnv1a(h, is_dp, T * sizeof *is_dp);
}

gs_status gs_dlrm_a2a_precision_parse(const char *s, gs_dlrm_a2a_precision *out) {
  if (s && strcmp(s, "fp32") == 0) *out = GS_DLRM_A2A_FP32;
  else if (s && strcmp(s, "fp16") == 0) *out = GS_DLRM_A2A_FP16;
  else if (s && strcmp(s, "bf16") == 0) *out = GS_DLRM_A2A_BF16;
  else
    return gs_error(GS_ERR_PARSE, "all-to-all precision '%s': expected fp32, fp16 (fp16 "
                    "forward, bf16 backward) or bf16", s ? s : "(null)");
  return GS_OK;
}

void gs_dlrm_dist_set_precision(gs_dlrm_dist *d, gs_dlrm_a2a_precision p) { d->precision = p; }

/* ---- The MLP gradients' engine ------------------------------------------------ */

/* Ends an open iteration (a failed step's) so the engine may stop; its
 * error is the failed step's, already returned. */
static void mlp_engine_free(gs_dlrm_dist *d) {
  if (d->eng && d->eopen) gs_engine_wait(d->eng);
  d->eopen = 0;
  gs_engine_destroy(d->eng);
  d->eng = NULL;
  gs_comm_destroy(d->ecomm);
  d->ecomm = NULL;
}

/* Registration in forward order, so that the engine's backward order is the
 * order the step marks them: the bottom MLP's tensors, the dense dp tables,
 * then the rest (dcn's cross layers, the top MLP's). */
static gs_status mlp_engine_register(gs_dlrm_dist *d) {
  size_t np = gs_dlrm_param_count(d->m), nbot = 0;
  for (size_t i = 0; i < np; i++)
    nbot += strncmp(gs_dlrm_param_at(d->m, i)->name, "bottom.", 7) == 0;
  for (size_t i = 0; i < nbot; i++) {
    const gs_dlrm_param *q = gs_dlrm_param_at(d->m, i);
    GS_CHECK(gs_engine_register(d->eng, q->name, q->grad, q->count, GS_F32, &d->eid[i]));
  }
  size_t mine = d->count[d->rank];
  for (int j = 0; j < d->ndp; j++) {
    if (!d->dp_dense[j]) continue;
    char name[96];
    snprintf(name, sizeof name, "table.%s", d->names[d->dp_table[j]]);
    GS_CHECK(gs_engine_register(d->eng, name, d->fused + d->dense_at[j],
                                d->local[mine + (size_t)j].rows * d->D, GS_F32,
                                &d->eid[np + (size_t)j]));
  }
  for (size_t i = nbot; i < np; i++) {
    const gs_dlrm_param *q = gs_dlrm_param_at(d->m, i);
    GS_CHECK(gs_engine_register(d->eng, q->name, q->grad, q->count, GS_F32, &d->eid[i]));
  }
  return GS_OK;
}

/* The engine under policy (not "fused" or "auto"). Collective. */
static gs_status mlp_engine_start(gs_dlrm_dist *d, const char *policy) {
  size_t np = gs_dlrm_param_count(d->m);
  gs_free(d->eid);
  d->eid = gs_calloc(np + (size_t)d->ndp + 1, sizeof *d->eid);
  gs_status st = d->eid ? GS_OK : gs_error(GS_ERR_NOMEM, "DLRM: out of memory for the "
                                           "engine's tensor ids");
  char msg[GS_VOTE_MESSAGE] = "";
  if (st != GS_OK) gs__error_copy(msg, sizeof msg);
  gs_agreement a;
  GS_CHECK(gs_agree(d->comm, gs_comm_mpi(d->comm), "DLRM engine set-up", st, msg, NULL, 0, &a));
  int failed = a.failed, first = a.first;
  gs_agreement_free(&a);
  if (st != GS_OK) return st;
  if (failed)
    return gs_error(GS_ERR_NOMEM, "DLRM: rank %d could not set up the MLP gradients' engine",
                    first);
  /* Both creations are collective and agree on failures among the ranks.
   * The engine's communicator takes d->comm's cost model, so a message's
   * algorithm (and its sum's rounding) is the same from run to run. */
  GS_CHECK(gs_comm_create_like(d->comm, &d->ecomm));
  gs_engine_config cfg;
  gs_engine_config_init(&cfg);
  cfg.policy = policy;
  /* The run's timeline is DLRM's (its phases, the all-reduce's wait
   * among them), not a second file of the engine's at the same path. */
  if (d->tl) cfg.timeline = "";
  st = gs_engine_create(d->ecomm, &cfg, &d->eng);
  if (st != GS_OK) {
    char why[GS_VOTE_MESSAGE];
    gs__error_copy(why, sizeof why);
    mlp_engine_free(d);
    return gs_error(st, "DLRM: the MLP gradients' engine (policy %s): %s", policy, why);
  }
  st = mlp_engine_register(d);
  if (st != GS_OK) mlp_engine_free(d);
  return st;
}

gs_status gs_dlrm_dist_set_mlp_policy(gs_dlrm_dist *d, const char *policy) {
  if (d == NULL) return gs_error(GS_ERR_INVALID_ARG, "DLRM: NULL model");
  mlp_engine_free(d);
  memset(&d->choice, 0, sizeof d->choice);
  d->choose = CHOOSE_OFF;
  d->choose_n = 0;
  d->engine_off = 0;
  if (policy == NULL || strcmp(policy, "fused") == 0) return GS_OK;
  if (strcmp(policy, "auto") != 0) return mlp_engine_start(d, policy);
  GS_CHECK(mlp_engine_start(d, "auto"));
  d->choose = CHOOSE_WARMUP;
  d->choice.active = 1;
  return GS_OK;
}

void gs_dlrm_dist_mlp_choice_get(const gs_dlrm_dist *d, gs_dlrm_mlp_choice *out) {
  *out = d->choice;
}

/* Policy "auto", after each step (step_s here): the engine's warm-up and
 * first planned step, then CHOOSE_TIMED steps of each way in turn (fused
 * steps leave the engine idle), then the slower way dropped (the comment
 * of gs_dlrm_mlp_choice). The phases follow the step count alone, so every
 * rank switches at the same step. */
static gs_status mlp_choose(gs_dlrm_dist *d, double step_s) {
  if (d->choose == CHOOSE_OFF || d->choose == CHOOSE_DONE) return GS_OK;
  d->choice.step++;
  if (d->choose == CHOOSE_WARMUP) {
    gs_engine_config ec;
    gs_engine_config_init(&ec);
    if (++d->choose_n < ec.warmup_iters + 1) return GS_OK;
    d->choose = CHOOSE_TIMING;
    d->choose_n = 0;
    d->engine_off = 1; /* the first timed step is fused */
    return GS_OK;
  }
  int k = d->choose_n++ / 2;
  (d->engine_off ? d->choose_fused : d->choose_engine)[k] = step_s;
  if (d->choose_n < 2 * CHOOSE_TIMED) {
    d->engine_off = !d->engine_off;
    return GS_OK;
  }
  /* (gs__median sorts the phase's times: they are not read again.) */
  double med[2] = {1e3 * gs__median(d->choose_fused, CHOOSE_TIMED),
                   1e3 * gs__median(d->choose_engine, CHOOSE_TIMED)};
  GS_CHECK(gs_allreduce(d->comm, GS_IN_PLACE, med, 2, GS_F64, GS_MAX, GS_ALGO_AUTO));
  d->choice.fused_ms = med[0];
  d->choice.engine_ms = med[1];
  gs_engine_stats es;
  if (gs_engine_get_stats(d->eng, &es) == GS_OK)
    snprintf(d->choice.plan, sizeof d->choice.plan, "%s", gs_plan_policy_name(es.chosen));
  d->choose = CHOOSE_DONE;
  d->choice.decided = 1;
  d->choice.engine = med[1] < med[0] * (1.0 - CHOOSE_MARGIN);
  d->engine_off = 0;
  if (!d->choice.engine) mlp_engine_free(d);
  return GS_OK;
}

static gs_status mlp_ready(void *arg, size_t param) {
  gs_dlrm_dist *d = arg;
  d->eopen = 1;
  return gs_engine_grad_ready(d->eng, d->eid[param]);
}

/* ---- Creation ---------------------------------------------------------------- */

void gs_dlrm_dist_destroy(gs_dlrm_dist *d) {
  if (d == NULL) return;
  if (d->nreq) gs_wait(d->nreq); /* its buffers are freed below */
  mlp_engine_free(d);
  gs_dlrm_destroy(d->m);
  size_t nlocal = d->count ? d->count[d->rank] + (size_t)d->ndp : 0;
  for (size_t i = 0; d->local && i < nlocal; i++) {
    gs_free(d->local[i].weights);
    gs_free(d->local[i].state);
  }
  for (size_t t = 0; d->names && t < d->T; t++) gs_free(d->names[t]);
  for (size_t j = 0; d->urows && j < d->count[d->rank]; j++) gs_embed_rows_free(&d->urows[j]);
  void *bufs[] = {d->band_order, d->band_first, d->urows, d->xsend, d->xrecv, d->xsum,
                  d->xc, d->xd, d->xcur, d->xoff,
                  d->names, d->rows, d->is_dp, d->dp_table, d->sh, d->first, d->count, d->W,
                  d->local, d->hdr_send, d->hdr_recv, d->n_of, d->n_first, d->sc, d->sd,
                  d->rc, d->rd, d->id_send, d->id_recv, d->nhdr_send, d->nhdr_recv,
                  d->nid_send, d->nid_recv, d->nsc, d->nsd, d->nrc, d->nrd, d->bag_off,
                  d->bag_ids,
                  d->bag_ids_at, d->own_pooled, d->mine_pooled, d->half_send, d->half_recv,
                  d->dp_send, d->dp_recv, d->dp_gsend, d->dp_grecv, d->dp_off, d->dp_ids,
                  d->logits, d->dlogits, d->dp_dense, d->dense_at, d->gat, d->fused, d->eid,
                  d->shard_s, d->shard_plan_at};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gs_free(bufs[i]);
  gs_embed_work_free(d->work);
  gs_free(d);
}

/* Everything but the agreement: this rank's part of the model. */
static gs_status dist_build(gs_dlrm_dist *d, const gs_dlrm_config *cfg,
                            const gs_shard_plan *plan) {
  if (plan == NULL) return gs_error(GS_ERR_INVALID_ARG, "DLRM: NULL sharding plan");
  GS_CHECK(dlrm_create(cfg, 0, &d->m));
  d->D = gs_dlrm_dim(d->m);
  d->T = (size_t)cfg->ntables;
  d->max_batch = cfg->max_batch;
  d->seed = cfg->seed;
  size_t T = d->T, P = (size_t)d->size;
  if (plan->ranks != d->size || plan->ntables != cfg->ntables)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM: the sharding plan is for %d tables on %d ranks; "
                    "the model has %zu tables and the communicator %d ranks", plan->ntables,
                    plan->ranks, T, d->size);
  gs_embed_spec *specs = gs_calloc(T ? T : 1, sizeof *specs);
  if (specs == NULL) return gs_error(GS_ERR_NOMEM, "DLRM: out of memory");
  for (size_t t = 0; t < T; t++) {
    specs[t] = cfg->tables[t];
    specs[t].dim = d->D;
  }
  gs_status st = gs_shard_plan_check(plan, specs, (int)T, 0);
  gs_free(specs);
  GS_CHECK(st);

  d->names = gs_calloc(T ? T : 1, sizeof *d->names);
  d->rows = gs_calloc(T ? T : 1, sizeof *d->rows);
  d->is_dp = gs_calloc(T ? T : 1, sizeof *d->is_dp);
  d->dp_table = gs_calloc(T ? T : 1, sizeof *d->dp_table);
  d->dp_dense = gs_calloc(T ? T : 1, sizeof *d->dp_dense);
  d->dense_at = gs_calloc(T ? T : 1, sizeof *d->dense_at);
  d->gat = gs_calloc(T ? T : 1, sizeof *d->gat);
  d->sh = gs_calloc(plan->nshards ? plan->nshards : 1, sizeof *d->sh);
  d->first = gs_calloc(P, sizeof *d->first);
  d->count = gs_calloc(P, sizeof *d->count);
  d->W = gs_calloc(P, sizeof *d->W);
  d->hdr_send = gs_calloc(P * HDR_LEN, sizeof *d->hdr_send);
  d->hdr_recv = gs_calloc(P * HDR_LEN, sizeof *d->hdr_recv);
  d->nhdr_send = gs_calloc(P * HDR_LEN, sizeof *d->nhdr_send);
  d->nhdr_recv = gs_calloc(P * HDR_LEN, sizeof *d->nhdr_recv);
  d->nsc = gs_calloc(P, sizeof *d->nsc);
  d->nsd = gs_calloc(P, sizeof *d->nsd);
  d->nrc = gs_calloc(P, sizeof *d->nrc);
  d->nrd = gs_calloc(P, sizeof *d->nrd);
  d->n_of = gs_calloc(P, sizeof *d->n_of);
  d->n_first = gs_calloc(P + 1, sizeof *d->n_first);
  d->sc = gs_calloc(P, sizeof *d->sc);
  d->sd = gs_calloc(P, sizeof *d->sd);
  d->rc = gs_calloc(P, sizeof *d->rc);
  d->rd = gs_calloc(P, sizeof *d->rd);
  d->logits = gs_calloc(d->max_batch, sizeof *d->logits);
  d->dlogits = gs_calloc(d->max_batch, sizeof *d->dlogits);
  if (!d->names || !d->rows || !d->is_dp || !d->dp_table || !d->dp_dense || !d->dense_at ||
      !d->gat || !d->sh || !d->first || !d->count ||
      !d->W || !d->hdr_send || !d->hdr_recv || !d->nhdr_send || !d->nhdr_recv || !d->nsc ||
      !d->nsd || !d->nrc || !d->nrd || !d->n_of || !d->n_first || !d->sc || !d->sd ||
      !d->rc || !d->rd || !d->logits || !d->dlogits)
    return gs_error(GS_ERR_NOMEM, "DLRM: out of memory");
  for (size_t t = 0; t < T; t++) {
    const char *name = gs_dlrm_table(d->m, (int)t)->name;
    size_t len = strlen(name) + 1;
    if ((d->names[t] = gs_malloc(len)) == NULL)
      return gs_error(GS_ERR_NOMEM, "DLRM: out of memory");
    memcpy(d->names[t], name, len);
    d->rows[t] = cfg->tables[t].rows;
    d->is_dp[t] = plan->kind[t] == GS_SHARD_DP;
    if (d->is_dp[t]) d->dp_table[d->ndp++] = (int)t;
  }
  /* The non-dp shards, empty row blocks (rw over more ranks than rows)
   * left out: no id can reach them. */
  for (size_t i = 0; i < plan->nshards; i++) {
    const gs_shard *s = &plan->shards[i];
    if (d->is_dp[s->table] || s->row_hi == s->row_lo) continue;
    d->sh[d->nsh++] = (dist_shard){s->table, s->rank, s->row_lo, s->row_hi, s->col_lo,
                                   s->col_hi, 0, i};
  }
  qsort(d->sh, d->nsh, sizeof *d->sh, cmp_shard);
  for (size_t i = 0; i < d->nsh; i++) {
    size_t k = (size_t)d->sh[i].rank;
    if (d->count[k]++ == 0) d->first[k] = i;
    d->sh[i].col = d->W[k];
    d->W[k] += d->sh[i].col_hi - d->sh[i].col_lo;
  }
  /* The column bands, for the row-wise Adagrad of split tables. */
  d->band_order = gs_calloc(d->nsh + 1, sizeof *d->band_order);
  d->band_first = gs_calloc(T + 1, sizeof *d->band_first);
  d->xoff = gs_calloc(d->nsh + 1, sizeof *d->xoff);
  d->urows = gs_calloc(d->count[d->rank] + 1, sizeof *d->urows);
  d->xc = gs_calloc(P, sizeof *d->xc);
  d->xd = gs_calloc(P, sizeof *d->xd);
  d->xcur = gs_calloc(P, sizeof *d->xcur);
  if (!d->band_order || !d->band_first || !d->xoff || !d->urows || !d->xc || !d->xd ||
      !d->xcur)
    return gs_error(GS_ERR_NOMEM, "DLRM: out of memory");
  band_key *keys = gs_malloc((d->nsh + 1) * sizeof *keys);
  if (keys == NULL) return gs_error(GS_ERR_NOMEM, "DLRM: out of memory");
  for (size_t i = 0; i < d->nsh; i++) {
    keys[i] = (band_key){d->sh[i].table, d->sh[i].col_lo, d->sh[i].row_lo, i};
    if (d->sh[i].col_hi - d->sh[i].col_lo < d->D) d->any_split = 1;
    d->band_first[d->sh[i].table + 1]++;
  }
  qsort(keys, d->nsh, sizeof *keys, cmp_band);
  for (size_t i = 0; i < d->nsh; i++) d->band_order[i] = keys[i].idx;
  gs_free(keys);
  for (size_t t = 0; t < T; t++) d->band_first[t + 1] += d->band_first[t];

  /* This rank's shards and replicas, initialised as the whole tables are. */
  size_t mine = d->count[d->rank];
  d->local = gs_calloc(mine + (size_t)d->ndp + 1, sizeof *d->local);
  d->bag_ids_at = gs_calloc(mine + 1, sizeof *d->bag_ids_at);
  d->shard_s = gs_calloc(mine + (size_t)d->ndp + 1, sizeof *d->shard_s);
  d->shard_plan_at = gs_calloc(mine + (size_t)d->ndp + 1, sizeof *d->shard_plan_at);
  if (!d->local || !d->bag_ids_at || !d->shard_s || !d->shard_plan_at)
    return gs_error(GS_ERR_NOMEM, "DLRM: out of memory");
  for (size_t j = 0; j < mine; j++) d->shard_plan_at[j] = d->sh[d->first[d->rank] + j].plan_at;
  for (size_t i = 0; i < plan->nshards; i++) /* a dp table's replica on this rank */
    for (int j = 0; j < d->ndp; j++)
      if (plan->shards[i].table == d->dp_table[j] && plan->shards[i].rank == d->rank)
        d->shard_plan_at[mine + (size_t)j] = i;
  for (size_t j = 0; j < mine + (size_t)d->ndp; j++) {
    size_t t, rl, rh, cl, ch;
    if (j < mine) {
      const dist_shard *s = &d->sh[d->first[d->rank] + j];
      t = (size_t)s->table, rl = s->row_lo, rh = s->row_hi, cl = s->col_lo, ch = s->col_hi;
    } else {
      t = (size_t)d->dp_table[j - mine], rl = 0, rh = d->rows[t], cl = 0, ch = d->D;
    }
    gs_embed_table *e = &d->local[j];
    e->name = d->names[t];
    e->rows = rh - rl;
    e->dim = ch - cl;
    size_t nw;
    if (gs_mul_size(e->rows, e->dim, &nw) != GS_OK)
      return gs_error(GS_ERR_NOMEM, "DLRM: table '%s': shard of %zu x %zu overflows", e->name,
                      e->rows, e->dim);
    e->weights = nw <= SIZE_MAX / sizeof(float) ? gs__malloc_table(nw * sizeof(float), 0) : NULL;
    e->state = gs__malloc_table(e->rows * sizeof(float), 1);
    if (e->weights == NULL || e->state == NULL)
      return gs_error(GS_ERR_NOMEM, "DLRM: out of memory for rank %d's shard of table '%s' "
                      "(%zu x %zu)", d->rank, e->name, e->rows, e->dim);
    dlrm_table_init(e->weights, e->dim, cfg->seed, t, d->rows[t], d->D, rl, rh, cl, ch);
  }
  /* Room for the MLP gradients and every dp table's dense gradient (at
   * most a replica's size again), whichever way dp_choose sums them. */
  size_t nf;
  gs_dlrm_mlp_grads(d->m, &nf);
  for (int j = 0; j < d->ndp; j++) nf += d->local[mine + (size_t)j].rows * d->D;
  if ((d->fused = gs_malloc((nf + 1) * sizeof(float))) == NULL)
    return gs_error(GS_ERR_NOMEM, "DLRM: out of memory for the MLP and dp tables' gradients "
                    "(%zu floats)", nf);
  return GS_OK;
}

/* How each dp table's gradient is summed, from the global batch at full
 * batches (every rank's max_batch: the same choice on every rank). fused
 * has room for every dp table's (dist_build). */
static void dp_choose(gs_dlrm_dist *d, const gs_dlrm_config *cfg, size_t global_batch) {
  size_t nw, at;
  gs_dlrm_mlp_grads(d->m, &nw);
  at = nw;
  d->ngat = 0;
  for (int j = 0; j < d->ndp; j++) {
    size_t t = (size_t)d->dp_table[j];
    d->dp_dense[j] = gs_cost_dp_dense((double)d->rows[t], (double)d->D, (double)global_batch,
                                      cfg->tables[t].pooling);
    if (!d->dp_dense[j]) {
      d->gat[d->ngat++] = j;
      continue;
    }
    d->dense_at[j] = at;
    at += d->rows[t] * d->D; /* fits: dist_build sized fused */
  }
  d->nfused = at;
}

gs_status gs_dlrm_dist_create(const gs_dlrm_config *cfg, const gs_shard_plan *plan,
                              gs_comm *comm, gs_dlrm_dist **out) {
  if (cfg == NULL || comm == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM: NULL config, communicator or output");
  *out = NULL;
  gs_dlrm_dist *d = gs_calloc(1, sizeof *d);
  if (d == NULL) return gs_error(GS_ERR_NOMEM, "DLRM: out of memory");
  d->comm = comm;
  d->rank = gs_comm_rank(comm);
  d->size = gs_comm_size(comm);
  gs_status st = dist_build(d, cfg, plan);
  /* Every rank learns whether every rank could build its part, and whether
   * they hold the same plan. */
  char msg[GS_VOTE_MESSAGE] = "";
  if (st != GS_OK) gs__error_copy(msg, sizeof msg);
  uint64_t h[2] = {st == GS_OK ? plan_hash(d->sh, d->nsh, d->is_dp, d->T) : 0,
                   cfg->max_batch};
  gs_agreement a;
  gs_status ast = gs_agree(comm, gs_comm_mpi(comm), "DLRM model creation", st, msg, h,
                           sizeof h, &a);
  if (ast != GS_OK) {
    gs_dlrm_dist_destroy(d);
    return ast;
  }
  if (st == GS_OK && a.failed > 0) {
    st = gs_error(GS_ERR_INVALID_ARG, "DLRM: rank %d could not build its part of the model: "
                  "%s", a.first, a.votes[a.first].message);
  } else if (st == GS_OK) {
    const uint64_t *hs = a.payloads;
    size_t global = 0;
    for (int r = 0; r < a.size; r++) {
      global += (size_t)hs[2 * r + 1];
      if (hs[2 * r] != hs[0]) {
        st = gs_error(GS_ERR_MISMATCH, "DLRM: rank %d holds another sharding plan than rank "
                      "0 (every rank must be given the same plan)", r);
        break;
      }
    }
    if (st == GS_OK) dp_choose(d, cfg, global);
  } else {
    gs__error_set_message(msg);
  }
  gs_agreement_free(&a);
  if (st != GS_OK) {
    gs_dlrm_dist_destroy(d);
    return st;
  }
  *out = d;
  return GS_OK;
}

gs_dlrm *gs_dlrm_dist_model(gs_dlrm_dist *d) { return d->m; }

size_t gs_dlrm_dist_nshards(const gs_dlrm_dist *d) {
  return d->count[d->rank] + (size_t)d->ndp;
}

gs_embed_table *gs_dlrm_dist_shard(gs_dlrm_dist *d, size_t i, gs_shard *where) {
  size_t mine = d->count[d->rank];
  if (i >= mine + (size_t)d->ndp) return NULL;
  if (where) {
    if (i < mine) {
      const dist_shard *s = &d->sh[d->first[d->rank] + i];
      *where = (gs_shard){s->table, s->rank, GS_SHARD_TW, s->row_lo, s->row_hi, s->col_lo,
                          s->col_hi, 0, 0, 0};
      where->kind = (s->row_hi - s->row_lo) < d->rows[s->table] ? GS_SHARD_RW
                    : (s->col_hi - s->col_lo) < d->D          ? GS_SHARD_CW
                                                              : GS_SHARD_TW;
    } else {
      int t = d->dp_table[i - mine];
      *where = (gs_shard){t, d->rank, GS_SHARD_DP, 0, d->rows[t], 0, d->D, 0, 0, 0};
    }
  }
  return &d->local[i];
}

void gs_dlrm_dist_stats_get(const gs_dlrm_dist *d, gs_dlrm_dist_stats *out) { *out = d->stats; }
void gs_dlrm_dist_stats_reset(gs_dlrm_dist *d) {
  memset(&d->stats, 0, sizeof d->stats);
  if (d->shard_s) memset(d->shard_s, 0, (d->count[d->rank] + (size_t)d->ndp) * sizeof *d->shard_s);
}

void gs_dlrm_dist_shard_lookup_s(const gs_dlrm_dist *d, double *out) {
  for (size_t j = 0; d->shard_s && j < d->count[d->rank] + (size_t)d->ndp; j++)
    out[d->shard_plan_at[j]] += d->shard_s[j];
}

/* ---- The id exchange --------------------------------------------------------- */

/* Rank r's bag of sample i in table t: ids[lo .. hi). */
static inline void bag_range(const gs_dlrm_batch *b, size_t t, size_t i, int64_t *lo,
                             int64_t *hi) {
  *lo = b->bags[t].offsets[i];
  *hi = b->bags[t].offsets[i + 1];
}

/* Checks this rank's batch: its size and every bag against its table. */
static gs_status check_local(const gs_dlrm_dist *d, const gs_dlrm_batch *b) {
  if (b == NULL) return gs_error(GS_ERR_INVALID_ARG, "DLRM step on rank %d: NULL batch", d->rank);
  if (b->n == 0 || b->n > d->max_batch)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM step on rank %d: batch of %zu samples (the model "
                    "takes 1 to %zu per rank)", d->rank, b->n, d->max_batch);
  if (b->ndense != gs_dlrm_ndense(d->m) || (size_t)b->ntables != d->T)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM step on rank %d: batch of %zu dense features and "
                    "%d tables; the model has %zu and %zu", d->rank, b->ndense, b->ntables,
                    gs_dlrm_ndense(d->m), d->T);
  static float no_weights; /* gs_embed_check reads only the shape */
  for (size_t t = 0; t < d->T; t++) {
    gs_embed_table whole = {d->names[t], &no_weights, NULL, d->rows[t], d->D};
    gs_embed_bags bags = dlrm_batch_bags(b, t);
    if (bags.ids64)
      return gs_error(GS_ERR_UNSUPPORTED, "DLRM step on rank %d: table '%s' has int64 ids "
                      "(the exchange carries int32)", d->rank, d->names[t]);
    GS_CHECK(gs_embed_check(&whole, &bags));
  }
  return GS_OK;
}

/* Counts the ids of every shard of rank k in this batch into the header. */
static void count_for(const gs_dlrm_dist *d, const gs_dlrm_batch *b, size_t k, int64_t *hdr) {
  int64_t ids = 0;
  for (size_t s = d->first[k]; s < d->first[k] + d->count[k]; s++) {
    const dist_shard *x = &d->sh[s];
    const gs_embed_bags *bg = &b->bags[x->table];
    const int32_t *id = bg->ids;
    int64_t end = bg->offsets[b->n];
    if (x->row_lo == 0 && x->row_hi == d->rows[x->table]) {
      ids += end;
      continue;
    }
    for (int64_t j = 0; j < end; j++)
      ids += (size_t)id[j] >= x->row_lo && (size_t)id[j] < x->row_hi;
  }
  hdr[HDR_IDS] = ids;
}

/* The header all-to-all into send and recv: every rank's status and
 * samples; the failure of any rank becomes every rank's error (the failing
 * rank's message is shared through gs_agree, since only then is it
 * needed). */
static gs_status exchange_header(gs_dlrm_dist *d, const gs_dlrm_batch *b, gs_status mine,
                                 int64_t *send, int64_t *recv) {
  size_t P = (size_t)d->size;
  int64_t dp_ids = 0;
  if (mine == GS_OK)
    for (int k = 0; k < d->ngat; k++) dp_ids += b->bags[d->dp_table[d->gat[k]]].offsets[b->n];
  for (size_t k = 0; k < P; k++) {
    int64_t *h = send + k * HDR_LEN;
    memset(h, 0, HDR_LEN * sizeof *h);
    h[HDR_STATUS] = mine;
    if (mine != GS_OK) continue;
    h[HDR_N] = (int64_t)b->n;
    h[HDR_DP_IDS] = dp_ids;
    count_for(d, b, k, h);
  }
  char msg[GS_VOTE_MESSAGE] = "";
  if (mine != GS_OK) gs__error_copy(msg, sizeof msg);
  double t0 = gs_now();
  GS_CHECK(gs_alltoall(d->comm, send, recv, HDR_LEN, GS_I64, GS_ALGO_AUTO));
  a2a_time(d, &d->stats.ids_s, t0);
  d->stats.id_bytes += (double)((P - 1) * HDR_LEN * sizeof(int64_t));
  int failed = 0;
  for (size_t r = 0; r < P; r++) failed |= recv[r * HDR_LEN + HDR_STATUS] != GS_OK;
  if (failed) {
    gs_agreement a;
    GS_CHECK(gs_agree(d->comm, gs_comm_mpi(d->comm), "DLRM step", mine, msg, NULL, 0, &a));
    gs_status st;
    if (mine != GS_OK) {
      gs__error_set_message(msg);
      st = mine;
    } else {
      st = gs_error((gs_status)a.votes[a.first].status, "DLRM step: rank %d's batch was "
                    "refused: %s", a.first, a.votes[a.first].message);
    }
    gs_agreement_free(&a);
    return st;
  }
  return GS_OK;
}

/* Every rank's samples, from the header in hdr_recv. */
static void header_take(gs_dlrm_dist *d) {
  size_t P = (size_t)d->size;
  d->N = 0;
  for (size_t r = 0; r < P; r++) {
    d->n_of[r] = (size_t)d->hdr_recv[r * HDR_LEN + HDR_N];
    d->n_first[r] = d->N;
    d->N += d->n_of[r];
  }
  d->n_first[P] = d->N;
}

/* The lengths and ids to every owner, packed into *send by the headers
 * hs (mine) and hr (every rank's): per shard of owner k, the n bag lengths,
 * then the ids of every shard in the same order. Counts and displacements
 * in sc, sd, rc, rd; *recv grown to hold what comes. */
static gs_status ids_pack(gs_dlrm_dist *d, const gs_dlrm_batch *b, const int64_t *hs,
                          const int64_t *hr, int32_t **send, size_t *send_cap, int32_t **recv,
                          size_t *recv_cap, size_t *sc, size_t *sd, size_t *rc, size_t *rd) {
  size_t P = (size_t)d->size, n = b->n, me = (size_t)d->rank;
  size_t total = 0;
  for (size_t k = 0; k < P; k++) {
    sd[k] = total;
    sc[k] = d->count[k] * n + (size_t)hs[k * HDR_LEN + HDR_IDS];
    total += sc[k];
  }
  GS_CHECK(grow(send, send_cap, total + 1, sizeof(int32_t), "the ids sent"));
  for (size_t k = 0; k < P; k++) {
    int32_t *len = *send + sd[k], *out = len + d->count[k] * n;
    for (size_t j = 0; j < d->count[k]; j++) {
      const dist_shard *x = &d->sh[d->first[k] + j];
      const gs_embed_bags *bg = &b->bags[x->table];
      const int32_t *id = bg->ids;
      for (size_t i = 0; i < n; i++) {
        int64_t lo, hi;
        bag_range(b, (size_t)x->table, i, &lo, &hi);
        int32_t c = 0;
        for (int64_t q = lo; q < hi; q++)
          if ((size_t)id[q] >= x->row_lo && (size_t)id[q] < x->row_hi) {
            *out++ = id[q] - (int32_t)x->row_lo;
            c++;
          }
        len[j * n + i] = c;
      }
    }
  }
  size_t rtotal = 0, mine = d->count[me];
  for (size_t r = 0; r < P; r++) {
    rd[r] = rtotal;
    rc[r] = mine * (size_t)hr[r * HDR_LEN + HDR_N] + (size_t)hr[r * HDR_LEN + HDR_IDS];
    rtotal += rc[r];
  }
  GS_CHECK(grow(recv, recv_cap, rtotal + 1, sizeof(int32_t), "the ids received"));
  d->stats.id_bytes += (double)((total - sc[me]) * sizeof(int32_t));
  return GS_OK;
}

/* The owner's CSR per shard from the ids received in d->id_recv at rd:
 * for each of its shards, the bags of every rank's samples in rank order. */
static gs_status ids_unpack(gs_dlrm_dist *d, const size_t *rd, const size_t *rc) {
  size_t P = (size_t)d->size, mine = d->count[d->rank], rtotal = 0;
  for (size_t r = 0; r < P; r++) rtotal += rc[r];
  size_t N = d->N, nids = rtotal - mine * N;
  GS_CHECK(grow(&d->bag_off, &d->bag_off_cap, mine * (N + 1) + 1, sizeof(int64_t),
                "the owner's offsets"));
  GS_CHECK(grow(&d->bag_ids, &d->bag_ids_cap, nids + 1, sizeof(int32_t), "the owner's ids"));
  size_t at = 0;
  for (size_t j = 0; j < mine; j++) {
    d->bag_ids_at[j] = at;
    int64_t *off = d->bag_off + j * (N + 1), pos = 0;
    off[0] = 0;
    for (size_t r = 0; r < P; r++) {
      size_t nr = d->n_of[r];
      const int32_t *len = d->id_recv + rd[r];
      /* Rank r's ids of shard j come after its lengths and its ids of the
       * shards before j. */
      size_t skip = mine * nr;
      for (size_t q = 0; q < j * nr; q++) skip += (size_t)len[q];
      const int32_t *src = d->id_recv + rd[r] + skip;
      size_t c = 0;
      for (size_t i = 0; i < nr; i++) {
        c += (size_t)len[j * nr + i];
        pos += len[j * nr + i];
        off[d->n_first[r] + i + 1] = pos;
      }
      memcpy(d->bag_ids + at, src, c * sizeof(int32_t));
      at += c;
    }
  }
  d->bag_ids_at[mine] = at;
  return GS_OK;
}

/* The header and the ids of b, now. */
static gs_status exchange_now(gs_dlrm_dist *d, const gs_dlrm_batch *b, gs_status mine) {
  GS_CHECK(exchange_header(d, b, mine, d->hdr_send, d->hdr_recv));
  header_take(d);
  GS_CHECK(ids_pack(d, b, d->hdr_send, d->hdr_recv, &d->id_send, &d->id_send_cap, &d->id_recv,
                    &d->id_recv_cap, d->sc, d->sd, d->rc, d->rd));
  double t0 = gs_now();
  GS_CHECK(gs_alltoallv(d->comm, d->id_send, d->sc, d->sd, d->id_recv, d->rc, d->rd, GS_I32,
                        GS_ALGO_AUTO));
  a2a_time(d, &d->stats.ids_s, t0);
  return ids_unpack(d, d->rd, d->rc);
}

/* Starts next's exchange with its header (small; a refusal on any rank is
 * kept for next's step, which returns it); prefetch_ids sends the ids. */
static gs_status prefetch_header(gs_dlrm_dist *d, const gs_dlrm_batch *next) {
  gs_status mine = check_local(d, next);
  d->next = next;
  d->nstatus = exchange_header(d, next, mine, d->nhdr_send, d->nhdr_recv);
  if (d->nstatus != GS_OK) {
    gs__error_copy(d->nmsg, sizeof d->nmsg);
    return d->nstatus == GS_ERR_MPI ? d->nstatus : GS_OK; /* a transport error: now */
  }
  return GS_OK;
}

/* next's ids' all-to-allv, left in flight: issued after this step's own
 * exchanges, which the progress thread runs first. */
static gs_status prefetch_ids(gs_dlrm_dist *d) {
  const gs_dlrm_batch *next = d->next;
  if (next == NULL || d->nstatus != GS_OK) return GS_OK;
  GS_CHECK(ids_pack(d, next, d->nhdr_send, d->nhdr_recv, &d->nid_send, &d->nid_send_cap,
                    &d->nid_recv, &d->nid_recv_cap, d->nsc, d->nsd, d->nrc, d->nrd));
  return gs_ialltoallv(d->comm, d->nid_send, d->nsc, d->nsd, d->nid_recv, d->nrc, d->nrd,
                       GS_I32, GS_ALGO_AUTO, &d->nreq);
}

/* Finishes a prefetch: for b, its exchange becomes this step's; for another
 * batch (or an evaluation), it is waited for and dropped. */
static gs_status prefetched(gs_dlrm_dist *d, const gs_dlrm_batch *b, int *used) {
  *used = 0;
  if (d->next == NULL) return GS_OK;
  double t0 = gs_now();
  gs_status st = d->nreq ? gs_wait(d->nreq) : GS_OK;
  d->nreq = NULL;
  a2a_time(d, &d->stats.ids_s, t0);
  const gs_dlrm_batch *was = d->next;
  d->next = NULL;
  GS_CHECK(st);
  if (was != b) return GS_OK;
  *used = 1;
  if (d->nstatus != GS_OK) {
    gs__error_set_message(d->nmsg);
    return d->nstatus;
  }
#define SWAP(T, x, y) do { T tmp_ = x; x = y; y = tmp_; } while (0)
  SWAP(int64_t *, d->hdr_send, d->nhdr_send);
  SWAP(int64_t *, d->hdr_recv, d->nhdr_recv);
  SWAP(int32_t *, d->id_send, d->nid_send);
  SWAP(int32_t *, d->id_recv, d->nid_recv);
  SWAP(size_t, d->id_send_cap, d->nid_send_cap);
  SWAP(size_t, d->id_recv_cap, d->nid_recv_cap);
#undef SWAP
  header_take(d);
  return ids_unpack(d, d->nrd, d->nrc);
}

static void to_half(uint16_t *dst, const float *src, size_t n, int bf16) {
  if (bf16) gs_f32_to_bf16_n(dst, src, n);
  else gs_f32_to_f16_n(dst, src, n);
}

static void from_half(float *dst, const uint16_t *src, size_t n, int bf16) {
  if (bf16) gs_bf16_to_f32_n(dst, src, n);
  else gs_f16_to_f32_n(dst, src, n);
}

/* An all-to-allv of floats (counts and displacements in floats in d->sc, sd,
 * rc, rd), on the wire as fp32, fp16 or bf16: a2a_start issues it (*req:
 * NULL when it completed at once), a2a_finish waits for it and widens what
 * came; a2a_floats is both. In 16 bits, a rank's block to itself crosses no
 * wire: it is copied in fp32 (exact, and no conversion either way), and
 * only the other blocks are narrowed and widened. */
typedef struct a2a_pending {
  float *recv;
  int half, bf16;
  double *phase; /* the stats' phase it is timed in (a2a_s too), conversions included */
  gs_request *req;
} a2a_pending;

static gs_status a2a_start(gs_dlrm_dist *d, const float *send, float *recv, int half, int bf16,
                           double *bytes, double *phase, int nonblocking, a2a_pending *pd) {
  double t0 = gs_now();
  size_t P = (size_t)d->size, me = (size_t)d->rank, stotal = 0, rtotal = 0;
  for (size_t k = 0; k < P; k++) {
    stotal = GS_MAX(stotal, d->sd[k] + d->sc[k]);
    rtotal = GS_MAX(rtotal, d->rd[k] + d->rc[k]);
  }
  *pd = (a2a_pending){recv, half, bf16, phase, NULL};
  const void *sbuf = send;
  void *rbuf = recv;
  gs_dtype t = GS_F32;
  size_t sc_me = d->sc[me], rc_me = d->rc[me];
  if (half) {
    GS_CHECK(grow(&d->half_send, &d->half_send_cap, stotal + 1, 2, "the half-precision sends"));
    GS_CHECK(grow(&d->half_recv, &d->half_recv_cap, rtotal + 1, 2, "the half-precision receipts"));
    for (size_t k = 0; k < P; k++)
      if (k != me) to_half(d->half_send + d->sd[k], send + d->sd[k], d->sc[k], bf16);
    memcpy(recv + d->rd[me], send + d->sd[me], sc_me * sizeof(float));
    d->sc[me] = d->rc[me] = 0; /* the collective copies its arguments */
    sbuf = d->half_send;
    rbuf = d->half_recv;
    t = bf16 ? GS_BF16 : GS_F16;
  }
  *bytes += (double)((stotal - sc_me) * (half ? 2 : 4));
  gs_status st = nonblocking ? gs_ialltoallv(d->comm, sbuf, d->sc, d->sd, rbuf, d->rc, d->rd,
                                             t, GS_ALGO_AUTO, &pd->req)
                             : gs_alltoallv(d->comm, sbuf, d->sc, d->sd, rbuf, d->rc, d->rd,
                                            t, GS_ALGO_AUTO);
  d->sc[me] = sc_me;
  d->rc[me] = rc_me;
  a2a_time(d, phase, t0);
  return st;
}

static gs_status a2a_finish(gs_dlrm_dist *d, a2a_pending *pd) {
  double t0 = gs_now();
  gs_status st = pd->req ? gs_wait(pd->req) : GS_OK;
  pd->req = NULL;
  size_t P = (size_t)d->size, me = (size_t)d->rank;
  for (size_t k = 0; st == GS_OK && pd->half && k < P; k++)
    if (k != me) from_half(pd->recv + d->rd[k], d->half_recv + d->rd[k], d->rc[k], pd->bf16);
  a2a_time(d, pd->phase, t0);
  return st;
}

static gs_status a2a_floats(gs_dlrm_dist *d, const float *send, float *recv, int half,
                            int bf16, double *bytes, double *phase) {
  a2a_pending pd;
  GS_CHECK(a2a_start(d, send, recv, half, bf16, bytes, phase, 0, &pd));
  return a2a_finish(d, &pd);
}

static gs_status forward_bottom(gs_dlrm_dist *d, const gs_dlrm_batch *b) {
  double t0 = gs_now();
  GS_CHECK(gs_dlrm_forward_bottom(d->m, b));
  timed(d, &d->stats.mlp_s, "bottom MLP", t0);
  return GS_OK;
}

/* After the bottom MLP: owners pool; the vectors travel back; each rank
 * assembles its pooled matrix. Then the top of the model. */
static gs_status dist_forward(gs_dlrm_dist *d, const gs_dlrm_batch *b, float *logits) {
  size_t P = (size_t)d->size, me = (size_t)d->rank, n = b->n, N = d->N, D = d->D, T = d->T;
  size_t mine = d->count[me], Wm = d->W[me];
  double t0 = gs_now();
  size_t own, sum_w = 0;
  for (size_t k = 0; k < P; k++) sum_w += d->W[k];
  GS_CHECK(gs_mul_size(N, Wm, &own));
  GS_CHECK(grow(&d->own_pooled, &d->own_cap, own + 1, sizeof(float), "the owner's pooled vectors"));
  GS_CHECK(grow(&d->mine_pooled, &d->mine_cap, n * sum_w + 1, sizeof(float),
                "the pooled vectors received"));
  for (size_t j = 0; j < mine; j++) {
    const dist_shard *x = &d->sh[d->first[me] + j];
    gs_embed_bags bags = {N, d->bag_off + j * (N + 1), d->bag_ids + d->bag_ids_at[j], 0, 0};
    SHARD_TIMED(d, j, GS_CHECK(gs_embed_forward(&d->local[j], &bags, GS_EMBED_SUM,
                                                 d->own_pooled, Wm, x->col)));
  }
  float *pooled = gs_dlrm_pooled(d->m);
  for (int j = 0; j < d->ndp; j++) {
    size_t t = (size_t)d->dp_table[j];
    gs_embed_bags bags = dlrm_batch_bags(b, t);
    SHARD_TIMED(d, mine + (size_t)j,
                GS_CHECK(gs_embed_forward(&d->local[mine + (size_t)j], &bags, GS_EMBED_SUM,
                                          pooled, T * D, t * D)));
  }
  timed(d, &d->stats.lookup_s, "lookup", t0);

  /* Rank r's block of the owner's matrix goes to r; from owner k come n x
   * W[k] floats. */
  size_t at = 0;
  for (size_t r = 0; r < P; r++) {
    d->sc[r] = d->n_of[r] * Wm;
    d->sd[r] = d->n_first[r] * Wm;
    d->rc[r] = n * d->W[r];
    d->rd[r] = at;
    at += d->rc[r];
  }
  int half = d->precision != GS_DLRM_A2A_FP32, bf16 = d->precision == GS_DLRM_A2A_BF16;
  GS_CHECK(a2a_floats(d, d->own_pooled, d->mine_pooled, half, bf16, &d->stats.pooled_bytes,
                      &d->stats.pooled_s));

  /* Assemble: the sharded tables' columns from zero, shards added in rank
   * order (a row-wise table's partial sums; otherwise one block each). */
  t0 = gs_now();
  for (size_t i = 0; i < n; i++) {
    float *row = pooled + i * T * D;
    for (size_t t = 0; t < T; t++)
      if (!d->is_dp[t]) memset(row + t * D, 0, D * sizeof(float));
  }
  for (size_t k = 0; k < P; k++) {
    const float *blk = d->mine_pooled + d->rd[k];
    for (size_t s = d->first[k]; s < d->first[k] + d->count[k]; s++) {
      const dist_shard *x = &d->sh[s];
      size_t w = x->col_hi - x->col_lo, dst = (size_t)x->table * D + x->col_lo;
      for (size_t i = 0; i < n; i++) {
        float *o = pooled + i * T * D + dst;
        const float *v = blk + i * d->W[k] + x->col;
        for (size_t c = 0; c < w; c++) o[c] += v[c];
      }
    }
  }
  dlrm_mark_pooled(d->m);
  GS_CHECK(gs_dlrm_forward_top(d->m, n, logits));
  timed(d, &d->stats.mlp_s, "interaction, top MLP", t0);
  return GS_OK;
}

gs_status dlrm_dist_settle(gs_dlrm_dist *d) {
  int used;
  return prefetched(d, NULL, &used);
}

/* The header, the ids (exchanged now, or under the step before) and the
 * forward: everything a step and an evaluation share. */
static gs_status dist_begin(gs_dlrm_dist *d, const gs_dlrm_batch *b, float *logits) {
  /* b's ids sent ahead (and b checked then): its bottom MLP runs while
   * they finish arriving. */
  int early = d->next == b && d->nstatus == GS_OK, used;
  if (early) GS_CHECK(forward_bottom(d, b));
  GS_CHECK(prefetched(d, b, &used));
  if (!used) GS_CHECK(exchange_now(d, b, check_local(d, b)));
  if (!early) GS_CHECK(forward_bottom(d, b));
  return dist_forward(d, b, logits);
}

gs_status gs_dlrm_dist_forward(gs_dlrm_dist *d, const gs_dlrm_batch *b, float *logits) {
  if (d == NULL || logits == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM forward: NULL model or logits");
  double t0 = gs_now();
  GS_CHECK(dist_begin(d, b, logits));
  d->stats.forwards++;
  d->stats.total_s += gs_now() - t0;
  return GS_OK;
}

/* ---- Backward ---------------------------------------------------------------- */

/* The gathered dp tables: every rank's lengths, ids and gradients, then the
 * same update on every replica over the global batch in rank order. */
static gs_status dp_update(gs_dlrm_dist *d, const gs_dlrm_batch *b, const gs_embed_optim *opt) {
  size_t P = (size_t)d->size, n = b->n, D = d->D, T = d->T, ng = (size_t)d->ngat;
  size_t me = (size_t)d->rank, mine = d->count[me], N = d->N;
  /* Ids: [lengths of every such table (n each)][ids of every such table]. */
  size_t cnt = ng * n + (size_t)d->hdr_send[HDR_DP_IDS], rtot = 0;
  GS_CHECK(grow(&d->dp_send, &d->dp_send_cap, cnt + 1, sizeof(int32_t), "the dp ids sent"));
  int32_t *len = d->dp_send, *out = d->dp_send + ng * n;
  for (size_t k = 0; k < ng; k++) {
    const gs_embed_bags *bg = &b->bags[d->dp_table[d->gat[k]]];
    for (size_t i = 0; i < n; i++) len[k * n + i] = (int32_t)(bg->offsets[i + 1] - bg->offsets[i]);
    size_t c = (size_t)bg->offsets[n];
    memcpy(out, bg->ids, c * sizeof(int32_t));
    out += c;
  }
  for (size_t r = 0; r < P; r++) {
    d->rc[r] = ng * d->n_of[r] + (size_t)d->hdr_recv[r * HDR_LEN + HDR_DP_IDS];
    d->rd[r] = rtot;
    rtot += d->rc[r];
  }
  GS_CHECK(grow(&d->dp_recv, &d->dp_recv_cap, rtot + 1, sizeof(int32_t), "the dp ids received"));
  size_t gcount = n * ng * D, gtot = N * ng * D;
  GS_CHECK(grow(&d->dp_gsend, &d->dp_gsend_cap, gcount + 1, sizeof(float), "the dp gradients"));
  GS_CHECK(grow(&d->dp_grecv, &d->dp_grecv_cap, gtot + 1, sizeof(float), "the dp gradients"));
  const float *dpooled = gs_dlrm_pooled_grad(d->m);
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < ng; k++)
      memcpy(d->dp_gsend + (i * ng + k) * D,
             dpooled + i * T * D + (size_t)d->dp_table[d->gat[k]] * D, D * sizeof(float));
  double t0 = gs_now();
  GS_CHECK(gs_allgatherv(d->comm, d->dp_send, cnt, d->dp_recv, d->rc, d->rd, GS_I32,
                         GS_ALGO_AUTO));
  for (size_t r = 0; r < P; r++) {
    d->rc[r] = d->n_of[r] * ng * D;
    d->rd[r] = d->n_first[r] * ng * D;
  }
  GS_CHECK(gs_allgatherv(d->comm, d->dp_gsend, gcount, d->dp_grecv, d->rc, d->rd, GS_F32,
                         GS_ALGO_AUTO));
  timed_comm(d, &d->stats.a2a_s, "dp all-gather", t0);
  d->stats.dp_bytes += (double)((P - 1) * (cnt * 4 + gcount * 4));

  t0 = gs_now();
  size_t nid = rtot - ng * N;
  GS_CHECK(grow(&d->dp_off, &d->dp_off_cap, N + 1, sizeof(int64_t), "the dp offsets"));
  GS_CHECK(grow(&d->dp_ids, &d->dp_ids_cap, nid + 1, sizeof(int32_t), "the dp ids"));
  for (size_t k = 0; k < ng; k++) {
    int64_t pos = 0;
    d->dp_off[0] = 0;
    size_t at = 0, base = 0; /* where rank r's block starts */
    for (size_t r = 0; r < P; r++) {
      size_t nr = d->n_of[r];
      const int32_t *rl = d->dp_recv + base;
      base += ng * nr + (size_t)d->hdr_recv[r * HDR_LEN + HDR_DP_IDS];
      size_t skip = ng * nr;
      for (size_t q = 0; q < k * nr; q++) skip += (size_t)rl[q];
      size_t c = 0;
      for (size_t i = 0; i < nr; i++) {
        c += (size_t)rl[k * nr + i];
        pos += rl[k * nr + i];
        d->dp_off[d->n_first[r] + i + 1] = pos;
      }
      memcpy(d->dp_ids + at, rl + skip, c * sizeof(int32_t));
      at += c;
    }
    gs_embed_bags bags = {N, d->dp_off, d->dp_ids, 0, 0};
    size_t loc = mine + (size_t)d->gat[k];
    SHARD_TIMED(d, loc, GS_CHECK(gs_embed_backward_update(&d->local[loc], &bags, GS_EMBED_SUM,
                                                          d->dp_grecv, ng * D, k * D, opt,
                                                          &d->work)));
  }
  timed(d, &d->stats.lookup_s, "dp update", t0);
  return GS_OK;
}

/* Dense dp table j's gradient of this rank's samples, into its place in
 * fused (cleared first: the kernel adds). */
static gs_status dense_grad(gs_dlrm_dist *d, const gs_dlrm_batch *b, int j) {
  size_t t = (size_t)d->dp_table[j], D = d->D;
  float *g = d->fused + d->dense_at[j];
  gs_embed_bags bags = dlrm_batch_bags(b, t);
  size_t at = d->count[d->rank] + (size_t)j;
  gs_status st = GS_OK;
  SHARD_TIMED(d, at, memset(g, 0, d->rows[t] * D * sizeof(float));
              st = gs_embed_backward_dense(&d->local[at], &bags, GS_EMBED_SUM,
                                           gs_dlrm_pooled_grad(d->m), d->T * D, t * D, g));
  return st;
}

/* The MLP gradients, then the dense dp tables' gradients of this rank's
 * samples after them, into fused. */
static gs_status fuse_grads(gs_dlrm_dist *d, const gs_dlrm_batch *b) {
  size_t nw;
  const float *grads = gs_dlrm_mlp_grads(d->m, &nw);
  memcpy(d->fused, grads, nw * sizeof(float));
  for (int j = 0; j < d->ndp; j++)
    if (d->dp_dense[j]) GS_CHECK(dense_grad(d, b, j));
  return GS_OK;
}

/* ---- Row-wise Adagrad on column blocks ------------------------------------
 * A row's accumulator takes the mean of g^2 over all D columns, and a
 * column block holds some of them. Every block of a table sees the same
 * ids within its rows (each rank routes every id to every block holding its
 * row), so the owners of two blocks in different bands whose rows meet know
 * the same touched rows there, in the same (ascending) order. Each sends the
 * other its sums of squares of those rows, one all-to-allv of floats whose
 * counts both sides know; every owner adds the bands' sums in column order,
 * so all blocks of a row take the same, bitwise equal, increment: the
 * single-process update up to the order of one sum. The message from rank r
 * to rank k holds, for each shard of k in order and each shard of r in order
 * that pair, r's sums for the rows they share. */

static int sq_pair(const dist_shard *a, const dist_shard *b) {
  return a->table == b->table && a->col_lo != b->col_lo && a->row_lo < b->row_hi &&
         b->row_lo < a->row_hi;
}

static size_t lower_bound_u32(const uint32_t *v, size_t n, size_t key) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((size_t)v[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Local shard j's touched rows within shard o's rows: urows[j] [*lo, *hi). */
static void rows_within(const gs_dlrm_dist *d, size_t j, const dist_shard *o, size_t *lo,
                        size_t *hi) {
  const dist_shard *x = &d->sh[d->first[d->rank] + j];
  const gs_embed_rows *u = &d->urows[j];
  *lo = lower_bound_u32(u->row, u->n, GS_MAX(x->row_lo, o->row_lo) - x->row_lo);
  *hi = lower_bound_u32(u->row, u->n, GS_MIN(x->row_hi, o->row_hi) - x->row_lo);
}

static int is_split(const gs_dlrm_dist *d, const dist_shard *x) {
  return x->col_hi - x->col_lo < d->D;
}

/* The backward of this rank's column blocks with row-wise Adagrad. Every
 * rank takes part in the exchange, even after a failure of its own. */
static gs_status split_update(gs_dlrm_dist *d, const gs_embed_optim *opt) {
  size_t P = (size_t)d->size, me = (size_t)d->rank, mine = d->count[me], N = d->N;
  size_t f = d->first[me];
  gs_status st = GS_OK;
  double t0 = gs_now();
  for (size_t j = 0; j < mine; j++) {
    const dist_shard *x = &d->sh[f + j];
    d->urows[j].n = 0;
    if (!is_split(d, x) || st != GS_OK) continue;
    gs_embed_bags bags = {N, d->bag_off + j * (N + 1), d->bag_ids + d->bag_ids_at[j], 0, 0};
    SHARD_TIMED(d, j, st = gs_embed_backward_rows(&d->local[j], &bags, GS_EMBED_SUM,
                                                  d->own_pooled, d->W[me], x->col, &d->urows[j],
                                                  &d->work));
  }
  /* Counts: what this rank sends rank k (its rows in the pairs of its
   * shards with k's) is what k sends back (the same pairs, the same rows),
   * so one table serves both ways. */
  size_t tot = 0, lo, hi;
  for (size_t k = 0; k < P; k++) {
    d->xd[k] = tot;
    for (size_t s = d->first[k]; s < d->first[k] + d->count[k]; s++)
      for (size_t j = 0; j < mine; j++)
        if (sq_pair(&d->sh[s], &d->sh[f + j])) {
          rows_within(d, j, &d->sh[s], &lo, &hi);
          tot += hi - lo;
        }
    d->xc[k] = tot - d->xd[k];
  }
  gs_status gst = grow(&d->xsend, &d->xsend_cap, tot + 1, sizeof(float), "the sums of squares");
  if (gst == GS_OK)
    gst = grow(&d->xrecv, &d->xrecv_cap, tot + 1, sizeof(float), "the sums of squares");
  if (gst != GS_OK) return gst; /* out of memory: nothing else can be done */
  for (size_t k = 0, at = 0; k < P; k++)
    for (size_t s = d->first[k]; s < d->first[k] + d->count[k]; s++)
      for (size_t j = 0; j < mine; j++)
        if (sq_pair(&d->sh[s], &d->sh[f + j])) {
          rows_within(d, j, &d->sh[s], &lo, &hi);
          memcpy(d->xsend + at, d->urows[j].sq + lo, (hi - lo) * sizeof(float));
          at += hi - lo;
        }
  timed(d, &d->stats.lookup_s, "column blocks' squares", t0);
  t0 = gs_now();
  gst = gs_alltoallv(d->comm, d->xsend, d->xc, d->xd, d->xrecv, d->xc, d->xd, GS_F32,
                     GS_ALGO_AUTO);
  timed_comm(d, &d->stats.a2a_s, "squares all-to-all", t0);
  d->stats.grad_bytes += (double)(tot - d->xc[me]) * 4;
  GS_CHECK(st);
  GS_CHECK(gst);

  /* Each block's rows: the bands' sums in column order, then the update. */
  t0 = gs_now();
  for (size_t k = 0; k < P; k++) d->xcur[k] = d->xd[k];
  for (size_t j = 0; j < mine; j++) {
    const dist_shard *x = &d->sh[f + j];
    if (!is_split(d, x)) continue;
    for (size_t r = 0; r < P; r++)
      for (size_t s = d->first[r]; s < d->first[r] + d->count[r]; s++)
        if (sq_pair(&d->sh[f + j], &d->sh[s])) {
          rows_within(d, j, &d->sh[s], &lo, &hi);
          d->xoff[s] = d->xcur[r];
          d->xcur[r] += hi - lo;
        }
    const gs_embed_rows *u = &d->urows[j];
    GS_CHECK(grow(&d->xsum, &d->xsum_cap, u->n + 1, sizeof(float), "the rows' sums"));
    memset(d->xsum, 0, u->n * sizeof(float));
    size_t t = (size_t)x->table;
    for (size_t i = d->band_first[t]; i < d->band_first[t + 1]; i++) {
      size_t s = d->band_order[i];
      if (s == f + j) {
        for (size_t q = 0; q < u->n; q++) d->xsum[q] += u->sq[q];
      } else if (sq_pair(x, &d->sh[s])) {
        rows_within(d, j, &d->sh[s], &lo, &hi);
        const float *from = d->xrecv + d->xoff[s];
        for (size_t q = lo; q < hi; q++) d->xsum[q] += from[q - lo];
      }
    }
    SHARD_TIMED(d, j, GS_CHECK(gs_embed_rows_update(&d->local[j], u, d->xsum, d->D, opt)));
  }
  timed(d, &d->stats.lookup_s, "embedding update", t0);
  return GS_OK;
}

gs_status gs_dlrm_dist_train_step(gs_dlrm_dist *d, const gs_dlrm_batch *b,
                                  const gs_dlrm_optim *opt, double *loss, float *logits) {
  return gs_dlrm_dist_train_step_next(d, b, NULL, opt, loss, logits);
}

/* The dense dp tables' gradients, from the pooled gradient, handed to the
 * engine in its backward order (the reverse of registration). */
static gs_status dense_grads_ready(gs_dlrm_dist *d, const gs_dlrm_batch *b) {
  size_t np = gs_dlrm_param_count(d->m);
  for (int j = d->ndp - 1; j >= 0; j--) {
    if (!d->dp_dense[j]) continue;
    GS_CHECK(dense_grad(d, b, j));
    GS_CHECK(mlp_ready(d, np + (size_t)j));
  }
  return GS_OK;
}

/* The engine's averages back to sums (the gradients are of the global mean
 * already: each rank's divided by N): the MLPs', and the dense dp tables',
 * which lie side by side in fused after the MLPs' place (dp_choose). */
static void engine_sums(gs_dlrm_dist *d) {
  if (d->size == 1) return;
  float p = (float)d->size;
  size_t nw;
  float *g = gs_dlrm_mlp_grads(d->m, &nw);
  for (size_t k = 0; k < nw; k++) g[k] *= p;
  for (size_t k = nw; k < d->nfused; k++) d->fused[k] *= p;
}

gs_status gs_dlrm_dist_train_step_next(gs_dlrm_dist *d, const gs_dlrm_batch *b,
                                       const gs_dlrm_batch *next, const gs_dlrm_optim *opt,
                                       double *loss, float *logits) {
  if (d == NULL || opt == NULL || b == NULL || next == b)
    return gs_error(GS_ERR_INVALID_ARG, "DLRM step: NULL model, optimizer or batch, or the "
                    "next batch is this one");
  double t_start = gs_now();
  GS_CHECK(dist_begin(d, b, d->logits));
  /* The next batch's header now, its ids under the embedding updates. */
  if (next) GS_CHECK(prefetch_header(d, next));
  size_t P = (size_t)d->size, me = (size_t)d->rank, n = b->n, N = d->N, D = d->D, T = d->T;
  size_t mine = d->count[me], Wm = d->W[me];
  int eng = d->eng != NULL && !d->engine_off;

  /* The loss of the global batch: gradients divided by N, losses summed.
   * With the engine, the top MLP's gradients go to it as they are made. */
  double t0 = gs_now(), lsum;
  GS_CHECK(dlrm_bce(d->logits, b->labels, n, (double)N, b->first_sample, &lsum, d->dlogits));
  GS_CHECK(gs_dlrm_backward_top(d->m, d->dlogits, eng ? mlp_ready : NULL, d));
  if (!eng) GS_CHECK(gs_dlrm_backward_bottom(d->m, NULL, NULL));
  timed(d, &d->stats.mlp_s, "loss, top MLP backward", t0);

  /* Each shard's gradient columns to its owner. */
  t0 = gs_now();
  const float *dpooled = gs_dlrm_pooled_grad(d->m);
  size_t at = 0;
  for (size_t k = 0; k < P; k++) {
    d->sc[k] = n * d->W[k];
    d->sd[k] = at;
    at += d->sc[k];
    float *blk = d->mine_pooled + d->sd[k];
    for (size_t s = d->first[k]; s < d->first[k] + d->count[k]; s++) {
      const dist_shard *x = &d->sh[s];
      size_t w = x->col_hi - x->col_lo, src = (size_t)x->table * D + x->col_lo;
      for (size_t i = 0; i < n; i++)
        memcpy(blk + i * d->W[k] + x->col, dpooled + i * T * D + src, w * sizeof(float));
    }
  }
  for (size_t r = 0; r < P; r++) {
    d->rc[r] = d->n_of[r] * Wm;
    d->rd[r] = d->n_first[r] * Wm;
  }
  timed(d, &d->stats.mlp_s, "interaction backward", t0);

  /* Fused: the sum of the MLP gradients and the dense dp tables' (one fused
   * message) and the loss's, issued before the gradients' all-to-all so
   * that they run on the progress thread under it and the embeddings'
   * update. Engine: the dense dp tables' gradients to the engine, the
   * gradients' all-to-all issued, and the bottom MLP's backward under it
   * (its gradients to the engine too). */
  t0 = gs_now();
  GS_CHECK(eng ? dense_grads_ready(d, b) : fuse_grads(d, b));
  timed(d, &d->stats.lookup_s, "dense gradients", t0);
  size_t nw;
  float *grads = gs_dlrm_mlp_grads(d->m, &nw);
  double loss_sum = lsum;
  int half = d->precision != GS_DLRM_A2A_FP32;
  gs_request *ar = NULL, *lr = NULL;
  a2a_pending ga = {0};
  if (!eng)
    GS_CHECK(gs_iallreduce(d->comm, GS_IN_PLACE, d->fused, d->nfused, GS_F32, GS_SUM,
                           GS_ALGO_AUTO, &ar));
  gs_status st = gs_iallreduce(d->comm, GS_IN_PLACE, &loss_sum, 1, GS_F64, GS_SUM,
                               GS_ALGO_AUTO, &lr);
  if (st == GS_OK)
    st = a2a_start(d, d->mine_pooled, d->own_pooled, half, half, &d->stats.grad_bytes,
                   &d->stats.grads_s, eng, &ga);
  if (st == GS_OK && eng) {
    t0 = gs_now();
    st = gs_dlrm_backward_bottom(d->m, mlp_ready, d);
    timed(d, &d->stats.mlp_s, "bottom MLP backward", t0);
  }
  if (st == GS_OK || ga.req) { /* an issued exchange is always waited for */
    gs_status fst = a2a_finish(d, &ga);
    if (st == GS_OK) st = fst;
  }
  if (st == GS_OK) st = prefetch_ids(d);
  if (st != GS_OK) {
    gs_wait(ar);
    if (lr) gs_wait(lr);
    return st;
  }
  d->stats.allreduce_bytes +=
      P > 1 ? 2.0 * (double)(P - 1) / (double)P * (double)d->nfused * 4 : 0;

  /* The owners' fused backward + update over the global batch. */
  t0 = gs_now();
  int split = d->any_split && opt->embed.kind == GS_EMBED_ROWWISE_ADAGRAD;
  for (size_t j = 0; j < mine && st == GS_OK; j++) {
    const dist_shard *x = &d->sh[d->first[me] + j];
    if (split && is_split(d, x)) continue; /* split_update's */
    gs_embed_bags bags = {N, d->bag_off + j * (N + 1), d->bag_ids + d->bag_ids_at[j], 0, 0};
    SHARD_TIMED(d, j, st = gs_embed_backward_update(&d->local[j], &bags, GS_EMBED_SUM,
                                                    d->own_pooled, Wm, x->col, &opt->embed,
                                                    &d->work));
  }
  timed(d, &d->stats.lookup_s, "embedding update", t0);
  if (split) {
    gs_status sst = split_update(d, &opt->embed);
    if (st == GS_OK) st = sst;
  }
  if (st == GS_OK && d->ngat > 0) st = dp_update(d, b, &opt->embed);

  t0 = gs_now();
  gs_status wst = eng ? gs_engine_wait(d->eng) : gs_wait(ar);
  d->eopen = 0;
  gs_status lst = gs_wait(lr);
  timed_comm(d, &d->stats.allreduce_s, "all-reduce wait", t0);
  GS_CHECK(st);
  GS_CHECK(wst);
  GS_CHECK(lst);
  t0 = gs_now();
  if (eng) engine_sums(d);
  for (int j = 0; j < d->ndp; j++)
    if (d->dp_dense[j])
      SHARD_TIMED(d, mine + (size_t)j,
                  GS_CHECK(gs_embed_update_dense(&d->local[mine + (size_t)j],
                                                 d->fused + d->dense_at[j], &opt->embed)));
  timed(d, &d->stats.lookup_s, "dp update", t0);
  t0 = gs_now();
  if (!eng) memcpy(grads, d->fused, nw * sizeof(float));
  gs_dlrm_update_mlp(d->m, opt->mlp_lr);
  timed(d, &d->stats.mlp_s, "MLP update", t0);
  if (loss) *loss = loss_sum / (double)N;
  if (logits) memcpy(logits, d->logits, n * sizeof(float));
  d->stats.steps++;
  double step_s = gs_now() - t_start;
  d->stats.total_s += step_s;
  return mlp_choose(d, step_s);
}
