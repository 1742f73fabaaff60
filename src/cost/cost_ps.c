/*
 * The cost of a synchronous parameter-server round (gradsync/cost.h,
 * "Parameter servers"): the busiest direction of the busiest link, workers'
 * or servers', as BytePS (Jiang et al., OSDI 2020) counts a push and a pull
 * that overlap on full-duplex links.
 */
#include <math.h>

#include "gradsync/cost.h"
#include "gs_internal.h"

gs_status gs_cost_ps(const gs_cost_params *c, int workers, int servers, double bytes,
                     gs_cost_ps_out *out) {
  if (c == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: NULL argument");
  if (workers < 1 || servers < 1)
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: %d workers and %d servers "
                    "(at least 1 each)", workers, servers);
  if (!(bytes >= 0) || !isfinite(bytes))
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: %g bytes", bytes);
  double shard = (double)workers * bytes / servers; /* W M / S */
  out->worker_s = c->alpha + bytes * c->beta;
  out->server_s = c->alpha + shard * (c->beta + c->gamma);
  out->round_s = 2.0 * c->alpha + GS_MAX(bytes, shard) * c->beta + shard * c->gamma;
  return GS_OK;
}
