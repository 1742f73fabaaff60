/*
 * Two-level allreduce: a ring reduce-scatter inside each node, an allreduce
 * of each rank's shard across nodes (between the ranks with the same local
 * rank, with the flat algorithm the cost model prefers for that shard), and
 * a ring allgather inside each node. Only 1/L of the vector crosses the
 * network from each of a node's L ranks. Requires the same L on every node.
 */
#include "comm_internal.h"

gs_status allreduce_hier(gs_comm *c, void *buf, size_t count, gs_dtype dtype,
                         gs_redop op) {
  int L = c->local.size, lr = c->local.rank;
  size_t esize = gs_dtype_size(dtype);
  size_t *off = gs_malloc(2 * sizeof(size_t) * (size_t)L);
  if (off == NULL) return GS_ERR_NOMEM;
  size_t *len = off + L;
  split_blocks(count, L, off, len);
  int div = op == GS_AVG ? c->world.size : 1;
  gs_status st = ring_run(c, &c->local, buf, off, len, dtype, op, 1, 0, 1);
  if (st == GS_OK) {
    char *shard = (char *)buf + off[lr] * esize;
    gs_cost_topo t = {c->cross.size, c->cross.size};
    gs_algo a = gs_cost_best_allreduce(&c->cost, t, (double)(len[lr] * esize), NULL);
    if (a == GS_ALGO_RD)
      st = allreduce_rd(c, &c->cross, shard, len[lr], dtype, op, div);
    else if (a == GS_ALGO_RABENSEIFNER)
      st = allreduce_rabenseifner(c, &c->cross, shard, len[lr], dtype, op, div);
    else
      st = allreduce_ring(c, &c->cross, shard, len[lr], dtype, op, div);
  }
  if (st == GS_OK) st = ring_run(c, &c->local, buf, off, len, dtype, op, 0, 1, 1);
  gs_free(off);
  return st;
}
