/* A program built against an installed gradsync's training libraries:
 * a small net (nn) trained by distributed K-FAC (kfac) for a few steps on
 * every rank, whose weights must stay identical across ranks; and the
 * parameter servers' sync-mode parser (ps, in the umbrella header). */
#include <gradsync.h>
#include <gradsync/kfac.h>
#include <gradsync/nn.h>
#include <gradsync/optim.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define CHECK(x)                                                               \
  do {                                                                         \
    if ((x) != GS_OK) {                                                        \
      fprintf(stderr, "consumer_kfac: %s: %s\n", #x, gs_last_error());         \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(int argc, char **argv) {
  CHECK(gs_init(&argc, &argv));
  gs_ps_sync sync;
  CHECK(gs_ps_sync_parse("ssp:2", &sync));
  if (sync.mode != GS_PS_SSP || sync.staleness != 2) {
    fprintf(stderr, "consumer_kfac: ssp:2 parsed wrong\n");
    return 1;
  }
  gs_comm *c;
  CHECK(gs_comm_create(MPI_COMM_WORLD, &c));
  int rank = gs_comm_rank(c);
  gs_nn_net *net;
  CHECK(gs_nn_net_create(&net, 1, 2, 2, 4));
  CHECK(gs_nn_add_flatten(net));
  CHECK(gs_nn_add_linear(net, "fc1", 6, 1));
  CHECK(gs_nn_add_relu(net));
  CHECK(gs_nn_add_linear(net, "fc2", 3, 1));
  CHECK(gs_nn_finalize(net, GS_NN_INIT_KAIMING, 7));
  gs_nn_sgd_config sgd = {.lr = 0.05f, .momentum = 0.9f};
  gs_kfac_config cfg;
  gs_kfac_config_default(&cfg, &sgd);
  gs_nn_optim *opt;
  CHECK(gs_kfac_create(&opt, net, c, &cfg));
  /* Each rank its own batch; K-FAC averages the factors. */
  float x[4 * 4];
  int32_t y[4];
  float first = 0, last = 0;
  for (int step = 0; step < 20; step++) {
    for (int i = 0; i < 16; i++) x[i] = (float)sin(0.7 * i + 0.3 * rank + 0.1 * step);
    for (int i = 0; i < 4; i++) y[i] = x[4 * i] > 0 ? (x[4 * i + 1] > 0 ? 2 : 1) : 0;
    const float *logits;
    float loss;
    CHECK(gs_nn_forward(net, x, 4, &logits));
    CHECK(gs_nn_loss(net, y, &loss, NULL));
    CHECK(gs_nn_backward(net));
    /* K-FAC preconditions averaged gradients (the engine's job in a
     * trainer): average them here. */
    CHECK(gs_allreduce(c, GS_IN_PLACE, gs_nn_grads_flat(net), gs_nn_param_total(net),
                       GS_F32, GS_AVG, GS_ALGO_AUTO));
    CHECK(gs_nn_optim_step(opt));
    if (step == 0) first = loss;
    last = loss;
  }
  /* Every rank ends with rank 0's weights. */
  size_t n = gs_nn_param_total(net);
  float w[64], w0[64];
  int bad = n > 64;
  if (!bad) {
    memcpy(w, gs_nn_weights_flat(net), n * sizeof(float));
    memcpy(w0, w, n * sizeof(float));
    CHECK(gs_bcast(c, w0, n, GS_F32, 0, GS_ALGO_AUTO));
    bad = memcmp(w, w0, n * sizeof(float)) != 0;
    if (bad) fprintf(stderr, "consumer_kfac: rank %d's weights differ from rank 0's\n", rank);
  }
  if (!(last < first)) {
    fprintf(stderr, "consumer_kfac: rank %d: loss %g -> %g did not fall\n", rank, first, last);
    bad = 1;
  }
  gs_nn_optim_destroy(opt);
  gs_nn_net_destroy(net);
  gs_comm_destroy(c);
  gs_finalize();
  if (!bad && rank == 0) printf("consumer_kfac: loss %.4f -> %.4f, weights equal: ok\n", first, last);
  return bad;
}
