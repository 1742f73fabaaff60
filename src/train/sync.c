/* The table of sync modes (sync.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sync.h"
#include "sync_ps.h"

/* Every sync mode the trainer knows; a new one is a line here. */
static const train_sync_ops *const modes[] = {
    &train_sync_engine,    &train_sync_ps_bsp,     &train_sync_ps_asp,
    &train_sync_ps_ssp,    &train_sync_ps_switch,  &train_sync_local,
    &train_sync_post_local, &train_sync_delayed};

/* A mode is named by the part of --sync before its first ':' ("ssp:2" is
 * ssp's; the mode parses the rest). */
const train_sync_ops *train_sync_find(const char *name) {
  size_t len = strcspn(name, ":");
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
    if (strlen(modes[i]->name) == len && strncmp(modes[i]->name, name, len) == 0)
      return modes[i];
  return NULL;
}

gs_status train_sync_check(const char *spec) {
  const train_sync_ops *m = train_sync_find(spec);
  if (m == NULL)
    return gs_error(GS_ERR_PARSE, "unknown sync mode '%s' (%s)", spec, gs_train_sync_names());
  return m->check(spec);
}

int gs_train_sync_uses_servers(const char *spec) {
  const train_sync_ops *m = train_sync_find(spec);
  return m != NULL && m->servers;
}

const char *gs_train_sync_names(void) {
  static char names[256];
  if (names[0] == '\0') {
    size_t len = 0;
    for (size_t i = 0; i < sizeof modes / sizeof *modes && len < sizeof names; i++) {
      int w = snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", modes[i]->name);
      len += w > 0 ? (size_t)w : 0;
    }
  }
  return names;
}

double gs_train_hidden(const gs_train_stats *s) {
  return s->comm_s > 0 ? fmax(0.0, 1.0 - s->wait_s / s->comm_s) : 1.0;
}
