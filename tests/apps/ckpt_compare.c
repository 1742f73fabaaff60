/*
 * Compares the weights of two gradsync train checkpoints of one model:
 *   ckpt_compare MODEL A B [RTOL]
 * exits 0 when every weight agrees within RTOL (relative to the tensor's
 * largest magnitude; default 0: bitwise), else prints the worst tensor and
 * exits 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync.h"
#include "gradsync/nn.h"

static gs_nn_net *load(gs_nn_model m, const char *path) {
  gs_nn_net *net = NULL;
  gs_nn_train_state st;
  if (gs_nn_model_create(&net, m, 1, 1, NULL) != GS_OK ||
      gs_nn_checkpoint_load(path, net, NULL, &st) != GS_OK) {
    fprintf(stderr, "ckpt_compare: %s: %s\n", path, gs_last_error());
    exit(2);
  }
  return net;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: ckpt_compare MODEL A B [RTOL]\n");
    return 2;
  }
  gs_nn_model m;
  if (gs_nn_model_parse(argv[1], &m) != GS_OK) {
    fprintf(stderr, "ckpt_compare: %s\n", gs_last_error());
    return 2;
  }
  double rtol = argc > 4 ? atof(argv[4]) : 0.0;
  gs_nn_net *a = load(m, argv[2]), *b = load(m, argv[3]);
  double worst = 0;
  const char *worst_name = "-";
  for (size_t i = 0; i < gs_nn_param_count(a); i++) {
    const gs_nn_param *pa = gs_nn_param_at(a, i), *pb = gs_nn_param_at(b, i);
    double scale = 0, diff = 0;
    for (size_t k = 0; k < pa->count; k++) {
      scale = fmax(scale, fabs(pa->weights[k]));
      diff = fmax(diff, fabs((double)pa->weights[k] - pb->weights[k]));
    }
    if (rtol == 0 && memcmp(pa->weights, pb->weights, pa->count * sizeof(float)) != 0)
      diff = fmax(diff, 1e-30);
    double rel = scale > 0 ? diff / scale : diff;
    if (rel > worst) {
      worst = rel;
      worst_name = pa->name;
    }
  }
  int ok = rtol == 0 ? worst == 0 : worst <= rtol;
  printf("ckpt_compare: largest relative difference %.3g in %s: %s\n", worst, worst_name,
         ok ? "ok" : "DIFFERENT");
  gs_nn_net_destroy(a);
  gs_nn_net_destroy(b);
  return ok ? 0 : 1;
}
