/* Helpers shared by the verbs: numbers, the median, messages and JSON. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <mpi.h>

#include "cli.h"

/* strto* skip leading spaces and take a sign; the options take neither (a
 * '-' only where the range allows negative values). */
static int plain_number(const char *s) {
  return s != NULL && *s != '\0' && !isspace((unsigned char)*s) && *s != '+';
}

int cli_parse_bytes(const char *s, size_t *out) {
  if (!plain_number(s) || !isdigit((unsigned char)*s)) return -1;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
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

int cli_parse_long(const char *s, long min, long max, long *out) {
  if (!plain_number(s)) return -1;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) return -1;
  *out = v;
  return 0;
}

int cli_parse_int(const char *s, int min, int max, int *out) {
  long v;
  if (cli_parse_long(s, min, max, &v)) return -1;
  *out = (int)v;
  return 0;
}

int cli_parse_double(const char *s, double min, double max, double *out) {
  if (!plain_number(s)) return -1;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  /* strtod also reads "nan", "inf" and hexadecimal: only finite values in
   * range pass, and ERANGE (overflow, or underflow to 0) is refused. */
  if (errno || end == s || *end || !isfinite(v) || !(v >= min && v <= max)) return -1;
  *out = v;
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double cli_median(double *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void cli_error(const char *verb, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* One write per message, so that ranks sharing a terminal do not
   * interleave within a line. */
  fprintf(stderr, "gradsync %s: %s\n", verb, msg);
}

void cli_print_json(FILE *f, cJSON *obj) {
  char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
  if (s) fprintf(f, "%s\n", s);
  cJSON_free(s);
  cJSON_Delete(obj);
}

void cli_json_add(cJSON *obj, const char *name, double v, const char *fmt) {
  if (!isfinite(v)) {
    cJSON_AddNullToObject(obj, name);
    return;
  }
  char buf[64];
  snprintf(buf, sizeof buf, fmt, v);
  cJSON_AddNumberToObject(obj, name, strtod(buf, NULL));
}

/* Set by cli_rank_init while no other thread can be inside MPI. */
char cli_mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];

void cli_print_env_json(FILE *f) {
  struct utsname u;
  uname(&u);
  char kernel[2 * sizeof u.release + 2];
  snprintf(kernel, sizeof kernel, "%s %s", u.sysname, u.release);
  char mpiver[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  if (cli_mpi_version[0]) {
    snprintf(mpiver, sizeof mpiver, "%s", cli_mpi_version);
  } else {
    int len = 0;
    MPI_Get_library_version(mpiver, &len);
  }
  /* The library's banner spans lines; one line reads better in a record. */
  for (char *p = mpiver; *p; p++)
    if (*p == '\n' || *p == '\t') *p = ' ';
  for (size_t n = strlen(mpiver); n > 0 && mpiver[n - 1] == ' ';) mpiver[--n] = '\0';
  char cpu[256] = "unknown";
  FILE *ci = fopen("/proc/cpuinfo", "r");
  if (ci) {
    char line[512];
    while (fgets(line, sizeof line, ci)) {
      if (strncmp(line, "model name", 10) == 0) {
        char *c = strchr(line, ':');
        if (c) {
          snprintf(cpu, sizeof cpu, "%s", c + 2);
          cpu[strcspn(cpu, "\n")] = '\0';
        }
        break;
      }
    }
    fclose(ci);
  }
  cJSON *env = cJSON_CreateObject();
  cJSON_AddStringToObject(env, "gradsync", GRADSYNC_VERSION);
  cJSON_AddStringToObject(env, "kernel", kernel);
  cJSON_AddStringToObject(env, "machine", u.machine);
  cJSON_AddStringToObject(env, "cpu", cpu);
  cJSON_AddNumberToObject(env, "cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
  cJSON_AddStringToObject(env, "mpi", mpiver);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "env", env);
  cli_print_json(f, o);
}
