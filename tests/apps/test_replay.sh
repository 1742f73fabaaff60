#!/usr/bin/env bash
# gradsync replay, end to end on 2 ranks over shared memory:
#   - every policy runs and reports its measured and predicted times;
#   - --rounds R runs the policies R times, odd rounds in reverse order;
#   - GRADSYNC_TIMELINE writes one Chrome trace per rank naming messages;
#   - GRADSYNC_PLAN_COST=curve plans with the measured curve;
#   - bad options and bad profiles exit 2 with a message naming them.
# Usage: test_replay.sh GRADSYNC
set -u
gs=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GRADSYNC_CALIBRATE=0
fails=0 passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

# A small profile: six tensors of mixed sizes, a few ms of compute.
prof=$tmp/small.json
cat > "$prof" <<'EOF'
{"name": "small", "batch_size": 4, "device": "test", "source": "hand-written",
 "forward_s": 0.004,
 "tensors": [
  {"name": "conv1.weight", "numel": 1728, "backward_s": 0.001},
  {"name": "conv1.bias", "numel": 64, "backward_s": 0.0002},
  {"name": "conv2.weight", "numel": 36864, "backward_s": 0.002},
  {"name": "conv2.bias", "numel": 64, "backward_s": 0.0002},
  {"name": "fc.weight", "numel": 262144, "backward_s": 0.001},
  {"name": "fc.bias", "numel": 10, "backward_s": 0.0001}]}
EOF

expect() { # expect CODE NEEDLE ARGS...
  local code=$1 needle=$2; shift 2
  local out rc
  out=$("$gs" replay "$@" 2>&1); rc=$?
  if [ "$rc" != "$code" ]; then
    bad "replay $*: exit $rc, expected $code: $out"
  elif [ -n "$needle" ] && ! printf '%s' "$out" | grep -qF -- "$needle"; then
    bad "replay $*: output lacks '$needle': $out"
  else
    ok "replay $* -> $rc"
  fi
}
expect 0 "usage: gradsync replay" --help
expect 2 "are required" --profile "$prof"
expect 2 "--rounds" --profile "$prof" --policy all --rounds 0
expect 2 "--iters" --profile "$prof" --policy all --iters many
expect 2 "--time-scale" --profile "$prof" --policy all --time-scale -1
expect 2 "unknown policy" --profile "$prof" --policy fastest
expect 2 "$tmp/none.json" --profile "$tmp/none.json" --policy all
printf '{"name": "x", "forward_s": 0, "tensors": [{"name": "w", "numel": -4, "backward_s": 0}]}' \
  > "$tmp/bad.json"
expect 2 "tensors[0].numel" --profile "$tmp/bad.json" --policy all

# Every policy, two rounds.
out=$tmp/all.jsonl
if "$gs" run -np 2 -- "$gs" replay --profile "$prof" --policy all --iters 3 --warmup 2 \
     --rounds 2 --json > "$out" 2> "$tmp/all.err"; then
  ok "replay --policy all --rounds 2 ran"
else
  bad "replay --policy all --rounds 2 failed: $(cat "$tmp/all.err")"
fi
n=$(grep -c '"policy"' "$out")
[ "$n" = 14 ] && ok "14 results (7 policies x 2 rounds)" || bad "$n results, expected 14"
order=$(sed -n 's/.*"policy":"\([a-z]*\)".*"round":\([0-9]\).*/\2:\1/p' "$out" | tr '\n' ' ')
want="0:wfbp 0:single 0:bucket 0:mgwfbp 0:optimal 0:dear 0:auto 1:auto 1:dear 1:optimal 1:mgwfbp 1:bucket 1:single 1:wfbp "
[ "$order" = "$want" ] && ok "round 1 runs in reverse order" || bad "order: $order"
# Every result has positive measured and predicted times and a share of
# hidden communication in [0, 1].
badrow=$(awk '
  { it = $0; sub(/.*"iter_s":/, "", it); sub(/[,}].*/, "", it)
    pr = $0; sub(/.*"predicted_s":/, "", pr); sub(/[,}].*/, "", pr)
    hf = $0; sub(/.*"hidden_frac":/, "", hf); sub(/[,}].*/, "", hf)
    if (!(it + 0 > 0 && pr + 0 > 0 && hf + 0 >= 0 && hf + 0 <= 1)) print NR": "$0 }' "$out")
[ -z "$badrow" ] && ok "times positive, hidden share in [0, 1]" || bad "bad rows: $badrow"
grep -q '"cost_measured":true' "$out" && ok "costs fitted from the engine's messages" \
  || bad "no result used measured costs"
# DeAR's reduce-scatter and all-gather costs (what simulate --rs/--ag take):
# on every row, and halves of the all-reduce's measured fit until measured
# themselves (the communicator's model gives its own where nothing is).
if /usr/bin/python3 - "$out" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    for k in ("rs_a", "rs_b", "ag_a", "ag_b"):
        assert r[k] >= 0, (k, r)
    if r["cost_measured"] and not r["rsag_measured"]:
        for k, h in (("rs_a", "a"), ("ag_a", "a"), ("rs_b", "b"), ("ag_b", "b")):
            assert abs(r[k] - r[h] / 2) <= 1e-9 * r[h], (k, r)
PY
then ok "rs/ag costs on every row, halves of the all-reduce's fit unless measured"
else bad "rs/ag costs missing or not halves: $(head -c 600 "$out")"
fi

# Timeline, and the measured-curve cost.
if GRADSYNC_LOG=info GRADSYNC_TIMELINE=$tmp/t.json GRADSYNC_PLAN_COST=curve "$gs" run -np 2 -- "$gs" replay \
     --profile "$prof" --policy optimal --iters 3 --warmup 6 > "$tmp/one.txt" 2>&1; then
  ok "replay --policy optimal with a timeline and GRADSYNC_PLAN_COST=curve"
else
  bad "replay with a timeline failed: $(cat "$tmp/one.txt")"
fi
for r in 0 1; do
  f=$tmp/t.rank$r.json
  if [ -s "$f" ] && grep -q '"traceEvents"' "$f" && grep -q 'fc.weight' "$f"; then
    ok "timeline of rank $r names the messages' tensors"
  else
    bad "timeline $f missing or without messages"
  fi
done
grep -q "optimal" "$tmp/one.txt" && ok "text table printed" || bad "no table: $(cat "$tmp/one.txt")"
grep -qE "plan optimal, .*measured, [1-9][0-9]* points" "$tmp/one.txt" \
  && ok "the plan was made with the measured curve's points" \
  || bad "no plan with curve points: $(grep 'plan ' "$tmp/one.txt")"

# --compress with a list of policies: each runs compressed in turn, its
# bytes per step the payloads' (top-k at 1%: about 2% of the dense bytes
# with indices), dear refused with a non-auto spec. The kind's name in any
# case, the spec reported normalised; the compressed plan's prediction.
if "$gs" run -np 2 -- "$gs" replay --profile "$prof" --policy wfbp,mgwfbp --iters 2 --warmup 2 \
     --compress TopK:0.01 --json > "$tmp/z.jsonl" 2> "$tmp/z.err"; then
  if python3 - "$tmp/z.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["policy"] for r in rows] == ["wfbp", "mgwfbp"], rows
for r in rows:
    assert r["compress"] == "topk:0.01" and r["compressed_groups"] > 0, r
    assert 0 < r["bytes_per_step"] < 0.1 * r["grad_bytes"], r
    # Priced as the engine prices compressed groups (payload and coding);
    # until 2026-12-06 null (nan in the table).
    p, e = r["predicted_s"], r["engine_predicted_s"]
    assert isinstance(p, float) and p > 0 and 0.25 < p / e < 4, r
PY
  then ok "--compress TopK:0.01 with --policy wfbp,mgwfbp: compressed, payload bytes, predicted"
  else bad "--compress rows: $(cat "$tmp/z.jsonl")"; fi
else
  bad "replay --compress failed: $(cat "$tmp/z.err")"
fi
expect 2 "auto:topk:0.01" --profile "$prof" --policy wfbp,dear --compress topk:0.01
expect 2 "unknown policy" --profile "$prof" --policy wfbp,fastest
expect 2 "an empty item in the list" --profile "$prof" --policy wfbp,,dear

echo "$passes passed, $fails failed"
[ "$fails" = 0 ]
