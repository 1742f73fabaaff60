/* Unit tests of the command line's toolkit (apps/cli_util.c): the number
 * parsers every verb reads its options with, the median, and JSON numbers
 * that stay valid JSON. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "cli.h"

static void test_parse_bytes(void **state) {
  (void)state;
  size_t v = 0;
  assert_int_equal(cli_parse_bytes("4096", &v), 0);
  assert_int_equal(v, 4096);
  assert_int_equal(cli_parse_bytes("4K", &v), 0);
  assert_int_equal(v, 4096);
  assert_int_equal(cli_parse_bytes("256MB", &v), 0);
  assert_int_equal(v, (size_t)256 << 20);
  assert_int_equal(cli_parse_bytes("1GiB", &v), 0);
  assert_int_equal(v, (size_t)1 << 30);
  assert_int_equal(cli_parse_bytes("0", &v), 0);
  assert_int_equal(v, 0);
  v = 7;
  const char *bad[] = {"", " 4K", "+4K", "-4K", "4Q", "4KX", "K", "4 K", "1.5M", "04K", "0x10"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(cli_parse_bytes(bad[i], &v), -1);
    assert_int_equal(v, 7); /* untouched on failure */
  }
  /* A size, but too large: -2, so that the message can say so. */
  const char *big[] = {"99999999999999999999", "17179869184G", "99999999999G"};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    assert_int_equal(cli_parse_bytes(big[i], &v), -2);
    assert_int_equal(v, 7);
  }
  assert_int_equal(cli_parse_bytes(NULL, &v), -1);
}

static void test_parse_int(void **state) {
  (void)state;
  int v = 0;
  long l = 0;
  assert_int_equal(cli_parse_int("12", 1, 100, &v), 0);
  assert_int_equal(v, 12);
  assert_int_equal(cli_parse_int("-3", -5, 5, &v), 0);
  assert_int_equal(v, -3);
  v = 7;
  const char *bad[] = {"", " 1", "+1", "1.5", "1e3", "12x", "0x10", "101", "0", "010", "-05"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(cli_parse_int(bad[i], 1, 100, &v), -1);
    assert_int_equal(v, 7);
  }
  assert_int_equal(cli_parse_long("9223372036854775807", 0, LONG_MAX, &l), 0);
  assert_true(l == LONG_MAX);
  assert_int_equal(cli_parse_long("9223372036854775808", 0, LONG_MAX, &l), -1);
  /* An int range never lets a long through truncated. */
  assert_int_equal(cli_parse_int("4294967297", 0, INT_MAX, &v), -1);
}

static void test_parse_double(void **state) {
  (void)state;
  double v = 0;
  assert_int_equal(cli_parse_double("0.5", 0, 1, &v), 0);
  assert_true(v == 0.5);
  assert_int_equal(cli_parse_double("1e-3", 0, 1, &v), 0);
  assert_true(v == 1e-3);
  /* "-0" is 0, its sign dropped (printed back as "-0" until 2026-12-06). */
  assert_int_equal(cli_parse_double("-0", 0, 1, &v), 0);
  assert_true(v == 0 && !signbit(v));
  v = 7;
  const char *bad[] = {"", "nan", "NaN", "inf", "-inf", "1e999", " 0.5", "+0.5",
                       "0.5s", "2", "-0.1", "1e-400", "0x1p-3", "00.5", "infinity"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(cli_parse_double(bad[i], 0, 1, &v), -1);
    assert_true(v == 7);
  }
}

/* Table cells count characters: "ü" is one (two bytes), cut whole and
 * padded to the width; cli_secs keeps three significant digits or more. */
static void test_cell_and_secs(void **state) {
  (void)state;
  char c[64];
  assert_string_equal(cli_cell(c, sizeof c, "\xc3\xbc" "ber", 6), "\xc3\xbc" "ber  ");
  assert_int_equal(cli_text_width(c), 6);
  assert_string_equal(cli_cell(c, sizeof c, "\xc3\xa9\xc3\xa9\xc3\xa9", 2), "\xc3\xa9\xc3\xa9");
  assert_string_equal(cli_cell(c, sizeof c, "a\tb", 3), "a\xef\xbf\xbd" "b");
  char tiny[4]; /* room for one two-byte letter and a space */
  assert_string_equal(cli_cell(tiny, sizeof tiny, "\xc3\xbc\xc3\xbc", 5), "\xc3\xbc ");
  assert_string_equal(cli_secs(c, sizeof c, 14.5), "14.50s");
  assert_string_equal(cli_secs(c, sizeof c, 136.25), "136.2s");
  assert_string_equal(cli_secs(c, sizeof c, 1666.7), "1667s");
  assert_string_equal(cli_secs(c, sizeof c, -2.5), "-2.50s");
}

/* Output text: valid UTF-8 kept, every invalid byte, surrogate, overlong
 * form and control character replaced by U+FFFD, truncation never splits a
 * character. */
static void test_clean_text(void **state) {
  (void)state;
  char out[64];
  assert_string_equal(cli_clean_text(out, sizeof out, "conv1.weight"), "conv1.weight");
  assert_string_equal(cli_clean_text(out, sizeof out, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
                      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  assert_string_equal(cli_clean_text(out, sizeof out, "a\xff\xfe" "b"),
                      "a\xef\xbf\xbd\xef\xbf\xbd" "b");
  assert_string_equal(cli_clean_text(out, sizeof out, "x\ny\tz\x7f"),
                      "x\xef\xbf\xbdy\xef\xbf\xbdz\xef\xbf\xbd");
  /* C1 control U+0085, a surrogate (ED A0 80), an overlong '/' (C0 AF). */
  assert_string_equal(cli_clean_text(out, sizeof out, "\xc2\x85"), "\xef\xbf\xbd");
  assert_string_equal(cli_clean_text(out, sizeof out, "\xed\xa0\x80"),
                      "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  assert_string_equal(cli_clean_text(out, sizeof out, "\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");
  /* A truncated sequence at the end. */
  assert_string_equal(cli_clean_text(out, sizeof out, "a\xe2\x82"), "a\xef\xbf\xbd\xef\xbf\xbd");
  char small[5];
  assert_string_equal(cli_clean_text(small, sizeof small, "ab\xe2\x82\xac"), "ab");
  assert_string_equal(cli_clean_text(small, sizeof small, NULL), "");
}

static void test_median(void **state) {
  (void)state;
  double odd[] = {5, 1, 3};
  assert_true(cli_median(odd, 3) == 3);
  double even[] = {4, 1, 3, 2};
  assert_true(cli_median(even, 4) == 2.5);
  double one[] = {9};
  assert_true(cli_median(one, 1) == 9);
  assert_true(cli_median(NULL, 0) == 0);
}

static void test_json_numbers(void **state) {
  (void)state;
  cJSON *o = cJSON_CreateObject();
  cli_json_add(o, "t", 0.123456789, "%.3f");
  cli_json_add(o, "g", 1.23456789e-7, "%.4g");
  cli_json_add(o, "nan", NAN, "%.3f");
  cli_json_add(o, "inf", INFINITY, "%.3f");
  char *s = cJSON_PrintUnformatted(o);
  assert_string_equal(s, "{\"t\":0.123,\"g\":1.235e-07,\"nan\":null,\"inf\":null}");
  cJSON_free(s);
  cJSON_Delete(o);
}

/* Another program's options, read as gradsync train's getopt_long reads
 * them (until 2026-12-07 only whole names counted: `gradsync run --elastic`
 * missed "--global-b 48", which train takes as --global-batch). */
static void test_option_value(void **state) {
  (void)state;
  char *a[] = {"--model", "mlp", "--global-b", "48", "--checkp=ck", "--res=auto", "--ps",
               "1", "--data", "--global-batch", "--", "--policy", "wfbp"};
  int n = (int)(sizeof a / sizeof a[0]);
  assert_string_equal(cli_option_value(a, n, "--global-batch"), "48");
  assert_string_equal(cli_option_value(a, n, "--checkpoint"), "ck");
  assert_string_equal(cli_option_value(a, n, "--resume"), "auto");
  assert_string_equal(cli_option_value(a, n, "--ps"), "1");
  /* --data's value is not an option; nothing after "--" counts. */
  assert_string_equal(cli_option_value(a, n, "--data"), "--global-batch");
  assert_null(cli_option_value(a, n, "--policy"));
  assert_int_equal(cli_option_given(a, n, "--resume"), 1);
  assert_int_equal(cli_option_given(a, n, "--policy"), 0);
  /* An ambiguous prefix ("--s": --schedule, --seed, ...) is no option; a
   * flag takes no value; the last one wins. */
  char *b[] = {"--s", "1", "--res", "--checkpoint", "x", "--check", "y", "--json", "z"};
  int nb = (int)(sizeof b / sizeof b[0]);
  assert_null(cli_option_value(b, nb, "--seed"));
  assert_int_equal(cli_option_given(b, nb, "--resume"), 1);
  assert_null(cli_option_value(b, nb, "--resume"));
  assert_string_equal(cli_option_value(b, nb, "--checkpoint"), "y");
  /* --model dlrm: the DLRM trainer's options ("--pl" is its --plan). */
  char *c[] = {"--model", "dlrm", "--pl", "p.json", "--global-b=64"};
  assert_string_equal(cli_option_value(c, 5, "--plan"), "p.json");
  assert_string_equal(cli_option_value(c, 5, "--global-batch"), "64");
  assert_int_equal(cli_option_is(c, 5, "--model", "dlrm"), 1);
  /* Not one of train's options: the whole name only, as before. */
  char *d[] = {"--workers", "3", "--work", "4"};
  assert_string_equal(cli_option_value(d, 4, "--workers"), "3");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_bytes),  cmocka_unit_test(test_parse_int),
      cmocka_unit_test(test_parse_double), cmocka_unit_test(test_median),
      cmocka_unit_test(test_json_numbers), cmocka_unit_test(test_clean_text),
      cmocka_unit_test(test_cell_and_secs), cmocka_unit_test(test_option_value),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
