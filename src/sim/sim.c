/*
 * The discrete-event simulator (gradsync/sim.h, docs/SIMULATE.md).
 *
 * Every worker runs the same list of operations each iteration (its
 * forward pass, then the backward of each tensor from the last to the
 * first; for DeAR the forward pass is split by group and each group waits
 * for its all-gather). An operation may, when it starts or ends, "arrive"
 * at a message: a message is ready when all N workers have arrived, and the
 * network stream sends the messages of an iteration one at a time in their
 * order (launch order), each starting at the later of its ready time and
 * the previous message's end. The iteration ends with its last message; the
 * next one starts on every worker then (synchronous SGD).
 *
 * Entities in the event heap: workers 0..N-1 (their running operation's
 * end) and the stream N (its message's end). A worker waiting for a message
 * (DeAR's forward) leaves the heap and is woken by the message's end.
 */
#include <math.h>
#include <string.h>

#include "gradsync/sim.h"
#include "gs_internal.h"

/* ---- The event heap: entities keyed by (time, id) ------------------------ */

typedef struct sim_heap {
  int *ent;     /* heap order */
  int *pos;     /* pos[e]: index of e in ent, -1 when absent */
  double *key;  /* key[e] */
  int n;
} sim_heap;

static int heap_less(const sim_heap *h, int a, int b) {
  double ka = h->key[a], kb = h->key[b];
  return ka < kb || (ka == kb && a < b);
}

static void heap_set(sim_heap *h, int i, int e) {
  h->ent[i] = e;
  h->pos[e] = i;
}

static void heap_up(sim_heap *h, int i) {
  int e = h->ent[i];
  while (i > 0) {
    int p = (i - 1) / 2;
    if (!heap_less(h, e, h->ent[p])) break;
    heap_set(h, i, h->ent[p]);
    i = p;
  }
  heap_set(h, i, e);
}

static void heap_down(sim_heap *h, int i) {
  int e = h->ent[i];
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && heap_less(h, h->ent[c + 1], h->ent[c])) c++;
    if (!heap_less(h, h->ent[c], e)) break;
    heap_set(h, i, h->ent[c]);
    i = c;
  }
  heap_set(h, i, e);
}

static void heap_push(sim_heap *h, int e, double t) {
  h->key[e] = t;
  heap_set(h, h->n++, e);
  heap_up(h, h->n - 1);
}

static int heap_pop(sim_heap *h) {
  int top = h->ent[0];
  h->pos[top] = -1;
  if (--h->n > 0) {
    heap_set(h, 0, h->ent[h->n]);
    heap_down(h, 0);
  }
  return top;
}

/* ---- Jitter: a counter-based generator ----------------------------------
 * The factor of (iteration, worker, operation) is a hash of those and the
 * seed (SplitMix64's finaliser, Steele, Lea & Flood, OOPSLA 2014), so it
 * does not depend on the order events are processed in, and the trace can
 * replay any worker's operations. */

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* A uniform in (0, 1) from 53 random bits. */
static double unit_open(uint64_t bits) {
  return ((double)(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

typedef struct sim_jitter {
  double cv, mu, sigma;
  gs_sim_jitter dist;
  gs_sim_jitter_scope scope;
  uint64_t seed;
} sim_jitter;

static double jitter_factor(const sim_jitter *j, int iter, int worker, size_t op) {
  if (j->cv == 0) return 1.0;
  if (j->scope == GS_SIM_SCOPE_ITERATION) op = 0;
  uint64_t k = mix64(j->seed ^ mix64(((uint64_t)(uint32_t)iter << 32) ^ (uint64_t)(uint32_t)worker));
  k = mix64(k ^ (uint64_t)op * UINT64_C(0x9e3779b97f4a7c15));
  double u1 = unit_open(k), u2 = unit_open(mix64(k + 1));
  /* Box-Muller. */
  double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  if (j->dist == GS_SIM_JITTER_NORMAL) return GS_MAX(0.0, 1.0 + j->cv * z);
  return exp(j->mu + j->sigma * z);
}

/* ---- Operations and messages ------------------------------------------- */

typedef struct sim_op {
  double dur;          /* seconds without jitter */
  gs_sim_span_kind kind;
  size_t index;        /* tensor (backward) or group (dear forward) */
  int wait_msg;        /* message that must have ended before it starts, -1 */
  int arrive_start;    /* message it arrives at when it starts, -1 */
  int arrive_end;      /* message it arrives at when it ends, -1 */
} sim_op;

typedef struct sim_msg {
  gs_sim_span_kind kind;
  size_t group;        /* launch-order group */
  int xchg;            /* compressed exchange or -1 */
  double bytes;
  double cost_s;       /* its time on the stream */
  int count;           /* workers arrived this iteration */
  int ended;
  double ready, start, end;
  int blocked;         /* first worker waiting for it, -1 */
} sim_msg;

typedef struct sim_worker {
  size_t op;           /* running (or next) operation */
  double op_start;
  double compute;      /* compute time this iteration */
  int next_blocked;    /* list of workers waiting for the same message */
} sim_worker;

typedef struct sim {
  const gs_sim_config *cfg;
  sim_jitter jit;
  int N;               /* workers simulated: every one, or two standing for all */
  int all;             /* the job's workers */
  int stand_in[2];     /* with two for all: the workers they are, this iteration */
  sim_op *ops;
  size_t nops;
  size_t op_base;      /* 1 for dear (its leading step), else 0 */
  sim_msg *msgs;
  size_t nmsgs;
  sim_worker *w;
  sim_heap heap;
  /* The stream. */
  size_t stream_next;  /* next message to send */
  int stream_busy;
  int iter;
  double iter_start;
  double slowest;      /* the slowest worker's compute this iteration */
  int straggler;
  double slowest_end;  /* when that worker's compute ended */
  uint64_t events;
} sim;

/* The job's worker that entity w is. */
static int worker_id(const sim *s, int w) {
  return s->N < s->all ? s->stand_in[w] : w;
}

/* Operation op's time on the job's worker `worker`. */
static double op_duration(const sim *s, int worker, size_t op) {
  double d = s->ops[op].dur;
  /* Keyed by the operation's place after DeAR's leading zero-time step, so
   * every policy draws the same factors for the same tensor's compute. */
  return d > 0 ? d * jitter_factor(&s->jit, s->iter, worker, op - s->op_base) : d;
}

/* With one factor per worker and iteration, every time of a worker is a
 * non-decreasing function of its factor (each operation's time is its
 * factor times a constant, each wait ends at a message's end, the same for
 * all; rounding is monotone), so the worker of the largest factor is the
 * last to arrive at every message and the slowest: it and worker 0 (the
 * trace's) give the iteration every worker would. The largest is found
 * from the N draws, as the first of equals (worker 0 without jitter). */
static void choose_stand_ins(sim *s) {
  int top = 0;
  double best = jitter_factor(&s->jit, s->iter, 0, 0);
  for (int w = 1; w < s->all && s->jit.cv > 0; w++) {
    double f = jitter_factor(&s->jit, s->iter, w, 0);
    if (f > best) {
      best = f;
      top = w;
    }
  }
  s->stand_in[0] = 0;
  s->stand_in[1] = top;
}

static void stream_start(sim *s, size_t m, double t) {
  sim_msg *g = &s->msgs[m];
  g->start = t;
  g->end = t + g->cost_s;
  s->stream_busy = 1;
  heap_push(&s->heap, s->N, g->end);
}

static void arrive(sim *s, int m, double t) {
  sim_msg *g = &s->msgs[m];
  if (++g->count < s->N) return;
  g->ready = t;
  if ((size_t)m == s->stream_next && !s->stream_busy) stream_start(s, (size_t)m, t);
}

/* Starts worker w's operations from its current one at time t, until one is
 * running (in the heap), it waits for a message, or its list is done. */
static void advance(sim *s, int w, double t) {
  sim_worker *k = &s->w[w];
  if (k->op == s->nops) {
    if (k->compute > s->slowest || (k->compute == s->slowest && t > s->slowest_end)) {
      s->slowest = k->compute;
      s->straggler = worker_id(s, w);
      s->slowest_end = t;
    }
    return;
  }
  const sim_op *op = &s->ops[k->op];
  if (op->wait_msg >= 0 && !s->msgs[op->wait_msg].ended) {
    sim_msg *g = &s->msgs[op->wait_msg];
    k->next_blocked = g->blocked;
    g->blocked = w;
    return;
  }
  k->op_start = t;
  if (op->arrive_start >= 0) arrive(s, op->arrive_start, t);
  double d = op_duration(s, worker_id(s, w), k->op);
  k->compute += d;
  heap_push(&s->heap, w, t + d);
}

static void start_iteration(sim *s, double t) {
  if (s->N < s->all) choose_stand_ins(s);
  s->iter_start = t;
  s->stream_next = 0;
  s->stream_busy = 0;
  s->slowest = -1;
  s->straggler = 0;
  s->slowest_end = -INFINITY;
  for (size_t m = 0; m < s->nmsgs; m++) {
    s->msgs[m].count = 0;
    s->msgs[m].ended = 0;
    s->msgs[m].blocked = -1;
  }
  for (int w = 0; w < s->N; w++) {
    s->w[w].op = 0;
    s->w[w].compute = 0;
    advance(s, w, t);
  }
}

/* ---- Building the operation and message lists from a plan --------------- */

static gs_status msg_cost(const gs_plan_cost *cost, const gs_plan_xchg *x,
                          const gs_plan *plan, size_t g, sim_msg *m) {
  m->xchg = -1;
  if (m->kind == GS_SIM_SPAN_REDUCE_SCATTER) {
    m->cost_s = gs_cost_curve_eval(&cost->rs, m->bytes);
  } else if (m->kind == GS_SIM_SPAN_ALLGATHER) {
    m->cost_s = gs_cost_curve_eval(&cost->ag, m->bytes);
  } else if (plan->group_xchg && plan->group_xchg[g] >= 0) {
    int j = -1;
    for (int a = 0; x && a < x->n; a++)
      if ((int)x->kind[a] == plan->group_xchg[g]) j = a;
    if (j < 0)
      return gs_error(GS_ERR_INVALID_ARG, "sim: group %zu is sent through %s, which "
                      "has no cost here", g, gs_xchg_name((gs_xchg)plan->group_xchg[g]));
    m->kind = GS_SIM_SPAN_COMPRESSED;
    m->xchg = plan->group_xchg[g];
    m->cost_s = gs_cost_curve_eval(&x->cost[j], m->bytes);
  } else {
    m->cost_s = gs_cost_curve_eval(&cost->ar, m->bytes);
  }
  if (!isfinite(m->cost_s) || m->cost_s < 0)
    return gs_error(GS_ERR_INVALID_ARG, "sim: group %zu (%.0f B) costs %g s", g,
                    m->bytes, m->cost_s);
  return GS_OK;
}

static gs_status build(sim *s, const gs_profile *p, const gs_plan_cost *cost,
                       const gs_plan_xchg *x, const gs_plan *plan) {
  size_t L = p->ntensors, G = plan->ngroups;
  int dear = plan->chosen == GS_PLAN_DEAR;
  s->nmsgs = dear ? 2 * G : G;
  s->nops = (size_t)dear + 2 * L;
  s->op_base = (size_t)dear;
  s->msgs = gs_calloc(s->nmsgs, sizeof *s->msgs);
  s->ops = gs_calloc(s->nops, sizeof *s->ops);
  int *lowest_group = gs_malloc(L * sizeof(int));
  size_t *group_lo = gs_malloc(G * sizeof(size_t));
  if (!s->msgs || !s->ops || !lowest_group || !group_lo) {
    gs_free(lowest_group);
    gs_free(group_lo);
    return GS_ERR_NOMEM;
  }
  /* Each group's lowest tensor is its last to be ready. */
  for (size_t i = 0; i < L; i++) lowest_group[i] = -1;
  size_t rs0 = dear ? G : 0; /* index of the first backward message */
  gs_status st = GS_OK;
  for (size_t g = 0; g < G && st == GS_OK; g++) {
    size_t lo = L;
    double bytes = 0;
    for (size_t k = plan->offsets[g]; k < plan->offsets[g + 1]; k++) {
      lo = GS_MIN(lo, plan->tensors[k]);
      bytes += (double)gs_profile_tensor_bytes(p, plan->tensors[k]);
    }
    group_lo[g] = lo;
    lowest_group[lo] = (int)(rs0 + g);
    sim_msg *m = &s->msgs[rs0 + g];
    m->kind = dear ? GS_SIM_SPAN_REDUCE_SCATTER : GS_SIM_SPAN_ALLREDUCE;
    m->group = g;
    m->bytes = bytes;
    st = msg_cost(cost, x, plan, g, m);
    if (dear && st == GS_OK) {
      /* All-gathers in forward order: launch-order group G-1 first. */
      sim_msg *a = &s->msgs[G - 1 - g];
      a->kind = GS_SIM_SPAN_ALLGATHER;
      a->group = g;
      a->bytes = bytes;
      st = msg_cost(cost, x, plan, g, a);
    }
  }
  if (st == GS_OK) {
    /* The forward pass tensor by tensor, in forward order, as
     * gs_plan_predict_dear models it: forward_s spread over the tensors in
     * proportion to their backward time (evenly if that is all zero). The
     * all-reduce model only needs the whole forward pass; splitting it the
     * same way for every policy keeps the jitter (drawn per operation)
     * alike for all. For dear, the all-gather of the first group is
     * launched when the iteration starts, and the forward of each group's
     * first tensor waits for that group's all-gather, then launches the
     * next group's (one group of look-ahead). */
    double total_bwd = 0;
    for (size_t i = L; i-- > 0;) total_bwd += p->tensors[i].backward_s;
    size_t o = 0;
    if (dear) s->ops[o++] = (sim_op){0, GS_SIM_SPAN_FORWARD, 0, -1, 0, -1};
    size_t h = G - 1; /* launch-order group of tensor i in forward order */
    for (size_t i = 0; i < L; i++) {
      double f = p->forward_s * (total_bwd > 0 ? p->tensors[i].backward_s / total_bwd
                                               : 1.0 / (double)L);
      sim_op op = {f, GS_SIM_SPAN_FORWARD, i, -1, -1, -1};
      if (dear) {
        while (h > 0 && i >= group_lo[h - 1]) h--;
        if (i == group_lo[h]) {
          int idx = (int)(G - 1 - h); /* this group's all-gather */
          op.wait_msg = idx;
          op.arrive_start = h > 0 ? idx + 1 : -1;
        }
      }
      s->ops[o++] = op;
    }
    for (size_t i = L; i-- > 0;)
      s->ops[o++] = (sim_op){p->tensors[i].backward_s, GS_SIM_SPAN_BACKWARD, i, -1, -1,
                             lowest_group[i]};
  }
  gs_free(lowest_group);
  gs_free(group_lo);
  return st;
}

/* ---- The trace ----------------------------------------------------------- */

/* Replays worker w's operations of the last iteration from the messages'
 * recorded ends (the jitter factors are a function of the iteration, worker
 * and operation), appending its spans. */
static void trace_worker(sim *s, int w, gs_sim_span *out, size_t *n) {
  double t = s->iter_start;
  for (size_t o = 0; o < s->nops; o++) {
    const sim_op *op = &s->ops[o];
    if (op->wait_msg >= 0 && s->msgs[op->wait_msg].end > t) {
      out[(*n)++] = (gs_sim_span){w, GS_SIM_SPAN_WAIT, s->msgs[op->wait_msg].group, -1, 0,
                                  t - s->iter_start, s->msgs[op->wait_msg].end - s->iter_start};
      t = s->msgs[op->wait_msg].end;
    }
    double d = op_duration(s, w, o);
    if (d > 0)
      out[(*n)++] = (gs_sim_span){w, op->kind, op->index, -1, 0, t - s->iter_start,
                                  t + d - s->iter_start};
    t += d;
  }
}

static gs_status make_trace(sim *s, gs_sim_result *r) {
  int two = s->straggler != 0;
  size_t cap = (size_t)(1 + two) * 2 * s->nops + s->nmsgs;
  r->spans = gs_malloc(cap * sizeof *r->spans);
  if (r->spans == NULL) return GS_ERR_NOMEM;
  size_t n = 0;
  trace_worker(s, 0, r->spans, &n);
  if (two) trace_worker(s, s->straggler, r->spans, &n);
  for (size_t m = 0; m < s->nmsgs; m++) {
    const sim_msg *g = &s->msgs[m];
    r->spans[n++] = (gs_sim_span){-1, g->kind, g->group, g->xchg, g->bytes,
                                  g->start - s->iter_start, g->end - s->iter_start};
  }
  r->nspans = n;
  return GS_OK;
}

/* ---- The run -------------------------------------------------------------- */

gs_status gs_sim_run(const gs_profile *profile, const gs_plan_cost *cost,
                     const gs_plan_xchg *x, const gs_plan *plan,
                     const gs_sim_config *cfg, gs_sim_result *out) {
  if (profile == NULL || cost == NULL || plan == NULL || cfg == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "sim: NULL argument");
  memset(out, 0, sizeof *out);
  GS_CHECK(gs_profile_validate(profile));
  if (cfg->workers < 1 || cfg->workers > (1 << 24))
    return gs_error(GS_ERR_INVALID_ARG, "sim: %d workers (1 to %d allowed)", cfg->workers,
                    1 << 24);
  if (cfg->iters < 1)
    return gs_error(GS_ERR_INVALID_ARG, "sim: %d iterations (at least 1)", cfg->iters);
  if (!isfinite(cfg->jitter_cv) || cfg->jitter_cv < 0 || cfg->jitter_cv > 10)
    return gs_error(GS_ERR_INVALID_ARG, "sim: jitter CV %g (0 to 10 allowed)",
                    cfg->jitter_cv);
  if (cfg->jitter != GS_SIM_JITTER_LOGNORMAL && cfg->jitter != GS_SIM_JITTER_NORMAL)
    return gs_error(GS_ERR_INVALID_ARG, "sim: unknown jitter distribution %d",
                    (int)cfg->jitter);
  if (cfg->scope != GS_SIM_SCOPE_ITERATION && cfg->scope != GS_SIM_SCOPE_OPERATION)
    return gs_error(GS_ERR_INVALID_ARG, "sim: unknown jitter scope %d", (int)cfg->scope);
  GS_CHECK(gs_plan_check(plan, profile->ntensors));

  sim s;
  memset(&s, 0, sizeof s);
  s.cfg = cfg;
  s.all = cfg->workers;
  s.N = cfg->scope == GS_SIM_SCOPE_ITERATION && !cfg->every_worker ? GS_MIN(s.all, 2) : s.all;
  s.jit.cv = cfg->jitter_cv;
  s.jit.dist = cfg->jitter;
  s.jit.scope = cfg->scope;
  s.jit.seed = mix64(cfg->seed);
  /* Lognormal of mean 1 and coefficient of variation cv:
   * sigma^2 = ln(1 + cv^2), mu = -sigma^2 / 2. */
  s.jit.sigma = sqrt(log1p(cfg->jitter_cv * cfg->jitter_cv));
  s.jit.mu = -0.5 * s.jit.sigma * s.jit.sigma;
  gs_status st = build(&s, profile, cost, x, plan);
  int E = s.N + 1;
  if (st == GS_OK) {
    s.w = gs_calloc((size_t)s.N, sizeof *s.w);
    s.heap.ent = gs_malloc((size_t)E * sizeof(int));
    s.heap.pos = gs_malloc((size_t)E * sizeof(int));
    s.heap.key = gs_malloc((size_t)E * sizeof(double));
    if (!s.w || !s.heap.ent || !s.heap.pos || !s.heap.key) st = GS_ERR_NOMEM;
  }
  if (st == GS_OK) {
    for (int e = 0; e < E; e++) s.heap.pos[e] = -1;
    /* T_1 summed in the order a worker sums its compute, so that without
     * jitter the straggler term is exactly 0. */
    double t1 = 0;
    for (size_t o = 0; o < s.nops; o++) t1 += s.ops[o].dur;
    out->workers = s.all;
    out->iters = cfg->iters;
    out->compute_s = t1;
    out->iter_min_s = INFINITY;
    out->iter_max_s = -INFINITY;
    out->messages = s.nmsgs;
    for (size_t m = 0; m < s.nmsgs; m++) {
      out->bytes += s.msgs[m].bytes;
      out->comm_s += s.msgs[m].cost_s;
    }
    double sum_iter = 0, sum_slow = 0;
    s.iter = 0;
    start_iteration(&s, 0.0);
    while (s.heap.n > 0) {
      int e = heap_pop(&s.heap);
      double t = s.heap.key[e];
      s.events++;
      if (e < s.N) { /* a worker's operation ended */
        sim_worker *k = &s.w[e];
        const sim_op *op = &s.ops[k->op];
        k->op++;
        if (op->arrive_end >= 0) arrive(&s, op->arrive_end, t);
        advance(&s, e, t);
        continue;
      }
      /* The stream's message ended. */
      sim_msg *g = &s.msgs[s.stream_next];
      g->ended = 1;
      s.stream_busy = 0;
      for (int w = g->blocked; w >= 0;) {
        int next = s.w[w].next_blocked;
        advance(&s, w, t);
        w = next;
      }
      g->blocked = -1;
      s.stream_next++;
      if (s.stream_next < s.nmsgs) {
        if (s.msgs[s.stream_next].count == s.N) stream_start(&s, s.stream_next, t);
        continue;
      }
      /* The iteration's last message: the iteration ends. */
      double it = t - s.iter_start;
      sum_iter += it;
      sum_slow += s.slowest;
      out->iter_min_s = GS_MIN(out->iter_min_s, it);
      out->iter_max_s = GS_MAX(out->iter_max_s, it);
      if (s.iter + 1 < cfg->iters) {
        s.iter++;
        start_iteration(&s, t);
      }
    }
    if (s.iter + 1 != cfg->iters || s.heap.n != 0)
      st = gs_error(GS_ERR_INTERNAL, "sim: the event loop stopped in iteration %d of %d",
                    s.iter + 1, cfg->iters);
    else {
      out->iter_s = sum_iter / cfg->iters;
      out->straggler_s = sum_slow / cfg->iters - t1;
      /* An iteration ends after its slowest worker's compute, so what is
       * left is never below 0 but by rounding (-2e-16 s with one worker). */
      out->exposed_comm_s = GS_MAX(0.0, out->iter_s - t1 - out->straggler_s);
      out->efficiency = out->iter_s > 0 ? t1 / out->iter_s : 1.0;
      out->events = s.events;
      out->straggler = s.straggler;
      if (cfg->trace) st = make_trace(&s, out);
    }
  }
  gs_free(s.msgs);
  gs_free(s.ops);
  gs_free(s.w);
  gs_free(s.heap.ent);
  gs_free(s.heap.pos);
  gs_free(s.heap.key);
  if (st != GS_OK) gs_sim_result_free(out);
  return st;
}

void gs_sim_result_free(gs_sim_result *r) {
  if (r == NULL) return;
  gs_free(r->spans);
  r->spans = NULL;
  r->nspans = 0;
}

const char *gs_sim_span_name(gs_sim_span_kind kind) {
  static const char *names[] = {"forward",    "backward",       "wait",     "allreduce",
                                "compressed", "reduce_scatter", "allgather"};
  return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}
