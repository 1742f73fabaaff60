/*
 * DLRM's data (include/gradsync/dlrm.h):
 *   - the Zipf sampler: every draw in [1, n]; rank 1 drawn 1 / H(n, s) of
 *     the time and 2^s times as often as rank 2; uniform at s = 0; ranks of
 *     a 2^40-row law in range;
 *   - synthetic data: a sample depends on its index only (the same in
 *     batches cut differently), another seed gives other data, the Zipf
 *     rank 1 id is a table's most frequent, pooling fixed or in 1..P, the
 *     teacher's AUC well above 0.5 and its labels its own Bernoulli draws;
 *     a preset's tables scaled (gs_embed_preset);
 *   - the Criteo reader: good lines (empty fields, negative integers, hex
 *     values modulo the rows) read in batches across calls to the end; a
 *     malformed line (39 fields, a label 2, an integer "12x", a hex "zz")
 *     names the file, its line and its field; a missing file.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "gradsync.h"

static void test_zipf_shape(void **state) {
  (void)state;
  const uint64_t n = 1000;
  const double s = 1.05;
  gs_zipf z;
  assert_int_equal(gs_zipf_init(&z, n, s), GS_OK);
  const int draws = 400000;
  static int count[1001];
  memset(count, 0, sizeof count);
  uint64_t st = 7;
  for (int i = 0; i < draws; i++) {
    uint64_t k = gs_zipf_draw(&z, &st);
    assert_true(k >= 1 && k <= n);
    count[k]++;
  }
  double H = 0;
  for (uint64_t k = 1; k <= n; k++) H += pow((double)k, -s);
  double p1 = (double)count[1] / draws, want1 = 1.0 / H;
  /* Binomial standard deviation of p1 here is about 0.0007. */
  assert_true(fabs(p1 - want1) < 0.005);
  double ratio = (double)count[1] / count[2];
  assert_true(fabs(ratio - pow(2.0, s)) < 0.08);
  double p10 = (double)count[10] / draws;
  assert_true(fabs(p10 - pow(10.0, -s) / H) < 0.002);

  /* s = 0: uniform. */
  assert_int_equal(gs_zipf_init(&z, 10, 0.0), GS_OK);
  int u[11] = {0};
  for (int i = 0; i < 100000; i++) u[gs_zipf_draw(&z, &st)]++;
  for (int k = 1; k <= 10; k++) assert_true(abs(u[k] - 10000) < 500);

  /* A huge law: O(1) draws, all in range. */
  assert_int_equal(gs_zipf_init(&z, 1ULL << 40, 1.2), GS_OK);
  for (int i = 0; i < 100000; i++) {
    uint64_t k = gs_zipf_draw(&z, &st);
    assert_true(k >= 1 && k <= (1ULL << 40));
  }
  assert_int_equal(gs_zipf_init(&z, 0, 1.0), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_zipf_init(&z, 10, -1.0), GS_ERR_INVALID_ARG);
}

static const gs_embed_spec small_tables[3] = {
    {"A", 50, 0, 1}, {"B", 1000, 0, 1}, {"C", 7, 0, 1}};

static gs_dlrm_synth *make_synth(uint64_t seed, int pooling, int random) {
  gs_dlrm_synth_config c = gs_dlrm_synth_defaults();
  c.ndense = 4;
  c.tables = small_tables;
  c.ntables = 3;
  c.pooling = pooling;
  c.pooling_random = random;
  c.seed = seed;
  gs_dlrm_synth *g;
  assert_int_equal(gs_dlrm_synth_create(&c, &g), GS_OK);
  return g;
}

static int same_sample(const gs_dlrm_batch *a, size_t i, const gs_dlrm_batch *b, size_t j) {
  if (memcmp(a->dense + i * a->ndense, b->dense + j * b->ndense, a->ndense * sizeof(float)))
    return 0;
  if (a->labels[i] != b->labels[j]) return 0;
  for (int t = 0; t < a->ntables; t++) {
    const gs_embed_bags *x = &a->bags[t], *y = &b->bags[t];
    int64_t lx = x->offsets[i + 1] - x->offsets[i], ly = y->offsets[j + 1] - y->offsets[j];
    if (lx != ly) return 0;
    if (memcmp((const int32_t *)x->ids + x->offsets[i], (const int32_t *)y->ids + y->offsets[j],
               (size_t)lx * sizeof(int32_t)))
      return 0;
  }
  return 1;
}

static void test_synth(void **state) {
  (void)state;
  gs_dlrm_synth *g = make_synth(11, 3, 1), *g2 = make_synth(11, 3, 1), *h = make_synth(12, 3, 1);
  gs_dlrm_batch a, b, c;
  assert_int_equal(gs_dlrm_batch_alloc(&a, 200, 4, 3, 600), GS_OK);
  assert_int_equal(gs_dlrm_batch_alloc(&b, 200, 4, 3, 600), GS_OK);
  assert_int_equal(gs_dlrm_batch_alloc(&c, 200, 4, 3, 600), GS_OK);
  assert_int_equal(gs_dlrm_synth_fill(g, 0, 200, &a), GS_OK);
  assert_int_equal(gs_dlrm_synth_fill(g2, 100, 150, &b), GS_OK);
  assert_int_equal(b.first_sample, 100);
  /* Samples 100..199 the same in both cuts; another seed, other samples. */
  for (size_t i = 100; i < 200; i++) assert_true(same_sample(&a, i, &b, i - 100));
  assert_int_equal(gs_dlrm_synth_fill(h, 0, 200, &c), GS_OK);
  int differ = 0;
  for (size_t i = 0; i < 200; i++) differ += !same_sample(&a, i, &c, i);
  assert_true(differ > 190);
  /* Pooling in 1..3, ids in range, labels 0 or 1 and both present. */
  int seen_len[4] = {0};
  double pos = 0;
  for (size_t i = 0; i < 200; i++) {
    pos += a.labels[i];
    assert_true(a.labels[i] == 0 || a.labels[i] == 1);
    for (int t = 0; t < 3; t++) {
      int64_t len = a.bags[t].offsets[i + 1] - a.bags[t].offsets[i];
      assert_true(len >= 1 && len <= 3);
      seen_len[len]++;
      for (int64_t j = a.bags[t].offsets[i]; j < a.bags[t].offsets[i + 1]; j++) {
        int32_t id = ((const int32_t *)a.bags[t].ids)[j];
        assert_true(id >= 0 && (size_t)id < small_tables[t].rows);
      }
    }
  }
  assert_true(seen_len[1] > 0 && seen_len[2] > 0 && seen_len[3] > 0);
  assert_true(pos > 10 && pos < 190);
  /* A batch too small for the pooling is refused. */
  gs_dlrm_batch tiny;
  assert_int_equal(gs_dlrm_batch_alloc(&tiny, 10, 4, 3, 20), GS_OK);
  assert_int_equal(gs_dlrm_synth_fill(g, 0, 10, &tiny), GS_ERR_INVALID_ARG);
  gs_dlrm_batch_free(&tiny);
  gs_dlrm_batch_free(&a);
  gs_dlrm_batch_free(&b);
  gs_dlrm_batch_free(&c);
  gs_dlrm_synth_destroy(g);
  gs_dlrm_synth_destroy(g2);
  gs_dlrm_synth_destroy(h);
}

static void test_synth_hot_rows_and_teacher(void **state) {
  (void)state;
  gs_dlrm_synth *g = make_synth(5, 1, 0);
  const size_t n = 20000;
  gs_dlrm_batch a;
  assert_int_equal(gs_dlrm_batch_alloc(&a, n, 4, 3, n), GS_OK);
  assert_int_equal(gs_dlrm_synth_fill(g, 0, n, &a), GS_OK);
  /* Table B (1000 rows): the rank 1 id is the most frequent, about 2^1.05
   * times rank 2's, and scattered (not id 0 by construction). */
  static int count[1000];
  memset(count, 0, sizeof count);
  for (size_t i = 0; i < n; i++) count[((const int32_t *)a.bags[1].ids)[i]]++;
  uint64_t id1 = gs_dlrm_synth_id_of_rank(g, 1, 1), id2 = gs_dlrm_synth_id_of_rank(g, 1, 2);
  for (int r = 0; r < 1000; r++) assert_true(count[r] <= count[id1]);
  double ratio = (double)count[id1] / count[id2];
  assert_true(ratio > 1.7 && ratio < 2.5);
  /* The teacher ranks far better than chance and its labels are its own:
   * a positive's mean logit above a negative's. */
  float *z = malloc(n * sizeof(float));
  assert_non_null(z);
  assert_int_equal(gs_dlrm_synth_teacher_logits(g, &a, z), GS_OK);
  double zp = 0, zn = 0, np = 0;
  for (size_t i = 0; i < n; i++) {
    if (a.labels[i] == 1) zp += z[i], np++;
    else zn += z[i];
  }
  assert_true(zp / np > zn / ((double)n - np) + 0.5);
  double auc, auc2;
  assert_int_equal(gs_dlrm_synth_teacher_auc(g, 0, n, &auc), GS_OK);
  assert_int_equal(gs_metric_auc(z, a.labels, n, &auc2), GS_OK);
  assert_true(auc == auc2);
  assert_true(auc > 0.7 && auc < 0.95);
  free(z);
  gs_dlrm_batch_free(&a);
  gs_dlrm_synth_destroy(g);

  /* A preset's tables, scaled: 26 tables, Kaggle's 10 M-row table at 1e-3. */
  gs_embed_spec t[26];
  int nt;
  assert_int_equal(gs_embed_preset("kaggle", 1e-3, t, 26, &nt), GS_OK);
  gs_dlrm_synth_config c = gs_dlrm_synth_defaults();
  c.tables = t;
  c.ntables = nt;
  assert_int_equal(gs_dlrm_synth_create(&c, &g), GS_OK);
  assert_int_equal(gs_dlrm_batch_alloc(&a, 64, 13, 26, 64), GS_OK);
  assert_int_equal(gs_dlrm_synth_fill(g, 0, 64, &a), GS_OK);
  gs_dlrm_batch_free(&a);
  gs_dlrm_synth_destroy(g);
}

/* ---- Criteo ------------------------------------------------------------------- */

static gs_embed_spec criteo_tables[26];

static void criteo_specs(void) {
  for (int t = 0; t < 26; t++) criteo_tables[t] = (gs_embed_spec){NULL, 100 + (size_t)t, 0, 1};
}

/* A line: label, 13 integers, 26 hex values, with fields replaced as given. */
static void write_line(FILE *f, const char *label, const char *int0, const char *hex0,
                       int nfields) {
  fputs(label, f);
  for (int k = 1; k < nfields; k++) {
    fputc('\t', f);
    if (k == 1) fputs(int0, f);
    else if (k <= 13) fprintf(f, "%d", k);
    else if (k == 14) fputs(hex0, f);
    else fprintf(f, "%x", 0x1000 + k);
  }
  fputc('\n', f);
}

static char *temp_file(void) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/gs_criteo_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  return path;
}

static void test_criteo_good(void **state) {
  (void)state;
  criteo_specs();
  char *path = temp_file();
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  write_line(f, "1", "5", "68fd1e64", 40);
  write_line(f, "0", "", "", 40);    /* empty fields read as 0 */
  write_line(f, "0", "-3", "ff", 40); /* a negative integer clips at 0 */
  fclose(f);
  gs_criteo_reader *r;
  assert_int_equal(gs_criteo_open(path, criteo_tables, 26, &r), GS_OK);
  gs_dlrm_batch b;
  assert_int_equal(gs_dlrm_batch_alloc(&b, 2, 13, 26, 2), GS_OK);
  size_t got;
  assert_int_equal(gs_criteo_read(r, &b, &got), GS_OK);
  assert_int_equal(got, 2);
  assert_int_equal(b.n, 2);
  assert_true(b.labels[0] == 1 && b.labels[1] == 0);
  assert_true(b.dense[0] == (float)log1p(5.0));
  assert_true(b.dense[1] == (float)log1p(2.0)); /* I2 = 2 */
  assert_true(b.dense[12] == (float)log1p(13.0));
  assert_true(b.dense[13] == 0.0f);
  const int32_t *c1 = b.bags[0].ids;
  assert_int_equal(c1[0], (int32_t)(0x68fd1e64ULL % 100));
  assert_int_equal(c1[1], 0);
  const int32_t *c26 = b.bags[25].ids;
  assert_int_equal(c26[0], (0x1000 + 39) % 125);
  assert_int_equal(b.bags[25].offsets[2], 2);
  assert_int_equal(gs_criteo_read(r, &b, &got), GS_OK);
  assert_int_equal(got, 1);
  assert_int_equal(b.first_sample, 2);
  assert_true(b.dense[0] == 0.0f);
  assert_int_equal(((const int32_t *)b.bags[0].ids)[0], 0xff % 100);
  assert_int_equal(gs_criteo_read(r, &b, &got), GS_OK);
  assert_int_equal(got, 0);
  assert_int_equal(gs_criteo_line(r), 3);
  gs_criteo_close(r);
  gs_dlrm_batch_free(&b);
  unlink(path);
}

/* A file of good lines with line `bad` (1-based) broken as given; the
 * read must fail naming the line and `what`. */
static void expect_bad(int bad, const char *label, const char *int0, const char *hex0,
                       int nfields, const char *what) {
  char *path = temp_file();
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (int i = 1; i <= 4; i++) {
    if (i == bad) write_line(f, label, int0, hex0, nfields);
    else write_line(f, "0", "1", "a", 40);
  }
  fclose(f);
  gs_criteo_reader *r;
  assert_int_equal(gs_criteo_open(path, criteo_tables, 26, &r), GS_OK);
  gs_dlrm_batch b;
  assert_int_equal(gs_dlrm_batch_alloc(&b, 8, 13, 26, 8), GS_OK);
  size_t got = 99;
  assert_int_equal(gs_criteo_read(r, &b, &got), GS_ERR_PARSE);
  assert_int_equal(got, 0);
  const char *msg = gs_last_error();
  char line[32];
  snprintf(line, sizeof line, "line %d:", bad);
  if (!strstr(msg, path) || !strstr(msg, line) || !strstr(msg, what))
    fail_msg("unexpected message: %s", msg);
  gs_criteo_close(r);
  gs_dlrm_batch_free(&b);
  unlink(path);
}

static void test_criteo_bad(void **state) {
  (void)state;
  criteo_specs();
  expect_bad(3, "1", "1", "a", 39, "39 tab-separated fields, expected 40");
  expect_bad(2, "1", "1", "a", 41, "41 tab-separated fields");
  expect_bad(1, "2", "1", "a", 40, "field 1 (label) '2' is not 0 or 1");
  expect_bad(4, "", "1", "a", 40, "(label)");
  expect_bad(2, "0", "12x", "a", 40, "field 2 (I1) '12x' is not an integer");
  expect_bad(3, "0", "1", "zz", 40, "field 15 (C1) 'zz' is not a hex value");
  expect_bad(1, "0", "99999999999999999999", "a", 40, "(I1)");
  expect_bad(2, "0", "1", "0x1f", 40, "(C1)");
  gs_criteo_reader *r;
  assert_int_equal(gs_criteo_open("/nonexistent/day_0", criteo_tables, 26, &r), GS_ERR_IO);
  assert_non_null(strstr(gs_last_error(), "/nonexistent/day_0"));
  assert_int_equal(gs_criteo_open("/tmp", criteo_tables, 25, &r), GS_ERR_INVALID_ARG);
}

/* The vocabulary (--frequency-threshold): C1's values over the first 12
 * of 15 lines: "a", "b" and "c" 3 times each, "d" and "e" once, an empty
 * field once; the last 3 lines (not counted) "a", "e" and "f". At a
 * threshold of 3: "a", "b", "c" ids 2, 3, 4 (a tie: by value), the rest
 * (rare, or first seen after the counted lines) 1, the empty field 0; the
 * reader takes the ids from it, modulo the rows. */
static void test_criteo_vocab(void **state) {
  (void)state;
  criteo_specs();
  static const char *c1[] = {"c", "a", "b", "", "a", "d", "c", "b", "e", "a", "b", "c", "a",
                             "e", "f"};
  char *path = temp_file();
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (size_t i = 0; i < sizeof c1 / sizeof c1[0]; i++) write_line(f, "0", "1", c1[i], 40);
  fclose(f);
  gs_criteo_vocab *v;
  assert_int_equal(gs_criteo_vocab_build(path, 12, 3, &v), GS_OK);
  size_t distinct, kept, lines;
  gs_criteo_vocab_stats(v, 0, &distinct, &kept, &lines);
  assert_int_equal(lines, 12);
  assert_int_equal(distinct, 5);
  assert_int_equal(kept, 3);
  assert_int_equal(gs_criteo_vocab_rows(v, 0), 5);
  assert_int_equal(gs_criteo_vocab_id(v, 0, "a"), 2);
  assert_int_equal(gs_criteo_vocab_id(v, 0, "b"), 3);
  assert_int_equal(gs_criteo_vocab_id(v, 0, "c"), 4);
  assert_int_equal(gs_criteo_vocab_id(v, 0, "A"), 2); /* hex: the same value */
  assert_int_equal(gs_criteo_vocab_id(v, 0, "d"), 1);
  assert_int_equal(gs_criteo_vocab_id(v, 0, "f"), 1);
  assert_int_equal(gs_criteo_vocab_id(v, 0, ""), 0);
  /* C26: one value on every line (0x1000 + 39), kept; C2..C25 alike */
  gs_criteo_vocab_stats(v, 25, &distinct, &kept, NULL);
  assert_true(distinct == 1 && kept == 1);
  char hex[16];
  snprintf(hex, sizeof hex, "%x", 0x1000 + 39);
  assert_int_equal(gs_criteo_vocab_id(v, 25, hex), 2);

  /* The reader through it: line by line the ids above, modulo the rows
   * (4 rows for C1: "c"'s id 4 becomes 0). */
  criteo_tables[0].rows = 4;
  gs_criteo_reader *r;
  assert_int_equal(gs_criteo_open(path, criteo_tables, 26, &r), GS_OK);
  assert_int_equal(gs_criteo_set_vocab(r, v), GS_OK);
  gs_dlrm_batch b;
  assert_int_equal(gs_dlrm_batch_alloc(&b, 16, 13, 26, 16), GS_OK);
  size_t got;
  assert_int_equal(gs_criteo_read(r, &b, &got), GS_OK);
  assert_int_equal(got, 15);
  static const int32_t want[] = {0, 2, 3, 0, 2, 1, 0, 3, 1, 2, 3, 0, 2, 1, 1};
  const int32_t *ids = b.bags[0].ids;
  for (int i = 0; i < 15; i++)
    if (ids[i] != want[i]) fail_msg("line %d: C1's id %d, expected %d", i + 1, ids[i], want[i]);
  assert_int_equal(((const int32_t *)b.bags[25].ids)[14], 2);
  gs_criteo_close(r);
  gs_dlrm_batch_free(&b);

  /* Every line (0): "e" twice, below 3 still; at a threshold of 1 every
   * value is kept, by count: a 4, b 3, c 3, e 2, d 1, f 1. */
  gs_criteo_vocab_free(v);
  assert_int_equal(gs_criteo_vocab_build(path, 0, 1, &v), GS_OK);
  gs_criteo_vocab_stats(v, 0, &distinct, &kept, &lines);
  assert_true(lines == 15 && distinct == 6 && kept == 6);
  assert_int_equal(gs_criteo_vocab_id(v, 0, "e"), 5);
  assert_int_equal(gs_criteo_vocab_id(v, 0, "d"), 6);
  assert_int_equal(gs_criteo_vocab_id(v, 0, "f"), 7);
  gs_criteo_vocab_free(v);

  /* A bad line among those counted names its line and field; a threshold
   * of 0 and a missing file are refused. */
  f = fopen(path, "a");
  assert_non_null(f);
  write_line(f, "0", "1", "zz", 40);
  fclose(f);
  assert_int_equal(gs_criteo_vocab_build(path, 0, 3, &v), GS_ERR_PARSE);
  assert_non_null(strstr(gs_last_error(), "line 16: field 15 (C1) 'zz'"));
  assert_int_equal(gs_criteo_vocab_build(path, 15, 3, &v), GS_OK); /* not counted */
  gs_criteo_vocab_free(v);
  assert_int_equal(gs_criteo_vocab_build(path, 0, 0, &v), GS_ERR_INVALID_ARG);
  assert_int_equal(gs_criteo_vocab_build("/nonexistent/day_0", 0, 3, &v), GS_ERR_IO);
  assert_non_null(strstr(gs_last_error(), "/nonexistent/day_0"));
  unlink(path);
}

/* A gzip-compressed file (as Criteo ships its days) of n lines whose I1 is
 * the line's index, the last without its newline; skip and rewind. */
static void test_criteo_gzip(void **state) {
  (void)state;
  criteo_specs();
  char *path = temp_file();
  const int n = 3000; /* about 450 KB of text: several of the reader's chunks */
  gzFile z = gzopen(path, "wb");
  assert_non_null(z);
  for (int i = 0; i < n; i++) {
    gzprintf(z, "%d", i % 2);
    for (int k = 1; k < 40; k++) gzprintf(z, k <= 13 ? "\t%d" : "\t%x", k == 1 ? i : 7 * k);
    if (i + 1 < n) gzputc(z, '\n');
  }
  assert_int_equal(gzclose(z), Z_OK);
  gs_criteo_reader *r;
  assert_int_equal(gs_criteo_open(path, criteo_tables, 26, &r), GS_OK);
  gs_dlrm_batch b;
  assert_int_equal(gs_dlrm_batch_alloc(&b, 16, 13, 26, 16), GS_OK);
  size_t got, skipped;
  assert_int_equal(gs_criteo_skip(r, 1000, &skipped), GS_OK);
  assert_int_equal(skipped, 1000);
  assert_int_equal(gs_criteo_read(r, &b, &got), GS_OK);
  assert_int_equal(got, 16);
  assert_int_equal(b.first_sample, 1000);
  for (int i = 0; i < 16; i++) assert_true(b.dense[i * 13] == (float)log1p(1000.0 + i));
  assert_int_equal(gs_criteo_skip(r, 5000, &skipped), GS_OK);
  assert_int_equal(skipped, (size_t)n - 1016); /* the last line, newline or not */
  assert_int_equal(gs_criteo_read(r, &b, &got), GS_OK);
  assert_int_equal(got, 0);
  assert_int_equal(gs_criteo_rewind(r), GS_OK);
  assert_int_equal(gs_criteo_read(r, &b, &got), GS_OK);
  assert_true(got == 16 && b.first_sample == 0 && b.dense[13] == (float)log1p(1.0));
  assert_int_equal(gs_criteo_skip(r, (size_t)n - 17, &skipped), GS_OK);
  assert_int_equal(gs_criteo_read(r, &b, &got), GS_OK);
  assert_true(got == 1 && b.dense[0] == (float)log1p(n - 1.0) && b.labels[0] == 1);
  gs_criteo_close(r);
  /* Cut short: the gzip stream ends in the middle, an I/O error naming the
   * file (not a shorter file). */
  FILE *f = fopen(path, "r+");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long size = ftell(f);
  fclose(f);
  assert_int_equal(truncate(path, size / 2), 0);
  assert_int_equal(gs_criteo_open(path, criteo_tables, 26, &r), GS_OK);
  gs_status st = GS_OK;
  while (st == GS_OK && gs_criteo_line(r) < (size_t)n) {
    st = gs_criteo_read(r, &b, &got);
    if (st == GS_OK && got == 0) break;
  }
  assert_int_equal(st, GS_ERR_IO);
  assert_non_null(strstr(gs_last_error(), path));
  gs_criteo_close(r);
  gs_dlrm_batch_free(&b);
  unlink(path);
}

/* gs_criteo_count_lines counts the lines the reader reads (a last line
 * without its newline too), stops at the limit, and reads gzip; an empty
 * file has none, a missing one is an I/O error naming it. */
static void test_criteo_count_lines(void **state) {
  (void)state;
  char *path = temp_file();
  size_t n = 99;
  assert_int_equal(gs_criteo_count_lines(path, 0, &n), GS_OK);
  assert_int_equal(n, 0); /* empty */
  /* 200000 lines (several of the counter's chunks), the last without '\n' */
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (int i = 0; i < 200000; i++) fprintf(f, i + 1 < 200000 ? "%d\n" : "%d", i);
  fclose(f);
  assert_int_equal(gs_criteo_count_lines(path, 0, &n), GS_OK);
  assert_int_equal(n, 200000);
  assert_int_equal(gs_criteo_count_lines(path, 1000, &n), GS_OK);
  assert_int_equal(n, 1000);
  assert_int_equal(gs_criteo_count_lines(path, 200001, &n), GS_OK);
  assert_int_equal(n, 200000);
  f = fopen(path, "w");
  fputs("a\n\nb\n", f); /* an empty line is a line (the reader refuses it) */
  fclose(f);
  assert_int_equal(gs_criteo_count_lines(path, 0, &n), GS_OK);
  assert_int_equal(n, 3);
  gzFile z = gzopen(path, "wb");
  assert_non_null(z);
  for (int i = 0; i < 50000; i++) gzprintf(z, "%d\n", i);
  gzputs(z, "last");
  assert_int_equal(gzclose(z), Z_OK);
  assert_int_equal(gs_criteo_count_lines(path, 0, &n), GS_OK);
  assert_int_equal(n, 50001);
  assert_int_equal(gs_criteo_count_lines(path, 7, &n), GS_OK);
  assert_int_equal(n, 7);
  unlink(path);
  assert_int_equal(gs_criteo_count_lines(path, 0, &n), GS_ERR_IO);
  assert_non_null(strstr(gs_last_error(), path));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_criteo_count_lines),
      cmocka_unit_test(test_zipf_shape),
      cmocka_unit_test(test_synth),
      cmocka_unit_test(test_synth_hot_rows_and_teacher),
      cmocka_unit_test(test_criteo_good),
      cmocka_unit_test(test_criteo_bad),
      cmocka_unit_test(test_criteo_vocab),
      cmocka_unit_test(test_criteo_gzip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
