/*
 * The pipelined ring, shared by allreduce, reduce-scatter and allgather(v).
 *
 * A reduce-scatter of p-1 steps and an allgather of p-1 steps form one stream
 * of messages from each rank to its right neighbour. Every chunk is cut into
 * segments, and message (step k, segment s) is sent as soon as message
 * (k-1, s) has arrived and been reduced, so sending, receiving and reducing
 * overlap and the link never waits for a whole step to drain. This is what
 * lifts the ring from about 85% to over 90% of a 1 Gbit/s link.
 *
 * Chunk schedule for rank r (indices mod p):
 *   reduce-scatter step k: send chunk r-k-1, receive chunk r-k-2 and reduce;
 *                          after p-1 steps rank r holds chunk r reduced.
 *   allgather step k:      send chunk r-k,   receive chunk r-k-1.
 * The chunk sent at step k is always the one received at step k-1.
 *
 * Receives land in W scratch slots, posted up to one step ahead: W =
 * segments+1 while that fits in comm_window_bytes(), fewer for larger
 * chunks, so scratch is bounded by the window and not by the message (a
 * receive posted later than its message arrives only waits in MPI's queue).
 * Sends read the user buffer. A segment of the allgather overwrites a region
 * that a reduce-scatter send read; that send is waited for first (it has
 * completed by causality: the data came round the ring after it).
 */
#include <limits.h>
#include <string.h>

#include "comm_internal.h"

#define RING_MAX_SEGMENTS 32
/* A segment grown for a large chunk stops at RING_SEG_MAX bytes (a larger
 * GRADSYNC_SEGMENT_BYTES is kept, up to half the window). */
#define RING_SEG_MAX ((size_t)8 << 20)

static inline size_t mod(long a, int p) { return (size_t)(((a % p) + p) % p); }

typedef struct ring_state {
  const coll_group *g;
  char *buf, *slots;
  const size_t *off, *len;
  size_t esize, seg;   /* segment length in elements */
  int nseg, rs_steps, steps, window;
  MPI_Request *recv_req, *send_req;
} ring_state;

static size_t seg_len(const ring_state *s, size_t chunk, int seg) {
  size_t start = (size_t)seg * s->seg;
  if (start >= s->len[chunk]) return 0;
  return GS_MIN(s->seg, s->len[chunk] - start);
}

static size_t recv_chunk(const ring_state *s, int step) {
  int r = s->g->rank, p = s->g->size;
  if (step < s->rs_steps) return mod((long)r - step - 2, p);
  return mod((long)r - (step - s->rs_steps) - 1, p);
}

static size_t send_chunk(const ring_state *s, int step) {
  int r = s->g->rank, p = s->g->size;
  if (step < s->rs_steps) return mod((long)r - step - 1, p);
  return mod((long)r - (step - s->rs_steps), p);
}

static gs_status post_recv(ring_state *s, int j) {
  int step = j / s->nseg, seg = j % s->nseg;
  size_t n = seg_len(s, recv_chunk(s, step), seg);
  MPI_Request *rq = &s->recv_req[j % s->window];
  *rq = MPI_REQUEST_NULL;
  if (n == 0) return GS_OK;
  int left = (s->g->rank - 1 + s->g->size) % s->g->size;
  char *slot = s->slots + (size_t)(j % s->window) * s->seg * s->esize;
  /* n * esize <= the segment, at most half the window: it fits in an int. */
  MPI_TRY(s->g, MPI_Irecv(slot, (int)(n * s->esize), MPI_BYTE, left, TAG_RING,
                          s->g->mpi, rq));
  return GS_OK;
}

gs_status ring_run(gs_comm *c, const coll_group *g, void *buf, const size_t *off,
                   const size_t *len, gs_dtype dtype, gs_redop op, int do_rs,
                   int do_ag, int avg_div) {
  int p = g->size, r = g->rank;
  size_t esize = gs_dtype_size(dtype);
  if (p == 1) {
    if (do_rs && avg_div > 1)
      GS_CHECK(gs_scale_div((char *)buf + off[0] * esize, len[0], dtype, avg_div));
    return GS_OK;
  }
  size_t maxlen = 0;
  for (int i = 0; i < p; i++) maxlen = GS_MAX(maxlen, len[i]);
  if (maxlen == 0) return GS_OK;

  ring_state s = {.g = g, .buf = buf, .off = off, .len = len, .esize = esize};
  size_t window_bytes = comm_window_bytes();
  size_t seg_max = GS_MIN(GS_MAX(RING_SEG_MAX, c->segment_bytes), window_bytes / 2);
  s.seg = GS_MAX((size_t)1, c->segment_bytes / esize);
  if ((maxlen + s.seg - 1) / s.seg > RING_MAX_SEGMENTS)
    s.seg = (maxlen + RING_MAX_SEGMENTS - 1) / RING_MAX_SEGMENTS;
  s.seg = GS_MAX((size_t)1, GS_MIN(s.seg, seg_max / esize));
  size_t nseg = (maxlen + s.seg - 1) / s.seg;
  s.rs_steps = do_rs ? p - 1 : 0;
  s.steps = s.rs_steps + (do_ag ? p - 1 : 0);
  if (s.steps > 0 && nseg > (size_t)INT_MAX / (size_t)s.steps)
    return gs_error(GS_ERR_UNSUPPORTED, "ring on rank %d: %zu segments of %zu "
                    "bytes in %d steps are too many", r, nseg, s.seg * esize,
                    s.steps);
  s.nseg = (int)nseg;
  int total = s.steps * s.nseg;
  size_t slots_fit = GS_MAX((size_t)2, window_bytes / (s.seg * esize));
  s.window = (int)GS_MIN((size_t)GS_MIN(s.nseg + 1, total), slots_fit);

  void *slots;
  GS_CHECK(comm_scratch(c, &c->scratch, &c->scratch_bytes,
                        (size_t)s.window * s.seg * esize, &slots));
  s.slots = slots;
  s.recv_req = gs_malloc(sizeof(MPI_Request) * (size_t)(s.window + total));
  if (s.recv_req == NULL) return GS_ERR_NOMEM;
  s.send_req = s.recv_req + s.window;
  for (int i = 0; i < s.window + total; i++) s.recv_req[i] = MPI_REQUEST_NULL;

  gs_status st = GS_OK;
  int right = (r + 1) % p;
  for (int j = 0; j < s.window && st == GS_OK; j++) st = post_recv(&s, j);

  for (int i = 0; i < total + s.nseg && st == GS_OK; i++) {
    if (i >= s.nseg) {
      /* Complete the receive of message j = (step-1, seg). */
      int j = i - s.nseg, step = j / s.nseg, seg = j % s.nseg;
      size_t chunk = recv_chunk(&s, step);
      size_t n = seg_len(&s, chunk, seg);
      st = comm_waitall(g, 1, &s.recv_req[j % s.window], "ring receive");
      if (st != GS_OK) break;
      char *dst = s.buf + (off[chunk] + (size_t)seg * s.seg) * esize;
      char *slot = s.slots + (size_t)(j % s.window) * s.seg * esize;
      if (n > 0 && step < s.rs_steps) {
        gs_reduce_local(dst, slot, n, dtype, op);
        if (step == s.rs_steps - 1 && avg_div > 1)
          gs_scale_div(dst, n, dtype, avg_div);
      } else if (n > 0) {
        /* The reduce-scatter send of this region: same chunk, step index
         * equal to this allgather step (see the schedule above). */
        if (do_rs) {
          st = comm_waitall(g, 1, &s.send_req[(step - s.rs_steps) * s.nseg + seg],
                            "ring send");
          if (st != GS_OK) break;
        }
        memcpy(dst, slot, n * esize);
      }
      if (j + s.window < total) st = post_recv(&s, j + s.window);
      if (st != GS_OK) break;
    }
    if (i < total) {
      int step = i / s.nseg, seg = i % s.nseg;
      size_t chunk = send_chunk(&s, step);
      size_t n = seg_len(&s, chunk, seg);
      if (n > 0) {
        char *src = s.buf + (off[chunk] + (size_t)seg * s.seg) * esize;
        int rc = MPI_Isend(src, (int)(n * esize), MPI_BYTE, right, TAG_RING,
                           g->mpi, &s.send_req[i]);
        if (rc != MPI_SUCCESS) st = comm_mpi_error(g, "MPI_Isend (ring)", rc);
      }
    }
  }
  if (st == GS_OK) st = comm_waitall(g, total, s.send_req, "ring sends");
  /* Requests still pending after an error are abandoned with the failed
   * communicator (it refuses further work). */
  gs_free(s.recv_req);
  return st;
}

gs_status allreduce_ring(gs_comm *c, const coll_group *g, void *buf,
                         size_t count, gs_dtype dtype, gs_redop op,
                         int avg_div) {
  int p = g->size;
  size_t *off = gs_malloc(2 * sizeof(size_t) * (size_t)p);
  if (off == NULL) return GS_ERR_NOMEM;
  size_t *len = off + p;
  split_blocks(count, p, off, len);
  gs_status st = ring_run(c, g, buf, off, len, dtype, op, 1, 1, avg_div);
  gs_free(off);
  return st;
}

gs_status reduce_scatter_ring(gs_comm *c, const coll_group *g,
                              const void *sendbuf, void *recvbuf, size_t count,
                              gs_dtype dtype, gs_redop op, int avg_div) {
  int p = g->size, r = g->rank;
  size_t esize = gs_dtype_size(dtype);
  /* Window: w elements of each of the p blocks (all of them in place, where
   * the ring works in recvbuf itself). */
  size_t w = sendbuf == NULL ? count
                             : GS_MAX((size_t)1, comm_window_bytes() / ((size_t)p * esize));
  size_t *off = gs_malloc(2 * sizeof(size_t) * (size_t)p);
  if (off == NULL) return GS_ERR_NOMEM;
  size_t *len = off + p;
  gs_status st = GS_OK;
  for (size_t done = 0; done < count && st == GS_OK;) {
    size_t m = GS_MIN(w, count - done);
    char *work = recvbuf;
    if (sendbuf != NULL) {
      void *area;
      st = comm_scratch(c, &c->work, &c->work_bytes, (size_t)p * m * esize, &area);
      if (st != GS_OK) break;
      work = area;
      for (int i = 0; i < p; i++)
        memcpy(work + (size_t)i * m * esize,
               (const char *)sendbuf + ((size_t)i * count + done) * esize, m * esize);
    }
    for (int i = 0; i < p; i++) {
      off[i] = (size_t)i * m;
      len[i] = m;
    }
    st = ring_run(c, g, work, off, len, dtype, op, 1, 0, avg_div);
    if (st == GS_OK)
      memmove((char *)recvbuf + done * esize, work + (size_t)r * m * esize,
              m * esize);
    done += m;
  }
  gs_free(off);
  return st;
}
