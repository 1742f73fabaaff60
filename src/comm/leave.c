/*
 * Leaving: a rank whose program ends while the others still run
 * (gs_comm_leave). MPI offers no way to learn that a peer has stopped
 * taking part: the others would wait in their next collective until their
 * watchdog's GRADSYNC_TIMEOUT (300 s by default). A rank that leaves sends
 * each peer, on the communicator's own control duplicate (ctrl), the number
 * of requests it has enqueued so far (with the communicator's nonce, since
 * a goodbye that arrives after a peer freed ctrl may be delivered to a
 * communicator MPI creates later with the same context id), and again
 * after each request it enqueues later (a shutdown may still issue
 * collectives: DeAR's last all-gathers). MPI keeps one sender's messages in order, so the last one
 * received is the peer's final count. A watchdog that sees a stall reads
 * them: a peer that has left before enqueuing the stalled request never
 * will, and the job ends at once with a message naming it. A peer that
 * left after enqueuing it is not blamed (the stall is another rank's, and
 * the timeout stays in charge), nor one whose count is younger than
 * LEAVE_GRACE_S: a shutdown issues its own collectives just after leaving,
 * and their counts may still be on the way.
 *
 * Threading: the sends are made by the thread that leaves or enqueues
 * (under comm->mu), the reads by the watchdog or a waiting thread (one at a
 * time, bye_mu), concurrently with the progress thread's MPI calls: only
 * under MPI_THREAD_MULTIPLE. Below it, leaving does nothing.
 */
#include <stdio.h>
#include <time.h>

#include "comm_internal.h"

#define LEAVE_GRACE_S 1.0
#define LEAVE_STAGGER_S 5.0

struct bye_msg {
  struct bye_msg *next;
  uint64_t body[2]; /* the communicator's nonce, the count */
  MPI_Request req[]; /* one per rank; this rank's is MPI_REQUEST_NULL */
};

int leave_usable(const gs_comm *c) {
  return c->ctrl != MPI_COMM_NULL && c->peer_bye != NULL &&
         c->thread_level >= MPI_THREAD_MULTIPLE;
}

/* Sends `count` to every peer. Called with c->mu held. */
gs_status leave_send_locked(gs_comm *c, uint64_t count) {
  int n = c->world.size;
  struct bye_msg *m = gs_malloc(sizeof *m + (size_t)n * sizeof(MPI_Request));
  if (m == NULL) return GS_ERR_NOMEM;
  m->body[0] = c->nonce;
  m->body[1] = count;
  for (int p = 0; p < n; p++) m->req[p] = MPI_REQUEST_NULL;
  m->next = c->byes;
  c->byes = m;
  for (int p = 0; p < n; p++) {
    if (p == c->world.rank) continue;
    int rc = MPI_Isend(m->body, 2, MPI_UINT64_T, p, TAG_BYE, c->ctrl, &m->req[p]);
    if (rc != MPI_SUCCESS) return comm_mpi_error(&c->world, "MPI_Isend (gs_comm_leave)", rc);
  }
  return GS_OK;
}

gs_status gs_comm_leave(gs_comm *c) {
  if (c == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_comm_leave: comm is NULL");
  if (!leave_usable(c) || atomic_load(&c->failed)) return GS_OK;
  pthread_mutex_lock(&c->mu);
  gs_status st = GS_OK;
  if (!c->left) {
    c->left = 1;
    st = leave_send_locked(c, c->enqueued);
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

/* Reads the goodbyes that have arrived (the last one of a peer is its
 * final count). Called with bye_mu held. */
static void leave_drain(gs_comm *c) {
  for (;;) {
    int flag = 0;
    MPI_Message msg;
    MPI_Status status;
    if (MPI_Improbe(MPI_ANY_SOURCE, TAG_BYE, c->ctrl, &flag, &msg, &status) != MPI_SUCCESS ||
        !flag)
      return;
    uint64_t body[2] = {0, 0};
    int got = 0;
    if (MPI_Mrecv(body, 2, MPI_UINT64_T, &msg, &status) != MPI_SUCCESS ||
        MPI_Get_count(&status, MPI_UINT64_T, &got) != MPI_SUCCESS)
      return;
    /* Another communicator's, late (MPI reuses a freed one's context id
     * for a new one): not this one's. */
    if (got != 2 || body[0] != c->nonce) continue;
    if (status.MPI_SOURCE >= 0 && status.MPI_SOURCE < c->world.size)
      c->peer_bye[status.MPI_SOURCE] = (struct peer_bye){body[1] + 1, gs_now()};
  }
}

void leave_check(gs_comm *c, uint64_t seq, double stalled, const char *what) {
  if (!leave_usable(c)) return;
  if (pthread_mutex_trylock(&c->bye_mu) != 0) return; /* another thread reads */
  leave_drain(c);
  int who = -1, first = -1;
  uint64_t issued = 0;
  double now = gs_now();
  for (int p = 0; p < c->world.size; p++) {
    /* Gone: left before issuing what this rank waits for (this rank's own
     * entry stays 0). The lowest rank not gone may wait for it too (one
     * that left itself included: its shutdown's collectives can wait for
     * the gone rank). */
    uint64_t b = c->peer_bye[p].count;
    int gone = b != 0 && b - 1 < seq;
    if (first < 0 && !gone) first = p;
    /* A count newer than LEAVE_GRACE_S may still be followed by the
     * peer's shutdown collectives, issued just after it left. */
    if (gone && now - c->peer_bye[p].at >= LEAVE_GRACE_S && (who < 0 || b - 1 < issued)) {
      who = p;
      issued = b - 1;
    }
  }
  pthread_mutex_unlock(&c->bye_mu);
  if (who < 0) return;
  /* Every rank left waiting sees the same goodbye within the same tick,
   * and MPI_Abort from several processes at one instant left mpirun
   * hanging (under ASan, 1 run in 1). The lowest rank that is not gone
   * ends the job; the others only if it has not done so LEAVE_STAGGER_S
   * later (it may be busy elsewhere). (Until a tester's runs, "not gone"
   * was "not left", and two ranks waiting in their own shutdown both
   * ended the job, 7 runs in 7.) */
  if (first != c->world.rank && stalled < LEAVE_STAGGER_S) return;
  if (atomic_exchange(&c->aborting, 1)) return; /* another thread is at it */
  uint64_t base = atomic_load_explicit(&c->user_base, memory_order_relaxed);
  unsigned long long done = (unsigned long long)(base != UINT64_MAX && issued > base
                                                     ? issued - base : 0);
  gs_comm_abort(c, 1, "rank %d has left (its program is ending: gs_comm_leave) after "
                "issuing %llu collective%s, and this rank waits for it in %s, which it "
                "will never issue; ending the job", who, done, done == 1 ? "" : "s", what);
}

/* Whether every peer has said goodbye. Called with bye_mu held. */
static int leave_all_gone(const gs_comm *c) {
  for (int p = 0; p < c->world.size; p++)
    if (p != c->world.rank && c->peer_bye[p].count == 0) return 0;
  return 1;
}

void leave_free(gs_comm *c) {
  if (leave_usable(c)) {
    pthread_mutex_lock(&c->bye_mu);
    leave_drain(c);
    /* A rank that left waits here for every peer's goodbye, not in
     * MPI_Finalize: a peer that ends the job instead (it waited for this
     * one) would otherwise call MPI_Abort while this rank sits in
     * MPI_Finalize's fence, and there mpirun hung (1 run in 2 of
     * comm_fault_leave_np3). Killed here, this rank is any rank killed
     * while it computes. So a program that leaves on one rank leaves on
     * every rank before it destroys (the binding's shutdown does). */
    long nap = 1000000;
    while (c->left && !atomic_load(&c->failed) && !leave_all_gone(c)) {
      struct timespec ts = {0, nap};
      nanosleep(&ts, NULL);
      if (nap < 20000000) nap *= 2;
      leave_drain(c);
    }
    pthread_mutex_unlock(&c->bye_mu);
  }
  while (c->byes) {
    struct bye_msg *m = c->byes;
    c->byes = m->next;
    int done = 0;
    /* Sixteen bytes go eagerly: complete at once unless the peer is gone.
     * Otherwise MPI may still read the buffer: freed after MPI_Finalize. */
    if (MPI_Testall(c->world.size, m->req, &done, MPI_STATUSES_IGNORE) == MPI_SUCCESS && done) {
      gs_free(m);
    } else {
      for (int p = 0; p < c->world.size; p++)
        if (m->req[p] != MPI_REQUEST_NULL) MPI_Request_free(&m->req[p]);
      orphan_free_later(m);
    }
  }
  gs_free(c->peer_bye);
  c->peer_bye = NULL;
}
