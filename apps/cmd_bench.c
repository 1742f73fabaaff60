/*
 * gradsync bench: collective micro-benchmarks in the manner of nccl-tests.
 *
 * For each size of a sweep and each algorithm (and MPI's own collective, the
 * peer, measured in the same run), it runs warm-up calls, then timed calls,
 * and reports the median time over iterations of the slowest rank, the
 * algorithm bandwidth (bytes / time) and the bus bandwidth (algbw times the
 * nccl-tests factor: 2(p-1)/p for allreduce, (p-1)/p for reduce-scatter,
 * allgather and all-to-all, 1 for broadcast). Every measured call's output
 * is compared with the expected values; a wrong result fails the run.
 *
 * --link adds the link's own ceiling to each row: every rank at once sends
 * the bytes the collective's bus carries (busbw's bytes) to the next rank
 * and receives as many from the previous one with plain MPI_Sendrecv, no
 * arithmetic and nothing of gradsync's. Its busbw is what the network (and
 * the host carrying it, for an emulated one) gives when every node sends,
 * the ceiling any algorithm's busbw can reach; each row prints its share.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "gradsync.h"

/* OP_ALLTOALLV: alltoall's blocks through the v interface (counts and
 * displacements given), the peer MPI_Alltoallv: what a DLRM step calls. */
typedef enum {
  OP_ALLREDUCE,
  OP_REDUCE_SCATTER,
  OP_ALLGATHER,
  OP_BCAST,
  OP_ALLTOALL,
  OP_ALLTOALLV
} bench_op;

/* The pseudo-algorithm of --link's row, past gradsync's own. */
#define ALGO_LINK ((gs_algo)GS_ALGO_COUNT)

static const struct {
  const char *name;
  gs_algo algos[6];  /* gradsync's own algorithms, GS_ALGO_COUNT-terminated */
} op_info[] = {
    [OP_ALLREDUCE] = {"allreduce", {GS_ALGO_RING, GS_ALGO_RD, GS_ALGO_RABENSEIFNER,
                                    GS_ALGO_HIER, GS_ALGO_COUNT}},
    [OP_REDUCE_SCATTER] = {"reduce_scatter", {GS_ALGO_RING, GS_ALGO_COUNT}},
    [OP_ALLGATHER] = {"allgather", {GS_ALGO_RING, GS_ALGO_COUNT}},
    [OP_BCAST] = {"bcast", {GS_ALGO_PIPELINE, GS_ALGO_BINOMIAL, GS_ALGO_COUNT}},
    [OP_ALLTOALL] = {"alltoall", {GS_ALGO_PAIRWISE, GS_ALGO_COUNT}},
    [OP_ALLTOALLV] = {"alltoallv", {GS_ALGO_PAIRWISE, GS_ALGO_COUNT}},
};

static int is_a2a(bench_op op) { return op == OP_ALLTOALL || op == OP_ALLTOALLV; }

/* The largest size of a sweep: 64 GiB, beyond any one machine's buffers
 * here; larger sizes are refused at start-up rather than failing to
 * allocate. */
#define BENCH_MAX_BYTES ((size_t)64 << 30)

typedef struct bench_opts {
  bench_op op;
  gs_algo only;   /* GS_ALGO_COUNT: all */
  size_t min_bytes, max_bytes;
  int step;
  gs_dtype dtype;
  gs_redop redop;
  int iters, warmup;
  double budget;  /* seconds of timed calls per (size, algorithm) */
  int json;
  int calibrate;        /* fit each algorithm before the sweep */
  const char *cost_out; /* where to save the fitted model */
  int link;             /* add the link's ceiling to each row */
} bench_opts;

typedef struct bench_ctx {
  cli_rank *r;
  gs_comm *comm;
  int rank, size;
  const bench_opts *o;
  size_t count;        /* elements per rank's send buffer */
  size_t in_elems, out_elems;
  size_t bytes;        /* the row's size: the collective's total bytes */
  void *in, *out, *expect;
  size_t *counts, *displs; /* alltoallv's, the same both ways */
} bench_ctx;

static void usage(FILE *f) {
  fprintf(f,
          "usage: gradsync run -np N [--net RATE] -- gradsync bench [options]\n"
          "\nMeasures a collective over a size sweep for each algorithm and for\n"
          "MPI's own collective in the same run, and checks every result.\n\n"
          "  --op NAME          allreduce (default), reduce_scatter, allgather,\n"
          "                     bcast, alltoall, alltoallv (alltoall's blocks\n"
          "                     through the v interface; MPI_Alltoallv the\n"
          "                     peer); sparse_allreduce and topk have\n"
          "                     their own options (--op sparse_allreduce\n"
          "                     --help, --op topk --help)\n"
          "  --algo NAME|all    one algorithm or all (default all; 'auto' is\n"
          "                     gradsync's own choice, 'mpi' the peer)\n"
          "  --min-bytes SIZE   smallest size (default 4K; K, M, G = 2^10..)\n"
          "  --max-bytes SIZE   largest size (default 256M)\n"
          "  --step K           each row's size is K times the last's: an integer\n"
          "                     from 2 to 1024 (default 4)\n"
          "  --dtype T          f32 (default), f64, f16, bf16, i32, i64, u8\n"
          "  --redop OP         sum (default), avg, min, max, prod\n"
          "  --iters N          at most N timed calls per row (default 20)\n"
          "  --warmup N         untimed calls first (default 2)\n"
          "  --budget SECONDS   time budget of timed calls per row (default 3)\n"
          "  --json             one JSON object per line instead of a table\n"
          "  --link             also measure the link's ceiling: every rank sends\n"
          "                     the bus's bytes to the next with plain MPI_Sendrecv\n"
          "                     at once; each row adds its share of it\n"
          "  --no-calibrate     choose 'auto' with the quick model of start-up\n"
          "                     instead of first fitting each algorithm (up to\n"
          "                     64 MB) on this network\n"
          "  --cost-out FILE    save the fitted model; GRADSYNC_COST_FILE=FILE\n"
          "                     makes later runs on this topology use it. An\n"
          "                     allreduce sweep of 3 or more sizes gives each\n"
          "                     algorithm's points (median times of its first\n"
          "                     %d sizes) and fit; a shorter one keeps the\n"
          "                     start-up calibration's fit\n"
          "Sizes are the total bytes of the collective: the allreduce vector,\n"
          "the reduce-scatter input, the allgather output, the bcast buffer,\n"
          "or what one rank sends in all-to-all.\n",
          GS_COST_MAX_POINTS);
}

/* The value element i of rank r contributes. Small integers keep every
 * reduction exact in all dtypes (f16 and u8 included) up to 64 ranks. */
static double pattern(const bench_opts *o, int r, size_t i) {
  switch (o->redop) {
    case GS_PROD: return ((size_t)r + i) % 5 == 0 ? 2.0 : 1.0;
    case GS_MIN:
    case GS_MAX: return (double)((i * 7 + (size_t)r * 13) % 61);
    default: return (double)((i + (size_t)r * 3) % 4);
  }
}

static void store(gs_dtype d, void *buf, size_t i, double v) {
  switch (d) {
    case GS_F32: ((float *)buf)[i] = (float)v; break;
    case GS_F64: ((double *)buf)[i] = v; break;
    case GS_F16: ((uint16_t *)buf)[i] = gs_f32_to_f16((float)v); break;
    case GS_BF16: ((uint16_t *)buf)[i] = gs_f32_to_bf16((float)v); break;
    case GS_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case GS_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case GS_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    default: break;
  }
}

static double load(gs_dtype d, const void *buf, size_t i) {
  switch (d) {
    case GS_F32: return ((const float *)buf)[i];
    case GS_F64: return ((const double *)buf)[i];
    case GS_F16: return gs_f16_to_f32(((const uint16_t *)buf)[i]);
    case GS_BF16: return gs_bf16_to_f32(((const uint16_t *)buf)[i]);
    case GS_I32: return ((const int32_t *)buf)[i];
    case GS_I64: return (double)((const int64_t *)buf)[i];
    case GS_U8: return ((const uint8_t *)buf)[i];
    default: return 0;
  }
}

/* The reduction of element i over all ranks, computed serially. */
static double reduced(const bench_ctx *b, size_t i) {
  const bench_opts *o = b->o;
  double acc = pattern(o, 0, i);
  for (int r = 1; r < b->size; r++) {
    double v = pattern(o, r, i);
    switch (o->redop) {
      case GS_MIN: acc = fmin(acc, v); break;
      case GS_MAX: acc = fmax(acc, v); break;
      case GS_PROD: acc *= v; break;
      default: acc += v; break;
    }
  }
  if (o->redop == GS_AVG) {
    int is_int = o->dtype == GS_I32 || o->dtype == GS_I64 || o->dtype == GS_U8;
    acc = is_int ? trunc(acc / b->size) : acc / b->size;
  }
  return acc;
}

/* Fills the send buffer and the expected output of rank b->rank. */
static void prepare(bench_ctx *b) {
  const bench_opts *o = b->o;
  gs_dtype d = o->dtype;
  int p = b->size, r = b->rank;
  size_t n = b->count;
  switch (o->op) {
    case OP_ALLREDUCE:
      for (size_t i = 0; i < n; i++) {
        store(d, b->in, i, pattern(o, r, i));
        store(d, b->expect, i, reduced(b, i));
      }
      break;
    case OP_REDUCE_SCATTER: /* n = recvcount; input p*n */
      for (size_t i = 0; i < n * (size_t)p; i++) store(d, b->in, i, pattern(o, r, i));
      for (size_t i = 0; i < n; i++)
        store(d, b->expect, i, reduced(b, (size_t)r * n + i));
      break;
    case OP_ALLGATHER:
      for (size_t i = 0; i < n; i++) store(d, b->in, i, pattern(o, r, i));
      for (int q = 0; q < p; q++)
        for (size_t i = 0; i < n; i++)
          store(d, b->expect, (size_t)q * n + i, pattern(o, q, i));
      break;
    case OP_BCAST:
      for (size_t i = 0; i < n; i++) store(d, b->expect, i, pattern(o, 0, i));
      break;
    case OP_ALLTOALLV:
      for (int q = 0; q < p; q++) {
        b->counts[q] = n;
        b->displs[q] = (size_t)q * n;
      }
      /* the blocks are alltoall's: */
      /* fall through */
    case OP_ALLTOALL: /* block q of rank r's input goes to rank q */
      for (int q = 0; q < p; q++)
        for (size_t i = 0; i < n; i++) {
          store(d, b->in, (size_t)q * n + i, pattern(o, r * p + q, i));
          store(d, b->expect, (size_t)q * n + i, pattern(o, q * p + r, i));
        }
      break;
  }
}

static double bus_factor(bench_op op, int p);

/* --link's call: the bus's bytes of the collective (busbw's numerator)
 * from each rank to the next, from the previous one at once, in pieces of
 * at most the collective's own buffer. */
static gs_status link_once(bench_ctx *b) {
  size_t es = gs_dtype_size(b->o->dtype);
  size_t cap = b->in_elems < b->out_elems ? b->in_elems : b->out_elems;
  cap *= es;
  double want = (double)b->bytes * bus_factor(b->o->op, b->size);
  size_t left = (size_t)(want + 0.5);
  int right = (b->rank + 1) % b->size, from = (b->rank + b->size - 1) % b->size;
  MPI_Comm mc = gs_comm_mpi(b->comm);
  while (left > 0) {
    size_t n = left < cap ? left : cap;
    if (n > (size_t)1 << 30) n = (size_t)1 << 30;
    int rc = MPI_Sendrecv(b->in, (int)n, MPI_BYTE, right, 77, b->out, (int)n, MPI_BYTE,
                          from, 77, mc, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
      return gs_error(GS_ERR_MPI, "link: MPI_Sendrecv of %zu bytes failed (%d)", n, rc);
    left -= n;
  }
  return GS_OK;
}

static const char *row_name(gs_algo algo) {
  return algo == ALGO_LINK ? "link" : gs_algo_name(algo);
}

static gs_status run_once(bench_ctx *b, gs_algo algo) {
  const bench_opts *o = b->o;
  size_t n = b->count;
  if (algo == ALGO_LINK) return link_once(b);
  switch (o->op) {
    case OP_ALLREDUCE:
      return gs_allreduce(b->comm, b->in, b->out, n, o->dtype, o->redop, algo);
    case OP_REDUCE_SCATTER:
      return gs_reduce_scatter(b->comm, b->in, b->out, n, o->dtype, o->redop, algo);
    case OP_ALLGATHER:
      return gs_allgather(b->comm, b->in, b->out, n, o->dtype, algo);
    case OP_BCAST:
      return gs_bcast(b->comm, b->out, n, o->dtype, 0, algo);
    case OP_ALLTOALL:
      return gs_alltoall(b->comm, b->in, b->out, n, o->dtype, algo);
    case OP_ALLTOALLV: /* counts and displacements: prepare's */
      return gs_alltoallv(b->comm, b->in, b->counts, b->displs, b->out, b->counts, b->displs,
                          o->dtype, algo);
  }
  return GS_ERR_INTERNAL;
}

/* Resets what a call overwrites: bcast's buffer is its input on the root. */
static void reset_output(bench_ctx *b) {
  size_t es = gs_dtype_size(b->o->dtype);
  if (b->o->op == OP_BCAST) {
    if (b->rank == 0) memcpy(b->out, b->expect, b->count * es);
    else memset(b->out, 0xff, b->count * es);
  }
}

/* 0 if out matches expect: bitwise, or within a tolerance for averages
 * (which divide) in reduced precision. */
static int verify(const bench_ctx *b, size_t *bad_index) {
  size_t es = gs_dtype_size(b->o->dtype);
  if (memcmp(b->out, b->expect, b->out_elems * es) == 0) return 0;
  gs_dtype d = b->o->dtype;
  double tol = d == GS_F16 || d == GS_BF16 ? 1e-2 : d == GS_F32 ? 1e-6 : 1e-12;
  if (b->o->redop != GS_AVG) tol = 0;
  for (size_t i = 0; i < b->out_elems; i++) {
    double x = load(d, b->out, i), y = load(d, b->expect, i);
    if (!(fabs(x - y) <= tol * fmax(1.0, fabs(y)))) {
      *bad_index = i;
      return 1;
    }
  }
  return 0;
}

static double bus_factor(bench_op op, int p) {
  switch (op) {
    case OP_ALLREDUCE: return 2.0 * (p - 1) / p;
    case OP_BCAST: return 1.0;
    default: return (double)(p - 1) / p;
  }
}

/* Measures one (size, algorithm) cell. Returns the median of the per-call
 * maximum over ranks, or a negative value after reporting an error;
 * *cpu_out is the busiest rank's CPU time per timed call (the verification
 * of results excluded). */
static double measure(bench_ctx *b, gs_algo algo, int *iters_out, double *cpu_out) {
  const bench_opts *o = b->o;
  gs_status st = GS_OK;
  double warm = 0;
  for (int i = 0; i < o->warmup && st == GS_OK; i++) {
    reset_output(b);
    gs_barrier(b->comm, GS_ALGO_MPI);
    double t0 = gs_now();
    st = run_once(b, algo);
    warm = gs_now() - t0;
  }
  /* All ranks agree on the number of timed calls from the slowest warm-up. */
  double agreed[2] = {warm, st == GS_OK ? 0.0 : 1.0};
  if (gs_allreduce(b->comm, GS_IN_PLACE, agreed, 2, GS_F64, GS_MAX, GS_ALGO_MPI) != GS_OK)
    st = GS_ERR_MPI;
  if (st != GS_OK || agreed[1] != 0) {
    cli_rank_error(b->r, "%s with algorithm %s failed: %s", op_info[o->op].name,
                   row_name(algo), st != GS_OK ? gs_last_error() : "on another rank");
    return -1;
  }
  int iters = o->iters;
  if (agreed[0] > 0 && o->budget / agreed[0] < iters) iters = (int)(o->budget / agreed[0]);
  if (iters < 3) iters = 3;
  if (iters > o->iters) iters = o->iters;
  /* times[iters]: this rank's verdict (0 ok, 1 wrong result, 2 failed),
   * times[iters + 1] its CPU time in the calls, both maximised with the
   * times so that every rank learns them in one call. */
  double *times = calloc((size_t)iters + 2, sizeof(double));
  if (times == NULL) cli_rank_abort(b->r, "out of memory for %d timings", iters);
  size_t bad = 0;
  int wrong = 0;
  for (int i = 0; i < iters && st == GS_OK; i++) {
    reset_output(b);
    gs_barrier(b->comm, GS_ALGO_MPI);
    double t0 = gs_now(), c0 = cli_cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
    st = run_once(b, algo);
    times[i] = gs_now() - t0;
    times[iters + 1] += cli_cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    if (st == GS_OK && !wrong && algo != ALGO_LINK && verify(b, &bad)) wrong = i + 1;
  }
  times[iters] = st != GS_OK ? 2.0 : wrong ? 1.0 : 0.0;
  if (st != GS_OK)
    cli_rank_error(b->r, "%s with algorithm %s failed: %s", op_info[o->op].name,
                   row_name(algo), gs_last_error());
  if (wrong) {
    gs_dtype d = o->dtype;
    cli_rank_error(b->r, "WRONG RESULT: %s, algorithm %s, %zu elements of %s, call %d: "
                   "element %zu is %g, expected %g", op_info[o->op].name,
                   gs_algo_name(algo), b->count, gs_dtype_name(d), wrong, bad,
                   load(d, b->out, bad), load(d, b->expect, bad));
  }
  /* A rank whose call failed still joins: the others learn it here instead
   * of waiting for it. */
  if (gs_allreduce(b->comm, GS_IN_PLACE, times, (size_t)iters + 2, GS_F64, GS_MAX,
                   GS_ALGO_MPI) != GS_OK) {
    cli_rank_error(b->r, "cannot collect the timings: %s", gs_last_error());
    free(times);
    return -1;
  }
  double verdict = times[iters];
  if (verdict == 2.0 && st == GS_OK)
    cli_rank_error(b->r, "stopping: %s with algorithm %s failed on another rank",
                   op_info[o->op].name, row_name(algo));
  double med = cli_median(times, (size_t)iters);
  *cpu_out = times[iters + 1] / iters;
  free(times);
  *iters_out = iters;
  return verdict == 2.0 ? -1 : verdict == 1.0 ? -2 : med;
}

static int parse_opts(int argc, char **argv, bench_opts *o) {
  static const struct option longs[] = {
      {"op", required_argument, 0, 'o'},      {"algo", required_argument, 0, 'a'},
      {"min-bytes", required_argument, 0, 'b'}, {"max-bytes", required_argument, 0, 'e'},
      {"step", required_argument, 0, 'f'},    {"dtype", required_argument, 0, 'd'},
      {"redop", required_argument, 0, 'r'},   {"iters", required_argument, 0, 'n'},
      {"warmup", required_argument, 0, 'w'},  {"budget", required_argument, 0, 't'},
      {"json", no_argument, 0, 'j'},          {"help", no_argument, 0, 'h'},
      {"no-calibrate", no_argument, 0, 'C'},  {"cost-out", required_argument, 0, 'O'},
      {"link", no_argument, 0, 'L'},          {0, 0, 0, 0}};
  *o = (bench_opts){.op = OP_ALLREDUCE, .only = GS_ALGO_COUNT, .min_bytes = 4096,
                    .max_bytes = 256u << 20, .step = 4, .dtype = GS_F32,
                    .redop = GS_SUM, .iters = 20, .warmup = 2, .budget = 3.0,
                    .calibrate = 1};
  int c, redop_given = 0;
  cli_seen seen = {{0}};
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+:h", longs, NULL)) != -1) {
    if (c != '?' && c != ':' && cli_once("bench", &seen, c, longs)) return 2;
    switch (c) {
      case 'o': {
        int found = 0;
        for (int i = 0; i <= OP_ALLTOALLV; i++)
          if (strcmp(optarg, op_info[i].name) == 0) {
            o->op = (bench_op)i;
            found = 1;
          }
        if (!found) {
          cli_error("bench", "unknown --op '%s' (allreduce, reduce_scatter, "
                    "allgather, bcast, alltoall, alltoallv)", optarg);
          return 2;
        }
        break;
      }
      case 'a':
        if (strcmp(optarg, "all") == 0) o->only = GS_ALGO_COUNT;
        else if (gs_algo_parse(optarg, &o->only) != GS_OK) {
          cli_error("bench", "--algo: %s", gs_last_error());
          return 2;
        }
        break;
      case 'b':
      case 'e':
        /* From 1 byte (a sweep from 0 would never grow) to 64G. */
        if (cli_parse_bytes(optarg, c == 'b' ? &o->min_bytes : &o->max_bytes) ||
            (c == 'b' ? o->min_bytes : o->max_bytes) < 1 ||
            (c == 'b' ? o->min_bytes : o->max_bytes) > BENCH_MAX_BYTES) {
          cli_error("bench", "--%s '%s' must be a size from 1 to 64G (decimal digits and "
                    "an optional K, M or G, e.g. 4K, 256M)",
                    c == 'b' ? "min-bytes" : "max-bytes", optarg);
          return 2;
        }
        break;
      case 'f':
        if (cli_parse_int(optarg, 2, 1024, &o->step)) {
          cli_error("bench", "--step '%s' must be an integer from 2 to 1024", optarg);
          return 2;
        }
        break;
      case 'd':
        if (gs_dtype_parse(optarg, &o->dtype) != GS_OK) {
          cli_error("bench", "--dtype: %s", gs_last_error());
          return 2;
        }
        break;
      case 'r':
        if (gs_redop_parse(optarg, &o->redop) != GS_OK) {
          cli_error("bench", "--redop: %s", gs_last_error());
          return 2;
        }
        redop_given = 1;
        break;
      case 'n':
      case 'w':
        if (cli_parse_int(optarg, c == 'n' ? 1 : 0, 1000000,
                          c == 'n' ? &o->iters : &o->warmup)) {
          cli_error("bench", "--%s '%s' must be an integer from %d to 1000000",
                    c == 'n' ? "iters" : "warmup", optarg, c == 'n' ? 1 : 0);
          return 2;
        }
        break;
      case 't':
        if (cli_parse_double(optarg, 0, 86400, &o->budget) || o->budget == 0) {
          cli_error("bench", "--budget '%s' must be a number of seconds above 0 and up "
                    "to 86400", optarg);
          return 2;
        }
        break;
      case 'j': o->json = 1; break;
      case 'C': o->calibrate = 0; break;
      case 'L': o->link = 1; break;
      case 'O':
        if (*optarg == '\0') {
          cli_error("bench", "--cost-out needs a file name");
          return 2;
        }
        o->cost_out = optarg;
        break;
      case 'h': usage(stdout); return 1;
      default: return cli_getopt_error("bench", c, argv, longs);
    }
  }
  if (optind < argc) {
    cli_error("bench", "unexpected argument '%s'", argv[optind]);
    return 2;
  }
  /* The other collectives reduce nothing: it was accepted and ignored. */
  if (redop_given && o->op != OP_ALLREDUCE && o->op != OP_REDUCE_SCATTER) {
    cli_error("bench", "--redop applies to allreduce and reduce_scatter, not to --op %s",
              op_info[o->op].name);
    return 2;
  }
  if (o->min_bytes > o->max_bytes) {
    cli_error("bench", "--min-bytes %zu is larger than --max-bytes %zu",
              o->min_bytes, o->max_bytes);
    return 2;
  }
  if (o->only != GS_ALGO_COUNT && o->only != GS_ALGO_AUTO && o->only != GS_ALGO_MPI) {
    int ok = 0;
    for (const gs_algo *a = op_info[o->op].algos; *a != GS_ALGO_COUNT; a++)
      ok |= *a == o->only;
    if (!ok) {
      cli_error("bench", "algorithm %s does not implement %s",
                gs_algo_name(o->only), op_info[o->op].name);
      return 2;
    }
  }
  return 0;
}

/* The algorithms of one row: the link's ceiling (--link), the peer, then
 * gradsync's choice, then each of gradsync's own. */
static int row_algos(const bench_opts *o, const gs_comm *comm, gs_algo *out) {
  int n = 0;
  if (o->link) out[n++] = ALGO_LINK;
  if (o->only != GS_ALGO_COUNT) {
    if (o->only != GS_ALGO_MPI) out[n++] = GS_ALGO_MPI;
    out[n++] = o->only;
    return n;
  }
  out[n++] = GS_ALGO_MPI;
  out[n++] = GS_ALGO_AUTO;
  for (const gs_algo *a = op_info[o->op].algos; *a != GS_ALGO_COUNT; a++) {
    /* The two-level algorithm needs several nodes with several ranks each. */
    if (*a == GS_ALGO_HIER &&
        (gs_comm_nodes(comm) < 2 || gs_comm_local_size(comm) < 2))
      continue;
    out[n++] = *a;
  }
  return n;
}

/* The cost model the run chooses algorithms with, as one JSON line. */
static void print_cost_json(const bench_opts *o, const gs_cost_params *cost, int p,
                            int nodes) {
  cJSON *m = cJSON_CreateObject();
  cli_json_add(m, "alpha_s", cost->alpha, "%.4g");
  cli_json_add(m, "beta_s_per_B", cost->beta, "%.4g");
  cli_json_add(m, "gamma_s_per_B", cost->gamma, "%.4g");
  for (int a = 0; a < GS_ALGO_COUNT; a++)
    if (cost->fit[a].beta > 0) {
      cJSON *f = cJSON_AddObjectToObject(m, gs_algo_name((gs_algo)a));
      cli_json_add(f, "alpha_s", cost->fit[a].alpha, "%.4g");
      cli_json_add(f, "beta_s_per_B", cost->fit[a].beta, "%.4g");
    }
  cJSON *j = cJSON_CreateObject();
  cJSON_AddItemToObject(j, "cost_model", m);
  cJSON_AddNumberToObject(j, "ranks", p);
  cJSON_AddNumberToObject(j, "nodes", nodes);
  cJSON_AddBoolToObject(j, "calibrated", o->calibrate);
  cli_print_json(stdout, j);
}

static void print_row_json(const bench_opts *o, gs_algo algo, const char *chosen,
                           double bytes, int p, int nodes, double t, double algbw,
                           double busbw, double vs, int iters, double cpu,
                           double link_share) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "op", op_info[o->op].name);
  cJSON_AddStringToObject(j, "algo", row_name(algo));
  cJSON_AddStringToObject(j, "chosen", chosen);
  cli_json_add(j, "bytes", bytes, "%.0f");
  cJSON_AddNumberToObject(j, "ranks", p);
  cJSON_AddNumberToObject(j, "nodes", nodes);
  cJSON_AddStringToObject(j, "dtype", gs_dtype_name(o->dtype));
  cJSON_AddStringToObject(j, "redop", gs_redop_name(o->redop));
  cli_json_add(j, "time_us", t * 1e6, "%.2f");
  cli_json_add(j, "algbw_GBps", algbw, "%.5f");
  cli_json_add(j, "busbw_GBps", busbw, "%.5f");
  if (algo != ALGO_LINK) cli_json_add(j, "speedup_vs_mpi", vs, "%.4f");
  cJSON_AddNumberToObject(j, "iters", iters);
  cli_json_add(j, "cpu_us", cpu * 1e6, "%.2f");
  if (o->link) cli_json_add(j, "link_share", link_share, "%.4f");
  cJSON_AddStringToObject(j, "check", algo == ALGO_LINK ? "none" : "ok");
  cli_print_json(stdout, j);
}

int cmd_bench(int argc, char **argv) {
  /* --op topk is one process without MPI: its own code path. */
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--op") == 0 && strcmp(argv[i + 1], "topk") == 0)
      return cmd_bench_topk(argc, argv);
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--op=topk") == 0) return cmd_bench_topk(argc, argv);
  /* The sparse exchanges have options and rows of their own. */
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--op=sparse_allreduce") == 0 ||
        (strcmp(argv[i], "--op") == 0 && i + 1 < argc &&
         strcmp(argv[i + 1], "sparse_allreduce") == 0))
      return cmd_bench_sparse(argc, argv);
  bench_opts o;
  /* The options are every rank's alike: rank 0 alone says what is wrong
   * (each rank said it until 2026-12-06). */
  cli_argv_errors(1);
  int rc = parse_opts(argc, argv, &o);
  cli_argv_errors(0);
  if (rc == 1) return 0; /* --help */
  cli_rank cr;
  if (rc != 0 && !cli_under_launcher()) return rc; /* no other rank to tell */
  if (cli_rank_init(&cr, "bench", &argc, &argv)) return rc ? rc : 1;
  char reason[160] = "bad options";
  /* Rank 0 writes the cost file: its path is checked before any work. */
  if (rc == 0 && o.cost_out && cr.rank == 0 &&
      cli_check_writable(o.cost_out, "--cost-out") != GS_OK) {
    cli_rank_usage_error(&cr, "%s", gs_last_error());
    snprintf(reason, sizeof reason, "%s", gs_last_error());
    rc = 2;
  }
  rc = cli_rank_connect(&cr, 0, rc, reason);
  if (rc) return rc;
  bench_ctx b = {.r = &cr, .o = &o, .comm = cr.comm, .rank = cr.rank, .size = cr.size};
  int p = b.size;
  size_t es = gs_dtype_size(o.dtype);
  /* Elements per rank are a multiple of p where the collective splits. */
  size_t unit = (o.op == OP_ALLREDUCE || o.op == OP_BCAST) ? es : es * (size_t)p;
  /* Sizes are whole elements (per rank where the collective splits): below
   * one, a row would move 0 bytes. Every rank finds the same. */
  if (o.max_bytes < unit) {
    if (cr.rank == 0)
      cli_error("bench", "--max-bytes %zu is below one element%s (%zu bytes): nothing to "
                "measure", o.max_bytes, unit > es ? " per rank" : "", unit);
    cli_rank_finish(&cr, 2);
    return 2;
  }
  if (o.min_bytes < unit) {
    if (cr.rank == 0)
      fprintf(stderr, "gradsync bench: --min-bytes %zu is below one element%s: from %zu "
              "bytes\n", o.min_bytes, unit > es ? " per rank" : "", unit);
    o.min_bytes = unit;
  }
  size_t maxn = o.max_bytes / unit + 1;
  size_t in_cap = o.op == OP_REDUCE_SCATTER || is_a2a(o.op) ? maxn * (size_t)p : maxn;
  size_t out_cap = o.op == OP_ALLGATHER || is_a2a(o.op) ? maxn * (size_t)p : maxn;
  b.in = calloc(in_cap, es);
  b.out = calloc(out_cap, es);
  b.expect = calloc(out_cap, es);
  b.counts = calloc((size_t)p, sizeof *b.counts);
  b.displs = calloc((size_t)p, sizeof *b.displs);
  gs_status st = GS_OK;
  if (!b.in || !b.out || !b.expect || !b.counts || !b.displs)
    st = gs_error(GS_ERR_NOMEM, "cannot allocate buffers for %zu bytes", o.max_bytes);
  int failures = 0;
  if (cli_agree_status(&cr, st)) {
    rc = 1;
    goto out;
  }
  if (o.calibrate && o.op == OP_ALLREDUCE) {
    size_t cal = o.max_bytes < (64u << 20) ? o.max_bytes : (size_t)(64u << 20);
    if (b.rank == 0 && !o.json) {
      printf("# calibrating each allreduce algorithm up to %zu bytes ...\n", cal);
      fflush(stdout);
    }
    if (cli_agree_status(&cr, gs_comm_calibrate(b.comm, cal))) {
      rc = 1;
      goto out;
    }
  }
  const gs_cost_params *cost = gs_comm_cost(b.comm);
  /* What --cost-out saves: the calibration, refitted per algorithm with the
   * sweep's medians (more calls per size than the calibration's best of
   * three, so typical times rather than the luckiest). */
  gs_cost_params saved = *cost;
  double sw_bytes[GS_ALGO_COUNT][GS_COST_MAX_POINTS], sw_secs[GS_ALGO_COUNT][GS_COST_MAX_POINTS];
  size_t sw_n[GS_ALGO_COUNT] = {0};
  if (b.rank == 0) {
    if (o.json) {
      cli_print_env_json(stdout);
      print_cost_json(&o, cost, p, gs_comm_nodes(b.comm));
    } else {
      printf("# gradsync bench: %s, %s %s, %d ranks on %d node(s)\n",
             op_info[o.op].name, gs_dtype_name(o.dtype), gs_redop_name(o.redop),
             p, gs_comm_nodes(b.comm));
      printf("# cost model: alpha %.1f us, beta %.3g s/B (%.3f GB/s), gamma %.3g s/B\n",
             cost->alpha * 1e6, cost->beta, cost->beta > 0 ? 1e-9 / cost->beta : 0.0,
             cost->gamma);
      for (int a = 0; a < GS_ALGO_COUNT; a++)
        if (cost->fit[a].beta > 0)
          printf("#   fitted %-13s alpha %8.1f us, beta %.3g s/B (%.4f GB/s)\n",
                 gs_algo_name((gs_algo)a), cost->fit[a].alpha * 1e6,
                 cost->fit[a].beta, 1e-9 / cost->fit[a].beta);
      printf("# time: median over calls of the slowest rank; busbw per nccl-tests;\n"
             "# vs mpi: MPI's time / this time (above 1 = faster than MPI);\n"
             "# cpu: the busiest rank's CPU time (user + system, all threads)\n"
             "#   as a share of the call's time\n");
      if (o.link)
        printf("# link: plain MPI_Sendrecv of the bus's bytes, every rank to the next\n"
               "#   at once (no result to check); of_link: busbw / link's busbw\n");
      printf("%12s  %-20s %12s %10s %10s %8s %6s %6s%s\n", "bytes", "algo", "time_us",
             "algbw_GB/s", "busbw_GB/s", "vs_mpi", "iters", "cpu",
             o.link ? " of_link" : "");
    }
    fflush(stdout);
  }
  gs_algo algos[GS_ALGO_COUNT + 3];
  int nalgo = row_algos(&o, b.comm, algos);
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes;) {
    size_t per = bytes / unit;
    b.count = per;
    size_t total_elems = per * (unit / es);
    b.in_elems = o.op == OP_REDUCE_SCATTER || is_a2a(o.op) ? per * (size_t)p : per;
    b.out_elems = o.op == OP_ALLGATHER || is_a2a(o.op) ? per * (size_t)p : per;
    b.bytes = total_elems * es;
    prepare(&b);
    double t_mpi = 0, t_link = 0;
    for (int k = 0; k < nalgo; k++) {
      int iters = 0;
      double cpu = 0;
      double t = measure(&b, algos[k], &iters, &cpu);
      if (t < 0) {
        failures++;
        if (t == -1) goto out; /* an error, not a wrong value: stop */
        continue;
      }
      if (algos[k] == GS_ALGO_MPI) t_mpi = t;
      if (algos[k] == ALGO_LINK) t_link = t;
      double actual = (double)(total_elems * es);
      if (o.op == OP_ALLREDUCE && algos[k] != GS_ALGO_MPI && algos[k] != GS_ALGO_AUTO &&
          algos[k] != ALGO_LINK &&
          sw_n[algos[k]] < GS_COST_MAX_POINTS && t > 0) {
        sw_bytes[algos[k]][sw_n[algos[k]]] = actual;
        sw_secs[algos[k]][sw_n[algos[k]]++] = t;
      }
      double algbw = t > 0 ? actual / t * 1e-9 : 0;
      double busbw = algbw * bus_factor(o.op, p);
      double vs = t_mpi > 0 && t > 0 ? t_mpi / t : 0;
      double share = t_link > 0 && t > 0 ? t_link / t : 0;
      char name[40];
      if (algos[k] == GS_ALGO_AUTO && o.op == OP_ALLREDUCE)
        snprintf(name, sizeof name, "auto(%s)",
                 gs_algo_name(gs_comm_choose_allreduce(b.comm, (size_t)actual)));
      else
        snprintf(name, sizeof name, "%s", row_name(algos[k]));
      if (b.rank == 0) {
        if (o.json)
          print_row_json(&o, algos[k], name, actual, p, gs_comm_nodes(b.comm), t, algbw,
                         busbw, vs, iters, cpu, share);
        else if (algos[k] == ALGO_LINK)
          printf("%12.0f  %-20s %12.1f %10.4f %10.4f %8s %6d %5.0f%% %7s\n", actual, name,
                 t * 1e6, algbw, busbw, "-", iters, t > 0 ? 100 * cpu / t : 0.0, "100%");
        else if (o.link)
          printf("%12.0f  %-20s %12.1f %10.4f %10.4f %7.2fx %6d %5.0f%% %6.0f%%\n", actual,
                 name, t * 1e6, algbw, busbw, vs, iters, t > 0 ? 100 * cpu / t : 0.0,
                 100 * share);
        else
          printf("%12.0f  %-20s %12.1f %10.4f %10.4f %7.2fx %6d %5.0f%%\n", actual, name,
                 t * 1e6, algbw, busbw, vs, iters, t > 0 ? 100 * cpu / t : 0.0);
        fflush(stdout);
      }
    }
    if (bytes > o.max_bytes / (size_t)o.step) break;
    bytes *= (size_t)o.step;
  }
  if (o.cost_out && b.rank == 0 && failures == 0) {
    gs_cost_topo topo = {p, gs_comm_nodes(b.comm)};
    gs_status st2 = GS_OK;
    for (int a = 0; a < GS_ALGO_COUNT && st2 == GS_OK; a++)
      if (sw_n[a] >= 3)
        st2 = gs_cost_fit_algo(&saved, topo, (gs_algo)a, sw_bytes[a], sw_secs[a], sw_n[a]);
    if (st2 == GS_OK) st2 = gs_cost_save(o.cost_out, &saved, topo);
    if (st2 != GS_OK) {
      cli_rank_error(&cr, "--cost-out: %s", gs_last_error());
      rc = 1;
    }
  }
out:
  free(b.in);
  free(b.out);
  free(b.expect);
  free(b.counts);
  free(b.displs);
  if (failures && b.rank == 0)
    cli_fail("bench", "%d measurement(s) failed or gave wrong results", failures);
  return cli_rank_finish(&cr, rc ? rc : failures ? 1 : 0);
}
