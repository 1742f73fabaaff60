#!/usr/bin/env python3
"""How far two replays of the same cells differ (issue 36, item 2: the
replay is the peer the network presets are held to, so its own
repeatability bounds what a preset can be shown to reach). Reads the
replay_*nodes.jsonl files (bench/replay_sweep.sh) of two directories and,
for every cell both hold with the same profile, cluster, policy and
compute scale, on hosts of the same CPU, prints both medians and their
difference. Usage: replay_repeat.py DIR_BEFORE DIR_AFTER. Markdown on
stdout."""
import glob
import json
import os
import statistics
import sys


def load(directory):
    cells, stamps = {}, {}
    for path in sorted(glob.glob(os.path.join(directory, "replay_*nodes.jsonl"))):
        with open(path) as f:
            recs = [json.loads(line) for line in f if line.strip()]
        stamp = next((r["stamp"] for r in recs if "stamp" in r), {})
        stamps[os.path.basename(path)] = stamp
        for r in recs:
            if "stamp" in r or r.get("ranks") != r.get("nodes"):
                continue
            key = (os.path.basename(path), r["policy"], r["time_scale"])
            cells.setdefault(key, []).append(r["iter_s"])
    return {k: statistics.median(v) for k, v in cells.items()}, stamps


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: replay_repeat.py DIR_BEFORE DIR_AFTER")
    a, sa = load(sys.argv[1])
    b, sb = load(sys.argv[2])
    cpu = lambda s: s.get("env", {}).get("cpu", "")
    keys = sorted(k for k in a if k in b and cpu(sa[k[0]]) and cpu(sa[k[0]]) == cpu(sb[k[0]]))
    if not keys:
        sys.exit("replay_repeat: no cell of both directories measured on the same CPU")
    out = ["| replay | policy | compute scale | before ms | after ms | after / before |",
           "|---|---|---:|---:|---:|---:|"]
    diffs = []
    for k in keys:
        d = b[k] / a[k] - 1
        diffs.append(abs(d))
        out.append(f"| {k[0]} | {k[1]} | {k[2]:g} | {a[k] * 1e3:.1f} | {b[k] * 1e3:.1f} | "
                   f"{d * 100:+.1f}% |")
    out += ["", f"{len(keys)} cells: the same cell differs by {statistics.median(diffs) * 100:.1f}% "
            f"at the median and by {max(diffs) * 100:.1f}% at most; "
            f"{sum(x > 0.10 for x in diffs)} of {len(keys)} differ by more than 10%.", "",
            "The replays:", ""]
    for name in sorted({k[0] for k in keys}):
        for label, s in (("before", sa[name]), ("after", sb[name])):
            out.append(f"- {label}, `{name}`: commit {s.get('commit', '')[:10]}, {s.get('date', '')}, "
                       f"{cpu(s)}, load {s.get('env', {}).get('loadavg', '')}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
