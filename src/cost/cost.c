/*
 * The alpha-beta-gamma cost model of collective algorithms.
 *
 * Notation (Thakur, Rabenseifner & Gropp, IJHPCA 2005, Sec. 2): a message of
 * n bytes costs alpha + n*beta; reducing n bytes costs n*gamma; p ranks on N
 * nodes of L = p/N ranks. lg is the base-2 logarithm rounded up. Every
 * formula below is linear in each parameter, which the calibration relies on.
 */
#include <ctype.h>
#include <stdio.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gradsync/cost.h"
#include "gs_internal.h"

static int floor_pow2(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

static int lg_floor(int p) {
  int l = 0;
  while ((1 << (l + 1)) <= p) l++;
  return l;
}

/* Ranks left over when p is not a power of two; recursive doubling and
 * Rabenseifner fold them into a power-of-two core before the exchange and
 * unfold them after it, which costs one full-vector message each way. */
static double fold_cost(const gs_cost_params *c, int p, double n, int reduce) {
  if (p == floor_pow2(p)) return 0.0;
  return 2.0 * (c->alpha + n * c->beta) + (reduce ? n * c->gamma : 0.0);
}

/* Ring allreduce: a reduce-scatter and an allgather of p-1 steps each.
 * 2(p-1)a + 2(p-1)/p n b + (p-1)/p n g. */
static double ring_allreduce(const gs_cost_params *c, int p, double n) {
  double f = (double)(p - 1) / p;
  return 2.0 * (p - 1) * c->alpha + 2.0 * f * n * c->beta + f * n * c->gamma;
}

/* The exchanges of recursive doubling and Rabenseifner pair rank r with
 * r ^ mask. On N nodes of L ranks each (consecutive ranks on a node, as
 * `gradsync run` and Open MPI's by-slot mapping place them), the lg L
 * exchanges with mask < L stay inside a node (alpha_local, beta_local) and
 * the other lg(p/L) cross it with all L of the node's ranks sending at
 * once through its one link: each such step moves L times a rank's bytes
 * through the link. Until 2026-12-07 every step was priced as if each rank
 * had a link of its own, which made Rabenseifner look fastest on 64 ranks
 * of 8 a node (where the two-level algorithm is). L is 1 with one rank a
 * node, and with every rank on one node (whose links the caller gives:
 * links_of); a count of ranks per node that is not a power of two is
 * priced as if its lg_floor(L) smallest masks stayed inside it. */
typedef struct xsteps {
  int L, intra, cross; /* ranks sharing a link; exchanges inside, across nodes */
} xsteps;

static xsteps exchange_steps(gs_cost_topo t) {
  xsteps x = {1, 0, lg_floor(floor_pow2(t.ranks))};
  if (t.nodes > 1 && t.nodes < t.ranks) {
    x.L = t.ranks / t.nodes;
    x.intra = GS_MIN(lg_floor(x.L), x.cross);
    x.cross -= x.intra;
  }
  return x;
}

/* Recursive doubling: lg p exchanges of the whole vector.
 * lg p (a + n b + n g) [Thakur et al. Sec. 4.4]; on nodes of L ranks
 * lg L (a_l + n b_l) + lg(p/L) (a + L n b) + lg p n g. */
static double rd_allreduce(const gs_cost_params *c, gs_cost_topo t, double n) {
  int p = t.ranks, q = floor_pow2(p);
  xsteps x = exchange_steps(t);
  return x.cross * (c->alpha + x.L * n * c->beta) +
         x.intra * (c->alpha_local + n * c->beta_local) + lg_floor(q) * n * c->gamma +
         fold_cost(c, p, n, 1);
}

/* Rabenseifner: recursive-halving reduce-scatter + recursive-doubling
 * allgather. 2 lg p a + 2(p-1)/p n b + (p-1)/p n g [Thakur et al. Sec. 4.4].
 * The halving starts at the largest mask, so on nodes of L ranks the first
 * lg(p/L) steps (n/2, n/4, ... of each rank's bytes) cross nodes, L ranks
 * at a time: 2 lg(p/L) a + 2 L (1 - L/p) n b + 2 lg L a_l
 * + 2 (L/p - 1/p) n b_l + (p-1)/p n g. */
static double rab_allreduce(const gs_cost_params *c, gs_cost_topo t, double n) {
  int p = t.ranks, q = floor_pow2(p);
  xsteps x = exchange_steps(t);
  double f = (double)(q - 1) / q, kept = ldexp(1.0, -x.cross);
  return 2.0 * x.cross * c->alpha + 2.0 * x.L * (1.0 - kept) * n * c->beta +
         2.0 * x.intra * c->alpha_local + 2.0 * (kept - 1.0 / q) * n * c->beta_local +
         f * n * c->gamma + fold_cost(c, p, n, 1);
}

/* Two-level: node-local ring reduce-scatter, cross-node ring allreduce of
 * the local shard, node-local ring allgather. Each of a node's L ranks runs
 * its own cross-node ring on its shard of n/L bytes, all L at once; the
 * node's ranks share its one link, so the L shards, n bytes in all, cross
 * it: the rings cost one ring's latency, n bytes' transfer, and each rank
 * reduces only its shard (on its own core).
 * (L-1)a_l + (L-1)/L n b_l + (L-1)/L n g                  reduce-scatter
 * + 2(N-1)a + 2(N-1)/N n b + (N-1)/N (n/L) g              cross-node rings
 * + (L-1)a_l + (L-1)/L n b_l                              allgather
 * The cross-node step is the ring (not the best flat algorithm) so that the
 * formula stays affine in n, which calibration and T(M) = a + bM rely on.
 * With every rank on one node (N = 1) it is the node-local ring. */
static double hier_allreduce(const gs_cost_params *c, gs_cost_topo t, double n) {
  int nodes = t.nodes > 0 ? t.nodes : t.ranks;
  int local = t.ranks / nodes;
  if (local < 1) local = 1;
  double f = (double)(local - 1) / local;
  double intra = 2.0 * (local - 1) * c->alpha_local +
                 2.0 * f * n * c->beta_local + f * n * c->gamma;
  double fn = (double)(nodes - 1) / nodes;
  double cross = 2.0 * (nodes - 1) * c->alpha + 2.0 * fn * n * c->beta +
                 fn * (n / local) * c->gamma;
  return intra + cross;
}

/* A calibrated preset's constants of one algorithm on a cluster of `nodes`
 * nodes: interpolated linearly in the number of nodes between the two
 * calibrated sizes around it, the nearest one's outside them. The two-level
 * algorithm's steps between nodes are a ring's. */
static void calib_at(const gs_cost_params *c, int nodes, gs_algo algo, double *alpha,
                     double *beta, double *alpha_msg) {
  int k = (algo == GS_ALGO_HIER) ? GS_ALGO_RING : (int)algo;
  int n = GS_MIN(c->ncalib, GS_COST_MAX_CALIB), hi = 0;
  while (hi < n - 1 && c->calib[hi].nodes < nodes) hi++;
  int lo = hi > 0 && c->calib[hi].nodes > nodes ? hi - 1 : hi;
  double w = 0.0;
  if (lo != hi && nodes > c->calib[lo].nodes)
    w = (double)(nodes - c->calib[lo].nodes) / (c->calib[hi].nodes - c->calib[lo].nodes);
  *alpha = (1 - w) * c->calib[lo].alpha[k] + w * c->calib[hi].alpha[k];
  *beta = (1 - w) * c->calib[lo].beta[k] + w * c->calib[hi].beta[k];
  *alpha_msg = (1 - w) * c->calib[lo].alpha_msg + w * c->calib[hi].alpha_msg;
}

/* Every rank on one node: no byte crosses a node, and the flat algorithms'
 * steps are the node's (alpha_local, beta_local), not a network's. */
static int one_node(gs_cost_topo t) { return t.nodes == 1 && t.ranks > 1; }

/* The parameters of the links a flat algorithm's steps take: the node's
 * when every rank is on one node, else the network's. */
static gs_cost_params links_of(const gs_cost_params *c, gs_cost_topo t) {
  gs_cost_params e = *c;
  if (one_node(t)) {
    e.alpha = c->alpha_local;
    e.beta = c->beta_local;
  }
  return e;
}

/* The parameters an algorithm's formula is evaluated with: its own fit where
 * one was measured (on the topology it prices), else the node's with every
 * rank on one node, else a calibrated preset's constants for the cluster's
 * size. */
static gs_cost_params effective(const gs_cost_params *c, gs_cost_topo t, gs_algo algo) {
  gs_cost_params e = *c;
  if ((unsigned)algo < GS_ALGO_COUNT && c->fit[algo].beta > 0) {
    e.alpha = c->fit[algo].alpha;
    e.beta = c->fit[algo].beta;
  } else if (one_node(t)) {
    e = links_of(c, t);
  } else if ((unsigned)algo < GS_ALGO_COUNT && c->ncalib > 0) {
    double a, b, m;
    calib_at(c, t.nodes > 0 ? t.nodes : t.ranks, algo, &a, &b, &m);
    if (b > 0) {
      e.alpha = a;
      e.beta = b;
    }
    e.alpha_msg = m;
  }
  return e;
}

/* The formula of one allreduce algorithm with the parameters as given, or
 * -1 for an algorithm without one. */
static double formula(const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                      double bytes) {
  int p = t.ranks;
  switch (algo) {
    case GS_ALGO_RING: return p <= 1 ? 0.0 : ring_allreduce(c, p, bytes);
    case GS_ALGO_RD: return p <= 1 ? 0.0 : rd_allreduce(c, t, bytes);
    case GS_ALGO_RABENSEIFNER: return p <= 1 ? 0.0 : rab_allreduce(c, t, bytes);
    case GS_ALGO_HIER: return p <= 1 ? 0.0 : hier_allreduce(c, t, bytes);
    default: return -1.0;
  }
}

/* The formula of an allreduce algorithm with its effective parameters. */
static double model_allreduce(const gs_cost_params *craw, gs_cost_topo t,
                              gs_algo algo, double bytes) {
  if (algo == GS_ALGO_AUTO || algo == GS_ALGO_MPI) {
    double best;
    gs_cost_best_allreduce(craw, t, bytes, &best);
    return best;
  }
  if (formula(craw, t, algo, bytes) < 0) return -1.0;
  gs_cost_params ce = effective(craw, t, algo);
  return formula(&ce, t, algo, bytes);
}

/* Interpolating measurements, for the per-algorithm fits and for curves:
 * the segment of n >= 2 points sorted by x that holds v, i.e. the largest lo
 * in [0, n-2] with x[lo] <= v (0 when v < x[0]), by binary search (the
 * planner evaluates curves O(L^2) times), and the line on that segment. */
static int segment_of(const double *x, int n, double v) {
  int lo = 0, hi = n - 1;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    if (x[mid] <= v) lo = mid;
    else hi = mid;
  }
  return lo;
}

static double lerp_segment(const double *x, const double *y, int lo, double v) {
  if (x[lo + 1] <= x[lo]) return y[lo + 1];
  return y[lo] + (v - x[lo]) / (x[lo + 1] - x[lo]) * (y[lo + 1] - y[lo]);
}

/* Linear interpolation between an algorithm's measured points, or -1 when
 * `bytes` lies outside them. */
static double interpolate(const gs_cost_params *c, gs_algo algo, double bytes) {
  if ((unsigned)algo >= GS_ALGO_COUNT) return -1.0;
  int n = c->fit[algo].npoints;
  const double *x = c->fit[algo].bytes, *y = c->fit[algo].secs;
  if (n < 2 || bytes < x[0] || bytes > x[n - 1]) return -1.0;
  return lerp_segment(x, y, segment_of(x, n, bytes), bytes);
}

double gs_cost_allreduce(const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                         double bytes) {
  if (t.ranks > 1 && algo != GS_ALGO_AUTO && algo != GS_ALGO_MPI) {
    double v = interpolate(c, algo, bytes);
    if (v >= 0 && model_allreduce(c, t, algo, bytes) >= 0) return v;
  }
  return model_allreduce(c, t, algo, bytes);
}

/* The argmin of gs_cost_allreduce over the algorithms that apply, ties to
 * the first of `order`; *time_s its time. */
static gs_algo argmin_allreduce(const gs_cost_params *c, gs_cost_topo t, double bytes,
                                double *time_s) {
  static const gs_algo order[] = {GS_ALGO_RING, GS_ALGO_RABENSEIFNER,
                                  GS_ALGO_RD, GS_ALGO_HIER};
  gs_algo best = GS_ALGO_RING;
  double best_t = INFINITY;
  int multi_node_local = t.nodes > 1 && t.nodes < t.ranks;
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    /* The two-level algorithm only differs from a flat one when some node
     * holds several ranks and there are several nodes: on one node it is
     * the node-local ring, and the flat algorithms are priced on the
     * node's links (effective). */
    if (order[i] == GS_ALGO_HIER && !multi_node_local) continue;
    double v = gs_cost_allreduce(c, t, order[i], bytes);
    if (v < best_t) {
      best_t = v;
      best = order[i];
    }
  }
  *time_s = best_t;
  return best;
}

/* The ring unless another algorithm is predicted faster by more than
 * RING_MARGIN. The ring is pipelined (segments in flight, constant memory)
 * and degrades least when the ranks' cores are busy; the others send each
 * step's whole block. Where they move the same bytes (Rabenseifner's; all
 * on 2 ranks) their measured or fitted times differ from the ring's by
 * noise, and a job lives with its start-up draw: one launch on 4 nodes at
 * 100 Mbit/s drew Rabenseifner's from 4 MB (2-5% slower than the ring in
 * `gradsync bench`), and gradsync.torch's CNN and ResNet-18, whose
 * allreduces run beside the backward pass, trained at 0.75x and 0.84x
 * DDP's rate with it, 0.98x with the ring (bench/results/
 * torch_interleaved.md, 2026-12-07). Where latency rules (small messages:
 * log p steps against 2(p-1)) the others win by far more than the margin. */
#define RING_MARGIN 0.10

gs_algo gs_cost_best_allreduce(const gs_cost_params *c, gs_cost_topo t,
                               double bytes, double *time_s) {
  double best_t;
  gs_algo best = argmin_allreduce(c, t, bytes, &best_t);
  if (best != GS_ALGO_RING && t.ranks > 1) {
    double ring_t = gs_cost_allreduce(c, t, GS_ALGO_RING, bytes);
    if (ring_t >= 0 && best_t > (1 - RING_MARGIN) * ring_t) {
      best = GS_ALGO_RING;
      best_t = ring_t;
    }
  }
  if (time_s) *time_s = t.ranks <= 1 ? 0.0 : best_t;
  return best;
}

/* The constants of the ring's reduce-scatter and all-gather: the node's
 * with every rank on one node, a calibrated preset's ring (the same steps
 * on the same links as the ring all-reduce's two halves), else the shared
 * ones. */
static gs_cost_params ring_half(const gs_cost_params *c, gs_cost_topo t) {
  if (one_node(t)) return links_of(c, t);
  return c->ncalib > 0 ? effective(c, t, GS_ALGO_RING) : *c;
}

/* Ring reduce-scatter: (p-1)a + (p-1)/p n b + (p-1)/p n g. */
double gs_cost_reduce_scatter(const gs_cost_params *craw, gs_cost_topo t,
                              gs_algo algo, double bytes) {
  int p = t.ranks;
  if (algo != GS_ALGO_RING && algo != GS_ALGO_AUTO && algo != GS_ALGO_MPI)
    return -1.0;
  if (p <= 1) return 0.0;
  gs_cost_params c = ring_half(craw, t);
  double f = (double)(p - 1) / p;
  return (p - 1) * c.alpha + f * bytes * (c.beta + c.gamma);
}

/* Ring allgather: (p-1)a + (p-1)/p n b [Thakur et al. Sec. 4.1]. */
double gs_cost_allgather(const gs_cost_params *craw, gs_cost_topo t, gs_algo algo,
                         double bytes) {
  int p = t.ranks;
  if (algo != GS_ALGO_RING && algo != GS_ALGO_AUTO && algo != GS_ALGO_MPI)
    return -1.0;
  if (p <= 1) return 0.0;
  gs_cost_params c = ring_half(craw, t);
  return (p - 1) * c.alpha + (double)(p - 1) / p * bytes * c.beta;
}

/* Binomial: lg p (a + n b). Pipelined chain of s segments:
 * (p - 2 + s)(a + n/s b), minimised at s = sqrt((p-2) n b / a). */
double gs_cost_bcast(const gs_cost_params *craw, gs_cost_topo t, gs_algo algo,
                     double bytes) {
  int p = t.ranks;
  gs_cost_params links = links_of(craw, t);
  const gs_cost_params *c = &links;
  if (algo != GS_ALGO_BINOMIAL && algo != GS_ALGO_PIPELINE && algo != GS_ALGO_AUTO &&
      algo != GS_ALGO_MPI)
    return -1.0;
  if (p <= 1) return 0.0;
  int lg = lg_floor(p) + (p != floor_pow2(p));
  double binomial = lg * (c->alpha + bytes * c->beta);
  double s = c->alpha > 0 ? sqrt((p - 2) * bytes * c->beta / c->alpha) : 1.0;
  if (s < 1.0) s = 1.0;
  double chain = (p - 2 + s) * (c->alpha + bytes / s * c->beta);
  switch (algo) {
    case GS_ALGO_BINOMIAL: return binomial;
    case GS_ALGO_PIPELINE: return chain;
    case GS_ALGO_AUTO:
    case GS_ALGO_MPI: return GS_MIN(binomial, chain);
    default: return -1.0;
  }
}

/* Pairwise exchange: (p-1)a + (p-1)/p n b, n = bytes one rank sends. */
double gs_cost_alltoall(const gs_cost_params *craw, gs_cost_topo t, gs_algo algo,
                        double bytes) {
  int p = t.ranks;
  gs_cost_params links = links_of(craw, t);
  const gs_cost_params *c = &links;
  if (algo != GS_ALGO_PAIRWISE && algo != GS_ALGO_AUTO && algo != GS_ALGO_MPI)
    return -1.0;
  if (p <= 1) return 0.0;
  return (p - 1) * c->alpha + (double)(p - 1) / p * bytes * c->beta;
}

/* ---- Sparse collectives ------------------------------------------------------
 * The exchanges of sparsified gradients, evaluated with the ring's fitted
 * alpha and beta (the links the ring all-reduce, their dense alternative,
 * was measured on). Each begins with an all-gather of the ranks' sizes:
 * lg p latencies (recursive doubling of a few bytes). */

static double sparse_agree_cost(const gs_cost_params *c, int p) {
  return (lg_floor(p) + (p != floor_pow2(p))) * c->alpha;
}

double gs_cost_sparse_allgather(const gs_cost_params *craw, gs_cost_topo t,
                                double total_pairs, double pair_bytes) {
  int p = t.ranks;
  if (p <= 1) return 0.0;
  gs_cost_params c = effective(craw, t, GS_ALGO_RING);
  double bytes = total_pairs * pair_bytes;
  return sparse_agree_cost(&c, p) + (p - 1) * c.alpha +
         (double)(p - 1) / p * bytes * c.beta + bytes * c.gamma;
}

double gs_cost_gtopk(const gs_cost_params *craw, gs_cost_topo t, double k,
                     double pair_bytes) {
  int p = t.ranks;
  if (p <= 1) return 0.0;
  gs_cost_params c = effective(craw, t, GS_ALGO_RING);
  int q = floor_pow2(p);
  double msg = c.alpha + k * pair_bytes * c.beta;
  return sparse_agree_cost(&c, p) +
         lg_floor(q) * (msg + 2.0 * k * pair_bytes * c.gamma) +
         (q < p ? 2.0 * msg : 0.0);
}

double gs_cost_hitopk(const gs_cost_params *craw, gs_cost_topo t, double n,
                      double elem_bytes, double k, double pair_bytes) {
  int p = t.ranks;
  if (p <= 1) return 0.0;
  gs_cost_params c = effective(craw, t, GS_ALGO_RING);
  int nodes = t.nodes > 0 ? t.nodes : p;
  int local = p / nodes;
  if (local < 1) local = 1;
  double f = (double)(local - 1) / local, dense = n * elem_bytes;
  double pairs = nodes * k * pair_bytes; /* every shard's pairs of every node */
  double intra = 2.0 * (local - 1) * c.alpha_local +
                 f * dense * (c.beta_local + c.gamma) + f * pairs * c.beta_local;
  double inter = (nodes - 1) * c.alpha + (nodes - 1) * k * pair_bytes * c.beta +
                 pairs * c.gamma;
  return sparse_agree_cost(&c, p) + intra + inter;
}

double gs_cost_message(const gs_cost_params *c, gs_cost_topo t) {
  if (c == NULL || t.ranks <= 1) return 0.0;
  if (c->ncalib > 0) {
    double a, b, m;
    calib_at(c, t.nodes > 0 ? t.nodes : t.ranks, GS_ALGO_RING, &a, &b, &m);
    return m;
  }
  return c->alpha_msg;
}

void gs_cost_allreduce_linear(const gs_cost_params *c, gs_cost_topo t,
                              gs_algo algo, double *a, double *b) {
  /* AUTO's line: the formula of the fastest algorithm for large messages,
   * without the ring's margin (gs_cost_best_allreduce). The line stands for
   * every size, and small messages run the algorithms of fewer steps: of
   * the ones that move the same bytes, the one with the smaller latency
   * term is the closer (the ring's 2(p-1) steps priced 100GbIB's small
   * groups above a top-k coded at 5 ns an element, and the planner sent
   * them compressed; tests/xchg/test_cli_compress.sh). */
  if (algo == GS_ALGO_AUTO || algo == GS_ALGO_MPI) {
    double unused;
    algo = argmin_allreduce(c, t, 64.0 * 1024 * 1024, &unused);
  }
  /* Every formula is affine in the message size. */
  double t0 = model_allreduce(c, t, algo, 0.0);
  double t1 = model_allreduce(c, t, algo, 1e6);
  *a = t0;
  *b = (t1 - t0) / 1e6;
}

/* The one table of named networks, read by `gradsync run --net` (the rate it
 * shapes each emulated link to), `plan --net` and `simulate --net` (the
 * preset's cost). A name is a rate as tc writes it (100mbit, 1gbit, ...),
 * or one of the older fabric names, which are aliases of a rate; any other
 * rate takes the constants of the nearest named rate below it (or of the
 * slowest).
 *
 * 100mbit and 1gbit are the link `gradsync run --net` builds (TCP over a
 * veth shaped by tc tbf, the nodes sharing this host's cores) as gradsync's
 * engine meets it: per cluster size, each all-reduce algorithm's alpha (one
 * message step) and beta (a byte on a link), and the engine's cost per
 * message, from net_calib below; 100mbit (and rates between the two) take
 * 1gbit's with beta scaled by the rate, since framing and the per-message
 * work do not depend on it. The faster names keep their fabrics' published
 * latencies (alpha below) and move bytes at NET_EFFICIENCY of the rate:
 * beta = 8 / (NET_EFFICIENCY x rate), the share the emulated 1gbit link's
 * replays gave before it was calibrated per algorithm. */
#define NET_EFFICIENCY 0.85
static const struct {
  const char *name, *alias;
  double bps, alpha;
  int calibrated; /* the constants come from the emulated link */
} net_table[] = {
    {"100mbit", NULL, 100e6, 100e-6, 1}, {"1gbit", "1GbE", 1e9, 100e-6, 1},
    {"10gbit", "10GbE", 10e9, 25e-6, 0}, {"25gbit", "25GbE", 25e9, 15e-6, 0},
    {"100gbit", "100GbIB", 100e9, 2e-6, 0},
};
#define NET_TABLE_LEN (sizeof net_table / sizeof net_table[0])

/* The emulated 1gbit link as gradsync's engine meets it on this project's
 * 2-core AMD EPYC host, per cluster of `nodes` nodes (one rank each):
 * bench/results/net_calibrate.json, whose "clusters" these rows copy
 * (net_calibrate.md explains them), written at commit NET_CALIB_COMMIT by
 * bench/net_calib_refit.sh from the quiet committed measurements: alpha and
 * beta of the ring, recursive doubling and Rabenseifner all-reduces, the
 * medians of three rounds of bench's start-up fit (gs_cost_fit_algo over
 * each algorithm timed up to 64 MB, bench/link_share.sh), and the engine's
 * cost per message beyond its algorithm's steps (its queue, its progress
 * thread, packing; from the replays of 2026-11-28). bench/net_calibrate.sh
 * measures all of it anew on a quiet host (its run at load 25-31 is in
 * bench/results/net_calibrate_loaded/, not used). The nodes share the
 * host's two cores, so the 8-node cluster's steps cost more and its bytes
 * move slower: that is the link run builds here, not a property of
 * 1 Gbit/s Ethernet. tests/cost/test_net_calib.py fails when these rows and
 * the JSON disagree. */
#define NET_CALIB_COMMIT "0a5f596"
#define NET_CALIB_RATE 1e9
static const struct {
  int nodes;
  double alpha_msg;
  double ring_a, ring_b, rd_a, rd_b, rab_a, rab_b;
} net_calib[] = {
    {4, 0.000174, 0.000114, 8.61e-09, 0.000125, 8.95e-09, 8.34e-05, 8.91e-09},
    {8, 0.00101, 0.000197, 1.15e-08, 0.00029, 1.19e-08, 0.000218, 1.21e-08},
};
#define NET_CALIB_LEN (sizeof net_calib / sizeof net_calib[0])
#define NET_NAMES "100mbit, 1gbit, 10gbit, 25gbit, 100gbit (or any rate from 1kbit " \
                  "to 1tbit in bit, kbit, mbit, gbit, tbit), their aliases 1GbE, 10GbE, " \
                  "25GbE, 100GbIB, or shm"

/* A rate as tc reads it: decimal digits (and a point) and a unit, bit, kbit,
 * mbit, gbit or tbit, powers of 1000, from 1 kbit/s to 1 Tbit/s. */
static int parse_rate(const char *s, double *bps) {
  static const struct { const char *unit; double mult; } units[] = {
      {"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}};
  char *end;
  /* "1gbit", "1.5gbit", ".5gbit": the real numbers of docs/CLI.md. */
  if (!isdigit((unsigned char)*s) && !(s[0] == '.' && isdigit((unsigned char)s[1]))) return -1;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || !isfinite(v) || v <= 0) return -1;
  /* Decimal digits and a point only: strtod would also read "1e9" and hex. */
  if (strspn(s, "0123456789.") != (size_t)(end - s)) return -1;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcasecmp(end, units[i].unit) == 0) {
      *bps = v * units[i].mult;
      return *bps >= 1e3 && *bps <= 1e12 ? 0 : -1;
    }
  }
  return -1;
}

gs_status gs_net_rate(const char *name, double *bps) {
  if (name == NULL || bps == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "network rate: NULL argument");
  for (size_t i = 0; i < NET_TABLE_LEN; i++) {
    if (net_table[i].alias && strcasecmp(name, net_table[i].alias) == 0) {
      *bps = net_table[i].bps;
      return GS_OK;
    }
  }
  if (parse_rate(name, bps) == 0) return GS_OK;
  return gs_error(GS_ERR_INVALID_ARG, "unknown network '%s' (expected %s)", name, NET_NAMES);
}

/* The row of net_table whose constants a rate takes: the nearest named
 * rate at or below it, or the slowest. */
static size_t net_row(double bps) {
  size_t row = 0;
  for (size_t i = 0; i < NET_TABLE_LEN; i++)
    if (net_table[i].bps <= bps) row = i;
  return row;
}

/* Fills c with the calibrated constants of the emulated link, bytes at
 * `bps` (the calibration's rate scaled). */
static void preset_calibrated(gs_cost_params *c, double bps) {
  double scale = NET_CALIB_RATE / bps;
  c->ncalib = (int)GS_MIN(NET_CALIB_LEN, (size_t)GS_COST_MAX_CALIB);
  for (int i = 0; i < c->ncalib; i++) {
    c->calib[i].nodes = net_calib[i].nodes;
    c->calib[i].alpha_msg = net_calib[i].alpha_msg;
    c->calib[i].alpha[GS_ALGO_RING] = net_calib[i].ring_a;
    c->calib[i].beta[GS_ALGO_RING] = net_calib[i].ring_b * scale;
    c->calib[i].alpha[GS_ALGO_RD] = net_calib[i].rd_a;
    c->calib[i].beta[GS_ALGO_RD] = net_calib[i].rd_b * scale;
    c->calib[i].alpha[GS_ALGO_RABENSEIFNER] = net_calib[i].rab_a;
    c->calib[i].beta[GS_ALGO_RABENSEIFNER] = net_calib[i].rab_b * scale;
  }
  /* Whatever no algorithm's row prices (broadcast, all-to-all, parameter
   * servers) takes the smallest cluster's ring. */
  c->alpha = net_calib[0].ring_a;
  c->beta = net_calib[0].ring_b * scale;
}

gs_status gs_cost_preset(const char *name, gs_cost_params *out) {
  if (name == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "cost preset: NULL argument");
  /* gamma is a CPU's vectorised f32 sum (about 5 GB/s through memory); the
   * "shm" preset is for ranks on one host. */
  gs_cost_params c;
  memset(&c, 0, sizeof c); /* no fits, no measured points */
  c.alpha_local = 1e-6;
  c.beta_local = 1.0 / 5e9;
  c.gamma = 1.0 / 5e9;
  if (strcasecmp(name, "shm") == 0) {
    c.alpha = 1e-6;
    c.beta = 1.0 / 5e9;
  } else {
    double bps;
    GS_CHECK(gs_net_rate(name, &bps)); /* *out untouched on an error */
    size_t row = net_row(bps);
    if (net_table[row].calibrated) {
      preset_calibrated(&c, bps);
    } else {
      c.alpha = net_table[row].alpha;
      c.beta = 8.0 / (NET_EFFICIENCY * bps);
    }
  }
  *out = c;
  return GS_OK;
}

gs_status gs_net_describe(const char *name, char *buf, size_t n) {
  if (name == NULL || buf == NULL || n == 0)
    return gs_error(GS_ERR_INVALID_ARG, "network description: NULL argument");
  gs_cost_params c;
  GS_CHECK(gs_cost_preset(name, &c));
  if (strcasecmp(name, "shm") == 0) {
    snprintf(buf, n, "shm: ranks on one host, %.0f us a message, %.1f GB/s through memory",
             c.alpha * 1e6, 1e-9 / c.beta);
    return GS_OK;
  }
  double bps;
  GS_CHECK(gs_net_rate(name, &bps));
  size_t row = net_row(bps);
  if (!net_table[row].calibrated) {
    snprintf(buf, n, "%s: %g Gbit/s links; a message step costs %.0f us and its bytes move "
             "at %.0f%% of the line rate (b = %.3g ns/B), the %s fabric's published "
             "latency and the share of the rate the emulated 1gbit link gave before its "
             "per-algorithm calibration; reductions at %.0f GB/s",
             name, bps / 1e9, c.alpha * 1e6, NET_EFFICIENCY * 100, c.beta * 1e9,
             net_table[row].name, 1e-9 / c.gamma);
    return GS_OK;
  }
  /* One clause per calibrated cluster: each algorithm's step, the ring's
   * byte (and its share of the line rate), the engine's message. */
  char per[640];
  size_t used = 0;
  per[0] = '\0';
  for (int i = 0; i < c.ncalib && used < sizeof per; i++) {
    int w = snprintf(per + used, sizeof per - used,
                     "%son %d nodes a step costs %.0f us (ring), %.0f (rd), %.0f "
                     "(rabenseifner), a byte on a link %.3g ns (ring; %.0f%% of the rate), "
                     "%.3g (rd), %.3g (rabenseifner), the engine %.0f us a message",
                     i ? "; " : "", c.calib[i].nodes, c.calib[i].alpha[GS_ALGO_RING] * 1e6,
                     c.calib[i].alpha[GS_ALGO_RD] * 1e6,
                     c.calib[i].alpha[GS_ALGO_RABENSEIFNER] * 1e6,
                     c.calib[i].beta[GS_ALGO_RING] * 1e9,
                     800.0 / (c.calib[i].beta[GS_ALGO_RING] * bps),
                     c.calib[i].beta[GS_ALGO_RD] * 1e9,
                     c.calib[i].beta[GS_ALGO_RABENSEIFNER] * 1e9, c.calib[i].alpha_msg * 1e6);
    if (w < 0) break;
    used += (size_t)w;
  }
  char rate[64] = "";
  if (bps != NET_CALIB_RATE)
    snprintf(rate, sizeof rate, " (1gbit's, bytes scaled to the rate)");
  snprintf(buf, n, "%s: %g Gbit/s links as gradsync run --net builds them on one host, "
           "calibrated on that emulated link (bench/results/net_calibrate.md, at %.7s)%s: "
           "%s; other sizes interpolated, the nearest outside them; reductions at %.0f GB/s",
           name, bps / 1e9, NET_CALIB_COMMIT, rate, per, 1e-9 / c.gamma);
  return GS_OK;
}

gs_status gs_cost_fit_linear(const double *x, const double *y, size_t n,
                             double *a, double *b) {
  if (x == NULL || y == NULL || a == NULL || b == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "linear fit: NULL argument");
  if (n < 2)
    return gs_error(GS_ERR_INVALID_ARG, "linear fit: need 2 points, got %zu", n);
  double sx = 0, sy = 0;
  for (size_t i = 0; i < n; i++) {
    sx += x[i];
    sy += y[i];
  }
  double mx = sx / n, my = sy / n, sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; i++) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx <= 0)
    return gs_error(GS_ERR_INVALID_ARG, "linear fit: all %zu x values equal", n);
  *b = sxy / sxx;
  *a = my - *b * mx;
  return GS_OK;
}

/* ---- Measured cost curves -------------------------------------------- */

gs_status gs_cost_curve_affine(double a, double b, gs_cost_curve *out) {
  if (out == NULL) return gs_error(GS_ERR_INVALID_ARG, "cost curve: NULL output");
  if (!isfinite(a) || !isfinite(b) || a < 0 || b < 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "cost curve: a and b must be finite and >= 0 (a=%g, b=%g)", a, b);
  memset(out, 0, sizeof *out);
  out->a = a;
  out->b = b;
  return GS_OK;
}

typedef struct {
  double bytes, secs;
  int cls;
} curve_sample;

static int cmp_curve_sample(const void *pa, const void *pb) {
  const curve_sample *a = pa, *b = pb;
  if (a->cls != b->cls) return a->cls < b->cls ? -1 : 1;
  return (a->secs > b->secs) - (a->secs < b->secs);
}

gs_status gs_cost_curve_fit(const double *bytes, const double *secs, size_t n,
                            gs_cost_curve *out) {
  if ((n > 0 && (bytes == NULL || secs == NULL)) || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "cost curve fit: NULL argument");
  curve_sample *s = gs_malloc((n + 1) * sizeof *s);
  if (s == NULL) return GS_ERR_NOMEM;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(bytes[i]) && isfinite(secs[i]) && bytes[i] >= 1 && secs[i] > 0)
      s[m++] = (curve_sample){bytes[i], secs[i], (int)log2(bytes[i])};
  qsort(s, m, sizeof *s, cmp_curve_sample);
  /* One point per class: mean size, median time; w counts the classes
   * pooled into a point by the isotonic pass. */
  double x[GS_COST_CURVE_POINTS], y[GS_COST_CURVE_POINTS], w[GS_COST_CURVE_POINTS];
  int np = 0;
  for (size_t i = 0; i < m;) {
    size_t j = i;
    double sum = 0;
    while (j < m && s[j].cls == s[i].cls) sum += s[j++].bytes;
    if (np == GS_COST_CURVE_POINTS) { /* keep the largest classes */
      memmove(x, x + 1, (GS_COST_CURVE_POINTS - 1) * sizeof *x);
      memmove(y, y + 1, (GS_COST_CURVE_POINTS - 1) * sizeof *y);
      np--;
    }
    x[np] = sum / (double)(j - i);
    y[np] = s[i + (j - i) / 2].secs;
    np++;
    i = j;
  }
  gs_free(s);
  if (np < 2)
    return gs_error(GS_ERR_INVALID_ARG, "cost curve fit: samples of %d size "
                    "class(es), need 2", np);
  /* Pool adjacent violators: a block of consecutive classes slower than
   * the next one is merged with it into one block whose time is their mean;
   * every class keeps its size and takes its block's time. */
  double bsum[GS_COST_CURVE_POINTS], iy[GS_COST_CURVE_POINTS];
  int bstart[GS_COST_CURVE_POINTS], nb = 0;
  for (int i = 0; i < np; i++) {
    bsum[nb] = y[i];
    w[nb] = 1;
    bstart[nb] = i;
    nb++;
    while (nb > 1 && bsum[nb - 2] / w[nb - 2] > bsum[nb - 1] / w[nb - 1]) {
      bsum[nb - 2] += bsum[nb - 1];
      w[nb - 2] += w[nb - 1];
      nb--;
    }
  }
  for (int k = 0; k < nb; k++) {
    int end = k + 1 < nb ? bstart[k + 1] : np;
    for (int i = bstart[k]; i < end; i++) iy[i] = bsum[k] / w[k];
  }
  /* The line, as gs_cost_fit_algo fits the communicator's algorithms: b by
   * least squares over the larger half of the classes (where bandwidth
   * rules), a from the smallest class given b. A plain least-squares line
   * over every class lets a few slow large messages tilt it until a is 0,
   * and a planner that sees free messages sends hundreds (measured:
   * DenseNet-201 on 8 emulated nodes, optimal 1.34x slower than wfbp). */
  int first = np / 2;
  if (np - first < 2) first = np - 2;
  double a, b;
  GS_CHECK(gs_cost_fit_linear(x + first, iy + first, (size_t)(np - first), &a, &b));
  if (!(b > 0) || !isfinite(b))
    return gs_error(GS_ERR_INVALID_ARG, "cost curve fit: the time does not grow "
                    "with the size (slope %g s/B over %d classes)", b, np - first);
  a = iy[0] - b * x[0];
  memset(out, 0, sizeof *out);
  out->a = a > 0 ? a : 0.0;
  out->b = b;
  out->npoints = np;
  memcpy(out->bytes, x, (size_t)np * sizeof *x);
  memcpy(out->secs, iy, (size_t)np * sizeof *iy);
  return GS_OK;
}

/* The curve's time at v on segment lo (see segment_of), beyond the points
 * the line of slope b through the nearest one: both evaluations below end
 * here, so they agree bit for bit. */
static double curve_at(const gs_cost_curve *c, int lo, double v) {
  int n = c->npoints;
  double t;
  if (v <= c->bytes[0]) t = c->secs[0] - c->b * (c->bytes[0] - v);
  else if (v >= c->bytes[n - 1]) t = c->secs[n - 1] + c->b * (v - c->bytes[n - 1]);
  else t = lerp_segment(c->bytes, c->secs, lo, v);
  return t > 0 ? t : 0.0;
}

double gs_cost_curve_eval(const gs_cost_curve *c, double bytes) {
  int n = c->npoints;
  if (n <= 0) return c->a + c->b * bytes;
  return curve_at(c, n >= 2 ? segment_of(c->bytes, n, bytes) : 0, bytes);
}

double gs_cost_curve_eval_hint(const gs_cost_curve *c, double bytes, int *hint) {
  int n = c->npoints;
  if (n <= 0) return c->a + c->b * bytes;
  int lo = *hint;
  if (lo < 0) lo = 0;
  if (lo > n - 2) lo = n > 1 ? n - 2 : 0;
  while (lo > 0 && c->bytes[lo] > bytes) lo--;
  while (lo + 1 < n - 1 && c->bytes[lo + 1] <= bytes) lo++;
  *hint = lo;
  return curve_at(c, lo, bytes);
}

static gs_status fit_line(const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                          const double *bytes, const double *secs, size_t n,
                          double *alpha, double *beta);

/* The fitted alpha and beta are those of the links the formula's steps take
 * (links_of): the node's with every rank on one node. */
gs_status gs_cost_calibrate_allreduce(gs_cost_params *c, gs_cost_topo t,
                                      gs_algo algo, const double *bytes,
                                      const double *secs, size_t n) {
  if (c == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "calibrate: NULL argument");
  double alpha, beta;
  GS_CHECK(fit_line(c, t, algo, bytes, secs, n, &alpha, &beta));
  if (one_node(t) && algo != GS_ALGO_HIER) {
    c->alpha_local = alpha;
    c->beta_local = beta;
  } else {
    c->alpha = alpha;
    c->beta = beta;
  }
  /* The fitted line replaces a calibrated preset's rows: left in place,
   * they (not alpha and beta) would price every message. */
  c->ncalib = 0;
  return GS_OK;
}

/* Two regimes, fitted separately: beta by least squares over the larger
 * half of the sizes (where bandwidth dominates and token-bucket bursts or
 * TCP windows matter least), then alpha from the smallest size with that
 * beta's share removed. A single fit over all sizes lets many small,
 * burst-assisted points drag beta far below what large messages achieve. */
gs_status gs_cost_fit_algo(gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                           const double *bytes, const double *secs, size_t n) {
  if (c == NULL || bytes == NULL || secs == NULL || (unsigned)algo >= GS_ALGO_COUNT)
    return gs_error(GS_ERR_INVALID_ARG, "fit: bad parameters or algorithm");
  if (n < 3 || n > GS_COST_MAX_POINTS)
    return gs_error(GS_ERR_INVALID_ARG, "fit: need 3 to %d sizes, got %zu",
                    GS_COST_MAX_POINTS, n);
  size_t lo = 0, first_big = n / 2;
  for (size_t i = 1; i < n; i++)
    if (bytes[i] < bytes[lo]) lo = i;
  /* The points sorted by size: take the larger half by rank of size. */
  double bx[16], by[16];
  size_t nb = 0;
  for (size_t i = 0; i < n && nb < 16; i++) {
    size_t smaller = 0;
    for (size_t j = 0; j < n; j++) smaller += bytes[j] < bytes[i];
    if (smaller >= first_big) {
      bx[nb] = bytes[i];
      by[nb++] = secs[i];
    }
  }
  if (nb < 2) {
    bx[0] = bytes[lo];
    by[0] = secs[lo];
    nb = 1;
    for (size_t i = 0; i < n && nb < 2; i++)
      if (i != lo) {
        bx[nb] = bytes[i];
        by[nb++] = secs[i];
      }
  }
  gs_cost_params tmp = *c;
  double fitted_alpha;
  GS_CHECK(fit_line(&tmp, t, algo, bx, by, nb, &fitted_alpha, &tmp.beta));
  /* alpha from the smallest message, given the fitted beta. */
  gs_cost_params unit_a = {.alpha = 1}, no_alpha = tmp;
  no_alpha.alpha = 0;
  double coef_a = formula(&unit_a, t, algo, 0.0);
  double rest = formula(&no_alpha, t, algo, bytes[lo]);
  double alpha = coef_a > 0 ? (secs[lo] - rest) / coef_a : 0.0;
  c->fit[algo].alpha = GS_MAX(alpha, 0.0);
  c->fit[algo].beta = tmp.beta > 0 ? tmp.beta : 1e-15;
  /* Keep the points, sorted by size, for interpolation. */
  int np = 0;
  for (size_t i = 0; i < n && np < GS_COST_MAX_POINTS; i++) {
    int j = np++;
    while (j > 0 && c->fit[algo].bytes[j - 1] > bytes[i]) {
      c->fit[algo].bytes[j] = c->fit[algo].bytes[j - 1];
      c->fit[algo].secs[j] = c->fit[algo].secs[j - 1];
      j--;
    }
    c->fit[algo].bytes[j] = bytes[i];
    c->fit[algo].secs[j] = secs[i];
  }
  c->fit[algo].npoints = np;
  return GS_OK;
}

/* The alpha and beta of algo's formula (as given, before effective) that
 * fit the times, by least squares. */
static gs_status fit_line(const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                          const double *bytes, const double *secs, size_t n,
                          double *alpha, double *beta) {
  if (c == NULL || bytes == NULL || secs == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "calibrate: NULL argument");
  if (n < 2)
    return gs_error(GS_ERR_INVALID_ARG, "calibrate: need 2 points, got %zu", n);
  if (t.ranks < 2)
    return gs_error(GS_ERR_INVALID_ARG, "calibrate: needs 2 ranks or more");
  if (algo == GS_ALGO_AUTO || algo == GS_ALGO_MPI)
    return gs_error(GS_ERR_INVALID_ARG, "calibrate: name one algorithm, not %s "
                    "(the best one may change with the parameters)",
                    gs_algo_name(algo));
  /* T = A*alpha + (B*n)*beta + rest(n): the coefficients come from the same
   * formula evaluated with unit parameters, so no formula is restated here. */
  gs_cost_params unit_a = {.alpha = 1}, unit_b = {.beta = 1};
  gs_cost_params rest = *c;
  rest.alpha = 0;
  rest.beta = 0;
  rest.ncalib = 0; /* the constants fitted here, not a preset's */
  memset(rest.fit, 0, sizeof rest.fit);
  double coef_a = formula(&unit_a, t, algo, 0.0);
  if (coef_a < 0)
    return gs_error(GS_ERR_UNSUPPORTED, "calibrate: algorithm %s has no "
                    "allreduce cost", gs_algo_name(algo));
  double *x = gs_malloc(n * sizeof *x), *y = gs_malloc(n * sizeof *y);
  if (x == NULL || y == NULL) {
    gs_free(x);
    gs_free(y);
    return GS_ERR_NOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    x[i] = formula(&unit_b, t, algo, bytes[i]);
    y[i] = secs[i] - formula(&rest, t, algo, bytes[i]);
  }
  double fa, fb;
  gs_status st = gs_cost_fit_linear(x, y, n, &fa, &fb);
  gs_free(x);
  gs_free(y);
  GS_CHECK(st);
  *alpha = GS_MAX(fa / (coef_a > 0 ? coef_a : 1.0), 0.0);
  *beta = GS_MAX(fb, 0.0);
  return GS_OK;
}

/* ---- Saving and loading ---------------------------------------------------- */

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

gs_status gs_cost_save(const char *path, const gs_cost_params *c, gs_cost_topo t) {
  if (path == NULL || c == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "cost save: NULL argument");
  cJSON *root = cJSON_CreateObject();
  if (root == NULL) return gs_error(GS_ERR_NOMEM, "cost save: out of memory");
  cJSON_AddNumberToObject(root, "ranks", t.ranks);
  cJSON_AddNumberToObject(root, "nodes", t.nodes);
  cJSON_AddNumberToObject(root, "alpha", c->alpha);
  cJSON_AddNumberToObject(root, "beta", c->beta);
  cJSON_AddNumberToObject(root, "alpha_local", c->alpha_local);
  cJSON_AddNumberToObject(root, "beta_local", c->beta_local);
  cJSON_AddNumberToObject(root, "gamma", c->gamma);
  cJSON *fits = cJSON_AddObjectToObject(root, "fit");
  for (int a = 0; a < GS_ALGO_COUNT; a++) {
    if (c->fit[a].beta <= 0) continue;
    cJSON *f = cJSON_AddObjectToObject(fits, gs_algo_name((gs_algo)a));
    cJSON_AddNumberToObject(f, "alpha", c->fit[a].alpha);
    cJSON_AddNumberToObject(f, "beta", c->fit[a].beta);
    cJSON *pts = cJSON_AddArrayToObject(f, "points");
    for (int i = 0; i < c->fit[a].npoints; i++) {
      double pt[2] = {c->fit[a].bytes[i], c->fit[a].secs[i]};
      cJSON_AddItemToArray(pts, cJSON_CreateDoubleArray(pt, 2));
    }
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (text == NULL) return gs_error(GS_ERR_NOMEM, "cost save: out of memory");
  /* Written to a temporary file of this process and renamed, so a reader
   * never sees half, and two writers of one path (GRADSYNC_COST_CACHE)
   * leave one whole file. */
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  gs_status st = GS_OK;
  if (f == NULL) {
    st = gs_error(GS_ERR_IO, "cost save: cannot write %s: %s", tmp, strerror(errno));
  } else {
    int bad = fputs(text, f) < 0 || fputc('\n', f) == EOF;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
      st = gs_error(GS_ERR_IO, "cost save: cannot write %s: %s", path, strerror(errno));
      unlink(tmp);
    }
  }
  cJSON_free(text);
  return st;
}

/* A cost file holds a few numbers per algorithm (GS_COST_MAX_POINTS points
 * at most): a file above this size is not one, and is refused before it is
 * read rather than parsed at any size. */
#define COST_FILE_MAX_BYTES (1024 * 1024)
/* Sane bounds on what a cost file may say: times and per-byte costs are
 * seconds, sizes bytes. Bounded values keep every prediction finite (no
 * inf - inf in an interpolation). */
#define COST_MAX_SECONDS 1e6
#define COST_MAX_BYTES 4611686018427387904.0 /* 2^62 */

/* Reads the whole of a regular file of at most `max` bytes into a
 * NUL-terminated buffer (owned by the caller); text with a NUL byte inside
 * is refused, so that the parser sees the whole file. */
static gs_status cost_read_text(const char *path, size_t max, char **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return gs_error(GS_ERR_IO, "cost load: cannot open %s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(f);
    return gs_error(GS_ERR_IO, "cost load: %s is not a regular file", path);
  }
  if ((unsigned long long)sb.st_size > max) {
    fclose(f);
    return gs_error(GS_ERR_PARSE, "cost load: %s has %lld bytes, more than the "
                    "%zu a cost file may have", path, (long long)sb.st_size, max);
  }
  /* One byte more than the cap, to see a file that grew since fstat. */
  size_t cap = (size_t)sb.st_size + 1;
  char *buf = gs_malloc(cap + 1);
  if (buf == NULL) {
    fclose(f);
    return gs_error(GS_ERR_NOMEM, "cost load: %s: out of memory", path);
  }
  size_t n = fread(buf, 1, cap, f);
  int err = ferror(f);
  fclose(f);
  if (err) {
    gs_free(buf);
    return gs_error(GS_ERR_IO, "cost load: cannot read %s", path);
  }
  if (n == cap) {
    gs_free(buf);
    return gs_error(GS_ERR_IO, "cost load: %s changed while it was read", path);
  }
  buf[n] = '\0';
  size_t text_len = strlen(buf);
  if (text_len != n) {
    gs_free(buf);
    return gs_error(GS_ERR_PARSE, "cost load: %s: NUL byte at offset %zu: not "
                    "a JSON text file", path, text_len);
  }
  *out = buf;
  return GS_OK;
}

/* A number in [0, max]; "-0" reads as 0 so that a save gives it back. */
static gs_status json_number_in(const cJSON *obj, const char *key, double max,
                                const char *path, const char *where, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 ||
      v->valuedouble > max)
    return gs_error(GS_ERR_PARSE, "%s: field '%s%s' is missing or not a number "
                    "in [0, %g]", path, where, key, max);
  *out = v->valuedouble + 0.0;
  return GS_OK;
}

static gs_status json_number(const cJSON *obj, const char *key, const char *path,
                             double *out) {
  return json_number_in(obj, key, COST_MAX_SECONDS, path, "", out);
}

/* ranks or nodes: a whole number in [1, INT_MAX]. */
static gs_status json_count(const cJSON *obj, const char *key, const char *path,
                            int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 1 && v->valuedouble <= INT_MAX) ||
      v->valuedouble != floor(v->valuedouble))
    return gs_error(GS_ERR_PARSE, "%s: field '%s' is missing or not a whole "
                    "number >= 1", path, key);
  *out = (int)v->valuedouble;
  return GS_OK;
}

/* One member of "fit": {"alpha": s, "beta": s/B, "points": [[B, s], ...]}. */
static gs_status parse_fit(const cJSON *it, const char *path, gs_cost_params *c,
                           unsigned *seen) {
  gs_algo a;
  if (it->string == NULL || gs_algo_parse(it->string, &a) != GS_OK)
    return gs_error(GS_ERR_PARSE, "%s: fit.%s: not an algorithm name", path,
                    it->string ? it->string : "(unnamed)");
  if (*seen & (1u << a))
    return gs_error(GS_ERR_PARSE, "%s: fit.%s appears twice", path, it->string);
  *seen |= 1u << a;
  if (!cJSON_IsObject(it))
    return gs_error(GS_ERR_PARSE, "%s: fit.%s: expected an object", path, it->string);
  char where[64];
  snprintf(where, sizeof where, "fit.%s.", gs_algo_name(a));
  GS_CHECK(json_number_in(it, "alpha", COST_MAX_SECONDS, path, where, &c->fit[a].alpha));
  GS_CHECK(json_number_in(it, "beta", COST_MAX_SECONDS, path, where, &c->fit[a].beta));
  /* gs_cost_save writes the fits whose beta is positive, and only those
   * are used: a zero beta here was not written by it. */
  if (!(c->fit[a].beta > 0))
    return gs_error(GS_ERR_PARSE, "%s: fit.%s.beta: expected a positive number",
                    path, it->string);
  const cJSON *pts = cJSON_GetObjectItemCaseSensitive(it, "points"), *pt;
  if (pts == NULL) return GS_OK;
  if (!cJSON_IsArray(pts))
    return gs_error(GS_ERR_PARSE, "%s: fit.%s.points: expected an array", path,
                    it->string);
  if (cJSON_GetArraySize(pts) > GS_COST_MAX_POINTS)
    return gs_error(GS_ERR_PARSE, "%s: fit.%s.points: %d points, at most %d",
                    path, it->string, cJSON_GetArraySize(pts), GS_COST_MAX_POINTS);
  cJSON_ArrayForEach(pt, pts) {
    const cJSON *x = cJSON_GetArrayItem(pt, 0), *y = cJSON_GetArrayItem(pt, 1);
    int k = c->fit[a].npoints;
    if (!cJSON_IsArray(pt) || cJSON_GetArraySize(pt) != 2 || !cJSON_IsNumber(x) ||
        !cJSON_IsNumber(y) || !(x->valuedouble >= 0 && x->valuedouble <= COST_MAX_BYTES) ||
        !(y->valuedouble >= 0 && y->valuedouble <= COST_MAX_SECONDS) ||
        (k > 0 && x->valuedouble <= c->fit[a].bytes[k - 1]))
      return gs_error(GS_ERR_PARSE, "%s: fit.%s.points[%d]: expected [bytes, "
                      "seconds], non-negative, by strictly increasing size", path,
                      it->string, k);
    c->fit[a].bytes[k] = x->valuedouble + 0.0;
    c->fit[a].secs[k] = y->valuedouble + 0.0;
    c->fit[a].npoints = k + 1;
  }
  return GS_OK;
}

gs_status gs_cost_load(const char *path, gs_cost_topo t, gs_cost_params *out) {
  if (path == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "cost load: NULL argument");
  char *text;
  GS_CHECK(cost_read_text(path, COST_FILE_MAX_BYTES, &text));
  cJSON *root = cJSON_ParseWithOpts(text, NULL, 1); /* nothing after the value */
  gs_free(text);
  if (root == NULL)
    return gs_error(GS_ERR_PARSE, "cost load: %s is not valid JSON, or has text after its "
                    "value", path);
  gs_cost_params c;
  memset(&c, 0, sizeof c);
  int ranks = 0, nodes = 0;
  gs_status st = GS_OK;
  if (!cJSON_IsObject(root))
    st = gs_error(GS_ERR_PARSE, "cost load: %s: expected a JSON object", path);
  if (st == GS_OK) st = json_count(root, "ranks", path, &ranks);
  if (st == GS_OK) st = json_count(root, "nodes", path, &nodes);
  if (st == GS_OK && (ranks != t.ranks || nodes != t.nodes))
    st = gs_error(GS_ERR_MISMATCH, "cost load: %s was measured on %d ranks / %d "
                  "nodes, this communicator has %d / %d", path, ranks, nodes,
                  t.ranks, t.nodes);
  if (st == GS_OK) st = json_number(root, "alpha", path, &c.alpha);
  if (st == GS_OK) st = json_number(root, "beta", path, &c.beta);
  if (st == GS_OK) st = json_number(root, "alpha_local", path, &c.alpha_local);
  if (st == GS_OK) st = json_number(root, "beta_local", path, &c.beta_local);
  if (st == GS_OK) st = json_number(root, "gamma", path, &c.gamma);
  const cJSON *fits = cJSON_GetObjectItemCaseSensitive(root, "fit");
  if (st == GS_OK && fits != NULL && !cJSON_IsObject(fits))
    st = gs_error(GS_ERR_PARSE, "%s: fit: expected an object", path);
  const cJSON *it;
  unsigned seen = 0;
  if (st == GS_OK && fits != NULL) {
    cJSON_ArrayForEach(it, fits) {
      st = parse_fit(it, path, &c, &seen);
      if (st != GS_OK) break;
    }
  }
  cJSON_Delete(root);
  if (st == GS_OK) *out = c;
  return st;
}

/* The least of n times (all positive). */
static double min_positive(const double *x, size_t n) {
  double m = x[0];
  for (size_t i = 1; i < n; i++)
    if (x[i] < m) m = x[i];
  return m;
}

gs_status gs_cost_fit_totals(const double *msgs, const double *bytes,
                             const double *secs, size_t n, double *a, double *b) {
  if (msgs == NULL || bytes == NULL || secs == NULL || a == NULL || b == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "cost fit of totals: NULL argument");
  if (n == 0)
    return gs_error(GS_ERR_INVALID_ARG, "cost fit of totals: no observations");
  /* Weighted least squares with weights 1/secs^2: the normal equations of
   * min sum ((a g + b B - y) / y)^2. */
  double s11 = 0, s12 = 0, s22 = 0, t1 = 0, t2 = 0;
  for (size_t i = 0; i < n; i++) {
    const double g = msgs[i], B = bytes[i], y = secs[i];
    if (!isfinite(g) || !isfinite(B) || !isfinite(y) || g < 0 || B < 0 || y <= 0)
      return gs_error(GS_ERR_INVALID_ARG, "cost fit of totals: observation %zu "
                      "(%g messages, %g bytes, %g s) is not finite and "
                      "non-negative with a positive time", i, g, B, y);
    const double w = 1.0 / (y * y);
    s11 += w * g * g;
    s12 += w * g * B;
    s22 += w * B * B;
    t1 += w * g * y;
    t2 += w * B * y;
  }
  /* Times so short that their weights overflow (or so long that they
   * vanish) leave no fit: say so rather than return a NaN. */
  if (!isfinite(s11) || !isfinite(s12) || !isfinite(s22) || !isfinite(t1) || !isfinite(t2))
    return gs_error(GS_ERR_INVALID_ARG, "cost fit of totals: degenerate: the observations' "
                    "weighted sums overflow (times as short as %g s weigh 1/time^2)",
                    min_positive(secs, n));
  if (s22 <= 0)
    return gs_error(GS_ERR_INVALID_ARG, "cost fit of totals: no observation "
                    "carried any bytes");
  const double det = s11 * s22 - s12 * s12;
  /* det is 0 (up to rounding) when every observation has the same
   * bytes-per-message ratio: a and b are not separable, b alone is fitted. */
  if (det > 1e-12 * s11 * s22) {
    const double fa = (t1 * s22 - t2 * s12) / det;
    if (fa >= 0) {
      const double fb = (s11 * t2 - s12 * t1) / det;
      if (fb >= 0) {
        *a = fa;
        *b = fb;
        return GS_OK;
      }
      /* A negative slope: the bytes explain nothing; the latency alone. */
      *a = t1 / s11;
      *b = 0;
      return GS_OK;
    }
  }
  *a = 0;
  *b = t2 / s22;
  return GS_OK;
}
