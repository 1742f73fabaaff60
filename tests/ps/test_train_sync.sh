#!/bin/sh
# gradsync train's sync modes from src/train/sync_ps.c and sync_local.c:
# bad --sync / --ps / --straggler values exit 2 with a message, also when
# --ps or --straggler does not fit the job's ranks; short runs
# on a synthetic set under --ps 1 --sync bsp, switch:offline:0.5 (which
# switches once, inside the job, and its summary says after which step
# and why; under asp worker 0 runs its part of the
# 12 pushes left, 6 on average), local:2 and delayed:2 finish with a
# summary naming the mode; --straggler R:+DELAY:A-B sleeps DELAY after each
# of steps A..B-1; under asp an epoch is its samples, so with a
# worker 10x slower, worker 0 runs more than its 32 steps of 2 epochs;
# --async-lr-scale and --async-momentum reach the pushes (the summary's
# async_lr_scale and async_momentum), their defaults 1/W and the momentum
# less 1 - 1/W; Sync-Switch's switch carries the job's state: a switch
# to ASP whose pushes move nothing leaves the weights BSP had at the switch.
#   test_train_sync.sh GRADSYNC CKPT_COMPARE
set -u
gs=$1 cmp=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL train --sync: $*"; fails=1; }
export GRADSYNC_CALIBRATE=0 GRADSYNC_TIMEOUT=60
for bad in "--sync bogus" "--sync ssp:x --ps 1" "--sync ssp --ps 1" "--sync switch:offline:2 --ps 1" \
           "--sync local:0" "--sync post-local:2:5" "--sync delayed:" "--sync bsp" \
           "--ps 1" "--ps 0 --sync bsp" "--ps 1 --sync local:4" "--straggler 1" \
           "--straggler 1:0.5" "--straggler 1:2:5-3" "--straggler 1:+20" \
           "--straggler 1:+0ms" "--straggler 1:+61s" "--straggler 1:+5ms:4-2" "--sync engine:3" \
           "--async-momentum 0.5" "--sync local:2 --async-lr-scale 0.5" \
           "--ps 1 --sync asp --async-momentum 0.95" "--ps 1 --sync asp --async-momentum -0.1" \
           "--ps 1 --sync asp --async-lr-scale 0" "--ps 1 --sync asp --async-lr-scale x"; do
  # shellcheck disable=SC2086
  msg=$("$gs" train $bad 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] || fail "'$bad': exit $rc, expected 2"
  echo "$msg" | grep -q "gradsync train" || fail "'$bad': message '$msg'"
  # A bad --sync value is named in the message (an empty one was printed
  # for engine:3 before the modes checked their own specs).
  case "$bad" in
    "--sync "*" --async"*) ;;
    "--sync "*)
      val=${bad#--sync }
      val=${val%% *}
      echo "$msg" | grep -qF -- "$val" || fail "'$bad': message '$msg' does not name '$val'" ;;
  esac
done
# Numbers in a --sync spec follow the command line's rules (docs/CLI.md): no
# '+', spaces, leading zero or hexadecimal (values with a space: one argument).
for val in "ssp:+3" "ssp: 3" "ssp:03" "switch:offline:+0.5" "switch:offline: 0.5" \
           "switch:offline:0x0.8" "local:+2" "local: 2" "local:02" "delayed:0x2" \
           "post-local:2:+0.5" "post-local:2: 0.5" "post-local: 2"; do
  case "$val" in local*|delayed*|post*) ps= ;; *) ps="--ps 1" ;; esac
  # shellcheck disable=SC2086
  msg=$("$gs" train --synthetic 384 --max-steps 1 $ps --sync "$val" 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] && [ "$(echo "$msg" | wc -l)" -eq 1 ] &&
    echo "$msg" | grep -qF -- "$val" || fail "--sync '$val': exit $rc, message '$msg'"
done
# Options that name ranks, against the job's size: usage errors (exit 2),
# said once, without a rank prefix repeated (issue 36).
sized() { # np expect-substring args...
  np=$1; want=$2; shift 2
  msg=$(timeout 120 "$gs" run -np "$np" -- "$gs" train --synthetic 384 --max-steps 1 "$@" 2>&1)
  rc=$?
  [ "$rc" -eq 2 ] || fail "-np $np $*: exit $rc, expected 2"
  n=$(echo "$msg" | grep -c "gradsync train: ")
  echo "$msg" | grep -qF "$want" && [ "$n" -eq 1 ] ||
    fail "-np $np $*: expected one line with '$want', got: $msg"
  echo "$msg" | grep -q "rank 0: rank 0" && fail "-np $np $*: the rank named twice: $msg"
}
sized 2 "a job of 2 ranks can have at most 1 parameter server" --ps 2 --sync bsp
sized 1 "a job of 1 rank can have no parameter server" --ps 1 --sync asp
sized 2 "this job has no rank 7 (its ranks are 0 to 1)" --straggler 7:2
sized 3 "rank 2 is a parameter server, not a worker" --ps 1 --sync bsp --straggler 2:2
# --lr 0.005: at the default 0.05 the CNN's loss on the synthetic images
# reaches 76-506 in the first epoch under any sync, and an asp run's
# stale pushes made it NaN once in about 14 (exit 1, "training diverged").
run() { # np expect-regex args...
  np=$1; want=$2; shift 2
  out=$(timeout 200 "$gs" run -np "$np" -- "$gs" train --synthetic 384 --epochs 2 --batch 32 \
        --lr 0.005 --json "$@" 2>&1)
  rc=$?
  [ "$rc" -eq 0 ] || { fail "$*: exit $rc"; echo "$out" | tail -5; return; }
  echo "$out" | grep '"summary"' | grep -Eq "$want" ||
    { fail "$*: summary does not match $want"; echo "$out" | tail -3; }
}
run 3 '"sync":"bsp","servers":1,"bsp_steps":12,"asp_steps":0' --ps 1 --sync bsp
run 3 '"bsp_steps":6,"asp_steps":([0-9]|1[0-2]),"ssp_steps":0,"switches":1,"switch_log":\[\{"step":6,"to":"asp","straggler":-1\}\]' \
  --ps 1 --sync switch:offline:0.5
# What asynchronous pushes use: by default lr / W and the momentum less
# 1 - 1/W (2 workers: 0.5 and 0.4); or as given.
run 3 '"sync":"asp".*"async_lr_scale":0.5,"async_momentum":0.4' --ps 1 --sync asp
run 3 '"async_lr_scale":0.7,"async_momentum":0.3' --ps 1 --sync asp --async-lr-scale 0.7 \
  --async-momentum 0.3
run 3 '"async_lr_scale":0.5,"async_momentum":0.9' --ps 1 --sync asp --async-momentum 0.9
run 3 '"sync":"local:2","averages":[4-9]' --sync local:2
out=$(timeout 200 "$gs" run -np 4 -- "$gs" train --synthetic 1536 --epochs 2 --batch 32 --lr 0.005 --json \
      --ps 1 --sync asp --straggler 1:10 2>&1)
rc=$?
steps=$(echo "$out" | grep '"summary"' | sed -n 's/.*"asp_steps":\([0-9]*\).*/\1/p')
if [ "$rc" -ne 0 ] || [ -z "$steps" ] || [ "$steps" -le 32 ] || [ "$steps" -gt 64 ]; then
  fail "asp with a straggler: exit $rc, worker 0 ran '${steps}' steps, expected 33 to 64 (32 is its share)"
  echo "$out" | tail -3
fi
# Each epoch's "samples" under asp are the samples the servers applied, every
# worker's: an epoch ends when they reach its budget (6 steps x 64), after
# which each of the 2 workers pushes at most once more. So the epochs' running
# total k x 384 <= total < k x 384 + 2 x 32 whoever ran more steps (worker 0,
# slowed here, counted only its own steps before).
out=$(timeout 200 "$gs" run -np 3 -- "$gs" train --synthetic 384 --epochs 2 --batch 32 --lr 0.005 --json \
      --ps 1 --sync asp --straggler 0:+40ms 2>&1)
rc=$?
got=$(echo "$out" | sed -n 's/^{"epoch":.*"samples":\([0-9]*\).*/\1/p' | tr '\n' ' ')
k=0 total=0
for s in $got; do
  k=$((k + 1)) total=$((total + s))
  if [ "$total" -lt $((k * 384)) ] || [ "$total" -ge $((k * 384 + 64)) ]; then
    fail "asp epochs' samples '$got': after epoch $k $total, expected $((k * 384)) to $((k * 384 + 63))"
    break
  fi
done
[ "$rc" -eq 0 ] && [ "$(echo $got | wc -w)" -eq 2 ] ||
  fail "asp with worker 0 slowed: exit $rc, epochs' samples '$got'"
run 3 '"sync":"delayed:2"' --sync delayed:2 --straggler 1:2:2-6
# A fixed delay: 50 ms after each of global steps 2 to 5 on rank 0, 0.2 s.
run 2 '"straggler_sleep_s":0.2[,}]' --straggler 0:+50ms:2-6
# A stop at step 9 and a resume, with commits every 3 steps, end with the
# weights of an uninterrupted run that never committed inside an epoch,
# bitwise: post-local's BSP phase is by the run's position (a resumed run
# does not start it again: 3 BSP steps after the resume, 12 in all), each
# rank's own momentum (local SGD's stays on its rank) comes back, not rank
# 0's for every rank, and a commit inside an averaging period (steps 3 and
# 9 of periods of 4) neither averages nor restarts the period: each rank's
# own weights and place in it come back (until 2026-12-07 a commit averaged
# and restarted it, and the reference here committed at the same steps).
resumed() { # name np sync momentum summary-regex
  B="--model mlp --synthetic 384 --epochs 2 --batch 16 --schedule cosine --warmup-epochs 0.5
     --momentum $4 --sync $3 --json"
  A="$B --commit-every 3"
  # shellcheck disable=SC2086
  timeout 200 "$gs" run -np "$2" -- "$gs" train $B --checkpoint "$tmp/$1.ref" >/dev/null 2>&1 &&
  timeout 200 "$gs" run -np "$2" -- "$gs" train $A --checkpoint "$tmp/$1" --stop-at-step 9 \
    >/dev/null 2>&1 &&
  out=$(timeout 200 "$gs" run -np "$2" -- "$gs" train $A --checkpoint "$tmp/$1" --resume 2>&1) ||
    { fail "$1: a run failed: $(echo "$out" | tail -2)"; return; }
  echo "$out" | grep '"summary"' | grep -Eq "$5" ||
    fail "$1: the resumed run's summary does not match $5: $(echo "$out" | tail -1)"
  "$cmp" mlp "$tmp/$1.ref/checkpoint.gsck" "$tmp/$1/checkpoint.gsck" ||
    fail "$1: stop at step 9 and resume differs from the uninterrupted run"
}
resumed post 3 post-local:4:0.75 0 '"bsp_steps":3[,}]'
resumed local 3 local:4 0.9 '"sync":"local:4"'
resumed delayed 2 delayed:2 0.9 '"sync":"delayed:2"'
resumed post_mom 2 post-local:2:0.25 0.9 '"bsp_steps":0[,}]'
# A straggler's range counts a worker's own steps: under asp a worker past the
# epoch's end is not at the epoch's last step again. Rank 1 sleeps 10 ms every
# step (each rank reads its own --straggler: only the named rank acts on it),
# so worker 0 runs more than the epoch's 6 steps; its range 5-6 is global step
# 5 alone: slowed once at most (0.01 s), not once more for every step past it.
out=$(timeout 200 "$gs" run -np 3 -- sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
  s=1:+10ms; else s=0:+10ms:5-6; fi; exec "$0" "$@" --straggler "$s"' "$gs" train \
  --model mlp --synthetic 384 --epochs 2 --batch 32 --json --ps 1 --sync asp 2>&1)
rc=$?
slept=$(echo "$out" | sed -n 's/.*"straggler_sleep_s":\([0-9.]*\).*/\1/p')
case "$rc:$slept" in
  0:0|0:0.01) ;;
  *) fail "asp, worker 0 slowed at global step 5 only: exit $rc, it slept '$slept' s, expected 0.01 at most"
     echo "$out" | tail -3 ;;
esac
# The switch itself (issue 36, item 1): BSP for half of a 6-step budget,
# then ASP pushes with a learning rate of 1e-9 of BSP's, end with the
# weights of a BSP run stopped at step 3 (bitwise but for those pushes'
# rounding): nothing of the weights is lost, reset or applied twice at the
# switch, and the servers' momentum does not move them afterwards.
sw() { # dir args...
  d=$1; shift
  out=$(timeout 200 "$gs" run -np 3 -- "$gs" train --synthetic 384 --epochs 1 --batch 32 --json \
        --ps 1 --checkpoint "$tmp/$d" "$@" 2>&1) || { fail "$*: exit $?"; echo "$out" | tail -5; }
}
sw bsp3 --sync bsp --max-steps 3
sw switch --sync switch:offline:0.5 --async-lr-scale 1e-9
echo "$out" | grep -q '"switch_log":\[{"step":3,"to":"asp"' ||
  fail "switch:offline:0.5 over 6 steps did not switch after step 3: $(echo "$out" | tail -1)"
"$cmp" cnn "$tmp/bsp3/checkpoint.gsck" "$tmp/switch/checkpoint.gsck" 1e-6 ||
  fail "the weights after a switch to ASP at lr ~0 are not BSP's at the switch"
# The summary shows that rate as it is (four decimals made it 0).
echo "$out" | grep -q '"async_lr_scale":1e-09' ||
  fail "--async-lr-scale 1e-9: the summary says $(echo "$out" | grep -o '"async_lr_scale":[^,]*')"
# A resumed run names the switch by the run's step: a run of one epoch (6
# steps) resumed for two under switch:offline:0.75 is in BSP until step 9
# of the run and switches there (until 2026-12-07 the log said step 3,
# counting from the resume; a switch job commits at epochs' ends only).
timeout 200 "$gs" run -np 3 -- "$gs" train --synthetic 384 --epochs 1 --batch 32 --lr 0.005 \
  --json --ps 1 --checkpoint "$tmp/swres" --sync switch:offline:0.75 >/dev/null 2>&1 ||
  fail "switch:offline:0.75, one epoch: exit $?"
out=$(timeout 200 "$gs" run -np 3 -- "$gs" train --synthetic 384 --epochs 2 --batch 32 --lr 0.005 \
      --json --ps 1 --checkpoint "$tmp/swres" --sync switch:offline:0.75 --resume 2>&1) ||
  fail "switch:offline:0.75 resumed for a second epoch: exit $?"
echo "$out" | grep -q '"switch_log":\[{"step":9,"to":"asp"' ||
  fail "switch:offline:0.75 resumed after step 6: the log does not say step 9: $(echo "$out" | grep -o '"switch_log":[^]]*')"
# BSP's share all of the budget: no switch (it reported one, after the last
# step, with no ASP step).
sw all --sync switch:offline:1
echo "$out" | grep -q '"asp_steps":0,.*"switches":0,"switch_log":\[\]' ||
  fail "switch:offline:1 reported a switch: $(echo "$out" | tail -1 | cut -c1-400)"
exit $fails
