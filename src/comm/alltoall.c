/*
 * All-to-all(v) by pairwise exchange: in step k every rank sends its block
 * for rank r+k and receives from rank r-k, so each step is a permutation and
 * no link carries two messages at once. (p-1) alpha + (p-1)/p n beta.
 */
#include <string.h>

#include "comm_internal.h"

gs_status alltoallv_pairwise(gs_comm *c, const coll_group *g,
                             const void *sendbuf, const size_t *scounts,
                             const size_t *sdispls, void *recvbuf,
                             const size_t *rcounts, const size_t *rdispls,
                             size_t esize) {
  (void)c;
  int p = g->size, r = g->rank;
  const char *s = sendbuf;
  char *d = recvbuf;
  if (scounts[r] != rcounts[r])
    return gs_error(GS_ERR_INVALID_ARG, "alltoallv on rank %d: sends %zu "
                    "elements to itself but expects %zu", r, scounts[r],
                    rcounts[r]);
  if (scounts[r] > 0)
    memmove(d + rdispls[r] * esize, s + sdispls[r] * esize, scounts[r] * esize);
  for (int k = 1; k < p; k++) {
    int dst = (r + k) % p, src = (r - k + p) % p;
    GS_CHECK(p2p_sendrecv(g, s + sdispls[dst] * esize, scounts[dst] * esize, dst,
                          d + rdispls[src] * esize, rcounts[src] * esize, src,
                          TAG_A2A));
  }
  return GS_OK;
}
