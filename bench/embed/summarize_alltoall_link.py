#!/usr/bin/env python3
"""Summarizes bench/embed/alltoall_link.sh: per cluster, operation and
size, the link's ceiling (busbw of plain MPI_Sendrecv of the all-to-all's
bus bytes, every rank at once), MPI's and gradsync's share of it (their
busbw over the link's in the same run) and gradsync's speed against MPI's
(MPI's time over gradsync's), each the median over the rounds with the
range; then the issue's targets. Usage: summarize_alltoall_link.py
FILE.jsonl...  Markdown on stdout."""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from summarize_link_share import WIRE_GBPS, size_name  # noqa: E402  (bench/)


def cell(values, pct=True, fmt="{:.2f}x"):
    med = statistics.median(values)
    if pct:
        s = f"{100 * med:.0f}%"
        if len(values) > 1:
            s += f" ({100 * min(values):.0f}-{100 * max(values):.0f})"
    else:
        s = fmt.format(med)
        if len(values) > 1:
            s += " (" + fmt.format(min(values)) + "-" + fmt.format(max(values)) + ")"
    return s


def summarize(path, verdicts):
    rows = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if "op" in r and "bytes" in r:
                rows.append(r)
    if not rows:
        print(f"### {path}: no rows\n")
        return
    nodes, ranks = rows[0]["nodes"], rows[0]["ranks"]
    rounds = sorted({r.get("round", "1") for r in rows})
    for op in ("alltoallv", "alltoall"):
        at_op = [r for r in rows if r["op"] == op]
        if not at_op:
            continue
        peer = "MPI_Alltoallv" if op == "alltoallv" else "MPI_Alltoall"
        print(f"### {op}, {nodes} nodes at 1 Gbit/s ({ranks} ranks, {len(rounds)} rounds)\n")
        print(f"| bytes per rank | link busbw GB/s | link / 1 Gbit/s | {peer} share | "
              f"gradsync share | gradsync / {peer} |")
        print("|---:|---:|---:|---:|---:|---:|")
        shares, speeds = [], []
        for b in sorted({r["bytes"] for r in at_op}):
            at = [r for r in at_op if r["bytes"] == b]
            link = [r["busbw_GBps"] for r in at if r["algo"] == "link"]
            mpi = [r["link_share"] for r in at if r["algo"] == "mpi"]
            gsr = [r for r in at if r["algo"] == "auto"]
            gs_share = [r["link_share"] for r in gsr]
            sp = [r["speedup_vs_mpi"] for r in gsr]
            shares += [(b, x) for x in gs_share]
            speeds += [(b, x) for x in sp]
            print(f"| {size_name(int(b))} | {cell(link, False, '{:.4f}')} | "
                  f"{100 * statistics.median(link) / WIRE_GBPS:.0f}% | {cell(mpi)} | "
                  f"{cell(gs_share)} | {cell(sp, False)} |")
        print()
        if shares:
            lo_share = min(x for _, x in shares)
            med_share = statistics.median(x for _, x in shares)
            lo_sp = min(x for _, x in speeds)
            med_sp = statistics.median(x for _, x in speeds)
            verdicts.append(
                f"- {op}, {nodes} nodes: gradsync's share of the link {100 * lo_share:.0f}% at "
                f"its lowest, median {100 * med_share:.0f}% (target >= 90% from 1 MB: "
                f"{'met' if lo_share >= 0.9 else 'met at the median' if med_share >= 0.9 else 'not met'}); "
                f"{lo_sp:.2f}x {peer} at its lowest, median {med_sp:.2f}x (target >= 1x: "
                f"{'met' if lo_sp >= 1 else 'met at the median' if med_sp >= 1 else 'not met'})")


def main():
    print("# The all-to-all's share of the link, against MPI's\n")
    print("`gradsync bench --op alltoallv|alltoall --link` on `gradsync run -np N --net 1gbit` "
          "(one rank a node, emulated links shaped to 1 Gbit/s): the **link** row sends the "
          "all-to-all's bus bytes ((p-1)/p of a rank's buffer) from every rank to the next "
          "at once with plain `MPI_Sendrecv` (no collective, no result to check): what the "
          "link and this host's kernel carry. **share**: a collective's bus bandwidth over "
          "the link's, in the same run (the link's time over the collective's). **gradsync / "
          "MPI**: MPI's time over gradsync's (gradsync's pairwise exchange, auto's choice). "
          "alltoallv passes every block through the v interface (counts and displacements), "
          "as a DLRM step does; its peer is `MPI_Alltoallv`. Each cell: the median over the "
          "rounds (range). Every result is checked. Absolute rates vary on this shared 2-core "
          "host; the rounds' ranges show by how much.\n")
    verdicts = []
    for path in sys.argv[1:]:
        summarize(path, verdicts)
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
