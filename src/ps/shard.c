/*
 * Sharding of the flat parameter vector across the servers: contiguous
 * ranges of balanced bytes, large tensors split, small ones kept whole.
 */
#include "ps_internal.h"

gs_status gs_ps_shard_plan(const size_t *counts, size_t n, int servers,
                           size_t *begin) {
  if (servers < 1 || !begin || (n > 0 && !counts))
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_ps_shard_plan: %d servers (must be >= 1), counts %p, "
                    "begin %p", servers, (const void *)counts, (void *)begin);
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (counts[i] > SIZE_MAX - total)
      return gs_error(GS_ERR_INVALID_ARG,
                      "gs_ps_shard_plan: the tensors' total overflows at "
                      "tensor %zu", i);
    total += counts[i];
  }
  begin[0] = 0;
  begin[servers] = total;
  size_t t = 0, t_start = 0; /* tensor containing the cut, and its start */
  for (int k = 1; k < servers; k++) {
    /* The equal-bytes point, k * total / servers without overflow. */
    size_t ideal = (size_t)((long double)total * k / servers);
    while (t < n && t_start + counts[t] <= ideal) t_start += counts[t++];
    size_t cut = ideal;
    if (t < n && ideal > t_start) {
      /* Inside tensor t: keep a small tensor whole (move to its nearer
       * edge), split a large one at the equal-bytes point. */
      size_t shard = total / (size_t)servers;
      if (counts[t] < shard / 4 + 1) {
        size_t end = t_start + counts[t];
        cut = (ideal - t_start <= end - ideal) ? t_start : end;
      }
    }
    if (cut < begin[k - 1]) cut = begin[k - 1];
    begin[k] = cut;
  }
  return GS_OK;
}
