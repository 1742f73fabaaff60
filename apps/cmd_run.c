/* gradsync run: launch N ranks of a program through Open MPI's mpirun,
 * optionally on an emulated cluster built from network namespaces.
 *
 * The emulated cluster (docs/EMULATED_CLUSTER.md): one network
 * namespace per node, named gs-<pid>-<node>; each holds one end of a veth
 * pair, named gs0 in every namespace so one btl_tcp_if_include fits all;
 * the other end, gs<pid>n<node>, is a port of the bridge gsbr<pid> in the
 * root namespace. Addresses come from 10.213.X.0/24 (X chosen free per
 * run): the bridge is .1, node i is .(i+2). Both directions of each node's
 * link are shaped with tbf: the egress of gs0 is the node's upload, the
 * egress of the bridge port its download. mpirun stays in the root
 * namespace; every rank starts as this binary re-invoked with the hidden
 * verb "run --exec-in-netns", which enters the rank's namespace with
 * setns(2) and execs the program. Everything is removed afterwards, also
 * after failures and signals; leftovers of runs whose launcher died are
 * removed by the next run.
 *
 * Privileges (docs/EMULATED_CLUSTER.md, "What needs root"): building and
 * removing the cluster needs root, the program does not. Started through
 * sudo, the launcher stays root for the set-up and clean-up only; mpirun
 * runs as the invoking user (SUDO_UID, SUDO_GID and that user's groups)
 * keeping one capability, CAP_SYS_ADMIN, as an ambient capability, because
 * setns(2) needs it; each rank enters its namespace with it and drops every
 * capability before it execs the program, which so runs as the plain user.
 * ip and tc come from the system's directories, never from PATH. */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <limits.h>
#include <linux/capability.h>
#include <math.h>
#include <poll.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "gradsync/cost.h"
#include "gradsync/launch.h"

extern char **environ;

#define NODE_IFACE "gs0"        /* the veth end inside every namespace */
#define MAX_NODES 253           /* .2 .. .254 of one /24 */
#define NETNS_DIR "/var/run/netns"
#define TBF_LATENCY "10ms"      /* queue bound: tens of ms at most, like a switch port */
#define KILL_GRACE_S 10.0       /* how long mpirun gets to stop its ranks */
#define MPIRUN_LINGER_S 10.0    /* how long mpirun may stay after its ranks ended */

struct cluster {
  int pid;        /* the launcher's pid: part of every name */
  int nodes;      /* namespaces to build */
  int built;      /* namespaces created so far */
  int subnet;     /* X of 10.213.X.0/24 */
  int bridge_up;  /* the bridge exists */
  char bridge[16];
};

static volatile sig_atomic_t got_signal;
static volatile pid_t mpirun_pid;
static int verbose;
/* --elastic: the supervisor (src/launch) owns mpirun, in its own process
 * group, so every signal is forwarded, a terminal's too. */
static volatile sig_atomic_t elastic_mode;
/* ip and tc by absolute path from the system's directories (find_system_exe). */
static char ip_exe[PATH_MAX], tc_exe[PATH_MAX];

/* Whom the program runs as when the launcher was started through sudo: the
 * invoking user, with that user's supplementary groups and home. */
struct run_user {
  uid_t uid;
  gid_t gid;
  int ngroups;
  gid_t groups[256];
  char name[64], home[PATH_MAX], shell[PATH_MAX];
};

static void usage(FILE *f) {
  fprintf(f,
      "usage: gradsync run -np N [--net RATE] [--per-node K] [options] -- PROGRAM [ARGS...]\n"
      "       gradsync run (--hosts H1:S1,H2:S2,... | --hostfile FILE) [-np N] [options]\n"
      "                    -- PROGRAM [ARGS...]\n\n"
      "Launches N ranks of PROGRAM through mpirun. With --net, the ranks run on an\n"
      "emulated cluster: one network namespace per node, joined by a bridge, each\n"
      "node's link shaped to RATE in both directions (needs root, ip and tc).\n"
      "Started through sudo, only the network set-up runs as root: the ranks run\n"
      "as the invoking user (SUDO_UID, SUDO_GID) without privileges.\n"
      "With --hosts or --hostfile, the ranks run on those hosts, started over ssh\n"
      "by Open MPI (docs/CLUSTER.md). Inside a Slurm allocation (SLURM_JOB_ID and\n"
      "SLURM_NODELIST set) without either, Open MPI places the ranks on the\n"
      "allocation's nodes and -np is optional.\n\n"
      "options:\n"
      "  -np N, -n N     number of ranks (required on one machine; with hosts or\n"
      "                  Slurm it defaults to every slot)\n"
      "  --net RATE      per-node link rate, e.g. 100mbit, 1gbit, 10gbit\n"
      "  --slow NODE:RATE  node NODE's link at RATE instead (a slow link)\n"
      "  --gso BYTES     the largest packet a node's stack hands its link\n"
      "                  (default 16384; the kernel's own is 65536)\n"
      "  --burst BYTES   each link's token bucket (default: one packet of\n"
      "                  --gso plus 1616 bytes; see docs/NETWORK.md)\n"
      "  --per-node K    ranks per node (default 1; N must be divisible by K);\n"
      "                  sets GRADSYNC_NODE=rank/K in every rank\n"
      "  --node-cpus C   each node's ranks share at most C cores (a CPU cgroup\n"
      "                  per node, needs root), so that nodes do not lend each\n"
      "                  other the host's cores as real machines cannot\n"
      "  --hosts LIST    run on these hosts: HOST[:SLOTS],... (slots default 1)\n"
      "  --hostfile FILE run on the hosts of FILE: lines HOST, HOST slots=N or\n"
      "                  HOST:N; '#' starts a comment\n"
      "  --oversubscribe allow more ranks than the hosts' slots\n"
      "  --iface IFACE   MPI's traffic only through IFACE (an interface name or a\n"
      "                  subnet such as 10.0.0.0/24; a comma-separated list)\n"
      "  --ssh-config FILE  Open MPI's ssh reads FILE (ssh -F FILE)\n"
      "  --ssh-control PATH  the hosts' checks before mpirun go over ssh connections\n"
      "                  kept open at ControlPath PATH (as the cluster manager\n"
      "                  keeps them), else over new ones\n"
      "  --prefix DIR    Open MPI's installation prefix on the hosts (mpirun --prefix)\n"
      "  --cost-cache DIR  keep each launch's calibration (the cost model gradsync's\n"
      "                  ranks measure at start-up) in DIR, named by the launch's\n"
      "                  settings, hosts and size: a later launch of the same shape\n"
      "                  loads it instead (GRADSYNC_COST_CACHE; docs/CLUSTER.md)\n"
      "  --dry-run       print the mpirun command line and exit\n"
      "  --elastic MIN:MAX  supervise the job (docs/ELASTIC.md): when it fails,\n"
      "                  leave out what failed and relaunch on what is left (at\n"
      "                  least MIN ranks); grow up to MAX when discovery lists\n"
      "                  more slots. The program resumes from its own checkpoint\n"
      "                  (gradsync train --checkpoint DIR --resume=auto); with its\n"
      "                  --global-batch G only sizes dividing G are used\n"
      "  --discover SCRIPT  run SCRIPT for the hosts: one HOST:SLOTS a line\n"
      "  --discover-every S  seconds between discoveries (default 5)\n"
      "  --shrink-on-discover  when the script stops listing a host the job runs\n"
      "                  on, stop the job at its next commit and relaunch it\n"
      "                  without that host (default: dropped at the next launch)\n"
      "  --max-restarts K  relaunches after failures at most (default 5; a lost host not counted)\n"
      "  --resize-interval S  least seconds from a launch to growing (default 30)\n"
      "  --min-wait S    with fewer than MIN slots, wait this long for discovery\n"
      "                  (default 60), then end with status 1\n"
      "  --events FILE   one JSON object a line per launch, failure, resize, end\n"
      "  --mpirun PATH   the mpirun to use (default: mpirun from PATH)\n"
      "  -v, --verbose   print the commands run\n"
      "  --help          this text\n\n"
      "The exit status is 0 only if every rank exits 0 (with --elastic: if the\n"
      "job finished; 1 when it ended short, 3 when it stopped on request).\n");
}

/* The most ranks one launch starts. */
#define RUN_MAX_RANKS 65536

static int run_repeated(const char *opt) {
  cli_error("run", "option %s given more than once", opt);
  return 2;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A signal typed at the terminal reaches the whole foreground process group,
 * mpirun included; forwarding it again would count as a second Ctrl-C, which
 * makes mpirun exit at once without stopping its ranks. So only signals sent
 * by a process (kill, timeout) are forwarded. */
static void on_signal(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  if (!got_signal) got_signal = sig;
  if (elastic_mode) gs_elastic_interrupt(sig);
  else if (mpirun_pid > 0 && si->si_code != SI_KERNEL) kill(mpirun_pid, sig);
}

/* SIGUSR1 and SIGUSR2 are the program's (gradsync train: stop at the next
 * commit, exit 3): passed to mpirun, which passes them to the ranks, and
 * the run goes on; the launcher itself is not stopped by them. A signal
 * that comes before mpirun starts, or between an elastic job's launches,
 * is dropped. */
static void on_user_signal(int sig, siginfo_t *si, void *uc) {
  (void)si;
  (void)uc;
  if (elastic_mode) gs_elastic_forward(sig);
  else if (mpirun_pid > 0) kill(mpirun_pid, sig);
}

static void install_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO; /* no SA_RESTART: waitpid must wake up */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  sa.sa_sigaction = on_user_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGUSR2, &sa, NULL);
}

/* Finds a tool that runs as root (ip, tc) in the system's own directories
 * only: a PATH, which sudo -E or a user's shell may pass on, must not choose
 * what root executes. /usr/sbin and /sbin first, where iproute2 installs
 * them; /usr/bin and /bin for distributions that merged sbin into bin. */
static int find_system_exe(const char *name, char *out, size_t size) {
  static const char *const dirs[] = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    struct stat st;
    snprintf(out, size, "%s/%s", dirs[i], name);
    if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0) return 0;
  }
  return -1;
}

/* Runs one command to completion and returns its exit status (-1 if it could
 * not run). It gets its own process group, so that a Ctrl-C meant for the
 * ranks cannot interrupt building or removing the cluster halfway. quiet
 * sends its stderr to /dev/null, for removals of things that may be gone. */
static int run_cmd(int quiet, char *const argv[]) {
  if (verbose) {
    fprintf(stderr, "+");
    for (int i = 0; argv[i]; i++) fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "\n");
  }
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawn_file_actions_init(&fa);
  if (quiet) posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int err = posix_spawn(&pid, argv[0], &fa, &attr, argv, environ); /* absolute path */
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (err) {
    if (!quiet) cli_fail("run", "cannot run %s: %s", argv[0], strerror(err));
    return -1;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* run_cmd with a NULL-terminated list of words, for brevity at call sites. */
static int cmd(int quiet, const char *arg0, ...) {
  char *argv[24];
  int n = 0;
  va_list ap;
  va_start(ap, arg0);
  for (const char *a = arg0; a && n < 23; a = va_arg(ap, const char *)) argv[n++] = (char *)a;
  va_end(ap);
  argv[n] = NULL;
  return run_cmd(quiet, argv);
}

/* Kills every process still inside a namespace: ranks orphaned by a killed
 * mpirun would otherwise keep the namespace, and the CPU, busy. A process is
 * inside when its /proc/<pid>/ns/net is the same nsfs inode as the
 * namespace's file, which is how `ip netns pids` decides too. */
static void kill_ns_procs(const char *ns) {
  char path[PATH_MAX];
  struct stat ns_st, st;
  snprintf(path, sizeof path, NETNS_DIR "/%s", ns);
  if (stat(path, &ns_st) != 0) return;
  DIR *d = opendir("/proc");
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    snprintf(path, sizeof path, "/proc/%s/ns/net", e->d_name);
    if (stat(path, &st) == 0 && st.st_ino == ns_st.st_ino && st.st_dev == ns_st.st_dev)
      kill((pid_t)atoi(e->d_name), SIGKILL);
  }
  closedir(d);
}

/* Removes what the cluster holds: the bridge-side veth ends first (which
 * destroys both ends at once; deleting a namespace frees its veth only
 * asynchronously), then the namespaces, then the bridge. */
static void cluster_destroy(struct cluster *c) {
  char name[64];
  for (int i = 0; i < c->built; i++) {
    snprintf(name, sizeof name, "gs-%d-%d", c->pid, i);
    kill_ns_procs(name);
  }
  for (int i = 0; i < c->built; i++) {
    snprintf(name, sizeof name, "gs%dn%d", c->pid, i);
    cmd(1, ip_exe, "link", "del", name, NULL);
    snprintf(name, sizeof name, "gs-%d-%d", c->pid, i);
    if (cmd(0, ip_exe, "netns", "del", name, NULL) != 0)
      cli_fail("run", "could not remove network namespace %s", name);
  }
  if (c->bridge_up && cmd(0, ip_exe, "link", "del", c->bridge, NULL) != 0)
    cli_fail("run", "could not remove bridge %s", c->bridge);
  c->built = 0;
  c->bridge_up = 0;
}

/* True when pid names no live process, so its namespaces are leftovers. */
static int pid_dead(int pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

/* Removes namespaces, bridges and veths of earlier runs whose launcher is
 * gone (killed with SIGKILL, say). Only names of our exact form count. */
static void clean_stale(int self) {
  DIR *d = opendir(NETNS_DIR);
  int pid, node, len;
  char name[300];
  for (struct dirent *e; d && (e = readdir(d));) {
    len = 0;
    if (sscanf(e->d_name, "gs-%d-%d%n", &pid, &node, &len) == 2 &&
        e->d_name[len] == '\0' && pid != self && pid_dead(pid)) {
      snprintf(name, sizeof name, "%s", e->d_name);
      kill_ns_procs(name);
      cmd(1, ip_exe, "netns", "del", name, NULL);
    }
  }
  if (d) closedir(d);
  d = opendir("/sys/class/net");
  for (struct dirent *e; d && (e = readdir(d));) {
    len = 0;
    int ours = (sscanf(e->d_name, "gsbr%d%n", &pid, &len) == 1 && e->d_name[len] == '\0') ||
               (sscanf(e->d_name, "gs%dn%d%n", &pid, &node, &len) == 2 &&
                e->d_name[len] == '\0');
    if (ours && pid != self && pid_dead(pid)) {
      snprintf(name, sizeof name, "%s", e->d_name);
      cmd(1, ip_exe, "link", "del", name, NULL);
    }
  }
  if (d) closedir(d);
}

/* Picks X for 10.213.X.0/24 that no interface of the root namespace uses, so
 * that concurrent runs get disjoint subnets and routes. Starts at pid % 254
 * to spread choices out. Returns -1 when all are taken. */
static int pick_subnet(int pid) {
  unsigned char used[256] = {0};
  struct ifaddrs *ifa = NULL;
  if (getifaddrs(&ifa) == 0) {
    for (struct ifaddrs *p = ifa; p; p = p->ifa_next) {
      if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET) continue;
      unsigned a = ntohl(((struct sockaddr_in *)(void *)p->ifa_addr)->sin_addr.s_addr);
      if ((a >> 16) == ((10u << 8) | 213u)) used[(a >> 8) & 0xff] = 1;
    }
    freeifaddrs(ifa);
  }
  for (int k = 0; k < 254; k++) {
    int x = 1 + (pid + k) % 254;
    if (!used[x]) return x;
  }
  return -1;
}

/* --slow NODE:RATE: one node's link at its own rate (a straggling link). */
static int slow_node = -1;
static double slow_bps;

/* --burst BYTES: tbf's bucket instead of the default (0: the default). */
static double burst_bytes;

/* --gso BYTES: the largest (GSO) packet the nodes' TCP stacks build, set as
 * gso_max_size on both ends of every node's veth. */
#define RUN_GSO_DEFAULT 16384
#define RUN_GSO_MAX 65536 /* the kernel's GSO_MAX_SIZE without BIG TCP */
static int gso_bytes = RUN_GSO_DEFAULT;

/* tbf's bucket: what a link lets through at the host's speed after an idle
 * moment; a real NIC lets nothing through faster than its rate. The bucket
 * must hold one whole packet as the stack hands it over (a GSO packet of up
 * to --gso bytes), or tbf cuts every larger one into MTU-sized segments in
 * software; so the default is one such packet and one more frame. With GSO
 * packets of at most 16 KiB, this bucket (18,000 B, 144 us at 1 Gbit/s) made
 * the one-way time of 64 kB..64 MB messages affine within 0.4% on an idle
 * host, where the kernel's 64 KiB packets and a bucket of 4 ms of traffic
 * (500 kB at 1 Gbit/s: the old default, by the rule burst >= rate / HZ)
 * passed every message below 500 kB at memory speed (docs/NETWORK.md,
 * bench/results/link_p2p.md). */
static double link_burst_bytes(void) {
  return burst_bytes > 0 ? burst_bytes : (double)gso_bytes + 1616;
}

/* Builds the emulated cluster (see the top of the file). Returns 0, or -1
 * with whatever was built left in c for cluster_destroy. */
static int cluster_build(struct cluster *c, double rate_bps) {
  char rate[32], burst[32], addr[32], ns[32], port[32], gso[16];
  snprintf(gso, sizeof gso, "%d", gso_bytes);
  snprintf(burst, sizeof burst, "%.0f", link_burst_bytes());
  snprintf(c->bridge, sizeof c->bridge, "gsbr%d", c->pid);
  if (cmd(0, ip_exe, "link", "add", c->bridge, "type", "bridge", NULL) != 0) return -1;
  c->bridge_up = 1;
  snprintf(addr, sizeof addr, "10.213.%d.1/24", c->subnet);
  if (cmd(0, ip_exe, "addr", "add", addr, "dev", c->bridge, NULL) != 0 ||
      cmd(0, ip_exe, "link", "set", c->bridge, "up", NULL) != 0)
    return -1;
  for (int i = 0; i < c->nodes; i++) {
    if (got_signal) return -1;
    snprintf(ns, sizeof ns, "gs-%d-%d", c->pid, i);
    snprintf(port, sizeof port, "gs%dn%d", c->pid, i);
    snprintf(addr, sizeof addr, "10.213.%d.%d/24", c->subnet, i + 2);
    double bps = i == slow_node ? slow_bps : rate_bps;
    snprintf(rate, sizeof rate, "%.0fbit", bps);
    if (cmd(0, ip_exe, "netns", "add", ns, NULL) != 0) return -1;
    c->built = i + 1;
    /* The peer is created directly inside the namespace under its final name. */
    if (cmd(0, ip_exe, "link", "add", port, "type", "veth", "peer", "name", NODE_IFACE,
            "netns", ns, NULL) != 0 ||
        cmd(0, ip_exe, "-n", ns, "addr", "add", addr, "dev", NODE_IFACE, NULL) != 0 ||
        cmd(0, ip_exe, "-n", ns, "link", "set", NODE_IFACE, "gso_max_size", gso, NULL) != 0 ||
        cmd(0, ip_exe, "link", "set", port, "gso_max_size", gso, NULL) != 0 ||
        cmd(0, ip_exe, "-n", ns, "link", "set", NODE_IFACE, "up", NULL) != 0 ||
        cmd(0, ip_exe, "-n", ns, "link", "set", "lo", "up", NULL) != 0 ||
        cmd(0, ip_exe, "link", "set", port, "master", c->bridge, "up", NULL) != 0 ||
        cmd(0, tc_exe, "-n", ns, "qdisc", "add", "dev", NODE_IFACE, "root", "tbf", "rate", rate,
            "burst", burst, "latency", TBF_LATENCY, NULL) != 0 ||
        cmd(0, tc_exe, "qdisc", "add", "dev", port, "root", "tbf", "rate", rate, "burst", burst,
            "latency", TBF_LATENCY, NULL) != 0)
      return -1;
  }
  return 0;
}

/* Reads who started the launcher through sudo: SUDO_UID (and SUDO_GID,
 * else the user's primary group) with the passwd entry's name, home, shell
 * and supplementary groups, looked up now, while root, so that a missing
 * entry is an error before anything is built. Returns 1 when the program
 * should run as that user, 0 when not started through sudo (or by root
 * itself), -1 on an error, already printed. */
static int resolve_sudo_user(struct run_user *u) {
  const char *uid_s = getenv("SUDO_UID"), *gid_s = getenv("SUDO_GID");
  int uid, gid = -1;
  if (!uid_s || !*uid_s) return 0;
  if (cli_parse_int(uid_s, 0, INT_MAX, &uid) != 0 ||
      (gid_s && *gid_s && cli_parse_int(gid_s, 0, INT_MAX, &gid) != 0)) {
    cli_error("run", "SUDO_UID '%s' / SUDO_GID '%s' are not user and group ids", uid_s,
              gid_s ? gid_s : "");
    return -1;
  }
  if (uid == 0) return 0;
  struct passwd *pw = getpwuid((uid_t)uid);
  if (!pw) {
    cli_error("run", "SUDO_UID %d has no passwd entry: cannot tell the ranks' home and "
              "groups (unset SUDO_UID to run them as root)", uid);
    return -1;
  }
  u->uid = (uid_t)uid;
  u->gid = gid >= 0 ? (gid_t)gid : pw->pw_gid;
  snprintf(u->name, sizeof u->name, "%s", pw->pw_name);
  snprintf(u->home, sizeof u->home, "%s", pw->pw_dir ? pw->pw_dir : "/");
  snprintf(u->shell, sizeof u->shell, "%s", pw->pw_shell ? pw->pw_shell : "");
  /* initgroups(3) in two halves: the list now, setgroups(2) in the child. */
  u->ngroups = (int)(sizeof u->groups / sizeof u->groups[0]);
  if (getgrouplist(pw->pw_name, u->gid, u->groups, &u->ngroups) < 0) {
    cli_error("run", "user %s is in more than %zu groups", pw->pw_name,
              sizeof u->groups / sizeof u->groups[0]);
    return -1;
  }
  return 1;
}

/* capget(2) and capset(2) without libcap: two 32-bit words per set. */
static int caps_set(uint32_t bits) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  data[0].effective = data[0].permitted = data[0].inheritable = bits;
  return (int)syscall(SYS_capset, &hdr, data);
}

static int caps_any(void) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  if (syscall(SYS_capget, &hdr, data) != 0) return 1;
  for (int i = 0; i < 2; i++)
    if (data[i].effective || data[i].permitted || data[i].inheritable) return 1;
  return 0;
}

/* In the child that becomes mpirun: switches to the sudo user u, keeping
 * CAP_SYS_ADMIN alone, as an ambient capability so that it survives the
 * exec of mpirun and of the ranks (setns needs it). The rank drops it in
 * exec_in_node before the program starts. Returns 0, or -1 with errno and
 * *what naming the step that failed. */
static int become_user(const struct run_user *u, const char **what) {
  const uint32_t sys_admin = 1u << CAP_SYS_ADMIN;
  if ((*what = "setgroups", setgroups((size_t)u->ngroups, u->groups) != 0) ||
      (*what = "setresgid", setresgid(u->gid, u->gid, u->gid) != 0) ||
      (*what = "PR_SET_KEEPCAPS", prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) ||
      (*what = "setresuid", setresuid(u->uid, u->uid, u->uid) != 0) ||
      (*what = "capset", caps_set(sys_admin) != 0) ||
      (*what = "PR_CAP_AMBIENT_RAISE",
       prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0) != 0))
    return -1;
  setenv("HOME", u->home, 1);
  setenv("USER", u->name, 1);
  setenv("LOGNAME", u->name, 1);
  if (u->shell[0]) setenv("SHELL", u->shell, 1);
  return 0;
}

/* Whether user u may use path in the way mode says (X_OK, R_OK, ...),
 * judged by the kernel with u's ids and groups as the effective ones, so
 * that what the ranks need is checked before anything is built. Returns 1,
 * 0, or -1 when the launcher could not switch back (it must stop then). */
static int user_may(const struct run_user *u, const char *path, int mode) {
  gid_t saved[256];
  int n = getgroups((int)(sizeof saved / sizeof saved[0]), saved);
  if (n < 0 || setgroups((size_t)u->ngroups, u->groups) != 0) return -1;
  int ok = -1;
  if (setegid(u->gid) == 0) {
    if (seteuid(u->uid) == 0) {
      ok = faccessat(AT_FDCWD, path, mode, AT_EACCESS) == 0;
      if (seteuid(0) != 0) ok = -1;
    }
    if (setegid(0) != 0) ok = -1;
  }
  if (setgroups((size_t)n, saved) != 0) ok = -1;
  return ok;
}

/* Checks that the sudo user can do what mpirun and the ranks will do as
 * that user: enter the working directory (mpirun starts the ranks there),
 * execute mpirun, this binary (every rank starts as it) and the program. A
 * clear error now beats N ranks failing to start. Returns 0 or -1 (printed). */
static int check_user_access(const struct run_user *u, const char *mpirun, const char *self,
                             const char *exe) {
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
  const struct { const char *path; int mode; const char *why; } need[] = {
      {cwd, X_OK, "the working directory, where mpirun starts the ranks"},
      {mpirun, X_OK, "mpirun"},
      {self, X_OK, "the gradsync binary, which every rank starts as"},
      {exe, X_OK, "the program"}};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
    int ok = user_may(u, need[i].path, need[i].mode);
    if (ok < 0) {
      cli_fail("run", "cannot switch to user %s and back to check access: %s", u->name,
                strerror(errno));
      return -1;
    }
    if (!ok) {
      cli_error("run", "user %s (uid %d, from SUDO_UID) cannot %s %s, %s; the ranks run as "
                "that user (unset SUDO_UID to run them as root)", u->name, (int)u->uid,
                i == 0 ? "enter" : "execute", need[i].path, need[i].why);
      return -1;
    }
  }
  return 0;
}

/* In a rank running as a user other than root: gives up every capability
 * (the ambient CAP_SYS_ADMIN that entered the namespace included), so the
 * program starts with none and cannot regain them. */
static int drop_caps(void) {
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    return -1;
  if (caps_set(0) != 0) return -1;
  return caps_any() ? -1 : 0;
}

/* The hidden verb each rank starts as: run --exec-in-netns NSPREFIX K PROG...
 * It sets GRADSYNC_NODE = rank / K (all namespaces share one hostname, so
 * the library cannot tell nodes apart otherwise), enters namespace
 * NSPREFIX<node> unless NSPREFIX is "-", and becomes the program. setns
 * does what `ip netns exec` would, without its extra exec and mount
 * namespace. */
static int exec_in_node(int argc, char **argv) {
  int rank, k;
  const char *rank_s = getenv("OMPI_COMM_WORLD_RANK");
  if (argc < 5 || cli_parse_int(argv[3], 1, 1 << 20, &k) != 0) {
    cli_error("run", "--exec-in-netns is internal; usage: NSPREFIX K PROGRAM...");
    return 2;
  }
  if (!rank_s || cli_parse_int(rank_s, 0, INT_MAX, &rank) != 0) {
    cli_error("run", "--exec-in-netns: OMPI_COMM_WORLD_RANK is not set; start it via mpirun");
    return 2;
  }
  char node[16];
  snprintf(node, sizeof node, "%d", rank / k);
  setenv("GRADSYNC_NODE", node, 1);
  const char *cpu_prefix = getenv("GRADSYNC_RUN_CPU_PREFIX");
  if (cpu_prefix && *cpu_prefix) {
    if (run_cpu_enter(cpu_prefix, rank / k) != 0) {
      cli_fail("run", "rank %d: cannot enter the CPU group of node %d (%s%d): %s", rank,
               rank / k, cpu_prefix, rank / k, strerror(errno));
      return 126;
    }
    unsetenv("GRADSYNC_RUN_CPU_PREFIX");
  }
  if (strcmp(argv[2], "-") != 0) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, NETNS_DIR "/%s%d", argv[2], rank / k);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
      cli_fail("run", "rank %d: cannot enter network namespace %s: %s", rank, path,
                strerror(errno));
      return 126;
    }
    close(fd);
  }
  /* Started through sudo, this process is the user's but holds
   * CAP_SYS_ADMIN for setns: the program gets no capability at all. */
  if (getuid() != 0 && drop_caps() != 0) {
    cli_fail("run", "rank %d: cannot drop capabilities before starting '%s': %s", rank,
              argv[4], strerror(errno));
    return 126;
  }
  execvp(argv[4], argv + 4);
  cli_fail("run", "rank %d: cannot execute '%s': %s", rank, argv[4], strerror(errno));
  return 127;
}

/* Prints word so that a POSIX shell reads it back as one word: as it is
 * when it holds only characters no shell treats specially, else in single
 * quotes (a quote inside as '\''). --dry-run's line can so be pasted. */
static void print_shell_word(FILE *f, const char *word) {
  int plain = *word != '\0';
  for (const char *p = word; *p && plain; p++)
    plain = isalnum((unsigned char)*p) || strchr("_-./:=,@%+", *p) != NULL;
  if (plain) {
    fputs(word, f);
    return;
  }
  fputc('\'', f);
  for (const char *p = word; *p; p++) {
    if (*p == '\'') fputs("'\\''", f);
    else fputc(*p, f);
  }
  fputc('\'', f);
}

/* The Slurm job this launcher runs inside, or NULL: SLURM_JOB_ID and the
 * allocation's node list (SLURM_NODELIST, or SLURM_JOB_NODELIST of newer
 * releases) both set, as salloc, sbatch and srun leave them. Open MPI's
 * Slurm components read the allocation from the same variables. */
static const char *slurm_job(const char **nodes) {
  const char *job = getenv("SLURM_JOB_ID");
  *nodes = getenv("SLURM_NODELIST");
  if (!*nodes || !**nodes) *nodes = getenv("SLURM_JOB_NODELIST");
  return job && *job && *nodes && **nodes ? job : NULL;
}

/* Whether host names this machine, where mpirun starts ranks without ssh:
 * localhost, a loopback address, the host name (or its first label) or an
 * IPv4 address of one of its interfaces. */
static int is_local_host(const char *host) {
  char self[256] = "";
  /* Every 127.x is this machine (the cluster manager's tests name nodes
   * 127.0.1.N). Open MPI itself starts ranks on 127.0.0.2 over ssh, so a
   * run there without sshd ends in Open MPI's own message, not this
   * check's. */
  if (strcasecmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0) return 1;
  if (gethostname(self, sizeof self - 1) == 0) {
    size_t short_len = strcspn(self, ".");
    if (strcasecmp(host, self) == 0 ||
        (strlen(host) == short_len && strncasecmp(host, self, short_len) == 0))
      return 1;
  }
  struct ifaddrs *ifa = NULL;
  int local = 0;
  if (getifaddrs(&ifa) == 0) {
    for (struct ifaddrs *p = ifa; p && !local; p = p->ifa_next) {
      char addr[INET_ADDRSTRLEN];
      if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET) continue;
      if (inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)p->ifa_addr)->sin_addr, addr,
                    sizeof addr) && strcmp(addr, host) == 0)
        local = 1;
    }
    freeifaddrs(ifa);
  }
  return local;
}

/* How long the check below waits for a host: ssh's own connect timeout,
 * and a bound on the whole check (a host that accepts the connection but
 * never answers). */
#define SSH_CONNECT_TIMEOUT_S "10"
#define SSH_CHECK_DEADLINE_S 30.0
#define SSH_CHECK_BATCH 32

/* Before mpirun starts: runs `AGENT HOST true` for every host that is not
 * this machine, SSH_CHECK_BATCH at a time, with the agent mpirun will use
 * (ssh -F FILE for --ssh-config, else OMPI_MCA_plm_rsh_agent's first
 * choice, else ssh), in batch mode (no password prompt) and with a connect
 * timeout when it is ssh. A host that cannot be reached would otherwise end
 * the run with Open MPI's "unable to reliably start one or more daemons",
 * which names no host, or hang in TCP's own connect timeout (minutes) for
 * a host that is down. horovodrun checks its hosts the same way. With
 * --ssh-control PATH (ssh_control) the checks go over connections another
 * process keeps open there (the cluster manager's: tens of milliseconds
 * where a new connection's key exchange takes 0.3 s on the emulated
 * nodes), or over a new one where none is. Returns 0, or -1 after one
 * message per host that failed. */
static const char *ssh_control;
static int check_ssh_hosts(const run_hosts *h, const char *origin, const char *ssh_config,
                           int *ok) {
  for (int i = 0; ok && i < h->n; i++) ok[i] = 1;
  char words[1024], exe[PATH_MAX];
  const char *argv0[24];
  int na = 0;
  const char *env = getenv("OMPI_MCA_plm_rsh_agent");
  if (ssh_config) {
    snprintf(words, sizeof words, "ssh");
  } else {
    snprintf(words, sizeof words, "%s", env && *env ? env : "ssh");
    words[strcspn(words, ":")] = '\0'; /* "ssh : rsh": the first choice */
  }
  char *save = NULL;
  for (char *w = strtok_r(words, " \t", &save); w && na < 8; w = strtok_r(NULL, " \t", &save))
    argv0[na++] = w;
  if (na == 0 || cli_find_exe(argv0[0], exe, sizeof exe) != 0) {
    cli_error("run", "the ssh launcher '%s' is not found; install openssh-client (or set "
              "OMPI_MCA_plm_rsh_agent)", na ? argv0[0] : "");
    return -1;
  }
  argv0[0] = exe;
  const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
  if (ssh_config) {
    argv0[na++] = "-F";
    argv0[na++] = ssh_config;
  }
  char control[PATH_MAX + 16];
  if (strcmp(base, "ssh") == 0) {
    const char *opts[] = {"-o", "BatchMode=yes", "-o", "ConnectTimeout=" SSH_CONNECT_TIMEOUT_S};
    for (size_t j = 0; j < sizeof opts / sizeof opts[0]; j++) argv0[na++] = opts[j];
    if (ssh_control) {
      snprintf(control, sizeof control, "ControlPath=%s", ssh_control);
      const char *mux[] = {"-o", control, "-o", "ControlMaster=no"};
      for (size_t j = 0; j < sizeof mux / sizeof mux[0]; j++) argv0[na++] = mux[j];
    }
  }
  int failed = 0;
  for (int first = 0; first < h->n && !got_signal; first += SSH_CHECK_BATCH) {
    int last = first + SSH_CHECK_BATCH < h->n ? first + SSH_CHECK_BATCH : h->n;
    pid_t pids[SSH_CHECK_BATCH];
    int running = 0;
    for (int i = first; i < last; i++) {
      pids[i - first] = 0;
      if (is_local_host(h->host[i].name)) continue;
      const char *argv[24];
      memcpy(argv, argv0, (size_t)na * sizeof *argv);
      argv[na] = h->host[i].name;
      argv[na + 1] = "true";
      argv[na + 2] = NULL;
      if (verbose) {
        fprintf(stderr, "+");
        for (int j = 0; argv[j]; j++) fprintf(stderr, " %s", argv[j]);
        fprintf(stderr, "\n");
      }
      posix_spawn_file_actions_t fa;
      posix_spawn_file_actions_init(&fa);
      posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
      posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
      int err = posix_spawn(&pids[i - first], exe, &fa, NULL, (char *const *)argv, environ);
      posix_spawn_file_actions_destroy(&fa);
      if (err) {
        cli_fail("run", "cannot run %s: %s", exe, strerror(err));
        pids[i - first] = 0;
        failed++;
        continue;
      }
      running++;
    }
    double deadline = now_s() + SSH_CHECK_DEADLINE_S;
    while (running > 0) {
      int timed_out = now_s() > deadline || got_signal;
      for (int i = first; i < last; i++) {
        pid_t pid = pids[i - first];
        int status;
        if (pid <= 0) continue;
        if (timed_out) kill(pid, SIGKILL);
        if (waitpid(pid, &status, timed_out ? 0 : WNOHANG) != pid) continue;
        pids[i - first] = 0;
        running--;
        char where[PATH_MAX + 32] = "";
        if (h->host[i].line > 0) snprintf(where, sizeof where, " (%s:%d)", origin, h->host[i].line);
        if (timed_out && !got_signal) {
          cli_fail("run", "host %s%s did not answer over ssh within %.0f s", h->host[i].name,
                   where, SSH_CHECK_DEADLINE_S);
          failed++;
          if (ok) ok[i] = 0;
        } else if (!got_signal && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
          cli_fail("run", "cannot reach host %s%s over ssh (%s %s true: exit status %d, see "
                   "above); Open MPI starts its daemons over ssh and needs it to work "
                   "without a password (docs/CLUSTER.md)", h->host[i].name, where, base,
                   h->host[i].name, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
          failed++;
          if (ok) ok[i] = 0;
        }
      }
      if (running > 0) nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
  }
  return failed || got_signal ? -1 : 0;
}

/* Frees mpirun's argument vector: the names after each "-x" before
 * first_prog were allocated, and host_list (--host's value). */
static void free_margv(char **margv, int first_prog, char *host_list) {
  for (int j = 0; j + 1 < first_prog; j++)
    if (strcmp(margv[j], "-x") == 0) free(margv[++j]); /* then past the freed name */
  free(margv);
  free(host_list);
}

/* mpirun's stderr, through a pipe: passed through unchanged and read line
 * by line for Open MPI's account of the job's end (gs_launch_end_line): a
 * rank's abort bounds the wait for mpirun, and a rank's exit status is the
 * run's when mpirun then crashes (Open MPI 4.1's mpirun was seen to die of
 * SIGSEGV in its finalize after a rank failed, 1 run in 8). */
typedef struct mpirun_err {
  int fd;                 /* -1: mpirun writes to our stderr itself */
  char line[4096];
  size_t len;
  double abort_t;         /* when a rank's abort (end.abort_rank) was read (0: none) */
  int exec_failed;        /* mpirun said a host could not find or run the program */
  gs_launch_end end;
} mpirun_err;

/* Reads what mpirun wrote to its stderr, waiting at most ms for it. */
static void pump_mpirun_err(mpirun_err *me, int ms) {
  if (me->fd < 0) {
    nanosleep(&(struct timespec){0, (long)ms * 1000 * 1000}, NULL);
    return;
  }
  struct pollfd p = {me->fd, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return;
  char buf[8192];
  ssize_t k = read(me->fd, buf, sizeof buf);
  if (k < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (k <= 0) {
    close(me->fd);
    me->fd = -1;
    return;
  }
  for (ssize_t off = 0; off < k;) {
    ssize_t put = write(2, buf + off, (size_t)(k - off));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) break; /* our stderr is gone: keep watching */
    off += put;
  }
  for (ssize_t i = 0; i < k; i++) {
    if (buf[i] == '\n' || me->len == sizeof me->line - 1) {
      me->line[me->len] = '\0';
      gs_launch_end_line(&me->end, me->line);
      if (me->abort_t == 0 && me->end.abort_rank >= 0) me->abort_t = now_s();
      /* Open MPI 4.1's words for an exec that failed on a host; its exit
       * status then (131, 132) reads like a rank's or a signal's. */
      if (strstr(me->line, "could not access or execute an executable") ||
          strstr(me->line, "unable to find the specified executable"))
        me->exec_failed = 1;
      me->len = 0;
      if (buf[i] == '\n') continue;
    }
    me->line[me->len++] = buf[i];
  }
}

/* Waits for mpirun. After a signal it gives mpirun KILL_GRACE_S to stop its
 * ranks, then kills it; orphaned ranks are killed by cluster_destroy. An
 * mpirun still there MPIRUN_LINGER_S after every child it started (the
 * ranks, or ssh clients) had ended has deadlocked in Open MPI's runtime (5
 * in 15 jobs where one rank exited while the others called MPI_Abort): it
 * is killed, *status becomes the first failed child's (0 if none failed)
 * and *hung is set (1). An mpirun still there KILL_GRACE_S after a rank's
 * MPI_Abort was read on its stderr (me) gets SIGTERM, and 3 s later
 * SIGKILL; its children of then (the ssh client to a host cut off) are
 * killed with it, and *hung is 2. */
static int wait_mpirun(pid_t pid, int *status, int *hung, mpirun_err *me) {
  double deadline = 0, all_ended_since = 0, next_scan = 0, abort_kill_at = 0;
  gs_launch_pid kids[256]; /* mpirun's children when it was killed after an abort */
  int nkids = 0;
  *hung = 0;
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) {
      /* The children of an mpirun killed after an abort (the ssh client to
       * a host cut off stays up) go with it; then what is left of its
       * output, for 2 s at most: those children may hold the pipe open. */
      if (abort_kill_at > 0) gs_launch_kill_noted(kids, nkids);
      for (double until = now_s() + 2; me->fd >= 0 && now_s() < until;) pump_mpirun_err(me, 50);
      return 0;
    }
    if (r < 0 && errno != EINTR) return -1;
    double now = now_s();
    /* A rank ended the job and mpirun is still there KILL_GRACE_S later:
     * it waits for the daemon of a host cut off or frozen, which never
     * answers (Open MPI 4.1), and would wait for good. */
    if (me->abort_t > 0 && !got_signal && now > me->abort_t + KILL_GRACE_S) {
      if (abort_kill_at == 0) {
        cli_fail("run", "mpirun did not end within %.0f s of rank %d's MPI_Abort (a host cut "
                 "off or frozen?); killing it", KILL_GRACE_S, me->end.abort_rank);
        gs_launch_note_children(pid, kids, &nkids, 256);
        kill(pid, SIGTERM);
        abort_kill_at = now + 3;
        *hung = 2;
      } else if (now > abort_kill_at) {
        kill(pid, SIGKILL);
        abort_kill_at = now + 1e9;
      }
    }
    if (got_signal) {
      if (deadline == 0) {
        deadline = now + KILL_GRACE_S;
      } else if (now > deadline) {
        cli_fail("run", "mpirun did not stop within %.0f s; killing it", KILL_GRACE_S);
        kill(pid, SIGKILL);
        deadline = now + 1e9;
      }
    } else if (now >= next_scan) {
      next_scan = now + 0.5;
      gs_launch_children ch;
      if (gs_launch_stuck(pid, now, MPIRUN_LINGER_S, &all_ended_since, &ch)) {
        cli_fail("run", "mpirun did not exit within %.0f s of the end of all %d of its "
                 "ranks (Open MPI's runtime deadlocked); killing it", MPIRUN_LINGER_S,
                 ch.children);
        kill(pid, SIGKILL);
        while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
        }
        *status = ch.bad_status;
        *hung = 1;
        return 0;
      }
    }
    pump_mpirun_err(me, 50);
  }
}

/* --elastic's check of hosts (those of a failed launch, or those a growth
 * would add), all at once: this machine always passes; another must answer
 * over ssh as before mpirun starts (check_ssh_hosts prints why not), each
 * within ssh's connect timeout. */
static const char *elastic_ssh_config, *elastic_origin;
static void elastic_hosts_ok(const char *const *names, int n, int *ok, void *user) {
  (void)user;
  run_host *list = calloc((size_t)n + 1, sizeof *list);
  if (list == NULL) { /* cannot check: every host kept, as without the check */
    for (int i = 0; i < n; i++) ok[i] = 1;
    return;
  }
  for (int i = 0; i < n; i++) {
    snprintf(list[i].name, sizeof list[i].name, "%s", names[i]);
    list[i].slots = 1;
  }
  run_hosts h = {.host = list, .n = n, .cap = n, .slots = n};
  (void)check_ssh_hosts(&h, elastic_origin, elastic_ssh_config, ok);
  free(list);
}

/* Hands the job to the elastic supervisor: mpirun's fixed options are
 * margv[0..first_prog), the program the rest. The world: the hosts given,
 * or this machine with np slots, or (with --discover) what the script lists,
 * the first launch capped at -np where given. */
static int run_elastic_job(run_elastic_opts *eo, const char *spec, const char *discover,
                           const char *events, int np, int remote, const run_hosts *hosts,
                           char **margv, int first_prog, int nprog, const char *hostfile,
                           const char *ssh_config) {
  (void)spec;
  elastic_origin = hostfile;
  elastic_ssh_config = ssh_config;
  char **fixed = calloc((size_t)first_prog + 1, sizeof *fixed);
  gs_launch_host *list = NULL;
  int n = remote ? hosts->n : 1;
  if (!discover || remote) list = calloc((size_t)n, sizeof *list);
  if (!fixed || (!list && (!discover || remote))) {
    cli_fail("run", "out of memory starting the elastic job");
    free(fixed);
    free(list);
    return 2;
  }
  memcpy(fixed, margv, (size_t)first_prog * sizeof *fixed);
  if (list && remote) {
    for (int j = 0; j < n; j++) {
      snprintf(list[j].name, sizeof list[j].name, "%s", hosts->host[j].name);
      list[j].slots = hosts->host[j].slots;
    }
  } else if (list) {
    snprintf(list[0].name, sizeof list[0].name, "localhost");
    list[0].slots = np;
  }
  eo->hosts = list;
  eo->nhosts = list ? n : 0;
  eo->hosts_explicit = remote;
  eo->first = np;
  eo->discover = discover;
  eo->events = events;
  eo->hosts_ok = remote || discover ? elastic_hosts_ok : NULL;
  elastic_mode = 1;
  int rc = run_elastic(eo, fixed, margv + first_prog, nprog);
  elastic_mode = 0;
  free(fixed);
  free(list);
  return rc;
}

/* run's long options, as the parser below spells them; valued ones take
 * the next argument. */
static const struct {
  const char *name;
  int valued;
} run_longs[] = {
    {"--help", 0},           {"--verbose", 0},        {"--np", 1},
    {"--per-node", 1},       {"--net", 1},            {"--slow", 1},
    {"--burst", 1},          {"--gso", 1},            {"--node-cpus", 1},
    {"--hosts", 1},          {"--hostfile", 1},       {"--iface", 1},
    {"--ssh-config", 1},     {"--prefix", 1},         {"--ssh-control", 1},
    {"--cost-cache", 1},     {"--elastic", 1},        {"--discover", 1},
    {"--events", 1},         {"--discover-every", 1}, {"--resize-interval", 1},
    {"--min-wait", 1},       {"--max-restarts", 1},   {"--shrink-on-discover", 0},
    {"--oversubscribe", 0},  {"--dry-run", 0},        {"--mpirun", 1}};

/* The command line with run's own long options in the form the parser
 * reads, as getopt_long takes them for every other verb: "--name=value"
 * split in two and an unambiguous prefix ("--ne") completed, up to the
 * program (after "--", or the first argument that is no option). Returns
 * a new vector (its strings borrowed or from `keep`), or NULL after saying
 * why (an ambiguous prefix, a value given to a flag). */
static char **run_normalise(int argc, char **argv, int *nargc, char **keep, int *nkeep) {
  char **v = calloc((size_t)2 * (size_t)argc + 1, sizeof *v);
  if (v == NULL) {
    cli_fail("run", "out of memory");
    return NULL;
  }
  int n = 0, i = 0, nr = (int)(sizeof run_longs / sizeof run_longs[0]);
  v[n++] = argv[i++];
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0 || a[0] != '-' || strncmp(a, "--", 2) != 0 || a[2] == '\0') {
      /* "--", the program, or a short option (-np, -n, -v, -h): as given,
       * and a short option's value after it. */
      if (strcmp(a, "--") == 0 || a[0] != '-') break;
      v[n++] = argv[i];
      if ((strcmp(a, "-np") == 0 || strcmp(a, "-n") == 0) && i + 1 < argc) v[n++] = argv[++i];
      continue;
    }
    size_t len = strcspn(a, "=");
    int exact = -1, found = -1, matches = 0;
    char cands[512] = "";
    for (int k = 0; k < nr; k++) {
      if (strncmp(run_longs[k].name, a, len) != 0) continue;
      if (strlen(run_longs[k].name) == len) exact = k;
      size_t cl = strlen(cands);
      snprintf(cands + cl, sizeof cands - cl, "%s%s", matches ? ", " : "", run_longs[k].name);
      found = k;
      matches++;
    }
    int k = exact >= 0 ? exact : matches == 1 ? found : -1;
    if (k < 0 && matches > 1) {
      cli_error("run", "option '%.*s' is ambiguous: %s", (int)len, a, cands);
      free(v);
      return NULL;
    }
    if (k < 0) { /* unknown: the parser says so */
      v[n++] = argv[i];
      continue;
    }
    v[n++] = (char *)run_longs[k].name;
    if (a[len] == '=') {
      if (!run_longs[k].valued) {
        cli_error("run", "option '%s' takes no value", run_longs[k].name);
        free(v);
        return NULL;
      }
      keep[(*nkeep)++] = v[n++] = strdup(a + len + 1);
      if (v[n - 1] == NULL) {
        cli_fail("run", "out of memory");
        free(v);
        return NULL;
      }
    } else if (run_longs[k].valued && i + 1 < argc) {
      v[n++] = argv[++i];
    }
  }
  for (; i < argc; i++) v[n++] = argv[i];
  v[n] = NULL;
  *nargc = n;
  return v;
}

static int cmd_run_parsed(int argc, char **argv);

int cmd_run(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--exec-in-netns") == 0) return exec_in_node(argc, argv);
  char **keep = calloc((size_t)argc + 1, sizeof *keep);
  int nkeep = 0, nargc = 0;
  char **v = keep ? run_normalise(argc, argv, &nargc, keep, &nkeep) : NULL;
  if (v == NULL) {
    free(keep);
    return 2;
  }
  int rc = cmd_run_parsed(nargc, v);
  for (int k = 0; k < nkeep; k++) free(keep[k]);
  free(keep);
  free(v);
  return rc;
}

static int cmd_run_parsed(int argc, char **argv) {
  int np = 0, per_node = 1, per_node_given = 0, i;
  /* Each option at most once, as for the other verbs (-np, -n and --np
   * are one option). */
  int seen_np = 0, seen_net = 0, seen_mpirun = 0, seen_verbose = 0;
  const char *net = NULL, *mpirun = "mpirun";
  double rate_bps = 0, node_cpus = 0;
  /* Hosts (docs/CLUSTER.md): at most one of --hosts and --hostfile. */
  const char *hosts_arg = NULL, *hostfile = NULL, *iface = NULL, *ssh_config = NULL,
             *prefix = NULL;
  int oversubscribe = 0, dry_run = 0;
  /* --elastic and its settings (docs/ELASTIC.md). */
  const char *elastic = NULL, *discover = NULL, *events = NULL, *cost_cache = NULL;
  run_elastic_opts eo = {.discover_every = 5, .max_restarts = 5, .resize_interval = 30,
                         .min_wait = 60};
  int seen_every = 0, seen_restarts = 0, seen_interval = 0, seen_wait = 0;
  int seen_slow = 0, seen_burst = 0, seen_gso = 0;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has_value = i + 1 < argc;
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
      if (seen_verbose++) return run_repeated(a);
      verbose = 1;
    } else if (strcmp(a, "-np") == 0 || strcmp(a, "-n") == 0 || strcmp(a, "--np") == 0) {
      if (seen_np++) return run_repeated(a);
      if (!has_value || cli_parse_int(argv[++i], 1, RUN_MAX_RANKS, &np) != 0) {
        cli_error("run", "%s needs a rank count from 1 to %d%s%s%s", a, RUN_MAX_RANKS,
                  has_value ? " (got '" : "", has_value ? argv[i] : "", has_value ? "')" : "");
        return 2;
      }
    } else if (strcmp(a, "--per-node") == 0) {
      if (per_node_given) return run_repeated(a);
      if (!has_value || cli_parse_int(argv[++i], 1, RUN_MAX_RANKS, &per_node) != 0) {
        cli_error("run", "--per-node needs a number of ranks per node from 1 to %d%s%s%s",
                  RUN_MAX_RANKS, has_value ? " (got '" : "", has_value ? argv[i] : "",
                  has_value ? "')" : "");
        return 2;
      }
      per_node_given = 1;
    } else if (strcmp(a, "--net") == 0) {
      if (seen_net++) return run_repeated(a);
      if (cli_link_net_arg("run", has_value ? argv[++i] : "", &rate_bps) != 0) return 2;
      net = argv[i];
    } else if (strcmp(a, "--slow") == 0) {
      if (seen_slow++) return run_repeated(a); /* one slow node (the last one won) */
      const char *colon = has_value ? strchr(argv[i + 1], ':') : NULL;
      char node[16] = "";
      if (colon && colon - argv[i + 1] < (long)sizeof node)
        memcpy(node, argv[i + 1], (size_t)(colon - argv[i + 1]));
      if (!colon || cli_parse_int(node, 0, MAX_NODES - 1, &slow_node) != 0 ||
          gs_net_rate(colon + 1, &slow_bps) != GS_OK) {
        cli_error("run", "--slow needs NODE:RATE, a node index and a rate such as 0:100mbit "
                  "(got '%s')", has_value ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--burst") == 0) {
      if (seen_burst++) return run_repeated(a);
      int b;
      if (!has_value || cli_parse_int(argv[i + 1], 1514, 1 << 26, &b) != 0) {
        cli_error("run", "--burst needs the bucket size in bytes, from 1514 to %d (got '%s')",
                  1 << 26, has_value ? argv[i + 1] : "");
        return 2;
      }
      burst_bytes = b;
      i++;
    } else if (strcmp(a, "--gso") == 0) {
      if (seen_gso++) return run_repeated(a);
      if (!has_value || cli_parse_int(argv[i + 1], 1514, RUN_GSO_MAX, &gso_bytes) != 0) {
        cli_error("run", "--gso needs the largest packet in bytes, from 1514 to %d (got '%s')",
                  RUN_GSO_MAX, has_value ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--node-cpus") == 0) {
      if (node_cpus > 0) return run_repeated(a);
      if (!has_value || cli_parse_double(argv[i + 1], 0.01, 4096, &node_cpus) != 0) {
        cli_error("run", "--node-cpus needs a number of cores from 0.01 to 4096, such as 0.5 "
                  "(got '%s')", has_value ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--hosts") == 0 || strcmp(a, "--hostfile") == 0 ||
               strcmp(a, "--iface") == 0 || strcmp(a, "--ssh-config") == 0 ||
               strcmp(a, "--prefix") == 0) {
      const char **slot = a[2] == 'i'   ? &iface
                          : a[2] == 's' ? &ssh_config
                          : a[2] == 'p' ? &prefix
                          : a[6] == 'f' ? &hostfile
                                        : &hosts_arg;
      if (*slot) return run_repeated(a);
      if (!has_value || argv[i + 1][0] == '\0') {
        cli_error("run", "%s needs %s", a,
                  slot == &iface      ? "an interface name or a subnet such as 10.0.0.0/24"
                  : slot == &hosts_arg ? "HOST[:SLOTS],... such as node1:4,node2:4"
                  : slot == &prefix   ? "the directory Open MPI is installed in on the hosts"
                                      : "a file");
        return 2;
      }
      *slot = argv[++i];
    } else if (strcmp(a, "--ssh-control") == 0) {
      if (ssh_control) return run_repeated(a);
      if (!has_value || argv[i + 1][0] == '\0' || strlen(argv[i + 1]) >= PATH_MAX) {
        cli_error("run", "--ssh-control needs ssh's ControlPath (a socket's path, %%C and "
                  "the other tokens as ssh expands them)");
        return 2;
      }
      ssh_control = argv[++i];
    } else if (strcmp(a, "--cost-cache") == 0) {
      if (cost_cache) return run_repeated(a);
      if (!has_value || argv[i + 1][0] == '\0') {
        cli_error("run", "--cost-cache needs a directory");
        return 2;
      }
      cost_cache = argv[++i];
    } else if (strcmp(a, "--elastic") == 0 || strcmp(a, "--discover") == 0 ||
               strcmp(a, "--events") == 0) {
      const char **slot = a[2] == 'e' && a[3] == 'l' ? &elastic
                          : a[2] == 'd'              ? &discover
                                                     : &events;
      if (*slot) return run_repeated(a);
      if (!has_value || argv[i + 1][0] == '\0') {
        cli_error("run", "%s needs %s", a,
                  slot == &elastic    ? "MIN:MAX, the fewest and most ranks, such as 2:4"
                  : slot == &discover ? "a script that prints HOST:SLOTS lines"
                                      : "a file");
        return 2;
      }
      *slot = argv[++i];
      if (slot == &elastic && run_elastic_parse_spec(elastic, &eo.min, &eo.max) != 0) {
        cli_error("run", "--elastic needs MIN:MAX (or N), whole numbers with 1 <= MIN <= MAX "
                  "<= %d, such as 2:4 (got '%s')", RUN_ELASTIC_MAX, elastic);
        return 2;
      }
    } else if (strcmp(a, "--discover-every") == 0 || strcmp(a, "--resize-interval") == 0 ||
               strcmp(a, "--min-wait") == 0) {
      int *seen = a[2] == 'd' ? &seen_every : a[2] == 'r' ? &seen_interval : &seen_wait;
      double *v = a[2] == 'd' ? &eo.discover_every : a[2] == 'r' ? &eo.resize_interval
                                                                  : &eo.min_wait;
      double lo = a[2] == 'd' ? 0.1 : 0;
      if ((*seen)++) return run_repeated(a);
      if (!has_value || cli_parse_double(argv[i + 1], lo, 86400, v) != 0) {
        cli_error("run", "%s needs seconds from %g to 86400 (got '%s')", a, lo,
                  has_value ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--max-restarts") == 0) {
      if (seen_restarts++) return run_repeated(a);
      if (!has_value || cli_parse_int(argv[i + 1], 0, 10000, &eo.max_restarts) != 0) {
        cli_error("run", "--max-restarts needs a count from 0 to 10000 (got '%s')",
                  has_value ? argv[i + 1] : "");
        return 2;
      }
      i++;
    } else if (strcmp(a, "--shrink-on-discover") == 0) {
      if (eo.shrink_on_discover++) return run_repeated(a);
    } else if (strcmp(a, "--oversubscribe") == 0) {
      if (oversubscribe++) return run_repeated(a);
    } else if (strcmp(a, "--dry-run") == 0) {
      if (dry_run++) return run_repeated(a);
    } else if (strcmp(a, "--mpirun") == 0) {
      if (seen_mpirun++) return run_repeated(a);
      if (!has_value || argv[i + 1][0] == '\0') {
        cli_error("run", "--mpirun needs a path");
        return 2;
      }
      mpirun = argv[++i];
    } else if (a[0] == '-') {
      cli_error("run", "unknown option '%s'", a);
      return 2;
    } else {
      break; /* the program starts here */
    }
  }
  char **prog = argv + i;
  int nprog = argc - i;
  /* --cost-cache DIR: the calibration of a launch kept in DIR under a key
   * of the launch's settings (these options, less the ones that do not
   * change where and how the ranks run), and, under --elastic, of each
   * launch's hosts and size. */
  char cost_desc[4096] = "", cost_var[PATH_MAX + 64];
  if (cost_cache) {
    /* Left out: what only the launcher or the supervisor reads (valued:
     * 1), and under --elastic the hosts, which each launch's key takes
     * from its world instead (so jobs on the same nodes share a file). */
    static const struct {
      const char *name;
      int valued, elastic_only;
    } skip[] = {{"--cost-cache", 1, 0},    {"--events", 1, 0},        {"-v", 0, 0},
                {"--verbose", 0, 0},       {"--dry-run", 0, 0},       {"--", 0, 0},
                {"--elastic", 1, 1},       {"--discover", 1, 1},      {"--discover-every", 1, 1},
                {"--max-restarts", 1, 1},  {"--resize-interval", 1, 1}, {"--min-wait", 1, 1},
                {"--shrink-on-discover", 0, 1}, {"--hosts", 1, 1},    {"--hostfile", 1, 1},
                {"-np", 1, 1},             {"-n", 1, 1},              {"--np", 1, 1}};
    size_t len = 0;
    for (int j = 1; j < i && len < sizeof cost_desc; j++) {
      const char *o = argv[j];
      int skipped = 0;
      for (size_t q = 0; q < sizeof skip / sizeof skip[0] && !skipped; q++)
        if (strcmp(o, skip[q].name) == 0 && (!skip[q].elastic_only || elastic)) {
          skipped = 1;
          j += skip[q].valued;
        }
      if (!skipped) len += (size_t)snprintf(cost_desc + len, sizeof cost_desc - len, "%s ", o);
    }
    /* A file in the way (or an unwritable directory) is refused now:
     * mkdir's EEXIST passed it, and every launch warned it could not
     * write there. */
    if (cli_check_out_dir("run", "--cost-cache", cost_cache) != 0) return 2;
    if (mkdir(cost_cache, 0777) != 0 && errno != EEXIST) {
      cli_error("run", "--cost-cache %s: cannot create the directory: %s", cost_cache,
                strerror(errno));
      return 2;
    }
    /* Set now so that mpirun forwards it to other hosts (-x); an elastic
     * launch names its own file in it. */
    snprintf(cost_var, sizeof cost_var, "%s/cost-%016llx.json", cost_cache,
             (unsigned long long)gs_launch_cost_key(cost_desc, "local", 0));
    setenv("GRADSYNC_COST_CACHE", cost_var, 1);
    eo.cost_cache = cost_cache;
    eo.cost_cache_desc = cost_desc;
  }
  /* Where the ranks run: here (with or without --net), on the hosts given,
   * or, inside a Slurm allocation with no hosts given, where Open MPI's
   * Slurm components place them. */
  int remote = hosts_arg || hostfile;
  const char *slurm_nodes = NULL, *slurm = remote || net ? NULL : slurm_job(&slurm_nodes);
  const char *hosts_opt = hosts_arg ? "--hosts" : "--hostfile";
  if (hosts_arg && hostfile) {
    cli_error("run", "--hosts and --hostfile both name the hosts: give one");
    return 2;
  }
  if (remote && net) {
    cli_error("run", "%s runs the ranks on real hosts; --net emulates a cluster on this "
              "machine: give one or the other", hosts_opt);
    return 2;
  }
  if ((remote || slurm) && (per_node_given || node_cpus > 0)) {
    cli_error("run", "%s emulates nodes on this machine; %s the nodes are real (--hosts "
              "localhost:N runs on this machine alone)",
              per_node_given ? "--per-node" : "--node-cpus",
              remote ? (hosts_arg ? "with --hosts" : "with --hostfile")
                     : "inside a Slurm allocation");
    return 2;
  }
  if (iface && net) {
    cli_error("run", "--iface: --net chooses the emulated cluster's interfaces itself");
    return 2;
  }
  if (ssh_control && !remote && !discover) {
    cli_error("run", "--ssh-control needs --hosts, --hostfile or --discover (only there does "
              "run use ssh)");
    return 2;
  }
  if (ssh_config && !remote && !discover) {
    cli_error("run", "--ssh-config needs --hosts, --hostfile or --discover (only there does "
              "Open MPI start the ranks over ssh)");
    return 2;
  }
  if (dry_run && (net || node_cpus > 0)) {
    cli_error("run", "--dry-run prints mpirun's command line only; %s builds %s first",
              net ? "--net" : "--node-cpus", net ? "a cluster" : "CPU groups");
    return 2;
  }
  if (elastic && eo.shrink_on_discover && !discover) {
    cli_error("run", "--shrink-on-discover needs --discover SCRIPT");
    return 2;
  }
  if (!elastic && (discover || events || seen_every || seen_restarts || seen_interval ||
                   seen_wait || eo.shrink_on_discover)) {
    cli_error("run", "%s belongs to an elastic job: it needs --elastic MIN:MAX",
              discover ? "--discover" : events ? "--events" : seen_every ? "--discover-every"
              : seen_restarts ? "--max-restarts" : seen_interval ? "--resize-interval"
              : seen_wait ? "--min-wait" : "--shrink-on-discover");
    return 2;
  }
  if (elastic && dry_run) {
    cli_error("run", "--elastic with --dry-run is not supported: the supervisor launches more "
              "than once");
    return 2;
  }
  if (elastic && (per_node_given || node_cpus > 0) && !net) {
    cli_error("run", "--elastic with %s needs --net (the emulated nodes)",
              per_node_given ? "--per-node" : "--node-cpus");
    return 2;
  }
  if (elastic && slurm && !discover) {
    cli_error("run", "--elastic inside a Slurm allocation needs --hosts, --hostfile or "
              "--discover: the supervisor must know the hosts to leave one out");
    return 2;
  }
  if (elastic && np > eo.max) {
    cli_error("run", "-np %d is more than --elastic's most ranks, %d", np, eo.max);
    return 2;
  }
  if (elastic && !discover && np > 0 && np < eo.min) {
    cli_error("run", "-np %d is fewer than --elastic's fewest ranks, %d", np, eo.min);
    return 2;
  }
  if (elastic && discover && access(discover, X_OK) != 0) {
    cli_error("run", "--discover %s: not an executable file: %s", discover, strerror(errno));
    return 2;
  }
  if (elastic && np == 0 && !remote && !discover) np = eo.max; /* one machine: MAX slots */
  if (np == 0 && !remote && !slurm && !elastic) {
    cli_error("run", "missing -np N (the number of ranks)");
    return 2;
  }
  if (nprog < 1) {
    cli_error("run", "missing the program to run after '--'");
    return 2;
  }
  static run_hosts hosts; /* static: freed at exit, never twice */
  if (hosts_arg && run_hosts_parse(hosts_arg, &hosts) != 0) return 2;
  if (hostfile && run_hosts_read(hostfile, &hosts) != 0) return 2;
  if (remote) {
    if (np == 0 && hosts.slots > RUN_MAX_RANKS) {
      cli_error("run", "%s has %ld slots, more than the %d ranks a run takes: give -np",
                hosts_arg ? "--hosts" : hostfile, hosts.slots, RUN_MAX_RANKS);
      run_hosts_free(&hosts);
      return 2;
    }
    if (np == 0) np = (int)hosts.slots;
    if (np > hosts.slots && !oversubscribe) {
      cli_error("run", "-np %d is more than the %ld slot%s of %s; give --oversubscribe to "
                "place more ranks than slots", np, hosts.slots, hosts.slots == 1 ? "" : "s",
                hosts_arg ? "--hosts" : hostfile);
      run_hosts_free(&hosts);
      return 2;
    }
  }
  char ssh_config_abs[PATH_MAX];
  if (ssh_config) {
    if (access(ssh_config, R_OK) != 0 || !realpath(ssh_config, ssh_config_abs)) {
      cli_error("run", "--ssh-config %s: cannot read it: %s", ssh_config, strerror(errno));
      return 2;
    }
    if (strpbrk(ssh_config_abs, " \t\n'\"\\")) {
      cli_error("run", "--ssh-config %s: the path holds a space or a quote, which Open MPI's "
                "ssh command line cannot carry", ssh_config_abs);
      return 2;
    }
    ssh_config = ssh_config_abs;
  }
  if (iface) {
    for (const char *p = iface; *p; p++)
      if (!isalnum((unsigned char)*p) && !strchr(".-_:/,@", *p)) {
        cli_error("run", "--iface '%s': not an interface name or subnet (such as eth0, ib0 "
                  "or 10.0.0.0/24; several separated by commas)", iface);
        return 2;
      }
  }
  if (prefix && prefix[0] != '/') {
    cli_error("run", "--prefix '%s': needs an absolute path (the same on every host)", prefix);
    return 2;
  }
  if (nprog < 1) {
    cli_error("run", "missing the program to run after '--'");
    return 2;
  }
  if (slow_node >= 0 && (!net || slow_node >= np / per_node)) {
    cli_error("run", "--slow %d: needs --net and a node below %d", slow_node,
              np / per_node);
    return 2;
  }
  if (!net && (burst_bytes > 0 || gso_bytes != RUN_GSO_DEFAULT)) {
    cli_error("run", "%s shapes the emulated links: it needs --net",
              burst_bytes > 0 ? "--burst" : "--gso");
    return 2;
  }
  if (np % per_node != 0) {
    cli_error("run", "-np %d is not divisible by --per-node %d", np, per_node);
    return 2;
  }
  if (node_cpus > 0 && geteuid() != 0) {
    cli_error("run", "--node-cpus needs root (it creates a CPU cgroup per node)");
    return 2;
  }
  char exe[PATH_MAX], mpirun_path[PATH_MAX], self[PATH_MAX];
  char why[384];
  if (cli_find_exe_why(prog[0], exe, sizeof exe, why, sizeof why) != 0) {
    cli_error("run", "program '%s' cannot be run: %s", prog[0], why);
    return 2;
  }
  if (cli_find_exe(mpirun, mpirun_path, sizeof mpirun_path) != 0) {
    cli_error("run", "mpirun not found ('%s'); install Open MPI or pass --mpirun PATH", mpirun);
    return 2;
  }
  /* Ranks start as this very binary, so they must find it by absolute path. */
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    cli_fail("run", "cannot find the gradsync binary: %s", strerror(errno));
    return 2;
  }
  self[n] = '\0';
  /* An elastic job's namespaces are built once, for the most ranks it may
   * have (MAX, or -np when discovery may list more); a launch of S ranks
   * uses nodes 0 .. S/K-1, whichever ranks failed before (the nodes are
   * alike). */
  int most = elastic && eo.max > np ? eo.max : np;
  struct cluster c = {.pid = (int)getpid(), .nodes = (most + per_node - 1) / per_node};
  static struct run_user user; /* static: 2 PATH_MAX strings and 256 groups */
  int as_user = 0;
  if (net) {
    if (geteuid() != 0) {
      cli_error("run", "--net needs root (it creates network namespaces and shapes links)");
      return 2;
    }
    if (find_system_exe("ip", ip_exe, sizeof ip_exe) != 0 ||
        find_system_exe("tc", tc_exe, sizeof tc_exe) != 0) {
      cli_error("run", "--net needs the 'ip' and 'tc' tools (package iproute2) in /usr/sbin, "
                "/sbin, /usr/bin or /bin; PATH is not searched for tools run as root");
      return 2;
    }
    as_user = resolve_sudo_user(&user);
    if (as_user < 0 || (as_user && check_user_access(&user, mpirun_path, self, exe) != 0)) return 2;
    if (as_user && elastic) {
      cli_error("run", "--elastic --net under sudo is not supported: the supervisor would run "
                "mpirun as root, not as %s; run it from a root shell", user.name);
      return 2;
    }
    if (c.nodes > MAX_NODES) {
      cli_error("run", "--net supports at most %d nodes, not %d", MAX_NODES, c.nodes);
      return 2;
    }
  }

  install_handlers();
  /* CPU groups of launchers killed before they removed them (a later
   * --node-cpus run removed them; now any local launch does). */
  run_cpu_clean_stale(c.pid);
  int rc = 0;
  if (net) {
    /* The lock keeps concurrent launchers from picking one subnet. */
    double t0 = now_s();
    int lock = open("/run/gradsync-run.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock >= 0) flock(lock, LOCK_EX);
    clean_stale(c.pid);
    c.subnet = pick_subnet(c.pid);
    if (c.subnet < 0) {
      cli_fail("run", "no free subnet in 10.213.0.0/16");
      rc = 2;
    } else if (cluster_build(&c, rate_bps) != 0) {
      if (!got_signal) cli_fail("run", "could not build the emulated cluster (see above)");
      rc = got_signal ? 128 + got_signal : 2;
    }
    if (lock >= 0) close(lock);
    if (verbose && rc == 0)
      fprintf(stderr, "gradsync run: %d nodes at %s on %s (10.213.%d.0/24), built in %.2f s\n",
              c.nodes, net, c.bridge, c.subnet, now_s() - t0);
  }

  if (rc == 0 && node_cpus > 0 && !got_signal) {
    char prefix[300];
    if (run_cpu_create(c.pid, c.nodes, node_cpus, as_user ? (int)user.uid : -1,
                       as_user ? (int)user.gid : -1, prefix, sizeof prefix) != 0) {
      rc = 2;
    } else {
      setenv("GRADSYNC_RUN_CPU_PREFIX", prefix, 1);
      if (verbose)
        fprintf(stderr, "gradsync run: %d nodes of at most %g cores each (%s*)\n", c.nodes,
                node_cpus, prefix);
    }
  }

  if (rc == 0 && !got_signal) {
    char npbuf[16], kbuf[16], nsprefix[32];
    snprintf(npbuf, sizeof npbuf, "%d", np);
    snprintf(kbuf, sizeof kbuf, "%d", per_node);
    snprintf(nsprefix, sizeof nsprefix, "gs-%d-", c.pid);
    /* mpirun hands ranks a pseudo-terminal for their output whether or
     * not the launcher's output is one: tell them which it is, so progress
     * bars appear on terminals and plain lines in logs. */
    setenv("GRADSYNC_TTY", isatty(STDOUT_FILENO) ? "1" : "0", 1);
    int allow_root = geteuid() == 0 && !as_user;
    if (allow_root) {
      setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    int nenv = 0;
    while (environ[nenv]) nenv++;
    char **margv = calloc((size_t)nprog + 2 * (size_t)nenv + 40, sizeof *margv);
    char *host_list = remote ? run_hosts_mpi_list(&hosts) : NULL;
    char agent[PATH_MAX + 16];
    if (!margv || (remote && !host_list)) {
      cli_fail("run", "out of memory building mpirun's command line");
      free(margv);
      free(host_list);
      return 2;
    }
    int m = 0;
    margv[m++] = mpirun_path;
    /* On one machine ranks may outnumber cores; across hosts and in a
     * Slurm allocation the slots say how many ranks fit, unless asked. */
    if ((!remote && !slurm) || oversubscribe) margv[m++] = "--oversubscribe";
    /* No binding. Open MPI binds each rank to one core where a host's
     * ranks do not outnumber its cores, counting from core 0 on every
     * launch: the ranks of separate jobs on one machine, and the one rank
     * of every emulated node of a --hosts job, all land on core 0 (8
     * one-node jobs at --node-cpus 0.25 each got 0.13 cores, the other
     * core idle), and a rank's progress thread shares its compute
     * thread's core. Horovod launches with --bind-to none for the same
     * reasons. OMPI_MCA_hwloc_base_binding_policy chooses otherwise. */
    if (!getenv("OMPI_MCA_hwloc_base_binding_policy")) {
      margv[m++] = "--bind-to";
      margv[m++] = "none";
    }
    if (np > 0 && !elastic) {
      margv[m++] = "-np";
      margv[m++] = npbuf;
    }
    if (remote && !elastic) {
      margv[m++] = "--host";
      margv[m++] = host_list;
    }
    if (prefix) {
      margv[m++] = "--prefix";
      margv[m++] = (char *)prefix;
    }
    if (ssh_config) {
      snprintf(agent, sizeof agent, "ssh -F %s", ssh_config);
      margv[m++] = "--mca";
      margv[m++] = "plm_rsh_agent";
      margv[m++] = agent;
    }
    if (iface) {
      char *mca[] = {"--mca", "btl_tcp_if_include", (char *)iface,
                     "--mca", "oob_tcp_if_include", (char *)iface};
      for (size_t j = 0; j < sizeof mca / sizeof mca[0]; j++) margv[m++] = mca[j];
    }
    if (remote || discover) {
      /* Ranks on other hosts (given, or listed by discovery) get the
       * environment of their host's daemon
       * (an ssh session's) and only what mpirun forwards: OMPI_* itself,
       * the rest by -x. gradsync's settings must reach every rank (the
       * ranks check that they agree), PATH and LD_LIBRARY_PATH so that
       * a program found here is found there, as with a local run, the
       * sanitizers' settings (ASAN_OPTIONS, ...), and OpenBLAS's and
       * OpenMP's (OPENBLAS_CORETYPE, which gradsync sets itself where
       * OpenBLAS picks narrower kernels than the CPU has, OMP_NUM_THREADS,
       * ...), all of which a local rank inherits too. Open MPI refuses
       * -x beside OMPI_MCA_mca_base_env_list (docs/CLUSTER.md's way to
       * forward more): with it set, these names join its list instead. */
      const char *env_list = getenv("OMPI_MCA_mca_base_env_list");
      char *joined = NULL;
      size_t jlen = 0;
      if (env_list && *env_list) {
        jlen = strlen(env_list);
        joined = malloc(jlen + 1);
        if (joined) memcpy(joined, env_list, jlen + 1);
      }
      for (int j = 0; environ[j]; j++) {
        const char *e = environ[j];
        size_t len = strcspn(e, "=");
        int san = len >= 12 && strncmp(e + len - 11, "SAN_OPTIONS", 11) == 0;
        if (strncmp(e, "GRADSYNC_", 9) == 0 || strncmp(e, "OPENBLAS_", 9) == 0 ||
            strncmp(e, "OMP_", 4) == 0 || (len == 4 && strncmp(e, "PATH", 4) == 0) ||
            (len == 15 && strncmp(e, "LD_LIBRARY_PATH", 15) == 0) || san) {
          if (joined) {
            char *more = realloc(joined, jlen + len + 2);
            if (more == NULL) {
              free(joined);
              cli_fail("run", "out of memory building mpirun's environment list");
              return 2;
            }
            joined = more;
            joined[jlen++] = ';';
            memcpy(joined + jlen, e, len);
            jlen += len;
            joined[jlen] = '\0';
            continue;
          }
          margv[m++] = "-x";
          margv[m] = strndup(e, len);
          if (!margv[m]) {
            cli_fail("run", "out of memory building mpirun's command line");
            return 2;
          }
          m++;
        }
      }
      if (joined) {
        setenv("OMPI_MCA_mca_base_env_list", joined, 1); /* mpirun inherits it */
        free(joined);
      }
    }
    if (net) {
      /* TCP only: vader would join all ranks over shared memory, since to
       * Open MPI they all sit on one host, and bypass the shaped links.
       * Ranks of one node still reach each other over their namespace's own
       * unshaped loopback route. */
      char *mca[] = {"--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", NODE_IFACE,
                     "--mca", "oob_tcp_if_include", c.bridge};
      for (size_t j = 0; j < sizeof mca / sizeof mca[0]; j++) margv[m++] = mca[j];
      /* The ranks reach mpirun's PMIx server across the bridge. */
      setenv("PMIX_MCA_ptl_tcp_remote_connections", "1", 1);
      setenv("PMIX_MCA_ptl_tcp_if_include", c.bridge, 1);
    }
    int first_prog = m;
    if (net || per_node_given || node_cpus > 0) {
      margv[m++] = self;
      margv[m++] = "run";
      margv[m++] = "--exec-in-netns";
      margv[m++] = net ? nsprefix : "-";
      margv[m++] = kbuf;
    }
    for (int j = 0; j < nprog; j++) margv[m++] = prog[j];
    margv[m] = NULL;
    if (verbose && remote)
      fprintf(stderr, "gradsync run: %d rank%s on %d host%s (%ld slot%s) from %s\n", np,
              np == 1 ? "" : "s", hosts.n, hosts.n == 1 ? "" : "s", hosts.slots,
              hosts.slots == 1 ? "" : "s", hosts_arg ? "--hosts" : hostfile);
    if (verbose && slurm)
      fprintf(stderr, "gradsync run: inside Slurm job %s (nodes %s): Open MPI places the "
              "ranks on the allocation%s\n", slurm, slurm_nodes,
              np > 0 ? "" : ", one per slot (no -np)");
    if (verbose || dry_run) {
      FILE *f = dry_run ? stdout : stderr;
      if (!dry_run) fprintf(f, "+ ");
      /* The environment mpirun gets from the launcher, as a shell's
       * assignments, so that --dry-run's line runs as it stands. */
      fprintf(f, "GRADSYNC_TTY=%s ", getenv("GRADSYNC_TTY"));
      if (allow_root) fprintf(f, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ");
      for (int j = 0; margv[j]; j++) {
        if (j) fputc(' ', f);
        print_shell_word(f, margv[j]);
      }
      fputc('\n', f);
    }
    /* An elastic job starts on the hosts that answer, as long as they hold
     * its fewest ranks (the supervisor leaves out a host that fails later
     * the same way); until 2026-12-06 one host down refused the job. */
    if (elastic && remote && !dry_run) {
      int *ok = calloc((size_t)hosts.n, sizeof *ok);
      if (ok && check_ssh_hosts(&hosts, hostfile, ssh_config, ok) != 0 && !got_signal) {
        int k = 0, left = 0;
        long slots = 0;
        for (int j = 0; j < hosts.n; j++) {
          if (!ok[j]) {
            left++;
            continue;
          }
          hosts.host[k++] = hosts.host[j];
          slots += hosts.host[j].slots;
        }
        if (slots < eo.min) {
          cli_fail("run", "--elastic %s: the hosts that answered hold %ld slot%s, fewer than "
                   "the job's fewest ranks, %d", elastic, slots, slots == 1 ? "" : "s",
                   eo.min);
          free(ok);
          free_margv(margv, first_prog, host_list);
          run_hosts_free(&hosts);
          return 2;
        }
        hosts.n = k;
        hosts.slots = slots;
        if (np > slots) np = (int)slots;
        fprintf(stderr, "gradsync run: --elastic: starting on %d host%s (%ld slot%s) without "
                "the %d %s above that did not answer\n", k, k == 1 ? "" : "s", slots,
                slots == 1 ? "" : "s", left, left == 1 ? "host" : "hosts");
      }
      free(ok);
      if (got_signal) {
        free_margv(margv, first_prog, host_list);
        run_hosts_free(&hosts);
        return 128 + got_signal;
      }
    } else if (dry_run || (remote && check_ssh_hosts(&hosts, hostfile, ssh_config, NULL) != 0)) {
      free_margv(margv, first_prog, host_list);
      run_hosts_free(&hosts);
      return dry_run ? 0 : got_signal ? 128 + got_signal : 2;
    }
    if (elastic) {
      /* The supervisor relaunches the program after first_prog: with the
       * emulated nodes, the wrapper that enters a rank's namespace too. */
      int wrapped = m - first_prog - nprog;
      eo.net = net;
      eo.per_node = per_node;
      rc = run_elastic_job(&eo, elastic, discover, events, np, remote, &hosts, margv,
                           first_prog, nprog + wrapped, hostfile, ssh_config);
      free_margv(margv, first_prog, host_list);
      run_hosts_free(&hosts);
      if (node_cpus > 0) run_cpu_destroy(c.pid);
      if (net) cluster_destroy(&c);
      return rc;
    }
    if (verbose && as_user)
      fprintf(stderr, "gradsync run: mpirun and the ranks run as %s (uid %d, gid %d)\n",
              user.name, (int)user.uid, (int)user.gid);
    /* mpirun stays in our process group so that it can read the terminal
     * and receives a Ctrl-C together with us. If we are killed outright, it
     * gets SIGTERM from the kernel (PR_SET_PDEATHSIG, set after the change
     * of user, which clears it) and stops the ranks; the next run removes
     * the namespaces left behind. */
    /* mpirun's stderr comes through a pipe, read for a rank's MPI_Abort
     * (wait_mpirun) and exit status (mpirun_err); its stdout and stdin stay
     * ours. */
    mpirun_err me = {.fd = -1};
    gs_launch_end_init(&me.end);
    int errp[2] = {-1, -1};
    if (pipe2(errp, O_CLOEXEC) != 0) errp[0] = errp[1] = -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
      if (errp[1] >= 0) dup2(errp[1], 2);
      const char *what = NULL;
      if (as_user && become_user(&user, &what) != 0) {
        cli_fail("run", "cannot run mpirun as %s (uid %d): %s: %s", user.name, (int)user.uid,
                  what, strerror(errno));
        _exit(126);
      }
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() == parent) execv(mpirun_path, margv);
      _exit(127);
    }
    int err = errno;
    if (errp[1] >= 0) close(errp[1]);
    me.fd = errp[0];
    free_margv(margv, first_prog, host_list);
    run_hosts_free(&hosts);
    if (pid < 0) {
      cli_fail("run", "cannot start %s: %s", mpirun_path, strerror(err));
      rc = 2;
    } else {
      mpirun_pid = pid;
      if (got_signal) kill(pid, got_signal); /* arrived before mpirun_pid was set */
      int status = 0, hung = 0;
      /* Our stderr closed (`2>&1 | head`) must not kill this process with a
       * SIGPIPE while it passes mpirun's on: blocked (here only, after the
       * fork: mpirun keeps its own), the write fails with EPIPE instead,
       * and a SIGPIPE left pending is taken before the mask is restored. */
      sigset_t pipe_set, old_mask;
      sigemptyset(&pipe_set);
      sigaddset(&pipe_set, SIGPIPE);
      sigprocmask(SIG_BLOCK, &pipe_set, &old_mask);
      int waited = wait_mpirun(pid, &status, &hung, &me);
      while (sigtimedwait(&pipe_set, NULL, &(struct timespec){0, 0}) == SIGPIPE) {
      }
      sigprocmask(SIG_SETMASK, &old_mask, NULL);
      if (waited != 0) {
        cli_fail("run", "lost track of mpirun: %s", strerror(errno));
        rc = 2;
      } else if (got_signal) {
        cli_fail("run", "interrupted by signal %d; ranks stopped", (int)got_signal);
        rc = 128 + got_signal;
      } else if (hung == 2) {
        cli_fail("run", "the job ended with rank %d's MPI_Abort; mpirun killed",
                 me.end.abort_rank);
        rc = 1;
      } else if (hung) {
        rc = gs_launch_status_code(status);
        if (rc != 0) cli_fail("run", "the first of them to fail ended with status %d", rc);
      } else if (WIFSIGNALED(status) && (me.end.exit_code > 0 || me.end.sig_rank >= 0)) {
        /* mpirun died after it said a rank failed: the rank's status is
         * the run's (the crash is Open MPI's, in its clean-up). */
        const int code = me.end.exit_code > 0 ? me.end.exit_code : 128 + me.end.sig_num;
        const int who = me.end.exit_code > 0 ? me.end.exit_rank : me.end.sig_rank;
        if (who >= 0)
          cli_fail("run", "rank %d %s %d; mpirun then died of signal %d", who,
                   me.end.exit_code > 0 ? "exited with status" : "was killed by signal",
                   me.end.exit_code > 0 ? code : me.end.sig_num, WTERMSIG(status));
        else
          cli_fail("run", "a rank exited with status %d; mpirun then died of signal %d", code,
                   WTERMSIG(status));
        rc = code;
      } else if (WIFSIGNALED(status)) {
        cli_fail("run", "mpirun was killed by signal %d", WTERMSIG(status));
        rc = 128 + WTERMSIG(status);
      } else if (WEXITSTATUS(status) != 0 && me.exec_failed) {
        cli_fail("run", "a host could not find or execute the program (mpirun's message "
                 "above names it): exit 127, not mpirun's %d", WEXITSTATUS(status));
        rc = 127;
      } else if (WEXITSTATUS(status) != 0 && (remote || slurm)) {
        cli_fail("run", "mpirun exited with status %d: a rank failed, or a host's daemon "
                 "could not start (see above)", WEXITSTATUS(status));
        rc = WEXITSTATUS(status);
      } else if (WEXITSTATUS(status) != 0) {
        cli_fail("run", "rank program exited with status %d", WEXITSTATUS(status));
        rc = WEXITSTATUS(status);
      }
      mpirun_pid = 0;
    }
    if (me.fd >= 0) close(me.fd);
  } else if (rc == 0) {
    rc = 128 + got_signal;
  }

  if (node_cpus > 0) run_cpu_destroy(c.pid);
  if (net) {
    double t0 = now_s();
    cluster_destroy(&c);
    if (verbose) fprintf(stderr, "gradsync run: cluster removed in %.2f s\n", now_s() - t0);
  }
  return rc;
}
