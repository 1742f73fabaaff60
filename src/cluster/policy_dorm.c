/*
 * dorm: Dorm's utilisation-fairness optimiser (Sun, Zhang, Li et al.,
 * "Towards Distributed Machine Learning in Shared Clusters: A
 * Dynamically-Partitioned Approach", IEEE SMARTCOMP 2017, arXiv 1704.06738,
 * Sec. IV), for a pool of whole nodes (one resource type, so a job's
 * dominant share is its share of the nodes).
 *
 * For jobs i = 1..n with sizes x_i in {0} or [min_i, max_i] (integers), fair
 * shares f_i (weighted max-min, gs_cluster_fair_share; with a fairness
 * window W, f_i + owed_i / W, gs_cluster_fair_target: the share now plus
 * the node-seconds of share the job was owed and not given, paid back over
 * W) and current sizes c_i,
 * the MILP maximises
 *
 *     U - a * F - b * C
 *     U = sum_i x_i / N                       utilisation (Dorm's Eq. 1 with
 *                                             one resource)
 *     F = sum_i |x_i - f_i| / N               fairness loss: the jobs' total
 *                                             deviation from their fair shares
 *                                             (Dorm's Eq. 2, sum |s_i - s_i*|)
 *     C = sum_{i running, x_i != c_i}         adjustments: running jobs whose
 *           (b + k_i max(c_i, x_i))           partition changes (each is a
 *                                             checkpoint and a relaunch)
 *     k_i = P / (N H_i)                       the restart's price per node
 *
 * A waiting job whose minimum fits in its fair share, with the running jobs
 * shrunk toward theirs, is owed its minimum (gs_cluster_dorm_owed): x_i >=
 * min_i, whatever the restarts cost (a large penalty in the objective, a
 * bound on x_i in the MILP): a job below its share does not wait for jobs
 * above theirs to end.
 * subject to sum_i x_i <= N (and sum_{i of user u} x_i <= L_u for each
 * user limit, opts.user_max_nodes, and the same for each account's,
 * opts.account_max_nodes, over its sub-accounts' jobs too), where a = fairness_weight and b =
 * adjust_weight. Dorm bounds the adjustment overhead with a constraint and
 * trades utilisation against fairness with weights; here both costs are in
 * the objective, so that one solve both trades them and stays feasible.
 * Beyond Dorm, a resize is priced by what it costs: the job's larger
 * partition idles for the restart, P = restart_penalty_s seconds, and U is
 * a utilisation over the horizon H_i, the job's remaining time at its size
 * (when not known, as long as it has run so far, at least interval_s:
 * gs_cluster_unknown_remaining_s), so P max(c_i, x_i) node-seconds lost are
 * k_i max(c_i, x_i) of U (gs_cluster_dorm_adjust_cost). A job near its end
 * is left alone; a long one is resized when the utilisation and fairness
 * it gains outweigh its restart. With P = 0 the objective is Dorm's.
 * As jobs run on at their sizes with nothing else changed, H_i only falls
 * and k_i only rises. When the last round's answer was the current sizes c
 * (nothing to move), every other allocation's objective can only fall
 * (its adjustment costs rise) while c's has no cost, so c stays optimal:
 * a round on time alone is not needed (gs_cluster_policy_reads_progress).
 * A resize changes c and is a round of its own.
 * Linearisation: |x_i - f_i| <= d_i by two rows (and a chord cut, below); [x_i != c_i] <= y_i
 * (binary) by |x_i - c_i| <= M y_i, max(c_i, x_i) = c_i y_i + g_i with
 * g_i >= x_i - c_i, g_i >= 0; x_i in {0} or [min_i, max_i] by a binary
 * r_i with min_i r_i <= x_i <= max_i r_i (only where min_i > 1).
 *
 * GLPK's branch and cut (glp_intopt) solves it within time_limit_s; the
 * report carries the relative MIP gap, 0 when optimality is proven. With
 * whole nodes of one kind the objective is a sum of one term per job under
 * one capacity row, so a dynamic programme over (job, nodes used) finds the
 * optimum: over every size in O(jobs * nodes * sizes) where that is small,
 * else over each job's breakpoints and one free job in O(jobs * nodes * 10)
 * (breakpoint_programme). It is offered to GLPK as the first incumbent
 * (dorm_start 0, report.exact), and GLPK's part is the bound, and the gap,
 * around it; a greedy allocation (the current sizes, then coordinate ascent:
 * each job's best size given the others') stands in where the programme
 * cannot run (over 2e7 jobs * nodes, or no memory). The MILP is the general
 * form: per-server placement, several resources or a bound on the number of
 * adjustments (Dorm's own constraints) break the separability and leave the
 * MILP. When GLPK returns no integer solution in time, the start is used
 * (report.fallback).
 */
#include "policy.h"

#include <float.h>
#include <glpk.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct dorm_model {
  const gs_cluster_job *jobs;
  int n, nodes;
  const gs_cluster_policy_opts *o;
  const double *share;
  int *col_x, *col_r, *col_d, *col_y, *col_g; /* GLPK column of each job's variable; 0 = none */
  int ncols;
  const int *start;  /* the greedy allocation (the first incumbent) */
  int *held;         /* scratch: the nodes each limit's jobs hold (gs_cluster_limit_slots) */
  const unsigned char *binds; /* per limit slot: 1 when it is below its jobs' largest sizes */
  int limits;        /* 1 when some limit binds */
  const unsigned char *owed; /* gs_cluster_dorm_owed: at least its minimum */
  double gap;        /* last gap GLPK reported (DBL_MAX before an incumbent) */
  int heur_given;
} dorm_model;

/* A job's part of the objective at size x. */
static double job_gain(const dorm_model *m, int i, int x) {
  const gs_cluster_job *j = &m->jobs[i];
  if (x == 0 && m->owed != NULL && m->owed[i]) return -GS_CLUSTER_DORM_OWED_PENALTY;
  return (x - m->o->fairness_weight * fabs(x - m->share[i])) / m->nodes -
         gs_cluster_dorm_adjust_cost(j, x, m->nodes, m->o);
}

static int job_cap(const dorm_model *m, int i) {
  const gs_cluster_job *j = &m->jobs[i];
  int cap = j->max_nodes < m->nodes ? j->max_nodes : m->nodes, lim = gs_cluster_job_limit(j, m->o);
  if (cap > lim) cap = lim;
  return j->min_nodes > cap ? 0 : cap;
}

/* The best size of job i with at most `room` nodes: the objective is
 * piecewise linear in x on [min, max], so the best is at 0, a bound, a
 * neighbour of the fair share or the current size. */
static int best_size(const dorm_model *m, int i, int room) {
  const gs_cluster_job *j = &m->jobs[i];
  int cap = job_cap(m, i);
  if (cap > room) cap = room;
  int best = 0;
  double best_g = job_gain(m, i, 0);
  if (cap < j->min_nodes) return 0;
  int cand[6] = {j->min_nodes, cap, (int)floor(m->share[i]), (int)ceil(m->share[i]),
                 j->cur_nodes, 0};
  for (int k = 0; k < 5; k++) {
    int x = cand[k];
    if (x < j->min_nodes || x > cap) continue;
    double g = job_gain(m, i, x);
    if (g > best_g + 1e-12) {
      best_g = g;
      best = x;
    }
  }
  return best;
}

/* The greedy start: running jobs keep their sizes while they fit, then
 * coordinate ascent (each job's best size given the others') until no job
 * improves. */
/* Coordinate ascent from x: each job's best size given the others', until
 * no job improves. */
static void polish(const dorm_model *m, int *x) {
  int free_nodes = m->nodes;
  memset(m->held, 0, (size_t)gs_cluster_limit_slots(m->o) * sizeof *m->held);
  for (int i = 0; i < m->n; i++) {
    free_nodes -= x[i];
    gs_cluster_limit_take(&m->jobs[i], m->o, m->held, x[i]);
  }
  for (int pass = 0; pass < 50; pass++) {
    int changed = 0;
    for (int i = 0; i < m->n; i++) {
      int room = free_nodes + x[i], user = gs_cluster_limit_room(&m->jobs[i], m->o, m->held);
      if (user != INT_MAX && user + x[i] < room) room = user + x[i];
      int b = best_size(m, i, room);
      if (b != x[i] && job_gain(m, i, b) > job_gain(m, i, x[i]) + 1e-12) {
        free_nodes += x[i] - b;
        gs_cluster_limit_take(&m->jobs[i], m->o, m->held, b - x[i]);
        x[i] = b;
        changed = 1;
      }
    }
    if (!changed) break;
  }
}

static void greedy(const dorm_model *m, int *x) {
  int free_nodes = m->nodes;
  memset(m->held, 0, (size_t)gs_cluster_limit_slots(m->o) * sizeof *m->held);
  /* The jobs owed their minimum first (gs_cluster_dorm_owed: they fit). */
  for (int i = 0; i < m->n; i++) {
    x[i] = 0;
    if (m->owed != NULL && m->owed[i] && m->jobs[i].min_nodes <= free_nodes) {
      x[i] = m->jobs[i].min_nodes;
      free_nodes -= x[i];
      gs_cluster_limit_take(&m->jobs[i], m->o, m->held, x[i]);
    }
  }
  for (int i = 0; i < m->n; i++) {
    int c = m->jobs[i].cur_nodes;
    if (x[i] > 0) continue;
    /* a running job shrunk as far as the owed need, within its range */
    int room = gs_cluster_limit_room(&m->jobs[i], m->o, m->held);
    if (c > free_nodes) c = free_nodes;
    if (c > room) c = room;
    if (c > 0 && c <= job_cap(m, i) && c >= m->jobs[i].min_nodes && c <= free_nodes &&
        c <= gs_cluster_limit_room(&m->jobs[i], m->o, m->held)) {
      x[i] = c;
      free_nodes -= c;
      gs_cluster_limit_take(&m->jobs[i], m->o, m->held, c);
    }
  }
  polish(m, x);
}

/* The optimum by dynamic programming (see the top): best[c] is the best
 * objective of the jobs so far on at most c nodes; choice[k][c] the size of
 * the k-th job there, over every size of every job when jobs * nodes *
 * sizes <= 4e6, else by breakpoint_programme (large pools). Both are exact.
 * Returns 0, or -1 when too large (over 2e7 jobs * nodes) or out of memory. */
static const gs_cluster_job *dp_jobs;
static int cmp_submit(const void *a, const void *b) {
  const gs_cluster_job *x = &dp_jobs[*(const int *)a], *y = &dp_jobs[*(const int *)b];
  if (x->submit_time != y->submit_time) return x->submit_time < y->submit_time ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* Jobs are taken in FIFO order and the sizes read back from the last one,
 * each preferring the smaller size on a tie: among allocations of equal
 * objective, the jobs submitted first get the nodes. */
static int breakpoint_programme(const dorm_model *m, const int *order, int *x);

/* One item of the programme: next[c], the best on at most c nodes with it,
 * is the better of best[c] + g0 (the item at 0) and best[c - s] + g(s) over
 * its sizes s (ascending, size_s[q] with gain size_g[q]); ch[c] the size
 * taken (the smaller on a tie). c = 0..cap. */
static void dp_item(const double *best, double *next, int *ch, int cap, int ns,
                    const int *size_s, const double *size_g, double g0) {
  for (int c = 0; c <= cap; c++) {
    double v = best[c] + g0;
    int arg = 0;
    for (int q = 0; q < ns && size_s[q] <= c; q++) {
      double g = best[c - size_s[q]] + size_g[q];
      if (g > v + 1e-12) {
        v = g;
        arg = size_s[q];
      }
    }
    next[c] = v;
    ch[c] = arg;
  }
}

/* Job i's sizes from its minimum to min(its cap, top) and their gains;
 * returns how many. */
static int job_sizes(const dorm_model *m, int i, int top, int *size_s, double *size_g) {
  int cap = job_cap(m, i), lo = m->jobs[i].min_nodes, ns = 0;
  if (cap > top) cap = top;
  for (int q = lo; q <= cap; q++) {
    size_s[ns] = q;
    size_g[ns++] = job_gain(m, i, q);
  }
  return ns;
}

/* The programme over every size (see dynamic_programme) on a tree of
 * limits. Each job is an item, but the jobs under a limit that binds
 * (m->binds) are one item together: an inner programme over its items, in
 * FIFO order, on at most the limit gives the item's best on each number of
 * nodes, and the one above shares its nodes among its items (in the FIFO
 * order of their first jobs). The root is the pool; its items are the
 * jobs and the binding limits of top-level accounts, and of users outside
 * any; an account's are its jobs, its users' binding limits and its
 * sub-accounts' binding limits (a job's binding limits, innermost first,
 * each the parent of the one before). A user limited across two accounts'
 * limits (or inside one and out) is no tree: -1, and the caller starts
 * from the greedy allocation. */
typedef struct dp_tree {
  const dorm_model *m;
  int N;
  int *cap;          /* each node's nodes: the root's N, a limit's (below its parent's) */
  int *start, *len;  /* node v's items: item[start[v] .. start[v] + len[v]) */
  int *item;         /* a job (>= 0), or -1 - w for the node w */
  int *choice;       /* (N + 1) an item: the size given it on at most c nodes */
  int *size_s;       /* scratch of dp_item */
  double *size_g;
} dp_tree;

/* best[c] (c = 0..cap[v]): the best of node v's items on at most c nodes,
 * recording their choices. Returns 0, or -1 without memory. */
static int tree_solve(const dp_tree *t, int v, double *best) {
  const dorm_model *m = t->m;
  int C = t->cap[v], rc = 0;
  double *next = malloc((size_t)(C + 1) * sizeof *next);
  if (next == NULL) return -1;
  for (int c = 0; c <= C; c++) best[c] = 0;
  for (int k = 0; k < t->len[v] && rc == 0; k++) {
    int it = t->item[t->start[v] + k], ns = 0;
    double g0;
    if (it >= 0) {
      ns = job_sizes(m, it, C, t->size_s, t->size_g);
      g0 = job_gain(m, it, 0);
    } else { /* a limit's items on at most its nodes, then as one item */
      int w = -1 - it;
      double *kid = malloc((size_t)(t->cap[w] + 1) * sizeof *kid);
      if (kid == NULL || tree_solve(t, w, kid) != 0) {
        free(kid);
        rc = -1;
        break;
      }
      for (ns = 0; ns < t->cap[w]; ns++) {
        t->size_s[ns] = ns + 1;
        t->size_g[ns] = kid[ns + 1];
      }
      g0 = kid[0];
      free(kid);
    }
    dp_item(best, next, t->choice + (size_t)(t->start[v] + k) * (t->N + 1), C, ns, t->size_s,
            t->size_g, g0);
    memcpy(best, next, (size_t)(C + 1) * sizeof *best);
  }
  free(next);
  return rc;
}

/* Node v's items' sizes on at most c nodes, back from its last item. */
static void tree_back(const dp_tree *t, int v, int c, int *x) {
  for (int k = t->len[v] - 1; k >= 0; k--) {
    int at = t->start[v] + k, s = t->choice[(size_t)at * (t->N + 1) + c], it = t->item[at];
    c -= s;
    if (it >= 0) x[it] = s;
    else tree_back(t, -1 - it, s, x);
  }
}

static int size_programme(const dorm_model *m, const int *order, int *x) {
  int n = m->n, N = m->nodes, ns = gs_cluster_limit_slots(m->o), rc = -1;
  if (ns < 0 || ns > INT_MAX - 1) return -1;
  int nn = 1 + ns; /* the root, then one node a limit slot (used where it binds) */
  dp_tree t = {.m = m, .N = N};
  int *node_of = malloc((size_t)(ns + 1) * sizeof *node_of); /* slot -> node; 0: none */
  int *parent = malloc((size_t)nn * sizeof *parent);          /* a node's; -1 unknown */
  int *jparent = malloc((size_t)n * sizeof *jparent);
  unsigned char *placed = calloc((size_t)nn, 1);
  t.cap = malloc((size_t)nn * sizeof *t.cap);
  t.start = calloc((size_t)nn, sizeof *t.start);
  t.len = calloc((size_t)nn, sizeof *t.len);
  /* an item a job and a binding limit: a choice row of N + 1 each */
  int nbind = 0;
  for (int g = 0; m->limits && g < ns; g++) nbind += m->binds[g] != 0;
  t.item = malloc((size_t)(n + nbind + 1) * sizeof *t.item);
  t.choice = malloc((size_t)(n + nbind + 1) * (size_t)(N + 1) * sizeof *t.choice);
  t.size_s = malloc((size_t)(N + 1) * sizeof *t.size_s);
  t.size_g = malloc((size_t)(N + 1) * sizeof *t.size_g);
  double *best = malloc((size_t)(N + 1) * sizeof *best);
  if (!node_of || !parent || !jparent || !placed || !t.cap || !t.start || !t.len || !t.item ||
      !t.choice || !t.size_s || !t.size_g || !best)
    goto out;
  /* Each binding limit a node under the root, or a user's under its
   * jobs' account's; a user whose jobs are under two is no tree. */
  for (int v = 0; v < nn; v++) parent[v] = -1, t.cap[v] = N;
  for (int g = 0; g < ns; g++) {
    node_of[g] = m->limits && m->binds[g] ? 1 + g : 0;
    if (node_of[g]) {
      int l = gs_cluster_limit_of_slot(m->o, g);
      t.cap[1 + g] = l < N ? l : N;
    }
  }
  for (int i = 0; i < n; i++) {
    /* Its binding limits, innermost first: each one's parent the next (the
     * last's the root), each one's nodes at most the next's. */
    int sl[GS_CLUSTER_JOB_SLOTS], nsl = gs_cluster_limit_slots_of(&m->jobs[i], m->o, sl);
    int chain[GS_CLUSTER_JOB_SLOTS], depth = 0;
    for (int k = 0; k < nsl; k++)
      if (node_of[sl[k]]) chain[depth++] = node_of[sl[k]];
    for (int d = depth - 1; d >= 0; d--) {
      int v = chain[d], up = d + 1 < depth ? chain[d + 1] : 0;
      if (parent[v] >= 0 && parent[v] != up) { /* limited in two places: no tree */
        rc = -1;
        goto out;
      }
      parent[v] = up;
      if (t.cap[v] > t.cap[up]) t.cap[v] = t.cap[up];
    }
    jparent[i] = depth > 0 ? chain[0] : 0;
  }
  /* The items of each node in the FIFO order of their first jobs. */
  for (int k = 0; k < n; k++) {
    int i = order[k];
    t.len[jparent[i]]++;
    for (int v = jparent[i]; v != 0 && !placed[v]; v = parent[v]) {
      placed[v] = 1;
      t.len[parent[v]]++;
    }
  }
  for (int v = 1; v < nn; v++) t.start[v] = t.start[v - 1] + t.len[v - 1];
  memset(t.len, 0, (size_t)nn * sizeof *t.len);
  memset(placed, 0, (size_t)nn);
  for (int k = 0; k < n; k++) {
    int i = order[k], chain[GS_CLUSTER_JOB_SLOTS], depth = 0;
    for (int v = jparent[i]; v != 0 && !placed[v] && depth < GS_CLUSTER_JOB_SLOTS; v = parent[v])
      chain[depth++] = v;
    for (int d = depth - 1; d >= 0; d--) { /* outermost first */
      int v = chain[d];
      placed[v] = 1;
      t.item[t.start[parent[v]] + t.len[parent[v]]++] = -1 - v;
    }
    t.item[t.start[jparent[i]] + t.len[jparent[i]]++] = i;
  }
  if (tree_solve(&t, 0, best) != 0) goto out;
  tree_back(&t, 0, N, x);
  rc = 0;
out:
  free(node_of);
  free(parent);
  free(jparent);
  free(placed);
  free(t.cap);
  free(t.start);
  free(t.len);
  free(t.item);
  free(t.choice);
  free(t.size_s);
  free(t.size_g);
  free(best);
  return rc;
}

static int dynamic_programme(const dorm_model *m, int *x, int *exact) {
  int n = m->n, N = m->nodes;
  double work = 0;
  for (int i = 0; i < n; i++) work += (double)(N + 1) * (job_cap(m, i) + 1);
  for (int g = 0; m->limits && g < gs_cluster_limit_slots(m->o); g++)
    work += m->binds[g] ? (double)(N + 1) * (N + 1) : 0; /* a limit's item */
  /* The breakpoints' programme does not take limits: where they bind, the
   * programme over every size or none (the greedy start). */
  int breakpoints = !m->limits && (work > 4e6 || m->o->dorm_start == 3);
  *exact = 0;
  if (m->limits && work > 4e6) return -1;
  if (breakpoints && (double)n * (N + 1) > 2e7) return -1; /* memory: two choices a cell */
  int *order = malloc((size_t)n * sizeof *order);
  if (order == NULL) return -1;
  for (int k = 0; k < n; k++) order[k] = k;
  dp_jobs = m->jobs;
  qsort(order, (size_t)n, sizeof *order, cmp_submit);
  int r = breakpoints ? breakpoint_programme(m, order, x) : size_programme(m, order, x);
  free(order);
  *exact = r == 0;
  return r;
}

/* The optimum on large pools, in O(jobs * nodes * 10) (Dorm's objective is
 * a sum of one term per job under one capacity). On [min, max] a job's term
 * is linear between its breakpoints (min, floor(f), ceil(f), its current
 * size, max): if two jobs sat strictly inside such segments, moving nodes
 * from one to the other would change the objective linearly, so one
 * direction does not lower it until one of them reaches a breakpoint. Some
 * optimum therefore has every job at 0 or a breakpoint but at most one, the
 * free one. Two layers of the programme: b0[c], the best of the jobs so far
 * all at breakpoints on at most c nodes; b1[c], the same with one of them
 * free. A free job's best size on a linear segment s in [s1, s2], with term
 * a + b s, is a sliding-window maximum: b0[c - s] + a + b s =
 * a + b c + (b0[u] - b u) for u = c - s in [c - s2, c - s1], whose ends only
 * grow with c (a monotone deque, O(nodes) per segment). Returns 0, or -1
 * when out of memory. */
static int breakpoint_programme(const dorm_model *m, const int *order, int *x) {
  int n = m->n, N = m->nodes;
  size_t cells = (size_t)n * (size_t)(N + 1);
  double *b0 = malloc((size_t)(N + 1) * sizeof *b0), *b1 = malloc((size_t)(N + 1) * sizeof *b1);
  double *n0 = malloc((size_t)(N + 1) * sizeof *n0), *n1 = malloc((size_t)(N + 1) * sizeof *n1);
  int *ch0 = malloc(cells * sizeof *ch0), *ch1 = malloc(cells * sizeof *ch1);
  unsigned char *from0 = malloc(cells);
  int *dq = malloc((size_t)(N + 1) * sizeof *dq);
  int rc = -1;
  if (!b0 || !b1 || !n0 || !n1 || !ch0 || !ch1 || !from0 || !dq) goto out;
  for (int c = 0; c <= N; c++) {
    b0[c] = 0;
    b1[c] = -INFINITY;
  }
  for (int k = 0; k < n; k++) {
    int i = order[k];
    const gs_cluster_job *j = &m->jobs[i];
    int cap = job_cap(m, i), lo = j->min_nodes;
    int bp[5], nb = 0;
    double bg[5];
    if (cap >= lo) {
      int cand[5] = {lo, (int)floor(m->share[i]), (int)ceil(m->share[i]), j->cur_nodes, cap};
      for (int q = 0; q < 5; q++) {
        int v = cand[q], seen = v < lo || v > cap;
        for (int r = 0; r < nb && !seen; r++) seen = bp[r] == v;
        if (!seen) bp[nb++] = v;
      }
      for (int a = 1; a < nb; a++)
        for (int b = a; b > 0 && bp[b - 1] > bp[b]; b--) {
          int t = bp[b];
          bp[b] = bp[b - 1];
          bp[b - 1] = t;
        }
      for (int q = 0; q < nb; q++) bg[q] = job_gain(m, i, bp[q]);
    }
    double g0 = job_gain(m, i, 0);
    int *c0 = ch0 + (size_t)k * (N + 1), *c1 = ch1 + (size_t)k * (N + 1);
    unsigned char *f0 = from0 + (size_t)k * (N + 1);
    for (int c = 0; c <= N; c++) {
      double v0 = b0[c] + g0, v1 = b1[c] + g0;
      int a0 = 0, a1 = 0;
      for (int q = 0; q < nb && bp[q] <= c; q++) {
        if (b0[c - bp[q]] + bg[q] > v0 + 1e-12) {
          v0 = b0[c - bp[q]] + bg[q];
          a0 = bp[q];
        }
        if (b1[c - bp[q]] + bg[q] > v1 + 1e-12) {
          v1 = b1[c - bp[q]] + bg[q];
          a1 = bp[q];
        }
      }
      n0[c] = v0;
      c0[c] = a0;
      n1[c] = v1;
      c1[c] = a1;
      f0[c] = 0;
    }
    /* This job free: each open segment between consecutive breakpoints. */
    for (int q = 0; q + 1 < nb; q++) {
      int s1 = bp[q] + 1, s2 = bp[q + 1] - 1;
      if (s1 > s2 || s1 > N) continue;
      double mid = 0.5 * (s1 + s2), sign = mid > m->share[i] ? 1 : -1;
      double beta = (1 - m->o->fairness_weight * sign) / N;
      double alpha = m->o->fairness_weight * sign * m->share[i] / N;
      if (j->cur_nodes > 0) { /* a resize (c is a breakpoint): its restart on max(c, s) */
        double k = gs_cluster_dorm_restart_price(j, N, m->o);
        alpha -= m->o->adjust_weight;
        if (mid > j->cur_nodes) beta -= k;
        else alpha -= k * j->cur_nodes;
      }
      int head = 0, tail = 0;
      for (int c = s1; c <= N; c++) {
        int u = c - s1; /* the window's new right end */
        double hu = b0[u] - beta * u;
        while (tail > head && b0[dq[tail - 1]] - beta * dq[tail - 1] <= hu) tail--;
        dq[tail++] = u;
        while (dq[head] < c - s2) head++;
        int ub = dq[head];
        double v = alpha + beta * c + (b0[ub] - beta * ub);
        if (v > n1[c] + 1e-12) {
          n1[c] = v;
          c1[c] = c - ub;
          f0[c] = 1;
        }
      }
    }
    memcpy(b0, n0, (size_t)(N + 1) * sizeof *b0);
    memcpy(b1, n1, (size_t)(N + 1) * sizeof *b1);
  }
  int layer = b1[N] > b0[N] + 1e-12, c = N;
  for (int k = n - 1; k >= 0; k--) {
    size_t at = (size_t)k * (N + 1) + (size_t)c;
    int sz = layer ? ch1[at] : ch0[at];
    if (layer && from0[at]) layer = 0;
    x[order[k]] = sz;
    c -= sz;
  }
  rc = 0;
out:
  free(b0);
  free(b1);
  free(n0);
  free(n1);
  free(ch0);
  free(ch1);
  free(from0);
  free(dq);
  return rc;
}

/* The column values of allocation x (1-based, as GLPK wants them). */
static void solution_vector(const dorm_model *m, const int *x, double *v) {
  for (int i = 0; i < m->n; i++) {
    v[m->col_x[i]] = x[i];
    if (m->col_r[i]) v[m->col_r[i]] = x[i] > 0;
    v[m->col_d[i]] = fabs(x[i] - m->share[i]);
    if (m->col_y[i]) v[m->col_y[i]] = x[i] != m->jobs[i].cur_nodes;
    if (m->col_g[i]) v[m->col_g[i]] = x[i] > m->jobs[i].cur_nodes ? x[i] - m->jobs[i].cur_nodes : 0;
  }
}

static void dorm_callback(glp_tree *tree, void *info) {
  dorm_model *m = info;
  switch (glp_ios_reason(tree)) {
  case GLP_IHEUR:
    if (!m->heur_given && m->start != NULL) {
      double *v = malloc((size_t)(m->ncols + 1) * sizeof *v);
      if (v != NULL) {
        solution_vector(m, m->start, v);
        glp_ios_heur_sol(tree, v);
        free(v);
      }
      m->heur_given = 1;
    }
    break;
  case GLP_IBINGO:
  case GLP_ISELECT:
  case GLP_IBRANCH: {
    double g = glp_ios_mip_gap(tree);
    if (g < DBL_MAX) m->gap = g;
    break;
  }
  default:
    break;
  }
}

int gs_cluster_policy_dorm(const gs_cluster_job *jobs, int njobs, int nodes,
                           const gs_cluster_policy_opts *o, int *sizes,
                           gs_cluster_policy_report *rep, char *err, size_t errlen) {
  int rc = -1;
  double t_begin = mono_ms();
  int n = njobs;
  if (njobs <= 0) return 0;
  double *share = malloc((size_t)n * sizeof *share);
  int *cols = calloc((size_t)n * 5, sizeof *cols);
  int *start = malloc((size_t)n * sizeof *start);
  int nu = gs_cluster_limit_slots(o);
  int *held = calloc((size_t)nu + 1, sizeof *held);
  long *want = calloc((size_t)nu + 1, sizeof *want); /* each limit's jobs' largest sizes */
  unsigned char *binds = calloc((size_t)nu + 1, 1);
  unsigned char *owed = malloc((size_t)n);
  int *ia = NULL, *ja = NULL;
  double *ar = NULL;
  glp_prob *P = NULL;
  if (share == NULL || cols == NULL || start == NULL || held == NULL || want == NULL ||
      binds == NULL || owed == NULL)
    goto nomem;
  if (nodes == 0) { /* nothing to share: everyone waits */
    rep->objective = 0;
    rc = 0;
    goto done;
  }
  gs_cluster_fair_share(jobs, n, nodes, o, share);
  for (int i = 0; i < n; i++) share[i] = gs_cluster_fair_target(&jobs[i], share[i], nodes, o);
  dorm_model m = {.jobs = jobs, .n = n, .nodes = nodes, .o = o, .share = share,
                  .col_x = cols, .col_r = cols + n, .col_d = cols + 2 * n,
                  .col_y = cols + 3 * n, .col_g = cols + 4 * n, .start = start,
                  .held = held, .gap = DBL_MAX, .owed = owed};
  gs_cluster_dorm_owed(jobs, n, nodes, o, share, owed);
  /* A limit binds when its jobs' largest sizes exceed it. */
  for (int i = 0; i < n; i++) {
    int sl[GS_CLUSTER_JOB_SLOTS], top = jobs[i].max_nodes < nodes ? jobs[i].max_nodes : nodes;
    int nsl = gs_cluster_limit_slots_of(&jobs[i], o, sl);
    for (int k = 0; k < nsl; k++) want[sl[k]] += top;
  }
  for (int g = 0; g < nu; g++) {
    binds[g] = want[g] > gs_cluster_limit_of_slot(o, g);
    m.limits |= binds[g];
  }
  m.binds = binds;
  int exact = 0;
  if ((o->dorm_start != 0 && o->dorm_start != 3) || dynamic_programme(&m, start, &exact) != 0)
    greedy(&m, start);
  rep->exact = exact;
  if (o->dorm_start == 2) m.start = NULL; /* GLPK alone */

  glp_term_out(GLP_OFF);
  P = glp_create_prob();
  glp_set_obj_dir(P, GLP_MAX);
  /* Columns. */
  for (int i = 0; i < n; i++) {
    const gs_cluster_job *j = &jobs[i];
    int cap = job_cap(&m, i);
    int c = glp_add_cols(P, 1);
    m.col_x[i] = c;
    glp_set_col_kind(P, c, GLP_IV);
    if (cap == 0) glp_set_col_bnds(P, c, GLP_FX, 0, 0);
    else if (owed[i] && j->min_nodes == cap) glp_set_col_bnds(P, c, GLP_FX, cap, cap);
    else glp_set_col_bnds(P, c, GLP_DB, owed[i] ? j->min_nodes : 0, cap);
    glp_set_obj_coef(P, c, 1.0 / nodes);
    if (cap > 0 && j->min_nodes > 1) {
      c = glp_add_cols(P, 1);
      m.col_r[i] = c;
      glp_set_col_kind(P, c, GLP_BV);
      if (owed[i]) glp_set_col_bnds(P, c, GLP_FX, 1, 1);
    }
    c = glp_add_cols(P, 1);
    m.col_d[i] = c;
    glp_set_col_bnds(P, c, GLP_LO, 0, 0);
    glp_set_obj_coef(P, c, -o->fairness_weight / nodes);
    if (j->cur_nodes > 0) { /* the adjustment: y = [x != c], g >= x - c (growth) */
      double k = gs_cluster_dorm_restart_price(j, nodes, o);
      c = glp_add_cols(P, 1);
      m.col_y[i] = c;
      glp_set_col_kind(P, c, GLP_BV);
      glp_set_obj_coef(P, c, -(o->adjust_weight + k * j->cur_nodes));
      if (k > 0) {
        c = glp_add_cols(P, 1);
        m.col_g[i] = c;
        glp_set_col_bnds(P, c, GLP_LO, 0, 0);
        glp_set_obj_coef(P, c, -k);
      }
    }
  }
  m.ncols = glp_get_num_cols(P);
  /* Rows: at most 1 + 8 per job, at most 2 entries each but the capacity and
   * limit rows (a job in at most GS_CLUSTER_JOB_SLOTS of those). */
  size_t cap_entries = (size_t)n * (17 + GS_CLUSTER_JOB_SLOTS) + 2;
  ia = malloc(cap_entries * sizeof *ia);
  ja = malloc(cap_entries * sizeof *ja);
  ar = malloc(cap_entries * sizeof *ar);
  if (ia == NULL || ja == NULL || ar == NULL) goto nomem;
  int ne = 0;
#define ENTRY(row, col, val) (++ne, ia[ne] = (row), ja[ne] = (col), ar[ne] = (val))
  int row = glp_add_rows(P, 1); /* sum x <= N */
  glp_set_row_bnds(P, row, GLP_UP, 0, nodes);
  for (int i = 0; i < n; i++) ENTRY(row, m.col_x[i], 1.0);
  for (int g = 0; g < nu; g++) { /* a binding limit: its jobs' sum x <= L_g */
    if (!binds[g]) continue;
    row = glp_add_rows(P, 1);
    glp_set_row_bnds(P, row, GLP_UP, 0, gs_cluster_limit_of_slot(o, g));
    for (int i = 0; i < n; i++) {
      int sl[GS_CLUSTER_JOB_SLOTS], nsl = gs_cluster_limit_slots_of(&jobs[i], o, sl);
      for (int k = 0; k < nsl; k++)
        if (sl[k] == g) ENTRY(row, m.col_x[i], 1.0);
    }
  }
  for (int i = 0; i < n; i++) {
    const gs_cluster_job *j = &jobs[i];
    int cap = job_cap(&m, i);
    if (m.col_r[i]) { /* min r <= x <= cap r */
      row = glp_add_rows(P, 1);
      glp_set_row_bnds(P, row, GLP_LO, 0, 0);
      ENTRY(row, m.col_x[i], 1.0);
      ENTRY(row, m.col_r[i], -(double)j->min_nodes);
      row = glp_add_rows(P, 1);
      glp_set_row_bnds(P, row, GLP_UP, 0, 0);
      ENTRY(row, m.col_x[i], 1.0);
      ENTRY(row, m.col_r[i], -(double)cap);
    }
    /* d >= x - f and d >= f - x */
    row = glp_add_rows(P, 1);
    glp_set_row_bnds(P, row, GLP_LO, -share[i], 0);
    ENTRY(row, m.col_d[i], 1.0);
    ENTRY(row, m.col_x[i], -1.0);
    row = glp_add_rows(P, 1);
    glp_set_row_bnds(P, row, GLP_LO, share[i], 0);
    ENTRY(row, m.col_d[i], 1.0);
    ENTRY(row, m.col_x[i], 1.0);
    /* On whole numbers |x - f| is convex, so the chord between its values
     * at floor(f) and floor(f) + 1 bounds it below everywhere: a valid cut
     * that makes the relaxation exact between those two sizes (without it
     * the LP sets x = f at no fairness loss and the bound is weak). */
    double a = floor(share[i]), phi = share[i] - a;
    if (phi > 1e-12) {
      row = glp_add_rows(P, 1);
      glp_set_row_bnds(P, row, GLP_LO, phi - (1 - 2 * phi) * a, 0);
      ENTRY(row, m.col_d[i], 1.0);
      ENTRY(row, m.col_x[i], -(1 - 2 * phi));
    }
    if (m.col_y[i]) { /* |x - c| <= M y */
      double big = cap > j->cur_nodes ? cap : j->cur_nodes;
      row = glp_add_rows(P, 1);
      glp_set_row_bnds(P, row, GLP_UP, 0, j->cur_nodes);
      ENTRY(row, m.col_x[i], 1.0);
      ENTRY(row, m.col_y[i], -big);
      row = glp_add_rows(P, 1);
      glp_set_row_bnds(P, row, GLP_LO, j->cur_nodes, 0);
      ENTRY(row, m.col_x[i], 1.0);
      ENTRY(row, m.col_y[i], big);
    }
    if (m.col_g[i]) { /* x - g <= c: g is the growth, priced per node */
      row = glp_add_rows(P, 1);
      glp_set_row_bnds(P, row, GLP_UP, 0, j->cur_nodes);
      ENTRY(row, m.col_x[i], 1.0);
      ENTRY(row, m.col_g[i], -1.0);
    }
  }
#undef ENTRY
  glp_load_matrix(P, ne, ia, ja, ar);

  int limit_ms = (int)ceil(o->time_limit_s * 1e3);
  if (limit_ms < 1) limit_ms = 1;
  glp_smcp sp;
  glp_init_smcp(&sp);
  sp.msg_lev = GLP_MSG_OFF;
  sp.tm_lim = limit_ms;
  int lp_rc = glp_simplex(P, &sp);
  int have_mip = 0;
  double lp_bound = NAN;
  if (lp_rc == 0 && glp_get_status(P) == GLP_OPT) {
    lp_bound = glp_get_obj_val(P);
    glp_iocp ip;
    glp_init_iocp(&ip);
    ip.msg_lev = GLP_MSG_OFF;
    /* The whole round within the limit: branch and cut gets what the model
     * and the root LP left of it (GLPK checks its limit between nodes). */
    int left_ms = limit_ms - (int)ceil(mono_ms() - t_begin);
    ip.tm_lim = left_ms > 1 ? left_ms : 1;
    ip.mip_gap = 0;
    ip.presolve = GLP_OFF; /* the callback's incumbent is in the model's own columns */
    ip.cb_func = dorm_callback;
    ip.cb_info = &m;
    int ip_rc = glp_intopt(P, &ip);
    int st = glp_mip_status(P);
    if ((ip_rc == 0 || ip_rc == GLP_ETMLIM) && (st == GLP_OPT || st == GLP_FEAS)) {
      have_mip = 1;
      rep->proven = ip_rc == 0 && st == GLP_OPT;
      rep->gap = rep->proven ? 0 : (m.gap < DBL_MAX ? m.gap : NAN);
    }
  }
  double start_obj = gs_cluster_dorm_objective(jobs, n, nodes, o, share, start);
  if (have_mip) {
    int used = 0;
    for (int i = 0; i < n; i++) {
      long x = lround(glp_mip_col_val(P, m.col_x[i]));
      sizes[i] = (int)x;
      used += sizes[i];
    }
    /* GLPK's answer, read back as whole numbers, must be an allocation: the
     * check guards against a rounding surprise. */
    int ok = used <= nodes && gs_cluster_limits_kept(jobs, n, sizes, o);
    for (int i = 0; i < n && ok; i++)
      ok = sizes[i] == 0 || (sizes[i] >= jobs[i].min_nodes && sizes[i] <= jobs[i].max_nodes);
    if (!ok) have_mip = 0;
    /* An answer no better than the start it was given is the start: among
     * allocations of equal objective, the start's (FIFO on ties) is kept, so
     * that a round's answer does not depend on how far GLPK got. */
    else if (m.start != NULL &&
             gs_cluster_dorm_objective(jobs, n, nodes, o, share, sizes) <= start_obj + 1e-9)
      memcpy(sizes, start, (size_t)n * sizeof *sizes);
  }
  if (!have_mip) {
    memcpy(sizes, start, (size_t)n * sizeof *sizes);
    rep->fallback = 1;
    rep->proven = 0;
    rep->gap = isfinite(lp_bound) && fabs(start_obj) > 1e-12
                   ? fabs(lp_bound - start_obj) / fabs(start_obj)
                   : NAN;
  }
  rep->objective = gs_cluster_dorm_objective(jobs, n, nodes, o, share, sizes);
  rc = 0;
  goto done;
nomem:
  snprintf(err, errlen, "out of memory building the MILP of %d jobs", njobs);
done:
  if (P != NULL) glp_delete_prob(P);
  free(ia);
  free(ja);
  free(ar);
  free(share);
  free(cols);
  free(start);
  free(held);
  free(want);
  free(binds);
  free(owed);
  return rc;
}
