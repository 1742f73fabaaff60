#!/usr/bin/env bash
# The main job against PyTorch DDP: gradsync train (policy auto; fp32, and
# bf16 where the CPU computes it natively) against PyTorch
# DistributedDataParallel (gloo, default buckets) on the same CNN, batch 64
# per rank, Fashion-MNIST, 4 emulated nodes at 1 Gbit/s. ROUNDS rounds, each
# running every peer once in an order that alternates between rounds, so
# that the host's drift cannot favour one (issue 42). Round k runs every
# peer with seed k (initialisation and shuffling; the peers' generators
# differ, so a seed is not the same start for both), so the accuracies
# over rounds show the spread that seeds alone make. Writes
# bench/results/train_vs_ddp.{jsonl,md}, stamped with the commit, commands
# and machine (bench/lib.sh). Needs root (--net).
#
# Usage: bench/train/train_vs_ddp.sh [--summarize JSONL] [EPOCHS] [NODES] [ROUNDS]
#   --summarize JSONL: no runs; the rows of an earlier, interrupted run of
#   this driver (its jsonl) summarised as if it had ended there.
#   BENCH_QUICK=1: 1 round of 1 epoch of at most 20 steps on 2 nodes (a
#   smoke run: the step limit skews the epoch times).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
partial=
if [ "${1:-}" = --summarize ]; then
  partial=$2
  shift 2
  [ -s "$partial" ] || { echo "train_vs_ddp: --summarize: no rows in '$partial'" >&2; exit 2; }
fi
epochs=${1:-2}
n=${2:-4}
rounds=${3:-2}
limit=()
if [ "$BENCH_QUICK" = 1 ]; then
  epochs=${1:-1} n=${2:-2} rounds=${3:-1} limit=(--max-steps 20)
fi
[ -n "${GS:-}" ] || bench_build gradsync_cli
gs=${GS:-$BENCH_BUILD/gradsync}
out=$BENCH_OUT/train_vs_ddp.jsonl
store=$(mktemp -u /tmp/gradsync-ddp-store.XXXXXX)
gs_argv=("$gs" run -np "$n" --net 1gbit -- "$gs" train --model cnn --epochs "$epochs"
         --batch 64 --lr 0.05 --warmup-epochs 0.3 --schedule cosine --policy auto
         "${limit[@]}" --json)
ddp_argv=("$gs" run -np "$n" --net 1gbit -- /usr/bin/python3 bench/train/ddp_cnn.py
          --epochs "$epochs" --batch 64 --lr 0.05 --warmup-epochs 0.3 --cosine
          "${limit[@]}" --store "$store")
peers=(gradsync ddp)
# bf16 where this CPU computes it natively (a one-step probe says).
if "$gs" train --model cnn --synthetic 64 --max-steps 1 --precision bf16 >/dev/null 2>&1; then
  peers=(gradsync gradsync_bf16 ddp)
fi
: > "$out"
[ -z "$partial" ] || { grep bench_peer "$partial" > "$out"; rounds=0; }
for ((r = 1; r <= rounds; r++)); do
  order=("${peers[@]}")
  if ((r % 2 == 0)); then
    order=()
    for ((i = ${#peers[@]} - 1; i >= 0; i--)); do order+=("${peers[i]}"); done
  fi
  for p in "${order[@]}"; do
    echo "== round $r/$rounds: $p, cnn, $n ranks, $epochs epoch(s) ($(date +%T))" >&2
    case $p in
      gradsync) "${gs_argv[@]}" --seed "$r" > "$out.run" ;;
      gradsync_bf16) "${gs_argv[@]}" --precision bf16 --seed "$r" > "$out.run" ;;
      ddp) "${ddp_argv[@]}" --seed "$r" > "$out.run"; rm -f "$store" ;;
    esac
    python3 - "$out.run" "$p" "$r" >> "$out" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        row = json.loads(line)
        row["bench_peer"], row["bench_round"] = sys.argv[2], int(sys.argv[3])
        print(json.dumps(row))
PY
    rm -f "$out.run"
  done
done
gs_cmd=$(bench_quote "${gs_argv[@]}")
ddp_cmd=$(bench_quote "${ddp_argv[@]}")
cmd="$gs_cmd [--precision bf16] --seed ROUND; $ddp_cmd --seed ROUND"
bench_stamp "$out" "$cmd"
python3 - "$out" "$n" <<'PY' > "$BENCH_OUT/train_vs_ddp.md"
import json, platform, statistics, subprocess, sys
rows = [r for r in (json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")) if "bench_peer" in r]
n = sys.argv[2]
peers = [p for p in ("gradsync", "gradsync_bf16", "ddp") if any(r["bench_peer"] == p for r in rows)]
rounds = sorted({r["bench_round"] for r in rows})
names = {"gradsync": "gradsync fp32", "gradsync_bf16": "gradsync bf16", "ddp": "DDP (gloo)"}

def run(p, k):
    """(epoch times, test accuracy, summary or peer row) of peer p in round k."""
    mine = [r for r in rows if r["bench_peer"] == p and r["bench_round"] == k]
    if p == "ddp":
        d = next(r for r in mine if r.get("peer"))
        return d["epoch_s"], d["test_accuracy"], d
    ep = [r for r in mine if "epoch" in r]
    s = next(r["summary"] for r in mine if "summary" in r)
    return [r["epoch_s"] for r in ep], ep[-1]["test_accuracy"], s

print("# The main job: gradsync vs PyTorch DDP\n")
print(f"CNN (1.66 M parameters), Fashion-MNIST, batch 64 per rank, {n} ranks on {n} emulated "
      f"nodes at 1 Gbit/s (`gradsync run --net 1gbit`), one thread per rank, SGD lr 0.05 "
      f"momentum 0.9 with 0.3 epoch of warm-up and cosine decay, the same initialisation "
      f"(Kaiming normal, zero biases). {len(rounds)} round(s); each round runs every peer once, "
      f"the order alternating between rounds (`bench/train/train_vs_ddp.sh`), round k with "
      f"seed k for every peer (initialisation and shuffling; the peers draw from different "
      f"generators, so the rounds show the spread seeds alone make). gradsync bf16 is "
      f"`--precision bf16` (convolutions and linear layers in bfloat16 on oneDNN, fp32 weights, "
      f"gradients and reductions), run where the CPU computes bf16 natively. Absolute times on "
      f"this shared 2-core host vary from run to run; the per-round ratios show by how much.\n")
print("| round | peer | epoch times s | mean epoch s | test accuracy | DDP / peer |")
print("|---:|---|---|---:|---:|---:|")
ratios = {p: [] for p in peers}
acc = {p: [] for p in peers}
means = {p: [] for p in peers}
for k in rounds:
    d_ep, _, _ = run("ddp", k)
    dmean = sum(d_ep) / len(d_ep)
    for p in peers:
        ep, a, _ = run(p, k)
        m = sum(ep) / len(ep)
        ratios[p].append(dmean / m)
        acc[p].append(a)
        means[p].append(m)
        print(f"| {k} | {names[p]} | {', '.join(f'{e:.1f}' for e in ep)} | {m:.1f} | "
              f"{100 * a:.2f}% | {dmean / m:.2f}x |")
print("\n| peer | median mean epoch s | speed against DDP (median of rounds) | lowest round | "
      "test accuracy (median) | accuracy over rounds (lowest-highest) | against DDP (median) |")
print("|---|---:|---:|---:|---:|---|---:|")
for p in peers:
    da = 100 * (statistics.median(acc[p]) - statistics.median(acc["ddp"]))
    print(f"| {names[p]} | {statistics.median(means[p]):.1f} | "
          f"{statistics.median(ratios[p]):.2f}x | {min(ratios[p]):.2f}x | "
          f"{100 * statistics.median(acc[p]):.2f}% | {100 * min(acc[p]):.2f}-"
          f"{100 * max(acc[p]):.2f}% | {da:+.2f} |")
_, _, s = run("gradsync", rounds[-1])
_, _, d = run("ddp", rounds[-1])
print(f"\ngradsync's last run: policy auto chose {s.get('chosen', '?')} "
      f"({s.get('groups', '?')} messages per step), {100 * s.get('comm_hidden', 0):.0f}% of "
      f"the communication hidden behind compute; layers on {s.get('backend', '?')}.")
cpu = subprocess.getoutput("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
load = " ".join(open("/proc/loadavg").read().split()[:3])
print(f"\nEnvironment: {platform.processor() or platform.machine()}, "
      f"{subprocess.getoutput('nproc')} cores, {cpu}, torch {d['torch']}, "
      f"{subprocess.getoutput('mpirun --version | head -1')}, load at the end {load}.")
PY
if [ -n "$partial" ]; then
  printf '\nThese rows come from an interrupted run of this driver, summarised by\n`--summarize`: the rounds above are those it completed (the stamp of the\nsummary is the commit it was summarised at; the rows record no commit of\ntheir own).\n' >> "$BENCH_OUT/train_vs_ddp.md"
fi
bench_stamp "$BENCH_OUT/train_vs_ddp.md" "$cmd"
cat "$BENCH_OUT/train_vs_ddp.md"
