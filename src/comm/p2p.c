/* Point-to-point helpers for the algorithms. */
#include <limits.h>

#include "comm_internal.h"

#define PIECE ((size_t)1 << 30)

static int pieces(size_t bytes) {
  return bytes == 0 ? 1 : (int)((bytes + PIECE - 1) / PIECE);
}

/* MPI counts are ints: a message above 1 GiB travels as several. Both sides
 * agree on the number of pieces since it depends only on the message size. */
gs_status p2p_sendrecv(const coll_group *g, const void *sbuf, size_t sbytes,
                       int dst, void *rbuf, size_t rbytes, int src, int tag) {
  int ns = dst == MPI_PROC_NULL ? 0 : pieces(sbytes);
  int nr = src == MPI_PROC_NULL ? 0 : pieces(rbytes);
  for (int i = 0; i < ns || i < nr; i++) {
    size_t so = (size_t)i * PIECE, ro = (size_t)i * PIECE;
    int sn = i < ns ? (int)GS_MIN(PIECE, sbytes - GS_MIN(so, sbytes)) : 0;
    int rn = i < nr ? (int)GS_MIN(PIECE, rbytes - GS_MIN(ro, rbytes)) : 0;
    MPI_TRY(g, MPI_Sendrecv(i < ns ? (const char *)sbuf + so : NULL, sn, MPI_BYTE,
                            i < ns ? dst : MPI_PROC_NULL, tag,
                            i < nr ? (char *)rbuf + ro : NULL, rn, MPI_BYTE,
                            i < nr ? src : MPI_PROC_NULL, tag, g->mpi,
                            MPI_STATUS_IGNORE));
  }
  return GS_OK;
}
