/*
 * The cost of an embedding table's shard per training step (gradsync/cost.h;
 * docs/DLRM.md), from the collective formulas of cost.c.
 *
 * With B samples per step, L ids per sample, d columns, E bytes per pooled
 * element on the wire and p ranks:
 *   tw, cw   every lookup of the table lands on its one rank (B L of them);
 *            the pooled vectors go out in the forward all-to-all and their
 *            gradients come back in the backward one: this rank's row of
 *            each, (p-1) messages and B d E (p-1)/p bytes (pairwise
 *            all-to-all, Thakur et al. Sec. 4.4), twice;
 *   rw       a rank serves the lookups that fall in its rows, B L rows/N
 *            with ids spread over the table's N rows; the pooled partial
 *            sums of every sample are reduce-scattered (B d E in total) and
 *            their gradients all-gathered: the ring formulas of cost.c;
 *   twrw     the same inside a node's g ranks (the node-local link), and the
 *            node's pooled vectors out and back as tw's, shared by its g ranks;
 *   dp       each rank looks up its own B/p samples; the table's dense
 *            gradient is all-reduced (N d 4 bytes) when that moves fewer
 *            bytes than all-gathering the batch's bags and gradients
 *            (B (d + L + 1) 4 bytes, gs_cost_dp_dense), else they are
 *            all-gathered and every replica runs the update over them.
 * Every shard walks the bags of the samples it serves (the global batch's,
 * its own slice's for a dp table's forward), whether any of their ids land
 * in it or not: gamma a bag (gamma_hit when the bag's line of the pooled
 * matrix is still in the cache), on top of alpha + beta per lookup. So a row
 * block of rw pays for every bag and a share of the lookups; an empty one
 * (rw over more ranks than rows) for nothing: no id reaches it, and the
 * exchange leaves it out.
 * Row-wise Adagrad on a block of d of the table's D columns: each touched
 * row's sum of squares goes to the row's D/d - 1 other blocks, 4 bytes
 * each; a shard of R rows serving I ids spread over them touches
 * R (1 - e^(-I/R)) rows (the expected distinct rows of I uniform draws;
 * fewer under a Zipf law, gs_cost_shard_rows). The fused backward's update
 * is paid once per touched row too (alpha_row + beta_row a byte), the
 * gather and the scatter once per lookup: a 3-row table's thousand
 * lookups a step update 3 rows.
 * Every table's exchange travels in one fused message per phase (one
 * all-to-all of every table's pooled vectors, one reduce-scatter of every
 * row-wise table's partial sums, the dense gradients in the MLPs'
 * all-reduce), so a shard is charged its bytes only: the latency terms are
 * paid once per step whatever the sharding, and are left out (alpha = 0).
 * Hot rows are spread over the row blocks (the ids are hashed over the
 * rows), so a row block serves its share of the lookups.
 *
 * The caches. A lookup whose row is in the cache costs alpha_hit + beta_hit
 * per byte instead of alpha + beta. Which rows are: Che's approximation of
 * an LRU cache (Che, Tung and Wang, IEEE JSAC 2002; Fricker, Robert and
 * Roberts, ITC 2012): a row asked for r times a step stays in a cache of
 * characteristic time T with probability 1 - e^(-r T), and T is where the
 * rows' expected footprint fills the cache. With ids drawn from a Zipf law
 * of exponent s over a table's N rows the row of popularity rank k is asked
 * for I k^-s / H(N) times a step (I: the table's lookups a step); the ranks
 * are taken in geometric buckets (a bucket's mass from the integral of
 * x^-s, as the sampler's rejection-inversion has it), so a table of 10^7
 * rows is ~90 terms. A row's footprint is its lines and, with row-wise
 * Adagrad, its accumulator's line. What else a step touches takes its
 * share of the cache as lines asked for once a step: each shard's pooled
 * vectors and their gradients with the exchange's buffers (a row block's
 * for the whole global batch), and the rest (the MLPs' weights and
 * activations: the caller's other_bytes). The rank's shards share the cache: the
 * planner prices with the mean rank's T (every table's rows over every
 * rank's cache) and then each rank with its own (gradsync/embed.h).
 */
#include <math.h>
#include <stddef.h>

#include "gradsync/cost.h"
#include "gs_internal.h"

/* The share of the table's rows a shard holds (0 to 1). */
static double row_share(const gs_cost_shard_in *in) {
  return in->table_rows > 0 ? fmin(1.0, in->rows / in->table_rows) : 0.0;
}

/* A shard's lookups and bags a step (the work its lookup time counts). */
static void shard_load(const gs_cost_shard_in *in, int p, double *ids_out, double *bags_out) {
  double ids = in->batch * in->pooling, bags = in->batch;
  double share = row_share(in);
  switch (in->kind) {
    case GS_SHARD_RW:
    case GS_SHARD_TWRW:
      ids *= share;
      if (!(in->rows > 0)) bags = 0; /* an empty row block: left out, no bag walked */
      break;
    case GS_SHARD_DP:
      if (gs_cost_dp_dense(in->rows, in->dim, in->batch, in->pooling)) {
        ids /= p;
        bags /= p;
      } else { /* its own samples forward, the whole batch's in the update */
        ids = in->batch * in->pooling * (1.0 + 1.0 / p) / 2.0;
        bags = in->batch * (1.0 + 1.0 / p) / 2.0;
      }
      break;
    default:
      break;
  }
  *ids_out = ids;
  *bags_out = bags;
}

/* The integral of x^-s from 1 to x (log x at s = 1). */
static double zipf_int(double s, double x) {
  return fabs(1.0 - s) < 1e-9 ? log(x) : expm1((1.0 - s) * log(x)) / (1.0 - s);
}

/* A shard's rows in buckets of popularity (ranks lo..hi of the table's Zipf
 * law, lo growing by 1.25): m, the share of the shard's lookups on them;
 * bytes, their footprint in the shard (its share of the rows, of fp bytes
 * each); r, each row's lookups a step. 128 buckets reach 10^12 rows. */
enum { MAX_BUCKETS = 128 };
typedef struct bucket {
  double m, bytes, r, rows; /* rows: the shard's rows in the bucket */
} bucket;

static int shard_buckets(gs_cost_topo t, const gs_cost_shard_in *in, bucket *out) {
  int p = t.ranks > 0 ? t.ranks : 1, n = 0;
  double ids, bags;
  shard_load(in, p, &ids, &bags);
  double N = floor(in->table_rows), share = row_share(in);
  if (!(ids > 0) || !(share > 0) || !(N >= 1)) return 0;
  double fp = ceil(in->dim * 4.0 / 64.0) * 64.0 + (in->row_sums ? 64.0 : 0.0);
  double rate = ids / share; /* the table's lookups as this shard's rows see them */
  double s = in->zipf > 0 ? in->zipf : 0.0;
  double total = zipf_int(s, N + 0.5) - zipf_int(s, 0.5);
  for (double lo = 1.0; lo <= N && n < MAX_BUCKETS; n++) {
    double hi = s > 0 && n + 1 < MAX_BUCKETS ? fmin(N, fmax(lo, floor(lo * 1.25))) : N;
    double m = (zipf_int(s, hi + 0.5) - zipf_int(s, lo - 0.5)) / total, rows = hi - lo + 1.0;
    out[n] = (bucket){m, share * rows * fp, rate * m / rows, share * rows};
    lo = hi + 1.0;
  }
  return n;
}

/* The rows' expected footprint at characteristic time T. */
static double buckets_bytes(const bucket *b, int n, double T) {
  double sum = 0;
  for (int k = 0; k < n; k++) sum += isinf(T) ? b[k].bytes : -b[k].bytes * expm1(-b[k].r * T);
  return sum;
}

/* The share of the lookups that hit. A step's lookups of a table come in
 * one burst: a lookup misses when it is its row's first of the burst,
 * (1 - e^-r) / r of them, and the row was not kept from an earlier step's
 * (a step ago: only with T of a step or more, then with 1 - e^(-r T)). */
static double buckets_hits(const bucket *b, int n, double T) {
  double hit = 0.0, mass = 0.0;
  for (int k = 0; k < n; k++) {
    double r = b[k].r, first = r > 1e-9 ? -expm1(-r) / r : 1.0;
    double gone = T >= 1.0 ? (isinf(T) ? 0.0 : exp(-r * T)) : 1.0;
    hit += b[k].m * (1.0 - first * gone);
    mass += b[k].m;
  }
  return mass > 0 ? fmin(1.0, hit / mass) : 1.0;
}

double gs_cost_shard_hits(gs_cost_topo t, const gs_cost_shard_in *in) {
  if (!(in->cache_t > 0)) return 0.0;
  bucket b[MAX_BUCKETS];
  int n = shard_buckets(t, in, b);
  return n > 0 ? buckets_hits(b, n, in->cache_t) : 1.0;
}

double gs_cost_shard_rows(gs_cost_topo t, const gs_cost_shard_in *in) {
  bucket b[MAX_BUCKETS];
  int n = shard_buckets(t, in, b);
  double rows = 0.0;
  for (int k = 0; k < n; k++) rows += -b[k].rows * expm1(-b[k].r);
  return rows;
}

/* The lines of the pooled matrix a shard writes and reads a step: each bag
 * it walks, a vector of its columns out and its gradient back, with the
 * exchange's send and receive buffers (4 floats a pooled element). A row
 * block pools every sample of the global batch, so on P ranks it holds P
 * times what a table-wise shard of a P-th of the tables does. */
static double pooled_bytes(gs_cost_topo t, const gs_cost_shard_in *in) {
  double ids, bags;
  shard_load(in, t.ranks > 0 ? t.ranks : 1, &ids, &bags);
  return bags * in->dim * 16.0;
}

/* What the n buckets and the rest of a step (other bytes, touched in turn
 * once a step) hold of the cache at characteristic time T. */
static double footprint(const bucket *b, int n, double other, double T) {
  return other * fmin(T, 1.0) + buckets_bytes(b, n, T);
}

double gs_cost_cache_time(gs_cost_topo t, const gs_cost_shard_in *in, int n,
                          double cache_bytes, double other_bytes) {
  double o = other_bytes > 0 ? other_bytes : 0.0;
  if (!(cache_bytes > 0) || n < 1) return 0.0;
  bucket *b = gs_malloc((size_t)n * MAX_BUCKETS * sizeof *b);
  if (b == NULL) return 0.0; /* out of memory: every lookup a miss, the model without caches */
  int nb = 0;
  for (int i = 0; i < n; i++) {
    nb += shard_buckets(t, &in[i], b + nb);
    o += pooled_bytes(t, &in[i]);
  }
  double T = INFINITY;
  if (footprint(b, nb, o, INFINITY) > cache_bytes) {
    /* The footprint grows with T: bracket it from a step by factors of 4
     * either way, then bisect in log T to 0.01% (a price moves less). */
    double lo = 1.0, hi = 1.0;
    if (footprint(b, nb, o, 1.0) < cache_bytes) {
      for (int k = 0; k < 200 && footprint(b, nb, o, hi) < cache_bytes; k++) lo = hi, hi *= 4.0;
    } else {
      for (int k = 0; k < 200 && footprint(b, nb, o, lo) >= cache_bytes; k++) hi = lo, lo /= 4.0;
    }
    for (int k = 0; k < 48 && hi > lo * (1 + 1e-4); k++) {
      double mid = sqrt(lo * hi);
      if (footprint(b, nb, o, mid) < cache_bytes) lo = mid;
      else hi = mid;
    }
    T = sqrt(lo * hi);
  }
  gs_free(b);
  return T;
}

static double a2a_row(const gs_cost_params *c, int p, double bytes) {
  if (p <= 1) return 0.0;
  return (p - 1) * c->alpha + (double)(p - 1) / p * bytes * c->beta;
}

gs_status gs_cost_lookup_check(const gs_cost_lookup *lk) {
  static const struct {
    size_t off;
    const char *name, *unit;
  } fields[] = {
      {offsetof(gs_cost_lookup, alpha), "alpha", "s per lookup"},
      {offsetof(gs_cost_lookup, beta), "beta", "s per byte of row"},
      {offsetof(gs_cost_lookup, gamma), "gamma", "s per bag"},
      {offsetof(gs_cost_lookup, alpha_hit), "alpha_hit", "s per lookup in the cache"},
      {offsetof(gs_cost_lookup, beta_hit), "beta_hit", "s per byte of row in the cache"},
      {offsetof(gs_cost_lookup, cache_bytes), "cache_bytes", "bytes"},
      {offsetof(gs_cost_lookup, gamma_mixed), "gamma_mixed", "s per bag among half empty ones"},
      {offsetof(gs_cost_lookup, alpha_row), "alpha_row", "s per distinct row"},
      {offsetof(gs_cost_lookup, beta_row), "beta_row", "s per byte of a distinct row"},
      {offsetof(gs_cost_lookup, gamma_hit), "gamma_hit", "s per bag in the cache"}};
  _Static_assert(sizeof fields / sizeof fields[0] * sizeof(double) == sizeof(gs_cost_lookup),
                 "gs_cost_lookup_check: every field of gs_cost_lookup named");
  if (lk == NULL) return gs_error(GS_ERR_INVALID_ARG, "lookup cost: NULL");
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    double v = *(const double *)((const char *)lk + fields[i].off);
    int bytes = fields[i].off == offsetof(gs_cost_lookup, cache_bytes);
    if (!isfinite(v) || v < 0)
      return gs_error(GS_ERR_INVALID_ARG, "lookup cost: %s (%s) is %g; every figure must be "
                      "finite and >= 0", fields[i].name, fields[i].unit, v);
    /* A lookup, a byte or a bag takes nanoseconds (a measured one: 1e-10
     * to 1e-7 s); a millisecond is a figure in the wrong unit, and one
     * that prices every plan alike. */
    if (bytes ? v > GS_COST_LOOKUP_MAX_CACHE : v >= GS_COST_LOOKUP_MAX_S)
      return gs_error(GS_ERR_INVALID_ARG, "lookup cost: %s (%s) is %g; %s", fields[i].name,
                      fields[i].unit, v,
                      bytes ? "a cache is at most 2^50 bytes (1 PiB)"
                            : "a time must be below 1e-3 s (a lookup takes nanoseconds)");
  }
  return GS_OK;
}

void gs_cost_shard(const gs_cost_params *cp, gs_cost_topo t, const gs_cost_lookup *lk,
                   const gs_cost_shard_in *in, gs_cost_shard_out *out) {
  int p = t.ranks > 0 ? t.ranks : 1;
  gs_cost_params bw = *cp; /* bandwidth terms only (see above) */
  bw.alpha = bw.alpha_local = 0;
  for (int a = 0; a < GS_ALGO_COUNT; a++) bw.fit[a].alpha = 0, bw.fit[a].npoints = 0;
  const gs_cost_params *c = &bw;
  double pooled = in->batch * in->dim * in->wire_elem_bytes; /* the batch's vectors */
  double ids, bags;
  shard_load(in, p, &ids, &bags);
  double row_bytes = in->dim * 4.0;
  out->lookup_s = out->wire_s = out->wire_bytes = 0;
  switch (in->kind) {
    case GS_SHARD_TW:
    case GS_SHARD_CW:
      out->wire_s = 2.0 * a2a_row(c, p, pooled);
      out->wire_bytes = 2.0 * pooled * (p - 1) / p;
      break;
    case GS_SHARD_RW: {
      double rs = gs_cost_reduce_scatter(c, t, GS_ALGO_RING, pooled);
      double ag = gs_cost_allgather(c, t, GS_ALGO_RING, pooled);
      out->wire_s = rs + ag;
      out->wire_bytes = 2.0 * pooled * (p - 1) / p;
      break;
    }
    case GS_SHARD_TWRW: {
      int g = in->group > 0 ? in->group : 1;
      gs_cost_params local = *c;
      local.alpha = 0;
      local.beta = c->beta_local;
      gs_cost_topo node = {g, 1};
      out->wire_s = gs_cost_reduce_scatter(&local, node, GS_ALGO_RING, pooled) +
                    gs_cost_allgather(&local, node, GS_ALGO_RING, pooled) +
                    2.0 * a2a_row(c, p, pooled) / g;
      out->wire_bytes = 2.0 * pooled * (p - 1) / p / g;
      break;
    }
    case GS_SHARD_DP:
      if (gs_cost_dp_dense(in->rows, in->dim, in->batch, in->pooling)) {
        out->wire_s = gs_cost_allreduce(c, t, GS_ALGO_AUTO, in->rows * row_bytes);
        out->wire_bytes = 2.0 * in->rows * row_bytes * (p - 1) / p;
      } else {
        double gathered = in->batch * (in->dim + in->pooling + 1.0) * 4.0;
        out->wire_s = gs_cost_allgather(c, t, GS_ALGO_RING, gathered);
        out->wire_bytes = gathered * (p - 1) / p;
      }
      break;
    default:
      out->total_s = -1.0;
      return;
  }
  double per_row = lk->alpha_row + lk->beta_row * row_bytes;
  int sums_out = in->row_sums && in->table_dim > in->dim && in->dim > 0 && in->rows > 0 &&
                 in->kind != GS_SHARD_DP;
  double touched = sums_out || per_row > 0 ? gs_cost_shard_rows(t, in) : 0.0;
  if (sums_out) {
    double sums = (in->table_dim / in->dim - 1.0) * touched * 4.0;
    out->wire_s += sums * c->beta;
    out->wire_bytes += sums;
  }
  /* a lookup: the miss price, or the hit and miss prices by its hit share */
  double miss = lk->alpha + lk->beta * row_bytes, per_lookup = miss;
  if (lk->cache_bytes > 0 && in->cache_t > 0) {
    double h = gs_cost_shard_hits(t, in);
    per_lookup = h * fmin(miss, lk->alpha_hit + lk->beta_hit * row_bytes) + (1.0 - h) * miss;
  }
  /* the share of the bags holding any of the shard's ids: each of a
   * sample's ids lands in it with the shard's share of the rows */
  double f = in->kind == GS_SHARD_RW || in->kind == GS_SHARD_TWRW
                 ? -expm1(in->pooling * log1p(-fmin(row_share(in), 1.0 - 1e-12)))
                 : 1.0;
  double gamma = lk->gamma;
  if (lk->gamma_mixed > gamma) gamma += (lk->gamma_mixed - gamma) * 4.0 * f * (1.0 - f);
  if (lk->gamma_hit > 0 && lk->gamma_hit < lk->gamma && lk->cache_bytes > 0 &&
      in->cache_t > 0) {
    /* a bag's line of the pooled matrix, written forward and read
     * backward once a step, kept with probability 1 - e^-T */
    double kept = isinf(in->cache_t) ? 1.0 : -expm1(-in->cache_t);
    gamma -= kept * (lk->gamma - lk->gamma_hit);
  }
  out->lookup_s = bags * gamma + ids * per_lookup + touched * per_row;
  out->total_s = out->lookup_s + out->wire_s;
}

int gs_cost_dp_dense(double rows, double dim, double batch, double pooling) {
  return 2.0 * rows * dim <= batch * (dim + pooling + 1.0);
}
