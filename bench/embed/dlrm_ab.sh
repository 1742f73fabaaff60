#!/usr/bin/env bash
# DLRM training at this commit against the same training at BASE (an
# earlier commit, built here from a clean worktree of it), in the same
# rounds: the measure of a change to the DLRM step that has no switch of
# its own (its first use: the pooled all-to-all run under the bottom MLP
# and the dp lookups at 14d2764 against BASE 44b6c78, 2026-12-06, in
# bench/results/dlrm_forward_overlap*.md; no gain, not kept). Configs: 2
# ranks (a core each) on 2 emulated nodes at 100 Mbit/s, where the link is
# the bottleneck, and 4 on 4 nodes at 1 Gbit/s, where this 2-core host's
# CPU is; Kaggle's tables at 1/100 of their rows, every table whole on a
# rank (tw) and the planner's plan (auto); the default MLPs (13-128-64-16 /
# 128-64-1) and the DLRM reference's Kaggle MLPs (13-512-256-64-16 /
# 512-256-1). ROUNDS rounds, the order of the two builds alternating.
# Writes $BENCH_OUT/dlrm_ab.{jsonl,md}. Needs root (--net).
#
# Usage: bench/embed/dlrm_ab.sh BASE [ROUNDS] [STEPS] [CONFIGS]
#   defaults: 3 rounds, 40 steps, CONFIGS "2:100mbit 4:1gbit".
#   BENCH_QUICK=1: 1 round, 10 steps, 2 nodes at 100 Mbit/s.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
[ $# -ge 1 ] || { echo "usage: $0 BASE [ROUNDS] [STEPS] [CONFIGS]" >&2; exit 2; }
bench_init "$0" "$@"
base=$(git rev-parse --verify "$1^{commit}") || { echo "bench: $1: no such commit" >&2; exit 2; }
rounds=${2:-3}
steps=${3:-40}
configs=${4:-2:100mbit 4:1gbit}
[ "$BENCH_QUICK" = 1 ] && rounds=1 steps=10 configs=2:100mbit
bench_build gradsync_cli
gs=$(realpath "$BENCH_BUILD/gradsync")
tmp=$(mktemp -d)
cleanup() {
  git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
echo "== building BASE ${base:0:7} in $tmp/base ($(date +%T))" >&2
git worktree add --detach "$tmp/base" "$base" >/dev/null 2>&1
cmake -S "$tmp/base" -B "$tmp/base/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/base/build" -j"$(nproc)" --target gradsync_cli >/dev/null
gb=$tmp/base/build/gradsync
out=$BENCH_OUT/dlrm_ab.jsonl
: >"$out"
for ((r = 1; r <= rounds; r++)); do
  builds=(head base)
  ((r % 2 == 0)) && builds=(base head)
  for cfg in $configs; do
    n=${cfg%%:*} net=${cfg#*:}
    for plan in tw auto; do
      for mlp in default reference; do
        extra=(--sharding "$plan")
        [ "$mlp" = reference ] && extra+=(--bottom-mlp 13-512-256-64-16 --top-mlp 512-256-1)
        for b in "${builds[@]}"; do
          bin=$gs
          [ "$b" = base ] && bin=$gb
          echo "== round $r/$rounds: $n nodes at $net, $plan, $mlp MLPs, $b ($(date +%T))" >&2
          "$gs" run -np "$n" --net "$net" -- "$bin" train --model dlrm --tables kaggle:0.01 \
            --epochs 1 --steps "$steps" --global-batch 2048 --eval 2048 --json "${extra[@]}" |
            grep '^{"epoch"' |
            bench_tag_json bench_build "$b" bench_nodes "$n" bench_net "$net" bench_plan "$plan" \
              bench_mlp "$mlp" bench_round "$r" >>"$out"
        done
      done
    done
  done
done
cmd="$(bench_quote "$gs" run -np N --net NET -- GRADSYNC train --model dlrm --tables kaggle:0.01 \
  --epochs 1 --steps "$steps" --global-batch 2048 --eval 2048 --json --sharding PLAN) \
[--bottom-mlp 13-512-256-64-16 --top-mlp 512-256-1], GRADSYNC this commit's and BASE ${base}'s"
bench_stamp "$out" "$cmd"
python3 - "$out" "$steps" "$base" <<'PY' >"$BENCH_OUT/dlrm_ab.md"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
rows = [r for r in rows if "bench_build" in r]
steps, base = sys.argv[2], sys.argv[3]
print("# DLRM training: this commit against an earlier one, in the same rounds\n")
print(f"`gradsync train --model dlrm --tables kaggle:0.01 --sharding tw|auto`, {steps} steps at a "
      f"global batch of 2048, built at this commit (**head**) and at BASE `{base[:7]}` "
      f"(**base**), each round running both, the order alternating "
      f"(`bench/embed/dlrm_ab.sh`). MLPs: **default** 13-128-64-16 / 128-64-1, **reference** "
      f"the DLRM reference's Kaggle 13-512-256-64-16 / 512-256-1. samples/s over the epoch "
      f"(evaluation excluded); `pooled ms` rank 0's wait a step in the pooled vectors' "
      f"all-to-all (medians over the rounds); `mlp ms` its MLPs' compute a step. Absolute "
      f"times on this shared 2-core host vary from run to run: the per-round ratios show by "
      f"how much.\n")
print("| nodes | link | plan | MLPs | samples/s head (rounds) | samples/s base (rounds) | "
      "head / base by round | pooled ms head / base | mlp ms head / base |")
print("|---:|---|---|---|---|---|---|---|---|")
lines = []
keys = dict.fromkeys((r["bench_nodes"], r["bench_net"], r["bench_plan"], r["bench_mlp"])
                     for r in rows)
for key in keys:
    by = {(r["bench_build"], r["bench_round"]): r for r in rows
          if (r["bench_nodes"], r["bench_net"], r["bench_plan"], r["bench_mlp"]) == key}
    rounds = sorted({k[1] for k in by if ("head", k[1]) in by and ("base", k[1]) in by}, key=int)
    if not rounds:
        continue
    sh = [by[("head", k)]["samples_per_s"] for k in rounds]
    sb = [by[("base", k)]["samples_per_s"] for k in rounds]
    ratios = [h / b for h, b in zip(sh, sb)]
    med = lambda b, f: statistics.median(by[(b, k)][f] for k in rounds)
    f = lambda xs: ", ".join(f"{x:,.0f}" for x in xs)
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {f(sh)} | {f(sb)} | "
          f"{', '.join(f'{x:.3f}x' for x in ratios)} | {med('head', 'pooled_ms'):.2f} / "
          f"{med('base', 'pooled_ms'):.2f} | {med('head', 'mlp_ms'):.2f} / "
          f"{med('base', 'mlp_ms'):.2f} |")
    lines.append(f"- {key[0]} nodes at {key[1]}, {key[2]}, {key[3]} MLPs: head "
                 f"{statistics.median(ratios):.3f}x base's samples/s at the median "
                 f"({min(ratios):.3f}-{max(ratios):.3f}x)")
print()
print("\n".join(lines))
PY
bench_stamp "$BENCH_OUT/dlrm_ab.md" "bench/embed/dlrm_ab.sh $*"
cat "$BENCH_OUT/dlrm_ab.md"
