#!/usr/bin/env python3
"""Markdown tables from `gradsync replay --json` runs: per profile and
cluster, each policy's measured and predicted iteration time, and the ratios
issue #3's goals are stated in."""
import json
import sys
from collections import defaultdict

ORDER = ["wfbp", "single", "bucket", "mgwfbp", "optimal", "dear", "auto"]


def main(paths):
    runs = defaultdict(dict)
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                if "policy" not in r:
                    continue
                runs[(r["nodes"], r["profile"], r.get("time_scale", 1))][r["policy"]] = r
    print("# Scheduling policies replayed on emulated clusters at 1 Gbit/s\n")
    print("Produced by `bench/replay_sweep.sh` (`gradsync replay --policy all`): compute "
          "replayed by sleeping, scaled per profile so that it takes about as long as the "
          "ring all-reduce of all gradients on that cluster (scale column); real buffers "
          "through the engine. Predicted = the planner's model with the engine's fitted a "
          "and b.\n")
    print("| nodes | profile | compute scale | policy | groups | measured ms | "
          "predicted ms | pred/meas | hidden | vs wfbp | vs single |")
    print("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    summary = []
    for (nodes, prof, scale), pol in sorted(runs.items()):
        wf = pol.get("wfbp", {}).get("iter_s")
        si = pol.get("single", {}).get("iter_s")
        for name in ORDER:
            r = pol.get(name)
            if not r:
                continue
            label = name if name != "auto" else f"auto ({r.get('chosen')})"
            print(f"| {nodes} | {prof} | {scale} | {label} | {r['ngroups']} | "
                  f"{r['iter_s'] * 1e3:.0f} | {r['predicted_s'] * 1e3:.0f} | "
                  f"{r['predicted_s'] / r['iter_s']:.2f} | {r['hidden_frac'] * 100:.0f}% | "
                  f"{wf / r['iter_s']:.2f}x | {si / r['iter_s']:.2f}x |")
        # optimal is optimal among all-reduce plans: compare it with those;
        # auto chooses among every policy, dear included.
        for name, rivals in (("optimal", ORDER[:4]), ("auto", ORDER[:6])):
            times = [pol[n]["iter_s"] for n in rivals if n in pol]
            if name in pol and times:
                summary.append((nodes, prof, name, pol[name]["iter_s"] / min(times)))
    print("\nOptimal against the best all-reduce policy (wfbp, single, bucket, "
          "mgwfbp), and auto against the best of all six (measured time ratio; "
          "the goal is at most 1.03):\n")
    print("| nodes | profile | policy | time / best other |")
    print("|---:|---|---|---:|")
    for nodes, prof, name, ratio in summary:
        print(f"| {nodes} | {prof} | {name} | {ratio:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
