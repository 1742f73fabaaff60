/*
 * The communicator: MPI set-up, creation and destruction, accessors and
 * gs_comm_abort. The rest of src/comm/ holds the other concerns: config.c
 * (settings and their agreement), calibrate.c (the cost model), progress.c
 * (the progress thread and requests), dispatch.c (the table of algorithms),
 * watchdog.c, fault.c (GRADSYNC_FAULT) and agree.c (gs_agree).
 *
 * Threading: gs_comm_create and gs_comm_destroy make MPI calls on the
 * caller's thread, before the progress thread starts and after it stopped.
 * In between, only the progress thread calls MPI (Horovod's shape).
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm_internal.h"

static int mpi_inited_by_us;

/* Scratch memory of communicators that failed: a collective that failed may
 * leave its receives posted into it (MPI offers no cancel that is sure to
 * complete), and MPI still writes into them as late as MPI_Finalize. Freed
 * after MPI_Finalize by gs_finalize (kept, where the caller's MPI ends
 * later than gradsync: a little memory instead of a write into freed). */
enum { ORPHANS_MAX = 64 };
static void *orphans[ORPHANS_MAX];
static int norphans;
static pthread_mutex_t orphans_mu = PTHREAD_MUTEX_INITIALIZER;

void orphan_free_later(void *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&orphans_mu);
  if (norphans < ORPHANS_MAX) orphans[norphans++] = p; /* beyond: kept for good */
  pthread_mutex_unlock(&orphans_mu);
}

/* Set once a communicator of this process has failed (an MPI error inside
 * a collective, or gs_comm_abort): see gs_finalize. */
static atomic_int any_failed;

void comm_mark_failed(gs_comm *c) {
  atomic_store(&c->failed, 1);
  atomic_store(&any_failed, 1);
}

static void orphans_free(void) {
  pthread_mutex_lock(&orphans_mu);
  for (int i = 0; i < norphans; i++) gs_free(orphans[i]);
  norphans = 0;
  pthread_mutex_unlock(&orphans_mu);
}

/* MPI is running: initialised, and not finalized (MPI_Initialized stays
 * true after MPI_Finalize, when no MPI call but a few may be made). */
static gs_status mpi_running(const char *what) {
  int inited = 0, fin = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  if (fin)
    return gs_error(GS_ERR_STATE, "%s: MPI has been finalized (gs_finalize or MPI_Finalize); "
                    "it cannot be started again in this process", what);
  if (!inited)
    return gs_error(GS_ERR_STATE, "%s: MPI is not initialized (call gs_init or "
                    "MPI_Init_thread first)", what);
  return GS_OK;
}

/* Open MPI's TCP transport sends a message above btl_tcp_eager_limit (64 KB
 * by default) by rendezvous: the sender waits for the receiver to match it
 * and answer before the data moves, and both sides advance only while their
 * progress thread polls, which it does between naps (p2p.c). Measured on 4
 * emulated nodes at 1 Gbit/s, ring all-reduce, twice each: 256 KB 4.2-4.4 ->
 * 3.4 ms, 1 MB 19.1 -> 14.8 ms, 4 MB 62-63 -> 56 ms, 16 MB 230-233 -> 225 ms
 * with the limit at 1 MB + 64 KB, which sends the transfers' 1 MB pieces
 * (p2p.c) and the ring's segments at once; MPI's own all-reduce gained as
 * much up to 1 MB (22 -> 14 ms). The variable is set only where the
 * environment has none (a user's value wins; it overrides an MCA parameter
 * file's, as every OMPI_MCA_ variable does), and only when gradsync starts
 * MPI itself. */
#define TCP_EAGER_LIMIT "1114112"

gs_status gs_init(int *argc, char ***argv) {
  int inited = 0, fin = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  if (fin) return mpi_running("gs_init");
  if (inited) return GS_OK;
  setenv("OMPI_MCA_btl_tcp_eager_limit", TCP_EAGER_LIMIT, 0);
  int provided = 0;
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS)
    return gs_error(GS_ERR_MPI, "MPI_Init_thread failed (code %d)", rc);
  mpi_inited_by_us = 1;
  if (provided < MPI_THREAD_SERIALIZED)
    return gs_error(GS_ERR_UNSUPPORTED,
                    "the MPI library provides thread level %d; gradsync's "
                    "progress thread needs MPI_THREAD_SERIALIZED or better",
                    provided);
  return GS_OK;
}

/* After a failed collective MPI is not finalized. Open MPI's MPI_Finalize is
 * a fence over every rank: the rank whose call failed would wait there for
 * peers still stuck in the call it left, until their watchdogs abort the
 * job (never, without one), and mpirun itself deadlocked in its PMIx
 * server's finalize in a third of such runs (5 of 15: every rank had ended,
 * mpirun had not). Left running, MPI ends with the process, and mpirun ends
 * the job as soon as it sees that rank exit. The failed communicators'
 * scratch (orphans) is then kept: MPI may still write into it. */
gs_status gs_finalize(void) {
  if (!mpi_inited_by_us) return GS_OK;
  if (atomic_load(&any_failed)) return GS_OK;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
  mpi_inited_by_us = 0;
  orphans_free();
  return GS_OK;
}

gs_status comm_mpi_error(const coll_group *g, const char *what, int rc) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return gs_error(GS_ERR_MPI, "rank %d of %d: %s failed: %s", g->rank, g->size,
                  what, text);
}

gs_status comm_scratch(gs_comm *c, void **area, size_t *cap, size_t bytes,
                       void **out) {
  (void)c;
  if (*cap < bytes) {
    void *p = gs_realloc(*area, bytes);
    if (p == NULL) return GS_ERR_NOMEM;
    *area = p;
    *cap = bytes;
  }
  *out = *area;
  return GS_OK;
}

void split_blocks(size_t count, int parts, size_t *off, size_t *len) {
  size_t q = count / (size_t)parts, r = count % (size_t)parts;
  for (int i = 0; i < parts; i++) {
    off[i] = (size_t)i * q + GS_MIN((size_t)i, r);
    len[i] = q + ((size_t)i < r ? 1 : 0);
  }
}

/* ---- Creation ----------------------------------------------------------- */

static gs_status group_init(gs_comm *c, coll_group *g, MPI_Comm mpi) {
  g->mpi = mpi;
  g->progress = &c->progress_ns;
  g->owner = c;
  MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN);
  MPI_Comm_rank(mpi, &g->rank);
  MPI_Comm_size(mpi, &g->size);
  return GS_OK;
}

static gs_status setup_nodes(gs_comm *c) {
  MPI_Comm local, cross;
  int color = c->env_node;
  /* All ranks must take the same path: agree on whether every rank has a
   * GRADSYNC_NODE. */
  int have = color >= 0, all_have = 0;
  MPI_TRY(&c->world, MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN,
                                   c->world.mpi));
  int rc;
  if (all_have)
    rc = MPI_Comm_split(c->world.mpi, color, c->world.rank, &local);
  else
    rc = MPI_Comm_split_type(c->world.mpi, MPI_COMM_TYPE_SHARED, c->world.rank,
                             MPI_INFO_NULL, &local);
  if (rc != MPI_SUCCESS) return comm_mpi_error(&c->world, "split (node)", rc);
  GS_CHECK(group_init(c, &c->local, local));
  rc = MPI_Comm_split(c->world.mpi, c->local.rank, c->world.rank, &cross);
  if (rc != MPI_SUCCESS) return comm_mpi_error(&c->world, "split (cross)", rc);
  GS_CHECK(group_init(c, &c->cross, cross));
  /* Node index: rank in the cross communicator of local rank 0's. */
  int node = c->cross.rank;
  MPI_TRY(&c->local, MPI_Bcast(&node, 1, MPI_INT, 0, c->local.mpi));
  c->node = node;
  int lsize[2] = {c->local.size, -c->local.size};
  MPI_TRY(&c->world, MPI_Allreduce(MPI_IN_PLACE, lsize, 2, MPI_INT, MPI_MAX,
                                   c->world.mpi));
  c->uniform_nodes = lsize[0] == -lsize[1];
  int leaders = c->local.rank == 0;
  MPI_TRY(&c->world, MPI_Allreduce(&leaders, &c->nodes, 1, MPI_INT, MPI_SUM,
                                   c->world.mpi));
  return GS_OK;
}

/* MPI's thread level decides what may call MPI when. gradsync's progress
 * thread makes every MPI call of the collectives, and the watchdog may call
 * MPI_Abort, so MPI must allow calls from any thread, one at a time. */
static gs_status check_thread_level(gs_comm *c) {
  int provided = MPI_THREAD_SINGLE;
  int rc = MPI_Query_thread(&provided);
  if (rc != MPI_SUCCESS) return comm_mpi_error(&c->world, "MPI_Query_thread", rc);
  c->thread_level = provided;
  if (provided >= MPI_THREAD_SERIALIZED) return GS_OK;
  return gs_error(GS_ERR_UNSUPPORTED,
                  "MPI was initialised with thread level %s; gradsync's "
                  "progress thread needs MPI_THREAD_SERIALIZED (and an "
                  "application that calls MPI itself while a gs_comm exists, "
                  "MPI_THREAD_MULTIPLE): initialise MPI with gs_init or "
                  "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)",
                  provided == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE"
                                                : "MPI_THREAD_FUNNELED");
}

static void comm_free_mpi(gs_comm *c) {
  shm_free(c);
  if (c->cross.mpi != MPI_COMM_NULL) MPI_Comm_free(&c->cross.mpi);
  if (c->local.mpi != MPI_COMM_NULL) MPI_Comm_free(&c->local.mpi);
  if (c->world.mpi != MPI_COMM_NULL) MPI_Comm_free(&c->world.mpi);
  if (c->ctrl != MPI_COMM_NULL) MPI_Comm_free(&c->ctrl);
}


static int cond_init_monotonic(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
  return rc;
}

/* Fails a half-made communicator: its threads run, so destroy it. */
static gs_status create_fail(gs_comm *c, gs_status st) {
  char msg[1024];
  gs__error_copy(msg, sizeof msg);
  gs_comm_destroy(c);
  gs__error_set_message(msg);
  return st;
}

/* like: NULL, or the communicator whose cost model the new one takes
 * instead of calibrating (gs_comm_create_like). */
static gs_status comm_create(MPI_Comm mpi_comm, const gs_comm *like, gs_comm **out) {
  if (out == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_comm_create: out is NULL");
  *out = NULL;
  GS_CHECK(mpi_running("gs_comm_create"));
  if (mpi_comm == MPI_COMM_NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_comm_create: MPI_COMM_NULL");
  gs_comm *c = gs_calloc(1, sizeof *c);
  if (c == NULL) return GS_ERR_NOMEM;
  c->world.mpi = c->local.mpi = c->cross.mpi = c->ctrl = MPI_COMM_NULL;
  pthread_mutex_init(&c->bye_mu, NULL);
  c->given = mpi_comm;
  atomic_store(&c->user_base, UINT64_MAX);
  gs_status st;
  MPI_Comm dup;
  int rc = MPI_Comm_dup(mpi_comm, &dup);
  if (rc != MPI_SUCCESS) {
    gs_free(c);
    return gs_error(GS_ERR_MPI, "gs_comm_create: MPI_Comm_dup failed (%d)", rc);
  }
  GS_CHECK_GOTO(group_init(c, &c->world, dup), st, fail);
  /* Everything that can fail on one rank alone is checked before the first
   * collective that depends on it, and agreed on. */
  st = check_thread_level(c);
  if (st == GS_OK) st = config_read(c);
  GS_CHECK_GOTO(config_agree(c, st), st, fail);
  GS_CHECK_GOTO(setup_nodes(c), st, fail);
  GS_CHECK_GOTO(shm_init(c), st, fail);
  if (c->world.size > 1) {
    /* Goodbyes (leave.c) on their own duplicate. Without the peers' table
     * this rank cannot read them: leaving only loses its early ending. */
    int drc = MPI_Comm_dup(c->world.mpi, &c->ctrl);
    if (drc != MPI_SUCCESS) {
      st = comm_mpi_error(&c->world, "MPI_Comm_dup (control)", drc);
      goto fail;
    }
    c->peer_bye = gs_calloc((size_t)c->world.size, sizeof *c->peer_bye);
  }
  GS_CHECK_GOTO(calibrate_setup(c), st, fail);
  c->wd_tick_s = watchdog_tick(c);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv_work, NULL);
  cond_init_monotonic(&c->cv_done);
  pthread_mutex_init(&c->wd_mu, NULL);
  cond_init_monotonic(&c->wd_cv);
  if (pthread_create(&c->thread, NULL, progress_main, c) != 0) {
    st = gs_error(GS_ERR_INTERNAL, "gs_comm_create: cannot start the progress "
                  "thread");
    pthread_cond_destroy(&c->wd_cv);
    pthread_mutex_destroy(&c->wd_mu);
    pthread_cond_destroy(&c->cv_done);
    pthread_cond_destroy(&c->cv_work);
    pthread_mutex_destroy(&c->mu);
    goto fail;
  }
  /* Names for top -H, gdb and /proc: whose thread uses the CPU. */
  pthread_setname_np(c->thread, "gs-comm");
  /* Without the watchdog thread, gs_wait still looks for stalls itself. */
  if (c->wd_tick_s > 0)
    c->watchdog_running =
        pthread_create(&c->watchdog, NULL, watchdog_main, c) == 0;
  if (c->watchdog_running) pthread_setname_np(c->watchdog, "gs-watchdog");
  if (like != NULL) {
    /* Already the same on every rank (like's was agreed): no broadcast. */
    c->cost = like->cost;
  } else if (c->calibrate_bytes > 0 && c->world.size > 1 && !c->cost_from_env) {
    /* Fit every allreduce algorithm on this network (collective: every rank
     * took the same branch, since the settings are agreed on). */
    st = gs_comm_calibrate(c, c->calibrate_bytes);
    if (st != GS_OK) return create_fail(c, st);
  }
  if (like == NULL) calibrate_cache_save(c);
  if (c->world.size > 1 && like == NULL) {
    /* Rank 0's cost model for all: the measurements are maxima over ranks,
     * but one broadcast makes the algorithm choice agree by construction. */
    st = gs_bcast(c, &c->cost, sizeof c->cost, GS_U8, 0, GS_ALGO_MPI);
    if (st != GS_OK) return create_fail(c, st);
  }
  /* Every start-up collective has completed (gs_wait synchronised with the
   * progress thread), so seq is stable here. */
  atomic_store(&c->user_base, atomic_load(&c->seq));
  *out = c;
  return GS_OK;
fail:
  comm_free_mpi(c);
  gs_free(c->peer_bye);
  pthread_mutex_destroy(&c->bye_mu);
  gs_free(c);
  return st;
}

gs_status gs_comm_create(MPI_Comm mpi_comm, gs_comm **out) {
  return comm_create(mpi_comm, NULL, out);
}

gs_status gs_comm_create_like(gs_comm *parent, gs_comm **out) {
  if (parent == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_comm_create_like: parent is NULL");
  return comm_create(parent->given, parent, out);
}

gs_status gs_comm_destroy(gs_comm *c) {
  if (c == NULL) return GS_OK;
  pthread_mutex_lock(&c->mu);
  c->stopping = 1;
  pthread_cond_signal(&c->cv_work);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->thread, NULL);
  watchdog_stop(c);
  pthread_cond_destroy(&c->wd_cv);
  pthread_mutex_destroy(&c->wd_mu);
  pthread_cond_destroy(&c->cv_done);
  pthread_cond_destroy(&c->cv_work);
  pthread_mutex_destroy(&c->mu);
  leave_free(c);
  pthread_mutex_destroy(&c->bye_mu);
  comm_free_mpi(c);
  if (atomic_load(&c->failed)) {
    orphan_free_later(c->scratch);
    orphan_free_later(c->work);
  } else {
    gs_free(c->scratch);
    gs_free(c->work);
  }
  gs_free(c);
  return GS_OK;
}

double gs_comm_timeout_s(const gs_comm *c) { return c->timeout_s; }
double gs_comm_stall_warn_s(const gs_comm *c) { return c->stall_warn_s; }
int gs_comm_thread_level(const gs_comm *c) { return c->thread_level; }

/* Set by the first thread of this process to end the job: MPI_Abort is not
 * safe from two threads at once (measured: the engine's watchdog and the
 * communicator's, timing out on the same stall, crashed inside it). */
static atomic_int abort_started;

_Noreturn void gs_comm_abort(gs_comm *c, int code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int rank = c ? c->world.rank : -1;
  fprintf(stderr, "gradsync: rank %d: fatal: %s\n", rank, msg);
  fflush(stderr);
  if (c) {
    /* No lock: the progress thread may hold it while stuck. A torn read of
     * this flag cannot matter, the job is ending. */
    comm_mark_failed(c);
  }
  if (atomic_exchange(&abort_started, 1)) {
    /* Another thread is in MPI_Abort: let it end the job, and end this
     * process only if it has not after a while. */
    struct timespec left = {10, 0};
    while (nanosleep(&left, &left) != 0) {
    }
    _exit(code ? code : 1);
  }
  MPI_Abort(c ? c->world.mpi : MPI_COMM_WORLD, code ? code : 1);
  /* MPI_Abort can return when every rank aborts at once (ORTE loses the
   * race). End this rank with the code then, by _exit, not abort(): a
   * SIGABRT runs Open MPI's backtrace handler, which is not signal-safe. */
  _exit(code ? code : 1);
}

int gs_comm_rank(const gs_comm *c) { return c->world.rank; }
MPI_Comm gs_comm_mpi(const gs_comm *c) { return c ? c->given : MPI_COMM_NULL; }
int gs_comm_size(const gs_comm *c) { return c->world.size; }
int gs_comm_local_rank(const gs_comm *c) { return c->local.rank; }
int gs_comm_local_size(const gs_comm *c) { return c->local.size; }
int gs_comm_node(const gs_comm *c) { return c->node; }
int gs_comm_nodes(const gs_comm *c) { return c->nodes; }
int gs_comm_shared_memory(const gs_comm *c) { return shm_active(c); }
const gs_cost_params *gs_comm_cost(const gs_comm *c) { return &c->cost; }
void gs_comm_set_cost(gs_comm *c, const gs_cost_params *p) { c->cost = *p; }

gs_algo gs_comm_choose_allreduce(const gs_comm *c, size_t bytes) {
  gs_algo a = c->forced_allreduce;
  if (a == GS_ALGO_AUTO) {
    gs_cost_topo t = {c->world.size, c->nodes};
    if (!c->uniform_nodes) t.nodes = c->world.size; /* hier not applicable */
    a = gs_cost_best_allreduce(&c->cost, t, (double)bytes, NULL);
  }
  if (a == GS_ALGO_HIER && !c->uniform_nodes) a = GS_ALGO_RING;
  return a;
}

