#!/usr/bin/env python3
"""bench/cluster/real_trace.sh's numbers.

  summarize_trace.py --policy P --nodes N --start T --spool DIR
      one JSON line for the policy's run: every job's submit, start, end, JCT
      (end - submit), wait, status, resizes and restarts (`gradsync jobs`' own
      snapshot, SPOOL/jobs.json), node-seconds (each launch's nodes times its
      duration, from the supervisors' events: a launch lasts until the next
      event of its attempt that ends it), and the run's mean and p99 JCT,
      makespan (the last end - T) and utilisation (node-seconds / (N x
      makespan)).
  summarize_trace.py --markdown JSONL --node-cpus C --trace TRACE
      the results as Markdown."""
import argparse
import glob
import json
import os


def launches(jobdir):
    """Node-seconds of a job: sum over its launches of nodes x seconds."""
    busy = 0.0
    for path in sorted(glob.glob(os.path.join(jobdir, "events.*.jsonl"))):
        cur = None  # (time, nodes)
        for line in open(path):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            kind, t = e.get("event"), e.get("time")
            if kind in ("failure", "resize", "finish", "launch") and cur is not None:
                busy += cur[1] * (t - cur[0])
                cur = None
            if kind == "launch":
                cur = (t, len(e.get("hosts", "").split(",")))
    return busy


def pct(values, q):
    v = sorted(values)
    if not v:
        return None
    k = min(len(v) - 1, max(0, int(round(q * (len(v) - 1)))))
    return v[k]


def run_line(a):
    snap = json.load(open(os.path.join(a.spool, "jobs.json")))
    jobs, busy = [], 0.0
    for j in snap["jobs"]:
        ns = launches(j["dir"])
        busy += ns
        jobs.append({"id": j["id"], "name": j["name"], "min": j["min"], "max": j["max"],
                     "state": j["state"], "submit": j["submit_time"],
                     "start": j.get("start_time"), "end": j.get("end_time"),
                     "jct_s": (j["end_time"] - j["submit_time"]) if j.get("end_time") else None,
                     "wait_s": (j["start_time"] - j["submit_time"]) if j.get("start_time") else None,
                     "resizes": j["resizes"], "restarts": j["restarts"],
                     "node_s": round(ns, 2)})
    jcts = [x["jct_s"] for x in jobs if x["jct_s"] is not None]
    ends = [x["end"] for x in jobs if x["end"]]
    makespan = max(ends) - a.start if ends else None
    print(json.dumps({
        "policy": a.policy, "nodes": a.nodes, "jobs": jobs,
        "done": sum(1 for x in jobs if x["state"] == "done"),
        "mean_jct_s": round(sum(jcts) / len(jcts), 2) if jcts else None,
        "p99_jct_s": round(pct(jcts, 0.99), 2) if jcts else None,
        "makespan_s": round(makespan, 2) if makespan else None,
        "utilisation": round(busy / (a.nodes * makespan), 4) if makespan else None,
        "resizes": sum(x["resizes"] for x in jobs), "restarts": sum(x["restarts"] for x in jobs)}))


def markdown(a):
    runs = [json.loads(l) for l in open(a.markdown) if l.startswith('{"policy"')]
    trace = [json.loads(l) for l in open(a.trace)]
    print("# The cluster manager on a trace of real training jobs\n")
    print(f"{len(trace)} gradsync training jobs (bench/cluster/trace.py, seeded) submitted at "
          f"their arrival times (0 to {trace[-1]['arrival_s']:.0f} s) to `gradsync cluster serve "
          f"--emulated 8 --rate 1gbit --node-cpus {a.node_cpus}` (8 nodes of {a.node_cpus} "
          "cores each), once per policy. JCT: completion minus submission. Utilisation: "
          "node-seconds that ranks ran (the supervisors' launch events) over 8 x makespan.\n")
    print("| policy | jobs done | mean JCT (s) | p99 JCT (s) | makespan (s) | utilisation | "
          "resizes | restarts |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in runs:
        print(f"| {r['policy']} | {r['done']}/{len(r['jobs'])} | {r['mean_jct_s']} | "
              f"{r['p99_jct_s']} | {r['makespan_s']} | {r['utilisation']} | {r['resizes']} | "
              f"{r['restarts']} |")
    for r in runs:
        print(f"\n## {r['policy']}: every job\n")
        print("| id | name | min:max | state | wait (s) | JCT (s) | node-s | resizes | restarts |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for j in r["jobs"]:
            w = f"{j['wait_s']:.1f}" if j["wait_s"] is not None else "-"
            c = f"{j['jct_s']:.1f}" if j["jct_s"] is not None else "-"
            print(f"| {j['id']} | {j['name']} | {j['min']}:{j['max']} | {j['state']} | {w} | "
                  f"{c} | {j['node_s']} | {j['resizes']} | {j['restarts']} |")


ap = argparse.ArgumentParser()
ap.add_argument("--policy")
ap.add_argument("--nodes", type=int)
ap.add_argument("--start", type=float)
ap.add_argument("--spool")
ap.add_argument("--markdown")
ap.add_argument("--node-cpus")
ap.add_argument("--trace")
a = ap.parse_args()
markdown(a) if a.markdown else run_line(a)
