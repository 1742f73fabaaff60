/*
 * Fuzz target: the checkpoint loader (gs_nn_checkpoint_load) into a small
 * net with an optimizer. A checkpoint ends in a CRC32 of everything before
 * it, which random mutations almost never keep right; so each input is
 * loaded twice: as it is, and with its last four bytes replaced by the
 * checksum of the rest, which lets the fuzzer reach the checks behind the
 * checksum (per-tensor sizes, the training state). A failed load must leave
 * the net and optimizer untouched.
 */
#include <zlib.h>

#include "fuzz_ckpt_net.h"
#include "fuzz_common.h"

static gs_nn_net *net;
static gs_nn_sgd *opt;

static void release(void) {
  gs_nn_sgd_destroy(opt);
  gs_nn_net_destroy(net);
}

static void load(const uint8_t *data, size_t size) {
  size_t nw = gs_nn_param_total(net);
  float *before = malloc(nw * sizeof(float));
  if (!before) abort();
  memcpy(before, gs_nn_weights_flat(net), nw * sizeof(float));
  const char *path = fuzz_write_file("ckpt.bin", data, size);
  gs_nn_train_state st;
  gs_status s = gs_nn_checkpoint_load(path, net, opt, &st);
  fuzz_check_error(s, path);
  if (s != GS_OK && memcmp(before, gs_nn_weights_flat(net), nw * sizeof(float)) != 0)
    abort(); /* a failed load changed the weights */
  free(before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (net == NULL) {
    net = fuzz_ckpt_net();
    opt = fuzz_ckpt_sgd(net);
    atexit(release);
  }
  load(data, size);
  if (size >= 4) {
    uint8_t *fixed = malloc(size);
    if (!fixed) abort();
    memcpy(fixed, data, size);
    uLong crc = crc32(crc32(0L, Z_NULL, 0), fixed, (uInt)(size - 4));
    uint32_t c = (uint32_t)crc;
    memcpy(fixed + size - 4, &c, 4);
    load(fixed, size);
    free(fixed);
  }
  return 0;
}
