/* Names of the collective algorithms (gs_algo). They belong to core, not to
 * comm, because the cost model predicts each algorithm's time. */
#include <strings.h>

#include "gs_internal.h"

static const char *algo_names[GS_ALGO_COUNT] = {
    [GS_ALGO_AUTO] = "auto",         [GS_ALGO_MPI] = "mpi",
    [GS_ALGO_RING] = "ring",         [GS_ALGO_RD] = "rd",
    [GS_ALGO_RABENSEIFNER] = "rabenseifner", [GS_ALGO_HIER] = "hier",
    [GS_ALGO_PIPELINE] = "pipeline", [GS_ALGO_BINOMIAL] = "binomial",
    [GS_ALGO_PAIRWISE] = "pairwise", [GS_ALGO_DISSEMINATION] = "dissemination",
};

const char *gs_algo_name(gs_algo algo) {
  if ((unsigned)algo >= GS_ALGO_COUNT) return "invalid-algo";
  return algo_names[algo];
}

gs_status gs_algo_parse(const char *name, gs_algo *out) {
  if (name == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "algorithm name is NULL");
  for (int i = 0; i < GS_ALGO_COUNT; i++) {
    if (strcasecmp(name, algo_names[i]) == 0) {
      *out = (gs_algo)i;
      return GS_OK;
    }
  }
  return gs_error(GS_ERR_INVALID_ARG,
                  "unknown algorithm '%s' (expected auto, mpi, ring, rd, "
                  "rabenseifner, hier, pipeline, binomial, pairwise or "
                  "dissemination)", name);
}
