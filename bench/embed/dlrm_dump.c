/*
 * dlrm_dump: writes the planted synthetic samples that `gradsync train
 * --model dlrm` trains and evaluates on (gs_dlrm_synth, the same seed and
 * options), so that a peer written in another framework (bench/embed/
 * dlrm_torch.py) trains on the same batches and is evaluated on the same
 * held-out samples.
 *
 *   dlrm_dump --tables kaggle --scale 0.01 [--pooling L] [--zipf S]
 *             [--seed S] [--bottom SPEC] [--top SPEC]
 *             [--interaction dot|cat|dcn [--dcn-layers L] [--dcn-rank R]]
 *             --train N --eval M --out FILE
 *
 * The training samples are 0 .. N-1 (gradsync's global step g covers
 * samples g*G .. (g+1)*G-1 of a global batch G, rank r the r-th slice of
 * G/P), the held-out ones 2^40 .. 2^40+M-1 (src/embed/dlrm_train.c).
 *
 * It also writes the model's initial weights (gs_dlrm_create with the
 * run's MLPs, tables and seed: what every rank of a hybrid-parallel run
 * starts from), so that the peer starts where gradsync does and the two
 * AUCs after the same steps can be compared.
 *
 * FILE: one line of JSON (ndense, pooling, the tables' names, rows and
 * dims, train, eval, the teacher's AUC on the held-out samples, the MLP
 * tensors' names and sizes), then for the training samples and then the
 * held-out ones: dense features (float32, sample-major, n x ndense), labels
 * (float32, n), ids (int32, table-major: table t's n x pooling ids
 * together); then the MLP tensors in the header's order ([out x in]
 * weights, row-major, as torch.nn.Linear's), then each table (rows x dim).
 * Little-endian, as the host.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync.h"
#include "gradsync/dlrm.h"
#include "gradsync/embed.h"

#define EVAL_FIRST (1ULL << 40)
#define CHUNK 4096

static int usage(void) {
  fprintf(stderr, "usage: dlrm_dump --tables kaggle|terabyte|mlperf [--scale F] [--pooling L] "
                  "[--zipf S] [--seed S] [--bottom SPEC] [--top SPEC] [--interaction dot|cat|dcn "
                  "[--dcn-layers L] [--dcn-rank R]] --train N --eval M --out FILE\n");
  return 2;
}

/* Samples first .. first+n-1 into f: dense, labels, then ids by table. */
static int dump_set(FILE *f, const gs_dlrm_synth *g, size_t first, size_t n, size_t F, int T,
                    int L) {
  gs_dlrm_batch b;
  if (gs_dlrm_batch_alloc(&b, CHUNK, F, T, (size_t)CHUNK * (size_t)L) != GS_OK) return 1;
  float *dense = malloc(n * F * sizeof *dense), *labels = malloc(n * sizeof *labels);
  int32_t *ids = malloc((size_t)T * n * (size_t)L * sizeof *ids);
  int rc = dense == NULL || labels == NULL || ids == NULL;
  for (size_t at = 0; !rc && at < n; at += CHUNK) {
    size_t k = n - at < CHUNK ? n - at : CHUNK;
    if (gs_dlrm_synth_fill(g, first + at, k, &b) != GS_OK) {
      fprintf(stderr, "dlrm_dump: %s\n", gs_last_error());
      rc = 1;
      break;
    }
    memcpy(dense + at * F, b.dense, k * F * sizeof *dense);
    memcpy(labels + at, b.labels, k * sizeof *labels);
    for (int t = 0; t < T; t++) {
      const gs_embed_bags *bg = &b.bags[t];
      if ((size_t)bg->offsets[k] != k * (size_t)L) {
        fprintf(stderr, "dlrm_dump: table %d: %lld ids for %zu samples, expected %d each\n", t,
                (long long)bg->offsets[k], k, L);
        rc = 1;
        break;
      }
      memcpy(ids + (size_t)t * n * L + at * L, b.ids + (size_t)t * b.max_ids,
             k * (size_t)L * sizeof *ids);
    }
  }
  if (!rc && (fwrite(dense, sizeof *dense, n * F, f) != n * F ||
              fwrite(labels, sizeof *labels, n, f) != n ||
              fwrite(ids, sizeof *ids, (size_t)T * n * L, f) != (size_t)T * n * L)) {
    perror("dlrm_dump: write");
    rc = 1;
  }
  free(dense);
  free(labels);
  free(ids);
  gs_dlrm_batch_free(&b);
  return rc;
}

int main(int argc, char **argv) {
  const char *tables = NULL, *out = NULL, *bottom = NULL, *top = "128-64-1";
  const char *inter = "dot";
  double scale = 1, zipf = -1;
  long pooling = 1, seed = 1, ntrain = 0, neval = 0, dcn_layers = 0, dcn_rank = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL) return usage();
    if (strcmp(a, "--tables") == 0) tables = v;
    else if (strcmp(a, "--scale") == 0) scale = atof(v);
    else if (strcmp(a, "--pooling") == 0) pooling = atol(v);
    else if (strcmp(a, "--zipf") == 0) zipf = atof(v);
    else if (strcmp(a, "--seed") == 0) seed = atol(v);
    else if (strcmp(a, "--train") == 0) ntrain = atol(v);
    else if (strcmp(a, "--eval") == 0) neval = atol(v);
    else if (strcmp(a, "--out") == 0) out = v;
    else if (strcmp(a, "--bottom") == 0) bottom = v;
    else if (strcmp(a, "--top") == 0) top = v;
    else if (strcmp(a, "--interaction") == 0) inter = v;
    else if (strcmp(a, "--dcn-layers") == 0) dcn_layers = atol(v);
    else if (strcmp(a, "--dcn-rank") == 0) dcn_rank = atol(v);
    else return usage();
    i++;
  }
  if (tables == NULL || out == NULL || ntrain <= 0 || neval <= 0 || pooling < 1) return usage();
  gs_embed_spec spec[32];
  int T = 0;
  if (gs_embed_preset(tables, scale, spec, 32, &T) != GS_OK) {
    fprintf(stderr, "dlrm_dump: --tables: %s\n", gs_last_error());
    return 2;
  }
  for (int t = 0; t < T; t++) spec[t].pooling = (double)pooling;
  /* As gs_dlrm_train_run builds it (cmd_train_dlrm.c's options). */
  gs_dlrm_synth_config sc = gs_dlrm_synth_defaults();
  sc.tables = spec;
  sc.ntables = T;
  sc.pooling = (int)pooling;
  if (zipf >= 0) sc.zipf_s = zipf;
  sc.seed = (uint64_t)seed;
  gs_dlrm_synth *g;
  if (gs_dlrm_synth_create(&sc, &g) != GS_OK) {
    fprintf(stderr, "dlrm_dump: %s\n", gs_last_error());
    return 1;
  }
  /* The model as gradsync train --model dlrm makes it (cmd_train_dlrm.c:
   * bottom 13-128-64-D by default). */
  char bottom_default[64];
  snprintf(bottom_default, sizeof bottom_default, "%zu-128-64-%zu", sc.ndense, spec[0].dim);
  gs_dlrm_interaction it;
  if (gs_dlrm_interaction_parse(inter, &it) != GS_OK) {
    fprintf(stderr, "dlrm_dump: --interaction: %s\n", gs_last_error());
    gs_dlrm_synth_destroy(g);
    return 2;
  }
  gs_dlrm_config mc = {bottom ? bottom : bottom_default, top, spec, T, it, 1,
                       (uint64_t)seed, (int)dcn_layers, (size_t)dcn_rank};
  gs_dlrm *m;
  if (gs_dlrm_create(&mc, &m) != GS_OK) {
    fprintf(stderr, "dlrm_dump: %s\n", gs_last_error());
    gs_dlrm_synth_destroy(g);
    return 1;
  }
  double teacher = 0;
  if (gs_dlrm_synth_teacher_auc(g, EVAL_FIRST, (size_t)neval, &teacher) != GS_OK) teacher = -1;
  FILE *f = fopen(out, "wb");
  if (f == NULL) {
    perror(out);
    gs_dlrm_destroy(m);
    gs_dlrm_synth_destroy(g);
    return 1;
  }
  fprintf(f, "{\"ndense\":%zu,\"pooling\":%ld,\"seed\":%ld,\"zipf\":%.17g,\"train\":%ld,"
             "\"eval\":%ld,\"teacher_auc\":%.6f,\"tables\":[",
          sc.ndense, pooling, seed, sc.zipf_s, ntrain, neval, teacher);
  for (int t = 0; t < T; t++)
    fprintf(f, "%s{\"name\":\"%s\",\"rows\":%zu,\"dim\":%zu}", t ? "," : "", spec[t].name,
            spec[t].rows, spec[t].dim);
  fprintf(f, "],\"bottom\":\"%s\",\"top\":\"%s\",\"interaction\":\"%s\",\"params\":[",
          mc.bottom_mlp, top, inter);
  for (size_t i = 0; i < gs_dlrm_param_count(m); i++) {
    const gs_dlrm_param *q = gs_dlrm_param_at(m, i);
    fprintf(f, "%s{\"name\":\"%s\",\"count\":%zu}", i ? "," : "", q->name, q->count);
  }
  fprintf(f, "]}\n");
  int rc = dump_set(f, g, 0, (size_t)ntrain, sc.ndense, T, (int)pooling) ||
           dump_set(f, g, EVAL_FIRST, (size_t)neval, sc.ndense, T, (int)pooling);
  for (size_t i = 0; !rc && i < gs_dlrm_param_count(m); i++) {
    const gs_dlrm_param *q = gs_dlrm_param_at(m, i);
    rc = fwrite(q->weights, sizeof(float), q->count, f) != q->count;
  }
  for (int t = 0; !rc && t < T; t++) {
    const gs_embed_table *e = gs_dlrm_table(m, t);
    rc = fwrite(e->weights, sizeof(float), e->rows * e->dim, f) != e->rows * e->dim;
  }
  if (fclose(f) != 0) rc = 1;
  gs_dlrm_destroy(m);
  gs_dlrm_synth_destroy(g);
  if (rc) remove(out);
  return rc;
}
