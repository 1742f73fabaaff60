/*
 * The optimizer interface and the fused parallel update (bitwise the same
 * as the per-tensor loop for 1, 2, 3 and 4 threads; the interface's errors),
 * and the layer hooks: every linear and conv layer is reported once per
 * pass with its input and output gradient, and those reproduce the weight
 * gradient exactly as K-FAC uses them (dW = dy^T x for linear, the sum over
 * images of dy col^T for conv, with col from gs_nn_layer_patches).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gradsync/nn.h"
#include "gradsync/optim.h"

static gs_nn_net *model(gs_nn_model m, int batch, uint64_t seed) {
  gs_nn_net *net = NULL;
  assert_int_equal(gs_nn_model_create(&net, m, batch, seed, NULL), GS_OK);
  return net;
}

static void fill_grads(gs_nn_net *net, uint64_t seed) {
  float *g = gs_nn_grads_flat(net);
  uint64_t s = seed;
  for (size_t i = 0; i < gs_nn_param_total(net); i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    g[i] = (float)((double)(s >> 40) / 16777216.0 - 0.5);
  }
}

/* Five steps per-tensor vs fused with `threads`, for each SGD variant. */
static void test_fused_bitwise(void **st) {
  (void)st;
  const gs_nn_sgd_config cfgs[] = {
      {.lr = 0.1f, .momentum = 0.0f, .weight_decay = 0.0f},
      {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f},
      {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f, .nesterov = 1}};
  for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
    for (int threads = 1; threads <= 4; threads++) {
      gs_nn_net *a = model(GS_NN_MODEL_RESNET, 2, 7), *b = model(GS_NN_MODEL_RESNET, 2, 7);
      gs_nn_sgd *sa = NULL;
      gs_nn_optim *ob = NULL;
      assert_int_equal(gs_nn_sgd_create(&sa, a, &cfgs[c]), GS_OK);
      assert_int_equal(gs_nn_optim_sgd_create(&ob, b, &cfgs[c], threads), GS_OK);
      assert_int_equal(gs_nn_sgd_threads(gs_nn_optim_sgd(ob)), threads);
      for (int step = 0; step < 5; step++) {
        fill_grads(a, 100 + (uint64_t)step);
        fill_grads(b, 100 + (uint64_t)step);
        for (size_t i = 0; i < gs_nn_param_count(a); i++)
          assert_int_equal(gs_nn_sgd_step_param(sa, i), GS_OK);
        assert_int_equal(gs_nn_optim_step(ob), GS_OK);
      }
      size_t n = gs_nn_param_total(a);
      assert_memory_equal(gs_nn_weights_flat(a), gs_nn_weights_flat(b), n * sizeof(float));
      assert_memory_equal(gs_nn_sgd_momentum_flat(sa),
                          gs_nn_sgd_momentum_flat(gs_nn_optim_sgd(ob)), n * sizeof(float));
      /* and the weights did move */
      gs_nn_net *fresh = model(GS_NN_MODEL_RESNET, 2, 7);
      assert_memory_not_equal(gs_nn_weights_flat(fresh), gs_nn_weights_flat(b),
                              n * sizeof(float));
      gs_nn_net_destroy(fresh);
      gs_nn_sgd_destroy(sa);
      gs_nn_optim_destroy(ob);
      gs_nn_net_destroy(a);
      gs_nn_net_destroy(b);
    }
}

static void count_task(void *ctx, int task) { ((int *)ctx)[task]++; }

static void test_pool_counts(void **st) {
  (void)st;
  for (int threads = 1; threads <= 4; threads++) {
    gs_nn_pool *p = NULL;
    assert_int_equal(gs_nn_pool_create(&p, threads), GS_OK);
    for (int ntasks = 1; ntasks <= 37; ntasks += 6) {
      int hits[64] = {0};
      for (int round = 0; round < 20; round++) gs_nn_pool_run(p, count_task, hits, ntasks);
      for (int t = 0; t < 64; t++) assert_int_equal(hits[t], t < ntasks ? 20 : 0);
    }
    /* Jobs of changing size back to back: a worker still finishing one job
     * must not take a task of the next (it ran twice, and the caller
     * returned before the task had finished). */
    int seen[64] = {0}, want[64] = {0};
    for (int round = 0; round < 3000; round++) {
      int ntasks = 1 + (round * 7) % 40;
      gs_nn_pool_run(p, count_task, seen, ntasks);
      for (int t = 0; t < ntasks; t++) want[t]++;
    }
    assert_memory_equal(seen, want, sizeof seen);
    gs_nn_pool_destroy(p);
  }
  gs_nn_pool *p = (gs_nn_pool *)1;
  assert_int_equal(gs_nn_pool_create(&p, 0), GS_ERR_INVALID_ARG);
}

static void test_interface(void **st) {
  (void)st;
  gs_nn_net *net = model(GS_NN_MODEL_MLP, 2, 1);
  gs_nn_sgd_config cfg = {.lr = 0.5f, .momentum = 0.9f};
  gs_nn_optim *o = NULL;
  assert_int_equal(gs_nn_optim_sgd_create(&o, net, &cfg, 1), GS_OK);
  assert_string_equal(gs_nn_optim_name(o), "sgd");
  assert_true(gs_nn_optim_has_step_param(o));
  gs_nn_optim_set_lr(o, 0.25f);
  assert_true(gs_nn_optim_lr(o) == 0.25f);
  assert_true(gs_nn_sgd_lr(gs_nn_optim_sgd(o)) == 0.25f);
  assert_int_equal(gs_nn_optim_step_param(o, 99), GS_ERR_INVALID_ARG);
  gs_nn_optim_destroy(o);
  /* bad configuration: no optimizer */
  cfg.lr = -1.0f;
  o = (gs_nn_optim *)1;
  assert_int_equal(gs_nn_optim_sgd_create(&o, net, &cfg, 2), GS_ERR_INVALID_ARG);
  assert_null(o);
  /* an optimizer without step_param refuses per-tensor steps */
  static const gs_nn_optim_ops whole = {.name = "whole", .step = NULL};
  assert_int_equal(gs_nn_optim_create(&o, &whole, NULL), GS_ERR_INVALID_ARG);
  gs_nn_net_destroy(net);
}

static gs_status step_ok(void *impl) { (void)impl; return GS_OK; }

static void test_no_step_param(void **st) {
  (void)st;
  static const gs_nn_optim_ops ops = {.name = "whole", .step = step_ok};
  gs_nn_optim *o = NULL;
  assert_int_equal(gs_nn_optim_create(&o, &ops, NULL), GS_OK);
  assert_false(gs_nn_optim_has_step_param(o));
  assert_int_equal(gs_nn_optim_step(o), GS_OK);
  assert_int_equal(gs_nn_optim_step_param(o, 0), GS_ERR_UNSUPPORTED);
  assert_null(gs_nn_optim_sgd(o));
  gs_nn_optim_destroy(o);
}

/* ---- Layer hooks --------------------------------------------------------- */

typedef struct {
  gs_nn_net *net;
  size_t n;
  const float *x[64];
  float *dy[64];
  int fwd_calls[64], bwd_calls[64];
  size_t bwd_order[64], nbwd;
  int batch;
} hook_rec;

static void on_fwd(void *ctx, size_t layer, const float *x, int batch) {
  hook_rec *r = ctx;
  assert_true(layer < r->n);
  r->x[layer] = x;
  r->fwd_calls[layer]++;
  r->batch = batch;
}

static void on_bwd(void *ctx, size_t layer, const float *dy, int batch) {
  hook_rec *r = ctx;
  gs_nn_layer_info li;
  assert_int_equal(gs_nn_hook_layer_info(r->net, layer, &li), GS_OK);
  size_t n = (size_t)batch * (size_t)li.d_out * (size_t)li.spatial;
  free(r->dy[layer]);
  r->dy[layer] = malloc(n * sizeof(float));
  memcpy(r->dy[layer], dy, n * sizeof(float));
  r->bwd_calls[layer]++;
  r->bwd_order[r->nbwd++] = layer;
}

static void check_model_hooks(gs_nn_model m, size_t want_layers) {
  const int B = 3;
  gs_nn_net *net = model(m, B, 5);
  hook_rec r;
  memset(&r, 0, sizeof r);
  r.net = net;
  r.n = gs_nn_hook_layer_count(net);
  assert_int_equal(r.n, want_layers);
  assert_int_equal(gs_nn_set_layer_hooks(net, on_fwd, on_bwd, &r), GS_OK);
  gs_nn_dataset ds;
  assert_int_equal(gs_nn_dataset_synthetic(&ds, B, 1, 28, 28, 10, 1.0f, 3), GS_OK);
  float loss;
  assert_int_equal(gs_nn_forward(net, ds.images, B, NULL), GS_OK);
  assert_int_equal(gs_nn_loss(net, ds.labels, &loss, NULL), GS_OK);
  assert_int_equal(gs_nn_backward(net), GS_OK);
  assert_int_equal(r.batch, B);
  for (size_t l = 0; l < r.n; l++) {
    assert_int_equal(r.fwd_calls[l], 1);
    assert_int_equal(r.bwd_calls[l], 1);
    if (l) assert_true(r.bwd_order[l] < r.bwd_order[l - 1]);
    gs_nn_layer_info li;
    assert_int_equal(gs_nn_hook_layer_info(net, l, &li), GS_OK);
    if (l) {
      gs_nn_layer_info prev;
      assert_int_equal(gs_nn_hook_layer_info(net, l - 1, &prev), GS_OK);
      assert_true(li.weight_index > prev.weight_index);
    }
    const gs_nn_param *w = gs_nn_param_at(net, li.weight_index);
    assert_int_equal(w->count, (size_t)li.d_in * (size_t)li.d_out);
    /* dW rebuilt from the hooks' data, in double */
    size_t K = (size_t)li.d_in, S = (size_t)li.spatial, O = (size_t)li.d_out;
    double *dw = calloc(O * K, sizeof(double));
    double *db = calloc(O, sizeof(double));
    float *col = malloc(K * S * sizeof(float));
    for (int b = 0; b < B; b++) {
      const float *xb = r.x[l] + (size_t)b * li.in_size;
      assert_int_equal(gs_nn_layer_patches(net, l, xb, col, S), GS_OK);
      const float *g = r.dy[l] + (size_t)b * O * S;
      for (size_t o = 0; o < O; o++)
        for (size_t p = 0; p < S; p++) {
          db[o] += g[o * S + p];
          for (size_t k = 0; k < K; k++) dw[o * K + k] += (double)g[o * S + p] * col[k * S + p];
        }
    }
    double maxabs = 0, maxerr = 0;
    for (size_t i = 0; i < O * K; i++) {
      maxabs = fmax(maxabs, fabs(dw[i]));
      maxerr = fmax(maxerr, fabs(dw[i] - w->grad[i]));
    }
    assert_true(maxabs > 0);
    assert_true(maxerr <= 1e-4 * maxabs + 1e-7);
    if (li.bias_index != SIZE_MAX) {
      const gs_nn_param *bp = gs_nn_param_at(net, li.bias_index);
      for (size_t o = 0; o < O; o++) assert_true(fabs(db[o] - bp->grad[o]) <= 1e-4 * maxabs + 1e-6);
    }
    free(dw);
    free(db);
    free(col);
    free(r.dy[l]);
  }
  /* bad layer index */
  gs_nn_layer_info li;
  assert_int_equal(gs_nn_hook_layer_info(net, r.n, &li), GS_ERR_INVALID_ARG);
  float dummy[4];
  assert_int_equal(gs_nn_layer_patches(net, 0, ds.images, dummy, 0), GS_ERR_INVALID_ARG);
  /* removing the hooks stops the calls */
  assert_int_equal(gs_nn_set_layer_hooks(net, NULL, NULL, NULL), GS_OK);
  assert_int_equal(gs_nn_forward(net, ds.images, B, NULL), GS_OK);
  assert_int_equal(r.fwd_calls[0], 1);
  gs_nn_dataset_free(&ds);
  gs_nn_net_destroy(net);
}

static void test_hooks_cnn(void **st) { (void)st; check_model_hooks(GS_NN_MODEL_CNN, 4); }
static void test_hooks_mlp(void **st) { (void)st; check_model_hooks(GS_NN_MODEL_MLP, 3); }
/* conv1 + 6 blocks x 2 convs + 2 projections + fc */
static void test_hooks_resnet(void **st) { (void)st; check_model_hooks(GS_NN_MODEL_RESNET, 16); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fused_bitwise),
      cmocka_unit_test(test_pool_counts),
      cmocka_unit_test(test_interface),
      cmocka_unit_test(test_no_step_param),
      cmocka_unit_test(test_hooks_cnn),
      cmocka_unit_test(test_hooks_mlp),
      cmocka_unit_test(test_hooks_resnet),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
