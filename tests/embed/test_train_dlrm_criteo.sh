#!/usr/bin/env bash
# gradsync train --model dlrm --data FILE: training on a Criteo TSV file on
# 2 ranks. A gzip file this test writes (labels tied to the integer and
# categorical features, so that a model can learn them): the run ends with
# a held-out AUC well above chance and no teacher (null); the same file
# unpacked gives the same losses and AUC (the same samples); a file too
# short for the run is refused at the start, and a bad line in one rank's
# slice fails on every rank naming the file and the line, no rank left
# waiting; a missing file is
# a usage error; a checkpoint of one file does not resume on another; the
# ids through a vocabulary (--frequency-threshold) train and resume; each
# epoch reports every rank's and every shard's lookup time, measured and
# predicted. The runs are given their lookup cost (--lookup, test_lookup.h's
# figures), as none of this is about measuring it.
# usage: test_train_dlrm_criteo.sh GRADSYNC
set -u
G=${1:?usage: test_train_dlrm_criteo.sh GRADSYNC}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass() { echo "ok    $*"; }
fail() {
  echo "FAIL  $*"
  fails=$((fails + 1))
}

# 6,000 lines: a quarter positive; positives have larger integers and even
# categorical values.
awk 'BEGIN {
  srand(3)
  for (i = 0; i < 6000; i++) {
    lab = rand() < 0.25 ? 1 : 0
    line = lab
    for (k = 0; k < 13; k++) line = line "\t" (rand() < 0.1 ? "" : int(rand() * 50) + 30 * lab)
    for (k = 0; k < 26; k++) line = line "\t" sprintf("%x", int(rand() * 2000) * (1 + lab))
    print line
  }
}' >"$tmp/day.tsv"
gzip -c "$tmp/day.tsv" >"$tmp/day.gz"
train() { # file out args...
  local f=$1 o=$2
  shift 2
  timeout 300 "$G" run -np 2 -- "$G" train --model dlrm --tables kaggle:0.01 --data "$f" \
    --batch 64 --epochs 2 --eval 1024 --lookup 4e-8,4e-10 --json "$@" >"$o" 2>&1
}

# One sharding for both runs: the planner's choice rests on the lookup
# cost (measured, unless given as here), and a dp table's dense gradient
# sums in another order than a whole table's update (equal within
# rounding, not bitwise).
train "$tmp/day.gz" "$tmp/gz.out" --steps 30 --sharding tw
rc=$?
n=$(grep -c '^{"epoch"' "$tmp/gz.out")
auc=$(grep '^{"epoch": 2' "$tmp/gz.out" | sed -E 's/.*"auc": ([0-9.]+).*/\1/')
if [ "$rc" = 0 ] && [ "$n" = 2 ] && grep -q '"teacher_auc": null' "$tmp/gz.out" &&
   awk -v a="${auc:-0}" 'BEGIN { exit !(a > 0.9) }'; then
  pass "gzip file: 2 epochs, held-out AUC $auc, no teacher"
else
  fail "gzip file: exit $rc, $n epoch line(s), AUC '${auc:-}' (want > 0.9), teacher null"
  tail -5 "$tmp/gz.out"
fi

# Each epoch line gives both ranks' lookup ms a step, measured and the cost
# model's (the planner's prices of the rank's shards), all positive.
if grep '^{"epoch"' "$tmp/gz.out" | grep -qE '"rank_lookup_ms": \[[0-9]*\.[0-9]*[1-9][0-9]*, [0-9]*\.[0-9]*[1-9][0-9]*\], "rank_lookup_pred_ms": \[[0-9]*\.[0-9]*[1-9][0-9]*, [0-9]*\.[0-9]*[1-9][0-9]*\]'; then
  pass "per-rank lookup times, measured and predicted, for both ranks"
else
  fail "no per-rank lookup times: $(grep '^{"epoch"' "$tmp/gz.out" | head -1 | grep -o '"rank_lookup.*')"
fi

# And every shard's: the shards' predictions add up to the ranks', and
# their measured times to most of the ranks' (the rest is the exchange's
# bookkeeping between the kernels), none negative.
if grep '^{"epoch"' "$tmp/gz.out" | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    m, p = e["shard_lookup_ms"], e["shard_lookup_pred_ms"]
    rm, rp = sum(e["rank_lookup_ms"]), sum(e["rank_lookup_pred_ms"])
    assert len(m) == len(p) >= 26, (len(m), len(p))
    assert min(m) >= 0 and min(p) >= 0 and sum(1 for x in m if x > 0) >= 26
    assert abs(sum(p) - rp) <= 1e-3 * len(p) + 1e-3 * rp, (sum(p), rp)
    assert 0.5 * rm <= sum(m) <= rm + 1e-3 * len(m), (sum(m), rm)
'; then
  pass "per-shard lookup times, measured and predicted, add up to the ranks'"
else
  fail "per-shard lookup times: $(grep '^{"epoch"' "$tmp/gz.out" | head -1 | grep -o '"shard_lookup.*')"
fi

train "$tmp/day.tsv" "$tmp/tsv.out" --steps 30 --sharding tw
# The losses and AUCs (bytes and times vary).
strip() { grep '^{"epoch"' "$1" | grep -oE '"(epoch|train_loss|auc|log_loss)": [0-9.]+' | tr '\n' ' '; }
if [ -n "$(strip "$tmp/gz.out")" ] && [ "$(strip "$tmp/gz.out")" = "$(strip "$tmp/tsv.out")" ]; then
  pass "the plain file trains as the gzip one (same losses and AUC)"
else
  fail "plain against gzip:"
  strip "$tmp/gz.out"
  strip "$tmp/tsv.out"
fi

# 40 steps x 128 samples = 5,120 training lines, then 1,024 held out: 6,144
# of the 6,000 lines: refused at the start (exit 2, said once for both
# ranks), nothing trained (until 2026-12-08 the first evaluation ran out).
train "$tmp/day.gz" "$tmp/short.out" --steps 40
rc=$?
k=$(grep -c "Criteo file '$tmp/day.gz' has 6000 lines; the run needs 6144: 40 steps x 128 samples (the global batch) to train and 1024 held out" "$tmp/short.out")
if [ "$rc" = 2 ] && [ "$k" = 1 ] && ! grep -q "^epoch 1" "$tmp/short.out"; then
  pass "a file too short: exit 2 at the start, naming the file, its 6000 lines and the 6144 needed"
else
  fail "a file too short: exit $rc, $k message(s)"
  tail -5 "$tmp/short.out"
fi

# A bad line in rank 1's slice of the first step (lines 65 to 128): every
# rank ends, the message names the line, no rank waits in the step.
awk 'NR == 100 { $0 = "2" substr($0, 2) } { print }' "$tmp/day.tsv" >"$tmp/bad.tsv"
train "$tmp/bad.tsv" "$tmp/bad.out" --steps 30
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "bad.tsv' line 100: field 1 (label) '2' is not 0 or 1" "$tmp/bad.out"; then
  pass "a bad line on rank 1: exit $rc on every rank, naming line 100"
else
  fail "a bad line on rank 1: exit $rc (124: a rank hung)"
  tail -5 "$tmp/bad.out"
fi

out=$("$G" train --model dlrm --data "$tmp/nonexistent.gz" 2>&1)
rc=$?
if [ "$rc" = 2 ] && [[ $out == *"--data $tmp/nonexistent.gz: cannot read it"* ]]; then
  pass "a missing file: exit 2, naming it"
else
  fail "a missing file: exit $rc: $out"
fi

train "$tmp/day.gz" "$tmp/stop.out" --steps 30 --checkpoint "$tmp/ck" --stop-at-step 5
train "$tmp/day.tsv" "$tmp/other.out" --steps 30 --checkpoint "$tmp/ck" --resume
rc=$?
if [ "$rc" != 0 ] && grep -q "the data (the synthetic data's parameters, or the Criteo file)" "$tmp/other.out"; then
  pass "a checkpoint of one file does not resume on another (exit $rc)"
else
  fail "resume on another file: exit $rc"
  tail -5 "$tmp/other.out"
fi

# --frequency-threshold 3: the ids through a vocabulary of the 3,840
# training lines (each feature's values seen 3 times or more there, the
# rest one row): the run says what it kept and trains (the integers carry
# the labels); stopped at step 35 and resumed, the second epoch is the
# uninterrupted run's (the vocabulary made again alike); a resume with
# another threshold is refused, and the option without --data is a usage
# error.
train "$tmp/day.gz" "$tmp/vocab.out" --steps 30 --sharding tw --frequency-threshold 3
rc=$?
auc=$(grep '^{"epoch": 2' "$tmp/vocab.out" | sed -E 's/.*"auc": ([0-9.]+).*/\1/')
# Each table's rows: its vocabulary's ids (kept + 2) or, where fewer,
# kaggle:0.01's rows (the run without the vocabulary's tw shards), and the
# shards trained of those rows.
if [ "$rc" = 0 ] && /usr/bin/python3 -c '
import json, sys
lines = lambda f, k: [json.loads(l) for l in open(f) if l.startswith("{\"" + k + "\"")]
v = lines(sys.argv[1], "vocabulary")[0]["vocabulary"]
before = lines(sys.argv[2], "epoch")[0]["shard_rows"]
after = lines(sys.argv[1], "epoch")[0]["shard_rows"]
assert v["lines"] == 3840, v["lines"]
t = v["tables"]
assert len(t) == 26 and len(before) == 26, (len(t), len(before))
want = [min(x["kept"] + 2, r) for x, r in zip(t, before)]
assert [x["rows"] for x in t] == want == after, (want, after)
assert all(0 < x["kept"] < x["distinct"] for x in t), t
assert sum(x["kept"] + 2 < r for x, r in zip(t, before)) >= 8, (t, before)
' "$tmp/vocab.out" "$tmp/gz.out" && awk -v a="${auc:-0}" 'BEGIN { exit !(a > 0.85) }'; then
  pass "--frequency-threshold 3: the vocabulary's rows, held-out AUC $auc"
else
  fail "--frequency-threshold 3: exit $rc, AUC '${auc:-}' (want > 0.85), $(grep '^{"vocabulary"' "$tmp/vocab.out" | head -c 300)"
  tail -5 "$tmp/vocab.out"
fi
train "$tmp/day.gz" "$tmp/vstop.out" --steps 30 --sharding tw --frequency-threshold 3 \
  --checkpoint "$tmp/vck" --stop-at-step 35
train "$tmp/day.gz" "$tmp/vres.out" --steps 30 --sharding tw --frequency-threshold 3 \
  --checkpoint "$tmp/vck" --resume
rc=$?
e2() { grep '^{"epoch": 2' "$1" | grep -oE '"(train_loss|auc|log_loss)": [0-9.]+' | tr '\n' ' '; }
if [ "$rc" = 0 ] && [ -n "$(e2 "$tmp/vocab.out")" ] && [ "$(e2 "$tmp/vocab.out")" = "$(e2 "$tmp/vres.out")" ]; then
  pass "stopped at step 35 and resumed: epoch 2 as the uninterrupted run's"
else
  fail "resume with the vocabulary: exit $rc: '$(e2 "$tmp/vocab.out")' against '$(e2 "$tmp/vres.out")'"
  tail -5 "$tmp/vres.out"
fi
train "$tmp/day.gz" "$tmp/vother.out" --steps 30 --sharding tw --frequency-threshold 2 \
  --checkpoint "$tmp/vck" --resume
rc=$?
if [ "$rc" != 0 ] && grep -q "a frequency threshold of 3, this run 2" "$tmp/vother.out"; then
  pass "a resume with another threshold refused (exit $rc)"
else
  fail "a resume with another threshold: exit $rc"
  tail -5 "$tmp/vother.out"
fi
out=$("$G" train --model dlrm --frequency-threshold 3 2>&1)
rc=$?
if [ "$rc" = 2 ] && [[ $out == *"--frequency-threshold needs --data FILE"* ]]; then
  pass "--frequency-threshold without --data: exit 2"
else
  fail "--frequency-threshold without --data: exit $rc: $out"
fi

[ "$fails" = 0 ] && echo "all passed" && exit 0
echo "$fails failure(s)"
exit 1
