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
 * in it or not: gamma a bag, on top of alpha + beta per lookup. So a row
 * block of rw pays for every bag and a share of the lookups.
 * Row-wise Adagrad on a block of d of the table's D columns: each touched
 * row's sum of squares goes to the row's D/d - 1 other blocks, 4 bytes
 * each; a shard of R rows serving I ids spread over them touches
 * R (1 - e^(-I/R)) rows (the expected distinct rows of I uniform draws).
 * Every table's exchange travels in one fused message per phase (one
 * all-to-all of every table's pooled vectors, one reduce-scatter of every
 * row-wise table's partial sums, the dense gradients in the MLPs'
 * all-reduce), so a shard is charged its bytes only: the latency terms are
 * paid once per step whatever the sharding, and are left out (alpha = 0).
 * Skewed ids put more lookups on the hot rows' shards than rows/N says; the
 * planner's estimate is for ids spread as the table's rows.
 */
#include <math.h>

#include "gradsync/cost.h"

static double a2a_row(const gs_cost_params *c, int p, double bytes) {
  if (p <= 1) return 0.0;
  return (p - 1) * c->alpha + (double)(p - 1) / p * bytes * c->beta;
}

void gs_cost_shard(const gs_cost_params *cp, gs_cost_topo t, const gs_cost_lookup *lk,
                   const gs_cost_shard_in *in, gs_cost_shard_out *out) {
  int p = t.ranks > 0 ? t.ranks : 1;
  gs_cost_params bw = *cp; /* bandwidth terms only (see above) */
  bw.alpha = bw.alpha_local = 0;
  for (int a = 0; a < GS_ALGO_COUNT; a++) bw.fit[a].alpha = 0, bw.fit[a].npoints = 0;
  const gs_cost_params *c = &bw;
  double pooled = in->batch * in->dim * in->wire_elem_bytes; /* the batch's vectors */
  double ids = in->batch * in->pooling, bags = in->batch;
  double row_bytes = in->dim * 4.0;
  double share = in->table_rows > 0 ? in->rows / in->table_rows : 0.0;
  out->lookup_s = out->wire_s = out->wire_bytes = 0;
  switch (in->kind) {
    case GS_SHARD_TW:
    case GS_SHARD_CW:
      out->wire_s = 2.0 * a2a_row(c, p, pooled);
      out->wire_bytes = 2.0 * pooled * (p - 1) / p;
      break;
    case GS_SHARD_RW: {
      ids *= share;
      double rs = gs_cost_reduce_scatter(c, t, GS_ALGO_RING, pooled);
      double ag = gs_cost_allgather(c, t, GS_ALGO_RING, pooled);
      out->wire_s = rs + ag;
      out->wire_bytes = 2.0 * pooled * (p - 1) / p;
      break;
    }
    case GS_SHARD_TWRW: {
      int g = in->group > 0 ? in->group : 1;
      ids *= share;
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
      ids /= p;
      bags /= p;
      if (gs_cost_dp_dense(in->rows, in->dim, in->batch, in->pooling)) {
        out->wire_s = gs_cost_allreduce(c, t, GS_ALGO_AUTO, in->rows * row_bytes);
        out->wire_bytes = 2.0 * in->rows * row_bytes * (p - 1) / p;
      } else {
        double gathered = in->batch * (in->dim + in->pooling + 1.0) * 4.0;
        out->wire_s = gs_cost_allgather(c, t, GS_ALGO_RING, gathered);
        out->wire_bytes = gathered * (p - 1) / p;
        /* its own samples forward, the whole batch's in the update */
        ids = in->batch * in->pooling * (1.0 + 1.0 / p) / 2.0;
        bags = in->batch * (1.0 + 1.0 / p) / 2.0;
      }
      break;
    default:
      out->total_s = -1.0;
      return;
  }
  if (in->row_sums && in->table_dim > in->dim && in->dim > 0 && in->rows > 0 &&
      in->kind != GS_SHARD_DP) {
    double touched = in->rows * -expm1(-ids / in->rows);
    double sums = (in->table_dim / in->dim - 1.0) * touched * 4.0;
    out->wire_s += sums * c->beta;
    out->wire_bytes += sums;
  }
  out->lookup_s = bags * lk->gamma + ids * (lk->alpha + lk->beta * row_bytes);
  out->total_s = out->lookup_s + out->wire_s;
}

int gs_cost_dp_dense(double rows, double dim, double batch, double pooling) {
  return 2.0 * rows * dim <= batch * (dim + pooling + 1.0);
}
