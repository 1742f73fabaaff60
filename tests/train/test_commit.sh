#!/usr/bin/env bash
# gradsync train --commit-every / --stop-at-step, end to end on 2 ranks:
#   - a run stopped at a global step inside an epoch and resumed from its
#     commit ends bitwise where the uninterrupted run ends (SGD, and K-FAC
#     with its per-rank factors), commits and all;
#   - the summary counts the commits;
#   - elastic resizing from a commit: the global batch kept (4 -> 3 ranks)
#     or the per-rank batch with linear lr scaling (2 -> 4), every sample of
#     each epoch used once; a global batch that the new size cannot share is
#     refused naming the sizes that can; a plain run keeps its world size;
#   - --resume=auto starts afresh without a checkpoint; SIGUSR1 stops the
#     job at its next commit with exit 3;
#   - commits need a checkpoint directory, and refuse the asynchronous sync
#     modes (their workers share no step).
# Usage: test_commit.sh GRADSYNC CKPT_COMPARE
# shellcheck source=tests/train/commit_lib.sh
. "$(dirname "$0")/commit_lib.sh"

# 1024 samples, 2 ranks x 16: 32 steps per epoch, 2 epochs.
args="--model mlp --synthetic 1024 --batch 16 --epochs 2 --policy wfbp --schedule cosine"

for opt in sgd kfac; do
  extra=""
  [ $opt = kfac ] && extra="--optimizer kfac --kfac-inv-every 3"
  # shellcheck disable=SC2086
  train ref-$opt $extra || bad "$opt: the uninterrupted run failed: $(tail -3 "$tmp/ref-$opt.log")"
  # Stopped at step 45 (epoch 2, step 13), committing every 7 steps before.
  # shellcheck disable=SC2086
  if train cut-$opt $extra --commit-every 7 --stop-at-step 45 &&
     grep -q "stopped after global step 45" "$tmp/cut-$opt.log"; then
    ok "$opt: stopped after global step 45 with a commit"
  else
    bad "$opt: no stop at step 45: $(tail -3 "$tmp/cut-$opt.log")"
  fi
  # shellcheck disable=SC2086
  if train cut-$opt $extra --commit-every 7 --resume &&
     "$cmp_ckpt" mlp "$tmp/ref-$opt/checkpoint.gsck" "$tmp/cut-$opt/checkpoint.gsck" \
       > "$tmp/$opt.cmp" 2>&1; then
    ok "$opt: resumed from the commit at step 45: bitwise the uninterrupted run's end"
  else
    bad "$opt: the resumed run differs or failed: $(cat "$tmp/$opt.cmp" 2>/dev/null) $(tail -3 "$tmp/cut-$opt.log")"
  fi
done

if train counted --commit-every 10 --json &&
   grep -q '"commits":6,' "$tmp/counted.log" && grep -q '"commit_s":' "$tmp/counted.log"; then
  ok "the summary counts 6 commits inside 2 epochs of 32 steps (every 10: 10, 20, 30, 40, 50, 60)"
else
  bad "no commit count in the summary: $(tail -1 "$tmp/counted.log" | cut -c1-300)"
fi

# Resizing: the global batch kept (4 ranks x 12, stopped at step 10,
# resumed on 3 ranks x 16): each epoch still trains 20 steps of 48, every
# sample of its permutation before position 960 once.
gargs="--model mlp --synthetic 1000 --global-batch 48 --epochs 2 --policy wfbp --json"
"$gs" run -np 4 -- "$gs" train $gargs --checkpoint "$tmp/grow" --stop-at-step 10 \
  > "$tmp/grow1.log" 2>&1
"$gs" run -np 3 -- "$gs" train $gargs --checkpoint "$tmp/grow" --resume > "$tmp/grow2.log" 2>&1
rc=$?
if [ $rc = 0 ] && [ "$(grep -c '"samples":960,"dataset_samples":1000' "$tmp/grow2.log")" = 2 ] &&
   grep -q '"ranks":3,' "$tmp/grow2.log"; then
  ok "4 ranks stopped at step 10, 3 ranks resumed: both epochs trained 960 samples once each"
else
  bad "resize 4 -> 3 with --global-batch 48: exit $rc: $(tail -3 "$tmp/grow2.log" | cut -c1-300)"
fi
out=$("$gs" run -np 5 -- "$gs" train $gargs --checkpoint "$tmp/grow" --resume 2>&1); rc=$?
if [ $rc = 2 ] && echo "$out" | grep -q -- "--global-batch 48: 5 ranks cannot share it equally (world sizes that can, up to 20: 1, 2, 3, 4, 6, 8, 12, 16)"; then
  ok "--global-batch 48 on 5 ranks: exit 2 naming the sizes that fit"
else
  bad "--global-batch 48 on 5 ranks: exit $rc: $(echo "$out" | head -3)"
fi
# Linear scaling: the batch per rank kept, 2 ranks then 4.
largs="--model mlp --synthetic 1024 --batch 16 --epochs 1 --policy wfbp --scale-lr linear"
"$gs" run -np 2 -- "$gs" train $largs --checkpoint "$tmp/lin" --stop-at-step 6 > "$tmp/lin1.log" 2>&1
if "$gs" run -np 4 -- "$gs" train $largs --checkpoint "$tmp/lin" --resume --json \
     > "$tmp/lin2.log" 2>&1 && grep -q '"samples":1024,"dataset_samples":1024' "$tmp/lin2.log"; then
  ok "--scale-lr linear: 2 ranks stopped at step 6 (192 samples), 4 ranks finished the epoch's 1024"
else
  bad "--scale-lr linear 2 -> 4: $(tail -3 "$tmp/lin2.log" | cut -c1-300)"
fi
# A stop at or before the step the checkpoint resumes from is refused, as
# the other resume refusals are (exit 2, said once: every rank refuses
# alike); it trained a step past it until 2026-12-01. The checkpoint is the
# finished epoch of 32 steps.
"$gs" run -np 2 -- "$gs" train $largs --checkpoint "$tmp/lin" --resume --stop-at-step 6 \
  > "$tmp/stop_past.log" 2>&1
rc=$?
"$gs" run -np 2 -- "$gs" train $largs --checkpoint "$tmp/lin" --resume --stop-at-step 3 \
  > "$tmp/stop_past2.log" 2>&1
rc2=$?
if [ $rc = 2 ] && [ "$(grep -c "stop-at-step 6: the checkpoint in .* resumes after global step 32, at or past it.*(on every rank) (see --help)$" "$tmp/stop_past.log")" = 1 ] &&
   [ $rc2 = 2 ] && ! grep -q "committed" "$tmp/stop_past.log"; then
  ok "--stop-at-step at or before the resumed step: refused once (exit 2), nothing trained"
else
  bad "--stop-at-step past: exit $rc/$rc2 (want 2): $(grep 'gradsync train' "$tmp/stop_past.log" | head -2)"
fi
# A stop at an epoch's last step stops there (it trained the next epoch's
# first step and committed after step 11), and says so in the JSON summary;
# a stop beyond the run's end is refused (it was accepted and never came).
eargs="--model mlp --synthetic 1024 --batch 16 --epochs 2 --max-steps 10 --policy wfbp"
"$gs" run -np 2 -- "$gs" train $eargs --checkpoint "$tmp/eend" --stop-at-step 10 --json \
  > "$tmp/eend.log" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q '"stopped_at_step":10' "$tmp/eend.log" &&
   grep -q '"epochs_done":1' "$tmp/eend.log" && [ "$(grep -c '"epoch":' "$tmp/eend.log")" = 1 ]; then
  ok "--stop-at-step 10 at the epoch's last step: stopped there, the JSON summary says so"
else
  bad "--stop-at-step at an epoch's end: exit $rc: $(tail -2 "$tmp/eend.log" | cut -c1-300)"
fi
"$gs" run -np 2 -- "$gs" train $eargs --checkpoint "$tmp/ebig" --stop-at-step 999 \
  > "$tmp/ebig.log" 2>&1
rc=$?
if [ $rc = 2 ] && [ "$(grep -c "stop-at-step 999: the run has 20 steps" "$tmp/ebig.log")" = 1 ]; then
  ok "--stop-at-step beyond the run's 20 steps: refused once (exit 2)"
else
  bad "--stop-at-step 999: exit $rc (want 2): $(grep 'gradsync train' "$tmp/ebig.log" | head -2)"
fi
# Another --max-steps gives the epochs another length: refused, naming both
# (a commit at step 5 of 10 resumed with --max-steps 3 closed its epoch
# without a step, exit 0, until 2026-12-06).
"$gs" run -np 2 -- "$gs" train $eargs --checkpoint "$tmp/ems" --stop-at-step 5 > "$tmp/ems1.log" 2>&1
"$gs" run -np 2 -- "$gs" train ${eargs/--max-steps 10/--max-steps 3} --checkpoint "$tmp/ems" \
  --resume > "$tmp/ems2.log" 2>&1
rc=$?
if [ $rc = 2 ] &&
   grep -q "max-steps: the checkpoint's run had 10, this run has 3" "$tmp/ems2.log"; then
  ok "a resume with another --max-steps is refused, naming 10 and 3"
else
  bad "a resume with --max-steps 3 after 10: exit $rc (want 2): $(grep 'gradsync train' "$tmp/ems2.log" | head -2)"
fi
# Without an elastic rule the world size is part of the run.
if ! "$gs" run -np 3 -- "$gs" train $args --checkpoint "$tmp/cut-sgd" --resume > "$tmp/fixed.log" 2>&1 &&
   grep -q "the rank count" "$tmp/fixed.log"; then
  ok "a plain run resumed on another world size is refused (the rank count)"
else
  bad "a plain run resumed on 3 ranks was not refused: $(tail -3 "$tmp/fixed.log")"
fi
# --resume=auto: a first run starts afresh.
if "$gs" train --model mlp --synthetic 256 --batch 16 --max-steps 3 --checkpoint "$tmp/auto" \
     --resume=auto > "$tmp/auto.log" 2>&1; then
  ok "--resume=auto with no checkpoint yet: trains from the start"
else
  bad "--resume=auto with no checkpoint: $(tail -3 "$tmp/auto.log")"
fi
# SIGUSR1 asks for a stop at the next commit: exit 3, and the commit resumes.
OMPI_MCA_rmaps_base_oversubscribe=1 mpirun -np 2 "$gs" train --model mlp --synthetic 4096 \
  --batch 16 --epochs 100 --policy wfbp --checkpoint "$tmp/usr1" --commit-every 4 \
  > "$tmp/usr1.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do [ -e "$tmp/usr1/checkpoint.json" ] && break; sleep 0.1; done
kill -USR1 $pid
wait $pid
rc=$?
if [ $rc = 3 ] && grep -q "committed in .*, as asked" "$tmp/usr1.log"; then
  ok "SIGUSR1: stopped at the next commit, exit 3"
else
  bad "SIGUSR1: exit $rc: $(tail -3 "$tmp/usr1.log")"
fi

# The same SIGUSR1 sent to `gradsync run`, as users signal the launcher
# (until 2026-12-01 it killed the launcher: exit 138, no stop commit).
"$gs" run -np 2 -- "$gs" train --model mlp --synthetic 4096 --batch 16 --epochs 100 \
  --policy wfbp --checkpoint "$tmp/usr1run" --commit-every 4 > "$tmp/usr1run.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do [ -e "$tmp/usr1run/checkpoint.json" ] && break; sleep 0.1; done
kill -USR1 $pid
wait $pid
rc=$?
if [ $rc = 3 ] && grep -q "committed in .*, as asked" "$tmp/usr1run.log"; then
  ok "SIGUSR1 to gradsync run: passed to the ranks, stopped at the next commit, exit 3"
else
  bad "SIGUSR1 to gradsync run: exit $rc (want 3): $(tail -3 "$tmp/usr1run.log")"
fi

out=$("$gs" train --commit-every 5 2>&1); rc=$?
if [ $rc = 2 ] && echo "$out" | grep -q -- "--commit-every needs --checkpoint"; then
  ok "--commit-every without --checkpoint: exit 2"
else
  bad "--commit-every without --checkpoint: exit $rc: $out"
fi
if ! "$gs" run -np 3 -- "$gs" train $args --checkpoint "$tmp/asp" --ps 1 --sync asp \
     --commit-every 5 > "$tmp/asp.log" 2>&1 &&
   grep -q -- "--sync asp: its workers run different step counts" "$tmp/asp.log"; then
  ok "--commit-every with --sync asp is refused"
else
  bad "--commit-every with asp was not refused: $(tail -3 "$tmp/asp.log")"
fi

# A parameter-server job resumes (its checkpoint counts the job's ranks,
# servers included, as the resumed run does at set-up).
pargs="--model mlp --synthetic 512 --batch 16 --max-steps 3 --ps 1 --sync bsp"
"$gs" run -np 3 -- "$gs" train $pargs --epochs 1 --checkpoint "$tmp/ps" > "$tmp/ps1.log" 2>&1
if "$gs" run -np 3 -- "$gs" train $pargs --epochs 2 --checkpoint "$tmp/ps" --resume \
     > "$tmp/ps2.log" 2>&1 && grep -q "^epoch 2:" "$tmp/ps2.log"; then
  ok "a parameter-server job (2 workers, 1 server) resumes its checkpoint"
else
  bad "a parameter-server job's resume: $(grep -h "gradsync train" "$tmp/ps1.log" "$tmp/ps2.log" | head -3)"
fi

# Parameter servers (--ps 1 --sync bsp): BSP's workers step together, so
# they commit inside an epoch; the checkpoint keeps the servers' momentum
# (worker 0 pulls it), so a stopped and resumed job ends bitwise where the
# uninterrupted one ends, and one resumed on 4 ranks (3 workers; the shard
# cut afresh) within rounding of it: dropping the momentum moved the
# weights by 4e-3 of their largest, the sums' order by 2e-7.
sargs="--model mlp --synthetic 1024 --global-batch 48 --epochs 2 --ps 1 --sync bsp --schedule cosine --json"
"$gs" run -np 3 -- "$gs" train $sargs --checkpoint "$tmp/psref" > "$tmp/psref.log" 2>&1 ||
  bad "ps: the uninterrupted run failed: $(tail -3 "$tmp/psref.log")"
"$gs" run -np 3 -- "$gs" train $sargs --checkpoint "$tmp/pscut" --commit-every 7 \
  --stop-at-step 30 > "$tmp/pscut1.log" 2>&1
if "$gs" run -np 3 -- "$gs" train $sargs --checkpoint "$tmp/pscut" --resume > "$tmp/pscut2.log" 2>&1 &&
   "$cmp_ckpt" mlp "$tmp/psref/checkpoint.gsck" "$tmp/pscut/checkpoint.gsck" > "$tmp/pscut.cmp" 2>&1; then
  ok "ps bsp: stopped at step 30 (commits every 7), resumed: bitwise the uninterrupted run's end"
else
  bad "ps bsp stop and resume: $(cat "$tmp/pscut.cmp" 2>/dev/null) $(tail -3 "$tmp/pscut1.log" "$tmp/pscut2.log")"
fi
"$gs" run -np 3 -- "$gs" train $sargs --checkpoint "$tmp/psgrow" --stop-at-step 30 \
  > "$tmp/psgrow1.log" 2>&1
if "$gs" run -np 4 -- "$gs" train $sargs --checkpoint "$tmp/psgrow" --resume > "$tmp/psgrow2.log" 2>&1 &&
   grep -q '"samples":1008,"dataset_samples":1024' "$tmp/psgrow2.log" &&
   "$cmp_ckpt" mlp "$tmp/psref/checkpoint.gsck" "$tmp/psgrow/checkpoint.gsck" 1e-5 \
     > "$tmp/psgrow.cmp" 2>&1; then
  ok "ps bsp: 2 workers stopped at step 30, 3 workers resumed: the epoch's 1008 samples, weights within 1e-5 of the uninterrupted run"
else
  bad "ps bsp resize 3 -> 4 ranks: $(cat "$tmp/psgrow.cmp" 2>/dev/null) $(tail -3 "$tmp/psgrow2.log" | cut -c1-300)"
fi
# With a per-rank batch, what must stay is the workers, not the ranks: the
# same 2 workers beside 2 servers instead of 1 resume (refused until
# 2026-12-01 as "the rank count"); 3 workers are refused, once, exit 2.
bargs="--model mlp --synthetic 1024 --batch 24 --epochs 2 --ps 1 --sync bsp --json"
"$gs" run -np 3 -- "$gs" train $bargs --checkpoint "$tmp/psb" > "$tmp/psb.log" 2>&1 ||
  bad "ps: the uninterrupted run with --batch failed: $(tail -3 "$tmp/psb.log")"
"$gs" run -np 3 -- "$gs" train $bargs --checkpoint "$tmp/psbs" --stop-at-step 30 \
  > "$tmp/psbs1.log" 2>&1
if "$gs" run -np 4 -- "$gs" train ${bargs/--ps 1/--ps 2} --checkpoint "$tmp/psbs" --resume \
     > "$tmp/psbs2.log" 2>&1 &&
   "$cmp_ckpt" mlp "$tmp/psb/checkpoint.gsck" "$tmp/psbs/checkpoint.gsck" 1e-5 \
     > "$tmp/psbs.cmp" 2>&1; then
  ok "ps bsp: 2 workers and 1 server stopped, resumed with 2 servers: within 1e-5 of the uninterrupted run"
else
  bad "ps bsp resumed with another server count: $(cat "$tmp/psbs.cmp" 2>/dev/null) $(tail -3 "$tmp/psbs2.log" | cut -c1-300)"
fi
"$gs" run -np 4 -- "$gs" train $bargs --checkpoint "$tmp/psbs" --resume > "$tmp/psbs3.log" 2>&1
rc=$?
if [ $rc = 2 ] && [ "$(grep -c "the worker count (ranks less --ps servers.*had 2, this run has 3" "$tmp/psbs3.log")" = 1 ]; then
  ok "ps bsp: a resume on 3 workers with a per-rank batch is refused once, naming the worker count"
else
  bad "ps bsp resume on 3 workers: exit $rc: $(grep 'gradsync train' "$tmp/psbs3.log" | head -3 | cut -c1-300)"
fi
out=$("$gs" run -np 7 -- "$gs" train --model mlp --synthetic 1024 --global-batch 48 --ps 2 \
  --sync bsp 2>&1); rc=$?
if [ $rc = 2 ] && echo "$out" | grep -q -- "--global-batch 48: 7 ranks less --ps 2 leave 5 workers" &&
   echo "$out" | grep -q "world sizes that can, up to 28: 3, 4, 5, 6, 8, 10, 14, 18, 26)"; then
  ok "ps: a global batch the workers cannot share is refused naming the job sizes that can"
else
  bad "ps --global-batch check: exit $rc: $(echo "$out" | head -3)"
fi

echo "$passes passed, $fails failed"
[ $fails = 0 ]
