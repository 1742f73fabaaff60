/*
 * Recursive-doubling allreduce (Thakur et al. 2005, Sec. 4.4): lg p rounds,
 * each exchanging the whole vector with the partner whose rank differs in
 * one bit. Latency-optimal, for small messages.
 *
 * Non-power-of-two p: of the first 2*rem ranks (rem = p - 2^floor(lg p)),
 * each even rank folds its vector into the odd rank above it and sits out,
 * receiving the result at the end.
 *
 * Every rank computes the full result itself, so both partners apply the
 * operator in the same operand order (lower rank first) to end with
 * bit-identical values even for min/max with NaNs.
 */
#include <string.h>

#include "comm_internal.h"

int fold_newrank(int rank, int rem) {
  if (rank < 2 * rem) return rank % 2 ? rank / 2 : -1;
  return rank - rem;
}

int fold_realrank(int newrank, int rem) {
  return newrank < rem ? newrank * 2 + 1 : newrank + rem;
}

gs_status fold_in(const coll_group *g, void *buf, void *tmp, size_t count,
                  gs_dtype dtype, gs_redop op, int rem, int tag) {
  int r = g->rank;
  size_t bytes = count * gs_dtype_size(dtype);
  if (r >= 2 * rem) return GS_OK;
  if (r % 2 == 0)
    return p2p_sendrecv(g, buf, bytes, r + 1, NULL, 0, MPI_PROC_NULL, tag);
  GS_CHECK(p2p_sendrecv(g, NULL, 0, MPI_PROC_NULL, tmp, bytes, r - 1, tag));
  /* The even rank is the lower one: its operand comes first. */
  GS_CHECK(gs_reduce_local(tmp, buf, count, dtype, op));
  memcpy(buf, tmp, bytes);
  return GS_OK;
}

gs_status fold_out(const coll_group *g, void *buf, size_t bytes, int rem,
                   int tag) {
  int r = g->rank;
  if (r >= 2 * rem) return GS_OK;
  if (r % 2 == 1)
    return p2p_sendrecv(g, buf, bytes, r - 1, NULL, 0, MPI_PROC_NULL, tag);
  return p2p_sendrecv(g, NULL, 0, MPI_PROC_NULL, buf, bytes, r + 1, tag);
}

/* One window of the vector: the whole algorithm on `count` elements. */
static gs_status rd_window(const coll_group *g, char *buf, void *tmp, size_t count,
                           gs_dtype dtype, gs_redop op) {
  int p = g->size, r = g->rank;
  size_t bytes = count * gs_dtype_size(dtype);
  int q = 1;
  while (q * 2 <= p) q *= 2;
  int rem = p - q;
  int nr = fold_newrank(r, rem);
  GS_CHECK(fold_in(g, buf, tmp, count, dtype, op, rem, TAG_RD));
  if (nr >= 0) {
    for (int mask = 1; mask < q; mask <<= 1) {
      int partner = fold_realrank(nr ^ mask, rem);
      GS_CHECK(p2p_sendrecv(g, buf, bytes, partner, tmp, bytes, partner, TAG_RD));
      if (r < partner) {
        GS_CHECK(gs_reduce_local(buf, tmp, count, dtype, op));
      } else {
        GS_CHECK(gs_reduce_local(tmp, buf, count, dtype, op));
        memcpy(buf, tmp, bytes);
      }
    }
  }
  return fold_out(g, buf, bytes, rem, TAG_RD);
}

/* A vector larger than comm_window_bytes() is reduced one window after the
 * other, so the scratch (the partner's copy) stays within the window. */
gs_status allreduce_rd(gs_comm *c, const coll_group *g, void *buf, size_t count,
                       gs_dtype dtype, gs_redop op, int avg_div) {
  size_t esize = gs_dtype_size(dtype);
  if (g->size == 1 || count == 0) {
    if (avg_div > 1) GS_CHECK(gs_scale_div(buf, count, dtype, avg_div));
    return GS_OK;
  }
  size_t win = GS_MAX((size_t)1, comm_window_bytes() / esize);
  void *tmp;
  GS_CHECK(comm_scratch(c, &c->scratch, &c->scratch_bytes,
                        GS_MIN(count, win) * esize, &tmp));
  for (size_t done = 0; done < count;) {
    size_t n = GS_MIN(win, count - done);
    GS_CHECK(rd_window(g, (char *)buf + done * esize, tmp, n, dtype, op));
    done += n;
  }
  if (avg_div > 1) GS_CHECK(gs_scale_div(buf, count, dtype, avg_div));
  return GS_OK;
}
