/* The supervisor's record of mpirun's children (gs_launch_note_children,
 * src/launch/proc.c): each child noted once by pid and start time, an ssh
 * client told from a rank (the agent flag: it gets a second's grace after
 * mpirun's end, a rank the whole grace), alive until killed, and killed by
 * gs_launch_kill_noted. Here this process stands for mpirun: a child that
 * runs sleep under the name ssh (a symbolic link), and one that runs sleep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gradsync/launch.h"

/* Starts path with argv[0] = name and one argument "30". */
static pid_t start(const char *path, const char *name) {
  pid_t pid = fork();
  if (pid == 0) {
    execl(path, name, "30", (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* Whether /proc/PID/comm reads name (the child has exec'd). */
static int comm_is(pid_t pid, const char *name) {
  char path[64], comm[64] = "";
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
  fclose(f);
  comm[strcspn(comm, "\n")] = '\0';
  return strcmp(comm, name) == 0;
}

static void test_agents(void **state) {
  (void)state;
  char dir[] = "/tmp/gs-proc-XXXXXX", link[64];
  assert_non_null(mkdtemp(dir));
  snprintf(link, sizeof link, "%s/ssh", dir);
  assert_int_equal(symlink("/bin/sleep", link), 0);
  pid_t agent = start(link, "ssh"), rank = start("/bin/sleep", "sleep");
  assert_true(agent > 0 && rank > 0);
  for (int i = 0; i < 500 && !(comm_is(agent, "ssh") && comm_is(rank, "sleep")); i++)
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  gs_launch_pid list[8];
  int n = 0;
  gs_launch_note_children(getpid(), list, &n, 8);
  gs_launch_note_children(getpid(), list, &n, 8); /* noted once */
  assert_int_equal(n, 2);
  for (int i = 0; i < n; i++) {
    assert_true(list[i].pid == agent || list[i].pid == rank);
    assert_int_equal(list[i].agent, list[i].pid == agent);
    assert_true(gs_launch_noted_alive(&list[i]));
  }
  assert_int_equal(gs_launch_kill_noted(list, n), 2);
  int status;
  assert_int_equal(waitpid(agent, &status, 0), agent);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  assert_int_equal(waitpid(rank, &status, 0), rank);
  for (int i = 0; i < n; i++) assert_false(gs_launch_noted_alive(&list[i]));
  assert_int_equal(gs_launch_kill_noted(list, n), 0);
  unlink(link);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_agents)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
