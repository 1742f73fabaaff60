/* The gradsync command line: one binary, git-style verbs, and the toolkit
 * they share (number parsing, the median, JSON, the ranks' set-up and their
 * agreement on failures). The verbs use only gradsync's public headers. */
#ifndef GRADSYNC_CLI_H
#define GRADSYNC_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gradsync.h"

int cmd_bench(int argc, char **argv);
/* gradsync bench --op topk (apps/bench_topk.c), reached through cmd_bench. */
int cmd_bench_topk(int argc, char **argv);
/* gradsync bench --op sparse_allreduce (apps/bench_sparse.c). */
int cmd_bench_sparse(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_syncswitch(int argc, char **argv);

/* ---- Numbers ------------------------------------------------------------
 * Every verb reads its numbers with these. Each returns 0 on success and -1
 * (leaving *out unchanged) on an empty string, stray characters (spaces,
 * a '+', a trailing unit that is not one), an overflow or a value outside
 * [min, max]. */

/* Parses "4K", "256MB", "1GiB", "4096" into bytes (K/M/G are powers of
 * 1024, as nccl-tests reads them). */
int cli_parse_bytes(const char *s, size_t *out);
/* A decimal integer in [min, max]. */
int cli_parse_long(const char *s, long min, long max, long *out);
int cli_parse_int(const char *s, int min, int max, int *out);
/* A finite decimal number in [min, max] (strtod's syntax: "0.5", "1e-3"). */
int cli_parse_double(const char *s, double min, double max, double *out);

/* The median of v[0..n) (0 for n == 0); sorts v in place. */
double cli_median(double *v, size_t n);

/* ---- Messages and JSON ------------------------------------------------- */

/* Prints an error in the tool's format: "gradsync <verb>: message". */
void cli_error(const char *verb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints a cJSON object as one line on f and frees it. */
struct cJSON;
void cli_print_json(FILE *f, struct cJSON *obj);
/* Adds number v to obj as fmt (a printf format such as "%.3f" or "%.4g")
 * would round it: records keep the precision they had when written with
 * printf. A NaN or an infinity becomes null, as JSON has neither. */
void cli_json_add(struct cJSON *obj, const char *name, double v, const char *fmt);
/* Writes a one-line JSON description of the machine and software to f. */
void cli_print_env_json(FILE *f);

/* ---- Ranks ----------------------------------------------------------------
 * The set-up every multi-rank verb shares, and agreement points: where a
 * rank can fail alone before a collective phase (bad options on one node, a
 * missing file, an allocation), every rank first learns every rank's
 * outcome, and all stop together instead of some waiting forever in a
 * collective that the others never reach.
 *
 * MPI and threads. A verb calls MPI itself only inside cli_rank_init, before
 * gs_comm_create starts the communicator's progress thread. Afterwards every
 * collective of the verb's own (agreements, broadcasting the initial
 * weights, summing metrics) is one of gradsync's collectives on the
 * gs_comm, which the progress thread makes: the verbs then need no more
 * than the thread level gs_comm_create itself needs (MPI_THREAD_SERIALIZED),
 * where calling MPI from the main thread while the progress thread is inside
 * MPI would need MPI_THREAD_MULTIPLE. Those collectives share the gs_comm
 * with the engine's, so a verb issues them only where the engine has no
 * collective in flight on any rank (before the first iteration, after
 * gs_engine_wait and every gs_engine_wait_tensor of the step, or after
 * gs_engine_destroy): then every rank issues the same sequence. A failure
 * while the engine may have collectives in flight cannot be agreed on (the
 * others are inside the engine's collectives); cli_rank_abort ends the job
 * there. */

typedef struct cli_rank {
  const char *verb;
  gs_comm *comm;  /* NULL until cli_rank_init succeeds */
  int rank, size;
} cli_rank;

enum {
  /* One OpenBLAS thread per rank (GRADSYNC_BLAS_THREADS overrides). */
  CLI_RANK_BLAS = 1,
};

/* Starts MPI (gs_init) and learns the rank and size: cli_rank_error names
 * the rank from here on. Returns 0, or 1 after printing why not. */
int cli_rank_init(cli_rank *r, const char *verb, int *argc, char ***argv);

/* The first agreement, then the communicator: every rank says how what it
 * did alone went (startup_rc: 0, or the non-zero exit status of a failure
 * this rank has already reported, such as bad options or an unreadable
 * input file; startup_reason: its short form for the others); if all went
 * well, the communicator over MPI_COMM_WORLD is created and the BLAS threads
 * set (flags). Returns 0 when every rank is ready. Otherwise MPI is shut
 * down again and the status to exit with is returned: startup_rc on a rank
 * that failed, 1 on the others (which print "gradsync VERB: rank R:
 * stopping: rank K failed (reason)"). */
int cli_rank_connect(cli_rank *r, int flags, int startup_rc, const char *startup_reason);

/* Agreement point (collective over the ranks): returns 0 if no rank failed,
 * else 1 on every rank. A failed rank (failed != 0) has already printed its
 * error; reason is its short form for the others, who print which ranks
 * failed and the first one's reason. Call only where the engine has no
 * collective in flight (see above). If the agreement's own collective fails
 * (a collective failed inside the communicator before), no collective can
 * reach the others: the job is aborted (cli_rank_abort). */
int cli_agree(cli_rank *r, int failed, const char *reason);
/* cli_agree for a gs_status: on failure, this rank first prints
 * "gradsync VERB: rank R: <gs_last_error()>". */
int cli_agree_status(cli_rank *r, gs_status st);

/* Agreement on values that must be equal on every rank (a step count, a
 * parameter count, ...): returns 0 if every rank's vals[i] equals rank 0's,
 * else 1 on every rank, each printing the first difference (the setting's
 * name, the ranks and their values). */
int cli_agree_equal(cli_rank *r, const int64_t *vals, const char *const *names, int n);

/* Ends the job from any thread when the others cannot be told through a
 * collective (the engine may have collectives in flight): prints
 * "gradsync: rank R: fatal: VERB: message" and aborts every rank. */
_Noreturn void cli_rank_abort(cli_rank *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "gradsync VERB: rank R: message" (no rank prefix with one rank
 * whose communicator does not exist yet). */
void cli_rank_error(const cli_rank *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Agrees on rc (0 or an exit status) across the ranks, then destroys the
 * communicator and shuts MPI down. Returns rc, or 1 where rc was 0 but
 * another rank failed. */
int cli_rank_finish(cli_rank *r, int rc);

/* Whether a file can be created at path: its directory exists and is
 * writable (GS_ERR_IO naming the path and what it is for otherwise). */
gs_status cli_check_writable(const char *path, const char *what);

#endif /* GRADSYNC_CLI_H */
