/* The ranks' common set-up and their agreement points (cli.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "cli.h"

/* OpenBLAS's own thread count (from cblas.h, not included here to keep the
 * CLI free of BLAS headers). */
void openblas_set_num_threads(int num_threads);

extern char cli_mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];

/* What a rank says at an agreement point: whether it failed, and why in
 * short. A fixed size, so one allgather carries every rank's record. */
typedef struct agree_rec {
  char failed;
  char reason[127];
} agree_rec;

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
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (r->comm) gs_comm_abort(r->comm, 1, "%s: %s", r->verb, msg);
  fprintf(stderr, "gradsync: rank %d: fatal: %s: %s\n", r->rank, r->verb, msg);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  abort();
}

/* Every rank's `bytes` bytes from `mine` into all[rank]. Before the
 * communicator exists no other thread can be inside MPI, so MPI_COMM_WORLD
 * serves from this thread; afterwards the gs_comm's progress thread makes
 * the call. */
static gs_status exchange(cli_rank *r, const void *mine, void *all, size_t bytes) {
  if (r->comm) return gs_allgather(r->comm, mine, all, bytes, GS_U8, GS_ALGO_MPI);
  int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                         MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS)
    return gs_error(GS_ERR_MPI, "rank %d: the agreement's MPI_Allgather failed (%d)",
                    r->rank, rc);
  return GS_OK;
}

/* The agreement's own collective failed: the communicator is broken (a
 * collective failed inside it), so no collective can tell the others, who
 * may be waiting in one; ending the job now beats their timeout. */
static _Noreturn void agree_failed(cli_rank *r) {
  cli_rank_abort(r, "cannot agree with the other ranks: %s", gs_last_error());
}

int cli_agree(cli_rank *r, int failed, const char *reason) {
  agree_rec mine;
  memset(&mine, 0, sizeof mine);
  mine.failed = failed != 0;
  if (failed && reason && *reason) {
    /* The first line, shortened: the failing rank prints the whole. */
    size_t n = strcspn(reason, "\n"), cap = sizeof mine.reason - 1;
    if (n > cap) {
      memcpy(mine.reason, reason, cap - 3);
      memcpy(mine.reason + cap - 3, "...", 3);
    } else {
      memcpy(mine.reason, reason, n);
    }
  }
  agree_rec *all = calloc((size_t)r->size, sizeof *all);
  if (all == NULL) cli_rank_abort(r, "out of memory for an agreement of %d ranks", r->size);
  if (exchange(r, &mine, all, sizeof mine) != GS_OK) agree_failed(r);
  int nfailed = 0, first = -1;
  for (int k = 0; k < r->size; k++)
    if (all[k].failed) {
      if (first < 0) first = k;
      nfailed++;
    }
  if (nfailed > 0 && !failed) {
    char ranks[256] = "";
    size_t len = 0;
    int listed = 0;
    for (int k = 0; k < r->size && len < sizeof ranks; k++) {
      if (!all[k].failed) continue;
      if (listed == 8) {
        snprintf(ranks + len, sizeof ranks - len, " and %d more", nfailed - listed);
        break;
      }
      int w = snprintf(ranks + len, sizeof ranks - len, "%s%d", listed ? ", " : "", k);
      len += w > 0 ? (size_t)w : 0;
      listed++;
    }
    all[first].reason[sizeof all[first].reason - 1] = '\0';
    if (all[first].reason[0] == '\0')
      cli_rank_error(r, "stopping: rank%s %s failed", nfailed > 1 ? "s" : "", ranks);
    else if (nfailed == 1)
      cli_rank_error(r, "stopping: rank %s failed (%s)", ranks, all[first].reason);
    else
      cli_rank_error(r, "stopping: ranks %s failed (rank %d: %s)", ranks, first,
                     all[first].reason);
  }
  free(all);
  return nfailed > 0;
}

int cli_agree_status(cli_rank *r, gs_status st) {
  if (st != GS_OK) {
    const char *msg = gs_last_error();
    if (msg == NULL || *msg == '\0') msg = gs_strerror(st);
    cli_rank_error(r, "%s", msg);
    return cli_agree(r, 1, msg);
  }
  return cli_agree(r, 0, NULL);
}

int cli_agree_equal(cli_rank *r, const int64_t *vals, const char *const *names, int n) {
  int64_t *all = calloc((size_t)r->size * (size_t)n, sizeof *all);
  if (all == NULL) cli_rank_abort(r, "out of memory for an agreement of %d ranks", r->size);
  if (exchange(r, vals, all, (size_t)n * sizeof *vals) != GS_OK) agree_failed(r);
  /* Every rank finds the same first difference and says it. */
  for (int i = 0; i < n; i++)
    for (int k = 1; k < r->size; k++)
      if (all[(size_t)k * (size_t)n + (size_t)i] != all[i]) {
        cli_rank_error(r, "stopping: the ranks differ in %s: rank 0 has %lld, rank %d has %lld",
                       names[i], (long long)all[i], k,
                       (long long)all[(size_t)k * (size_t)n + (size_t)i]);
        free(all);
        return 1;
      }
  free(all);
  return 0;
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
  if (cli_agree(r, startup_rc != 0, startup_reason)) {
    gs_finalize();
    return startup_rc ? startup_rc : 1;
  }
  gs_status st = gs_comm_create(MPI_COMM_WORLD, &r->comm);
  if (st != GS_OK) {
    /* gs_comm_create fails on every rank together. A setting from the
     * environment that is malformed, or differs between ranks, is bad
     * input (2); anything else a failure (1). */
    int usage = st == GS_ERR_PARSE || st == GS_ERR_MISMATCH;
    if (usage) cli_rank_usage_error(r, "%s", gs_last_error());
    else cli_rank_error(r, "%s", gs_last_error());
    r->comm = NULL;
    gs_finalize();
    return usage ? 2 : 1;
  }
  if (flags & CLI_RANK_BLAS) {
    /* One compute thread per rank, as the ranks share the machine's cores:
     * OpenBLAS's default of one thread per core makes N ranks run N x cores
     * threads that spin against each other (measured: half the throughput
     * of 4 ranks on 2 cores). GRADSYNC_BLAS_THREADS overrides it. */
    const char *bt = getenv("GRADSYNC_BLAS_THREADS");
    int n = 1;
    if (bt && *bt && cli_parse_int(bt, 1, 1024, &n)) {
      cli_rank_error(r, "GRADSYNC_BLAS_THREADS=%s: expected an integer from 1 to 1024; "
                     "using 1", bt);
      n = 1;
    }
    openblas_set_num_threads(n);
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
  if (path == NULL || *path == '\0') return gs_error(GS_ERR_IO, "%s: empty file name", what);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == NULL) snprintf(dir, sizeof dir, ".");
  else if (slash == dir) dir[1] = '\0';
  else *slash = '\0';
  struct stat sb;
  if (stat(dir, &sb) != 0)
    return gs_error(GS_ERR_IO, "%s %s: directory %s: %s", what, path, dir, strerror(errno));
  if (!S_ISDIR(sb.st_mode))
    return gs_error(GS_ERR_IO, "%s %s: %s is not a directory", what, path, dir);
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
    return gs_error(GS_ERR_IO, "%s %s: is a directory", what, path);
  /* Permissions alone do not tell (root passes every access() check, a
   * read-only or special file system refuses what they allow): open the
   * file for writing, without truncating it, and remove it again if this
   * created it. */
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  int created = 0;
  if (fd < 0 && errno == ENOENT) {
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    created = fd >= 0;
    /* Ranks probing one path together: another one created it in between,
     * in the same directory. */
    if (fd < 0 && errno == EEXIST) fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) return GS_OK; /* ... and removed it again */
  }
  if (fd < 0)
    return gs_error(GS_ERR_IO, "%s %s: cannot write there: %s", what, path, strerror(errno));
  close(fd);
  if (created) unlink(path);
  return GS_OK;
}
