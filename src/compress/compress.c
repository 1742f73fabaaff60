/*
 * The compressor registry, spec parsing, per-tensor state and the generic
 * error feedback (Karimireddy et al., "Error Feedback Fixes SignSGD and other
 * Gradient Compression Problems", ICML 2019, Algorithm 2: p = g + e,
 * Delta = C(p), e = p - Delta), shared by every compressor that does not
 * keep its own residual.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compress_internal.h"

/* Adding a compressor: a file defining its gs_compress_kind, and a line here. */
static const gs_compress_kind *const registry[] = {
    &gs__kind_none,    &gs__kind_fp16,     &gs__kind_bf16,
    &gs__kind_topk,    &gs__kind_mstopk,   &gs__kind_gtopk,
    &gs__kind_dgc,     &gs__kind_sidco,    &gs__kind_randomk,
    &gs__kind_qsgd,    &gs__kind_terngrad, &gs__kind_efsignsgd,
    &gs__kind_powersgd,
};
#define NKINDS (sizeof registry / sizeof registry[0])

static const char accepted[] =
    "none, fp16, bf16, terngrad, efsignsgd, topk:D, mstopk:D, gtopk:D, dgc:D, "
    "sidco:D[:exp|gpareto|gamma], randomk:D (density 0 < D <= 1), qsgd:S[:B] "
    "(levels 1..32767), powersgd:R (rank 1..1024); terngrad, efsignsgd and qsgd "
    "take an optional bucket of B elements per scale (default 512, 0: the whole "
    "message)";

const char *gs_compressor_kinds(void) {
  return "none,fp16,bf16,topk,mstopk,gtopk,dgc,sidco,randomk,qsgd,terngrad,"
         "efsignsgd,powersgd";
}

static const char *const sidco_fits[] = {"exp", "gpareto", "gamma"};

gs_status gs_compressor_create(const char *spec, gs_compressor **out) {
  if (out == NULL) return gs_error(GS_ERR_INVALID_ARG, "compressor: out is NULL");
  *out = NULL;
  if (spec == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "compressor spec is NULL (accepted: %s)",
                    accepted);
  const char *colon = strchr(spec, ':');
  const size_t namelen = colon ? (size_t)(colon - spec) : strlen(spec);
  const gs_compress_kind *kind = NULL;
  for (size_t i = 0; i < NKINDS; i++)
    if (strlen(registry[i]->name) == namelen &&
        strncasecmp(registry[i]->name, spec, namelen) == 0)
      kind = registry[i];
  if (kind == NULL)
    return gs_error(GS_ERR_INVALID_ARG,
                    "unknown compressor '%s' (accepted: %s)", spec, accepted);
  double param = 0;
  int variant = 0;
  const char *bucket_arg = NULL; /* a bucketed kind's ":B" */
  if (kind->param == GS_PARAM_NONE) {
    if (colon != NULL && !kind->bucketed)
      return gs_error(GS_ERR_INVALID_ARG,
                      "compressor '%s': %s takes no parameter (accepted: %s)",
                      spec, kind->name, accepted);
    bucket_arg = colon ? colon + 1 : NULL;
  } else {
    if (colon == NULL || colon[1] == '\0')
      return gs_error(GS_ERR_INVALID_ARG,
                      "compressor '%s': %s needs a %s after ':' (accepted: %s)",
                      spec, kind->name,
                      kind->param == GS_PARAM_DENSITY ? "density" : "number",
                      accepted);
    char *end;
    errno = 0;
    param = strtod(colon + 1, &end);
    /* a decimal number: strtod alone also took " 0.1" and hexadecimal
     * "0x1p-7" */
    int decimal = end > colon + 1;
    for (const char *q = colon + 1; q < end && decimal; q++)
      decimal = strchr("0123456789.eE+-", *q) != NULL;
    const int bad_number = !decimal || errno != 0 || !isfinite(param);
    const char *rest = end;
    if (!bad_number && *rest == ':' && kind == &gs__kind_sidco) {
      variant = -1;
      for (int v = 0; v < 3; v++)
        if (strcasecmp(rest + 1, sidco_fits[v]) == 0) variant = v;
      if (variant < 0)
        return gs_error(GS_ERR_INVALID_ARG,
                        "compressor '%s': unknown SIDCo fit '%s' (expected exp, "
                        "gpareto or gamma)", spec, rest + 1);
      rest = "";
    }
    if (!bad_number && *rest == ':' && kind->bucketed) {
      bucket_arg = rest + 1;
      rest = "";
    }
    if (bad_number || *rest != '\0')
      return gs_error(GS_ERR_INVALID_ARG,
                      "compressor '%s': '%s' is not a number (accepted: %s)", spec,
                      colon + 1, accepted);
    if (kind->param == GS_PARAM_DENSITY && !(param > 0 && param <= 1))
      return gs_error(GS_ERR_INVALID_ARG,
                      "compressor '%s': density %g out of range (0 < D <= 1)",
                      spec, param);
    if (kind->param == GS_PARAM_INT &&
        (param != floor(param) || param < kind->pmin || param > kind->pmax))
      return gs_error(GS_ERR_INVALID_ARG,
                      "compressor '%s': %s takes an integer %g..%g, not %g", spec,
                      kind->name, kind->pmin, kind->pmax, param);
  }
  size_t bucket = kind->bucketed ? GS_COMPRESS_BUCKET : 0;
  if (bucket_arg != NULL) {
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(bucket_arg, &end, 10);
    if (end == bucket_arg || *end != '\0' || errno != 0 || bucket_arg[0] == '-' ||
        v > (1ULL << 30))
      return gs_error(GS_ERR_INVALID_ARG,
                      "compressor '%s': bucket '%s' is not an element count 0..%llu "
                      "(0: one scale for the whole message)", spec, bucket_arg,
                      1ULL << 30);
    bucket = (size_t)v;
  }
  gs_compressor *c = gs_calloc(1, sizeof *c);
  if (c == NULL) return GS_ERR_NOMEM;
  /* The parameter in the normalised spec: the shortest text that reads back
   * as the same double (until 2026-12-07 "%g", 6 digits, so that
   * randomk:0.01000001 and randomk:0.01000004 were one spec to the engine's
   * settings check, though their payloads differ). */
  char pnum[32];
  for (int digits = 6; digits <= 17; digits++) {
    snprintf(pnum, sizeof pnum, "%.*g", digits, param);
    if (strtod(pnum, NULL) == param) break;
  }
  c->kind = kind;
  c->param = param;
  c->variant = variant;
  c->bucket = bucket;
  if (kind->bucketed && bucket != GS_COMPRESS_BUCKET) {
    if (kind->param == GS_PARAM_NONE)
      snprintf(c->spec, sizeof c->spec, "%s:%zu", kind->name, bucket);
    else
      snprintf(c->spec, sizeof c->spec, "%s:%s:%zu", kind->name, pnum, bucket);
  } else if (kind->param == GS_PARAM_NONE)
    snprintf(c->spec, sizeof c->spec, "%s", kind->name);
  else if (kind == &gs__kind_sidco && colon != NULL && strchr(colon + 1, ':'))
    snprintf(c->spec, sizeof c->spec, "%s:%s:%s", kind->name, pnum, sidco_fits[variant]);
  else
    snprintf(c->spec, sizeof c->spec, "%s:%s", kind->name, pnum);
  c->sig = gs_fnv1a(gs_fnv1a_str(GS_FNV1A_BASIS, c->spec), &c->param, sizeof c->param);
  *out = c;
  return GS_OK;
}

void gs_compressor_destroy(gs_compressor *c) { gs_free(c); }

const char *gs_compressor_spec(const gs_compressor *c) {
  return c ? c->spec : "";
}

gs_status gs_compressor_info_get(const gs_compressor *c, gs_compressor_info *out) {
  if (c == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compressor_info_get: NULL argument");
  const gs_compress_kind *k = c->kind;
  *out = (gs_compressor_info){
      .name = k->name, .exchange = k->exchange, .dense_dtype = k->dense_dtype,
      .rounds = k->rounds, .lossless = k->lossless, .fixed_size = k->fixed_size,
      .param = c->param, .compress_bytes_per_elem = k->cbytes,
      .decompress_bytes_per_elem = k->dbytes,
      .ef_decay = k->ef_decay > 0 ? k->ef_decay : 1.0f,
      .own_momentum = k->own_momentum, .warmup = k->warmup, .own_ef = k->own_ef};
  return GS_OK;
}

gs_status gs_compressor_payload_bytes(const gs_compressor *c, size_t n,
                                      int round, size_t *bytes) {
  if (c == NULL || bytes == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compressor_payload_bytes: NULL argument");
  if (round < 0 || round >= c->kind->rounds)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: round %d out of range (it has %d)", c->spec,
                    round, c->kind->rounds);
  if (n > (size_t)UINT32_MAX)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: n = %zu does not fit uint32_t indices",
                    c->spec, n);
  *bytes = c->kind->payload_bytes(c, NULL, n, round, c->param);
  return GS_OK;
}

/* ---- Helpers shared by the kinds ---------------------------------------------- */

size_t gs__density_k(size_t n, double d) {
  if (n == 0) return 0;
  double k = floor(d * (double)n);
  if (k < 1) k = 1;
  if (k > (double)n) k = (double)n;
  return (size_t)k;
}

/* DGC's warm-up (Lin et al., ICLR 2018, Sec. 3.3): the density falls
 * exponentially from 25% to the target (their schedule: 25%, 6.25%, 1.5625%,
 * 0.4%, 0.1% over the first epochs), here continuously over `warmup`
 * steps. */
double gs__warmup_density(double target, uint64_t step, uint64_t warmup) {
  const double start = 0.25;
  if (warmup == 0 || step >= warmup || target >= start) return target;
  return start * pow(target / start, (double)step / (double)warmup);
}

void gs__sparse_pack(const float *x, const uint32_t *idx, size_t k, void *payload) {
  uint32_t *pi = payload;
  float *pv = (float *)(void *)(pi + k);
  for (size_t i = 0; i < k; i++) {
    pi[i] = idx[i];
    pv[i] = x[idx[i]];
  }
}

gs_status gs_sparse_view(const void *payload, size_t bytes, const uint32_t **idx,
                         const float **val, size_t *count) {
  if (idx == NULL || val == NULL || count == NULL || (payload == NULL && bytes > 0))
    return gs_error(GS_ERR_INVALID_ARG, "gs_sparse_view: NULL argument");
  if (bytes % 8 != 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "sparse payload of %zu bytes: expected a multiple of 8 "
                    "(4-byte index + 4-byte value pairs)", bytes);
  if (((uintptr_t)payload & 3u) != 0)
    return gs_error(GS_ERR_INVALID_ARG, "sparse payload is not 4-byte aligned");
  *count = bytes / 8;
  *idx = payload;
  *val = (const float *)(const void *)(*idx + *count);
  return GS_OK;
}

gs_status gs__sparse_add(const gs_compress_state *st, const void *payload,
                         size_t bytes, float *out, float alpha) {
  const uint32_t *idx;
  const float *val;
  size_t count;
  GS_CHECK(gs_sparse_view(payload, bytes, &idx, &val, &count));
  for (size_t i = 0; i < count; i++)
    if (idx[i] >= st->n)
      return gs_error(GS_ERR_INVALID_ARG,
                      "compressor %s: sparse payload pair %zu has index %u, "
                      "expected < n = %zu", st->c->spec, i, idx[i], st->n);
  for (size_t i = 0; i < count; i++) out[idx[i]] += alpha * val[i];
  return GS_OK;
}

size_t gs__sparse_bytes(const gs_compressor *c, const gs_compress_state *st,
                        size_t n, int round, double d) {
  (void)c;
  (void)round;
  if (st == NULL) return 8 * gs__density_k(n, d);
  size_t one[2], k = 0;
  const size_t *seg;
  const size_t nseg = gs__segments(st, one, &seg);
  for (size_t i = 0; i < nseg; i++) k += gs__density_k(seg[i + 1] - seg[i], d);
  return 8 * k;
}

uint64_t gs__rank_stream(const gs_compress_state *st) {
  uint64_t s = st->opts.seed ^ 0x5eed5eed5eed5eedULL;
  s ^= gs__rand_next(&s) + (uint64_t)st->opts.rank * 0xd1b54a32d192ed03ULL;
  s ^= gs__rand_next(&s) + st->last_step * 0x8cb92ba72f3d8dd7ULL;
  gs__rand_next(&s);
  return s;
}

/* ---- State ----------------------------------------------------------------------- */

gs_compress_opts gs_compress_opts_default(void) {
  return (gs_compress_opts){.error_feedback = 1,
                            .seed = 0x9e3779b97f4a7c15ULL,
                            .rank = 0,
                            .nranks = 1,
                            .rows = 0,
                            .momentum = 0.9f,
                            .clip_norm = 0,
                            .warmup_steps = 0,
                            .ef_decay = 0};
}

gs_status gs_compress_state_create(const gs_compressor *c, size_t n,
                                   const gs_compress_opts *opts,
                                   gs_compress_state **out) {
  if (c == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_state_create: NULL argument");
  *out = NULL;
  if (n > (size_t)UINT32_MAX)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: tensor of n = %zu elements does not fit "
                    "uint32_t indices", c->spec, n);
  gs_compress_opts o = opts ? *opts : gs_compress_opts_default();
  if (o.nranks < 1 || o.rank < 0 || o.rank >= o.nranks)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: rank %d of nranks %d (expected 0 <= rank < "
                    "nranks)", c->spec, o.rank, o.nranks);
  if (!(o.momentum >= 0 && o.momentum < 1) || !(o.clip_norm >= 0))
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: momentum %g (expected 0 <= m < 1), clip_norm "
                    "%g (expected >= 0)", c->spec, (double)o.momentum,
                    (double)o.clip_norm);
  if (!(o.ef_decay >= 0 && o.ef_decay <= 1))
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: ef_decay %g (expected 0 < gamma <= 1, or 0 for "
                    "the compressor's default)", c->spec, (double)o.ef_decay);
  /* 1 is what these kinds do anyway (and what a state's own opts hold once
   * defaulted, so that a state can be made again from them). */
  if (c->kind->own_ef && o.ef_decay != 0 && o.ef_decay != 1)
    return gs_error(GS_ERR_INVALID_ARG,
                    "compressor %s: ef_decay %g, but %s keeps its residual its own "
                    "way and does not damp it", c->spec, (double)o.ef_decay,
                    c->kind->name);
  if (o.ef_decay == 0) {
    gs_compressor_info info;
    gs_compressor_info_get(c, &info);
    o.ef_decay = info.ef_decay;
  }
  gs_compress_state *st = gs_calloc(1, sizeof *st);
  if (st == NULL) return GS_ERR_NOMEM;
  st->c = c;
  st->kind = c->kind;
  st->n = n;
  st->opts = o;
  st->density = c->kind->param == GS_PARAM_DENSITY
                    ? (c->kind->warmup ? gs__warmup_density(c->param, 0, o.warmup_steps)
                                       : c->param)
                    : 1.0;
  if (o.error_feedback && !c->kind->lossless && !c->kind->own_ef) {
    st->residual = gs_calloc(n ? n : 1, sizeof(float));
    if (st->residual == NULL) {
      gs_free(st);
      return GS_ERR_NOMEM;
    }
  }
  if (c->kind->init != NULL) {
    gs_status s = c->kind->init(st);
    if (s != GS_OK) {
      if (c->kind->fini != NULL) c->kind->fini(st);
      gs_free(st->residual);
      gs_free(st);
      return s;
    }
  }
  *out = st;
  return GS_OK;
}

void gs_compress_state_destroy(gs_compress_state *st) {
  if (st == NULL) return;
  if (st->kind->fini != NULL) st->kind->fini(st);
  gs_free(st->residual);
  gs_free(st->seg);
  gs_free(st);
}

gs_status gs_compress_set_segments(gs_compress_state *st, const size_t *sizes,
                                   size_t count) {
  if (st == NULL || (sizes == NULL && count > 0))
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_set_segments: NULL argument");
  size_t sum = 0;
  for (size_t i = 0; i < count; i++) {
    if (sizes[i] == 0 || sizes[i] > st->n - sum)
      return gs_error(GS_ERR_INVALID_ARG,
                      "gs_compress_set_segments (compressor %s, n = %zu): "
                      "tensor %zu of %zu has %zu elements (expected 1 to the "
                      "%zu left)", st->c->spec, st->n, i, count, sizes[i],
                      st->n - sum);
    sum += sizes[i];
  }
  if (count > 0 && sum != st->n)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_compress_set_segments (compressor %s): %zu tensors of "
                    "%zu elements in all, but the state holds n = %zu",
                    st->c->spec, count, sum, st->n);
  size_t *seg = NULL;
  if (count > 1) {
    seg = gs_malloc((count + 1) * sizeof *seg);
    if (seg == NULL) return GS_ERR_NOMEM;
    seg[0] = 0;
    for (size_t i = 0; i < count; i++) seg[i + 1] = seg[i] + sizes[i];
  }
  gs_free(st->seg);
  st->seg = seg;
  st->nseg = count > 1 ? count : 0;
  return GS_OK;
}

/* The most payload bytes of round `round` at the warm-up's density of
 * step `step`. */
static size_t capacity_at(const gs_compress_state *st, int round, uint64_t step) {
  if (st == NULL || round < 0 || round >= st->kind->rounds) return 0;
  double d = st->c->param;
  if (st->kind->warmup) d = gs__warmup_density(d, step, st->opts.warmup_steps);
  return st->kind->payload_bytes(st->c, st, st->n, round, d);
}

/* The warm-up only lowers the density, so its first step is the largest. */
size_t gs_compress_capacity(const gs_compress_state *st, int round) {
  return capacity_at(st, round, 0);
}

size_t gs__compress_step_capacity(const gs_compress_state *st, int round) {
  return st ? capacity_at(st, round, st->step) : 0;
}

gs_status gs_compress_set_lr(gs_compress_state *st, double lr) {
  if (st == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_compress_set_lr: NULL state");
  if (!(lr > 0) || !isfinite(lr))
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_set_lr (compressor %s): learning "
                    "rate %g must be finite and > 0", st->c->spec, lr);
  if (st->lr > 0 && lr != st->lr && st->residual != NULL) {
    const float f = (float)(st->lr / lr);
    for (size_t i = 0; i < st->n; i++) st->residual[i] *= f;
  }
  st->lr = lr;
  return GS_OK;
}

gs_status gs_compress_state_carry(gs_compress_state *dst, size_t dst_off,
                                  const gs_compress_state *src, size_t src_off,
                                  size_t n) {
  if (dst == NULL || src == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_state_carry: NULL state");
  if (dst->c != src->c || dst->opts.error_feedback != src->opts.error_feedback)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_state_carry: states of "
                    "compressor %s (error feedback %d) and %s (%d): expected the "
                    "same", src->c->spec, src->opts.error_feedback, dst->c->spec,
                    dst->opts.error_feedback);
  if (dst == src || src_off > src->n || n > src->n - src_off || dst_off > dst->n ||
      n > dst->n - dst_off)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_state_carry (compressor %s): "
                    "%zu elements from offset %zu of a %zu-element state to offset "
                    "%zu of a %zu-element one%s", src->c->spec, n, src_off, src->n,
                    dst_off, dst->n, dst == src ? " (the same state)" : "");
  if (src->residual != NULL && dst->residual != NULL) {
    float *d = dst->residual + dst_off;
    const float *s = src->residual + src_off;
    if (dst->lr > 0 && src->lr > 0 && dst->lr != src->lr) {
      const float f = (float)(src->lr / dst->lr);
      for (size_t i = 0; i < n; i++) d[i] = s[i] * f;
    } else {
      memcpy(d, s, n * sizeof *d);
    }
  }
  float *du = dst->kind->momentum ? dst->kind->momentum(dst) : NULL;
  const float *su = src->kind->momentum ? src->kind->momentum(src) : NULL;
  if (du != NULL && su != NULL) memcpy(du + dst_off, su + src_off, n * sizeof *du);
  if (dst->kind->adapt_set != NULL && src->kind->adapt_get != NULL)
    dst->kind->adapt_set(dst, src->kind->adapt_get(src));
  if (src->step > dst->step) dst->step = src->step;
  if (dst->lr == 0) dst->lr = src->lr;
  return GS_OK;
}

unsigned gs_compress_memory_kinds(const gs_compress_state *st) {
  if (st == NULL) return 0;
  unsigned k = 0;
  if (st->residual != NULL) k |= GS_COMPRESS_MEM_RESIDUAL;
  if (st->kind->momentum != NULL && st->kind->momentum(st) != NULL)
    k |= GS_COMPRESS_MEM_MOMENTUM;
  return k;
}

static gs_status check_range(const gs_compress_state *st, size_t off, size_t n,
                             const char *fn) {
  if (off > st->n || n > st->n - off)
    return gs_error(GS_ERR_INVALID_ARG, "%s (compressor %s): elements [%zu, %zu) of a "
                    "%zu-element state", fn, st->c->spec, off, off + n, st->n);
  return GS_OK;
}

gs_status gs_compress_memory_get(const gs_compress_state *st, size_t off, size_t n,
                                 gs_compress_memory *out) {
  if (st == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_memory_get: NULL argument");
  GS_CHECK(check_range(st, off, n, "gs_compress_memory_get"));
  const unsigned kinds = gs_compress_memory_kinds(st);
  out->have = 0;
  if ((kinds & GS_COMPRESS_MEM_RESIDUAL) && out->residual != NULL) {
    memcpy(out->residual, st->residual + off, n * sizeof(float));
    out->have |= GS_COMPRESS_MEM_RESIDUAL;
  }
  if ((kinds & GS_COMPRESS_MEM_MOMENTUM) && out->momentum != NULL) {
    memcpy(out->momentum, st->kind->momentum(st) + off, n * sizeof(float));
    out->have |= GS_COMPRESS_MEM_MOMENTUM;
  }
  out->step = st->step;
  out->lr = st->lr;
  out->adapt = st->kind->adapt_get ? st->kind->adapt_get(st) : 0;
  return GS_OK;
}

/* The first value of x[0..n) that is not finite, or n. */
static size_t first_nonfinite(const float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return i;
  return n;
}

gs_status gs_compress_memory_put(gs_compress_state *st, size_t off, size_t n,
                                 const gs_compress_memory *in) {
  if (st == NULL || in == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_memory_put: NULL argument");
  GS_CHECK(check_range(st, off, n, "gs_compress_memory_put"));
  const int res = (in->have & GS_COMPRESS_MEM_RESIDUAL) != 0;
  const int mom = (in->have & GS_COMPRESS_MEM_MOMENTUM) != 0;
  if ((res && in->residual == NULL) || (mom && in->momentum == NULL))
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_memory_put (compressor %s): have "
                    "names the %s, but its array is NULL", st->c->spec,
                    res && in->residual == NULL ? "residual" : "momentum");
  if (!(in->lr >= 0) || !isfinite(in->lr))
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_memory_put (compressor %s): "
                    "learning rate %g (expected finite and >= 0; 0: none)", st->c->spec,
                    in->lr);
  if (in->adapt != 0 && st->kind->adapt_set != NULL && in->adapt > st->kind->adapt_max)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_memory_put (compressor %s): "
                    "adaptive setting %u (expected 1 to %u; 0: none)", st->c->spec,
                    in->adapt, st->kind->adapt_max);
  /* A value that is not finite would stay in the residual forever. */
  for (int k = 0; k < 2; k++) {
    const float *x = k == 0 ? (res ? in->residual : NULL) : (mom ? in->momentum : NULL);
    const size_t bad = x ? first_nonfinite(x, n) : n;
    if (bad < n)
      return gs_error(GS_ERR_INVALID_ARG, "gs_compress_memory_put (compressor %s): "
                      "%s[%zu] is %g (expected finite)", st->c->spec,
                      k == 0 ? "residual" : "momentum", bad, (double)x[bad]);
  }
  const unsigned kinds = gs_compress_memory_kinds(st);
  if (res && (kinds & GS_COMPRESS_MEM_RESIDUAL)) {
    float *d = st->residual + off;
    if (st->lr > 0 && in->lr > 0 && st->lr != in->lr) {
      /* As gs_compress_state_carry: scaled to the state's rate. */
      const float f = (float)(in->lr / st->lr);
      for (size_t i = 0; i < n; i++) d[i] = in->residual[i] * f;
    } else {
      memcpy(d, in->residual, n * sizeof *d);
    }
  }
  if (mom && (kinds & GS_COMPRESS_MEM_MOMENTUM))
    memcpy(st->kind->momentum(st) + off, in->momentum, n * sizeof(float));
  if (in->step > st->step) st->step = in->step;
  if (st->lr == 0) st->lr = in->lr;
  if (in->adapt != 0 && st->kind->adapt_set != NULL) st->kind->adapt_set(st, in->adapt);
  return GS_OK;
}

const float *gs_compress_residual(const gs_compress_state *st) {
  return st ? st->residual : NULL;
}

uint64_t gs_compress_step(const gs_compress_state *st) { return st ? st->step : 0; }
double gs_compress_density(const gs_compress_state *st) { return st ? st->density : 0; }

static gs_status check_n(const gs_compress_state *st, size_t n, const char *fn) {
  if (n != st->n)
    return gs_error(GS_ERR_INVALID_ARG,
                    "%s (compressor %s): n = %zu, but the state was created for "
                    "n = %zu", fn, st->c->spec, n, st->n);
  return GS_OK;
}

gs_status gs_compress(gs_compress_state *st, const float *grad, size_t n,
                      void *payload, size_t cap, size_t *bytes) {
  if (st == NULL || bytes == NULL || (grad == NULL && n > 0) || payload == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress: NULL argument");
  if (((uintptr_t)payload & 3u) != 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_compress (compressor %s): payload is not 4-byte aligned",
                    st->c->spec);
  GS_CHECK(check_n(st, n, "gs_compress"));
  const size_t need = gs_compress_capacity(st, 0);
  if (cap < need)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_compress (compressor %s, n = %zu): payload buffer of %zu "
                    "bytes, expected at least %zu", st->c->spec, n, cap, need);
  /* A NaN or an infinity must not reach the residual, where it would stay
   * forever (an infinity turns into NaN at the first inf - inf, or saturates
   * fp16, or zeroes TernGrad's scale). One pass that tests both at once
   * (|x| <= FLT_MAX is false for NaN and +-Inf) without an early exit, so
   * that the compiler can vectorise it; the element is found only when one
   * is bad. With a residual kept here the pass tests g + e: it is not
   * finite wherever g is not (e always is), and where the sum overflows
   * float though g does not, refused before the residual changes. */
  const float *e = st->residual != NULL && !st->kind->own_ef ? st->residual : NULL;
  const float gamma = st->opts.ef_decay;
  int bad = 0;
  if (e)
    for (size_t i = 0; i < n; i++) bad |= !(fabsf(gamma * e[i] + grad[i]) <= FLT_MAX);
  else
    for (size_t i = 0; i < n; i++) bad |= !(fabsf(grad[i]) <= FLT_MAX);
  for (size_t i = 0; bad && i < n; i++) {
    if (!(fabsf(grad[i]) <= FLT_MAX))
      return gs_error(GS_ERR_INVALID_ARG, "gs_compress (compressor %s): grad[%zu] is %s",
                      st->c->spec, i,
                      isnan(grad[i]) ? "NaN" : grad[i] > 0 ? "infinite (+inf)"
                                                           : "infinite (-inf)");
    if (e && !(fabsf(gamma * e[i] + grad[i]) <= FLT_MAX))
      return gs_error(GS_ERR_INVALID_ARG, "gs_compress (compressor %s): grad[%zu] + "
                      "residual[%zu] (%g + %g) overflows float; the residual is "
                      "unchanged", st->c->spec, i, i, (double)grad[i], (double)(gamma * e[i]));
  }
  st->last_step = st->step;
  if (st->kind->warmup)
    st->density = gs__warmup_density(st->c->param, st->step, st->opts.warmup_steps);
  gs_status s;
  if (e) {
    float *r = st->residual;
    if (gamma == 1.0f) {
      for (size_t i = 0; i < n; i++) r[i] += grad[i];
    } else {
      for (size_t i = 0; i < n; i++) r[i] = gamma * r[i] + grad[i];
    }
    s = st->kind->compress(st, r, payload, cap, bytes);
    if (s == GS_OK) s = st->kind->decompress_add(st, payload, *bytes, r, -1.0f);
  } else {
    s = st->kind->compress(st, grad, payload, cap, bytes);
  }
  if (s != GS_OK) return s;
  if (st->kind->rounds == 1) st->step++;
  return GS_OK;
}

gs_status gs_compress_round(gs_compress_state *st, int round, const void *in,
                            size_t in_bytes, void *out, size_t cap, size_t *bytes) {
  if (st == NULL || in == NULL || out == NULL || bytes == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_round: NULL argument");
  if (round < 1 || round >= st->kind->rounds || st->kind->round == NULL)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_compress_round (compressor %s): round %d, expected 1..%d",
                    st->c->spec, round, st->kind->rounds - 1);
  if (in_bytes != gs_compress_capacity(st, round - 1))
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_compress_round (compressor %s): round %d input of %zu "
                    "bytes, expected %zu", st->c->spec, round, in_bytes,
                    gs_compress_capacity(st, round - 1));
  const size_t need = gs_compress_capacity(st, round);
  if (cap < need)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_compress_round (compressor %s): buffer of %zu bytes, "
                    "expected at least %zu", st->c->spec, cap, need);
  GS_CHECK(st->kind->round(st, round, in, in_bytes, out, cap, bytes));
  if (round == st->kind->rounds - 1) st->step++;
  return GS_OK;
}

gs_status gs_decompress_add(gs_compress_state *st, const void *payload,
                            size_t bytes, float *out, size_t n) {
  if (st == NULL || (payload == NULL && bytes > 0) || (out == NULL && n > 0))
    return gs_error(GS_ERR_INVALID_ARG, "gs_decompress_add: NULL argument");
  GS_CHECK(check_n(st, n, "gs_decompress_add"));
  const size_t last = (size_t)(st->kind->rounds - 1);
  if (bytes > gs_compress_capacity(st, (int)last))
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_decompress_add (compressor %s, n = %zu): payload of %zu "
                    "bytes, more than the %zu it can produce", st->c->spec, n,
                    bytes, gs_compress_capacity(st, (int)last));
  return st->kind->decompress_add(st, payload, bytes, out, 1.0f);
}

gs_status gs_compress_return(gs_compress_state *st, const uint32_t *idx,
                             const float *val, size_t count) {
  if (st == NULL || (count > 0 && (idx == NULL || val == NULL)))
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_return: NULL argument");
  for (size_t i = 0; i < count; i++)
    if (idx[i] >= st->n)
      return gs_error(GS_ERR_INVALID_ARG,
                      "gs_compress_return (compressor %s): index %u, expected < "
                      "n = %zu", st->c->spec, idx[i], st->n);
  float *e = (float *)gs_compress_residual(st);
  if (e == NULL) return GS_OK;
  for (size_t i = 0; i < count; i++) e[idx[i]] += val[i];
  return GS_OK;
}

/* ---- Measured rate ------------------------------------------------------------ */

/* Box-Muller normal values: gradients look like this. */
static void fill_normal(float *g, size_t n, uint64_t seed) {
  uint64_t rng = seed;
  for (size_t i = 0; i < n; i++) {
    float u = gs__rand_unit(&rng) + 1e-7f, v = gs__rand_unit(&rng);
    g[i] = sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
  }
}

/* The median of three timings of compressing g[0..n) (every round) and
 * decoding one payload, with the state told `nseg` segments `seg` (none
 * when nseg <= 1). */
static gs_status time_coding(const gs_compressor *c, const float *g, size_t n,
                             const size_t *seg, size_t nseg, double *secs) {
  gs_status s = GS_OK;
  gs_compress_state *st = NULL;
  float *acc = gs_calloc(n, sizeof *acc);
  void *buf[2] = {NULL, NULL};
  GS_CHECK_GOTO(gs_compress_state_create(c, n, NULL, &st), s, done);
  if (nseg > 1) GS_CHECK_GOTO(gs_compress_set_segments(st, seg, nseg), s, done);
  size_t cap = 0;
  for (int r = 0; r < c->kind->rounds; r++)
    cap = GS_MAX(cap, gs_compress_capacity(st, r));
  buf[0] = gs_malloc(cap ? cap : 1);
  buf[1] = gs_malloc(cap ? cap : 1);
  if (acc == NULL || buf[0] == NULL || buf[1] == NULL) {
    s = gs_error(GS_ERR_NOMEM, "measuring compressor %s on %zu elements: out of memory",
                 c->spec, n);
    goto done;
  }
  double dt[3];
  for (int rep = 0; rep < 3; rep++) {
    const double t0 = gs_now();
    size_t bytes;
    GS_CHECK_GOTO(gs_compress(st, g, n, buf[0], cap, &bytes), s, done);
    for (int r = 1; r < c->kind->rounds; r++) {
      GS_CHECK_GOTO(gs_compress_round(st, r, buf[(r - 1) & 1], bytes, buf[r & 1],
                                      cap, &bytes), s, done);
    }
    GS_CHECK_GOTO(gs_decompress_add(st, buf[(c->kind->rounds - 1) & 1], bytes,
                                    acc, n), s, done);
    dt[rep] = gs_now() - t0;
  }
  *secs = gs__median3(dt[0], dt[1], dt[2]);
done:
  gs_compress_state_destroy(st);
  gs_free(acc);
  gs_free(buf[0]);
  gs_free(buf[1]);
  return s;
}

gs_status gs_compressor_measure(const gs_compressor *c, size_t n,
                                double *secs_per_elem) {
  if (c == NULL || secs_per_elem == NULL || n == 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_compressor_measure: NULL argument or n = 0");
  float *g = gs_malloc(n * sizeof *g);
  if (g == NULL) return GS_ERR_NOMEM;
  fill_normal(g, n, 42);
  double secs = 0;
  gs_status s = time_coding(c, g, n, NULL, 0, &secs);
  if (s == GS_OK) *secs_per_elem = secs / (double)n;
  gs_free(g);
  return s;
}

/* The segments of a message of the first n elements of `sizes`: the
 * tensors that fit, then the first that does not, cut. Returns their
 * number. */
static size_t prefix_segments(const size_t *sizes, size_t count, size_t n, size_t *seg) {
  size_t k = 0, sum = 0;
  for (size_t i = 0; i < count && sum < n; i++) {
    seg[k] = GS_MIN(sizes[i], n - sum);
    sum += seg[k++];
  }
  return k;
}

gs_status gs_compress_measure_coding(const gs_compressor *c, const size_t *sizes,
                                     size_t count, int merged, gs_cost_coding *out) {
  if (c == NULL || sizes == NULL || count == 0 || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_measure_coding: NULL argument or "
                    "no tensors");
  size_t total = 0;
  for (size_t i = 0; i < count; i++) {
    if (sizes[i] == 0 || sizes[i] > SIZE_MAX - total)
      return gs_error(GS_ERR_INVALID_ARG, "gs_compress_measure_coding: tensor %zu has "
                      "%zu elements (expected >= 1, in all below 2^64)", i, sizes[i]);
    total += sizes[i];
  }
  /* The sizes: 2^18, x4 each step, the last the message (capped). */
  const size_t top = GS_MIN(total, GS_COMPRESS_MEASURE_MAX);
  size_t ns[GS_COST_CODING_POINTS];
  int np = 0;
  for (size_t n = GS_COMPRESS_MEASURE_MIN; n < top && np < GS_COST_CODING_POINTS - 1; n *= 4)
    ns[np++] = n;
  ns[np++] = top;
  /* The values once, at the largest size: the Box-Muller values of 2^18
   * elements (those gs_compressor_measure times), and beyond them copies
   * scaled by 1 + j/64 for the j-th, so that no two blocks are equal.
   * Generating every value would cost more than the coding it times. */
  float *g = gs_malloc(top * sizeof *g);
  size_t *seg = gs_malloc(count * sizeof *seg);
  gs_status s = GS_OK;
  if (g == NULL || seg == NULL) {
    s = gs_error(GS_ERR_NOMEM, "measuring compressor %s on %zu elements: out of memory",
                 c->spec, top);
    goto done;
  }
  const size_t block = GS_MIN(top, GS_COMPRESS_MEASURE_MIN);
  fill_normal(g, block, 42);
  for (size_t at = block, j = 1; at < top; at += block, j++) {
    const float f = 1.0f + (float)j / 64.0f;
    const size_t m = GS_MIN(block, top - at);
    for (size_t i = 0; i < m; i++) g[at + i] = g[i] * f;
  }
  memset(out, 0, sizeof *out);
  for (int i = 0; i < np; i++) {
    if (i > 0) {
      /* Three runs at this size, at the last size's rate. */
      const double guess = 3.0 * out->secs[i - 1] * ((double)ns[i] / (double)ns[i - 1]);
      if (guess > GS_COMPRESS_MEASURE_BUDGET_S) break;
    }
    const size_t nseg = merged ? 1 : prefix_segments(sizes, count, ns[i], seg);
    double secs = 0;
    GS_CHECK_GOTO(time_coding(c, g, ns[i], seg, nseg, &secs), s, done);
    out->elems[i] = (double)ns[i];
    out->secs[i] = i > 0 ? GS_MAX(secs, out->secs[i - 1]) : secs;
    out->npoints = i + 1;
  }
done:
  gs_free(g);
  gs_free(seg);
  return s;
}
