/*
 * The fused parallel update: a small persistent thread pool and SGD's step
 * cut into one chunk of the flat parameter array per thread.
 *
 * The pool: workers sleep on a condition variable until the caller
 * publishes a job (a new generation number); tasks are handed out by an
 * atomic counter, the caller's thread taking tasks too; the caller waits
 * until every task has finished. The counter carries the job's generation
 * in its high 32 bits: a worker still looping over one job when the caller
 * publishes the next sees a generation it did not copy and stops, instead
 * of taking a task of the new job with the old job's task count (which ran
 * the task twice and could end the new job early or never). Each element's update depends only on its
 * own weight, gradient and momentum, so which thread runs which chunk
 * cannot change a single bit of the result.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "gradsync/optim.h"
#include "nn_internal.h"

struct gs_nn_pool {
  int nthreads; /* workers + the caller */
  pthread_t *workers;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  unsigned long generation;
  int stopping;
  /* the current job, written under mu before generation is raised */
  void (*run)(void *ctx, int task);
  void *ctx;
  int ntasks;
  atomic_uint_least64_t claim; /* generation << 32 | next task */
  int finished;                /* tasks of this job finished, under mu */
};

/* A job as one thread copied it under mu. */
typedef struct {
  uint32_t gen;
  void (*run)(void *ctx, int task);
  void *ctx;
  int ntasks;
} pool_job;

static pool_job pool_job_copy(const gs_nn_pool *p) {
  return (pool_job){(uint32_t)p->generation, p->run, p->ctx, p->ntasks};
}

/* Takes tasks of job j until none is left or a newer job was published. */
static void pool_work(gs_nn_pool *p, pool_job j) {
  int n = 0;
  uint_least64_t c = atomic_load(&p->claim);
  for (;;) {
    if ((uint32_t)(c >> 32) != j.gen || (int)(uint32_t)c >= j.ntasks) break;
    if (!atomic_compare_exchange_weak(&p->claim, &c, c + 1)) continue;
    j.run(j.ctx, (int)(uint32_t)c);
    n++;
    c = atomic_load(&p->claim);
  }
  if (n) {
    /* The job cannot end before these n are counted, so it is still the
     * current one. */
    pthread_mutex_lock(&p->mu);
    p->finished += n;
    if (p->finished == p->ntasks) pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->mu);
  }
}

static void *pool_main(void *arg) {
  gs_nn_pool *p = arg;
  unsigned long seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stopping && p->generation == seen)
      pthread_cond_wait(&p->wake, &p->mu);
    if (p->stopping) break;
    seen = p->generation;
    pool_job j = pool_job_copy(p);
    pthread_mutex_unlock(&p->mu);
    pool_work(p, j);
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

gs_status gs_nn_pool_create(gs_nn_pool **out, int threads) {
  if (!out || threads < 1 || threads > 256)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_pool_create: %d threads (expected 1 to 256)",
                    threads);
  *out = NULL;
  gs_nn_pool *p = gs_calloc(1, sizeof *p);
  if (!p) return GS_ERR_NOMEM;
  p->nthreads = threads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  atomic_init(&p->claim, 0);
  if (threads > 1) {
    p->workers = gs_calloc((size_t)threads - 1, sizeof *p->workers);
    if (!p->workers) {
      gs_nn_pool_destroy(p);
      return GS_ERR_NOMEM;
    }
    for (int i = 0; i < threads - 1; i++) {
      if (pthread_create(&p->workers[i], NULL, pool_main, p) != 0) {
        gs_nn_pool_destroy(p);
        return gs_error(GS_ERR_INTERNAL,
                        "gs_nn_pool_create: could not start worker %d of %d",
                        i + 1, threads - 1);
      }
      pthread_setname_np(p->workers[i], "gs-optim"); /* for top -H, gdb */
      p->started++;
    }
  }
  *out = p;
  return GS_OK;
}

void gs_nn_pool_destroy(gs_nn_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->started; i++) pthread_join(p->workers[i], NULL);
  gs_free(p->workers);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  gs_free(p);
}

int gs_nn_pool_threads(const gs_nn_pool *p) { return p ? p->nthreads : 0; }

void gs_nn_pool_run(gs_nn_pool *p, void (*run)(void *ctx, int task), void *ctx,
                    int ntasks) {
  if (ntasks <= 0) return;
  if (!p || p->nthreads == 1 || ntasks == 1) {
    for (int t = 0; t < ntasks; t++) run(ctx, t);
    return;
  }
  pthread_mutex_lock(&p->mu);
  p->run = run;
  p->ctx = ctx;
  p->ntasks = ntasks;
  p->finished = 0;
  p->generation++;
  atomic_store(&p->claim, (uint_least64_t)(uint32_t)p->generation << 32);
  pool_job j = pool_job_copy(p);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  pool_work(p, j);
  pthread_mutex_lock(&p->mu);
  while (p->finished < p->ntasks) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

/* ---- SGD over chunks ------------------------------------------------------- */

typedef struct {
  gs_nn_sgd *opt;
  size_t chunk;
} sgd_job;

static void sgd_chunk(void *ctx, int task) {
  const sgd_job *j = ctx;
  gs_nn_net *net = j->opt->net;
  size_t lo = (size_t)task * j->chunk;
  if (lo >= net->total) return;
  size_t n = GS_MIN(j->chunk, net->total - lo);
  nn_sgd_update(&j->opt->cfg, net->flat_w + lo, net->flat_g + lo,
                j->opt->momentum_buf + lo, n);
}

gs_status nn_sgd_step_fused(gs_nn_sgd *opt) {
  int t = gs_nn_pool_threads(opt->pool);
  size_t total = opt->net->total;
  /* equal chunks, rounded up to 16 floats (one 64-byte line) */
  size_t chunk = ((total + (size_t)t - 1) / (size_t)t + 15) & ~(size_t)15;
  if (chunk == 0) chunk = 16;
  sgd_job j = {opt, chunk};
  gs_nn_pool_run(opt->pool, sgd_chunk, &j, (int)((total + chunk - 1) / chunk));
  return GS_OK;
}

gs_status gs_nn_sgd_set_threads(gs_nn_sgd *opt, int threads) {
  if (!opt || threads < 1 || threads > 256)
    return gs_error(GS_ERR_INVALID_ARG,
                    "gs_nn_sgd_set_threads: %d threads (expected 1 to 256)",
                    threads);
  gs_nn_pool_destroy(opt->pool);
  opt->pool = NULL;
  if (threads > 1) GS_CHECK(gs_nn_pool_create(&opt->pool, threads));
  return GS_OK;
}

int gs_nn_sgd_threads(const gs_nn_sgd *opt) {
  return opt && opt->pool ? gs_nn_pool_threads(opt->pool) : 1;
}
