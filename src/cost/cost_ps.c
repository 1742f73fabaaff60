/*
 * The cost of a synchronous parameter-server round (gradsync/cost.h,
 * "Parameter servers"): the busiest direction of the busiest link, workers'
 * or servers', as BytePS (Jiang et al., OSDI 2020) counts a push and a pull
 * that overlap on full-duplex links, and the pipeline's drain (the last
 * chunks' answers); and of asynchronous steps, where the servers' links and
 * the workers' cycles set the pace in turn.
 */
#include <math.h>

#include "gradsync/cost.h"
#include "gs_internal.h"

/* The bytes of a shard's last chunk: the whole shard when unchunked. */
static double last_chunk(double shard, double chunk) {
  if (!(chunk > 0) || chunk >= shard) return shard;
  double n = ceil(shard / chunk);
  return shard - (n - 1) * chunk;
}

static gs_status check_ps_args(int workers, int servers, double bytes, double chunk) {
  if (workers < 1 || servers < 1)
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: %d workers and %d servers "
                    "(at least 1 each)", workers, servers);
  if (!(bytes >= 0) || !isfinite(bytes))
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: %g bytes", bytes);
  if (!(chunk >= 0) || !isfinite(chunk))
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: chunks of %g bytes", chunk);
  return GS_OK;
}

gs_status gs_cost_ps(const gs_cost_params *c, int workers, int servers, double bytes,
                     double chunk_bytes, gs_cost_ps_out *out) {
  if (c == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: NULL argument");
  GS_CHECK(check_ps_args(workers, servers, bytes, chunk_bytes));
  double shard = (double)workers * bytes / servers; /* W M / S */
  double last = last_chunk(bytes / servers, chunk_bytes);
  out->worker_s = c->alpha + bytes * c->beta;
  out->server_s = c->alpha + shard * (c->beta + c->gamma);
  out->drain_s = GS_MAX(workers, servers) * last * c->beta;
  out->round_s = 2.0 * c->alpha + GS_MAX(bytes, shard) * c->beta + out->drain_s +
                 shard * c->gamma;
  return GS_OK;
}

gs_status gs_cost_ps_async(const gs_cost_params *c, int workers, int servers, double bytes,
                           double chunk_bytes, double compute_s, double *steps_s) {
  if (c == NULL || steps_s == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: NULL argument");
  GS_CHECK(check_ps_args(workers, servers, bytes, chunk_bytes));
  if (!(compute_s >= 0) || !isfinite(compute_s))
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: compute of %g s", compute_s);
  double per_server = bytes / servers; /* M / S: one push's share */
  double drain = servers * last_chunk(per_server, chunk_bytes) * c->beta;
  double cycle = compute_s + 2.0 * c->alpha + bytes * c->beta + drain + per_server * c->gamma;
  double busy = workers * per_server * (c->beta + c->gamma);
  *steps_s = GS_MAX(cycle, busy);
  return GS_OK;
}
