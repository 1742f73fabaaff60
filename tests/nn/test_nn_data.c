/*
 * Data: the IDX reader on files the test writes (plain and gzip), its errors
 * (missing file, bad magic, unsupported type, truncated data, trailing
 * bytes, a corrupt gzip stream), Fashion-MNIST from a directory without the
 * files and, when Debian's package is installed, the real test split; the
 * synthetic data set; the distributed sampler.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "gradsync/nn.h"

static char dir[64];

static int setup(void **s) {
  (void)s;
  snprintf(dir, sizeof dir, "/tmp/gs_nn_data_XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **s) {
  (void)s;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* An IDX3 file of n images of r x c bytes, byte i = (i * 7) & 255. */
static size_t idx3_bytes(unsigned char *buf, uint32_t n, uint32_t r, uint32_t c) {
  unsigned char *p = buf;
  *p++ = 0;
  *p++ = 0;
  *p++ = 0x08;
  *p++ = 3;
  uint32_t d[3] = {n, r, c};
  for (int i = 0; i < 3; i++) {
    *p++ = (unsigned char)(d[i] >> 24);
    *p++ = (unsigned char)(d[i] >> 16);
    *p++ = (unsigned char)(d[i] >> 8);
    *p++ = (unsigned char)d[i];
  }
  for (uint32_t i = 0; i < n * r * c; i++) *p++ = (unsigned char)((i * 7) & 255);
  return (size_t)(p - buf);
}

static void write_plain(const char *path, const void *buf, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(buf, 1, n, f), n);
  fclose(f);
}

static void write_gz(const char *path, const void *buf, size_t n) {
  gzFile f = gzopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(gzwrite(f, buf, (unsigned)n), (int)n);
  assert_int_equal(gzclose(f), Z_OK);
}

static char *path_of(const char *name) {
  static char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return p;
}

static void test_idx_roundtrip(void **s) {
  (void)s;
  unsigned char buf[16 + 5 * 4 * 3];
  size_t n = idx3_bytes(buf, 5, 4, 3);
  for (int gz = 0; gz < 2; gz++) {
    char *p = path_of(gz ? "a.idx.gz" : "a.idx");
    if (gz)
      write_gz(p, buf, n);
    else
      write_plain(p, buf, n);
    gs_nn_idx idx;
    assert_int_equal(gs_nn_idx_read(p, &idx), GS_OK);
    assert_int_equal(idx.ndims, 3);
    assert_int_equal(idx.dims[0], 5);
    assert_int_equal(idx.dims[1], 4);
    assert_int_equal(idx.dims[2], 3);
    assert_int_equal(idx.count, 60);
    for (size_t i = 0; i < 60; i++) assert_int_equal(idx.data[i], (i * 7) & 255);
    gs_nn_idx_free(&idx);
  }
}

static void expect_error(const char *path, gs_status want, const char *needle) {
  gs_nn_idx idx;
  gs_status st = gs_nn_idx_read(path, &idx);
  if (st != want || !strstr(gs_last_error(), needle) || !strstr(gs_last_error(), path))
    print_error("%s: got %s, \"%s\"; want %s with \"%s\"\n", path, gs_strerror(st),
                gs_last_error(), gs_strerror(want), needle);
  assert_int_equal(st, want);
  assert_non_null(strstr(gs_last_error(), needle));
  assert_non_null(strstr(gs_last_error(), path));
  assert_null(idx.data);
}

static void test_idx_errors(void **s) {
  (void)s;
  unsigned char buf[16 + 5 * 4 * 3 + 1];
  size_t n = idx3_bytes(buf, 5, 4, 3);

  expect_error(path_of("nope.idx.gz"), GS_ERR_IO, "dataset-fashion-mnist");

  unsigned char bad[sizeof buf];
  memcpy(bad, buf, n);
  bad[1] = 0x12;
  write_plain(path_of("magic.idx"), bad, n);
  expect_error(path_of("magic.idx"), GS_ERR_PARSE, "magic");

  memcpy(bad, buf, n);
  bad[2] = 0x0D; /* float data */
  write_gz(path_of("type.idx.gz"), bad, n);
  expect_error(path_of("type.idx.gz"), GS_ERR_PARSE, "not supported");

  write_plain(path_of("short.idx"), buf, n - 9);
  expect_error(path_of("short.idx"), GS_ERR_PARSE, "truncated");
  write_gz(path_of("short.idx.gz"), buf, n - 9);
  expect_error(path_of("short.idx.gz"), GS_ERR_PARSE, "truncated");
  write_plain(path_of("hdr.idx"), buf, 6);
  expect_error(path_of("hdr.idx"), GS_ERR_PARSE, "truncated");

  buf[n] = 1;
  write_plain(path_of("long.idx"), buf, n + 1);
  expect_error(path_of("long.idx"), GS_ERR_PARSE, "trailing");

  /* A gzip stream cut in the middle, and one with a damaged body. */
  write_gz(path_of("cut.idx.gz"), buf, n);
  FILE *f = fopen(path_of("cut.idx.gz"), "rb");
  unsigned char gz[512];
  size_t gn = fread(gz, 1, sizeof gz, f);
  fclose(f);
  write_plain(path_of("cut.idx.gz"), gz, gn / 2);
  gs_nn_idx idx;
  assert_int_equal(gs_nn_idx_read(path_of("cut.idx.gz"), &idx), GS_ERR_PARSE);
  assert_non_null(strstr(gs_last_error(), "cut.idx.gz"));
  for (size_t i = 12; i < gn - 8; i++) gz[i] ^= 0x5A;
  write_plain(path_of("corrupt.idx.gz"), gz, gn);
  assert_int_equal(gs_nn_idx_read(path_of("corrupt.idx.gz"), &idx), GS_ERR_PARSE);
  assert_non_null(strstr(gs_last_error(), "corrupt.idx.gz"));
}

static void test_fashion_mnist_missing(void **s) {
  (void)s;
  gs_nn_dataset ds;
  assert_int_equal(gs_nn_fashion_mnist_load(dir, 1, &ds), GS_ERR_IO);
  assert_non_null(strstr(gs_last_error(), "train-images-idx3-ubyte"));
  assert_non_null(strstr(gs_last_error(), "apt-get install dataset-fashion-mnist"));
  assert_null(ds.images);

  /* Present but inconsistent: 5 images, a label file of 4. */
  unsigned char buf[16 + 5 * 28 * 28];
  size_t n = idx3_bytes(buf, 5, 28, 28);
  write_gz(path_of("t10k-images-idx3-ubyte.gz"), buf, n);
  unsigned char lab[8 + 4] = {0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 4};
  write_gz(path_of("t10k-labels-idx1-ubyte.gz"), lab, sizeof lab);
  assert_int_equal(gs_nn_fashion_mnist_load(dir, 0, &ds), GS_ERR_PARSE);
  unsigned char lab5[8 + 5] = {0, 0, 8, 1, 0, 0, 0, 5, 1, 2, 3, 4, 12};
  write_plain(path_of("t10k-labels-idx1-ubyte"), lab5, sizeof lab5);
  unlink(path_of("t10k-labels-idx1-ubyte.gz"));
  assert_int_equal(gs_nn_fashion_mnist_load(dir, 0, &ds), GS_ERR_PARSE);
  assert_non_null(strstr(gs_last_error(), "label 12"));
  lab5[12] = 9;
  write_plain(path_of("t10k-labels-idx1-ubyte"), lab5, sizeof lab5);
  assert_int_equal(gs_nn_fashion_mnist_load(dir, 0, &ds), GS_OK);
  assert_int_equal(ds.n, 5);
  assert_int_equal(ds.h, 28);
  assert_int_equal(ds.labels[4], 9);
  assert_float_equal(ds.images[0], (0.0f - 0.2860f) / 0.3530f, 1e-5);
  gs_nn_dataset_free(&ds);
}

/* The real files, when Debian's package is installed. */
static void test_fashion_mnist_real(void **s) {
  (void)s;
  struct stat sb;
  if (stat(GS_NN_FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz", &sb) != 0) {
    print_message("skipped: dataset-fashion-mnist is not installed\n");
    skip();
  }
  gs_nn_dataset ds;
  assert_int_equal(gs_nn_fashion_mnist_load(GS_NN_FASHION_MNIST_DIR, 0, &ds), GS_OK);
  assert_int_equal(ds.n, 10000);
  assert_int_equal(ds.c, 1);
  assert_int_equal(ds.h, 28);
  assert_int_equal(ds.w, 28);
  int hist[10] = {0};
  for (size_t i = 0; i < ds.n; i++) hist[ds.labels[i]]++;
  for (int c = 0; c < 10; c++) assert_int_equal(hist[c], 1000);
  gs_nn_dataset_free(&ds);
}

static void test_synthetic(void **s) {
  (void)s;
  gs_nn_dataset a, b, c;
  assert_int_equal(gs_nn_dataset_synthetic(&a, 50, 1, 4, 4, 3, 0.5f, 1), GS_OK);
  assert_int_equal(gs_nn_dataset_synthetic(&b, 50, 1, 4, 4, 3, 0.5f, 1), GS_OK);
  assert_int_equal(gs_nn_dataset_synthetic(&c, 50, 1, 4, 4, 3, 0.5f, 2), GS_OK);
  assert_memory_equal(a.images, b.images, 50 * 16 * sizeof(float));
  assert_memory_equal(a.labels, b.labels, 50 * sizeof(int32_t));
  assert_memory_not_equal(a.images, c.images, 50 * 16 * sizeof(float));
  for (int i = 0; i < 50; i++) assert_true(a.labels[i] >= 0 && a.labels[i] < 3);
  size_t idx[2] = {3, 49};
  float x[32];
  int32_t y[2];
  assert_int_equal(gs_nn_dataset_gather(&a, idx, 2, x, y), GS_OK);
  assert_memory_equal(x + 16, a.images + 49 * 16, 16 * sizeof(float));
  assert_int_equal(y[0], a.labels[3]);
  idx[1] = 50;
  assert_int_equal(gs_nn_dataset_gather(&a, idx, 2, x, y), GS_ERR_INVALID_ARG);
  gs_nn_dataset_free(&a);
  gs_nn_dataset_free(&b);
  gs_nn_dataset_free(&c);
}

/* A test split (1) of a seed: samples of its own (until 2026-12-02 the
 * trainer's synthetic test set was the first fifth of its training set),
 * the training split's classes (each test sample nearest its own class's
 * training mean), and unit variance per pixel (it was 1 + noise^2). */
static void test_synthetic_split(void **s) {
  (void)s;
  enum { N = 400, PX = 64, K = 4 };
  gs_nn_dataset tr, te, tr2;
  assert_int_equal(gs_nn_dataset_synthetic_split(&tr, N, 1, 8, 8, K, 1.0f, 7, 0), GS_OK);
  assert_int_equal(gs_nn_dataset_synthetic_split(&te, N / 4, 1, 8, 8, K, 1.0f, 7, 1), GS_OK);
  assert_int_equal(gs_nn_dataset_synthetic(&tr2, N, 1, 8, 8, K, 1.0f, 7), GS_OK);
  assert_memory_equal(tr.images, tr2.images, (size_t)N * PX * sizeof(float));
  for (size_t i = 0; i < te.n; i++)
    for (size_t j = 0; j < tr.n; j++)
      assert_memory_not_equal(te.images + i * PX, tr.images + j * PX, PX * sizeof(float));
  double mean[K][PX] = {{0}}, sum = 0, sq = 0;
  int cnt[K] = {0};
  for (size_t i = 0; i < tr.n; i++) {
    cnt[tr.labels[i]]++;
    for (int p = 0; p < PX; p++) {
      double v = tr.images[i * PX + p];
      mean[tr.labels[i]][p] += v;
      sum += v;
      sq += v * v;
    }
  }
  double var = sq / (N * PX) - (sum / (N * PX)) * (sum / (N * PX));
  assert_true(var > 0.9 && var < 1.1);
  for (int k = 0; k < K; k++)
    for (int p = 0; p < PX; p++) mean[k][p] /= cnt[k] ? cnt[k] : 1;
  int right = 0;
  for (size_t i = 0; i < te.n; i++) {
    int best = 0;
    double bd = 1e300;
    for (int k = 0; k < K; k++) {
      double d = 0;
      for (int p = 0; p < PX; p++) {
        double e = te.images[i * PX + p] - mean[k][p];
        d += e * e;
      }
      if (d < bd) bd = d, best = k;
    }
    right += best == te.labels[i];
  }
  assert_true(right >= (int)te.n * 95 / 100);
  gs_nn_dataset_free(&tr);
  assert_int_equal(gs_nn_dataset_synthetic_split(&tr, N, 1, 8, 8, K, 1.0f, 7, -1),
                   GS_ERR_INVALID_ARG);
  gs_nn_dataset_free(&te);
  gs_nn_dataset_free(&tr2);
}

/* Shards of every rank count cover each epoch exactly once (or, with
 * drop_remainder, all but n % size samples with equal counts); all ranks
 * see the same permutation; epochs and seeds change it; the same (seed,
 * epoch) reproduces it. Odd and even rank counts. */
static void test_sampler(void **s) {
  (void)s;
  const size_t n = 103;
  const int sizes[] = {1, 2, 3, 4, 5, 8};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    int size = sizes[k];
    for (int drop = 0; drop < 2; drop++) {
      for (long epoch = 0; epoch < 3; epoch++) {
        int seen[103] = {0};
        size_t counts[8], total = 0;
        size_t perm0[103];
        for (int r = 0; r < size; r++) {
          gs_nn_sampler smp;
          assert_int_equal(gs_nn_sampler_init(&smp, n, r, size, 2024, drop), GS_OK);
          assert_int_equal(gs_nn_sampler_set_epoch(&smp, epoch), GS_OK);
          if (r == 0) memcpy(perm0, smp.perm, sizeof perm0);
          assert_memory_equal(perm0, smp.perm, sizeof perm0);
          counts[r] = smp.count;
          total += smp.count;
          for (size_t i = 0; i < smp.count; i++) seen[smp.indices[i]]++;
          gs_nn_sampler_free(&smp);
        }
        size_t expect = drop ? n - n % (size_t)size : n;
        assert_int_equal(total, expect);
        size_t once = 0;
        for (size_t i = 0; i < n; i++) {
          assert_true(seen[i] <= 1);
          once += (size_t)seen[i];
        }
        assert_int_equal(once, expect);
        for (int r = 1; r < size; r++) {
          long d = (long)counts[0] - (long)counts[r];
          assert_true(drop ? d == 0 : (d == 0 || d == 1));
        }
      }
    }
  }
  gs_nn_sampler a, b;
  assert_int_equal(gs_nn_sampler_init(&a, n, 0, 1, 5, 0), GS_OK);
  assert_int_equal(gs_nn_sampler_init(&b, n, 0, 1, 5, 0), GS_OK);
  size_t e0[103];
  memcpy(e0, a.perm, sizeof e0);
  assert_int_equal(gs_nn_sampler_set_epoch(&a, 1), GS_OK);
  assert_memory_not_equal(e0, a.perm, sizeof e0);
  assert_int_equal(gs_nn_sampler_set_epoch(&b, 1), GS_OK);
  assert_memory_equal(a.perm, b.perm, sizeof e0);
  assert_int_equal(gs_nn_sampler_set_epoch(&a, 0), GS_OK);
  assert_memory_equal(e0, a.perm, sizeof e0);
  gs_nn_sampler_free(&b);
  assert_int_equal(gs_nn_sampler_init(&b, n, 0, 1, 6, 0), GS_OK);
  assert_memory_not_equal(a.perm, b.perm, sizeof e0);
  gs_nn_sampler_free(&a);
  gs_nn_sampler_free(&b);
  assert_int_equal(gs_nn_sampler_init(&a, n, 3, 3, 1, 0), GS_ERR_INVALID_ARG);
}

/* Hostile IDX headers: sizes are claims checked against the file before
 * memory is committed (a header announcing gigabytes in a tiny file was
 * allocated in full, or failed as out of memory), and a data set of empty
 * or absurd images is an error naming the file. */
static void test_idx_hostile_headers(void **s) {
  (void)s;
  /* 2^35 bytes announced (8 x 2^16 x 2^16), 12 present: plain and gzip. */
  unsigned char buf[16 + 12];
  size_t n = idx3_bytes(buf, 1, 3, 4);
  buf[4] = 0, buf[5] = 0, buf[6] = 0, buf[7] = 8;
  buf[8] = 0, buf[9] = 1, buf[10] = 0, buf[11] = 0;
  buf[12] = 0, buf[13] = 1, buf[14] = 0, buf[15] = 0;
  write_plain(path_of("huge.idx"), buf, n);
  expect_error(path_of("huge.idx"), GS_ERR_PARSE, "announces");
  write_gz(path_of("huge.idx.gz"), buf, n);
  expect_error(path_of("huge.idx.gz"), GS_ERR_PARSE, "truncated");
  /* Beyond the 64 GiB cap on any IDX file. */
  buf[4] = 0x10;
  write_gz(path_of("cap.idx.gz"), buf, n);
  expect_error(path_of("cap.idx.gz"), GS_ERR_PARSE, "too large");
  /* A directory is not an IDX file. */
  expect_error(dir, GS_ERR_IO, "directory");

  /* Fashion-MNIST over images of 0 x 5 pixels, then no images at all. */
  char sub[128], lpath[192], ipath[192];
  snprintf(sub, sizeof sub, "%s/hostile", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  snprintf(ipath, sizeof ipath, "%s/train-images-idx3-ubyte", sub);
  snprintf(lpath, sizeof lpath, "%s/train-labels-idx1-ubyte", sub);
  unsigned char lab[8 + 2] = {0, 0, 8, 1, 0, 0, 0, 2, 1, 2};
  write_plain(lpath, lab, sizeof lab);
  n = idx3_bytes(buf, 2, 0, 5);
  write_plain(ipath, buf, n);
  gs_nn_dataset ds;
  assert_int_equal(gs_nn_fashion_mnist_load(sub, 1, &ds), GS_ERR_PARSE);
  assert_non_null(strstr(gs_last_error(), ipath));
  assert_non_null(strstr(gs_last_error(), "0 x 5"));
  assert_null(ds.images);
  unsigned char nolab[8] = {0, 0, 8, 1, 0, 0, 0, 0};
  write_plain(lpath, nolab, sizeof nolab);
  n = idx3_bytes(buf, 0, 28, 28);
  write_plain(ipath, buf, n);
  assert_int_equal(gs_nn_fashion_mnist_load(sub, 1, &ds), GS_ERR_PARSE);
  assert_non_null(strstr(gs_last_error(), "at least one image"));
  /* Images of another size than 28 x 28 load as what they are: the shape
   * check against the model belongs to the trainer. */
  write_plain(lpath, lab, sizeof lab);
  unsigned char big[16 + 2 * 6 * 6];
  n = idx3_bytes(big, 2, 6, 6);
  write_plain(ipath, big, n);
  assert_int_equal(gs_nn_fashion_mnist_load(sub, 1, &ds), GS_OK);
  assert_int_equal(ds.n, 2);
  assert_int_equal(ds.h, 6);
  assert_int_equal(ds.w, 6);
  gs_nn_dataset_free(&ds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idx_roundtrip),
      cmocka_unit_test(test_idx_errors),
      cmocka_unit_test(test_fashion_mnist_missing),
      cmocka_unit_test(test_fashion_mnist_real),
      cmocka_unit_test(test_synthetic),
      cmocka_unit_test(test_synthetic_split),
      cmocka_unit_test(test_sampler),
      cmocka_unit_test(test_idx_hostile_headers),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
