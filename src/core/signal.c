/* A signal routed to a thread of its own (gs_signal_route).
 *
 * Why: oneDNN 2.x's generated f32 GEMM kernels (the inner-product and
 * matmul layers on AVX2 and AVX-512) point the stack pointer into a heap
 * buffer while they run. A signal handler that runs on such a thread has
 * its frame (the saved registers, kilobytes with AVX-512) pushed below that
 * pointer, into the heap chunk before the buffer: the heap is corrupted and
 * the process aborts later in free() ("corrupted size vs. prev_size").
 * oneDNN fixed it in 3.11 (uxlfoundation/oneDNN#4845, #4855); Debian ships
 * 2.6. The cure on our side: the threads that compute never take the
 * signal. The caller's thread blocks it before it starts any computing
 * thread (they inherit the mask), and one thread of ours waits for it with
 * sigwait() and calls the callback there, as ordinary code. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "gs_internal.h"

#define SIGNAL_MAX 65

static _Atomic(gs_signal_fn) routes[SIGNAL_MAX];
static pthread_mutex_t started_lock = PTHREAD_MUTEX_INITIALIZER;
static int started[SIGNAL_MAX];

/* Threads that existed before the route and do not block the signal take it
 * here (their own stacks: none of them runs oneDNN's kernels). */
static void on_signal(int signo) {
  gs_signal_fn fn = atomic_load(&routes[signo]);
  if (fn) fn();
}

static void *waiter_main(void *arg) {
  int signo = (int)(intptr_t)arg;
  pthread_setname_np(pthread_self(), "gs-signal");
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  for (;;) {
    int got = 0;
    if (sigwait(&set, &got) != 0) continue;
    gs_signal_fn fn = atomic_load(&routes[got]);
    if (fn) fn();
  }
  return NULL;
}

gs_status gs_signal_route(int signo, gs_signal_fn fn) {
  if (signo <= 0 || signo >= SIGNAL_MAX || signo == SIGKILL || signo == SIGSTOP || !fn)
    return gs_error(GS_ERR_INVALID_ARG, "gs_signal_route: signal %d or callback NULL", signo);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
  if (rc != 0)
    return gs_error(GS_ERR_INTERNAL, "gs_signal_route: cannot block signal %d: %s", signo,
                    strerror(rc));
  atomic_store(&routes[signo], fn);
  gs_status st = GS_OK;
  pthread_mutex_lock(&started_lock);
  if (!started[signo]) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (sigaction(signo, &sa, NULL) != 0)
      st = gs_error(GS_ERR_INTERNAL, "gs_signal_route: sigaction(%d): %s", signo,
                    strerror(errno));
    else if ((rc = pthread_create(&t, &attr, waiter_main, (void *)(intptr_t)signo)) != 0)
      st = gs_error(GS_ERR_INTERNAL, "gs_signal_route: cannot start the thread for signal %d: %s",
                    signo, strerror(rc));
    else
      started[signo] = 1;
    pthread_attr_destroy(&attr);
  }
  pthread_mutex_unlock(&started_lock);
  return st;
}
