#!/usr/bin/env python3
"""bench/cluster/real_trace.sh's numbers.

  summarize_trace.py --policy P --nodes N --start T --spool DIR
      one JSON line for the policy's run: every job's submit, start, end, JCT
      (end - submit), wait, status, resizes and restarts (`gradsync jobs`' own
      snapshot, SPOOL/jobs.json), node-seconds (each launch's nodes times its
      duration, from the supervisors' events: a launch lasts until the next
      event of its attempt that ends it), and the run's mean and p99 JCT,
      makespan (the last end - T), utilisation (node-seconds / (N x
      makespan)) and Dorm's fairness loss (fairness(), below), with every
      job's launches ([from, to, nodes]).
  summarize_trace.py --markdown JSONL --node-cpus C --trace TRACE
      the results as Markdown."""
import argparse
import glob
import json
import os


def launch_spans(jobdir):
    """A job's launches, [from, to, nodes] each, from its supervisors' events:
    a launch lasts until the next event of its attempt that ends it."""
    spans = []
    for path in sorted(glob.glob(os.path.join(jobdir, "events.*.jsonl"))):
        cur = None  # (time, nodes)
        for line in open(path):
            try:
                e = json.loads(line)
            except ValueError:
                continue
            kind, t = e.get("event"), e.get("time")
            if kind in ("failure", "resize", "finish", "launch") and cur is not None:
                spans.append([cur[0], t, cur[1]])
                cur = None
            if kind == "launch":
                cur = (t, len(e.get("hosts", "").split(",")))
    return spans


def fair_share(jobs, nodes):
    """Weighted max-min fair share of `nodes` among jobs [(id, cap, weight)]
    (water-filling, as gs_cluster_fair_share): {id: nodes}."""
    share, left = {}, float(nodes)
    order = sorted(jobs, key=lambda j: j[1] / j[2])
    wsum = sum(j[2] for j in order)
    for k, (jid, cap, w) in enumerate(order):
        if cap > left / wsum * w:
            for jid2, _, w2 in order[k:]:
                share[jid2] = left * w2 / wsum
            break
        share[jid] = cap
        left -= cap
        wsum -= w
    return share


def fairness(jobs, nodes, t_end):
    """Dorm's fairness loss, sum_i |x_i - f_i| / N over the jobs in the
    system (submitted, not ended), x_i the nodes of the job's running launch
    and f_i its fair share among them, averaged over the time in which any
    job is in the system (as `gradsync cluster simulate` reports it)."""
    cuts = set()
    for j in jobs:
        cuts.add(j["submit"])
        cuts.add(j["end"] or t_end)
        for a, b, _ in j["launches"]:
            cuts.update((a, b))
    cuts = sorted(c for c in cuts if c <= t_end)
    integral = present = 0.0
    for a, b in zip(cuts, cuts[1:]):
        if b <= a:
            continue
        mid = (a + b) / 2
        here = [j for j in jobs if j["submit"] <= mid < (j["end"] or t_end)]
        if not here:
            continue
        f = fair_share([(j["id"], min(j["max"], nodes), j.get("weight", 1.0)) for j in here], nodes)
        loss = 0.0
        for j in here:
            x = sum(n for s, e, n in j["launches"] if s <= mid < e)
            loss += abs(x - f[j["id"]])
        integral += loss / nodes * (b - a)
        present += b - a
    return integral / present if present else 0.0


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
        spans = launch_spans(j["dir"])
        ns = sum((b - a) * n for a, b, n in spans)
        busy += ns
        jobs.append({"id": j["id"], "name": j["name"], "min": j["min"], "max": j["max"],
                     "weight": j.get("weight", 1.0),
                     "state": j["state"], "submit": j["submit_time"],
                     "start": j.get("start_time"), "end": j.get("end_time"),
                     "jct_s": (j["end_time"] - j["submit_time"]) if j.get("end_time") else None,
                     "wait_s": (j["start_time"] - j["submit_time"]) if j.get("start_time") else None,
                     "resizes": j["resizes"], "restarts": j["restarts"],
                     # the manager's measure of its resizes' cost (None: none measured)
                     "restart_s": j.get("restart_s"),
                     # its start-up from nothing, measured, and the price the last
                     # policy round charged a resize of it (None: not measured; the
                     # fixed --restart-penalty)
                     "startup_s": j.get("startup_s"),
                     "restart_price_s": j.get("restart_price_s"),
                     "node_s": round(ns, 2),
                     "launches": [[round(a, 3), round(b, 3), n] for a, b, n in spans]})
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
        "fairness_loss": round(fairness(jobs, a.nodes, max(ends)), 4) if ends else None,
        "resizes": sum(x["resizes"] for x in jobs), "restarts": sum(x["restarts"] for x in jobs)}))


def opt(j, key):
    return j[key] if j.get(key) is not None else "-"


def markdown(a):
    runs = [json.loads(l) for l in open(a.markdown) if l.startswith('{"policy"')]
    trace = [json.loads(l) for l in open(a.trace)]
    print("# The cluster manager on a trace of real training jobs\n")
    print(f"{len(trace)} gradsync training jobs (bench/cluster/trace.py, seeded) submitted at "
          f"their arrival times (0 to {trace[-1]['arrival_s']:.0f} s) to `gradsync cluster serve "
          f"--emulated 8 --rate 1gbit --node-cpus {a.node_cpus}` (8 nodes of {a.node_cpus} "
          "cores each), once per policy. JCT: completion minus submission. Utilisation: "
          "node-seconds that ranks ran (the supervisors' launch events) over 8 x makespan.\n")
    print("Fairness loss: Dorm's sum of |running nodes - fair share| / 8 over the jobs submitted "
          "and not ended (fair share: max-min, capped at each job's max), averaged over the "
          "time in which any job is in the system.\n")
    print("| policy | jobs done | mean JCT (s) | p99 JCT (s) | makespan (s) | utilisation | "
          "fairness loss | resizes | restarts |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in runs:
        print(f"| {r['policy']} | {r['done']}/{len(r['jobs'])} | {r['mean_jct_s']} | "
              f"{r['p99_jct_s']} | {r['makespan_s']} | {r['utilisation']} | "
              f"{r.get('fairness_loss', '-')} | {r['resizes']} | {r['restarts']} |")
    for r in runs:
        print(f"\n## {r['policy']}: every job\n")
        print("| id | name | min:max | state | wait (s) | JCT (s) | node-s | resizes | restarts | "
              "a resize's measured cost (s) | start-up (s) | last price (s) |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for j in r["jobs"]:
            w = f"{j['wait_s']:.1f}" if j["wait_s"] is not None else "-"
            c = f"{j['jct_s']:.1f}" if j["jct_s"] is not None else "-"
            print(f"| {j['id']} | {j['name']} | {j['min']}:{j['max']} | {j['state']} | {w} | "
                  f"{c} | {j['node_s']} | {j['resizes']} | {j['restarts']} | "
                  f"{opt(j, 'restart_s')} | {opt(j, 'startup_s')} | {opt(j, 'restart_price_s')} |")


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
