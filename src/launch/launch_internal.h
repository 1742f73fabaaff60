/* src/launch's own helpers (not installed). */
#ifndef GS_LAUNCH_INTERNAL_H
#define GS_LAUNCH_INTERNAL_H

#include <stddef.h>

#include "gradsync/launch.h"

/* Runs the discovery script `script` (executed directly, no shell; its
 * stderr to err_fd), at most timeout_s seconds, and parses what it prints.
 * Returns 0 with *hosts (gs_malloc'ed) and *n, or -1 with why (the script's
 * name, and the line for a parse error) and *hosts NULL. */
int launch_discover(const char *script, double timeout_s, int err_fd, gs_launch_host **hosts,
                    int *n, char *why, size_t why_len);


#endif
