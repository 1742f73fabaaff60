/*
 * Internal helpers shared by gradsync's modules. Not installed.
 */
#ifndef GS_INTERNAL_H
#define GS_INTERNAL_H

#include "gradsync/core.h"

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

/* Copies the calling thread's last-error message into dst (size n). */
void gs__error_copy(char *dst, size_t n);
/* Sets the calling thread's message verbatim. */
void gs__error_set_message(const char *msg);
/* Reads the whole file at path (a pipe too) into *out, NUL-terminated, for
 * the caller to gs_free; refuses a directory, more than max_bytes, and a NUL
 * inside. Messages name the path and `what` it should be ("profile").
 * (src/core/text_file.c) */
gs_status gs__read_text(const char *path, const char *what, size_t max_bytes, char **out,
                        size_t *len);

#endif /* GS_INTERNAL_H */
