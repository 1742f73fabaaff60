/*
 * The sharding planner (gradsync/embed.h):
 *   - the Criteo presets (26 tables, dims 16/64/128, scaled);
 *   - plans for the presets and random table sets on 2-64 ranks, every
 *     sharding forced and auto: valid (gs_shard_plan_check: every row and
 *     column owned once), and auto's worst rank within 1.10x the mean or
 *     a rank's fixed load plus the largest shard it could not split (of
 *     fewer than 16 columns), never worse than contiguous
 *     slicing of the tables (the DLRM reference's placement) nor than
 *     TorchRec's greedy proposer and partitioner (gs_shard_torchrec_max);
 *   - fewer tables than ranks, fewer rows than ranks (empty row shards);
 *   - a memory cap respected, and a cap no table fits refused by name;
 *   - save and load: the same shards; a plan for other tables, another world
 *     size or with a row owned twice refused;
 *   - row-wise Adagrad's sums of squares priced on column blocks only;
 *   - a bag's own cost: every bag a shard walks (rw blocks all of them);
 *   - 1,000 tables on 64 ranks planned in under a second;
 *   - gs_embed_calibrate gives positive, finite costs and the caches' size;
 *   - the cache model: Che's characteristic time against its closed form,
 *     a burst's repeats as the only hits below a step, skew raising the
 *     hits, the hit and miss prices at the extremes, a bag among half empty
 *     ones, a rank's shards sharing its cache; the planner's bounds and
 *     speed with it on.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlrm_internal.h"
#include "gradsync.h"

#define TEST_RNG_SEED 4242
#include "../common/test_lookup.h"
#include "../common/test_rng.h"

static gs_shard_config config(int ranks, int per_node) {
  gs_shard_config c;
  memset(&c, 0, sizeof c);
  c.ranks = ranks;
  c.ranks_per_node = per_node;
  c.batch = 8192;
  c.wire_elem_bytes = 4;
  c.force = -1;
  /* The textbook 1 Gbit/s link these bounds were written for: one alpha
   * and beta for every algorithm and cluster size (the calibrated 1gbit
   * preset's per-cluster rows leave kaggle on 16 ranks 13% above the
   * balance bound of check_auto: worst rank 0.0183 s against 0.0162). */
  assert_int_equal(gs_cost_preset("1gbit", &c.net), GS_OK);
  c.net.ncalib = 0;
  c.net.alpha = 100e-6;
  c.net.beta = 8.0 / (0.85 * 1e9);
  c.lookup = test_lookup(); /* about what gs_embed_calibrate measures on the 2-core hosts */
  return c;
}

static int descending(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x < y) - (x > y);
}

static void check_auto(const gs_embed_spec *t, int n, const gs_shard_config *cfg,
                       const char *what) {
  gs_shard_plan *p = NULL;
  if (gs_shard_plan_make(t, n, cfg, &p) != GS_OK)
    fail_msg("%s: %s", what, gs_last_error());
  if (gs_shard_plan_check(p, t, n, cfg->mem_cap) != GS_OK)
    fail_msg("%s: invalid plan: %s", what, gs_last_error());
  double mx, mean, largest = 0;
  gs_shard_plan_balance(p, &mx, &mean);
  /* The planner splits a whole table or block in two while its columns
   * allow blocks of 8: the shards it cannot split bound the balance. */
  for (size_t j = 0; j < p->nshards; j++) {
    size_t w = p->shards[j].col_hi - p->shards[j].col_lo;
    if ((p->shards[j].kind == GS_SHARD_TW || p->shards[j].kind == GS_SHARD_CW) &&
        (w < 16 || w % 2 != 0))
      largest = fmax(largest, p->shards[j].est_s);
  }
  /* A rank's fixed shards (rw, dp) count too: the bound is the mean, or the
   * largest movable shard on top of a rank's fixed load. */
  double fixed_max = 0;
  for (int r = 0; r < p->ranks; r++) {
    double f = 0;
    for (size_t j = 0; j < p->nshards; j++)
      if (p->shards[j].rank == r && p->shards[j].kind != GS_SHARD_TW &&
          p->shards[j].kind != GS_SHARD_CW)
        f += p->shards[j].est_s;
    fixed_max = fmax(fixed_max, f);
  }
  /* A lower bound on the best plan besides the mean: shards too coarse to
   * spread evenly. Of the j P + 1 largest movable shards some rank holds
   * j + 1, so the best plan's busiest rank carries at least the j + 1
   * smallest of them (the pigeonhole). terabyte on 64 ranks, 4 a node:
   * about 145 column blocks of 5.3 ms over 64 ranks: some rank takes 3,
   * 15.9 ms, where 1.10 x the mean is 13.2 ms. */
  double *mv = calloc(p->nshards + 1, sizeof *mv);
  assert_non_null(mv);
  size_t k = 0;
  for (size_t j = 0; j < p->nshards; j++)
    if (p->shards[j].kind == GS_SHARD_TW || p->shards[j].kind == GS_SHARD_CW)
      mv[k++] = p->shards[j].est_s;
  qsort(mv, k, sizeof *mv, descending);
  double pigeon = 0;
  size_t P = (size_t)p->ranks;
  for (size_t j = 1; j * P + 1 <= k; j++) {
    double sum = 0;
    for (size_t i = j * P - j; i <= j * P; i++) sum += mv[i];
    pigeon = fmax(pigeon, sum);
  }
  free(mv);
  double bound = fmax(1.10 * fmax(mean, pigeon), fixed_max + largest);
  if (mx > bound * (1 + 1e-9)) {
    for (int r = 0; r < p->ranks; r++) {
      if (p->rank_s[r] < mx * (1 - 1e-12)) continue;
      for (size_t j = 0; j < p->nshards; j++)
        if (p->shards[j].rank == r)
          printf("  busiest rank %d: table %d (%zu x %zu, %s) rows %zu-%zu cols %zu-%zu: %.4g s\n",
                 r, p->shards[j].table, t[p->shards[j].table].rows, t[p->shards[j].table].dim,
                 gs_shard_kind_name(p->shards[j].kind), p->shards[j].row_lo, p->shards[j].row_hi,
                 p->shards[j].col_lo, p->shards[j].col_hi, p->shards[j].est_s);
    }
    fail_msg("%s: worst rank %.4g s, mean %.4g, largest shard %.4g: above %.4g", what, mx,
             mean, largest, bound);
  }
  double cont = gs_shard_contiguous_max(t, n, cfg);
  if (mx > cont * (1 + 1e-9))
    fail_msg("%s: worst rank %.4g s is worse than contiguous slicing's %.4g", what, mx, cont);
  double tr = gs_shard_torchrec_max(t, n, cfg);
  if (!isfinite(tr) && cfg->mem_cap <= 0) fail_msg("%s: TorchRec's rules found no plan", what);
  if (mx > tr * (1 + 1e-9))
    fail_msg("%s: worst rank %.4g s is worse than TorchRec's greedy rules' %.4g", what, mx, tr);
  /* TorchRec's plan is a plan: no rank below the mean of ours is a bound
   * it cannot beat (the same total work at best: its options split no more). */
  if (tr < mean * (1 - 1e-9) && cfg->force < 0)
    fail_msg("%s: TorchRec's worst rank %.4g s below the mean %.4g", what, tr, mean);
  for (int i = 0; i < n; i++)
    if (strlen(p->why[i]) < 4) fail_msg("%s: table %d has no reason", what, i);
  gs_shard_plan_free(p);
}

static void test_presets(void **state) {
  (void)state;
  gs_embed_spec t[32];
  int n = 0;
  assert_int_equal(gs_embed_preset("kaggle", 1.0, t, 32, &n), GS_OK);
  assert_int_equal(n, 26);
  assert_int_equal(t[2].rows, 10131227);
  assert_int_equal(t[0].dim, 16);
  assert_int_equal(gs_embed_preset("mlperf", 0.01, t, 32, &n), GS_OK);
  assert_int_equal(t[0].dim, 128);
  assert_int_equal(t[5].rows, 1); /* 3 rows scaled: at least one */
  assert_int_equal(gs_embed_preset("criteo", 1.0, t, 32, &n), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "kaggle, terabyte or mlperf"));
  assert_int_equal(gs_embed_preset("kaggle", 0, t, 32, &n), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_embed_preset("kaggle", 1.0, t, 8, &n), GS_ERR_INVALID_ARG);
}

static void test_auto_presets(void **state) {
  (void)state;
  const char *names[] = {"kaggle", "terabyte", "mlperf"};
  const int ranks[] = {2, 4, 8, 16, 64};
  gs_embed_spec t[32];
  int n;
  char what[96];
  for (int k = 0; k < 3; k++)
    for (size_t r = 0; r < sizeof ranks / sizeof *ranks; r++) {
      assert_int_equal(gs_embed_preset(names[k], 0.1, t, 32, &n), GS_OK);
      gs_shard_config cfg = config(ranks[r], ranks[r] >= 8 ? 4 : 1);
      snprintf(what, sizeof what, "%s on %d ranks", names[k], ranks[r]);
      check_auto(t, n, &cfg, what);
    }
}

static void test_random_sets(void **state) {
  (void)state;
  static gs_embed_spec t[300];
  char what[96];
  for (int trial = 0; trial < 12; trial++) {
    int n = 5 + (int)(rnd() % 200), P = 4 << (trial % 5); /* 4..64 */
    for (int i = 0; i < n; i++) {
      size_t rows = (size_t)pow(10.0, 1 + (double)(rnd() % 6000) / 1000.0); /* 10..1e7 */
      size_t dims[] = {16, 32, 64, 128};
      t[i] = (gs_embed_spec){"t", rows, dims[rnd() % 4], 1.0 + (double)(rnd() % 40)};
    }
    gs_shard_config cfg = config(P, P >= 8 ? 4 : 2);
    snprintf(what, sizeof what, "random set %d: %d tables on %d ranks", trial, n, P);
    check_auto(t, n, &cfg, what);
  }
}

static void test_forced_and_edges(void **state) {
  (void)state;
  /* 3 tables (fewer than 8 ranks), one of 5 rows (fewer than the ranks). */
  gs_embed_spec t[3] = {{"small", 5, 16, 2}, {"mid", 1000, 64, 10}, {"big", 200000, 32, 20}};
  for (int k = -1; k < GS_SHARD_KIND_COUNT; k++) {
    gs_shard_config cfg = config(8, 4);
    cfg.force = k;
    gs_shard_plan *p = NULL;
    if (gs_shard_plan_make(t, 3, &cfg, &p) != GS_OK)
      fail_msg("forced %d: %s", k, gs_last_error());
    if (gs_shard_plan_check(p, t, 3, 0) != GS_OK)
      fail_msg("forced %s: invalid: %s", k < 0 ? "auto" : gs_shard_kind_name(k), gs_last_error());
    /* A forced sharding is every table's (the balancing pass once split
     * forced tw tables into column blocks). */
    for (int i = 0; k >= 0 && i < 3; i++)
      if ((int)p->kind[i] != k)
        fail_msg("forced %s: table %d is %s", gs_shard_kind_name(k), i,
                 gs_shard_kind_name(p->kind[i]));
    if (k == GS_SHARD_RW) {
      int empty = 0;
      for (size_t j = 0; j < p->nshards; j++)
        empty += p->shards[j].table == 0 && p->shards[j].row_lo == p->shards[j].row_hi;
      assert_int_equal(empty, 3); /* 5 rows over 8 ranks */
    }
    gs_shard_plan_free(p);
  }
  /* Kaggle at 1/100 on 8 ranks: whole tables leave a rank 1.23x the mean,
   * which the auto plan splits; forced tw keeps every table whole. */
  gs_embed_spec kg[32];
  int nk = 0;
  assert_int_equal(gs_embed_preset("kaggle", 0.01, kg, 32, &nk), GS_OK);
  gs_shard_config kc = config(8, 1);
  kc.batch = 2048;
  kc.force = GS_SHARD_TW;
  gs_shard_plan *kp = NULL;
  if (gs_shard_plan_make(kg, nk, &kc, &kp) != GS_OK) fail_msg("kaggle tw: %s", gs_last_error());
  assert_int_equal(kp->nshards, (size_t)nk);
  for (int i = 0; i < nk; i++) assert_int_equal(kp->kind[i], GS_SHARD_TW);
  gs_shard_plan_free(kp);
  /* Tables of fewer rows than ranks, row-wise: the rows spread over the
   * ranks, not every table's on the last (8 tables of one row and 8 of 3
   * on 4 ranks: 8 rows each). */
  gs_embed_spec few[16];
  for (int i = 0; i < 16; i++) few[i] = (gs_embed_spec){"few", i < 8 ? 1 : 3, 16, 1};
  gs_shard_config fc = config(4, 1);
  fc.force = GS_SHARD_RW;
  gs_shard_plan *fp = NULL;
  if (gs_shard_plan_make(few, 16, &fc, &fp) != GS_OK) fail_msg("few rows: %s", gs_last_error());
  assert_int_equal(gs_shard_plan_check(fp, few, 16, 0), GS_OK);
  size_t rows[4] = {0};
  for (size_t j = 0; j < fp->nshards; j++)
    rows[fp->shards[j].rank] += fp->shards[j].row_hi - fp->shards[j].row_lo;
  for (int r = 0; r < 4; r++)
    if (rows[r] != 8) fail_msg("few rows: rank %d holds %zu rows of 32 (want 8 each)", r, rows[r]);
  gs_shard_plan_free(fp);
  int kind;
  assert_int_equal(gs_shard_kind_parse("twrw", &kind), GS_OK);
  assert_int_equal(kind, GS_SHARD_TWRW);
  assert_int_equal(gs_shard_kind_parse("auto", &kind), GS_OK);
  assert_int_equal(kind, -1);
  assert_int_equal(gs_shard_kind_parse("row", &kind), GS_ERR_PARSE);
}

/* Row-wise Adagrad on column blocks: a block pays for sending its touched
 * rows' sums of squares to the row's other blocks (R (1 - e^(-I/R)) rows of
 * 4 bytes to each); whole rows and SGD pay nothing; the planner's auto plans
 * stay valid and balanced with the price on. */
static void test_row_sums(void **state) {
  (void)state;
  gs_shard_config cfg = config(4, 1);
  gs_embed_spec t = {"t", 1000, 64, 3};
  gs_shard block = {0, 0, GS_SHARD_CW, 0, 1000, 0, 16, 0, 0, 0};
  gs_shard whole = {0, 0, GS_SHARD_TW, 0, 1000, 0, 64, 0, 0, 0};
  gs_cost_shard_out plain, sums, w0, w1;
  gs_shard_price(&cfg, &t, &block, &plain);
  gs_shard_price(&cfg, &t, &whole, &w0);
  cfg.row_sums = 1;
  gs_shard_price(&cfg, &t, &block, &sums);
  gs_shard_price(&cfg, &t, &whole, &w1);
  double ids = cfg.batch * t.pooling, touched = 1000.0 * (1.0 - exp(-ids / 1000.0));
  double want = 3.0 * touched * 4.0; /* 3 other blocks of 16 columns */
  if (fabs(sums.wire_bytes - plain.wire_bytes - want) > 1e-6 * want)
    fail_msg("row sums: %.1f bytes more, expected %.1f", sums.wire_bytes - plain.wire_bytes,
             want);
  assert_true(sums.wire_s > plain.wire_s);
  assert_true(sums.lookup_s == plain.lookup_s);
  assert_true(w1.wire_bytes == w0.wire_bytes && w1.total_s == w0.total_s);
  gs_embed_spec kg[32];
  int nk = 0;
  assert_int_equal(gs_embed_preset("kaggle", 0.01, kg, 32, &nk), GS_OK);
  for (int ranks = 4; ranks <= 16; ranks *= 2) {
    gs_shard_config kc = config(ranks, 1);
    kc.batch = 2048;
    kc.row_sums = 1;
    check_auto(kg, nk, &kc, "kaggle/100 with row sums");
  }
}

static void test_memory_cap(void **state) {
  (void)state;
  gs_embed_spec t[32];
  int n;
  assert_int_equal(gs_embed_preset("kaggle", 1.0, t, 32, &n), GS_OK);
  /* The largest table is 10.1 M x 16 floats, 688 MB with its state: a cap
   * of 500 MB makes it split; every rank stays under the cap. */
  gs_shard_config cfg = config(8, 4);
  cfg.mem_cap = 500e6;
  gs_shard_plan *p = NULL;
  if (gs_shard_plan_make(t, n, &cfg, &p) != GS_OK) fail_msg("%s", gs_last_error());
  if (gs_shard_plan_check(p, t, n, cfg.mem_cap) != GS_OK) fail_msg("%s", gs_last_error());
  assert_true(p->kind[2] != GS_SHARD_TW && p->kind[2] != GS_SHARD_DP);
  for (int r = 0; r < 8; r++) assert_true(p->rank_mem[r] <= cfg.mem_cap);
  gs_shard_plan_free(p);
  /* The reference's slicing keeps that table whole: no plan under the cap
   * (it was priced all the same, and shown as a plan to beat), a finite
   * one without the cap. */
  assert_true(isinf(gs_shard_contiguous_max(t, n, &cfg)));
  cfg.mem_cap = 0;
  assert_true(isfinite(gs_shard_contiguous_max(t, n, &cfg)));
  cfg.mem_cap = 500e6;
  /* Nothing fits 1 MB: refused, naming a table and the room left. */
  cfg.mem_cap = 1e6;
  cfg.force = GS_SHARD_TW;
  assert_int_equal(gs_shard_plan_make(t, n, &cfg, &p), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "fits on no rank"));
  assert_non_null(strstr(gs_last_error(), "the most room left is"));
  assert_null(p);
}

/* A plan fits whenever one of auto's candidates does: a table that whole
 * fits no rank's room left (though it fits the cap) goes row-wise, and so
 * does a replica that takes a rank over the cap; every rank within the
 * cap. With no room for even row-wise tables, the error names a rank's
 * memory, not only the cap. */
static void check_auto_fits(const char *preset, double scale, int ranks, double cap) {
  gs_embed_spec t[32];
  int n;
  assert_int_equal(gs_embed_preset(preset, scale, t, 32, &n), GS_OK);
  gs_shard_config cfg = config(ranks, 1);
  cfg.lookup = (gs_cost_lookup){.alpha = 1e-8, .beta = 1e-10};
  cfg.row_sums = 1;
  cfg.mem_cap = cap;
  gs_shard_plan *p = NULL;
  if (gs_shard_plan_make(t, n, &cfg, &p) != GS_OK)
    fail_msg("%s x %g on %d ranks under %g bytes: %s", preset, scale, ranks, cap,
             gs_last_error());
  if (gs_shard_plan_check(p, t, n, cfg.mem_cap) != GS_OK) fail_msg("%s", gs_last_error());
  for (int r = 0; r < ranks; r++) assert_true(p->rank_mem[r] <= cap);
  gs_shard_plan_free(p);
}

static void test_memory_cap_fallback(void **state) {
  (void)state;
  /* gradsync shard --tables kaggle --scale 0.001 --ranks 3 --mem-cap 800K:
   * all-rw needs 0.8 MB a rank. */
  check_auto_fits("kaggle", 0.001, 3, 800.0 * 1024);
  /* Full kaggle on 8 ranks: all-rw needs 287 MB a rank. */
  check_auto_fits("kaggle", 1.0, 8, 300.0 * 1024 * 1024);
  check_auto_fits("kaggle", 1.0, 8, 345.0 * 1024 * 1024);
  gs_embed_spec t[32];
  int n;
  assert_int_equal(gs_embed_preset("kaggle", 0.001, t, 32, &n), GS_OK);
  gs_shard_config cfg = config(3, 1);
  cfg.lookup = (gs_cost_lookup){.alpha = 1e-8, .beta = 1e-10};
  cfg.mem_cap = 100e3;
  gs_shard_plan *p = NULL;
  assert_int_equal(gs_shard_plan_make(t, n, &cfg, &p), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "holds"));
  assert_non_null(strstr(gs_last_error(), "no plan fits"));
  assert_null(p);
}

static void test_save_load(void **state) {
  (void)state;
  gs_embed_spec t[32];
  int n;
  assert_int_equal(gs_embed_preset("terabyte", 0.05, t, 32, &n), GS_OK);
  gs_shard_config cfg = config(8, 4);
  gs_shard_plan *p = NULL, *q = NULL;
  assert_int_equal(gs_shard_plan_make(t, n, &cfg, &p), GS_OK);
  char path[] = "/tmp/gs_shard_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(gs_shard_plan_save(p, t, path), GS_OK);
  if (gs_shard_plan_load(path, t, n, 8, &q) != GS_OK) fail_msg("load: %s", gs_last_error());
  assert_int_equal(q->nshards, p->nshards);
  for (size_t j = 0; j < p->nshards; j++) {
    assert_int_equal(q->shards[j].rank, p->shards[j].rank);
    assert_int_equal(q->shards[j].row_hi, p->shards[j].row_hi);
    assert_int_equal(q->shards[j].col_hi, p->shards[j].col_hi);
  }
  for (int i = 0; i < n; i++) assert_int_equal(q->kind[i], p->kind[i]);
  gs_shard_plan_free(q);
  /* Another world size; other tables. */
  assert_int_equal(gs_shard_plan_load(path, t, n, 4, &q), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "8 ranks"));
  gs_embed_spec other[32];
  memcpy(other, t, sizeof other);
  other[3].rows += 1;
  assert_int_equal(gs_shard_plan_load(path, other, n, 8, &q), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "table 3"));
  /* A row owned twice: a plan whose first rw or tw shard is duplicated. */
  p->shards[1] = p->shards[0];
  if (p->kind[p->shards[0].table] != GS_SHARD_DP) {
    assert_int_equal(gs_shard_plan_save(p, t, path), GS_OK);
    assert_int_equal(gs_shard_plan_load(path, t, n, 8, &q), GS_ERR_INVALID_ARG);
  }
  assert_int_equal(gs_shard_plan_load("/nonexistent/plan.json", t, n, 8, &q), GS_ERR_IO);
  unlink(path);
  gs_shard_plan_free(p);
}

/* Table sets from files: names owned by the result; bad tables named. */
static void test_specs_file(void **state) {
  (void)state;
  char path[] = "/tmp/gs_specs_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs("{\"tables\": [{\"name\": \"user_id\", \"rows\": 1000000, \"dim\": 64, "
        "\"pooling\": 3}, {\"name\": \"ad\", \"rows\": 10, \"dim\": 8}]}", f);
  fclose(f);
  gs_embed_spec *t = NULL;
  int n = 0;
  assert_int_equal(gs_embed_specs_load(path, &t, &n), GS_OK);
  assert_int_equal(n, 2);
  assert_string_equal(t[0].name, "user_id");
  assert_int_equal(t[0].rows, 1000000);
  assert_true(t[0].pooling == 3 && t[1].pooling == 1);
  assert_string_equal(t[1].name, "ad");
  gs_embed_specs_free(t);
  f = fopen(path, "w");
  fputs("{\"tables\": [{\"name\": \"a\", \"rows\": 5, \"dim\": 8}, "
        "{\"name\": \"b\", \"rows\": 1.5, \"dim\": 8}]}", f);
  fclose(f);
  assert_int_equal(gs_embed_specs_load(path, &t, &n), GS_ERR_PARSE);
  assert_non_null(strstr(gs_last_error(), "table 1"));
  assert_null(t);
  unlink(path);
  assert_int_equal(gs_embed_specs_load("/nonexistent/t.json", &t, &n), GS_ERR_IO);
  assert_int_equal(gs_embed_specs_load("/tmp", &t, &n), GS_ERR_IO);
}

/* The time limit of plan_1000, in the process's CPU seconds (wall time
 * failed it on a loaded host: 1.024 s of wall time for the cache model,
 * 0.5 s unloaded): the second doubled in a plain build (about 0.13
 * s measured, 0.5 s with the cache model), eight under a sanitizer, which
 * slows the planner several times: a guard against a planner gone
 * quadratic (100 times slower at 1,000 tables); the time itself is
 * printed (docs/DLRM.md: about 40 ms unloaded). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PLAN_1000_LIMIT_S 8.0
#else
#define PLAN_1000_LIMIT_S 2.0
#endif

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1,000 random tables on 64 ranks, planned (and checked) within the limit. */
static void plan_1000(const gs_shard_config *cfg, const char *how) {
  static gs_embed_spec t[1000];
  for (int i = 0; i < 1000; i++)
    t[i] = (gs_embed_spec){"t", (size_t)pow(10.0, 1 + (double)(rnd() % 6000) / 1000.0),
                           (size_t)16 << (rnd() % 4), 1.0 + (double)(rnd() % 20)};
  double t0 = gs_now(), c0 = cpu_s();
  gs_shard_plan *p = NULL;
  assert_int_equal(gs_shard_plan_make(t, 1000, cfg, &p), GS_OK);
  double secs = gs_now() - t0, cpu = cpu_s() - c0;
  assert_int_equal(gs_shard_plan_check(p, t, 1000, 0), GS_OK);
  gs_shard_plan_free(p);
  if (cpu >= PLAN_1000_LIMIT_S)
    fail_msg("1,000 tables on 64 ranks%s took %.3f s of CPU (limit %.0f s)", how, cpu,
             PLAN_1000_LIMIT_S);
  printf("1,000 tables on 64 ranks planned%s in %.1f ms (%.1f ms of CPU)\n", how, secs * 1e3,
         cpu * 1e3);
}

static void test_speed(void **state) {
  (void)state;
  gs_shard_config cfg = config(64, 8);
  plan_1000(&cfg, "");
}

/* A given lookup cost: every figure finite and >= 0, the first one that is
 * not named; zeros (no cache model) are a cost. */
static void test_lookup_check(void **state) {
  (void)state;
  gs_cost_lookup lk = test_lookup();
  assert_int_equal(gs_cost_lookup_check(&lk), GS_OK);
  lk = (gs_cost_lookup){0};
  assert_int_equal(gs_cost_lookup_check(&lk), GS_OK);
  assert_int_equal(gs_cost_lookup_check(NULL), GS_ERR_INVALID_ARG);
  static const char *names[] = {"alpha",    "beta",        "gamma",       "alpha_hit",
                                "beta_hit", "cache_bytes", "gamma_mixed", "alpha_row",
                                "beta_row", "gamma_hit"};
  enum { NF = sizeof(gs_cost_lookup) / sizeof(double) };
  assert_int_equal(sizeof names / sizeof names[0], NF);
  const double bad[] = {-1e-9, NAN, INFINITY};
  for (int k = 0; k < NF; k++)
    for (int b = 0; b < 3; b++) {
      lk = test_lookup();
      ((double *)&lk)[k] = bad[b];
      assert_int_equal(gs_cost_lookup_check(&lk), GS_ERR_INVALID_ARG);
      char want[40];
      snprintf(want, sizeof want, "lookup cost: %s (", names[k]);
      if (strstr(gs_last_error(), want) == NULL)
        fail_msg("field %d = %g: '%s' does not name %s", k, bad[b], gs_last_error(), names[k]);
    }
  /* Too large: a time of 1 ms or more (a figure in the wrong unit, as
   * --lookup 1,2 once was), a cache over 2^50 bytes; just under passes. */
  for (int k = 0; k < NF; k++) {
    int cache = k == 5;
    lk = test_lookup();
    ((double *)&lk)[k] = cache ? 1125899906842624.0 : 0.99e-3;
    assert_int_equal(gs_cost_lookup_check(&lk), GS_OK);
    ((double *)&lk)[k] = cache ? 2 * 1125899906842624.0 : 1e-3;
    assert_int_equal(gs_cost_lookup_check(&lk), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), names[k]));
  }
}

/* A plan's labels against its shards: one whole shard labelled rw on 2
 * ranks (rw is a block on every rank) or cw where the width splits is
 * refused, naming the label; columns past the width say so. twrw of one
 * shard (one rank a node) and rw or cw of one whole shard on one rank are
 * the planner's own: kept. */
static void test_plan_labels(void **state) {
  (void)state;
  gs_embed_spec t[1] = {{"a", 100, 16, 1}};
  gs_shard_config cfg = config(2, 1);
  cfg.force = GS_SHARD_TW;
  gs_shard_plan *p = NULL;
  assert_int_equal(gs_shard_plan_make(t, 1, &cfg, &p), GS_OK);
  assert_int_equal(gs_shard_plan_check(p, t, 1, 0), GS_OK);
  const struct {
    gs_shard_kind kind;
    int ranks;
    gs_status want;
  } cases[] = {{GS_SHARD_RW, 2, GS_ERR_INVALID_ARG}, {GS_SHARD_CW, 2, GS_ERR_INVALID_ARG},
               {GS_SHARD_TWRW, 2, GS_OK},            {GS_SHARD_RW, 1, GS_OK},
               {GS_SHARD_CW, 1, GS_OK}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    p->kind[0] = p->shards[0].kind = cases[c].kind;
    p->ranks = cases[c].ranks;
    p->shards[0].rank = 0;
    gs_status st = gs_shard_plan_check(p, t, 1, 0);
    if (st != cases[c].want)
      fail_msg("%s on %d ranks: %d (%s)", gs_shard_kind_name(cases[c].kind), cases[c].ranks,
               st, st ? gs_last_error() : "accepted");
    if (st != GS_OK && strstr(gs_last_error(), "is labelled") == NULL)
      fail_msg("%s: '%s' names no label", gs_shard_kind_name(cases[c].kind), gs_last_error());
  }
  p->kind[0] = p->shards[0].kind = GS_SHARD_TW;
  p->ranks = 2;
  p->shards[0].col_hi = 20;
  assert_int_equal(gs_shard_plan_check(p, t, 1, 0), GS_ERR_INVALID_ARG);
  assert_non_null(strstr(gs_last_error(), "columns 0-20 on rank 0: its columns exceed the "
                                          "table's width"));
  gs_shard_plan_free(p);
}

/* Latency of random loads over S bytes with an LRU cache of c bytes hit in
 * lc seconds and memory in lm: every load hits where S <= c, else c / S of
 * them (uniform draws); drift > 0 makes memory's latency grow by that share
 * per doubling past 8 MB (page walks, as on the 2-core hosts). */
static double lru_latency(double S, double c, double lc, double lm, double drift) {
  if (S > 8e6) lm *= pow(1 + drift, log2(S / 8e6));
  return S <= c ? lc : lm - (lm - lc) * c / S;
}

/* The calibration's cache estimate from its latencies (embed_cache_estimate):
 * the cache of a model LRU, 1 to 40 MB, found within 0.69-1.18x (the sizes
 * double: a cache just under 4/3 of one is read from the one below), also
 * with memory's latency growing 15% a doubling (the 2-core hosts: 12-18%;
 * 1.5-3.4x when the sizes up to 4x the cache counted); a noisy first size
 * ignored; no knee read as all of the sizes. */
static void test_cache_estimate(void **state) {
  (void)state;
  const double first = 512.0 * 1024;
  double lat[10];
  const double caches[] = {1e6, 2e6, 3e6, 4.5e6, 8e6, 18e6, 40e6};
  for (int i = 0; i < 7; i++) {
    /* every size probed: the estimate stops where a doubling adds under 20% */
    for (int k = 0; k < 10; k++)
      lat[k] = lru_latency(ldexp(first, k), caches[i], 10e-9, 200e-9, 0);
    double got = embed_cache_estimate(lat, 10, first);
    assert_true(got >= 0.65 * caches[i] && got <= 1.2 * caches[i]);
    for (int k = 0; k < 10; k++)
      lat[k] = lru_latency(ldexp(first, k), caches[i], 10e-9, 150e-9, 0.15);
    got = embed_cache_estimate(lat, 10, first);
    assert_true(got >= 0.65 * caches[i] && got <= 1.2 * caches[i]);
  }
  /* the first size's latency taken by another process's loads */
  int n = 0;
  for (; n < 7; n++) lat[n] = lru_latency(ldexp(first, n), 4e6, 10e-9, 200e-9, 0);
  lat[0] = 60e-9;
  assert_true(fabs(embed_cache_estimate(lat, n, first) - 4e6) <= 0.6e6);
  /* no miss seen up to 256 MB: all of it */
  for (int k = 0; k < 10; k++) lat[k] = 12e-9;
  assert_true(embed_cache_estimate(lat, 10, first) == 256.0 * 1024 * 1024);
  assert_true(embed_cache_estimate(lat, 1, first) == 0);
}

static void test_calibrate(void **state) {
  (void)state;
  gs_cost_lookup lk;
  assert_int_equal(gs_embed_calibrate(&lk), GS_OK);
  assert_true(isfinite(lk.alpha) && isfinite(lk.beta) && lk.alpha >= 0 && lk.beta >= 0);
  assert_true(isfinite(lk.gamma) && lk.gamma > 0); /* an empty bag costs its store */
  assert_true(lk.alpha + lk.beta * 64 > 0);
  assert_true(isfinite(lk.alpha_hit) && isfinite(lk.beta_hit) && lk.alpha_hit >= 0 &&
              lk.beta_hit >= 0);
  assert_true(lk.gamma_mixed >= lk.gamma && isfinite(lk.gamma_mixed));
  assert_true(isfinite(lk.alpha_row) && isfinite(lk.beta_row) && lk.alpha_row >= 0 &&
              lk.beta_row >= 0);
  assert_true(lk.gamma_hit > 0 && lk.gamma_hit <= lk.gamma);
  /* what is measured passes what is given must */
  assert_int_equal(gs_cost_lookup_check(&lk), GS_OK);
  /* the shape of the pooled matrix: any, within bounds; none refused */
  assert_int_equal(gs_embed_calibrate_shape(2048, 8, &lk), GS_OK);
  assert_true(lk.gamma_hit > 0 && lk.gamma_hit <= lk.gamma);
  assert_int_equal(gs_embed_calibrate_shape(0, 416, &lk), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_embed_calibrate_shape(1024, 0, &lk), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_embed_calibrate_shape((size_t)1 << 23, 416, &lk), GS_ERR_INVALID_ARG);
  /* a job's shape: its global batch by a rank's share of the columns */
  gs_embed_spec kt[32];
  int kn;
  assert_int_equal(gs_embed_preset("kaggle", 0.01, kt, 32, &kn), GS_OK);
  assert_int_equal(gs_embed_calibrate_job(kt, kn, 2048, 2, &lk), GS_OK);
  assert_true(lk.gamma_hit > 0 && lk.gamma_hit <= lk.gamma);
  assert_int_equal(gs_embed_calibrate_job(kt, kn, 2048, 0, &lk), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_embed_calibrate_job(NULL, 3, 2048, 2, &lk), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_embed_calibrate_job(kt, kn, 0, 2, &lk), GS_ERR_INVALID_ARG);
  /* the cache a core gets, measured by random loads of 512 KB to 256 MB
   * (less than the 508 MB level 3 a VM's sysconf reports) */
  assert_true(lk.cache_bytes > 0 && lk.cache_bytes <= 256.0 * 1024 * 1024);
}

/* A bag's own cost: every non-dp shard walks the global batch's bags, a dp
 * replica its slice's (dense) or the average of its slice and the batch
 * (gathered); rw row blocks pay every bag and a share of the lookups. */
static void test_bag_cost(void **state) {
  (void)state;
  gs_shard_config cfg = config(4, 1);
  gs_embed_spec t = {"t", 100000, 16, 2};
  gs_shard tw = {0, 0, GS_SHARD_TW, 0, 100000, 0, 16, 0, 0, 0};
  gs_shard rw = {0, 0, GS_SHARD_RW, 0, 25000, 0, 16, 0, 0, 0};
  gs_shard dp = {0, 0, GS_SHARD_DP, 0, 100000, 0, 16, 0, 0, 0};
  gs_cost_shard_out a[3], b[3];
  gs_shard *sh[3] = {&tw, &rw, &dp};
  for (int k = 0; k < 3; k++) gs_shard_price(&cfg, &t, sh[k], &a[k]);
  cfg.lookup.gamma = 5e-9;
  for (int k = 0; k < 3; k++) gs_shard_price(&cfg, &t, sh[k], &b[k]);
  double want[3] = {cfg.batch, cfg.batch, cfg.batch * (1.0 + 1.0 / 4) / 2}; /* dp: gathered */
  for (int k = 0; k < 3; k++) {
    double got = (b[k].lookup_s - a[k].lookup_s) / 5e-9;
    if (fabs(got - want[k]) > 1e-6 * want[k])
      fail_msg("%s: %.1f bags priced, expected %.1f", gs_shard_kind_name(sh[k]->kind), got,
               want[k]);
    assert_true(b[k].wire_s == a[k].wire_s);
  }
  /* A rw block's lookups are a quarter of tw's, its bags all of them. */
  assert_true(fabs((a[1].lookup_s - 0.25 * a[0].lookup_s)) < 1e-12 + 1e-9 * a[0].lookup_s);
  /* An empty row block (more ranks than rows) walks no bag: the exchange
   * leaves it out (gs_dlrm_dist), and it costs no lookup time. */
  gs_shard empty = {0, 3, GS_SHARD_RW, 100000, 100000, 0, 16, 0, 0, 0};
  gs_cost_shard_out e;
  gs_shard_price(&cfg, &t, &empty, &e);
  assert_true(e.lookup_s == 0.0);
  assert_true(e.wire_s == b[1].wire_s); /* it still takes part in the reduce-scatter */
}

/* The config with the cache model on: about what gs_embed_calibrate
 * measures here (a hit 8 ns at 64 bytes, 17.8 MB a core, a bag among half
 * empty ones 23 ns) and what a Kaggle-shaped step touches besides. */
static gs_shard_config cache_config(int ranks, int per_node) {
  gs_shard_config c = config(ranks, per_node);
  c.lookup.gamma = 9e-9;
  c.lookup.alpha_hit = 0;
  c.lookup.beta_hit = 0.125e-9;
  c.lookup.cache_bytes = 17.8e6;
  c.lookup.gamma_mixed = 23e-9;
  c.zipf = 1.05;
  c.step_bytes = 17e6;
  c.row_sums = 1;
  return c;
}

static gs_cost_shard_in shard_in(double rows, double table_rows, double ids, double zipf,
                                 double T) {
  return (gs_cost_shard_in){GS_SHARD_TW, ids, 1, rows, table_rows, 16, 4, 1, 16, 1, zipf, T};
}

/* Che's approximation: the characteristic time and the hit shares. */
static void test_cache_model(void **state) {
  (void)state;
  gs_cost_topo t = {1, 1};
  gs_cost_shard_in tiny = shard_in(3, 3, 8192, 0, 0), big = shard_in(1e7, 1e7, 8192, 0, 0);
  /* No cache: never a hit; all of a small table fits, with its pooled
   * vectors (8192 bags of 16 columns, 16 bytes an element: 2 MiB): always. */
  const double pooled = 8192 * 16 * 16.0;
  assert_true(gs_cost_cache_time(t, &big, 1, 0, 0) == 0);
  assert_true(isinf(gs_cost_cache_time(t, &tiny, 1, 4e6, 0)));
  assert_true(isinf(gs_cost_cache_time(t, &tiny, 1, 4e6, 5e5)));
  /* The pooled vectors alone overflow 1 MB: lines asked for once a step,
   * so T is under a step. */
  double T0 = gs_cost_cache_time(t, &tiny, 1, 1e6, 0);
  assert_true(T0 > 0 && T0 < 1.0);
  /* A row block pools the whole global batch: on 2 ranks, its half of the
   * rows with all 8192 bags' vectors; a dp replica (its dense gradient
   * all-reduced) its own 4096. */
  gs_cost_shard_in blk = tiny, rep = tiny;
  blk.kind = GS_SHARD_RW, rep.kind = GS_SHARD_DP;
  double Tb = gs_cost_cache_time((gs_cost_topo){2, 2}, &blk, 1, pooled * 0.75, 0),
         Tr = gs_cost_cache_time((gs_cost_topo){2, 2}, &rep, 1, pooled * 0.75, 0);
  if (!(Tb < 1.0 && isinf(Tr))) fail_msg("row block T %.4g, replica T %.4g", Tb, Tr);
  /* More cache keeps rows longer; the rest of a step takes its share. */
  double T1 = gs_cost_cache_time(t, &big, 1, 4e6, 0), T2 = gs_cost_cache_time(t, &big, 1, 16e6, 0);
  assert_true(isfinite(T1) && T1 > 0 && T2 > T1);
  double T3 = gs_cost_cache_time(t, &big, 1, 16e6, 15e6);
  assert_true(T3 < T2 && T3 < 1.0);
  /* A row of 64 bytes and its accumulator's line: 16 MB less the pooled
   * vectors (T is over a step: all of them) holds 108,616 of them; uniform
   * ids over 1e7 rows, 8192 a step: T = -ln(1 - 108616/1e7) / r, r =
   * 8192/1e7 rows a step (the footprint 1e7 rows (1 - e^(-r T))). */
  double r = 8192 / 1e7, want = -log1p(-(16e6 - pooled) / 128.0 / 1e7) / r;
  if (fabs(T2 - want) > 1e-3 * want) fail_msg("T %.6g steps, expected %.6g", T2, want);
  /* Below a step, a burst's repeats hit and nothing else: a 3-row table's
   * lookups all but its 3 first, a 1e7-row table's almost none. */
  tiny.cache_t = big.cache_t = 0.5;
  double h_tiny = gs_cost_shard_hits(t, &tiny), h_big = gs_cost_shard_hits(t, &big);
  if (fabs(h_tiny - (1 - 3.0 / 8192)) > 1e-4) fail_msg("tiny table: hits %.6f", h_tiny);
  double want_big = 1 - -expm1(-r) / r;
  if (fabs(h_big - want_big) > 1e-6) fail_msg("big table: hits %.6g, expected %.6g", h_big, want_big);
  /* From a step on, rows kept from earlier steps hit too. */
  big.cache_t = T2;
  double h_kept = gs_cost_shard_hits(t, &big);
  assert_true(h_kept > want_big);
  if (fabs(h_kept - (1 - (1 - want_big) * exp(-r * T2))) > 1e-6)
    fail_msg("kept rows: hits %.6g", h_kept);
  /* Skew: the hot rows take more of the lookups. */
  gs_cost_shard_in z0 = shard_in(1e6, 1e6, 8192, 0, 0.5), z1 = z0, z2 = z0;
  z1.zipf = 1.05;
  z2.zipf = 1.2;
  double h0 = gs_cost_shard_hits(t, &z0), h1 = gs_cost_shard_hits(t, &z1),
         h2 = gs_cost_shard_hits(t, &z2);
  if (!(h0 < h1 && h1 < h2 && h2 < 1)) fail_msg("hits by skew: %.4f %.4f %.4f", h0, h1, h2);
  /* Row blocks see the table's law: a half of its rows, half its lookups. */
  gs_cost_shard_in half = z1;
  half.kind = GS_SHARD_RW;
  half.rows = 5e5;
  if (fabs(gs_cost_shard_hits((gs_cost_topo){2, 2}, &half) - h1) > 1e-9)
    fail_msg("a row block's hits differ from its table's");
}

/* The price with the cache: every lookup a hit (T infinite) at the hit
 * price, none (T 0) at the miss price, as without the cache; a bag among
 * half empty ones (a row block of 2 ranks, one id a sample) at gamma_mixed. */
static void test_cache_price(void **state) {
  (void)state;
  gs_shard_config cfg = cache_config(2, 1);
  cfg.net.beta = 0;
  gs_embed_spec t = {"t", 100000, 16, 1};
  gs_shard tw = {0, 0, GS_SHARD_TW, 0, 100000, 0, 16, 0, 0, 0};
  gs_shard rw = {0, 0, GS_SHARD_RW, 0, 50000, 0, 16, 0, 0, 0};
  gs_cost_shard_out o;
  double B = cfg.batch, miss = cfg.lookup.alpha + cfg.lookup.beta * 64,
         hit = cfg.lookup.alpha_hit + cfg.lookup.beta_hit * 64;
  cfg.cache_t = INFINITY;
  gs_shard_price(&cfg, &t, &tw, &o);
  if (fabs(o.lookup_s - B * (cfg.lookup.gamma + hit)) > 1e-12)
    fail_msg("all hits: %.6g s", o.lookup_s);
  cfg.cache_t = 0;
  gs_shard_price(&cfg, &t, &tw, &o);
  if (fabs(o.lookup_s - B * (cfg.lookup.gamma + miss)) > 1e-12)
    fail_msg("all misses: %.6g s", o.lookup_s);
  gs_shard_price(&cfg, &t, &rw, &o);
  if (fabs(o.lookup_s - B * (cfg.lookup.gamma_mixed + 0.5 * miss)) > 1e-12)
    fail_msg("a row block of 2: %.6g s, expected %.6g", o.lookup_s,
             B * (cfg.lookup.gamma_mixed + 0.5 * miss));
  /* Priced where they are: a rank holding two big tables hits less than
   * one holding one of them. */
  gs_embed_spec two[2] = {{"a", 2000000, 16, 1}, {"b", 2000000, 16, 1}};
  gs_shard_plan p = {0};
  gs_shard sh[2] = {{0, 0, GS_SHARD_TW, 0, 2000000, 0, 16, 0, 0, 0},
                    {1, 0, GS_SHARD_TW, 0, 2000000, 0, 16, 0, 0, 0}};
  gs_cost_shard_out out[2];
  p.ranks = 2, p.ntables = 2, p.nshards = 2, p.shards = sh;
  cfg.step_bytes = 0;
  assert_int_equal(gs_shard_plan_price(&p, two, &cfg, out), GS_OK);
  double together = out[0].lookup_s;
  sh[1].rank = 1;
  assert_int_equal(gs_shard_plan_price(&p, two, &cfg, out), GS_OK);
  if (!(out[0].lookup_s < together && fabs(out[0].lookup_s - out[1].lookup_s) < 1e-15))
    fail_msg("alone %.6g s, sharing a rank %.6g s", out[0].lookup_s, together);
}

/* The distinct rows a step touches: R (1 - e^(-I/R)) for uniform ids,
 * fewer under a Zipf law, never more than the lookups or the rows; a row
 * block sees its share. */
static void test_shard_rows(void **state) {
  (void)state;
  gs_cost_topo t = {1, 1};
  gs_cost_shard_in u = shard_in(1e5, 1e5, 8192, 0, 0);
  double want = 1e5 * -expm1(-8192 / 1e5), got = gs_cost_shard_rows(t, &u);
  if (fabs(got - want) > 1e-6 * want) fail_msg("uniform: %.3f rows, expected %.3f", got, want);
  gs_cost_shard_in tiny = shard_in(3, 3, 8192, 0, 0);
  if (fabs(gs_cost_shard_rows(t, &tiny) - 3.0) > 1e-9)
    fail_msg("a 3-row table: %.6f rows touched", gs_cost_shard_rows(t, &tiny));
  gs_cost_shard_in z = u;
  z.zipf = 1.05;
  double zr = gs_cost_shard_rows(t, &z);
  if (!(zr > 0 && zr < got)) fail_msg("Zipf 1.05: %.1f rows, uniform %.1f", zr, got);
  for (double rows = 1; rows <= 1e9; rows *= 7) {
    for (double zipf = 0; zipf <= 1.2; zipf += 0.6) {
      gs_cost_shard_in x = shard_in(rows, rows, 4096, zipf, 0);
      double r = gs_cost_shard_rows(t, &x);
      if (!(r > 0 && r <= fmin(rows, 4096) * (1 + 1e-9)))
        fail_msg("%.0f rows, Zipf %.1f: %.3f touched", rows, zipf, r);
    }
  }
  gs_cost_shard_in half = z;
  half.kind = GS_SHARD_RW;
  half.rows = 5e4;
  double hr = gs_cost_shard_rows((gs_cost_topo){2, 2}, &half);
  if (!(hr < zr && hr > 0.3 * zr))
    fail_msg("a half row block: %.1f rows, the table %.1f", hr, zr);
  gs_cost_shard_in none = shard_in(1e5, 1e5, 0, 0, 0);
  assert_true(gs_cost_shard_rows(t, &none) == 0.0);
}

/* The split price: each distinct row's update once (alpha_row + beta_row a
 * byte) on top of the lookups; a bag whose line of the pooled matrix stays
 * in the cache at gamma_hit, with probability 1 - e^-T. */
static void test_row_price(void **state) {
  (void)state;
  gs_shard_config cfg = cache_config(1, 1);
  cfg.net.beta = 0;
  cfg.row_sums = 0;
  gs_embed_spec big = {"big", 1000000, 16, 1}, tiny = {"tiny", 3, 16, 1};
  gs_shard sb = {0, 0, GS_SHARD_TW, 0, 1000000, 0, 16, 0, 0, 0};
  gs_shard st = {0, 0, GS_SHARD_TW, 0, 3, 0, 16, 0, 0, 0};
  cfg.cache_t = 0.5;
  gs_cost_shard_out b0, t0, b1, t1;
  gs_shard_price(&cfg, &big, &sb, &b0);
  gs_shard_price(&cfg, &tiny, &st, &t0);
  cfg.lookup.alpha_row = 2e-9;
  cfg.lookup.beta_row = 0.1e-9;
  gs_shard_price(&cfg, &big, &sb, &b1);
  gs_shard_price(&cfg, &tiny, &st, &t1);
  double per_row = 2e-9 + 0.1e-9 * 64;
  gs_cost_shard_in in = {GS_SHARD_TW, cfg.batch, 1, 1000000, 1000000, 16, 4, 1, 16, 0,
                         cfg.zipf, 0.5};
  double rows_big = gs_cost_shard_rows((gs_cost_topo){1, 1}, &in);
  if (fabs((b1.lookup_s - b0.lookup_s) - rows_big * per_row) > 1e-12)
    fail_msg("big table: %.6g s more, expected %.6g", b1.lookup_s - b0.lookup_s,
             rows_big * per_row);
  if (fabs((t1.lookup_s - t0.lookup_s) - 3 * per_row) > 1e-12)
    fail_msg("3-row table: %.6g s more, expected 3 rows' %.6g", t1.lookup_s - t0.lookup_s,
             3 * per_row);
  /* gamma_hit: none kept (T 0) is gamma; all (T infinite) gamma_hit. */
  cfg.lookup.gamma_hit = 3e-9;
  gs_cost_shard_out g;
  double B = cfg.batch;
  cfg.cache_t = INFINITY;
  gs_shard_price(&cfg, &tiny, &st, &g);
  gs_cost_shard_out ref;
  gs_shard_config no = cfg;
  no.lookup.gamma_hit = 0;
  gs_shard_price(&no, &tiny, &st, &ref);
  if (fabs((ref.lookup_s - g.lookup_s) - B * (cfg.lookup.gamma - 3e-9)) > 1e-12)
    fail_msg("all lines kept: %.6g s less, expected %.6g", ref.lookup_s - g.lookup_s,
             B * (cfg.lookup.gamma - 3e-9));
  cfg.cache_t = no.cache_t = 0.7;
  gs_shard_price(&cfg, &tiny, &st, &g);
  gs_shard_price(&no, &tiny, &st, &ref);
  double kept = -expm1(-0.7);
  if (fabs((ref.lookup_s - g.lookup_s) - kept * B * (cfg.lookup.gamma - 3e-9)) > 1e-12)
    fail_msg("T 0.7: %.6g s less, expected %.6g", ref.lookup_s - g.lookup_s,
             kept * B * (cfg.lookup.gamma - 3e-9));
  cfg.lookup.cache_bytes = 0; /* no cache model: every bag at gamma */
  gs_shard_price(&cfg, &tiny, &st, &g);
  no.lookup.cache_bytes = 0;
  gs_shard_price(&no, &tiny, &st, &ref);
  assert_true(g.lookup_s == ref.lookup_s);
}

/* The planner's bounds hold with each rank priced with its own cache. */
static void test_cache_plans(void **state) {
  (void)state;
  static gs_embed_spec t[300];
  char what[96];
  const char *names[] = {"kaggle", "terabyte", "mlperf"};
  for (int k = 0; k < 3; k++) {
    int n;
    assert_int_equal(gs_embed_preset(names[k], 0.1, t, 32, &n), GS_OK);
    for (int P = 2; P <= 16; P *= 2) {
      gs_shard_config cfg = cache_config(P, P >= 8 ? 4 : 1);
      snprintf(what, sizeof what, "%s on %d ranks, cache model", names[k], P);
      check_auto(t, n, &cfg, what);
    }
  }
  for (int trial = 0; trial < 8; trial++) {
    int n = 5 + (int)(rnd() % 200), P = 4 << (trial % 5);
    for (int i = 0; i < n; i++) {
      size_t rows = (size_t)pow(10.0, 1 + (double)(rnd() % 6000) / 1000.0);
      size_t dims[] = {16, 32, 64, 128};
      t[i] = (gs_embed_spec){"t", rows, dims[rnd() % 4], 1.0 + (double)(rnd() % 40)};
    }
    gs_shard_config cfg = cache_config(P, P >= 8 ? 4 : 2);
    snprintf(what, sizeof what, "random set %d: %d tables on %d ranks, cache model", trial, n, P);
    check_auto(t, n, &cfg, what);
  }
  gs_shard_config cfg = cache_config(64, 8);
  plan_1000(&cfg, " with the cache model");
  /* and with the rows' updates and the bags' lines priced apart */
  for (int k = 0; k < 3; k++) {
    int n;
    assert_int_equal(gs_embed_preset(names[k], 0.1, t, 32, &n), GS_OK);
    for (int P = 2; P <= 16; P *= 4) {
      gs_shard_config c = cache_config(P, 1);
      c.lookup.alpha_row = 1e-9;
      c.lookup.beta_row = 0.1e-9;
      c.lookup.gamma = 12e-9;
      c.lookup.gamma_hit = 3e-9;
      snprintf(what, sizeof what, "%s on %d ranks, split prices", names[k], P);
      check_auto(t, n, &c, what);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_presets),          cmocka_unit_test(test_auto_presets),
      cmocka_unit_test(test_random_sets),      cmocka_unit_test(test_forced_and_edges),
      cmocka_unit_test(test_memory_cap),       cmocka_unit_test(test_memory_cap_fallback),
      cmocka_unit_test(test_save_load),
      cmocka_unit_test(test_speed),            cmocka_unit_test(test_calibrate),
      cmocka_unit_test(test_cache_estimate),
      cmocka_unit_test(test_lookup_check),
      cmocka_unit_test(test_plan_labels),
      cmocka_unit_test(test_specs_file),      cmocka_unit_test(test_row_sums),
      cmocka_unit_test(test_bag_cost),         cmocka_unit_test(test_cache_model),
      cmocka_unit_test(test_cache_price),      cmocka_unit_test(test_cache_plans),
      cmocka_unit_test(test_shard_rows),       cmocka_unit_test(test_row_price),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
