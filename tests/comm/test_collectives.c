/*
 * Multi-rank tests of gradsync's collectives, run under mpirun on any number
 * of ranks (ctest runs 1, 2, 3, 4, 5, 6 and 8). Every rank computes the
 * expected result of each case itself, from the inputs that every other rank
 * generates deterministically, and checks its own output against it.
 *
 * Inputs are small integers, so that every reduction is exact in every data
 * type and in any order of operations; only GS_AVG of floats is compared
 * with a tolerance (the division rounds). Output buffers carry guard
 * elements after their end (and gaps between allgatherv/alltoallv blocks)
 * that must come back untouched.
 *
 *   test_collectives              the full matrix
 *   test_collectives --large      only messages above 64 MiB: one case of
 *                                 about 80 MiB per collective and algorithm
 *   test_collectives --mismatch   GRADSYNC_CHECK=1 must be set: ranks that
 *                                 disagree get GS_ERR_MISMATCH, naming them;
 *                                 then the full matrix, which must not
 *                                 trip the check
 *
 * A failing check prints "FAIL rank R case C: ..."; at the end rank 0 prints
 * "N passed, M failed" (cases summed over ranks) and the exit status is
 * non-zero if any case failed on any rank.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gradsync.h"

/* ---- Tiny test harness --------------------------------------------------- */

#include "mrt.h"

/* ---- Data ------------------------------------------------------------------ */

static const gs_dtype all_dtypes[] = {GS_F32, GS_F64, GS_F16, GS_BF16,
                                      GS_I32, GS_I64, GS_U8};
#define NDTYPES (sizeof all_dtypes / sizeof all_dtypes[0])
#define GUARD 4
#define GUARD_BYTE 0xA5

static uint32_t mix(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t h = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u) * 0x85ebca77u ^ c * 0xc2b2ae3du;
  h ^= h >> 15;
  h *= 0x2c1b3c6du;
  h ^= h >> 12;
  return h;
}

/* Rank r's input element i of a reduction: small integers whose sums, minima,
 * maxima and products over up to 8 ranks are exact in every dtype (u8 and
 * f16/bf16 included). */
static double input_value(int r, size_t i, gs_dtype d, gs_redop op,
                          uint32_t seed) {
  uint32_t h = mix((uint32_t)r, (uint32_t)i, seed);
  int is_unsigned = d == GS_U8;
  switch (op) {
    case GS_SUM:
    case GS_AVG: return is_unsigned ? (double)(h % 4) : (double)(int)(h % 7) - 3;
    case GS_MIN:
    case GS_MAX: return is_unsigned ? (double)(h % 200) : (double)(int)(h % 201) - 100;
    default: {
      /* At most two ranks in eight have a 2 at any element. */
      double v = (i + (size_t)r) % 4 == 0 ? 2 : 1;
      if (!is_unsigned && h % 5 == 0) v = -v;
      return v;
    }
  }
}

static void set_value(void *buf, gs_dtype d, size_t i, double v) {
  switch (d) {
    case GS_F32: ((float *)buf)[i] = (float)v; break;
    case GS_F64: ((double *)buf)[i] = v; break;
    case GS_F16: ((uint16_t *)buf)[i] = gs_f32_to_f16((float)v); break;
    case GS_BF16: ((uint16_t *)buf)[i] = gs_f32_to_bf16((float)v); break;
    case GS_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case GS_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case GS_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    default: break;
  }
}

static double get_value(const void *buf, gs_dtype d, size_t i) {
  switch (d) {
    case GS_F32: return ((const float *)buf)[i];
    case GS_F64: return ((const double *)buf)[i];
    case GS_F16: return gs_f16_to_f32(((const uint16_t *)buf)[i]);
    case GS_BF16: return gs_bf16_to_f32(((const uint16_t *)buf)[i]);
    case GS_I32: return ((const int32_t *)buf)[i];
    case GS_I64: return (double)((const int64_t *)buf)[i];
    case GS_U8: return ((const uint8_t *)buf)[i];
    default: return NAN;
  }
}

static int is_float(gs_dtype d) { return d == GS_F32 || d == GS_F64 || d == GS_F16 || d == GS_BF16; }

/* The reduction over all ranks of element i, computed serially. */
static double expected_value(size_t i, gs_dtype d, gs_redop op, uint32_t seed) {
  double acc = input_value(0, i, d, op, seed);
  for (int r = 1; r < g_size; r++) {
    double v = input_value(r, i, d, op, seed);
    switch (op) {
      case GS_SUM: case GS_AVG: acc += v; break;
      case GS_MIN: acc = v < acc ? v : acc; break;
      case GS_MAX: acc = v > acc ? v : acc; break;
      default: acc *= v; break;
    }
  }
  if (op == GS_AVG) {
    if (is_float(d)) return acc / g_size;
    return (double)((int64_t)acc / g_size); /* C truncation toward zero */
  }
  return acc;
}

static int value_ok(double got, double want, gs_dtype d, gs_redop op) {
  if (op != GS_AVG || !is_float(d)) return got == want;
  double rel = d == GS_F16 ? 0x1p-10 : d == GS_BF16 ? 0x1p-7 : d == GS_F32 ? 0x1p-22 : 1e-13;
  return fabs(got - want) <= rel * fmax(1.0, fabs(want));
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "rank %d: out of memory\n", g_rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return p;
}

static int guard_ok(const void *buf, size_t off_bytes) {
  const unsigned char *g = (const unsigned char *)buf + off_bytes;
  for (size_t k = 0; k < GUARD * 8; k++)
    if (g[k] != GUARD_BYTE) return 0;
  return 1;
}

/* A byte pattern for data-movement collectives: byte j of rank r's data
 * (for alltoall: of the block from rank r to rank q, tag = q). */
static unsigned char pattern(int r, int tag, size_t j) {
  return (unsigned char)(r * 73 + tag * 29 + (int)j * 11 + (int)(j >> 8) + 5);
}

/* ---- Allreduce -------------------------------------------------------------- */

static int g_hier_uniform;

static void allreduce_case(gs_algo algo, gs_dtype d, gs_redop op, size_t count,
                           int inplace) {
  begin_case("allreduce algo=%s dtype=%s op=%s count=%zu %s", gs_algo_name(algo),
             gs_dtype_name(d), gs_redop_name(op), count,
             inplace ? "in-place" : "out-of-place");
  uint32_t seed = mix((uint32_t)algo, (uint32_t)d * 8 + (uint32_t)op,
                      (uint32_t)count * 2 + (uint32_t)inplace);
  size_t es = gs_dtype_size(d);
  char *send = xmalloc(count * es), *recv = xmalloc((count + GUARD * 8) * es);
  char *orig = xmalloc(count * es);
  memset(recv, GUARD_BYTE, (count + GUARD * 8) * es);
  char *in = inplace ? recv : send;
  for (size_t i = 0; i < count; i++) set_value(in, d, i, input_value(g_rank, i, d, op, seed));
  memcpy(orig, in, count * es);
  gs_status want = GS_OK;
  if (algo == GS_ALGO_HIER && !g_hier_uniform) want = GS_ERR_UNSUPPORTED;
  gs_status st = gs_allreduce(g_comm, inplace ? GS_IN_PLACE : send, recv, count, d,
                              op, algo);
  if (st != want) {
    fail("status %s, want %s (%s)", gs_strerror(st), gs_strerror(want), gs_last_error());
  } else if (st == GS_OK) {
    for (size_t i = 0; i < count; i++) {
      double got = get_value(recv, d, i), exp = expected_value(i, d, op, seed);
      if (!value_ok(got, exp, d, op)) {
        fail("element %zu: got %.9g, want %.9g", i, got, exp);
        break;
      }
    }
    CHECK(guard_ok(recv, count * es), "wrote past the end of recvbuf");
    if (!inplace) CHECK(memcmp(send, orig, count * es) == 0, "modified sendbuf");
  }
  end_case();
  free(send);
  free(recv);
  free(orig);
}

static void test_allreduce(void) {
  const gs_algo algos[] = {GS_ALGO_AUTO, GS_ALGO_MPI, GS_ALGO_RING, GS_ALGO_RD,
                           GS_ALGO_RABENSEIFNER, GS_ALGO_HIER};
  const gs_redop ops[] = {GS_SUM, GS_AVG, GS_MIN, GS_MAX, GS_PROD};
  size_t p = (size_t)g_size;
  size_t counts[] = {0, 1, 2, 3, 7, p - 1, p, p + 1, 97, 1000};
  size_t ncounts = sizeof counts / sizeof counts[0];
  for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
    for (size_t di = 0; di < NDTYPES; di++) {
      for (size_t o = 0; o < 5; o++) {
        for (size_t ci = 0; ci < ncounts; ci++) {
          /* p-1, p, p+1 may repeat a smaller count. */
          int dup = 0;
          for (size_t k = 0; k < ci; k++) dup |= counts[k] == counts[ci];
          if (dup) continue;
          for (int inplace = 0; inplace < 2; inplace++)
            allreduce_case(algos[a], all_dtypes[di], ops[o], counts[ci], inplace);
        }
      }
    }
    /* One vector large enough for several pipeline segments. */
    size_t big = g_size <= 4 ? (1u << 20) + 3 : 300007;
    allreduce_case(algos[a], GS_F32, GS_SUM, big, 1);
    allreduce_case(algos[a], GS_F32, GS_AVG, big, 0);
  }
}

/* ---- Reduce-scatter ---------------------------------------------------------- */

static void reduce_scatter_case(gs_algo algo, gs_dtype d, gs_redop op,
                                size_t rc, int inplace) {
  begin_case("reduce_scatter algo=%s dtype=%s op=%s recvcount=%zu %s",
             gs_algo_name(algo), gs_dtype_name(d), gs_redop_name(op), rc,
             inplace ? "in-place" : "out-of-place");
  uint32_t seed = mix(1000u + (uint32_t)algo, (uint32_t)d * 8 + (uint32_t)op,
                      (uint32_t)rc * 2 + (uint32_t)inplace);
  size_t es = gs_dtype_size(d), total = rc * (size_t)g_size;
  size_t rlen = inplace ? total : rc;
  char *send = xmalloc(total * es), *recv = xmalloc((rlen + GUARD * 8) * es);
  memset(recv, GUARD_BYTE, (rlen + GUARD * 8) * es);
  char *in = inplace ? recv : send;
  for (size_t i = 0; i < total; i++) set_value(in, d, i, input_value(g_rank, i, d, op, seed));
  gs_status st = gs_reduce_scatter(g_comm, inplace ? GS_IN_PLACE : send, recv, rc,
                                   d, op, algo);
  if (st != GS_OK) {
    fail("status %s (%s)", gs_strerror(st), gs_last_error());
  } else {
    for (size_t i = 0; i < rc; i++) {
      size_t gi = (size_t)g_rank * rc + i;
      double got = get_value(recv, d, i), exp = expected_value(gi, d, op, seed);
      if (!value_ok(got, exp, d, op)) {
        fail("element %zu: got %.9g, want %.9g", i, got, exp);
        break;
      }
    }
    CHECK(guard_ok(recv, rlen * es), "wrote past the end of recvbuf");
  }
  end_case();
  free(send);
  free(recv);
}

static void test_reduce_scatter(void) {
  const gs_algo algos[] = {GS_ALGO_AUTO, GS_ALGO_RING, GS_ALGO_MPI};
  const size_t counts[] = {0, 1, 5, 1000};
  for (size_t a = 0; a < 3; a++)
    for (size_t di = 0; di < NDTYPES; di++)
      for (int op = 0; op < GS_REDOP_COUNT; op++)
        for (size_t ci = 0; ci < 4; ci++)
          for (int inplace = 0; inplace < 2; inplace++) {
            /* The large count once per dtype and algorithm is enough. */
            if (counts[ci] == 1000 && op != GS_SUM && op != GS_AVG) continue;
            reduce_scatter_case(algos[a], all_dtypes[di], (gs_redop)op, counts[ci],
                                inplace);
          }
}

/* u8 sums wrap modulo 256 under every algorithm: each rank gives 200 + r
 * at every element, over 1000 elements (vectorised kernels' lengths).
 * Open MPI 4.1's op/avx component saturated them under algo=mpi (255),
 * while gradsync's algorithms wrapped. */
static void test_u8_wrap(void) {
  const gs_algo algos[] = {GS_ALGO_MPI, GS_ALGO_RING, GS_ALGO_RD, GS_ALGO_RABENSEIFNER};
  enum { N = 1000 };
  unsigned want = 0;
  for (int r = 0; r < g_size; r++) want += 200u + (unsigned)r;
  want %= 256u;
  for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
    begin_case("allreduce algo=%s dtype=u8 op=sum: wraps modulo 256", gs_algo_name(algos[a]));
    uint8_t buf[N];
    memset(buf, 200 + g_rank, sizeof buf);
    gs_status st = gs_allreduce(g_comm, GS_IN_PLACE, buf, N, GS_U8, GS_SUM, algos[a]);
    if (st != GS_OK) fail("status %s (%s)", gs_strerror(st), gs_last_error());
    for (size_t i = 0; st == GS_OK && i < N; i++)
      if (buf[i] != want) {
        fail("element %zu: got %u, want %u", i, buf[i], want);
        break;
      }
    end_case();
  }
  const gs_algo rs[] = {GS_ALGO_MPI, GS_ALGO_RING};
  for (size_t a = 0; a < 2; a++) {
    begin_case("reduce_scatter algo=%s dtype=u8 op=sum: wraps modulo 256", gs_algo_name(rs[a]));
    size_t total = (size_t)N * (size_t)g_size;
    uint8_t *send = xmalloc(total), out[N];
    memset(send, 200 + g_rank, total);
    gs_status st = gs_reduce_scatter(g_comm, send, out, N, GS_U8, GS_SUM, rs[a]);
    if (st != GS_OK) fail("status %s (%s)", gs_strerror(st), gs_last_error());
    for (size_t i = 0; st == GS_OK && i < N; i++)
      if (out[i] != want) {
        fail("element %zu: got %u, want %u", i, out[i], want);
        break;
      }
    end_case();
    free(send);
  }
}

/* ---- Allgather(v) -------------------------------------------------------------- */

/* recvcounts/displs in elements; `extent` elements of recvbuf. Every byte
 * outside the blocks must keep GUARD_BYTE. */
static void allgatherv_case(const char *what, gs_algo algo, gs_dtype d,
                            const size_t *counts, const size_t *displs,
                            int inplace, int use_v) {
  begin_case("%s algo=%s dtype=%s %s", what, gs_algo_name(algo), gs_dtype_name(d),
             inplace ? "in-place" : "out-of-place");
  size_t es = gs_dtype_size(d), extent = 0;
  for (int r = 0; r < g_size; r++)
    if (counts[r] && counts[r] + displs[r] > extent) extent = counts[r] + displs[r];
  size_t rbytes = (extent + GUARD * 8) * es;
  size_t mine = counts[g_rank] * es;
  unsigned char *send = xmalloc(mine), *recv = xmalloc(rbytes);
  memset(recv, GUARD_BYTE, rbytes);
  unsigned char *in = inplace ? recv + displs[g_rank] * es : send;
  for (size_t j = 0; j < mine; j++) in[j] = pattern(g_rank, 0, j);
  gs_status st;
  if (use_v)
    st = gs_allgatherv(g_comm, inplace ? GS_IN_PLACE : send, counts[g_rank], recv,
                       counts, displs, d, algo);
  else
    st = gs_allgather(g_comm, inplace ? GS_IN_PLACE : send, recv, counts[0], d, algo);
  if (st != GS_OK) {
    fail("status %s (%s)", gs_strerror(st), gs_last_error());
  } else {
    unsigned char *want = xmalloc(rbytes);
    memset(want, GUARD_BYTE, rbytes);
    for (int r = 0; r < g_size; r++)
      for (size_t j = 0; j < counts[r] * es; j++) want[displs[r] * es + j] = pattern(r, 0, j);
    for (size_t b = 0; b < rbytes; b++) {
      if (recv[b] != want[b]) {
        fail("byte %zu (element %zu): got 0x%02x, want 0x%02x", b, b / es, recv[b],
             want[b]);
        break;
      }
    }
    free(want);
  }
  end_case();
  free(send);
  free(recv);
}

static void test_allgather(void) {
  const gs_algo algos[] = {GS_ALGO_AUTO, GS_ALGO_RING, GS_ALGO_MPI};
  const gs_dtype dts[] = {GS_U8, GS_F16, GS_I32, GS_F64};
  const size_t sizes[] = {0, 1, 5, 97, 3001};
  size_t p = (size_t)g_size;
  size_t *counts = xmalloc(p * sizeof *counts), *displs = xmalloc(p * sizeof *displs);
  for (size_t a = 0; a < 3; a++)
    for (size_t di = 0; di < 4; di++)
      for (size_t si = 0; si < 5; si++)
        for (int inplace = 0; inplace < 2; inplace++) {
          for (size_t r = 0; r < p; r++) {
            counts[r] = sizes[si];
            displs[r] = r * sizes[si];
          }
          char what[64];
          snprintf(what, sizeof what, "allgather count=%zu", sizes[si]);
          allgatherv_case(what, algos[a], dts[di], counts, displs, inplace, 0);
        }

  /* Uneven counts with zeros; ascending displacements with gaps; then the
   * blocks in reverse rank order; then one rank contributing everything. */
  for (int layout = 0; layout < 4; layout++) {
    size_t at = 2;
    for (size_t r = 0; r < p; r++) counts[r] = r % 3 == 1 ? 0 : 1 + (r * 7) % 13;
    if (layout == 2)
      for (size_t r = 0; r < p; r++) counts[r] = r == p / 2 ? 1001 : 0;
    if (layout == 3)
      for (size_t r = 0; r < p; r++) counts[r] = 0;
    for (size_t k = 0; k < p; k++) {
      size_t r = layout == 1 ? p - 1 - k : k;
      displs[r] = at;
      at += counts[r] + r + 1;
    }
    const char *names[] = {"allgatherv uneven+gaps", "allgatherv reversed+gaps",
                           "allgatherv one-rank", "allgatherv all-zero"};
    const gs_algo valgos[] = {GS_ALGO_AUTO, GS_ALGO_RING, GS_ALGO_MPI};
    const gs_dtype vdts[] = {GS_F32, GS_U8, GS_F64};
    for (size_t a = 0; a < 3; a++)
      for (size_t di = 0; di < 3; di++)
        for (int inplace = 0; inplace < 2; inplace++)
          allgatherv_case(names[layout], valgos[a], vdts[di], counts, displs,
                          inplace, 1);
  }
  free(counts);
  free(displs);
}

/* ---- Broadcast ------------------------------------------------------------------ */

static void bcast_case(gs_algo algo, gs_dtype d, size_t count, int root) {
  begin_case("bcast algo=%s dtype=%s count=%zu root=%d", gs_algo_name(algo),
             gs_dtype_name(d), count, root);
  size_t es = gs_dtype_size(d), bytes = count * es;
  unsigned char *buf = xmalloc(bytes + GUARD * 8 * es);
  memset(buf, GUARD_BYTE, bytes + GUARD * 8 * es);
  for (size_t j = 0; j < bytes; j++)
    buf[j] = g_rank == root ? pattern(root, 1, j) : (unsigned char)~pattern(root, 1, j);
  gs_status st = gs_bcast(g_comm, buf, count, d, root, algo);
  if (st != GS_OK) {
    fail("status %s (%s)", gs_strerror(st), gs_last_error());
  } else {
    for (size_t j = 0; j < bytes; j++) {
      if (buf[j] != pattern(root, 1, j)) {
        fail("byte %zu: got 0x%02x, want 0x%02x", j, buf[j], pattern(root, 1, j));
        break;
      }
    }
    CHECK(guard_ok(buf, bytes), "wrote past the end of buf");
  }
  end_case();
  free(buf);
}

static void test_bcast(void) {
  const gs_algo algos[] = {GS_ALGO_AUTO, GS_ALGO_PIPELINE, GS_ALGO_BINOMIAL, GS_ALGO_MPI};
  /* 70001 f32 = 280004 bytes: two segments of the default 256 KiB. */
  const struct {
    gs_dtype d;
    size_t count;
  } sizes[] = {{GS_F32, 0}, {GS_U8, 1}, {GS_F32, 1}, {GS_F16, 97}, {GS_U8, 9973},
               {GS_F32, 70001}};
  for (size_t a = 0; a < 4; a++)
    for (int root = 0; root < g_size; root++)
      for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        /* The large size for a few roots only: it is the slow one. */
        if (sizes[s].count > 10000 && root > 2 && root != g_size - 1) continue;
        bcast_case(algos[a], sizes[s].d, sizes[s].count, root);
      }
}

/* ---- All-to-all(v) --------------------------------------------------------------- */

/* Elements rank `src` sends to rank `dst` in the v-variant: uneven, with
 * zeros. */
static size_t g_a2a_scale = 1; /* --large: blocks this many times larger */
static size_t a2a_count(int src, int dst) {
  return (size_t)((src + 2 * dst) % 4) * 3 * g_a2a_scale;
}

static void alltoall_case(gs_algo algo, gs_dtype d, size_t count, int use_v) {
  begin_case("%s algo=%s dtype=%s count=%zu", use_v ? "alltoallv" : "alltoall",
             gs_algo_name(algo), gs_dtype_name(d), use_v ? 0 : count);
  int p = g_size;
  size_t es = gs_dtype_size(d);
  size_t *sc = xmalloc(4 * (size_t)p * sizeof *sc);
  size_t *sd = sc + p, *rc = sc + 2 * p, *rd = sc + 3 * p;
  size_t sext = 0, rext = 1;
  for (int q = 0; q < p; q++) {
    sc[q] = use_v ? a2a_count(g_rank, q) : count;
    rc[q] = use_v ? a2a_count(q, g_rank) : count;
  }
  /* Send blocks ascending with one-element gaps; receive blocks in reverse
   * rank order, also with gaps. */
  for (int q = 0; q < p; q++) {
    sd[q] = use_v ? sext + 1 : (size_t)q * count;
    sext = sd[q] + sc[q];
  }
  for (int q = p - 1; q >= 0; q--) {
    rd[q] = use_v ? rext : (size_t)q * count;
    rext = use_v ? rd[q] + rc[q] + 1 : (size_t)p * count;
  }
  if (!use_v) rext = (size_t)p * count;
  unsigned char *send = xmalloc(sext * es), *recv = xmalloc((rext + GUARD * 8) * es);
  memset(send, 0, sext * es);
  memset(recv, GUARD_BYTE, (rext + GUARD * 8) * es);
  for (int q = 0; q < p; q++)
    for (size_t j = 0; j < sc[q] * es; j++) send[sd[q] * es + j] = pattern(g_rank, q, j);
  gs_status st = use_v ? gs_alltoallv(g_comm, send, sc, sd, recv, rc, rd, d, algo)
                       : gs_alltoall(g_comm, send, recv, count, d, algo);
  if (st != GS_OK) {
    fail("status %s (%s)", gs_strerror(st), gs_last_error());
  } else {
    size_t rbytes = (rext + GUARD * 8) * es;
    unsigned char *want = xmalloc(rbytes);
    memset(want, GUARD_BYTE, rbytes);
    for (int q = 0; q < p; q++)
      for (size_t j = 0; j < rc[q] * es; j++) want[rd[q] * es + j] = pattern(q, g_rank, j);
    for (size_t b = 0; b < rbytes; b++) {
      if (recv[b] != want[b]) {
        fail("byte %zu: got 0x%02x, want 0x%02x", b, recv[b], want[b]);
        break;
      }
    }
    free(want);
  }
  end_case();
  free(sc);
  free(send);
  free(recv);
}

static void test_alltoall(void) {
  const gs_algo algos[] = {GS_ALGO_AUTO, GS_ALGO_PAIRWISE, GS_ALGO_MPI};
  const size_t counts[] = {0, 1, 5, 33};
  for (size_t a = 0; a < 3; a++) {
    for (size_t ci = 0; ci < 4; ci++) {
      alltoall_case(algos[a], GS_I32, counts[ci], 0);
      alltoall_case(algos[a], GS_F16, counts[ci], 0);
    }
    alltoall_case(algos[a], GS_F64, 0, 1);
    alltoall_case(algos[a], GS_U8, 0, 1);
  }
}

/* ---- Barrier -------------------------------------------------------------------- */

static void test_barrier(void) {
  const gs_algo algos[] = {GS_ALGO_AUTO, GS_ALGO_DISSEMINATION, GS_ALGO_MPI};
  for (size_t a = 0; a < 3; a++) {
    begin_case("barrier algo=%s", gs_algo_name(algos[a]));
    /* Rank 0 arrives 30 ms late: nobody may leave before it arrived. The
     * ranks share one host's monotonic clock: each compares the time it
     * left with rank 0's arrival (a start taken on each rank after
     * MPI_Barrier differed by up to 9 ms under load, and failed). */
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
      struct timespec ts = {0, 30 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    struct timespec ta, tl;
    clock_gettime(CLOCK_MONOTONIC, &ta);
    CHECK_ST(gs_barrier(g_comm, algos[a]), GS_OK);
    clock_gettime(CLOCK_MONOTONIC, &tl);
    double arrived0 = (double)ta.tv_sec + 1e-9 * (double)ta.tv_nsec;
    double left = (double)tl.tv_sec + 1e-9 * (double)tl.tv_nsec;
    MPI_Bcast(&arrived0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (g_size > 1)
      CHECK(left >= arrived0, "left the barrier %.3f ms before rank 0 arrived",
            (arrived0 - left) * 1e3);
    end_case();
  }
}

/* gs_comm_create_like: parent's ranks, parent's cost model (a distinct one
 * set on parent first, so a calibration of its own would differ), the same
 * algorithm choices, collectives that work while parent's run beside them. */
static void test_create_like(void) {
  begin_case("gs_comm_create_like");
  gs_cost_params saved = *gs_comm_cost(g_comm), odd = saved;
  odd.alpha = 3.25e-4;
  odd.beta = 1.0 / 7.5e7;
  gs_comm_set_cost(g_comm, &odd);
  gs_comm *c = NULL;
  CHECK_ST(gs_comm_create_like(g_comm, &c), GS_OK);
  if (c) {
    CHECK(gs_comm_rank(c) == g_rank && gs_comm_size(c) == g_size, "rank %d of %d, expected %d "
          "of %d", gs_comm_rank(c), gs_comm_size(c), g_rank, g_size);
    CHECK(memcmp(gs_comm_cost(c), &odd, sizeof odd) == 0, "the cost model is not parent's");
    for (size_t b = 1024; b <= (64u << 20); b *= 4)
      CHECK(gs_comm_choose_allreduce(c, b) == gs_comm_choose_allreduce(g_comm, b),
            "%zu bytes: %s, parent chooses %s", b, gs_algo_name(gs_comm_choose_allreduce(c, b)),
            gs_algo_name(gs_comm_choose_allreduce(g_comm, b)));
    /* One all-reduce on each at once. */
    float x[1000], y[1000];
    for (int i = 0; i < 1000; i++) x[i] = y[i] = (float)(g_rank + 1);
    gs_request *rx = NULL, *ry = NULL;
    CHECK_ST(gs_iallreduce(g_comm, GS_IN_PLACE, x, 1000, GS_F32, GS_SUM, GS_ALGO_AUTO, &rx),
             GS_OK);
    CHECK_ST(gs_iallreduce(c, GS_IN_PLACE, y, 1000, GS_F32, GS_SUM, GS_ALGO_AUTO, &ry), GS_OK);
    CHECK_ST(gs_wait(ry), GS_OK);
    CHECK_ST(gs_wait(rx), GS_OK);
    float want = (float)(g_size * (g_size + 1) / 2);
    CHECK(x[999] == want && y[0] == want, "sums %g and %g, expected %g", x[999], y[0], want);
    CHECK_ST(gs_comm_destroy(c), GS_OK);
  }
  CHECK_ST(gs_comm_create_like(NULL, &c), GS_ERR_INVALID_ARG);
  gs_comm_set_cost(g_comm, &saved);
  end_case();
}

/* ---- Non-blocking ---------------------------------------------------------------- */

static void test_nonblocking(void) {
  begin_case("nonblocking: several requests in flight");
  enum { N = 1001, K = 5 };
  const gs_algo algos[K] = {GS_ALGO_RING, GS_ALGO_RD, GS_ALGO_RABENSEIFNER,
                            GS_ALGO_MPI, GS_ALGO_AUTO};
  float *bufs = xmalloc(sizeof(float) * N * K);
  float *twice = xmalloc(sizeof(float) * N);
  gs_request *req[K + 3];
  for (int k = 0; k < K; k++)
    for (size_t i = 0; i < N; i++)
      bufs[k * N + i] = (float)input_value(g_rank, i, GS_F32, GS_SUM, (uint32_t)k);
  for (size_t i = 0; i < N; i++) twice[i] = (float)input_value(g_rank, i, GS_F32, GS_SUM, 99);
  int nbc = g_size > 1 ? 1 : 0, root = g_size - 1;
  unsigned char bc[300];
  for (size_t j = 0; j < sizeof bc; j++) bc[j] = g_rank == root ? pattern(root, 7, j) : 0;
  int ok = 1;
  for (int k = 0; k < K && ok; k++) {
    gs_status st = gs_iallreduce(g_comm, GS_IN_PLACE, bufs + k * N, N, GS_F32, GS_SUM,
                                 algos[k], &req[k]);
    if (st != GS_OK) {
      fail("gs_iallreduce %d: %s (%s)", k, gs_strerror(st), gs_last_error());
      ok = 0;
    }
  }
  /* The same buffer twice: requests run in issue order, so the second
   * allreduce sums p copies of the first one's result. */
  if (ok && gs_iallreduce(g_comm, GS_IN_PLACE, twice, N, GS_F32, GS_SUM,
                          GS_ALGO_AUTO, &req[K]) != GS_OK) ok = 0;
  if (ok && gs_iallreduce(g_comm, GS_IN_PLACE, twice, N, GS_F32, GS_SUM,
                          GS_ALGO_RING, &req[K + 1]) != GS_OK) ok = 0;
  if (ok && gs_ibcast(g_comm, bc, sizeof bc, GS_U8, root, GS_ALGO_AUTO, &req[K + 2]) != GS_OK)
    ok = 0;
  if (!ok) {
    fail("could not issue the requests: %s", gs_last_error());
    MPI_Abort(MPI_COMM_WORLD, 3); /* the ranks are out of step now */
  }
  /* Poll the last one; when it is done, all earlier ones are. */
  int done = 0;
  double t0 = MPI_Wtime();
  while (!done && MPI_Wtime() - t0 < 60) {
    CHECK_ST(gs_test(req[K + 2], &done), GS_OK);
    if (!done) {
      struct timespec ts = {0, 100 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  CHECK(done, "gs_test never reported completion");
  for (int k = 0; k < K + 2; k++) {
    int d = 0;
    CHECK_ST(gs_test(req[k], &d), GS_OK);
    CHECK(d, "request %d not done although a later one is", k);
  }
  CHECK_ST(gs_test(req[K + 2], &done), GS_OK);
  CHECK(done, "gs_test went from done to not done");
  for (int k = K + 2; k >= 0; k--) CHECK_ST(gs_wait(req[k]), GS_OK);
  for (int k = 0; k < K; k++) {
    for (size_t i = 0; i < N; i++) {
      double want = expected_value(i, GS_F32, GS_SUM, (uint32_t)k);
      if (bufs[k * N + i] != want) {
        fail("request %d (%s) element %zu: got %g, want %g", k, gs_algo_name(algos[k]),
             i, bufs[k * N + i], want);
        break;
      }
    }
  }
  for (size_t i = 0; i < N; i++) {
    double want = expected_value(i, GS_F32, GS_SUM, 99) * g_size;
    if (twice[i] != want) {
      fail("in-order pair element %zu: got %g, want %g", i, twice[i], want);
      break;
    }
  }
  for (size_t j = 0; j < sizeof bc && nbc; j++) {
    if (bc[j] != pattern(root, 7, j)) {
      fail("bcast byte %zu wrong", j);
      break;
    }
  }
  end_case();

  begin_case("nonblocking: completed request reported by gs_test, then waited");
  gs_request *r = NULL;
  float x = 1;
  CHECK_ST(gs_iallreduce(g_comm, GS_IN_PLACE, &x, 1, GS_F32, GS_SUM, GS_ALGO_AUTO, &r), GS_OK);
  done = 0;
  t0 = MPI_Wtime();
  while (r && !done && MPI_Wtime() - t0 < 60) gs_test(r, &done);
  CHECK(done, "gs_test never reported completion");
  CHECK_ST(gs_wait(r), GS_OK);
  CHECK(x == (float)g_size, "got %g, want %d", x, g_size);
  CHECK_ST(gs_wait(NULL), GS_OK);
  end_case();

  free(bufs);
  free(twice);
}

/* ---- Bad input ---------------------------------------------------------------------
 * Every rank makes the same bad call: errors found at issue time queue
 * nothing, so no rank waits for another. */

#define EXPECT_ERR(call, want, needle)                                           \
  do {                                                                           \
    gs_clear_error();                                                            \
    gs_status st_ = (call);                                                      \
    if (st_ != (want))                                                           \
      fail("%s returned %s, want %s (%s)", #call, gs_strerror(st_),              \
           gs_strerror(want), gs_last_error());                                  \
    else if (strlen(gs_last_error()) == 0)                                       \
      fail("%s: empty gs_last_error()", #call);                                  \
    else if ((needle) != NULL && strstr(gs_last_error(), (needle)) == NULL)      \
      fail("%s: message \"%s\" does not mention \"%s\"", #call, gs_last_error(), \
           (const char *)(needle));                                              \
  } while (0)

static void test_bad_input(void) {
  float a[16] = {0}, b[16 * 8] = {0};
  size_t p = (size_t)g_size;
  const char *none = NULL;

  begin_case("bad input: NULL buffers");
  gs_request *req = (gs_request *)a;
  EXPECT_ERR(gs_iallreduce(g_comm, a, NULL, 4, GS_F32, GS_SUM, GS_ALGO_AUTO, &req),
             GS_ERR_INVALID_ARG, "NULL");
  CHECK(req == NULL, "*req not set to NULL on an argument error");
  EXPECT_ERR(gs_allreduce(g_comm, NULL, b, 4, GS_F32, GS_SUM, GS_ALGO_RING),
             GS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(gs_allreduce(g_comm, GS_IN_PLACE, NULL, 4, GS_F32, GS_SUM, GS_ALGO_AUTO),
             GS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(gs_reduce_scatter(g_comm, a, NULL, 1, GS_F32, GS_SUM, GS_ALGO_RING),
             GS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(gs_reduce_scatter(g_comm, NULL, b, 1, GS_F32, GS_SUM, GS_ALGO_RING),
             GS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(gs_allgather(g_comm, a, NULL, 1, GS_F32, GS_ALGO_AUTO), GS_ERR_INVALID_ARG,
             "NULL");
  EXPECT_ERR(gs_bcast(g_comm, NULL, 3, GS_F32, 0, GS_ALGO_AUTO), GS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(gs_alltoall(g_comm, NULL, b, 1, GS_F32, GS_ALGO_AUTO), GS_ERR_INVALID_ARG,
             "NULL");
  EXPECT_ERR(gs_iallreduce(g_comm, a, b, 4, GS_F32, GS_SUM, GS_ALGO_AUTO, NULL),
             GS_ERR_INVALID_ARG, none);
  end_case();

  begin_case("bad input: invalid dtype, op, algorithm");
  EXPECT_ERR(gs_allreduce(g_comm, a, b, 4, GS_DTYPE_COUNT, GS_SUM, GS_ALGO_AUTO),
             GS_ERR_INVALID_ARG, "dtype");
  EXPECT_ERR(gs_allreduce(g_comm, a, b, 4, (gs_dtype)-1, GS_SUM, GS_ALGO_AUTO),
             GS_ERR_INVALID_ARG, "dtype");
  EXPECT_ERR(gs_allreduce(g_comm, a, b, 4, GS_F32, GS_REDOP_COUNT, GS_ALGO_AUTO),
             GS_ERR_INVALID_ARG, "op");
  EXPECT_ERR(gs_allreduce(g_comm, a, b, 4, GS_F32, (gs_redop)-1, GS_ALGO_AUTO),
             GS_ERR_INVALID_ARG, "op");
  EXPECT_ERR(gs_allreduce(g_comm, a, b, 4, GS_F32, GS_SUM, GS_ALGO_COUNT),
             GS_ERR_INVALID_ARG, "algorithm");
  EXPECT_ERR(gs_allreduce(g_comm, a, b, 4, GS_F32, GS_SUM, (gs_algo)-1),
             GS_ERR_INVALID_ARG, "algorithm");
  EXPECT_ERR(gs_bcast(g_comm, a, 4, GS_BF16, 0, (gs_algo)99), GS_ERR_INVALID_ARG, none);
  EXPECT_ERR(gs_reduce_scatter(g_comm, b, a, 1, GS_F32, GS_REDOP_COUNT, GS_ALGO_RING),
             GS_ERR_INVALID_ARG, none);
  EXPECT_ERR(gs_allgather(g_comm, a, b, 1, GS_DTYPE_COUNT, GS_ALGO_RING),
             GS_ERR_INVALID_ARG, none);
  EXPECT_ERR(gs_barrier(g_comm, GS_ALGO_COUNT), GS_ERR_INVALID_ARG, none);
  /* Counts whose byte size overflows. */
  EXPECT_ERR(gs_allreduce(g_comm, a, b, SIZE_MAX / 2, GS_F32, GS_SUM, GS_ALGO_AUTO),
             GS_ERR_INVALID_ARG, none);
  EXPECT_ERR(gs_allgather(g_comm, a, b, SIZE_MAX / 2, GS_F32, GS_ALGO_AUTO),
             GS_ERR_INVALID_ARG, none);
  end_case();

  begin_case("bad input: algorithm lacks the collective");
  const gs_algo not_ar[] = {GS_ALGO_PIPELINE, GS_ALGO_BINOMIAL, GS_ALGO_PAIRWISE,
                            GS_ALGO_DISSEMINATION};
  for (size_t k = 0; k < 4; k++)
    EXPECT_ERR(gs_allreduce(g_comm, a, b, 4, GS_F32, GS_SUM, not_ar[k]),
               GS_ERR_UNSUPPORTED, gs_algo_name(not_ar[k]));
  const gs_algo not_bc[] = {GS_ALGO_RING, GS_ALGO_RD, GS_ALGO_RABENSEIFNER,
                            GS_ALGO_HIER, GS_ALGO_PAIRWISE, GS_ALGO_DISSEMINATION};
  for (size_t k = 0; k < 6; k++)
    EXPECT_ERR(gs_bcast(g_comm, a, 4, GS_F32, 0, not_bc[k]), GS_ERR_UNSUPPORTED,
               gs_algo_name(not_bc[k]));
  EXPECT_ERR(gs_reduce_scatter(g_comm, b, a, 1, GS_F32, GS_SUM, GS_ALGO_PIPELINE),
             GS_ERR_UNSUPPORTED, "pipeline");
  EXPECT_ERR(gs_reduce_scatter(g_comm, b, a, 1, GS_F32, GS_SUM, GS_ALGO_HIER),
             GS_ERR_UNSUPPORTED, "hier");
  EXPECT_ERR(gs_allgather(g_comm, a, b, 1, GS_F32, GS_ALGO_BINOMIAL),
             GS_ERR_UNSUPPORTED, "binomial");
  /* Recursive doubling is an allreduce algorithm only (comm.h). */
  EXPECT_ERR(gs_allgather(g_comm, a, b, 1, GS_F32, GS_ALGO_RD), GS_ERR_UNSUPPORTED, "rd");
  EXPECT_ERR(gs_reduce_scatter(g_comm, b, a, 1, GS_F32, GS_SUM, GS_ALGO_RD),
             GS_ERR_UNSUPPORTED, "rd");
  EXPECT_ERR(gs_reduce_scatter(g_comm, b, a, 1, GS_F32, GS_SUM, GS_ALGO_RABENSEIFNER),
             GS_ERR_UNSUPPORTED, "rabenseifner");
  EXPECT_ERR(gs_alltoall(g_comm, a, b, 1, GS_F32, GS_ALGO_RING), GS_ERR_UNSUPPORTED,
             "ring");
  EXPECT_ERR(gs_barrier(g_comm, GS_ALGO_RING), GS_ERR_UNSUPPORTED, "ring");
  EXPECT_ERR(gs_alltoall(g_comm, GS_IN_PLACE, b, 1, GS_F32, GS_ALGO_AUTO),
             GS_ERR_UNSUPPORTED, "IN_PLACE");
  end_case();

  begin_case("bad input: bcast root out of range");
  EXPECT_ERR(gs_bcast(g_comm, a, 4, GS_F32, -1, GS_ALGO_AUTO), GS_ERR_INVALID_ARG, "root");
  EXPECT_ERR(gs_bcast(g_comm, a, 4, GS_F32, g_size, GS_ALGO_BINOMIAL), GS_ERR_INVALID_ARG,
             "root");
  EXPECT_ERR(gs_bcast(g_comm, a, 4, GS_F32, g_size + 100, GS_ALGO_MPI), GS_ERR_INVALID_ARG,
             "root");
  end_case();

  begin_case("bad input: v-variant tables");
  size_t *cnt = xmalloc(p * sizeof *cnt), *dsp = xmalloc(p * sizeof *dsp);
  float *big = xmalloc(sizeof(float) * (p * 2 + 2));
  for (size_t r = 0; r < p; r++) {
    cnt[r] = 1;
    dsp[r] = r;
  }
  EXPECT_ERR(gs_allgatherv(g_comm, a, 2, big, cnt, dsp, GS_F32, GS_ALGO_RING),
             GS_ERR_INVALID_ARG, "sendcount");
  EXPECT_ERR(gs_allgatherv(g_comm, a, 1, big, NULL, dsp, GS_F32, GS_ALGO_RING),
             GS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(gs_allgatherv(g_comm, a, 1, big, cnt, NULL, GS_F32, GS_ALGO_RING),
             GS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(gs_allgatherv(g_comm, a, 1, NULL, cnt, dsp, GS_F32, GS_ALGO_RING),
             GS_ERR_INVALID_ARG, "NULL");
  dsp[p - 1] = SIZE_MAX;
  EXPECT_ERR(gs_allgatherv(g_comm, a, 1, big, cnt, dsp, GS_F32, GS_ALGO_RING),
             GS_ERR_INVALID_ARG, none);
  dsp[p - 1] = p - 1;
  EXPECT_ERR(gs_alltoallv(g_comm, big, cnt, dsp, big, NULL, dsp, GS_F32, GS_ALGO_AUTO),
             GS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(gs_alltoallv(g_comm, NULL, cnt, dsp, big, cnt, dsp, GS_F32, GS_ALGO_AUTO),
             GS_ERR_INVALID_ARG, "NULL");
  free(cnt);
  free(dsp);
  free(big);
  end_case();

  /* NULL buffers are fine with nothing to move, and the communicator still
   * works after all the errors above. */
  begin_case("bad input: count 0 with NULL buffers, then a normal call");
  CHECK_ST(gs_allreduce(g_comm, NULL, NULL, 0, GS_F32, GS_SUM, GS_ALGO_AUTO), GS_OK);
  CHECK_ST(gs_allreduce(g_comm, GS_IN_PLACE, NULL, 0, GS_I64, GS_MAX, GS_ALGO_RING), GS_OK);
  CHECK_ST(gs_bcast(g_comm, NULL, 0, GS_F32, 0, GS_ALGO_PIPELINE), GS_OK);
  CHECK_ST(gs_allgather(g_comm, NULL, NULL, 0, GS_F32, GS_ALGO_RING), GS_OK);
  CHECK_ST(gs_reduce_scatter(g_comm, NULL, NULL, 0, GS_F32, GS_SUM, GS_ALGO_RING), GS_OK);
  int v = g_rank + 1;
  CHECK_ST(gs_allreduce(g_comm, GS_IN_PLACE, &v, 1, GS_I32, GS_SUM, GS_ALGO_AUTO), GS_OK);
  CHECK(v == g_size * (g_size + 1) / 2, "sum of ranks+1: got %d", v);
  end_case();
}

/* ---- GRADSYNC_CHECK ------------------------------------------------------------ */

static void expect_mismatch(const char *what, gs_status st, const char *needle) {
  begin_case("mismatch: %s", what);
  if (st != GS_ERR_MISMATCH)
    fail("status %s, want %s (%s)", gs_strerror(st), gs_strerror(GS_ERR_MISMATCH),
         gs_last_error());
  else if (strstr(gs_last_error(), needle) == NULL)
    fail("message \"%s\" does not name \"%s\"", gs_last_error(), needle);
  end_case();
}

static void test_mismatch(void) {
  const char *env = getenv("GRADSYNC_CHECK");
  begin_case("mismatch: GRADSYNC_CHECK is set");
  CHECK(env && strcmp(env, "0") != 0, "run --mismatch with GRADSYNC_CHECK=1");
  end_case();
  if (g_size < 2) return;
  double a[16], b[16];
  for (int i = 0; i < 16; i++) a[i] = i;

  expect_mismatch("count differs on rank 1",
                  gs_allreduce(g_comm, a, b, g_rank == 1 ? 5 : 4, GS_F64, GS_SUM,
                               GS_ALGO_RING),
                  "rank 1 ");
  expect_mismatch("dtype differs on rank 1",
                  gs_allreduce(g_comm, a, b, 4, g_rank == 1 ? GS_I64 : GS_F64, GS_SUM,
                               GS_ALGO_AUTO),
                  "rank 1 ");
  int odd = g_size - 1;
  char odd_name[32];
  snprintf(odd_name, sizeof odd_name, "rank %d ", odd);
  expect_mismatch("op differs on the last rank",
                  gs_allreduce(g_comm, a, b, 4, GS_F64, g_rank == odd ? GS_MAX : GS_SUM,
                               GS_ALGO_MPI),
                  odd_name);
  expect_mismatch("algorithm differs on rank 1",
                  gs_allreduce(g_comm, a, b, 4, GS_F64, GS_SUM,
                               g_rank == 1 ? GS_ALGO_RD : GS_ALGO_RING),
                  "rank 1 ");
  expect_mismatch("bcast root differs on rank 1",
                  gs_bcast(g_comm, a, 4, GS_F64, g_rank == 1 ? 1 : 0, GS_ALGO_BINOMIAL),
                  "rank 1 ");
  expect_mismatch("rank 1 calls bcast, the others allreduce",
                  g_rank == 1 ? gs_bcast(g_comm, a, 4, GS_F64, 0, GS_ALGO_MPI)
                              : gs_allreduce(g_comm, a, b, 4, GS_F64, GS_SUM, GS_ALGO_MPI),
                  "rank 1 ");
  expect_mismatch("reduce_scatter count differs on rank 1",
                  gs_reduce_scatter(g_comm, g_rank == 1 ? GS_IN_PLACE : a, b,
                                    g_rank == 1 ? 2 : 1, GS_F64, GS_SUM, GS_ALGO_RING),
                  "rank 1 ");

  /* Legitimate differences between ranks are not mismatches. */
  begin_case("mismatch: in-place on some ranks only is fine");
  for (int i = 0; i < 16; i++) a[i] = i;
  CHECK_ST(gs_allreduce(g_comm, g_rank % 2 ? GS_IN_PLACE : a, g_rank % 2 ? a : b, 16,
                        GS_F64, GS_SUM, GS_ALGO_RING),
           GS_OK);
  const double *res = g_rank % 2 ? a : b;
  for (int i = 0; i < 16; i++) CHECK(res[i] == (double)i * g_size, "element %d", i);
  end_case();
}

/* ---- Messages above 64 MiB --------------------------------------------------- */

/* One case of about 80 MiB per collective and algorithm (not the dtype x op
 * matrix): past the 64 MiB window, so that the algorithms work in several
 * windows (recursive doubling, Rabenseifner, MPI's calls, the packed
 * reduce-scatter) or with bounded ring slots. */
#define LARGE_BYTES ((size_t)80 << 20)

static void test_large(void) {
  size_t p = (size_t)g_size;
  const gs_algo ar[] = {GS_ALGO_RING, GS_ALGO_RD, GS_ALGO_RABENSEIFNER,
                        GS_ALGO_HIER, GS_ALGO_MPI};
  size_t n32 = LARGE_BYTES / 4 + 3;
  for (size_t a = 0; a < sizeof ar / sizeof ar[0]; a++)
    allreduce_case(ar[a], GS_F32, GS_SUM, n32, 1);
  allreduce_case(GS_ALGO_MPI, GS_F32, GS_AVG, n32, 0);

  /* Out of place: the ring's and MPI's packed windows. */
  const gs_algo two[] = {GS_ALGO_RING, GS_ALGO_MPI};
  for (size_t a = 0; a < 2; a++)
    reduce_scatter_case(two[a], GS_F32, GS_SUM, LARGE_BYTES / (4 * p) + 1, 0);

  size_t *counts = xmalloc(p * sizeof *counts), *displs = xmalloc(p * sizeof *displs);
  size_t blk = LARGE_BYTES / p + 5;
  for (size_t r = 0; r < p; r++) {
    counts[r] = blk;
    displs[r] = r * blk;
  }
  for (size_t a = 0; a < 2; a++)
    allgatherv_case("allgather 80 MiB", two[a], GS_U8, counts, displs, 1, 0);
  /* Uneven blocks in reverse rank order, with gaps. */
  size_t at = 1;
  for (size_t k = 0; k < p; k++) {
    size_t r = p - 1 - k;
    counts[r] = blk / 2 + r * 4099;
    displs[r] = at;
    at += counts[r] + 3;
  }
  allgatherv_case("allgatherv 80 MiB uneven", GS_ALGO_MPI, GS_U8, counts, displs, 0, 1);
  free(counts);
  free(displs);

  const gs_algo bc[] = {GS_ALGO_PIPELINE, GS_ALGO_MPI};
  for (size_t a = 0; a < 2; a++) bcast_case(bc[a], GS_U8, LARGE_BYTES + 3, g_size - 1);

  const gs_algo aa[] = {GS_ALGO_PAIRWISE, GS_ALGO_MPI};
  for (size_t a = 0; a < 2; a++) alltoall_case(aa[a], GS_U8, LARGE_BYTES / p + 7, 0);
  /* a2a_count averages 4.5 elements per pair: about 80 MiB sent per rank. */
  g_a2a_scale = LARGE_BYTES / (p * 9) * 2 + 1;
  alltoall_case(GS_ALGO_MPI, GS_U8, 0, 1);
  g_a2a_scale = 1;
}

/* ---- Main ------------------------------------------------------------------------ */

static void probe_topology(void) {
  int ls = gs_comm_local_size(g_comm), mm[2] = {ls, -ls};
  MPI_Allreduce(MPI_IN_PLACE, mm, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  g_hier_uniform = mm[0] == -mm[1];
  begin_case("topology");
  CHECK(gs_comm_rank(g_comm) == g_rank, "rank %d", gs_comm_rank(g_comm));
  CHECK(gs_comm_size(g_comm) == g_size, "size %d", gs_comm_size(g_comm));
  CHECK(gs_comm_local_rank(g_comm) >= 0 && gs_comm_local_rank(g_comm) < ls, "local rank");
  CHECK(gs_comm_node(g_comm) >= 0 && gs_comm_node(g_comm) < gs_comm_nodes(g_comm), "node");
  int nodes = gs_comm_nodes(g_comm), sum_ls = 0;
  int leaders = gs_comm_local_rank(g_comm) == 0;
  MPI_Allreduce(MPI_IN_PLACE, &leaders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(leaders == nodes, "%d node leaders, %d nodes", leaders, nodes);
  MPI_Allreduce(&ls, &sum_ls, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  /* sum over ranks of local_size = sum over nodes of size^2 >= p */
  CHECK(sum_ls >= g_size, "local sizes");
  const char *node_env = getenv("GRADSYNC_NODE");
  if (node_env && *node_env) {
    int mine = atoi(node_env), same = 0;
    int *all = xmalloc(sizeof(int) * (size_t)g_size);
    MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < g_size; r++) same += all[r] == mine;
    CHECK(same == ls, "GRADSYNC_NODE=%d: %d ranks share it, local size %d", mine, same, ls);
    free(all);
  }
  /* Every rank of these tests runs on one host: a node of several ranks
   * shares memory unless GRADSYNC_SHM=0 turned that off. */
  const char *shm_env = getenv("GRADSYNC_SHM");
  int want_shm = ls > 1 && !(shm_env && strcmp(shm_env, "0") == 0);
  CHECK(gs_comm_shared_memory(g_comm) == want_shm, "node-local shared memory %s, "
        "expected %s (local size %d, GRADSYNC_SHM=%s)",
        gs_comm_shared_memory(g_comm) ? "on" : "off", want_shm ? "on" : "off", ls,
        shm_env ? shm_env : "(unset)");
  end_case();
  if (g_rank == 0)
    printf("test_collectives: %d ranks, %d node(s), local size %d, hier %s, "
           "node-local %s\n", g_size, nodes, ls,
           g_hier_uniform ? "uniform" : "not uniform",
           gs_comm_shared_memory(g_comm) ? "shared memory" : "messages");
}

int main(int argc, char **argv) {
  int mismatch = 0, large = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--mismatch") == 0) {
      mismatch = 1;
    } else if (strcmp(argv[i], "--large") == 0) {
      large = 1;
    } else {
      fprintf(stderr, "usage: %s [--mismatch | --large]\n", argv[0]);
      return 2;
    }
  }
  mrt_init(&argc, &argv);
  probe_topology();
  /* Under --mismatch the whole matrix runs too, with GRADSYNC_CHECK on:
   * legitimate per-rank differences (allgatherv and alltoallv counts,
   * in-place on some ranks) must not be reported as mismatches. */
  if (mismatch) test_mismatch();
  if (large) {
    test_large();
  } else {
    test_bad_input();
    test_barrier();
    test_create_like();
    test_nonblocking();
    test_allreduce();
    test_reduce_scatter();
    test_u8_wrap();
    test_allgather();
    test_bcast();
    test_alltoall();
  }
  begin_case("gs_comm_destroy");
  CHECK_ST(gs_comm_destroy(g_comm), GS_OK);
  end_case();
  return mrt_finish();
}
