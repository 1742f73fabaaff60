/* Named time buckets (breakdown.h). */
#include <string.h>

#include "gradsync/train.h"

int gs_train_breakdown_add(gs_train_breakdown *b, const char *name, double seconds) {
  if (strlen(name) >= GS_TRAIN_BREAKDOWN_NAME) return -1;
  for (int i = 0; i < b->n; i++)
    if (strcmp(b->bucket[i].name, name) == 0) {
      b->bucket[i].seconds += seconds;
      return 0;
    }
  if (b->n >= GS_TRAIN_BREAKDOWN_MAX) return -1;
  strcpy(b->bucket[b->n].name, name);
  b->bucket[b->n].seconds = seconds;
  b->n++;
  return 0;
}

double gs_train_breakdown_get(const gs_train_breakdown *b, const char *name) {
  for (int i = 0; i < b->n; i++)
    if (strcmp(b->bucket[i].name, name) == 0) return b->bucket[i].seconds;
  return 0;
}
