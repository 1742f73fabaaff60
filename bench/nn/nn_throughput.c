/*
 * Training throughput of gradsync's nn engine, one process and one thread:
 * forward, softmax cross-entropy, backward and an SGD-with-momentum step on
 * a fixed synthetic batch, repeated for a fixed time. The PyTorch peer
 * (bench/nn/torch_throughput.py) runs the same models the same way;
 * bench/nn/throughput.sh runs both and writes the comparison.
 *
 *   nn_throughput [--models cnn,resnet] [--batch 64] [--seconds 10]
 *                 [--warmup 5] [--threads 1] [--backend dnnl|blas]
 *                 [--precision fp32|bf16]
 * prints one JSON object per model. The backend defaults to the library's
 * (gs_nn_default_backend); the threads are OpenBLAS's and oneDNN's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync/nn.h"

static const char *backend, *precision;

static int bench_model(const char *name, int batch, double seconds, int warmup) {
  gs_nn_model model;
  gs_nn_net *net = NULL;
  gs_nn_sgd *opt = NULL;
  if (gs_nn_model_parse(name, &model) != GS_OK ||
      gs_nn_model_create(&net, model, batch, 1, NULL) != GS_OK ||
      (backend && gs_nn_set_backend(net, backend) != GS_OK) ||
      (precision && gs_nn_set_precision(net, precision) != GS_OK)) {
    fprintf(stderr, "nn_throughput: %s\n", gs_last_error());
    gs_nn_net_destroy(net);
    return 1;
  }
  gs_nn_sgd_config cfg = {.lr = 0.01f, .momentum = 0.9f};
  if (gs_nn_sgd_create(&opt, net, &cfg) != GS_OK) {
    fprintf(stderr, "nn_throughput: %s\n", gs_last_error());
    gs_nn_net_destroy(net);
    return 1;
  }
  size_t in = gs_nn_input_size(net);
  float *x = malloc((size_t)batch * in * sizeof *x);
  int32_t *y = malloc((size_t)batch * sizeof *y);
  if (!x || !y) return 1;
  gs_nn_dataset ds;
  if (gs_nn_dataset_synthetic(&ds, (size_t)batch, 1, 28, 28, 10, 1.0f, 7) != GS_OK)
    return 1;
  memcpy(x, ds.images, (size_t)batch * in * sizeof *x);
  memcpy(y, ds.labels, (size_t)batch * sizeof *y);
  gs_nn_dataset_free(&ds);

  double t_fwd = 0, t_bwd = 0, t_opt = 0, t0 = 0;
  long iters = 0;
  float loss = 0;
  for (long it = 0;; it++) {
    if (it == warmup) {
      t0 = gs_now();
      t_fwd = t_bwd = t_opt = 0;
    }
    double a = gs_now();
    gs_nn_forward(net, x, batch, NULL);
    gs_nn_loss(net, y, &loss, NULL);
    double b = gs_now();
    gs_nn_backward(net);
    double c = gs_now();
    gs_nn_sgd_step(opt);
    double d = gs_now();
    t_fwd += b - a;
    t_bwd += c - b;
    t_opt += d - c;
    if (it >= warmup) {
      iters++;
      if (d - t0 >= seconds && iters >= 5) break;
    }
  }
  double dt = gs_now() - t0;
  printf("{\"model\": \"%s\", \"impl\": \"gradsync\", \"backend\": \"%s\", "
         "\"precision\": \"%s\", \"params\": %zu, "
         "\"tensors\": %zu, \"batch\": %d, \"iters\": %ld, \"seconds\": %.4f, "
         "\"images_per_s\": %.2f, \"forward_ms\": %.3f, \"backward_ms\": %.3f, "
         "\"step_ms\": %.3f, \"final_loss\": %.5f}\n",
         name, gs_nn_backend(net), gs_nn_precision(net), gs_nn_param_total(net), gs_nn_param_count(net), batch, iters, dt,
         (double)iters * batch / dt, 1e3 * t_fwd / iters, 1e3 * t_bwd / iters,
         1e3 * t_opt / iters, (double)loss);
  fflush(stdout);
  free(x);
  free(y);
  gs_nn_sgd_destroy(opt);
  gs_nn_net_destroy(net);
  return 0;
}

int main(int argc, char **argv) {
  const char *models = "cnn,resnet";
  int batch = 64, warmup = 5, threads = 1;
  double seconds = 10.0;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--models") && v) models = argv[++i];
    else if (!strcmp(argv[i], "--batch") && v) batch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && v) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--warmup") && v) warmup = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && v) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--backend") && v) backend = argv[++i];
    else if (!strcmp(argv[i], "--precision") && v) precision = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--models cnn,resnet] [--batch 64] "
              "[--seconds 10] [--warmup 5] [--threads 1] "
              "[--backend dnnl|blas] [--precision fp32|bf16]\n", argv[0]);
      return 2;
    }
  }
  if (batch <= 0 || warmup < 0 || threads <= 0) return 2;
  gs_nn_set_threads(threads);
  char *list = strdup(models);
  int rc = 0;
  for (char *save, *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save))
    rc |= bench_model(m, batch, seconds, warmup);
  free(list);
  return rc;
}
