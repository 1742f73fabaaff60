/* The cluster manager (library gradsync_cluster, src/cluster; docs/CLUSTER.md,
 * "The manager: serve, submit, jobs, cancel"). Not part of the umbrella
 * header: `gradsync cluster serve`, `submit`, `jobs` and `cancel` call it.
 *
 * A manager owns a pool of whole nodes and runs each job as an elastic
 * gradsync job (`gradsync run --elastic`, src/launch) on a partition of
 * its own. Clients and the manager meet in a spool directory:
 *
 *   DIR/incoming/   requests (a submission, a cancellation, a node drained),
 *                   each a JSON file made under a temporary name and renamed
 *                   into place, so the manager never sees half of one
 *   DIR/journal     the manager's state, append-only and fsync'd (journal.h)
 *   DIR/jobs.json   the jobs as the manager last saw them (for `jobs`)
 *   DIR/pool.json   the pool and the policy of the manager serving DIR
 *   DIR/jobs/ID/    a job's files: its node list (the discovery script's
 *                   answer), its checkpoint, its output and events, the pid
 *                   of its supervisor's session and its exit status
 *
 * Every job's supervisor runs in a session of its own under a small
 * keeper process that records its exit status: the manager can be killed
 * (SIGKILL included) and started again; it replays its journal, finds each
 * running job's keeper by pid and start time and adopts it, or, when the
 * keeper is gone without an exit status, kills what is left of its session
 * and relaunches the job from its last commit. No job is lost, and none
 * runs twice.
 *
 * The library never prints: the manager's lines reach the caller through
 * on_log, and clients get messages in err. */
#ifndef GRADSYNC_CLUSTER_MANAGER_H
#define GRADSYNC_CLUSTER_MANAGER_H

#include <signal.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GS_CLUSTER_NODE_MAX 253 /* a DNS name's length */
#define GS_CLUSTER_MAX_NODES 4096
#define GS_CLUSTER_NAME_MAX 64
/* A job's node counts (submit --min, --max) and weight (--weight), and a
 * user's or account's share (serve --user-share, --account-share): what
 * the commands take and what the manager's request check accepts. */
#define GS_CLUSTER_JOB_NODES_MAX 65536
#define GS_CLUSTER_WEIGHT_MIN 1e-6
#define GS_CLUSTER_WEIGHT_MAX 1e6
/* A job's time limit (submit --time): above 0, at most 366 days. */
#define GS_CLUSTER_TIME_LIMIT_MAX_S (366 * 86400.0)
/* An account's path (submit --account science/physics/hep): at most
 * GS_CLUSTER_ACCOUNT_LEVELS names of 1 to GS_CLUSTER_NAME_MAX - 1
 * characters, '/'-separated, and its NUL. */
#define GS_CLUSTER_ACCOUNT_LEVELS 8
#define GS_CLUSTER_ACCOUNT_MAX (GS_CLUSTER_ACCOUNT_LEVELS * GS_CLUSTER_NAME_MAX)

/* Whether u is a user's or an account level's name: 1 to
 * GS_CLUSTER_NAME_MAX - 1 letters, digits or ._@-. */
int gs_cluster_name_ok(const char *u);
/* Whether path is an account's path (1 to GS_CLUSTER_ACCOUNT_LEVELS such
 * names, '/'-separated): 1, or 0 with why it is not one in why. The
 * submit command and the manager's check of a request both use it. */
int gs_cluster_account_path_ok(const char *path, char *why, size_t whylen);

/* The seconds between a gradsync train job's commits unless the manager or
 * the job says: what a failure may cost it in work redone. A resize does
 * not wait for a commit (the job's checks, about 0.5 s apart, take the stop
 * and commit there), and the manager measures a job from its progress
 * reports between commits (progress.json at each check). */
#define GS_CLUSTER_COMMIT_EVERY_S 10.0

/* Fair shares and limits of users and accounts: serve's --user-share,
 * --user-limit, --account-share and --account-limit; `cluster simulate`
 * takes the same. NULL arrays with a count of 0: none. */
typedef struct gs_cluster_shares {
  /* Per-user fair shares: user share_user[k] has share share_w[k] (> 0);
   * every other user 1. The pool is shared among the users with jobs in
   * proportion to their shares, a user's part among its jobs by their
   * weights (gs_cluster_user_weights). */
  const char *const *share_user;
  const double *share_w;
  int nshare;
  /* Per-user limits (Slurm's MaxNodesPerUser): user limit_user[k]'s jobs
   * hold at most limit_nodes[k] nodes together (>= 1); "*" names every
   * user not named. Every policy keeps them; a submission whose --min is
   * above its user's limit is refused. */
  const char *const *limit_user;
  const int *limit_nodes;
  int nlimit;
  /* Accounts above the users (Slurm's fair-share tree), nested to any
   * depth by their paths (science/physics/hep is physics's sub-account
   * hep, physics science's): account account_name[k] (a path) has share
   * account_w[k] (> 0), every other account 1. The pool is shared among
   * the top-level accounts and the users whose jobs name no account by
   * their shares, an account's part among its sub-accounts with jobs and
   * the users charged to it directly by theirs
   * (gs_cluster_account_tree_weights). */
  const char *const *account_name;
  const double *account_w;
  int naccount;
  /* Per-account limits (Slurm's GrpTRES=node=N): the jobs charged to
   * account account_limit_name[k] (a path) or to any account under it,
   * whoever's, hold at most account_limit_nodes[k] nodes together (>= 1);
   * "*" names every top-level account not named (a sub-account not named
   * has no limit of its own, only its ancestors'; a job charged to none
   * has no account limit). Kept with the users' by every policy; a
   * submission whose --min is above a limit on its account's path is
   * refused. */
  const char *const *account_limit_name;
  const int *account_limit_nodes;
  int naccount_limit;
  /* Usage-decayed fair share (Slurm's PriorityDecayHalfLife with its
   * classic fair-share factor): > 0, every user's and account's share is
   * lowered by the node-hours it used, each worth 2^(-age / this many
   * seconds), against its share (gs_cluster_usage in src/cluster/policy.h);
   * 0: shares as given, whatever was used (the default). */
  double usage_halflife_s;
} gs_cluster_shares;

typedef struct gs_cluster_node {
  char name[GS_CLUSTER_NODE_MAX + 1];
  int slots; /* ranks a job runs on the node */
} gs_cluster_node;

typedef struct gs_cluster_serve_config {
  const char *spool;              /* the spool directory (created) */
  const gs_cluster_node *nodes;   /* the pool */
  int nnodes;
  const char *policy;             /* gs_cluster_allocate's name ("static") */
  double interval_s;              /* a policy round at least this often (default 10) */
  int restart_budget;             /* a job's restarts before it is failed (default 3) */
  const char *gradsync_exe;       /* the gradsync binary that runs the jobs */
  const char *mpirun;             /* the jobs' mpirun (NULL: gradsync run's default) */
  const char *ssh_config;         /* for the jobs' ssh (NULL: none) */
  const char *iface;              /* the jobs' MPI traffic (NULL: Open MPI's choice) */
  double discover_every_s;        /* the jobs' discovery period (default 1) */
  int commit_every;               /* jobs commit every N steps (default 20): DLRM
                                   * jobs, and every job when commit_every_s < 0 */
  double commit_every_s;          /* gradsync train jobs commit every this many
                                   * seconds (0: GS_CLUSTER_COMMIT_EVERY_S; < 0:
                                   * by steps) */
  volatile sig_atomic_t *stop;    /* the manager returns once *stop is non-zero */
  void (*on_log)(const char *line, void *user);
  void *user;
  double restart_penalty_s;       /* what the policies charge a resize's restart (goodput's
                                     payback, dorm's price) until the job's own is measured:
                                     0 a prior from the pool's measured start-ups and resizes
                                     (gs_cluster_restart_prior; 30 s while none is measured),
                                     < 0 none (dorm: Dorm's own objective) */
  double fairness_window_s;       /* dorm: > 0, a job's target is its fair share plus the
                                     node-seconds of share it was owed and not given
                                     (its fair_s less its node_s) over this many seconds
                                     (gs_cluster_policy_opts.fairness_window_s); 0: the
                                     share now */
  double node_cooldown_s;         /* a node back from being lost gets no job for this
                                     long, doubled for each other loss within the hour
                                     (at most 16 times); 0: at once */
  /* The users' and accounts' fair shares and limits (gs_cluster_shares). */
  gs_cluster_shares shares;
  /* The pool's links, a network name of `gradsync run --net` (1gbit,
   * 10GbE, ...): a gradsync train job's speed on sizes not yet measured is
   * predicted from its engine's profile and this network (the planner's
   * prediction, scaled to the sizes measured). NULL: no prediction (a job
   * not measured counts as linear). */
  const char *net;
  /* 1: a gradsync train job that has measured nothing of itself yet starts
   * from the curve of an earlier job of its kind (the same options but for
   * the run's length, seed, commits and the optimizer's numbers). */
  int share_speeds;
  /* Each policy round appended to this file as one JSON line: what the
   * policy was given and what it answered (gs_cluster_round_log; `cluster
   * simulate --round-log` writes the simulator's alike). NULL: none. */
  const char *round_log;
} gs_cluster_serve_config;

/* Whether this build knows policy name (gs_cluster_allocate's names). */
int gs_cluster_policy_exists(const char *name);

/* Serves the spool until *stop. Returns 0 when stopped (the jobs keep
 * running and a later serve adopts them), 2 for a bad configuration or a
 * spool served by another manager, 1 for a failure (journal, spool); err
 * says what. */
int gs_cluster_serve(const gs_cluster_serve_config *cfg, char *err, size_t errlen);

typedef struct gs_cluster_submission {
  const char *name;     /* NULL: the program's name */
  const char *user;     /* whose job, for per-user shares (NULL: the caller's login) */
  const char *account;  /* the account it is charged to, for the fair-share tree
                           (NULL: none; the user then shares at the root) */
  int min_nodes, max_nodes;
  double weight;
  int exec;             /* 1: argv is a program to run under the supervisor; 0:
                         * gradsync train's options */
  char *const *argv;    /* NULL-ended */
  /* Jobs it runs after (Slurm's --dependency=afterok): it starts only once
   * each of them is done, and is cancelled when one fails or is cancelled.
   * nafter of them, at most GS_CLUSTER_AFTER_MAX, each an id already given
   * (below gs_cluster_next_id); NULL and 0: none. */
  const int *after;
  int nafter;
  /* Its time limit (Slurm's --time): once it has held nodes this many
   * seconds in all, the manager stops it (state timeout). 0: none. */
  double time_limit_s;
} gs_cluster_submission;

#define GS_CLUSTER_AFTER_MAX 16

/* A manager's job states, as jobs.json and gradsync jobs name them, in
 * order: queued, running, resizing, done, failed, cancelled, timeout; those
 * from GS_CLUSTER_FIRST_ENDED on have ended. */
#define GS_CLUSTER_NSTATES 7
#define GS_CLUSTER_FIRST_ENDED 3
extern const char *const gs_cluster_state_names[GS_CLUSTER_NSTATES];

/* The index of a state's name in gs_cluster_state_names, or -1. */
int gs_cluster_state_index(const char *name);

/* The id the next submission to the spool will get (1 when none was
 * given), or -1 when DIR/next_id cannot be read. Ids only grow. */
int gs_cluster_next_id(const char *spool);

/* The pool of the manager serving spool (DIR/pool.json): its node count,
 * the first node's slots (slots may be NULL) and the policy (policy may be
 * NULL). 0, or -1 with err when no manager has served it. */
/* The most nodes user's jobs may hold together under the manager serving
 * spool (its --user-limit, from pool.json), or 0 for no limit. */
int gs_cluster_pool_user_limit(const char *spool, const char *user);
/* The same of an account's jobs (--account-limit): the smallest limit on
 * its path, its own or an ancestor's (gs_cluster_account_path_limit);
 * which (may be NULL) gets the account whose limit it is. */
int gs_cluster_pool_account_limit(const char *spool, const char *account, char *which,
                                  size_t which_len);
/* The smallest limit of an account path's levels (science, then
 * science/physics, then science/physics/hep) in the NAME:N list names,
 * nodes (n entries), "*" standing for every top-level account not named;
 * 0: none. which (may be NULL) gets the level whose limit it is. */
int gs_cluster_account_path_limit(const char *const *names, const int *nodes, int n,
                                  const char *path, char *which, size_t which_len);

/* The submitter's user name: given when not NULL, else the login name of
 * the effective uid (uidN when it has none). */
void gs_cluster_user_name(const char *given, char *out, size_t len);

int gs_cluster_pool(const char *spool, int *nodes, int *slots, char *policy, size_t policy_len,
                    char *err, size_t errlen);

/* Queues a submission (a request file): *id is its job id. 0, or -1 with
 * err. The caller has checked the sizes and the options. */
int gs_cluster_submit(const char *spool, const gs_cluster_submission *s, int *id, char *err,
                      size_t errlen);

/* 1 when a manager serves spool now (it holds SPOOL/manager.lock), with
 * *pid its process id from pool.json (0 when unknown; pid may be NULL);
 * 0 when none does. */
int gs_cluster_manager_running(const char *spool, int *pid);

/* The jobs of spool whose keeper lives (it holds SPOOL/jobs/ID/lock):
 * their count, and the first max of their ids in ids (ascending). */
int gs_cluster_jobs_kept(const char *spool, int *ids, int max);

/* Requests: cancel job id; drain (1) or return (0) a node, which must be
 * in the pool (-1 with err naming the pool's nodes otherwise). 0, or -1. */
int gs_cluster_cancel(const char *spool, int id, char *err, size_t errlen);
int gs_cluster_drain(const char *spool, const char *node, int drain, char *err, size_t errlen);

/* The jobs as the manager last wrote them (DIR/jobs.json, its "time"), with
 * the submissions it has not read yet as queued (by id), and "served":
 * whether a manager serves the spool now; malloc'ed JSON text for the
 * caller to free. NULL with err. */
char *gs_cluster_jobs_json(const char *spool, char *err, size_t errlen);

/* The keeper of one job (`gradsync cluster keep DIR ATTEMPT -- ARGV`,
 * started by the manager in a session of its own): holds DIR/lock while it
 * lives (with its pid, start time and attempt in it), runs argv with its
 * output appended to DIR/out.log, and writes the exit status to
 * DIR/exit.ATTEMPT atomically. Runs nothing when DIR/attempt is not
 * attempt. Returns 0, or 1 when it ran nothing. */
int gs_cluster_keep(const char *job_dir, int attempt, char *const *argv);

#ifdef __cplusplus
}
#endif
#endif
