/*
 * Internal interface of src/compress: the selection kernels and the seeded
 * random numbers the compressors share. Not installed.
 */
#ifndef GS_COMPRESS_INTERNAL_H
#define GS_COMPRESS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/compress.h"
#include "gs_internal.h"

/* gs_topk_f32's two methods without the argument checks (n < 2^32,
 * k <= n, idx has room for k). */
gs_status gs__topk_exact(const float *x, size_t n, size_t k, uint32_t *idx);
gs_status gs__topk_mstopk(const float *x, size_t n, size_t k, uint32_t *idx);

/* ---- Compressor kinds ---------------------------------------------------------
 * A compressor is a row of the registry (compress.c) pointing at one of
 * these; adding a compressor is adding a file that defines one and a line
 * in the registry. */

typedef enum {
  GS_PARAM_NONE = 0, /* "fp16" */
  GS_PARAM_DENSITY,  /* "topk:D", 0 < D <= 1 */
  GS_PARAM_INT       /* "qsgd:S", pmin <= S <= pmax */
} gs_param_kind;

typedef struct gs_compress_kind {
  const char *name;
  gs_param_kind param;
  double pmin, pmax;           /* GS_PARAM_INT's range */
  gs_compress_exchange exchange;
  gs_dtype dense_dtype;        /* GS_EXCHANGE_DENSE's element type */
  int rounds;
  int lossless;                /* no residual ("none") */
  int fixed_size;              /* same payload size on every rank */
  int own_ef;                  /* keeps its own residual (DGC, PowerSGD): the
                                  generic e += g / e -= D(C(p)) is skipped;
                                  its init allocates st->residual when
                                  opts.error_feedback is set */
  int warmup;                  /* honours opts.warmup_steps (DGC, top-k, MSTopK) */
  int own_momentum;            /* applies opts.momentum itself (DGC) */
  int bucketed;                /* one scale per bucket of elements (spec's
                                  optional last ":B"; opaque.h) */
  int segmented;               /* selects within each of the state's
                                  segments (gs_compress_set_segments) */
  float ef_decay;              /* default error-feedback damping
                                  (gs_compress_opts.ef_decay); 0: 1 */
  double cbytes, dbytes;       /* the time model (gs_compressor_info) */
  /* Payload bytes of `round` for n elements at density d (sparse kinds),
   * or for the state's shape when st is not NULL (PowerSGD). */
  size_t (*payload_bytes)(const gs_compressor *c, const gs_compress_state *st,
                          size_t n, int round, double d);
  /* Optional: allocate / free st->priv. */
  gs_status (*init)(gs_compress_state *st);
  void (*fini)(gs_compress_state *st);
  /* Optional: the kind's per-element momentum (n floats, owned by the
   * state; DGC's u), which gs_compress_state_carry and
   * gs_compress_memory_get/put move with the residual. NULL: none. */
  float *(*momentum)(const gs_compress_state *st);
  /* A whole-state setting the kind adapts as it runs (SIDCo's stage count),
   * part of gs_compress_memory.adapt so that a resumed run goes on from it:
   * 1..adapt_max; NULL for kinds without one. */
  uint32_t (*adapt_get)(const gs_compress_state *st);
  void (*adapt_set)(gs_compress_state *st, uint32_t v);
  uint32_t adapt_max;
  /* Round 0: p holds the n values to compress (g + e under the generic
   * error feedback, g otherwise; own_ef kinds get g). */
  gs_status (*compress)(gs_compress_state *st, const float *p, void *payload,
                        size_t cap, size_t *bytes);
  gs_status (*round)(gs_compress_state *st, int round, const void *in,
                     size_t in_bytes, void *out, size_t cap, size_t *bytes);
  /* out += alpha * D(payload); the payload was checked against the
   * capacity; alpha is -1 for the generic error feedback. */
  gs_status (*decompress_add)(gs_compress_state *st, const void *payload,
                              size_t bytes, float *out, float alpha);
} gs_compress_kind;

struct gs_compressor {
  const gs_compress_kind *kind;
  double param;    /* density, levels, rank (0 for GS_PARAM_NONE) */
  int variant;     /* a kind's sub-choice (SIDCo's fit) */
  size_t bucket;   /* bucketed kinds: elements per scale (0: the whole message) */
  char spec[64];
  uint64_t sig;    /* FNV-1a of spec and param's bits: ranks' compressors
                    * compared by the exchange (spec's text rounds param) */
};

struct gs_compress_state {
  const gs_compressor *c;
  const gs_compress_kind *kind;
  size_t n;
  gs_compress_opts opts;
  float *residual;      /* n floats; NULL without error feedback (own_ef
                           kinds allocate and update it themselves) */
  uint64_t step;        /* completed steps */
  uint64_t last_step;   /* the step of the most recent payload */
  double density;       /* the current step's density */
  double lr;            /* gs_compress_set_lr's last rate; 0 before it */
  size_t *seg;          /* gs_compress_set_segments: nseg + 1 offsets, the
                           last n; NULL (one segment) without the call */
  size_t nseg;
  void *priv;           /* the kind's own state */
};

/* k of a density: max(1, floor(d * n)) for n > 0, at most n; 0 for n = 0. */
size_t gs__density_k(size_t n, double d);
/* The density of `step` under opts.warmup_steps (exponential from 0.25). */
double gs__warmup_density(double target, uint64_t step, uint64_t warmup);

/* The most payload bytes the state's next step produces in round `round`:
 * gs_compress_capacity's, at the density of that step's warm-up (gTop-k's k
 * is this step's, not the warm-up's first). */
size_t gs__compress_step_capacity(const gs_compress_state *st, int round);

/* The selection's segments: [seg[i], seg[i + 1]) for i < count; the whole
 * message when set_segments was not called or the kind ignores it. */
static inline size_t gs__segments(const gs_compress_state *st, size_t *one,
                                  const size_t **seg) {
  if (st != NULL && st->seg != NULL && st->kind->segmented) {
    *seg = st->seg;
    return st->nseg;
  }
  one[0] = 0;
  one[1] = st ? st->n : 0;
  *seg = one;
  return 1;
}

/* Sparse payloads: pairs of x at the given indices. */
void gs__sparse_pack(const float *x, const uint32_t *idx, size_t k,
                     void *payload);
/* out[idx] += alpha * val over a checked payload (indices < n). */
gs_status gs__sparse_add(const gs_compress_state *st, const void *payload,
                         size_t bytes, float *out, float alpha);
size_t gs__sparse_bytes(const gs_compressor *c, const gs_compress_state *st,
                        size_t n, int round, double d);

/* Per-rank, per-step stream for stochastic rounding (QSGD, TernGrad). */
uint64_t gs__rank_stream(const gs_compress_state *st);

/* The registered kinds (one file each). */
extern const gs_compress_kind gs__kind_none, gs__kind_fp16, gs__kind_bf16,
    gs__kind_topk, gs__kind_mstopk, gs__kind_gtopk, gs__kind_dgc,
    gs__kind_sidco, gs__kind_randomk, gs__kind_qsgd, gs__kind_terngrad,
    gs__kind_efsignsgd, gs__kind_powersgd;

/* SplitMix64 (Steele, Lea & Flood, OOPSLA 2014): a counter-based generator,
 * so a stream is fully determined by its seed. */
static inline uint64_t gs__rand_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Uniform in [0, bound) for bound >= 1 (Lemire's multiply-shift; the bias
 * is below 2^-32 for the bounds used here, under 2^32). */
static inline uint64_t gs__rand_below(uint64_t *s, uint64_t bound) {
  return (uint64_t)(((unsigned __int128)gs__rand_next(s) * bound) >> 64);
}

/* Uniform float in [0, 1) with 24 random bits. */
static inline float gs__rand_unit(uint64_t *s) {
  return (float)(gs__rand_next(s) >> 40) * (1.0f / 16777216.0f);
}

#endif /* GS_COMPRESS_INTERNAL_H */
