/*
 * The K-FAC optimizer on one process: bad configurations are refused with
 * the field named; the option parsers; the statistics count factor and
 * inverse updates at the configured intervals; a step without a training
 * forward/backward is an error, not silent garbage; evaluation-mode passes
 * do not touch the factors; and on a small CNN K-FAC drives the training
 * loss down faster than SGD with the same learning rate and steps.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gradsync/kfac.h"

static gs_nn_net *small_net(void) {
  gs_nn_net *n = NULL;
  assert_int_equal(gs_nn_net_create(&n, 1, 8, 8, 32), GS_OK);
  assert_int_equal(gs_nn_add_conv2d(n, "conv1", 6, 3, 1, 1, 0), GS_OK);
  assert_int_equal(gs_nn_add_batchnorm(n, "bn1"), GS_OK);
  assert_int_equal(gs_nn_add_relu(n), GS_OK);
  assert_int_equal(gs_nn_add_conv2d(n, "conv2", 8, 3, 2, 1, 1), GS_OK);
  assert_int_equal(gs_nn_add_relu(n), GS_OK);
  assert_int_equal(gs_nn_add_flatten(n), GS_OK);
  assert_int_equal(gs_nn_add_linear(n, "fc", 10, 1), GS_OK);
  assert_int_equal(gs_nn_finalize(n, GS_NN_INIT_KAIMING, 42), GS_OK);
  return n;
}

static void test_bad_config(void **s) {
  (void)s;
  gs_nn_net *net = small_net();
  gs_nn_sgd_config sgd = {.lr = 0.1f, .momentum = 0.9f};
  gs_kfac_config c;
  gs_nn_optim *o = (gs_nn_optim *)1;
  gs_kfac_config_default(&c, &sgd);
  c.damping = 0.0f;
  assert_int_equal(gs_kfac_create(&o, net, NULL, &c), GS_ERR_INVALID_ARG);
  assert_null(o);
  assert_non_null(strstr(gs_last_error(), "damping"));
  gs_kfac_config_default(&c, &sgd);
  c.factor_decay = 1.0f;
  assert_int_equal(gs_kfac_create(&o, net, NULL, &c), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "decay"));
  gs_kfac_config_default(&c, &sgd);
  c.inv_every = 0;
  assert_int_equal(gs_kfac_create(&o, net, NULL, &c), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "interval"));
  gs_kfac_config_default(&c, &sgd);
  c.kl_clip = -1.0f;
  assert_int_equal(gs_kfac_create(&o, net, NULL, &c), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "KL"));
  gs_kfac_config_default(&c, &sgd);
  c.sgd.lr = -1.0f;
  assert_int_equal(gs_kfac_create(&o, net, NULL, &c), GS_ERR_INVALID_ARG);
  gs_nn_net_destroy(net);
}

static void test_parse(void **s) {
  (void)s;
  gs_kfac_dist d;
  gs_kfac_inverse m;
  assert_int_equal(gs_kfac_dist_parse("spd", &d), GS_OK);
  assert_int_equal(d, GS_KFAC_DIST_SPD);
  assert_int_equal(gs_kfac_dist_parse("dp", &d), GS_OK);
  assert_int_equal(d, GS_KFAC_DIST_DP);
  assert_int_equal(gs_kfac_dist_parse("SPD", &d), GS_ERR_PARSE);
  assert_int_equal(gs_kfac_dist_parse(NULL, &d), GS_ERR_PARSE);
  assert_int_equal(gs_kfac_inverse_parse("eig", &m), GS_OK);
  assert_int_equal(m, GS_KFAC_INV_EIG);
  assert_int_equal(gs_kfac_inverse_parse("lu", &m), GS_ERR_PARSE);
  assert_string_equal(gs_kfac_dist_name(GS_KFAC_DIST_DKFAC), "dkfac");
  assert_string_equal(gs_kfac_inverse_name(GS_KFAC_INV_CHOL), "chol");
}

/* Trains `steps` steps on a fixed synthetic set; returns the last loss. */
static float train(gs_nn_optim *opt, gs_nn_net *net, const gs_nn_dataset *ds,
                   int steps, float *first) {
  float loss = 0;
  size_t idx[32];
  float x[32 * 64];
  int32_t y[32];
  for (int s = 0; s < steps; s++) {
    for (int i = 0; i < 32; i++) idx[i] = ((size_t)s * 32 + i) % ds->n;
    assert_int_equal(gs_nn_dataset_gather(ds, idx, 32, x, y), GS_OK);
    assert_int_equal(gs_nn_forward(net, x, 32, NULL), GS_OK);
    assert_int_equal(gs_nn_loss(net, y, &loss, NULL), GS_OK);
    assert_int_equal(gs_nn_backward(net), GS_OK);
    assert_int_equal(gs_nn_optim_step(opt), GS_OK);
    if (s == 0 && first) *first = loss;
  }
  return loss;
}

static void test_intervals_and_state(void **s) {
  (void)s;
  gs_nn_net *net = small_net();
  gs_nn_dataset ds;
  assert_int_equal(gs_nn_dataset_synthetic(&ds, 256, 1, 8, 8, 10, 1.0f, 3), GS_OK);
  gs_nn_sgd_config sgd = {.lr = 0.05f, .momentum = 0.9f};
  gs_kfac_config c;
  gs_kfac_config_default(&c, &sgd);
  c.cov_every = 2;
  c.inv_every = 4;
  gs_nn_optim *o = NULL;
  assert_int_equal(gs_kfac_create(&o, net, NULL, &c), GS_OK);
  assert_string_equal(gs_nn_optim_name(o), "kfac");
  assert_false(gs_nn_optim_has_step_param(o));
  assert_int_equal(gs_nn_optim_step_param(o, 0), GS_ERR_UNSUPPORTED);
  /* a step before any forward/backward on a factor step */
  assert_int_equal(gs_nn_optim_step(o), GS_ERR_STATE);
  assert_non_null(strstr(gs_last_error(), "conv1"));
  train(o, net, &ds, 9, NULL);
  gs_kfac_stats st;
  assert_int_equal(gs_kfac_stats_get(o, &st), GS_OK);
  assert_int_equal(st.steps, 9);
  assert_int_equal(st.factor_updates, 5);  /* steps 0 2 4 6 8 */
  assert_int_equal(st.inverse_updates, 3); /* steps 0 4 8 */
  assert_int_equal(st.factor_bytes, 0);    /* one process: no traffic */
  assert_true(st.factor_compute_s > 0 && st.inversion_s > 0);
  /* an evaluation pass leaves the factors alone: the next factor step
   * still needs its training forward */
  gs_nn_set_training(net, 0);
  float x[64 * 4] = {0};
  assert_int_equal(gs_nn_forward(net, x, 4, NULL), GS_OK);
  gs_nn_set_training(net, 1);
  /* step 9 is not a factor step: a step on old gradients is allowed */
  assert_int_equal(gs_nn_optim_step(o), GS_OK);
  /* step 10 is: without a training pass it is refused */
  assert_int_equal(gs_nn_optim_step(o), GS_ERR_STATE);
  gs_kfac_stats_reset(o);
  assert_int_equal(gs_kfac_stats_get(o, &st), GS_OK);
  assert_int_equal(st.steps, 0);
  gs_nn_optim *sgd_opt = NULL;
  assert_int_equal(gs_nn_optim_sgd_create(&sgd_opt, net, &sgd, 1), GS_OK);
  assert_int_equal(gs_kfac_stats_get(sgd_opt, &st), GS_ERR_INVALID_ARG);
  gs_nn_optim_destroy(sgd_opt);
  gs_nn_optim_destroy(o);
  gs_nn_dataset_free(&ds);
  gs_nn_net_destroy(net);
}

static void test_beats_sgd(void **s) {
  (void)s;
  gs_nn_dataset ds;
  assert_int_equal(gs_nn_dataset_synthetic(&ds, 512, 1, 8, 8, 10, 2.0f, 5), GS_OK);
  gs_nn_sgd_config sgd = {.lr = 0.01f, .momentum = 0.9f};
  for (int m = 0; m < GS_KFAC_INV_COUNT; m++) {
    gs_nn_net *a = small_net(), *b = small_net();
    gs_nn_optim *oa = NULL, *ob = NULL;
    assert_int_equal(gs_nn_optim_sgd_create(&oa, a, &sgd, 1), GS_OK);
    gs_kfac_config c;
    gs_kfac_config_default(&c, &sgd);
    c.inverse = (gs_kfac_inverse)m;
    c.inv_every = 5;
    assert_int_equal(gs_kfac_create(&ob, b, NULL, &c), GS_OK);
    float f1, f2;
    float ls = train(oa, a, &ds, 30, &f1);
    float lk = train(ob, b, &ds, 30, &f2);
    assert_true(f1 == f2); /* same start */
    if (!(lk < ls)) fail_msg("%s: K-FAC loss %g, SGD %g after 30 steps",
                             gs_kfac_inverse_name((gs_kfac_inverse)m), lk, ls);
    gs_nn_optim_destroy(oa);
    gs_nn_optim_destroy(ob);
    gs_nn_net_destroy(a);
    gs_nn_net_destroy(b);
  }
  gs_nn_dataset_free(&ds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_config),
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_intervals_and_state),
      cmocka_unit_test(test_beats_sgd),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
