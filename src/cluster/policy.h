/* Cluster policies: how many whole nodes each job gets (issue 39).
 *
 * PLACEHOLDER of branch dormmgr: the declarations are the interface agreed
 * with the policy and simulator work (src/cluster/policy*.c there), which
 * replaces this header and policy_placeholder.c at the merge. */
#ifndef GS_CLUSTER_POLICY_H
#define GS_CLUSTER_POLICY_H

#include <stddef.h>

typedef struct gs_cluster_job {
  int id; int min_nodes, max_nodes; double weight; int cur_nodes; /* 0 = not running */
  double submit_time; double progress; /* 0..1 or -1 */
  const double *speed; /* speed[n], n=0..max_nodes, or NULL = linear */
  int restarts;
} gs_cluster_job;
typedef struct gs_cluster_policy_opts { double restart_penalty_s, time_limit_s, fairness_weight, adjust_weight; } gs_cluster_policy_opts;
typedef struct gs_cluster_policy_report { double objective, gap; double solve_ms; int status; } gs_cluster_policy_report;

/* Chooses sizes[i] (0, or min_nodes..max_nodes of jobs[i]) for every job so
 * that their sum is at most nodes. Returns 0, or -1 with err naming what is
 * wrong (an unknown policy, a bad job). */
int gs_cluster_allocate(const char *name, const gs_cluster_job *jobs, int njobs, int nodes,
                        const gs_cluster_policy_opts *opts, int *sizes,
                        gs_cluster_policy_report *rep, char *err, size_t errlen);
/* Whether name is a policy gs_cluster_allocate knows. */
int gs_cluster_policy_known(const char *name);

#endif
