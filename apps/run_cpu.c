/* gradsync run --node-cpus C: each node's ranks share at most C cores.
 *
 * The emulated cluster shapes each node's link, but its nodes share the
 * host's cores: a rank that sleeps (a straggler on purpose, a rank waiting
 * on the network) hands its core to the other nodes' ranks, which a real
 * node could not. With --node-cpus every node gets a CPU cgroup of its own
 * whose CFS quota is C cores (C * period per period), so a node computes at
 * most at that rate whatever the others do.
 *
 * Layout: <root>/gradsync-<pid>/node<i>, <root> being the cpu controller's
 * mount of cgroup v1 (/sys/fs/cgroup/cpu) or the cgroup v2 hierarchy when
 * its root offers the cpu controller; quotas in cpu.cfs_quota_us (v1) or
 * cpu.max (v2). The launcher creates and removes the groups (as root); each
 * rank moves itself into its node's group before it execs the program
 * (run --exec-in-netns reads GRADSYNC_RUN_CPU_PREFIX), so the program and
 * every thread and child it starts are counted there. Groups of launchers
 * that died are removed by the next run. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define CPU_V1 "/sys/fs/cgroup/cpu"
#define CPU_V2 "/sys/fs/cgroup"
/* The CFS period. A node's ranks may spend its quota (C x period) at any
 * pace within a period and then stop until the next: a rank that waits on
 * a peer by polling, as MPI's progress loop does, spends it waiting, and
 * the node then stands still for the rest of the period, as no machine of
 * C cores would. Over 100 ms (the kernel's default, and Kubernetes') a
 * 3-node CNN job at 0.22 cores a node took 30.4 s from launch to exit, 15.8 s
 * of it outside the program's clock (MPI's start-up and the cost model's
 * exchanges, where every rank polls), against 25.7 s and 11.5 s over 10 ms;
 * on 6 nodes 0.83x; the steps alike (bench/results/cluster_node_cpus_period.md);
 * the uneven trace under the cluster manager, two runs each on one host:
 * static's mean JCT 0.89x, dorm's and goodput's within their runs' spread
 * (docs/EMULATED_CLUSTER.md). 10 ms, or longer where C x 10 ms is below the
 * kernel's least quota (1 ms); GRADSYNC_CPU_PERIOD_US sets another (1000 to
 * 1000000). */
#define PERIOD_US 10000L
#define QUOTA_MIN_US 1000L
#define PERIOD_MAX_US 1000000L

/* The period for C cores, or -1 with a message for a bad
 * GRADSYNC_CPU_PERIOD_US. */
static long cpu_period_us(double cpus) {
  long period = PERIOD_US;
  const char *s = getenv("GRADSYNC_CPU_PERIOD_US");
  if (s && *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < QUOTA_MIN_US || v > PERIOD_MAX_US) {
      cli_error("run", "GRADSYNC_CPU_PERIOD_US=%s: expected microseconds from %ld to %ld", s,
                QUOTA_MIN_US, PERIOD_MAX_US);
      return -1;
    }
    period = v;
  }
  while (cpus * (double)period < (double)QUOTA_MIN_US && period < PERIOD_MAX_US) period *= 2;
  return period < PERIOD_MAX_US ? period : PERIOD_MAX_US;
}

/* The hierarchy to use: 1 for v1, 2 for v2, 0 for none. */
static int cpu_hierarchy(const char **root) {
  char buf[256] = "";
  if (access(CPU_V1 "/cpu.cfs_quota_us", W_OK) == 0) {
    *root = CPU_V1;
    return 1;
  }
  FILE *f = fopen(CPU_V2 "/cgroup.controllers", "r");
  if (f) {
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    for (char *t = ok ? strtok(buf, " \n") : NULL; t; t = strtok(NULL, " \n")) {
      if (strcmp(t, "cpu") == 0) {
        *root = CPU_V2;
        return 2;
      }
    }
  }
  return 0;
}

static int write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  int ok = fputs(text, f) >= 0;
  ok = (fclose(f) == 0) && ok;
  return ok ? 0 : -1;
}

/* Kills what is left in one node group, then removes it (a group with
 * processes cannot be removed; they die within milliseconds of SIGKILL). */
static void remove_group(const char *dir) {
  char path[600], line[32];
  if (snprintf(path, sizeof path, "%s/cgroup.procs", dir) >= (int)sizeof path) return;
  for (int tries = 0; tries < 100; tries++) {
    FILE *f = fopen(path, "r");
    int any = 0;
    while (f && fgets(line, sizeof line, f)) {
      int pid = atoi(line);
      if (pid > 0) {
        kill(pid, SIGKILL);
        any = 1;
      }
    }
    if (f) fclose(f);
    if (!any && rmdir(dir) == 0) return;
    if (!any && errno == ENOENT) return;
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
  }
  cli_fail("run", "could not remove CPU group %s: %s", dir, strerror(errno));
}

static void remove_run(const char *run_dir) {
  DIR *d = opendir(run_dir);
  char path[600];
  for (struct dirent *e; d && (e = readdir(d));) {
    int node, len = 0;
    if (sscanf(e->d_name, "node%d%n", &node, &len) == 1 && e->d_name[len] == '\0') {
      if (snprintf(path, sizeof path, "%s/%s", run_dir, e->d_name) < (int)sizeof path)
        remove_group(path);
    }
  }
  if (d) closedir(d);
  if (rmdir(run_dir) != 0 && errno != ENOENT)
    cli_fail("run", "could not remove CPU group %s: %s", run_dir, strerror(errno));
}

/* Groups of earlier runs whose launcher is gone. */
static void clean_stale(const char *root, int self) {
  DIR *d = opendir(root);
  char path[600];
  for (struct dirent *e; d && (e = readdir(d));) {
    int pid, len = 0;
    if (sscanf(e->d_name, "gradsync-%d%n", &pid, &len) == 1 && e->d_name[len] == '\0' &&
        pid != self && pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
      if (snprintf(path, sizeof path, "%s/%s", root, e->d_name) < (int)sizeof path)
        remove_run(path);
    }
  }
  if (d) closedir(d);
}

void run_cpu_clean_stale(int self) {
  const char *root = NULL;
  if (cpu_hierarchy(&root) != 0) clean_stale(root, self);
}

int run_cpu_create(int pid, int nodes, double cpus, int uid, int gid, char *prefix,
                   size_t len) {
  const char *root = NULL;
  int v = cpu_hierarchy(&root);
  if (v == 0) {
    cli_fail("run", "--node-cpus needs a writable CPU cgroup: cgroup v1's %s, or cgroup v2 "
             "with the cpu controller at %s (run as root)", CPU_V1, CPU_V2);
    return -1;
  }
  clean_stale(root, pid);
  char run_dir[256], dir[300], file[400], text[64];
  snprintf(run_dir, sizeof run_dir, "%s/gradsync-%d", root, pid);
  if (mkdir(run_dir, 0755) != 0 && errno != EEXIST) {
    cli_fail("run", "cannot create CPU group %s: %s", run_dir, strerror(errno));
    return -1;
  }
  if (v == 2) { /* let the run's groups, and their children, set cpu.max */
    write_file(CPU_V2 "/cgroup.subtree_control", "+cpu");
    snprintf(file, sizeof file, "%s/cgroup.subtree_control", run_dir);
    write_file(file, "+cpu");
  }
  long period = cpu_period_us(cpus);
  if (period < 0) {
    remove_run(run_dir);
    return -1;
  }
  long quota = (long)(cpus * (double)period + 0.5);
  if (quota < QUOTA_MIN_US) quota = QUOTA_MIN_US;
  for (int i = 0; i < nodes; i++) {
    snprintf(dir, sizeof dir, "%s/node%d", run_dir, i);
    int bad = mkdir(dir, 0755) != 0 && errno != EEXIST;
    if (!bad && v == 1) {
      snprintf(file, sizeof file, "%s/cpu.cfs_period_us", dir);
      snprintf(text, sizeof text, "%ld", period);
      bad = write_file(file, text) != 0;
      snprintf(file, sizeof file, "%s/cpu.cfs_quota_us", dir);
      snprintf(text, sizeof text, "%ld", quota);
      bad = bad || write_file(file, text) != 0;
    } else if (!bad) {
      snprintf(file, sizeof file, "%s/cpu.max", dir);
      snprintf(text, sizeof text, "%ld %ld", quota, period);
      bad = write_file(file, text) != 0;
    }
    /* Ranks run as the invoking user under sudo: they must be able to
     * move themselves in. */
    snprintf(file, sizeof file, "%s/cgroup.procs", dir);
    if (!bad && uid >= 0) bad = chown(file, (uid_t)uid, (gid_t)gid) != 0;
    if (bad) {
      cli_fail("run", "cannot set up CPU group %s (quota %.3g cores): %s", dir, cpus,
               strerror(errno));
      remove_run(run_dir);
      return -1;
    }
  }
  snprintf(prefix, len, "%s/node", run_dir);
  return 0;
}

void run_cpu_destroy(int pid) {
  const char *root = NULL;
  if (cpu_hierarchy(&root) == 0) return;
  char run_dir[256];
  snprintf(run_dir, sizeof run_dir, "%s/gradsync-%d", root, pid);
  remove_run(run_dir);
}

int run_cpu_enter(const char *prefix, int node) {
  char file[600], text[32];
  if (snprintf(file, sizeof file, "%s%d/cgroup.procs", prefix, node) >= (int)sizeof file) {
    errno = ENAMETOOLONG;
    return -1;
  }
  snprintf(text, sizeof text, "%d", (int)getpid());
  return write_file(file, text);
}
