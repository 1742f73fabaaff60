/*
 * A streaming reader of Criteo's TSV day files (include/gradsync/dlrm.h):
 * the Kaggle display-advertising set (train.txt) and the Terabyte set's
 * day_0 .. day_23 have the same line: label, 13 integers, 26 hex values.
 * The transformation is the DLRM reference's (dlrm_data_pytorch.py and
 * data_utils.py: empty fields read as 0, integers clipped at 0 and put
 * through log(1 + x), categorical values taken modulo the table's rows as
 * its --max-ind-range does). Files compressed with gzip (the day files as
 * Criteo ships them) are read as they are, through zlib, which reads plain
 * files too.
 *
 * A vocabulary (gs_criteo_vocab_build) is the other way to ids, TorchRec's
 * and MLPerf's preprocessing: each feature's values counted over the
 * training lines, those seen at least a threshold of times numbered from 2
 * by falling count (ties by value), the rest (rare, or first seen in the
 * held-out lines) 1, an empty field 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dlrm_internal.h"
#include "gradsync/dlrm.h"
#include "gradsync/dlrm_dist.h"
#include "gs_internal.h"

#define CRITEO_FIELDS (1 + GS_CRITEO_DENSE + GS_CRITEO_SPARSE)

#define CRITEO_CHUNK ((size_t)1 << 16)

/* One feature's values: open addressing on the value, count 0 an empty
 * slot; id: the value's id once the vocabulary is made. */
typedef struct vocab_table {
  uint64_t *key;
  uint32_t *count, *id;
  size_t cap, n;     /* slots (a power of two), values held */
  size_t kept;       /* values at or above the threshold: ids 2 .. kept + 1 */
  size_t distinct;   /* values counted (n, or across the ranks: the table
                      * then holds the kept ones alone) */
} vocab_table;

struct gs_criteo_vocab {
  vocab_table t[GS_CRITEO_SPARSE];
  uint64_t min_count;
  size_t lines; /* counted */
};

struct gs_criteo_reader {
  gzFile f;
  char *path;
  size_t rows[GS_CRITEO_SPARSE];
  const gs_criteo_vocab *vocab; /* borrowed, or NULL: the value modulo the rows */
  char *buf;           /* the bytes read and not yet consumed: [pos, len) */
  size_t cap, pos, len;
  int eof;
  size_t lineno, samples;
};

gs_status gs_criteo_open(const char *path, const gs_embed_spec *tables, int ntables,
                         gs_criteo_reader **out) {
  if (path == NULL || out == NULL || tables == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "Criteo reader: NULL path, tables or output");
  *out = NULL;
  if (ntables != GS_CRITEO_SPARSE)
    return gs_error(GS_ERR_INVALID_ARG, "Criteo file '%s': %d tables given, the file has %d "
                    "categorical features", path, ntables, GS_CRITEO_SPARSE);
  for (int t = 0; t < ntables; t++)
    if (tables[t].rows == 0 || tables[t].rows > INT32_MAX)
      return gs_error(GS_ERR_INVALID_ARG, "Criteo file '%s': table %d has %zu rows (1 to "
                      "2^31 - 1)", path, t, tables[t].rows);
  gs_criteo_reader *r = gs_calloc(1, sizeof *r);
  size_t len = strlen(path) + 1;
  if (r == NULL || (r->path = gs_malloc(len)) == NULL) {
    gs_free(r);
    return gs_error(GS_ERR_NOMEM, "Criteo file '%s': out of memory", path);
  }
  memcpy(r->path, path, len);
  for (int t = 0; t < ntables; t++) r->rows[t] = tables[t].rows;
  errno = 0;
  r->f = gzopen(path, "rb");
  if (r->f == NULL) {
    gs_status st = gs_error(GS_ERR_IO, "Criteo file '%s': %s", path,
                            errno ? strerror(errno) : "out of memory");
    gs_criteo_close(r);
    return st;
  }
  *out = r;
  return GS_OK;
}

void gs_criteo_close(gs_criteo_reader *r) {
  if (r == NULL) return;
  if (r->f) gzclose(r->f);
  gs_free(r->buf);
  gs_free(r->path);
  gs_free(r);
}

size_t gs_criteo_line(const gs_criteo_reader *r) { return r->lineno; }

static void field_name(int k, char *buf, size_t n) {
  if (k == 0) snprintf(buf, n, "label");
  else if (k <= GS_CRITEO_DENSE) snprintf(buf, n, "I%d", k);
  else snprintf(buf, n, "C%d", k - GS_CRITEO_DENSE);
}

static gs_status bad_field(const gs_criteo_reader *r, int k, const char *text,
                           const char *expected) {
  char name[16]; /* "label", "I13", "C26"; room for any int's digits */
  field_name(k, name, sizeof name);
  return gs_error(GS_ERR_PARSE, "Criteo file '%s' line %zu: field %d (%s) '%.40s' is not %s",
                  r->path, r->lineno, k + 1, name, text, expected);
}

/* One line's 40 fields, split in place at the tabs. */
static gs_status split_line(const gs_criteo_reader *r, char *line, char **fields) {
  size_t len = strlen(line);
  while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
  int k = 0;
  char *p = line;
  for (;;) {
    if (k < CRITEO_FIELDS) fields[k] = p;
    k++;
    char *tab = strchr(p, '\t');
    if (tab == NULL) break;
    *tab = '\0';
    p = tab + 1;
  }
  if (k != CRITEO_FIELDS)
    return gs_error(GS_ERR_PARSE, "Criteo file '%s' line %zu: %d tab-separated fields, "
                    "expected %d (label, %d integers, %d categorical)", r->path, r->lineno, k,
                    CRITEO_FIELDS, GS_CRITEO_DENSE, GS_CRITEO_SPARSE);
  return GS_OK;
}

/* Categorical feature t's value (*empty: the field is empty, *v 0). */
static gs_status parse_hex(const gs_criteo_reader *r, char **fields, int t, uint64_t *v,
                           int *empty) {
  const char *f = fields[1 + GS_CRITEO_DENSE + t];
  size_t len = strlen(f);
  if (len > 16 || strspn(f, "0123456789abcdefABCDEF") != len)
    return bad_field(r, 1 + GS_CRITEO_DENSE + t, f, "a hex value of at most 16 digits");
  *empty = len == 0;
  *v = len ? (uint64_t)strtoull(f, NULL, 16) : 0;
  return GS_OK;
}

static size_t vocab_slot(const vocab_table *vt, uint64_t v) {
  size_t i = (size_t)dlrm_mix(v) & (vt->cap - 1);
  while (vt->count[i] != 0 && vt->key[i] != v) i = (i + 1) & (vt->cap - 1);
  return i;
}

/* A value's id: 0 an empty field, 1 a value kept by no threshold. */
static uint64_t vocab_id(const vocab_table *vt, uint64_t v, int empty) {
  if (empty) return 0;
  if (vt->cap == 0) return 1;
  size_t i = vocab_slot(vt, v);
  return vt->count[i] != 0 ? vt->id[i] : 1;
}

static gs_status parse_sample(const gs_criteo_reader *r, char **fields, gs_dlrm_batch *b,
                              size_t s) {
  const char *lab = fields[0];
  if (!((lab[0] == '0' || lab[0] == '1') && lab[1] == '\0'))
    return bad_field(r, 0, lab, "0 or 1");
  b->labels[s] = (float)(lab[0] - '0');
  float *x = b->dense + s * GS_CRITEO_DENSE;
  for (int k = 0; k < GS_CRITEO_DENSE; k++) {
    const char *f = fields[1 + k];
    long long v = 0;
    if (*f) {
      char *end;
      errno = 0;
      v = strtoll(f, &end, 10);
      if (*end != '\0' || errno == ERANGE || !(*f == '-' || (*f >= '0' && *f <= '9')))
        return bad_field(r, 1 + k, f, "an integer");
    }
    x[k] = (float)log1p((double)(v > 0 ? v : 0));
  }
  for (int t = 0; t < GS_CRITEO_SPARSE; t++) {
    uint64_t v = 0;
    int empty = 1;
    GS_CHECK(parse_hex(r, fields, t, &v, &empty));
    uint64_t id = r->vocab ? vocab_id(&r->vocab->t[t], v, empty) : v;
    int64_t *off = b->offsets + (size_t)t * (b->max_n + 1);
    int32_t *ids = b->ids + (size_t)t * b->max_ids;
    ids[off[s]] = (int32_t)(id % r->rows[t]);
    off[s + 1] = off[s] + 1;
  }
  return GS_OK;
}

/* The next line, without its newline, NUL-terminated in place (*line,
 * *n bytes); *line = NULL at the end of the file. A last line without a
 * newline counts. */
/* zlib's message without the "PATH: " it puts first (the caller names
 * the file). */
static const char *gz_message(const gs_criteo_reader *r, const char *msg) {
  size_t n = strlen(r->path);
  if (msg && strncmp(msg, r->path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
    return msg + n + 2;
  return msg ? msg : "unknown zlib error";
}

static gs_status next_line(gs_criteo_reader *r, char **line, size_t *n) {
  *line = NULL;
  for (;;) {
    char *nl = r->len > r->pos ? memchr(r->buf + r->pos, '\n', r->len - r->pos) : NULL;
    if (nl || (r->eof && r->len > r->pos)) {
      char *start = r->buf + r->pos;
      size_t k = nl ? (size_t)(nl - start) : r->len - r->pos;
      start[k] = '\0'; /* the newline, or the room kept after the data */
      r->pos += k + (nl != NULL);
      *line = start;
      *n = k;
      r->lineno++;
      return GS_OK;
    }
    if (r->eof) return GS_OK;
    /* Keep the unfinished line at the front and read more behind it (one
     * byte always free for the terminator). */
    if (r->pos > 0) {
      memmove(r->buf, r->buf + r->pos, r->len - r->pos);
      r->len -= r->pos;
      r->pos = 0;
    }
    if (r->cap - r->len < CRITEO_CHUNK + 1) {
      size_t cap = r->cap ? 2 * r->cap : 2 * CRITEO_CHUNK;
      char *b = gs_realloc(r->buf, cap);
      if (b == NULL)
        return gs_error(GS_ERR_NOMEM, "Criteo file '%s' line %zu: out of memory for a line "
                        "of %zu bytes or more", r->path, r->lineno + 1, r->len);
      r->buf = b;
      r->cap = cap;
    }
    int got = gzread(r->f, r->buf + r->len, (unsigned)CRITEO_CHUNK);
    if (got < 0) {
      int zerr = 0;
      const char *msg = gz_message(r, gzerror(r->f, &zerr));
      return gs_error(GS_ERR_IO, "Criteo file '%s' after line %zu: %s", r->path, r->lineno,
                      zerr == Z_ERRNO ? strerror(errno ? errno : EIO) : msg);
    }
    if (got == 0) {
      /* gzread returns 0 at the end, and for a truncated gzip stream too:
       * that one is an error, not a short file. */
      int zerr = 0;
      const char *msg = gz_message(r, gzerror(r->f, &zerr));
      if (zerr != Z_OK && zerr != Z_STREAM_END)
        return gs_error(GS_ERR_IO, "Criteo file '%s' after line %zu: %s", r->path, r->lineno,
                        msg);
      r->eof = 1;
    }
    r->len += (size_t)got;
  }
}

gs_status gs_criteo_skip(gs_criteo_reader *r, size_t n, size_t *skipped) {
  if (r == NULL || skipped == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "Criteo reader: NULL reader or count");
  *skipped = 0;
  while (*skipped < n) {
    char *line;
    size_t len;
    GS_CHECK(next_line(r, &line, &len));
    if (line == NULL) break;
    (*skipped)++;
  }
  r->samples += *skipped;
  return GS_OK;
}

gs_status gs_criteo_rewind(gs_criteo_reader *r) {
  if (r == NULL) return gs_error(GS_ERR_INVALID_ARG, "Criteo reader: NULL reader");
  if (gzrewind(r->f) != 0)
    return gs_error(GS_ERR_IO, "Criteo file '%s': cannot go back to its start", r->path);
  r->pos = r->len = 0;
  r->eof = 0;
  r->lineno = r->samples = 0;
  return GS_OK;
}

gs_status gs_criteo_read(gs_criteo_reader *r, gs_dlrm_batch *b, size_t *got) {
  if (r == NULL || b == NULL || got == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "Criteo reader: NULL reader, batch or count");
  *got = 0;
  if (b->ndense != GS_CRITEO_DENSE || b->ntables != GS_CRITEO_SPARSE || b->max_ids < b->max_n)
    return gs_error(GS_ERR_INVALID_ARG, "Criteo file '%s': a batch of %zu dense and %d tables "
                    "with room for %zu ids per table; %d, %d and at least %zu needed", r->path,
                    b->ndense, b->ntables, b->max_ids, GS_CRITEO_DENSE, GS_CRITEO_SPARSE,
                    b->max_n);
  b->n = 0;
  b->first_sample = r->samples;
  for (int t = 0; t < GS_CRITEO_SPARSE; t++) b->offsets[(size_t)t * (b->max_n + 1)] = 0;
  char *fields[CRITEO_FIELDS];
  size_t s = 0;
  while (s < b->max_n) {
    char *line;
    size_t len;
    GS_CHECK(next_line(r, &line, &len));
    if (line == NULL) break;
    if (memchr(line, '\0', len) != NULL)
      return gs_error(GS_ERR_PARSE, "Criteo file '%s' line %zu: a NUL byte inside the line",
                      r->path, r->lineno);
    GS_CHECK(split_line(r, line, fields));
    GS_CHECK(parse_sample(r, fields, b, s));
    s++;
  }
  b->n = s;
  for (int t = 0; t < GS_CRITEO_SPARSE; t++) {
    b->bags[t].nbags = s;
    b->bags[t].first_sample = b->first_sample;
  }
  r->samples += s;
  *got = s;
  return GS_OK;
}

/* ---- The vocabulary ------------------------------------------------------ */

static int vocab_grow(vocab_table *vt) {
  size_t cap = vt->cap ? 2 * vt->cap : 1024;
  vocab_table n = {.cap = cap};
  n.key = gs_malloc(cap * sizeof *n.key);
  n.count = gs_calloc(cap, sizeof *n.count);
  if (n.key == NULL || n.count == NULL) {
    gs_free(n.key);
    gs_free(n.count);
    return -1;
  }
  for (size_t i = 0; i < vt->cap; i++)
    if (vt->count[i] != 0) {
      size_t j = vocab_slot(&n, vt->key[i]);
      n.key[j] = vt->key[i];
      n.count[j] = vt->count[i];
    }
  n.n = vt->n;
  gs_free(vt->key);
  gs_free(vt->count);
  *vt = n;
  return 0;
}

/* Adds c (>= 1) to value v's count, at most UINT32_MAX. */
static int vocab_add(vocab_table *vt, uint64_t v, uint64_t c) {
  if (2 * (vt->n + 1) > vt->cap && vocab_grow(vt) != 0) return -1;
  size_t i = vocab_slot(vt, v);
  if (vt->count[i] == 0) {
    vt->key[i] = v;
    vt->n++;
  }
  uint64_t sum = vt->count[i] + c;
  vt->count[i] = sum < UINT32_MAX ? (uint32_t)sum : UINT32_MAX;
  return 0;
}

static void vocab_table_free(vocab_table *vt) {
  gs_free(vt->key);
  gs_free(vt->count);
  gs_free(vt->id);
  *vt = (vocab_table){0};
}

typedef struct {
  uint64_t key;
  uint32_t count;
  size_t slot;
} vocab_entry;

/* By falling count, then by value: the ids do not depend on the order of
 * the slots (nor on the hash). */
static int entry_cmp(const void *a, const void *b) {
  const vocab_entry *x = a, *y = b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  return (x->key > y->key) - (x->key < y->key);
}

/* Numbers the values at or above the threshold from 2. */
static int vocab_number(vocab_table *vt, uint64_t min_count) {
  if (vt->cap == 0) return 0;
  vt->id = gs_malloc(vt->cap * sizeof *vt->id);
  vocab_entry *e = gs_malloc((vt->n ? vt->n : 1) * sizeof *e);
  if (vt->id == NULL || e == NULL) {
    gs_free(e);
    return -1;
  }
  size_t k = 0;
  for (size_t i = 0; i < vt->cap; i++)
    if (vt->count[i] != 0 && vt->count[i] >= min_count)
      e[k++] = (vocab_entry){vt->key[i], vt->count[i], i};
  qsort(e, k, sizeof *e, entry_cmp);
  for (size_t i = 0; i < vt->cap; i++) vt->id[i] = 1;
  for (size_t i = 0; i < k; i++) vt->id[e[i].slot] = (uint32_t)(i + 2);
  vt->kept = k;
  gs_free(e);
  return 0;
}

/* Counts one line's values into v (r: the reader it came from, for its
 * name and line number). */
static gs_status count_line(gs_criteo_reader *r, char *line, size_t len, char **fields,
                            gs_criteo_vocab *v) {
  if (memchr(line, '\0', len) != NULL)
    return gs_error(GS_ERR_PARSE, "Criteo file '%s' line %zu: a NUL byte inside the line",
                    r->path, r->lineno);
  gs_status st = split_line(r, line, fields);
  for (int t = 0; t < GS_CRITEO_SPARSE && st == GS_OK; t++) {
    uint64_t x = 0;
    int empty = 1;
    st = parse_hex(r, fields, t, &x, &empty);
    if (st == GS_OK && !empty && vocab_add(&v->t[t], x, 1) != 0)
      st = gs_error(GS_ERR_NOMEM, "Criteo file '%s' line %zu: out of memory for feature "
                    "C%d's %zu values", r->path, r->lineno, t + 1, v->t[t].n);
  }
  return st;
}

static gs_status open_counter(const char *path, gs_criteo_reader **r) {
  gs_embed_spec one[GS_CRITEO_SPARSE];
  for (int t = 0; t < GS_CRITEO_SPARSE; t++) one[t] = (gs_embed_spec){.rows = 1};
  return gs_criteo_open(path, one, GS_CRITEO_SPARSE, r);
}

/* Counts into v the values of the file's lines i < `lines` (0: all) with
 * i % stride == offset; the others are passed over unparsed. v->lines: the
 * lines passed over or counted, the range's whole. */
static gs_status vocab_count(const char *path, size_t lines, size_t stride, size_t offset,
                             gs_criteo_vocab *v) {
  gs_criteo_reader *r;
  GS_CHECK(open_counter(path, &r));
  gs_status st = GS_OK;
  char *fields[CRITEO_FIELDS];
  while (st == GS_OK && (lines == 0 || v->lines < lines)) {
    char *line;
    size_t len;
    st = next_line(r, &line, &len);
    if (st != GS_OK || line == NULL) break;
    if (v->lines++ % stride != offset) continue;
    st = count_line(r, line, len, fields, v);
  }
  gs_criteo_close(r);
  for (int t = 0; t < GS_CRITEO_SPARSE; t++) v->t[t].distinct = v->t[t].n;
  return st;
}

/* ---- A plain file split by bytes --------------------------------------------
 *
 * A file that is not gzip's is split into P byte ranges, and a line is
 * counted by the rank whose range holds its first byte: each rank reads
 * its range (and the rest of its last line) and no other, once to count
 * its line starts (so that every rank learns, from one agreement, the
 * index of its first line, which the line limit and the messages' line
 * numbers need) and once to count their values, from the page cache. */

/* Whether the file starts as gzip does (its first two bytes). */
static gs_status is_gzip(const char *path, int fd, int *gz) {
  unsigned char m[2];
  ssize_t n = pread(fd, m, 2, 0);
  if (n < 0)
    return gs_error(GS_ERR_IO, "Criteo file '%s': cannot read it: %s", path, strerror(errno));
  *gz = n == 2 && m[0] == 0x1f && m[1] == 0x8b;
  return GS_OK;
}

/* Visits fd's newlines at bytes [from, to) in order: visit(pos, arg)
 * returns 0 to go on, 1 to stop. */
static gs_status each_newline(const char *path, int fd, uint64_t from, uint64_t to,
                              int (*visit)(uint64_t pos, void *arg), void *arg) {
  enum { CHUNK = 1 << 20 };
  char *buf = gs_malloc(CHUNK);
  if (buf == NULL) return gs_error(GS_ERR_NOMEM, "Criteo file '%s': out of memory", path);
  gs_status st = GS_OK;
  int stop = 0;
  for (uint64_t at = from; at < to && !stop;) {
    ssize_t got = pread(fd, buf, (size_t)GS_MIN((uint64_t)CHUNK, to - at), (off_t)at);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      st = gs_error(GS_ERR_IO, "Criteo file '%s': reading bytes %" PRIu64 " on: %s", path, at,
                    got < 0 ? strerror(errno) : "it is shorter than it was");
      break;
    }
    for (const char *q = buf, *end = buf + got;
         !stop && (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++)
      stop = visit(at + (uint64_t)(q - buf), arg);
    at += (uint64_t)got;
  }
  gs_free(buf);
  return st;
}

typedef struct starts {
  uint64_t size, hi, first, count; /* range_lines' */
  size_t index, n;                 /* line_start's: the line counted to, the one sought */
  uint64_t at;
} starts;

static int count_start(uint64_t pos, void *arg) {
  starts *s = arg;
  if (pos + 1 >= s->size) return 1;
  if (s->first == s->hi) s->first = pos + 1;
  s->count++;
  return 0;
}

/* In bytes [lo, hi) of the lines that start before byte `size` (the
 * file's, or where the lines counted end): *first, where the first line
 * that starts there starts (hi when none does), and *count, how many start
 * there (a line starts at 0 and after every newline, but not at size). */
static gs_status range_lines(const char *path, int fd, uint64_t lo, uint64_t hi,
                             uint64_t size, uint64_t *first, uint64_t *count) {
  starts s = {.size = size, .hi = hi, .first = hi};
  gs_status st = GS_OK;
  if (lo < hi) {
    if (lo == 0) {
      s.first = 0;
      s.count = 1;
    }
    /* newlines at p in [lo - 1, hi - 1): a line starts at p + 1 in [lo, hi) */
    st = each_newline(path, fd, lo == 0 ? 0 : lo - 1, hi - 1, count_start, &s);
  }
  *first = s.first;
  *count = s.count;
  return st;
}

/* Counts the newlines in buf[0, n) into *lines up to limit (0: none), and
 * returns 1 once the limit is reached. */
static int count_newlines(const char *buf, size_t n, size_t limit, size_t *lines) {
  for (const char *q = buf, *end = buf + n; (q = memchr(q, '\n', (size_t)(end - q))) != NULL;
       q++)
    if (++*lines == limit) return 1;
  return 0;
}

gs_status gs_criteo_count_lines(const char *path, size_t limit, size_t *lines) {
  if (path == NULL || lines == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "Criteo line count: NULL path or count");
  *lines = 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return gs_error(GS_ERR_IO, "Criteo file '%s': cannot read it: %s", path, strerror(errno));
  struct stat sb;
  int gz = 0;
  gs_status st = fstat(fd, &sb) != 0
                     ? gs_error(GS_ERR_IO, "Criteo file '%s': %s", path, strerror(errno))
                     : is_gzip(path, fd, &gz);
  char *buf = st == GS_OK ? gs_malloc(CRITEO_CHUNK) : NULL;
  if (st == GS_OK && buf == NULL)
    st = gs_error(GS_ERR_NOMEM, "Criteo file '%s': out of memory", path);
  int done = 0;
  char last = '\n'; /* the last byte seen: a line without its newline after it counts */
  if (st == GS_OK && !gz && S_ISREG(sb.st_mode)) {
    for (uint64_t at = 0; st == GS_OK && !done;) {
      ssize_t got = pread(fd, buf, CRITEO_CHUNK, (off_t)at);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0)
        st = gs_error(GS_ERR_IO, "Criteo file '%s': reading bytes %" PRIu64 " on: %s", path,
                      at, strerror(errno));
      if (got <= 0) break;
      done = count_newlines(buf, (size_t)got, limit, lines);
      last = buf[got - 1];
      at += (uint64_t)got;
    }
  } else if (st == GS_OK) {
    /* gzip (or a pipe): through zlib, as the reader reads it */
    gzFile f = gzopen(path, "rb");
    size_t plen = strlen(path);
    if (f == NULL)
      st = gs_error(GS_ERR_IO, "Criteo file '%s': cannot open it for reading", path);
    while (st == GS_OK && !done) {
      int got = gzread(f, buf, (unsigned)CRITEO_CHUNK);
      int zerr = Z_OK;
      const char *msg = got <= 0 ? gzerror(f, &zerr) : NULL;
      /* zlib's message without the "PATH: " it puts first (as gz_message) */
      if (msg && strncmp(msg, path, plen) == 0 && msg[plen] == ':' && msg[plen + 1] == ' ')
        msg += plen + 2;
      if (got < 0 || (got == 0 && zerr != Z_OK && zerr != Z_STREAM_END))
        st = gs_error(GS_ERR_IO, "Criteo file '%s' after line %zu: %s", path, *lines,
                      zerr == Z_ERRNO ? strerror(errno ? errno : EIO) : msg);
      if (got <= 0) break;
      done = count_newlines(buf, (size_t)got, limit, lines);
      last = buf[got - 1];
    }
    if (f) gzclose(f);
  }
  if (st == GS_OK && !done && last != '\n') ++*lines;
  gs_free(buf);
  close(fd);
  return st;
}

/* Counts into v the values of the lines that start in [first, hi), whose
 * first is the file's line `index` (0-based), those below `lines` (0:
 * all). v->lines: the lines counted. */
static gs_status vocab_count_range(const char *path, uint64_t first, uint64_t hi, size_t index,
                                   size_t lines, gs_criteo_vocab *v) {
  gs_criteo_reader *r;
  GS_CHECK(open_counter(path, &r));
  gs_status st = GS_OK;
  /* gzdirect first: zlib then knows the file is plain and seeks there
   * (before, its seek would read and drop every byte up to first) */
  if (first > 0 && (!gzdirect(r->f) || gzseek(r->f, (z_off_t)first, SEEK_SET) != (z_off_t)first))
    st = gs_error(GS_ERR_IO, "Criteo file '%s': cannot seek to byte %" PRIu64, path, first);
  r->lineno = index; /* the messages name the file's line numbers */
  char *fields[CRITEO_FIELDS];
  for (uint64_t at = first; st == GS_OK && at < hi && (lines == 0 || index < lines); index++) {
    char *line;
    size_t len;
    st = next_line(r, &line, &len);
    if (st != GS_OK || line == NULL) break;
    at += len + 1;
    v->lines++;
    st = count_line(r, line, len, fields, v);
  }
  gs_criteo_close(r);
  for (int t = 0; t < GS_CRITEO_SPARSE; t++) v->t[t].distinct = v->t[t].n;
  return st;
}

static gs_status vocab_check_args(const char *path, uint64_t min_count, gs_criteo_vocab **out) {
  if (path == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "Criteo vocabulary: NULL path or output");
  *out = NULL;
  if (min_count < 1 || min_count > UINT32_MAX)
    return gs_error(GS_ERR_INVALID_ARG, "Criteo file '%s': a frequency threshold of %" PRIu64
                    " (1 to 2^32 - 1)", path, min_count);
  return GS_OK;
}

/* Numbers every feature's values at or above the threshold; v's own on
 * failure. */
static gs_status vocab_finish(const char *path, uint64_t min_count, gs_criteo_vocab *v,
                              gs_criteo_vocab **out) {
  gs_status st = GS_OK;
  for (int t = 0; t < GS_CRITEO_SPARSE && st == GS_OK; t++)
    if (vocab_number(&v->t[t], min_count) != 0)
      st = gs_error(GS_ERR_NOMEM, "Criteo file '%s': out of memory numbering feature C%d's "
                    "%zu values", path, t + 1, v->t[t].n);
  if (st != GS_OK) {
    gs_criteo_vocab_free(v);
    return st;
  }
  v->min_count = min_count;
  *out = v;
  return GS_OK;
}

gs_status gs_criteo_vocab_build(const char *path, size_t lines, uint64_t min_count,
                                gs_criteo_vocab **out) {
  GS_CHECK(vocab_check_args(path, min_count, out));
  gs_criteo_vocab *v = gs_calloc(1, sizeof *v);
  if (v == NULL) return gs_error(GS_ERR_NOMEM, "Criteo file '%s': out of memory", path);
  gs_status st = vocab_count(path, lines, 1, 0, v);
  if (st != GS_OK) {
    gs_criteo_vocab_free(v);
    return st;
  }
  return vocab_finish(path, min_count, v, out);
}

/* Which rank sums value x's counts (not the slot's hash bits). */
static size_t vocab_owner(uint64_t x, size_t P) { return (size_t)(dlrm_mix(x) >> 32) % P; }

/* An entry on the wire: the value, and its feature and count. */
#define VOCAB_PACK(t, c) ((int64_t)(((uint64_t)(t) << 32) | (uint64_t)(c)))

/* Adds n packed entries (value, then VOCAB_PACK(feature, count)) to the
 * features' tables; -1 out of memory. */
static int vocab_add_packed(vocab_table *tables, const int64_t *e, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint64_t pk = (uint64_t)e[2 * i + 1];
    if (vocab_add(&tables[pk >> 32], (uint64_t)e[2 * i], pk & 0xffffffffu) != 0) return -1;
  }
  return 0;
}

/* Sends each counted value to its owner (by value), which sums the ranks'
 * counts; the owners' values at or above the threshold go to every rank,
 * and the features' distinct values are summed. v's tables are replaced by
 * the kept values with their whole counts. */
static gs_status vocab_merge(const char *path, uint64_t min_count, gs_comm *comm,
                             gs_criteo_vocab *v) {
  const size_t P = (size_t)gs_comm_size(comm);
  size_t *sc = gs_calloc(4 * P, sizeof *sc), *sd = sc ? sc + P : NULL,
         *rc = sc ? sc + 2 * P : NULL, *rd = sc ? sc + 3 * P : NULL;
  int64_t *cnt = gs_calloc(2 * P, sizeof *cnt), *rcnt = cnt ? cnt + P : NULL;
  int64_t *send = NULL, *recv = NULL, *kept = NULL, *all = NULL;
  int64_t distinct[GS_CRITEO_SPARSE], dsum[GS_CRITEO_SPARSE];
  vocab_table own[GS_CRITEO_SPARSE] = {{0}};
  gs_status st = sc && cnt ? GS_OK : GS_ERR_NOMEM;
  size_t n = 0, nr = 0, nk = 0, na = 0;
  for (int t = 0; t < GS_CRITEO_SPARSE && st == GS_OK; t++) {
    n += v->t[t].n;
    for (size_t i = 0; i < v->t[t].cap; i++)
      if (v->t[t].count[i] != 0) cnt[vocab_owner(v->t[t].key[i], P)]++;
  }
  if (st == GS_OK) send = gs_malloc(2 * (n ? n : 1) * sizeof *send);
  if (st == GS_OK && send == NULL) st = GS_ERR_NOMEM;
  if (st == GS_OK) {
    for (size_t p = 0, at = 0; p < P; p++) {
      sd[p] = at;
      at += 2 * (size_t)cnt[p];
      sc[p] = 0;
    }
    for (int t = 0; t < GS_CRITEO_SPARSE; t++)
      for (size_t i = 0; i < v->t[t].cap; i++)
        if (v->t[t].count[i] != 0) {
          size_t p = vocab_owner(v->t[t].key[i], P), at = sd[p] + sc[p];
          send[at] = (int64_t)v->t[t].key[i];
          send[at + 1] = VOCAB_PACK(t, v->t[t].count[i]);
          sc[p] += 2;
        }
    st = gs_alltoall(comm, cnt, rcnt, 1, GS_I64, GS_ALGO_AUTO);
  }
  if (st == GS_OK) {
    for (size_t p = 0; p < P; p++) {
      rd[p] = 2 * nr;
      rc[p] = 2 * (size_t)rcnt[p];
      nr += (size_t)rcnt[p];
    }
    recv = gs_malloc(2 * (nr ? nr : 1) * sizeof *recv);
    st = recv ? gs_alltoallv(comm, send, sc, sd, recv, rc, rd, GS_I64, GS_ALGO_AUTO)
              : GS_ERR_NOMEM;
  }
  /* The values this rank owns, summed over the ranks, and those kept
   * (room for all it holds). */
  if (st == GS_OK && vocab_add_packed(own, recv, nr) != 0) st = GS_ERR_NOMEM;
  size_t held = 0;
  for (int t = 0; t < GS_CRITEO_SPARSE; t++) {
    distinct[t] = (int64_t)own[t].n;
    held += own[t].n;
  }
  if (st == GS_OK && (kept = gs_malloc(2 * (held ? held : 1) * sizeof *kept)) == NULL)
    st = GS_ERR_NOMEM;
  if (st == GS_OK) {
    for (int t = 0; t < GS_CRITEO_SPARSE; t++)
      for (size_t i = 0; i < own[t].cap; i++)
        if (own[t].count[i] != 0 && own[t].count[i] >= min_count) {
          kept[2 * nk] = (int64_t)own[t].key[i];
          kept[2 * nk + 1] = VOCAB_PACK(t, own[t].count[i]);
          nk++;
        }
    int64_t mine = (int64_t)nk;
    st = gs_allgather(comm, &mine, cnt, 1, GS_I64, GS_ALGO_AUTO);
  }
  if (st == GS_OK) st = gs_allreduce(comm, distinct, dsum, GS_CRITEO_SPARSE, GS_I64, GS_SUM,
                                     GS_ALGO_AUTO);
  if (st == GS_OK) {
    for (size_t p = 0; p < P; p++) {
      rd[p] = 2 * na;
      rc[p] = 2 * (size_t)cnt[p];
      na += (size_t)cnt[p];
    }
    all = gs_malloc(2 * (na ? na : 1) * sizeof *all);
    st = all ? gs_allgatherv(comm, kept, 2 * nk, all, rc, rd, GS_I64, GS_ALGO_AUTO)
             : GS_ERR_NOMEM;
  }
  /* Every rank's tables: the kept values with their whole counts. */
  if (st == GS_OK)
    for (int t = 0; t < GS_CRITEO_SPARSE; t++) vocab_table_free(&v->t[t]);
  if (st == GS_OK && vocab_add_packed(v->t, all, na) != 0) st = GS_ERR_NOMEM;
  if (st == GS_OK)
    for (int t = 0; t < GS_CRITEO_SPARSE; t++) v->t[t].distinct = (size_t)dsum[t];
  for (int t = 0; t < GS_CRITEO_SPARSE; t++) vocab_table_free(&own[t]);
  gs_free(sc);
  gs_free(cnt);
  gs_free(send);
  gs_free(recv);
  gs_free(kept);
  gs_free(all);
  if (st == GS_ERR_NOMEM)
    return gs_error(st, "Criteo file '%s': out of memory merging the ranks' vocabularies",
                    path);
  return st; /* a collective's own error */
}

/* What each rank tells the others of its byte range. */
typedef struct range_vote {
  uint64_t size, lines; /* the file's size; the lines that start in the range */
  uint64_t end;         /* where line `lines` starts, on the rank whose range holds it */
  uint32_t gz, pad;     /* gzip (or not a regular file): no ranges */
} range_vote;

/* Collective: the agreement on every rank's vote (a failure's words on
 * every rank); *all: the votes (gs_free), checked to be of one file. */
static gs_status agree_ranges(const char *path, gs_comm *comm, gs_status mine,
                              const range_vote *rv, range_vote **all) {
  char msg[GS_VOTE_MESSAGE] = "";
  if (mine != GS_OK) gs__error_copy(msg, sizeof msg);
  gs_agreement a = {0};
  *all = NULL;
  gs_status st = gs_agree(comm, gs_comm_mpi(comm), "the Criteo file's vocabulary", mine, msg,
                          rv, sizeof *rv, &a);
  if (st == GS_OK && a.failed)
    st = gs_error((gs_status)a.votes[a.first].status, "%s", a.votes[a.first].message);
  const range_vote *v = a.payloads;
  for (int q = 0; st == GS_OK && q < a.size; q++)
    if (v[q].gz != v[0].gz || v[q].size != v[0].size)
      st = gs_error(GS_ERR_MISMATCH, "Criteo file '%s': rank %d sees %s of %" PRIu64 " bytes, "
                    "rank 0 %s of %" PRIu64 " (every rank must read the same file)", path, q,
                    v[q].gz ? "a gzip file" : "a plain file", v[q].size,
                    v[0].gz ? "a gzip file" : "a plain file", v[0].size);
  if (st == GS_OK) {
    *all = gs_malloc((size_t)a.size * sizeof **all);
    if (*all == NULL) st = gs_error(GS_ERR_NOMEM, "Criteo file '%s': out of memory", path);
    else memcpy(*all, v, (size_t)a.size * sizeof **all);
  }
  gs_agreement_free(&a);
  return st;
}

static int find_start(uint64_t pos, void *arg) {
  starts *s = arg;
  s->at = pos + 1;
  return ++s->index >= s->n;
}

/* Where line n (0-based) starts, counting from the line `index` that
 * starts at byte first, n among the lines that start before hi. */
static gs_status line_start(const char *path, int fd, uint64_t first, uint64_t hi, size_t index,
                            size_t n, uint64_t *at) {
  starts s = {.index = index, .n = n, .at = first};
  gs_status st = index < n ? each_newline(path, fd, first, hi, find_start, &s) : GS_OK;
  *at = s.at;
  return st;
}

/* A plain file's lines among the ranks: bytes [0, end) split into P
 * ranges; *first and *hi: this rank's lines start in [*first, *hi);
 * *index: the first one's line number (0-based); *total: the lines in
 * [0, end); *all: every rank's vote (gs_free). Collective. */
static gs_status split_lines(const char *path, gs_comm *comm, int fd, uint64_t end,
                             uint64_t *first, uint64_t *hi,
                             size_t *index, uint64_t *total, range_vote *rv, range_vote **all) {
  const uint64_t P = (uint64_t)gs_comm_size(comm), rank = (uint64_t)gs_comm_rank(comm);
  uint64_t lo = end / P * rank + GS_MIN(rank, end % P);
  *hi = lo + end / P + (rank < end % P);
  *first = *hi;
  rv->lines = 0;
  gs_status mine = range_lines(path, fd, lo, *hi, end, first, &rv->lines);
  GS_CHECK(agree_ranges(path, comm, mine, rv, all));
  *index = 0;
  *total = 0;
  for (uint64_t q = 0; q < P; q++) {
    if (q < rank) *index += (size_t)(*all)[q].lines;
    *total += (*all)[q].lines;
  }
  return GS_OK;
}

gs_status gs_criteo_vocab_build_comm(const char *path, size_t lines, uint64_t min_count,
                                     gs_comm *comm, gs_criteo_vocab **out) {
  GS_CHECK(vocab_check_args(path, min_count, out));
  if (comm == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "Criteo file '%s': NULL communicator", path);
  const size_t P = (size_t)gs_comm_size(comm), rank = (size_t)gs_comm_rank(comm);
  gs_criteo_vocab *v = gs_calloc(1, sizeof *v);
  gs_status mine = v ? GS_OK : gs_error(GS_ERR_NOMEM, "Criteo file '%s': out of memory", path);
  /* A plain file: each rank the lines that start in its byte range (the
   * same file on every rank: its size and kind are checked against rank
   * 0's). When the line limit ends the lines before the file does, the
   * bytes up to the limit are split again, so that every rank counts its
   * share of the lines counted. gzip: every rank reads the stream and
   * parses every P-th line. */
  range_vote rv = {0, 0, 0, 0, 0}, *all = NULL;
  uint64_t first = 0, hi = 0, total = 0;
  size_t index = 0;
  int fd = -1;
  struct stat sb;
  if (mine == GS_OK) {
    int gz = 0;
    fd = open(path, O_RDONLY);
    if (fd < 0 || fstat(fd, &sb) != 0)
      mine = gs_error(GS_ERR_IO, "Criteo file '%s': %s", path, strerror(errno));
    else
      mine = is_gzip(path, fd, &gz);
    if (mine == GS_OK) {
      rv.gz = gz || !S_ISREG(sb.st_mode);
      rv.size = rv.gz ? 0 : (uint64_t)sb.st_size;
    }
  }
  gs_status st = GS_OK;
  int by_bytes = 0;
  if (mine != GS_OK || rv.gz) {
    st = agree_ranges(path, comm, mine, &rv, &all); /* a failure: every rank's */
  } else {
    by_bytes = 1;
    st = split_lines(path, comm, fd, rv.size, &first, &hi, &index, &total, &rv, &all);
    if (st == GS_OK && lines > 0 && total > lines) {
      /* The rank whose range holds line `lines` finds where it starts; the
       * bytes before it are split again. */
      uint64_t end = 0;
      gs_status f = GS_OK;
      rv.end = 0;
      if (index <= lines && lines < index + rv.lines)
        f = line_start(path, fd, first, hi, index, lines, &rv.end);
      gs_free(all);
      all = NULL;
      st = agree_ranges(path, comm, f, &rv, &all);
      for (size_t q = 0; st == GS_OK && q < P; q++)
        if (all[q].end > end) end = all[q].end;
      gs_free(all);
      all = NULL;
      if (st == GS_OK)
        st = split_lines(path, comm, fd, end, &first, &hi, &index, &total, &rv, &all);
    }
  }
  gs_free(all);
  if (fd >= 0) close(fd);
  if (st == GS_OK) {
    mine = by_bytes ? vocab_count_range(path, first, hi, index, lines, v)
                    : vocab_count(path, lines, P, rank, v);
    /* Every rank learns whether every rank counted its lines before any
     * exchange (a bad line is its counter's alone): each returns the first
     * failure's own words. */
    char msg[GS_VOTE_MESSAGE] = "";
    if (mine != GS_OK) gs__error_copy(msg, sizeof msg);
    gs_agreement a = {0};
    st = gs_agree(comm, gs_comm_mpi(comm), "the Criteo file's vocabulary", mine, msg, NULL, 0,
                  &a);
    if (st == GS_OK && a.failed)
      st = gs_error((gs_status)a.votes[a.first].status, "%s", a.votes[a.first].message);
    gs_agreement_free(&a);
  }
  if (st == GS_OK && by_bytes) {
    /* the lines counted: the ranks' sum (each counted its own) */
    int64_t n = (int64_t)v->lines;
    st = gs_allreduce(comm, GS_IN_PLACE, &n, 1, GS_I64, GS_SUM, GS_ALGO_MPI);
    v->lines = (size_t)n;
  }
  if (st == GS_OK) st = vocab_merge(path, min_count, comm, v);
  if (st != GS_OK) {
    gs_criteo_vocab_free(v);
    return st;
  }
  return vocab_finish(path, min_count, v, out);
}

size_t gs_criteo_vocab_rows(const gs_criteo_vocab *v, int t) {
  return v && t >= 0 && t < GS_CRITEO_SPARSE ? v->t[t].kept + 2 : 0;
}

void gs_criteo_vocab_stats(const gs_criteo_vocab *v, int t, size_t *distinct, size_t *kept,
                           size_t *lines) {
  int ok = v && t >= 0 && t < GS_CRITEO_SPARSE;
  if (distinct) *distinct = ok ? v->t[t].distinct : 0;
  if (kept) *kept = ok ? v->t[t].kept : 0;
  if (lines) *lines = v ? v->lines : 0;
}

uint64_t gs_criteo_vocab_id(const gs_criteo_vocab *v, int t, const char *value) {
  if (v == NULL || t < 0 || t >= GS_CRITEO_SPARSE || value == NULL || *value == '\0') return 0;
  size_t len = strlen(value);
  if (len > 16 || strspn(value, "0123456789abcdefABCDEF") != len) return 1;
  return vocab_id(&v->t[t], (uint64_t)strtoull(value, NULL, 16), 0);
}

gs_status gs_criteo_set_vocab(gs_criteo_reader *r, const gs_criteo_vocab *v) {
  if (r == NULL) return gs_error(GS_ERR_INVALID_ARG, "Criteo reader: NULL reader");
  r->vocab = v;
  return GS_OK;
}

void gs_criteo_vocab_free(gs_criteo_vocab *v) {
  if (v == NULL) return;
  for (int t = 0; t < GS_CRITEO_SPARSE; t++) vocab_table_free(&v->t[t]);
  gs_free(v);
}
