/* Progress, per-epoch and summary output on rank 0 (text or JSON lines). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train_internal.h"

void train_json_print(FILE *f, cJSON *obj) {
  char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
  if (s) fprintf(f, "%s\n", s);
  cJSON_free(s);
  cJSON_Delete(obj);
}

/* Records keep the precision they had when written with printf; JSON has
 * no NaN nor infinity. */
void train_json_add(cJSON *obj, const char *name, double v, const char *fmt) {
  if (!isfinite(v)) {
    cJSON_AddNullToObject(obj, name);
    return;
  }
  char buf[64];
  snprintf(buf, sizeof buf, fmt, v);
  cJSON_AddNumberToObject(obj, name, strtod(buf, NULL));
}

/* `gradsync run` says in GRADSYNC_TTY whether the user watches a terminal,
 * since ranks write to mpirun's pseudo-terminal even when the user's output
 * is a file. */
int train_on_terminal(void) {
  const char *s = getenv("GRADSYNC_TTY");
  if (s && *s) return strcmp(s, "1") == 0;
  return isatty(STDOUT_FILENO);
}

void train_progress(const train_ctx *t, int epoch, long step, long steps, double loss,
                    double acc, double img_s, double hidden, int final) {
  const train_config *c = t->cfg;
  if (t->rank != 0 || c->json || c->quiet) return;
  if (train_on_terminal()) {
    int width = 30, done = steps ? (int)(width * step / steps) : width;
    printf("\repoch %d/%d [", epoch + 1, c->epochs);
    for (int i = 0; i < width; i++) putchar(i < done ? '#' : '.');
    printf("] %3ld%% loss %.4f acc %5.1f%% %7.0f img/s comm hidden %3.0f%%",
           steps ? 100 * step / steps : 100, loss, 100 * acc, img_s, 100 * hidden);
    if (final) putchar('\n');
  } else {
    printf("epoch %d/%d step %ld/%ld loss %.4f acc %.1f%% %.0f img/s comm hidden %.0f%%\n",
           epoch + 1, c->epochs, step, steps, loss, 100 * acc, img_s, 100 * hidden);
  }
  fflush(stdout);
}

void train_print_epoch(const train_ctx *t, long epoch, double epoch_s, double train_loss,
                       double test_loss, double acc, double img_s, const train_sync_stats *d) {
  if (t->rank != 0 || t->cfg->quiet) return;
  if (!t->cfg->json) {
    printf("epoch %ld: %.1f s, test accuracy %.2f%%, test loss %.4f\n", epoch, epoch_s,
           100 * acc, test_loss);
    fflush(stdout);
    return;
  }
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "epoch", (double)epoch);
  train_json_add(j, "epoch_s", epoch_s, "%.3f");
  train_json_add(j, "train_loss", train_loss, "%.5f");
  train_json_add(j, "test_loss", test_loss, "%.5f");
  train_json_add(j, "test_accuracy", acc, "%.4f");
  train_json_add(j, "images_per_s", img_s, "%.1f");
  train_json_add(j, "comm_s", d->comm_s, "%.3f");
  train_json_add(j, "comm_hidden", train_sync_hidden(d), "%.3f");
  cJSON_AddNumberToObject(j, "bytes_sent", (double)d->bytes);
  train_json_print(stdout, j);
  fflush(stdout);
}

void train_print_summary(const train_ctx *t, double train_s, double wall_s, long images,
                         double last_acc, const train_sync_stats *s,
                         const train_breakdown *b) {
  const train_config *c = t->cfg;
  if (t->rank != 0 || c->quiet) return;
  const train_sync *sync = &t->sync;
  double img_s = train_s > 0 ? (double)images / train_s : 0;
  if (c->json) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "model", gs_nn_model_name(c->model));
    cJSON_AddNumberToObject(m, "ranks", t->size);
    cJSON_AddNumberToObject(m, "epochs", c->epochs);
    cJSON_AddNumberToObject(m, "batch_per_rank", c->batch);
    cJSON_AddStringToObject(m, "sync", sync->ops->name);
    cJSON_AddStringToObject(m, "optimizer", t->optim.ops->name);
    train_json_add(m, "momentum", c->momentum, "%g");
    cJSON_AddStringToObject(m, "data", t->data_origin ? t->data_origin : "source");
    if (sync->ops->describe) sync->ops->describe(sync->self, m, NULL, 0);
    train_json_add(m, "train_s", train_s, "%.3f");
    train_json_add(m, "wall_s", wall_s, "%.3f");
    train_json_add(m, "images_per_s", img_s, "%.1f");
    train_json_add(m, "test_accuracy", last_acc, "%.4f");
    cJSON_AddNumberToObject(m, "messages", (double)s->messages);
    cJSON_AddNumberToObject(m, "bytes_sent", (double)s->bytes);
    train_json_add(m, "comm_s", s->comm_s, "%.3f");
    train_json_add(m, "comm_hidden", train_sync_hidden(s), "%.3f");
    cJSON *bd = cJSON_CreateObject();
    for (int i = 0; i < b->n; i++) {
      char key[TRAIN_BREAKDOWN_NAME + 2];
      snprintf(key, sizeof key, "%s_s", b->bucket[i].name);
      train_json_add(bd, key, b->bucket[i].seconds, "%.3f");
    }
    cJSON_AddItemToObject(m, "breakdown", bd);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "summary", m);
    train_json_print(stdout, j);
  } else {
    char mode[512] = "";
    if (sync->ops->describe) sync->ops->describe(sync->self, NULL, mode, sizeof mode);
    else snprintf(mode, sizeof mode, "sync %s", sync->ops->name);
    printf("\nsummary: %s on %d rank(s), %d epoch(s), batch %d per rank\n"
           "  time        %.1f s training, %.1f s in all\n"
           "  throughput  %.0f images/s\n"
           "  accuracy    %.2f%% on the test set\n"
           "  comm        %s, %llu collectives,\n"
           "              %.1f s communicating, %.0f%% of it hidden behind compute\n",
           gs_nn_model_name(c->model), t->size, c->epochs, c->batch, train_s, wall_s, img_s,
           100 * last_acc, mode, (unsigned long long)s->messages, s->comm_s,
           100 * train_sync_hidden(s));
    printf("  breakdown  ");
    for (int i = 0; i < b->n; i++) {
      char name[TRAIN_BREAKDOWN_NAME];
      snprintf(name, sizeof name, "%s", b->bucket[i].name);
      for (char *p = name; *p; p++)
        if (*p == '_') *p = ' ';
      printf("%s %s %.1f s", i ? "," : "", name, b->bucket[i].seconds);
    }
    printf("\n");
  }
  fflush(stdout);
}
