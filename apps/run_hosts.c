/* gradsync run --hosts LIST and --hostfile FILE: the hosts a launch spans
 * and their slots (docs/CLUSTER.md).
 *
 * Both forms are read here into one list and given to mpirun as one
 * --host h1:4,h2:4 argument, so that a hostfile in either accepted syntax
 * (Open MPI's "host slots=N" and the shorter "host:N") reaches Open MPI in
 * the form every 4.x release reads. Everything is checked before anything
 * starts: a host name of other characters than letters, digits, '.', '-'
 * and '_' (IPv6 addresses, bracketed or not, are refused with a message
 * that says so, and user@host is not accepted: the ':' separates the slots), slots outside 1..RUN_MAX_RANKS, a host given twice (Open MPI
 * would silently add the slots up) and a hostfile without hosts are errors
 * that name the entry or the file's line. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

/* Same bound as cmd_run.c's -np: the most ranks one launch starts. */
#define HOSTS_MAX_SLOTS 65536
#define HOSTS_MAX 65536

static int host_char_ok(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '.' || ch == '-' || ch == '_';
}

/* where: "--hosts entry 2 ('h1:x')" or "--hostfile F:3": the place every
 * message starts with. */
static int host_name_check(const char *verb, const char *where, const char *name) {
  size_t len = strlen(name);
  if (len == 0) {
    cli_error(verb, "%s: the host name is empty", where);
    return -1;
  }
  if (len > RUN_HOST_NAME_MAX) {
    cli_error(verb, "%s: host name of %zu characters (at most %d)", where, len,
              RUN_HOST_NAME_MAX);
    return -1;
  }
  for (size_t i = 0; i < len; i++)
    if (!host_char_ok(name[i])) {
      cli_error(verb, "%s: '%s' is not a host name: it may hold letters, digits, '.', '-' "
                "and '_' only", where, name);
      return -1;
    }
  if (name[0] == '-' || name[0] == '.') {
    cli_error(verb, "%s: '%s' is not a host name: it starts with '%c'", where, name, name[0]);
    return -1;
  }
  return 0;
}

static int slots_parse(const char *verb, const char *where, const char *s, int *slots) {
  if (cli_parse_int(s, 1, HOSTS_MAX_SLOTS, slots) != 0) {
    cli_error(verb, "%s: slots '%s' must be a whole number from 1 to %d", where, s,
              HOSTS_MAX_SLOTS);
    return -1;
  }
  return 0;
}

/* Appends host name (slots) to h, refusing a host given before. */
static int hosts_add(const char *verb, run_hosts *h, const char *where, const char *name,
                     int slots, int line) {
  for (int i = 0; i < h->n; i++)
    if (strcasecmp(h->host[i].name, name) == 0) {
      if (line > 0)
        cli_error(verb, "%s: host '%s' is also on line %d; give each host once, with all "
                  "its slots", where, name, h->host[i].line);
      else
        cli_error(verb, "%s: host '%s' is also entry %d; give each host once, with all its "
                  "slots", where, name, i + 1);
      return -1;
    }
  if (h->n == HOSTS_MAX) {
    cli_error(verb, "%s: more than %d hosts", where, HOSTS_MAX);
    return -1;
  }
  if (h->n == h->cap) {
    int cap = h->cap ? 2 * h->cap : 16;
    run_host *p = realloc(h->host, (size_t)cap * sizeof *p);
    if (!p) {
      cli_fail(verb, "out of memory reading the hosts");
      return -1;
    }
    h->host = p;
    h->cap = cap;
  }
  run_host *e = &h->host[h->n++];
  snprintf(e->name, sizeof e->name, "%s", name);
  e->slots = slots;
  e->line = line;
  h->slots += slots;
  return 0;
}

/* "[addr]:slots", "fe80::1", "2001:db8:0:0:0:0:0:1": an IPv6 address,
 * which the ':' before the slots cannot follow ("h1:4:5" is a host with
 * bad slots, not one). */
static int looks_ipv6(const char *word) {
  int colons = 0;
  for (const char *p = word; *p; p++) colons += *p == ':';
  return word[0] == '[' || strstr(word, "::") != NULL || colons >= 3;
}

/* One "HOST" or "HOST:SLOTS" word. */
static int host_word(const char *verb, run_hosts *h, const char *where, char *word, int line,
                     int *slots_out) {
  char *colon = strchr(word, ':');
  if (looks_ipv6(word)) {
    cli_error(verb, "%s: '%s' looks like an IPv6 address: not supported (Open MPI's host "
              "list takes host names and IPv4 addresses); give the host a name that resolves "
              "to it, in /etc/hosts or DNS", where, word);
    return -1;
  }
  int slots = 1;
  if (colon) {
    *colon = '\0';
    if (slots_parse(verb, where, colon + 1, &slots) != 0) return -1;
  }
  if (host_name_check(verb, where, word) != 0) return -1;
  if (slots_out) {
    *slots_out = colon ? slots : 0; /* 0: the line may still say slots=N */
    return 0;
  }
  return hosts_add(verb, h, where, word, slots, line);
}

int run_hosts_parse(const char *list, run_hosts *h) {
  memset(h, 0, sizeof *h);
  size_t len = strlen(list);
  if (len == 0) {
    cli_error("run", "--hosts needs HOST[:SLOTS],... such as node1:4,node2:4 (got '')");
    return -1;
  }
  char *copy = malloc(len + 1);
  if (!copy) {
    cli_fail("run", "out of memory reading --hosts");
    return -1;
  }
  memcpy(copy, list, len + 1);
  int entry = 0, rc = 0;
  for (char *p = copy; rc == 0; entry++) {
    char *comma = strchr(p, ',');
    if (comma) *comma = '\0';
    char where[RUN_HOST_NAME_MAX + 64];
    snprintf(where, sizeof where, "--hosts entry %d ('%.*s')", entry + 1, RUN_HOST_NAME_MAX,
             p);
    if (*p == '\0') {
      cli_error("run", "--hosts entry %d is empty; the list is HOST[:SLOTS],... (got '%s')",
                entry + 1, list);
      rc = -1;
    } else {
      rc = host_word("run", h, where, p, 0, NULL);
    }
    if (!comma) break;
    p = comma + 1;
  }
  free(copy);
  if (rc != 0) run_hosts_free(h);
  return rc;
}

/* One hostfile line, its comment already cut: blank, or HOST[:N] followed
 * by at most one slots=N. */
static int hostfile_line(const char *verb, const char *opt, run_hosts *h, const char *path,
                         int line, char *text) {
  char where[PATH_MAX + 32];
  snprintf(where, sizeof where, "%s %s:%d", opt, path, line);
  char *save = NULL, *host = strtok_r(text, " \t\r\v\f", &save);
  if (!host) return 0;
  int slots = 0;
  if (host_word(verb, h, where, host, line, &slots) != 0) return -1;
  for (char *w; (w = strtok_r(NULL, " \t\r\v\f", &save));) {
    if (strncmp(w, "slots=", 6) != 0) {
      cli_error(verb, "%s: unexpected '%s'; a line is HOST, HOST slots=N or HOST:N", where, w);
      return -1;
    }
    if (slots > 0) {
      cli_error(verb, "%s: the slots of '%s' are given twice", where, host);
      return -1;
    }
    if (slots_parse(verb, where, w + 6, &slots) != 0) return -1;
  }
  return hosts_add(verb, h, where, host, slots > 0 ? slots : 1, line);
}

int run_hosts_read(const char *path, run_hosts *h) {
  return run_hosts_read_as("run", "--hostfile", path, h);
}

int run_hosts_read_as(const char *verb, const char *opt, const char *path, run_hosts *h) {
  memset(h, 0, sizeof *h);
  FILE *f = fopen(path, "r");
  if (!f) {
    cli_error(verb, "%s %s: cannot read it: %s", opt, path, strerror(errno));
    return -1;
  }
  char *buf = NULL;
  size_t cap = 0;
  int line = 0, rc = 0;
  for (ssize_t n; rc == 0 && (n = getline(&buf, &cap, f)) >= 0;) {
    line++;
    if (memchr(buf, '\0', (size_t)n)) {
      cli_error(verb, "%s %s:%d: a NUL byte: not a text file", opt, path, line);
      rc = -1;
      break;
    }
    /* A byte-order mark some editors write first: not part of the name. */
    if (line == 1 && n >= 3 && memcmp(buf, "\357\273\277", 3) == 0)
      memmove(buf, buf + 3, (size_t)n - 2);
    char *hash = strchr(buf, '#');
    if (hash) *hash = '\0';
    char *nl = strchr(buf, '\n');
    if (nl) *nl = '\0';
    rc = hostfile_line(verb, opt, h, path, line, buf);
  }
  if (rc == 0 && ferror(f)) {
    cli_error(verb, "%s %s: cannot read it: %s", opt, path, strerror(errno));
    rc = -1;
  }
  free(buf);
  fclose(f);
  if (rc == 0 && line == 0) {
    cli_error(verb, "%s %s: the file is empty; a line is HOST, HOST slots=N or HOST:N", opt,
              path);
    rc = -1;
  } else if (rc == 0 && h->n == 0) {
    cli_error(verb, "%s %s: no hosts in it (%d line%s of comments or blanks); a line "
              "is HOST, HOST slots=N or HOST:N", opt, path, line, line == 1 ? "" : "s");
    rc = -1;
  }
  if (rc != 0) run_hosts_free(h);
  return rc;
}

/* ---- A Slurm allocation's nodes ------------------------------------------
 * Slurm writes an allocation's nodes as a hostlist: names separated by
 * commas, where a bracket holds ranges and numbers, "node[01-04,07]" being
 * node01 to node04 and node07; a range keeps its low bound's width (its
 * leading zeros), and a name may have several brackets, which multiply
 * ("r[1-2]n[1-2]": r1n1, r1n2, r2n1, r2n2; Slurm's own order). The slots
 * come from the tasks per node, "2(x3),1": 2 on each of the first three
 * nodes, 1 on the fourth. */

/* Appends word's names, its first bracket expanded and the rest by
 * recursion, with slots from tasks[*k] (1 when ntasks is 0). */
static int slurm_word(const char *verb, const char *var, const char *word, run_hosts *h,
                      const int *tasks, int ntasks, int *k) {
  const char *lb = strchr(word, '[');
  char where[RUN_HOST_NAME_MAX + 64];
  snprintf(where, sizeof where, "%s entry '%.*s'", var, RUN_HOST_NAME_MAX, word);
  if (!lb) {
    if (strchr(word, ']')) {
      cli_error(verb, "%s: a ']' without its '['", where);
      return -1;
    }
    if (host_name_check(verb, where, word) != 0) return -1;
    /* (More nodes than counts: run_hosts_slurm says so once all are read.) */
    int slots = *k < ntasks ? tasks[*k] : 1;
    (*k)++;
    return hosts_add(verb, h, where, word, slots, 0);
  }
  const char *rb = strchr(lb, ']');
  if (!rb || memchr(lb + 1, '[', (size_t)(rb - lb - 1))) {
    cli_error(verb, "%s: a '[' without its ']'", where);
    return -1;
  }
  size_t plen = (size_t)(lb - word);
  for (const char *r = lb + 1; r < rb;) {
    const char *end = memchr(r, ',', (size_t)(rb - r));
    if (!end) end = rb;
    const char *dash = memchr(r, '-', (size_t)(end - r));
    const char *hi_s = dash ? dash + 1 : r;
    size_t lo_len = (size_t)((dash ? dash : end) - r), hi_len = (size_t)(end - hi_s);
    int ok = lo_len > 0 && hi_len > 0 && lo_len <= 9 && hi_len <= 9;
    for (size_t i = 0; ok && i < lo_len; i++) ok = r[i] >= '0' && r[i] <= '9';
    for (size_t i = 0; ok && i < hi_len; i++) ok = hi_s[i] >= '0' && hi_s[i] <= '9';
    long lo = ok ? strtol(r, NULL, 10) : 0, hi = ok ? strtol(hi_s, NULL, 10) : 0;
    if (!ok || hi < lo) {
      cli_error(verb, "%s: '%.*s' is not a number or a range LOW-HIGH (LOW <= HIGH, digits "
                "only)", where, (int)(end - r), r);
      return -1;
    }
    if (hi - lo >= HOSTS_MAX) {
      cli_error(verb, "%s: the range '%.*s' holds more than %d nodes", where, (int)(end - r), r,
                HOSTS_MAX);
      return -1;
    }
    for (long v = lo; v <= hi; v++) {
      char name[2 * RUN_HOST_NAME_MAX + 32];
      int n = snprintf(name, sizeof name, "%.*s%0*ld%s", (int)plen, word, (int)lo_len, v,
                       rb + 1);
      if (n < 0 || n >= (int)sizeof name) {
        cli_error(verb, "%s: a name longer than %d characters", where, RUN_HOST_NAME_MAX);
        return -1;
      }
      if (slurm_word(verb, var, name, h, tasks, ntasks, k) != 0) return -1;
    }
    r = end < rb ? end + 1 : rb;
    if (end < rb && r == rb) {
      cli_error(verb, "%s: an empty range before ']'", where);
      return -1;
    }
  }
  return 0;
}

/* "2(x3),1" into counts[] (malloc'ed in *out): -1 after a message. */
static int slurm_tasks(const char *verb, const char *text, int **out, int *n) {
  *out = NULL;
  *n = 0;
  int cap = 0, *v = NULL;
  for (const char *p = text; *p;) {
    char *end;
    errno = 0;
    long c = strtol(p, &end, 10), times = 1;
    if (end == p || errno || c < 1 || c > HOSTS_MAX_SLOTS) goto bad;
    p = end;
    if (*p == '(') {
      if (p[1] != 'x') goto bad;
      times = strtol(p + 2, &end, 10);
      if (end == p + 2 || *end != ')' || times < 1 || times > HOSTS_MAX) goto bad;
      p = end + 1;
    }
    if (*n + times > HOSTS_MAX) goto bad;
    while (*n + times > cap) {
      cap = cap ? 2 * cap : 64;
      int *q = realloc(v, (size_t)cap * sizeof *q);
      if (!q) {
        free(v);
        cli_fail(verb, "out of memory reading SLURM_TASKS_PER_NODE");
        return -1;
      }
      v = q;
    }
    for (long t = 0; t < times; t++) v[(*n)++] = (int)c;
    if (*p == ',') p++;
    else if (*p) goto bad;
  }
  if (*n == 0) goto bad;
  *out = v;
  return 0;
bad:
  free(v);
  *n = 0;
  cli_error(verb, "SLURM_TASKS_PER_NODE '%s' is not a list of counts such as 2(x3),1", text);
  return -1;
}

int run_hosts_slurm(const char *verb, const char *var, const char *nodelist,
                    const char *tasks_per_node, run_hosts *h) {
  memset(h, 0, sizeof *h);
  if (!nodelist || !*nodelist) {
    cli_error(verb, "%s is empty: no Slurm allocation's nodes to use", var);
    return -1;
  }
  int *tasks = NULL, ntasks = 0, k = 0, rc = 0;
  if (tasks_per_node && *tasks_per_node &&
      slurm_tasks(verb, tasks_per_node, &tasks, &ntasks) != 0)
    return -1;
  size_t len = strlen(nodelist);
  char *word = malloc(len + 1);
  if (!word) {
    free(tasks);
    cli_fail(verb, "out of memory reading %s", var);
    return -1;
  }
  for (const char *p = nodelist; rc == 0;) {
    /* A comma outside brackets ends a word. */
    const char *q = p;
    int depth = 0;
    while (*q && (*q != ',' || depth > 0)) {
      if (*q == '[') depth++;
      else if (*q == ']' && depth > 0) depth--;
      q++;
    }
    memcpy(word, p, (size_t)(q - p));
    word[q - p] = '\0';
    if (!*word) {
      cli_error(verb, "%s '%s': an empty entry", var, nodelist);
      rc = -1;
    } else {
      rc = slurm_word(verb, var, word, h, tasks, ntasks, &k);
    }
    if (!*q) break;
    p = q + 1;
  }
  if (rc == 0 && ntasks > 0 && k != ntasks) {
    cli_error(verb, "%s lists %d nodes, SLURM_TASKS_PER_NODE '%s' counts for %d", var, k,
              tasks_per_node, ntasks);
    rc = -1;
  }
  free(word);
  free(tasks);
  if (rc != 0) run_hosts_free(h);
  return rc;
}

char *run_hosts_mpi_list(const run_hosts *h) {
  size_t len = 1;
  for (int i = 0; i < h->n; i++) len += strlen(h->host[i].name) + 8;
  char *s = malloc(len), *p = s;
  if (!s) return NULL;
  *p = '\0';
  for (int i = 0; i < h->n; i++)
    p += sprintf(p, "%s%s:%d", i ? "," : "", h->host[i].name, h->host[i].slots);
  return s;
}

void run_hosts_free(run_hosts *h) {
  free(h->host);
  memset(h, 0, sizeof *h);
}
