/* Per-rank compressor memory files (sync_memory.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gradsync/nn.h"
#include "sync_memory.h"

static const char MEM_MAGIC[8] = {'G', 'S', 'C', 'M', 'E', 'M', 0, 0};
#define MEM_VERSION 1u

/* A file (host byte order): this header; per tensor a mem_tensor and its
 * arrays (the residual, then the momentum, as `have` says, count floats
 * each); the crc32 of all that (gs_nn_file). */
typedef struct {
  char magic[8];
  uint32_t version, tensors;
  int32_t rank, size;
  int64_t step;
  char spec[80];
} mem_header;

typedef struct {
  uint64_t count;
  uint32_t have;
  uint32_t adapt; /* gs_compress_memory.adapt; 0 in files of builds that did
                     not keep it (then "reserved", always written 0) */
  uint64_t step; /* the compressor's step counter */
  double lr;
} mem_tensor;

static const unsigned kinds_known = GS_COMPRESS_MEM_RESIDUAL | GS_COMPRESS_MEM_MOMENTUM;

static size_t kinds_count(unsigned have) {
  return (size_t)((have & GS_COMPRESS_MEM_RESIDUAL) != 0) +
         (size_t)((have & GS_COMPRESS_MEM_MOMENTUM) != 0);
}

void train_memory_path(char *buf, size_t n, const char *dir, int rank, long step) {
  snprintf(buf, n, "%s/compress.rank%d.step%ld.gsck", dir, rank, step);
}

gs_status train_memory_write(const char *path, const train_memory *m, int rank, int size,
                             long step) {
  mem_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, MEM_MAGIC, sizeof h.magic);
  h.version = MEM_VERSION;
  h.tensors = (uint32_t)m->ntensors;
  h.rank = rank;
  h.size = size;
  h.step = step;
  snprintf(h.spec, sizeof h.spec, "%s", m->spec);
  gs_nn_file f;
  gs_status st = gs_nn_file_create(&f, path, "compressor memory");
  if (st != GS_OK) return st;
  st = gs_nn_file_write(&f, &h, sizeof h);
  for (size_t i = 0; st == GS_OK && i < m->ntensors; i++) {
    const gs_compress_memory *x = &m->mem[i];
    mem_tensor t = {.count = m->counts[i], .have = x->have & kinds_known, .step = x->step,
                    .lr = x->lr, .adapt = x->adapt};
    st = gs_nn_file_write(&f, &t, sizeof t);
    const size_t bytes = m->counts[i] * sizeof(float);
    if (st == GS_OK && (t.have & GS_COMPRESS_MEM_RESIDUAL))
      st = gs_nn_file_write(&f, x->residual, bytes);
    if (st == GS_OK && (t.have & GS_COMPRESS_MEM_MOMENTUM))
      st = gs_nn_file_write(&f, x->momentum, bytes);
  }
  if (st != GS_OK) {
    gs_nn_file_abort(&f);
    return st;
  }
  return gs_nn_file_commit(&f);
}

/* Checks a file against what the resumed run expects and finds each
 * tensor's record (rec[i]: its mem_tensor, the arrays after it). On a
 * mismatch *why says what differs. */
static int file_fits(const unsigned char *data, size_t size, int rank, int old_size, long step,
                     const train_memory *m, mem_header *h, const unsigned char **rec,
                     char *why, size_t n) {
  if (size < sizeof *h + sizeof(uint32_t)) {
    snprintf(why, n, "truncated (%zu bytes)", size);
    return 0;
  }
  memcpy(h, data, sizeof *h);
  if (memcmp(h->magic, MEM_MAGIC, sizeof h->magic) != 0) {
    snprintf(why, n, "bad magic: not a gradsync compressor memory file");
    return 0;
  }
  if (h->version != MEM_VERSION) {
    snprintf(why, n, "version %u, this build reads %u", h->version, MEM_VERSION);
    return 0;
  }
  if (!gs_nn_file_crc_ok(data, size)) {
    snprintf(why, n, "checksum mismatch (corrupt file)");
    return 0;
  }
  h->spec[sizeof h->spec - 1] = '\0';
  if (h->rank != rank || h->size != old_size || h->step != step) {
    snprintf(why, n, "written by rank %d of %d at step %lld; the checkpoint needs rank %d "
             "of %d at step %ld", (int)h->rank, (int)h->size, (long long)h->step, rank,
             old_size, step);
    return 0;
  }
  if (h->tensors != m->ntensors) {
    snprintf(why, n, "%u tensors, the model has %zu", h->tensors, m->ntensors);
    return 0;
  }
  const size_t end = size - sizeof(uint32_t);
  size_t off = sizeof *h;
  for (size_t i = 0; i < m->ntensors; i++) {
    mem_tensor t;
    if (end - off < sizeof t) {
      snprintf(why, n, "truncated at tensor %zu", i);
      return 0;
    }
    memcpy(&t, data + off, sizeof t);
    if (t.count != m->counts[i] || (t.have & ~kinds_known) != 0) {
      snprintf(why, n, "tensor %zu: %llu elements (memory kinds %u), the model's has %zu",
               i, (unsigned long long)t.count, t.have, m->counts[i]);
      return 0;
    }
    rec[i] = data + off;
    off += sizeof t;
    const size_t bytes = kinds_count(t.have) * m->counts[i] * sizeof(float);
    if (end - off < bytes) {
      snprintf(why, n, "truncated in tensor %zu", i);
      return 0;
    }
    off += bytes;
  }
  if (off != end) {
    snprintf(why, n, "%zu trailing bytes", end - off);
    return 0;
  }
  return 1;
}

/* Reads and checks one rank's file: *data (gs_free) and its records. */
static gs_status read_rank(const char *dir, long step, int old_size, int rank,
                           const train_memory *m, unsigned char **data, mem_header *h,
                           const unsigned char **rec) {
  char path[4200], why[512];
  train_memory_path(path, sizeof path, dir, rank, step);
  size_t max = sizeof *h + sizeof(uint32_t), size = 0;
  for (size_t i = 0; i < m->ntensors; i++)
    max += sizeof(mem_tensor) + 2 * m->counts[i] * sizeof(float);
  *data = NULL;
  gs_status st = gs_nn_file_read(path, "compressor memory", max, data, &size);
  if (st != GS_OK) {
    char what[900];
    snprintf(what, sizeof what, "%s", gs_last_error());
    return gs_error(st, "%s (the checkpoint at step %ld keeps the compressor memory of %d "
                    "ranks in %s/compress.rank<R>.step%ld.gsck; resuming needs it)", what,
                    step, old_size, dir, step);
  }
  if (!file_fits(*data, size, rank, old_size, step, m, h, rec, why, sizeof why)) {
    gs_free(*data);
    *data = NULL;
    return gs_error(GS_ERR_PARSE, "compressor memory %s: %s", path, why);
  }
  return GS_OK;
}

/* Tensor record r's array of kind `kind`, or NULL when it has none. */
static const unsigned char *array_of(const unsigned char *r, unsigned kind) {
  mem_tensor t;
  memcpy(&t, r, sizeof t);
  if (!(t.have & kind)) return NULL;
  const unsigned char *p = r + sizeof t;
  if (kind == GS_COMPRESS_MEM_MOMENTUM && (t.have & GS_COMPRESS_MEM_RESIDUAL))
    p += t.count * sizeof(float);
  return p;
}

gs_status train_memory_load(const char *dir, long step, int old_size, int rank,
                            train_memory *m) {
  const size_t T = m->ntensors;
  const unsigned char **rec = gs_calloc(T + 1, sizeof *rec);
  double **sum = NULL; /* the mean's sums: per tensor, residual then momentum */
  if (rec == NULL) return gs_error(GS_ERR_NOMEM, "out of memory reading compressor memory");
  const int first = rank >= 0 ? rank : 0, last = rank >= 0 ? rank : old_size - 1;
  gs_status st = GS_OK;
  double lr0 = 0;
  for (int r = first; r <= last && st == GS_OK; r++) {
    unsigned char *data = NULL;
    mem_header h;
    st = read_rank(dir, step, old_size, r, m, &data, &h, rec);
    if (st != GS_OK) break;
    if (r == first) {
      snprintf(m->spec, sizeof m->spec, "%s", h.spec);
    } else if (strcmp(h.spec, m->spec) != 0) {
      char path[4200];
      train_memory_path(path, sizeof path, dir, r, step);
      st = gs_error(GS_ERR_PARSE, "compressor memory %s: compression '%s', rank %d's file "
                    "has '%s'", path, h.spec, first, m->spec);
    }
    if (st == GS_OK && r == first && rank < 0) {
      sum = gs_calloc(2 * T + 1, sizeof *sum);
      if (sum == NULL) st = GS_ERR_NOMEM;
      for (size_t i = 0; st == GS_OK && i < T; i++) {
        if (m->mem[i].residual) sum[2 * i] = gs_calloc(m->counts[i] + 1, sizeof(double));
        if (m->mem[i].momentum) sum[2 * i + 1] = gs_calloc(m->counts[i] + 1, sizeof(double));
        if ((m->mem[i].residual && !sum[2 * i]) || (m->mem[i].momentum && !sum[2 * i + 1]))
          st = gs_error(GS_ERR_NOMEM, "out of memory for the compressor memory's mean");
      }
    }
    for (size_t i = 0; st == GS_OK && i < T; i++) {
      gs_compress_memory *x = &m->mem[i];
      mem_tensor t;
      memcpy(&t, rec[i], sizeof t);
      if (r == first) {
        x->have = 0;
        x->step = 0;
        x->lr = t.lr;
        x->adapt = 0;
        lr0 = t.lr;
      }
      if (t.step > x->step) x->step = t.step;
      /* A rank's own, or on another world size the largest (the stages the
       * fits needed somewhere). */
      if (t.adapt > x->adapt) x->adapt = t.adapt;
      /* Each rank's residual is scaled to its own rate: to rank 0's. */
      const double f = lr0 > 0 && t.lr > 0 ? t.lr / lr0 : 1.0;
      for (int k = 0; k < 2; k++) {
        const unsigned kind = k == 0 ? GS_COMPRESS_MEM_RESIDUAL : GS_COMPRESS_MEM_MOMENTUM;
        float *out = k == 0 ? x->residual : x->momentum;
        const unsigned char *a = array_of(rec[i], kind);
        if (out == NULL) continue;
        if (a == NULL) { /* every rank keeps the same kinds */
          if (r == first) continue;
          if (x->have & kind) {
            char path[4200];
            train_memory_path(path, sizeof path, dir, r, step);
            st = gs_error(GS_ERR_PARSE, "compressor memory %s: tensor %zu has no %s, rank "
                          "%d's has", path, i, k == 0 ? "residual" : "momentum", first);
          }
          continue;
        }
        if (r == first) {
          x->have |= kind;
        } else if (!(x->have & kind)) {
          char path[4200];
          train_memory_path(path, sizeof path, dir, r, step);
          st = gs_error(GS_ERR_PARSE, "compressor memory %s: tensor %zu has a %s, rank "
                        "%d's has none", path, i, k == 0 ? "residual" : "momentum", first);
          continue;
        }
        if (rank >= 0) {
          memcpy(out, a, m->counts[i] * sizeof(float));
          continue;
        }
        double *s = sum[2 * i + (size_t)k];
        for (size_t j = 0; j < m->counts[i]; j++) {
          float v;
          memcpy(&v, a + j * sizeof v, sizeof v);
          s[j] += (k == 0 ? f : 1.0) * (double)v;
        }
      }
    }
    gs_free(data);
  }
  /* The mean, the same on every caller. */
  for (size_t i = 0; st == GS_OK && rank < 0 && i < T; i++)
    for (int k = 0; k < 2; k++) {
      float *out = k == 0 ? m->mem[i].residual : m->mem[i].momentum;
      const double *s = sum[2 * i + (size_t)k];
      if (out == NULL || s == NULL) continue;
      for (size_t j = 0; j < m->counts[i]; j++) out[j] = (float)(s[j] / old_size);
    }
  for (size_t i = 0; sum != NULL && i < 2 * T; i++) gs_free(sum[i]);
  gs_free(sum);
  gs_free(rec);
  return st;
}
