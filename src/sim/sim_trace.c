/*
 * The simulator's Chrome trace (gradsync/sim.h): the JSON object format of
 * the Trace Event Format ("traceEvents", complete events "ph":"X" with
 * microsecond "ts" and "dur"), which chrome://tracing and Perfetto read.
 * Process 0 is the network stream, process w+1 is worker w.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gradsync/sim.h"
#include "gs_internal.h"

static cJSON *meta(const char *what, int pid, const char *name) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "name", what);
  cJSON_AddStringToObject(e, "ph", "M");
  cJSON_AddNumberToObject(e, "pid", pid);
  cJSON_AddNumberToObject(e, "tid", 0);
  cJSON *a = cJSON_AddObjectToObject(e, "args");
  cJSON_AddStringToObject(a, "name", name);
  return e;
}

gs_status gs_sim_write_trace(const gs_sim_result *r, const gs_profile *profile,
                             const char *label, const char *path) {
  if (r == NULL || profile == NULL || path == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "sim trace: NULL argument");
  if (r->nspans == 0)
    return gs_error(GS_ERR_INVALID_ARG, "sim trace: the result has no spans (simulate "
                    "with trace = 1)");
  cJSON *root = cJSON_CreateObject();
  cJSON *ev = root ? cJSON_AddArrayToObject(root, "traceEvents") : NULL;
  if (ev == NULL) {
    cJSON_Delete(root);
    return GS_ERR_NOMEM;
  }
  cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
  cJSON *other = cJSON_AddObjectToObject(root, "otherData");
  cJSON_AddStringToObject(other, "model", profile->name);
  cJSON_AddStringToObject(other, "run", label ? label : "");
  cJSON_AddNumberToObject(other, "workers", r->workers);
  cJSON_AddNumberToObject(other, "straggler", r->straggler);
  cJSON_AddItemToArray(ev, meta("process_name", 0, "network stream"));
  int seen0 = 0, seen_s = 0;
  for (size_t i = 0; i < r->nspans; i++) {
    const gs_sim_span *sp = &r->spans[i];
    if (sp->worker == 0 && !seen0) {
      seen0 = 1;
      cJSON_AddItemToArray(ev, meta("process_name", 1, "worker 0"));
    } else if (sp->worker > 0 && !seen_s) {
      seen_s = 1;
      char nm[64];
      snprintf(nm, sizeof nm, "worker %d (straggler)", sp->worker);
      cJSON_AddItemToArray(ev, meta("process_name", sp->worker + 1, nm));
    }
    char name[160];
    if ((sp->kind == GS_SIM_SPAN_BACKWARD || sp->kind == GS_SIM_SPAN_FORWARD) &&
        sp->worker >= 0 && sp->index < profile->ntensors)
      snprintf(name, sizeof name, "%s %s", sp->kind == GS_SIM_SPAN_FORWARD ? "fwd" : "bwd",
               profile->tensors[sp->index].name);
    else if (sp->kind == GS_SIM_SPAN_COMPRESSED)
      snprintf(name, sizeof name, "%s group %zu", gs_xchg_name((gs_xchg)sp->xchg),
               sp->index);
    else if (sp->worker < 0 || sp->kind == GS_SIM_SPAN_WAIT)
      snprintf(name, sizeof name, "%s group %zu", gs_sim_span_name(sp->kind), sp->index);
    else
      snprintf(name, sizeof name, "%s", gs_sim_span_name(sp->kind));
    cJSON *e = cJSON_CreateObject();
    if (e == NULL) break;
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddStringToObject(e, "cat", sp->worker < 0 ? "comm" : "compute");
    cJSON_AddStringToObject(e, "ph", "X");
    cJSON_AddNumberToObject(e, "ts", sp->start_s * 1e6);
    cJSON_AddNumberToObject(e, "dur", (sp->end_s - sp->start_s) * 1e6);
    cJSON_AddNumberToObject(e, "pid", sp->worker + 1);
    cJSON_AddNumberToObject(e, "tid", 0);
    if (sp->worker < 0) {
      cJSON *a = cJSON_AddObjectToObject(e, "args");
      cJSON_AddNumberToObject(a, "bytes", sp->bytes);
    }
    cJSON_AddItemToArray(ev, e);
  }
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (text == NULL) return GS_ERR_NOMEM;
  gs_status st = GS_OK;
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    st = gs_error(GS_ERR_IO, "sim trace: %s: cannot open for writing: %s", path,
                  strerror(errno));
  } else {
    if (fputs(text, f) < 0 || fputc('\n', f) == EOF) st = GS_ERR_IO;
    if (fclose(f) != 0) st = GS_ERR_IO;
    if (st != GS_OK)
      st = gs_error(GS_ERR_IO, "sim trace: %s: write failed: %s", path, strerror(errno));
  }
  cJSON_free(text);
  return st;
}
