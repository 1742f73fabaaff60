/*
 * The protocol names and Sync-Switch's policies (Li et al., ICDCS'21),
 * evaluated by the first server: offline (BSP for the first fraction F of
 * the sample budget, then ASP) and online (ASP while a straggler is seen in
 * the workers' step times, BSP otherwise until the BSP share is done).
 *
 * The online policy goes back to BSP only after `hold` decisions in a row
 * have seen no straggler (window x workers: about one window of pushes per
 * worker). One noisy window of the other workers' times no longer sends
 * the job into a BSP round that waits for the straggler, only to leave it
 * at the next decision.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"

static const char *const mode_names[GS_PS_MODE_COUNT] = {"bsp", "asp", "ssp"};

const char *gs_ps_mode_name(gs_ps_mode mode) {
  return (unsigned)mode < GS_PS_MODE_COUNT ? mode_names[mode] : "invalid-mode";
}

static int parse_fraction(const char *s, double *out) {
  return gs__parse_double(s, 0.0, 1.0, out, NULL);
}

gs_status gs_ps_sync_parse(const char *text, gs_ps_sync *out) {
  if (!text || !out)
    return gs_error(GS_ERR_INVALID_ARG, "gs_ps_sync_parse: a NULL argument");
  gs_ps_sync s = {.policy = GS_PS_POLICY_FIXED, .mode = GS_PS_BSP,
                  .staleness = 0, .bsp_fraction = 0.25,
                  .straggler_ratio = 1.5, .window = 8};
  if (strcmp(text, "bsp") == 0) {
    s.mode = GS_PS_BSP;
  } else if (strcmp(text, "asp") == 0) {
    s.mode = GS_PS_ASP;
  } else if (strncmp(text, "ssp:", 4) == 0) {
    long v = 0;
    if (gs__parse_long(text + 4, 0, 1000000, &v, NULL) != 0)
      return gs_error(GS_ERR_PARSE,
                      "sync mode '%s': ssp:S needs a staleness bound S, an "
                      "integer from 0 to 1000000", text);
    s.mode = GS_PS_SSP;
    s.staleness = (int)v;
  } else if (strncmp(text, "switch:offline:", 15) == 0) {
    s.policy = GS_PS_POLICY_OFFLINE;
    if (parse_fraction(text + 15, &s.bsp_fraction) != 0)
      return gs_error(GS_ERR_PARSE,
                      "sync mode '%s': switch:offline:F needs the BSP fraction "
                      "F, a number from 0 to 1", text);
  } else if (strcmp(text, "switch:online") == 0) {
    s.policy = GS_PS_POLICY_ONLINE;
  } else if (strncmp(text, "switch:online:", 14) == 0) {
    s.policy = GS_PS_POLICY_ONLINE;
    if (parse_fraction(text + 14, &s.bsp_fraction) != 0)
      return gs_error(GS_ERR_PARSE,
                      "sync mode '%s': switch:online:F needs the BSP fraction "
                      "F, a number from 0 to 1", text);
  } else {
    return gs_error(GS_ERR_PARSE,
                    "sync mode '%s': expected bsp, asp, ssp:S, "
                    "switch:offline:F or switch:online[:F]", text);
  }
  *out = s;
  return GS_OK;
}

void gs_ps_sync_format(const gs_ps_sync *s, char *buf, size_t n) {
  if (!buf || n == 0) return;
  if (!s) {
    snprintf(buf, n, "?");
  } else if (s->policy == GS_PS_POLICY_OFFLINE) {
    snprintf(buf, n, "switch:offline:%g", s->bsp_fraction);
  } else if (s->policy == GS_PS_POLICY_ONLINE) {
    snprintf(buf, n, "switch:online:%g", s->bsp_fraction);
  } else if (s->mode == GS_PS_SSP) {
    snprintf(buf, n, "ssp:%d", s->staleness);
  } else {
    snprintf(buf, n, "%s", gs_ps_mode_name(s->mode));
  }
}

double gs_ps_sync_async_share(const gs_ps_sync *s) {
  if (!s) return 0;
  if (s->policy != GS_PS_POLICY_FIXED) return 1.0 - s->bsp_fraction;
  if (s->mode == GS_PS_ASP) return 1;
  return s->mode == GS_PS_SSP && s->staleness >= 1 ? 1 : 0;
}

int gs_ps_sync_lockstep(const gs_ps_sync *s) {
  return s && s->policy == GS_PS_POLICY_FIXED && s->mode == GS_PS_BSP;
}

gs_status ps_policy_init(ps_policy *p, const gs_ps_sync *sync, int workers,
                         long budget) {
  memset(p, 0, sizeof *p);
  p->sync = *sync;
  if (p->sync.window < 1) p->sync.window = 1;
  p->workers = workers;
  p->budget = budget;
  p->straggler = -1;
  p->hold = p->sync.window * workers;
  p->current = sync->policy == GS_PS_POLICY_FIXED ? sync->mode : GS_PS_BSP;
  p->times = gs_calloc((size_t)workers * (size_t)p->sync.window, sizeof(double));
  p->filled = gs_calloc((size_t)workers, sizeof(int));
  p->next = gs_calloc((size_t)workers, sizeof(int));
  p->scratch = gs_calloc(2 * (size_t)workers + (size_t)p->sync.window, sizeof(double));
  if (!p->times || !p->filled || !p->next || !p->scratch) {
    ps_policy_free(p);
    return GS_ERR_NOMEM;
  }
  return GS_OK;
}

void ps_policy_free(ps_policy *p) {
  gs_free(p->times);
  gs_free(p->filled);
  gs_free(p->next);
  gs_free(p->scratch);
  p->times = p->scratch = NULL;
  p->filled = p->next = NULL;
}

void ps_policy_record_time(ps_policy *p, int w, double compute_s) {
  if (compute_s < 0) return;
  int win = p->sync.window;
  p->times[(size_t)w * (size_t)win + (size_t)p->next[w]] = compute_s;
  p->next[w] = (p->next[w] + 1) % win;
  if (p->filled[w] < win) p->filled[w]++;
}

/* The counts of the run a resumed one continues. Which protocol trained
 * each of those samples is not kept: BSP's share is taken to have come
 * first (as offline switching runs it; under online switching a straggler
 * may have moved some of it later). */
void ps_policy_resume(ps_policy *p, long samples_done) {
  if (samples_done <= 0) return;
  p->samples = samples_done;
  double share = p->budget > 0 ? p->sync.bsp_fraction * (double)p->budget : 0;
  p->bsp_samples = (double)samples_done < share ? samples_done : (long)ceil(share);
  /* The protocol the run was in: ASP once BSP's share is done, unless the
   * budget is spent too (nothing is left to run). Until 2026-12-07 a run
   * resumed past the switch began with one BSP step (answers to pulls
   * carried the starting protocol). */
  if (p->sync.policy != GS_PS_POLICY_FIXED && p->budget > 0 &&
      (double)p->bsp_samples >= p->sync.bsp_fraction * (double)p->budget &&
      !ps_policy_stop(p))
    p->current = GS_PS_ASP;
}

void ps_policy_count(ps_policy *p, gs_ps_mode mode, int batch) {
  p->samples += batch;
  if (mode == GS_PS_BSP) p->bsp_samples += batch;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Lower median of v[0 .. n-1] (sorted in place). */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[(n - 1) / 2];
}

/* A worker is a straggler when the median of its last `window` compute
 * times is more than straggler_ratio times the median of the other
 * workers' medians. Workers without a full window are not judged. Every
 * worker counts: until 2026-12-07 only the first 64 did, and a straggler
 * among the others was never detected. */
int ps_policy_straggler(ps_policy *p) {
  int W = p->workers, win = p->sync.window;
  if (W < 2) return -1;
  double *med = p->scratch, *others = med + W, *tmp = others + W;
  for (int w = 0; w < W; w++) {
    if (p->filled[w] < win) return -1;
    memcpy(tmp, p->times + (size_t)w * (size_t)win, (size_t)win * sizeof(double));
    med[w] = median(tmp, win);
  }
  /* The others' lower median, from the medians sorted once: leaving out a
   * value at or below the middle one (k) moves the middle up by one. */
  memcpy(others, med, (size_t)W * sizeof(double));
  qsort(others, (size_t)W, sizeof *others, cmp_double);
  int k = (W - 2) / 2;
  int worst = -1;
  double worst_ratio = 0;
  for (int w = 0; w < W; w++) {
    double m = med[w] <= others[k] ? others[k + 1] : others[k];
    double r = m > 0 ? med[w] / m : 0;
    if (r > worst_ratio) {
      worst_ratio = r;
      worst = w;
    }
  }
  return worst_ratio > p->sync.straggler_ratio ? worst : -1;
}

void ps_policy_round_done(ps_policy *p) { p->rejoining = 0; }

int ps_policy_stop(const ps_policy *p) {
  return p->budget > 0 && p->samples >= p->budget;
}

gs_ps_mode ps_policy_decide(ps_policy *p) {
  const gs_ps_sync *s = &p->sync;
  if (s->policy == GS_PS_POLICY_FIXED) return s->mode;
  double t0 = gs_now();
  gs_ps_mode m;
  int bsp_done = p->budget > 0 &&
                 (double)p->bsp_samples >= s->bsp_fraction * (double)p->budget;
  if (bsp_done && ps_policy_stop(p)) {
    /* The budget is spent (BSP's share is all of it: switch:offline:1):
     * nothing is left to run under ASP, so no switch either (it reported
     * one "after step 24 to asp" with no ASP step). */
    m = p->current;
  } else if (bsp_done) {
    m = GS_PS_ASP;
    p->straggler = -1; /* ASP because the BSP share is done */
  } else if (s->policy == GS_PS_POLICY_OFFLINE || p->rejoining) {
    m = GS_PS_BSP;
  } else {
    int seen = ps_policy_straggler(p);
    if (seen >= 0) {
      p->straggler = seen;
      p->calm = 0;
      m = GS_PS_ASP;
    } else if (p->current == GS_PS_ASP && ++p->calm < p->hold) {
      m = GS_PS_ASP; /* p->straggler still names the one that sent us here */
    } else {
      p->straggler = -1;
      m = GS_PS_BSP;
      if (p->current != GS_PS_BSP) p->rejoining = 1;
    }
  }
  if (m != p->current) p->switches++;
  p->current = m;
  p->policy_s += gs_now() - t0;
  return m;
}
