#!/usr/bin/env python3
"""For bench/cluster/usage_halflife.sh.

assign SRC DST SEED: copies a Pollux workload CSV with user and account
columns added: each job charged, by a seeded draw, to account heavy (60% of
the jobs), medium (30%) or light (10%), user = account.

summarize RESULTS.jsonl OUT.md: per policy and half-life, the mean over the
workloads of the mean JCT (all jobs, and each account's) and of the
utilisation, and each account's mean JCT against the same policy without
usage (ratio < 1: faster)."""
import csv
import json
import random
import sys
from collections import defaultdict

ACCOUNTS = (("heavy", 0.6), ("medium", 0.3), ("light", 0.1))


def assign(src, dst, seed):
    rng = random.Random(int(seed))
    with open(src) as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    with open(dst, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head + ["user", "account"])
        for r in body:
            x, acct = rng.random(), ACCOUNTS[-1][0]
            for name, p in ACCOUNTS:
                if x < p:
                    acct = name
                    break
                x -= p
            w.writerow(r + [acct, acct])


def hl_name(h):
    h = float(h)
    return "none" if h == 0 else f"{h / 3600:g} h"


def summarize(path, out):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("{") and not line.startswith('{"stamp"'):
                rows.append(json.loads(line))
    policies = [p for p in ("static", "dorm", "goodput") if any(r["policy"] == p for r in rows)]
    hls = sorted({float(r["halflife_s"]) for r in rows})
    nwl = len({r["workload_name"] for r in rows})
    acc = defaultdict(list)  # (policy, hl, measure) -> values over workloads
    base = {}
    for r in rows:
        k = (r["policy"], float(r["halflife_s"]))
        acc[k + ("jct",)].append(r["jct_mean_s"])
        acc[k + ("util",)].append(r["util"])
        acc[k + ("fair",)].append(r["fairness_loss"])
        for a in r.get("accounts", []):
            acc[k + (a["account"],)].append(a.get("jct_mean_s", 0))
            acc[k + (a["account"] + "_used",)].append(a["used_share"])
            if float(r["halflife_s"]) == 0:
                base[(r["policy"], r["workload_name"], a["account"])] = a.get("jct_mean_s", 0)
        if float(r["halflife_s"]) == 0:
            base[(r["policy"], r["workload_name"], "all")] = r["jct_mean_s"]
    ratio = defaultdict(list)
    for r in rows:
        b = base.get((r["policy"], r["workload_name"], "all"))
        if b:
            ratio[(r["policy"], float(r["halflife_s"]), "all")].append(r["jct_mean_s"] / b)
        for a in r.get("accounts", []):
            b = base.get((r["policy"], r["workload_name"], a["account"]))
            if b and a.get("jct_mean_s"):
                ratio[(r["policy"], float(r["halflife_s"]), a["account"])].append(a["jct_mean_s"] / b)

    def mean(v):
        return sum(v) / len(v) if v else float("nan")

    names = [a for a, _ in ACCOUNTS]
    lines = [
        "# The decayed-usage fair share on Pollux's workloads",
        "",
        f"Pollux's {nwl} workloads (160 jobs each, 64 GPUs as 16 nodes of 4, a round every 60 s, "
        "30 s a restart, as bench/cluster/pollux_sim.sh), each job charged by a seeded draw to "
        "account heavy (60% of the jobs), medium (30%) or light (10%), every account of share 1; "
        "`gradsync cluster simulate --usage-halflife S` against the same run without it. "
        "Means over the workloads; `x base` is the mean of each workload's ratio to the same "
        "policy without usage (below 1: faster). static does not read shares (its rows are the "
        "same at every half-life).",
        "",
        "| policy | half-life | mean JCT (s) | x base | "
        + " | ".join(f"{a} JCT (s) | x base" for a in names)
        + " | " + " | ".join(f"{a} used" for a in names) + " | utilisation | fairness loss |",
        "| --- | --- | --- | --- | " + " | ".join("--- | ---" for _ in names) + " | "
        + " | ".join("---" for _ in names) + " | --- | --- |",
    ]
    for p in policies:
        for h in hls:
            k = (p, h)
            cells = [p, hl_name(h), f"{mean(acc[k + ('jct',)]):.0f}",
                     f"{mean(ratio[(p, h, 'all')]):.3f}"]
            for a in names:
                cells += [f"{mean(acc[k + (a,)]):.0f}", f"{mean(ratio[(p, h, a)]):.3f}"]
            cells += [f"{mean(acc[k + (a + '_used',)]):.3f}" for a in names]
            cells += [f"{mean(acc[k + ('util',)]):.3f}", f"{mean(acc[k + ('fair',)]):.3f}"]
            lines.append("| " + " | ".join(cells) + " |")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "assign":
        assign(*sys.argv[2:5])
    elif sys.argv[1] == "summarize":
        summarize(*sys.argv[2:4])
    else:
        sys.exit(__doc__)
