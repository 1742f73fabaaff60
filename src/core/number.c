/* Numbers inside the library's spec strings ("ssp:3", "switch:offline:0.5",
 * "local:4"), read by the command line's rules (docs/CLI.md): decimal, no
 * '+', no spaces, no leading zero, no hexadecimal, no nan or inf. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gs_internal.h"

/* strto* skip leading spaces, take a '+' and read "010" as 10 (strtol) or
 * "0x10" as 16 (strtod): a user who writes them may mean something else. */
static int plain_start(const char *s, int sign_ok) {
  if (s == NULL || *s == '\0' || isspace((unsigned char)*s) || *s == '+') return 0;
  if (*s == '-' && !sign_ok) return 0;
  const char *d = *s == '-' ? s + 1 : s;
  return !(d[0] == '0' && (isdigit((unsigned char)d[1]) || d[1] == 'x' || d[1] == 'X'));
}

int gs__parse_long(const char *s, long min, long max, long *out, const char **end) {
  if (!plain_start(s, min < 0)) return -1;
  errno = 0;
  char *e;
  long v = strtol(s, &e, 10);
  if (errno || e == s || (end == NULL && *e != '\0') || v < min || v > max) return -1;
  *out = v;
  if (end) *end = e;
  return 0;
}

int gs__parse_double(const char *s, double min, double max, double *out, const char **end) {
  if (!plain_start(s, min < 0)) return -1;
  errno = 0;
  char *e;
  double v = strtod(s, &e);
  /* Decimal or scientific only: strtod would also read nan, inf and hex. */
  size_t len = (size_t)(e - s);
  if (errno || e == s || strspn(s, "0123456789.eE-+") < len || (end == NULL && *e != '\0') ||
      !isfinite(v) || !(v >= min && v <= max))
    return -1;
  *out = v;
  if (end) *end = e;
  return 0;
}
