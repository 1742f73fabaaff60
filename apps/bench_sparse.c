/*
 * gradsync bench --op sparse_allreduce: the sparse exchanges of a top-k
 * compressed gradient (sparse all-gather, gTop-k, HiTopKComm) against the
 * dense ring all-reduce of the same tensor, measured in the same run.
 *
 * Every rank's tensor is a deterministic function of (rank, index) with
 * roughly normal values, so any rank can rebuild any other rank's input.
 * Each iteration times, as the slowest rank sees it (barrier, call, maximum
 * over ranks): the dense ring all-reduce, and for each exchange the top-k
 * selection (gs_topk_f32) and, after a barrier, the exchange itself; the
 * median over the iterations is reported, total = selection + exchange. HiTopKComm selects inside (on node sums of
 * shards), so its time includes its selection.
 *
 * Every result is checked once after the timed calls:
 *   allgather  the dense result equals the dense all-reduce of every rank's
 *              decompressed contribution (its pairs scattered into zeros);
 *   gtopk      the global set equals gTop-k's definition, computed on every
 *              rank from all ranks' pairs (gathered) by a plain merge tree;
 *   hitopk     the result equals the sum over nodes of the top k_l of each
 *              shard of the node's sum, rebuilt from every rank's input.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gradsync.h"

#define TRY(call)                   \
  do {                              \
    gs_status st_ = (call);         \
    if (st_ != GS_OK) return st_;   \
  } while (0)

enum { COMM_ALLGATHER, COMM_GTOPK, COMM_HITOPK, COMM_N };
static const char *const comm_names[COMM_N] = {"allgather", "gtopk", "hitopk"};

typedef struct {
  char spec[64];
  const char *method;   /* gs_topk_f32's: "exact" or "mstopk" */
  double density;
  int comm[COMM_N];     /* which exchanges to measure */
  size_t n;
  int iters, warmup, json;
} sparse_opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage: gradsync run -np N [--net RATE] [--per-node K] -- gradsync bench\n"
          "         --op sparse_allreduce --compress SPEC [options]\n"
          "\nMeasures a sparse exchange of top-k selected gradients against the\n"
          "dense ring all-reduce of the same tensor in the same run, and checks\n"
          "every result.\n\n"
          "  --compress SPEC   topk:D (exact top-k), mstopk:D (MSTopK) or gtopk:D\n"
          "                    (exact top-k, exchanged by gTop-k); D is the\n"
          "                    density, 0 < D <= 1\n"
          "  --comm NAME       allgather, gtopk, hitopk, or all (default: gtopk\n"
          "                    for gtopk:D, allgather otherwise)\n"
          "  --n N             elements of the tensor (default 25600000,\n"
          "                    ResNet-50's gradient)\n"
          "  --iters N         timed iterations (default 5)\n"
          "  --warmup N        untimed iterations first (default 1)\n"
          "  --json            one JSON object per line\n");
}

static int parse(int argc, char **argv, sparse_opts *o) {
  static const struct option longs[] = {
      {"op", required_argument, 0, 'o'},     {"compress", required_argument, 0, 'c'},
      {"comm", required_argument, 0, 'm'},   {"n", required_argument, 0, 'n'},
      {"iters", required_argument, 0, 'i'},  {"warmup", required_argument, 0, 'w'},
      {"json", no_argument, 0, 'j'},         {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  o->n = 25600000;
  o->iters = 5;
  o->warmup = 1;
  const char *comm = NULL;
  int c;
  cli_seen seen = {{0}};
  optind = 1;
  opterr = 0; /* unknown options get one line in the verbs' format */
  while ((c = getopt_long(argc, argv, "+:h", longs, NULL)) != -1) {
    if (c != '?' && c != ':' && cli_once("bench", &seen, c, longs)) return 2;
    switch (c) {
      case 'o':
        if (strcmp(optarg, "sparse_allreduce") != 0) {
          cli_error("bench", "--op %s: this path measures sparse_allreduce", optarg);
          return 2;
        }
        break;
      case 'c': {
        const char *colon = strchr(optarg, ':');
        size_t kind = colon ? (size_t)(colon - optarg) : 0;
        int known = colon && ((kind == 4 && strncmp(optarg, "topk", 4) == 0) ||
                              (kind == 6 && strncmp(optarg, "mstopk", 6) == 0) ||
                              (kind == 5 && strncmp(optarg, "gtopk", 5) == 0));
        if (!known || cli_parse_double(colon + 1, 0, 1, &o->density) ||
            o->density <= 0 || strlen(optarg) >= sizeof o->spec) {
          cli_error("bench", "--compress '%s': expected topk:D, mstopk:D or "
                    "gtopk:D with a density 0 < D <= 1", optarg);
          return 2;
        }
        snprintf(o->spec, sizeof o->spec, "%s", optarg);
        o->method = kind == 6 ? "mstopk" : "exact";
        break;
      }
      case 'm': comm = optarg; break;
      case 'n': {
        long v;
        if (cli_parse_long(optarg, 1, 4294967295L, &v)) {
          cli_error("bench", "--n '%s' must be an integer from 1 to 2^32-1", optarg);
          return 2;
        }
        o->n = (size_t)v;
        break;
      }
      case 'i':
      case 'w':
        if (cli_parse_int(optarg, c == 'i' ? 1 : 0, 100000,
                          c == 'i' ? &o->iters : &o->warmup)) {
          cli_error("bench", "--%s '%s' must be an integer from %d to 100000",
                    c == 'i' ? "iters" : "warmup", optarg, c == 'i' ? 1 : 0);
          return 2;
        }
        break;
      case 'j': o->json = 1; break;
      case 'h': usage(stdout); return 1;
      default: return cli_getopt_error("bench", c, argv, longs);
    }
  }
  if (optind < argc) {
    cli_error("bench", "unexpected argument '%s'", argv[optind]);
    return 2;
  }
  if (o->spec[0] == '\0') {
    cli_error("bench", "--op sparse_allreduce needs --compress SPEC (topk:D, "
              "mstopk:D or gtopk:D)");
    return 2;
  }
  if (comm == NULL) {
    o->comm[strncmp(o->spec, "gtopk", 5) == 0 ? COMM_GTOPK : COMM_ALLGATHER] = 1;
  } else if (strcmp(comm, "all") == 0) {
    for (int i = 0; i < COMM_N; i++) o->comm[i] = 1;
  } else {
    int found = 0;
    for (int i = 0; i < COMM_N; i++)
      if (strcmp(comm, comm_names[i]) == 0) o->comm[i] = found = 1;
    if (!found) {
      cli_error("bench", "unknown --comm '%s' (allgather, gtopk, hitopk, all)", comm);
      return 2;
    }
  }
  return 0;
}

/* ---- Inputs ---------------------------------------------------------------- */

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* Rank r's element i: the sum of four uniforms of 16 bits (Irwin-Hall),
 * centred and scaled to unit variance: close to a standard normal. */
static float input_at(int r, size_t i) {
  uint64_t h = mix(((uint64_t)r << 40) ^ (i * 0x9e3779b97f4a7c15ULL) ^ 0x5eed);
  double s = (double)(h & 0xffff) + (double)((h >> 16) & 0xffff) +
             (double)((h >> 32) & 0xffff) + (double)(h >> 48);
  return (float)((s / 65536.0 - 2.0) * 1.7320508075688772);
}

static void fill_input(int r, float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = input_at(r, i);
}

/* ---- Timing ------------------------------------------------------------------ */

static double slowest(gs_comm *comm, double t) {
  gs_allreduce(comm, GS_IN_PLACE, &t, 1, GS_F64, GS_MAX, GS_ALGO_MPI);
  return t;
}


/* ---- gTop-k's definition, for the check ------------------------------------- */

typedef struct {
  uint32_t idx;
  float val;
} pv;

static int by_index(const void *a, const void *b) {
  uint32_t x = ((const pv *)a)->idx, y = ((const pv *)b)->idx;
  return (x > y) - (x < y);
}

static int by_rank(const void *a, const void *b) {
  float x = fabsf(((const pv *)a)->val), y = fabsf(((const pv *)b)->val);
  if (x != y) return x > y ? -1 : 1;
  return by_index(a, b);
}

/* merge(A, B): union by index (A's value + B's where both), the top k by
 * magnitude with ties to the smaller index, sorted by index. */
static size_t ref_merge(const pv *a, size_t na, const pv *b, size_t nb, size_t k,
                        pv *out, pv *tmp) {
  size_t i = 0, j = 0, m = 0;
  while (i < na || j < nb) {
    if (j >= nb || (i < na && a[i].idx < b[j].idx)) tmp[m++] = a[i++];
    else if (i >= na || b[j].idx < a[i].idx) tmp[m++] = b[j++];
    else {
      tmp[m] = a[i++];
      tmp[m++].val += b[j++].val;
    }
  }
  if (m > k) {
    qsort(tmp, m, sizeof(pv), by_rank);
    m = k;
    qsort(tmp, m, sizeof(pv), by_index);
  }
  memcpy(out, tmp, m * sizeof(pv));
  return m;
}

/* gTop-k over p ranks' sets (each sorted by index, at most k): the first
 * 2(p-q) ranks fold pairwise into the odd one, then recursive doubling over
 * the q-rank core. Returns the size of the final set, left in set[core 0]. */
static size_t ref_gtopk(pv **set, size_t *m, int p, size_t k, int *root) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  int rem = p - q;
  pv *tmp = malloc((2 * k + 1) * sizeof(pv));
  pv *nxt = malloc((size_t)q * (k + 1) * sizeof(pv));
  size_t *nm = malloc((size_t)q * sizeof(size_t));
  int *core = malloc((size_t)q * sizeof(int));
  for (int j = 0; j < rem; j++)
    m[2 * j + 1] = ref_merge(set[2 * j + 1], m[2 * j + 1], set[2 * j], m[2 * j],
                             k, set[2 * j + 1], tmp);
  for (int j = 0; j < q; j++) core[j] = j < rem ? 2 * j + 1 : j + rem;
  for (int mask = 1; mask < q; mask <<= 1) {
    for (int j = 0; j < q; j++) {
      int a = core[j], b = core[j ^ mask];
      nm[j] = ref_merge(set[a], m[a], set[b], m[b], k, nxt + (size_t)j * (k + 1), tmp);
    }
    for (int j = 0; j < q; j++) {
      memcpy(set[core[j]], nxt + (size_t)j * (k + 1), nm[j] * sizeof(pv));
      m[core[j]] = nm[j];
    }
  }
  *root = core[0];
  size_t res = m[core[0]];
  free(tmp);
  free(nxt);
  free(nm);
  free(core);
  return res;
}

/* ---- One exchange ------------------------------------------------------------ */

typedef struct {
  cli_rank *r;
  gs_comm *comm;
  const sparse_opts *o;
  int rank, size, nodes, local;
  size_t n, k;
  float *x, *out, *work;
  uint32_t *idx, *oi;
  float *val, *ov;
  uint8_t *kept;
  size_t got;
} ctx;

static gs_status select_pairs(ctx *c) {
  TRY(gs_topk_f32(c->x, c->n, c->k, c->o->method, c->idx));
  for (size_t i = 0; i < c->k; i++) c->val[i] = c->x[c->idx[i]];
  return GS_OK;
}

/* One timed call of exchange `which`: *sel_s and *xchg_s, slowest rank. */
static gs_status run_once(ctx *c, int which, double *sel_s, double *xchg_s) {
  TRY(gs_barrier(c->comm, GS_ALGO_AUTO));
  double t0 = gs_now();
  if (which != COMM_HITOPK) TRY(select_pairs(c));
  double sel = gs_now() - t0;
  /* The exchange starts together on every rank: otherwise the faster
   * selectors' exchange time would include waiting for the slowest. */
  if (which != COMM_HITOPK) TRY(gs_barrier(c->comm, GS_ALGO_AUTO));
  double t1 = gs_now();
  switch (which) {
    case COMM_ALLGATHER:
      TRY(gs_sparse_allreduce(c->comm, c->idx, c->val, c->k, c->n, GS_F32,
                                      c->out, GS_SPARSE_ALLGATHER));
      break;
    case COMM_GTOPK:
      TRY(gs_gtopk(c->comm, c->idx, c->val, c->k, c->k, c->n, c->oi,
                           c->ov, &c->got, c->kept));
      break;
    default:
      TRY(gs_hitopk(c->comm, c->x, c->out, c->n, c->k, gs_topk_f32,
                            c->o->method, GS_SPARSE_HITOPK));
      break;
  }
  double t2 = gs_now();
  *sel_s = slowest(c->comm, sel);
  *xchg_s = slowest(c->comm, t2 - t1);
  return GS_OK;
}

static double dense_once(ctx *c) {
  memcpy(c->work, c->x, c->n * sizeof(float));
  if (gs_barrier(c->comm, GS_ALGO_AUTO) != GS_OK) return -1;
  double t0 = gs_now();
  if (gs_allreduce(c->comm, GS_IN_PLACE, c->work, c->n, GS_F32, GS_SUM,
                   GS_ALGO_RING) != GS_OK)
    return -1;
  return slowest(c->comm, gs_now() - t0);
}

/* Relative difference above which two sums of the same terms in different
 * orders are taken to differ (f32, a few terms). */
#define CHECK_TOL 1e-5

static size_t mismatches(const float *got, const float *want, size_t n,
                         size_t *first) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - (double)want[i]);
    if (d > CHECK_TOL * (1.0 + fabs((double)want[i]))) {
      if (bad++ == 0) *first = i;
    }
  }
  return bad;
}

/* Checks the result of the last call; returns the number of wrong entries
 * on this rank (0: right) or -1 on an error. */
static long verify(ctx *c, int which) {
  size_t first = 0, bad = 0;
  if (which == COMM_ALLGATHER) {
    /* The sum of the decompressed contributions, by the dense all-reduce. */
    memset(c->work, 0, c->n * sizeof(float));
    for (size_t i = 0; i < c->k; i++) c->work[c->idx[i]] += c->val[i];
    if (gs_allreduce(c->comm, GS_IN_PLACE, c->work, c->n, GS_F32, GS_SUM,
                     GS_ALGO_RING) != GS_OK)
      return -1;
    bad = mismatches(c->out, c->work, c->n, &first);
  } else if (which == COMM_GTOPK) {
    int p = c->size;
    size_t cap = c->k * (size_t)p;
    uint32_t *ai = malloc((cap + 1) * sizeof(uint32_t));
    float *av = malloc((cap + 1) * sizeof(float));
    size_t *counts = malloc((size_t)p * sizeof(size_t));
    pv **set = malloc((size_t)p * sizeof(pv *));
    size_t *m = malloc((size_t)p * sizeof(size_t));
    if (!ai || !av || !counts || !set || !m) return -1;
    if (gs_sparse_allgatherv(c->comm, c->idx, c->val, c->k, c->n, GS_F32, ai, av,
                             cap, counts) != GS_OK)
      return -1;
    size_t at = 0;
    for (int r = 0; r < p; r++) {
      set[r] = malloc((c->k + 1) * sizeof(pv));
      for (size_t i = 0; i < counts[r]; i++) set[r][i] = (pv){ai[at + i], av[at + i]};
      at += counts[r];
      qsort(set[r], counts[r], sizeof(pv), by_index);
      m[r] = counts[r];
    }
    int root;
    size_t want = ref_gtopk(set, m, p, c->k, &root);
    if (want != c->got) bad = 1;
    for (size_t i = 0; i < want && i < c->got; i++)
      if (set[root][i].idx != c->oi[i] || set[root][i].val != c->ov[i]) {
        if (bad++ == 0) first = i;
      }
    /* kept[i]: this rank's value i is part of the global sum (not "its
     * index is in the set": a value dropped by one merge whose index a later
     * merge takes back with other ranks' values is not kept). So a kept
     * value's index is in the set, and each of the set's values is the sum
     * of the kept values at its index (until 2026-12-07 the check was the
     * old definition, and failed a right result on 3 or more ranks). */
    memset(c->work, 0, c->n * sizeof(float));
    for (size_t i = 0; i < c->k; i++) {
      size_t lo = 0, hi = c->got;
      while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->oi[mid] < c->idx[i]) lo = mid + 1;
        else hi = mid;
      }
      int in = lo < c->got && c->oi[lo] == c->idx[i];
      if (c->kept[i] && !in && bad++ == 0) first = c->idx[i];
      if (c->kept[i]) c->work[c->idx[i]] += c->val[i];
    }
    if (gs_allreduce(c->comm, GS_IN_PLACE, c->work, c->n, GS_F32, GS_SUM,
                     GS_ALGO_RING) != GS_OK)
      return -1;
    for (size_t j = 0; j < c->got; j++) {
      float w = c->work[c->oi[j]], o = c->ov[j];
      if (fabsf(w - o) > 1e-5f * (fabsf(o) + 1.0f) && bad++ == 0) first = c->oi[j];
    }
    for (int r = 0; r < p; r++) free(set[r]);
    free(set);
    free(m);
    free(ai);
    free(av);
    free(counts);
  } else {
    /* Node sums from every rank's input, then each shard's top k_l. */
    int p = c->size, L = c->local, me = gs_comm_node(c->comm);
    int *node = malloc((size_t)p * sizeof(int));
    if (node == NULL ||
        gs_allgather(c->comm, &me, node, 1, GS_I32, GS_ALGO_AUTO) != GS_OK)
      return -1;
    float *ref = calloc(c->n, sizeof(float)), *ns = c->work;
    float *tmp = malloc(c->n * sizeof(float));
    uint32_t *sel = malloc((c->n / (size_t)L + 2) * sizeof(uint32_t));
    if (!ref || !tmp || !sel) return -1;
    for (int nd = 0; nd < c->nodes; nd++) {
      int first_r = 1;
      for (int r = 0; r < p; r++) {
        if (node[r] != nd) continue;
        if (first_r) {
          fill_input(r, ns, c->n);
          first_r = 0;
        } else {
          fill_input(r, tmp, c->n);
          for (size_t i = 0; i < c->n; i++) ns[i] += tmp[i];
        }
      }
      size_t q = c->n / (size_t)L, rm = c->n % (size_t)L;
      for (int l = 0; l < L; l++) {
        size_t off = (size_t)l * q + ((size_t)l < rm ? (size_t)l : rm);
        size_t len = q + ((size_t)l < rm ? 1 : 0);
        double v = len ? ceil((double)c->k * (double)len / (double)c->n) : 0;
        size_t kl = v >= (double)len ? len : (size_t)v;
        if (kl && gs_topk_f32(ns + off, len, kl, c->o->method, sel) != GS_OK) return -1;
        for (size_t j = 0; j < kl; j++) ref[off + sel[j]] += ns[off + sel[j]];
      }
    }
    bad = mismatches(c->out, ref, c->n, &first);
    free(ref);
    free(tmp);
    free(sel);
    free(node);
  }
  if (bad)
    cli_rank_error(c->r, "sparse_allreduce --comm %s: %zu wrong entries, the first "
                   "at %zu", comm_names[which], bad, first);
  return (long)bad;
}

int cmd_bench_sparse(int argc, char **argv) {
  sparse_opts o;
  /* The options are every rank's alike: rank 0 alone says what is wrong
   * (each rank said it until 2026-12-06). */
  cli_argv_errors(1);
  int rc = parse(argc, argv, &o);
  cli_argv_errors(0);
  if (rc == 1) return 0;
  if (rc != 0 && !cli_under_launcher()) return rc; /* no other rank to tell */
  cli_rank cr;
  if (cli_rank_init(&cr, "bench", &argc, &argv)) return rc ? rc : 1;
  rc = cli_rank_connect(&cr, 0, rc, "bad options");
  if (rc) return rc;
  ctx c = {.r = &cr, .comm = cr.comm, .o = &o, .rank = cr.rank, .size = cr.size,
           .n = o.n};
  c.nodes = gs_comm_nodes(c.comm);
  c.local = gs_comm_local_size(c.comm);
  c.k = (size_t)ceil(o.density * (double)o.n);
  if (c.k > c.n) c.k = c.n;
  c.x = malloc(c.n * sizeof(float));
  c.out = malloc(c.n * sizeof(float));
  c.work = malloc(c.n * sizeof(float));
  c.idx = malloc((c.k + 1) * sizeof(uint32_t));
  c.oi = malloc((c.k + 1) * sizeof(uint32_t));
  c.val = malloc((c.k + 1) * sizeof(float));
  c.ov = malloc((c.k + 1) * sizeof(float));
  c.kept = malloc(c.k + 1);
  gs_status st = GS_OK;
  if (!c.x || !c.out || !c.work || !c.idx || !c.oi || !c.val || !c.ov || !c.kept)
    st = gs_error(GS_ERR_NOMEM, "cannot allocate buffers for n = %zu", c.n);
  else
    fill_input(c.rank, c.x, c.n);
  if (cli_agree_status(&cr, st)) {
    rc = 1;
    goto out;
  }
  if (c.rank == 0) {
    if (o.json) {
      cli_print_env_json(stdout);
    } else {
      printf("# gradsync bench: sparse_allreduce, %s (k = %zu of n = %zu), %d ranks "
             "on %d node(s), node-local steps by %s\n", o.spec, c.k, c.n, c.size,
             c.nodes, gs_comm_shared_memory(c.comm) ? "shared memory" : "messages");
      printf("# times: median over %d iterations of the slowest rank; select: "
             "gs_topk_f32 %s; vs dense: dense ring all-reduce time / this time\n",
             o.iters, o.method);
      printf("%-10s %12s %12s %12s %12s %10s %10s %8s\n", "comm", "dense_ms",
             "select_ms", "exchange_ms", "total_ms", "x_vs_dense", "vs_dense",
             "checked");
    }
    fflush(stdout);
  }
  double *dense = malloc(sizeof(double) * (size_t)(o.iters + o.warmup));
  double *sel = malloc(sizeof(double) * (size_t)o.iters);
  double *xch = malloc(sizeof(double) * (size_t)o.iters);
  double *tot = malloc(sizeof(double) * (size_t)o.iters);
  double total_by[COMM_N] = {0};
  for (int which = 0; which < COMM_N && rc == 0; which++) {
    if (!o.comm[which]) continue;
    if (which == COMM_HITOPK) {
      int uni = c.local, lo = uni, hi = uni;
      gs_allreduce(c.comm, GS_IN_PLACE, &lo, 1, GS_I32, GS_MIN, GS_ALGO_MPI);
      gs_allreduce(c.comm, GS_IN_PLACE, &hi, 1, GS_I32, GS_MAX, GS_ALGO_MPI);
      if (lo != hi) {
        if (c.rank == 0)
          cli_rank_error(&cr, "--comm hitopk needs the same number of ranks on "
                         "every node (gradsync run --per-node K); skipped");
        continue;
      }
    }
    /* Dense and sparse alternate, so that both see the same machine. */
    int nd = 0;
    for (int it = 0; it < o.warmup + o.iters && rc == 0; it++) {
      double d = dense_once(&c), s, x;
      if (d < 0 || run_once(&c, which, &s, &x) != GS_OK) {
        cli_rank_error(&cr, "sparse_allreduce --comm %s failed: %s",
                       comm_names[which], gs_last_error());
        rc = 1;
        break;
      }
      if (it < o.warmup) continue;
      dense[nd++] = d;
      sel[it - o.warmup] = s;
      xch[it - o.warmup] = x;
      tot[it - o.warmup] = s + x;
    }
    if (rc) break;
    long bad = verify(&c, which);
    if (cli_agree(&cr, bad != 0, "wrong result")) {
      rc = 1;
      break;
    }
    double md = cli_median(dense, (size_t)nd), ms = cli_median(sel, (size_t)o.iters),
           mx = cli_median(xch, (size_t)o.iters), mt = cli_median(tot, (size_t)o.iters);
    total_by[which] = mt;
    if (c.rank == 0) {
      if (o.json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "op", "sparse_allreduce");
        cJSON_AddStringToObject(j, "comm", comm_names[which]);
        cJSON_AddStringToObject(j, "compress", o.spec);
        cJSON_AddStringToObject(j, "select", o.method);
        cJSON_AddNumberToObject(j, "n", (double)c.n);
        cJSON_AddNumberToObject(j, "k", (double)c.k);
        cJSON_AddNumberToObject(j, "ranks", c.size);
        cJSON_AddNumberToObject(j, "nodes", c.nodes);
        cJSON_AddStringToObject(j, "node_local",
                                gs_comm_shared_memory(c.comm) ? "shm" : "p2p");
        cJSON_AddNumberToObject(j, "iters", o.iters);
        cli_json_add(j, "dense_ring_s", md, "%.6g");
        if (which == COMM_HITOPK) cJSON_AddNullToObject(j, "select_s");
        else cli_json_add(j, "select_s", ms, "%.6g");
        cli_json_add(j, "exchange_s", mx, "%.6g");
        cli_json_add(j, "total_s", mt, "%.6g");
        cli_json_add(j, "exchange_speedup_vs_dense", md / mx, "%.4g");
        cli_json_add(j, "total_speedup_vs_dense", md / mt, "%.4g");
        if (which == COMM_HITOPK && total_by[COMM_ALLGATHER] > 0)
          cli_json_add(j, "speedup_vs_allgather", total_by[COMM_ALLGATHER] / mt, "%.4g");
        cJSON_AddBoolToObject(j, "checked", 1);
        cli_print_json(stdout, j);
      } else {
        char sel_ms[32];
        if (which == COMM_HITOPK) snprintf(sel_ms, sizeof sel_ms, "(inside)");
        else snprintf(sel_ms, sizeof sel_ms, "%.2f", ms * 1e3);
        printf("%-10s %12.2f %12s %12.2f %12.2f %9.1fx %9.1fx %8s\n",
               comm_names[which], md * 1e3, sel_ms, mx * 1e3, mt * 1e3, md / mx,
               md / mt, "ok");
        if (which == COMM_HITOPK && total_by[COMM_ALLGATHER] > 0)
          printf("# hitopk vs flat allgather (selection + exchange): %.2fx\n",
                 total_by[COMM_ALLGATHER] / mt);
      }
      fflush(stdout);
    }
  }
  free(dense);
  free(sel);
  free(xch);
  free(tot);
out:
  free(c.x);
  free(c.out);
  free(c.work);
  free(c.idx);
  free(c.oi);
  free(c.val);
  free(c.ov);
  free(c.kept);
  return cli_rank_finish(&cr, rc);
}
