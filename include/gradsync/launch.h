/* Launching and supervising jobs (library gradsync_launch, src/launch;
 * docs/ELASTIC.md). Not part of the umbrella header: `gradsync run
 * --elastic` and the cluster manager call it.
 *
 * gs_elastic_run supervises one elastic job: it starts mpirun on the
 * current world, watches it, and when the job fails (a rank killed, a host
 * lost, mpirun killed) it leaves out what failed and starts the job again on
 * what is left, as long as at least min_ranks slots remain and the restart
 * budget lasts; when a discovery script lists more slots, it asks the job to
 * stop at its next commit (SIGUSR1 to mpirun; the program commits and exits
 * 3) and starts it again larger, up to max_ranks. The program is given the
 * same arguments each time: it resumes from its own checkpoint
 * (`gradsync train --resume=auto`). Open MPI 4.1 has no ULFM, so every
 * resize is a coordinated restart from the last commit.
 *
 * The library never prints: what happens reaches the caller as events
 * (on_event), and the job's own output passes through unchanged to out_fd
 * and err_fd. Every wait is bounded. */
#ifndef GRADSYNC_LAUNCH_H
#define GRADSYNC_LAUNCH_H

#include <sys/types.h>

#include "gradsync/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GS_LAUNCH_HOST_MAX 253 /* a DNS name's length */

/* A host and how many ranks it takes. */
typedef struct gs_launch_host {
  char name[GS_LAUNCH_HOST_MAX + 1];
  int slots;
} gs_launch_host;

/* Parses a discovery script's output (Horovod's format): one `HOST:SLOTS`
 * or `HOST` (one slot) a line; blank lines and `#` comments count for
 * nothing; a host given twice adds nothing (the later line is refused).
 * Returns GS_OK with *hosts (gs_malloc'ed, the caller gs_frees it) and *n,
 * or GS_ERR_PARSE naming the line (`line 3: 'x:y': ...`) with *hosts NULL. */
gs_status gs_launch_hosts_parse(const char *text, gs_launch_host **hosts, int *n);

/* A training program's last commit in its checkpoint directory, as a
 * supervisor or a cluster manager reads it: gradsync train's
 * DIR/checkpoint.json, or the DLRM trainer's manifest DIR/dlrm.json (the
 * newer, where both are). */
typedef struct gs_launch_commit {
  long epoch;            /* from 0 */
  long samples_in_epoch;
  long global_step;      /* the steps of every epoch before, and this one's; -1 unknown */
  long epoch_samples;    /* samples an epoch; 0 unknown */
  long global_batch;     /* samples a global step; 0 unknown */
  double epochs;         /* the run's epochs, as it recorded them; 0 unknown */
  double mtime;          /* the file's modification time (s since the epoch) */
  char path[4096];       /* the file */
} gs_launch_commit;

/* The commit file's path and modification time, without reading it.
 * Returns 0, or -1 when there is none. */
int gs_launch_commit_stat(const char *dir, char *path, size_t path_len, double *mtime);

/* Reads the commit. Returns 0, or -1 when there is none or it cannot be
 * read (*out zeroed). */
int gs_launch_read_commit(const char *dir, gs_launch_commit *out);

/* Reads a progress report, PATH being a program's progress.json
 * ({"epoch", "samples_in_epoch", "epoch_samples", "epochs"} and, from
 * gradsync train, "global_batch"): what an --exec program under the cluster
 * manager (gradsync.torch.elastic's State) writes at each commit, and
 * gradsync train between its commits. Returns 0 with *out filled
 * (global_step -1 without a global batch), -1 when there is no file or it
 * cannot be read, -2 when the file is no report (a field missing, not a
 * number or out of range); *out is zeroed unless 0. */
int gs_launch_read_report(const char *path, gs_launch_commit *out);

/* The key of a launch's calibration file (gs_elastic_config.cost_cache_dir,
 * `gradsync run --cost-cache`): a 64-bit FNV-1a of the launch's fixed
 * settings, its hosts ("h1:1,h2:1", or "local") and its size. */
uint64_t gs_launch_cost_key(const char *desc, const char *hosts, int size);

typedef enum gs_elastic_event_kind {
  GS_ELASTIC_LAUNCH,  /* mpirun started (launch numbers from 1) */
  GS_ELASTIC_FAILURE, /* the job failed: reason says what */
  GS_ELASTIC_RESIZE,  /* relaunching: after a failure, or to grow */
  GS_ELASTIC_WAIT,    /* fewer slots than min_ranks: waiting for discovery */
  GS_ELASTIC_WARNING, /* the discovery script failed or printed garbage */
  GS_ELASTIC_FINISH   /* the supervisor ends: status and message */
} gs_elastic_event_kind;

/* One event. Pointers are valid during the callback only. -1 means
 * unknown for the numbers that can be. */
typedef struct gs_elastic_event {
  gs_elastic_event_kind kind;
  double t;            /* seconds since gs_elastic_run began */
  int launch;          /* the launch it concerns (the new one for LAUNCH/RESIZE) */
  int old_size, new_size;
  const char *hosts;   /* LAUNCH/RESIZE: the new world, "h1:4,h2:3" */
  const char *reason;  /* FAILURE/RESIZE: why ("rank 2 on node1 killed by signal 9",
                        * "discovery lists 4 slots"); WAIT/WARNING/FINISH: the message */
  const char *rule;    /* LAUNCH/RESIZE: how the size was chosen, or "" */
  const char *left_out; /* LAUNCH/RESIZE: hosts listed but left out for the rest of
                         * the run (unreachable, or every slot's rank killed),
                         * "h1,h2", or "" */
  long commit_epoch;   /* RESIZE: the commit the job resumes from (checkpoint.json) */
  long commit_samples; /*   its samples_in_epoch */
  long steps_redone;   /* RESIZE after a failure: estimated steps since that commit */
  double seconds_lost; /* RESIZE: from the failure's detection (to grow: from the
                        * stop request) to the relaunch */
  double detect_s;     /* FAILURE: from the first sign of failure to mpirun's exit */
  int status;          /* FAILURE: mpirun's exit status (128+N: killed by N);
                        * FINISH: the status the job ends with */
  int restarts;        /* failures relaunched so far */
  int node_lost;       /* FAILURE, and the RESIZE after it: a host of the launch was
                        * lost (unreachable, or no longer listed): it spends no
                        * restart */
} gs_elastic_event;

/* One launch of the job, for the history. */
typedef struct gs_elastic_launch {
  int size;
  char hosts[256];     /* the world, cut to fit */
  double start_t, end_t;
  int status;          /* mpirun's exit status (128+N: killed by signal N) */
  char end[160];       /* how it ended: "done", "stopped to grow", "rank 3 on vm
                        * killed by signal 9", ... */
} gs_elastic_launch;

typedef struct gs_elastic_result {
  int status;          /* 0 done, 1 failed, 2 the program refused its options,
                        * 3 stopped on request, 128+N interrupted by signal N */
  char message[512];   /* why it ended, when not done */
  int restarts;        /* failures relaunched */
  int resizes;         /* relaunches to grow or shrink on request */
  int node_losses;     /* relaunches after a host was lost (no restart spent) */
  gs_elastic_launch *launches; /* gs_malloc'ed; gs_elastic_result_free */
  int nlaunches;
} gs_elastic_result;

typedef struct gs_elastic_config {
  int min_ranks, max_ranks;       /* 1 <= min <= max */
  int first_ranks;                /* the first launch's size at most (0: max) */
  /* The hosts: given (hosts/nhosts), or from the discovery script. With
   * hosts_explicit 0 the world is this machine (one host, its slots the
   * rank count) and mpirun gets -np only; otherwise --host too. */
  const gs_launch_host *hosts;
  int nhosts;
  int hosts_explicit;
  const char *discover;           /* a script printing host:slots lines, or NULL */
  double discover_every_s;        /* its period (default 5) */
  double discover_timeout_s;      /* one run's bound (default 10) */
  int max_restarts;               /* failures relaunched at most (default 5; 0: none);
                                   * a lost host's relaunch is not counted */
  double resize_interval_s;       /* least time from a launch to a growth (default 30) */
  /* 1: when discovery stops listing a host the launch uses (or lists fewer
   * of its slots than the launch takes there), the job is asked to stop at
   * its next commit as for growth and is relaunched on what is listed, at
   * once (no resize_interval): a cluster manager takes nodes back this way.
   * 0 (default): such a host is dropped at the next launch only. */
  int shrink_on_discover;
  double min_wait_s;              /* wait for slots when fewer than min (default 60) */
  double stop_wait_s;             /* the job's bound to commit and stop (default 120) */
  double kill_grace_s;            /* mpirun's bound to end after a rank died (default 10) */
  long global_batch;              /* > 0: the trainers must share it equally */
  int fixed_ranks;                /* ranks of every launch that train on no batch (the
                                   * program's parameter servers): a size s has
                                   * s - fixed_ranks >= 1 trainers, and they divide
                                   * global_batch; 1 <= fixed_ranks < min_ranks, or 0 */
  const char *checkpoint_dir;     /* the program's: DIR/checkpoint.json is read, or NULL */
  /* A program with no checkpoint_dir whose commits are its progress
   * reports, DIR/progress.json (gs_launch_read_report), or NULL: an --exec
   * program under the cluster manager ($GRADSYNC_ELASTIC_DIR). */
  const char *report_dir;
  long commit_every;              /* the program's steps between commits (0: unknown):
                                   * the steps redone after a failure are at most this */
  /* A directory of calibrations (or NULL): each launch's ranks get
   * GRADSYNC_COST_CACHE=DIR/cost-<key>.json, key a hash of cost_cache_desc
   * (the launch's fixed settings), its hosts and its size, so that a
   * relaunch on hosts calibrated before skips the calibration. */
  const char *cost_cache_dir;
  const char *cost_cache_desc;
  char *const *mpirun_argv;       /* mpirun's path and fixed options, NULL-ended */
  char *const *prog_argv;         /* the program and its arguments, NULL-ended */
  int out_fd, err_fd;             /* where the job's output goes (default 1 and 2; set
                                   * both, or leave both 0) */
  /* Whether hosts may still start ranks: hosts[0..n) (those of a failed
   * launch, or those a growth would add) checked at once, ok[i] set to 1
   * or 0 (the caller checks ssh, in parallel, bounded by its timeout; 1
   * for this machine); NULL: always. A host that fails it is left out for
   * the rest of the job. */
  void (*hosts_ok)(const char *const *hosts, int n, int *ok, void *user);
  void (*on_event)(const gs_elastic_event *e, void *user);
  void *user;
} gs_elastic_config;

/* What /proc/PID/stat says of a process (Linux). 0, or -1 when there is
 * no such process (or /proc is not mounted). */
typedef struct gs_launch_proc {
  char state;               /* R, S, ... Z: ended, not reaped by its parent */
  pid_t ppid;
  int session;
  unsigned long long start; /* start time, in clock ticks after boot */
  int exit_status;          /* waitpid's form, once ended; -1: unknown */
} gs_launch_proc;
int gs_launch_proc_stat(pid_t pid, gs_launch_proc *out);

/* A launcher's children (mpirun's: the local ranks, or the ssh clients of
 * remote daemons): how many there are, how many of them have ended without
 * their parent reaping them, and the waitpid status of the first ended one
 * that did not exit 0 (0: none). Every child ended and the parent still
 * there for seconds: Open MPI's mpirun has deadlocked in its own finalize
 * (seen with Open MPI 4.1 after MPI_Abort), and only killing it ends it. */
typedef struct gs_launch_children {
  int children, ended, bad_status;
} gs_launch_children;
void gs_launch_children_of(pid_t parent, gs_launch_children *out);
/* The watch of such a parent, called every half second or so with the
 * time now and *since (0 at first): 1 once every child has been ended
 * for more than linger_s, with *ch filled (the children seen this call). */
int gs_launch_stuck(pid_t parent, double now, double linger_s, double *since,
                    gs_launch_children *ch);
/* A process noted by pid and start time (field 22 of /proc/PID/stat), so
 * that a recycled pid is never taken for it. gs_launch_note_children adds
 * parent's children not yet in list[0..*n) (at most max in all);
 * gs_launch_noted_alive says whether one still runs (not ended, not a
 * zombie); gs_launch_kill_noted sends SIGKILL to each that still runs and
 * returns how many it killed. */
typedef struct gs_launch_pid {
  pid_t pid;
  unsigned long long start;
  int agent; /* an ssh, rsh or srun client (a remote daemon's link): 1 */
} gs_launch_pid;
void gs_launch_note_children(pid_t parent, gs_launch_pid *list, int *n, int max);
int gs_launch_noted_alive(const gs_launch_pid *p);
int gs_launch_kill_noted(const gs_launch_pid *list, int n);

/* Whether a line of mpirun's output says a rank ended the job: Open MPI's
 * "MPI_ABORT was invoked on rank R", or the "gradsync: rank R: fatal: ..."
 * that gs_comm_abort prints before it calls MPI_Abort (*rank = R; -1 when
 * the line names none). After it mpirun kills every rank, but one on a host
 * cut off or frozen never answers, and mpirun then waits for good: a
 * launcher that sees this line bounds the wait. */
int gs_launch_abort_line(const char *line, int *rank);
/* What mpirun's output told of how a job ended: the first of each kind
 * read. Open MPI 4.1's words: "process rank R with PID P on node H exited
 * on signal S"; "Process name: [[J,1],R]" then "Exit code: C" (the first
 * rank to exit non-zero); "Remote daemon: ... on node H" (a daemon lost);
 * and gs_launch_abort_line's. -1 and "" where nothing was read. */
typedef struct gs_launch_end {
  int sig_rank, sig_num;
  char sig_node[GS_LAUNCH_HOST_MAX + 1];
  int exit_rank, exit_code;
  char lost_node[GS_LAUNCH_HOST_MAX + 1];
  int abort_rank;
} gs_launch_end;
void gs_launch_end_init(gs_launch_end *e);
/* Reads one line (without its newline) into *e; 1 if it told something of
 * the job's end, 0 if not. */
int gs_launch_end_line(gs_launch_end *e, const char *line);
/* A waitpid status as a shell's exit code: the code, or 128 + the signal. */
int gs_launch_status_code(int status);

/* Runs the job to its end (see the top). GS_OK with *res filled whatever
 * the job's fate (res->status); GS_ERR_INVALID_ARG for a bad configuration,
 * another status when a process or pipe cannot be made. The caller frees
 * res with gs_elastic_result_free. Runs in the calling thread; installs no
 * signal handlers (see gs_elastic_interrupt). mpirun's children (the local
 * ranks) are recorded by pid and start time while they run; those that
 * outlive a killed mpirun by kill_grace_s are killed before the next
 * launch. A discovery warning repeated unchanged is sent once. */
gs_status gs_elastic_run(const gs_elastic_config *cfg, gs_elastic_result *res);

/* From a signal handler (async-signal-safe): forwards sig to the running
 * mpirun and ends the supervision without relaunching; gs_elastic_run then
 * returns status 128+sig once mpirun has stopped (after kill_grace_s it is
 * killed). */
void gs_elastic_interrupt(int sig);

/* From a signal handler (async-signal-safe): forwards sig to the running
 * mpirun, if a launch runs, and nothing more (a user's SIGUSR1: the program
 * commits and exits 3, a stop the supervisor did not ask for, which ends
 * the job with status 3). Between launches it is dropped. */
void gs_elastic_forward(int sig);

void gs_elastic_result_free(gs_elastic_result *res);

/* 1 when a launch of `ranks` ranks can train: more ranks than its
 * fixed_ranks (a parameter-server job's servers, which train on no batch),
 * and, when global_batch > 0, trainers (ranks - fixed_ranks) that divide it.
 * The supervisor launches only such sizes; the cluster manager gives a job
 * only such sizes (ranks = nodes * slots). */
int gs_elastic_size_runs(int ranks, int fixed_ranks, long global_batch);

/* 1 when a gradsync train job may change its rank count between launches:
 * it has a global batch (global_batch > 0) or scales its learning rate
 * with its ranks (--scale-lr linear). Without either it keeps its batch per
 * rank and its --resume refuses a checkpoint from another rank count, so it
 * runs at one size only. */
int gs_elastic_resizable(long global_batch, int scale_lr_linear);

/* Why such a job runs at one size, and what lets it resize (only a global
 * batch where global_batch_only: a parameter-server job, a DLRM job), in
 * the words that submit, the cluster manager and the supervisor print. */
const char *gs_elastic_one_size_why(int global_batch_only);

/* The sizes from min to max units of `unit` ranks each that a gradsync
 * train job runs on (gs_elastic_size_runs), into *lo and *hi: the smallest
 * and the largest such. A job that is not resizable (gs_elastic_resizable)
 * gets one size, the largest of them that `cap` units hold (cap <= 0: no
 * cap). -1 when no size runs (and, for a fixed-size job, fits the cap).
 * Submit, the cluster manager and the supervisor share this rule. */
int gs_elastic_size_range(int min, int max, int unit, int cap, int fixed_ranks,
                          long global_batch, int resizable, int *lo, int *hi);

#ifdef __cplusplus
}
#endif
#endif /* GRADSYNC_LAUNCH_H */
