/*
 * Hybrid-parallel DLRM training (gs_dlrm_dist_*, docs/DLRM.md) under mpirun
 * on 2, 3 and 4 ranks:
 *   - 100 steps on W ranks with their own (unequal) local batches equal the
 *     single-process model trained on the global batch (the local batches
 *     in rank order) within 1e-5 relative loss, for tw, rw, dp, cw (SGD and
 *     row-wise Adagrad, whose column blocks add their sums of squares; also
 *     with bands whose row blocks do not line up), twrw and the planner's
 *     choice; every shard's weights and accumulators after 1 and 3 steps
 *     equal its block of the single-process tables; with bags of 0 to 3 ids (empty bags), a table of
 *     one row and one of two (empty row-wise shards on 3 and 4 ranks);
 *   - one table on every rank count (fewer tables than ranks);
 *   - DCN-v2's cross layers the same, within 1e-5 over the first 60 steps
 *     and 1e-3 over all 100 (DCN_STRICT_STEPS below);
 *   - three runs of one plan bitwise identical (losses, MLPs, shards);
 *   - an id out of range on one rank: every rank gets GS_ERR_INVALID_ARG,
 *     the others' message naming that rank, the table, the id and the
 *     sample; nothing changes and the next step runs;
 *   - fp16/bf16 pooled all-to-alls close to fp32;
 *   - each step sending the next batch's ids under its backward
 *     (gs_dlrm_dist_train_step_next) bitwise the same as without; a next
 *     batch refused on one rank fails its own step on every rank, not the
 *     step that sent it; a prefetched batch not stepped is dropped.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "gradsync.h"
#include "mrt.h"

#define STEPS 100

static gs_embed_spec g_tables[] = {
    {"one", 1, 16, 2}, {"two", 2, 16, 2}, {"C3", 50, 16, 2}, {"C4", 300, 16, 2}, {"C5", 1000, 16, 2},
};
static int g_ntables = 5;

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* Samples first .. first + n - 1 of the test's data: a pure function of the
 * global index, so the global batch and the ranks' slices agree. Bags of 0
 * to 3 ids, skewed to low rows; labels from a fixed rule of the features. */
static void fill(gs_dlrm_batch *b, size_t first, size_t n, const gs_embed_spec *t, int nt,
                 uint64_t seed) {
  b->n = n;
  b->first_sample = first;
  for (int k = 0; k < nt; k++) b->offsets[(size_t)k * (b->max_n + 1)] = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t s = mix(seed * 1000003ULL + first + i);
    double z = 0;
    for (size_t f = 0; f < b->ndense; f++) {
      s = mix(s);
      b->dense[i * b->ndense + f] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
      z += b->dense[i * b->ndense + f];
    }
    for (int k = 0; k < nt; k++) {
      int64_t *off = b->offsets + (size_t)k * (b->max_n + 1);
      int32_t *ids = b->ids + (size_t)k * b->max_ids;
      s = mix(s);
      int len = (int)(s % 4);
      int64_t at = off[i];
      for (int q = 0; q < len; q++) {
        s = mix(s);
        double u = (double)(s >> 11) / 9007199254740992.0;
        int32_t id = (int32_t)((double)t[k].rows * u * u);
        ids[at++] = id;
        z += (id % 2) ? 0.3 : -0.3;
      }
      off[i + 1] = at;
    }
    s = mix(s);
    b->labels[i] = ((double)(s >> 11) / 9007199254740992.0) < 1.0 / (1.0 + exp(-z)) ? 1.0f : 0.0f;
  }
}

static size_t local_n(int r) { return 12 + (size_t)r * 5; } /* unequal on purpose */

static size_t global_n(int size, size_t *first_of_me) {
  size_t N = 0;
  *first_of_me = 0;
  for (int r = 0; r < size; r++) {
    if (r == g_rank) *first_of_me = N;
    N += local_n(r);
  }
  return N;
}

static gs_dlrm_interaction g_inter = GS_DLRM_DOT; /* dcn: 2 cross layers of rank 8 */
/* With DCN's cross layers the 1e-5 holds over the first 60 steps, 1e-3
 * over all 100. The local batches' GEMMs round otherwise than the global
 * batch's (their shapes, and the BLAS kernel the CPU gets), about 4e-8 of
 * the loss; on AMD EPYC (OpenBLAS's Zen kernels) an activation near its
 * kink flips at step 66 of tw's run, the gap jumps to 8e-6 and the
 * training's own sensitivity grows it to 2e-4 by step 98 (2026-12-07; with
 * OPENBLAS_CORETYPE=SkylakeX, the Intel hosts' kernels, 9e-8 throughout).
 * A wrong exchange or update shows from the first steps, well above 1e-5. */
#define DCN_STRICT_STEPS 60
#define DCN_LOOSE_REL 1e-3

static gs_dlrm_config model_config(const gs_embed_spec *t, int nt, size_t max_batch) {
  gs_dlrm_config c = {"4-32-16", "32-1", t, nt, g_inter, max_batch, 7, 2, 8};
  return c;
}

static int g_ragged; /* make_plan: cw bands whose row blocks do not line up */

/* Splits every column band of the tables with more than one into two row
 * blocks, at another row in each band, the second on the next rank: blocks
 * of different bands meet partly, some on one rank. */
static gs_status ragged(gs_shard_plan *p, const gs_embed_spec *t) {
  size_t n = p->nshards, add = 0;
  for (size_t i = 0; i < n; i++)
    if (p->shards[i].col_hi - p->shards[i].col_lo < t[p->shards[i].table].dim) add++;
  gs_shard *sh = gs_realloc(p->shards, (n + add) * sizeof *sh);
  if (sh == NULL) return GS_ERR_NOMEM;
  p->shards = sh;
  for (size_t i = 0; i < n; i++) {
    gs_shard *s = &sh[i];
    size_t rows = t[s->table].rows, dim = t[s->table].dim, w = s->col_hi - s->col_lo;
    if (w == dim || rows < 2) continue;
    size_t band = s->col_lo / w, bands = dim / w;
    size_t cut = rows * (band + 1) / (bands + 1);
    if (cut == 0) cut = 1;
    sh[p->nshards] = *s;
    sh[p->nshards].row_lo = cut;
    sh[p->nshards].rank = (s->rank + 1) % p->ranks;
    s->row_hi = cut;
    p->nshards++;
  }
  return gs_shard_plan_check(p, t, (int)p->ntables, 0);
}

/* The planner's plans, column blocks allowed (auto splits tables to balance
 * the ranks), the row sums priced. */
static gs_status make_plan(const gs_embed_spec *t, int nt, int force, int per_node,
                           gs_shard_plan **p) {
  gs_shard_config cfg = {.ranks = g_size, .ranks_per_node = per_node, .batch = 64,
                         .wire_elem_bytes = 4, .force = force, .mem_cap = 0, .row_sums = 1};
  gs_cost_preset("1gbit", &cfg.net);
  cfg.lookup.alpha = 2e-8;
  cfg.lookup.beta = 1e-10;
  gs_status st = gs_shard_plan_make(t, nt, &cfg, p);
  if (st != GS_OK) return st;
  return g_ragged && force == GS_SHARD_CW ? ragged(*p, t) : GS_OK;
}

typedef struct run_out {
  double loss[STEPS];
  float *mlp;
  size_t nmlp;
  float *shards; /* every local shard's weights and state, concatenated */
  size_t nshards;
  gs_dlrm_dist_stats stats;
  gs_dlrm_mlp_choice choice;
} run_out;

static void run_out_free(run_out *o) {
  free(o->mlp);
  free(o->shards);
  memset(o, 0, sizeof *o);
}

static int g_prefetch; /* run_dist: each step sends the next one's ids */
static const char *g_policy; /* run_dist: the MLP gradients' engine policy (NULL: fused) */

/* STEPS hybrid-parallel steps under plan p; 0 on success. */
static int run_dist(const gs_embed_spec *t, int nt, const gs_shard_plan *p,
                    const gs_dlrm_optim *opt, gs_dlrm_a2a_precision prec, run_out *o) {
  size_t first = 0;
  global_n(g_size, &first);
  size_t n = local_n(g_rank);
  gs_dlrm_config mc = model_config(t, nt, n);
  gs_dlrm_dist *d = NULL;
  gs_status st = gs_dlrm_dist_create(&mc, p, g_comm, &d);
  CHECK(st == GS_OK, "gs_dlrm_dist_create: %s", gs_last_error());
  if (st != GS_OK) return 1;
  gs_dlrm_dist_set_precision(d, prec);
  if (g_policy) {
    st = gs_dlrm_dist_set_mlp_policy(d, g_policy);
    CHECK(st == GS_OK, "set_mlp_policy %s: %s", g_policy, gs_last_error());
    if (st != GS_OK) {
      gs_dlrm_dist_destroy(d);
      return 1;
    }
  }
  gs_dlrm_batch bb[2];
  CHECK_ST(gs_dlrm_batch_alloc(&bb[0], n, 4, nt, 3 * n), GS_OK);
  CHECK_ST(gs_dlrm_batch_alloc(&bb[1], n, 4, nt, 3 * n), GS_OK);
  int bad = 0;
  size_t N = global_n(g_size, &first);
  fill(&bb[0], first, n, t, nt, 11);
  for (int s = 0; s < STEPS && !bad; s++) {
    gs_dlrm_batch *cur = &bb[s % 2], *next = &bb[(s + 1) % 2];
    if (!g_prefetch && s > 0) fill(cur, (size_t)s * N + first, n, t, nt, 11);
    if (g_prefetch && s + 1 < STEPS) fill(next, (size_t)(s + 1) * N + first, n, t, nt, 11);
    st = gs_dlrm_dist_train_step_next(d, cur, g_prefetch && s + 1 < STEPS ? next : NULL, opt,
                                      &o->loss[s], NULL);
    if (st != GS_OK) {
      fail("step %d: %s", s, gs_last_error());
      bad = 1;
    }
  }
  float *w = gs_dlrm_mlp_weights(gs_dlrm_dist_model(d), &o->nmlp);
  o->mlp = malloc(o->nmlp * sizeof(float));
  memcpy(o->mlp, w, o->nmlp * sizeof(float));
  o->nshards = 0;
  for (size_t i = 0; i < gs_dlrm_dist_nshards(d); i++) {
    gs_embed_table *e = gs_dlrm_dist_shard(d, i, NULL);
    o->nshards += e->rows * e->dim + e->rows;
  }
  o->shards = malloc((o->nshards + 1) * sizeof(float));
  size_t at = 0;
  for (size_t i = 0; i < gs_dlrm_dist_nshards(d); i++) {
    gs_embed_table *e = gs_dlrm_dist_shard(d, i, NULL);
    memcpy(o->shards + at, e->weights, e->rows * e->dim * sizeof(float));
    at += e->rows * e->dim;
    memcpy(o->shards + at, e->state, e->rows * sizeof(float));
    at += e->rows;
  }
  gs_dlrm_dist_stats_get(d, &o->stats);
  gs_dlrm_dist_mlp_choice_get(d, &o->choice);
  gs_dlrm_batch_free(&bb[0]);
  gs_dlrm_batch_free(&bb[1]);
  gs_dlrm_dist_destroy(d);
  return bad;
}

/* The same STEPS on one process over the global batch. */
static void run_single(const gs_embed_spec *t, int nt, const gs_dlrm_optim *opt,
                       double *loss) {
  size_t first = 0;
  size_t N = global_n(g_size, &first);
  gs_dlrm_config mc = model_config(t, nt, N);
  gs_dlrm *m;
  CHECK_ST(gs_dlrm_create(&mc, &m), GS_OK);
  gs_dlrm_batch b;
  CHECK_ST(gs_dlrm_batch_alloc(&b, N, 4, nt, 3 * N), GS_OK);
  for (int s = 0; s < STEPS; s++) {
    fill(&b, (size_t)s * N, N, t, nt, 11);
    float l;
    CHECK_ST(gs_dlrm_train_step(m, &b, opt, &l, NULL), GS_OK);
    /* gs_dlrm_train_step reports a float; recompute in double. */
    loss[s] = l;
  }
  gs_dlrm_batch_free(&b);
  gs_dlrm_destroy(m);
}

static void equivalence(const char *name, const gs_embed_spec *t, int nt, int force,
                        int per_node, const gs_dlrm_optim *opt, run_out *keep) {
  begin_case("equivalence %s, %d tables, %d ranks", name, nt, g_size);
  gs_shard_plan *p = NULL;
  CHECK_ST(make_plan(t, nt, force, per_node, &p), GS_OK);
  if (p) {
    run_out o = {0};
    double ref[STEPS];
    run_single(t, nt, opt, ref);
    if (run_dist(t, nt, p, opt, GS_DLRM_A2A_FP32, &o) == 0) {
      double worst = 0, worst_late = 0;
      int at = 0, at_late = 0;
      int strict = g_inter == GS_DLRM_DCN ? DCN_STRICT_STEPS : STEPS;
      for (int s = 0; s < STEPS; s++) {
        double rel = fabs(o.loss[s] - ref[s]) / fabs(ref[s]);
        if (s < strict && rel > worst) worst = rel, at = s;
        if (s >= strict && rel > worst_late) worst_late = rel, at_late = s;
        if (rel > 1e-5 && getenv("DEBUG_STEPS") && g_rank == 0)
          printf("step %d: %.9g vs %.9g\n", s, o.loss[s], ref[s]);
      }
      CHECK(worst <= 1e-5, "loss differs from single-process by %.3g relative at step %d "
            "(%.9g vs %.9g)", worst, at, o.loss[at], ref[at]);
      CHECK(worst_late <= DCN_LOOSE_REL, "loss differs from single-process by %.3g relative "
            "at step %d (%.9g vs %.9g), past the first %d", worst_late, at_late,
            o.loss[at_late], ref[at_late], strict);
      CHECK(ref[STEPS - 1] < ref[0], "no learning: loss %.5f -> %.5f", ref[0], ref[STEPS - 1]);
      /* The all-to-alls' phases are parts of their total. */
      const gs_dlrm_dist_stats *x = &o.stats;
      CHECK(x->ids_s >= 0 && x->pooled_s >= 0 && x->grads_s >= 0 &&
            x->ids_s + x->pooled_s + x->grads_s <= x->a2a_s * (1 + 1e-9) &&
            (g_size == 1 || force == GS_SHARD_DP || (x->pooled_s > 0 && x->grads_s > 0)),
            "phases: ids %.6f + pooled %.6f + grads %.6f s against all-to-alls %.6f s",
            x->ids_s, x->pooled_s, x->grads_s, x->a2a_s);
      if (g_rank == 0)
        printf("  %s on %d ranks: loss %.6f -> %.6f, worst relative difference %.2g "
               "(%.2g after step %d)\n", name, g_size, ref[0], ref[STEPS - 1], worst,
               worst_late, strict);
    }
    if (keep) *keep = o;
    else run_out_free(&o);
    gs_shard_plan_free(p);
  }
  end_case();
}

/* dp tables: the small ones' dense gradients travel in the MLPs' all-reduce
 * and nothing is gathered; a table with more rows than the global batch
 * pays for (gs_cost_dp_dense) is gathered; both equal one process. */
static void dp_paths(const gs_dlrm_optim *opt) {
  size_t first = 0, N = global_n(g_size, &first);
  size_t nw = 0;
  {
    gs_dlrm_config mc = model_config(g_tables, 2, 1);
    gs_dlrm *m = NULL;
    CHECK_ST(gs_dlrm_create(&mc, &m), GS_OK);
    if (m) gs_dlrm_mlp_grads(m, &nw);
    gs_dlrm_destroy(m);
  }
  double ring = 2.0 * (g_size - 1) / g_size * 4 * STEPS;
  /* "one" and "two" (1 and 2 rows) are dense on every rank count. */
  CHECK(gs_cost_dp_dense(2, 16, (double)N, 2) && !gs_cost_dp_dense(1000, 16, (double)N, 2),
        "the rule: 2 rows dense and 1000 gathered at a global batch of %zu", N);
  run_out o = {0};
  equivalence("dp, small tables", g_tables, 2, GS_SHARD_DP, 1, opt, &o);
  CHECK(o.stats.dp_bytes == 0, "small dp tables: %.0f bytes gathered, expected none",
        o.stats.dp_bytes);
  double want = ring * (double)(nw + 3 * 16);
  CHECK(fabs(o.stats.allreduce_bytes - want) <= 1e-6 * want, "small dp tables: all-reduce "
        "bytes %.0f, expected %.0f (the MLPs' %zu floats and 3 rows of 16)",
        o.stats.allreduce_bytes, want, nw);
  run_out_free(&o);
  equivalence("dp, a large table", g_tables + 4, 1, GS_SHARD_DP, 1, opt, &o);
  CHECK(o.stats.dp_bytes > 0, "a dp table of 1000 rows at a global batch of %zu: nothing "
        "gathered", N);
  run_out_free(&o);
}

/* After `steps` steps every shard equals its block of the single-process
 * model's table (weights within 1e-5 relative to the table's largest). */
static void tables_match(const char *name, int force, const gs_dlrm_optim *opt, int steps) {
  begin_case("tables after %d steps, %s, %d ranks", steps, name, g_size);
  const gs_embed_spec *t = g_tables;
  int nt = g_ntables;
  gs_shard_plan *p = NULL;
  CHECK_ST(make_plan(t, nt, force, 1, &p), GS_OK);
  size_t first = 0, n = local_n(g_rank), N = global_n(g_size, &first);
  gs_dlrm_config mc = model_config(t, nt, N);
  gs_dlrm *m = NULL;
  CHECK_ST(gs_dlrm_create(&mc, &m), GS_OK);
  mc.max_batch = n;
  gs_dlrm_dist *d = NULL;
  CHECK_ST(gs_dlrm_dist_create(&mc, p, g_comm, &d), GS_OK);
  gs_dlrm_batch gb, b;
  CHECK_ST(gs_dlrm_batch_alloc(&gb, N, 4, nt, 3 * N), GS_OK);
  CHECK_ST(gs_dlrm_batch_alloc(&b, n, 4, nt, 3 * n), GS_OK);
  for (int s = 0; s < steps && m && d; s++) {
    fill(&gb, (size_t)s * N, N, t, nt, 11);
    fill(&b, (size_t)s * N + first, n, t, nt, 11);
    float l1;
    double l2;
    CHECK_ST(gs_dlrm_train_step(m, &gb, opt, &l1, NULL), GS_OK);
    CHECK_ST(gs_dlrm_dist_train_step(d, &b, opt, &l2, NULL), GS_OK);
  }
  for (size_t i = 0; m && d && i < gs_dlrm_dist_nshards(d); i++) {
    gs_shard w;
    gs_embed_table *e = gs_dlrm_dist_shard(d, i, &w);
    gs_embed_table *ref = gs_dlrm_table(m, w.table);
    int bad = 0;
    for (size_t r = w.row_lo; r < w.row_hi && !bad; r++) {
      float a = e->state[r - w.row_lo], bref = ref->state[r];
      if (fabsf(a - bref) > 1e-5f * fabsf(bref) + 1e-12f) {
        fail("table %d row %zu: state %.9g, single-process %.9g", w.table, r, a, bref);
        bad = 1;
      }
      for (size_t c = w.col_lo; c < w.col_hi && !bad; c++) {
        float x = e->weights[(r - w.row_lo) * e->dim + c - w.col_lo], y = ref->weights[r * ref->dim + c];
        if (fabsf(x - y) > 1e-5f * fabsf(y) + 1e-7f) {
          fail("table %d row %zu col %zu: %.9g, single-process %.9g", w.table, r, c, x, y);
          bad = 1;
        }
      }
    }
  }
  gs_dlrm_batch_free(&gb);
  gs_dlrm_batch_free(&b);
  gs_dlrm_dist_destroy(d);
  gs_dlrm_destroy(m);
  gs_shard_plan_free(p);
  end_case();
}

static void bitwise(void) {
  begin_case("three runs bitwise identical, %d ranks", g_size);
  gs_shard_plan *p = NULL;
  CHECK_ST(make_plan(g_tables, g_ntables, GS_SHARD_RW, 1, &p), GS_OK);
  gs_dlrm_optim opt = {0.1f, {GS_EMBED_ROWWISE_ADAGRAD, 0.05f, 1e-8f}};
  run_out o[3];
  memset(o, 0, sizeof o);
  for (int k = 0; k < 3 && p; k++) run_dist(g_tables, g_ntables, p, &opt, GS_DLRM_A2A_FP32, &o[k]);
  for (int k = 1; k < 3 && p; k++) {
    CHECK(memcmp(o[k].loss, o[0].loss, sizeof o[0].loss) == 0, "run %d's losses differ", k);
    CHECK(o[k].nmlp == o[0].nmlp && memcmp(o[k].mlp, o[0].mlp, o[0].nmlp * 4) == 0,
          "run %d's MLP weights differ", k);
    CHECK(o[k].nshards == o[0].nshards && memcmp(o[k].shards, o[0].shards, o[0].nshards * 4) == 0,
          "run %d's shards differ", k);
  }
  for (int k = 0; k < 3; k++) run_out_free(&o[k]);
  gs_shard_plan_free(p);
  end_case();
}

/* With and without the next batch's ids sent ahead: the same steps, bit
 * for bit (the same sums in the same order), under every sharding. */
static void prefetch_same(void) {
  begin_case("next batch's ids under the backward: bitwise the same, %d ranks", g_size);
  gs_dlrm_optim opt = {0.1f, {GS_EMBED_ROWWISE_ADAGRAD, 0.05f, 1e-8f}};
  int kinds[] = {GS_SHARD_TW, GS_SHARD_RW, GS_SHARD_DP, -1};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    gs_shard_plan *p = NULL;
    CHECK_ST(make_plan(g_tables, g_ntables, kinds[k], 1, &p), GS_OK);
    run_out o[2];
    memset(o, 0, sizeof o);
    for (int f = 0; f < 2 && p; f++) {
      g_prefetch = f;
      run_dist(g_tables, g_ntables, p, &opt, GS_DLRM_A2A_FP32, &o[f]);
    }
    g_prefetch = 0;
    CHECK(memcmp(o[1].loss, o[0].loss, sizeof o[0].loss) == 0, "sharding %d: losses differ",
          kinds[k]);
    CHECK(o[1].nmlp == o[0].nmlp && memcmp(o[1].mlp, o[0].mlp, o[0].nmlp * 4) == 0,
          "sharding %d: MLP weights differ", kinds[k]);
    CHECK(o[1].nshards == o[0].nshards &&
          memcmp(o[1].shards, o[0].shards, o[0].nshards * 4) == 0,
          "sharding %d: shards differ", kinds[k]);
    CHECK(o[1].stats.id_bytes == o[0].stats.id_bytes, "sharding %d: id bytes %.0f vs %.0f",
          kinds[k], o[1].stats.id_bytes, o[0].stats.id_bytes);
    for (int f = 0; f < 2; f++) run_out_free(&o[f]);
    gs_shard_plan_free(p);
  }
  end_case();
}

/* Sample 2's bag of table C4 on this rank gets one id more: 300, one past
 * the end. */
static void plant_bad_id(gs_dlrm_batch *b, size_t n) {
  int64_t *off = b->offsets + 3 * (b->max_n + 1);
  int32_t *ids = b->ids + 3 * b->max_ids;
  memmove(ids + off[3] + 1, ids + off[3], (size_t)(off[n] - off[3]) * sizeof(int32_t));
  ids[off[3]] = 300;
  for (size_t i = 3; i <= n; i++) off[i]++;
}

/* The tables whole on ranks (tw), this rank's batch n: the bad-input
 * cases' model (NULL after a failed check). */
static gs_dlrm_dist *tw_model(gs_shard_plan **p) {
  CHECK_ST(make_plan(g_tables, g_ntables, GS_SHARD_TW, 1, p), GS_OK);
  gs_dlrm_config mc = model_config(g_tables, g_ntables, local_n(g_rank));
  gs_dlrm_dist *d = NULL;
  if (*p) CHECK_ST(gs_dlrm_dist_create(&mc, *p, g_comm, &d), GS_OK);
  return d;
}

/* The bad batch sent ahead: the step that sends it succeeds everywhere; its
 * own step fails on every rank with the message naming the rank; then a
 * good batch steps. A prefetched batch never stepped (an evaluation, or
 * another batch, comes next) is dropped. */
static void bad_id_ahead(void) {
  begin_case("an id out of range in the batch sent ahead, %d ranks", g_size);
  gs_shard_plan *p = NULL;
  size_t first = 0, n = local_n(g_rank), N = global_n(g_size, &first);
  gs_dlrm_dist *d = tw_model(&p);
  gs_dlrm_batch a, b;
  CHECK_ST(gs_dlrm_batch_alloc(&a, n, 4, g_ntables, 3 * n), GS_OK);
  CHECK_ST(gs_dlrm_batch_alloc(&b, n, 4, g_ntables, 3 * n), GS_OK);
  gs_dlrm_optim opt = {0.1f, {GS_EMBED_ROWWISE_ADAGRAD, 0.05f, 1e-8f}};
  int bad = g_size - 1;
  if (d) {
    double loss;
    fill(&a, first, n, g_tables, g_ntables, 11);
    fill(&b, N + first, n, g_tables, g_ntables, 11);
    if (g_rank == bad) plant_bad_id(&b, n);
    CHECK_ST(gs_dlrm_dist_train_step_next(d, &a, &b, &opt, &loss, NULL), GS_OK);
    gs_status st = gs_dlrm_dist_train_step(d, &b, &opt, &loss, NULL);
    CHECK(st == GS_ERR_INVALID_ARG, "the bad batch's own step: expected GS_ERR_INVALID_ARG, "
          "got %s", gs_strerror(st));
    const char *msg = gs_last_error();
    char who[32];
    snprintf(who, sizeof who, "rank %d", bad);
    CHECK(strstr(msg, "'C4'") && strstr(msg, "id 300") && (g_rank == bad || strstr(msg, who)),
          "the message does not name rank %d, the table and the id: %s", bad, msg);
    /* A good batch steps, sending another ahead that an evaluation drops. */
    fill(&b, 2 * N + first, n, g_tables, g_ntables, 11);
    fill(&a, 3 * N + first, n, g_tables, g_ntables, 11);
    CHECK_ST(gs_dlrm_dist_train_step_next(d, &b, &a, &opt, &loss, NULL), GS_OK);
    CHECK(isfinite(loss), "loss %g after the refused step", loss);
    float logits[64];
    CHECK_ST(gs_dlrm_dist_forward(d, &b, logits), GS_OK);
    /* And one sent ahead that another batch's step drops. */
    CHECK_ST(gs_dlrm_dist_train_step_next(d, &b, &a, &opt, &loss, NULL), GS_OK);
    fill(&b, 4 * N + first, n, g_tables, g_ntables, 11);
    CHECK_ST(gs_dlrm_dist_train_step(d, &b, &opt, &loss, NULL), GS_OK);
    CHECK(gs_dlrm_dist_train_step_next(d, &b, &b, &opt, &loss, NULL) == GS_ERR_INVALID_ARG,
          "a batch sent ahead of itself was accepted");
  }
  gs_dlrm_batch_free(&a);
  gs_dlrm_batch_free(&b);
  gs_dlrm_dist_destroy(d);
  gs_shard_plan_free(p);
  end_case();
}

static void bad_id(void) {
  begin_case("an id out of range on one rank, %d ranks", g_size);
  gs_shard_plan *p = NULL;
  size_t first = 0, n = local_n(g_rank), N = global_n(g_size, &first);
  gs_dlrm_dist *d = tw_model(&p);
  gs_dlrm_batch b;
  CHECK_ST(gs_dlrm_batch_alloc(&b, n, 4, g_ntables, 3 * n), GS_OK);
  gs_dlrm_optim opt = {0.1f, {GS_EMBED_ROWWISE_ADAGRAD, 0.05f, 1e-8f}};
  if (d) {
    fill(&b, first, n, g_tables, g_ntables, 11);
    int bad = g_size - 1;
    if (g_rank == bad) plant_bad_id(&b, n);
    size_t nmlp;
    float *w = gs_dlrm_mlp_weights(gs_dlrm_dist_model(d), &nmlp);
    float *before = malloc(nmlp * sizeof(float));
    memcpy(before, w, nmlp * sizeof(float));
    double loss;
    gs_status st = gs_dlrm_dist_train_step(d, &b, &opt, &loss, NULL);
    CHECK(st == GS_ERR_INVALID_ARG, "expected GS_ERR_INVALID_ARG, got %s", gs_strerror(st));
    const char *msg = gs_last_error();
    char want[64];
    snprintf(want, sizeof want, "sample %zu", first + 2);
    if (g_rank == bad) {
      CHECK(strstr(msg, "'C4'") && strstr(msg, "id 300") && strstr(msg, "out of range"),
            "the failing rank's message: %s", msg);
    } else {
      char who[32];
      snprintf(who, sizeof who, "rank %d", bad);
      CHECK(strstr(msg, who) && strstr(msg, "'C4'") && strstr(msg, "id 300"),
            "another rank's message does not name rank %d, the table and the id: %s", bad, msg);
    }
    CHECK(memcmp(before, w, nmlp * sizeof(float)) == 0, "a refused step changed the MLPs");
    free(before);
    /* The next step runs on every rank. */
    fill(&b, N + first, n, g_tables, g_ntables, 11);
    CHECK_ST(gs_dlrm_dist_train_step(d, &b, &opt, &loss, NULL), GS_OK);
    CHECK(isfinite(loss), "loss %g after the refused step", loss);
    /* A batch larger than the model's on one rank: refused everywhere. */
    b.n = g_rank == 0 ? n + 1 : n;
    if (g_rank == 0) b.max_n = n + 1; /* lie only about the count */
    gs_status st2 = gs_dlrm_dist_forward(d, &b, (float[64]){0});
    CHECK(st2 == GS_ERR_INVALID_ARG, "a batch over max_batch on rank 0: got %s",
          gs_strerror(st2));
    b.n = n;
    b.max_n = n;
  }
  gs_dlrm_batch_free(&b);
  gs_dlrm_dist_destroy(d);
  gs_shard_plan_free(p);
  end_case();
}

static void bad_plan(void) {
  begin_case("a plan for another world size is refused, %d ranks", g_size);
  gs_shard_config cfg = {.ranks = g_size + 1, .ranks_per_node = 1, .batch = 64,
                         .wire_elem_bytes = 4, .force = GS_SHARD_TW, .mem_cap = 0};
  gs_cost_preset("1gbit", &cfg.net);
  cfg.lookup.alpha = 2e-8;
  cfg.lookup.beta = 1e-10;
  gs_shard_plan *p = NULL;
  CHECK_ST(gs_shard_plan_make(g_tables, g_ntables, &cfg, &p), GS_OK);
  gs_dlrm_config mc = model_config(g_tables, g_ntables, 16);
  gs_dlrm_dist *d = NULL;
  /* Only rank 0 holds the wrong plan: every rank must fail. */
  gs_shard_plan *good = NULL;
  CHECK_ST(make_plan(g_tables, g_ntables, GS_SHARD_TW, 1, &good), GS_OK);
  gs_status st = gs_dlrm_dist_create(&mc, g_rank == 0 ? p : good, g_comm, &d);
  CHECK(st != GS_OK && d == NULL, "create with rank 0's plan for %d ranks: %s", g_size + 1,
        gs_strerror(st));
  if (g_rank != 0)
    CHECK(strstr(gs_last_error(), "rank 0") != NULL, "message does not name rank 0: %s",
          gs_last_error());
  gs_dlrm_dist_destroy(d);
  gs_shard_plan_free(p);
  gs_shard_plan_free(good);
  end_case();
}

/* The MLP gradients through the engine: each policy trains the
 * single-process model (equivalence, dense dp tables included, whose
 * gradients are engine tensors too); wfbp's fixed groups give bitwise
 * repeatable runs; a policy the engine refuses is refused on every rank and
 * leaves the model training as before. */
static void engine_policies(const gs_dlrm_optim *opt) {
  const char *pols[] = {"wfbp", "single", "mgwfbp", "auto"};
  for (size_t k = 0; k < sizeof pols / sizeof pols[0]; k++) {
    g_policy = pols[k];
    char name[64];
    snprintf(name, sizeof name, "tw, MLP gradients by the engine (%s)", pols[k]);
    equivalence(name, g_tables, g_ntables, GS_SHARD_TW, 1, opt, NULL);
    snprintf(name, sizeof name, "dp, small tables by the engine (%s)", pols[k]);
    equivalence(name, g_tables, 2, GS_SHARD_DP, 1, opt, NULL);
  }
  g_policy = "wfbp";
  equivalence("auto plan, engine (wfbp)", g_tables, g_ntables, -1, 1, opt, NULL);

  /* Policy "auto" (above: it trains the one-process model through the
   * switch) decides after step 22, from both ways' times, the same on
   * every rank; the policies that name a way never choose. */
  const char *ways[] = {"auto", "wfbp", "fused"};
  for (size_t k = 0; k < sizeof ways / sizeof ways[0]; k++) {
    begin_case("MLP policy %s: its choice, %d ranks", ways[k], g_size);
    g_policy = ways[k];
    run_out o = {0};
    gs_shard_plan *p = NULL;
    CHECK_ST(make_plan(g_tables, g_ntables, GS_SHARD_TW, 1, &p), GS_OK);
    if (p && run_dist(g_tables, g_ntables, p, opt, GS_DLRM_A2A_FP32, &o) == 0) {
      const gs_dlrm_mlp_choice *c = &o.choice;
      if (k == 0) {
        CHECK(c->active && c->decided && c->step == 22 && c->fused_ms > 0 &&
                  c->engine_ms > 0 && c->plan[0] != 0 &&
                  c->engine == (c->engine_ms < 0.98 * c->fused_ms),
              "choice: active %d decided %d after step %llu, fused %.3f ms, engine %.3f ms "
              "(%s), engine kept %d", c->active, c->decided, (unsigned long long)c->step,
              c->fused_ms, c->engine_ms, c->plan, c->engine);
        double mine[3] = {c->engine, c->fused_ms, c->engine_ms}, lo[3], hi[3];
        CHECK_ST(gs_allreduce(g_comm, mine, lo, 3, GS_F64, GS_MIN, GS_ALGO_AUTO), GS_OK);
        CHECK_ST(gs_allreduce(g_comm, mine, hi, 3, GS_F64, GS_MAX, GS_ALGO_AUTO), GS_OK);
        CHECK(memcmp(lo, hi, sizeof lo) == 0,
              "the ranks differ: engine kept %g-%g, fused %g-%g ms, engine %g-%g ms", lo[0],
              hi[0], lo[1], hi[1], lo[2], hi[2]);
        if (g_rank == 0)
          printf("  auto on %d ranks: fused %.2f ms, engine (%s) %.2f ms: %s kept\n", g_size,
                 c->fused_ms, c->plan, c->engine_ms, c->engine ? "the engine" : "fused");
      } else {
        CHECK(!c->active && !c->decided, "policy %s: a choice (active %d, decided %d)",
              ways[k], c->active, c->decided);
      }
    }
    run_out_free(&o);
    gs_shard_plan_free(p);
    end_case();
  }

  begin_case("engine (wfbp): three runs bitwise identical, %d ranks", g_size);
  gs_shard_plan *p = NULL;
  CHECK_ST(make_plan(g_tables, g_ntables, GS_SHARD_RW, 1, &p), GS_OK);
  run_out o[3];
  memset(o, 0, sizeof o);
  for (int k = 0; k < 3 && p; k++) run_dist(g_tables, g_ntables, p, opt, GS_DLRM_A2A_FP32, &o[k]);
  for (int k = 1; k < 3 && p; k++) {
    CHECK(memcmp(o[k].loss, o[0].loss, sizeof o[0].loss) == 0, "run %d's losses differ", k);
    CHECK(o[k].nmlp == o[0].nmlp && memcmp(o[k].mlp, o[0].mlp, o[0].nmlp * 4) == 0,
          "run %d's MLP weights differ", k);
  }
  for (int k = 0; k < 3; k++) run_out_free(&o[k]);
  end_case();
  g_policy = NULL;

  begin_case("engine: a policy it refuses, %d ranks", g_size);
  if (p) {
    size_t n = local_n(g_rank);
    gs_dlrm_config mc = model_config(g_tables, g_ntables, n);
    gs_dlrm_dist *d = NULL;
    CHECK_ST(gs_dlrm_dist_create(&mc, p, g_comm, &d), GS_OK);
    if (d) {
      gs_status st = gs_dlrm_dist_set_mlp_policy(d, "wfbq");
      CHECK(st != GS_OK && strstr(gs_last_error(), "wfbq") != NULL,
            "policy wfbq: status %d, message '%s'", st, gs_last_error());
      /* Still a working model, summing fused. */
      gs_dlrm_batch b;
      CHECK_ST(gs_dlrm_batch_alloc(&b, n, 4, g_ntables, 3 * n), GS_OK);
      size_t first = 0;
      global_n(g_size, &first);
      fill(&b, first, n, g_tables, g_ntables, 11);
      double l;
      CHECK_ST(gs_dlrm_dist_train_step(d, &b, opt, &l, NULL), GS_OK);
      gs_dlrm_batch_free(&b);
      gs_dlrm_dist_destroy(d);
    }
  }
  gs_shard_plan_free(p);
  end_case();
}

static void precision(void) {
  begin_case("fp16 and bf16 pooled all-to-alls, %d ranks", g_size);
  gs_shard_plan *p = NULL;
  CHECK_ST(make_plan(g_tables, g_ntables, GS_SHARD_TW, 1, &p), GS_OK);
  gs_dlrm_optim opt = {0.1f, {GS_EMBED_ROWWISE_ADAGRAD, 0.05f, 1e-8f}};
  run_out o[3];
  memset(o, 0, sizeof o);
  gs_dlrm_a2a_precision pr[3] = {GS_DLRM_A2A_FP32, GS_DLRM_A2A_FP16, GS_DLRM_A2A_BF16};
  for (int k = 0; k < 3 && p; k++) run_dist(g_tables, g_ntables, p, &opt, pr[k], &o[k]);
  /* The mean loss of the last half of the run: one step's batch is small
   * and its loss noisy. */
  double mean[3] = {0, 0, 0};
  for (int k = 0; k < 3; k++)
    for (int s = STEPS / 2; s < STEPS; s++) mean[k] += o[k].loss[s] / (STEPS - STEPS / 2);
  for (int k = 1; k < 3 && p; k++) {
    double rel = fabs(mean[k] - mean[0]) / mean[0];
    CHECK(rel < 0.02, "%s: mean loss of the last %d steps %.6f vs fp32's %.6f",
          k == 1 ? "fp16/bf16" : "bf16", STEPS - STEPS / 2, mean[k], mean[0]);
    if (g_rank == 0)
      printf("  %s: mean loss of the last %d steps %.6f (fp32 %.6f)\n",
             k == 1 ? "fp16 forward, bf16 backward" : "bf16", STEPS - STEPS / 2, mean[k],
             mean[0]);
  }
  for (int k = 0; k < 3; k++) run_out_free(&o[k]);
  gs_shard_plan_free(p);
  end_case();
}

/* A Criteo file of n lines, the same on every rank (its own copy): feature
 * t's value on line i drawn from a Zipf-like set of (t + 3) * 7 values, an
 * empty field every 11th; line bad_at (0-based; < 0: none) has a field
 * that is no hex value. */
static void criteo_file(const char *path, int n, int bad_at) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL, "cannot write %s", path);
  if (f == NULL) return;
  uint64_t x = 7;
  for (int i = 0; i < n; i++) {
    fprintf(f, "%d", i % 3 == 0);
    for (int d = 0; d < GS_CRITEO_DENSE; d++) fprintf(f, "\t%d", (i + d) % 9);
    for (int t = 0; t < GS_CRITEO_SPARSE; t++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      uint64_t u = (x >> 33) % 1000, m = (uint64_t)(t + 3) * 7;
      uint64_t v = (u * u) / (1000000 / m + 1); /* small values more often */
      if (i == bad_at && t == 4) fprintf(f, "\tzz");
      else if ((i + t) % 11 == 0) fprintf(f, "\t");
      else fprintf(f, "\t%" PRIx64, (uint64_t)(v * 0x9e3779b1ull + (uint64_t)t));
    }
    fprintf(f, "\n");
  }
  fclose(f);
}

/* The vocabulary over the ranks and one process's, compared: every
 * feature's counts and every value's id; the kept values' count (*kept). */
static void same_vocab(const char *path, size_t limit, uint64_t threshold, const char *what,
                       size_t *kept) {
  gs_criteo_vocab *one = NULL, *dist = NULL;
  CHECK_ST(gs_criteo_vocab_build(path, limit, threshold, &one), GS_OK);
  CHECK_ST(gs_criteo_vocab_build_comm(path, limit, threshold, g_comm, &dist), GS_OK);
  *kept = 0;
  if (one == NULL || dist == NULL) {
    gs_criteo_vocab_free(one);
    gs_criteo_vocab_free(dist);
    return;
  }
  for (int t = 0; t < GS_CRITEO_SPARSE; t++) {
    size_t d1, k1, l1, d2, k2, l2;
    gs_criteo_vocab_stats(one, t, &d1, &k1, &l1);
    gs_criteo_vocab_stats(dist, t, &d2, &k2, &l2);
    CHECK(d1 == d2 && k1 == k2 && l1 == l2, "%s, limit %zu, threshold %" PRIu64 ", C%d: "
          "distinct %zu/%zu, kept %zu/%zu, lines %zu/%zu (one process/ranks)", what, limit,
          threshold, t + 1, d1, d2, k1, k2, l1, l2);
    CHECK(gs_criteo_vocab_rows(one, t) == gs_criteo_vocab_rows(dist, t), "%s: C%d's rows", what,
          t + 1);
    *kept += k1;
    /* every value the file can hold, and some it does not */
    for (uint64_t v = 0; v < 200; v++) {
      char hex[32];
      snprintf(hex, sizeof hex, "%" PRIx64, (uint64_t)(v * 0x9e3779b1ull + (uint64_t)t));
      uint64_t a = gs_criteo_vocab_id(one, t, hex), b = gs_criteo_vocab_id(dist, t, hex);
      if (a != b) {
        fail("%s, limit %zu, threshold %" PRIu64 ", C%d: value %s is id %" PRIu64
             " in one process, %" PRIu64 " over the ranks", what, limit, threshold, t + 1, hex,
             a, b);
        break;
      }
    }
  }
  gs_criteo_vocab_free(one);
  gs_criteo_vocab_free(dist);
}

/* path's bytes, gzip-compressed, into gz. */
static void gzip_copy(const char *path, const char *gz) {
  FILE *in = fopen(path, "rb");
  gzFile out = gzopen(gz, "wb");
  CHECK(in != NULL && out != NULL, "cannot copy %s to %s", path, gz);
  char buf[4096];
  size_t n;
  while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
    CHECK(gzwrite(out, buf, (unsigned)n) == (int)n, "gzwrite %s", gz);
  if (in) fclose(in);
  if (out) gzclose(out);
}

/* The vocabulary counted over the ranks is the one process's: a plain file
 * (each rank the lines that start in its byte range; with a line limit the
 * bytes before it split again) with limits of 220 and 5 lines of 300 and
 * without, at thresholds 1 and 3, and a bad line past the limit unread; without its last newline; of fewer lines
 * than ranks; gzip-compressed (each rank every P-th line of the stream). A
 * bad line counted by one rank fails every rank with its words; the last
 * rank reading another file (other bytes) fails every rank, naming it. */
static void vocab_dist(void) {
  begin_case("the Criteo vocabulary over %d ranks", g_size);
  const size_t mem0 = gs_mem_used();
  char path[128], gz[140];
  snprintf(path, sizeof path, "/tmp/gs_vocab_dist_%d_%d.tsv", (int)getpid(), g_rank);
  snprintf(gz, sizeof gz, "%s.gz", path);
  criteo_file(path, 300, -1);
  const size_t limits[3] = {0, 220, 5};
  const uint64_t thresholds[2] = {1, 3};
  for (int li = 0; li < 3; li++)
    for (int ti = 0; ti < 2; ti++) {
      size_t kept = 0;
      same_vocab(path, limits[li], thresholds[ti], "plain", &kept);
      /* thresholds that keep some values and not others */
      CHECK(kept > 0 || limits[li] < 10, "no value kept at threshold %" PRIu64, thresholds[ti]);
    }
  size_t kept;
  gzip_copy(path, gz);
  same_vocab(gz, 0, 3, "gzip", &kept);
  same_vocab(gz, 220, 1, "gzip", &kept);
  unlink(gz);
  /* the last newline cut off: the last line is still a line */
  criteo_file(path, 300, -1);
  struct stat sb;
  CHECK(stat(path, &sb) == 0 && truncate(path, sb.st_size - 1) == 0, "cutting %s", path);
  same_vocab(path, 0, 1, "no last newline", &kept);
  criteo_file(path, 2, -1);
  same_vocab(path, 0, 1, "two lines", &kept);
  /* Line 2 (0-based 1, rank 0's range's second or rank 1's line) is bad:
   * every rank fails with that line named. */
  criteo_file(path, 300, 1);
  gs_criteo_vocab *bad = NULL;
  gs_status st = gs_criteo_vocab_build_comm(path, 0, 2, g_comm, &bad);
  CHECK(st == GS_ERR_PARSE && bad == NULL && strstr(gs_last_error(), "line 2") != NULL &&
            strstr(gs_last_error(), "zz") != NULL,
        "a bad line 2: status %d, '%s'", (int)st, gs_last_error());
  gs_criteo_vocab_free(bad);
  /* a bad line in the last rank's range: named by its number in the file */
  criteo_file(path, 300, 290);
  st = gs_criteo_vocab_build_comm(path, 0, 2, g_comm, &bad);
  CHECK(st == GS_ERR_PARSE && bad == NULL && strstr(gs_last_error(), "line 291") != NULL,
        "a bad line 291: status %d, '%s'", (int)st, gs_last_error());
  gs_criteo_vocab_free(bad);
  /* beyond the line limit (220): not read as a training line */
  CHECK_ST(gs_criteo_vocab_build_comm(path, 220, 2, g_comm, &bad), GS_OK);
  gs_criteo_vocab_free(bad);
  bad = NULL;
  if (g_size > 1) {
    criteo_file(path, g_rank == g_size - 1 ? 301 : 300, -1);
    st = gs_criteo_vocab_build_comm(path, 0, 2, g_comm, &bad);
    char who[32];
    snprintf(who, sizeof who, "rank %d sees", g_size - 1);
    CHECK(st == GS_ERR_MISMATCH && bad == NULL && strstr(gs_last_error(), who) != NULL &&
              strstr(gs_last_error(), "the same file") != NULL,
          "the last rank's file longer: status %d, '%s'", (int)st, gs_last_error());
    gs_criteo_vocab_free(bad);
  }
  unlink(path);
  CHECK(gs_mem_used() == mem0, "%zu bytes held after the vocabularies were freed",
        gs_mem_used() - mem0);
  end_case();
}

int main(int argc, char **argv) {
  mrt_init(&argc, &argv);
  gs_dlrm_optim adagrad = {0.1f, {GS_EMBED_ROWWISE_ADAGRAD, 0.05f, 1e-8f}};
  gs_dlrm_optim sgd = {0.1f, {GS_EMBED_SGD, 0.5f, 0}};
  tables_match("tw", GS_SHARD_TW, &adagrad, 1);
  tables_match("tw", GS_SHARD_TW, &adagrad, 3);
  tables_match("rw", GS_SHARD_RW, &adagrad, 3);
  tables_match("dp", GS_SHARD_DP, &adagrad, 3);
  equivalence("tw", g_tables, g_ntables, GS_SHARD_TW, 1, &adagrad, NULL);
  equivalence("rw", g_tables, g_ntables, GS_SHARD_RW, 1, &adagrad, NULL);
  equivalence("dp", g_tables, g_ntables, GS_SHARD_DP, 1, &adagrad, NULL);
  equivalence("cw (SGD)", g_tables, g_ntables, GS_SHARD_CW, 1, &sgd, NULL);
  /* Column blocks with row-wise Adagrad: the blocks' sums of squares
   * exchanged, each block's accumulator the whole row's. */
  tables_match("cw", GS_SHARD_CW, &adagrad, 3);
  equivalence("cw", g_tables, g_ntables, GS_SHARD_CW, 1, &adagrad, NULL);
  g_ragged = 1;
  tables_match("cw, bands split at other rows", GS_SHARD_CW, &adagrad, 3);
  equivalence("cw, bands split at other rows", g_tables, g_ntables, GS_SHARD_CW, 1, &adagrad,
              NULL);
  g_ragged = 0;
  equivalence("rw (SGD)", g_tables, g_ntables, GS_SHARD_RW, 1, &sgd, NULL);
  if (g_size % 2 == 0) equivalence("twrw", g_tables, g_ntables, GS_SHARD_TWRW, 2, &adagrad, NULL);
  equivalence("auto", g_tables, g_ntables, -1, 1, &adagrad, NULL);
  equivalence("tw, one table", g_tables + 4, 1, GS_SHARD_TW, 1, &adagrad, NULL);
  dp_paths(&adagrad);
  bitwise();
  prefetch_same();
  bad_id();
  bad_id_ahead();
  bad_plan();
  precision();
  engine_policies(&adagrad);
  /* DCN-v2's cross layers: their tensors in the MLPs' all-reduce, or handed
   * to the engine between the top MLP's and the bottom's. */
  g_inter = GS_DLRM_DCN;
  equivalence("dcn, tw", g_tables, g_ntables, GS_SHARD_TW, 1, &adagrad, NULL);
  equivalence("dcn, rw", g_tables, g_ntables, GS_SHARD_RW, 1, &adagrad, NULL);
  g_policy = "wfbp";
  equivalence("dcn, tw, MLP gradients by the engine (wfbp)", g_tables, g_ntables, GS_SHARD_TW,
              1, &adagrad, NULL);
  g_policy = NULL;
  g_inter = GS_DLRM_DOT;
  vocab_dist();
  return mrt_finish();
}
