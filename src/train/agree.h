/* Agreement between the ranks of a training job.
 *
 * Where a rank can fail alone before a collective phase (options, a missing
 * file, an allocation, an unwritable path), every rank first learns every
 * rank's outcome, and all stop together instead of some waiting forever in a
 * collective the others never reach. This is the one home of that logic: the
 * command line (apps/cli_rank.c) calls it too.
 *
 * Once the communicator exists, the agreements travel on it (its progress
 * thread makes the MPI calls), so call them only where nothing else is in
 * flight on it on any rank (the engine idle). Before it exists (comm NULL),
 * they use MPI_COMM_WORLD from the calling thread. */
#ifndef GRADSYNC_TRAIN_AGREE_H
#define GRADSYNC_TRAIN_AGREE_H

#include <stdarg.h>
#include <stdint.h>

#include "gradsync.h"

/* Who speaks: messages read "gradsync VERB: rank R: ...". The caller owns
 * the communicator. */
typedef struct train_ranks {
  const char *verb;
  gs_comm *comm; /* NULL before the communicator exists */
  int rank, size;
} train_ranks;

/* Prints "gradsync VERB: rank R: message" on stderr (no rank prefix while
 * size is 0, before MPI knows the ranks). */
void train_rank_error(const train_ranks *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void train_rank_verror(const train_ranks *r, const char *fmt, va_list ap);

/* Ends the job from any thread when the others cannot be told through a
 * collective: prints "gradsync: rank R: fatal: VERB: message" and aborts
 * every rank. */
_Noreturn void train_rank_abort(const train_ranks *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
_Noreturn void train_rank_vabort(const train_ranks *r, const char *fmt, va_list ap);

/* Collective: returns 0 if no rank failed, else 1 on every rank. A failed
 * rank has already printed its error; reason (its first line) is the short
 * form the others print ("stopping: rank K failed (reason)"). If the
 * agreement's own collective fails, the job is aborted. */
int train_agree(const train_ranks *r, int failed, const char *reason);
/* train_agree for a status: on failure this rank first prints
 * gs_last_error(). */
int train_agree_status(const train_ranks *r, gs_status st);
/* Values that must be equal on every rank: 0 if every rank's vals[i]
 * equals rank 0's, else 1 on every rank, each naming the first difference
 * (names[i], the ranks and their values). */
int train_agree_equal(const train_ranks *r, const int64_t *vals, const char *const *names,
                      int n);

/* Whether a file can be created at path: its directory exists and is
 * writable, and path is no directory nor a read-only file (GS_ERR_IO naming
 * the path and what it is for, otherwise). */
gs_status train_check_writable(const char *path, const char *what);
/* Whether files can be created in directory dir: creates and removes a
 * probe file there (access() says yes to root even where creating fails).
 * GS_ERR_IO naming what the directory is for otherwise. */
gs_status train_probe_dir(const char *dir, const char *what);

#endif /* GRADSYNC_TRAIN_AGREE_H */
