/*
 * The cost of a synchronous parameter-server round (gradsync/cost.h,
 * "Parameter servers"): the busiest direction of the busiest link, workers'
 * or servers', as BytePS (Jiang et al., OSDI 2020) counts a push and a pull
 * that overlap on full-duplex links; and of asynchronous steps, where the
 * servers' links and the workers' cycles set the pace in turn.
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

gs_status gs_cost_ps_async(const gs_cost_params *c, int workers, int servers, double bytes,
                           double compute_s, double *steps_s) {
  if (steps_s == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: NULL argument");
  if (!(compute_s >= 0) || !isfinite(compute_s))
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: compute of %g s", compute_s);
  gs_cost_ps_out o;
  GS_CHECK(gs_cost_ps(c, workers, servers, bytes, &o));
  double per_server = bytes / servers; /* M / S: one push's share */
  double cycle = compute_s + 2.0 * c->alpha + bytes * c->beta + per_server * c->gamma;
  double busy = workers * per_server * (c->beta + c->gamma);
  *steps_s = GS_MAX(cycle, busy);
  return GS_OK;
}
