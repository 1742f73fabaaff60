#!/usr/bin/env bash
# The Criteo vocabulary (--frequency-threshold) counted over the ranks
# against every rank counting every line (issue 37; until 2026-12-05 each
# rank built the whole vocabulary itself; until 2026-12-05 each rank read
# the whole file and parsed every P-th line, now its byte range's). A
# Criteo-shaped file of LINES
# lines (awk, seeded: 13 integers, 26 hex values of a few thousand each)
# is counted by `gradsync train --model dlrm --data FILE
# --frequency-threshold 3` on P ranks (their training lines: steps x P x
# batch = LINES; one step trained, --stop-at-step 1), the vocabulary's
# seconds from its JSON line (rank 0's, from the count's start to the
# merged vocabulary: the collective's slowest rank). The peer, measured in
# the same run: what each rank did before, P single-process counts of
# the same lines started at once (the slowest of them). Writes
# $BENCH_OUT/criteo_vocab.{jsonl,md}.
#
# Usage: bench/embed/criteo_vocab.sh [LINES] [RANKS]
#   defaults: 384000 lines, "1 2 3" ranks.  BENCH_QUICK=1: 38400 lines.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
lines=${1:-384000}
ranks=${2:-1 2 3}
[ "$BENCH_QUICK" = 1 ] && lines=38400
bench_build gradsync_cli
gs=$BENCH_BUILD/gradsync
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the training lines, and a held-out round of the largest batch (1 rank's)
awk -v n="$((lines + lines / 100))" 'BEGIN {
  srand(5)
  for (i = 0; i < n; i++) {
    lab = rand() < 0.25 ? 1 : 0
    line = lab
    for (k = 0; k < 13; k++) line = line "\t" (rand() < 0.1 ? "" : int(rand() * 50) + 30 * lab)
    for (k = 0; k < 26; k++) line = line "\t" sprintf("%x", int(rand() * rand() * 8000) * (1 + lab))
    print line
  }
}' >"$tmp/day.tsv"
# vocab_s OUT: the vocabulary's seconds in a run's JSON output
vocab_s() {
  python3 -c 'import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{\"vocabulary\""):
        v = json.loads(l)["vocabulary"]
        print(v["seconds"], v["lines"], sum(t["distinct"] for t in v["tables"]),
              sum(t["kept"] for t in v["tables"]))' "$1"
}
# count P OUT: one run of P ranks over the file's first LINES lines
count() {
  local p=$1 o=$2 batch=$((lines / $1 / 100))
  rm -rf "$o.ckpt"
  "$gs" run -np "$p" --oversubscribe -- "$gs" train --model dlrm --tables kaggle:0.01 \
    --data "$tmp/day.tsv" --batch "$batch" --steps 100 --epochs 1 --eval 64 \
    --lookup 4e-8,4e-10 --frequency-threshold 3 --checkpoint "$o.ckpt" --stop-at-step 1 \
    --json >"$o" 2>&1 || { tail -5 "$o" >&2; exit 1; }
}
out=$BENCH_OUT/criteo_vocab.jsonl
: >"$out"
for p in $ranks; do
  echo "== $p rank(s), $lines lines ($(date +%T))" >&2
  count "$p" "$tmp/dist.$p"
  read -r dist_s nl distinct kept < <(vocab_s "$tmp/dist.$p")
  # the peer: each of P ranks counting all the lines itself, P at once
  # (one rank's share of the training lines is what each was given: a
  # run of 1 rank over the same LINES lines)
  pids=()
  for q in $(seq 1 "$p"); do
    count 1 "$tmp/each.$p.$q" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  each=0
  for q in $(seq 1 "$p"); do
    read -r s _ _ _ < <(vocab_s "$tmp/each.$p.$q")
    each=$(awk -v a="$each" -v b="$s" 'BEGIN { print (b > a ? b : a) }')
  done
  echo "{\"ranks\": $p, \"lines\": $nl, \"distinct\": $distinct, \"kept\": $kept," \
    "\"over_ranks_s\": $dist_s, \"every_rank_s\": $each}" >>"$out"
done
python3 - "$out" "$lines" >"$BENCH_OUT/criteo_vocab.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"ranks"')]
print("# The Criteo vocabulary counted over the ranks\n")
print(f"A Criteo-shaped file of {int(sys.argv[2]):,} lines, `--frequency-threshold 3`: the "
      "vocabulary's seconds as `gradsync train` reports them (counted over the ranks: the "
      "plain file split into P byte ranges, each rank reading and parsing its own range's "
      "lines, the counts summed by value over an all-to-all, the kept values all-gathered) "
      "against each rank counting every line itself (P single-rank "
      "counts at once, the slowest; what every rank did before). The same vocabulary either "
      "way (tests/embed/test_dlrm_dist.c). The host's cores are shared by the ranks.\n")
print("| ranks | lines | distinct | kept | over the ranks (s) | every rank all (s) | speed-up |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for r in rows:
    print(f"| {r['ranks']} | {r['lines']} | {r['distinct']} | {r['kept']} | "
          f"{r['over_ranks_s']:.3f} | {r['every_rank_s']:.3f} | "
          f"{r['every_rank_s'] / r['over_ranks_s']:.2f}x |")
PY
bench_stamp "$out" "$(bench_quote bench/embed/criteo_vocab.sh "$@")"
bench_stamp "$BENCH_OUT/criteo_vocab.md" "$(bench_quote bench/embed/criteo_vocab.sh "$@")"
cat "$BENCH_OUT/criteo_vocab.md"
