#!/usr/bin/env bash
# gradsync train, end to end on a synthetic data set (shared memory):
#   - N ranks with batch b reach the weights of 1 rank with batch N*b, for
#     every scheduling policy (no batch-norm or dropout in the mlp and cnn);
#   - the same seed gives bitwise the same weights;
#   - a run stopped after one epoch and resumed ends bitwise where an
#     uninterrupted run ends;
#   - the checkpoint comparison treats NaN weights as a difference;
#   - bad options, missing or corrupt data and divergence give a clear error
#     and a non-zero exit.
# Usage: test_train.sh GRADSYNC CKPT_COMPARE
set -u
gs=$1
cmp_ckpt=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Bitwise comparisons need the same summation order in every run: a fixed
# allreduce algorithm instead of the one each run's calibration picks.
export GRADSYNC_ALLREDUCE_ALGO=ring GRADSYNC_CALIBRATE=0
fails=0 passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

train() { # train NP DIR ARGS...
  local np=$1 dir=$2; shift 2
  "$gs" run -np "$np" -- "$gs" train --synthetic 4096 --epochs 1 --max-steps 8 \
    --checkpoint "$dir" --json "$@" > "$dir.log" 2>&1
}

# Data-parallel equivalence.
train 1 "$tmp/ref" --model mlp --batch 32 --policy wfbp || bad "reference run failed: $(tail -3 "$tmp/ref.log")"
for pol in wfbp single bucket:0.05 mgwfbp optimal dear auto; do
  d="$tmp/dp_${pol%%:*}"
  if train 2 "$d" --model mlp --batch 16 --policy "$pol" &&
     "$cmp_ckpt" mlp "$tmp/ref/checkpoint.gsck" "$d/checkpoint.gsck" 1e-4 > "$d.cmp"; then
    ok "2 ranks x batch 16 = 1 rank x batch 32 under $pol ($(cat "$d.cmp"))"
  else
    bad "2 ranks x batch 16 under $pol differ from 1 x 32: $(cat "$d.cmp" 2>/dev/null; tail -3 "$d.log")"
  fi
done
train 1 "$tmp/ref4" --model cnn --batch 32 --policy wfbp
if train 4 "$tmp/dp4" --model cnn --batch 8 --policy dear &&
   "$cmp_ckpt" cnn "$tmp/ref4/checkpoint.gsck" "$tmp/dp4/checkpoint.gsck" 1e-4 > "$tmp/dp4.cmp"; then
  ok "cnn: 4 ranks x batch 8 under dear = 1 rank x batch 32 ($(cat "$tmp/dp4.cmp"))"
else
  bad "cnn: 4 ranks x batch 8 under dear differ: $(cat "$tmp/dp4.cmp" 2>/dev/null; tail -3 "$tmp/dp4.log")"
fi

# Same seed, same result.
train 2 "$tmp/s1" --model mlp --batch 16 --policy wfbp
train 2 "$tmp/s2" --model mlp --batch 16 --policy wfbp
if "$cmp_ckpt" mlp "$tmp/s1/checkpoint.gsck" "$tmp/s2/checkpoint.gsck" > "$tmp/s.cmp"; then
  ok "same seed: bitwise identical weights"
else
  bad "same seed gave different weights: $(cat "$tmp/s.cmp")"
fi

# The comparison itself can fail: a NaN weight is a difference, also where
# both files hold the same bits (a NaN compares unequal to everything, so a
# max over differences skips it). Exit 1 from the comparison, or 2 if the
# checkpoint reader refuses non-finite weights itself.
if "$cmp_ckpt" --nan mlp "$tmp/s1/checkpoint.gsck" "$tmp/nan.gsck" > "$tmp/nan.log" 2>&1; then
  for tol in "" 1e-4; do
    "$cmp_ckpt" mlp "$tmp/nan.gsck" "$tmp/nan.gsck" $tol > "$tmp/nan.cmp" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then ok "a NaN weight is a difference (rtol ${tol:-0}, exit $rc)"
    else bad "a NaN weight compared equal (rtol ${tol:-0}): $(cat "$tmp/nan.cmp")"; fi
  done
  "$cmp_ckpt" mlp "$tmp/s1/checkpoint.gsck" "$tmp/nan.gsck" 1e-4 > "$tmp/nan.cmp" 2>&1 &&
    bad "a NaN weight against a finite one compared equal: $(cat "$tmp/nan.cmp")"
else
  bad "ckpt_compare --nan failed: $(cat "$tmp/nan.log")"
fi

# Resume: 2 epochs straight vs 1 epoch, then --resume to 2.
"$gs" run -np 2 -- "$gs" train --synthetic 4096 --epochs 2 --max-steps 6 --model mlp \
  --batch 16 --policy wfbp --checkpoint "$tmp/full" --json > "$tmp/full.log" 2>&1
"$gs" run -np 2 -- "$gs" train --synthetic 4096 --epochs 1 --max-steps 6 --model mlp \
  --batch 16 --policy wfbp --checkpoint "$tmp/half" --json > "$tmp/half1.log" 2>&1
"$gs" run -np 2 -- "$gs" train --synthetic 4096 --epochs 2 --max-steps 6 --model mlp \
  --batch 16 --policy wfbp --checkpoint "$tmp/half" --resume --json > "$tmp/half2.log" 2>&1
if "$cmp_ckpt" mlp "$tmp/full/checkpoint.gsck" "$tmp/half/checkpoint.gsck" > "$tmp/r.cmp"; then
  ok "stopped after epoch 1 and resumed: bitwise identical to an uninterrupted run"
else
  bad "resumed run differs: $(cat "$tmp/r.cmp"; tail -3 "$tmp/half2.log")"
fi

# --resume refuses a checkpoint that does not fit the run, naming what
# differs (exit 1, as for other unusable files); the checkpoint in half/ was
# written by 2 ranks, mlp, batch 16, seed 1, on the synthetic 4096 set.
resume_mismatch() { # resume_mismatch PATTERN DESCRIPTION NP ARGS...
  local pat=$1 what=$2 np=$3; shift 3
  "$gs" run -np "$np" -- "$gs" train --max-steps 6 --checkpoint "$tmp/half" --resume "$@" \
    > "$tmp/mm.log" 2>&1
  local rc=$?
  if [ $rc -eq 1 ] && grep -q -- "does not fit this run: $pat" "$tmp/mm.log" &&
     ! grep -q '"epoch"' "$tmp/mm.log"; then
    ok "--resume refuses $what (exit 1)"
  else
    bad "--resume with $what: exit $rc, output: $(head -c 400 "$tmp/mm.log")"
  fi
}
mm="--synthetic 4096 --epochs 2 --policy wfbp --json"
resume_mismatch "--batch (per rank): the checkpoint's run had 16, this run has 8" \
  "another batch" 2 $mm --model mlp --batch 8
resume_mismatch "the rank count .* had 2, this run has 1" "another rank count" 1 $mm \
  --model mlp --batch 16
resume_mismatch "--model: the checkpoint's run had 'mlp', this run has 'cnn'" "another model" 2 \
  $mm --model cnn --batch 16
resume_mismatch "the training set's size" "another data set" 2 --synthetic 2048 --epochs 2 \
  --model mlp --batch 16
resume_mismatch "--seed" "another seed" 2 $mm --model mlp --batch 16 --seed 5
resume_mismatch "--epochs (the learning-rate schedule spans the run)" \
  "other --epochs under a cosine schedule" 2 --synthetic 4096 --epochs 3 --schedule cosine \
  --model mlp --batch 16
resume_mismatch "the checkpoint is at epoch 2, beyond this run's --epochs 1" "a checkpoint beyond --epochs" 2 \
  --synthetic 4096 --epochs 1 --model mlp --batch 16
cp -r "$tmp/half" "$tmp/half_nometa" && rm "$tmp/half_nometa/checkpoint.json"
"$gs" run -np 2 -- "$gs" train $mm --model mlp --batch 16 --max-steps 6 \
  --checkpoint "$tmp/half_nometa" --resume > "$tmp/mm.log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "checkpoint.json: No such file" "$tmp/mm.log"; then
  ok "--resume without the checkpoint's description is refused (exit 1)"
else
  bad "--resume without checkpoint.json: exit $rc, $(head -c 400 "$tmp/mm.log")"
fi
cp "$tmp/full/checkpoint.json" "$tmp/half_nometa/checkpoint.json"
cp "$tmp/s1/checkpoint.gsck" "$tmp/half_nometa/checkpoint.gsck"
"$gs" run -np 2 -- "$gs" train $mm --model mlp --batch 16 --max-steps 6 \
  --checkpoint "$tmp/half_nometa" --resume > "$tmp/mm.log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "description is of another checkpoint" "$tmp/mm.log"; then
  ok "--resume refuses a description of another checkpoint file (exit 1)"
else
  bad "--resume with another checkpoint's description: exit $rc, $(head -c 400 "$tmp/mm.log")"
fi

# A rank killed with kill -9 ends the run, non-zero, within 60 s; resuming
# from the last checkpoint finishes it.
"$gs" run -np 3 -- "$gs" train --synthetic 8192 --epochs 3 --max-steps 400 --model cnn \
  --batch 8 --policy auto --checkpoint "$tmp/killed" --json > "$tmp/killed.log" 2>&1 &
launcher=$!
for _ in $(seq 1 600); do [ -f "$tmp/killed/checkpoint.gsck" ] && break; sleep 0.1; done
# Only this run's ranks: its checkpoint path is unique to this test.
victim=$(pgrep -f -- "train --synthetic 8192 --epochs 3 .*--checkpoint $tmp/killed" | grep -v "^$launcher\$" | tail -1)
t0=$(date +%s)
[ -n "$victim" ] && kill -9 "$victim"
wait "$launcher"
rc=$? elapsed=$(($(date +%s) - t0))
if [ -n "$victim" ] && [ $rc -ne 0 ] && [ $elapsed -le 60 ]; then
  ok "a rank killed with kill -9 ends the run in ${elapsed} s with status $rc"
else
  bad "kill -9 of a rank: victim '$victim', status $rc after ${elapsed} s"
fi
if "$gs" run -np 3 -- "$gs" train --synthetic 8192 --epochs 3 --max-steps 400 --model cnn \
     --batch 8 --policy auto --checkpoint "$tmp/killed" --resume --json > "$tmp/resumed.log" 2>&1 &&
   grep -Eq '"epoch": ?3' "$tmp/resumed.log"; then
  ok "resuming from the last checkpoint finishes the run"
else
  bad "resume after kill -9 failed: $(tail -3 "$tmp/resumed.log")"
fi

# Errors: exit status and message.
expect_error() { # expect_error STATUS PATTERN DESCRIPTION ARGS...
  local want=$1 pat=$2 what=$3; shift 3
  "$@" > "$tmp/err.log" 2>&1
  local rc=$?
  if { [ "$want" = any ] && [ $rc -ne 0 ]; } || [ "$rc" = "$want" ]; then
    if grep -q -- "$pat" "$tmp/err.log"; then ok "$what (exit $rc)"; return; fi
  fi
  bad "$what: exit $rc, output: $(head -c 400 "$tmp/err.log")"
}
expect_error 2 "batch" "--batch 0 is refused" "$gs" train --batch 0
expect_error 2 "model" "an unknown model is refused" "$gs" train --model lenet9
expect_error 2 "polic" "an unknown policy is refused" "$gs" train --policy fastest
expect_error 2 "resume" "--resume without --checkpoint is refused" "$gs" train --resume
# Options that cannot apply together, repeated or unknown: exit 2, one line.
expect_error 2 "given more than once" "a repeated option is refused" "$gs" train --batch 8 --batch 16
expect_error 2 "synthetic and --data" "--synthetic with --data is refused" \
  "$gs" train --synthetic 64 --data "$tmp"
expect_error 2 "not with --synthetic" "--data-cache with --synthetic is refused" \
  "$gs" train --synthetic 64 --data-cache "$tmp"
expect_error 2 "not to resnet" "--dropout with resnet is refused" \
  "$gs" train --model resnet --dropout 0.5
expect_error 2 "needs a momentum" "--nesterov with --momentum 0 is refused" \
  "$gs" train --nesterov --momentum 0
expect_error 2 "longer than the run" "a warm-up longer than the run is refused" \
  "$gs" train --epochs 2 --warmup-epochs 3
expect_error 2 "'--bogus' is unknown" "an unknown option is one line" "$gs" train --bogus
[ "$(wc -l < "$tmp/err.log")" -eq 1 ] && ok "an unknown option's message is one line" ||
  bad "an unknown option printed $(wc -l < "$tmp/err.log") lines"
# Where the run will write is checked before any work, by creating a file
# there (as root, access() would say yes to /proc).
expect_error 1 "checkpoint /proc: cannot create a file" "an unwritable checkpoint directory is refused" \
  "$gs" run -np 2 -- "$gs" train --synthetic 4096 --model mlp --batch 16 --max-steps 2 --checkpoint /proc
grep -q "epoch 1" "$tmp/err.log" && bad "the unwritable checkpoint directory was found after training"
expect_error 1 "GRADSYNC_TIMELINE /proc/t.json: cannot create a file" "an unwritable timeline is refused" \
  env GRADSYNC_TIMELINE=/proc/t.json "$gs" train --synthetic 4096 --model mlp --batch 16 --max-steps 2
grep -q "epoch 1" "$tmp/err.log" && bad "the unwritable timeline was found after training"
expect_error any "dataset-fashion-mnist" "missing data names the package to install" \
  "$gs" run -np 1 -- "$gs" train --data "$tmp/nowhere"
mkdir -p "$tmp/corrupt"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  printf 'not an idx file' | gzip > "$tmp/corrupt/$f.gz"
done
expect_error any "corrupt/train-images" "a corrupt data file is named" \
  "$gs" run -np 1 -- "$gs" train --data "$tmp/corrupt"
expect_error any "diverged at epoch 1, step" "divergence names the epoch, step and layer" \
  "$gs" run -np 2 -- "$gs" train --synthetic 4096 --max-steps 30 --model mlp --lr 90

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
