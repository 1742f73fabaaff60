/*
 * Training with compression (src/train's engine sync mode), driven
 * directly on N ranks under mpirun, mlp on a synthetic set, batch 48/N:
 *   - `none` ends with bitwise the weights of dense training (the same run
 *     without a compression spec);
 *   - top-k with error feedback is deterministic: the same seed gives
 *     bitwise the same weights twice; it differs from dense (compression
 *     is on), sends fewer bytes (the sync stats count payloads), and
 *     without error feedback it ends elsewhere;
 *   - a spec that differs on one rank fails the run on every rank.
 * Prints "FAIL ..." and exits 1 on a failed check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "gradsync/train.h"

enum { SAMPLES = 2048, STEPS = 6, GLOBAL_BATCH = 48 };

static int fails, rank_, size_;

#define CHECK(cond, ...)                                            \
  do {                                                              \
    if (!(cond)) {                                                  \
      printf("FAIL rank %d: %s:%d: ", rank_, __FILE__, __LINE__); \
      printf(__VA_ARGS__);                                          \
      printf("\n");                                                 \
      fflush(stdout);                                               \
      fails++;                                                      \
    }                                                               \
  } while (0)

static void base_config(gs_train_config *c) {
  gs_train_config_init(c);
  c->model = GS_NN_MODEL_MLP;
  c->synthetic = SAMPLES;
  c->batch = GLOBAL_BATCH / size_;
  c->max_steps = STEPS;
  /* A policy whose groups do not depend on measured times: top-k selects
   * over each group, so the same seed gives the same weights only with
   * the same groups. */
  c->policy = "wfbp";
}

/* Runs one configuration; returns its weights (NULL on failure). */
static float *run(gs_train_config *c, const gs_train_ranks *ranks, size_t *n, uint64_t *bytes,
                  int want_rc) {
  gs_train_result res;
  memset(&res, 0, sizeof res);
  int rc = gs_train_run(c, ranks, &res);
  CHECK(rc == want_rc, "compress %s: exit %d, expected %d", c->compress ? c->compress : "-",
        rc, want_rc);
  if (rc != 0) return NULL;
  *n = res.nweights;
  if (bytes) *bytes = res.sync.bytes;
  return res.weights;
}

int main(int argc, char **argv) {
  if (gs_init(&argc, &argv) != GS_OK) {
    printf("FAIL gs_init: %s\n", gs_last_error());
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  gs_comm *comm = NULL;
  if (gs_comm_create(MPI_COMM_WORLD, &comm) != GS_OK) {
    printf("FAIL gs_comm_create: %s\n", gs_last_error());
    return 1;
  }
  gs_train_ranks ranks = {.job = "train-test", .comm = comm, .rank = rank_, .size = size_};
  gs_train_config c;
  size_t n0 = 0, n1 = 0, n2 = 0, n3 = 0, n4 = 0;
  uint64_t dense_bytes = 0, topk_bytes = 0;

  base_config(&c);
  float *dense = run(&c, &ranks, &n0, &dense_bytes, 0);
  base_config(&c);
  c.compress = "none";
  float *none = run(&c, &ranks, &n1, NULL, 0);
  if (dense && none)
    CHECK(n0 == n1 && memcmp(dense, none, n0 * sizeof(float)) == 0,
          "--compress none differs from dense training");

  base_config(&c);
  c.compress = "topk:0.05";
  float *a = run(&c, &ranks, &n2, &topk_bytes, 0);
  float *b = run(&c, &ranks, &n3, NULL, 0);
  if (a && b)
    CHECK(n2 == n3 && memcmp(a, b, n2 * sizeof(float)) == 0,
          "top-k with error feedback: two runs with the same seed differ");
  if (a && dense)
    CHECK(memcmp(a, dense, n0 * sizeof(float)) != 0, "top-k ended at the dense weights");
  if (size_ > 1)
    CHECK(topk_bytes > 0 && topk_bytes * 4 < dense_bytes,
          "top-k sent %llu bytes, dense %llu", (unsigned long long)topk_bytes,
          (unsigned long long)dense_bytes);
  c.no_ef = 1;
  float *noef = run(&c, &ranks, &n4, NULL, 0);
  if (a && noef && size_ > 1)
    CHECK(memcmp(a, noef, n2 * sizeof(float)) != 0,
          "without error feedback the run ended at the same weights");

  /* One rank with another spec: every rank fails. */
  if (size_ > 1) {
    base_config(&c);
    c.compress = rank_ == size_ - 1 ? "topk:0.1" : "topk:0.05";
    size_t n;
    float *w = run(&c, &ranks, &n, NULL, 1);
    gs_free(w);
  }
  gs_free(dense);
  gs_free(none);
  gs_free(a);
  gs_free(b);
  gs_free(noef);
  int all = 0;
  MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank_ == 0) printf("train compress: %d failed checks\n", all);
  gs_comm_destroy(comm);
  gs_finalize();
  return all != 0;
}
