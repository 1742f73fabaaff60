/*
 * gradsync core: status codes, last-error messages, data types and local
 * reductions, logging, allocation and the monotonic clock.
 *
 * Every gradsync function that can fail returns a gs_status. On failure it
 * also records a message for the calling thread, read with gs_last_error(),
 * that names the operation, the rank and the sizes involved.
 */
#ifndef GRADSYNC_CORE_H
#define GRADSYNC_CORE_H

#include <stddef.h>
#include <stdint.h>

/* Marks a function that never returns, in whichever language includes the
 * header: C++ has no _Noreturn (until 2026-12-07 the headers used it and
 * failed to compile as C++), C23 deprecates it in favour of [[noreturn]],
 * and C before C11 has neither. */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define GS_NORETURN [[noreturn]]
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 202311L
#define GS_NORETURN [[noreturn]]
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define GS_NORETURN _Noreturn
#elif defined(__GNUC__)
#define GS_NORETURN __attribute__((noreturn))
#else
#define GS_NORETURN
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GS_OK = 0,
  GS_ERR_INVALID_ARG,   /* a NULL buffer, an unknown dtype, an overflow ... */
  GS_ERR_NOMEM,         /* an allocation failed */
  GS_ERR_MPI,           /* an MPI call failed (transport error, dead peer) */
  GS_ERR_MISMATCH,      /* ranks disagree on an operation (GRADSYNC_CHECK) */
  GS_ERR_UNSUPPORTED,   /* the algorithm does not implement this collective */
  GS_ERR_IO,            /* a file could not be read or written */
  GS_ERR_PARSE,         /* a file or an option could not be parsed */
  GS_ERR_STATE,         /* a call at the wrong time (e.g. after destroy) */
  GS_ERR_INTERNAL,      /* a bug in gradsync: please report it */
  GS_STATUS_COUNT
} gs_status;

/* A static description of a status code; never NULL. */
const char *gs_strerror(gs_status status);

/* The message of the last failure on the calling thread ("" if none). The
 * string is owned by gradsync and valid until the thread's next failure. */
const char *gs_last_error(void);

/* Records a formatted message for the calling thread and returns status, so a
 * failing path can read: return gs_error(GS_ERR_INVALID_ARG, "...", ...). */
gs_status gs_error(gs_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clears the calling thread's last-error message. */
void gs_clear_error(void);

/* 1 when the last failure is known to be every rank's alike (an agreement
 * found each rank failing with this message, as a plan file that does not
 * fit the job): a program may print it once, not once a rank. Any later
 * gs_error resets it. */
int gs_last_error_shared(void);

/* ---- Data types and reductions ---------------------------------------- */

typedef enum {
  GS_F32 = 0,
  GS_F64,
  GS_F16,   /* IEEE 754 binary16, reduced in f32 */
  GS_BF16,  /* bfloat16, reduced in f32 */
  GS_I32,
  GS_I64,
  GS_U8,
  GS_DTYPE_COUNT
} gs_dtype;

typedef enum {
  GS_SUM = 0,
  GS_AVG, /* sum, then divided by the number of ranks */
  GS_MIN,
  GS_MAX,
  GS_PROD,
  GS_REDOP_COUNT
} gs_redop;

/* Size in bytes of one element; 0 for an invalid dtype. */
size_t gs_dtype_size(gs_dtype dtype);
const char *gs_dtype_name(gs_dtype dtype);
gs_status gs_dtype_parse(const char *name, gs_dtype *out);
const char *gs_redop_name(gs_redop op);
gs_status gs_redop_parse(const char *name, gs_redop *out);

/* inout[i] = inout[i] (op) in[i] for i < count. GS_AVG reduces as GS_SUM
 * (the division happens once, in gs_scale). f16 and bf16 are widened to f32
 * for the arithmetic and rounded to nearest-even on the way back. */
gs_status gs_reduce_local(void *inout, const void *in, size_t count,
                          gs_dtype dtype, gs_redop op);

/* buf[i] /= divisor, the last step of GS_AVG. Integers divide with C's
 * truncation toward zero. */
gs_status gs_scale_div(void *buf, size_t count, gs_dtype dtype, int divisor);

/* Conversions used by the reduction kernels and by tests. */
float gs_f16_to_f32(uint16_t h);
uint16_t gs_f32_to_f16(float f);
float gs_bf16_to_f32(uint16_t h);
uint16_t gs_f32_to_bf16(float f);
/* The same over n elements (the buffers do not overlap). */
void gs_f32_to_f16_n(uint16_t *dst, const float *src, size_t n);
void gs_f16_to_f32_n(float *dst, const uint16_t *src, size_t n);
void gs_f32_to_bf16_n(uint16_t *dst, const float *src, size_t n);
void gs_bf16_to_f32_n(float *dst, const uint16_t *src, size_t n);

/* ---- Collective algorithms ---------------------------------------------- */

/* Collective algorithms. They live in core because the cost model (below
 * comm) predicts each one's time. Each collective implements a subset; GS_ALGO_AUTO lets the cost
 * model choose, GS_ALGO_MPI delegates to MPI's own collective. */
typedef enum {
  GS_ALGO_AUTO = 0,
  GS_ALGO_MPI,
  GS_ALGO_RING,          /* allreduce, reduce-scatter, allgather(v) */
  GS_ALGO_RD,            /* recursive doubling: allreduce */
  GS_ALGO_RABENSEIFNER,  /* allreduce: halving reduce-scatter + doubling allgather */
  GS_ALGO_HIER,          /* allreduce: node-local RS, cross-node AR, node-local AG */
  GS_ALGO_PIPELINE,      /* broadcast: segmented chain */
  GS_ALGO_BINOMIAL,      /* broadcast: binomial tree */
  GS_ALGO_PAIRWISE,      /* all-to-all(v): p-1 pairwise exchanges */
  GS_ALGO_DISSEMINATION, /* barrier */
  GS_ALGO_COUNT
} gs_algo;

/* "auto", "mpi", "ring", ...; "invalid-algo" for a value out of range. */
const char *gs_algo_name(gs_algo algo);
/* The algorithm named `name` (case-insensitive), or GS_ERR_INVALID_ARG. */
gs_status gs_algo_parse(const char *name, gs_algo *out);

/* ---- Logging ------------------------------------------------------------ */

typedef enum {
  GS_LOG_DEBUG = 0,
  GS_LOG_INFO,
  GS_LOG_WARN,
  GS_LOG_ERROR,
  GS_LOG_OFF
} gs_log_level;

/* The level comes from GRADSYNC_LOG=debug|info|warn|error|off (default
 * warn), read on first use; gs_log_set_level overrides it. */
void gs_log_set_level(gs_log_level level);
gs_log_level gs_log_get_level(void);
void gs_log(gs_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- Allocation ----------------------------------------------------------
 * The one allocation choke point. On failure they return NULL and record a
 * GS_ERR_NOMEM message; gs_malloc(0) returns a unique non-NULL pointer. */
void *gs_malloc(size_t size);
void *gs_calloc(size_t n, size_t size);
void *gs_realloc(void *ptr, size_t size);
void gs_free(void *ptr);
/* The bytes these functions hold now (each block's usable size), and the
 * most they held since the process started or gs_mem_reset_peak (Redis's
 * used_memory and used_memory_peak): what the library allocated, beside
 * what the process's resident memory counts (its libraries, MPI's buffers,
 * the allocator's free pages). */
size_t gs_mem_used(void);
size_t gs_mem_peak(void);
void gs_mem_reset_peak(void);
/* size = a * b, or an error if it overflows size_t. */
gs_status gs_mul_size(size_t a, size_t b, size_t *size);

/* ---- Time ---------------------------------------------------------------- */

/* Seconds from an arbitrary fixed point, CLOCK_MONOTONIC. */
double gs_now(void);
uint64_t gs_now_ns(void);
/* Seconds since the Unix epoch to the nanosecond, CLOCK_REALTIME: the
 * stamps other processes and hosts read (the cluster manager's journal,
 * elastic events). */
double gs_wall_now(void);

/* ---- Signals ---------------------------------------------------------------
 * Routes signo to a thread of its own, which calls fn each time it arrives.
 * The calling thread blocks signo, and so does every thread it starts later
 * (the mask is inherited): call it before the threads that compute exist.
 * Why: a handler running on a thread inside oneDNN 2.x's generated GEMM
 * kernels corrupts the heap (they point the stack into it), so the threads
 * that train must never take a signal. fn runs as ordinary code on the
 * routing thread, or, on a thread that existed before and does not block
 * signo, in a handler: it must be async-signal-safe. Calling it again for
 * the same signal replaces fn. GS_ERR_INVALID_ARG for SIGKILL, SIGSTOP or a
 * NULL fn. */
typedef void (*gs_signal_fn)(void);
gs_status gs_signal_route(int signo, gs_signal_fn fn);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_CORE_H */
