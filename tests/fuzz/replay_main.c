/*
 * Replays a fuzz corpus without libFuzzer: every regular file of the
 * directories (or the files) named on the command line is fed to the
 * target's LLVMFuzzerTestOneInput once. Built with the normal compiler, so
 * that ctest checks the committed corpus (the crashers found by fuzzing
 * among it) on every build, and under AddressSanitizer in ASan builds.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0) {
    perror(path);
    fclose(f);
    return 1;
  }
  size_t n = (size_t)sb.st_size;
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf || fread(buf, 1, n, f) != n) {
    fprintf(stderr, "%s: read failed\n", path);
    free(buf);
    fclose(f);
    return 1;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  int failed = 0, files = 0;
  for (int i = 1; i < argc; i++) {
    struct stat sb;
    if (stat(argv[i], &sb) != 0) {
      perror(argv[i]);
      return 1;
    }
    if (!S_ISDIR(sb.st_mode)) {
      failed |= replay_file(argv[i]);
      files++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) {
      perror(argv[i]);
      return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
      if (e->d_name[0] == '.') continue;
      if (n == cap) {
        cap = cap ? 2 * cap : 64;
        names = realloc(names, cap * sizeof *names);
        if (!names) abort();
      }
      size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
      names[n] = malloc(len);
      if (!names[n]) abort();
      snprintf(names[n], len, "%s/%s", argv[i], e->d_name);
      n++;
    }
    closedir(d);
    /* In name order, so that a failure reproduces the same way. */
    qsort(names, n, sizeof *names, cmp_names);
    for (size_t k = 0; k < n; k++) {
      struct stat fs;
      if (stat(names[k], &fs) == 0 && S_ISREG(fs.st_mode)) {
        failed |= replay_file(names[k]);
        files++;
      }
      free(names[k]);
    }
    free(names);
  }
  printf("replayed %d inputs%s\n", files, failed ? ", some unreadable" : "");
  return failed;
}
