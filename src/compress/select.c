/*
 * Top-k selection by magnitude: gs_topk_f32.
 *
 * The key of an entry is its float's bits with the sign cleared: for every
 * non-NaN float, |a| < |b| exactly when key(a) < key(b) as unsigned
 * integers, and NaNs have the largest keys of all (above 0x7f800000, +inf).
 * So selecting the k largest |x| is selecting the k largest 31-bit keys,
 * which a histogram (radix) select does without comparisons or sorting.
 *
 * "exact" for large inputs takes two memory-bound passes:
 *   1. a strided sample of the keys estimates a threshold t that a few more
 *      than k entries reach (the sample's order statistic a few standard
 *      deviations past q = k/n); one streaming pass collects the indices of
 *      every entry with key >= t. If at least k did, they contain the top
 *      k, and a radix select over that short list finishes the job. The
 *      sample only decides the speed, never the result: if fewer than k
 *      reached t, or too many for the buffer, the next path runs instead.
 *   2. the full radix select: an 11-bit histogram of the keys' top digit,
 *      one pass that emits the entries above the k-th entry's digit and
 *      collects those on it, then 10-bit digits over that list.
 * NaNs have the largest keys, so both paths meet every NaN among their
 * candidates: the check costs nothing on the hot loop.
 *
 * "mstopk" is the threshold search of MSTopK (Shi et al., "Towards Scalable
 * Distributed Training of Deep Learning on Public Cloud Clusters", MLSys
 * 2021): a binary search for t = mean + ratio * (max - mean) with one count
 * pass per step, keeping the best threshold t1 selecting at most k and the
 * best t2 selecting more; the result is every entry >= t1 plus a seeded
 * uniform choice of the missing ones among t2 <= |x| < t1.
 */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "compress_internal.h"

#define KEY_INF 0x7f800000u

static inline uint32_t key_at(const float *x, size_t i) {
  uint32_t u;
  memcpy(&u, &x[i], sizeof u);
  return u & 0x7fffffffu;
}

static gs_status nan_error(size_t i) {
  return gs_error(GS_ERR_INVALID_ARG,
                  "gs_topk_f32: x[%zu] is NaN (the input must hold no NaN)", i);
}

/* Digits of a 31-bit key, most significant first: bits 30..20 (11 bits),
 * 19..10 and 9..0. */
static const int digit_shift[3] = {20, 10, 0};
static const uint32_t digit_mask[3] = {0x7ffu, 0x3ffu, 0x3ffu};

/* The digit b holding the need-th largest key of a histogram, and the number
 * of keys above b. */
static size_t find_bucket(const size_t *hist, size_t nbins, size_t need,
                          size_t *above) {
  size_t cum = 0, b = nbins;
  while (b-- > 0) {
    if (cum + hist[b] >= need) break;
    cum += hist[b];
  }
  *above = cum;
  return b;
}

/* Appends to out (at *nout) the `need` entries of largest key among the m
 * indices of list, whose keys agree on every digit before `level`. The list
 * is reordered (compacted in place). */
static void select_in_list(const float *x, uint32_t *list, size_t m,
                           size_t need, int level, uint32_t *out, size_t *nout) {
  size_t hist[2048];
  while (need > 0) {
    if (need >= m || level == 3) {
      /* The whole list, or (past the last digit) entries with equal keys. */
      memcpy(out + *nout, list, need * sizeof *list);
      *nout += need;
      return;
    }
    const int shift = digit_shift[level];
    const uint32_t mask = digit_mask[level];
    const size_t nbins = (size_t)mask + 1;
    memset(hist, 0, nbins * sizeof hist[0]);
    for (size_t i = 0; i < m; i++) hist[(key_at(x, list[i]) >> shift) & mask]++;
    size_t above;
    const uint32_t b = (uint32_t)find_bucket(hist, nbins, need, &above);
    size_t j = 0;
    for (size_t i = 0; i < m; i++) {
      const uint32_t d = (key_at(x, list[i]) >> shift) & mask;
      if (d > b) out[(*nout)++] = list[i];
      else if (d == b) list[j++] = list[i];
    }
    need -= above;
    m = j;
    level++;
  }
}

/* The full radix select over all of x (path 2 above). */
static gs_status select_radix(const float *x, size_t n, size_t k,
                              uint32_t *idx) {
  size_t hist[2048] = {0};
  for (size_t i = 0; i < n; i++) hist[key_at(x, i) >> 20]++;
  /* Digits from KEY_INF >> 20 up hold +inf and every NaN. */
  size_t special = 0;
  for (size_t d = KEY_INF >> 20; d < 2048; d++) special += hist[d];
  if (special > 0) {
    for (size_t i = 0; i < n; i++)
      if (key_at(x, i) > KEY_INF) return nan_error(i);
  }
  size_t above;
  const uint32_t b = (uint32_t)find_bucket(hist, 2048, k, &above);
  uint32_t *list = gs_malloc(hist[b] * sizeof *list);
  if (list == NULL) return GS_ERR_NOMEM;
  size_t nout = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    const uint32_t d = key_at(x, i) >> 20;
    if (d > b) idx[nout++] = (uint32_t)i;
    else if (d == b) list[m++] = (uint32_t)i;
  }
  select_in_list(x, list, m, k - above, 1, idx, &nout);
  gs_free(list);
  return GS_OK;
}

/* The r-th largest (1-based) of m keys; keys is reordered. */
static uint32_t kth_largest_key(uint32_t *keys, size_t m, size_t r) {
  size_t hist[2048];
  uint32_t prefix = 0;
  for (int level = 0; level < 3; level++) {
    const int shift = digit_shift[level];
    const uint32_t mask = digit_mask[level];
    const size_t nbins = (size_t)mask + 1;
    memset(hist, 0, nbins * sizeof hist[0]);
    for (size_t i = 0; i < m; i++) hist[(keys[i] >> shift) & mask]++;
    size_t above;
    const uint32_t b = (uint32_t)find_bucket(hist, nbins, r, &above);
    size_t j = 0;
    for (size_t i = 0; i < m; i++)
      if (((keys[i] >> shift) & mask) == b) keys[j++] = keys[i];
    m = j;
    r -= above;
    prefix |= b << shift;
  }
  return prefix;
}

/* Inputs below this size, or k above n / SAMPLE_MAX_FRACTION, go straight to
 * the full radix select. */
#define SAMPLE_MIN_N ((size_t)1 << 16)
#define SAMPLE_MAX_FRACTION 16
#define SAMPLE_SIZE ((size_t)16384)
#define FILTER_BLOCK 16

/* Path 1: the sampled threshold and one filtering pass. Returns GS_OK with
 * *done = 1 when it selected, *done = 0 when the threshold missed. */
static gs_status select_sampled(const float *x, size_t n, size_t k,
                                uint32_t *idx, int *done) {
  *done = 0;
  const size_t s = SAMPLE_SIZE, stride = n / s;
  uint32_t sample[SAMPLE_SIZE];
  for (size_t i = 0; i < s; i++) sample[i] = key_at(x, i * stride + stride / 2);
  /* Expect q*s sample entries above the true k-th key; go 3 standard
   * deviations (binomial, sqrt(q*s)) and 2 entries lower. */
  const double qs = (double)k / (double)n * (double)s;
  size_t r = (size_t)ceil(qs + 3.0 * sqrt(qs) + 2.0);
  if (r > s) r = s;
  const uint32_t t = kth_largest_key(sample, s, r);
  if (t > KEY_INF) return GS_OK; /* a NaN in the sample: path 2 names it */
  /* Room for twice the expected count; more means a skewed sample. */
  size_t cap = (size_t)(2.0 * (double)r / (double)s * (double)n) + 2 * k + 1024;
  if (cap > n) cap = n;
  uint32_t *cand = gs_malloc(cap * sizeof *cand);
  if (cand == NULL) return GS_ERR_NOMEM;
  size_t c = 0, i = 0;
  for (; i + FILTER_BLOCK <= n; i += FILTER_BLOCK) {
    /* A branch-free test per block (vectorised), a scalar pass on hits. */
    uint32_t any = 0;
    for (size_t j = 0; j < FILTER_BLOCK; j++)
      any |= (uint32_t)(key_at(x, i + j) >= t);
    if (any) {
      if (c + FILTER_BLOCK > cap) goto miss;
      for (size_t j = 0; j < FILTER_BLOCK; j++)
        if (key_at(x, i + j) >= t) cand[c++] = (uint32_t)(i + j);
    }
  }
  for (; i < n; i++) {
    if (key_at(x, i) >= t) {
      if (c == cap) goto miss;
      cand[c++] = (uint32_t)i;
    }
  }
  if (c < k) goto miss;
  for (size_t j = 0; j < c; j++)
    if (key_at(x, cand[j]) > KEY_INF) {
      const size_t at = cand[j];
      gs_free(cand);
      return nan_error(at);
    }
  size_t nout = 0;
  select_in_list(x, cand, c, k, 0, idx, &nout);
  gs_free(cand);
  *done = 1;
  return GS_OK;
miss:
  gs_free(cand);
  return GS_OK;
}

gs_status gs__topk_exact(const float *x, size_t n, size_t k, uint32_t *idx) {
  if (k == 0) {
    /* Still refuse NaN input, as for every other k. */
    for (size_t i = 0; i < n; i++)
      if (key_at(x, i) > KEY_INF) return nan_error(i);
    return GS_OK;
  }
  if (n >= SAMPLE_MIN_N && k <= n / SAMPLE_MAX_FRACTION) {
    int done;
    GS_CHECK(select_sampled(x, n, k, idx, &done));
    if (done) return GS_OK;
  }
  return select_radix(x, n, k, idx);
}

/* ---- MSTopK ----------------------------------------------------------------- */

/* Binary-search steps of MSTopK. Each is one count pass; the search also
 * stops when a threshold selects exactly k. */
#define MSTOPK_STEPS 24
#define MSTOPK_SEED 0x6d73746f706bULL /* "mstopk" */

static size_t count_at_least(const float *x, size_t n, uint32_t t) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += key_at(x, i) >= t;
  return c;
}

static uint32_t float_key(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u & 0x7fffffffu;
}

gs_status gs__topk_mstopk(const float *x, size_t n, size_t k, uint32_t *idx) {
  /* One pass: the mean and the max of |x|, and the NaN check. */
  double sum = 0;
  uint32_t kmax = 0;
  for (size_t i = 0; i < n; i++) {
    const uint32_t key = key_at(x, i);
    if (key > kmax) kmax = key;
    sum += fabsf(x[i]);
  }
  if (kmax > KEY_INF) {
    for (size_t i = 0; i < n; i++)
      if (key_at(x, i) > KEY_INF) return nan_error(i);
  }
  if (k == 0) return GS_OK;
  if (k == n) {
    for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
    return GS_OK;
  }
  /* With an infinity the interpolation has no meaning: select exactly. */
  if (kmax == KEY_INF) return gs__topk_exact(x, n, k, idx);
  float umax;
  memcpy(&umax, &kmax, sizeof umax);
  const double mean = sum / (double)n;
  double lo = 0, hi = 1;
  uint32_t t1 = KEY_INF + 1, t2 = 0; /* t1 selects no entry at first */
  size_t k1 = 0, k2 = n;
  for (int step = 0; step < MSTOPK_STEPS; step++) {
    const double ratio = lo + (hi - lo) / 2;
    const uint32_t t = float_key((float)(mean + ratio * ((double)umax - mean)));
    const size_t nnz = count_at_least(x, n, t);
    if (nnz <= k) {
      hi = ratio;
      if (nnz > k1 || (nnz == k1 && t < t1)) {
        k1 = nnz;
        t1 = t;
      }
      if (nnz == k) break;
    } else {
      lo = ratio;
      if (nnz < k2) {
        k2 = nnz;
        t2 = t;
      }
    }
  }
  /* Every key >= t1, and k - k1 of the k2 - k1 keys in [t2, t1) chosen by
   * selection sampling (Knuth's Algorithm S): each is taken with probability
   * (still needed) / (still to see), which takes exactly k - k1. */
  size_t need = k - k1, left = k2 - k1, nout = 0;
  uint64_t rng = MSTOPK_SEED;
  for (size_t i = 0; i < n; i++) {
    const uint32_t key = key_at(x, i);
    if (key >= t1) {
      idx[nout++] = (uint32_t)i;
    } else if (key >= t2) {
      if (need > 0 && gs__rand_below(&rng, left) < need) {
        idx[nout++] = (uint32_t)i;
        need--;
      }
      left--;
    }
  }
  if (nout != k)
    return gs_error(GS_ERR_INTERNAL, "gs_topk_f32(mstopk): selected %zu of "
                    "k = %zu (n = %zu)", nout, k, n);
  return GS_OK;
}

gs_status gs_topk_f32(const float *x, size_t n, size_t k, const char *method,
                      uint32_t *idx) {
  if (x == NULL && n > 0)
    return gs_error(GS_ERR_INVALID_ARG, "gs_topk_f32: x is NULL (n = %zu)", n);
  if (k > n)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_topk_f32: k = %zu exceeds n = %zu", k, n);
  if (idx == NULL && k > 0)
    return gs_error(GS_ERR_INVALID_ARG, "gs_topk_f32: idx is NULL (k = %zu)", k);
  if (n > (size_t)UINT32_MAX)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_topk_f32: n = %zu does not fit uint32_t indices", n);
  if (method == NULL || strcasecmp(method, "exact") == 0)
    return gs__topk_exact(x, n, k, idx);
  if (strcasecmp(method, "mstopk") == 0) return gs__topk_mstopk(x, n, k, idx);
  return gs_error(GS_ERR_INVALID_ARG,
                  "gs_topk_f32: unknown method '%s' (expected exact or mstopk)",
                  method);
}
