#!/usr/bin/env bash
# gradsync train --model dlrm and gradsync shard on what a user tester
# found: auto under a memory cap a forced plan fits; a table file's pooling
# in the data as in the plan; a file's scale and a ':' in its path; a
# held-out AUC of one class as JSON null; a diverged run's exit status and
# phase; a resume without its plan file naming it once; the --model list.
# usage: test_dlrm_cli.sh GRADSYNC
set -u
G=${1:?usage: test_dlrm_cli.sh GRADSYNC}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass() { echo "ok    $*"; }
fail() {
  echo "FAIL  $*"
  fails=$((fails + 1))
}
LK="--lookup 1e-8,1e-10"

# 1. auto under a cap that all-rw fits: planned, every rank within it.
"$G" shard --tables kaggle --scale 0.001 --ranks 3 $LK --mem-cap 800K --json >"$tmp/s1" 2>&1
rc=$?
if [ "$rc" = 0 ] && python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(not all(r["mem_bytes"] <= 800 * 1024 for r in j["per_rank"]))' "$tmp/s1"; then
  pass "auto plans kaggle x 0.001 on 3 ranks under 800K"
else
  fail "auto under 800K: exit $rc"
  tail -3 "$tmp/s1"
fi
"$G" shard --tables kaggle --scale 0.001 --ranks 3 $LK --mem-cap 300K --sharding tw \
  >"$tmp/s2" 2>&1
if grep -q "the most room left is" "$tmp/s2"; then pass "a forced plan's error names the room left"
else fail "forced tw under 300K: $(cat "$tmp/s2")"; fi

# 3. A file's scale (train and shard alike), a ':' in a file's path.
printf '{"tables": [{"name": "a", "rows": 1000, "dim": 16}, {"name": "b", "rows": 500, "dim": 16}]}' \
  >"$tmp/n.json"
printf '{"tables": [{"name": "a", "rows": 1000, "dim": 16, "pooling": 20}, {"name": "b", "rows": 500, "dim": 16, "pooling": 20}]}' \
  >"$tmp/p.json"
mkdir "$tmp/a:b" && cp "$tmp/n.json" "$tmp/a:b/tables.json"
r2=$("$G" shard --tables "$tmp/n.json" --scale 0.5 --ranks 2 $LK 2>&1 | awk '$1 == "a" {print $2}')
r3=$("$G" shard --tables "$tmp/a:b/tables.json" --ranks 2 $LK 2>&1 | awk '$1 == "a" {print $2}')
"$G" shard --tables "$tmp/n.json:0.01" --ranks 2 $LK 2>&1 | awk '$1 == "a" {print $2}' >"$tmp/r1"
if [ "$(cat "$tmp/r1")" = 10 ] && [ "$r2" = 500 ] && [ "$r3" = 1000 ]; then
  pass "shard: FILE:0.01 and --scale 0.5 scale a file's rows; a path with ':' reads"
else
  fail "shard: rows of a: FILE:0.01 '$(cat "$tmp/r1")' (10), --scale 0.5 '$r2' (500), a:b '$r3'"
fi
train() { # out args...
  local o=$1
  shift
  timeout 300 "$G" run -np 2 -- "$G" train --model dlrm --steps 3 --epochs 1 --batch 16 \
    --eval 64 "$@" >"$o" 2>&1
}
train "$tmp/t3" --tables "$tmp/a:b/tables.json:0.5" --sharding tw --json
rc=$?
if [ "$rc" = 0 ] && grep -q '"shard_rows": \[500, 250\]' "$tmp/t3"; then
  pass "train: a path with ':' and a trailing :0.5 (rows 500 and 250)"
else
  fail "train a:b/tables.json:0.5: exit $rc"
  tail -3 "$tmp/t3"
fi

# 2. A file's pooling draws its ids: 20 ids a sample against 1.
train "$tmp/p20" --tables "$tmp/p.json" --sharding tw --json
train "$tmp/p1" --tables "$tmp/n.json" --sharding tw --json
train "$tmp/p20b" --tables "$tmp/n.json" --pooling 20 --sharding tw --json
ids() { sed -nE 's/.*"id_bytes": ([0-9]+).*/\1/p' "$1"; }
if [ -n "$(ids "$tmp/p20")" ] && [ "$(ids "$tmp/p20")" != "$(ids "$tmp/p1")" ] &&
   [ "$(ids "$tmp/p20")" = "$(ids "$tmp/p20b")" ]; then
  pass "a file's pooling 20 draws as --pooling 20 does ($(ids "$tmp/p20") id bytes, 1: $(ids "$tmp/p1"))"
else
  fail "pooling: file 20 '$(ids "$tmp/p20")', none '$(ids "$tmp/p1")', --pooling 20 '$(ids "$tmp/p20b")'"
fi

# 4. All held-out labels of one class: the AUC is null in valid JSON, and
# undefined in words.
"$G" train --model dlrm --tables kaggle:0.001 --steps 1 --epochs 1 --batch 64 --eval 1024 \
  --pooling 900 --lr 0 --embed-lr 0 --json >"$tmp/j4" 2>&1
if python3 -c 'import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{\"epoch\"")]
sys.exit(not (len(lines) == 1 and lines[0]["auc"] is None))' "$tmp/j4"; then
  pass "an AUC of one class is null in valid JSON"
else
  fail "JSON of one class: $(head -c 300 "$tmp/j4")"
fi
"$G" train --model dlrm --tables kaggle:0.001 --steps 1 --epochs 1 --batch 64 --eval 1024 \
  --pooling 900 --lr 0 --embed-lr 0 >"$tmp/t4" 2>&1
if grep -q "held-out AUC undefined (the held-out labels are all one class)" "$tmp/t4"; then
  pass "text: the AUC undefined, all one class"
else fail "text of one class: $(grep epoch "$tmp/t4")"; fi

# 5. A diverged run: a runtime error (1), naming its phase.
"$G" train --model dlrm --tables kaggle:0.001 --steps 5 --epochs 1 --batch 16 --eval 64 \
  --lr 1000 >"$tmp/t5" 2>&1
rc=$?
if [ "$rc" = 1 ] && grep -Eq "(training step [0-9]+ of epoch 1|held-out evaluation)" "$tmp/t5"; then
  pass "a diverged run exits 1 naming its phase"
else
  fail "diverged: exit $rc (want 1): $(tail -1 "$tmp/t5")"
fi

# 6. A checkpoint without its plan file: one prefix, the plan's path.
ck="$tmp/ck2"
train "$tmp/c1" --tables kaggle:0.001 --steps 6 --epochs 2 --eval 256 --sharding rw \
  --checkpoint "$ck" --stop-at-step 3
rm -f "$ck"/*.plan.json
train "$tmp/c2" --tables kaggle:0.001 --steps 6 --epochs 2 --eval 256 --sharding rw \
  --checkpoint "$ck" --resume
n=$(grep -o "the checkpoint's plan" "$tmp/c2" | wc -l)
if grep -q "the checkpoint's plan $ck/dlrm-[0-9a-f]*-step3.plan.json: cannot open" "$tmp/c2" &&
   [ "$(grep -m1 "checkpoint's plan" "$tmp/c2" | grep -o "checkpoint's plan" | wc -l)" = 1 ]; then
  pass "a missing plan file: named once ($n lines)"
else
  fail "missing plan: $(grep -m1 "checkpoint's plan" "$tmp/c2")"
fi

# 7. The per-shard summary: "most above" a positive error, "most below" a
# negative one, a side with none left out.
train "$tmp/t7" --tables kaggle:0.001 --steps 6 --epochs 2 --eval 256 --sharding auto
if [ "$(grep -c "by shard:" "$tmp/t7")" = 2 ] &&
   ! grep -Eq "most above: [^;]*\(-|most below: [^;]*\(\+" "$tmp/t7"; then
  pass "per-shard summary: above positive, below negative"
else
  fail "per-shard summary: $(grep "by shard" "$tmp/t7")"
fi

# 8. Every model in the list.
"$G" train --model DLRM >"$tmp/t8" 2>&1
if grep -q "mlp, cnn, resnet or dlrm" "$tmp/t8"; then pass "--model lists dlrm"
else fail "--model DLRM: $(cat "$tmp/t8")"; fi

echo "$fails failure(s)"
[ "$fails" = 0 ]
