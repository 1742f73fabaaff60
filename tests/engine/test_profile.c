/*
 * Tests of model profiles: the shipped profiles load with the published
 * parameter totals, and bad files give errors that name the file and field.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gradsync.h"

static void test_shipped_profiles(void **state) {
  (void)state;
  static const struct {
    const char *file;
    size_t total;
  } models[] = {
      {"resnet50.json", 25557032},  {"resnet152.json", 60192808},
      {"vgg16.json", 138357544},    {"googlenet.json", 6624904},
      {"densenet201.json", 20013928}, {"bert_base.json", 109482240},
  };
  for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", GS_PROFILES_DIR, models[m].file);
    gs_profile *p = NULL;
    gs_status st = gs_profile_load(path, &p);
    if (st != GS_OK) fail_msg("%s", gs_last_error());
    size_t total = 0;
    for (size_t i = 0; i < p->ntensors; i++) total += p->tensors[i].numel;
    if (total != models[m].total)
      fail_msg("%s: %zu parameters, expected %zu", path, total, models[m].total);
    assert_true(p->forward_s > 0);
    assert_true(strlen(p->source) > 0 && strlen(p->device) > 0);
    assert_int_equal(gs_profile_validate(p), GS_OK);
    gs_profile_free(p);
  }
}

/* Writes `text` to a temporary file and loads it; returns the status and
 * leaves the path in `path`. */
static gs_status load_text(const char *text, char *path, size_t n) {
  snprintf(path, n, "/tmp/gs_profile_test_%d.json", (int)getpid());
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  gs_profile *p = (gs_profile *)0x1;
  gs_status st = gs_profile_load(path, &p);
  if (st == GS_OK)
    gs_profile_free(p);
  else
    assert_null(p);
  unlink(path);
  return st;
}

static void expect_error(const char *text, gs_status want, const char *needle) {
  char path[256];
  gs_status st = load_text(text, path, sizeof path);
  if (st != want) fail_msg("status %d, expected %d for %s", st, want, text);
  const char *msg = gs_last_error();
  if (strstr(msg, path) == NULL || strstr(msg, needle) == NULL)
    fail_msg("message '%s' should name '%s' and '%s'", msg, path, needle);
}

#define TENSOR_OK "{\"name\":\"w\",\"numel\":10,\"dtype\":\"f32\",\"backward_s\":0.1}"

static void test_good_minimal(void **state) {
  (void)state;
  char path[256];
  assert_int_equal(load_text("{\"name\":\"m\",\"forward_s\":0.5,\"tensors\":["
                             TENSOR_OK ",{\"name\":\"b\",\"numel\":3,"
                             "\"backward_s\":0}]}", path, sizeof path), GS_OK);
  gs_profile *p = NULL;
  assert_int_equal(gs_profile_parse("{\"name\":\"m\",\"batch_size\":8,\"forward_s\":0,"
                                    "\"tensors\":[" TENSOR_OK "]}", "mem", &p),
                   GS_OK);
  assert_int_equal(p->batch_size, 8);
  assert_int_equal(p->ntensors, 1);
  assert_int_equal(gs_profile_tensor_bytes(p, 0), 40);
  assert_string_equal(p->device, "");
  gs_profile_free(p);
}

static void test_missing_file(void **state) {
  (void)state;
  gs_profile *p = NULL;
  assert_int_equal(gs_profile_load("/nonexistent/dir/model.json", &p), GS_ERR_IO);
  assert_null(p);
  assert_non_null(strstr(gs_last_error(), "/nonexistent/dir/model.json"));
  assert_non_null(strstr(gs_last_error(), "No such file"));
}

static void test_invalid_json(void **state) {
  (void)state;
  expect_error("{\"name\": \"m\",\n \"forward_s\": 0.1,\n \"tensors\": [ }", GS_ERR_PARSE,
               "invalid JSON near line 3");
  expect_error("", GS_ERR_PARSE, "invalid JSON");
  expect_error("[1, 2]", GS_ERR_PARSE, "JSON object");
}

static void test_missing_fields(void **state) {
  (void)state;
  expect_error("{\"forward_s\":0.1,\"tensors\":[" TENSOR_OK "]}", GS_ERR_PARSE,
               "name: missing");
  expect_error("{\"name\":\"m\",\"tensors\":[" TENSOR_OK "]}", GS_ERR_PARSE,
               "forward_s: missing");
  expect_error("{\"name\":\"m\",\"forward_s\":0.1}", GS_ERR_PARSE, "tensors: missing");
  expect_error("{\"name\":\"m\",\"forward_s\":0.1,\"tensors\":[]}", GS_ERR_PARSE,
               "tensors: expected a non-empty array");
  expect_error("{\"name\":\"m\",\"forward_s\":0.1,\"tensors\":[" TENSOR_OK
               ",{\"name\":\"b\",\"backward_s\":0.1}]}", GS_ERR_PARSE,
               "tensors[1].numel: missing");
  expect_error("{\"name\":\"m\",\"forward_s\":0.1,\"tensors\":[{\"numel\":1,"
               "\"backward_s\":0.1}]}", GS_ERR_PARSE, "tensors[0].name: missing");
  expect_error("{\"name\":\"m\",\"forward_s\":0.1,\"tensors\":[{\"name\":\"x\","
               "\"numel\":1}]}", GS_ERR_PARSE, "tensors[0].backward_s: missing");
}

static void test_bad_values(void **state) {
  (void)state;
  expect_error("{\"name\":\"m\",\"forward_s\":-0.1,\"tensors\":[" TENSOR_OK "]}",
               GS_ERR_PARSE, "forward_s: expected seconds >= 0");
  expect_error("{\"name\":\"m\",\"forward_s\":0.1,\"tensors\":[{\"name\":\"x\","
               "\"numel\":1,\"backward_s\":-2}]}", GS_ERR_PARSE,
               "tensors[0].backward_s: expected seconds >= 0");
  expect_error("{\"name\":\"m\",\"forward_s\":0.1,\"tensors\":[{\"name\":\"x\","
               "\"numel\":-5,\"backward_s\":0}]}", GS_ERR_PARSE,
               "tensors[0].numel: expected a positive integer");
  expect_error("{\"name\":\"m\",\"forward_s\":0.1,\"tensors\":[{\"name\":\"x\","
               "\"numel\":2.5,\"backward_s\":0}]}", GS_ERR_PARSE,
               "tensors[0].numel");
  /* 2^53 + 1 reads as 2^53: it was planned as that many u8 elements. */
  expect_error("{\"name\":\"m\",\"forward_s\":0.1,\"tensors\":[{\"name\":\"x\","
               "\"numel\":9007199254740993,\"dtype\":\"u8\",\"backward_s\":0}]}",
               GS_ERR_PARSE, "tensors[0].numel: expected a positive integer below 2^53");
  expect_error("{\"name\":\"m\",\"forward_s\":0.1,\"tensors\":[{\"name\":\"x\","
               "\"numel\":\"7\",\"backward_s\":0}]}", GS_ERR_PARSE,
               "tensors[0].numel");
  expect_error("{\"name\":\"m\",\"forward_s\":0.1,\"tensors\":[" TENSOR_OK
               ",{\"name\":\"x\",\"numel\":1,\"dtype\":\"f33\",\"backward_s\":0}]}",
               GS_ERR_PARSE, "tensors[1].dtype: unknown dtype 'f33'");
  expect_error("{\"name\":\"m\",\"forward_s\":\"fast\",\"tensors\":[" TENSOR_OK "]}",
               GS_ERR_PARSE, "forward_s: expected a number");
  expect_error("{\"name\":\"m\",\"batch_size\":0,\"forward_s\":1,\"tensors\":["
               TENSOR_OK "]}", GS_ERR_PARSE, "batch_size");
}

/* Files that are not profiles: a NUL byte inside (the JSON parser would stop
 * there and read half the file), a directory, a file above the 64 MiB cap.
 * Each is an error naming the file, not a partial read or an unbounded one. */
static void test_hostile_files(void **state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof path, "/tmp/gs_profile_hostile_%d.json", (int)getpid());
  static const char nul[] = "{\"name\": \"x\", \"forward_s\": 0, \"tensors\": "
                            "[{\"name\": \"w\", \"numel\": 1, \"backward_s\": 0}]}\0{";
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(nul, 1, sizeof nul, f), sizeof nul);
  fclose(f);
  gs_profile *p = NULL;
  assert_int_equal(gs_profile_load(path, &p), GS_ERR_PARSE);
  assert_null(p);
  assert_non_null(strstr(gs_last_error(), "NUL"));
  assert_non_null(strstr(gs_last_error(), path));
  /* 65 MiB of spaces, sparse: zeros read as NUL, so it fails either way,
   * but by its size before the whole of it is held. */
  assert_int_equal(truncate(path, (off_t)65 << 20), 0);
  assert_int_equal(gs_profile_load(path, &p), GS_ERR_PARSE);
  assert_non_null(strstr(gs_last_error(), "larger than"));
  unlink(path);
  assert_int_equal(gs_profile_load("/tmp", &p), GS_ERR_IO);
  assert_non_null(strstr(gs_last_error(), "/tmp"));
  assert_null(p);
}

/* A profiled step: each gradient's ready time clamped to the latest of it
 * and every later one (gradient 1 reported before gradient 2 here), its
 * backward the gap to the next one up, the forward from the start to the
 * first gradient; folded into running sums. */
static void test_fold_step(void **state) {
  (void)state;
  const uint64_t ms = 1000000;
  uint64_t ready[4] = {100 * ms, 60 * ms, 70 * ms, 40 * ms};
  double bwd[4] = {1, 0, 0, 0};
  double fwd = gs_profile_fold_step(ready, 4, 10 * ms, bwd);
  assert_true(fabs(fwd - 0.030) < 1e-12);
  /* 2 at 70 ms (30 after 3), 1 at max(60, 70) = 70 (0 after 2), 0 at 100 */
  assert_true(fabs(bwd[2] - 0.030) < 1e-12);
  assert_true(bwd[1] == 0.0);
  assert_true(fabs(bwd[0] - (1 + 0.030)) < 1e-12);
  assert_true(bwd[3] == 0.0);
  assert_true(gs_profile_fold_step(ready, 0, 0, bwd) == 0.0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shipped_profiles), cmocka_unit_test(test_good_minimal),
      cmocka_unit_test(test_hostile_files),
      cmocka_unit_test(test_missing_file),     cmocka_unit_test(test_invalid_json),
      cmocka_unit_test(test_missing_fields),   cmocka_unit_test(test_bad_values),
      cmocka_unit_test(test_fold_step),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
