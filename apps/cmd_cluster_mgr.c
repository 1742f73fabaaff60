/* gradsync cluster serve | keep | drain | undrain, and the top-level verbs
 * submit, jobs and cancel: the cluster manager's command line
 * (gradsync/cluster_manager.h; docs/CLUSTER.md, "The manager: serve,
 * submit, jobs, cancel"). The manager and its clients meet in a spool
 * directory: --spool DIR, else $GRADSYNC_SPOOL, else
 * /tmp/gradsync-cluster-UID. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cli_shares.h"
#include "gradsync/cluster_manager.h"
#include "gradsync/launch.h"

static void default_spool(char *out, size_t len) {
  const char *env = getenv("GRADSYNC_SPOOL");
  if (env && *env) snprintf(out, len, "%s", env);
  else snprintf(out, len, "/tmp/gradsync-cluster-%d", (int)getuid());
}

/* ---- serve ---------------------------------------------------------------- */

static volatile sig_atomic_t serve_stop;
static void on_stop(int sig) { serve_stop = sig; }

static void serve_log(const char *line, void *user) {
  (void)user;
  time_t t = time(NULL);
  struct tm tm;
  char when[32];
  localtime_r(&t, &tm);
  strftime(when, sizeof when, "%H:%M:%S", &tm);
  char clean[1100];
  fprintf(stderr, "gradsync cluster: %s %s\n", when, cli_clean_text(clean, sizeof clean, line));
}

static void serve_usage(FILE *f) {
  fprintf(f,
      "usage: gradsync cluster serve (--nodes HOSTFILE | --slurm | --emulated N)\n"
      "                              [options]\n\n"
      "Serves a pool of whole nodes to elastic gradsync jobs (gradsync submit,\n"
      "jobs, cancel), each on a partition of its own that the policy resizes.\n"
      "Killed and started again on the same spool, it finds its jobs again.\n\n"
      "  --nodes FILE     the pool: lines HOST, HOST slots=N or HOST:N\n"
      "  --slurm          the pool: the nodes of the Slurm allocation the manager\n"
      "                   runs in (SLURM_JOB_NODELIST, e.g. node[01-04]; slots\n"
      "                   from SLURM_TASKS_PER_NODE, else 1 a node)\n"
      "  --emulated N     the pool: N emulated nodes (network namespaces with an\n"
      "                   sshd each, scripts/emulated-hosts.sh), kept in\n"
      "                   SPOOL/emulated (gradsync cluster down removes them)\n"
      "  --rate R         --emulated nodes' links (tc's syntax: 1gbit)\n"
      "  --node-cpus C    --emulated nodes: each node's processes share at most C\n"
      "                   cores (a CPU cgroup per node, as gradsync run --node-cpus)\n"
      "  --policy P       static (default), or a policy this build knows\n"
      "  --net NAME       the pool's links, a name of gradsync run --net (1gbit,\n"
      "                   10GbE, ...): gradsync train jobs' speeds on sizes not\n"
      "                   yet measured are predicted from their profiles on it\n"
      "                   (default: none, linear until measured)\n"
      "  --share-speeds   a gradsync train job that has measured nothing yet\n"
      "                   starts from the speeds of an earlier job of its kind\n"
      "                   (the same options but for its length, seed, commits\n"
      "                   and the optimizer's numbers)\n"
      "  --spool DIR      where requests, the journal and the jobs live\n"
      "  --round-log FILE  append each policy round to FILE as a JSON line: every\n"
      "                   job as the policy saw it (size, progress, time run,\n"
      "                   restart price, speed curve) and the size it answered\n"
      "                   (cluster simulate --round-log writes the same)\n"
      "  --interval S     a policy round at least every S seconds (default 10)\n"
      "  --restart-budget K  a job's restarts before it is failed (default 3)\n"
      "  --restart-penalty S  what the policies charge a resize's restart until the\n"
      "                   job's own is measured (RESTART_S in gradsync jobs): goodput\n"
      "                   grows a job only when that pays back, dorm prices it\n"
      "                   against the job's remaining time (default: the job's\n"
      "                   measured start-up plus the pool's measured stops, \"~S\"\n"
      "                   in RESTART_S; 30 before anything is measured; 0: no\n"
      "                   price at all, dorm's objective as Dorm's paper has it)\n"
      "%s"
      "                   (a job whose --min is above its user's or its\n"
      "                   account path's limit is refused at submit)\n"
      "  --fairness-window S  dorm: fairness over time: a job's target is its fair\n"
      "                   share plus the node-seconds of share it was owed and not\n"
      "                   given (waiting, or on fewer nodes), paid back over S\n"
      "                   seconds (default: none, the share now)\n"
      "  --node-cooldown S  a node back from being lost gets no job for S seconds,\n"
      "                   doubled for each other loss within the hour, at most 16\n"
      "                   times (default 30; 0: at once); undrain ends it\n"
      "  --commit-every Ts  gradsync train jobs commit every T seconds (default\n"
      "                   10s; a stop for a resize waits about 0.5 s, and the\n"
      "                   jobs report progress at each check), DLRM jobs every\n"
      "                   20 steps; N (steps): every job every N steps\n"
      "  --discover-every S  the jobs' discovery period (default 1)\n"
      "  --ssh-config FILE  the jobs' ssh configuration (with --nodes or --slurm)\n"
      "  --iface IFACE    the jobs' MPI traffic only through IFACE\n"
      "  --mpirun PATH    the jobs' mpirun\n"
      "  --help           this text\n\n"
      "SIGINT or SIGTERM stops the manager; its jobs keep running, and the next\n"
      "serve on the spool adopts them.\n", cli_shares_usage);
}

/* SPOOL/emulated: the hosts scripts/emulated-hosts.sh built, reused when
 * they are still there (a restarted manager) and as many as n (one a line
 * of SPOOL/emulated/names). 0; -2 a usage error (reported); -1. */
static int emulated_up(const char *spool, int n, const char *rate, char *dir, size_t len) {
  if (snprintf(dir, len, "%s/emulated", spool) >= (int)len) {
    cli_error("cluster serve", "--spool %s: the path is too long", spool);
    return -2;
  }
  char names[PATH_MAX + 16];
  snprintf(names, sizeof names, "%s/names", dir);
  FILE *nf = fopen(names, "r");
  if (nf) {
    int have = 0, c, last = '\n';
    while ((c = getc(nf)) != EOF) {
      if (c == '\n' && last != '\n') have++;
      last = c;
    }
    if (last != '\n') have++;
    fclose(nf);
    if (have == n) return 0;
    cli_error("cluster serve", "--emulated %d: the spool's pool (%s) has %d nodes, --emulated "
              "asks %d: use another --spool or `gradsync cluster down` first", n, dir, have, n);
    return -2;
  }
  char script[PATH_MAX];
  snprintf(script, sizeof script, "%s/scripts/emulated-hosts.sh", GRADSYNC_SOURCE_DIR);
  if (access(script, X_OK) != 0) {
    cli_fail("cluster", "--emulated needs %s: %s", script, strerror(errno));
    return -1;
  }
  mkdir(spool, 0755);
  pid_t pid = fork();
  if (pid == 0) {
    /* Its stdout is the hosts' list (also in DIR/hosts, and the manager's
     * log names the pool): not a line of serve's own; its errors go to
     * stderr. */
    int null = open("/dev/null", O_WRONLY);
    dup2(null >= 0 ? null : 2, 1);
    char nbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", n);
    if (rate) execl(script, script, "up", nbuf, dir, rate, (char *)NULL);
    else execl(script, script, "up", nbuf, dir, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    cli_fail("cluster", "could not build %d emulated nodes in %s (see above)", n, dir);
    return -1;
  }
  return 0;
}

/* --node-cpus: each emulated node's sshd goes into a CPU group of its own
 * capped to cpus cores (run_cpu.c's groups), so that everything a job
 * starts on the node over ssh is counted there and nodes do not lend each
 * other cores. The groups are named after node 0's sshd, which lives as
 * long as the nodes: a manager that restarts finds them, and they are
 * removed as stale once the nodes are down. */
static int emulated_cpus(const char *dir, int n, double cpus) {
  char path[PATH_MAX + 32], prefix[300], file[400], text[32];
  int pid0 = 0;
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/sshd.%d.pid", dir, i);
    FILE *f = fopen(path, "r");
    int pid = 0;
    if (!f || fscanf(f, "%d", &pid) != 1 || pid <= 0) {
      if (f) fclose(f);
      cli_fail("cluster", "--node-cpus: no sshd pid in %s", path);
      return -1;
    }
    fclose(f);
    if (i == 0) {
      pid0 = pid;
      if (run_cpu_create(pid0, n, cpus, -1, -1, prefix, sizeof prefix) != 0) return -1;
    }
    if (snprintf(file, sizeof file, "%s%d/cgroup.procs", prefix, i) >= (int)sizeof file)
      return -1;
    snprintf(text, sizeof text, "%d", pid);
    FILE *g = fopen(file, "w");
    int ok = g && fputs(text, g) >= 0;
    if (g) ok = fclose(g) == 0 && ok;
    if (!ok) {
      cli_fail("cluster", "--node-cpus: cannot move node %d's sshd (pid %d) into %s: %s", i,
               pid, file, strerror(errno));
      return -1;
    }
  }
  fprintf(stderr, "gradsync cluster: %d emulated nodes of at most %g cores each (%s*)\n", n,
          cpus, prefix);
  return 0;
}

static int cmd_serve(int argc, char **argv) {
  const char *nodes_file = NULL, *policy = "static", *ssh_config = NULL, *iface = NULL,
             *mpirun = NULL, *rate = NULL, *spool_arg = NULL, *net = NULL, *round_log = NULL;
  int emulated = 0, slurm = 0, restart_budget = 3, commit_every = 20, share_speeds = 0;
  double commit_every_s = 0; /* the manager's default, GS_CLUSTER_COMMIT_EVERY_S */
  int by_time = 1; /* cli_parse_seconds_suffix's last answer */
  double interval = 10, discover_every = 1, node_cpus = 0, restart_penalty = -1, cooldown = 30;
  /* --restart-penalty: -1 not given (the measured prior), 0 no price */
  double fairness_window = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      serve_usage(stdout);
      return 0;
    }
    const char **sp = strcmp(a, "--nodes") == 0        ? &nodes_file
                      : strcmp(a, "--policy") == 0     ? &policy
                      : strcmp(a, "--ssh-config") == 0 ? &ssh_config
                      : strcmp(a, "--iface") == 0      ? &iface
                      : strcmp(a, "--mpirun") == 0     ? &mpirun
                      : strcmp(a, "--rate") == 0       ? &rate
                      : strcmp(a, "--spool") == 0      ? &spool_arg
                      : strcmp(a, "--net") == 0        ? &net
                      : strcmp(a, "--round-log") == 0  ? &round_log
                                                       : NULL;
    if (sp) {
      if (!has || !*argv[i + 1]) {
        cli_error("cluster serve", "option '%s' needs a value", a);
        return 2;
      }
      *sp = argv[++i];
      continue;
    }
    if (strcmp(a, "--slurm") == 0) {
      slurm = 1;
    } else if (strcmp(a, "--share-speeds") == 0) {
      share_speeds = 1;
    } else if (strcmp(a, "--emulated") == 0) {
      if (!has || cli_parse_int(argv[i + 1], 1, 200, &emulated) != 0) {
        cli_error("cluster serve", "--emulated needs a node count from 1 to 200 (got '%s')",
                  has ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--commit-every") == 0 && has &&
               (by_time = cli_parse_seconds_suffix(argv[i + 1], 0.001, 1e9,
                                                   &commit_every_s)) != 1) {
      if (by_time < 0) {
        cli_error("cluster serve", "--commit-every '%s': seconds must be a number from 0.001 "
                  "to 1e9 (as 5s), or steps a whole number", argv[i + 1]);
        return 2;
      }
      i++;
    } else if (strcmp(a, "--restart-budget") == 0 || strcmp(a, "--commit-every") == 0) {
      int *v = a[2] == 'r' ? &restart_budget : &commit_every;
      if (a[2] == 'c') commit_every_s = -1; /* steps, for every job */
      if (!has || cli_parse_int(argv[i + 1], a[2] == 'r' ? 0 : 1, 1000000, v) != 0) {
        if (a[2] == 'r')
          cli_error("cluster serve", "--restart-budget needs restarts from 0 to 1000000 (got "
                    "'%s')", has ? argv[i + 1] : "");
        else
          cli_error("cluster serve", "--commit-every needs steps from 1 to 1000000, or seconds "
                    "as 5s (got '%s')", has ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--node-cpus") == 0) {
      if (!has || cli_parse_double(argv[i + 1], 0.01, 4096, &node_cpus) != 0) {
        cli_error("cluster serve", "--node-cpus needs cores from 0.01 to 4096 (got '%s')",
                  has ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--restart-penalty") == 0 || strcmp(a, "--node-cooldown") == 0) {
      double *v = a[2] == 'r' ? &restart_penalty : &cooldown;
      if (!has || cli_parse_double(argv[i + 1], 0, 86400, v) != 0) {
        cli_error("cluster serve", "%s needs seconds from 0 to 86400 (got '%s')", a,
                  has ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--fairness-window") == 0) {
      if (!has || cli_parse_double(argv[i + 1], 1, 1e9, &fairness_window) != 0) {
        cli_error("cluster serve", "--fairness-window needs seconds from 1 to 1e9 (got '%s')",
                  has ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (cli_shares_option(a)) {
      if (cli_shares_add("cluster serve", a, has ? argv[i + 1] : "") != 0) return 2;
      i++;
    } else if (strcmp(a, "--interval") == 0 || strcmp(a, "--discover-every") == 0) {
      double *v = a[2] == 'i' ? &interval : &discover_every;
      if (!has || cli_parse_double(argv[i + 1], 0.1, 86400, v) != 0) {
        cli_error("cluster serve", "%s needs seconds from 0.1 to 86400 (got '%s')", a,
                  has ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else {
      cli_error("cluster serve", "unknown option '%s'", a);
      return 2;
    }
  }
  if ((nodes_file != NULL) + slurm + (emulated > 0) != 1) {
    cli_error("cluster serve", "give the pool: --nodes HOSTFILE, --slurm or --emulated N (one "
              "of them)");
    return 2;
  }
  const char *slurm_var = "SLURM_JOB_NODELIST", *slurm_nodes = NULL;
  if (slurm) {
    slurm_nodes = getenv(slurm_var);
    if (!slurm_nodes || !*slurm_nodes) {
      slurm_var = "SLURM_NODELIST"; /* Slurm's older name */
      slurm_nodes = getenv(slurm_var);
    }
    if (!slurm_nodes || !*slurm_nodes) {
      cli_error("cluster serve", "--slurm: not inside a Slurm allocation (SLURM_JOB_NODELIST is "
                "not set); start the manager in salloc or sbatch, or give --nodes HOSTFILE");
      return 2;
    }
  }
  if (net) {
    double bps;
    if (gs_net_rate(net, &bps) != GS_OK) {
      cli_error("cluster serve", "--net: %s", gs_last_error());
      return 2;
    }
  }
  if (rate && !emulated) {
    cli_error("cluster serve", "--rate shapes --emulated nodes' links: it needs --emulated");
    return 2;
  }
  if (node_cpus > 0 && !emulated) {
    cli_error("cluster serve", "--node-cpus caps --emulated nodes (real nodes have their own "
              "cores)");
    return 2;
  }
  if (ssh_config && emulated) {
    cli_error("cluster serve", "--ssh-config: --emulated nodes bring their own");
    return 2;
  }
  if (!gs_cluster_policy_exists(policy)) {
    cli_error("cluster serve", "unknown policy '%s' (static, dorm and goodput are the "
              "policies there are; this build may lack some)", policy);
    return 2;
  }
  if (fairness_window > 0 && strcmp(policy, "dorm") != 0) {
    cli_error("cluster serve", "--fairness-window moves dorm's targets: it needs --policy dorm "
              "(got '%s')", policy);
    return 2;
  }
  /* The jobs' mpirun, found now: not at each job's launch, every job
   * failing on it (the same search gradsync run makes). */
  static char mpirun_path[PATH_MAX];
  if (mpirun) {
    char why[384];
    if (cli_find_exe_why(mpirun, mpirun_path, sizeof mpirun_path, why, sizeof why) != 0) {
      cli_error("cluster serve", "--mpirun %s: %s", mpirun, why);
      return 2;
    }
    mpirun = mpirun_path;
  }
  char spool[PATH_MAX];
  if (spool_arg) snprintf(spool, sizeof spool, "%s", spool_arg);
  else default_spool(spool, sizeof spool);
  static char self[PATH_MAX], emu[PATH_MAX], hostfile[PATH_MAX + 32], sshcfg[PATH_MAX + 32],
      subnet_text[64], ssh_abs[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    cli_fail("cluster", "cannot find the gradsync binary: %s", strerror(errno));
    return 1;
  }
  self[n] = '\0';
  if (ssh_config) {
    if (!realpath(ssh_config, ssh_abs)) {
      cli_error("cluster serve", "--ssh-config %s: %s", ssh_config, strerror(errno));
      return 2;
    }
    ssh_config = ssh_abs;
  }
  if (emulated) {
    if (geteuid() != 0) {
      cli_error("cluster serve", "--emulated needs root (it builds network namespaces)");
      return 2;
    }
    int up = emulated_up(spool, emulated, rate, emu, sizeof emu);
    if (up != 0) return up == -2 ? 2 : 1;
    if (node_cpus > 0 && emulated_cpus(emu, emulated, node_cpus) != 0) return 1;
    snprintf(hostfile, sizeof hostfile, "%s/hostfile", emu);
    snprintf(sshcfg, sizeof sshcfg, "%s/ssh_config", emu);
    nodes_file = hostfile;
    ssh_config = sshcfg;
    char subnet_path[PATH_MAX + 16];
    snprintf(subnet_path, sizeof subnet_path, "%s/subnet", emu);
    FILE *f = fopen(subnet_path, "r");
    if (f && fgets(subnet_text, sizeof subnet_text, f)) {
      subnet_text[strcspn(subnet_text, "\n")] = '\0';
      if (!iface) iface = subnet_text;
    }
    if (f) fclose(f);
  }
  run_hosts hosts;
  if (slurm ? run_hosts_slurm("cluster serve", slurm_var, slurm_nodes,
                              getenv("SLURM_TASKS_PER_NODE"), &hosts)
            : run_hosts_read_as("cluster serve", "--nodes", nodes_file, &hosts))
    return 2;
  if (hosts.n > GS_CLUSTER_MAX_NODES) {
    cli_error("cluster serve", "%s: %d nodes (at most %d)", slurm ? slurm_var : nodes_file,
              hosts.n, GS_CLUSTER_MAX_NODES);
    run_hosts_free(&hosts);
    return 2;
  }
  gs_cluster_node *pool = calloc((size_t)hosts.n, sizeof *pool);
  if (!pool) {
    run_hosts_free(&hosts);
    cli_fail("cluster", "out of memory");
    return 1;
  }
  for (int i = 0; i < hosts.n; i++) {
    snprintf(pool[i].name, sizeof pool[i].name, "%s", hosts.host[i].name);
    pool[i].slots = hosts.host[i].slots;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  gs_cluster_serve_config c = {
      .spool = spool, .nodes = pool, .nnodes = hosts.n, .policy = policy,
      .interval_s = interval, .restart_budget = restart_budget, .gradsync_exe = self,
      .mpirun = mpirun, .ssh_config = ssh_config, .iface = iface,
      .discover_every_s = discover_every, .commit_every = commit_every,
      .commit_every_s = commit_every_s, .stop = &serve_stop,
      .on_log = serve_log,
      .restart_penalty_s = restart_penalty > 0 ? restart_penalty : restart_penalty == 0 ? -1 : 0,
      .node_cooldown_s = cooldown, .fairness_window_s = fairness_window,
      .shares = cli_shares_get(), .net = net,
      .share_speeds = share_speeds, .round_log = round_log};
  char err[1024] = "";
  int rc = gs_cluster_serve(&c, err, sizeof err);
  if (rc == 2) cli_error("cluster serve", "%s", err);
  else if (rc != 0) cli_fail("cluster", "%s", err);
  free(pool);
  run_hosts_free(&hosts);
  return rc;
}

/* ---- keep, drain, down ---------------------------------------------------- */

static int cmd_keep(int argc, char **argv) {
  int attempt;
  if (argc < 5 || strcmp(argv[3], "--") != 0 || cli_parse_int(argv[2], 1, 1 << 30, &attempt)) {
    cli_error("cluster keep", "usage: gradsync cluster keep JOBDIR ATTEMPT -- PROGRAM ARGS "
              "(started by the manager)");
    return 2;
  }
  return gs_cluster_keep(argv[1], attempt, argv + 4);
}

/* Options common to the clients: --spool DIR, --json. Returns the index
 * of the first other argument, or -1 after an error. */
static int client_opts(const char *verb, int argc, char **argv, char *spool, size_t len,
                       int *json, int first) {
  default_spool(spool, len);
  int i = first;
  for (; i < argc; i++) {
    if (strcmp(argv[i], "--spool") == 0) {
      if (i + 1 >= argc || !*argv[i + 1]) {
        cli_error(verb, "option '--spool' needs a value");
        return -1;
      }
      snprintf(spool, len, "%s", argv[++i]);
    } else if (json && strcmp(argv[i], "--json") == 0) {
      *json = 1;
    } else if (strcmp(argv[i], "--") == 0) { /* the end of the options */
      i++;
      break;
    } else {
      break;
    }
  }
  return i;
}

static int cmd_drain(int argc, char **argv) {
  int drain = strcmp(argv[0], "drain") == 0;
  const char *verb = drain ? "cluster drain" : "cluster undrain";
  char spool[PATH_MAX], err[1024];
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: gradsync cluster %s [--spool DIR] NODE\n"
           "  %s\n"
           "  --spool DIR  the manager's spool (default $GRADSYNC_SPOOL, else\n"
           "               /tmp/gradsync-cluster-UID)\n"
           "  NODE         a node of its pool (gradsync cluster nodes lists them)\n",
           argv[0], drain ? "takes NODE out of the pool: its jobs shrink or requeue"
                          : "gives a drained NODE back to the pool (and ends its cool-down)");
    return 0;
  }
  int i = client_opts(verb, argc, argv, spool, sizeof spool, NULL, 1);
  if (i < 0) return 2;
  if (i == argc - 1 && argv[i][0] == '-') {
    cli_error(verb, "unknown option '%s' (usage: gradsync cluster %s [--spool DIR] NODE)",
              argv[i], argv[0]);
    return 2;
  }
  if (i != argc - 1) {
    cli_error(verb, "usage: gradsync cluster %s [--spool DIR] NODE", argv[0]);
    return 2;
  }
  if (gs_cluster_drain(spool, argv[i], drain, err, sizeof err) != 0) {
    cli_error(verb, "%s", err);
    return 2;
  }
  return 0;
}

static int cmd_down(int argc, char **argv) {
  char spool[PATH_MAX], dir[PATH_MAX + 16];
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: gradsync cluster down [--spool DIR] [--force]\n"
           "  removes the --emulated nodes a manager built in DIR/emulated; refused\n"
           "  while a manager serves the spool (stop it first: its jobs run there)\n"
           "  and while a job of the spool still runs (its keeper lives)\n"
           "  --spool DIR  the manager's spool (default $GRADSYNC_SPOOL, else\n"
           "               /tmp/gradsync-cluster-UID)\n"
           "  --force      remove them under running jobs too (they fail)\n");
    return 0;
  }
  /* --force anywhere; the rest as every client verb reads it */
  int force = 0, n = 0;
  for (int k = 0; k < argc; k++) {
    if (k > 0 && strcmp(argv[k], "--force") == 0) force = 1;
    else argv[n++] = argv[k]; /* (in place: n <= k) */
  }
  argc = n;
  int i = client_opts("cluster down", argc, argv, spool, sizeof spool, NULL, 1);
  if (i < 0) return 2;
  if (i != argc) {
    cli_error("cluster down", "unexpected argument '%s'", argv[i]);
    return 2;
  }
  if (snprintf(dir, sizeof dir, "%s/emulated", spool) >= (int)sizeof dir) return 2;
  /* Said as serve says it (the script's "names not found" read as a
   * failure of down, exit 1). */
  struct stat sst;
  if (stat(spool, &sst) != 0 || !S_ISDIR(sst.st_mode)) {
    cli_error("cluster down", "spool %s: %s", spool,
              stat(spool, &sst) != 0 ? "no such directory: no emulated nodes were built there"
                                     : "not a directory");
    return 2;
  }
  int mpid = 0;
  if (gs_cluster_manager_running(spool, &mpid)) {
    char who[32] = "";
    if (mpid > 0) snprintf(who, sizeof who, " (pid %d)", mpid);
    cli_error("cluster down", "a cluster manager%s serves %s (it holds %s/manager.lock): its "
              "nodes are in use; stop it first (SIGINT or SIGTERM), then run down", who, spool,
              spool);
    return 2;
  }
  /* A manager stopped with SIGTERM leaves its jobs running on the nodes. */
  int ids[16], nkept = force ? 0 : gs_cluster_jobs_kept(spool, ids, 16);
  if (nkept > 0) {
    char list[256] = "";
    size_t w = 0;
    for (int k = 0; k < nkept && k < 16; k++) {
      int c = snprintf(list + w, sizeof list - w, "%s%d", k ? ", " : "", ids[k]);
      if (c > 0 && (size_t)c < sizeof list - w) w += (size_t)c;
    }
    int many = nkept > 1;
    cli_error("cluster down", "job%s %s%s of %s still run%s on its nodes (%s keeper%s "
              "live%s): let %s end or cancel %s (a `cluster serve` on the spool adopts %s), or "
              "take the nodes down anyway with --force", many ? "s" : "", list,
              nkept > 16 ? ", ..." : "", spool, many ? "" : "s", many ? "their" : "its",
              many ? "s" : "", many ? "" : "s", many ? "them" : "it", many ? "them" : "it",
              many ? "them" : "it");
    return 2;
  }
  char script[PATH_MAX], pidfile[PATH_MAX + 32];
  snprintf(script, sizeof script, "%s/scripts/emulated-hosts.sh", GRADSYNC_SOURCE_DIR);
  /* --node-cpus' groups are named after node 0's sshd (emulated_cpus). */
  snprintf(pidfile, sizeof pidfile, "%s/sshd.0.pid", dir);
  int pid0 = 0;
  FILE *f = fopen(pidfile, "r");
  if (f && fscanf(f, "%d", &pid0) != 1) pid0 = 0;
  if (f) fclose(f);
  pid_t pid = fork();
  if (pid == 0) {
    execl(script, script, "down", dir, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (pid0 > 0) run_cpu_destroy(pid0);
  if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    cli_fail("cluster", "%s down %s failed (see above)", script, dir);
    return 1;
  }
  return 0;
}

static int cmd_nodes(int argc, char **argv);

int gs_cmd_cluster_manager(int argc, char **argv) {
  if (argc < 2) {
    cli_error("cluster", "missing the command (serve, nodes, drain, undrain or down)");
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    printf("usage: gradsync cluster serve ...        serve a pool of nodes to jobs\n"
           "       gradsync cluster nodes            the pool: each node's state and job\n"
           "       gradsync cluster drain NODE       take a node out (its jobs shrink)\n"
           "       gradsync cluster undrain NODE     give it back\n"
           "       gradsync cluster down             remove --emulated nodes\n"
           "and gradsync submit, jobs, cancel (docs/CLUSTER_MANAGER.md).\n");
    return 0;
  }
  if (strcmp(argv[1], "serve") == 0) return cmd_serve(argc - 1, argv + 1);
  if (strcmp(argv[1], "keep") == 0) return cmd_keep(argc - 1, argv + 1);
  if (strcmp(argv[1], "drain") == 0 || strcmp(argv[1], "undrain") == 0)
    return cmd_drain(argc - 1, argv + 1);
  if (strcmp(argv[1], "down") == 0) return cmd_down(argc - 1, argv + 1);
  if (strcmp(argv[1], "nodes") == 0) return cmd_nodes(argc - 1, argv + 1);
  cli_error("cluster", "unknown command '%s'", argv[1]);
  return 2;
}

/* ---- submit --------------------------------------------------------------- */

static void submit_usage(FILE *f) {
  fprintf(f,
      "usage: gradsync submit [--min N] [--max M] [--weight W] [--name NAME]\n"
      "                       [--user USER] [--account A] [--after ID[,ID...]]\n"
      "                       [--time LIMIT] [--spool DIR] -- TRAIN OPTIONS\n"
      "       gradsync submit [...] --exec -- PROGRAM ARGS\n\n"
      "Queues a job on the cluster manager serving the spool and prints its id.\n"
      "The job runs as gradsync train with TRAIN OPTIONS (the manager adds\n"
      "--checkpoint, --commit-every and --resume=auto where they are missing;\n"
      "an asynchronous --ps job commits at its epochs' ends instead), or\n"
      "with --exec as PROGRAM, which must commit, resume and stop with exit 3\n"
      "on SIGUSR1 by itself (in $GRADSYNC_ELASTIC_DIR, where a progress.json\n"
      "lets the manager measure it), on N to M whole nodes. A train job runs only on\n"
      "sizes with a worker beside its --ps servers and workers that divide its\n"
      "--global-batch; the manager narrows N:M to those.\n\n"
      "  --min N       fewest nodes (default 1; a job with --ps S: the fewest\n"
      "                that leave a worker beside its servers)\n"
      "  --max M       most nodes (default: --min)\n"
      "  --weight W    its share among its user's jobs in fair policies (default 1)\n"
      "  --name NAME   a name for gradsync jobs (default: train or the program)\n"
      "  --user USER   whose job, for the manager's per-user shares (default:\n"
      "                your login name)\n"
      "  --account A   the account it is charged to, for the manager's fair-share\n"
      "                tree (default: none; the user shares at the root); a\n"
      "                sub-account by its path, as science/physics/hep (at most\n"
      "                8 levels)\n"
      "  --after IDS   start only once each of these jobs (comma-separated ids,\n"
      "                at most 16) is done; cancelled if one fails or is\n"
      "                cancelled (Slurm's --dependency=afterok)\n"
      "  --time LIMIT  stop it once it has held nodes this long in all (state\n"
      "                timeout; its last commit is kept): Slurm's formats,\n"
      "                M, M:S, H:M:S, D-H, D-H:M or D-H:M:S (a bare number is\n"
      "                minutes; minutes and seconds after the first field 0 to\n"
      "                59, hours after D- 0 to 23)\n");
}

/* An option given before (*seen already set): refused, as "given more
 * than once". 1 when refused. */
static int repeated(const char *verb, const char *opt, int *seen) {
  if ((*seen)++ == 0) return 0;
  cli_error(verb, "option %s given more than once", opt);
  return 1;
}

/* Whether text has a control character (below 0x20, or DEL). */
static int has_control(const char *text) {
  for (const unsigned char *p = (const unsigned char *)text; *p; p++)
    if (*p < 0x20 || *p == 0x7f) return 1;
  return 0;
}

/* A time limit in Slurm's formats (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S)
 * into seconds, above 0: digits only, and as Slurm, minutes and seconds
 * after the first field below 60 and hours below 24 after D-. 0; -1 when
 * malformed; -2 with why a field is out of range in why. */
static int parse_time_limit(const char *text, double *secs, char *why, size_t whylen) {
  static const char *const unit[] = {"days", "hours", "minutes", "seconds"};
  long v[4] = {0, 0, 0, 0};
  int n = 0, has_days = 0;
  const char *p = text;
  while (n < 4) {
    if (!isdigit((unsigned char)*p)) return -1;
    char *end;
    errno = 0;
    long x = strtol(p, &end, 10);
    if (errno || x > 1000000) {
      snprintf(why, whylen, "a field above 1000000 is too large");
      return -2;
    }
    v[n++] = x;
    p = end;
    if (*p == '-' && n == 1) {
      has_days = 1;
      p++;
    } else if (*p == ':') {
      p++;
    } else {
      break;
    }
  }
  if (*p || n > 3 + has_days) return -1;
  /* The first field's unit (D-..., M, M:S or H:M:S); it alone is unbounded. */
  int first = has_days ? 0 : n < 3 ? 2 : 1;
  if (has_days && v[0] > 365) {
    snprintf(why, whylen, "days must be 0 to 365");
    return -2;
  }
  for (int k = 1; k < n; k++) {
    int u = first + k;
    long top = u == 1 ? 23 : 59;
    if (v[k] > top) {
      snprintf(why, whylen, "%s must be 0 to %ld", unit[u], top);
      return -2;
    }
  }
  double s = 0;
  for (int k = 0; k < n; k++) {
    static const double mul[] = {86400, 3600, 60, 1};
    s += v[k] * mul[first + k];
  }
  if (!(s > 0)) return -1;
  if (s > GS_CLUSTER_TIME_LIMIT_MAX_S) {
    snprintf(why, whylen, "%.0f days in all; a limit is at most %.0f days", s / 86400,
             GS_CLUSTER_TIME_LIMIT_MAX_S / 86400);
    return -2;
  }
  *secs = s;
  return 0;
}

/* A number or a string member of a parsed snapshot, else dflt or "". */
static double jnum(const cJSON *o, const char *k, double dflt) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}

static const char *jstr(const cJSON *o, const char *k) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(x) ? x->valuestring : "";
}

/* The job of id `id` in a jobs.json's "jobs" array, or NULL. */
static const cJSON *job_by_id(const cJSON *jobs, int id) {
  const cJSON *j, *found = NULL;
  cJSON_ArrayForEach(j, jobs) if ((int)jnum(j, "id", 0) == id) found = j;
  return found;
}

/* "3,5,8" into after[] (*n of them): ids from 1, none twice, at most
 * GS_CLUSTER_AFTER_MAX. 0, or -1. */
static int parse_after(const char *text, int *after, int *n) {
  *n = 0;
  const char *p = text;
  while (*p) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < 1 || v > INT_MAX || (*end && *end != ',') ||
        *n == GS_CLUSTER_AFTER_MAX)
      return -1;
    for (int k = 0; k < *n; k++)
      if (after[k] == v) return -1;
    after[(*n)++] = (int)v;
    p = *end ? end + 1 : end;
    if (*end && !*p) return -1; /* a trailing comma */
  }
  return *n > 0 ? 0 : -1;
}

/* gradsync train's checks of a job's options (cli_check_train_args), as
 * the manager will run them: with a --checkpoint of the job's own where
 * they name none (so that --commit-every or --resume=auto alone pass). A
 * plain --resume without --checkpoint is refused: the job's own directory
 * is empty at its first launch, and the manager resumes its jobs itself. */
static int check_train_args(char **args, int nargs, char *msg, size_t len) {
  int has_ckpt = 0, plain_resume = 0;
  for (int i = 0; i < nargs; i++) {
    has_ckpt |= strcmp(args[i], "--checkpoint") == 0 || strncmp(args[i], "--checkpoint=", 13) == 0;
    plain_resume |= strcmp(args[i], "--resume") == 0;
  }
  if (plain_resume && !has_ckpt) {
    snprintf(msg, len, "--resume: a new job has no checkpoint to resume from, and the manager "
                       "resumes its jobs from their own commits (it adds --resume=auto): leave "
                       "--resume out, or give --checkpoint DIR holding the checkpoint to start "
                       "from");
    return 2;
  }
  char **v = calloc((size_t)nargs + 3, sizeof *v);
  if (!v) return 0;
  for (int i = 0; i < nargs; i++) v[i] = args[i];
  int n = nargs;
  if (!has_ckpt) {
    v[n++] = "--checkpoint";
    v[n++] = "job-checkpoint";
  }
  int rc = cli_check_train_args(v, n, msg, len);
  free(v);
  return rc;
}

int cmd_submit(int argc, char **argv) {
  int min = 1, max = 0, exec = 0;
  double weight = 1;
  const char *name = NULL, *user = NULL, *account = NULL;
  int after[GS_CLUSTER_AFTER_MAX], nafter = 0, seen_after = 0, seen_time = 0;
  double time_limit = 0;
  char spool[PATH_MAX];
  default_spool(spool, sizeof spool);
  int i = 1, dashes = -1;
  int seen_min = 0, seen_max = 0, seen_w = 0, seen_name = 0, seen_spool = 0;
  int seen_user = 0, seen_account = 0;
  for (; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (strcmp(a, "--") == 0) {
      dashes = i;
      break;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      submit_usage(stdout);
      return 0;
    }
    if (strcmp(a, "--exec") == 0) {
      if (repeated("submit", a, &exec)) return 2;
    } else if (strcmp(a, "--min") == 0 || strcmp(a, "--max") == 0) {
      int *v = a[3] == 'i' ? &min : &max;
      int *seen = a[3] == 'i' ? &seen_min : &seen_max;
      if (repeated("submit", a, seen)) return 2;
      if (!has || cli_parse_int(argv[i + 1], 1, GS_CLUSTER_JOB_NODES_MAX, v) != 0) {
        cli_error("submit", "%s needs a node count from 1 to %d (got '%s')", a,
                  GS_CLUSTER_JOB_NODES_MAX, has ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--weight") == 0) {
      if (repeated("submit", a, &seen_w)) return 2;
      if (!has ||
          cli_parse_double(argv[i + 1], GS_CLUSTER_WEIGHT_MIN, GS_CLUSTER_WEIGHT_MAX, &weight)) {
        cli_error("submit", "--weight needs one number from %g to %g (got '%s')",
                  GS_CLUSTER_WEIGHT_MIN, GS_CLUSTER_WEIGHT_MAX, has ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--name") == 0) {
      if (repeated("submit", a, &seen_name)) return 2;
      if (!has || !*argv[i + 1] || strlen(argv[i + 1]) >= GS_CLUSTER_NAME_MAX) {
        cli_error("submit", "--name needs one name of 1 to %d characters",
                  GS_CLUSTER_NAME_MAX - 1);
        return 2;
      }
      if (has_control(argv[i + 1])) {
        cli_error("submit", "--name: the name has a control character (a tab, a newline...)");
        return 2;
      }
      name = argv[++i];
    } else if (strcmp(a, "--account") == 0) {
      char why[160];
      if (repeated("submit", a, &seen_account)) return 2;
      if (!has || !gs_cluster_account_path_ok(argv[i + 1], why, sizeof why)) {
        cli_error("submit", "--account needs one account of 1 to %d letters, digits or ._@-, "
                  "or a sub-account's path of at most %d of them, '/'-separated, as "
                  "science/physics/hep (got '%s'%s%s)", GS_CLUSTER_NAME_MAX - 1,
                  GS_CLUSTER_ACCOUNT_LEVELS, has ? argv[i + 1] : "", has ? ": " : "",
                  has ? why : "");
        return 2;
      }
      account = argv[++i];
    } else if (strcmp(a, "--time") == 0) {
      if (repeated("submit", a, &seen_time)) return 2;
      char why[64] = "";
      int t = has ? parse_time_limit(argv[i + 1], &time_limit, why, sizeof why) : -1;
      if (t == -2) {
        cli_error("submit", "--time %s: %s", argv[i + 1], why);
        return 2;
      }
      if (t != 0) {
        cli_error("submit", "--time needs one time limit above 0 as M, M:S, H:M:S, D-H, D-H:M "
                  "or D-H:M:S (got '%s')", has ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--after") == 0) {
      if (repeated("submit", a, &seen_after)) return 2;
      if (!has || parse_after(argv[i + 1], after, &nafter) != 0) {
        cli_error("submit", "--after needs job ids from 1, comma-separated, none twice, at "
                  "most %d (got '%s')", GS_CLUSTER_AFTER_MAX, has ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--user") == 0) {
      if (repeated("submit", a, &seen_user)) return 2;
      if (!has || !gs_cluster_name_ok(argv[i + 1])) {
        cli_error("submit", "--user needs one user of 1 to %d letters, digits or ._@- (got '%s')",
                  GS_CLUSTER_NAME_MAX - 1, has ? argv[i + 1] : "");
        return 2;
      }
      user = argv[++i];
    } else if (strcmp(a, "--spool") == 0) {
      if (repeated("submit", a, &seen_spool)) return 2;
      if (!has || !*argv[i + 1]) {
        cli_error("submit", "--spool needs one directory");
        return 2;
      }
      snprintf(spool, sizeof spool, "%s", argv[++i]);
    } else {
      cli_error("submit", "unknown option '%s' (the job's own options go after '--')", a);
      return 2;
    }
  }
  if (dashes < 0 || dashes == argc - 1) {
    cli_error("submit", "missing the job after '--' (gradsync train's options, or --exec "
              "PROGRAM ARGS)");
    return 2;
  }
  if (!seen_max) max = min;
  if (min > max) {
    cli_error("submit", "--min %d is more than --max %d", min, max);
    return 2;
  }
  char err[1024], policy[64];
  int pool, slots;
  if (gs_cluster_pool(spool, &pool, &slots, policy, sizeof policy, err, sizeof err) != 0) {
    cli_error("submit", "%s", err);
    return 2;
  }
  if (min > pool) {
    cli_error("submit", "--min %d is more than the pool's %d node%s: the job could never "
              "start", min, pool, pool == 1 ? "" : "s");
    return 2;
  }
  /* The jobs it runs after must have been submitted (ids only grow); the
   * manager cancels it if one of them fails. */
  int next = nafter > 0 ? gs_cluster_next_id(spool) : 1;
  for (int k = 0; k < nafter; k++)
    if (next < 0 || after[k] >= next) {
      cli_error("submit", "--after %d: no job %d on the manager of %s (the last submitted "
                "is %d)", after[k], after[k], spool, next - 1);
      return 2;
    }
  /* ... and not have ended other than done: the manager would cancel the
   * job at once (as Slurm refuses a dependency that can never be met). */
  if (nafter > 0) {
    char *text = gs_cluster_jobs_json(spool, err, sizeof err);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *jobs = root ? cJSON_GetObjectItemCaseSensitive(root, "jobs") : NULL;
    int bad = 0;
    for (int k = 0; k < nafter && !bad; k++) {
      const char *state = jstr(job_by_id(jobs, after[k]), "state");
      if (gs_cluster_state_index(state) > GS_CLUSTER_FIRST_ENDED) { /* past done */
        cli_error("submit", "--after %d: job %d has ended (%s): a job after it would be "
                  "cancelled at once", after[k], after[k], state);
        bad = 1;
      }
    }
    cJSON_Delete(root);
    if (bad) return 2;
  }
  char who[64];
  gs_cluster_user_name(user, who, sizeof who);
  int lim = gs_cluster_pool_user_limit(spool, who);
  if (lim > 0 && min > lim) {
    cli_error("submit", "--min %d is more than user %s's limit of %d node%s (cluster serve "
              "--user-limit): the job could never start", min, who, lim, lim == 1 ? "" : "s");
    return 2;
  }
  /* the smallest limit on its account's path: its own or an ancestor's */
  char alim_at[GS_CLUSTER_ACCOUNT_MAX];
  int alim = account ? gs_cluster_pool_account_limit(spool, account, alim_at, sizeof alim_at) : 0;
  if (alim > 0 && min > alim) {
    cli_error("submit", "--min %d is more than account %s's limit of %d node%s (cluster serve "
              "--account-limit)%s%s: the job could never start", min, alim_at, alim,
              alim == 1 ? "" : "s", strcmp(alim_at, account) ? ", which holds " : "",
              strcmp(alim_at, account) ? account : "");
    return 2;
  }
  char **args = argv + dashes + 1;
  int nargs = argc - dashes - 1;
  if (exec) {
    char found[4096];
    if (!strchr(args[0], '/') && cli_find_exe(args[0], found, sizeof found) != 0) {
      /* As execvp would find it (the supervisor gets the name). */
      cli_error("submit", "--exec %s: no such program on PATH", args[0]);
      return 2;
    } else if (strchr(args[0], '/') && access(args[0], X_OK) != 0) {
      cli_error("submit", "--exec %s: not an executable file: %s", args[0], strerror(errno));
      return 2;
    }
  } else {
    if (strcmp(args[0], "train") == 0 || strstr(args[0], "gradsync")) {
      cli_error("submit", "give gradsync train's options after '--', not a program ('%s'); "
                "--exec runs a program", args[0]);
      return 2;
    }
    /* The job runs only on sizes with a worker beside its --ps servers and
     * workers that divide its --global-batch (gs_elastic_size_runs). */
    long gb = 0, ps = 0;
    const char *v = cli_option_value(args, nargs, "--global-batch");
    if (v) cli_parse_long(v, 1, 1L << 40, &gb);
    if ((v = cli_option_value(args, nargs, "--ps")) != NULL) cli_parse_long(v, 0, 65535, &ps);
    /* A DLRM job with --plan FILE runs on the ranks the plan was made for:
     * that many nodes' slots, whatever --min and --max say (relaunched at
     * another size it would exit 2). */
    char pwhy[600];
    int pr = cli_dlrm_plan_ranks(args, nargs, pwhy, sizeof pwhy);
    if (pr < 0) {
      cli_error("submit", "the job's %s", pwhy);
      return 2;
    }
    if (pr > 0) {
      int nodes = pr / slots;
      if (pr % slots != 0 || nodes > pool || (seen_min && nodes < min) ||
          (seen_max && nodes > max)) {
        cli_error("submit", "the job's --plan is made for %d ranks: no size of %d to %d nodes "
                  "(%d rank%s a node, a pool of %d) gives that (--sharding instead plans anew "
                  "at each size)", pr, seen_min ? min : 1, seen_max ? max : pool, slots,
                  slots == 1 ? "" : "s", pool);
        return 2;
      }
      if ((seen_min || seen_max) && min != max)
        fprintf(stderr, "gradsync submit: note: the job runs at %d node%s only, not %d to %d: "
                "its --plan is made for %d ranks\n", nodes, nodes == 1 ? "" : "s", min, max,
                pr);
      min = max = nodes;
      seen_min = seen_max = 1;
    }
    /* Without --min, the smallest size that runs (and --max that too). */
    if (!seen_min) {
      while (min < pool && !gs_elastic_size_runs(min * slots, (int)ps, gb)) min++;
      if (!seen_max) max = min;
    }
    /* Without --global-batch or --scale-lr linear it runs at one size, the
     * largest of its range that the pool holds (gs_elastic_size_range; the
     * manager narrows it alike). */
    v = cli_option_value(args, nargs, "--scale-lr");
    int resizable = gs_elastic_resizable(gb, v != NULL && strcmp(v, "linear") == 0);
    int lo, hi, rlo, rhi;
    int fits = gs_elastic_size_range(min, max < pool ? max : pool, slots, pool, (int)ps, gb,
                                     resizable, &lo, &hi) == 0;
    /* Said when one size narrows more than the workers' rule alone. */
    if (fits && !resizable &&
        gs_elastic_size_range(min, max, slots, 0, (int)ps, gb, 1, &rlo, &rhi) == 0 &&
        (lo != rlo || hi != rhi))
      fprintf(stderr, "gradsync submit: note: the job runs at %d node%s only, not %d to %d: "
              "%s\n", hi, hi == 1 ? "" : "s", min, max, gs_elastic_one_size_why(
                  ps > 0 || cli_option_is(args, nargs, "--model", "dlrm")));
    if (!fits) {
      char why[160];
      if (ps > 0 && gb > 0)
        snprintf(why, sizeof why, "leaves workers beside the job's --ps %ld server%s that "
                 "divide its --global-batch %ld", ps, ps == 1 ? "" : "s", gb);
      else if (ps > 0)
        snprintf(why, sizeof why, "leaves a worker beside the job's --ps %ld server%s", ps,
                 ps == 1 ? "" : "s");
      else
        snprintf(why, sizeof why, "divides the job's --global-batch %ld", gb);
      cli_error("submit", "no size from --min %d to --max %d nodes (%d rank%s a node) %s",
                min, max, slots, slots == 1 ? "" : "s", why);
      return 2;
    }
    char msg[1024];
    int rc = check_train_args(args, nargs, msg, sizeof msg);
    if (rc != 0) {
      char clean[1024];
      cli_error("submit", "the job's options: %s", cli_clean_text(clean, sizeof clean, msg));
      return 2;
    }
  }
  gs_cluster_submission s = {.name = name, .user = user, .account = account,
                             .min_nodes = min, .max_nodes = max,
                             .weight = weight, .exec = exec, .argv = args,
                             .after = after, .nafter = nafter, .time_limit_s = time_limit};
  int id;
  if (gs_cluster_submit(spool, &s, &id, err, sizeof err) != 0) {
    cli_fail("submit", "%s", err);
    return 1;
  }
  printf("%d\n", id);
  return 0;
}

/* ---- jobs, cancel ------------------------------------------------------- */


/* Seconds from a to b, never negative (another host's clock may be ahead). */
static double span(double a, double b) { return b > a ? b - a : 0; }

/* Appends to buf (cap bytes, *w used): the first item without sep, the
 * rest after it; what does not fit is left out whole. */
static void append(char *buf, size_t cap, size_t *w, const char *sep, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void append(char *buf, size_t cap, size_t *w, const char *sep, const char *fmt, ...) {
  char item[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(item, sizeof item, fmt, ap);
  va_end(ap);
  int k = snprintf(buf + *w, cap - *w, "%s%s", *w ? sep : "", item);
  if (k > 0 && (size_t)k < cap - *w) *w += (size_t)k;
  else buf[*w] = '\0';
}

/* The listing verbs' common part (jobs, cluster nodes): --help (help,
 * *rc 0), [--spool DIR] [--json] and nothing else, then the manager's
 * snapshot parsed. NULL with *rc 2 (after the message) when the options or
 * the spool are wrong, 1 when the snapshot cannot be read. */
static cJSON *listing(const char *verb, const char *help, int argc, char **argv, int *json,
                      int *rc) {
  char spool[PATH_MAX], err[1024];
  *json = 0;
  *rc = 2;
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    fputs(help, stdout);
    *rc = 0;
    return NULL;
  }
  int i = client_opts(verb, argc, argv, spool, sizeof spool, json, 1);
  if (i < 0) return NULL;
  if (i != argc) {
    cli_error(verb, "unexpected argument '%s'", argv[i]);
    return NULL;
  }
  char *text = gs_cluster_jobs_json(spool, err, sizeof err);
  if (!text) {
    cli_error(verb, "%s", err);
    return NULL;
  }
  cJSON *root = cJSON_Parse(text);
  free(text);
  if (!root) {
    cli_fail(verb, "%s: the manager's jobs.json is not JSON", spool);
    *rc = 1;
  }
  return root;
}

/* "queued,running" into want[] (one flag a state,
 * gs_cluster_state_names); "" is none. 0, or -1. */
static int parse_states(const char *text, int *want) {
  const char *p = text;
  if (!*p) return -1;
  while (*p) {
    char name[16];
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof name) return -1;
    memcpy(name, p, len);
    name[len] = '\0';
    int k = gs_cluster_state_index(name);
    if (k < 0) return -1;
    want[k] = 1;
    p += len;
    if (*p == ',' && !*++p) return -1;
  }
  return 0;
}

/* A job's USER column: USER, or USER/ACCOUNT (its account's full path)
 * when it is charged to one, cleaned of control characters. */
static const char *job_who(const cJSON *j, char *who, size_t len) {
  char uclean[GS_CLUSTER_NAME_MAX + 16], aclean[GS_CLUSTER_ACCOUNT_MAX + 16];
  const char *acct = jstr(j, "account");
  cli_clean_text(uclean, sizeof uclean, jstr(j, "user"));
  if (acct && *acct)
    snprintf(who, len, "%s/%s", uclean, cli_clean_text(aclean, sizeof aclean, acct));
  else snprintf(who, len, "%s", uclean);
  return who;
}

/* Whether job j is listed under --user and --state (want NULL: any state). */
static int job_listed(const cJSON *j, const char *only_user, const int *want) {
  if (only_user && strcmp(jstr(j, "user"), only_user) != 0) return 0;
  if (want) {
    int k = gs_cluster_state_index(jstr(j, "state"));
    if (k < 0 || !want[k]) return 0;
  }
  return 1;
}

/* gradsync jobs --accounts: the listed jobs' usage by account
 * (cli_owner_table), from the snapshot's node_s and fair_node_s. */
static int accounts_report(const cJSON *root, const char *only_user, const int *want,
                           int json) {
  const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(root, "jobs"), *j;
  int n = 0;
  cJSON_ArrayForEach(j, jobs) n += job_listed(j, only_user, want);
  const char **name = gs_calloc((size_t)n * 2 + 1, sizeof *name);
  double *fig = gs_calloc((size_t)n * 4 + 1, sizeof *fig);
  int *nodes = gs_calloc((size_t)n + 1, sizeof *nodes);
  if (!name || !fig || !nodes) {
    gs_free(name);
    gs_free(fig);
    gs_free(nodes);
    cli_fail("jobs", "out of memory for %d jobs' accounts", n);
    return 1;
  }
  int q = 0;
  cJSON_ArrayForEach(j, jobs) {
    if (!job_listed(j, only_user, want)) continue;
    name[q] = jstr(j, "user");
    name[n + q] = jstr(j, "account");
    fig[q] = jnum(j, "node_s", 0);
    fig[n + q] = jnum(j, "fair_node_s", 0);
    fig[3 * n + q] = jnum(j, "usage_node_s", 0);
    double sub = jnum(j, "submit_time", 0), en = jnum(j, "end_time", 0);
    fig[2 * n + q] = strcmp(jstr(j, "state"), "done") == 0 && en > 0 ? span(sub, en) : -1;
    const char *st = jstr(j, "state");
    nodes[q] = strcmp(st, "running") == 0 || strcmp(st, "resizing") == 0
                   ? (int)jnum(j, "size", 0) : -1;
    q++;
  }
  cli_owner_jobs oj = {.n = n, .user = name, .account = name + n, .node_s = fig,
                       .fair_s = fig + n, .jct_s = fig + 2 * n, .nodes_now = nodes,
                       /* with --usage-halflife, the decayed usage too */
                       .usage_s = cJSON_GetObjectItemCaseSensitive(root, "usage_halflife_s")
                                      ? fig + 3 * n
                                      : NULL};
  char title[128];
  const cJSON *pol = cJSON_GetObjectItemCaseSensitive(root, "policy");
  const cJSON *win = cJSON_GetObjectItemCaseSensitive(root, "fairness_window_s");
  int len = snprintf(title, sizeof title, "policy %.60s",
                     cJSON_IsString(pol) ? pol->valuestring : "?");
  if (cJSON_IsNumber(win) && win->valuedouble > 0 && len > 0 && (size_t)len < sizeof title)
    snprintf(title + len, sizeof title - (size_t)len, ", fairness window %g s", win->valuedouble);
  cJSON *o = json ? cJSON_CreateObject() : NULL;
  int rc = cli_owner_table(&oj, o, title);
  if (rc == 0 && o) {
    cli_print_json(stdout, o);
    o = NULL;
  }
  cJSON_Delete(o);
  gs_free(name);
  gs_free(fig);
  gs_free(nodes);
  if (rc != 0) cli_fail("jobs", "out of memory for %d jobs' accounts", n);
  return rc != 0;
}

int cmd_jobs(int argc, char **argv) {
  int json, rc;
  /* squeue's filters, --user U and --state S[,S...], taken out before the
   * listing's own options */
  const char *only_user = NULL;
  int want[GS_CLUSTER_NSTATES] = {0}, any_state = 0, accounts = 0;
  char **rest = gs_calloc((size_t)argc + 1, sizeof *rest);
  if (!rest) return 1;
  int nrest = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (i > 0 && strcmp(a, "--accounts") == 0) {
      if (accounts) {
        cli_error("jobs", "option --accounts given more than once");
        gs_free(rest);
        return 2;
      }
      accounts = 1;
      continue;
    }
    if (i > 0 && (strcmp(a, "--user") == 0 || strcmp(a, "--state") == 0)) {
      int is_user = a[2] == 'u', seen = is_user ? only_user != NULL : any_state;
      const char *v = i + 1 < argc ? argv[i + 1] : NULL;
      if (seen) {
        cli_error("jobs", "option %s given more than once", a);
        gs_free(rest);
        return 2;
      }
      if (!v || (is_user ? !gs_cluster_name_ok(v) : parse_states(v, want) != 0)) {
        if (is_user)
          cli_error("jobs", "--user needs one user of 1 to %d letters, digits or ._@- (got "
                    "'%s')", GS_CLUSTER_NAME_MAX - 1, v ? v : "");
        else
          cli_error("jobs", "--state needs states from queued, running, resizing, done, "
                    "failed, cancelled and timeout, comma-separated (got '%s')", v ? v : "");
        gs_free(rest);
        return 2;
      }
      if (is_user) only_user = v;
      else any_state = 1;
      i++;
      continue;
    }
    rest[nrest++] = argv[i];
  }
  cJSON *root = listing("jobs",
      "usage: gradsync jobs [--spool DIR] [--json] [--user USER] [--state S[,S...]]\n"
      "                     [--accounts]\n\n"
      "The cluster manager's jobs: id, name, user, state (queued, running,\n"
      "resizing, done, failed, cancelled, timeout), size in nodes, progress, resizes,\n"
      "restarts, what a resize cost it (the seconds from the stop request to its\n"
      "training again, measured from each resize's relaunch's first two\n"
      "commits: the policies' price of resizing it again), the samples per\n"
      "second measured on each size it ran at, and times; --json: one JSON\n"
      "object a job. --user and --state list only that user's jobs and jobs in\n"
      "those states (squeue's -u and -t).\n\n"
      "--accounts: the usage by account instead (sshare's and sreport's view):\n"
      "per account (per user for jobs charged to none) of the jobs listed, its\n"
      "jobs, those running and the nodes they hold, the node-hours its jobs'\n"
      "partitions held and their part of all held, the node-hours of its fair\n"
      "share while its jobs were queued or running (the weighted max-min share\n"
      "of the manager's rounds under serve's --user-share, --account-share and\n"
      "limits) and their part, and its done jobs' mean completion time.\n",
      nrest, rest, &json, &rc);
  gs_free(rest);
  if (!root) return rc;
  if (accounts) {
    rc = accounts_report(root, only_user, any_state ? want : NULL, json);
    cJSON_Delete(root);
    return rc;
  }
  const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(root, "jobs");
  const cJSON *j;
  double now = gs_wall_now(); /* to the ns: time() would put now below a start just stamped */
  /* With no manager serving, the states are its last snapshot's: the
   * times run to that snapshot, not to now (a job shown running may have
   * ended since; a manager started on the spool finds out). */
  int served = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "served"));
  double snap = jnum(root, "time", 0), stale = 0;
  int active = 0;
  if (!served && snap > 0) {
    stale = span(snap, now);
    now = snap;
  }
  /* The USER column (USER/ACCOUNT, the account's full path) as wide as its
   * widest entry, at least 10. */
  int who_w = 10;
  cJSON_ArrayForEach(j, jobs) {
    char who[GS_CLUSTER_NAME_MAX + GS_CLUSTER_ACCOUNT_MAX + 2];
    if (!job_listed(j, only_user, any_state ? want : NULL)) continue;
    int len = cli_text_width(job_who(j, who, sizeof who));
    if (len > who_w) who_w = len;
  }
  if (!json)
    printf("%4s  %-14s %-*s %-9s %4s %5s %8s %7s %8s %9s %7s %7s  %-18s %s\n", "ID", "NAME",
           who_w, "USER", "STATE", "SIZE", "MIN:MAX", "PROGRESS", "RESIZES", "RESTARTS",
           "RESTART_S", "WAIT_S", "RUN_S", "SAMPLES/S BY NODES", "NODES / MESSAGE");
  cJSON_ArrayForEach(j, jobs) {
    if (!job_listed(j, only_user, any_state ? want : NULL)) continue;
    if (json) {
      cli_print_json(stdout, cJSON_Duplicate(j, 1));
      continue;
    }
    double sub = jnum(j, "submit_time", 0), st = jnum(j, "start_time", 0),
           en = jnum(j, "end_time", 0), prog = jnum(j, "progress", -1);
    char mm[24], pr[16], wait[16], run[16], clean[300];
    snprintf(mm, sizeof mm, "%.0f:%.0f", jnum(j, "min", 0), jnum(j, "max", 0));
    if (prog >= 0) snprintf(pr, sizeof pr, "%.0f%%", 100 * prog);
    else snprintf(pr, sizeof pr, "-");
    if (sub > 0) snprintf(wait, sizeof wait, "%.0f", span(sub, st > 0 ? st : en > 0 ? en : now));
    else snprintf(wait, sizeof wait, "-");
    if (st > 0) snprintf(run, sizeof run, "%.0f", span(st, en > 0 ? en : now));
    else snprintf(run, sizeof run, "-");
    char nodes[256] = "";
    const cJSON *n, *arr = cJSON_GetObjectItemCaseSensitive(j, "nodes");
    size_t w = 0;
    cJSON_ArrayForEach(n, arr)
      if (cJSON_IsString(n)) append(nodes, sizeof nodes, &w, ",", "%s", n->valuestring);
    /* measured speeds, "1:512 2:890" */
    char speed[64] = "-";
    const cJSON *sp, *speeds = cJSON_GetObjectItemCaseSensitive(j, "speed");
    w = 0;
    cJSON_ArrayForEach(sp, speeds)
      if (cJSON_IsNumber(sp) && sp->string)
        append(speed, sizeof speed, &w, " ", "%s:%.0f", sp->string, sp->valuedouble);
    const char *state = jstr(j, "state");
    const char *msg = jstr(j, "message");
    int si = gs_cluster_state_index(state);
    active |= si > 0 && si < GS_CLUSTER_FIRST_ENDED; /* running or resizing */
    char rs[16] = "-";
    /* measured, else "~P": what the policies charge until then */
    if (jnum(j, "restart_s", -1) >= 0) snprintf(rs, sizeof rs, "%.1f", jnum(j, "restart_s", 0));
    else if (jnum(j, "restart_price_s", -1) >= 0)
      snprintf(rs, sizeof rs, "~%.1f", jnum(j, "restart_price_s", 0));
    char who[GS_CLUSTER_NAME_MAX + GS_CLUSTER_ACCOUNT_MAX + 2], whoc[4 * sizeof who];
    job_who(j, who, sizeof who);
    printf("%4.0f  %s %s %-9s %4.0f %7s %8s %7.0f %8.0f %9s %7s %7s  %-18s %s\n",
           jnum(j, "id", 0), cli_cell(clean, sizeof clean, jstr(j, "name"), 14),
           cli_cell(whoc, sizeof whoc, who, who_w), state,
           jnum(j, "size", 0), mm, pr, jnum(j, "resizes", 0), jnum(j, "restarts", 0), rs, wait,
           run, speed, nodes[0] ? nodes : msg);
  }
  if (!json && !served && active)
    fprintf(stderr, "gradsync jobs: note: no manager serves this spool now: the states and "
            "times are as of its last snapshot, %.0f s ago (a manager started on the spool "
            "finds its jobs again)\n", stale);
  cJSON_Delete(root);
  return 0;
}

/* gradsync cluster nodes: the pool as the manager sees it (sinfo's part). */
static int cmd_nodes(int argc, char **argv) {
  int json, rc;
  cJSON *root = listing("cluster nodes",
      "usage: gradsync cluster nodes [--spool DIR] [--json]\n\n"
      "The manager's pool: each node's state (up; down: lost, its ssh check\n"
      "fails; cooling: back from being lost, no job on it until its cool-down\n"
      "ends; drained), its slots, the job it belongs to and its losses within\n"
      "the hour; --json: one JSON object a node.\n", argc, argv, &json, &rc);
  if (!root) return rc;
  const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
  double now = gs_wall_now();
  if (!json) printf("%-24s %-8s %5s %5s %6s %s\n", "NODE", "STATE", "SLOTS", "JOB", "LOSSES",
                    "COOL_S");
  const cJSON *n;
  cJSON_ArrayForEach(n, nodes) {
    if (json) {
      cli_print_json(stdout, cJSON_Duplicate(n, 1));
      continue;
    }
    char job[16] = "-", cool[16] = "-", clean[300];
    if (jnum(n, "job", 0) > 0) snprintf(job, sizeof job, "%.0f", jnum(n, "job", 0));
    double until = jnum(n, "cool_until", 0);
    if (until > 0) snprintf(cool, sizeof cool, "%.0f", until > now ? until - now : 0);
    /* At least 24 characters wide, a longer name whole. */
    int pad = 24 - cli_text_width(cli_clean_text(clean, sizeof clean, jstr(n, "name")));
    printf("%s%*s %-8s %5.0f %5s %6.0f %s\n", clean, pad > 0 ? pad : 0, "",
           jstr(n, "state"), jnum(n, "slots", 1), job, jnum(n, "losses", 0), cool);
  }
  cJSON_Delete(root);
  return 0;
}

int cmd_cancel(int argc, char **argv) {
  char spool[PATH_MAX], err[1024];
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: gradsync cancel [--spool DIR] [--] ID...\n\n"
           "Cancels jobs: a queued job at once, a running one by stopping its ranks.\n"
           "With no manager serving the spool the request waits until one does (said\n"
           "on stderr; exit 0).\n");
    return 0;
  }
  int i = client_opts("cancel", argc, argv, spool, sizeof spool, NULL, 1);
  if (i < 0) return 2;
  if (i == argc) {
    cli_error("cancel", "missing the job id");
    return 2;
  }
  char *text = gs_cluster_jobs_json(spool, err, sizeof err);
  if (!text) {
    cli_error("cancel", "%s", err);
    return 2;
  }
  cJSON *root = cJSON_Parse(text);
  free(text);
  const cJSON *jobs = root ? cJSON_GetObjectItemCaseSensitive(root, "jobs") : NULL;
  /* Every id checked before any job is cancelled: a usage error cancels
   * nothing. */
  int rc = 0;
  for (int k = i; k < argc; k++) {
    int id;
    if (cli_parse_int(argv[k], 1, 1 << 30, &id) != 0) {
      cli_error("cancel", "'%s' is not a job id (a whole number from 1)", argv[k]);
      rc = 2;
      continue;
    }
    if (!job_by_id(jobs, id)) {
      cli_error("cancel", "no job %d on the manager of %s", id, spool);
      rc = 2;
    }
  }
  if (rc) {
    fprintf(stderr, "gradsync cancel: nothing cancelled\n");
    cJSON_Delete(root);
    return rc;
  }
  for (; i < argc; i++) {
    int id = 0;
    (void)cli_parse_int(argv[i], 1, 1 << 30, &id); /* checked above */
    const char *state = jstr(job_by_id(jobs, id), "state");
    if (gs_cluster_state_index(state) >= GS_CLUSTER_FIRST_ENDED) {
      cli_fail("cancel", "job %d has already ended (%s)", id, state);
      if (!rc) rc = 1;
      continue;
    }
    if (gs_cluster_cancel(spool, id, err, sizeof err) != 0) {
      cli_fail("cancel", "%s", err);
      rc = 1;
    } else if (!gs_cluster_manager_running(spool, NULL)) {
      /* A stopped manager's jobs keep running: the request waits. */
      fprintf(stderr, "gradsync cancel: note: no manager serves %s now: the cancel of job %d "
              "waits in %s/incoming until one does\n", spool, id, spool);
    }
  }
  cJSON_Delete(root);
  return rc;
}
