/*
 * Checkpoints: one file with the whole training state, written atomically.
 *
 * Layout (host byte order; a checkpoint is read back on the machine type
 * that wrote it):
 *   char     magic[8]      "GSNNCKP\0"
 *   uint32   version       1
 *   uint32   flags         bit 0: momentum present
 *   uint64   tensors, total, buffers
 *   int64    epoch, step
 *   uint64   seed, rng
 *   float    lr;  uint32 reserved
 *   uint64   count[tensors]
 *   float    weights[total], buffers[buffers], momentum[total] (if flag)
 *   uint32   crc32 of everything before it (zlib's crc32)
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "nn_internal.h"

static const char CKPT_MAGIC[8] = {'G', 'S', 'N', 'N', 'C', 'K', 'P', 0};
#define CKPT_VERSION 1u

typedef struct {
  char magic[8];
  uint32_t version, flags;
  uint64_t tensors, total, buffers;
  int64_t epoch, step;
  uint64_t seed, rng;
  float lr;
  uint32_t reserved;
} ckpt_header;

typedef struct {
  int fd;
  const char *path;
  uLong crc;
} ckpt_writer;

static gs_status write_all(ckpt_writer *w, const void *buf, size_t n) {
  const char *p = buf;
  size_t left = n;
  while (left > 0) {
    ssize_t r = write(w->fd, p, left);
    if (r < 0) {
      if (errno == EINTR) continue;
      return gs_error(GS_ERR_IO, "checkpoint %s: write failed: %s", w->path,
                      strerror(errno));
    }
    p += r;
    left -= (size_t)r;
  }
  /* crc32 takes a uInt length: feed large buffers in pieces. */
  const unsigned char *q = buf;
  for (size_t done = 0; done < n;) {
    size_t chunk = GS_MIN(n - done, (size_t)1 << 30);
    w->crc = crc32(w->crc, q + done, (uInt)chunk);
    done += chunk;
  }
  return GS_OK;
}

static gs_status write_body(ckpt_writer *w, const gs_nn_net *net,
                            const gs_nn_sgd *opt, const gs_nn_train_state *st) {
  ckpt_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, CKPT_MAGIC, sizeof h.magic);
  h.version = CKPT_VERSION;
  h.flags = opt ? 1u : 0u;
  h.tensors = net->nparams;
  h.total = net->total;
  h.buffers = net->nbuffers;
  h.epoch = st ? st->epoch : 0;
  h.step = st ? st->step : 0;
  h.seed = st ? st->seed : 0;
  h.rng = net->rng;
  h.lr = opt ? opt->cfg.lr : 0.0f;
  GS_CHECK(write_all(w, &h, sizeof h));
  for (size_t i = 0; i < net->nparams; i++) {
    uint64_t c = net->params[i].count;
    GS_CHECK(write_all(w, &c, sizeof c));
  }
  GS_CHECK(write_all(w, net->flat_w, net->total * sizeof(float)));
  GS_CHECK(write_all(w, net->buffers, net->nbuffers * sizeof(float)));
  if (opt) GS_CHECK(write_all(w, opt->momentum_buf, net->total * sizeof(float)));
  uint32_t crc = (uint32_t)w->crc;
  return write_all(w, &crc, sizeof crc);
}

gs_status gs_nn_checkpoint_save(const char *path, const gs_nn_net *net,
                                const gs_nn_sgd *opt,
                                const gs_nn_train_state *st) {
  if (!path || !net || !net->finalized)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_checkpoint_save: path NULL or net not finalized");
  if (opt && opt->net != net)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_checkpoint_save: the optimizer belongs to another net");
  size_t n = strlen(path);
  char *tmp = gs_malloc(n + 16);
  char *dir = gs_malloc(n + 2);
  if (!tmp || !dir) {
    gs_free(tmp);
    gs_free(dir);
    return GS_ERR_NOMEM;
  }
  snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
  memcpy(dir, path, n + 1);
  gs_status s = GS_OK;
  ckpt_writer w = {mkstemp(tmp), path, crc32(0L, Z_NULL, 0)};
  if (w.fd < 0) {
    s = gs_error(GS_ERR_IO, "checkpoint %s: cannot create %s: %s", path, tmp,
                 strerror(errno));
    goto out;
  }
  s = write_body(&w, net, opt, st);
  if (s == GS_OK && fsync(w.fd) != 0)
    s = gs_error(GS_ERR_IO, "checkpoint %s: fsync failed: %s", path, strerror(errno));
  if (close(w.fd) != 0 && s == GS_OK)
    s = gs_error(GS_ERR_IO, "checkpoint %s: close failed: %s", path, strerror(errno));
  if (s == GS_OK && rename(tmp, path) != 0)
    s = gs_error(GS_ERR_IO, "checkpoint %s: rename from %s failed: %s", path,
                 tmp, strerror(errno));
  if (s != GS_OK) {
    unlink(tmp);
    goto out;
  }
  /* The rename is durable once the directory itself is synced. */
  int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
out:
  gs_free(tmp);
  gs_free(dir);
  return s;
}

/* Reads a whole checkpoint, which must be a regular file of at most `max`
 * bytes: the largest checkpoint the net can have. A file above that (or a
 * header claiming so) fails before anything is allocated for it. */
static gs_status read_file(const char *path, size_t max, unsigned char **data,
                           size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return gs_error(GS_ERR_IO, "checkpoint %s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(f);
    return gs_error(GS_ERR_IO, "checkpoint %s: not a regular file", path);
  }
  if ((unsigned long long)sb.st_size > max) {
    fclose(f);
    return gs_error(GS_ERR_PARSE,
                    "checkpoint %s: %lld bytes, more than the %zu a checkpoint "
                    "of this net has (not a checkpoint of this model)", path,
                    (long long)sb.st_size, max);
  }
  size_t n = (size_t)sb.st_size;
  unsigned char *buf = gs_malloc(n ? n : 1);
  if (!buf) {
    fclose(f);
    return gs_error(GS_ERR_NOMEM, "checkpoint %s: out of memory for %zu bytes",
                    path, n);
  }
  if (fread(buf, 1, n, f) != n) {
    fclose(f);
    gs_free(buf);
    return gs_error(GS_ERR_IO, "checkpoint %s: read failed", path);
  }
  fclose(f);
  *data = buf;
  *size = n;
  return GS_OK;
}

gs_status gs_nn_checkpoint_load(const char *path, gs_nn_net *net,
                                gs_nn_sgd *opt, gs_nn_train_state *st) {
  if (!path || !net || !net->finalized)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_checkpoint_load: path NULL or net not finalized");
  if (opt && opt->net != net)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_checkpoint_load: the optimizer belongs to another net");
  /* The size of this net's checkpoint with momentum, the largest one. */
  size_t max = sizeof(ckpt_header) + net->nparams * sizeof(uint64_t) +
               (2 * net->total + net->nbuffers) * sizeof(float) + sizeof(uint32_t);
  unsigned char *data = NULL;
  size_t size = 0;
  GS_CHECK(read_file(path, max, &data, &size));
  gs_status s = GS_OK;
  ckpt_header h;
  if (size < sizeof h + sizeof(uint32_t)) {
    s = gs_error(GS_ERR_PARSE, "checkpoint %s: truncated (%zu bytes)", path, size);
    goto out;
  }
  memcpy(&h, data, sizeof h);
  if (memcmp(h.magic, CKPT_MAGIC, sizeof h.magic) != 0) {
    s = gs_error(GS_ERR_PARSE, "checkpoint %s: bad magic: not a gradsync nn "
                 "checkpoint", path);
    goto out;
  }
  if (h.version != CKPT_VERSION) {
    s = gs_error(GS_ERR_PARSE, "checkpoint %s: version %u, this build reads %u",
                 path, h.version, CKPT_VERSION);
    goto out;
  }
  if (h.tensors != net->nparams || h.total != net->total ||
      h.buffers != net->nbuffers) {
    s = gs_error(GS_ERR_PARSE,
                 "checkpoint %s: written for %llu tensors / %llu parameters / "
                 "%llu buffers, the net has %zu / %zu / %zu", path,
                 (unsigned long long)h.tensors, (unsigned long long)h.total,
                 (unsigned long long)h.buffers, net->nparams, net->total,
                 net->nbuffers);
    goto out;
  }
  if (h.flags & ~1u) {
    s = gs_error(GS_ERR_PARSE, "checkpoint %s: unknown flags 0x%x (this build "
                 "knows 0x1, momentum)", path, h.flags);
    goto out;
  }
  int has_mom = (h.flags & 1u) != 0;
  size_t expect = sizeof h + h.tensors * sizeof(uint64_t) +
                  (h.total * (has_mom ? 2 : 1) + h.buffers) * sizeof(float) +
                  sizeof(uint32_t);
  if (size != expect) {
    s = gs_error(GS_ERR_PARSE, "checkpoint %s: %zu bytes, expected %zu (%s)",
                 path, size, expect, size < expect ? "truncated" : "trailing bytes");
    goto out;
  }
  uint32_t crc_file;
  memcpy(&crc_file, data + size - sizeof crc_file, sizeof crc_file);
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t done = 0; done < size - sizeof crc_file;) {
    size_t chunk = GS_MIN(size - sizeof crc_file - done, (size_t)1 << 30);
    crc = crc32(crc, data + done, (uInt)chunk);
    done += chunk;
  }
  if ((uint32_t)crc != crc_file) {
    s = gs_error(GS_ERR_PARSE, "checkpoint %s: checksum mismatch (corrupt file)",
                 path);
    goto out;
  }
  /* A file with a valid checksum can still say nonsense (written by a
   * bug, or crafted): the training state must be one a run can resume. */
  if (h.epoch < 0 || h.step < 0 || (has_mom && !(isfinite(h.lr) && h.lr >= 0))) {
    s = gs_error(GS_ERR_PARSE,
                 "checkpoint %s: bad training state (epoch %lld, step %lld, lr "
                 "%g): expected epoch, step >= 0 and a finite lr >= 0", path,
                 (long long)h.epoch, (long long)h.step, (double)h.lr);
    goto out;
  }
  const unsigned char *p = data + sizeof h;
  for (size_t i = 0; i < net->nparams; i++, p += sizeof(uint64_t)) {
    uint64_t c;
    memcpy(&c, p, sizeof c);
    if (c != net->params[i].count) {
      s = gs_error(GS_ERR_PARSE,
                   "checkpoint %s: tensor %zu (%s) has %llu values in the file, "
                   "%zu in the net", path, i, net->params[i].name,
                   (unsigned long long)c, net->params[i].count);
      goto out;
    }
  }
  memcpy(net->flat_w, p, net->total * sizeof(float));
  p += net->total * sizeof(float);
  memcpy(net->buffers, p, net->nbuffers * sizeof(float));
  p += net->nbuffers * sizeof(float);
  if (opt) {
    if (has_mom)
      memcpy(opt->momentum_buf, p, net->total * sizeof(float));
    else
      memset(opt->momentum_buf, 0, net->total * sizeof(float));
    opt->cfg.lr = has_mom ? h.lr : opt->cfg.lr;
  }
  net->rng = h.rng;
  if (st) {
    st->epoch = h.epoch;
    st->step = h.step;
    st->seed = h.seed;
  }
out:
  gs_free(data);
  return s;
}
