#!/usr/bin/env bash
# The DLRM training's memory against its shards (issue 37: peak memory per
# rank reported and within 1.2x of shards + state + buffers). `gradsync
# train --model dlrm --json` reports every rank's peak resident memory
# (VmHWM since its lookup calibration's buffers were freed), its resident
# memory before its shards and model were made (the process, MPI and the
# plan: the base) and its shards' weights and row-wise Adagrad state as the
# planner prices them; what the training adds is the peak over the base,
# and the rest over the shards is the MLPs, the exchange's and the
# batches' buffers. This runs Kaggle's tables at SCALES on 1 to 8 ranks
# (memory does not depend on the cores: 8 ranks time-share the 2 here),
# `--sharding auto` (tw on 1), STEPS steps of a per-rank batch of 1024 and
# a held-out evaluation. Writes $BENCH_OUT/dlrm_memory.{jsonl,md}.
#
# Usage: bench/embed/dlrm_memory.sh [SCALES] [STEPS]
#   defaults: "0.01 0.1 0.3", 5 steps.  BENCH_QUICK=1: scale 0.01, 2 steps.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
scales=${1:-0.01 0.1 0.3}
steps=${2:-5}
[ "$BENCH_QUICK" = 1 ] && scales=0.01 steps=2
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$BENCH_OUT/dlrm_memory.jsonl
: >"$out"
for scale in $scales; do
  for cfg in 1:tw 2:auto 4:auto 8:auto; do
    n=${cfg%%:*} sh=${cfg#*:}
    echo "== kaggle:$scale, $n rank(s), --sharding $sh ($(date +%T))" >&2
    "$gs" run -np "$n" --oversubscribe -- "$gs" train --model dlrm --tables "kaggle:$scale" \
      --sharding "$sh" --epochs 1 --steps "$steps" --batch 1024 --eval 4096 --json >"$out.run"
    python3 - "$out.run" "$scale" "$n" "$sh" >>"$out" <<'PY'
import json, sys
f, scale, n, sh = sys.argv[1:]
for line in open(f):
    if line.startswith("{"):
        row = json.loads(line)
        if "epoch" in row:
            row.update(bench_scale=float(scale), bench_ranks=int(n), bench_sharding=sh)
            print(json.dumps(row))
PY
    rm -f "$out.run"
  done
done
cmd="$(bench_quote "$gs" run -np N --oversubscribe -- "$gs" train --model dlrm \
  --tables kaggle:SCALE --sharding S --epochs 1 --steps "$steps" --batch 1024 --eval 4096 --json)"
bench_stamp "$out" "$cmd"
python3 - "$out" <<'PY' >"$BENCH_OUT/dlrm_memory.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
rows = [r for r in rows if "bench_ranks" in r]
MB = 1e6
print("# DLRM: the training's memory per rank against its shards\n")
print("`gradsync train --model dlrm --tables kaggle:SCALE --sharding S` on N ranks, every "
      "rank's figures from its `--json` epoch line: peak (VmHWM since the lookup "
      "calibration's buffers were freed), base (resident before its shards and model were "
      "made: the process, MPI, the plan), shards (their weights and row-wise Adagrad state "
      "as the planner prices them). Ratio: (peak - base) / shards, what the training adds "
      "to the process over what its shards need; the rest is the MLPs, the exchange's and "
      "the batches' buffers. The issue's bound: 1.2.\n")
print("| tables | ranks | sharding | shards MB (least-most) | base MB (most) | peak MB (most) "
      "| ratio, worst rank | ratio, every rank |")
print("| --- | ---: | --- | --- | ---: | ---: | ---: | --- |")
worst = []
for r in rows:
    P = r["bench_ranks"]
    pk, bs, sm = r["rank_peak_rss_bytes"], r["rank_base_rss_bytes"], r["rank_shard_mem_bytes"]
    ratio = [(pk[i] - bs[i]) / sm[i] for i in range(P) if sm[i] > 0]
    worst.append(max(ratio))
    print(f"| kaggle:{r['bench_scale']:g} | {P} | {r['bench_sharding']} | "
          f"{min(sm) / MB:.1f}-{max(sm) / MB:.1f} | {max(bs) / MB:.1f} | {max(pk) / MB:.1f} | "
          f"{max(ratio):.3f} | {' '.join(f'{x:.2f}' for x in ratio)} |")
big = [w for w, r in zip(worst, rows) if min(r["rank_shard_mem_bytes"]) >= 20 * MB]
print(f"\nWorst rank's ratio: {max(worst):.3f} over every run; {max(big):.3f} over the runs "
      "whose every rank holds 20 MB of shards or more (where a few MB of buffers are not "
      "most of it)." if big else f"\nWorst rank's ratio: {max(worst):.3f}.")
PY
cat "$BENCH_OUT/dlrm_memory.md"
