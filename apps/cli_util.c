/* Helpers shared by the verbs. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <mpi.h>

#include "cli.h"
#include "gradsync.h"

int cli_parse_bytes(const char *s, size_t *out) {
  if (s == NULL || *s == '\0') return -1;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *s == '-') return -1;
  unsigned long long mult = 1;
  if (*end) {
    char u = (char)(*end | 0x20);
    if (u == 'k') mult = 1ull << 10;
    else if (u == 'm') mult = 1ull << 20;
    else if (u == 'g') mult = 1ull << 30;
    else if (u != 'b') return -1;
    if (u != 'b') end++;
    if (strcasecmp(end, "") != 0 && strcasecmp(end, "b") != 0 &&
        strcasecmp(end, "ib") != 0)
      return -1;
  }
  if (v > SIZE_MAX / mult) return -1;
  *out = (size_t)(v * mult);
  return 0;
}

int cli_parse_int(const char *s, int min, int max, int *out) {
  if (s == NULL || *s == '\0') return -1;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < min || v > max) return -1;
  *out = (int)v;
  return 0;
}

void cli_error(const char *verb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "gradsync %s: ", verb);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

void cli_print_env_json(FILE *f) {
  struct utsname u;
  uname(&u);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  char mpiver[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int len = 0;
  MPI_Get_library_version(mpiver, &len);
  for (int i = 0; i < len; i++)
    if (mpiver[i] == '\n' || mpiver[i] == '"' || mpiver[i] == '\\') mpiver[i] = ' ';
  char cpu[256] = "unknown";
  FILE *ci = fopen("/proc/cpuinfo", "r");
  if (ci) {
    char line[512];
    while (fgets(line, sizeof line, ci)) {
      if (strncmp(line, "model name", 10) == 0) {
        char *c = strchr(line, ':');
        if (c) {
          snprintf(cpu, sizeof cpu, "%s", c + 2);
          cpu[strcspn(cpu, "\n\"")] = '\0';
        }
        break;
      }
    }
    fclose(ci);
  }
  fprintf(f, "{\"env\": {\"gradsync\": \"%s\", \"kernel\": \"%s %s\", \"machine\": "
          "\"%s\", \"cpu\": \"%s\", \"cores\": %ld, \"mpi\": \"%s\"}}\n",
          GRADSYNC_VERSION, u.sysname, u.release, u.machine, cpu,
          sysconf(_SC_NPROCESSORS_ONLN), mpiver);
}
