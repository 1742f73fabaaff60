/* Parts of the loop shared between its files (not for extensions). */
#ifndef GRADSYNC_TRAIN_INTERNAL_H
#define GRADSYNC_TRAIN_INTERNAL_H

#include <stdio.h>

#include "train_ctx.h"

struct cJSON;

/* ---- Agreement (agree.c) ---- */

/* ---- A sync mode's per-rank files beside checkpoints (resume.c) ---- */
/* The bookkeeping of files each rank writes beside a checkpoint (the
 * engine's compressor memory, the local SGD modes' momentum): this rank
 * removes the files of the checkpoint on disk once a newer one is in place,
 * those of step kept_step of ranks kept_first, kept_first + size, ...
 * below kept_upto (after a resize the new ranks share out the old ones'
 * files); written_step is the step of the file just written (-1: none);
 * saved: a save since the last commit. */
typedef struct train_rank_files {
  long kept_step, written_step;
  int kept_first, kept_upto;
  int saved;
} train_rank_files;
/* The path of rank's file of step `step` in dir. */
typedef void (*train_rank_path)(char *buf, size_t n, const char *dir, int rank, long step);
void train_rank_files_init(train_rank_files *f);
/* A save begins (nothing written yet), and one was written at step. */
void train_rank_files_saving(train_rank_files *f);
void train_rank_files_written(train_rank_files *f, long step);
/* Once a checkpoint is in place (a no-op without a save since the last):
 * the kept files go, the one just written is kept. */
void train_rank_files_commit(train_rank_files *f, const train_ctx *t, train_rank_path path);
/* A run resumed from the files of files_size ranks (0: none) at step. */
void train_rank_files_resumed(train_rank_files *f, const train_ctx *t, long step,
                              int files_size);

/* ---- Data (data.c) ---- */
gs_status train_load_data(const gs_train_config *c, gs_nn_dataset *train, gs_nn_dataset *test);
/* A data set the model cannot take is an error before training: the image
 * shape, the class count and every label are checked against the model. */
gs_status train_check_data(const gs_train_config *c, const gs_nn_dataset *ds, int train);

/* ---- The data cache (data_cache.c) ---- */
/* --data-cache: fills train and test from the cache or the source
 * (collective over t->ranks). Returns the exit status of an agreed failure
 * (2: bad input, a directory it cannot use or a missing or truncated data
 * set, said once; 1: else); else 0,
 * with *st this rank's status of a fall-back read of the source (to be
 * agreed with the rest of the set-up). */
int train_data_cached(train_ctx *t, gs_nn_dataset *train, gs_nn_dataset *test, gs_status *st);

/* ---- Checkpoints' descriptions (resume.c) ---- */
/* What identifies a training set. */
typedef struct train_data_id {
  char source[512]; /* "synthetic N" or the directory */
  size_t samples;
  char shape[48];   /* "1x28x28" */
  int classes;
  uint32_t crc32;   /* of the decoded images and labels */
} train_data_id;
/* known_crc: the data's CRC-32 if already computed (the data cache's check), or NULL. */
void train_data_identify(const gs_train_config *c, const gs_nn_dataset *ds,
                         const uint32_t *known_crc, train_data_id *id);
/* Rank 0, after saving the next checkpoint to ckpt_path at the end of epoch
 * (1-based count done) and before renaming it into place: writes
 * DIR/checkpoint.json describing the run and that file, with the
 * description it replaces kept as "previous". */
gs_status train_meta_save(const train_ctx *t, const char *ckpt_path, const train_data_id *data,
                          long epoch);
/* train_meta_save in two halves, for a commit written in the background:
 * the description of the run now (main thread), then, from any thread, its
 * file at path (DIR/checkpoint.json) with ckpt_path's hash. write takes m. */
struct cJSON *train_meta_describe(const train_ctx *t, const train_data_id *data, long epoch);
gs_status train_meta_write(const char *path, struct cJSON *m, const char *ckpt_path);
/* Rank 0 at a commit, once a launch: the engine's profile (the one its
 * plan was made from; none before the profiling steps, or without the
 * engine) into DIR/profile.json, atomically, with the per-rank batch it
 * was measured at: the cluster manager predicts the job's speed on other
 * sizes from it (docs/CLUSTER_MANAGER.md), again only when the file
 * changes. Best effort: a failure leaves the file as it was, the commit
 * goes on and the next one tries again. */
void train_profile_save(train_ctx *t);
/* DIR/checkpoint.json of a run. */
void train_meta_path(const gs_train_config *c, char *buf, size_t n);
/* Before loading the checkpoint: a different --model, named as such (the
 * loader would only see other tensor sizes). GS_OK where the description
 * cannot be read (train_meta_check reports that). */
gs_status train_meta_check_model(const train_ctx *t);
/* After loading ckpt_path (at ckpt_epoch) for --resume: GS_ERR_INVALID_ARG
 * saying what differs when the checkpoint does not fit this run. */
gs_status train_meta_check(const train_ctx *t, const char *ckpt_path,
                           const train_data_id *data, long ckpt_epoch);

/* ---- Batches (prefetch.c) ---- */
/* The batch buffers of a run, with a background thread that gathers the
 * next step's batch while the current one computes (threaded = 1). */
typedef struct train_batches train_batches;
gs_status train_batches_create(train_batches **out, const gs_nn_dataset *ds, int batch,
                               size_t sample_floats, int threaded);
/* A new epoch: its shard's indices (which must not change until
 * train_batches_finish) and step count; the first batch starts. */
void train_batches_start(train_batches *b, const size_t *indices, long steps);
/* Step's batch (steps in order from 0; past the shard's steps, batches
 * wrap around it); asks for the next one if step + 1 < steps. x and y stay
 * valid and unchanged until the call for step + 2. */
gs_status train_batches_get(train_batches *b, long step, long steps, float **x, int32_t **y);
/* Waits until no gather is in flight (before the indices change). */
void train_batches_finish(train_batches *b);
void train_batches_destroy(train_batches *b);

/* ---- The epoch's samples (train.c) ---- */
/* Rank `rank`'s samples for nsteps steps of size x batch samples each,
 * from position g0 of the epoch's permutation perm: step i takes the global
 * batch perm[g0 + i*size*batch ...), the rank every size-th of it from
 * `rank`. Disjoint across ranks and steps, so positions cover each sample
 * once however the world size changes between runs. out: nsteps * batch. */
void train_epoch_indices(const size_t *perm, long g0, int size, int rank, int batch,
                         long nsteps, size_t *out);

/* ---- Events and names (report.c) ---- */
/* The events, on the first worker rank only (nothing elsewhere); train_note
 * is in train_ctx.h, for the extensions too. */
int train_wants_progress(const train_ctx *t);
void train_progress(const train_ctx *t, const gs_train_progress *p);
void train_epoch_done(const train_ctx *t, const gs_train_epoch *e);
void train_summary(const train_ctx *t, double train_s, double wall_s, long images,
                   double last_acc, const gs_train_stats *s, const gs_train_result *res);

#endif /* GRADSYNC_TRAIN_INTERNAL_H */
