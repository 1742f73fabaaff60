/*
 * A gs_profile built inside a test, for the planner, simulator and
 * compressed-plan tests: L tensors named t0, t1, ... with the given backward
 * times and sizes. The struct owns its arrays; define TEST_PROFILE_MAXL
 * before including to change its capacity (default 64).
 */
#ifndef GRADSYNC_TEST_PROFILE_H
#define GRADSYNC_TEST_PROFILE_H

#include <stdio.h>
#include <string.h>

#include "gradsync.h"

#ifndef TEST_PROFILE_MAXL
#define TEST_PROFILE_MAXL 64
#endif

typedef struct test_profile {
  gs_profile p;
  gs_profile_tensor t[TEST_PROFILE_MAXL];
  char names[TEST_PROFILE_MAXL][24];
} test_profile;

static inline void tp_init_as(test_profile *tp, double forward_s, size_t L, const double *bwd,
                              const size_t *numel, gs_dtype dtype) {
  memset(tp, 0, sizeof *tp);
  tp->p.name = "test";
  tp->p.device = "";
  tp->p.source = "";
  tp->p.forward_s = forward_s;
  tp->p.ntensors = L;
  tp->p.tensors = tp->t;
  for (size_t i = 0; i < L; i++) {
    snprintf(tp->names[i], sizeof tp->names[i], "t%zu", i);
    tp->t[i].name = tp->names[i];
    tp->t[i].numel = numel[i];
    tp->t[i].dtype = dtype;
    tp->t[i].backward_s = bwd[i];
  }
}

/* Float32 tensors. */
static inline void tp_init(test_profile *tp, double forward_s, size_t L, const double *bwd,
                           const size_t *numel) {
  tp_init_as(tp, forward_s, L, bwd, numel, GS_F32);
}

#endif
