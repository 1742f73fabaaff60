/*
 * Node-local reduce-scatter and all-gather through shared memory.
 *
 * Ranks of one node (the local group) that share memory exchange dense data
 * by plain loads and stores instead of point-to-point messages: on a real
 * node Open MPI would carry those messages over its own shared memory, but
 * `gradsync run --net` restricts MPI to TCP (so that the emulated links carry
 * the traffic between nodes), which left the ranks of one emulated node
 * talking over loopback TCP: two kernel copies and a protocol stack per byte.
 * HiTopKComm's and the hierarchical all-reduce's node-local steps move the
 * whole dense tensor, so that cost decides whether they pay.
 *
 * The memory is one POSIX shared-memory segment per node (shm_open, mapped
 * by every local rank, unlinked as soon as all have it): every local rank
 * owns an area of two halves, each half L pieces of shm_piece bytes. Work proceeds in
 * rounds; a round uses one half of every area, alternating, and ends with a
 * barrier of the local group:
 *
 *   reduce-scatter round t: rank r copies the t-th piece of every other
 *     rank's shard j into piece j of its half; barrier; rank r adds the t-th
 *     piece of its own shard from every other rank's area into its buffer
 *     (its own values first, then the others' in rank order: a fixed order,
 *     so the result is deterministic).
 *   all-gather round t: rank r copies the t-th piece (L pieces long) of its
 *     shard into its half; barrier; it copies every other rank's into place.
 *
 * Why two halves and one barrier per round suffice: a rank writes half b in
 * round t only after the barrier of round t-1, which no rank passes before it
 * has finished reading round t-2, the last round that used half b. The round
 * counter lives in the communicator, so this holds across collectives too.
 *
 * The barrier is MPI_Ibarrier completed by comm_waitall, like every other
 * wait of the algorithms: a peer that dies or stalls is caught by the
 * watchdog as in the ring it replaces.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "comm_internal.h"

/* Bytes of one rank's area (both halves): 16 MiB holds pieces of 4 MiB on a
 * node of two ranks, so a 100 MB tensor takes 13 rounds; the pieces stay
 * within comm_window_bytes() (lowered by GRADSYNC_TEST_WINDOW_BYTES). */
#define SHM_AREA_BYTES ((size_t)16 << 20)
#define SHM_PIECE_ALIGN ((size_t)64)

int shm_active(const gs_comm *c) { return c->shm_seg != NULL; }

/* Local rank r's area: both halves, 2 L pieces. */
static char *area(const gs_comm *c, int r) {
  return c->shm_seg + (size_t)r * 2 * (size_t)c->local.size * c->shm_piece;
}

/* Whether this rank wants the shared-memory path: GRADSYNC_SHM=0 turns it
 * off (any other value, or none, leaves it on). */
static int shm_wanted(void) {
  const char *s = getenv("GRADSYNC_SHM");
  return !(s && strcmp(s, "0") == 0);
}

/* Maps the node's segment, created by local rank 0 and named to the others
 * by a broadcast; every rank reports whether it got it. Rank 0 unlinks the
 * name once all have mapped it, so the memory goes with the last process
 * even if the job is killed. */
static gs_status shm_map(gs_comm *c, size_t bytes, char **seg, int *ok) {
  static atomic_uint serial;
  char name[64] = "";
  int lr = c->local.rank, fd = -1;
  *seg = NULL;
  if (lr == 0) {
    snprintf(name, sizeof name, "/gradsync-%ld-%u", (long)getpid(),
             atomic_fetch_add(&serial, 1));
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    /* posix_fallocate, not only ftruncate: a /dev/shm too small for the
     * segment (a container's 64 MB, say) must fail here, not as a SIGBUS at
     * the first store into a page it cannot back. */
    if (fd >= 0 && (ftruncate(fd, (off_t)bytes) != 0 ||
                    posix_fallocate(fd, 0, (off_t)bytes) != 0)) {
      close(fd);
      shm_unlink(name);
      fd = -1;
    }
    if (fd < 0) name[0] = '\0';
  }
  MPI_TRY(&c->local, MPI_Bcast(name, sizeof name, MPI_CHAR, 0, c->local.mpi));
  if (name[0] != '\0') {
    if (lr != 0) fd = shm_open(name, O_RDWR, 0600);
    if (fd >= 0) {
      void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (p != MAP_FAILED) *seg = p;
    }
  }
  *ok = *seg != NULL;
  int all = 0;
  MPI_TRY(&c->local, MPI_Allreduce(ok, &all, 1, MPI_INT, MPI_MIN, c->local.mpi));
  if (lr == 0 && name[0] != '\0') shm_unlink(name);
  *ok = all;
  return GS_OK;
}

gs_status shm_init(gs_comm *c) {
  c->shm_seg = NULL;
  int L = c->local.size;
  /* GRADSYNC_SHM=0 on any rank turns the path off on every node, so that a
   * comparison of the two paths compares whole jobs. */
  int want = shm_wanted();
  MPI_TRY(&c->world, MPI_Allreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MIN,
                                   c->world.mpi));
  if (!want) return GS_OK;
  /* Each node decides for itself (a node of one rank has nothing to share);
   * the collectives below are the local group's, and one world minimum at
   * the end tells every rank whether some node fell back, for the log. */
  int ok = 1;
  if (L > 1) {
    /* The local group shares memory only if MPI's own shared split keeps
     * it whole (GRADSYNC_NODE could name ranks of different hosts). */
    MPI_Comm shared;
    int rc = MPI_Comm_split_type(c->local.mpi, MPI_COMM_TYPE_SHARED,
                                 c->local.rank, MPI_INFO_NULL, &shared);
    if (rc != MPI_SUCCESS) return comm_mpi_error(&c->local, "split (shared)", rc);
    int ssize = 0;
    MPI_Comm_size(shared, &ssize);
    MPI_Comm_free(&shared);
    ok = ssize == L;
    if (ok) {
      size_t per_rank = GS_MIN(SHM_AREA_BYTES, comm_window_bytes());
      size_t piece = per_rank / (2 * (size_t)L) / SHM_PIECE_ALIGN * SHM_PIECE_ALIGN;
      if (piece < SHM_PIECE_ALIGN) piece = SHM_PIECE_ALIGN;
      size_t bytes = (size_t)L * 2 * (size_t)L * piece;
      char *seg = NULL;
      GS_CHECK(shm_map(c, bytes, &seg, &ok));
      if (ok) {
        c->shm_seg = seg;
        c->shm_seg_bytes = bytes;
        c->shm_piece = piece;
        c->shm_round = 0;
      } else if (seg != NULL) {
        munmap(seg, bytes);
      }
    }
  }
  int all = ok;
  MPI_TRY(&c->world, MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN,
                                   c->world.mpi));
  if (!all && c->world.rank == 0)
    gs_log(GS_LOG_INFO, "node-local shared memory unavailable on some node "
           "(its ranks do not share memory, or mapping failed): its node-local "
           "steps use point-to-point messages");
  return GS_OK;
}

void shm_free(gs_comm *c) {
  /* Local only: the name is gone already, the memory with the last map. */
  if (c->shm_seg != NULL) munmap(c->shm_seg, c->shm_seg_bytes);
  c->shm_seg = NULL;
}

/* Ends a round: every local rank has written its half (and read the one of
 * the round before). The fences order this rank's plain stores and loads
 * with the peers', which the barrier's messages synchronise with. */
static gs_status round_barrier(gs_comm *c) {
  atomic_thread_fence(memory_order_seq_cst);
  MPI_Request req;
  MPI_TRY(&c->local, MPI_Ibarrier(c->local.mpi, &req));
  GS_CHECK(comm_waitall(&c->local, 1, &req, "node-local shared-memory barrier"));
  atomic_thread_fence(memory_order_seq_cst);
  return GS_OK;
}

/* Elements of the t-th piece (of `per` elements) of a block of `len`. */
static size_t piece_len(size_t len, size_t t, size_t per) {
  size_t start = t * per;
  return start >= len ? 0 : GS_MIN(per, len - start);
}

/* src is where the rank's whole tensor is read from (buf itself or another
 * array); only shard me of buf is written. */
static gs_status shm_reduce_scatter(gs_comm *c, const char *src, char *buf,
                                    const size_t *off, const size_t *len,
                                    gs_dtype dtype, gs_redop op, int avg_div,
                                    size_t esize, size_t maxlen) {
  int L = c->local.size, me = c->local.rank;
  size_t per = c->shm_piece / esize, half = (size_t)L * c->shm_piece;
  size_t rounds = (maxlen + per - 1) / per;
  for (size_t t = 0; t < rounds; t++) {
    size_t b = (size_t)(c->shm_round++ & 1) * half;
    for (int j = 0; j < L; j++) {
      size_t n = piece_len(len[j], t, per);
      if (j != me && n > 0)
        memcpy(area(c, me) + b + (size_t)j * c->shm_piece,
               src + (off[j] + t * per) * esize, n * esize);
    }
    GS_CHECK(round_barrier(c));
    size_t n = piece_len(len[me], t, per);
    if (n == 0) continue;
    char *dst = buf + (off[me] + t * per) * esize;
    /* A piece at a time, so that it is still in cache for the adds. */
    if (src != buf) memcpy(dst, src + (off[me] + t * per) * esize, n * esize);
    for (int r = 0; r < L; r++)
      if (r != me)
        GS_CHECK(gs_reduce_local(dst, area(c, r) + b + (size_t)me * c->shm_piece,
                                 n, dtype, op));
    if (avg_div > 1) GS_CHECK(gs_scale_div(dst, n, dtype, avg_div));
  }
  return GS_OK;
}

static gs_status shm_allgather(gs_comm *c, char *buf, const size_t *off,
                               const size_t *len, size_t esize, size_t maxlen) {
  int L = c->local.size, me = c->local.rank;
  size_t half = (size_t)L * c->shm_piece, per = half / esize;
  size_t rounds = (maxlen + per - 1) / per;
  for (size_t t = 0; t < rounds; t++) {
    size_t b = (size_t)(c->shm_round++ & 1) * half;
    size_t n = piece_len(len[me], t, per);
    if (n > 0)
      memcpy(area(c, me) + b, buf + (off[me] + t * per) * esize, n * esize);
    GS_CHECK(round_barrier(c));
    for (int r = 0; r < L; r++) {
      size_t nr = piece_len(len[r], t, per);
      if (r != me && nr > 0)
        memcpy(buf + (off[r] + t * per) * esize, area(c, r) + b, nr * esize);
    }
  }
  return GS_OK;
}

gs_status shm_run(gs_comm *c, const void *src, void *buf, const size_t *off,
                  const size_t *len, gs_dtype dtype, gs_redop op, int do_rs,
                  int do_ag, int avg_div) {
  int L = c->local.size;
  size_t esize = gs_dtype_size(dtype), maxlen = 0;
  for (int i = 0; i < L; i++) maxlen = GS_MAX(maxlen, len[i]);
  if (maxlen == 0) return GS_OK;
  if (do_rs)
    GS_CHECK(shm_reduce_scatter(c, src != NULL ? src : buf, buf, off, len,
                                dtype, op, avg_div, esize, maxlen));
  if (do_ag) GS_CHECK(shm_allgather(c, buf, off, len, esize, maxlen));
  return GS_OK;
}

gs_status local_run(gs_comm *c, const void *src, void *buf, const size_t *off,
                    const size_t *len, gs_dtype dtype, gs_redop op, int do_rs,
                    int do_ag, int avg_div) {
  if (shm_active(c)) /* only on nodes of several ranks */
    return shm_run(c, src, buf, off, len, dtype, op, do_rs, do_ag, avg_div);
  if (do_rs && src != NULL && src != buf) {
    /* The ring reduces in place: it needs the whole tensor in buf. */
    size_t esize = gs_dtype_size(dtype), total = 0;
    for (int i = 0; i < c->local.size; i++) total = GS_MAX(total, off[i] + len[i]);
    if (total > 0) memcpy(buf, src, total * esize);
  }
  return ring_run(c, &c->local, buf, off, len, dtype, op, do_rs, do_ag, avg_div);
}

gs_status shm_calibrate(gs_comm *c, double *alpha, double *beta) {
  const size_t mid = CALIB_MID_BYTES, big = CALIB_BIG_BYTES;
  int L = c->local.size;
  size_t n = (size_t)L * big / sizeof(float);
  float *buf = gs_calloc(n, sizeof(float));
  size_t *off = gs_malloc(2 * sizeof(size_t) * (size_t)L);
  gs_status st = buf && off ? GS_OK : GS_ERR_NOMEM;
  double t_small = 1e30, t_mid = 1e30, t_big = 1e30;
  /* The latency is a round's barrier; the time per byte is an all-gather's
   * (every rank copies its block in and the others' out), from the
   * difference of two sizes, each the best of a few. */
  for (int i = 0; i < 21 && st == GS_OK; i++) {
    double t0 = gs_now();
    st = round_barrier(c);
    if (i > 0) t_small = GS_MIN(t_small, gs_now() - t0);
  }
  const size_t sizes[2] = {mid, big};
  double *best[2] = {&t_mid, &t_big};
  for (int s = 0; s < 2 && st == GS_OK; s++) {
    split_blocks((size_t)L * sizes[s] / sizeof(float), L, off, off + L);
    for (int i = 0; i < 4 && st == GS_OK; i++) {
      st = round_barrier(c);
      double t0 = gs_now();
      if (st == GS_OK)
        st = shm_run(c, NULL, buf, off, off + L, GS_F32, GS_SUM, 0, 1, 1);
      if (i > 0) *best[s] = GS_MIN(*best[s], gs_now() - t0);
    }
  }
  gs_free(buf);
  gs_free(off);
  GS_CHECK(st);
  double f = (double)(L - 1) / L;
  double v[2] = {t_small, (t_big - t_mid) / (f * (double)L * (double)(big - mid))};
  MPI_TRY(&c->local, MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX,
                                   c->local.mpi));
  *alpha = v[0];
  *beta = v[1] > 0 ? v[1] : 1e-12;
  return GS_OK;
}
