/*
 * K-FAC iteration time and its breakdown, one scheme per run, on the real
 * training path: the nn engine's forward/backward on synthetic 28x28 data,
 * gradients averaged by gradsync's engine (policy auto) during backward,
 * then the K-FAC step (its collectives on a second communicator). Run under
 * `gradsync run -np N --net 1gbit`; rank 0 prints one JSON line.
 *
 * Usage: kfac_iter MODEL DIST|sgd BATCH WARMUP ITERS [INV_EVERY] [COV_EVERY]
 *   The first WARMUP iterations (which include spd's profiling, planning
 *   and first full inversion) are not measured; ITERS should be a multiple
 *   of INV_EVERY so that inverse updates are counted in proportion.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync.h"
#include "gradsync/kfac.h"
#include "gradsync/nn.h"
#include "gradsync/optim.h"

typedef struct {
  gs_engine *e;
  int *ids;
  gs_status st;
} cb_ctx;

static void on_grad_ready(void *ctx, size_t i) {
  cb_ctx *c = ctx;
  gs_status st = gs_engine_grad_ready(c->e, c->ids[i]);
  if (st != GS_OK && c->st == GS_OK) c->st = st;
}

#define OK(call)                                                              \
  do {                                                                        \
    gs_status st_ = (call);                                                   \
    if (st_ != GS_OK) {                                                       \
      fprintf(stderr, "kfac_iter: rank %d: %s: %s\n", rank, #call,            \
              gs_last_error());                                               \
      gs_comm_abort(comm, 1, "kfac_iter failed");                             \
    }                                                                         \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: kfac_iter MODEL DIST|sgd BATCH WARMUP ITERS [INV_EVERY] [COV_EVERY]\n");
    return 2;
  }
  int rank = 0;
  gs_comm *comm = NULL, *kcomm = NULL;
  if (gs_init(&argc, &argv) != GS_OK) return 1;
  if (gs_comm_create(MPI_COMM_WORLD, &comm) != GS_OK) {
    fprintf(stderr, "kfac_iter: %s\n", gs_last_error());
    return 1;
  }
  rank = gs_comm_rank(comm);
  int size = gs_comm_size(comm);
  gs_nn_model model;
  OK(gs_nn_model_parse(argv[1], &model));
  const char *dist_s = argv[2];
  int batch = atoi(argv[3]), warmup = atoi(argv[4]), iters = atoi(argv[5]);
  int inv_every = argc > 6 ? atoi(argv[6]) : 10;
  int cov_every = argc > 7 ? atoi(argv[7]) : 1;
  int use_kfac = strcmp(dist_s, "sgd") != 0;
  OK(gs_comm_create(MPI_COMM_WORLD, &kcomm));
  gs_nn_net *net = NULL;
  OK(gs_nn_model_create(&net, model, batch, 1, NULL));
  gs_engine *e = NULL;
  OK(gs_engine_create(comm, NULL, &e));
  size_t np = gs_nn_param_count(net);
  cb_ctx cb = {e, calloc(np, sizeof(int)), GS_OK};
  for (size_t i = 0; i < np; i++) {
    const gs_nn_param *p = gs_nn_param_at(net, i);
    OK(gs_engine_register(e, p->name, p->grad, p->count, GS_F32, &cb.ids[i]));
  }
  gs_nn_set_callbacks(net, on_grad_ready, NULL, &cb);
  gs_nn_sgd_config sgd = {.lr = 0.01f, .momentum = 0.9f, .weight_decay = 5e-4f};
  gs_nn_optim *opt = NULL;
  gs_kfac_config kc;
  gs_kfac_config_default(&kc, &sgd);
  kc.inv_every = inv_every;
  kc.cov_every = cov_every;
  if (use_kfac) {
    OK(gs_kfac_dist_parse(dist_s, &kc.dist));
    OK(gs_kfac_create(&opt, net, kcomm, &kc));
  } else {
    OK(gs_nn_optim_sgd_create(&opt, net, &sgd, 1));
  }
  gs_nn_dataset ds;
  OK(gs_nn_dataset_synthetic(&ds, 4096, 1, 28, 28, 10, 1.0f, 7));
  float *x = malloc((size_t)batch * 784 * sizeof(float));
  int32_t *y = malloc((size_t)batch * sizeof(int32_t));
  size_t *idx = malloc((size_t)batch * sizeof(size_t));
  double t_start = 0.0, fb = 0.0, ew = 0.0;
  gs_engine_stats es0;
  memset(&es0, 0, sizeof es0);
  for (int it = 0; it < warmup + iters; it++) {
    if (it == warmup) {
      OK(gs_barrier(kcomm, GS_ALGO_AUTO));
      if (use_kfac) gs_kfac_stats_reset(opt);
      OK(gs_engine_get_stats(e, &es0));
      t_start = gs_now();
      fb = ew = 0.0;
    }
    for (int i = 0; i < batch; i++)
      idx[i] = ((size_t)it * batch * size + (size_t)rank * batch + i) % ds.n;
    OK(gs_nn_dataset_gather(&ds, idx, batch, x, y));
    float loss;
    double t0 = gs_now();
    OK(gs_nn_forward(net, x, batch, NULL));
    OK(gs_nn_loss(net, y, &loss, NULL));
    OK(gs_nn_backward(net));
    double t1 = gs_now();
    OK(gs_engine_wait(e));
    double t2 = gs_now();
    OK(cb.st);
    OK(gs_nn_optim_step(opt));
    fb += t1 - t0;
    ew += t2 - t1;
  }
  OK(gs_barrier(kcomm, GS_ALGO_AUTO));
  double total = gs_now() - t_start;
  gs_engine_stats es1;
  OK(gs_engine_get_stats(e, &es1));
  gs_kfac_stats ks;
  memset(&ks, 0, sizeof ks);
  if (use_kfac) OK(gs_kfac_stats_get(opt, &ks));
  if (rank == 0) {
    double n = iters;
    double upd = ks.inverse_updates ? (double)ks.inverse_updates : 1.0;
    printf("{\"model\": \"%s\", \"optimizer\": \"%s\", \"ranks\": %d, \"batch\": %d, "
           "\"iters\": %d, \"inv_every\": %d, \"cov_every\": %d, \"iter_s\": %.6f, "
           "\"forward_backward_s\": %.6f, \"grad_wait_s\": %.6f, "
           "\"factor_compute_s\": %.6f, \"factor_comm_s\": %.6f, \"inversion_s\": %.6f, "
           "\"bcast_s\": %.6f, \"precondition_s\": %.6f, \"exposed_comm_s\": %.6f, "
           "\"factor_bytes_per_iter\": %.0f, \"bcast_bytes_per_iter\": %.0f, "
           "\"bytes_per_second_order_update\": %.0f, \"merge_groups_a\": %zu, "
           "\"merge_groups_g\": %zu, \"inverted_locally\": %d, \"engine_policy\": \"%s\"}\n",
           argv[1], use_kfac ? gs_kfac_dist_name(kc.dist) : "sgd", size, batch, iters,
           inv_every, cov_every, total / n, fb / n, ew / n, ks.factor_compute_s / n,
           ks.factor_comm_s / n, ks.inversion_s / n, ks.bcast_s / n,
           ks.precondition_s / n, ks.exposed_comm_s / n, ks.factor_bytes / n,
           ks.bcast_bytes / n, (ks.factor_bytes + ks.bcast_bytes) / upd,
           ks.merge_groups_a, ks.merge_groups_g, ks.inverted_locally,
           gs_plan_policy_name(es1.chosen));
    fflush(stdout);
  }
  free(x);
  free(y);
  free(idx);
  gs_nn_dataset_free(&ds);
  gs_nn_optim_destroy(opt);
  OK(gs_engine_destroy(e));
  gs_nn_net_destroy(net);
  free(cb.ids);
  gs_comm_destroy(kcomm);
  gs_comm_destroy(comm);
  gs_finalize();
  return 0;
}
