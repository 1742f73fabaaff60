/* src/launch's own helpers (not installed). */
#ifndef GS_LAUNCH_INTERNAL_H
#define GS_LAUNCH_INTERNAL_H

#include <stddef.h>
#include <sys/types.h>

#include "gradsync/launch.h"

/* The discovery script `script` (executed directly, no shell; its stderr
 * to err_fd), run at most timeout_s seconds, a step at a time so that the
 * supervisor watches its launch, and its signals, while the script runs;
 * what it prints is parsed as a host listing. */
typedef struct launch_discovery {
  const char *script;
  pid_t pid;
  int fd, running, too_long;
  char *buf;
  size_t used;
  double deadline, timeout_s;
} launch_discovery;

/* Starts the script. 0, or -1 with why. */
int launch_discover_start(launch_discovery *d, const char *script, double timeout_s,
                          int err_fd, char *why, size_t why_len);
/* Reads what the script printed, waiting at most wait_ms. 0: it has not
 * finished; 1: done, with *hosts (gs_malloc'ed) and *n; -1: it failed (why:
 * the script's name, and the line for a parse error; *hosts NULL). After 1
 * or -1 the script is reaped. */
int launch_discover_step(launch_discovery *d, int wait_ms, gs_launch_host **hosts, int *n,
                         char *why, size_t why_len);
/* Ends a script still running (its process group) and reaps it. */
void launch_discover_cancel(launch_discovery *d);


#endif
