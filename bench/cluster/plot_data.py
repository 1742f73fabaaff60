#!/usr/bin/env python3
"""Turns `gradsync cluster simulate --trace-out` files into gnuplot's data
files for bench/cluster/cluster_plots.gp.

Usage: plot_data.py OUTDIR NODES POLICY GANTT_TRACE JCT_TRACE...
  OUTDIR/gantt_POLICY.dat   node, start (h), end (h), job: one workload's partitions
  OUTDIR/util_POLICY.dat    time (h), allocated share, share outside restarts
  OUTDIR/jct_POLICY.dat     JCT (s), cumulative fraction, over every JCT_TRACE
"""
import sys


def rows(path, kind):
    with open(path) as f:
        for line in f:
            if line.startswith(kind + ","):
                yield line.rstrip("\n").split(",")


def main():
    out, nodes, policy, gantt = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    with open(f"{out}/gantt_{policy}.dat", "w") as f:
        for r in rows(gantt, "node"):
            f.write(f"{r[1]} {float(r[3]) / 3600:.5f} {float(r[4]) / 3600:.5f} {r[2]}\n")
    with open(f"{out}/util_{policy}.dat", "w") as f:
        for r in rows(gantt, "util"):
            f.write(f"{float(r[1]) / 3600:.5f} {int(r[2]) / nodes:.4f} {int(r[3]) / nodes:.4f}\n")
    jct = sorted(float(r[6]) for path in sys.argv[5:] for r in rows(path, "job"))
    with open(f"{out}/jct_{policy}.dat", "w") as f:
        for i, v in enumerate(jct):
            f.write(f"{v:.1f} {(i + 1) / len(jct):.5f}\n")


if __name__ == "__main__":
    main()
