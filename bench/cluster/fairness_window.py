#!/usr/bin/env python3
"""Summarises bench/cluster/fairness_window.sh's JSON lines as markdown:
dorm with each fairness window against dorm without one, on Pollux's
workloads (geometric means of the ratios, and per workload) and on the
simulated real uneven trace."""
import json
import statistics
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
pollux = sorted({r["trace"] for r in rows if r["trace"].startswith("workload-")},
                key=lambda t: int(t.split("-")[1]))
windows = sorted({int(r["window_s"]) for r in rows if r["trace"] in pollux and r["window_s"] != "0"})


def get(trace, policy, window):
    for r in rows:
        if r["trace"] == trace and r["policy"] == policy and int(r["window_s"]) == window:
            return r
    return None


METRICS = [("jct_mean_s", "mean JCT"), ("jct_p99_s", "p99 JCT"), ("ftf_max", "rho max"),
           ("ftf_mean", "rho mean"), ("fairness_loss", "fairness loss"), ("util", "utilisation"),
           ("resizes", "resizes"), ("makespan_s", "makespan")]


def gmean_ratio(key, window):
    rs = []
    for t in pollux:
        a, b = get(t, "dorm", window), get(t, "dorm", 0)
        if a and b and b[key] > 0:
            rs.append(a[key] / b[key])
    return statistics.geometric_mean(rs) if rs else float("nan")


def mean_of(key, policy, window):
    v = [get(t, policy, window)[key] for t in pollux if get(t, policy, window)]
    return sum(v) / len(v) if v else float("nan")


print("# dorm's fairness window (simulated)\n")
print("`gradsync cluster simulate --fairness-window S` (bench/cluster/fairness_window.sh): dorm's "
      "target for a job is its fair share plus the node-seconds of fair share it was owed and not "
      "given while in the system (its fair share's node-seconds less its partitions'), over S "
      "seconds, within what it can hold; a restart is priced over at most S too. Without a "
      "window (the default) the target is the share now, Dorm's. Finish-time fairness rho "
      "(Themis): a job's completion time over its time alone on its fair share of the pool "
      "(1: as fair as the pool allows; the largest and the mean over the jobs). Fairness loss: "
      "Dorm's instantaneous sum |x - f| / N, time-averaged.\n")
print(f"## Pollux's workloads ({len(pollux)}; 16 nodes of 4 GPUs, restart 30 s, a round every 60 s)\n")
print("Each window's geometric mean over the workloads of dorm with it / dorm without:\n")
print("| window | " + " | ".join(m[1] for m in METRICS) + " |")
print("|---:|" + "---:|" * len(METRICS))
for w in windows:
    print(f"| {w} s ({w / 3600:g} h) | " +
          " | ".join(f"{gmean_ratio(k, w):.3f}" for k, _ in METRICS) + " |")
print("\nThe means over the workloads (seconds; static and goodput as peers, without a window):\n")
print("| policy | window | mean JCT | p99 JCT | rho max | rho mean | fairness loss | utilisation | resizes |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
cases = [("static", 0), ("goodput", 0), ("dorm", 0)] + [("dorm", w) for w in windows]
for p, w in cases:
    print(f"| {p} | {w if w else 'none'} | {mean_of('jct_mean_s', p, w):.0f} | "
          f"{mean_of('jct_p99_s', p, w):.0f} | {mean_of('ftf_max', p, w):.2f} | "
          f"{mean_of('ftf_mean', p, w):.3f} | {mean_of('fairness_loss', p, w):.3f} | "
          f"{mean_of('util', p, w):.3f} | {mean_of('resizes', p, w):.0f} |")
pick = 3600 if 3600 in windows else windows[0]
print(f"\nPer workload, dorm without a window and with {pick} s:\n")
print("| workload | mean JCT (none / window) | p99 JCT | rho max | rho mean | resizes |")
print("|---|---:|---:|---:|---:|---:|")
for t in pollux:
    a, b = get(t, "dorm", 0), get(t, "dorm", pick)
    if not a or not b:
        continue
    print(f"| {t} | {a['jct_mean_s']:.0f} / {b['jct_mean_s']:.0f} | "
          f"{a['jct_p99_s']:.0f} / {b['jct_p99_s']:.0f} | {a['ftf_max']:.2f} / {b['ftf_max']:.2f} | "
          f"{a['ftf_mean']:.3f} / {b['ftf_mean']:.3f} | {a['resizes']} / {b['resizes']} |")
un = [r for r in rows if r["trace"] == "uneven"]
if un:
    print("\n## The real uneven trace, simulated (8 nodes; bench/results/cluster_real_uneven_*.csv, "
          "the manager's settings of sim_vs_real.sh)\n")
    print("| policy | window | mean JCT s | p99 JCT s | makespan s | utilisation | fairness loss | rho max | resizes |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in sorted(un, key=lambda r: (r["policy"] != "static", r["policy"] != "goodput",
                                       int(r["window_s"]))):
        w = int(r["window_s"])
        print(f"| {r['policy']} | {w if w else 'none'} | {r['jct_mean_s']:.1f} | {r['jct_p99_s']:.1f} | "
              f"{r['makespan_s']:.0f} | {r['util']:.3f} | {r['fairness_loss']:.3f} | "
              f"{r['ftf_max']:.2f} | {r['resizes']} |")
