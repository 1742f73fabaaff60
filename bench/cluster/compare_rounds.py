#!/usr/bin/env python3
"""A real run's policy rounds beside its simulation's, job by job.

Reads two round logs (`cluster serve --round-log`, timed from the trace's
start by bench/cluster/real_trace.sh as cluster_real_rounds.POLICY.jsonl,
and `cluster simulate --round-log`), and prints, for every job, the sizes
the policy answered over time in each (a change of answer per entry,
`t:size`), and the first place where the two part: the first job whose
k-th change of answer differs in size, or comes more than TOL seconds
apart; and the answers each took back (a job's answer a -> b -> a within
WINDOW seconds: a stop and a restart for nothing). The answers, not the partitions: a grow that waits for nodes being
given back is an answer before it is a partition.

Usage: compare_rounds.py REAL.jsonl SIM.jsonl [--tol S] [--window S] [--markdown]
"""
import argparse
import json
import sys


def answers(path):
    """{job name: [(t, size), ...]}, one entry per change of answer, and
    each job's progress and speed as the policy saw them at each change."""
    out, seen = {}, {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"compare_rounds: {path}:{n}: not JSON: {e}")
            if "error" in r:
                continue
            for j in r.get("jobs", []):
                name = j.get("name", str(j.get("id")))
                if seen.get(name) == j["size"]:
                    continue
                seen[name] = j["size"]
                out.setdefault(name, []).append((r["t"], j["size"], j.get("progress", -1)))
    return out


def taken_back(ans, window):
    """Answers taken back: a job's answer going a -> b -> a, the second
    change within `window` seconds of the first (a stop and a restart, or a
    grow given and withdrawn, for nothing)."""
    out = []
    for name, s in ans.items():
        for k in range(2, len(s)):
            if s[k][1] == s[k - 2][1] and s[k][0] - s[k - 1][0] <= window:
                out.append((s[k - 1][0], name, s[k - 2][1], s[k - 1][1], s[k][0] - s[k - 1][0]))
    return sorted(out)


def first_parting(real, sim, tol):
    """The earliest (t, job, what) where the answers part, or None."""
    best = None
    for name in sorted(set(real) | set(sim)):
        a, b = real.get(name, []), sim.get(name, [])
        for k in range(max(len(a), len(b))):
            if k >= len(a) or k >= len(b):
                x = a[k] if k < len(a) else b[k]
                what = (f"the real run's change {k + 1} ({x[0]:.1f}:{x[1]}) has none in the "
                        "simulation" if k < len(a) else
                        f"the simulation's change {k + 1} ({x[0]:.1f}:{x[1]}) has none in the "
                        "real run")
                cand = (x[0], name, what)
            elif a[k][1] != b[k][1] or abs(a[k][0] - b[k][0]) > tol:
                cand = (min(a[k][0], b[k][0]), name,
                        f"change {k + 1}: real {a[k][0]:.1f}:{a[k][1]} (progress "
                        f"{a[k][2]:.3f}), simulated {b[k][0]:.1f}:{b[k][1]} (progress "
                        f"{b[k][2]:.3f})")
            else:
                continue
            if best is None or cand[0] < best[0]:
                best = cand
            break
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("real")
    ap.add_argument("sim")
    ap.add_argument("--tol", type=float, default=5.0,
                    help="seconds two answers may lie apart and count as one (default 5)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--window", type=float, default=10.0,
                    help="seconds within which an answer changed back counts as taken back "
                         "(default 10)")
    a = ap.parse_args()
    real, sim = answers(a.real), answers(a.sim)
    fmt = lambda xs: " ".join(f"{t:.0f}:{s}" for t, s, _ in xs) or "-"
    if a.markdown:
        print("| job | real answers (t:size) | simulated answers (t:size) |")
        print("|---|---|---|")
        for name in sorted(set(real) | set(sim)):
            print(f"| {name} | {fmt(real.get(name, []))} | {fmt(sim.get(name, []))} |")
        print()
    else:
        for name in sorted(set(real) | set(sim)):
            print(f"{name}\n  real: {fmt(real.get(name, []))}\n  sim:  {fmt(sim.get(name, []))}")
    for label, ans in (("real", real), ("simulated", sim)):
        tb = taken_back(ans, a.window)
        print(f"Answers taken back within {a.window:g} s, {label}: {len(tb)}"
              + ("" if not tb else " (" + ", ".join(
                  f"{n} {x}->{y}->{x} at {t:.1f} s" for t, n, x, y, _ in tb[:6])
                  + (", ..." if len(tb) > 6 else "") + ")") + ".")
    p = first_parting(real, sim, a.tol)
    if p is None:
        print(f"The answers agree throughout (within {a.tol:g} s).")
    else:
        print(f"First parting at t={p[0]:.1f} s, job {p[1]}: {p[2]}.")


if __name__ == "__main__":
    main()
