/*
 * The optimizer interface (gradsync/optim.h): a table of operations over an
 * implementation, SGD as the first implementation.
 */
#include "gradsync/optim.h"

#include "nn_internal.h"

struct gs_nn_optim {
  const gs_nn_optim_ops *ops;
  void *impl;
};

gs_status gs_nn_optim_create(gs_nn_optim **out, const gs_nn_optim_ops *ops,
                             void *impl) {
  if (!out || !ops || !ops->step || !ops->name) {
    if (ops && ops->destroy && impl) ops->destroy(impl);
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_optim_create: out, ops, ops->step and ops->name "
                    "are required");
  }
  *out = NULL;
  gs_nn_optim *o = gs_calloc(1, sizeof *o);
  if (!o) {
    if (ops->destroy && impl) ops->destroy(impl);
    return GS_ERR_NOMEM;
  }
  o->ops = ops;
  o->impl = impl;
  *out = o;
  return GS_OK;
}

void gs_nn_optim_destroy(gs_nn_optim *o) {
  if (!o) return;
  if (o->ops->destroy && o->impl) o->ops->destroy(o->impl);
  gs_free(o);
}

const char *gs_nn_optim_name(const gs_nn_optim *o) {
  return o ? o->ops->name : "(null)";
}

gs_status gs_nn_optim_step(gs_nn_optim *o) {
  if (!o) return gs_error(GS_ERR_INVALID_ARG, "gs_nn_optim_step: opt is NULL");
  return o->ops->step(o->impl);
}

gs_status gs_nn_optim_step_param(gs_nn_optim *o, size_t index) {
  if (!o)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_optim_step_param: opt is NULL");
  if (!o->ops->step_param)
    return gs_error(GS_ERR_UNSUPPORTED,
                    "gs_nn_optim_step_param: optimizer '%s' updates all "
                    "tensors at once (tensor %zu asked for alone)",
                    o->ops->name, index);
  return o->ops->step_param(o->impl, index);
}

int gs_nn_optim_has_step_param(const gs_nn_optim *o) {
  return o && o->ops->step_param != NULL;
}

void gs_nn_optim_set_lr(gs_nn_optim *o, float lr) {
  if (o && o->ops->set_lr) o->ops->set_lr(o->impl, lr);
}

float gs_nn_optim_lr(const gs_nn_optim *o) {
  return o && o->ops->lr ? o->ops->lr(o->impl) : 0.0f;
}

gs_nn_sgd *gs_nn_optim_sgd(gs_nn_optim *o) {
  return o && o->ops->sgd ? o->ops->sgd(o->impl) : NULL;
}

void *gs_nn_optim_impl(gs_nn_optim *o) { return o ? o->impl : NULL; }

/* ---- SGD behind the interface ----------------------------------------------- */

static gs_status sgd_op_step(void *impl) { return gs_nn_sgd_step(impl); }
static gs_status sgd_op_step_param(void *impl, size_t i) {
  return gs_nn_sgd_step_param(impl, i);
}
static void sgd_op_set_lr(void *impl, float lr) { gs_nn_sgd_set_lr(impl, lr); }
static float sgd_op_lr(const void *impl) { return gs_nn_sgd_lr(impl); }
static gs_nn_sgd *sgd_op_sgd(void *impl) { return impl; }
static void sgd_op_destroy(void *impl) { gs_nn_sgd_destroy(impl); }

static const gs_nn_optim_ops sgd_ops = {
    .name = "sgd",
    .step = sgd_op_step,
    .step_param = sgd_op_step_param,
    .set_lr = sgd_op_set_lr,
    .lr = sgd_op_lr,
    .sgd = sgd_op_sgd,
    .destroy = sgd_op_destroy,
};

gs_status gs_nn_optim_sgd_create(gs_nn_optim **out, gs_nn_net *net,
                                 const gs_nn_sgd_config *cfg, int threads) {
  if (!out)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_optim_sgd_create: out is NULL");
  *out = NULL;
  gs_nn_sgd *sgd = NULL;
  GS_CHECK(gs_nn_sgd_create(&sgd, net, cfg));
  if (threads > 1) {
    gs_status st = gs_nn_sgd_set_threads(sgd, threads);
    if (st != GS_OK) {
      gs_nn_sgd_destroy(sgd);
      return st;
    }
  }
  return gs_nn_optim_create(out, &sgd_ops, sgd);
}
