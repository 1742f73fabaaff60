/*
 * Multi-rank failure tests of the communicator, driven by test_faults.sh,
 * which sets the environment per case (and per rank) and checks exit
 * statuses, messages and how long the job took to end.
 *
 *   test_faults run ALGO ITERS [hang|exit]  ITERS allreduces with ALGO;
 *                                   the GRADSYNC_FAULT the script sets fails
 *                                   or stalls one of them on one rank
 *   test_faults healthy             idle gaps and runs of collectives
 *                                   longer than GRADSYNC_TIMEOUT: nothing
 *                                   may fire
 *   test_faults create STATUS TEXT...  gs_comm_create must fail with STATUS
 *                                   (a gs_strerror name's GS_ERR_ suffix, or
 *                                   OK) and a message holding every TEXT
 *   test_faults thread LEVEL [RANK] MPI initialised by the application with
 *                                   LEVEL (single|funneled|serialized|
 *                                   multiple), on RANK only if given (the
 *                                   others: multiple)
 *   test_faults leave ALGO RANK     RANK leaves (gs_comm_leave) after three
 *                                   all-reduces; the others issue a fourth
 *   test_faults leave_ok            healthy ends with gs_comm_leave
 *   test_faults look_thread ALGO    rank 2 reaches an allreduce 1 s late;
 *                                   the others' looks for goodbyes during
 *                                   the wait (MPI_Improbe, counted by the
 *                                   wrappers below) must come from the
 *                                   thread that waits (MPI_Testall), never
 *                                   from a second thread beside it
 *   test_faults abort2 RANK          two threads of RANK call gs_comm_abort at
 *                                   the same moment (as the engine's and the
 *                                   communicator's watchdogs can); the other
 *                                   ranks wait in a collective
 * Each rank prints "rank R: OK ..." when its expectations hold.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "gradsync.h"

static int world_rank(void) {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

static void nap(double secs) {
  struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
  nanosleep(&ts, NULL);
}

/* gs_init and a communicator over the world; NULL (after a message) if
 * either fails. */
static gs_comm *start(int *rank) {
  if (gs_init(NULL, NULL) != GS_OK) return NULL;
  *rank = world_rank();
  gs_comm *c = NULL;
  if (gs_comm_create(MPI_COMM_WORLD, &c) != GS_OK) {
    fprintf(stderr, "FAIL rank %d: gs_comm_create: %s\n", *rank, gs_last_error());
    return NULL;
  }
  return c;
}

/* Allreduces until the injected fault. The failing rank reports its error
 * and then, with `after` "exit", leaves at once with a non-zero status
 * (mpirun then ends the job); with "hang" it frees its communicator and
 * stays, as a rank stuck elsewhere would: only the other ranks' watchdogs
 * can end the job then, which is what the test checks. */
static int cmd_run(const char *algo_name, int iters, const char *after) {
  gs_algo algo;
  if (gs_algo_parse(algo_name, &algo) != GS_OK) return 2;
  int rank;
  gs_comm *c = start(&rank);
  if (c == NULL) return 2;
  enum { N = 1024 };
  static float buf[N];
  int p = gs_comm_size(c);
  for (int i = 1; i <= iters; i++) {
    for (int j = 0; j < N; j++) buf[j] = (float)(rank + 1);
    gs_status st = gs_allreduce(c, GS_IN_PLACE, buf, N, GS_F32, GS_SUM, algo);
    if (st != GS_OK) {
      fprintf(stderr, "rank %d: gs_allreduce #%d failed (%s): %s\n", rank, i,
              gs_strerror(st), gs_last_error());
      fflush(stderr);
      gs_comm_destroy(c);
      if (strcmp(after, "exit") == 0) return 3;
      for (;;) nap(1);
    }
    if (buf[0] != (float)(p * (p + 1) / 2)) {
      fprintf(stderr, "FAIL rank %d: allreduce #%d gave %g\n", rank, i, buf[0]);
      return 1;
    }
  }
  printf("rank %d: all %d collectives completed\n", rank, iters);
  gs_comm_destroy(c);
  gs_finalize();
  return 0;
}

/* A healthy job with idle time and work longer than the timeout in total:
 * the watchdog must stay silent (the script sets GRADSYNC_TIMEOUT=1). */
static int cmd_healthy(void) {
  int rank;
  gs_comm *c = start(&rank);
  if (c == NULL) return 2;
  size_t n = 4u << 20; /* 16 MiB of f32: many ring segments */
  float *big = calloc(n, sizeof(float));
  if (big == NULL) return 2;
  gs_status st = GS_OK;
  double timeout = gs_comm_timeout_s(c);
  for (int round = 0; round < 2 && st == GS_OK; round++) {
    nap(1.3 * timeout); /* idle: no collective queued, past the timeout */
    /* Small collectives for longer than the timeout; every rank stops at
     * the same one, since the stop flag is reduced with max. */
    double t0 = gs_now();
    for (float stop = 0; st == GS_OK && stop == 0;) {
      stop = gs_now() - t0 > 1.3 * timeout;
      st = gs_allreduce(c, GS_IN_PLACE, &stop, 1, GS_F32, GS_MAX, GS_ALGO_AUTO);
    }
    if (st == GS_OK)
      st = gs_allreduce(c, GS_IN_PLACE, big, n, GS_F32, GS_SUM, GS_ALGO_RING);
    if (st == GS_OK) st = gs_barrier(c, GS_ALGO_MPI);
  }
  free(big);
  if (st != GS_OK) {
    fprintf(stderr, "FAIL rank %d: %s\n", rank, gs_last_error());
    return 1;
  }
  printf("rank %d: OK: healthy run\n", rank);
  gs_comm_destroy(c);
  gs_finalize();
  return 0;
}

static int status_named(const char *name, gs_status *out) {
  static const char *names[GS_STATUS_COUNT] = {
      "OK", "INVALID_ARG", "NOMEM", "MPI", "MISMATCH", "UNSUPPORTED", "IO",
      "PARSE", "STATE", "INTERNAL"};
  for (int i = 0; i < GS_STATUS_COUNT; i++)
    if (strcmp(name, names[i]) == 0) {
      *out = (gs_status)i;
      return 1;
    }
  return 0;
}

/* Checks gs_comm_create's status and message on this rank. */
static int expect_create(gs_status want, char **texts, int ntexts) {
  int rank = world_rank();
  gs_comm *c = NULL;
  gs_status st = gs_comm_create(MPI_COMM_WORLD, &c);
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", st == GS_OK ? "" : gs_last_error());
  if (st == GS_OK) gs_comm_destroy(c);
  if (st != want) {
    fprintf(stderr, "FAIL rank %d: gs_comm_create returned %s, expected %s: %s\n",
            rank, gs_strerror(st), gs_strerror(want), msg);
    return 1;
  }
  if (st != GS_OK && c != NULL) {
    fprintf(stderr, "FAIL rank %d: failed gs_comm_create set *out\n", rank);
    return 1;
  }
  for (int i = 0; i < ntexts; i++)
    if (strstr(msg, texts[i]) == NULL) {
      fprintf(stderr, "FAIL rank %d: message lacks '%s': %s\n", rank, texts[i], msg);
      return 1;
    }
  printf("rank %d: OK: %s: %s\n", rank, gs_strerror(st), msg);
  return 0;
}

static int cmd_create(const char *status, char **texts, int ntexts) {
  gs_status want;
  if (!status_named(status, &want)) return 2;
  if (gs_init(NULL, NULL) != GS_OK) return 2;
  int rc = expect_create(want, texts, ntexts);
  gs_finalize();
  return rc;
}

static int cmd_thread(const char *level_name, int only_rank) {
  static const char *names[] = {"single", "funneled", "serialized", "multiple"};
  static const int levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED,
                               MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE};
  int level = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(level_name, names[i]) == 0) level = levels[i];
  if (level < 0) return 2;
  const char *env = getenv("OMPI_COMM_WORLD_RANK");
  int my = env ? atoi(env) : 0;
  int ask = only_rank < 0 || only_rank == my ? level : MPI_THREAD_MULTIPLE;
  int provided = -1;
  MPI_Init_thread(NULL, NULL, ask, &provided);
  int rank = world_rank();
  /* Whether any rank got less than the progress thread needs. */
  int low = provided < MPI_THREAD_SERIALIZED, any_low = 0;
  MPI_Allreduce(&low, &any_low, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  gs_comm *c = NULL;
  gs_status st = gs_comm_create(MPI_COMM_WORLD, &c);
  int rc = 0;
  if (any_low) {
    const char *m = gs_last_error();
    if (st != GS_ERR_UNSUPPORTED || strstr(m, "MPI_THREAD_SERIALIZED") == NULL ||
        (low && strstr(m, "thread level MPI_THREAD_") == NULL) ||
        (!low && strstr(m, "failed") == NULL)) {
      fprintf(stderr, "FAIL rank %d: provided %d: gs_comm_create gave %s: %s\n",
              rank, provided, gs_strerror(st), m);
      rc = 1;
    } else {
      printf("rank %d: OK: refused: %s\n", rank, m);
    }
  } else if (st != GS_OK) {
    fprintf(stderr, "FAIL rank %d: gs_comm_create: %s\n", rank, gs_last_error());
    rc = 1;
  } else if (gs_comm_thread_level(c) != provided) {
    fprintf(stderr, "FAIL rank %d: gs_comm_thread_level %d, provided %d\n",
            rank, gs_comm_thread_level(c), provided);
    rc = 1;
  } else {
    float x = 1;
    if (gs_allreduce(c, GS_IN_PLACE, &x, 1, GS_F32, GS_SUM, GS_ALGO_AUTO) != GS_OK)
      rc = 1;
    else
      printf("rank %d: OK: thread level %d accepted\n", rank, provided);
  }
  if (c) gs_comm_destroy(c);
  MPI_Finalize();
  return rc;
}

typedef struct {
  gs_comm *c;
  pthread_barrier_t *go;
  const char *who;
} abort_arg;

static void *abort_thread(void *p) {
  abort_arg *a = p;
  pthread_barrier_wait(a->go);
  gs_comm_abort(a->c, 3, "two threads end the job at once: %s", a->who);
}

static int cmd_abort2(int who) {
  int rank;
  gs_comm *c = start(&rank);
  if (c == NULL) return 2;
  if (rank == who) {
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    abort_arg a = {c, &go, "thread A"}, b = {c, &go, "thread B"};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, abort_thread, &a);
    pthread_create(&tb, NULL, abort_thread, &b);
    pthread_join(ta, NULL); /* never returns: the process ends */
    pthread_join(tb, NULL);
    fprintf(stderr, "FAIL rank %d: gs_comm_abort returned\n", rank);
    return 1;
  }
  float x = 1;
  gs_allreduce(c, GS_IN_PLACE, &x, 1, GS_F32, GS_SUM, GS_ALGO_RING);
  fprintf(stderr, "FAIL rank %d: the collective completed without rank %d\n", rank, who);
  return 1;
}

/* Rank 0 all-reduces fewer elements than the others (a caller's bug that
 * GRADSYNC_CHECK would refuse; it is unset here): rank 0's collective fails
 * with MPI's truncation error while receives it posted are still pending.
 * It destroys its communicator and finalizes: the scratch memory those
 * receives write into must outlive MPI (AddressSanitizer reported MPI's
 * write into it from MPI_Finalize, freed by gs_comm_destroy). The other
 * ranks wait in their collective until the watchdog ends the job. */
static int cmd_mismatch(const char *algo_name) {
  gs_algo algo;
  if (gs_algo_parse(algo_name, &algo) != GS_OK) return 2;
  int rank;
  gs_comm *c = start(&rank);
  if (c == NULL) return 2;
  size_t n = rank == 0 ? 1000 : 3000;
  float *buf = calloc(3000, sizeof(float)), *out = calloc(3000, sizeof(float));
  if (buf == NULL || out == NULL) return 2;
  gs_status st = gs_allreduce(c, buf, out, n, GS_F32, GS_SUM, algo);
  if (rank != 0) {
    fprintf(stderr, "rank %d: the mismatched allreduce returned: %s\n", rank,
            st == GS_OK ? "success" : gs_last_error());
    for (;;) nap(1); /* the watchdog ends the job */
  }
  if (st == GS_OK) {
    fprintf(stderr, "FAIL rank 0: the mismatched allreduce succeeded\n");
    return 1;
  }
  fprintf(stderr, "rank 0: the mismatched allreduce failed: %s\n", gs_last_error());
  gs_comm_destroy(c);
  gs_finalize(); /* leaves MPI running: its fence would wait for the others */
  free(buf);
  free(out);
  return 3; /* mpirun ends the job when it sees this exit */
}

/* gs_init and gs_comm_create after gs_finalize are refused with
 * GS_ERR_STATE (they returned GS_OK, and MPI aborted the process). */
static int cmd_after_finalize(void) {
  int rank;
  gs_comm *c = start(&rank);
  if (c == NULL) return 2;
  gs_comm_destroy(c);
  gs_finalize();
  gs_status again = gs_init(NULL, NULL);
  if (again != GS_ERR_STATE) {
    fprintf(stderr, "FAIL rank %d: gs_init after gs_finalize: %s\n", rank, gs_strerror(again));
    return 1;
  }
  fprintf(stderr, "rank %d: gs_init after gs_finalize: %s\n", rank, gs_last_error());
  gs_comm *c2 = NULL;
  again = gs_comm_create(MPI_COMM_WORLD, &c2);
  if (again != GS_ERR_STATE || c2 != NULL) {
    fprintf(stderr, "FAIL rank %d: gs_comm_create after gs_finalize: %s\n", rank,
            gs_strerror(again));
    return 1;
  }
  fprintf(stderr, "rank %d: gs_comm_create after gs_finalize: %s\n", rank, gs_last_error());
  return 0;
}

/* Rank `who` ends its program after three all-reduces (gs_comm_leave,
 * destroy, finalize, exit 0: a Python rank's sys.exit), while the others
 * issue a fourth: their watchdogs must end the job at once, naming it. */
static int cmd_leave(const char *algo_name, int who) {
  gs_algo algo;
  if (gs_algo_parse(algo_name, &algo) != GS_OK) return 2;
  int rank;
  gs_comm *c = start(&rank);
  if (c == NULL) return 2;
  float buf[1024];
  for (int i = 1; i <= 4; i++) {
    if (i == 4 && rank == who) {
      gs_status st = gs_comm_leave(c);
      if (st != GS_OK) fprintf(stderr, "FAIL rank %d: gs_comm_leave: %s\n", rank, gs_last_error());
      printf("rank %d: leaving after 3 collectives\n", rank);
      fflush(stdout);
      gs_comm_destroy(c);
      gs_finalize();
      return 0;
    }
    for (int j = 0; j < 1024; j++) buf[j] = 1;
    if (gs_allreduce(c, GS_IN_PLACE, buf, 1024, GS_F32, GS_SUM, algo) != GS_OK) {
      fprintf(stderr, "FAIL rank %d: allreduce #%d: %s\n", rank, i, gs_last_error());
      return 1;
    }
  }
  fprintf(stderr, "FAIL rank %d: the fourth allreduce completed without rank %d\n", rank, who);
  return 1;
}

/* Healthy ends with gs_comm_leave, which must not end the job: rank 1
 * leaves with its fourth collective issued but not waited for, then issues
 * a barrier (a shutdown's own collective); rank 0 reaches both late, so
 * rank 2 waits in each longer than a look at the goodbyes takes. */
static int cmd_leave_ok(void) {
  int rank;
  gs_comm *c = start(&rank);
  if (c == NULL) return 2;
  float buf[1024];
  gs_status st = GS_OK;
  for (int i = 1; i <= 3 && st == GS_OK; i++)
    st = gs_allreduce(c, GS_IN_PLACE, buf, 1024, GS_F32, GS_SUM, GS_ALGO_RING);
  if (rank == 0) nap(1.5); /* evaluating, saving */
  gs_request *req = NULL;
  for (int j = 0; j < 1024; j++) buf[j] = 1;
  if (st == GS_OK) st = gs_iallreduce(c, GS_IN_PLACE, buf, 1024, GS_F32, GS_SUM,
                                      GS_ALGO_RING, &req);
  if (st == GS_OK && rank == 1) st = gs_comm_leave(c);
  if (st == GS_OK) st = gs_wait(req);
  if (st == GS_OK && buf[0] != (float)gs_comm_size(c)) {
    fprintf(stderr, "FAIL rank %d: allreduce #4 gave %g\n", rank, buf[0]);
    return 1;
  }
  if (rank == 0) nap(1.5);
  if (st == GS_OK) st = gs_barrier(c, GS_ALGO_AUTO);
  if (st == GS_OK) st = gs_comm_leave(c);
  if (st == GS_OK) st = gs_comm_leave(c); /* a second call: nothing */
  if (st != GS_OK) {
    fprintf(stderr, "FAIL rank %d: %s\n", rank, gs_last_error());
    return 1;
  }
  printf("rank %d: OK: left after 5 collectives\n", rank);
  gs_comm_destroy(c);
  gs_finalize();
  return 0;
}

/* ---- Which threads call MPI (look_thread) ---------------------------------
 * The test binary links the static library, so these definitions take the
 * library's calls; they count while `watching` and pass on to PMPI. */
static atomic_int watching;
static atomic_int probes, foreign_probes;
static _Atomic(pthread_t) waiter; /* the last thread in MPI_Testall */
static atomic_int have_waiter;

int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[]) {
  if (atomic_load(&watching)) {
    atomic_store(&waiter, pthread_self());
    atomic_store(&have_waiter, 1);
  }
  return PMPI_Testall(count, reqs, flag, statuses);
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                MPI_Status *status) {
  if (atomic_load(&watching)) {
    atomic_fetch_add(&probes, 1);
    if (!atomic_load(&have_waiter) || !pthread_equal(atomic_load(&waiter), pthread_self()))
      atomic_fetch_add(&foreign_probes, 1);
  }
  return PMPI_Improbe(source, tag, comm, flag, message, status);
}

/* Open MPI's shared-memory transport can deadlock with two threads of a
 * process in its progress engine at once (the likeliest cause of
 * comm_mismatch_np3's one hang under TSan): while a gradsync algorithm
 * waits, the look for peers that left must run on the waiting thread. */
static int cmd_look_thread(const char *algo_name) {
  gs_algo algo;
  if (gs_algo_parse(algo_name, &algo) != GS_OK) return 2;
  int rank;
  gs_comm *c = start(&rank);
  if (c == NULL) return 2;
  float buf[1024];
  for (int j = 0; j < 1024; j++) buf[j] = 1;
  gs_status st = gs_allreduce(c, GS_IN_PLACE, buf, 1024, GS_F32, GS_SUM, algo);
  if (rank == 2) nap(1.0);
  atomic_store(&watching, rank != 2);
  if (st == GS_OK) st = gs_allreduce(c, GS_IN_PLACE, buf, 1024, GS_F32, GS_SUM, algo);
  atomic_store(&watching, 0);
  if (st != GS_OK) {
    fprintf(stderr, "FAIL rank %d: allreduce: %s\n", rank, gs_last_error());
    return 1;
  }
  int bad = 0;
  if (rank != 2) {
    int n = atomic_load(&probes), foreign = atomic_load(&foreign_probes);
    if (n == 0) {
      fprintf(stderr, "FAIL rank %d: no look for goodbyes in a wait of 1 s\n", rank);
      bad = 1;
    } else if (foreign != 0) {
      fprintf(stderr, "FAIL rank %d: %d of %d looks for goodbyes came from a thread "
              "other than the waiting one\n", rank, foreign, n);
      bad = 1;
    } else {
      printf("rank %d: OK: %d looks, all on the waiting thread\n", rank, n);
    }
  }
  gs_comm_destroy(c);
  gs_finalize();
  return bad;
}

int main(int argc, char **argv) {
  if (argc >= 4 && strcmp(argv[1], "run") == 0)
    return cmd_run(argv[2], atoi(argv[3]), argc >= 5 ? argv[4] : "hang");
  if (argc >= 2 && strcmp(argv[1], "healthy") == 0) return cmd_healthy();
  if (argc >= 3 && strcmp(argv[1], "create") == 0)
    return cmd_create(argv[2], argv + 3, argc - 3);
  if (argc >= 3 && strcmp(argv[1], "thread") == 0)
    return cmd_thread(argv[2], argc >= 4 ? atoi(argv[3]) : -1);
  if (argc >= 3 && strcmp(argv[1], "abort2") == 0) return cmd_abort2(atoi(argv[2]));
  if (argc >= 3 && strcmp(argv[1], "mismatch") == 0) return cmd_mismatch(argv[2]);
  if (argc >= 2 && strcmp(argv[1], "after_finalize") == 0) return cmd_after_finalize();
  if (argc >= 4 && strcmp(argv[1], "leave") == 0) return cmd_leave(argv[2], atoi(argv[3]));
  if (argc >= 2 && strcmp(argv[1], "leave_ok") == 0) return cmd_leave_ok();
  if (argc >= 3 && strcmp(argv[1], "look_thread") == 0) return cmd_look_thread(argv[2]);
  fprintf(stderr, "usage: test_faults run ALGO ITERS | healthy | create STATUS "
          "TEXT... | thread LEVEL [RANK] | abort2 RANK | mismatch ALGO | after_finalize | "
          "leave ALGO RANK | leave_ok | look_thread ALGO\n");
  return 2;
}
