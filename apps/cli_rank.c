/* The ranks' common set-up and their agreement points (cli.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "gradsync/nn.h"
#include "gradsync/train.h"
#include "cli.h"


extern char cli_mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];

/* The agreement logic lives in the training library (src/train/agree.h),
 * which the trainer uses without the command line: these are its verbs'
 * names for it. */
static gs_train_ranks as_ranks(const cli_rank *r) {
  return (gs_train_ranks){.job = r->verb, .comm = r->comm, .rank = r->rank, .size = r->size,
                          .usage_note = " (see --help)"};
}

/* The rank is named where there are several (its size is known from
 * cli_rank_init on); the format is cli_vmessage's, shared by every verb. */
void cli_rank_error(const cli_rank *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cli_vmessage(r->verb, r->size > 1 ? r->rank : -1, 0, fmt, ap);
  va_end(ap);
}

void cli_rank_usage_error(const cli_rank *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cli_vmessage(r->verb, r->size > 1 ? r->rank : -1, 1, fmt, ap);
  va_end(ap);
}

_Noreturn void cli_rank_abort(cli_rank *r, const char *fmt, ...) {
  gs_train_ranks tr = as_ranks(r);
  va_list ap;
  va_start(ap, fmt);
  gs_train_rank_vabort(&tr, fmt, ap);
}

int cli_agree(cli_rank *r, int failed, const char *reason) {
  gs_train_ranks tr = as_ranks(r);
  return gs_train_agree(&tr, failed, reason);
}

int cli_agree_status(cli_rank *r, gs_status st) {
  gs_train_ranks tr = as_ranks(r);
  return gs_train_agree_status(&tr, st);
}

int cli_agree_outcome(cli_rank *r, gs_status st) {
  gs_train_ranks tr = as_ranks(r);
  return gs_train_agree_outcome(&tr, st);
}

int cli_agree_equal(cli_rank *r, const int64_t *vals, const char *const *names, int n) {
  gs_train_ranks tr = as_ranks(r);
  return gs_train_agree_equal(&tr, vals, names, n);
}

int cli_rank_init(cli_rank *r, const char *verb, int *argc, char ***argv) {
  memset(r, 0, sizeof *r);
  r->verb = verb;
  if (gs_init(argc, argv) != GS_OK) {
    cli_error(verb, "%s", gs_last_error());
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &r->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &r->size);
  int len = 0;
  MPI_Get_library_version(cli_mpi_version, &len);
  return 0;
}

int cli_rank_connect(cli_rank *r, int flags, int startup_rc, const char *startup_reason) {
  /* An option error held by cli_error: the others hear it, and it is
   * printed here unless every rank had the same (rank 0 printed it). */
  const char *held = cli_argv_error_message();
  const char *reason = held && startup_rc ? held : startup_reason;
  if (cli_agree(r, startup_rc != 0, reason)) {
    gs_agreement a;
    int same = 0, rc = startup_rc ? startup_rc : 1;
    int32_t mine = startup_rc;
    if (gs_agree(NULL, MPI_COMM_WORLD, "start-up", startup_rc ? GS_ERR_STATE : GS_OK,
                 startup_rc ? reason : "", &mine, sizeof mine, &a) == GS_OK) {
      same = gs_agreement_unanimous(&a);
      /* Every rank exits with the job's status: a usage error (2) on one
       * rank is the job's 2, whichever rank mpirun sees end first. */
      const int32_t *all = a.payloads;
      for (int k = 0; k < a.size; k++)
        if (all[k] > rc) rc = all[k];
      gs_agreement_free(&a);
    }
    cli_argv_error_release(!same);
    gs_finalize();
    return rc;
  }
  cli_argv_error_release(1);
  gs_status st = gs_comm_create(MPI_COMM_WORLD, &r->comm);
  if (st != GS_OK) {
    /* gs_comm_create fails on every rank together. A setting from the
     * environment that is malformed, or differs between ranks, is bad
     * input (2); anything else a failure (1). */
    int usage = st == GS_ERR_PARSE || st == GS_ERR_MISMATCH;
    /* The same message on every rank (a malformed setting they all read)
     * is said once, by rank 0. */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", gs_last_error());
    gs_agreement a;
    int same = 0;
    if (r->size > 1 &&
        gs_agree(NULL, MPI_COMM_WORLD, "communicator", st, msg, NULL, 0, &a) == GS_OK) {
      same = gs_agreement_unanimous(&a) && strlen(msg) < GS_VOTE_MESSAGE - 1;
      gs_agreement_free(&a);
    }
    if (same) {
      if (r->rank == 0 && usage) cli_error(r->verb, "%s (on every rank)", msg);
      else if (r->rank == 0) cli_fail(r->verb, "%s (on every rank)", msg);
    } else if (usage) {
      cli_rank_usage_error(r, "%s", msg);
    } else {
      cli_rank_error(r, "%s", msg);
    }
    r->comm = NULL;
    gs_finalize();
    return usage ? 2 : 1;
  }
  if (flags & CLI_RANK_BLAS) {
    /* One compute thread per rank, as the ranks share the machine's cores:
     * OpenBLAS's (and oneDNN's OpenMP) default of one thread per core makes
     * N ranks run N x cores threads that spin against each other (measured:
     * half the throughput of 4 ranks on 2 cores). gs_nn_set_threads sets
     * both pools. GRADSYNC_BLAS_THREADS overrides it. */
    const char *bt = getenv("GRADSYNC_BLAS_THREADS");
    int n = 1;
    if (bt && *bt && cli_parse_int(bt, 1, 1024, &n)) {
      cli_rank_error(r, "GRADSYNC_BLAS_THREADS=%s: expected an integer from 1 to 1024; "
                     "using 1", bt);
      n = 1;
    }
    gs_nn_set_threads(n);
  }
  return 0;
}

int cli_rank_finish(cli_rank *r, int rc) {
  if (r->comm == NULL) return rc;
  int any = cli_agree(r, rc != 0, NULL);
  gs_comm_destroy(r->comm);
  r->comm = NULL;
  gs_finalize();
  return rc ? rc : any;
}

gs_status cli_check_writable(const char *path, const char *what) {
  return gs_train_check_writable(path, what);
}
