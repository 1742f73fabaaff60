/*
 * Dissemination barrier (Hensgen, Finkel & Manber 1988): in round k each
 * rank signals rank r+2^k and waits for rank r-2^k; after ceil(lg p) rounds
 * every rank has heard, directly or not, from every other.
 */
#include "comm_internal.h"

gs_status barrier_dissemination(const coll_group *g) {
  int p = g->size, r = g->rank;
  char token = 0, got;
  for (int k = 1; k < p; k <<= 1)
    GS_CHECK(p2p_sendrecv(g, &token, 1, (r + k) % p, &got, 1, (r - k + p) % p,
                          TAG_BARRIER));
  return GS_OK;
}
