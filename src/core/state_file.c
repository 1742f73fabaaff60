/*
 * Durable state files (gs_internal.h, gs__state_file_*): written to a
 * temporary file in the target's directory, checksummed with zlib's crc32,
 * fsynced, renamed over the target and the directory fsynced, so a reader
 * sees the old file or the new one, never a mix. The DLRM checkpoints
 * (src/embed/dlrm_ckpt.c) write through here, and the NN library's
 * checkpoints through src/nn/file.c's gs_nn_file, which wraps these.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "gs_internal.h"

static unsigned long crc_update(unsigned long crc, const void *buf, size_t n) {
  /* crc32 takes a uInt length: feed large buffers in pieces. */
  const unsigned char *q = buf;
  for (size_t done = 0; done < n;) {
    size_t chunk = GS_MIN(n - done, (size_t)1 << 30);
    crc = crc32(crc, q + done, (uInt)chunk);
    done += chunk;
  }
  return crc;
}

uint32_t gs__crc32(uint32_t crc, const void *buf, size_t n) {
  return (uint32_t)crc_update(crc, buf, n);
}

gs_status gs__state_file_create(gs__state_file *f, const char *path, const char *what) {
  memset(f, 0, sizeof *f);
  f->fd = -1;
  if (!path || !what)
    return gs_error(GS_ERR_INVALID_ARG, "gs__state_file_create: a NULL argument");
  f->path = path;
  f->what = what;
  f->crc = crc32(0L, Z_NULL, 0);
  size_t n = strlen(path);
  f->tmp = gs_malloc(n + 16);
  if (!f->tmp) return gs_error(GS_ERR_NOMEM, "%s %s: out of memory", what, path);
  snprintf(f->tmp, n + 16, "%s.tmp.XXXXXX", path);
  f->fd = mkstemp(f->tmp);
  if (f->fd < 0) {
    gs_status s = gs_error(GS_ERR_IO, "%s %s: cannot create %s: %s", what, path, f->tmp,
                           strerror(errno));
    gs_free(f->tmp);
    f->tmp = NULL;
    return s;
  }
  return GS_OK;
}

gs_status gs__state_file_write(gs__state_file *f, const void *buf, size_t n) {
  const char *p = buf;
  size_t left = n;
  while (left > 0) {
    ssize_t r = write(f->fd, p, left);
    if (r < 0) {
      if (errno == EINTR) continue;
      return gs_error(GS_ERR_IO, "%s %s: write failed: %s", f->what, f->path, strerror(errno));
    }
    p += r;
    left -= (size_t)r;
  }
  if (!f->defer_crc) f->crc = crc_update(f->crc, buf, n);
  f->bytes += n;
  return GS_OK;
}

gs_status gs__state_file_crc_back(gs__state_file *f) {
  enum { CHUNK = 1 << 20 };
  unsigned char *buf = gs_malloc(CHUNK);
  if (buf == NULL) return gs_error(GS_ERR_NOMEM, "%s %s: out of memory", f->what, f->path);
  unsigned long crc = crc32(0L, Z_NULL, 0);
  gs_status s = GS_OK;
  for (size_t off = 0; off < f->bytes && s == GS_OK;) {
    ssize_t r = pread(f->fd, buf, GS_MIN((size_t)CHUNK, f->bytes - off), (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      s = gs_error(GS_ERR_IO, "%s %s: reading back %s failed: %s", f->what, f->path, f->tmp,
                   r < 0 ? strerror(errno) : "cut short");
    else {
      crc = crc_update(crc, buf, (size_t)r);
      off += (size_t)r;
    }
  }
  gs_free(buf);
  if (s == GS_OK) {
    f->crc = crc;
    f->defer_crc = 0;
  }
  return s;
}

void gs__state_file_abort(gs__state_file *f) {
  if (f->fd >= 0) close(f->fd);
  if (f->tmp) unlink(f->tmp);
  gs_free(f->tmp);
  f->fd = -1;
  f->tmp = NULL;
}

gs_status gs__state_file_finish(gs__state_file *f) {
  uint32_t crc = (uint32_t)f->crc;
  return gs__state_file_write(f, &crc, sizeof crc);
}

gs_status gs__state_file_sync(gs__state_file *f) {
  gs_status s = GS_OK;
  if (fsync(f->fd) != 0)
    s = gs_error(GS_ERR_IO, "%s %s: fsync failed: %s", f->what, f->path, strerror(errno));
  int fd = f->fd;
  f->fd = -1;
  if (close(fd) != 0 && s == GS_OK)
    s = gs_error(GS_ERR_IO, "%s %s: close failed: %s", f->what, f->path, strerror(errno));
  if (s == GS_OK && rename(f->tmp, f->path) != 0)
    s = gs_error(GS_ERR_IO, "%s %s: rename from %s failed: %s", f->what, f->path, f->tmp,
                 strerror(errno));
  if (s != GS_OK) {
    gs__state_file_abort(f);
    return s;
  }
  gs_free(f->tmp);
  f->tmp = NULL;
  gs__sync_dir_of(f->path);
  return GS_OK;
}

gs_status gs__state_file_commit(gs__state_file *f) {
  gs_status s = gs__state_file_finish(f);
  if (s != GS_OK) {
    gs__state_file_abort(f);
    return s;
  }
  return gs__state_file_sync(f);
}

void gs__sync_dir_of(const char *path) {
  /* A rename or an unlink is durable once the directory itself is synced. */
  char *dir = gs_malloc(strlen(path) + 1);
  if (dir == NULL) return;
  strcpy(dir, path);
  int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
  gs_free(dir);
}

gs_status gs__state_file_read(const char *path, const char *what, size_t max,
                              unsigned char **data, size_t *size) {
  *data = NULL;
  *size = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return gs_error(GS_ERR_IO, "%s %s: %s", what, path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(f);
    return gs_error(GS_ERR_IO, "%s %s: not a regular file", what, path);
  }
  if ((unsigned long long)sb.st_size > max) {
    fclose(f);
    return gs_error(GS_ERR_PARSE, "%s %s: %lld bytes, more than the %zu it can have here "
                    "(not a %s of this model)", what, path, (long long)sb.st_size, max, what);
  }
  size_t n = (size_t)sb.st_size;
  unsigned char *buf = gs_malloc(n ? n : 1);
  if (!buf) {
    fclose(f);
    return gs_error(GS_ERR_NOMEM, "%s %s: out of memory for %zu bytes", what, path, n);
  }
  if (fread(buf, 1, n, f) != n) {
    fclose(f);
    gs_free(buf);
    return gs_error(GS_ERR_IO, "%s %s: read failed", what, path);
  }
  fclose(f);
  *data = buf;
  *size = n;
  return GS_OK;
}

int gs__state_file_crc_ok(const unsigned char *data, size_t size) {
  uint32_t crc_file;
  if (size < sizeof crc_file) return 0;
  memcpy(&crc_file, data + size - sizeof crc_file, sizeof crc_file);
  return gs__crc32(0, data, size - sizeof crc_file) == crc_file;
}
