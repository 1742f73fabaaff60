/* The cluster manager's journal (src/cluster/journal.c): an append-only
 * file of records, one a line, each `CRC32 JSON\n` (the CRC of the JSON
 * text as 8 hexadecimal digits), written with one write() and fsync'd
 * before the manager acts on it. Replay reads records up to the first one
 * that is torn (no newline: the manager died while writing it) or corrupt
 * (its CRC or JSON is wrong), truncates the file there, and hands each good
 * record to the caller in order. Records are whole states (a job's, a
 * node's), never increments, so that a record replayed twice changes
 * nothing. Not installed. */
#ifndef GS_CLUSTER_JOURNAL_H
#define GS_CLUSTER_JOURNAL_H

#include <stddef.h>

struct cJSON;

typedef struct cluster_journal {
  int fd;
  char path[4096];
} cluster_journal;

/* Replays path (a missing file is an empty journal): fn is called with each
 * good record (owned by the replay; valid during the call). A torn or
 * corrupt tail is cut off the file; *dropped (may be NULL) gets its length
 * in bytes. Returns the number of good records, or -1 with err. */
long cluster_journal_replay(const char *path, void (*fn)(const struct cJSON *rec, void *user),
                            void *user, long *dropped, char *err, size_t errlen);

/* What a replay cut off: bytes (0: nothing); line, the first bad record's
 * line (from 1); later, the lines after it, discarded with it; torn, 1 when
 * the bad record is a last line without its newline (a write the manager
 * did not finish: the normal case) and nothing follows; copy, where the
 * journal as it was is kept when it is not torn (PATH.corrupt-TIME; "" when
 * none was made). */
typedef struct cluster_journal_cut {
  long bytes, line, later;
  int torn;
  char copy[4200];
} cluster_journal_cut;

/* cluster_journal_replay, saying in *cut (not NULL) what was cut off, and
 * keeping a copy of the journal first when a record other than a torn last
 * one is bad (a copy that cannot be made is an error: nothing is cut). */
long cluster_journal_replay_cut(const char *path,
                                void (*fn)(const struct cJSON *rec, void *user), void *user,
                                cluster_journal_cut *cut, char *err, size_t errlen);

/* Opens path for appending (creating it). 0, or -1 with err. */
int cluster_journal_open(cluster_journal *j, const char *path, char *err, size_t errlen);

/* Appends rec as one line and fsyncs. 0, or -1 with err. */
int cluster_journal_append(cluster_journal *j, const struct cJSON *rec, char *err, size_t errlen);

/* Replaces the journal with recs[0..n) (a compaction: the states replay
 * made), through a temporary file, fsync and rename; the journal stays open
 * for appending. 0, or -1 with err (the old journal is then untouched). */
int cluster_journal_rewrite(cluster_journal *j, struct cJSON *const *recs, int n, char *err,
                            size_t errlen);

void cluster_journal_close(cluster_journal *j);

/* The CRC-32 (IEEE 802.3, as zlib's crc32) of n bytes. */
unsigned long cluster_crc32(const void *data, size_t n);

/* Writes text to path atomically: a temporary file beside it, fsync,
 * rename, fsync of the directory. 0, or -1 with errno set. */
int cluster_write_atomic(const char *path, const char *text, size_t len);

#endif
