/*
 * The sparse collectives' public calls: argument checking on the caller's
 * thread, queueing, the agreement each one starts with on the progress
 * thread, and the choice between a sparse exchange and the dense all-reduce.
 *
 * A sparse collective has a failure mode the dense ones lack: its sizes are
 * data (how many pairs a rank selected, which indices), so one rank can be
 * wrong while the others are right. The caller's thread checks this rank's
 * pairs, and the first thing the progress thread does is an all-gather of
 * every rank's sizes and verdict: every rank then fails alike, naming the
 * rank at fault, or goes on with every rank's count in hand.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sparse_internal.h"

static const char *const algo_names[GS_SPARSE_COUNT] = {
    "auto", "allgather", "gtopk", "hitopk", "dense"};

const char *gs_sparse_algo_name(gs_sparse_algo algo) {
  return (unsigned)algo < GS_SPARSE_COUNT ? algo_names[algo] : "invalid-sparse-algo";
}

gs_status gs_sparse_algo_parse(const char *name, gs_sparse_algo *out) {
  if (name == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "sparse algorithm: NULL argument");
  for (int i = 0; i < GS_SPARSE_COUNT; i++) {
    if (strcasecmp(name, algo_names[i]) == 0) {
      *out = (gs_sparse_algo)i;
      return GS_OK;
    }
  }
  return gs_error(GS_ERR_INVALID_ARG, "unknown sparse algorithm '%s' (auto, "
                  "allgather, gtopk, hitopk, dense)", name);
}

void sparse_args_free(sparse_args *s) { gs_free(s); }

/* ---- The cost model's choice -------------------------------------------- */

gs_sparse_algo gs_comm_choose_sparse(const gs_comm *c, gs_sparse_algo algo,
                                     size_t n, size_t pairs, gs_dtype dtype,
                                     double *sparse_s, double *dense_s) {
  if (algo == GS_SPARSE_AUTO) algo = GS_SPARSE_ALLGATHER;
  size_t esize = gs_dtype_size(dtype);
  double pair_bytes = (double)(sizeof(uint32_t) + esize);
  gs_cost_topo t = {c->world.size, c->uniform_nodes ? c->nodes : c->world.size};
  double dense_bytes = (double)n * (double)esize;
  double dense = gs_cost_allreduce(&c->cost, t,
                                   gs_comm_choose_allreduce(c, (size_t)dense_bytes),
                                   dense_bytes);
  double sparse = 0;
  switch (algo) {
    case GS_SPARSE_GTOPK:
      sparse = gs_cost_gtopk(&c->cost, t, (double)pairs, pair_bytes);
      break;
    case GS_SPARSE_HITOPK:
      sparse = gs_cost_hitopk(&c->cost, t, (double)n, (double)esize,
                              (double)pairs, pair_bytes);
      break;
    case GS_SPARSE_DENSE:
      sparse = dense;
      break;
    default:
      sparse = gs_cost_sparse_allgather(&c->cost, t, (double)pairs, pair_bytes);
      break;
  }
  if (sparse_s) *sparse_s = sparse;
  if (dense_s) *dense_s = dense;
  return sparse <= dense ? algo : GS_SPARSE_DENSE;
}

/* ---- The agreement ---------------------------------------------------------- */

enum { H_N, H_K, H_COUNT, H_CAP, H_BAD, H_POS, H_VAL, H_WORDS };

gs_status sparse_agree(gs_comm *c, const coll_group *g, const char *what,
                       const sparse_args *s, int same_k, size_t capacity,
                       size_t *counts, size_t *total) {
  (void)c;
  int p = g->size, me = g->rank;
  uint64_t mine[H_WORDS] = {s->n, s->k, s->count, capacity, (uint64_t)s->bad,
                            s->bad_pos, s->bad_value};
  /* On the progress thread, over the group's own MPI communicator. A rank's
   * status is its pairs' verdict; the words say what is wrong, which the
   * loops below turn into the same error on every rank. */
  gs_agreement ag;
  GS_CHECK(gs_agree(NULL, g->mpi, "sparse sizes",
                    s->bad ? GS_ERR_INVALID_ARG : GS_OK, NULL, mine,
                    sizeof mine, &ag));
  comm_progress(g);
  const uint64_t *all = ag.payloads;
  gs_status st = GS_OK;
  size_t sum = 0;
  for (int r = 0; r < p && st == GS_OK; r++) {
    const uint64_t *h = all + (size_t)r * H_WORDS;
    if (h[H_N] != all[H_N])
      st = gs_error(GS_ERR_MISMATCH, "%s on rank %d: ranks disagree on the "
                    "tensor size: rank 0 gives n = %llu, rank %d n = %llu", what,
                    me, (unsigned long long)all[H_N], r,
                    (unsigned long long)h[H_N]);
    else if (same_k && h[H_K] != all[H_K])
      st = gs_error(GS_ERR_MISMATCH, "%s on rank %d: ranks disagree on k: rank "
                    "0 gives k = %llu, rank %d k = %llu", what, me,
                    (unsigned long long)all[H_K], r, (unsigned long long)h[H_K]);
    else if (h[H_BAD] == SPARSE_BAD_INDEX)
      st = gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: rank %d's pair %llu has "
                    "index %llu, not below n = %llu", what, me, r,
                    (unsigned long long)h[H_POS], (unsigned long long)h[H_VAL],
                    (unsigned long long)h[H_N]);
    /* Exactly k + 1 pairs is how a rank whose own step failed before the
     * exchange (a NaN in its gradient, say) still takes part in gTop-k
     * (src/compress/exchange.c): the others say that it failed, its own
     * error says why. Until 2026-12-07 they said it gave too many pairs. */
    else if (h[H_BAD] == SPARSE_BAD_COUNT && h[H_COUNT] == h[H_K] + 1)
      st = gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: rank %d failed before "
                    "the exchange (its own error says why): it gave k + 1 = "
                    "%llu pairs, the sign of that failure (a caller gives at "
                    "most k = %llu)", what, me, r,
                    (unsigned long long)h[H_COUNT], (unsigned long long)h[H_K]);
    else if (h[H_BAD] == SPARSE_BAD_COUNT)
      st = gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: rank %d gives %llu "
                    "pairs, more than k = %llu", what, me, r,
                    (unsigned long long)h[H_COUNT], (unsigned long long)h[H_K]);
    else if (h[H_BAD] == SPARSE_BAD_K)
      st = gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: k = %llu exceeds the "
                    "tensor's n = %llu", what, me, (unsigned long long)h[H_K],
                    (unsigned long long)h[H_N]);
    if (counts) counts[r] = (size_t)h[H_COUNT];
    sum += (size_t)h[H_COUNT];
  }
  for (int r = 0; r < p && st == GS_OK; r++) {
    const uint64_t *h = all + (size_t)r * H_WORDS;
    if (sum > h[H_CAP])
      st = gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: the ranks give %zu "
                    "pairs in all, more than the %llu that rank %d's output "
                    "holds", what, me, sum, (unsigned long long)h[H_CAP], r);
  }
  gs_agreement_free(&ag);
  if (total) *total = sum;
  return st;
}

/* ---- Issue --------------------------------------------------------------- */

/* Checks what every sparse call shares and this rank's pairs. The pairs'
 * verdict is not returned: the agreement tells every rank. */
static gs_status check_pairs(gs_comm *c, const char *what, gs_dtype dtype,
                             int f32_only, const uint32_t *idx, const void *val,
                             size_t count, size_t n, sparse_args *s) {
  if (c == NULL) return gs_error(GS_ERR_INVALID_ARG, "%s: communicator is NULL", what);
  if (dtype != GS_F32 && (f32_only || (dtype != GS_F16 && dtype != GS_BF16)))
    return gs_error(GS_ERR_UNSUPPORTED, "%s on rank %d: values of dtype %s are "
                    "not supported (%s)", what, c->world.rank,
                    gs_dtype_name(dtype), f32_only ? "f32" : "f32, f16, bf16");
  if (n > (size_t)UINT32_MAX + 1)
    return gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: n = %zu does not fit "
                    "32-bit indices", what, c->world.rank, n);
  if (count > 0 && (idx == NULL || val == NULL))
    return gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: %s is NULL with %zu "
                    "pairs", what, c->world.rank, idx == NULL ? "idx" : "val",
                    count);
  size_t bytes;
  if (gs_mul_size(count, sizeof(uint32_t) + gs_dtype_size(dtype), &bytes) != GS_OK ||
      bytes > (size_t)PTRDIFF_MAX)
    return gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: %zu pairs overflow the "
                    "address space", what, c->world.rank, count);
  s->idx = idx;
  s->val = val;
  s->count = count;
  s->n = n;
  s->dtype = dtype;
  for (size_t i = 0; i < count; i++) {
    if (idx[i] >= n) {
      s->bad = SPARSE_BAD_INDEX;
      s->bad_pos = i;
      s->bad_value = idx[i];
      break;
    }
  }
  return GS_OK;
}

static gs_status issue(gs_comm *c, coll_kind kind, sparse_args *s,
                       gs_request **req) {
  gs_request *r = gs_calloc(1, sizeof *r);
  if (r == NULL) {
    gs_free(s);
    return GS_ERR_NOMEM;
  }
  r->args.kind = kind;
  r->args.algo = GS_ALGO_AUTO;
  r->args.count = s->n;
  r->args.dtype = s->dtype;
  r->args.sparse = s;
  r->comm = c;
  gs_status st = comm_enqueue(c, r);
  if (st != GS_OK) {
    gs_free(s);
    gs_free(r);
    return st;
  }
  *req = r;
  return GS_OK;
}

#define BEGIN(what)                                                         \
  if (req == NULL)                                                          \
    return gs_error(GS_ERR_INVALID_ARG, "%s: request pointer is NULL", what); \
  *req = NULL;                                                              \
  if (c == NULL)                                                            \
    return gs_error(GS_ERR_INVALID_ARG, "%s: communicator is NULL", what);  \
  sparse_args *s = gs_calloc(1, sizeof *s);                                 \
  if (s == NULL) return GS_ERR_NOMEM

#define TRY(call)          \
  do {                     \
    gs_status st_ = (call); \
    if (st_ != GS_OK) {    \
      gs_free(s);          \
      return st_;          \
    }                      \
  } while (0)

static gs_status check_out(gs_comm *c, const char *what, const char *name,
                           const void *buf, size_t count) {
  if (buf == NULL && count > 0)
    return gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: %s is NULL with room "
                    "for %zu needed", what, c->world.rank, name, count);
  return GS_OK;
}

gs_status gs_isparse_allgather(gs_comm *c, const uint32_t *idx, const void *val,
                               size_t k, size_t n, gs_dtype dtype,
                               uint32_t *out_idx, void *out_val,
                               gs_request **req) {
  BEGIN("sparse_allgather");
  TRY(check_pairs(c, "sparse_allgather", dtype, 0, idx, val, k, n, s));
  size_t total;
  if (gs_mul_size(k, (size_t)c->world.size, &total) != GS_OK) total = SIZE_MAX;
  TRY(check_out(c, "sparse_allgather", "out_idx", out_idx, total));
  TRY(check_out(c, "sparse_allgather", "out_val", out_val, total));
  s->k = k;
  s->fixed = 1;
  s->capacity = total;
  s->out_idx = out_idx;
  s->out_val = out_val;
  return issue(c, COLL_SPARSE_ALLGATHER, s, req);
}

gs_status gs_isparse_allgatherv(gs_comm *c, const uint32_t *idx,
                                const void *val, size_t count, size_t n,
                                gs_dtype dtype, uint32_t *out_idx,
                                void *out_val, size_t capacity, size_t *counts,
                                gs_request **req) {
  BEGIN("sparse_allgatherv");
  TRY(check_pairs(c, "sparse_allgatherv", dtype, 0, idx, val, count, n, s));
  TRY(check_out(c, "sparse_allgatherv", "out_idx", out_idx, capacity));
  TRY(check_out(c, "sparse_allgatherv", "out_val", out_val, capacity));
  TRY(check_out(c, "sparse_allgatherv", "counts", counts, 1));
  s->capacity = capacity;
  s->counts = counts;
  s->out_idx = out_idx;
  s->out_val = out_val;
  return issue(c, COLL_SPARSE_ALLGATHER, s, req);
}

gs_status gs_isparse_allreduce(gs_comm *c, const uint32_t *idx, const void *val,
                               size_t count, size_t n, gs_dtype dtype,
                               void *dense, gs_sparse_algo algo,
                               gs_request **req) {
  BEGIN("sparse_allreduce");
  TRY(check_pairs(c, "sparse_allreduce", dtype, 0, idx, val, count, n, s));
  TRY(check_out(c, "sparse_allreduce", "dense", dense, n));
  if (algo != GS_SPARSE_AUTO && algo != GS_SPARSE_ALLGATHER &&
      algo != GS_SPARSE_DENSE)
    TRY(gs_error(GS_ERR_UNSUPPORTED, "sparse_allreduce on rank %d: algorithm "
                 "%s does not give the sum of every rank's pairs (auto, "
                 "allgather, dense)", c->world.rank, gs_sparse_algo_name(algo)));
  s->algo = algo;
  s->dense = dense;
  return issue(c, COLL_SPARSE_ALLREDUCE, s, req);
}

gs_status gs_igtopk(gs_comm *c, const uint32_t *idx, const float *val,
                    size_t count, size_t k, size_t n, uint32_t *out_idx,
                    float *out_val, size_t *out_count, uint8_t *kept,
                    gs_request **req) {
  BEGIN("gtopk");
  TRY(check_pairs(c, "gtopk", GS_F32, 1, idx, val, count, n, s));
  TRY(check_out(c, "gtopk", "out_idx", out_idx, k));
  TRY(check_out(c, "gtopk", "out_val", out_val, k));
  TRY(check_out(c, "gtopk", "out_count", out_count, 1));
  s->k = k;
  if (count > k && s->bad == 0) s->bad = SPARSE_BAD_COUNT;
  s->out_idx = out_idx;
  s->out_val = out_val;
  s->out_count = out_count;
  s->kept = kept;
  return issue(c, COLL_GTOPK, s, req);
}

gs_status gs_ihitopk(gs_comm *c, const float *sendbuf, float *recvbuf,
                     size_t n, size_t k, gs_topk_fn select, const char *method,
                     gs_sparse_algo algo, gs_request **req) {
  BEGIN("hitopk");
  TRY(check_pairs(c, "hitopk", GS_F32, 1, NULL, NULL, 0, n, s));
  TRY(check_out(c, "hitopk", "recvbuf", recvbuf, n));
  if (sendbuf != (const float *)GS_IN_PLACE)
    TRY(check_out(c, "hitopk", "sendbuf", sendbuf, n));
  if (algo != GS_SPARSE_AUTO && algo != GS_SPARSE_HITOPK && algo != GS_SPARSE_DENSE)
    TRY(gs_error(GS_ERR_UNSUPPORTED, "hitopk on rank %d: algorithm %s is not "
                 "HiTopKComm's (auto, hitopk, dense)", c->world.rank,
                 gs_sparse_algo_name(algo)));
  if (select == NULL && algo != GS_SPARSE_DENSE)
    TRY(gs_error(GS_ERR_INVALID_ARG, "hitopk on rank %d: no selection function "
                 "(pass gs_topk_f32 from gradsync/compress.h)", c->world.rank));
  if (method != NULL && strlen(method) >= sizeof s->method)
    TRY(gs_error(GS_ERR_INVALID_ARG, "hitopk on rank %d: selection method name "
                 "is too long", c->world.rank));
  /* The node split is the same on every rank, so every rank refuses alike. */
  if (!c->uniform_nodes)
    TRY(gs_error(GS_ERR_UNSUPPORTED, "hitopk on rank %d: HiTopKComm needs the "
                 "same number of ranks on every node", c->world.rank));
  if (k > n) s->bad = SPARSE_BAD_K;
  s->k = k;
  s->count = k;
  s->algo = algo;
  s->sendbuf = sendbuf == (const float *)GS_IN_PLACE || sendbuf == recvbuf
                   ? NULL : sendbuf;
  s->recvbuf = recvbuf;
  s->select = select;
  snprintf(s->method, sizeof s->method, "%s", method ? method : "exact");
  return issue(c, COLL_HITOPK, s, req);
}

/* ---- Blocking forms ------------------------------------------------------- */

#define WAIT_ON(call)  \
  do {                 \
    gs_request *r_;    \
    GS_CHECK(call);    \
    return gs_wait(r_); \
  } while (0)

gs_status gs_sparse_allgather(gs_comm *c, const uint32_t *idx, const void *val,
                              size_t k, size_t n, gs_dtype dtype,
                              uint32_t *out_idx, void *out_val) {
  WAIT_ON(gs_isparse_allgather(c, idx, val, k, n, dtype, out_idx, out_val, &r_));
}

gs_status gs_sparse_allgatherv(gs_comm *c, const uint32_t *idx, const void *val,
                               size_t count, size_t n, gs_dtype dtype,
                               uint32_t *out_idx, void *out_val,
                               size_t capacity, size_t *counts) {
  WAIT_ON(gs_isparse_allgatherv(c, idx, val, count, n, dtype, out_idx, out_val,
                                capacity, counts, &r_));
}

gs_status gs_sparse_allreduce(gs_comm *c, const uint32_t *idx, const void *val,
                              size_t count, size_t n, gs_dtype dtype,
                              void *dense, gs_sparse_algo algo) {
  WAIT_ON(gs_isparse_allreduce(c, idx, val, count, n, dtype, dense, algo, &r_));
}

gs_status gs_gtopk(gs_comm *c, const uint32_t *idx, const float *val,
                   size_t count, size_t k, size_t n, uint32_t *out_idx,
                   float *out_val, size_t *out_count, uint8_t *kept) {
  WAIT_ON(gs_igtopk(c, idx, val, count, k, n, out_idx, out_val, out_count, kept,
                    &r_));
}

gs_status gs_hitopk(gs_comm *c, const float *sendbuf, float *recvbuf, size_t n,
                    size_t k, gs_topk_fn select, const char *method,
                    gs_sparse_algo algo) {
  WAIT_ON(gs_ihitopk(c, sendbuf, recvbuf, n, k, select, method, algo, &r_));
}
