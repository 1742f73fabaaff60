/*
 * The online Sync-Switch policy (src/ps/policy.c) with more than 64
 * workers: every worker is judged, and the other workers' median is over
 * all of them. Until 2026-12-07 only the first 64 workers were looked at,
 * so a straggler among workers 64 and up was never detected (the job
 * stayed in BSP, held by it at every round).
 */
#include <stdio.h>
#include <stdlib.h>

#include "gradsync/ps.h"
#include "ps_internal.h"

static int failures;
#include "expect.h"

/* W workers, one window of times each; worker `slow` takes factor x. */
static int detect(int W, int slow, double factor) {
  gs_ps_sync s;
  if (gs_ps_sync_parse("switch:online:0.5", &s) != GS_OK) return -2;
  ps_policy p;
  if (ps_policy_init(&p, &s, W, 1000000) != GS_OK) return -2;
  for (int k = 0; k < s.window; k++)
    for (int w = 0; w < W; w++) ps_policy_record_time(&p, w, w == slow ? 0.1 * factor : 0.1);
  int seen = ps_policy_straggler(&p);
  gs_ps_mode m = ps_policy_decide(&p);
  if (seen >= 0 && m != GS_PS_ASP) seen = -3;
  ps_policy_free(&p);
  return seen;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The rule as docs/SYNC.md states it, the slow way: each worker's window
 * median against the lower median of the other workers' medians. */
static int reference(const double *times, int W, int win, double ratio) {
  double *med = malloc((size_t)W * sizeof *med), *o = malloc((size_t)W * sizeof *o);
  double tmp[64];
  for (int w = 0; w < W; w++) {
    for (int i = 0; i < win; i++) tmp[i] = times[w * win + i];
    qsort(tmp, (size_t)win, sizeof *tmp, cmp_d);
    med[w] = tmp[(win - 1) / 2];
  }
  int worst = -1;
  double best = 0;
  for (int w = 0; w < W; w++) {
    int k = 0;
    for (int q = 0; q < W; q++)
      if (q != w) o[k++] = med[q];
    qsort(o, (size_t)k, sizeof *o, cmp_d);
    double m = o[(k - 1) / 2], r = m > 0 ? med[w] / m : 0;
    if (r > best) {
      best = r;
      worst = w;
    }
  }
  free(med);
  free(o);
  return best > ratio ? worst : -1;
}

/* Random times (with ties: a few distinct values) against the reference. */
static void random_cases(void) {
  srand(7);
  gs_ps_sync s;
  gs_ps_sync_parse("switch:online", &s);
  for (int trial = 0; trial < 300; trial++) {
    int W = 2 + rand() % 90, win = s.window;
    double *times = malloc((size_t)W * (size_t)win * sizeof *times);
    ps_policy p;
    if (!times || ps_policy_init(&p, &s, W, 0) != GS_OK) {
      EXPECT(0, "out of memory");
      free(times);
      return;
    }
    for (int i = 0; i < win; i++)
      for (int w = 0; w < W; w++) {
        double t = 0.1 * (1 + rand() % (trial % 2 ? 4 : 40));
        times[w * win + i] = t;
        ps_policy_record_time(&p, w, t);
      }
    int want = reference(times, W, win, s.straggler_ratio), got = ps_policy_straggler(&p);
    EXPECT(got == want, "trial %d, %d workers: detected %d, the rule says %d", trial, W, got, want);
    ps_policy_free(&p);
    free(times);
  }
}

int main(void) {
  const int widths[] = {2, 64, 65, 100, 200};
  for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) {
    int W = widths[i];
    /* The last worker, the first, and one in the middle. */
    const int slows[] = {W - 1, 0, W / 2};
    for (int j = 0; j < 3; j++) {
      int got = detect(W, slows[j], 3.0);
      EXPECT(got == slows[j], "%d workers, worker %d at 3x: detected %d", W, slows[j], got);
    }
    EXPECT(detect(W, -1, 1.0) == -1, "%d workers, none slow: a straggler detected", W);
  }
  random_cases();
  if (failures == 0) printf("ps_policy_wide: ok\n");
  return failures ? 1 : 0;
}
