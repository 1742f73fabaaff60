#!/usr/bin/env bash
# gradsync train's checks before work (issue 14), end to end:
#   - options that cannot apply together, repeated or unknown: exit 2, one
#     line;
#   - an unwritable checkpoint directory: exit 2 (rank 0's verdict every
#     rank's, said once), and one under a missing directory; a timeline:
#     exit 1; before any training (probed by creating a file: root passes
#     access() on /proc);
#   - --resume with a checkpoint that does not fit the run (batch, ranks,
#     model, data, seed, epochs under a schedule, beyond --epochs, another
#     checkpoint's description): exit 2 (the usage exit: every rank refuses
#     alike), said once naming what differs, before training; a missing
#     description, and a garbage, truncated or unparsable checkpoint or
#     description: exit 1 naming the file, said once, no usage note.
# Usage: test_train_checks.sh GRADSYNC
set -u
gs=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GRADSYNC_CALIBRATE=0
fails=0 passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

expect_error() { # expect_error STATUS PATTERN DESCRIPTION ARGS...
  local want=$1 pat=$2 what=$3; shift 3
  "$@" > "$tmp/err.log" 2>&1
  local rc=$?
  if { [ "$want" = any ] && [ $rc -ne 0 ]; } || [ "$rc" = "$want" ]; then
    if grep -q -- "$pat" "$tmp/err.log"; then ok "$what (exit $rc)"; return; fi
  fi
  bad "$what: exit $rc, output: $(head -c 400 "$tmp/err.log")"
}

# Options that cannot apply together, repeated or unknown: exit 2, one line.
expect_error 2 "given more than once" "a repeated option is refused" "$gs" train --batch 8 --batch 16
expect_error 2 "synthetic and --data" "--synthetic with --data is refused" \
  "$gs" train --synthetic 64 --data "$tmp"
expect_error 2 "not with --synthetic" "--data-cache with --synthetic is refused" \
  "$gs" train --synthetic 64 --data-cache "$tmp"
# Bad input that a restart would not cure is exit 2 (an elastic job or the
# cluster manager ends it at once rather than spend its restarts).
mkdir -p "$tmp/empty-ckpt"
expect_error 2 "--resume: there is no checkpoint to resume from" \
  "a plain --resume with no checkpoint is refused" \
  "$gs" train --model mlp --synthetic 64 --epochs 1 --checkpoint "$tmp/empty-ckpt" --resume
expect_error 2 "train-images-idx3-ubyte.gz is missing" "a missing data directory is bad input" \
  "$gs" train --model mlp --data "$tmp/no-such-data" --epochs 1
expect_error 2 "not to resnet" "--dropout with resnet is refused" \
  "$gs" train --model resnet --dropout 0.5
expect_error 2 "needs a momentum" "--nesterov with --momentum 0 is refused" \
  "$gs" train --nesterov --momentum 0
expect_error 2 "longer than the run" "a warm-up longer than the run is refused" \
  "$gs" train --epochs 2 --warmup-epochs 3
expect_error 2 "unknown option '--bogus'" "an unknown option is one line" "$gs" train --bogus
[ "$(wc -l < "$tmp/err.log")" -eq 1 ] && ok "an unknown option's message is one line" ||
  bad "an unknown option printed $(wc -l < "$tmp/err.log") lines"
# Where the run will write is checked before any work, by creating a file
# there (as root, access() would say yes to /proc).
# The checkpoint directory is rank 0's to write, its verdict the job's:
# a usage error (2), which a relaunch would not cure (until 2026-12-06 exit
# 1, and an elastic job or the cluster manager spent its restarts on it).
expect_error 2 "checkpoint /proc: cannot create a file" "an unwritable checkpoint directory is refused" \
  "$gs" run -np 2 -- "$gs" train --synthetic 4096 --model mlp --batch 16 --max-steps 2 --checkpoint /proc
grep -q "epoch 1" "$tmp/err.log" && bad "the unwritable checkpoint directory was found after training"
[ "$(grep -c "cannot create a file" "$tmp/err.log")" = 1 ] ||
  bad "the unwritable checkpoint directory was said $(grep -c "cannot create a file" "$tmp/err.log") times"
expect_error 2 "checkpoint $tmp/no/ck: cannot create the directory: No such file" \
  "a checkpoint directory under a missing one is refused" \
  "$gs" run -np 2 -- "$gs" train --synthetic 4096 --model mlp --batch 16 --max-steps 2 \
  --checkpoint "$tmp/no/ck"
expect_error 2 "GRADSYNC_TIMELINE /proc/t.json: cannot create a file" "an unwritable timeline is refused" \
  env GRADSYNC_TIMELINE=/proc/t.json "$gs" train --synthetic 4096 --model mlp --batch 16 --max-steps 2
grep -q "epoch 1" "$tmp/err.log" && bad "the unwritable timeline was found after training"
# The checkpoints to resume: half/ at epoch 2 of 2 (2 ranks, mlp, batch
# 16, seed 1, the synthetic 4096 set), s1/ another run's at epoch 1.
"$gs" run -np 2 -- "$gs" train --synthetic 4096 --epochs 2 --max-steps 6 --model mlp \
  --batch 16 --policy wfbp --checkpoint "$tmp/half" --json > "$tmp/half.log" 2>&1 ||
  bad "writing the checkpoint failed: $(tail -3 "$tmp/half.log")"
"$gs" run -np 2 -- "$gs" train --synthetic 4096 --epochs 1 --max-steps 8 --model mlp \
  --batch 16 --policy wfbp --checkpoint "$tmp/s1" --json > "$tmp/s1.log" 2>&1 ||
  bad "writing the second checkpoint failed: $(tail -3 "$tmp/s1.log")"
# A fresh run (no --resume) into a directory holding a commit: said once,
# naming it, then replaced (until 2026-12-06 without a word); none where
# the directory was empty (s1's run).
cp -r "$tmp/s1" "$tmp/again"
"$gs" run -np 2 -- "$gs" train --synthetic 4096 --epochs 1 --max-steps 2 --model mlp \
  --batch 16 --checkpoint "$tmp/again" > "$tmp/again.log" 2>&1
rc=$? warned=$(grep -c "warning: --checkpoint $tmp/again holds a commit (model mlp, epoch 1), in checkpoint.json: without --resume this run starts afresh" "$tmp/again.log")
if [ $rc = 0 ] && [ "$warned" = 1 ] && ! grep -q "holds a commit" "$tmp/s1.log"; then
  ok "a fresh run over another run's commit: warned once, naming it"
else bad "a fresh run over a commit: exit $rc, warned $warned times (want 1), s1's log: $(grep -c "holds a commit" "$tmp/s1.log")"; fi
# A stop inside an epoch: the summary's throughput counts that epoch's
# images (11 steps of 16: 176 over train_s; they were left out until
# 2026-12-06); a stop inside the first epoch has no accuracy (null, not 0).
"$gs" train --model mlp --synthetic 4096 --epochs 2 --max-steps 6 --batch 16 \
  --checkpoint "$tmp/stop11" --stop-at-step 11 --json > "$tmp/stop11.log" 2>&1
"$gs" train --model mlp --synthetic 4096 --epochs 2 --max-steps 6 --batch 16 \
  --checkpoint "$tmp/stop3" --stop-at-step 3 --json > "$tmp/stop3.log" 2>&1
if /usr/bin/python3 - "$tmp/stop11.log" "$tmp/stop3.log" <<'EOF2'
import json, sys
def summary(path):
    return [json.loads(l)["summary"] for l in open(path) if l.startswith('{"summary"')][0]
a, b = summary(sys.argv[1]), summary(sys.argv[2])
assert abs(a["images_per_s"] * a["train_s"] - 176) <= 176 * 0.02 + 0.1 * a["images_per_s"] / 100, a
assert a["test_accuracy"] is not None and a["stopped_at_step"] == 11, a
assert b["test_accuracy"] is None and b["stopped_at_step"] == 3, b
assert abs(b["images_per_s"] * b["train_s"] - 48) <= 48 * 0.02 + 0.1 * b["images_per_s"] / 100, b
EOF2
then ok "a stop inside an epoch: its images counted; inside the first: no accuracy"
else bad "the summary after a stop: $(grep -h summary "$tmp/stop11.log" "$tmp/stop3.log" | cut -c1-400)"; fi
# --resume refuses a checkpoint that does not fit the run, naming what
# differs: every rank finds it alike, so it is said once (by rank 0, "on
# every rank" where there are several) and exits 2, as bad options do.
resume_mismatch() { # resume_mismatch PATTERN DESCRIPTION NP ARGS...
  local pat=$1 what=$2 np=$3; shift 3
  "$gs" run -np "$np" -- "$gs" train --max-steps 6 --checkpoint "$tmp/half" --resume "$@" \
    > "$tmp/mm.log" 2>&1
  local rc=$? said every=1
  said=$(grep -c -- "does not fit this run: $pat" "$tmp/mm.log")
  [ "$np" -gt 1 ] && ! grep -q -- "does not fit this run: $pat.*(on every rank) (see --help)$" "$tmp/mm.log" &&
    every=0
  if [ $rc -eq 2 ] && [ "$said" = 1 ] && [ $every = 1 ] && ! grep -q '"epoch"' "$tmp/mm.log"; then
    ok "--resume refuses $what, once (exit 2)"
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
# A checkpoint or description that cannot be parsed is a failure of the
# run's files, exit 1 as a missing one is, said once and without the usage
# note, on one rank and on several alike (until 2026-12-06 a truncated or
# garbage checkpoint.gsck and an unparsable checkpoint.json exited 2 with
# "(see --help)"). stop11/ is a 1-rank commit, half/ a 2-rank checkpoint.
corrupt_resume() { # corrupt_resume NP DIR FILE CONTENT PATTERN DESCRIPTION ARGS...
  local np=$1 dir=$2 file=$3 content=$4 pat=$5 what=$6; shift 6
  rm -rf "$tmp/corrupt" && cp -r "$tmp/$dir" "$tmp/corrupt" ||
    { bad "$what: cannot copy $dir"; return; }
  if [ "$content" = truncate ]; then head -c 100 "$tmp/$dir/$file" > "$tmp/corrupt/$file"
  else printf '%s' "$content" > "$tmp/corrupt/$file"; fi
  "$gs" run -np "$np" -- "$gs" train "$@" --checkpoint "$tmp/corrupt" --resume \
    > "$tmp/corrupt.log" 2>&1
  local rc=$? said
  said=$(grep -c -- "$pat" "$tmp/corrupt.log")
  if [ $rc -eq 1 ] && [ "$said" = 1 ] && ! grep -q "see --help" "$tmp/corrupt.log" &&
     ! grep -q '"epoch"' "$tmp/corrupt.log"; then
    ok "--resume with $what on $np rank(s): a failure (exit 1), said once, no usage note"
  else
    bad "--resume with $what on $np rank(s): exit $rc, said $said times: $(grep -m2 'gradsync train' "$tmp/corrupt.log")"
  fi
}
one="--model mlp --synthetic 4096 --epochs 2 --max-steps 6 --batch 16"
corrupt_resume 1 stop11 checkpoint.gsck garbage \
  "checkpoint $tmp/corrupt/checkpoint.gsck: truncated (7 bytes)$" "a garbage checkpoint.gsck" $one
corrupt_resume 1 stop11 checkpoint.gsck truncate \
  "checkpoint.gsck: 100 bytes, expected .* (truncated)$" "a truncated checkpoint.gsck" $one
corrupt_resume 1 stop11 checkpoint.json '{bad' \
  "checkpoint.json: not a valid checkpoint description (JSON object)$" \
  "an unparsable checkpoint.json" $one
corrupt_resume 2 half checkpoint.gsck garbage \
  "checkpoint.gsck: truncated (7 bytes) (on every rank)$" "a garbage checkpoint.gsck" \
  $mm --model mlp --batch 16 --max-steps 6
corrupt_resume 2 half checkpoint.gsck truncate \
  "checkpoint.gsck: 100 bytes, expected .* (truncated) (on every rank)$" \
  "a truncated checkpoint.gsck" $mm --model mlp --batch 16 --max-steps 6
corrupt_resume 2 half checkpoint.json '{bad' \
  "not a valid checkpoint description (JSON object) (on every rank)$" \
  "an unparsable checkpoint.json" $mm --model mlp --batch 16 --max-steps 6
cp "$tmp/half/checkpoint.json" "$tmp/half_nometa/checkpoint.json"
cp "$tmp/s1/checkpoint.gsck" "$tmp/half_nometa/checkpoint.gsck"
"$gs" run -np 2 -- "$gs" train $mm --model mlp --batch 16 --max-steps 6 \
  --checkpoint "$tmp/half_nometa" --resume > "$tmp/mm.log" 2>&1
rc=$?
if [ $rc -eq 2 ] && [ "$(grep -c "description is of another checkpoint" "$tmp/mm.log")" = 1 ]; then
  ok "--resume refuses a description of another checkpoint file, once (exit 2)"
else
  bad "--resume with another checkpoint's description: exit $rc, $(head -c 400 "$tmp/mm.log")"
fi

# A save killed after its description was renamed into place but before the
# new checkpoint was: checkpoint.json describes epoch 2 (and, as "previous",
# epoch 1) while checkpoint.gsck is still epoch 1's. --resume takes epoch 1's
# and trains epoch 2 again.
cut="--synthetic 4096 --max-steps 6 --model mlp --batch 16 --policy wfbp --json"
"$gs" run -np 2 -- "$gs" train $cut --epochs 1 --checkpoint "$tmp/cut" > "$tmp/cut.log" 2>&1 &&
  cp "$tmp/cut/checkpoint.gsck" "$tmp/epoch1.gsck" &&
  "$gs" run -np 2 -- "$gs" train $cut --epochs 2 --checkpoint "$tmp/cut" --resume \
    > "$tmp/cut.log" 2>&1 &&
  mv "$tmp/cut/checkpoint.gsck" "$tmp/cut/checkpoint.gsck.next" &&
  cp "$tmp/epoch1.gsck" "$tmp/cut/checkpoint.gsck" ||
  bad "preparing the cut save failed: $(tail -3 "$tmp/cut.log")"
"$gs" run -np 2 -- "$gs" train $cut --epochs 2 --checkpoint "$tmp/cut" --resume \
  > "$tmp/cut.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -Eq '"epoch": ?2' "$tmp/cut.log" && ! grep -Eq '"epoch": ?1,' "$tmp/cut.log"; then
  ok "--resume after a save cut between its two renames starts from the previous checkpoint"
else
  bad "--resume after a cut save: exit $rc, $(head -c 400 "$tmp/cut.log")"
fi

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
