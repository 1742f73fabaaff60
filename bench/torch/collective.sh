#!/usr/bin/env bash
# The all-reduce alone: gradsync.torch's allreduce_ against torch.distributed's
# gloo all_reduce in the same processes, 4 emulated nodes at 1 Gbit/s and at
# 100 Mbit/s (bench/torch/collective.py). It separates the collective from
# the training step in torch_vs_ddp.sh's comparison. Writes
# bench/results/torch_collective.jsonl (one line per size and link rate),
# stamped (bench/lib.sh). Needs root.
#   Usage: bench/torch/collective.sh [NODES]
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
n=${1:-4}
rounds=3 iters=5
[ "$BENCH_QUICK" = 1 ] && n=${1:-2} rounds=1 iters=2
bench_build gradsync_cli gradsync_python
gs=$BENCH_BUILD/gradsync
export PYTHONPATH=$(cd "$BENCH_BUILD" && pwd)/python${PYTHONPATH:+:$PYTHONPATH} # relative or absolute
out=$BENCH_OUT/torch_collective.jsonl
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cmds=()
for net in 1gbit 100mbit; do
  argv=("$gs" run -np "$n" --net "$net" -- /usr/bin/python3 bench/torch/collective.py
        --rounds "$rounds" --iters "$iters")
  cmds+=("$(bench_quote "${argv[@]}")")
  echo "== $n nodes at $net ($(date +%T))" >&2
  "${argv[@]}" | bench_tag_json net "$net" >> "$tmp"
done
mv "$tmp" "$out"
all_cmds=$(printf '%s; ' "${cmds[@]}")
bench_stamp "$out" "${all_cmds%; }"
cat "$out"
