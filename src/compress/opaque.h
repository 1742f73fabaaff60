/*
 * The header of the opaque payloads (QSGD, TernGrad, EF-signSGD): the
 * element count, to catch a payload decoded against the wrong tensor, and
 * the one scale the codes multiply.
 */
#ifndef GS_COMPRESS_OPAQUE_H
#define GS_COMPRESS_OPAQUE_H

#include <string.h>

#include "compress_internal.h"

typedef struct {
  uint32_t n;
  float scale;
} gs_opaque_header;

static inline void gs__opaque_put(void *payload, size_t n, float scale) {
  gs_opaque_header h = {(uint32_t)n, scale};
  memcpy(payload, &h, sizeof h);
}

/* Checks the payload's size and count; returns the scale in *scale. */
static inline gs_status gs__opaque_get(const gs_compress_state *st,
                                       const void *payload, size_t bytes,
                                       size_t expect, float *scale) {
  gs_opaque_header h;
  if (bytes != expect)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: payload of %zu bytes, expected %zu for n = %zu",
                    st->c->spec, bytes, expect, st->n);
  memcpy(&h, payload, sizeof h);
  if (h.n != st->n)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: payload encodes %u elements, the tensor has %zu",
                    st->c->spec, h.n, st->n);
  *scale = h.scale;
  return GS_OK;
}

#endif /* GS_COMPRESS_OPAQUE_H */
