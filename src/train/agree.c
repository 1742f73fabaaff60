/* Agreement between the ranks (agree.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "agree.h"

/* What a rank says at an agreement point: whether it failed, and why in
 * short. A fixed size, so one allgather carries every rank's record. */
typedef struct agree_rec {
  char failed;
  char reason[127];
} agree_rec;

void train_rank_verror(const train_ranks *r, const char *fmt, va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (r->size > 0)
    fprintf(stderr, "gradsync %s: rank %d: %s\n", r->verb, r->rank, msg);
  else
    fprintf(stderr, "gradsync %s: %s\n", r->verb, msg);
  fflush(stderr);
}

void train_rank_error(const train_ranks *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  train_rank_verror(r, fmt, ap);
  va_end(ap);
}

_Noreturn void train_rank_vabort(const train_ranks *r, const char *fmt, va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (r->comm) gs_comm_abort(r->comm, 1, "%s: %s", r->verb, msg);
  fprintf(stderr, "gradsync: rank %d: fatal: %s: %s\n", r->rank, r->verb, msg);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1); /* if MPI_Abort returns: see gs_comm_abort */
}

_Noreturn void train_rank_abort(const train_ranks *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  train_rank_vabort(r, fmt, ap);
}

/* Every rank's `bytes` bytes from `mine` into all[rank]. Before the
 * communicator exists no other thread can be inside MPI, so MPI_COMM_WORLD
 * serves from this thread; afterwards the gs_comm's progress thread makes
 * the call. */
static gs_status exchange(const train_ranks *r, const void *mine, void *all, size_t bytes) {
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
static _Noreturn void agree_failed(const train_ranks *r) {
  train_rank_abort(r, "cannot agree with the other ranks: %s", gs_last_error());
}

int train_agree(const train_ranks *r, int failed, const char *reason) {
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
  if (all == NULL) train_rank_abort(r, "out of memory for an agreement of %d ranks", r->size);
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
      train_rank_error(r, "stopping: rank%s %s failed", nfailed > 1 ? "s" : "", ranks);
    else if (nfailed == 1)
      train_rank_error(r, "stopping: rank %s failed (%s)", ranks, all[first].reason);
    else
      train_rank_error(r, "stopping: ranks %s failed (rank %d: %s)", ranks, first,
                       all[first].reason);
  }
  free(all);
  return nfailed > 0;
}

int train_agree_status(const train_ranks *r, gs_status st) {
  if (st != GS_OK) {
    const char *msg = gs_last_error();
    if (msg == NULL || *msg == '\0') msg = gs_strerror(st);
    train_rank_error(r, "%s", msg);
    return train_agree(r, 1, msg);
  }
  return train_agree(r, 0, NULL);
}

int train_agree_equal(const train_ranks *r, const int64_t *vals, const char *const *names,
                      int n) {
  int64_t *all = calloc((size_t)r->size * (size_t)n, sizeof *all);
  if (all == NULL) train_rank_abort(r, "out of memory for an agreement of %d ranks", r->size);
  if (exchange(r, vals, all, (size_t)n * sizeof *vals) != GS_OK) agree_failed(r);
  /* Every rank finds the same first difference and says it. */
  for (int i = 0; i < n; i++)
    for (int k = 1; k < r->size; k++)
      if (all[(size_t)k * (size_t)n + (size_t)i] != all[i]) {
        train_rank_error(r,
                         "stopping: the ranks differ in %s: rank 0 has %lld, rank %d has %lld",
                         names[i], (long long)all[i], k,
                         (long long)all[(size_t)k * (size_t)n + (size_t)i]);
        free(all);
        return 1;
      }
  free(all);
  return 0;
}

gs_status train_probe_dir(const char *dir, const char *what) {
  char probe[4200];
  snprintf(probe, sizeof probe, "%s/.gradsync-probe-%ld", dir, (long)getpid());
  int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0)
    return gs_error(GS_ERR_IO, "%s: cannot create a file in %s: %s", what, dir,
                    strerror(errno));
  int werr = write(fd, "x", 1) != 1 ? errno : 0;
  close(fd);
  unlink(probe);
  if (werr)
    return gs_error(GS_ERR_IO, "%s: cannot write a file in %s: %s", what, dir, strerror(werr));
  return GS_OK;
}

gs_status train_check_writable(const char *path, const char *what) {
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
  if (access(dir, W_OK | X_OK) != 0)
    return gs_error(GS_ERR_IO, "%s %s: cannot create files in %s: %s", what, path, dir,
                    strerror(errno));
  if (stat(path, &sb) == 0 && (S_ISDIR(sb.st_mode) || access(path, W_OK) != 0))
    return gs_error(GS_ERR_IO, "%s %s: %s", what, path,
                    S_ISDIR(sb.st_mode) ? "is a directory" : "cannot be overwritten");
  /* access() answers yes to root for any directory not on a read-only file
   * system: only creating a file tells. */
  char label[4200];
  snprintf(label, sizeof label, "%s %s", what, path);
  return train_probe_dir(dir, label);
}
