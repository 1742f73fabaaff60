/*
 * Broadcast. The pipelined chain sends the buffer in segments down the chain
 * root -> root+1 -> ... so every link carries each byte once and all links
 * are busy at the same time: (p-2+s)(alpha + n/s beta) for s segments,
 * bandwidth-optimal for large messages. The binomial tree takes lg p rounds
 * of the whole buffer, better for small ones.
 */
#include "comm_internal.h"

/* Segments in flight at once: receives are posted up to BCAST_WINDOW
 * segments ahead, and a segment's send is waited for before its request slot
 * is reused, so the requests (and MPI's memory for them) stay bounded
 * however many segments the buffer has. */
#define BCAST_WINDOW 64

gs_status bcast_pipeline(gs_comm *c, const coll_group *g, void *buf,
                         size_t bytes, int root) {
  int p = g->size;
  if (p == 1 || bytes == 0) return GS_OK;
  int vr = (g->rank - root + p) % p;
  int prev = vr > 0 ? (g->rank - 1 + p) % p : MPI_PROC_NULL;
  int next = vr < p - 1 ? (g->rank + 1) % p : MPI_PROC_NULL;
  /* A segment is at most comm_mpi_max_bytes() < INT_MAX: its count fits. */
  size_t seg = GS_MAX((size_t)1, GS_MIN(c->segment_bytes, comm_mpi_max_bytes()));
  size_t nseg = (bytes + seg - 1) / seg;
  MPI_Request rreq[BCAST_WINDOW], sreq[BCAST_WINDOW];
  for (int k = 0; k < BCAST_WINDOW; k++) rreq[k] = sreq[k] = MPI_REQUEST_NULL;
  char *b = buf;
  for (size_t i = 0; i < GS_MIN(nseg, (size_t)BCAST_WINDOW) && prev != MPI_PROC_NULL;
       i++) {
    int n = (int)GS_MIN(seg, bytes - i * seg);
    int rc = MPI_Irecv(b + i * seg, n, MPI_BYTE, prev, TAG_BCAST, g->mpi, &rreq[i]);
    if (rc != MPI_SUCCESS) return comm_mpi_error(g, "MPI_Irecv (bcast)", rc);
  }
  for (size_t i = 0; i < nseg; i++) {
    size_t k = i % BCAST_WINDOW;
    int n = (int)GS_MIN(seg, bytes - i * seg);
    GS_CHECK(comm_waitall(g, 1, &rreq[k], "bcast receive"));
    if (next != MPI_PROC_NULL) {
      GS_CHECK(comm_waitall(g, 1, &sreq[k], "bcast send"));
      int rc = MPI_Isend(b + i * seg, n, MPI_BYTE, next, TAG_BCAST, g->mpi, &sreq[k]);
      if (rc != MPI_SUCCESS) return comm_mpi_error(g, "MPI_Isend (bcast)", rc);
    }
    size_t j = i + BCAST_WINDOW;
    if (j < nseg && prev != MPI_PROC_NULL) {
      int nj = (int)GS_MIN(seg, bytes - j * seg);
      int rc = MPI_Irecv(b + j * seg, nj, MPI_BYTE, prev, TAG_BCAST, g->mpi, &rreq[k]);
      if (rc != MPI_SUCCESS) return comm_mpi_error(g, "MPI_Irecv (bcast)", rc);
    }
  }
  /* Requests left after an error are abandoned with the failed communicator
   * (it refuses further work). */
  return comm_waitall(g, BCAST_WINDOW, sreq, "bcast sends");
}

gs_status bcast_binomial(gs_comm *c, const coll_group *g, void *buf,
                         size_t bytes, int root) {
  (void)c;
  int p = g->size;
  if (p == 1 || bytes == 0) return GS_OK;
  int vr = (g->rank - root + p) % p;
  int mask = 1;
  /* Receive from the parent: the rank that differs in the lowest set bit. */
  while (mask < p) {
    if (vr & mask) {
      int src = (g->rank - mask + p) % p;
      GS_CHECK(p2p_sendrecv(g, NULL, 0, MPI_PROC_NULL, buf, bytes, src, TAG_BCAST));
      break;
    }
    mask <<= 1;
  }
  /* Send to the children below that bit. */
  mask >>= 1;
  while (mask > 0) {
    if (vr + mask < p) {
      int dst = (g->rank + mask) % p;
      GS_CHECK(p2p_sendrecv(g, buf, bytes, dst, NULL, 0, MPI_PROC_NULL, TAG_BCAST));
    }
    mask >>= 1;
  }
  return GS_OK;
}
