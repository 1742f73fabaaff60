/*
 * Durable state files (gradsync/nn.h, "State files"): gs_nn_file is the
 * NN library's name for the core's durable file (src/core/state_file.c,
 * gs__state_file_*): written to a temporary file in the target's directory,
 * checksummed with zlib's crc32, fsynced, renamed over the target and the
 * directory fsynced, so a reader sees the old file or the new one, never a
 * mix. Checkpoints and K-FAC's per-rank state write through here, the DLRM
 * checkpoints (src/embed) through the core's functions directly.
 */
#include "nn_internal.h"

static gs__state_file to_core(const gs_nn_file *f) {
  return (gs__state_file){f->fd, f->path, f->what, f->tmp, f->crc, 0, 0};
}

static void from_core(gs_nn_file *f, const gs__state_file *c) {
  f->fd = c->fd;
  f->path = c->path;
  f->what = c->what;
  f->tmp = c->tmp;
  f->crc = c->crc;
}

gs_status gs_nn_file_create(gs_nn_file *f, const char *path, const char *what) {
  gs__state_file c;
  gs_status st = gs__state_file_create(&c, path, what);
  from_core(f, &c);
  return st;
}

/* Each wrapper runs the core's function on a copy and copies it back. */
#define NN_FILE_CALL(f, call)    \
  gs__state_file c = to_core(f); \
  gs_status st = (call);         \
  from_core(f, &c);              \
  return st

gs_status gs_nn_file_write(gs_nn_file *f, const void *buf, size_t n) {
  NN_FILE_CALL(f, gs__state_file_write(&c, buf, n));
}

gs_status gs_nn_file_commit(gs_nn_file *f) { NN_FILE_CALL(f, gs__state_file_commit(&c)); }
gs_status gs_nn_file_finish(gs_nn_file *f) { NN_FILE_CALL(f, gs__state_file_finish(&c)); }
gs_status gs_nn_file_sync(gs_nn_file *f) { NN_FILE_CALL(f, gs__state_file_sync(&c)); }

void gs_nn_file_abort(gs_nn_file *f) {
  gs__state_file c = to_core(f);
  gs__state_file_abort(&c);
  from_core(f, &c);
}

gs_status gs_nn_file_read(const char *path, const char *what, size_t max,
                          unsigned char **data, size_t *size) {
  return gs__state_file_read(path, what, max, data, size);
}

int gs_nn_file_crc_ok(const unsigned char *data, size_t size) {
  return gs__state_file_crc_ok(data, size);
}
