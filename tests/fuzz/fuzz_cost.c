/*
 * Fuzz target: cost files (gs_cost_load, what `gradsync bench --save-cost`
 * writes and the planner reads), then a prediction from every loaded
 * algorithm fit over a range of sizes, and a save/load round trip that must
 * give the same parameters back.
 */
#include <math.h>

#include "fuzz_common.h"

/* The topology the seed files were saved for. */
static const gs_cost_topo topo = {4, 2};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_write_file("cost.json", data, size);
  gs_cost_params c;
  gs_status st = gs_cost_load(path, topo, &c);
  fuzz_check_error(st, path);
  if (st != GS_OK) return 0;
  for (int a = 0; a < GS_ALGO_COUNT; a++)
    for (double b = 1; b < 1e10; b *= 7.3) {
      double t = gs_cost_allreduce(&c, topo, (gs_algo)a, b);
      if (isnan(t)) abort(); /* loaded parameters give numbers */
    }
  char again[600];
  snprintf(again, sizeof again, "%s/again.json", fuzz_scratch_dir());
  if (gs_cost_save(again, &c, topo) != GS_OK) abort();
  gs_cost_params d;
  if (gs_cost_load(again, topo, &d) != GS_OK) abort();
  if (memcmp(&c, &d, sizeof c) != 0) abort(); /* saved and loaded the same */
  return 0;
}
