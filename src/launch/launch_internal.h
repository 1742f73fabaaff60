/* src/launch's own helpers (not installed). */
#ifndef GS_LAUNCH_INTERNAL_H
#define GS_LAUNCH_INTERNAL_H

#include <stddef.h>
#include <sys/types.h>

#include "gradsync/launch.h"

/* Runs the discovery script `script` (executed directly, no shell; its
 * stderr to err_fd), at most timeout_s seconds, and parses what it prints.
 * Returns 0 with *hosts (gs_malloc'ed) and *n, or -1 with why (the script's
 * name, and the line for a parse error) and *hosts NULL. */
int launch_discover(const char *script, double timeout_s, int err_fd, gs_launch_host **hosts,
                    int *n, char *why, size_t why_len);

/* The same, a step at a time, so that a supervisor watches its launch
 * while the script runs. */
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
 * finished; 1: done, *hosts and *n as launch_discover's; -1: it failed
 * (why). After 1 or -1 the script is reaped. */
int launch_discover_step(launch_discovery *d, int wait_ms, gs_launch_host **hosts, int *n,
                         char *why, size_t why_len);
/* Ends a script still running (its process group) and reaps it. */
void launch_discover_cancel(launch_discovery *d);


#endif
