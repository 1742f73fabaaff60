#!/usr/bin/env python3
"""The table of bench/sync/switch_sweep.sh: per schedule, BSP, ASP and
Sync-Switch offline at each F, with test accuracy, its difference from ASP
and BSP of the same schedule, time and speed against BSP, and the steps
each protocol ran on worker 0.

Usage: summarize_sweep.py RESULTS.jsonl EPOCHS STEPS STRAGGLER(0/1)"""
import json
import sys

SCHEDULES = {"nowarmup": "no warm-up (constant lr 0.05 from the first step)",
             "main": "the main job's (warm-up over 0.3 epochs, cosine decay)"}


def main():
    path, epochs, steps, straggler = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        sys.argv[4] == "1"
    rows = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if "stamp" not in r:
                rows.append(r)
    print(f"# Sync-Switch offline: the BSP share F against BSP and ASP ({epochs} x {steps} steps)")
    print()
    print(f"CNN on Fashion-MNIST, 4 workers with batch 64 each and 1 parameter server, one rank "
          f"per emulated 1 Gbit/s node (`gradsync run -np 5 --net 1gbit`), SGD lr 0.05 and "
          f"momentum 0.9, {epochs} epoch(s) of at most {steps} steps per worker, the same seed "
          f"everywhere"
          + (", worker 0 computing 2x slower (`--straggler 0:2`)" if straggler else "")
          + ". Time is the trainer's train_s; test accuracy is on the 10,000 test images after "
          "the last epoch. One run per cell, none picked; times on this 2-core machine vary "
          "from run to run.")
    for sched, title in SCHEDULES.items():
        mine = [r for r in rows if r["schedule"] == sched]
        if not mine:
            continue
        ok = {r["mode"]: r["result"]["summary"] for r in mine if not r.get("failed")}
        bsp, asp = ok.get("bsp"), ok.get("asp")
        print()
        print(f"## Schedule: {title}")
        print()
        print("| mode | test accuracy | vs ASP | vs BSP | time s | speed vs BSP | "
              "steps BSP/ASP (worker 0) |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for r in mine:
            if r.get("failed"):
                print(f"| {r['mode']} | failed | | | | | |")
                continue
            s = r["result"]["summary"]
            acc = s["test_accuracy"] * 100
            va = f"{acc - asp['test_accuracy'] * 100:+.2f}" if asp else "-"
            vb = f"{acc - bsp['test_accuracy'] * 100:+.2f}" if bsp else "-"
            sp = f"{bsp['train_s'] / s['train_s']:.2f}x" if bsp else "-"
            print(f"| {r['mode']} | {acc:.2f}% | {va} | {vb} | {s['train_s']:.1f} | {sp} | "
                  f"{s.get('bsp_steps', 0)}/{s.get('asp_steps', 0)} |")


if __name__ == "__main__":
    main()
