/* The cluster manager's journal (src/cluster/journal.c) and its replay into
 * jobs (manager.c): records in order, a torn last record and a corrupt one
 * cut off (and the journal usable after), a corrupt record in the middle
 * reported with its line and the records after it, and a copy kept,
 * duplicate records changing nothing, compaction; accounts' paths kept
 * whole, and the smallest limit on one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"
#include "manager_internal.h"

static char dir[256], path[320];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gs-journal-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  snprintf(path, sizeof path, "%s/journal", dir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

typedef struct seen {
  int n;
  int ids[16];
} seen;

static void collect(const cJSON *rec, void *user) {
  seen *s = user;
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(rec, "id");
  if (s->n < 16) s->ids[s->n++] = cJSON_IsNumber(id) ? (int)id->valuedouble : -1;
}

static void append_id(cluster_journal *j, int id) {
  char err[256];
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "id", id);
  assert_int_equal(cluster_journal_append(j, r, err, sizeof err), 0);
  cJSON_Delete(r);
}

static long file_size(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static void test_crc(void **state) {
  (void)state;
  assert_int_equal(cluster_crc32("123456789", 9), 0xCBF43926UL);
}

static void test_in_order(void **state) {
  (void)state;
  char err[256];
  cluster_journal j;
  seen s = {0};
  long dropped = -1;
  assert_int_equal(cluster_journal_replay(path, collect, &s, &dropped, err, sizeof err), 0);
  assert_int_equal(dropped, 0); /* no journal yet: empty */
  assert_int_equal(cluster_journal_open(&j, path, err, sizeof err), 0);
  for (int i = 1; i <= 3; i++) append_id(&j, i);
  cluster_journal_close(&j);
  assert_int_equal(cluster_journal_replay(path, collect, &s, &dropped, err, sizeof err), 3);
  assert_int_equal(s.n, 3);
  assert_int_equal(s.ids[0], 1);
  assert_int_equal(s.ids[2], 3);
  assert_int_equal(dropped, 0);
}

/* The manager died inside a write: the last record has no newline. */
static void test_torn_tail(void **state) {
  (void)state;
  char err[256];
  cluster_journal j;
  assert_int_equal(cluster_journal_open(&j, path, err, sizeof err), 0);
  append_id(&j, 1);
  append_id(&j, 2);
  long whole = file_size(path);
  const char *torn = "1234abcd {\"id\":3,\"sta";
  assert_int_equal(write(j.fd, torn, strlen(torn)), (ssize_t)strlen(torn));
  cluster_journal_close(&j);
  seen s = {0};
  long dropped = 0;
  assert_int_equal(cluster_journal_replay(path, collect, &s, &dropped, err, sizeof err), 2);
  assert_int_equal(dropped, (long)strlen(torn));
  assert_int_equal(file_size(path), whole); /* cut off */
  /* Appends go on after the good records. */
  assert_int_equal(cluster_journal_open(&j, path, err, sizeof err), 0);
  append_id(&j, 3);
  cluster_journal_close(&j);
  memset(&s, 0, sizeof s);
  assert_int_equal(cluster_journal_replay(path, collect, &s, &dropped, err, sizeof err), 3);
  assert_int_equal(s.ids[2], 3);
  assert_int_equal(dropped, 0);
}

/* A whole last line whose bytes are wrong (its CRC does not match). */
static void test_corrupt_record(void **state) {
  (void)state;
  char err[256];
  cluster_journal j;
  assert_int_equal(cluster_journal_open(&j, path, err, sizeof err), 0);
  append_id(&j, 1);
  long whole = file_size(path);
  append_id(&j, 22);
  cluster_journal_close(&j);
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, "7", 1, whole + 16), 1); /* "id":22 -> "id":27 */
  close(fd);
  seen s = {0};
  long dropped = 0;
  assert_int_equal(cluster_journal_replay(path, collect, &s, &dropped, err, sizeof err), 1);
  assert_true(dropped > 0);
  assert_int_equal(file_size(path), whole);
}

/* A corrupt record in the middle: it and every record after it are cut
 * off, and the cut says where and how many, with a copy of the journal as
 * it was (until 2026-12-02 the manager called it "a torn last record" and
 * kept nothing); a torn last record is no corruption and makes no copy. */
static void test_corrupt_middle(void **state) {
  (void)state;
  char err[256];
  cluster_journal j;
  assert_int_equal(cluster_journal_open(&j, path, err, sizeof err), 0);
  append_id(&j, 1);
  long one = file_size(path);
  for (int i = 2; i <= 5; i++) append_id(&j, i);
  cluster_journal_close(&j);
  long all = file_size(path);
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, "x", 1, one + 12), 1); /* record 2's JSON */
  close(fd);
  seen s = {0};
  cluster_journal_cut cut;
  assert_int_equal(cluster_journal_replay_cut(path, collect, &s, &cut, err, sizeof err), 1);
  assert_int_equal(s.ids[0], 1);
  assert_int_equal(cut.line, 2);
  assert_int_equal(cut.later, 3);
  assert_int_equal(cut.torn, 0);
  assert_int_equal(cut.bytes, all - one);
  assert_int_equal(file_size(path), one);
  assert_true(strstr(cut.copy, "/journal.corrupt-") != NULL);
  assert_int_equal(file_size(cut.copy), all);
  /* A torn last record: cut, no copy. */
  assert_int_equal(cluster_journal_open(&j, path, err, sizeof err), 0);
  append_id(&j, 2);
  const char *torn = "1234abcd {\"id\":3";
  assert_int_equal(write(j.fd, torn, strlen(torn)), (ssize_t)strlen(torn));
  cluster_journal_close(&j);
  memset(&s, 0, sizeof s);
  assert_int_equal(cluster_journal_replay_cut(path, collect, &s, &cut, err, sizeof err), 2);
  assert_int_equal(cut.torn, 1);
  assert_int_equal(cut.line, 3);
  assert_int_equal(cut.later, 0);
  assert_string_equal(cut.copy, "");
}

static cJSON *job_rec(int id, const char *state, const char *node, int attempt) {
  cJSON *r = cJSON_CreateObject();
  cJSON *o = cJSON_AddObjectToObject(r, "job");
  cJSON_AddNumberToObject(o, "id", id);
  cJSON_AddStringToObject(o, "name", "j");
  cJSON_AddNumberToObject(o, "min", 1);
  cJSON_AddNumberToObject(o, "max", 2);
  cJSON_AddStringToObject(o, "state", state);
  cJSON_AddNumberToObject(o, "attempt", attempt);
  cJSON_AddNumberToObject(o, "restarts_base", attempt > 1 ? attempt - 1 : 0);
  cJSON *n = cJSON_AddArrayToObject(o, "nodes");
  if (node) cJSON_AddItemToArray(n, cJSON_CreateString(node));
  cJSON_AddArrayToObject(o, "args");
  return r;
}

/* Records are whole states: a record replayed twice (the manager wrote it,
 * died before acting, and wrote it again) changes nothing. */
static void test_duplicates(void **state) {
  (void)state;
  char err[256];
  gs_cluster_node nodes[2] = {{"n1", 1}, {"n2", 1}};
  cluster_journal j;
  assert_int_equal(cluster_journal_open(&j, path, err, sizeof err), 0);
  cJSON *recs[] = {job_rec(1, "queued", NULL, 0), job_rec(1, "running", "n1", 1),
                   job_rec(1, "running", "n1", 1), job_rec(2, "queued", NULL, 0),
                   job_rec(2, "queued", NULL, 0), job_rec(1, "running", "n2", 2)};
  for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++)
    assert_int_equal(cluster_journal_append(&j, recs[i], err, sizeof err), 0);
  cluster_journal_close(&j);
  long records = 0, dropped = 0;
  char *text = cluster_replay_snapshot(path, nodes, 2, &records, &dropped, err, sizeof err);
  assert_non_null(text);
  assert_int_equal(records, 6);
  cJSON *snap = cJSON_Parse(text);
  free(text);
  cJSON *jobs = cJSON_GetObjectItemCaseSensitive(snap, "jobs");
  assert_int_equal(cJSON_GetArraySize(jobs), 2);
  cJSON *j1 = cJSON_GetArrayItem(jobs, 0);
  assert_string_equal(cJSON_GetObjectItemCaseSensitive(j1, "state")->valuestring, "running");
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(j1, "restarts")->valueint, 1);
  assert_int_equal(cJSON_GetObjectItemCaseSensitive(j1, "attempts")->valueint, 2);
  cJSON *n = cJSON_GetObjectItemCaseSensitive(j1, "nodes");
  assert_int_equal(cJSON_GetArraySize(n), 1);
  assert_string_equal(cJSON_GetArrayItem(n, 0)->valuestring, "n2");
  cJSON_Delete(snap);
  /* The same journal with every record written twice gives the same jobs. */
  char path2[400];
  snprintf(path2, sizeof path2, "%s/journal2", dir);
  assert_int_equal(cluster_journal_open(&j, path2, err, sizeof err), 0);
  for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++)
    for (int k = 0; k < 2; k++)
      assert_int_equal(cluster_journal_append(&j, recs[i], err, sizeof err), 0);
  cluster_journal_close(&j);
  char *a = cluster_replay_snapshot(path, nodes, 2, NULL, NULL, err, sizeof err);
  char *b = cluster_replay_snapshot(path2, nodes, 2, NULL, NULL, err, sizeof err);
  assert_non_null(a);
  assert_non_null(b);
  /* The snapshots differ only in their time stamp. */
  cJSON *ja = cJSON_Parse(a), *jb = cJSON_Parse(b);
  cJSON_DeleteItemFromObject(ja, "time");
  cJSON_DeleteItemFromObject(jb, "time");
  assert_true(cJSON_Compare(ja, jb, 1));
  cJSON_Delete(ja);
  cJSON_Delete(jb);
  free(a);
  free(b);
  for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++) cJSON_Delete(recs[i]);
}

/* A job's account round-trips as its full path (8 levels of 63
 * characters: the longest); a journal from before accounts nested (a plain
 * name, or none) reads as it did. And the smallest limit on a path: its
 * own or an ancestor's, "*" standing for top-level accounts only. */
static void test_account_paths(void **state) {
  (void)state;
  char err[256], longest[GS_CLUSTER_ACCOUNT_MAX];
  size_t w = 0;
  for (int level = 0; level < GS_CLUSTER_ACCOUNT_LEVELS; level++) {
    if (level) longest[w++] = '/';
    for (int c = 0; c < GS_CLUSTER_NAME_MAX - 1; c++) longest[w++] = (char)('a' + level);
  }
  longest[w] = '\0';
  assert_int_equal(w, GS_CLUSTER_ACCOUNT_MAX - 1);
  const char *accounts[3] = {longest, "physics", NULL};
  gs_cluster_node nodes[1] = {{"n1", 1}};
  cluster_journal j;
  assert_int_equal(cluster_journal_open(&j, path, err, sizeof err), 0);
  for (int k = 0; k < 3; k++) {
    cJSON *r = job_rec(k + 1, "queued", NULL, 0);
    if (accounts[k])
      cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(r, "job"), "account", accounts[k]);
    assert_int_equal(cluster_journal_append(&j, r, err, sizeof err), 0);
    cJSON_Delete(r);
  }
  cluster_journal_close(&j);
  char *text = cluster_replay_snapshot(path, nodes, 1, NULL, NULL, err, sizeof err);
  assert_non_null(text);
  cJSON *snap = cJSON_Parse(text);
  free(text);
  cJSON *jobs = cJSON_GetObjectItemCaseSensitive(snap, "jobs");
  assert_int_equal(cJSON_GetArraySize(jobs), 3);
  for (int k = 0; k < 3; k++) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(jobs, k), "account");
    if (accounts[k]) assert_string_equal(cJSON_GetStringValue(a), accounts[k]);
    else assert_null(a);
  }
  cJSON_Delete(snap);
  const char *names[4] = {"science", "*", "science/physics", "science/physics/hep"};
  int limits[4] = {6, 2, 4, 9};
  char which[GS_CLUSTER_ACCOUNT_MAX];
  assert_int_equal(gs_cluster_account_path_limit(names, limits, 4, "science/physics/hep", which,
                                                 sizeof which), 4);
  assert_string_equal(which, "science/physics");
  assert_int_equal(gs_cluster_account_path_limit(names, limits, 4, "science/bio", which,
                                                 sizeof which), 6);
  assert_string_equal(which, "science");
  /* "*": a top-level account not named, not a sub-account of a named one */
  assert_int_equal(gs_cluster_account_path_limit(names, limits, 4, "eng/web", which,
                                                 sizeof which), 2);
  assert_string_equal(which, "eng");
  assert_int_equal(gs_cluster_account_path_limit(names + 2, limits + 2, 2, "eng", which,
                                                 sizeof which), 0);
  assert_int_equal(gs_cluster_account_path_limit(names, limits, 4, "sciences", NULL, 0), 2);
}

/* Compaction replaces the journal with the given records; appends go on. */
static void test_rewrite(void **state) {
  (void)state;
  char err[256];
  cluster_journal j;
  assert_int_equal(cluster_journal_open(&j, path, err, sizeof err), 0);
  for (int i = 1; i <= 5; i++) append_id(&j, i);
  cJSON *keep[2] = {cJSON_CreateObject(), cJSON_CreateObject()};
  cJSON_AddNumberToObject(keep[0], "id", 40);
  cJSON_AddNumberToObject(keep[1], "id", 50);
  assert_int_equal(cluster_journal_rewrite(&j, keep, 2, err, sizeof err), 0);
  append_id(&j, 60);
  cluster_journal_close(&j);
  cJSON_Delete(keep[0]);
  cJSON_Delete(keep[1]);
  seen s = {0};
  assert_int_equal(cluster_journal_replay(path, collect, &s, NULL, err, sizeof err), 3);
  assert_int_equal(s.ids[0], 40);
  assert_int_equal(s.ids[2], 60);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc),
      cmocka_unit_test_setup_teardown(test_in_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_torn_tail, setup, teardown),
      cmocka_unit_test_setup_teardown(test_corrupt_record, setup, teardown),
      cmocka_unit_test_setup_teardown(test_corrupt_middle, setup, teardown),
      cmocka_unit_test_setup_teardown(test_duplicates, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rewrite, setup, teardown),
      cmocka_unit_test_setup_teardown(test_account_paths, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
