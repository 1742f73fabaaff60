/*
 * Timelines (gs_internal.h, gs__timeline_*): complete events ("ph":"X") in
 * the Chrome trace format (the "JSON Object Format" of the Trace Event
 * Format document), which Perfetto and chrome://tracing open. One process
 * per rank (pid = rank) with the owner's named tracks (the engine's
 * compute, comm and wait; DLRM training's), then callers' tracks made on
 * first use. Times are microseconds of CLOCK_MONOTONIC, so files of ranks
 * on one host line up.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "gs_internal.h"

/* Enough for hours of a 600-tensor model; events past it are counted. */
#define TL_MAX_EVENTS (4u << 20)

typedef struct tl_ev {
  uint64_t start_ns, end_ns;
  int track;
  char *name, *args;
} tl_ev;

/* Callers' tracks (gs_engine_trace) follow the owner's. */
#define TL_MAX_TRACKS 16

struct gs__timeline {
  pthread_mutex_t mu;
  char *track[TL_MAX_TRACKS]; /* the owner's, then callers' */
  int ntrack, nbase;
  char who[128];
  tl_ev *ev;
  size_t n, cap, dropped;
  FILE *f;
  char file[4096];
};

/* "t.json" -> "t.rank3.json"; "t" -> "t.rank3". */
static void rank_path(char *dst, size_t n, const char *path, int rank) {
  const char *slash = strrchr(path, '/');
  const char *dot = strrchr(path, '.');
  if (dot == NULL || (slash && dot < slash) || dot == (slash ? slash + 1 : path)) {
    snprintf(dst, n, "%s.rank%d", path, rank);
    return;
  }
  snprintf(dst, n, "%.*s.rank%d%s", (int)(dot - path), path, rank, dot);
}

static char *copy(const char *s) {
  if (s == NULL) return NULL;
  size_t n = strlen(s) + 1;
  char *d = gs_malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

gs_status gs__timeline_open(const char *path, int rank, int size, const char *who,
                            const char *how, const char *const *tracks, int ntracks,
                            gs__timeline **out) {
  *out = NULL;
  gs__timeline *tl = gs_calloc(1, sizeof *tl);
  if (tl == NULL) return gs_error(GS_ERR_NOMEM, "%s: out of memory for a timeline", who);
  if (size > 1) rank_path(tl->file, sizeof tl->file, path, rank);
  else snprintf(tl->file, sizeof tl->file, "%s", path);
  snprintf(tl->who, sizeof tl->who, "%s", who);
  for (int i = 0; i < ntracks && i < TL_MAX_TRACKS; i++) {
    tl->track[i] = copy(tracks[i]);
    tl->ntrack = tl->nbase = i + 1;
  }
  tl->f = fopen(tl->file, "w");
  if (tl->f == NULL) {
    gs_status st = gs_error(GS_ERR_IO, "%s: cannot write the timeline '%s' (%s): %s", who,
                            tl->file, how, strerror(errno));
    for (int i = 0; i < tl->ntrack; i++) gs_free(tl->track[i]);
    gs_free(tl);
    return st;
  }
  pthread_mutex_init(&tl->mu, NULL);
  *out = tl;
  return GS_OK;
}

void gs__timeline_free(gs__timeline *tl) {
  if (tl == NULL) return;
  if (tl->f) fclose(tl->f);
  for (size_t i = 0; i < tl->n; i++) {
    gs_free(tl->ev[i].name);
    gs_free(tl->ev[i].args);
  }
  gs_free(tl->ev);
  for (int i = 0; i < tl->ntrack; i++) gs_free(tl->track[i]);
  pthread_mutex_destroy(&tl->mu);
  gs_free(tl);
}

void gs__timeline_event(gs__timeline *tl, int track, const char *name, uint64_t start_ns,
              uint64_t end_ns, const char *args) {
  if (tl == NULL) return;
  char *n = copy(name), *a = copy(args);
  pthread_mutex_lock(&tl->mu);
  if (tl->n == tl->cap && tl->cap < TL_MAX_EVENTS) {
    size_t cap = tl->cap ? 2 * tl->cap : 1024;
    tl_ev *ev = gs_realloc(tl->ev, cap * sizeof *ev);
    if (ev) {
      tl->ev = ev;
      tl->cap = cap;
    }
  }
  if (n == NULL || tl->n == tl->cap) {
    tl->dropped++;
    pthread_mutex_unlock(&tl->mu);
    gs_free(n);
    gs_free(a);
    return;
  }
  tl->ev[tl->n++] = (tl_ev){start_ns, end_ns > start_ns ? end_ns : start_ns, track, n, a};
  pthread_mutex_unlock(&tl->mu);
}

int gs__timeline_track(gs__timeline *tl, const char *name) {
  if (tl == NULL || name == NULL) return -1;
  int t = -1;
  pthread_mutex_lock(&tl->mu);
  for (int i = tl->nbase; i < tl->ntrack && t < 0; i++)
    if (strcmp(tl->track[i], name) == 0) t = 1 + i;
  if (t < 0 && tl->ntrack < TL_MAX_TRACKS) {
    char *c = copy(name);
    if (c) {
      tl->track[tl->ntrack] = c;
      t = 1 + tl->ntrack++;
    }
  }
  pthread_mutex_unlock(&tl->mu);
  return t;
}

static void put_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

/* Writes the events to the file opened by gs__timeline_open and closes it. */
gs_status gs__timeline_write(gs__timeline *tl, int rank, int size) {
  FILE *f = tl->f;
  tl->f = NULL;
  if (f == NULL) return GS_OK;
  fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,"
          "\"args\":{\"name\":\"rank %d\"}}", rank, rank);
  pthread_mutex_lock(&tl->mu);
  for (int i = 0; i < tl->ntrack; i++) {
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
            "\"args\":{\"name\":", rank, 1 + i);
    put_json_string(f, tl->track[i]);
    fputs("}}", f);
  }
  for (size_t i = 0; i < tl->n; i++) {
    const tl_ev *ev = &tl->ev[i];
    fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
            "\"name\":", rank, ev->track, (double)ev->start_ns * 1e-3,
            (double)(ev->end_ns - ev->start_ns) * 1e-3);
    put_json_string(f, ev->name);
    if (ev->args) fprintf(f, ",\"args\":{%s}", ev->args);
    fputc('}', f);
  }
  size_t dropped = tl->dropped;
  pthread_mutex_unlock(&tl->mu);
  fprintf(f, "\n],\"otherData\":{\"rank\":%d,\"ranks\":%d,\"dropped_events\":%zu}}\n",
          rank, size, dropped);
  if (fclose(f) != 0)
    return gs_error(GS_ERR_IO, "%s: error writing the timeline '%s'", tl->who, tl->file);
  return GS_OK;
}
