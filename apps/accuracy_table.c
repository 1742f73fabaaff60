/* Measured accuracy tables of gradient compression (accuracy_table.h). */
#include "accuracy_table.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync.h"

static void copy_str(char *dst, size_t n, const cJSON *s) {
  if (cJSON_IsString(s)) snprintf(dst, n, "%s", s->valuestring);
}

/* One line: a run (summary) or the stamp, whose command may carry
 * --max-steps. Returns -1 when the line is not JSON. */
static int acc_line(acc_table *t, const char *line, int *have_meta) {
  cJSON *o = cJSON_Parse(line);
  if (o == NULL) return -1;
  const cJSON *stamp = cJSON_GetObjectItemCaseSensitive(o, "stamp");
  const cJSON *cmd = stamp ? cJSON_GetObjectItemCaseSensitive(stamp, "command") : NULL;
  if (cJSON_IsString(cmd)) {
    const char *m = strstr(cmd->valuestring, "--max-steps ");
    if (m) t->max_steps = atoi(m + 12);
  }
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "summary");
  const cJSON *z = s ? cJSON_GetObjectItemCaseSensitive(s, "compress") : NULL;
  const cJSON *acc = s ? cJSON_GetObjectItemCaseSensitive(s, "test_accuracy") : NULL;
  if (cJSON_IsString(z) && cJSON_IsNumber(acc)) {
    gs_compress_spec spec;
    acc_entry e = {.accuracy = acc->valuedouble};
    const cJSON *ef = cJSON_GetObjectItemCaseSensitive(s, "error_feedback");
    e.error_feedback = cJSON_IsTrue(ef);
    if (gs_compress_spec_parse(z->valuestring, &spec) == GS_OK)
      snprintf(e.spec, sizeof e.spec, "%s", spec.normalised);
    else
      snprintf(e.spec, sizeof e.spec, "%s", z->valuestring);
    acc_entry *rows = realloc(t->rows, (t->n + 1) * sizeof *rows);
    if (rows == NULL) {
      cJSON_Delete(o);
      return -2;
    }
    t->rows = rows;
    t->rows[t->n++] = e;
    int dense = strcmp(e.spec, "none") == 0;
    if (dense) t->dense = e.accuracy;
    if (dense || !*have_meta) {
      const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "ranks");
      const cJSON *ep = cJSON_GetObjectItemCaseSensitive(s, "epochs");
      copy_str(t->model, sizeof t->model, cJSON_GetObjectItemCaseSensitive(s, "model"));
      copy_str(t->net, sizeof t->net, cJSON_GetObjectItemCaseSensitive(o, "net"));
      t->ranks = cJSON_IsNumber(r) ? r->valueint : 0;
      t->epochs = cJSON_IsNumber(ep) ? ep->valueint : 0;
      *have_meta = 1;
    }
  }
  cJSON_Delete(o);
  return 0;
}

int acc_table_load(const char *path, acc_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  t->dense = -1;
  snprintf(t->path, sizeof t->path, "%s", path);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return errno == ENOENT ? -1 : -2;
  }
  char *line = NULL;
  size_t cap = 0;
  long lineno = 0;
  int have_meta = 0, rc = 0;
  while (getline(&line, &cap, f) != -1) {
    lineno++;
    if (line[strspn(line, " \t\r\n")] == '\0') continue;
    int lr = acc_line(t, line, &have_meta);
    if (lr != 0) {
      snprintf(err, errlen, "%s:%ld: %s", path, lineno,
               lr == -1 ? "not a JSON object" : "out of memory");
      rc = -2;
      break;
    }
  }
  free(line);
  fclose(f);
  if (rc == 0 && t->n == 0) {
    snprintf(err, errlen, "%s: no run with a summary (compress, test_accuracy)", path);
    rc = -2;
  }
  if (rc != 0) acc_table_free(t);
  return rc;
}

const acc_entry *acc_table_find(const acc_table *t, const char *spec) {
  const acc_entry *found = NULL;
  for (size_t i = 0; i < t->n; i++) {
    if (strcmp(t->rows[i].spec, spec) != 0) continue;
    if (t->rows[i].error_feedback) return &t->rows[i];
    if (found == NULL) found = &t->rows[i];
  }
  return found;
}

void acc_table_free(acc_table *t) {
  free(t->rows);
  t->rows = NULL;
  t->n = 0;
}
