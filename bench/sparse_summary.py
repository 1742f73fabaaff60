#!/usr/bin/env python3
"""Turns `gradsync bench --op sparse_allreduce --json` files into a Markdown
report: per run, the dense ring all-reduce measured in the same run and each
sparse exchange (selection, exchange, total), with the ratios issue 9's
targets are stated in."""
import json
import sys


def load(path):
    stamp, env, rows = None, None, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            obj = json.loads(line)
            if "stamp" in obj:
                stamp = obj["stamp"]
            elif "env" in obj:
                env = obj["env"]
            else:
                rows.append(obj)
    return stamp, env, rows


def ms(v):
    return "—" if v is None else f"{v * 1e3:.1f}"


def main(paths):
    print("# Sparse exchanges against the dense ring all-reduce\n")
    cores = (load(paths[0])[0] or {}).get("env", {}).get("cores", 0) if paths else 0
    if cores >= 8:
        print(f"Machine: {cores} cores, a core per rank. ", end="")
    else:
        print(f"Machine: {cores or '?'} cores for 8 ranks (the load average while each "
              "ran is in its section and the stamp), so absolute times carry CPU "
              "contention, the dense ring's (CPU-bound reductions) most of all. ", end="")
    print("The ratios compare calls alternated within one run. Times: median over the "
          "iterations of the slowest rank. Every result was checked (see "
          "apps/bench_sparse.c).\n")
    targets = []
    for path in paths:
        stamp, env, rows = load(path)
        if not rows:
            continue
        r0 = rows[0]
        name = path.split("/")[-1]
        load_avg = (stamp or {}).get("env", {}).get("loadavg", "?")
        print(f"## {name}: {r0['ranks']} ranks on {r0['nodes']} node(s), "
              f"{r0['compress']} (k = {r0['k']} of n = {r0['n']}), "
              f"{r0['iters']} iterations, node-local steps by "
              f"{'shared memory' if r0.get('node_local') == 'shm' else 'messages'}, "
              f"load average {load_avg}\n")
        if stamp:
            print(f"Command: `{stamp.get('command', '')}`\n")
        print("| exchange | dense ring ms | selection ms | exchange ms | total ms | "
              "exchange vs dense | total vs dense |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        by = {}
        for r in rows:
            by[r["comm"]] = r
            print(f"| {r['comm']} | {ms(r['dense_ring_s'])} | {ms(r['select_s'])} | "
                  f"{ms(r['exchange_s'])} | {ms(r['total_s'])} | "
                  f"{r['exchange_speedup_vs_dense']:.1f}x | "
                  f"{r['total_speedup_vs_dense']:.1f}x |")
        print()
        if r0["nodes"] == r0["ranks"] and "gtopk" in by:
            g = by["gtopk"]
            targets.append(
                f"- gTop-k vs dense ring all-reduce, {r0['nodes']} nodes: "
                f"{g['exchange_speedup_vs_dense']:.1f}x for the exchange, "
                f"{g['total_speedup_vs_dense']:.1f}x with the top-k selection "
                f"(target >= 30x).")
        if r0["nodes"] < r0["ranks"] and "hitopk" in by and "allgather" in by:
            h, a = by["hitopk"], by["allgather"]
            targets.append(
                f"- HiTopKComm vs flat top-k all-gather, {r0['nodes']} nodes x "
                f"{r0['ranks'] // r0['nodes']}: {a['total_s'] / h['total_s']:.2f}x "
                f"(selection and exchange for both; HiTopKComm selects inside), "
                f"density {r0['k'] / r0['n']:g}, node-local steps by "
                f"{'shared memory' if r0.get('node_local') == 'shm' else 'messages'} "
                f"(target >= 1.5x at density 0.001).")
    if targets:
        print("## Against the targets\n")
        print("\n".join(targets))


if __name__ == "__main__":
    main(sys.argv[1:])
