/*
 * Compression inside the plan: which groups go compressed, and through which
 * exchange. A policy plans its groups under the lower envelope of the
 * alternatives' affine costs; each group then takes the alternative whose
 * own curve is fastest at its size, and the plan's time is the all-reduce
 * model of plan.c (MG-WFBP, TPDS 2021, Eqs. 6-8) with each message timed by
 * its chosen curve.
 */
#include <math.h>
#include <string.h>

#include "gradsync/compress_comm.h"
#include "plan_internal.h"

static gs_status check_xchg(const gs_plan_xchg *x) {
  if (x->n < 0 || x->n > GS_PLAN_MAX_XCHG)
    return gs_error(GS_ERR_INVALID_ARG, "plan: %d compressed alternatives (0-%d "
                    "allowed)", x->n, GS_PLAN_MAX_XCHG);
  for (int j = 0; j < x->n; j++) {
    if ((unsigned)x->kind[j] >= GS_XCHG_COUNT)
      return gs_error(GS_ERR_INVALID_ARG, "plan: compressed alternative %d has a "
                      "bad exchange %d", j, (int)x->kind[j]);
    for (int i = 0; i < j; i++)
      if (x->kind[i] == x->kind[j])
        return gs_error(GS_ERR_INVALID_ARG, "plan: exchange %s listed twice",
                        gs_xchg_name(x->kind[j]));
    const gs_cost_curve *c = &x->cost[j];
    if (!isfinite(c->a) || !isfinite(c->b) || c->a < 0 || c->b < 0 ||
        c->npoints < 0 || c->npoints > GS_COST_CURVE_POINTS)
      return gs_error(GS_ERR_INVALID_ARG, "plan: %s cost: a and b must be finite "
                      "and >= 0 (a=%g, b=%g), points 0-%d (%d)",
                      gs_xchg_name(x->kind[j]), c->a, c->b, GS_COST_CURVE_POINTS,
                      c->npoints);
  }
  return GS_OK;
}

/* The lower envelope of lines a[j] + b[j]*M over M >= 0, as a curve: a
 * concave piecewise-linear function through the points where the cheapest
 * line changes, continued beyond the last with that line's slope. */
static gs_status lower_envelope(const double *a, const double *b, int n,
                                gs_cost_curve *out) {
  int cur = 0;
  for (int j = 1; j < n; j++)
    if (a[j] < a[cur] || (a[j] == a[cur] && b[j] < b[cur])) cur = j;
  double xs[GS_PLAN_MAX_XCHG + 2], ys[GS_PLAN_MAX_XCHG + 2];
  int np = 0;
  xs[np] = 0.0;
  ys[np++] = a[cur];
  double x = 0.0;
  for (;;) {
    int next = -1;
    double nx = INFINITY;
    for (int j = 0; j < n; j++) {
      if (b[j] >= b[cur]) continue;
      double cx = (a[j] - a[cur]) / (b[cur] - b[j]);
      if (cx < x) cx = x;
      if (cx < nx || (cx == nx && b[j] < b[next])) {
        nx = cx;
        next = j;
      }
    }
    if (next < 0) break;
    if (nx > x) {
      xs[np] = nx;
      ys[np++] = a[cur] + b[cur] * nx;
    }
    x = nx;
    cur = next;
  }
  if (np == 1) return gs_cost_curve_affine(a[cur], b[cur], out);
  memset(out, 0, sizeof *out);
  out->a = ys[0];
  out->b = b[cur];
  out->npoints = np;
  for (int i = 0; i < np; i++) {
    out->bytes[i] = xs[i];
    out->secs[i] = ys[i];
  }
  return GS_OK;
}

/* The time of `bytes` sent through alternative `choice` (-1: dense). */
static double alt_time(const gs_plan_cost *c, const gs_plan_xchg *x, int choice,
                       uint64_t bytes) {
  return plan_msg_time(choice < 0 ? &c->ar : &x->cost[choice], bytes);
}

/* The fastest alternative for a message of `bytes` (dense on ties). */
static int best_alt(const gs_plan_cost *c, const gs_plan_xchg *x, uint64_t bytes) {
  int best = x->required ? 0 : -1;
  double bt = alt_time(c, x, best, bytes);
  for (int j = best + 1; j < x->n; j++) {
    double t = alt_time(c, x, j, bytes);
    if (t < bt) {
      bt = t;
      best = j;
    }
  }
  return best;
}

static int alt_of_kind(const gs_plan_xchg *x, int kind) {
  for (int j = 0; j < x->n; j++)
    if ((int)x->kind[j] == kind) return j;
  return -2;
}

gs_status gs_plan_predict_xchg(const gs_profile *profile, const gs_plan_cost *cost,
                               const gs_plan_xchg *x, const size_t *tensors,
                               const size_t *offsets, size_t ngroups,
                               const int *group_xchg, double *iter_s) {
  if (group_xchg == NULL || x == NULL || x->n == 0)
    return gs_plan_predict(profile, cost, tensors, offsets, ngroups, iter_s);
  if (iter_s == NULL) return gs_error(GS_ERR_INVALID_ARG, "plan predict: NULL output");
  GS_CHECK(check_xchg(x));
  /* The grouping's checks are gs_plan_predict's. */
  double dense;
  GS_CHECK(gs_plan_predict(profile, cost, tensors, offsets, ngroups, &dense));
  plan_ctx ctx;
  GS_CHECK(plan_ctx_init(&ctx, profile, cost));
  gs_status st = GS_OK;
  double end = -INFINITY;
  for (size_t g = 0; g < ngroups && st == GS_OK; g++) {
    int j = group_xchg[g] < 0 ? -1 : alt_of_kind(x, group_xchg[g]);
    if (j == -2) {
      st = gs_error(GS_ERR_INVALID_ARG, "plan predict: group %zu is sent through "
                    "%s, which has no cost here", g, gs_xchg_name(group_xchg[g]));
      break;
    }
    size_t lowest = ctx.L;
    uint64_t bytes = 0;
    for (size_t k = offsets[g]; k < offsets[g + 1]; k++) {
      lowest = GS_MIN(lowest, tensors[k]);
      bytes += plan_bytes(&ctx, tensors[k], tensors[k]);
    }
    end = GS_MAX(end, ctx.ready[lowest]) + alt_time(cost, x, j, bytes);
  }
  if (st == GS_OK) *iter_s = end;
  plan_ctx_free(&ctx);
  return st;
}

/* Labels each group of an all-reduce plan with its fastest alternative and
 * predicts the plan with those choices. */
static gs_status label_plan(const gs_profile *profile, const gs_plan_cost *cost,
                            const gs_plan_xchg *x, gs_plan *pl) {
  pl->group_xchg = gs_malloc(pl->ngroups * sizeof(int));
  if (pl->group_xchg == NULL) return GS_ERR_NOMEM;
  for (size_t g = 0; g < pl->ngroups; g++) {
    uint64_t bytes = 0;
    for (size_t k = pl->offsets[g]; k < pl->offsets[g + 1]; k++)
      bytes += gs_profile_tensor_bytes(profile, pl->tensors[k]);
    int j = best_alt(cost, x, bytes);
    pl->group_xchg[g] = j < 0 ? -1 : (int)x->kind[j];
  }
  return gs_plan_predict_xchg(profile, cost, x, pl->tensors, pl->offsets, pl->ngroups,
                              pl->group_xchg, &pl->predicted_iter_s);
}

gs_status gs_plan_policy_check_compress(const gs_plan_policy *policy,
                                        const gs_compress_spec *z) {
  if (policy == NULL || z == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_plan_policy_check_compress: NULL argument");
  if (z->off || z->automatic || policy->kind != GS_PLAN_DEAR) return GS_OK;
  return gs_error(GS_ERR_INVALID_ARG, "compression '%s' on every group cannot be combined "
                  "with dear, whose reduce-scatter + all-gather groups cannot be sent "
                  "compressed (use auto:%s)", z->normalised, z->normalised);
}

/* One non-auto policy's plan with compression. */
static gs_status make_one_xchg(const gs_profile *profile, const gs_plan_cost *cost,
                               const gs_plan_cost *env, const gs_plan_xchg *x,
                               const gs_plan_policy *pol, gs_plan **out) {
  *out = NULL;
  if (pol->kind == GS_PLAN_DEAR) {
    if (x->required)
      return gs_error(GS_ERR_UNSUPPORTED, "plan: dear's reduce-scatter + all-gather "
                      "groups cannot be sent compressed, and compression was "
                      "required");
    return gs_plan_make_policy(profile, cost, pol, out);
  }
  gs_plan *pl = NULL;
  GS_CHECK(gs_plan_make_policy(profile, env, pol, &pl));
  gs_status st = label_plan(profile, cost, x, pl);
  if (st != GS_OK) {
    gs_plan_free(pl);
    return st;
  }
  *out = pl;
  return GS_OK;
}

typedef struct {
  const gs_profile *profile;
  const gs_plan_cost *cost, *env;
  const gs_plan_xchg *x;
} xchg_arg;

static gs_status make_xchg_cb(void *arg, const gs_plan_policy *policy, gs_plan **out) {
  const xchg_arg *a = arg;
  return a->x->n > 0 ? make_one_xchg(a->profile, a->cost, a->env, a->x, policy, out)
                     : gs_plan_make_policy(a->profile, a->cost, policy, out);
}

gs_status gs_plan_make_xchg(const gs_profile *profile, const gs_plan_cost *cost,
                            const gs_plan_xchg *x, const gs_plan_policy *policy,
                            int allow_dear, gs_plan **out) {
  if (out) *out = NULL;
  if (policy == NULL || out == NULL || cost == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "plan: NULL argument");
  if (x == NULL || x->n == 0) {
    if (policy->kind != GS_PLAN_AUTO || allow_dear)
      return gs_plan_make_policy(profile, cost, policy, out);
  } else {
    GS_CHECK(check_xchg(x));
  }
  gs_plan_xchg none = {0};
  if (x == NULL) x = &none;
  /* The planning cost: the all-reduce replaced by the envelope. */
  gs_plan_cost env = *cost;
  if (x->n > 0) {
    double a[GS_PLAN_MAX_XCHG + 1], b[GS_PLAN_MAX_XCHG + 1];
    int n = 0;
    if (!x->required) {
      a[n] = cost->ar.a;
      b[n++] = cost->ar.b;
    }
    for (int j = 0; j < x->n; j++) {
      a[n] = x->cost[j].a;
      b[n++] = x->cost[j].b;
    }
    GS_CHECK(lower_envelope(a, b, n, &env.ar));
  }
  if (policy->kind != GS_PLAN_AUTO) {
    if (x->n == 0) return gs_plan_make_policy(profile, cost, policy, out);
    return make_one_xchg(profile, cost, &env, x, policy, out);
  }
  /* auto: every other policy, each with its choices made. */
  xchg_arg arg = {profile, cost, &env, x};
  unsigned skip = !allow_dear || x->required ? 1u << GS_PLAN_DEAR : 0;
  return plan_auto_search(make_xchg_cb, &arg, skip, policy, out);
}

/* The price of M dense bytes sent compressed through xk: the collective of
 * its payload and the coding of M / 4 elements (gs_cost_coding_time) as
 * gs_cost_compressed prices them with the rate of that size. */
static double xchg_price(const gs_compressor *c, const gs_cost_coding *coding,
                         const gs_cost_params *params, gs_cost_topo topo, gs_xchg xk,
                         double bytes) {
  const double n = bytes / 4.0;
  /* A single rate is the same at every size (and exactly the rate given). */
  double rate = coding->secs[0] / coding->elems[0];
  if (coding->npoints > 1 && n > 0) rate = gs_cost_coding_time(coding, n) / n;
  gs_cost_compress z;
  /* Payloads are proportional to the dense size: 1 Mi elements stand for
   * the ratio of any group. */
  if (!(rate >= 0) || gs_compress_cost_figures(c, (size_t)1 << 20, rate, &z) != GS_OK)
    return -1.0;
  return gs_cost_compressed(params, topo, xk, &z, bytes);
}

/* One exchange's curve: its price at 0 and at each size where the coding
 * time was measured, beyond the last with the slope that follows it. Both
 * the collective (affine in M) and the coding time (linear between the
 * measured sizes, gradsync/cost.h) are linear between these points, so the
 * curve is the price at every size, not an approximation. A single rate
 * gives the line a + b*M without points. The line the planner's envelope
 * takes (a, b: the price at 0 and the slope beyond the measured sizes) is
 * the price of large messages, which is never below the curve when the
 * rate grows with the size. */
static gs_status xchg_curve(const gs_compressor *c, const gs_cost_coding *coding,
                            const gs_cost_params *params, gs_cost_topo topo, gs_xchg xk,
                            gs_cost_curve *out) {
  const int np = coding->npoints > 1 ? coding->npoints : 0; /* curve points - 1 */
  double xs[GS_COST_CODING_POINTS + 1], ys[GS_COST_CODING_POINTS + 1];
  xs[0] = 0;
  ys[0] = xchg_price(c, coding, params, topo, xk, 0);
  for (int i = 0; i < np; i++) {
    xs[i + 1] = 4.0 * coding->elems[i];
    ys[i + 1] = xchg_price(c, coding, params, topo, xk, xs[i + 1]);
  }
  const double far = xs[np] + fmax(1e6, xs[np]);
  const double yfar = xchg_price(c, coding, params, topo, xk, far);
  for (int i = 0; i <= np; i++)
    if (ys[i] < 0 || (i > 0 && ys[i] < ys[i - 1])) return GS_ERR_UNSUPPORTED;
  if (yfar < ys[np]) return GS_ERR_UNSUPPORTED;
  GS_CHECK(gs_cost_curve_affine(ys[0], (yfar - ys[np]) / (far - xs[np]), out));
  if (np == 0) return GS_OK;
  out->npoints = np + 1;
  memcpy(out->bytes, xs, (size_t)(np + 1) * sizeof *xs);
  memcpy(out->secs, ys, (size_t)(np + 1) * sizeof *ys);
  return GS_OK;
}

gs_status gs_plan_xchg_from_compressor(const gs_compressor *c, const gs_cost_coding *coding,
                                       const gs_cost_params *params_in, gs_cost_topo topo,
                                       const gs_cost_curve *dense, int required,
                                       gs_plan_xchg *x) {
  if (c == NULL || coding == NULL || params_in == NULL || x == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "plan: compression costs: NULL argument");
  memset(x, 0, sizeof *x);
  GS_CHECK(gs_cost_coding_check(coding));
  gs_compressor_info info;
  GS_CHECK(gs_compressor_info_get(c, &info));
  gs_cost_params params = *params_in;
  if (dense != NULL && topo.ranks > 1) {
    /* Two sizes on the dense line determine alpha and beta. */
    memset(params.fit, 0, sizeof params.fit);
    double sz[2] = {1 << 20, 16 << 20};
    double secs[2] = {dense->a + dense->b * sz[0], dense->a + dense->b * sz[1]};
    if (secs[1] > secs[0])
      GS_CHECK(gs_cost_calibrate_allreduce(&params, topo, GS_ALGO_RING, sz, secs, 2));
  }
  x->required = required != 0;
  /* Required compression keeps the compressor's own exchange, whatever the
   * costs: which exchange carries a sparse payload changes the result
   * (gTop-k keeps a global top-k of the sum), and a run must not depend on
   * timings. With auto, the plan chooses among all of them. */
  const gs_xchg own = gs_compress_default_xchg(&info);
  for (int k = 0; k < GS_XCHG_COUNT && x->n < GS_PLAN_MAX_XCHG; k++) {
    gs_xchg xk = (gs_xchg)k;
    if (x->required && xk != own) continue;
    if (gs_compress_xchg_check(&info, xk) != GS_OK) continue;
    if (xchg_curve(c, coding, &params, topo, xk, &x->cost[x->n]) != GS_OK) continue;
    x->kind[x->n++] = xk;
  }
  gs_clear_error();
  if (x->n == 0)
    return gs_error(GS_ERR_UNSUPPORTED, "plan: compression %s: no exchange can carry "
                    "its payloads", gs_compressor_spec(c));
  return GS_OK;
}
