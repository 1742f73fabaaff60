#!/usr/bin/env bash
# The DLRM exchange's precision where the link is the bottleneck (issue 37:
# fp16/bf16 all-to-all <= 0.55x fp32's exchange time, AUC within 0.001 of
# fp32's). dlrm_vs_torch.sh runs 4 and 8 ranks on this 2-core host, where
# the all-to-all's wait is other ranks' compute, not bytes; here 2 ranks (a
# core each) on 2 emulated nodes (`gradsync run --net NET`), every table
# whole on a rank (tw: every sample's pooled vectors of the other rank's
# tables cross the link forward, their gradients backward), Kaggle's tables
# at SCALE of their rows, the same data and seed for every precision:
# fp32, fp16 (fp16 forward, bf16 backward, as Neo) and bf16. ROUNDS
# rounds, each running every precision once on each network, the order
# alternating between rounds; a precision's ratio is against fp32 in the
# same round. Writes $BENCH_OUT/dlrm_a2a_precision.{jsonl,md}. Needs root.
#
# Usage: bench/embed/dlrm_a2a_precision.sh [NETS] [ROUNDS] [STEPS] [GLOBAL_BATCH]
#   defaults: "1gbit 100mbit", 3 rounds, 50 steps, global batch 4096.
#   BENCH_QUICK=1: 1gbit only, 1 round, 10 steps.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
nets=${1:-1gbit 100mbit}
rounds=${2:-3}
steps=${3:-50}
G=${4:-4096}
[ "$BENCH_QUICK" = 1 ] && nets=1gbit rounds=1 steps=10
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
tables=kaggle:0.01 evaln=16384
out=$BENCH_OUT/dlrm_a2a_precision.jsonl
: >"$out"
argv=("$gs" train --model dlrm --tables "$tables" --sharding tw --epochs 1 --steps "$steps"
      --global-batch "$G" --eval "$evaln" --json)
for ((r = 1; r <= rounds; r++)); do
  precs=(fp32 fp16 bf16)
  ((r % 2 == 0)) && precs=(bf16 fp16 fp32)
  for net in $nets; do
    for p in "${precs[@]}"; do
      echo "== round $r/$rounds: $net, --a2a-precision $p ($(date +%T))" >&2
      "$gs" run -np 2 --net "$net" -- "${argv[@]}" --a2a-precision "$p" >"$out.run"
      python3 - "$out.run" "$p" "$net" "$r" >>"$out" <<'PY'
import json, sys
f, prec, net, r = sys.argv[1:]
for line in open(f):
    if line.startswith("{"):
        row = json.loads(line)
        if "epoch" in row:
            row.update(bench_precision=prec, bench_net=net, bench_round=int(r))
            print(json.dumps(row))
PY
      rm -f "$out.run"
    done
  done
done
cmd="$(bench_quote "$gs" run -np 2 --net NET -- "${argv[@]}") --a2a-precision fp32|fp16|bf16"
bench_stamp "$out" "$cmd"
python3 - "$out" "$steps" "$G" <<'PY' >"$BENCH_OUT/dlrm_a2a_precision.md"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
rows = [r for r in rows if "bench_precision" in r]
steps, G = sys.argv[2], sys.argv[3]
print("# DLRM: the all-to-all's precision where the link is the bottleneck\n")
print(f"2 ranks on 2 emulated nodes (`gradsync run -np 2 --net NET`; one rank per core of this "
      f"2-core host, so the exchange waits on the link, not on another rank's compute), "
      f"`gradsync train --model dlrm --tables kaggle:0.01 --sharding tw`, {steps} steps at a "
      f"global batch of {G}, the same data, seed and plan for every precision. **forward**: "
      f"rank 0's time a step in the pooled vectors' all-to-all, 16-bit conversions included "
      f"(`pooled_ms`): the exchange the precision applies to, alone on the link. **backward**: "
      f"the gradients' all-to-all (`grads_ms`), which also waits for the MLPs' fused all-reduce "
      f"(fp32 whatever the precision) queued ahead of it on the progress thread. **all**: every "
      f"all-to-all of the step, the ids' 32-bit exchange included (`a2a_ms`). `pooled + grad KB`: "
      f"what rank 0 sent in the two a step. Ratios are against fp32 in the same round "
      f"(`bench/embed/dlrm_a2a_precision.sh`); absolute times on this shared host vary from run "
      f"to run.\n")
print("| network | precision | forward ms/step by round | pooled + grad KB/step | forward / fp32 "
      "by round | median forward / fp32 | backward / fp32 (median) | all / fp32 (median) | "
      "samples/s (median) | AUC (median) | AUC - fp32's |")
print("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
summary = []
for net in dict.fromkeys(r["bench_net"] for r in rows):
    by = {(r["bench_precision"], r["bench_round"]): r for r in rows if r["bench_net"] == net}
    rounds = sorted({k[1] for k in by})
    def ratios(p, key):
        return [by[(p, k)][key] / by[("fp32", k)][key] for k in rounds
                if (p, k) in by and ("fp32", k) in by]
    for p in ("fp32", "fp16", "bf16"):
        rs = [by[(p, k)] for k in rounds if (p, k) in by]
        if not rs:
            continue
        fwd, bwd, whole = ratios(p, "pooled_ms"), ratios(p, "grads_ms"), ratios(p, "a2a_ms")
        auc = statistics.median(r["auc"] for r in rs)
        auc32 = statistics.median(by[("fp32", k)]["auc"] for k in rounds if ("fp32", k) in by)
        kb = (rs[0]["pooled_bytes"] + rs[0]["grad_bytes"]) / 1000
        times = ", ".join("%.1f" % r["pooled_ms"] for r in rs)
        print(f"| {net} | {p} | {times} | {kb:.0f} | "
              f"{', '.join(f'{x:.2f}x' for x in fwd)} | {statistics.median(fwd):.2f}x | "
              f"{statistics.median(bwd):.2f}x | {statistics.median(whole):.2f}x | "
              f"{statistics.median(r['samples_per_s'] for r in rs):,.0f} | {auc:.4f} | "
              f"{auc - auc32:+.4f} |")
        if p != "fp32":
            summary.append((net, p, statistics.median(fwd), max(fwd), statistics.median(bwd),
                            auc - auc32))
print()
for net, p, med, worst, bwd, dauc in summary:
    print(f"- {net}, {p}: the forward exchange {med:.2f}x fp32's (worst round {worst:.2f}x; "
          f"target <= 0.55x: {'met' if worst <= 0.55 else 'not met'}), the backward one "
          f"{bwd:.2f}x with the fused all-reduce; AUC {dauc:+.4f} from fp32's (target within "
          f"0.001: {'met' if abs(dauc) <= 0.001 else 'not met'})")
PY
bench_stamp "$BENCH_OUT/dlrm_a2a_precision.md" "$cmd"
cat "$BENCH_OUT/dlrm_a2a_precision.md"
