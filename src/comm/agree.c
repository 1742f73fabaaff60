/*
 * gs_agree: the one agreement point of the library and its applications
 * (gradsync/comm.h). Each rank's record is a gs_vote followed by its
 * payload, padded to 8 bytes, so that one fixed-size all-gather carries
 * every rank's whatever it contributes.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "comm_internal.h"

/* The largest payload: the records of many ranks must fit one MPI count. */
#define AGREE_MAX_PAYLOAD ((size_t)1 << 16)

static gs_status exchange(gs_comm *comm, MPI_Comm mpi, const char *what,
                          const void *mine, void *all, size_t bytes) {
  if (comm != NULL)
    return gs_allgather(comm, mine, all, bytes, GS_U8, GS_ALGO_MPI);
  coll_group g = {.mpi = mpi};
  MPI_Comm_rank(mpi, &g.rank);
  MPI_Comm_size(mpi, &g.size);
  int rc = MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                         mpi);
  if (rc == MPI_SUCCESS) return GS_OK;
  char label[160];
  snprintf(label, sizeof label, "MPI_Allgather (%s)", what ? what : "agreement");
  return comm_mpi_error(&g, label, rc);
}

gs_status gs_agree(gs_comm *comm, MPI_Comm mpi, const char *what,
                   gs_status mine, const char *message, const void *payload,
                   size_t payload_bytes, gs_agreement *out) {
  if (out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_agree: out is NULL");
  memset(out, 0, sizeof *out);
  out->first = -1;
  if (comm == NULL && mpi == MPI_COMM_NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_agree: no communicator");
  if (payload_bytes > AGREE_MAX_PAYLOAD || (payload_bytes > 0 && payload == NULL))
    return gs_error(GS_ERR_INVALID_ARG, "gs_agree: a payload of %zu bytes at %p "
                    "(at most %zu)", payload_bytes, payload, AGREE_MAX_PAYLOAD);
  int p = 0;
  if (comm != NULL) p = gs_comm_size(comm);
  else MPI_Comm_size(mpi, &p);
  size_t padded = (payload_bytes + 7) & ~(size_t)7;
  size_t rec = sizeof(gs_vote) + padded;
  if ((size_t)p > (size_t)INT_MAX / rec)
    return gs_error(GS_ERR_INVALID_ARG, "gs_agree: %d ranks' records of %zu "
                    "bytes exceed one MPI call", p, rec);
  char *buf = gs_calloc((size_t)p + 1, rec); /* every rank's, then mine */
  out->votes = gs_malloc((size_t)p * sizeof(gs_vote));
  out->payloads = payload_bytes ? gs_malloc((size_t)p * payload_bytes) : NULL;
  if (buf == NULL || out->votes == NULL || (payload_bytes && out->payloads == NULL)) {
    gs_free(buf);
    gs_agreement_free(out);
    return GS_ERR_NOMEM;
  }
  char *own = buf + (size_t)p * rec;
  gs_vote *v = (gs_vote *)own;
  v->status = (int32_t)mine;
  if (message) snprintf(v->message, sizeof v->message, "%s", message);
  if (payload_bytes) memcpy(own + sizeof(gs_vote), payload, payload_bytes);
  gs_status st = exchange(comm, mpi, what, own, buf, rec);
  if (st != GS_OK) {
    gs_free(buf);
    gs_agreement_free(out);
    return st;
  }
  out->size = p;
  for (int r = 0; r < p; r++) {
    const char *at = buf + (size_t)r * rec;
    memcpy(&out->votes[r], at, sizeof(gs_vote));
    out->votes[r].message[GS_VOTE_MESSAGE - 1] = '\0';
    if (payload_bytes)
      memcpy((char *)out->payloads + (size_t)r * payload_bytes,
             at + sizeof(gs_vote), payload_bytes);
    if (out->votes[r].status == GS_OK) continue;
    if (out->first < 0) out->first = r;
    out->failed++;
  }
  gs_free(buf);
  return GS_OK;
}

int gs_agreement_unanimous(const gs_agreement *a) {
  if (a == NULL || a->votes == NULL || a->size < 1 || a->failed != a->size) return 0;
  for (int k = 1; k < a->size; k++)
    if (a->votes[k].status != a->votes[0].status ||
        strcmp(a->votes[k].message, a->votes[0].message) != 0)
      return 0;
  return 1;
}

void gs_agreement_free(gs_agreement *a) {
  if (a == NULL) return;
  gs_free(a->votes);
  gs_free(a->payloads);
  a->votes = NULL;
  a->payloads = NULL;
}
