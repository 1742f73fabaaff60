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

#include "gradsync/train.h"
#include "gs_internal.h"
#include "train_internal.h"

/* The reason a failing rank gives the others: its first line, at most this
 * long (the failing rank prints the whole). */
enum { REASON_MAX = 126 };

void gs_train_rank_verror(const gs_train_ranks *r, const char *fmt, va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (r->size > 0)
    fprintf(stderr, "gradsync %s: rank %d: %s\n", r->job, r->rank, msg);
  else
    fprintf(stderr, "gradsync %s: %s\n", r->job, msg);
  fflush(stderr);
}

void gs_train_rank_error(const gs_train_ranks *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gs_train_rank_verror(r, fmt, ap);
  va_end(ap);
}

_Noreturn void gs_train_rank_vabort(const gs_train_ranks *r, const char *fmt, va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (r->comm) gs_comm_abort(r->comm, 1, "%s: %s", r->job, msg);
  fprintf(stderr, "gradsync: rank %d: fatal: %s: %s\n", r->rank, r->job, msg);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1); /* if MPI_Abort returns: see gs_comm_abort */
}

_Noreturn void gs_train_rank_abort(const gs_train_ranks *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  gs_train_rank_vabort(r, fmt, ap);
}

/* Every rank's status, reason and `bytes` bytes of values, through
 * gs_agree. Before the communicator exists no other thread can be inside
 * MPI, so MPI_COMM_WORLD serves from this thread; afterwards the gs_comm's
 * progress thread makes the call. */
static gs_status exchange(const gs_train_ranks *r, int failed, const char *reason,
                          const void *vals, size_t bytes, gs_agreement *ag) {
  return gs_agree(r->comm, MPI_COMM_WORLD, "agreement",
                  failed ? GS_ERR_STATE : GS_OK, reason, vals, bytes, ag);
}

/* The agreement's own collective failed: the communicator is broken (a
 * collective failed inside it), so no collective can tell the others, who
 * may be waiting in one; ending the job now beats their timeout. */
static _Noreturn void agree_failed(const gs_train_ranks *r) {
  gs_train_rank_abort(r, "cannot agree with the other ranks: %s", gs_last_error());
}

/* The first line of reason, shortened to what a vote carries: the failing
 * rank prints the whole. */
static void short_reason(char *why, const char *reason) {
  why[0] = '\0';
  if (reason == NULL || *reason == '\0') return;
  size_t n = strcspn(reason, "\n"), cap = REASON_MAX;
  if (n > cap) {
    memcpy(why, reason, cap - 3);
    memcpy(why + cap - 3, "...", 3);
    why[cap] = '\0';
  } else {
    memcpy(why, reason, n);
    why[n] = '\0';
  }
}

/* What a failing rank adds to its vote: its status and a hash (FNV-1a) of
 * its whole message, so that the ranks can tell one failure said by all
 * from different ones whose first lines agree. */
typedef struct {
  int64_t status;
  uint64_t hash;
} outcome;

static uint64_t message_hash(const char *s) {
  return gs_fnv1a_str(GS_FNV1A_BASIS, s);
}

/* Whether every rank failed with one status and one whole message. */
static int failed_alike(const gs_agreement *all) {
  const outcome *o = all->payloads;
  if (all->failed != all->size || o == NULL) return 0;
  for (int k = 1; k < all->size; k++)
    if (o[k].status != o[0].status || o[k].hash != o[0].hash) return 0;
  return 1;
}

/* Says the outcome of an agreement in which some rank failed. mine: this
 * rank's whole message to say (NULL when it succeeded, or failed and has
 * said it already). A failure that every rank had alike is said once, by
 * rank 0 ("... (on every rank)"); otherwise each failed rank says its own
 * message and each other rank which ranks failed. */
static void say_outcome(const gs_train_ranks *r, const gs_agreement *all, int failed,
                        const char *mine, int usage) {
  if (failed) {
    if (mine == NULL) return;
    if (!failed_alike(all)) {
      gs_train_rank_error(r, "%s", mine);
    } else if (r->rank == 0) {
      gs_train_ranks whole = *r;
      whole.size = 0; /* no rank prefix: it is every rank's */
      gs_train_rank_error(&whole, "%s%s%s", mine, all->size > 1 ? " (on every rank)" : "",
                          usage && r->usage_note ? r->usage_note : "");
    }
    return;
  }
  char ranks[256] = "";
  size_t len = 0;
  int listed = 0;
  for (int k = 0; k < all->size && len < sizeof ranks; k++) {
    if (all->votes[k].status == GS_OK) continue;
    if (listed == 8) {
      snprintf(ranks + len, sizeof ranks - len, " and %d more", all->failed - listed);
      break;
    }
    int w = snprintf(ranks + len, sizeof ranks - len, "%s%d", listed ? ", " : "", k);
    len += w > 0 ? (size_t)w : 0;
    listed++;
  }
  const char *first_reason = all->votes[all->first].message;
  if (first_reason[0] == '\0')
    gs_train_rank_error(r, "stopping: rank%s %s failed", all->failed > 1 ? "s" : "", ranks);
  else if (all->failed == 1)
    gs_train_rank_error(r, "stopping: rank %s failed (%s)", ranks, first_reason);
  else
    gs_train_rank_error(r, "stopping: ranks %s failed (rank %d: %s)", ranks, all->first,
                        first_reason);
}

/* The agreement behind gs_train_agree and gs_train_agree_outcome. A failed
 * rank gives its status st and whole message msg; said: it has printed msg
 * already. Returns 0 when no rank failed; 2 when every rank failed alike
 * with a status of bad input (GS_ERR_INVALID_ARG, GS_ERR_PARSE); else 1. */
static int agree_outcome(const gs_train_ranks *r, int failed, gs_status st, const char *msg,
                         int said, int may_note) {
  char why[REASON_MAX + 1];
  short_reason(why, failed ? msg : NULL);
  outcome me = {failed ? (int64_t)st : 0, failed ? message_hash(msg) : 0};
  gs_agreement all;
  if (exchange(r, failed, why, &me, sizeof me, &all) != GS_OK) {
    if (failed && !said && msg && *msg) gs_train_rank_error(r, "%s", msg);
    agree_failed(r);
  }
  int rc = 0;
  if (all.failed > 0) {
    const outcome *o = all.payloads;
    rc = failed_alike(&all) &&
                 (o[0].status == GS_ERR_INVALID_ARG || o[0].status == GS_ERR_PARSE)
             ? 2 : 1;
    say_outcome(r, &all, failed, said ? NULL : msg, may_note && rc == 2);
  }
  gs_agreement_free(&all);
  return rc;
}

int gs_train_agree(const gs_train_ranks *r, int failed, const char *reason) {
  return agree_outcome(r, failed, GS_ERR_STATE, reason ? reason : "", 1, 0) != 0;
}

static int agree_status(const gs_train_ranks *r, gs_status st, int may_note) {
  const char *msg = st != GS_OK ? gs_last_error() : NULL;
  if (st != GS_OK && (msg == NULL || *msg == '\0')) msg = gs_strerror(st);
  return agree_outcome(r, st != GS_OK, st, msg, 0, may_note);
}

int gs_train_agree_outcome(const gs_train_ranks *r, gs_status st) {
  return agree_status(r, st, 1);
}

int gs_train_agree_status(const gs_train_ranks *r, gs_status st) {
  return agree_status(r, st, 0) != 0;
}

int gs_train_agree_equal(const gs_train_ranks *r, const int64_t *vals, const char *const *names,
                      int n) {
  gs_agreement ag;
  if (exchange(r, 0, NULL, vals, (size_t)n * sizeof *vals, &ag) != GS_OK) agree_failed(r);
  const int64_t *all = ag.payloads;
  /* Every rank finds the same first difference and says it. */
  for (int i = 0; i < n; i++)
    for (int k = 1; k < ag.size; k++)
      if (all[(size_t)k * (size_t)n + (size_t)i] != all[i]) {
        gs_train_rank_error(r,
                         "stopping: the ranks differ in %s: rank 0 has %lld, rank %d has %lld",
                         names[i], (long long)all[i], k,
                         (long long)all[(size_t)k * (size_t)n + (size_t)i]);
        gs_agreement_free(&ag);
        return 1;
      }
  gs_agreement_free(&ag);
  return 0;
}

gs_status gs_train_probe_dir(const char *dir, const char *what) {
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

gs_status gs_train_check_writable(const char *path, const char *what) {
  /* "" is no file (until 2026-12-06 it passed as one in ".", and the
   * write failed after the work, or went to ".wfbp" and the like). */
  if (path[0] == '\0')
    return gs_error(GS_ERR_INVALID_ARG, "%s needs a file name, not an empty one", what);
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
  return gs_train_probe_dir(dir, label);
}
