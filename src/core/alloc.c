/* The one allocation choke point (as Redis's zmalloc and NCCL's ncclCalloc). */
#include <stdint.h>
#include <stdlib.h>

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

gs_status gs_mul_size(size_t a, size_t b, size_t *size) {
  if (b != 0 && a > SIZE_MAX / b)
    return gs_error(GS_ERR_INVALID_ARG, "size overflow: %zu x %zu", a, b);
  *size = a * b;
  return GS_OK;
}
