/*
 * gradsync's cost model: the single home of the alpha-beta-gamma formulas of
 * collective algorithms (Thakur, Rabenseifner & Gropp, "Optimization of
 * Collective Communication Operations in MPICH", IJHPCA 2005) and of their
 * calibration from measurements. The communicator's algorithm choice, the
 * merge planner and the simulator all call this module; no other file may
 * restate these formulas.
 *
 * Units: seconds, bytes, seconds per byte.
 */
#ifndef GRADSYNC_COST_H
#define GRADSYNC_COST_H

#include <stddef.h>

#include "gradsync/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GS_COST_MAX_POINTS 12
#define GS_COST_MAX_CALIB 4

typedef struct gs_cost_params {
  double alpha;        /* latency of one message between nodes (s) */
  double beta;         /* transfer time per byte between nodes (s/B) */
  double alpha_local;  /* latency inside a node (s) */
  double beta_local;   /* transfer time per byte inside a node (s/B) */
  double gamma;        /* reduction time per byte (s/B) */
  /* Per-algorithm alpha and beta fitted from measurements of that algorithm
   * (gs_cost_fit_algo); where beta is 0 the shared alpha and beta apply.
   * The formulas stay the textbook ones: the fit folds what an algorithm's
   * implementation achieves on a given network into its two constants. */
  struct {
    double alpha, beta;
    /* The measurements the fit came from, by increasing size. Inside their
     * range gs_cost_allreduce interpolates them: on links whose time is not
     * affine in the size (a token bucket lets short messages through at a
     * burst rate, TCP windows open), they predict better than any single
     * alpha and beta. */
    int npoints;
    double bytes[GS_COST_MAX_POINTS], secs[GS_COST_MAX_POINTS];
  } fit[GS_ALGO_COUNT];
  /* What one message of the engine costs beyond its collective's steps:
   * its queue, its progress thread and the plan's packing (s;
   * gs_cost_message). */
  double alpha_msg;
  /* A preset calibrated on clusters of several sizes (gs_cost_preset of the
   * emulated link; docs/NETWORK.md): per number of nodes, each all-reduce
   * algorithm's alpha and beta (0 where not measured; the two-level
   * algorithm and the ring's reduce-scatter and all-gather take the ring's)
   * and alpha_msg. A cluster of another size takes them interpolated
   * linearly in the number of nodes, or the nearest calibrated size's
   * outside them. ncalib = 0: the shared constants above apply. */
  int ncalib;
  struct {
    int nodes;
    double alpha_msg;
    double alpha[GS_ALGO_COUNT], beta[GS_ALGO_COUNT];
  } calib[GS_COST_MAX_CALIB];
} gs_cost_params;

/* The shape of the communicator a cost is predicted for. */
typedef struct gs_cost_topo {
  int ranks;          /* p */
  int nodes;          /* number of nodes; ranks/nodes per node */
} gs_cost_topo;

/* The link rate (bit/s) a network name stands for: a rate as tc writes it
 * ("100mbit", "1gbit", "10gbit", "25gbit", "100gbit", any rate from 1kbit
 * to 1tbit) or an alias ("1GbE", "10GbE", "25GbE", "100GbIB"). The one
 * vocabulary of `gradsync run --net`, `plan --net` and `simulate --net`; an
 * unknown name is GS_ERR_INVALID_ARG with the list of names. */
gs_status gs_net_rate(const char *name, double *bps);

/* Network presets: any name gs_net_rate takes, or "shm" (ranks on one
 * host). 100mbit and 1gbit (and rates between them and 10gbit) carry the
 * emulated link's calibration (ncalib > 0: per cluster size, each
 * algorithm's alpha and beta and the engine's cost per message, measured by
 * bench/net_calibrate.sh); faster rates the fabric's published latency and
 * beta = 8 / (0.85 rate) (docs/NETWORK.md). Sets every field of *out (no
 * per-algorithm fits, no measured points). */
gs_status gs_cost_preset(const char *name, gs_cost_params *out);

/* One line, into buf (n bytes, truncated), of what the preset `name`
 * assumes: the rate, the latency of a message step, the share of the line
 * rate bytes move at, the reduction's speed, and where the constants come
 * from. GS_ERR_INVALID_ARG for an unknown name, as gs_cost_preset. */
gs_status gs_net_describe(const char *name, char *buf, size_t n);

/* Predicted time of one collective of `bytes` bytes in total (the full vector
 * for allreduce, reduce-scatter input and allgather output; the per-peer
 * block times p for all-to-all). For an allreduce algorithm with measured
 * points (gs_cost_fit_algo) and a size inside their range, the measurements
 * are interpolated linearly; elsewhere the formula is evaluated with the
 * algorithm's fitted alpha and beta, or the shared ones. GS_ALGO_MPI and
 * GS_ALGO_AUTO are predicted as the best of gradsync's own algorithms.
 * Returns a negative value for an algorithm that does not implement the
 * collective. */
double gs_cost_allreduce(const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                         double bytes);
double gs_cost_reduce_scatter(const gs_cost_params *c, gs_cost_topo t,
                              gs_algo algo, double bytes);
double gs_cost_allgather(const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                         double bytes);
double gs_cost_bcast(const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                     double bytes);
double gs_cost_alltoall(const gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                        double bytes);

/* The allreduce algorithm to run: the one with the smallest predicted time,
 * ties to the first in ring, rabenseifner, rd, hier, except that the ring
 * stays unless that one is faster by more than 10% (src/cost/cost.c,
 * RING_MARGIN: the ring degrades least beside compute, and the others'
 * times differ from its by noise where they move the same bytes); *time_s
 * (may be NULL) receives its time. */
gs_algo gs_cost_best_allreduce(const gs_cost_params *c, gs_cost_topo t,
                               double bytes, double *time_s);

/* What one message of gradsync's engine costs beyond its collective's steps
 * (its queue, the progress thread's wake-ups, packing): a calibrated
 * preset's alpha_msg for the cluster's size, else c->alpha_msg; 0 on one
 * rank. The collectives' formulas above leave it out (the communicator's
 * algorithm choice and other users of a single collective do not pay it);
 * the engine's plan costs (gs_plan_cost_from_net) add it to every message. */
double gs_cost_message(const gs_cost_params *c, gs_cost_topo t);

/* The all-reduce cost of one message of M bytes as T(M) = a + b*M (the form
 * MG-WFBP plans with, TPDS 2021 Eq. 10), for a given algorithm (GS_ALGO_AUTO:
 * the best one at large sizes). */
void gs_cost_allreduce_linear(const gs_cost_params *c, gs_cost_topo t,
                              gs_algo algo, double *a, double *b);

/* Least-squares fit of y = a + b*x over n >= 2 points (x not all equal). */
gs_status gs_cost_fit_linear(const double *x, const double *y, size_t n,
                             double *a, double *b);

/* Fits alpha and beta (inter-node) of `c` to measured allreduce times of an
 * algorithm, keeping gamma and the local terms: every formula is linear in
 * alpha and beta, so this is a least-squares fit on two unknowns. Negative
 * fits are clamped to 0. */
gs_status gs_cost_calibrate_allreduce(gs_cost_params *c, gs_cost_topo t,
                                      gs_algo algo, const double *bytes,
                                      const double *secs, size_t n);

/* Fits alpha and beta of one allreduce algorithm (stored in c->fit[algo])
 * to its measured times at 3 <= n <= GS_COST_MAX_POINTS sizes: beta by least
 * squares over the larger half of the sizes, alpha from the smallest size;
 * the points are kept for interpolation. */
gs_status gs_cost_fit_algo(gs_cost_params *c, gs_cost_topo t, gs_algo algo,
                           const double *bytes, const double *secs, size_t n);

/* ---- Measured cost curves ------------------------------------------------ */

#define GS_COST_CURVE_POINTS 40

/* The measured time of one kind of collective as a function of its size,
 * for planners that must rank messages of many sizes: one point per
 * power-of-two size class, non-decreasing in both coordinates, plus a line
 * a + b*M fitted to them (gs_cost_curve_fit). On links whose time is not
 * affine in the size (a token bucket passes short messages at a burst rate,
 * TCP windows open), the points predict what no single a and b can. */
typedef struct gs_cost_curve {
  double a, b;   /* the affine fit, a >= 0, b > 0 once fitted */
  int npoints;   /* 0: the curve is the line a + b*M */
  double bytes[GS_COST_CURVE_POINTS]; /* increasing */
  double secs[GS_COST_CURVE_POINTS];  /* non-decreasing */
} gs_cost_curve;

/* An affine curve a + b*M without points. a and b must be finite, >= 0. */
gs_status gs_cost_curve_affine(double a, double b, gs_cost_curve *out);

/* Fits a curve to n raw samples (bytes[i] >= 1, secs[i] > 0; others are
 * ignored): the samples are grouped by power-of-two size class, each class
 * gives one point (its mean size, its median time), the points are made
 * non-decreasing by pooling adjacent violators (isotonic regression); b is
 * the least-squares slope over the larger half of the points and a the
 * smallest point's time less b times its size (clamped at 0), so that a is
 * what the smallest messages cost. Fails with
 * GS_ERR_INVALID_ARG when fewer than two classes have samples or the fitted
 * slope is not positive (the sizes did not separate from the noise); *out is
 * then left unchanged. */
gs_status gs_cost_curve_fit(const double *bytes, const double *secs, size_t n,
                            gs_cost_curve *out);

/* Fits the per-message cost a + b*M to measured totals rather than to single
 * messages: observation i is secs[i] seconds spent on msgs[i] messages that
 * carried bytes[i] bytes in all (one iteration of a plan, as `gradsync
 * replay --json` reports comm_s, ngroups and grad_bytes), so
 * secs[i] ~ a*msgs[i] + b*bytes[i]. a and b minimise the sum of squared
 * relative errors; when that a is negative (the latency hidden by the noise)
 * a = 0 and b alone is fitted. Observations need msgs >= 0, bytes >= 0,
 * secs > 0, all finite, and some bytes[i] > 0; otherwise GS_ERR_INVALID_ARG
 * naming the first bad one. */
gs_status gs_cost_fit_totals(const double *msgs, const double *bytes,
                             const double *secs, size_t n, double *a, double *b);

/* The curve's time for `bytes`: between the points, linear interpolation;
 * beyond them, the line of slope b through the nearest point (never below
 * 0); without points, a + b*bytes. Non-decreasing in `bytes`. */
double gs_cost_curve_eval(const gs_cost_curve *c, double bytes);

/* The same value, bit for bit, found by walking from segment *hint (any
 * int; updated): O(1) when successive calls move through nearby sizes, as
 * in the planner's dynamic program. */
double gs_cost_curve_eval_hint(const gs_cost_curve *c, double bytes, int *hint);

/* ---- Sparse collectives -------------------------------------------------
 * The exchanges of sparsified gradients (src/comm/sparse_*.c). A pair is an
 * index and a value, `pair_bytes` bytes (8 for f32). Every sparse
 * collective begins with a small all-gather of each rank's sizes (lg p
 * alpha). The flat exchanges (all-gather, gTop-k) are priced on the links
 * between nodes, as the flat dense algorithms are. The dense alternative is gs_cost_allreduce of the n elements; src/comm compares the
 * two (gs_comm_choose_sparse).
 *
 * Sparse all-gather of `total_pairs` pairs in all (every rank's together)
 * over the ring, then a scatter-add of all of them:
 *   lg p a + (p-1) a + (p-1)/p P s b + P s g.
 * With k pairs on each of p ranks it crosses over the ring all-reduce of n
 * elements (2(p-1)/p n e b) where k p s = 2 n e: for f32 values and u32
 * indices, where density x ranks = 1 (earlier against the hierarchical
 * all-reduce on nodes of several ranks). */
double gs_cost_sparse_allgather(const gs_cost_params *c, gs_cost_topo t,
                                double total_pairs, double pair_bytes);

/* gTop-k's merge by recursive doubling over q = 2^floor(lg p) ranks, with the
 * p - q others folded in before and sent the result after; each step sends k
 * pairs and merges 2k (Shi et al., ICDCS 2019, Sec. IV):
 *   lg p a + lg q (a + k s b + 2 k s g) + [q < p] 2 (a + k s b). */
double gs_cost_gtopk(const gs_cost_params *c, gs_cost_topo t, double k,
                     double pair_bytes);

/* HiTopKComm (Shi et al., MLSys 2021) of n elements of e bytes, k pairs
 * selected over the whole tensor (k/L per shard), on N nodes of L ranks: a
 * node-local ring reduce-scatter of the dense tensor, a ring all-gather of
 * k/L pairs from each of the N nodes between the ranks of the same local
 * rank (the L rings share each node's link, so L of them count against
 * one link), a node-local all-gather of the N k pairs, and their scatter-add:
 *   lg p a + (L-1) a_l + (L-1)/L n e (b_l + g)
 *          + (N-1) a + (N-1) k s b + (L-1) a_l + (L-1)/L N k s b_l + N k s g. */
double gs_cost_hitopk(const gs_cost_params *c, gs_cost_topo t, double n,
                      double elem_bytes, double k, double pair_bytes);

/* Saves or loads parameters (with the topology they were measured on) as
 * JSON. Loading a file measured on another topology fails with
 * GS_ERR_MISMATCH. */
gs_status gs_cost_save(const char *path, const gs_cost_params *c, gs_cost_topo t);
gs_status gs_cost_load(const char *path, gs_cost_topo t, gs_cost_params *out);

/* ---- Compressed exchanges --------------------------------------------------
 *
 * A message sent compressed costs the compression of the dense message, the
 * collective that carries the payload, and the decoding of what arrives.
 * The compressors say how large their payload is and how fast they code
 * (gs_cost_compress, filled by the compression layer); the formulas of the
 * collectives stay the ones above. */

/* How a compressed payload travels. */
typedef enum gs_xchg {
  GS_XCHG_ALLREDUCE = 0, /* summable payload (fp16, bf16, random-k values,
                            none): one all-reduce of the payload */
  GS_XCHG_ALLGATHER,     /* every rank's payload gathered by every rank,
                            then decoded and summed (top-k, quantisers) */
  GS_XCHG_POWERSGD,      /* two all-reduces of low-rank factors (P, then Q)
                            with an orthogonalisation between them */
  GS_XCHG_GTOPK,         /* gTop-k's tree merge (sparse payloads) */
  GS_XCHG_HITOPK,        /* HiTopKComm: intra-node reduce-scatter, top-k of
                            each shard, inter-node sparse all-gather */
  GS_XCHG_COUNT
} gs_xchg;

/* The exchange's name ("allreduce", "allgather", "powersgd", "gtopk",
 * "hitopk"), or "unknown". */
const char *gs_xchg_name(gs_xchg x);

/* What a compressor tells the cost model about one message of M dense
 * bytes: each rank sends ratio * M + fixed payload bytes; compressing
 * (error feedback included) takes encode_s_per_byte * M seconds, and
 * decoding takes decode_s_per_byte seconds per payload byte decoded (every
 * rank's payload after an all-gather, the one summed payload otherwise)
 * plus M * decode_s_per_byte_dense for writing the dense result. */
typedef struct gs_cost_compress {
  double ratio;                  /* payload bytes per dense byte, (0, 64]
                                    (above 1 a payload is larger than
                                    the dense message: never chosen) */
  double fixed;                  /* payload bytes per message, >= 0 */
  double encode_s_per_byte;      /* per dense byte, >= 0 */
  double decode_s_per_byte;      /* per payload byte decoded, >= 0 */
  double decode_s_per_byte_dense;/* per dense byte written, >= 0 */
} gs_cost_compress;

/* Checks that every field of *z is finite and in range. */
gs_status gs_cost_compress_check(const gs_cost_compress *z);

/* Predicted time of one message of `bytes` dense bytes sent compressed
 * through exchange x: encode + collective of the payload + decode. An
 * all-gather is preceded by one of every rank's status and size (16 bytes);
 * gtopk and hitopk take the payload as (index, value) pairs of 8 bytes
 * (gs_cost_gtopk, gs_cost_hitopk of an f32 tensor). Returns a negative value
 * for invalid arguments. On one rank it is the coding time alone. Affine in
 * `bytes`. */
double gs_cost_compressed(const gs_cost_params *c, gs_cost_topo t, gs_xchg x,
                          const gs_cost_compress *z, double bytes);

/* ---- Coding time of a compressed message ----------------------------------
 *
 * What compressing a message of n elements (error feedback included) and
 * decoding one payload takes on one core. The time per element depends on
 * the size: a message whose arrays fit in the caches codes faster than one
 * that streams from memory, so a rate measured on 2^18 elements priced
 * GoogleNet's fused 6.6 M-element message (top-k 1%, 2 ranks) at about a
 * third of its measured time. The coding time is therefore known at a few
 * measured sizes (gs_compress_measure_coding, gradsync/compress_comm.h, at
 * the sizes the plan sends), and gs_cost_coding_time is the one formula
 * between them:
 *   n <= elems[0]:           secs[0] * n / elems[0]   (the smallest
 *                            measurement's rate, down to 0)
 *   elems[i] <= n <= elems[i+1]:  linear between the two measurements
 *   n >= elems[last]:        secs[last] + r * (n - elems[last]), r the
 *                            larger of the last measurement's rate and the
 *                            slope between the last two (beyond the caches
 *                            every further element costs at least as much
 *                            as the average one).
 * Piecewise linear and non-decreasing in n, so that a compressed
 * exchange's price stays a cost curve the planner takes (gs_cost_curve).
 * One point is a single rate at every size: gs_cost_coding_rate (a rate
 * given for repeatable plans, `gradsync plan --coding-rate`). */
#define GS_COST_CODING_POINTS 4

typedef struct gs_cost_coding {
  int npoints;                         /* 1 .. GS_COST_CODING_POINTS */
  double elems[GS_COST_CODING_POINTS]; /* increasing, >= 1 */
  double secs[GS_COST_CODING_POINTS];  /* finite, >= 0, non-decreasing */
} gs_cost_coding;

/* A single rate: secs_per_elem * n at every size (finite, >= 0). */
gs_status gs_cost_coding_rate(double secs_per_elem, gs_cost_coding *out);

/* Checks the points: count, sizes increasing from 1, times finite, >= 0
 * and non-decreasing. GS_ERR_INVALID_ARG naming the first bad point. */
gs_status gs_cost_coding_check(const gs_cost_coding *m);

/* The coding time of a message of n >= 0 elements (the formula above);
 * a negative value for an invalid model or n. */
double gs_cost_coding_time(const gs_cost_coding *m, double n);

/* ---- Embedding shards (DLRM; docs/DLRM.md) ------------------------------
 * The time per training step that one shard of an embedding table costs the
 * rank holding it: its lookups (the forward and the fused backward, priced
 * by the machine's measured gs_cost_lookup) and its part of the exchange,
 * priced by the collective formulas above. The sharding planner
 * (gradsync/embed.h) calls this and no other formula. */
typedef enum {
  GS_SHARD_TW = 0, /* table-wise: the whole table on one rank */
  GS_SHARD_RW,     /* row-wise: rows split over every rank; pooled partial
                      sums reduce-scattered forward, all-gathered backward */
  GS_SHARD_CW,     /* column-wise: column blocks placed as tables */
  GS_SHARD_TWRW,   /* table-row-wise: rows split over one node's ranks */
  GS_SHARD_DP,     /* data-parallel: replicated, its gradient all-reduced */
  GS_SHARD_KIND_COUNT
} gs_shard_kind;

/* One lookup (forward + fused backward) costs alpha + beta * row bytes when
 * its row is not in the cache, alpha_hit + beta_hit * row bytes when it is
 * (never more than the former). Which rows are in the cache: Che's
 * approximation of an LRU cache of cache_bytes (gs_cost_cache_time), with
 * the ids' Zipf law. cache_bytes 0 turns the cache off: every lookup at the
 * first price, as for tables far beyond the caches. Each distinct row a
 * step touches costs alpha_row + beta_row * row bytes more: the fused
 * backward sums a row's gradients and steps it once, however many lookups
 * it had (gs_cost_shard_rows counts them; 0 and 0: the update is in the
 * lookup's price). A bag a shard walks
 * costs gamma, up to gamma_mixed as the share f of its bags holding any of
 * its ids nears a half: gamma + (gamma_mixed - gamma) 4 f (1 - f); with
 * the cache, gamma_hit for the share of the bags whose line of the pooled
 * matrix stayed in it from the step before. */
typedef struct gs_cost_lookup {
  double alpha; /* s per lookup */
  double beta;  /* s per byte of the row (dim * 4) */
  double gamma; /* s per bag a shard walks, whether any of its ids land there
                 * or not (the pooled vector written, its offsets read) */
  double alpha_hit, beta_hit; /* the same, the row in the cache */
  double cache_bytes;         /* the cache a rank has to itself (its core's
                               * and its share of the shared ones); 0: off */
  double gamma_mixed;         /* s per bag when half the bags a shard walks
                               * hold none of its ids, at random (a row
                               * block's: the branches miss); 0: gamma */
  double alpha_row, beta_row; /* s per distinct row a step touches, and per
                               * byte of it: the fused update's own work */
  double gamma_hit;           /* s per bag whose line of the pooled matrix
                               * is in the cache (gamma: it is not); a
                               * line asked for once a step is with
                               * probability 1 - e^-cache_t. 0: gamma */
} gs_cost_lookup;

/* Checks that every field of *lk is finite and >= 0, each time below
 * GS_COST_LOOKUP_MAX_S and the cache's bytes at most
 * GS_COST_LOOKUP_MAX_CACHE: the rule for a cost that is given rather than
 * measured (gradsync shard's and train's --lookup, gs_dlrm_train_config's
 * lookup). GS_ERR_INVALID_ARG names the first field that is not. */
#define GS_COST_LOOKUP_MAX_S 1e-3
#define GS_COST_LOOKUP_MAX_CACHE 1125899906842624.0 /* 2^50 */
gs_status gs_cost_lookup_check(const gs_cost_lookup *lk);

typedef struct gs_cost_shard_in {
  gs_shard_kind kind;
  double batch;           /* global batch: samples per step */
  double pooling;         /* mean ids per sample in this table */
  double rows;            /* the shard's rows */
  double table_rows;      /* the table's rows (ids spread uniformly over them) */
  double dim;             /* the shard's columns */
  double wire_elem_bytes; /* bytes of a pooled element on the wire: 4 (fp32), 2 */
  int group;              /* twrw: the ranks sharing the table's rows (a node's) */
  double table_dim;       /* the table's columns (0: the shard's) */
  int row_sums;           /* 1: row-wise Adagrad, so a block of fewer columns
                           * than the table sends its touched rows' sums of
                           * squares to the row's other blocks every step */
  double zipf;            /* the ids' Zipf exponent over the table's rows (0:
                           * uniform); hot rows spread over the row blocks */
  double cache_t;         /* Che's characteristic time of the rank's cache,
                           * in steps (gs_cost_cache_time): a row asked for
                           * r times a step is in the cache with probability
                           * 1 - e^(-r cache_t). 0: never (every lookup
                           * misses); INFINITY: always */
} gs_cost_shard_in;

typedef struct gs_cost_shard_out {
  double lookup_s;   /* lookups, forward and backward */
  double wire_s;     /* this rank's share of the exchange's time */
  double total_s;
  double wire_bytes; /* bytes this rank sends for the shard per step */
} gs_cost_shard_out;

/* A shard's cost per step on the rank holding it. t: the job's ranks and
 * nodes. Unknown kinds give a negative total. */
void gs_cost_shard(const gs_cost_params *c, gs_cost_topo t, const gs_cost_lookup *lk,
                   const gs_cost_shard_in *in, gs_cost_shard_out *out);

/* Che's characteristic time (steps) of an LRU cache of cache_bytes shared
 * by the n shards of in (one rank's) and what else a step touches once:
 * each shard's pooled vectors, their gradients and the exchange's buffers
 * (16 bytes a pooled element of every bag it walks), and other_bytes (the
 * MLPs' weights and activations): the T at which the expected footprint,
 * those bytes times min(T, 1) plus the sum
 * over rows of their bytes times 1 - e^(-r T) (r: the row's lookups a step
 * under the table's Zipf law), fills the cache. INFINITY when everything
 * fits; 0 when cache_bytes <= 0. in[i].cache_t is ignored. */
double gs_cost_cache_time(gs_cost_topo t, const gs_cost_shard_in *in, int n,
                          double cache_bytes, double other_bytes);

/* The share of a shard's lookups whose row is in a cache of characteristic
 * time in->cache_t (0 to 1). */
double gs_cost_shard_hits(gs_cost_topo t, const gs_cost_shard_in *in);

/* The expected distinct rows of a shard that a step's lookups touch: a row
 * asked for r times a step (under the table's Zipf law, in->zipf) is
 * touched with probability 1 - e^-r; for uniform ids R (1 - e^(-I/R)) of a
 * shard of R rows serving I lookups. At most the lookups and the rows. */
double gs_cost_shard_rows(gs_cost_topo t, const gs_cost_shard_in *in);

/* How a replicated (dp) table's gradient is summed across ranks: 1 when its
 * dense gradient (rows x dim floats) all-reduced moves fewer bytes than
 * all-gathering the batch's bags and pooled gradients (batch samples, each
 * dim floats and pooling ids and a length); 0 for the all-gather. The ring
 * all-reduce moves twice its buffer, the all-gather once. */
int gs_cost_dp_dense(double rows, double dim, double batch, double pooling);

/* ---- Parameter servers (gradsync/ps.h; docs/SYNC.md) ----------------------
 * One synchronous (BSP) round of W workers and S servers on nodes with a
 * full-duplex link each, of the inter-node alpha and beta: every worker
 * pushes its gradient of M bytes, cut in S equal shards, and pulls the M
 * bytes of parameters back; each server receives W M / S bytes, sums them
 * and sends W M / S back. The rounds are pipelined by chunk
 * (src/ps/server.c), so pushes and pulls share the time on opposite
 * directions of a link and the busiest direction of the busiest link sets
 * the pace (the count of BytePS, Jiang et al., OSDI 2020), plus the
 * pipeline's drain: a chunk is answered only once it has arrived whole, so
 * the answers run a chunk behind the pushes, and when the last push ends
 * the answer of the chunk before it still holds the link: K = Q bytes of a
 * shard cut into n >= 2 chunks of at most Q bytes (however short its last
 * one), the whole shard (K = M / S) when it is one chunk.
 * A node of w workers and s servers sends (and receives) over its link
 *   L = w M (S - s) / S + s (M / S)(W - w)
 * bytes a round (its workers' pushes to the other nodes' servers, its
 * servers' answers to the other nodes' workers), and l = w M s / S + s (M /
 * S) w between its own ranks, through memory (beta_local). Over the nodes:
 *   worker_s = a + max L b              (over the nodes with workers)
 *   server_s = a + max L b + (W M / S) g (over the nodes with servers: the
 *                                        link and a server's sum)
 *   drain_s  = max over nodes of max(s (W - w), w (S - s)) K b
 *                                       (a node's servers answer a chunk
 *                                        to the other nodes' workers; its
 *                                        workers receive a chunk of each
 *                                        other node's server)
 *   round_s  = a + max over nodes of max(L b, l b_local) + drain_s
 *              + (W M / S) g + a
 * the last alpha being the answer's. Each rank on a node of its own (w = 1
 * or s = 1) gives L = M for a worker and W M / S for a server: round =
 * 2a + max(M, W M / S) b + max(W, S) K b + (W M / S) g. Unchunked (Q = 0,
 * or Q >= M / S) the drain is the whole answer: a push, then a pull. The
 * server side stops being the bottleneck once S >= W; with fewer servers
 * their aggregate bandwidth S / b stands against the workers' push of W M
 * bytes per round. Workers that share a node share its link: 4 a node
 * push 4 M through it. */

/* The chunk of gradsync's parameter servers when gs_ps_config.chunk_bytes
 * is 0 (gradsync/ps.h): what the planner prices their rounds with. */
#define GS_PS_CHUNK_BYTES ((size_t)1 << 18)

/* `count` nodes, each with `workers` workers and `servers` servers. */
typedef struct gs_cost_ps_nodes {
  int count, workers, servers;
} gs_cost_ps_nodes;

/* The nodes of a job of `workers` W and `servers` S ranks. With
 * `servers_own_nodes` 1: `per_node` workers a node (W a multiple of it) and
 * each server on a node of its own (the planner's layout). With 0: the
 * W + S ranks `per_node` a node in rank order, the servers last (how
 * gradsync launches a --ps job: its last S ranks), so that one node may
 * hold both. Writes at most 4 kinds to kinds[] and their number to *n.
 * GS_ERR_INVALID_ARG for W < 1, S < 1, per_node < 1, or W not a multiple
 * of per_node with servers_own_nodes. */
gs_status gs_cost_ps_layout(int workers, int servers, int per_node, int servers_own_nodes,
                            gs_cost_ps_nodes kinds[4], int *n);

typedef struct gs_cost_ps_out {
  double worker_s; /* a worker node's push (or pull) of its workers' bytes */
  double server_s; /* a server node's receipt (or answer) of its bytes,
                      with a server's sum */
  double drain_s;  /* a chunk's answers after the last push (the
                      pipeline's drain) */
  double round_s;  /* one BSP round: push, sum, pull */
} gs_cost_ps_out;

/* The times above for the nodes `kinds` (n kinds, at least one worker and
 * one server among them) pushing `bytes` M >= 0 each in chunks of at most
 * `chunk_bytes` Q >= 0 (0: each shard whole). GS_ERR_INVALID_ARG for other
 * arguments. */
gs_status gs_cost_ps_nodes_round(const gs_cost_params *c, const gs_cost_ps_nodes *kinds, int n,
                                 double bytes, double chunk_bytes, gs_cost_ps_out *out);

/* The same with each of the W workers and S servers on a node of its own. */
gs_status gs_cost_ps(const gs_cost_params *c, int workers, int servers, double bytes,
                     double chunk_bytes, gs_cost_ps_out *out);

/* W asynchronous steps, one a worker (ASP; SSP with a bound >= 1 among
 * workers of one speed, where the bound does not bind), of workers that
 * each compute for C seconds, then push M bytes and pull them back through
 * S servers: a push is applied chunk by chunk on arrival and answered at
 * once, so one worker's exchange overlaps the others' compute instead of
 * waiting for the slowest as a BSP round does (C + round_s). A worker's
 * cycle, on the node whose workers reach the most servers elsewhere (s' of
 * the S on its own node), and each node's busy time per W steps:
 *   cycle_s = C + a + max(M' b, 2 (M - M') b_local) + (S - s') K b
 *             + (M / S) g + a
 *             (M' = M (S - s') / S: its compute, push, a chunk's answers
 *              from the other nodes' servers after it, sum, pull; its
 *              shards on its own node through memory)
 *   busy_s  = max over nodes of L b + (s > 0 ? W (M / S) g : 0)
 *             (its link's bytes of W pushes and their answers, and its
 *              servers' sums; their latencies overlap the other transfers)
 *   steps_s = max(cycle_s, busy_s)
 * Each term is at most C + round_s, so steps_s never exceeds BSP's; with
 * one worker it is BSP's. `compute_s` C >= 0; other arguments as
 * gs_cost_ps_nodes_round. */
gs_status gs_cost_ps_nodes_async(const gs_cost_params *c, const gs_cost_ps_nodes *kinds,
                                 int n, double bytes, double chunk_bytes, double compute_s,
                                 double *steps_s);

/* The same with each rank on a node of its own. */
gs_status gs_cost_ps_async(const gs_cost_params *c, int workers, int servers, double bytes,
                           double chunk_bytes, double compute_s, double *steps_s);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_COST_H */
