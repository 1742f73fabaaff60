#!/usr/bin/env bash
# Commits with compressed gradients keep each rank's compressor memory
# (error-feedback residual, DGC's momentum, step counter, learning rate) in
# DIR/compress.rank<R>.step<S>.gsck beside the checkpoint; end to end:
#   - same world size: a run stopped at a global step and resumed ends
#     bitwise where the uninterrupted run ends, top-k with error feedback
#     and a density warm-up (commits in the background) and DGC (momentum
#     correction; commits in the foreground, GRADSYNC_COMMIT_SYNC) and
#     SIDCo (whose adaptive stage count is kept with the memory); the
#     same commit resumed with its memory hidden from the description
#     starts the memory at zero, says so, and ends elsewhere (so the
#     bitwise check sees the memory); only the last commit's files remain;
#   - another world size (--global-batch): 2 ranks -> 3 and 2 -> 1 resume
#     with every new rank starting from the mean of the old ranks' memory,
#     which the summary reports; the old ranks' files are removed once a
#     newer commit is in;
#   - a corrupt or missing per-rank file fails the resume naming the file;
#     a run without compression resuming a checkpoint that has memory says
#     it is not used.
# Usage: test_commit_compress.sh GRADSYNC CKPT_COMPARE
# shellcheck source=tests/train/commit_lib.sh
. "$(dirname "$0")/commit_lib.sh"

# 2048 samples, 2 ranks x 16: 64 steps per epoch, 2 epochs.
args="--model mlp --synthetic 2048 --batch 16 --epochs 2 --policy wfbp --schedule cosine"

for z in topk dgc sidco; do
  if [ $z = topk ]; then
    zargs="--compress topk:0.01 --compress-warmup-steps 50"
    unset GRADSYNC_COMMIT_SYNC
  elif [ $z = sidco ]; then
    # SIDCo's stage count adapts as its fits miss: memory too.
    zargs="--compress sidco:0.01"
    unset GRADSYNC_COMMIT_SYNC
  else
    zargs="--compress dgc:0.01"
    export GRADSYNC_COMMIT_SYNC=1
  fi
  # shellcheck disable=SC2086
  train ref-$z $zargs || bad "$z: the uninterrupted run failed: $(tail -3 "$tmp/ref-$z.log")"
  # Stopped at step 75 (epoch 2, step 11), committing every 7 steps before.
  # shellcheck disable=SC2086
  if train cut-$z $zargs --commit-every 7 --stop-at-step 75 &&
     [ -f "$tmp/cut-$z/compress.rank0.step75.gsck" ] &&
     [ -f "$tmp/cut-$z/compress.rank1.step75.gsck" ] &&
     [ "$(ls "$tmp/cut-$z" | grep -c '^compress\.')" = 2 ]; then
    ok "$z: stopped after step 75, each rank's memory beside the commit (earlier ones removed)"
  else
    bad "$z: no memory files of step 75 alone: $(ls "$tmp/cut-$z" | tr '\n' ' ') $(tail -3 "$tmp/cut-$z.log")"
  fi
  cp -r "$tmp/cut-$z" "$tmp/zero-$z"
  # shellcheck disable=SC2086
  if train cut-$z $zargs --commit-every 7 --resume &&
     grep -q "each rank's compressor memory restored" "$tmp/cut-$z.log" &&
     "$cmp_ckpt" mlp "$tmp/ref-$z/checkpoint.gsck" "$tmp/cut-$z/checkpoint.gsck" \
       > "$tmp/$z.cmp" 2>&1; then
    ok "$z: resumed from the commit at step 75 with its memory: bitwise the uninterrupted run's end"
  else
    bad "$z: the resumed run differs or failed: $(cat "$tmp/$z.cmp" 2>/dev/null) $(tail -3 "$tmp/cut-$z.log")"
  fi
  if [ "$(ls "$tmp/cut-$z" | grep '^compress\.' | tr '\n' ' ')" = \
       "compress.rank0.step128.gsck compress.rank1.step128.gsck " ]; then
    ok "$z: after the resumed run only the last checkpoint's memory files remain"
  else
    bad "$z: memory files left: $(ls "$tmp/cut-$z" | tr '\n' ' ')"
  fi
  # The control: the same commit without its memory (as a checkpoint
  # written without compression) starts at zero and ends elsewhere.
  sed -i 's/"sync_rank_files":2/"sync_rank_files":0/g' "$tmp/zero-$z/checkpoint.json"
  # shellcheck disable=SC2086
  if train zero-$z $zargs --commit-every 7 --resume &&
     grep -q "keeps no compressor memory .*starts at zero" "$tmp/zero-$z.log" &&
     ! "$cmp_ckpt" mlp "$tmp/ref-$z/checkpoint.gsck" "$tmp/zero-$z/checkpoint.gsck" \
       > /dev/null 2>&1; then
    ok "$z: the same commit without its memory starts it at zero (noted) and ends elsewhere"
  else
    bad "$z: without the memory: $(tail -3 "$tmp/zero-$z.log")"
  fi
done
unset GRADSYNC_COMMIT_SYNC

# Another world size: the global batch kept (2 ranks x 24, stopped at
# step 10, resumed on 3 ranks x 16 and on 1 rank x 48).
gargs="--model mlp --synthetic 1000 --global-batch 48 --epochs 2 --policy wfbp --compress topk:0.01"
"$gs" run -np 2 -- "$gs" train $gargs --checkpoint "$tmp/grow" --stop-at-step 10 \
  > "$tmp/grow1.log" 2>&1 || bad "2 ranks stopping at step 10: $(tail -3 "$tmp/grow1.log")"
cp -r "$tmp/grow" "$tmp/shrink"
cp -r "$tmp/grow" "$tmp/broken"
"$gs" run -np 3 -- "$gs" train $gargs --checkpoint "$tmp/grow" --resume --json \
  > "$tmp/grow2.log" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q '"memory_resumed":{"rule":"mean","from_ranks":2}' "$tmp/grow2.log" &&
   [ "$(ls "$tmp/grow" | grep '^compress\.' | tr '\n' ' ')" = \
     "compress.rank0.step40.gsck compress.rank1.step40.gsck compress.rank2.step40.gsck " ]; then
  ok "2 ranks stopped at step 10, 3 resumed from the mean of their memory; old files removed"
else
  bad "resize 2 -> 3: exit $rc: $(ls "$tmp/grow" | tr '\n' ' ') $(tail -3 "$tmp/grow2.log" | cut -c1-400)"
fi
"$gs" train $gargs --checkpoint "$tmp/shrink" --resume > "$tmp/shrink.log" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q "compressor memory of 2 ranks averaged onto 1" "$tmp/shrink.log" &&
   [ "$(ls "$tmp/shrink" | grep '^compress\.' | tr '\n' ' ')" = "compress.rank0.step40.gsck " ]; then
  ok "2 ranks -> 1: the memory averaged (noted); the old ranks' files removed"
else
  bad "resize 2 -> 1: exit $rc: $(ls "$tmp/shrink" | tr '\n' ' ') $(tail -3 "$tmp/shrink.log")"
fi

# A corrupt file, then a missing one: the resume fails naming it.
f="$tmp/broken/compress.rank1.step10.gsck"
printf '\x55' | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null
out=$("$gs" run -np 2 -- "$gs" train $gargs --checkpoint "$tmp/broken" --resume 2>&1); rc=$?
if [ $rc != 0 ] && echo "$out" | grep -q "compressor memory $f: checksum mismatch"; then
  ok "a corrupt memory file: the resume fails naming it"
else
  bad "a corrupt memory file: exit $rc: $(echo "$out" | grep -i "memory\|error" | head -3)"
fi
# On one rank (the two memories averaged onto it) the failure is every
# rank's, but a failure (exit 1), not a usage error: no "(see --help)" (it
# had one until 2026-12-06).
out=$("$gs" train $gargs --checkpoint "$tmp/broken" --resume 2>&1); rc=$?
if [ $rc = 1 ] && echo "$out" | grep -q "compressor memory $f: checksum mismatch" &&
   ! echo "$out" | grep -q "see --help"; then
  ok "a corrupt memory file on one rank: exit 1, no usage hint"
else
  bad "a corrupt memory file on one rank: exit $rc: $(echo "$out" | grep -i "memory\|error" | head -3)"
fi
rm -f "$f"
out=$("$gs" run -np 3 -- "$gs" train $gargs --checkpoint "$tmp/broken" --resume 2>&1); rc=$?
if [ $rc != 0 ] && echo "$out" | grep -q "$f: No such file"; then
  ok "a missing memory file: the resume on another size fails naming it"
else
  bad "a missing memory file: exit $rc: $(echo "$out" | grep -i "memory\|error" | head -3)"
fi
# Compression off now: the checkpoint's memory is not used, and said so.
offargs="--model mlp --synthetic 1000 --global-batch 48 --epochs 3 --policy wfbp"
if "$gs" train $offargs --checkpoint "$tmp/shrink" --resume \
     > "$tmp/off.log" 2>&1 && grep -q "compressor memory of 1 rank in .* is not used" "$tmp/off.log"; then
  ok "resumed without compression: the memory is not used (noted)"
else
  bad "resumed without compression: $(tail -3 "$tmp/off.log")"
fi

echo "$passes passed, $fails failed"
[ $fails = 0 ]
