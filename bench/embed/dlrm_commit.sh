#!/usr/bin/env bash
# DLRM commits in the background against the foreground (issue 37; until
# 2026-12-05 every DLRM commit was made durable before training went on).
# `gradsync train --model dlrm --tables TABLES --sharding rw --checkpoint
# DIR --commit-every EVERY` (10 x EVERY steps) on P ranks, ROUNDS rounds, each round one run of
# each mode back to back (the order alternating): the default (background)
# and GRADSYNC_COMMIT_SYNC=1 (the foreground), the peer measured in the
# same run. Per run, from its JSON lines: the training's seconds (its
# samples over samples_per_s, which leaves the commits out) plus every
# commit's stall (commit_ms: the training the commit held up), the commits'
# median stall, the writer thread's median time and how many steps after
# its own each background commit was put in place. Writes
# $BENCH_OUT/dlrm_commit.{jsonl,md} (dlrm_commit_everyN.* for EVERY N
# other than 20).
#
# Usage: bench/embed/dlrm_commit.sh [TABLES] [RANKS] [ROUNDS] [EVERY]
#   defaults: kaggle:0.05 (57.7 MB a rank on 2 ranks), 2 ranks, 3 rounds,
#   a commit every 20 steps.
#   BENCH_QUICK=1: kaggle:0.01, 1 round.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
tables=${1:-kaggle:0.05}
ranks=${2:-2}
rounds=${3:-3}
[ "$BENCH_QUICK" = 1 ] && tables=kaggle:0.01 && rounds=1
every=${4:-20}
steps=$((10 * every))
name=dlrm_commit
[ "$every" != 20 ] && name=dlrm_commit_every$every
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$BENCH_OUT/$name.jsonl
: >"$out"
# one MODE ROUND: a run, its figures appended to $out
one() {
  local mode=$1 round=$2 o=$tmp/run.json
  rm -rf "$tmp/ck"
  if [ "$mode" = foreground ]; then export GRADSYNC_COMMIT_SYNC=1; else unset GRADSYNC_COMMIT_SYNC; fi
  "$gs" run -np "$ranks" --oversubscribe -- "$gs" train --model dlrm --tables "$tables" \
    --sharding rw --checkpoint "$tmp/ck" --commit-every "$every" --epochs 1 --steps "$steps" \
    --eval 0 --json >"$o" 2>&1 || { tail -5 "$o" >&2; exit 1; }
  unset GRADSYNC_COMMIT_SYNC
  python3 - "$o" "$mode" "$round" "$ranks" "$steps" "$every" "$tables" >>"$out" <<'PY'
import json, statistics, sys
o, mode, rnd, ranks, steps, every, tables = sys.argv[1:]
commits, epoch, batch = [], None, None
for l in open(o):
    if l.startswith('{"commit_step"'):
        commits.append(json.loads(l))
    elif l.startswith('{"epoch"'):
        epoch = json.loads(l)
    elif l.startswith('{"plan"') or l.startswith('{"config"'):
        pass
ranks, steps = int(ranks), int(steps)
# the samples a step: every rank's batch (the default, 256)
samples = steps * ranks * 256
train_s = samples / epoch["samples_per_s"]
stall = [c["commit_ms"] for c in commits]
bg = [c for c in commits if c["background"]]
print(json.dumps({"mode": mode, "round": int(rnd), "ranks": ranks, "tables": tables,
    "steps": steps, "commit_every": int(every), "commits": len(commits),
    "bytes_rank0": commits[0]["commit_bytes_rank0"] if commits else 0,
    "train_s": round(train_s, 4), "stall_s": round(sum(stall) / 1e3, 4),
    "total_s": round(train_s + sum(stall) / 1e3, 4),
    "stall_median_ms": round(statistics.median(stall), 2),
    "write_median_ms": round(statistics.median([c["write_ms"] for c in bg]), 2) if bg else 0,
    "lag_steps": sorted({c["published_step"] - c["commit_step"] for c in bg}),
    "step_ms": epoch["step_ms"]}))
PY
}
for r in $(seq 1 "$rounds"); do
  echo "== round $r of $rounds ($(date +%T))" >&2
  if [ $((r % 2)) = 1 ]; then one background "$r"; one foreground "$r"
  else one foreground "$r"; one background "$r"; fi
done
python3 - "$out" >"$BENCH_OUT/$name.md" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"mode"')]
r0 = rows[0]
print("# DLRM commits in the background against the foreground\n")
print(f"`gradsync train --model dlrm --tables {r0['tables']} --sharding rw --commit-every "
      f"{r0['commit_every']}`, {r0['steps']} steps on {r0['ranks']} ranks ({r0['commits']} "
      f"commits of {r0['bytes_rank0'] / 1e6:.1f} MB on rank 0, the last at the run's end, in "
      "the foreground in both modes). **training + commits**: the steps' seconds (samples over "
      "samples_per_s, which leaves the commits out) plus every commit's stall (`commit_ms`: "
      "the training it held up: in the background the state's bytes written into the page "
      "cache and the publication's agreements and manifest, in the foreground all of it with "
      "the fsyncs). **writer**: the background thread's time (read-back checksum, fsync, "
      "rename). **in place after**: how many steps after its own each background commit was "
      "put in place. Each round runs both modes back to back; the host's 2 cores are shared "
      "by the ranks and the writer threads, so the writer's CPU slows the steps it runs beside "
      "(step ms); absolute times vary from run to run.\n")
print("| round | mode | training + commits (s) | steps (s) | commits' stall (s) | stall a commit, median (ms) | writer, median (ms) | in place after (steps) | step (ms) |")
print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
for r in rows:
    print(f"| {r['round']} | {r['mode']} | {r['total_s']:.3f} | {r['train_s']:.3f} | "
          f"{r['stall_s']:.3f} | {r['stall_median_ms']:.1f} | "
          f"{r['write_median_ms']:.1f} | {','.join(map(str, r['lag_steps'])) or '-'} | "
          f"{r['step_ms']:.2f} |")
bg = [r for r in rows if r["mode"] == "background"]
fg = [r for r in rows if r["mode"] == "foreground"]
pairs = [(b["total_s"], f["total_s"]) for b in bg for f in fg if b["round"] == f["round"]]
ratios = sorted(b / f for b, f in pairs)
mb = statistics.median(r["total_s"] for r in bg)
mf = statistics.median(r["total_s"] for r in fg)
print(f"\nMedian training + commits: background {mb:.3f} s, foreground {mf:.3f} s: "
      f"**{mb / mf:.2f}x** (per round {', '.join(f'{x:.2f}x' for x in ratios)}). "
      f"Commits' stall: background {statistics.median(r['stall_s'] for r in bg):.3f} s, "
      f"foreground {statistics.median(r['stall_s'] for r in fg):.3f} s a run.")
PY
bench_stamp "$out" "$(bench_quote bench/embed/dlrm_commit.sh "$@")"
bench_stamp "$BENCH_OUT/$name.md" "$(bench_quote bench/embed/dlrm_commit.sh "$@")"
cat "$BENCH_OUT/$name.md"
