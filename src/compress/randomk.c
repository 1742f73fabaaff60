/*
 * "randomk:D": k = D*n indices drawn uniformly without replacement from a
 * stream seeded by (opts.seed, step), the same on every rank (as GRACE's
 * randomk seeds with the tensor's name and the step), so only the k values
 * travel and they are summed by an ordinary all-reduce (Stich et al.,
 * "Sparsified SGD with Memory", NeurIPS 2018, rand-k). The indices come
 * from Floyd's algorithm (Bentley, "Programming Pearls", CACM 1987): k
 * draws and a bitmap of n bits, no pass over n.
 * Its error feedback is damped by default (gs_compress_opts.ef_decay): an
 * element is sent once in 1/D steps on average, so an undamped residual
 * arrives as a burst of about 1/D stale gradients.
 */
#include <string.h>

#include "compress_internal.h"

typedef struct {
  uint32_t *idx;       /* k indices of step idx_step */
  uint64_t idx_step;
  int valid;
  uint64_t *bitmap;    /* n bits, all clear between uses */
  size_t k;
} randomk_priv;

static size_t randomk_bytes(const gs_compressor *c, const gs_compress_state *st,
                            size_t n, int round, double d) {
  (void)c, (void)st, (void)round;
  return 4 * gs__density_k(n, d);
}

static gs_status randomk_init(gs_compress_state *st) {
  randomk_priv *r = gs_calloc(1, sizeof *r);
  if (r == NULL) return GS_ERR_NOMEM;
  r->k = gs__density_k(st->n, st->c->param);
  r->idx = gs_malloc((r->k ? r->k : 1) * sizeof *r->idx);
  r->bitmap = gs_calloc(st->n / 64 + 1, sizeof *r->bitmap);
  st->priv = r;
  if (r->idx == NULL || r->bitmap == NULL) return GS_ERR_NOMEM;
  return GS_OK;
}

static void randomk_fini(gs_compress_state *st) {
  randomk_priv *r = st->priv;
  if (r == NULL) return;
  gs_free(r->idx);
  gs_free(r->bitmap);
  gs_free(r);
}

/* The indices of the step of the last payload, the same on every rank. */
static const uint32_t *randomk_indices(gs_compress_state *st) {
  randomk_priv *r = st->priv;
  if (r->valid && r->idx_step == st->last_step) return r->idx;
  uint64_t s = st->opts.seed ^ 0x72616e646f6d6bULL; /* "randomk" */
  s ^= st->last_step * 0xd1b54a32d192ed03ULL;
  gs__rand_next(&s);
  const size_t n = st->n, k = r->k;
  for (size_t j = n - k, m = 0; j < n; j++, m++) {
    size_t t = (size_t)gs__rand_below(&s, (uint64_t)j + 1);
    if (r->bitmap[t / 64] >> (t % 64) & 1) t = j;
    r->bitmap[t / 64] |= 1ULL << (t % 64);
    r->idx[m] = (uint32_t)t;
  }
  for (size_t m = 0; m < k; m++) r->bitmap[r->idx[m] / 64] = 0;
  r->idx_step = st->last_step;
  r->valid = 1;
  return r->idx;
}

static gs_status randomk_compress(gs_compress_state *st, const float *p,
                                  void *payload, size_t cap, size_t *bytes) {
  (void)cap;
  const randomk_priv *r = st->priv;
  const uint32_t *idx = randomk_indices(st);
  float *v = payload;
  for (size_t i = 0; i < r->k; i++) v[i] = p[idx[i]];
  *bytes = 4 * r->k;
  return GS_OK;
}

static gs_status randomk_decompress_add(gs_compress_state *st, const void *payload,
                                        size_t bytes, float *out, float alpha) {
  const randomk_priv *r = st->priv;
  if (bytes != 4 * r->k)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: payload of %zu bytes, expected %zu",
                    st->c->spec, bytes, 4 * r->k);
  const uint32_t *idx = randomk_indices(st);
  const float *v = payload;
  for (size_t i = 0; i < r->k; i++) out[idx[i]] += alpha * v[i];
  return GS_OK;
}

const gs_compress_kind gs__kind_randomk = {
    .name = "randomk", .param = GS_PARAM_DENSITY, .exchange = GS_EXCHANGE_DENSE,
    .dense_dtype = GS_F32, .rounds = 1, .fixed_size = 1, .cbytes = 12,
    .dbytes = 0, .ef_decay = GS_COMPRESS_RANDOMK_EF_DECAY,
    .payload_bytes = randomk_bytes, .init = randomk_init,
    .fini = randomk_fini, .compress = randomk_compress,
    .decompress_add = randomk_decompress_add};
