/* Host discovery for elastic jobs: the script's format (Horovod's: one
 * HOST:SLOTS a line), running the script within a bound, and reading the
 * job's last commit from its checkpoint description.
 *
 * A discovery script is the cluster's word on which hosts may run ranks; it
 * may fail or print garbage (a half-written file, a scheduler's error). The
 * supervisor then keeps the world it has, so everything here reports a
 * failure as a message naming the script and the line, never as a crash. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gs_internal.h"
#include "launch_internal.h"

extern char **environ;

#define DISCOVER_MAX_BYTES (1 << 20) /* a script's output at most */
#define DISCOVER_MAX_HOSTS 65536
#define DISCOVER_MAX_SLOTS 65536

static int host_char_ok(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '.' || ch == '-' || ch == '_';
}

/* One line, comment cut and blanks trimmed: "" (nothing), HOST or HOST:N. */
static gs_status parse_line(char *s, int line, gs_launch_host *out, int *has) {
  *has = 0;
  while (*s == ' ' || *s == '\t' || *s == '\r') s++;
  size_t len = strlen(s);
  while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r'))
    s[--len] = '\0';
  if (len == 0) return GS_OK;
  char shown[64];
  snprintf(shown, sizeof shown, "%.60s", s);
  for (char *p = shown; *p; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
  char *colon = strchr(s, ':');
  long slots = 1;
  int colons = 0;
  for (const char *p = s; *p; p++) colons += *p == ':';
  if (s[0] == '[' || strstr(s, "::") || colons >= 3) /* "h:4:5" is bad slots */
    return gs_error(GS_ERR_PARSE, "line %d: '%s': an IPv6 address is not supported (host "
                    "names and IPv4 addresses only: give the host a name that resolves to "
                    "it)", line, shown);
  if (colon) {
    *colon = '\0';
    char *end = NULL;
    errno = 0;
    slots = strtol(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || errno || *end || slots < 1 ||
        slots > DISCOVER_MAX_SLOTS)
      return gs_error(GS_ERR_PARSE, "line %d: '%s': the slots must be a whole number from 1 "
                      "to %d (a line is HOST:SLOTS)", line, shown, DISCOVER_MAX_SLOTS);
  }
  size_t hl = strlen(s);
  if (hl == 0 || hl > GS_LAUNCH_HOST_MAX || s[0] == '-' || s[0] == '.')
    return gs_error(GS_ERR_PARSE, "line %d: '%s': not a host name (a line is HOST:SLOTS)", line,
                    shown);
  for (size_t i = 0; i < hl; i++)
    if (!host_char_ok(s[i]))
      return gs_error(GS_ERR_PARSE, "line %d: '%s': not a host name: letters, digits, '.', '-' "
                      "and '_' only (a line is HOST:SLOTS)", line, shown);
  snprintf(out->name, sizeof out->name, "%s", s);
  out->slots = (int)slots;
  *has = 1;
  return GS_OK;
}

gs_status gs_launch_hosts_parse(const char *text, gs_launch_host **hosts, int *n) {
  *hosts = NULL;
  *n = 0;
  if (!text) return gs_error(GS_ERR_INVALID_ARG, "no host list");
  size_t len = strlen(text);
  char *copy = gs_malloc(len + 1);
  if (!copy) return GS_ERR_NOMEM;
  memcpy(copy, text, len + 1);
  gs_launch_host *list = NULL;
  int count = 0, cap = 0, line = 0;
  gs_status st = GS_OK;
  for (char *p = copy, *next; p && st == GS_OK; p = next) {
    next = strchr(p, '\n');
    if (next) *next++ = '\0';
    line++;
    char *hash = strchr(p, '#');
    if (hash) *hash = '\0';
    gs_launch_host h;
    int has;
    if ((st = parse_line(p, line, &h, &has)) != GS_OK || !has) continue;
    for (int i = 0; i < count; i++)
      if (strcasecmp(list[i].name, h.name) == 0) {
        st = gs_error(GS_ERR_PARSE, "line %d: host '%s' is listed twice; give each host once "
                      "with all its slots", line, h.name);
        break;
      }
    if (st != GS_OK) break;
    if (count == DISCOVER_MAX_HOSTS) {
      st = gs_error(GS_ERR_PARSE, "line %d: more than %d hosts", line, DISCOVER_MAX_HOSTS);
      break;
    }
    if (count == cap) {
      cap = cap ? 2 * cap : 16;
      gs_launch_host *grown = gs_malloc((size_t)cap * sizeof *grown);
      if (!grown) {
        st = GS_ERR_NOMEM;
        break;
      }
      if (count) memcpy(grown, list, (size_t)count * sizeof *grown);
      gs_free(list);
      list = grown;
    }
    list[count++] = h;
  }
  gs_free(copy);
  if (st != GS_OK) {
    gs_free(list);
    return st;
  }
  *hosts = list;
  *n = count;
  return GS_OK;
}

int launch_discover_start(launch_discovery *d, const char *script, double timeout_s,
                          int err_fd, char *why, size_t why_len) {
  memset(d, 0, sizeof *d);
  d->fd = -1;
  d->script = script;
  d->timeout_s = timeout_s;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    snprintf(why, why_len, "discovery script %s: cannot make a pipe: %s", script,
             strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  if (err_fd != 2) posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  /* A process group of its own, so that a script that times out is ended
   * with what it started (a `sleep` it waits on would outlive it). */
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&at, 0);
  char *argv[] = {(char *)script, NULL};
  int err = posix_spawn(&d->pid, script, &fa, &at, argv, environ);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (err) {
    close(fds[0]);
    snprintf(why, why_len, "discovery script %s: cannot run it: %s", script, strerror(err));
    return -1;
  }
  int fl = fcntl(fds[0], F_GETFL);
  if (fl >= 0) fcntl(fds[0], F_SETFL, fl | O_NONBLOCK);
  d->fd = fds[0];
  d->buf = malloc(DISCOVER_MAX_BYTES + 1);
  d->deadline = gs_now() + timeout_s;
  d->running = 1;
  return 0;
}

/* Ends the script (its process group) and reaps it. */
static void discover_reap(launch_discovery *d, int kill_it, int *status) {
  if (d->fd >= 0) close(d->fd);
  d->fd = -1;
  if (kill_it) kill(-d->pid, SIGKILL);
  double wait_end = gs_now() + 2;
  pid_t r;
  while ((r = waitpid(d->pid, status, WNOHANG)) == 0 && gs_now() < wait_end)
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  if (r == 0) { /* closed its output but lingers: end it */
    kill(-d->pid, SIGKILL);
    while (waitpid(d->pid, status, 0) < 0 && errno == EINTR) {
    }
  }
  d->running = 0;
}

void launch_discover_cancel(launch_discovery *d) {
  if (!d->running) return;
  int status;
  discover_reap(d, 1, &status);
  free(d->buf);
  d->buf = NULL;
}

int launch_discover_step(launch_discovery *d, int wait_ms, gs_launch_host **hosts, int *n,
                         char *why, size_t why_len) {
  *hosts = NULL;
  *n = 0;
  int timed_out = 0;
  for (;;) {
    double left = d->deadline - gs_now();
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    int ms = (int)(left * 1000) + 1;
    struct pollfd p = {d->fd, POLLIN, 0};
    int r = poll(&p, 1, ms < wait_ms ? ms : wait_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      if (gs_now() < d->deadline) return 0; /* not done yet */
      continue;
    }
    char chunk[4096];
    ssize_t k = read(d->fd, chunk, sizeof chunk);
    if (k < 0 && (errno == EINTR)) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (k <= 0) break;
    if (!d->buf || d->used + (size_t)k > DISCOVER_MAX_BYTES) {
      d->too_long = 1;
      continue; /* drain: the script must not block on a full pipe */
    }
    memcpy(d->buf + d->used, chunk, (size_t)k);
    d->used += (size_t)k;
  }
  int status = 0;
  discover_reap(d, timed_out, &status);
  const char *script = d->script;
  int rc = -1;
  if (timed_out)
    snprintf(why, why_len, "discovery script %s did not finish within %.0f s", script,
             d->timeout_s);
  else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    snprintf(why, why_len, "discovery script %s %s %d", script,
             WIFEXITED(status) ? "exited with status" : "was killed by signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  else if (!d->buf || d->too_long)
    snprintf(why, why_len, "discovery script %s printed more than %d bytes", script,
             DISCOVER_MAX_BYTES);
  else if (memchr(d->buf, '\0', d->used))
    snprintf(why, why_len, "discovery script %s printed a NUL byte: not host:slots lines",
             script);
  else {
    d->buf[d->used] = '\0';
    if (gs_launch_hosts_parse(d->buf, hosts, n) != GS_OK)
      snprintf(why, why_len, "discovery script %s: %s", script, gs_last_error());
    else
      rc = 1;
  }
  free(d->buf);
  d->buf = NULL;
  return rc;
}

static double file_mtime(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  return (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
}

int gs_launch_commit_stat(const char *dir, char *path, size_t path_len, double *mtime) {
  char a[4096], b[4096];
  snprintf(a, sizeof a, "%s/checkpoint.json", dir);
  snprintf(b, sizeof b, "%s/dlrm.json", dir);
  double ta = file_mtime(a), tb = file_mtime(b);
  if (ta < 0 && tb < 0) return -1;
  snprintf(path, path_len, "%s", tb > ta ? b : a);
  *mtime = tb > ta ? tb : ta;
  return 0;
}

static long num_or(const cJSON *o, const char *key, long dflt) {
  const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
  return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? (long)v->valuedouble : dflt;
}

int gs_launch_read_commit(const char *dir, gs_launch_commit *out) {
  memset(out, 0, sizeof *out);
  if (gs_launch_commit_stat(dir, out->path, sizeof out->path, &out->mtime) != 0) return -1;
  char *text = NULL;
  size_t len = 0;
  if (gs__read_text(out->path, "checkpoint description", 1 << 20, &text, &len) != GS_OK)
    return -1;
  cJSON *m = cJSON_Parse(text);
  gs_free(text);
  if (!m) return -1;
  int ok = cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(m, "epoch"));
  out->epoch = num_or(m, "epoch", 0);
  const cJSON *ep = cJSON_GetObjectItemCaseSensitive(m, "epochs");
  out->epochs = cJSON_IsNumber(ep) && ep->valuedouble > 0 ? ep->valuedouble : 0;
  const cJSON *run = cJSON_GetObjectItemCaseSensitive(m, "run");
  if (ok && cJSON_IsObject(run)) {
    /* The DLRM manifest: the global step, its epoch and steps an epoch. */
    long step = num_or(m, "step", -1), spe = num_or(run, "steps_per_epoch", 0);
    long gb = num_or(run, "global_batch", 0);
    ok = step >= 0 && spe > 0 && gb > 0;
    out->global_step = step;
    out->global_batch = gb;
    out->epoch_samples = spe * gb;
    out->samples_in_epoch = (step - out->epoch * spe) * gb;
  } else if (ok) {
    /* gradsync train's: its data's samples and global batch. */
    long gb = num_or(m, "global_batch", 0);
    long ds = num_or(cJSON_GetObjectItemCaseSensitive(m, "data"), "samples", 0);
    long per_epoch = gb > 0 ? ds / gb : 0;
    out->samples_in_epoch = num_or(m, "samples_in_epoch", 0);
    out->global_batch = gb;
    out->epoch_samples = ds;
    out->global_step = gb > 0 ? out->epoch * per_epoch + out->samples_in_epoch / gb : -1;
  }
  cJSON_Delete(m);
  if (!ok) memset(out, 0, sizeof *out);
  return ok ? 0 : -1;
}

int gs_launch_read_report(const char *path, gs_launch_commit *out) {
  memset(out, 0, sizeof *out);
  char *text = NULL;
  size_t len = 0;
  double mtime = file_mtime(path);
  if (mtime < 0 || gs__read_text(path, "progress report", 1 << 20, &text, &len) != GS_OK)
    return -1;
  cJSON *m = cJSON_Parse(text);
  gs_free(text);
  const char *keys[4] = {"epoch", "samples_in_epoch", "epoch_samples", "epochs"};
  double v[4];
  int ok = m != NULL;
  for (int i = 0; i < 4 && ok; i++) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(m, keys[i]);
    ok = cJSON_IsNumber(x) && isfinite(x->valuedouble) && x->valuedouble >= 0 &&
         x->valuedouble < 1e15;
    if (ok) v[i] = x->valuedouble;
  }
  ok = ok && v[2] >= 1 && v[3] > 0;
  if (ok) {
    out->epoch = (long)v[0];
    out->samples_in_epoch = (long)v[1];
    out->epoch_samples = (long)v[2];
    out->epochs = v[3];
    long gb = num_or(m, "global_batch", 0);
    out->global_batch = gb > 0 ? gb : 0;
    out->global_step = gb > 0 ? out->epoch * (out->epoch_samples / gb) + out->samples_in_epoch / gb
                              : -1;
    out->mtime = mtime;
    snprintf(out->path, sizeof out->path, "%s", path);
  }
  cJSON_Delete(m);
  if (!ok) memset(out, 0, sizeof *out);
  return ok ? 0 : -2;
}
