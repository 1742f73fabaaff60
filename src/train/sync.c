/* The table of sync modes (sync.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sync.h"

/* Every sync mode the trainer knows; a new one is a line here. */
static const train_sync_ops *const modes[] = {&train_sync_engine};

const train_sync_ops *train_sync_find(const char *name) {
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
    if (strcmp(modes[i]->name, name) == 0) return modes[i];
  return NULL;
}

const char *train_sync_names(void) {
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

double train_sync_hidden(const train_sync_stats *s) {
  return s->comm_s > 0 ? fmax(0.0, 1.0 - s->wait_s / s->comm_s) : 1.0;
}
