#!/usr/bin/env bash
# The DLRM step sending the next batch's ids under its backward (issue 37
# item 5; `gradsync train --model dlrm`'s default) against sending them at
# the step's start (`--no-prefetch`), in the same round: 2 ranks (a core
# each) on 2 emulated nodes at 100 Mbit/s, where the link is the
# bottleneck, and 4 ranks on 4 nodes at 1 Gbit/s, where this 2-core host's
# CPU is. Every table whole on a rank (tw), Kaggle's tables at 1/100 of
# their rows, 10 ids per bag (so the ids are a third of the bytes), ROUNDS
# rounds, the order alternating. Writes $BENCH_OUT/dlrm_prefetch.{jsonl,md}.
# Needs root.
#
# Usage: bench/embed/dlrm_prefetch.sh [ROUNDS] [STEPS]
#   defaults: 3 rounds, 30 steps. BENCH_QUICK=1: 1 round, 10 steps.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
rounds=${1:-3}
steps=${2:-30}
[ "$BENCH_QUICK" = 1 ] && rounds=1 steps=10
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
out=$BENCH_OUT/dlrm_prefetch.jsonl
: >"$out"
argv=("$gs" train --model dlrm --tables kaggle:0.01 --sharding tw --pooling 10 --epochs 1
      --steps "$steps" --global-batch 2048 --eval 2048 --json)
for ((r = 1; r <= rounds; r++)); do
  modes=(prefetch none)
  ((r % 2 == 0)) && modes=(none prefetch)
  for cfg in 2:100mbit 4:1gbit; do
    n=${cfg%%:*} net=${cfg#*:}
    for m in "${modes[@]}"; do
      echo "== round $r/$rounds: $n nodes at $net, $m ($(date +%T))" >&2
      extra=()
      [ "$m" = none ] && extra=(--no-prefetch)
      "$gs" run -np "$n" --net "$net" -- "${argv[@]}" "${extra[@]}" | grep '^{"epoch"' |
        bench_tag_json bench_mode "$m" bench_nodes "$n" bench_net "$net" bench_round "$r" >>"$out"
    done
  done
done
cmd="$(bench_quote "$gs" run -np N --net NET -- "${argv[@]}") [--no-prefetch]"
bench_stamp "$out" "$cmd"
python3 - "$out" "$steps" <<'PY' >"$BENCH_OUT/dlrm_prefetch.md"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
rows = [r for r in rows if "bench_mode" in r]
print("# DLRM: the next batch's ids under the step's backward\n")
print(f"`gradsync train --model dlrm --tables kaggle:0.01 --sharding tw --pooling 10`, "
      f"{sys.argv[2]} steps at a global batch of 2048, with the next step's ids sent under each "
      f"step's backward (the default) and without (`--no-prefetch`), in the same round, the "
      f"order alternating (`bench/embed/dlrm_prefetch.sh`). samples/s over the epoch; `a2a ms` "
      f"rank 0's wait a step in the header, id, pooled and gradient exchanges (with the "
      f"prefetch, the id exchange's wait is where the next step collects it). Absolute times "
      f"on this shared 2-core host vary from run to run.\n")
print("| nodes | link | ids KB/step | samples/s, prefetch (rounds) | samples/s, none (rounds) | "
      "prefetch / none by round | a2a ms prefetch / none (medians) |")
print("|---:|---|---:|---|---|---|---|")
lines = []
for key in dict.fromkeys((r["bench_nodes"], r["bench_net"]) for r in rows):
    by = {(r["bench_mode"], r["bench_round"]): r for r in rows
          if (r["bench_nodes"], r["bench_net"]) == key}
    rounds = sorted({k[1] for k in by}, key=int)
    sp = [by[("prefetch", k)]["samples_per_s"] for k in rounds if ("prefetch", k) in by]
    sn = [by[("none", k)]["samples_per_s"] for k in rounds if ("none", k) in by]
    ratios = [by[("prefetch", k)]["samples_per_s"] / by[("none", k)]["samples_per_s"]
              for k in rounds if ("prefetch", k) in by and ("none", k) in by]
    ap = statistics.median(by[("prefetch", k)]["a2a_ms"] for k in rounds)
    an = statistics.median(by[("none", k)]["a2a_ms"] for k in rounds)
    ids = by[("none", rounds[0])]["id_bytes"] / 1e3
    f = lambda xs: ", ".join(f"{x:,.0f}" for x in xs)
    print(f"| {key[0]} | {key[1]} | {ids:,.0f} | {f(sp)} | {f(sn)} | "
          f"{', '.join(f'{x:.3f}x' for x in ratios)} | {ap:.1f} / {an:.1f} |")
    lines.append(f"- {key[0]} nodes at {key[1]}: prefetch {min(ratios):.3f}-{max(ratios):.3f}x "
                 f"the samples/s without it")
print()
print("\n".join(lines))
PY
bench_stamp "$BENCH_OUT/dlrm_prefetch.md" "bench/embed/dlrm_prefetch.sh $*"
cat "$BENCH_OUT/dlrm_prefetch.md"
