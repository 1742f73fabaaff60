/* A job's speed curve from the throughputs it was measured at
 * (gs_cluster_speed_fit, policy.h).
 *
 * The model is Optimus's (Peng et al., EuroSys 2018, Sec. 4.2, for
 * data-parallel training with a fixed global batch): the time of one unit
 * of work on n nodes is
 *     t(n) = th0 + th1 / n + th2 * n,        th >= 0,
 * the part that does not shrink with the nodes (th0), the part divided
 * among them (th1: compute), and the part that grows with them (th2: the
 * exchange's per-node start-up costs). speed(n) = 1 / t(n). The fit is
 * non-negative least squares on relative errors, sum_k (t(n_k) r_k - 1)^2
 * (r_k: the speed measured at n_k), by trying every subset of the terms:
 * three unknowns, at most seven small systems. Fewer distinct sizes than
 * terms would leave the curve to the solver's whim: one size gives the line
 * through the point (th1 alone: nothing measured says otherwise), two
 * sizes th0 and th1 (Amdahl), three or more all three terms.
 * A parameter-server job's servers train on no batch: its compute divides
 * among the nodes' worth of workers, n - idle (idle = servers / slots),
 * so th1 / (n - idle) (gs_cluster_speed_fit_idle; 0 on sizes with no
 * worker). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "policy.h"

#include "gradsync/core.h"
#include "gradsync/cost.h"
#include "gradsync/plan.h"
#include "gradsync/search.h"

/* Solves the k x k system a x = b (k <= 3) by Gaussian elimination with
 * partial pivoting; returns -1 when singular. */
static int solve(double a[3][3], double b[3], int k, double x[3]) {
  for (int c = 0; c < k; c++) {
    int p = c;
    for (int r = c + 1; r < k; r++)
      if (fabs(a[r][c]) > fabs(a[p][c])) p = r;
    if (fabs(a[p][c]) < 1e-300) return -1;
    if (p != c) {
      for (int q = 0; q < k; q++) {
        double t = a[c][q];
        a[c][q] = a[p][q];
        a[p][q] = t;
      }
      double t = b[c];
      b[c] = b[p];
      b[p] = t;
    }
    for (int r = c + 1; r < k; r++) {
      double f = a[r][c] / a[c][c];
      for (int q = c; q < k; q++) a[r][q] -= f * a[c][q];
      b[r] -= f * b[c];
    }
  }
  for (int c = k - 1; c >= 0; c--) {
    double s = b[c];
    for (int q = c + 1; q < k; q++) s -= a[c][q] * x[q];
    x[c] = s / a[c][c];
  }
  return 0;
}

static double basis(int term, double n, double idle) {
  return term == 0 ? 1.0 : term == 1 ? 1.0 / (n - idle) : n;
}

int gs_cluster_speed_fit(const int *n, const double *r, int npts, int max, double *out,
                         double theta[3], char *err, size_t errlen) {
  return gs_cluster_speed_fit_idle(n, r, npts, max, 0.0, out, theta, err, errlen);
}

int gs_cluster_speed_fit_idle(const int *n, const double *r, int npts, int max, double idle,
                              double *out, double theta[3], char *err, size_t errlen) {
  if (npts < 1 || max < 1 || !n || !r || !out || !(idle >= 0) || !isfinite(idle)) {
    if (err) snprintf(err, errlen, "speed fit: no measured point, a curve of %d nodes, or %g "
                      "idle nodes", max, idle);
    return -1;
  }
  /* distinct sizes decide which terms may enter */
  int distinct = 0;
  for (int k = 0; k < npts; k++) {
    if (n[k] < 1 || !(r[k] > 0) || !isfinite(r[k]) || !(n[k] > idle)) {
      if (err) snprintf(err, errlen, "speed fit: point %d: %g on %d nodes (want > 0 on >= 1, "
                        "more than the %g nodes' worth of servers)", k, r[k], n[k], idle);
      return -1;
    }
    int seen = 0;
    for (int q = 0; q < k; q++) seen |= n[q] == n[k];
    distinct += !seen;
  }
  const int allowed = distinct >= 3 ? 7 : distinct == 2 ? 3 : 2; /* term bitmasks */
  double best[3] = {0, 0, 0}, best_res = INFINITY;
  for (int mask = 1; mask <= 7; mask++) {
    if ((mask & allowed) != mask) continue;
    int term[3], k = 0;
    for (int t = 0; t < 3; t++)
      if (mask & (1 << t)) term[k++] = t;
    double a[3][3] = {{0}}, b[3] = {0}, x[3] = {0};
    for (int p = 0; p < npts; p++)
      for (int i = 0; i < k; i++) {
        double fi = basis(term[i], n[p], idle) * r[p];
        b[i] += fi;
        for (int j = 0; j < k; j++) a[i][j] += fi * basis(term[j], n[p], idle) * r[p];
      }
    if (solve(a, b, k, x) != 0) continue;
    int ok = 1;
    for (int i = 0; i < k; i++) ok &= x[i] >= 0 && isfinite(x[i]);
    if (!ok) continue;
    double th[3] = {0, 0, 0};
    for (int i = 0; i < k; i++) th[term[i]] = x[i];
    double res = 0;
    for (int p = 0; p < npts; p++) {
      double e = (th[0] + th[1] / (n[p] - idle) + th[2] * n[p]) * r[p] - 1;
      res += e * e;
    }
    if (res < best_res - 1e-15) {
      best_res = res;
      memcpy(best, th, sizeof best);
    }
  }
  if (!isfinite(best_res)) { /* cannot happen with th1 alone allowed, but stay safe */
    if (err) snprintf(err, errlen, "speed fit: no non-negative fit");
    return -1;
  }
  out[0] = 0;
  for (int m = 1; m <= max; m++) {
    double t = best[0] + best[1] / (m - idle) + best[2] * m;
    out[m] = m > idle && t > 0 ? 1.0 / t : 0;
  }
  if (theta) memcpy(theta, best, sizeof best);
  return 0;
}

int gs_cluster_prior_steps(const gs_profile *profile, const gs_cost_params *net, int slots,
                           long global_batch, int servers, double async, int max,
                           double *step_s, double *samples, char *err, size_t errlen) {
  int priced = 0;
  if (err && errlen) err[0] = '\0';
  for (int x = 0; x <= max; x++) step_s[x] = samples[x] = 0;
  if (profile == NULL || net == NULL || slots < 1 || max < 1 || servers < 0 ||
      !(async >= 0 && async <= 1)) {
    if (err) snprintf(err, errlen, "prior: no profile, network or size");
    return -1;
  }
  for (int x = 1; x <= max; x++) {
    /* A parameter-server job's servers train on no batch: its workers are
     * the ranks less them; all of them `slots` a node, the servers last
     * (gs_cost_ps_layout), each node's link carrying its ranks' pushes and
     * answers. */
    long ranks = (long)x * slots, workers = ranks - servers;
    if (ranks > INT_MAX || workers < 1 || (global_batch > 0 && global_batch < workers))
      continue;
    gs_search_config cfg = {.net = net, .algo = GS_ALGO_AUTO, .workers = (int)workers,
                            .per_node = servers > 0 ? 1 : slots, .ps_servers = servers,
                            .ps_async = servers > 0 ? async : 0,
                            .ps_slots = servers > 0 ? slots : 0,
                            .max_global_batch = global_batch > 0 && global_batch <= INT_MAX
                                                    ? (int)global_batch : 0};
    gs_search_result res;
    if (gs_search_run(profile, &cfg, &res) != GS_OK) {
      if (err && !priced) snprintf(err, errlen, "prior on %d nodes: %s", x, gs_last_error());
      continue;
    }
    const gs_search_point *pt = &res.points[0];
    double t = servers > 0 ? pt->ps_iter_s : pt->iter_s[pt->best];
    if (t > 0 && pt->batch > 0) {
      step_s[x] = t;
      samples[x] = (double)pt->batch * (double)workers;
      priced++;
    }
    gs_search_result_free(&res);
  }
  return priced > 0 ? 0 : -1;
}

int gs_cluster_known_points(const double *by_size, int top, int *n, double *r) {
  int np = 0;
  for (int q = 1; q <= top; q++)
    if (by_size[q] > 0) {
      n[np] = q;
      r[np++] = by_size[q];
    }
  return np;
}

int gs_cluster_speed_prior(const double *step_s, const double *samples, const int *n,
                           const double *r, int npts, int max, double *out) {
  int any = 0;
  for (int x = 1; x <= max; x++) any |= step_s[x] > 0 && samples[x] > 0;
  if (!any) return -1;
  /* measured step time = a * predicted + u over the measured sizes */
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int k = 0;
  for (int q = 0; q < npts; q++) {
    int x = n[q];
    if (x < 1 || x > max || !(step_s[x] > 0) || !(samples[x] > 0) || !(r[q] > 0)) continue;
    double p = step_s[x], y = samples[x] / r[q];
    sx += p;
    sy += y;
    sxx += p * p;
    sxy += p * y;
    k++;
  }
  double a = 1, u = 0;
  if (k == 1) {
    if (sy >= sx) u = sy - sx;
    else a = sy / sx;
  } else if (k >= 2) {
    double d = k * sxx - sx * sx;
    if (fabs(d) > 1e-18 * k * sxx) {
      a = (k * sxy - sx * sy) / d;
      u = (sy - a * sx) / k;
    }
    if (!(a > 0) || u < 0 || fabs(d) <= 1e-18 * k * sxx) { /* through the origin: u = 0 */
      a = sxy / sxx;
      u = 0;
    }
  }
  out[0] = 0;
  double last = 0;
  for (int x = 1; x <= max; x++) {
    out[x] = step_s[x] > 0 && samples[x] > 0 ? samples[x] / (a * step_s[x] + u) : last;
    last = out[x];
  }
  for (int q = 0; q < npts; q++)
    if (n[q] >= 1 && n[q] <= max && r[q] > 0) out[n[q]] = r[q];
  return 0;
}
