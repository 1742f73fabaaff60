/*
 * Shared by the fuzz targets: the input bytes go to a scratch file that the
 * parser under test then opens by path, so the fuzzer drives the same code
 * (file reading included) that a user's file would. Each process makes its
 * own scratch directory once and removes it at exit.
 */
#ifndef GRADSYNC_FUZZ_COMMON_H
#define GRADSYNC_FUZZ_COMMON_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradsync.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir[256];

static void fuzz_cleanup(void) {
  if (!fuzz_dir[0]) return;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir);
  if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir);
}

/* The scratch directory (created on first use; /dev/shm when present, so
 * that the file round trip costs no disk I/O). */
static const char *fuzz_scratch_dir(void) {
  if (fuzz_dir[0]) return fuzz_dir;
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(fuzz_dir, sizeof fuzz_dir, "%s/gs_fuzz_XXXXXX", base);
  if (!mkdtemp(fuzz_dir)) {
    perror("fuzz: mkdtemp");
    abort();
  }
  atexit(fuzz_cleanup);
  return fuzz_dir;
}

/* Writes data to <scratch>/<name> (replacing it) and returns the path. */
static const char *fuzz_write_file(const char *name, const uint8_t *data,
                                   size_t size) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", fuzz_scratch_dir(), name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    perror("fuzz: open");
    abort();
  }
  size_t done = 0;
  while (done < size) {
    ssize_t w = write(fd, data + done, size - done);
    if (w <= 0) {
      perror("fuzz: write");
      abort();
    }
    done += (size_t)w;
  }
  close(fd);
  return path;
}

/* A parser must never report success with an empty error path, nor fail
 * without saying why: every failure leaves a message naming the file. */
static void fuzz_check_error(gs_status st, const char *path) {
  if (st == GS_OK || st == GS_ERR_NOMEM) return;
  const char *msg = gs_last_error();
  if (msg == NULL || strstr(msg, path) == NULL) {
    fprintf(stderr, "fuzz: failure %s without a message naming %s: \"%s\"\n",
            gs_strerror(st), path, msg ? msg : "(null)");
    abort();
  }
}

#endif /* GRADSYNC_FUZZ_COMMON_H */
