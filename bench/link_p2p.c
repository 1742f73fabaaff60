/* Point-to-point time of one message between two ranks, by size: the
 * measurement behind bench/link_p2p.sh and docs/NETWORK.md.
 *
 * Rank 0 sends M bytes to rank 1, which answers with M bytes (a ping-pong);
 * half the round trip is the one-way time of M bytes. Each direction rests
 * while the other one sends, as a link does between the messages of a
 * training step, so a shaper that lets a burst through after an idle moment
 * shows here as messages that are faster than the link's rate allows.
 *
 * Plain MPI_Send/MPI_Recv, nothing of gradsync's: this measures the link.
 *
 * usage: link_p2p MIN_BYTES MAX_BYTES [BUDGET_S]
 * Sizes go from MIN to MAX by factors of 2. Each size is repeated up to 15
 * times within BUDGET_S seconds (default 20), at least 3 times, after one
 * warm-up round trip. Rank 0 prints one JSON line per size:
 *   {"bytes": M, "reps": R, "median_s": ..., "min_s": ..., "max_s": ...}
 * with the one-way times (half the round trip). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPS 15
#define MIN_REPS 3

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One round trip of n bytes; returns its time on rank 0 (0 elsewhere). */
static double round_trip(char *buf, long n, int rank) {
  double t0 = MPI_Wtime();
  if (rank == 0) {
    MPI_Send(buf, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
    MPI_Recv(buf, (int)n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (rank == 1) {
    MPI_Recv(buf, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(buf, (int)n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
  }
  return MPI_Wtime() - t0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char *end1 = NULL, *end2 = NULL, *end3 = NULL;
  long lo = argc > 2 ? strtol(argv[1], &end1, 10) : 0;
  long hi = argc > 2 ? strtol(argv[2], &end2, 10) : 0;
  double budget = argc > 3 ? strtod(argv[3], &end3) : 20.0;
  if (size != 2 || argc < 3 || argc > 4 || *end1 || *end2 || (end3 && *end3) || lo < 1 ||
      hi < lo || hi > (1L << 30) || !(budget > 0)) {
    if (rank == 0)
      fprintf(stderr, "usage: link_p2p MIN_BYTES MAX_BYTES [BUDGET_S] on exactly 2 ranks "
                      "(1 <= MIN <= MAX <= 1 GiB, BUDGET_S > 0); got %d ranks\n", size);
    MPI_Finalize();
    return 2;
  }
  char *buf = malloc((size_t)hi);
  if (buf == NULL) {
    fprintf(stderr, "link_p2p: rank %d: cannot allocate %ld bytes\n", rank, hi);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(buf, rank + 1, (size_t)hi);
  for (long n = lo; n <= hi; n *= 2) {
    double t[MAX_REPS];
    double first = round_trip(buf, n, rank); /* warm-up: connections, pages */
    MPI_Bcast(&first, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int reps = (int)(budget / (first > 1e-9 ? first : 1e-9));
    reps = reps < MIN_REPS ? MIN_REPS : reps > MAX_REPS ? MAX_REPS : reps;
    for (int i = 0; i < reps; i++) {
      /* A short rest before each message, so every one starts on an idle
       * link, as after a step's compute. */
      MPI_Barrier(MPI_COMM_WORLD);
      t[i] = round_trip(buf, n, rank) / 2;
    }
    if (rank == 0) {
      qsort(t, (size_t)reps, sizeof t[0], cmp_double);
      printf("{\"bytes\": %ld, \"reps\": %d, \"median_s\": %.9g, \"min_s\": %.9g, "
             "\"max_s\": %.9g}\n", n, reps, t[reps / 2], t[0], t[reps - 1]);
      fflush(stdout);
    }
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
