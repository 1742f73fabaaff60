/*
 * The cost of a compressed message: coding time from the compressor's own
 * figures plus the collective that carries its payload, whose formula is the
 * one in cost.c (called, never restated). Every term is affine in the dense
 * size M at one coding rate; the rate of each size comes from the coding
 * time measured at a few sizes (gs_cost_coding_time, the one formula
 * between them), and the planner's curve of a compressed exchange is
 * linear between those sizes (src/engine/plan_xchg.c).
 */
#include <math.h>
#include <string.h>

#include "gradsync/cost.h"
#include "gs_internal.h"

static const char *xchg_names[GS_XCHG_COUNT] = {"allreduce", "allgather", "powersgd",
                                                "gtopk", "hitopk"};

const char *gs_xchg_name(gs_xchg x) {
  return (unsigned)x < GS_XCHG_COUNT ? xchg_names[x] : "unknown";
}

static int nonneg(double v) { return isfinite(v) && v >= 0; }

gs_status gs_cost_compress_check(const gs_cost_compress *z) {
  if (z == NULL) return gs_error(GS_ERR_INVALID_ARG, "compression cost: NULL");
  if (!isfinite(z->ratio) || z->ratio <= 0 || z->ratio > 64)
    return gs_error(GS_ERR_INVALID_ARG, "compression cost: payload ratio %g, "
                    "expected (0, 64]", z->ratio);
  if (!nonneg(z->fixed) || !nonneg(z->encode_s_per_byte) ||
      !nonneg(z->decode_s_per_byte) || !nonneg(z->decode_s_per_byte_dense))
    return gs_error(GS_ERR_INVALID_ARG, "compression cost: fixed bytes (%g) and "
                    "coding times (%g, %g, %g s/B) must be finite and >= 0", z->fixed,
                    z->encode_s_per_byte, z->decode_s_per_byte,
                    z->decode_s_per_byte_dense);
  return GS_OK;
}

double gs_cost_compressed(const gs_cost_params *c, gs_cost_topo t, gs_xchg x,
                          const gs_cost_compress *z, double bytes) {
  if (c == NULL || z == NULL || !(bytes >= 0) || t.ranks < 1) return -1.0;
  if (gs_cost_compress_check(z) != GS_OK) return -1.0;
  const double p = t.ranks;
  const double payload = z->ratio * bytes + z->fixed; /* one rank's */
  double comm, decoded;
  switch (x) {
    case GS_XCHG_ALLREDUCE:
      gs_cost_best_allreduce(c, t, payload, &comm);
      decoded = payload;
      break;
    case GS_XCHG_ALLGATHER:
      /* Every rank's status and size (16 bytes each) go first, so that
       * sizes may vary and a failure reaches every rank; the all-gather's
       * size is its output: every rank's payload. */
      comm = gs_cost_allgather(c, t, GS_ALGO_AUTO, p * 16) +
             gs_cost_allgather(c, t, GS_ALGO_AUTO, p * payload);
      decoded = p * payload;
      break;
    case GS_XCHG_POWERSGD: {
      /* P (n x r) and Q (m x r) travel in two all-reduces one after the
       * other; the payload is their sum, taken as two halves. */
      double half;
      gs_cost_best_allreduce(c, t, payload / 2, &half);
      comm = 2 * half;
      decoded = payload;
      break;
    }
    case GS_XCHG_GTOPK:
      /* The payload is k (index, value) pairs of 8 bytes; the global set
       * that comes back has k pairs too. */
      comm = gs_cost_gtopk(c, t, payload / 8, 8);
      decoded = payload;
      break;
    case GS_XCHG_HITOPK:
      comm = gs_cost_hitopk(c, t, bytes / 4, 4, payload / 8, 8);
      decoded = payload;
      break;
    default:
      return -1.0;
  }
  if (comm < 0) return -1.0;
  if (t.ranks == 1) comm = 0.0;
  return z->encode_s_per_byte * bytes + comm + z->decode_s_per_byte * decoded +
         z->decode_s_per_byte_dense * bytes;
}

/* ---- Coding time ------------------------------------------------------------ */

gs_status gs_cost_coding_rate(double secs_per_elem, gs_cost_coding *out) {
  if (out == NULL || !nonneg(secs_per_elem))
    return gs_error(GS_ERR_INVALID_ARG, "coding time: a rate of %g s per element, "
                    "expected finite and >= 0", secs_per_elem);
  memset(out, 0, sizeof *out);
  out->npoints = 1;
  out->elems[0] = 1;
  out->secs[0] = secs_per_elem;
  return GS_OK;
}

gs_status gs_cost_coding_check(const gs_cost_coding *m) {
  if (m == NULL) return gs_error(GS_ERR_INVALID_ARG, "coding time: NULL");
  if (m->npoints < 1 || m->npoints > GS_COST_CODING_POINTS)
    return gs_error(GS_ERR_INVALID_ARG, "coding time: %d measured sizes, expected 1 "
                    "to %d", m->npoints, GS_COST_CODING_POINTS);
  for (int i = 0; i < m->npoints; i++) {
    const double lo = i ? m->elems[i - 1] : 0, prev = i ? m->secs[i - 1] : 0;
    if (!isfinite(m->elems[i]) || m->elems[i] < 1 || m->elems[i] <= lo ||
        !nonneg(m->secs[i]) || m->secs[i] < prev)
      return gs_error(GS_ERR_INVALID_ARG, "coding time: point %d (%g elements, %g s): "
                      "sizes must increase from 1 and times be finite, >= 0 and "
                      "non-decreasing", i, m->elems[i], m->secs[i]);
  }
  return GS_OK;
}

/* The formula of gradsync/cost.h, above gs_cost_coding. */
double gs_cost_coding_time(const gs_cost_coding *m, double n) {
  if (!(n >= 0) || gs_cost_coding_check(m) != GS_OK) return -1.0;
  const int last = m->npoints - 1;
  const double *x = m->elems, *y = m->secs;
  if (n <= x[0]) return y[0] * (n / x[0]);
  if (n >= x[last]) {
    double r = y[last] / x[last];
    if (last > 0) r = fmax(r, (y[last] - y[last - 1]) / (x[last] - x[last - 1]));
    return y[last] + r * (n - x[last]);
  }
  int i = 0;
  while (n > x[i + 1]) i++;
  return y[i] + (y[i + 1] - y[i]) * ((n - x[i]) / (x[i + 1] - x[i]));
}
