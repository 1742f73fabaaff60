/*
 * Internals of the parameter servers (include/gradsync/ps.h): the handle,
 * the wire format and the switch policy shared by ps.c (set-up, worker),
 * server.c and policy.c.
 */
#ifndef GS_PS_INTERNAL_H
#define GS_PS_INTERNAL_H

#include <stdint.h>

#include "gradsync/ps.h"
#include "gs_internal.h"

/* Tags on the parameter servers' communicator. A message's chunks share the
 * tag of their kind: MPI's non-overtaking rule keeps them in order. */
enum { PS_TAG_REQ = 1, PS_TAG_PUSH_DATA = 2, PS_TAG_REPLY = 3,
       PS_TAG_PULL_DATA = 4 };

enum { PS_MSG_PUSH = 1, PS_MSG_PULL, PS_MSG_INIT, PS_MSG_FIN, PS_MSG_PARK, PS_MSG_STATE };

/* Worker -> server, before the gradient's chunks (PUSH, INIT) or alone. */
typedef struct {
  int32_t type;
  int32_t mode;       /* gs_ps_mode of a push; INIT: 1 when the optimizer
                         state's chunks follow the parameters' */
  int32_t batch;      /* samples behind a push */
  int32_t parks;      /* the worker's gs_ps_park calls so far (a PARK
                         counts itself): a push's round generation */
  int64_t clock;      /* the worker's pushes before this one */
  float lr, momentum; /* as applied to this push */
  double compute_s;   /* worker time since its previous answer */
  int64_t samples_done; /* INIT: samples trained before (a resumed run) */
} ps_request;

/* Server -> worker, before the parameters' chunks. */
typedef struct {
  int32_t next_mode;  /* server 0's decision for the worker's next step */
  int32_t stop;       /* sample budget used up */
  int32_t straggler;  /* server 0's online policy: the worker it last saw
                         as a straggler, or -1 */
  int64_t updates;    /* updates applied to this shard so far */
  int64_t samples;    /* server 0: samples applied so far */
} ps_reply;

/* The first server's switch policy (policy.c). */
typedef struct {
  gs_ps_sync sync;
  int workers;
  long budget;          /* samples; 0: none */
  long samples;         /* applied so far */
  long bsp_samples;     /* applied under BSP */
  double *times;        /* workers x window compute times, ring buffers */
  int *filled;          /* per worker: entries in its ring */
  int *next;            /* per worker: next slot */
  double *scratch;      /* 2 x workers + window: the medians' work space */
  int straggler;        /* last detection: index, or -1 */
  int calm;             /* online, in ASP: decisions since the last one
                           that saw a straggler */
  int hold;             /* decisions without a straggler before going back
                           to BSP: window x workers */
  gs_ps_mode current;   /* the last decision */
  int rejoining;        /* going back to BSP: until a BSP round completes,
                           every decision is BSP, so that no worker waits in
                           a round the others were told to skip */
  long switches;
  double policy_s;
} ps_policy;

gs_status ps_policy_init(ps_policy *p, const gs_ps_sync *sync, int workers,
                         long budget);
/* A resumed run: the samples trained before it, BSP's share taken first. */
void ps_policy_resume(ps_policy *p, long samples_done);
void ps_policy_free(ps_policy *p);
/* Records one push (compute time of worker w, its mode and batch). */
void ps_policy_record_time(ps_policy *p, int w, double compute_s);
void ps_policy_count(ps_policy *p, gs_ps_mode mode, int batch);
/* The mode of the next step, and whether the budget is used up. */
gs_ps_mode ps_policy_decide(ps_policy *p);
int ps_policy_stop(const ps_policy *p);
/* A BSP round completed on this server. */
void ps_policy_round_done(ps_policy *p);
/* The straggler now detected (worker index), or -1. */
int ps_policy_straggler(ps_policy *p);

struct gs_ps {
  MPI_Comm comm;        /* the servers' own duplicate of the job's */
  MPI_Comm worker_comm; /* workers only; MPI_COMM_NULL on servers */
  int rank, size;
  int servers, workers;
  int server_index;     /* -1 on a worker */
  int worker_index;     /* -1 on a server */
  gs_ps_config cfg;
  double timeout_s;
  size_t chunk;         /* floats per message piece */
  size_t total;         /* parameters */
  size_t *begin;        /* servers + 1 shard bounds */
  /* worker state */
  gs_ps_mode mode;      /* of the next step */
  long clock;
  long parks;           /* gs_ps_park calls so far */
  long asp_since;       /* own pushes since the last switch to ASP/SSP */
  double last_answer;   /* when the previous answer arrived */
  int stopped;
  int finished;
  /* fault injection */
  int fault_step;       /* -1: none */
  int fault_stall;
  gs_ps_stats stats;
};

/* Ends the job: "gradsync: rank R: fatal: ..." on stderr, MPI_Abort. */
_Noreturn void ps_abort(gs_ps *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The injected fault, if this rank's count has reached it. */
void ps_fault_check(gs_ps *ps, long count);
/* Number of chunks of n floats. */
static inline size_t ps_chunks(const gs_ps *ps, size_t n) {
  return n == 0 ? 0 : (n + ps->chunk - 1) / ps->chunk;
}
/* One nap of a polling loop that has had nothing to do: sleeps *nap_ns,
 * then doubles it up to PS_NAP_MAX_NS (reset it to PS_NAP_MIN_NS on
 * progress), so an idle rank leaves the shared cores to the others. */
#define PS_NAP_MIN_NS 20000L
#define PS_NAP_MAX_NS 200000L
void ps_nap(long *nap_ns);

/* Polls reqs until all complete; sleeps briefly between polls. Returns 0 on
 * completion, -1 when `timeout_s` passes first. */
int ps_wait_all(int n, MPI_Request *reqs, double timeout_s);

#endif /* GS_PS_INTERNAL_H */
