/*
 * What the DLRM files share (src/embed/dlrm*.c, criteo.c): the random
 * numbers of the model's initialisation and of the synthetic data. Not
 * installed.
 */
#ifndef GS_DLRM_INTERNAL_H
#define GS_DLRM_INTERNAL_H

#include <math.h>
#include <stdint.h>

/* splitmix64 (Steele, Lea & Flood, OOPSLA 2014): the next value of the
 * stream *state. */
static inline uint64_t dlrm_rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* A hash of x: splitmix64's finaliser, for counter-based streams (a
 * sample's or a row's own numbers, from its index alone). */
static inline uint64_t dlrm_mix(uint64_t x) {
  uint64_t s = x;
  return dlrm_rng_next(&s);
}

/* The greatest common divisor (gcd(a, 0) = a). */
static inline uint64_t dlrm_gcd(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Uniform in [0, 1), 53 bits; uniform in (0, 1) for logarithms. */
static inline double dlrm_unif(uint64_t *state) {
  return (double)(dlrm_rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}
static inline double dlrm_unif_open(uint64_t *state) {
  return ((double)(dlrm_rng_next(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* A standard normal by Box-Muller (one of the pair). */
static inline double dlrm_gauss(uint64_t *state) {
  double u1 = dlrm_unif_open(state), u2 = dlrm_unif(state);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- The lookup calibration's cache (shard.c) ---- */

/* The cache bytes that random loads' latencies lat[0..n) (seconds, n >= 2)
 * at sizes first, 2 first, 4 first, ... say a core has (measured_cache's
 * estimate: up to the size where the latency settles on the memory's, the
 * largest S (L_m - L) / (L_m - L_c) over the sizes whose share is 3/4 or
 * more; the largest size where no miss shows). */
double embed_cache_estimate(const double *lat, int n, double first);

/* ---- What the hybrid-parallel step (dlrm_dist.c) needs of dlrm.c ---- */

#include <stddef.h>

#include "gradsync/dlrm.h"

/* Table t's bags of batch b, as the embedding kernels take them: b's
 * samples, numbered from b->first_sample in messages. */
static inline gs_embed_bags dlrm_batch_bags(const gs_dlrm_batch *b, size_t t) {
  gs_embed_bags bags = b->bags[t];
  bags.nbags = b->n;
  bags.first_sample = b->first_sample;
  return bags;
}

/* dcn's cross layers and their rank as gs_dlrm_create makes them from a
 * config (its 0s the defaults: 3 layers, rank min(512, width)), width the
 * cross layers' (T + 1) D. The one home of those defaults. */
static inline void dlrm_dcn_shape(const gs_dlrm_config *c, size_t width, int *layers,
                                  size_t *rank) {
  *layers = c->dcn_layers ? c->dcn_layers : 3;
  *rank = c->dcn_rank ? c->dcn_rank : (width < 512 ? width : 512);
}

/* gs_dlrm_create; with_tables 0 leaves every table's weights and state
 * NULL (their shards live elsewhere): forward_embed and update_embed then
 * refuse, and the caller fills gs_dlrm_pooled and calls dlrm_mark_pooled. */
gs_status dlrm_create(const gs_dlrm_config *cfg, int with_tables, gs_dlrm **out);
/* Block [r_lo, r_hi) x [c_lo, c_hi) of table t (rows x D) as the whole
 * table's initialisation makes it, into w (leading dimension ld). */
void dlrm_table_init(float *w, size_t ld, uint64_t seed, size_t t, size_t rows, size_t D,
                     size_t r_lo, size_t r_hi, size_t c_lo, size_t c_hi);
/* The pooled matrix of the last forward_bottom's n samples is filled. */
void dlrm_mark_pooled(gs_dlrm *m);
/* gs_dlrm_bce_with_logits over n samples, its gradient divided by denom
 * (the global batch when n is one rank's share) and the loss summed, not
 * averaged; errors count samples from first_sample. */
gs_status dlrm_bce(const float *logits, const float *labels, size_t n, double denom,
                   size_t first_sample, double *loss_sum, float *dlogits);

/* ---- Checkpoints (dlrm_ckpt.c), for the training loop (dlrm_train.c) ---- */

#include "gradsync/dlrm_dist.h"

typedef struct dlrm_ckpt dlrm_ckpt;

/* Collective. Prepares checkpoint_dir (created if missing, writable on
 * every rank) and, when cfg->resume asks for it, reads the last commit's
 * manifest, checks it against this run and loads its plan into *plan
 * (otherwise *plan is left NULL: the caller makes one). specs: the tables
 * with their dim set. A failure is every rank's. *out is NULL when cfg has
 * no checkpoint_dir. */
gs_status dlrm_ckpt_open(const gs_dlrm_train_config *cfg, gs_comm *comm,
                         const gs_embed_spec *specs, dlrm_ckpt **out, gs_shard_plan **plan);
/* Whether open found a commit to resume from; its position as this run's
 * global step, the training losses' sum of its unfinished epoch (in this
 * run's steps), its world size, its own step and its global batch (another
 * global batch: the same sample in this run's steps). When the world size
 * is not this run's, open leaves *plan NULL (the caller makes this run's)
 * and load re-shards. */
int dlrm_ckpt_resumed(const dlrm_ckpt *c, size_t *step, double *epoch_loss_sum, int *ranks,
                      size_t *from_step, size_t *from_global_batch);
/* Collective: every rank reads its own file into its shards; the MLPs and
 * the dp replicas come from rank 0's. On another world size each rank
 * reads the rows of its shards from the files that hold them. A failure is
 * every rank's. */
gs_status dlrm_ckpt_load(dlrm_ckpt *c, gs_dlrm_dist *d);
/* A commit put in place (dlrm_ckpt_commit, dlrm_ckpt_publish): its global
 * step; the global step after which it was put in place (step itself in
 * the foreground); the bytes this rank wrote; the training this rank
 * stalled for it (its state's write and its agreements; in the background
 * also the wait for the writer, if any); the writer thread's seconds (0 in
 * the foreground). step 0: nothing was put in place. */
typedef struct dlrm_ckpt_done {
  size_t step, published_step, bytes;
  double stall_s, write_s;
} dlrm_ckpt_done;

/* Collective: commits the state after global step `step` (epoch_loss_sum:
 * the training losses of the unfinished epoch so far). The state's bytes
 * are written now (into the page cache). In the foreground the commit is
 * made durable and put in place before it returns, and *done says so. In
 * the background (background != 0) a thread checksums what was written,
 * fsyncs and renames it while training goes on, and dlrm_ckpt_publish puts
 * it in place later (*done: nothing yet). A commit still in the background
 * is published first (the caller's dlrm_ckpt_publish; refused otherwise).
 * A failure is every rank's and leaves the last commit. */
gs_status dlrm_ckpt_commit(dlrm_ckpt *c, gs_dlrm_dist *d, const gs_shard_plan *plan,
                           size_t step, double epoch_loss_sum, int background,
                           dlrm_ckpt_done *done);
/* Collective: the commit in the background, if any, joined and put in
 * place (the ranks agree that every rank's file is on disk, rank 0 writes
 * the manifest) after global step `now`; *done says what was (step 0:
 * none was pending). A failure (the writer's, on any rank) is every rank's
 * and leaves the commit before it. */
gs_status dlrm_ckpt_publish(dlrm_ckpt *c, gs_dlrm_dist *d, size_t now, dlrm_ckpt_done *done);
/* The global step after which the commit in the background should be put
 * in place: the same on every rank (from the last publication's agreed
 * writer and step times: the writer's time over the step's, and one step
 * more), or 0 (none pending, or nothing measured yet: the next commit
 * point puts it in place). */
size_t dlrm_ckpt_due(const dlrm_ckpt *c);
/* Joins a writer still running and removes its unpublished files. */
void dlrm_ckpt_close(dlrm_ckpt *c);
/* The timeline of a DLRM run (GRADSYNC_TIMELINE or the config's
 * timeline: a Chrome trace per rank). dlrm_dist.c records each phase of a
 * step on compute or comm; dlrm_train.c the steps, evaluations and
 * commits; dlrm_ckpt.c the background writer on a track of its own. */
enum { DLRM_TL_COMPUTE = 1, DLRM_TL_COMM = 2, DLRM_TL_STEPS = 3, DLRM_TL_CHECKPOINT = 4 };
typedef struct gs__timeline gs__timeline;
/* Sets (or clears, NULL) the timeline d's step records on; borrowed. */
void dlrm_dist_set_timeline(gs_dlrm_dist *d, gs__timeline *tl);
/* Sets the timeline the commits' writer records on; borrowed. */
void dlrm_ckpt_set_timeline(dlrm_ckpt *c, gs__timeline *tl);
/* Waits for a prefetched batch's exchange and drops it (dlrm_dist.c), so
 * that a commit's or load's collectives find nothing in flight. */
gs_status dlrm_dist_settle(gs_dlrm_dist *d);

#endif /* GS_DLRM_INTERNAL_H */
