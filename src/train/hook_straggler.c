/* --straggler RANK:FACTOR[:FROM-TO] or RANK:+DELAY[:FROM-TO]: a straggler on
 * purpose. Job rank RANK computes FACTOR times slower over global steps FROM
 * to TO-1 (0-based; all steps without a range): after each such step it
 * sleeps (FACTOR - 1) times that step's compute time, measured as the step's
 * time less the time the sync mode's communication kept it waiting. With
 * +DELAY ("20ms", "0.5s") it sleeps that long after each step instead: a
 * fixed delay, as a busy neighbour or a slow disk adds, the same on any
 * machine (the elastic tests use it to give their jobs a least duration).
 * Sleeping uses no CPU, so the other ranks on a shared machine are not
 * slowed with it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sync_ps.h"
#include "train_ctx.h"

typedef struct straggler {
  train_ctx *t;
  int rank;
  double factor, delay_s;
  long from, to;
  double t0, wait0;
  double slept_s;
} straggler;

/* "20ms", "0.5s", "2s": a delay in seconds into *d, over (0, 60]; the end
 * of the text read into *end. */
static int parse_delay(const char *p, char **end, double *d) {
  double v = strtod(p, end);
  if (*end == p) return 0;
  if (strncmp(*end, "ms", 2) == 0) {
    v /= 1e3;
    *end += 2;
  } else if (**end == 's') {
    *end += 1;
  } else {
    return 0; /* a unit, always: "+20" could be either */
  }
  *d = v;
  return v > 0 && v <= 60.0;
}

gs_status train_straggler_parse(const char *text, int *rank, double *factor, double *delay_s,
                                long *from, long *to) {
  char *end;
  errno = 0;
  long r = strtol(text, &end, 10);
  int ok = !errno && end != text && *end == ':' && r >= 0 && r < 1 << 20;
  double f = 1.0, d = 0;
  long a = 0, b = -1;
  if (ok) {
    const char *p = end + 1;
    if (*p == '+') {
      ok = parse_delay(p + 1, &end, &d);
    } else {
      f = strtod(p, &end);
      ok = end != p && f >= 1.0 && f <= 1000.0;
    }
    if (ok && *end == ':') {
      p = end + 1;
      a = strtol(p, &end, 10);
      ok = end != p && *end == '-' && a >= 0;
      if (ok) {
        p = end + 1;
        b = strtol(p, &end, 10);
        ok = end != p && *end == '\0' && b > a;
      }
    } else if (ok) {
      ok = *end == '\0';
    }
  }
  if (!ok)
    return gs_error(GS_ERR_PARSE,
                    "'%s': expected RANK:FACTOR[:FROM-TO] or RANK:+DELAY[:FROM-TO] with a "
                    "rank >= 0, a slow-down factor from 1 to 1000 or a delay per step such "
                    "as +20ms or +0.5s (at most 60 s), and global steps FROM < TO",
                    text);
  *rank = (int)r;
  *factor = f;
  *delay_s = d;
  *from = a;
  *to = b;
  return GS_OK;
}

static double sync_wait(const train_ctx *t) {
  gs_train_stats st = {0};
  if (t->sync.ops && t->sync.ops->stats) t->sync.ops->stats(t->sync.self, &st);
  return st.wait_s;
}

static gs_status straggler_create(train_ctx *t, void **self) {
  straggler *s = gs_calloc(1, sizeof *s);
  if (!s) return gs_error(GS_ERR_NOMEM, "out of memory for the straggler hook");
  *self = s;
  s->t = t;
  if (!t->cfg->straggler) {
    s->rank = -1;
    return GS_OK;
  }
  return train_straggler_parse(t->cfg->straggler, &s->rank, &s->factor, &s->delay_s, &s->from,
                               &s->to);
}

/* Whether this rank sleeps after the step. Its position counts on past the
 * epoch's end (an ASP or SSP worker may run more steps than the epoch has):
 * the loop's global_step stays at the epoch's last step there, for the
 * learning-rate schedule, and would slow every such step as that one. */
static int slowed(const straggler *s, const train_step *st) {
  const long step = st->epoch * st->steps_per_epoch + st->step;
  return s->rank == s->t->ranks->rank && step >= s->from && (s->to < 0 || step < s->to);
}

static gs_status straggler_before_forward(void *self, const train_step *st) {
  straggler *s = self;
  if (!slowed(s, st)) return GS_OK;
  s->t0 = gs_now();
  s->wait0 = sync_wait(s->t);
  return GS_OK;
}

static gs_status straggler_after_backward(void *self, const train_step *st) {
  straggler *s = self;
  if (!slowed(s, st)) return GS_OK;
  double compute = (gs_now() - s->t0) - (sync_wait(s->t) - s->wait0);
  double nap = s->delay_s + (s->factor - 1.0) * (compute > 0 ? compute : 0);
  if (nap > 0) {
    struct timespec ts = {(time_t)nap, (long)(fmod(nap, 1.0) * 1e9)};
    nanosleep(&ts, NULL);
    s->slept_s += nap;
  }
  return GS_OK;
}

static void straggler_breakdown(void *self, gs_train_breakdown *b) {
  straggler *s = self;
  if (s->rank == s->t->ranks->rank) gs_train_breakdown_add(b, "straggler_sleep", s->slept_s);
}

static void straggler_destroy(void *self) { gs_free(self); }

const train_hook_ops train_hook_straggler = {
    .name = "straggler",
    .create = straggler_create,
    .before_forward = straggler_before_forward,
    .after_backward = straggler_after_backward,
    .breakdown = straggler_breakdown,
    .destroy = straggler_destroy,
};
