/* Status codes and the per-thread last-error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gs_internal.h"

#define GS_ERROR_MAX 1024

static _Thread_local char last_error[GS_ERROR_MAX];
static _Thread_local int last_shared;

const char *gs_strerror(gs_status status) {
  switch (status) {
    case GS_OK: return "success";
    case GS_ERR_INVALID_ARG: return "invalid argument";
    case GS_ERR_NOMEM: return "out of memory";
    case GS_ERR_MPI: return "MPI error";
    case GS_ERR_MISMATCH: return "ranks disagree";
    case GS_ERR_UNSUPPORTED: return "not supported";
    case GS_ERR_IO: return "I/O error";
    case GS_ERR_PARSE: return "parse error";
    case GS_ERR_STATE: return "invalid state";
    case GS_ERR_INTERNAL: return "internal error";
    case GS_STATUS_COUNT: break;
  }
  return "unknown status";
}

const char *gs_last_error(void) { return last_error; }

int gs_last_error_shared(void) { return last_shared; }

void gs__error_mark_shared(void) { last_shared = 1; }

void gs_clear_error(void) {
  last_error[0] = '\0';
  last_shared = 0;
}

gs_status gs_error(gs_status status, const char *fmt, ...) {
  /* Formatted aside first: an argument may be gs_last_error() itself (a
   * message that wraps the one before), which writing in place would
   * overwrite while it is read. */
  char msg[GS_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memcpy(last_error, msg, sizeof msg);
  last_shared = 0;
  gs_log(GS_LOG_DEBUG, "error (%s): %s", gs_strerror(status), last_error);
  return status;
}

void gs__error_copy(char *dst, size_t n) {
  if (n == 0) return;
  snprintf(dst, n, "%s", last_error);
}

void gs__error_set_message(const char *msg) {
  snprintf(last_error, sizeof last_error, "%s", msg);
  last_shared = 0;
}
