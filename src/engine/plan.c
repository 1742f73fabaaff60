/*
 * Merge plans under the all-reduce model of MG-WFBP (Shi, Chu & Li, TPDS
 * 2021, Eqs. 6-8) and the policies that make them: wfbp, single, bucket
 * (PyTorch DDP), mgwfbp (Algorithm 1), optimal (a dynamic program) and auto.
 * DeAR lives in plan_dear.c. gs_plan_predict is the one simulation of the
 * model; every policy's predicted time comes from it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

/* ---- Context: prefix sums every policy reads --------------------------- */

#define PLAN_MAX_BYTES (UINT64_C(1) << 53)

/* A cost curve the planner can trust: finite, non-negative, points by
 * increasing size with non-decreasing times (gs_cost_curve_fit's output). */
static gs_status check_curve(const gs_cost_curve *c, const char *what) {
  if (!isfinite(c->a) || !isfinite(c->b) || c->a < 0 || c->b < 0)
    return gs_error(GS_ERR_INVALID_ARG, "plan: %s cost: a and b must be finite "
                    "and >= 0 (a=%g, b=%g)", what, c->a, c->b);
  if (c->npoints < 0 || c->npoints > GS_COST_CURVE_POINTS)
    return gs_error(GS_ERR_INVALID_ARG, "plan: %s cost: %d points (0-%d allowed)",
                    what, c->npoints, GS_COST_CURVE_POINTS);
  for (int i = 0; i < c->npoints; i++) {
    if (!isfinite(c->bytes[i]) || !isfinite(c->secs[i]) || c->secs[i] < 0 ||
        (i > 0 && (c->bytes[i] <= c->bytes[i - 1] || c->secs[i] < c->secs[i - 1])))
      return gs_error(GS_ERR_INVALID_ARG, "plan: %s cost: point %d (%g B, %g s) "
                      "breaks the increasing sizes / non-decreasing times",
                      what, i, c->bytes[i], c->secs[i]);
  }
  return GS_OK;
}

gs_status plan_ctx_init(plan_ctx *ctx, const gs_profile *p, const gs_plan_cost *c) {
  memset(ctx, 0, sizeof *ctx);
  GS_CHECK(gs_profile_validate(p));
  if (c == NULL) return gs_error(GS_ERR_INVALID_ARG, "plan: NULL cost");
  GS_CHECK(check_curve(&c->ar, "all-reduce"));
  GS_CHECK(check_curve(&c->rs, "reduce-scatter"));
  GS_CHECK(check_curve(&c->ag, "all-gather"));
  size_t L = p->ntensors;
  ctx->profile = p;
  ctx->cost = c;
  ctx->L = L;
  ctx->ready = gs_malloc(L * sizeof(double));
  ctx->bwd_after = gs_malloc((L + 1) * sizeof(double));
  ctx->fwd_before = gs_malloc((L + 1) * sizeof(double));
  ctx->bytes_before = gs_malloc((L + 1) * sizeof(uint64_t));
  ctx->memo_ar = gs_calloc(1, sizeof *ctx->memo_ar);
  if (!ctx->ready || !ctx->bwd_after || !ctx->fwd_before || !ctx->bytes_before ||
      !ctx->memo_ar) {
    plan_ctx_free(ctx);
    return GS_ERR_NOMEM;
  }
  /* Eq. 6: tau_b(L) = t_f, tau_b(l) = tau_b(l+1) + t_b(l+1); tensor i is
   * ready at tau_b + t_b of its layer. */
  double acc = p->forward_s;
  ctx->bwd_after[L] = 0.0;
  for (size_t i = L; i-- > 0;) {
    acc += p->tensors[i].backward_s;
    ctx->ready[i] = acc;
    ctx->bwd_after[i] = ctx->bwd_after[i + 1] + p->tensors[i].backward_s;
  }
  /* DeAR's forward model: forward_s spread over tensors in proportion to
   * their backward time (evenly if backward is all zero). */
  double total_bwd = ctx->bwd_after[0];
  ctx->fwd_before[0] = 0.0;
  ctx->bytes_before[0] = 0;
  for (size_t i = 0; i < L; i++) {
    if (p->tensors[i].numel > PLAN_MAX_BYTES / gs_dtype_size(p->tensors[i].dtype)) {
      plan_ctx_free(ctx);
      return gs_error(GS_ERR_INVALID_ARG, "plan: %s: tensors[%zu]: %zu elements "
                      "hold more than 2^53 bytes", p->name ? p->name : "profile", i,
                      p->tensors[i].numel);
    }
    double share = total_bwd > 0 ? p->tensors[i].backward_s / total_bwd
                                 : 1.0 / (double)L;
    ctx->fwd_before[i + 1] = ctx->fwd_before[i] + p->forward_s * share;
    ctx->bytes_before[i + 1] =
        ctx->bytes_before[i] + (uint64_t)gs_profile_tensor_bytes(p, i);
    /* Sizes are compared as doubles: keep every sum exact (and unwrapped). */
    if (ctx->bytes_before[i + 1] > PLAN_MAX_BYTES ||
        ctx->bytes_before[i + 1] < ctx->bytes_before[i]) {
      plan_ctx_free(ctx);
      return gs_error(GS_ERR_INVALID_ARG, "plan: %s: tensors 0..%zu hold more than "
                      "2^53 bytes", p->name ? p->name : "profile", i);
    }
  }
  /* Every plan's predicted time is at most twice the compute time plus L
   * messages of every kind, each of the whole model: refuse times and costs
   * whose sum would not be finite (1e308 s per message, say), so that every
   * prediction is a number. */
  const uint64_t whole = ctx->bytes_before[L];
  const double compute = p->forward_s + ctx->bwd_after[0];
  const double ar_whole = plan_msg_time(&c->ar, whole);
  double bound = 2 * compute + (double)L * (ar_whole + plan_msg_time(&c->rs, whole) +
                                            plan_msg_time(&c->ag, whole));
  if (!isfinite(bound * 16)) {
    plan_ctx_free(ctx);
    return gs_error(GS_ERR_INVALID_ARG, "plan: %s: compute time (%g s) or message "
                    "costs (the whole model's all-reduce, %g B: %g s) too large: "
                    "predicted times would overflow", p->name ? p->name : "profile",
                    compute, (double)whole, ar_whole);
  }
  return GS_OK;
}

void plan_ctx_free(plan_ctx *ctx) {
  gs_free(ctx->ready);
  gs_free(ctx->bwd_after);
  gs_free(ctx->fwd_before);
  gs_free(ctx->bytes_before);
  if (ctx->memo_ar) gs_free(ctx->memo_ar->starts);
  gs_free(ctx->memo_ar);
  memset(ctx, 0, sizeof *ctx);
}

/* ---- Costs --------------------------------------------------------------- */

gs_status gs_plan_cost_from_ab(double a, double b, gs_plan_cost *out) {
  if (out == NULL) return gs_error(GS_ERR_INVALID_ARG, "plan cost: NULL output");
  if (!isfinite(a) || !isfinite(b) || a < 0 || b < 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "plan cost: a and b must be finite and >= 0 (a=%g, b=%g)", a, b);
  GS_CHECK(gs_cost_curve_affine(a, b, &out->ar));
  GS_CHECK(gs_cost_curve_affine(a / 2, b / 2, &out->rs));
  return gs_cost_curve_affine(a / 2, b / 2, &out->ag);
}

/* Reads the affine coefficients of one of the cost module's collectives by
 * evaluating it at two sizes; every formula there is affine in the size. */
static gs_status affine_of(double (*fn)(const gs_cost_params *, gs_cost_topo,
                                        gs_algo, double),
                           const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                           const char *what, gs_cost_curve *out) {
  double t0 = fn(c, t, algo, 0.0), t1 = fn(c, t, algo, 1e6);
  if (t0 < 0 || t1 < 0)
    return gs_error(GS_ERR_UNSUPPORTED, "plan cost: %s has no %s cost",
                    gs_algo_name(algo), what);
  return gs_cost_curve_affine(t0, (t1 - t0) / 1e6, out);
}

/* A calibrated preset's all-reduce as the communicator runs it: at each
 * size the fastest algorithm (recursive doubling for small messages, the
 * ring or Rabenseifner for large ones, gs_cost_best_allreduce), as a curve
 * through every power of two from 64 B to 4 GiB, each with the engine's
 * cost per message; its line is what the engine fits to its own messages
 * (a from the smallest, b the large messages' slope), which plans are made
 * with. */
static void envelope_curve(const gs_cost_params *params, gs_cost_topo topo, double b,
                           gs_cost_curve *c) {
  int n = 0;
  double prev = 0, msg = gs_cost_message(params, topo);
  for (int k = 6; k <= 32 && n < GS_COST_CURVE_POINTS; k++, n++) {
    double x = ldexp(1.0, k), t;
    gs_cost_best_allreduce(params, topo, x, &t);
    t += msg;
    prev = GS_MAX(prev, t);
    c->bytes[n] = x;
    c->secs[n] = prev;
  }
  c->npoints = n;
  c->b = b;
  c->a = GS_MAX(c->secs[0] - b * c->bytes[0], 0.0);
}

gs_status gs_plan_cost_from_net(const gs_cost_params *params, gs_cost_topo topo,
                                gs_algo algo, gs_plan_cost *out) {
  if (params == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "plan cost: NULL argument");
  if (topo.ranks < 1)
    return gs_error(GS_ERR_INVALID_ARG, "plan cost: %d workers", topo.ranks);
  if (gs_cost_allreduce(params, topo, algo, 1e6) < 0)
    return gs_error(GS_ERR_UNSUPPORTED, "plan cost: %s is not an allreduce "
                    "algorithm", gs_algo_name(algo));
  double a, b;
  gs_cost_allreduce_linear(params, topo, algo, &a, &b);
  GS_CHECK(gs_cost_curve_affine(a, b, &out->ar));
  GS_CHECK(affine_of(gs_cost_reduce_scatter, params, topo, GS_ALGO_RING,
                     "reduce-scatter", &out->rs));
  GS_CHECK(affine_of(gs_cost_allgather, params, topo, GS_ALGO_AUTO, "allgather",
                     &out->ag));
  /* Every message of the engine pays its own work once (gs_cost_message). */
  double msg = gs_cost_message(params, topo);
  out->ar.a += msg;
  out->rs.a += msg;
  out->ag.a += msg;
  if (params->ncalib > 0 && topo.ranks > 1 && (algo == GS_ALGO_AUTO || algo == GS_ALGO_MPI))
    envelope_curve(params, topo, b, &out->ar);
  return GS_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

gs_status gs_plan_cost_measured(const gs_cost_params *params, gs_cost_topo topo,
                                gs_algo algo, gs_plan_cost *out) {
  GS_CHECK(gs_plan_cost_from_net(params, topo, algo, out));
  if (topo.ranks < 2) return GS_OK;
  /* The sizes measured for the algorithms the price may come from. */
  double xs[GS_ALGO_COUNT * GS_COST_MAX_POINTS];
  int n = 0;
  for (int a = 0; a < GS_ALGO_COUNT; a++) {
    if (algo != GS_ALGO_AUTO && algo != GS_ALGO_MPI && a != (int)algo) continue;
    if (params->fit[a].beta <= 0 || params->fit[a].npoints < 2) continue;
    int np = GS_MIN(params->fit[a].npoints, GS_COST_MAX_POINTS);
    for (int i = 0; i < np; i++) {
      double x = params->fit[a].bytes[i];
      if (!isfinite(x) || x < 1) {
        return gs_error(GS_ERR_INVALID_ARG, "plan cost: %s's measured point %d has "
                        "size %g", gs_algo_name((gs_algo)a), i, x);
      }
      xs[n++] = x;
    }
  }
  if (n == 0) return GS_OK;
  qsort(xs, (size_t)n, sizeof xs[0], cmp_double);
  int u = 0;
  for (int i = 0; i < n; i++)
    if (u == 0 || xs[i] > xs[u - 1]) xs[u++] = xs[i];
  if (u < 2) return GS_OK;
  /* At most GS_COST_CURVE_POINTS of them, evenly spread, both ends kept. */
  int keep = GS_MIN(u, GS_COST_CURVE_POINTS);
  gs_cost_curve *c = &out->ar;
  double prev = 0;
  for (int k = 0; k < keep; k++) {
    int i = keep == u ? k : (int)((double)k * (u - 1) / (keep - 1) + 0.5);
    double t;
    if (algo == GS_ALGO_AUTO || algo == GS_ALGO_MPI)
      gs_cost_best_allreduce(params, topo, xs[i], &t);
    else
      t = gs_cost_allreduce(params, topo, algo, xs[i]);
    if (!isfinite(t) || t < 0)
      return gs_error(GS_ERR_INVALID_ARG, "plan cost: the measured all-reduce of %g B "
                      "costs %g s", xs[i], t);
    prev = GS_MAX(prev, t);
    c->bytes[k] = xs[i];
    c->secs[k] = prev;
  }
  c->npoints = keep;
  /* DeAR's halves, as from a and b alone. */
  gs_cost_curve half = *c;
  half.a /= 2;
  half.b /= 2;
  for (int k = 0; k < keep; k++) half.secs[k] /= 2;
  out->rs = out->ag = half;
  return GS_OK;
}

/* ---- Policies ------------------------------------------------------------ */

static const char *policy_names[GS_PLAN_POLICY_COUNT] = {
    "wfbp", "single", "bucket", "mgwfbp", "optimal", "dear", "auto"};

const char *gs_plan_policy_name(gs_plan_policy_kind kind) {
  return (unsigned)kind < GS_PLAN_POLICY_COUNT ? policy_names[kind] : "unknown";
}

static int parse_mb(const char *s, const char *end, double *out) {
  if (s == end) return -1;
  char buf[64];
  size_t n = (size_t)(end - s);
  if (n >= sizeof buf) return -1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  /* Decimal, as every number of the command line (no hex, nan or inf). */
  double v;
  if (gs__parse_double(buf, 0.0, 1e9, &v, NULL) != 0 || v <= 0) return -1;
  *out = v;
  return 0;
}

gs_status gs_plan_policy_parse(const char *spec, gs_plan_policy *out) {
  if (spec == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "policy: NULL argument");
  out->bucket_mb = 25.0;
  out->first_mb = 1.0;
  for (int k = 0; k < GS_PLAN_POLICY_COUNT; k++) {
    if (strcmp(spec, policy_names[k]) == 0) {
      out->kind = (gs_plan_policy_kind)k;
      return GS_OK;
    }
  }
  if (strncmp(spec, "bucket:", 7) == 0) {
    const char *s = spec + 7, *comma = strchr(s, ',');
    const char *end = comma ? comma : s + strlen(s);
    if (parse_mb(s, end, &out->bucket_mb) != 0)
      return gs_error(GS_ERR_PARSE, "policy '%s': bucket size must be a number of MB "
                      "above 0, at most 1e9", spec);
    if (comma) {
      if (strncmp(comma + 1, "first=", 6) != 0 ||
          parse_mb(comma + 7, comma + 7 + strlen(comma + 7), &out->first_mb) != 0)
        return gs_error(GS_ERR_PARSE, "policy '%s': expected bucket:<MB>,first=<MB>"
                        " with sizes above 0, at most 1e9 MB", spec);
    }
    out->kind = GS_PLAN_BUCKET;
    return GS_OK;
  }
  return gs_error(GS_ERR_PARSE, "unknown policy '%s' (expected wfbp, single, "
                  "bucket[:<MB>[,first=<MB>]], mgwfbp, optimal, dear or auto)",
                  spec);
}

/* PyTorch DDP's bucket assignment (torch/csrc/distributed/c10d/reducer.cpp,
 * compute_bucket_assignment_by_size): parameters in model.parameters() order
 * go into the open bucket; once it holds at least the current limit it is
 * closed and the limit moves from the first bucket's cap to the general
 * cap; a parameter is never split. DDP then reverses the bucket list
 * (distributed.py) so buckets launch in backward order. DDP separates
 * dtypes into different buckets; here a mixed-dtype profile shares them. */
size_t plan_threshold_starts(const plan_ctx *ctx, double first, double cap,
                             size_t *starts) {
  size_t L = ctx->L, G = 0;
  const uint64_t *B = ctx->bytes_before;
  double limit = first;
  size_t open = 0;
  /* Collect bucket starts in forward order, then reverse. A bucket from
   * `open` closes at the first i with bytes(open..i) >= limit (sums below
   * 2^53 bytes are exact in a double), found by a galloping search: O(log)
   * of the bucket's length, so small buckets cost O(1) and the whole plan
   * at most O(L). */
  while (open < L) {
    size_t lo = open, step = 1, hi; /* the close is in lo..hi */
    while (lo + step < L && (double)(B[lo + step + 1] - B[open]) < limit) {
      lo += step;
      step *= 2;
    }
    hi = GS_MIN(lo + step, L - 1);
    while (lo < hi) { /* the first i in lo..hi reaching the limit, else hi */
      size_t mid = lo + (hi - lo) / 2;
      if ((double)(B[mid + 1] - B[open]) >= limit) hi = mid;
      else lo = mid + 1;
    }
    starts[G++] = open;
    open = lo + 1;
    limit = cap;
  }
  for (size_t g = 0; g < G / 2; g++) {
    size_t t = starts[g];
    starts[g] = starts[G - 1 - g];
    starts[G - 1 - g] = t;
  }
  return G;
}

/* MG-WFBP, TPDS 2021, Algorithm 1, with layers l = 1..L as tensors i = l-1.
 * t_c(l) = a + b p(l); tau_c(L) = tau_b(L) + t_b(L); tau_c(l) =
 * max{tau_c(l+1) + t_c(l+1), tau_b(l) + t_b(l)} (Eq. 7). Scanning l = L..2,
 * layer l is merged into l-1 iff tau_b(l-1) + t_b(l-1) < tau_c(l) + a
 * (Eqs. 35/38), which sets t_c(l) = 0, p(l-1) += p(l) and recomputes
 * t_c(l-1). The paper recomputes every tau_c after a merge; a merge at l
 * changes only t_c(l) and t_c(l-1), which enter tau_c(k) for k <= l-1 only,
 * none of them read yet, so computing tau_c(l-1) right after the decision at
 * l gives the same values in O(L). */
size_t plan_mgwfbp_starts(const plan_ctx *ctx, const gs_cost_curve *cost,
                          size_t *starts) {
  size_t L = ctx->L, G = 0;
  double a = cost->a;
  uint64_t p_cur = plan_bytes(ctx, L - 1, L - 1); /* p(l) after merges into it */
  double tau_c = ctx->ready[L - 1];               /* tau_c(L) */
  for (size_t i = L - 1; i >= 1; i--) {
    double ready_below = ctx->ready[i - 1]; /* tau_b(l-1) + t_b(l-1) */
    uint64_t p_below = plan_bytes(ctx, i - 1, i - 1);
    double t_c;
    if (ready_below < tau_c + a) {
      t_c = 0.0; /* merged: layer l sends nothing of its own */
      p_below += p_cur;
    } else {
      t_c = plan_msg_time(cost, p_cur);
      starts[G++] = i; /* layer l is a normal layer: a group starts at i */
    }
    tau_c = GS_MAX(tau_c + t_c, ready_below);
    p_cur = p_below;
  }
  starts[G++] = 0; /* layer 1 is always a normal layer */
  return G;
}

/*
 * The optimal plan, by dynamic programming over contiguous groups.
 *
 * Let E(k) be the smallest end time of the last message over all plans of
 * the tensors k..L-1 (the first L-k tensors in launch order) into contiguous
 * groups, and E(L) = -infinity. A plan of k..L-1 ends with a group k..m-1 for
 * some m in k+1..L, whose message starts at max(end of the plan of m..L-1,
 * r(k)) (its last-ready tensor is k, r being non-increasing in the index)
 * and ends c(k,m) = T(bytes(k..m-1)) later. So
 *     E(k) = min over m of  max(E(m), r(k)) + c(k,m).
 * Proof that this is the optimum over contiguous plans: the plan of m..L-1
 * inside any plan of k..L-1 is followed by messages that never affect it
 * (messages go one at a time in launch order, each depending only on the
 * previous end), and the end of the plan of k..L-1 is non-decreasing in the
 * end of its plan of m..L-1. Replacing that prefix plan by one ending at
 * E(m) therefore never makes the total later, so some optimal plan uses an
 * optimal prefix for its last split, and induction on L-k gives E(k). The
 * argument uses nothing of T but that it is a non-negative function of the
 * group, so it holds for measured curves (gs_cost_curve) as for
 * T(M) = a + b*M.
 * Contiguity loses nothing when T(M) = a + b*M: for any plan (any partition, any order) with
 * messages 1..n, let R(g) be the latest ready time among messages 1..g. Its
 * end is max over g of R(g) + sum_{h>=g} c(h) (a FIFO chain), with
 * c(h) = a + b*bytes(h). The contiguous plan whose g-th group is the tensors
 * ready by R(g) and not in earlier groups (empty groups dropped) has, for
 * each g, a ready time <= R(g), no more messages from g on, and from g on
 * only tensors ready after R(g-1), none of which the original plan sent
 * before g, hence no more bytes; so it ends no later. (Under a measured
 * curve, fewer bytes in fewer messages need not cost less in sum, so there
 * the optimum is over contiguous plans, which are the plans the engine
 * runs.) Ties between m keep the largest group (the largest m).
 *
 * Computing the minimum in O(P * L) for a curve of P linear pieces (P = 1
 * for T = a + b*M, at most GS_COST_CURVE_POINTS + 2), whatever the costs.
 * E is non-increasing in m (dropping tensor m from a plan of m..L-1 leaves
 * no message later, T being non-decreasing). So the m with E(m) <= r(k) form
 * a suffix m0..L, on which the value is r(k) + c(k,m), growing with m: m0 is
 * the best of them (with the largest m of equal value, found by bisection).
 * For m in k+1..m0-1 the value is E(m) + T(B(m) - B(k)), B being the bytes
 * before a tensor. On a piece of T where T(x) = t0 + s*x, that is
 * E(m) + s*B(m) plus a constant of k: the best m of the piece is the one of
 * least F(m) = E(m) + s*B(m) among the m whose B(m) - B(k) falls in the
 * piece. As k falls, r(k) grows and B(k) shrinks, so m0 and both ends of
 * each piece's range of m move only downwards: each piece's range is a
 * sliding window, and a monotone deque (indices by decreasing m, F
 * increasing from the front) gives its minimum in amortised O(1), each m
 * entering each piece's deque at most once. A window's candidate is then
 * evaluated exactly as gs_plan_predict does. The deques compare F of two
 * indices as (E(x) - E(y)) + s*(B(x) - B(y)), differences of nearby values,
 * so a steep piece does not lose the precision a sum s*B(m) would.
 * plan_optimal_starts_scan, the direct scan of every m with pruning, is the
 * reference the tests compare with: it takes O(L^2) steps when the pruning
 * fails (a = 0, where E(m) + c(k,m) hardly varies with m, or a large a,
 * where one message is best and every m must be looked at).
 */
#define PLAN_MAX_PIECES (GS_COST_CURVE_POINTS + 2)
#define NO_INDEX SIZE_MAX

/* T(x) = T(x') + slope * (x - x') for x, x' in [lo, the next piece's lo). */
typedef struct curve_piece {
  double lo, slope;
} curve_piece;

/* The linear pieces of a curve as gs_cost_curve_eval evaluates it: below
 * the first point the line of slope b clamped at 0, between points the
 * interpolation, beyond the last point slope b. */
static int curve_pieces(const gs_cost_curve *c, curve_piece *pc) {
  int n = c->npoints, P = 0;
  if (n == 0) {
    pc[P++] = (curve_piece){-INFINITY, c->b};
    return P;
  }
  double x0 = c->bytes[0], y0 = c->secs[0];
  if (c->b > 0 && y0 < c->b * x0) { /* 0 up to x0 - y0/b */
    pc[P++] = (curve_piece){-INFINITY, 0.0};
    pc[P++] = (curve_piece){x0 - y0 / c->b, c->b};
  } else {
    pc[P++] = (curve_piece){-INFINITY, c->b};
  }
  for (int i = 0; i + 1 < n; i++)
    pc[P++] = (curve_piece){c->bytes[i], (c->secs[i + 1] - c->secs[i]) /
                                             (c->bytes[i + 1] - c->bytes[i])};
  pc[P++] = (curve_piece){c->bytes[n - 1], c->b};
  return P;
}

/* One piece's window: indices ptr.. whose size falls in the piece, the next
 * index to enter, and its deque as a list through the shared link arrays
 * (the windows are disjoint, so an index is in one deque at a time). */
typedef struct piece_window {
  size_t ptr;        /* first m >= k+1 with B(m) - B(k) >= lo (L: none) */
  size_t add;        /* indices >= add have been offered to the deque */
  size_t head, tail; /* front (largest m, least F) and back */
} piece_window;

/* next[k] is the end (exclusive) of the group starting at k in the optimal
 * plan of k..L-1: walks the plan from tensor 0 (the last group launched),
 * writes the group starts in launch order and returns their number. */
static size_t starts_from_next(const size_t *next, size_t L, size_t *starts) {
  size_t G = 0;
  for (size_t k = 0; k < L; k = next[k]) starts[G++] = k;
  for (size_t g = 0; g < G / 2; g++) {
    size_t t = starts[g];
    starts[g] = starts[G - 1 - g];
    starts[G - 1 - g] = t;
  }
  return G;
}

size_t plan_optimal_starts_windowed(const plan_ctx *ctx, const gs_cost_curve *cost,
                                    size_t *starts) {
  size_t L = ctx->L;
  const uint64_t *B = ctx->bytes_before;
  curve_piece pc[PLAN_MAX_PIECES];
  piece_window w[PLAN_MAX_PIECES];
  double t_lo[PLAN_MAX_PIECES];
  int P = curve_pieces(cost, pc);
  for (int s = 0; s < P; s++) /* T >= 0; T is non-decreasing */
    t_lo[s] = s == 0 ? 0.0 : gs_cost_curve_eval(cost, pc[s].lo);
  double *E = gs_malloc((L + 1) * sizeof(double));
  size_t *next = gs_malloc((L + 1) * sizeof(size_t));
  size_t *toward_back = gs_malloc((L + 1) * sizeof(size_t));
  size_t *toward_front = gs_malloc((L + 1) * sizeof(size_t));
  if (E == NULL || next == NULL || toward_back == NULL || toward_front == NULL) {
    gs_free(E);
    gs_free(next);
    gs_free(toward_back);
    gs_free(toward_front);
    return 0;
  }
  for (int s = 0; s < P; s++) w[s] = (piece_window){L, L, NO_INDEX, NO_INDEX};
  E[L] = -INFINITY;
  size_t m0 = L;
  for (size_t k = L; k-- > 0;) {
    const double r = ctx->ready[k];
    const uint64_t base = B[k];
    while (m0 - 1 > k && E[m0 - 1] <= r) m0--;
    /* m >= m0: m0 is the best; equal values (a flat T) extend the group as
     * far as they go, the values being non-decreasing in m. */
    int hint = cost->npoints;
    double best = GS_MAX(E[m0], r) + plan_msg_time_hint(cost, B[m0] - base, &hint);
    size_t best_m = m0;
    for (size_t lo = m0, hi = L; lo < hi;) {
      size_t mid = lo + (hi - lo + 1) / 2;
      if (GS_MAX(E[mid], r) + plan_msg_time_hint(cost, B[mid] - base, &hint) == best)
        lo = best_m = mid;
      else
        hi = mid - 1;
    }
    /* m in k+1..m0-1, one window per piece of T. */
    hint = 0;
    /* Pieces above the largest size of the window are empty: skipped (an
     * index only ever moves to higher pieces, so their stale entries are
     * never pushed by a lower one). */
    const double x_max = m0 - 1 > k ? (double)(B[m0 - 1] - base) : -INFINITY;
    for (int s = 0; s < P && (s == 0 || pc[s].lo <= x_max); s++) {
      piece_window *q = &w[s];
      while (q->ptr > k + 1 && (double)(B[q->ptr - 1] - base) >= pc[s].lo) q->ptr--;
      size_t right = m0 - 1; /* the window is ptr..right */
      if (s + 1 < P) {
        size_t nptr = w[s + 1].ptr;
        while (nptr > k + 1 && (double)(B[nptr - 1] - base) >= pc[s + 1].lo) nptr--;
        w[s + 1].ptr = nptr;
        right = GS_MIN(right, nptr - 1);
      }
      while (q->head != NO_INDEX && q->head > right) { /* leaves at the front */
        q->head = toward_back[q->head];
        if (q->head == NO_INDEX) q->tail = NO_INDEX;
        else toward_front[q->head] = NO_INDEX;
      }
      while (q->add > q->ptr) { /* enters at the back */
        size_t m = --q->add;
        if (m > right) continue; /* already beyond this piece for good */
        const double slope = pc[s].slope;
        while (q->tail != NO_INDEX &&
               (E[m] - E[q->tail]) - slope * (double)(B[q->tail] - B[m]) < 0) {
          q->tail = toward_front[q->tail];
          if (q->tail == NO_INDEX) q->head = NO_INDEX;
          else toward_back[q->tail] = NO_INDEX;
        }
        toward_front[m] = q->tail;
        toward_back[m] = NO_INDEX;
        if (q->tail != NO_INDEX) toward_back[q->tail] = m;
        else q->head = m;
        q->tail = m;
      }
      /* The piece's best; T at the piece's start bounds it from below. */
      if (q->head != NO_INDEX && GS_MAX(E[q->head], r) + t_lo[s] <= best) {
        size_t m = q->head;
        double v = GS_MAX(E[m], r) + plan_msg_time_hint(cost, B[m] - base, &hint);
        if (v < best || (v == best && m > best_m)) {
          best = v;
          best_m = m;
        }
      }
    }
    E[k] = best;
    next[k] = best_m;
  }
  size_t G = starts_from_next(next, L, starts);
  gs_free(E);
  gs_free(next);
  gs_free(toward_back);
  gs_free(toward_front);
  return G;
}

/* The same minimum by scanning every m of each k (the planner's algorithm
 * before the windows above), pruned without changing the result: below m0
 * the value is at least E(m), which only grows as m falls, so the scan stops
 * once E(m) reaches the best value. O(L^2) at worst. Gives up (0 groups,
 * *over set) after about max_steps values of m (0: no limit). */
size_t plan_optimal_starts_scan(const plan_ctx *ctx, const gs_cost_curve *cost,
                                size_t *starts, uint64_t max_steps, int *over) {
  size_t L = ctx->L;
  uint64_t steps = 0;
  *over = 0;
  double *E = gs_malloc((L + 1) * sizeof(double));
  size_t *next = gs_malloc((L + 1) * sizeof(size_t));
  if (E == NULL || next == NULL) {
    gs_free(E);
    gs_free(next);
    return 0;
  }
  E[L] = -INFINITY;
  for (size_t k = L; k-- > 0;) {
    double r = ctx->ready[k];
    const uint64_t base = ctx->bytes_before[k];
    /* E is non-increasing in m (dropping tensor m from a plan of m..L-1
     * leaves no message later, T being non-decreasing), so the m with
     * E(m) <= r(k) form a suffix m0..L, where the value r(k) + c(k,m) grows
     * with m: m0 is the best of them (with the largest m of equal value,
     * the tie rule of a scan from L down). Below m0 the value is at least
     * E(m), which only grows as m falls: the scan stops once E(m) reaches
     * the best value. The result is that of the full scan, in far fewer
     * steps. */
    size_t lo = k + 1, hi = L;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (E[mid] <= r) hi = mid;
      else lo = mid + 1;
    }
    int hint = cost->npoints;
    size_t best_m = lo;
    double best = GS_MAX(E[lo], r) + plan_msg_time_hint(cost, ctx->bytes_before[lo] - base,
                                                        &hint);
    while (best_m < L && GS_MAX(E[best_m + 1], r) +
                                 plan_msg_time_hint(cost, ctx->bytes_before[best_m + 1] - base,
                                                    &hint) == best)
      best_m++;
    steps += 1 + best_m - lo;
    for (size_t m = lo - 1; m > k && E[m] < best; m--) {
      double v = GS_MAX(E[m], r) +
                 plan_msg_time_hint(cost, ctx->bytes_before[m] - base, &hint);
      steps++;
      if (v < best) {
        best = v;
        best_m = m;
      }
    }
    E[k] = best;
    next[k] = best_m;
    if (max_steps > 0 && steps > max_steps) {
      *over = 1;
      gs_free(E);
      gs_free(next);
      return 0;
    }
  }
  size_t G = starts_from_next(next, L, starts);
  gs_free(E);
  gs_free(next);
  return G;
}

/* The scan and the windows find the same minimum; where several plans
 * share it to the last bit, each keeps the largest group by its own
 * rounding, and the scan's choice is the one plans had before the windows.
 * The scan is kept wherever it is cheap, which covers every shipped profile
 * (at most L^2/2 steps, 182,000 for 604 tensors), and handed over to the
 * windows past PLAN_SCAN_STEPS values of m (about 10-40 ms of work). */
#define PLAN_SCAN_STEPS 2000000u

size_t plan_optimal_starts(const plan_ctx *ctx, const gs_cost_curve *cost,
                           size_t *starts) {
  /* auto asks for the all-reduce optimum twice (optimal, and dear's
   * candidates): the second time it is copied. */
  plan_memo *memo = cost == &ctx->cost->ar ? ctx->memo_ar : NULL;
  if (memo != NULL && memo->starts != NULL) {
    memcpy(starts, memo->starts, memo->n * sizeof(size_t));
    return memo->n;
  }
  int over = 0;
  size_t G = plan_optimal_starts_scan(ctx, cost, starts, PLAN_SCAN_STEPS, &over);
  if (over) G = plan_optimal_starts_windowed(ctx, cost, starts);
  if (memo != NULL && G > 0) {
    memo->starts = gs_malloc(G * sizeof(size_t));
    if (memo->starts != NULL) {
      memcpy(memo->starts, starts, G * sizeof(size_t));
      memo->n = G;
    }
  }
  return G;
}

/* ---- Plans --------------------------------------------------------------- */

void gs_plan_free(gs_plan *plan) {
  if (plan == NULL) return;
  gs_free(plan->tensors);
  gs_free(plan->offsets);
  gs_free(plan->group_xchg);
  gs_free(plan);
}

static gs_plan *plan_from_starts(size_t L, const size_t *starts, size_t G) {
  gs_plan *pl = gs_calloc(1, sizeof *pl);
  if (pl == NULL) return NULL;
  pl->tensors = gs_malloc(L * sizeof(size_t));
  pl->offsets = gs_malloc((G + 1) * sizeof(size_t));
  if (pl->tensors == NULL || pl->offsets == NULL) {
    gs_plan_free(pl);
    return NULL;
  }
  pl->ntensors = L;
  pl->ngroups = G;
  size_t n = 0, hi = L; /* group g covers starts[g] .. hi-1 */
  for (size_t g = 0; g < G; g++) {
    pl->offsets[g] = n;
    for (size_t i = starts[g]; i < hi; i++) pl->tensors[n++] = i;
    hi = starts[g];
  }
  pl->offsets[G] = n;
  return pl;
}

gs_status gs_plan_check(const gs_plan *plan, size_t ntensors) {
  if (plan == NULL) return gs_error(GS_ERR_INVALID_ARG, "plan check: NULL plan");
  if (plan->ntensors != ntensors || plan->ngroups < 1 || plan->offsets[0] != 0 ||
      plan->offsets[plan->ngroups] != ntensors)
    return gs_error(GS_ERR_INVALID_ARG,
                    "plan check: %zu groups over %zu tensors, expected to cover "
                    "%zu tensors", plan->ngroups, plan->ntensors, ntensors);
  size_t hi = ntensors; /* the next group must end at hi-1 */
  for (size_t g = 0; g < plan->ngroups; g++) {
    size_t o = plan->offsets[g], e = plan->offsets[g + 1];
    if (e <= o)
      return gs_error(GS_ERR_INVALID_ARG, "plan check: group %zu is empty", g);
    if (plan->tensors[e - 1] + 1 != hi)
      return gs_error(GS_ERR_INVALID_ARG, "plan check: group %zu ends at tensor "
                      "%zu, expected %zu (launch order)", g, plan->tensors[e - 1],
                      hi - 1);
    for (size_t k = o + 1; k < e; k++)
      if (plan->tensors[k] != plan->tensors[k - 1] + 1)
        return gs_error(GS_ERR_INVALID_ARG, "plan check: group %zu is not a "
                        "contiguous ascending run at tensor %zu", g,
                        plan->tensors[k]);
    hi = plan->tensors[o];
  }
  if (hi != 0)
    return gs_error(GS_ERR_INVALID_ARG, "plan check: tensors 0..%zu not covered",
                    hi - 1);
  return GS_OK;
}

/* Validates a grouping given as tensors/offsets: every index in range and
 * used exactly once. */
static gs_status check_grouping(size_t L, const size_t *tensors,
                                const size_t *offsets, size_t ngroups) {
  if (tensors == NULL || offsets == NULL || ngroups == 0)
    return gs_error(GS_ERR_INVALID_ARG, "plan predict: no groups");
  if (offsets[0] != 0 || offsets[ngroups] != L)
    return gs_error(GS_ERR_INVALID_ARG, "plan predict: offsets cover %zu..%zu, "
                    "expected 0..%zu", offsets[0], offsets[ngroups], L);
  unsigned char *seen = gs_calloc(L, 1);
  if (seen == NULL) return GS_ERR_NOMEM;
  gs_status st = GS_OK;
  for (size_t g = 0; g < ngroups && st == GS_OK; g++) {
    if (offsets[g + 1] <= offsets[g]) {
      st = gs_error(GS_ERR_INVALID_ARG, "plan predict: group %zu is empty", g);
      break;
    }
    for (size_t k = offsets[g]; k < offsets[g + 1]; k++) {
      size_t i = tensors[k];
      if (i >= L || seen[i]) {
        st = gs_error(GS_ERR_INVALID_ARG, "plan predict: tensor %zu %s", i,
                      i >= L ? "out of range" : "in two groups");
        break;
      }
      seen[i] = 1;
    }
  }
  gs_free(seen);
  return st;
}

gs_status gs_plan_predict(const gs_profile *profile, const gs_plan_cost *cost,
                          const size_t *tensors, const size_t *offsets,
                          size_t ngroups, double *iter_s) {
  if (iter_s == NULL) return gs_error(GS_ERR_INVALID_ARG, "plan predict: NULL output");
  plan_ctx ctx;
  GS_CHECK(plan_ctx_init(&ctx, profile, cost));
  gs_status st = check_grouping(ctx.L, tensors, offsets, ngroups);
  if (st == GS_OK) {
    /* Eq. 7 with merged layers: each message starts at the later of the
     * previous message's end and its last-ready tensor. */
    double end = -INFINITY;
    for (size_t g = 0; g < ngroups; g++) {
      size_t lowest = ctx.L;
      uint64_t bytes = 0;
      for (size_t k = offsets[g]; k < offsets[g + 1]; k++) {
        lowest = GS_MIN(lowest, tensors[k]);
        bytes += plan_bytes(&ctx, tensors[k], tensors[k]);
      }
      end = GS_MAX(end, ctx.ready[lowest]) + plan_msg_time(&cost->ar, bytes);
    }
    *iter_s = end;
  }
  plan_ctx_free(&ctx);
  return st;
}

/* gs_plan_predict's model for a contiguous plan given as starts. */
static double predict_starts(const plan_ctx *ctx, const size_t *starts, size_t G) {
  double end = -INFINITY;
  for (size_t g = 0; g < G; g++) {
    size_t lo = starts[g], hi = g > 0 ? starts[g - 1] : ctx->L;
    end = GS_MAX(end, ctx->ready[lo]) + plan_msg_time(&ctx->cost->ar,
                                                      plan_bytes(ctx, lo, hi - 1));
  }
  return end;
}

/* Makes the groups of one (non-auto) policy as starts. */
static gs_status policy_starts(const plan_ctx *ctx, const gs_plan_policy *pol,
                               size_t *starts, size_t *G) {
  const gs_plan_cost *c = ctx->cost;
  size_t L = ctx->L;
  switch (pol->kind) {
    case GS_PLAN_WFBP:
      for (size_t g = 0; g < L; g++) starts[g] = L - 1 - g;
      *G = L;
      return GS_OK;
    case GS_PLAN_SINGLE:
      starts[0] = 0;
      *G = 1;
      return GS_OK;
    case GS_PLAN_BUCKET:
      *G = plan_threshold_starts(ctx, pol->first_mb * 1048576.0,
                                 pol->bucket_mb * 1048576.0, starts);
      return GS_OK;
    case GS_PLAN_MGWFBP:
      *G = plan_mgwfbp_starts(ctx, &c->ar, starts);
      return GS_OK;
    case GS_PLAN_OPTIMAL:
      *G = plan_optimal_starts(ctx, &c->ar, starts);
      return *G ? GS_OK : GS_ERR_NOMEM;
    case GS_PLAN_DEAR:
      return plan_dear_starts(ctx, starts, G);
    default:
      return gs_error(GS_ERR_INVALID_ARG, "plan: bad policy %d", (int)pol->kind);
  }
}

/* One non-auto policy's plan with its prediction. */
static gs_status make_one(const plan_ctx *ctx, const gs_plan_policy *pol,
                          size_t *starts, gs_plan **out) {
  size_t G = 0;
  GS_CHECK(policy_starts(ctx, pol, starts, &G));
  gs_plan *pl = plan_from_starts(ctx->L, starts, G);
  if (pl == NULL) return GS_ERR_NOMEM;
  pl->policy = *pol;
  pl->chosen = pol->kind;
  /* The models of gs_plan_predict and gs_plan_predict_dear, on the context
   * already built (the same arithmetic, so the same times to the bit). */
  if (pol->kind == GS_PLAN_DEAR)
    pl->predicted_iter_s = plan_dear_eval(ctx, starts, G, &pl->dear_forward_end_s,
                                          &pl->dear_ag_wait_s);
  else
    pl->predicted_iter_s = predict_starts(ctx, starts, G);
  *out = pl;
  return GS_OK;
}

gs_status plan_auto_search(plan_make_fn make, void *arg, unsigned skip,
                           const gs_plan_policy *asked, gs_plan **out) {
  gs_plan *best = NULL;
  *out = NULL;
  for (int k = 0; k < GS_PLAN_AUTO; k++) {
    if (skip & (1u << k)) continue;
    gs_plan_policy pk = {(gs_plan_policy_kind)k, 25.0, 1.0};
    gs_plan *pl = NULL;
    gs_status st = make(arg, &pk, &pl);
    if (st != GS_OK) {
      gs_plan_free(best);
      return st;
    }
    if (best == NULL || gs__faster(pl->predicted_iter_s, best->predicted_iter_s)) {
      gs_plan_free(best);
      best = pl;
    } else {
      gs_plan_free(pl);
    }
  }
  if (best == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "plan: auto has no policy to choose from");
  best->policy = *asked;
  *out = best;
  return GS_OK;
}

typedef struct {
  const plan_ctx *ctx;
  size_t *starts;
} make_one_arg;

static gs_status make_one_cb(void *arg, const gs_plan_policy *policy, gs_plan **out) {
  make_one_arg *a = arg;
  return make_one(a->ctx, policy, a->starts, out);
}

gs_status gs_plan_make_policy(const gs_profile *profile, const gs_plan_cost *cost,
                              const gs_plan_policy *policy, gs_plan **out) {
  if (out) *out = NULL;
  if (policy == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "plan: NULL argument");
  if ((unsigned)policy->kind >= GS_PLAN_POLICY_COUNT)
    return gs_error(GS_ERR_INVALID_ARG, "plan: bad policy %d", (int)policy->kind);
  plan_ctx ctx;
  GS_CHECK(plan_ctx_init(&ctx, profile, cost));
  size_t *starts = gs_malloc(ctx.L * sizeof(size_t));
  gs_status st = starts ? GS_OK : GS_ERR_NOMEM;
  if (st == GS_OK && policy->kind != GS_PLAN_AUTO) {
    st = make_one(&ctx, policy, starts, out);
  } else if (st == GS_OK) {
    make_one_arg arg = {&ctx, starts};
    st = plan_auto_search(make_one_cb, &arg, 0, policy, out);
  }
  gs_free(starts);
  plan_ctx_free(&ctx);
  return st;
}

gs_status gs_plan_make(const gs_profile *profile, const gs_plan_cost *cost,
                       const char *policy_spec, gs_plan **out) {
  if (out) *out = NULL;
  gs_plan_policy pol;
  GS_CHECK(gs_plan_policy_parse(policy_spec, &pol));
  return gs_plan_make_policy(profile, cost, &pol, out);
}
