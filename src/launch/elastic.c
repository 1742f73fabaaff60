/* The elastic supervisor (gradsync/launch.h; docs/ELASTIC.md).
 *
 * One loop: choose the world (the largest size the slots allow, at most
 * max_ranks, one that divides the global batch when the program keeps one),
 * start mpirun on it in its own process group with its output through two
 * pipes, and watch: the pipes (passed through unchanged, and read line by
 * line for Open MPI's account of a failure: gs_launch_end_line), mpirun's
 * exit, the program's commits (DIR/checkpoint.json's time and position) and
 * the discovery script. Every wait is bounded: after the first sign of a
 * failure mpirun has kill_grace_s to end the other ranks before it is
 * terminated and then killed; a job asked to stop for a resize has
 * stop_wait_s; ranks that outlive a killed mpirun (recorded by pid and start
 * time while they run) are killed before the next launch, so that two jobs
 * never write one checkpoint. Failed slots are left out: a rank killed by a
 * signal costs its host one slot; a host that fails the caller's hosts_ok
 * check (ssh) is left out whole. A rank that exits with an error of its own,
 * or mpirun killed, leaves the world as it was. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gs_internal.h"
#include "launch_internal.h"

static volatile sig_atomic_t el_interrupt;
static volatile pid_t el_mpirun;

void gs_elastic_forward(int sig) {
  pid_t pid = el_mpirun;
  if (pid > 0) kill(pid, sig);
}

void gs_elastic_interrupt(int sig) {
  if (!el_interrupt) el_interrupt = sig;
  gs_elastic_forward(sig);
}

void gs_elastic_result_free(gs_elastic_result *res) {
  if (!res) return;
  gs_free(res->launches);
  res->launches = NULL;
  res->nlaunches = 0;
}

static void nap_ms(int ms) {
  nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L}, NULL);
}

/* --host entries of a launch, at most. */
#define EL_MAX_PLACES 1024

/* A host the job may use: its slots as given or listed, those lost to
 * failures, whether it is left out whole, and whether the last discovery
 * listed it. */
typedef struct el_host {
  char name[GS_LAUNCH_HOST_MAX + 1];
  int slots, lost, banned, listed;
  int checked; /* answered the host check before the job grew onto it */
} el_host;

#define EL_MAX_CHILDREN 4096

typedef struct el {
  const gs_elastic_config *cfg;
  gs_elastic_result *res;
  double t0;
  el_host *host;
  int nhost, cap;
  int use_host_list; /* pass --host to mpirun */
  /* the current launch */
  int size;
  int place_host[EL_MAX_PLACES]; /* host index of each --host entry, in order */
  int place_slots[EL_MAX_PLACES];
  int nplace;
  char world[1024];
  gs_launch_pid child[EL_MAX_CHILDREN]; /* mpirun's children: ranks or ssh clients */
  int nchild;
  /* commits seen: the last two during this launch */
  double commit_mtime;
  double c_t[2];
  long c_step[2];
  long c_gap; /* the most steps between two commits seen in this launch */
  int ncommit;
  int changed; /* checkpoint.json rewritten during this launch, read or not */
  double last_discover;
  launch_discovery disc; /* a discovery running while a launch is watched */
  char last_warning[1100]; /* a warning repeated unchanged is not sent again */
  /* The check of the launch's hosts, started on a failure's first sign
   * while mpirun ends (early_check_start): hosts early_idx[0..early_n),
   * early_ok[k] their answers once joined. */
  pthread_t early_thread;
  int early_running, early_n;
  int early_idx[EL_MAX_PLACES], early_ok[EL_MAX_PLACES];
  /* The check of the hosts a growth would add, in a thread while the
   * launch runs (growth_check_start): grow_name[k] (copies: discovery may
   * move the host table meanwhile), grow_ok[k] their answers once
   * grow_done is set and the thread joined (growth_check_join). */
  pthread_t grow_thread;
  int grow_running, grow_n;
  atomic_int grow_done;
  char (*grow_name)[GS_LAUNCH_HOST_MAX + 1];
  int *grow_ok;
} el;

static double el_now(const el *e) { return gs_now() - e->t0; }

static void emit(el *e, gs_elastic_event *ev) {
  ev->t = el_now(e);
  ev->restarts = e->res->restarts;
  if (e->cfg->on_event) e->cfg->on_event(ev, e->cfg->user);
}

static void emit_text(el *e, gs_elastic_event_kind kind, int status, const char *msg) {
  gs_elastic_event ev;
  memset(&ev, 0, sizeof ev);
  ev.kind = kind;
  ev.launch = e->res->nlaunches;
  ev.old_size = ev.new_size = e->size;
  ev.reason = msg;
  ev.rule = "";
  ev.hosts = "";
  ev.commit_epoch = ev.commit_samples = ev.steps_redone = -1;
  ev.status = status;
  emit(e, &ev);
}

static int host_find(const el *e, const char *name) {
  for (int i = 0; i < e->nhost; i++)
    if (strcasecmp(e->host[i].name, name) == 0) return i;
  return -1;
}

static int host_add(el *e, const char *name, int slots) {
  int i = host_find(e, name);
  if (i >= 0) {
    e->host[i].slots = slots;
    e->host[i].listed = 1;
    return 0;
  }
  if (e->nhost == e->cap) {
    int cap = e->cap ? 2 * e->cap : 16;
    el_host *grown = gs_malloc((size_t)cap * sizeof *grown);
    if (!grown) return -1;
    if (e->nhost) memcpy(grown, e->host, (size_t)e->nhost * sizeof *grown);
    gs_free(e->host);
    e->host = grown;
    e->cap = cap;
  }
  el_host *h = &e->host[e->nhost++];
  memset(h, 0, sizeof *h);
  snprintf(h->name, sizeof h->name, "%s", name);
  h->slots = slots;
  h->listed = 1;
  return 0;
}

static int host_avail(const el_host *h) {
  if (h->banned || !h->listed) return 0;
  return h->slots > h->lost ? h->slots - h->lost : 0;
}

static int avail_slots(const el *e) {
  long sum = 0;
  for (int i = 0; i < e->nhost; i++) sum += host_avail(&e->host[i]);
  return sum > 1 << 20 ? 1 << 20 : (int)sum;
}

int gs_elastic_size_runs(int ranks, int fixed_ranks, long global_batch) {
  if (fixed_ranks < 0 || ranks <= fixed_ranks) return 0;
  return global_batch <= 0 || global_batch % (ranks - fixed_ranks) == 0;
}

int gs_elastic_resizable(long global_batch, int scale_lr_linear) {
  return global_batch > 0 || scale_lr_linear;
}

const char *gs_elastic_one_size_why(int global_batch_only) {
  return global_batch_only
             ? "without --global-batch or --scale-lr linear its --resume refuses a checkpoint "
               "from another rank count; add --global-batch G to let it resize"
             : "without --global-batch or --scale-lr linear its --resume refuses a checkpoint "
               "from another rank count; add --global-batch G or --scale-lr linear to let it "
               "resize";
}

int gs_elastic_size_range(int min, int max, int unit, int cap, int fixed_ranks,
                          long global_batch, int resizable, int *lo, int *hi) {
  int a = min, b = max;
  if (!resizable && cap > 0 && b > cap) b = cap;
  while (a <= b && !gs_elastic_size_runs(a * unit, fixed_ranks, global_batch)) a++;
  while (b >= a && !gs_elastic_size_runs(b * unit, fixed_ranks, global_batch)) b--;
  if (a > b) return -1;
  if (!resizable) a = b;
  *lo = a;
  *hi = b;
  return 0;
}

/* The largest size that fits: at most the slots and max_ranks, more than
 * the fixed ranks, and with trainers (the ranks less the fixed ones) that
 * divide the global batch when there is one. 0 when none does. */
static int pick_size(const el *e, int cap, char *rule, size_t rule_len) {
  const gs_elastic_config *c = e->cfg;
  int avail = avail_slots(e);
  int top = avail < c->max_ranks ? avail : c->max_ranks;
  if (cap > 0 && cap < top) top = cap;
  rule[0] = '\0';
  const int f = c->fixed_ranks;
  for (int s = top; s > f; s--) {
    if (!gs_elastic_size_runs(s, f, c->global_batch)) continue;
    if (c->global_batch > 0 && s < top) {
      char who[64] = "";
      if (f > 0) snprintf(who, sizeof who, "%d servers and %d workers: ", f, s - f);
      snprintf(rule, rule_len, "global batch %ld: %d ranks of %d slots (%s%d divides %ld, %d "
               "does not)", c->global_batch, s, top, who, s - f, c->global_batch, top - f);
    }
    return s;
  }
  return 0;
}

/* The --host list for size ranks: hosts in order, each with the slots it
 * gives this launch, so that rank r runs on the host whose slots hold r
 * (Open MPI maps by slot). */
static void place(el *e, int size) {
  e->nplace = 0;
  e->world[0] = '\0';
  size_t w = 0;
  int left = size;
  for (int i = 0; i < e->nhost && left > 0 && e->nplace < EL_MAX_PLACES; i++) {
    int a = host_avail(&e->host[i]);
    if (a <= 0) continue;
    int take = a < left ? a : left;
    e->place_host[e->nplace] = i;
    e->place_slots[e->nplace++] = take;
    left -= take;
    int k = snprintf(e->world + w, sizeof e->world - w, "%s%s:%d", w ? "," : "",
                     e->host[i].name, take);
    if (k > 0 && (size_t)k < sizeof e->world - w) w += (size_t)k;
  }
  e->size = size;
}

/* The hosts listed but left out for good (unreachable, or every slot lost
 * to a killed rank), "h1,h2", into out. */
static void left_out_hosts(const el *e, char *out, size_t len) {
  size_t w = 0;
  out[0] = '\0';
  for (int i = 0; i < e->nhost; i++) {
    const el_host *h = &e->host[i];
    if (!h->listed || (!h->banned && h->lost < h->slots)) continue;
    int k = snprintf(out + w, len - w, "%s%s", w ? "," : "", h->name);
    if (k < 0 || (size_t)k >= len - w) break;
    w += (size_t)k;
  }
}

/* A host of the current launch that discovery no longer lists (or lists
 * with fewer usable slots than the launch takes there), or -1. */
static int unlisted_host(const el *e) {
  for (int i = 0; i < e->nplace; i++)
    if (host_avail(&e->host[e->place_host[i]]) < e->place_slots[i]) return e->place_host[i];
  return -1;
}

/* The host of rank r in the current launch, or -1. */
static int rank_host(const el *e, int r) {
  for (int i = 0; i < e->nplace; i++) {
    if (r < e->place_slots[i]) return e->place_host[i];
    r -= e->place_slots[i];
  }
  return -1;
}

/* A discovery's outcome: the listing replaces the hosts' (ok), or a
 * warning, sent once while it repeats, and the hosts known stay. */
static void take_listing(el *e, int ok, gs_launch_host *list, int n, const char *why) {
  if (!ok) {
    char msg[1100];
    snprintf(msg, sizeof msg, "%s; keeping the hosts known before", why);
    if (strcmp(msg, e->last_warning) != 0) emit_text(e, GS_ELASTIC_WARNING, 0, msg);
    snprintf(e->last_warning, sizeof e->last_warning, "%s", msg);
    return;
  }
  e->last_warning[0] = '\0';
  for (int i = 0; i < e->nhost; i++) e->host[i].listed = 0;
  for (int i = 0; i < n; i++)
    if (host_add(e, list[i].name, list[i].slots) != 0) {
      emit_text(e, GS_ELASTIC_WARNING, 0, "out of memory recording discovered hosts");
      break;
    }
  gs_free(list);
}

/* Runs the script to its end (between launches, and at a launch's end),
 * bounded by its timeout; a signal to the supervisor ends it at once (the
 * listing is moot then, the job is stopping), so that a SIGTERM while the
 * job waits for slots is not held for a script that hangs. */
static void discover(el *e) {
  const gs_elastic_config *c = e->cfg;
  launch_discover_cancel(&e->disc); /* a run in the background is superseded */
  gs_launch_host *list = NULL;
  int n = 0, r;
  char why[1024];
  e->last_discover = el_now(e);
  if (launch_discover_start(&e->disc, c->discover, c->discover_timeout_s, c->err_fd, why,
                            sizeof why) != 0) {
    take_listing(e, 0, NULL, 0, why);
    return;
  }
  while ((r = launch_discover_step(&e->disc, 50, &list, &n, why, sizeof why)) == 0)
    if (el_interrupt) {
      launch_discover_cancel(&e->disc);
      return;
    }
  take_listing(e, r == 1, list, n, why);
}

/* While a launch runs: starts the script in the background when it is
 * due, and takes its listing when it has finished, never waiting for it
 * (a script that hangs would hold the launch's watch for its timeout).
 * Returns 1 when a listing was taken. */
static int discover_background(el *e) {
  const gs_elastic_config *c = e->cfg;
  char why[1024];
  if (!e->disc.running) {
    if (el_now(e) - e->last_discover < c->discover_every_s) return 0;
    e->last_discover = el_now(e);
    if (launch_discover_start(&e->disc, c->discover, c->discover_timeout_s, c->err_fd, why,
                              sizeof why) != 0) {
      take_listing(e, 0, NULL, 0, why);
      return 0;
    }
  }
  gs_launch_host *list = NULL;
  int n = 0;
  int r = launch_discover_step(&e->disc, 0, &list, &n, why, sizeof why);
  if (r == 0) return 0;
  take_listing(e, r == 1, list, n, why);
  return r == 1;
}

/* Records mpirun's children (the local ranks, or ssh clients) while they
 * live, so that those outliving a killed mpirun can be ended. */
/* After mpirun's exit: ranks it left behind get kill_grace_s to end by
 * themselves (Open MPI's ranks notice their daemon's loss), then SIGKILL.
 * An ssh (rsh, srun) client to a remote daemon gets a second at most: with
 * mpirun gone it carries nothing, and one to a host cut off would stay for
 * good (until 2026-12-03 it held the relaunch for the whole grace, 10 s). */
static int end_orphans(el *e) {
  double t0 = gs_now(), deadline = t0 + e->cfg->kill_grace_s;
  double agent_deadline = t0 + (e->cfg->kill_grace_s < 1 ? e->cfg->kill_grace_s : 1);
  int killed = 0;
  for (;;) {
    int alive = 0;
    for (int i = 0; i < e->nchild; i++)
      if (gs_launch_noted_alive(&e->child[i])) {
        if (e->child[i].agent && gs_now() > agent_deadline) {
          killed += kill(e->child[i].pid, SIGKILL) == 0;
          continue;
        }
        alive++;
      }
    if (!alive) break;
    if (gs_now() > deadline) {
      killed += gs_launch_kill_noted(e->child, e->nchild);
      nap_ms(100);
      deadline = gs_now() + 1e9;
      continue;
    }
    nap_ms(50);
  }
  e->nchild = 0;
  return killed;
}

/* The program's commit file and its modification time (0, or -1: none):
 * gradsync train's checkpoint.json or the DLRM trainer's dlrm.json in its
 * checkpoint directory (gs_launch_commit_stat), or the progress.json an
 * --exec program writes at each commit (report_dir). */
static int el_commit_stat(const gs_elastic_config *c, char *path, size_t len, double *mtime) {
  if (c->checkpoint_dir) return gs_launch_commit_stat(c->checkpoint_dir, path, len, mtime);
  struct stat st;
  if (!c->report_dir) return -1;
  snprintf(path, len, "%s/progress.json", c->report_dir);
  if (stat(path, &st) != 0) return -1;
  *mtime = (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
  return 0;
}

/* The program's last commit, read from the file el_commit_stat names: 0,
 * or -1 (*cm zeroed). */
static int el_read_commit(const gs_elastic_config *c, gs_launch_commit *cm) {
  if (c->checkpoint_dir) return gs_launch_read_commit(c->checkpoint_dir, cm);
  memset(cm, 0, sizeof *cm);
  if (!c->report_dir) return -1;
  char path[4096];
  snprintf(path, sizeof path, "%s/progress.json", c->report_dir);
  return gs_launch_read_report(path, cm) == 0 ? 0 : -1;
}

/* Watches the commits: a new commit file (el_commit_stat, by its
 * modification time) during this launch gives a point of (time, global
 * step). */
static void watch_commits(el *e) {
  char path[4096];
  double m;
  if (el_commit_stat(e->cfg, path, sizeof path, &m) != 0) return;
  if (m == e->commit_mtime) return;
  e->commit_mtime = m;
  e->changed = 1;
  gs_launch_commit cm;
  if (el_read_commit(e->cfg, &cm) != 0 || cm.global_step < 0) return;
  long step = cm.global_step;
  e->c_t[0] = e->c_t[1];
  e->c_step[0] = e->c_step[1];
  e->c_t[1] = el_now(e);
  e->c_step[1] = step;
  e->ncommit++;
  if (e->ncommit >= 2 && e->c_step[1] - e->c_step[0] > e->c_gap)
    e->c_gap = e->c_step[1] - e->c_step[0];
}

/* Steps done since the last commit at time t: the rate between the last
 * two commits of this launch times the time since the last, at most the
 * program's commit interval (or the widest gap between two commits seen):
 * a commit would have come, and the time also holds the watch's lag and
 * MPI's detection, when no step runs; -1 unknown. */
static long steps_since_commit(const el *e, double t) {
  if (e->ncommit < 2 || e->c_step[1] <= e->c_step[0] || e->c_t[1] <= e->c_t[0]) return -1;
  double rate = (double)(e->c_step[1] - e->c_step[0]) / (e->c_t[1] - e->c_t[0]);
  double s = rate * (t - e->c_t[1]);
  long n = s < 0 ? 0 : (long)(s + 0.5);
  long most = e->cfg->commit_every > 0 ? e->cfg->commit_every : e->c_gap;
  return most > 0 && n > most ? most : n;
}

/* What one launch's output told about its end. */
typedef struct el_watch {
  gs_launch_end end;                /* a rank killed, a rank's exit, a daemon
                                     * lost, a rank that ended the job */
  double first_sign;                /* when the first of these was read (0: none) */
  char line[2][4096];               /* partial lines of stdout, stderr */
  size_t len[2];
} el_watch;

/* A line of mpirun's output into the account of the job's end. A rank that
 * ended the job (abort_rank) matters most: mpirun may wait for good for a
 * host cut off or frozen (the other ranks, and the ssh client to the lost
 * host, stay up), so nothing else shows the failure. */
static void parse_line(el *e, el_watch *w, const char *s) {
  if (gs_launch_end_line(&w->end, s) && w->first_sign == 0) w->first_sign = el_now(e);
}

/* Passes a chunk of mpirun's output through and feeds its lines to the
 * parser. Returns 0, or -1 at the end of the stream. */
static int pump(el *e, el_watch *w, int which, int fd) {
  char buf[8192];
  ssize_t k = read(fd, buf, sizeof buf);
  if (k < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
  if (k <= 0) return -1;
  int out = which == 0 ? e->cfg->out_fd : e->cfg->err_fd;
  for (ssize_t off = 0; off < k;) {
    ssize_t put = write(out, buf + off, (size_t)(k - off));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) break; /* our output is gone: keep supervising */
    off += put;
  }
  for (ssize_t i = 0; i < k; i++) {
    char ch = buf[i];
    if (ch == '\n' || w->len[which] == sizeof w->line[which] - 1) {
      w->line[which][w->len[which]] = '\0';
      parse_line(e, w, w->line[which]);
      w->len[which] = 0;
      if (ch == '\n') continue;
    }
    w->line[which][w->len[which]++] = ch;
  }
  return 0;
}

uint64_t gs_launch_cost_key(const char *desc, const char *hosts, int size) {
  uint64_t h = GS_FNV1A_BASIS;
  char sz[16];
  snprintf(sz, sizeof sz, "%d", size);
  const char *parts[3] = {desc, hosts, sz};
  for (int k = 0; k < 3; k++) h = gs_fnv1a_str(gs_fnv1a_str(h, parts[k]), "|");
  return h;
}

/* mpirun's environment: this process's, with GRADSYNC_COST_CACHE naming
 * this launch's calibration where cost_cache_dir is set (built before the
 * fork: the child only execs). NULL on failure; *owned: the variable. */
static char **launch_env(el *e, char **owned) {
  const gs_elastic_config *c = e->cfg;
  *owned = NULL;
  int n = 0;
  while (environ[n]) n++;
  char **env = calloc((size_t)n + 2, sizeof *env);
  if (!env) return NULL;
  int m = 0;
  for (int i = 0; i < n; i++)
    if (!c->cost_cache_dir || strncmp(environ[i], "GRADSYNC_COST_CACHE=", 20) != 0)
      env[m++] = environ[i];
  if (c->cost_cache_dir) {
    size_t len = strlen(c->cost_cache_dir) + 64;
    *owned = malloc(len);
    if (!*owned) {
      free(env);
      return NULL;
    }
    snprintf(*owned, len, "GRADSYNC_COST_CACHE=%s/cost-%016llx.json", c->cost_cache_dir,
             (unsigned long long)gs_launch_cost_key(c->cost_cache_desc,
                                                    e->use_host_list ? e->world : "local",
                                                    e->size));
    env[m++] = *owned;
  }
  env[m] = NULL;
  return env;
}

/* Starts mpirun on the current world in its own process group, its output
 * into pipes[0] (stdout) and pipes[1] (stderr). */
static pid_t start_mpirun(el *e, int pipes[2], char *why, size_t why_len) {
  const gs_elastic_config *c = e->cfg;
  int nm = 0, np = 0;
  while (c->mpirun_argv[nm]) nm++;
  while (c->prog_argv[np]) np++;
  char **argv = calloc((size_t)(nm + np + 8), sizeof *argv);
  char npbuf[16], *cost_var = NULL;
  char **envp = argv ? launch_env(e, &cost_var) : NULL;
  if (!argv || !envp) {
    snprintf(why, why_len, "out of memory");
    free(argv);
    return -1;
  }
  int m = 0;
  for (int i = 0; i < nm; i++) argv[m++] = c->mpirun_argv[i];
  snprintf(npbuf, sizeof npbuf, "%d", e->size);
  argv[m++] = "-np";
  argv[m++] = npbuf;
  if (e->use_host_list) {
    argv[m++] = "--host";
    argv[m++] = e->world;
  }
  for (int i = 0; i < np; i++) argv[m++] = c->prog_argv[i];
  argv[m] = NULL;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    snprintf(why, why_len, "cannot make a pipe: %s", strerror(errno));
    free(argv);
    free(envp);
    free(cost_var);
    return -1;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    snprintf(why, why_len, "cannot make a pipe: %s", strerror(errno));
    close(out[0]);
    close(out[1]);
    free(argv);
    free(envp);
    free(cost_var);
    return -1;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    /* mpirun stops its ranks when it gets SIGTERM: so too when the
     * supervisor dies outright. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (getppid() == parent) execve(argv[0], argv, envp);
    _exit(127);
  }
  int fork_err = errno;
  free(argv);
  free(envp);
  free(cost_var);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    snprintf(why, why_len, "cannot start %s: %s", c->mpirun_argv[0], strerror(fork_err));
    return -1;
  }
  setpgid(pid, pid);
  pipes[0] = out[0];
  pipes[1] = err[0];
  return pid;
}

/* Checks hosts idx[0..n) at once (the caller's hosts_ok): ok[k] 1 or 0;
 * with no check, or out of memory for the names, every one passes. */
static void check_hosts(el *e, const int *idx, int n, int *ok) {
  const gs_elastic_config *c = e->cfg;
  const char **names = n > 0 && c->hosts_ok ? malloc((size_t)n * sizeof *names) : NULL;
  for (int k = 0; k < n; k++) {
    ok[k] = 1;
    if (names) names[k] = e->host[idx[k]].name;
  }
  if (names) c->hosts_ok(names, n, ok, c->user);
  free(names);
}

static void *early_check_main(void *arg) {
  el *e = arg;
  check_hosts(e, e->early_idx, e->early_n, e->early_ok);
  return NULL;
}

/* On a failure's first sign (an abort, a lost daemon, a rank killed): the
 * launch's hosts are checked in a thread while mpirun is given its grace
 * and ended, so that a host cut off costs its check's timeout once, not
 * after the rest (until 2026-12-03 the check began after mpirun's end:
 * 10 s more per relaunch). Its answers are read by early_check_join. */
static void early_check_start(el *e) {
  if (!e->cfg->hosts_ok || e->early_running) return;
  e->early_n = 0;
  for (int i = 0; i < e->nplace && e->early_n < EL_MAX_PLACES; i++)
    if (!e->host[e->place_host[i]].banned) e->early_idx[e->early_n++] = e->place_host[i];
  e->early_running = e->early_n > 0 &&
                     pthread_create(&e->early_thread, NULL, early_check_main, e) == 0;
}

/* Waits for the early check: 1 with its answers in e->early_*, 0 when none
 * ran. */
static int early_check_join(el *e) {
  if (!e->early_running) return 0;
  pthread_join(e->early_thread, NULL);
  e->early_running = 0;
  return 1;
}

/* The hosts that a growth to best ranks would add and that have not passed
 * the check yet, into idx (room for e->nhost); returns how many (0 with no
 * check). */
static int growth_unchecked(const el *e, int best, int *idx) {
  if (!e->cfg->hosts_ok) return 0;
  int left = best, n = 0;
  for (int i = 0; i < e->nhost && left > 0; i++) {
    const el_host *h = &e->host[i];
    int a = host_avail(h);
    if (a <= 0) continue;
    left -= a < left ? a : left;
    int in_launch = 0;
    for (int k = 0; k < e->nplace && !in_launch; k++) in_launch = e->place_host[k] == i;
    if (!in_launch && !h->checked) idx[n++] = i;
  }
  return n;
}

/* A host that failed the check before a growth: left out whole, with a
 * warning. */
static void growth_refused(el *e, el_host *h) {
  h->banned = 1;
  char msg[512];
  snprintf(msg, sizeof msg, "host %s, listed by discovery, cannot be reached: left out, "
           "the job not stopped to grow onto it", h->name);
  emit_text(e, GS_ELASTIC_WARNING, 0, msg);
}

static void *growth_check_main(void *arg) {
  el *e = arg;
  const char **names = malloc((size_t)e->grow_n * sizeof *names);
  for (int k = 0; k < e->grow_n; k++) {
    e->grow_ok[k] = 1;
    if (names) names[k] = e->grow_name[k];
  }
  if (names) e->cfg->hosts_ok(names, e->grow_n, e->grow_ok, e->cfg->user);
  free(names);
  atomic_store_explicit(&e->grow_done, 1, memory_order_release);
  return NULL;
}

static void growth_check_free(el *e) {
  gs_free(e->grow_name);
  gs_free(e->grow_ok);
  e->grow_name = NULL;
  e->grow_ok = NULL;
  e->grow_n = 0;
}

/* Starts the check of hosts idx[0..n) in a thread, so that the launch's
 * watch goes on meanwhile: its output read (a job that prints fills the
 * pipe and stops), its commits seen, a failure or a signal noticed (an
 * unreachable host's check takes ssh's connect timeout: until 2026-12-04
 * the watch stopped for it). 0, or -1 when no thread could be started
 * (the caller checks at once, as before). */
static int growth_check_start(el *e, const int *idx, int n) {
  e->grow_name = gs_malloc((size_t)n * sizeof *e->grow_name);
  e->grow_ok = gs_malloc((size_t)n * sizeof *e->grow_ok);
  if (!e->grow_name || !e->grow_ok) {
    growth_check_free(e);
    return -1;
  }
  for (int k = 0; k < n; k++)
    snprintf(e->grow_name[k], sizeof e->grow_name[k], "%s", e->host[idx[k]].name);
  e->grow_n = n;
  atomic_store_explicit(&e->grow_done, 0, memory_order_relaxed);
  if (pthread_create(&e->grow_thread, NULL, growth_check_main, e) != 0) {
    growth_check_free(e);
    return -1;
  }
  e->grow_running = 1;
  return 0;
}

/* Joins the growth check (waiting for it when it has not finished) and
 * takes its answers: a host that passed is marked checked, one that failed
 * left out (growth_refused). Returns 1 when a check was joined, 0 when
 * none ran. */
static int growth_check_join(el *e) {
  if (!e->grow_running) return 0;
  pthread_join(e->grow_thread, NULL);
  e->grow_running = 0;
  for (int k = 0; k < e->grow_n; k++) {
    int i = host_find(e, e->grow_name[k]);
    if (i < 0) continue;
    if (e->grow_ok[k]) e->host[i].checked = 1;
    else if (!e->host[i].banned) growth_refused(e, &e->host[i]);
  }
  growth_check_free(e);
  return 1;
}

/* Before the running job is stopped to grow to best ranks: each host
 * that the larger world would add, and that has not passed the check yet,
 * is checked (the caller's hosts_ok: ssh, all at once, each bounded by its
 * own timeout), and one that fails is left out whole, as after a failed
 * launch, with a warning: a healthy job is not stopped to grow onto a host
 * that cannot be reached (until 2026-12-02 it was stopped, mpirun failed on
 * the larger world, and only then was the host left out). Returns the size
 * the job may grow to now. This is the check made here and now, when no
 * thread can be started for growth_check_start's. */
static int check_growth_hosts(el *e, int best, char *rule, size_t rule_len) {
  if (!e->cfg->hosts_ok) return best;
  int *idx = malloc((size_t)e->nhost * sizeof *idx + 1);
  int *ok = malloc((size_t)e->nhost * sizeof *ok + 1);
  for (int failed = 1; idx && ok && failed && best > e->size && !el_interrupt;) {
    failed = 0;
    int n = growth_unchecked(e, best, idx);
    check_hosts(e, idx, n, ok);
    for (int k = 0; k < n; k++) {
      if (ok[k]) {
        e->host[idx[k]].checked = 1;
        continue;
      }
      growth_refused(e, &e->host[idx[k]]);
      failed = 1;
    }
    if (failed) best = pick_size(e, 0, rule, rule_len);
  }
  free(idx);
  free(ok);
  return best;
}

/* The size the job may grow to now: best when every host it would add has
 * passed the check; 0 (not now) while their check runs in the background
 * (its answers come back through growth_check_join); without a thread,
 * check_growth_hosts' answer. */
static int grow_when_checked(el *e, int best, char *rule, size_t rule_len) {
  int *idx = malloc((size_t)e->nhost * sizeof *idx + 1);
  int n = idx ? growth_unchecked(e, best, idx) : 0, no_memory = idx == NULL;
  int started = n > 0 && growth_check_start(e, idx, n) == 0;
  free(idx);
  if (started) return 0;
  return no_memory || n > 0 ? check_growth_hosts(e, best, rule, rule_len) : best;
}

/* Relaunches after a lost host that spend no restart, at most. */
#define EL_FREE_NODE_LOSSES 64

/* How a launch ended. */
enum { END_DONE, END_FAILED, END_GROW, END_STOPPED, END_USAGE, END_INTERRUPTED };

typedef struct el_end {
  int how;
  int status;      /* mpirun's: exit code, or 128 + signal */
  double detect_t; /* the failure's first sign (or mpirun's exit) */
  double exit_t;
  double stop_t;   /* when the stop for growth was asked */
  int node_lost;   /* END_FAILED: a host of the launch was lost (found
                    * unreachable, or no longer listed by discovery): the
                    * cluster shrank under the job; not the program's fault */
  char reason[512];
} el_end;

/* Runs one launch to its end. */
static gs_status run_launch(el *e, el_end *end, char *why, size_t why_len) {
  const gs_elastic_config *c = e->cfg;
  memset(end, 0, sizeof *end);
  int pipes[2];
  e->nchild = 0;
  e->ncommit = 0;
  e->c_gap = 0;
  e->changed = 0;
  /* The commit already on disk is the baseline, not a commit of this launch. */
  {
    char path[4096];
    if (el_commit_stat(c, path, sizeof path, &e->commit_mtime) != 0) e->commit_mtime = 0;
  }
  pid_t pid = start_mpirun(e, pipes, why, why_len);
  if (pid < 0) return GS_ERR_IO;
  el_mpirun = pid;
  if (el_interrupt) kill(pid, el_interrupt); /* arrived before el_mpirun was set */
  double start = el_now(e);
  gs_elastic_launch *L = &e->res->launches[e->res->nlaunches - 1];
  L->start_t = start;
  el_watch w;
  memset(&w, 0, sizeof w);
  gs_launch_end_init(&w.end);
  int open_fds = 2, status = 0, exited = 0;
  double term_at = 0, kill_at = 0, stop_deadline = 0, next_scan = 0, next_commit = 0;
  double all_ended_since = 0;
  int stop_asked = 0, killed_stop = 0, stuck = 0;
  int interrupted_seen = 0, early_tried = 0;
  double interrupt_t = 0;
  while (!exited || open_fds > 0) {
    struct pollfd p[2];
    int np = 0, which[2];
    for (int i = 0; i < 2; i++)
      if (pipes[i] >= 0) {
        p[np] = (struct pollfd){pipes[i], POLLIN, 0};
        which[np++] = i;
      }
    if (np > 0) {
      int r = poll(p, (nfds_t)np, 100);
      for (int i = 0; r > 0 && i < np; i++)
        if (p[i].revents && pump(e, &w, which[i], pipes[which[i]]) != 0) {
          close(pipes[which[i]]);
          pipes[which[i]] = -1;
          open_fds--;
        }
    } else {
      nap_ms(50);
    }
    if (w.first_sign > 0 && !early_tried) { /* the hosts checked while mpirun ends */
      early_tried = 1;
      early_check_start(e);
    }
    double now = el_now(e);
    if (!exited) {
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        exited = 1;
        el_mpirun = 0;
        end->exit_t = now;
        /* Its output may be held open by orphaned ranks: bounded drain. */
        term_at = now + 2;
      }
    } else if (now > term_at) {
      break; /* the pipes' other ends outlive mpirun: stop reading */
    }
    if (exited) continue;
    if (now >= next_scan) {
      gs_launch_note_children(pid, e->child, &e->nchild, EL_MAX_CHILDREN);
      next_scan = now + 0.5;
      /* Every rank ended and mpirun still there: Open MPI's runtime has
       * deadlocked (gs_launch_children_of). The launch ends as its ranks
       * did: the first failed one's status, or 0. */
      gs_launch_children ch;
      if (gs_launch_stuck(pid, now, c->kill_grace_s, &all_ended_since, &ch)) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        status = ch.bad_status;
        stuck = 1;
        exited = 1;
        el_mpirun = 0;
        end->exit_t = now;
        term_at = now + 2;
        continue;
      }
    }
    if (now >= next_commit) {
      watch_commits(e);
      next_commit = now + 0.5;
    }
    if (el_interrupt && !interrupted_seen) {
      interrupted_seen = 1;
      interrupt_t = now;
    }
    /* Bounds: a failure's other ranks, an interrupt, a stop for growth. */
    double since = w.first_sign > 0 ? w.first_sign : interrupted_seen ? interrupt_t : 0;
    if (since > 0 && term_at == 0 && now > since + c->kill_grace_s) {
      kill(pid, SIGTERM);
      term_at = now;
      kill_at = now + 3;
    }
    if (stop_asked && !w.first_sign && term_at == 0 && now > stop_deadline) {
      killed_stop = 1;
      kill(pid, SIGTERM);
      term_at = now;
      kill_at = now + 3;
    }
    if (kill_at > 0 && now > kill_at) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      kill_at = 0;
    }
    /* Discovery, and growth when it lists more than the job has; the
     * growth check's answers, once it has ended, are taken at once (a
     * host left out: the size is chosen again). */
    int grow_answered = e->grow_running &&
                        atomic_load_explicit(&e->grow_done, memory_order_acquire) &&
                        growth_check_join(e);
    if (c->discover && !stop_asked && !interrupted_seen && !w.first_sign &&
        (discover_background(e) || grow_answered)) {
      char rule[256];
      int best = pick_size(e, 0, rule, sizeof rule);
      int gone = c->shrink_on_discover ? unlisted_host(e) : -1;
      if (gone >= 0) {
        stop_asked = 1;
        end->stop_t = el_now(e);
        stop_deadline = end->stop_t + c->stop_wait_s;
        if (e->host[gone].listed)
          snprintf(end->reason, sizeof end->reason, "discovery lists fewer slots of %s than "
                   "the launch uses there: shrinking from %d", e->host[gone].name, e->size);
        else
          snprintf(end->reason, sizeof end->reason, "discovery no longer lists %s: "
                   "shrinking from %d", e->host[gone].name, e->size);
        kill(pid, SIGUSR1);
      } else if (best > e->size && el_now(e) - start >= c->resize_interval_s &&
                 !e->grow_running && (best = grow_when_checked(e, best, rule, sizeof rule)) >
                                         e->size) {
        stop_asked = 1;
        end->stop_t = el_now(e);
        stop_deadline = end->stop_t + c->stop_wait_s;
        snprintf(end->reason, sizeof end->reason, "discovery lists %d slots: growing from %d",
                 avail_slots(e), e->size);
        kill(pid, SIGUSR1);
      }
    }
  }
  for (int i = 0; i < 2; i++)
    if (pipes[i] >= 0) close(pipes[i]);
  launch_discover_cancel(&e->disc); /* the launch is over: its listing is moot */
  growth_check_join(e); /* its answers stand: a host that failed stays out */
  if (!exited) { /* the pipes ended first: mpirun is ending */
    double deadline = el_now(e) + c->kill_grace_s;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (el_now(e) > deadline) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        break;
      }
      nap_ms(50);
    }
    el_mpirun = 0;
    end->exit_t = el_now(e);
  }
  end_orphans(e);
  watch_commits(e);
  end->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  end->detect_t = w.first_sign > 0 ? w.first_sign : end->exit_t;
  L->end_t = end->exit_t;
  L->status = end->status;

  /* How it ended, in the order of certainty. */
  char *r = end->reason;
  size_t rl = sizeof end->reason;
  /* A rank killed or a daemon lost is a failure whatever the status says;
   * a rank's own exit status (Open MPI's "Exit code:" lines) is not. */
  int hard = w.end.sig_rank >= 0 || w.end.lost_node[0];
  /* A stop asked of a job whose program had not started yet. Open MPI
   * 4.1's mpirun, signalled before the daemons it starts over ssh have
   * called back, exits 0 without ever starting the program: a status 0
   * with no commit of this launch seen (a program that ran to its end
   * committed at its last epoch, as gradsync train does) is taken for
   * that, and the job is relaunched on the new world as the stop intended.
   * A wrong guess costs one short launch: a finished program relaunched
   * resumes from its last commit and exits at once. And a rank that got
   * the request's SIGUSR1 before it installed its handling died of it:
   * neither its slot nor the program is at fault. */
  int asked = stop_asked && !killed_stop;
  int early_exit = asked && end->status == 0 && !hard && !e->changed;
  int early_rank = asked && w.end.sig_rank >= 0 && w.end.sig_num == SIGUSR1 && !w.end.lost_node[0];
  /* So may mpirun itself (status 138 once in 81 resizes 0.2 s apart under
   * ASan): the same guess. */
  int early_mpirun = asked && !early_rank && WIFSIGNALED(status) &&
                     WTERMSIG(status) == SIGUSR1 && !hard && !e->changed;
  size_t used = strlen(r);
  if (el_interrupt) {
    end->how = END_INTERRUPTED;
    snprintf(r, rl, "interrupted by signal %d", (int)el_interrupt);
  } else if (early_exit) {
    end->how = END_GROW;
    snprintf(r + used, rl - used, "; mpirun exited 0 before the program stopped on request, "
             "with no commit of this launch (Open MPI exits 0 when signalled before its ranks "
             "start)");
  } else if (end->status == 0 && !hard) {
    end->how = END_DONE;
    snprintf(r, rl, "done");
  } else if (end->status == 3 && stop_asked && !killed_stop) {
    end->how = END_GROW; /* reason set when asked */
  } else if (early_rank) {
    int h = rank_host(e, w.end.sig_rank);
    end->how = END_GROW;
    snprintf(r + used, rl - used, "; rank %d on %s was killed by the request's signal %d "
             "before it could take it", w.end.sig_rank,
             h >= 0 && e->use_host_list ? e->host[h].name : w.end.sig_node, w.end.sig_num);
  } else if (early_mpirun) {
    end->how = END_GROW;
    snprintf(r + used, rl - used, "; mpirun was killed by the request's signal %d before it "
             "could take it", SIGUSR1);
  } else if (end->status == 3 && !hard) {
    end->how = END_STOPPED;
    snprintf(r, rl, "the job stopped on request (exit 3)");
  } else if (end->status == 2 && !hard && e->res->nlaunches == 1) {
    end->how = END_USAGE;
    snprintf(r, rl, "the program refused its options (exit 2)");
  } else {
    end->how = END_FAILED;
    if (killed_stop)
      snprintf(r, rl, "the job did not commit and stop within %.0f s of the request",
               c->stop_wait_s);
    else if (w.end.sig_rank >= 0) {
      int h = rank_host(e, w.end.sig_rank);
      snprintf(r, rl, "rank %d on %s killed by signal %d", w.end.sig_rank,
               h >= 0 && e->use_host_list ? e->host[h].name : w.end.sig_node, w.end.sig_num);
    } else if (w.end.lost_node[0])
      snprintf(r, rl, "lost the daemon on host %s", w.end.lost_node);
    else if (w.end.abort_rank >= 0 && w.end.exit_rank < 0) /* an exit is the cause, aborts follow */
      snprintf(r, rl, "rank %d ended the job (MPI_Abort; mpirun's status %d)", w.end.abort_rank,
               end->status);
    else if (WIFSIGNALED(status))
      snprintf(r, rl, "mpirun killed by signal %d", WTERMSIG(status));
    else if (w.end.exit_rank >= 0)
      snprintf(r, rl, "rank %d exited with status %d", w.end.exit_rank,
               w.end.exit_code >= 0 ? w.end.exit_code : end->status);
    else
      snprintf(r, rl, "mpirun exited with status %d", end->status);
    /* Leave out what failed: a killed rank's slot, a host that cannot be
     * reached (every host of the launch is checked: a lost sshd shows no
     * other way). */
    if (w.end.sig_rank >= 0 && !killed_stop) {
      int h = rank_host(e, w.end.sig_rank);
      if (h >= 0) e->host[h].lost++;
    }
    /* the check begun at the first sign, or one now: every host at once,
     * each bounded by its timeout */
    int *idx = e->early_idx, *ok = e->early_ok, n = 0;
    if (early_check_join(e)) {
      n = e->early_n;
    } else if (c->hosts_ok) {
      for (int i = 0; i < e->nplace && n < EL_MAX_PLACES; i++)
        if (!e->host[e->place_host[i]].banned) idx[n++] = e->place_host[i];
      check_hosts(e, idx, n, ok);
    }
    for (int k = 0; k < n; k++) {
      el_host *h = &e->host[idx[k]];
      if (!ok[k] && !h->banned) {
        h->banned = 1;
        end->node_lost = 1;
        used = strlen(r);
        snprintf(r + used, rl - used, "; host %s unreachable, left out", h->name);
      }
    }
    /* A rank killed, or a daemon lost, on a host that discovery no longer
     * lists (a manager took a lost node back) is a node loss too; a
     * program's own error is not, whatever the listing says. */
    int at = -1;
    if (w.end.sig_rank >= 0) at = rank_host(e, w.end.sig_rank);
    for (int k = 0; at < 0 && w.end.lost_node[0] && k < e->nhost; k++)
      if (strcmp(e->host[k].name, w.end.lost_node) == 0) at = k;
    if (at >= 0 && !killed_stop && !e->host[at].banned && c->discover) {
      discover(e);
      int placed = 0;
      for (int i = 0; i < e->nplace; i++)
        if (e->place_host[i] == at) placed = e->place_slots[i];
      const el_host *h = &e->host[at];
      if (!h->listed || h->slots < placed) {
        end->node_lost = 1;
        used = strlen(r);
        snprintf(r + used, rl - used, "; host %s no longer listed by discovery%s", h->name,
                 h->listed ? " with its slots" : "");
      }
    }
  }
  if (stuck) {
    used = strlen(r);
    snprintf(r + used, rl - used, " (mpirun stayed %.0f s after its ranks had ended: "
             "killed)", c->kill_grace_s);
  }
  /* The history's column: a longer reason is cut (its line has it whole). */
  snprintf(L->end, sizeof L->end, "%.*s%.41s", (int)sizeof L->end - 42,
           end->how != END_GROW ? r : strstr(r, "shrinking") ? "stopped to shrink"
                                                               : "stopped to grow",
           end->how != END_GROW ? "" : early_exit ? " (mpirun exited 0 before the program ran)"
                                   : early_rank ? " (a rank killed by the request's signal)"
                                   : early_mpirun ? " (mpirun killed by the request's signal)"
                                                  : "");
  early_check_join(e); /* (a launch that did not fail: its answers unused) */
  return GS_OK;
}

static void finish(el *e, int status, const char *msg) {
  e->res->status = status;
  /* A longer message is cut (the line on stderr has it whole). */
  snprintf(e->res->message, sizeof e->res->message, "%.*s",
           (int)sizeof e->res->message - 1, msg);
  emit_text(e, GS_ELASTIC_FINISH, status, msg);
}

/* Slots left out because a rank was killed there are suspects, not lost:
 * a reachable host's slot is preferred less, not refused. When the job
 * cannot run at its minimum without them, as few as it needs are given
 * back at once (host by host, in order) rather than waiting for discovery:
 * a one-node job whose rank was killed would otherwise hold its node for
 * min_wait_s, then fail. The restart budget still bounds a program that
 * keeps failing. Returns 1 with *size when that is enough. */
static int readmit_suspects(el *e, int cap, char *rule, size_t rule_len, int *size) {
  const gs_elastic_config *c = e->cfg;
  int *was = gs_calloc((size_t)e->nhost + 1, sizeof *was);
  if (!was) return 0;
  for (int i = 0; i < e->nhost; i++) was[i] = e->host[i].lost;
  int s = pick_size(e, cap, rule, rule_len);
  for (int i = 0; i < e->nhost && s < c->min_ranks; i++) {
    el_host *h = &e->host[i];
    while (h->listed && !h->banned && h->lost > 0 && s < c->min_ranks) {
      h->lost--;
      s = pick_size(e, cap, rule, rule_len);
    }
  }
  int given = 0;
  for (int i = 0; i < e->nhost; i++) given += was[i] - e->host[i].lost;
  if (s < c->min_ranks || given == 0) {
    for (int i = 0; i < e->nhost; i++) e->host[i].lost = was[i];
    gs_free(was);
    return 0;
  }
  char msg[512];
  int w = snprintf(msg, sizeof msg, "fewer than the minimum of %d rank%s are left without the "
                   "slots of killed ranks: using %d again (", c->min_ranks,
                   c->min_ranks == 1 ? "" : "s", given);
  for (int i = 0, k = 0; i < e->nhost && w > 0 && (size_t)w < sizeof msg; i++)
    if (was[i] > e->host[i].lost)
      w += snprintf(msg + w, sizeof msg - (size_t)w, "%s%s:%d", k++ ? ", " : "",
                    e->host[i].name, was[i] - e->host[i].lost);
  if (w > 0 && (size_t)w < sizeof msg) snprintf(msg + w, sizeof msg - (size_t)w, ")");
  emit_text(e, GS_ELASTIC_WARNING, 0, msg);
  gs_free(was);
  *size = s;
  return 1;
}

/* Waits, at most min_wait_s, for discovery to bring the slots a launch
 * needs. Returns the size to launch, or 0 after finish(). */
static int wait_for_slots(el *e, int cap, char *rule, size_t rule_len) {
  const gs_elastic_config *c = e->cfg;
  int size = pick_size(e, cap, rule, rule_len);
  if (size >= c->min_ranks) return size;
  char msg[512];
  if (readmit_suspects(e, cap, rule, rule_len, &size)) return size;
  int avail = avail_slots(e);
  if (!c->discover) {
    snprintf(msg, sizeof msg, "%d slot%s left%s, fewer than the minimum of %d rank%s, and no "
             "discovery to bring more", avail, avail == 1 ? "" : "s",
             c->global_batch > 0 && size < avail ? " that fit the global batch" : "",
             c->min_ranks, c->min_ranks == 1 ? "" : "s");
    finish(e, 1, msg);
    return 0;
  }
  snprintf(msg, sizeof msg, "%d slot%s usable, fewer than the minimum of %d rank%s: waiting up "
           "to %.0f s for discovery to list more", size, size == 1 ? "" : "s", c->min_ranks,
           c->min_ranks == 1 ? "" : "s", c->min_wait_s);
  emit_text(e, GS_ELASTIC_WAIT, 0, msg);
  double since = el_now(e), until = since + c->min_wait_s;
  while (!el_interrupt) {
    double next = e->last_discover + c->discover_every_s;
    while (!el_interrupt && el_now(e) < next && el_now(e) < until) nap_ms(50);
    if (el_interrupt) break;
    discover(e);
    size = pick_size(e, cap, rule, rule_len);
    if (size >= c->min_ranks || readmit_suspects(e, cap, rule, rule_len, &size)) return size;
    if (el_now(e) >= until) {
      /* The time waited, not --min-wait: a discovery script that hangs
       * holds the wait up to its own timeout past it. */
      snprintf(msg, sizeof msg, "waited %.0f s (--min-wait %.0f s): %d usable slot%s, fewer "
               "than the minimum of %d rank%s", el_now(e) - since, c->min_wait_s, size,
               size == 1 ? "" : "s", c->min_ranks, c->min_ranks == 1 ? "" : "s");
      finish(e, 1, msg);
      return 0;
    }
  }
  snprintf(msg, sizeof msg, "interrupted by signal %d while waiting for slots",
           (int)el_interrupt);
  finish(e, 128 + el_interrupt, msg);
  return 0;
}

static gs_status check_config(const gs_elastic_config *c) {
  if (!c || !c->mpirun_argv || !c->mpirun_argv[0] || !c->prog_argv || !c->prog_argv[0])
    return gs_error(GS_ERR_INVALID_ARG, "elastic job: no mpirun or no program");
  if (c->min_ranks < 1 || c->max_ranks < c->min_ranks)
    return gs_error(GS_ERR_INVALID_ARG, "elastic job: sizes %d:%d (need 1 <= min <= max)",
                    c->min_ranks, c->max_ranks);
  if (c->fixed_ranks < 0 || (c->fixed_ranks > 0 && c->fixed_ranks >= c->min_ranks))
    return gs_error(GS_ERR_INVALID_ARG, "elastic job: %d fixed ranks (servers) in sizes %d:%d "
                    "(every size needs at least one rank beside them)", c->fixed_ranks,
                    c->min_ranks, c->max_ranks);
  if (c->nhosts < 0 || (c->nhosts > 0 && !c->hosts) || (!c->discover && c->nhosts == 0))
    return gs_error(GS_ERR_INVALID_ARG, "elastic job: no hosts and no discovery script");
  if (c->max_restarts < 0 || c->discover_every_s < 0 || c->resize_interval_s < 0 ||
      c->min_wait_s < 0 || c->stop_wait_s < 0 || c->kill_grace_s < 0 ||
      c->discover_timeout_s < 0)
    return gs_error(GS_ERR_INVALID_ARG, "elastic job: a negative count or time");
  return GS_OK;
}

gs_status gs_elastic_run(const gs_elastic_config *cfg_in, gs_elastic_result *res) {
  memset(res, 0, sizeof *res);
  GS_CHECK(check_config(cfg_in));
  gs_elastic_config cfg = *cfg_in;
  if (cfg.discover_every_s <= 0) cfg.discover_every_s = 5;
  if (cfg.discover_timeout_s <= 0) cfg.discover_timeout_s = 10;
  if (cfg.stop_wait_s <= 0) cfg.stop_wait_s = 120;
  if (cfg.kill_grace_s <= 0) cfg.kill_grace_s = 10;
  if (cfg.out_fd == 0 && cfg.err_fd == 0) {
    cfg.out_fd = 1;
    cfg.err_fd = 2;
  }
  el *e = gs_malloc(sizeof *e);
  if (!e) return GS_ERR_NOMEM;
  memset(e, 0, sizeof *e);
  e->cfg = &cfg;
  e->res = res;
  e->t0 = gs_now();
  e->use_host_list = cfg.hosts_explicit || cfg.discover;
  size_t launches_cap = 16; /* the history grows as the job relaunches */
  res->launches = gs_malloc(launches_cap * sizeof *res->launches);
  if (!res->launches) {
    gs_free(e);
    return GS_ERR_NOMEM;
  }
  for (int i = 0; i < cfg.nhosts; i++)
    if (host_add(e, cfg.hosts[i].name, cfg.hosts[i].slots) != 0) {
      gs_free(e->host);
      gs_free(e);
      gs_elastic_result_free(res);
      return GS_ERR_NOMEM;
    }
  el_interrupt = 0;
  if (cfg.discover) discover(e);

  gs_status st = GS_OK;
  int cap = cfg.first_ranks;
  char rule[256], why[sizeof((el_end *)0)->reason + 64];
  el_end last;
  int have_last = 0, last_free = 0; /* last_free: its relaunch spends no restart */
  for (;;) {
    int old = e->size;
    /* A relaunch sizes itself by the listing as it is now. The last one
     * taken may be seconds old: from the stop's request to the launch's
     * end (reaching a commit, the ranks' exit) no listing is read, and a
     * manager that resized the job again meanwhile cost a second relaunch
     * (3 -> 2 -> 1 nodes where 1 was asked: a launch of 1-15 s thrown away
     * in the cluster manager's runs until 2026-12-07). */
    if (have_last && cfg.discover) discover(e);
    int size = wait_for_slots(e, cap, rule, sizeof rule);
    if (size == 0) break;
    if (el_interrupt) {
      snprintf(why, sizeof why, "interrupted by signal %d", (int)el_interrupt);
      finish(e, 128 + el_interrupt, why);
      break;
    }
    cap = 0;
    if ((size_t)res->nlaunches == launches_cap) {
      gs_elastic_launch *more =
          gs_realloc(res->launches, 2 * launches_cap * sizeof *res->launches);
      if (!more) {
        finish(e, 1, "out of memory for the job's launch history");
        break;
      }
      res->launches = more;
      launches_cap *= 2;
    }
    /* Counted as it happens: a relaunch that never came (too few slots)
     * is no restart in the history. */
    if (have_last && last.how == END_FAILED && last_free) res->node_losses++;
    else if (have_last && last.how == END_FAILED) res->restarts++;
    else if (have_last) res->resizes++;
    place(e, size);
    gs_elastic_launch *L = &res->launches[res->nlaunches++];
    memset(L, 0, sizeof *L);
    L->size = size;
    snprintf(L->hosts, sizeof L->hosts, "%.255s", e->world);
    gs_elastic_event ev;
    memset(&ev, 0, sizeof ev);
    ev.launch = res->nlaunches;
    ev.old_size = old;
    ev.new_size = size;
    ev.hosts = e->world;
    ev.rule = rule;
    char left_out[1024];
    left_out_hosts(e, left_out, sizeof left_out);
    ev.left_out = left_out;
    ev.commit_epoch = ev.commit_samples = ev.steps_redone = -1;
    if (have_last) {
      gs_launch_commit cm;
      ev.kind = GS_ELASTIC_RESIZE;
      ev.reason = last.reason;
      ev.node_lost = last.how == END_FAILED && last_free;
      if (el_read_commit(&cfg, &cm) == 0) {
        ev.commit_epoch = cm.epoch;
        ev.commit_samples = cm.samples_in_epoch;
      }
      if (last.how == END_GROW) {
        /* It committed as it stopped; the time from the request to the
         * relaunch went to reaching the commit and stopping. */
        ev.steps_redone = 0;
        ev.seconds_lost = el_now(e) - last.stop_t;
      } else {
        ev.steps_redone = steps_since_commit(e, last.detect_t);
        ev.seconds_lost = el_now(e) - last.detect_t;
      }
      emit(e, &ev);
    }
    ev.kind = GS_ELASTIC_LAUNCH;
    ev.reason = "";
    emit(e, &ev);
    el_end end;
    if ((st = run_launch(e, &end, why, sizeof why)) != GS_OK) {
      char msg[600];
      snprintf(msg, sizeof msg, "cannot launch: %s", why);
      finish(e, 1, msg);
      st = GS_OK; /* reported as the job's end */
      break;
    }
    if (end.how == END_DONE) {
      finish(e, 0, "done");
      break;
    }
    if (end.how == END_INTERRUPTED) {
      snprintf(why, sizeof why, "%s; ranks stopped", end.reason);
      finish(e, 128 + el_interrupt, why);
      break;
    }
    if (end.how == END_STOPPED || end.how == END_USAGE) {
      finish(e, end.status, end.reason);
      break;
    }
    if (end.how == END_FAILED) {
      gs_elastic_event fe;
      memset(&fe, 0, sizeof fe);
      fe.kind = GS_ELASTIC_FAILURE;
      fe.launch = res->nlaunches;
      fe.old_size = fe.new_size = e->size;
      fe.hosts = e->world;
      fe.rule = "";
      fe.reason = end.reason;
      fe.status = end.status;
      fe.detect_s = end.exit_t - end.detect_t;
      fe.commit_epoch = fe.commit_samples = fe.steps_redone = -1;
      /* A host lost is a resize the cluster made, not a failure of the
       * program: it spends no restart, up to EL_FREE_NODE_LOSSES of them
       * (a cluster whose hosts keep dying then spends the budget). */
      last_free = end.node_lost && res->node_losses < EL_FREE_NODE_LOSSES;
      fe.node_lost = last_free;
      emit(e, &fe);
      if (!last_free && res->restarts >= cfg.max_restarts) {
        snprintf(why, sizeof why, "%s; the restart budget (%d) is spent", end.reason,
                 cfg.max_restarts);
        finish(e, 1, why);
        break;
      }
    }
    last = end;
    have_last = 1;
  }
  gs_free(e->host);
  gs_free(e);
  return st;
}
