/*
 * Parameter servers: set-up and the worker's side (init, push/pull, finish).
 * The server's loop is in server.c, the switch policy in policy.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ps_internal.h"

#define PS_TIMEOUT_DEFAULT 300.0

_Noreturn void ps_abort(gs_ps *ps, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "gradsync: rank %d: fatal: %s\n", ps->rank, msg);
  fflush(stderr);
  MPI_Abort(ps->comm, 1);
  _exit(1); /* MPI_Abort does not return; this is for the compiler */
}

void ps_nap(long *nap_ns) {
  struct timespec ts = {0, *nap_ns};
  nanosleep(&ts, NULL);
  if (*nap_ns < PS_NAP_MAX_NS) *nap_ns *= 2;
}

/* Waiting without taking a core: full-speed polls for the first
 * millisecond (small messages' round trips), then naps (ps_nap). */
int ps_wait_all(int n, MPI_Request *reqs, double timeout_s) {
  double t0 = gs_now();
  long nap = PS_NAP_MIN_NS;
  for (;;) {
    int done = 0;
    MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    if (done) return 0;
    double dt = gs_now() - t0;
    if (timeout_s > 0 && dt > timeout_s) return -1;
    if (dt < 1e-3) continue;
    ps_nap(&nap);
  }
}

/* GRADSYNC_PS_FAULT="rank=R,step=N[,kind=exit|stall]". A malformed value
 * is an error on the rank that has it (and so, through the agreement in
 * gs_ps_create, on every rank). */
static gs_status fault_parse(gs_ps *ps) {
  ps->fault_step = -1;
  const char *s = getenv("GRADSYNC_PS_FAULT");
  if (!s || !*s) return GS_OK;
  int rank = -1, step = -1, n = 0;
  char kind[16] = "exit";
  if (sscanf(s, "rank=%d,step=%d%n", &rank, &step, &n) != 2 || rank < 0 ||
      step < 1 || (s[n] != '\0' && sscanf(s + n, ",kind=%15s", kind) != 1) ||
      (strcmp(kind, "exit") != 0 && strcmp(kind, "stall") != 0))
    return gs_error(GS_ERR_PARSE,
                    "rank %d: GRADSYNC_PS_FAULT='%s': expected "
                    "rank=R,step=N[,kind=exit|stall] with N >= 1",
                    ps->rank, s);
  if (rank == ps->rank) {
    ps->fault_step = step;
    ps->fault_stall = strcmp(kind, "stall") == 0;
  }
  return GS_OK;
}

void ps_fault_check(gs_ps *ps, long count) {
  if (ps->fault_step < 0 || count < ps->fault_step) return;
  fprintf(stderr, "gradsync: rank %d: injected fault (GRADSYNC_PS_FAULT): %s\n",
          ps->rank, ps->fault_stall ? "stalling" : "exiting");
  fflush(stderr);
  /* 1, a failure: 3 is a stop as asked (SIGUSR1), which an elastic
   * supervisor ends the job on instead of relaunching it. */
  if (!ps->fault_stall) _exit(1);
  for (;;) sleep(1000);
}

static double timeout_from(const gs_ps_config *cfg) {
  if (cfg->timeout_s > 0) return cfg->timeout_s;
  if (cfg->comm) return gs_comm_timeout_s(cfg->comm);
  const char *s = getenv("GRADSYNC_TIMEOUT");
  if (s && *s) {
    char *end;
    double v = strtod(s, &end);
    if (*end == '\0' && v >= 0) return v;
  }
  return PS_TIMEOUT_DEFAULT;
}

/* What this rank can say is wrong with its own arguments, or GS_OK. */
static gs_status check_local(const gs_ps *ps, const gs_ps_config *cfg,
                             const size_t *counts, size_t n) {
  if (cfg->servers < 1 || cfg->servers >= ps->size)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_ps_create on rank %d: %d servers in a communicator of %d "
                    "ranks: at least one rank must be a worker, and at least one "
                    "a server", ps->rank, cfg->servers, ps->size);
  if (n > 0 && !counts)
    return gs_error(GS_ERR_INVALID_ARG, "rank %d: gs_ps_create: counts is NULL",
                    ps->rank);
  const gs_ps_sync *s = &cfg->sync;
  if ((unsigned)s->mode >= GS_PS_MODE_COUNT || s->staleness < 0 ||
      (unsigned)s->policy > GS_PS_POLICY_ONLINE ||
      !(s->bsp_fraction >= 0 && s->bsp_fraction <= 1) ||
      (s->policy == GS_PS_POLICY_ONLINE && !(s->straggler_ratio > 1.0)))
    return gs_error(GS_ERR_INVALID_ARG,
                    "rank %d: gs_ps_create: invalid sync settings (mode %d, "
                    "staleness %d, policy %d, F %g, straggler ratio %g)",
                    ps->rank, (int)s->mode, s->staleness, (int)s->policy,
                    s->bsp_fraction, s->straggler_ratio);
  if (s->policy != GS_PS_POLICY_FIXED && cfg->sample_budget == 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "rank %d: gs_ps_create: Sync-Switch needs a sample budget "
                    "(the BSP share is a fraction of it)", ps->rank);
  if ((cfg->sample_budget < 0 && cfg->sample_budget != GS_PS_BUDGET_AT_INIT) ||
      !(cfg->async_lr_scale >= 0) || !(cfg->async_momentum_offset <= 1) ||
      cfg->momentum_ramp_steps < 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "rank %d: gs_ps_create: sample budget %ld, async lr "
                    "scale %g, momentum ramp %d must be >= 0, and the async "
                    "momentum offset %g at most 1", ps->rank,
                    cfg->sample_budget, (double)cfg->async_lr_scale,
                    cfg->momentum_ramp_steps, (double)cfg->async_momentum_offset);
  if (cfg->comm && gs_comm_thread_level(cfg->comm) < MPI_THREAD_MULTIPLE)
    return gs_error(GS_ERR_UNSUPPORTED,
                    "rank %d: parameter servers beside a gs_comm need "
                    "MPI_THREAD_MULTIPLE (the communicator's progress thread "
                    "calls MPI at the same time); MPI provides level %d",
                    ps->rank, gs_comm_thread_level(cfg->comm));
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_FUNNELED)
    return gs_error(GS_ERR_UNSUPPORTED,
                    "rank %d: parameter servers need at least "
                    "MPI_THREAD_FUNNELED; MPI provides level %d", ps->rank,
                    level);
  return GS_OK;
}

/* The values every rank must share, compared by their range over ranks. */
enum { AGREE_SERVERS, AGREE_TOTAL, AGREE_N, AGREE_POLICY, AGREE_MODE,
       AGREE_STALENESS, AGREE_BUDGET, AGREE_CHUNK, AGREE_COUNT };
static const char *const agree_names[AGREE_COUNT] = {
    "servers", "parameter count", "tensor count", "policy",
    "mode", "staleness", "sample budget", "chunk bytes"};

/* asp_since past every doubling of the momentum ramp (step_hparams): ASP's
 * momentum whole, for W up to 2^64. */
static long ramp_done(const gs_ps *ps) { return 64L * ps->cfg.momentum_ramp_steps; }

gs_status gs_ps_create(MPI_Comm job, const gs_ps_config *cfg,
                       const size_t *counts, size_t n, gs_ps **out) {
  if (!cfg || !out)
    return gs_error(GS_ERR_INVALID_ARG, "gs_ps_create: a NULL argument");
  *out = NULL;
  gs_ps *ps = gs_calloc(1, sizeof *ps);
  if (!ps) return GS_ERR_NOMEM;
  ps->comm = MPI_COMM_NULL;
  ps->worker_comm = MPI_COMM_NULL;
  if (MPI_Comm_dup(job, &ps->comm) != MPI_SUCCESS) {
    gs_free(ps);
    return gs_error(GS_ERR_MPI, "gs_ps_create: MPI_Comm_dup failed");
  }
  MPI_Comm_rank(ps->comm, &ps->rank);
  MPI_Comm_size(ps->comm, &ps->size);
  ps->cfg = *cfg;

  char local_msg[512] = "";
  gs_status local = check_local(ps, cfg, counts, n);
  if (local == GS_OK) local = fault_parse(ps);
  if (local != GS_OK) snprintf(local_msg, sizeof local_msg, "%s", gs_last_error());
  size_t total = 0;
  for (size_t i = 0; counts && i < n; i++) total += counts[i];

  long long v[AGREE_COUNT] = {cfg->servers, (long long)total, (long long)n,
                              cfg->sync.policy, cfg->sync.mode,
                              cfg->sync.staleness, cfg->sample_budget,
                              (long long)cfg->chunk_bytes};
  /* On this thread, over the servers' own communicator: one agreement on
   * every rank's set-up and values. */
  gs_agreement ag;
  gs_status st = gs_agree(NULL, ps->comm, "parameter servers", local, local_msg,
                          v, sizeof v, &ag);
  if (st == GS_OK && ag.failed > 0) {
    if (local != GS_OK)
      st = gs_error(local, "%s", local_msg);
    else
      st = gs_error(GS_ERR_MISMATCH,
                    "rank %d: parameter servers not set up: rank %d failed "
                    "its own checks", ps->rank, ag.first);
  } else if (st == GS_OK) {
    const long long *all = ag.payloads;
    for (int i = 0; i < AGREE_COUNT && st == GS_OK; i++) {
      long long lo = all[i], hi = all[i];
      for (int r = 1; r < ag.size; r++) {
        long long x = all[(size_t)r * AGREE_COUNT + (size_t)i];
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
      }
      if (lo != hi)
        st = gs_error(GS_ERR_MISMATCH,
                      "rank %d: parameter servers: the ranks' %s differ "
                      "(from %lld to %lld)", ps->rank, agree_names[i], lo, hi);
    }
  }
  gs_agreement_free(&ag);
  if (st != GS_OK) {
    MPI_Comm_free(&ps->comm);
    gs_free(ps);
    return st;
  }

  ps->servers = cfg->servers;
  ps->workers = ps->size - cfg->servers;
  ps->worker_index = ps->rank < ps->workers ? ps->rank : -1;
  ps->server_index = ps->rank < ps->workers ? -1 : ps->rank - ps->workers;
  ps->timeout_s = timeout_from(cfg);
  ps->chunk = (cfg->chunk_bytes ? cfg->chunk_bytes : GS_PS_CHUNK_BYTES) / sizeof(float);
  if (ps->chunk == 0) ps->chunk = 1;
  ps->total = total;
  if (ps->cfg.async_lr_scale == 0) ps->cfg.async_lr_scale = 1.0f / (float)ps->workers;
  if (ps->cfg.async_momentum_offset == 0)
    ps->cfg.async_momentum_offset = 1.0f - 1.0f / (float)ps->workers;
  else if (ps->cfg.async_momentum_offset < 0)
    ps->cfg.async_momentum_offset = 0;
  const gs_ps_sync *s = &cfg->sync;
  if (s->policy == GS_PS_POLICY_FIXED)
    ps->mode = s->mode;
  else
    ps->mode = s->bsp_fraction > 0 ? GS_PS_BSP : GS_PS_ASP;
  /* A share of 0 starts in ASP with no switch to ramp after (until
   * 2026-12-07 it ramped from its first push, unlike asp). */
  if (ps->mode != GS_PS_BSP) ps->asp_since = ramp_done(ps);
  ps->begin = gs_calloc((size_t)ps->servers + 1, sizeof(size_t));
  if (!ps->begin) st = GS_ERR_NOMEM;
  if (st == GS_OK) st = gs_ps_shard_plan(counts, n, ps->servers, ps->begin);
  if (st == GS_OK &&
      MPI_Comm_split(ps->comm, ps->worker_index >= 0 ? 0 : MPI_UNDEFINED,
                     ps->rank, &ps->worker_comm) != MPI_SUCCESS)
    st = gs_error(GS_ERR_MPI, "rank %d: gs_ps_create: MPI_Comm_split failed",
                  ps->rank);
  if (st != GS_OK) {
    gs_free(ps->begin);
    MPI_Comm_free(&ps->comm);
    gs_free(ps);
    return st;
  }
  ps->last_answer = -1;
  *out = ps;
  return GS_OK;
}

gs_status gs_ps_destroy(gs_ps *ps) {
  if (!ps) return GS_OK;
  if (ps->worker_comm != MPI_COMM_NULL) MPI_Comm_free(&ps->worker_comm);
  MPI_Comm_free(&ps->comm);
  gs_free(ps->begin);
  gs_free(ps);
  return GS_OK;
}

int gs_ps_is_server(const gs_ps *ps) { return ps->server_index >= 0; }
int gs_ps_workers(const gs_ps *ps) { return ps->workers; }
int gs_ps_worker_index(const gs_ps *ps) { return ps->worker_index; }
MPI_Comm gs_ps_worker_comm(const gs_ps *ps) { return ps->worker_comm; }
size_t gs_ps_total(const gs_ps *ps) { return ps->total; }
void gs_ps_shard(const gs_ps *ps, int server, size_t *begin, size_t *end) {
  *begin = ps->begin[server];
  *end = ps->begin[server + 1];
}
void gs_ps_get_stats(const gs_ps *ps, gs_ps_stats *out) { *out = ps->stats; }

/* ---- The worker's side ---------------------------------------------------- */

static int server_rank(const gs_ps *ps, int k) { return ps->workers + k; }

static gs_status need_worker(const gs_ps *ps, const char *what) {
  if (ps->worker_index < 0)
    return gs_error(GS_ERR_STATE, "rank %d: %s: this rank is a server",
                    ps->rank, what);
  if (ps->finished)
    return gs_error(GS_ERR_STATE, "rank %d: %s after gs_ps_finish", ps->rank,
                    what);
  return GS_OK;
}

/* Sends a request (none when req is NULL) and, with data, its chunks of
 * the shard to every server; returns the number of requests written into
 * reqs. */
static int send_all(gs_ps *ps, ps_request *req, const float *data, int tag,
                    MPI_Request *reqs) {
  int r = 0;
  for (int k = 0; k < ps->servers; k++) {
    if (req)
      MPI_Isend(req, (int)sizeof *req, MPI_BYTE, server_rank(ps, k), PS_TAG_REQ,
                ps->comm, &reqs[r++]);
    if (!data) continue;
    size_t b = ps->begin[k], e = ps->begin[k + 1];
    for (size_t off = b; off < e; off += ps->chunk) {
      size_t len = GS_MIN(ps->chunk, e - off);
      MPI_Isend(data + off, (int)len, MPI_FLOAT, server_rank(ps, k), tag,
                ps->comm, &reqs[r++]);
    }
  }
  return r;
}

/* Receives every server's answer and its parameters into w. */
static int recv_all(gs_ps *ps, ps_reply *rep, float *w, MPI_Request *reqs) {
  int r = 0;
  for (int k = 0; k < ps->servers; k++) {
    MPI_Irecv(&rep[k], (int)sizeof *rep, MPI_BYTE, server_rank(ps, k),
              PS_TAG_REPLY, ps->comm, &reqs[r++]);
    size_t b = ps->begin[k], e = ps->begin[k + 1];
    for (size_t off = b; off < e; off += ps->chunk) {
      size_t len = GS_MIN(ps->chunk, e - off);
      MPI_Irecv(w + off, (int)len, MPI_FLOAT, server_rank(ps, k),
                PS_TAG_PULL_DATA, ps->comm, &reqs[r++]);
    }
  }
  return r;
}

static size_t request_slots(const gs_ps *ps) {
  size_t n = 0;
  for (int k = 0; k < ps->servers; k++)
    n += 1 + ps_chunks(ps, ps->begin[k + 1] - ps->begin[k]);
  return n;
}

/* Waits for the answers; a server that sends none within the timeout ends
 * the job with its name. Polls each server's header in turn, so the
 * message names the first one that is silent. */
static void wait_answers(gs_ps *ps, MPI_Request *reqs, int nreqs,
                         const char *what) {
  double t0 = gs_now();
  if (ps_wait_all(nreqs, reqs, ps->timeout_s) == 0) return;
  int r = 0;
  for (int k = 0; k < ps->servers; k++) {
    int nk = 1 + (int)ps_chunks(ps, ps->begin[k + 1] - ps->begin[k]);
    int done = 0;
    MPI_Testall(nk, reqs + r, &done, MPI_STATUSES_IGNORE);
    if (!done)
      ps_abort(ps,
               "parameter server %d (rank %d) sent no answer to %s of worker "
               "%d within %.0f s (GRADSYNC_TIMEOUT): it died or stalls",
               k, server_rank(ps, k), what, ps->worker_index,
               gs_now() - t0);
    r += nk;
  }
  ps_abort(ps, "parameter servers did not answer %s within %.0f s", what,
           gs_now() - t0);
}

/* Sends a push's data: to each server its chunks one at a time, the next
 * when the previous has left. Open MPI interleaves the fragments of
 * concurrent sends to one peer, so chunks posted all at once all complete
 * at the end, and a server could not reduce and answer the first chunk
 * (its BSP pipeline) before the last had arrived. reqs: one per server. */
static void push_paced(gs_ps *ps, const float *data, MPI_Request *reqs,
                       size_t *off) {
  int S = ps->servers;
  for (int k = 0; k < S; k++) {
    off[k] = ps->begin[k];
    reqs[k] = MPI_REQUEST_NULL;
  }
  double t_last = gs_now();
  long nap = PS_NAP_MIN_NS;
  for (;;) {
    int busy = 0, moved = 0;
    for (int k = 0; k < S; k++) {
      int done = 1;
      if (reqs[k] != MPI_REQUEST_NULL) MPI_Test(&reqs[k], &done, MPI_STATUS_IGNORE);
      if (done && off[k] < ps->begin[k + 1]) {
        size_t len = GS_MIN(ps->chunk, ps->begin[k + 1] - off[k]);
        MPI_Isend(data + off[k], (int)len, MPI_FLOAT, server_rank(ps, k),
                  PS_TAG_PUSH_DATA, ps->comm, &reqs[k]);
        off[k] += len;
        done = 0;
        moved = 1;
      }
      busy |= !done;
    }
    if (!busy) return;
    double now = gs_now();
    if (moved) {
      t_last = now;
      nap = PS_NAP_MIN_NS;
      continue;
    }
    if (ps->timeout_s > 0 && now - t_last > ps->timeout_s)
      for (int k = 0; k < S; k++)
        if (reqs[k] != MPI_REQUEST_NULL)
          ps_abort(ps, "parameter server %d (rank %d) took no part of worker "
                   "%d's push for %.0f s (GRADSYNC_TIMEOUT): it died or stalls",
                   k, server_rank(ps, k), ps->worker_index, now - t_last);
    if (now - t_last < 1e-3) continue;
    ps_nap(&nap);
  }
}

static gs_status exchange(gs_ps *ps, ps_request *req, const float *data,
                          float *w, ps_reply *rep, const char *what) {
  /* The sends are the S headers and push_paced's one request per server:
   * not request_slots, whose chunk count is below S when a shard is empty
   * (fewer parameters than servers). */
  size_t nslots = request_slots(ps), S = (size_t)ps->servers;
  MPI_Request *sreq = gs_malloc(2 * S * sizeof *sreq);
  MPI_Request *rreq = gs_malloc(nslots * sizeof *rreq);
  size_t *off = gs_malloc((size_t)ps->servers * sizeof *off);
  if (!sreq || !rreq || !off) {
    gs_free(sreq);
    gs_free(rreq);
    gs_free(off);
    return GS_ERR_NOMEM;
  }
  int nr = w ? recv_all(ps, rep, w, rreq) : 0;
  int ns = send_all(ps, req, NULL, PS_TAG_PUSH_DATA, sreq);
  if (data) push_paced(ps, data, sreq + ns, off);
  wait_answers(ps, rreq, nr, what);
  /* The servers answered, so they have received everything sent. */
  if (ps_wait_all(ns, sreq, ps->timeout_s) != 0)
    ps_abort(ps, "worker %d: a push to the parameter servers did not "
             "complete within %.0f s", ps->worker_index, ps->timeout_s);
  gs_free(sreq);
  gs_free(rreq);
  gs_free(off);
  return GS_OK;
}

gs_status gs_ps_worker_init(gs_ps *ps, float *w, long sample_budget) {
  return gs_ps_worker_resume(ps, w, NULL, sample_budget, 0);
}

static gs_status pull_whole(gs_ps *ps, int type, float *out, const char *fn, const char *what,
                            int *mode0);

gs_status gs_ps_worker_resume(gs_ps *ps, float *w, const float *state, long sample_budget,
                              long samples_done) {
  GS_CHECK(need_worker(ps, "gs_ps_worker_resume"));
  if (!w && ps->total)
    return gs_error(GS_ERR_INVALID_ARG, "rank %d: gs_ps_worker_resume: w is NULL",
                    ps->rank);
  if (ps->worker_index == 0 && ps->cfg.sample_budget == GS_PS_BUDGET_AT_INIT &&
      sample_budget <= 0)
    return gs_error(GS_ERR_INVALID_ARG,
                    "rank %d: gs_ps_worker_resume: the sample budget (%ld) must "
                    "be > 0 when it comes at init", ps->rank, sample_budget);
  if (samples_done < 0)
    return gs_error(GS_ERR_INVALID_ARG, "rank %d: gs_ps_worker_resume: %ld samples done "
                    "(must be >= 0)", ps->rank, samples_done);
  if (ps->worker_index == 0) {
    /* The budget travels in the clock field of the INIT request; the
     * optimizer state's chunks, when given, follow the parameters'. */
    ps_request req = {.type = PS_MSG_INIT,
                      .mode = state != NULL && ps->total > 0,
                      .clock = ps->cfg.sample_budget == GS_PS_BUDGET_AT_INIT
                                   ? sample_budget : 0,
                      .samples_done = samples_done};
    size_t nslots = 2 * request_slots(ps);
    MPI_Request *sreq = gs_malloc(nslots * sizeof *sreq);
    if (!sreq) return GS_ERR_NOMEM;
    int ns = send_all(ps, &req, w, PS_TAG_PUSH_DATA, sreq);
    if (req.mode) ns += send_all(ps, NULL, state, PS_TAG_PUSH_DATA, sreq + ns);
    if (ps_wait_all(ns, sreq, ps->timeout_s) != 0)
      ps_abort(ps, "worker 0: the initial parameters did not reach the "
               "parameter servers within %.0f s", ps->timeout_s);
    gs_free(sreq);
  }
  /* A resumed run goes on in the protocol server 0's policy is in (past
   * Sync-Switch's switch: ASP), not in the one a run starts with. */
  int mode0 = (int)ps->mode;
  GS_CHECK(pull_whole(ps, PS_MSG_PULL, w, "gs_ps_pull", "a pull", &mode0));
  if (samples_done > 0 && mode0 >= 0 && mode0 < GS_PS_MODE_COUNT) {
    ps->mode = (gs_ps_mode)mode0;
    /* Past the switch, the run it continues has switched already: its
     * momentum ramp (step_hparams) is over, not started again (until
     * 2026-12-07 every worker's first pushes after a resume took 1/W of
     * ASP's momentum, doubling every momentum_ramp_steps pushes). */
    if (ps->mode != GS_PS_BSP) ps->asp_since = ramp_done(ps);
  }
  ps->last_answer = gs_now();
  return GS_OK;
}

/* A pull of every server's shard (type PULL: the parameters; STATE: the
 * optimizer state) into out, gs_ps_total floats. */
static gs_status pull_whole(gs_ps *ps, int type, float *out, const char *fn, const char *what,
                            int *mode0) {
  GS_CHECK(need_worker(ps, fn));
  if (!out && ps->total)
    return gs_error(GS_ERR_INVALID_ARG, "rank %d: %s: the output is NULL", ps->rank, fn);
  ps_request req = {.type = type, .clock = ps->clock};
  ps_reply *rep = gs_calloc((size_t)ps->servers, sizeof *rep);
  if (!rep) return GS_ERR_NOMEM;
  gs_status st = exchange(ps, &req, NULL, out, rep, what);
  if (st == GS_OK && mode0) *mode0 = rep[0].next_mode;
  gs_free(rep);
  ps->stats.bytes_pulled += (double)ps->total * sizeof(float);
  return st;
}

gs_status gs_ps_pull_state(gs_ps *ps, float *state) {
  return pull_whole(ps, PS_MSG_STATE, state, "gs_ps_pull_state", "a pull of the optimizer state",
                    NULL);
}

gs_status gs_ps_pull(gs_ps *ps, float *w) {
  return pull_whole(ps, PS_MSG_PULL, w, "gs_ps_pull", "a pull", NULL);
}

void gs_ps_async_hparams(const gs_ps *ps, float lr, float momentum, float *async_lr,
                         float *async_momentum) {
  float off = ps->cfg.async_momentum_offset;
  *async_lr = lr * ps->cfg.async_lr_scale;
  *async_momentum = momentum > off ? momentum - off : 0.0f;
}

/* The learning rate and momentum of a push: BSP's as given; ASP's and SSP's
 * learning rate scaled for the per-worker batch, their momentum less what
 * asynchrony adds (include/gradsync/ps.h), and ramped after a switch (from
 * 1/W of it, doubling every momentum_ramp_steps pushes; Sync-Switch's
 * authors' multi-step ramp). */
static void step_hparams(const gs_ps *ps, const gs_ps_step_info *info,
                         float *lr, float *mu) {
  *lr = info->lr;
  *mu = info->momentum;
  if (ps->mode == GS_PS_BSP) return;
  gs_ps_async_hparams(ps, info->lr, info->momentum, lr, mu);
  int ramp = ps->cfg.momentum_ramp_steps;
  if (ramp > 0 && ps->cfg.sync.policy != GS_PS_POLICY_FIXED) {
    double f = 1.0 / ps->workers;
    for (long k = ps->asp_since / ramp; k > 0 && f < 1.0; k--) f *= 2;
    if (f < 1.0) *mu = (float)(*mu * f);
  }
}

gs_status gs_ps_step(gs_ps *ps, const float *grad, float *w,
                     const gs_ps_step_info *info, gs_ps_step_result *res) {
  GS_CHECK(need_worker(ps, "gs_ps_step"));
  if ((!grad || !w) && ps->total)
    return gs_error(GS_ERR_INVALID_ARG, "rank %d: gs_ps_step: NULL buffers",
                    ps->rank);
  if (!info || info->batch < 1)
    return gs_error(GS_ERR_INVALID_ARG,
                    "rank %d: gs_ps_step: a step needs a batch of >= 1 "
                    "samples", ps->rank);
  if (ps->stopped)
    return gs_error(GS_ERR_STATE,
                    "rank %d: gs_ps_step after the servers said the sample "
                    "budget is used up", ps->rank);
  ps_fault_check(ps, ps->clock + 1);
  double now = gs_now();
  ps_request req = {.type = PS_MSG_PUSH, .mode = ps->mode,
                    .batch = info->batch, .clock = ps->clock,
                    .parks = (int32_t)ps->parks,
                    .compute_s = ps->last_answer >= 0 ? now - ps->last_answer
                                                      : -1.0};
  step_hparams(ps, info, &req.lr, &req.momentum);
  ps_reply *rep = gs_calloc((size_t)ps->servers, sizeof *rep);
  if (!rep) return GS_ERR_NOMEM;
  char what[64];
  snprintf(what, sizeof what, "step %ld", ps->clock + 1);
  gs_status st = exchange(ps, &req, grad, w, rep, what);
  double after = gs_now();
  gs_ps_mode mode = ps->mode;
  if (st == GS_OK) {
    ps->clock++;
    ps->stats.pushes++;
    ps->stats.wait_s += after - now;
    ps->stats.bytes_pushed += (double)ps->total * sizeof(float);
    ps->stats.bytes_pulled += (double)ps->total * sizeof(float);
    if (mode == GS_PS_BSP) ps->stats.bsp_steps++;
    else if (mode == GS_PS_ASP) ps->stats.asp_steps++;
    else ps->stats.ssp_steps++;
    gs_ps_mode next = (gs_ps_mode)rep[0].next_mode;
    if (next != mode) {
      ps->stats.switches++;
      ps->asp_since = 0;
    } else {
      ps->asp_since++;
    }
    ps->mode = next;
    ps->stopped = rep[0].stop;
    if (res) {
      res->mode = mode;
      res->next_mode = next;
      res->stop = rep[0].stop;
      res->switched = next != mode;
      res->wait_s = after - now;
      res->samples = rep[0].samples;
      res->straggler = rep[0].straggler;
    }
  }
  gs_free(rep);
  ps->last_answer = gs_now();
  return st;
}

gs_status gs_ps_park(gs_ps *ps) {
  GS_CHECK(need_worker(ps, "gs_ps_park"));
  ps->parks++;
  ps_request req = {.type = PS_MSG_PARK, .clock = ps->clock,
                    .parks = (int32_t)ps->parks};
  MPI_Request *sreq = gs_malloc((size_t)ps->servers * sizeof *sreq);
  if (!sreq) return GS_ERR_NOMEM;
  int ns = send_all(ps, &req, NULL, 0, sreq);
  if (ps_wait_all(ns, sreq, ps->timeout_s) != 0)
    ps_abort(ps, "worker %d: the parameter servers did not take its park "
             "message within %.0f s", ps->worker_index, ps->timeout_s);
  gs_free(sreq);
  return GS_OK;
}

gs_status gs_ps_finish(gs_ps *ps) {
  GS_CHECK(need_worker(ps, "gs_ps_finish"));
  ps_request req = {.type = PS_MSG_FIN, .clock = ps->clock};
  MPI_Request *sreq = gs_malloc((size_t)ps->servers * sizeof *sreq);
  if (!sreq) return GS_ERR_NOMEM;
  int ns = send_all(ps, &req, NULL, 0, sreq);
  if (ps_wait_all(ns, sreq, ps->timeout_s) != 0)
    ps_abort(ps, "worker %d: the parameter servers did not take its finish "
             "message within %.0f s", ps->worker_index, ps->timeout_s);
  gs_free(sreq);
  ps->finished = 1;
  return GS_OK;
}
