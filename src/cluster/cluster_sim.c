/*
 * The cluster simulator (gradsync/cluster_sim.h; docs/CLUSTER.md): a job
 * trace replayed event by event on a pool of whole nodes under one of the
 * manager's policies (policy.h), the same gs_cluster_allocate the manager
 * calls.
 *
 * Events: arrivals, completions, a re-allocation every interval_s (for a
 * policy that reads the jobs' progress: goodput; static's and dorm's answers
 * change only with the jobs and the pool), and an optional node loss. At each event time the jobs' progress is advanced
 * (a job makes no progress during a restart), every arrival and completion
 * at that time is taken in, and the policy is asked once for every job's
 * size. A job whose size changes while it runs, or that resumes after a
 * preemption or after losing nodes, pays restart_penalty_s: it holds its
 * new nodes and makes no progress for that long (Pollux's simulator charges
 * its restarts the same way). A job's first start costs start_penalty_s
 * (0 by default: free): a real job's launch, data loading and set-up, which
 * for short jobs is a large share of their completion time. A speed table
 * with start_s gives each start (first or after a resize) its cost on that
 * many nodes instead of either penalty.
 *
 * Measures (gs_csim_result):
 *  - utilisation: allocated node-seconds over the pool's node-seconds
 *    during the makespan (nodes * makespan, less what a node loss took
 *    away; Dorm's resource utilisation with one resource); util_busy leaves
 *    out the node-seconds spent restarting;
 *  - fairness loss: Dorm's sum_i |x_i - f_i| / N (gs_cluster_fairness_loss)
 *    over the jobs in the system, f the weighted max-min fair share, averaged
 *    over the time in which any job is in the system;
 *  - finish-time fairness (Themis, Mahajan et al., NSDI 2020, Sec. 3):
 *    rho_i = T_shared / T_independent, T_shared the job's completion time
 *    and T_independent its running time alone on N / n_avg nodes (n_avg the
 *    time-averaged number of jobs in the system during its life; below
 *    min_nodes a partition of min_nodes time-shared, above max_nodes
 *    max_nodes): max and mean;
 *  - job completion times (finish - submit): mean, median, p99 (nearest
 *    rank); makespan: last finish - first submission.
 */
#include "gradsync/cluster_sim.h"
#include "policy.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (err == NULL || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

void gs_csim_defaults(gs_csim_opts *o) {
  memset(o, 0, sizeof *o);
  gs_cluster_policy_opts p;
  gs_cluster_policy_defaults(&p);
  o->restart_penalty_s = p.restart_penalty_s;
  o->interval_s = p.interval_s;
  o->time_limit_s = p.time_limit_s;
  o->fairness_weight = p.fairness_weight;
  o->adjust_weight = p.adjust_weight;
}

typedef struct sim_job {
  int size;           /* nodes held now */
  double rem;         /* work left */
  double restart_end; /* no progress before this time */
  double start, end;  /* first start, finish (-1: not yet) */
  int restarts;
  int ever_ran, must_restart, done, arrived;
  double contention;  /* integral of the number of jobs in the system */
  /* opts.learn_work: the work done in this launch since its start-up, the
   * speeds known per size (0: not yet) and the curve fitted to them. */
  double launch_done;
  double *known, *curve;
  int ncurve;
} sim_job;

typedef struct sim {
  const gs_csim_workload *w;
  const gs_csim_opts *o;
  sim_job *js;
  int *active, nactive; /* arrived, not finished */
  int nodes;            /* the pool now */
  int *node_job;        /* owner of each node (-1 free) */
  double *node_since;
  int *count;           /* nodes held per job in node_job (scratch) */
  gs_cluster_job *pj;   /* policy input (scratch) */
  int *sizes;
  double *share;
  double fairness_now;
  FILE *trace;
} sim;

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double job_speed(const sim *s, int j, int n) {
  const gs_csim_job *g = &s->w->jobs[j];
  if (n <= 0) return 0;
  if (n > g->max_nodes) n = g->max_nodes;
  return g->speed[n];
}

/* opts.learn_work: job j's speed on n nodes is measured (the manager's
 * two commits of one launch), and its curve refitted to the sizes known. */
static void learn(sim *s, int j, int n) {
  const gs_csim_job *g = &s->w->jobs[j];
  sim_job *js = &s->js[j];
  js->known[n] = job_speed(s, j, n);
  int *nn = malloc((size_t)g->max_nodes * sizeof *nn), np = 0;
  double *rr = malloc((size_t)g->max_nodes * sizeof *rr);
  for (int q = 1; nn && rr && q <= g->max_nodes; q++)
    if (js->known[q] > 0) {
      nn[np] = q;
      rr[np++] = js->known[q];
    }
  /* (Out of memory: the curve stays as it was, as a failed fit would.) */
  if (nn && rr && gs_cluster_speed_fit(nn, rr, np, g->max_nodes, js->curve, NULL, NULL, 0) == 0)
    js->ncurve = g->max_nodes;
  free(nn);
  free(rr);
}

/* Gives node k to job j (or frees it, j = -1) at time t, closing the
 * previous owner's segment in the trace. */
static void node_set(sim *s, int k, int j, double t) {
  if (s->node_job[k] == j) return;
  if (s->node_job[k] >= 0 && s->trace && t > s->node_since[k])
    fprintf(s->trace, "node,%d,%d,%.3f,%.3f\n", k, s->node_job[k], s->node_since[k], t);
  s->node_job[k] = j;
  s->node_since[k] = t;
}

/* Makes the node map agree with the jobs' sizes: jobs release their
 * highest nodes first, then take the lowest free ones. */
static void map_sync(sim *s, double t) {
  int nj = s->w->njobs;
  memset(s->count, 0, (size_t)nj * sizeof *s->count);
  for (int k = 0; k < s->nodes; k++)
    if (s->node_job[k] >= 0) s->count[s->node_job[k]]++;
  for (int k = s->nodes - 1; k >= 0; k--) {
    int j = s->node_job[k];
    if (j >= 0 && s->count[j] > s->js[j].size) {
      s->count[j]--;
      node_set(s, k, -1, t);
    }
  }
  int k = 0;
  for (int a = 0; a < s->nactive; a++) {
    int j = s->active[a];
    while (s->count[j] < s->js[j].size) {
      while (k < s->nodes && s->node_job[k] >= 0) k++;
      if (k == s->nodes) return; /* cannot happen: sizes fit the pool */
      node_set(s, k, j, t);
      s->count[j]++;
    }
  }
}

/* One policy round at time t over the jobs in the system. */
static int resolve(sim *s, double t, gs_csim_result *r, char *err, size_t errlen) {
  int n = s->nactive;
  for (int a = 0; a < n; a++) {
    int j = s->active[a];
    const gs_csim_job *g = &s->w->jobs[j];
    gs_cluster_job *p = &s->pj[a];
    memset(p, 0, sizeof *p);
    p->id = j;
    p->min_nodes = g->min_nodes;
    p->max_nodes = g->max_nodes;
    p->req_nodes = g->req_nodes;
    p->weight = g->weight;
    p->cur_nodes = s->js[j].size;
    p->submit_time = g->submit;
    p->progress = 1 - s->js[j].rem / g->work;
    p->speed = g->speed;
    if (s->o->learn_work > 0) /* only what the manager would know by now */
      p->speed = s->js[j].ncurve ? s->js[j].curve : NULL;
    p->restarts = s->js[j].restarts;
    p->work = s->o->learn_work > 0 && !s->js[j].ncurve ? 0 : g->work;
  }
  gs_cluster_policy_opts po;
  gs_cluster_policy_defaults(&po);
  po.restart_penalty_s = s->o->restart_penalty_s;
  po.time_limit_s = s->o->time_limit_s;
  po.fairness_weight = s->o->fairness_weight;
  po.adjust_weight = s->o->adjust_weight;
  if (s->o->interval_s > 0) po.interval_s = s->o->interval_s;
  gs_cluster_policy_report rep;
  char perr[512];
  if (gs_cluster_allocate(s->o->policy, s->pj, n, s->nodes, &po, s->sizes, &rep, perr,
                          sizeof perr) != 0) {
    set_err(err, errlen, "policy %s at t=%.1f s: %s", s->o->policy, t, perr);
    return -1;
  }
  r->rounds++;
  r->jobs_per_round += n; /* a sum until the end */
  r->policy_ms_mean += rep.solve_ms; /* a sum until the end */
  if (rep.solve_ms > r->policy_ms_max) r->policy_ms_max = rep.solve_ms;
  if (isfinite(rep.gap) && rep.gap > r->gap_max) r->gap_max = rep.gap;
  r->fallbacks += rep.fallback;
  r->exact_rounds += rep.exact;
  for (int a = 0; a < n; a++) {
    int j = s->active[a];
    sim_job *js = &s->js[j];
    int old = js->size, nw = s->sizes[a];
    if (nw > 0 && (js->must_restart || (old > 0 && nw != old) || (old == 0 && js->ever_ran))) {
      js->restarts++;
      r->resizes++;
      const double *st = s->w->jobs[j].start_s;
      js->restart_end = t + (st ? st[nw] : s->o->restart_penalty_s);
      js->must_restart = 0;
      js->launch_done = 0;
    } else if (nw > 0 && old == 0) {
      const double *st = s->w->jobs[j].start_s; /* first start */
      js->restart_end = t + (st ? st[nw] : s->o->start_penalty_s);
      js->launch_done = 0;
    }
    if (nw > 0 && !js->ever_ran) {
      js->ever_ran = 1;
      js->start = t;
    }
    if (nw == 0 && old > 0) js->must_restart = 1; /* preempted: resumes from a checkpoint */
    js->size = nw;
  }
  map_sync(s, t);
  gs_cluster_fair_share(s->pj, n, s->nodes, s->share);
  s->fairness_now = gs_cluster_fairness_loss(s->sizes, s->share, n, s->nodes);
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static const gs_csim_job *sort_jobs;
static int cmp_submit(const void *a, const void *b) {
  const gs_csim_job *x = &sort_jobs[*(const int *)a], *y = &sort_jobs[*(const int *)b];
  if (x->submit != y->submit) return x->submit < y->submit ? -1 : 1;
  return *(const int *)a - *(const int *)b;
}

int gs_csim_run(const gs_csim_workload *w, const gs_csim_opts *o, gs_csim_result *r, char *err,
                size_t errlen) {
  memset(r, 0, sizeof *r);
  if (o->nodes < 1) {
    set_err(err, errlen, "the pool has %d nodes; expected 1 or more", o->nodes);
    return -1;
  }
  if (!gs_cluster_policy_known(o->policy)) {
    set_err(err, errlen, "unknown policy '%s'; expected one of %s",
            o->policy ? o->policy : "(none)", gs_cluster_policy_names());
    return -1;
  }
  if (o->loss_nodes < 0 || o->loss_nodes >= o->nodes) {
    set_err(err, errlen, "node loss of %d nodes from a pool of %d; expected 0 to %d",
            o->loss_nodes, o->nodes, o->nodes - 1);
    return -1;
  }
  int nj = w->njobs;
  for (int j = 0; j < nj; j++) {
    const gs_csim_job *g = &w->jobs[j];
    if (g->min_nodes < 1 || g->max_nodes < g->min_nodes || g->max_nodes > o->nodes ||
        g->speed == NULL || !(g->work > 0) || !(g->speed[g->min_nodes] > 0)) {
      set_err(err, errlen,
              "job '%s' (line %d) cannot run on %d nodes: sizes %d..%d, work %g, speed at "
              "min %g",
              g->name, g->line, o->nodes, g->min_nodes, g->max_nodes, g->work,
              g->speed ? g->speed[g->min_nodes] : 0.0);
      return -1;
    }
  }
  double t_start = wall_s();
  int rc = -1;
  sim s = {.w = w, .o = o, .nodes = o->nodes, .trace = o->trace};
  s.js = calloc((size_t)nj, sizeof *s.js);
  s.active = malloc((size_t)nj * sizeof *s.active);
  s.node_job = malloc((size_t)o->nodes * sizeof *s.node_job);
  s.node_since = calloc((size_t)o->nodes, sizeof *s.node_since);
  s.count = malloc((size_t)nj * sizeof *s.count);
  s.pj = malloc((size_t)nj * sizeof *s.pj);
  s.sizes = malloc((size_t)nj * sizeof *s.sizes);
  s.share = malloc((size_t)nj * sizeof *s.share);
  int *order = malloc((size_t)nj * sizeof *order);
  double *jct = malloc((size_t)nj * sizeof *jct);
  if (!s.js || !s.active || !s.node_job || !s.node_since || !s.count || !s.pj || !s.sizes ||
      !s.share || !order || !jct) {
    set_err(err, errlen, "out of memory simulating %d jobs on %d nodes", nj, o->nodes);
    goto done;
  }
  for (int k = 0; k < o->nodes; k++) s.node_job[k] = -1;
  for (int j = 0; j < nj && o->learn_work > 0; j++) {
    s.js[j].known = calloc((size_t)w->jobs[j].max_nodes + 1, sizeof *s.js[j].known);
    s.js[j].curve = calloc((size_t)w->jobs[j].max_nodes + 1, sizeof *s.js[j].curve);
    if (!s.js[j].known || !s.js[j].curve) {
      set_err(err, errlen, "out of memory simulating %d jobs on %d nodes", nj, o->nodes);
      goto done;
    }
  }
  for (int j = 0; j < nj; j++) {
    order[j] = j;
    s.js[j].rem = w->jobs[j].work;
    s.js[j].start = s.js[j].end = -1;
  }
  sort_jobs = w->jobs;
  qsort(order, (size_t)nj, sizeof *order, cmp_submit);

  double t = w->jobs[order[0]].submit, t0 = t;
  int next_arrival = 0, finished = 0;
  double interval = o->interval_s;
  double next_tick = interval > 0 ? t + interval : INFINITY;
  int loss_pending = o->loss_nodes > 0;
  double used_ns = 0, busy_ns = 0, avail_ns = 0, fair_int = 0, fair_time = 0;
  const double eps = 1e-9;
  if (s.trace) fprintf(s.trace, "# node,NODE,JOB,T0,T1 | util,T,USED,BUSY,ACTIVE | job,...\n");

  for (;;) {
    /* Take in what happens at time t. */
    int changed = 0;
    while (next_arrival < nj && w->jobs[order[next_arrival]].submit <= t + eps) {
      int j = order[next_arrival++];
      s.js[j].arrived = 1;
      s.active[s.nactive++] = j;
      changed = 1;
    }
    for (int a = 0; a < s.nactive;) {
      int j = s.active[a];
      sim_job *js = &s.js[j];
      if (js->size > 0 && js->rem <= eps * w->jobs[j].work) {
        js->done = 1;
        js->end = t;
        js->size = 0;
        finished++;
        s.active[a] = s.active[--s.nactive];
        changed = 1;
        if (s.trace)
          fprintf(s.trace, "job,%d,%s,%.3f,%.3f,%.3f,%.3f,%d\n", j, w->jobs[j].name,
                  w->jobs[j].submit, js->start, js->end, js->end - w->jobs[j].submit,
                  js->restarts);
      } else {
        a++;
      }
    }
    if (loss_pending && t >= o->loss_time_s - eps) {
      loss_pending = 0;
      int nn = o->nodes - o->loss_nodes;
      for (int k = nn; k < o->nodes; k++) {
        int j = s.node_job[k];
        if (j >= 0) {
          s.js[j].size--;
          s.js[j].must_restart = 1;
        }
        node_set(&s, k, -1, t);
      }
      s.nodes = nn;
      changed = 1;
    }
    /* A periodic round: for a policy that reads progress; the others would
     * repeat their last answer (gs_cluster_policy_reads_progress). */
    if (t >= next_tick - eps) {
      if (gs_cluster_policy_reads_progress(o->policy)) changed = 1;
      while (next_tick <= t + eps) next_tick += interval;
    }
    if (finished == nj) break;
    if (changed && s.nactive > 0 && resolve(&s, t, r, err, errlen) != 0) goto done;
    if (changed && s.nactive == 0) s.fairness_now = 0;
    int used = 0, busy = 0, running = 0;
    for (int a = 0; a < s.nactive; a++) {
      int j = s.active[a];
      used += s.js[j].size;
      if (s.js[j].size > 0) running++;
      if (s.js[j].size > 0 && s.js[j].restart_end <= t + eps) busy += s.js[j].size;
    }
    if (s.trace)
      fprintf(s.trace, "util,%.3f,%d,%d,%d\n", t, used, busy, s.nactive);

    /* The next event. */
    double tn = next_arrival < nj ? w->jobs[order[next_arrival]].submit : INFINITY;
    for (int a = 0; a < s.nactive; a++) {
      int j = s.active[a];
      const sim_job *js = &s.js[j];
      if (js->size <= 0) continue;
      double sp = job_speed(&s, j, js->size);
      double from = js->restart_end > t ? js->restart_end : t;
      double done_at = from + js->rem / sp;
      if (done_at < tn) tn = done_at;
      if (js->restart_end > t && js->restart_end < tn) tn = js->restart_end; /* busy changes */
    }
    if (s.nactive > 0 && next_tick < tn) tn = next_tick;
    if (loss_pending && o->loss_time_s < tn) tn = o->loss_time_s > t ? o->loss_time_s : t;
    /* Nothing runs and nothing will arrive: the jobs left can never run
     * (the policies are deterministic, so another round changes nothing). */
    if (running == 0 && next_arrival == nj && !loss_pending) break;
    if (!isfinite(tn)) break;
    if (tn < t) tn = t;
    /* Advance to tn. */
    double dt = tn - t;
    for (int a = 0; a < s.nactive; a++) {
      int j = s.active[a];
      sim_job *js = &s.js[j];
      js->contention += s.nactive * dt;
      if (js->size <= 0) continue;
      double from = js->restart_end > t ? js->restart_end : t;
      if (from < tn) {
        double sp = job_speed(&s, j, js->size);
        js->rem -= sp * (tn - from);
        if (js->rem < 0) js->rem = 0;
        busy_ns += js->size * (tn - from);
        js->launch_done += sp * (tn - from);
        if (o->learn_work > 0 && js->launch_done >= o->learn_work && js->known[js->size] == 0)
          learn(&s, j, js->size);
      }
    }
    used_ns += used * dt;
    avail_ns += s.nodes * dt;
    if (s.nactive > 0) {
      fair_int += s.fairness_now * dt;
      fair_time += dt;
    }
    t = tn;
  }

  /* Results. */
  double last_end = t0;
  int nd = 0;
  double rho_sum = 0, rho_max = 0;
  for (int j = 0; j < nj; j++) {
    const sim_job *js = &s.js[j];
    if (!js->done) continue;
    const gs_csim_job *g = &w->jobs[j];
    double c = js->end - g->submit;
    jct[nd++] = c;
    if (js->end > last_end) last_end = js->end;
    double navg = c > 0 ? js->contention / c : 1;
    if (navg < 1) navg = 1;
    double share = o->nodes / navg, sp;
    if (share < g->min_nodes)
      sp = g->speed[g->min_nodes] * share / g->min_nodes;
    else if (share >= g->max_nodes)
      sp = g->speed[g->max_nodes];
    else {
      int lo = (int)floor(share);
      double f = share - lo;
      sp = g->speed[lo] + (lo < g->max_nodes ? f * (g->speed[lo + 1] - g->speed[lo]) : 0);
    }
    double t_id = g->work / sp;
    double rho = t_id > 0 ? c / t_id : 0;
    rho_sum += rho;
    if (rho > rho_max) rho_max = rho;
  }
  r->jobs = nj;
  r->done = nd;
  r->makespan_s = last_end - t0;
  if (nd > 0) {
    double sum = 0;
    for (int k = 0; k < nd; k++) sum += jct[k];
    r->jct_mean_s = sum / nd;
    qsort(jct, (size_t)nd, sizeof *jct, cmp_double);
    r->jct_p50_s = jct[(nd - 1) / 2];
    int k99 = (int)ceil(0.99 * nd) - 1;
    r->jct_p99_s = jct[k99 < 0 ? 0 : k99];
    r->ftf_mean = rho_sum / nd;
    r->ftf_max = rho_max;
  }
  r->util = avail_ns > 0 ? used_ns / avail_ns : 0;
  r->util_busy = avail_ns > 0 ? busy_ns / avail_ns : 0;
  r->fairness_loss = fair_time > 0 ? fair_int / fair_time : 0;
  if (r->rounds > 0) {
    r->policy_ms_mean /= r->rounds;
    r->jobs_per_round /= r->rounds;
  }
  for (int k = 0; k < s.nodes; k++) node_set(&s, k, -1, t);
  r->sim_s = wall_s() - t_start;
  rc = 0;
done:
  for (int j = 0; s.js && j < nj; j++) {
    free(s.js[j].known);
    free(s.js[j].curve);
  }
  free(s.js);
  free(s.active);
  free(s.node_job);
  free(s.node_since);
  free(s.count);
  free(s.pj);
  free(s.sizes);
  free(s.share);
  free(order);
  free(jct);
  return rc;
}
