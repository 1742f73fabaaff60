/*
 * Two-level allreduce: a ring reduce-scatter inside each node, a ring
 * allreduce of each rank's shard across nodes (between the ranks with the
 * same local rank), and
 * a ring allgather inside each node. Only 1/L of the vector crosses the
 * network from each of a node's L ranks, but the L cross-node rings run at
 * once through the node's one link: it carries the whole vector's ring
 * traffic, as the cost model prices it. Requires the same L on every node.
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
  gs_status st = local_run(c, NULL, buf, off, len, dtype, op, 1, 0, 1);
  if (st == GS_OK) {
    /* The cross-node step is the ring, as the cost model assumes (see
     * hier_allreduce in src/cost/cost.c). */
    char *shard = (char *)buf + off[lr] * esize;
    st = allreduce_ring(c, &c->cross, shard, len[lr], dtype, op, div);
  }
  if (st == GS_OK) st = local_run(c, NULL, buf, off, len, dtype, op, 0, 1, 1);
  gs_free(off);
  return st;
}
