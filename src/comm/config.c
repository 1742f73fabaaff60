/*
 * The communicator's configuration: the GRADSYNC_* settings read from the
 * environment at gs_comm_create (config_read), and their agreement across
 * ranks (config_agree).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm_internal.h"

/* ---- Settings from the environment ----------------------------------------- */

/* A duration in seconds from the environment: a non-negative number, 0 for
 * "never", at most a year. */
static gs_status env_seconds(const char *name, double def, double *out) {
  *out = def;
  const char *s = getenv(name);
  if (s == NULL || *s == '\0') return GS_OK;
  char *end;
  double v = strtod(s, &end);
  if (*end || !(v >= 0) || v > 365.0 * 86400)
    return gs_error(GS_ERR_PARSE, "%s=%s: expected seconds from 0 (never) to "
                    "31536000", name, s);
  *out = v;
  return GS_OK;
}

/* FNV-1a over a file's bytes: 0 stands for "not set", 1 for "unreadable".
 * Every rank reads its own copy of GRADSYNC_COST_FILE; comparing these
 * catches copies that differ between nodes. */
static uint64_t file_hash(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return 1;
  uint64_t h = GS_FNV1A_BASIS;
  unsigned char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) h = gs_fnv1a(h, buf, n);
  int bad = ferror(f);
  fclose(f);
  if (bad) return 1;
  return h > 1 ? h : h + 2;
}

/* FNV-1a of a string (a setting that names a path), never 0 or 1. */
static uint64_t str_hash(const char *str) {
  uint64_t h = gs_fnv1a_str(GS_FNV1A_BASIS, str);
  return h > 1 ? h : h + 2;
}

gs_status config_read(gs_comm *c) {
  const char *s = getenv("GRADSYNC_CHECK");
  c->check = s && *s && strcmp(s, "0") != 0;
  c->forced_allreduce = GS_ALGO_AUTO;
  s = getenv("GRADSYNC_ALLREDUCE_ALGO");
  if (s && *s) {
    gs_algo a;
    if (gs_algo_parse(s, &a) != GS_OK ||
        (a != GS_ALGO_AUTO && coll_algo_find(COLL_ALLREDUCE, a) == NULL)) {
      /* The choices are the table's allreduce algorithms (dispatch.c). */
      gs_algo algos[GS_ALGO_COUNT];
      size_t nalgo = coll_algo_list(COLL_ALLREDUCE, algos, GS_ALGO_COUNT);
      char names[256] = "";
      size_t len = 0;
      for (size_t i = 0; i < nalgo && len < sizeof names; i++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s, ",
                                gs_algo_name(algos[i]));
      if (len >= 2 && len < sizeof names) names[len - 2] = '\0';
      return gs_error(GS_ERR_PARSE, "GRADSYNC_ALLREDUCE_ALGO=%s: expected "
                      "%s or auto", s, names);
    }
    c->forced_allreduce = a;
  }
  /* GRADSYNC_CALIBRATE: 0 turns the start-up fit of each algorithm off; a
   * size (bytes) sets the largest message it times (default 4 MiB). */
  c->calibrate_bytes = 4u << 20;
  s = getenv("GRADSYNC_CALIBRATE");
  if (s && *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || (v != 0 && (v < 65536 || v > (1ull << 30))))
      return gs_error(GS_ERR_PARSE, "GRADSYNC_CALIBRATE=%s: expected 0 (off) or "
                      "a byte count from 65536 to 2^30", s);
    c->calibrate_bytes = (size_t)v;
  }
  c->spin_s = 50e-6;
  s = getenv("GRADSYNC_SPIN_US");
  if (s && *s) {
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v >= 0) || v > 1e6)
      return gs_error(GS_ERR_PARSE, "GRADSYNC_SPIN_US=%s: expected microseconds "
                      "from 0 to 1e6", s);
    c->spin_s = v * 1e-6;
  }
  GS_CHECK(env_seconds("GRADSYNC_TIMEOUT", 300, &c->timeout_s));
  GS_CHECK(env_seconds("GRADSYNC_STALL_WARN", 60, &c->stall_warn_s));
  const char *ea = getenv("GRADSYNC_ALPHA"), *eb = getenv("GRADSYNC_BETA");
  c->have_env_cost = ea && *ea && eb && *eb;
  /* One without the other is no cost model: refused, not ignored. */
  if (!c->have_env_cost && ((ea && *ea) || (eb && *eb)))
    return gs_error(GS_ERR_PARSE, "%s=%s without %s: the cost model from the environment "
                    "needs both GRADSYNC_ALPHA (seconds) and GRADSYNC_BETA (s/byte)",
                    ea && *ea ? "GRADSYNC_ALPHA" : "GRADSYNC_BETA", ea && *ea ? ea : eb,
                    ea && *ea ? "GRADSYNC_BETA" : "GRADSYNC_ALPHA");
  if (c->have_env_cost) {
    char *end1, *end2;
    c->env_alpha = strtod(ea, &end1);
    c->env_beta = strtod(eb, &end2);
    /* Finite only: an infinite cost would reach every prediction and the
     * JSON records (which have no infinity). */
    if (*end1 || *end2 || !(c->env_alpha >= 0) || !(c->env_beta >= 0) ||
        !isfinite(c->env_alpha) || !isfinite(c->env_beta))
      return gs_error(GS_ERR_PARSE, "GRADSYNC_ALPHA=%s / GRADSYNC_BETA=%s: "
                      "expected finite non-negative numbers (seconds, s/byte)", ea, eb);
  }
  c->env_node = -1;
  s = getenv("GRADSYNC_NODE");
  if (s && *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v > INT_MAX)
      return gs_error(GS_ERR_PARSE, "GRADSYNC_NODE=%s is not a node index", s);
    c->env_node = (int)v;
  }
  s = getenv("GRADSYNC_COST_FILE");
  c->cost_file_hash = s && *s ? file_hash(s) : 0;
  s = getenv("GRADSYNC_COST_CACHE");
  c->cost_cache_hash = s && *s ? str_hash(s) : 0;
  GS_CHECK(fault_parse(c, getenv("GRADSYNC_FAULT")));
  c->segment_bytes = 256 * 1024;
  s = getenv("GRADSYNC_SEGMENT_BYTES");
  if (s && *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v < 1024 || v > (1ull << 30))
      return gs_error(GS_ERR_PARSE, "GRADSYNC_SEGMENT_BYTES=%s: expected a "
                      "byte count between 1024 and 2^30", s);
    c->segment_bytes = (size_t)v;
  }
  return GS_OK;
}

/* ---- One agreed configuration --------------------------------------------
 * Every setting that changes what a rank sends must be the same on every
 * rank, or ranks run different algorithms, segmentations or timeouts on
 * one message stream and hang or corrupt data. gs_comm_create gathers each
 * rank's status of reading its settings and the settings themselves in one
 * fixed-size allgather (which cannot hang on a difference), so that a bad
 * value on one rank, or a value that differs between ranks, is an error on
 * every rank naming the setting and the ranks. The cost model's fitted
 * values are then taken from rank 0 (gs_comm_create's last step). */
enum {
  CFG_SEGMENT, CFG_ALGO, CFG_CALIBRATE, CFG_SPIN, CFG_CHECK, CFG_TIMEOUT,
  CFG_STALL_WARN, CFG_ALPHA, CFG_BETA, CFG_COST_FILE, CFG_COST_CACHE,
  CFG_NONCE, /* not a setting: rank 0's becomes the communicator's identity */
  CFG_COUNT
};

static const struct {
  const char *name;
  char type; /* u: integer, a: algorithm, d: double, h: file hash */
} cfg_fields[CFG_COUNT] = {
    [CFG_SEGMENT] = {"GRADSYNC_SEGMENT_BYTES", 'u'},
    [CFG_ALGO] = {"GRADSYNC_ALLREDUCE_ALGO", 'a'},
    [CFG_CALIBRATE] = {"GRADSYNC_CALIBRATE", 'u'},
    [CFG_SPIN] = {"GRADSYNC_SPIN_US", 'd'},
    [CFG_CHECK] = {"GRADSYNC_CHECK", 'u'},
    [CFG_TIMEOUT] = {"GRADSYNC_TIMEOUT", 'd'},
    [CFG_STALL_WARN] = {"GRADSYNC_STALL_WARN", 'd'},
    [CFG_ALPHA] = {"GRADSYNC_ALPHA", 'd'},
    [CFG_BETA] = {"GRADSYNC_BETA", 'd'},
    [CFG_COST_FILE] = {"GRADSYNC_COST_FILE (its contents)", 'h'},
    [CFG_COST_CACHE] = {"GRADSYNC_COST_CACHE (its path)", 'h'},
    [CFG_NONCE] = {"(the communicator's identity)", 'u'},
};

#define CFG_UNSET UINT64_MAX

static uint64_t dbits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static void cfg_format(int field, uint64_t v, char *out, size_t n) {
  double d;
  memcpy(&d, &v, sizeof d);
  if (v == CFG_UNSET) {
    snprintf(out, n, "unset");
    return;
  }
  switch (cfg_fields[field].type) {
    case 'a': snprintf(out, n, "%s", gs_algo_name((gs_algo)v)); break;
    case 'd': snprintf(out, n, "%g", field == CFG_SPIN ? d * 1e6 : d); break;
    case 'h':
      if (v == 0) snprintf(out, n, "unset");
      else if (v == 1) snprintf(out, n, "unreadable");
      else snprintf(out, n, "hash %016llx", (unsigned long long)v);
      break;
    default: snprintf(out, n, "%llu", (unsigned long long)v);
  }
}

static void cfg_collect(const gs_comm *c, uint64_t *v) {
  v[CFG_SEGMENT] = c->segment_bytes;
  v[CFG_ALGO] = (uint64_t)c->forced_allreduce;
  v[CFG_CALIBRATE] = c->calibrate_bytes;
  v[CFG_SPIN] = dbits(c->spin_s);
  v[CFG_CHECK] = (uint64_t)c->check;
  v[CFG_TIMEOUT] = dbits(c->timeout_s);
  v[CFG_STALL_WARN] = dbits(c->stall_warn_s);
  v[CFG_ALPHA] = c->have_env_cost ? dbits(c->env_alpha) : CFG_UNSET;
  v[CFG_BETA] = c->have_env_cost ? dbits(c->env_beta) : CFG_UNSET;
  v[CFG_COST_FILE] = c->cost_file_hash;
  v[CFG_COST_CACHE] = c->cost_cache_hash;
  /* Differs between communicators that MPI may give the same context id
   * (one freed, the next created): goodbyes carry it (leave.c). */
  v[CFG_NONCE] = gs_now_ns() ^ ((uint64_t)(uintptr_t)c << 16) ^ (uint64_t)getpid() << 40;
}

/* Agrees on `local` (this rank's status of its local set-up, with its
 * message in gs_last_error) and on the configuration. Returns the same
 * failure on every rank when any rank failed or the settings differ. */
gs_status config_agree(gs_comm *c, gs_status local) {
  int p = c->world.size, me = c->world.rank;
  uint64_t mine[CFG_COUNT];
  char why[GS_VOTE_MESSAGE] = "";
  memset(mine, 0, sizeof mine);
  if (local != GS_OK) gs__error_copy(why, sizeof why);
  else cfg_collect(c, mine);
  /* On the caller's thread: the progress thread has not started. */
  gs_agreement ag;
  GS_CHECK(gs_agree(NULL, c->world.mpi, "configuration", local, why, mine,
                    sizeof mine, &ag));
  const uint64_t *all = ag.payloads; /* rank r's field f: all[r * CFG_COUNT + f] */
  char msg[1024];
  size_t n = 0;
  if (ag.failed > 0) {
    int nfailed = 0;
    for (int r = 0; r < p; r++) {
      const gs_vote *v = &ag.votes[r];
      if (v->status == GS_OK) continue;
      if (nfailed++ < 3 && r != me && n < sizeof msg)
        n += (size_t)snprintf(msg + n, sizeof msg - n, "; rank %d failed (%s): %s",
                              r, gs_strerror((gs_status)v->status), v->message);
    }
    gs_status st = (gs_status)ag.votes[ag.first].status;
    gs_agreement_free(&ag);
    if (local != GS_OK) {
      char own[1024];
      gs__error_copy(own, sizeof own);
      return gs_error(local, "gs_comm_create on rank %d: %s%s", me, own,
                      nfailed > 1 ? " (and other ranks failed too)" : "");
    }
    return gs_error(st, "gs_comm_create on rank %d: %d rank(s) could not set "
                    "up%s%s", me, nfailed, msg, nfailed > 3 ? "; ..." : "");
  }
#define CFG_AT(r, f) all[(size_t)(r) * CFG_COUNT + (size_t)(f)]
  int bad_fields = 0;
  c->nonce = CFG_AT(0, CFG_NONCE);
  for (int f = 0; f < CFG_COUNT; f++) {
    if (f == CFG_NONCE) continue;
    int differ = 0;
    for (int r = 1; r < p; r++) differ |= CFG_AT(r, f) != CFG_AT(0, f);
    if (!differ) continue;
    if (bad_fields++ >= 3) continue;
    char v0[64];
    cfg_format(f, CFG_AT(0, f), v0, sizeof v0);
    if (n < sizeof msg)
      n += (size_t)snprintf(msg + n, sizeof msg - n, "; %s is %s on rank 0 but",
                            cfg_fields[f].name, v0);
    int shown = 0;
    for (int r = 1; r < p && n < sizeof msg; r++) {
      if (CFG_AT(r, f) == CFG_AT(0, f)) continue;
      char vr[64];
      cfg_format(f, CFG_AT(r, f), vr, sizeof vr);
      if (shown++ < 4)
        n += (size_t)snprintf(msg + n, sizeof msg - n, "%s %s on rank %d",
                              shown > 1 ? "," : "", vr, r);
      else if (shown == 5)
        n += (size_t)snprintf(msg + n, sizeof msg - n, ", ...");
    }
  }
#undef CFG_AT
  gs_agreement_free(&ag);
  if (bad_fields == 0) return GS_OK;
  return gs_error(GS_ERR_MISMATCH, "gs_comm_create on rank %d: %d setting(s) "
                  "differ between ranks and must be the same on every rank%s%s",
                  me, bad_fields, msg, bad_fields > 3 ? "; ..." : "");
}
