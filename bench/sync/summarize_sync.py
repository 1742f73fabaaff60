"""Turns bench/sync/sync_table.sh's JSON lines into bench/results/sync.md."""
import json
import sys

path, epochs, steps, slow = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rows = [json.loads(l) for l in open(path) if l.startswith('{"label"')]
print("# Synchronization protocols: time and accuracy\n")
print(f"CNN on Fashion-MNIST, 4 workers with batch 64 each, one rank per emulated node at 1 Gbit/s "
      f"(`gradsync run --net 1gbit`); the PS modes add 2 server ranks on nodes of their own. "
      f"Sample budget cut to {epochs} epochs x {steps} steps per worker "
      f"({epochs * steps * 4 * 64} samples), SGD lr 0.05 momentum 0.9, the same seed everywhere. "
      f"Straggler: `--straggler {slow}` (rank 1 computes 2x slower over the middle half of the steps). "
      "Time is the trainer's train_s (epochs without start-up); test accuracy is on the full "
      "10,000-image test set after the last epoch. One run per cell, none picked: the machine "
      "(2 cores) was shared with 7 other engineers' builds and tests while this ran, so times "
      "carry that noise.\n")
base = {}
for r in rows:
    if r.get("label") == "BSP, engine" and "result" in r:
        base[r["straggler"]] = r["result"]["summary"]["train_s"]
print("| mode | straggler | time s | vs BSP (engine), same straggler | test accuracy | steps BSP/ASP (worker 0) |")
print("|---|---|---:|---:|---:|---|")
for r in rows:
    st = "yes" if r["straggler"] else "no"
    if "result" not in r:
        print(f"| {r['label']} | {st} | failed | | | |")
        continue
    s = r["result"]["summary"]
    b = base.get(r["straggler"])
    ratio = f"{b / s['train_s']:.2f}x faster" if b else "-"
    mix = f"{s['bsp_steps']}/{s['asp_steps']}" if "asp_steps" in s else "-"
    print(f"| {r['label']} | {st} | {s['train_s']:.1f} | {ratio} | {100 * s['test_accuracy']:.2f}% | {mix} |")
