#!/usr/bin/env bash
# Failures on one rank alone end every rank, non-zero, with messages:
#   - train with missing data on rank 1 (rank 0 has good data);
#   - train --resume with a corrupt checkpoint on rank 1 only;
#   - replay with a missing profile on rank 1 only;
#   - bad options on rank 1 only, and ranks whose step counts differ;
#   - output paths that cannot be written, checked before training;
#   - data sets whose images are 64x64 or 32x32 (train or test split): a
#     clear error naming the file and both shapes, never a signal.
# Each multi-rank case runs with Open MPI told not to kill the job when a
# rank exits non-zero (orte_abort_on_non_zero_status=0), so every rank must
# end by itself: a rank left waiting in a collective hangs the case until the
# timeout below, and the case fails. Every rank must end within 30 s; the
# time each case took is printed. (In that mode mpirun, and so gradsync run,
# exits 0 whatever the ranks' statuses: each rank's status is recorded by
# the wrapper instead.)
# Usage: test_faults.sh GRADSYNC MAKE_IDX_PY
set -u
gs=$1
make_idx=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GRADSYNC_CALIBRATE=0
python=/usr/bin/python3
[ -x "$python" ] || python=python3
limit=30
fails=0 passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

# one_rank_fails NAME "RANK 1'S ARGS" "OTHER RANKS' ARGS" RANK1_PATTERN OTHERS_PATTERN [NP]
# Runs `gradsync ARGS` on NP ranks (default 2) where rank 1 gets its own
# arguments; checks that every rank exits non-zero within $limit s and that
# rank 1's and rank 0's output match the patterns.
one_rank_fails() {
  local name=$1 bad_args=$2 good_args=$3 pat1=$4 pat0=$5 np=${6:-2}
  local dir=$tmp/$name
  mkdir -p "$dir"
  cat > "$dir/rank.sh" <<EOF
#!/bin/sh
r=\$OMPI_COMM_WORLD_RANK
if [ "\$r" = 1 ]; then args="$bad_args"; else args="$good_args"; fi
"$gs" \$args > "$dir/out.\$r" 2>&1
rc=\$?
echo \$rc > "$dir/rc.\$r"
exit \$rc
EOF
  chmod +x "$dir/rank.sh"
  local t0 t1 rc
  t0=$(date +%s.%N)
  OMPI_MCA_orte_abort_on_non_zero_status=0 timeout $((limit + 30)) \
    "$gs" run -np "$np" -- "$dir/rank.sh" > "$dir/run.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  local took
  took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  local why=""
  [ $rc -eq 124 ] && why="$why; the job hung (killed after $((limit + 30)) s)"
  awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t > l) }' && why="$why; took $took s > $limit s"
  for ((k = 0; k < np; k++)); do
    if [ ! -f "$dir/rc.$k" ]; then
      # An aborted job's ranks are killed by the launcher (ABORT=1).
      [ "${ABORT:-0}" = 1 ] || why="$why; rank $k did not end by itself"
    elif [ "$(cat "$dir/rc.$k")" = 0 ]; then
      why="$why; rank $k exited 0"
    fi
  done
  [ "${ABORT:-0}" = 1 ] && [ $rc -eq 0 ] && why="$why; the aborted job exited 0"
  grep -Eq -- "$pat1" "$dir/out.1" 2>/dev/null || why="$why; rank 1's output lacks /$pat1/"
  [ -z "$pat0" ] || grep -Eq -- "$pat0" "$dir/out.0" 2>/dev/null ||
    why="$why; rank 0's output lacks /$pat0/"
  if [ -z "$why" ]; then
    local codes=""
    for ((k = 0; k < np; k++)); do codes="$codes $(cat "$dir/rc.$k" 2>/dev/null || echo killed)"; done
    ok "$name: every rank ended non-zero in $took s (exit statuses:$codes)"
  else
    bad "$name${why}
      rank 0: $(head -c 600 "$dir/out.0" 2>/dev/null)
      rank 1: $(head -c 600 "$dir/out.1" 2>/dev/null)
      run: $(tail -5 "$dir/run.log")"
  fi
}

train_ok="train --synthetic 4096 --model mlp --batch 16 --max-steps 200 --epochs 3"

# Missing data on rank 1.
one_rank_fails missing_data "train --data $tmp/nowhere --model mlp --batch 16" "$train_ok" \
  "rank 1: .*$tmp/nowhere/train-images-idx3-ubyte" "rank 0: stopping: rank 1 failed \\(.*nowhere"

# Three ranks, rank 1 failing: both others stop.
one_rank_fails missing_data_np3 "train --data $tmp/nowhere --model mlp --batch 16" "$train_ok" \
  "rank 1: .*nowhere/train-images" "rank 0: stopping: rank 1 failed" 3

# A corrupt checkpoint on rank 1 only: a good one first (on the 2 ranks
# that resume it: --resume refuses a checkpoint of another rank count), then
# a copy with bytes overwritten in the middle.
"$gs" run -np 2 -- "$gs" train --synthetic 4096 --model mlp --batch 16 --max-steps 4 --checkpoint "$tmp/ck0" \
  --json > "$tmp/ck0.log" 2>&1 || bad "writing a checkpoint failed: $(tail -3 "$tmp/ck0.log")"
mkdir -p "$tmp/ck1"
cp "$tmp/ck0/checkpoint.gsck" "$tmp/ck1/checkpoint.gsck"
printf 'corrupt!corrupt!' | dd of="$tmp/ck1/checkpoint.gsck" bs=1 seek=4000 conv=notrunc 2>/dev/null
resume="train --synthetic 4096 --model mlp --batch 16 --max-steps 200 --epochs 3 --resume"
one_rank_fails corrupt_resume "$resume --checkpoint $tmp/ck1" "$resume --checkpoint $tmp/ck0" \
  "rank 1: .*ck1/checkpoint.gsck" "rank 0: stopping: rank 1 failed \\(.*ck1/checkpoint.gsck"
# A missing one, likewise.
one_rank_fails missing_resume "$resume --checkpoint $tmp/ck_none" "$resume --checkpoint $tmp/ck0" \
  "rank 1: .*ck_none/checkpoint.gsck" "rank 0: stopping: rank 1 failed"

# Replay with a missing profile on rank 1.
prof=$tmp/small.json
cat > "$prof" <<'EOF'
{"name": "small", "batch_size": 4, "device": "test", "source": "hand-written",
 "forward_s": 0.002,
 "tensors": [
  {"name": "w1", "numel": 4096, "backward_s": 0.001},
  {"name": "w2", "numel": 65536, "backward_s": 0.001}]}
EOF
one_rank_fails replay_missing_profile "replay --profile $tmp/none.json --policy wfbp" \
  "replay --profile $prof --policy wfbp --iters 200" \
  "$tmp/none.json" "rank 0: stopping: rank 1 failed \\(.*none.json"

# Bad options on one rank.
one_rank_fails bad_option "train --synthetic 4096 --batch 0" "$train_ok" \
  "--batch '0'" "rank 0: stopping: rank 1 failed \\(--batch '0' must be"
# Ranks that would run different numbers of steps.
one_rank_fails different_steps "train --synthetic 4096 --model mlp --batch 16 --max-steps 5" \
  "train --synthetic 4096 --model mlp --batch 16 --max-steps 6" \
  "differ in the steps per epoch: rank 0 has 6, rank 1 has 5" \
  "differ in the steps per epoch: rank 0 has 6, rank 1 has 5"

# A collective failing on rank 1 (GRADSYNC_FAULT, the communicator's test
# hook, where the library has it): inside a training step, where the others
# wait in the engine's collectives, and in the trainer's own broadcast of the
# initial weights (the third collective). The failing rank ends the job at
# once; GRADSYNC_TIMEOUT=120 shows that the watchdog is not what ends it.
if grep -q GRADSYNC_FAULT "$gs"; then
  train_fault="train --synthetic 4096 --model mlp --batch 16 --max-steps 200 --epochs 3 --policy wfbp"
  export GRADSYNC_TIMEOUT=120
  ABORT=1 GRADSYNC_FAULT=rank=1,call=20 one_rank_fails fault_in_step "$train_fault" \
    "$train_fault" "fatal: train: epoch 1, step .*injected fault" ""
  ABORT=1 GRADSYNC_FAULT=rank=1,call=3 one_rank_fails fault_in_weights_bcast "$train_fault" \
    "$train_fault" "fatal: train: cannot agree .*injected fault" ""
  unset GRADSYNC_TIMEOUT
else
  echo "skip the injected faults: this library has no GRADSYNC_FAULT"
fi

# expect_error PATTERN DESCRIPTION ARGS...: exits 1 or 2 (never a signal)
# with the pattern in its output.
expect_error() {
  local pat=$1 what=$2; shift 2
  "$@" > "$tmp/err.log" 2>&1
  local rc=$?
  if { [ $rc -eq 1 ] || [ $rc -eq 2 ]; } && grep -Eq -- "$pat" "$tmp/err.log"; then
    ok "$what (exit $rc)"
  else
    bad "$what: exit $rc, output: $(head -c 800 "$tmp/err.log")"
  fi
}

# Output paths are checked before any work.
expect_error "GRADSYNC_TIMELINE $tmp/no/dir/t.json" "an unwritable timeline is refused at start-up" \
  env GRADSYNC_TIMELINE="$tmp/no/dir/t.json" "$gs" run -np 2 -- "$gs" train --synthetic 4096 \
  --model mlp --batch 16 --max-steps 2
touch "$tmp/afile"
expect_error "--checkpoint $tmp/afile/sub: cannot create" \
  "an unusable checkpoint directory is refused at start-up" \
  "$gs" run -np 2 -- "$gs" train --synthetic 4096 --model mlp --batch 16 --max-steps 2 \
  --checkpoint "$tmp/afile/sub"

# Data sets the model cannot take.
"$python" "$make_idx" "$tmp/d64" 200 64 64
"$python" "$make_idx" "$tmp/d32" 200 32 32
"$python" "$make_idx" "$tmp/dtest32" 200 28 28 32 32
"$python" "$make_idx" "$tmp/d28" 200 28 28
for model in mlp cnn; do
  expect_error "$tmp/d64/train-images-idx3-ubyte.gz: the images are 1x64x64 .* takes 1x28x28" \
    "64x64 images: a clear error for the $model" \
    "$gs" train --data "$tmp/d64" --model "$model" --batch 8 --max-steps 2
done
expect_error "$tmp/d32/train-images-idx3-ubyte.gz: the images are 1x32x32 .* takes 1x28x28" \
  "32x32 images: a clear error" \
  "$gs" run -np 2 -- "$gs" train --data "$tmp/d32" --model cnn --batch 8 --max-steps 2
expect_error "$tmp/dtest32/t10k-images-idx3-ubyte.gz: the images are 1x32x32" \
  "a test split of 32x32 images: a clear error" \
  "$gs" train --data "$tmp/dtest32" --model mlp --batch 8 --max-steps 2
if "$gs" train --data "$tmp/d28" --model mlp --batch 8 --max-steps 2 --json > "$tmp/d28.log" 2>&1; then
  ok "the same generator's 28x28 set trains"
else
  bad "a 28x28 set of the generator fails: $(tail -3 "$tmp/d28.log")"
fi

echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
