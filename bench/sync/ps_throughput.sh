#!/usr/bin/env bash
# Parameter servers' push/pull throughput per worker against the link rate
# and against gradsync's all-reduce of the same bytes, measured in the same
# run (bench/sync/ps_bench.c). 4 workers on emulated 1 Gbit/s nodes (one
# rank per node), 1, 2 and 4 servers on nodes of their own, BSP, ASP and SSP:3, a
# CNN-sized model (1.66 M floats, 6.6 MB). Writes bench/results/
# sync_ps_throughput.jsonl and .md, stamped (bench/lib.sh). Needs root.
#
# Usage: bench/sync/ps_throughput.sh [BUILD_DIR]
#   BENCH_QUICK=1: 100 K floats, 3 steps, 1 server.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
build=${1:-$BENCH_BUILD}
BENCH_BUILD=$build
floats=1660000 steps=10 servers=(1 2 4)
if [ "$BENCH_QUICK" = 1 ]; then floats=100000 steps=3 servers=(1); fi
bench_build gradsync_cli ps_bench
gs="$build/gradsync"
out=$BENCH_OUT/sync_ps_throughput.jsonl
: > "$out.tmp"
cmds=()
for s in "${servers[@]}"; do
  for sync in bsp asp ssp:3; do
    argv=(env PS_SERVERS="$s" "$gs" run -np $((4 + s)) --net 1gbit -- "$build/tests/ps/ps_bench"
          "$sync" "$floats" "$steps")
    cmds+=("$(bench_quote "${argv[@]}")")
    echo "== $sync, $s servers ($(date +%T))" >&2
    "${argv[@]}" | grep '^{' >> "$out.tmp"
  done
done
mv "$out.tmp" "$out"
bench_stamp "$out" "$(IFS=';'; echo "${cmds[*]}")"
md=$BENCH_OUT/sync_ps_throughput.md
python3 - "$out" > "$md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"sync"')]
link = 0.125  # GB/s of a 1 Gbit/s link
print("# Parameter servers: push/pull throughput per worker\n")
print("4 workers and S servers, one rank per emulated node at 1 Gbit/s (0.125 GB/s each way),")
print("a 6.6 MB model (the CNN's 1.66 M floats) pushed and pulled whole every step; the peer is")
print("gradsync's all-reduce of the same buffer among the same 4 workers, measured in the same run.")
print("BSP rounds and asynchronous (ASP, SSP) pushes are pipelined by chunk (docs/SYNC.md); 4 + S")
print("ranks share the machine's 2 cores.\n")
print("| sync | servers | step s | push+pull GB/s per worker | of the worker's link (2 x 0.125) | of the servers' bound (2 x 0.125 x min(1, S/W)) | all-reduce step s | PS step / all-reduce step |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    g = r['ps_pushpull_gbs_per_worker']
    bound = 2 * link * min(1.0, r['servers'] / r['workers'])
    print(f"| {r['sync']} | {r['servers']} | {r['ps_step_s']:.4f} | {g:.4f} | "
          f"{g / (2 * link) * 100:.0f}% | {g / bound * 100:.0f}% | {r['allreduce_step_s']:.4f} | "
          f"{r['ps_step_over_allreduce']:.2f}x |")
print("\nA server's link carries every worker's push and pull of its shard: with S servers and W")
print("workers, a worker's share is at most S/W of the link each way (S = W: the full link).")
PY
bench_stamp "$md" "$(IFS=';'; echo "${cmds[*]}")"
cat "$md"
