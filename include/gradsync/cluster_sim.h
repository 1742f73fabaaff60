/*
 * The cluster simulator (issue 39; docs/CLUSTER.md, "Sharing a cluster:
 * policies and the simulator"): replays a trace of training jobs on a pool
 * of whole nodes, event by event (arrivals, completions, a periodic
 * re-allocation, node loss), under one of the cluster manager's allocation
 * policies (static, dorm, goodput; src/cluster/policy.h), charging a restart
 * penalty per resize, and measures what Dorm's and Pollux's evaluations
 * measure: utilisation, fairness loss (Dorm), finish-time fairness (Themis'
 * rho), mean and p99 job completion time, makespan.
 *
 * Library gradsync_cluster (src/cluster); no MPI. Not in the umbrella
 * header. Messages go to the caller's err buffer in the library's terms (a
 * file and line, a job, a column); the caller prints them.
 */
#ifndef GRADSYNC_CLUSTER_SIM_H
#define GRADSYNC_CLUSTER_SIM_H

#include <stddef.h>
#include <stdio.h>

#include "gradsync/cluster_manager.h" /* gs_cluster_shares, GS_CLUSTER_ACCOUNT_MAX */

#ifdef __cplusplus
extern "C" {
#endif

#define GS_CSIM_NAME_MAX 64

/* One job of a workload. speed[n] (n = 0..max_nodes; speed[0] = 0, and 0
 * below min_nodes) is its throughput in work units per second on n whole
 * nodes; work is the total it must do. */
typedef struct gs_csim_job {
  char name[GS_CSIM_NAME_MAX];
  char model[GS_CSIM_NAME_MAX];
  double submit;      /* seconds from the trace's start */
  double work;        /* work units (iterations or samples) */
  int min_nodes, max_nodes, req_nodes;
  double weight;
  char user[GS_CLUSTER_NAME_MAX];       /* its user ("": the one default user) */
  char account[GS_CLUSTER_ACCOUNT_MAX]; /* its account's path ("": none) */
  double commit_work; /* > 0: this job commits every commit_work of its
                         work under the manager's protocol, in place of
                         gs_csim_opts.commit_work (0: the run's) */
  double step_work;   /* the work of one step (a speed table's
                         samples_per_step: the global batch; 0: not known),
                         which spaces its checks under commits by time
                         (gs_csim_opts.commit_every_s) */
  double *speed;      /* owned by the workload */
  double *start_s;    /* the seconds a start (first, or after a resize) on
                         n nodes makes no progress, [n]; NULL: the
                         simulator's start and restart penalties */
  double *end_s;      /* the seconds from its last step to its exit on n
                         nodes (gradsync train's final evaluation and save:
                         the program's time less its training's), [n],
                         paid once, at its end, holding its nodes; a
                         resize does not pay it. NULL: none */
  int line;           /* the workload file's line */
} gs_csim_job;

typedef struct gs_csim_workload {
  gs_csim_job *jobs;
  int njobs;
  int nodes;          /* the pool it was built for (sizes are capped at it) */
  char kind[16];      /* "pollux" or "table" */
} gs_csim_workload;

/* Reads a workload for a pool of `nodes` nodes of `gpus_per_node` GPUs.
 * Two formats, told apart by the header line:
 *  - Pollux's (name,time,application,num_replicas,batch_size): speeds from
 *    the artifact's step-time tables under `tables` (a directory with
 *    APP/placements.csv, APP/scalability.csv, APP/validation-BATCH.csv;
 *    NULL: ../traces beside the workload's directory).
 *  - gradsync's (name,time,model,nodes,samples[,min_nodes,max_nodes,weight,
 *    commit_samples,user,account]): speeds from `tables`, a CSV
 *    model,nodes,step_time_s,samples_per_step[,start_s,end_s] (required;
 *    gpus_per_node is not used). start_s, where the
 *    table has it, is a start's cost on that many nodes (interpolated as
 *    speeds are), in place of the simulator's penalties; end_s the time
 *    from a job's last step to its exit on that many nodes, paid once. commit_samples, a
 *    job's own commit interval (its --commit-every times its global batch;
 *    0 or empty: the run's --commit-work), sets its commit_work.
 * Either format may have the columns user (a name as `gradsync submit
 * --user` takes) and account (a path as --account takes, science/physics):
 * the policies then share the pool by gs_csim_opts.shares' fair-share tree
 * and limits, as the manager does. Empty: the default user, no account.
 * Returns 0, or -1 with a message naming the file, line and column. */
int gs_csim_load(const char *workload, const char *tables, int nodes, int gpus_per_node,
                 gs_csim_workload *w, char *err, size_t errlen);
void gs_csim_workload_free(gs_csim_workload *w);

typedef struct gs_csim_opts {
  int nodes;                  /* the pool, >= 1 */
  const char *policy;         /* static | dorm | goodput */
  double restart_penalty_s;   /* charged per resize and per resumption (default 30) */
  double start_penalty_s;     /* charged at a job's first start: its launch,
                                 loading and set-up before its first step
                                 (default 0: free) */
  double interval_s;          /* periodic re-allocation (default 60; 0 = none) */
  long max_periodic;          /* periodic rounds a replay may take, where they
                                 are events, before it stops with an error
                                 naming --interval (0, default: 10 million) */
  /* > 0: the policies see a job's speed curve only as the manager learns
   * it: a size's speed once the job has done learn_work of its work there
   * in one launch, after its start-up (the manager: two commits of one
   * launch), the curve fitted to the sizes known (gs_cluster_speed_fit, the
   * manager's Optimus fit); before the first, no curve (speed taken as
   * linear) and no known work. With commit_work, a job whose commits are
   * its own (gs_csim_job.commit_work) learns after as many of its own
   * commits as learn_work is of the run's. 0 (default): the table's curve
   * from the start, an oracle. */
  double learn_work;
  /* With learn_work: 1, a job that has learned nothing of itself starts
   * from the curve of the job of its model (gs_csim_job.model) that learned
   * the most sizes (the manager's --share-speeds), and its work is known;
   * 0 (default): none. */
  int share_speeds;
  /* With learn_work or learn_s: 1, a job's resize is priced, before one of
   * its own is measured, as the manager prices it by default (its
   * --restart-penalty not given): its measured start-up plus the stop part
   * of the resizes measured in the pool, else the pool's mean resize,
   * else its mean start-up plus the stop, else restart_penalty_s
   * (gs_cluster_restart_prior); a job's start-up is measured at its first
   * launch as its resizes are. 0 (default): restart_penalty_s. */
  int restart_prior;
  /* >= 0: interference between nodes that share a machine (the emulated
   * cluster's, whose nodes time-share one host's cores and caches): a job
   * computing on n of the pool's N nodes while B nodes compute in all runs
   * at its speed / (1 + interference (B - n) / (N - n)), the table's speed
   * alone and 1 / (1 + interference) of it with every other node busy.
   * Measured, not fitted: bench/cluster/interference.sh. 0 (default): none,
   * as on a cluster of real machines. */
  double interference;
  /* > 0: resizes follow the manager's protocol (docs/CLUSTER_MANAGER.md,
   * "Resizing a job"): a job commits every commit_work of its work (the
   * manager's --commit-every steps times the samples of a step; never at
   * its last step); a change of its partition is noticed by its supervisor
   * at its next discovery (below) and takes effect at its next commit,
   * after its start-up if it is in one, the job running on its old nodes
   * until then (and just ending, if its end comes first); a node is free
   * only once no launch uses it, so a grow or start waits for the job that
   * gave the node up to relaunch; a preempted job, or one that lost a
   * node, resumes from its last commit. 0 (default): a resize takes effect
   * at once and its nodes move at once (Pollux's simulator's model). */
  double commit_work;
  /* > 0, in place of commit_work: the manager's protocol with commits by
   * time, its default for gradsync train jobs since 2026-12-05 (`cluster
   * serve --commit-every 10s`; docs/TRAIN.md, "By time"): a job commits
   * every commit_every_s seconds of its launch's training, and its ranks
   * meet at checks every check_every_s of training (at least one step:
   * step_work at the table's speed), from the end of its start-up. A stop
   * asked at a discovery is taken at the next check, with a commit there,
   * so a resize loses no work; a preempted job, or one whose launch lost a
   * node, resumes from its last commit by time. The policies see a job's
   * progress as it is (its report at every check), and with learn_work or
   * learn_s a size's speed is learned after two checks of one launch there
   * (the manager's two reports), at least learn_s of training. The other
   * settings of the protocol (discovery, launch delay) are commit_work's. */
  double commit_every_s;
  double check_every_s;       /* with commit_every_s: seconds of training between
                                 a job's checks (default 0.5, train's) */
  /* > 0: as learn_work, a size's speed learned after learn_s seconds of
   * training in one launch (with commit_every_s: and two checks). */
  double learn_s;
  double discover_every_s;    /* with either protocol: the supervisors'
                                 discovery period, from each launch (default 1,
                                 the manager's; 0: at once) */
  double launch_delay_s;      /* with either protocol: from the manager's start
                                 of a job (first, or a resumption) to its
                                 supervisor's launch, part of the start-up: a
                                 change of its partition before then costs
                                 nothing, and a supervisor's relaunch after a
                                 stop does not pay it (default 0) */
  double time_limit_s;        /* dorm's solver limit per round (default 0.05) */
  double fairness_weight;     /* dorm (default 0.5) */
  double adjust_weight;       /* dorm (default 0.02) */
  double fairness_window_s;   /* dorm: > 0, fairness over time: a job's target is
                                 its fair share plus the node-seconds of share it
                                 was owed and not given over this many seconds
                                 (gs_cluster_policy_opts.fairness_window_s);
                                 0 (default): the share now */
  double loss_time_s;         /* node loss: at this time ... */
  int loss_nodes;             /* ... this many nodes leave the pool (0 = none) */
  FILE *trace;                /* optional: the run as CSV lines (below) */
  FILE *round_log;            /* optional: each policy round as a JSON line
                                 (gs_cluster_round_log, as cluster serve
                                 --round-log writes the manager's) */
  /* The users' and accounts' shares and limits (serve's --user-share,
   * --user-limit, --account-share, --account-limit); the jobs' user and
   * account columns place them in the tree. NULL: every user and account
   * a share of 1, no limits. Where no job names a user or an account and
   * shares is NULL, the jobs' own weights, as before these existed. */
  const gs_cluster_shares *shares;
  /* Optional, w->njobs each (NULL: not written): a job's node-seconds (its
   * partition's size over time, restarts included), and its fair share's
   * node-seconds (the weighted max-min fair share of the pool,
   * gs_cluster_fair_share, under the tree's weights and the limits, while
   * it is in the system): what a fair-share report sums per account. */
  double *job_node_s, *job_fair_node_s;
  double *job_jct_s;          /* optional, w->njobs: each job's completion time
                                 (finish - submit), -1 for one never done */
} gs_csim_opts;

/* Sets the defaults above (nodes, policy and trace left 0/NULL). */
void gs_csim_defaults(gs_csim_opts *o);

typedef struct gs_csim_result {
  int jobs, done;             /* jobs in the workload, jobs that finished */
  char unfinished[512];       /* the names of the jobs - done that never finished
                                 (none could run them after a node loss),
                                 comma-separated, "and N more" past the room */
  double makespan_s;          /* last completion - first submission */
  double jct_mean_s, jct_p50_s, jct_p99_s;
  double util;                /* allocated node-seconds / the pool's node-seconds over
                                 the makespan (nodes * makespan less a node loss) */
  double util_busy;           /* the same without restarts' node-seconds */
  double fairness_loss;       /* Dorm's, averaged over time while jobs are in */
  double ftf_max, ftf_mean;   /* Themis' finish-time fairness rho */
  int resizes;                /* launches after a job's first: resizes and
                                 resumptions (each charged a restart) */
  int rounds;                 /* policy rounds */
  double policy_ms_mean, policy_ms_max;
  double gap_max;             /* dorm: the largest MIP gap reported (0 proven) */
  int fallbacks;              /* dorm: rounds without a GLPK solution in time */
  int exact_rounds;           /* dorm: rounds whose start was the exact optimum */
  double jobs_per_round;      /* jobs in the system per policy round, on average */
  double sim_s;               /* wall time of the simulation */
} gs_csim_result;

/* What gs_csim_run refuses before it starts: the pool, the policy, a job
 * that can never run (min_nodes above the pool), negative options, and a
 * job that alone, at its best speed, needs more periodic rounds than
 * o->max_periodic. Returns 0, or -1 with a message. */
int gs_csim_check(const gs_csim_workload *w, const gs_csim_opts *o, char *err, size_t errlen);

/* Runs the simulation. With o->trace, writes CSV lines:
 *   node,NODE,JOB,T0,T1        node NODE belonged to job JOB (an index in
 *                              the workload) from T0 to T1 (the Gantt chart)
 *   util,T,USED,BUSY,ACTIVE    from time T: nodes allocated, nodes allocated
 *                              outside restarts, jobs in the system
 *   job,JOB,NAME,SUBMIT,START,END,JCT,RESTARTS
 * Returns 0, or -1 with a message (a policy's error, no memory, what
 * gs_csim_check refuses, before the run starts). */
int gs_csim_run(const gs_csim_workload *w, const gs_csim_opts *o, gs_csim_result *r, char *err,
                size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_CLUSTER_SIM_H */
