/* SGD with momentum, Nesterov and weight decay (src/nn's gs_nn_sgd) behind
 * the optimizer interface (optim.h). */
#include <string.h>

#include "optim_kfac.h"
#include "train_ctx.h"

static gs_status sgd_create(train_ctx *t, void **self) {
  const gs_train_config *c = t->cfg;
  gs_nn_sgd_config scfg = {.lr = c->lr, .momentum = c->momentum,
                           .weight_decay = c->weight_decay, .nesterov = c->nesterov};
  gs_nn_sgd *opt = NULL;
  gs_status st = gs_nn_sgd_create(&opt, t->net, &scfg);
  *self = opt;
  return st;
}

static gs_status sgd_step_param(void *self, size_t index) {
  return gs_nn_sgd_step_param(self, index);
}

static gs_status sgd_step(void *self) { return gs_nn_sgd_step(self); }

static void sgd_set_lr(void *self, float lr) { gs_nn_sgd_set_lr(self, lr); }

static gs_status sgd_save(void *self, const char *path, const gs_nn_net *net,
                          const gs_nn_train_state *st) {
  return gs_nn_checkpoint_save(path, net, self, st);
}

static gs_status sgd_save_begin(void *self, const char *path, const gs_nn_net *net,
                                const gs_nn_train_state *st, gs_nn_file *out) {
  return gs_nn_checkpoint_save_begin(path, net, self, st, out);
}

static gs_status sgd_load(void *self, const char *path, gs_nn_net *net,
                          gs_nn_train_state *st) {
  return gs_nn_checkpoint_load(path, net, self, st);
}

static void sgd_destroy(void *self) { gs_nn_sgd_destroy(self); }

const train_optim_ops train_optim_sgd = {
    .name = "sgd",
    .create = sgd_create,
    .step_param = sgd_step_param,
    .step = sgd_step,
    .set_lr = sgd_set_lr,
    .save = sgd_save,
    .save_begin = sgd_save_begin,
    .load = sgd_load,
    .destroy = sgd_destroy,
};

/* Every optimizer the trainer knows; a new one is a line here. */
static const train_optim_ops *const optimizers[] = {&train_optim_sgd, &train_optim_kfac};

const train_optim_ops *train_optim_find(const char *name) {
  for (size_t i = 0; i < sizeof optimizers / sizeof *optimizers; i++)
    if (strcmp(optimizers[i]->name, name) == 0) return optimizers[i];
  return NULL;
}
