/*
 * DLRM's metrics (include/gradsync/dlrm.h):
 *   - AUC on hand-computed cases: perfect, reversed, a mixed order, ties
 *     between a positive and a negative (a half each), every score tied;
 *   - AUC against the O(n^2) definition (the share of positive-negative
 *     pairs ordered right, ties a half) on random scores with many ties;
 *   - AUC's refusals: every label one class (undefined: an error and NaN),
 *     no samples, a label other than 0 or 1, a NaN score;
 *   - log loss: log 2 at logit 0, stable at logits of +-100 and 1e30, its
 *     gradient (sigmoid(z) - y) / n, refusals;
 *   - NE and calibration: 1 and 1 at the base rate, a hand-computed case,
 *     each undefined alone, refusals.
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

#include "gradsync.h"

#define TEST_RNG_SEED 37
#include "../common/test_rng.h"

static double auc_of(const float *s, const float *y, size_t n) {
  double a = -1;
  assert_int_equal(gs_metric_auc(s, y, n, &a), GS_OK);
  return a;
}

static void test_auc_cases(void **state) {
  (void)state;
  const float y[4] = {0, 0, 1, 1};
  const float perfect[4] = {0.1f, 0.2f, 0.7f, 0.9f};
  const float reversed[4] = {0.9f, 0.7f, 0.2f, 0.1f};
  /* Positives 0.35 and 0.8 against negatives 0.1 and 0.4: 3 of 4 pairs. */
  const float mixed[4] = {0.1f, 0.4f, 0.35f, 0.8f};
  assert_true(auc_of(perfect, y, 4) == 1.0);
  assert_true(auc_of(reversed, y, 4) == 0.0);
  assert_true(auc_of(mixed, y, 4) == 0.75);
  /* Ties: positives {1, 3}, negatives {1, 2}: pairs 0.5 + 0 + 1 + 1 = 2.5 of 4. */
  const float ts[4] = {1, 1, 2, 3}, ty[4] = {0, 1, 0, 1};
  assert_true(auc_of(ts, ty, 4) == 0.625);
  /* Every score the same: every pair a tie. */
  const float flat[5] = {2, 2, 2, 2, 2}, fy[5] = {1, 0, 0, 1, 0};
  assert_true(auc_of(flat, fy, 5) == 0.5);
  /* One of each. */
  const float one[2] = {0.3f, -1.0f}, oy[2] = {1, 0};
  assert_true(auc_of(one, oy, 2) == 1.0);
}

static void test_auc_brute(void **state) {
  (void)state;
  for (int trial = 0; trial < 20; trial++) {
    size_t n = 2 + rnd() % 400;
    int levels = 1 + (int)(rnd() % 12); /* few levels: many ties */
    float *s = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    assert_non_null(s);
    assert_non_null(y);
    for (size_t i = 0; i < n; i++) {
      s[i] = (float)(rnd() % (uint64_t)levels) - 3.0f;
      y[i] = (float)(rnd() % 2);
    }
    y[0] = 0, y[1] = 1;
    double good = 0, pairs = 0;
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < n; j++)
        if (y[i] == 1 && y[j] == 0) {
          pairs++;
          good += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
        }
    assert_true(fabs(auc_of(s, y, n) - good / pairs) < 1e-12);
    free(s);
    free(y);
  }
}

static void test_auc_refusals(void **state) {
  (void)state;
  const float s[3] = {0.1f, 0.2f, 0.3f}, ones[3] = {1, 1, 1}, zeros[3] = {0, 0, 0};
  double a = 0;
  assert_int_equal(gs_metric_auc(s, ones, 3, &a), GS_ERR_INVALID_ARG);
  assert_true(isnan(a));
  assert_non_null(strstr(gs_last_error(), "all 3 samples are positive"));
  a = 0;
  assert_int_equal(gs_metric_auc(s, zeros, 3, &a), GS_ERR_INVALID_ARG);
  assert_true(isnan(a));
  assert_non_null(strstr(gs_last_error(), "negative"));
  assert_int_equal(gs_metric_auc(s, zeros, 0, &a), GS_ERR_INVALID_ARG);
  const float bad[3] = {0, 0.5f, 1};
  assert_int_equal(gs_metric_auc(s, bad, 3, &a), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "sample 1 has label 0.5"));
  const float nans[3] = {0.1f, NAN, 0.3f}, y[3] = {0, 1, 0};
  assert_int_equal(gs_metric_auc(nans, y, 3, &a), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "sample 1 has a NaN score"));
}

static void test_log_loss(void **state) {
  (void)state;
  double l;
  const float z0[2] = {0, 0}, y01[2] = {0, 1};
  assert_int_equal(gs_metric_log_loss(z0, y01, 2, &l), GS_OK);
  assert_true(fabs(l - log(2.0)) < 1e-12);
  /* Far logits: no overflow, no log(0). */
  const float zf[4] = {100, -100, 100, 1e30f}, yf[4] = {1, 1, 0, 1};
  float d[4];
  assert_int_equal(gs_dlrm_bce_with_logits(zf, yf, 4, &l, d), GS_OK);
  assert_true(fabs(l - (0 + 100 + 100 + 0) / 4.0) < 1e-9);
  assert_true(fabs(d[0]) < 1e-30 && fabs(d[1] + 0.25f) < 1e-7 && fabs(d[2] - 0.25f) < 1e-7);
  /* The gradient: (sigmoid(z) - y) / n; soft labels are allowed. */
  const float z[3] = {0.5f, -2.0f, 1.0f}, ys[3] = {1, 0, 0.25f};
  assert_int_equal(gs_dlrm_bce_with_logits(z, ys, 3, &l, d), GS_OK);
  for (int i = 0; i < 3; i++) {
    double p = 1.0 / (1.0 + exp(-(double)z[i]));
    assert_true(fabs(d[i] - (p - ys[i]) / 3.0) < 1e-7);
  }
  double want = 0;
  for (int i = 0; i < 3; i++) {
    double p = 1.0 / (1.0 + exp(-(double)z[i]));
    want -= ys[i] * log(p) + (1 - ys[i]) * log(1 - p);
  }
  assert_true(fabs(l - want / 3.0) < 1e-12);
  const float inf[1] = {INFINITY}, y1[1] = {1}, y2[1] = {2};
  assert_int_equal(gs_metric_log_loss(inf, y1, 1, &l), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_metric_log_loss(z, y2, 1, &l), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "sample 0"));
}

/* NE and calibration: 1 and 1 for a model that predicts the base rate for
 * every sample; a hand-computed case; undefined when the labels are one
 * class (NE) or have no click (calibration), the other still given. */
static void test_ne(void **state) {
  (void)state;
  double ne = -1, cal = -1;
  const float y[4] = {1, 0, 0, 0};
  float base[4];
  for (int i = 0; i < 4; i++) base[i] = (float)log(0.25 / 0.75); /* sigmoid = 0.25 */
  assert_int_equal(gs_metric_ne(base, y, 4, &ne, &cal), GS_OK);
  assert_true(fabs(ne - 1.0) < 1e-6 && fabs(cal - 1.0) < 1e-6);
  /* logits 2, -1, 0, -3: log loss over H(0.25); predicted clicks over 1. */
  const float z[4] = {2, -1, 0, -3};
  assert_int_equal(gs_metric_ne(z, y, 4, &ne, &cal), GS_OK);
  double ll = 0, pred = 0;
  for (int i = 0; i < 4; i++) {
    double p = 1.0 / (1.0 + exp(-(double)z[i]));
    ll -= y[i] * log(p) + (1 - y[i]) * log(1 - p);
    pred += p;
  }
  double h = -(0.25 * log(0.25) + 0.75 * log(0.75));
  assert_true(fabs(ne - ll / 4.0 / h) < 1e-9);
  assert_true(fabs(cal - pred) < 1e-9);
  assert_true(ne < 1.0); /* it ranks the click first: better than the base rate */
  /* Every label 1: NE undefined, calibration defined; every label 0:
   * neither. NULL outputs are allowed. */
  const float ones[2] = {1, 1}, zeros[2] = {0, 0}, z2[2] = {0, 0};
  assert_int_equal(gs_metric_ne(z2, ones, 2, &ne, &cal), GS_ERR_INVALID_ARG);
  assert_true(isnan(ne) && fabs(cal - 0.5) < 1e-12);
  assert_non_null(strstr(gs_last_error(), "every one of the 2 labels is 1"));
  assert_int_equal(gs_metric_ne(z2, zeros, 2, &ne, &cal), GS_ERR_INVALID_ARG);
  assert_true(isnan(ne) && isnan(cal));
  assert_int_equal(gs_metric_ne(z, y, 4, NULL, &cal), GS_OK);
  assert_int_equal(gs_metric_ne(z, y, 0, &ne, NULL), GS_ERR_INVALID_ARG);
  const float inf[1] = {INFINITY};
  assert_int_equal(gs_metric_ne(inf, y, 1, &ne, &cal), GS_ERR_INVALID_ARG);
  assert_true(isnan(ne) && isnan(cal));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_auc_cases),
      cmocka_unit_test(test_auc_brute),
      cmocka_unit_test(test_auc_refusals),
      cmocka_unit_test(test_log_loss),
      cmocka_unit_test(test_ne),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
