/*
 * Internal helpers shared by gradsync's modules. Not installed.
 */
#ifndef GS_INTERNAL_H
#define GS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/core.h"

/* FNV-1a, 64 bits: the one hash of settings, plans and files that ranks
 * compare, that names a cache file or that a checkpoint keeps. Start from
 * GS_FNV1A_BASIS and fold each piece in (bytes, or a string without its
 * terminator). Not a checksum against corruption (CRC-32 is that). */
#define GS_FNV1A_BASIS 14695981039346656037ull
static inline uint64_t gs_fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = (const unsigned char *)data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
static inline uint64_t gs_fnv1a_str(uint64_t h, const char *s) {
  for (; s != NULL && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Propagates a failing status, logging the call site at debug level so that
 * GRADSYNC_LOG=debug prints a poor man's backtrace (as NCCLCHECK does). */
#define GS_CHECK(call)                                                    \
  do {                                                                    \
    gs_status gs__st = (call);                                            \
    if (gs__st != GS_OK) {                                                \
      gs_log(GS_LOG_DEBUG, "%s:%d %s -> %s", __FILE__, __LINE__, #call,   \
             gs_strerror(gs__st));                                        \
      return gs__st;                                                      \
    }                                                                     \
  } while (0)

/* Same, but jumps to a cleanup label with the status stored in `st`. */
#define GS_CHECK_GOTO(call, st, label)                                    \
  do {                                                                    \
    (st) = (call);                                                        \
    if ((st) != GS_OK) {                                                  \
      gs_log(GS_LOG_DEBUG, "%s:%d %s -> %s", __FILE__, __LINE__, #call,   \
             gs_strerror(st));                                            \
      goto label;                                                         \
    }                                                                     \
  } while (0)

#define GS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define GS_MAX(a, b) ((a) > (b) ? (a) : (b))

/* The median of three (timings: one disturbed run does not move it). */
static inline double gs__median3(double a, double b, double c) {
  return GS_MAX(GS_MIN(a, b), GS_MIN(GS_MAX(a, b), c));
}

/* Copies the calling thread's last-error message into dst (size n). */
void gs__error_copy(char *dst, size_t n);
/* Marks the last error as every rank's alike (gs_last_error_shared). */
void gs__error_mark_shared(void);
/* Sets the calling thread's message verbatim. */
void gs__error_set_message(const char *msg);
/* Memory for a large table read at random (embedding rows): from 2 MB on,
 * 2 MB-aligned and advised to the kernel for transparent huge pages, so
 * that a lookup's page is in the TLB far more often (512x the reach of 4 KB
 * pages); zeroed when `zero`. Freed by gs_free. (src/core/alloc.c) */
void *gs__malloc_table(size_t size, int zero);
/* Reads the whole file at path (a pipe too) into *out, NUL-terminated, for
 * the caller to gs_free; refuses a directory, more than max_bytes, and a NUL
 * inside. Messages name the path and `what` it should be ("profile").
 * (src/core/text_file.c) */
gs_status gs__read_text(const char *path, const char *what, size_t max_bytes, char **out,
                        size_t *len);

/* ---- Durable state files (src/core/state_file.c) ----------------------------
 * A file written atomically and durably: create opens a temporary file beside
 * path (path.tmp.XXXXXX); write appends (and counts `bytes`); finish appends
 * the crc32 (zlib) of what precedes it; sync fsyncs, renames the temporary
 * file over path and fsyncs the directory; commit is finish then sync; abort
 * removes the temporary file. A reader sees the old file or the new one,
 * never a mix. On a failure of sync or commit the temporary file is already
 * gone. A text file (no checksum) is create, write, sync. `what` names the
 * kind of file in messages ("DLRM checkpoint"). */
typedef struct gs__state_file {
  int fd;
  const char *path, *what; /* borrowed until sync, commit or abort */
  char *tmp;
  unsigned long crc;
  size_t bytes;
  int defer_crc; /* set after create: write does not checksum; crc_back reads the bytes
                  * back later (a writer that hands the checksum to another thread) */
} gs__state_file;

gs_status gs__state_file_create(gs__state_file *f, const char *path, const char *what);
gs_status gs__state_file_write(gs__state_file *f, const void *buf, size_t n);
gs_status gs__state_file_finish(gs__state_file *f);
/* With defer_crc: the crc32 of the bytes written so far, read back from the
 * file (the page cache), then checksums as usual. */
gs_status gs__state_file_crc_back(gs__state_file *f);
gs_status gs__state_file_sync(gs__state_file *f);
gs_status gs__state_file_commit(gs__state_file *f);
void gs__state_file_abort(gs__state_file *f);
/* Reads a whole regular file of at most max bytes into *data (gs_free). */
gs_status gs__state_file_read(const char *path, const char *what, size_t max,
                              unsigned char **data, size_t *size);
/* Whether data's last 4 bytes are the crc32 of the rest. */
int gs__state_file_crc_ok(const unsigned char *data, size_t size);
/* zlib's crc32 of n more bytes (any n) after crc (0 to begin). */
uint32_t gs__crc32(uint32_t crc, const void *buf, size_t n);
/* fsyncs the directory holding path (after a rename or unlink in it). */
void gs__sync_dir_of(const char *path);
/* ---- Timelines (src/core/timeline.c) ----------------------------------------
 * A Chrome trace per rank, written at the end: one process (pid = rank)
 * with the owner's tracks (tids 1 .. ntracks, named), then tracks made on
 * first use by name (at most 16 in all). open creates the file at once
 * ("t.json" -> "t.rank3.json" when size > 1), so a path that cannot be
 * written fails at the start, naming who and how it was asked for; event
 * records a complete event (name and args, a JSON object's members without
 * braces or NULL, copied; thread-safe); track returns a named track's id,
 * or -1 (no timeline, or no room); write writes and closes the file. */
typedef struct gs__timeline gs__timeline;
gs_status gs__timeline_open(const char *path, int rank, int size, const char *who,
                            const char *how, const char *const *tracks, int ntracks,
                            gs__timeline **out);
void gs__timeline_free(gs__timeline *tl);
void gs__timeline_event(gs__timeline *tl, int track, const char *name, uint64_t start_ns,
                        uint64_t end_ns, const char *args);
int gs__timeline_track(gs__timeline *tl, const char *name);
gs_status gs__timeline_write(gs__timeline *tl, int rank, int size);

/* The median of v[0 .. n-1], the mean of the middle two when n is even; 0
 * when n is 0. Sorts v in place. */
double gs__median(double *v, size_t n);
/* Whether a predicted time a is shorter than b by more than rounding (a
 * relative 1e-9): the choices among plans keep the earlier on a tie (two
 * policies' sums of the same times may differ in their last bit). */
static inline int gs__faster(double a, double b) { return a < b - 1e-9 * (b > 0 ? b : -b); }

/* A number at the start of s by the command line's rules (docs/CLI.md:
 * decimal, no '+', spaces, leading zero or hexadecimal; a '-' only when min
 * < 0; for a double also scientific, no nan or inf; an overflow refused),
 * within [min, max]: 0 with *out, else -1. With end NULL the number must be
 * all of s; else *end is where it stops (a spec's next ':'). */
int gs__parse_long(const char *s, long min, long max, long *out, const char **end);
int gs__parse_double(const char *s, double min, double max, double *out, const char **end);

#endif /* GS_INTERNAL_H */
