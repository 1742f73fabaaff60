/*
 * Layer hooks for optimizers (gradsync/optim.h): the list of linear and
 * conv layers in forward order, their shapes, and the im2col patches of a
 * conv layer's input.
 */
#include <stdint.h>
#include <string.h>

#include "gradsync/optim.h"
#include "nn_internal.h"

static gs_status hooks_add(gs_nn_net *net, nn_layer *l, size_t *cap) {
  if (net->nhooked == *cap) {
    size_t nc = *cap ? 2 * *cap : 16;
    nn_layer **n = gs_malloc(nc * sizeof *n);
    if (!n) return GS_ERR_NOMEM;
    if (net->nhooked) memcpy(n, net->hooked, net->nhooked * sizeof *n);
    gs_free(net->hooked);
    net->hooked = n;
    *cap = nc;
  }
  net->hooked[net->nhooked++] = l;
  l->hook_slot = net->nhooked;
  return GS_OK;
}

/* Forward order, as parameters are numbered: a residual block's main path,
 * then its shortcut. */
static gs_status hooks_walk(gs_nn_net *net, nn_seq *s, size_t *cap) {
  for (int i = 0; i < s->n; i++) {
    nn_layer *l = s->layers[i];
    if (l->kind == NN_LINEAR || l->kind == NN_CONV) {
      GS_CHECK(hooks_add(net, l, cap));
    } else if (l->kind == NN_RESIDUAL) {
      GS_CHECK(hooks_walk(net, &l->main, cap));
      GS_CHECK(hooks_walk(net, &l->shortcut, cap));
    }
  }
  return GS_OK;
}

static gs_status hooks_build(gs_nn_net *net) {
  if (!net->finalized)
    return gs_error(GS_ERR_STATE, "layer hooks: the net is not finalized");
  if (net->hooked) return GS_OK;
  size_t cap = 0;
  gs_status st = hooks_walk(net, &net->top, &cap);
  if (st != GS_OK) nn_hooks_free(net);
  return st;
}

void nn_hooks_free(gs_nn_net *net) {
  for (size_t i = 0; i < net->nhooked; i++) net->hooked[i]->hook_slot = 0;
  gs_free(net->hooked);
  net->hooked = NULL;
  net->nhooked = 0;
}

size_t gs_nn_hook_layer_count(gs_nn_net *net) {
  if (!net || hooks_build(net) != GS_OK) return 0;
  return net->nhooked;
}

gs_status gs_nn_hook_layer_info(gs_nn_net *net, size_t layer,
                                gs_nn_layer_info *out) {
  if (!net || !out)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_hook_layer_info: a NULL argument");
  GS_CHECK(hooks_build(net));
  if (layer >= net->nhooked)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_hook_layer_info: layer %zu of %zu hooked layers",
                    layer, net->nhooked);
  const nn_layer *l = net->hooked[layer];
  memset(out, 0, sizeof *out);
  out->name = l->name;
  out->weight_index = l->param0;
  out->bias_index = l->has_bias ? l->param0 + 1 : SIZE_MAX;
  out->in_size = l->in_size;
  if (l->kind == NN_LINEAR) {
    out->kind = GS_NN_HOOK_LINEAR;
    out->d_in = (int)l->in_size;
    out->d_out = (int)l->out_size;
    out->spatial = 1;
  } else {
    out->kind = GS_NN_HOOK_CONV;
    out->d_in = l->in.c * l->k * l->k;
    out->d_out = l->out.c;
    out->spatial = l->out.h * l->out.w;
  }
  return GS_OK;
}

gs_status gs_nn_set_layer_hooks(gs_nn_net *net, gs_nn_layer_io_fn forward,
                                gs_nn_layer_io_fn backward, void *ctx) {
  if (!net)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_set_layer_hooks: net is NULL");
  GS_CHECK(hooks_build(net));
  net->hook_forward = forward;
  net->hook_backward = backward;
  net->hook_ctx = ctx;
  return GS_OK;
}

gs_status gs_nn_layer_patches(gs_nn_net *net, size_t layer, const float *x,
                              float *col, size_t ld) {
  if (!net || !x || !col)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_layer_patches: a NULL argument");
  GS_CHECK(hooks_build(net));
  if (layer >= net->nhooked)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_layer_patches: layer %zu of %zu hooked layers",
                    layer, net->nhooked);
  const nn_layer *l = net->hooked[layer];
  if (l->kind == NN_LINEAR) {
    if (ld < 1)
      return gs_error(GS_ERR_INVALID_ARG, "gs_nn_layer_patches: ld 0");
    for (size_t i = 0; i < l->in_size; i++) col[i * ld] = x[i];
    return GS_OK;
  }
  size_t hw = (size_t)l->out.h * (size_t)l->out.w;
  if (ld < hw)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_layer_patches: layer '%s': ld %zu < %zu output "
                    "positions", l->name, ld, hw);
  nn_conv_im2col(l, x, col, ld);
  return GS_OK;
}
