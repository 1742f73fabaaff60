/* The cluster manager (gradsync/cluster_manager.h; docs/CLUSTER.md, "The
 * manager: serve, submit, jobs, cancel").
 *
 * One loop, a few times a second: take the requests in DIR/incoming
 * (journal first, then remove the file, so a request is never lost and one
 * read twice changes nothing), follow each running job (its supervisor's
 * events: launches, resizes, failures; its keeper's exit status), and when
 * something changed (an arrival, an end, a node lost or back) or every
 * interval_s, run a policy round: gs_cluster_allocate gives each job a
 * size, and the manager maps sizes to nodes, keeping each job's nodes when
 * it shrinks or grows. A job learns its nodes through its discovery script
 * (DIR/jobs/ID/nodes, replaced atomically): its supervisor grows when more
 * are listed and, started with --shrink-on-discover, stops at its next
 * commit and relaunches without a node no longer listed. A node taken from
 * a job is given to another only once the job's next launch no longer uses
 * it, so that partitions never overlap.
 *
 * Every state change is a journal record of the whole job (or node) before
 * the manager acts on it; after a crash, replay gives back every job, and
 * each running job's keeper (its pid and start time) is adopted, or, when
 * gone without an exit status, its session is emptied and the job
 * relaunched from its last commit. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gradsync/cluster_manager.h"
#include "gradsync/core.h"
#include "gradsync/cost.h"
#include "gradsync/launch.h"
#include "gradsync/plan.h"
#include "gradsync/ps.h"
#include "journal.h"
#include "manager_internal.h"
#include "policy.h"
#include "spool.h"

typedef enum {
  J_QUEUED, J_RUNNING, J_RESIZING, J_DONE, J_FAILED, J_CANCELLED, J_TIMEOUT
} job_state;
/* named by gs_cluster_state_names, in the same order */
#define state_name gs_cluster_state_names
/* an account path's levels are the policies' nested accounts */
_Static_assert(GS_CLUSTER_ACCOUNT_LEVELS <= GS_CLUSTER_ACCOUNT_DEPTH,
               "the policies take every level of an account's path");
_Static_assert(J_TIMEOUT + 1 == GS_CLUSTER_NSTATES && J_DONE == GS_CLUSTER_FIRST_ENDED,
               "the job states and their names");

/* A measurement of the seconds a launch lost (gs_cluster_restart_measure)
 * from the reports after it: `launch` the launch event it waits for (its
 * number in the attempt; 0: none, -1: the next one), ref_t where its
 * clock starts (a stop request, or the launch itself), s0 the sample it
 * resumes from, launch_t the launch, (t1, s1) its first report. */
typedef struct lost_probe {
  int launch;
  double ref_t, s0, launch_t, t1, s1;
} lost_probe;

typedef struct job {
  int id;
  char name[GS_CLUSTER_NAME_MAX];
  char user[GS_CLUSTER_NAME_MAX]; /* whose (per-user shares) */
  char account[GS_CLUSTER_ACCOUNT_MAX]; /* charged to, a path ("": none; the fair-share tree) */
  int after[GS_CLUSTER_AFTER_MAX]; /* jobs it starts after (submit --after) */
  int nafter;
  /* Its time limit (submit --time; 0: none) against the time it has held
   * nodes: run_s of its ended attempts and the current one's since
   * launch_t (wall clock; 0: not running). timeout: the limit was reached
   * and the job asked to stop. */
  double time_limit_s, run_s, launch_t;
  int timeout;
  /* Its usage, for the accounts' report (gradsync jobs --accounts, Slurm's
   * sshare and sreport): node_s the node-seconds its partitions held,
   * fair_s the node-seconds of its fair share (fair_now nodes, the weighted
   * max-min share of the last policy round under the users' and accounts'
   * shares and limits) while it was queued or running, both counted up to
   * acct_t (wall clock; 0: not yet counted). Journaled with its partition:
   * after a restart of the manager the count goes on from acct_t, so the
   * time the manager was away is charged as the job held its nodes.
   * usage_s: node_s decayed by the serve's --usage-halflife to acct_t
   * (gs_cluster_usage_decay; 0 without one), for the decayed fair share. */
  double node_s, fair_s, fair_now, acct_t, usage_s;
  int min, max;
  double weight;
  int exec;
  cJSON *args; /* the submission's arguments (an array of strings) */
  char cwd[PATH_MAX];
  job_state state;
  double submit_t, start_t, end_t;
  int attempt;                    /* keeper launches so far */
  int keeper_pid;
  unsigned long long keeper_start;
  char *assigned;                 /* assigned[n]: node n is the job's */
  int restarts_base, resizes_base; /* from attempts that ended */
  int cancel;                     /* cancellation asked */
  int preempt;                    /* stop asked to give all nodes back */
  int status;                     /* the supervisor's exit status at the end */
  char message[256];
  /* not journaled: what the current attempt's events say (progress, commit
   * and rate are, once the job has ended: job_record) */
  long ev_off;
  char *actual;                   /* the nodes of the current launch */
  char *left_out;                 /* nodes its supervisor left out for good
                                   * (a rank killed there, unreachable): not
                                   * the job's again during this attempt */
  int actual_size;                /* its ranks (0 before the first launch) */
  int actual_outside;             /* hosts of the current launch not in the pool
                                   * (adopted after a restart with a smaller
                                   * --nodes): its size is not count(actual) */
  int ev_restarts, ev_resizes;
  double progress;
  char commit[64];                /* "epoch E, sample S" */
  double term_t;                  /* when SIGTERM went to the keeper's group */
  /* Measured speed (journaled only once the job ended: a running job's is
   * measured again after a restart of the manager): rate[n] the job's samples/s on n nodes (0: never measured),
   * from two commits of one launch; curve[0..max] fitted to them for the
   * goodput policy (gs_cluster_speed_fit). */
  double *rate, *curve;
  int ncurve;                     /* sizes in curve (0: none fitted yet) */
  /* The cost model's prediction (gs_cluster_prior_steps) from the profile
   * its engine wrote at a commit (ckpt/profile.json, read again when its
   * mtime changes): a step's time and samples on each size. */
  double *prior_step, *prior_samples;
  double prior_mtime;
  int have_prior;
  int progress_warned; /* an --exec job's progress.json was said to be no report */
  int own_curve;                  /* curve from its own measurements or profile */
  int speed_from;                 /* the job whose curve it has borrowed (0: none) */
  int ev_launches;                /* launch events of the current attempt */
  double obs_t, obs_samples;      /* the last commit seen: its time (mtime) and */
  int obs_attempt, obs_launch, obs_size; /* global sample, and where it ran */
  double work;                    /* samples the job trains in all (0: unknown) */
  double epoch_samples;           /* samples in one of its epochs (0: unknown) */
  /* Its resizes' measured cost (not journaled either): a resize's stop
   * request (rs.ref_t, resuming from sample rs.s0; rs.launch_t the
   * relaunch) and the relaunch's first report (rs.t1, rs.s1), measured at
   * its second (gs_cluster_restart_measure) into the mean restart_sum /
   * restart_n, and by the relaunch's nodes into rs_sum_at[n] / rs_n_at[n]
   * (restart_at: gs_cluster_restart_fit's price by size). */
  lost_probe rs;
  double restart_sum;
  int restart_n;
  double *rs_sum_at, *restart_at;
  int *rs_n_at;
  /* Its start-up from nothing (not journaled): its first launch (su.ref_t)
   * to training at speed, measured as a resize is (startup_s, < 0: not
   * yet); the pool's start-ups and resizes price the resizes of jobs not
   * yet resized (gs_cluster_restart_prior, into restart_price). */
  lost_probe su;
  double startup_s;
  double restart_price; /* what the last policy round charged a resize of it (an
                         * ended job's: fixed at its end, journaled) */
  int end_priced;       /* an ended job's price is fixed */
  char why[224];        /* the last round's reason it waits, or is not grown
                         * onto idle nodes (not journaled; gradsync jobs'
                         * MESSAGE where message is empty) */
  /* The size the last policy round answered when its start or grow waits
   * for nodes still being given back (0: none waits). The next rounds see
   * it as the job's size, so that a change of it is priced as the resize
   * it is and an answer is not taken back only because its nodes have not
   * yet come free (not journaled: a restarted manager answers afresh). */
  int granted;
  int dirty;                      /* changed since the last snapshot */
} job;

typedef struct node {
  gs_cluster_node spec;
  int down;       /* lost (ssh fails) */
  int drained;    /* taken out by a request */
  /* Cool-down (journaled): a node back from being lost gets no job before
   * cool_until (wall clock; 0: not cooling, cleared by cool_poll once
   * passed), longer each time it was lost within the hour (losses, the last
   * at lost_t). */
  double cool_until, lost_t;
  int losses;
  double fresh_s; /* when its last check over a new connection started */
} node;

typedef struct mgr {
  const gs_cluster_serve_config *cfg;
  char spool[2048]; /* realpath, short enough that every path under it fits PATH_MAX */
  node *node;
  int nnode;
  job *job;
  int njob, cap;
  cluster_journal jr;
  int replan;
  int retry; /* a round could not place everything: another within a second */
  double last_round, last_health, last_snapshot;
  pid_t *health_pid; /* a node's ssh check in flight */
  double health_deadline;
  char mux[PATH_MAX]; /* ssh's ControlPath for the checks ("" when too long) */
  gs_cost_params net; /* cfg->net's cost model (have_net) */
  int have_net;
  FILE *round_log; /* cfg->round_log, appended to (NULL: none) */
  char *err;
  size_t errlen;
} mgr;

static void mlog(mgr *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mlog(mgr *m, const char *fmt, ...) {
  if (!m->cfg->on_log) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  m->cfg->on_log(line, m->cfg->user);
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap_ms(int ms) {
  nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

/* ---- Processes --------------------------------------------------------- */

/* Fields of /proc/PID/stat (gs_launch_proc_stat): state, session, start
 * time; any of them NULL. */
static int proc_info(int pid, char *state, int *session, unsigned long long *start) {
  gs_launch_proc p;
  if (gs_launch_proc_stat((pid_t)pid, &p) != 0) return -1;
  if (state) *state = p.state;
  if (session) *session = p.session;
  if (start) *start = p.start;
  return 0;
}

static int keeper_alive(const job *j) {
  char s;
  unsigned long long st;
  if (j->keeper_pid <= 0) return 0;
  if (proc_info(j->keeper_pid, &s, NULL, &st) != 0) return 0;
  return st == j->keeper_start && s != 'Z' && s != 'X';
}

/* Signals every live process of session sid (the keeper's: the supervisor,
 * mpirun and the local ranks). Returns how many there were. */
/* How long a dead keeper's session is left to end by itself (its
 * supervisor stopping at a commit) before the manager signals it. */
#define KEEPER_GONE_GRACE_S 5.0

static int session_signal(int sid, int sig) {
  if (sid <= 1) return 0;
  DIR *d = opendir("/proc");
  int n = 0;
  for (struct dirent *de; d && (de = readdir(d));) {
    if (!isdigit((unsigned char)de->d_name[0])) continue;
    int pid = atoi(de->d_name), s_id;
    char s;
    if (proc_info(pid, &s, &s_id, NULL) != 0 || s_id != sid || s == 'Z' || s == 'X') continue;
    n++;
    if (sig) kill(pid, sig);
  }
  if (d) closedir(d);
  return n;
}

/* Empties a keeper's session: after grace_s seconds left alone, SIGTERM to
 * every process, then SIGKILL after 10 s. A dead keeper's supervisor had
 * SIGTERM when the keeper died (PR_SET_PDEATHSIG) and is stopping its job
 * at a commit, mpirun still forwarding the ranks' last lines to out.log: a
 * SIGTERM to every process at once cut them (24 committed epochs' lines of
 * a job missing from its log). */
static void session_clear(int sid, double grace_s) {
  if (session_signal(sid, 0) == 0) return;
  for (int i = 0; i < (int)(grace_s * 10) && session_signal(sid, 0) > 0; i++) nap_ms(100);
  session_signal(sid, SIGTERM);
  for (int i = 0; i < 100 && session_signal(sid, 0) > 0; i++) nap_ms(100);
  while (session_signal(sid, SIGKILL) > 0) nap_ms(100);
}

/* ---- Jobs and the journal -------------------------------------------- */

static job *job_find(mgr *m, int id) {
  for (int i = 0; i < m->njob; i++)
    if (m->job[i].id == id) return &m->job[i];
  return NULL;
}

static void job_free(job *j) {
  gs_free(j->assigned);
  gs_free(j->actual);
  gs_free(j->left_out);
  gs_free(j->rate);
  gs_free(j->curve);
  gs_free(j->prior_step);
  gs_free(j->prior_samples);
  gs_free(j->rs_sum_at);
  gs_free(j->rs_n_at);
  gs_free(j->restart_at);
}

static job *job_add(mgr *m, int id) {
  if (m->njob == m->cap) {
    int cap = m->cap ? 2 * m->cap : 16;
    job *grown = gs_realloc(m->job, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    m->job = grown;
    m->cap = cap;
  }
  job *j = &m->job[m->njob];
  memset(j, 0, sizeof *j);
  j->assigned = gs_calloc((size_t)m->nnode + 1, 1);
  j->actual = gs_calloc((size_t)m->nnode + 1, 1);
  j->left_out = gs_calloc((size_t)m->nnode + 1, 1);
  j->rate = gs_calloc((size_t)m->nnode + 1, sizeof *j->rate);
  j->curve = gs_calloc((size_t)m->nnode + 1, sizeof *j->curve);
  j->prior_step = gs_calloc((size_t)m->nnode + 1, sizeof *j->prior_step);
  j->prior_samples = gs_calloc((size_t)m->nnode + 1, sizeof *j->prior_samples);
  j->rs_sum_at = gs_calloc((size_t)m->nnode + 1, sizeof *j->rs_sum_at);
  j->rs_n_at = gs_calloc((size_t)m->nnode + 1, sizeof *j->rs_n_at);
  j->restart_at = gs_calloc((size_t)m->nnode + 1, sizeof *j->restart_at);
  j->startup_s = -1;
  if (!j->assigned || !j->actual || !j->left_out || !j->rate || !j->curve || !j->prior_step ||
      !j->prior_samples || !j->rs_sum_at || !j->rs_n_at || !j->restart_at) {
    job_free(j);
    return NULL;
  }
  j->id = id;
  j->progress = -1;
  m->njob++;
  return j;
}

static int node_find(const mgr *m, const char *name) {
  for (int i = 0; i < m->nnode; i++)
    if (strcasecmp(m->node[i].spec.name, name) == 0) return i;
  return -1;
}

static int count(const char *set, int n) {
  int c = 0;
  for (int i = 0; i < n; i++) c += set[i] != 0;
  return c;
}

static int job_active(const job *j) {
  return j->state == J_RUNNING || j->state == J_RESIZING;
}

/* Charges job j's usage up to now (wall clock): the nodes its partition
 * holds while it runs, and its fair share while it is queued or running.
 * An ended job is not charged again. */
static void charge_job(const mgr *m, job *j, double now) {
  if (j->state >= J_DONE) return;
  if (j->acct_t > 0 && now != j->acct_t) {
    /* now < acct_t: a job found ended at an earlier time (its exit file's,
     * after a restart of the manager) was charged past it; taken back */
    double dt = now - j->acct_t, held = job_active(j) ? count(j->assigned, m->nnode) : 0;
    j->node_s += held * dt;
    if (m->cfg->shares.usage_halflife_s > 0)
      j->usage_s = gs_cluster_usage_decay(j->usage_s, held, dt, m->cfg->shares.usage_halflife_s);
    j->fair_s += j->fair_now * dt;
    if (j->node_s < 0) j->node_s = 0;
    if (j->fair_s < 0) j->fair_s = 0;
  }
  j->acct_t = now;
}

/* The jobs it runs after, as "after": [ids] (none: absent). */
static void add_after(cJSON *o, const job *j) {
  cJSON *a = cJSON_AddArrayToObject(o, "after"); /* every job has the key, [] for none */
  for (int k = 0; k < j->nafter; k++) cJSON_AddItemToArray(a, cJSON_CreateNumber(j->after[k]));
}

/* The job's measured samples/s per size as "speed": {"2": 812.5, ...},
 * to a tenth where shown, unrounded in the journal. */
static void add_speeds(cJSON *o, const mgr *m, const job *j, int shown) {
  cJSON *sp = cJSON_AddObjectToObject(o, "speed");
  for (int q = 1; q <= m->nnode; q++)
    if (j->rate[q] > 0) {
      char key[16];
      snprintf(key, sizeof key, "%d", q);
      cJSON_AddNumberToObject(sp, key, shown ? round(j->rate[q] * 10) / 10 : j->rate[q]);
    }
}

/* Reads "after" of a request or a journal record into the job. */
static void read_after(job *j, const cJSON *o) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "after"), *e;
  j->nafter = 0;
  if (!cJSON_IsArray(a)) return;
  cJSON_ArrayForEach(e, a) {
    if (cJSON_IsNumber(e) && j->nafter < GS_CLUSTER_AFTER_MAX) j->after[j->nafter++] = (int)e->valuedouble;
  }
}

/* Seconds as [D-]H:MM:SS, as Slurm writes a time limit. */
static void format_hms(double s, char *buf, size_t len) {
  long t = (long)(s + 0.5), d = t / 86400, h = t / 3600 % 24, mi = t / 60 % 60, se = t % 60;
  if (d > 0) snprintf(buf, len, "%ld-%02ld:%02ld:%02ld", d, h, mi, se);
  else snprintf(buf, len, "%ld:%02ld:%02ld", h, mi, se);
}

/* Whether queued job j may start as far as the jobs it runs after go: 0
 * when each is done; 1 while one is not done yet (*d: the first such); -1
 * when one failed or was cancelled (*d: that one). */
static int after_wait(mgr *m, const job *j, const job **d) {
  *d = NULL;
  int wait = 0;
  for (int k = 0; k < j->nafter; k++) {
    const job *a = job_find(m, j->after[k]);
    if (a == NULL) continue; /* refused at submission: never here */
    if (a->state == J_FAILED || a->state == J_CANCELLED || a->state == J_TIMEOUT) {
      *d = a;
      return -1;
    }
    if (a->state != J_DONE && !wait) {
      wait = 1;
      *d = a;
    }
  }
  return wait;
}

static cJSON *job_record(const mgr *m, const job *j) {
  cJSON *r = cJSON_CreateObject();
  cJSON *o = cJSON_AddObjectToObject(r, "job");
  cJSON_AddNumberToObject(o, "id", j->id);
  cJSON_AddStringToObject(o, "name", j->name);
  cJSON_AddStringToObject(o, "user", j->user);
  if (j->account[0]) cJSON_AddStringToObject(o, "account", j->account);
  add_after(o, j);
  cJSON_AddNumberToObject(o, "min", j->min);
  cJSON_AddNumberToObject(o, "max", j->max);
  cJSON_AddNumberToObject(o, "weight", j->weight);
  cJSON_AddBoolToObject(o, "exec", j->exec);
  cJSON_AddItemToObject(o, "args", cJSON_Duplicate(j->args, 1));
  cJSON_AddStringToObject(o, "cwd", j->cwd);
  cJSON_AddStringToObject(o, "state", state_name[j->state]);
  cJSON_AddNumberToObject(o, "submit_t", j->submit_t);
  cJSON_AddNumberToObject(o, "start_t", j->start_t);
  cJSON_AddNumberToObject(o, "end_t", j->end_t);
  cJSON_AddNumberToObject(o, "attempt", j->attempt);
  cJSON_AddNumberToObject(o, "keeper_pid", j->keeper_pid);
  cJSON_AddNumberToObject(o, "keeper_start", (double)j->keeper_start);
  cJSON *a = cJSON_AddArrayToObject(o, "nodes");
  for (int i = 0; i < m->nnode; i++)
    if (j->assigned[i]) cJSON_AddItemToArray(a, cJSON_CreateString(m->node[i].spec.name));
  cJSON_AddNumberToObject(o, "restarts_base", j->restarts_base);
  cJSON_AddNumberToObject(o, "resizes_base", j->resizes_base);
  cJSON_AddBoolToObject(o, "cancel", j->cancel);
  cJSON_AddBoolToObject(o, "preempt", j->preempt);
  if (j->time_limit_s > 0) cJSON_AddNumberToObject(o, "time_limit_s", j->time_limit_s);
  cJSON_AddNumberToObject(o, "run_s", j->run_s);
  cJSON_AddNumberToObject(o, "launch_t", j->launch_t);
  cJSON_AddNumberToObject(o, "node_s", j->node_s);
  cJSON_AddNumberToObject(o, "fair_s", j->fair_s);
  cJSON_AddNumberToObject(o, "fair_now", j->fair_now);
  cJSON_AddNumberToObject(o, "acct_t", j->acct_t);
  cJSON_AddNumberToObject(o, "usage_s", j->usage_s);
  cJSON_AddBoolToObject(o, "timeout", j->timeout);
  cJSON_AddNumberToObject(o, "status", j->status);
  cJSON_AddStringToObject(o, "message", j->message);
  if (j->state >= J_DONE) {
    /* What `gradsync jobs` shows of an ended job, measured while it ran:
     * nothing measures it again after a restart of the manager. */
    if (j->progress >= 0) cJSON_AddNumberToObject(o, "progress", j->progress);
    if (j->commit[0]) cJSON_AddStringToObject(o, "commit", j->commit);
    cJSON_AddNumberToObject(o, "restart_price", j->restart_price);
  }
  /* What is measured of it, whatever its state (journaled again as each
   * size's speed, a resize's cost or its start-up is first measured): a
   * job that ends while no manager runs, and every job across a restart of
   * the manager, keep them (the pool's prior for resizes is made of them). */
  add_speeds(o, m, j, 0);
  if (j->restart_n > 0) {
    cJSON_AddNumberToObject(o, "restart_sum", j->restart_sum);
    cJSON_AddNumberToObject(o, "restart_n", j->restart_n);
    cJSON *rb = cJSON_AddObjectToObject(o, "restart_by_size"); /* {"2": [sum, count]} */
    for (int q = 1; q <= m->nnode; q++)
      if (j->rs_n_at[q] > 0) {
        char key[16];
        snprintf(key, sizeof key, "%d", q);
        cJSON *pair = cJSON_AddArrayToObject(rb, key);
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(j->rs_sum_at[q]));
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(j->rs_n_at[q]));
      }
  }
  if (j->startup_s >= 0) cJSON_AddNumberToObject(o, "startup_s", j->startup_s);
  cJSON_AddNumberToObject(r, "t", spool_wall_s());
  return r;
}

static int num(const cJSON *o, const char *k, double *v) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!cJSON_IsNumber(x)) return -1;
  *v = x->valuedouble;
  return 0;
}

static const char *str(const cJSON *o, const char *k) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(x) ? x->valuestring : NULL;
}

static void refit(mgr *m, job *j);

/* Applies a job record (replay): the record is the job's whole state. */
static void job_apply(mgr *m, const cJSON *o) {
  double v;
  if (num(o, "id", &v) != 0) return;
  job *j = job_find(m, (int)v);
  if (!j && !(j = job_add(m, (int)v))) return;
  const char *s;
  if ((s = str(o, "name"))) snprintf(j->name, sizeof j->name, "%s", s);
  /* (a journal from before per-user shares: one user, "-") */
  snprintf(j->user, sizeof j->user, "%s", (s = str(o, "user")) ? s : "-");
  snprintf(j->account, sizeof j->account, "%s", (s = str(o, "account")) ? s : "");
  read_after(j, o);
  if (num(o, "min", &v) == 0) j->min = (int)v;
  if (num(o, "max", &v) == 0) j->max = (int)v;
  if (num(o, "weight", &v) == 0) j->weight = v;
  j->exec = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "exec"));
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "args");
  if (cJSON_IsArray(a)) {
    cJSON_Delete(j->args);
    j->args = cJSON_Duplicate(a, 1);
  }
  if ((s = str(o, "cwd"))) snprintf(j->cwd, sizeof j->cwd, "%s", s);
  int k = gs_cluster_state_index(str(o, "state"));
  if (k >= 0) j->state = (job_state)k;
  if (num(o, "submit_t", &v) == 0) j->submit_t = v;
  if (num(o, "start_t", &v) == 0) j->start_t = v;
  if (num(o, "end_t", &v) == 0) j->end_t = v;
  if (num(o, "attempt", &v) == 0) j->attempt = (int)v;
  if (num(o, "keeper_pid", &v) == 0) j->keeper_pid = (int)v;
  if (num(o, "keeper_start", &v) == 0) j->keeper_start = (unsigned long long)v;
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, "nodes");
  if (cJSON_IsArray(n)) {
    memset(j->assigned, 0, (size_t)m->nnode);
    const cJSON *e;
    cJSON_ArrayForEach(e, n) {
      int k = cJSON_IsString(e) ? node_find(m, e->valuestring) : -1;
      if (k >= 0) j->assigned[k] = 1; /* a node no longer in the pool is dropped */
    }
  }
  if (num(o, "restarts_base", &v) == 0) j->restarts_base = (int)v;
  if (num(o, "resizes_base", &v) == 0) j->resizes_base = (int)v;
  j->cancel = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "cancel"));
  j->preempt = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "preempt"));
  j->time_limit_s = num(o, "time_limit_s", &v) == 0 && v > 0 ? v : 0;
  j->run_s = num(o, "run_s", &v) == 0 && v > 0 ? v : 0;
  j->launch_t = num(o, "launch_t", &v) == 0 && v > 0 ? v : 0;
  j->node_s = num(o, "node_s", &v) == 0 && v > 0 ? v : 0;
  j->fair_s = num(o, "fair_s", &v) == 0 && v > 0 ? v : 0;
  j->fair_now = num(o, "fair_now", &v) == 0 && v > 0 ? v : 0;
  j->acct_t = num(o, "acct_t", &v) == 0 && v > 0 ? v : 0;
  j->usage_s = num(o, "usage_s", &v) == 0 && v > 0 && isfinite(v) ? v : 0;
  j->timeout = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "timeout"));
  if (num(o, "status", &v) == 0) j->status = (int)v;
  if ((s = str(o, "message"))) snprintf(j->message, sizeof j->message, "%s", s);
  /* an ended job's progress and last commit; any job's speeds, resizes'
   * and start-up's costs (job_record) */
  if (num(o, "progress", &v) == 0 && v >= 0) j->progress = v;
  if ((s = str(o, "commit"))) snprintf(j->commit, sizeof j->commit, "%s", s);
  const cJSON *sp = cJSON_GetObjectItemCaseSensitive(o, "speed"), *e;
  if (!cJSON_IsObject(sp)) sp = NULL;
  int rates = 0;
  cJSON_ArrayForEach(e, sp) {
    int q = e->string ? atoi(e->string) : 0;
    if (q >= 1 && q <= m->nnode && cJSON_IsNumber(e) && e->valuedouble > 0 &&
        isfinite(e->valuedouble)) {
      j->rate[q] = e->valuedouble; /* a size no longer in the pool is dropped */
      rates++;
    }
  }
  if (rates > 0) refit(m, j);
  if (num(o, "restart_n", &v) == 0 && v >= 1 && v < 1e9 && num(o, "restart_sum", &v) == 0 &&
      v >= 0 && isfinite(v)) {
    j->restart_sum = v;
    j->restart_n = (int)cJSON_GetObjectItemCaseSensitive(o, "restart_n")->valuedouble;
    memset(j->rs_sum_at, 0, ((size_t)m->nnode + 1) * sizeof *j->rs_sum_at);
    memset(j->rs_n_at, 0, ((size_t)m->nnode + 1) * sizeof *j->rs_n_at);
    const cJSON *rb = cJSON_GetObjectItemCaseSensitive(o, "restart_by_size");
    if (!cJSON_IsObject(rb)) rb = NULL;
    cJSON_ArrayForEach(e, rb) {
      int q = e->string ? atoi(e->string) : 0;
      const cJSON *a = cJSON_GetArrayItem(e, 0), *b = cJSON_GetArrayItem(e, 1);
      if (q >= 1 && q <= m->nnode && cJSON_IsNumber(a) && cJSON_IsNumber(b) &&
          a->valuedouble >= 0 && isfinite(a->valuedouble) && b->valuedouble >= 1 &&
          b->valuedouble < 1e9) {
        j->rs_sum_at[q] = a->valuedouble;
        j->rs_n_at[q] = (int)b->valuedouble;
      }
    }
    gs_cluster_restart_fit(j->rs_sum_at, j->rs_n_at, m->nnode, j->restart_at);
  }
  if (num(o, "startup_s", &v) == 0 && v >= 0 && isfinite(v)) j->startup_s = v;
  if (j->state >= J_DONE && num(o, "restart_price", &v) == 0 && v >= 0 && isfinite(v)) {
    j->restart_price = v; /* fixed at its end */
    j->end_priced = 1;
  }
  j->dirty = 1;
}

static void node_apply(mgr *m, const cJSON *o) {
  const char *name = str(o, "name");
  int k = name ? node_find(m, name) : -1;
  if (k < 0) return;
  m->node[k].drained = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "drained"));
  m->node[k].down = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "down"));
  double v;
  m->node[k].cool_until = num(o, "cool_until", &v) == 0 && v > spool_wall_s() ? v : 0;
  m->node[k].lost_t = num(o, "lost_t", &v) == 0 ? v : 0;
  m->node[k].losses = num(o, "losses", &v) == 0 ? (int)v : 0;
}

static void replay_one(const cJSON *rec, void *user) {
  mgr *m = user;
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(rec, "job");
  if (cJSON_IsObject(o)) job_apply(m, o);
  o = cJSON_GetObjectItemCaseSensitive(rec, "node");
  if (cJSON_IsObject(o)) node_apply(m, o);
}

static cJSON *node_record(const node *n) {
  cJSON *r = cJSON_CreateObject();
  cJSON *o = cJSON_AddObjectToObject(r, "node");
  cJSON_AddStringToObject(o, "name", n->spec.name);
  cJSON_AddBoolToObject(o, "drained", n->drained);
  cJSON_AddBoolToObject(o, "down", n->down);
  if (n->cool_until > 0) cJSON_AddNumberToObject(o, "cool_until", n->cool_until);
  if (n->losses > 0) {
    cJSON_AddNumberToObject(o, "lost_t", n->lost_t);
    cJSON_AddNumberToObject(o, "losses", n->losses);
  }
  cJSON_AddNumberToObject(r, "t", spool_wall_s());
  return r;
}

/* Journals job j's state; the manager acts only once this returned 0. */
static int save_job(mgr *m, job *j) {
  cJSON *r = job_record(m, j);
  int rc = cluster_journal_append(&m->jr, r, m->err, m->errlen);
  cJSON_Delete(r);
  j->dirty = 1;
  return rc;
}

static int save_node(mgr *m, const node *n) {
  cJSON *r = node_record(n);
  int rc = cluster_journal_append(&m->jr, r, m->err, m->errlen);
  cJSON_Delete(r);
  return rc;
}

/* In a child before exec: stdin, stdout and stderr on /dev/null. */
static void stdio_to_null(void) {
  int null = open("/dev/null", O_RDWR);
  if (null < 0) return;
  dup2(null, 0);
  dup2(null, 1);
  dup2(null, 2);
  if (null > 2) close(null);
}

/* ---- A job's files ----------------------------------------------------- */

static void job_path(const mgr *m, const job *j, char *out, size_t len, const char *leaf) {
  snprintf(out, len, "%s/jobs/%d/%.64s", m->spool, j->id, leaf);
}

/* The job's node list as its discovery script prints it ("host:slots"
 * lines), in text (len bytes); returns its length. */
static size_t nodes_text(const mgr *m, const job *j, char *text, size_t len) {
  size_t w = 0;
  text[0] = '\0';
  for (int i = 0; i < m->nnode; i++)
    if (j->assigned[i]) {
      int k = snprintf(text + w, len - w, "%s:%d\n", m->node[i].spec.name,
                       m->node[i].spec.slots);
      if (k > 0 && (size_t)k < len - w) w += (size_t)k;
    }
  return w;
}

/* Writes the job's node list (what its discovery script prints). */
static int write_nodes(mgr *m, job *j) {
  char path[PATH_MAX], text[65536];
  size_t w = nodes_text(m, j, text, sizeof text);
  job_path(m, j, path, sizeof path, "nodes");
  if (cluster_write_atomic(path, text, w) != 0) {
    snprintf(m->err, m->errlen, "job %d: cannot write %s: %s", j->id, path, strerror(errno));
    return -1;
  }
  return 0;
}

static int make_job_dir(mgr *m, job *j) {
  char path[PATH_MAX], script[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/jobs/%d", m->spool, j->id);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) goto fail;
  job_path(m, j, path, sizeof path, "ckpt");
  if (mkdir(path, 0755) != 0 && errno != EEXIST) goto fail;
  job_path(m, j, path, sizeof path, "nodes");
  snprintf(script, sizeof script, "#!/bin/sh\n# job %d's nodes, from the cluster manager\n"
           "exec cat '%s'\n", j->id, path);
  job_path(m, j, path, sizeof path, "discover.sh");
  if (cluster_write_atomic(path, script, strlen(script)) != 0 || chmod(path, 0755) != 0)
    goto fail;
  return 0;
fail:
  snprintf(m->err, m->errlen, "job %d: cannot make %s: %s", j->id, path, strerror(errno));
  return -1;
}

static int has_arg(const cJSON *args, const char *opt) {
  const cJSON *e;
  size_t n = strlen(opt);
  cJSON_ArrayForEach(e, args) {
    if (!cJSON_IsString(e)) continue;
    if (strcmp(e->valuestring, opt) == 0) return 1;
    if (strncmp(e->valuestring, opt, n) == 0 && e->valuestring[n] == '=') return 1;
  }
  return 0;
}

/* The checkpoint directory of a gradsync train job (its own --checkpoint,
 * or the one the manager gives it). */
static void job_ckpt(const mgr *m, const job *j, char *out, size_t len) {
  const cJSON *e, *prev = NULL;
  if (!j->exec) cJSON_ArrayForEach(e, j->args) {
    if (prev && cJSON_IsString(prev) && strcmp(prev->valuestring, "--checkpoint") == 0 &&
        cJSON_IsString(e)) {
      if (e->valuestring[0] == '/') snprintf(out, len, "%s", e->valuestring);
      else if (snprintf(out, len, "%s/%s", j->cwd, e->valuestring) >= (int)len)
        out[len - 1] = '\0'; /* cut: the checkpoint is not found, progress unknown */
      return;
    }
    prev = e;
  }
  job_path(m, j, out, len, "ckpt");
}

static int job_commits_at_steps(const job *j);
static int job_is_dlrm(const job *j);

/* The keeper's command line: gradsync cluster keep ... -- gradsync run
 * --elastic ... -- PROGRAM. */
static char **launch_argv(mgr *m, job *j) {
  const gs_cluster_serve_config *c = m->cfg;
  int nargs = cJSON_GetArraySize(j->args);
  char **v = gs_calloc((size_t)nargs + 64, sizeof *v);
  if (!v) return NULL;
  int k = 0;
  char buf[PATH_MAX + 64];
  /* The supervisor counts ranks: a node's slots each. */
  int slots = 1, min_slots = 0;
  for (int i = 0; i < m->nnode; i++) {
    if (m->node[i].spec.slots > slots) slots = m->node[i].spec.slots;
    if (min_slots == 0 || m->node[i].spec.slots < min_slots) min_slots = m->node[i].spec.slots;
  }
#define ADD(s) (v[k++] = strdup(s))
  ADD(c->gradsync_exe);
  ADD("cluster");
  ADD("keep");
  snprintf(buf, sizeof buf, "%s/jobs/%d", m->spool, j->id);
  ADD(buf);
  snprintf(buf, sizeof buf, "%d", j->attempt);
  ADD(buf);
  ADD("--");
  ADD(c->gradsync_exe);
  ADD("run");
  ADD("--elastic");
  snprintf(buf, sizeof buf, "%d:%d", j->min * min_slots, j->max * slots);
  ADD(buf);
  ADD("--hostfile");
  job_path(m, j, buf, sizeof buf, "nodes");
  ADD(buf);
  ADD("--discover");
  job_path(m, j, buf, sizeof buf, "discover.sh");
  ADD(buf);
  ADD("--discover-every");
  snprintf(buf, sizeof buf, "%g", c->discover_every_s);
  ADD(buf);
  ADD("--shrink-on-discover");
  ADD("--resize-interval");
  ADD("0");
  ADD("--min-wait");
  ADD("30");
  ADD("--max-restarts");
  int left = c->restart_budget - (j->restarts_base + j->ev_restarts);
  snprintf(buf, sizeof buf, "%d", left > 0 ? left : 0);
  ADD(buf);
  ADD("--events");
  snprintf(buf, sizeof buf, "%s/jobs/%d/events.%d.jsonl", m->spool, j->id, j->attempt);
  ADD(buf);
  /* One calibration per node set, kept for the pool's jobs: a relaunch (a
   * resize, a restart) or another job on nodes calibrated before starts
   * 1-3 s sooner. */
  ADD("--cost-cache");
  snprintf(buf, sizeof buf, "%s/cost", m->spool);
  ADD(buf);
  if (c->ssh_config) {
    ADD("--ssh-config");
    ADD(c->ssh_config);
  }
  /* The supervisor's check of the hosts before each launch goes over the
   * health checks' kept connections (0.3 s sooner on the emulated nodes). */
  if (m->mux[0]) {
    ADD("--ssh-control");
    ADD(m->mux);
  }
  if (c->iface) {
    ADD("--iface");
    ADD(c->iface);
  }
  if (c->mpirun) {
    ADD("--mpirun");
    ADD(c->mpirun);
  }
  ADD("--");
  if (!j->exec) {
    ADD(c->gradsync_exe);
    ADD("train");
  }
  const cJSON *e;
  cJSON_ArrayForEach(e, j->args) ADD(cJSON_IsString(e) ? e->valuestring : "");
  if (!j->exec) {
    if (!has_arg(j->args, "--checkpoint")) {
      ADD("--checkpoint");
      job_path(m, j, buf, sizeof buf, "ckpt");
      ADD(buf);
    }
    if (!has_arg(j->args, "--commit-every") && job_commits_at_steps(j)) {
      /* By time (gradsync train's checks take a stop within about 0.5 s
       * whatever a step costs); a DLRM job by steps. */
      ADD("--commit-every");
      if (c->commit_every_s > 0 && !job_is_dlrm(j))
        snprintf(buf, sizeof buf, "%gs", c->commit_every_s);
      else
        snprintf(buf, sizeof buf, "%d", c->commit_every);
      ADD(buf);
    }
    if (!has_arg(j->args, "--resume")) ADD("--resume=auto");
  }
#undef ADD
  v[k] = NULL;
  for (int i = 0; i < k; i++)
    if (!v[i]) {
      for (int q = 0; q < k; q++) free(v[q]);
      gs_free(v);
      return NULL;
    }
  return v;
}

static void free_argv(char **v) {
  for (int i = 0; v && v[i]; i++) free(v[i]);
  gs_free(v);
}

/* Starts the job's keeper in a session of its own on its assigned nodes. */
static int launch(mgr *m, job *j) {
  if (make_job_dir(m, j) != 0 || write_nodes(m, j) != 0) return -1;
  j->attempt++;
  j->launch_t = spool_wall_s(); /* its clock runs while it holds nodes */
  j->ev_off = 0;
  j->ev_restarts = j->ev_resizes = 0;
  j->ev_launches = 0;
  j->rs.launch = 0;
  j->su.launch = 0;
  j->actual_size = 0;
  j->actual_outside = 0;
  memset(j->actual, 0, (size_t)m->nnode);
  memset(j->left_out, 0, (size_t)m->nnode); /* a new supervisor starts afresh */
  char **v = launch_argv(m, j);
  if (!v) {
    snprintf(m->err, m->errlen, "out of memory launching job %d", j->id);
    return -1;
  }
  /* The attempt is journaled before the keeper exists: a crash between the
   * two leaves an attempt with no keeper and no exit status, which is
   * relaunched (nothing of it ran). */
  j->keeper_pid = 0;
  j->keeper_start = 0;
  char path[PATH_MAX], text[32];
  job_path(m, j, path, sizeof path, "attempt");
  int len = snprintf(text, sizeof text, "%d\n", j->attempt);
  if (save_job(m, j) != 0 || cluster_write_atomic(path, text, (size_t)len) != 0) {
    if (!m->err[0]) snprintf(m->err, m->errlen, "cannot write %s: %s", path, strerror(errno));
    free_argv(v);
    return -1;
  }
  /* An --exec program's commits go to the job's directory, where it may
   * report its progress (read_progress): gradsync.torch.elastic's State
   * commits to $GRADSYNC_ELASTIC_DIR. */
  char elastic_env[PATH_MAX + 32] = "";
  if (j->exec) {
    char dir[PATH_MAX];
    job_ckpt(m, j, dir, sizeof dir);
    snprintf(elastic_env, sizeof elastic_env, "GRADSYNC_ELASTIC_DIR=%s", dir);
  }
  pid_t pid = fork();
  if (pid == 0) {
    setsid();
    if (elastic_env[0]) putenv(elastic_env);
    if (chdir(j->cwd) != 0 && chdir("/") != 0) _exit(127);
    stdio_to_null();
    for (int fd = 3; fd < 1024; fd++) close(fd);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(v[0], v);
    _exit(127);
  }
  free_argv(v);
  if (pid < 0) {
    snprintf(m->err, m->errlen, "job %d: cannot start its keeper: %s", j->id, strerror(errno));
    return -1;
  }
  unsigned long long st = 0;
  for (int i = 0; i < 50 && proc_info(pid, NULL, NULL, &st) != 0; i++) nap_ms(10);
  j->keeper_pid = (int)pid;
  j->keeper_start = st;
  return save_job(m, j);
}

/* ---- Following a job -------------------------------------------------- */

/* The job's measured resize cost, the mean of those measured (0: none). */
static double job_restart_s(const job *j) {
  return j->restart_n > 0 ? j->restart_sum / j->restart_n : 0;
}

/* Feeds a report (its time t and global sample) to probe p of the launch
 * `launch`: the seconds the launch lost once it has two reports after the
 * launch (then the probe is done), else -1. */
static double probe_report(lost_probe *p, int launch, double t, double samples) {
  if (p->launch <= 0 || p->launch != launch || !(t > p->launch_t)) return -1;
  if (p->t1 == 0) { /* its first report */
    p->t1 = t;
    p->s1 = samples;
    return -1;
  }
  p->launch = 0;
  return gs_cluster_restart_measure(p->ref_t, p->s0, p->t1, p->s1, t, samples);
}

/* Journals what was just measured of job j (a size's first speed, a
 * resize's or its start-up's cost): kept across a restart of the manager
 * and by a job that ends while none runs. A journal that cannot be written
 * is said in the log; the measurement stays in memory. */
static void journal_measured(mgr *m, job *j) {
  if (save_job(m, j) != 0) mlog(m, "job %d: its measurement not journaled: %s", j->id, m->err);
}

/* A resize's relaunch's first two reports give what the resize cost (its
 * stop request and relaunch in rs, set from its events by read_events_q),
 * counted for the relaunch's `size` nodes too (of a pool of nnode); a
 * job's first launch's, its start-up. */
static void measure_restart(mgr *m, job *j, double t, double samples, int size) {
  double r = probe_report(&j->rs, j->ev_launches, t, samples);
  if (r >= 0) {
    j->restart_sum += r;
    j->restart_n++;
    if (size >= 1 && size <= m->nnode) {
      j->rs_sum_at[size] += r;
      j->rs_n_at[size]++;
      gs_cluster_restart_fit(j->rs_sum_at, j->rs_n_at, m->nnode, j->restart_at);
    }
    mlog(m, "job %d: a resize to %d node(s) measured: %.1f s lost", j->id, size, r);
    journal_measured(m, j);
  }
  double su = probe_report(&j->su, j->ev_launches, t, samples);
  if (su >= 0) {
    j->startup_s = su;
    mlog(m, "job %d: its start-up on %d node(s) measured: %.1f s lost", j->id, size, su);
    journal_measured(m, j);
  }
}

/* The value of the job's last option `name`, as "--epochs 3" or
 * "--epochs=3" (gradsync train's getopt takes both), or NULL. */
static const char *arg_value(const job *j, const char *name) {
  const char *v = NULL;
  size_t len = strlen(name);
  const cJSON *x, *prev = NULL;
  cJSON_ArrayForEach(x, j->args) {
    if (!cJSON_IsString(x)) {
      prev = NULL;
      continue;
    }
    if (prev && strcmp(prev->valuestring, name) == 0) v = x->valuestring;
    else if (strncmp(x->valuestring, name, len) == 0 && x->valuestring[len] == '=')
      v = x->valuestring + len + 1;
    prev = x;
  }
  return v;
}

/* A DLRM training job (gradsync train --model dlrm): resized only by a
 * global batch (it has no --scale-lr). */
static int job_is_dlrm(const job *j) {
  const char *m = j->exec ? NULL : arg_value(j, "--model");
  return m != NULL && strcmp(m, "dlrm") == 0;
}

/* A gradsync train job's --global-batch, or 0. */
static long job_global_batch(const job *j) {
  const char *v = j->exec ? NULL : arg_value(j, "--global-batch");
  return v ? atol(v) : 0;
}

/* A gradsync train job's parameter servers (--ps S), or 0. */
static int job_servers(const job *j) {
  const char *v = j->exec ? NULL : arg_value(j, "--ps");
  int s = v ? atoi(v) : 0;
  return s > 0 ? s : 0;
}

/* A parameter-server job's protocol, its --sync, into *s: 1, or 0 for a
 * job without servers or --sync, or with a value its training will refuse
 * (counted as BSP). */
static int job_ps_sync(const job *j, gs_ps_sync *s) {
  const char *v = j->exec || job_servers(j) == 0 ? NULL : arg_value(j, "--sync");
  return v != NULL && gs_ps_sync_parse(v, s) == GS_OK;
}

/* The share of a parameter-server job's steps that its --sync runs
 * asynchronously (gs_ps_sync_async_share; 0, BSP, without one). */
static double job_ps_async(const job *j) {
  gs_ps_sync s;
  return job_ps_sync(j, &s) ? gs_ps_sync_async_share(&s) : 0;
}

/* 0 for a parameter-server job whose --sync runs its workers' steps apart
 * (gs_ps_sync_lockstep: ASP, SSP, Sync-Switch): no step is common to
 * commit at, so it commits at its epochs' ends and gets no --commit-every
 * (which its training refuses); 1 for every other job. */
static int job_commits_at_steps(const job *j) {
  gs_ps_sync s;
  return !job_ps_sync(j, &s) || gs_ps_sync_lockstep(&s);
}

/* Ranks a node of the pool runs, as the size rules and the prediction
 * count them (the first node's slots). */
static int pool_slots(const mgr *m) { return m->nnode > 0 ? m->node[0].spec.slots : 1; }

/* 1 when the job runs on `nodes` nodes of `slots` ranks each (its
 * supervisor's rule: gs_elastic_size_runs). */
static int job_size_runs(const job *j, int nodes, int slots) {
  return gs_elastic_size_runs(nodes * slots, job_servers(j), job_global_batch(j));
}

/* 1 when the job may change size between launches: an --exec job, or a
 * train job with a --global-batch or --scale-lr linear (gs_elastic_resizable);
 * any other keeps its batch per rank and its --resume refuses a checkpoint
 * from another rank count, so it runs at one size. */
static int job_resizable(const job *j) {
  if (j->exec) return 1;
  const char *v = arg_value(j, "--scale-lr");
  return gs_elastic_resizable(job_global_batch(j), v != NULL && strcmp(v, "linear") == 0);
}

/* What the job's sizes need, for messages: "a worker beside its --ps 1
 * server and workers that divide its --global-batch 48". */
static void size_rule(const job *j, char *out, size_t len) {
  int ps = job_servers(j);
  long gb = job_global_batch(j);
  char srv[64] = "";
  if (ps > 0)
    snprintf(srv, sizeof srv, "a worker beside its --ps %d server%s", ps, ps == 1 ? "" : "s");
  if (gb > 0)
    snprintf(out, len, "%s%s%s that divide its --global-batch %ld", srv, ps > 0 ? " and " : "",
             ps > 0 ? "workers" : "ranks", gb);
  else
    snprintf(out, len, "%s", ps > 0 ? srv : "nothing");
}

/* A gradsync train job's --epochs (1 by default). */
static double job_epochs(const job *j) {
  const char *v = arg_value(j, "--epochs");
  return v ? atof(v) : 1;
}

/* gradsync train's options that do not change how fast a step is (the
 * run's length, its seed, where it commits, the optimizer's numbers); 1
 * after a name: it takes a value. */
static const struct {
  const char *name;
  int value;
} run_only[] = {
    {"--epochs", 1},         {"--lr", 1},           {"--momentum", 1},
    {"--weight-decay", 1},   {"--schedule", 1},     {"--warmup-epochs", 1},
    {"--data-cache", 1},     {"--checkpoint", 1},   {"--commit-every", 1},
    {"--stop-at-step", 1},   {"--seed", 1},         {"--max-steps", 1},
    {"--ef-decay", 1},       {"--kfac-damping", 1}, {"--kfac-decay", 1},
    {"--kfac-kl-clip", 1},   {"--async-lr-scale", 1}, {"--async-momentum", 1},
    {"--scale-lr", 1},       {"--json", 0},         {"--nesterov", 0},
    {"--resume", 0},
};

/* A train job's kind: its options without those of run_only, joined
 * (jobs of one kind run their steps alike). Writes "" for --exec jobs or
 * when it does not fit. */
static void job_kind(const job *j, char *buf, size_t len) {
  size_t at = 0;
  buf[0] = '\0';
  if (j->exec) return;
  int skip = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, j->args) {
    if (!cJSON_IsString(x)) continue;
    const char *a = x->valuestring;
    if (skip) {
      skip = 0;
      continue;
    }
    size_t n = strcspn(a, "=");
    int drop = 0;
    for (size_t k = 0; k < sizeof run_only / sizeof run_only[0] && !drop; k++)
      if (strlen(run_only[k].name) == n && strncmp(a, run_only[k].name, n) == 0) {
        drop = 1;
        skip = run_only[k].value && a[n] != '=';
      }
    if (drop) continue;
    int w = snprintf(buf + at, len - at, "%s\x1f", a);
    if (w < 0 || (size_t)w >= len - at) {
      buf[0] = '\0';
      return;
    }
    at += (size_t)w;
  }
}

/* The most nodes job j can have: its --max, or the pool when that is
 * smaller (its curve's arrays have a size a node). */
static int job_top(const mgr *m, const job *j) { return j->max < m->nnode ? j->max : m->nnode; }

static int curve_from(const mgr *m, const job *src, int max, double *out);

/* serve --share-speeds: a train job that knows nothing of its own speed
 * yet takes the curve of an earlier job of its kind (the one that measured
 * the most sizes, the latest on a tie), and the work its epochs make of
 * that job's data. Again every round until it has its own. */
static void borrow_curve(mgr *m, job *j) {
  char mine[4096], theirs[4096];
  job_kind(j, mine, sizeof mine);
  if (!mine[0]) return;
  const job *best = NULL;
  int best_n = -1;
  for (int k = 0; k < m->njob; k++) {
    const job *o = &m->job[k];
    if (o == j || !o->own_curve) continue;
    job_kind(o, theirs, sizeof theirs);
    if (strcmp(mine, theirs) != 0) continue;
    int n = 0;
    for (int q = 1; q <= m->nnode; q++) n += o->rate[q] > 0;
    if (n > best_n || (n == best_n && o->submit_t >= best->submit_t)) {
      best = o;
      best_n = n;
    }
  }
  if (best == NULL || curve_from(m, best, job_top(m, j), j->curve) != 0) return;
  j->ncurve = job_top(m, j);
  if (j->speed_from != best->id) {
    mlog(m, "job %d: starts from job %d's speeds (the same kind)", j->id, best->id);
    j->dirty = 1;
  }
  j->speed_from = best->id;
  if (j->work <= 0 && best->epoch_samples > 0) j->work = best->epoch_samples * job_epochs(j);
}

/* A curve on 0..max (max <= the pool) from src's measured speeds: on the cost model's
 * prediction where src has one (gs_cluster_speed_prior), else Optimus's fit
 * (none before a measurement), its compute divided among the workers alone
 * for a parameter-server job (gs_cluster_speed_fit_idle: its servers train
 * on no batch). Returns 0, or -1 when src knows nothing. */
static int curve_from(const mgr *m, const job *src, int max, double *out) {
  int nn[GS_CLUSTER_MAX_NODES + 1] = {0};
  double rr[GS_CLUSTER_MAX_NODES + 1] = {0};
  int np = gs_cluster_known_points(src->rate, m->nnode, nn, rr);
  if (src->have_prior &&
      gs_cluster_speed_prior(src->prior_step, src->prior_samples, nn, rr, np, max, out) == 0)
    return 0;
  int slots = pool_slots(m);
  double idle = (double)job_servers(src) / (slots > 0 ? slots : 1);
  return np > 0 && gs_cluster_speed_fit_idle(nn, rr, np, max, idle, out, NULL, NULL, 0) == 0
             ? 0 : -1;
}

/* The job's curve from what it measured or predicted of itself. */
static void refit(mgr *m, job *j) {
  if (curve_from(m, j, job_top(m, j), j->curve) == 0) {
    j->ncurve = job_top(m, j);
    j->own_curve = 1;
    j->speed_from = 0;
  }
  j->dirty = 1;
}

/* The cost model's prediction of the job's speed (refit), from the profile
 * its rank 0 wrote beside its checkpoint (an --exec program's in its job
 * directory, as gradsync.torch.elastic's State writes its engine's after
 * set_progress(..., batch=B); at B samples a rank on every size, since its
 * command line says no global batch), when the pool's network is known;
 * again whenever the profile changes (a launch on another size writes its
 * own). */
static void read_prior(mgr *m, job *j, const char *dir) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/profile.json", dir);
  struct stat sb;
  if (!m->have_net || stat(path, &sb) != 0) return;
  double t = (double)sb.st_mtim.tv_sec + (double)sb.st_mtim.tv_nsec * 1e-9;
  if (t == j->prior_mtime) return;
  j->prior_mtime = t;
  gs_profile *p = NULL;
  if (gs_profile_load(path, &p) != GS_OK) {
    mlog(m, "job %d: its profile %s: %s", j->id, path, gs_last_error());
    return;
  }
  int top = job_top(m, j);
  int slots = pool_slots(m);
  char why[512];
  double t0 = mono_s();
  int rc = gs_cluster_prior_steps(p, &m->net, slots, job_global_batch(j), job_servers(j),
                                  job_ps_async(j), top, j->prior_step, j->prior_samples, why,
                                  sizeof why);
  gs_profile_free(p);
  if (rc != 0) {
    mlog(m, "job %d: no prediction from its profile: %s", j->id, why);
    return;
  }
  j->have_prior = 1;
  char line[512] = "";
  size_t at = 0;
  for (int q = 1; q <= top && at + 32 < sizeof line; q++)
    if (j->prior_step[q] > 0)
      at += (size_t)snprintf(line + at, sizeof line - at, " %d:%.1f", q,
                             j->prior_samples[q] / j->prior_step[q]);
  mlog(m, "job %d: predicted samples/s by nodes (%s, %.0f ms):%s", j->id, m->cfg->net,
       (mono_s() - t0) * 1e3, line);
  refit(m, j);
}

/* The job's speed on the nodes it runs on, from two commits of one launch
 * (the time between them: checkpoint.json's mtimes; a commit just after a
 * relaunch starts a new measurement, so restarts never count), folded into
 * rate[size] (the mean of the last measurement and the earlier ones), and
 * the curve refitted. */
static void measure_speed(mgr *m, job *j, const char *ckpt_json, double samples) {
  struct stat sb;
  if (stat(ckpt_json, &sb) != 0) return;
  double t = (double)sb.st_mtim.tv_sec + (double)sb.st_mtim.tv_nsec * 1e-9;
  int size = count(j->actual, m->nnode); /* the launch's nodes */
  if (t == j->obs_t) return; /* the same commit */
  /* A launch on nodes no longer in the pool (adopted after a restart with
   * a smaller --nodes) runs at a size the pool cannot name: nothing is
   * measured until its supervisor relaunches it on the pool's nodes. */
  if (j->actual_outside > 0) size = 0;
  measure_restart(m, j, t, samples, size);
  if (j->obs_t > 0 && j->obs_attempt == j->attempt && j->obs_launch == j->ev_launches &&
      j->obs_size == size && size >= 1 && size <= m->nnode && samples > j->obs_samples &&
      t > j->obs_t) {
    double r = (samples - j->obs_samples) / (t - j->obs_t);
    int first = !(j->rate[size] > 0);
    j->rate[size] = j->rate[size] > 0 ? 0.5 * (j->rate[size] + r) : r;
    refit(m, j);
    if (first) journal_measured(m, j);
  }
  j->obs_t = t;
  j->obs_samples = samples;
  j->obs_attempt = j->attempt;
  j->obs_launch = j->ev_launches;
  j->obs_size = size;
}

/* The job's progress and speed from its last report: a gradsync train
 * job's checkpoint.json at each commit (its epoch and sample, its data's
 * size, its --epochs), and its progress.json at each check between commits
 * (gradsync train --commit-every Ts, about 0.5 s apart), the newer of the
 * two counting (the commit names where a relaunch resumes); an --exec
 * program's progress.json in its job directory ($GRADSYNC_ELASTIC_DIR,
 * written at each commit by gradsync.torch.elastic's State after
 * set_progress, or by any program); an --exec program that writes none
 * stays unmeasured (linear). */
static void read_progress(mgr *m, job *j) {
  char dir[PATH_MAX], path[PATH_MAX + 32], report_path[PATH_MAX + 32];
  job_ckpt(m, j, dir, sizeof dir);
  snprintf(report_path, sizeof report_path, "%s/progress.json", dir);
  /* the report (gs_launch_read_report: -1 no file, -2 no report) */
  gs_launch_commit r;
  const int rr = gs_launch_read_report(report_path, &r), report = rr == 0, file = rr != -1;
  double e = 0, s = 0, total = 0, epochs = 0;
  int ok;
  if (j->exec) {
    ok = report;
    snprintf(path, sizeof path, "%s", report_path);
    e = (double)r.epoch, s = (double)r.samples_in_epoch, total = (double)r.epoch_samples;
    epochs = r.epochs;
    /* said once: the program's author learns why the job is not measured */
    if (!ok && file && !j->progress_warned) {
      mlog(m, "job %d: %s is not a progress report (it needs the numbers epoch >= 0, "
           "samples_in_epoch >= 0, epoch_samples > 0 and epochs > 0): the job is not "
           "measured", j->id, path);
      j->progress_warned = 1;
    }
  } else {
    /* gradsync train's checkpoint.json, or a DLRM job's dlrm.json; and a
     * report at a check after the last commit (or before the first): of
     * the same data, newer, and not behind the commit (a report of a
     * launch that failed after its commit stays until the relaunch's
     * first check: ahead of the commit, it is taken until then, and
     * measure_speed starts a new measurement at each launch). */
    gs_launch_commit cm;
    const int committed = gs_launch_read_commit(dir, &cm) == 0;
    const int now = report && (!committed || (r.epoch_samples == cm.epoch_samples &&
                                              r.mtime > cm.mtime &&
                                              r.epoch * r.epoch_samples + r.samples_in_epoch >=
                                                  cm.epoch * r.epoch_samples +
                                                      cm.samples_in_epoch));
    ok = committed || now;
    if (committed) {
      /* epochs counted from 1; a commit at an epoch's end names that epoch
       * (not "epoch 3, sample 0" for a 2-epoch job that finished) */
      if (cm.samples_in_epoch == 0 && cm.epoch >= 1)
        snprintf(j->commit, sizeof j->commit, "end of epoch %ld", (long)cm.epoch);
      else
        snprintf(j->commit, sizeof j->commit, "epoch %ld, sample %ld", (long)cm.epoch + 1,
                 (long)cm.samples_in_epoch);
    }
    if (ok) {
      snprintf(path, sizeof path, "%s", now ? report_path : cm.path);
      const gs_launch_commit *from = now ? &r : &cm;
      e = (double)from->epoch;
      s = (double)from->samples_in_epoch;
      total = (double)from->epoch_samples;
      /* its --epochs, else what the run recorded (the DLRM trainer's
       * default is not gradsync train's) */
      const double run_epochs = committed ? (double)cm.epochs : r.epochs;
      epochs = arg_value(j, "--epochs") || run_epochs <= 0 ? job_epochs(j) : run_epochs;
      /* --max-steps N ends each epoch after N global batches: the epoch's
       * samples are those (else a speed across an epoch's end counted the
       * samples never trained). */
      const double gb = (double)(committed ? cm.global_batch : r.global_batch);
      const char *ms = arg_value(j, "--max-steps");
      if (ms && atol(ms) > 0 && gb > 0) total = fmin(total, (double)atol(ms) * gb);
    }
  }
  if (ok) {
    if (j->exec) { /* its report is written at its commits */
      if (s == 0 && e >= 1)
        snprintf(j->commit, sizeof j->commit, "end of epoch %.0f", e);
      else
        snprintf(j->commit, sizeof j->commit, "epoch %.0f, sample %.0f", e + 1, s);
    }
    if (total > 0 && epochs > 0) {
      double p = (e + s / total) / epochs;
      j->progress = p > 1 ? 1 : p;
      j->work = total * epochs;
      j->epoch_samples = total;
      measure_speed(m, j, path, e * total + s);
    }
  }
  read_prior(m, j, dir);
}

/* Reads the current attempt's new events: the launch's nodes, resizes,
 * failures (logged unless quiet: read again after a restart). */
static void read_events_q(mgr *m, job *j, int quiet) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/jobs/%d/events.%d.jsonl", m->spool, j->id, j->attempt);
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (fseek(f, j->ev_off, SEEK_SET) != 0) {
    fclose(f);
    return;
  }
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    size_t n = strlen(line);
    if (n == 0 || line[n - 1] != '\n') break; /* not whole yet */
    j->ev_off += (long)n;
    cJSON *e = cJSON_Parse(line);
    const char *kind = e ? str(e, "event") : NULL;
    if (kind && strcmp(kind, "launch") == 0) {
      double size = 0;
      num(e, "size", &size);
      j->actual_size = (int)size;
      j->ev_launches++;
      /* The relaunch of a resize (the event before, below) is measured; a
       * job's first launch is not (its start-up alone, on however many
       * nodes it started, is not what a resize costs), nor a relaunch after
       * a failure (its cost is the failure's); nor, after a restart of
       * the manager, one read again (recover reads the events before any
       * report gives the job's epoch_samples, so no resize event arms the
       * probe there: tests/cluster/test_manager_restart.sh). */
      double lt = 0;
      num(e, "time", &lt);
      j->rs.launch = j->rs.launch == -1 && lt > 0 ? j->ev_launches : 0;
      j->rs.launch_t = lt;
      j->rs.t1 = j->rs.s1 = 0;
      /* A job's launch from nothing (no sample trained, none measured):
       * its start-up, from the launch on. */
      j->su.launch = 0;
      if (j->startup_s < 0 && lt > 0 && j->progress <= 0 && j->obs_t == 0)
        j->su = (lost_probe){.launch = j->ev_launches, .ref_t = lt, .launch_t = lt};
      memset(j->actual, 0, (size_t)m->nnode);
      j->actual_outside = 0;
      const char *hosts = str(e, "hosts");
      char buf[4096];
      snprintf(buf, sizeof buf, "%s", hosts ? hosts : "");
      for (char *save = NULL, *h = strtok_r(buf, ",", &save); h;
           h = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(h, ':');
        if (colon) *colon = '\0';
        int k = node_find(m, h);
        if (k >= 0) j->actual[k] = 1;
        else j->actual_outside++;
      }
      /* Hosts the supervisor will not use again (a rank killed there, or
       * unreachable): the policy round gives them back to the pool. The
       * latest launch says: a killed rank's host that the supervisor used
       * again (the job's minimum needed it) is no longer left out. */
      memset(j->left_out, 0, (size_t)m->nnode);
      const char *out = str(e, "left_out");
      snprintf(buf, sizeof buf, "%s", out ? out : "");
      for (char *save = NULL, *h = strtok_r(buf, ",", &save); h;
           h = strtok_r(NULL, ",", &save)) {
        int k = node_find(m, h);
        if (k >= 0) j->left_out[k] = 1;
      }
      if (!quiet) mlog(m, "job %d: launch on %s", j->id, hosts ? hosts : "?");
      j->dirty = 1;
    } else if (kind && strcmp(kind, "resize") == 0) {
      /* A relaunch: to resize when discovery asked, else after a failure. */
      /* A relaunch after a node was lost spends no restart: the cluster
       * shrank the job (a resize), the program did not fail. */
      const char *why = str(e, "reason");
      if ((why && strncmp(why, "discovery", 9) == 0) ||
          cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "node_lost")))
        j->ev_resizes++;
      else
        j->ev_restarts++;
      /* A resize the manager asked for: its cost runs from the supervisor's
       * stop request (seconds_lost before the event: from there the nodes
       * the job grows to idle, and the job trains on towards its commit
       * only to stop) and it resumes from its commit; the next launch event
       * starts the measurement (rs.launch -1: this one's). */
      double et = 0, lost = 0, ce = -1, cs = 0;
      num(e, "time", &et);
      num(e, "seconds_lost", &lost);
      num(e, "commit_epoch", &ce);
      num(e, "commit_samples_in_epoch", &cs);
      j->rs.launch = 0;
      if (why && strncmp(why, "discovery", 9) == 0 && et > 0 && ce >= 0 && j->epoch_samples > 0) {
        j->rs.ref_t = et - lost;
        j->rs.s0 = ce * j->epoch_samples + cs;
        j->rs.launch = -1;
      }
      if (!quiet) mlog(m, "job %d: relaunch: %s", j->id, why ? why : "");
      j->dirty = 1;
    } else if (kind && strcmp(kind, "failure") == 0) {
      const char *why = str(e, "reason");
      if (!quiet) mlog(m, "job %d: failure: %s", j->id, why ? why : "");
      j->dirty = 1;
    } else if (kind && strcmp(kind, "finish") == 0) {
      const char *msg = str(e, "message");
      if (msg) snprintf(j->message, sizeof j->message, "%s", msg);
    }
    cJSON_Delete(e);
  }
  fclose(f);
}

static void read_events(mgr *m, job *j) { read_events_q(m, j, 0); }

static int job_restarts(const job *j) { return j->restarts_base + j->ev_restarts; }
static int job_resizes(const job *j) { return j->resizes_base + j->ev_resizes; }

/* The attempt ended with status (the keeper's record): done, failed,
 * cancelled, queued again (preempted), or relaunched. */
static int attempt_ended(mgr *m, job *j, int status, double at) {
  /* charged to its end: at (its exit file's mtime) when known, as below */
  double end = spool_wall_s();
  if (at > 0 && at <= end && at >= j->launch_t) end = at;
  charge_job(m, j, end);
  read_events(m, j);
  j->restarts_base += j->ev_restarts;
  j->resizes_base += j->ev_resizes;
  j->ev_restarts = j->ev_resizes = 0;
  j->keeper_pid = 0;
  j->keeper_start = 0;
  /* The next stop of the next attempt starts with SIGTERM: an earlier
   * preemption's time left here made a later cancel or time limit SIGKILL
   * the keeper at once (no commit, no exit status, no history). */
  j->term_t = 0;
  j->actual_size = 0;
  j->actual_outside = 0;
  memset(j->actual, 0, (size_t)m->nnode);
  j->status = status;
  /* when it ended: at (its exit file's mtime) when known, as when it ended
   * while no manager was watching, else now */
  double now = spool_wall_s();
  if (at > 0 && at <= now && at >= j->launch_t) now = at;
  if (j->launch_t > 0 && now > j->launch_t) j->run_s += now - j->launch_t;
  j->launch_t = 0;
  if (j->cancel) {
    j->state = J_CANCELLED;
    snprintf(j->message, sizeof j->message, "cancelled");
  } else if (status == 0) { /* its training ended, even if just at its limit */
    j->state = J_DONE;
    snprintf(j->message, sizeof j->message, "done");
  } else if (j->timeout) {
    /* stopped at the limit (Slurm's TIMEOUT); its last commit is in its
     * directory */
    j->state = J_TIMEOUT;
    char lim[32];
    format_hms(j->time_limit_s, lim, sizeof lim);
    snprintf(j->message, sizeof j->message, "its time limit of %s was reached after %.0f s "
             "on nodes (its last commit is kept)", lim, j->run_s);
  } else if (j->preempt) {
    j->state = J_QUEUED;
    j->preempt = 0;
  } else if (status == 2) {
    j->state = J_FAILED;
    if (!j->message[0] || strcmp(j->message, "done") == 0)
      snprintf(j->message, sizeof j->message, "the program refused its options, or could "
               "not be started (exit 2; its out.log says which)");
  } else if (job_restarts(j) >= m->cfg->restart_budget) {
    j->state = J_FAILED;
    if (!strstr(j->message, "restart budget")) {
      char why[256];
      snprintf(why, sizeof why, "%s", j->message[0] ? j->message : "failed");
      snprintf(j->message, sizeof j->message, "%.160s; the restart budget (%d) is spent", why,
               m->cfg->restart_budget);
    }
  } else {
    /* The supervisor ended short (status 1, 3, a signal): relaunch from
     * the last commit on the job's nodes; it counts as a restart. */
    j->restarts_base++;
    if (strncmp(j->message, "its keeper died", 15) == 0) /* (no status of its own) */
      mlog(m, "job %d: %s: relaunching (restart %d of %d)", j->id, j->message,
           job_restarts(j), m->cfg->restart_budget);
    else
      mlog(m, "job %d: its supervisor ended with status %d (%s): relaunching (restart %d of "
           "%d)", j->id, status, j->message, job_restarts(j), m->cfg->restart_budget);
    int up = 0;
    for (int i = 0; i < m->nnode; i++) {
      if (j->assigned[i] && (m->node[i].down || m->node[i].drained)) j->assigned[i] = 0;
      up += j->assigned[i];
    }
    if (up >= j->min) return launch(m, j);
    j->state = J_QUEUED;
  }
  if (j->state != J_QUEUED) j->end_t = now;
  memset(j->assigned, 0, (size_t)m->nnode);
  /* The message only where it says more than the state ("done", "cancelled"). */
  int plain = !j->message[0] || strcmp(j->message, state_name[j->state]) == 0;
  mlog(m, "job %d: %s%s%s%s", j->id, state_name[j->state], plain ? "" : " (",
       plain ? "" : j->message, plain ? "" : ")");
  m->replan = 1;
  return save_job(m, j);
}

/* The current attempt's exit status (the keeper's exit file), and *at when
 * it was written (its mtime, wall clock). 0, or -1 when there is none. */
static int read_exit(const mgr *m, const job *j, int *status, double *at) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/jobs/%d/exit.%d", m->spool, j->id, j->attempt);
  char *t = spool_read_file(path, 64);
  if (!t) return -1;
  char *end = NULL;
  long v = strtol(t, &end, 10);
  int ok = end != t;
  gs_free(t);
  if (!ok) return -1;
  *status = (int)v;
  struct stat sb;
  *at = stat(path, &sb) == 0
            ? (double)sb.st_mtim.tv_sec + (double)sb.st_mtim.tv_nsec * 1e-9 : 0;
  return 0;
}

static int follow(mgr *m, job *j) {
  read_events(m, j);
  read_progress(m, j);
  int status;
  double at;
  if (read_exit(m, j, &status, &at) == 0) return attempt_ended(m, j, status, at);
  if (!keeper_alive(j)) {
    /* Gone without a word (killed, or the machine restarted): what is left
     * of its session goes first, then the job is relaunched. */
    nap_ms(200);
    if (read_exit(m, j, &status, &at) == 0) return attempt_ended(m, j, status, at);
    session_clear(j->keeper_pid, KEEPER_GONE_GRACE_S);
    mlog(m, "job %d: its keeper (pid %d) is gone without an exit status", j->id,
         j->keeper_pid);
    /* Its supervisor's last word (a finish event) is of the SIGTERM that
     * session_clear sent it, not of the keeper's end: said as such (it was
     * "status 137 (interrupted by signal 15; ranks stopped)"). */
    j->message[0] = '\0';
    read_events(m, j);
    char said[sizeof j->message];
    snprintf(said, sizeof said, "%s", j->message);
    if (said[0])
      snprintf(j->message, sizeof j->message, "its keeper died without an exit status; its "
               "supervisor, stopped then, said: %.160s", said);
    else
      snprintf(j->message, sizeof j->message, "its keeper died without an exit status");
    return attempt_ended(m, j, 128 + SIGKILL, 0);
  }
  if (j->time_limit_s > 0 && !j->timeout && !j->cancel && j->launch_t > 0 &&
      j->run_s + spool_wall_s() - j->launch_t >= j->time_limit_s) {
    char lim[32];
    format_hms(j->time_limit_s, lim, sizeof lim);
    mlog(m, "job %d: its time limit of %s is reached: stopping it", j->id, lim);
    j->timeout = 1;
    int rc = save_job(m, j);
    if (rc != 0) return rc;
  }
  if (j->cancel || j->preempt || j->timeout) {
    double now = mono_s();
    if (j->term_t == 0) {
      kill(-j->keeper_pid, SIGTERM);
      j->term_t = now;
    } else if (now - j->term_t > 30) {
      session_signal(j->keeper_pid, SIGKILL);
      j->term_t = now;
    }
    return 0;
  }
  /* Running once the launch uses exactly its nodes. */
  int same = j->actual_size > 0 && memcmp(j->actual, j->assigned, (size_t)m->nnode) == 0;
  job_state s = same ? J_RUNNING : J_RESIZING;
  if (j->actual_size == 0) s = J_RUNNING; /* starting */
  if (s != j->state) {
    j->state = s;
    if (s == J_RUNNING) m->replan = 1; /* nodes may have come free */
    return save_job(m, j);
  }
  return 0;
}

/* ---- Requests ----------------------------------------------------------- */

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static int take_request(mgr *m, const cJSON *r) {
  const char *op = str(r, "op");
  double v;
  if (!op) return 0;
  if (strcmp(op, "submit") == 0 && num(r, "id", &v) == 0) {
    if (job_find(m, (int)v)) return 0; /* read before: changes nothing */
    job *j = job_add(m, (int)v);
    if (!j) {
      snprintf(m->err, m->errlen, "out of memory");
      return -1;
    }
    const char *s = str(r, "name");
    snprintf(j->name, sizeof j->name, "%s", s ? s : "job");
    s = str(r, "user");
    snprintf(j->user, sizeof j->user, "%s", s && *s ? s : "-");
    s = str(r, "account");
    snprintf(j->account, sizeof j->account, "%s", s ? s : "");
    read_after(j, r);
    j->time_limit_s = num(r, "time_limit_s", &v) == 0 && v > 0 ? v : 0;
    j->min = num(r, "min", &v) == 0 ? (int)v : 1;
    j->max = num(r, "max", &v) == 0 ? (int)v : j->min;
    j->weight = num(r, "weight", &v) == 0 ? v : 1;
    j->exec = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "exec"));
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "args");
    j->args = cJSON_IsArray(a) ? cJSON_Duplicate(a, 1) : cJSON_CreateArray();
    s = str(r, "cwd");
    snprintf(j->cwd, sizeof j->cwd, "%s", s ? s : "/");
    j->submit_t = num(r, "time", &v) == 0 ? v : spool_wall_s();
    j->state = J_QUEUED;
    j->acct_t = spool_wall_s(); /* its usage is charged from now (charge_job) */
    int pool = 0;
    for (int i = 0; i < m->nnode; i++) pool += !m->node[i].down && !m->node[i].drained;
    char alim_at[GS_CLUSTER_ACCOUNT_MAX]; /* the account on its path with the smallest */
    const gs_cluster_shares *sh = &m->cfg->shares;
    int lim = gs_cluster_shares_user_limit(sh, j->user);
    int alim = j->account[0] ? gs_cluster_account_path_limit(sh->account_limit_name,
                                                             sh->account_limit_nodes,
                                                             sh->naccount_limit, j->account,
                                                             alim_at, sizeof alim_at)
                             : 0;
    int slots = pool_slots(m);
    if (j->min > m->nnode || j->min < 1 || j->max < j->min) {
      j->state = J_FAILED;
      j->end_t = spool_wall_s();
      snprintf(j->message, sizeof j->message, "sizes %d:%d do not fit the pool of %d nodes",
               j->min, j->max, m->nnode);
    } else {
      /* A gradsync train job runs only on sizes whose workers (its ranks
       * less its --ps servers) divide its --global-batch (its supervisor's
       * rule, gs_elastic_size_runs): its sizes become the smallest and the
       * largest such, so that it can start at its minimum and nodes given
       * to it are used. */
      /* A train job without --global-batch or --scale-lr linear runs at
       * one size, the largest of its range the pool holds (its --resume
       * refuses a checkpoint from another rank count). */
      int lo = 0, top = 0, rlo = 0, rtop = 0, resizable = job_resizable(j);
      int ps = job_servers(j);
      long gb = job_global_batch(j);
      char rule[128];
      size_rule(j, rule, sizeof rule);
      if (gs_elastic_size_range(j->min, j->max, slots, m->nnode, ps, gb, resizable, &lo,
                                &top) != 0) {
        j->state = J_FAILED;
        j->end_t = spool_wall_s();
        snprintf(j->message, sizeof j->message, "no size from %d to %d nodes (%d rank%s "
                 "each) gives it %s%s", j->min, j->max, slots, slots == 1 ? "" : "s", rule,
                 resizable ? "" : " on the pool");
      } else if (lo != j->min || top != j->max) {
        /* What the workers' rule alone gives, and what one size adds. */
        gs_elastic_size_range(j->min, j->max, slots, 0, ps, gb, 1, &rlo, &rtop);
        int needs = rlo != j->min || rtop != j->max;
        int fixed = lo != rlo || top != rtop;
        char why[400];
        snprintf(why, sizeof why, "%s%s%s%s%s%s", needs ? "it needs " : "", needs ? rule : "",
                 needs && fixed ? "; " : "", fixed ? "it runs at one size (" : "",
                 fixed ? gs_elastic_one_size_why(ps > 0 || job_is_dlrm(j)) : "", fixed ? ")" : "");
        mlog(m, "job %d: %d to %d nodes, not %d to %d: %s", j->id, lo, top, j->min, j->max,
             why);
        j->min = lo;
        j->max = top;
      }
    }
    for (int k = 0; k < j->nafter && j->state == J_QUEUED; k++)
      if (j->after[k] == j->id || !job_find(m, j->after[k])) {
        j->state = J_FAILED;
        j->end_t = spool_wall_s();
        snprintf(j->message, sizeof j->message, "it runs after job %d, which this manager "
                 "does not know", j->after[k]);
      }
    if (j->state == J_QUEUED && lim > 0 && j->min > lim) {
      j->state = J_FAILED;
      j->end_t = spool_wall_s();
      snprintf(j->message, sizeof j->message, "--min %d is above user %s's limit of %d nodes",
               j->min, j->user, lim);
    } else if (j->state == J_QUEUED && alim > 0 && j->min > alim) {
      j->state = J_FAILED;
      j->end_t = spool_wall_s();
      snprintf(j->message, sizeof j->message, "--min %d is above account %.200s's limit of %d "
               "nodes", j->min, alim_at, alim);
    }
    mlog(m, "job %d (%s, user %s): submitted, %d to %d nodes, weight %g%s%s", j->id, j->name,
         j->user, j->min, j->max, j->weight, j->state == J_FAILED ? ": refused: " : "",
         j->state == J_FAILED ? j->message : "");
    (void)pool;
    m->replan = 1;
    return save_job(m, j);
  }
  if (strcmp(op, "cancel") == 0 && num(r, "id", &v) == 0) {
    job *j = job_find(m, (int)v);
    if (!j) {
      /* gradsync cancel checks the id first; a request written by hand, or
       * one that outlived its manager's spool, can still name none. */
      mlog(m, "request to cancel unknown job %.0f: ignored", v);
      return 0;
    }
    if (j->state >= J_DONE || j->cancel) return 0;
    j->cancel = 1;
    mlog(m, "job %d: cancel", j->id);
    if (j->state == J_QUEUED) {
      j->state = J_CANCELLED;
      j->end_t = spool_wall_s();
      snprintf(j->message, sizeof j->message, "cancelled while queued");
    }
    m->replan = 1;
    return save_job(m, j);
  }
  if ((strcmp(op, "drain") == 0 || strcmp(op, "resume") == 0) && str(r, "node")) {
    int k = node_find(m, str(r, "node"));
    if (k < 0) {
      mlog(m, "request to %s unknown node %s: ignored", op[0] == 'd' ? "drain" : "undrain",
           str(r, "node"));
      return 0;
    }
    m->node[k].drained = op[0] == 'd';
    mlog(m, "node %s: %s", m->node[k].spec.name, op[0] == 'd' ? "drained" : "back");
    if (op[0] == 'r' && m->node[k].cool_until > 0) { /* an operator's word ends a cool-down */
      m->node[k].cool_until = 0;
      mlog(m, "node %s: its cool-down ended by undrain", m->node[k].spec.name);
    }
    m->replan = 1;
    return save_node(m, &m->node[k]);
  }
  return 0;
}

static void write_snapshot(mgr *m);

/* Takes the requests in SPOOL/incoming. A request file is removed only once
 * its effect is journaled and in the snapshot (jobs.json), so that `gradsync
 * jobs`, which lists the snapshot and the pending requests, never misses a
 * job that was just submitted. */
static int take_requests(mgr *m) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/incoming", m->spool);
  struct dirent **list = NULL;
  int n = scandir(dir, &list, NULL, by_name);
  int rc = 0, taken = 0;
  char *done = n > 0 ? gs_calloc((size_t)n, 1) : NULL;
  for (int i = 0; i < n; i++) {
    const char *name = list[i]->d_name;
    if (name[0] != '.' && strstr(name, ".json") && !strstr(name, ".tmp.") && rc == 0) {
      char path[PATH_MAX + 300];
      snprintf(path, sizeof path, "%s/%s", dir, name);
      char *text = spool_read_file(path, 1 << 20);
      cJSON *r = text ? cJSON_Parse(text) : NULL;
      gs_free(text);
      char field[32], why[160];
      if (r && spool_check_request(r, field, sizeof field, why, sizeof why) != 0) {
        /* Set aside, not taken and not read again every round. */
        char rej[PATH_MAX + 300];
        snprintf(rej, sizeof rej, "%s/rejected", m->spool);
        mkdir(rej, 0755);
        snprintf(rej, sizeof rej, "%s/rejected/%s", m->spool, name);
        int moved = rename(path, rej) == 0;
        mlog(m, "request %s: refused: its %s is %s; %s%s", name, field, why,
             moved ? "moved to " : "removed", moved ? rej : "");
        if (!moved) unlink(path);
        cJSON_Delete(r);
        continue;
      }
      if (r) rc = take_request(m, r);
      else mlog(m, "request %s: not JSON; removed", name);
      cJSON_Delete(r);
      if (rc == 0) { /* journaled first */
        taken++;
        if (done) done[i] = 1;
        else unlink(path); /* (no memory to wait: at once, as before) */
      }
    }
  }
  if (taken > 0) write_snapshot(m);
  for (int i = 0; i < n; i++) {
    if (done && done[i]) {
      char path[PATH_MAX + 300];
      snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
      unlink(path);
    }
    free(list[i]);
  }
  gs_free(done);
  free(list);
  return rc;
}

/* ---- Nodes' health ----------------------------------------------------- */

static int is_local(const char *h) {
  return strcasecmp(h, "localhost") == 0 || strncmp(h, "127.", 4) == 0;
}

/* ssh HOST true for the non-local nodes, all at once, each bounded by 8 s;
 * never blocking the loop: health_start starts a round, health_poll
 * collects what has ended. A node whose check fails is lost (its jobs
 * shrink); one that answers again is back.
 *
 * A check over a new connection costs the manager's host about 50 ms of
 * CPU and the node about 20 (the key exchange; measured on the emulated
 * nodes), every interval for every node: 0.08 cores for 8 nodes every 5 s,
 * taken from the jobs. So the checks go through one ssh connection per
 * node kept open in the background (OpenSSH's ControlMaster, its socket in
 * SPOOL/mux, closed 60 s after its last use), where a check is a new
 * session on it, nearly free; the connection's own keep-alive ends it
 * within 6 s of the node going silent, and the next check then connects
 * anew and fails. Once a minute a node is checked over a new connection,
 * so that an sshd that takes no new connections is found lost too. */
#define HEALTH_FRESH_S 60

/* Starts `ssh [-F CONFIG] -o ControlPath=PATH OPTS... NODE TAIL...` for node
 * i, its stdio on /dev/null; returns its pid, or 0 when it could not fork.
 * opts and tail end with NULL. */
static pid_t ssh_spawn(const mgr *m, int i, const char *control_path,
                       const char *const *opts, const char *const *tail) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "ControlPath=%s", control_path);
  pid_t pid = fork();
  if (pid == 0) {
    stdio_to_null();
    const char *argv[32];
    int n = 0;
    argv[n++] = "ssh";
    if (m->cfg->ssh_config) {
      argv[n++] = "-F";
      argv[n++] = m->cfg->ssh_config;
    }
    argv[n++] = "-o";
    argv[n++] = path;
    for (; *opts && n < 26; opts++) argv[n++] = *opts;
    argv[n++] = m->node[i].spec.name;
    for (; *tail && n < 31; tail++) argv[n++] = *tail;
    argv[n] = NULL;
    execvp("ssh", (char *const *)argv);
    _exit(127);
  }
  return pid > 0 ? pid : 0;
}

static void health_start(mgr *m) {
  static const char *const plain[] = {"-o", "BatchMode=yes", "-o", "ConnectTimeout=5", NULL};
  static const char *const kept[] = {"-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                                     "-o", "ControlMaster=auto", "-o", "ControlPersist=60",
                                     "-o", "ServerAliveInterval=2", "-o",
                                     "ServerAliveCountMax=3", NULL};
  static const char *const check[] = {"true", NULL};
  double now = mono_s();
  m->health_deadline = now + 8;
  for (int i = 0; i < m->nnode; i++) {
    if (is_local(m->node[i].spec.name) || m->health_pid[i] > 0) continue;
    int fresh = !m->mux[0] || now - m->node[i].fresh_s >= HEALTH_FRESH_S;
    if (fresh) m->node[i].fresh_s = now;
    m->health_pid[i] = ssh_spawn(m, i, fresh ? "none" : m->mux, fresh ? plain : kept, check);
  }
}

/* Closes the checks' background connections (ssh -O exit), all at once,
 * within 2 s in all; what is left ends 60 s after its last use in any
 * case. */
static void health_close(mgr *m) {
  static const char *const opts[] = {"-O", "exit", NULL};
  static const char *const none[] = {NULL};
  if (!m->mux[0]) return;
  pid_t *pid = gs_calloc((size_t)m->nnode, sizeof *pid);
  if (!pid) return;
  for (int i = 0; i < m->nnode; i++)
    if (!is_local(m->node[i].spec.name)) pid[i] = ssh_spawn(m, i, m->mux, opts, none);
  double deadline = mono_s() + 2;
  for (int i = 0; i < m->nnode; i++) {
    while (pid[i] > 0 && waitpid(pid[i], NULL, WNOHANG) == 0 && mono_s() < deadline) nap_ms(20);
    if (pid[i] > 0 && waitpid(pid[i], NULL, WNOHANG) == 0) {
      kill(pid[i], SIGKILL);
      waitpid(pid[i], NULL, 0);
    }
  }
  gs_free(pid);
}

/* A node lost k times within the hour (this loss counted) waits
 * cooldown * 2^(k-1) once back, at most 16 times cooldown: a node that
 * flaps (a failing NIC, a rebooting host) does not take job after job down
 * with it, each paying a restart. */
#define COOL_WINDOW_S 3600
#define COOL_MAX_FACTOR 16

static int health_result(mgr *m, int i, int ok) {
  m->health_pid[i] = 0;
  node *n = &m->node[i];
  if (ok != n->down) return 0;
  n->down = !ok;
  double now = spool_wall_s();
  if (!ok) {
    n->losses = n->losses > 0 && now - n->lost_t < COOL_WINDOW_S ? n->losses + 1 : 1;
    n->lost_t = now;
    n->cool_until = 0;
    mlog(m, "node %s: lost (ssh fails)", n->spec.name);
  } else {
    double f = 1;
    for (int k = 1; k < n->losses && f < COOL_MAX_FACTOR; k++) f *= 2;
    double wait = m->cfg->node_cooldown_s > 0 ? m->cfg->node_cooldown_s * f : 0;
    n->cool_until = wait > 0 ? now + wait : 0;
    if (wait > 0)
      mlog(m, "node %s: back; no job on it for %.0f s (lost %d time%s within the hour)",
           n->spec.name, wait, n->losses, n->losses == 1 ? "" : "s");
    else mlog(m, "node %s: back", n->spec.name);
  }
  m->replan = 1;
  return save_node(m, n);
}

/* Cool-downs that ended: their nodes join the next round. */
static void cool_poll(mgr *m) {
  double now = spool_wall_s();
  for (int i = 0; i < m->nnode; i++)
    if (m->node[i].cool_until > 0 && now >= m->node[i].cool_until) {
      m->node[i].cool_until = 0;
      mlog(m, "node %s: cooled down", m->node[i].spec.name);
      m->replan = 1;
    }
}

/* Reaps every child that ended (the health checks, and the keepers this
 * manager started: adopted ones are init's), and ends checks past their
 * bound. */
static int health_poll(mgr *m) {
  int rc = 0, status;
  for (pid_t r; (r = waitpid(-1, &status, WNOHANG)) > 0;)
    for (int i = 0; i < m->nnode; i++)
      if (m->health_pid[i] == r && health_result(m, i, WIFEXITED(status) &&
                                                          WEXITSTATUS(status) == 0) != 0)
        rc = -1;
  if (mono_s() > m->health_deadline)
    for (int i = 0; i < m->nnode; i++)
      if (m->health_pid[i] > 0) {
        kill(m->health_pid[i], SIGKILL);
        waitpid(m->health_pid[i], &status, 0);
        if (health_result(m, i, 0) != 0) rc = -1;
      }
  return rc;
}

/* ---- Policy rounds ------------------------------------------------------ */

static int node_usable(const mgr *m, int i) {
  return !m->node[i].down && !m->node[i].drained && m->node[i].cool_until == 0;
}

/* Whether node i is free for job j (NULL: for any job): no job has it
 * assigned or runs on it, and j's supervisor did not leave it out. */
static int node_free(const mgr *m, int i, const job *for_job) {
  if (!node_usable(m, i)) return 0;
  if (for_job && for_job->left_out[i]) return 0;
  for (int k = 0; k < m->njob; k++) {
    const job *j = &m->job[k];
    if (j->assigned[i]) return 0;
    /* A node still under another job's launch; the job's own launch may
     * grow back onto it. */
    if (j != for_job && job_active(j) && j->actual[i]) return 0;
  }
  return 1;
}

/* What the policies charge each job's resize (restart_price): its own
 * resizes' mean once one is measured; before that, by default, a prior from
 * the pool's measured start-ups and resizes (gs_cluster_restart_prior; 30 s
 * while nothing is measured), with --restart-penalty S, S (0 here: the
 * policies' restart_penalty_s). A measured nothing is 10 ms, not 0: to the
 * policies 0 is "not measured". */
static void price_restarts(mgr *m) {
  const int fixed = m->cfg->restart_penalty_s != 0;
  double *r = fixed ? NULL : gs_calloc((size_t)m->njob + 1, sizeof *r);
  double *su = fixed ? NULL : gs_calloc((size_t)m->njob + 1, sizeof *su);
  const int prior = r && su;
  gs_cluster_restart_pool pool = {0};
  gs_cluster_policy_opts d;
  gs_cluster_policy_defaults(&d);
  for (int k = 0; k < m->njob && prior; k++) {
    r[k] = m->job[k].restart_n > 0 ? job_restart_s(&m->job[k]) : -1;
    su[k] = m->job[k].startup_s;
  }
  if (prior) gs_cluster_restart_pool_fit(r, su, m->njob, &pool);
  for (int k = 0; k < m->njob; k++) {
    job *j = &m->job[k];
    double p = j->restart_n > 0 ? job_restart_s(j)
               : prior      ? gs_cluster_restart_prior(&pool, j->startup_s, d.restart_penalty_s)
                            : 0;
    /* An ended job keeps the price its last round charged (journaled) */
    if (j->state >= J_DONE && (j->restart_price > 0 || j->end_priced)) continue;
    j->restart_price = j->restart_n > 0 || prior ? fmax(p, 0.01) : 0;
    if (j->state >= J_DONE) j->end_priced = 1;
  }
  gs_free(r);
  gs_free(su);
}

/* Why each job of the round waits, or runs below its largest size beside
 * idle nodes (Slurm's pending reasons), into j->why: the nodes it needs
 * against those usable (down, drained, cooling), the jobs holding them and
 * what the policy weighed. holds[q]: the nodes job q holds (in[q].cur_nodes
 * may be an answer that waits for nodes, gs_cluster_keep_granted). */
static void explain_round(mgr *m, const gs_cluster_job *in, const int *idx, const int *holds,
                          const int *size, int n, int usable) {
  int given = 0, down = 0, drained = 0, cooling = 0;
  for (int q = 0; q < n; q++) given += size[q];
  for (int i = 0; i < m->nnode; i++) {
    down += m->node[i].down;
    drained += !m->node[i].down && m->node[i].drained;
    cooling += !m->node[i].down && !m->node[i].drained && m->node[i].cool_until > 0;
  }
  for (int k = 0; k < m->njob; k++) m->job[k].why[0] = '\0';
  for (int q = 0; q < n; q++) {
    job *j = &m->job[idx[q]];
    char *w = j->why;
    size_t wl = sizeof j->why;
    const char *pol = m->cfg->policy;
    if (j->state == J_QUEUED && size[q] == 0) {
      if (in[q].min_nodes > usable) {
        snprintf(w, wl, "waiting: needs %d node%s, %d usable of %d (%d down, %d drained, %d "
                 "cooling)", in[q].min_nodes, in[q].min_nodes == 1 ? "" : "s", usable, m->nnode,
                 down, drained, cooling);
        continue;
      }
      char held[96] = "";
      size_t hl = 0;
      int nheld = 0;
      for (int r = 0; r < n; r++)
        if (size[r] > 0 && r != q && hl + 16 < sizeof held) {
          hl += (size_t)snprintf(held + hl, sizeof held - hl, "%s%d", nheld ? ", " : "",
                                 m->job[idx[r]].id);
          nheld++;
        }
      char how[128];
      if (strcmp(pol, "static") == 0)
        snprintf(how, sizeof how, "static: FIFO at its requested size, no resizing");
      else if (strcmp(pol, "dorm") == 0 && j->fair_now + 1e-9 < in[q].min_nodes)
        snprintf(how, sizeof how, "dorm: its fair share %.2g is below its --min %d", j->fair_now,
                 in[q].min_nodes);
      else if (strcmp(pol, "dorm") == 0)
        snprintf(how, sizeof how, "dorm: the fairness gained does not pay their resizes "
                 "(~%.0f s each)", j->restart_price);
      else
        snprintf(how, sizeof how, "%s: its minimum does not fit beside jobs ahead of it", pol);
      snprintf(w, wl, "waiting: needs %d node%s, %d free; nodes held by job%s %s (policy %s)",
               in[q].min_nodes, in[q].min_nodes == 1 ? "" : "s", usable - given,
               nheld == 1 ? "" : "s", nheld ? held : "-", how);
    } else if (job_active(j) && size[q] > 0 && size[q] == holds[q] &&
               size[q] < in[q].max_nodes && usable - given > 0) {
      snprintf(w, wl, "not grown onto %d idle node%s: policy %s weighs a growth against its "
               "restart (~%.0f s) over its expected remaining time (~%.0f s)", usable - given,
               usable - given == 1 ? "" : "s", pol, j->restart_price,
               gs_cluster_remaining_s(&in[q], holds[q], in[q].run_s));
    }
  }
}

static int policy_round(mgr *m) {
  const gs_cluster_serve_config *c = m->cfg;
  price_restarts(m);
  /* Nodes lost or drained leave their jobs first. */
  for (int k = 0; k < m->njob; k++) {
    job *j = &m->job[k];
    if (!job_active(j)) continue;
    int changed = 0, left = 0;
    for (int i = 0; i < m->nnode; i++)
      if (j->assigned[i] && !node_usable(m, i)) {
        j->assigned[i] = 0;
        changed = 1;
      } else if (j->assigned[i] && j->left_out[i]) {
        /* Its supervisor will not use it again: idle under the job. */
        j->assigned[i] = 0;
        left = 1;
        mlog(m, "job %d: its supervisor left node %s out (a rank killed there, or "
             "unreachable): the node returns to the pool", j->id, m->node[i].spec.name);
      }
    if (changed)
      mlog(m, "job %d: a node of its partition is lost or drained: %d node(s) left", j->id,
           count(j->assigned, m->nnode));
    if ((changed || left) && (save_job(m, j) != 0 || write_nodes(m, j) != 0)) return -1;
  }
  int usable = 0;
  for (int i = 0; i < m->nnode; i++) usable += node_usable(m, i);
  gs_cluster_job *in = gs_calloc((size_t)m->njob + 1, sizeof *in);
  /* idx[q]: the round's job q in m->job; held[q]: the nodes its partition
   * holds (in[q].cur_nodes may be its waiting answer, job.granted, kept in
   * granted[q]) */
  int *idx = gs_calloc(3 * ((size_t)m->njob + 1), sizeof *idx), *held = idx + m->njob + 1;
  int *granted = held + m->njob + 1;
  int *size = gs_calloc((size_t)m->njob + 1, sizeof *size);
  /* each job's user and account, for the round's fair shares */
  const char **users = gs_calloc((size_t)m->njob + 1, sizeof *users);
  const char **accts = gs_calloc((size_t)m->njob + 1, sizeof *accts);
  if (!in || !idx || !size || !users || !accts) {
    gs_free(in);
    gs_free(idx);
    gs_free(size);
    gs_free(users);
    gs_free(accts);
    snprintf(m->err, m->errlen, "out of memory");
    return -1;
  }
  int n = 0, rc = 0;
  for (int k = 0; k < m->njob; k++) {
    job *j = &m->job[k];
    if (j->cancel || j->preempt || j->timeout) {
      j->granted = 0; /* (being stopped: no answer waits) */
      continue;
    }
    if (j->state == J_QUEUED && j->nafter > 0) { /* submit --after */
      const job *d = NULL;
      if (after_wait(m, j, &d) > 0) continue;
      if (d != NULL) {
        j->state = J_CANCELLED;
        j->end_t = spool_wall_s();
        snprintf(j->message, sizeof j->message, "job %d, which it runs after, %s", d->id,
                 d->state == J_FAILED      ? "failed"
                 : d->state == J_TIMEOUT ? "reached its time limit"
                                         : "was cancelled");
        mlog(m, "job %d: cancelled: %s", j->id, j->message);
        m->replan = 1;
        if (save_job(m, j) != 0) rc = -1;
        continue;
      }
    }
    if (j->state != J_QUEUED && !job_active(j)) continue;
    if (c->share_speeds && !j->own_curve) borrow_curve(m, j);
    /* (--max may exceed the pool: the policies see at most the pool, and
     * the job's curve has no more sizes; a job journaled on a larger pool
     * keeps its minimum, without a curve) */
    int top = job_top(m, j) < j->min ? j->min : job_top(m, j);
    in[n] = (gs_cluster_job){.id = j->id, .min_nodes = j->min, .max_nodes = top,
                             .weight = j->weight, .cur_nodes = count(j->assigned, m->nnode),
                             .submit_time = j->submit_t, .progress = j->progress,
                             .speed = j->ncurve >= top ? j->curve : NULL,
                             .restarts = job_restarts(j),
                             /* in the curve's units (samples): without one, unknown */
                             .work = j->ncurve >= top ? j->work : 0,
                             .restart_s = j->restart_price,
                             .restart_at = j->restart_n > 0 ? j->restart_at : NULL,
                             /* its time on nodes so far: an unknown remaining
                              * time is expected to be as long again */
                             .run_s = j->run_s + (job_active(j) && j->launch_t > 0
                                                      ? spool_wall_s() - j->launch_t
                                                      : 0)};
    /* What it is owed to now (dorm's --fairness-window): its fair share's
     * node-seconds less its partitions', charged to acct_t and on since. */
    double since = j->acct_t > 0 ? spool_wall_s() - j->acct_t : 0;
    in[n].owed_s = j->fair_s - j->node_s + (j->fair_now - (job_active(j) ? in[n].cur_nodes : 0)) *
                                               (since > 0 ? since : 0);
    held[n] = in[n].cur_nodes;
    granted[n] = j->granted;
    idx[n++] = k;
  }
  /* A start or grow that waits for nodes being given back is, to the
   * policies, the size it was answered. */
  gs_cluster_keep_granted(in, granted, n, usable);
  /* The policies' own defaults (Dorm's weights 0.5 and 0.02: with weights
   * of 1 one resize cost as much as the whole utilisation term, and dorm
   * never resized a running job), re-solved every round of this manager;
   * the users' and accounts' shares and limits (gs_cluster_fairshare_round:
   * out of memory, the jobs' own weights and no limits). */
  gs_cluster_policy_opts opts;
  gs_cluster_policy_defaults(&opts);
  if (c->interval_s > 0) opts.interval_s = c->interval_s;
  opts.fairness_window_s = c->fairness_window_s;
  if (c->restart_penalty_s != 0) /* < 0: none */
    opts.restart_penalty_s = c->restart_penalty_s > 0 ? c->restart_penalty_s : 0;
  for (int q = 0; q < n; q++) {
    users[q] = m->job[idx[q]].user;
    accts[q] = m->job[idx[q]].account;
  }
  /* With --usage-halflife, every job's decayed usage to now, the ended
   * jobs' too (out of memory: the shares as given). */
  gs_cluster_usage use = {0};
  const char **uu = NULL, **ua = NULL;
  double *un = NULL;
  double hl = c->shares.usage_halflife_s, wall = spool_wall_s();
  if (hl > 0) {
    uu = gs_calloc((size_t)m->njob + 1, sizeof *uu);
    ua = gs_calloc((size_t)m->njob + 1, sizeof *ua);
    un = gs_calloc((size_t)m->njob + 1, sizeof *un);
    if (uu && ua && un) {
      for (int k = 0; k < m->njob; k++) {
        const job *j = &m->job[k];
        uu[k] = j->user;
        ua[k] = j->account;
        un[k] = j->acct_t > 0 ? gs_cluster_usage_decay(j->usage_s, 0, wall - j->acct_t, hl) : 0;
      }
      use = (gs_cluster_usage){.user = uu, .account = ua, .node_s = un, .n = m->njob};
    }
  }
  gs_cluster_fairshare fs;
  (void)gs_cluster_fairshare_round(&c->shares, in, n, users, accts, &use, &fs, &opts);
  gs_free(uu);
  gs_free(ua);
  gs_free(un);
  /* Each job's fair share from now on (its usage report's fair node-hours;
   * a job outside the round, waiting for another or being stopped, has
   * none). */
  double *share = gs_calloc((size_t)n + 1, sizeof *share);
  if (share != NULL) {
    for (int k = 0; k < m->njob; k++) m->job[k].fair_now = 0;
    if (n > 0) gs_cluster_fair_share(in, n, usable, &opts, share);
    for (int q = 0; q < n; q++) m->job[idx[q]].fair_now = share[q];
    gs_free(share);
  }
  gs_cluster_policy_report rep = {0};
  char why[512];
  int failed = n > 0 && gs_cluster_allocate(c->policy, in, n, usable, &opts, size, &rep, why,
                                            sizeof why) != 0;
  if (failed) mlog(m, "policy %s: %s; nothing changed", c->policy, why);
  /* A size a job does not run on (its workers do not divide its global
   * batch) would leave nodes idle (its supervisor runs on the largest size
   * that it runs on): such a size is rounded down to one that it runs on,
   * at least the job's minimum. */
  int slots = pool_slots(m);
  for (int q = 0; q < n && !failed; q++)
    while (size[q] > in[q].min_nodes && !job_size_runs(&m->job[idx[q]], size[q], slots))
      size[q]--;
  if (m->round_log != NULL && n > 0) {
    const char **names = gs_calloc((size_t)n, sizeof *names);
    for (int q = 0; names != NULL && q < n; q++) names[q] = m->job[idx[q]].name;
    int lrc = gs_cluster_round_log(m->round_log, spool_wall_s(), c->policy, usable, in, names,
                                   n, size, &rep, failed ? why : NULL);
    gs_free(names);
    if (lrc != 0) {
      mlog(m, "--round-log %s: cannot write (%s): the log stops here", c->round_log,
           strerror(errno));
      fclose(m->round_log);
      m->round_log = NULL;
    }
  }
  if (failed) n = 0;
  explain_round(m, in, idx, held, size, n, usable);
  /* Shrinks first (they free nodes), then grows and starts from free nodes. */
  for (int pass = 0; pass < 2 && rc == 0; pass++)
    for (int q = 0; q < n && rc == 0; q++) {
      job *j = &m->job[idx[q]];
      int cur = held[q], want = size[q];
      if (pass == 1) j->granted = 0; /* (set again below while it waits) */
      if (pass == 0 && want == 0 && cur == 0 && job_active(j) && !j->preempt) {
        /* Running with no node left (every node of its partition drained or
         * lost): preempted, as a job below its minimum is, to wait queued
         * for nodes. It was skipped (0 wanted of 0 held), so its supervisor
         * waited 30 s for slots, failed, and spent a restart (or, with no
         * budget left, failed the job). */
        j->preempt = 1;
        mlog(m, "job %d: preempted (no node of its partition is left)", j->id);
        rc = save_job(m, j);
        continue;
      }
      if (want == cur) continue;
      if (pass == 0 && want < cur) {
        if (want == 0) {
          if (job_active(j)) {
            j->preempt = 1;
            mlog(m, "job %d: preempted (its minimum no longer fits)", j->id);
            rc = save_job(m, j);
          }
          continue;
        }
        /* Give back first what its launch does not run on, then the last. */
        gs_cluster_shrink_nodes(j->assigned, j->actual, m->nnode, cur - want);
        mlog(m, "job %d: shrink %d -> %d nodes", j->id, cur, want);
        if ((rc = save_job(m, j)) == 0) rc = write_nodes(m, j);
      } else if (pass == 1 && want > cur) {
        int nfree = 0;
        for (int i = 0; i < m->nnode; i++) nfree += node_free(m, i, j);
        if (nfree < want - cur) {
          j->granted = want; /* its answer, kept in the rounds until it is done */
          m->retry = 1;      /* nodes still being given back: again in a second */
          continue;
        }
        for (int i = 0, add = want - cur; i < m->nnode && add > 0; i++)
          if (node_free(m, i, j)) {
            j->assigned[i] = 1;
            add--;
          }
        if (j->state == J_QUEUED) {
          j->state = J_RUNNING;
          if (j->start_t == 0) j->start_t = spool_wall_s();
          mlog(m, "job %d: start on %d nodes", j->id, want);
          rc = launch(m, j);
        } else {
          mlog(m, "job %d: grow %d -> %d nodes", j->id, cur, want);
          if ((rc = save_job(m, j)) == 0) rc = write_nodes(m, j);
        }
      }
    }
  gs_cluster_fairshare_free(&fs);
  gs_free(in);
  gs_free(idx);
  gs_free(size);
  gs_free(users);
  gs_free(accts);
  return rc;
}

/* ---- Snapshot for `gradsync jobs` -------------------------------------- */

static char *snapshot_text(mgr *m) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "time", spool_wall_s());
  cJSON_AddStringToObject(root, "policy", m->cfg->policy);
  double hl = m->cfg->shares.usage_halflife_s;
  if (hl > 0) cJSON_AddNumberToObject(root, "usage_halflife_s", hl);
  if (m->cfg->fairness_window_s > 0)
    cJSON_AddNumberToObject(root, "fairness_window_s", m->cfg->fairness_window_s);
  cJSON_AddNumberToObject(root, "manager_pid", (double)getpid());
  cJSON *ns = cJSON_AddArrayToObject(root, "nodes");
  for (int i = 0; i < m->nnode; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", m->node[i].spec.name);
    cJSON_AddStringToObject(o, "state", m->node[i].down      ? "down"
                                        : m->node[i].drained ? "drained"
                                        : m->node[i].cool_until > 0 ? "cooling"
                                                             : "up");
    cJSON_AddNumberToObject(o, "slots", m->node[i].spec.slots);
    if (m->node[i].cool_until > 0)
      cJSON_AddNumberToObject(o, "cool_until", m->node[i].cool_until);
    cJSON_AddNumberToObject(o, "losses", m->node[i].losses);
    int owner = 0;
    for (int k = 0; k < m->njob && !owner; k++)
      if (m->job[k].assigned[i] || (job_active(&m->job[k]) && m->job[k].actual[i]))
        owner = m->job[k].id;
    cJSON_AddNumberToObject(o, "job", owner);
    cJSON_AddItemToArray(ns, o);
  }
  cJSON *js = cJSON_AddArrayToObject(root, "jobs");
  for (int k = 0; k < m->njob; k++) {
    const job *j = &m->job[k];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "name", j->name);
    cJSON_AddStringToObject(o, "user", j->user);
  if (j->account[0]) cJSON_AddStringToObject(o, "account", j->account);
    cJSON_AddStringToObject(o, "state", state_name[j->state]);
    cJSON_AddNumberToObject(o, "min", j->min);
    cJSON_AddNumberToObject(o, "max", j->max);
    cJSON_AddNumberToObject(o, "weight", j->weight);
    cJSON_AddNumberToObject(o, "size", job_active(j) ? count(j->assigned, m->nnode) : 0);
    cJSON_AddNumberToObject(o, "running_ranks", job_active(j) ? j->actual_size : 0);
    cJSON *a = cJSON_AddArrayToObject(o, "nodes");
    for (int i = 0; i < m->nnode; i++)
      if (j->assigned[i]) cJSON_AddItemToArray(a, cJSON_CreateString(m->node[i].spec.name));
    if (j->progress >= 0) cJSON_AddNumberToObject(o, "progress", j->progress);
    else cJSON_AddNullToObject(o, "progress");
    if (j->commit[0]) cJSON_AddStringToObject(o, "commit", j->commit);
    else cJSON_AddNullToObject(o, "commit");
    add_speeds(o, m, j, 1);
    /* the job whose curve it borrowed (serve --share-speeds), while it has none of its own */
    if (j->speed_from > 0) cJSON_AddNumberToObject(o, "speed_from", j->speed_from);
    /* the cost model's prediction per size, {"1": 512.0, ...} (none: absent) */
    if (j->have_prior) {
      cJSON *pr = cJSON_AddObjectToObject(o, "prior");
      for (int q = 1; q <= job_top(m, j); q++)
        if (j->prior_step[q] > 0) {
          char key[16];
          snprintf(key, sizeof key, "%d", q);
          cJSON_AddNumberToObject(pr, key, round(j->prior_samples[q] / j->prior_step[q] * 10) / 10);
        }
    }
    /* a restart's measured cost, the mean of those measured (null: none
     * yet), its start-up's, and what the last round charged (null: the
     * fixed --restart-penalty) */
    if (j->restart_n > 0)
      cJSON_AddNumberToObject(o, "restart_s", round(job_restart_s(j) * 100) / 100);
    else cJSON_AddNullToObject(o, "restart_s");
    if (j->startup_s >= 0) cJSON_AddNumberToObject(o, "startup_s", round(j->startup_s * 100) / 100);
    else cJSON_AddNullToObject(o, "startup_s");
    if (j->restart_price > 0)
      cJSON_AddNumberToObject(o, "restart_price_s", round(j->restart_price * 100) / 100);
    else cJSON_AddNullToObject(o, "restart_price_s");
    /* and by the nodes it restarted on, {"2": 4.1, ...} (measured sizes only) */
    cJSON *rb = cJSON_AddObjectToObject(o, "restart_s_by_size");
    for (int q = 1; q <= m->nnode; q++)
      if (j->rs_n_at[q] > 0) {
        char key[16];
        snprintf(key, sizeof key, "%d", q);
        cJSON_AddNumberToObject(rb, key, round(j->rs_sum_at[q] / j->rs_n_at[q] * 100) / 100);
      }
    cJSON_AddNumberToObject(o, "resizes", job_resizes(j));
    cJSON_AddNumberToObject(o, "restarts", job_restarts(j));
    cJSON_AddNumberToObject(o, "attempts", j->attempt);
    cJSON_AddNumberToObject(o, "submit_time", j->submit_t);
    if (j->start_t > 0) cJSON_AddNumberToObject(o, "start_time", j->start_t);
    else cJSON_AddNullToObject(o, "start_time");
    if (j->end_t > 0) cJSON_AddNumberToObject(o, "end_time", j->end_t);
    else cJSON_AddNullToObject(o, "end_time");
    if (j->state >= J_DONE) cJSON_AddNumberToObject(o, "status", j->status);
    add_after(o, j);
    if (j->time_limit_s > 0) cJSON_AddNumberToObject(o, "time_limit_s", j->time_limit_s);
    else cJSON_AddNullToObject(o, "time_limit_s");
    cJSON_AddNumberToObject(o, "run_s", round((j->run_s + (job_active(j) && j->launch_t > 0
                                                               ? spool_wall_s() - j->launch_t
                                                               : 0)) * 10) / 10);
    cJSON_AddNumberToObject(o, "node_s", round(j->node_s * 10) / 10);
    cJSON_AddNumberToObject(o, "fair_node_s", round(j->fair_s * 10) / 10);
    if (hl > 0) /* its usage decayed to now (--usage-halflife) */
      cJSON_AddNumberToObject(
          o, "usage_node_s",
          round(gs_cluster_usage_decay(j->usage_s, 0, j->acct_t > 0 ? spool_wall_s() - j->acct_t : 0,
                                       hl) * 10) / 10);
    const job *d = NULL;
    if (j->state == J_QUEUED && j->nafter > 0 && !j->message[0] && after_wait(m, j, &d) > 0) {
      char waiting[128];
      snprintf(waiting, sizeof waiting, "waiting for job %d (%s)", d->id, state_name[d->state]);
      cJSON_AddStringToObject(o, "message", waiting);
    } else if (!j->message[0] && j->why[0] && (j->state == J_QUEUED || job_active(j))) {
      cJSON_AddStringToObject(o, "message", j->why); /* the last round's reason */
    } else {
      cJSON_AddStringToObject(o, "message", j->message);
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/jobs/%d", m->spool, j->id);
    cJSON_AddStringToObject(o, "dir", dir);
    cJSON_AddItemToArray(js, o);
  }
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return text;
}

static void write_snapshot(mgr *m) {
  char *text = snapshot_text(m);
  if (!text) return;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/jobs.json", m->spool);
  if (cluster_write_atomic(path, text, strlen(text)) != 0)
    mlog(m, "cannot write %s: %s", path, strerror(errno));
  cJSON_free(text);
  for (int k = 0; k < m->njob; k++) m->job[k].dirty = 0;
}

/* ---- Serving ---------------------------------------------------------- */

static int write_pool(mgr *m) {
  cJSON *p = cJSON_CreateObject();
  cJSON_AddStringToObject(p, "policy", m->cfg->policy);
  cJSON_AddNumberToObject(p, "manager_pid", (double)getpid());
  cJSON *a = cJSON_AddArrayToObject(p, "nodes");
  for (int i = 0; i < m->nnode; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", m->node[i].spec.name);
    cJSON_AddNumberToObject(o, "slots", m->node[i].spec.slots);
    cJSON_AddItemToArray(a, o);
  }
  if (m->cfg->shares.nlimit > 0) { /* clients check submissions against them */
    cJSON *l = cJSON_AddObjectToObject(p, "user_limits");
    for (int k = 0; k < m->cfg->shares.nlimit; k++)
      cJSON_AddNumberToObject(l, m->cfg->shares.limit_user[k], m->cfg->shares.limit_nodes[k]);
  }
  if (m->cfg->shares.naccount_limit > 0) {
    cJSON *l = cJSON_AddObjectToObject(p, "account_limits");
    for (int k = 0; k < m->cfg->shares.naccount_limit; k++)
      cJSON_AddNumberToObject(l, m->cfg->shares.account_limit_name[k],
                              m->cfg->shares.account_limit_nodes[k]);
  }
  char *text = cJSON_PrintUnformatted(p);
  cJSON_Delete(p);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/pool.json", m->spool);
  int rc = text ? cluster_write_atomic(path, text, strlen(text)) : -1;
  if (rc != 0) snprintf(m->err, m->errlen, "cannot write %s: %s", path, strerror(errno));
  cJSON_free(text);
  return rc;
}

/* An adopted job's nodes file against the nodes the replay gave it: a node
 * no longer in the pool (a restart with a smaller --nodes) was dropped, and
 * its supervisor learns so only from the file, as when a node is lost: it
 * shrinks the job at its next commit. */
static int adopt_nodes(mgr *m, job *j) {
  char path[PATH_MAX], want[65536], had[65536];
  size_t w = nodes_text(m, j, want, sizeof want);
  job_path(m, j, path, sizeof path, "nodes");
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(had, 1, sizeof had - 1, f) : 0;
  if (f) fclose(f);
  had[n] = '\0';
  if (n == w && memcmp(had, want, w) == 0) return 0;
  char gone[1024] = "";
  size_t g = 0;
  for (char *save = NULL, *h = strtok_r(had, "\n", &save); h; h = strtok_r(NULL, "\n", &save)) {
    char *colon = strrchr(h, ':');
    if (colon) *colon = '\0';
    if (node_find(m, h) >= 0) continue;
    int k = snprintf(gone + g, sizeof gone - g, "%s%s", g ? "," : "", h);
    if (k > 0 && (size_t)k < sizeof gone - g) g += (size_t)k;
  }
  mlog(m, "job %d: its nodes %s are not in the pool; it shrinks to %d node(s) at its next "
       "commit", j->id, g ? gone : "(changed)", count(j->assigned, m->nnode));
  return write_nodes(m, j);
}

/* After replay: each job that was running is adopted or relaunched. */
static int recover(mgr *m) {
  int rc = 0;
  for (int k = 0; k < m->njob && rc == 0; k++) {
    job *j = &m->job[k];
    if (!job_active(j)) continue;
    /* Its events again from the start (counts are per attempt). */
    j->ev_off = 0;
    read_events_q(m, j, 1);
    /* A keeper holds the job's lock while it lives (gs_cluster_keep), and
     * says there which attempt it runs: even one started just before the
     * crash, whose pid the journal never got, is found. */
    char path[PATH_MAX];
    job_path(m, j, path, sizeof path, "lock");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
      char text[128] = "";
      ssize_t n = pread(fd, text, sizeof text - 1, 0);
      int pid = 0, attempt = 0;
      unsigned long long start = 0;
      if (n > 0) text[n] = '\0';
      close(fd);
      if (sscanf(text, "%d %llu %d", &pid, &start, &attempt) == 3 && attempt == j->attempt) {
        j->keeper_pid = pid;
        j->keeper_start = start;
        mlog(m, "job %d: adopted (keeper pid %d, attempt %d)", j->id, pid, attempt);
        if ((rc = save_job(m, j)) != 0 || (rc = adopt_nodes(m, j)) != 0) break;
        continue;
      }
      /* A keeper of an older attempt that has not yet seen it is stale. */
      mlog(m, "job %d: a keeper of attempt %d holds its lock; waiting for it to end", j->id,
           attempt);
      if (pid > 0) session_clear(pid, 0); /* a live keeper: nothing signalled it */
    } else if (fd >= 0) {
      close(fd); /* unlocks: no keeper lives */
    }
    int status;
    double at;
    if (j->keeper_pid > 0 && read_exit(m, j, &status, &at) == 0) {
      /* It ended while no manager watched: its last commit, and its end
       * when its keeper wrote the exit file, not now. */
      read_progress(m, j);
      rc = attempt_ended(m, j, status, at);
      continue;
    }
    if (j->keeper_pid > 0) session_clear(j->keeper_pid, KEEPER_GONE_GRACE_S);
    mlog(m, "job %d: its keeper is gone; relaunching from its last commit", j->id);
    if (j->keeper_pid > 0) j->restarts_base++; /* it had started: a restart */
    rc = launch(m, j);
  }
  return rc;
}

int gs_cluster_policy_exists(const char *name) { return gs_cluster_policy_known(name); }

/* Removes dir's temporary files (NAME.tmp.PID, cluster_write_atomic's and
 * the clients') whose writer is dead: a manager or a client killed between
 * the write and its rename leaves one behind. Returns how many. */
static int sweep_tmp(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *de; d && (de = readdir(d));) {
    const char *t = strstr(de->d_name, ".tmp.");
    char *end;
    if (t == NULL) continue;
    long pid = strtol(t + 5, &end, 10);
    if (end == t + 5 || *end != '\0' || pid <= 0) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* its writer lives */
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) < (int)sizeof path &&
        unlink(path) == 0)
      n++;
  }
  if (d) closedir(d);
  return n;
}

/* sweep_tmp over the spool, its incoming requests and every job's directory. */
static void sweep_spool_tmp(mgr *m) {
  char path[PATH_MAX];
  int n = sweep_tmp(m->spool);
  snprintf(path, sizeof path, "%s/incoming", m->spool);
  n += sweep_tmp(path);
  snprintf(path, sizeof path, "%s/jobs", m->spool);
  DIR *d = opendir(path);
  for (struct dirent *de; d && (de = readdir(d));) {
    if (!isdigit((unsigned char)de->d_name[0])) continue;
    char sub[PATH_MAX];
    if (snprintf(sub, sizeof sub, "%s/%s", path, de->d_name) < (int)sizeof sub) n += sweep_tmp(sub);
  }
  if (d) closedir(d);
  if (n > 0) mlog(m, "removed %d temporary file%s of dead writers", n, n == 1 ? "" : "s");
}

int gs_cluster_serve(const gs_cluster_serve_config *cfg, char *err, size_t errlen) {
  gs_cluster_serve_config c = *cfg;
  if (c.interval_s <= 0) c.interval_s = 10;
  if (c.discover_every_s <= 0) c.discover_every_s = 1;
  if (c.commit_every <= 0) c.commit_every = 20;
  if (c.commit_every_s == 0) c.commit_every_s = GS_CLUSTER_COMMIT_EVERY_S;
  if (c.restart_budget < 0) c.restart_budget = 3;
  if (!c.spool || !c.nodes || c.nnodes < 1 || c.nnodes > GS_CLUSTER_MAX_NODES ||
      !c.gradsync_exe || !c.policy) {
    snprintf(err, errlen, "bad configuration (spool, nodes, policy, gradsync binary)");
    return 2;
  }
  if (!gs_cluster_policy_known(c.policy)) {
    snprintf(err, errlen, "unknown policy '%s'", c.policy);
    return 2;
  }
  mgr m;
  memset(&m, 0, sizeof m);
  m.cfg = &c;
  m.err = err;
  m.errlen = errlen;
  m.jr.fd = -1;
  if (c.net) {
    if (gs_cost_preset(c.net, &m.net) != GS_OK) {
      snprintf(err, errlen, "--net: %s", gs_last_error());
      return 2;
    }
    m.have_net = 1;
  }
  char real[PATH_MAX];
  if (!realpath(c.spool, real)) {
    if (mkdir(c.spool, 0755) != 0 || !realpath(c.spool, real)) {
      snprintf(err, errlen, "spool %s: cannot make it: %s", c.spool, strerror(errno));
      return 2;
    }
  }
  if (strlen(real) >= sizeof m.spool) {
    snprintf(err, errlen, "spool %.64s...: a path of %zu characters (at most %zu)", real,
             strlen(real), sizeof m.spool - 1);
    return 2;
  }
  memcpy(m.spool, real, strlen(real) + 1);
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/incoming", m.spool);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/jobs", m.spool);
  mkdir(path, 0755);
  /* The health checks' sockets (health_start): a socket's path, with the
   * 40 characters of ssh's %C and the 17 of its temporary name, must fit
   * sun_path's 108; a longer spool checks over new connections only. */
  if (strlen(m.spool) <= 45) {
    snprintf(m.mux, sizeof m.mux, "%s/mux", m.spool);
    if (mkdir(m.mux, 0700) != 0 && errno != EEXIST) m.mux[0] = '\0';
    if (m.mux[0]) snprintf(m.mux, sizeof m.mux, "%s/mux/%%C", m.spool);
  }
  snprintf(path, sizeof path, "%s/manager.lock", m.spool);
  struct stat sst;
  if (stat(m.spool, &sst) == 0 && !S_ISDIR(sst.st_mode)) {
    snprintf(err, errlen, "spool %s: not a directory (give a directory, or a path that does "
             "not exist yet)", m.spool);
    return 2;
  }
  int lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) {
    snprintf(err, errlen, "spool %s: cannot open its lock %s: %s", m.spool, path,
             strerror(errno));
    return 2;
  }
  if (flock(lock, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    int pid = 0;
    if (e == EWOULDBLOCK) {
      gs_cluster_manager_running(m.spool, &pid);
      char who[32] = "";
      if (pid > 0) snprintf(who, sizeof who, " by pid %d", pid);
      snprintf(err, errlen, "spool %s: another manager serves it (its lock %s is held%s)",
               m.spool, path, who);
    } else {
      snprintf(err, errlen, "spool %s: cannot lock %s: %s", m.spool, path, strerror(e));
    }
    close(lock);
    return 2;
  }
  m.node = gs_calloc((size_t)c.nnodes, sizeof *m.node);
  m.health_pid = gs_calloc((size_t)c.nnodes, sizeof *m.health_pid);
  if (!m.node || !m.health_pid) {
    gs_free(m.node);
    gs_free(m.health_pid);
    close(lock);
    snprintf(err, errlen, "out of memory");
    return 1;
  }
  for (int i = 0; i < c.nnodes; i++) m.node[i].spec = c.nodes[i];
  m.nnode = c.nnodes;
  if (c.round_log != NULL && (m.round_log = fopen(c.round_log, "a")) == NULL) {
    snprintf(err, errlen, "--round-log %s: cannot open it: %s", c.round_log, strerror(errno));
    gs_free(m.node);
    gs_free(m.health_pid);
    close(lock);
    return 2;
  }
  sweep_spool_tmp(&m); /* (the lock is held: no other manager writes here) */
  int rc = 1;
  snprintf(path, sizeof path, "%s/journal", m.spool);
  cluster_journal_cut cut;
  long good = cluster_journal_replay_cut(path, replay_one, &m, &cut, err, errlen);
  if (good < 0) goto out;
  if (good > 0 || cut.bytes > 0)
    mlog(&m, "journal: %ld records replayed, %d jobs%s", good, m.njob,
         cut.torn ? " (a torn last record cut off)" : "");
  /* Only a last record the manager did not finish writing is normal. */
  if (cut.bytes > 0 && !cut.torn)
    mlog(&m, "journal: a corrupt record at line %ld: it and the %ld record%s after it were "
         "discarded (the journal as it was is kept in %s)", cut.line, cut.later,
         cut.later == 1 ? "" : "s", cut.copy);
  if (cluster_journal_open(&m.jr, path, err, errlen) != 0) goto out;
  {
    /* Compaction: the journal becomes the states replay made. */
    cJSON **recs = gs_calloc((size_t)(m.njob + m.nnode) + 1, sizeof *recs);
    int nr = 0;
    for (int k = 0; recs && k < m.njob; k++) recs[nr++] = job_record(&m, &m.job[k]);
    for (int i = 0; recs && i < m.nnode; i++)
      if (m.node[i].drained || m.node[i].down || m.node[i].cool_until > 0 || m.node[i].losses)
        recs[nr++] = node_record(&m.node[i]);
    int crc = recs ? cluster_journal_rewrite(&m.jr, recs, nr, err, errlen) : -1;
    for (int i = 0; i < nr; i++) cJSON_Delete(recs[i]);
    gs_free(recs);
    if (crc != 0) goto out;
  }
  if (write_pool(&m) != 0) goto out;
  mlog(&m, "serving %s: %d nodes, policy %s", m.spool, m.nnode, c.policy);
  if (recover(&m) != 0) goto out;
  m.replan = 1;
  double now;
  m.last_health = -1e9;
  while (!*c.stop) {
    now = mono_s();
    double wall = spool_wall_s();
    for (int k = 0; k < m.njob; k++) charge_job(&m, &m.job[k], wall);
    if (take_requests(&m) != 0) goto out;
    for (int k = 0; k < m.njob; k++)
      if (job_active(&m.job[k]) && follow(&m, &m.job[k]) != 0) goto out;
    if (health_poll(&m) != 0) goto out;
    cool_poll(&m);
    if (now - m.last_health >= c.interval_s) {
      m.last_health = now;
      health_start(&m);
    }
    if (m.replan || now - m.last_round >= c.interval_s || (m.retry && now - m.last_round >= 1)) {
      m.replan = 0;
      m.retry = 0;
      m.last_round = now;
      if (policy_round(&m) != 0) goto out;
    }
    int dirty = 0;
    for (int k = 0; k < m.njob; k++) dirty |= m.job[k].dirty;
    if (dirty || now - m.last_snapshot >= 1) {
      write_snapshot(&m);
      m.last_snapshot = now;
    }
    for (int i = 0; i < 4 && !*c.stop; i++) nap_ms(50);
  }
  write_snapshot(&m);
  mlog(&m, "stopping; the jobs keep running and the next serve adopts them");
  rc = 0;
out:
  if (m.round_log != NULL) fclose(m.round_log);
  cluster_journal_close(&m.jr);
  for (int k = 0; k < m.njob; k++) {
    cJSON_Delete(m.job[k].args);
    job_free(&m.job[k]);
  }
  gs_free(m.job);
  for (int i = 0; i < m.nnode; i++)
    if (m.health_pid[i] > 0) {
      kill(m.health_pid[i], SIGKILL);
      waitpid(m.health_pid[i], NULL, 0);
    }
  health_close(&m);
  gs_free(m.health_pid);
  gs_free(m.node);
  close(lock);
  return rc;
}

char *cluster_replay_snapshot(const char *journal, const gs_cluster_node *nodes, int nnodes,
                              long *records, long *dropped, char *err, size_t errlen) {
  gs_cluster_serve_config c;
  memset(&c, 0, sizeof c);
  c.policy = "static";
  mgr m;
  memset(&m, 0, sizeof m);
  m.cfg = &c;
  m.err = err;
  m.errlen = errlen;
  snprintf(m.spool, sizeof m.spool, "(replay)");
  m.node = gs_calloc((size_t)nnodes + 1, sizeof *m.node);
  if (!m.node) return NULL;
  for (int i = 0; i < nnodes; i++) m.node[i].spec = nodes[i];
  m.nnode = nnodes;
  long good = cluster_journal_replay(journal, replay_one, &m, dropped, err, errlen);
  char *text = good >= 0 ? snapshot_text(&m) : NULL;
  if (records) *records = good;
  for (int k = 0; k < m.njob; k++) {
    cJSON_Delete(m.job[k].args);
    job_free(&m.job[k]);
  }
  gs_free(m.job);
  gs_free(m.node);
  return text;
}

/* ---- The keeper -------------------------------------------------------- */

int gs_cluster_keep(const char *job_dir, int attempt, char *const *argv) {
  /* The job's lock, held for the keeper's life: a manager that restarts
   * finds a live keeper by it. A keeper whose attempt is no longer the
   * job's (the manager moved on while it started) runs nothing. */
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/lock", job_dir);
  int lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) return 1;
  double until = mono_s() + 5;
  while (flock(lock, LOCK_EX | LOCK_NB) != 0) {
    if (mono_s() > until) return 1;
    nap_ms(50);
  }
  snprintf(path, sizeof path, "%s/attempt", job_dir);
  char *text = spool_read_file(path, 64);
  int current = text ? atoi(text) : -1;
  gs_free(text);
  if (current != attempt) return 1;
  unsigned long long start = 0;
  proc_info((int)getpid(), NULL, NULL, &start);
  char id[128];
  int len = snprintf(id, sizeof id, "%d %llu %d\n", (int)getpid(), start, attempt);
  if (ftruncate(lock, 0) != 0 || pwrite(lock, id, (size_t)len, 0) != len) return 1;
  /* The manager stops a job with SIGTERM to this process group: the
   * supervisor forwards it to mpirun; the keeper stays to record how the
   * supervisor ended. */
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  snprintf(path, sizeof path, "%s/out.log", job_dir);
  int out = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
    }
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  if (pid < 0) status = 127 << 8;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  len = snprintf(id, sizeof id, "%d\n", code);
  snprintf(path, sizeof path, "%s/exit.%d", job_dir, attempt);
  cluster_write_atomic(path, id, (size_t)len);
  if (out >= 0) close(out);
  close(lock);
  return 0;
}
