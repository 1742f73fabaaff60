/* PLACEHOLDER of branch dormmgr (replaced at the merge by the policies of
 * src/cluster/policy*.c): "static" only, as a partitioning manager without
 * resizing allocates. Jobs are taken in submission order (id breaks ties);
 * a running job keeps its size (less, down to its minimum, when nodes were
 * lost; 0 when even its minimum no longer fits); a queued job starts at
 * max_nodes (or the whole pool when max_nodes is more than the pool) when
 * that many nodes are free, and the queue waits behind it (first come,
 * first served, no backfilling). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

int gs_cluster_policy_known(const char *name) { return name && strcmp(name, "static") == 0; }

static const gs_cluster_job *sort_jobs;

static int by_arrival(const void *a, const void *b) {
  const gs_cluster_job *x = &sort_jobs[*(const int *)a], *y = &sort_jobs[*(const int *)b];
  if (x->submit_time != y->submit_time) return x->submit_time < y->submit_time ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

int gs_cluster_allocate(const char *name, const gs_cluster_job *jobs, int njobs, int nodes,
                        const gs_cluster_policy_opts *opts, int *sizes,
                        gs_cluster_policy_report *rep, char *err, size_t errlen) {
  (void)opts;
  if (rep) memset(rep, 0, sizeof *rep);
  if (!gs_cluster_policy_known(name)) {
    snprintf(err, errlen, "unknown policy '%s' (this build knows: static)", name ? name : "");
    return -1;
  }
  if (njobs < 0 || nodes < 0 || (njobs > 0 && (!jobs || !sizes))) {
    snprintf(err, errlen, "bad arguments: %d jobs on %d nodes", njobs, nodes);
    return -1;
  }
  for (int i = 0; i < njobs; i++)
    if (jobs[i].min_nodes < 1 || jobs[i].max_nodes < jobs[i].min_nodes ||
        jobs[i].cur_nodes < 0) {
      snprintf(err, errlen, "job %d: sizes %d:%d, now %d", jobs[i].id, jobs[i].min_nodes,
               jobs[i].max_nodes, jobs[i].cur_nodes);
      return -1;
    }
  int *order = malloc((size_t)(njobs > 0 ? njobs : 1) * sizeof *order);
  if (!order) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (int i = 0; i < njobs; i++) order[i] = i;
  sort_jobs = jobs;
  qsort(order, (size_t)njobs, sizeof *order, by_arrival);
  int free_nodes = nodes;
  /* Running jobs first, in arrival order: they keep what they have. */
  for (int k = 0; k < njobs; k++) {
    const gs_cluster_job *j = &jobs[order[k]];
    sizes[order[k]] = 0;
    if (j->cur_nodes == 0) continue;
    int want = j->cur_nodes > j->max_nodes ? j->max_nodes : j->cur_nodes;
    if (want < j->min_nodes) want = j->min_nodes;
    if (want > free_nodes) want = free_nodes;
    if (want >= j->min_nodes) {
      sizes[order[k]] = want;
      free_nodes -= want;
    }
  }
  /* Then the queue, first come first served. */
  for (int k = 0; k < njobs; k++) {
    const gs_cluster_job *j = &jobs[order[k]];
    if (j->cur_nodes > 0) continue;
    int want = j->max_nodes < nodes ? j->max_nodes : nodes;
    if (want < j->min_nodes || want > free_nodes) break;
    sizes[order[k]] = want;
    free_nodes -= want;
  }
  free(order);
  return 0;
}
