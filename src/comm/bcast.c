/*
 * Broadcast. The pipelined chain sends the buffer in segments down the chain
 * root -> root+1 -> ... so every link carries each byte once and all links
 * are busy at the same time: (p-2+s)(alpha + n/s beta) for s segments,
 * bandwidth-optimal for large messages. The binomial tree takes lg p rounds
 * of the whole buffer, better for small ones.
 */
#include "comm_internal.h"

gs_status bcast_pipeline(gs_comm *c, const coll_group *g, void *buf,
                         size_t bytes, int root) {
  int p = g->size;
  if (p == 1 || bytes == 0) return GS_OK;
  int vr = (g->rank - root + p) % p;
  int prev = vr > 0 ? (g->rank - 1 + p) % p : MPI_PROC_NULL;
  int next = vr < p - 1 ? (g->rank + 1) % p : MPI_PROC_NULL;
  size_t seg = GS_MIN(c->segment_bytes, (size_t)1 << 30);
  size_t nseg = (bytes + seg - 1) / seg;
  MPI_Request *req = gs_malloc(sizeof(MPI_Request) * 2 * nseg);
  if (req == NULL) return GS_ERR_NOMEM;
  MPI_Request *rreq = req, *sreq = req + nseg;
  for (size_t i = 0; i < 2 * nseg; i++) req[i] = MPI_REQUEST_NULL;
  gs_status st = GS_OK;
  char *b = buf;
  for (size_t i = 0; i < nseg && prev != MPI_PROC_NULL && st == GS_OK; i++) {
    int n = (int)GS_MIN(seg, bytes - i * seg);
    int rc = MPI_Irecv(b + i * seg, n, MPI_BYTE, prev, TAG_BCAST, g->mpi, &rreq[i]);
    if (rc != MPI_SUCCESS) st = comm_mpi_error(g, "MPI_Irecv (bcast)", rc);
  }
  for (size_t i = 0; i < nseg && st == GS_OK; i++) {
    int n = (int)GS_MIN(seg, bytes - i * seg);
    st = comm_waitall(g, 1, &rreq[i], "bcast receive");
    if (st != GS_OK) break;
    int rc = next != MPI_PROC_NULL ? MPI_Isend(b + i * seg, n, MPI_BYTE, next, TAG_BCAST,
                                               g->mpi, &sreq[i])
                                   : MPI_SUCCESS;
    if (rc != MPI_SUCCESS) st = comm_mpi_error(g, "bcast segment", rc);
  }
  if (st == GS_OK) st = comm_waitall(g, (int)nseg, sreq, "bcast sends");
  gs_free(req);
  return st;
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
