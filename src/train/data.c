/* The training and test sets, and their checks against the model. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "train_internal.h"

/* The file a split's images come from, as gs_nn_fashion_mnist_load picks
 * it (for messages), or a description of the synthetic set. */
static void data_name(const gs_train_config *c, int train, char *buf, size_t n) {
  if (c->synthetic > 0) {
    snprintf(buf, n, "the synthetic %s set", train ? "training" : "test");
    return;
  }
  const char *dir = c->data_dir;
  if (!dir) dir = getenv("GRADSYNC_FASHION_MNIST_DIR");
  if (!dir || !*dir) dir = GS_NN_FASHION_MNIST_DIR;
  struct stat sb;
  snprintf(buf, n, "%s/%s-images-idx3-ubyte.gz", dir, train ? "train" : "t10k");
  if (stat(buf, &sb) != 0)
    snprintf(buf, n, "%s/%s-images-idx3-ubyte", dir, train ? "train" : "t10k");
}

gs_status train_load_data(const gs_train_config *c, gs_nn_dataset *train, gs_nn_dataset *test) {
  gs_status st;
  if (c->synthetic > 0) {
    st = gs_nn_dataset_synthetic(train, (size_t)c->synthetic, GS_TRAIN_IN_C, GS_TRAIN_IN_H,
                                 GS_TRAIN_IN_W, GS_TRAIN_CLASSES, 1.0f, 7);
    if (st == GS_OK)
      st = gs_nn_dataset_synthetic_split(test, (size_t)(c->synthetic / 5 + 1), GS_TRAIN_IN_C,
                                         GS_TRAIN_IN_H, GS_TRAIN_IN_W, GS_TRAIN_CLASSES, 1.0f,
                                         7, 1);
    return st;
  }
  st = gs_nn_fashion_mnist_load(c->data_dir, 1, train);
  if (st == GS_OK) st = gs_nn_fashion_mnist_load(c->data_dir, 0, test);
  /* A missing or unreadable data file is bad input, found before any work
   * (exit 2, docs/CLI.md): an elastic job or the cluster manager must not
   * relaunch it as if it were a failure of the run. */
  if (st == GS_ERR_IO) {
    char why[1024];
    snprintf(why, sizeof why, "%s", gs_last_error());
    st = gs_error(GS_ERR_INVALID_ARG, "%s", why);
  }
  return st;
}

gs_status train_check_data(const gs_train_config *c, const gs_nn_dataset *ds, int train) {
  char name[4200];
  data_name(c, train, name, sizeof name);
  if (ds->n == 0) return gs_error(GS_ERR_INVALID_ARG, "%s: no samples", name);
  if (ds->c != GS_TRAIN_IN_C || ds->h != GS_TRAIN_IN_H || ds->w != GS_TRAIN_IN_W)
    return gs_error(GS_ERR_INVALID_ARG,
                    "%s: the images are %dx%dx%d (channels x rows x columns), but the %s "
                    "model takes %dx%dx%d images (Fashion-MNIST's shape)",
                    name, ds->c, ds->h, ds->w, gs_nn_model_name(c->model), GS_TRAIN_IN_C,
                    GS_TRAIN_IN_H, GS_TRAIN_IN_W);
  if (ds->classes != GS_TRAIN_CLASSES)
    return gs_error(GS_ERR_INVALID_ARG, "%s: %d classes, but the %s model has %d outputs",
                    name, ds->classes, gs_nn_model_name(c->model), GS_TRAIN_CLASSES);
  for (size_t i = 0; i < ds->n; i++)
    if (ds->labels[i] < 0 || ds->labels[i] >= GS_TRAIN_CLASSES)
      return gs_error(GS_ERR_INVALID_ARG,
                      "%s: the label of sample %zu is %d, outside the model's %d classes",
                      name, i, (int)ds->labels[i], GS_TRAIN_CLASSES);
  return GS_OK;
}
