/*
 * The cluster simulator (gradsync/cluster_sim.h; docs/CLUSTER.md): a job
 * trace replayed event by event on a pool of whole nodes under one of the
 * manager's policies (policy.h), the same gs_cluster_allocate the manager
 * calls.
 *
 * Events: arrivals, completions, a re-allocation every interval_s (for a
 * policy that reads the jobs' progress: goodput; static's and dorm's answers
 * change only with the jobs and the pool), and an optional node loss. At
 * each event time the jobs' progress is advanced (a job makes no progress
 * during a start-up), every arrival and completion at that time is taken
 * in, and the policy is asked once for every job's size.
 *
 * A job has a partition (the nodes the policy gave it, the manager's
 * assignment; its size is what the policy sees) and a launch (the nodes it
 * runs on). Every launch after a job's first (a resize, a resumption after
 * a preemption or a node loss) costs restart_penalty_s without progress,
 * holding its nodes; the first costs start_penalty_s (0 by default: free);
 * a speed table with start_s gives each launch its cost on that many nodes
 * instead. A table with end_s gives a job an end after its last step (its
 * final evaluation and save), paid once, holding its launch's nodes, in
 * which it takes no stop: a shrink or preemption answered then waits for
 * its exit. When a partition changes, the launch follows it:
 *  - commit_work 0 (the default, Pollux's simulator's model): at once; a
 *    node taken from one job goes to another in the same round;
 *  - commit_work > 0 (the manager's, docs/CLUSTER_MANAGER.md "Resizing a
 *    job"): the job's elastic supervisor notices the change at its next
 *    discovery (every discover_every_s from the launch) and asks the job to
 *    stop at its next commit (every commit_work of its work, after its
 *    start-up if it is in one); until then it runs on its old nodes; then
 *    it is relaunched on its partition. A job that reaches its end first
 *    (no commit at the last step) just ends. A node is free only when it is
 *    in no partition and no launch, so a job grows or starts only when the
 *    nodes it is given are no longer used by the job that gave them up (the
 *    manager's rule: partitions never overlap); a grow that does not fit
 *    waits for the next round, and a relaunch is a round (the manager's,
 *    when a job's launch matches its partition again). A preempted job, or
 *    one whose launch lost a node, resumes from its last commit. The
 *    manager's start of a job reaches its supervisor's launch
 *    launch_delay_s later (its keeper, the hosts' check): a change of the
 *    partition before then costs nothing, and a relaunch by the supervisor
 *    after a stop skips that part of the start-up;
 *  - commit_every_s > 0 (the manager's default for gradsync train jobs,
 *    commits by time): the same, but the stop is taken at the job's next
 *    check (every check_every_s of its training, at least a step), where
 *    it commits, so a resize loses no work; it commits every
 *    commit_every_s of a launch's training besides, what a preemption or a
 *    lost node goes back to.
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

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Periodic rounds a replay may take by default (goodput re-solves every
 * interval while jobs run): about 3 s of rounds for a few jobs; a trace of
 * realistic jobs needs a few thousand. */
#define CSIM_MAX_PERIODIC 10000000L

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (err == NULL || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* Whether resizes follow the manager's protocol: commits by work
 * (commit_work) or by time (commit_every_s). */
static int protocol_of(const gs_csim_opts *o) {
  return o->commit_work > 0 || o->commit_every_s > 0;
}

static int by_time(const gs_csim_opts *o) { return o->commit_every_s > 0; }

/* Whether the policies learn the jobs' speeds as the manager does. */
static int learns(const gs_csim_opts *o) { return o->learn_work > 0 || o->learn_s > 0; }

void gs_csim_defaults(gs_csim_opts *o) {
  memset(o, 0, sizeof *o);
  gs_cluster_policy_opts p;
  gs_cluster_policy_defaults(&p);
  o->restart_penalty_s = p.restart_penalty_s;
  o->interval_s = p.interval_s;
  o->time_limit_s = p.time_limit_s;
  o->fairness_weight = p.fairness_weight;
  o->adjust_weight = p.adjust_weight;
  o->discover_every_s = 1; /* the manager's supervisors' (--discover-every 1) */
  o->check_every_s = 0.5;   /* train's checks under commits by time */
}

typedef struct sim_job {
  int size;           /* nodes in its partition (what the policy sees) */
  int granted;        /* the last round's answer while its start or grow waits
                         for nodes still in other launches (0: none waits);
                         the policy sees it as the job's size, as the
                         manager's rounds do (job.granted) */
  int run;            /* nodes its launch runs on (0: not running) */
  int moved;          /* nodes in its partition or its launch but not both */
  double rem;         /* work left */
  double launch_t;    /* its launch's start (pending: when it will launch) */
  double since;       /* when its start-up began (the manager's start, or the stop) */
  double restart_end; /* no progress before this time (the launch's start-up) */
  double stop_at;     /* asked: the work done at which it stops (a commit) */
  double stop_t;      /* asked, commits by time: when it stops (a check) */
  double committed;   /* commits by time: the work done at its last commit */
  int reported;       /* commits by time: it has trained (the manager has had a
                         progress report of it; before, its progress is unknown) */
  double commit_t;    /* commits by time: its launch's next commit */
  double run_s;       /* seconds it has run (started by the manager, not
                         queued): its attained service, gs_cluster_job.run_s */
  double start, end;  /* first start, finish (-1: not yet) */
  double end_at;      /* in its end (gs_csim_job.end_s: its last step done,
                         its final evaluation and save running, holding its
                         launch's nodes): when it exits; -1: not in it. A
                         job in its end takes no stop: a resize or a
                         preemption answered then waits for its exit, as
                         the manager's stop request does (no check comes) */
  int restarts;
  int ever_ran, done, arrived, asked;
  int pending;        /* started by the manager, not yet launched by its supervisor */
  double contention;  /* integral of the number of jobs in the system */
  /* opts.learn_work: the work done in this launch since its start-up, the
   * speeds known per size (0: not yet) and the curve fitted to them. */
  double launch_done, launch_train_s;
  double *known, *curve;
  int ncurve;
  double *borrowed;   /* opts.share_speeds: the curve taken from a job of its model */
  /* opts.learn_work: what its resizes cost, as the manager measures them
   * (from the stop request to the relaunch's training, at its second
   * commit): the current one's until then, and the mean of those measured
   * (what the policies see). resize_ref: the stop request of the resize
   * being launched (resizing 1), set by relaunch(). */
  double launch_cost, restart_sum, resize_ref, ask_t;
  int cost_pending, restart_n, resizing;
  /* opts.restart_prior: its first launch's start-up as the manager
   * measures it (from the launch to training; -1: not yet), pending until
   * the launch is measured. */
  double startup_s, startup_cost;
  int startup_pending;
  double fair;        /* its fair share at the last round (nodes) */
  double held_s, fair_s; /* node-seconds its partitions held and of its fair
                            share, while in the system (the manager's node_s
                            and fair_s): what it is owed (gs_cluster_job.owed_s) */
} sim_job;

typedef struct sim {
  const gs_csim_workload *w;
  const gs_csim_opts *o;
  gs_csim_result *r;
  sim_job *js;
  int *active, nactive; /* arrived, not finished */
  int *rank;            /* each job's place in the order of submission */
  int nodes;            /* the pool now */
  int *node_job;        /* the partition each node is in (-1: none) */
  int *node_run;        /* the launch each node is in (-1: none) */
  char *part, *in_launch; /* a shrinking job's nodes (scratch) */
  double *node_since;   /* since when its holder (below) holds it */
  int held;             /* nodes in a partition or a launch */
  int learned;          /* a job's curve was learned since the last round */
  gs_cluster_job *pj;   /* policy input (scratch) */
  int *sizes;
  int *order;           /* a round's jobs in the order of submission (scratch) */
  double *share;
  double *prior_r, *prior_su; /* opts.restart_prior: the pool's measured (scratch) */
  double fairness_now;
  FILE *trace;
  int owners;           /* the users' and accounts' tree applies (gs_csim_opts.shares) */
  const char **users, **accounts; /* a round's jobs' (scratch) */
  const char **names;   /* a round's jobs' names, for the round log (scratch) */
  /* With shares->usage_halflife_s: each job's owner (a user in an account),
   * the owners' names, their decayed usage to now and the nodes their
   * partitions hold (scratch). */
  int *owner, nowner;
  const char **ouser, **oacct;
  double *ousage, *onodes;
} sim;

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double job_speed(const sim *s, int j, int n);

/* Job j's speed now, busy nodes computing in the pool (its own included):
 * the table's, slowed by the interference of the others (opts.interference). */
static double speed_now(const sim *s, int j, int busy) {
  int n = s->js[j].run;
  double sp = job_speed(s, j, n);
  if (!(s->o->interference > 0) || s->nodes <= n || busy <= n) return sp;
  return sp / (1 + s->o->interference * (double)(busy - n) / (double)(s->nodes - n));
}

static double job_speed(const sim *s, int j, int n) {
  const gs_csim_job *g = &s->w->jobs[j];
  if (n <= 0) return 0;
  if (n > g->max_nodes) n = g->max_nodes;
  return g->speed[n];
}

/* The manager's fit (gs_cluster_speed_fit) on 0..max to the speeds known
 * of a job of top nodes at most (known[q] > 0). Returns 0, or -1 when none
 * is known or without memory. */
static int fit_known(const double *known, int top, int max, double *out) {
  int *nn = malloc((size_t)top * sizeof *nn), rc = -1;
  double *rr = malloc((size_t)top * sizeof *rr);
  if (nn && rr) {
    int np = gs_cluster_known_points(known, top, nn, rr);
    rc = gs_cluster_speed_fit(nn, rr, np, max, out, NULL, NULL, 0);
  }
  free(nn);
  free(rr);
  return rc;
}

/* opts.learn_work: job j's speed on n nodes is measured (the manager's
 * two commits of one launch), and its curve refitted to the sizes known. */
static void learn(sim *s, int j, int n, double seen) {
  const gs_csim_job *g = &s->w->jobs[j];
  sim_job *js = &s->js[j];
  js->known[n] = seen; /* what the manager measures: the speed it ran at */
  s->learned = 1;
  /* (Out of memory: the curve stays as it was, as a failed fit would.) */
  if (fit_known(js->known, g->max_nodes, g->max_nodes, js->curve) == 0)
    js->ncurve = g->max_nodes;
}

/* The job a node's time is charged to: its launch's, else its partition's
 * (-1: free). */
static int node_holder(const sim *s, int k) {
  return s->node_run[k] >= 0 ? s->node_run[k] : s->node_job[k];
}

/* Whether node k is in job j's partition or its launch but not both. */
static int node_moved(const sim *s, int k, int j) {
  return (s->node_job[k] == j) != (s->node_run[k] == j);
}

/* Puts node k in partition `part` and launch `launch` (-1: none) at time t,
 * keeping the jobs' moved counts and closing its holder's segment in the
 * trace. A node in a launch is never in another job's partition (the
 * manager gives a job only nodes that no launch uses). */
static void node_change(sim *s, int k, int part, int launch, double t) {
  int a = s->node_job[k], b = s->node_run[k], h = node_holder(s, k);
  if (a >= 0) s->js[a].moved -= node_moved(s, k, a);
  if (b >= 0 && b != a) s->js[b].moved -= node_moved(s, k, b);
  s->node_job[k] = part;
  s->node_run[k] = launch;
  if (part >= 0) s->js[part].moved += node_moved(s, k, part);
  if (launch >= 0 && launch != part) s->js[launch].moved += node_moved(s, k, launch);
  int h2 = node_holder(s, k);
  if (h2 == h) return;
  if (h >= 0 && s->trace && t > s->node_since[k])
    fprintf(s->trace, "node,%d,%d,%.3f,%.3f\n", k, h, s->node_since[k], t);
  s->held += (h2 >= 0) - (h >= 0);
  s->node_since[k] = t;
}

/* Job j's launch ends (it stopped, ended or lost a rank): its nodes stay
 * in its partition, if they are. */
static void launch_end(sim *s, int j, double t) {
  for (int k = 0; k < s->nodes && s->js[j].run > 0; k++)
    if (s->node_run[k] == j) node_change(s, k, s->node_job[k], -1, t);
  s->js[j].run = 0;
  s->js[j].asked = 0;
  s->js[j].end_at = -1;
}

static int in_end(const sim_job *js) { return js->end_at >= 0; }

/* The seconds job j's end takes on the nodes it runs on (0: none). */
static double end_cost(const sim *s, int j) {
  const gs_csim_job *g = &s->w->jobs[j];
  int n = s->js[j].run < g->max_nodes ? s->js[j].run : g->max_nodes;
  return g->end_s != NULL && n > 0 ? g->end_s[n] : 0;
}

/* Job j's supervisor launches it at t on its partition, its start-up
 * counted from js->since. Every launch but its first is a restart
 * (restart_penalty_s, or the table's start-up on that many nodes; the
 * first: start_penalty_s, or the table's). */
static void launch(sim *s, int j, double t) {
  sim_job *js = &s->js[j];
  launch_end(s, j, t);
  for (int k = 0; k < s->nodes; k++)
    if (s->node_job[k] == j) node_change(s, k, j, j, t);
  const double *st = s->w->jobs[j].start_s;
  double cost;
  if (js->ever_ran) {
    js->restarts++;
    s->r->resizes++;
    cost = st ? st[js->size] : s->o->restart_penalty_s;
  } else {
    js->ever_ran = 1;
    cost = st ? st[js->size] : s->o->start_penalty_s;
  }
  js->restart_end = js->since + cost > t ? js->since + cost : t;
  js->startup_pending = js->restarts == 0 && js->startup_s < 0; /* its first launch */
  js->startup_cost = js->restart_end - t;
  js->launch_cost = js->restart_end - js->resize_ref;
  js->cost_pending = js->resizing; /* a resize's, not a start's or a resumption's */
  js->resizing = 0;
  js->run = js->size;
  js->launch_t = t;
  js->launch_done = 0;
  js->launch_train_s = 0;
  js->pending = 0;
  js->commit_t = js->restart_end + s->o->commit_every_s; /* (commits by time) */
}

/* Job j's launch follows its changed partition (a resize), the stop asked
 * for at ref: its cost, from there, is what the manager measures. */
static void relaunch(sim *s, int j, double t, double ref) {
  s->js[j].resizing = 1;
  s->js[j].resize_ref = ref;
  launch(s, j, t);
}

/* The manager starts job j at t (first, or after a preemption or a lost
 * node) on its partition: with launch_delay_s (the manager's protocol) its
 * supervisor launches it that much later, on the partition it has then, a
 * change before then costing nothing; else at once. */
static void manager_start(sim *s, int j, double t) {
  sim_job *js = &s->js[j];
  if (js->start < 0) js->start = t;
  js->since = t;
  if (protocol_of(s->o) && s->o->launch_delay_s > 0) {
    js->pending = 1;
    js->launch_t = t + s->o->launch_delay_s;
  } else {
    launch(s, j, t);
  }
}

/* Job j's commit interval under the manager's protocol: its own, else the
 * run's. */
static double job_commit_work(const sim *s, int j) {
  double own = s->w->jobs[j].commit_work;
  return own > 0 ? own : s->o->commit_work;
}

/* The work after which the manager knows job j's speed on a size
 * (opts.learn_work): as many of its own commits as learn_work is of the
 * run's. */
static double job_learn_work(const sim *s, int j) {
  double own = s->w->jobs[j].commit_work, run = s->o->commit_work;
  return own > 0 && run > 0 ? s->o->learn_work * own / run : s->o->learn_work;
}

/* The work job j had done at its last commit (commit_work > 0: it commits
 * every commit_work of its work; commits by time: as recorded). */
static double last_commit(const sim *s, int j) {
  if (by_time(s->o)) return s->js[j].committed;
  double cw = job_commit_work(s, j);
  return floor((s->w->jobs[j].work - s->js[j].rem) / cw + 1e-9) * cw;
}

/* Under the manager's protocol, a job restarts from its last commit: the
 * work since is lost. */
static void back_to_commit(sim *s, int j) {
  if (!protocol_of(s->o)) return;
  double kept = last_commit(s, j), work = s->w->jobs[j].work;
  if (kept < work - s->js[j].rem) s->js[j].rem = work - kept;
}

/* The first of job j's supervisor's discoveries at or after t: every
 * discover_every_s from its launch (0: at once). */
static double discovery_at(const sim *s, const sim_job *js, double t) {
  double d = s->o->discover_every_s;
  if (!(d > 0)) return t;
  double k = ceil((t - js->launch_t) / d - 1e-9);
  return js->launch_t + (k < 1 ? 1 : k) * d;
}

/* The work done at job j's next commit, or INFINITY when it has none
 * before its end (a job commits every commit_work, never at its last
 * step: asked to stop there, it ends). */
static double next_commit(const sim *s, int j) {
  double c = last_commit(s, j) + job_commit_work(s, j), work = s->w->jobs[j].work;
  return c < work * (1 - 1e-9) ? c : INFINITY;
}

/* Commits by time: the spacing of job j's checks on its launch,
 * check_every_s of training but at least one step at its table speed
 * (rank 0 sets the next check about check_every_s of steps ahead). */
static double check_every(const sim *s, int j) {
  double iv = s->o->check_every_s, step = s->w->jobs[j].step_work;
  double sp = job_speed(s, j, s->js[j].run);
  if (step > 0 && sp > 0 && step / sp > iv) iv = step / sp;
  return iv;
}

/* Commits by time: job j's first check after t, checks every
 * check_every() from its launch's training start (after its start-up);
 * where the stop asked at t is taken. */
static double next_check(const sim *s, int j, double t) {
  const sim_job *js = &s->js[j];
  double iv = check_every(s, j);
  if (!(iv > 0)) return t > js->restart_end ? t : js->restart_end;
  double k = ceil((t - js->restart_end) / iv - 1e-9);
  return js->restart_end + (k < 1 ? 1 : k) * iv;
}

/* Whether job j's launch has trained long enough for the manager to know
 * its speed there: learn_work of its work (its own commits' share), or
 * learn_s of training; by time, also two checks (two progress reports). */
static int launch_measured(const sim *s, int j) {
  const sim_job *js = &s->js[j];
  if (s->o->learn_s > 0 || by_time(s->o)) {
    double need = s->o->learn_s;
    if (by_time(s->o) && 2 * check_every(s, j) > need) need = 2 * check_every(s, j);
    return js->launch_train_s >= need - 1e-9;
  }
  return js->launch_done >= job_learn_work(s, j);
}

/* The round's positions in s->active, by submission (qsort has no
 * context argument: the simulator runs on one thread). */
static const sim *sort_sim;
static int cmp_by_submission(const void *x, const void *y) {
  int a = sort_sim->rank[sort_sim->active[*(const int *)x]];
  int b = sort_sim->rank[sort_sim->active[*(const int *)y]];
  return (a > b) - (a < b);
}

/* Applies a round's sizes (s->sizes, for the jobs in s->active) as the
 * manager does: shrinks first (a job keeps its first nodes; one given 0 is
 * preempted), then grows and starts in the order of submission, each from
 * free nodes, lowest first, and only when all it needs are free. With
 * commit_work 0 a launch follows its partition at once; else a running
 * job's supervisor notices the change at its next discovery (the event
 * loop). */
static void apply_sizes(sim *s, double t) {
  int n = s->nactive, at_once = !protocol_of(s->o);
  for (int a = 0; a < n; a++) {
    int j = s->active[a], want = s->sizes[a];
    sim_job *js = &s->js[j];
    if (want >= js->size) continue;
    if (want == 0 && !in_end(js)) { /* preempted: resumes from its last commit */
      back_to_commit(s, j);
      launch_end(s, j, t);
      js->pending = 0;
    }
    /* The manager's rule (gs_cluster_shrink_nodes): first the nodes its
     * launch does not run on, then the last. */
    for (int k = 0; k < s->nodes; k++) {
      s->part[k] = s->node_job[k] == j;
      s->in_launch[k] = s->node_run[k] == j;
    }
    gs_cluster_shrink_nodes(s->part, s->in_launch, s->nodes, js->size - want);
    for (int k = 0; k < s->nodes; k++)
      if (s->node_job[k] == j && !s->part[k]) {
        node_change(s, k, -1, s->node_run[k], t);
        js->size--;
      }
    if (at_once && js->run > 0 && js->moved > 0 && !in_end(js)) {
      js->since = t;
      relaunch(s, j, t, t);
    }
  }
  for (int a = 0; a < n; a++) s->order[a] = a;
  sort_sim = s;
  qsort(s->order, (size_t)n, sizeof *s->order, cmp_by_submission);
  for (int q = 0, k = 0; q < n; q++) {
    int j = s->active[s->order[q]], want = s->sizes[s->order[q]];
    sim_job *js = &s->js[j];
    js->granted = 0;
    if (want <= js->size) continue;
    if (want - js->size > s->nodes - s->held) {
      js->granted = want; /* waits for nodes being given back */
      continue;
    }
    for (; js->size < want && k < s->nodes; k++)
      if (s->node_job[k] < 0 && s->node_run[k] < 0) {
        node_change(s, k, j, -1, t);
        js->size++;
      }
  }
  /* Starts, resumptions, and (at once) grows: on a partition of at least
   * the job's minimum (one left below it by a lost node, its grow waiting
   * for nodes still in another job's launch, cannot run on what it has). */
  for (int a = 0; a < n; a++) {
    int j = s->active[a];
    sim_job *js = &s->js[j];
    if (js->size < s->w->jobs[j].min_nodes) continue;
    if (js->run == 0 && !js->pending) {
      manager_start(s, j, t);
    } else if (at_once && js->moved > 0 && !in_end(js)) {
      js->since = t;
      relaunch(s, j, t, t);
    }
  }
}

/* opts.share_speeds: job j (nothing learned of itself) takes the curve of
 * the arrived job of its model that learned the most sizes (the latest
 * submitted on a tie): the manager's fit to the speeds that job measured,
 * on j's sizes. Returns 1 when js[j].borrowed holds it. */
static int borrow(sim *s, int j) {
  const gs_csim_job *g = &s->w->jobs[j];
  int best = -1, best_n = 0;
  for (int k = 0; k < s->w->njobs; k++) {
    const gs_csim_job *h = &s->w->jobs[k];
    if (k == j || !s->js[k].arrived || !s->js[k].ncurve || strcmp(h->model, g->model) != 0)
      continue;
    int n = 0;
    for (int q = 1; q <= h->max_nodes; q++) n += s->js[k].known[q] > 0;
    if (n > best_n || (n == best_n && n > 0 && h->submit >= s->w->jobs[best].submit)) {
      best = k;
      best_n = n;
    }
  }
  if (best < 0) return 0;
  return fit_known(s->js[best].known, s->w->jobs[best].max_nodes, g->max_nodes,
                   s->js[j].borrowed) == 0;
}

/* One policy round at time t over the jobs in the system. */
static int resolve(sim *s, double t, char *err, size_t errlen) {
  gs_csim_result *r = s->r;
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
    s->sizes[a] = s->js[j].granted; /* (the answers' array, free until the policy's) */
    p->submit_time = g->submit;
    p->progress = 1 - s->js[j].rem / g->work;
    if (s->o->commit_work > 0) { /* the manager reads it from the job's last commit */
      double c = last_commit(s, j);
      p->progress = c > 0 ? c / g->work : -1;
    } else if (by_time(s->o)) { /* from its report at every check: none before it
                                 * has trained (-1, as the manager's) */
      if (s->js[j].rem < g->work) s->js[j].reported = 1;
      if (!s->js[j].reported) p->progress = -1;
    }
    p->speed = g->speed;
    p->run_s = s->js[j].run_s;
    int borrowed = 0;
    if (learns(s->o)) { /* only what the manager would know by now */
      p->speed = s->js[j].ncurve ? s->js[j].curve : NULL;
      if (!s->js[j].ncurve && s->o->share_speeds && borrow(s, j)) {
        p->speed = s->js[j].borrowed;
        borrowed = 1;
      }
    }
    p->restarts = s->js[j].restarts;
    p->work = learns(s->o) && !s->js[j].ncurve && !borrowed ? 0 : g->work;
    if (learns(s->o) && s->js[j].restart_n > 0)
      p->restart_s = s->js[j].restart_sum / s->js[j].restart_n;
    else if (learns(s->o) && s->o->restart_prior)
      p->restart_s = -1; /* the pool's prior, below */
    p->owed_s = s->js[j].fair_s - s->js[j].held_s;
  }
  /* A start or grow that waits for nodes is, to the policy, the size it was
   * answered (the manager's rule). */
  gs_cluster_keep_granted(s->pj, s->sizes, n, s->nodes);
  if (learns(s->o) && s->o->restart_prior) {
    /* The manager's prior (its price_restarts) from what it has measured of
     * the jobs it knows, ended ones too. */
    int m = 0;
    for (int j = 0; j < s->w->njobs; j++) {
      const sim_job *k = &s->js[j];
      if (!k->arrived) continue;
      s->prior_r[m] = k->restart_n > 0 ? k->restart_sum / k->restart_n : -1;
      s->prior_su[m++] = k->startup_s;
    }
    gs_cluster_restart_pool pool;
    gs_cluster_restart_pool_fit(s->prior_r, s->prior_su, m, &pool);
    for (int a = 0; a < n; a++)
      if (s->pj[a].restart_s < 0) {
        double p = gs_cluster_restart_prior(&pool, s->js[s->active[a]].startup_s,
                                            s->o->restart_penalty_s);
        s->pj[a].restart_s = p > 0.01 ? p : 0.01; /* (0 is "not measured") */
      }
  }
  gs_cluster_policy_opts po;
  gs_cluster_policy_defaults(&po);
  po.restart_penalty_s = s->o->restart_penalty_s;
  po.time_limit_s = s->o->time_limit_s;
  po.fairness_weight = s->o->fairness_weight;
  po.adjust_weight = s->o->adjust_weight;
  po.fairness_window_s = s->o->fairness_window_s;
  if (s->o->interval_s > 0) po.interval_s = s->o->interval_s;
  /* The users' and accounts' shares and limits, as the manager's rounds
   * (gs_cluster_fairshare_round): the tree's weights for the policy and
   * for the fair shares below. */
  gs_cluster_fairshare fs = {0};
  if (s->owners) {
    for (int a = 0; a < n; a++) {
      s->users[a] = s->w->jobs[s->active[a]].user;
      s->accounts[a] = s->w->jobs[s->active[a]].account;
    }
    gs_cluster_usage use = {.user = s->ouser, .account = s->oacct, .node_s = s->ousage,
                            .n = s->ousage ? s->nowner : 0};
    if (gs_cluster_fairshare_round(s->o->shares, s->pj, n, s->users, s->accounts, &use, &fs,
                                   &po) != 0) {
      set_err(err, errlen, "out of memory for the fair-share tree at t=%.1f s", t);
      return -1;
    }
  }
  gs_cluster_policy_report rep;
  char perr[512];
  if (gs_cluster_allocate(s->o->policy, s->pj, n, s->nodes, &po, s->sizes, &rep, perr,
                          sizeof perr) != 0) {
    set_err(err, errlen, "policy %s at t=%.1f s: %s", s->o->policy, t, perr);
    gs_cluster_fairshare_free(&fs);
    return -1;
  }
  r->rounds++;
  r->jobs_per_round += n; /* a sum until the end */
  r->policy_ms_mean += rep.solve_ms; /* a sum until the end */
  if (rep.solve_ms > r->policy_ms_max) r->policy_ms_max = rep.solve_ms;
  if (isfinite(rep.gap) && rep.gap > r->gap_max) r->gap_max = rep.gap;
  r->fallbacks += rep.fallback;
  r->exact_rounds += rep.exact;
  /* A size outside a job's range would run it at a speed the tables do not
   * have (none below its minimum): an error, not a job that never ends. */
  for (int a = 0; a < n; a++) {
    const gs_cluster_job *p = &s->pj[a];
    if (s->sizes[a] != 0 && (s->sizes[a] < p->min_nodes || s->sizes[a] > p->max_nodes)) {
      set_err(err, errlen, "policy %s at t=%.1f s gave job %s %d nodes, outside its %d to %d",
              s->o->policy, t, s->w->jobs[p->id].name, s->sizes[a], p->min_nodes,
              p->max_nodes);
      gs_cluster_fairshare_free(&fs);
      return -1;
    }
  }
  if (s->o->round_log != NULL) {
    for (int a = 0; a < n; a++) s->names[a] = s->w->jobs[s->pj[a].id].name;
    if (gs_cluster_round_log(s->o->round_log, t, s->o->policy, s->nodes, s->pj, s->names, n,
                             s->sizes, &rep, NULL) != 0) {
      set_err(err, errlen, "cannot write the round log at t=%.1f s (%s)", t, strerror(errno));
      gs_cluster_fairshare_free(&fs);
      return -1;
    }
  }
  apply_sizes(s, t);
  /* The fairness of the partitions as they are (a grow that waits for
   * nodes is not in them yet). */
  for (int a = 0; a < n; a++) s->sizes[a] = s->js[s->active[a]].size;
  gs_cluster_fair_share(s->pj, n, s->nodes, &po, s->share);
  s->fairness_now = gs_cluster_fairness_loss(s->sizes, s->share, n, s->nodes);
  for (int a = 0; a < n; a++) s->js[s->active[a]].fair = s->share[a];
  gs_cluster_fairshare_free(&fs);
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

/* A decaying usage moves the shares between events, and a fairness window
 * dorm's targets (what a job is owed grows as it waits): a round at every
 * tick, as the manager's. */
static int time_moves_of(const gs_csim_opts *o) {
  double halflife = o->shares ? o->shares->usage_halflife_s : 0;
  return strcmp(o->policy, "static") != 0 &&
         (halflife > 0 || (o->fairness_window_s > 0 && strcmp(o->policy, "dorm") == 0));
}

/* Whether a periodic round can ever change an answer: for a policy that
 * reads progress, once a speed curve can be learned, or as time moves the
 * shares. Otherwise the ticks are not events (a static job of 1e12 samples
 * took 19 s of ticks). */
static int ticks_are_events(const gs_csim_opts *o) {
  return gs_cluster_policy_reads_progress(o->policy) || learns(o) || time_moves_of(o);
}

/* The bound on periodic rounds where they are events (opts.max_periodic). */
static long max_periodic_of(const gs_csim_opts *o) {
  return o->max_periodic > 0 ? o->max_periodic : CSIM_MAX_PERIODIC;
}

int gs_csim_check(const gs_csim_workload *w, const gs_csim_opts *o, char *err, size_t errlen) {
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
  if (!(o->commit_work >= 0) || !(o->commit_every_s >= 0) || !(o->check_every_s >= 0) ||
      !(o->discover_every_s >= 0) || !(o->launch_delay_s >= 0) || !(o->learn_work >= 0) ||
      !(o->learn_s >= 0)) {
    set_err(err, errlen,
            "commit every %g work units or %g s, checks every %g s, discovery every %g s, "
            "launch delay %g s, curves learned after %g work units or %g s; expected >= 0",
            o->commit_work, o->commit_every_s, o->check_every_s, o->discover_every_s,
            o->launch_delay_s, o->learn_work, o->learn_s);
    return -1;
  }
  if (o->commit_work > 0 && o->commit_every_s > 0) {
    set_err(err, errlen, "commits every %g work units and every %g s: the manager commits by "
            "one or the other; give one", o->commit_work, o->commit_every_s);
    return -1;
  }
  /* No job finishes sooner than at its best speed in the table, from its
   * submission on: where that alone means more periodic rounds than the
   * bound, said before the replay rather than after seconds of rounds. */
  double interval = o->interval_s, t0 = INFINITY, end_lb = -INFINITY;
  long max_periodic = max_periodic_of(o);
  if (ticks_are_events(o) && interval > 0) {
    int slow = 0;
    for (int j = 0; j < nj; j++) {
      const gs_csim_job *g = &w->jobs[j];
      double best = 0;
      for (int n = g->min_nodes; n <= g->max_nodes; n++)
        if (g->speed[n] > best) best = g->speed[n];
      double e = g->submit + g->work / best;
      if (g->submit < t0) t0 = g->submit;
      if (e > end_lb) {
        end_lb = e;
        slow = j;
      }
    }
    if ((end_lb - t0) / interval > (double)max_periodic) {
      set_err(err, errlen, "policy %s re-solves every --interval %g s: job '%s' (line %d) "
              "alone at its best speed ends at t=%.4g s, more than %ld periodic rounds; "
              "raise --interval (the replay of this trace would not end in reasonable "
              "time), or check the jobs' samples", o->policy, interval, w->jobs[slow].name,
              w->jobs[slow].line, end_lb - t0, max_periodic);
      return -1;
    }
  }
  return 0;
}

int gs_csim_run(const gs_csim_workload *w, const gs_csim_opts *o, gs_csim_result *r, char *err,
                size_t errlen) {
  memset(r, 0, sizeof *r);
  if (gs_csim_check(w, o, err, errlen) != 0) return -1;
  int nj = w->njobs;
  double t_start = wall_s();
  int rc = -1;
  sim s = {.w = w, .o = o, .r = r, .nodes = o->nodes, .trace = o->trace};
  s.js = calloc((size_t)nj, sizeof *s.js);
  s.active = malloc((size_t)nj * sizeof *s.active);
  s.rank = malloc((size_t)nj * sizeof *s.rank);
  s.node_job = malloc((size_t)o->nodes * sizeof *s.node_job);
  s.node_run = malloc((size_t)o->nodes * sizeof *s.node_run);
  s.part = malloc((size_t)o->nodes);
  s.in_launch = malloc((size_t)o->nodes);
  s.node_since = calloc((size_t)o->nodes, sizeof *s.node_since);
  s.pj = malloc((size_t)nj * sizeof *s.pj);
  s.sizes = malloc((size_t)nj * sizeof *s.sizes);
  s.order = malloc((size_t)nj * sizeof *s.order);
  s.share = malloc((size_t)nj * sizeof *s.share);
  s.prior_r = malloc((size_t)nj * sizeof *s.prior_r);
  s.prior_su = malloc((size_t)nj * sizeof *s.prior_su);
  s.users = malloc((size_t)nj * sizeof *s.users);
  s.accounts = malloc((size_t)nj * sizeof *s.accounts);
  s.names = malloc((size_t)nj * sizeof *s.names);
  int *order = malloc((size_t)nj * sizeof *order);
  double *jct = malloc((size_t)nj * sizeof *jct);
  if (!s.js || !s.active || !s.rank || !s.node_job || !s.node_run || !s.part || !s.in_launch ||
      !s.node_since || !s.pj ||
      !s.sizes || !s.order || !s.share || !s.prior_r || !s.prior_su || !s.users || !s.accounts || !s.names || !order || !jct) {
    set_err(err, errlen, "out of memory simulating %d jobs on %d nodes", nj, o->nodes);
    goto done;
  }
  for (int k = 0; k < o->nodes; k++) s.node_job[k] = s.node_run[k] = -1;
  s.owners = o->shares != NULL;
  for (int j = 0; j < nj; j++) {
    if (w->jobs[j].user[0] || w->jobs[j].account[0]) s.owners = 1;
    if (o->job_node_s) o->job_node_s[j] = 0;
    if (o->job_fair_node_s) o->job_fair_node_s[j] = 0;
  }
  double halflife = o->shares ? o->shares->usage_halflife_s : 0;
  if (halflife > 0) { /* the owners, as the workload first names them */
    s.owner = malloc((size_t)nj * sizeof *s.owner);
    s.ouser = malloc((size_t)nj * sizeof *s.ouser);
    s.oacct = malloc((size_t)nj * sizeof *s.oacct);
    s.ousage = calloc((size_t)nj, sizeof *s.ousage);
    s.onodes = calloc((size_t)nj, sizeof *s.onodes);
    if (!s.owner || !s.ouser || !s.oacct || !s.ousage || !s.onodes) {
      set_err(err, errlen, "out of memory simulating %d jobs on %d nodes", nj, o->nodes);
      goto done;
    }
    for (int j = 0; j < nj; j++) {
      const char *u = w->jobs[j].user[0] ? w->jobs[j].user : "-", *a = w->jobs[j].account;
      int k = 0;
      while (k < s.nowner && (strcmp(s.ouser[k], u) != 0 || strcmp(s.oacct[k], a) != 0)) k++;
      if (k == s.nowner) {
        s.ouser[k] = u;
        s.oacct[k] = a;
        s.nowner++;
      }
      s.owner[j] = k;
    }
  }
  for (int j = 0; j < nj && learns(o); j++) {
    s.js[j].known = calloc((size_t)w->jobs[j].max_nodes + 1, sizeof *s.js[j].known);
    s.js[j].curve = calloc((size_t)w->jobs[j].max_nodes + 1, sizeof *s.js[j].curve);
    s.js[j].borrowed = calloc((size_t)w->jobs[j].max_nodes + 1, sizeof *s.js[j].borrowed);
    if (!s.js[j].known || !s.js[j].curve || !s.js[j].borrowed) {
      set_err(err, errlen, "out of memory simulating %d jobs on %d nodes", nj, o->nodes);
      goto done;
    }
  }
  for (int j = 0; j < nj; j++) {
    order[j] = j;
    s.js[j].rem = w->jobs[j].work;
    s.js[j].start = s.js[j].end = -1;
    s.js[j].startup_s = -1;
    s.js[j].end_at = -1;
  }
  sort_jobs = w->jobs;
  qsort(order, (size_t)nj, sizeof *order, cmp_submit);
  for (int q = 0; q < nj; q++) s.rank[order[q]] = q;

  double t = w->jobs[order[0]].submit, t0 = t;
  int next_arrival = 0, finished = 0;
  double interval = o->interval_s;
  double next_tick = interval > 0 ? t + interval : INFINITY;
  int ticks_matter = ticks_are_events(o), time_moves = time_moves_of(o);
  long periodic = 0, max_periodic = max_periodic_of(o);
  int loss_pending = o->loss_nodes > 0;
  int protocol = protocol_of(o); /* the manager's resizes at commits or checks */
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
      int trained = js->run > 0 && js->rem <= eps * w->jobs[j].work;
      if (trained && !in_end(js) && end_cost(&s, j) > 0) /* its last step: its end begins */
        js->end_at = t + end_cost(&s, j);
      if (trained && (!in_end(js) || t >= js->end_at - eps)) {
        js->done = 1;
        js->end = t;
        launch_end(&s, j, t);
        for (int k = 0; k < s.nodes && js->size > 0; k++)
          if (s.node_job[k] == j) {
            node_change(&s, k, -1, -1, t);
            js->size--;
          }
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
      /* The nodes leave their partitions; a launch that ran on one fails
       * and its job resumes (the round relaunches it) from its last commit. */
      loss_pending = 0;
      int nn = o->nodes - o->loss_nodes;
      for (int k = nn; k < o->nodes; k++) {
        int j = s.node_job[k], l = s.node_run[k];
        if (l >= 0 && s.js[l].run > 0) {
          back_to_commit(&s, l);
          launch_end(&s, l, t);
        }
        if (j >= 0) s.js[j].size--;
        node_change(&s, k, -1, -1, t);
      }
      s.nodes = nn;
      changed = 1;
    }
    /* The manager's protocol: a job asked to stop stops at its commit and
     * is relaunched on its partition (a round follows, as the manager's
     * when a launch matches its partition again); a supervisor that
     * discovers a partition other than its launch asks its job to stop. */
    for (int a = 0; protocol && a < s.nactive; a++) {
      int j = s.active[a];
      sim_job *js = &s.js[j];
      int fits = js->size >= w->jobs[j].min_nodes;
      if (js->pending && js->launch_t <= t + eps) {
        if (fits) launch(&s, j, t);
        js->pending = 0; /* (a node lost left it short: a round starts it again) */
      } else if (js->run > 0 && js->asked && !in_end(js) &&
                 (by_time(o) ? t >= js->stop_t - eps
                             : w->jobs[j].work - js->rem >= js->stop_at - eps * w->jobs[j].work)) {
        /* The supervisor relaunches it itself: of a start-up it skips the
         * manager's part, launch_delay_s. By time, it stopped at a check
         * and committed there. */
        if (by_time(o)) js->committed = w->jobs[j].work - js->rem;
        js->since = t - o->launch_delay_s;
        if (fits) relaunch(&s, j, t, js->ask_t);
        else launch_end(&s, j, t); /* (a node lost left it short: it waits) */
        changed = 1;
      } else if (js->run > 0 && !js->asked && js->moved > 0 && !in_end(js) &&
                 discovery_at(&s, js, t) <= t + eps) {
        js->asked = 1;
        js->ask_t = t;
        if (by_time(o))
          js->stop_t = next_check(&s, j, t);
        else
          js->stop_at = next_commit(&s, j);
      }
    }
    /* A periodic round: for a policy that reads progress, or after a curve
     * was learned; otherwise a round would repeat the last answer
     * (gs_cluster_policy_reads_progress). */
    if (t >= next_tick - eps) {
      if (gs_cluster_policy_reads_progress(o->policy) || s.learned || time_moves) changed = 1;
      /* A tick every interval for as long as the jobs run: a job of 1e15
       * samples would take the replay years. Bounded, said. */
      if (ticks_matter) {
        if (++periodic > max_periodic && finished < nj) {
          set_err(err, errlen, "policy %s re-solves every --interval %g s: more than %.0f "
                  "periodic rounds by t=%.4g s, with %d of %d jobs not done; raise --interval "
                  "(the replay of this trace would not end in reasonable time), or check the "
                  "jobs' samples", o->policy, interval, (double)max_periodic, t - t0,
                  nj - finished, nj);
          goto done;
        }
      }
      next_tick += (floor((t + eps - next_tick) / interval) + 1.0) * interval;
    }
    if (changed) s.learned = 0;
    if (finished == nj) break;
    if (changed && s.nactive > 0 && resolve(&s, t, err, errlen) != 0) goto done;
    if (changed && s.nactive == 0) s.fairness_now = 0;
    int busy = 0, running = 0;
    for (int a = 0; a < s.nactive; a++) {
      int j = s.active[a];
      if (s.js[j].run > 0 || s.js[j].pending) running++;
      if (s.js[j].run > 0 && s.js[j].restart_end <= t + eps) busy += s.js[j].run;
    }
    int used = s.held;
    if (s.trace)
      fprintf(s.trace, "util,%.3f,%d,%d,%d\n", t, used, busy, s.nactive);

    /* The next event. */
    double tn = next_arrival < nj ? w->jobs[order[next_arrival]].submit : INFINITY;
    for (int a = 0; a < s.nactive; a++) {
      int j = s.active[a];
      const sim_job *js = &s.js[j];
      if (js->pending && js->launch_t < tn) tn = js->launch_t > t ? js->launch_t : t;
      if (js->run <= 0) continue;
      if (in_end(js)) { /* its exit is the event */
        if (js->end_at < tn) tn = js->end_at > t ? js->end_at : t;
        continue;
      }
      /* (one in its start-up computes from restart_end, an event of its own) */
      double sp = speed_now(&s, j, busy);
      if (!(sp > 0)) { /* a launch below the job's minimum: the simulator's defect */
        set_err(err, errlen, "internal error: job '%s' runs on %d nodes at no speed at "
                "t=%.4g s (its range %d-%d)", w->jobs[j].name, js->run, t - t0,
                w->jobs[j].min_nodes, w->jobs[j].max_nodes);
        goto done;
      }
      double from = js->restart_end > t ? js->restart_end : t;
      double done_at = from + js->rem / sp;
      if (done_at < tn) tn = done_at;
      if (js->restart_end > t && js->restart_end < tn) tn = js->restart_end; /* busy changes */
      if (protocol && js->asked && by_time(o)) {
        if (js->stop_t < tn) tn = js->stop_t > t ? js->stop_t : t;
      } else if (protocol && js->asked && isfinite(js->stop_at)) {
        double stop = from + (js->stop_at - (w->jobs[j].work - js->rem)) / sp;
        if (stop < tn) tn = stop;
      } else if (protocol && !js->asked && js->moved > 0) {
        double d = discovery_at(&s, js, t);
        if (d < tn) tn = d;
      }
    }
    if (ticks_matter && s.nactive > 0 && next_tick < tn) tn = next_tick;
    if (loss_pending && o->loss_time_s < tn) tn = o->loss_time_s > t ? o->loss_time_s : t;
    /* Nothing runs and nothing will arrive: the jobs left can never run
     * (the policies are deterministic, so another round changes nothing). */
    if (running == 0 && next_arrival == nj && !loss_pending) break;
    if (!isfinite(tn)) break;
    if (tn < t) tn = t;
    /* Advance to tn. */
    double dt = tn - t;
    if (halflife > 0 && dt > 0) { /* the owners' usage, decayed to tn */
      for (int k = 0; k < s.nowner; k++) s.onodes[k] = 0;
      for (int a = 0; a < s.nactive; a++) s.onodes[s.owner[s.active[a]]] += s.js[s.active[a]].size;
      for (int k = 0; k < s.nowner; k++)
        s.ousage[k] = gs_cluster_usage_decay(s.ousage[k], s.onodes[k], dt, halflife);
    }
    for (int a = 0; a < s.nactive; a++) {
      int j = s.active[a];
      sim_job *js = &s.js[j];
      js->contention += s.nactive * dt;
      js->held_s += js->size * dt;
      js->fair_s += js->fair * dt;
      if (js->run > 0 || js->pending) js->run_s += dt;
      if (js->run <= 0) continue;
      if (in_end(js)) { /* evaluating: busy, no work */
        busy_ns += js->run * dt;
        continue;
      }
      double from = js->restart_end > t ? js->restart_end : t;
      if (from < tn) {
        double sp = speed_now(&s, j, busy), done0 = w->jobs[j].work - js->rem;
        js->rem -= sp * (tn - from);
        if (js->rem < 0) js->rem = 0;
        busy_ns += js->run * (tn - from);
        js->launch_done += sp * (tn - from);
        js->launch_train_s += tn - from;
        if (by_time(o) && js->commit_t <= tn + eps) { /* its last commit by time */
          double c = o->commit_every_s;
          double last = js->commit_t + floor((tn - js->commit_t) / c + eps) * c;
          double at = done0 + sp * (last - from);
          js->committed = at < w->jobs[j].work ? at : w->jobs[j].work;
          js->commit_t = last + c;
        }
        int measured = learns(o) && launch_measured(&s, j);
        if (measured && js->known[js->run] == 0) learn(&s, j, js->run, sp);
        if (measured && js->startup_pending) {
          js->startup_s = js->startup_cost > 0 ? js->startup_cost : 0;
          js->startup_pending = 0;
          s.learned = 1;
        }
        if (measured && js->cost_pending) {
          js->restart_sum += js->launch_cost;
          js->restart_n++;
          js->cost_pending = 0;
          s.learned = 1;
        }
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
    if (o->job_jct_s) o->job_jct_s[j] = js->done ? js->end - w->jobs[j].submit : -1;
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
  /* The jobs that never finished (stranded by a node loss: above the pool
   * left), named so that their absence from the JCTs is seen. */
  size_t uw = 0;
  int named = 0;
  r->unfinished[0] = '\0';
  for (int j = 0; j < nj; j++) {
    if (s.js[j].done) continue;
    const char *nm = w->jobs[j].name[0] ? w->jobs[j].name : "?";
    size_t room = sizeof r->unfinished - uw;
    if (room > strlen(nm) + 20) {
      int k = snprintf(r->unfinished + uw, room, "%s%s", uw ? ", " : "", nm);
      if (k > 0) uw += (size_t)k;
      named++;
    } else {
      snprintf(r->unfinished + uw, room, " and %d more", nj - nd - named);
      break;
    }
  }
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
  for (int k = 0; k < s.nodes; k++) node_change(&s, k, -1, -1, t);
  r->sim_s = wall_s() - t_start;
  rc = 0;
done:
  for (int j = 0; s.js && j < nj; j++) { /* the node-seconds counted so far */
    if (o->job_node_s) o->job_node_s[j] = s.js[j].held_s;
    if (o->job_fair_node_s) o->job_fair_node_s[j] = s.js[j].fair_s;
  }
  for (int j = 0; s.js && j < nj; j++) {
    free(s.js[j].known);
    free(s.js[j].curve);
    free(s.js[j].borrowed);
  }
  free(s.js);
  free(s.active);
  free(s.rank);
  free(s.node_job);
  free(s.node_run);
  free(s.part);
  free(s.in_launch);
  free(s.node_since);
  free(s.pj);
  free(s.sizes);
  free(s.order);
  free(s.share);
  free(s.prior_r);
  free(s.prior_su);
  free(s.users);
  free(s.accounts);
  free(s.names);
  free(s.owner);
  free(s.ouser);
  free(s.oacct);
  free(s.ousage);
  free(s.onodes);
  free(order);
  free(jct);
  return rc;
}
