/* Per-rank compressor memory files: the engine sync mode's state that
 * differs between ranks (sync_engine.c's save_rank / load_rank).
 *
 * Each rank's file DIR/compress.rank<R>.step<S>.gsck holds, per parameter
 * tensor, the memory its compressed message keeps for it
 * (gs_engine_memory_get: the error-feedback residual, DGC's momentum, the
 * step counter and the learning rate the residual is scaled to), with the
 * compression spec, the rank, the world size and the training step S. A
 * resumed run of the same world size reads its own rank's file; one of
 * another size reads every old rank's and starts every new rank from their
 * mean (train_memory_load). */
#ifndef GRADSYNC_TRAIN_SYNC_MEMORY_H
#define GRADSYNC_TRAIN_SYNC_MEMORY_H

#include <stddef.h>

#include "gradsync.h"

/* One rank's memory of every tensor. */
typedef struct train_memory {
  size_t ntensors;
  const size_t *counts;    /* elements per tensor (the caller's) */
  /* Per tensor: arrays of counts[i] floats (the caller's) for the kinds
   * (GS_COMPRESS_MEM_*) wanted; have, step and lr say what they hold. */
  gs_compress_memory *mem;
  char spec[80];           /* the compression spec, normalised
                              (gs_compress_spec.normalised) */
} train_memory;

void train_memory_path(char *buf, size_t n, const char *dir, int rank, long step);

/* Writes m as the file of `rank` of a job of `size` ranks at training step
 * `step` (gs_nn_file: temporary file, crc32, fsync, rename). */
gs_status train_memory_write(const char *path, const train_memory *m, int rank, int size,
                             long step);

/* Reads the memory of the checkpoint at training step `step` in dir,
 * written by a job of old_size ranks, into m (m->counts: the model's;
 * m->mem[i]'s arrays: the kinds wanted, NULL for the others):
 *   rank >= 0: rank's own file (a job of the same size);
 *   rank < 0:  every old rank's file, and the mean over them of each kind
 *              (each rank's residual first scaled to rank 0's learning rate),
 *              the largest step counter and rank 0's rate: the same on every
 *              caller, since each reads the same files in the same order.
 * m->spec receives the files' compression spec (rank 0's; every file must
 * have it). Errors (GS_ERR_IO, GS_ERR_PARSE) name the file and what is
 * wrong: missing, corrupt (checksum), truncated, another rank, world size,
 * step or model. */
gs_status train_memory_load(const char *dir, long step, int old_size, int rank,
                            train_memory *m);

#endif /* GRADSYNC_TRAIN_SYNC_MEMORY_H */
