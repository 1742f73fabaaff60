#!/usr/bin/env bash
# The verbs' own threads: a short 2-rank training under each kind of plan
# (all-reduce messages; dear's reduce-scatters and all-gathers finished in
# the next forward) and a short replay, where the training thread's
# collectives (agreements, the weights, the metrics) share the communicator
# with the engine's threads. Quick in every build; its point is the
# ThreadSanitizer pass of scripts/test.sh, where any report fails it.
# Usage: test_threads.sh GRADSYNC
set -u
gs=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GRADSYNC_CALIBRATE=0
fails=0 passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

for pol in wfbp dear; do
  if "$gs" run -np 2 -- "$gs" train --synthetic 1024 --model mlp --batch 16 --max-steps 4 \
       --epochs 2 --policy "$pol" --checkpoint "$tmp/ck_$pol" --json > "$tmp/$pol.log" 2>&1 &&
     grep -q '"summary"' "$tmp/$pol.log"; then
    ok "train on 2 ranks under $pol"
  else
    bad "train on 2 ranks under $pol: $(tail -5 "$tmp/$pol.log")"
  fi
done
cat > "$tmp/p.json" <<'JSON'
{"name": "p", "forward_s": 0.001,
 "tensors": [{"name": "a", "numel": 4096, "backward_s": 0.0005},
             {"name": "b", "numel": 1024, "backward_s": 0.0005}]}
JSON
if "$gs" run -np 2 -- "$gs" replay --profile "$tmp/p.json" --policy dear --iters 3 \
     --warmup 1 --json > "$tmp/replay.log" 2>&1; then
  ok "replay on 2 ranks under dear"
else
  bad "replay on 2 ranks under dear: $(tail -5 "$tmp/replay.log")"
fi
cat "$tmp"/*.log | grep -A3 "WARNING: ThreadSanitizer" | head -40
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
