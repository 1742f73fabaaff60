/*
 * The policies' dispatch and what they share: the options' defaults, the
 * input check, the weighted fair share and Dorm's fairness loss and
 * objective (docs/CLUSTER.md, "Sharing a cluster").
 */
#include "policy.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct {
  const char *name;
  int (*fn)(const gs_cluster_job *, int, int, const gs_cluster_policy_opts *, int *,
            gs_cluster_policy_report *, char *, size_t);
} policies[] = {
    {"static", gs_cluster_policy_static},
    {"dorm", gs_cluster_policy_dorm},
    {"goodput", gs_cluster_policy_goodput},
};

void gs_cluster_policy_defaults(gs_cluster_policy_opts *o) {
  memset(o, 0, sizeof *o);
  o->restart_penalty_s = 30;
  o->time_limit_s = 0.05;
  o->fairness_weight = 0.5;
  o->adjust_weight = 0.02;
  o->interval_s = 60;
}

int gs_cluster_policy_known(const char *name) {
  if (name == NULL) return 0;
  for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
    if (strcmp(name, policies[i].name) == 0) return 1;
  return 0;
}

int gs_cluster_policy_reads_progress(const char *name) {
  return name != NULL && strcmp(name, "goodput") == 0;
}

const char *gs_cluster_policy_names(void) { return "static, dorm, goodput"; }

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (err == NULL || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int gs_cluster_jobs_check(const gs_cluster_job *jobs, int njobs, int nodes, char *err,
                          size_t errlen) {
  if (nodes < 0) {
    set_err(err, errlen, "the pool has %d nodes; expected 0 or more", nodes);
    return -1;
  }
  if (njobs < 0 || (njobs > 0 && jobs == NULL)) {
    set_err(err, errlen, "%d jobs given without an array", njobs);
    return -1;
  }
  for (int i = 0; i < njobs; i++) {
    const gs_cluster_job *j = &jobs[i];
    if (j->min_nodes < 1 || j->max_nodes < j->min_nodes) {
      set_err(err, errlen, "job %d: sizes %d..%d; expected 1 <= min <= max", j->id,
              j->min_nodes, j->max_nodes);
      return -1;
    }
    if (!(j->weight > 0) || !isfinite(j->weight)) {
      set_err(err, errlen, "job %d: weight %g; expected a finite number above 0", j->id,
              j->weight);
      return -1;
    }
    if (!isfinite(j->owed_s)) {
      set_err(err, errlen, "job %d: owed node-seconds %g; expected a finite number", j->id,
              j->owed_s);
      return -1;
    }
    if (j->cur_nodes < 0 || j->cur_nodes > j->max_nodes) {
      set_err(err, errlen, "job %d: current size %d outside 0..%d", j->id, j->cur_nodes,
              j->max_nodes);
      return -1;
    }
    if (j->req_nodes < 0 || j->req_nodes > j->max_nodes ||
        (j->req_nodes > 0 && j->req_nodes < j->min_nodes)) {
      set_err(err, errlen, "job %d: requested size %d outside %d..%d", j->id, j->req_nodes,
              j->min_nodes, j->max_nodes);
      return -1;
    }
    if (j->user < -1) {
      set_err(err, errlen, "job %d: user %d; expected -1 (none) or an index from 0", j->id,
              j->user);
      return -1;
    }
    /* The ends of the speed curve only: a round must stay cheap on large
     * pools, and the curve is the caller's (checked where it is made). */
    if (j->speed != NULL) {
      int ends[2] = {j->min_nodes, j->max_nodes};
      for (int e = 0; e < 2; e++)
        if (!(j->speed[ends[e]] >= 0) || !isfinite(j->speed[ends[e]])) {
          set_err(err, errlen, "job %d: speed on %d nodes is %g; expected >= 0", j->id, ends[e],
                  j->speed[ends[e]]);
          return -1;
        }
    }
  }
  if (njobs > 1) {
    int *ids = malloc((size_t)njobs * sizeof *ids);
    if (ids == NULL) {
      set_err(err, errlen, "out of memory checking %d jobs", njobs);
      return -1;
    }
    for (int i = 0; i < njobs; i++) ids[i] = jobs[i].id;
    qsort(ids, (size_t)njobs, sizeof *ids, cmp_int);
    for (int i = 1; i < njobs; i++)
      if (ids[i] == ids[i - 1]) {
        set_err(err, errlen, "job id %d given twice", ids[i]);
        free(ids);
        return -1;
      }
    free(ids);
  }
  return 0;
}

double gs_cluster_speed(const gs_cluster_job *j, int n) {
  if (n <= 0) return 0;
  if (n > j->max_nodes) n = j->max_nodes;
  return j->speed != NULL ? j->speed[n] : (double)n;
}

double gs_cluster_remaining_s(const gs_cluster_job *j, int n, double otherwise) {
  double sp = gs_cluster_speed(j, n);
  if (j->work > 0 && j->progress >= 0 && j->progress <= 1 && sp > 0)
    return j->work * (1 - j->progress) / sp;
  return otherwise;
}

double gs_cluster_unknown_horizon_s(const gs_cluster_policy_opts *o) {
  return o->interval_s > 0 ? o->interval_s : 60;
}

int gs_cluster_shrink_nodes(char *part, const char *launch, int n, int drop) {
  int given = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = n - 1; i >= 0 && given < drop; i--)
      if (part[i] && (pass == 1 || launch == NULL || !launch[i])) {
        part[i] = 0;
        given++;
      }
  return given;
}

int gs_cluster_keep_granted(gs_cluster_job *jobs, const int *granted, int n, int nodes) {
  int sum = 0, kept = 0;
  for (int i = 0; i < n; i++) {
    int g = granted[i] > jobs[i].cur_nodes && granted[i] <= jobs[i].max_nodes;
    sum += g ? granted[i] : jobs[i].cur_nodes;
    kept += g;
  }
  if (kept == 0 || sum > nodes) return 0; /* (a node lost or drained: the sizes held) */
  for (int i = 0; i < n; i++)
    if (granted[i] > jobs[i].cur_nodes && granted[i] <= jobs[i].max_nodes)
      jobs[i].cur_nodes = granted[i];
  return kept;
}

double gs_cluster_unknown_remaining_s(const gs_cluster_job *j, const gs_cluster_policy_opts *o) {
  double h = gs_cluster_unknown_horizon_s(o);
  return j->run_s > h && isfinite(j->run_s) ? j->run_s : h;
}

/* FIFO order of submission, ties by id (static's queue, dorm's owed
 * minimums). qsort's comparator reads the jobs through this. */
static const gs_cluster_job *fifo_jobs;
static int cmp_fifo(const void *a, const void *b) {
  const gs_cluster_job *x = &fifo_jobs[*(const int *)a], *y = &fifo_jobs[*(const int *)b];
  if (x->submit_time != y->submit_time) return x->submit_time < y->submit_time ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

void gs_cluster_fifo_sort(const gs_cluster_job *jobs, int *order, int n) {
  fifo_jobs = jobs;
  qsort(order, (size_t)n, sizeof *order, cmp_fifo);
}

int gs_cluster_dorm_owed(const gs_cluster_job *jobs, int njobs, int nodes,
                         const gs_cluster_policy_opts *o, const double *share,
                         unsigned char *owed) {
  int nowed = 0, left = nodes;
  memset(owed, 0, (size_t)(njobs > 0 ? njobs : 0));
  /* Dorm's own objective (no restart price): its weights alone decide. */
  if (njobs <= 0 || nodes <= 0 || !(o->restart_penalty_s > 0)) return 0;
  int *order = malloc((size_t)njobs * sizeof *order);
  int *held = calloc((size_t)gs_cluster_limit_slots(o) + 1, sizeof *held);
  if (order == NULL || held == NULL) {
    free(order);
    free(held);
    return 0; /* out of memory: no job is owed (dorm's own objective) */
  }
  int nw = 0;
  for (int i = 0; i < njobs; i++) {
    const gs_cluster_job *j = &jobs[i];
    if (j->cur_nodes <= 0) {
      order[nw++] = i;
      continue;
    }
    /* shrunk toward its share: to max(min, ceil(share)), never grown; a
     * job known to end before its restart would pay back keeps its nodes */
    int f = (int)ceil(share[i] - 1e-9), keep = j->cur_nodes;
    if (f < j->min_nodes) f = j->min_nodes;
    if (f < keep && gs_cluster_remaining_s(j, j->cur_nodes, INFINITY) > gs_cluster_restart_s(j, o))
      keep = f;
    left -= keep;
    gs_cluster_limit_take(j, o, held, keep);
  }
  gs_cluster_fifo_sort(jobs, order, nw);
  for (int k = 0; k < nw; k++) {
    int i = order[k];
    const gs_cluster_job *j = &jobs[i];
    int lim = gs_cluster_job_limit(j, o);
    if (j->min_nodes > share[i] + 1e-9 || j->min_nodes > left || j->min_nodes > j->max_nodes ||
        j->min_nodes > lim || j->min_nodes > gs_cluster_limit_room(j, o, held))
      continue;
    owed[i] = 1;
    nowed++;
    left -= j->min_nodes;
    gs_cluster_limit_take(j, o, held, j->min_nodes);
  }
  free(order);
  free(held);
  return nowed;
}

int gs_cluster_user_weights(int n, const int *user, const double *share, const double *w,
                            double *out) {
  return gs_cluster_tree_weights(n, NULL, NULL, user, share, w, out);
}

int gs_cluster_tree_weights(int n, const int *account, const double *account_share,
                            const int *user, const double *share, const double *w, double *out) {
  if (n <= 0) return 0;
  if (account == NULL) return gs_cluster_account_tree_weights(n, NULL, 0, NULL, NULL, user, share,
                                                              w, out);
  /* Accounts 0..n-1, every one top-level, each its jobs' share. */
  double *as = calloc((size_t)n, sizeof *as);
  if (as == NULL) {
    memcpy(out, w, (size_t)n * sizeof *out);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (account[i] >= 0 && account[i] < n) as[account[i]] = account_share[i];
  int rc = gs_cluster_account_tree_weights(n, account, n, NULL, as, user, share, w, out);
  free(as);
  return rc;
}

int gs_cluster_account_tree_weights(int n, const int *account, int naccounts,
                                    const int *account_parent, const double *account_share,
                                    const int *user, const double *share, const double *w,
                                    double *out) {
  if (n <= 0) return 0;
  int na = account != NULL && naccounts > 0 ? naccounts : 0;
  /* Each job's user node: (account, user) by the first job that has it.
   * sa[a], the sum of account a's present children's shares; f[a], the
   * part of the pool account a has (its ancestors' factors times its own). */
  int *node = malloc((size_t)n * sizeof *node);
  double *wu = calloc((size_t)n, sizeof *wu);
  double *sa = calloc((size_t)na + 1, sizeof *sa), *f = calloc((size_t)na + 1, sizeof *f);
  unsigned char *seen_a = calloc((size_t)na + 1, 1);
  int rc = node && wu && sa && f && seen_a ? 0 : -1;
  for (int a = 0; a < na && rc == 0; a++) { /* the chains end at the root, not too deep */
    int depth = 0;
    for (int v = a; v >= 0 && rc == 0; v = account_parent ? account_parent[v] : -1)
      if (v >= na || ++depth > GS_CLUSTER_ACCOUNT_DEPTH) rc = -1;
  }
  double wsum = 0, root = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    int acct = na && account[i] >= 0 && account[i] < na ? account[i] : -1;
    node[i] = i;
    for (int q = 0; q < i; q++)
      if (user[q] == user[i] && (na && account[q] >= 0 && account[q] < na ? account[q] : -1) ==
                                    acct) {
        node[i] = node[q];
        break;
      }
    wsum += w[i];
    wu[node[i]] += w[i];
    if (node[i] != i) continue; /* the user node's first job counts its share */
    if (acct < 0) {
      root += share[i];
      continue;
    }
    /* Its account and the ancestors not seen yet count in their parents'. */
    for (int v = acct; v >= 0 && !seen_a[v]; v = account_parent ? account_parent[v] : -1) {
      int p = account_parent ? account_parent[v] : -1;
      seen_a[v] = 1;
      if (p < 0) root += account_share[v];
      else sa[p] += account_share[v];
    }
    sa[acct] += share[i];
  }
  if (rc != 0) {
    free(node);
    free(wu);
    free(sa);
    free(f);
    free(seen_a);
    memcpy(out, w, (size_t)n * sizeof *out);
    return -1;
  }
  /* f[a] from the top down: a chain is at most GS_CLUSTER_ACCOUNT_DEPTH. */
  for (int a = 0; a < na; a++) {
    if (!seen_a[a]) continue;
    int chain[GS_CLUSTER_ACCOUNT_DEPTH], k = 0;
    for (int v = a; v >= 0; v = account_parent ? account_parent[v] : -1) chain[k++] = v;
    for (int d = k - 1; d >= 0; d--) {
      int v = chain[d], p = account_parent ? account_parent[v] : -1;
      f[v] = p < 0 ? account_share[v] / root : f[p] * (account_share[v] / sa[p]);
    }
  }
  for (int i = 0; i < n; i++) {
    int acct = na && account[i] >= 0 && account[i] < na ? account[i] : -1;
    double top = acct < 0 ? share[i] / root : f[acct] * (share[i] / sa[acct]);
    out[i] = wsum * top * (w[i] / wu[node[i]]);
  }
  free(node);
  free(wu);
  free(sa);
  free(f);
  free(seen_a);
  return 0;
}

double gs_cluster_restart_s(const gs_cluster_job *j, const gs_cluster_policy_opts *o) {
  if (!(o->restart_penalty_s > 0)) return 0;
  return j->restart_s > 0 && isfinite(j->restart_s) ? j->restart_s : o->restart_penalty_s;
}

double gs_cluster_restart_at(const gs_cluster_job *j, const gs_cluster_policy_opts *o, int n) {
  if (!(o->restart_penalty_s > 0)) return 0;
  if (j->restart_at && n >= 1 && n <= j->max_nodes && j->restart_at[n] > 0 &&
      isfinite(j->restart_at[n]))
    return j->restart_at[n];
  return gs_cluster_restart_s(j, o);
}

int gs_cluster_restart_fit(const double *sum, const int *cnt, int top, double *out) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int k = 0;
  for (int n = 1; n <= top; n++) {
    if (cnt[n] <= 0) continue;
    double y = sum[n] / cnt[n];
    sx += n, sy += y, sxx += (double)n * n, sxy += n * y;
    k++;
  }
  out[0] = 0;
  double b = k >= 2 ? (k * sxy - sx * sy) / (k * sxx - sx * sx) : 0, a = k ? (sy - b * sx) / k : 0;
  for (int n = 1; n <= top; n++) {
    double fit = a + b * n;
    out[n] = cnt[n] > 0 ? sum[n] / cnt[n] : k ? (fit > 0 ? fit : 0) : 0;
  }
  return k;
}

double gs_cluster_restart_measure(double t_ref, double s0, double t1, double s1, double t2,
                                  double s2) {
  if (!(t2 > t1) || !(s2 > s1) || !(t1 >= t_ref) || !(s1 >= s0)) return -1;
  double r = (s2 - s1) / (t2 - t1);
  double lost = (t1 - t_ref) - (s1 - s0) / r;
  return lost > 0 ? lost : 0;
}

void gs_cluster_restart_pool_fit(const double *restart, const double *startup, int n,
                                 gs_cluster_restart_pool *out) {
  double stop = 0, rs = 0, ss = 0;
  int nstop = 0, nr = 0, ns = 0;
  for (int i = 0; i < n; i++) {
    const int r_ok = restart[i] >= 0 && isfinite(restart[i]);
    const int s_ok = startup[i] >= 0 && isfinite(startup[i]);
    if (r_ok) rs += restart[i], nr++;
    if (s_ok) ss += startup[i], ns++;
    if (r_ok && s_ok) stop += fmax(restart[i] - startup[i], 0), nstop++;
  }
  *out = (gs_cluster_restart_pool){.restart = nr ? rs / nr : 0, .startup = ns ? ss / ns : 0,
                                   .stop = nstop ? stop / nstop : 0, .nrestart = nr,
                                   .nstartup = ns};
}

double gs_cluster_restart_prior(const gs_cluster_restart_pool *pool, double startup,
                                double fallback) {
  if (startup >= 0 && isfinite(startup)) return startup + pool->stop;
  if (pool->nrestart) return pool->restart;
  if (pool->nstartup) return pool->startup + pool->stop;
  return fallback;
}

double gs_cluster_dorm_restart_price(const gs_cluster_job *j, int nodes,
                                     const gs_cluster_policy_opts *o) {
  double p = gs_cluster_restart_s(j, o);
  if (j->cur_nodes <= 0 || nodes <= 0 || !(p > 0)) return 0;
  double h = gs_cluster_remaining_s(j, j->cur_nodes, gs_cluster_unknown_remaining_s(j, o));
  if (!(h >= 1)) h = 1; /* a job at its end: every resize costs its partition's P s */
  /* With a fairness window the deviations it prices are paid back over the
   * window: a restart's node-seconds are too (else a debt swings the
   * nodes back and forth faster than their restarts are worth). */
  if (o->fairness_window_s > 0 && h > o->fairness_window_s) h = o->fairness_window_s;
  return p / (nodes * h);
}

double gs_cluster_dorm_adjust_cost(const gs_cluster_job *j, int x, int nodes,
                                   const gs_cluster_policy_opts *o) {
  if (j->cur_nodes <= 0 || x == j->cur_nodes) return 0;
  int idle = x > j->cur_nodes ? x : j->cur_nodes;
  return o->adjust_weight + gs_cluster_dorm_restart_price(j, nodes, o) * idle;
}

/* Water-filling order: the job whose cap is reached first (max/w smallest). */
static const gs_cluster_job *fair_jobs;
static int cmp_cap_per_weight(const void *a, const void *b) {
  const gs_cluster_job *x = &fair_jobs[*(const int *)a], *y = &fair_jobs[*(const int *)b];
  double kx = x->max_nodes / x->weight, ky = y->max_nodes / y->weight;
  return (kx > ky) - (kx < ky);
}

/* Water-fills `nodes` among the m jobs idx[0..m-1] by weight, each capped
 * at its max_nodes (idx is reordered). */
static void water_fill(const gs_cluster_job *jobs, int *idx, int m, double nodes,
                       double *share) {
  double wsum = 0;
  for (int k = 0; k < m; k++) wsum += jobs[idx[k]].weight;
  /* qsort has no context argument; the comparison reads this file's pointer
   * (the policies run on one thread per process). */
  fair_jobs = jobs;
  qsort(idx, (size_t)m, sizeof *idx, cmp_cap_per_weight);
  double left = nodes;
  int k = 0;
  /* Jobs whose cap lies below the current level take their cap; the level
   * (nodes per unit of weight) of the rest rises as they leave. */
  for (; k < m; k++) {
    const gs_cluster_job *j = &jobs[idx[k]];
    double level = left / wsum;
    if (j->max_nodes > level * j->weight) break;
    share[idx[k]] = j->max_nodes;
    left -= j->max_nodes;
    wsum -= j->weight;
  }
  for (int q = k; q < m; q++) share[idx[q]] = wsum > 0 ? left * jobs[idx[q]].weight / wsum : 0;
}

int gs_cluster_user_limit(const gs_cluster_job *j, const gs_cluster_policy_opts *o) {
  if (o == NULL || o->user_max_nodes == NULL || j->user < 0 || j->user >= o->nusers)
    return INT_MAX;
  int l = o->user_max_nodes[j->user];
  return l > 0 ? l : INT_MAX;
}

int gs_cluster_account_depth(const gs_cluster_policy_opts *o, int a) {
  int depth = -1;
  for (int v = a; v >= 0; v = o->account_parent ? o->account_parent[v] : -1)
    if (v >= o->naccounts || ++depth >= GS_CLUSTER_ACCOUNT_DEPTH) return -1;
  return depth;
}

/* The account limits' chain of job j: its account, then each ancestor
 * (at most GS_CLUSTER_ACCOUNT_DEPTH; gs_cluster_allocate refuses deeper).
 * Returns how many, 0 when o carries no account limits. */
static int account_chain(const gs_cluster_job *j, const gs_cluster_policy_opts *o, int *chain) {
  if (o == NULL || o->account_max_nodes == NULL || o->naccounts <= 0) return 0;
  int k = 0;
  for (int v = j->account; v >= 0 && v < o->naccounts && k < GS_CLUSTER_ACCOUNT_DEPTH;
       v = o->account_parent ? o->account_parent[v] : -1)
    chain[k++] = v;
  return k;
}

int gs_cluster_account_limit(const gs_cluster_job *j, const gs_cluster_policy_opts *o) {
  int chain[GS_CLUSTER_ACCOUNT_DEPTH], k = account_chain(j, o, chain), lim = INT_MAX;
  for (int d = 0; d < k; d++) {
    int l = o->account_max_nodes[chain[d]];
    if (l > 0 && l < lim) lim = l;
  }
  return lim;
}

int gs_cluster_job_limit(const gs_cluster_job *j, const gs_cluster_policy_opts *o) {
  int u = gs_cluster_user_limit(j, o), a = gs_cluster_account_limit(j, o);
  return u < a ? u : a;
}

/* The users' entries come first in a count of held nodes, then the
 * accounts'. */
static int user_slots(const gs_cluster_policy_opts *o) {
  return o != NULL && o->user_max_nodes != NULL && o->nusers > 0 ? o->nusers : 0;
}

int gs_cluster_limit_slots(const gs_cluster_policy_opts *o) {
  int accounts = o != NULL && o->account_max_nodes != NULL && o->naccounts > 0 ? o->naccounts : 0;
  return user_slots(o) + accounts;
}

int gs_cluster_limit_room(const gs_cluster_job *j, const gs_cluster_policy_opts *o,
                          const int *held) {
  int sl[GS_CLUSTER_JOB_SLOTS], ns = gs_cluster_limit_slots_of(j, o, sl), room = INT_MAX;
  for (int k = 0; k < ns; k++)
    if (gs_cluster_limit_of_slot(o, sl[k]) - held[sl[k]] < room)
      room = gs_cluster_limit_of_slot(o, sl[k]) - held[sl[k]];
  return room;
}

void gs_cluster_limit_take(const gs_cluster_job *j, const gs_cluster_policy_opts *o, int *held,
                           int n) {
  int sl[GS_CLUSTER_JOB_SLOTS], ns = gs_cluster_limit_slots_of(j, o, sl);
  for (int k = 0; k < ns; k++) held[sl[k]] += n;
}

int gs_cluster_limit_slots_of(const gs_cluster_job *j, const gs_cluster_policy_opts *o,
                              int *slots) {
  int ns = 0, chain[GS_CLUSTER_ACCOUNT_DEPTH], k = account_chain(j, o, chain);
  if (gs_cluster_user_limit(j, o) != INT_MAX) slots[ns++] = j->user;
  for (int d = 0; d < k; d++)
    if (o->account_max_nodes[chain[d]] > 0) slots[ns++] = user_slots(o) + chain[d];
  return ns;
}

int gs_cluster_limit_of_slot(const gs_cluster_policy_opts *o, int slot) {
  int nu = user_slots(o), l = slot < nu ? o->user_max_nodes[slot] : o->account_max_nodes[slot - nu];
  return l > 0 ? l : INT_MAX;
}

int gs_cluster_limits_kept(const gs_cluster_job *jobs, int njobs, const int *sizes,
                           const gs_cluster_policy_opts *o) {
  int ns = gs_cluster_limit_slots(o), kept = 1;
  if (ns == 0) return 1;
  int *held = calloc((size_t)ns, sizeof *held);
  for (int i = 0; i < njobs && held; i++) gs_cluster_limit_take(&jobs[i], o, held, sizes[i]);
  for (int g = 0; g < ns && kept; g++) /* (no memory: not checked) */
    kept = held == NULL || held[g] <= gs_cluster_limit_of_slot(o, g);
  free(held);
  return kept;
}

/* Adds v to job j's limits' entries of sum (its user's and accounts'). */
static void add_share(const gs_cluster_job *j, const gs_cluster_policy_opts *o, double *sum,
                      double v) {
  int sl[GS_CLUSTER_JOB_SLOTS], ns = gs_cluster_limit_slots_of(j, o, sl);
  for (int k = 0; k < ns; k++) sum[sl[k]] += v;
}

/* Whether job j counts against limit slot g. */
static int in_slot(const gs_cluster_job *j, const gs_cluster_policy_opts *o, int g) {
  int sl[GS_CLUSTER_JOB_SLOTS], ns = gs_cluster_limit_slots_of(j, o, sl);
  for (int k = 0; k < ns; k++)
    if (sl[k] == g) return 1;
  return 0;
}

/* Water-fills `amount` among the m jobs idx[0..m-1] (permuted) keeping the
 * limits: while a limit's jobs hold more than it allows (held[g], what its
 * jobs outside idx already hold, counted), those jobs get exactly what is
 * left of it, filled the same way among themselves (so that the limits
 * inside it hold too), and leave; the level of the others only rises as
 * they go. The outermost limit over is taken first: accounts before users,
 * a parent account before its sub-accounts (its fill keeps theirs; a
 * limit reached at a lower level stays reached as the level rises). Adds
 * the jobs' shares to held. Returns -1 without memory (the shares as
 * filled). */
static int capped_fill(const gs_cluster_job *jobs, int *idx, int m, double amount,
                       const gs_cluster_policy_opts *o, double *held, double *share) {
  int ns = gs_cluster_limit_slots(o), nu = user_slots(o), rc = 0;
  double *sum = ns > 0 ? malloc((size_t)ns * sizeof *sum) : NULL;
  if (ns > 0 && sum == NULL) rc = -1;
  while (m > 0) {
    water_fill(jobs, idx, m, amount, share);
    if (ns == 0 || rc != 0) break;
    for (int g = 0; g < ns; g++) sum[g] = held[g];
    for (int k = 0; k < m; k++) add_share(&jobs[idx[k]], o, sum, share[idx[k]]);
    /* The account over at the smallest depth (the last such by index),
     * else the last user over. */
    int over = -1, over_depth = INT_MAX;
    for (int g = ns - 1; g >= 0; g--) {
      if (!(sum[g] > gs_cluster_limit_of_slot(o, g) + 1e-9)) continue;
      int depth = g >= nu ? gs_cluster_account_depth(o, g - nu) : GS_CLUSTER_ACCOUNT_DEPTH;
      if (depth < 0) depth = GS_CLUSTER_ACCOUNT_DEPTH;
      if (depth < over_depth) over = g, over_depth = depth;
    }
    if (over < 0) break;
    /* Its jobs to the end of idx (swapped: idx stays the caller's set). */
    int kept = 0;
    for (int k = 0; k < m; k++) {
      if (!in_slot(&jobs[idx[k]], o, over)) {
        int t = idx[kept];
        idx[kept++] = idx[k];
        idx[k] = t;
      }
    }
    int nsub = m - kept, *sub = idx + kept;
    if (nsub == 0) break; /* (held above: an outer fill's, not this one's to mend) */
    double room = gs_cluster_limit_of_slot(o, over) - held[over];
    if (capped_fill(jobs, sub, nsub, room > 0 ? room : 0, o, held, share) != 0) rc = -1;
    for (int k = 0; k < nsub; k++) amount -= share[sub[k]];
    m = kept;
  }
  /* The jobs left hold their shares (the ones that left, their fills'). */
  for (int k = 0; k < m && ns > 0; k++) add_share(&jobs[idx[k]], o, held, share[idx[k]]);
  free(sum);
  return rc;
}

void gs_cluster_fair_share(const gs_cluster_job *jobs, int njobs, int nodes,
                           const gs_cluster_policy_opts *o, double *share) {
  if (njobs <= 0) return;
  int *idx = malloc((size_t)njobs * sizeof *idx);
  double *held = calloc((size_t)gs_cluster_limit_slots(o) + 1, sizeof *held);
  int rc = idx && held ? 0 : -1;
  for (int i = 0; i < njobs && rc == 0; i++) idx[i] = i;
  if (rc == 0) rc = capped_fill(jobs, idx, njobs, nodes, o, held, share);
  if (rc != 0) { /* no memory: the uncapped proportional share */
    double wsum = 0;
    for (int i = 0; i < njobs; i++) wsum += jobs[i].weight;
    for (int i = 0; i < njobs; i++) share[i] = nodes * jobs[i].weight / wsum;
  }
  free(idx);
  free(held);
}

double gs_cluster_fair_target(const gs_cluster_job *j, double share, int nodes,
                              const gs_cluster_policy_opts *o) {
  if (o == NULL || !(o->fairness_window_s > 0)) return share;
  double t = share + j->owed_s / o->fairness_window_s;
  int top = j->max_nodes < nodes ? j->max_nodes : nodes, lim = gs_cluster_job_limit(j, o);
  if (top > lim) top = lim;
  if (t > top) t = top;
  return t > 0 ? t : 0;
}

double gs_cluster_fairness_loss(const int *sizes, const double *share, int njobs, int nodes) {
  if (nodes <= 0) return 0;
  double loss = 0;
  for (int i = 0; i < njobs; i++) loss += fabs(sizes[i] - share[i]);
  return loss / nodes;
}

double gs_cluster_dorm_objective(const gs_cluster_job *jobs, int njobs, int nodes,
                                 const gs_cluster_policy_opts *o, const double *share,
                                 const int *sizes) {
  if (nodes <= 0) return 0;
  double used = 0, changes = 0;
  unsigned char *owed = njobs > 0 ? malloc((size_t)njobs) : NULL;
  if (owed != NULL) gs_cluster_dorm_owed(jobs, njobs, nodes, o, share, owed);
  for (int i = 0; i < njobs; i++) {
    used += sizes[i];
    changes += gs_cluster_dorm_adjust_cost(&jobs[i], sizes[i], nodes, o);
    if (owed != NULL && owed[i] && sizes[i] == 0) changes += GS_CLUSTER_DORM_OWED_PENALTY;
  }
  free(owed);
  return used / nodes - o->fairness_weight * gs_cluster_fairness_loss(sizes, share, njobs, nodes) -
         changes;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int gs_cluster_allocate(const char *name, const gs_cluster_job *jobs, int njobs, int nodes,
                        const gs_cluster_policy_opts *opts, int *sizes,
                        gs_cluster_policy_report *rep, char *err, size_t errlen) {
  gs_cluster_policy_opts defaults;
  gs_cluster_policy_report scratch;
  if (rep == NULL) rep = &scratch;
  memset(rep, 0, sizeof *rep);
  if (opts == NULL) {
    gs_cluster_policy_defaults(&defaults);
    opts = &defaults;
  }
  if (err != NULL && errlen > 0) err[0] = '\0';
  for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
    if (name == NULL || strcmp(name, policies[p].name) != 0) continue;
    if (!(opts->restart_penalty_s >= 0) || !(opts->time_limit_s > 0) ||
        !(opts->fairness_weight >= 0) || !(opts->adjust_weight >= 0) ||
        !(opts->interval_s >= 0)) {
      set_err(err, errlen,
              "policy options out of range: restart penalty %g s (>= 0), time limit %g s "
              "(> 0), fairness weight %g (>= 0), adjustment weight %g (>= 0), interval %g s "
              "(>= 0)",
              opts->restart_penalty_s, opts->time_limit_s, opts->fairness_weight,
              opts->adjust_weight, opts->interval_s);
      rep->status = -1;
      return -1;
    }
    if (opts->nusers < 0 || (opts->nusers > 0 && opts->user_max_nodes == NULL)) {
      set_err(err, errlen, "per-user limits: %d users given without their limits",
              opts->nusers);
      rep->status = -1;
      return -1;
    }
    if (opts->naccounts < 0 || (opts->naccounts > 0 && opts->account_max_nodes == NULL)) {
      set_err(err, errlen, "per-account limits: %d accounts given without their limits",
              opts->naccounts);
      rep->status = -1;
      return -1;
    }
    for (int a = 0; opts->account_parent != NULL && a < opts->naccounts; a++)
      if (gs_cluster_account_depth(opts, a) < 0) {
        set_err(err, errlen, "nested accounts: account %d's parents leave 0..%d or go deeper "
                "than %d levels (a cycle?)", a, opts->naccounts - 1, GS_CLUSTER_ACCOUNT_DEPTH);
        rep->status = -1;
        return -1;
      }
    for (int g = 0; g < opts->nusers + opts->naccounts; g++) {
      int u = g < opts->nusers, k = u ? g : g - opts->nusers;
      const int *lim = u ? opts->user_max_nodes : opts->account_max_nodes;
      if (lim != NULL && lim[k] < 0) {
        set_err(err, errlen, "per-%s limits: %s %d's limit is %d nodes; expected 0 (none) "
                "or more", u ? "user" : "account", u ? "user" : "account", k, lim[k]);
        rep->status = -1;
        return -1;
      }
    }
    if (gs_cluster_jobs_check(jobs, njobs, nodes, err, errlen) != 0) {
      rep->status = -1;
      return -1;
    }
    for (int i = 0; i < njobs; i++) sizes[i] = 0;
    double t0 = now_ms();
    int rc = njobs == 0 ? 0 : policies[p].fn(jobs, njobs, nodes, opts, sizes, rep, err, errlen);
    rep->solve_ms = now_ms() - t0;
    if (rc == 0 && !gs_cluster_limits_kept(jobs, njobs, sizes, opts)) {
      /* a policy's defect, not the caller's: nothing is allocated */
      set_err(err, errlen, "policy %s broke a user's or an account's node limit", name);
      for (int i = 0; i < njobs; i++) sizes[i] = 0;
      rc = -1;
    }
    rep->status = rc;
    return rc;
  }
  set_err(err, errlen, "unknown policy '%s'; expected one of %s", name ? name : "(null)",
          gs_cluster_policy_names());
  rep->status = -1;
  return -1;
}
