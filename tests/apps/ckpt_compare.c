/*
 * Compares the weights of two gradsync train checkpoints of one model:
 *   ckpt_compare MODEL A B [RTOL]
 * exits 0 when every weight agrees within RTOL (relative to the tensor's
 * largest magnitude; default 0: bitwise), else prints the worst tensor and
 * exits 1. A weight that is not finite (NaN or an infinity) in either file
 * is a difference, even where both files hold the same bits: a comparison
 * must not pass two runs that both diverged.
 *
 *   ckpt_compare --nan MODEL IN OUT
 * writes a copy of IN whose first weight is a NaN (to test the above).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync.h"
#include "gradsync/nn.h"

static gs_nn_net *load(gs_nn_model m, const char *path, gs_nn_train_state *st) {
  gs_nn_net *net = NULL;
  if (gs_nn_model_create(&net, m, 1, 1, NULL) != GS_OK ||
      gs_nn_checkpoint_load(path, net, NULL, st) != GS_OK) {
    fprintf(stderr, "ckpt_compare: %s: %s\n", path, gs_last_error());
    exit(2);
  }
  return net;
}

static int poison(gs_nn_model m, const char *in, const char *out) {
  gs_nn_train_state st;
  gs_nn_net *net = load(m, in, &st);
  gs_nn_weights_flat(net)[0] = NAN;
  if (gs_nn_checkpoint_save(out, net, NULL, &st) != GS_OK) {
    fprintf(stderr, "ckpt_compare: %s: %s\n", out, gs_last_error());
    return 2;
  }
  gs_nn_net_destroy(net);
  return 0;
}

int main(int argc, char **argv) {
  int nan_mode = argc > 1 && strcmp(argv[1], "--nan") == 0;
  if (argc < 4 || (nan_mode && argc != 5)) {
    fprintf(stderr, "usage: ckpt_compare MODEL A B [RTOL]\n"
                    "       ckpt_compare --nan MODEL IN OUT\n");
    return 2;
  }
  gs_nn_model m;
  if (gs_nn_model_parse(argv[1 + nan_mode], &m) != GS_OK) {
    fprintf(stderr, "ckpt_compare: %s\n", gs_last_error());
    return 2;
  }
  if (nan_mode) return poison(m, argv[3], argv[4]);
  double rtol = argc > 4 ? atof(argv[4]) : 0.0;
  gs_nn_train_state sa, sb;
  gs_nn_net *a = load(m, argv[2], &sa), *b = load(m, argv[3], &sb);
  double worst = 0;
  const char *worst_name = "-", *nonfinite = NULL;
  size_t nonfinite_index = 0;
  for (size_t i = 0; i < gs_nn_param_count(a); i++) {
    const gs_nn_param *pa = gs_nn_param_at(a, i), *pb = gs_nn_param_at(b, i);
    double scale = 0, diff = 0;
    for (size_t k = 0; k < pa->count; k++) {
      if (!isfinite(pa->weights[k]) || !isfinite(pb->weights[k])) {
        if (nonfinite == NULL) {
          nonfinite = pa->name;
          nonfinite_index = k;
        }
        continue;
      }
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
  int ok = nonfinite == NULL && (rtol == 0 ? worst == 0 : worst <= rtol);
  if (nonfinite)
    printf("ckpt_compare: %s[%zu] is not finite: DIFFERENT\n", nonfinite, nonfinite_index);
  else
    printf("ckpt_compare: largest relative difference %.3g in %s: %s\n", worst, worst_name,
           ok ? "ok" : "DIFFERENT");
  gs_nn_net_destroy(a);
  gs_nn_net_destroy(b);
  return ok ? 0 : 1;
}
