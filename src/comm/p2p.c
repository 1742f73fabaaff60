/* Point-to-point helpers for the algorithms. */
#include <limits.h>
#include <time.h>

#include "comm_internal.h"

/* Waiting without burning a core. Open MPI's MPI_Wait polls at full speed,
 * so every rank's progress thread would take a whole core for as long as a
 * collective runs; with several ranks per host (and compute on the same
 * cores) that takes compute time away. comm_waitall polls at full speed
 * for the first WAIT_SPIN_S, long enough for the round trips of small
 * messages (a nap costs at least the timer slack, 50 us, per round: polling
 * for only 50 us made 4 KB allreduces on 4 emulated nodes twice as slow),
 * then sleeps between polls: at most WAIT_SLEEP_MAX_NS, short next to the
 * milliseconds a large segment spends on the wire while socket buffers keep
 * the link busy. */
#define WAIT_SPIN_S 1e-3
#define WAIT_SLEEP_MIN_NS 20000
#define WAIT_SLEEP_MAX_NS 100000

gs_status comm_waitall(const coll_group *g, int n, MPI_Request *reqs,
                       const char *what) {
  double t0 = gs_now();
  long nap = WAIT_SLEEP_MIN_NS;
  for (;;) {
    int done = 0;
    int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return comm_mpi_error(g, what, rc);
    if (done) {
      comm_progress(g);
      return GS_OK;
    }
    if (gs_now() - t0 < WAIT_SPIN_S) continue;
    struct timespec ts = {0, nap};
    nanosleep(&ts, NULL);
    if (nap < WAIT_SLEEP_MAX_NS) nap *= 2;
  }
}

/* Messages travel in pieces of at most P2P_PIECE bytes, all posted at once.
 * One large MPI message crawls over TCP when traffic flows both ways at
 * once: measured on the emulated 1 Gbit/s cluster, two 32 MB exchanges took
 * 1.5x as long as one 64 MB exchange, while 1 MB pieces in flight together
 * keep the link full (as the pipelined ring does). Pieces also keep every
 * count within MPI's int. */
#define P2P_PIECE ((size_t)1 << 20)

static int pieces(size_t bytes) {
  return bytes == 0 ? 1 : (int)((bytes + P2P_PIECE - 1) / P2P_PIECE);
}

/* Both sides agree on the number of pieces since it depends only on the
 * message size. */
gs_status p2p_sendrecv(const coll_group *g, const void *sbuf, size_t sbytes,
                       int dst, void *rbuf, size_t rbytes, int src, int tag) {
  int ns = dst == MPI_PROC_NULL ? 0 : pieces(sbytes);
  int nr = src == MPI_PROC_NULL ? 0 : pieces(rbytes);
  if (ns + nr == 0) return GS_OK;
  MPI_Request *req = gs_malloc(sizeof(MPI_Request) * (size_t)(ns + nr));
  if (req == NULL) return GS_ERR_NOMEM;
  int n = 0, rc = MPI_SUCCESS;
  for (int i = 0; i < nr && rc == MPI_SUCCESS; i++) {
    size_t off = (size_t)i * P2P_PIECE;
    int len = (int)GS_MIN(P2P_PIECE, rbytes - GS_MIN(off, rbytes));
    rc = MPI_Irecv((char *)rbuf + off, len, MPI_BYTE, src, tag, g->mpi, &req[n++]);
  }
  for (int i = 0; i < ns && rc == MPI_SUCCESS; i++) {
    size_t off = (size_t)i * P2P_PIECE;
    int len = (int)GS_MIN(P2P_PIECE, sbytes - GS_MIN(off, sbytes));
    rc = MPI_Isend((const char *)sbuf + off, len, MPI_BYTE, dst, tag, g->mpi,
                   &req[n++]);
  }
  gs_status st = rc == MPI_SUCCESS ? comm_waitall(g, n, req, "p2p exchange")
                                   : comm_mpi_error(g, "p2p exchange", rc);
  gs_free(req);
  return st;
}
