/*
 * SGD with momentum, Nesterov and weight decay (the update of
 * torch.optim.SGD with dampening 0, itself Sutskever et al. 2013, eq. 1-2 in
 * the "velocity" form), and the learning-rate schedule.
 */
#include <math.h>
#include <string.h>

#include "gradsync/optim.h"
#include "nn_internal.h"

gs_status gs_nn_sgd_create(gs_nn_sgd **out, gs_nn_net *net,
                           const gs_nn_sgd_config *cfg) {
  if (!out || !net || !cfg)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_sgd_create: a NULL argument");
  *out = NULL;
  if (!net->finalized)
    return gs_error(GS_ERR_STATE, "gs_nn_sgd_create: the net is not finalized");
  if (!(cfg->lr >= 0.0f) || !(cfg->momentum >= 0.0f) ||
      !(cfg->weight_decay >= 0.0f) || (cfg->nesterov && cfg->momentum <= 0.0f))
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_sgd_create: lr %g, momentum %g, weight decay %g "
                    "must be >= 0 (and Nesterov needs momentum > 0)",
                    (double)cfg->lr, (double)cfg->momentum,
                    (double)cfg->weight_decay);
  gs_nn_sgd *opt = gs_calloc(1, sizeof *opt);
  if (!opt) return GS_ERR_NOMEM;
  opt->net = net;
  opt->cfg = *cfg;
  opt->momentum_buf = gs_calloc(net->total ? net->total : 1, sizeof(float));
  if (!opt->momentum_buf) {
    gs_free(opt);
    return GS_ERR_NOMEM;
  }
  *out = opt;
  return GS_OK;
}

void gs_nn_sgd_destroy(gs_nn_sgd *opt) {
  if (!opt) return;
  gs_nn_pool_destroy(opt->pool);
  gs_free(opt->momentum_buf);
  gs_free(opt);
}

void gs_nn_sgd_set_lr(gs_nn_sgd *opt, float lr) { opt->cfg.lr = lr; }
float gs_nn_sgd_lr(const gs_nn_sgd *opt) { return opt->cfg.lr; }
float *gs_nn_sgd_momentum_flat(gs_nn_sgd *opt) { return opt->momentum_buf; }

NN_CLONES
void nn_sgd_update(const gs_nn_sgd_config *c, float *restrict w,
                       const float *restrict grad, float *restrict v,
                       size_t n) {
  const float lr = c->lr, mu = c->momentum, wd = c->weight_decay;
  if (mu == 0.0f) {
    for (size_t i = 0; i < n; i++) w[i] -= lr * (grad[i] + wd * w[i]);
  } else if (c->nesterov) {
    for (size_t i = 0; i < n; i++) {
      float g = grad[i] + wd * w[i];
      float vi = mu * v[i] + g;
      v[i] = vi;
      w[i] -= lr * (g + mu * vi);
    }
  } else {
    for (size_t i = 0; i < n; i++) {
      float vi = mu * v[i] + (grad[i] + wd * w[i]);
      v[i] = vi;
      w[i] -= lr * vi;
    }
  }
}

void gs_nn_sgd_update(const gs_nn_sgd_config *cfg, float *w,
                      const float *grad, float *v, size_t n) {
  if (cfg && n > 0) nn_sgd_update(cfg, w, grad, v, n);
}

gs_status gs_nn_sgd_step(gs_nn_sgd *opt) {
  if (!opt) return gs_error(GS_ERR_INVALID_ARG, "gs_nn_sgd_step: opt is NULL");
  if (opt->pool) return nn_sgd_step_fused(opt);
  gs_nn_net *net = opt->net;
  nn_sgd_update(&opt->cfg, net->flat_w, net->flat_g, opt->momentum_buf,
                net->total);
  return GS_OK;
}

gs_status gs_nn_sgd_step_param(gs_nn_sgd *opt, size_t index) {
  if (!opt)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_sgd_step_param: opt is NULL");
  gs_nn_net *net = opt->net;
  if (index >= net->nparams)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_sgd_step_param: tensor %zu of %zu", index,
                    net->nparams);
  size_t off = net->param_offset[index];
  nn_sgd_update(&opt->cfg, net->flat_w + off, net->flat_g + off,
             opt->momentum_buf + off, net->params[index].count);
  return GS_OK;
}

float gs_nn_lr_at(const gs_nn_lr_schedule *s, long step) {
  if (!s) return 0.0f;
  if (step < 0) step = 0;
  if (s->warmup_steps > 0 && step < s->warmup_steps)
    return s->base_lr * (float)(step + 1) / (float)s->warmup_steps;
  long t = step - (s->warmup_steps > 0 ? s->warmup_steps : 0);
  switch (s->decay) {
    case GS_NN_LR_STEP:
      if (s->step_size <= 0) return s->base_lr;
      return (float)((double)s->base_lr * pow((double)s->gamma,
                                              (double)(t / s->step_size)));
    case GS_NN_LR_COSINE: {
      long T = s->total_steps - (s->warmup_steps > 0 ? s->warmup_steps : 0);
      if (T <= 0 || t >= T) return s->min_lr;
      double c = 0.5 * (1.0 + cos(M_PI * (double)t / (double)T));
      return (float)((double)s->min_lr + ((double)s->base_lr - s->min_lr) * c);
    }
    case GS_NN_LR_CONSTANT:
    default:
      return s->base_lr;
  }
}
