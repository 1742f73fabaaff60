/* Parts of the loop shared between its files (not for extensions). */
#ifndef GRADSYNC_TRAIN_INTERNAL_H
#define GRADSYNC_TRAIN_INTERNAL_H

#include <stdio.h>

#include "train.h"

struct cJSON;

/* ---- Data (data.c) ---- */
gs_status train_load_data(const train_config *c, gs_nn_dataset *train, gs_nn_dataset *test);
/* A data set the model cannot take is an error before training: the image
 * shape, the class count and every label are checked against the model. */
gs_status train_check_data(const train_config *c, const gs_nn_dataset *ds, int train);

/* ---- Output (report.c) ---- */
/* Adds v as fmt would print it (NaN and infinities become null). */
void train_json_add(struct cJSON *obj, const char *name, double v, const char *fmt);
/* Prints obj as one line on f and frees it. */
void train_json_print(FILE *f, struct cJSON *obj);
/* Whether the user watches a terminal. */
int train_on_terminal(void);
void train_progress(const train_ctx *t, int epoch, long step, long steps, double loss,
                    double acc, double img_s, double hidden, int final);
void train_print_epoch(const train_ctx *t, long epoch, double epoch_s, double train_loss,
                       double test_loss, double acc, double img_s, const train_sync_stats *d);
void train_print_summary(const train_ctx *t, double train_s, double wall_s, long images,
                         double last_acc, const train_sync_stats *s,
                         const train_breakdown *b);

#endif /* GRADSYNC_TRAIN_INTERNAL_H */
