#!/usr/bin/env bash
# gradsync.torch's SyncBatchNorm against plain BatchNorm on ResNet-18
# (bench/torch/syncbn.py: both copies in the same processes, trained in
# turns), on NODES emulated nodes at each rate of NETS. Writes
# $BENCH_OUT/torch_syncbn.{jsonl,md}. Needs root (--net).
#
# Usage: bench/torch/syncbn.sh [NODES]   (default 4)
#   NETS="1gbit 100mbit" (default), TURNS=12, BENCH_QUICK=1: 2 nodes, 1gbit, 2 turns.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
n=${1:-4}
read -r -a nets <<<"${NETS:-1gbit 100mbit}"
turns=${TURNS:-12}
if [ "$BENCH_QUICK" = 1 ]; then
  n=${1:-2} nets=(1gbit) turns=2
fi
bench_build gradsync_cli gradsync_python
gs=$BENCH_BUILD/gradsync
export PYTHONPATH=$(cd "$BENCH_BUILD" && pwd)/python${PYTHONPATH:+:$PYTHONPATH}
out=$BENCH_OUT/torch_syncbn.jsonl
: >"$out"
for net in "${nets[@]}"; do
  echo "== ResNet-18, plain BatchNorm and SyncBatchNorm in turns, $n nodes at $net ($(date +%T))" >&2
  "$gs" run -np "$n" --net "$net" -- /usr/bin/python3 bench/torch/syncbn.py --turns "$turns" |
    grep '^{' | bench_tag_json bench_net "$net" bench_nodes "$n" >>"$out"
done
bench_stamp "$out" "$(bench_quote "$gs" run -np "$n" --net NET -- /usr/bin/python3 bench/torch/syncbn.py --turns "$turns")"
/usr/bin/python3 - "$out" <<'PY' >"$BENCH_OUT/torch_syncbn.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and "stamp" not in l]
print("# gradsync.torch: SyncBatchNorm against plain BatchNorm (ResNet-18)\n")
print("torchvision's ResNet-18 (20 BatchNorm layers) on synthetic 32x32 images, 16 a rank and "
      "step, SGD with momentum under `DistributedOptimizer(policy=\"auto\", model=model)`, one "
      "rank per emulated node: one copy with plain BatchNorm, one converted with "
      "`gs.SyncBatchNorm.convert_sync_batchnorm`, in the same processes, trained in turns of 2 "
      "steps (the order alternating; 2 turns of warm-up left out). `/ plain`: SyncBatchNorm's "
      "images/s over plain's in the same turn. torch.nn.SyncBatchNorm, the natural peer, "
      "refuses CPU tensors in Debian's torch. Absolute rates on this shared 2-core host vary.\n")
print("| nodes | link | plain images/s (median) | SyncBatchNorm images/s | / plain, median (range) | turns |")
print("|---:|---|---:|---:|---|---:|")
for s in (r for r in rows if r.get("summary")):
    turns = sum(1 for r in rows if "ratio" in r and r["bench_net"] == s["bench_net"])
    print(f"| {s['bench_nodes']} | {s['bench_net']} | {s['plain_images_per_s']:.1f} | "
          f"{s['syncbn_images_per_s']:.1f} | {s['ratio_median']:.3f}x ({s['ratio_min']:.3f}-"
          f"{s['ratio_max']:.3f}) | {turns} |")
PY
bench_stamp "$BENCH_OUT/torch_syncbn.md" "bench/torch/syncbn.sh $*"
cat "$BENCH_OUT/torch_syncbn.md"
