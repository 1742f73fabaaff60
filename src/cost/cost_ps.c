/*
 * The cost of a synchronous parameter-server round (gradsync/cost.h,
 * "Parameter servers"): the busiest direction of the busiest link, workers'
 * or servers', as BytePS (Jiang et al., OSDI 2020) counts a push and a pull
 * that overlap on full-duplex links, and the pipeline's drain (a chunk's
 * answer after the last push); and of asynchronous steps, where the
 * servers' links and the workers' cycles set the pace in turn.
 */
#include <math.h>

#include "gradsync/cost.h"
#include "gs_internal.h"

/* The bytes of the pipeline's drain a shard adds after the last push: the
 * whole shard when it is one chunk (a push, then a pull); else a whole
 * chunk, however short the last one: the answer of the chunk before it took
 * the answers' direction when that one arrived, one chunk's time before the
 * push ended, and the last answer follows it. */
static double drain_chunk(double shard, double chunk) {
  return !(chunk > 0) || chunk >= shard ? shard : chunk;
}

static gs_status check_ps_args(double bytes, double chunk) {
  if (!(bytes >= 0) || !isfinite(bytes))
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: %g bytes", bytes);
  if (!(chunk >= 0) || !isfinite(chunk))
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: chunks of %g bytes", chunk);
  return GS_OK;
}

gs_status gs_cost_ps_layout(int workers, int servers, int per_node, int servers_own_nodes,
                            gs_cost_ps_nodes kinds[4], int *n) {
  if (kinds == NULL || n == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server layout: NULL argument");
  if (workers < 1 || servers < 1 || per_node < 1)
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server layout: %d workers, %d servers, "
                    "%d a node (at least 1 each)", workers, servers, per_node);
  *n = 0;
  if (servers_own_nodes) {
    if (workers % per_node != 0)
      return gs_error(GS_ERR_INVALID_ARG, "parameter-server layout: %d workers are no whole "
                      "number of nodes of %d", workers, per_node);
    kinds[(*n)++] = (gs_cost_ps_nodes){workers / per_node, per_node, 0};
    kinds[(*n)++] = (gs_cost_ps_nodes){servers, 0, 1};
    return GS_OK;
  }
  /* rank order: whole nodes of workers, one node shared, whole nodes of
   * servers, a last node of fewer servers */
  int full = workers / per_node, rest = workers % per_node, left = servers;
  if (full > 0) kinds[(*n)++] = (gs_cost_ps_nodes){full, per_node, 0};
  if (rest > 0) {
    int s = GS_MIN(per_node - rest, left);
    kinds[(*n)++] = (gs_cost_ps_nodes){1, rest, s};
    left -= s;
  }
  if (left / per_node > 0) kinds[(*n)++] = (gs_cost_ps_nodes){left / per_node, 0, per_node};
  if (left % per_node > 0) kinds[(*n)++] = (gs_cost_ps_nodes){1, 0, left % per_node};
  return GS_OK;
}

/* The bytes a node of w workers and s servers carries each way in a round
 * of W workers and S servers pushing M bytes each: its workers' pushes to
 * the other nodes' servers and its servers' answers to the other nodes'
 * workers (gradsync/cost.h, "Parameter servers"). */
static double node_link_bytes(double w, double s, double W, double S, double M) {
  return w * M * (S - s) / S + s * (M / S) * (W - w);
}

/* The sums over the kinds: W, S; and each check. */
static gs_status ps_totals(const gs_cost_ps_nodes *kinds, int n, double *W, double *S) {
  if (kinds == NULL || n < 1)
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: no nodes");
  *W = *S = 0;
  for (int k = 0; k < n; k++) {
    if (kinds[k].count < 0 || kinds[k].workers < 0 || kinds[k].servers < 0)
      return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: node kind %d of %d nodes, "
                      "%d workers and %d servers (none below 0)", k, kinds[k].count,
                      kinds[k].workers, kinds[k].servers);
    *W += (double)kinds[k].count * kinds[k].workers;
    *S += (double)kinds[k].count * kinds[k].servers;
  }
  if (*W < 1 || *S < 1)
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: %.0f workers and %.0f "
                    "servers (at least 1 each)", *W, *S);
  return GS_OK;
}

gs_status gs_cost_ps_nodes_round(const gs_cost_params *c, const gs_cost_ps_nodes *kinds, int n,
                                 double bytes, double chunk_bytes, gs_cost_ps_out *out) {
  if (c == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: NULL argument");
  double W, S;
  GS_CHECK(ps_totals(kinds, n, &W, &S));
  GS_CHECK(check_ps_args(bytes, chunk_bytes));
  double M = bytes, K = drain_chunk(M / S, chunk_bytes), sums = W * M / S * c->gamma;
  double link_w = 0, link_s = 0, link = 0, drain = 0;
  for (int k = 0; k < n; k++) {
    if (kinds[k].count == 0) continue;
    double w = kinds[k].workers, s = kinds[k].servers;
    double L = node_link_bytes(w, s, W, S, M), l = 2.0 * w * s * M / S;
    if (w > 0) link_w = GS_MAX(link_w, L * c->beta);
    if (s > 0) link_s = GS_MAX(link_s, L * c->beta);
    link = GS_MAX(link, GS_MAX(L * c->beta, l * c->beta_local));
    drain = GS_MAX(drain, GS_MAX(s * (W - w), w * (S - s)) * K * c->beta);
  }
  out->worker_s = c->alpha + link_w;
  out->server_s = c->alpha + link_s + sums;
  out->drain_s = drain;
  out->round_s = 2.0 * c->alpha + link + drain + sums;
  return GS_OK;
}

gs_status gs_cost_ps(const gs_cost_params *c, int workers, int servers, double bytes,
                     double chunk_bytes, gs_cost_ps_out *out) {
  gs_cost_ps_nodes kinds[4];
  int n;
  GS_CHECK(gs_cost_ps_layout(workers, servers, 1, 1, kinds, &n));
  return gs_cost_ps_nodes_round(c, kinds, n, bytes, chunk_bytes, out);
}

gs_status gs_cost_ps_nodes_async(const gs_cost_params *c, const gs_cost_ps_nodes *kinds,
                                 int n, double bytes, double chunk_bytes, double compute_s,
                                 double *steps_s) {
  if (c == NULL || steps_s == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: NULL argument");
  double W, S;
  GS_CHECK(ps_totals(kinds, n, &W, &S));
  GS_CHECK(check_ps_args(bytes, chunk_bytes));
  if (!(compute_s >= 0) || !isfinite(compute_s))
    return gs_error(GS_ERR_INVALID_ARG, "parameter-server cost: compute of %g s", compute_s);
  double M = bytes, per_server = M / S, K = drain_chunk(per_server, chunk_bytes);
  double cycle = 0, busy = 0;
  for (int k = 0; k < n; k++) {
    if (kinds[k].count == 0) continue;
    double w = kinds[k].workers, s = kinds[k].servers;
    double L = node_link_bytes(w, s, W, S, M);
    busy = GS_MAX(busy, L * c->beta + (s > 0 ? W * per_server * c->gamma : 0));
    if (w > 0) { /* one worker of this node: its own exchange */
      double away = M * (S - s) / S;
      double t = compute_s + 2.0 * c->alpha +
                 GS_MAX(away * c->beta, 2.0 * (M - away) * c->beta_local) +
                 (S - s) * K * c->beta + per_server * c->gamma;
      cycle = GS_MAX(cycle, t);
    }
  }
  *steps_s = GS_MAX(cycle, busy);
  return GS_OK;
}

gs_status gs_cost_ps_async(const gs_cost_params *c, int workers, int servers, double bytes,
                           double chunk_bytes, double compute_s, double *steps_s) {
  gs_cost_ps_nodes kinds[4];
  int n;
  GS_CHECK(gs_cost_ps_layout(workers, servers, 1, 1, kinds, &n));
  return gs_cost_ps_nodes_async(c, kinds, n, bytes, chunk_bytes, compute_s, steps_s);
}
