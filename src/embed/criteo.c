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
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gradsync/dlrm.h"
#include "gs_internal.h"

#define CRITEO_FIELDS (1 + GS_CRITEO_DENSE + GS_CRITEO_SPARSE)

#define CRITEO_CHUNK ((size_t)1 << 16)

struct gs_criteo_reader {
  gzFile f;
  char *path;
  size_t rows[GS_CRITEO_SPARSE];
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
    const char *f = fields[1 + GS_CRITEO_DENSE + t];
    unsigned long long v = 0;
    size_t len = strlen(f);
    if (len > 16 || strspn(f, "0123456789abcdefABCDEF") != len)
      return bad_field(r, 1 + GS_CRITEO_DENSE + t, f, "a hex value of at most 16 digits");
    if (len) v = strtoull(f, NULL, 16);
    int64_t *off = b->offsets + (size_t)t * (b->max_n + 1);
    int32_t *ids = b->ids + (size_t)t * b->max_ids;
    ids[off[s]] = (int32_t)(v % r->rows[t]);
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
