/* gradsync run --hosts LIST and --hostfile FILE: the hosts a launch spans
 * and their slots (docs/CLUSTER.md).
 *
 * Both forms are read here into one list and given to mpirun as one
 * --host h1:4,h2:4 argument, so that a hostfile in either accepted syntax
 * (Open MPI's "host slots=N" and the shorter "host:N") reaches Open MPI in
 * the form every 4.x release reads. Everything is checked before anything
 * starts: a host name of other characters than letters, digits, '.', '-'
 * and '_' (IPv6 addresses and user@host are not accepted: the ':' separates
 * the slots), slots outside 1..RUN_MAX_RANKS, a host given twice (Open MPI
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
static int host_name_check(const char *where, const char *name) {
  size_t len = strlen(name);
  if (len == 0) {
    cli_error("run", "%s: the host name is empty", where);
    return -1;
  }
  if (len > RUN_HOST_NAME_MAX) {
    cli_error("run", "%s: host name of %zu characters (at most %d)", where, len,
              RUN_HOST_NAME_MAX);
    return -1;
  }
  for (size_t i = 0; i < len; i++)
    if (!host_char_ok(name[i])) {
      cli_error("run", "%s: '%s' is not a host name: it may hold letters, digits, '.', '-' "
                "and '_' only", where, name);
      return -1;
    }
  if (name[0] == '-' || name[0] == '.') {
    cli_error("run", "%s: '%s' is not a host name: it starts with '%c'", where, name, name[0]);
    return -1;
  }
  return 0;
}

static int slots_parse(const char *where, const char *s, int *slots) {
  if (cli_parse_int(s, 1, HOSTS_MAX_SLOTS, slots) != 0) {
    cli_error("run", "%s: slots '%s' must be a whole number from 1 to %d", where, s,
              HOSTS_MAX_SLOTS);
    return -1;
  }
  return 0;
}

/* Appends host name (slots) to h, refusing a host given before. */
static int hosts_add(run_hosts *h, const char *where, const char *name, int slots, int line) {
  for (int i = 0; i < h->n; i++)
    if (strcasecmp(h->host[i].name, name) == 0) {
      if (line > 0)
        cli_error("run", "%s: host '%s' is also on line %d; give each host once, with all "
                  "its slots", where, name, h->host[i].line);
      else
        cli_error("run", "%s: host '%s' is also entry %d; give each host once, with all its "
                  "slots", where, name, i + 1);
      return -1;
    }
  if (h->n == HOSTS_MAX) {
    cli_error("run", "%s: more than %d hosts", where, HOSTS_MAX);
    return -1;
  }
  if (h->n == h->cap) {
    int cap = h->cap ? 2 * h->cap : 16;
    run_host *p = realloc(h->host, (size_t)cap * sizeof *p);
    if (!p) {
      cli_fail("run", "out of memory reading the hosts");
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

/* One "HOST" or "HOST:SLOTS" word. */
static int host_word(run_hosts *h, const char *where, char *word, int line, int *slots_out) {
  char *colon = strchr(word, ':');
  int slots = 1;
  if (colon) {
    *colon = '\0';
    if (slots_parse(where, colon + 1, &slots) != 0) return -1;
  }
  if (host_name_check(where, word) != 0) return -1;
  if (slots_out) {
    *slots_out = colon ? slots : 0; /* 0: the line may still say slots=N */
    return 0;
  }
  return hosts_add(h, where, word, slots, line);
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
      rc = host_word(h, where, p, 0, NULL);
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
static int hostfile_line(run_hosts *h, const char *path, int line, char *text) {
  char where[PATH_MAX + 32];
  snprintf(where, sizeof where, "--hostfile %s:%d", path, line);
  char *save = NULL, *host = strtok_r(text, " \t\r\v\f", &save);
  if (!host) return 0;
  int slots = 0;
  if (host_word(h, where, host, line, &slots) != 0) return -1;
  for (char *w; (w = strtok_r(NULL, " \t\r\v\f", &save));) {
    if (strncmp(w, "slots=", 6) != 0) {
      cli_error("run", "%s: unexpected '%s'; a line is HOST, HOST slots=N or HOST:N", where, w);
      return -1;
    }
    if (slots > 0) {
      cli_error("run", "%s: the slots of '%s' are given twice", where, host);
      return -1;
    }
    if (slots_parse(where, w + 6, &slots) != 0) return -1;
  }
  return hosts_add(h, where, host, slots > 0 ? slots : 1, line);
}

int run_hosts_read(const char *path, run_hosts *h) {
  memset(h, 0, sizeof *h);
  FILE *f = fopen(path, "r");
  if (!f) {
    cli_error("run", "--hostfile %s: cannot read it: %s", path, strerror(errno));
    return -1;
  }
  char *buf = NULL;
  size_t cap = 0;
  int line = 0, rc = 0;
  for (ssize_t n; rc == 0 && (n = getline(&buf, &cap, f)) >= 0;) {
    line++;
    if (memchr(buf, '\0', (size_t)n)) {
      cli_error("run", "--hostfile %s:%d: a NUL byte: not a text file", path, line);
      rc = -1;
      break;
    }
    char *hash = strchr(buf, '#');
    if (hash) *hash = '\0';
    char *nl = strchr(buf, '\n');
    if (nl) *nl = '\0';
    rc = hostfile_line(h, path, line, buf);
  }
  if (rc == 0 && ferror(f)) {
    cli_error("run", "--hostfile %s: cannot read it: %s", path, strerror(errno));
    rc = -1;
  }
  free(buf);
  fclose(f);
  if (rc == 0 && line == 0) {
    cli_error("run", "--hostfile %s: the file is empty; a line is HOST, HOST slots=N or HOST:N",
              path);
    rc = -1;
  } else if (rc == 0 && h->n == 0) {
    cli_error("run", "--hostfile %s: no hosts in it (%d line%s of comments or blanks); a line "
              "is HOST, HOST slots=N or HOST:N", path, line, line == 1 ? "" : "s");
    rc = -1;
  }
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
