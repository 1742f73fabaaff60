/*
 * Unit checks of the training library's pieces that need no ranks:
 *   - a batch of 32x32 images gathered for a 28x28 net is refused, never
 *     written past the buffer (the heap corruption issue 14 saw: the loop
 *     gathers with gs_nn_dataset_gather_n, bounded by the buffer);
 *   - the breakdown's buckets: added in order of first use, summed, and
 *     bounded in number and name length;
 *   - the epoch's samples keyed by position: runs of different world sizes
 *     and batches, resumed at each other's commits, use every sample of
 *     the permutation before the last position exactly once;
 *   - the compressor memory's files: each rank's own read back, the mean
 *     over the old ranks' on another world size, bad files named.
 * Exits 1 after printing "FAIL ..." on a failed check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sync_memory.h"
#include "train_internal.h"

static int fails;
#define CHECK(cond, ...)                           \
  do {                                             \
    if (!(cond)) {                                 \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                         \
      printf("\n");                                \
      fails++;                                     \
    }                                              \
  } while (0)

static void gather_bounds(void) {
  gs_nn_dataset big = {0}, fit = {0};
  if (gs_nn_dataset_synthetic(&big, 16, 1, 32, 32, 10, 1.0f, 3) != GS_OK ||
      gs_nn_dataset_synthetic(&fit, 16, 1, 28, 28, 10, 1.0f, 3) != GS_OK) {
    printf("FAIL synthetic sets: %s\n", gs_last_error());
    exit(1);
  }
  enum { B = 4 };
  size_t idx[B] = {0, 5, 9, 15};
  /* Exactly a 28x28 batch: ASan reports any write past it. */
  float *x = malloc((size_t)B * 28 * 28 * sizeof(float));
  int32_t y[B];
  gs_status st = gs_nn_dataset_gather_n(&big, idx, B, x, (size_t)B * 28 * 28, y);
  CHECK(st == GS_ERR_INVALID_ARG, "32x32 into a 28x28 batch: status %d", (int)st);
  CHECK(strstr(gs_last_error(), "1x32x32") != NULL, "the message does not name the shape: %s",
        gs_last_error());
  st = gs_nn_dataset_gather_n(&fit, idx, B, x, (size_t)B * 28 * 28, y);
  CHECK(st == GS_OK, "28x28 into a 28x28 batch: %s", gs_last_error());
  CHECK(st != GS_OK || (memcmp(x + 784, fit.images + 5 * 784, 784 * sizeof(float)) == 0 &&
                        y[3] == fit.labels[15]),
        "the gathered samples are not the data set's");
  st = gs_nn_dataset_gather_n(&fit, idx, B, x, (size_t)B * 28 * 28 - 1, y);
  CHECK(st == GS_ERR_INVALID_ARG, "one float short: status %d", (int)st);
  free(x);
  gs_nn_dataset_free(&big);
  gs_nn_dataset_free(&fit);
}

static void breakdown(void) {
  gs_train_breakdown b = {0};
  CHECK(gs_train_breakdown_add(&b, "compute", 1.0) == 0, "add compute");
  CHECK(gs_train_breakdown_add(&b, "comm", 0.5) == 0, "add comm");
  CHECK(gs_train_breakdown_add(&b, "compute", 2.0) == 0, "add compute again");
  CHECK(b.n == 2 && strcmp(b.bucket[0].name, "compute") == 0, "order of first use");
  CHECK(gs_train_breakdown_get(&b, "compute") == 3.0, "compute sums to %g",
        gs_train_breakdown_get(&b, "compute"));
  CHECK(gs_train_breakdown_get(&b, "nothing") == 0, "a missing bucket reads 0");
  char longname[GS_TRAIN_BREAKDOWN_NAME + 1];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  CHECK(gs_train_breakdown_add(&b, longname, 1) == -1 && b.n == 2, "a too long name is refused");
  for (int i = b.n; i < GS_TRAIN_BREAKDOWN_MAX; i++) {
    char name[16];
    snprintf(name, sizeof name, "b%d", i);
    CHECK(gs_train_breakdown_add(&b, name, 1) == 0, "bucket %d", i);
  }
  CHECK(gs_train_breakdown_add(&b, "one_too_many", 1) == -1 && b.n == GS_TRAIN_BREAKDOWN_MAX,
        "more than %d buckets are refused", GS_TRAIN_BREAKDOWN_MAX);
}

/* An epoch of 1000 samples cut by commits into runs of different world
 * sizes: 4 x 12 (global 48) for 5 steps, 3 x 16 (48, the global batch
 * kept) for 7, 6 x 8 (48) for 3, then linear scaling's 5 x 12 (60) for 4.
 * Every rank's indices of every step, together, must be exactly the
 * permutation's first 960 entries, each once. */
static void samples_once(void) {
  enum { N = 1000 };
  size_t perm[N];
  for (size_t i = 0; i < N; i++) perm[i] = (i * 379 + 11) % N; /* a permutation */
  static const struct { int size, batch; long steps; } runs[] = {
      {4, 12, 5}, {3, 16, 7}, {6, 8, 3}, {5, 12, 4}};
  int used[N] = {0};
  long g = 0;
  size_t out[N];
  for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
    for (int r = 0; r < runs[k].size; r++) {
      train_epoch_indices(perm, g, runs[k].size, r, runs[k].batch, runs[k].steps, out);
      for (long i = 0; i < runs[k].steps * runs[k].batch; i++) used[out[i]]++;
    }
    g += runs[k].steps * runs[k].size * runs[k].batch;
  }
  CHECK(g == 960, "position %ld, expected 960", g);
  long once = 0, twice = 0, missing = 0;
  for (long i = 0; i < N; i++) {
    size_t s = perm[i];
    if (i < g) {
      once += used[s] == 1;
      twice += used[s] > 1;
      missing += used[s] == 0;
    } else {
      twice += used[s] != 0;
    }
  }
  CHECK(once == g && twice == 0 && missing == 0,
        "of the first %ld positions %ld used once, %ld more than once (or past g), %ld never", g,
        once, twice, missing);
  /* One world size from the start: rank r's steps are its strided shard
   * perm[r], perm[r + size], ... (the sampler's order before commits
   * existed, kept so runs without resizing train as they did). */
  train_epoch_indices(perm, 0, 4, 3, 12, 5, out);
  int strided = 1;
  for (long i = 0; i < 60; i++) strided &= out[i] == perm[3 + 4 * i];
  CHECK(strided, "one world size: rank 3's samples are not perm[3 + 4 i]");
}

/* The compressor memory's files (sync_memory.h): two ranks' files read
 * back by a job of the same size (each its own, exactly) and by one of
 * another size (the mean over them, each rank's residual first scaled to
 * rank 0's rate; DGC's momentum plainly averaged; the largest step
 * counter; a tensor that kept no memory stays without); a corrupt, a
 * missing and another step's file are errors naming the file. */
static void memory_files(void) {
  char dir[] = "/tmp/gs_train_units_XXXXXX";
  if (mkdtemp(dir) == NULL) {
    CHECK(0, "mkdtemp");
    return;
  }
  enum { T = 3 };
  const size_t counts[T] = {5, 3, 4};
  float vals[2][2][T][5]; /* rank, kind, tensor, element */
  gs_compress_memory mem[2][T];
  for (int r = 0; r < 2; r++) {
    for (int t = 0; t < T; t++) {
      for (size_t j = 0; j < counts[t]; j++) {
        vals[r][0][t][j] = (float)(r + 1) * (float)(t * 10 + (int)j + 1);
        vals[r][1][t][j] = (float)(r ? -1 : 3) * (float)(j + 1);
      }
      mem[r][t] = (gs_compress_memory){
          .have = t == 2 ? 0u : (unsigned)(GS_COMPRESS_MEM_RESIDUAL | GS_COMPRESS_MEM_MOMENTUM),
          .residual = vals[r][0][t], .momentum = vals[r][1][t], .step = 7u + (unsigned)r,
          .lr = r ? 0.2 : 0.1};
    }
    train_memory m = {.ntensors = T, .counts = counts, .mem = mem[r]};
    snprintf(m.spec, sizeof m.spec, "dgc:0.01");
    char path[512];
    train_memory_path(path, sizeof path, dir, r, 42);
    CHECK(train_memory_write(path, &m, r, 2, 42) == GS_OK, "write %s: %s", path, gs_last_error());
  }
  float res[T][5], mom[T][5];
  gs_compress_memory got[T];
  train_memory m = {.ntensors = T, .counts = counts, .mem = got};
  for (int t = 0; t < T; t++) got[t] = (gs_compress_memory){.residual = res[t], .momentum = mom[t]};
  /* Same size: rank 1's own, exactly. */
  CHECK(train_memory_load(dir, 42, 2, 1, &m) == GS_OK, "own: %s", gs_last_error());
  CHECK(strcmp(m.spec, "dgc:0.01") == 0, "spec '%s'", m.spec);
  CHECK(got[0].step == 8 && got[0].lr == 0.2 && got[2].have == 0 &&
            memcmp(res[1], vals[1][0][1], 3 * sizeof(float)) == 0 &&
            memcmp(mom[0], vals[1][1][0], 5 * sizeof(float)) == 0,
        "rank 1's own memory not read back (step %llu, lr %g, have %u)",
        (unsigned long long)got[0].step, got[0].lr, got[2].have);
  /* Another size: the mean. Rank 1's residual is at rate 0.2, rank 0's at
   * 0.1: scaled to 0.1 it is twice as large. */
  CHECK(train_memory_load(dir, 42, 2, -1, &m) == GS_OK, "mean: %s", gs_last_error());
  int mean_ok = got[0].step == 8 && got[0].lr == 0.1 && got[2].have == 0 &&
                got[1].have == (GS_COMPRESS_MEM_RESIDUAL | GS_COMPRESS_MEM_MOMENTUM);
  for (int t = 0; t < 2; t++)
    for (size_t j = 0; j < counts[t]; j++) {
      const double e = (vals[0][0][t][j] + 2.0 * vals[1][0][t][j]) / 2;
      const double u = (vals[0][1][t][j] + vals[1][1][t][j]) / 2.0;
      mean_ok &= fabs(res[t][j] - e) <= 1e-6 * fabs(e) && fabs(mom[t][j] - u) <= 1e-6;
    }
  CHECK(mean_ok, "the mean over 2 ranks: res[0][0] %g (expected %g), mom[0][0] %g (expected "
        "%g), step %llu, lr %g", (double)res[0][0],
        (vals[0][0][0][0] + 2.0 * vals[1][0][0][0]) / 2, (double)mom[0][0],
        (vals[0][1][0][0] + vals[1][1][0][0]) / 2.0, (unsigned long long)got[0].step, got[0].lr);
  /* Another step's checkpoint, a corrupt file, a missing one. */
  CHECK(train_memory_load(dir, 41, 2, 0, &m) != GS_OK && strstr(gs_last_error(), "step41"),
        "step 41: %s", gs_last_error());
  char path[512];
  train_memory_path(path, sizeof path, dir, 1, 42);
  FILE *f = fopen(path, "r+b");
  if (f) {
    fseek(f, 150, SEEK_SET);
    fputc(0x5a, f);
    fclose(f);
  }
  CHECK(train_memory_load(dir, 42, 2, -1, &m) == GS_ERR_PARSE && strstr(gs_last_error(), path) &&
            strstr(gs_last_error(), "checksum"),
        "a corrupt file: %s", gs_last_error());
  remove(path);
  CHECK(train_memory_load(dir, 42, 2, -1, &m) == GS_ERR_IO && strstr(gs_last_error(), path),
        "a missing file: %s", gs_last_error());
  train_memory_path(path, sizeof path, dir, 0, 42);
  remove(path);
  rmdir(dir);
}

int main(void) {
  gather_bounds();
  samples_once();
  breakdown();
  memory_files();
  if (fails == 0) printf("ok: train unit checks passed\n");
  return fails != 0;
}
