/*
 * static: static partitioning, as a manager without resizing would do it
 * (Dorm's baseline, Sun et al. 2017, Sec. V: YARN/Mesos-style partitions
 * that keep their size for the job's life).
 *
 * Jobs are taken in FIFO order of submission (ties by id). A running job
 * keeps its size. A waiting job starts at its requested size (req_nodes, or
 * max_nodes when none was given; capped at the pool's size, but not below
 * min_nodes) when that fits in the free nodes; the first waiting job that
 * does not fit blocks every job behind it: no backfill. A job whose min_nodes
 * exceeds the whole pool can never start and blocks no one. When the pool
 * shrank below the running jobs' total (a node lost), the jobs submitted
 * last lose their partitions (size 0) and wait to start again at their size.
 * Per-user limits: a job runs at most at its user's limit, and a job whose
 * user's running jobs hold the limit waits without blocking the line (as
 * Slurm's jobs pending on QOSMaxNodePerUserLimit).
 */
#include "policy.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

int gs_cluster_policy_static(const gs_cluster_job *jobs, int njobs, int nodes,
                             const gs_cluster_policy_opts *o, int *sizes,
                             gs_cluster_policy_report *rep, char *err, size_t errlen) {
  if (njobs <= 0) return 0;
  int nslots = gs_cluster_limit_slots(o);
  int *order = malloc((size_t)njobs * sizeof *order);
  int *held = calloc((size_t)nslots + 1, sizeof *held); /* each limit's nodes given */
  if (order == NULL || held == NULL) {
    free(order);
    free(held);
    snprintf(err, errlen, "out of memory ordering %d jobs", njobs);
    return -1;
  }
  for (int i = 0; i < njobs; i++) order[i] = i;
  gs_cluster_fifo_sort(jobs, order, njobs);
  int free_nodes = nodes;
  /* Running jobs first, in FIFO order: they keep their partitions (within
   * their users' and accounts' limits). Then one that lost nodes below its minimum (it
   * cannot run on what it has left) gets back up to it if nodes are free,
   * else it waits in the line below like any other. */
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < njobs; k++) {
      const gs_cluster_job *j = &jobs[order[k]];
      int short_of_min = j->cur_nodes < j->min_nodes;
      if (j->cur_nodes <= 0 || short_of_min != pass) continue;
      int keep = short_of_min ? j->min_nodes : j->cur_nodes;
      int room = gs_cluster_limit_room(j, o, held);
      if (keep > room) keep = room >= j->min_nodes ? room : 0;
      if (keep > 0 && keep <= free_nodes) {
        sizes[order[k]] = keep;
        free_nodes -= keep;
        gs_cluster_limit_take(j, o, held, keep);
      }
    }
  /* Then waiting jobs, strictly in FIFO order; a job its user's limit holds
   * back (Slurm's QOSMaxNodePerUserLimit) waits without holding the line,
   * and a job asking for more than its user's limit runs at the limit. */
  for (int k = 0; k < njobs; k++) {
    const gs_cluster_job *j = &jobs[order[k]];
    if (sizes[order[k]] > 0) continue;
    int lim = gs_cluster_job_limit(j, o);
    if (j->min_nodes > nodes || j->min_nodes > lim) continue; /* can never run here */
    int want = j->req_nodes > 0 ? j->req_nodes : j->max_nodes;
    if (want > nodes) want = nodes;
    if (want > lim) want = lim;
    if (want < j->min_nodes) want = j->min_nodes;
    /* its user's (account's) running jobs hold the limit */
    if (want > gs_cluster_limit_room(j, o, held)) continue;
    if (want > free_nodes) break; /* head of the line waits; no backfill */
    sizes[order[k]] = want;
    free_nodes -= want;
    gs_cluster_limit_take(j, o, held, want);
  }
  double used = nodes - free_nodes;
  rep->objective = nodes > 0 ? used / nodes : 0;
  rep->gap = 0;
  rep->proven = 1;
  free(order);
  free(held);
  return 0;
}
