/*
 * What became of a launcher's children, read from /proc: the supervisors
 * (`gradsync run`, the elastic one) use it to notice an mpirun that stays
 * after every rank it started has ended. Open MPI 4.1's mpirun was seen to
 * deadlock so, in its PMIx server's finalize, with its ranks left unreaped
 * (zombies) for good; a wait on it alone never ends.
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch_internal.h"

int gs_launch_proc_stat(pid_t pid, gs_launch_proc *out) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t k = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (k <= 0) return -1;
  buf[k] = '\0';
  char *p = strrchr(buf, ')'); /* the name may hold spaces */
  if (p == NULL || p[1] != ' ') return -1;
  /* After ") ": field 3 (state), 4 (ppid), 6 (session), ... 22 (start
   * time), ... 52 (exit_code, in waitpid's form; Linux 3.5 and later). */
  memset(out, 0, sizeof *out);
  out->exit_status = -1;
  char *s = p + 2, *end;
  for (int field = 3; *s != '\0' && field <= 52; field++) {
    if (field == 3) {
      out->state = *s;
    } else if (field == 4) {
      out->ppid = (pid_t)strtol(s, &end, 10);
    } else if (field == 6) {
      out->session = (int)strtol(s, &end, 10);
    } else if (field == 22) {
      out->start = strtoull(s, &end, 10);
    } else if (field == 52) {
      out->exit_status = (int)strtol(s, &end, 10);
    }
    while (*s != '\0' && *s != ' ') s++;
    while (*s == ' ') s++;
  }
  return out->state != '\0' ? 0 : -1;
}

void gs_launch_children_of(pid_t parent, gs_launch_children *out) {
  memset(out, 0, sizeof *out);
  DIR *d = opendir("/proc");
  if (d == NULL) return;
  for (struct dirent *de; (de = readdir(d)) != NULL;) {
    if (!isdigit((unsigned char)de->d_name[0])) continue;
    gs_launch_proc p;
    if (gs_launch_proc_stat((pid_t)atoi(de->d_name), &p) != 0 || p.ppid != parent) continue;
    out->children++;
    if (p.state != 'Z' && p.state != 'X') continue;
    out->ended++;
    int st = p.exit_status;
    if (st > 0 && out->bad_status == 0) out->bad_status = st;
  }
  closedir(d);
}

int gs_launch_stuck(pid_t parent, double now, double linger_s, double *since,
                    gs_launch_children *ch) {
  gs_launch_children_of(parent, ch);
  if (ch->children == 0 || ch->ended < ch->children) {
    *since = 0;
    return 0;
  }
  if (*since == 0) *since = now;
  return now - *since > linger_s;
}

/* Whether pid runs a remote launch agent (/proc/PID/comm: ssh, rsh or
 * srun), the link mpirun keeps to a daemon on another host. */
static int launch_agent(pid_t pid) {
  char path[64], comm[32] = "";
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  if (fgets(comm, sizeof comm, f) == NULL) comm[0] = '\0';
  fclose(f);
  comm[strcspn(comm, "\n")] = '\0';
  return strcmp(comm, "ssh") == 0 || strcmp(comm, "rsh") == 0 || strcmp(comm, "srun") == 0;
}

void gs_launch_note_children(pid_t parent, gs_launch_pid *list, int *n, int max) {
  DIR *d = opendir("/proc");
  if (d == NULL) return;
  for (struct dirent *de; (de = readdir(d)) != NULL && *n < max;) {
    if (!isdigit((unsigned char)de->d_name[0])) continue;
    pid_t pid = (pid_t)atoi(de->d_name);
    gs_launch_proc p;
    if (gs_launch_proc_stat(pid, &p) != 0 || p.ppid != parent) continue;
    int known = 0;
    for (int i = 0; i < *n && !known; i++) known = list[i].pid == pid && list[i].start == p.start;
    if (!known) list[(*n)++] = (gs_launch_pid){pid, p.start, launch_agent(pid)};
  }
  closedir(d);
}

int gs_launch_noted_alive(const gs_launch_pid *c) {
  gs_launch_proc p;
  return gs_launch_proc_stat(c->pid, &p) == 0 && p.start == c->start && p.state != 'Z' &&
         p.state != 'X';
}

int gs_launch_kill_noted(const gs_launch_pid *list, int n) {
  int killed = 0;
  for (int i = 0; i < n; i++)
    if (gs_launch_noted_alive(&list[i]) && kill(list[i].pid, SIGKILL) == 0) killed++;
  return killed;
}

int gs_launch_status_code(int status) {
  if ((status & 0x7f) == 0) return (status >> 8) & 0xff; /* exited */
  return 128 + (status & 0x7f);                           /* killed by a signal */
}

int gs_launch_abort_line(const char *line, int *rank) {
  const char *p;
  int r = -1, n = 0;
  if ((p = strstr(line, "MPI_ABORT was invoked on rank ")) &&
      sscanf(p, "MPI_ABORT was invoked on rank %d", &r) == 1) {
    *rank = r;
    return 1;
  }
  if ((p = strstr(line, "gradsync: rank ")) &&
      sscanf(p, "gradsync: rank %d: fatal:%n", &r, &n) == 1 && n > 0) {
    *rank = r;
    return 1;
  }
  return 0;
}

void gs_launch_end_init(gs_launch_end *e) {
  memset(e, 0, sizeof *e);
  e->sig_rank = e->sig_num = e->exit_rank = e->exit_code = e->abort_rank = -1;
}

int gs_launch_end_line(gs_launch_end *e, const char *s) {
  const char *p;
  int r, sig, pid, a, b;
  char node[GS_LAUNCH_HOST_MAX + 1];
  if ((p = strstr(s, "process rank ")) &&
      sscanf(p, "process rank %d with PID %d on node %253s exited on signal %d", &r, &pid, node,
             &sig) == 4) {
    if (e->sig_rank < 0) {
      e->sig_rank = r;
      e->sig_num = sig;
      snprintf(e->sig_node, sizeof e->sig_node, "%s", node);
    }
  } else if ((p = strstr(s, "Process name:")) &&
             sscanf(p, "Process name: [[%d,%d],%d]", &a, &b, &r) == 3) {
    if (e->exit_rank < 0) e->exit_rank = r;
  } else if ((p = strstr(s, "Exit code:")) && sscanf(p, "Exit code: %d", &a) == 1) {
    if (e->exit_code < 0) e->exit_code = a;
  } else if ((p = strstr(s, "Remote daemon:")) && (p = strstr(p, " on node ")) &&
             sscanf(p, " on node %253s", node) == 1) {
    if (!e->lost_node[0]) snprintf(e->lost_node, sizeof e->lost_node, "%s", node);
  } else if (gs_launch_abort_line(s, &r)) {
    if (e->abort_rank < 0) e->abort_rank = r;
  } else {
    return 0;
  }
  return 1;
}
