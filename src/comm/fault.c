/*
 * Fault injection, for tests only.
 * GRADSYNC_FAULT="rank=R,call=N[,kind=error|stall]": on rank R of every
 * communicator created with it, the N-th collective issued after
 * gs_comm_create returned (counting from 1) fails with GS_ERR_MPI inside
 * the progress thread, as a transport error would (kind=error, the
 * default), or never completes (kind=stall). The other ranks then see a
 * peer that never arrives.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_internal.h"

gs_status fault_parse(gs_comm *c, const char *spec) {
  c->fault = FAULT_NONE;
  if (spec == NULL || *spec == '\0') return GS_OK;
  snprintf(c->fault_spec, sizeof c->fault_spec, "%s", spec);
  char buf[128];
  if (strlen(spec) >= sizeof buf)
    return gs_error(GS_ERR_PARSE, "GRADSYNC_FAULT is too long");
  strcpy(buf, spec);
  long rank = -1;
  long long call = 0;
  fault_kind kind = FAULT_ERROR;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '='), *end = NULL;
    if (eq == NULL) goto bad;
    *eq++ = '\0';
    if (strcmp(tok, "rank") == 0) {
      rank = strtol(eq, &end, 10);
      if (*eq == '\0' || *end || rank < 0 || rank > INT_MAX) goto bad;
    } else if (strcmp(tok, "call") == 0) {
      call = strtoll(eq, &end, 10);
      if (*eq == '\0' || *end || call < 1) goto bad;
    } else if (strcmp(tok, "kind") == 0) {
      if (strcmp(eq, "error") == 0) kind = FAULT_ERROR;
      else if (strcmp(eq, "stall") == 0) kind = FAULT_STALL;
      else goto bad;
    } else {
      goto bad;
    }
  }
  if (rank < 0 || call < 1) goto bad;
  c->fault = kind;
  c->fault_rank = (int)rank;
  c->fault_call = (uint64_t)call;
  return GS_OK;
bad:
  return gs_error(GS_ERR_PARSE, "GRADSYNC_FAULT=%s: expected "
                  "rank=R,call=N[,kind=error|stall] (N counts from 1)", spec);
}

gs_status fault_inject(gs_comm *c, const coll_args *a, uint64_t seq) {
  char what[256];
  comm_describe_request(c, seq, a->kind, a->count, a->dtype, a->algo, what,
                        sizeof what);
  if (c->fault == FAULT_STALL) {
    fprintf(stderr, "gradsync: rank %d: GRADSYNC_FAULT=%s: %s stalls\n",
            c->world.rank, c->fault_spec, what);
    fflush(stderr);
    for (;;) { /* never completes: only the watchdog ends this */
      struct timespec ts = {0, 100000000L};
      nanosleep(&ts, NULL);
    }
  }
  return gs_error(GS_ERR_MPI, "rank %d of %d: %s failed: injected fault "
                  "(GRADSYNC_FAULT=%s)", c->world.rank, c->world.size, what,
                  c->fault_spec);
}

int fault_due(const gs_comm *c, uint64_t seq) {
  if (c->fault == FAULT_NONE || c->world.rank != c->fault_rank) return 0;
  uint64_t base = atomic_load_explicit(&c->user_base, memory_order_relaxed);
  return base != UINT64_MAX && seq - base == c->fault_call;
}
