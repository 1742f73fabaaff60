/*
 * The progress thread and requests: the queue that the public calls (coll.c,
 * sparse_coll.c) fill, the thread that runs each request in turn
 * (dispatch.c), and gs_wait/gs_test.
 *
 * Threading: between gs_comm_create and gs_comm_destroy only the progress
 * thread calls MPI (Horovod's shape). A request's `done` is set under the
 * comm's mutex and read without it to spin.
 */
#include <sched.h>
#include <stdio.h>

#include "comm_internal.h"

/* Spins until `flag` is non-zero or spin_s has passed. A blocking wait on a
 * condition variable costs two scheduler wake-ups (about 10 us here) per
 * collective, which small messages on a fast network cannot afford; a short
 * spin, yielding the core, catches work that arrives right away. */
static int spin_until(atomic_int *flag, double spin_s) {
  if (spin_s <= 0) return atomic_load(flag) != 0;
  double end = gs_now() + spin_s;
  for (int i = 0;; i++) {
    if (atomic_load_explicit(flag, memory_order_acquire)) return 1;
    if ((i & 63) == 63) {
      if (gs_now() > end) return 0;
      sched_yield();
    }
  }
}


void *progress_main(void *arg) {
  gs_comm *c = arg;
  for (;;) {
    spin_until(&c->queued, c->spin_s);
    pthread_mutex_lock(&c->mu);
    while (c->head == NULL && !c->stopping) {
      c->thread_sleeping = 1;
      pthread_cond_wait(&c->cv_work, &c->mu);
      c->thread_sleeping = 0;
    }
    gs_request *req = c->head;
    if (req == NULL) { /* stopping with an empty queue */
      pthread_mutex_unlock(&c->mu);
      break;
    }
    pthread_mutex_unlock(&c->mu);
    int failed = atomic_load(&c->failed);

    uint64_t seq = atomic_fetch_add_explicit(&c->seq, 1, memory_order_relaxed) + 1;
    gs_status st;
    gs_clear_error();
    watchdog_begin(c, &req->args, seq);
    if (failed) {
      st = gs_error(GS_ERR_STATE, "rank %d: the communicator failed earlier "
                    "and cannot run %s: %s", c->world.rank,
                    coll_kind_name(req->args.kind), c->failure);
    } else {
      st = fault_due(c, seq) ? fault_inject(c, &req->args, seq)
                             : coll_execute(c, &req->args);
      if (st == GS_ERR_MPI) {
        /* The message streams between ranks may now be out of step. */
        snprintf(c->failure, sizeof c->failure, "%s", gs_last_error());
        comm_mark_failed(c);
      }
    }
    watchdog_end(c);
    gs__error_copy(req->message, sizeof req->message);

    pthread_mutex_lock(&c->mu);
    c->head = req->next;
    if (c->head == NULL) c->tail = NULL;
    atomic_fetch_sub(&c->queued, 1);
    req->status = st;
    atomic_store_explicit(&req->done, 1, memory_order_release);
    if (c->waiters) pthread_cond_broadcast(&c->cv_done);
    pthread_mutex_unlock(&c->mu);
  }
  return NULL;
}

gs_status comm_enqueue(gs_comm *c, gs_request *req) {
  pthread_mutex_lock(&c->mu);
  if (c->stopping) {
    pthread_mutex_unlock(&c->mu);
    return gs_error(GS_ERR_STATE, "the communicator is being destroyed");
  }
  req->next = NULL;
  if (c->tail) c->tail->next = req;
  else c->head = req;
  c->tail = req;
  c->enqueued++;
  /* A rank that has left tells its peers of every later request (a
   * shutdown's own collectives), so that none of them is blamed on it. */
  if (c->left) leave_send_locked(c, c->enqueued);
  atomic_fetch_add_explicit(&c->queued, 1, memory_order_release);
  if (c->thread_sleeping) pthread_cond_signal(&c->cv_work);
  pthread_mutex_unlock(&c->mu);
  return GS_OK;
}

static void request_free(gs_request *req) {
  gs_free(req->args.counts);
  gs_free(req->args.displs);
  gs_free(req->args.rcounts);
  gs_free(req->args.rdispls);
  sparse_args_free(req->args.sparse);
  gs_free(req);
}

gs_status gs_wait(gs_request *req) {
  if (req == NULL) return GS_OK;
  gs_comm *c = req->comm;
  if (!spin_until(&req->done, c->spin_s)) {
    /* Never forever: the wait wakes every watchdog tick and looks for a
     * stall itself, so it ends even where the watchdog thread could not
     * run. */
    pthread_mutex_lock(&c->mu);
    c->waiters++;
    while (!atomic_load(&req->done)) {
      if (c->wd_tick_s <= 0) {
        pthread_cond_wait(&c->cv_done, &c->mu);
        continue;
      }
      struct timespec ts = watchdog_deadline(c->wd_tick_s);
      pthread_cond_timedwait(&c->cv_done, &c->mu, &ts);
      if (atomic_load(&req->done)) break;
      pthread_mutex_unlock(&c->mu);
      watchdog_check(c);
      pthread_mutex_lock(&c->mu);
    }
    c->waiters--;
    pthread_mutex_unlock(&c->mu);
  }
  gs_status st = req->status;
  if (st != GS_OK) gs__error_set_message(req->message);
  request_free(req);
  return st;
}

gs_status gs_test(gs_request *req, int *done) {
  if (done == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_test: done is NULL");
  if (req == NULL) {
    *done = 1;
    return GS_OK;
  }
  *done = atomic_load_explicit(&req->done, memory_order_acquire);
  return GS_OK;
}

