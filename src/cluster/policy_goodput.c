/*
 * goodput: marginal-gain allocation on measured speed curves, after Optimus
 * (Peng et al., EuroSys 2018, Sec. 5: give the next unit of resource to the
 * job whose speed gains most from it) and Pollux (Qiao et al., OSDI 2021:
 * speedups normalised per job, re-allocation penalised by the restart it
 * costs). Batch size and statistical efficiency are not adapted: a job's
 * speed is its measured throughput at the batch size it was submitted with.
 *
 * 1. Admission: jobs in order of least remaining time on min_nodes
 *    (shortest remaining time first, preemptive: a waiting job closer to
 *    done takes the place of a running one; a preempted job's key carries
 *    the restart it will pay to resume), then running before waiting, then
 *    FIFO; jobs whose work or progress is unknown come after, running ones
 *    first, in FIFO order. Each gets min_nodes while it fits (a job that does
 *    not fit is skipped; later, smaller ones may start). On Pollux's eight
 *    workloads this order took goodput's mean JCT from 9480 s (running jobs
 *    first, then FIFO) to 2920 s and its worst finish-time fairness from 144
 *    to 2.2 (bench/results/cluster_sim.md).
 * 2. Growth: every further node goes to the job with the largest weighted
 *    marginal gain w_i * (u_i(x+1) - u_i(x)), where u_i(x) = min_i *
 *    speed_i(x) / speed_i(min_i) is the job's speed normalised so that a job
 *    scaling linearly has u(x) = x: gains of jobs of different models compare
 *    as fractions of a node's worth of work. Equal gains go to the job with
 *    the least remaining time (shortest first; FIFO when unknown). A node
 *    that speeds no job up stays free.
 * 3. Restart penalty: a running job that would grow keeps its size unless
 *    the growth pays back its restart within the horizon H (the job's
 *    remaining time at its size when its work and progress are known, else
 *    as long as it has run, at least interval_s: gs_cluster_unknown_remaining_s):
 *    speed(new) * (H - P) > speed(cur) * H. The nodes it does
 *    not take are offered (step 2) to the jobs that start or change anyway.
 * Per-user limits: a job is admitted (step 1) and grown (step 2) only while
 * its user's jobs hold less than the user's limit.
 */
#include "policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gp_state {
  const gs_cluster_job *jobs;
  const gs_cluster_policy_opts *o;
  int nodes;
  double *base;   /* speed at min_nodes (normalisation) */
  double *remain; /* remaining time at the current size, or the horizon (s) */
  int *x;         /* sizes being built */
  int *cap;       /* largest size allowed this round */
  int *heap, nheap;
  double *key;    /* each job's marginal gain when it entered the heap */
  int *held;      /* the nodes each user's jobs hold (per-user limits) */
} gp_state;

static double norm_speed(const gp_state *s, int i, int n) {
  if (n <= 0 || s->base[i] <= 0) return 0;
  return s->jobs[i].min_nodes * gs_cluster_speed(&s->jobs[i], n) / s->base[i];
}

static double gain(const gp_state *s, int i) {
  return s->jobs[i].weight * (norm_speed(s, i, s->x[i] + 1) - norm_speed(s, i, s->x[i]));
}

/* Heap order: larger gain first; then less remaining time; then earlier
 * submission; then smaller id (a total order: rounds are deterministic). */
static int before(const gp_state *s, int a, int b) {
  double ga = s->key[a], gb = s->key[b];
  if (fabs(ga - gb) > 1e-12 * (fabs(ga) + fabs(gb))) return ga > gb;
  if (s->remain[a] != s->remain[b]) return s->remain[a] < s->remain[b];
  if (s->jobs[a].submit_time != s->jobs[b].submit_time)
    return s->jobs[a].submit_time < s->jobs[b].submit_time;
  return s->jobs[a].id < s->jobs[b].id;
}

static void heap_push(gp_state *s, int i) {
  s->key[i] = gain(s, i);
  int k = s->nheap++;
  s->heap[k] = i;
  while (k > 0) {
    int p = (k - 1) / 2;
    if (!before(s, s->heap[k], s->heap[p])) break;
    int t = s->heap[p];
    s->heap[p] = s->heap[k];
    s->heap[k] = t;
    k = p;
  }
}

static int heap_pop(gp_state *s) {
  int top = s->heap[0];
  s->heap[0] = s->heap[--s->nheap];
  int k = 0;
  for (;;) {
    int l = 2 * k + 1, r = l + 1, m = k;
    if (l < s->nheap && before(s, s->heap[l], s->heap[m])) m = l;
    if (r < s->nheap && before(s, s->heap[r], s->heap[m])) m = r;
    if (m == k) break;
    int t = s->heap[m];
    s->heap[m] = s->heap[k];
    s->heap[k] = t;
    k = m;
  }
  return top;
}

/* Step 2 over the jobs for which eligible[i] is set: hands out `free_nodes`. */
static int grow(gp_state *s, int n, int free_nodes, const unsigned char *eligible) {
  s->nheap = 0;
  for (int i = 0; i < n; i++)
    if (eligible[i] && s->x[i] > 0 && s->x[i] < s->cap[i]) heap_push(s, i);
  while (free_nodes > 0 && s->nheap > 0) {
    int i = heap_pop(s);
    if (s->key[i] <= 0) continue; /* its curve is flat from here */
    /* its user's or its account's limit */
    if (gs_cluster_limit_room(&s->jobs[i], s->o, s->held) <= 0) continue;
    s->x[i]++;
    gs_cluster_limit_take(&s->jobs[i], s->o, s->held, 1);
    free_nodes--;
    if (s->x[i] < s->cap[i]) heap_push(s, i);
  }
  return free_nodes;
}

/* Admission order (step 1): least remaining time first, then running jobs
 * before waiting ones, then FIFO. (qsort has no context argument: the
 * comparison reads these, set for the round; one round at a time.) */
static const gs_cluster_job *order_jobs;
static const double *order_key;
static int cmp_admission(const void *a, const void *b) {
  int ia = *(const int *)a, ib = *(const int *)b;
  const gs_cluster_job *x = &order_jobs[ia], *y = &order_jobs[ib];
  int rx = x->cur_nodes > 0, ry = y->cur_nodes > 0;
  if (order_key[ia] != order_key[ib]) return order_key[ia] < order_key[ib] ? -1 : 1;
  if (rx != ry) return ry - rx;
  if (x->submit_time != y->submit_time) return x->submit_time < y->submit_time ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* Whether running job i gains from growing from cur to t nodes despite the
 * restart (step 3). */
static int growth_pays(const gp_state *s, int i, int t) {
  const gs_cluster_job *j = &s->jobs[i];
  double sc = gs_cluster_speed(j, j->cur_nodes), st = gs_cluster_speed(j, t);
  double h = s->remain[i], p = gs_cluster_restart_at(j, s->o, t);
  if (sc <= 0) return 1;
  return st * (h - p) > sc * h;
}

int gs_cluster_policy_goodput(const gs_cluster_job *jobs, int njobs, int nodes,
                              const gs_cluster_policy_opts *o, int *sizes,
                              gs_cluster_policy_report *rep, char *err, size_t errlen) {
  int n = njobs, rc = -1;
  if (njobs <= 0) return 0;
  gp_state s = {.jobs = jobs, .o = o, .nodes = nodes};
  s.base = malloc((size_t)n * sizeof *s.base);
  s.remain = malloc((size_t)n * sizeof *s.remain);
  s.cap = malloc((size_t)n * sizeof *s.cap);
  s.heap = malloc((size_t)n * sizeof *s.heap);
  s.key = malloc((size_t)n * sizeof *s.key);
  int *order = malloc((size_t)n * sizeof *order);
  unsigned char *eligible = malloc((size_t)n);
  double *akey = malloc((size_t)n * sizeof *akey);
  s.held = calloc((size_t)gs_cluster_limit_slots(o) + 1, sizeof *s.held);
  s.x = sizes;
  if (s.base == NULL || s.remain == NULL || s.cap == NULL || s.heap == NULL ||
      s.key == NULL || order == NULL || eligible == NULL || akey == NULL || s.held == NULL) {
    snprintf(err, errlen, "out of memory allocating among %d jobs", njobs);
    goto done;
  }
  for (int i = 0; i < n; i++) {
    const gs_cluster_job *j = &jobs[i];
    s.base[i] = gs_cluster_speed(j, j->min_nodes);
    s.cap[i] = j->max_nodes < nodes ? j->max_nodes : nodes;
    if (s.cap[i] > gs_cluster_job_limit(j, o)) s.cap[i] = gs_cluster_job_limit(j, o);
    int at = j->cur_nodes > 0 ? j->cur_nodes : j->min_nodes;
    s.remain[i] = gs_cluster_remaining_s(
        j, at, j->cur_nodes > 0 ? gs_cluster_unknown_remaining_s(j, o) : INFINITY);
    sizes[i] = 0;
    order[i] = i;
  }
  /* The admission key: remaining time on min_nodes (plus the restart a
   * preempted job pays to resume); unknown without work and progress. */
  for (int i = 0; i < n; i++) {
    const gs_cluster_job *j = &jobs[i];
    akey[i] = gs_cluster_remaining_s(j, j->min_nodes, INFINITY);
    if (j->cur_nodes == 0 && j->progress > 0) akey[i] += gs_cluster_restart_at(j, o, j->min_nodes);
  }
  order_key = akey;
  order_jobs = jobs;
  qsort(order, (size_t)n, sizeof *order, cmp_admission);
  /* 1. Admission at min_nodes. */
  int free_nodes = nodes;
  for (int k = 0; k < n; k++) {
    int i = order[k];
    if (jobs[i].min_nodes <= free_nodes && jobs[i].min_nodes <= s.cap[i] && s.base[i] > 0 &&
        jobs[i].min_nodes <= gs_cluster_limit_room(&jobs[i], o, s.held)) {
      sizes[i] = jobs[i].min_nodes;
      free_nodes -= sizes[i];
      gs_cluster_limit_take(&jobs[i], o, s.held, sizes[i]);
    }
  }
  /* 2. Growth by marginal gain. */
  memset(eligible, 1, (size_t)n);
  free_nodes = grow(&s, n, free_nodes, eligible);
  /* 3. Growth of running jobs that does not pay back its restart is undone;
   * the nodes go to the jobs that start or resize anyway. */
  int undone = 0;
  for (int i = 0; i < n; i++) {
    int c = jobs[i].cur_nodes;
    if (c > 0 && sizes[i] > c && !growth_pays(&s, i, sizes[i])) {
      free_nodes += sizes[i] - c;
      gs_cluster_limit_take(&jobs[i], o, s.held, c - sizes[i]);
      sizes[i] = c;
      undone = 1;
    }
  }
  if (undone && free_nodes > 0) {
    for (int i = 0; i < n; i++) eligible[i] = sizes[i] > 0 && sizes[i] != jobs[i].cur_nodes;
    free_nodes = grow(&s, n, free_nodes, eligible);
  }
  double total = 0;
  for (int i = 0; i < n; i++) total += jobs[i].weight * norm_speed(&s, i, sizes[i]);
  rep->objective = total; /* the weighted normalised speed of the allocation */
  rep->gap = 0;
  rc = 0;
done:
  free(s.base);
  free(s.remain);
  free(s.cap);
  free(s.heap);
  free(s.key);
  free(order);
  free(eligible);
  free(akey);
  free(s.held);
  return rc;
}
