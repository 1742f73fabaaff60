/*
 * Measured accuracy of gradient compression, read from the tables that
 * bench/train/compress_sweep.sh writes (bench/results/compress_table*.jsonl):
 * `gradsync plan --search` quotes them beside a compressor it weighs, so that
 * a predicted speed-up never comes without its measured accuracy cost. Only
 * the command line reads them; the library never sees accuracy.
 */
#ifndef GRADSYNC_APPS_ACCURACY_TABLE_H
#define GRADSYNC_APPS_ACCURACY_TABLE_H

#include <stddef.h>

/* One run of the table: a compressor spec (normalised, "none" for dense),
 * with or without error feedback, and its final test accuracy (0..1). */
typedef struct acc_entry {
  char spec[80];
  int error_feedback;
  double accuracy;
} acc_entry;

/* One file: its runs and what they share (taken from its dense run, else
 * its first). */
typedef struct acc_table {
  char path[1024];
  char model[32];   /* the summary's model ("cnn") */
  char net[32];     /* the rows' net ("100mbit", "none": unshaped) */
  int ranks;
  int epochs;
  int max_steps;    /* --max-steps of the stamp's command; 0: whole epochs */
  double dense;     /* the dense run's accuracy; negative when there is none */
  size_t n;
  acc_entry *rows;
} acc_table;

/* Reads a table (a JSON object per line; lines with a "summary" are runs,
 * a "stamp" line gives the command). Returns 0, -1 when the file does not
 * exist, -2 when it holds no run or a line is not JSON (why in err). */
int acc_table_load(const char *path, acc_table *t, char *err, size_t errlen);

/* The run of `spec` (normalised, without "auto:"), preferring one with
 * error feedback (the engine's default); NULL when the table has none. */
const acc_entry *acc_table_find(const acc_table *t, const char *spec);

void acc_table_free(acc_table *t);

#endif
