/*
 * Compression specs and the momentum rule (include/gradsync/compress.h:
 * gs_compress_spec_parse, gs_compress_spec_momentum), the one parser that
 * the engine, the trainer, every verb and the Python binding call:
 *   - every form: off ("none", "", NULL, "auto:none", "NONE"), a compressor
 *     spec, "auto:SPEC", with the kind, the normalised spec, the borrowed
 *     compressor spec and the kind's defaults (ef_decay, own momentum);
 *   - every error: "auto:" alone, an unknown kind, a bad parameter, under
 *     auto: too, each naming the spec and the accepted forms;
 *   - DGC's momentum rule: the optimizer's momentum moves into the
 *     compressor; nothing moves for other kinds or a zero momentum; a
 *     differing explicit compressor momentum and a Nesterov momentum are
 *     errors naming the values.
 */
#include "gradsync/compress.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static gs_compress_spec parse_ok(const char *spec) {
  gs_compress_spec z;
  gs_status st = gs_compress_spec_parse(spec, &z);
  if (st != GS_OK) fail_msg("'%s': %s", spec ? spec : "(null)", gs_last_error());
  return z;
}

/* Fails unless parsing `spec` is GS_ERR_INVALID_ARG with a message holding
 * every one of the NULL-terminated fragments. */
static void parse_fails(const char *spec, ...) {
  gs_compress_spec z;
  gs_status st = gs_compress_spec_parse(spec, &z);
  if (st != GS_ERR_INVALID_ARG) fail_msg("'%s' parsed (status %d)", spec, (int)st);
  va_list ap;
  va_start(ap, spec);
  for (const char *frag; (frag = va_arg(ap, const char *)) != NULL;)
    if (strstr(gs_last_error(), frag) == NULL)
      fail_msg("'%s': message lacks '%s': %s", spec, frag, gs_last_error());
  va_end(ap);
}

static void test_off(void **unused) {
  (void)unused;
  const char *offs[] = {NULL, "", "none", "auto:none", "NONE"};
  for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
    gs_compress_spec z = parse_ok(offs[i]);
    assert_true(z.off);
    assert_false(z.automatic);
    assert_string_equal(z.compressor, "");
    assert_string_equal(z.kind, "none");
    assert_string_equal(z.normalised, "none");
    assert_true(z.ef_decay == 1.0f);
    assert_false(z.own_momentum);
  }
}

static void test_forms(void **unused) {
  (void)unused;
  const char *given = "topk:1e-2";
  gs_compress_spec z = parse_ok(given);
  assert_false(z.off);
  assert_false(z.automatic);
  assert_ptr_equal(z.compressor, given); /* borrowed, as given */
  assert_string_equal(z.kind, "topk");
  assert_string_equal(z.normalised, "topk:0.01");
  assert_true(z.ef_decay == 1.0f);
  assert_false(z.own_momentum);

  const char *automatic = "auto:TOPK:0.01";
  z = parse_ok(automatic);
  assert_false(z.off);
  assert_true(z.automatic);
  assert_ptr_equal(z.compressor, automatic + 5);
  assert_string_equal(z.kind, "topk");
  assert_string_equal(z.normalised, "auto:topk:0.01");

  z = parse_ok("dgc:0.001");
  assert_string_equal(z.kind, "dgc");
  assert_string_equal(z.normalised, "dgc:0.001");
  assert_true(z.own_momentum);
  z = parse_ok("auto:dgc:0.001");
  assert_true(z.automatic && z.own_momentum);

  z = parse_ok("randomk:0.01");
  assert_true(z.ef_decay == GS_COMPRESS_RANDOMK_EF_DECAY);
  z = parse_ok("qsgd:16:0");
  assert_string_equal(z.normalised, "qsgd:16:0");
  z = parse_ok("fp16");
  assert_string_equal(z.kind, "fp16");
  assert_false(z.own_momentum);

  /* Every registered kind parses, and only DGC applies momentum itself. */
  const char *kinds[] = {"fp16", "bf16", "topk:0.1", "mstopk:0.1", "gtopk:0.1",
                         "dgc:0.1", "sidco:0.1", "randomk:0.1", "qsgd:4",
                         "terngrad", "efsignsgd", "powersgd:2"};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    z = parse_ok(kinds[i]);
    assert_false(z.off);
    assert_int_equal(z.own_momentum, strcmp(z.kind, "dgc") == 0);
  }
}

static void test_errors(void **unused) {
  (void)unused;
  parse_fails("auto:", "'auto:'", "expected auto:SPEC", "topk", NULL);
  parse_fails("bogus:1", "'bogus:1'", "unknown compressor", "accepted", NULL);
  parse_fails("auto:bogus", "'auto:bogus'", "unknown compressor 'bogus'", NULL);
  parse_fails("topk:2", "'topk:2'", "out of range", NULL);
  parse_fails("auto:topk:0", "'auto:topk:0'", "out of range", NULL);
  parse_fails("topk", "'topk'", "needs a density", NULL);
  parse_fails("fp16:3", "'fp16:3'", "takes no parameter", NULL);
  parse_fails("none:1", "'none:1'", "takes no parameter", NULL);
  parse_fails("auto:auto:topk:0.1", "'auto:auto:topk:0.1'", "unknown compressor", NULL);
  assert_int_equal(gs_compress_spec_parse("none", NULL), GS_ERR_INVALID_ARG);
}

static gs_compress_momentum rule_ok(const char *spec, double opt, int nesterov,
                                    double comp) {
  gs_compress_spec z = parse_ok(spec);
  gs_compress_momentum m;
  if (gs_compress_spec_momentum(&z, opt, nesterov, comp, &m) != GS_OK)
    fail_msg("%s, momentum %g, compressor %g: %s", spec, opt, comp, gs_last_error());
  return m;
}

static void rule_fails(const char *spec, double opt, int nesterov, double comp,
                       const char *frag1, const char *frag2) {
  gs_compress_spec z = parse_ok(spec);
  gs_compress_momentum m;
  assert_int_equal(gs_compress_spec_momentum(&z, opt, nesterov, comp, &m),
                   GS_ERR_INVALID_ARG);
  if (strstr(gs_last_error(), frag1) == NULL ||
      (frag2 && strstr(gs_last_error(), frag2) == NULL))
    fail_msg("%s: message lacks '%s'/'%s': %s", spec, frag1, frag2 ? frag2 : "",
             gs_last_error());
}

static void test_dgc_momentum_rule(void **unused) {
  (void)unused;
  const float dflt = gs_compress_opts_default().momentum;
  /* DGC takes the optimizer's momentum; the optimizer's becomes 0. */
  gs_compress_momentum m = rule_ok("dgc:0.001", 0.9, 0, -1);
  assert_true(m.moved);
  assert_true(m.compressor == 0.9f && m.optimizer == 0.0f);
  /* Under auto: the dense groups need the optimizer's momentum: refused
   * rather than moved (it was moved, and the dense groups trained without
   * momentum); with an optimizer momentum of 0 nothing moves. */
  rule_fails("auto:dgc:0.001", 0.5, 0, -1, "auto:", "dgc:0.001'");
  m = rule_ok("auto:dgc:0.001", 0, 0, -1);
  assert_true(!m.moved && m.compressor == dflt && m.optimizer == 0.0f);
  /* An explicit compressor momentum equal to the optimizer's is the same move. */
  m = rule_ok("dgc:0.001", 0.9, 0, 0.9);
  assert_true(m.moved && m.compressor == 0.9f && m.optimizer == 0.0f);
  /* No optimizer momentum: nothing moves; the compressor's as given, else
   * the default. */
  m = rule_ok("dgc:0.001", 0, 0, -1);
  assert_false(m.moved);
  assert_true(m.compressor == dflt && m.optimizer == 0.0f);
  m = rule_ok("dgc:0.001", 0, 0, 0.7);
  assert_true(!m.moved && m.compressor == 0.7f);
  /* Kinds without their own momentum, and no compression: nothing moves,
   * Nesterov or not. */
  const char *others[] = {"topk:0.01", "auto:topk:0.01", "none", "qsgd:16"};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    m = rule_ok(others[i], 0.9, 1, -1);
    assert_false(m.moved);
    assert_true(m.optimizer == 0.9f && m.compressor == dflt);
  }
  /* Both given and different: an error naming both values. */
  rule_fails("dgc:0.001", 0.9, 0, 0.5, "0.9", "0.5");
  rule_fails("dgc:0.001", 0.9, 0, 0, "0.9", "differ");
  /* Nesterov's momentum cannot become the compressor's plain one. */
  rule_fails("dgc:0.001", 0.9, 1, -1, "Nesterov", "0.9");
  /* Out of range. */
  rule_fails("dgc:0.001", 1.0, 0, -1, "1", "out of range");
  rule_fails("topk:0.01", 0.9, 0, 1.5, "1.5", "out of range");
  gs_compress_spec z = parse_ok("dgc:0.1");
  assert_int_equal(gs_compress_spec_momentum(&z, 0.9, 0, -1, NULL), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_compress_spec_momentum(NULL, 0.9, 0, -1, &m), GS_ERR_INVALID_ARG);
}

/* DGC and PowerSGD keep their own residual, which ef_decay does not damp:
 * a damping other than 0 (the kind's) and 1 (what they do) is refused
 * rather than taken and ignored; the spec and the info say so. */
static void test_own_ef_refuses_decay(void **unused) {
  (void)unused;
  const char *own[] = {"dgc:0.01", "powersgd:2"};
  for (size_t i = 0; i < 2; i++) {
    gs_compress_spec z = parse_ok(own[i]);
    assert_true(z.own_ef);
    gs_compressor *c = NULL;
    assert_int_equal(gs_compressor_create(own[i], &c), GS_OK);
    gs_compress_opts o = gs_compress_opts_default();
    gs_compress_state *st = NULL;
    o.ef_decay = 0.5f;
    assert_int_equal(gs_compress_state_create(c, 64, &o, &st), GS_ERR_INVALID_ARG);
    if (strstr(gs_last_error(), "ef_decay 0.5") == NULL)
      fail_msg("%s: %s", own[i], gs_last_error());
    o.ef_decay = 1;
    assert_int_equal(gs_compress_state_create(c, 64, &o, &st), GS_OK);
    gs_compress_state_destroy(st);
    gs_compressor_destroy(c);
  }
  assert_false(parse_ok("randomk:0.01").own_ef);
  assert_false(parse_ok("topk:0.01").own_ef);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_off),
      cmocka_unit_test(test_forms),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_dgc_momentum_rule),
      cmocka_unit_test(test_own_ef_refuses_decay),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
