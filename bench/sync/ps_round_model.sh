#!/usr/bin/env bash
# The cost model's parameter-server round (gs_cost_ps, docs/PLANNING.md)
# against the round measured (bench/sync/ps_bench.c): BSP, one server, 1
# and 2 workers, one rank a node of the emulated 1 Gbit/s cluster, models
# of whole 256 KiB chunks and of shards whose last chunk is short (where
# the pipeline's drain is a whole chunk's answer, not the last one's).
# Writes bench/results/sync_ps_round_model.jsonl and .md, stamped
# (bench/lib.sh). Needs root.
#
# Usage: bench/sync/ps_round_model.sh [BUILD_DIR]
#   BENCH_QUICK=1: two sizes, 1 worker, 5 steps.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
build=${1:-$BENCH_BUILD}
BENCH_BUILD=$build
floats=(65536 131072 235000 262144 300000 400000 524288 1048576 2097152) steps=30 workers=(1 2)
if [ "$BENCH_QUICK" = 1 ]; then floats=(65536 235000) steps=5 workers=(1); fi
bench_build gradsync_cli ps_bench
gs="$build/gradsync"
out=$BENCH_OUT/sync_ps_round_model.jsonl
: >"$out.tmp"
cmds=()
for w in "${workers[@]}"; do
  for f in "${floats[@]}"; do
    argv=(env PS_SERVERS=1 PS_BENCH_NET=1gbit "$gs" run -np $((w + 1)) --net 1gbit --
          "$build/tests/ps/ps_bench" bsp "$f" "$steps")
    cmds+=("$(bench_quote "${argv[@]}")")
    echo "== $w worker(s), $f floats ($(date +%T))" >&2
    "${argv[@]}" | grep '^{' >>"$out.tmp"
  done
done
mv "$out.tmp" "$out"
bench_stamp "$out" "$(IFS=';'; echo "${cmds[*]}")"
md=$BENCH_OUT/sync_ps_round_model.md
python3 - "$out" >"$md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"sync"')]
Q = 262144
print("# Parameter servers: the cost model's round against the measured one\n")
print("BSP rounds of W workers and one server, one rank a node of the emulated cluster at "
      "1 Gbit/s (`gradsync run --net 1gbit`), the model pushed and pulled whole every step "
      "(bench/sync/ps_bench.c, after 3 warm-up steps). **predicted**: `gs_cost_ps` with the "
      "1gbit preset, which is what the planner and the cluster manager price a round with: "
      "2a + max(M, W M / S) b + the drain + (W M / S) g, the drain max(W, S) b times a whole "
      "256 KiB chunk when the shard is two or more chunks (the answers run a chunk behind the "
      "pushes), the shard when it is one. **last chunk's drain**: the same with the shard's "
      "last chunk as the drain, the model before. Absolute times on this shared 2-core host "
      "vary from run to run.\n")
print("| workers | MB | chunks (last KB) | measured ms | predicted ms | measured / predicted | "
      "last chunk's drain: predicted ms | measured / that |")
print("|---:|---:|---|---:|---:|---:|---:|---:|")
worst = []
for r in rows:
    M, W = r["bytes"], r["workers"]
    n = -(-int(M) // Q)
    last = M - (n - 1) * Q
    meas, pred, drain = r["ps_step_s"], r["predicted_round_s"], r["predicted_drain_s"]
    old = pred - drain + max(W, r["servers"]) * (last if n > 1 else M) * (drain /
          (max(W, r["servers"]) * (Q if n > 1 else M)))
    worst.append(meas / pred)
    print(f"| {W} | {M / 1e6:.2f} | {n} ({last / 1024:.0f}) | {meas * 1e3:.2f} | {pred * 1e3:.2f} | "
          f"{meas / pred:.2f} | {old * 1e3:.2f} | {meas / old:.2f} |")
print(f"\nmeasured / predicted from {min(worst):.2f} to {max(worst):.2f} over {len(rows)} rounds.")
PY
bench_stamp "$md" "$(IFS=';'; echo "${cmds[*]}")"
cat "$md"
