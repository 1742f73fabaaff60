/*
 * Where inversions (dkfac, spd) and layers (dp) go.
 */
#include <stddef.h>

#include "kfac_internal.h"

void kfac_place_round_robin(size_t n, int ranks, int *owner) {
  for (size_t i = 0; i < n; i++) owner[i] = (int)(i % (size_t)ranks);
}


/* Indices by decreasing cost, equal costs in index order (an insertion
 * sort: placements have a few hundred items, and qsort has no context). */
static void sort_by_cost_desc(const double *cost, size_t *order, size_t n) {
  for (size_t i = 0; i < n; i++) order[i] = i;
  for (size_t i = 1; i < n; i++) {
    size_t v = order[i], j = i;
    while (j > 0 && cost[order[j - 1]] < cost[v]) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = v;
  }
}

void kfac_place_lpt(const double *cost, const double *local_cost, size_t n,
                    int ranks, int *owner, double *load) {
  size_t *order = gs_malloc((n ? n : 1) * sizeof *order);
  double *l = gs_calloc((size_t)ranks, sizeof *l);
  if (!order || !l) { /* degrade to round-robin rather than fail */
    kfac_place_round_robin(n, ranks, owner);
    gs_free(order);
    gs_free(l);
    return;
  }
  sort_by_cost_desc(cost, order, n);
  for (size_t k = 0; k < n; k++) {
    size_t i = order[k];
    if (local_cost && cost[i] <= local_cost[i]) {
      owner[i] = -1;
      for (int r = 0; r < ranks; r++) l[r] += cost[i];
      continue;
    }
    int best = 0;
    for (int r = 1; r < ranks; r++)
      if (l[r] < l[best]) best = r;
    owner[i] = best;
    l[best] += cost[i];
  }
  if (load)
    for (int r = 0; r < ranks; r++) load[r] = l[r];
  gs_free(order);
  gs_free(l);
}
