/*
 * The fused parallel SGD update against the per-tensor loop (issue 9, item
 * 5): for each model, the time of one optimizer step (momentum 0.9, weight
 * decay) as
 *   per-tensor  gs_nn_sgd_step_param over every tensor, in order
 *   fused xT    gs_nn_sgd_step over T threads (T = 1: one pass, no pool)
 * interleaved round by round, the median over rounds of the mean step time
 * of each round. Prints a Markdown table with each ratio to the per-tensor
 * loop of the same run. One untimed step per variant first (page faults of
 * the momentum buffers, worker start).
 *
 * Usage: fused_update [ROUNDS] [STEPS_PER_ROUND] [MAX_THREADS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync/nn.h"
#include "gradsync/optim.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 15;
  int steps = argc > 2 ? atoi(argv[2]) : 50;
  int maxt = argc > 3 ? atoi(argv[3]) : 4;
  if (rounds < 1 || steps < 1 || maxt < 1 || maxt > 16) {
    fprintf(stderr, "fused_update: bad arguments\n");
    return 2;
  }
  const gs_nn_model models[] = {GS_NN_MODEL_RESNET, GS_NN_MODEL_MLP, GS_NN_MODEL_CNN};
  printf("| model | parameters | tensors | variant | step (us) | vs per-tensor |\n");
  printf("|---|---:|---:|---|---:|---:|\n");
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
    gs_nn_net *net = NULL;
    if (gs_nn_model_create(&net, models[m], 1, 1, NULL) != GS_OK) return 1;
    gs_nn_sgd_config cfg = {.lr = 1e-6f, .momentum = 0.9f, .weight_decay = 1e-4f};
    int nvar = 1 + maxt;
    gs_nn_sgd **opt = calloc((size_t)nvar, sizeof *opt);
    double *t = calloc((size_t)nvar * rounds, sizeof *t);
    for (int v = 0; v < nvar; v++) {
      if (gs_nn_sgd_create(&opt[v], net, &cfg) != GS_OK) return 1;
      if (v >= 2 && gs_nn_sgd_set_threads(opt[v], v) != GS_OK) return 1;
    }
    size_t nt = gs_nn_param_count(net);
    /* a warm-up step each: the momentum buffers' first touch, thread start */
    for (int v = 0; v < nvar; v++) gs_nn_sgd_step(opt[v]);
    for (int r = 0; r < rounds; r++)
      for (int v = 0; v < nvar; v++) {
        double t0 = gs_now();
        for (int s = 0; s < steps; s++) {
          if (v == 0)
            for (size_t i = 0; i < nt; i++) gs_nn_sgd_step_param(opt[v], i);
          else
            gs_nn_sgd_step(opt[v]);
        }
        t[v * rounds + r] = (gs_now() - t0) / steps;
      }
    double base = median(t, rounds);
    for (int v = 0; v < nvar; v++) {
      double med = v ? median(t + v * rounds, rounds) : base;
      char name[32];
      if (v == 0) snprintf(name, sizeof name, "per-tensor loop");
      else snprintf(name, sizeof name, "fused x%d", v);
      printf("| %s | %zu | %zu | %s | %.1f | %.2fx |\n", gs_nn_model_name(models[m]),
             gs_nn_param_total(net), nt, name, med * 1e6, base / med);
      gs_nn_sgd_destroy(opt[v]);
    }
    free(opt);
    free(t);
    gs_nn_net_destroy(net);
  }
  return 0;
}
