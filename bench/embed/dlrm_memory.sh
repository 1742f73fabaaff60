#!/usr/bin/env bash
# The DLRM training's memory against what it holds (issue 37: peak memory
# per rank reported and within 1.2x of shards + state + buffers). `gradsync
# train --model dlrm --json` reports every rank's peak resident memory
# (VmHWM since its lookup calibration's buffers were freed), its resident
# memory before its shards and model were made (the process, MPI and the
# plan: the base), the most its allocator held over what it held then
# (shards, state, MLPs, buffers: gs_mem_peak) and its shards' weights and
# row-wise Adagrad state as the planner prices them; what the training adds
# is the peak over the base. This runs Kaggle's tables at SCALES on 1 to 8 ranks
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
print("# DLRM: the training's memory per rank against what it holds\n")
print("`gradsync train --model dlrm --tables kaggle:SCALE --sharding S` on N ranks, every "
      "rank's figures from its `--json` epoch line: peak (VmHWM since the lookup "
      "calibration's buffers were freed), base (resident before its shards and model were "
      "made: the process, MPI, the plan), allocated (the most the library's allocator held "
      "over what it held at the base: shards, their state, the MLPs and every buffer; "
      "gs_mem_peak, Redis's used_memory), shards (their weights and row-wise Adagrad state "
      "as the planner prices them). Ratio: (peak - base) / allocated, what the training "
      "added to the process over what it holds (the issue's bound: 1.2; below 1 where "
      "allocated pages were never touched); beside it the same over the shards alone, which "
      "the buffers (about 20 MB a rank at a batch of 1024) and MPI's own dominate on a rank "
      "with a few MB of shards.\n")
print("| tables | ranks | sharding | shards MB (least-most) | allocated MB (least-most) "
      "| base MB (most) | peak MB (most) | ratio, worst rank | every rank | over shards, worst |")
print("| --- | ---: | --- | --- | --- | ---: | ---: | ---: | --- | ---: |")
worst = []
for r in rows:
    P = r["bench_ranks"]
    pk, bs = r["rank_peak_rss_bytes"], r["rank_base_rss_bytes"]
    al, sm = r["rank_alloc_bytes"], r["rank_shard_mem_bytes"]
    ratio = [(pk[i] - bs[i]) / al[i] for i in range(P) if al[i] > 0]
    over_sh = [(pk[i] - bs[i]) / sm[i] for i in range(P) if sm[i] > 0]
    worst.append(max(ratio))
    print(f"| kaggle:{r['bench_scale']:g} | {P} | {r['bench_sharding']} | "
          f"{min(sm) / MB:.1f}-{max(sm) / MB:.1f} | {min(al) / MB:.1f}-{max(al) / MB:.1f} | "
          f"{max(bs) / MB:.1f} | {max(pk) / MB:.1f} | {max(ratio):.3f} | "
          f"{' '.join(f'{x:.2f}' for x in ratio)} | {max(over_sh):.2f} |")
print(f"\nWorst rank's ratio over every run: {max(worst):.3f} (the bound 1.2: "
      f"{'met' if max(worst) <= 1.2 else 'not met'}).")
PY
bench_stamp "$BENCH_OUT/dlrm_memory.md" "$cmd"
cat "$BENCH_OUT/dlrm_memory.md"
