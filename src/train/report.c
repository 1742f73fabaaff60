/* The run's events (gs_train_events): what the loop tells its caller, and
 * how messages name the caller's options. */
#include <math.h>
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "train_internal.h"

const char *train_option(const gs_train_config *c, const char *field) {
  const gs_train_events *e = c->events;
  const char *name = e && e->option ? e->option(e->user, field) : NULL;
  return name ? name : field;
}

/* Events go to the caller from the first worker rank only. */
static const gs_train_events *events_of(const train_ctx *t) {
  return t->rank == 0 ? t->cfg->events : NULL;
}

void train_note(const train_ctx *t, const char *fmt, ...) {
  const gs_train_events *e = events_of(t);
  if (e == NULL || e->note == NULL) return;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  e->note(e->user, text);
}

int train_wants_progress(const train_ctx *t) {
  const gs_train_events *e = events_of(t);
  return e != NULL && e->progress != NULL;
}

void train_progress(const train_ctx *t, const gs_train_progress *p) {
  const gs_train_events *e = events_of(t);
  if (e && e->progress) e->progress(e->user, p);
}

void train_epoch_done(const train_ctx *t, const gs_train_epoch *ep) {
  const gs_train_events *e = events_of(t);
  if (e && e->epoch) e->epoch(e->user, ep);
}

void train_summary(const train_ctx *t, double train_s, double wall_s, long images,
                   double last_acc, const gs_train_stats *s, const gs_train_result *res) {
  const gs_train_events *e = events_of(t);
  if (e == NULL || e->summary == NULL) return;
  const gs_train_config *c = t->cfg;
  const train_sync *sync = &t->sync;
  char text[512] = "";
  cJSON *json = cJSON_CreateObject();
  if (sync->ops->describe) sync->ops->describe(sync->self, json, text, sizeof text);
  else snprintf(text, sizeof text, "sync %s", sync->ops->name);
  gs_train_summary m = {.model = gs_nn_model_name(c->model),
                        .sync = sync->ops->name,
                        .optimizer = t->optim.ops->name,
                        .data = t->data_origin ? t->data_origin : "source",
                        .backend = gs_nn_backend(t->net),
                        .precision = gs_nn_precision(t->net),
                        .ranks = t->ranks->size,
                        .workers = t->size, /* narrowed to the workers (sync_ps) */
                        .servers = t->ranks->size - t->size,
                        .epochs = c->epochs,
                        .batch = t->batch,
                        .momentum = c->momentum,
                        .sync_text = text,
                        .sync_json = json,
                        .train_s = train_s,
                        .wall_s = wall_s,
                        .samples_per_s = train_s > 0 && images > 0 ? (double)images / train_s
                                                                   : NAN,
                        .test_accuracy = last_acc,
                        .commits = t->commits,
                        .commit_s = t->commit_s,
                        .comm = *s,
                        .breakdown = &res->breakdown,
                        .epochs_done = res->epochs_done,
                        .stopped_at_step = res->stopped_at_step,
                        .stop_requested = res->stop_requested};
  e->summary(e->user, &m);
  cJSON_Delete(json);
}
