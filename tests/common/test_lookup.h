/*
 * A lookup cost for the tests that plan or train without measuring one
 * (gs_embed_calibrate_job takes seconds where sysconf reports a large
 * last-level cache: it sweeps a buffer of twice that size many times).
 * About what gs_embed_calibrate measures on the 2-core hosts: 40 ns a
 * lookup and 0.4 ns a byte of row, no bag's price, no cache model. The
 * command-line tests give the same as `--lookup 4e-8,4e-10`.
 */
#ifndef GRADSYNC_TEST_LOOKUP_H
#define GRADSYNC_TEST_LOOKUP_H

#include "gradsync.h"

static inline gs_cost_lookup test_lookup(void) {
  return (gs_cost_lookup){.alpha = 40e-9, .beta = 0.4e-9};
}

#endif /* GRADSYNC_TEST_LOOKUP_H */
