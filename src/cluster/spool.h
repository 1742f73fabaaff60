/* The spool directory's shared helpers (spool.c), for the manager and the
 * clients. Not installed. */
#ifndef GS_CLUSTER_SPOOL_H
#define GS_CLUSTER_SPOOL_H

#include <stddef.h>

struct cJSON;

/* Wall-clock seconds (Unix time). */
double spool_wall_s(void);
/* A whole file, at most max bytes, NUL-ended (gs_malloc'ed), or NULL. */
char *spool_read_file(const char *path, size_t max);
/* Puts a request into DIR/incoming (temporary name, then rename). */
int spool_put_request(const char *spool, struct cJSON *req, const char *tag, char *err,
                      size_t errlen);

/* Checks a request as read from DIR/incoming: each field's type and range,
 * by the rules `gradsync submit` and `cancel` check their options with
 * (ids and node counts whole numbers, names of 1 to 63 letters, digits or
 * ._@-, args an array of strings, ...). 0, or -1 with the field's name in
 * field and what it should be in why. */
int spool_check_request(const struct cJSON *r, char *field, size_t flen, char *why,
                        size_t wlen);

#endif
