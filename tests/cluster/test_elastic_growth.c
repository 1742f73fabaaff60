/* The elastic supervisor's check of the hosts a growth would add
 * (src/launch/elastic.c, growth_check_start) runs beside the launch's
 * watch, not in its way. The job here is a stand-in "mpirun" (a shell
 * script) that prints 16 KB every 50 ms for 4 s and records the time of
 * each write; discovery lists hostA:1 and hostB:1, the first launch takes
 * 1 rank on hostA, and the check of hostB (the caller's hosts_ok) takes 2 s
 * and refuses it. Checked: hostB checked once and left out with a warning,
 * the job never stopped (one launch, status 0), and the stand-in's writes
 * never held up for more than a second while the check ran (with the check
 * in the watch's loop, as until 2026-12-04, the pipe filled and they
 * waited the check's 2 s). A check that passes: the job grows to 2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gradsync/launch.h"

static char dir[256];
static atomic_int checks, checked_b, warned_b;
static int b_ok; /* hostB's answer */
static double check_s = 2;

static void write_file(const char *name, const char *text, int mode) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  chmod(path, (mode_t)mode);
}

static void hosts_ok(const char *const *hosts, int n, int *ok, void *user) {
  (void)user;
  atomic_fetch_add(&checks, 1);
  struct timespec ts = {(time_t)check_s, (long)((check_s - (time_t)check_s) * 1e9)};
  nanosleep(&ts, NULL);
  for (int i = 0; i < n; i++) {
    int b = strcmp(hosts[i], "hostB") == 0;
    if (b) atomic_fetch_add(&checked_b, 1);
    ok[i] = b ? b_ok : 1;
  }
}

static void on_event(const gs_elastic_event *ev, void *user) {
  (void)user;
  if (ev->kind == GS_ELASTIC_WARNING && ev->reason && strstr(ev->reason, "hostB") &&
      strstr(ev->reason, "cannot be reached"))
    atomic_fetch_add(&warned_b, 1);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gs_elastic_growth.XXXXXX");
  if (!mkdtemp(dir)) return -1;
  /* The stand-in: its last argument is the directory; SIGUSR1 (a stop to
   * grow) ends it at once with status 0 and a note. */
  write_file("mpirun.sh",
             "#!/bin/bash\n"
             "d=${@: -1}\n"
             "trap 'echo stopped >>\"$d/stops\"; exit 0' USR1\n"
             "echo \"$*\" >>\"$d/launches\"\n"
             "line=$(printf '%16383s' x)\n"
             "end=$((SECONDS + 4))\n"
             "while [ $SECONDS -lt $end ]; do\n"
             "  echo \"$line\"\n"
             "  date +%s.%N >>\"$d/ticks\"\n"
             "  sleep 0.05\n"
             "done\n",
             0755);
  write_file("discover.sh", "#!/bin/sh\necho hostA:1\necho hostB:1\n", 0755);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Runs the job; the longest wait between two of the stand-in's writes. */
static double run_job(gs_elastic_result *res) {
  char mp[300], disc[300], path[300];
  snprintf(mp, sizeof mp, "%s/mpirun.sh", dir);
  snprintf(disc, sizeof disc, "%s/discover.sh", dir);
  const char *names[] = {"ticks", "launches", "stops"};
  for (int k = 0; k < 3; k++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[k]);
    unlink(path);
  }
  char *margv[] = {mp, NULL};
  char *pargv[] = {"prog", dir, NULL};
  int null = open("/dev/null", O_WRONLY);
  assert_true(null > 0);
  gs_elastic_config c = {.min_ranks = 1, .max_ranks = 2, .first_ranks = 1,
                         .discover = disc, .discover_every_s = 0.2, .resize_interval_s = 0,
                         .max_restarts = 0, .kill_grace_s = 2, .stop_wait_s = 10,
                         .mpirun_argv = margv, .prog_argv = pargv, .out_fd = null,
                         .err_fd = null, .hosts_ok = hosts_ok, .on_event = on_event};
  assert_int_equal(gs_elastic_run(&c, res), GS_OK);
  close(null);
  snprintf(path, sizeof path, "%s/ticks", dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  double t, prev = -1, worst = 0;
  int n = 0;
  while (fscanf(f, "%lf", &t) == 1) {
    if (prev > 0 && t - prev > worst) worst = t - prev;
    prev = t;
    n++;
  }
  fclose(f);
  assert_true(n > 10);
  return worst;
}

static void test_refused_in_background(void **state) {
  (void)state;
  atomic_store(&checks, 0);
  atomic_store(&checked_b, 0);
  atomic_store(&warned_b, 0);
  b_ok = 0;
  gs_elastic_result res;
  double worst = run_job(&res);
  printf("hostB refused: %d launch(es), status %d, longest wait between writes %.2f s\n",
         res.nlaunches, res.status, worst);
  assert_int_equal(res.status, 0);
  assert_int_equal(res.nlaunches, 1);
  assert_int_equal(atomic_load(&checked_b), 1);
  assert_int_equal(atomic_load(&warned_b), 1);
  assert_true(worst < 1.0);
  gs_elastic_result_free(&res);
}

static void test_passed_grows(void **state) {
  (void)state;
  atomic_store(&checked_b, 0);
  atomic_store(&warned_b, 0);
  b_ok = 1;
  check_s = 0.5;
  gs_elastic_result res;
  (void)run_job(&res);
  printf("hostB passed: %d launch(es), status %d, sizes %d then %d\n", res.nlaunches,
         res.status, res.launches[0].size, res.nlaunches > 1 ? res.launches[1].size : 0);
  assert_int_equal(res.status, 0);
  assert_int_equal(res.nlaunches, 2);
  assert_int_equal(res.launches[0].size, 1);
  assert_int_equal(res.launches[1].size, 2);
  assert_int_equal(atomic_load(&checked_b), 1); /* checked once, not again at the relaunch */
  assert_int_equal(atomic_load(&warned_b), 0);
  gs_elastic_result_free(&res);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refused_in_background),
      cmocka_unit_test(test_passed_grows),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
