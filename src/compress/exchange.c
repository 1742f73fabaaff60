/*
 * gs_compress_allreduce: compress -> exchange -> decompress, with error
 * feedback, the same result on every rank (include/gradsync/compress_comm.h).
 * This file is the one place where compressors meet the communicator.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gradsync/compress_comm.h"
#include "gs_internal.h"
#include "compress_internal.h"

/* ---- Which collective carries which payload ---------------------------------- */

gs_xchg gs_compress_default_xchg(const gs_compressor_info *info) {
  if (info->name && strcmp(info->name, "gtopk") == 0) return GS_XCHG_GTOPK;
  if (info->exchange == GS_EXCHANGE_DENSE)
    return info->rounds > 1 ? GS_XCHG_POWERSGD : GS_XCHG_ALLREDUCE;
  return GS_XCHG_ALLGATHER;
}

gs_status gs_compress_xchg_check(const gs_compressor_info *info, gs_xchg x) {
  if (info == NULL) return gs_error(GS_ERR_INVALID_ARG, "compressed exchange: NULL");
  int ok;
  switch (x) {
    case GS_XCHG_ALLREDUCE:
      ok = info->exchange == GS_EXCHANGE_DENSE && info->rounds == 1;
      break;
    case GS_XCHG_POWERSGD:
      ok = info->exchange == GS_EXCHANGE_DENSE && info->rounds > 1;
      break;
    case GS_XCHG_ALLGATHER:
      ok = info->exchange != GS_EXCHANGE_DENSE;
      break;
    case GS_XCHG_GTOPK:
      /* gTop-k merges fixed-k f32 pairs. */
      ok = info->exchange == GS_EXCHANGE_SPARSE && info->fixed_size;
      break;
    default:
      ok = 0;
  }
  if (!ok)
    return gs_error(GS_ERR_UNSUPPORTED, "compressed exchange: %s payloads cannot "
                    "travel through %s", info->name ? info->name : "?",
                    gs_xchg_name(x));
  return GS_OK;
}

/* ---- Workspace ----------------------------------------------------------------- */

struct gs_xchg_ws {
  void *own, *red;      /* this rank's payload; reduced or gathered payloads */
  size_t own_cap, red_cap;
  void *aux;            /* gTop-k: kept flags, returned pairs */
  size_t aux_cap;
  int64_t *hdr;         /* per rank: status, bytes, n, the compressor's hash */
  size_t *counts, *displs;
  int hdr_ranks;
};

gs_status gs_xchg_ws_create(gs_xchg_ws **out) {
  if (out == NULL) return gs_error(GS_ERR_INVALID_ARG, "xchg workspace: NULL");
  *out = gs_calloc(1, sizeof **out);
  return *out ? GS_OK : GS_ERR_NOMEM;
}

void gs_xchg_ws_destroy(gs_xchg_ws *ws) {
  if (ws == NULL) return;
  gs_free(ws->own);
  gs_free(ws->red);
  gs_free(ws->aux);
  gs_free(ws->hdr);
  gs_free(ws->counts);
  gs_free(ws->displs);
  gs_free(ws);
}

/* Grows *buf to at least n bytes (8-byte aligned: gs_malloc's alignment). */
static gs_status grow(void **buf, size_t *cap, size_t n) {
  if (n <= *cap && *buf != NULL) return GS_OK;
  size_t want = n ? n : 8;
  void *b = gs_malloc(want);
  if (b == NULL)
    return gs_error(GS_ERR_NOMEM, "compressed exchange: cannot allocate %zu bytes",
                    want);
  gs_free(*buf);
  *buf = b;
  *cap = want;
  return GS_OK;
}

enum { XCHG_HDR = 4 }; /* xchg_gather's header: status, bytes, n, compressor */

static gs_status grow_ranks(gs_xchg_ws *ws, int p) {
  if (ws->hdr_ranks >= p) return GS_OK;
  gs_free(ws->hdr);
  gs_free(ws->counts);
  gs_free(ws->displs);
  ws->hdr = gs_malloc(XCHG_HDR * (size_t)p * sizeof *ws->hdr);
  ws->counts = gs_malloc((size_t)p * sizeof *ws->counts);
  ws->displs = gs_malloc((size_t)p * sizeof *ws->displs);
  ws->hdr_ranks = (ws->hdr && ws->counts && ws->displs) ? p : 0;
  return ws->hdr_ranks ? GS_OK : GS_ERR_NOMEM;
}

/* ---- The failure signal of a summed payload --------------------------------------- */

/* A rank whose compression failed sends NaN in every element; the sum is
 * then NaN on every rank (compressors refuse NaN input, so a healthy sum
 * has none, unless a half-precision sum overflowed to inf - inf: also worth
 * an error). */
static void fill_nan(void *payload, size_t bytes, gs_dtype dt) {
  size_t es = gs_dtype_size(dt), n = bytes / es;
  if (dt == GS_F32) {
    float *f = payload;
    for (size_t i = 0; i < n; i++) f[i] = NAN;
  } else {
    uint16_t *h = payload, v = dt == GS_F16 ? 0x7E00 : 0x7FC0;
    for (size_t i = 0; i < n; i++) h[i] = v;
  }
}

/* The first element of a summed payload that is not finite (NaN or an
 * infinity), or `bytes / size` when every one is; *nan says which. Every
 * element is looked at: a sum that overflowed anywhere (a half-precision
 * payload's, most often) is an error, not a result (until 2026-12-07 only
 * the first element was, and an overflow elsewhere returned inf or NaN with
 * GS_OK). */
static size_t first_nonfinite(const void *payload, size_t bytes, gs_dtype dt, int *nan) {
  const size_t n = bytes / gs_dtype_size(dt);
  uint32_t expo = dt == GS_F32 ? 0x7F800000u : dt == GS_F16 ? 0x7C00u : 0x7F80u;
  uint32_t frac = dt == GS_F32 ? 0x007FFFFFu : dt == GS_F16 ? 0x03FFu : 0x007Fu;
  int bad = 0;
  if (dt == GS_F32) {
    const uint32_t *w = payload;
    for (size_t i = 0; i < n; i++) bad |= (w[i] & expo) == expo;
  } else {
    const uint16_t *h = payload;
    for (size_t i = 0; i < n; i++) bad |= (h[i] & expo) == expo;
  }
  if (!bad) return n;
  for (size_t i = 0; i < n; i++) {
    uint32_t v;
    if (dt == GS_F32) memcpy(&v, (const char *)payload + 4 * i, 4);
    else {
      uint16_t h;
      memcpy(&h, (const char *)payload + 2 * i, 2);
      v = h;
    }
    if ((v & expo) == expo) {
      *nan = (v & frac) != 0;
      return i;
    }
  }
  return n;
}

/* ---- The exchange ------------------------------------------------------------------ */

static double since(uint64_t t0) { return (double)(gs_now_ns() - t0) * 1e-9; }

/* Summable payloads: round 0 from gs_compress, later rounds from
 * gs_compress_round on the previous round's sum, each all-reduced. */
static gs_status xchg_dense(gs_comm *comm, const gs_compressor *c,
                            const gs_compressor_info *info, gs_compress_state *st,
                            float *buf, size_t n, gs_xchg_ws *ws, gs_xchg_stats *s) {
  const int rank = gs_comm_rank(comm);
  const gs_dtype dt = info->dense_dtype;
  const size_t es = gs_dtype_size(dt);
  gs_status mine = GS_OK;
  char why[512] = "";
  size_t red_bytes = 0;
  for (int r = 0; r < info->rounds; r++) {
    uint64_t t0 = gs_now_ns();
    size_t cap = gs_compress_capacity(st, r), bytes = 0;
    GS_CHECK(grow(&ws->own, &ws->own_cap, cap));
    /* Round r >= 1 reads the previous sum while writing its payload. */
    if (ws->red == NULL || ws->red_cap < cap) { /* n = 0 too (cap 0) */
      void *nr = gs_malloc(cap ? cap : 8);
      if (nr == NULL) return GS_ERR_NOMEM;
      if (ws->red) memcpy(nr, ws->red, red_bytes);
      gs_free(ws->red);
      ws->red = nr;
      ws->red_cap = cap ? cap : 8;
    }
    if (mine == GS_OK) {
      mine = r == 0 ? gs_compress(st, buf, n, ws->own, cap, &bytes)
                    : gs_compress_round(st, r, ws->red, red_bytes, ws->own, cap, &bytes);
      if (mine != GS_OK) snprintf(why, sizeof why, "%s", gs_last_error());
    }
    if (mine != GS_OK) {
      /* Still take part, with the size every rank sends and NaN in it. */
      if (gs_compressor_payload_bytes(c, n, r, &bytes) != GS_OK || bytes > cap)
        bytes = 0;
      fill_nan(ws->own, bytes, dt);
    }
    if (bytes % es != 0)
      return gs_error(GS_ERR_INTERNAL, "rank %d: compressed exchange: %s's round %d "
                      "payload of %zu bytes is not whole %s elements", rank,
                      info->name, r, bytes, gs_dtype_name(dt));
    s->compress_s += since(t0);
    s->payload_bytes += bytes;
    t0 = gs_now_ns();
    GS_CHECK(gs_allreduce(comm, ws->own, ws->red, bytes / es, dt, GS_SUM,
                          GS_ALGO_AUTO));
    s->comm_s += since(t0);
    red_bytes = bytes;
    int nan = 0;
    size_t bad = mine == GS_OK ? first_nonfinite(ws->red, bytes, dt, &nan) : bytes / es;
    if (bad == 0 && nan) {
      /* the failure signal: NaN in every element */
      mine = gs_error(GS_ERR_INVALID_ARG, "rank %d: compressed exchange (%s, %zu "
                      "elements): another rank failed to compress its payload "
                      "(its own error says why), or the sum overflowed", rank,
                      info->name, n);
      snprintf(why, sizeof why, "%s", gs_last_error());
    } else if (bad < bytes / es) {
      mine = gs_error(GS_ERR_INVALID_ARG, "rank %d: compressed exchange (%s, %zu "
                      "elements): the sum of the ranks' round-%d payloads overflowed %s "
                      "at element %zu (%s): the values are too large for it", rank,
                      info->name, n, r, gs_dtype_name(dt), bad, nan ? "NaN" : "infinite");
      snprintf(why, sizeof why, "%s", gs_last_error());
    }
  }
  if (mine != GS_OK) {
    gs__error_set_message(why);
    return mine;
  }
  uint64_t t0 = gs_now_ns();
  memset(buf, 0, n * sizeof *buf);
  GS_CHECK(gs_decompress_add(st, ws->red, red_bytes, buf, n));
  GS_CHECK(gs_scale_div(buf, n, GS_F32, gs_comm_size(comm)));
  s->decompress_s += since(t0);
  return GS_OK;
}

/* Sparse and opaque payloads: every rank's status and size first (one small
 * all-gather, which also carries a failure to every rank, and a tensor
 * size or compressor that differs from rank 0's: until 2026-12-07 such a
 * rank failed alone, or none did, with mixed payloads decoded), then the
 * payloads (all-gatherv of bytes, each at an 8-byte aligned place), decoded
 * in rank order. */
static gs_status xchg_gather(gs_comm *comm, const gs_compressor_info *info,
                             gs_compress_state *st, float *buf, size_t n,
                             gs_xchg_ws *ws, gs_xchg_stats *s) {
  const int rank = gs_comm_rank(comm), p = gs_comm_size(comm);
  uint64_t t0 = gs_now_ns();
  size_t cap = gs_compress_capacity(st, 0), bytes = 0;
  GS_CHECK(grow(&ws->own, &ws->own_cap, cap));
  GS_CHECK(grow_ranks(ws, p));
  gs_status mine = gs_compress(st, buf, n, ws->own, cap, &bytes);
  char why[512] = "";
  if (mine != GS_OK) {
    snprintf(why, sizeof why, "%s", gs_last_error());
    bytes = 0;
  }
  s->compress_s += since(t0);
  t0 = gs_now_ns();
  int64_t hdr[XCHG_HDR] = {(int64_t)mine, (int64_t)bytes, (int64_t)n, (int64_t)st->c->sig};
  GS_CHECK(gs_allgather(comm, hdr, ws->hdr, XCHG_HDR, GS_I64, GS_ALGO_AUTO));
  int failed = -1, nfailed = 0, other = -1;
  size_t total = 0;
  for (int r = 0; r < p; r++) {
    const int64_t *h = ws->hdr + XCHG_HDR * r;
    if (h[0] != 0) {
      if (failed < 0) failed = r;
      nfailed++;
    }
    if (other < 0 && (h[2] != ws->hdr[2] || h[3] != ws->hdr[3])) other = r;
    ws->counts[r] = (size_t)h[1];
    ws->displs[r] = total;
    total += (ws->counts[r] + 7) / 8 * 8;
  }
  if (other >= 0) {
    s->comm_s += since(t0);
    const int64_t *h = ws->hdr + XCHG_HDR * other;
    if (h[2] != ws->hdr[2])
      return gs_error(GS_ERR_MISMATCH, "rank %d: compressed exchange (%s): ranks disagree on "
                      "the tensor size: rank 0 gives n = %lld, rank %d n = %lld", rank,
                      info->name, (long long)ws->hdr[2], other, (long long)h[2]);
    return gs_error(GS_ERR_MISMATCH, "rank %d: compressed exchange (%s here, %zu elements): "
                    "rank %d uses another compressor or parameter than rank 0", rank,
                    st->c->spec, n, other);
  }
  if (failed >= 0) {
    s->comm_s += since(t0);
    if (mine != GS_OK) {
      gs__error_set_message(why);
      return mine;
    }
    return gs_error((gs_status)ws->hdr[XCHG_HDR * failed], "rank %d: compressed exchange "
                    "(%s, %zu elements): rank %d%s failed to compress its payload "
                    "(its own error says why)", rank, info->name, n, failed,
                    nfailed > 1 ? " and others" : "");
  }
  GS_CHECK(grow(&ws->red, &ws->red_cap, total));
  GS_CHECK(gs_allgatherv(comm, ws->own, bytes, ws->red, ws->counts, ws->displs,
                         GS_U8, GS_ALGO_AUTO));
  s->comm_s += since(t0);
  s->payload_bytes += bytes;
  t0 = gs_now_ns();
  memset(buf, 0, n * sizeof *buf);
  for (int r = 0; r < p; r++)
    GS_CHECK(gs_decompress_add(st, (char *)ws->red + ws->displs[r], ws->counts[r],
                               buf, n));
  GS_CHECK(gs_scale_div(buf, n, GS_F32, p));
  s->decompress_s += since(t0);
  return GS_OK;
}

/* gTop-k (Shi et al., ICDCS 2019): the pairs of every rank merge in a tree
 * into one global set of at most k pairs, the same on every rank; this
 * rank's selected entries that did not make the global set go back to its
 * error feedback (gs_compress_return). A rank whose compression failed
 * gives k + 1 pairs, which the collective's own validity exchange turns
 * into an error on every rank naming it. */
static gs_status xchg_gtopk(gs_comm *comm, gs_compress_state *st, float *buf, size_t n,
                            gs_xchg_ws *ws, gs_xchg_stats *s) {
  uint64_t t0 = gs_now_ns();
  /* k is this step's (under a density warm-up, the step's density: until
   * 2026-12-07 the warm-up's first, 25%, for the whole run, so the global
   * set held every rank's pairs and each message was sized for 25%). */
  size_t cap = gs_compress_capacity(st, 0), k = gs__compress_step_capacity(st, 0) / 8;
  size_t bytes = 0;
  GS_CHECK(grow(&ws->own, &ws->own_cap, GS_MAX(cap, (k + 1) * 8)));
  GS_CHECK(grow(&ws->red, &ws->red_cap, (k + 1) * 8));
  const size_t koff = (k + 8) / 8 * 8; /* kept flags, then aligned pairs */
  GS_CHECK(grow(&ws->aux, &ws->aux_cap, koff + (k + 1) * 8));
  gs_status mine = gs_compress(st, buf, n, ws->own, cap, &bytes);
  char why[512] = "";
  const uint32_t *idx;
  const float *val;
  size_t count = 0;
  uint32_t *bad_idx = NULL;
  float *bad_val = NULL;
  if (mine == GS_OK) GS_CHECK(gs_sparse_view(ws->own, bytes, &idx, &val, &count));
  if (mine != GS_OK) {
    snprintf(why, sizeof why, "%s", gs_last_error());
    bad_idx = ws->own;
    bad_val = (float *)((uint32_t *)ws->own + k + 1);
    memset(ws->own, 0, (k + 1) * 8);
    idx = bad_idx;
    val = bad_val;
    count = k + 1;
  }
  s->compress_s += since(t0);
  t0 = gs_now_ns();
  uint32_t *out_idx = ws->red;
  float *out_val = (float *)((uint32_t *)ws->red + k + 1);
  uint8_t *kept = ws->aux;
  size_t out_count = 0;
  gs_status cs = gs_gtopk(comm, idx, val, count, k, n, out_idx, out_val, &out_count,
                          kept);
  s->comm_s += since(t0);
  if (mine != GS_OK) {
    gs__error_set_message(why);
    return mine;
  }
  if (cs != GS_OK) return cs;
  s->payload_bytes += bytes;
  t0 = gs_now_ns();
  /* Error feedback: what this rank selected but the global set dropped. */
  uint32_t *ret_idx = (uint32_t *)((uint8_t *)ws->aux + koff);
  size_t nret = 0;
  for (size_t i = 0; i < count; i++)
    if (!kept[i]) ret_idx[nret++] = idx[i];
  float *ret_val = (float *)(ret_idx + nret);
  for (size_t i = 0, j = 0; i < count; i++)
    if (!kept[i]) ret_val[j++] = val[i];
  if (nret) GS_CHECK(gs_compress_return(st, ret_idx, ret_val, nret));
  memset(buf, 0, n * sizeof *buf);
  for (size_t i = 0; i < out_count; i++) buf[out_idx[i]] += out_val[i];
  GS_CHECK(gs_scale_div(buf, n, GS_F32, gs_comm_size(comm)));
  s->decompress_s += since(t0);
  return GS_OK;
}

gs_status gs_compress_allreduce(gs_comm *comm, const gs_compressor *c,
                                gs_compress_state *st, float *buf, size_t n,
                                gs_xchg x, gs_xchg_ws *ws, gs_xchg_stats *stats) {
  if (comm == NULL || c == NULL || st == NULL || (buf == NULL && n > 0))
    return gs_error(GS_ERR_INVALID_ARG, "compressed exchange: NULL argument");
  gs_compressor_info info;
  GS_CHECK(gs_compressor_info_get(c, &info));
  GS_CHECK(gs_compress_xchg_check(&info, x));
  gs_xchg_stats local = {0};
  gs_xchg_stats *s = stats ? stats : &local;
  gs_xchg_ws *own_ws = NULL;
  if (ws == NULL) {
    GS_CHECK(gs_xchg_ws_create(&own_ws));
    ws = own_ws;
  }
  gs_status rc = x == GS_XCHG_ALLGATHER ? xchg_gather(comm, &info, st, buf, n, ws, s)
                 : x == GS_XCHG_GTOPK   ? xchg_gtopk(comm, st, buf, n, ws, s)
                                        : xchg_dense(comm, c, &info, st, buf, n, ws, s);
  if (rc == GS_OK) {
    s->calls++;
    s->dense_bytes += (uint64_t)n * sizeof(float);
  }
  gs_xchg_ws_destroy(own_ws);
  return rc;
}

/* ---- Figures for the cost model ------------------------------------------------------ */

gs_status gs_compress_cost_figures(const gs_compressor *c, size_t n,
                                   double secs_per_elem, gs_cost_compress *out) {
  if (c == NULL || out == NULL || n == 0 || !isfinite(secs_per_elem) ||
      secs_per_elem < 0)
    return gs_error(GS_ERR_INVALID_ARG, "compression cost: bad arguments (n=%zu, "
                    "%g s per element)", n, secs_per_elem);
  gs_compressor_info info;
  GS_CHECK(gs_compressor_info_get(c, &info));
  size_t payload = 0;
  for (int r = 0; r < info.rounds; r++) {
    size_t b = 0;
    GS_CHECK(gs_compressor_payload_bytes(c, n, r, &b));
    payload += b;
  }
  const double dense = 4.0 * (double)n;
  double cb = info.compress_bytes_per_elem, db = info.decompress_bytes_per_elem;
  double enc_share = cb + db > 0 ? cb / (cb + db) : 1.0;
  memset(out, 0, sizeof *out);
  out->ratio = payload > 0 ? (double)payload / dense : 1.0 / dense;
  out->fixed = 0;
  out->encode_s_per_byte = secs_per_elem * enc_share / 4.0;
  /* One payload's decoding takes (1 - share) * secs_per_elem * n. */
  out->decode_s_per_byte =
      payload > 0 ? secs_per_elem * (1 - enc_share) * (double)n / (double)payload : 0;
  out->decode_s_per_byte_dense = 0;
  return gs_cost_compress_check(out);
}
