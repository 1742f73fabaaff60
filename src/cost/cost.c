/*
 * The alpha-beta-gamma cost model of collective algorithms.
 *
 * Notation (Thakur, Rabenseifner & Gropp, IJHPCA 2005, Sec. 2): a message of
 * n bytes costs alpha + n*beta; reducing n bytes costs n*gamma; p ranks on N
 * nodes of L = p/N ranks. lg is the base-2 logarithm rounded up. Every
 * formula below is linear in each parameter, which the calibration relies on.
 */
#include <math.h>
#include <string.h>
#include <strings.h>

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

/* Recursive doubling: lg p exchanges of the whole vector.
 * lg p (a + n b + n g) [Thakur et al. Sec. 4.4]. */
static double rd_allreduce(const gs_cost_params *c, int p, double n) {
  int q = floor_pow2(p);
  return lg_floor(q) * (c->alpha + n * c->beta + n * c->gamma) +
         fold_cost(c, p, n, 1);
}

/* Rabenseifner: recursive-halving reduce-scatter + recursive-doubling
 * allgather. 2 lg p a + 2(p-1)/p n b + (p-1)/p n g [Thakur et al. Sec. 4.4]. */
static double rab_allreduce(const gs_cost_params *c, int p, double n) {
  int q = floor_pow2(p);
  double f = (double)(q - 1) / q;
  return 2.0 * lg_floor(q) * c->alpha + 2.0 * f * n * c->beta +
         f * n * c->gamma + fold_cost(c, p, n, 1);
}

/* The best flat allreduce on `p` ranks, with a parameter set. */
static double best_flat(const gs_cost_params *c, int p, double n) {
  double t = ring_allreduce(c, p, n);
  t = GS_MIN(t, rab_allreduce(c, p, n));
  t = GS_MIN(t, rd_allreduce(c, p, n));
  return t;
}

/* Two-level: node-local ring reduce-scatter, cross-node allreduce of the
 * local shard (best flat algorithm over N nodes), node-local ring allgather.
 * (L-1)a_l + (L-1)/L n b_l + (L-1)/L n g + AR_N(n/L) + (L-1)a_l + (L-1)/L n b_l */
static double hier_allreduce(const gs_cost_params *c, gs_cost_topo t, double n) {
  int nodes = t.nodes > 0 ? t.nodes : t.ranks;
  int local = t.ranks / nodes;
  if (local < 1) local = 1;
  double f = (double)(local - 1) / local;
  double intra = 2.0 * (local - 1) * c->alpha_local +
                 2.0 * f * n * c->beta_local + f * n * c->gamma;
  return intra + best_flat(c, nodes, n / local);
}

double gs_cost_allreduce(const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                         double bytes) {
  int p = t.ranks;
  if (p <= 1) return 0.0;
  switch (algo) {
    case GS_ALGO_RING: return ring_allreduce(c, p, bytes);
    case GS_ALGO_RD: return rd_allreduce(c, p, bytes);
    case GS_ALGO_RABENSEIFNER: return rab_allreduce(c, p, bytes);
    case GS_ALGO_HIER: return hier_allreduce(c, t, bytes);
    case GS_ALGO_AUTO:
    case GS_ALGO_MPI: {
      double best;
      gs_cost_best_allreduce(c, t, bytes, &best);
      return best;
    }
    default: return -1.0;
  }
}

gs_algo gs_cost_best_allreduce(const gs_cost_params *c, gs_cost_topo t,
                               double bytes, double *time_s) {
  static const gs_algo order[] = {GS_ALGO_RING, GS_ALGO_RABENSEIFNER,
                                  GS_ALGO_RD, GS_ALGO_HIER};
  gs_algo best = GS_ALGO_RING;
  double best_t = INFINITY;
  int multi_node_local = t.nodes > 1 && t.nodes < t.ranks;
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    /* The two-level algorithm only differs from a flat one when some node
     * holds several ranks and there are several nodes. */
    if (order[i] == GS_ALGO_HIER && !multi_node_local) continue;
    double v = gs_cost_allreduce(c, t, order[i], bytes);
    if (v < best_t) {
      best_t = v;
      best = order[i];
    }
  }
  if (time_s) *time_s = t.ranks <= 1 ? 0.0 : best_t;
  return best;
}

/* Ring reduce-scatter: (p-1)a + (p-1)/p n b + (p-1)/p n g. */
double gs_cost_reduce_scatter(const gs_cost_params *c, gs_cost_topo t,
                              gs_algo algo, double bytes) {
  int p = t.ranks;
  if (p <= 1) return 0.0;
  if (algo != GS_ALGO_RING && algo != GS_ALGO_AUTO && algo != GS_ALGO_MPI)
    return -1.0;
  double f = (double)(p - 1) / p;
  return (p - 1) * c->alpha + f * bytes * (c->beta + c->gamma);
}

/* Ring allgather: (p-1)a + (p-1)/p n b; recursive doubling: lg p a +
 * (p-1)/p n b [Thakur et al. Sec. 4.1]. */
double gs_cost_allgather(const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                         double bytes) {
  int p = t.ranks;
  if (p <= 1) return 0.0;
  double f = (double)(p - 1) / p;
  double ring = (p - 1) * c->alpha + f * bytes * c->beta;
  double rd = (p == floor_pow2(p)) ? lg_floor(p) * c->alpha + f * bytes * c->beta
                                   : INFINITY;
  switch (algo) {
    case GS_ALGO_RING: return ring;
    case GS_ALGO_RD: return p == floor_pow2(p) ? rd : -1.0;
    case GS_ALGO_AUTO:
    case GS_ALGO_MPI: return GS_MIN(ring, rd);
    default: return -1.0;
  }
}

/* Binomial: lg p (a + n b). Pipelined chain of s segments:
 * (p - 2 + s)(a + n/s b), minimised at s = sqrt((p-2) n b / a). */
double gs_cost_bcast(const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                     double bytes) {
  int p = t.ranks;
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
double gs_cost_alltoall(const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                        double bytes) {
  int p = t.ranks;
  if (p <= 1) return 0.0;
  if (algo != GS_ALGO_PAIRWISE && algo != GS_ALGO_AUTO && algo != GS_ALGO_MPI)
    return -1.0;
  return (p - 1) * c->alpha + (double)(p - 1) / p * bytes * c->beta;
}

void gs_cost_allreduce_linear(const gs_cost_params *c, gs_cost_topo t,
                              gs_algo algo, double *a, double *b) {
  if (algo == GS_ALGO_AUTO || algo == GS_ALGO_MPI)
    algo = gs_cost_best_allreduce(c, t, 64.0 * 1024 * 1024, NULL);
  /* Every formula is affine in the message size. */
  double t0 = gs_cost_allreduce(c, t, algo, 0.0);
  double t1 = gs_cost_allreduce(c, t, algo, 1e6);
  *a = t0;
  *b = (t1 - t0) / 1e6;
}

gs_status gs_cost_preset(const char *name, gs_cost_params *out) {
  /* Latencies are one-way software + wire latencies typical of each fabric;
   * beta is the inverse of the link rate; gamma is a CPU's vectorised f32
   * sum (about 5 GB/s through memory). The "shm" preset is for ranks on one
   * host. */
  static const struct {
    const char *name;
    double alpha, beta;
  } presets[] = {
      {"1GbE", 50e-6, 1.0 / 125e6},   {"10GbE", 25e-6, 1.0 / 1.25e9},
      {"25GbE", 15e-6, 1.0 / 3.125e9}, {"100GbIB", 2e-6, 1.0 / 12.5e9},
      {"shm", 1e-6, 1.0 / 5e9},
  };
  if (name == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "cost preset: NULL argument");
  for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
    if (strcasecmp(name, presets[i].name) == 0) {
      out->alpha = presets[i].alpha;
      out->beta = presets[i].beta;
      out->alpha_local = 1e-6;
      out->beta_local = 1.0 / 5e9;
      out->gamma = 1.0 / 5e9;
      return GS_OK;
    }
  }
  return gs_error(GS_ERR_INVALID_ARG,
                  "unknown network preset '%s' (expected 1GbE, 10GbE, 25GbE, "
                  "100GbIB or shm)", name);
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

gs_status gs_cost_calibrate_allreduce(gs_cost_params *c, gs_cost_topo t,
                                      gs_algo algo, const double *bytes,
                                      const double *secs, size_t n) {
  if (c == NULL || bytes == NULL || secs == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "calibrate: NULL argument");
  if (n < 2)
    return gs_error(GS_ERR_INVALID_ARG, "calibrate: need 2 points, got %zu", n);
  if (t.ranks < 2)
    return gs_error(GS_ERR_INVALID_ARG, "calibrate: needs 2 ranks or more");
  /* T = A*alpha + (B*n)*beta + rest(n): the coefficients come from the same
   * formula evaluated with unit parameters, so no formula is restated here. */
  gs_cost_params unit_a = {1, 0, 0, 0, 0}, unit_b = {0, 1, 0, 0, 0};
  gs_cost_params rest = *c;
  rest.alpha = 0;
  rest.beta = 0;
  double coef_a = gs_cost_allreduce(&unit_a, t, algo, 0.0);
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
    x[i] = gs_cost_allreduce(&unit_b, t, algo, bytes[i]);
    y[i] = secs[i] - gs_cost_allreduce(&rest, t, algo, bytes[i]);
  }
  double fa, fb;
  gs_status st = gs_cost_fit_linear(x, y, n, &fa, &fb);
  gs_free(x);
  gs_free(y);
  GS_CHECK(st);
  c->alpha = GS_MAX(fa / (coef_a > 0 ? coef_a : 1.0), 0.0);
  c->beta = GS_MAX(fb, 0.0);
  return GS_OK;
}
