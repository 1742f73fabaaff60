/* The one allocation choke point (as Redis's zmalloc and NCCL's ncclCalloc),
 * which also counts the bytes it holds, as zmalloc's used_memory: each
 * block's malloc_usable_size, added when it is allocated and taken off
 * when it is freed (or reallocated), and the most held since the last
 * gs_mem_reset_peak. A block allocated here and freed with free() stays
 * counted; one from malloc() given to gs_free is taken off (the count
 * stops at 0): the figure is for reports, nothing depends on it. */
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gs_internal.h"

static _Atomic long long mem_used, mem_peak;

static void mem_add(long long n) {
  long long u = atomic_fetch_add_explicit(&mem_used, n, memory_order_relaxed) + n;
  long long p = atomic_load_explicit(&mem_peak, memory_order_relaxed);
  while (u > p &&
         !atomic_compare_exchange_weak_explicit(&mem_peak, &p, u, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

size_t gs_mem_used(void) {
  long long u = atomic_load_explicit(&mem_used, memory_order_relaxed);
  return u > 0 ? (size_t)u : 0;
}

size_t gs_mem_peak(void) {
  long long p = atomic_load_explicit(&mem_peak, memory_order_relaxed);
  return p > 0 ? (size_t)p : 0;
}

void gs_mem_reset_peak(void) {
  atomic_store_explicit(&mem_peak, atomic_load_explicit(&mem_used, memory_order_relaxed),
                        memory_order_relaxed);
}

void *gs_malloc(size_t size) {
  void *p = malloc(size ? size : 1);
  if (p == NULL) gs_error(GS_ERR_NOMEM, "allocation of %zu bytes failed", size);
  else mem_add((long long)malloc_usable_size(p));
  return p;
}

void *gs_calloc(size_t n, size_t size) {
  size_t total;
  if (gs_mul_size(n, size, &total) != GS_OK) return NULL;
  void *p = calloc(total ? total : 1, 1);
  if (p == NULL) gs_error(GS_ERR_NOMEM, "allocation of %zu bytes failed", total);
  else mem_add((long long)malloc_usable_size(p));
  return p;
}

void *gs_realloc(void *ptr, size_t size) {
  size_t old = ptr ? malloc_usable_size(ptr) : 0;
  void *p = realloc(ptr, size ? size : 1);
  if (p == NULL) gs_error(GS_ERR_NOMEM, "reallocation to %zu bytes failed", size);
  else mem_add((long long)malloc_usable_size(p) - (long long)old);
  return p;
}

void gs_free(void *ptr) {
  if (ptr == NULL) return;
  mem_add(-(long long)malloc_usable_size(ptr));
  free(ptr);
}

void *gs__malloc_table(size_t size, int zero) {
  const size_t huge = (size_t)2 << 20;
  if (size < huge) return zero ? gs_calloc(1, size) : gs_malloc(size);
  size_t n = (size + huge - 1) / huge * huge;
  void *p = NULL;
  if (n < size || posix_memalign(&p, huge, n) != 0) {
    gs_error(GS_ERR_NOMEM, "allocation of %zu bytes failed", size);
    return NULL;
  }
  mem_add((long long)malloc_usable_size(p));
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
