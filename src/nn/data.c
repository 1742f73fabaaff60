/*
 * Data: the IDX reader (LeCun's MNIST file format, through zlib so that
 * gzip-compressed and plain files read alike), Fashion-MNIST from Debian's
 * dataset-fashion-mnist package, a synthetic data set and the distributed
 * sampler.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <zlib.h>

#include "nn_internal.h"

#define FMNIST_HINT                                                         \
  "install Debian's dataset-fashion-mnist package (apt-get install "       \
  "dataset-fashion-mnist; it puts the files in " GS_NN_FASHION_MNIST_DIR   \
  ") or set GRADSYNC_FASHION_MNIST_DIR to a directory holding them"

/* Box-Muller (Box & Muller 1958, eq. 1); one of the pair is discarded so the
 * stream stays a function of the state alone. */
double nn_rng_normal(uint64_t *state) {
  double u1 = ((double)(nn_rng_next(state) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
  double u2 = (double)(nn_rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* ---- IDX ------------------------------------------------------------------- */

/* Reads exactly n bytes or explains why not. */
static gs_status gz_read_exact(gzFile f, const char *path, void *buf, size_t n,
                               const char *what) {
  size_t done = 0;
  while (done < n) {
    size_t chunk = GS_MIN(n - done, (size_t)1 << 30);
    int r = gzread(f, (char *)buf + done, (unsigned)chunk);
    if (r < 0) {
      int err;
      const char *msg = gzerror(f, &err);
      return gs_error(GS_ERR_PARSE, "%s: corrupt file while reading the %s: %s",
                      path, what, msg);
    }
    if (r == 0) break;
    done += (size_t)r;
  }
  if (done < n)
    return gs_error(GS_ERR_PARSE,
                    "%s: truncated: the %s needs %zu bytes, the file has %zu",
                    path, what, n, done);
  return GS_OK;
}

/* The largest IDX data we read (64 GiB), whatever a header claims. */
#define IDX_MAX_BYTES ((size_t)1 << 36)
/* A gzip file's data grows its buffer in steps of at most this much. */
#define IDX_GROW_BYTES ((size_t)64 << 20)

/* Reads the `count` data bytes into a new buffer, grown as the data arrives
 * (never more than IDX_GROW_BYTES beyond what was read), so that a header
 * announcing far more than the file holds fails as truncated without a
 * large allocation. */
static gs_status idx_read_data(gzFile f, const char *path, size_t count,
                               uint8_t **out) {
  size_t cap = GS_MIN(count, IDX_GROW_BYTES), done = 0;
  uint8_t *buf = gs_malloc(cap ? cap : 1);
  if (!buf) return gs_error(GS_ERR_NOMEM, "%s: out of memory", path);
  while (done < count) {
    if (done == cap) {
      size_t grow = GS_MIN(GS_MAX(cap, (size_t)1 << 20), IDX_GROW_BYTES);
      size_t next = GS_MIN(count, cap + grow);
      uint8_t *bigger = gs_realloc(buf, next);
      if (!bigger) {
        gs_free(buf);
        return gs_error(GS_ERR_NOMEM, "%s: out of memory for %zu bytes of data",
                        path, next);
      }
      buf = bigger;
      cap = next;
    }
    size_t want = cap - done;
    gs_status st = gz_read_exact(f, path, buf + done, want, "data");
    if (st != GS_OK) {
      gs_free(buf);
      /* Name the whole size, not the step that ran short. */
      if (st == GS_ERR_PARSE && strstr(gs_last_error(), "truncated"))
        return gs_error(GS_ERR_PARSE,
                        "%s: truncated: the data needs %zu bytes, the file "
                        "has fewer", path, count);
      return st;
    }
    done += want;
  }
  *out = buf;
  return GS_OK;
}

gs_status gs_nn_idx_read(const char *path, gs_nn_idx *out) {
  if (!path || !out)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_idx_read: path or out is NULL");
  memset(out, 0, sizeof *out);
  struct stat sb;
  if (stat(path, &sb) != 0) {
    if (errno == ENOENT)
      return gs_error(GS_ERR_IO, "%s: no such file (for Fashion-MNIST: %s)",
                      path, FMNIST_HINT);
    return gs_error(GS_ERR_IO, "%s: %s", path, strerror(errno));
  }
  if (S_ISDIR(sb.st_mode))
    return gs_error(GS_ERR_IO, "%s: is a directory, not an IDX file", path);
  gzFile f = gzopen(path, "rb");
  if (!f) return gs_error(GS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  gs_status st = GS_OK;
  unsigned char hdr[4], dimb[16];
  uint8_t *data = NULL;
  GS_CHECK_GOTO(gz_read_exact(f, path, hdr, 4, "header"), st, done);
  if (hdr[0] != 0 || hdr[1] != 0) {
    st = gs_error(GS_ERR_PARSE,
                  "%s: bad magic %02x %02x %02x %02x: not an IDX file (it "
                  "starts with two zero bytes)", path, hdr[0], hdr[1], hdr[2],
                  hdr[3]);
    goto done;
  }
  if (hdr[2] != 0x08) {
    st = gs_error(GS_ERR_PARSE,
                  "%s: IDX data type 0x%02x is not supported (only unsigned "
                  "bytes, 0x08)", path, hdr[2]);
    goto done;
  }
  if (hdr[3] < 1 || hdr[3] > 4) {
    st = gs_error(GS_ERR_PARSE, "%s: %d dimensions (1 to 4 supported)", path,
                  hdr[3]);
    goto done;
  }
  out->ndims = hdr[3];
  GS_CHECK_GOTO(gz_read_exact(f, path, dimb, 4 * (size_t)out->ndims, "dimensions"),
                st, done);
  size_t count = 1;
  for (int i = 0; i < out->ndims; i++) {
    const unsigned char *b = dimb + 4 * i;
    out->dims[i] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
                   (uint32_t)b[2] << 8 | b[3];
    if (gs_mul_size(count, out->dims[i], &count) != GS_OK ||
        count > IDX_MAX_BYTES) {
      st = gs_error(GS_ERR_PARSE, "%s: dimensions too large (more than %llu "
                    "bytes of data)", path, (unsigned long long)IDX_MAX_BYTES);
      goto done;
    }
  }
  /* The header's size is a claim, checked against the file before any
   * memory is committed to it: a plain file must hold exactly that many
   * bytes, and a gzip file's data is read into a buffer that grows with
   * what actually arrives, so a hostile header costs nothing. */
  size_t hdr_bytes = 4 + 4 * (size_t)out->ndims;
  if (S_ISREG(sb.st_mode) && gzdirect(f) &&
      (unsigned long long)sb.st_size != hdr_bytes + count) {
    char shape[64];
    int len = snprintf(shape, sizeof shape, "%u", out->dims[0]);
    for (int i = 1; i < out->ndims && len > 0 && (size_t)len < sizeof shape; i++)
      len += snprintf(shape + len, sizeof shape - (size_t)len, " x %u", out->dims[i]);
    int trunc = (unsigned long long)sb.st_size < hdr_bytes + count;
    st = gs_error(GS_ERR_PARSE,
                  "%s: %s: the header announces %s = %zu bytes of data, the "
                  "file holds %lld", path, trunc ? "truncated" : "trailing bytes",
                  shape, count, (long long)sb.st_size - (long long)hdr_bytes);
    goto done;
  }
  GS_CHECK_GOTO(idx_read_data(f, path, count, &data), st, done);
  /* Reading on to the end also makes zlib check the gzip trailer (CRC). */
  unsigned char extra;
  int r = gzread(f, &extra, 1);
  if (r < 0) {
    int err;
    st = gs_error(GS_ERR_PARSE, "%s: corrupt file after the data: %s", path,
                  gzerror(f, &err));
    goto done;
  }
  if (r > 0) {
    st = gs_error(GS_ERR_PARSE,
                  "%s: trailing bytes after the %zu bytes of data the header "
                  "announces", path, count);
    goto done;
  }
  out->count = count;
  out->data = data;
  data = NULL;
done:
  gzclose(f);
  gs_free(data);
  if (st != GS_OK) memset(out, 0, sizeof *out);
  return st;
}

void gs_nn_idx_free(gs_nn_idx *idx) {
  if (!idx) return;
  gs_free(idx->data);
  memset(idx, 0, sizeof *idx);
}

/* ---- Fashion-MNIST ------------------------------------------------------- */

/* The largest image side a data set may have (Fashion-MNIST's is 28). */
#define NN_IMAGE_MAX_SIDE 65536

/* dir/base.gz if it exists, else dir/base; errors name the .gz path. */
static gs_status fmnist_path(const char *dir, const char *base, char *buf,
                             size_t n) {
  struct stat sb;
  snprintf(buf, n, "%s/%s.gz", dir, base);
  if (stat(buf, &sb) == 0) return GS_OK;
  snprintf(buf, n, "%s/%s", dir, base);
  if (stat(buf, &sb) == 0) return GS_OK;
  snprintf(buf, n, "%s/%s.gz", dir, base);
  return gs_error(GS_ERR_IO, "Fashion-MNIST file %s is missing: %s", buf,
                  FMNIST_HINT);
}

gs_status gs_nn_fashion_mnist_load(const char *dir, int train,
                                   gs_nn_dataset *out) {
  if (!out)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_fashion_mnist_load: out is NULL");
  memset(out, 0, sizeof *out);
  if (!dir) dir = getenv("GRADSYNC_FASHION_MNIST_DIR");
  if (!dir || !*dir) dir = GS_NN_FASHION_MNIST_DIR;
  const char *split = train ? "train" : "t10k";
  char ipath[4096], lpath[4096], base[64];
  snprintf(base, sizeof base, "%s-images-idx3-ubyte", split);
  GS_CHECK(fmnist_path(dir, base, ipath, sizeof ipath));
  snprintf(base, sizeof base, "%s-labels-idx1-ubyte", split);
  GS_CHECK(fmnist_path(dir, base, lpath, sizeof lpath));

  gs_nn_idx im, lb;
  GS_CHECK(gs_nn_idx_read(ipath, &im));
  gs_status st = gs_nn_idx_read(lpath, &lb);
  if (st != GS_OK) {
    gs_nn_idx_free(&im);
    return st;
  }
  if (im.ndims != 3 || lb.ndims != 1 || im.dims[0] != lb.dims[0]) {
    st = gs_error(GS_ERR_PARSE,
                  "Fashion-MNIST: %s has %d dimensions (%u samples), %s has %d "
                  "(%u labels); expected [n][rows][cols] and [n] with the same n",
                  ipath, im.ndims, im.dims[0], lpath, lb.ndims, lb.dims[0]);
    goto fail;
  }
  /* A data set of no samples or of empty or absurd images is refused here,
   * naming the file, rather than left to fail (or divide by zero) later. */
  if (im.dims[0] == 0 || im.dims[1] == 0 || im.dims[2] == 0 ||
      im.dims[1] > NN_IMAGE_MAX_SIDE || im.dims[2] > NN_IMAGE_MAX_SIDE) {
    st = gs_error(GS_ERR_PARSE,
                  "Fashion-MNIST: %s holds %u images of %u x %u pixels; "
                  "expected at least one image of 1 to %d pixels a side",
                  ipath, im.dims[0], im.dims[1], im.dims[2], NN_IMAGE_MAX_SIDE);
    goto fail;
  }
  size_t n = im.dims[0], px = (size_t)im.dims[1] * im.dims[2], bytes;
  if (gs_mul_size(n * px, sizeof(float), &bytes) != GS_OK) {
    st = gs_error(GS_ERR_PARSE, "Fashion-MNIST: %s: %zu images of %zu pixels "
                  "overflow the address space", ipath, n, px);
    goto fail;
  }
  out->n = n;
  out->c = 1;
  out->h = (int)im.dims[1];
  out->w = (int)im.dims[2];
  out->classes = 10;
  out->images = gs_malloc(bytes);
  out->labels = gs_malloc(n * sizeof(int32_t));
  if (!out->images || !out->labels) {
    st = GS_ERR_NOMEM;
    goto fail;
  }
  for (size_t i = 0; i < n; i++) {
    if (lb.data[i] >= 10) {
      st = gs_error(GS_ERR_PARSE, "%s: label %d of sample %zu is not in [0, 10)",
                    lpath, lb.data[i], i);
      goto fail;
    }
    out->labels[i] = lb.data[i];
  }
  /* Mean and standard deviation of Fashion-MNIST's training pixels. */
  const float mean = 0.2860f, inv_std = 1.0f / 0.3530f;
  for (size_t i = 0; i < n * px; i++)
    out->images[i] = ((float)im.data[i] * (1.0f / 255.0f) - mean) * inv_std;
  gs_nn_idx_free(&im);
  gs_nn_idx_free(&lb);
  return GS_OK;
fail:
  gs_nn_idx_free(&im);
  gs_nn_idx_free(&lb);
  gs_nn_dataset_free(out);
  return st;
}

/* ---- Synthetic ------------------------------------------------------------ */

gs_status gs_nn_dataset_synthetic(gs_nn_dataset *out, size_t n, int c, int h,
                                  int w, int classes, float noise,
                                  uint64_t seed) {
  return gs_nn_dataset_synthetic_split(out, n, c, h, w, classes, noise, seed, 0);
}

gs_status gs_nn_dataset_synthetic_split(gs_nn_dataset *out, size_t n, int c,
                                        int h, int w, int classes, float noise,
                                        uint64_t seed, int split) {
  if (!out)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_dataset_synthetic: out is NULL");
  memset(out, 0, sizeof *out);
  if (n == 0 || c <= 0 || h <= 0 || w <= 0 || classes <= 1 || !(noise >= 0.0f) ||
      split < 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_dataset_synthetic: %zu samples of %dx%dx%d, %d "
                    "classes, noise %g, split %d", n, c, h, w, classes, (double)noise,
                    split);
  size_t px = (size_t)c * h * w, bytes;
  GS_CHECK(gs_mul_size(n, px * sizeof(float), &bytes));
  float *proto = gs_malloc((size_t)classes * px * sizeof(float));
  out->images = gs_malloc(bytes);
  out->labels = gs_malloc(n * sizeof(int32_t));
  if (!proto || !out->images || !out->labels) {
    gs_free(proto);
    gs_nn_dataset_free(out);
    return GS_ERR_NOMEM;
  }
  uint64_t rng = seed;
  for (size_t i = 0; i < (size_t)classes * px; i++)
    proto[i] = (float)nn_rng_normal(&rng);
  /* Unit variance per pixel, as a normalised real data set has (at noise 1
   * the pixels' variance was 2, and the trainer's CNN at its default
   * learning rate reached 21% after two epochs of 4096 samples; 88% now). */
  float scale = 1.0f / sqrtf(1.0f + noise * noise);
  /* The samples: a stream of their own per split, so that a test split
   * shares the prototypes and none of the training samples. */
  if (split > 0) rng = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)split);
  for (size_t i = 0; i < n; i++) {
    int32_t y = (int32_t)nn_rng_below(&rng, (uint64_t)classes);
    out->labels[i] = y;
    float *x = out->images + i * px;
    const float *p = proto + (size_t)y * px;
    for (size_t j = 0; j < px; j++)
      x[j] = (p[j] + noise * (float)nn_rng_normal(&rng)) * scale;
  }
  gs_free(proto);
  out->n = n;
  out->c = c;
  out->h = h;
  out->w = w;
  out->classes = classes;
  return GS_OK;
}

void gs_nn_dataset_free(gs_nn_dataset *ds) {
  if (!ds) return;
  if (ds->mapped) {
    munmap(ds->images, ds->mapped);
  } else {
    gs_free(ds->images);
    gs_free(ds->labels);
  }
  memset(ds, 0, sizeof *ds);
}

gs_status gs_nn_dataset_gather(const gs_nn_dataset *ds, const size_t *idx,
                               int batch, float *x, int32_t *y) {
  if (!ds || !idx || !x || !y || batch < 0)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_dataset_gather: a NULL argument");
  size_t px = (size_t)ds->c * ds->h * ds->w;
  for (int i = 0; i < batch; i++) {
    if (idx[i] >= ds->n)
      return gs_error(GS_ERR_INVALID_ARG,
                      "gs_nn_dataset_gather: index %zu of a set of %zu",
                      idx[i], ds->n);
    memcpy(x + (size_t)i * px, ds->images + idx[i] * px, px * sizeof(float));
    y[i] = ds->labels[idx[i]];
  }
  return GS_OK;
}

gs_status gs_nn_dataset_gather_n(const gs_nn_dataset *ds, const size_t *idx,
                                 int batch, float *x, size_t x_count, int32_t *y) {
  if (!ds || batch < 0)
    return gs_error(GS_ERR_INVALID_ARG, "gs_nn_dataset_gather_n: a NULL argument");
  size_t px = (size_t)ds->c * ds->h * ds->w;
  if (px != 0 && (size_t)batch > x_count / px)
    return gs_error(GS_ERR_INVALID_ARG,
                    "a batch of %d samples of %dx%dx%d (%zu floats) does not fit a "
                    "buffer of %zu floats: the data set's images are not the shape "
                    "the buffer was made for", batch, ds->c, ds->h, ds->w,
                    (size_t)batch * px, x_count);
  return gs_nn_dataset_gather(ds, idx, batch, x, y);
}

/* ---- Distributed sampler ------------------------------------------------- */

gs_status gs_nn_sampler_init(gs_nn_sampler *s, size_t n, int rank, int size,
                             uint64_t seed, int drop_remainder) {
  if (!s) return gs_error(GS_ERR_INVALID_ARG, "gs_nn_sampler_init: s is NULL");
  memset(s, 0, sizeof *s);
  if (n == 0 || size <= 0 || rank < 0 || rank >= size)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_sampler_init: %zu samples, rank %d of %d", n, rank,
                    size);
  s->perm = gs_malloc(n * sizeof *s->perm);
  s->indices = gs_malloc((n / (size_t)size + 1) * sizeof *s->indices);
  if (!s->perm || !s->indices) {
    gs_nn_sampler_free(s);
    return GS_ERR_NOMEM;
  }
  s->n = n;
  s->rank = rank;
  s->size = size;
  s->seed = seed;
  s->drop_remainder = drop_remainder != 0;
  return gs_nn_sampler_set_epoch(s, 0);
}

/* Fisher-Yates (Knuth, TAOCP vol. 2, algorithm 3.4.2 P) from a generator
 * seeded by (seed, epoch) alone, so every rank draws the same permutation. */
gs_status gs_nn_sampler_set_epoch(gs_nn_sampler *s, long epoch) {
  if (!s || !s->perm)
    return gs_error(GS_ERR_STATE, "gs_nn_sampler_set_epoch: not initialised");
  s->epoch = epoch;
  uint64_t rng = s->seed ^ ((uint64_t)epoch * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull);
  nn_rng_next(&rng);
  for (size_t i = 0; i < s->n; i++) s->perm[i] = i;
  for (size_t i = s->n - 1; i > 0; i--) {
    size_t j = (size_t)nn_rng_below(&rng, (uint64_t)i + 1);
    size_t t = s->perm[i];
    s->perm[i] = s->perm[j];
    s->perm[j] = t;
  }
  size_t usable = s->drop_remainder ? s->n - s->n % (size_t)s->size : s->n;
  size_t r = (size_t)s->rank, count = 0;
  for (size_t i = r; i < usable; i += (size_t)s->size) s->indices[count++] = s->perm[i];
  s->count = count;
  return GS_OK;
}

void gs_nn_sampler_free(gs_nn_sampler *s) {
  if (!s) return;
  gs_free(s->perm);
  gs_free(s->indices);
  memset(s, 0, sizeof *s);
}
