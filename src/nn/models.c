/*
 * The three models of the benchmarks and examples, for 28x28 inputs (any
 * input shape works for the mlp; the cnn needs h and w divisible by 4).
 */
#include <string.h>

#include "nn_internal.h"

static const char *const MODEL_NAMES[GS_NN_MODEL_COUNT] = {"mlp", "cnn", "resnet"};

const char *gs_nn_model_name(gs_nn_model model) {
  return (unsigned)model < GS_NN_MODEL_COUNT ? MODEL_NAMES[model] : "?";
}

gs_status gs_nn_model_parse(const char *name, gs_nn_model *out) {
  for (int i = 0; name && i < GS_NN_MODEL_COUNT; i++)
    if (strcmp(name, MODEL_NAMES[i]) == 0) {
      *out = (gs_nn_model)i;
      return GS_OK;
    }
  return gs_error(GS_ERR_PARSE, "unknown model '%s' (expected mlp, cnn or resnet)",
                  name ? name : "(null)");
}

static gs_status build_mlp(gs_nn_net *net, int classes, float dropout) {
  GS_CHECK(gs_nn_add_flatten(net));
  GS_CHECK(gs_nn_add_linear(net, "fc1", 256, 1));
  GS_CHECK(gs_nn_add_relu(net));
  GS_CHECK(gs_nn_add_linear(net, "fc2", 128, 1));
  GS_CHECK(gs_nn_add_relu(net));
  if (dropout > 0.0f) GS_CHECK(gs_nn_add_dropout(net, dropout));
  return gs_nn_add_linear(net, "fc3", classes, 1);
}

/* LeNet-like: 832 + 51,264 + 1,606,144 + 5,130 = 1,663,370 parameters. */
static gs_status build_cnn(gs_nn_net *net, int classes, float dropout) {
  GS_CHECK(gs_nn_add_conv2d(net, "conv1", 32, 5, 1, 2, 1));
  GS_CHECK(gs_nn_add_relu(net));
  GS_CHECK(gs_nn_add_maxpool(net, 2, 2));
  GS_CHECK(gs_nn_add_conv2d(net, "conv2", 64, 5, 1, 2, 1));
  GS_CHECK(gs_nn_add_relu(net));
  GS_CHECK(gs_nn_add_maxpool(net, 2, 2));
  GS_CHECK(gs_nn_add_flatten(net));
  GS_CHECK(gs_nn_add_linear(net, "fc1", 512, 1));
  GS_CHECK(gs_nn_add_relu(net));
  if (dropout > 0.0f) GS_CHECK(gs_nn_add_dropout(net, dropout));
  return gs_nn_add_linear(net, "fc2", classes, 1);
}

/* He et al. 2016's CIFAR ResNet shape (section 4.2) with n = 2: a 3x3 stem,
 * three stages of two basic blocks at 16, 32 and 64 channels, global
 * average pooling and a linear classifier; where the shape changes the
 * shortcut is a 1x1 convolution + batch-norm (their option B). 174,970
 * parameters in 47 tensors for 10 classes. */
static gs_status build_resnet(gs_nn_net *net, int classes) {
  static const int widths[3] = {16, 32, 64};
  char name[32];
  GS_CHECK(gs_nn_add_conv2d(net, "conv1", 16, 3, 1, 1, 0));
  GS_CHECK(gs_nn_add_batchnorm(net, "bn1"));
  GS_CHECK(gs_nn_add_relu(net));
  for (int s = 0; s < 3; s++)
    for (int b = 0; b < 2; b++) {
      snprintf(name, sizeof name, "stage%d.block%d", s + 1, b);
      GS_CHECK(gs_nn_add_basic_block(net, name, widths[s], s > 0 && b == 0 ? 2 : 1));
    }
  GS_CHECK(gs_nn_add_avgpool(net, 0, 0));
  GS_CHECK(gs_nn_add_flatten(net));
  return gs_nn_add_linear(net, "fc", classes, 1);
}

gs_status gs_nn_model_create(gs_nn_net **out, gs_nn_model model,
                             int max_batch, uint64_t seed,
                             const gs_nn_model_options *opts) {
  gs_nn_model_options o = {0};
  if (opts) o = *opts;
  if (!o.c) o.c = 1;
  if (!o.h) o.h = 28;
  if (!o.w) o.w = 28;
  if (!o.classes) o.classes = 10;
  if (!out) return gs_error(GS_ERR_INVALID_ARG, "gs_nn_model_create: out is NULL");
  *out = NULL;
  if ((unsigned)model >= GS_NN_MODEL_COUNT)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_model_create: unknown model %d",
                    (int)model);
  gs_nn_net *net;
  GS_CHECK(gs_nn_net_create(&net, o.c, o.h, o.w, max_batch));
  gs_status st;
  switch (model) {
    case GS_NN_MODEL_MLP: st = build_mlp(net, o.classes, o.dropout); break;
    case GS_NN_MODEL_CNN: st = build_cnn(net, o.classes, o.dropout); break;
    default: st = build_resnet(net, o.classes); break;
  }
  if (st == GS_OK) st = gs_nn_finalize(net, o.init, seed);
  if (st != GS_OK) {
    gs_nn_net_destroy(net);
    return st;
  }
  *out = net;
  return GS_OK;
}
