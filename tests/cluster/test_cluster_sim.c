/*
 * Tests of the cluster simulator (gradsync/cluster_sim.h): tiny hand-made
 * workloads whose completion times, utilisation and fairness loss are
 * computed by hand (static and goodput, with restarts; a node lost; dorm's
 * resizes at once and as the manager makes them, at commits), bad
 * workloads, and Pollux's workload (its first 40 jobs, when the artifact's
 * data is beside the repository) under every policy.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gradsync/cluster_sim.h"
#include "policy.h" /* gs_cluster_shrink_nodes */

static char dir[256];

static void write_file(const char *name, const char *text, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

#define NEAR(x, y) assert_true(fabs((double)(x) - (double)(y)) <= 1e-6 * (1 + fabs((double)(y))))

/* Model m: 10 samples/s on 1 node, 20 on 2. */
static const char *speeds = "model,nodes,step_time_s,samples_per_step\nm,1,1,10\nm,2,1,20\n";
/* A at 0 asks for 2 nodes, 200 samples; B at 1 asks for 1 node, 100. */
static const char *two_jobs = "name,time,model,nodes,samples\nA,0,m,2,200\nB,1,m,1,100\n";

static double start_penalty; /* 0 but in test_start_penalty */
static double interference;  /* 0 but in test_interference */
/* 0 (resizes at once) but in test_manager_resizes */
static double commit_work, launch_delay;
static double commit_every_s; /* 0 (none) but in test_time_commits */
/* 0: the policies' default (0.5); 1 in test_manager_resizes */
static double fairness_weight;
static double interval; /* 0 (no periodic round) but in test_long_jobs */
static FILE *round_log; /* NULL but in test_waiting_answer */

static void run(const char *policy, const char *workload, int nodes, double loss_t, int loss_k,
                gs_csim_result *r) {
  char wp[512], sp[512], err[512];
  write_file("w.csv", workload, wp, sizeof wp);
  write_file("s.csv", speeds, sp, sizeof sp);
  gs_csim_workload w;
  if (gs_csim_load(wp, sp, nodes, 4, &w, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  gs_csim_opts o;
  gs_csim_defaults(&o);
  o.nodes = nodes;
  o.policy = policy;
  o.restart_penalty_s = 5;
  o.start_penalty_s = start_penalty;
  o.interference = interference;
  o.interval_s = interval;
  o.loss_time_s = loss_t;
  o.loss_nodes = loss_k;
  o.commit_work = commit_work;
  o.launch_delay_s = launch_delay;
  o.commit_every_s = commit_every_s;
  if (fairness_weight > 0) o.fairness_weight = fairness_weight;
  o.round_log = round_log;
  if (gs_csim_run(&w, &o, r, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  gs_csim_workload_free(&w);
}

/* static: A runs on 2 nodes at 20/s and ends at 10; B waits for it, runs on
 * 1 node at 10/s and ends at 20. JCTs 10 and 19; 30 node-seconds of 40.
 * Fairness loss: [0,1) A alone at its share 2: 0; [1,10) A 2, B 0 against
 * shares 1 and 1: 2/2 = 1; [10,20) B on 1 of its share 2: 0.5; mean 0.7. */
static void test_static_by_hand(void **state) {
  (void)state;
  gs_csim_result r;
  run("static", two_jobs, 2, 0, 0, &r);
  assert_int_equal(r.done, 2);
  NEAR(r.jct_mean_s, 14.5);
  NEAR(r.jct_p99_s, 19);
  NEAR(r.makespan_s, 20);
  NEAR(r.util, 0.75);
  NEAR(r.util_busy, 0.75);
  NEAR(r.fairness_loss, 0.7);
  assert_int_equal(r.resizes, 0);
}

/* Jobs of 1e15 and 1e18 samples under static and dorm with a round every
 * 60 s: a periodic round changes no answer of theirs (they read no
 * progress, nothing is learned), so it is no event. It was: 1e12 samples
 * took 19 s of rounds, 1e18 would take centuries (this test would time
 * out), and a JCT was 100 s short of 1e11 s (the job ended within the
 * completion tolerance at a round, not at its end). */
static void test_long_jobs(void **state) {
  (void)state;
  interval = 60;
  const char *policies[] = {"static", "dorm"};
  for (int p = 0; p < 2; p++) {
    gs_csim_result r;
    run(policies[p], "name,time,model,nodes,samples\nA,0,m,2,1e15\nB,0,m,1,1e18\n", 3, 0, 0,
        &r);
    assert_int_equal(r.done, 2);
    /* A on 2 nodes at 20/s, B on 1 at 10/s from the start; static keeps
     * B there, dorm grows it to 2 when A ends (5e14 of its samples done;
     * its 5 s restart is below the tolerance). */
    NEAR(r.jct_p50_s, 5e13);
    NEAR(r.makespan_s, p == 0 ? 1e17 : 5e13 + (1e18 - 5e14) / 20);
  }
  interval = 0;
}

/* The bound on periodic rounds (opts.max_periodic, 100 here): a job that
 * alone at its best speed needs more rounds is refused before the replay,
 * named; jobs that need more only together (one node, one after the
 * other) stop the replay at the bound, with the time it reached. */
static void test_round_bound(void **state) {
  (void)state;
  char wp[512], sp[512], err[512];
  write_file("s.csv", speeds, sp, sizeof sp);
  const struct {
    const char *workload, *want;
  } cases[] = {
      /* A: 2000 samples at 10/s, 200 s: 200 rounds of 1 s. */
      {"name,time,model,nodes,samples\nB,0,m,1,10\nA,0,m,1,2000\n",
       "job 'A' (line 3) alone at its best speed ends at t=200 s, more than 100 periodic"},
      /* 60 s each alone; one after the other 120 s. */
      {"name,time,model,nodes,samples\nA,0,m,1,600\nB,0,m,1,600\n",
       "more than 100 periodic rounds by t=10"},
  };
  for (int c = 0; c < 2; c++) {
    write_file("w.csv", cases[c].workload, wp, sizeof wp);
    gs_csim_workload w;
    assert_int_equal(gs_csim_load(wp, sp, 1, 4, &w, err, sizeof err), 0);
    gs_csim_opts o;
    gs_csim_defaults(&o);
    o.nodes = 1;
    o.policy = "goodput";
    o.interval_s = 1;
    o.max_periodic = 100;
    gs_csim_result r;
    err[0] = 0;
    assert_int_equal(gs_csim_run(&w, &o, &r, err, sizeof err), -1);
    if (strstr(err, cases[c].want) == NULL) {
      fprintf(stderr, "case %d: %s\n", c, err);
      fail();
    }
    assert_non_null(strstr(err, "raise --interval"));
    /* The default bound lets both end. */
    o.max_periodic = 0;
    assert_int_equal(gs_csim_run(&w, &o, &r, err, sizeof err), 0);
    assert_int_equal(r.done, 2);
    gs_csim_workload_free(&w);
  }
}

/* goodput: A alone takes 2 nodes; at 1 (20 done) B arrives and both get 1:
 * A restarts until 6 (penalty 5), B starts free and ends at 11. A then has
 * 180 - 50 = 130 left: 13 s on 1 node, 6.5 on 2 after a 5 s restart, so it
 * grows (until 16) and ends at 22.5. JCTs 22.5 and 10; two restarts. */
static void test_goodput_by_hand(void **state) {
  (void)state;
  gs_csim_result r;
  run("goodput", two_jobs, 2, 0, 0, &r);
  assert_int_equal(r.done, 2);
  assert_int_equal(r.resizes, 2);
  NEAR(r.jct_mean_s, (22.5 + 10) / 2);
  NEAR(r.makespan_s, 22.5);
  /* allocated: 2 (0-1) + 2 (1-11) + 2 (11-22.5) = 45 of 45 node-seconds;
   * restarting: A's 1 node 1-6 and 2 nodes 11-16: 15. */
  NEAR(r.util, 1.0);
  NEAR(r.util_busy, 30.0 / 45);
}

/* A start penalty of 3 s: static's A starts at 0, makes progress from 3,
 * ends at 13; B starts at 13 (its nodes free then), ends at 13 + 3 + 10 =
 * 26. JCTs 13 and 25; the penalty is charged once per job, not per round. */
static void test_start_penalty(void **state) {
  (void)state;
  gs_csim_result r;
  start_penalty = 3;
  run("static", two_jobs, 2, 0, 0, &r);
  start_penalty = 0;
  assert_int_equal(r.done, 2);
  NEAR(r.jct_mean_s, (13 + 25) / 2.0);
  NEAR(r.makespan_s, 26);
  assert_int_equal(r.resizes, 0);
}

/* Start-up from the speed table (start_s: 2 s on 1 node, 4 on 2), in place
 * of the penalties: static's A starts on 2 nodes at 0, works from 4, ends at
 * 14; B starts on 1 node at 14, works from 16, ends at 26. */
static void test_start_from_table(void **state) {
  (void)state;
  char wp[512], sp[512], err[512];
  write_file("w.csv", two_jobs, wp, sizeof wp);
  write_file("s.csv",
             "model,nodes,step_time_s,samples_per_step,start_s\nm,1,1,10,2\nm,2,1,20,4\n", sp,
             sizeof sp);
  gs_csim_workload w;
  assert_int_equal(gs_csim_load(wp, sp, 2, 4, &w, err, sizeof err), 0);
  assert_non_null(w.jobs[0].start_s);
  gs_csim_opts o;
  gs_csim_defaults(&o);
  o.nodes = 2;
  o.policy = "static";
  o.start_penalty_s = 100; /* the table's win */
  o.interval_s = 0;
  gs_csim_result r;
  if (gs_csim_run(&w, &o, &r, err, sizeof err) != 0) fail_msg("%s", err);
  gs_csim_workload_free(&w);
  NEAR(r.jct_mean_s, (14 + 25) / 2.0);
  NEAR(r.makespan_s, 26);
  /* A UTF-8 byte-order mark before the header (a spreadsheet's export) is
   * not part of the first column's name (until 2026-12-06 "no column
   * 'model' in the header"). */
  write_file("s.csv",
             "\xEF\xBB\xBFmodel,nodes,step_time_s,samples_per_step,start_s\nm,1,1,10,2\n"
             "m,2,1,20,4\n", sp, sizeof sp);
  if (gs_csim_load(wp, sp, 2, 4, &w, err, sizeof err) != 0) fail_msg("a BOM: %s", err);
  gs_csim_workload_free(&w);
  /* A negative start is refused, naming the column. */
  write_file("s.csv", "model,nodes,step_time_s,samples_per_step,start_s\nm,1,1,10,-2\n", sp,
             sizeof sp);
  assert_int_equal(gs_csim_load(wp, sp, 2, 4, &w, err, sizeof err), -1);
  assert_non_null(strstr(err, "start_s"));
}

/* The end from the speed table (end_s: gradsync train's final evaluation
 * and save after its last step, 5 s on 1 node, 3 on 2; start_s 1 s on
 * both; m 10/s on 1 node, 20/s on 2), paid once, at the end, holding the
 * nodes, and not by a resize (until 2026-12-08 the table had no end: it
 * was part of start_s, and every resize paid it again). */
static const char *end_table =
    "model,nodes,step_time_s,samples_per_step,start_s,end_s\nm,1,1,10,1,5\nm,2,1,20,1,3\n";

static void run_end(const char *workload, const char *policy, double commit_every_s,
                    double *jct, gs_csim_result *r) {
  char wp[512], sp[512], err[512];
  write_file("w.csv", workload, wp, sizeof wp);
  write_file("s.csv", end_table, sp, sizeof sp);
  gs_csim_workload w;
  assert_int_equal(gs_csim_load(wp, sp, 2, 4, &w, err, sizeof err), 0);
  assert_non_null(w.jobs[0].end_s);
  gs_csim_opts o;
  gs_csim_defaults(&o);
  o.nodes = 2;
  o.policy = policy;
  o.interval_s = 0;
  o.restart_penalty_s = strcmp(policy, "dorm") == 0 ? 0 : 1000;
  o.commit_every_s = commit_every_s;
  o.job_jct_s = jct;
  if (gs_csim_run(&w, &o, r, err, sizeof err) != 0) fail_msg("%s", err);
  gs_csim_workload_free(&w);
}

static void test_end_from_table(void **state) {
  (void)state;
  double jct[2];
  gs_csim_result r;
  /* static: A (2 nodes, 100 samples) starts at 0, works from 1 at 20/s,
   * its last step at 6, exits at 9; B (1 node, 50) waits for it, starts
   * at 9, works from 10 at 10/s, its last step at 15, exits at 20. */
  run_end("name,time,model,nodes,samples,min_nodes,max_nodes\nA,0,m,2,100,2,2\n"
          "B,0,m,1,50,1,1\n", "static", 0, jct, &r);
  NEAR(jct[0], 9);
  NEAR(jct[1], 20);
  NEAR(r.makespan_s, 20);
  /* A resize pays the start-up, not the end: goodput (a 1000 s price: no
   * regrow) runs A (1-2 nodes, 3000) on 2 from 0, working from 1: 180 done
   * by 10, when B (1 node, 50) arrives and A shrinks to 1; its relaunch
   * costs 1 s, it works from 11 at 10/s, its last step at 293, exits at
   * 298 (303 if the resize paid the end too). B runs 11-16, exits at 21. */
  run_end("name,time,model,nodes,samples,min_nodes,max_nodes\nA,0,m,2,3000,1,2\n"
          "B,10,m,1,50,1,1\n", "goodput", 0, jct, &r);
  NEAR(jct[0], 298);
  NEAR(jct[1], 11);
  assert_int_equal(r.resizes, 1);
  /* A job in its end takes no stop: dorm (fair shares, no restart price)
   * shrinks A (1-2 nodes, 200) to 1 node when B (1 node, 50) arrives at
   * 12, in A's end (its last step at 11 on 2 nodes, its exit at 14). A is
   * not relaunched (no resize) and exits at 14 on both nodes; B, answered
   * 1 node, waits for it, starts at 14, works from 15, its last step at 20,
   * exits at 25. The same when resizes wait for the job's checks (commits
   * by time), and when they move at once. */
  for (int by_time = 0; by_time < 2; by_time++) {
    run_end("name,time,model,nodes,samples,min_nodes,max_nodes\nA,0,m,2,200,1,2\n"
            "B,12,m,1,50,1,1\n", "dorm", by_time ? 10 : 0, jct, &r);
    NEAR(jct[0], 14);
    NEAR(jct[1], 13);
    assert_int_equal(r.resizes, 0);
  }
  /* A negative end is refused, naming the column. */
  char wp[512], sp[512], err[512];
  gs_csim_workload w;
  write_file("w.csv", two_jobs, wp, sizeof wp);
  write_file("s.csv", "model,nodes,step_time_s,samples_per_step,end_s\nm,1,1,10,-1\n", sp,
             sizeof sp);
  assert_int_equal(gs_csim_load(wp, sp, 2, 4, &w, err, sizeof err), -1);
  assert_non_null(strstr(err, "end_s"));
}

/* Learning the curves (learn_work): a model slower on 2 nodes (5/s) than
 * on 1 (10/s), one job of 100 samples that may take 1 or 2. goodput on the
 * table's curve (the oracle) runs it on 1 node: 10 s. Learning, it knows
 * nothing at the start (linear speed-up), takes both nodes, and learns the
 * truth only after 1000 samples there, more than the job: 20 s. */
static void test_learn_curves(void **state) {
  (void)state;
  char wp[512], sp[512], err[512];
  write_file("w.csv", "name,time,model,nodes,samples,min_nodes,max_nodes\nA,0,m,2,100,1,2\n", wp,
             sizeof wp);
  write_file("s.csv", "model,nodes,step_time_s,samples_per_step\nm,1,1,10\nm,2,1,5\n", sp,
             sizeof sp);
  for (int learn = 0; learn < 2; learn++) {
    gs_csim_workload w;
    assert_int_equal(gs_csim_load(wp, sp, 2, 4, &w, err, sizeof err), 0);
    gs_csim_opts o;
    gs_csim_defaults(&o);
    o.nodes = 2;
    o.policy = "goodput";
    o.interval_s = 0;
    o.learn_work = learn ? 1000 : 0;
    gs_csim_result r;
    if (gs_csim_run(&w, &o, &r, err, sizeof err) != 0) fail_msg("%s", err);
    gs_csim_workload_free(&w);
    NEAR(r.jct_mean_s, learn ? 20 : 10);
  }
}

/* goodput on 2 nodes, no periodic round, on `workload` and the table of
 * 1 s start-ups (m: 10/s on 1 node, 20/s on 2), with the options given;
 * per-job JCTs into jct (NULL: none). */
typedef struct goodput2 {
  double penalty, learn_work, commit_every_s;
  int prior;
} goodput2;

static void run_goodput2(const char *workload, goodput2 g, double *jct, gs_csim_result *r) {
  char wp[512], sp[512], err[512];
  write_file("w.csv", workload, wp, sizeof wp);
  write_file("s.csv",
             "model,nodes,step_time_s,samples_per_step,start_s\nm,1,1,10,1\nm,2,1,20,1\n", sp,
             sizeof sp);
  gs_csim_workload w;
  assert_int_equal(gs_csim_load(wp, sp, 2, 4, &w, err, sizeof err), 0);
  gs_csim_opts o;
  gs_csim_defaults(&o);
  o.nodes = 2;
  o.policy = "goodput";
  o.interval_s = 0;
  o.restart_penalty_s = g.penalty;
  o.learn_work = g.learn_work;
  o.restart_prior = g.prior;
  o.commit_every_s = g.commit_every_s;
  o.job_jct_s = jct;
  if (gs_csim_run(&w, &o, r, err, sizeof err) != 0) fail_msg("%s", err);
  gs_csim_workload_free(&w);
}

/* Learning the restart price (learn_work) as the manager measures it, from
 * a resize: the table's start-ups are 1 s, the option's price 1000 s. A (1
 * or 2 nodes, 3000 samples) starts alone at 0 on 2 nodes and works from 1
 * at 20/s; at 10 (180 done) B (1 node, 50 samples) arrives, is admitted
 * first (goodput: least remaining time; learning, A's before B's unknown
 * one, the same sizes), A shrinks to 1 node (a resize: works from 11 at
 * 10/s) and B runs 11-16. Then growing A back (277 s left on 1 node) pays
 * only for a restart under 277 s. With the option's price it stays: it
 * ends at 293. Learning, its shrink measured 1 s: it regrows at 16 and
 * works from 17 at 20/s, 2770 samples: it ends at 155.5. */
static void test_learn_restart(void **state) {
  (void)state;
  for (int learn = 0; learn < 2; learn++) {
    gs_csim_result r;
    run_goodput2("name,time,model,nodes,samples,min_nodes,max_nodes\nA,0,m,2,3000,1,2\n"
                 "B,10,m,1,50,1,1\n",
                 (goodput2){.penalty = 1000, .learn_work = learn ? 10 : 0}, NULL, &r);
    NEAR(r.jct_mean_s, ((learn ? 155.5 : 293) + 6) / 2);
  }
}

/* The manager's prior for a resize not yet measured (restart_prior): its
 * start-up, as measured, plus the pool's stop (none measured: 0). The
 * option's price is 1000 s, the table's start-ups 1 s. A (1 or 2 nodes,
 * 3000 samples) and B (1 node, 50) arrive at 0: one node each, working
 * from 1 at 10/s. B ends at 6; growing A (295 s left on 1 node, 147.5 on
 * 2) pays only for a restart under about 147 s. Priced at the option's
 * 1000 s it stays: it ends at 301 (mean JCT 153.5). With the prior, A's
 * start-up measured 1 s (its first launch, learned by 6): it grows at 6,
 * works from 7 at 20/s and ends at 154.5 (mean 80.25). */
static void test_restart_prior(void **state) {
  (void)state;
  for (int prior = 0; prior < 2; prior++) {
    gs_csim_result r;
    run_goodput2("name,time,model,nodes,samples,min_nodes,max_nodes\nA,0,m,2,3000,1,2\n"
                 "B,0,m,1,50,1,1\n",
                 (goodput2){.penalty = 1000, .learn_work = 10, .prior = prior}, NULL, &r);
    NEAR(r.jct_mean_s, prior ? 80.25 : 153.5);
    assert_int_equal(r.resizes, prior);
  }
}

/* Interference (nodes sharing a machine): A and B, 1 node and 100 samples
 * each at 10/s, on 2 nodes; B arrives at 5. Without it A ends at 10, B at
 * 15 (JCTs 10 and 10). With K = 1 each runs at half speed while the other
 * computes: A does 50 alone by 5, its other 50 at 5/s by 15; B does 50 by
 * 15, its other 50 alone by 20 (JCTs 15 and 15). With K = 0.5, 2/3 speed
 * (20/3 a second): A ends at 5 + 7.5, when B has done 50; B ends at 17.5
 * (JCTs 12.5 and 12.5). */
static void test_interference(void **state) {
  (void)state;
  const char *wl = "name,time,model,nodes,samples\nA,0,m,1,100\nB,5,m,1,100\n";
  gs_csim_result r;
  run("static", wl, 2, 0, 0, &r);
  NEAR(r.jct_mean_s, 10);
  interference = 1;
  run("static", wl, 2, 0, 0, &r);
  NEAR(r.jct_mean_s, 15);
  interference = 0.5;
  run("static", wl, 2, 0, 0, &r);
  NEAR(r.jct_mean_s, 12.5);
  /* One node of one: nothing to interfere with. */
  run("static", "name,time,model,nodes,samples\nA,0,m,1,100\n", 1, 0, 0, &r);
  NEAR(r.jct_mean_s, 10);
  interference = 0;
}

/* A node lost: A (2 nodes, 200 samples) has done 100 at 5 when one of its
 * nodes leaves; static keeps it on the node left, after a restart (5-10),
 * at 10/s: it ends at 20. */
static void test_node_loss(void **state) {
  (void)state;
  gs_csim_result r;
  run("static", "name,time,model,nodes,samples\nA,0,m,2,200\n", 2, 5, 1, &r);
  assert_int_equal(r.done, 1);
  assert_int_equal(r.resizes, 1);
  NEAR(r.jct_mean_s, 20);
  /* The pool: 2 nodes for 5 s, 1 for 15: 25 node-seconds, all allocated;
   * 5 of them spent restarting. */
  NEAR(r.util, 1.0);
  NEAR(r.util_busy, 20.0 / 25);
  /* goodput and dorm likewise end it (they may choose differently). */
  run("goodput", "name,time,model,nodes,samples\nA,0,m,2,200\n", 2, 5, 1, &r);
  assert_int_equal(r.done, 1);
  NEAR(r.jct_mean_s, 20);
  run("dorm", "name,time,model,nodes,samples\nA,0,m,2,200\n", 2, 5, 1, &r);
  assert_int_equal(r.done, 1);
  /* A node lost under a job of minimum 2 leaves it 1, on which it cannot
   * run: static made it keep the 1 and the simulation never ended (the job
   * ran at no speed). X (1 node, 100 samples) runs 0-10 on node 0; A (2
   * nodes exactly) from 0.5 on nodes 1-2 until node 2 leaves at 5; A then
   * waits for X's node, and from 10 runs its 110 samples left after the
   * restart penalty: 15 to 20.5. JCTs 10 and 20. */
  const char *min2 = "name,time,model,nodes,samples,min_nodes,max_nodes\n"
                     "X,0,m,1,100,1,1\nA,0.5,m,2,200,2,2\n";
  run("static", min2, 3, 5, 1, &r);
  assert_int_equal(r.done, 2);
  NEAR(r.jct_mean_s, 15);
  run("goodput", min2, 3, 5, 1, &r);
  assert_int_equal(r.done, 2);
  run("dorm", min2, 3, 5, 1, &r);
  assert_int_equal(r.done, 2);
}

/* Resizes as the manager makes them (commit_work; docs/CLUSTER_MANAGER.md,
 * "Resizing a job") against at once. dorm on 2 nodes: A (1 to 2 nodes, 200
 * samples) at 0 takes both; B (1 node, 10 samples) at 1 gets one of them
 * (its fair share: 1 each).
 *  - At once: A shrinks at 1 (no progress until 6, the penalty 5), B runs
 *    1-2, A grows back at 2 (again until 7) and does its 180 left at 20/s:
 *    it ends at 16. JCTs 16 and 1, 2 resizes.
 *  - The manager's (a commit every 100 samples, a discovery every second
 *    from a launch): A's supervisor sees the new partition at 1 and A stops
 *    at its commit at 100 samples, at 5, and relaunches on 1 node (no
 *    progress until 10); the node it gives up is free only then: B runs
 *    5-6. A's partition grows back at 6, but its next commit would be its
 *    end: it is not resized and ends on 1 node at 10 + 100/10 = 20. JCTs 20
 *    and 5, 1 resize. Nodes held all along (A keeps the node it gave up
 *    until its relaunch, and the one it gets back at 6 unused): utilisation
 *    1; working: A's 2 nodes 0-5, B's 5-6, A's 1 node 10-20: 21 of 40.
 * Dorm's fairness weight is 1 here: at the default 0.5 the fairness B gains
 * (0.5) does not pay for A's restart (5 s on 2 nodes over its 10 s left:
 * 0.52) and A is never shrunk (test_cluster_policy's restart price). */
/* A shrunk for B and grown back (test_manager_resizes, test_time_commits). */
static const char *shrink_grow = "name,time,model,nodes,samples,min_nodes,max_nodes\n"
                                 "A,0,m,2,200,1,2\nB,1,m,1,10,1,1\n";

/* dorm on shrink_grow: both jobs done, `resizes` resizes, mean JCT `jct`. */
static void run_shrink_grow(int resizes, double jct, gs_csim_result *r) {
  run("dorm", shrink_grow, 2, 0, 0, r);
  assert_int_equal(r->done, 2);
  assert_int_equal(r->resizes, resizes);
  NEAR(r->jct_mean_s, jct);
}

static void test_manager_resizes(void **state) {
  (void)state;
  fairness_weight = 1;
  const char *wl = shrink_grow;
  gs_csim_result r;
  run_shrink_grow(2, (16 + 1) / 2.0, &r);
  commit_work = 100;
  run("dorm", wl, 2, 0, 0, &r);
  assert_int_equal(r.done, 2);
  assert_int_equal(r.resizes, 1);
  NEAR(r.jct_mean_s, (20 + 5) / 2.0);
  NEAR(r.makespan_s, 20);
  NEAR(r.util, 1.0);
  NEAR(r.util_busy, 21.0 / 40);
  /* A launch 1 s after the manager's start: B, at 0.5 now, comes before
   * A's supervisor has launched it, so A launches on 1 node at 1, free of
   * charge, and B starts at 0.5 on the other (launched at 1.5, it ends at
   * 2.5). A's partition grows back at 2.5; its supervisor sees it at 3 (20
   * done) and A stops at its commit at 100, at 11; relaunched by its
   * supervisor, it skips the manager's second of the penalty: working from
   * 15, its 100 left at 20/s take it to 20. JCTs 20 and 2, 1 resize. */
  /* A job's own commit interval (commit_samples) in place of the run's:
   * commits every 50 samples for the run, every 100 for A (B's own column
   * empty: the run's), the same as above; without A's own, A stops at 50
   * (at 2.5; B runs 2.5-3.5) and again at its commit at 100 to grow back:
   * the mean JCT happens to be the same, (22.5 + 2.5) / 2, the makespan
   * is not. */
  commit_work = 50;
  run("dorm", "name,time,model,nodes,samples,min_nodes,max_nodes,weight,commit_samples\n"
              "A,0,m,2,200,1,2,1,100\nB,1,m,1,10,1,1,1,\n", 2, 0, 0, &r);
  assert_int_equal(r.resizes, 1);
  NEAR(r.jct_mean_s, (20 + 5) / 2.0);
  NEAR(r.makespan_s, 20);
  run("dorm", wl, 2, 0, 0, &r);
  assert_true(fabs(r.makespan_s - 20) > 0.5);
  commit_work = 100;
  launch_delay = 1;
  run("dorm", "name,time,model,nodes,samples,min_nodes,max_nodes\nA,0,m,2,200,1,2\n"
              "B,0.5,m,1,10,1,1\n", 2, 0, 0, &r);
  commit_work = launch_delay = 0;
  fairness_weight = 0;
  assert_int_equal(r.done, 2);
  assert_int_equal(r.resizes, 1);
  NEAR(r.jct_mean_s, (20 + 2) / 2.0);
}

/* Resizes with commits by time (commit_every_s: the manager's default for
 * train jobs): the stop is taken at the job's next check (every 0.5 s of
 * training, at least one step: the table's samples_per_step, 20, at its
 * speed: 1 s on 2 nodes, 2 s on 1), where it commits; a commit every 3 s of
 * training besides. The workload of test_manager_resizes, dorm on 2 nodes:
 *  - A (2 nodes at 0) is shrunk at 1 for B; its supervisor sees it at 1, a
 *    check is due then (the checks of its launch at 1, 2, ...): it stops
 *    at 1 with 20 done, relaunches on 1 node (no progress until 6). B runs
 *    on the node it gave up, 1-2.
 *  - At 2 A's partition grows back; its supervisor sees it at 2, and it
 *    stops at its first check after its start-up, one step on 1 node in:
 *    at 8, 40 done. On 2 nodes from 13, its 160 left take 8 s: it ends at
 *    21. JCTs 21 and 1, 2 resizes. (By work, with commits every 100
 *    samples, test_manager_resizes: 20 and 5, 1 resize.)
 * A lost node: A alone (1 to 2 nodes) commits at 3 (60 done); at 4 (80
 * done) a node is lost: it resumes from its commit at 60 on the node left
 * (no progress until 9) and its 140 take 14 s: it ends at 23. Without the
 * commits by time it would redo all 200 (29); and with checks every 0.5 s
 * whatever a step costs, A's second stop above would come at 6.5, not 8. */
static void test_time_commits(void **state) {
  (void)state;
  fairness_weight = 1;
  commit_every_s = 3;
  gs_csim_result r;
  run_shrink_grow(2, (21 + 1) / 2.0, &r);
  NEAR(r.makespan_s, 21);
  run("static", "name,time,model,nodes,samples,min_nodes,max_nodes\nA,0,m,2,200,1,2\n", 2, 4,
      1, &r);
  assert_int_equal(r.done, 1);
  NEAR(r.jct_mean_s, 23);
  commit_every_s = 0;
  fairness_weight = 0;
  /* By work and by time at once: refused, naming both. */
  char wp[512], sp[512], err[512];
  write_file("w.csv", two_jobs, wp, sizeof wp);
  write_file("s.csv", speeds, sp, sizeof sp);
  gs_csim_workload w;
  assert_int_equal(gs_csim_load(wp, sp, 2, 4, &w, err, sizeof err), 0);
  gs_csim_opts o;
  gs_csim_defaults(&o);
  o.nodes = 2;
  o.policy = "dorm";
  o.commit_work = 100;
  o.commit_every_s = 10;
  assert_int_equal(gs_csim_run(&w, &o, &r, err, sizeof err), -1);
  assert_non_null(strstr(err, "every 100 work units and every 10 s"));
  gs_csim_workload_free(&w);
}

/* A job grown and shrunk back before its supervisor saw it keeps the node
 * it runs on (gs_cluster_shrink_nodes). goodput on 2 nodes, commits by
 * time, 1 s start-ups, discoveries and checks every second: Y (1 node, 96
 * samples) takes node 0 and X (1 or 2 nodes, 1000) node 1 at 0; Y ends at
 * 10.6 and X is given node 0 too; Z (1 node, 50 samples) arrives at 10.8,
 * before X's supervisor's discovery at 11, and X shrinks back. It gives
 * back node 0, which it never ran on: Z runs there from 10.8 to 16.8 (JCT
 * 6), X grows again then (seen at 17, relaunched with 160 done, from 18 at
 * 20/s: it ends at 60), 1 resize. Until 2026-12-07 X gave back its highest
 * node, node 1, the one it ran on, and was relaunched onto node 0 at 11
 * for nothing: Z ran 11-17 (6.2), X ended at 61, 2 resizes. */
static void test_shrink_back(void **state) {
  (void)state;
  double jct[3];
  gs_csim_result r;
  run_goodput2("name,time,model,nodes,samples,min_nodes,max_nodes\nY,0,m,1,96,1,1\n"
               "X,0,m,2,1000,1,2\nZ,10.8,m,1,50,1,1\n",
               (goodput2){.penalty = 5, .commit_every_s = 10}, jct, &r);
  NEAR(jct[0], 10.6);
  NEAR(jct[1], 60);
  NEAR(jct[2], 6);
  assert_int_equal(r.resizes, 1);
  /* The rule itself: what the launch does not run on goes first, the
   * highest first; then the nodes it runs on. */
  char part[6] = {1, 1, 0, 1, 1, 1}, launch[6] = {1, 0, 0, 1, 0, 1};
  assert_int_equal(gs_cluster_shrink_nodes(part, launch, 6, 3), 3);
  assert_memory_equal(part, ((char[]){1, 0, 0, 1, 0, 0}), 6);
  assert_int_equal(gs_cluster_shrink_nodes(part, launch, 6, 5), 2);
  assert_memory_equal(part, ((char[]){0, 0, 0, 0, 0, 0}), 6);
}

/* The round of round_log at time t (its JSON line, in line), or fails. */
static void round_at(double t, char *line, size_t cap) {
  char want[32];
  snprintf(want, sizeof want, "{\"t\":%g,", t);
  rewind(round_log);
  while (fgets(line, (int)cap, round_log) != NULL)
    if (strncmp(line, want, strlen(want)) == 0) return;
  fprintf(stderr, "no round at t=%g in the round log\n", t);
  fail();
}

/* A start that waits for nodes still being given back is, to the next
 * rounds, the job at the size answered (as the manager's rounds see it).
 * dorm on 2 nodes, commits by time (checks every step, 1 s on 2 nodes): A
 * (1 to 2 nodes) runs on both from 0; B (1 node) arrives at 1.2, A is
 * shrunk to 1 and B started on the node A gives back at its check at 2. C
 * (1 node) arrives at 1.5, while B waits: that round sees B at 1 node (A at
 * 1, C at 0) and keeps B's answer; until 2026-12-07 it saw B at 0, a job
 * still to be placed, and B's answer could go to C. With node 1 lost at 1.5
 * instead, the pool has no room for B's answer beside A: that round sees B
 * at the 0 nodes it holds. */
static void test_waiting_answer(void **state) {
  (void)state;
  char line[2048];
  gs_csim_result r;
  round_log = tmpfile();
  assert_non_null(round_log);
  fairness_weight = 1;
  commit_every_s = 3;
  const char *wl = "name,time,model,nodes,samples,min_nodes,max_nodes\nA,0,m,2,200,1,2\n"
                   "B,1.2,m,1,100,1,1\nC,1.5,m,1,100,1,1\n";
  run("dorm", wl, 2, 0, 0, &r);
  assert_int_equal(r.done, 3);
  round_at(1.2, line, sizeof line);
  assert_non_null(strstr(line, "\"name\":\"A\",\"cur\":2,\"size\":1,"));
  assert_non_null(strstr(line, "\"name\":\"B\",\"cur\":0,\"size\":1,"));
  round_at(1.5, line, sizeof line);
  assert_non_null(strstr(line, "\"name\":\"A\",\"cur\":1,\"size\":1,"));
  assert_non_null(strstr(line, "\"name\":\"B\",\"cur\":1,\"size\":1,"));
  assert_non_null(strstr(line, "\"name\":\"C\",\"cur\":0,\"size\":0,"));
  fclose(round_log);
  round_log = tmpfile();
  assert_non_null(round_log);
  run("dorm", "name,time,model,nodes,samples,min_nodes,max_nodes\nA,0,m,2,200,1,2\n"
              "B,1.2,m,1,100,1,1\n", 2, 1.5, 1, &r);
  assert_int_equal(r.done, 2);
  round_at(1.5, line, sizeof line);
  assert_non_null(strstr(line, "\"nodes\":1,"));
  assert_non_null(strstr(line, "\"name\":\"A\",\"cur\":1,"));
  assert_non_null(strstr(line, "\"name\":\"B\",\"cur\":0,"));
  fclose(round_log);
  round_log = NULL;
  fairness_weight = 0;
  commit_every_s = 0;
}

static void expect_load_error(const char *workload, const char *speed_table, int nodes,
                              const char *needle) {
  char wp[512], sp[512], err[512];
  write_file("bad.csv", workload, wp, sizeof wp);
  write_file("bad_s.csv", speed_table, sp, sizeof sp);
  gs_csim_workload w;
  assert_int_equal(gs_csim_load(wp, sp, nodes, 4, &w, err, sizeof err), -1);
  if (strstr(err, needle) == NULL) {
    fprintf(stderr, "message '%s' lacks '%s'\n", err, needle);
    fail();
  }
}

static void test_bad_workloads(void **state) {
  (void)state;
  expect_load_error("name,time,modle,nodes,samples\nA,0,m,1,1\n", speeds, 2,
                    "not a workload header");
  expect_load_error("name,time,model,nodes\nA,0,m,1\n", speeds, 2, "no column 'samples'");
  expect_load_error(two_jobs, "model,nodes,step_time\nm,1,1\n", 2, "no column 'step_time_s'");
  expect_load_error("name,time,model,nodes,samples\nA,0,m,1,abc\n", speeds, 2,
                    "bad.csv:2: column 'samples': 'abc'");
  expect_load_error("name,time,model,nodes,samples\nA,0,m,1\n", speeds, 2, "bad.csv:2: 4 fields");
  expect_load_error("name,time,model,nodes,samples\nA,0,x,1,5\n", speeds, 2,
                    "'x' is not in the speed table");
  expect_load_error("name,time,model,nodes,samples\n", speeds, 2, "no jobs");
  expect_load_error("name,time,model,nodes,samples,min_nodes\nA,0,m,1,5,3\n", speeds, 2,
                    "min_nodes 3 above max_nodes 2");
  /* the pool's size, not a max_nodes the row does not have (until 2026-12-02
   * "min_nodes 3 above max_nodes 2 (pool 2)" for max_nodes 4) */
  expect_load_error("name,time,model,nodes,samples,min_nodes,max_nodes\nA,0,m,1,5,3,4\n", speeds,
                    2, "bad.csv:2: job 'A': min_nodes 3 is above the pool's 2 nodes");
  expect_load_error("name,time,model,nodes,samples,commit_samples\nA,0,m,1,5,-1\n", speeds, 2,
                    "bad.csv:2: column 'commit_samples': '-1'");
  expect_load_error(two_jobs, speeds, 0, "0 nodes");
  char err[512];
  gs_csim_workload w;
  assert_int_equal(gs_csim_load("/nonexistent/w.csv", NULL, 2, 4, &w, err, sizeof err), -1);
  assert_non_null(strstr(err, "cannot read the workload '/nonexistent/w.csv'"));
  /* Pollux's format without its tables. */
  char wp[512];
  write_file("p.csv", "name,time,application,num_replicas,batch_size\nj,0,cifar10,4,128\n", wp,
             sizeof wp);
  assert_int_equal(gs_csim_load(wp, dir, 2, 4, &w, err, sizeof err), -1);
  assert_non_null(strstr(err, "application 'cifar10'"));
  /* An unknown policy is refused by the run. */
  char sp[512];
  write_file("w.csv", two_jobs, wp, sizeof wp);
  write_file("s.csv", speeds, sp, sizeof sp);
  assert_int_equal(gs_csim_load(wp, sp, 2, 4, &w, err, sizeof err), 0);
  gs_csim_opts o;
  gs_csim_defaults(&o);
  o.nodes = 2;
  o.policy = "fifo";
  gs_csim_result r;
  assert_int_equal(gs_csim_run(&w, &o, &r, err, sizeof err), -1);
  assert_non_null(strstr(err, "unknown policy 'fifo'"));
  o.policy = "static";
  o.nodes = 1; /* A's min (from the table: 1) fits, its max 2 does not */
  assert_int_equal(gs_csim_run(&w, &o, &r, err, sizeof err), -1);
  assert_non_null(strstr(err, "job 'A'"));
  gs_csim_workload_free(&w);
}

/* Users and accounts (the manager's fair-share tree, gs_cluster_shares):
 * model l runs 100 samples/s a node on 1 to 8 nodes; four jobs of 400,000
 * samples (4,000 node-seconds each) at 0 on 8 nodes: p1 (alice, physics),
 * p2 (bob, physics/hep), b1 and b2 (carol, bio). */
static const char *lin_speeds =
    "model,nodes,step_time_s,samples_per_step\nl,1,1,100\nl,2,1,200\nl,4,1,400\nl,8,1,800\n";
static const char *owned =
    "name,time,model,nodes,samples,min_nodes,max_nodes,user,account\n"
    "p1,0,l,8,400000,1,8,alice,physics\np2,0,l,8,400000,1,8,bob,physics/hep\n"
    "b1,0,l,8,400000,1,8,carol,bio\nb2,0,l,8,400000,1,8,carol,bio\n";

static void run_owned(const char *policy, const gs_cluster_shares *sh, double *jct,
                      double *node_s, double *fair_s, gs_csim_result *r) {
  char wp[512], sp[512], err[512];
  write_file("w.csv", owned, wp, sizeof wp);
  write_file("s.csv", lin_speeds, sp, sizeof sp);
  gs_csim_workload w;
  assert_int_equal(gs_csim_load(wp, sp, 8, 4, &w, err, sizeof err), 0);
  assert_string_equal(w.jobs[1].user, "bob");
  assert_string_equal(w.jobs[1].account, "physics/hep");
  gs_csim_opts o;
  gs_csim_defaults(&o);
  o.nodes = 8;
  o.policy = policy;
  o.restart_penalty_s = 0;
  o.interval_s = 0;
  o.shares = sh;
  o.job_jct_s = jct;
  o.job_node_s = node_s;
  o.job_fair_node_s = fair_s;
  if (gs_csim_run(&w, &o, r, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  gs_csim_workload_free(&w);
}

/* dorm shares the pool by the tree. Accounts of share 1: bio 4 nodes (2 a
 * job), physics 4 (alice's p1 2, its sub-account hep's p2 2): every job
 * 2,000 s, each its fair 8,000 node-seconds. With physics 3: physics 6
 * nodes (3 a job, done at 4000 / 3 = 1,333 s), bio 2 until then, then 4
 * each (b1 and b2 at 1,333 + (4000 - 1333) / 4 = 2,000 s). bio limited to
 * 2 nodes (goodput, which would give it more): its jobs 1 node each, 4,000
 * s; no account's jobs ever hold more than its limit. */
static void test_accounts(void **state) {
  (void)state;
  double jct[4], node_s[4], fair_s[4];
  gs_csim_result r;
  run_owned("dorm", NULL, jct, node_s, fair_s, &r);
  for (int j = 0; j < 4; j++) {
    NEAR(jct[j], 2000);
    NEAR(node_s[j], 4000);
    NEAR(fair_s[j], 4000);
  }
  NEAR(r.fairness_loss, 0);
  const char *an[] = {"physics"};
  const double aw[] = {3};
  gs_cluster_shares sh = {0};
  sh.account_name = an, sh.account_w = aw, sh.naccount = 1;
  run_owned("dorm", &sh, jct, node_s, fair_s, &r);
  NEAR(jct[0], 4000.0 / 3);
  NEAR(jct[1], 4000.0 / 3);
  NEAR(jct[2], 2000);
  NEAR(jct[3], 2000);
  NEAR(r.fairness_loss, 0);
  /* carol's share 3: her jobs are bio's only ones, and a user's share
   * counts within its account, so nothing moves. */
  const char *un[] = {"carol"};
  const double uw[] = {3};
  gs_cluster_shares us = {0};
  us.share_user = un, us.share_w = uw, us.nshare = 1;
  run_owned("dorm", &us, jct, node_s, fair_s, &r);
  for (int j = 0; j < 4; j++) NEAR(jct[j], 2000);
  const char *ln[] = {"bio"};
  const int lv[] = {2};
  gs_cluster_shares ls = {0};
  ls.account_limit_name = ln, ls.account_limit_nodes = lv, ls.naccount_limit = 1;
  run_owned("goodput", &ls, jct, node_s, fair_s, &r);
  NEAR(jct[2], 4000);
  NEAR(jct[3], 4000);
  assert_true(jct[0] < 4000 && jct[1] < 4000);
  run_owned("goodput", NULL, jct, node_s, fair_s, &r);
  assert_true(jct[2] < 4000 && jct[3] < 4000); /* (not the default's doing) */
}

/* The decayed usage (--usage-halflife) in the simulator. h1 (alice, hog)
 * runs alone on 8 nodes from 0 to 1,000 s; b1 (bob, lab; 400,000 samples)
 * arrives then. Without usage the accounts' shares are 4 and 4: b1 on 4
 * nodes, 1,000 s. With a half-life of 1,000 s hog's usage is all there is
 * (5,771 node-seconds): its share times 2^-(1/0.5) = 1/4, lab's 1: fair
 * shares 1.6 and 6.4, dorm gives b1 6 nodes: 400,000 / 600 = 666.7 s. */
static void run_hog(double halflife, double *jct, double *node_s) {
  static const char *hog =
      "name,time,model,nodes,samples,min_nodes,max_nodes,user,account\n"
      "h1,0,l,8,1600000,1,8,alice,hog\nb1,1000,l,8,400000,1,8,bob,lab\n";
  char wp[512], sp[512], err[512];
  write_file("w.csv", hog, wp, sizeof wp);
  write_file("s.csv", lin_speeds, sp, sizeof sp);
  gs_csim_workload w;
  assert_int_equal(gs_csim_load(wp, sp, 8, 4, &w, err, sizeof err), 0);
  gs_cluster_shares sh = {.usage_halflife_s = halflife};
  gs_csim_opts o;
  gs_csim_defaults(&o);
  o.nodes = 8;
  o.policy = "dorm";
  o.restart_penalty_s = 0;
  o.interval_s = 0;
  o.shares = &sh;
  o.job_jct_s = jct;
  o.job_node_s = node_s;
  gs_csim_result r;
  if (gs_csim_run(&w, &o, &r, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  gs_csim_workload_free(&w);
}

static void test_usage_halflife(void **state) {
  (void)state;
  double jct[2], node_s[2];
  run_hog(0, jct, node_s);
  NEAR(jct[1], 1000);
  run_hog(1000, jct, node_s);
  NEAR(jct[1], 2000.0 / 3);
  NEAR(node_s[1], 4000); /* the same work, on more nodes for less time */
  /* a half-life far longer than the trace: the usage is the node-seconds,
   * the same 1/4 */
  run_hog(1e9, jct, node_s);
  NEAR(jct[1], 2000.0 / 3);
  /* a half-life far shorter: hog's usage has decayed to its last seconds'
   * but is still all the pool's: the same answer, so long as lab has used
   * nothing when b1 arrives */
  run_hog(1, jct, node_s);
  NEAR(jct[1], 2000.0 / 3);
}

/* dorm's fairness window: four 1-node jobs of 1,000 s hold a pool of 4
 * nodes from t = 0; e (2 nodes, 500 s) arrives at 10 s. Every fair share
 * is then 0.8: without a window e waits until they end (its JCT 1,490 s).
 * With a window of 100 s, e is owed 0.8 node-seconds a second and each of
 * the others owes 0.2: at t its target is 0.8 + 0.008 (t - 10), theirs
 * 0.8 - 0.002 (t - 10), and two of them stopped for e lower the deviation
 * once e's target exceeds two of theirs by more than the adjustments'
 * 0.32 (0.02 each, over the fairness weight 0.5 and the 4 nodes): after
 * t = 90 s, at the 100 s round. Returns e's first start (from the trace's
 * node segments) and its JCT; every job ends either way. */
static void run_window(double window, double *start, double *jct_e) {
  static const char *wl = "name,time,model,nodes,samples,min_nodes,max_nodes\n"
                          "a,0,l,1,100000,1,1\nb,0,l,1,100000,1,1\nc,0,l,1,100000,1,1\n"
                          "d,0,l,1,100000,1,1\ne,10,l,2,100000,2,2\n";
  char wp[512], sp[512], err[512], line[256];
  write_file("w.csv", wl, wp, sizeof wp);
  write_file("s.csv", lin_speeds, sp, sizeof sp);
  gs_csim_workload w;
  assert_int_equal(gs_csim_load(wp, sp, 4, 4, &w, err, sizeof err), 0);
  double jct[5];
  gs_csim_opts o;
  gs_csim_defaults(&o);
  o.nodes = 4;
  o.policy = "dorm";
  o.restart_penalty_s = 0;
  o.interval_s = 10;
  o.fairness_window_s = window;
  o.job_jct_s = jct;
  o.trace = tmpfile();
  assert_non_null(o.trace);
  gs_csim_result r;
  if (gs_csim_run(&w, &o, &r, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  assert_int_equal(r.done, 5);
  *start = INFINITY;
  rewind(o.trace);
  int node, job;
  double t0, t1;
  while (fgets(line, sizeof line, o.trace) != NULL)
    if (sscanf(line, "node,%d,%d,%lf,%lf", &node, &job, &t0, &t1) == 4 && job == 4 && t0 < *start)
      *start = t0;
  fclose(o.trace);
  *jct_e = jct[4];
  gs_csim_workload_free(&w);
}

static void test_fairness_window(void **state) {
  (void)state;
  double start, jct;
  run_window(0, &start, &jct);
  NEAR(start, 1000);
  NEAR(jct, 1490);
  run_window(100, &start, &jct);
  NEAR(start, 100);
  assert_true(jct < 1490 - 200);
}

/* Bad users and accounts are refused at load, naming the line and column. */
static void test_bad_owners(void **state) {
  (void)state;
  expect_load_error("name,time,model,nodes,samples,user\nA,0,m,1,5,a b\n", speeds, 2,
                    "bad.csv:2: column 'user': 'a b' is not a user's name");
  expect_load_error("name,time,model,nodes,samples,account\nA,0,m,1,5,sci//hep\n", speeds, 2,
                    "bad.csv:2: column 'account': 'sci//hep'");
  expect_load_error("name,time,model,nodes,samples,acount\nA,0,m,1,5,sci\n", speeds, 2,
                    "unknown column 'acount'");
}

/* Pollux's first workload, its first 40 jobs, on 16 nodes of 4 GPUs. */
static void test_pollux(void **state) {
  (void)state;
  char src[512], tables[512], wp[512];
  snprintf(src, sizeof src, "%s/workloads/workload-1.csv", GS_POLLUX_DIR);
  snprintf(tables, sizeof tables, "%s/traces", GS_POLLUX_DIR);
  FILE *in = fopen(src, "r");
  if (in == NULL) {
    printf("skipped: no Pollux data at %s\n", GS_POLLUX_DIR);
    skip();
  }
  snprintf(wp, sizeof wp, "%s/p40.csv", dir);
  FILE *out = fopen(wp, "w");
  assert_non_null(out);
  char line[512];
  for (int k = 0; k < 41 && fgets(line, sizeof line, in) != NULL; k++) fputs(line, out);
  fclose(in);
  fclose(out);
  gs_csim_workload w;
  char err[512];
  if (gs_csim_load(wp, tables, 16, 4, &w, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  assert_int_equal(w.njobs, 40);
  for (int i = 0; i < w.njobs; i++) {
    const gs_csim_job *j = &w.jobs[i];
    assert_true(j->min_nodes >= 1 && j->min_nodes <= j->req_nodes && j->req_nodes <= j->max_nodes);
    assert_true(j->max_nodes <= 16 && j->work > 0);
    for (int n = j->min_nodes; n <= j->max_nodes; n++) assert_true(j->speed[n] > 0);
  }
  double jct[3];
  const char *pol[3] = {"static", "dorm", "goodput"};
  for (int p = 0; p < 3; p++) {
    gs_csim_opts o;
    gs_csim_defaults(&o);
    o.nodes = 16;
    o.policy = pol[p];
    gs_csim_result r;
    if (gs_csim_run(&w, &o, &r, err, sizeof err) != 0) {
      fprintf(stderr, "%s\n", err);
      fail();
    }
    assert_int_equal(r.done, 40);
    assert_true(r.util > 0 && r.util <= 1 + 1e-9);
    assert_true(r.util_busy <= r.util + 1e-9);
    jct[p] = r.jct_mean_s;
    printf("pollux workload-1, 40 jobs, %s: mean JCT %.0f s, util %.3f\n", pol[p], r.jct_mean_s,
           r.util);
  }
  assert_true(jct[1] < jct[0] && jct[2] < jct[0]);
  gs_csim_workload_free(&w);
  /* A one-GPU job of Pollux's realistic workloads (batch 20 below
   * deepspeech2's 4 x 10 measured on a node's GPUs): refused on nodes of 4
   * GPUs with the way out, simulated with each GPU a node. */
  out = fopen(wp, "w");
  assert_non_null(out);
  fputs("name,time,application,num_replicas,batch_size\nd,110,deepspeech2,1,20\n", out);
  fclose(out);
  assert_int_equal(gs_csim_load(wp, tables, 16, 4, &w, err, sizeof err), -1);
  assert_non_null(strstr(err, "p40.csv:2: job 'd': batch 20 fits no size"));
  assert_non_null(strstr(err, "with --gpus-per-node 1"));
  if (gs_csim_load(wp, tables, 64, 1, &w, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    fail();
  }
  assert_int_equal(w.jobs[0].min_nodes, 1);
  assert_int_equal(w.jobs[0].req_nodes, 1);
  gs_csim_workload_free(&w);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gs_csim_XXXXXX");
  return mkdtemp(dir) == NULL ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  static const char *names[] = {"w.csv", "s.csv", "bad.csv", "bad_s.csv", "p.csv", "p40.csv"};
  char path[512];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    unlink(path);
  }
  return rmdir(dir);
}

/* Sharing what jobs learned (share_speeds, the manager's --share-speeds):
 * A (2 nodes, 100000 samples) runs alone and measures its speed on 2
 * nodes; B (1 node, 100 samples, A's model) arrives at 100. Without
 * sharing B's work and speed are unknown: goodput admits A (known, least
 * remaining time) first, A takes the pool, and B waits for A's end (about
 * 5260 s). With sharing B starts from A's curve, its 100 samples are ~10 s
 * of work, it is admitted first and runs at once; A waits ~15 s. C (1
 * node, another model, at 100) has nothing to borrow. */
static void test_share_speeds(void **state) {
  (void)state;
  char wp[512], sp[512], err[512];
  write_file("w.csv", "name,time,model,nodes,samples,min_nodes,max_nodes\n"
                      "A,0,m,2,100000,2,2\nB,100,m,1,100,1,1\nC,100,other,1,100,1,1\n",
             wp, sizeof wp);
  write_file("s.csv", "model,nodes,step_time_s,samples_per_step\nm,1,1,10\nm,2,1,19\n"
                      "other,1,1,10\n", sp, sizeof sp);
  double jct[2];
  for (int share = 0; share < 2; share++) {
    gs_csim_workload w;
    assert_int_equal(gs_csim_load(wp, sp, 2, 4, &w, err, sizeof err), 0);
    gs_csim_opts o;
    gs_csim_defaults(&o);
    o.nodes = 2;
    o.policy = "goodput";
    o.interval_s = 0;
    o.restart_penalty_s = 5;
    o.learn_work = 10;
    o.share_speeds = share;
    gs_csim_result r;
    if (gs_csim_run(&w, &o, &r, err, sizeof err) != 0) fail_msg("%s", err);
    gs_csim_workload_free(&w);
    jct[share] = r.jct_mean_s;
  }
  /* without: B and C (another model: nothing to borrow) wait for A; with:
   * B first, so A (2 nodes) waits, and C takes the node B leaves */
  fprintf(stderr, "share_speeds: mean JCT %.1f s alone, %.1f s shared\n", jct[0], jct[1]);
  assert_true(jct[0] > 5000);
  assert_true(jct[1] < jct[0] - 1000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_static_by_hand),
      cmocka_unit_test(test_goodput_by_hand),
      cmocka_unit_test(test_start_penalty),
      cmocka_unit_test(test_start_from_table),
      cmocka_unit_test(test_end_from_table),
      cmocka_unit_test(test_learn_curves),
      cmocka_unit_test(test_learn_restart),
      cmocka_unit_test(test_restart_prior),
      cmocka_unit_test(test_share_speeds),
      cmocka_unit_test(test_interference),
      cmocka_unit_test(test_node_loss),
      cmocka_unit_test(test_manager_resizes),
      cmocka_unit_test(test_time_commits),
      cmocka_unit_test(test_shrink_back),
      cmocka_unit_test(test_waiting_answer),
      cmocka_unit_test(test_long_jobs),
      cmocka_unit_test(test_round_bound),
      cmocka_unit_test(test_bad_workloads),
      cmocka_unit_test(test_pollux),
      cmocka_unit_test(test_accounts),
      cmocka_unit_test(test_bad_owners),
      cmocka_unit_test(test_usage_halflife),
      cmocka_unit_test(test_fairness_window),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
