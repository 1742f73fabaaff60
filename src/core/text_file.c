/* Reading a whole text file (gs_internal.h): the one reader of the JSON
 * files the library loads (profiles, sharding plans, table sets). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "gs_internal.h"

gs_status gs__read_text(const char *path, const char *what, size_t max_bytes, char **out,
                        size_t *len_out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (f == NULL) return gs_error(GS_ERR_IO, "%s: cannot open %s: %s", path, what, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || S_ISDIR(sb.st_mode)) {
    fclose(f);
    return gs_error(GS_ERR_IO, "%s: not a %s file (a directory?)", path, what);
  }
  /* Read to the end (the file may be a pipe), refusing more than max_bytes:
   * the cap bounds what a wrong path can cost. */
  char *text = NULL;
  size_t len = 0, cap = 0;
  gs_status st = GS_OK;
  for (;;) {
    if (cap - len < 65536) {
      cap = cap ? cap * 2 : 65536;
      char *grown = gs_realloc(text, cap + 1);
      if (grown == NULL) {
        st = gs_error(GS_ERR_NOMEM, "%s: out of memory reading the %s", path, what);
        break;
      }
      text = grown;
    }
    size_t got = fread(text + len, 1, cap - len, f);
    len += got;
    if (len > max_bytes) {
      st = gs_error(GS_ERR_PARSE, "%s: larger than %zu MiB: not a %s", path, max_bytes >> 20,
                    what);
      break;
    }
    if (got == 0) break;
  }
  if (st == GS_OK && ferror(f)) st = gs_error(GS_ERR_IO, "%s: read error: %s", path, strerror(errno));
  fclose(f);
  if (st == GS_OK) {
    text[len] = '\0';
    /* JSON parsers stop at a NUL: refuse one rather than read half. */
    if (strlen(text) != len)
      st = gs_error(GS_ERR_PARSE, "%s: NUL byte at offset %zu: not a JSON text file", path,
                    strlen(text));
  }
  if (st != GS_OK) {
    gs_free(text);
    return st;
  }
  *out = text;
  if (len_out) *len_out = len;
  return GS_OK;
}
