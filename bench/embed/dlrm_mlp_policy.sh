#!/usr/bin/env bash
# The DLRM step's MLP gradients through gradsync's engine (`--policy P`:
# each layer's all-reduce issued as the backward makes it, on the engine's
# own communicator, under the rest of the backward and the gradients'
# all-to-all) against one fused all-reduce after the backward (`--policy
# fused`, the default), in the same round: 2 ranks on 2 emulated nodes at
# 1 Gbit/s (a core each, as on real machines) and 4 ranks on 4 nodes (two
# ranks a core: this 2-core host's CPU is shared by compute and the
# emulated links). Every table whole on a rank (tw), Kaggle's tables at
# 1/100 of their rows, two MLP sizes: the Kaggle model's (13-128-64-16 /
# 128-64-1, 0.27 MB of gradients) and a larger one (13-256-128-16 /
# 512-512-256-1, 2.5 MB). ROUNDS rounds, the policies' order rotating.
# Two epochs of STEPS steps; the second is reported (the engine's warm-up
# and `--policy auto`'s trial of fused against the engine, steps 1-22, are
# in the first), with auto's choice.
# Writes $BENCH_OUT/dlrm_mlp_policy.{jsonl,md}. Needs root.
#
# Usage: bench/embed/dlrm_mlp_policy.sh [ROUNDS] [STEPS]
#   defaults: 3 rounds, 30 steps. BENCH_QUICK=1: 1 round, 12 steps.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
rounds=${1:-3}
steps=${2:-30}
[ "$BENCH_QUICK" = 1 ] && rounds=1 steps=12
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
out=$BENCH_OUT/dlrm_mlp_policy.jsonl
: >"$out"
argv=("$gs" train --model dlrm --tables kaggle:0.01 --sharding tw --epochs 2
      --steps "$steps" --global-batch 2048 --eval 4096 --json)
policies=(fused wfbp mgwfbp auto)
for ((r = 1; r <= rounds; r++)); do
  # Rotate the order so that no policy always runs first or last.
  order=("${policies[@]:r % 4}" "${policies[@]:0:r % 4}")
  for n in 2 4; do
    for mlp in kaggle large; do
      extra=()
      [ "$mlp" = large ] && extra=(--bottom-mlp 13-256-128-16 --top-mlp 512-512-256-1)
      for p in "${order[@]}"; do
        echo "== round $r/$rounds: $n nodes, $mlp MLPs, $p ($(date +%T))" >&2
        "$gs" run -np "$n" --net 1gbit -- "${argv[@]}" "${extra[@]}" --policy "$p" |
          grep '^{"epoch"' |
          bench_tag_json bench_policy "$p" bench_mlp "$mlp" bench_nodes "$n" bench_round "$r" \
            >>"$out"
      done
    done
  done
done
cmd="$(bench_quote "$gs" run -np N --net 1gbit -- "${argv[@]}") [MLPS] --policy P"
bench_stamp "$out" "$cmd"
python3 - "$out" "$steps" <<'PY' >"$BENCH_OUT/dlrm_mlp_policy.md"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
rows = [r for r in rows if "bench_policy" in r and r["epoch"] == 2]
print("# DLRM: the MLP gradients through the engine\n")
print(f"`gradsync train --model dlrm --tables kaggle:0.01 --sharding tw --policy P` on "
      f"`gradsync run -np N --net 1gbit`, two epochs of {sys.argv[2]} steps at a global batch "
      f"of 2048, the second reported: "
      f"**fused** is one all-reduce of every MLP gradient after the backward (the default); "
      f"the others hand each layer's gradient to gradsync's engine as the backward makes it "
      f"(the top MLP's first, the bottom MLP's under the gradients' all-to-all), and the "
      f"engine's plan (wfbp: a message a tensor; mgwfbp: merged by the cost model "
      f"after 5 profiled steps) runs them on its own communicator; **auto** times fused "
      f"and the engine's auto plan in turn over steps 7-22 (in the first epoch) and keeps "
      f"the faster (`chose`: its choice, and the two medians it compared). MLPs: **kaggle** "
      f"13-128-64-16 / 128-64-1, **large** 13-256-128-16 / 512-512-256-1. On 2 nodes each "
      f"rank has a core of this 2-core host; on 4, two ranks share one, with the emulated "
      f"links' kernel work. `step ms`: rank 0's median over the rounds (range); `/ fused`: "
      f"fused's step time over the policy's, per round (above 1: faster); `exposed`: rank 0's "
      f"wait for the all-reduces after the embedding updates, and in the all-to-alls (ms a "
      f"step, medians). The policies' order rotates between rounds "
      f"(`bench/embed/dlrm_mlp_policy.sh`). Absolute times on this shared host vary from run "
      f"to run.\n")
print("| nodes | MLPs | policy | step ms (range) | / fused by round | all-reduce exposed ms | "
      "all-to-all ms | AUC | chose (fused / engine ms) |")
print("|---:|---|---|---|---|---:|---:|---:|---|")
lines = []
keys = list(dict.fromkeys((r["bench_nodes"], r["bench_mlp"]) for r in rows))
for key in keys:
    by = {(r["bench_policy"], r["bench_round"]): r for r in rows
          if (r["bench_nodes"], r["bench_mlp"]) == key}
    rounds = sorted({k[1] for k in by}, key=int)
    for p in dict.fromkeys(k[0] for k in by):
        st = [by[(p, k)]["step_ms"] for k in rounds if (p, k) in by]
        ratio = [by[("fused", k)]["step_ms"] / by[(p, k)]["step_ms"] for k in rounds
                 if (p, k) in by and ("fused", k) in by]
        ar = statistics.median(by[(p, k)]["allreduce_ms"] for k in rounds if (p, k) in by)
        a2a = statistics.median(by[(p, k)]["a2a_ms"] for k in rounds if (p, k) in by)
        auc = statistics.median(by[(p, k)]["auc"] for k in rounds if (p, k) in by)
        rs = ", ".join(f"{x:.2f}x" for x in ratio) if p != "fused" else ""
        chose = ", ".join(
            f"{by[(p, k)]['mlp_chosen']} ({by[(p, k)]['mlp_fused_ms']:.1f} / "
            f"{by[(p, k)]['mlp_engine_ms']:.1f})"
            for k in rounds if (p, k) in by and "mlp_chosen" in by[(p, k)])
        print(f"| {key[0]} | {key[1]} | {p} | {statistics.median(st):.1f} "
              f"({min(st):.1f}-{max(st):.1f}) | {rs} | {ar:.1f} | {a2a:.1f} | {auc:.4f} "
              f"| {chose} |")
        if p != "fused" and ratio:
            lines.append(f"- {key[0]} nodes, {key[1]} MLPs, {p}: {min(ratio):.2f}-"
                         f"{max(ratio):.2f}x fused's speed (median {statistics.median(ratio):.2f}x)")
print()
print("\n".join(lines))
PY
bench_stamp "$BENCH_OUT/dlrm_mlp_policy.md" "bench/embed/dlrm_mlp_policy.sh $*"
cat "$BENCH_OUT/dlrm_mlp_policy.md"
