/* Point-to-point helpers for the algorithms. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

#include "comm_internal.h"

/* Waiting without burning a core. Open MPI's MPI_Wait polls at full speed,
 * so every rank's progress thread would take a whole core for as long as a
 * collective runs; with several ranks per host (and compute on the same
 * cores) that takes compute time away. comm_waitall:
 * - polls for the first WAIT_SPIN_S, long enough for the round trips of
 *   small messages (polling for only 50 us made 4 KB allreduces on 4
 *   emulated nodes twice as slow), yielding the core between polls: where
 *   threads outnumber cores (compute beside the progress thread, or the
 *   emulated cluster's ranks) a runnable thread gets the core at once
 *   instead of at the end of the spinner's time slice, and on an idle core
 *   sched_yield returns at once (Open MPI's yield_when_idle does the same
 *   when oversubscribed). A/B on 8 emulated nodes: K-FAC spd on the resnet
 *   0.81-0.91 -> 0.75-0.85 s per iteration (dkfac's 0.88-0.91 ->
 *   0.87-0.90); gradsync.torch's CNN on 4 nodes at 1 Gbit/s, auto against
 *   DDP in the same processes, 0.90-1.06x -> 0.99-1.16x (noisy); allreduce
 *   alone unchanged within the noise from 4 KB to 16 MB;
 * - polls for only WAIT_SPIN_AFTER_LONG_S when this thread's last wait that
 *   did wait took over WAIT_LONG_S: the segments of a large message arrive
 *   milliseconds apart, and a full spin before each took about a quarter of the
 *   CPU time of a 1 MB allreduce on 4 nodes at 1 Gbit/s (bench's cpu column);
 * - then sleeps between polls, the nap growing with the time already waited
 *   (1/WAIT_NAP_SHARE of it) from WAIT_SLEEP_MIN_NS to WAIT_SLEEP_MAX_NS, so
 *   a long wait wakes less often; the cap stays short because Open MPI's
 *   rendezvous handshakes progress only while some rank polls (a 2 ms cap
 *   made 1 MB allreduces at 100 Mbit/s 9% slower);
 * - sets the thread's timer slack to WAIT_TIMER_SLACK_NS once: with Linux's
 *   default 50 us a 20 us nap sleeps 70 us or more. */
#define WAIT_SPIN_S 1e-3
#define WAIT_SPIN_AFTER_LONG_S 1e-4
#define WAIT_LONG_S 2e-3
#define WAIT_SLEEP_MIN_NS 20000
#define WAIT_SLEEP_MAX_NS 200000
#define WAIT_NAP_SHARE 32
#define WAIT_TIMER_SLACK_NS 5000UL
/* How often a long wait reads the peers' goodbyes (watchdog_leave_look):
 * on this thread, never beside it, so that one thread of the process is in
 * MPI at a time. */
#define WAIT_LEAVE_LOOK_S 0.1

gs_status comm_waitall(const coll_group *g, int n, MPI_Request *reqs,
                       const char *what) {
  static _Thread_local double last_wait;
  static _Thread_local int slack_set;
  if (!slack_set) {
    prctl(PR_SET_TIMERSLACK, WAIT_TIMER_SLACK_NS, 0, 0, 0);
    slack_set = 1;
  }
  double spin = last_wait > WAIT_LONG_S ? WAIT_SPIN_AFTER_LONG_S : WAIT_SPIN_S;
  double t0 = gs_now(), looked = t0;
  long nap = WAIT_SLEEP_MIN_NS;
  for (int first = 1;; first = 0) {
    int done = 0;
    int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return comm_mpi_error(g, what, rc);
    if (done) {
      if (!first) last_wait = gs_now() - t0; /* done at once says nothing */
      comm_progress(g);
      return GS_OK;
    }
    double now = gs_now(), waited = now - t0;
    if (g->owner != NULL && now - looked >= WAIT_LEAVE_LOOK_S) {
      watchdog_leave_look(g->owner);
      looked = now;
    }
    if (waited < spin) {
      sched_yield();
      continue;
    }
    long grow = (long)(waited * 1e9 / WAIT_NAP_SHARE);
    if (grow > nap) nap = grow < WAIT_SLEEP_MAX_NS ? grow : WAIT_SLEEP_MAX_NS;
    struct timespec ts = {0, nap};
    nanosleep(&ts, NULL);
  }
}

/* ---- Bounds of large messages -------------------------------------------- */

#define WINDOW_BYTES_DEFAULT ((size_t)64 << 20)
#define MPI_MAX_BYTES_DEFAULT ((size_t)1 << 30)

static size_t window_bytes = WINDOW_BYTES_DEFAULT;
static size_t mpi_max_bytes = MPI_MAX_BYTES_DEFAULT;
static pthread_once_t bounds_once = PTHREAD_ONCE_INIT;

/* GRADSYNC_TEST_WINDOW_BYTES: a test-only knob (see comm_internal.h). A value
 * that does not parse, or below 64, leaves the defaults. */
static void bounds_init(void) {
  const char *s = getenv("GRADSYNC_TEST_WINDOW_BYTES");
  if (s == NULL || *s == '\0') return;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < 64 || v > MPI_MAX_BYTES_DEFAULT) return;
  window_bytes = (size_t)v;
  mpi_max_bytes = (size_t)v;
}

size_t comm_window_bytes(void) {
  pthread_once(&bounds_once, bounds_init);
  return window_bytes;
}

size_t comm_mpi_max_bytes(void) {
  pthread_once(&bounds_once, bounds_init);
  return mpi_max_bytes;
}

size_t comm_mpi_v_max_bytes(void) {
  pthread_once(&bounds_once, bounds_init);
  return mpi_max_bytes < MPI_MAX_BYTES_DEFAULT ? mpi_max_bytes : (size_t)INT_MAX;
}

/* ---- Point-to-point exchange ---------------------------------------------- */

/* Messages travel in pieces of at most P2P_PIECE bytes, posted together in
 * batches of P2P_BATCH pieces each way.
 * One large MPI message crawls over TCP when traffic flows both ways at
 * once: measured on the emulated 1 Gbit/s cluster, two 32 MB exchanges took
 * 1.5x as long as one 64 MB exchange, while 1 MB pieces in flight together
 * keep the link full (as the pipelined ring does). Pieces also keep every
 * count within MPI's int, and batches keep the number of requests in flight
 * (and their memory) bounded however large the message is. */
#define P2P_PIECE ((size_t)1 << 20)
#define P2P_BATCH 64

static size_t pieces(size_t bytes) {
  return bytes == 0 ? 1 : (bytes + P2P_PIECE - 1) / P2P_PIECE;
}

/* Both sides agree on the number of pieces since it depends only on the
 * message size; batch k of one side's sends meets batch k of the other's
 * receives, and every rank posts a whole batch before waiting on it. */
gs_status p2p_sendrecv(const coll_group *g, const void *sbuf, size_t sbytes,
                       int dst, void *rbuf, size_t rbytes, int src, int tag) {
  return p2p_sendrecv_n(g, 1, &sbuf, &sbytes, &dst, &rbuf, &rbytes, &src, tag);
}

/* Batch b posts, for every pair, its pieces [b * per, (b + 1) * per) each
 * way, with per = P2P_BATCH / n (at least one), so a batch holds at most
 * about P2P_BATCH pieces each way whatever n (one pair: P2P_BATCH). */
gs_status p2p_sendrecv_n(const coll_group *g, int n, const void *const *sbuf,
                         const size_t *sbytes, const int *dst, void *const *rbuf,
                         const size_t *rbytes, const int *src, int tag) {
  if (n < 1 || n > P2P_MAX_PAIRS)
    return gs_error(GS_ERR_INTERNAL, "p2p exchange: %d pairs (1-%d)", n, P2P_MAX_PAIRS);
  size_t per = P2P_BATCH / (size_t)n, most = 0;
  if (per == 0) per = 1;
  size_t ns[P2P_MAX_PAIRS], nr[P2P_MAX_PAIRS];
  for (int i = 0; i < n; i++) {
    ns[i] = dst[i] == MPI_PROC_NULL ? 0 : pieces(sbytes[i]);
    nr[i] = src[i] == MPI_PROC_NULL ? 0 : pieces(rbytes[i]);
    most = GS_MAX(most, GS_MAX(ns[i], nr[i]));
  }
  MPI_Request req[2 * (P2P_BATCH + P2P_MAX_PAIRS)];
  for (size_t b = 0; b < most; b += per) {
    int k = 0, rc = MPI_SUCCESS;
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++)
      for (size_t j = b; j < GS_MIN(nr[i], b + per) && rc == MPI_SUCCESS; j++) {
        size_t off = j * P2P_PIECE;
        int len = (int)GS_MIN(P2P_PIECE, rbytes[i] - GS_MIN(off, rbytes[i]));
        rc = MPI_Irecv((char *)rbuf[i] + off, len, MPI_BYTE, src[i], tag, g->mpi, &req[k++]);
      }
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++)
      for (size_t j = b; j < GS_MIN(ns[i], b + per) && rc == MPI_SUCCESS; j++) {
        size_t off = j * P2P_PIECE;
        int len = (int)GS_MIN(P2P_PIECE, sbytes[i] - GS_MIN(off, sbytes[i]));
        rc = MPI_Isend((const char *)sbuf[i] + off, len, MPI_BYTE, dst[i], tag, g->mpi,
                       &req[k++]);
      }
    /* Requests posted before a failed call are abandoned with the failed
     * communicator (it refuses further work). */
    if (rc != MPI_SUCCESS) return comm_mpi_error(g, "p2p exchange", rc);
    GS_CHECK(comm_waitall(g, k, req, "p2p exchange"));
  }
  return GS_OK;
}
