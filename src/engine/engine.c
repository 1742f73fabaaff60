/*
 * The engine: gradient averaging during backward, after a merge plan
 * (include/gradsync/engine.h, docs/ENGINE.md).
 *
 * This file holds the public calls (training thread), the event ring, the
 * launch thread (pack, issue in plan order) and the completion thread (wait
 * in issue order, scatter back). Plans and the profiler live in
 * engine_plan.c, the Chrome-trace timeline in timeline.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <sched.h>
#include <limits.h>
#include <math.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine_internal.h"

#define DEFAULT_WARMUP 5
#define DEFAULT_INTERVAL 10
#define DEFAULT_DRIFT 0.10

/* ---- Failure ---------------------------------------------------------------- */

/* Fails the engine with the first error; later errors are dropped. Wakes
 * every waiter so that nothing hangs on a failed engine. */
void eng_fail(gs_engine *e, gs_status st, const char *msg) {
  pthread_mutex_lock(&e->mu);
  if (atomic_load(&e->failed) == 0) {
    snprintf(e->failure, sizeof e->failure, "%s", msg && *msg ? msg : gs_strerror(st));
    atomic_store(&e->failed, (int)st);
    gs_log(GS_LOG_ERROR, "gradsync engine: %s", e->failure);
  }
  pthread_cond_broadcast(&e->cv_done);
  pthread_cond_broadcast(&e->cv_inflight);
  pthread_mutex_unlock(&e->mu);
}

/* The engine's first error, as the calling thread's error. */
static gs_status failed_status_locked(gs_engine *e) {
  gs__error_set_message(e->failure);
  return (gs_status)atomic_load(&e->failed);
}

static gs_status failed_status(gs_engine *e) {
  pthread_mutex_lock(&e->mu);
  gs_status st = failed_status_locked(e);
  pthread_mutex_unlock(&e->mu);
  return st;
}

/* ---- The stall watchdog ----------------------------------------------------------
 * Horovod's stall check, per rank. Whatever blocks in the engine (the
 * training thread in wait, wait_tensor, the first grad_ready of an
 * iteration or destroy; the launch thread in an open iteration whose next
 * group this rank has not completed) watches the time since the engine's
 * last progress. After gs_comm_stall_warn_s it warns once, naming the
 * tensors it waits for and what holds them: tensors not marked ready on this
 * rank, or a collective that this rank has joined and the others have not.
 * After gs_comm_timeout_s it ends the job through gs_comm_abort with that
 * story. No rank needs another's state for it: the rank that did not mark a
 * tensor names it, the ranks stuck in its group's collective name the
 * collective and its tensors, and the logs together name the ranks. */

void eng_progress(gs_engine *e) { atomic_store(&e->progress_ns, gs_now_ns()); }

/* Seconds from `then` to `now`. Other threads stamp progress and issue
 * times, so a stamp read after `now` may be later than it: that is no time
 * at all, not an unsigned wrap to 584 years. */
static double since_s(uint64_t now, uint64_t then) {
  return now > then ? (double)(now - then) * 1e-9 : 0;
}

void eng_set_phase(gs_engine *e, const char *phase, uint64_t iter) {
  pthread_mutex_lock(&e->mu);
  e->ctl_phase = phase;
  e->ctl_iter = iter;
  pthread_mutex_unlock(&e->mu);
  eng_progress(e);
}

static const char *op_name[OP_COUNT] = {"allreduce", "reduce_scatter", "allgather",
                                         "compressed exchange"};

/* Appends to dst (a string of capacity n) without overflowing. */
static void put(char *dst, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void put(char *dst, size_t n, const char *fmt, ...) {
  size_t len = strlen(dst);
  if (len + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst + len, n - len, fmt, ap);
  va_end(ap);
}

/* The tensors (count > 0) that this rank has not marked ready in the
 * current iteration, as the training thread knows them (its `marked`). */
static void put_unmarked(gs_engine *e, char *dst, size_t n) {
  size_t shown = 0, total = 0;
  for (size_t i = 0; i < e->ntensors; i++) {
    const eng_tensor *t = &e->tensors[i];
    if (t->comm < 0 || t->marked == e->iter + 1) continue;
    if (total++ < 6) put(dst, n, "%s'%s'", shown++ ? ", " : "", t->name);
  }
  if (total > shown) put(dst, n, " and %zu more", total - shown);
  if (total == 0) put(dst, n, "none");
}

/* What the training thread waits for, in words (mu held). */
static void describe_wait_locked(gs_engine *e, const eng_watch *w, char *dst, size_t n) {
  uint64_t now = gs_now_ns();
  dst[0] = '\0';
  if (w->id >= 0 && e->tensors[w->id].comm >= 0) {
    long c = e->tensors[w->id].comm;
    uint64_t target = e->iter - 1;
    if (e->t_iter[c] < target + 1) {
      put(dst, n, "tensor '%s' of iteration %llu: its message has not been issued; "
          "groups are launched in plan order once all their tensors are marked ready, "
          "and this rank has not marked ", e->tensors[w->id].name,
          (unsigned long long)target);
      put_unmarked(e, dst, n);
      put(dst, n, "; ");
    } else {
      put(dst, n, "tensor '%s' of iteration %llu: ", e->tensors[w->id].name,
          (unsigned long long)target);
    }
  }
  if (e->ctl_phase)
    put(dst, n, "the engine's %s of iteration %llu, an exchange every rank's engine "
        "joins when it starts that iteration (a rank that has not started it, with "
        "its first grad_ready or wait, or that failed, holds it up); ", e->ctl_phase,
        (unsigned long long)e->ctl_iter);
  if (e->cur_valid) {
    const eng_inflight *f = &e->cur;
    put(dst, n, "%s of group %zu of iteration %llu (tensors %s; %zu B), issued %.1f s "
        "ago: packed and in a collective, waiting for the other ranks (this rank "
        "marked every one of its tensors ready or gave zeros at wait, so a rank that "
        "has not marked them ready, or has stopped, holds it up)", op_name[f->op],
        f->msg->group, (unsigned long long)f->iter, f->msg->label, f->msg->bytes,
        since_s(now, f->issue_ns));
    if (e->fifo_len) put(dst, n, ", %zu more collective(s) queued behind it", e->fifo_len);
  } else if (e->fifo_len) {
    put(dst, n, "%zu collective(s) queued for the completion thread", e->fifo_len);
  } else if (!e->ctl_phase && e->flushed_iter <= e->iter && !strcmp(w->call, "gs_engine_wait")) {
    put(dst, n, "the launch thread, which has not yet handled the end of iteration %llu",
        (unsigned long long)e->iter);
  }
  size_t len = strlen(dst);
  while (len > 0 && (dst[len - 1] == ' ' || dst[len - 1] == ';')) dst[--len] = '\0';
  if (len == 0) put(dst, n, "nothing identified");
}

/* One wait of a training-thread loop on cv_done, with the watchdog (mu
 * held): warns once per stall, ends the job at the timeout. */
static void watch_wait_locked(gs_engine *e, eng_watch *w) {
  if (!(e->warn_s > 0) && !(e->timeout_s > 0)) {
    pthread_cond_wait(&e->cv_done, &e->mu);
    return;
  }
  uint64_t now = gs_now_ns(), last = atomic_load(&e->progress_ns);
  if (last < w->start_ns) last = w->start_ns;
  double idle = since_s(now, last);
  if (e->timeout_s > 0 && idle >= e->timeout_s) {
    char what[900];
    describe_wait_locked(e, w, what, sizeof what);
    gs_comm_abort(e->comm, 1, "gradsync engine: %s made no progress for %.1f s "
                  "(GRADSYNC_TIMEOUT=%g) in iteration %llu, waiting for %s; ending the "
                  "job", w->call, idle, e->timeout_s, (unsigned long long)e->iter, what);
  }
  if (e->warn_s > 0 && idle >= e->warn_s && w->warned_for != last) {
    w->warned_for = last;
    char what[900];
    describe_wait_locked(e, w, what, sizeof what);
    gs_log(GS_LOG_WARN, "gradsync engine, rank %d: stall: %s has made no progress for "
           "%.1f s in iteration %llu, waiting for %s (GRADSYNC_STALL_WARN=%g; the job "
           "ends at GRADSYNC_TIMEOUT=%g s)", e->rank, w->call, idle,
           (unsigned long long)e->iter, what, e->warn_s, e->timeout_s);
  }
  /* Sleep until the next threshold, at most a second (progress moves it). */
  double next = 1.0;
  if (e->warn_s > 0 && w->warned_for != last) next = GS_MIN(next, e->warn_s - idle);
  if (e->timeout_s > 0) next = GS_MIN(next, e->timeout_s - idle);
  if (next < 1e-3) next = 1e-3;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(next * 1e9);
  ts.tv_sec += (time_t)(ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  pthread_cond_timedwait(&e->cv_done, &e->mu, &ts);
}

static void watch_init(eng_watch *w, const char *call, int id) {
  w->call = call;
  w->id = id;
  w->start_ns = gs_now_ns();
  w->warned_for = 0;
}

/* ---- The event ring ------------------------------------------------------------
 * Single producer (training thread), single consumer (launch thread), no
 * lock. grad_ready must cost the training thread next to nothing, so a READY
 * event never makes a system call: inside an iteration the launch thread
 * polls, sleeping between polls for a period that starts at poll_min_ns
 * after each event and doubles while the ring stays empty, up to
 * poll_max_ns (a long backward gap costs at most that much launch delay,
 * a short one little CPU). Between iterations it sleeps on a futex, and
 * START, FLUSH and STOP wake it. Both sides use sequentially consistent
 * operations on `tail` and `sleeping`, so a wake is never lost. */

static long futex(_Atomic uint32_t *addr, int op, uint32_t val,
                  const struct timespec *timeout) {
  return syscall(SYS_futex, (uint32_t *)addr, op, val, timeout, NULL, 0);
}

static void ring_push(eng_ring *r, const eng_event *ev) {
  uint32_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
  while (t - atomic_load_explicit(&r->head, memory_order_acquire) > r->mask)
    sched_yield(); /* full: the launch thread is behind by a whole ring */
  r->slots[t & r->mask] = *ev;
  atomic_store(&r->tail, t + 1);
  if (ev->kind != EV_READY && atomic_load(&r->sleeping))
    futex(&r->tail, FUTEX_WAKE_PRIVATE, 1, NULL);
}

/* Pops the next event; `polling` says an iteration is open. Returns 0,
 * without an event, if polling passes `deadline_ns` (0: none). */
static int ring_pop(eng_ring *r, eng_event *ev, int polling, uint64_t deadline_ns) {
  uint32_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t period = r->poll_min_ns;
  for (;;) {
    for (int i = 0; i <= r->spin_iters; i++) {
      if (atomic_load_explicit(&r->tail, memory_order_acquire) != h) {
        *ev = r->slots[h & r->mask];
        atomic_store_explicit(&r->head, h + 1, memory_order_release);
        return 1;
      }
      __asm__ __volatile__("" ::: "memory");
    }
    atomic_store(&r->sleeping, 1);
    if (atomic_load(&r->tail) == h) {
      if (polling) {
        struct timespec ts = {(time_t)(period / 1000000000u),
                              (long)(period % 1000000000u)};
        futex(&r->tail, FUTEX_WAIT_PRIVATE, h, &ts);
        period = GS_MIN(2 * period, r->poll_max_ns);
      } else {
        futex(&r->tail, FUTEX_WAIT_PRIVATE, h, NULL);
      }
    }
    atomic_store(&r->sleeping, 0);
    if (polling && deadline_ns && atomic_load(&r->tail) == h && gs_now_ns() >= deadline_ns)
      return 0;
  }
}

/* ---- Issue and completion --------------------------------------------------------- */

static void fifo_push_locked(gs_engine *e, const eng_inflight *f) {
  if (e->fifo_len == e->fifo_cap) {
    size_t cap = e->fifo_cap ? 2 * e->fifo_cap : 64;
    eng_inflight *n = gs_malloc(cap * sizeof *n);
    if (n == NULL) abort(); /* 64 bytes per collective in flight */
    for (size_t i = 0; i < e->fifo_len; i++)
      n[i] = e->fifo[(e->fifo_head + i) % e->fifo_cap];
    gs_free(e->fifo);
    e->fifo = n;
    e->fifo_cap = cap;
    e->fifo_head = 0;
  }
  e->fifo[(e->fifo_head + e->fifo_len) % e->fifo_cap] = *f;
  e->fifo_len++;
}

/* Issues one message's collective and queues it for the completion thread.
 * Called with mu held, so that the issue order (the communicator's order)
 * and the sequence numbers agree whichever thread issues. */
gs_status eng_issue_locked(gs_engine *e, eng_msg *m, eng_op op, uint64_t iter) {
  gs_request *req = NULL;
  gs_status st;
  int p = e->size;
  if (op == OP_ALLREDUCE) {
    void *buf = m->fusion ? m->fusion : e->tensors[m->ids[0]].buf;
    st = gs_iallreduce(e->comm, GS_IN_PLACE, buf, m->count, m->dtype, GS_AVG,
                       GS_ALGO_AUTO, &req);
  } else if (op == OP_RS) {
    st = gs_ireduce_scatter(e->comm, GS_IN_PLACE, m->fusion, m->padded / (size_t)p,
                            m->dtype, GS_AVG, GS_ALGO_AUTO, &req);
  } else {
    st = gs_iallgather(e->comm, GS_IN_PLACE, m->fusion, m->padded / (size_t)p,
                       m->dtype, GS_ALGO_AUTO, &req);
  }
  if (st != GS_OK) return st;
  eng_inflight f = {req, GS_OK, 0, op, m, ++e->issued_seq, iter, gs_now_ns()};
  fifo_push_locked(e, &f);
  e->stats.messages++;
  if (op != OP_RS) {
    for (size_t k = 0; k < m->n; k++) {
      long c = e->tensors[m->ids[k]].comm;
      e->t_iter[c] = iter + 1;
      e->t_seq[c] = f.seq;
    }
  }
  pthread_cond_signal(&e->cv_inflight);
  return GS_OK;
}

void eng_push_xchg_locked(gs_engine *e, eng_msg *m, uint64_t iter, uint64_t issue_ns,
                          gs_status xst, uint64_t xbytes) {
  eng_inflight f = {NULL, xst, xbytes, OP_XCHG, m, ++e->issued_seq, iter, issue_ns};
  fifo_push_locked(e, &f);
  e->stats.messages++;
  for (size_t k = 0; k < m->n; k++) {
    long c = e->tensors[m->ids[k]].comm;
    e->t_iter[c] = iter + 1;
    e->t_seq[c] = f.seq;
  }
  pthread_cond_signal(&e->cv_inflight);
}

/* Waits until every issued collective has completed (or the engine failed). */
void eng_wait_drained_locked(gs_engine *e) {
  while (e->completed_seq < e->issued_seq && !atomic_load(&e->failed))
    pthread_cond_wait(&e->cv_done, &e->mu);
}

/* Scatters a completed message's result back to the caller's buffers. */
static void unpack(gs_engine *e, const eng_inflight *f) {
  eng_msg *m = f->msg;
  size_t es = gs_dtype_size(m->dtype);
  if (f->op == OP_RS) {
    /* The reduce-scatter left this rank's chunk first; the in-place
     * all-gather expects it at its place. */
    size_t chunk = m->padded / (size_t)e->size;
    if (e->rank > 0 && chunk > 0)
      memmove((char *)m->fusion + (size_t)e->rank * chunk * es, m->fusion, chunk * es);
    return;
  }
  if (m->fusion == NULL) return; /* reduced in place */
  for (size_t k = 0; k < m->n; k++) {
    const eng_tensor *t = &e->tensors[m->ids[k]];
    memcpy(t->buf, (char *)m->fusion + m->off[k] * es, t->count * es);
  }
}

static void *completion_main(void *arg) {
  gs_engine *e = arg;
  for (;;) {
    pthread_mutex_lock(&e->mu);
    while (e->fifo_len == 0 && !e->stopping) pthread_cond_wait(&e->cv_inflight, &e->mu);
    if (e->fifo_len == 0) {
      e->completion_exited = 1;
      pthread_cond_broadcast(&e->cv_done);
      pthread_mutex_unlock(&e->mu);
      break;
    }
    eng_inflight f = e->fifo[e->fifo_head];
    e->fifo_head = (e->fifo_head + 1) % e->fifo_cap;
    e->fifo_len--;
    e->cur = f;
    e->cur_valid = 1;
    pthread_mutex_unlock(&e->mu);

    gs_status st = f.op == OP_XCHG ? f.xst : gs_wait(f.req);
    if (st != GS_OK && f.op == OP_XCHG) {
      /* The launch thread failed the engine with the exchange's message. */
    } else if (st != GS_OK) {
      char msg[1024];
      snprintf(msg, sizeof msg, "rank %d: %s of %zu tensors (%s, iteration %llu) "
               "failed: %s", e->rank, op_name[f.op], f.msg->n, f.msg->label,
               (unsigned long long)f.iter, gs_last_error());
      eng_fail(e, st, msg);
    } else if (!atomic_load(&e->failed)) {
      unpack(e, &f);
    }
    uint64_t end = gs_now_ns();

    pthread_mutex_lock(&e->mu);
    uint64_t start = GS_MAX(f.issue_ns, e->prev_end_ns);
    e->prev_end_ns = end;
    double secs = (double)(end - start) * 1e-9;
    e->stats.comm_s += secs;
    if (st == GS_OK) {
      e->stats.bytes_dense += f.msg->bytes;
      e->stats.bytes_sent += f.op == OP_XCHG ? f.xbytes
                             : f.op == OP_AG ? 0 : f.msg->bytes;
      if (f.op == OP_XCHG) e->stats.compressed_messages++;
      if (f.op == OP_AG) e->stats.bytes_dense -= f.msg->bytes; /* counted at RS */
    }
    if (st == GS_OK && f.iter >= 1) {
      eng_sample *s = &e->samples[e->nsamples % ENG_SAMPLES];
      s->op = f.op;
      s->bytes = (double)f.msg->bytes;
      s->secs = secs;
      e->nsamples++;
    }
    e->completed_seq = f.seq;
    e->cur_valid = 0;
    eng_progress(e);
    pthread_cond_broadcast(&e->cv_done);
    pthread_mutex_unlock(&e->mu);

    if (e->timeline) {
      char name[96], args[1400];
      snprintf(name, sizeof name, "%s g%zu (%zu tensor%s, %zu B)", op_name[f.op],
               f.msg->group, f.msg->n, f.msg->n == 1 ? "" : "s", f.msg->bytes);
      snprintf(args, sizeof args, "\"iteration\":%llu,\"group\":%zu,\"bytes\":%zu,"
               "\"tensors\":\"%s\"", (unsigned long long)f.iter, f.msg->group,
               f.msg->bytes, f.msg->label);
      tl_event(e->timeline, TL_COMM, name, start, end, args);
    }
  }
  return NULL;
}

/* ---- The launch thread ------------------------------------------------------------ */

/* Packs a message into its fusion buffer: ready tensors are copied, tensors
 * never marked ready contribute zeros (DDP's unused parameters). */
static void pack(gs_engine *e, eng_msg *m) {
  size_t es = gs_dtype_size(m->dtype);
  if (m->fusion == NULL) {
    const eng_tensor *t = &e->tensors[m->ids[0]];
    if (!e->ready[t->comm]) memset(t->buf, 0, t->count * es);
    return;
  }
  for (size_t k = 0; k < m->n; k++) {
    const eng_tensor *t = &e->tensors[m->ids[k]];
    char *dst = (char *)m->fusion + m->off[k] * es;
    if (e->ready[t->comm])
      memcpy(dst, t->buf, t->count * es);
    else
      memset(dst, 0, t->count * es);
  }
  if (m->padded > m->count)
    memset((char *)m->fusion + m->count * es, 0, (m->padded - m->count) * es);
}

/* Launches every complete group from next_group on, in plan order. */
static void launch_ready_groups(gs_engine *e, eng_plan *p) {
  while (e->next_group < p->ngroups && e->pending[e->next_group] == 0) {
    size_t g = e->next_group++;
    if (atomic_load(&e->failed)) continue;
    for (size_t k = p->gmsg[g]; k < p->gmsg[g + 1]; k++) pack(e, &p->msgs[k]);
    pthread_mutex_lock(&e->mu);
    for (size_t k = p->gmsg[g]; k < p->gmsg[g + 1]; k++) {
      eng_msg *m = &p->msgs[k];
      if (m->xchg >= 0) {
        /* A compressed exchange runs here, to its end: its collectives
         * then enter the communicator's queue in plan order on every
         * rank, whatever the completion thread is doing. */
        pthread_mutex_unlock(&e->mu);
        uint64_t t0 = gs_now_ns();
        gs_xchg_stats zs = {0};
        float *buf = m->fusion ? m->fusion : e->tensors[m->ids[0]].buf;
        uint64_t lr_bits = atomic_load_explicit(&e->zlr_bits, memory_order_relaxed);
        double lr;
        memcpy(&lr, &lr_bits, sizeof lr);
        gs_status xs = lr > 0 ? gs_compress_set_lr(m->zst, lr) : GS_OK;
        if (xs == GS_OK)
          xs = gs_compress_allreduce(e->comm, e->zc, m->zst, buf, m->count,
                                             (gs_xchg)m->xchg, e->zws, &zs);
        if (xs != GS_OK) {
          char msg[1400];
          snprintf(msg, sizeof msg, "rank %d: compressed exchange (%s) of %zu "
                   "tensors (%s, iteration %llu) failed: %s", e->rank, e->zspec,
                   m->n, m->label, (unsigned long long)e->liter, gs_last_error());
          eng_fail(e, xs, msg);
        }
        pthread_mutex_lock(&e->mu);
        e->stats.compress_s += zs.compress_s + zs.decompress_s;
        eng_push_xchg_locked(e, m, e->liter, t0, xs, zs.payload_bytes);
        if (xs != GS_OK) break;
        continue;
      }
      gs_status st = eng_issue_locked(e, m, p->dear ? OP_RS : OP_ALLREDUCE, e->liter);
      if (st != GS_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", gs_last_error());
        pthread_mutex_unlock(&e->mu);
        eng_fail(e, st, msg);
        pthread_mutex_lock(&e->mu);
        break;
      }
    }
    pthread_mutex_unlock(&e->mu);
  }
}

/* Dear's all-gathers of the previous iteration that the trainer did not
 * ask for are issued now, before anything of this iteration, so that every
 * rank issues the same sequence; then they are waited for. */
static void finish_pending_allgathers(gs_engine *e) {
  pthread_mutex_lock(&e->mu);
  eng_plan *p = e->plan;
  if (e->ag_pending && p) {
    while (e->ag_next < p->ngroups && !atomic_load(&e->failed)) {
      size_t g = p->ngroups - 1 - e->ag_next++;
      for (size_t k = p->gmsg[g]; k < p->gmsg[g + 1]; k++) {
        gs_status st = eng_issue_locked(e, &p->msgs[k], OP_AG, e->ag_iter);
        if (st != GS_OK) {
          char msg[1024];
          snprintf(msg, sizeof msg, "%s", gs_last_error());
          pthread_mutex_unlock(&e->mu);
          eng_fail(e, st, msg);
          pthread_mutex_lock(&e->mu);
          break;
        }
      }
    }
    e->ag_pending = 0;
  }
  eng_wait_drained_locked(e);
  pthread_mutex_unlock(&e->mu);
}

static void begin_iteration(gs_engine *e) {
  finish_pending_allgathers(e);
  if (!atomic_load(&e->failed) && e->liter == 0) {
    gs_clear_error();
    eng_set_phase(e, "registration check", e->liter);
    gs_status st = eng_check_registration(e);
    if (st != GS_OK) eng_fail(e, st, gs_last_error());
  }
  if (!atomic_load(&e->failed) && e->ncomm > 0) {
    gs_clear_error();
    eng_set_phase(e, "plan exchange", e->liter);
    gs_status st = eng_plan_step(e, e->liter);
    if (st != GS_OK) eng_fail(e, st, gs_last_error());
  }
  eng_set_phase(e, NULL, 0);
  eng_plan *p = e->plan;
  memset(e->ready, 0, e->ncomm);
  if (p) memcpy(e->pending, p->gsize, p->ngroups * sizeof(size_t));
  e->next_group = 0;
}

static void end_iteration(gs_engine *e, uint64_t flush_ns) {
  eng_plan *p = e->plan;
  if (p && !atomic_load(&e->failed)) {
    for (size_t g = 0; g < p->ngroups; g++) e->pending[g] = 0;
    launch_ready_groups(e, p);
  }
  size_t unready = 0;
  for (size_t c = 0; c < e->ncomm; c++) {
    if (!e->ready[c]) {
      unready++;
      e->stamp[c] = flush_ns;
    }
  }
  if (p && !atomic_load(&e->failed)) eng_profile_iteration(e, flush_ns);
  if (e->timeline && e->liter >= 1 && e->ncomm > 0) {
    /* Compute as the stamps show it: forward up to the first gradient,
     * then each tensor's backward share. */
    uint64_t prev = e->it_start_ns, r = 0;
    for (size_t c = e->ncomm; c-- > 0;) {
      r = GS_MAX(r, e->stamp[c]);
      const char *name = e->tensors[e->comm_ids[c]].name;
      char label[160];
      if (c == e->ncomm - 1) {
        tl_event(e->timeline, TL_COMPUTE, "forward", prev, r, NULL);
      } else if (r > prev) {
        snprintf(label, sizeof label, "backward %s", name);
        tl_event(e->timeline, TL_COMPUTE, label, prev, r, NULL);
      }
      prev = r;
    }
  }
  pthread_mutex_lock(&e->mu);
  e->stats.unready += unready;
  e->flush_dear = p ? p->dear : 0;
  e->flush_seq = e->issued_seq;
  e->flushed_iter = e->liter + 1;
  pthread_cond_broadcast(&e->cv_done);
  pthread_mutex_unlock(&e->mu);
  e->liter++;
}

/* The launch thread's side of the watchdog: an open iteration whose next
 * group (in plan order) this rank has not completed for warn_s / timeout_s.
 * This rank holds up the other ranks, which wait in that group's
 * collective; it names the tensors it has not marked. */
static void launch_stall(gs_engine *e, double idle, int fatal) {
  eng_plan *p = e->plan;
  size_t g = e->next_group;
  char names[700] = "";
  size_t shown = 0, total = 0;
  for (size_t k = p->plan->offsets[g]; k < p->plan->offsets[g + 1]; k++) {
    size_t c = p->plan->tensors[k];
    if (e->ready[c]) continue;
    if (total++ < 8)
      put(names, sizeof names, "%s'%s'", shown++ ? ", " : "",
          e->tensors[e->comm_ids[c]].name);
  }
  if (total > shown) put(names, sizeof names, " and %zu more", total - shown);
  char what[1000];
  snprintf(what, sizeof what, "iteration %llu has made no progress on this rank for "
           "%.1f s: tensor(s) %s of group %zu not marked ready on this rank (no "
           "grad_ready for them, and no gs_engine_wait), so this rank cannot launch "
           "group %zu or the %zu group(s) after it, and the other ranks wait for them "
           "in that group's collective", (unsigned long long)e->liter, idle, names, g,
           g, p->ngroups - g - 1);
  if (fatal)
    gs_comm_abort(e->comm, 1, "gradsync engine: %s (GRADSYNC_TIMEOUT=%g); ending the job",
                  what, e->timeout_s);
  gs_log(GS_LOG_WARN, "gradsync engine, rank %d: stall: %s (GRADSYNC_STALL_WARN=%g; the "
         "job ends at GRADSYNC_TIMEOUT=%g s)", e->rank, what, e->warn_s, e->timeout_s);
}

static void *launch_main(void *arg) {
  gs_engine *e = arg;
  uint64_t last_ev = gs_now_ns();
  int warned = 0;
  for (;;) {
    eng_event ev;
    uint64_t deadline = 0;
    int watch = e->iter_open && e->plan && e->next_group < e->plan->ngroups &&
                !atomic_load(&e->failed);
    if (watch && e->warn_s > 0 && !warned)
      deadline = last_ev + (uint64_t)(e->warn_s * 1e9);
    if (watch && e->timeout_s > 0) {
      uint64_t t = last_ev + (uint64_t)(e->timeout_s * 1e9);
      if (deadline == 0 || t < deadline) deadline = t;
    }
    if (!ring_pop(&e->ring, &ev, e->iter_open, deadline)) {
      double idle = since_s(gs_now_ns(), last_ev);
      int fatal = e->timeout_s > 0 && idle >= e->timeout_s;
      if (fatal || !warned) launch_stall(e, idle, fatal);
      warned = 1;
      continue;
    }
    last_ev = gs_now_ns();
    warned = 0;
    eng_progress(e);
    switch (ev.kind) {
      case EV_STOP:
        pthread_mutex_lock(&e->mu);
        e->launch_exited = 1;
        pthread_cond_broadcast(&e->cv_done);
        pthread_mutex_unlock(&e->mu);
        return NULL;
      case EV_START:
        e->iter_open = 1;
        e->it_start_ns = ev.t_ns;
        e->it_fwd_wait_ns = ev.aux;
        begin_iteration(e);
        break;
      case EV_READY: {
        long c = e->tensors[ev.id].comm;
        if (c < 0 || e->plan == NULL) break;
        e->ready[c] = 1;
        e->stamp[c] = ev.t_ns;
        e->pending[e->plan->group_of[c]]--;
        launch_ready_groups(e, e->plan);
        break;
      }
      case EV_FLUSH:
        e->iter_open = 0;
        end_iteration(e, ev.t_ns);
        break;
    }
  }
}

/* ---- Public calls ----------------------------------------------------------------- */

void gs_engine_config_init(gs_engine_config *cfg) {
  if (cfg == NULL) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->warmup_iters = DEFAULT_WARMUP;
  cfg->replan_interval = DEFAULT_INTERVAL;
  cfg->replan_drift = DEFAULT_DRIFT;
  cfg->error_feedback = 1;
}

static char *str_dup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = gs_malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* The compression of cfg (gs_compress_spec_parse): "auto:SPEC" lets the
 * plan choose per group, SPEC alone compresses every f32 group; "none" is
 * dense. The compressor's coding time, for the planner's cost, is measured
 * by every rank at the first plan, when the tensors' sizes are known
 * (engine_plan.c), not here. */
static gs_status setup_compression(gs_engine *e, const gs_engine_config *cfg) {
  const char *spec = cfg->compress ? cfg->compress : "";
  e->zef = cfg->error_feedback != 0;
  e->zmerged = cfg->compress_merged != 0;
  e->zspec = str_dup(*spec ? spec : "none");
  if (e->zspec == NULL) return GS_ERR_NOMEM;
  gs_compress_spec z;
  gs_status st = gs_compress_spec_parse(spec, &z);
  if (st == GS_OK) st = gs_plan_policy_check_compress(&e->policy, &z);
  if (st == GS_OK && !z.off) st = gs_compressor_create(z.compressor, &e->zc);
  if (st != GS_OK) {
    char why[900];
    gs__error_copy(why, sizeof why);
    return gs_error(st, "gs_engine_create on rank %d: %s", e->rank, why);
  }
  if (z.off) return GS_OK;
  e->zrequired = !z.automatic;
  e->zopts = cfg->compress_opts ? *cfg->compress_opts : gs_compress_opts_default();
  e->zopts.error_feedback = e->zef;
  e->zopts.rank = e->rank;
  e->zopts.nranks = e->size;
  GS_CHECK(gs_xchg_ws_create(&e->zws));
  /* The kinds of memory its states keep: a one-element state says. */
  gs_compress_state *probe = NULL;
  GS_CHECK(gs_compress_state_create(e->zc, 1, &e->zopts, &probe));
  e->zkinds = gs_compress_memory_kinds(probe);
  gs_compress_state_destroy(probe);
  return GS_OK;
}

/* The local part of gs_engine_create: checks the configuration, opens the
 * timeline and allocates. On failure *out stays NULL. */
static gs_status create_local(gs_comm *comm, const gs_engine_config *cfg_in,
                              gs_engine **out) {
  gs_engine_config cfg;
  if (cfg_in) cfg = *cfg_in;
  else gs_engine_config_init(&cfg);
  int rank = gs_comm_rank(comm);
  const char *spec = cfg.policy ? cfg.policy : "auto";
  gs_plan_policy pol;
  if (gs_plan_policy_parse(spec, &pol) != GS_OK) {
    char why[900];
    gs__error_copy(why, sizeof why); /* gs_error writes the buffer it reads */
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_create on rank %d: policy: %s", rank,
                    why);
  }
  if (cfg.warmup_iters < 0 || cfg.replan_interval < 1 || !(cfg.replan_drift >= 0))
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_create on rank %d: warmup_iters %d "
                    "must be >= 0, replan_interval %d >= 1 and replan_drift %g >= 0",
                    rank, cfg.warmup_iters, cfg.replan_interval, cfg.replan_drift);
  gs_engine *e = gs_calloc(1, sizeof *e);
  if (e == NULL) return GS_ERR_NOMEM;
  e->comm = comm;
  e->rank = rank;
  e->size = gs_comm_size(comm);
  e->policy = pol;
  e->policy_spec = str_dup(spec);
  e->warmup_iters = cfg.warmup_iters;
  e->replan_interval = cfg.replan_interval;
  e->replan_drift = cfg.replan_drift;
  e->forward_overlap = cfg.forward_overlap != 0;
  e->warn_s = gs_comm_stall_warn_s(comm);
  e->timeout_s = gs_comm_timeout_s(comm);
  atomic_store(&e->progress_ns, gs_now_ns());
  const char *pc = getenv("GRADSYNC_PLAN_COST");
  e->cost_curve = cfg.cost_curve != 0 || (pc && strcmp(pc, "curve") == 0);
  e->needs_profile = pol.kind == GS_PLAN_MGWFBP || pol.kind == GS_PLAN_OPTIMAL ||
                     pol.kind == GS_PLAN_DEAR || pol.kind == GS_PLAN_AUTO;
  e->samples = gs_calloc(ENG_SAMPLES, sizeof *e->samples);
  if (e->policy_spec == NULL || e->samples == NULL) {
    gs_free(e->policy_spec);
    gs_free(e->samples);
    gs_free(e);
    return GS_ERR_NOMEM;
  }
  /* Waits are timed on CLOCK_MONOTONIC, the clock of gs_now_ns. */
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv_inflight, &ca);
  pthread_cond_init(&e->cv_done, &ca);
  pthread_condattr_destroy(&ca);
  e->stats.policy = pol.kind;
  e->stats.chosen = pol.kind;
  gs_status zs = setup_compression(e, &cfg);
  if (zs != GS_OK) {
    char msg[1024];
    gs__error_copy(msg, sizeof msg);
    gs_engine_destroy(e);
    gs__error_set_message(msg);
    return zs;
  }
  const char *tl = cfg.timeline ? cfg.timeline : getenv("GRADSYNC_TIMELINE");
  if (tl && *tl) {
    gs_status st = tl_open(tl, e->rank, e->size, &e->timeline);
    if (st != GS_OK) {
      char msg[1024];
      gs__error_copy(msg, sizeof msg);
      gs_engine_destroy(e);
      gs__error_set_message(msg);
      return st;
    }
  }
  /* The launch thread's polling (see the event ring above). */
  const char *spin = getenv("GRADSYNC_ENGINE_SPIN");
  const char *poll = getenv("GRADSYNC_ENGINE_POLL_US");
  e->ring.spin_iters = spin ? atoi(spin) : 200;
  if (e->ring.spin_iters < 0) e->ring.spin_iters = 0;
  double poll_us = poll ? atof(poll) : 50.0;
  if (!(poll_us >= 1)) poll_us = 50.0;
  e->ring.poll_min_ns = (uint64_t)(poll_us * 1e3);
  e->ring.poll_max_ns = GS_MAX(e->ring.poll_min_ns, (uint64_t)1000000);
  *out = e;
  return GS_OK;
}

/* Every rank must run the engine alike: one fixed-size all-gather of each
 * rank's settings that change what it exchanges and when (the policy, the
 * warm-up and replan intervals, the forward overlap; the normalised
 * compression spec, error feedback, selection, density warm-up, DGC's
 * momentum and the error-feedback damping); a difference fails every rank
 * with GS_ERR_MISMATCH naming the first rank that differs and both. Until
 * 2026-12-06 only the compression was compared, and ranks with other
 * warm-ups waited for each other until the watchdog. `all` (size *
 * ENG_ZREC bytes) was allocated before the creation's agreement, so that
 * no rank can miss this exchange for want of memory. */
#define ENG_ZREC 256
static gs_status agree_settings(gs_engine *e, char *all) {
  char mine[ENG_ZREC] = {0};
  const char *norm = e->zc ? gs_compressor_spec(e->zc) : "none";
  int n = snprintf(mine, sizeof mine, "policy %s, warm-up %d, replan every %d, "
                   "forward overlap %d; compression %s%s%s%s", e->policy_spec,
                   e->warmup_iters, e->replan_interval, e->forward_overlap,
                   e->zc && !e->zrequired ? "auto:" : "", norm,
                   e->zc && !e->zef ? " without error feedback" : "",
                   e->zc && e->zmerged ? ", merged selection" : "");
  if (e->zc && n > 0 && (size_t)n < sizeof mine)
    snprintf(mine + n, sizeof mine - (size_t)n, ", density warm-up %llu, momentum %g, "
             "ef decay %g", (unsigned long long)e->zopts.warmup_steps,
             (double)e->zopts.momentum, (double)e->zopts.ef_decay);
  gs_status st = gs_allgather(e->comm, mine, all, ENG_ZREC, GS_U8, GS_ALGO_AUTO);
  if (st == GS_OK) {
    for (int r = 1; r < e->size; r++) {
      const char *theirs = all + (size_t)r * ENG_ZREC;
      if (memcmp(theirs, all, ENG_ZREC) != 0) {
        char a[ENG_ZREC + 1], b[ENG_ZREC + 1];
        memcpy(a, all, ENG_ZREC);
        memcpy(b, theirs, ENG_ZREC);
        a[ENG_ZREC] = b[ENG_ZREC] = '\0';
        st = gs_error(GS_ERR_MISMATCH, "gs_engine_create on rank %d: rank %d's engine "
                      "settings are '%s' where rank 0's are '%s': every rank must give the "
                      "same policy, warm-up, compression spec and options", e->rank, r, b, a);
        break;
      }
    }
  }
  return st;
}

/* Creation is an agreement point: a rank whose configuration, timeline or
 * memory fails must not leave the others to wait for it in the first
 * iteration's exchange, so every rank learns every rank's status and all
 * fail together. */
gs_status gs_engine_create(gs_comm *comm, const gs_engine_config *cfg_in,
                           gs_engine **out) {
  if (out == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_engine_create: out is NULL");
  *out = NULL;
  if (comm == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_create: communicator is NULL");
  gs_engine *e = NULL;
  gs_status st = create_local(comm, cfg_in, &e);
  size_t p = (size_t)gs_comm_size(comm);
  char *zall = st == GS_OK ? gs_malloc(p * ENG_ZREC) : NULL;
  if (st == GS_OK && zall == NULL)
    st = gs_error(GS_ERR_NOMEM, "gs_engine_create on rank %d: no memory",
                  gs_comm_rank(comm));
  gs_status ag = eng_agree_on(comm, st, "create its engine");
  if (ag == GS_OK) ag = agree_settings(e, zall);
  gs_free(zall);
  if (ag != GS_OK) {
    char msg[1024];
    gs__error_copy(msg, sizeof msg);
    gs_engine_destroy(e);
    gs__error_set_message(msg);
    return ag;
  }
  *out = e;
  return GS_OK;
}

gs_status gs_engine_register(gs_engine *e, const char *name, void *buf,
                             size_t count, gs_dtype dtype, int *id) {
  if (e == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_engine_register: engine is NULL");
  if (name == NULL || *name == '\0')
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_register on rank %d: tensor %zu "
                    "has no name", e->rank, e->ntensors);
  if (e->frozen)
    return gs_error(GS_ERR_STATE, "gs_engine_register on rank %d: '%s' registered "
                    "after the first iteration started", e->rank, name);
  size_t es = gs_dtype_size(dtype), bytes;
  if (es == 0)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_register on rank %d: '%s' has an "
                    "invalid dtype %d", e->rank, name, (int)dtype);
  if (gs_mul_size(count, es, &bytes) != GS_OK || bytes > (size_t)PTRDIFF_MAX / 2)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_register on rank %d: '%s' count "
                    "%zu overflows", e->rank, name, count);
  if (buf == NULL && count > 0)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_register on rank %d: '%s' has a "
                    "NULL buffer and count %zu", e->rank, name, count);
  if (e->ntensors >= INT_MAX - 1)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_register: too many tensors");
  if (e->ntensors == e->cap_tensors) {
    size_t cap = e->cap_tensors ? 2 * e->cap_tensors : 64;
    eng_tensor *t = gs_realloc(e->tensors, cap * sizeof *t);
    if (t == NULL) return GS_ERR_NOMEM;
    e->tensors = t;
    e->cap_tensors = cap;
  }
  eng_tensor *t = &e->tensors[e->ntensors];
  memset(t, 0, sizeof *t);
  t->name = str_dup(name);
  if (t->name == NULL) return GS_ERR_NOMEM;
  t->buf = buf;
  t->count = count;
  t->dtype = dtype;
  t->comm = count > 0 ? (long)e->ncomm++ : -1;
  if (id) *id = (int)e->ntensors;
  e->ntensors++;
  return GS_OK;
}

/* Closes registration: sizes the per-tensor state and the event ring (it
 * holds two iterations of events, more than can ever be outstanding), and
 * starts the threads. */
static gs_status freeze(gs_engine *e) {
  size_t L = e->ncomm, cap = 64;
  while (cap < 2 * (e->ntensors + 4)) cap *= 2;
  if (cap > (1u << 30)) return gs_error(GS_ERR_INVALID_ARG, "gs_engine: too many tensors");
  e->ring.slots = gs_calloc(cap, sizeof(eng_event));
  e->ring.mask = (uint32_t)(cap - 1);
  e->comm_ids = gs_calloc(L + 1, sizeof(long));
  e->t_iter = gs_calloc(L + 1, sizeof(uint64_t));
  e->t_seq = gs_calloc(L + 1, sizeof(uint64_t));
  e->ready = gs_calloc(L + 1, 1);
  e->stamp = gs_calloc(L + 1, sizeof(uint64_t));
  e->pending = gs_calloc(L + 1, sizeof(size_t));
  e->w_bwd = gs_calloc(L + 1, sizeof(double));
  e->plan_body = gs_calloc(3 * L + 2, sizeof(double));
  if (!e->ring.slots || !e->comm_ids || !e->t_iter || !e->t_seq || !e->ready ||
      !e->stamp || !e->pending || !e->w_bwd || !e->plan_body)
    return GS_ERR_NOMEM;
  for (size_t i = 0; i < e->ntensors; i++)
    if (e->tensors[i].comm >= 0) e->comm_ids[e->tensors[i].comm] = (long)i;
  gs_cost_topo topo = {e->size, gs_comm_nodes(e->comm)};
  if (gs_plan_cost_from_net(gs_comm_cost(e->comm), topo, GS_ALGO_AUTO, &e->cost) != GS_OK)
    gs_plan_cost_from_ab(0, 0, &e->cost);
  if (pthread_create(&e->completion_thread, NULL, completion_main, e) != 0)
    return gs_error(GS_ERR_INTERNAL, "gs_engine: cannot start the completion thread");
  if (pthread_create(&e->launch_thread, NULL, launch_main, e) != 0) {
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    pthread_cond_broadcast(&e->cv_inflight);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->completion_thread, NULL);
    return gs_error(GS_ERR_INTERNAL, "gs_engine: cannot start the launch thread");
  }
  pthread_setname_np(e->completion_thread, "gs-complete"); /* for top -H, gdb */
  pthread_setname_np(e->launch_thread, "gs-launch");
  e->threads_started = 1;
  e->frozen = 1;
  e->iter_start_ns = 0;
  return GS_OK;
}

static void push_start(gs_engine *e) {
  eng_event ev = {EV_START, 0, e->iter_start_ns, e->fwd_wait_ns};
  ring_push(&e->ring, &ev);
  e->started = 1;
}

/* Issues dear's all-gathers, in forward order, up to forward group `upto`. */
static gs_status issue_allgathers_locked(gs_engine *e, size_t upto) {
  eng_plan *p = e->plan;
  while (e->ag_next <= upto && e->ag_next < p->ngroups) {
    size_t g = p->ngroups - 1 - e->ag_next++;
    for (size_t k = p->gmsg[g]; k < p->gmsg[g + 1]; k++) {
      GS_CHECK(eng_issue_locked(e, &p->msgs[k], OP_AG, e->ag_iter));
      e->ag_last_seq = e->issued_seq;
    }
  }
  if (e->ag_next >= p->ngroups) e->ag_pending = 0;
  return GS_OK;
}

/* DeAR's buffer contract (engine.h). With dear and forward_overlap, the
 * all-gathers of the last iteration that the trainer did not wait for with
 * gs_engine_wait_tensor are issued (in forward order, the same on every
 * rank) and finished here, on the training thread, before the first
 * grad_ready (or a wait without one) of the next iteration returns: once it
 * has, the engine writes no buffer of the last iteration any more, so
 * backward may write them. The tensor that call marks (`id`, -1 for wait)
 * was written before the call: if its average was not in place by then, the
 * engine would overwrite the new gradient, so that is GS_ERR_STATE. */
static gs_status finish_allgathers(gs_engine *e, int id) {
  pthread_mutex_lock(&e->mu);
  if (!(e->forward_overlap && e->flush_dear && e->plan && e->iter > 0 &&
        e->ag_iter + 1 == e->iter)) {
    pthread_mutex_unlock(&e->mu);
    return GS_OK;
  }
  long c = id >= 0 ? e->tensors[id].comm : -1;
  int in_place = c < 0 || (e->t_iter[c] >= e->iter && e->completed_seq >= e->t_seq[c]);
  gs_status st = GS_OK;
  if (e->ag_pending) st = issue_allgathers_locked(e, SIZE_MAX);
  eng_watch w;
  watch_init(&w, "gs_engine_grad_ready (finishing dear's all-gathers)", -1);
  while (st == GS_OK && !atomic_load(&e->failed) && e->completed_seq < e->ag_last_seq)
    watch_wait_locked(e, &w);
  if (atomic_load(&e->failed)) {
    st = failed_status_locked(e);
    pthread_mutex_unlock(&e->mu);
    return st;
  }
  pthread_mutex_unlock(&e->mu);
  if (st == GS_OK && !in_place)
    st = gs_error(GS_ERR_STATE, "gs_engine_grad_ready on rank %d: tensor '%s' marked "
                  "ready in iteration %llu before its average of iteration %llu was in "
                  "place (dear with forward_overlap: call gs_engine_wait_tensor for a "
                  "tensor before backward writes its buffer); the engine would have "
                  "overwritten the new gradient", e->rank, e->tensors[id].name,
                  (unsigned long long)e->iter, (unsigned long long)e->iter - 1);
  if (st != GS_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", gs_last_error());
    eng_fail(e, st, msg);
  }
  return st;
}

gs_status gs_engine_grad_ready(gs_engine *e, int id) {
  if (e == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_engine_grad_ready: engine is NULL");
  if (atomic_load_explicit(&e->failed, memory_order_relaxed)) return failed_status(e);
  if (id < 0 || (size_t)id >= e->ntensors)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_grad_ready on rank %d: tensor id %d "
                    "is not registered (%zu tensors)", e->rank, id, e->ntensors);
  if (!e->frozen) GS_CHECK(freeze(e));
  eng_tensor *t = &e->tensors[id];
  if (t->marked == e->iter + 1)
    return gs_error(GS_ERR_STATE, "gs_engine_grad_ready on rank %d: tensor '%s' marked "
                    "ready twice in iteration %llu", e->rank, t->name,
                    (unsigned long long)e->iter);
  if (!e->started) {
    GS_CHECK(finish_allgathers(e, id));
    push_start(e);
  }
  t->marked = e->iter + 1;
  eng_event ev = {EV_READY, (uint32_t)id, gs_now_ns(), 0};
  ring_push(&e->ring, &ev);
  return GS_OK;
}

gs_status gs_engine_set_lr(gs_engine *e, double lr) {
  if (e == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_engine_set_lr: engine is NULL");
  if (!(lr >= 0) || !isfinite(lr))
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_set_lr on rank %d: learning rate %g "
                    "must be finite and >= 0", e->rank, lr);
  uint64_t bits;
  memcpy(&bits, &lr, sizeof bits);
  atomic_store_explicit(&e->zlr_bits, bits, memory_order_relaxed);
  return GS_OK;
}

gs_status gs_engine_wait(gs_engine *e) {
  if (e == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_engine_wait: engine is NULL");
  if (atomic_load(&e->failed)) return failed_status(e);
  if (!e->frozen) GS_CHECK(freeze(e));
  uint64_t t0 = gs_now_ns();
  if (!e->started) {
    GS_CHECK(finish_allgathers(e, -1));
    push_start(e);
  }
  eng_event ev = {EV_FLUSH, 0, t0, 0};
  ring_push(&e->ring, &ev);
  e->started = 0;
  gs_status st = GS_OK;
  eng_watch w;
  watch_init(&w, "gs_engine_wait", -1);
  pthread_mutex_lock(&e->mu);
  while (!atomic_load(&e->failed) &&
         !(e->flushed_iter > e->iter && e->completed_seq >= e->flush_seq))
    watch_wait_locked(e, &w);
  if (!atomic_load(&e->failed) && e->flush_dear && e->plan) {
    /* Dear: every reduce-scatter is done. Start the all-gathers: the first
     * group in forward order now (DeAR's step), the others from
     * wait_tensor; or all of them, waited for here, without overlap. */
    e->ag_pending = 1;
    e->ag_iter = e->iter;
    e->ag_next = 0;
    st = issue_allgathers_locked(e, e->forward_overlap ? 0 : SIZE_MAX);
    if (st == GS_OK && !e->forward_overlap) {
      uint64_t last = e->ag_last_seq;
      while (!atomic_load(&e->failed) && e->completed_seq < last)
        watch_wait_locked(e, &w);
    }
  }
  if (atomic_load(&e->failed)) st = failed_status_locked(e);
  uint64_t t1 = gs_now_ns();
  e->stats.wait_s += (double)(t1 - t0) * 1e-9;
  e->stats.iterations = e->iter + 1;
  pthread_mutex_unlock(&e->mu);
  if (st != GS_OK && !atomic_load(&e->failed)) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", gs_last_error());
    eng_fail(e, st, msg);
  }
  if (e->timeline) tl_event(e->timeline, TL_WAIT, "wait", t0, t1, NULL);
  e->iter++;
  e->iter_start_ns = t1;
  e->fwd_wait_ns = 0;
  return st;
}

gs_status gs_engine_wait_tensor(gs_engine *e, int id) {
  if (e == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_engine_wait_tensor: engine is NULL");
  if (atomic_load(&e->failed)) return failed_status(e);
  if (id < 0 || (size_t)id >= e->ntensors)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_wait_tensor on rank %d: tensor id "
                    "%d is not registered (%zu tensors)", e->rank, id, e->ntensors);
  long c = e->tensors[id].comm;
  if (c < 0 || e->iter == 0) return GS_OK;
  uint64_t target = e->iter - 1, t0 = gs_now_ns();
  gs_status st = GS_OK;
  eng_watch w;
  watch_init(&w, "gs_engine_wait_tensor", id);
  pthread_mutex_lock(&e->mu);
  if (e->ag_pending && e->ag_iter == target && e->plan) {
    size_t fwd = e->plan->ngroups - 1 - e->plan->group_of[c];
    st = issue_allgathers_locked(e, fwd + 1);
  }
  while (st == GS_OK && !atomic_load(&e->failed) &&
         !(e->t_iter[c] >= target + 1 && e->completed_seq >= e->t_seq[c]))
    watch_wait_locked(e, &w);
  if (atomic_load(&e->failed)) st = failed_status_locked(e);
  uint64_t t1 = gs_now_ns();
  e->stats.wait_s += (double)(t1 - t0) * 1e-9;
  pthread_mutex_unlock(&e->mu);
  e->fwd_wait_ns += t1 - t0;
  if (e->timeline && t1 - t0 > 1000) {
    char name[160];
    snprintf(name, sizeof name, "wait_tensor %s", e->tensors[id].name);
    tl_event(e->timeline, TL_WAIT, name, t0, t1, NULL);
  }
  return st;
}

gs_status gs_engine_trace(gs_engine *e, const char *track, const char *name,
                          double start_s, double end_s) {
  if (!e || !track || !name)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_trace: a NULL argument");
  if (!(start_s >= 0) || !(end_s >= 0))
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_trace: times must be >= 0 seconds "
                    "of CLOCK_MONOTONIC (got %g, %g)", start_s, end_s);
  int t = tl_caller_track(e->timeline, track);
  if (t >= 0)
    tl_event(e->timeline, t, name, (uint64_t)(start_s * 1e9), (uint64_t)(end_s * 1e9),
             NULL);
  return GS_OK;
}

/* ---- Compressor memory, per tensor ------------------------------------------ */

unsigned gs_engine_memory_kinds(gs_engine *e) { return e ? e->zkinds : 0; }

/* The checks both memory calls make: a registered id, between iterations
 * (so that the launch thread runs no exchange: it is waiting for the next
 * iteration's first event), a healthy engine. */
static gs_status memory_call(gs_engine *e, int id, const void *mem, const char *fn) {
  if (e == NULL || mem == NULL) return gs_error(GS_ERR_INVALID_ARG, "%s: NULL argument", fn);
  if (atomic_load(&e->failed)) return failed_status(e);
  if (id < 0 || (size_t)id >= e->ntensors)
    return gs_error(GS_ERR_INVALID_ARG, "%s on rank %d: tensor id %d is not registered "
                    "(%zu tensors)", fn, e->rank, id, e->ntensors);
  if (e->started)
    return gs_error(GS_ERR_STATE, "%s on rank %d: tensor '%s': iteration %llu is open "
                    "(call between gs_engine_wait and the next grad_ready)", fn, e->rank,
                    e->tensors[id].name, (unsigned long long)e->iter);
  return GS_OK;
}

/* Tensor id's compressed message in the plan in use and its index there
 * (mu held), or NULL. */
static eng_msg *memory_msg(gs_engine *e, int id, size_t *at) {
  eng_plan *p = e->plan;
  for (size_t k = 0; p != NULL && k < p->nmsgs; k++) {
    eng_msg *m = &p->msgs[k];
    for (size_t i = 0; m->zst != NULL && i < m->n; i++)
      if (m->ids[i] == id) {
        *at = i;
        return m;
      }
  }
  return NULL;
}

gs_status gs_engine_memory_get(gs_engine *e, int id, gs_compress_memory *out) {
  GS_CHECK(memory_call(e, id, out, "gs_engine_memory_get"));
  out->have = 0;
  out->step = 0;
  out->lr = 0;
  out->adapt = 0;
  if (e->zc == NULL || e->tensors[id].count == 0) return GS_OK;
  const eng_tensor *t = &e->tensors[id];
  size_t at = 0;
  gs_status st = GS_OK;
  pthread_mutex_lock(&e->mu);
  eng_msg *m = memory_msg(e, id, &at);
  if (m != NULL) st = gs_compress_memory_get(m->zst, m->off[at], t->count, out);
  else if (t->zpending != NULL) st = gs_compress_memory_get(t->zpending, 0, t->count, out);
  pthread_mutex_unlock(&e->mu);
  return st;
}

gs_status gs_engine_memory_set(gs_engine *e, int id, const gs_compress_memory *in) {
  GS_CHECK(memory_call(e, id, in, "gs_engine_memory_set"));
  eng_tensor *t = &e->tensors[id];
  if (e->zc == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_memory_set on rank %d: tensor '%s': "
                    "the engine compresses nothing (compression '%s')", e->rank, t->name,
                    e->zspec);
  if (t->count == 0) return GS_OK;
  /* The memory goes into a state of the tensor's own first: its checks are
   * gs_compress_memory_put's, and from there it moves into a message like a
   * regrouped tensor's memory (gs_compress_state_carry). */
  gs_compress_state *own = NULL;
  GS_CHECK(gs_compress_state_create(e->zc, t->count, &e->zopts, &own));
  gs_status st = gs_compress_memory_put(own, 0, t->count, in);
  if (st != GS_OK) {
    char why[900];
    gs__error_copy(why, sizeof why);
    gs_compress_state_destroy(own);
    return gs_error(st, "gs_engine_memory_set on rank %d: tensor '%s': %s", e->rank,
                    t->name, why);
  }
  size_t at = 0;
  pthread_mutex_lock(&e->mu);
  eng_msg *m = memory_msg(e, id, &at);
  if (m != NULL) {
    st = gs_compress_state_carry(m->zst, m->off[at], own, 0, t->count);
    gs_compress_state_destroy(own);
  } else {
    gs_compress_state_destroy(t->zpending);
    t->zpending = own;
  }
  pthread_mutex_unlock(&e->mu);
  return st;
}

gs_status gs_engine_destroy(gs_engine *e) {
  if (e == NULL) return GS_OK;
  gs_status st = GS_OK;
  if (e->threads_started) {
    /* Dear's last all-gathers: every rank issues them here, in order. */
    pthread_mutex_lock(&e->mu);
    if (e->ag_pending && e->plan && !atomic_load(&e->failed))
      issue_allgathers_locked(e, SIZE_MAX);
    pthread_mutex_unlock(&e->mu);
    /* Both threads may wait on the other ranks (a control exchange, a
     * collective): the joins come after watched waits, so that destroy
     * cannot hang either. */
    eng_event ev = {EV_STOP, 0, 0, 0};
    ring_push(&e->ring, &ev);
    eng_watch w;
    watch_init(&w, "gs_engine_destroy", -1);
    pthread_mutex_lock(&e->mu);
    while (!e->launch_exited) watch_wait_locked(e, &w);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->launch_thread, NULL);
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    pthread_cond_broadcast(&e->cv_inflight);
    while (!e->completion_exited) watch_wait_locked(e, &w);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->completion_thread, NULL);
  }
  if (e->timeline) {
    if (tl_write(e->timeline, e->rank, e->size) != GS_OK) st = GS_ERR_IO;
    tl_free(e->timeline);
  }
  if (e->samples) { /* created: the sync objects exist */
    pthread_cond_destroy(&e->cv_done);
    pthread_cond_destroy(&e->cv_inflight);
    pthread_mutex_destroy(&e->mu);
  }
  eng_plan_free(e->plan); /* its compressor states first */
  gs_compressor_destroy(e->zc);
  gs_xchg_ws_destroy(e->zws);
  gs_free(e->zspec);
  for (size_t i = 0; i < e->ntensors; i++) {
    gs_free(e->tensors[i].name);
    gs_compress_state_destroy(e->tensors[i].zpending);
  }
  gs_free(e->tensors);
  gs_free(e->comm_ids);
  gs_free(e->ring.slots);
  gs_free(e->fifo);
  gs_free(e->t_iter);
  gs_free(e->t_seq);
  gs_free(e->ready);
  gs_free(e->stamp);
  gs_free(e->pending);
  gs_free(e->w_bwd);
  gs_free(e->samples);
  gs_free(e->policy_spec);
  gs_free(e->plan_body);
  gs_free(e);
  return st;
}

gs_status gs_engine_get_stats(gs_engine *e, gs_engine_stats *out) {
  if (e == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_get_stats: NULL argument");
  pthread_mutex_lock(&e->mu);
  *out = e->stats;
  pthread_mutex_unlock(&e->mu);
  return GS_OK;
}

gs_status gs_engine_get_plan(gs_engine *e, gs_plan **out) {
  if (e == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_get_plan: NULL argument");
  *out = NULL;
  pthread_mutex_lock(&e->mu);
  gs_status st = e->plan ? eng_copy_plan(e->plan, out) : GS_OK;
  pthread_mutex_unlock(&e->mu);
  return st;
}

gs_status gs_engine_get_profile(gs_engine *e, gs_profile **out) {
  if (e == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_engine_get_profile: NULL argument");
  *out = NULL;
  pthread_mutex_lock(&e->mu);
  gs_status st = e->plan ? eng_copy_profile(e->plan->profile, out) : GS_OK;
  pthread_mutex_unlock(&e->mu);
  return st;
}
