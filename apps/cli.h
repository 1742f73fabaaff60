/* The gradsync command line: one binary, git-style verbs. */
#ifndef GRADSYNC_CLI_H
#define GRADSYNC_CLI_H

#include <stddef.h>
#include <stdio.h>

int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_train(int argc, char **argv);

/* Parses "4K", "256MB", "1GiB", "4096" into bytes (K/M/G are powers of
 * 1024, as nccl-tests reads them). Returns 0 on success. */
int cli_parse_bytes(const char *s, size_t *out);
/* Parses a positive integer. Returns 0 on success. */
int cli_parse_int(const char *s, int min, int max, int *out);
/* Prints an error in the tool's format: "gradsync <verb>: message". */
void cli_error(const char *verb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Writes a one-line JSON description of the machine and software to f. */
void cli_print_env_json(FILE *f);

#endif /* GRADSYNC_CLI_H */
