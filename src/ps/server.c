/*
 * The server's loop: one shard, every worker's messages polled in turn (no
 * head-of-line blocking), updates by protocol (BSP rounds; ASP and SSP
 * pushes applied chunk by chunk as they arrive, SSP's answers held while
 * over the bound), the first server's switch decisions, and the
 * silent-worker watchdog.
 */
#include <string.h>

#include "ps_internal.h"

enum { PEER_WAIT_REQ, PEER_WAIT_DATA, PEER_DONE };
enum { PEND_NONE, PEND_BSP, PEND_SSP, PEND_PULL, PEND_STATE };

typedef struct {
  int state;
  int pending;
  int init;             /* the data being received are the initial values */
  int parked;           /* stepped out (gs_ps_park) until its next push */
  long parks;           /* its PARK messages received */
  ps_request req;
  MPI_Request req_r;
  MPI_Request *data_r;
  int ndata;
  float *grad;          /* the push being received or held (BSP) */
  MPI_Request *send_r;  /* the answer in flight */
  int nsend;
  float *sendbuf;       /* its parameters: a snapshot, so updates made
                           while it is on the wire cannot tear it */
  ps_reply rep;
  long clock;           /* pushes applied */
  long version_seen;    /* shard updates when last answered */
  double last_event;    /* last request or answer */
  int in_round;         /* a member of the BSP round being reduced */
  size_t next;          /* ASP, SSP: the next chunk of its push to apply (stream_push) */
  int stream_answer;    /* its push's answer goes out chunk by chunk too */
} ps_peer;

/* The BSP round being reduced chunk by chunk (try_bsp_round). */
typedef struct {
  int active;
  int k, first;         /* members, and the first (its lr and momentum) */
  size_t next;          /* the next chunk to reduce */
} ps_round;

typedef struct {
  gs_ps *ps;
  gs_ps_update_fn update;
  void *ctx;
  size_t n;             /* shard length */
  float *w, *state, *sum;
  ps_peer *peer;
  int active;           /* workers that have not finished */
  int initialised;
  long version;         /* updates applied */
  long received;        /* pushes received (fault injection) */
  ps_policy policy;     /* server 0 only */
  int has_policy;
  ps_round round;
} ps_server;

static void post_request(ps_server *s, int w) {
  ps_peer *p = &s->peer[w];
  MPI_Irecv(&p->req, (int)sizeof p->req, MPI_BYTE, w, PS_TAG_REQ, s->ps->comm,
            &p->req_r);
  p->state = PEER_WAIT_REQ;
}

/* Receives the shard's chunks from w into dst, after those already posted
 * when `more` (an INIT's optimizer state after its parameters: the same
 * tag, so MPI's non-overtaking rule keeps them in order). */
static void post_data_more(ps_server *s, int w, float *dst, int more) {
  ps_peer *p = &s->peer[w];
  int r = more ? p->ndata : 0;
  for (size_t off = 0; off < s->n; off += s->ps->chunk) {
    size_t len = GS_MIN(s->ps->chunk, s->n - off);
    MPI_Irecv(dst + off, (int)len, MPI_FLOAT, w, PS_TAG_PUSH_DATA, s->ps->comm,
              &p->data_r[r++]);
  }
  p->ndata = r;
  p->next = 0;
  p->state = PEER_WAIT_DATA;
}

static void post_data(ps_server *s, int w, float *dst) { post_data_more(s, w, dst, 0); }

static long min_clock(const ps_server *s) {
  long m = -1;
  for (int w = 0; w < s->ps->workers; w++)
    if (s->peer[w].state != PEER_DONE && !s->peer[w].parked &&
        (m < 0 || s->peer[w].clock < m))
      m = s->peer[w].clock;
  return m < 0 ? 0 : m;
}

/* The next mode of a worker (server 0 decides; the others' is ignored). */
static int decide(ps_server *s) {
  return s->has_policy ? (int)ps_policy_decide(&s->policy) : 0;
}

/* Waits for the previous answer to w to have left (the worker took it
 * before asking again), so that its send buffer can be rewritten. */
static void answer_drain(ps_server *s, int w) {
  gs_ps *ps = s->ps;
  ps_peer *p = &s->peer[w];
  if (p->nsend > 0 && ps_wait_all(p->nsend, p->send_r, ps->timeout_s) != 0)
    ps_abort(ps, "parameter server %d: worker %d (rank %d) did not take "
             "its answer within %.0f s", ps->server_index, w, w, ps->timeout_s);
  p->nsend = 0;
}

/* Sends chunk [off, off + len) of the shard's parameters (or of `src`, the
 * optimizer state) to w, from a snapshot. */
static void answer_chunk_of(ps_server *s, const float *src, int w, size_t off, size_t len) {
  ps_peer *p = &s->peer[w];
  memcpy(p->sendbuf + off, src + off, len * sizeof(float));
  MPI_Isend(p->sendbuf + off, (int)len, MPI_FLOAT, w, PS_TAG_PULL_DATA,
            s->ps->comm, &p->send_r[p->nsend++]);
}

static void answer_chunk(ps_server *s, int w, size_t off, size_t len) {
  answer_chunk_of(s, s->w, w, off, len);
}

/* The answer's header: next mode, stop, counts. It completes the answer
 * (the worker waits for the header and every chunk, matched by tag). */
static void answer_header(ps_server *s, int w, int next_mode) {
  gs_ps *ps = s->ps;
  ps_peer *p = &s->peer[w];
  p->rep.next_mode = next_mode;
  p->rep.stop = s->has_policy ? ps_policy_stop(&s->policy) : 0;
  p->rep.updates = s->version;
  p->rep.samples = s->has_policy ? s->policy.samples : 0;
  p->rep.straggler = s->has_policy ? s->policy.straggler : -1;
  MPI_Isend(&p->rep, (int)sizeof p->rep, MPI_BYTE, w, PS_TAG_REPLY, ps->comm,
            &p->send_r[p->nsend++]);
  long gap = p->clock - min_clock(s);
  if (gap > ps->stats.max_clock_gap) ps->stats.max_clock_gap = gap;
  p->version_seen = s->version;
  p->pending = PEND_NONE;
  p->last_event = gs_now();
}

/* The whole shard at once (ASP, SSP, pulls), or its optimizer state. */
static void answer_from(ps_server *s, const float *src, int w, int next_mode) {
  answer_drain(s, w);
  for (size_t off = 0; off < s->n; off += s->ps->chunk)
    answer_chunk_of(s, src, w, off, GS_MIN(s->ps->chunk, s->n - off));
  answer_header(s, w, next_mode);
}

static void answer(ps_server *s, int w, int next_mode) { answer_from(s, s->w, w, next_mode); }

/* The mode an answer to a pull names: the policy's current protocol (a
 * resumed run's, past its switch), else the fixed mode. */
static int pull_mode(const ps_server *s) {
  return s->has_policy ? (int)s->policy.current : (int)s->ps->mode;
}

/* Pulls held while the shard was not whole (a BSP round half applied, or
 * no initial values yet). */
static void answer_held_pulls(ps_server *s) {
  for (int w = 0; w < s->ps->workers; w++) {
    if (s->peer[w].pending == PEND_PULL) answer(s, w, pull_mode(s));
    if (s->peer[w].pending == PEND_STATE) answer_from(s, s->state, w, pull_mode(s));
  }
}

/* A push has arrived in full. */
static void on_push(ps_server *s, int w) {
  gs_ps *ps = s->ps;
  ps_peer *p = &s->peer[w];
  ps_fault_check(ps, ++s->received);
  ps->stats.pushes++;
  long stale = s->version - p->version_seen;
  if (stale > ps->stats.max_staleness) ps->stats.max_staleness = stale;
  if (s->has_policy) ps_policy_record_time(&s->policy, w, p->req.compute_s);
  gs_ps_mode mode = (gs_ps_mode)p->req.mode;
  if (mode == GS_PS_BSP) {
    p->pending = PEND_BSP;
    return;
  }
  /* ASP and SSP: applied chunk by chunk as it arrived (stream_push) */
  if (p->stream_answer && ps_chunks(ps, s->n) == 0) answer_drain(s, w); /* no chunk drained */
  s->version++;
  ps->stats.updates++;
  p->clock++;
  if (s->has_policy) ps_policy_count(&s->policy, mode, p->req.batch);
  if (p->stream_answer)
    answer_header(s, w, decide(s));
  else
    p->pending = PEND_SSP;
}

/* Whether w's data in flight is an asynchronous push (ASP or SSP), applied
 * chunk by chunk. */
static int async_push(const ps_peer *p) {
  return p->state == PEER_WAIT_DATA && !p->init && p->req.type == PS_MSG_PUSH &&
         (p->req.mode == GS_PS_ASP || p->req.mode == GS_PS_SSP);
}

/* Whether some asynchronous push is applied in part: the shard is then not
 * one version, and a pull waits for it (as for a BSP round half applied). */
static int async_streaming(const ps_server *s) {
  for (int w = 0; w < s->ps->workers; w++)
    if (async_push(&s->peer[w]) && s->peer[w].next > 0) return 1;
  return 0;
}

/* Whether the answer to w's asynchronous push, whose request has just
 * come, can go out chunk by chunk: always under ASP; under SSP:s when w,
 * one push further, will be at most s ahead of the slowest worker, which
 * stays so until the push is in (clocks only grow) unless a parked worker
 * comes back behind them, so not while one is parked. Else SSP holds the
 * answer and sends it whole (try_ssp). */
static int answer_streams(const ps_server *s, int w) {
  const ps_peer *p = &s->peer[w];
  if (p->req.mode == GS_PS_ASP) return 1;
  for (int q = 0; q < s->ps->workers; q++)
    if (s->peer[q].state != PEER_DONE && s->peer[q].parked) return 0;
  return p->clock + 1 - min_clock(s) <= (long)s->ps->cfg.sync.staleness;
}

/* ASP and SSP: each chunk of w's push, as soon as it has arrived, is
 * applied and (when its answer is not held back, answer_streams) sent back
 * while the later chunks are still on the wire (a BSP round's pipeline,
 * for one worker), so that the worker's push and pull share the time on
 * opposite directions of the links instead of following each other; the
 * result equals one update of the whole push, since the update is
 * elementwise. Until 2026-12-01 the whole push was received, then applied
 * and answered: one worker under ASP trained 0.62-0.69x as fast as under
 * BSP (bench/results/cluster_ps_prior_asp_whole.md). Returns whether a
 * chunk was taken. */
static int stream_push(ps_server *s, int w) {
  gs_ps *ps = s->ps;
  ps_peer *p = &s->peer[w];
  size_t nchunk = ps_chunks(ps, s->n);
  int took = 0;
  while (p->next < nchunk) {
    int done = 0;
    MPI_Test(&p->data_r[p->next], &done, MPI_STATUS_IGNORE);
    if (!done) break;
    if (p->next == 0 && p->stream_answer) answer_drain(s, w);
    size_t off = p->next * ps->chunk, len = GS_MIN(ps->chunk, s->n - off);
    double t0 = gs_now();
    s->update(s->ctx, s->w + off, p->grad + off, s->state + off, len, p->req.lr,
              p->req.momentum);
    ps->stats.busy_s += gs_now() - t0;
    if (p->stream_answer) answer_chunk(s, w, off, len);
    p->next++;
    took = 1;
  }
  return took;
}

/* Whether worker w is in BSP round generation g: it holds a BSP push of
 * that generation, or is receiving one (its request has come). */
static int in_round(const ps_server *s, int w, long g) {
  const ps_peer *p = &s->peer[w];
  if (p->pending == PEND_BSP) return p->req.parks == g;
  return p->state == PEER_WAIT_DATA && !p->init && p->req.type == PS_MSG_PUSH &&
         p->req.mode == GS_PS_BSP && p->req.parks == g;
}

static int poll_peer(ps_server *s, int w);

/* BSP: once every worker expected in a round has sent its push request,
 * the round forms; then each chunk of the shard, as soon as every member's
 * part of it has arrived, is averaged (summed in worker order), updated and
 * sent back to every member, while later chunks are still arriving. The
 * servers' links then carry pulls and pushes at once, as BytePS's
 * partitions do; the result equals one update of the whole shard, since
 * the update is elementwise. The header of each answer goes last.
 *
 * Rounds have generations: a push made after a worker's g-th gs_ps_park
 * belongs to generation g, and the oldest generation held goes first. A
 * round of generation g waits for every worker still training that has not
 * parked a (g+1)-th time: one that left for the next meeting is out, and
 * one that parked g times is back for this round even while its park flag
 * is still set, because messages from different workers arrive in any
 * order (a worker's push after a meeting can overtake another's park for
 * it). Without the generation, the first push after a meeting every
 * worker parked at made a round of its own. */
static int try_bsp_round(ps_server *s) {
  gs_ps *ps = s->ps;
  int W = ps->workers;
  ps_round *r = &s->round;
  if (!r->active) {
    long g = -1;
    for (int w = 0; w < W; w++) {
      const ps_peer *p = &s->peer[w];
      long pg = p->req.parks;
      if (in_round(s, w, pg) && (g < 0 || pg < g)) g = pg;
    }
    if (g < 0) return 0;
    for (int w = 0; w < W; w++) {
      if (s->peer[w].state == PEER_DONE || s->peer[w].parks > g) continue;
      if (!in_round(s, w, g)) return 0;
    }
    *r = (ps_round){.active = 1, .first = -1};
    for (int w = 0; w < W; w++) {
      ps_peer *p = &s->peer[w];
      p->in_round = (p->state != PEER_DONE && p->parks <= g) && in_round(s, w, g);
      if (!p->in_round) continue;
      if (r->first < 0) r->first = w;
      r->k++;
      answer_drain(s, w);
    }
  }
  const ps_request *q = &s->peer[r->first].req;
  size_t nchunk = ps_chunks(ps, s->n), next0 = r->next;
  for (; r->next < nchunk; r->next++) {
    size_t off = r->next * ps->chunk, len = GS_MIN(ps->chunk, s->n - off);
    for (int w = 0; w < W; w++) {
      ps_peer *p = &s->peer[w];
      if (!p->in_round || p->pending == PEND_BSP) continue;
      int done = 0;
      MPI_Test(&p->data_r[r->next], &done, MPI_STATUS_IGNORE);
      if (!done) return r->next > next0;
    }
    double t0 = gs_now();
    int started = 0;
    for (int w = 0; w < W; w++) {
      if (!s->peer[w].in_round) continue;
      if (!started)
        memcpy(s->sum + off, s->peer[w].grad + off, len * sizeof(float));
      else
        gs_reduce_local(s->sum + off, s->peer[w].grad + off, len, GS_F32, GS_SUM);
      started = 1;
    }
    gs_scale_div(s->sum + off, len, GS_F32, r->k);
    s->update(s->ctx, s->w + off, s->sum + off, s->state + off, len, q->lr,
              q->momentum);
    ps->stats.busy_s += gs_now() - t0;
    for (int w = 0; w < W; w++)
      if (s->peer[w].in_round) answer_chunk(s, w, off, len);
  }
  /* Every member's push is in: let each finish as a push (its next request
   * posted, its bookkeeping, PEND_BSP), then close the round. */
  for (int w = 0; w < W; w++)
    if (s->peer[w].in_round && s->peer[w].state == PEER_WAIT_DATA) poll_peer(s, w);
  r->active = 0;
  s->version++;
  ps->stats.updates++;
  for (int w = 0; w < W; w++)
    if (s->peer[w].in_round) {
      s->peer[w].clock++;
      if (s->has_policy)
        ps_policy_count(&s->policy, GS_PS_BSP, s->peer[w].req.batch);
    }
  if (s->has_policy) ps_policy_round_done(&s->policy);
  int next = decide(s);
  for (int w = 0; w < W; w++)
    if (s->peer[w].in_round) {
      s->peer[w].in_round = 0;
      answer_header(s, w, next);
    }
  answer_held_pulls(s);
  return 1;
}

/* SSP: a held answer goes out once its worker is at most s steps ahead of
 * the slowest worker still training. */
static void try_ssp(ps_server *s) {
  long bound = s->ps->cfg.sync.staleness;
  long m = min_clock(s);
  for (int w = 0; w < s->ps->workers; w++)
    if (s->peer[w].pending == PEND_SSP && s->peer[w].clock - m <= bound)
      answer(s, w, decide(s));
}

static int poll_peer(ps_server *s, int w) {
  ps_peer *p = &s->peer[w];
  int done = 0;
  if (p->state == PEER_WAIT_REQ) {
    MPI_Test(&p->req_r, &done, MPI_STATUS_IGNORE);
    if (!done) return 0;
    p->last_event = gs_now();
    switch (p->req.type) {
      case PS_MSG_INIT:
        if (s->has_policy && p->req.clock > 0) s->policy.budget = p->req.clock;
        if (s->has_policy) ps_policy_resume(&s->policy, (long)p->req.samples_done);
        p->init = 1;
        post_data(s, w, s->w);
        if (p->req.mode == 1) post_data_more(s, w, s->state, 1);
        break;
      case PS_MSG_PUSH:
        p->init = 0;
        p->parked = 0;
        p->stream_answer = p->req.mode != GS_PS_BSP && answer_streams(s, w);
        post_data(s, w, p->grad);
        break;
      case PS_MSG_PULL:
        /* Not in the middle of a BSP round or an ASP push: their chunks
         * are updated one at a time, and a pull would see some of them
         * new, some old. */
        if (s->initialised && !s->round.active && !async_streaming(s))
          answer(s, w, pull_mode(s));
        else
          p->pending = PEND_PULL;
        post_request(s, w);
        break;
      case PS_MSG_STATE:
        if (s->initialised && !s->round.active && !async_streaming(s))
          answer_from(s, s->state, w, pull_mode(s));
        else
          p->pending = PEND_STATE;
        post_request(s, w);
        break;
      case PS_MSG_PARK:
        p->parked = 1;
        p->parks = p->req.parks;
        post_request(s, w);
        break;
      case PS_MSG_FIN:
        p->state = PEER_DONE;
        s->active--;
        break;
      default:
        ps_abort(s->ps, "parameter server %d: worker %d sent a message of "
                 "unknown type %d", s->ps->server_index, w, (int)p->req.type);
    }
    return 1;
  }
  if (p->state == PEER_WAIT_DATA) {
    if (async_push(p)) {
      int took = stream_push(s, w);
      if (p->next < ps_chunks(s->ps, s->n)) return took;
    } else {
      MPI_Testall(p->ndata, p->data_r, &done, MPI_STATUSES_IGNORE);
      if (!done) return 0;
    }
    p->last_event = gs_now();
    int streamed = async_push(p);
    post_request(s, w);
    if (p->init) {
      s->initialised = 1;
      answer_held_pulls(s);
    } else {
      on_push(s, w);
      if (streamed && !s->round.active && !async_streaming(s)) answer_held_pulls(s);
    }
    return 1;
  }
  return 0;
}

/* A worker that neither asks nor is held for 1.5 x the timeout is gone:
 * end the job with its name. Longer than the workers' own timeout, so that
 * a worker stuck on another, dead server names that one first.
 *
 * But while this server holds another worker's answer (a BSP round, SSP's
 * bound), that worker waits for the silent one and gives up after the
 * timeout, naming this server: so a silent worker that has not begun the
 * step (no request) is named after the timeout already, first, since its
 * silence began before the held worker's wait. One whose push is on its
 * way keeps the longer limit: another server that stalls may hold it up,
 * and the workers name that server. (Until 2026-12-07 a worker stalled
 * under BSP or SSP was never named: the others ended the job naming a
 * server that only waited for it.) */
static void check_silence(ps_server *s) {
  gs_ps *ps = s->ps;
  if (ps->timeout_s <= 0) return;
  int held = -1;
  for (int w = 0; w < ps->workers && held < 0; w++)
    if (s->peer[w].state != PEER_DONE &&
        (s->peer[w].pending == PEND_BSP || s->peer[w].pending == PEND_SSP))
      held = w;
  double now = gs_now();
  for (int w = 0; w < ps->workers; w++) {
    ps_peer *p = &s->peer[w];
    if (p->state == PEER_DONE || p->pending != PEND_NONE || p->parked) continue;
    const int blamed = held >= 0 && p->state == PEER_WAIT_REQ;
    const double limit = (blamed ? 1.0 : 1.5) * ps->timeout_s;
    if (now - p->last_event > limit && blamed)
      ps_abort(ps, "parameter server %d: worker %d (rank %d) sent nothing for "
               "%.0f s (GRADSYNC_TIMEOUT %.0f s) while worker %d waits for it (%s): "
               "it died or stalls", ps->server_index, w, w, now - p->last_event,
               ps->timeout_s, held,
               s->peer[held].pending == PEND_BSP ? "a BSP round" : "SSP's staleness bound");
    if (now - p->last_event > limit)
      ps_abort(ps, "parameter server %d: worker %d (rank %d) sent nothing for "
               "%.0f s (GRADSYNC_TIMEOUT %.0f s): it died or stalls",
               ps->server_index, w, w, now - p->last_event, ps->timeout_s);
  }
}

static void server_free(ps_server *s) {
  if (s->peer)
    for (int w = 0; w < s->ps->workers; w++) {
      gs_free(s->peer[w].data_r);
      gs_free(s->peer[w].send_r);
      gs_free(s->peer[w].grad);
      gs_free(s->peer[w].sendbuf);
    }
  gs_free(s->peer);
  gs_free(s->w);
  gs_free(s->state);
  gs_free(s->sum);
  if (s->has_policy) ps_policy_free(&s->policy);
}

gs_status gs_ps_serve(gs_ps *ps, gs_ps_update_fn update, void *ctx) {
  if (!ps || !update)
    return gs_error(GS_ERR_INVALID_ARG, "gs_ps_serve: a NULL argument");
  if (ps->server_index < 0)
    return gs_error(GS_ERR_STATE, "rank %d: gs_ps_serve: this rank is a worker",
                    ps->rank);
  ps_server s = {.ps = ps, .update = update, .ctx = ctx};
  size_t b = ps->begin[ps->server_index], e = ps->begin[ps->server_index + 1];
  s.n = e - b;
  size_t nchunk = ps_chunks(ps, s.n);
  int W = ps->workers;
  s.w = gs_calloc(s.n + 1, sizeof(float));
  s.state = gs_calloc(s.n + 1, sizeof(float));
  s.sum = gs_calloc(s.n + 1, sizeof(float));
  s.peer = gs_calloc((size_t)W, sizeof *s.peer);
  gs_status st = (s.w && s.state && s.sum && s.peer) ? GS_OK : GS_ERR_NOMEM;
  for (int w = 0; st == GS_OK && w < W; w++) {
    ps_peer *p = &s.peer[w];
    p->data_r = gs_calloc(2 * nchunk + 1, sizeof(MPI_Request)); /* INIT: w, state */
    p->send_r = gs_calloc(nchunk + 1, sizeof(MPI_Request));
    p->grad = gs_calloc(s.n + 1, sizeof(float));
    p->sendbuf = gs_calloc(s.n + 1, sizeof(float));
    if (!p->data_r || !p->send_r || !p->grad || !p->sendbuf) st = GS_ERR_NOMEM;
  }
  if (st == GS_OK && ps->server_index == 0) {
    st = ps_policy_init(&s.policy, &ps->cfg.sync, W, ps->cfg.sample_budget);
    s.has_policy = st == GS_OK;
  }
  if (st != GS_OK) {
    server_free(&s);
    return gs_error(st, "rank %d: parameter server %d: no memory for a shard "
                    "of %zu parameters and %d workers", ps->rank,
                    ps->server_index, s.n, W);
  }
  double now = gs_now();
  for (int w = 0; w < W; w++) {
    s.peer[w].last_event = now;
    post_request(&s, w);
  }
  s.active = W;
  long nap = PS_NAP_MIN_NS;
  double idle_since = gs_now();
  while (s.active > 0) {
    int progress = 0;
    for (int w = 0; w < W; w++) progress |= poll_peer(&s, w);
    progress |= try_bsp_round(&s);
    if (progress) {
      try_ssp(&s);
      nap = PS_NAP_MIN_NS;
      idle_since = gs_now();
      continue;
    }
    check_silence(&s);
    if (gs_now() - idle_since < 1e-3) continue;
    ps_nap(&nap);
  }
  /* Let the last answers leave before the buffers go. */
  for (int w = 0; w < W; w++)
    if (s.peer[w].nsend > 0) ps_wait_all(s.peer[w].nsend, s.peer[w].send_r, ps->timeout_s);
  if (s.has_policy) ps->stats.policy_s = s.policy.policy_s;
  server_free(&s);
  return GS_OK;
}
