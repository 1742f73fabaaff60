/*
 * The cluster manager's allocation policies (issue 39; docs/CLUSTER.md,
 * "Sharing a cluster: policies and the simulator"). Internal header of
 * src/cluster, shared by the manager (`gradsync cluster`) and the cluster
 * simulator (cluster_sim.c). No MPI: a policy is arithmetic on job
 * descriptions.
 *
 * One round of a policy takes the jobs that are in the system (running or
 * waiting) and the size of the pool, and chooses every job's partition
 * size: 0 (wait, or be preempted) or a whole number of nodes within the
 * job's [min_nodes, max_nodes]. The caller owns every array; a policy keeps
 * nothing between rounds (what it needs of the past, the current sizes, is
 * in the jobs).
 *
 *   static   each job at its requested size (req_nodes, or max_nodes when
 *            req_nodes is 0), in FIFO order of submission, as a
 *            partitioning manager without resizing would: a running job
 *            keeps its size; a waiting job starts only when its size fits
 *            and every job submitted before it is running (no backfill).
 *   dorm     Dorm's utilisation-fairness MILP with an adjustment cost
 *            (Sun et al. 2017), solved by GLPK within time_limit_s.
 *   goodput  Optimus/Pollux-style marginal-gain allocation on each job's
 *            speed curve, with a restart penalty.
 */
#ifndef GS_CLUSTER_POLICY_H
#define GS_CLUSTER_POLICY_H

#include <stddef.h>
#include <stdio.h>

typedef struct gs_cluster_job {
  int id;                   /* caller's id, unique */
  int min_nodes, max_nodes; /* 1 <= min <= max */
  double weight;            /* fairness weight, > 0 (default 1) */
  int cur_nodes;            /* current partition size; 0 = waiting/not running.
                               A start or grow answered by an earlier round
                               and waiting for nodes still being given back
                               is given at the size answered (the manager's
                               job.granted, the simulator's sim_job.granted):
                               changing it is priced as a resize is */
  double submit_time;       /* seconds */
  double progress;          /* fraction done 0..1 (or -1 unknown) */
  const double *speed;      /* speed[n] for n = 0..max_nodes: work units/s on n nodes
                               (speed[0] = 0); NULL = assume linear */
  int restarts;
  /* Added after the shared interface: */
  int req_nodes;            /* the size the user asked for (static's size); 0 = max_nodes */
  double work;              /* the job's total work in speed's units (0 = unknown):
                               with progress, how long a resize has to pay back */
  double restart_s;         /* what a resize has cost this job, measured (the
                               manager: from the stop request to its training
                               again, gs_cluster_restart_measure); 0 = not
                               measured: the options' restart_penalty_s
                               (gs_cluster_restart_s) */
  int user;                 /* its user's index in opts->user_max_nodes, for per-user
                               limits; -1 (or any value while the options carry no
                               limits): none */
  int account;              /* its account's index in opts->account_max_nodes, for
                               per-account limits (its account's and every
                               ancestor's, opts->account_parent); -1 (or any value
                               while the options carry none): none */
  const double *restart_at; /* restart_at[n], n = 0..max_nodes: what a restart onto n
                               nodes costs it, measured there or fitted over the sizes
                               measured (gs_cluster_restart_fit; 0: not known); NULL:
                               restart_s whatever the size */
  double owed_s;            /* the node-seconds of fair share it has been owed and
                               not given while in the system (its fair share's
                               node-seconds less its partitions'; < 0: it held more
                               than its share), read by dorm with a fairness
                               window (gs_cluster_policy_opts.fairness_window_s) */
  double run_s;             /* the seconds it has run so far (its attained service;
                               0: not known): a running job whose remaining time is
                               not known is expected to run as long again
                               (gs_cluster_unknown_remaining_s) */
} gs_cluster_job;

typedef struct gs_cluster_policy_opts {
  double restart_penalty_s; /* cost charged per resize */
  double time_limit_s;      /* solver time limit (dorm) */
  double fairness_weight;   /* dorm: trade-off between utilisation and fairness */
  double adjust_weight;     /* dorm: adjustment cost weight */
  /* Added after the shared interface: */
  double interval_s;        /* goodput: the time until the next round, over which a
                               resize must pay back its restart (0: 60 s) */
  int dorm_start;           /* dorm's first incumbent for GLPK: 0 the exact dynamic
                               programme (over every size when jobs * nodes * sizes <= 4e6,
                               else over each job's breakpoints); 1 the greedy; 2 none
                               (GLPK alone); 3 the breakpoints' programme always (tests) */
  /* Per-user limits (as Slurm's MaxNodesPerUser): user u's jobs hold at
   * most user_max_nodes[u] nodes together (0: no limit), u in 0..nusers-1
   * (gs_cluster_job.user). NULL: no limits (the defaults). Every policy
   * keeps to them; the fair shares are capped by them
   * (gs_cluster_fair_share). */
  const int *user_max_nodes;
  int nusers;
  /* Per-account limits (as Slurm's GrpTRES=node=N on an account): account
   * a's jobs, whoever's, hold at most account_max_nodes[a] nodes together
   * (0: no limit), a in 0..naccounts-1 (gs_cluster_job.account). NULL: none.
   * Kept by every policy as the users' are, both where both apply. */
  const int *account_max_nodes;
  int naccounts;
  /* Nested accounts (Slurm's parent accounts): account a's parent is
   * account_parent[a] (in 0..naccounts-1), or -1 for a top-level account;
   * at most GS_CLUSTER_ACCOUNT_DEPTH levels. A limit binds the jobs of its
   * account and of every account under it (GrpTRES=node=N is inherited
   * so): a job keeps its account's limit and every ancestor's. NULL: every
   * account top-level. */
  const int *account_parent;
  /* dorm: > 0, fairness over time. A job's target is its fair share plus
   * owed_s / fairness_window_s nodes (gs_cluster_fair_target): a job kept
   * below its share, waiting because it needs more nodes than its share,
   * is owed nodes and runs once its debt is worth running for; one that
   * held more than its share owes them back. Over the window the
   * node-seconds are paid back. 0 (default): the share now, Dorm's. */
  double fairness_window_s;
} gs_cluster_policy_opts;

/* The most levels of nested accounts (science/physics/hep is 3), and the
 * most limit slots a job counts against: its user's and one an account
 * level (gs_cluster_limit_slots_of). */
#define GS_CLUSTER_ACCOUNT_DEPTH 8
#define GS_CLUSTER_JOB_SLOTS (1 + GS_CLUSTER_ACCOUNT_DEPTH)

typedef struct gs_cluster_policy_report {
  double objective, gap; /* MILP objective and relative gap (0 when proven optimal) */
  double solve_ms;
  int status;            /* 0 ok, else error */
  /* Added after the shared interface: */
  int proven;            /* dorm: 1 when GLPK proved the solution optimal */
  int fallback;          /* dorm: 1 when no MILP solution came back in time and
                            its start was used */
  int exact;             /* dorm: 1 when the start was the exact dynamic programme
                            (the answer is optimal whatever gap GLPK's own bound
                            leaves) */
} gs_cluster_policy_report;

/* ---- Fair shares of users and accounts (fairshare.c) ----------------------
 * One round's users and accounts for the policies, shared by the manager
 * and the simulator. A job of user users[i] ("" or "-": the default user)
 * charged to account accounts[i] (a path, "" or NULL: none). */
typedef struct gs_cluster_shares gs_cluster_shares;

typedef struct gs_cluster_fairshare {
  int *user_lim;      /* [n]: user slot i's limit (0: none) */
  int *aparent, *alim; /* the round's accounts: parent (-1: top-level), own limit */
  double *ashare;     /* and share */
  const char **apath; /* an account's path is apath[a][0..alen[a]) */
  size_t *alen;
  int naccounts;
} gs_cluster_fairshare;

/* A user's most nodes (--user-limit, "*" for users not named; 0: none). */
int gs_cluster_shares_user_limit(const gs_cluster_shares *c, const char *user);
/* An account's own most nodes (--account-limit; "*" for top-level accounts
 * not named; 0: none, and for "" ). */
int gs_cluster_shares_account_limit(const gs_cluster_shares *c, const char *account);
/* Sets in[i].user (the index of the round's first job of its user),
 * in[i].account (the round's accounts: each job's and every ancestor,
 * numbered as the jobs first name them, a parent before its sub-accounts)
 * and in[i].weight (the fair-share tree's, gs_cluster_account_tree_weights:
 * the jobs' own with one user and no account), and, where c has limits,
 * opts' user and account limits (pointing into *fs). c may be NULL (no
 * shares, no limits: only the users). *fs holds the round's arrays until
 * gs_cluster_fairshare_free. Returns 0, or -1 out of memory (the jobs'
 * own weights and no limits then). */
typedef struct gs_cluster_usage gs_cluster_usage;
int gs_cluster_fairshare_round(const gs_cluster_shares *c, gs_cluster_job *in, int n,
                               const char *const *users, const char *const *accounts,
                               const gs_cluster_usage *usage, gs_cluster_fairshare *fs,
                               gs_cluster_policy_opts *opts);
void gs_cluster_fairshare_free(gs_cluster_fairshare *fs);

/* Usage decayed by a half-life (Slurm's PriorityDecayHalfLife and its
 * classic fair-share factor). The owners' usage to now, node-seconds each
 * worth 2^(-age / half-life): user[k] ("" or "-": the default user)
 * charged to account[k] ("" or NULL: none) used node_s[k] (owners may
 * repeat: their entries add up). Given to gs_cluster_fairshare_round (with
 * n > 0), every share of the tree at one level (a top-level account, a
 * sub-account, a user in an account or without one) is multiplied by
 * 2^(-u/s), u the part of its parent's usage (the pool's: everyone's) its
 * own subtree used, s its share of its parent's part among the siblings
 * with jobs in the round, at least GS_CLUSTER_USAGE_FACTOR_MIN: an owner
 * that used more than its share gets less of the pool until its usage
 * decays, one that used nothing keeps its share. With no usage, or with
 * every owner at its share, the tree's weights are as without. */
struct gs_cluster_usage {
  const char *const *user;
  const char *const *account;
  const double *node_s;
  int n;
};
#define GS_CLUSTER_USAGE_FACTOR_MIN (1.0 / 1024)
/* Decayed usage `usage` (node-seconds, worth 2^(-age / halflife_s)) after
 * dt more seconds on `nodes` nodes: the usage it had, decayed by dt, plus
 * the integral of the new nodes' decayed worth. Exact for constant nodes,
 * so a negative dt takes back what the same positive dt added (never below
 * 0). halflife_s <= 0: no decay (usage + nodes * dt). */
double gs_cluster_usage_decay(double usage, double nodes, double dt, double halflife_s);

/* Defaults of the options: restart 30 s, time limit 0.05 s, fairness
 * weight 0.5, adjustment weight 0.02, interval 60 s. */
void gs_cluster_policy_defaults(gs_cluster_policy_opts *o);

/* Fills sizes[i] (0 or within [min,max]) for jobs[0..njobs-1], sum(sizes) <= nodes.
 * name: "static", "dorm", "goodput". Returns 0, or -1 with a message in err.
 * opts may be NULL (the defaults); rep may be NULL. */
int gs_cluster_allocate(const char *name, const gs_cluster_job *jobs, int njobs, int nodes,
                        const gs_cluster_policy_opts *opts, int *sizes,
                        gs_cluster_policy_report *rep, char *err, size_t errlen);
int gs_cluster_policy_known(const char *name);

/* The policy rounds' log (round_log.c): appends to f one JSON line of the
 * round at time t (the manager: the wall clock; the simulator: its own
 * seconds) on `nodes` usable nodes: each job as the policy was given it
 * (names[i] optional), its answer sizes[i], the report's solve time and
 * gap; with `error` the policy's failure instead of an answer. f NULL:
 * nothing. Returns 0, or -1 with errno set (ENOMEM, or the write's) if the
 * line could not be written. */
int gs_cluster_round_log(FILE *f, double t, const char *policy, int nodes,
                         const gs_cluster_job *jobs, const char *const *names, int n,
                         const int *sizes, const gs_cluster_policy_report *rep,
                         const char *error);
/* Whether a policy's answer changes as the jobs progress, with nothing
 * else changed (goodput's: its admission order is the remaining time).
 * static's depends only on the jobs, their sizes and the pool. dorm reads
 * progress only for its restart prices (gs_cluster_dorm_restart_price),
 * and those only rise as a job runs on at its size: when its last answer
 * was the current sizes, rising prices keep it optimal (policy_dorm.c),
 * until the jobs, their sizes, their curves or the pool change. (A resize
 * it asked for and that has not happened yet is not weighed again.) With a
 * fairness window dorm's targets move as time passes (what each job is
 * owed): the simulator then runs every periodic round, as the manager
 * always does. */
int gs_cluster_policy_reads_progress(const char *name);
/* The policies' names, "static, dorm, goodput", for messages. */
const char *gs_cluster_policy_names(void);

/* ---- What the policies and the simulator share --------------------------- */

/* Weighted max-min fair share of `nodes` among the jobs (fractional nodes,
 * water-filling: each job gets nodes * w_i / sum(w) unless that exceeds its
 * max_nodes, whose surplus goes to the others in proportion to their
 * weights). This is Dorm's fair share (DRF with one resource, whole nodes;
 * Sun et al. 2017, Sec. III-B) with weights. share[i] in nodes. With
 * limits in o (NULL: none), an account or a user whose jobs' shares would
 * sum above its limit gets its limit, shared among its own jobs the same
 * way (an account's keeping its sub-accounts' and users' limits: the
 * outermost limit is filled first), and the rest of the pool is shared
 * among the others. */
void gs_cluster_fair_share(const gs_cluster_job *jobs, int njobs, int nodes,
                           const gs_cluster_policy_opts *o, double *share);

/* dorm's fairness target of job j with fair share `share`: the share, or
 * with a fairness window (o->fairness_window_s > 0) the share plus
 * j->owed_s / window, within [0, the most the job can hold: its
 * max_nodes, its limits, the pool]. */
double gs_cluster_fair_target(const gs_cluster_job *j, double share, int nodes,
                              const gs_cluster_policy_opts *o);

/* Job j's user's limit under o: its user_max_nodes entry, or INT_MAX when
 * o carries no limits, the job has no user or the user no limit;
 * gs_cluster_account_limit the smallest of its account's and its ancestor
 * accounts' (INT_MAX: none); gs_cluster_job_limit the smaller of the two
 * (the most job j can hold alone). */
int gs_cluster_user_limit(const gs_cluster_job *j, const gs_cluster_policy_opts *o);
int gs_cluster_account_limit(const gs_cluster_job *j, const gs_cluster_policy_opts *o);
int gs_cluster_job_limit(const gs_cluster_job *j, const gs_cluster_policy_opts *o);

/* The limits as slots of a count of held nodes: the users' (0..nusers-1)
 * then the accounts' (nusers..), when o carries them. gs_cluster_limit_slots
 * is how many entries such a count needs (0: no limits; gs_cluster_limit_room
 * and _take read none); gs_cluster_limit_of_slot slot g's limit (INT_MAX:
 * none); gs_cluster_limit_slots_of the slots job j counts against, written to
 * slots (GS_CLUSTER_JOB_SLOTS entries at most), returning how many: its
 * user's where limited, then its account's and each ancestor account's
 * that is limited, the innermost first. gs_cluster_account_depth is
 * account a's level (0: top-level), or -1 for a parent out of range or a
 * chain deeper than GS_CLUSTER_ACCOUNT_DEPTH (a cycle). */
int gs_cluster_limit_slots(const gs_cluster_policy_opts *o);
int gs_cluster_limit_of_slot(const gs_cluster_policy_opts *o, int slot);
int gs_cluster_limit_slots_of(const gs_cluster_job *j, const gs_cluster_policy_opts *o,
                              int *slots);
int gs_cluster_account_depth(const gs_cluster_policy_opts *o, int a);

/* The nodes job j may still take under its user's and its accounts'
 * limits when each slot's jobs hold held[g] (INT_MAX: no limit applies);
 * gs_cluster_limit_take adds n to each of its slots' held. */
int gs_cluster_limit_room(const gs_cluster_job *j, const gs_cluster_policy_opts *o,
                          const int *held);
void gs_cluster_limit_take(const gs_cluster_job *j, const gs_cluster_policy_opts *o, int *held,
                           int n);

/* Whether sizes keep every user's and account's limit (their jobs' sizes
 * summed, an account's over its sub-accounts' jobs too). */
int gs_cluster_limits_kept(const gs_cluster_job *jobs, int njobs, const int *sizes,
                           const gs_cluster_policy_opts *o);

/* Dorm's fairness loss of an allocation: sum_i |x_i - f_i| / nodes, the
 * total deviation of the jobs' shares of the cluster from their fair shares
 * (share from gs_cluster_fair_share). */
double gs_cluster_fairness_loss(const int *sizes, const double *share, int njobs, int nodes);

/* Dorm's objective for sizes (see policy_dorm.c):
 *   U - fairness_weight * F - C - OWED_PENALTY * (owed jobs left at 0)
 * U = sum x_i / nodes, F the fairness loss above, C the sum of the running
 * jobs' adjustment costs (gs_cluster_dorm_adjust_cost), the owed jobs
 * gs_cluster_dorm_owed's. The MILP maximises it; tests evaluate it
 * directly on every allocation. */
double gs_cluster_dorm_objective(const gs_cluster_job *jobs, int njobs, int nodes,
                                 const gs_cluster_policy_opts *o, const double *share,
                                 const int *sizes);

/* The restart the policies charge job j: its measured restart_s when it
 * has one, else restart_penalty_s; 0 whenever restart_penalty_s is 0 (the
 * user asked for no price: Dorm's objective as the paper has it). */
double gs_cluster_restart_s(const gs_cluster_job *j, const gs_cluster_policy_opts *o);
/* The same for a restart onto n nodes: restart_at[n] where it is known,
 * else gs_cluster_restart_s (0 whenever restart_penalty_s is 0). goodput
 * prices a growth, and a preempted job's return, at its new size; dorm
 * keeps one price a job (its MILP's cost is linear in the nodes). */
double gs_cluster_restart_at(const gs_cluster_job *j, const gs_cluster_policy_opts *o, int n);
/* A job's restart price by size from its measured restarts: sum[n] / cnt[n]
 * where cnt[n] > 0, n = 1..top; where two sizes or more are measured the
 * others from the least-squares line a + b n through the measured sizes'
 * means (at least 0: a start-up grows with the nodes its launch reaches),
 * where one is, its mean at every size. out[0..top]; returns the sizes
 * measured (0: out all 0). */
int gs_cluster_restart_fit(const double *sum, const int *cnt, int top, double *out);

/* A resize's cost measured from its relaunch's first two commits: the stop
 * was asked for at t_ref and the relaunch resumes from sample s0 (the
 * stop's commit); it committed s1 samples at t1 and s2 at t2 (t2 > t1, s2 >
 * s1). At the speed between the two commits, the samples from s0 to s1
 * took (s1 - s0) / r of the t1 - t_ref seconds; the rest is the resize:
 * reaching the commit and stopping (the nodes it grows to idle meanwhile),
 * ssh and MPI start-up, the data and the model loaded again. Returns it
 * (>= 0), or -1 when the commits cannot say (not increasing, before
 * t_ref). */
double gs_cluster_restart_measure(double t_ref, double s0, double t1, double s1, double t2,
                                  double s2);

/* What a pool has measured of its jobs' resizes (n jobs, the ended ones
 * too; restart[i] the mean of job i's measured resizes, startup[i] its
 * measured start-up from nothing, both by gs_cluster_restart_measure; < 0
 * or not finite: not measured), made once a policy round: the means of the
 * resizes and of the start-ups, and the stop's part of a resize (a resize
 * is a stop and a start): the mean of restart[i] - startup[i] (at least 0)
 * over the jobs with both, 0 while none has both. */
typedef struct gs_cluster_restart_pool {
  double restart, startup, stop;
  int nrestart, nstartup;
} gs_cluster_restart_pool;
void gs_cluster_restart_pool_fit(const double *restart, const double *startup, int n,
                                 gs_cluster_restart_pool *out);
/* What a resize is expected to cost a job before its own is measured:
 * its start-up (< 0: not measured) plus the pool's stop; without it, the
 * pool's mean resize, else its mean start-up plus the stop, else
 * `fallback` (nothing measured: --restart-penalty's default). */
double gs_cluster_restart_prior(const gs_cluster_restart_pool *pool, double startup,
                                double fallback);

/* Per-user fair shares (a fair-share tree of one level, as Slurm's users
 * under one account): the pool is shared among the users with jobs in the
 * round in proportion to their shares, and each user's part among its own
 * jobs by their weights. Writes the weight each job has in a flat policy:
 *   out[i] = W (s_u / S) (w_i / W_u),
 * W the sum of every job's weight, S the sum of the shares of the users
 * present, W_u the sum of user u's jobs' weights; with one user out = w.
 * user[i] in 0..n-1 names job i's user, share[i] > 0 is that user's share
 * (the same for all its jobs). Returns -1 without memory (out = w). */
int gs_cluster_user_weights(int n, const int *user, const double *share, const double *w,
                            double *out);

/* The same with accounts above the users (Slurm's fair-share tree of two
 * levels): the root's children are the accounts and the users whose jobs
 * name no account; an account's children its users. Each node's part of
 * its parent's is its share over the sum of its present siblings' shares,
 * and a user's part goes to its jobs by their weights:
 *   out[i] = W (s_top / S_root) (s_u / S_account) (w_i / W_u)
 * (the middle factor 1 for a user under the root). account[i] in 0..n-1
 * names job i's account, or -1 for none; account_share[i] > 0 that
 * account's share (read where account[i] >= 0). user[i] and share[i] as
 * above; a user's jobs in two accounts are two nodes of the tree. With no
 * account this is gs_cluster_user_weights. Returns -1 without memory. It
 * is gs_cluster_account_tree_weights with every account top-level. */
int gs_cluster_tree_weights(int n, const int *account, const double *account_share,
                            const int *user, const double *share, const double *w, double *out);

/* The fair-share tree of any depth (Slurm's parent accounts): accounts
 * 0..naccounts-1, account a's parent account_parent[a] (-1: the root;
 * NULL: every account top-level) and its share account_share[a] > 0. The
 * root's children are the top-level accounts with jobs under them (at any
 * depth) and the users whose jobs name no account; an account's children
 * its sub-accounts with jobs under them and the users charged to it
 * directly (account[i], -1 for none). Each node's part of its parent's is
 * its share over the sum of its present siblings' shares, a user's part
 * goes to its jobs by their weights:
 *   out[i] = W (s_a1 / S_root) (s_a2 / S_a1) ... (s_u / S_ak) (w_i / W_u).
 * user, share and w as above. Returns -1 (out = w) without memory or for an
 * account chain deeper than GS_CLUSTER_ACCOUNT_DEPTH (a cycle). */
int gs_cluster_account_tree_weights(int n, const int *account, int naccounts,
                                    const int *account_parent, const double *account_share,
                                    const int *user, const double *share, const double *w,
                                    double *out);

/* A job's speed on n nodes (speed[n], or n with speed NULL), n in 0..max. */
double gs_cluster_speed(const gs_cluster_job *j, int n);

/* A job's remaining time on n nodes, work * (1 - progress) / speed(n), when
 * its work, progress and that speed are known; `otherwise` when not. The
 * horizon over which goodput and dorm weigh a resize against its restart. */
double gs_cluster_remaining_s(const gs_cluster_job *j, int n, double otherwise);

/* The horizon of a running job whose remaining time is not known: the time
 * to the next round, interval_s (60 s when that is 0). */
double gs_cluster_unknown_horizon_s(const gs_cluster_policy_opts *o);
/* The expected remaining time of running job j whose work or progress is
 * not known: as long as it has run so far (j->run_s: least attained
 * service, as Tiresias estimates an unknown duration; a job that ran an
 * hour is not about to end), at least gs_cluster_unknown_horizon_s. */
double gs_cluster_unknown_remaining_s(const gs_cluster_job *j, const gs_cluster_policy_opts *o);

/* Sorts order[0..n) (indices into jobs) by submission time, ties by id:
 * the FIFO order of static's queue and of dorm's owed minimums. Not
 * reentrant (qsort's comparator reads the jobs through a static). */
void gs_cluster_fifo_sort(const gs_cluster_job *jobs, int *order, int n);

/* dorm's owed minimum: owed[i] = 1 for a waiting job (cur_nodes 0) whose
 * --min fits within its fair share (share[i], the target dorm weighs) and
 * within the nodes left when every running job is shrunk toward its share
 * (to max(min_nodes, ceil(share)), never grown; not one whose known
 * remaining time is shorter than its restart: it ends first) and the
 * waiting jobs owed before it (FIFO) have their minimum, under the limits.
 * None with restart_penalty_s 0 (Dorm's own objective: its weights alone
 * decide). dorm gives each
 * such job at least its minimum (gs_cluster_dorm_objective charges
 * GS_CLUSTER_DORM_OWED_PENALTY for each left at 0), whatever its running
 * neighbours' restarts cost: a job below its fair share never waits for
 * jobs above theirs to end. Returns how many are owed. */
#define GS_CLUSTER_DORM_OWED_PENALTY 1e6
/* The nodes a job shrinking by `drop` gives back (the manager's and the
 * simulator's rule): of those in its partition (part[i] != 0, i < n), first
 * those its launch does not run on (launch[i] == 0: given and not started
 * on yet), then those it runs on, the highest first within each; each is
 * taken out of part. A job grown and shrunk back before its supervisor
 * relaunched it so keeps the nodes it runs on, and is not relaunched (until
 * 2026-12-07 it gave back its highest nodes, and was relaunched onto the
 * nodes it had just been given: a resize for nothing). Returns the number
 * given back (less than drop when the partition is smaller). */
int gs_cluster_shrink_nodes(char *part, const char *launch, int n, int drop);

/* The rounds' view of answers that wait for nodes being given back, the
 * manager's and the simulator's rule: jobs[i].cur_nodes holds the nodes job
 * i holds, granted[i] the size an earlier round answered it that waits (0:
 * none). Each job with granted[i] above what it holds (and within its max)
 * is given at granted[i], unless `nodes` do not hold every job at its
 * answer and the others at what they hold (a node lost or drained): then
 * none is. Returns the number of jobs given at their answer. */
int gs_cluster_keep_granted(gs_cluster_job *jobs, const int *granted, int n, int nodes);

int gs_cluster_dorm_owed(const gs_cluster_job *jobs, int njobs, int nodes,
                         const gs_cluster_policy_opts *o, const double *share,
                         unsigned char *owed);

/* dorm's price of a resize's restart, per node, in the objective's units:
 * P / (nodes * H), P the job's restart (gs_cluster_restart_s) and H the running job's remaining
 * time at its current size (gs_cluster_remaining_s; when not known,
 * gs_cluster_unknown_remaining_s: as long as it has run, at least
 * interval_s, 60 s when that is 0; at least 1 s; at most the fairness window
 * when there is one, over which the deviations it weighs are paid back). 0 for a job not running or
 * with P = 0 (Dorm's own objective, a constant adjustment weight alone). */
double gs_cluster_dorm_restart_price(const gs_cluster_job *j, int nodes,
                                     const gs_cluster_policy_opts *o);

/* dorm's cost of giving running job j x nodes instead of its cur_nodes:
 * 0 when x == cur_nodes (or the job is not running), else adjust_weight +
 * price * max(cur_nodes, x): a resize idles the larger of the two
 * partitions for the restart (the job checkpoints and relaunches; the nodes
 * it gives up are free only once it has relaunched), which over the horizon
 * H is that many node-seconds of utilisation lost. */
double gs_cluster_dorm_adjust_cost(const gs_cluster_job *j, int x, int nodes,
                                   const gs_cluster_policy_opts *o);

/* A speed curve fitted to speeds r[k] measured on n[k] nodes (k < npts;
 * repeated sizes allowed): Optimus's model 1/speed(n) = th0 + th1/n +
 * th2*n, th >= 0, by non-negative least squares on relative errors (one
 * distinct size: the line through it; two: th2 = 0). Fills out[0..max]
 * (out[0] = 0) and, if theta is not NULL, theta[0..2]. Returns 0, or -1
 * with err for no point, a size < 1, a speed not > 0, or max < 1
 * (speed_fit.c). */
int gs_cluster_speed_fit(const int *n, const double *r, int npts, int max, double *out,
                         double theta[3], char *err, size_t errlen);
/* The same for a job of which `idle` nodes' worth of ranks train on no
 * batch (a parameter-server job's servers: servers / slots): 1/speed(n) =
 * th0 + th1/(n - idle) + th2*n, and speed 0 on sizes n <= idle; a point
 * there is an error. idle 0 is gs_cluster_speed_fit. */
int gs_cluster_speed_fit_idle(const int *n, const double *r, int npts, int max, double idle,
                              double *out, double theta[3], char *err, size_t errlen);

/* ---- A job's curve before it is measured --------------------------------- */

struct gs_profile;
struct gs_cost_params;

/* What the cost model predicts of a gradsync train job on 1..max nodes of
 * `slots` ranks each (`gradsync plan --search`'s prediction, gs_search_run,
 * one worker count at a time): step_s[n], a step's time under the best
 * policy, and samples[n], its samples, from its profile (the per-worker
 * batch it was measured at in its batch_size: the engine's, or a
 * parameter-server worker's), the network and the job's global batch (0:
 * the per-worker batch stays the profile's; > 0: G / workers each, its
 * compute scaled linearly). servers > 0: a parameter-server job (--ps S)
 * whose last S ranks serve: its workers are the ranks less them, and a
 * step is a worker's compute and one BSP round on S servers
 * (gs_cost_ps_nodes_round, the search's ps_iter_s; its ranks `slots` a
 * node, the servers last, so that workers and servers on one node share
 * its link), or for the share `async` of its steps that its --sync runs
 * asynchronously (gs_ps_sync_async_share) an asynchronous one
 * (gs_cost_ps_nodes_async). Sizes the prediction cannot price (no worker, a
 * global batch that leaves one without a sample) get step_s 0. Entries
 * 0..max are written. Returns 0, or -1 with err when no size could be
 * priced. */
int gs_cluster_prior_steps(const struct gs_profile *profile, const struct gs_cost_params *net,
                           int slots, long global_batch, int servers, double async, int max,
                           double *step_s,
                           double *samples, char *err, size_t errlen);

/* The sizes measured: each q in 1..top with by_size[q] > 0 as n[k] = q,
 * r[k] = by_size[q], in order; n and r hold top entries. Returns how many
 * (the points gs_cluster_speed_fit and gs_cluster_speed_prior take). */
int gs_cluster_known_points(const double *by_size, int top, int *n, double *r);

/* A job's speed curve from that prediction and the speeds measured (r[k]
 * on n[k] nodes, k < npts; may be 0 points): a measured size keeps its
 * speed; elsewhere samples[x] / (a step_s[x] + u), with a and u fitted to
 * the measured sizes' step times (samples / r): none, the prediction
 * itself (a = 1, u = 0); one, the difference as a per-step time the
 * prediction does not hold (the optimizer's update, the data) when the
 * step is slower than predicted (u), else a scale (a); two or more, least
 * squares for a > 0 and u >= 0. Sizes without a prediction: the nearest
 * size's speed below. Fills out[0..max] (out[0] = 0). Returns 0, or -1 when
 * step_s holds no prediction. */
int gs_cluster_speed_prior(const double *step_s, const double *samples, const int *n,
                           const double *r, int npts, int max, double *out);

/* Checks a round's input: 1 <= min <= max, weight > 0, unique ids, nodes >= 0,
 * cur_nodes in {0} or [0, max] (a job whose pool shrank may have fewer than
 * min). Returns 0 or -1 with a message naming the job. */
int gs_cluster_jobs_check(const gs_cluster_job *jobs, int njobs, int nodes, char *err,
                          size_t errlen);

/* The policies, one file each (policy_static.c, policy_dorm.c, policy_goodput.c). */
int gs_cluster_policy_static(const gs_cluster_job *jobs, int njobs, int nodes,
                             const gs_cluster_policy_opts *o, int *sizes,
                             gs_cluster_policy_report *rep, char *err, size_t errlen);
int gs_cluster_policy_dorm(const gs_cluster_job *jobs, int njobs, int nodes,
                           const gs_cluster_policy_opts *o, int *sizes,
                           gs_cluster_policy_report *rep, char *err, size_t errlen);
int gs_cluster_policy_goodput(const gs_cluster_job *jobs, int njobs, int nodes,
                              const gs_cluster_policy_opts *o, int *sizes,
                              gs_cluster_policy_report *rep, char *err, size_t errlen);

#endif /* GS_CLUSTER_POLICY_H */
