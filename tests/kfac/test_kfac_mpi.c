/*
 * Distributed K-FAC under mpirun, on a small conv net (conv+BN, strided
 * conv, linear) and synthetic data, gradients averaged on a communicator
 * of their own as the engine's would be:
 *
 *   equiv  dkfac and spd give the same losses (1e-4 relative) and weights up
 *          to summation order; N ranks x batch b equal one process x batch
 *          N b (every rank also runs the single-process reference); dp
 *          trains (loss down) and sends >= 2.5x fewer bytes per
 *          second-order update than dkfac.
 *   fault  trains with whatever GRADSYNC_FAULT the environment sets; a rank
 *          whose K-FAC collective fails prints the error and exits 1.
 *
 * Output: "FAIL rank R: ..." on a failed check (ctest matches "FAIL ").
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync/comm.h"
#include "gradsync/kfac.h"
#include "gradsync/nn.h"
#include "gradsync/optim.h"

static int rank, size, failures;

#define CHECK(cond, ...)                              \
  do {                                                \
    if (!(cond)) {                                    \
      fprintf(stderr, "FAIL rank %d: ", rank);        \
      fprintf(stderr, __VA_ARGS__);                   \
      fprintf(stderr, "\n");                          \
      failures++;                                     \
    }                                                 \
  } while (0)

#define OK(call)                                                          \
  do {                                                                    \
    gs_status st_ = (call);                                               \
    if (st_ != GS_OK) {                                                   \
      fprintf(stderr, "gradsync: rank %d: %s: %s\n", rank, #call,         \
              gs_last_error());                                           \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

enum { B = 4, STEPS = 8 };

/* bn: with a batch-norm (plain SGD on its parameters). Its batch
 * statistics depend on the per-rank batch, so the N ranks x b = 1 x N b
 * comparison uses the net without it. */
static gs_nn_net *small_net(int max_batch, int bn) {
  gs_nn_net *n = NULL;
  OK(gs_nn_net_create(&n, 1, 8, 8, max_batch));
  OK(gs_nn_add_conv2d(n, "conv1", 6, 3, 1, 1, 0));
  if (bn) OK(gs_nn_add_batchnorm(n, "bn1"));
  OK(gs_nn_add_relu(n));
  OK(gs_nn_add_conv2d(n, "conv2", 8, 3, 2, 1, 1));
  OK(gs_nn_add_relu(n));
  OK(gs_nn_add_flatten(n));
  OK(gs_nn_add_linear(n, "fc", 10, 1));
  OK(gs_nn_finalize(n, GS_NN_INIT_KAIMING, 42));
  return n;
}

typedef struct {
  float loss[STEPS];
  float *weights;
  size_t n;
  gs_kfac_stats stats;
} run_result;

/* Factor update interval of the next run() (1 unless a case sets it). */
static int cov_every = 1;

/* Trains STEPS steps. comm NULL: one process on the whole global batch;
 * else rank r takes its b samples of each global batch. */
static void run(gs_comm *kcomm, gs_comm *gcomm, gs_kfac_dist dist,
                int inv_every, int bn, const gs_nn_dataset *ds,
                run_result *out) {
  int P = kcomm ? size : 1, me = kcomm ? rank : 0;
  int gb = B * size; /* global batch */
  int lb = kcomm ? B : gb;
  gs_nn_net *net = small_net(gb, bn);
  gs_nn_sgd_config sgd = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f};
  gs_kfac_config cfg;
  gs_kfac_config_default(&cfg, &sgd);
  cfg.dist = dist;
  cfg.inv_every = inv_every;
  cfg.cov_every = cov_every;
  cfg.damping = 0.01f;
  gs_nn_optim *opt = NULL;
  OK(gs_kfac_create(&opt, net, kcomm, &cfg));
  float *x = malloc((size_t)gb * 64 * sizeof(float));
  int32_t *y = malloc((size_t)gb * sizeof(int32_t));
  size_t *idx = malloc((size_t)gb * sizeof(size_t));
  size_t total = gs_nn_param_total(net);
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < lb; i++) idx[i] = ((size_t)s * gb + (size_t)me * lb + i) % ds->n;
    OK(gs_nn_dataset_gather(ds, idx, lb, x, y));
    float loss;
    OK(gs_nn_forward(net, x, lb, NULL));
    OK(gs_nn_loss(net, y, &loss, NULL));
    OK(gs_nn_backward(net));
    if (kcomm && P > 1) {
      float *g = gs_nn_grads_flat(net);
      OK(gs_allreduce(gcomm, GS_IN_PLACE, g, total, GS_F32, GS_SUM, GS_ALGO_AUTO));
      for (size_t i = 0; i < total; i++) g[i] /= (float)P;
      OK(gs_allreduce(gcomm, GS_IN_PLACE, &loss, 1, GS_F32, GS_SUM, GS_ALGO_AUTO));
      loss /= (float)P;
    }
    out->loss[s] = loss;
    gs_status st = gs_nn_optim_step(opt);
    if (st != GS_OK) {
      fprintf(stderr, "gradsync: rank %d: K-FAC step %d (%s): %s\n", rank, s,
              gs_kfac_dist_name(dist), gs_last_error());
      exit(1);
    }
  }
  OK(gs_kfac_stats_get(opt, &out->stats));
  out->n = total;
  out->weights = malloc(total * sizeof(float));
  memcpy(out->weights, gs_nn_weights_flat(net), total * sizeof(float));
  gs_nn_optim_destroy(opt);
  gs_nn_net_destroy(net);
  free(x);
  free(y);
  free(idx);
}

static double max_rel_diff(const float *a, const float *b, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    d = fmax(d, fabs((double)a[i] - b[i]));
    m = fmax(m, fabs((double)a[i]));
  }
  return d / (m > 0 ? m : 1);
}

int main(int argc, char **argv) {
  OK(gs_init(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argc > 1 ? argv[1] : "equiv";
  gs_comm *gcomm = NULL, *kcomm = NULL;
  OK(gs_comm_create(MPI_COMM_WORLD, &gcomm));
  OK(gs_comm_create(MPI_COMM_WORLD, &kcomm));
  gs_nn_dataset ds;
  OK(gs_nn_dataset_synthetic(&ds, 512, 1, 8, 8, 10, 1.0f, 9));

  if (strcmp(mode, "fault") == 0) {
    gs_kfac_dist d = GS_KFAC_DIST_DKFAC;
    if (argc > 2) OK(gs_kfac_dist_parse(argv[2], &d));
    run_result r;
    run(kcomm, gcomm, d, 2, 1, &ds, &r);
    fprintf(stderr, "rank %d: no fault happened\n", rank);
    free(r.weights);
  } else {
    run_result dk, spd, dp, ref, dk1, dp1, nb, nbspd;
    run(kcomm, gcomm, GS_KFAC_DIST_DKFAC, 2, 1, &ds, &dk);
    run(kcomm, gcomm, GS_KFAC_DIST_SPD, 2, 1, &ds, &spd);
    run(kcomm, gcomm, GS_KFAC_DIST_SPD, 2, 0, &ds, &nbspd);
    run(kcomm, gcomm, GS_KFAC_DIST_DKFAC, 2, 0, &ds, &nb);
    run(NULL, gcomm, GS_KFAC_DIST_DKFAC, 2, 0, &ds, &ref);
    for (int s = 0; s < STEPS; s++) {
      double rel = fabs(dk.loss[s] - spd.loss[s]) / fabs(dk.loss[s]);
      CHECK(rel <= 1e-4, "step %d: dkfac loss %.9g, spd %.9g (relative %.3g)", s,
            dk.loss[s], spd.loss[s], rel);
      double rr = fabs(nb.loss[s] - ref.loss[s]) / fabs(ref.loss[s]);
      CHECK(rr <= 1e-4, "step %d: dkfac %d ranks x %d loss %.9g, 1 x %d: %.9g (relative %.3g)",
            s, size, B, nb.loss[s], B * size, ref.loss[s], rr);
      rr = fabs(nbspd.loss[s] - ref.loss[s]) / fabs(ref.loss[s]);
      CHECK(rr <= 1e-4, "step %d: spd %d ranks x %d loss %.9g, 1 x %d: %.9g (relative %.3g)",
            s, size, B, nbspd.loss[s], B * size, ref.loss[s], rr);
    }
    /* Factors every 2 steps, inverses every 7: spd plans on the third
     * factor pass (step 4) and inverts at step 7 without a factor pass. */
    run_result dk27, spd27;
    cov_every = 2;
    run(kcomm, gcomm, GS_KFAC_DIST_DKFAC, 7, 1, &ds, &dk27);
    run(kcomm, gcomm, GS_KFAC_DIST_SPD, 7, 1, &ds, &spd27);
    cov_every = 1;
    for (int s = 0; s < STEPS; s++) {
      double rel = fabs(dk27.loss[s] - spd27.loss[s]) / fabs(dk27.loss[s]);
      CHECK(rel <= 1e-4, "cov 2, inv 7, step %d: dkfac loss %.9g, spd %.9g", s,
            dk27.loss[s], spd27.loss[s]);
    }
    CHECK(max_rel_diff(dk27.weights, spd27.weights, dk27.n) <= 1e-4,
          "cov 2, inv 7: dkfac vs spd weights differ");
    CHECK(spd27.stats.factor_updates == STEPS / 2 && spd27.stats.inverse_updates == 2,
          "cov 2, inv 7: %ld factor and %ld inverse updates in %d steps",
          spd27.stats.factor_updates, spd27.stats.inverse_updates, STEPS);
    free(dk27.weights);
    free(spd27.weights);
    double w1 = max_rel_diff(dk.weights, spd.weights, dk.n);
    double w2 = fmax(max_rel_diff(ref.weights, nb.weights, nb.n),
                     max_rel_diff(ref.weights, nbspd.weights, nb.n));
    CHECK(w1 <= 1e-4, "dkfac vs spd weights differ by %.3g (relative to the largest)", w1);
    CHECK(w2 <= 1e-3, "1 rank x %d vs %d ranks x %d weights differ by %.3g", B * size,
          size, B, w2);
    CHECK(dk.loss[STEPS - 1] < dk.loss[0], "dkfac loss did not go down: %g -> %g",
          dk.loss[0], dk.loss[STEPS - 1]);
    if (size > 1) {
      CHECK(spd.stats.merge_groups_a >= 1 && spd.stats.merge_groups_a <= 3,
            "spd: %zu A messages for 3 layers", spd.stats.merge_groups_a);
      /* bytes per second-order update with factors and inverses every step */
      run(kcomm, gcomm, GS_KFAC_DIST_DKFAC, 1, 1, &ds, &dk1);
      run(kcomm, gcomm, GS_KFAC_DIST_DP, 1, 1, &ds, &dp1);
      double bdk = (dk1.stats.factor_bytes + dk1.stats.bcast_bytes) / dk1.stats.inverse_updates;
      double bdp = (dp1.stats.factor_bytes + dp1.stats.bcast_bytes) / dp1.stats.inverse_updates;
      CHECK(dp1.stats.factor_bytes == 0, "dp all-reduced %g factor bytes", dp1.stats.factor_bytes);
      CHECK(bdk >= 2.5 * bdp, "bytes per update: dkfac %.0f, dp %.0f (ratio %.2f)", bdk, bdp,
            bdk / bdp);
      CHECK(dp1.loss[STEPS - 1] < dp1.loss[0], "dp loss did not go down: %g -> %g",
            dp1.loss[0], dp1.loss[STEPS - 1]);
      if (rank == 0)
        printf("bytes per second-order update: dkfac %.0f, dp %.0f (%.2fx)\n", bdk, bdp,
               bdk / bdp);
      free(dk1.weights);
      free(dp1.weights);
    }
    /* dp (no factor exchange) still trains */
    run(kcomm, gcomm, GS_KFAC_DIST_DP, 2, 1, &ds, &dp);
    CHECK(isfinite(dp.loss[STEPS - 1]), "dp loss %g", dp.loss[STEPS - 1]);
    if (rank == 0)
      printf("losses: dkfac %.6f -> %.6f, spd %.6f, without batch-norm 1 process %.6f, dp %.6f\n", dk.loss[0],
             dk.loss[STEPS - 1], spd.loss[STEPS - 1], ref.loss[STEPS - 1], dp.loss[STEPS - 1]);
    free(dk.weights);
    free(spd.weights);
    free(ref.weights);
    free(dp.weights);
    free(nb.weights);
    free(nbspd.weights);
  }
  gs_nn_dataset_free(&ds);
  OK(gs_comm_destroy(kcomm));
  int all = failures;
  OK(gs_allreduce(gcomm, GS_IN_PLACE, &all, 1, GS_I32, GS_SUM, GS_ALGO_AUTO));
  OK(gs_comm_destroy(gcomm));
  gs_finalize();
  return all ? 1 : 0;
}
