/*
 * Rabenseifner's allreduce (Thakur et al. 2005, Sec. 4.4): a reduce-scatter
 * by recursive halving, then an allgather by recursive doubling. lg p rounds
 * each way, bandwidth-optimal: 2 lg p alpha + 2 (p-1)/p n beta.
 *
 * The vector is cut into q = 2^floor(lg p) balanced blocks (any count works,
 * including count < q); non-power-of-two p folds like recursive doubling.
 * Each block's final value is computed on one rank only and then copied, so
 * all ranks end with identical results.
 */
#include "comm_internal.h"

/* One window of the vector: the whole algorithm on `count` elements, with
 * `tmp` of count elements. */
static gs_status rab_window(const coll_group *g, char *b, char *tmp, size_t count,
                            gs_dtype dtype, gs_redop op, int avg_div) {
  int p = g->size, r = g->rank;
  size_t esize = gs_dtype_size(dtype), bytes = count * esize;
  int q = 1;
  while (q * 2 <= p) q *= 2;
  int rem = p - q;
  int nr = fold_newrank(r, rem);

  GS_CHECK(fold_in(g, b, tmp, count, dtype, op, rem, TAG_RAB));
  gs_status st = GS_OK;
  if (nr >= 0) {
    size_t *off = gs_malloc(2 * sizeof(size_t) * (size_t)q);
    if (off == NULL) return GS_ERR_NOMEM;
    size_t *len = off + q;
    split_blocks(count, q, off, len);
    /* Elements of the block range [lo, hi). */
#define RANGE_OFF(lo) (off[lo])
#define RANGE_LEN(lo, hi) (off[(hi) - 1] + len[(hi) - 1] - off[lo])
    int lo = 0, hi = q;
    for (int mask = q / 2; mask >= 1 && st == GS_OK; mask >>= 1) {
      int partner = fold_realrank(nr ^ mask, rem);
      int keep_lo = (nr & mask) ? lo + mask : lo;
      int send_lo = (nr & mask) ? lo : lo + mask;
      size_t kn = RANGE_LEN(keep_lo, keep_lo + mask);
      size_t sn = RANGE_LEN(send_lo, send_lo + mask);
      st = p2p_sendrecv(g, b + RANGE_OFF(send_lo) * esize, sn * esize, partner,
                        tmp, kn * esize, partner, TAG_RAB);
      if (st == GS_OK)
        st = gs_reduce_local(b + RANGE_OFF(keep_lo) * esize, tmp, kn, dtype, op);
      lo = keep_lo;
      hi = keep_lo + mask;
    }
    if (st == GS_OK && avg_div > 1)
      st = gs_scale_div(b + RANGE_OFF(lo) * esize, RANGE_LEN(lo, hi), dtype,
                        avg_div);
    for (int mask = 1; mask < q && st == GS_OK; mask <<= 1) {
      int partner = fold_realrank(nr ^ mask, rem);
      int plo = lo ^ mask;
      st = p2p_sendrecv(g, b + RANGE_OFF(lo) * esize,
                        RANGE_LEN(lo, lo + mask) * esize, partner,
                        b + RANGE_OFF(plo) * esize,
                        RANGE_LEN(plo, plo + mask) * esize, partner, TAG_RAB);
      lo = GS_MIN(lo, plo);
    }
#undef RANGE_OFF
#undef RANGE_LEN
    gs_free(off);
  }
  GS_CHECK(st);
  return fold_out(g, b, bytes, rem, TAG_RAB);
}

/* A vector larger than comm_window_bytes() is reduced one window after the
 * other: each window is itself reduce-scattered and allgathered (still
 * bandwidth-optimal), and the scratch stays within the window. */
gs_status allreduce_rabenseifner(gs_comm *c, const coll_group *g, void *buf,
                                 size_t count, gs_dtype dtype, gs_redop op,
                                 int avg_div) {
  size_t esize = gs_dtype_size(dtype);
  if (g->size == 1 || count == 0) {
    if (avg_div > 1) GS_CHECK(gs_scale_div(buf, count, dtype, avg_div));
    return GS_OK;
  }
  size_t win = GS_MAX((size_t)1, comm_window_bytes() / esize);
  char *tmp;
  GS_CHECK(comm_scratch(c, &c->scratch, &c->scratch_bytes,
                        GS_MIN(count, win) * esize, (void **)&tmp));
  for (size_t done = 0; done < count;) {
    size_t n = GS_MIN(win, count - done);
    GS_CHECK(rab_window(g, (char *)buf + done * esize, tmp, n, dtype, op, avg_div));
    done += n;
  }
  return GS_OK;
}
