/*
 * gradsync compression: top-k selection, gradient compressors and their
 * error-feedback memory.
 *
 * Pure computation below the communicator: nothing here calls MPI. A
 * compressor turns one tensor's gradient into a payload; the exchange layer
 * (the engine, a sparse collective, the Python binding) moves the payloads
 * between ranks in the way the compressor declares (gs_compress_exchange)
 * and hands them back for decompression. The cost model reads each
 * compressor's payload size and time model to decide where compression pays.
 *
 * One step of one tensor, for a compressor with one round:
 *
 *   gs_compress(st, grad, n, payload, cap, &bytes);   p = g + e; payload = C(p);
 *                                                      e = p - D(C(p))
 *   exchange:  GS_EXCHANGE_DENSE   all-reduce (sum) the payload as
 *                                  info.dense_dtype elements (bytes is the
 *                                  same on every rank);
 *              GS_EXCHANGE_SPARSE  all-gather(v) the (index, value) pairs;
 *              GS_EXCHANGE_OPAQUE  all-gather(v) each rank's bytes.
 *   gs_decompress_add(st, payload, bytes, out, n);    out += D(payload)
 *     DENSE: once, on the reduced payload; SPARSE/OPAQUE: once per rank's
 *     payload (in any order). out then holds the sum over ranks of the
 *     decompressed contributions (divide by the rank count for a mean).
 *
 * Multi-round compressors (info.rounds > 1, PowerSGD) are dense: after
 * gs_compress the exchange layer all-reduces the payload and calls
 * gs_compress_round(st, r, ...) for r = 1 .. rounds-1, each taking the
 * reduced payload of the previous round and producing the next one, with an
 * all-reduce in between; gs_decompress_add takes the last reduced payload.
 *
 * Sparse payload layout (GS_EXCHANGE_SPARSE): count = bytes / 8 pairs, the
 * count uint32_t indices first, then the count float values (native byte
 * order). Indices are distinct within one payload and < n. Zero pairs
 * (bytes = 0) is legal. gs_sparse_view splits a payload.
 *
 * Ownership: the caller owns every buffer passed in; gradsync keeps no
 * pointer to it after the call returns. A gs_compressor is immutable after
 * gs_compressor_create and may be shared by threads and states; a
 * gs_compress_state belongs to one tensor and is not thread-safe (one thread
 * at a time).
 */
#ifndef GRADSYNC_COMPRESS_H
#define GRADSYNC_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/core.h"
#include "gradsync/cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The invalid-argument status under the name the selection API's users know
 * it by (it is GS_ERR_INVALID_ARG). */
#ifndef GS_ERR_ARG
#define GS_ERR_ARG GS_ERR_INVALID_ARG
#endif

/* ---- Top-k selection ------------------------------------------------------- */

/* Writes to idx k distinct indices (in an unspecified order) of the entries
 * of x with the largest |x|.
 *   method "exact":  the exact top-k (ties broken arbitrarily but
 *                    deterministically): a histogram (radix) select over the
 *                    bits of |x|, about two passes over memory.
 *   method "mstopk": the MSTopK approximation (Shi et al., MLSys 2021): a
 *                    binary search for a threshold between mean(|x|) and
 *                    max(|x|) with count passes, then the entries above the
 *                    best lower threshold plus a seeded choice among those
 *                    just below it; always exactly k indices.
 * NULL method means "exact". k = 0 is legal (idx may then be NULL). Errors:
 * GS_ERR_INVALID_ARG (GS_ERR_ARG) for NULL x or idx, k > n, n >= 2^32, an
 * unknown method, or a NaN anywhere in x (the message names its index);
 * GS_ERR_NOMEM. +-inf are ordinary (largest) values. */
gs_status gs_topk_f32(const float *x, size_t n, size_t k, const char *method,
                      uint32_t *idx);

/* ---- Compressors ----------------------------------------------------------- */

/* How a compressor's payloads travel between ranks. */
typedef enum {
  GS_EXCHANGE_DENSE = 0, /* summable elementwise: all-reduce (sum) */
  GS_EXCHANGE_SPARSE,    /* (index, value) pairs: all-gather, sum duplicates */
  GS_EXCHANGE_OPAQUE     /* per-rank bytes: gathered, decoded one by one */
} gs_compress_exchange;

typedef struct gs_compressor gs_compressor;
typedef struct gs_compress_state gs_compress_state;

/* What the exchange layer and the cost model need to know of a compressor. */
typedef struct gs_compressor_info {
  const char *name;              /* "topk", "qsgd", ...: the spec's kind */
  gs_compress_exchange exchange;
  gs_dtype dense_dtype;          /* DENSE: element type of the all-reduce
                                    (GS_F32, GS_F16 or GS_BF16) */
  int rounds;                    /* all-reduce rounds per step: 1, PowerSGD 2 */
  int lossless;                  /* 1 for "none": no residual is kept */
  int fixed_size;                /* 1 where every rank's payload has the same
                                    size at a given step (fixed-k all-gather
                                    works); 0 for DGC and SIDCo (counts vary) */
  double param;                  /* density, QSGD levels, PowerSGD rank; 0 */
  /* Compression time model: memory traffic per gradient element (bytes
   * read + written, error feedback included) of gs_compress and of one
   * gs_decompress_add, for a cost model that times memory-bound passes. */
  double compress_bytes_per_elem;
  double decompress_bytes_per_elem;
  /* The error-feedback damping a state gets when its options leave
   * gs_compress_opts.ef_decay at 0: 1 (undamped), random-k's
   * GS_COMPRESS_RANDOMK_EF_DECAY. */
  float ef_decay;
  /* 1 where the kind applies momentum itself (DGC's momentum correction,
   * gs_compress_opts.momentum): the optimizer must then add none of its
   * own (gs_compress_spec_momentum says who applies which). */
  int own_momentum;
  /* 1 where the kind warms its density up (gs_compress_opts.warmup_steps:
   * topk, mstopk, dgc); the others ignore warmup_steps. */
  int warmup;
  /* 1 where the kind keeps its residual its own way (DGC, PowerSGD), which
   * gs_compress_opts.ef_decay does not damp. */
  int own_ef;
} gs_compressor_info;

/* Per-tensor options. Start from gs_compress_opts_default(). */
typedef struct gs_compress_opts {
  int error_feedback;   /* 1 (default): keep the residual e; 0: --no-ef */
  uint64_t seed;        /* shared by all ranks (random-k's indices, PowerSGD's
                           initial Q); default 0x9e3779b97f4a7c15 */
  int rank;             /* this rank: seeds per-rank stochastic rounding
                           (QSGD, TernGrad) so that ranks' noise is
                           independent; default 0 */
  int nranks;           /* ranks that exchange: DGC's local clipping uses
                           clip_norm / sqrt(nranks); default 1 */
  size_t rows;          /* PowerSGD: the tensor is viewed as rows x
                           ceil(n / rows), zero-padded; 0: ceil(sqrt(n)) */
  /* DGC (Lin et al., ICLR 2018). The compressor then applies momentum
   * itself (momentum correction), so the optimizer must not add its own. */
  float momentum;       /* default 0.9 */
  float clip_norm;      /* global-norm clipping threshold; 0 (default): off */
  uint64_t warmup_steps;/* exponential density warm-up from 0.25 to the
                           spec's density over this many steps; default 0 */
  /* Error feedback's damping gamma, 0 < gamma <= 1: each step the residual
   * becomes gamma * e + g before compression. 1 keeps every dropped value
   * until it is sent (the usual error feedback). Random-k sends a given
   * element once in 1/D steps on average, so its undamped residual arrives
   * as a burst of about 1/D stale gradients, and under momentum 0.9 the
   * cnn diverged in its first epoch; gamma < 1 bounds that burst to about
   * 1/(1 - gamma) steps' worth. 0 (default): the kind's own, 1 except
   * random-k's GS_COMPRESS_RANDOMK_EF_DECAY. Kinds with their own residual
   * (DGC, PowerSGD; gs_compressor_info.own_ef) cannot apply it: for them
   * gs_compress_state_create refuses a value other than 0 and 1, rather
   * than take a damping it would not apply. */
  float ef_decay;
} gs_compress_opts;

/* Random-k's default error-feedback damping (gs_compress_opts.ef_decay).
 * After 4 epochs of the cnn at 1% (bench/results/ef_decay.md): 10% (diverged)
 * at 1 and 0.99, 81.18% at 0.9, 85.42% at 0.5, 84.60% without feedback. */
#define GS_COMPRESS_RANDOMK_EF_DECAY 0.5f

gs_compress_opts gs_compress_opts_default(void);

/* Elements per scale of the scaled quantizers unless their spec says. */
#define GS_COMPRESS_BUCKET 512

/* Parses a spec and creates the compressor. Accepted specs:
 *   none | fp16 | bf16
 *   terngrad[:B] | efsignsgd[:B]
 *   topk:D | mstopk:D | gtopk:D | dgc:D | sidco:D | randomk:D   0 < D <= 1
 *   sidco:D:exp | sidco:D:gpareto | sidco:D:gamma   SIDCo's fitted
 *               distribution (exponential, the default; generalised Pareto;
 *               gamma)
 *   qsgd:S[:B]  levels 1 <= S <= 32767
 *   powersgd:R  rank 1 <= R <= 1024
 * B: the scaled quantizers (QSGD, TernGrad, EF-signSGD) keep one scale per
 * bucket of B consecutive elements (default GS_COMPRESS_BUCKET; 0: one for
 * the whole message, as when a message is one layer). A message fuses
 * layers whose gradients differ by orders of magnitude; one scale for all of
 * them quantizes the small ones away and, under error feedback, lets the
 * residual grow without bound.
 * Errors: GS_ERR_INVALID_ARG naming the spec and the accepted forms. */
gs_status gs_compressor_create(const char *spec, gs_compressor **out);
void gs_compressor_destroy(gs_compressor *c); /* NULL is a no-op */
gs_status gs_compressor_info_get(const gs_compressor *c, gs_compressor_info *out);
/* The spec it was created from, normalised ("topk:0.001"). */
const char *gs_compressor_spec(const gs_compressor *c);
/* A comma-separated list of the registered kinds, for help texts. */
const char *gs_compressor_kinds(void);

/* The payload bytes of one round (0 .. rounds-1) for an n-element tensor in
 * the steady state (after any warm-up): what the cost model sends. */
gs_status gs_compressor_payload_bytes(const gs_compressor *c, size_t n,
                                      int round, size_t *bytes);

/* Measured compression rate: times gs_compress + one gs_decompress_add on n
 * seeded normal values (single thread) and returns seconds per element, for
 * a cost model that prefers a measured rate to the traffic model. */
gs_status gs_compressor_measure(const gs_compressor *c, size_t n,
                                double *secs_per_elem);

/* The coding time at the sizes a plan sends, for the cost model
 * (gs_cost_coding, gradsync/cost.h): a rate measured on a message that fits
 * in the caches underprices one that does not. `sizes` (count >= 1, each
 * >= 1) are the tensors of the largest message the caller may send
 * compressed, in the order a message fuses them; N is their sum. Measured:
 * GS_COMPRESS_MEASURE_MIN elements (or N, if smaller), then 4 times more at
 * each step, and last min(N, GS_COMPRESS_MEASURE_MAX); at most
 * GS_COST_CODING_POINTS sizes. Each is the median of three runs of
 * gs_compress (and its rounds) and one gs_decompress_add on seeded normal
 * values, single thread, the message made of the first tensors of `sizes`
 * (the last one cut), told to the state as its segments
 * (gs_compress_set_segments) unless `merged` is 1, as the engine sends
 * them. The work is bounded: the sizes stop at GS_COMPRESS_MEASURE_MAX
 * elements, and before a size whose three runs would take more than
 * GS_COMPRESS_MEASURE_BUDGET_S seconds at the last size's rate (a slow
 * compressor on a large model measures fewer sizes). Times are made
 * non-decreasing in the size (a run slowed by another process can
 * otherwise make a larger message look cheaper). Rank-local; the caller
 * shares the result where ranks must agree. */
#define GS_COMPRESS_MEASURE_MIN ((size_t)1 << 18)
#define GS_COMPRESS_MEASURE_MAX ((size_t)1 << 22)
#define GS_COMPRESS_MEASURE_BUDGET_S 0.5
gs_status gs_compress_measure_coding(const gs_compressor *c, const size_t *sizes,
                                     size_t count, int merged, gs_cost_coding *out);

/* ---- Compression specs ------------------------------------------------------- */

/* A compression spec, as the engine (gs_engine_config.compress), `gradsync
 * train|plan|simulate --compress` and the Python binding take it:
 *   "none", "" or NULL  every group dense ("auto:none" too);
 *   SPEC                a compressor spec (gs_compressor_create): every f32
 *                       group compressed;
 *   "auto:SPEC"         the planner chooses per group: dense or SPEC.
 * gs_compress_spec_parse is the one parser of these forms: every caller
 * reads a spec through it, so that they cannot disagree. */
typedef struct gs_compress_spec {
  int off;                /* 1: every group dense */
  int automatic;          /* 1: "auto:SPEC" (0 when off) */
  const char *compressor; /* the compressor spec as given, without "auto:"
                             (points into the parsed string, valid as long
                             as it is); "" when off */
  const char *kind;       /* the kind's name ("topk", "dgc", ...; static);
                             "none" when off */
  char normalised[80];    /* "none", "topk:0.001" or "auto:topk:0.001" */
  /* The kind's defaults that a caller needs before any state exists
   * (gs_compressor_info): its error-feedback damping (1 when off) and
   * whether it applies momentum itself (DGC). */
  float ef_decay;
  int own_momentum;
  int warmup;             /* the kind warms its density up (0 when off) */
  int own_ef;             /* its residual is its own: no ef_decay (0 when off) */
} gs_compress_spec;

/* Parses a compression spec (the forms above), kind names in any case as
 * gs_compressor_create takes them ("NONE" is off too). Errors:
 * GS_ERR_INVALID_ARG naming the spec and the accepted forms: "auto:"
 * without a compressor spec, or the compressor's own error. */
gs_status gs_compress_spec_parse(const char *spec, gs_compress_spec *out);

/* Who applies momentum: the optimizer or the compressor. */
typedef struct gs_compress_momentum {
  float compressor; /* for gs_compress_opts.momentum */
  float optimizer;  /* the momentum the optimizer keeps */
  int moved;        /* 1: the optimizer's momentum moved into the compressor,
                       which the caller announces (it changes what the user
                       asked of the optimizer) */
} gs_compress_momentum;

/* The one momentum rule between an optimizer and a compressor that applies
 * momentum itself (own_momentum: DGC's momentum correction, Lin et al.,
 * ICLR 2018, Sec. 3.2, Eq. 6). Both applying it would apply it twice, so the
 * optimizer's momentum moves into the compressor:
 *   - spec off, or a kind without own momentum: nothing moves; compressor
 *     is `compressor` when given, else gs_compress_opts_default's;
 *   - own momentum, optimizer 0: the same;
 *   - own momentum, optimizer m > 0: compressor m, optimizer 0, moved 1.
 *     GS_ERR_INVALID_ARG instead when `compressor` was given too and
 *     differs from m (the message names both values), or when the
 *     optimizer's momentum is Nesterov's (nesterov != 0), which the
 *     compressor's plain momentum cannot take over, or when the spec is
 *     "auto:SPEC": the plan keeps some groups dense, which need the
 *     optimizer's momentum, so it can neither move nor stay (message naming
 *     "auto:" and the spec without it).
 * optimizer: the optimizer's momentum (0 <= m < 1 where it moves).
 * compressor: the compressor momentum the user gave, 0 <= c < 1, or
 * negative for none. GS_ERR_INVALID_ARG for values out of range. */
gs_status gs_compress_spec_momentum(const gs_compress_spec *z, double optimizer,
                                   int nesterov, double compressor,
                                   gs_compress_momentum *out);

/* ---- Per-tensor state -------------------------------------------------------- */

/* State of one n-element tensor: the error-feedback residual (zero at
 * first), DGC's momentum, PowerSGD's warm-started Q, the step counter. opts
 * may be NULL (defaults). The state keeps a reference to c, which must
 * outlive it. */
gs_status gs_compress_state_create(const gs_compressor *c, size_t n,
                                   const gs_compress_opts *opts,
                                   gs_compress_state **out);
void gs_compress_state_destroy(gs_compress_state *st); /* NULL is a no-op */

/* The most payload bytes this state can produce in round `round`, over its
 * whole life (DGC's warm-up densities included): size buffers with it. */
size_t gs_compress_capacity(const gs_compress_state *st, int round);

/* Round 0 of a step: p = g (+ e), payload = C(p), and with error feedback
 * e = p - D(C(p)). grad holds n floats (n as at creation); payload has cap
 * bytes (>= gs_compress_capacity(st, 0)); *bytes receives the size written.
 * A NaN or an infinity in grad is GS_ERR_INVALID_ARG naming the element
 * ("grad[i] is NaN", "grad[i] is infinite (+inf)") and leaves the state
 * unchanged; so is a finite g whose sum with the residual (or DGC's momentum
 * and accumulation) overflows float ("grad[i] + residual[i] ... overflows
 * float"). QSGD codes a bucket whose norm passes FLT_MAX against FLT_MAX
 * (its largest elements saturate; error feedback keeps the rest). Advances
 * the step counter (after the last round for multi-round compressors). */
gs_status gs_compress(gs_compress_state *st, const float *grad, size_t n,
                      void *payload, size_t cap, size_t *bytes);

/* Round r >= 1 of a multi-round compressor: in is the all-reduced payload of
 * round r-1 (in_bytes), out receives round r's payload. */
gs_status gs_compress_round(gs_compress_state *st, int round, const void *in,
                            size_t in_bytes, void *out, size_t cap,
                            size_t *bytes);

/* out[0..n) += D(payload): see the step above for how often to call it. */
gs_status gs_decompress_add(gs_compress_state *st, const void *payload,
                            size_t bytes, float *out, size_t n);

/* Adds values back into the residual: for a sparse exchange that keeps
 * fewer entries than were sent (gTop-k's global selection), the entries of
 * this rank's payload that did not survive return to its error feedback.
 * A no-op without error feedback. Indices must be < n. */
gs_status gs_compress_return(gs_compress_state *st, const uint32_t *idx,
                             const float *val, size_t count);

/* The learning rate the next payload's average will be applied with.
 * Error feedback keeps gradient that a step did not send and sends it
 * later, when the rate may differ: under a warm-up the memory of small-rate
 * steps would land with a large rate, under a decay the reverse. When lr
 * differs from the one set before, the memory (the residual, DGC's
 * accumulated velocity) is multiplied by old / new, so that it carries
 * rate-scaled gradient as EF-SGD's e += lr * g does (Karimireddy et al.,
 * ICML 2019, Algorithm 2). The first call only records lr; never calling
 * it keeps the memory as is. GS_ERR_INVALID_ARG unless lr is finite and
 * > 0 (a rate of 0 sends nothing worth scaling for: skip the call). */
gs_status gs_compress_set_lr(gs_compress_state *st, double lr);

/* Tells the state that its n elements are `count` tensors laid end to end
 * (sizes[i] elements each, summing to n): a message that fuses several
 * tensors. The kinds that select entries by magnitude ("topk", "mstopk")
 * then select within each tensor, k_i = max(1, floor(d * sizes[i])), as if
 * each tensor were compressed alone (layer-wise selection, as DGC's and
 * Horovod's users get), so fusing tensors into fewer messages (a scheduling
 * choice: MG-WFBP, buckets) saves start-up costs without changing what is
 * sent. Without the call, or with count <= 1, they select over the whole
 * message (merged selection, as in OMGS-SGD). The payload grows by at most
 * 8 bytes per tensor (each keeps at least one entry); gs_compress_capacity
 * follows. Other kinds ignore it. The sizes are copied; the call may come
 * at any time and holds from the next gs_compress. GS_ERR_INVALID_ARG if
 * the sizes do not sum to n or one is 0. */
gs_status gs_compress_set_segments(gs_compress_state *st, const size_t *sizes,
                                   size_t count);

/* Moves memory between two states of the same compressor when the tensors
 * they hold are regrouped (a replan that fuses or splits messages): elements
 * [src_off, src_off + n) of src's error-feedback residual and of the kind's
 * per-element memory (DGC's momentum) are copied to [dst_off, dst_off + n)
 * of dst, the residual rescaled to dst's learning rate when both have one
 * (gs_compress_set_lr). dst's step counter becomes at least src's, so a
 * density warm-up goes on where it was, and dst takes src's learning rate
 * when it has none. Whole-tensor memory that cannot be split (PowerSGD's Q)
 * is not carried: dst keeps its own. src is unchanged. GS_ERR_INVALID_ARG
 * for states of different compressors or error-feedback settings, or a
 * range outside either state. */
gs_status gs_compress_state_carry(gs_compress_state *dst, size_t dst_off,
                                  const gs_compress_state *src, size_t src_off,
                                  size_t n);

/* ---- A state's memory, read and written ------------------------------------
 *
 * For a caller that keeps a state's memory beyond the state's life: a
 * trainer's checkpoint, from which a resumed run continues as if it had not
 * stopped. The per-element memory of a range of elements (the
 * error-feedback residual, DGC's momentum), the step counter (a density
 * warm-up goes on from it; random-k's indices and the quantizers' rounding
 * streams follow it) and the learning rate the residual is scaled to
 * (gs_compress_set_lr). Whole-state memory that cannot be cut into ranges
 * (PowerSGD's warm-started Q) is not part of it. */

/* Kinds of per-element memory (bits of gs_compress_memory.have). */
enum {
  GS_COMPRESS_MEM_RESIDUAL = 1, /* the error-feedback residual: gradient not yet
                                   sent (DGC: its accumulated velocity v) */
  GS_COMPRESS_MEM_MOMENTUM = 2  /* DGC's momentum u (momentum correction) */
};

typedef struct gs_compress_memory {
  unsigned have;     /* GS_COMPRESS_MEM_* bits: the arrays below that hold
                        memory */
  float *residual;   /* n floats, the caller's; NULL: not asked for */
  float *momentum;   /* n floats, the caller's; NULL: not asked for */
  uint64_t step;     /* the state's step counter (gs_compress_step) */
  double lr;         /* the rate the residual is scaled to; 0: none set */
  uint32_t adapt;    /* a whole-state setting the kind adapts as it runs
                        (SIDCo's stage count, 1-5): the message's, for every
                        tensor of it; 0: none (other kinds, or memory saved
                        before it was kept: the state then keeps its own) */
} gs_compress_memory;

/* The kinds of per-element memory a state keeps (GS_COMPRESS_MEM_* bits): a
 * residual with error feedback (none for the lossless "none"), DGC's
 * momentum always. 0 for NULL. */
unsigned gs_compress_memory_kinds(const gs_compress_state *st);

/* Copies elements [off, off + n) of the state's memory into out's arrays:
 * out->residual and out->momentum are the caller's buffers of n floats, or
 * NULL for a kind not wanted. out->have receives the kinds copied (those
 * the state keeps and out has a buffer for), out->step and out->lr the
 * state's. GS_ERR_INVALID_ARG for a NULL state or out, or a range outside
 * the state. */
gs_status gs_compress_memory_get(const gs_compress_state *st, size_t off, size_t n,
                                 gs_compress_memory *out);

/* Writes in's memory into elements [off, off + n) of the state, as
 * gs_compress_state_carry moves it between states: each kind in in->have
 * that the state keeps replaces its range (the residual rescaled by
 * in->lr / the state's rate when both are set and differ, so that it is
 * scaled to the state's rate); kinds the state does not keep are ignored
 * (gs_compress_memory_kinds says which). The step counter becomes at least
 * in->step, and the state takes in->lr when it has no rate yet. The other
 * elements are untouched. GS_ERR_INVALID_ARG for a NULL state or in, a
 * kind in have without its array, a range outside the state, a negative or
 * non-finite lr, or a value that is not finite (the message names its
 * index; nothing is written then). */
gs_status gs_compress_memory_put(gs_compress_state *st, size_t off, size_t n,
                                 const gs_compress_memory *in);

/* The current residual (n floats, owned by the state; NULL without error
 * feedback), the step counter, and the density used at the current step
 * (DGC's warm-up; the spec's density for the other sparse kinds; 1 for
 * dense ones). */
const float *gs_compress_residual(const gs_compress_state *st);
uint64_t gs_compress_step(const gs_compress_state *st);
double gs_compress_density(const gs_compress_state *st);

/* Splits a sparse payload of `bytes` bytes into its pairs (pointers into the
 * payload). GS_ERR_INVALID_ARG if bytes is not a multiple of 8 or the
 * payload is not 4-byte aligned. */
gs_status gs_sparse_view(const void *payload, size_t bytes, const uint32_t **idx,
                         const float **val, size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_COMPRESS_H */
