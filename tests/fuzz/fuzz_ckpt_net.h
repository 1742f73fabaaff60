/*
 * The small net the checkpoint fuzz target loads into, shared with the
 * seed writer so the committed seeds fit it: a 1x1 convolution with
 * batch-norm (so that the file holds buffers as well as parameters) and a
 * linear layer, 2x2 single-channel inputs, 3 classes.
 */
#ifndef GRADSYNC_FUZZ_CKPT_NET_H
#define GRADSYNC_FUZZ_CKPT_NET_H

#include <stdio.h>
#include <stdlib.h>

#include "gradsync/nn.h"

static gs_nn_net *fuzz_ckpt_net(void) {
  gs_nn_net *net = NULL;
  if (gs_nn_net_create(&net, 1, 2, 2, 1) != GS_OK ||
      gs_nn_add_conv2d(net, "conv", 2, 1, 1, 0, 1) != GS_OK ||
      gs_nn_add_batchnorm(net, "bn") != GS_OK || gs_nn_add_flatten(net) != GS_OK ||
      gs_nn_add_linear(net, "fc", 3, 1) != GS_OK ||
      gs_nn_finalize(net, GS_NN_INIT_KAIMING, 1) != GS_OK) {
    fprintf(stderr, "fuzz: cannot build the checkpoint net: %s\n", gs_last_error());
    abort();
  }
  return net;
}

static gs_nn_sgd *fuzz_ckpt_sgd(gs_nn_net *net) {
  gs_nn_sgd_config cfg = {0.1f, 0.9f, 0.0f, 0};
  gs_nn_sgd *opt = NULL;
  if (gs_nn_sgd_create(&opt, net, &cfg) != GS_OK) abort();
  return opt;
}

#endif /* GRADSYNC_FUZZ_CKPT_NET_H */
