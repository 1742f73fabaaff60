/* Double-buffered batches: while step s computes on buffer s % 2, a
 * background thread gathers step s + 1's samples into the other buffer.
 * That buffer is free: step s - 1 used it, and its backward has returned
 * (gs_nn_forward's input must stay unchanged until then). Without the
 * thread (prefetch off) the training thread gathers into buffer 0 itself;
 * the batches are the same bytes either way. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "train_internal.h"

struct train_batches {
  const gs_nn_dataset *ds;
  const size_t *indices; /* the epoch's shard; step s takes batch entries at
                            (s mod shard_steps) * batch */
  long shard_steps;
  int batch, threaded;
  size_t x_count;        /* floats in each x buffer */
  float *x[2];
  int32_t *y[2];
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  long want;             /* the step to gather next, or -1 */
  long ready;            /* the last step gathered, or -1 */
  int busy, stop;
  gs_status st;          /* the gather's failure, with its message */
  char err[512];
};

/* Step's samples into buffer k. */
static gs_status gather(train_batches *b, long step, int k) {
  size_t s = (size_t)(b->shard_steps > 0 ? step % b->shard_steps : step);
  return gs_nn_dataset_gather_n(b->ds, b->indices + s * (size_t)b->batch, b->batch,
                                b->x[k], b->x_count, b->y[k]);
}

static void *prefetch_main(void *arg) {
  train_batches *b = arg;
  pthread_mutex_lock(&b->mu);
  for (;;) {
    while (b->want < 0 && !b->stop) pthread_cond_wait(&b->cv, &b->mu);
    if (b->stop) break;
    long step = b->want;
    b->want = -1;
    b->busy = 1;
    pthread_mutex_unlock(&b->mu);
    gs_status st = gather(b, step, (int)(step % 2));
    pthread_mutex_lock(&b->mu);
    if (st != GS_OK && b->st == GS_OK) {
      b->st = st;
      snprintf(b->err, sizeof b->err, "%s", gs_last_error());
    }
    b->ready = step;
    b->busy = 0;
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

gs_status train_batches_create(train_batches **out, const gs_nn_dataset *ds, int batch,
                               size_t sample_floats, int threaded) {
  *out = NULL;
  train_batches *b = gs_calloc(1, sizeof *b);
  if (b == NULL) return gs_error(GS_ERR_NOMEM, "out of memory for the batch buffers");
  b->ds = ds;
  b->batch = batch;
  b->x_count = (size_t)batch * sample_floats;
  b->want = b->ready = -1;
  for (int k = 0; k < (threaded ? 2 : 1); k++) {
    b->x[k] = gs_malloc(b->x_count * sizeof(float));
    b->y[k] = gs_malloc((size_t)batch * sizeof(int32_t));
    if (!b->x[k] || !b->y[k]) {
      train_batches_destroy(b);
      return gs_error(GS_ERR_NOMEM, "out of memory for a batch of %d", batch);
    }
  }
  if (threaded) {
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    int rc = pthread_create(&b->thread, NULL, prefetch_main, b);
    if (rc != 0) {
      pthread_cond_destroy(&b->cv);
      pthread_mutex_destroy(&b->mu);
      train_batches_destroy(b);
      return gs_error(GS_ERR_NOMEM, "cannot start the prefetch thread: %s", strerror(rc));
    }
    pthread_setname_np(b->thread, "gs-prefetch"); /* for top -H, gdb */
    b->threaded = 1;
  }
  *out = b;
  return GS_OK;
}

/* Waits until the thread is idle with nothing requested. */
static void drain(train_batches *b) {
  while (b->busy || b->want >= 0) pthread_cond_wait(&b->cv, &b->mu);
}

void train_batches_start(train_batches *b, const size_t *indices, long steps) {
  if (!b->threaded) {
    b->indices = indices;
    b->shard_steps = steps;
    return;
  }
  pthread_mutex_lock(&b->mu);
  drain(b);
  b->indices = indices;
  b->shard_steps = steps;
  b->ready = -1;
  if (steps > 0) {
    b->want = 0;
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
}

gs_status train_batches_get(train_batches *b, long step, long steps, float **x, int32_t **y) {
  if (!b->threaded) {
    *x = b->x[0];
    *y = b->y[0];
    return gather(b, step, 0);
  }
  pthread_mutex_lock(&b->mu);
  while (b->ready < step && b->st == GS_OK) pthread_cond_wait(&b->cv, &b->mu);
  gs_status st = b->st;
  if (st == GS_OK && step + 1 < steps) {
    b->want = step + 1;
    pthread_cond_broadcast(&b->cv);
  }
  pthread_mutex_unlock(&b->mu);
  if (st != GS_OK) return gs_error(st, "%s", b->err);
  *x = b->x[step % 2];
  *y = b->y[step % 2];
  return GS_OK;
}

void train_batches_finish(train_batches *b) {
  if (!b->threaded) return;
  pthread_mutex_lock(&b->mu);
  drain(b);
  pthread_mutex_unlock(&b->mu);
}

void train_batches_destroy(train_batches *b) {
  if (b == NULL) return;
  if (b->threaded) {
    pthread_mutex_lock(&b->mu);
    b->stop = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
  }
  for (int k = 0; k < 2; k++) {
    gs_free(b->x[k]);
    gs_free(b->y[k]);
  }
  gs_free(b);
}
