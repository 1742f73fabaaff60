/*
 * The sharding planner (gradsync/embed.h; docs/DLRM.md).
 *
 * 1. Each table's sharding: the one forced, or, per table, by its cost
 *    (gs_cost_shard) against the mean load a rank would carry with every
 *    table placed whole (the sum of the tables' table-wise costs over p):
 *      dp    when its replicas fit and their lookups and gradient all-reduce,
 *            summed over the ranks, cost less than exchanging its pooled
 *            vectors (small tables);
 *      cw    when whole it would exceed half the mean load or the memory
 *            cap, and its columns split into blocks of 8 or more (the
 *            all-to-all pattern kept, the pieces placed as tables);
 *      rw    the same when the columns cannot split finely enough (every
 *            rank a slice of rows; twrw when the job spans several nodes of
 *            several ranks: the rows of one node's ranks);
 *      tw    otherwise.
 * 2. Placement: fixed shards (rw's rank i, dp's replicas, twrw's node) are
 *    counted first; the movable ones (tw, cw) go longest first to the rank
 *    with the least estimated time that still has memory for them (LPT).
 * 3. Improvement: a movable shard leaves the busiest rank for the least
 *    busy one, or swaps with a smaller one elsewhere, while that lowers
 *    the maximum; and while the busiest rank is still over 1.10x the mean,
 *    its largest whole table (or column block) of 16 columns or more is
 *    split in two column blocks and the movable shards placed again (not
 *    under a forced sharding other than cw: forced is every table's).
 * Every table's exchange is one fused message per phase, so shards are
 * priced by their bytes (gs_cost_shard); a table is replicated (dp) when
 * that lowers the total work, split when whole it would exceed a rank's
 * fair share (the mean load with every table whole) or the memory cap.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlrm_internal.h"
#include "gradsync/embed.h"
#include "gs_internal.h"

/* Sizes in messages are in MiB, the unit --mem-cap's M suffix reads. */
#define MIB 1048576.0

static const char *const kind_names[GS_SHARD_KIND_COUNT] = {"tw", "rw", "cw", "twrw", "dp"};

const char *gs_shard_kind_name(gs_shard_kind k) {
  return (unsigned)k < GS_SHARD_KIND_COUNT ? kind_names[k] : "invalid-sharding";
}

gs_status gs_shard_kind_parse(const char *s, int *out) {
  if (s && strcmp(s, "auto") == 0) {
    *out = -1;
    return GS_OK;
  }
  for (int k = 0; s && k < GS_SHARD_KIND_COUNT; k++)
    if (strcmp(s, kind_names[k]) == 0) {
      *out = k;
      return GS_OK;
    }
  return gs_error(GS_ERR_PARSE, "sharding '%s': expected auto, tw, rw, cw, twrw or dp",
                  s ? s : "(null)");
}

/* ---- Presets --------------------------------------------------------------- */

/* Criteo's 26 categorical features: Kaggle's cardinalities, and Terabyte's
 * and MLPerf's with ids capped at 10 M and 40 M (facebookresearch/dlrm;
 * ../shared/research/dlrm.md). */
static const size_t kaggle_rows[26] = {
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572};
static const size_t terabyte_rows[26] = {
    9980333, 36084, 17217, 7378, 20134, 3, 7112, 1442, 61, 9758201, 1333352, 313829, 10,
    2208, 11156, 122, 4, 970, 14, 9994222, 7267859, 9946608, 415421, 12420, 101, 36};
static const size_t mlperf_rows[26] = {
    39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346, 10,
    2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36};
static const char *const criteo_names[26] = {
    "C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9", "C10", "C11", "C12", "C13",
    "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21", "C22", "C23", "C24", "C25", "C26"};

gs_status gs_embed_preset(const char *name, double scale, gs_embed_spec *out, int cap,
                          int *n) {
  const size_t *rows = NULL;
  size_t dim = 0;
  if (name && strcmp(name, "kaggle") == 0) rows = kaggle_rows, dim = 16;
  else if (name && strcmp(name, "terabyte") == 0) rows = terabyte_rows, dim = 64;
  else if (name && strcmp(name, "mlperf") == 0) rows = mlperf_rows, dim = 128;
  else
    return gs_error(GS_ERR_INVALID_ARG, "table preset '%s': expected kaggle, terabyte or "
                    "mlperf", name ? name : "(null)");
  if (!(scale > 0) || scale > 1)
    return gs_error(GS_ERR_INVALID_ARG, "table preset '%s': scale %g must be above 0 and "
                    "at most 1", name, scale);
  if (cap < 26)
    return gs_error(GS_ERR_INVALID_ARG, "table preset '%s': 26 tables, room for %d", name,
                    cap);
  for (int i = 0; i < 26; i++) {
    double r = ceil((double)rows[i] * scale);
    out[i] = (gs_embed_spec){criteo_names[i], r < 1 ? 1 : (size_t)r, dim, 1.0};
  }
  *n = 26;
  return GS_OK;
}

/* ---- Plans ----------------------------------------------------------------- */

void gs_shard_plan_free(gs_shard_plan *p) {
  if (p == NULL) return;
  gs_free(p->shards);
  gs_free(p->kind);
  gs_free(p->why);
  gs_free(p->rank_s);
  gs_free(p->rank_mem);
  gs_free(p->rank_wire);
  gs_free(p);
}

static gs_status plan_alloc(int ntables, int ranks, size_t cap, gs_shard_plan **out) {
  gs_shard_plan *p = gs_calloc(1, sizeof *p);
  if (p == NULL) return gs_error(GS_ERR_NOMEM, "sharding plan: out of memory");
  p->ranks = ranks;
  p->ntables = ntables;
  p->row_state = 1;
  p->shards = gs_calloc(cap ? cap : 1, sizeof *p->shards);
  p->kind = gs_calloc((size_t)ntables + 1, sizeof *p->kind);
  p->why = gs_calloc((size_t)ntables + 1, sizeof *p->why);
  p->rank_s = gs_calloc((size_t)ranks, sizeof(double));
  p->rank_mem = gs_calloc((size_t)ranks, sizeof(double));
  p->rank_wire = gs_calloc((size_t)ranks, sizeof(double));
  if (!p->shards || !p->kind || !p->why || !p->rank_s || !p->rank_mem || !p->rank_wire) {
    gs_shard_plan_free(p);
    return gs_error(GS_ERR_NOMEM, "sharding plan: out of memory for %zu shards", cap);
  }
  *out = p;
  return GS_OK;
}

/* The first key of object o not in the NULL-ended list, or NULL: a key a
 * reader does not know is a typo whose value would be silently ignored. */
static const char *unknown_key(const cJSON *o, const char *const *keys) {
  for (const cJSON *q = o ? o->child : NULL; q; q = q->next) {
    int known = 0;
    for (const char *const *k = keys; *k && !known; k++) known = strcmp(q->string, *k) == 0;
    if (!known) return q->string;
  }
  return NULL;
}

/* A shard's bytes: its weights, and row-wise Adagrad's one float a row
 * (row_state; plain SGD keeps none). */
static double shard_mem(size_t rows, size_t cols, int row_state) {
  return (double)rows * (double)cols * 4.0 + (row_state ? (double)rows * 4.0 : 0);
}

static gs_cost_topo shard_topo(const gs_shard_config *cfg) {
  return (gs_cost_topo){cfg->ranks,
                        cfg->ranks / (cfg->ranks_per_node > 0 ? cfg->ranks_per_node : 1)};
}

static gs_cost_shard_in shard_in(const gs_shard_config *cfg, const gs_embed_spec *t,
                                 const gs_shard *s, double cache_t) {
  return (gs_cost_shard_in){s->kind, cfg->batch, t->pooling, (double)(s->row_hi - s->row_lo),
                            (double)t->rows, (double)(s->col_hi - s->col_lo),
                            cfg->wire_elem_bytes, cfg->ranks_per_node, (double)t->dim,
                            cfg->row_sums, cfg->zipf, cache_t};
}

void gs_shard_price(const gs_shard_config *cfg, const gs_embed_spec *t, const gs_shard *s,
                    gs_cost_shard_out *out) {
  gs_cost_shard_in in = shard_in(cfg, t, s, cfg->cache_t);
  gs_cost_shard(&cfg->net, shard_topo(cfg), &cfg->lookup, &in, out);
}

gs_status gs_shard_plan_price(const gs_shard_plan *p, const gs_embed_spec *tables,
                              const gs_shard_config *cfg, gs_cost_shard_out *out) {
  if (p == NULL || tables == NULL || cfg == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "sharding plan: NULL argument");
  /* The shards by rank (a counting sort), each rank's cache time, then
   * every shard at its rank's. */
  size_t n = p->nshards, R = (size_t)p->ranks;
  /* start: R + 2 counts, then fill: R + 1 */
  size_t *start = gs_calloc(2 * R + 3, sizeof *start), *idx = gs_malloc((n + 1) * sizeof *idx);
  gs_cost_shard_in *in = gs_malloc((n + 1) * sizeof *in);
  if (start == NULL || idx == NULL || in == NULL) {
    gs_free(start);
    gs_free(idx);
    gs_free(in);
    return gs_error(GS_ERR_NOMEM, "sharding plan: out of memory pricing %zu shards", n);
  }
  size_t *fill = start + R + 2;
  for (size_t j = 0; j < n; j++) {
    size_t r = p->shards[j].rank >= 0 && (size_t)p->shards[j].rank < R ? (size_t)p->shards[j].rank : R;
    start[r + 1]++;
  }
  for (size_t r = 0; r <= R; r++) start[r + 1] += start[r];
  for (size_t j = 0; j < n; j++) {
    const gs_shard *s = &p->shards[j];
    size_t r = s->rank >= 0 && (size_t)s->rank < R ? (size_t)s->rank : R;
    size_t at = start[r] + fill[r]++;
    idx[at] = j;
    in[at] = shard_in(cfg, &tables[s->table], s, 0);
  }
  gs_cost_topo topo = shard_topo(cfg);
  for (size_t r = 0; r <= R; r++) {
    size_t k = start[r + 1] - start[r];
    double T = r < R && k > 0 ? gs_cost_cache_time(topo, &in[start[r]], (int)k,
                                                   cfg->lookup.cache_bytes, cfg->step_bytes)
                              : 0.0;
    for (size_t a = start[r]; a < start[r + 1]; a++) {
      in[a].cache_t = T;
      gs_cost_shard(&cfg->net, topo, &cfg->lookup, &in[a], &out[idx[a]]);
    }
  }
  gs_free(start);
  gs_free(idx);
  gs_free(in);
  return GS_OK;
}

/* The mean rank's characteristic time: every table whole, over every
 * rank's cache (a balanced plan holds 1/ranks of the hot rows each). */
static double mean_cache_time(const gs_shard_config *cfg, const gs_embed_spec *tables,
                              int ntables) {
  if (!(cfg->lookup.cache_bytes > 0)) return 0.0;
  gs_cost_shard_in *in = gs_malloc((size_t)ntables * sizeof *in);
  if (in == NULL) return 0.0; /* every lookup priced a miss: the model without caches */
  for (int i = 0; i < ntables; i++) {
    gs_shard s = {i, 0, GS_SHARD_TW, 0, tables[i].rows, 0, tables[i].dim, 0, 0, 0};
    in[i] = shard_in(cfg, &tables[i], &s, 0);
  }
  double T = gs_cost_cache_time(shard_topo(cfg), in, ntables,
                                cfg->lookup.cache_bytes * cfg->ranks,
                                cfg->step_bytes * cfg->ranks);
  gs_free(in);
  return T;
}

/* cfg with the characteristic time shards are priced at before they have a
 * rank (the mean rank's unless cfg sets one). */
static gs_shard_config with_cache(const gs_shard_config *cfg, const gs_embed_spec *tables,
                                  int ntables) {
  gs_shard_config c = *cfg;
  if (c.cache_t == 0) c.cache_t = mean_cache_time(cfg, tables, ntables);
  return c;
}

static void price(const gs_shard_config *cfg, const gs_embed_spec *t, gs_shard *s) {
  gs_cost_shard_out o;
  gs_shard_price(cfg, t, s, &o);
  s->est_s = o.total_s;
  s->wire_bytes = o.wire_bytes;
  s->mem_bytes = shard_mem(s->row_hi - s->row_lo, s->col_hi - s->col_lo, cfg->row_sums);
}

static double whole_cost_group(const gs_shard_config *cfg, const gs_embed_spec *t);

static double whole_cost(const gs_shard_config *cfg, const gs_embed_spec *t,
                         gs_shard_kind k) {
  gs_shard s = {0, 0, k, 0, t->rows, 0, t->dim, 0, 0, 0};
  if (k == GS_SHARD_RW) s.row_hi = (t->rows + (size_t)cfg->ranks - 1) / (size_t)cfg->ranks;
  price(cfg, t, &s);
  return s.est_s;
}

/* One of twrw's shards: the rows of one node's ranks. */
static double whole_cost_group(const gs_shard_config *cfg, const gs_embed_spec *t) {
  size_t L = (size_t)(cfg->ranks_per_node > 0 ? cfg->ranks_per_node : 1);
  gs_shard s = {0, 0, GS_SHARD_TWRW, 0, (t->rows + L - 1) / L, 0, t->dim, 0, 0, 0};
  price(cfg, t, &s);
  return s.est_s;
}

/* Column blocks for cw: the fewest blocks of at least 8 columns (dividing
 * the dimension) that bring a block under `target` and the memory cap;
 * 0 if none does. */
static int cw_blocks(const gs_shard_config *cfg, const gs_embed_spec *t, double tw_cost,
                     double target) {
  for (size_t k = 2; k <= t->dim / 8 && k <= (size_t)cfg->ranks; k++) {
    if (t->dim % k != 0) continue;
    double mem = shard_mem(t->rows, t->dim / k, cfg->row_sums);
    if (tw_cost / (double)k <= target && (cfg->mem_cap <= 0 || mem <= cfg->mem_cap)) return (int)k;
  }
  return 0;
}

static gs_status add_shard(gs_shard_plan *p, size_t cap, gs_shard s) {
  if (p->nshards >= cap)
    return gs_error(GS_ERR_INTERNAL, "sharding plan: more than %zu shards", cap);
  p->shards[p->nshards++] = s;
  return GS_OK;
}

static int cmp_est_desc(const void *a, const void *b) {
  const gs_shard *x = *(gs_shard *const *)a, *y = *(gs_shard *const *)b;
  if (x->est_s != y->est_s) return x->est_s < y->est_s ? 1 : -1;
  return x->table != y->table ? x->table - y->table : (int)x->col_lo - (int)y->col_lo;
}

/* Adds (sign 1) or removes (-1) a shard's estimates on its rank. */
static void rank_account(gs_shard_plan *p, const gs_shard *s, double sign) {
  p->rank_s[s->rank] += sign * s->est_s;
  p->rank_mem[s->rank] += sign * s->mem_bytes;
  p->rank_wire[s->rank] += sign * s->wire_bytes;
}

static void move_shard(gs_shard_plan *p, gs_shard *s, int to) {
  rank_account(p, s, -1);
  s->rank = to;
  rank_account(p, s, 1);
}

/* The plan's shards priced where they are, each rank with its own cache
 * (gs_shard_plan_price), and the ranks' sums again (with the cache off, or
 * out of memory for the pricing, the prices stand). The busiest rank's
 * time. */
static double rank_price(gs_shard_plan *p, const gs_embed_spec *tables,
                         const gs_shard_config *cfg) {
  if (cfg->lookup.cache_bytes > 0) {
    gs_cost_shard_out *o = gs_malloc((p->nshards + 1) * sizeof *o);
    if (o && gs_shard_plan_price(p, tables, cfg, o) == GS_OK)
      for (size_t j = 0; j < p->nshards; j++) {
        p->shards[j].est_s = o[j].total_s;
        p->shards[j].wire_bytes = o[j].wire_bytes;
      }
    gs_free(o);
  }
  for (int r = 0; r < p->ranks; r++) p->rank_s[r] = p->rank_mem[r] = p->rank_wire[r] = 0;
  double mx = 0;
  for (size_t j = 0; j < p->nshards; j++)
    if (p->shards[j].rank >= 0 && p->shards[j].rank < p->ranks) rank_account(p, &p->shards[j], 1);
  for (int r = 0; r < p->ranks; r++) mx = fmax(mx, p->rank_s[r]);
  return mx;
}

/* The block of `parts` of table i's rows (all its columns) that the
 * slot-th of its ranks holds, on `rank`. The blocks differ by a row at
 * most, and which slots get the larger ones turns with the table: until
 * 2026-12-06 slot j held block j, so a table of fewer rows than ranks (a
 * Criteo table scaled down, one row) lay on the last rank, every such
 * table on the same one (estimated 1.021 imbalance of 4 ranks under
 * --sharding rw, kaggle:0.0001). */
static gs_shard row_block(int i, int rank, gs_shard_kind kind, const gs_embed_spec *t, int slot,
                          int parts) {
  size_t j = ((size_t)slot + (size_t)i) % (size_t)parts;
  return (gs_shard){i, rank, kind, t->rows * j / (size_t)parts,
                    t->rows * (j + 1) / (size_t)parts, 0, t->dim, 0, 0, 0};
}

/* twrw's choice of node (of `nodes`, L ranks each): the one whose ranks
 * have the least estimated time so far among those where every rank has
 * room under the memory cap (cap > 0) for `need` more bytes (the largest of
 * the table's row blocks); the least busy of all when none has. */
static int least_busy_node(const double *rank_s, const double *rank_mem, double need,
                           double cap, int nodes, int L) {
  int best = 0, best_fits = 0;
  double best_s = INFINITY;
  for (int n = 0; n < nodes; n++) {
    double sum = 0;
    int fits = 1;
    for (int r = n * L; r < (n + 1) * L; r++) {
      sum += rank_s[r];
      fits &= !(cap > 0) || rank_mem[r] + need <= cap;
    }
    if ((fits && !best_fits) || (fits == best_fits && sum < best_s))
      best_s = sum, best = n, best_fits = fits;
  }
  return best;
}

/* The bytes of a table's largest block of rows over `parts` ranks. */
static double largest_row_block(const gs_embed_spec *t, int parts, int row_state) {
  return shard_mem((t->rows + (size_t)parts - 1) / (size_t)parts, t->dim, row_state);
}

/* Places the movable shards (tw, cw) on top of the fixed ones: longest
 * first on the least busy rank with memory for it, then moves (or swaps)
 * off the busiest rank while the maximum falls. Recomputes the per-rank
 * sums. */
static gs_status place(gs_shard_plan *p, const gs_embed_spec *tables,
                       const gs_shard_config *cfg, int *failed) {
  int P = p->ranks;
  for (int r = 0; r < P; r++) p->rank_s[r] = p->rank_mem[r] = p->rank_wire[r] = 0;
  gs_shard **mov = gs_malloc((p->nshards + 1) * sizeof *mov);
  if (mov == NULL) return gs_error(GS_ERR_NOMEM, "sharding plan: out of memory");
  size_t nmov = 0;
  for (size_t j = 0; j < p->nshards; j++) {
    gs_shard *s = &p->shards[j];
    if (s->kind == GS_SHARD_TW || s->kind == GS_SHARD_CW) {
      s->rank = -1;
      mov[nmov++] = s;
    } else {
      rank_account(p, s, 1);
    }
  }
  qsort(mov, nmov, sizeof *mov, cmp_est_desc);
  gs_status st = GS_OK;
  for (size_t j = 0; j < nmov; j++) {
    gs_shard *s = mov[j];
    int best = -1;
    for (int r = 0; r < P; r++) {
      if (cfg->mem_cap > 0 && p->rank_mem[r] + s->mem_bytes > cfg->mem_cap) continue;
      if (best < 0 || p->rank_s[r] < p->rank_s[best]) best = r;
    }
    if (best < 0) {
      /* The room the shards placed so far leave: what the shard missed. */
      int roomy = 0;
      for (int r = 1; r < P; r++)
        if (p->rank_mem[r] < p->rank_mem[roomy]) roomy = r;
      st = gs_error(GS_ERR_INVALID_ARG, "sharding plan: table '%s' (columns %zu-%zu, %.3g MiB) "
                    "fits on no rank under the memory cap of %.3g MiB: the most room left is "
                    "%.3g MiB, on rank %d (%.3g MiB already there)",
                    tables[s->table].name ? tables[s->table].name : "?", s->col_lo, s->col_hi,
                    s->mem_bytes / MIB, cfg->mem_cap / MIB,
                    fmax(0, cfg->mem_cap - p->rank_mem[roomy]) / MIB, roomy,
                    p->rank_mem[roomy] / MIB);
      if (failed) *failed = s->table;
      break;
    }
    s->rank = best;
    rank_account(p, s, 1);
  }
  for (size_t iter = 0; st == GS_OK && iter < 4 * nmov + 8; iter++) {
    int hi = 0, lo = 0;
    for (int r = 1; r < P; r++) {
      if (p->rank_s[r] > p->rank_s[hi]) hi = r;
      if (p->rank_s[r] < p->rank_s[lo]) lo = r;
    }
    gs_shard *best = NULL;
    double best_max = p->rank_s[hi];
    for (size_t j = 0; j < nmov; j++) {
      gs_shard *s = mov[j];
      if (s->rank != hi) continue;
      if (cfg->mem_cap > 0 && p->rank_mem[lo] + s->mem_bytes > cfg->mem_cap) continue;
      double m = fmax(p->rank_s[hi] - s->est_s, p->rank_s[lo] + s->est_s);
      if (m < best_max - 1e-15) best_max = m, best = s;
    }
    if (best != NULL) {
      move_shard(p, best, lo);
      continue;
    }
    /* No move helps: a swap of a shard of the busiest rank with a smaller
     * one elsewhere, the pair that lowers the maximum of the two most. */
    gs_shard *sa = NULL, *sb = NULL;
    if (nmov <= 4096)
      for (size_t j = 0; j < nmov; j++) {
        gs_shard *a = mov[j];
        if (a->rank != hi) continue;
        for (size_t k = 0; k < nmov; k++) {
          gs_shard *b = mov[k];
          if (b->rank == hi || b->est_s >= a->est_s) continue;
          int r = b->rank;
          if (cfg->mem_cap > 0 && p->rank_mem[r] - b->mem_bytes + a->mem_bytes > cfg->mem_cap)
            continue;
          if (cfg->mem_cap > 0 && p->rank_mem[hi] - a->mem_bytes + b->mem_bytes > cfg->mem_cap)
            continue;
          double m = fmax(p->rank_s[hi] - a->est_s + b->est_s, p->rank_s[r] - b->est_s + a->est_s);
          if (m < best_max - 1e-15) best_max = m, sa = a, sb = b;
        }
      }
    if (sa == NULL) break;
    int r = sb->rank;
    move_shard(p, sa, r);
    move_shard(p, sb, hi);
  }
  gs_free(mov);
  return st;
}

static double tr_plan(const gs_embed_spec *tables, int ntables, const gs_shard_config *cfg,
                      gs_shard_plan *out, size_t out_cap);

/* Table i's shards replaced by row blocks on every rank (rw): the fallback
 * for a table that whole, in column blocks or replicated does not fit the
 * room the memory cap leaves. */
static gs_status to_row_wise(gs_shard_plan *p, const gs_embed_spec *tables,
                             const gs_shard_config *cfg, size_t cap, int i, const char *why) {
  size_t k = 0;
  for (size_t j = 0; j < p->nshards; j++)
    if (p->shards[j].table != i) p->shards[k++] = p->shards[j];
  p->nshards = k;
  for (int r = 0; r < p->ranks; r++) {
    gs_shard s = row_block(i, r, GS_SHARD_RW, &tables[i], r, p->ranks);
    price(cfg, &tables[i], &s);
    GS_CHECK(add_shard(p, cap, s));
  }
  p->kind[i] = GS_SHARD_RW;
  snprintf(p->why[i], sizeof p->why[i], "rw: %s", why);
  return GS_OK;
}

/* place, and where a table misses the memory cap (unless the sharding is
 * forced), that table row-wise and again: the one that fits on no rank, or
 * on a rank whose fixed shards (replicas, twrw's rows) alone exceed the
 * cap, its largest replicated or twrw table. Every table row-wise over
 * every rank is the least any rank can hold: when that misses the cap, no
 * plan fits. */
static gs_status place_fitting(gs_shard_plan *p, const gs_embed_spec *tables,
                               const gs_shard_config *cfg, size_t cap) {
  char why[160];
  for (;;) {
    int failed = -1;
    gs_status st = place(p, tables, cfg, &failed);
    if (st != GS_OK && (cfg->force >= 0 || failed < 0)) return st;
    if (st != GS_OK) {
      double room = 0;
      for (int r = 0; r < p->ranks; r++) room = fmax(room, cfg->mem_cap - p->rank_mem[r]);
      snprintf(why, sizeof why, "whole (or in column blocks) it fits in no rank's room under "
               "the memory cap of %.3g MiB (at most %.3g MiB left), so its rows are split over "
               "every rank", cfg->mem_cap / MIB, fmax(0, room) / MIB);
      GS_CHECK(to_row_wise(p, tables, cfg, cap, failed, why));
      continue;
    }
    if (!(cfg->mem_cap > 0)) return GS_OK;
    int over = -1;
    for (int r = 0; r < p->ranks; r++)
      if (p->rank_mem[r] > cfg->mem_cap && (over < 0 || p->rank_mem[r] > p->rank_mem[over]))
        over = r;
    if (over < 0) return GS_OK;
    int big = -1;
    double big_mem = 0;
    for (size_t j = 0; cfg->force < 0 && j < p->nshards; j++) {
      const gs_shard *s = &p->shards[j];
      if (s->rank == over && (s->kind == GS_SHARD_DP || s->kind == GS_SHARD_TWRW) &&
          s->mem_bytes > big_mem)
        big = s->table, big_mem = s->mem_bytes;
    }
    if (big < 0)
      return gs_error(GS_ERR_INVALID_ARG, "sharding plan: rank %d holds %.3g MiB, over the "
                      "memory cap of %.3g MiB, %s", over, p->rank_mem[over] / MIB,
                      cfg->mem_cap / MIB, cfg->force >= 0 ? "with every table sharded as "
                      "forced" : "even with its tables split row-wise over every rank: no "
                      "plan fits");
    snprintf(why, sizeof why,
             "as %s, rank %d would hold %.3g MiB, over the memory cap of %.3g MiB, "
             "so its rows are split over every rank", kind_names[p->kind[big]], over,
             p->rank_mem[over] / MIB, cfg->mem_cap / MIB);
    GS_CHECK(to_row_wise(p, tables, cfg, cap, big, why));
  }
}

/* The busiest rank's largest whole table (or block) of 16 columns or more
 * split in two column blocks, the rank `ratio` times the mean. 0 when none
 * can be (or on error, in *st). */
static int split_busiest(gs_shard_plan *p, const gs_embed_spec *tables,
                         const gs_shard_config *cfg, size_t cap, double ratio, gs_status *st) {
  int hi = 0;
  for (int r = 1; r < p->ranks; r++)
    if (p->rank_s[r] > p->rank_s[hi]) hi = r;
  gs_shard *big = NULL;
  for (size_t j = 0; j < p->nshards; j++) {
    gs_shard *s = &p->shards[j];
    size_t w = s->col_hi - s->col_lo;
    if (s->rank == hi && (s->kind == GS_SHARD_TW || s->kind == GS_SHARD_CW) && w >= 16 &&
        w % 2 == 0 && (big == NULL || s->est_s > big->est_s))
      big = s;
  }
  if (big == NULL || p->nshards >= cap) return 0;
  int i = big->table;
  size_t half = (big->col_hi - big->col_lo) / 2;
  gs_shard second = *big;
  big->col_hi = big->col_lo + half;
  second.col_lo = big->col_hi;
  big->kind = second.kind = GS_SHARD_CW;
  price(cfg, &tables[i], big);
  price(cfg, &tables[i], &second);
  if ((*st = add_shard(p, cap, second)) != GS_OK) return 0;
  if (p->kind[i] == GS_SHARD_TW)
    snprintf(p->why[i], sizeof p->why[i], "cw: split in column blocks to balance the "
             "ranks (whole, its rank was %.2fx the mean)", ratio);
  p->kind[i] = GS_SHARD_CW;
  return 1;
}

/* Each rank priced with its own cache; placed once more on those prices,
 * kept where that lowers the busiest rank. */
static void reprice_and_replace(gs_shard_plan *p, const gs_embed_spec *tables,
                                const gs_shard_config *cfg) {
  double mx = rank_price(p, tables, cfg);
  int *was = gs_malloc((p->nshards + 1) * sizeof *was);
  if (was == NULL) return; /* the placement stands */
  for (size_t j = 0; j < p->nshards; j++) was[j] = p->shards[j].rank;
  /* A placement on the new prices that misses the memory cap leaves the
   * one before, which fits. */
  gs_status pst = place(p, tables, cfg, NULL);
  if (pst != GS_OK || rank_price(p, tables, cfg) >= mx) {
    for (size_t j = 0; j < p->nshards; j++) p->shards[j].rank = was[j];
    rank_price(p, tables, cfg);
  }
  gs_free(was);
}

/* The DLRM reference's contiguous slicing into q: whole tables dealt out in
 * blocks of index. 0 when a rank's tables exceed the memory cap. */
static int contiguous_plan(const gs_embed_spec *tables, int ntables,
                           const gs_shard_config *cfg, gs_shard_plan *q, size_t cap) {
  int P = cfg->ranks, fits = 1;
  for (int r = 0; r < P; r++) {
    int lo = (int)((long)ntables * r / P), hi = (int)((long)ntables * (r + 1) / P);
    for (int i = lo; i < hi; i++) {
      gs_shard sh = row_block(i, r, GS_SHARD_TW, &tables[i], 0, 1);
      price(cfg, &tables[i], &sh);
      if (add_shard(q, cap, sh) != GS_OK) return 0;
      rank_account(q, &sh, 1);
      q->kind[i] = GS_SHARD_TW;
    }
    if (cfg->mem_cap > 0 && q->rank_mem[r] > cfg->mem_cap) fits = 0;
  }
  return fits;
}

gs_status gs_shard_plan_make(const gs_embed_spec *tables, int ntables,
                             const gs_shard_config *cfg, gs_shard_plan **out) {
  if (out) *out = NULL;
  if (tables == NULL || cfg == NULL || out == NULL || ntables < 1)
    return gs_error(GS_ERR_INVALID_ARG, "sharding plan: NULL argument or no tables");
  int P = cfg->ranks, L = cfg->ranks_per_node > 0 ? cfg->ranks_per_node : 1;
  if (P < 1 || P % L != 0)
    return gs_error(GS_ERR_INVALID_ARG, "sharding plan: %d ranks in nodes of %d", P, L);
  if (!(cfg->batch > 0) || !(cfg->wire_elem_bytes > 0))
    return gs_error(GS_ERR_INVALID_ARG, "sharding plan: batch %g and wire element %g "
                    "bytes must be above 0", cfg->batch, cfg->wire_elem_bytes);
  if (cfg->force >= GS_SHARD_KIND_COUNT)
    return gs_error(GS_ERR_INVALID_ARG, "sharding plan: unknown sharding %d", cfg->force);
  for (int i = 0; i < ntables; i++)
    if (tables[i].rows == 0 || tables[i].dim == 0 || !(tables[i].pooling >= 0))
      return gs_error(GS_ERR_INVALID_ARG, "sharding plan: table '%s' has %zu rows, %zu "
                      "columns and pooling %g", tables[i].name ? tables[i].name : "?",
                      tables[i].rows, tables[i].dim, tables[i].pooling);
  gs_shard_config priced = with_cache(cfg, tables, ntables);
  cfg = &priced;
  int nodes = P / L;
  size_t cap = 0;
  for (int i = 0; i < ntables; i++) cap += (size_t)P + tables[i].dim / 8 + 1;
  gs_shard_plan *p;
  GS_CHECK(plan_alloc(ntables, P, cap, &p));
  p->row_state = cfg->row_sums;
  gs_status st = GS_OK;
  /* 1. The mean load with every table whole, the yardstick of "large". */
  double total = 0;
  for (int i = 0; i < ntables; i++) total += whole_cost(cfg, &tables[i], GS_SHARD_TW);
  double target = total / P; /* a rank's fair share */
  for (int i = 0; i < ntables && st == GS_OK; i++) {
    const gs_embed_spec *t = &tables[i];
    double tw = whole_cost(cfg, t, GS_SHARD_TW), mem = shard_mem(t->rows, t->dim, cfg->row_sums);
    int kind = cfg->force, k = 0;
    int too_big = cfg->mem_cap > 0 && mem > cfg->mem_cap;
    if (kind < 0) {
      /* Replicas cost every rank; splits keep or raise the total work. */
      double dp_total = P * whole_cost(cfg, t, GS_SHARD_DP);
      double rw_total = P * whole_cost(cfg, t, GS_SHARD_RW);
      double twrw_total = nodes > 1 && L > 1 ? L * whole_cost_group(cfg, t) : INFINITY;
      if (P > 1 && !too_big && dp_total < tw) {
        kind = GS_SHARD_DP;
        snprintf(p->why[i], sizeof p->why[i], "dp: its replicas' lookups and gradient "
                 "all-reduce (%.3g ms over all ranks) cost less than exchanging its pooled "
                 "vectors (%.3g ms)", dp_total * 1e3, tw * 1e3);
      } else if (P > 1 && (too_big || tw > target) && !cfg->whole_rows &&
                 (k = cw_blocks(cfg, t, tw, target)) > 0) {
        kind = GS_SHARD_CW;
        snprintf(p->why[i], sizeof p->why[i], "cw x%d: whole it would be %.2fx a rank's "
                 "fair share%s; column blocks keep the work the same", k,
                 target > 0 ? tw / target : 0.0, too_big ? " and exceed the memory cap" : "");
      } else if (P > 1 && (too_big || tw > target) && (too_big || fmin(rw_total, twrw_total) < 1.5 * tw)) {
        kind = twrw_total < rw_total && !(cfg->mem_cap > 0 && mem / L > cfg->mem_cap)
                   ? GS_SHARD_TWRW : GS_SHARD_RW;
        snprintf(p->why[i], sizeof p->why[i], "%s: whole it would be %.2fx a rank's fair "
                 "share%s, and its %zu columns do not split into blocks of 8 that fit",
                 kind_names[kind], target > 0 ? tw / target : 0.0,
                 too_big ? " and exceed the memory cap" : "", t->dim);
      } else {
        kind = GS_SHARD_TW;
        snprintf(p->why[i], sizeof p->why[i], "tw: %.2fx a rank's fair share; whole is "
                 "cheapest", target > 0 ? tw / target : 0.0);
      }
    } else {
      snprintf(p->why[i], sizeof p->why[i], "%s: forced", kind_names[kind]);
      if (kind == GS_SHARD_CW) {
        k = 1;
        for (size_t c = 2; c <= t->dim / 8 && c <= (size_t)P; c++)
          if (t->dim % c == 0) k = (int)c;
      }
    }
    p->kind[i] = (gs_shard_kind)kind;
    size_t first = p->nshards;
    /* The table's shards; rank -1: to be placed. */
    if (kind == GS_SHARD_TW) {
      gs_shard s = {i, -1, GS_SHARD_TW, 0, t->rows, 0, t->dim, 0, 0, 0};
      price(cfg, t, &s);
      st = add_shard(p, cap, s);
    } else if (kind == GS_SHARD_CW) {
      size_t w = t->dim / (size_t)k;
      for (int b = 0; b < k && st == GS_OK; b++) {
        gs_shard s = {i, -1, GS_SHARD_CW, 0, t->rows, (size_t)b * w, (size_t)(b + 1) * w, 0, 0, 0};
        price(cfg, t, &s);
        st = add_shard(p, cap, s);
      }
    } else if (kind == GS_SHARD_RW) {
      for (int r = 0; r < P && st == GS_OK; r++) {
        gs_shard s = row_block(i, r, GS_SHARD_RW, t, r, P);
        price(cfg, t, &s);
        st = add_shard(p, cap, s);
      }
    } else if (kind == GS_SHARD_TWRW) {
      /* The node with the least time so far that has room takes the table
       * (its blocks are never moved after). */
      int best = least_busy_node(p->rank_s, p->rank_mem,
                                 largest_row_block(t, L, cfg->row_sums), cfg->mem_cap, nodes, L);
      for (int j = 0; j < L && st == GS_OK; j++) {
        gs_shard s = row_block(i, best * L + j, GS_SHARD_TWRW, t, j, L);
        price(cfg, t, &s);
        st = add_shard(p, cap, s);
      }
    } else { /* dp */
      for (int r = 0; r < P && st == GS_OK; r++) {
        gs_shard s = {i, r, GS_SHARD_DP, 0, t->rows, 0, t->dim, 0, 0, 0};
        price(cfg, t, &s);
        st = add_shard(p, cap, s);
      }
    }
    /* Fixed shards count at once, so that twrw's choice of node and the
     * placement below see them. */
    for (size_t j = first; st == GS_OK && j < p->nshards; j++)
      if (p->shards[j].rank >= 0) rank_account(p, &p->shards[j], 1);
  }
  /* 2-3. Placement; then, while the busiest rank is over 1.10x the mean,
   * its largest whole table is split in two column blocks and everything
   * movable placed again. With the cache model, a second pass does the
   * same on each rank's own prices (a shard's hits depend on what shares
   * its rank), after one more placement on them where that helps. */
  int passes = cfg->lookup.cache_bytes > 0 ? 2 : 1;
  for (int pass = 0; pass < passes && st == GS_OK; pass++) {
    if (pass == 1) reprice_and_replace(p, tables, cfg);
    for (int round = 0; st == GS_OK; round++) {
      if (pass == 0 || round > 0) st = place_fitting(p, tables, cfg, cap);
      if (st == GS_OK && pass == 1 && round > 0) rank_price(p, tables, cfg);
      if (st != GS_OK || round >= 4 * P + ntables) break;
      double mx, avg;
      gs_shard_plan_balance(p, &mx, &avg);
      /* A forced sharding is every table's: only forced cw may cut its
       * blocks finer. */
      if (mx <= 1.10 * avg || cfg->whole_rows || (cfg->force >= 0 && cfg->force != GS_SHARD_CW))
        break;
      if (!split_busiest(p, tables, cfg, cap, mx / avg, &st)) break;
    }
  }
  /* 4. TorchRec's greedy rules on the same cost (tr_plan below): when
   * their best proposal has a less busy worst rank, it is the plan, so that
   * this planner is never worse than what TorchRec's users get. */
  if (st == GS_OK && cfg->force < 0 && ntables > 0) {
    gs_shard_plan *q = NULL;
    double mx, avg;
    gs_shard_plan_balance(p, &mx, &avg);
    if (plan_alloc(ntables, P, cap, &q) == GS_OK) {
      q->row_state = cfg->row_sums;
      double tmx = tr_plan(tables, ntables, cfg, q, cap);
      if (isfinite(tmx)) tmx = rank_price(q, tables, cfg);
      if (tmx < mx * (1 - 1e-9)) {
        for (int i = 0; i < ntables; i++)
          snprintf(q->why[i], sizeof q->why[i], "%s: TorchRec's greedy proposal (its rules on "
                   "this cost) left the busiest rank %.1f%% below this planner's own plan",
                   kind_names[q->kind[i]], 100 * (1 - tmx / mx));
        q->torchrec = 1;
        gs_shard_plan_free(p);
        p = q;
      } else {
        gs_shard_plan_free(q);
      }
    }
  }
  /* 5. The DLRM reference's contiguous slicing, the same way: its whole
   * tables dealt out in blocks of index, when that leaves the busiest rank
   * less busy (and fits the memory cap). */
  if (st == GS_OK && cfg->force < 0 && ntables > 0) {
    double mx, cmx;
    gs_shard_plan_balance(p, &mx, NULL);
    gs_shard_plan *q = NULL;
    if (plan_alloc(ntables, P, cap, &q) == GS_OK) {
      q->row_state = cfg->row_sums;
      int fits = contiguous_plan(tables, ntables, cfg, q, cap);
      cmx = rank_price(q, tables, cfg);
      if (fits && cmx < mx * (1 - 1e-9)) {
        for (int i = 0; i < ntables; i++)
          snprintf(q->why[i], sizeof q->why[i], "tw: the DLRM reference's contiguous slicing "
                   "left the busiest rank %.1f%% below this planner's own plan",
                   100 * (1 - cmx / mx));
        gs_shard_plan_free(p);
        p = q;
      } else {
        gs_shard_plan_free(q);
      }
    }
  }
  if (st != GS_OK) {
    gs_shard_plan_free(p);
    return st;
  }
  *out = p;
  return GS_OK;
}

double gs_shard_contiguous_max(const gs_embed_spec *tables, int ntables,
                               const gs_shard_config *cfg) {
  if (tables == NULL || cfg == NULL || ntables < 1 || cfg->ranks < 1) return INFINITY;
  gs_shard_config c = with_cache(cfg, tables, ntables);
  gs_shard_plan *q = NULL;
  if (plan_alloc(ntables, c.ranks, (size_t)ntables, &q) != GS_OK) return INFINITY;
  /* A slicing that misses the memory cap is no plan to compare with (it
   * was priced all the same, a rank holding a table above the cap). */
  int fits = contiguous_plan(tables, ntables, &c, q, (size_t)ntables);
  double mx = fits ? rank_price(q, tables, &c) : INFINITY;
  gs_shard_plan_free(q);
  return mx;
}

/* ---- TorchRec's greedy rules, a planner baseline --------------------------------
 *
 * TorchRec's default planner (torchrec/distributed/planner: the greedy
 * proposer and GreedyPerfPartitioner), re-implemented on gradsync's cost:
 * each table's options are tw, rw, cw (column blocks, the largest count <= P
 * of at least 8 columns that divides the width), twrw (several nodes) and
 * dp, each rated by its costliest shard, as TorchRec's perf estimate rates
 * a sharding option. The first proposal gives every table its best-rated
 * option; each next one moves the table whose option rates worst to its
 * next option (the greedy proposer's search), at most 4 x tables
 * proposals and 64. Each proposal is partitioned the greedy way: rw, twrw and dp
 * shards where their sharding puts them (twrw on the node least loaded so
 * far), then tw and cw shards largest storage first (TorchRec's default
 * sort), each on the rank with the least estimated time that has memory
 * for it; no moves afterwards. The proposal whose busiest rank is least is
 * the plan, as TorchRec's planner keeps the best-rated one. */

typedef struct {
  int kind, k;   /* sharding, and column blocks for cw */
  double rate;   /* its costliest shard's estimated time */
} tr_option;

static int cmp_option_rate(const void *a, const void *b) {
  const tr_option *x = a, *y = b;
  return x->rate < y->rate ? -1 : x->rate > y->rate;
}

typedef struct {
  double mem, est;
  int table;
  size_t col_lo, col_hi;
} tr_piece;

static int cmp_piece_mem_desc(const void *a, const void *b) {
  const tr_piece *x = a, *y = b;
  if (x->mem != y->mem) return x->mem < y->mem ? 1 : -1;
  return x->table != y->table ? x->table - y->table : (int)x->col_lo - (int)y->col_lo;
}

/* The options of table t, best-rated first, into o (at most 5). */
static int tr_options(const gs_shard_config *cfg, const gs_embed_spec *t, tr_option *o) {
  int P = cfg->ranks, L = cfg->ranks_per_node > 0 ? cfg->ranks_per_node : 1, n = 0;
  double mem = shard_mem(t->rows, t->dim, cfg->row_sums);
  int fits = !(cfg->mem_cap > 0 && mem > cfg->mem_cap);
  if (fits) o[n++] = (tr_option){GS_SHARD_TW, 1, whole_cost(cfg, t, GS_SHARD_TW)};
  if (P > 1) {
    o[n++] = (tr_option){GS_SHARD_RW, 1, whole_cost(cfg, t, GS_SHARD_RW)};
    int k = 0;
    for (size_t c = 2; c <= t->dim / 8 && c <= (size_t)P; c++)
      if (t->dim % c == 0) k = (int)c;
    if (k > 0 && !cfg->whole_rows &&
        !(cfg->mem_cap > 0 && shard_mem(t->rows, t->dim / (size_t)k, cfg->row_sums) > cfg->mem_cap)) {
      gs_shard s = {0, 0, GS_SHARD_CW, 0, t->rows, 0, t->dim / (size_t)k, 0, 0, 0};
      price(cfg, t, &s);
      o[n++] = (tr_option){GS_SHARD_CW, k, s.est_s};
    }
    if (P / L > 1 && L > 1 && !(cfg->mem_cap > 0 && mem / L > cfg->mem_cap))
      o[n++] = (tr_option){GS_SHARD_TWRW, 1, whole_cost_group(cfg, t)};
    if (fits) o[n++] = (tr_option){GS_SHARD_DP, 1, whole_cost(cfg, t, GS_SHARD_DP)};
  }
  qsort(o, (size_t)n, sizeof *o, cmp_option_rate);
  return n;
}

/* One proposal partitioned: the busiest rank's estimated time, or INFINITY
 * when a shard fits nowhere under the memory cap. Every shard of an option
 * counts its option's rate (its costliest shard; rows differ by one at
 * most between rw's shards), so that a proposal costs no pricing; with
 * out, the proposal's shards are priced exactly and added to it. */
static double tr_partition(const gs_embed_spec *tables, int ntables, const gs_shard_config *cfg,
                           const tr_option *const *choice, double *rank_s, double *rank_mem,
                           tr_piece *pieces, gs_shard_plan *out, size_t out_cap) {
  int P = cfg->ranks, L = cfg->ranks_per_node > 0 ? cfg->ranks_per_node : 1, nodes = P / L;
  for (int r = 0; r < P; r++) rank_s[r] = rank_mem[r] = 0;
  size_t np = 0;
  for (int i = 0; i < ntables; i++) {
    const gs_embed_spec *t = &tables[i];
    const tr_option *o = choice[i];
    if (o->kind == GS_SHARD_RW || o->kind == GS_SHARD_DP) {
      for (int r = 0; r < P; r++) {
        /* dp: every rank the whole table (block 0 of 1) */
        gs_shard s = o->kind == GS_SHARD_RW ? row_block(i, r, GS_SHARD_RW, t, r, P)
                                            : row_block(i, r, GS_SHARD_DP, t, 0, 1);
        s.est_s = o->rate;
        s.mem_bytes = shard_mem(s.row_hi - s.row_lo, t->dim, cfg->row_sums);
        if (out) {
          price(cfg, t, &s);
          if (add_shard(out, out_cap, s) != GS_OK) return INFINITY;
        }
        rank_s[r] += s.est_s;
        rank_mem[r] += s.mem_bytes;
      }
    } else if (o->kind == GS_SHARD_TWRW) {
      int best = least_busy_node(rank_s, rank_mem, largest_row_block(t, L, cfg->row_sums),
                                 cfg->mem_cap, nodes, L);
      for (int j = 0; j < L; j++) {
        gs_shard s = row_block(i, best * L + j, GS_SHARD_TWRW, t, j, L);
        s.est_s = o->rate;
        s.mem_bytes = shard_mem(s.row_hi - s.row_lo, t->dim, cfg->row_sums);
        if (out) {
          price(cfg, t, &s);
          if (add_shard(out, out_cap, s) != GS_OK) return INFINITY;
        }
        rank_s[s.rank] += s.est_s;
        rank_mem[s.rank] += s.mem_bytes;
      }
    } else {
      size_t w = t->dim / (size_t)o->k;
      for (int b = 0; b < o->k; b++)
        pieces[np++] = (tr_piece){shard_mem(t->rows, w, cfg->row_sums), o->rate, i, (size_t)b * w,
                                  (size_t)(b + 1) * w};
    }
  }
  /* The replicas and row blocks alone may exceed a rank's cap. */
  for (int r = 0; cfg->mem_cap > 0 && r < P; r++)
    if (rank_mem[r] > cfg->mem_cap) return INFINITY;
  qsort(pieces, np, sizeof *pieces, cmp_piece_mem_desc);
  for (size_t j = 0; j < np; j++) {
    int best = -1;
    for (int r = 0; r < P; r++) {
      if (cfg->mem_cap > 0 && rank_mem[r] + pieces[j].mem > cfg->mem_cap) continue;
      if (best < 0 || rank_s[r] < rank_s[best]) best = r;
    }
    if (best < 0) return INFINITY;
    double est = pieces[j].est;
    if (out) {
      const tr_piece *q = &pieces[j];
      const gs_embed_spec *t = &tables[q->table];
      gs_shard sh = {q->table, best, (gs_shard_kind)choice[q->table]->kind, 0, t->rows,
                     q->col_lo, q->col_hi, 0, 0, 0};
      price(cfg, t, &sh);
      est = sh.est_s;
      if (add_shard(out, out_cap, sh) != GS_OK) return INFINITY;
    }
    rank_s[best] += est;
    rank_mem[best] += pieces[j].mem;
  }
  double mx = 0;
  for (int r = 0; r < P; r++) mx = fmax(mx, rank_s[r]);
  return mx;
}

/* TorchRec's rules: the best proposal's busiest rank, and with out, that
 * proposal as a plan (its shards; kinds and reasons per table). */
static double tr_plan(const gs_embed_spec *tables, int ntables, const gs_shard_config *cfg,
                      gs_shard_plan *out, size_t out_cap) {
  int P = cfg->ranks;
  tr_option *opts = gs_malloc((size_t)ntables * 5 * sizeof *opts);
  int *nopt = gs_malloc((size_t)ntables * sizeof *nopt), *at = gs_calloc((size_t)ntables, sizeof *at);
  int *best_at = gs_calloc((size_t)ntables, sizeof *best_at);
  const tr_option **choice = gs_malloc((size_t)ntables * sizeof *choice);
  double *rank_s = gs_malloc((size_t)P * sizeof *rank_s), *rank_mem = gs_malloc((size_t)P * sizeof *rank_mem);
  size_t cap = 0;
  for (int i = 0; i < ntables; i++) cap += tables[i].dim / 8 + 1;
  tr_piece *pieces = gs_malloc((cap + 1) * sizeof *pieces);
  double best = INFINITY;
  if (!opts || !nopt || !at || !best_at || !choice || !rank_s || !rank_mem || !pieces) goto out;
  for (int i = 0; i < ntables; i++) {
    nopt[i] = tr_options(cfg, &tables[i], &opts[(size_t)i * 5]);
    if (nopt[i] == 0) goto out; /* fits nowhere at all */
    choice[i] = &opts[(size_t)i * 5];
  }
  /* TorchRec's planner bounds its search too; 64 proposals here. */
  for (int proposal = 0; proposal < 4 * ntables + 1 && proposal < 64; proposal++) {
    double mx = tr_partition(tables, ntables, cfg, choice, rank_s, rank_mem, pieces, NULL, 0);
    if (mx < best) {
      best = mx;
      memcpy(best_at, at, (size_t)ntables * sizeof *at);
    }
    /* the greedy proposer's next step: the worst-rated table's next option */
    int worst = -1;
    for (int i = 0; i < ntables; i++)
      if (at[i] + 1 < nopt[i] && (worst < 0 || choice[i]->rate > choice[worst]->rate)) worst = i;
    if (worst < 0) break;
    choice[worst] = &opts[(size_t)worst * 5 + ++at[worst]];
  }
  if (out && isfinite(best)) {
    for (int i = 0; i < ntables; i++) {
      choice[i] = &opts[(size_t)i * 5 + best_at[i]];
      out->kind[i] = (gs_shard_kind)choice[i]->kind;
    }
    out->nshards = 0;
    /* priced exactly now */
    best = tr_partition(tables, ntables, cfg, choice, rank_s, rank_mem, pieces, out, out_cap);
  }
out:
  gs_free(opts);
  gs_free(nopt);
  gs_free(at);
  gs_free(best_at);
  gs_free(choice);
  gs_free(rank_s);
  gs_free(rank_mem);
  gs_free(pieces);
  return best;
}

double gs_shard_torchrec_max(const gs_embed_spec *tables, int ntables,
                             const gs_shard_config *cfg) {
  if (tables == NULL || cfg == NULL || ntables < 1 || cfg->ranks < 1) return INFINITY;
  size_t cap = 0;
  for (int i = 0; i < ntables; i++) cap += (size_t)cfg->ranks + tables[i].dim / 8 + 1;
  gs_shard_plan *q = NULL;
  if (plan_alloc(ntables, cfg->ranks, cap, &q) != GS_OK) return INFINITY;
  gs_shard_config c = with_cache(cfg, tables, ntables);
  double mx = tr_plan(tables, ntables, &c, q, cap);
  if (isfinite(mx)) mx = rank_price(q, tables, &c);
  gs_shard_plan_free(q);
  return mx;
}

void gs_shard_plan_balance(const gs_shard_plan *p, double *max_s, double *mean_s) {
  double mx = 0, sum = 0;
  for (int r = 0; r < p->ranks; r++) {
    mx = fmax(mx, p->rank_s[r]);
    sum += p->rank_s[r];
  }
  if (max_s) *max_s = mx;
  if (mean_s) *mean_s = p->ranks ? sum / p->ranks : 0;
}

/* ---- This machine's lookup cost ---------------------------------------------- */

/* The first line of cpu0's cache index `i` file `leaf` into buf; 0 when
 * it cannot be read. */
static int cache_file(int i, const char *leaf, char *buf, size_t n) {
  char path[96];
  snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", i, leaf);
  FILE *fp = fopen(path, "r");
  if (fp == NULL) return 0;
  int ok = fgets(buf, (int)n, fp) != NULL;
  fclose(fp);
  return ok;
}

/* The caches of cpu0 from level 2 up (data or unified), from Linux's sysfs
 * (sysconf's L2 and L3 where that is missing): *own the bytes a core has to
 * itself, each cache divided among the CPUs that share it; *all their
 * whole sizes; *own_l2 the core's own of level 2. */
static void core_caches(double *own, double *all, double *own_l2) {
  *own = *all = *own_l2 = 0;
  char buf[256];
  for (int i = 0; i < 16 && cache_file(i, "level", buf, sizeof buf); i++) {
    double level = strtod(buf, NULL), bytes = 0;
    if (cache_file(i, "size", buf, sizeof buf)) {
      char *end;
      bytes = strtod(buf, &end);
      if (*end == 'K') bytes *= 1024;
      else if (*end == 'M') bytes *= 1024 * 1024;
    }
    int instr = cache_file(i, "type", buf, sizeof buf) && strncmp(buf, "Instruction", 11) == 0;
    if (level < 2 || instr || bytes <= 0) continue;
    /* shared_cpu_list: "0-1", "0,2,4-7" */
    int cpus = 0;
    if (cache_file(i, "shared_cpu_list", buf, sizeof buf))
      for (char *q = buf; *q && *q != '\n';) {
        char *end;
        long lo = strtol(q, &end, 10), hi = lo;
        if (end == q) break;
        if (*end == '-') hi = strtol(end + 1, &end, 10);
        cpus += (int)(hi - lo + 1);
        q = *end == ',' ? end + 1 : end;
      }
    *own += bytes / (cpus > 0 ? cpus : 1);
    *all += bytes;
    if (level == 2) *own_l2 += bytes / (cpus > 0 ? cpus : 1);
  }
#if defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
  if (*own <= 0) {
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE), l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    *own = (l2 > 0 ? (double)l2 : 0) + (l3 > 0 ? (double)l3 / (ncpu > 0 ? ncpu : 1) : 0);
    *all = (l2 > 0 ? (double)l2 : 0) + (l3 > 0 ? (double)l3 : 0);
    *own_l2 = l2 > 0 ? (double)l2 : 0;
  }
#endif
}

/* Seconds a load of a line of the first `bytes` of buf (zeroed) takes when
 * its address is drawn at random, the next waiting for it (each address
 * adds the value loaded, always 0): the latency of independent draws, as a
 * table's lookups make them, whose lines stay cached with probability
 * C / bytes (Che's LRU cache of C bytes under uniform draws). Writing the
 * lines first leaves the last of them cached, so no warm-up is needed:
 * any C bytes of the buffer are as likely to be asked for. */
static double random_load_s(uint64_t *buf, size_t bytes, uint64_t *seed) {
  const size_t lines = bytes / 64, steps = (size_t)1 << 16;
  memset(buf, 0, lines * 64);
  __asm__ volatile("" : : "r"(buf) : "memory"); /* the loads below are not known 0 */
  uint64_t x = *seed, v = 0;
  double t0 = gs_now();
  for (size_t i = 0; i < steps; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v = buf[((x + v) & (lines - 1)) * 8];
  }
  __asm__ volatile("" : : "r"(v) : "memory"); /* the loads done before the clock is read */
  double t = (gs_now() - t0) / (double)steps;
  *seed = x + v; /* v, always 0, kept alive */
  return t;
}

/* Whether the latency of random loads has settled on the memory's at size
 * k of the probe: a doubling adds under 20%, and it is 60 ns or more, 3x
 * the first size's or more (a level 3's is under 50). */
static int latency_settled(const double *lat, int k) {
  return k >= 2 && lat[k] >= 3 * lat[0] && lat[k] >= 60e-9 && lat[k] < 1.2 * lat[k - 1];
}

/* The cache bytes one core gets, measured, or 0 where that fails: random
 * loads (random_load_s) over 512 KB, 1 MB, ... until the latency settles
 * on the memory's (a doubling adds under 20%, and it is 60 ns or more, 3x
 * the first size's or more: a level 3's is under 50), 256 MB at most.
 * With L_c the first two sizes' latency and L_m the last's, a size S of
 * latency L holds S f bytes in the cache, f = (L_m - L) / (L_m - L_c); the
 * largest such (of the sizes whose f is 3/4 or more) is the cache. The
 * caches the machine reports can be far from what a core gets: a VM's
 * sysconf gives the whole socket's level 3 (508 MB on the 2-core hosts,
 * where a core gets 2 to 20 MB), and other tenants share it. The ranks
 * of a job measure at once, so each sees its share. It takes 0.1 to 0.6
 * s. The memory's latency still grows past the caches (page walks: 150 ns
 * at 16 MB to 450 at 256 on the 2-core hosts), so L_m comes out high;
 * embed_cache_estimate says what that costs. */
static double measured_cache(void) {
  enum { NSIZE = 10 }; /* 512 KB to 256 MB */
  const size_t first = (size_t)512 << 10;
  uint64_t *buf = gs__malloc_table(first << (NSIZE - 1), 0);
  if (buf == NULL) {
    gs_clear_error();
    return 0;
  }
  double lat[NSIZE];
  uint64_t seed = 88172645463325252ull;
  int n = 0;
  for (; n < NSIZE; n++) {
    lat[n] = INFINITY; /* the fastest of 3: other processes' loads add noise */
    for (int rep = 0; rep < 3; rep++) lat[n] = fmin(lat[n], random_load_s(buf, first << n, &seed));
    if (latency_settled(lat, n)) {
      n++;
      break;
    }
  }
  gs_free(buf);
  return embed_cache_estimate(lat, n, (double)first);
}

double embed_cache_estimate(const double *lat, int n, double first) {
  for (int k = 0; k < n; k++)
    if (latency_settled(lat, k)) { /* the sizes the probe stops at */
      n = k + 1;
      break;
    }
  if (n < 2) return 0;
  double lc = fmin(lat[0], lat[1]), lm = lat[n - 1], cache = 0;
  if (!(lm > 2 * lc)) return ldexp(first, n - 1); /* no miss seen: all of it */
  for (int k = 0; k < n; k++) {
    /* Only the sizes up to 4/3 the cache: L_m, read where the latency
     * settles, is too high where memory's latency still grows with the
     * size, and S f grows with S; with sizes to 4x the cache (f >= 1/4)
     * a 15% growth a doubling made it 1.5-3.4x too large, with 4/3 0.7-1.2x
     * (test_shard's model LRU). */
    double f = fmin(1.0, fmax(0.0, (lm - lat[k]) / (lm - lc)));
    if (f >= 0.75 || k == 0) cache = fmax(cache, ldexp(first, k) * f);
  }
  return cache;
}

/* Evicts the caches: a sweep writing a line of every 64 bytes of flush. */
static void sweep(float *flush, size_t n) {
  for (size_t i = 0; i < n; i += 16) flush[i] += 1.0f;
}

typedef struct calib {
  float *w, *acc, *buf, *flush;
  size_t nflush;
  int64_t *off;
  int32_t *ids;
  gs_embed_work *work;
} calib;

/* One pass of the forward plus the fused backward (row-wise Adagrad) over
 * b's bags of a table of rows x dim, pooled into rows of `stride` floats,
 * in seconds; with `swept` floats written before each half (not timed):
 * all of c->flush, the caches emptied as a training step's other work
 * leaves a table beyond them; twice a core's own level 2, the rows pushed
 * out to the shared cache as the step's MLPs leave those that stay in
 * it; 0, warm. */
static gs_status one_pass(calib *c, size_t rows, size_t dim, const gs_embed_bags *b,
                          size_t stride, size_t swept, double *secs) {
  gs_embed_optim opt = {GS_EMBED_ROWWISE_ADAGRAD, 0.0f, 1e-10f};
  gs_embed_table t = {"calibration", c->w, c->acc, rows, dim};
  if (swept) sweep(c->flush, swept);
  double t0 = gs_now();
  GS_CHECK(gs_embed_forward(&t, b, GS_EMBED_SUM, c->buf, stride, 0));
  double t1 = gs_now();
  if (swept) sweep(c->flush, swept);
  double t2 = gs_now();
  GS_CHECK(gs_embed_backward_update(&t, b, GS_EMBED_SUM, c->buf, stride, 0, &opt, &c->work));
  *secs = (t1 - t0) + (gs_now() - t2);
  return GS_OK;
}

/* The fastest of `reps` passes (one_pass) at width dim, after one (not
 * timed) that brings the rows in. That one sweeps nothing: the first timed
 * pass sweeps before each half anyway, and the sweeps are most of the
 * calibration's time where the caches are large (a quarter of them went
 * to the untimed passes). */
static gs_status time_pass(calib *c, size_t rows, size_t dim, const gs_embed_bags *b, int reps,
                           size_t swept, double *secs) {
  double best = INFINITY, t;
  for (int rep = 0; rep <= reps; rep++) {
    GS_CHECK(one_pass(c, rows, dim, b, dim, rep > 0 ? swept : 0, &t));
    if (rep > 0) best = fmin(best, t);
  }
  *secs = best;
  return GS_OK;
}

/* secs[k] = a + b * dims[k] * 4 by least squares. */
static void fit_lookups(const size_t *dims, const double *secs, int ndim, double *a, double *b) {
  double mx = 0, my = 0, sxx = 0, sxy = 0;
  for (int k = 0; k < ndim; k++) mx += (double)dims[k] * 4 / ndim, my += secs[k] / ndim;
  for (int k = 0; k < ndim; k++) {
    double dx = (double)dims[k] * 4 - mx;
    sxx += dx * dx;
    sxy += dx * (secs[k] - my);
  }
  *b = fmax(0.0, sxy / sxx);
  *a = my - *b * mx;
}

/* Measures, at 16, 32, 64 and 128 columns, the forward and the fused
 * backward (row-wise Adagrad), fitted alpha + beta * row bytes by least
 * squares (from two widths alone the per-lookup term was a small
 * difference of two noisy times, 0.9 to 60 ns between runs), each lookup in
 * a bag of its own, the cost of as many empty bags laid out and swept
 * alike taken out. Three tables, three states of the caches, as a
 * training step finds them after its MLPs:
 *   - few rows: 8192 ids over 16 rows, warm (the fastest of 5): the price
 *     of a lookup whose row is at hand (alpha_hit, beta_hit), the rows'
 *     updates shared by 512 lookups each;
 *   - in the cache: 4096 uniform ids over a table of about 8 MB (a quarter
 *     of the core's own cache at most), twice the core's level 2 written
 *     before each half (the fastest of 5): the rows come from the shared
 *     cache, 4096 (1 - e^-(4096/R)) distinct rows of R each fetched and
 *     updated once. Against the former, the price of a distinct row
 *     (alpha_row, beta_row): its fetch from the cache and its update;
 *   - a miss: 8192 uniform ids over 2^17 rows (8 to 64 MB), the caches
 *     swept (twice their size written) before the forward and again
 *     before the backward (the fastest of 3): what is left a lookup after
 *     the distinct rows' price (alpha, beta), the memory's;
 *   - gamma, a bag's own cost: `bags` empty bags pooled into rows of
 *     `width` floats (the rank's pooled matrix, a line of which a bag
 *     writes forward and reads backward), offsets read, every cache swept
 *     before each half (the fastest of 3); gamma_hit, the same with the
 *     level 2 alone swept (the fastest of 5): the matrix's line kept in
 *     the shared cache from the step before, or not;
 *   - gamma_mixed: as many bags, empty or not at random, half each (a row
 *     block's), at 16 columns, over the cache's table, level 2 swept:
 *     what is left of the pass after its lookups' price, a bag, less
 *     gamma_hit, is the branches' misses, on top of gamma.
 * And the cache a core gets: the caches' sizes (core_caches), or what
 * random loads find (measured_cache) where that is less. */
gs_status gs_embed_calibrate_shape(size_t bags, size_t width, gs_cost_lookup *out) {
  enum { NDIM = 4 };
  /* 2^17 rows (8 to 64 MB): the caches are swept before each phase, so
   * the lookups' rows are cold whatever the size; a larger table only
   * costs the zeroing of its pages, which rank 0 pays at every start. */
  const size_t rows = (size_t)1 << 17, n = 8192, dims[NDIM] = {16, 32, 64, 128};
  const size_t hot_n = 4096, few_rows = 16, nb = 8192;
  if (bags < 1 || width < 1 || bags > ((size_t)1 << 22) || width > ((size_t)1 << 20) ||
      bags * width > ((size_t)1 << 28))
    return gs_error(GS_ERR_INVALID_ARG, "embedding calibration: %zu bags of %zu floats "
                    "(1 to 2^22 bags, 1 to 2^20 floats, at most 2^28 in all)", bags, width);
  if (width < dims[0]) width = dims[0]; /* the bags' passes pool 16 columns */
  double own = 0, all = 0, l2 = 0;
  core_caches(&own, &all, &l2);
  /* What a core gets, where it is less than the machine says: the model's
   * cache, and a sweep of 4x it evicts the rows (256 MB at least). The
   * least of three: what other tenants leave a core moves within seconds
   * (2-3 MB, then 16-20 MB, on the 2-core hosts), and a training's steps
   * meet the mix; the mean of three priced a little lower still (the
   * lookup prediction benchmark, run5 against run6). */
  double got = INFINITY;
  for (int rep = 0; rep < 3 && got > 0; rep++) got = fmin(got, measured_cache());
  if (!isfinite(got)) got = 0;
  if (got > 0) {
    own = own > 0 ? fmin(own, got) : got;
    all = all > 0 ? fmin(all, 2 * got) : 2 * got; /* swept twice over, below */
  }
  calib c = {0};
  /* At least 256 MB: a level 3 that is a victim cache (AMD's) is not LRU,
   * and a sweep of twice its size left some of an 8 MB table in it (on a
   * 2-core host with 32 MB of level 3, ten calibrations in a row priced a
   * cold lookup of 16 columns 28-47 ns after 64 MB swept, 52-58 ns after
   * 256 MB; a sweep of 256 MB takes 20-30 ms). */
  c.nflush = (size_t)(fmin(fmax(2.0 * all, 256e6), 1e9) / sizeof(float));
  /* out of level 2: twice it written (1 MB where it is not known) */
  size_t l2_sweep =
      (size_t)fmin(2.0 * (l2 > 0 ? l2 : 512e3), 4.0 * (double)c.nflush) / sizeof(float);
  double hot_bytes = fmin(8e6, own > 0 ? own / 4 : 8e6);
  double secs[NDIM] = {0}, hot_secs[NDIM] = {0}, few_secs[NDIM] = {0}, d_hot[NDIM] = {0};
  double bag_warm[NDIM] = {0}, bag_l2[NDIM] = {0}, bag_cold[NDIM] = {0}; /* empty bags */
  size_t hot_rows[NDIM];
  for (int k = 0; k < NDIM; k++) {
    double r = floor(hot_bytes / (double)(dims[k] * sizeof(float) + sizeof(float)));
    hot_rows[k] = (size_t)fmax(1024.0, fmin((double)rows, r));
    d_hot[k] = (double)hot_rows[k] * -expm1(-(double)hot_n / (double)hot_rows[k]) / (double)hot_n;
  }
  size_t nbuf = bags * width > nb * dims[NDIM - 1] ? bags * width : nb * dims[NDIM - 1];
  size_t noff = (bags > nb ? bags : nb) + 1;
  c.w = gs__malloc_table(rows * dims[NDIM - 1] * sizeof(float), 1);
  c.acc = gs__malloc_table(rows * sizeof(float), 1);
  c.buf = gs_calloc(nbuf, sizeof(float));
  c.flush = gs__malloc_table(c.nflush * sizeof(float), 1);
  c.off = gs_malloc(2 * noff * sizeof(int64_t));
  c.ids = gs_malloc(3 * nb * sizeof(int32_t));
  gs_status st = c.w && c.acc && c.buf && c.flush && c.off && c.ids
                     ? GS_OK : gs_error(GS_ERR_NOMEM, "embedding calibration: out of memory");
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; st == GS_OK && i < nb; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c.ids[i] = (int32_t)(x % rows);
    c.ids[nb + i] = (int32_t)(x >> 32); /* taken modulo the cache's table below */
    c.ids[2 * nb + i] = (int32_t)(x % few_rows);
  }
  int64_t *one = c.off, *none = c.off ? c.off + noff : NULL; /* a lookup a bag; empty bags */
  for (size_t i = 0; st == GS_OK && i < noff; i++) {
    one[i] = (int64_t)(i < nb ? i : nb);
    none[i] = 0;
  }
  for (int k = 0; st == GS_OK && k < NDIM; k++) {
    int32_t *hot_ids = c.ids + nb;
    for (size_t i = 0; i < hot_n; i++) hot_ids[i] = (int32_t)((uint32_t)hot_ids[i] % hot_rows[k]);
    gs_embed_bags cold = {n, one, c.ids, 0, 0}, hot = {hot_n, one, hot_ids, 0, 0},
                  few = {n, one, c.ids + 2 * nb, 0, 0}, empty = {n, none, c.ids, 0, 0},
                  empty_hot = {hot_n, none, c.ids, 0, 0};
    st = time_pass(&c, rows, dims[k], &cold, 3, c.nflush, &secs[k]);
    if (st == GS_OK) st = time_pass(&c, hot_rows[k], dims[k], &hot, 5, l2_sweep, &hot_secs[k]);
    if (st == GS_OK) st = time_pass(&c, few_rows, dims[k], &few, 5, 0, &few_secs[k]);
    if (st == GS_OK) st = time_pass(&c, few_rows, dims[k], &empty, 5, 0, &bag_warm[k]);
    if (st == GS_OK) st = time_pass(&c, few_rows, dims[k], &empty_hot, 5, l2_sweep, &bag_l2[k]);
    if (st == GS_OK) st = time_pass(&c, few_rows, dims[k], &empty, 3, c.nflush, &bag_cold[k]);
    secs[k] /= (double)n;
    few_secs[k] /= (double)n;
    bag_warm[k] /= (double)n;
    bag_cold[k] /= (double)n;
    hot_secs[k] /= (double)hot_n;
    bag_l2[k] /= (double)hot_n;
  }
  /* Per lookup, its bag out: few = L + d_few U, hot = L + d_hot U (d:
   * distinct rows per lookup of uniform draws), cold = M + d_cold U. */
  double d_few = few_rows * -expm1(-(double)n / few_rows) / n,
         d_cold = rows * -expm1(-(double)n / rows) / n;
  double hit[NDIM], miss[NDIM], upd[NDIM];
  for (int k = 0; k < NDIM; k++) {
    double L = few_secs[k] - bag_warm[k], H = hot_secs[k] - bag_l2[k];
    upd[k] = fmax(0.0, (H - L) / (d_hot[k] - d_few));
    hit[k] = fmax(0.0, L - d_few * upd[k]);
    miss[k] = fmax(0.0, secs[k] - bag_cold[k] - d_cold * upd[k]);
  }
  /* Empty bags (their lines of the matrix out of every cache, then out of
   * level 2 only), then half of them holding one id each of the cache's
   * table at 16 columns (its ids are still modulo the widest's rows). */
  double gamma = INFINITY, gamma_hit = INFINITY, mixed = INFINITY;
  if (st == GS_OK) {
    for (size_t i = 0; i <= bags; i++) c.off[i] = 0;
    gs_embed_bags b = {bags, c.off, c.ids + nb, 0, 0};
    double t;
    for (int rep = 0; rep < 3 && st == GS_OK; rep++) {
      st = one_pass(&c, hot_rows[0], 16, &b, width, c.nflush, &t);
      gamma = fmin(gamma, t / (double)bags);
    }
    for (int rep = 0; rep < 5 && st == GS_OK; rep++) {
      st = one_pass(&c, hot_rows[0], 16, &b, width, l2_sweep, &t);
      gamma_hit = fmin(gamma_hit, t / (double)bags);
    }
    /* A new pattern each pass: a branch predictor learns one repeated. */
    double per = hot_secs[0] - bag_l2[0];
    for (int rep = 0; rep < 6 && st == GS_OK; rep++) {
      size_t held = 0;
      for (size_t i = 0; i < bags; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        held += x >> 63;
        c.off[i + 1] = (int64_t)(held < hot_n ? held : hot_n);
      }
      held = held < hot_n ? held : hot_n;
      st = one_pass(&c, hot_rows[0], 16, &b, width, l2_sweep, &t);
      /* what is left a bag after its lookups; the first pass brings the
       * rows in */
      double left = (t - (double)held * per) / (double)bags;
      if (rep > 0) mixed = fmin(mixed, left);
    }
  }
  if (st == GS_OK) {
    double a, b;
    /* the branches' misses on top of the cold bag's price */
    out->gamma = gamma;
    out->gamma_hit = fmin(gamma, gamma_hit);
    out->gamma_mixed = isfinite(mixed) ? gamma + fmax(0.0, mixed - out->gamma_hit) : gamma;
    fit_lookups(dims, miss, NDIM, &a, &b);
    out->alpha = fmax(0.0, a);
    out->beta = b;
    fit_lookups(dims, hit, NDIM, &a, &b);
    out->alpha_hit = fmax(0.0, a);
    out->beta_hit = b;
    fit_lookups(dims, upd, NDIM, &a, &b);
    out->alpha_row = fmax(0.0, a);
    out->beta_row = b;
    out->cache_bytes = own;
  }
  gs_embed_work_free(c.work);
  gs_free(c.w);
  gs_free(c.acc);
  gs_free(c.buf);
  gs_free(c.flush);
  gs_free(c.off);
  gs_free(c.ids);
  return st;
}

gs_status gs_embed_calibrate(gs_cost_lookup *out) {
  return gs_embed_calibrate_shape(8192, 512, out);
}

gs_status gs_embed_calibrate_job(const gs_embed_spec *tables, int ntables, size_t batch,
                                 int ranks, gs_cost_lookup *out) {
  if (ntables < 0 || (ntables > 0 && tables == NULL) || ranks < 1)
    return gs_error(GS_ERR_INVALID_ARG, "embedding calibration: %d tables on %d ranks",
                    ntables, ranks);
  size_t width = 0; /* a rank's share of the tables' columns */
  for (int i = 0; i < ntables; i++) width += tables[i].dim;
  width = (width + (size_t)ranks - 1) / (size_t)ranks;
  return gs_embed_calibrate_shape(batch, width > 0 ? width : 1, out);
}

/* ---- Checking ---------------------------------------------------------------- */

static int cmp_shard_pos(const void *a, const void *b) {
  const gs_shard *x = *(gs_shard *const *)a, *y = *(gs_shard *const *)b;
  if (x->col_lo != y->col_lo) return x->col_lo < y->col_lo ? -1 : 1;
  if (x->row_lo != y->row_lo) return x->row_lo < y->row_lo ? -1 : 1;
  if (x->row_hi != y->row_hi) return x->row_hi < y->row_hi ? -1 : 1; /* empty shards first */
  return 0;
}

/* Whether a table `dim` wide on `ranks` ranks is cut into column blocks
 * when labelled cw: the planner's forced cw takes the most blocks of at
 * least 8 columns, up to one a rank, that divide the width (one, the whole
 * table, where none does). */
static int cw_cuts(size_t dim, int ranks) {
  for (size_t c = 2; c <= dim / 8 && c <= (size_t)ranks; c++)
    if (dim % c == 0) return 1;
  return 0;
}

gs_status gs_shard_plan_check(const gs_shard_plan *p, const gs_embed_spec *tables,
                              int ntables, double mem_cap) {
  if (p == NULL || tables == NULL || p->ntables != ntables)
    return gs_error(GS_ERR_INVALID_ARG, "sharding plan: made for %d tables, not %d",
                    p ? p->ntables : -1, ntables);
  gs_shard **mine = gs_malloc((p->nshards + 1) * sizeof *mine);
  double *mem = gs_calloc((size_t)p->ranks + 1, sizeof(double));
  gs_status st = mine && mem ? GS_OK : gs_error(GS_ERR_NOMEM, "sharding plan: out of memory");
  for (int i = 0; st == GS_OK && i < ntables; i++) {
    const gs_embed_spec *t = &tables[i];
    const char *name = t->name ? t->name : "?";
    size_t n = 0;
    for (size_t j = 0; j < p->nshards; j++)
      if (p->shards[j].table == i) mine[n++] = &p->shards[j];
    if (n == 0) {
      st = gs_error(GS_ERR_INVALID_ARG, "sharding plan: table '%s' has no shard", name);
      break;
    }
    for (size_t j = 0; j < n && st == GS_OK; j++) {
      const gs_shard *s = mine[j];
      /* What is wrong with the shard, in words (the general line below
       * where none of these is) */
      const char *what = s->col_hi > t->dim ? "its columns exceed the table's width"
                         : s->row_hi > t->rows ? "its rows exceed the table's rows"
                         : s->col_lo >= s->col_hi ? "it has no columns"
                         : s->row_lo > s->row_hi ? "its rows run backwards"
                                                 : NULL;
      if (what)
        st = gs_error(GS_ERR_INVALID_ARG, "sharding plan: table '%s' (%zu x %zu) has a shard "
                      "of rows %zu-%zu, columns %zu-%zu on rank %d: %s", name, t->rows, t->dim,
                      s->row_lo, s->row_hi, s->col_lo, s->col_hi, s->rank, what);
      else if (s->rank < 0 || s->rank >= p->ranks || s->kind != p->kind[i])
        st = gs_error(GS_ERR_INVALID_ARG, "sharding plan: table '%s' (%zu x %zu, %s) has a "
                      "shard of rows %zu-%zu, columns %zu-%zu, %s, on rank %d of %d", name,
                      t->rows, t->dim, gs_shard_kind_name(p->kind[i]), s->row_lo, s->row_hi,
                      s->col_lo, s->col_hi, gs_shard_kind_name(s->kind), s->rank, p->ranks);
      else
        mem[s->rank] += shard_mem(s->row_hi - s->row_lo, s->col_hi - s->col_lo, p->row_state);
    }
    if (st != GS_OK) break;
    /* The label says how the table is cut: tw one shard of it all, rw and
     * twrw blocks of rows of every column (dp below; cw's column bands may
     * be split in rows too). */
    gs_shard_kind k = p->kind[i];
    for (size_t j = 0; j < n && st == GS_OK; j++) {
      const gs_shard *s = mine[j];
      int whole_rows = s->row_lo == 0 && s->row_hi == t->rows;
      int whole_cols = s->col_lo == 0 && s->col_hi == t->dim;
      const char *cut = k == GS_SHARD_TW && (n != 1 || !whole_rows || !whole_cols)
                            ? "one shard of the whole table"
                        : (k == GS_SHARD_RW || k == GS_SHARD_TWRW) && !whole_cols
                            ? "blocks of rows, each of every column"
                        : k == GS_SHARD_RW && n != (size_t)p->ranks
                            ? "one block of rows on each rank"
                        : k == GS_SHARD_TWRW && (p->ranks % (int)n != 0 ||
                                                 s->rank / (int)n != mine[0]->rank / (int)n)
                            ? "one block of rows on each rank of one node"
                        : k == GS_SHARD_CW && cw_cuts(t->dim, p->ranks) && whole_cols
                            ? "blocks of columns, at least two"
                            : NULL;
      if (cut)
        st = gs_error(GS_ERR_INVALID_ARG, "sharding plan: table '%s' (%zu x %zu) is labelled "
                      "%s (%s), but it has %zu shard%s, one of rows %zu-%zu, columns %zu-%zu "
                      "on rank %d", name, t->rows, t->dim, gs_shard_kind_name(k), cut, n,
                      n == 1 ? "" : "s", s->row_lo, s->row_hi, s->col_lo, s->col_hi, s->rank);
    }
    if (st != GS_OK) break;
    if (p->kind[i] == GS_SHARD_DP) {
      /* A whole replica on every rank, once. */
      int ok = n == (size_t)p->ranks;
      for (size_t j = 0; j < n && ok; j++)
        ok = mine[j]->row_lo == 0 && mine[j]->row_hi == t->rows && mine[j]->col_lo == 0 &&
             mine[j]->col_hi == t->dim && mine[j]->rank == (int)j;
      if (!ok)
        st = gs_error(GS_ERR_INVALID_ARG, "sharding plan: table '%s' is dp but not one whole "
                      "replica on each of the %d ranks", name, p->ranks);
      continue;
    }
    /* The shards tile rows x columns exactly once: column bands in order,
     * each band's rows contiguous from 0 to rows (empty row shards allowed). */
    qsort(mine, n, sizeof *mine, cmp_shard_pos);
    size_t col = 0, j = 0;
    while (j < n && st == GS_OK) {
      size_t band_lo = mine[j]->col_lo, band_hi = mine[j]->col_hi, row = 0;
      if (band_lo != col) break;
      for (; j < n && mine[j]->col_lo == band_lo; j++) {
        if (mine[j]->col_hi != band_hi || mine[j]->row_lo != row) {
          row = (size_t)-1;
          break;
        }
        row = mine[j]->row_hi;
      }
      if (row != t->rows) {
        st = gs_error(GS_ERR_INVALID_ARG, "sharding plan: table '%s': the rows of columns "
                      "%zu-%zu are not owned exactly once", name, band_lo, band_hi);
        break;
      }
      col = band_hi;
    }
    if (st == GS_OK && col != t->dim)
      st = gs_error(GS_ERR_INVALID_ARG, "sharding plan: table '%s': columns %zu-%zu are not "
                    "owned exactly once", name, col, t->dim);
  }
  for (int r = 0; st == GS_OK && mem_cap > 0 && r < p->ranks; r++)
    if (mem[r] > mem_cap)
      st = gs_error(GS_ERR_INVALID_ARG, "sharding plan: rank %d holds %.4g MiB, over the cap "
                    "of %.4g MiB", r, mem[r] / MIB, mem_cap / MIB);
  gs_free(mine);
  gs_free(mem);
  return st;
}

/* Files larger than this are not plans (nor table sets): 1 GiB. */
#define PLAN_MAX_BYTES ((size_t)1 << 30)

/* ---- Table sets from a file ---------------------------------------------------- */

void gs_embed_specs_free(gs_embed_spec *specs) { gs_free(specs); }

/* The first key that appears twice in one object anywhere in x, or NULL
 * (cJSON keeps both and reads the first: a file that says two things). */
static const char *json_duplicate_key(const cJSON *x) {
  for (const cJSON *a = x ? x->child : NULL; a; a = a->next) {
    if (cJSON_IsObject(x) && a->string)
      for (const cJSON *b = a->next; b; b = b->next)
        if (b->string && strcmp(a->string, b->string) == 0) return a->string;
    const char *d = json_duplicate_key(a);
    if (d) return d;
  }
  return NULL;
}

gs_status gs_embed_specs_load(const char *path, gs_embed_spec **out, int *n) {
  return gs_embed_specs_load_scaled(path, 1.0, 1.0, out, n);
}

gs_status gs_embed_specs_load_scaled(const char *path, double scale, double pooling,
                                     gs_embed_spec **out, int *n) {
  *out = NULL;
  *n = 0;
  if (!(scale > 0) || scale > 1 || !(pooling >= 0) || pooling > 1e6)
    return gs_error(GS_ERR_INVALID_ARG, "table set %s: scale %g (above 0, at most 1) and "
                    "pooling %g (0 to 1e6)", path, scale, pooling);
  char *text = NULL;
  GS_CHECK(gs__read_text(path, "table set", PLAN_MAX_BYTES, &text, NULL));
  /* One JSON value and nothing after it but white space. */
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
  if (root == NULL) {
    size_t at = end ? (size_t)(end - text) : 0;
    const char *near = end ? end : "";
    int shown = (int)strcspn(near, "\r\n\t");
    gs_status bad = gs_error(GS_ERR_PARSE, "table set %s: not JSON, or text after its value "
                             "(at byte %zu: '%.*s')", path, at, shown < 20 ? shown : 20, near);
    gs_free(text);
    return bad;
  }
  gs_free(text);
  const char *dup = json_duplicate_key(root);
  if (dup) {
    gs_status bad = gs_error(GS_ERR_PARSE, "table set %s: the key \"%s\" appears twice in "
                             "one object", path, dup);
    cJSON_Delete(root);
    return bad;
  }
  const cJSON *arr = root ? cJSON_GetObjectItemCaseSensitive(root, "tables") : NULL;
  int k = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : 0;
  if (k < 1 || k > GS_EMBED_MAX_TABLES) {
    cJSON_Delete(root);
    return gs_error(GS_ERR_PARSE, "table set %s: expected {\"tables\": [...]} with 1 to %d "
                    "tables", path, GS_EMBED_MAX_TABLES);
  }
  static const char *const set_keys[] = {"tables", NULL};
  static const char *const table_keys[] = {"name", "rows", "dim", "pooling", NULL};
  const char *extra = unknown_key(root, set_keys);
  if (extra) {
    gs_status bad = gs_error(GS_ERR_PARSE, "table set %s: unknown key \"%.64s\" (the file "
                             "is {\"tables\": [...]})", path, extra);
    cJSON_Delete(root);
    return bad;
  }
  const cJSON *notobj = NULL;
  int at = 0;
  for (const cJSON *q = arr->child; q && !notobj; q = q->next, at++)
    if (!cJSON_IsObject(q)) notobj = q;
  if (notobj) {
    cJSON_Delete(root);
    return gs_error(GS_ERR_PARSE, "table set %s: table %d is not an object "
                    "({\"name\": ..., \"rows\": ..., \"dim\": ...})", path, at - 1);
  }
  /* One block: the specs, then their names. */
  size_t names = 0;
  const cJSON *o;
  cJSON_ArrayForEach(o, arr) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
    names += cJSON_IsString(nm) ? strlen(nm->valuestring) + 1 : 1;
  }
  gs_embed_spec *specs = gs_malloc((size_t)k * sizeof *specs + names);
  if (specs == NULL) {
    cJSON_Delete(root);
    return gs_error(GS_ERR_NOMEM, "table set %s: out of memory for %d tables", path, k);
  }
  char *pool = (char *)(specs + k);
  gs_status st = GS_OK;
  int i = 0;
  cJSON_ArrayForEach(o, arr) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(o, "rows");
    const cJSON *dim = cJSON_GetObjectItemCaseSensitive(o, "dim");
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(o, "pooling");
    /* The first field that is wrong, named with what it must be. */
    const char *field = NULL, *want = NULL;
    const cJSON *got = NULL;
    if (!cJSON_IsString(nm) || nm->valuestring[0] == '\0')
      field = "name", want = "a string, not empty", got = nm;
    else if (!cJSON_IsNumber(rows) || !(rows->valuedouble >= 1 && rows->valuedouble <= 1e12) ||
             rows->valuedouble != floor(rows->valuedouble))
      field = "rows", want = "a whole number from 1 to 1e12", got = rows;
    else if (!cJSON_IsNumber(dim) || !(dim->valuedouble >= 1 && dim->valuedouble <= 65536) ||
             dim->valuedouble != floor(dim->valuedouble))
      field = "dim", want = "a whole number from 1 to 65536", got = dim;
    else if (pl && (!cJSON_IsNumber(pl) || !(pl->valuedouble > 0 && pl->valuedouble <= 1e6)))
      field = "pooling", want = "ids per sample, above 0 and at most 1e6 (or left out)",
      got = pl;
    /* A key this reader does not know is a typo ("pooling_factor") whose
     * value would be silently ignored. */
    const char *unknown = field == NULL ? unknown_key(o, table_keys) : NULL;
    if (unknown) {
      st = gs_error(GS_ERR_PARSE, "table set %s: table %d ('%.64s'): unknown key \"%.64s\" "
                    "(a table has name, rows, dim and pooling)", path, i, nm->valuestring,
                    unknown);
      break;
    }
    for (const cJSON *q = arr->child; field == NULL && q != o; q = q->next)
      if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(q, "name")),
                 nm->valuestring) == 0)
        field = "name", want = "a name no other table has", got = nm;
    if (field) {
      char *v = got ? cJSON_PrintUnformatted(got) : NULL;
      char tname[80] = "";
      if (cJSON_IsString(nm) && nm->valuestring[0])
        snprintf(tname, sizeof tname, " ('%.64s')", nm->valuestring);
      st = gs_error(GS_ERR_PARSE, "table set %s: table %d%s: \"%s\" is %.64s; expected %s",
                    path, i, tname, field, v ? v : "missing", want);
      cJSON_free(v);
      break;
    }
    size_t len = strlen(nm->valuestring) + 1;
    memcpy(pool, nm->valuestring, len);
    /* Rows scaled as a preset's (gs_embed_preset). */
    double r = ceil(rows->valuedouble * scale);
    specs[i] = (gs_embed_spec){pool, r < 1 ? 1 : (size_t)r, (size_t)dim->valuedouble,
                               pl ? pl->valuedouble : pooling};
    pool += len;
    i++;
  }
  cJSON_Delete(root);
  if (st != GS_OK) {
    gs_free(specs);
    return st;
  }
  *out = specs;
  *n = k;
  return GS_OK;
}

/* ---- Saving and loading ---------------------------------------------------------- */

/* The plan as its file holds it (gs_shard_plan_save, gs_shard_plan_text). */
static cJSON *plan_json(const gs_shard_plan *p, const gs_embed_spec *tables) {
  cJSON *root = cJSON_CreateObject(), *ts = cJSON_AddArrayToObject(root, "tables");
  cJSON *ss = NULL;
  cJSON_AddNumberToObject(root, "ranks", p->ranks);
  cJSON_AddBoolToObject(root, "row_state", p->row_state);
  for (int i = 0; i < p->ntables; i++) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "name", tables[i].name ? tables[i].name : "");
    cJSON_AddNumberToObject(t, "rows", (double)tables[i].rows);
    cJSON_AddNumberToObject(t, "dim", (double)tables[i].dim);
    cJSON_AddStringToObject(t, "sharding", gs_shard_kind_name(p->kind[i]));
    cJSON_AddStringToObject(t, "why", p->why[i]);
    cJSON_AddItemToArray(ts, t);
  }
  ss = cJSON_AddArrayToObject(root, "shards");
  for (size_t j = 0; j < p->nshards; j++) {
    const gs_shard *s = &p->shards[j];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "table", s->table);
    cJSON_AddNumberToObject(o, "rank", s->rank);
    cJSON_AddNumberToObject(o, "row_lo", (double)s->row_lo);
    cJSON_AddNumberToObject(o, "row_hi", (double)s->row_hi);
    cJSON_AddNumberToObject(o, "col_lo", (double)s->col_lo);
    cJSON_AddNumberToObject(o, "col_hi", (double)s->col_hi);
    cJSON_AddNumberToObject(o, "est_s", s->est_s);
    cJSON_AddItemToArray(ss, o);
  }
  return root;
}

char *gs_shard_plan_text(const gs_shard_plan *p, const gs_embed_spec *tables) {
  cJSON *root = plan_json(p, tables);
  char *text = root ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  return text;
}

gs_status gs_shard_plan_save(const gs_shard_plan *p, const gs_embed_spec *tables,
                             const char *path) {
  cJSON *root = plan_json(p, tables);
  char *text = root ? cJSON_Print(root) : NULL;
  cJSON_Delete(root);
  if (text == NULL) return gs_error(GS_ERR_NOMEM, "sharding plan: out of memory for JSON");
  FILE *f = fopen(path, "w");
  gs_status st = GS_OK;
  if (f == NULL || fputs(text, f) < 0 || fputc('\n', f) == EOF)
    st = gs_error(GS_ERR_IO, "sharding plan: cannot write %s", path);
  if (f && fclose(f) != 0 && st == GS_OK)
    st = gs_error(GS_ERR_IO, "sharding plan: cannot write %s", path);
  free(text);
  return st;
}

static int json_size(const cJSON *o, const char *key, size_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9.0e15 ||
      v->valuedouble != floor(v->valuedouble))
    return -1;
  *out = (size_t)v->valuedouble;
  return 0;
}

gs_status gs_shard_plan_load(const char *path, const gs_embed_spec *tables, int ntables,
                             int ranks, gs_shard_plan **out) {
  *out = NULL;
  char *buf = NULL;
  gs_status st = gs__read_text(path, "sharding plan", PLAN_MAX_BYTES, &buf, NULL);
  cJSON *root = NULL;
  if (st == GS_OK) {
    root = cJSON_ParseWithOpts(buf, NULL, 1); /* nothing after the value */
    if (root == NULL)
      st = gs_error(GS_ERR_PARSE, "sharding plan %s: not JSON, or text after its value", path);
  }
  gs_free(buf);
  const cJSON *ts = NULL, *ss = NULL, *rk = NULL;
  if (st == GS_OK) {
    ts = cJSON_GetObjectItemCaseSensitive(root, "tables");
    ss = cJSON_GetObjectItemCaseSensitive(root, "shards");
    rk = cJSON_GetObjectItemCaseSensitive(root, "ranks");
    if (!cJSON_IsArray(ts) || !cJSON_IsArray(ss) || !cJSON_IsNumber(rk))
      st = gs_error(GS_ERR_PARSE, "sharding plan %s: expected \"tables\", \"shards\" and "
                    "\"ranks\"", path);
  }
  /* ranks <= 0: the plan's own (a check before the world is known) */
  if (st == GS_OK && ranks <= 0) {
    if (rk->valuedouble >= 1 && rk->valuedouble <= 1 << 20 &&
        rk->valuedouble == floor(rk->valuedouble))
      ranks = (int)rk->valuedouble;
    else
      st = gs_error(GS_ERR_PARSE, "sharding plan %s: \"ranks\" is %g", path, rk->valuedouble);
  }
  if (st == GS_OK && (rk->valuedouble != ranks || cJSON_GetArraySize(ts) != ntables))
    st = gs_error(GS_ERR_INVALID_ARG, "sharding plan %s: made for %g ranks and %d tables, "
                  "this job has %d rank%s and %d table%s", path, rk->valuedouble,
                  cJSON_GetArraySize(ts), ranks, ranks == 1 ? "" : "s", ntables,
                  ntables == 1 ? "" : "s");
  static const char *const top_keys[] = {"ranks", "row_state", "tables", "shards", NULL};
  static const char *const table_keys[] = {"name", "rows", "dim", "sharding", "why", NULL};
  static const char *const shard_keys[] = {"table", "rank", "row_lo", "row_hi", "col_lo",
                                           "col_hi", "est_s", NULL};
  const char *unknown = st == GS_OK ? unknown_key(root, top_keys) : NULL;
  if (unknown)
    st = gs_error(GS_ERR_PARSE, "sharding plan %s: unknown key \"%.64s\" (a plan has ranks, "
                  "row_state, tables and shards)", path, unknown);
  const cJSON *rs = st == GS_OK ? cJSON_GetObjectItemCaseSensitive(root, "row_state") : NULL;
  if (rs && !cJSON_IsBool(rs))
    st = gs_error(GS_ERR_PARSE, "sharding plan %s: \"row_state\" must be true or false", path);
  gs_shard_plan *p = NULL;
  if (st == GS_OK) st = plan_alloc(ntables, ranks, (size_t)cJSON_GetArraySize(ss) + 1, &p);
  if (st == GS_OK && rs) p->row_state = cJSON_IsTrue(rs);
  for (int i = 0; st == GS_OK && i < ntables; i++) {
    const cJSON *t = cJSON_GetArrayItem(ts, i);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(t, "name");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "sharding");
    size_t rows = 0, dim = 0;
    int kind = -1;
    if (!cJSON_IsString(nm) || json_size(t, "rows", &rows) || json_size(t, "dim", &dim) ||
        !cJSON_IsString(sh) || gs_shard_kind_parse(sh->valuestring, &kind) != GS_OK || kind < 0)
      st = gs_error(GS_ERR_PARSE, "sharding plan %s: table %d: expected name, rows, dim and "
                    "a sharding", path, i);
    else if ((unknown = unknown_key(t, table_keys)) != NULL)
      st = gs_error(GS_ERR_PARSE, "sharding plan %s: table %d: unknown key \"%.64s\" (a "
                    "table has name, rows, dim, sharding and why)", path, i, unknown);
    else if (strcmp(nm->valuestring, tables[i].name ? tables[i].name : "") != 0 ||
             rows != tables[i].rows || dim != tables[i].dim)
      st = gs_error(GS_ERR_INVALID_ARG, "sharding plan %s: table %d is '%s' (%zu x %zu), "
                    "this job's is '%s' (%zu x %zu)", path, i, nm->valuestring, rows, dim,
                    tables[i].name ? tables[i].name : "", tables[i].rows, tables[i].dim);
    else {
      p->kind[i] = (gs_shard_kind)kind;
      const cJSON *why = cJSON_GetObjectItemCaseSensitive(t, "why");
      snprintf(p->why[i], sizeof p->why[i], "%s", cJSON_IsString(why) ? why->valuestring : "");
    }
  }
  const cJSON *o;
  cJSON_ArrayForEach(o, ss) {
    if (st != GS_OK) break;
    size_t v[6];
    /* Each field a whole number >= 0, table and rank within the job: the
     * first that is not named with its value. */
    static const char *const fields[6] = {"table", "rank", "row_lo", "row_hi", "col_lo",
                                          "col_hi"};
    int bad = -1;
    for (int f = 0; f < 6 && bad < 0; f++)
      if (json_size(o, fields[f], &v[f]) || (f == 0 && v[f] >= (size_t)ntables) ||
          (f == 1 && v[f] >= (size_t)ranks))
        bad = f;
    if (bad >= 0) {
      const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, fields[bad]);
      char *text = x ? cJSON_PrintUnformatted(x) : NULL;
      char want[96];
      if (bad == 0)
        snprintf(want, sizeof want, "a table's index, 0 to %d", ntables - 1);
      else if (bad == 1)
        snprintf(want, sizeof want, "a rank, 0 to %d", ranks - 1);
      else
        snprintf(want, sizeof want, "a whole number, 0 or more");
      st = gs_error(GS_ERR_PARSE, "sharding plan %s: shard %zu: \"%s\" is %.40s; expected %s",
                    path, p->nshards, fields[bad], text ? text : "missing", want);
      cJSON_free(text);
      break;
    }
    size_t tbl = v[0], rank = v[1], rl = v[2], rh = v[3], cl = v[4], ch = v[5];
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "est_s");
    if ((unknown = unknown_key(o, shard_keys)) != NULL) {
      st = gs_error(GS_ERR_PARSE, "sharding plan %s: shard %zu: unknown key \"%.64s\" (a "
                    "shard has table, rank, row_lo, row_hi, col_lo, col_hi and est_s)", path,
                    p->nshards, unknown);
      break;
    }
    if (e && (!cJSON_IsNumber(e) || !(e->valuedouble >= 0) || !isfinite(e->valuedouble))) {
      st = gs_error(GS_ERR_PARSE, "sharding plan %s: shard %zu: \"est_s\" must be a time in "
                    "seconds, 0 or more", path, p->nshards);
      break;
    }
    gs_shard s = {(int)tbl, (int)rank, p->kind[tbl], rl, rh, cl, ch,
                  cJSON_IsNumber(e) ? e->valuedouble : 0,
                  shard_mem(rh > rl ? rh - rl : 0, ch > cl ? ch - cl : 0, p->row_state), 0};
    p->shards[p->nshards++] = s;
    p->rank_s[rank] += s.est_s;
    p->rank_mem[rank] += s.mem_bytes;
  }
  cJSON_Delete(root);
  if (st == GS_OK && (st = gs_shard_plan_check(p, tables, ntables, 0)) != GS_OK) {
    /* The check's message, naming the file. */
    char msg[1024];
    gs__error_copy(msg, sizeof msg);
    const char *why = strncmp(msg, "sharding plan: ", 15) == 0 ? msg + 15 : msg;
    st = gs_error(st, "sharding plan %s: %s", path, why);
  }
  if (st != GS_OK) {
    gs_shard_plan_free(p);
    return st;
  }
  *out = p;
  return GS_OK;
}
