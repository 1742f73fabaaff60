/*
 * Fuzz target: the IDX reader (gs_nn_idx_read), plain and gzip, and the
 * Fashion-MNIST loader on top of it. The input is read as an IDX file; when
 * it parses as a 3-D image file or a 1-D label file, it is also loaded as
 * one half of a Fashion-MNIST split whose other half the target writes to
 * match, so the dataset checks (shape, labels) see hostile headers too.
 */
#include <zlib.h>

#include "fuzz_common.h"
#include "gradsync/nn.h"

/* A plain IDX header of `ndims` dimensions followed by `count` bytes of v. */
static void write_idx(const char *name, int ndims, const uint32_t *dims,
                      uint8_t v) {
  size_t count = 1;
  for (int i = 0; i < ndims; i++) count *= dims[i];
  size_t n = 4 + 4 * (size_t)ndims + count;
  uint8_t *buf = malloc(n);
  if (!buf) abort();
  uint8_t *p = buf;
  *p++ = 0;
  *p++ = 0;
  *p++ = 0x08;
  *p++ = (uint8_t)ndims;
  for (int i = 0; i < ndims; i++) {
    *p++ = (uint8_t)(dims[i] >> 24);
    *p++ = (uint8_t)(dims[i] >> 16);
    *p++ = (uint8_t)(dims[i] >> 8);
    *p++ = (uint8_t)dims[i];
  }
  memset(p, v, count);
  fuzz_write_file(name, buf, n);
  free(buf);
}

static volatile float fuzz_sink;

static void load_split(void) {
  gs_nn_dataset ds;
  gs_status st = gs_nn_fashion_mnist_load(fuzz_scratch_dir(), 1, &ds);
  if (st == GS_OK) {
    /* Touch every value: the sizes must describe the buffers. */
    size_t px = (size_t)ds.c * (size_t)ds.h * (size_t)ds.w;
    float sum = 0;
    for (size_t i = 0; i < ds.n * px; i++) sum += ds.images[i];
    fuzz_sink = sum;
    for (size_t i = 0; i < ds.n; i++)
      if (ds.labels[i] < 0 || ds.labels[i] >= ds.classes) abort();
    gs_nn_dataset_free(&ds);
  } else if (st != GS_ERR_NOMEM && strstr(gs_last_error(), fuzz_scratch_dir()) == NULL) {
    fprintf(stderr, "fuzz: Fashion-MNIST error without the file: \"%s\"\n",
            gs_last_error());
    abort();
  }
}

/* The input gzip-compressed: the reader must give the same result (status
 * and data) as for the plain file. zlib is not instrumented, so without
 * this the fuzzer would rarely reach the gzip path's own code (the buffer
 * that grows as data arrives) with an interesting IDX inside. */
static void check_gzip_agrees(const uint8_t *data, size_t size, gs_status plain,
                              const gs_nn_idx *want) {
  char path[600];
  snprintf(path, sizeof path, "%s/input.idx.gz", fuzz_scratch_dir());
  gzFile f = gzopen(path, "wb1");
  if (!f || (size > 0 && gzwrite(f, data, (unsigned)size) != (int)size) ||
      gzclose(f) != Z_OK)
    abort();
  gs_nn_idx got;
  gs_status st = gs_nn_idx_read(path, &got);
  fuzz_check_error(st, path);
  if (st != plain) {
    fprintf(stderr, "fuzz: plain %s, gzip %s (%s)\n", gs_strerror(plain),
            gs_strerror(st), gs_last_error());
    abort();
  }
  if (st == GS_OK) {
    if (got.count != want->count || got.ndims != want->ndims ||
        memcmp(got.dims, want->dims, sizeof got.dims) != 0 ||
        memcmp(got.data, want->data, got.count) != 0)
      abort();
    gs_nn_idx_free(&got);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_write_file("input.idx", data, size);
  gs_nn_idx idx;
  gs_status st = gs_nn_idx_read(path, &idx);
  fuzz_check_error(st, path);
  /* A plain input that is itself gzip data reads differently compressed
   * again; compare only inputs that are not gzip streams. */
  if (!(size >= 2 && data[0] == 0x1f && data[1] == 0x8b))
    check_gzip_agrees(data, size, st, &idx);
  if (st != GS_OK) return 0;
  int ndims = idx.ndims;
  uint32_t n = idx.dims[0];
  gs_nn_idx_free(&idx);
  /* The other half of the split, kept small so the target stays fast. */
  if (ndims == 3 && n <= 4096) {
    fuzz_write_file("train-images-idx3-ubyte", data, size);
    write_idx("train-labels-idx1-ubyte", 1, &n, 3);
    load_split();
  } else if (ndims == 1 && n <= 4096) {
    uint32_t dims[3] = {n, 2, 2};
    write_idx("train-images-idx3-ubyte", 3, dims, 7);
    fuzz_write_file("train-labels-idx1-ubyte", data, size);
    load_split();
  }
  return 0;
}
