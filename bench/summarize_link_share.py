#!/usr/bin/env python3
"""Summarizes bench/link_share.sh: per cluster and size, the link's ceiling
(busbw of plain MPI_Sendrecv of the bus's bytes, every rank at once) and each
all-reduce's share of it (its busbw over the link's, i.e. the link's time
over its own, in the same run), as the median over the rounds with the
range. Usage: summarize_link_share.py FILE.jsonl...  Markdown on stdout."""
import json
import statistics
import sys

WIRE_GBPS = 0.125  # 1 Gbit/s in GB/s
ORDER = ["mpi", "auto", "ring", "rd", "rabenseifner", "hier"]


def size_name(b):
    for unit, div in (("MB", 1 << 20), ("kB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


def cell(values, pct=True):
    med = statistics.median(values)
    if pct:
        s = f"{100 * med:.0f}%"
        if len(values) > 1:
            s += f" ({100 * min(values):.0f}–{100 * max(values):.0f})"
    else:
        s = f"{med:.4f}"
        if len(values) > 1:
            s += f" ({min(values):.4f}–{max(values):.4f})"
    return s


def summarize(path):
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
    print(f"### {nodes} nodes at 1 Gbit/s ({ranks} ranks, {len(rounds)} rounds): "
          f"`{path.split('/')[-1]}`\n")
    algos = [a for a in ORDER if any(r["algo"] == a for r in rows)]
    head = ["bytes", "link busbw GB/s", "link / 1 Gbit/s"] + [
        f"{a} share" for a in algos] + ["auto chose"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join(["---:"] * (len(head) - 1) + ["---"]) + "|")
    worst_auto, med_auto = [], []
    for b in sorted({r["bytes"] for r in rows}):
        at = [r for r in rows if r["bytes"] == b]
        link = [r["busbw_GBps"] for r in at if r["algo"] == "link"]
        line = [size_name(int(b)), cell(link, pct=False),
                f"{100 * statistics.median(link) / WIRE_GBPS:.0f}%"]
        for a in algos:
            shares = [r["link_share"] for r in at if r["algo"] == a]
            line.append(cell(shares) if shares else "")
            if a == "auto" and shares:
                worst_auto.append(min(shares))
                med_auto.append(statistics.median(shares))
        chosen = sorted({r["chosen"][5:-1] for r in at if r["algo"] == "auto"})
        line.append(", ".join(chosen))
        print("| " + " | ".join(line) + " |")
    print()
    if med_auto:
        print(f"auto's median share over the sizes: {100 * min(med_auto):.0f}% to "
              f"{100 * max(med_auto):.0f}%; its lowest single round: "
              f"{100 * min(worst_auto):.0f}%.\n")


def main():
    print("# The all-reduce's share of the link\n")
    print("`gradsync bench --op allreduce --link` on `gradsync run -np N --net 1gbit`: "
          "the **link** row sends the all-reduce's bus bytes (2(p-1)/p of the vector) "
          "from every rank to the next at once with plain `MPI_Sendrecv` (no "
          "reduction, nothing of gradsync's), the ceiling any all-reduce's bus "
          "bandwidth can reach on this network and host. Each algorithm's **share** "
          "is its busbw over the link's in the same run (the link's time over its "
          "own): median over the rounds, (lowest–highest). `link / 1 Gbit/s` is "
          "the ceiling's median against the shaper's rate: below it, the host's 2 "
          "cores carrying every node's traffic through the kernel (veth, bridge, "
          "tbf, TCP) are the limit, not the shaper. Absolute times on this machine "
          "vary from run to run; the rounds show by how much.\n")
    for path in sys.argv[1:]:
        summarize(path)


if __name__ == "__main__":
    main()
