/*
 * DLRM (Naumov et al. 2019, arXiv 1906.00091; facebookresearch/dlrm): the
 * model, its metrics and its data, on one process (docs/DLRM.md).
 *
 *   dense [n x F] -> bottom MLP (ReLU on every layer) -> x [n x D]
 *   sparse bags   -> one embedding bag per table (sum)  -> e_t [n x D]
 *   interaction   -> dot: [x, the strictly lower triangle of Z Z^T] with
 *                    Z = (x, e_1 .. e_T) (width D + (T+1)T/2), or cat:
 *                    [x, e_1 .. e_T] (width (T+1)D), or dcn: DCN-v2's
 *                    low-rank cross layers over that concatenation x0
 *                    (Wang et al., WWW 2021; TorchRec's LowRankCrossNet,
 *                    MLPerf's DLRM-DCNv2): x_{l+1} = x0 * (W_l (V_l x_l) +
 *                    b_l) + x_l, elementwise *, width (T+1)D
 *   top MLP       -> ReLU on every layer but the last, which has 1 output:
 *                    the logit; sigmoid + binary cross-entropy (mean).
 *
 * The step is cut where the hybrid-parallel version will exchange vectors:
 * the pooled embeddings live in one [n x T*D] matrix (gs_dlrm_pooled:
 * sample-major, table t at columns t*D), which is what an all-to-all of the
 * sharded tables' outputs delivers, and the backward leaves its gradient in
 * a matrix of the same layout (gs_dlrm_pooled_grad) for the all-to-all back.
 * The MLPs' weights and gradients are each one contiguous buffer (bottom
 * then top; gs_dlrm_params lists the tensors inside it) for the engine's
 * all-reduce. One step on one process:
 *
 *   gs_dlrm_forward_bottom(m, b);      dense -> x
 *   gs_dlrm_forward_embed(m, b);       lookups -> pooled  (distributed: own
 *                                      shards, then the all-to-all)
 *   gs_dlrm_forward_top(m, n, logits); interaction + top MLP
 *   gs_dlrm_bce_with_logits(...)       loss and d logits
 *   gs_dlrm_backward(m, dlogits);      MLP gradients, d pooled
 *   gs_dlrm_update_embed(m, b, &opt);  fused backward + update of the tables
 *   gs_dlrm_update_mlp(m, lr);         SGD on the flat MLP weights
 *
 * or gs_dlrm_train_step for all of it. The hybrid-parallel step over
 * sharded tables is gradsync/dlrm_dist.h's. Deterministic: the same seed and
 * batches give bitwise-identical weights and losses (every sum has a fixed
 * order; OpenBLAS's GEMMs are fixed for a fixed thread count).
 *
 * Threads: a gs_dlrm is used by one thread at a time.
 */
#ifndef GRADSYNC_DLRM_H
#define GRADSYNC_DLRM_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/core.h"
#include "gradsync/embed.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Batches ----------------------------------------------------------------
 * A batch of n samples: dense features, one bag per table (int32 ids, CSR)
 * and labels in {0, 1}. gs_dlrm_batch_alloc sizes it for up to max_n samples
 * and up to max_ids ids per table over the whole batch; the batch owns every
 * buffer (gs_dlrm_batch_free). bags[t] points into offsets and ids:
 * bags[t].offsets = offsets + t * (max_n + 1), bags[t].ids = ids + t * max_ids. */
typedef struct gs_dlrm_batch {
  size_t n, max_n, ndense, max_ids;
  int ntables;
  float *dense;        /* max_n x ndense, row-major */
  float *labels;       /* max_n */
  int64_t *offsets;    /* ntables x (max_n + 1) */
  int32_t *ids;        /* ntables x max_ids */
  gs_embed_bags *bags; /* ntables */
  size_t first_sample; /* global index of sample 0 (messages, generators) */
} gs_dlrm_batch;

gs_status gs_dlrm_batch_alloc(gs_dlrm_batch *b, size_t max_n, size_t ndense, int ntables,
                              size_t max_ids);
void gs_dlrm_batch_free(gs_dlrm_batch *b);

/* ---- The model -------------------------------------------------------------- */

typedef enum { GS_DLRM_DOT = 0, GS_DLRM_CAT, GS_DLRM_DCN } gs_dlrm_interaction;

/* "dot", "cat" or "dcn". */
gs_status gs_dlrm_interaction_parse(const char *s, gs_dlrm_interaction *out);

/* An MLP's widths, "13-512-256-64" (or one, "1": a top MLP of one layer),
 * each 1 to 1,000,000. */
#define GS_DLRM_MAX_LAYERS 32
gs_status gs_dlrm_mlp_parse(const char *spec, int *widths, int cap, int *n);

typedef struct gs_dlrm_config {
  /* Bottom MLP from the dense features to D, "13-512-256-64": the first
   * width is the dense feature count, the last the embedding dimension. */
  const char *bottom_mlp;
  /* Top MLP after the interaction, "512-256-1": the widths of its layers
   * (not its input, which the interaction decides); the last must be 1. */
  const char *top_mlp;
  /* The tables: rows each; dim must be 0 or D (the model's tables are all
   * D wide). Names are copied. */
  const gs_embed_spec *tables;
  int ntables;
  gs_dlrm_interaction interaction;
  size_t max_batch;
  uint64_t seed;
  /* dcn: the cross layers (0: 3, MLPerf's) and their rank r (0: 512,
   * MLPerf's, at most (T+1)D: V_l is r x (T+1)D, W_l (T+1)D x r), at most
   * GS_DLRM_MAX_CROSS layers. Ignored by dot and cat. */
  int dcn_layers;
  size_t dcn_rank;
} gs_dlrm_config;
#define GS_DLRM_MAX_CROSS 16

typedef struct gs_dlrm gs_dlrm;

/* Allocates and initialises a model as the DLRM reference does (its
 * create_mlp and create_emb): each layer's weight ~ N(0, 2 / (in + out)),
 * its bias ~ N(0, 1 / out); table rows ~ U(-sqrt(1/rows), sqrt(1/rows)).
 * Every row-wise Adagrad accumulator starts at 0. All of it from `seed`.
 * Errors name the MLP spec or the table that is wrong. */
gs_status gs_dlrm_create(const gs_dlrm_config *cfg, gs_dlrm **out);
void gs_dlrm_destroy(gs_dlrm *m);

size_t gs_dlrm_dim(const gs_dlrm *m);          /* D */
size_t gs_dlrm_ndense(const gs_dlrm *m);       /* F */
int gs_dlrm_ntables(const gs_dlrm *m);
size_t gs_dlrm_interaction_width(const gs_dlrm *m); /* the top MLP's input */

/* One MLP tensor: a slice of the flat buffers. The model owns the pointers;
 * they stay valid until gs_dlrm_destroy. Order: bottom layers, then dcn's
 * cross layers (each "cross.L.V" [r x (T+1)D], "cross.L.W" [(T+1)D x r],
 * "cross.L.bias"), then top layers; an MLP layer's weight ([out x in],
 * row-major) then bias. */
typedef struct gs_dlrm_param {
  const char *name; /* "bottom.0.weight", "top.2.bias", ... */
  float *weights, *grad;
  size_t count;
} gs_dlrm_param;

size_t gs_dlrm_param_count(const gs_dlrm *m);
const gs_dlrm_param *gs_dlrm_param_at(const gs_dlrm *m, size_t i);
/* Every MLP weight (gradient) in one buffer of *count floats. The backward
 * overwrites the gradients; a data-parallel run all-reduces (averages) them
 * between gs_dlrm_backward and gs_dlrm_update_mlp. */
float *gs_dlrm_mlp_weights(gs_dlrm *m, size_t *count);
float *gs_dlrm_mlp_grads(gs_dlrm *m, size_t *count);

/* Table t (weights rows x D, state: its row-wise Adagrad accumulator),
 * owned by the model. NULL when t is out of range. */
gs_embed_table *gs_dlrm_table(gs_dlrm *m, int t);

/* The pooled embeddings of the last forward and their gradient after the
 * backward: [n x T*D], table t at columns t*D, owned by the model. */
float *gs_dlrm_pooled(gs_dlrm *m);
float *gs_dlrm_pooled_grad(gs_dlrm *m);

/* The stages of the forward. A batch has ndense = F, ntables = T and
 * n <= max_batch, else GS_ERR_INVALID_ARG; bags are checked against the
 * tables (gs_embed_check's messages). forward_top reads the bottom output
 * and the pooled matrix of the same n samples and writes n logits. */
gs_status gs_dlrm_forward_bottom(gs_dlrm *m, const gs_dlrm_batch *b);
gs_status gs_dlrm_forward_embed(gs_dlrm *m, const gs_dlrm_batch *b);
gs_status gs_dlrm_forward_top(gs_dlrm *m, size_t n, float *logits);
/* All three. */
gs_status gs_dlrm_forward(gs_dlrm *m, const gs_dlrm_batch *b, float *logits);

/* The backward from d loss / d logit (n floats, the last forward's n):
 * overwrites the MLP gradients and the pooled gradient. Changes no weight. */
gs_status gs_dlrm_backward(gs_dlrm *m, const float *dlogits);

/* The same backward in two halves, for a trainer that overlaps them with
 * communication: backward_top runs the top MLP and the interaction (the top
 * MLP's gradients and the pooled gradient are then final), backward_bottom
 * the bottom MLP. `ready` (may be NULL) is called with `arg` and the index
 * of each MLP tensor (gs_dlrm_param_at's) as soon as that tensor's gradient
 * is final, the last layer's first (backward order); the backward no longer
 * reads or writes that gradient afterwards. A non-zero status from `ready`
 * ends the backward with it. backward_bottom needs backward_top's batch. */
typedef gs_status (*gs_dlrm_grad_ready_fn)(void *arg, size_t param);
gs_status gs_dlrm_backward_top(gs_dlrm *m, const float *dlogits, gs_dlrm_grad_ready_fn ready,
                               void *arg);
gs_status gs_dlrm_backward_bottom(gs_dlrm *m, gs_dlrm_grad_ready_fn ready, void *arg);

typedef struct gs_dlrm_optim {
  float mlp_lr;         /* plain SGD on the MLPs */
  gs_embed_optim embed; /* the tables: SGD or row-wise Adagrad */
} gs_dlrm_optim;

/* The tables' update from the pooled gradient, fused with their backward
 * (gs_embed_backward_update), for the batch of the last forward. */
gs_status gs_dlrm_update_embed(gs_dlrm *m, const gs_dlrm_batch *b, const gs_embed_optim *opt);
/* w -= lr * g over the flat MLP buffers. */
void gs_dlrm_update_mlp(gs_dlrm *m, float lr);

/* forward, loss, backward and both updates. loss (may be NULL): the batch's
 * mean log loss; logits (may be NULL, else n floats): the forward's. */
gs_status gs_dlrm_train_step(gs_dlrm *m, const gs_dlrm_batch *b, const gs_dlrm_optim *opt,
                             float *loss, float *logits);

/* Binary cross-entropy with logits, stable for any logit:
 *   l(z, y) = max(z, 0) - z y + log(1 + exp(-|z|))
 * *loss = mean over n (summed in double); dlogits (may be NULL) =
 * (sigmoid(z) - y) / n. Labels in [0, 1]; a non-finite logit or a label
 * outside [0, 1] is refused, naming the sample. */
gs_status gs_dlrm_bce_with_logits(const float *logits, const float *labels, size_t n,
                                  double *loss, float *dlogits);

/* ---- Metrics ---------------------------------------------------------------- */

/* Mean log loss of logits against labels (gs_dlrm_bce_with_logits). */
gs_status gs_metric_log_loss(const float *logits, const float *labels, size_t n,
                             double *out);

/* Exact ROC AUC of scores (any monotone score: logits or probabilities)
 * against labels in {0, 1}: the Mann-Whitney U of the positives over
 * positives x negatives (Hanley & McNeil 1982, eq. 2), ranks from a sort of
 * the scores, tied scores given their average rank (so a tie between a
 * positive and a negative counts one half). O(n log n), n doubles of
 * scratch. When every label is the same class the AUC is undefined:
 * GS_ERR_INVALID_ARG saying so, and *out = NaN; so too for n = 0, a label
 * other than 0 or 1, or a NaN score. */
gs_status gs_metric_auc(const float *scores, const float *labels, size_t n, double *out);

/* Normalized entropy (He et al., "Practical Lessons from Predicting Clicks
 * on Ads at Facebook", ADKDD 2014; TorchRec's NE): the mean log loss over
 * the entropy of the labels' mean p, -(p log p + (1 - p) log(1 - p)): 1 for
 * a model that predicts p for every sample, lower is better. And the
 * calibration: the sum of the predicted probabilities sigmoid(logit) over
 * the sum of the labels (1: as many clicks predicted as there were).
 * Labels in [0, 1]. Undefined when p is 0 or 1 (NE) or no label is
 * positive (calibration): GS_ERR_INVALID_ARG saying so, that output NaN
 * and the other still computed when it is defined; so too for n = 0, a
 * label outside [0, 1] or a non-finite logit. Either output may be NULL. */
gs_status gs_metric_ne(const float *logits, const float *labels, size_t n, double *ne,
                       double *calibration);

/* ---- Zipf ------------------------------------------------------------------- */

/* A bounded Zipf law on ranks 1..n, P(k) proportional to k^-s (s >= 0; s = 0
 * is uniform), drawn by rejection-inversion (Hormann & Derflinger 1996,
 * "Rejection-inversion to generate variates from monotone discrete
 * distributions", ACM TOMACS 6(3)): O(1) per draw, no table, for any n up
 * to 2^53. */
typedef struct gs_zipf {
  uint64_t n;
  double s;
  double h_x1, h_n, squeeze; /* the sampler's constants */
} gs_zipf;

gs_status gs_zipf_init(gs_zipf *z, uint64_t n, double s);
/* A rank in [1, n], from the splitmix64 stream *state (advanced). */
uint64_t gs_zipf_draw(const gs_zipf *z, uint64_t *state);

/* ---- Synthetic data with a planted signal ----------------------------------
 * Sample i (a global index) is a pure function of (seed, i): any rank can
 * make any slice of the data, whatever the batch size.
 *   dense:  F values ~ N(0, 1);
 *   sparse: per table, `pooling` ids (pooling_random: uniform in
 *           1..pooling), each a Zipf(zipf_s) rank over the table's rows,
 *           mapped to an id by a fixed bijection of [0, rows) (hot rows
 *           scattered, as FBGEMM's generator does) unless scramble is 0;
 *   label:  Bernoulli(sigmoid(t(sample))) from a hidden logistic teacher
 *           t = bias + w . dense + sum_t sum_{id in bag t} v_t(id), with
 *           w ~ N(0, dense_std^2 / F) and v_t(id) ~ N(0, sparse_std^2 /
 *           (T * mean pooling)) (a hash of seed, table and id: no memory).
 * The teacher's ranking is the Bayes-optimal one, so its AUC on a set
 * (gs_dlrm_synth_teacher_auc) is the ceiling of any model's. */
typedef struct gs_dlrm_synth_config {
  size_t ndense;            /* F */
  const gs_embed_spec *tables;
  int ntables;
  double zipf_s;            /* exponent; 1.05 by default (gs_dlrm_synth_defaults) */
  int pooling;              /* ids per bag, or the most with pooling_random */
  int pooling_random;
  int scramble;             /* 1: hot ranks scattered over the rows */
  double teacher_bias, dense_std, sparse_std;
  uint64_t seed;
  /* 1: table t's bags draw tables[t].pooling ids (rounded, 1 to 1000000;
   * the most with pooling_random) instead of `pooling`, the ids per sample
   * the sharding planner prices the table at; 0: `pooling` for every table. */
  int table_pooling;
} gs_dlrm_synth_config;

/* F 13, s 1.05, pooling 1 fixed, scramble on, bias -1, dense_std 1,
 * sparse_std 1.5, seed 1; no tables. */
gs_dlrm_synth_config gs_dlrm_synth_defaults(void);

typedef struct gs_dlrm_synth gs_dlrm_synth;

/* The tables are copied (rows only: the model decides their width). */
gs_status gs_dlrm_synth_create(const gs_dlrm_synth_config *cfg, gs_dlrm_synth **out);
void gs_dlrm_synth_destroy(gs_dlrm_synth *g);
/* The most ids a sample's bag of any table holds: `pooling`, or with
 * table_pooling the largest table's (0 on a bad table). */
int gs_dlrm_synth_max_pooling(const gs_dlrm_synth_config *cfg);
/* Samples first .. first + n - 1 into b (sized for n samples and n *
 * gs_dlrm_synth_max_pooling ids per table); b->first_sample = first. */
gs_status gs_dlrm_synth_fill(const gs_dlrm_synth *g, size_t first, size_t n,
                             gs_dlrm_batch *b);
/* The teacher's logit of each sample of b (n floats). */
gs_status gs_dlrm_synth_teacher_logits(const gs_dlrm_synth *g, const gs_dlrm_batch *b,
                                       float *out);
/* The teacher's AUC over samples first .. first + n - 1 (the ceiling). */
gs_status gs_dlrm_synth_teacher_auc(const gs_dlrm_synth *g, size_t first, size_t n,
                                    double *auc);
/* The id of Zipf rank k (1-based) in table t: where the hot rows are. */
uint64_t gs_dlrm_synth_id_of_rank(const gs_dlrm_synth *g, int t, uint64_t k);

/* ---- Criteo's TSV day files ------------------------------------------------
 * A line: label, 13 integer features, 26 categorical features (hex), tab
 * separated; any feature may be empty. As the DLRM reference reads them
 * (dlrm_data_pytorch.py, data_utils.py): an empty field is 0, an integer x
 * becomes log(1 + max(x, 0)), a categorical value its hex number modulo the
 * table's rows (one id per bag). Streaming: one line at a time, no limit
 * on the file's size. Any malformed line (a field count other than 40, a
 * label other than 0 or 1, an integer or hex value that does not parse)
 * is GS_ERR_PARSE naming the file, the line and the field. A file
 * compressed with gzip (day_0.gz) is read as it is. */
#define GS_CRITEO_DENSE 13
#define GS_CRITEO_SPARSE 26

typedef struct gs_criteo_reader gs_criteo_reader;

/* tables: 26 specs (the rows of each; e.g. a preset). Copied. */
gs_status gs_criteo_open(const char *path, const gs_embed_spec *tables, int ntables,
                         gs_criteo_reader **out);
/* Reads up to b->max_n samples into b (13 dense, 26 tables, max_ids >=
 * max_n); *got = b->n = the count, 0 at the end of the file. first_sample
 * counts the file's samples. */
gs_status gs_criteo_read(gs_criteo_reader *r, gs_dlrm_batch *b, size_t *got);
/* Passes over up to n lines without parsing them (*skipped: how many;
 * fewer at the end of the file); they count as samples read. */
gs_status gs_criteo_skip(gs_criteo_reader *r, size_t n, size_t *skipped);
/* Back to the file's first line (an epoch's second pass). */
gs_status gs_criteo_rewind(gs_criteo_reader *r);
/* The line number of the last line read (1-based). */
size_t gs_criteo_line(const gs_criteo_reader *r);
void gs_criteo_close(gs_criteo_reader *r);
/* Counts the file's lines as the reader reads them (a last line without
 * its newline counts), stopping at `limit` (0: all): *lines is the count,
 * at most limit. A plain file is counted by its newlines alone (memchr
 * over pread's chunks, no parsing); a gzip one is decompressed up to the
 * limit. For a run's start: whether the file holds the lines it needs. */
gs_status gs_criteo_count_lines(const char *path, size_t limit, size_t *lines);

/* A vocabulary of the categorical values (TorchRec's and MLPerf's
 * preprocessing, their "frequency threshold"): each feature's values
 * counted over the file's first `lines` lines (0: all of them; the
 * training set), those seen at least min_count times (1 to 2^32 - 1)
 * numbered from 2 by falling count, ties by value; any other value (rare,
 * or not in those lines) is id 1 and an empty field id 0. A reader given
 * one (gs_criteo_set_vocab) takes a value's id from it, modulo the table's
 * rows, instead of the value modulo the rows. A malformed line among those
 * counted is GS_ERR_PARSE naming its line and field, as gs_criteo_read. */
typedef struct gs_criteo_vocab gs_criteo_vocab;
gs_status gs_criteo_vocab_build(const char *path, size_t lines, uint64_t min_count,
                                gs_criteo_vocab **out);
/* Feature t's ids: its kept values + 2 (the rows a table needs). */
size_t gs_criteo_vocab_rows(const gs_criteo_vocab *v, int t);
/* Feature t's distinct values counted, those kept, and the lines counted. */
void gs_criteo_vocab_stats(const gs_criteo_vocab *v, int t, size_t *distinct, size_t *kept,
                           size_t *lines);
/* The id of one value as the file writes it (hex; "" is 0). */
uint64_t gs_criteo_vocab_id(const gs_criteo_vocab *v, int t, const char *value);
/* Borrowed: v must outlive r's reads (NULL: back to the value modulo the rows). */
gs_status gs_criteo_set_vocab(gs_criteo_reader *r, const gs_criteo_vocab *v);
void gs_criteo_vocab_free(gs_criteo_vocab *v);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_DLRM_H */
