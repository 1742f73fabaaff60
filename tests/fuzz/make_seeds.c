/*
 * Writes the seed inputs of the fuzz targets that come from the library
 * itself: a checkpoint of the checkpoint target's net (with and without
 * momentum), a saved cost file for the cost target's topology, and small
 * IDX files (plain and gzip). scripts/fuzz.sh runs it when a corpus
 * directory is empty; the committed corpus was made with it.
 *   make_seeds CORPUS_DIR   (writes into CORPUS_DIR/<target>/)
 */
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "fuzz_ckpt_net.h"
#include "gradsync.h"

static int write_file(const char *path, const void *buf, size_t n, int gz) {
  if (gz) {
    gzFile f = gzopen(path, "wb");
    if (!f || gzwrite(f, buf, (unsigned)n) != (int)n) return 1;
    return gzclose(f) != Z_OK;
  }
  FILE *f = fopen(path, "wb");
  if (!f) return 1;
  int bad = fwrite(buf, 1, n, f) != n;
  return fclose(f) != 0 || bad;
}

static size_t idx_bytes(unsigned char *buf, int ndims, const uint32_t *dims) {
  unsigned char *p = buf;
  size_t count = 1;
  *p++ = 0;
  *p++ = 0;
  *p++ = 0x08;
  *p++ = (unsigned char)ndims;
  for (int i = 0; i < ndims; i++) {
    *p++ = (unsigned char)(dims[i] >> 24);
    *p++ = (unsigned char)(dims[i] >> 16);
    *p++ = (unsigned char)(dims[i] >> 8);
    *p++ = (unsigned char)dims[i];
    count *= dims[i];
  }
  for (size_t i = 0; i < count; i++) *p++ = (unsigned char)(i % 10);
  return (size_t)(p - buf);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const char *dir = argv[1];
  char path[4096];
  int bad = 0;

  gs_nn_net *net = fuzz_ckpt_net();
  gs_nn_sgd *opt = fuzz_ckpt_sgd(net);
  gs_nn_train_state st = {3, 120, 42};
  snprintf(path, sizeof path, "%s/checkpoint/seed_momentum.ckpt", dir);
  bad |= gs_nn_checkpoint_save(path, net, opt, &st) != GS_OK;
  snprintf(path, sizeof path, "%s/checkpoint/seed_plain.ckpt", dir);
  bad |= gs_nn_checkpoint_save(path, net, NULL, &st) != GS_OK;
  gs_nn_sgd_destroy(opt);
  gs_nn_net_destroy(net);

  gs_cost_params c;
  gs_cost_topo topo = {4, 2};
  bad |= gs_cost_preset("10GbE", &c) != GS_OK;
  snprintf(path, sizeof path, "%s/cost/seed_preset.json", dir);
  bad |= gs_cost_save(path, &c, topo) != GS_OK;
  c.fit[GS_ALGO_RING].alpha = 2e-5;
  c.fit[GS_ALGO_RING].beta = 1e-9;
  c.fit[GS_ALGO_RING].npoints = 3;
  const double xs[3] = {1024, 65536, 4194304}, ys[3] = {3e-5, 1e-4, 4e-3};
  memcpy(c.fit[GS_ALGO_RING].bytes, xs, sizeof xs);
  memcpy(c.fit[GS_ALGO_RING].secs, ys, sizeof ys);
  c.fit[GS_ALGO_HIER].alpha = 5e-5;
  c.fit[GS_ALGO_HIER].beta = 8e-10;
  snprintf(path, sizeof path, "%s/cost/seed_fits.json", dir);
  bad |= gs_cost_save(path, &c, topo) != GS_OK;

  unsigned char buf[256];
  uint32_t d3[3] = {4, 3, 5}, d1[1] = {6}, d2[2] = {2, 7};
  size_t n = idx_bytes(buf, 3, d3);
  snprintf(path, sizeof path, "%s/idx/seed_images.idx", dir);
  bad |= write_file(path, buf, n, 0);
  snprintf(path, sizeof path, "%s/idx/seed_images.idx.gz", dir);
  bad |= write_file(path, buf, n, 1);
  n = idx_bytes(buf, 1, d1);
  snprintf(path, sizeof path, "%s/idx/seed_labels.idx", dir);
  bad |= write_file(path, buf, n, 0);
  n = idx_bytes(buf, 2, d2);
  snprintf(path, sizeof path, "%s/idx/seed_2d.idx.gz", dir);
  bad |= write_file(path, buf, n, 1);
  if (bad) fprintf(stderr, "make_seeds: %s\n", gs_last_error());
  return bad;
}
