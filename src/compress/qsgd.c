/*
 * "qsgd:S": QSGD (Alistarh et al., NeurIPS 2017, Sec. 3.1): with s = S
 * levels, Q(p_i) = ||p||_2 * sign(p_i) * xi_i / s, where xi_i is l or l+1
 * (l = floor(s |p_i| / ||p||_2)) by stochastic rounding, so E[Q(p)] = p.
 * Codes are int8 for s <= 127 (GRACE sends int8 below 128) and int16 up to
 * 32767; the rounding stream is seeded by (seed, rank, step).
 * Payload: header (n, ||p||_2), then n codes.
 */
#include <math.h>

#include "opaque.h"

static size_t qsgd_width(const gs_compressor *c) { return c->param <= 127 ? 1 : 2; }

static size_t qsgd_bytes(const gs_compressor *c, const gs_compress_state *st,
                         size_t n, int round, double d) {
  (void)st, (void)round, (void)d;
  return sizeof(gs_opaque_header) + qsgd_width(c) * n;
}

static gs_status qsgd_compress(gs_compress_state *st, const float *p,
                               void *payload, size_t cap, size_t *bytes) {
  (void)cap;
  const size_t n = st->n;
  double ss = 0;
  for (size_t i = 0; i < n; i++) ss += (double)p[i] * p[i];
  const float norm = (float)sqrt(ss);
  const float s = (float)st->c->param;
  gs__opaque_put(payload, n, norm);
  unsigned char *codes = (unsigned char *)payload + sizeof(gs_opaque_header);
  uint64_t rng = gs__rank_stream(st);
  const int wide = qsgd_width(st->c) == 2;
  for (size_t i = 0; i < n; i++) {
    int q = 0;
    if (norm > 0) {
      const float r = s * fabsf(p[i]) / norm;
      float l = floorf(r);
      if (gs__rand_unit(&rng) < r - l) l += 1;
      if (l > s) l = s;
      q = p[i] < 0 ? -(int)l : (int)l;
    }
    if (wide) {
      int16_t v = (int16_t)q;
      memcpy(codes + 2 * i, &v, 2);
    } else {
      codes[i] = (unsigned char)(int8_t)q;
    }
  }
  *bytes = qsgd_bytes(st->c, st, n, 0, 0);
  return GS_OK;
}

static gs_status qsgd_decompress_add(gs_compress_state *st, const void *payload,
                                     size_t bytes, float *out, float alpha) {
  float norm = 0;
  GS_CHECK(gs__opaque_get(st, payload, bytes, qsgd_bytes(st->c, st, st->n, 0, 0),
                          &norm));
  const float unit = alpha * norm / (float)st->c->param;
  const unsigned char *codes = (const unsigned char *)payload + sizeof(gs_opaque_header);
  if (qsgd_width(st->c) == 2) {
    for (size_t i = 0; i < st->n; i++) {
      int16_t v;
      memcpy(&v, codes + 2 * i, 2);
      out[i] += unit * (float)v;
    }
  } else {
    for (size_t i = 0; i < st->n; i++) out[i] += unit * (float)(int8_t)codes[i];
  }
  return GS_OK;
}

const gs_compress_kind gs__kind_qsgd = {
    .name = "qsgd", .param = GS_PARAM_INT, .pmin = 1, .pmax = 32767,
    .exchange = GS_EXCHANGE_OPAQUE, .rounds = 1, .fixed_size = 1,
    .cbytes = 25, .dbytes = 9, .payload_bytes = qsgd_bytes,
    .compress = qsgd_compress, .decompress_add = qsgd_decompress_add};
