/* What `gradsync train` shows of a run: the training library's events
 * (gs_train_events) as a progress bar or log lines, per-epoch lines and a
 * summary, in text or JSON lines; and the flags that name the library's
 * options in its messages. */
#include <math.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "gradsync.h"
#include "gradsync/train.h"

/* Ends a terminal's bar drawn without its newline, so that a line printed
 * now starts on a line of its own (until 2026-12-07 a note was glued to the
 * bar: "... comm hidden 100%stopped after global step 95"). */
static void end_bar(cli_train_view *v) {
  if (!v->bar_open) return;
  putchar('\n');
  v->bar_open = 0;
}

static void progress(void *user, const gs_train_progress *p) {
  cli_train_view *v = user;
  if (v->json) return;
  if (!p->final) {
    /* A terminal's bar is redrawn at most 5 times a second; a log gets a
     * line every 5% of the epoch. */
    long every = p->steps / 20 > 1 ? p->steps / 20 : 1;
    if (v->terminal ? gs_now() - v->last_draw <= 0.2 : p->step % every != 0) return;
    v->last_draw = gs_now();
  }
  if (v->terminal) {
    int width = 30, done = p->steps ? (int)(width * p->step / p->steps) : width;
    printf("\repoch %d/%d [", p->epoch + 1, p->epochs);
    for (int i = 0; i < width; i++) putchar(i < done ? '#' : '.');
    printf("] %3ld%% loss %.4f acc %5.1f%% %7.0f img/s comm hidden %3.0f%%",
           p->steps ? 100 * p->step / p->steps : 100, p->loss, 100 * p->accuracy,
           p->samples_per_s, 100 * p->comm_hidden);
    if (p->final) putchar('\n');
    v->bar_open = !p->final;
  } else {
    printf("epoch %d/%d step %ld/%ld loss %.4f acc %.1f%% %.0f img/s comm hidden %.0f%%\n",
           p->epoch + 1, p->epochs, p->step, p->steps, p->loss, 100 * p->accuracy,
           p->samples_per_s, 100 * p->comm_hidden);
  }
  fflush(stdout);
}

/* A run whose first evaluated epoch is at chance on the test set (at most
 * 1/classes + 0.01) with a training loss not below ln(classes), a uniform
 * guess's, has diverged rather than trained slowly: exit 0 with 10% said
 * nothing of why (the CNN at the default --lr with --batch 32). One line on
 * stderr, in text and JSON alike (since 2026-12-07). */
static void warn_diverged(const gs_train_epoch *e) {
  const double chance = 1.0 / GS_TRAIN_CLASSES, uniform = log((double)GS_TRAIN_CLASSES);
  if (!(e->test_accuracy <= chance + 0.01) || e->train_loss < uniform) return;
  fprintf(stderr, "gradsync train: warning: epoch %ld: test accuracy %.2f%% is chance (%d "
          "classes) and the training loss %.4g is not below ln %d = %.4f: the run "
          "diverged; try a smaller --lr (docs/TRAIN.md)\n", e->epoch, 100 * e->test_accuracy,
          GS_TRAIN_CLASSES, e->train_loss, GS_TRAIN_CLASSES, uniform);
  fflush(stderr);
}

static void epoch(void *user, const gs_train_epoch *e) {
  cli_train_view *v = user;
  if (!v->epoch_seen) {
    v->epoch_seen = 1;
    warn_diverged(e);
  }
  if (!v->json) {
    end_bar(v);
    printf("epoch %ld: %.1f s, test accuracy %.2f%%, test loss %.4f\n", e->epoch, e->seconds,
           100 * e->test_accuracy, e->test_loss);
    fflush(stdout);
    return;
  }
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "epoch", (double)e->epoch);
  cli_json_add(j, "epoch_s", e->seconds, "%.3f");
  cli_json_add(j, "train_loss", e->train_loss, "%.5f");
  cli_json_add(j, "test_loss", e->test_loss, "%.5f");
  cli_json_add(j, "test_accuracy", e->test_accuracy, "%.4f");
  cli_json_add(j, "images_per_s", e->samples_per_s, "%.1f");
  cli_json_add(j, "comm_s", e->comm.comm_s, "%.3f");
  cli_json_add(j, "comm_hidden", gs_train_hidden(&e->comm), "%.3f");
  cJSON_AddNumberToObject(j, "bytes_sent", (double)e->comm.bytes);
  cJSON_AddNumberToObject(j, "samples", (double)e->samples);
  cJSON_AddNumberToObject(j, "dataset_samples", (double)e->dataset_samples);
  cli_print_json(stdout, j);
  fflush(stdout);
}

static void summary_json(const gs_train_summary *s) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "model", s->model);
  /* The job's ranks, and which of them train: a parameter-server job's
   * servers train on nothing (until 2026-12-06 "ranks" was the workers). */
  cJSON_AddNumberToObject(m, "ranks", s->ranks);
  cJSON_AddNumberToObject(m, "workers", s->workers);
  cJSON_AddNumberToObject(m, "servers", s->servers);
  cJSON_AddNumberToObject(m, "epochs", s->epochs);
  cJSON_AddNumberToObject(m, "batch_per_rank", s->batch);
  cJSON_AddStringToObject(m, "sync", s->sync);
  cJSON_AddStringToObject(m, "optimizer", s->optimizer);
  cli_json_add(m, "momentum", s->momentum, "%g");
  cJSON_AddStringToObject(m, "data", s->data);
  cJSON_AddStringToObject(m, "backend", s->backend);
  cJSON_AddStringToObject(m, "precision", s->precision);
  /* The sync mode's own fields, in its order; one the summary has already
   * ("sync": the mode's full spec, "switch:offline:0.5" for "switch")
   * replaces it there: a key twice is not strict JSON. */
  for (const cJSON *f = s->sync_json ? s->sync_json->child : NULL; f; f = f->next) {
    cJSON_DeleteItemFromObjectCaseSensitive(m, f->string);
    cJSON_AddItemToObject(m, f->string, cJSON_Duplicate(f, 1));
  }
  cli_json_add(m, "train_s", s->train_s, "%.3f");
  cli_json_add(m, "wall_s", s->wall_s, "%.3f");
  cli_json_add(m, "images_per_s", s->samples_per_s, "%.1f");
  cli_json_add(m, "test_accuracy", s->test_accuracy, "%.4f");
  cJSON_AddNumberToObject(m, "epochs_done", s->epochs_done);
  if (s->stopped_at_step > 0) { /* a stop at a commit: --resume continues */
    cJSON_AddNumberToObject(m, "stopped_at_step", (double)s->stopped_at_step);
    cJSON_AddBoolToObject(m, "stop_requested", s->stop_requested);
  }
  if (s->commits > 0) {
    cJSON_AddNumberToObject(m, "commits", (double)s->commits);
    cli_json_add(m, "commit_s", s->commit_s, "%.3f");
  }
  cJSON_AddNumberToObject(m, "messages", (double)s->comm.messages);
  cJSON_AddNumberToObject(m, "bytes_sent", (double)s->comm.bytes);
  cli_json_add(m, "comm_s", s->comm.comm_s, "%.3f");
  cli_json_add(m, "comm_hidden", gs_train_hidden(&s->comm), "%.3f");
  cJSON *bd = cJSON_CreateObject();
  for (int i = 0; i < s->breakdown->n; i++) {
    char key[GS_TRAIN_BREAKDOWN_NAME + 2];
    snprintf(key, sizeof key, "%s_s", s->breakdown->bucket[i].name);
    cli_json_add(bd, key, s->breakdown->bucket[i].seconds, "%.3f");
  }
  cJSON_AddItemToObject(m, "breakdown", bd);
  cJSON *j = cJSON_CreateObject();
  cJSON_AddItemToObject(j, "summary", m);
  cli_print_json(stdout, j);
}

static void summary(void *user, const gs_train_summary *s) {
  cli_train_view *v = user;
  if (v->json) {
    summary_json(s);
    fflush(stdout);
    return;
  }
  /* No image trained, or no epoch ended (the test set is evaluated at an
   * epoch's end): "-", not 0. */
  char thr[32] = "-", acc[48] = "- (no epoch ended here)";
  if (isfinite(s->samples_per_s)) snprintf(thr, sizeof thr, "%.0f", s->samples_per_s);
  if (isfinite(s->test_accuracy))
    snprintf(acc, sizeof acc, "%.2f%% on the test set", 100 * s->test_accuracy);
  /* A parameter-server job: its ranks, and which of them train. */
  char ranks[96];
  if (s->servers > 0)
    snprintf(ranks, sizeof ranks, "%d ranks (%d worker%s, %d server%s)", s->ranks, s->workers,
             s->workers == 1 ? "" : "s", s->servers, s->servers == 1 ? "" : "s");
  else
    snprintf(ranks, sizeof ranks, "%d rank(s)", s->ranks);
  printf("\nsummary: %s on %s, %d epoch(s), batch %d per %s\n"
         "  time        %.1f s training, %.1f s in all\n"
         "  throughput  %s images/s (%s, %s)\n"
         "  accuracy    %s\n",
         s->model, ranks, s->epochs, s->batch, s->servers > 0 ? "worker" : "rank", s->train_s,
         s->wall_s, thr, s->backend, s->precision, acc);
  if (s->comm.messages > 0 || s->comm.comm_s > 0)
    printf("  comm        %s, %llu collectives,\n"
           "              %.1f s communicating, %.0f%% of it hidden behind compute\n",
           s->sync_text, (unsigned long long)s->comm.messages, s->comm.comm_s,
           100 * gs_train_hidden(&s->comm));
  else
    printf("  comm        %s\n", s->sync_text);
  if (s->commits > 0)
    printf("  commits     %ld inside epochs, %.2f s (%.1f%% of training)\n", s->commits,
           s->commit_s, s->train_s > 0 ? 100 * s->commit_s / s->train_s : 0);
  printf("  breakdown  ");
  for (int i = 0; i < s->breakdown->n; i++) {
    char name[GS_TRAIN_BREAKDOWN_NAME];
    snprintf(name, sizeof name, "%s", s->breakdown->bucket[i].name);
    for (char *p = name; *p; p++)
      if (*p == '_') *p = ' ';
    printf("%s %s %.1f s", i ? "," : "", name, s->breakdown->bucket[i].seconds);
  }
  printf("\n");
  fflush(stdout);
}

/* A note (a resume's changed settings, a stop, a warning): on stdout with
 * the progress, or on stderr under --json, whose stdout is JSON lines only
 * (until 2026-12-07 a JSON run dropped its notes). */
static void note(void *user, const char *text) {
  cli_train_view *v = user;
  if (v->json) {
    fprintf(stderr, "gradsync train: %s\n", text);
    fflush(stderr);
    return;
  }
  end_bar(v);
  printf("%s\n", text);
  fflush(stdout);
}

/* The flag of each configuration field the library names in messages. */
static const char *option(void *user, const char *field) {
  (void)user;
  static const struct {
    const char *field, *flag;
  } flags[] = {{"model", "--model"},           {"epochs", "--epochs"},
               {"batch", "--batch"},           {"lr", "--lr"},
               {"schedule", "--schedule"},     {"warmup_epochs", "--warmup-epochs"},
               {"data_dir", "--data"},         {"data_cache", "--data-cache"},
               {"checkpoint_dir", "--checkpoint"}, {"resume", "--resume"},
               {"seed", "--seed"},             {"sync", "--sync"},
               {"ps_servers", "--ps"},         {"straggler", "--straggler"},
               {"optimizer", "--optimizer"},   {"compress", "--compress"},
               {"commit_every", "--commit-every"}, {"commit_every_s", "--commit-every"}, {"stop_at_step", "--stop-at-step"},
               {"max_steps", "--max-steps"},   {"global_batch", "--global-batch"},
               {"scale_lr_linear", "--scale-lr linear"}, {"precision", "--precision"},
               {"policy", "--policy"},         {"kfac_dist", "--kfac-dist"},
               {"compress_warmup_steps", "--compress-warmup-steps"},
               {"momentum", "--momentum"},     {"weight_decay", "--weight-decay"},
               {"dropout", "--dropout"},       {"kfac_inverse", "--kfac-inverse"},
               {"kfac_cov_every", "--kfac-cov-every"}, {"kfac_inv_every", "--kfac-inv-every"},
               {"kfac_damping", "--kfac-damping"}, {"kfac_decay", "--kfac-decay"},
               {"kfac_kl_clip", "--kfac-kl-clip"}, {"async_lr_scale", "--async-lr-scale"},
               {"async_momentum", "--async-momentum"}};
  for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
    if (strcmp(flags[i].field, field) == 0) return flags[i].flag;
  return NULL;
}

void cli_train_events(cli_train_view *v, gs_train_events *e) {
  v->terminal = cli_on_terminal();
  v->last_draw = 0;
  *e = (gs_train_events){.user = v, .progress = progress, .epoch = epoch, .summary = summary,
                         .note = note, .option = option};
}
