/*
 * The metrics of a click model (include/gradsync/dlrm.h): log loss, the
 * exact ROC AUC, normalized entropy and calibration.
 */
#include <math.h>
#include <stdlib.h>

#include "gradsync/dlrm.h"
#include "gs_internal.h"

gs_status gs_metric_log_loss(const float *logits, const float *labels, size_t n,
                             double *out) {
  return gs_dlrm_bce_with_logits(logits, labels, n, out, NULL);
}

typedef struct {
  float score;
  float label;
} scored;

static int cmp_score(const void *a, const void *b) {
  float x = ((const scored *)a)->score, y = ((const scored *)b)->score;
  return (x > y) - (x < y);
}

/* AUC = (R+ - P(P + 1)/2) / (P N), R+ the sum of the positives' ranks
 * (1-based, ascending score), each run of tied scores given the mean of the
 * ranks it spans (Hanley & McNeil 1982, eq. 2: the Mann-Whitney U over
 * P N). The order inside a run does not matter, so qsort's instability
 * does not either. */
gs_status gs_metric_auc(const float *scores, const float *labels, size_t n, double *out) {
  if (out == NULL) return gs_error(GS_ERR_INVALID_ARG, "AUC: NULL output");
  *out = NAN;
  if (scores == NULL || labels == NULL || n == 0)
    return gs_error(GS_ERR_INVALID_ARG, "AUC: NULL input or no samples (%zu)", n);
  size_t pos = 0;
  for (size_t i = 0; i < n; i++) {
    if (labels[i] != 0.0f && labels[i] != 1.0f)
      return gs_error(GS_ERR_INVALID_ARG, "AUC: sample %zu has label %g (0 or 1 expected)", i,
                      (double)labels[i]);
    if (isnan(scores[i]))
      return gs_error(GS_ERR_INVALID_ARG, "AUC: sample %zu has a NaN score", i);
    pos += labels[i] == 1.0f;
  }
  if (pos == 0 || pos == n)
    return gs_error(GS_ERR_INVALID_ARG, "AUC: undefined, all %zu samples are %s", n,
                    pos ? "positive" : "negative");
  scored *v = gs_malloc(n * sizeof *v);
  if (v == NULL) return gs_error(GS_ERR_NOMEM, "AUC: out of memory for %zu samples", n);
  for (size_t i = 0; i < n; i++) v[i] = (scored){scores[i], labels[i]};
  qsort(v, n, sizeof *v, cmp_score);
  double rank_sum = 0; /* ranks of the positives */
  for (size_t i = 0; i < n;) {
    size_t k = i, p = 0;
    for (; k < n && v[k].score == v[i].score; k++) p += v[k].label == 1.0f;
    /* Ranks i+1 .. k share their mean. */
    rank_sum += (double)p * ((double)(i + 1) + (double)k) / 2.0;
    i = k;
  }
  gs_free(v);
  double P = (double)pos, N = (double)(n - pos);
  *out = (rank_sum - P * (P + 1.0) / 2.0) / (P * N);
  return GS_OK;
}

gs_status gs_metric_ne(const float *logits, const float *labels, size_t n, double *ne,
                       double *calibration) {
  if (ne) *ne = NAN;
  if (calibration) *calibration = NAN;
  if (logits == NULL || labels == NULL || n == 0)
    return gs_error(GS_ERR_INVALID_ARG, "NE: NULL input or no samples (%zu)", n);
  double ll, clicks = 0, predicted = 0;
  GS_CHECK(gs_dlrm_bce_with_logits(logits, labels, n, &ll, NULL)); /* checks both */
  for (size_t i = 0; i < n; i++) {
    clicks += labels[i];
    predicted += 1.0 / (1.0 + exp(-(double)logits[i]));
  }
  double p = clicks / (double)n;
  if (calibration && clicks > 0) *calibration = predicted / clicks;
  if (p <= 0 || p >= 1)
    return gs_error(GS_ERR_INVALID_ARG, "NE: undefined, every one of the %zu labels is %s", n,
                    p > 0 ? "1" : "0");
  if (ne) *ne = ll / -(p * log(p) + (1 - p) * log(1 - p));
  return GS_OK;
}
