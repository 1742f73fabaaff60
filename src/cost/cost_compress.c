/*
 * The cost of a compressed message: coding time from the compressor's own
 * figures plus the collective that carries its payload, whose formula is the
 * one in cost.c (called, never restated). Every term is affine in the dense
 * size M, so the planner can read a compressed message's cost as a + b*M.
 */
#include <math.h>

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
