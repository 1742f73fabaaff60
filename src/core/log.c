/* Levelled logging to stderr, configured by GRADSYNC_LOG. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gs_internal.h"

/* -1: not read from the environment yet. */
static atomic_int log_level = -1;

static int level_from_env(void) {
  const char *s = getenv("GRADSYNC_LOG");
  if (s == NULL || *s == '\0') return GS_LOG_WARN;
  if (strcasecmp(s, "debug") == 0) return GS_LOG_DEBUG;
  if (strcasecmp(s, "info") == 0) return GS_LOG_INFO;
  if (strcasecmp(s, "warn") == 0 || strcasecmp(s, "warning") == 0)
    return GS_LOG_WARN;
  if (strcasecmp(s, "error") == 0) return GS_LOG_ERROR;
  if (strcasecmp(s, "off") == 0 || strcasecmp(s, "none") == 0)
    return GS_LOG_OFF;
  fprintf(stderr, "gradsync: GRADSYNC_LOG=%s is not one of "
          "debug|info|warn|error|off; using warn\n", s);
  return GS_LOG_WARN;
}

void gs_log_set_level(gs_log_level level) { atomic_store(&log_level, (int)level); }

gs_log_level gs_log_get_level(void) {
  int l = atomic_load(&log_level);
  if (l < 0) {
    l = level_from_env();
    atomic_store(&log_level, l);
  }
  return (gs_log_level)l;
}

void gs_log(gs_log_level level, const char *fmt, ...) {
  static const char *names[] = {"debug", "info", "warn", "error"};
  if (level < gs_log_get_level() || level >= GS_LOG_OFF) return;
  char line[1200];
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  int n = snprintf(line, sizeof line, "gradsync[%s] %s: ", rank ? rank : "-",
                   names[level]);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  va_end(ap);
  /* One fputs per line, so lines of concurrent threads do not interleave. */
  fprintf(stderr, "%s\n", line);
}
