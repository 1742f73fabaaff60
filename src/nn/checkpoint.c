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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static gs_status write_body(gs_nn_file *w, const gs_nn_net *net,
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
  GS_CHECK(gs_nn_file_write(w, &h, sizeof h));
  for (size_t i = 0; i < net->nparams; i++) {
    uint64_t c = net->params[i].count;
    GS_CHECK(gs_nn_file_write(w, &c, sizeof c));
  }
  GS_CHECK(gs_nn_file_write(w, net->flat_w, net->total * sizeof(float)));
  GS_CHECK(gs_nn_file_write(w, net->buffers, net->nbuffers * sizeof(float)));
  if (opt) GS_CHECK(gs_nn_file_write(w, opt->momentum_buf, net->total * sizeof(float)));
  return GS_OK;
}

gs_status gs_nn_checkpoint_save_begin(const char *path, const gs_nn_net *net,
                                      const gs_nn_sgd *opt, const gs_nn_train_state *st,
                                      gs_nn_file *out) {
  if (!path || !net || !net->finalized)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_checkpoint_save: path NULL or net not finalized");
  if (opt && opt->net != net)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_checkpoint_save: the optimizer belongs to another net");
  GS_CHECK(gs_nn_file_create(out, path, "checkpoint"));
  gs_status s = write_body(out, net, opt, st);
  if (s == GS_OK) s = gs_nn_file_finish(out);
  if (s != GS_OK) gs_nn_file_abort(out);
  return s;
}

gs_status gs_nn_checkpoint_save(const char *path, const gs_nn_net *net,
                                const gs_nn_sgd *opt,
                                const gs_nn_train_state *st) {
  gs_nn_file w;
  GS_CHECK(gs_nn_checkpoint_save_begin(path, net, opt, st, &w));
  return gs_nn_file_sync(&w);
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
  GS_CHECK(gs_nn_file_read(path, "checkpoint", max, &data, &size));
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
  if (!gs_nn_file_crc_ok(data, size)) {
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
