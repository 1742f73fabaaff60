/*
 * The configuration search (gradsync/search.h, docs/PLANNING.md "Search").
 *
 * At each worker count the costs come from gs_plan_cost_from_net and each
 * policy's time from gs_plan_make; one worker's time is the plan under a
 * zero cost. Compression candidates are planned at the pick's count through
 * gs_plan_xchg_from_compressor and gs_plan_make_xchg, the path of `gradsync
 * plan --compress` and of the engine. Nothing here prices a message: the search only compares what
 * the planner predicts.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
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
  if (cfg->ps_servers < 0)
    return gs_error(GS_ERR_INVALID_ARG, "search: %d parameter servers (0: the fewest that keep "
                    "up, or a count)", cfg->ps_servers);
  if (cfg->ps_slots < 0 || (cfg->ps_slots > 0 && cfg->ps_servers < 1))
    return gs_error(GS_ERR_INVALID_ARG, "search: parameter servers %d a node need a count of "
                    "them (ps_servers %d)", cfg->ps_slots, cfg->ps_servers);
  if (!(cfg->ps_async >= 0 && cfg->ps_async <= 1))
    return gs_error(GS_ERR_INVALID_ARG, "search: asynchronous share %g of the parameter "
                    "servers' steps is outside [0, 1]", cfg->ps_async);
  if (!(cfg->target_efficiency >= 0 && cfg->target_efficiency <= 1))
    return gs_error(GS_ERR_INVALID_ARG, "search: target efficiency %g is outside [0, 1]",
                    cfg->target_efficiency);
  if (cfg->ncompress > 0 && cfg->compress == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "search: %zu compression candidates and no list",
                    cfg->ncompress);
  if (!(cfg->compress_min_gain >= 0 && cfg->compress_min_gain < 1))
    return gs_error(GS_ERR_INVALID_ARG, "search: compression's minimum gain %g is outside "
                    "[0, 1)", cfg->compress_min_gain);
  /* Every candidate is checked before any planning, so that a bad one is
   * refused whatever the count picked. */
  for (size_t i = 0; i < cfg->ncompress; i++) {
    const gs_search_compressor *c = &cfg->compress[i];
    gs_compress_spec z;
    if (c->spec == NULL)
      return gs_error(GS_ERR_INVALID_ARG, "search: compression candidate %zu has no spec", i);
    GS_CHECK(gs_compress_spec_parse(c->spec, &z));
    if (z.off)
      return gs_error(GS_ERR_INVALID_ARG, "search: compression candidate '%s' is dense (the "
                      "search always weighs dense)", c->spec);
    if (c->coding.npoints == 0 && !(c->secs_per_elem >= 0 && isfinite(c->secs_per_elem)))
      return gs_error(GS_ERR_INVALID_ARG, "search: compression %s: coding rate %g s per "
                      "element must be finite and >= 0", c->spec, c->secs_per_elem);
    if (c->coding.npoints != 0 && gs_cost_coding_check(&c->coding) != GS_OK) {
      char why[512];
      gs__error_copy(why, sizeof why);
      return gs_error(GS_ERR_INVALID_ARG, "search: compression %s: %s", c->spec, why);
    }
  }
  return GS_OK;
}

/* The counts tried: lo, doubling, up to hi and hi itself. Both are
 * multiples of the workers per node, and so is every count. */
static long next_count(long w, long hi) { return w * 2 > hi && w < hi ? hi : w * 2; }

/* Parameter servers at one count: cfg->ps_servers of them when that is
 * > 0, else the fewest servers (1 .. 4 W) whose side of the round is no
 * slower than a worker node's, found by bisection since a server's share
 * shrinks as servers are added; 4 W when even that many leave the servers'
 * sums the bottleneck. Laid out as cfg->ps_slots says. */
static gs_status ps_round(const gs_search_config *cfg, int workers, int servers, double bytes,
                          gs_cost_ps_nodes kinds[4], int *n, gs_cost_ps_out *o) {
  int own = cfg->ps_slots == 0;
  GS_CHECK(gs_cost_ps_layout(workers, servers, own ? cfg->per_node : cfg->ps_slots, own, kinds,
                             n));
  return gs_cost_ps_nodes_round(cfg->net, kinds, *n, bytes, (double)GS_PS_CHUNK_BYTES, o);
}

static gs_status search_ps(const gs_profile *profile, const gs_search_config *cfg, int workers,
                           double one_worker_s, gs_search_point *pt) {
  double bytes = 0;
  for (size_t i = 0; i < profile->ntensors; i++)
    bytes += (double)gs_profile_tensor_bytes(profile, i);
  int fixed = cfg->ps_servers, n;
  gs_cost_ps_nodes kinds[4];
  gs_cost_ps_out o;
  long lo = fixed > 0 ? fixed : 1, hi = fixed > 0 ? fixed : 4L * workers;
  while (lo < hi) {
    long mid = lo + (hi - lo) / 2;
    GS_CHECK(ps_round(cfg, workers, (int)GS_MIN(mid, (long)INT_MAX), bytes, kinds, &n, &o));
    if (o.server_s <= o.worker_s) hi = mid;
    else lo = mid + 1;
  }
  pt->ps_servers = (int)GS_MIN(lo, (long)INT_MAX);
  GS_CHECK(ps_round(cfg, workers, pt->ps_servers, bytes, kinds, &n, &o));
  pt->ps_round_s = o.round_s;
  pt->ps_iter_s = one_worker_s + o.round_s;
  if (cfg->ps_async > 0) { /* the mean step over BSP's and the asynchronous ones */
    double steps_s;
    GS_CHECK(gs_cost_ps_nodes_async(cfg->net, kinds, n, bytes, (double)GS_PS_CHUNK_BYTES,
                                    one_worker_s, &steps_s));
    pt->ps_iter_s = (1 - cfg->ps_async) * pt->ps_iter_s + cfg->ps_async * steps_s;
  }
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
    if (gs__faster(pt->iter_s[k], pt->iter_s[pt->best])) pt->best = (gs_plan_policy_kind)k;
  }
  GS_CHECK(search_ps(profile, cfg, workers, one_worker_s, pt));
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

/* The profile as one of `workers` workers runs it: with a global batch
 * limit, at the largest per-worker batch within it (and the cap), compute
 * taken as linear in the batch (the profile's times scaled by batch /
 * batch_size), the gradients' bytes as independent of it. *scaled is a
 * shallow copy whose tensors are new (release with gs_free) when
 * *owned is 1; else it is the profile itself. */
static gs_status profile_at(const gs_profile *profile, const gs_search_config *cfg,
                            int workers, gs_profile *scaled, int *owned) {
  *scaled = *profile;
  *owned = 0;
  if (cfg->max_global_batch <= 0) return GS_OK;
  int batch = cfg->max_global_batch / workers;
  if (cfg->max_worker_batch > 0) batch = GS_MIN(batch, cfg->max_worker_batch);
  double f = (double)batch / profile->batch_size;
  scaled->batch_size = batch;
  scaled->forward_s *= f;
  scaled->tensors = gs_malloc(profile->ntensors * sizeof *scaled->tensors);
  if (scaled->tensors == NULL) return GS_ERR_NOMEM;
  *owned = 1;
  for (size_t i = 0; i < profile->ntensors; i++) {
    scaled->tensors[i] = profile->tensors[i];
    scaled->tensors[i].backward_s *= f;
  }
  return GS_OK;
}

/* One compression candidate at one count: the compressor's
 * alternatives priced on the network (gs_plan_xchg_from_compressor, as
 * `gradsync plan --compress` and the engine price them), auto's plan with
 * them (dear among the policies when the spec lets groups stay dense), and
 * the bytes one worker puts on the wire per step under that plan. */
static gs_status search_compressed(const gs_profile *profile, const gs_search_config *cfg,
                                   const gs_search_point *pt, const gs_search_compressor *cand,
                                   gs_search_compressed *out) {
  gs_compress_spec z;
  GS_CHECK(gs_compress_spec_parse(cand->spec, &z));
  snprintf(out->spec, sizeof out->spec, "%s", z.normalised);
  gs_cost_topo topo = {pt->workers, pt->nodes};
  gs_plan_cost cost;
  GS_CHECK(gs_plan_cost_from_net(cfg->net, topo, cfg->algo, &cost));
  gs_compressor *c = NULL;
  GS_CHECK(gs_compressor_create(z.compressor, &c));
  gs_compressor_info info;
  gs_plan_xchg x;
  gs_plan_policy pol;
  gs_plan *pl = NULL;
  gs_status st = gs_compressor_info_get(c, &info);
  gs_cost_coding coding = cand->coding;
  if (st == GS_OK && coding.npoints == 0) st = gs_cost_coding_rate(cand->secs_per_elem, &coding);
  if (st == GS_OK)
    st = gs_plan_xchg_from_compressor(c, &coding, cfg->net, topo, NULL, !z.automatic, &x);
  /* auto's plan: the fastest policy with these alternatives (dear only
   * when groups may stay dense), the first in the planner's order on
   * ties. (A tie going to the fewest messages was tried and measured
   * worse: bench/results/search_grid.md, docs/PLANNING.md.) */
  if (st == GS_OK) st = gs_plan_policy_parse("auto", &pol);
  if (st == GS_OK) st = gs_plan_make_xchg(profile, &cost, &x, &pol, 1, &pl);
  if (st != GS_OK) goto done;
  out->policy = pl->chosen;
  out->iter_s = pl->predicted_iter_s;
  out->efficiency = out->iter_s > 0 ? pt->one_worker_s / out->iter_s : 1.0;
  out->groups = pl->ngroups;
  out->compressed_groups = 0;
  out->exchange = GS_XCHG_COUNT;
  out->bytes_per_step = 0;
  for (size_t g = 0; g < pl->ngroups; g++) {
    double dense = 0;
    size_t numel = 0;
    for (size_t k = pl->offsets[g]; k < pl->offsets[g + 1]; k++) {
      dense += (double)gs_profile_tensor_bytes(profile, pl->tensors[k]);
      numel += profile->tensors[pl->tensors[k]].numel;
    }
    if (pl->group_xchg == NULL || pl->group_xchg[g] < 0) {
      out->bytes_per_step += dense;
      continue;
    }
    if (out->compressed_groups++ == 0) out->exchange = (gs_xchg)pl->group_xchg[g];
    for (int r = 0; r < info.rounds && st == GS_OK; r++) {
      size_t b = 0;
      st = gs_compressor_payload_bytes(c, numel, r, &b);
      out->bytes_per_step += (double)b;
    }
  }
done:
  gs_plan_free(pl);
  gs_compressor_destroy(c);
  return st;
}

/* Every candidate at one count (profile at that count's batch), into
 * out[0 .. ncompress-1], and the count's choice: the fastest candidate when
 * it saves at least compress_min_gain of the dense time (the faster of the
 * all-reduce and the parameter servers), else -1. */
static gs_status compress_at(const gs_profile *profile, const gs_search_config *cfg,
                             const gs_search_point *pt, gs_search_compressed *out,
                             int *pick) {
  double dense = GS_MIN(pt->iter_s[pt->best], pt->ps_iter_s);
  *pick = -1;
  for (size_t i = 0; i < cfg->ncompress; i++) {
    gs_search_compressed *e = &out[i];
    gs_status st = search_compressed(profile, cfg, pt, &cfg->compress[i], e);
    if (st != GS_OK) {
      char why[400];
      snprintf(why, sizeof why, "%s", gs_last_error());
      return gs_error(st, "search: compression %s at %d workers: %s", cfg->compress[i].spec,
                      pt->workers, why);
    }
    e->gain = dense > 0 ? 1 - e->iter_s / dense : 0;
    if (e->iter_s <= (1 - cfg->compress_min_gain) * dense && e->iter_s < dense &&
        (*pick < 0 || e->iter_s < out[*pick].iter_s))
      *pick = (int)i;
  }
  return GS_OK;
}

/* Plans every policy at one count (cfg->per_node per node), at the
 * per-worker batch the configuration gives it, and every compression
 * candidate there (into `scratch`, cfg->ncompress entries; the count keeps
 * only its choice). */
static gs_status search_point(const gs_profile *profile, const gs_search_config *cfg,
                              int workers, double one_worker_s, gs_search_compressed *scratch,
                              gs_search_point *pt) {
  gs_profile scaled;
  int owned;
  GS_CHECK(profile_at(profile, cfg, workers, &scaled, &owned));
  pt->batch = scaled.batch_size;
  pt->one_worker_s = one_worker_s;
  gs_status st = owned ? one_worker_time(&scaled, &pt->one_worker_s) : GS_OK;
  if (st == GS_OK) st = search_point_at(&scaled, cfg, workers, pt);
  pt->compress_pick = -1;
  if (st == GS_OK && workers > 1 && cfg->ncompress > 0)
    st = compress_at(&scaled, cfg, pt, scratch, &pt->compress_pick);
  if (owned) gs_free(scaled.tensors);
  if (st != GS_OK) return st;
  /* What the count is chosen on: the all-reduce, compressed when that is
   * this count's choice (neither needs machines beyond the workers). */
  pt->compress_iter_s = pt->compress_pick >= 0 ? scratch[pt->compress_pick].iter_s : 0;
  pt->pick_iter_s = pt->compress_pick >= 0 ? pt->compress_iter_s : pt->iter_s[pt->best];
  double t = pt->pick_iter_s;
  pt->pick_efficiency = t > 0 ? pt->one_worker_s / t : 1.0;
  pt->pick_samples_s = pt->batch > 0 && t > 0 ? workers * (double)pt->batch / t : 0;
  return GS_OK;
}

/* Every candidate at the pick's count and its batch, kept in the result. */
static gs_status search_compression(const gs_profile *profile, const gs_search_config *cfg,
                                    gs_search_result *r) {
  const gs_search_point *pt = &r->points[r->pick];
  r->compress_pick = -1;
  r->dense_iter_s = GS_MIN(pt->iter_s[pt->best], pt->ps_iter_s);
  r->dense_bytes_per_step = r->gradient_bytes;
  if (cfg->ncompress == 0 || pt->workers < 2) return GS_OK;
  r->compressed = gs_calloc(cfg->ncompress, sizeof *r->compressed);
  if (r->compressed == NULL) return GS_ERR_NOMEM;
  r->ncompressed = cfg->ncompress;
  gs_profile scaled;
  int owned;
  GS_CHECK(profile_at(profile, cfg, pt->workers, &scaled, &owned));
  gs_status st = compress_at(&scaled, cfg, pt, r->compressed, &r->compress_pick);
  if (owned) gs_free(scaled.tensors);
  if (st == GS_OK && r->compress_pick >= 0) r->sync = GS_SEARCH_ALLREDUCE;
  return st;
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
  gs_search_compressed *scratch = gs_calloc(cfg->ncompress + 1, sizeof *scratch);
  if (r.points == NULL || scratch == NULL) {
    gs_free(r.points);
    gs_free(scratch);
    return GS_ERR_NOMEM;
  }
  gs_status st = GS_OK;
  for (long w = lo; r.npoints < n; w = next_count(w, hi)) {
    st = search_point(profile, cfg, (int)w, r.one_worker_s, scratch, &r.points[r.npoints]);
    if (st != GS_OK) break;
    r.npoints++;
  }
  gs_free(scratch);
  if (st != GS_OK) goto fail;

  /* The recommendation: with a target efficiency, the most workers that
   * meet it (none: the fewest tried, not met); for throughput, the most
   * workers per second of iteration, which is the most samples per second
   * whatever the batch. */
  double target = cfg->target_efficiency;
  r.target_met = target > 0 ? 0 : 1;
  for (size_t i = 0; i < r.npoints; i++) {
    const gs_search_point *p = &r.points[i], *q = &r.points[r.pick];
    if (target > 0) {
      if (p->pick_efficiency >= target) {
        r.pick = i;
        r.target_met = 1;
      }
    } else if (cfg->max_global_batch > 0 ? p->pick_samples_s > q->pick_samples_s
               : p->workers / p->pick_iter_s > q->workers / q->pick_iter_s) {
      r.pick = i;
    }
  }

  /* Parameter servers at the pick's count when they are predicted faster;
   * compression (the same choice as the count's, kept in full) when it
   * beats the faster of the two by the margin. */
  const gs_search_point *q = &r.points[r.pick];
  r.sync = q->ps_iter_s < q->iter_s[q->best] ? GS_SEARCH_PS : GS_SEARCH_ALLREDUCE;
  GS_CHECK_GOTO(search_compression(profile, cfg, &r), st, fail);

  /* What the policies hide behind the backward pass at the pick: every
   * gradient in one all-reduce, priced as the plans price it (auto: the
   * cost module's best algorithm at that size; until 2026-12-06 the ring
   * always, 264 ms for ResNet-50 on 1024 workers at 10gbit where the
   * planner's single all-reduce takes 213). */
  const gs_search_point *p = &r.points[r.pick];
  if (p->workers > 1) {
    gs_cost_topo topo = {p->workers, p->nodes};
    r.allreduce_all_s = gs_cost_allreduce(cfg->net, topo, cfg->algo, r.gradient_bytes);
  }
  *out = r;
  return GS_OK;
fail:
  gs_search_result_free(&r);
  return st;
}

void gs_search_result_free(gs_search_result *r) {
  if (r == NULL) return;
  gs_free(r->points);
  gs_free(r->compressed);
  r->points = NULL;
  r->npoints = 0;
  r->compressed = NULL;
  r->ncompressed = 0;
}
