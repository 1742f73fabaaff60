/*
 * --data-cache DIR: the decoded data set kept on local disk.
 *
 * Reading Fashion-MNIST means inflating four gzip files and normalising
 * every pixel; the cache keeps the result (both splits, as the loader
 * returns them) in DIR/fashion-<key>.gsdc, where key is a CRC-32 of the
 * source's identity (the directory's real path, each file's name, size and
 * modification time, the loader's normalisation). A later run with the same
 * source reads the floats back; the ranks that share DIR (on one node)
 * share one copy.
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
 * File layout (host byte order, like checkpoints):
 *   char magic[8] "GSDCACH1"; uint32 version 1; uint32 identity length;
 *   char identity[len]; per split (train, test): uint64 n; int32 c, h, w,
 *   classes; float images[n*c*h*w]; int32 labels[n]; then uint32 CRC-32 of
 *   everything before it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "train_internal.h"

static const char CACHE_MAGIC[8] = {'G', 'S', 'D', 'C', 'A', 'C', 'H', '1'};
enum { CACHE_VERSION = 1, IDENTITY_MAX = 8192 };
/* The loader's normalisation (nn.h): a change makes old caches misses. */
#define LOADER_ID "fashion-mnist (x/255-0.2860)/0.3530 v1"

typedef enum { CACHE_HIT = 0, CACHE_MISS, CACHE_CORRUPT } cache_outcome;

/* ---- The source's identity ------------------------------------------------- */

static gs_status source_identity(const gs_train_config *c, char *id, size_t n) {
  const char *dir = c->data_dir;
  if (!dir) dir = getenv("GRADSYNC_FASHION_MNIST_DIR");
  if (!dir || !*dir) dir = GS_NN_FASHION_MNIST_DIR;
  char real[PATH_MAX];
  if (realpath(dir, real) == NULL)
    return gs_error(GS_ERR_IO, "%s %s: %s", train_option(c, "data_dir"), dir,
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

/* ---- Reading ------------------------------------------------------------------ */

typedef struct {
  FILE *f;
  uLong crc;
  off_t left; /* bytes of the file not yet read */
} cache_reader;

static int rd(cache_reader *r, void *buf, size_t n) {
  if ((off_t)n > r->left || fread(buf, 1, n, r->f) != n) return -1;
  r->crc = crc32(r->crc, buf, (uInt)n);
  r->left -= (off_t)n;
  return 0;
}

/* Large arrays, in pieces (zlib's crc32 takes an unsigned int). */
static int rd_big(cache_reader *r, void *buf, size_t n) {
  unsigned char *p = buf;
  while (n > 0) {
    size_t k = n > (1u << 30) ? (1u << 30) : n;
    if (rd(r, p, k)) return -1;
    p += k;
    n -= k;
  }
  return 0;
}

static int read_split(cache_reader *r, gs_nn_dataset *ds, char *why, size_t wn) {
  uint64_t n;
  int32_t dims[4];
  if (rd(r, &n, sizeof n) || rd(r, dims, sizeof dims)) {
    snprintf(why, wn, "truncated");
    return -1;
  }
  if (dims[0] <= 0 || dims[1] <= 0 || dims[2] <= 0 || dims[3] <= 0 || dims[0] > 64 ||
      dims[1] > 4096 || dims[2] > 4096 || dims[3] > 1000000 || n == 0) {
    snprintf(why, wn, "impossible sizes (%llu samples of %dx%dx%d)", (unsigned long long)n,
             dims[0], dims[1], dims[2]);
    return -1;
  }
  size_t px = (size_t)dims[0] * (size_t)dims[1] * (size_t)dims[2];
  /* The samples must fit in what is left of the file: no allocation from
   * a corrupt count. */
  if (n > (uint64_t)r->left / ((px + 1) * 4)) {
    snprintf(why, wn, "truncated (%llu samples announced)", (unsigned long long)n);
    return -1;
  }
  ds->n = (size_t)n;
  ds->c = dims[0];
  ds->h = dims[1];
  ds->w = dims[2];
  ds->classes = dims[3];
  ds->images = gs_malloc(ds->n * px * sizeof(float));
  ds->labels = gs_malloc(ds->n * sizeof(int32_t));
  if (!ds->images || !ds->labels) {
    snprintf(why, wn, "out of memory for %zu samples", ds->n);
    return -1;
  }
  if (rd_big(r, ds->images, ds->n * px * sizeof(float)) ||
      rd_big(r, ds->labels, ds->n * sizeof(int32_t))) {
    snprintf(why, wn, "truncated");
    return -1;
  }
  return 0;
}

/* Reads path into train and test: CACHE_HIT, CACHE_MISS (no file) or
 * CACHE_CORRUPT with why filled (the data sets are then freed). */
static cache_outcome cache_read(const char *path, const char *identity, gs_nn_dataset *train,
                                gs_nn_dataset *test, char *why, size_t wn) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    snprintf(why, wn, "%s", strerror(errno));
    return errno == ENOENT ? CACHE_MISS : CACHE_CORRUPT;
  }
  struct stat sb;
  cache_reader r = {.f = f, .crc = crc32(0L, Z_NULL, 0)};
  r.left = fstat(fileno(f), &sb) == 0 ? sb.st_size : 0;
  char magic[8];
  uint32_t version = 0, idlen = 0;
  int bad = 0;
  if (rd(&r, magic, 8) || memcmp(magic, CACHE_MAGIC, 8) != 0 || rd(&r, &version, 4) ||
      version != CACHE_VERSION || rd(&r, &idlen, 4) || idlen > IDENTITY_MAX) {
    snprintf(why, wn, "not a data cache of this version");
    bad = 1;
  }
  char *id = bad ? NULL : gs_malloc((size_t)idlen + 1);
  if (!bad && (id == NULL || rd(&r, id, idlen))) {
    snprintf(why, wn, "truncated");
    bad = 1;
  }
  if (!bad) {
    id[idlen] = '\0';
    if (strcmp(id, identity) != 0) {
      snprintf(why, wn, "it holds another source (%.200s)", id);
      bad = 1;
    }
  }
  gs_free(id);
  if (!bad) bad = read_split(&r, train, why, wn) || read_split(&r, test, why, wn);
  if (!bad) {
    uLong want = r.crc;
    uint32_t stored;
    if (r.left != 4 || fread(&stored, 1, 4, f) != 4) {
      snprintf(why, wn, "%s", r.left < 4 ? "truncated" : "trailing bytes");
      bad = 1;
    } else if (stored != (uint32_t)want) {
      snprintf(why, wn, "checksum mismatch (stored %08x, computed %08lx)", stored,
               (unsigned long)want);
      bad = 1;
    }
  }
  fclose(f);
  if (bad) {
    gs_nn_dataset_free(train);
    gs_nn_dataset_free(test);
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
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

static int write_split(cache_writer *w, const gs_nn_dataset *ds) {
  uint64_t n = ds->n;
  int32_t dims[4] = {ds->c, ds->h, ds->w, ds->classes};
  size_t px = (size_t)ds->c * ds->h * ds->w;
  return wr(w, &n, sizeof n) || wr(w, dims, sizeof dims) ||
         wr(w, ds->images, ds->n * px * sizeof(float)) ||
         wr(w, ds->labels, ds->n * sizeof(int32_t));
}

static gs_status cache_write(const char *path, const char *identity,
                             const gs_nn_dataset *train, const gs_nn_dataset *test) {
  char tmp[PATH_MAX + 64];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  cache_writer w = {.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644),
                    .crc = crc32(0L, Z_NULL, 0)};
  if (w.fd < 0)
    return gs_error(GS_ERR_IO, "data cache: cannot create %s: %s", tmp, strerror(errno));
  uint32_t version = CACHE_VERSION, idlen = (uint32_t)strlen(identity);
  int bad = wr(&w, CACHE_MAGIC, 8) || wr(&w, &version, 4) || wr(&w, &idlen, 4) ||
            wr(&w, identity, idlen) || write_split(&w, train) || write_split(&w, test);
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

int train_data_cached(train_ctx *t, gs_nn_dataset *train, gs_nn_dataset *test,
                      gs_status *st_out) {
  const gs_train_config *c = t->cfg;
  const gs_train_ranks *ranks = t->ranks;
  char identity[IDENTITY_MAX], path[PATH_MAX + 64] = "", why[512] = "";
  *st_out = GS_OK;
  /* 1. The directory, the source's identity, the cache file. */
  gs_status st = GS_OK;
  if (mkdir(c->data_cache, 0777) != 0 && errno != EEXIST)
    st = gs_error(GS_ERR_IO, "%s %s: cannot create the directory: %s",
                  train_option(c, "data_cache"), c->data_cache, strerror(errno));
  if (st == GS_OK) {
    char what[PATH_MAX + 32];
    snprintf(what, sizeof what, "%s %s", train_option(c, "data_cache"), c->data_cache);
    st = gs_train_probe_dir(c->data_cache, what);
  }
  if (st == GS_OK) st = source_identity(c, identity, sizeof identity);
  /* A failure here is this rank's: agreed before anything else. */
  if (gs_train_agree_status(ranks, st)) return 1;
  cache_file(c, identity, path, sizeof path);
  cache_outcome mine = cache_read(path, identity, train, test, why, sizeof why);
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
  /* 4. Agreement on the writers; then the others that missed read it. */
  if (gs_train_agree_status(ranks, st)) return 1;
  if (writer >= 0)
    train_note(t, "data: rank %d read the source and %s the cache %s", writer,
               corrupt_seen ? "rebuilt" : "wrote", path);
  if (mine != CACHE_HIT && writer != ranks->rank) {
    if (cache_read(path, identity, train, test, why, sizeof why) != CACHE_HIT)
      *st_out = train_load_data(c, train, test); /* not shared after all: the source */
  }
  t->data_origin = mine == CACHE_HIT ? "cache" : writer >= 0 && corrupt_seen ? "rebuilt cache"
                                                                            : "written cache";
  if (mine == CACHE_HIT) train_note(t, "data: read from the cache %s", path);
  return 0;
}
