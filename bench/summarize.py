#!/usr/bin/env python3
"""Turns `gradsync bench --json` output files into a Markdown table: per size,
MPI's time, gradsync's own choice (auto), the fastest gradsync algorithm, and
the ratios the performance goals are stated in; where the rows carry
cpu_us (the busiest rank's CPU time per call), also each side's CPU time as a
share of its call's time."""
import json
import sys


def load(path):
    env, model, rows = None, None, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            obj = json.loads(line)
            if "stamp" in obj:
                continue
            if "env" in obj:
                env = obj["env"]
            elif "cost_model" in obj:
                model = obj
            else:
                rows.append(obj)
    return env, model, rows


def share(row):
    """CPU time per call as a percentage of the call's (median) time."""
    t = row["time_us"]
    return f"{100 * row['cpu_us'] / t:.0f}%" if t > 0 else "-"


def main(paths):
    for path in paths:
        env, model, rows = load(path)
        if not rows:
            continue
        ranks, nodes = rows[0]["ranks"], rows[0]["nodes"]
        print(f"### {path.split('/')[-1]}: {ranks} ranks on {nodes} node(s)\n")
        if env:
            print(f"{env.get('cpu', '?')}, {env.get('cores', '?')} cores, "
                  f"{env.get('mpi', '?')[:60]}\n")
        cpu = all("cpu_us" in r for r in rows)
        print("| bytes | mpi µs | auto (choice) µs | auto busbw GB/s | "
              "best own algo | best µs | auto vs mpi | auto / best |"
              + (" mpi cpu | auto cpu |" if cpu else ""))
        print("|---:|---:|---:|---:|---|---:|---:|---:|" + ("---:|---:|" if cpu else ""))
        sizes = sorted({r["bytes"] for r in rows})
        for b in sizes:
            at = {r["algo"]: r for r in rows if r["bytes"] == b}
            if "mpi" not in at or "auto" not in at:
                continue
            own = [r for a, r in at.items() if a not in ("mpi", "auto")]
            best = min(own, key=lambda r: r["time_us"]) if own else at["auto"]
            mpi, auto = at["mpi"]["time_us"], at["auto"]["time_us"]
            print(f"| {int(b)} | {mpi:.0f} | {auto:.0f} ({at['auto']['chosen']}) | "
                  f"{at['auto']['busbw_GBps']:.4f} | {best['algo']} | "
                  f"{best['time_us']:.0f} | {mpi / auto:.2f}x | "
                  f"{auto / best['time_us']:.2f} |"
                  + (f" {share(at['mpi'])} | {share(at['auto'])} |" if cpu else ""))
        if cpu:
            print("\nCPU: the busiest rank's CPU time (user + system, every thread) per "
                  "call, as a share of the call's time; MPI's own collective polls at "
                  "full speed while it waits.")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
