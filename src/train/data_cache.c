/*
 * --data-cache DIR: the decoded data set kept on local disk.
 *
 * Reading Fashion-MNIST means inflating four gzip files and normalising
 * every pixel; the cache keeps the result (both splits, as the loader
 * returns them) in DIR/fashion-<key>.gsdc, where key is a CRC-32 of the
 * source's identity (the directory's real path, each file's name, size and
 * modification time, the loader's normalisation). A later run with the same
 * source maps the floats (below); the ranks that share DIR (on one node)
 * share one file.
 *
 * Protocol (collective over the job's ranks, before any other
 * collective of the loop):
 *   1. every rank tries the cache: a hit, a miss (no file) or a corrupt
 *      file (bad magic, sizes, truncated, checksum mismatch);
 *   2. the ranks exchange (sharing group, hit) where the group is a hash of
 *      the host name and DIR's device and inode: the ranks of a node that
 *      name the same DIR;
 *   3. in each group with a rank that missed, its lowest such rank reads the
 *      source and writes the cache atomically (temporary file, fsync,
 *      rename): a reader sees no file or a whole one;
 *   4. the ranks agree on the writers' outcome; then the others that missed
 *      read the new file (or, if they cannot, the source).
 *
 * File layout (host byte order, like checkpoints), version 2:
 *   char magic[8] "GSDCACH1"; uint32 version 2; uint32 identity length;
 *   char identity[len]; per split (train, test): uint64 n; int32 c, h, w,
 *   classes; uint64 offset; then zeros up to the first offset; per split at
 *   its offset (a multiple of 4096): float images[n*c*h*w]; int32 labels[n];
 *   zeros up to the next offset; after the last split's labels a uint32
 *   CRC-32 of the header (magic to the last split's description) then of
 *   each split's images and labels (the padding is not covered).
 *
 * A hit maps each split read-only (the data set then points into the page
 * cache: no copy, and the ranks and jobs of one host share one copy), and
 * checks the CRC over the mapping once; that pass also yields the train
 * split's CRC-32 of images then labels, which a checkpoint identifies its
 * data by (train_data_identify), so it is not computed a second time.
 * Version 1 (the splits inline, read into memory) is rebuilt as corrupt.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "train_internal.h"

static const char CACHE_MAGIC[8] = {'G', 'S', 'D', 'C', 'A', 'C', 'H', '1'};
enum { CACHE_VERSION = 2, IDENTITY_MAX = 8192, CACHE_ALIGN = 4096 };
/* The loader's normalisation (nn.h): a change makes old caches misses. */
#define LOADER_ID "fashion-mnist (x/255-0.2860)/0.3530 v1"

typedef enum { CACHE_HIT = 0, CACHE_MISS, CACHE_CORRUPT } cache_outcome;

/* ---- The source's identity ------------------------------------------------- */

static gs_status source_identity(const gs_train_config *c, char *id, size_t n) {
  const char *dir = c->data_dir;
  if (!dir) dir = getenv("GRADSYNC_FASHION_MNIST_DIR");
  if (!dir || !*dir) dir = GS_NN_FASHION_MNIST_DIR;
  char real[PATH_MAX];
  /* A data directory that is not there is bad input, as train_load_data
   * makes it (exit 2: a relaunch would not cure it); until 2026-12-07 it
   * was GS_ERR_IO here, and the job ended with 1. */
  if (realpath(dir, real) == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "%s %s: %s", train_option(c, "data_dir"), dir,
                    strerror(errno));
  size_t len = (size_t)snprintf(id, n, "%s|%s", LOADER_ID, real);
  static const char *const files[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                      "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
  for (size_t f = 0; f < 4; f++)
    for (int gz = 1; gz >= 0; gz--) {
      char path[PATH_MAX + 64];
      snprintf(path, sizeof path, "%s/%s%s", real, files[f], gz ? ".gz" : "");
      struct stat sb;
      if (stat(path, &sb) != 0) continue;
      if (len < n)
        len += (size_t)snprintf(id + len, n - len, "|%s%s:%lld:%lld.%09ld", files[f],
                                gz ? ".gz" : "", (long long)sb.st_size,
                                (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec);
      break; /* the loader prefers the .gz, as here */
    }
  if (len >= n)
    return gs_error(GS_ERR_INVALID_ARG, "%s %s: the path is too long",
                    train_option(c, "data_dir"), dir);
  return GS_OK;
}

static void cache_file(const gs_train_config *c, const char *identity, char *buf, size_t n) {
  uLong crc = crc32(0L, (const Bytef *)identity, (uInt)strlen(identity));
  snprintf(buf, n, "%s/fashion-%08lx.gsdc", c->data_cache, (unsigned long)crc);
}

/* ---- The header ---------------------------------------------------------------- */

/* A split as the header describes it. */
typedef struct {
  uint64_t n;
  int32_t dims[4]; /* c, h, w, classes */
  uint64_t offset;
} split_desc;

enum { SPLIT_DESC_BYTES = 8 + 16 + 8 };

static size_t align_up(size_t v) { return (v + CACHE_ALIGN - 1) / CACHE_ALIGN * CACHE_ALIGN; }

static size_t header_bytes(size_t idlen) { return 16 + idlen + 2 * SPLIT_DESC_BYTES; }

/* A split's images and labels, in bytes (no overflow: the sizes are checked). */
static size_t split_bytes(const split_desc *d) {
  size_t px = (size_t)d->dims[0] * (size_t)d->dims[1] * (size_t)d->dims[2];
  return (size_t)d->n * (px + 1) * 4;
}

static void desc_of(const gs_nn_dataset *ds, split_desc *d) {
  d->n = ds->n;
  d->dims[0] = ds->c;
  d->dims[1] = ds->h;
  d->dims[2] = ds->w;
  d->dims[3] = ds->classes;
}

static void put_desc(unsigned char *p, const split_desc *d) {
  memcpy(p, &d->n, 8);
  memcpy(p + 8, d->dims, 16);
  memcpy(p + 24, &d->offset, 8);
}

/* ---- Reading ------------------------------------------------------------------ */

/* Checks a split's description against the file (no allocation or mapping
 * from a corrupt header); `from` is where the split may begin. */
static int check_desc(const split_desc *d, uint64_t from, uint64_t file_size, char *why,
                      size_t wn) {
  const int32_t *x = d->dims;
  if (x[0] <= 0 || x[1] <= 0 || x[2] <= 0 || x[3] <= 0 || x[0] > 64 || x[1] > 4096 ||
      x[2] > 4096 || x[3] > 1000000 || d->n == 0) {
    snprintf(why, wn, "impossible sizes (%llu samples of %dx%dx%d)", (unsigned long long)d->n,
             x[0], x[1], x[2]);
    return -1;
  }
  uint64_t px = (uint64_t)x[0] * (uint64_t)x[1] * (uint64_t)x[2];
  if (d->offset % CACHE_ALIGN != 0 || d->offset < from || d->offset > file_size ||
      d->n > (file_size - d->offset) / ((px + 1) * 4)) {
    snprintf(why, wn, "truncated (%llu samples announced at offset %llu of %llu bytes)",
             (unsigned long long)d->n, (unsigned long long)d->offset,
             (unsigned long long)file_size);
    return -1;
  }
  return 0;
}

/* CRC-32 of n bytes at p (zlib's crc32 takes an unsigned int a call). */
static uLong crc_big(uLong crc, const unsigned char *p, size_t n) {
  while (n > 0) {
    uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
    crc = crc32(crc, p, k);
    p += k;
    n -= k;
  }
  return crc;
}

/* Maps split d of fd read-only into ds. */
static int map_split(int fd, const split_desc *d, gs_nn_dataset *ds, char *why, size_t wn) {
  size_t bytes = split_bytes(d);
  void *m = mmap(NULL, bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, (off_t)d->offset);
  if (m == MAP_FAILED) {
    snprintf(why, wn, "cannot map %zu bytes: %s", bytes, strerror(errno));
    return -1;
  }
  size_t px = (size_t)d->dims[0] * (size_t)d->dims[1] * (size_t)d->dims[2];
  ds->n = (size_t)d->n;
  ds->c = d->dims[0];
  ds->h = d->dims[1];
  ds->w = d->dims[2];
  ds->classes = d->dims[3];
  ds->images = m;
  ds->labels = (int32_t *)((char *)m + ds->n * px * sizeof(float));
  ds->mapped = bytes;
  return 0;
}

/* Reads path into train and test (mapped): CACHE_HIT, CACHE_MISS (no file)
 * or CACHE_CORRUPT with why filled (nothing then stays mapped). On a hit
 * *train_crc is the CRC-32 of train's images then labels. */
static cache_outcome cache_read(const char *path, const char *identity, gs_nn_dataset *train,
                                gs_nn_dataset *test, uint32_t *train_crc, char *why,
                                size_t wn) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, wn, "%s", strerror(errno));
    return errno == ENOENT ? CACHE_MISS : CACHE_CORRUPT;
  }
  struct stat sb;
  uint64_t size = fstat(fd, &sb) == 0 ? (uint64_t)sb.st_size : 0;
  size_t idlen = strlen(identity), hdr_len = header_bytes(idlen);
  unsigned char *hdr = gs_malloc(hdr_len);
  split_desc d[2];
  int bad = hdr == NULL;
  if (bad) snprintf(why, wn, "out of memory");
  if (!bad && (size < 16 || pread(fd, hdr, 16, 0) != 16)) {
    snprintf(why, wn, "truncated");
    bad = 1;
  }
  uint32_t version = 0, flen = 0;
  if (!bad) {
    memcpy(&version, hdr + 8, 4);
    memcpy(&flen, hdr + 12, 4);
    if (memcmp(hdr, CACHE_MAGIC, 8) != 0 || version != CACHE_VERSION) {
      snprintf(why, wn, "not a data cache of this version");
      bad = 1;
    } else if (flen != idlen) {
      snprintf(why, wn, "it holds another source (an identity of %u bytes)", flen);
      bad = 1;
    }
  }
  if (!bad && (size < hdr_len ||
               pread(fd, hdr + 16, hdr_len - 16, 16) != (ssize_t)(hdr_len - 16))) {
    snprintf(why, wn, "truncated");
    bad = 1;
  }
  if (!bad && memcmp(hdr + 16, identity, idlen) != 0) {
    snprintf(why, wn, "it holds another source (%.*s)", (int)(idlen < 200 ? idlen : 200),
             (const char *)hdr + 16);
    bad = 1;
  }
  for (int k = 0; k < 2 && !bad; k++) {
    const unsigned char *p = hdr + 16 + idlen + k * SPLIT_DESC_BYTES;
    memcpy(&d[k].n, p, 8);
    memcpy(d[k].dims, p + 8, 16);
    memcpy(&d[k].offset, p + 24, 8);
    uint64_t from = k == 0 ? hdr_len : d[0].offset + split_bytes(&d[0]);
    bad = check_desc(&d[k], from, size, why, wn);
  }
  if (!bad && size != d[1].offset + split_bytes(&d[1]) + 4) {
    snprintf(why, wn, "%s", size < d[1].offset + split_bytes(&d[1]) + 4 ? "truncated"
                                                                          : "trailing bytes");
    bad = 1;
  }
  if (!bad) bad = map_split(fd, &d[0], train, why, wn) || map_split(fd, &d[1], test, why, wn);
  uint32_t stored = 0;
  if (!bad && pread(fd, &stored, 4, (off_t)(size - 4)) != 4) {
    snprintf(why, wn, "truncated");
    bad = 1;
  }
  if (!bad) {
    uLong crc = crc32(crc32(0L, Z_NULL, 0), hdr, (uInt)hdr_len);
    uLong c0 = crc_big(crc32(0L, Z_NULL, 0), (const unsigned char *)train->images,
                       split_bytes(&d[0]));
    uLong c1 = crc_big(crc32(0L, Z_NULL, 0), (const unsigned char *)test->images,
                       split_bytes(&d[1]));
    crc = crc32_combine(crc32_combine(crc, c0, (z_off_t)split_bytes(&d[0])), c1,
                        (z_off_t)split_bytes(&d[1]));
    if (stored != (uint32_t)crc) {
      snprintf(why, wn, "checksum mismatch (stored %08x, computed %08lx)", stored,
               (unsigned long)crc);
      bad = 1;
    }
    *train_crc = (uint32_t)c0;
  }
  gs_free(hdr);
  close(fd); /* the mappings stay */
  if (bad) {
    gs_nn_dataset_free(train);
    gs_nn_dataset_free(test);
    return CACHE_CORRUPT;
  }
  return CACHE_HIT;
}

/* ---- Writing ------------------------------------------------------------------ */

typedef struct {
  int fd;
  uLong crc;
} cache_writer;

static int wr(cache_writer *w, const void *buf, size_t n) {
  const unsigned char *p = buf;
  size_t left = n;
  while (left > 0) {
    ssize_t k = write(w->fd, p, left > (1u << 30) ? (1u << 30) : left);
    if (k < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    w->crc = crc32(w->crc, p, (uInt)k);
    p += k;
    left -= (size_t)k;
  }
  return 0;
}

/* Zeros up to offset `to` (the writer is at `at`); not in the CRC. */
static int pad_to(cache_writer *w, size_t at, size_t to) {
  static const unsigned char zeros[CACHE_ALIGN];
  while (at < to) {
    size_t k = to - at < sizeof zeros ? to - at : sizeof zeros;
    ssize_t r = write(w->fd, zeros, k);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    at += (size_t)r;
  }
  return 0;
}

static gs_status cache_write(const char *path, const char *identity,
                             const gs_nn_dataset *train, const gs_nn_dataset *test) {
  char tmp[PATH_MAX + 64];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  cache_writer w = {.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644),
                    .crc = crc32(0L, Z_NULL, 0)};
  if (w.fd < 0)
    return gs_error(GS_ERR_IO, "data cache: cannot create %s: %s", tmp, strerror(errno));
  uint32_t version = CACHE_VERSION, idlen = (uint32_t)strlen(identity);
  const gs_nn_dataset *ds[2] = {train, test};
  split_desc d[2];
  unsigned char desc[2][SPLIT_DESC_BYTES];
  size_t at = header_bytes(idlen);
  for (int k = 0; k < 2; k++) {
    desc_of(ds[k], &d[k]);
    d[k].offset = align_up(at);
    at = d[k].offset + split_bytes(&d[k]);
    put_desc(desc[k], &d[k]);
  }
  int bad = wr(&w, CACHE_MAGIC, 8) || wr(&w, &version, 4) || wr(&w, &idlen, 4) ||
            wr(&w, identity, idlen) || wr(&w, desc, sizeof desc);
  at = header_bytes(idlen);
  for (int k = 0; k < 2 && !bad; k++) {
    size_t px = (size_t)ds[k]->c * ds[k]->h * ds[k]->w;
    bad = pad_to(&w, at, d[k].offset) ||
          wr(&w, ds[k]->images, ds[k]->n * px * sizeof(float)) ||
          wr(&w, ds[k]->labels, ds[k]->n * sizeof(int32_t));
    at = d[k].offset + split_bytes(&d[k]);
  }
  if (!bad) {
    uint32_t crc = (uint32_t)w.crc;
    bad = wr(&w, &crc, 4) || fsync(w.fd) != 0;
  }
  int err = errno;
  if (close(w.fd) != 0 && !bad) {
    bad = 1;
    err = errno;
  }
  if (!bad && rename(tmp, path) != 0) {
    bad = 1;
    err = errno;
  }
  if (bad) {
    unlink(tmp);
    return gs_error(GS_ERR_IO, "data cache: cannot write %s: %s", path, strerror(err));
  }
  return GS_OK;
}

/* ---- The protocol --------------------------------------------------------------- */

/* Which ranks share DIR: the host and the directory's device and inode. */
static uint64_t sharing_group(const char *dir) {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  struct stat sb;
  memset(&sb, 0, sizeof sb);
  stat(dir, &sb);
  uLong a = crc32(0L, (const Bytef *)host, (uInt)strlen(host));
  uint64_t dev = (uint64_t)sb.st_dev, ino = (uint64_t)sb.st_ino;
  uLong b = crc32(a, (const Bytef *)&dev, sizeof dev);
  b = crc32(b, (const Bytef *)&ino, sizeof ino);
  return ((uint64_t)a << 32) ^ (uint64_t)b ^ ino;
}

typedef struct {
  uint64_t group;
  int32_t outcome; /* cache_outcome, or -1: this rank could not use the cache */
  int32_t pad;
} cache_rec;

/* Whether st is bad input (gs_train_agree_outcome's usage exit). */
static int bad_input(gs_status st) { return st == GS_ERR_INVALID_ARG || st == GS_ERR_PARSE; }

/* Returns gs_train_agree_outcome's verdict on a failure (2: bad input,
 * every rank alike; 1: else), 0 when the data are in train and test. */
int train_data_cached(train_ctx *t, gs_nn_dataset *train, gs_nn_dataset *test,
                      gs_status *st_out) {
  const gs_train_config *c = t->cfg;
  const gs_train_ranks *ranks = t->ranks;
  char identity[IDENTITY_MAX], path[PATH_MAX + 64] = "", why[512] = "";
  *st_out = GS_OK;
  /* 1. The directory, the source's identity, the cache file. A directory
   * that cannot be created or written is bad input, refused at start-up
   * like --checkpoint's (exit 2, said once with the usage note): until
   * 2026-12-07 it was GS_ERR_IO, agreed as a failure of the run (exit 1),
   * and an elastic job relaunched a job that could never succeed. */
  gs_status st = GS_OK;
  if (mkdir(c->data_cache, 0777) != 0 && errno != EEXIST)
    st = gs_error(GS_ERR_INVALID_ARG, "%s %s: cannot create the directory: %s",
                  train_option(c, "data_cache"), c->data_cache, strerror(errno));
  if (st == GS_OK) {
    char what[PATH_MAX + 32];
    snprintf(what, sizeof what, "%s %s", train_option(c, "data_cache"), c->data_cache);
    st = gs_train_probe_dir(c->data_cache, what);
    if (st == GS_ERR_IO) st = gs_error(GS_ERR_INVALID_ARG, "%s", gs_last_error());
  }
  if (st == GS_OK) st = source_identity(c, identity, sizeof identity);
  /* A failure here is this rank's: agreed before anything else. */
  int agreed = gs_train_agree_outcome(ranks, st);
  if (agreed) return agreed;
  cache_file(c, identity, path, sizeof path);
  uint32_t crc = 0;
  cache_outcome mine = cache_read(path, identity, train, test, &crc, why, sizeof why);
  if (mine == CACHE_CORRUPT)
    gs_train_rank_error(ranks, "note: data cache %s is unusable (%s): rebuilding it", path,
                        why);

  /* 2. Who shares the directory, and who missed. */
  cache_rec rec = {.group = sharing_group(c->data_cache), .outcome = (int32_t)mine};
  cache_rec *all = gs_calloc((size_t)ranks->size, sizeof *all);
  st = all ? GS_OK : gs_error(GS_ERR_NOMEM, "out of memory for %d ranks' cache records",
                              ranks->size);
  if (gs_train_agree_status(ranks, st)) {
    gs_free(all);
    return 1;
  }
  st = gs_allgather(ranks->comm, &rec, all, sizeof rec, GS_U8, GS_ALGO_MPI);
  if (gs_train_agree_status(ranks, st)) {
    gs_free(all);
    return 1;
  }
  int writer = -1, corrupt_seen = 0;
  for (int k = 0; k < ranks->size; k++)
    if (all[k].group == rec.group && all[k].outcome != CACHE_HIT) {
      if (writer < 0) writer = k;
      corrupt_seen |= all[k].outcome == CACHE_CORRUPT;
    }
  gs_free(all);

  /* 3. The writer of each group reads the source and writes the cache. */
  st = GS_OK;
  if (writer == ranks->rank) {
    st = train_load_data(c, train, test);
    if (st == GS_OK) st = train_check_data(c, train, 1);
    if (st == GS_OK) st = train_check_data(c, test, 0);
    if (st == GS_OK) st = cache_write(path, identity, train, test);
  }
  /* A source that a writer found bad (missing, truncated: bad input) is
   * read by every other rank too, so that all fail alike: said once, the
   * usage exit (2). Until 2026-12-07 only the writers failed, and the job
   * ended with 1 (a failure of the run, which an elastic job relaunched). */
  int32_t bad = writer == ranks->rank && bad_input(st), any_bad = 0;
  gs_status ast = gs_allreduce(ranks->comm, &bad, &any_bad, 1, GS_I32, GS_MAX, GS_ALGO_MPI);
  if (gs_train_agree_status(ranks, ast)) return 1;
  if (any_bad && writer != ranks->rank) {
    gs_nn_dataset src_train = {0}, src_test = {0};
    st = train_load_data(c, &src_train, &src_test);
    if (st == GS_OK) st = train_check_data(c, &src_train, 1);
    if (st == GS_OK) st = train_check_data(c, &src_test, 0);
    gs_nn_dataset_free(&src_train);
    gs_nn_dataset_free(&src_test);
  }
  /* 4. Agreement on the writers; then the others that missed read it. */
  agreed = gs_train_agree_outcome(ranks, st);
  if (agreed) return agreed;
  if (writer >= 0)
    train_note(t, "data: rank %d read the source and %s the cache %s", writer,
               corrupt_seen ? "rebuilt" : "wrote", path);
  if (mine != CACHE_HIT && writer != ranks->rank) {
    if (cache_read(path, identity, train, test, &crc, why, sizeof why) != CACHE_HIT)
      *st_out = train_load_data(c, train, test); /* not shared after all: the source */
    else
      t->data_crc_known = 1;
  }
  if (mine == CACHE_HIT) t->data_crc_known = 1;
  t->data_crc = crc;
  t->data_origin = mine == CACHE_HIT ? "cache" : writer >= 0 && corrupt_seen ? "rebuilt cache"
                                                                            : "written cache";
  if (mine == CACHE_HIT) train_note(t, "data: read from the cache %s", path);
  return 0;
}
