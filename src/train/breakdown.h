/* Where a run's time went: named buckets of seconds, printed in the
 * summary (text and JSON, "breakdown": {"compute_s": ...}).
 *
 * The loop fills "compute" (forward, loss, backward and the optimizer,
 * without the time spent waiting for communication), "comm" (time the
 * synchronisation had collectives in flight, hidden or not) and
 * "exposed_comm" (time the training thread waited for it). A sync mode, an
 * optimizer or a hook adds its own buckets ("factor_comm", "inversion", ...)
 * through its breakdown callback. Names are identifiers: the text summary
 * prints '_' as a space. */
#ifndef GRADSYNC_TRAIN_BREAKDOWN_H
#define GRADSYNC_TRAIN_BREAKDOWN_H

enum { TRAIN_BREAKDOWN_MAX = 12, TRAIN_BREAKDOWN_NAME = 32 };

typedef struct train_breakdown {
  int n;
  struct {
    char name[TRAIN_BREAKDOWN_NAME];
    double seconds;
  } bucket[TRAIN_BREAKDOWN_MAX];
} train_breakdown;

/* Adds seconds to the bucket called name, which is created (in order of
 * first use) if it does not exist. Beyond TRAIN_BREAKDOWN_MAX buckets, or
 * for a name longer than TRAIN_BREAKDOWN_NAME - 1, nothing is recorded and
 * -1 is returned; 0 otherwise. */
int train_breakdown_add(train_breakdown *b, const char *name, double seconds);
/* The seconds in the bucket called name (0 if there is none). */
double train_breakdown_get(const train_breakdown *b, const char *name);

#endif /* GRADSYNC_TRAIN_BREAKDOWN_H */
