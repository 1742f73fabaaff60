/*
 * The engine's control plane, run by its launch thread at the start of an
 * iteration: the first iteration's registration check, the profiler (layer
 * times from grad_ready stamps, a and b fitted from the engine's own
 * collectives) and the plan, made on rank 0 and broadcast so that every rank
 * issues the same collectives.
 *
 * Schedule (the same on every rank, so every rank joins each exchange):
 *   iteration 0           registration check; first plan (wfbp while the
 *                         profiler warms up, for policies that need a profile)
 *   iteration W (warm-up) the policy's plan from the measurements
 *   W + k*interval        rank 0 checks for drift; a new plan if the current
 *                         plan's predicted time moved by more than the drift
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ---- Registration check ------------------------------------------------------ */

typedef struct reg_rec {
  uint64_t hash, count, dtype;
  char name[56];
} reg_rec;

static void tensor_rec(const eng_tensor *t, reg_rec *r) {
  memset(r, 0, sizeof *r);
  uint64_t cnt = t->count, dt = (uint64_t)t->dtype;
  uint64_t h = gs_fnv1a(GS_FNV1A_BASIS, t->name, strlen(t->name) + 1);
  h = gs_fnv1a(h, &cnt, sizeof cnt);
  r->hash = gs_fnv1a(h, &dt, sizeof dt);
  r->count = cnt;
  r->dtype = dt;
  snprintf(r->name, sizeof r->name, "%s", t->name);
}

static void describe(char *dst, size_t n, const reg_rec *r) {
  snprintf(dst, n, "'%s' (%llu x %s)", r->name, (unsigned long long)r->count,
           gs_dtype_name((gs_dtype)r->dtype));
}

/* Every rank contributes (number of tensors, hash of names, counts, dtypes
 * and order) to one fixed-size allgather, so a mismatch cannot hang. On a
 * mismatch, rank 0's list is broadcast (its length is known to all from the
 * first exchange) and a second fixed-size allgather collects where each rank
 * first differs, so that every rank reports the same complete story. */
gs_status eng_check_registration(gs_engine *e) {
  int p = e->size;
  if (p == 1) return GS_OK;
  uint64_t h = GS_FNV1A_BASIS;
  for (size_t i = 0; i < e->ntensors; i++) {
    reg_rec r;
    tensor_rec(&e->tensors[i], &r);
    h = gs_fnv1a(h, &r.hash, sizeof r.hash);
  }
  uint64_t mine[2] = {e->ntensors, h};
  uint64_t *all = gs_malloc(2 * sizeof(uint64_t) * (size_t)p);
  if (all == NULL) return GS_ERR_NOMEM;
  gs_status st = gs_allgather(e->comm, mine, all, 2, GS_I64, GS_ALGO_AUTO);
  if (st != GS_OK) {
    gs_free(all);
    return st;
  }
  int same = 1;
  for (int r = 1; r < p; r++)
    if (all[2 * r] != all[0] || all[2 * r + 1] != all[1]) same = 0;
  if (same) {
    gs_free(all);
    return GS_OK;
  }
  size_t n0 = (size_t)all[0];
  reg_rec *recs = gs_calloc(n0 + 1, sizeof *recs);
  uint64_t *diff = gs_malloc(sizeof(uint64_t) * (size_t)p);
  if (recs == NULL || diff == NULL) {
    gs_free(all);
    gs_free(recs);
    gs_free(diff);
    return GS_ERR_NOMEM;
  }
  if (e->rank == 0)
    for (size_t i = 0; i < n0; i++) tensor_rec(&e->tensors[i], &recs[i]);
  st = gs_bcast(e->comm, recs, n0 * sizeof *recs, GS_U8, 0, GS_ALGO_AUTO);
  size_t first = GS_MIN(n0, e->ntensors);
  for (size_t i = 0; st == GS_OK && i < GS_MIN(n0, e->ntensors); i++) {
    reg_rec r;
    tensor_rec(&e->tensors[i], &r);
    if (r.hash != recs[i].hash) {
      first = i;
      break;
    }
  }
  uint64_t first64 = first;
  if (st == GS_OK) st = gs_allgather(e->comm, &first64, diff, 1, GS_I64, GS_ALGO_AUTO);
  if (st != GS_OK) {
    gs_free(all);
    gs_free(recs);
    gs_free(diff);
    return st;
  }
  char msg[1024], part[400], a[160], b[160];
  int len = snprintf(msg, sizeof msg, "ranks registered different gradient tensors "
                     "(every rank must register the same names, counts and dtypes "
                     "in the same order; checked on the first iteration):");
  int shown = 0;
  for (int r = 1; r < p && len < (int)sizeof msg; r++) {
    size_t nr = (size_t)all[2 * r], d = (size_t)diff[r];
    if (nr == n0 && all[2 * r + 1] == all[1]) continue;
    if (shown++ == 4) {
      len += snprintf(msg + len, sizeof msg - (size_t)len, " ...");
      break;
    }
    if (d < GS_MIN(nr, n0)) {
      describe(a, sizeof a, &recs[d]);
      if (r == e->rank) {
        reg_rec mr;
        tensor_rec(&e->tensors[d], &mr);
        describe(b, sizeof b, &mr);
        snprintf(part, sizeof part, " rank %d's tensor %zu is %s where rank 0's is %s;",
                 r, d, b, a);
      } else {
        snprintf(part, sizeof part, " rank %d's tensor %zu differs from rank 0's %s;",
                 r, d, a);
      }
    } else {
      snprintf(part, sizeof part, " rank %d registered %zu tensors, rank 0 %zu;", r,
               nr, n0);
    }
    len += snprintf(msg + len, sizeof msg - (size_t)len, "%s", part);
  }
  if (len > 0 && len < (int)sizeof msg && msg[len - 1] == ';') msg[len - 1] = '\0';
  gs_free(all);
  gs_free(recs);
  gs_free(diff);
  return gs_error(GS_ERR_MISMATCH, "rank %d: %s", e->rank, msg);
}

/* ---- Agreement points ---------------------------------------------------------- */

gs_status eng_agree_on(gs_comm *comm, gs_status mine, const char *what) {
  int p = gs_comm_size(comm), me = gs_comm_rank(comm);
  if (p == 1) return mine;
  char own[1024] = "";
  if (mine != GS_OK) gs__error_copy(own, sizeof own);
  gs_agreement ag;
  gs_status st = gs_agree(comm, MPI_COMM_NULL, "engine agreement", mine, own,
                          NULL, 0, &ag);
  if (st != GS_OK) return st;
  if (mine != GS_OK) {
    gs_agreement_free(&ag);
    gs__error_set_message(own);
    return mine;
  }
  char list[600] = "";
  size_t len = 0;
  int bad = 0;
  for (int r = 0; r < p; r++) {
    gs_status s = (gs_status)ag.votes[r].status;
    if (s == GS_OK) continue;
    if (bad++ < 8 && len < sizeof list)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%d (%s)", bad > 1 ? ", " : "",
                              r, gs_strerror(s));
  }
  gs_status code = bad ? (gs_status)ag.votes[ag.first].status : GS_OK;
  gs_agreement_free(&ag);
  if (bad == 0) return GS_OK;
  if (code <= GS_OK || code >= GS_STATUS_COUNT) code = GS_ERR_INTERNAL;
  return gs_error(code, "rank %d: rank%s %s%s could not %s (%s own message says why); "
                  "every rank fails with %s", me, bad > 1 ? "s" : "", list,
                  bad > 8 ? ", ..." : "", what, bad > 1 ? "their" : "its",
                  bad > 1 ? "them" : "it");
}

gs_status eng_agree(gs_engine *e, gs_status mine, const char *what) {
  return eng_agree_on(e->comm, mine, what);
}

/* ---- Profiler ---------------------------------------------------------------------
 * Tensor c's effective ready time is the latest stamp of c and every tensor
 * after it (the clamp tools/profile_model.py applies when autograd reorders
 * gradients); backward_s[c] is the gap to the next effective time up, and
 * the time from the iteration's start (the previous wait's return) to the
 * first gradient, less time blocked in wait_tensor, counts as forward
 * (gs_profile_fold_step). */
void eng_profile_iteration(gs_engine *e, uint64_t flush_ns) {
  (void)flush_ns;
  size_t L = e->ncomm;
  if (e->liter < 1 || e->it_start_ns == 0 || L == 0) return;
  double fwd = gs_profile_fold_step(e->stamp, L, e->it_start_ns, e->w_bwd) -
               (double)e->it_fwd_wait_ns * 1e-9;
  e->w_fwd += fwd > 0 ? fwd : 0.0;
  e->w_n++;
}

/* Fits one kind of collective's measured curve (gs_cost_curve_fit: a point
 * per power-of-two size class, the median time, so that outliers and the
 * many small messages do not dominate). Returns 0 on success; on failure
 * (fewer than two classes, or a slope the noise hides: ranks arriving late
 * dominate) *out is unchanged and the previous cost stays. */
static int fit_op(const eng_sample *src, size_t n, eng_op op, gs_cost_curve *out) {
  double *x = gs_malloc((n + 1) * sizeof(double)), *y = gs_malloc((n + 1) * sizeof(double));
  int rc = -1;
  if (x != NULL && y != NULL) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      if (src[i].op == op) {
        x[m] = (double)src[i].bytes;
        y[m++] = src[i].secs;
      }
    char saved[1024];
    gs__error_copy(saved, sizeof saved); /* a failed fit is not an error */
    rc = gs_cost_curve_fit(x, y, m, out) == GS_OK ? 0 : -1;
    gs__error_set_message(saved);
  }
  gs_free(x);
  gs_free(y);
  return rc;
}

/* Updates e->cost from the samples (rank 0). Dear's reduce-scatter and
 * all-gather costs come from their own fits when both exist, else each is
 * half the all-reduce (gs_plan_cost_from_ab). */
static void refit_cost(gs_engine *e) {
  pthread_mutex_lock(&e->mu);
  size_t n = GS_MIN(e->nsamples, (size_t)ENG_SAMPLES);
  eng_sample *s = gs_malloc((n + 1) * sizeof *s);
  if (s) memcpy(s, e->samples, n * sizeof *s);
  pthread_mutex_unlock(&e->mu);
  if (s == NULL) return;
  gs_cost_curve ar, rs, ag;
  if (fit_op(s, n, OP_ALLREDUCE, &ar) == 0) {
    if (!e->cost_curve) ar.npoints = 0;
    /* Reduce-scatter and all-gather are halves of it until they have
     * been measured themselves; measured ones are kept when a later
     * window has too few of their samples to refit. */
    if (!e->rsag_measured) gs_plan_cost_from_ab(ar.a, ar.b, &e->cost);
    e->cost.ar = ar;
    e->cost_measured = 1;
  }
  if (fit_op(s, n, OP_RS, &rs) == 0 && fit_op(s, n, OP_AG, &ag) == 0) {
    if (!e->cost_curve) rs.npoints = ag.npoints = 0;
    e->cost.rs = rs;
    e->cost.ag = ag;
    e->rsag_measured = 1;
    if (!e->cost_measured) /* no all-reduce fit yet: RS + AG is one */
      gs_cost_curve_affine(rs.a + ag.a, rs.b + ag.b, &e->cost.ar);
    e->cost_measured = 1;
  }
  gs_free(s);
}

/* ---- Plans ------------------------------------------------------------------------- */

/* The profile as the engine sees it: the tensors with count > 0, with the
 * window's mean times (zero before any measurement). Names are borrowed. */
static gs_status window_profile(gs_engine *e, gs_profile *p) {
  memset(p, 0, sizeof *p);
  p->name = "engine";
  p->device = "";
  p->source = "gradsync engine profiler";
  p->ntensors = e->ncomm;
  p->tensors = gs_calloc(e->ncomm, sizeof *p->tensors);
  if (p->tensors == NULL) return GS_ERR_NOMEM;
  double n = e->w_n ? (double)e->w_n : 1.0;
  p->forward_s = e->w_fwd / n;
  for (size_t c = 0; c < e->ncomm; c++) {
    const eng_tensor *t = &e->tensors[e->comm_ids[c]];
    p->tensors[c].name = t->name;
    p->tensors[c].numel = t->count;
    p->tensors[c].dtype = t->dtype;
    p->tensors[c].backward_s = e->w_bwd[c] / n;
  }
  return GS_OK;
}

static double predict(gs_engine *e, const gs_profile *p, const gs_plan_cost *c,
                      const gs_plan *pl, int dear) {
  double t = -1;
  gs_plan_xchg x;
  gs_status st = eng_xchg_costs(e, &x);
  if (st == GS_OK)
    st = dear ? gs_plan_predict_dear(p, c, pl->tensors, pl->offsets, pl->ngroups, &t,
                                     NULL, NULL)
              : gs_plan_predict_xchg(p, c, &x, pl->tensors, pl->offsets, pl->ngroups,
                                     pl->group_xchg, &t);
  return st == GS_OK ? t : -1;
}

/* The compressed alternatives under the engine's cost: the cost module's
 * parameters fitted to the dense all-reduce as measured (or modelled), so
 * that dense and compressed messages are priced on the same network, and
 * the compressor's payload ratio and measured coding time. Which exchanges
 * a payload can take is the exchange layer's word. */
gs_status eng_xchg_costs(gs_engine *e, gs_plan_xchg *x) {
  memset(x, 0, sizeof *x);
  if (e->zc == NULL) return GS_OK;
  if (e->zcoding.npoints == 0)
    return gs_error(GS_ERR_STATE, "rank %d: the compressor's coding time is not "
                    "known before the first plan", e->rank);
  gs_cost_topo topo = {e->size, gs_comm_nodes(e->comm)};
  return gs_plan_xchg_from_compressor(e->zc, &e->zcoding, gs_comm_cost(e->comm), topo,
                                      &e->cost.ar, e->zrequired, x);
}

/* At the first plan, on every rank at once: the compressor's coding time
 * at the sizes this model's messages can have (gs_compress_measure_coding).
 * The largest compressed message is every f32 tensor fused (single), in
 * launch order (the output side first), each its own segment unless
 * selection is merged. Measured here rather than at gs_engine_create
 * because only now are the sizes known (the registration check has just
 * made them the same on every rank). Every rank measures at the same time,
 * as every rank compresses at the same time in an exchange: ranks that
 * share a host share its memory bandwidth, and on this 2-core host two
 * ranks coding 2^22 elements at once took 2-4x the time one alone did
 * (in the caches, at 2^18, hardly more). The slowest rank's times are
 * kept (it holds the exchange up), at the sizes every rank reached (the
 * work bound may stop a slowed rank early), so every rank prices alike.
 * It costs each rank a bounded fraction of a second once
 * (GS_COMPRESS_MEASURE_BUDGET_S per size). */
static gs_status eng_measure_coding(gs_engine *e) {
  size_t *sizes = gs_malloc((e->ncomm ? e->ncomm : 1) * sizeof *sizes);
  gs_status st = sizes ? GS_OK : GS_ERR_NOMEM;
  size_t n = 0;
  for (size_t c = e->ncomm; sizes && c-- > 0;) {
    const eng_tensor *t = &e->tensors[e->comm_ids[c]];
    if (t->dtype == GS_F32) sizes[n++] = t->count;
  }
  /* No f32 tensor: nothing goes compressed; the smallest size prices it. */
  if (sizes && n == 0) sizes[n++] = GS_COMPRESS_MEASURE_MIN;
  gs_cost_coding m;
  if (st == GS_OK) st = gs_compress_measure_coding(e->zc, sizes, n, e->zmerged, &m);
  gs_free(sizes);
  if (st != GS_OK) {
    char why[900];
    gs__error_copy(why, sizeof why);
    st = gs_error(st, "rank %d: measuring compressor %s's coding time: %s", e->rank,
                  e->zspec, why);
  }
  GS_CHECK(eng_agree(e, st, "measure the compressor's coding time"));
  /* One MAX: -npoints gives the fewest sizes, the times the slowest. */
  double v[1 + GS_COST_CODING_POINTS] = {-(double)m.npoints};
  memcpy(v + 1, m.secs, sizeof m.secs);
  GS_CHECK(gs_allreduce(e->comm, GS_IN_PLACE, v, 1 + GS_COST_CODING_POINTS, GS_F64, GS_MAX,
                        GS_ALGO_AUTO));
  m.npoints = (int)-v[0];
  memcpy(m.secs, v + 1, sizeof m.secs);
  e->zcoding = m;
  const int last = m.npoints - 1;
  if (e->rank == 0)
    gs_log(GS_LOG_INFO, "gradsync engine: compressor %s codes %.3g ns/element at %.0f "
           "elements, %.3g at %.0f (the slowest rank's)", e->zspec,
           m.secs[0] / m.elems[0] * 1e9, m.elems[0], m.secs[last] / m.elems[last] * 1e9,
           m.elems[last]);
  return GS_OK;
}

/* The policy's plan. Without forward_overlap, auto chooses among the
 * all-reduce policies only: dear's all-gathers would not overlap anything. */
static gs_status make_plan(gs_engine *e, const gs_profile *p, const char *spec,
                           gs_plan **out) {
  gs_plan_policy pol;
  GS_CHECK(gs_plan_policy_parse(spec, &pol));
  gs_plan_xchg x;
  GS_CHECK(eng_xchg_costs(e, &x));
  return gs_plan_make_xchg(p, &e->cost, &x, &pol, e->forward_overlap, out);
}

void eng_plan_free(eng_plan *p) {
  if (p == NULL) return;
  for (size_t k = 0; k < p->nmsgs; k++) {
    gs_free(p->msgs[k].ids);
    gs_free(p->msgs[k].off);
    gs_free(p->msgs[k].fusion);
    gs_free(p->msgs[k].label);
    gs_compress_state_destroy(p->msgs[k].zst);
  }
  gs_free(p->msgs);
  gs_free(p->gmsg);
  gs_free(p->group_of);
  gs_free(p->gsize);
  gs_plan_free(p->plan);
  gs_profile_free(p->profile);
  gs_free(p);
}

gs_status eng_copy_plan(const eng_plan *src, gs_plan **out) {
  const gs_plan *p = src->plan;
  gs_plan *c = gs_calloc(1, sizeof *c);
  if (c == NULL) return GS_ERR_NOMEM;
  *c = *p;
  c->tensors = gs_malloc((p->ntensors + 1) * sizeof(size_t));
  c->offsets = gs_malloc((p->ngroups + 1) * sizeof(size_t));
  c->group_xchg = p->group_xchg ? gs_malloc(p->ngroups * sizeof(int)) : NULL;
  if (c->tensors == NULL || c->offsets == NULL ||
      (p->group_xchg && c->group_xchg == NULL)) {
    gs_plan_free(c);
    return GS_ERR_NOMEM;
  }
  memcpy(c->tensors, p->tensors, p->ntensors * sizeof(size_t));
  memcpy(c->offsets, p->offsets, (p->ngroups + 1) * sizeof(size_t));
  if (p->group_xchg) memcpy(c->group_xchg, p->group_xchg, p->ngroups * sizeof(int));
  *out = c;
  return GS_OK;
}

static char *dup_str(const char *s) {
  size_t n = strlen(s ? s : "") + 1;
  char *d = gs_malloc(n);
  if (d) memcpy(d, s ? s : "", n);
  return d;
}

gs_status eng_copy_profile(const gs_profile *p, gs_profile **out) {
  gs_profile *c = gs_calloc(1, sizeof *c);
  if (c == NULL) return GS_ERR_NOMEM;
  *c = *p;
  c->name = dup_str(p->name);
  c->device = dup_str(p->device);
  c->source = dup_str(p->source);
  c->tensors = gs_calloc(p->ntensors, sizeof *c->tensors);
  int ok = c->name && c->device && c->source && c->tensors;
  for (size_t i = 0; ok && i < p->ntensors; i++) {
    c->tensors[i] = p->tensors[i];
    c->tensors[i].name = dup_str(p->tensors[i].name);
    if (c->tensors[i].name == NULL) ok = 0;
  }
  if (!ok) {
    if (c->tensors == NULL) c->ntensors = 0;
    else
      for (size_t i = 0; i < p->ntensors; i++)
        if (c->tensors[i].name == p->tensors[i].name) c->tensors[i].name = NULL;
    gs_profile_free(c);
    return GS_ERR_NOMEM;
  }
  *out = c;
  return GS_OK;
}

/* Names joined by commas for the timeline, JSON-safe, at most ~1000 bytes. */
static char *msg_label(const gs_engine *e, const int *ids, size_t n) {
  size_t cap = 1024, len = 0;
  char *s = gs_malloc(cap);
  if (s == NULL) return NULL;
  s[0] = '\0';
  for (size_t k = 0; k < n; k++) {
    const char *nm = e->tensors[ids[k]].name;
    size_t l = strlen(nm);
    if (len + l + 8 >= cap) {
      snprintf(s + len, cap - len, "%s...", k ? "," : "");
      break;
    }
    if (k) s[len++] = ',';
    for (size_t i = 0; i < l; i++) {
      char ch = nm[i];
      s[len++] = (ch == '"' || ch == '\\' || (unsigned char)ch < 0x20) ? '_' : ch;
    }
    s[len] = '\0';
  }
  return s;
}

/* Turns a plan into the engine's messages: one per dtype present in a group
 * (fusing f16 with f32 would change what is sent), each with its fusion
 * buffer; a one-tensor message of an all-reduce plan reduces in place. */
static gs_status build_plan(gs_engine *e, gs_plan *plan, gs_profile *prof,
                            eng_plan **out) {
  eng_plan *ep = gs_calloc(1, sizeof *ep);
  if (ep == NULL) return GS_ERR_NOMEM;
  ep->plan = plan;
  ep->profile = prof;
  ep->dear = plan->chosen == GS_PLAN_DEAR;
  size_t G = plan->ngroups, L = e->ncomm;
  /* Test hook: GRADSYNC_TEST_ENGINE_PLAN_FAIL=R fails rank R's fusion
   * buffers, to test the agreement on the plan. */
  const char *inject = getenv("GRADSYNC_TEST_ENGINE_PLAN_FAIL");
  int fail_here = inject && *inject && atoi(inject) == e->rank;
  ep->ngroups = G;
  ep->gmsg = gs_calloc(G + 1, sizeof(size_t));
  ep->group_of = gs_calloc(L + 1, sizeof(size_t));
  ep->gsize = gs_calloc(G + 1, sizeof(size_t));
  ep->msgs = gs_calloc(L + 1, sizeof(eng_msg)); /* at most one per tensor */
  int *ids = gs_malloc((L + 1) * sizeof(int));
  gs_status st = GS_OK;
  if (!ep->gmsg || !ep->group_of || !ep->gsize || !ep->msgs || !ids) {
    st = GS_ERR_NOMEM;
    goto done;
  }
  for (size_t g = 0; g < G; g++) {
    ep->gmsg[g] = ep->nmsgs;
    ep->gsize[g] = plan->offsets[g + 1] - plan->offsets[g];
    for (size_t k = plan->offsets[g]; k < plan->offsets[g + 1]; k++)
      ep->group_of[plan->tensors[k]] = g;
    for (int d = 0; d < GS_DTYPE_COUNT; d++) {
      size_t n = 0;
      for (size_t k = plan->offsets[g]; k < plan->offsets[g + 1]; k++) {
        long id = e->comm_ids[plan->tensors[k]];
        if ((int)e->tensors[id].dtype == d) ids[n++] = (int)id;
      }
      if (n == 0) continue;
      eng_msg *m = &ep->msgs[ep->nmsgs++];
      m->group = g;
      m->dtype = (gs_dtype)d;
      m->n = n;
      m->ids = gs_malloc(n * sizeof(int));
      m->off = gs_malloc(n * sizeof(size_t));
      m->label = msg_label(e, ids, n);
      if (!m->ids || !m->off || !m->label) {
        st = GS_ERR_NOMEM;
        goto done;
      }
      memcpy(m->ids, ids, n * sizeof(int));
      for (size_t k = 0; k < n; k++) {
        m->off[k] = m->count;
        m->count += e->tensors[ids[k]].count;
      }
      size_t es = gs_dtype_size(m->dtype), p = (size_t)e->size;
      m->padded = ep->dear ? (m->count + p - 1) / p * p : m->count;
      m->bytes = m->count * es;
      m->xchg = -1;
      if (plan->group_xchg && plan->group_xchg[g] >= 0 && e->zc && !ep->dear &&
          m->dtype == GS_F32) {
        m->xchg = plan->group_xchg[g];
        st = gs_compress_state_create(e->zc, m->count, &e->zopts, &m->zst);
        if (st != GS_OK) goto done;
        if (n > 1 && !e->zmerged) {
          /* Select within each tensor: the grouping changes start-up
           * costs, not what is sent. */
          size_t *sizes = gs_malloc(n * sizeof *sizes);
          if (sizes == NULL) {
            st = GS_ERR_NOMEM;
            goto done;
          }
          size_t ns = 0;
          for (size_t k = 0; k < n; k++)
            if (e->tensors[ids[k]].count > 0) sizes[ns++] = e->tensors[ids[k]].count;
          st = gs_compress_set_segments(m->zst, sizes, ns);
          gs_free(sizes);
          if (st != GS_OK) goto done;
        }
      }
      if (n > 1 || ep->dear) {
        m->fusion = fail_here ? NULL : gs_malloc(m->padded * es);
        if (m->fusion == NULL) {
          st = gs_error(GS_ERR_NOMEM, "gs_engine on rank %d: cannot allocate a "
                        "fusion buffer of %zu bytes", e->rank, m->padded * es);
          goto done;
        }
      }
    }
  }
  ep->gmsg[G] = ep->nmsgs;
done:
  gs_free(ids);
  if (st != GS_OK) {
    ep->plan = NULL; /* the caller still owns plan and prof */
    ep->profile = NULL;
    eng_plan_free(ep);
    return st;
  }
  *out = ep;
  return GS_OK;
}

/* Compressed messages keep their memory across a replan. A message whose
 * tensors are exactly those of a compressed message of the old plan takes
 * that message's state whole (error-feedback residual, DGC's momentum,
 * PowerSGD's Q, the warm-up step). A regrouped message takes, tensor by
 * tensor, the residual and momentum its tensors had in the old plan's
 * compressed messages (gs_compress_state_carry), and their furthest warm-up
 * step: without it every regrouping replan would restart the density
 * warm-up at 25% and drop the unsent gradient. Tensors that were sent dense
 * start with no memory, unless the trainer set some for them
 * (eng_install_memory, after this). The launch thread runs every exchange and installs
 * plans, so no exchange is using either state. */
static void carry_states(gs_engine *e, eng_plan *old, eng_plan *ep) {
  if (old == NULL) return;
  /* Built at the first regrouped message: each tensor's old compressed
   * message and its index there. A whole state taken above leaves a fresh
   * one in its old message, but that message's tensors are all in the new
   * message that took it, never in a regrouped one. */
  eng_msg **from = NULL;
  size_t *at = NULL;
  for (size_t k = 0; k < ep->nmsgs; k++) {
    eng_msg *m = &ep->msgs[k];
    if (m->zst == NULL) continue;
    size_t j = 0;
    for (; j < old->nmsgs; j++) {
      eng_msg *o = &old->msgs[j];
      if (o->zst && o->n == m->n && o->count == m->count &&
          memcmp(o->ids, m->ids, m->n * sizeof(int)) == 0) {
        gs_compress_state *t = m->zst;
        m->zst = o->zst;
        o->zst = t;
        break;
      }
    }
    if (j < old->nmsgs) continue;
    if (from == NULL) {
      const size_t T = e->ntensors ? e->ntensors : 1;
      from = gs_calloc(T, sizeof *from);
      at = gs_calloc(T, sizeof *at);
      if (from == NULL || at == NULL) {
        gs_log(GS_LOG_WARN, "gradsync engine, rank %d: no memory to carry the "
               "compressors' memory across a replan: regrouped messages start "
               "afresh", e->rank);
        break;
      }
      for (size_t q = 0; q < old->nmsgs; q++) {
        eng_msg *o = &old->msgs[q];
        for (size_t i = 0; o->zst && i < o->n; i++) {
          from[o->ids[i]] = o;
          at[o->ids[i]] = i;
        }
      }
    }
    for (size_t i = 0; i < m->n; i++) {
      const eng_msg *o = from[m->ids[i]];
      if (o == NULL) continue;
      gs_status st = gs_compress_state_carry(m->zst, m->off[i], o->zst,
                                             o->off[at[m->ids[i]]],
                                             e->tensors[m->ids[i]].count);
      if (st != GS_OK) /* the same compressor and sizes: a bug */
        gs_log(GS_LOG_WARN, "gradsync engine, rank %d: %s", e->rank, gs_last_error());
    }
  }
  gs_free(from);
  gs_free(at);
}

/* Memory set by the trainer (gs_engine_memory_set) before the tensor had a
 * compressed message: it joins the message's state now, as a regrouped
 * tensor's memory does above. A tensor sent dense keeps it pending. */
void eng_install_memory(gs_engine *e, eng_plan *p) {
  for (size_t k = 0; p != NULL && k < p->nmsgs; k++) {
    eng_msg *m = &p->msgs[k];
    for (size_t i = 0; m->zst != NULL && i < m->n; i++) {
      eng_tensor *t = &e->tensors[m->ids[i]];
      if (t->zpending == NULL) continue;
      gs_status st = gs_compress_state_carry(m->zst, m->off[i], t->zpending, 0, t->count);
      if (st != GS_OK) /* the same compressor and sizes: a bug */
        gs_log(GS_LOG_WARN, "gradsync engine, rank %d: tensor '%s': %s", e->rank, t->name,
               gs_last_error());
      gs_compress_state_destroy(t->zpending);
      t->zpending = NULL;
    }
  }
}

/* The decision's header: scalars, then the three cost curves, each as
 * a, b, npoints and GS_COST_CURVE_POINTS sizes and times. */
enum {
  H_STATUS, H_CHANGED, H_CHOSEN, H_NGROUPS, H_WARMUP, H_PREDICTED, H_MEASURED,
  H_RSAG_MEASURED, H_FORWARD, H_DEAR_FWD_END, H_DEAR_AG_WAIT, H_XCHG, H_CURVES
};
#define H_CURVE_LEN (3 + 2 * GS_COST_CURVE_POINTS)
#define H_COUNT (H_CURVES + 3 * H_CURVE_LEN)

static void curve_pack(const gs_cost_curve *c, double *h) {
  h[0] = c->a;
  h[1] = c->b;
  h[2] = c->npoints;
  memcpy(h + 3, c->bytes, sizeof c->bytes);
  memcpy(h + 3 + GS_COST_CURVE_POINTS, c->secs, sizeof c->secs);
}

static void curve_unpack(const double *h, gs_cost_curve *c) {
  c->a = h[0];
  c->b = h[1];
  c->npoints = (int)h[2];
  memcpy(c->bytes, h + 3, sizeof c->bytes);
  memcpy(c->secs, h + 3 + GS_COST_CURVE_POINTS, sizeof c->secs);
}

/* Rank 0: decides whether this iteration gets a new plan, and makes it. */
static gs_status decide(gs_engine *e, uint64_t n, int forced, gs_plan **plan_out,
                        gs_profile **prof_out, int *warm) {
  *plan_out = NULL;
  *prof_out = NULL;
  *warm = 0;
  gs_profile prof;
  GS_CHECK(window_profile(e, &prof));
  refit_cost(e);
  gs_status st = GS_OK;
  const char *spec = e->policy_spec;
  if (forced && n == 0 && e->needs_profile && e->warmup_iters > 0) {
    spec = "wfbp";
    *warm = 1;
  }
  int make = forced;
  if (!forced && e->plan) {
    double old = e->plan->plan->predicted_iter_s;
    double now = predict(e, &prof, &e->cost, e->plan->plan, e->plan->dear);
    double rel = old > 0 ? fabs(now - old) / old : (now > 0 ? INFINITY : 0);
    make = now < 0 || rel > e->replan_drift;
    gs_log(GS_LOG_INFO, "gradsync engine: iteration %llu: the plan's predicted time "
           "moved %.1f%% (%.3f -> %.3f ms)%s", (unsigned long long)n, rel * 100,
           old * 1e3, now * 1e3, make ? ": replanning" : "");
  }
  if (make) {
    st = make_plan(e, &prof, spec, plan_out);
    if (st == GS_OK) st = eng_copy_profile(&prof, prof_out);
    if (st != GS_OK) {
      gs_plan_free(*plan_out);
      *plan_out = NULL;
    }
  }
  gs_free(prof.tensors);
  return st;
}

gs_status eng_plan_step(gs_engine *e, uint64_t n) {
  uint64_t W = (uint64_t)e->warmup_iters, I = (uint64_t)e->replan_interval;
  /* At the end of the warm-up every policy is planned again: the ones that
   * need a profile get their plan, the others (wfbp, single, bucket) the
   * same groups with the measured costs and predicted time. */
  int forced = n == 0 || (W > 0 && n == W);
  int check = e->needs_profile && n > W && (n - W) % I == 0;
  if (!forced && !check) return GS_OK;
  if (e->zc != NULL && e->zcoding.npoints == 0) GS_CHECK(eng_measure_coding(e));

  double hdr[H_COUNT] = {0};
  gs_plan *plan = NULL;
  gs_profile *prof = NULL;
  gs_status st = GS_OK;
  if (e->rank == 0) {
    int warm = 0;
    st = decide(e, n, forced, &plan, &prof, &warm);
    hdr[H_STATUS] = (double)st;
    if (plan) {
      hdr[H_CHANGED] = 1;
      hdr[H_CHOSEN] = (double)plan->chosen;
      hdr[H_NGROUPS] = (double)plan->ngroups;
      hdr[H_WARMUP] = warm;
      hdr[H_PREDICTED] = plan->predicted_iter_s;
      hdr[H_DEAR_FWD_END] = plan->dear_forward_end_s;
      hdr[H_DEAR_AG_WAIT] = plan->dear_ag_wait_s;
      hdr[H_FORWARD] = prof->forward_s;
      hdr[H_XCHG] = plan->group_xchg != NULL;
    }
    curve_pack(&e->cost.ar, &hdr[H_CURVES]);
    curve_pack(&e->cost.rs, &hdr[H_CURVES + H_CURVE_LEN]);
    curve_pack(&e->cost.ag, &hdr[H_CURVES + 2 * H_CURVE_LEN]);
    hdr[H_MEASURED] = e->cost_measured;
    hdr[H_RSAG_MEASURED] = e->rsag_measured;
  }
  /* A new profiler window starts with every decision. */
  e->w_n = 0;
  e->w_fwd = 0;
  memset(e->w_bwd, 0, e->ncomm * sizeof(double));
  char saved[1024];
  gs__error_copy(saved, sizeof saved);
  gs_status bst = gs_bcast(e->comm, hdr, H_COUNT, GS_F64, 0, GS_ALGO_AUTO);
  if (bst != GS_OK) {
    gs_plan_free(plan);
    gs_profile_free(prof);
    return bst;
  }
  if (hdr[H_STATUS] != 0) {
    gs_plan_free(plan);
    gs_profile_free(prof);
    if (e->rank == 0) {
      gs__error_set_message(saved);
      return st;
    }
    return gs_error((gs_status)(int)hdr[H_STATUS], "rank %d: rank 0 could not make "
                    "a plan at iteration %llu (see rank 0's error)", e->rank,
                    (unsigned long long)n);
  }
  curve_unpack(&hdr[H_CURVES], &e->cost.ar);
  curve_unpack(&hdr[H_CURVES + H_CURVE_LEN], &e->cost.rs);
  curve_unpack(&hdr[H_CURVES + 2 * H_CURVE_LEN], &e->cost.ag);
  e->cost_measured = hdr[H_MEASURED] != 0;
  if (hdr[H_CHANGED] == 0) return GS_OK;

  /* The plan's group starts (launch order), the profile's backward times
   * and, with compression, each group's exchange, exact in doubles, in a
   * buffer allocated with the engine (so that no rank can miss this
   * broadcast for want of memory). */
  size_t G = (size_t)hdr[H_NGROUPS], L = e->ncomm;
  if (G < 1 || G > L) {
    gs_plan_free(plan);
    gs_profile_free(prof);
    return gs_error(GS_ERR_INTERNAL, "rank %d: rank 0's plan of iteration %llu has %zu "
                    "groups for %zu tensors", e->rank, (unsigned long long)n, G, L);
  }
  double *body = e->plan_body;
  const int has_xchg = hdr[H_XCHG] != 0;
  const size_t nbody = G + L + (has_xchg ? G : 0);
  memset(body, 0, nbody * sizeof *body);
  if (e->rank == 0) {
    for (size_t g = 0; g < G; g++) body[g] = (double)plan->tensors[plan->offsets[g]];
    for (size_t c = 0; c < L; c++) body[G + c] = prof->tensors[c].backward_s;
    if (has_xchg)
      for (size_t g = 0; g < G; g++) body[G + L + g] = plan->group_xchg[g];
  }
  st = gs_bcast(e->comm, body, nbody, GS_F64, 0, GS_ALGO_AUTO);
  if (st != GS_OK) {
    gs_plan_free(plan);
    gs_profile_free(prof);
    return st;
  }
  if (e->rank != 0) {
    plan = gs_calloc(1, sizeof *plan);
    if (plan) {
      plan->tensors = gs_malloc((L + 1) * sizeof(size_t));
      plan->offsets = gs_malloc((G + 1) * sizeof(size_t));
    }
    gs_profile tmp;
    if (plan && has_xchg) plan->group_xchg = gs_malloc(G * sizeof(int));
    if (plan == NULL || plan->tensors == NULL || plan->offsets == NULL ||
        (has_xchg && plan->group_xchg == NULL) || window_profile(e, &tmp) != GS_OK) {
      st = gs_error(GS_ERR_NOMEM, "rank %d: no memory for the plan of iteration %llu",
                    e->rank, (unsigned long long)n);
    } else {
      /* Groups are contiguous runs in launch order: group g covers
       * starts[g] .. (g ? starts[g-1] : L) - 1. */
      size_t k = 0, hi = L;
      for (size_t g = 0; g < G; g++) {
        size_t s = (size_t)body[g];
        plan->offsets[g] = k;
        for (size_t i = s; i < hi && k < L; i++) plan->tensors[k++] = i;
        hi = s;
      }
      plan->offsets[G] = k;
      plan->ntensors = L;
      plan->ngroups = G;
      plan->policy = e->policy;
      plan->chosen = (gs_plan_policy_kind)(int)hdr[H_CHOSEN];
      plan->predicted_iter_s = hdr[H_PREDICTED];
      plan->dear_forward_end_s = hdr[H_DEAR_FWD_END];
      plan->dear_ag_wait_s = hdr[H_DEAR_AG_WAIT];
      if (has_xchg)
        for (size_t g = 0; g < G; g++) plan->group_xchg[g] = (int)body[G + L + g];
      tmp.forward_s = hdr[H_FORWARD];
      for (size_t c = 0; c < L; c++) tmp.tensors[c].backward_s = body[G + c];
      st = eng_copy_profile(&tmp, &prof);
      gs_free(tmp.tensors);
      if (st == GS_OK) st = gs_plan_check(plan, L);
    }
  }
  eng_plan *ep = NULL;
  if (st == GS_OK) st = build_plan(e, plan, prof, &ep);
  /* Agreement point: a rank that cannot install the plan (its fusion
   * buffers, say) would never issue its collectives; every rank learns it
   * here and all fail together instead. */
  st = eng_agree(e, st, "install the plan of this iteration");
  if (st != GS_OK) {
    if (ep) {
      eng_plan_free(ep);
    } else {
      gs_plan_free(plan);
      gs_profile_free(prof);
    }
    return st;
  }
  ep->cost = e->cost;
  ep->cost_measured = e->cost_measured;
  ep->warmup = hdr[H_WARMUP] != 0;
  size_t zgroups = 0;
  for (size_t g = 0; g < G; g++) {
    int any = 0;
    for (size_t k = ep->gmsg[g]; k < ep->gmsg[g + 1]; k++) any |= ep->msgs[k].xchg >= 0;
    zgroups += any;
  }

  pthread_mutex_lock(&e->mu);
  eng_wait_drained_locked(e);
  eng_plan *old = e->plan;
  carry_states(e, old, ep);
  eng_install_memory(e, ep);
  e->plan = ep;
  e->stats.plans++;
  e->stats.chosen = plan->chosen;
  e->stats.warming_up = ep->warmup;
  e->stats.ngroups = G;
  e->stats.compressed_groups = zgroups;
  e->stats.predicted_iter_s = ep->warmup ? 0 : plan->predicted_iter_s;
  e->stats.cost = e->cost;
  e->stats.cost_measured = e->cost_measured;
  e->stats.rsag_measured = hdr[H_RSAG_MEASURED] != 0;
  pthread_mutex_unlock(&e->mu);
  eng_plan_free(old);
  gs_log(GS_LOG_INFO, "gradsync engine, rank %d: iteration %llu: plan %s, %zu groups, "
         "predicted %.3f ms (a=%.3g s, b=%.3g s/B, %s, %d points)", e->rank,
         (unsigned long long)n, gs_plan_policy_name(plan->chosen), G,
         plan->predicted_iter_s * 1e3, e->cost.ar.a, e->cost.ar.b,
         e->cost_measured ? "measured" : "model", e->cost.ar.npoints);
  return GS_OK;
}
