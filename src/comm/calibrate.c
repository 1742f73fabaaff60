/*
 * The cost model at gs_comm_create (calibrate_setup: GRADSYNC_COST_FILE,
 * GRADSYNC_ALPHA/BETA, GRADSYNC_COST_CACHE, or ring exchanges timed on the
 * world and node groups) and the per-algorithm fit (gs_comm_calibrate).
 * Every measurement is agreed on by all ranks, so that every rank chooses
 * the same algorithm.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"

/* ---- Start-up cost model -------------------------------------------------- */

/* Times a ring exchange (send right, receive left) of `bytes` bytes. */
static gs_status time_exchange(const coll_group *g, void *buf, size_t bytes,
                               int reps, double *secs) {
  int right = (g->rank + 1) % g->size, left = (g->rank - 1 + g->size) % g->size;
  char *sbuf = buf, *rbuf = (char *)buf + bytes;
  double best = 1e30;
  for (int i = 0; i < reps + 1; i++) {
    MPI_TRY(g, MPI_Barrier(g->mpi));
    double t0 = gs_now();
    MPI_TRY(g, MPI_Sendrecv(sbuf, (int)bytes, MPI_BYTE, right, TAG_CALIB, rbuf,
                            (int)bytes, MPI_BYTE, left, TAG_CALIB, g->mpi,
                            MPI_STATUS_IGNORE));
    double t = gs_now() - t0;
    if (i > 0 && t < best) best = t; /* the first is a warm-up */
  }
  *secs = best;
  return GS_OK;
}

/* Measures alpha and beta of a group with ring exchanges, agreed on by all
 * ranks (the maximum), so that every rank chooses the same algorithm. Beta
 * comes from the difference of two large exchanges, which cancels what a
 * token-bucket burst or a warm TCP window lets through at first. */
static gs_status calibrate_group(const coll_group *g, double *alpha,
                                 double *beta) {
  const size_t mid = CALIB_MID_BYTES, big = CALIB_BIG_BYTES;
  void *buf = gs_calloc(2, big);
  if (buf == NULL) return GS_ERR_NOMEM;
  double t_small = 0, t_mid = 0, t_big = 0;
  gs_status st = time_exchange(g, buf, 8, 20, &t_small);
  if (st == GS_OK) st = time_exchange(g, buf, mid, 3, &t_mid);
  if (st == GS_OK) st = time_exchange(g, buf, big, 3, &t_big);
  gs_free(buf);
  GS_CHECK(st);
  double v[2] = {t_small, (t_big - t_mid) / (double)(big - mid)};
  MPI_TRY(g, MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX, g->mpi));
  *alpha = v[0];
  *beta = v[1] > 0 ? v[1] : 1e-12;
  return GS_OK;
}

static double measure_gamma(void) {
  enum { N = 1 << 18 };
  float *a = gs_calloc(2 * N, sizeof(float));
  if (a == NULL) return 1.0 / 5e9;
  double best = 1e30;
  for (int i = 0; i < 4; i++) {
    double t0 = gs_now();
    gs_reduce_local(a, a + N, N, GS_F32, GS_SUM);
    double t = gs_now() - t0;
    if (t < best) best = t;
  }
  gs_free(a);
  return best / (N * sizeof(float));
}

/* Whether a loaded model covers a start-up fit up to `bytes`: some
 * algorithm's measurements reach that size (0: no fit asked for). */
static int cache_covers(const gs_cost_params *p, size_t bytes) {
  if (bytes == 0) return 1;
  for (int a = 0; a < GS_ALGO_COUNT; a++)
    if (p->fit[a].npoints > 0 && p->fit[a].bytes[p->fit[a].npoints - 1] >= (double)bytes)
      return 1;
  return 0;
}

/* GRADSYNC_COST_CACHE=FILE: the calibration of an earlier job on the same
 * hosts (a launcher such as `gradsync run --cost-cache` names the file by
 * its host list). Rank 0 reads it and broadcasts it: the other ranks'
 * hosts need not see the file. Returns 1 if it was used; otherwise the
 * job calibrates, and rank 0 saves the result there (calibrate_cache_save). */
static int cache_load(gs_comm *c, const char *path, gs_cost_topo topo) {
  gs_cost_params loaded;
  memset(&loaded, 0, sizeof loaded);
  int hit = 0;
  if (c->world.rank == 0) {
    if (gs_cost_load(path, topo, &loaded) != GS_OK)
      gs_log(GS_LOG_DEBUG, "GRADSYNC_COST_CACHE=%s: not used: %s", path, gs_last_error());
    else if (!cache_covers(&loaded, c->calibrate_bytes))
      gs_log(GS_LOG_DEBUG, "GRADSYNC_COST_CACHE=%s: not used: its fits end below %zu bytes",
             path, c->calibrate_bytes);
    else
      hit = 1;
  }
  if (MPI_Bcast(&hit, 1, MPI_INT, 0, c->world.mpi) != MPI_SUCCESS) return 0;
  if (hit && MPI_Bcast(&loaded, (int)sizeof loaded, MPI_BYTE, 0, c->world.mpi) != MPI_SUCCESS)
    return 0;
  if (!hit) return 0;
  c->cost = loaded;
  c->cost_from_env = 1;
  gs_log(GS_LOG_INFO, "cost model from the cache %s (GRADSYNC_COST_CACHE): not calibrated",
         path);
  return 1;
}

void calibrate_cache_save(gs_comm *c) {
  if (c->cost_cache == NULL || c->world.rank != 0) return;
  gs_cost_topo topo = {c->world.size, c->nodes};
  if (gs_cost_save(c->cost_cache, &c->cost, topo) != GS_OK)
    gs_log(GS_LOG_WARN, "GRADSYNC_COST_CACHE=%s: the calibration was not saved: %s",
           c->cost_cache, gs_last_error());
}

gs_status calibrate_setup(gs_comm *c) {
  const char *file = getenv("GRADSYNC_COST_FILE");
  const char *cache = getenv("GRADSYNC_COST_CACHE");
  gs_cost_topo topo = {c->world.size, c->nodes};
  if (file && *file) {
    /* A calibration saved by `gradsync bench --cost-out` on this topology.
     * Every rank reads the same file; all must succeed or none uses it. */
    gs_cost_params loaded;
    gs_status lst = gs_cost_load(file, topo, &loaded);
    /* 0 loaded; 1 measured on another topology (a job of another size
     * given the same file: calibrated afresh, with a warning); 2 unusable
     * (missing, malformed: the user's setting is wrong, and is refused as
     * any malformed setting is; it used to be ignored with a warning). */
    int mine = lst == GS_OK ? 0 : lst == GS_ERR_MISMATCH ? 1 : 2, worst = 0;
    MPI_TRY(&c->world, MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, c->world.mpi));
    if (worst == 0) {
      c->cost = loaded;
      c->cost_from_env = 1;
      gs_log(GS_LOG_INFO, "cost model loaded from %s", file);
      return GS_OK;
    }
    if (worst == 2) {
      if (mine == 2) {
        char why[512];
        gs__error_copy(why, sizeof why);
        return gs_error(GS_ERR_PARSE, "GRADSYNC_COST_FILE=%s: %s", file, why);
      }
      return gs_error(GS_ERR_PARSE, "GRADSYNC_COST_FILE=%s: another rank could not load it",
                      file);
    }
    gs_log(GS_LOG_WARN, "GRADSYNC_COST_FILE ignored: %s",
           mine ? gs_last_error() : "another rank could not load it");
  } else if (cache && *cache && c->world.size > 1 && !c->have_env_cost) {
    /* The same on every rank (config_agree): every rank takes this branch. */
    if (cache_load(c, cache, topo)) return GS_OK;
    c->cost_cache = cache;
  }
  gs_cost_preset("1GbE", &c->cost);
  /* The communicator's model is this network's, measured below or given
   * (GRADSYNC_ALPHA/BETA): not the emulated link's calibrated rows and
   * per-message cost that the 1GbE preset carries, which would otherwise
   * price every message in their place. */
  c->cost.ncalib = 0;
  c->cost.alpha_msg = 0;
  double gamma = measure_gamma();
  MPI_TRY(&c->world, MPI_Allreduce(MPI_IN_PLACE, &gamma, 1, MPI_DOUBLE, MPI_MAX,
                                   c->world.mpi));
  c->cost.gamma = gamma;
  if (c->have_env_cost) {
    c->cost_from_env = 1;
    c->cost.alpha = c->env_alpha;
    c->cost.beta = c->env_beta;
  } else if (c->world.size > 1) {
    /* With several ranks per node, the flat ring's slowest hop crosses
     * nodes: the world ring's timing is the inter-node cost. */
    GS_CHECK(calibrate_group(&c->world, &c->cost.alpha, &c->cost.beta));
  }
  /* Node-local parameters, measured on nodes with several ranks. Every rank
   * joins the world-wide maximum (the decision to measure is per node, so
   * the agreement must not be). */
  double v[2] = {0, 0};
  if (c->local.size > 1 && c->nodes > 1)
    GS_CHECK(shm_active(c) ? shm_calibrate(c, &v[0], &v[1])
                           : calibrate_group(&c->local, &v[0], &v[1]));
  MPI_TRY(&c->world, MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_MAX,
                                   c->world.mpi));
  c->cost.alpha_local = v[1] > 0 ? v[0] : c->cost.alpha;
  c->cost.beta_local = v[1] > 0 ? v[1] : c->cost.beta;
  gs_log(GS_LOG_INFO, "cost model: alpha=%.3g s beta=%.3g s/B (%.3g GB/s) "
         "alpha_local=%.3g beta_local=%.3g gamma=%.3g", c->cost.alpha,
         c->cost.beta, 1e-9 / c->cost.beta, c->cost.alpha_local,
         c->cost.beta_local, c->cost.gamma);
  return GS_OK;
}


/* ---- Per-algorithm calibration ------------------------------------------ */

static size_t pow_size(size_t b, int e) {
  size_t r = 1;
  while (e-- > 0 && r < ((size_t)1 << 40)) r *= b;
  return r;
}

#define CALIB_REPS 3

/* Times every algorithm of algos at one size, interleaved: after a warm-up
 * call of each, CALIB_REPS rounds in which each algorithm runs once, the
 * order rotating. A disturbance of the host (another process, the shaper's
 * bucket) then falls on all algorithms alike instead of on every size of
 * the one being timed (this alone did not keep a draw from taking a slower
 * algorithm: gs_cost_best_allreduce's margin for the ring does). secs[a]: the median over rounds of the slowest rank, so that every
 * rank fits the same numbers. */
static gs_status time_allreduces(gs_comm *c, const gs_algo *algos, int nalgo,
                                 float *buf, size_t count, double *secs) {
  double t[CALIB_REPS * GS_ALGO_COUNT];
  for (int a = 0; a < nalgo; a++)
    GS_CHECK(gs_allreduce(c, GS_IN_PLACE, buf, count, GS_F32, GS_SUM, algos[a]));
  for (int r = 0; r < CALIB_REPS; r++) {
    for (int k = 0; k < nalgo; k++) {
      int a = (k + r) % nalgo;
      GS_CHECK(gs_barrier(c, GS_ALGO_MPI));
      double t0 = gs_now();
      GS_CHECK(gs_allreduce(c, GS_IN_PLACE, buf, count, GS_F32, GS_SUM, algos[a]));
      t[r * nalgo + a] = gs_now() - t0;
    }
  }
  GS_CHECK(gs_allreduce(c, GS_IN_PLACE, t, (size_t)(CALIB_REPS * nalgo), GS_F64,
                        GS_MAX, GS_ALGO_MPI));
  /* The median of the rounds: the minimum favoured the algorithm whose
   * times scatter most (Rabenseifner's on 4 nodes at 100 Mbit/s took
   * 1.10-1.32 s for 8 MB, the ring 1.06-1.09; its luckiest round won). */
  _Static_assert(CALIB_REPS == 3, "the median below is of three rounds");
  for (int a = 0; a < nalgo; a++)
    secs[a] = gs__median3(t[a], t[nalgo + a], t[2 * nalgo + a]);
  return GS_OK;
}

/* "4K", "128M", "1G": a power of two's size as the logs show it. */
static void size_label(char *out, size_t cap, size_t b) {
  static const char unit[] = "BKMG";
  int u = 0;
  while (u < 3 && b >= 1024 && b % 1024 == 0) {
    b /= 1024;
    u++;
  }
  snprintf(out, cap, "%zu%c", b, unit[u]);
}

/* Logs (info) which algorithm 'auto' now takes for an allreduce, as size
 * ranges from 4 KB to 1 GB ("ring 4K-64K, rd 128K-1G"): a user can see
 * what the fit decided, and a draw that picked a slow algorithm shows. */
static void log_choices(const gs_comm *c) {
  if (gs_log_get_level() > GS_LOG_INFO) return;
  char out[512];
  size_t len = 0;
  gs_algo run = GS_ALGO_AUTO;
  size_t from = 0, last = 0;
  for (size_t b = 4096;; b *= 2) {
    int end = b > ((size_t)1 << 30);
    gs_algo a = end ? GS_ALGO_AUTO : gs_comm_choose_allreduce(c, b);
    if (a != run || end) {
      if (run != GS_ALGO_AUTO && len < sizeof out) {
        char f[24], l[24];
        size_label(f, sizeof f, from);
        size_label(l, sizeof l, last);
        len += (size_t)snprintf(out + len, sizeof out - len, "%s%s %s-%s",
                                len ? ", " : "", gs_algo_name(run), f, l);
      }
      run = a;
      from = b;
    }
    if (end) break;
    last = b;
  }
  gs_log(GS_LOG_INFO, "allreduce 'auto' chooses: %s", out);
}

gs_status gs_comm_calibrate(gs_comm *c, size_t max_bytes) {
  if (c == NULL) return gs_error(GS_ERR_INVALID_ARG, "calibrate: comm is NULL");
  if (max_bytes < 64 * 1024) max_bytes = 64 * 1024;
  if (c->world.size < 2) return GS_OK;
  /* Every allreduce algorithm of the table but MPI's, which the cost model
   * does not predict, and hier only where it has nodes of several ranks. */
  gs_algo table[GS_ALGO_COUNT], algos[GS_ALGO_COUNT];
  size_t ntable = coll_algo_list(COLL_ALLREDUCE, table, GS_ALGO_COUNT);
  int hier = c->uniform_nodes && c->nodes > 1 && c->local.size > 1, nalgo = 0;
  for (size_t i = 0; i < ntable; i++)
    if (table[i] != GS_ALGO_MPI && (table[i] != GS_ALGO_HIER || hier))
      algos[nalgo++] = table[i];
  double bytes[12], secs[12];
  size_t nsize = 0;
  /* Sizes from 4 KB to max_bytes, at most 8 of them, the largest included. */
  size_t step = 4;
  while (4096 * pow_size(step, 7) < max_bytes) step *= 2;
  for (size_t b = 4096; b < max_bytes && nsize < 7; b *= step) bytes[nsize++] = (double)b;
  bytes[nsize++] = (double)max_bytes;
  float *buf = gs_calloc(max_bytes / sizeof(float) + 1, sizeof(float));
  if (buf == NULL) return GS_ERR_NOMEM;
  gs_cost_topo t = {c->world.size, c->nodes};
  gs_cost_params fitted = c->cost;
  gs_status st = GS_OK;
  double secs_at[12][GS_ALGO_COUNT];
  for (size_t i = 0; i < nsize && st == GS_OK; i++)
    st = time_allreduces(c, algos, nalgo, buf, (size_t)bytes[i] / sizeof(float),
                         secs_at[i]);
  for (int a = 0; a < nalgo && st == GS_OK; a++) {
    for (size_t i = 0; i < nsize; i++) secs[i] = secs_at[i][a];
    st = gs_cost_fit_algo(&fitted, t, algos[a], bytes, secs, nsize);
    if (st == GS_OK)
      gs_log(GS_LOG_INFO, "calibrated %s: alpha %.3g s, beta %.3g s/B",
             gs_algo_name(algos[a]), fitted.fit[algos[a]].alpha,
             fitted.fit[algos[a]].beta);
  }
  gs_free(buf);
  if (st == GS_OK) c->cost = fitted;
  if (st == GS_OK) log_choices(c);
  return st;
}
