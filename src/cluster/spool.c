/* The spool directory's client side (gradsync/cluster_manager.h): request
 * files, job ids, the pool and the jobs' snapshot. A request is written
 * under a temporary name in DIR/incoming and renamed into place, so the
 * manager reads whole requests only; ids come from DIR/next_id under an
 * exclusive lock, so two clients never share one. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gradsync/cluster_manager.h"
#include "gradsync/core.h"
#include "journal.h"
#include "spool.h"

double spool_wall_s(void) { return gs_wall_now(); }

char *spool_read_file(const char *path, size_t max) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  char *buf = gs_malloc(max + 1);
  size_t got = 0;
  while (buf && got < max) {
    ssize_t k = read(fd, buf + got, max - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += (size_t)k;
  }
  close(fd);
  if (buf) buf[got] = '\0';
  return buf;
}

/* SPOOL/pool.json parsed, or NULL. */
static cJSON *read_pool(const char *spool) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/pool.json", spool);
  char *text = spool_read_file(path, 1 << 22);
  cJSON *j = text ? cJSON_Parse(text) : NULL;
  gs_free(text);
  return j;
}

int gs_cluster_pool(const char *spool, int *nodes, int *slots, char *policy, size_t policy_len,
                    char *err, size_t errlen) {
  cJSON *j = read_pool(spool);
  const cJSON *n = j ? cJSON_GetObjectItemCaseSensitive(j, "nodes") : NULL;
  const cJSON *p = j ? cJSON_GetObjectItemCaseSensitive(j, "policy") : NULL;
  if (!cJSON_IsArray(n)) {
    snprintf(err, errlen, "no cluster manager serves %s (no readable pool.json there; start "
             "one with gradsync cluster serve --spool %s)", spool, spool);
    cJSON_Delete(j);
    return -1;
  }
  *nodes = cJSON_GetArraySize(n);
  if (slots) {
    const cJSON *first = cJSON_GetArrayItem(n, 0);
    const cJSON *sl = first ? cJSON_GetObjectItemCaseSensitive(first, "slots") : NULL;
    *slots = cJSON_IsNumber(sl) && sl->valueint > 0 ? sl->valueint : 1;
  }
  if (policy) snprintf(policy, policy_len, "%s", cJSON_IsString(p) ? p->valuestring : "?");
  cJSON_Delete(j);
  return 0;
}

/* NAME's limit in pool.json's object KEY ("*" for names not in it; 0: none). */
static int pool_limit(const char *spool, const char *key, const char *name) {
  cJSON *j = read_pool(spool);
  const cJSON *l = j ? cJSON_GetObjectItemCaseSensitive(j, key) : NULL;
  const cJSON *v = l ? cJSON_GetObjectItemCaseSensitive(l, name) : NULL;
  if (!cJSON_IsNumber(v) && l) v = cJSON_GetObjectItemCaseSensitive(l, "*");
  int lim = cJSON_IsNumber(v) && v->valuedouble >= 1 ? (int)v->valuedouble : 0;
  cJSON_Delete(j);
  return lim;
}

int gs_cluster_pool_user_limit(const char *spool, const char *user) {
  return pool_limit(spool, "user_limits", user);
}

int gs_cluster_account_path_limit(const char *const *names, const int *nodes, int n,
                                  const char *path, char *which, size_t which_len) {
  int best = 0;
  if (which && which_len) which[0] = '\0';
  for (size_t len = 0; path[len];) {
    len += strcspn(path + len, "/"); /* the prefix path[0..len): one level more */
    int lim = 0, top = memchr(path, '/', len) == NULL;
    for (int k = 0; k < n; k++) {
      if (strlen(names[k]) == len && memcmp(names[k], path, len) == 0) {
        lim = nodes[k];
        break;
      }
      if (top && strcmp(names[k], "*") == 0) lim = nodes[k];
    }
    if (lim > 0 && (best == 0 || lim < best)) {
      best = lim;
      if (which && which_len) snprintf(which, which_len, "%.*s", (int)len, path);
    }
    if (path[len] == '/') len++;
  }
  return best;
}

int gs_cluster_pool_account_limit(const char *spool, const char *account, char *which,
                                  size_t which_len) {
  cJSON *j = read_pool(spool);
  const cJSON *l = j ? cJSON_GetObjectItemCaseSensitive(j, "account_limits") : NULL, *v;
  int n = cJSON_GetArraySize(l), k = 0, lim = 0;
  const char **names = gs_calloc((size_t)n + 1, sizeof *names);
  int *nodes = gs_calloc((size_t)n + 1, sizeof *nodes);
  if (names && nodes) {
    cJSON_ArrayForEach(v, l)
      if (cJSON_IsNumber(v) && v->string && v->valuedouble >= 1 && k < n) {
        names[k] = v->string;
        nodes[k++] = v->valuedouble < 1e9 ? (int)v->valuedouble : 1000000000;
      }
    lim = gs_cluster_account_path_limit(names, nodes, k, account, which, which_len);
  }
  gs_free(names);
  gs_free(nodes);
  cJSON_Delete(j);
  return lim;
}

void gs_cluster_user_name(const char *given, char *out, size_t len) {
  if (given) {
    snprintf(out, len, "%s", given);
    return;
  }
  struct passwd *pw = getpwuid(geteuid());
  if (pw && pw->pw_name) snprintf(out, len, "%s", pw->pw_name);
  else snprintf(out, len, "uid%ld", (long)geteuid());
}

/* The next job id, from DIR/next_id under an exclusive lock. */
static int next_id(const char *spool, int *id, char *err, size_t errlen) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/next_id", spool);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || flock(fd, LOCK_EX) != 0) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  char buf[32] = "";
  ssize_t k = pread(fd, buf, sizeof buf - 1, 0);
  long v = k > 0 ? strtol(buf, NULL, 10) : 0;
  if (v < 1) v = 1;
  int len = snprintf(buf, sizeof buf, "%ld\n", v + 1);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)len, 0) != len || fsync(fd) != 0) {
    snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  close(fd); /* unlocks */
  *id = (int)v;
  return 0;
}

const char *const gs_cluster_state_names[GS_CLUSTER_NSTATES] = {
    "queued", "running", "resizing", "done", "failed", "cancelled", "timeout"};

int gs_cluster_state_index(const char *name) {
  for (int k = 0; name && k < GS_CLUSTER_NSTATES; k++)
    if (strcmp(name, gs_cluster_state_names[k]) == 0) return k;
  return -1;
}

int gs_cluster_next_id(const char *spool) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/next_id", spool);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 1 : -1;
  char buf[32] = "";
  int rc = flock(fd, LOCK_SH) == 0 ? 0 : -1;
  ssize_t k = rc == 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
  close(fd);
  if (rc != 0 || k < 0) return -1;
  long v = k > 0 ? strtol(buf, NULL, 10) : 0;
  return v < 1 ? 1 : v > INT_MAX ? INT_MAX : (int)v;
}

int spool_put_request(const char *spool, cJSON *req, const char *tag, char *err,
                      size_t errlen) {
  char dir[PATH_MAX], path[PATH_MAX + 64];
  snprintf(dir, sizeof dir, "%s/incoming", spool);
  mkdir(dir, 0755);
  static unsigned counter;
  snprintf(path, sizeof path, "%s/%.6f-%d-%u-%s.json", dir, spool_wall_s(), (int)getpid(),
           counter++, tag);
  char *text = cJSON_PrintUnformatted(req);
  if (!text) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int rc = cluster_write_atomic(path, text, strlen(text));
  if (rc != 0) snprintf(err, errlen, "cannot write a request into %s: %s", dir, strerror(errno));
  cJSON_free(text);
  return rc;
}

int gs_cluster_name_ok(const char *u) {
  size_t n = strlen(u);
  if (n == 0 || n >= GS_CLUSTER_NAME_MAX) return 0;
  for (const char *p = u; *p; p++)
    if (!isalnum((unsigned char)*p) && !strchr("._@-", *p)) return 0;
  return 1;
}

int gs_cluster_account_path_ok(const char *path, char *why, size_t whylen) {
  int levels = 0;
  why[0] = '\0';
  if (!*path) {
    snprintf(why, whylen, "an empty account");
    return 0;
  }
  if (path[0] == '/' || path[strlen(path) - 1] == '/') {
    snprintf(why, whylen, "a '/' at its %s", path[0] == '/' ? "start" : "end");
    return 0;
  }
  for (const char *p = path; *p;) {
    size_t n = strcspn(p, "/");
    char name[GS_CLUSTER_NAME_MAX];
    if (n == 0) {
      snprintf(why, whylen, "an empty level (two '/' in a row)");
      return 0;
    }
    if (++levels > GS_CLUSTER_ACCOUNT_LEVELS) {
      snprintf(why, whylen, "more than %d levels", GS_CLUSTER_ACCOUNT_LEVELS);
      return 0;
    }
    snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
    if (n >= GS_CLUSTER_NAME_MAX || !gs_cluster_name_ok(name)) {
      snprintf(why, whylen, "level %d ('%.*s') is not 1 to %d letters, digits or ._@-", levels,
               n > 80 ? 80 : (int)n, p, GS_CLUSTER_NAME_MAX - 1);
      return 0;
    }
    p += n;
    if (*p == '/') p++;
  }
  return 1;
}

/* A whole number from lo to hi. */
static int request_int_ok(const cJSON *x, double lo, double hi) {
  return cJSON_IsNumber(x) && x->valuedouble == floor(x->valuedouble) &&
         x->valuedouble >= lo && x->valuedouble <= hi;
}

#define REQUEST_ID_MAX (1 << 30) /* cancel's job ids */

int spool_check_request(const cJSON *r, char *field, size_t flen, char *why, size_t wlen) {
#define BAD(f, ...)                          \
  do {                                       \
    snprintf(field, flen, "%s", f);          \
    snprintf(why, wlen, __VA_ARGS__);        \
    return -1;                               \
  } while (0)
  const cJSON *x;
#define GET(k) (x = cJSON_GetObjectItemCaseSensitive(r, k))
  if (!cJSON_IsObject(r)) BAD("(request)", "not a JSON object");
  const char *op = cJSON_IsString(GET("op")) ? x->valuestring : NULL;
  if (!op) BAD("op", "missing (submit, cancel, drain or resume)");
  if (strcmp(op, "drain") == 0 || strcmp(op, "resume") == 0) {
    if (!cJSON_IsString(GET("node")) || !*x->valuestring ||
        strlen(x->valuestring) > GS_CLUSTER_NODE_MAX)
      BAD("node", "not a node name (a string of 1 to %d characters)", GS_CLUSTER_NODE_MAX);
    return 0;
  }
  int submit = strcmp(op, "submit") == 0;
  if (!submit && strcmp(op, "cancel") != 0)
    BAD("op", "not a request (submit, cancel, drain or resume): '%.32s'", op);
  if (!request_int_ok(GET("id"), 1, REQUEST_ID_MAX))
    BAD("id", "not a job id (a whole number from 1 to %d)", REQUEST_ID_MAX);
  if (!submit) return 0;
  /* (a name submit made from a long program's name is cut, not refused) */
  if (GET("name") && !cJSON_IsString(x)) BAD("name", "not a string");
  if (GET("user") && (!cJSON_IsString(x) || !gs_cluster_name_ok(x->valuestring)))
    BAD("user", "not a user (1 to %d letters, digits or ._@-)", GS_CLUSTER_NAME_MAX - 1);
  if (GET("account")) {
    char path_why[160] = "not a string";
    if (!cJSON_IsString(x) ||
        !gs_cluster_account_path_ok(x->valuestring, path_why, sizeof path_why))
      BAD("account", "not an account path (%s)", path_why);
  }
  double min = 1;
  if (GET("min")) {
    if (!request_int_ok(x, 1, GS_CLUSTER_JOB_NODES_MAX))
      BAD("min", "not a node count (a whole number from 1 to %d)", GS_CLUSTER_JOB_NODES_MAX);
    min = x->valuedouble;
  }
  if (GET("max") && !request_int_ok(x, min, GS_CLUSTER_JOB_NODES_MAX))
    BAD("max", "not a node count from min (%.0f) to %d", min, GS_CLUSTER_JOB_NODES_MAX);
  if (GET("weight") && (!cJSON_IsNumber(x) || !(x->valuedouble >= GS_CLUSTER_WEIGHT_MIN) ||
                        !(x->valuedouble <= GS_CLUSTER_WEIGHT_MAX)))
    BAD("weight", "not a weight from %g to %g", GS_CLUSTER_WEIGHT_MIN, GS_CLUSTER_WEIGHT_MAX);
  if (GET("time_limit_s") && (!cJSON_IsNumber(x) || !(x->valuedouble > 0) ||
                              !(x->valuedouble <= GS_CLUSTER_TIME_LIMIT_MAX_S)))
    BAD("time_limit_s", "not a time limit (seconds above 0, at most 366 days)");
  if (GET("after")) {
    if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) > GS_CLUSTER_AFTER_MAX)
      BAD("after", "not an array of at most %d job ids", GS_CLUSTER_AFTER_MAX);
    const cJSON *e;
    cJSON_ArrayForEach(e, x) if (!request_int_ok(e, 1, REQUEST_ID_MAX))
      BAD("after", "not an array of job ids (whole numbers from 1 to %d)", REQUEST_ID_MAX);
  }
  if (GET("exec") && !cJSON_IsBool(x)) BAD("exec", "not true or false");
  if (GET("args")) {
    if (!cJSON_IsArray(x)) BAD("args", "not an array of strings (the job's arguments)");
    const cJSON *e;
    cJSON_ArrayForEach(e, x) if (!cJSON_IsString(e))
      BAD("args", "not an array of strings (the job's arguments)");
  }
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "exec")) &&
      (!cJSON_IsArray(GET("args")) || cJSON_GetArraySize(x) < 1))
    BAD("args", "empty: an --exec job needs its program");
  if (GET("cwd") && (!cJSON_IsString(x) || x->valuestring[0] != '/' ||
                     strlen(x->valuestring) >= PATH_MAX))
    BAD("cwd", "not an absolute directory");
  /* its submission time: a Unix time, not ahead of this host's clock by
   * more than a day (a client on another host may have another clock) */
  if (GET("time") && (!cJSON_IsNumber(x) || !(x->valuedouble >= 1e9) ||
                      !(x->valuedouble <= spool_wall_s() + 86400)))
    BAD("time", "not a Unix time from 2001 to now");
  return 0;
#undef GET
#undef BAD
}

int gs_cluster_submit(const char *spool, const gs_cluster_submission *s, int *id, char *err,
                      size_t errlen) {
  int nodes;
  if (gs_cluster_pool(spool, &nodes, NULL, NULL, 0, err, errlen) != 0) return -1;
  if (next_id(spool, id, err, errlen) != 0) return -1;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, "/");
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "op", "submit");
  cJSON_AddNumberToObject(r, "id", *id);
  const char *base = s->argv[0] ? strrchr(s->argv[0], '/') : NULL;
  cJSON_AddStringToObject(r, "name", s->name ? s->name
                                     : s->exec ? (base ? base + 1 : s->argv[0]) : "train");
  cJSON_AddNumberToObject(r, "min", s->min_nodes);
  cJSON_AddNumberToObject(r, "max", s->max_nodes);
  cJSON_AddNumberToObject(r, "weight", s->weight);
  char who[64];
  gs_cluster_user_name(s->user, who, sizeof who);
  cJSON_AddStringToObject(r, "user", who);
  if (s->account) cJSON_AddStringToObject(r, "account", s->account);
  if (s->nafter > 0) {
    cJSON *af = cJSON_AddArrayToObject(r, "after");
    for (int k = 0; k < s->nafter; k++) cJSON_AddItemToArray(af, cJSON_CreateNumber(s->after[k]));
  }
  if (s->time_limit_s > 0) cJSON_AddNumberToObject(r, "time_limit_s", s->time_limit_s);
  cJSON_AddBoolToObject(r, "exec", s->exec);
  cJSON_AddStringToObject(r, "cwd", cwd);
  cJSON_AddNumberToObject(r, "time", spool_wall_s());
  cJSON *a = cJSON_AddArrayToObject(r, "args");
  for (int i = 0; s->argv[i]; i++) cJSON_AddItemToArray(a, cJSON_CreateString(s->argv[i]));
  char tag[32];
  snprintf(tag, sizeof tag, "submit-%d", *id);
  int rc = spool_put_request(spool, r, tag, err, errlen);
  cJSON_Delete(r);
  return rc;
}

int gs_cluster_cancel(const char *spool, int id, char *err, size_t errlen) {
  int nodes;
  if (gs_cluster_pool(spool, &nodes, NULL, NULL, 0, err, errlen) != 0) return -1;
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "op", "cancel");
  cJSON_AddNumberToObject(r, "id", id);
  int rc = spool_put_request(spool, r, "cancel", err, errlen);
  cJSON_Delete(r);
  return rc;
}

int gs_cluster_manager_running(const char *spool, int *pid) {
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/manager.lock", spool);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  /* A shared lock fails only while the manager holds its exclusive one. */
  int held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  if (held && pid) {
    cJSON *j = read_pool(spool);
    const cJSON *p = j ? cJSON_GetObjectItemCaseSensitive(j, "manager_pid") : NULL;
    *pid = cJSON_IsNumber(p) ? (int)p->valuedouble : 0;
    cJSON_Delete(j);
  }
  return held;
}

static int id_order(const void *a, const void *b) {
  return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

int gs_cluster_jobs_kept(const char *spool, int *ids, int max) {
  char path[PATH_MAX + 300];
  snprintf(path, sizeof path, "%s/jobs", spool);
  DIR *d = opendir(path);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end;
    long id = strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end || id < 1 || id > INT_MAX) continue;
    snprintf(path, sizeof path, "%s/jobs/%s/lock", spool, e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    /* A shared lock fails only while a keeper holds its exclusive one. */
    int held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    if (!held) continue;
    if (n < max) ids[n] = (int)id;
    n++;
  }
  closedir(d);
  qsort(ids, (size_t)(n < max ? n : max), sizeof *ids, id_order);
  return n;
}

int gs_cluster_drain(const char *spool, const char *node, int drain, char *err, size_t errlen) {
  int nodes;
  if (gs_cluster_pool(spool, &nodes, NULL, NULL, 0, err, errlen) != 0) return -1;
  /* A node the pool does not hold is refused here (the manager would
   * ignore the request): its names are in pool.json. */
  cJSON *pj = read_pool(spool);
  const cJSON *list = pj ? cJSON_GetObjectItemCaseSensitive(pj, "nodes") : NULL, *e;
  int found = 0;
  char names[512] = "";
  size_t w = 0;
  cJSON_ArrayForEach(e, list) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (!cJSON_IsString(nm)) continue;
    found |= strcasecmp(nm->valuestring, node) == 0;
    int k = snprintf(names + w, sizeof names - w, "%s%s", w ? ", " : "", nm->valuestring);
    if (k > 0 && (size_t)k < sizeof names - w) w += (size_t)k;
  }
  cJSON_Delete(pj);
  if (!found) {
    snprintf(err, errlen, "no node '%s' in the pool of %s (its nodes: %s)", node, spool,
             names[0] ? names : "none");
    return -1;
  }
  cJSON *r = cJSON_CreateObject();
  cJSON_AddStringToObject(r, "op", drain ? "drain" : "resume");
  cJSON_AddStringToObject(r, "node", node);
  int rc = spool_put_request(spool, r, "node", err, errlen);
  cJSON_Delete(r);
  return rc;
}

/* Copies key of request r into o, or null when r has none. */
static void copy_key(cJSON *o, const cJSON *r, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, key);
  cJSON_AddItemToObject(o, key, v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
}

/* A submission the manager has not taken yet, with the keys of a job of the
 * manager's snapshot (snapshot_text in manager.c), in its order: the
 * submission's own values, null or empty where only a manager knows. */
static cJSON *pending_job(const char *spool, const cJSON *r, int served) {
  cJSON *o = cJSON_CreateObject();
  copy_key(o, r, "id");
  copy_key(o, r, "name");
  copy_key(o, r, "user");
  if (cJSON_GetObjectItemCaseSensitive(r, "account")) copy_key(o, r, "account");
  cJSON_AddStringToObject(o, "state", "queued");
  copy_key(o, r, "min");
  copy_key(o, r, "max");
  copy_key(o, r, "weight");
  cJSON_AddNumberToObject(o, "size", 0);
  cJSON_AddNumberToObject(o, "running_ranks", 0);
  cJSON_AddArrayToObject(o, "nodes");
  cJSON_AddNullToObject(o, "progress");
  cJSON_AddNullToObject(o, "commit");
  cJSON_AddObjectToObject(o, "speed");
  cJSON_AddNullToObject(o, "restart_s");
  cJSON_AddNullToObject(o, "startup_s");
  cJSON_AddNullToObject(o, "restart_price_s");
  cJSON_AddObjectToObject(o, "restart_s_by_size");
  cJSON_AddNumberToObject(o, "resizes", 0);
  cJSON_AddNumberToObject(o, "restarts", 0);
  cJSON_AddNumberToObject(o, "attempts", 0);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "time");
  if (cJSON_IsNumber(t)) cJSON_AddNumberToObject(o, "submit_time", t->valuedouble);
  else cJSON_AddNullToObject(o, "submit_time");
  cJSON_AddNullToObject(o, "start_time");
  cJSON_AddNullToObject(o, "end_time");
  const cJSON *af = cJSON_GetObjectItemCaseSensitive(r, "after");
  cJSON_AddItemToObject(o, "after", cJSON_IsArray(af) ? cJSON_Duplicate(af, 1)
                                                      : cJSON_CreateArray());
  copy_key(o, r, "time_limit_s");
  cJSON_AddNumberToObject(o, "run_s", 0);
  cJSON_AddNumberToObject(o, "node_s", 0);
  cJSON_AddNumberToObject(o, "fair_node_s", 0);
  cJSON_AddStringToObject(o, "message", served ? "submitted; the manager has not taken it yet"
                                               : "submitted; no manager has taken it yet");
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(r, "id");
  char real[PATH_MAX], dir[PATH_MAX + 32];
  if (!realpath(spool, real)) snprintf(real, sizeof real, "%s", spool);
  snprintf(dir, sizeof dir, "%s/jobs/%d", real, cJSON_IsNumber(id) ? id->valueint : 0);
  cJSON_AddStringToObject(o, "dir", dir);
  return o;
}

static int cmp_request_id(const void *a, const void *b) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(*(const cJSON *const *)a, "id");
  const cJSON *y = cJSON_GetObjectItemCaseSensitive(*(const cJSON *const *)b, "id");
  double u = cJSON_IsNumber(x) ? x->valuedouble : 0, v = cJSON_IsNumber(y) ? y->valuedouble : 0;
  return (u > v) - (u < v);
}

char *gs_cluster_jobs_json(const char *spool, char *err, size_t errlen) {
  int nodes;
  if (gs_cluster_pool(spool, &nodes, NULL, NULL, 0, err, errlen) != 0) return NULL;
  /* Submissions the manager has not taken yet, read before its snapshot:
   * the manager removes a request only after a snapshot that holds its job
   * (take_requests), so a job is in one or the other whenever we look. */
  int served = gs_cluster_manager_running(spool, NULL);
  cJSON *pending = cJSON_CreateArray();
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/incoming", spool);
  DIR *d = opendir(dir);
  for (struct dirent *de; d && pending && (de = readdir(d));) {
    if (!strstr(de->d_name, "-submit-") || strstr(de->d_name, ".tmp.")) continue;
    char rp[PATH_MAX + 300];
    snprintf(rp, sizeof rp, "%s/%s", dir, de->d_name);
    char *rt = spool_read_file(rp, 1 << 20);
    cJSON *r = rt ? cJSON_Parse(rt) : NULL;
    gs_free(rt);
    if (r) cJSON_AddItemToArray(pending, r);
  }
  if (d) closedir(d);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/jobs.json", spool);
  char *text = spool_read_file(path, 1 << 26);
  cJSON *j = text ? cJSON_Parse(text) : NULL;
  gs_free(text);
  if (!j) j = cJSON_CreateObject();
  cJSON *jobs = cJSON_GetObjectItemCaseSensitive(j, "jobs");
  if (!cJSON_IsArray(jobs)) {
    cJSON_DeleteItemFromObject(j, "jobs");
    jobs = cJSON_AddArrayToObject(j, "jobs");
  }
  /* By id, as the snapshot lists its jobs (not in the directory's order). */
  int np = cJSON_GetArraySize(pending);
  const cJSON **by_id = np > 0 ? gs_calloc((size_t)np, sizeof *by_id) : NULL;
  if (np > 0 && by_id == NULL) {
    cJSON_Delete(pending);
    cJSON_Delete(j);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  const cJSON *r;
  np = 0;
  cJSON_ArrayForEach(r, pending) by_id[np++] = r;
  if (np > 1) qsort(by_id, (size_t)np, sizeof *by_id, cmp_request_id);
  for (int k = 0; k < np; k++) {
    r = by_id[k];
    /* Taken already (in the snapshot, the file not yet removed): listed once. */
    const cJSON *rid = cJSON_GetObjectItemCaseSensitive(r, "id"), *known;
    int dup = 0;
    cJSON_ArrayForEach(known, jobs) {
      const cJSON *kid = cJSON_GetObjectItemCaseSensitive(known, "id");
      dup |= cJSON_IsNumber(rid) && cJSON_IsNumber(kid) && kid->valueint == rid->valueint;
    }
    if (dup) continue;
    cJSON_AddItemToArray(jobs, pending_job(spool, r, served));
  }
  gs_free(by_id);
  cJSON_Delete(pending);
  /* Whether a manager serves the spool now: if not, the states are as of
   * its last snapshot ("time"), whatever the jobs did since. */
  cJSON_DeleteItemFromObject(j, "served");
  cJSON_AddBoolToObject(j, "served", served);
  char *out = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  if (!out) snprintf(err, errlen, "out of memory");
  return out;
}
