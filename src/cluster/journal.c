/* The cluster manager's journal (journal.h). */
#include "journal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gradsync/core.h"

unsigned long cluster_crc32(const void *data, size_t n) {
  static unsigned long table[256];
  static int made;
  if (!made) {
    for (unsigned long i = 0; i < 256; i++) {
      unsigned long c = i;
      for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320UL ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    made = 1;
  }
  const unsigned char *p = data;
  unsigned long c = 0xFFFFFFFFUL;
  for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFUL;
}

static int fsync_dir_of(const char *path) {
  char copy[4096];
  snprintf(copy, sizeof copy, "%s", path);
  int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

int cluster_write_atomic(const char *path, const char *text, size_t len) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  if (write_all(fd, text, len) != 0 || fsync(fd) != 0) {
    int e = errno;
    close(fd);
    unlink(tmp);
    errno = e;
    return -1;
  }
  close(fd);
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    errno = e;
    return -1;
  }
  return fsync_dir_of(path);
}

/* The record line of rec: "CRC JSON\n" (gs_malloc'ed). */
static char *record_line(const cJSON *rec, size_t *len) {
  char *json = cJSON_PrintUnformatted(rec);
  if (!json) return NULL;
  size_t n = strlen(json);
  char *line = gs_malloc(n + 11);
  if (line) {
    snprintf(line, n + 11, "%08lx %s\n", cluster_crc32(json, n), json);
    *len = n + 10;
  }
  cJSON_free(json);
  return line;
}

long cluster_journal_replay(const char *path, void (*fn)(const cJSON *rec, void *user),
                            void *user, long *dropped, char *err, size_t errlen) {
  cluster_journal_cut cut;
  long good = cluster_journal_replay_cut(path, fn, user, &cut, err, errlen);
  if (dropped) *dropped = cut.bytes;
  return good;
}

/* Writes the journal as it was (buf, got bytes) to a new file beside it. */
static int keep_copy(const char *path, const char *buf, size_t got, char *copy, size_t len,
                     char *err, size_t errlen) {
  time_t now = time(NULL);
  struct tm tm;
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", gmtime_r(&now, &tm));
  int fd = -1;
  for (int k = 0; k < 100 && fd < 0; k++) {
    if (k == 0) snprintf(copy, len, "%s.corrupt-%s", path, stamp);
    else snprintf(copy, len, "%s.corrupt-%s.%d", path, stamp, k);
    fd = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  size_t w = 0;
  while (fd >= 0 && w < got) {
    ssize_t k = write(fd, buf + w, got - w);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    w += (size_t)k;
  }
  if (fd < 0 || w < got || fsync(fd) != 0) {
    snprintf(err, errlen, "journal %s: a corrupt record; cannot keep a copy in %s before "
             "cutting it: %s", path, copy, strerror(errno ? errno : EIO));
    if (fd >= 0) close(fd);
    copy[0] = '\0';
    return -1;
  }
  close(fd);
  return 0;
}

long cluster_journal_replay_cut(const char *path, void (*fn)(const cJSON *rec, void *user),
                                void *user, cluster_journal_cut *cut, char *err,
                                size_t errlen) {
  memset(cut, 0, sizeof *cut);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    snprintf(err, errlen, "journal %s: cannot open it: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(err, errlen, "journal %s: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  size_t size = (size_t)st.st_size;
  char *buf = gs_malloc(size + 1);
  if (!buf) {
    snprintf(err, errlen, "journal %s: out of memory (%zu bytes)", path, size);
    close(fd);
    return -1;
  }
  size_t got = 0;
  while (got < size) {
    ssize_t k = read(fd, buf + got, size - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += (size_t)k;
  }
  buf[got] = '\0';
  long good = 0;
  size_t off = 0;
  while (off < got) {
    char *nl = memchr(buf + off, '\n', got - off);
    if (!nl) { /* torn: the last write did not finish */
      cut->torn = 1;
      break;
    }
    size_t n = (size_t)(nl - (buf + off));
    *nl = '\0';
    char *line = buf + off;
    unsigned long crc = 0;
    char *end = NULL;
    int ok = n >= 10 && line[8] == ' ';
    if (ok) crc = strtoul(line, &end, 16);
    ok = ok && end == line + 8 && crc == cluster_crc32(line + 9, n - 9);
    cJSON *rec = ok ? cJSON_Parse(line + 9) : NULL;
    *nl = '\n'; /* (the buffer stays the file's bytes, for a copy) */
    if (!rec) break;
    fn(rec, user);
    cJSON_Delete(rec);
    good++;
    off += n + 1;
  }
  if (off < got) {
    cut->bytes = (long)(got - off);
    cut->line = good + 1;
    for (const char *p = buf + off; (p = memchr(p, '\n', (size_t)(buf + got - p))); p++)
      cut->later++;
    if (got > 0 && buf[got - 1] != '\n') cut->later++; /* a last line without its newline */
    cut->later--; /* the bad record itself */
    if (!cut->torn &&
        keep_copy(path, buf, got, cut->copy, sizeof cut->copy, err, errlen) != 0) {
      gs_free(buf);
      close(fd);
      return -1;
    }
    if (ftruncate(fd, (off_t)off) != 0 || fsync(fd) != 0) {
      snprintf(err, errlen, "journal %s: cannot cut its torn tail: %s", path, strerror(errno));
      gs_free(buf);
      close(fd);
      return -1;
    }
  }
  gs_free(buf);
  close(fd);
  return good;
}

int cluster_journal_open(cluster_journal *j, const char *path, char *err, size_t errlen) {
  if (path != j->path) snprintf(j->path, sizeof j->path, "%s", path);
  j->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (j->fd < 0) {
    snprintf(err, errlen, "journal %s: cannot open it: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

int cluster_journal_append(cluster_journal *j, const cJSON *rec, char *err, size_t errlen) {
  size_t len = 0;
  char *line = record_line(rec, &len);
  if (!line) {
    snprintf(err, errlen, "journal %s: out of memory", j->path);
    return -1;
  }
  int rc = write_all(j->fd, line, len) == 0 && fsync(j->fd) == 0 ? 0 : -1;
  if (rc != 0) snprintf(err, errlen, "journal %s: cannot write: %s", j->path, strerror(errno));
  gs_free(line);
  return rc;
}

int cluster_journal_rewrite(cluster_journal *j, cJSON *const *recs, int n, char *err,
                            size_t errlen) {
  size_t cap = 4096, len = 0;
  char *all = gs_malloc(cap);
  for (int i = 0; all && i < n; i++) {
    size_t k = 0;
    char *line = record_line(recs[i], &k);
    if (!line) {
      gs_free(all);
      all = NULL;
      break;
    }
    if (len + k + 1 > cap) {
      while (len + k + 1 > cap) cap *= 2;
      char *grown = gs_realloc(all, cap);
      if (!grown) {
        gs_free(line);
        gs_free(all);
        all = NULL;
        break;
      }
      all = grown;
    }
    memcpy(all + len, line, k);
    len += k;
    gs_free(line);
  }
  if (!all) {
    snprintf(err, errlen, "journal %s: out of memory compacting it", j->path);
    return -1;
  }
  if (cluster_write_atomic(j->path, all, len) != 0) {
    snprintf(err, errlen, "journal %s: cannot compact it: %s", j->path, strerror(errno));
    gs_free(all);
    return -1;
  }
  gs_free(all);
  if (j->fd >= 0) close(j->fd);
  return cluster_journal_open(j, j->path, err, errlen);
}

void cluster_journal_close(cluster_journal *j) {
  if (j->fd >= 0) close(j->fd);
  j->fd = -1;
}
