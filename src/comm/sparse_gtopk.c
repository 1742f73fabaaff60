/*
 * gTop-k (Shi, Wang, Chu, Li, "A Distributed Synchronous SGD Algorithm with
 * Global Top-k Sparsification for Low Bandwidth Networks", ICDCS 2019):
 * instead of gathering every rank's k pairs (P k pairs on every rank), ranks
 * merge in a tree, and each step keeps only the top k of the sum, so no
 * message ever holds more than k pairs.
 *
 * The tree here is recursive doubling: in step j, rank r and rank r ^ 2^j
 * exchange their sets and both compute merge(A, B) = the top k of A + B.
 * The merge is symmetric (float addition commutes, ties go to the smaller
 * index), so both partners hold the same set after each step, and after
 * lg q steps every rank of the power-of-two core holds the global set: the
 * tree's reduction and its final broadcast in lg q exchanges instead of
 * 2 lg q. Any rank count works: of the first 2(p - q) ranks, each even one
 * folds its set into the odd one above before the exchanges and receives
 * the result from it after (as recursive-doubling all-reduce does).
 *
 * Every message has room for k pairs and a count, so the sizes of each step
 * are known in advance and a rank with fewer (or zero) pairs still sends
 * one message: no step waits on a size.
 *
 * Error feedback needs more than the global set: a rank's value at index i
 * reached the global sum only if i survived every merge from the one that
 * first took that value in, and a merge can drop i while a later one takes
 * it back with other ranks' values alone. So each rank keeps the list of its
 * own indices still carried by the set it holds (its "live" list), cut down
 * after every merge; as both partners of a step hold the same set, that is
 * exactly the list of its values the set contains. A folded-in rank never
 * sees the merges, so the odd rank above it tracks that rank's list too and
 * returns it, as a mask over the result, with the result. (Taking kept as
 * "the index is in the global set", as a global mask does, loses the values
 * an earlier merge dropped: they are neither summed nor put back.)
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sparse_internal.h"

/* The magnitude a pair is ranked by; NaN ranks above everything, so that a
 * NaN gradient is never silently dropped and the order stays total. */
static inline float key_of(float v) {
  float a = fabsf(v);
  return a != a ? INFINITY : a;
}

static inline float median3(float a, float b, float c) {
  if (a > b) return b > c ? b : (a > c ? c : a);
  return a > c ? a : (b > c ? c : b);
}

/* The k-th largest (k >= 1) of keys[0..m), m >= k, by quickselect (Hoare's
 * partition around a median of three); reorders keys. No key is NaN. */
static float kth_largest(float *keys, size_t m, size_t k) {
  ptrdiff_t lo = 0, hi = (ptrdiff_t)m - 1, want = (ptrdiff_t)k - 1;
  while (lo < hi) {
    float pivot = median3(keys[lo], keys[lo + (hi - lo) / 2], keys[hi]);
    ptrdiff_t i = lo, j = hi;
    while (i <= j) {
      while (keys[i] > pivot) i++;
      while (keys[j] < pivot) j--;
      if (i <= j) {
        float t = keys[i];
        keys[i++] = keys[j];
        keys[j--] = t;
      }
    }
    /* keys[lo..j] >= pivot >= keys[i..hi]; between them, the pivot. */
    if (want <= j) hi = j;
    else if (want >= i) lo = i;
    else return keys[want];
  }
  return keys[want];
}

size_t sparse_merge_topk(const uint32_t *ia, const float *va, size_t na,
                         const uint32_t *ib, const float *vb, size_t nb,
                         size_t k, uint32_t *io, float *vo, float *keybuf) {
  size_t i = 0, j = 0, m = 0;
  while (i < na || j < nb) {
    if (j >= nb || (i < na && ia[i] < ib[j])) {
      io[m] = ia[i];
      vo[m] = va[i++];
    } else if (i >= na || ib[j] < ia[i]) {
      io[m] = ib[j];
      vo[m] = vb[j++];
    } else {
      io[m] = ia[i];
      vo[m] = va[i++] + vb[j++];
    }
    m++;
  }
  if (m <= k) return m;
  if (k == 0) return 0;
  for (size_t t = 0; t < m; t++) keybuf[t] = key_of(vo[t]);
  float thr = kth_largest(keybuf, m, k);
  size_t above = 0;
  for (size_t t = 0; t < m; t++) above += key_of(vo[t]) > thr;
  /* The ties at the threshold that fit, smallest indices first: the list is
   * in index order. */
  size_t ties = k - above, w = 0;
  for (size_t t = 0; t < m; t++) {
    float key = key_of(vo[t]);
    if (key > thr || (key == thr && ties > 0 && ties-- > 0)) {
      io[w] = io[t];
      vo[w] = vo[t];
      w++;
    }
  }
  return w;
}

typedef struct {
  uint32_t idx;
  float val;
} pair;

static int pair_cmp(const void *a, const void *b) {
  uint32_t x = ((const pair *)a)->idx, y = ((const pair *)b)->idx;
  return (x > y) - (x < y);
}

/* A message: the number of pairs, then room for k indices and k values. */
typedef struct {
  uint64_t *buf;
  uint32_t *idx;
  float *val;
  uint8_t *live; /* only in the result returned to a folded-in rank */
  size_t bytes, ret_bytes;
} gtopk_msg;

static gs_status msg_init(gtopk_msg *m, size_t k) {
  m->bytes = sizeof(uint64_t) + k * (sizeof(uint32_t) + sizeof(float));
  m->ret_bytes = m->bytes + k;
  m->buf = gs_malloc(m->ret_bytes);
  if (m->buf == NULL) return GS_ERR_NOMEM;
  m->idx = (uint32_t *)(m->buf + 1);
  m->val = (float *)(m->idx + k);
  m->live = (uint8_t *)(m->val + k);
  return GS_OK;
}

typedef struct {
  size_t k, m;            /* capacity; pairs in the current set */
  uint32_t *idx, *midx;   /* the current set (k), the merge's output (2k) */
  float *val, *mval, *keys;
  /* This rank's indices whose values the current set still carries, and
   * (on an odd rank of the fold) those of the rank folded into it; sorted. */
  uint32_t *live, *flive;
  size_t nlive, nflive;
  gtopk_msg out, in;
} gtopk_state;

static void state_free(gtopk_state *st) {
  gs_free(st->idx);
  gs_free(st->midx);
  gs_free(st->val);
  gs_free(st->mval);
  gs_free(st->keys);
  gs_free(st->live);
  gs_free(st->flive);
  gs_free(st->out.buf);
  gs_free(st->in.buf);
}

static gs_status state_init(gtopk_state *st, size_t k) {
  memset(st, 0, sizeof *st);
  st->k = k;
  size_t two = 2 * k + 1;
  st->idx = gs_malloc((k + 1) * sizeof(uint32_t));
  st->val = gs_malloc((k + 1) * sizeof(float));
  st->midx = gs_malloc(two * sizeof(uint32_t));
  st->mval = gs_malloc(two * sizeof(float));
  st->keys = gs_malloc(two * sizeof(float));
  st->live = gs_malloc((k + 1) * sizeof(uint32_t));
  st->flive = gs_malloc((k + 1) * sizeof(uint32_t));
  if (!st->idx || !st->val || !st->midx || !st->mval || !st->keys || !st->live ||
      !st->flive ||
      msg_init(&st->out, k) != GS_OK || msg_init(&st->in, k) != GS_OK) {
    state_free(st);
    return GS_ERR_NOMEM;
  }
  return GS_OK;
}

/* The current set, sorted by index with duplicates added, from this rank's
 * pairs (count <= k, as the agreement checked). */
static gs_status state_load(gtopk_state *st, const uint32_t *idx,
                            const float *val, size_t count) {
  pair *tmp = gs_malloc((count + 1) * sizeof(pair));
  if (tmp == NULL) return GS_ERR_NOMEM;
  for (size_t i = 0; i < count; i++) tmp[i] = (pair){idx[i], val[i]};
  qsort(tmp, count, sizeof(pair), pair_cmp);
  size_t m = 0;
  for (size_t i = 0; i < count; i++) {
    if (m > 0 && st->idx[m - 1] == tmp[i].idx) {
      st->val[m - 1] += tmp[i].val;
    } else {
      st->idx[m] = tmp[i].idx;
      st->val[m++] = tmp[i].val;
    }
  }
  st->m = m;
  memcpy(st->live, st->idx, m * sizeof(uint32_t));
  st->nlive = m;
  gs_free(tmp);
  return GS_OK;
}

static int contains(const uint32_t *sorted, size_t m, uint32_t v) {
  size_t lo = 0, hi = m;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo < m && sorted[lo] == v;
}

/* Keeps of live[0..*n) the indices the set (sorted) still holds. */
static void live_cut(uint32_t *live, size_t *n, const uint32_t *set, size_t m) {
  size_t w = 0, j = 0;
  for (size_t i = 0; i < *n; i++) {
    while (j < m && set[j] < live[i]) j++;
    if (j < m && set[j] == live[i]) live[w++] = live[i];
  }
  *n = w;
}

static void state_pack(gtopk_state *st) {
  st->out.buf[0] = st->m;
  memcpy(st->out.idx, st->idx, st->m * sizeof(uint32_t));
  memcpy(st->out.val, st->val, st->m * sizeof(float));
}

/* Merges the received message into the current set. */
static gs_status state_merge(gtopk_state *st, const coll_group *g, int from) {
  uint64_t m = st->in.buf[0];
  if (m > st->k)
    return gs_error(GS_ERR_INTERNAL, "gtopk on rank %d: rank %d sent %llu "
                    "pairs, more than k = %zu", g->rank, from,
                    (unsigned long long)m, st->k);
  size_t w = sparse_merge_topk(st->idx, st->val, st->m, st->in.idx, st->in.val,
                               (size_t)m, st->k, st->midx, st->mval, st->keys);
  memcpy(st->idx, st->midx, w * sizeof(uint32_t));
  memcpy(st->val, st->mval, w * sizeof(float));
  st->m = w;
  live_cut(st->live, &st->nlive, st->idx, w);
  live_cut(st->flive, &st->nflive, st->idx, w);
  return GS_OK;
}

static gs_status state_take(gtopk_state *st) {
  uint64_t m = st->in.buf[0];
  if (m > st->k)
    return gs_error(GS_ERR_INTERNAL, "gtopk: received %llu pairs, more than "
                    "k = %zu", (unsigned long long)m, st->k);
  st->m = (size_t)m;
  memcpy(st->idx, st->in.idx, st->m * sizeof(uint32_t));
  memcpy(st->val, st->in.val, st->m * sizeof(float));
  st->nlive = 0;
  for (size_t t = 0; t < st->m; t++)
    if (st->in.live[t]) st->live[st->nlive++] = st->idx[t];
  return GS_OK;
}

static int floor_pow2(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

static gs_status gtopk_tree(const coll_group *g, gtopk_state *st) {
  int p = g->size, r = g->rank, q = floor_pow2(p), rem = p - q;
  size_t bytes = st->out.bytes;
  /* Fold the remainder ranks in. */
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      state_pack(st);
      GS_CHECK(p2p_sendrecv(g, st->out.buf, bytes, r + 1, NULL, 0,
                            MPI_PROC_NULL, TAG_SPARSE));
    } else {
      GS_CHECK(p2p_sendrecv(g, NULL, 0, MPI_PROC_NULL, st->in.buf, bytes,
                            r - 1, TAG_SPARSE));
      /* The folded-in rank's indices, as it sent them (sorted, distinct);
       * state_merge checks the count before anything reads past k. */
      st->nflive = st->in.buf[0] <= st->k ? (size_t)st->in.buf[0] : 0;
      memcpy(st->flive, st->in.idx, st->nflive * sizeof(uint32_t));
      GS_CHECK(state_merge(st, g, r - 1));
    }
  }
  int nr = fold_newrank(r, rem);
  if (nr >= 0) {
    for (int mask = 1; mask < q; mask <<= 1) {
      int partner = fold_realrank(nr ^ mask, rem);
      state_pack(st);
      GS_CHECK(p2p_sendrecv(g, st->out.buf, bytes, partner, st->in.buf, bytes,
                            partner, TAG_SPARSE));
      GS_CHECK(state_merge(st, g, partner));
    }
  }
  /* And send them the result. */
  if (r < 2 * rem) {
    size_t ret = st->out.ret_bytes;
    if (r % 2 == 1) {
      state_pack(st);
      for (size_t t = 0; t < st->m; t++)
        st->out.live[t] = (uint8_t)contains(st->flive, st->nflive, st->idx[t]);
      GS_CHECK(p2p_sendrecv(g, st->out.buf, ret, r - 1, NULL, 0,
                            MPI_PROC_NULL, TAG_SPARSE));
    } else {
      GS_CHECK(p2p_sendrecv(g, NULL, 0, MPI_PROC_NULL, st->in.buf, ret,
                            r + 1, TAG_SPARSE));
      GS_CHECK(state_take(st));
    }
  }
  return GS_OK;
}

gs_status sparse_run_gtopk(gs_comm *c, sparse_args *s) {
  GS_CHECK(sparse_agree(c, &c->world, "gtopk", s, 1, SIZE_MAX, NULL, NULL));
  gtopk_state st;
  GS_CHECK(state_init(&st, s->k));
  gs_status rc = state_load(&st, s->idx, s->val, s->count);
  if (rc == GS_OK && c->world.size > 1) rc = gtopk_tree(&c->world, &st);
  if (rc == GS_OK) {
    memcpy(s->out_idx, st.idx, st.m * sizeof(uint32_t));
    memcpy(s->out_val, st.val, st.m * sizeof(float));
    *s->out_count = st.m;
    if (s->kept)
      for (size_t i = 0; i < s->count; i++)
        s->kept[i] = (uint8_t)contains(st.live, st.nlive, s->idx[i]);
  }
  state_free(&st);
  return rc;
}
