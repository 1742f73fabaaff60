/*
 * gradsync bench --op topk: top-k selection by magnitude on one thread,
 * measured in one run against its peers on the same data:
 *   stream    one streaming pass computing sum |x| (the memory-speed floor);
 *   exact     gs_topk_f32 "exact" (sampled threshold + radix select);
 *   mstopk    gs_topk_f32 "mstopk";
 *   nth       an nth_element-style select (quickselect, Hoare partition,
 *             median of three) on a copy of |x|, then one pass collecting the
 *             indices at or above the k-th value;
 *   sort      a full sort of the (|x|, index) pairs (LSD radix sort of the
 *             31-bit keys, 3 passes of 11/10/10 bits), then the first k.
 * Every selection is checked against the sort: the smallest selected |x|
 * must be the k-th largest and the selected |x| must sum to the same total.
 * Times are medians over --iters runs, which interleave the methods; wall
 * and thread CPU time are both reported (CPU time is what a loaded machine
 * disturbs least). --dump FILE writes the data (raw
 * little-endian f32) so a peer in another language can time the same
 * values (bench/topk/run.sh: torch.topk).
 *
 * A separate code path from the collectives' bench: one process, no MPI.
 */
#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"

static inline uint32_t key_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u & 0x7fffffffu;
}

static double stream_sum_abs(const float *x, size_t n) {
  float acc[8] = {0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) acc[j] += fabsf(x[i + j]);
  double s = 0;
  for (int j = 0; j < 8; j++) s += acc[j];
  for (; i < n; i++) s += fabsf(x[i]);
  return s;
}

/* Quickselect: a[] is rearranged so that a[r] is the value of rank r in
 * descending order. */
static void quickselect_desc(float *a, size_t n, size_t r) {
  size_t lo = 0, hi = n - 1;
  while (hi > lo) {
    const size_t mid = lo + (hi - lo) / 2;
    float p0 = a[lo], p1 = a[mid], p2 = a[hi];
    float pivot = p0 > p1 ? (p1 > p2 ? p1 : (p0 > p2 ? p2 : p0))
                          : (p0 > p2 ? p0 : (p1 > p2 ? p2 : p1));
    size_t i = lo, j = hi;
    while (i <= j) {
      while (a[i] > pivot) i++;
      while (a[j] < pivot) j--;
      if (i <= j) {
        float t = a[i];
        a[i] = a[j];
        a[j] = t;
        i++;
        if (j == 0) break;
        j--;
      }
    }
    if (r <= j) hi = j;
    else if (r >= i) lo = i;
    else return;
  }
}

static void select_nth(const float *x, size_t n, size_t k, float *scratch,
                       uint32_t *idx) {
  for (size_t i = 0; i < n; i++) scratch[i] = fabsf(x[i]);
  quickselect_desc(scratch, n, k - 1);
  const float t = scratch[k - 1];
  size_t c = 0;
  for (size_t i = 0; i < n && c < k; i++)
    if (fabsf(x[i]) > t) idx[c++] = (uint32_t)i;
  for (size_t i = 0; i < n && c < k; i++)
    if (fabsf(x[i]) == t) idx[c++] = (uint32_t)i;
}

/* LSD radix sort of (key, index) pairs by key, descending, then the first k. */
static void select_sort(const float *x, size_t n, size_t k, uint64_t *a,
                        uint64_t *b, uint32_t *idx) {
  for (size_t i = 0; i < n; i++)
    a[i] = (uint64_t)(0x7fffffffu - key_of(x[i])) << 32 | (uint32_t)i;
  static const int shift[3] = {32, 43, 53}, bits[3] = {11, 10, 10};
  for (int pass = 0; pass < 3; pass++) {
    const size_t nb = (size_t)1 << bits[pass];
    const uint64_t mask = nb - 1;
    size_t count[2048] = {0};
    for (size_t i = 0; i < n; i++) count[(a[i] >> shift[pass]) & mask]++;
    size_t sum = 0;
    for (size_t d = 0; d < nb; d++) {
      const size_t c = count[d];
      count[d] = sum;
      sum += c;
    }
    for (size_t i = 0; i < n; i++) b[count[(a[i] >> shift[pass]) & mask]++] = a[i];
    uint64_t *t = a;
    a = b;
    b = t;
  }
  for (size_t i = 0; i < k; i++) idx[i] = (uint32_t)a[i];
}

typedef struct {
  float kth;  /* the k-th largest |x| (from the sort) */
  double sum; /* the sum of the k largest |x| */
} truth;

static int check(const char *what, const float *x, size_t k, const uint32_t *idx,
                 const truth *t, int exact) {
  float mn = INFINITY;
  double s = 0;
  for (size_t i = 0; i < k; i++) {
    const float a = fabsf(x[idx[i]]);
    mn = fminf(mn, a);
    s += a;
  }
  if (exact && (mn != t->kth || fabs(s - t->sum) > 1e-9 * t->sum)) {
    cli_error("bench", "--op topk: %s selected a wrong set (smallest %g, expected "
              "%g; sum %.9g, expected %.9g)", what, (double)mn, (double)t->kth, s,
              t->sum);
    return -1;
  }
  return 0;
}

/* --n: an integer count of elements from 1 to 2^32-1, plain (1000000, read
 * by the verbs' shared integer parser) or with K, M or G as powers of 10
 * (25.6M, exact: the digits with the point moved right). Until 2026-12-07
 * it was read with strtod, which took 1.5 (run with n = 2), 0x10 and 010,
 * numbers the verbs refuse everywhere else. */
static int parse_count(const char *s, size_t *out) {
  const long max = 4294967295L;
  size_t len = strlen(s);
  char unit = len ? (char)(s[len - 1] | 0x20) : 0;
  int zeros = unit == 'k' ? 3 : unit == 'm' ? 6 : unit == 'g' ? 9 : 0;
  long v;
  if (zeros == 0) {
    if (cli_parse_long(s, 1, max, &v)) return -1;
    *out = (size_t)v;
    return 0;
  }
  char digits[32];
  size_t nd = 0, body = len - 1, ints = 0;
  int frac = -1; /* digits after the point; -1 before one */
  for (size_t i = 0; i < body; i++) {
    if (s[i] == '.' && frac < 0) {
      frac = 0;
      continue;
    }
    if (!isdigit((unsigned char)s[i])) return -1;
    if (frac < 0) ints++;
    else if (++frac > zeros) {
      if (s[i] != '0') return -1; /* finer than one element: not an integer */
      continue;
    }
    if (nd + 1 >= sizeof digits) return -1;
    digits[nd++] = s[i];
  }
  /* No digits, a point with none after it, or a leading zero ("010K"). */
  if (nd == 0 || frac == 0 || (ints > 1 && s[0] == '0')) return -1;
  for (int z = frac < 0 ? 0 : frac; z < zeros; z++) {
    if (nd + 1 >= sizeof digits) return -1;
    digits[nd++] = '0';
  }
  digits[nd] = '\0';
  const char *d = digits;
  while (d[0] == '0' && d[1] != '\0') d++; /* "0.5K" is 0500 */
  if (cli_parse_long(d, 1, max, &v)) return -1;
  *out = (size_t)v;
  return 0;
}

int cmd_bench_topk(int argc, char **argv) {
  size_t n = 25600000;
  double density = 0.001;
  int iters = 5, json = 0;
  const char *dump = NULL, *only = NULL;
  static const struct option longopts[] = {
      {"op", required_argument, 0, 'o'},      {"n", required_argument, 0, 'N'},
      {"density", required_argument, 0, 'd'}, {"iters", required_argument, 0, 'i'},
      {"dump", required_argument, 0, 'D'},    {"json", no_argument, 0, 'j'},
      {"only", required_argument, 0, 'O'},    {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  optind = 1;
  opterr = 0; /* unknown options get one line in the verbs' format */
  cli_seen seen = {{0}};
  int c;
  while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
    if (c != '?' && c != ':' && cli_once("bench", &seen, c, longopts)) return 2;
    switch (c) {
      case 'o':
        if (strcmp(optarg, "topk") != 0) {
          cli_error("bench", "--op topk: a second --op '%s'", optarg);
          return 2;
        }
        break;
      case 'N':
        if (parse_count(optarg, &n) != 0) {
          cli_error("bench", "--n: '%s' is not an integer from 1 to 2^32-1 "
                    "(e.g. 1000000, or 25.6M: K, M, G are powers of 10)", optarg);
          return 2;
        }
        break;
      case 'd':
        /* The message states the bound the parser applies (until 2026-12-07
         * it said "(0, 1]", of 1e-12 too). */
        if (cli_parse_double(optarg, 1e-9, 1.0, &density) != 0) {
          cli_error("bench", "--density: '%s' is not a number from 1e-09 to 1",
                    optarg);
          return 2;
        }
        break;
      case 'i':
        if (cli_parse_int(optarg, 1, 1000, &iters) != 0) {
          cli_error("bench", "--iters: '%s' is not an integer in 1..1000", optarg);
          return 2;
        }
        break;
      case 'D': dump = optarg; break;
      case 'j': json = 1; break;
      case 'O':
        if (strcmp(optarg, "exact") && strcmp(optarg, "mstopk") &&
            strcmp(optarg, "fast")) {
          cli_error("bench", "--only: '%s' (expected exact, mstopk or fast: stream, "
                    "exact and mstopk without the slow peers)", optarg);
          return 2;
        }
        only = optarg;
        break;
      case 'h':
        printf("usage: gradsync bench --op topk [--n COUNT] [--density D] "
               "[--iters N] [--only fast|exact|mstopk] [--dump FILE] [--json]\n"
               "  --n COUNT      elements, an integer (default 25.6M; K, M, G are\n"
               "                 powers of 10)\n"
               "  --density D    k = D * n (default 0.001)\n"
               "  --iters N      timed runs per method; medians reported (default 5)\n"
               "  --only fast    stream, exact and mstopk only (skip nth and sort);\n"
               "                 exact or mstopk: stream and that one\n"
               "  --dump FILE    write the data as raw f32 for an external peer\n"
               "One thread, normal values from a fixed seed. Peers in the same run: "
               "one streaming pass (sum |x|), quickselect, a full radix sort.\n");
        return 0;
      default:
        return cli_getopt_error("bench", c, argv, longopts);
    }
  }
  if (optind < argc) {
    cli_error("bench", "--op topk: unexpected argument '%s'", argv[optind]);
    return 2;
  }
  size_t k = (size_t)floor(density * (double)n);
  if (k < 1) k = 1;
  float *x = malloc(n * sizeof *x), *scratch = malloc(n * sizeof *scratch);
  uint64_t *pa = malloc(n * sizeof *pa), *pb = malloc(n * sizeof *pb);
  uint32_t *idx = malloc(k * sizeof *idx);
  if (x == NULL || scratch == NULL || pa == NULL || pb == NULL || idx == NULL) {
    cli_error("bench", "--op topk: cannot allocate %zu elements", n);
    free(x), free(scratch), free(pa), free(pb), free(idx);
    return 1;
  }
  uint64_t s = 2021;
  for (size_t i = 0; i + 1 < n; i += 2) {
    /* Box-Muller from SplitMix64: normal values, as gradients are. */
    double u[2];
    for (int j = 0; j < 2; j++) {
      uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      u[j] = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
    }
    const double r = sqrt(-2 * log(u[0]));
    x[i] = (float)(r * cos(6.283185307179586 * u[1]));
    x[i + 1] = (float)(r * sin(6.283185307179586 * u[1]));
  }
  if (n % 2) x[n - 1] = 0.5f;
  int rc = 0;
  if (dump) {
    FILE *f = fopen(dump, "wb");
    if (f == NULL || fwrite(x, sizeof *x, n, f) != n || fclose(f) != 0) {
      cli_error("bench", "--dump: cannot write '%s'", dump);
      rc = 1;
      goto out;
    }
  }
  /* The truth, from the full sort. */
  select_sort(x, n, k, pa, pb, idx);
  truth t = {INFINITY, 0};
  for (size_t i = 0; i < k; i++) {
    t.kth = fminf(t.kth, fabsf(x[idx[i]]));
    t.sum += fabsf(x[idx[i]]);
  }
  enum { M_STREAM, M_EXACT, M_MSTOPK, M_NTH, M_SORT, M_COUNT };
  static const char *names[M_COUNT] = {"stream", "exact", "mstopk", "nth", "sort"};
  double med[M_COUNT] = {0}, cpu[M_COUNT] = {0};
  int run[M_COUNT];
  for (int m = 0; m < M_COUNT; m++) {
    run[m] = 1;
    if (only && (m == M_NTH || m == M_SORT)) run[m] = 0;
    if (only && strcmp(only, "exact") == 0 && m == M_MSTOPK) run[m] = 0;
    if (only && strcmp(only, "mstopk") == 0 && m == M_EXACT) run[m] = 0;
  }
  /* Iterations interleave the methods, so that a loaded machine disturbs
   * each of them alike; thread CPU time is recorded next to wall time. */
  double *times = malloc((size_t)iters * M_COUNT * 2 * sizeof *times);
  volatile double sink = 0;
  for (int it = 0; it < iters; it++) {
    for (int m = 0; m < M_COUNT; m++) {
      if (!run[m]) continue;
      const double c0 = cli_cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
      const double t0 = gs_now();
      switch (m) {
        case M_STREAM: sink += stream_sum_abs(x, n); break;
        case M_EXACT:
        case M_MSTOPK:
          if (gs_topk_f32(x, n, k, m == M_EXACT ? "exact" : "mstopk", idx) != GS_OK) {
            cli_error("bench", "--op topk: %s", gs_last_error());
            rc = 1;
            goto done;
          }
          break;
        case M_NTH: select_nth(x, n, k, scratch, idx); break;
        case M_SORT: select_sort(x, n, k, pa, pb, idx); break;
      }
      const double t1 = gs_now();
      times[(m * 2) * iters + it] = t1 - t0;
      times[(m * 2 + 1) * iters + it] = cli_cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
      if (m != M_STREAM && check(names[m], x, k, idx, &t, m != M_MSTOPK) != 0) {
        rc = 1;
        goto done;
      }
    }
  }
  for (int m = 0; m < M_COUNT; m++)
    if (run[m]) {
      med[m] = cli_median(times + (m * 2) * iters, (size_t)iters);
      cpu[m] = cli_median(times + (m * 2 + 1) * iters, (size_t)iters);
    }
  (void)sink;
  if (json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "op", "topk");
    cJSON_AddNumberToObject(j, "n", (double)n);
    cJSON_AddNumberToObject(j, "k", (double)k);
    cJSON_AddNumberToObject(j, "iters", iters);
    for (int m = 0; m < M_COUNT; m++)
      if (med[m] > 0) {
        char key[32];
        snprintf(key, sizeof key, "%s_ms", names[m]);
        cli_json_add(j, key, med[m] * 1e3, "%.3f");
        snprintf(key, sizeof key, "%s_cpu_ms", names[m]);
        cli_json_add(j, key, cpu[m] * 1e3, "%.3f");
      }
    if (med[M_STREAM] > 0 && med[M_EXACT] > 0) {
      cli_json_add(j, "exact_over_stream", med[M_EXACT] / med[M_STREAM], "%.3f");
      cli_json_add(j, "exact_over_stream_cpu", cpu[M_EXACT] / cpu[M_STREAM], "%.3f");
    }
    if (med[M_NTH] > 0 && med[M_EXACT] > 0)
      cli_json_add(j, "nth_over_exact", med[M_NTH] / med[M_EXACT], "%.3f");
    if (med[M_SORT] > 0 && med[M_EXACT] > 0)
      cli_json_add(j, "sort_over_exact", med[M_SORT] / med[M_EXACT], "%.3f");
    cli_print_json(stdout, j);
  } else {
    printf("# top-k by |x|, 1 thread, n = %zu, k = %zu, normal values, median of %d\n",
           n, k, iters);
    printf("%-8s %12s %12s %12s %12s\n", "method", "wall_ms", "x_stream", "cpu_ms",
           "x_stream_cpu");
    for (int m = 0; m < M_COUNT; m++)
      if (med[m] > 0)
        printf("%-8s %12.3f %12.2f %12.3f %12.2f\n", names[m], med[m] * 1e3,
               med[M_STREAM] > 0 ? med[m] / med[M_STREAM] : NAN, cpu[m] * 1e3,
               cpu[M_STREAM] > 0 ? cpu[m] / cpu[M_STREAM] : NAN);
  }
done:
  free(times);
out:
  free(x), free(scratch), free(pa), free(pb), free(idx);
  return rc;
}
