/* The one allocation choke point (as Redis's zmalloc and NCCL's ncclCalloc). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gs_internal.h"

void *gs_malloc(size_t size) {
  void *p = malloc(size ? size : 1);
  if (p == NULL) gs_error(GS_ERR_NOMEM, "allocation of %zu bytes failed", size);
  return p;
}

void *gs_calloc(size_t n, size_t size) {
  size_t total;
  if (gs_mul_size(n, size, &total) != GS_OK) return NULL;
  void *p = calloc(total ? total : 1, 1);
  if (p == NULL) gs_error(GS_ERR_NOMEM, "allocation of %zu bytes failed", total);
  return p;
}

void *gs_realloc(void *ptr, size_t size) {
  void *p = realloc(ptr, size ? size : 1);
  if (p == NULL) gs_error(GS_ERR_NOMEM, "reallocation to %zu bytes failed", size);
  return p;
}

void gs_free(void *ptr) { free(ptr); }

void *gs__malloc_table(size_t size, int zero) {
  const size_t huge = (size_t)2 << 20;
  if (size < huge) return zero ? gs_calloc(1, size) : gs_malloc(size);
  size_t n = (size + huge - 1) / huge * huge;
  void *p = NULL;
  if (n < size || posix_memalign(&p, huge, n) != 0) {
    gs_error(GS_ERR_NOMEM, "allocation of %zu bytes failed", size);
    return NULL;
  }
#ifdef MADV_HUGEPAGE
  (void)madvise(p, n, MADV_HUGEPAGE); /* advice only: 4 KB pages where refused */
#endif
  if (zero) memset(p, 0, size);
  return p;
}

gs_status gs_mul_size(size_t a, size_t b, size_t *size) {
  if (b != 0 && a > SIZE_MAX / b)
    return gs_error(GS_ERR_INVALID_ARG, "size overflow: %zu x %zu", a, b);
  *size = a * b;
  return GS_OK;
}
