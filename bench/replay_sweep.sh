#!/usr/bin/env bash
# Replays model profiles under every scheduling policy on emulated clusters
# at 1 Gbit/s (issue #3's benchmark) and writes bench/results/replay_*.jsonl
# and bench/results/replay.md.
#
# Compute is scaled so that it takes about as long as the gradients' ring
# all-reduce on that cluster: scale = (2(N-1)/N * bytes / 0.11 GB/s) /
# (forward + backward), rounded to two digits (0.11 GB/s is the ring's
# measured bus bandwidth there). The scale used is printed and recorded.
#
# -r ROUNDS runs the policies ROUNDS times in turn (odd rounds in reverse
# order) so that the shared machine's drifting speed does not favour the
# policies measured first; the summary takes the rounds' medians. Every file
# is stamped with the commit, command and machine (bench/lib.sh). Needs root
# (gradsync run --net).
#
# Usage: bench/replay_sweep.sh [-n NODES]... [-p PROFILE]... [-i ITERS]
#                              [-w WARMUP] [-r ROUNDS]
#   PROFILE names profiles/PROFILE.json; one in a folder (heldout/inception_v3)
#   writes its file in the same folder under the output directory
#   (bench/results/heldout/replay_inception_v3_4nodes.jsonl), outside the
#   summary of the shipped profiles.
#   BENCH_QUICK=1: GoogleNet on 4 nodes, 2 iterations after 1 warm-up.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init "$0" "$@"
gs=${GS:-$BENCH_BUILD/gradsync}
nodes=() profiles=() iters=6 warmup=5 rounds=1
if [ "$BENCH_QUICK" = 1 ]; then
  nodes=(4) profiles=(googlenet) iters=2 warmup=1
fi
while getopts "n:p:i:w:r:" o; do
  case $o in
    n) [ -n "${n_given:-}" ] || nodes=(); n_given=1; nodes+=("$OPTARG") ;;
    p) [ -n "${p_given:-}" ] || profiles=(); p_given=1; profiles+=("$OPTARG") ;;
    i) iters=$OPTARG ;;
    w) warmup=$OPTARG ;;
    r) rounds=$OPTARG ;;
    *) exit 2 ;;
  esac
done
[ ${#nodes[@]} -gt 0 ] || nodes=(4 8)
[ ${#profiles[@]} -gt 0 ] || profiles=(googlenet densenet201 resnet50 resnet152 bert_base vgg16)
[ -n "${GS:-}" ] || bench_build gradsync_cli
out=$BENCH_OUT
for n in "${nodes[@]}"; do
  for p in "${profiles[@]}"; do
    f=profiles/$p.json
    scale=$(python3 - "$f" "$n" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); n = int(sys.argv[2])
size = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2}
b = sum(t["numel"] * size.get(t.get("dtype", "f32"), 4) for t in p["tensors"])
c = p["forward_s"] + sum(t["backward_s"] for t in p["tensors"])
comm = 2 * (n - 1) / n * b / 0.11e9
print(f"{comm / c:.2g}")
PY
)
    echo "== $p on $n nodes, compute x$scale, $rounds round(s) ($(date +%T))" >&2
    argv=("$gs" run -np "$n" --net 1gbit -- "$gs" replay --profile "$f" --policy all
          --iters "$iters" --warmup "$warmup" --rounds "$rounds" --time-scale "$scale" --json)
    cmd=$(bench_quote "${argv[@]}")
    dest="$out/$(dirname "$p")/replay_$(basename "$p")_${n}nodes.jsonl"
    mkdir -p "$(dirname "$dest")"
    "${argv[@]}" > "$dest"
    bench_stamp "$dest" "$cmd"
  done
done
# The summary covers every replay file in the output directory, so that a
# run of some profiles updates their rows and keeps the others' (each file
# carries its own stamp).
all=("$out"/replay_*_*nodes.jsonl)
cmd=$(bench_quote python3 bench/summarize_replay.py "${all[@]}")
python3 bench/summarize_replay.py "${all[@]}" > "$out/replay.md"
bench_stamp "$out/replay.md" "$cmd"
cat "$out/replay.md"
