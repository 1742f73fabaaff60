/*
 * Fuzz target: model profiles (gs_profile_load, the JSON file the planner,
 * replay and simulator share), then gs_profile_validate and the byte sizes
 * of every tensor of a profile that loaded.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_write_file("profile.json", data, size);
  gs_profile *p = NULL;
  gs_status st = gs_profile_load(path, &p);
  fuzz_check_error(st, path);
  if (st != GS_OK) {
    if (p != NULL) abort(); /* a failed load returns no profile */
    return 0;
  }
  if (gs_profile_validate(p) != GS_OK) abort(); /* loaded means valid */
  size_t total = 0;
  for (size_t i = 0; i < p->ntensors; i++) total += gs_profile_tensor_bytes(p, i);
  (void)total;
  gs_profile_free(p);
  return 0;
}
