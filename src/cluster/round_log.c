/*
 * The policy rounds' log: one JSON line per round, what the policy was
 * given and what it answered, written the same way by the manager
 * (`cluster serve --round-log FILE`) and by the simulator (`cluster
 * simulate --round-log FILE`), so that a real run's rounds and its
 * simulation's can be set side by side (bench/cluster/compare_rounds.py).
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "policy.h"

/* Rounded for reading; the log is for comparing, not for replaying. */
static double r3(double x) { return isfinite(x) ? round(x * 1000) / 1000 : -1; }

int gs_cluster_round_log(FILE *f, double t, const char *policy, int nodes,
                         const gs_cluster_job *jobs, const char *const *names, int n,
                         const int *sizes, const gs_cluster_policy_report *rep,
                         const char *error) {
  if (f == NULL) return 0;
  cJSON *o = cJSON_CreateObject();
  if (o == NULL) {
    errno = ENOMEM;
    return -1;
  }
  cJSON_AddNumberToObject(o, "t", r3(t));
  cJSON_AddStringToObject(o, "policy", policy ? policy : "");
  cJSON_AddNumberToObject(o, "nodes", nodes);
  if (error != NULL) {
    cJSON_AddStringToObject(o, "error", error);
  } else if (rep != NULL) {
    cJSON_AddNumberToObject(o, "solve_ms", r3(rep->solve_ms));
    if (isfinite(rep->gap)) cJSON_AddNumberToObject(o, "gap", r3(rep->gap));
    if (rep->fallback) cJSON_AddBoolToObject(o, "fallback", 1);
  }
  cJSON *a = cJSON_AddArrayToObject(o, "jobs");
  for (int i = 0; a != NULL && i < n; i++) {
    const gs_cluster_job *j = &jobs[i];
    cJSON *x = cJSON_CreateObject();
    if (x == NULL) break;
    cJSON_AddItemToArray(a, x);
    cJSON_AddNumberToObject(x, "id", j->id);
    if (names != NULL && names[i] != NULL) cJSON_AddStringToObject(x, "name", names[i]);
    cJSON_AddNumberToObject(x, "cur", j->cur_nodes);
    /* The answer; -1 where the policy failed and nothing changed. */
    cJSON_AddNumberToObject(x, "size", error == NULL && sizes ? sizes[i] : -1);
    cJSON_AddNumberToObject(x, "min", j->min_nodes);
    cJSON_AddNumberToObject(x, "max", j->max_nodes);
    cJSON_AddNumberToObject(x, "progress", r3(j->progress));
    cJSON_AddNumberToObject(x, "run_s", r3(j->run_s));
    cJSON_AddNumberToObject(x, "restart_s", r3(j->restart_s));
    if (j->work > 0) cJSON_AddNumberToObject(x, "work", r3(j->work));
    /* The speed curve the policy weighed, n = 1..max (none: linear). */
    if (j->speed != NULL) {
      cJSON *s = cJSON_AddArrayToObject(x, "speed");
      for (int k = 1; s != NULL && k <= j->max_nodes; k++)
        cJSON_AddItemToArray(s, cJSON_CreateNumber(r3(j->speed[k])));
    }
  }
  char *line = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (line == NULL) {
    errno = ENOMEM;
    return -1;
  }
  int rc = fprintf(f, "%s\n", line) < 0 || fflush(f) != 0 ? -1 : 0;
  int e = errno; /* (the write's, for the caller's message) */
  cJSON_free(line);
  errno = e;
  return rc;
}
