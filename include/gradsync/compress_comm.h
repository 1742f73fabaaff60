/*
 * Compressed exchanges across a communicator: the call that averages a
 * buffer across ranks through a compressor and the collective its payload
 * travels through, with error feedback. This layer sits ABOVE the
 * communicator (it calls gradsync/comm.h) and below the engine; the
 * compressors themselves (gradsync/compress.h) stay below the communicator
 * and never call MPI. The engine, the trainer and the Python binding
 * (compression=) all use gs_compress_allreduce.
 *
 * One call, on every rank, for one buffer of n floats:
 *   1. compress: p = buf + e (error feedback), payload = C(p), e = p - D(C(p));
 *   2. exchange the payloads: an all-reduce (sum) for summable payloads
 *      (none, fp16, bf16, random-k; PowerSGD's two rounds with the
 *      orthogonalisation between them), an all-gather(v) of every rank's
 *      payload for sparse and opaque ones (top-k, DGC, QSGD, ...), or
 *      gTop-k's tree merge for fixed-k sparse ones (the entries this rank
 *      selected that the global set dropped return to its error feedback);
 *   3. buf = (sum over ranks of D(payload_r)) / p, the same bits on every
 *      rank: decoding happens in rank order from the same gathered bytes, or
 *      once from the same reduced payload.
 * `none` through it is bitwise the dense all-reduce (GS_AVG) of buf.
 *
 * Errors: a rank whose compression fails (NaN in its buffer) still takes
 * part in every collective, so no rank hangs; every rank then fails: after
 * an all-gather with a message naming the failing rank, after an
 * all-reduce (whose payload the failing rank fills with NaN) with a message
 * saying another rank failed. A summed payload that overflowed (half
 * precision above 65504, at any element) is an error on every rank too,
 * naming the element. buf is then unspecified; the state is as gs_compress
 * left it.
 */
#ifndef GRADSYNC_COMPRESS_COMM_H
#define GRADSYNC_COMPRESS_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/comm.h"
#include "gradsync/compress.h"
#include "gradsync/cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The exchange a compressor's payloads travel through by default:
 * GS_XCHG_GTOPK for gtopk, GS_XCHG_ALLREDUCE for dense one-round payloads,
 * GS_XCHG_POWERSGD for multi-round ones, GS_XCHG_ALLGATHER for the other
 * sparse and opaque ones. GS_XCHG_HITOPK is not carried here (it selects
 * on node sums, outside a compressor's error feedback). */
gs_xchg gs_compress_default_xchg(const gs_compressor_info *info);

/* GS_OK if the compressor's payloads can travel through `x` in this build
 * (GS_ERR_UNSUPPORTED otherwise, naming both). */
gs_status gs_compress_xchg_check(const gs_compressor_info *info, gs_xchg x);

/* Scratch buffers reused across calls (payloads, gathered payloads, sizes).
 * One per thread that calls gs_compress_allreduce; NULL there allocates per
 * call. */
typedef struct gs_xchg_ws gs_xchg_ws;
gs_status gs_xchg_ws_create(gs_xchg_ws **out);
void gs_xchg_ws_destroy(gs_xchg_ws *ws); /* NULL is a no-op */

/* What the calls sent, accumulated (the caller zeroes it). */
typedef struct gs_xchg_stats {
  uint64_t calls;
  uint64_t dense_bytes;    /* n * 4 per call */
  uint64_t payload_bytes;  /* this rank's payload bytes put on the wire,
                              summed over rounds */
  double compress_s;       /* gs_compress and its rounds */
  double comm_s;           /* the collectives */
  double decompress_s;     /* decoding and averaging */
} gs_xchg_stats;

/* Averages buf (n floats) across the ranks of comm through compressor c with
 * per-tensor state st (created for n elements), exchanging through x
 * (gs_compress_xchg_check). Collective: every rank calls it with the same
 * compressor spec, n and x, in the same order relative to the
 * communicator's other collectives. Blocking; it issues its collectives on
 * comm's progress thread. stats and ws may be NULL. */
gs_status gs_compress_allreduce(gs_comm *comm, const gs_compressor *c,
                                gs_compress_state *st, float *buf, size_t n,
                                gs_xchg x, gs_xchg_ws *ws, gs_xchg_stats *stats);

/* The cost model's figures for a compressor (gs_cost_compressed): the
 * payload ratio at n elements (n >= 1), and coding times from a rate
 * (secs_per_elem: compress + one decompress, the rate of the message's
 * size, gs_cost_coding_time / n of a gs_compress_measure_coding model)
 * split in proportion to the compressor's memory traffic model. */
gs_status gs_compress_cost_figures(const gs_compressor *c, size_t n,
                                   double secs_per_elem, gs_cost_compress *out);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_COMPRESS_COMM_H */
