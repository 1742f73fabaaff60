/* The commit a supervisor and the cluster manager read from a training
 * program's checkpoint directory (gs_launch_read_commit, src/launch):
 * gradsync train's checkpoint.json, the DLRM trainer's dlrm.json, the
 * newer of the two, and what is not a commit; and an --exec program's
 * progress report (gs_launch_read_report). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "gradsync/launch.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gs-commit-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Writes dir/name with text, its modification time at t seconds. */
static void put(const char *name, const char *text, long t) {
  char path[320];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  struct timeval tv[2] = {{t, 0}, {t, 0}};
  assert_int_equal(utimes(path, tv), 0);
}

static const char *train_json =
    "{\"epoch\": 1, \"samples_in_epoch\": 96, \"global_batch\": 48, "
    "\"data\": {\"samples\": 480}, \"epochs\": 3}";
static const char *dlrm_json =
    "{\"format\": \"gradsync DLRM checkpoint\", \"step\": 7350, \"epoch\": 1, \"epochs\": 2, "
    "\"run\": {\"steps_per_epoch\": 5000, \"global_batch\": 64}}";

static void test_none(void **state) {
  (void)state;
  gs_launch_commit c;
  assert_int_equal(gs_launch_read_commit(dir, &c), -1);
  put("checkpoint.json", "not json", 1000);
  assert_int_equal(gs_launch_read_commit(dir, &c), -1);
  put("checkpoint.json", "{\"samples_in_epoch\": 3}", 1000); /* no epoch */
  assert_int_equal(gs_launch_read_commit(dir, &c), -1);
}

static void test_train(void **state) {
  (void)state;
  put("checkpoint.json", train_json, 1000);
  gs_launch_commit c;
  assert_int_equal(gs_launch_read_commit(dir, &c), 0);
  assert_int_equal(c.epoch, 1);
  assert_int_equal(c.samples_in_epoch, 96);
  assert_int_equal(c.global_step, 12); /* 10 steps an epoch, then 2 */
  assert_int_equal(c.epoch_samples, 480);
  assert_int_equal(c.global_batch, 48);
  assert_true(c.epochs == 3);
  assert_true(c.mtime == 1000);
  assert_non_null(strstr(c.path, "/checkpoint.json"));
}

static void test_dlrm_newer(void **state) {
  (void)state;
  put("checkpoint.json", train_json, 1000);
  put("dlrm.json", dlrm_json, 2000);
  gs_launch_commit c;
  assert_int_equal(gs_launch_read_commit(dir, &c), 0);
  assert_non_null(strstr(c.path, "/dlrm.json"));
  assert_int_equal(c.epoch, 1);
  assert_int_equal(c.global_step, 7350);
  assert_int_equal(c.samples_in_epoch, 2350 * 64);
  assert_int_equal(c.epoch_samples, 5000 * 64);
  assert_true(c.epochs == 2);
  char path[4096];
  double t;
  assert_int_equal(gs_launch_commit_stat(dir, path, sizeof path, &t), 0);
  assert_true(t == 2000);
  /* the older of the two is not read */
  put("checkpoint.json", train_json, 3000);
  assert_int_equal(gs_launch_read_commit(dir, &c), 0);
  assert_int_equal(c.global_step, 12);
}

static void test_dlrm_incomplete(void **state) {
  (void)state;
  put("dlrm.json", "{\"step\": 10, \"epoch\": 0, \"run\": {\"steps_per_epoch\": 100}}", 1000);
  gs_launch_commit c;
  assert_int_equal(gs_launch_read_commit(dir, &c), -1); /* no global batch */
  assert_int_equal(c.global_step, 0);
}

/* A progress report (gs_launch_read_report): an --exec program's commit;
 * its global step only with a global batch; a file that is no report is
 * told apart from none. */
static void test_report(void **state) {
  (void)state;
  char path[320];
  snprintf(path, sizeof path, "%s/progress.json", dir);
  gs_launch_commit c;
  assert_int_equal(gs_launch_read_report(path, &c), -1);
  put("progress.json", "{\"epoch\": 1, \"samples_in_epoch\": 300, \"epoch_samples\": 800, "
      "\"epochs\": 2}\n", 1000);
  assert_int_equal(gs_launch_read_report(path, &c), 0);
  assert_int_equal(c.epoch, 1);
  assert_int_equal(c.samples_in_epoch, 300);
  assert_int_equal(c.epoch_samples, 800);
  assert_true(c.epochs == 2);
  assert_int_equal(c.global_step, -1);
  assert_true(c.mtime == 1000);
  assert_string_equal(c.path, path);
  put("progress.json", "{\"epoch\": 1, \"samples_in_epoch\": 300, \"epoch_samples\": 800, "
      "\"epochs\": 2, \"global_batch\": 100}\n", 1001);
  assert_int_equal(gs_launch_read_report(path, &c), 0);
  assert_int_equal(c.global_batch, 100);
  assert_int_equal(c.global_step, 8 + 3);
  const char *bad[] = {"{\"epoch\": 0, \"samples_in_epoch\": 10, \"epochs\": 1}",
                       "{\"epoch\": -1, \"samples_in_epoch\": 10, \"epoch_samples\": 80, \"epochs\": 1}",
                       "{\"epoch\": 0, \"samples_in_epoch\": \"10\", \"epoch_samples\": 80, \"epochs\": 1}",
                       "{\"epoch\": 0, \"samples_in_epoch\": 10, \"epoch_samples\": 80, \"epochs\": 0}",
                       "{\"epoch\": 0, \"samples_in_epoch\": 10, \"epoch_samp", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    put("progress.json", bad[i], 1002);
    assert_int_equal(gs_launch_read_report(path, &c), -2);
    assert_int_equal(c.epoch_samples, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_none, setup, teardown),
      cmocka_unit_test_setup_teardown(test_train, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dlrm_newer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dlrm_incomplete, setup, teardown),
      cmocka_unit_test_setup_teardown(test_report, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
