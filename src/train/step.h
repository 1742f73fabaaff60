/* What the loop tells its extensions about the step at hand. */
#ifndef GRADSYNC_TRAIN_STEP_H
#define GRADSYNC_TRAIN_STEP_H

#include <stdint.h>

typedef struct train_ctx train_ctx;

typedef struct train_step {
  long epoch;        /* 0-based */
  long step;         /* 0-based, inside the epoch */
  long global_step;  /* epoch * steps_per_epoch + step */
  long steps_per_epoch;
  float lr;          /* the learning rate this step's update uses */
  int batch;         /* samples per rank */
  const float *x;    /* this rank's batch: batch x c x h x w */
  const int32_t *y;  /* its labels */
} train_step;

#endif /* GRADSYNC_TRAIN_STEP_H */
