/*
 * Parameter servers without MPI traffic: the shard plan (every parameter in
 * exactly one shard, balanced bytes, large tensors split, small ones whole)
 * and the --sync parser (good values and each kind of bad one), and the
 * online Sync-Switch policy fed with step times (src/ps/policy.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync/ps.h"
#include "ps_internal.h"

static int failures;
#include "expect.h"

/* Checks one plan; returns the largest shard's excess over the ideal. */
static void check_plan(const size_t *counts, size_t n, int S) {
  size_t begin[65];
  size_t total = 0, big_small = 0;
  for (size_t i = 0; i < n; i++) total += counts[i];
  size_t shard = total / (size_t)S;
  EXPECT(gs_ps_shard_plan(counts, n, S, begin) == GS_OK, "plan failed");
  EXPECT(begin[0] == 0 && begin[S] == total, "bounds %zu..%zu of %zu",
         begin[0], begin[S], total);
  /* Each element in exactly one shard: count owners per element. */
  unsigned char *owners = calloc(total + 1, 1);
  for (int k = 0; k < S; k++) {
    EXPECT(begin[k] <= begin[k + 1], "shard %d: %zu > %zu", k, begin[k],
           begin[k + 1]);
    for (size_t j = begin[k]; j < begin[k + 1] && j < total; j++) owners[j]++;
  }
  for (size_t j = 0; j < total; j++)
    if (owners[j] != 1) {
      EXPECT(0, "element %zu has %d owners", j, owners[j]);
      break;
    }
  free(owners);
  /* Small tensors (under a quarter of a shard) are never cut; a tensor of
   * two shards or more is. */
  size_t start = 0;
  for (size_t i = 0; i < n; i++) {
    int cuts = 0;
    for (int k = 1; k < S; k++)
      if (begin[k] > start && begin[k] < start + counts[i]) cuts++;
    if (counts[i] < shard / 4 + 1) {
      EXPECT(cuts == 0, "small tensor %zu (%zu) cut %d times", i, counts[i],
             cuts);
      if (counts[i] > big_small) big_small = counts[i];
    }
    if (counts[i] >= 2 * shard + 2 && S > 1)
      EXPECT(cuts >= 1, "large tensor %zu (%zu, shard %zu) not split", i,
             counts[i], shard);
    start += counts[i];
  }
  /* Balance: no shard exceeds the ideal by more than the largest small
   * tensor (the most a cut can move). */
  for (int k = 0; k < S; k++) {
    size_t len = begin[k + 1] - begin[k];
    EXPECT(len <= shard + 1 + big_small,
           "shard %d of %d has %zu elements, ideal %zu (+%zu allowed)", k, S,
           len, shard, big_small);
  }
}

static void test_plans(void) {
  const size_t cnn[] = {800, 32, 51200, 64, 1605632, 512, 5120, 10};
  for (int S = 1; S <= 8; S++) check_plan(cnn, 8, S);
  const size_t one[] = {1000003};
  for (int S = 1; S <= 7; S++) check_plan(one, 1, S);
  const size_t tiny[] = {1, 1, 1};
  check_plan(tiny, 3, 3);
  check_plan(tiny, 3, 5); /* more servers than elements: empty shards */
  srand(7);
  for (int trial = 0; trial < 200; trial++) {
    size_t counts[40];
    size_t n = 1 + (size_t)(rand() % 40);
    for (size_t i = 0; i < n; i++)
      counts[i] = (rand() % 4 == 0) ? (size_t)(rand() % 200000)
                                    : (size_t)(rand() % 300);
    check_plan(counts, n, 1 + rand() % 16);
  }
  size_t begin[3];
  EXPECT(gs_ps_shard_plan(cnn, 8, 0, begin) == GS_ERR_INVALID_ARG,
         "0 servers accepted");
  EXPECT(gs_ps_shard_plan(NULL, 3, 2, begin) == GS_ERR_INVALID_ARG,
         "NULL counts accepted");
}

static void test_parse(void) {
  gs_ps_sync s;
  char buf[64];
  EXPECT(gs_ps_sync_parse("bsp", &s) == GS_OK &&
             s.policy == GS_PS_POLICY_FIXED && s.mode == GS_PS_BSP, "bsp");
  EXPECT(gs_ps_sync_parse("asp", &s) == GS_OK && s.mode == GS_PS_ASP, "asp");
  EXPECT(gs_ps_sync_parse("ssp:3", &s) == GS_OK && s.mode == GS_PS_SSP &&
             s.staleness == 3, "ssp:3");
  gs_ps_sync_format(&s, buf, sizeof buf);
  EXPECT(strcmp(buf, "ssp:3") == 0, "format %s", buf);
  EXPECT(gs_ps_sync_parse("switch:offline:0.25", &s) == GS_OK &&
             s.policy == GS_PS_POLICY_OFFLINE && s.bsp_fraction == 0.25,
         "offline");
  EXPECT(gs_ps_sync_parse("switch:online", &s) == GS_OK &&
             s.policy == GS_PS_POLICY_ONLINE && s.straggler_ratio == 1.5,
         "online");
  EXPECT(gs_ps_sync_parse("switch:online:0.5", &s) == GS_OK &&
             s.bsp_fraction == 0.5, "online:0.5");
  /* The share of the steps a prediction prices as asynchronous. */
  const char *modes[] = {"bsp", "asp", "ssp:0", "ssp:2", "switch:offline:0.25",
                         "switch:online:0.5", "switch:online"};
  const double share[] = {0, 1, 0, 1, 0.75, 0.5, 0.75};
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
    EXPECT(gs_ps_sync_parse(modes[i], &s) == GS_OK && gs_ps_sync_async_share(&s) == share[i],
           "%s: asynchronous share %g, not %g", modes[i], gs_ps_sync_async_share(&s), share[i]);
  EXPECT(gs_ps_sync_async_share(NULL) == 0, "no sync mode: not BSP");
  const char *bad[] = {"", "BSP", "ssp", "ssp:", "ssp:-1", "ssp:2x",
                       "switch", "switch:offline", "switch:offline:1.5",
                       "switch:offline:-0.1", "switch:online:x", "local:4",
                       "asp ",
                       /* the command line's number rules (docs/CLI.md) */
                       "ssp:+3", "ssp: 3", "ssp:03", "ssp:0x3", "ssp:3e0",
                       "switch:offline:+0.5", "switch:offline: 0.5",
                       "switch:offline:0x0.8", "switch:offline:nan",
                       "switch:online:00.5", "switch:online:inf"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    EXPECT(gs_ps_sync_parse(bad[i], &s) == GS_ERR_PARSE, "'%s' accepted",
           bad[i]);
    /* The library names the spec, not a flag of the command line. */
    char want[64];
    snprintf(want, sizeof want, "sync mode '%s'", bad[i]);
    EXPECT(strstr(gs_last_error(), want) != NULL && strstr(gs_last_error(), "--") == NULL,
           "message '%s'", gs_last_error());
  }
}

/* Every worker reports one step: worker `slow` takes `factor` times as
 * long as the others. */
static void push_round(ps_policy *p, int W, int slow, double factor) {
  for (int w = 0; w < W; w++)
    ps_policy_record_time(p, w, w == slow ? 0.1 * factor : 0.1);
}

/* Online: a straggler sends the job to ASP; one clean window of times does
 * not bring it back (the hold), a whole hold of clean decisions does, and
 * the first BSP decision waits for a round (rejoining). */
static void test_online_policy(void) {
  gs_ps_sync s;
  EXPECT(gs_ps_sync_parse("switch:online:0.5", &s) == GS_OK, "parse");
  const int W = 4;
  ps_policy p;
  EXPECT(ps_policy_init(&p, &s, W, 1000000) == GS_OK, "init");
  EXPECT(p.hold == s.window * W, "hold %d, expected %d", p.hold, s.window * W);
  for (int i = 0; i < s.window; i++) push_round(&p, W, -1, 1.0);
  EXPECT(ps_policy_decide(&p) == GS_PS_BSP && p.straggler == -1,
         "no straggler but not BSP");
  for (int i = 0; i < s.window; i++) push_round(&p, W, 1, 2.0);
  EXPECT(ps_policy_decide(&p) == GS_PS_ASP && p.straggler == 1,
         "worker 1 at 2x: mode %d, straggler %d", (int)p.current, p.straggler);
  /* One clean window (a dip in the straggler's times): still ASP for the
   * rest of the hold, naming the same straggler. */
  for (int i = 0; i < s.window; i++) push_round(&p, W, -1, 1.0);
  int asp = 0;
  while (ps_policy_decide(&p) == GS_PS_ASP && asp < 10 * p.hold) asp++;
  EXPECT(asp == p.hold - 1, "went back to BSP after %d clean decisions, "
         "expected %d", asp + 1, p.hold);
  EXPECT(p.straggler == -1 && p.rejoining == 1,
         "back in BSP: straggler %d, rejoining %d", p.straggler, p.rejoining);
  EXPECT(p.switches == 2, "%ld switches, expected 2", p.switches);
  /* The straggler returns in the middle of a hold: the count restarts. */
  ps_policy_round_done(&p);
  for (int i = 0; i < s.window; i++) push_round(&p, W, 2, 3.0);
  EXPECT(ps_policy_decide(&p) == GS_PS_ASP && p.straggler == 2, "worker 2");
  for (int i = 0; i < s.window; i++) push_round(&p, W, -1, 1.0);
  for (int i = 0; i < p.hold / 2; i++) ps_policy_decide(&p);
  for (int i = 0; i < s.window; i++) push_round(&p, W, 2, 3.0);
  EXPECT(ps_policy_decide(&p) == GS_PS_ASP && p.calm == 0, "calm %d", p.calm);
  for (int i = 0; i < s.window; i++) push_round(&p, W, -1, 1.0);
  asp = 0;
  while (ps_policy_decide(&p) == GS_PS_ASP && asp < 10 * p.hold) asp++;
  EXPECT(asp == p.hold - 1, "second hold: %d", asp + 1);
  /* Once the BSP share is done, ASP whatever the times say. */
  ps_policy_count(&p, GS_PS_BSP, 500000);
  EXPECT(ps_policy_decide(&p) == GS_PS_ASP && p.straggler == -1,
         "BSP share done but mode %d", (int)p.current);
  ps_policy_free(&p);
}

int main(void) {
  test_plans();
  test_parse();
  test_online_policy();
  if (failures) return 1;
  printf("ok ps unit\n");
  return 0;
}
