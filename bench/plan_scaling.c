/*
 * Planning time against tensor count: gs_plan_make for every policy on
 * synthetic profiles of N tensors under costs chosen to defeat each
 * algorithm's shortcuts (docs/PLANNING.md, "Overhead"):
 *   1GbE     the 1GbE preset for 8 workers (a = 3e-4 s, b = 1.4e-8 s/B);
 *   a=0      T(M) = b*M: every split is free, the scan's pruning never stops;
 *   a=huge   a = 1000 s: one message is best, every m must be compared;
 *   b=0      T(M) = a: flat, every larger group ties;
 *   free     a = b = 0: every plan ties;
 *   tiny     a = 1e-7 s, b = 1e-10 s/B: plans of thousands of groups (DeAR's
 *            local search meets its budget);
 *   curve    a measured curve of 40 points with a burst region and flat
 *            steps (all three collectives), a = 9e-4 s, b = 7.4e-10 s/B;
 *   curve-tiny  the same shape with a = 1e-9 s, b = 1e-13 s/B: one group
 *            per tensor (DeAR's local search meets its budget).
 * The profile mixes many small tensors (biases, norms) with some large ones
 * and backward times of 10 us - 1 ms, like bench/plan_overhead.c; two more
 * rows ("large, ...") give every tensor the same large size (2^52 bytes in
 * all), under 1GbE and the curve.
 *
 * usage: plan_scaling [--check SECONDS] [--markdown] [N ...]
 *   (default N: 1000 10000 100000)
 * --check: exit 1 if any plan takes longer than SECONDS (multiplied by 10 in
 * builds without optimisation or with a sanitizer, which also check only
 * four of the cost rows; GS_PLAN_SCALING_LIMIT_S replaces the limit) or its predicted time is not finite, below the compute time,
 * or (optimal, auto) above wfbp's or single's. This is the ctest entry
 * engine_plan_scaling.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gradsync.h"

#define MAXD(x, y) ((x) > (y) ? (x) : (y))
#define MIND(x, y) ((x) < (y) ? (x) : (y))

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define SLOW_BUILD 1
#endif
#endif
#if !defined(SLOW_BUILD) && !defined(__OPTIMIZE__)
#define SLOW_BUILD 1
#endif
#ifndef SLOW_BUILD
#define SLOW_BUILD 0
#endif

enum { NCOSTS = 8 };
static const char *cost_names[NCOSTS] = {"1GbE", "a=0", "a=huge", "b=0", "free",
                                         "tiny", "curve", "curve-tiny"};
static const char *specs[] = {"wfbp", "single", "bucket", "mgwfbp",
                              "optimal", "dear", "auto"};
enum { NSPECS = sizeof specs / sizeof specs[0] };

/* CPU time of this process: what the planner itself spent, whatever else
 * loads the machine. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void make_curve(gs_cost_curve *cv, double a, double b) {
  gs_cost_curve_affine(a, b, cv);
  cv->npoints = GS_COST_CURVE_POINTS;
  double t = 0;
  for (int i = 0; i < GS_COST_CURVE_POINTS; i++) {
    double m = 16.0 * pow(1.7, i);
    double v = a * (i < 8 ? 0.3 : 1.0) + b * m;
    if (i % 5 == 4) v = t; /* a flat step, as pooled classes give */
    t = MAXD(t, v);
    cv->bytes[i] = m;
    cv->secs[i] = t;
  }
}

static gs_status make_cost(int kind, gs_plan_cost *c) {
  switch (kind) {
    case 0: {
      gs_cost_params params;
      gs_status st = gs_cost_preset("1GbE", &params);
      if (st != GS_OK) return st;
      gs_cost_topo topo = {8, 8};
      return gs_plan_cost_from_net(&params, topo, GS_ALGO_AUTO, c);
    }
    case 1: return gs_plan_cost_from_ab(0.0, 1e-9, c);
    case 2: return gs_plan_cost_from_ab(1000.0, 1e-9, c);
    case 3: return gs_plan_cost_from_ab(1e-3, 0.0, c);
    case 4: return gs_plan_cost_from_ab(0.0, 0.0, c);
    case 5: return gs_plan_cost_from_ab(1e-7, 1e-10, c);
    default: {
      double a = kind == 6 ? 9.08e-4 : 1e-9, b = kind == 6 ? 7.40e-10 : 1e-13;
      gs_status st = gs_plan_cost_from_ab(a, b, c);
      if (st != GS_OK) return st;
      make_curve(&c->ar, a, b);
      make_curve(&c->rs, a / 2, b / 2);
      make_curve(&c->ag, a / 2, b / 2);
      return GS_OK;
    }
  }
}

typedef struct synth {
  gs_profile p;
  gs_profile_tensor *t;
  char *names;
} synth;

static int synth_init(synth *s, size_t n) {
  s->t = calloc(n, sizeof *s->t);
  s->names = malloc(n * 24);
  if (s->t == NULL || s->names == NULL) return -1;
  unsigned x = 12345;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    snprintf(s->names + 24 * i, 24, "t%zu", i);
    s->t[i].name = s->names + 24 * i;
    s->t[i].numel = (x >> 8) % 3 == 0 ? 1 + (x >> 4) % 2400000 : 64 + (x >> 4) % 2000;
    s->t[i].dtype = GS_F32;
    s->t[i].backward_s = 1e-5 + ((x >> 12) % 1000) * 1e-6;
  }
  s->p = (gs_profile){.name = "synthetic", .device = "", .source = "",
                      .forward_s = 0.05, .ntensors = n, .tensors = s->t};
  return 0;
}

int main(int argc, char **argv) {
  double check = 0;
  int markdown = 0;
  size_t sizes[16], nsizes = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--check") == 0 && i + 1 < argc) {
      check = atof(argv[++i]);
    } else if (strcmp(argv[i], "--markdown") == 0) {
      markdown = 1;
    } else {
      char *end;
      unsigned long v = strtoul(argv[i], &end, 10);
      if (*end != '\0' || v < 1 || v > 10000000 || nsizes == 16) {
        fprintf(stderr, "usage: plan_scaling [--check SECONDS] [--markdown] [N ...]\n");
        return 2;
      }
      sizes[nsizes++] = v;
    }
  }
  if (nsizes == 0) {
    sizes[0] = 1000;
    sizes[1] = 10000;
    sizes[2] = 100000;
    nsizes = 3;
  }
  double limit = check * (SLOW_BUILD ? 10.0 : 1.0);
  const char *env = getenv("GS_PLAN_SCALING_LIMIT_S");
  if (check > 0 && env != NULL && atof(env) > 0) limit = atof(env);
  if (check > 0) printf("limit per plan: %.2f s%s\n", limit, SLOW_BUILD ? " (slow build)" : "");

  int failures = 0;
  double worst[NSPECS] = {0};
  if (markdown) {
    printf("| tensors | cost |");
    for (int k = 0; k < NSPECS; k++) printf(" %s ms (cpu) |", specs[k]);
    printf("\n|---|---|");
    for (int k = 0; k < NSPECS; k++) printf("---|");
    printf("\n");
  }
  for (size_t si = 0; si < nsizes; si++) {
    synth s;
    if (synth_init(&s, sizes[si]) != 0) {
      fprintf(stderr, "plan_scaling: out of memory for %zu tensors\n", sizes[si]);
      return 1;
    }
    double compute = s.p.forward_s;
    for (size_t i = 0; i < s.p.ntensors; i++) compute += s.t[i].backward_s;
    for (int row = 0; row < NCOSTS + 2; row++) {
      /* Sanitizer builds run 5-20x slower: the check keeps the 1GbE, a = 0,
       * curve and large-curve rows there, to stay within a minute. */
      if (check > 0 && SLOW_BUILD && row != 0 && row != 1 && row != 6 && row != NCOSTS + 1)
        continue;
      /* The last two rows: every tensor of the same large size (2^52 bytes
       * in all), where every threshold below it gives the same plan. */
      int c = row < NCOSTS ? row : row == NCOSTS ? 0 : 6;
      char cost_label[32];
      snprintf(cost_label, sizeof cost_label, "%s%s", row < NCOSTS ? "" : "large, ",
               cost_names[c]);
      if (row >= NCOSTS && s.t[0].numel != ((size_t)1 << 50) / s.p.ntensors)
        for (size_t i = 0; i < s.p.ntensors; i++)
          s.t[i].numel = ((size_t)1 << 50) / s.p.ntensors + i % 7;
      gs_plan_cost cost;
      if (make_cost(c, &cost) != GS_OK) {
        fprintf(stderr, "plan_scaling: cost %s: %s\n", cost_names[c], gs_last_error());
        return 1;
      }
      double secs[NSPECS], cpu[NSPECS], pred[NSPECS];
      size_t groups[NSPECS];
      for (int k = 0; k < NSPECS; k++) {
        gs_plan *pl = NULL;
        double t0 = gs_now(), c0 = cpu_now();
        gs_status st = gs_plan_make(&s.p, &cost, specs[k], &pl);
        secs[k] = gs_now() - t0;
        cpu[k] = cpu_now() - c0;
        if (st != GS_OK) {
          fprintf(stderr, "FAIL %zu tensors, %s, %s: %s\n", sizes[si], cost_label,
                  specs[k], gs_last_error());
          return 1;
        }
        pred[k] = pl->predicted_iter_s;
        groups[k] = pl->ngroups;
        gs_plan_free(pl);
        worst[k] = MAXD(worst[k], secs[k]);
      }
      if (markdown) {
        printf("| %zu | %s |", sizes[si], cost_label);
        for (int k = 0; k < NSPECS; k++)
          printf(" %.1f (%.1f) |", secs[k] * 1e3, cpu[k] * 1e3);
        printf("\n");
      } else {
        printf("%7zu tensors, cost %-6s:", sizes[si], cost_label);
        for (int k = 0; k < NSPECS; k++)
          printf(" %s %.1f/%.1f ms (%zu)", specs[k], secs[k] * 1e3, cpu[k] * 1e3,
                 groups[k]);
        printf("\n");
      }
      if (check <= 0) continue;
      for (int k = 0; k < NSPECS; k++) {
        const char *why = NULL;
        if (secs[k] > limit) why = "took longer than the limit";
        else if (!isfinite(pred[k])) why = "predicted time is not finite";
        else if (pred[k] < compute * (1 - 1e-9)) why = "predicted time below the compute time";
        else if ((k == 4 || k == 6) &&
                 pred[k] > MIND(pred[0], pred[1]) * (1 + 1e-9))
          why = "predicted time above wfbp's or single's";
        if (why) {
          printf("FAIL %zu tensors, cost %s, %s: %s (%.3f s, predicted %g s)\n",
                 sizes[si], cost_label, specs[k], why, secs[k], pred[k]);
          failures++;
        }
      }
    }
    free(s.t);
    free(s.names);
  }
  if (!markdown) {
    printf("slowest per policy:");
    for (int k = 0; k < NSPECS; k++) printf(" %s %.1f ms", specs[k], worst[k] * 1e3);
    printf("\n");
  }
  return failures ? 1 : 0;
}
