/*
 * Multi-rank tests of the sparse collectives (sparse all-gather, sparse
 * all-reduce, gTop-k, HiTopKComm) under mpirun on 1 to 8 ranks, with and
 * without emulated nodes (node_wrap.sh). Every rank generates every rank's
 * input deterministically and computes the expected result itself with a
 * plain reference (dense accumulation, sorting), then checks its own output.
 *
 * Values are small integers, so sums are exact in any order and results can
 * be compared bit for bit. Output buffers carry guard elements that must
 * come back untouched.
 *
 * A failing check prints "FAIL rank R case C: ..."; rank 0 prints "N passed,
 * M failed" and the exit status is non-zero if any case failed on any rank.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync.h"

/* ---- Harness ---------------------------------------------------------------- */

#include "mrt.h"

static int g_uniform; /* every node has as many ranks */

/* ---- Inputs -------------------------------------------------------------- */

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* Rank r's pairs for case `seed`: `count` indices below n (duplicates
 * possible when `dups`, distinct otherwise) and small integer values in
 * [-9, 9] without 0. */
typedef struct {
  size_t count;
  uint32_t *idx;
  float *val;
} pairs;

static pairs make_pairs(int r, uint64_t seed, size_t count, size_t n, int dups) {
  pairs p = {count, malloc((count + 1) * sizeof(uint32_t)),
             malloc((count + 1) * sizeof(float))};
  /* Distinct: a random offset and a stride coprime with n. */
  uint64_t h = mix(seed * 1000003u + (uint64_t)r * 7919u + 1);
  size_t start = n ? (size_t)(h % n) : 0, stride = 1;
  if (n > 1) {
    stride = 1 + (size_t)(mix(h) % (n - 1));
    while (1) {
      size_t a = stride, b = n;
      while (b) { size_t t = a % b; a = b; b = t; }
      if (a == 1) break;
      stride++;
      if (stride >= n) stride = 1;
    }
  }
  for (size_t i = 0; i < count; i++) {
    uint64_t x = mix(h + i * 31 + 17);
    p.idx[i] = dups ? (uint32_t)(x % n) : (uint32_t)((start + i * stride) % n);
    int v = (int)(x >> 40) % 9 + 1;
    p.val[i] = (float)((x >> 20) & 1 ? v : -v);
  }
  return p;
}

static void free_pairs(pairs *p) {
  free(p->idx);
  free(p->val);
}

/* Count of rank r in a varying-count case: `zero` = -1 none zero, -2 all
 * zero, otherwise that rank gives nothing. */
static size_t vcount(int r, size_t n, int zero) {
  if (zero == -2 || zero == r) return 0;
  return (size_t)(mix((uint64_t)r * 13 + n) % (n + 1));
}

/* ---- Sparse all-gather ------------------------------------------------------ */

static void test_allgather_fixed(size_t n, size_t k, int dups) {
  begin_case("allgather_fixed n=%zu k=%zu dups=%d", n, k, dups);
  pairs mine = make_pairs(g_rank, 11, k, n, dups);
  size_t tot = k * (size_t)g_size;
  uint32_t *oi = malloc((tot + 2) * sizeof(uint32_t));
  float *ov = malloc((tot + 2) * sizeof(float));
  oi[tot] = 0xdeadbeef;
  ov[tot] = -12345.f;
  CHECK_ST(gs_sparse_allgather(g_comm, mine.idx, mine.val, k, n, GS_F32, oi, ov),
           GS_OK);
  for (int r = 0; r < g_size && !g_case_failed; r++) {
    pairs e = make_pairs(r, 11, k, n, dups);
    for (size_t i = 0; i < k; i++)
      CHECK(oi[r * k + i] == e.idx[i] && ov[r * k + i] == e.val[i],
            "rank %d's pair %zu is (%u, %g), expected (%u, %g)", r, i,
            oi[r * k + i], ov[r * k + i], e.idx[i], e.val[i]);
    free_pairs(&e);
  }
  CHECK(oi[tot] == 0xdeadbeef && ov[tot] == -12345.f, "guard overwritten");
  free(oi);
  free(ov);
  free_pairs(&mine);
  end_case();
}

static void test_allgatherv(size_t n, int zero) {
  begin_case("allgatherv n=%zu zero=%d", n, zero);
  pairs mine = make_pairs(g_rank, 23, vcount(g_rank, n, zero), n, 1);
  size_t tot = 0;
  for (int r = 0; r < g_size; r++) tot += vcount(r, n, zero);
  uint32_t *oi = malloc((tot + 1) * sizeof(uint32_t));
  float *ov = malloc((tot + 1) * sizeof(float));
  size_t *counts = malloc(sizeof(size_t) * (size_t)g_size);
  oi[tot] = 0xdeadbeef;
  CHECK_ST(gs_sparse_allgatherv(g_comm, mine.idx, mine.val, mine.count, n,
                                GS_F32, oi, ov, tot, counts),
           GS_OK);
  size_t at = 0;
  for (int r = 0; r < g_size && !g_case_failed; r++) {
    pairs e = make_pairs(r, 23, vcount(r, n, zero), n, 1);
    CHECK(counts[r] == e.count, "counts[%d] = %zu, expected %zu", r, counts[r],
          e.count);
    for (size_t i = 0; i < e.count && !g_case_failed; i++, at++)
      CHECK(oi[at] == e.idx[i] && ov[at] == e.val[i], "rank %d's pair %zu is "
            "(%u, %g), expected (%u, %g)", r, i, oi[at], ov[at], e.idx[i],
            e.val[i]);
    free_pairs(&e);
  }
  CHECK(oi[tot] == 0xdeadbeef, "guard overwritten");
  free(oi);
  free(ov);
  free(counts);
  free_pairs(&mine);
  end_case();
}

/* Half-precision values through the fixed-k gather and the sparse
 * all-reduce (integers are exact in f16 and bf16). */
static void test_half(gs_dtype dtype) {
  begin_case("half dtype=%s", gs_dtype_name(dtype));
  size_t n = 37, k = 5;
  pairs mine = make_pairs(g_rank, 5, k, n, 1);
  uint16_t *hv = malloc(k * sizeof(uint16_t));
  for (size_t i = 0; i < k; i++)
    hv[i] = dtype == GS_F16 ? gs_f32_to_f16(mine.val[i]) : gs_f32_to_bf16(mine.val[i]);
  size_t tot = k * (size_t)g_size;
  uint32_t *oi = malloc(tot * sizeof(uint32_t));
  uint16_t *ov = malloc(tot * sizeof(uint16_t));
  uint16_t *dense = malloc(n * sizeof(uint16_t));
  float *ref = calloc(n, sizeof(float));
  CHECK_ST(gs_sparse_allgather(g_comm, mine.idx, hv, k, n, dtype, oi, ov), GS_OK);
  for (int r = 0; r < g_size; r++) {
    pairs e = make_pairs(r, 5, k, n, 1);
    for (size_t i = 0; i < k; i++) {
      float got = dtype == GS_F16 ? gs_f16_to_f32(ov[r * k + i])
                                  : gs_bf16_to_f32(ov[r * k + i]);
      CHECK(oi[r * k + i] == e.idx[i] && got == e.val[i], "rank %d pair %zu", r, i);
      ref[e.idx[i]] += e.val[i];
    }
    free_pairs(&e);
  }
  static const gs_sparse_algo algos[2] = {GS_SPARSE_ALLGATHER, GS_SPARSE_DENSE};
  for (int a = 0; a < 2; a++) {
    CHECK_ST(gs_sparse_allreduce(g_comm, mine.idx, hv, k, n, dtype, dense,
                                 algos[a]), GS_OK);
    for (size_t i = 0; i < n; i++) {
      float got = dtype == GS_F16 ? gs_f16_to_f32(dense[i]) : gs_bf16_to_f32(dense[i]);
      CHECK(got == ref[i], "%s: dense[%zu] = %g, expected %g",
            gs_sparse_algo_name(algos[a]), i, got, ref[i]);
    }
  }
  free(hv);
  free(oi);
  free(ov);
  free(dense);
  free(ref);
  free_pairs(&mine);
  end_case();
}

/* ---- Sparse all-reduce ---------------------------------------------------- */

static void test_allreduce(size_t n, int zero, gs_sparse_algo algo) {
  begin_case("allreduce n=%zu zero=%d algo=%s", n, zero, gs_sparse_algo_name(algo));
  pairs mine = make_pairs(g_rank, 31, vcount(g_rank, n, zero), n, 1);
  float *dense = malloc((n + 1) * sizeof(float));
  float *ref = calloc(n + 1, sizeof(float));
  for (size_t i = 0; i <= n; i++) dense[i] = 777.f; /* overwritten, but guard */
  CHECK_ST(gs_sparse_allreduce(g_comm, mine.idx, mine.val, mine.count, n, GS_F32,
                               dense, algo),
           GS_OK);
  for (int r = 0; r < g_size; r++) {
    pairs e = make_pairs(r, 31, vcount(r, n, zero), n, 1);
    for (size_t i = 0; i < e.count; i++) ref[e.idx[i]] += e.val[i];
    free_pairs(&e);
  }
  for (size_t i = 0; i < n && !g_case_failed; i++)
    CHECK(dense[i] == ref[i], "dense[%zu] = %g, expected %g", i, dense[i], ref[i]);
  CHECK(dense[n] == 777.f, "guard overwritten");
  free(dense);
  free(ref);
  free_pairs(&mine);
  end_case();
}

/* The cost model's choice on both sides of the break-even point, on a
 * known network (1 Gbit/s preset), and the results on both sides. */
static void test_choice(void) {
  begin_case("choice break-even");
  const gs_cost_params *saved_p = gs_comm_cost(g_comm);
  gs_cost_params saved = *saved_p, net;
  CHECK_ST(gs_cost_preset("1GbE", &net), GS_OK);
  gs_comm_set_cost(g_comm, &net);
  size_t n = 1 << 20;
  double sp, dn;
  /* All ranks' pairs together: n/16 (density x ranks = 1/16), and twice n
   * (density x ranks = 2). The break-even lies between: at density x ranks
   * = 1 against the flat ring, lower against the hierarchical all-reduce on
   * nodes of several ranks (0.2 on 2 nodes of 3). */
  gs_sparse_algo lo = gs_comm_choose_sparse(g_comm, GS_SPARSE_AUTO, n, n / 16,
                                            GS_F32, &sp, &dn);
  if (g_size > 1) {
    CHECK(lo == GS_SPARSE_ALLGATHER && sp < dn, "at density x ranks = 1/16 the "
          "choice is %s (sparse %g s, dense %g s), expected allgather",
          gs_sparse_algo_name(lo), sp, dn);
    gs_sparse_algo hi = gs_comm_choose_sparse(g_comm, GS_SPARSE_AUTO, n, 2 * n,
                                              GS_F32, &sp, &dn);
    CHECK(hi == GS_SPARSE_DENSE && sp > dn, "at density x ranks = 2 the choice "
          "is %s (sparse %g s, dense %g s), expected dense",
          gs_sparse_algo_name(hi), sp, dn);
    /* gTop-k stays sparse far beyond that: its messages never grow. */
    gs_sparse_algo g = gs_comm_choose_sparse(g_comm, GS_SPARSE_GTOPK, n, n / 64,
                                             GS_F32, &sp, &dn);
    CHECK(g == GS_SPARSE_GTOPK, "gtopk at density 1/64: %s (sparse %g dense %g)",
          gs_sparse_algo_name(g), sp, dn);
    g = gs_comm_choose_sparse(g_comm, GS_SPARSE_GTOPK, n, 4 * n, GS_F32, &sp, &dn);
    CHECK(g == GS_SPARSE_DENSE, "gtopk at k = 4n: %s (sparse %g dense %g)",
          gs_sparse_algo_name(g), sp, dn);
    /* HiTopKComm across nodes: sparse at density 0.001, dense at k = n,
     * where every node's link would carry (N-1) n pairs. */
    if (g_uniform && gs_comm_nodes(g_comm) > 1) {
      g = gs_comm_choose_sparse(g_comm, GS_SPARSE_HITOPK, n, n / 1000, GS_F32,
                                &sp, &dn);
      CHECK(g == GS_SPARSE_HITOPK, "hitopk at density 0.001: %s (sparse %g "
            "dense %g)", gs_sparse_algo_name(g), sp, dn);
      g = gs_comm_choose_sparse(g_comm, GS_SPARSE_HITOPK, n, n, GS_F32, &sp, &dn);
      CHECK(g == GS_SPARSE_DENSE, "hitopk at k = n: %s (sparse %g dense %g)",
            gs_sparse_algo_name(g), sp, dn);
    }
  } else {
    CHECK(lo == GS_SPARSE_ALLGATHER, "one rank: %s", gs_sparse_algo_name(lo));
  }
  end_case();
  /* AUTO gives the right sum on both sides. */
  size_t small = 4000;
  test_allreduce(small, -1, GS_SPARSE_AUTO);
  begin_case("choice auto sides");
  size_t few = small / (16 * (size_t)g_size), many = 2 * small;
  for (int side = 0; side < 2; side++) {
    size_t cnt = side ? many : few;
    pairs mine = make_pairs(g_rank, 41 + (uint64_t)side, cnt, small, 1);
    float *dense = malloc(small * sizeof(float)), *ref = calloc(small, sizeof(float));
    CHECK_ST(gs_sparse_allreduce(g_comm, mine.idx, mine.val, cnt, small, GS_F32,
                                 dense, GS_SPARSE_AUTO), GS_OK);
    for (int r = 0; r < g_size; r++) {
      pairs e = make_pairs(r, 41 + (uint64_t)side, cnt, small, 1);
      for (size_t i = 0; i < cnt; i++) ref[e.idx[i]] += e.val[i];
      free_pairs(&e);
    }
    for (size_t i = 0; i < small && !g_case_failed; i++)
      CHECK(dense[i] == ref[i], "side %d dense[%zu] = %g, expected %g", side, i,
            dense[i], ref[i]);
    free(dense);
    free(ref);
    free_pairs(&mine);
  }
  gs_comm_set_cost(g_comm, &saved);
  end_case();
}

/* ---- gTop-k ------------------------------------------------------------- */

typedef struct {
  uint32_t idx;
  float val;
} pv;

static float key_of(float v) { return fabsf(v); }

static int by_rank(const void *a, const void *b) {
  const pv *x = a, *y = b;
  float kx = key_of(x->val), ky = key_of(y->val);
  if (kx != ky) return kx > ky ? -1 : 1;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

static int by_index(const void *a, const void *b) {
  const pv *x = a, *y = b;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

/* The reference merge: accumulate densely, rank all entries, keep k. */
static size_t ref_merge(const pv *a, size_t na, const pv *b, size_t nb, size_t k,
                        size_t n, pv *out) {
  float *acc = calloc(n, sizeof(float));
  char *seen = calloc(n, 1);
  for (size_t i = 0; i < na; i++) acc[a[i].idx] += a[i].val, seen[a[i].idx] = 1;
  for (size_t i = 0; i < nb; i++) acc[b[i].idx] += b[i].val, seen[b[i].idx] = 1;
  pv *all = malloc((na + nb + 1) * sizeof(pv));
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (seen[i]) all[m++] = (pv){(uint32_t)i, acc[i]};
  qsort(all, m, sizeof(pv), by_rank);
  if (m > k) m = k;
  qsort(all, m, sizeof(pv), by_index);
  memcpy(out, all, m * sizeof(pv));
  free(all);
  free(acc);
  free(seen);
  return m;
}

/* Keeps of live[0..*n) the indices set[0..m) (sorted) holds. */
static void ref_cut(uint32_t *live, size_t *n, const pv *set, size_t m) {
  size_t w = 0;
  for (size_t i = 0; i < *n; i++) {
    int in = 0;
    for (size_t j = 0; j < m; j++) in |= set[j].idx == live[i];
    if (in) live[w++] = live[i];
  }
  *n = w;
}

/* gTop-k's definition on p ranks: fold the remainder, recursive doubling
 * over the power-of-two core, as merges of sets. live (k + 1 room) gets the
 * indices of this rank whose values reached the global set: those that
 * every merge after this rank's set went in kept (an index a merge dropped
 * and a later one took back carries only other ranks' values). */
static size_t ref_gtopk(uint64_t seed, size_t count_each, size_t k, size_t n,
                        int dups, int zero, pv *out, uint32_t *live,
                        size_t *nlive) {
  int p = g_size, q = 1;
  while (q * 2 <= p) q *= 2;
  int rem = p - q;
  pv **set = malloc(sizeof(pv *) * (size_t)p);
  size_t *m = malloc(sizeof(size_t) * (size_t)p);
  for (int r = 0; r < p; r++) {
    pairs e = make_pairs(r, seed, zero == -2 || zero == r ? 0 : count_each, n,
                         dups);
    pv *tmp = malloc((e.count + 1) * sizeof(pv));
    for (size_t i = 0; i < e.count; i++) tmp[i] = (pv){e.idx[i], e.val[i]};
    set[r] = malloc((k + 1) * sizeof(pv));
    m[r] = ref_merge(tmp, e.count, NULL, 0, (size_t)-1, n, set[r]);
    if (r == g_rank) {
      for (size_t i = 0; i < m[r]; i++) live[i] = set[r][i].idx;
      *nlive = m[r];
    }
    free(tmp);
    free_pairs(&e);
  }
  int holder = g_rank; /* whose set carries this rank's values */
  /* core member j is rank 2j+1 for j < rem, j + rem otherwise */
  pv *tmp = malloc((2 * k + 1) * sizeof(pv));
  for (int j = 0; j < rem; j++) {
    m[2 * j + 1] = ref_merge(set[2 * j + 1], m[2 * j + 1], set[2 * j], m[2 * j],
                             k, n, tmp);
    memcpy(set[2 * j + 1], tmp, m[2 * j + 1] * sizeof(pv));
    if (g_rank / 2 == j) {
      holder = 2 * j + 1;
      ref_cut(live, nlive, set[holder], m[holder]);
    }
  }
  int *core = malloc(sizeof(int) * (size_t)q);
  for (int j = 0; j < q; j++) core[j] = j < rem ? 2 * j + 1 : j + rem;
  for (int mask = 1; mask < q; mask <<= 1) {
    pv **next = malloc(sizeof(pv *) * (size_t)q);
    size_t *nm = malloc(sizeof(size_t) * (size_t)q);
    for (int j = 0; j < q; j++) {
      int a = core[j], b = core[j ^ mask];
      next[j] = malloc((k + 1) * sizeof(pv));
      nm[j] = ref_merge(set[a], m[a], set[b], m[b], k, n, next[j]);
    }
    for (int j = 0; j < q; j++) {
      memcpy(set[core[j]], next[j], nm[j] * sizeof(pv));
      m[core[j]] = nm[j];
      free(next[j]);
    }
    ref_cut(live, nlive, set[holder], m[holder]);
    free(next);
    free(nm);
  }
  size_t res = m[core[0]];
  memcpy(out, set[core[0]], res * sizeof(pv));
  for (int r = 0; r < p; r++) free(set[r]);
  free(set);
  free(m);
  free(core);
  free(tmp);
  return res;
}

static void test_gtopk(size_t n, size_t count, size_t k, int dups, int zero_rank) {
  begin_case("gtopk n=%zu count=%zu k=%zu dups=%d zero=%d", n, count, k, dups,
             zero_rank);
  uint64_t seed = 50 + n + count * 3 + k;
  size_t mycount = zero_rank == -2 || zero_rank == g_rank ? 0 : count;
  pairs mine = make_pairs(g_rank, seed, mycount, n, dups);
  uint32_t *oi = malloc((k + 1) * sizeof(uint32_t));
  float *ov = malloc((k + 1) * sizeof(float));
  uint8_t *kept = malloc(mycount + 1);
  oi[k] = 0xdeadbeef;
  size_t got = 0;
  CHECK_ST(gs_gtopk(g_comm, mine.idx, mine.val, mycount, k, n, oi, ov, &got, kept),
           GS_OK);
  pv *ref = malloc((k + 1) * sizeof(pv));
  uint32_t *live = malloc((count + 1) * sizeof(uint32_t));
  size_t nlive = 0;
  size_t m = ref_gtopk(seed, count, k, n, dups, zero_rank, ref, live, &nlive);
  CHECK(got == m, "%zu pairs, expected %zu", got, m);
  for (size_t i = 0; i < m && i < got && !g_case_failed; i++)
    CHECK(oi[i] == ref[i].idx && ov[i] == ref[i].val, "pair %zu is (%u, %g), "
          "expected (%u, %g)", i, oi[i], ov[i], ref[i].idx, ref[i].val);
  /* Every rank holds the same set: compare with rank 0's via a max/min. */
  double h = 0;
  for (size_t i = 0; i < got; i++) h += (double)oi[i] * 1.5 + ov[i] * (double)(i + 1);
  double hmax = h, hmin = h;
  CHECK_ST(gs_allreduce(g_comm, GS_IN_PLACE, &hmax, 1, GS_F64, GS_MAX, GS_ALGO_AUTO), GS_OK);
  CHECK_ST(gs_allreduce(g_comm, GS_IN_PLACE, &hmin, 1, GS_F64, GS_MIN, GS_ALGO_AUTO), GS_OK);
  CHECK(hmax == hmin, "the ranks' results differ");
  /* kept says which of this rank's values made it: not the same as its
   * index being in the global set, where a merge dropped it on the way. */
  for (size_t i = 0; i < mycount; i++) {
    int in = 0;
    for (size_t j = 0; j < nlive; j++) in |= live[j] == mine.idx[i];
    CHECK(kept[i] == in, "kept[%zu] = %d for index %u, expected %d", i, kept[i],
          mine.idx[i], in);
  }
  CHECK(oi[k] == 0xdeadbeef, "guard overwritten");
  free(live);
  free(ref);
  free(oi);
  free(ov);
  free(kept);
  free_pairs(&mine);
  end_case();
}

/* Where no merge has to drop anything (k at least every index given), gTop-k
 * is the exact sparse sum, and the top-k of the global sum. */
static void test_gtopk_exact(size_t n, size_t count) {
  begin_case("gtopk exact n=%zu count=%zu", n, count);
  size_t k = n;
  pairs mine = make_pairs(g_rank, 77, count, n, 1);
  uint32_t *oi = malloc(k * sizeof(uint32_t));
  float *ov = malloc(k * sizeof(float));
  size_t got = 0;
  CHECK_ST(gs_gtopk(g_comm, mine.idx, mine.val, count, k, n, oi, ov, &got, NULL),
           GS_OK);
  float *sum = calloc(n, sizeof(float));
  char *seen = calloc(n, 1);
  for (int r = 0; r < g_size; r++) {
    pairs e = make_pairs(r, 77, count, n, 1);
    for (size_t i = 0; i < count; i++) sum[e.idx[i]] += e.val[i], seen[e.idx[i]] = 1;
    free_pairs(&e);
  }
  size_t want = 0;
  for (size_t i = 0; i < n; i++) want += seen[i];
  CHECK(got == want, "%zu pairs, expected %zu", got, want);
  for (size_t j = 0; j < got && !g_case_failed; j++)
    CHECK(seen[oi[j]] && ov[j] == sum[oi[j]], "pair (%u, %g), global sum %g",
          oi[j], ov[j], sum[oi[j]]);
  free(sum);
  free(seen);
  free(oi);
  free(ov);
  free_pairs(&mine);
  end_case();
}

/* Error feedback's conservation: every value a rank gave is either in the
 * global sum (kept) or not kept (and goes back to its residual), so the sum
 * over ranks of the kept values is the global set exactly (the values are
 * small integers), and zero off it. `tester` is the case a merge drops a
 * value whose index a later merge takes back: rank 2's 0.9 at index 0 loses
 * to rank 3's 0.95 and rank 0's 1 wins index 0 at the end. */
static void test_gtopk_conserve(size_t n, size_t count, size_t k, int dups,
                                int tester) {
  begin_case("gtopk conserves n=%zu count=%zu k=%zu dups=%d tester=%d", n, count,
             k, dups, tester);
  pairs mine = make_pairs(g_rank, 900 + n + count + k, count, n, dups);
  if (tester) {
    static const uint32_t ti[4] = {0, 1, 0, 2};
    static const float tv[4] = {4, 2, 3.5f, 3.75f};
    mine.count = g_rank < 4 ? 1 : 0;
    if (mine.count) mine.idx[0] = ti[g_rank], mine.val[0] = tv[g_rank];
  }
  uint32_t *oi = malloc((k + 1) * sizeof(uint32_t));
  float *ov = malloc((k + 1) * sizeof(float));
  uint8_t *kept = malloc(mine.count + 1);
  size_t got = 0;
  CHECK_ST(gs_gtopk(g_comm, mine.idx, mine.val, mine.count, k, n, oi, ov, &got,
                    kept), GS_OK);
  double *sent = calloc(n, sizeof(double)), *want = calloc(n, sizeof(double));
  for (size_t i = 0; i < mine.count; i++)
    if (kept[i]) sent[mine.idx[i]] += mine.val[i];
  CHECK_ST(gs_allreduce(g_comm, GS_IN_PLACE, sent, n, GS_F64, GS_SUM, GS_ALGO_AUTO),
           GS_OK);
  for (size_t j = 0; j < got; j++) want[oi[j]] = ov[j];
  for (size_t i = 0; i < n && !g_case_failed; i++)
    CHECK(sent[i] == want[i], "index %zu: the kept values add up to %g, the global "
          "set has %g", i, sent[i], want[i]);
  free(sent);
  free(want);
  free(kept);
  free(oi);
  free(ov);
  free_pairs(&mine);
  end_case();
}

/* ---- HiTopKComm ------------------------------------------------------------ */

static int g_select_calls;

/* Exact top-k, ties to the smaller index: the reference uses it too. */
static gs_status test_select(const float *x, size_t n, size_t k,
                             const char *method, uint32_t *idx) {
  if (strcmp(method, "exact") != 0 && strcmp(method, "fail-on-nan") != 0)
    return gs_error(GS_ERR_INVALID_ARG, "test_select: unknown method %s", method);
  pv *a = malloc((n + 1) * sizeof(pv));
  for (size_t i = 0; i < n; i++) {
    if (x[i] != x[i]) {
      free(a);
      return gs_error(GS_ERR_INVALID_ARG, "test_select: NaN at %zu", i);
    }
    a[i] = (pv){(uint32_t)i, x[i]};
  }
  qsort(a, n, sizeof(pv), by_rank);
  for (size_t i = 0; i < k; i++) idx[i] = a[i].idx;
  free(a);
  __atomic_add_fetch(&g_select_calls, 1, __ATOMIC_RELAXED);
  return GS_OK;
}

static float input_at(int r, size_t i, uint64_t seed) {
  uint64_t x = mix(seed * 977 + (uint64_t)r * 1000003 + i);
  return (float)((int)(x % 19) - 9);
}

static void test_hitopk(size_t n, size_t k, gs_sparse_algo algo, int in_place) {
  begin_case("hitopk n=%zu k=%zu algo=%s in_place=%d", n, k,
             gs_sparse_algo_name(algo), in_place);
  int p = g_size;
  uint64_t seed = n + k * 7;
  int *node = malloc(sizeof(int) * (size_t)p), me = gs_comm_node(g_comm);
  CHECK_ST(gs_allgather(g_comm, &me, node, 1, GS_I32, GS_ALGO_AUTO), GS_OK);
  int nodes = gs_comm_nodes(g_comm), L = gs_comm_local_size(g_comm);
  if (algo == GS_SPARSE_AUTO)
    algo = gs_comm_choose_sparse(g_comm, GS_SPARSE_HITOPK, n, k, GS_F32, NULL,
                                 NULL);
  float *x = malloc((n + 1) * sizeof(float)), *out = malloc((n + 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) x[i] = input_at(g_rank, i, seed);
  out[n] = x[n] = 4242.f;
  if (in_place) memcpy(out, x, n * sizeof(float));
  CHECK_ST(gs_hitopk(g_comm, in_place ? (const float *)GS_IN_PLACE : x, out, n, k,
                     test_select, "exact", algo),
           GS_OK);
  /* Reference: per node, the node sum; per shard, its top k_l; summed. */
  float *ref = calloc(n + 1, sizeof(float)), *ns = malloc((n + 1) * sizeof(float));
  uint32_t *sel = malloc((n + 1) * sizeof(uint32_t));
  for (int nd = 0; nd < nodes; nd++) {
    memset(ns, 0, n * sizeof(float));
    for (int r = 0; r < p; r++)
      if (node[r] == nd)
        for (size_t i = 0; i < n; i++) ns[i] += input_at(r, i, seed);
    if (algo == GS_SPARSE_DENSE) {
      for (size_t i = 0; i < n; i++) ref[i] += ns[i];
      continue;
    }
    size_t q = n / (size_t)L, rm = n % (size_t)L;
    for (int l = 0; l < L; l++) {
      size_t off = (size_t)l * q + ((size_t)l < rm ? (size_t)l : rm);
      size_t len = q + ((size_t)l < rm ? 1 : 0);
      size_t kl = len == 0 ? 0 : (size_t)ceil((double)k * (double)len / (double)n);
      if (kl > len) kl = len;
      test_select(ns + off, len, kl, "exact", sel);
      for (size_t j = 0; j < kl; j++) ref[off + sel[j]] += ns[off + sel[j]];
    }
  }
  for (size_t i = 0; i < n && !g_case_failed; i++)
    CHECK(out[i] == ref[i], "out[%zu] = %g, expected %g", i, out[i], ref[i]);
  CHECK(out[n] == 4242.f, "guard overwritten");
  if (!in_place)
    for (size_t i = 0; i < n && !g_case_failed; i++)
      CHECK(x[i] == input_at(g_rank, i, seed), "sendbuf changed at %zu", i);
  free(ref);
  free(ns);
  free(sel);
  free(x);
  free(out);
  free(node);
  end_case();
}

/* A selection that fails on one rank alone: every rank fails, none hangs. */
static void test_hitopk_one_fails(void) {
  begin_case("hitopk one rank's selection fails");
  size_t n = 64;
  float *x = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) x[i] = input_at(g_rank, i, 3);
  int bad = g_size - 1;
  /* One NaN in the last rank's input: after the reduce-scatter it is in the
   * node's sum of one shard, selected on that shard's owner, which may be
   * another rank of the node. Every rank's message names the element by
   * its index in the whole tensor (until 2026-12-07 the owner's said the
   * index within its shard, and the others named the lowest failing rank
   * as if the NaN were its own). */
  if (g_rank == bad) x[37] = NAN;
  gs_status st = gs_hitopk(g_comm, x, out, n, 8, test_select, "fail-on-nan",
                           GS_SPARSE_HITOPK);
  CHECK(st == GS_ERR_INVALID_ARG, "status %s, expected invalid argument on every "
        "rank: %s", gs_strerror(st), gs_last_error());
  CHECK(strstr(gs_last_error(), "selection") != NULL, "message: %s",
        gs_last_error());
  CHECK(strstr(gs_last_error(), "NaN at element 37 of the tensor") != NULL &&
            strstr(gs_last_error(), "'s shard") != NULL,
        "message: %s", gs_last_error());
  free(x);
  free(out);
  end_case();
}

/* k above n: the message says so (until 2026-12-07 it said "rank 0 gives
 * 11 pairs, more than k = 11"). */
static void test_hitopk_k_above_n(void) {
  begin_case("hitopk k above n");
  float b[10] = {0};
  gs_status st = gs_hitopk(g_comm, b, b, 10, 11, test_select, "exact",
                           GS_SPARSE_HITOPK);
  CHECK(st == GS_ERR_INVALID_ARG && strstr(gs_last_error(), "k = 11 exceeds "
                                           "the tensor's n = 10"),
        "status %s: %s", gs_strerror(st), gs_last_error());
  end_case();
}

/* ---- Disagreements and bad input -------------------------------------------- */

static void test_mismatch(void) {
  if (g_size < 2) return;
  int last = g_rank == g_size - 1;
  uint32_t idx[4] = {0, 1, 2, 3};
  float val[4] = {1, 2, 3, 4};
  uint32_t oi[64];
  float ov[64];
  size_t counts[16], got;
  float dense[32];

  begin_case("mismatch n");
  gs_status st = gs_sparse_allgather(g_comm, idx, val, 2, last ? 11 : 10, GS_F32,
                                     oi, ov);
  CHECK(st == GS_ERR_MISMATCH && strstr(gs_last_error(), "n = 11"),
        "status %s: %s", gs_strerror(st), gs_last_error());
  end_case();

  begin_case("mismatch k fixed");
  st = gs_sparse_allgather(g_comm, idx, val, last ? 3 : 2, 10, GS_F32, oi, ov);
  CHECK(st == GS_ERR_MISMATCH && strstr(gs_last_error(), "k = 3"), "status %s: %s",
        gs_strerror(st), gs_last_error());
  end_case();

  begin_case("mismatch k gtopk");
  st = gs_gtopk(g_comm, idx, val, 2, last ? 4 : 3, 10, oi, ov, &got, NULL);
  CHECK(st == GS_ERR_MISMATCH, "status %s: %s", gs_strerror(st), gs_last_error());
  end_case();

  begin_case("mismatch n allreduce");
  st = gs_sparse_allreduce(g_comm, idx, val, 2, last ? 20 : 10, GS_F32, dense,
                           GS_SPARSE_AUTO);
  CHECK(st == GS_ERR_MISMATCH, "status %s: %s", gs_strerror(st), gs_last_error());
  end_case();

  begin_case("bad index on one rank");
  uint32_t bad[4] = {0, 1, 99, 3};
  st = gs_sparse_allgatherv(g_comm, last ? bad : idx, val, 4, 10, GS_F32, oi, ov,
                            64, counts);
  char want[80];
  snprintf(want, sizeof want, "rank %d's pair 2 has index 99", g_size - 1);
  CHECK(st == GS_ERR_INVALID_ARG && strstr(gs_last_error(), want), "status %s: %s",
        gs_strerror(st), gs_last_error());
  end_case();

  begin_case("count above k on one rank");
  st = gs_gtopk(g_comm, idx, val, last ? 4 : 2, 2, 10, oi, ov, &got, NULL);
  CHECK(st == GS_ERR_INVALID_ARG && strstr(gs_last_error(), "more than k = 2"),
        "status %s: %s", gs_strerror(st), gs_last_error());
  end_case();

  /* k + 1 pairs is the sign of a rank whose own step failed before the
   * exchange (src/compress/exchange.c): the others say that rank failed,
   * not that it gave too many pairs (until 2026-12-07 a NaN in its input
   * read "gives 101 pairs, more than k = 100"). */
  begin_case("k + 1 pairs on one rank");
  st = gs_gtopk(g_comm, idx, val, last ? 4 : 2, 3, 10, oi, ov, &got, NULL);
  snprintf(want, sizeof want, "rank %d failed before the exchange", g_size - 1);
  CHECK(st == GS_ERR_INVALID_ARG && strstr(gs_last_error(), want) &&
            strstr(gs_last_error(), "k + 1 = 4"),
        "status %s: %s", gs_strerror(st), gs_last_error());
  end_case();

  begin_case("capacity short on one rank");
  st = gs_sparse_allgatherv(g_comm, idx, val, 4, 10, GS_F32, oi, ov,
                            last ? 3 : 64, counts);
  CHECK(st == GS_ERR_INVALID_ARG && strstr(gs_last_error(), "output holds"),
        "status %s: %s", gs_strerror(st), gs_last_error());
  end_case();

  /* The communicator still works afterwards. */
  test_allreduce(50, -1, GS_SPARSE_ALLGATHER);
}

static void test_bad_args(void) {
  begin_case("bad arguments");
  gs_request *req = (gs_request *)1;
  uint32_t idx[2] = {0, 1};
  float val[2] = {1, 2};
  CHECK_ST(gs_isparse_allgather(NULL, idx, val, 2, 4, GS_F32, idx, val, &req),
           GS_ERR_INVALID_ARG);
  CHECK_ST(gs_isparse_allgather(g_comm, NULL, val, 2, 4, GS_F32, idx, val, &req),
           GS_ERR_INVALID_ARG);
  CHECK(req == NULL, "request not cleared");
  CHECK_ST(gs_isparse_allgather(g_comm, idx, val, 2, 4, GS_I32, idx, val, &req),
           GS_ERR_UNSUPPORTED);
  CHECK_ST(gs_igtopk(g_comm, idx, val, 2, 2, 4, NULL, val, NULL, NULL, &req),
           GS_ERR_INVALID_ARG);
  CHECK_ST(gs_isparse_allreduce(g_comm, idx, val, 2, 4, GS_F32, val,
                                GS_SPARSE_GTOPK, &req),
           GS_ERR_UNSUPPORTED);
  float buf[4];
  CHECK_ST(gs_ihitopk(g_comm, buf, buf, 4, 2, NULL, "exact", GS_SPARSE_HITOPK, &req),
           GS_ERR_INVALID_ARG);
  gs_sparse_algo a;
  CHECK_ST(gs_sparse_algo_parse("gtopk", &a), GS_OK);
  CHECK(a == GS_SPARSE_GTOPK, "parse gtopk");
  CHECK_ST(gs_sparse_algo_parse("sparse", &a), GS_ERR_INVALID_ARG);
  end_case();
}

/* Several sparse collectives in flight at once, waited in order. */
static void test_nonblocking(void) {
  begin_case("nonblocking");
  size_t n = 300, k = 9;
  pairs a = make_pairs(g_rank, 91, k, n, 0);
  size_t tot = k * (size_t)g_size, got = 0;
  uint32_t *oi = malloc(tot * sizeof(uint32_t)), *gi = malloc(k * sizeof(uint32_t));
  float *ov = malloc(tot * sizeof(float)), *gv = malloc(k * sizeof(float));
  float *dense = malloc(n * sizeof(float));
  gs_request *r[3];
  CHECK_ST(gs_isparse_allgather(g_comm, a.idx, a.val, k, n, GS_F32, oi, ov, &r[0]), GS_OK);
  CHECK_ST(gs_igtopk(g_comm, a.idx, a.val, k, k, n, gi, gv, &got, NULL, &r[1]), GS_OK);
  CHECK_ST(gs_isparse_allreduce(g_comm, a.idx, a.val, k, n, GS_F32, dense,
                                GS_SPARSE_ALLGATHER, &r[2]), GS_OK);
  for (int i = 0; i < 3; i++) CHECK_ST(gs_wait(r[i]), GS_OK);
  float s = 0, want = 0;
  for (size_t i = 0; i < n; i++) s += dense[i];
  for (size_t i = 0; i < tot; i++) want += ov[i];
  CHECK(s == want, "dense sum %g, gathered values sum %g", s, want);
  CHECK(got <= k && got > 0, "gtopk gave %zu pairs", got);
  free(oi);
  free(gi);
  free(ov);
  free(gv);
  free(dense);
  free_pairs(&a);
  end_case();
}

int main(int argc, char **argv) {
  mrt_init(&argc, &argv);
  {
    int L = gs_comm_local_size(g_comm), lo = L, hi = L;
    gs_allreduce(g_comm, GS_IN_PLACE, &lo, 1, GS_I32, GS_MIN, GS_ALGO_AUTO);
    gs_allreduce(g_comm, GS_IN_PLACE, &hi, 1, GS_I32, GS_MAX, GS_ALGO_AUTO);
    g_uniform = lo == hi;
  }
  test_bad_args();
  for (size_t n = 1; n <= 1000; n = n * 10 + 3) {
    test_allgather_fixed(n, 0, 1);
    test_allgather_fixed(n, n < 7 ? n : 7, 1);
    test_allgather_fixed(n, n, 0); /* k = n */
    test_allgatherv(n, -1);
    test_allgatherv(n, g_size > 1 ? 1 : 0);
    test_allgatherv(n, -2);
    for (gs_sparse_algo a = GS_SPARSE_AUTO; a <= GS_SPARSE_DENSE; a++) {
      if (a == GS_SPARSE_GTOPK || a == GS_SPARSE_HITOPK) continue;
      test_allreduce(n, -1, a);
      test_allreduce(n, -2, a);
      test_allreduce(n, g_size - 1, a);
    }
  }
  test_half(GS_F16);
  test_half(GS_BF16);
  test_choice();
  /* gTop-k: overlapping sets, duplicates, k of 1, k = n, nothing given. */
  test_gtopk(1000, 20, 20, 0, -1);
  test_gtopk(1000, 20, 20, 1, -1);
  test_gtopk(97, 13, 13, 0, -1);
  test_gtopk(40, 15, 15, 0, -1);
  test_gtopk(10, 1, 1, 0, -1);
  test_gtopk(1000, 5, 20, 0, -1);   /* fewer than k given */
  test_gtopk(50, 0, 6, 0, -2);      /* none given anywhere */
  test_gtopk(50, 6, 6, 0, g_size - 1); /* none on one rank */
  test_gtopk(5, 5, 5, 0, -1);       /* k = n */
  test_gtopk_exact(30, 4);
  test_gtopk_exact(200, 31);
  test_gtopk_conserve(4, 1, 1, 0, 1);
  test_gtopk_conserve(16, 4, 4, 0, 0);
  test_gtopk_conserve(12, 3, 3, 1, 0);
  test_gtopk_conserve(40, 6, 6, 0, 0);
  test_gtopk_conserve(6, 2, 2, 0, 0);
  test_gtopk_conserve(10, 1, 1, 0, 0);
  if (g_uniform) {
    for (size_t n = 1; n <= 3000; n = n * 7 + 5) {
      test_hitopk(n, n / 10 + 1, GS_SPARSE_HITOPK, 0);
      test_hitopk(n, n, GS_SPARSE_HITOPK, 1); /* k = n: the node sums, added */
    }
    test_hitopk(1001, 37, GS_SPARSE_DENSE, 0);
    test_hitopk(1001, 37, GS_SPARSE_AUTO, 1);
    test_hitopk_one_fails();
    test_hitopk_k_above_n();
  } else {
    begin_case("hitopk on nodes of different sizes");
    float b[8];
    gs_status st = gs_hitopk(g_comm, b, b, 8, 2, test_select, "exact",
                             GS_SPARSE_HITOPK);
    CHECK(st == GS_ERR_UNSUPPORTED, "status %s: %s", gs_strerror(st), gs_last_error());
    end_case();
  }
  test_mismatch();
  test_nonblocking();

  begin_case("gs_comm_destroy");
  CHECK_ST(gs_comm_destroy(g_comm), GS_OK);
  end_case();
  return mrt_finish();
}
