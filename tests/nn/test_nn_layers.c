/*
 * Gradient checks: every layer's backward against central finite
 * differences of the scalar L = sum(y * R), R a fixed random tensor, so that
 * dL/dy = R is what backward is fed. Parameters and inputs are perturbed one
 * scalar at a time (all of them: the nets are tiny), and L is summed in
 * double from the f32 outputs.
 *
 * Inputs of ReLU and max-pooling are distinct multiples of 0.05 offset by
 * 0.025, so that no perturbation of +-eps (0.01) crosses a kink or changes
 * which element of a window is the largest.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gradsync/nn.h"

static uint64_t rng_state = 12345;
static double urand(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double loss_of(gs_nn_net *net, const float *x, int batch, const float *r,
                      size_t n_out) {
  const float *y;
  assert_int_equal(gs_nn_forward(net, x, batch, &y), GS_OK);
  double l = 0.0;
  for (size_t i = 0; i < n_out; i++) l += (double)y[i] * (double)r[i];
  return l;
}

static int close_enough(double num, double ana, double atol, double rtol) {
  return fabs(num - ana) <= atol + rtol * fmax(fabs(num), fabs(ana));
}

/* The central difference, or where a ReLU kink lies within eps (the ReLUs
 * inside residual blocks see unconstrained values), one of the one-sided
 * differences: backward gives the derivative of the side the point is on. */
static int smooth_or_one_sided(double central, double lp, double lm, double l0,
                               double eps, double ana, double atol,
                               double rtol) {
  return close_enough(central, ana, atol, rtol) ||
         close_enough((lp - l0) / eps, ana, atol, rtol) ||
         close_enough((l0 - lm) / eps, ana, atol, rtol);
}

/* The step: 0.01 keeps f32 rounding in L far below the tolerance; the
 * residual blocks, where many ReLU inputs move at once, use 0.001. */
static double fd_eps = 1e-2;

/* Checks every parameter and input gradient of net (finalized) on x. */
static void fd_check(gs_nn_net *net, float *x, int batch, const char *what) {
  const double eps = fd_eps, atol = 3e-3, rtol = 2e-2;
  size_t in = gs_nn_input_size(net) * (size_t)batch;
  size_t n_out = gs_nn_output_size(net) * (size_t)batch;
  float *r = malloc(n_out * sizeof *r);
  for (size_t i = 0; i < n_out; i++) r[i] = (float)(2.0 * urand() - 1.0);

  gs_nn_set_input_grad(net, 1);
  gs_nn_set_training(net, 1);
  gs_nn_freeze_dropout(net, 0);
  (void)loss_of(net, x, batch, r, n_out); /* draws the dropout masks */
  gs_nn_freeze_dropout(net, 1);
  double l0 = loss_of(net, x, batch, r, n_out);
  assert_int_equal(gs_nn_backward_from(net, r), GS_OK);

  size_t total = gs_nn_param_total(net);
  float *w = gs_nn_weights_flat(net);
  float *ga = malloc((total + 1) * sizeof *ga);
  float *gx = malloc(in * sizeof *gx);
  memcpy(ga, gs_nn_grads_flat(net), total * sizeof *ga);
  memcpy(gx, gs_nn_input_grad(net), in * sizeof *gx);

  int bad = 0;
  for (size_t i = 0; i < total; i++) {
    float keep = w[i];
    w[i] = keep + (float)eps;
    double lp = loss_of(net, x, batch, r, n_out);
    w[i] = keep - (float)eps;
    double lm = loss_of(net, x, batch, r, n_out);
    w[i] = keep;
    double num = (lp - lm) / (2 * eps);
    if (!smooth_or_one_sided(num, lp, lm, l0, eps, ga[i], atol, rtol) && bad++ < 5)
      print_error("%s: parameter %zu: numeric %.6f analytic %.6f\n", what, i,
                  num, (double)ga[i]);
  }
  for (size_t i = 0; i < in; i++) {
    float keep = x[i];
    x[i] = keep + (float)eps;
    double lp = loss_of(net, x, batch, r, n_out);
    x[i] = keep - (float)eps;
    double lm = loss_of(net, x, batch, r, n_out);
    x[i] = keep;
    double num = (lp - lm) / (2 * eps);
    if (!smooth_or_one_sided(num, lp, lm, l0, eps, gx[i], atol, rtol) && bad++ < 5)
      print_error("%s: input %zu: numeric %.6f analytic %.6f\n", what, i, num,
                  (double)gx[i]);
  }
  assert_int_equal(bad, 0);
  free(r);
  free(ga);
  free(gx);
}

static float *random_input(size_t n) {
  float *x = malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = (float)(2.0 * urand() - 1.0);
  return x;
}

/* Distinct values k * 0.05 + 0.025 in a random order. */
static float *kinkfree_input(size_t n) {
  float *x = malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = (float)(((double)i - (double)n / 2) * 0.05 + 0.025);
  for (size_t i = n - 1; i > 0; i--) {
    size_t j = (size_t)(urand() * (double)(i + 1));
    float t = x[i];
    x[i] = x[j];
    x[j] = t;
  }
  return x;
}

typedef gs_status (*build_fn)(gs_nn_net *net);

static void check_layer(const char *what, int batch, int c, int h, int w,
                        build_fn build, int kinkfree) {
  gs_nn_net *net;
  assert_int_equal(gs_nn_net_create(&net, c, h, w, batch), GS_OK);
  assert_int_equal(build(net), GS_OK);
  assert_int_equal(gs_nn_finalize(net, GS_NN_INIT_XAVIER, 99), GS_OK);
  /* Non-trivial biases and batch-norm affine parameters. */
  float *wf = gs_nn_weights_flat(net);
  for (size_t i = 0; i < gs_nn_param_count(net); i++) {
    const gs_nn_param *p = gs_nn_param_at(net, i);
    if (strstr(p->name, "bias") || strstr(p->name, "bn"))
      for (size_t j = 0; j < p->count; j++)
        p->weights[j] += (float)(0.5 * urand() - 0.25);
  }
  (void)wf;
  size_t n = gs_nn_input_size(net) * (size_t)batch;
  float *x = kinkfree ? kinkfree_input(n) : random_input(n);
  fd_check(net, x, batch, what);
  free(x);
  gs_nn_net_destroy(net);
}

static gs_status b_linear(gs_nn_net *n) { return gs_nn_add_linear(n, "fc", 5, 1); }
static gs_status b_linear_nobias(gs_nn_net *n) { return gs_nn_add_linear(n, "fc", 4, 0); }
static gs_status b_conv_same3(gs_nn_net *n) { return gs_nn_add_conv2d(n, "c", 3, 3, 1, 1, 1); }
static gs_status b_conv_same3_narrow(gs_nn_net *n) { return gs_nn_add_conv2d(n, "c", 2, 3, 1, 1, 1); }
static gs_status b_conv_same5(gs_nn_net *n) { return gs_nn_add_conv2d(n, "c", 2, 5, 1, 2, 1); }
static gs_status b_conv_s2(gs_nn_net *n) { return gs_nn_add_conv2d(n, "c", 3, 3, 2, 1, 1); }
static gs_status b_conv_valid(gs_nn_net *n) { return gs_nn_add_conv2d(n, "c", 2, 3, 1, 0, 1); }
static gs_status b_conv_1x1s2(gs_nn_net *n) { return gs_nn_add_conv2d(n, "c", 3, 1, 2, 0, 0); }
static gs_status b_conv_1x1(gs_nn_net *n) { return gs_nn_add_conv2d(n, "c", 2, 1, 1, 0, 1); }
static gs_status b_relu(gs_nn_net *n) { return gs_nn_add_relu(n); }
static gs_status b_maxpool2(gs_nn_net *n) { return gs_nn_add_maxpool(n, 2, 2); }
static gs_status b_maxpool3s2(gs_nn_net *n) { return gs_nn_add_maxpool(n, 3, 2); }
static gs_status b_avgpool2(gs_nn_net *n) { return gs_nn_add_avgpool(n, 2, 2); }
static gs_status b_avgpool_global(gs_nn_net *n) { return gs_nn_add_avgpool(n, 0, 0); }
static gs_status b_bn(gs_nn_net *n) { return gs_nn_add_batchnorm(n, "bn"); }
static gs_status b_dropout(gs_nn_net *n) { return gs_nn_add_dropout(n, 0.4f); }
static gs_status b_flatten_linear(gs_nn_net *n) {
  gs_status st = gs_nn_add_flatten(n);
  return st != GS_OK ? st : gs_nn_add_linear(n, "fc", 3, 1);
}
static gs_status b_residual_identity(gs_nn_net *n) {
  gs_status st = gs_nn_residual_begin(n, "res");
  if (st == GS_OK) st = gs_nn_add_conv2d(n, "res.c", 2, 3, 1, 1, 1);
  if (st == GS_OK) st = gs_nn_residual_end(n);
  return st;
}
static gs_status b_basic_block_proj(gs_nn_net *n) {
  return gs_nn_add_basic_block(n, "blk", 3, 2);
}
static gs_status b_basic_block_id(gs_nn_net *n) {
  return gs_nn_add_basic_block(n, "blk", 2, 1);
}
/* Followed by a layer, the block's ReLU is fused into the residual add. */
static gs_status b_basic_block_fused(gs_nn_net *n) {
  gs_status st = gs_nn_add_basic_block(n, "blk", 2, 1);
  return st != GS_OK ? st : gs_nn_add_conv2d(n, "after", 2, 1, 1, 0, 1);
}

static void test_linear(void **s) {
  (void)s;
  check_layer("linear", 3, 2, 2, 2, b_linear, 0);
  check_layer("linear-nobias", 2, 6, 1, 1, b_linear_nobias, 0);
}
static void test_conv(void **s) {
  (void)s;
  check_layer("conv3x3 same", 2, 2, 5, 5, b_conv_same3, 0);
  check_layer("conv3x3 same, one image per GEMM", 2, 1, 12, 12, b_conv_same3, 0);
  /* cout <= cin: the input gradient through the flipped kernel, with
   * images grouped and (12x12) one image in chunks. */
  check_layer("conv3x3 same 3->2", 2, 3, 5, 5, b_conv_same3_narrow, 0);
  check_layer("conv3x3 same 3->2, one image per GEMM", 2, 3, 12, 12,
              b_conv_same3_narrow, 0);
  check_layer("conv5x5 pad 2", 2, 2, 6, 5, b_conv_same5, 0);
  check_layer("conv3x3 stride 2", 3, 2, 7, 6, b_conv_s2, 0);
  check_layer("conv3x3 valid", 2, 2, 5, 6, b_conv_valid, 0);
  check_layer("conv1x1 stride 2", 2, 3, 6, 6, b_conv_1x1s2, 0);
  check_layer("conv1x1", 2, 3, 12, 12, b_conv_1x1, 0);
}
static void test_relu(void **s) { (void)s; check_layer("relu", 2, 3, 4, 4, b_relu, 1); }
static void test_maxpool(void **s) {
  (void)s;
  check_layer("maxpool 2x2", 2, 2, 4, 6, b_maxpool2, 1);
  check_layer("maxpool 2x2 odd input", 2, 2, 5, 5, b_maxpool2, 1);
  check_layer("maxpool 3x3 stride 2", 2, 2, 7, 7, b_maxpool3s2, 1);
}
static void test_avgpool(void **s) {
  (void)s;
  check_layer("avgpool 2x2", 2, 2, 4, 6, b_avgpool2, 0);
  check_layer("avgpool global", 3, 4, 5, 5, b_avgpool_global, 0);
}
static void test_batchnorm(void **s) { (void)s; check_layer("batchnorm", 4, 3, 3, 3, b_bn, 0); }
static void test_dropout(void **s) { (void)s; check_layer("dropout", 3, 2, 4, 4, b_dropout, 0); }
static void test_flatten(void **s) { (void)s; check_layer("flatten", 2, 2, 3, 3, b_flatten_linear, 0); }
static void test_residual(void **s) {
  (void)s;
  fd_eps = 1e-3;
  check_layer("residual identity", 2, 2, 4, 4, b_residual_identity, 0);
  check_layer("basic block, projection", 4, 2, 6, 6, b_basic_block_proj, 0);
  check_layer("basic block, identity", 4, 2, 5, 5, b_basic_block_id, 0);
  check_layer("basic block, fused ReLU", 4, 2, 5, 5, b_basic_block_fused, 0);
  fd_eps = 1e-2;
}

/* Softmax cross-entropy: the analytic dlogits against differences of the
 * loss, and the loss itself on a hand case. */
static void test_softmax_ce(void **s) {
  (void)s;
  enum { B = 3, C = 4 };
  float z[B * C], d[B * C];
  int32_t y[B] = {0, 3, 1};
  for (int i = 0; i < B * C; i++) z[i] = (float)(3.0 * urand() - 1.5);
  float loss;
  int correct;
  assert_int_equal(gs_nn_softmax_ce(z, y, B, C, d, &loss, &correct), GS_OK);
  for (int i = 0; i < B * C; i++) {
    const float eps = 1e-2f;
    float keep = z[i], lp, lm;
    z[i] = keep + eps;
    gs_nn_softmax_ce(z, y, B, C, NULL, &lp, NULL);
    z[i] = keep - eps;
    gs_nn_softmax_ce(z, y, B, C, NULL, &lm, NULL);
    z[i] = keep;
    assert_true(close_enough((lp - lm) / (2 * eps), d[i], 1e-3, 1e-2));
  }
  /* Uniform logits: loss log(C), nothing correct except ties at index 0. */
  float u[C] = {0, 0, 0, 0};
  int32_t l1[1] = {2};
  assert_int_equal(gs_nn_softmax_ce(u, l1, 1, C, NULL, &loss, &correct), GS_OK);
  assert_float_equal(loss, logf(4.0f), 1e-6);
  assert_int_equal(correct, 0);
  int32_t badl[1] = {7};
  assert_int_equal(gs_nn_softmax_ce(u, badl, 1, C, NULL, &loss, NULL),
                   GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "label 7"));
}

/* Shapes that do not fit are refused at build time with a message. */
static void test_bad_shapes(void **s) {
  (void)s;
  gs_nn_net *net;
  assert_int_equal(gs_nn_net_create(&net, 1, 4, 4, 2), GS_OK);
  assert_int_equal(gs_nn_add_conv2d(net, "c", 2, 7, 1, 0, 1), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_nn_add_maxpool(net, 5, 1), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_nn_residual_end(net), GS_ERR_STATE);
  assert_int_equal(gs_nn_residual_begin(net, "r"), GS_OK);
  assert_int_equal(gs_nn_add_conv2d(net, "r.c", 3, 3, 1, 1, 0), GS_OK);
  assert_int_equal(gs_nn_residual_end(net), GS_ERR_INVALID_ARG); /* 3 vs 1 channels */
  assert_int_equal(gs_nn_finalize(net, GS_NN_INIT_KAIMING, 1), GS_ERR_STATE);
  gs_nn_net_destroy(net);
  assert_int_equal(gs_nn_net_create(&net, 1, 4, 4, 2), GS_OK);
  assert_int_equal(gs_nn_add_relu(net), GS_OK);
  assert_int_equal(gs_nn_finalize(net, GS_NN_INIT_KAIMING, 1), GS_OK);
  float x[3 * 16] = {0};
  assert_int_equal(gs_nn_forward(net, x, 3, NULL), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_nn_add_relu(net), GS_ERR_STATE);
  gs_nn_net_destroy(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_linear),     cmocka_unit_test(test_conv),
      cmocka_unit_test(test_relu),       cmocka_unit_test(test_maxpool),
      cmocka_unit_test(test_avgpool),    cmocka_unit_test(test_batchnorm),
      cmocka_unit_test(test_dropout),    cmocka_unit_test(test_flatten),
      cmocka_unit_test(test_residual),   cmocka_unit_test(test_softmax_ce),
      cmocka_unit_test(test_bad_shapes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
