/*
 * The watchdog. MPI offers no timeout, and MPI's own collectives (GS_ALGO_MPI) block inside
 * MPI, so no check on the progress thread could notice a peer that never
 * arrives. A separate thread watches what the progress thread publishes
 * (run_seq, progress_ns): a request that made no progress for
 * GRADSYNC_STALL_WARN seconds is reported once, and one that made none for
 * GRADSYNC_TIMEOUT seconds fails the communicator and ends the job with
 * MPI_Abort (as PyTorch's NCCL watchdog does). Progress is the start of a
 * request and every completed wait inside gradsync's own algorithms
 * (comm_waitall), so a long healthy collective is not mistaken for a stall;
 * an idle communicator (no request running) is never one.
 */
#include <stdio.h>
#include <time.h>

#include "comm_internal.h"

/* The number a user sees for request `seq`: calls are counted from 1 after
 * gs_comm_create returned; gs_comm_create's own collectives are "start-up". */
void comm_describe_request(const gs_comm *c, uint64_t seq, coll_kind kind,
                           size_t count, gs_dtype dtype, gs_algo algo,
                           char *out, size_t n) {
  uint64_t base = atomic_load_explicit(&c->user_base, memory_order_relaxed);
  int user = base != UINT64_MAX && seq > base;
  snprintf(out, n, "%scollective #%llu, %s(count=%zu, dtype=%s, algo=%s)",
           user ? "" : "start-up ",
           (unsigned long long)(user ? seq - base : seq), coll_kind_name(kind),
           count, kind == COLL_BARRIER ? "-" : gs_dtype_name(dtype),
           gs_algo_name(algo));
}

/* How long a request must have made no progress before the goodbyes of
 * peers that left are read (leave.c): a healthy collective rarely waits
 * this long for a piece, and each look costs a few MPI calls. */
#define LEAVE_LOOK_S 0.2

/* The running request, read without locks. */
typedef struct running {
  uint64_t seq;   /* 0: none runs, or it ended while read */
  double stalled; /* seconds without progress */
  coll_kind kind;
  size_t count;
  gs_dtype dtype;
  gs_algo algo;
} running;

static running running_request(gs_comm *c) {
  running r = {0};
  uint64_t seq = atomic_load_explicit(&c->run_seq, memory_order_acquire);
  if (seq == 0) return r;
  uint64_t last = atomic_load_explicit(&c->progress_ns, memory_order_relaxed);
  r.kind = (coll_kind)atomic_load_explicit(&c->run_kind, memory_order_relaxed);
  r.count = atomic_load_explicit(&c->run_count, memory_order_relaxed);
  r.dtype = (gs_dtype)atomic_load_explicit(&c->run_dtype, memory_order_relaxed);
  r.algo = (gs_algo)atomic_load_explicit(&c->run_algo, memory_order_relaxed);
  /* A request that ended meanwhile may have left a mixed description. */
  if (atomic_load_explicit(&c->run_seq, memory_order_acquire) != seq) return r;
  uint64_t now = gs_now_ns();
  r.stalled = now > last ? (double)(now - last) * 1e-9 : 0;
  r.seq = seq;
  return r;
}

/* Described only when something is said or done about it. */
static void running_describe(const gs_comm *c, const running *r, char *what, size_t n) {
  comm_describe_request(c, r->seq, r->kind, r->count, r->dtype, r->algo, what, n);
}

void watchdog_leave_look(gs_comm *c) {
  if (!leave_usable(c)) return;
  running r = running_request(c);
  if (r.seq == 0 || r.stalled < LEAVE_LOOK_S) return;
  char what[256];
  running_describe(c, &r, what, sizeof what);
  leave_check(c, r.seq, r.stalled, what);
}

/* Looks at the running request once; warns, or ends the job. Safe from any
 * thread: each request is warned about once, and one thread aborts. */
void watchdog_check(gs_comm *c) {
  running r = running_request(c);
  uint64_t seq = r.seq;
  double stalled = r.stalled;
  if (seq == 0) return;
  int timed_out = c->timeout_s > 0 && stalled >= c->timeout_s;
  int warn = c->stall_warn_s > 0 && stalled >= c->stall_warn_s;
  /* A peer that has left (gs_comm_leave) never issues what this rank waits
   * for: looked at after a short stall, long before the timeout; here only
   * while the progress thread blocks inside MPI (otherwise comm_waitall
   * looks, on the progress thread: see watchdog_leave_look). */
  int leave_look = stalled >= LEAVE_LOOK_S && leave_usable(c) &&
                   atomic_load_explicit(&c->in_mpi_block, memory_order_acquire);
  if (!timed_out && !warn && !leave_look) return;
  char what[256];
  running_describe(c, &r, what, sizeof what);
  if (leave_look) leave_check(c, seq, stalled, what);
  if (!timed_out && !warn) return;
  if (timed_out) {
    if (atomic_exchange(&c->aborting, 1)) return; /* another thread is at it */
    gs_comm_abort(c, 1, "%s made no progress for %.1f s (GRADSYNC_TIMEOUT=%g "
                  "s): another rank failed, stalled or never issued it; "
                  "ending the job", what, stalled, c->timeout_s);
  }
  uint64_t prev = atomic_load(&c->warned_seq);
  if (prev != seq && atomic_compare_exchange_strong(&c->warned_seq, &prev, seq)) {
    char tail[96] = "";
    if (c->timeout_s > 0)
      snprintf(tail, sizeof tail, "; the job ends if it makes none for %g s "
               "(GRADSYNC_TIMEOUT)", c->timeout_s);
    fprintf(stderr, "gradsync: rank %d: warning: %s has made no progress for "
            "%.1f s (GRADSYNC_STALL_WARN=%g s): another rank may have failed, "
            "stalled or not issued it%s\n", c->world.rank, what, stalled,
            c->stall_warn_s, tail);
    fflush(stderr);
  }
}

/* An absolute CLOCK_MONOTONIC time `secs` from now. */
struct timespec watchdog_deadline(double secs) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long ns = ts.tv_nsec + (long)((secs - (double)(long)secs) * 1e9);
  ts.tv_sec += (time_t)secs + ns / 1000000000L;
  ts.tv_nsec = ns % 1000000000L;
  return ts;
}

void *watchdog_main(void *arg) {
  gs_comm *c = arg;
  pthread_mutex_lock(&c->wd_mu);
  while (!c->wd_stop) {
    struct timespec ts = watchdog_deadline(c->wd_tick_s);
    pthread_cond_timedwait(&c->wd_cv, &c->wd_mu, &ts);
    if (c->wd_stop) break;
    pthread_mutex_unlock(&c->wd_mu);
    watchdog_check(c);
    pthread_mutex_lock(&c->wd_mu);
  }
  pthread_mutex_unlock(&c->wd_mu);
  return NULL;
}

/* Publishes the request the progress thread starts (or 0: none runs). */
void watchdog_begin(gs_comm *c, const coll_args *a, uint64_t seq) {
  atomic_store_explicit(&c->run_kind, (int)a->kind, memory_order_relaxed);
  atomic_store_explicit(&c->run_count, a->count, memory_order_relaxed);
  atomic_store_explicit(&c->run_dtype, (int)a->dtype, memory_order_relaxed);
  atomic_store_explicit(&c->run_algo, (int)a->algo, memory_order_relaxed);
  atomic_store_explicit(&c->progress_ns, gs_now_ns(), memory_order_relaxed);
  atomic_store_explicit(&c->run_seq, seq, memory_order_release);
}

void watchdog_end(gs_comm *c) {
  atomic_store_explicit(&c->run_seq, 0, memory_order_release);
}

/* The interval at which stalls are looked for: a quarter of the shortest
 * configured interval, between 50 ms and 1 s; 0 when neither is set. */
double watchdog_tick(const gs_comm *c) {
  double m = 0;
  if (c->timeout_s > 0) m = c->timeout_s;
  if (c->stall_warn_s > 0 && (m == 0 || c->stall_warn_s < m)) m = c->stall_warn_s;
  if (m == 0) return 0;
  m /= 4;
  return m < 0.05 ? 0.05 : m > 1.0 ? 1.0 : m;
}

/* Stops the watchdog; after the progress thread, which it may have to end. */
void watchdog_stop(gs_comm *c) {
  if (!c->watchdog_running) return;
  pthread_mutex_lock(&c->wd_mu);
  c->wd_stop = 1;
  pthread_cond_signal(&c->wd_cv);
  pthread_mutex_unlock(&c->wd_mu);
  pthread_join(c->watchdog, NULL);
  c->watchdog_running = 0;
}

