#!/usr/bin/env python3
"""Summarises bench/cluster/pollux_sim.sh's JSON lines into a Markdown table:
per policy, the mean over Pollux's eight workloads of each measure, and the
mean JCT per workload. Usage: summarize.py RESULTS.jsonl OUT.md"""
import json
import sys

PUBLISHED = [("Pollux", 2751), ("Tiresias", 4038), ("Optimus+Oracle", 5682)]


def main():
    rows = []
    with open(sys.argv[1]) as f:
        for line in f:
            if line.startswith("{") and not line.startswith('{"stamp"'):
                rows.append(json.loads(line))
    policies = [p for p in ("static", "dorm", "goodput") if any(r["policy"] == p for r in rows)]
    workloads = sorted({r["workload_name"] for r in rows}, key=lambda w: int(w.split("-")[-1]))
    by = {(r["workload_name"], r["policy"]): r for r in rows}

    def mean(p, key):
        v = [by[(w, p)][key] for w in workloads if (w, p) in by]
        return sum(v) / len(v) if v else float("nan")

    out = ["# The cluster simulator on Pollux's eight workloads", "",
           "`gradsync cluster simulate` on the eight 160-job workloads of Pollux's OSDI'21",
           "artifact (`workloads/workload-{1..8}.csv`, sampled from Microsoft's Philly trace),",
           "64 GPUs as 16 nodes of 4, a re-allocation every 60 s and 30 s charged per restart",
           "(the artifact's settings). Job speeds come from the artifact's measured step times",
           "(`traces/APP/placements.csv`, `scalability.csv`) at each job's own batch size, job",
           "lengths from the steps the artifact measured to reach each application's epoch",
           "budget at that batch size (`validation-BATCH.csv`); see docs/CLUSTER.md. Partitions",
           "are whole nodes (4 GPUs); no policy here adapts batch sizes.", "",
           "## Means over the eight workloads", "",
           "| policy | mean JCT (s) | p99 JCT (s) | makespan (s) | utilisation | busy | "
           "fairness loss | rho max | rho mean | restarts | round ms (mean / max) |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for p in policies:
        out.append(
            f"| {p} | {mean(p, 'jct_mean_s'):.0f} | {mean(p, 'jct_p99_s'):.0f} | "
            f"{mean(p, 'makespan_s'):.0f} | {mean(p, 'util'):.3f} | {mean(p, 'util_busy'):.3f} | "
            f"{mean(p, 'fairness_loss'):.3f} | {mean(p, 'ftf_max'):.2f} | {mean(p, 'ftf_mean'):.2f} | "
            f"{mean(p, 'resizes'):.0f} | {mean(p, 'round_ms_mean'):.2f} / "
            f"{max(by[(w, p)]['round_ms_max'] for w in workloads if (w, p) in by):.1f} |")
    if "static" in policies:
        s = mean("static", "jct_mean_s")
        out += ["", "Mean JCT against static's: " + ", ".join(
            f"{p} {s / mean(p, 'jct_mean_s'):.2f}x shorter" for p in policies if p != "static")
            + "; utilisation against static's: " + ", ".join(
            f"{p} {mean(p, 'util') / mean('static', 'util'):.2f}x" for p in policies
            if p != "static") + "."]
    if "dorm" in policies:
        gap = max(by[(w, "dorm")].get("dorm_gap_max", 0) or 0 for w in workloads
                  if (w, "dorm") in by)
        fb = sum(by[(w, "dorm")].get("dorm_fallbacks", 0) for w in workloads if (w, "dorm") in by)
        ex = sum(by[(w, "dorm")].get("dorm_exact_rounds", 0) for w in workloads if (w, "dorm") in by)
        rounds = sum(by[(w, "dorm")]["rounds"] for w in workloads if (w, "dorm") in by)
        out += ["", f"dorm: {ex} of {rounds} rounds started GLPK from the exact optimum (the "
                f"dynamic programme over every size, src/cluster/policy_dorm.c); GLPK's own "
                f"bound left a relative MIP gap of up to {gap:.3g} (0 = proven by GLPK); "
                f"{fb} rounds had no GLPK solution within the time limit and kept the start."]
    out += ["", "Published mean JCTs of the artifact's own simulator on the same workloads",
            "(from the artifact's README; **published, not measured by us**, and from a",
            "different model: GPU-level placement, batch-size adaptation for Pollux):", "",
            "| scheduler (published) | mean JCT (s) |", "| --- | ---: |"]
    out += [f"| {n} | {v} |" for n, v in PUBLISHED]
    out += ["", "## Mean JCT per workload (s)", "",
            "| workload | " + " | ".join(policies) + " |",
            "| --- |" + " ---: |" * len(policies)]
    for w in workloads:
        out.append(f"| {w} | " + " | ".join(
            f"{by[(w, p)]['jct_mean_s']:.0f}" if (w, p) in by else "" for p in policies) + " |")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
