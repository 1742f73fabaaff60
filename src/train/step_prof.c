/* The step profiler of sync modes without the engine (step_prof.h). */
#include "step_prof.h"

#include <string.h>

#include "gradsync/nn.h"
#include "gradsync/plan.h"
#include "gs_internal.h"

gs_status step_prof_init(step_prof *p, size_t n) {
  memset(p, 0, sizeof *p);
  p->n = n;
  p->ready = gs_calloc(n ? n : 1, sizeof *p->ready);
  p->bwd = gs_calloc(n ? n : 1, sizeof *p->bwd);
  if (!p->ready || !p->bwd) {
    step_prof_free(p);
    return gs_error(GS_ERR_NOMEM, "out of memory for a step profile of %zu tensors", n);
  }
  return GS_OK;
}

void step_prof_free(step_prof *p) {
  gs_free(p->ready);
  gs_free(p->bwd);
  p->ready = NULL;
  p->bwd = NULL;
}

void step_prof_forward(step_prof *p, size_t index) {
  if (index == 0) p->start = gs_now_ns();
}

void step_prof_ready(step_prof *p, size_t index) {
  if (p->ready && index < p->n) p->ready[index] = gs_now_ns();
}

void step_prof_end(step_prof *p) {
  const size_t L = p->n;
  const long seen = p->seen++;
  if (!p->ready || L == 0 || p->start == 0 || seen < STEP_PROF_SKIP ||
      p->folded >= STEP_PROF_STEPS)
    return;
  if (p->ready[L - 1] < p->start) return; /* a step the hooks did not see whole */
  p->fwd += gs_profile_fold_step(p->ready, L, p->start, p->bwd);
  p->folded++;
}

gs_status step_prof_make(const step_prof *p, const gs_nn_net *net, const char *name,
                         gs_profile **out) {
  *out = NULL;
  const size_t L = p->n;
  if (!p->bwd || p->folded < STEP_PROF_MIN || L == 0) return GS_OK;
  gs_profile_tensor *t = gs_calloc(L, sizeof *t);
  if (!t) return gs_error(GS_ERR_NOMEM, "out of memory for a profile of %zu tensors", L);
  const double n = (double)p->folded;
  for (size_t i = 0; i < L; i++) {
    const gs_nn_param *q = gs_nn_param_at(net, i);
    t[i] = (gs_profile_tensor){.name = (char *)q->name, .numel = q->count, .dtype = GS_F32,
                               .backward_s = p->bwd[i] / n};
  }
  gs_profile prof = {.name = (char *)name, .device = "", .source = "",
                     .forward_s = p->fwd / n, .ntensors = L, .tensors = t};
  char *text = gs_profile_to_json(&prof);
  gs_free(t);
  if (!text) return gs_error(GS_ERR_NOMEM, "out of memory for a profile's text");
  gs_status st = gs_profile_parse(text, "the step profile", out);
  gs_free(text);
  return st;
}
