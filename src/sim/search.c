/*
 * The configuration search (gradsync/search.h, docs/PLANNING.md "Search").
 *
 * At each worker count the costs come from gs_plan_cost_from_net and each
 * policy's time from gs_plan_make; one worker's time is the plan under a
 * zero cost. Nothing here prices a message: the search only compares what
 * the planner predicts.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "gradsync/search.h"
#include "gs_internal.h"

static gs_status search_check(const gs_profile *profile, const gs_search_config *cfg,
                              gs_search_result *out) {
  if (profile == NULL || cfg == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "search: NULL argument");
  if (cfg->net == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "search: no network cost parameters");
  if (cfg->workers < 0 || cfg->max_workers < 0 || (cfg->workers > 0) == (cfg->max_workers > 0))
    return gs_error(GS_ERR_INVALID_ARG, "search: give one of workers (%d) and max_workers "
                    "(%d), positive", cfg->workers, cfg->max_workers);
  int count = cfg->workers > 0 ? cfg->workers : cfg->max_workers;
  if (cfg->per_node < 1 || count % cfg->per_node != 0)
    return gs_error(GS_ERR_INVALID_ARG, "search: %d workers per node do not divide %d "
                    "workers", cfg->per_node, count);
  if (cfg->max_global_batch < 0 || cfg->max_worker_batch < 0)
    return gs_error(GS_ERR_INVALID_ARG, "search: batch limits %d (global) and %d (per "
                    "worker) must be >= 0", cfg->max_global_batch, cfg->max_worker_batch);
  if (cfg->max_global_batch > 0 && profile->batch_size <= 0)
    return gs_error(GS_ERR_INVALID_ARG, "search: profile %s has no batch size to scale "
                    "its compute from", profile->name ? profile->name : "(unnamed)");
  if (cfg->max_global_batch > 0 && cfg->max_global_batch < count)
    return gs_error(GS_ERR_INVALID_ARG, "search: a global batch of %d leaves some of %d "
                    "workers without a sample", cfg->max_global_batch, count);
  if (!(cfg->target_efficiency >= 0 && cfg->target_efficiency <= 1))
    return gs_error(GS_ERR_INVALID_ARG, "search: target efficiency %g is outside [0, 1]",
                    cfg->target_efficiency);
  return GS_OK;
}

/* The counts tried: lo, doubling, up to hi and hi itself. Both are
 * multiples of the workers per node, and so is every count. */
static long next_count(long w, long hi) { return w * 2 > hi && w < hi ? hi : w * 2; }

/* Parameter servers at one count: the fewest servers (1 .. 4 W) whose side
 * of the round is no slower than a worker's, found by bisection since a
 * server's share shrinks as servers are added; 4 W when even that many
 * leave the servers' sums the bottleneck. */
static gs_status search_ps(const gs_profile *profile, const gs_cost_params *net, int workers,
                           double one_worker_s, gs_search_point *pt) {
  double bytes = 0;
  for (size_t i = 0; i < profile->ntensors; i++)
    bytes += (double)gs_profile_tensor_bytes(profile, i);
  gs_cost_ps_out o;
  long lo = 1, hi = 4L * workers;
  while (lo < hi) {
    long mid = lo + (hi - lo) / 2;
    GS_CHECK(gs_cost_ps(net, workers, (int)GS_MIN(mid, (long)INT_MAX), bytes, &o));
    if (o.server_s <= o.worker_s) hi = mid;
    else lo = mid + 1;
  }
  pt->ps_servers = (int)GS_MIN(lo, (long)INT_MAX);
  GS_CHECK(gs_cost_ps(net, workers, pt->ps_servers, bytes, &o));
  pt->ps_round_s = o.round_s;
  pt->ps_iter_s = one_worker_s + o.round_s;
  return GS_OK;
}

/* Plans every policy at one count for `profile` (the batch's times). */
static gs_status search_point_at(const gs_profile *profile, const gs_search_config *cfg,
                                 int workers, gs_search_point *pt) {
  double one_worker_s = pt->one_worker_s;
  gs_cost_topo topo = {workers, workers / cfg->per_node};
  gs_plan_cost cost;
  GS_CHECK(gs_plan_cost_from_net(cfg->net, topo, cfg->algo, &cost));
  pt->workers = workers;
  pt->nodes = topo.nodes;
  pt->backward_s = 0;
  for (size_t i = 0; i < profile->ntensors; i++) pt->backward_s += profile->tensors[i].backward_s;
  pt->best = (gs_plan_policy_kind)0;
  for (int k = 0; k < GS_SEARCH_POLICIES; k++) {
    gs_plan *pl = NULL;
    GS_CHECK(gs_plan_make(profile, &cost, gs_plan_policy_name((gs_plan_policy_kind)k), &pl));
    pt->iter_s[k] = pl->predicted_iter_s;
    gs_plan_free(pl);
    if (pt->iter_s[k] < pt->iter_s[pt->best]) pt->best = (gs_plan_policy_kind)k;
  }
  GS_CHECK(search_ps(profile, cfg->net, workers, one_worker_s, pt));
  double t = pt->iter_s[pt->best];
  pt->efficiency = t > 0 ? one_worker_s / t : 1.0;
  pt->samples_s = pt->batch > 0 && t > 0 ? workers * (double)pt->batch / t : 0;
  return GS_OK;
}

/* One worker's time: the plan with no communication. */
static gs_status one_worker_time(const gs_profile *profile, double *out) {
  gs_plan_cost zero;
  gs_plan *one = NULL;
  GS_CHECK(gs_plan_cost_from_ab(0, 0, &zero));
  GS_CHECK(gs_plan_make(profile, &zero, "wfbp", &one));
  *out = one->predicted_iter_s;
  gs_plan_free(one);
  return GS_OK;
}

/* Plans every policy at one count (cfg->per_node per node), at the
 * per-worker batch the configuration gives it. */
static gs_status search_point(const gs_profile *profile, const gs_search_config *cfg,
                              int workers, double one_worker_s, gs_search_point *pt) {
  pt->batch = profile->batch_size;
  if (cfg->max_global_batch > 0) {
    /* The largest per-worker batch within the global limit; compute is
     * taken as linear in the batch (the profile's times scaled by
     * batch / batch_size), the gradients' bytes as independent of it. */
    pt->batch = cfg->max_global_batch / workers;
    if (cfg->max_worker_batch > 0) pt->batch = GS_MIN(pt->batch, cfg->max_worker_batch);
    double f = (double)pt->batch / profile->batch_size;
    gs_profile scaled = *profile;
    scaled.batch_size = pt->batch;
    scaled.forward_s *= f;
    scaled.tensors = gs_malloc(profile->ntensors * sizeof *scaled.tensors);
    if (scaled.tensors == NULL) return GS_ERR_NOMEM;
    for (size_t i = 0; i < profile->ntensors; i++) {
      scaled.tensors[i] = profile->tensors[i];
      scaled.tensors[i].backward_s *= f;
    }
    gs_status st = one_worker_time(&scaled, &pt->one_worker_s);
    if (st == GS_OK) st = search_point_at(&scaled, cfg, workers, pt);
    gs_free(scaled.tensors);
    return st;
  }
  pt->one_worker_s = one_worker_s;
  return search_point_at(profile, cfg, workers, pt);
}

gs_status gs_search_run(const gs_profile *profile, const gs_search_config *cfg,
                        gs_search_result *out) {
  if (out) memset(out, 0, sizeof *out);
  GS_CHECK(search_check(profile, cfg, out));
  GS_CHECK(gs_profile_validate(profile));
  gs_search_result r;
  memset(&r, 0, sizeof r);
  for (size_t i = 0; i < profile->ntensors; i++) {
    r.backward_s += profile->tensors[i].backward_s;
    r.gradient_bytes += (double)gs_profile_tensor_bytes(profile, i);
  }
  GS_CHECK(one_worker_time(profile, &r.one_worker_s));

  long lo = cfg->workers > 0 ? cfg->workers : cfg->per_node;
  long hi = cfg->workers > 0 ? cfg->workers : cfg->max_workers;
  size_t n = 0;
  for (long w = lo;; w = next_count(w, hi)) {
    n++;
    if (w >= hi) break;
  }
  r.points = gs_calloc(n, sizeof *r.points);
  if (r.points == NULL) return GS_ERR_NOMEM;
  gs_status st = GS_OK;
  for (long w = lo; r.npoints < n; w = next_count(w, hi)) {
    GS_CHECK_GOTO(search_point(profile, cfg, (int)w, r.one_worker_s, &r.points[r.npoints]),
                  st, fail);
    r.npoints++;
  }

  /* The recommendation: with a target efficiency, the most workers that
   * meet it (none: the fewest tried, not met); for throughput, the most
   * workers per second of iteration, which is the most samples per second
   * whatever the batch. */
  double target = cfg->target_efficiency;
  r.target_met = target > 0 ? 0 : 1;
  for (size_t i = 0; i < r.npoints; i++) {
    const gs_search_point *p = &r.points[i], *q = &r.points[r.pick];
    if (target > 0) {
      if (p->efficiency >= target) {
        r.pick = i;
        r.target_met = 1;
      }
    } else if (cfg->max_global_batch > 0 ? p->samples_s > q->samples_s
               : p->workers / p->iter_s[p->best] > q->workers / q->iter_s[q->best]) {
      r.pick = i;
    }
  }

  /* Parameter servers at the pick's count when they are predicted faster. */
  const gs_search_point *q = &r.points[r.pick];
  r.sync = q->ps_iter_s < q->iter_s[q->best] ? GS_SEARCH_PS : GS_SEARCH_ALLREDUCE;

  /* What the policies hide behind the backward pass at the pick: every
   * gradient in one all-reduce, on the cost module's line. */
  const gs_search_point *p = &r.points[r.pick];
  if (p->workers > 1) {
    gs_cost_topo topo = {p->workers, p->nodes};
    double a, b;
    gs_cost_allreduce_linear(cfg->net, topo, cfg->algo == GS_ALGO_AUTO ? GS_ALGO_RING : cfg->algo,
                             &a, &b);
    r.allreduce_all_s = a + b * r.gradient_bytes;
  }
  *out = r;
  return GS_OK;
fail:
  gs_free(r.points);
  return st;
}

void gs_search_result_free(gs_search_result *r) {
  if (r == NULL) return;
  gs_free(r->points);
  r->points = NULL;
  r->npoints = 0;
}
