#!/usr/bin/env bash
# gradsync train --commit-every / --stop-at-step, end to end on 2 ranks:
#   - a run stopped at a global step inside an epoch and resumed from its
#     commit ends bitwise where the uninterrupted run ends (SGD, and K-FAC
#     with its per-rank factors), commits and all;
#   - the summary counts the commits;
#   - a commit's position is checked on resume: other steps per epoch are
#     refused naming both counts;
#   - commits need a checkpoint directory, and refuse the asynchronous sync
#     modes (their workers share no step).
# Usage: test_commit.sh GRADSYNC CKPT_COMPARE
set -u
gs=$1
cmp_ckpt=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GRADSYNC_ALLREDUCE_ALGO=ring GRADSYNC_CALIBRATE=0
fails=0 passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }

# 1024 samples, 2 ranks x 16: 32 steps per epoch, 2 epochs.
args="--model mlp --synthetic 1024 --batch 16 --epochs 2 --policy wfbp --schedule cosine"
train() { # train NAME ARGS...
  local name=$1; shift
  "$gs" run -np 2 -- "$gs" train $args --checkpoint "$tmp/$name" "$@" > "$tmp/$name.log" 2>&1
}

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

# A commit inside an epoch fixes the steps per epoch.
train pos --stop-at-step 5 > /dev/null 2>&1
if ! train pos --resume --max-steps 20 &&
   grep -q "is at step 5 of an epoch of 32 steps; this run's epochs have 20" "$tmp/pos.log"; then
  ok "a commit resumed with other steps per epoch is refused, naming both"
else
  bad "other steps per epoch were not refused: $(tail -3 "$tmp/pos.log")"
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

echo "$passes passed, $fails failed"
[ $fails = 0 ]
