#!/usr/bin/env python3
"""Markdown tables from `gradsync replay --json` runs: per profile and
cluster, each policy's measured and predicted iteration time, and the ratios
issue #3's goals are stated in. A run with --rounds R gives R results per
policy; the table shows their medians and the spread of the measured times
((max - min) / median), which says how much of a difference is noise."""
import json
import statistics
import sys
from collections import defaultdict

ORDER = ["wfbp", "single", "bucket", "mgwfbp", "optimal", "dear", "auto"]


def merge(rs):
    """One row from the rounds of one policy: medians of the rounds."""
    med = lambda k: statistics.median(r[k] for r in rs)
    its = [r["iter_s"] for r in rs]
    groups = sorted({r["ngroups"] for r in rs})
    chosen = sorted({r.get("chosen", "") for r in rs})
    return {
        "iter_s": med("iter_s"),
        "predicted_s": med("predicted_s"),
        "hidden_frac": med("hidden_frac"),
        "groups": str(groups[0]) if len(groups) == 1 else f"{groups[0]}-{groups[-1]}",
        "chosen": "/".join(chosen),
        "rounds": f"{len(rs)}x{rs[0].get('iters', '?')}",
        "spread": (max(its) - min(its)) / statistics.median(its) if len(its) > 1 else None,
    }


def main(paths):
    raw = defaultdict(lambda: defaultdict(list))
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                if "policy" not in r:
                    continue
                key = (r["nodes"], r["profile"], r.get("time_scale", 1))
                raw[key][r["policy"]].append(r)
    runs = {k: {p: merge(rs) for p, rs in v.items()} for k, v in raw.items()}
    ws = sorted({r.get("warmup") for v in raw.values() for rs in v.values() for r in rs
                 if r.get("warmup") is not None})
    warmups = " or ".join(str(w) for w in ws) if ws else "the"
    print("# Scheduling policies replayed on emulated clusters at 1 Gbit/s\n")
    print("Produced by `bench/replay_sweep.sh` (`gradsync replay --policy all`): compute "
          "replayed by sleeping, scaled per profile so that it takes about as long as the "
          "ring all-reduce of all gradients on that cluster (scale column); real buffers "
          "through the engine. Predicted = the planner's model with the engine's fitted a "
          "and b. With several rounds (policies run in turn, odd rounds in reverse order) "
          "the times are the rounds' medians and spread is (max - min) / median of the "
          "measured times; each round's time is the median of its iterations, after "
          f"{warmups} engine warm-up iterations (each file's command is in its stamp).\n")
    print("| nodes | profile | compute scale | policy | groups | rounds x iters | measured ms | "
          "spread | predicted ms | pred/meas | hidden | vs wfbp | vs single |")
    print("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    summary = []
    off = []
    for (nodes, prof, scale), pol in sorted(runs.items()):
        wf = pol.get("wfbp", {}).get("iter_s")
        si = pol.get("single", {}).get("iter_s")
        for name in ORDER:
            r = pol.get(name)
            if not r:
                continue
            label = name if name != "auto" else f"auto ({r['chosen']})"
            ratio = r["predicted_s"] / r["iter_s"]
            if not 0.9 <= ratio <= 1.1:
                off.append(f"{nodes} nodes {prof} {name} ({ratio:.2f})")
            spread = "" if r["spread"] is None else f"{r['spread'] * 100:.0f}%"
            vs_wf = f"{wf / r['iter_s']:.2f}x" if wf else ""
            vs_si = f"{si / r['iter_s']:.2f}x" if si else ""
            print(f"| {nodes} | {prof} | {scale} | {label} | {r['groups']} | {r['rounds']} | "
                  f"{r['iter_s'] * 1e3:.0f} | {spread} | {r['predicted_s'] * 1e3:.0f} | "
                  f"{r['predicted_s'] / r['iter_s']:.2f} | {r['hidden_frac'] * 100:.0f}% | "
                  f"{vs_wf} | {vs_si} |")
        # optimal is optimal among all-reduce plans: compare it with those;
        # auto chooses among every policy, dear included.
        for name, rivals in (("optimal", ORDER[:4]), ("auto", ORDER[:6])):
            times = [(pol[n]["iter_s"], n) for n in rivals if n in pol]
            if name in pol and times:
                best, best_name = min(times)
                summary.append((nodes, prof, name, best_name, pol[name]["iter_s"] / best))
    print("\nOptimal against the best all-reduce policy (wfbp, single, bucket, "
          "mgwfbp), and auto against the best of all six (measured time ratio; "
          "the goal is at most 1.03):\n")
    print("| nodes | profile | policy | best other | time / best other |")
    print("|---:|---|---|---|---:|")
    for nodes, prof, name, best_name, ratio in summary:
        print(f"| {nodes} | {prof} | {name} | {best_name} | {ratio:.3f} |")
    rows = sum(len(p) for p in runs.values())
    print(f"\nPredicted within 10% of measured: {rows - len(off)} of {rows} rows"
          + (f"; outside: {', '.join(off)}." if off else "."))


if __name__ == "__main__":
    main(sys.argv[1:])
