/*
 * Planning overhead: the time gs_plan_make takes per policy on a synthetic
 * profile of N tensors (default 1,000), median of repeated runs, as wall
 * time and as the thread's CPU time. The goal is under 10 ms.
 *
 * With --max-cpu-ms X it is also a test: it fails (exit 1) if a policy's
 * median CPU time exceeds X. CPU time, not wall time, because on a loaded
 * machine the wall time of the same plan varies tenfold (5 to 47 ms for
 * auto with a measured curve with a load average of 13 on 2 cores) while
 * the CPU time does not; the bound catches a planner that became slower
 * in kind (a worse complexity), not a busy machine.
 *
 * usage: plan_overhead [N] [REPEATS] [--max-cpu-ms X]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gradsync.h"

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  double max_cpu_ms = 0;
  if (argc > 2 && strcmp(argv[argc - 2], "--max-cpu-ms") == 0) {
    max_cpu_ms = atof(argv[argc - 1]);
    argc -= 2;
  }
  size_t n = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 1000;
  int reps = argc > 2 ? atoi(argv[2]) : 21;
  if (n < 1 || reps < 1 || reps > 1000 || max_cpu_ms < 0) {
    fprintf(stderr, "usage: plan_overhead [N>=1] [REPEATS 1..1000] [--max-cpu-ms X]\n");
    return 2;
  }
  int over = 0;
  /* A ResNet-like mix: many small tensors (biases, norms) and some large
   * ones, backward times 0.01-1 ms, a 10GbE-like cost (cluster 2). */
  gs_profile_tensor *t = calloc(n, sizeof *t);
  char **names = calloc(n, sizeof *names);
  unsigned s = 12345;
  for (size_t i = 0; i < n; i++) {
    s = s * 1103515245u + 12345u;
    names[i] = malloc(24);
    snprintf(names[i], 24, "t%zu", i);
    t[i].name = names[i];
    t[i].numel = (s >> 8) % 3 == 0 ? 1 + (s >> 4) % 2400000 : 64 + (s >> 4) % 2000;
    t[i].dtype = GS_F32;
    t[i].backward_s = 1e-5 + ((s >> 12) % 1000) * 1e-6;
  }
  gs_profile p = {.name = "synthetic", .device = "", .source = "", .forward_s = 0.05,
                  .ntensors = n, .tensors = t};
  /* Twice: the affine cost, and a measured curve with the most points the
   * engine keeps (each message's time is then a binary search). */
  gs_plan_cost costs[2];
  gs_plan_cost_from_ab(9.08e-4, 7.40e-10, &costs[0]);
  gs_plan_cost_from_ab(9.08e-4, 7.40e-10, &costs[1]);
  gs_cost_curve *cv[3] = {&costs[1].ar, &costs[1].rs, &costs[1].ag};
  for (int c = 0; c < 3; c++) {
    cv[c]->npoints = GS_COST_CURVE_POINTS;
    for (int i = 0; i < GS_COST_CURVE_POINTS; i++) {
      double m = 16.0 * (double)(1ull << i);
      cv[c]->bytes[i] = m;
      cv[c]->secs[i] = cv[c]->a * (i < 8 ? 0.3 : 1.0) + cv[c]->b * m;
    }
  }
  static const char *specs[] = {"wfbp", "single", "bucket", "mgwfbp", "optimal",
                                "dear", "auto"};
  double *times = malloc(reps * sizeof(double)), *cpu = malloc(reps * sizeof(double));
  for (int c = 0; c < 2; c++) {
  const gs_plan_cost cost = costs[c];
  printf("plan overhead, %zu tensors, median of %d runs, %s\n", n, reps,
         c == 0 ? "affine cost a + b*M" : "measured curve of 40 points");
  for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
    size_t groups = 0;
    for (int r = 0; r < reps; r++) {
      gs_plan *pl = NULL;
      double t0 = gs_now(), c0 = thread_cpu_s();
      if (gs_plan_make(&p, &cost, specs[k], &pl) != GS_OK) {
        fprintf(stderr, "%s: %s\n", specs[k], gs_last_error());
        return 1;
      }
      cpu[r] = thread_cpu_s() - c0;
      times[r] = gs_now() - t0;
      groups = pl->ngroups;
      gs_plan_free(pl);
    }
    qsort(times, reps, sizeof(double), cmp_double);
    qsort(cpu, reps, sizeof(double), cmp_double);
    double cpu_ms = cpu[reps / 2] * 1e3;
    printf("  %-8s %8.3f ms  (%zu groups; CPU %.3f ms)\n", specs[k], times[reps / 2] * 1e3,
           groups, cpu_ms);
    if (max_cpu_ms > 0 && cpu_ms > max_cpu_ms) {
      printf("FAIL plan overhead: %s takes %.3f ms of CPU (median), bound %.1f ms\n",
             specs[k], cpu_ms, max_cpu_ms);
      over = 1;
    }
  }
  }
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  free(t);
  free(times);
  free(cpu);
  return over;
}
