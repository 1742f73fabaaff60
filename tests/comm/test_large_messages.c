/*
 * Collectives across 2^31 bytes, on 2 ranks over shared memory: every count
 * and offset past INT_MAX must survive every algorithm, and the scratch
 * memory must stay bounded by the window, not grow with the message.
 *
 *   test_large_messages [--quick] [--bytes N] [--allreduce ALGO]
 *
 * Each rank holds one buffer of a little over 2 GiB, worked on in place (the
 * allgather's output is that buffer, the broadcast's too), so the test needs
 * about 4.5 GiB of memory on 2 ranks. Results are checked at sampled
 * positions and around every boundary that matters (INT_MAX, 2^31, the
 * window edges, the ends), not at every byte: the point is the indexing.
 *
 * Peak memory: after the buffer is allocated and touched, a collective may
 * raise the process's peak resident size (getrusage's ru_maxrss) by at most
 * PEAK_SLACK. Before the bounded windows, a 2 GiB ring allreduce grew
 * it by a whole chunk (1 GiB) of receive slots.
 *
 * --quick runs the allreduce with ring and mpi only (for slow machines).
 * --bytes N works on N bytes instead of 2^31 + 4099 (to measure the peak
 * memory of other sizes). Rank 0 prints each case's time and growth of
 * the peak resident size. --allreduce ALGO runs only that allreduce, so that
 * its peak is measured alone.
 * A failing check prints "FAIL rank R case C: ..."; the exit status is
 * non-zero if any case failed on any rank.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "gradsync.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
/* Bytes past 2^31: odd, so that no block split comes out even. */
#define TAIL 4099
#define PEAK_SLACK ((size_t)256 << 20)

static int g_rank, g_size;
static gs_comm *g_comm;
static long g_pass, g_fail;
static char g_case[160];
static int g_case_failed;
static double g_case_t0;

static void begin_case(const char *what, gs_algo algo) {
  snprintf(g_case, sizeof g_case, "%s algo=%s", what, gs_algo_name(algo));
  g_case_failed = 0;
  g_case_t0 = MPI_Wtime();
}

static void end_case(void) {
  if (g_rank == 0) printf("%s: %.1f s\n", g_case, MPI_Wtime() - g_case_t0);
  if (g_case_failed)
    g_fail++;
  else
    g_pass++;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  if (g_case_failed) return;
  g_case_failed = 1;
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("FAIL rank %d case %s: %s\n", g_rank, g_case, msg);
  fflush(stdout);
}

static size_t peak_rss(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (size_t)ru.ru_maxrss * 1024;
}

/* Byte j of rank r's data: below 100, so that a sum over 2 ranks fits a
 * u8; it changes every byte and every 16 MiB region differently. */
static unsigned char pattern(int r, size_t j) {
  return (unsigned char)((j % 97 + (j >> 24) + (size_t)r * 11) % 100);
}

/* buf[k] = pattern(r, j0 + k) for k < n, at memcpy speed: within a 16 MiB
 * region the pattern repeats every 97 bytes. */
#define REP (97 * 1024)
static void fill(unsigned char *buf, size_t n, int r, size_t j0) {
  static unsigned char rep[REP + 97];
  size_t k = 0;
  while (k < n) {
    size_t j = j0 + k, region_end = ((j >> 24) + 1) << 24;
    size_t end = MIN(n, region_end - j0);
    for (size_t i = 0; i < sizeof rep; i++)
      rep[i] = (unsigned char)((i % 97 + (j >> 24) + (size_t)r * 11) % 100);
    while (k < end) {
      size_t m = MIN((size_t)REP, end - k);
      memcpy(buf + k, rep + (j0 + k) % 97, m);
      k += m;
    }
  }
}

#define NSAMPLES (64 + 4096)

static size_t sample_at(size_t n, size_t k) {
  static const size_t fixed[] = {0, 1, 2, 3};
  if (k < 4) return fixed[k];
  if (k < 8) return n - 1 - (k - 4);
  if (k < 64) {
    /* 56 positions around INT_MAX, 2^31, and window edges below them. */
    size_t base[] = {(size_t)INT_MAX, (size_t)1 << 31, ((size_t)1 << 31) - (64u << 20),
                     (size_t)1 << 30, ((size_t)1 << 30) + (64u << 20),
                     n / 2, n / 2 - 1};
    size_t b = base[(k - 8) % 7];
    size_t off = (k - 8) / 7; /* 0..7 */
    size_t at = b + off - 3;
    return at < n ? at : n - 1;
  }
  uint64_t h = (uint64_t)k * 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  return (size_t)(h % n);
}

static unsigned char *xmalloc(size_t n) {
  unsigned char *b = malloc(n);
  if (b == NULL) {
    fprintf(stderr, "rank %d: cannot allocate %zu bytes\n", g_rank, n);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return b;
}

/* MPI's own temporary buffers are MPI's (Open MPI's allreduce takes half a
 * call, up to 512 MiB): algorithm mpi is reported, not checked. */
static void check_peak(size_t before, gs_algo algo) {
  size_t after = peak_rss();
  if (g_rank == 0)
    printf("%s: peak resident size grew by %zu MiB\n", g_case, (after - before) >> 20);
  if (algo == GS_ALGO_MPI) return;
  if (after > before + PEAK_SLACK)
    fail("peak resident size grew by %zu MiB (limit %zu MiB): scratch not bounded",
         (after - before) >> 20, PEAK_SLACK >> 20);
}

/* In-place u8 sum of 2^31 + TAIL bytes. */
static void allreduce_case(unsigned char *buf, size_t n, gs_algo algo) {
  begin_case("allreduce u8 sum in place", algo);
  fill(buf, n, g_rank, 0);
  size_t before = peak_rss();
  gs_status st = gs_allreduce(g_comm, GS_IN_PLACE, buf, n, GS_U8, GS_SUM, algo);
  if (st != GS_OK) {
    fail("status %s (%s)", gs_strerror(st), gs_last_error());
  } else {
    for (size_t k = 0; k < NSAMPLES; k++) {
      size_t j = sample_at(n, k);
      unsigned want = 0;
      for (int r = 0; r < g_size; r++) want += pattern(r, j);
      if (buf[j] != (unsigned char)want) {
        fail("byte %zu: got %u, want %u", j, buf[j], want);
        break;
      }
    }
    check_peak(before, algo);
  }
  end_case();
}

/* Allgather in place: each rank's block of n/p bytes (over 2^30 on 2
 * ranks), the whole output past 2^31. */
static void allgather_case(unsigned char *buf, size_t n, gs_algo algo) {
  begin_case("allgather u8 in place", algo);
  size_t blk = n / (size_t)g_size;
  memset(buf, 0xA5, n);
  fill(buf + (size_t)g_rank * blk, blk, g_rank, 0);
  size_t before = peak_rss();
  gs_status st = gs_allgather(g_comm, GS_IN_PLACE, buf, blk, GS_U8, algo);
  if (st != GS_OK) {
    fail("status %s (%s)", gs_strerror(st), gs_last_error());
  } else {
    for (size_t k = 0; k < NSAMPLES; k++) {
      size_t j = sample_at(blk * (size_t)g_size, k);
      int r = (int)(j / blk);
      unsigned char want = pattern(r, j % blk);
      if (buf[j] != want) {
        fail("byte %zu (rank %d's block): got %u, want %u", j, r, buf[j], want);
        break;
      }
    }
    check_peak(before, algo);
  }
  end_case();
}

static void bcast_case(unsigned char *buf, size_t n, gs_algo algo) {
  begin_case("bcast u8 root p-1", algo);
  int root = g_size - 1;
  if (g_rank == root)
    fill(buf, n, root, 0);
  else
    memset(buf, 0xEE, n);
  size_t before = peak_rss();
  gs_status st = gs_bcast(g_comm, buf, n, GS_U8, root, algo);
  if (st != GS_OK) {
    fail("status %s (%s)", gs_strerror(st), gs_last_error());
  } else {
    for (size_t k = 0; k < NSAMPLES; k++) {
      size_t j = sample_at(n, k);
      if (buf[j] != pattern(root, j)) {
        fail("byte %zu: got %u, want %u", j, buf[j], pattern(root, j));
        break;
      }
    }
    check_peak(before, algo);
  }
  end_case();
}

int main(int argc, char **argv) {
  int quick = 0, have_only = 0;
  gs_algo only = GS_ALGO_AUTO;
  size_t n = ((size_t)1 << 31) + TAIL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
    } else if (strcmp(argv[i], "--allreduce") == 0 && i + 1 < argc) {
      have_only = 1;
      if (gs_algo_parse(argv[++i], &only) != GS_OK) {
        fprintf(stderr, "%s\n", gs_last_error());
        return 2;
      }
    } else if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc) {
      n = (size_t)strtoull(argv[++i], NULL, 10);
    } else {
      fprintf(stderr, "usage: %s [--quick] [--bytes N] [--allreduce ALGO]\n", argv[0]);
      return 2;
    }
  }
  if (gs_init(&argc, &argv) != GS_OK) {
    fprintf(stderr, "gs_init: %s\n", gs_last_error());
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (gs_comm_create(MPI_COMM_WORLD, &g_comm) != GS_OK) {
    fprintf(stderr, "FAIL rank %d case gs_comm_create: %s\n", g_rank, gs_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (g_rank == 0) printf("test_large_messages: %d ranks, %zu bytes\n", g_size, n);
  unsigned char *buf = xmalloc(n);
  memset(buf, 0, n);

  /* Recursive doubling windows like Rabenseifner; the window tests of
   * test_collectives cover it. */
  const gs_algo ar_algos[] = {GS_ALGO_RING, GS_ALGO_MPI, GS_ALGO_RABENSEIFNER};
  size_t nar = quick ? 2 : sizeof ar_algos / sizeof ar_algos[0];
  if (have_only) {
    allreduce_case(buf, n, only);
  } else {
    for (size_t a = 0; a < nar; a++) allreduce_case(buf, n, ar_algos[a]);
  }
  if (!quick && !have_only) {
    const gs_algo ag_algos[] = {GS_ALGO_RING, GS_ALGO_MPI};
    for (size_t a = 0; a < 2; a++) allgather_case(buf, n, ag_algos[a]);
    const gs_algo bc_algos[] = {GS_ALGO_PIPELINE, GS_ALGO_MPI};
    for (size_t a = 0; a < 2; a++) bcast_case(buf, n, bc_algos[a]);
  }
  free(buf);

  if (gs_comm_destroy(g_comm) != GS_OK) {
    printf("FAIL rank %d case gs_comm_destroy: %s\n", g_rank, gs_last_error());
    g_fail++;
  }
  long local[2] = {g_pass, g_fail}, total[2] = {0, 0};
  MPI_Allreduce(local, total, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("%ld passed, %ld failed\n", total[0], total[1]);
  gs_finalize();
  return total[1] ? 1 : 0;
}
