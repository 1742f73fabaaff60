#!/usr/bin/env bash
# The faults an elastic job must survive or end clearly from
# (docs/ELASTIC.md), on local ranks under gradsync run --elastic:
#
#   a rank's SIGTERM          relaunched on 3 ranks, finishes (exit 0)
#   mpirun's SIGKILL          relaunched on the same 4 ranks, finishes
#   a rank killed under 4:4   its slot used again at once (fewer than MIN
#                             without it), relaunched on 4, finishes
#   fewer slots than MIN      with discovery: a bounded wait (--min-wait), exit 1
#   the restart budget        --max-restarts 0: the first failure ends the job
#   the discovery script fails  a warning naming the script, the job goes on
#   the script hangs          the job's end, and a SIGTERM while it waits
#                             for slots, are seen at once
#   two shrinks in one stop   the relaunch takes the listing of its time
#   SIGUSR1 to the supervisor passed on: the job commits, ends with 3
#   SIGTERM to the supervisor forwarded, no relaunch, exit 143, no rank left
#
# (A commit interrupted mid-write is the trainer's atomic save: tests/train.)
# usage: test_run_elastic_faults.sh GRADSYNC
set -u
G=${1:?usage: test_run_elastic_faults.sh GRADSYNC}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset SLURM_JOB_ID SLURM_NODELIST SLURM_JOB_NODELIST
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/apps/elastic_lib.sh
. "$HERE/elastic_lib.sh"

# 8192 samples, global batch 48: 170 steps, 8160 samples an epoch. Rank 0
# sleeps 8 ms after each step (2.7 s at least, however fast the host): on
# CI's a killed mpirun's first launch had finished both epochs.
TRAIN=(train --model mlp --synthetic 8192 --global-batch 48 --epochs 2 --commit-every 5
       --resume=auto --json --straggler 0:+8ms)
FULL=8160

# start_job NAME TIMEOUT RUN-OPTIONS...: starts the supervisor in the
# background (sup, tag set) and waits for the first commit.
start_job() {
  local name=$1
  shift
  new_case "$name"
  tag=$(unique_tag)
  "$G" run "$@" --events "$ev" -- "$G" "${TRAIN[@]}" --checkpoint "$ck" --seed "$tag" \
    >"$out" 2>"$err" &
  sup=$!
  wait_commit 60
}

echo "== SIGTERM of a rank"
# (after 25 commits, ~1.5 s: the supervisor, which looks every 0.5 s, has
# seen two and has a rate to estimate from)
commits_25() {
  for _ in $(seq 1 300); do [ "$(wc -l <"$commits")" -ge 25 ] && return 0; sleep 0.1; done
  return 1
}
if start_job term -np 4 --elastic 2:4 && commits_25 && kill -TERM "$(rank_pid "$tag" 1)"; then
  wait_bounded "$sup" 100
  rc=$?
  # steps redone: at most the steps between two commits (--commit-every 5);
  # the estimate had also counted the watch's lag and MPI's detection (~32).
  redone=$(sed -nE 's/^gradsync run: resize .*steps redone ~?([0-9]+|unknown),.*/\1/p' "$err" | head -1)
  if [ "$rc" = 0 ] && grep -q '^gradsync run: resize 4 -> 3 ranks (rank 1 on .* killed by signal 15)' "$err" &&
     epochs_once 2 "$FULL" && { [ "$redone" = unknown ] || [ "${redone:-99}" -le 5 ]; }; then
    pass "rank 1 terminated: resized 4 -> 3 and finished, steps redone $redone (at most 5)"
  else
    fail "SIGTERM of a rank: exit $rc (want 0), a resize line 4 -> 3, steps redone '$redone' (<= 5)"
  fi
else
  fail "SIGTERM of a rank: no commit or no rank 1"
  kill "$sup" 2>/dev/null
fi

echo "== SIGKILL of mpirun"
if start_job mpirun -np 4 --elastic 2:4 &&
   mp=$(pgrep -P "$sup" -x mpirun) && kill -KILL "$mp"; then
  wait_bounded "$sup" 100
  rc=$?
  if [ "$rc" = 0 ] && grep -q '^gradsync run: relaunch on 4 ranks (mpirun killed by signal 9)' "$err" &&
     epochs_at_most_once 2 "$FULL"; then
    pass "mpirun killed: relaunched on 4 ranks and finished"
  else
    fail "SIGKILL of mpirun: exit $rc (want 0) and a line 'relaunch on 4 ranks'"
  fi
else
  fail "SIGKILL of mpirun: no commit or no mpirun"
  kill "$sup" 2>/dev/null
fi

echo "== a killed rank's slot, when fewer than MIN are left without it"
if start_job below -np 4 --elastic 4:4 && kill -KILL "$(rank_pid "$tag" 2)"; then
  wait_bounded "$sup" 100
  rc=$?
  if [ "$rc" = 0 ] && grep -q '^gradsync run: warning: fewer than the minimum of 4 ranks are left without the slots of killed ranks: using 1 again (localhost:1)' "$err" &&
     grep -q '^gradsync run: relaunch on 4 ranks (rank 2 on .* killed by signal 9)' "$err" &&
     epochs_once 2 "$FULL"; then
    pass "rank 2 killed under --elastic 4:4: its slot used again at once, 4 -> 4, finished"
  else
    fail "killed rank under 4:4: exit $rc (want 0), the warning and a relaunch on 4"
  fi
else
  fail "killed rank under 4:4: no commit or no rank"
  kill "$sup" 2>/dev/null
fi

echo "== fewer slots than MIN, waiting for discovery"
# The script lists 4 slots, then 2 after the kill: with the killed rank's
# slot given back, 2 are still fewer than 4.
echo 4 >"$scratch/slots"
printf '#!/bin/sh\necho localhost:$(cat %s)\n' "$scratch/slots" >"$scratch/four.sh"
chmod +x "$scratch/four.sh"
if start_job wait -np 4 --elastic 4:4 --discover "$scratch/four.sh" --discover-every 0.5 \
     --min-wait 3 && echo 2 >"$scratch/slots" && sleep 1 && kill -KILL "$(rank_pid "$tag" 0)"; then
  t0=$SECONDS
  wait_bounded "$sup" 60
  rc=$?
  if [ "$rc" = 1 ] && grep -q 'waiting up to 3 s for discovery' "$err" &&
     grep -q '^gradsync run: elastic job ended: waited [34] s (--min-wait 3 s): 1 usable slot, fewer than the minimum of 4' "$err" &&
     grep -q '^gradsync run: elastic job history: 1 launch, 0 restarts after failures, 0 resizes on request, 0 relaunches after a lost host' "$err" &&
     [ $((SECONDS - t0)) -le 25 ]; then
    pass "waited 3 s for discovery, then exit 1 ($((SECONDS - t0)) s after the kill); no relaunch counted"
  else
    fail "bounded wait: exit $rc (want 1), a wait line and the end's reason"
  fi
else
  fail "bounded wait: no commit or no rank"
  kill "$sup" 2>/dev/null
fi

echo "== restart budget"
if start_job budget -np 4 --elastic 2:4 --max-restarts 0 && kill -KILL "$(rank_pid "$tag" 3)"; then
  wait_bounded "$sup" 60
  rc=$?
  if [ "$rc" = 1 ] && grep -q 'killed by signal 9; the restart budget (0) is spent' "$err"; then
    pass "--max-restarts 0: the first failure ends the job (exit 1)"
  else
    fail "restart budget: exit $rc (want 1) and 'the restart budget (0) is spent'"
  fi
else
  fail "restart budget: no commit or no rank"
  kill "$sup" 2>/dev/null
fi

echo "== a program's own error while discovery lists fewer slots"
# Rank 0 shrinks the listing, then exits 1: a failure of the program, not a
# lost host (until 2026-12-01 it relaunched free of the budget, and with a
# listing that flaps, 68 times under --max-restarts 0).
new_case ownerr
echo localhost:2 >"$scratch/own.list"
printf '#!/bin/sh\ncat %s\n' "$scratch/own.list" >"$scratch/own.sh"
printf '#!/bin/sh\n[ "$OMPI_COMM_WORLD_RANK" = 0 ] && echo localhost:1 >%s\nsleep 1\n[ "$OMPI_COMM_WORLD_RANK" = 0 ] && exit 1\nsleep 5\n' \
  "$scratch/own.list" >"$scratch/own_prog.sh"
chmod +x "$scratch/own.sh" "$scratch/own_prog.sh"
"$G" run -np 2 --elastic 1:2 --discover "$scratch/own.sh" --discover-every 0.2 --max-restarts 0 \
  --events "$ev" -- "$scratch/own_prog.sh" >"$out" 2>"$err" &
sup=$!
wait_bounded "$sup" 60
rc=$?
if [ "$rc" = 1 ] && grep -q 'rank 0 exited with status 1; the restart budget (0) is spent' "$err" &&
   ! grep -q '"node_lost":true' "$ev"; then
  pass "a program's error with a shrinking listing spends the budget: exit 1 after one launch"
else
  fail "a program's own error: exit $rc (want 1), 'the restart budget (0) is spent', no node_lost"
fi

echo "== an mpirun that stays after its ranks ended"
# Open MPI's mpirun deadlocked in its PMIx server's finalize after every
# rank had ended, its ranks left unreaped; the supervisor waited for it for
# good. A stand-in whose two ranks exit 0 and 1 and which then stays: the
# launch ends 10 s (kill_grace_s) after the last rank did, with its status.
new_case stuck
printf '#!/bin/sh\n( exit 0 ) &\n( exit 1 ) &\nexec sleep 60\n' >"$scratch/stuck_mpirun"
chmod +x "$scratch/stuck_mpirun"
t0=$(now)
"$G" run -np 2 --elastic 1:2 --max-restarts 0 --mpirun "$scratch/stuck_mpirun" \
  -- /bin/true >"$out" 2>"$err" &
sup=$!
wait_bounded "$sup" 40
rc=$?
took=$(sub "$(now)" "$t0")
if [ "$rc" = 1 ] && awk -v t="$took" 'BEGIN { exit !(t < 30) }' &&
   grep -q 'mpirun exited with status 1' "$err"; then
  pass "an mpirun stuck after its ranks ended: the launch ends with the rank's status 1 in $took s"
else
  fail "an mpirun stuck after its ranks ended: exit $rc after $took s (want 1, under 30 s)"
fi

echo "== resizes on request are not bounded in number"
# A stand-in mpirun (tests/cluster/fake_mpirun.sh) and a program that flips
# the listing between 1 and 2 slots as it starts and stops on SIGUSR1 with
# exit 3, 80 times, then finishes: 81 launches, every one a resize on
# request. Until 2026-12-01 the 69th launch ended the job ("too many
# launches") under --max-restarts 0.
new_case flips
echo 0 >"$scratch/flips.n"
echo localhost:2 >"$scratch/flips.list"
printf '#!/bin/sh\ncat %s\n' "$scratch/flips.list" >"$scratch/flips.sh"
# (The trap first: the supervisor stops the launch as soon as the listing
# it flips changes, and a SIGUSR1 before the trap ended it with 138.)
cat >"$scratch/flips_prog.sh" <<EOS
#!/bin/bash
trap 'exit 3' USR1
n=\$(cat "$scratch/flips.n"); echo \$((n + 1)) >"$scratch/flips.n"
[ "\$n" -ge 80 ] && exit 0
if [ "\$GS_FAKE_NP" = 2 ]; then echo localhost:1; else echo localhost:2; fi >"$scratch/flips.list"
for _ in \$(seq 1 200); do sleep 0.05; done
exit 1
EOS
chmod +x "$scratch/flips.sh" "$scratch/flips_prog.sh"
"$G" run -np 2 --elastic 1:2 --discover "$scratch/flips.sh" --discover-every 0.1 \
  --resize-interval 0 --shrink-on-discover --max-restarts 0 \
  --mpirun "$HERE/../cluster/fake_mpirun.sh" -- "$scratch/flips_prog.sh" >"$out" 2>"$err" &
sup=$!
wait_bounded "$sup" 120
rc=$?
if [ "$rc" = 0 ] && grep -q '^gradsync run: elastic job history: 81 launches, 0 restarts after failures, 80 resizes on request' "$err"; then
  pass "80 resizes on request: 81 launches, finished (exit 0)"
else
  fail "80 resizes: exit $rc (want 0), $(grep 'job history\|job ended' "$err" | tr '\n' ' ')"
fi

echo "== a relaunch takes the listing as it is when it starts"
# The listing shrinks from 3 slots to 2 (the supervisor asks the launch to
# stop), and to 1 while the program is stopping (1.5 s, three discovery
# periods, before its exit 3): the relaunch is on 1 rank, the listing of
# its time. Until 2026-12-07 the relaunch took the listing of the stop's
# request, 2 slots, and a second resize followed (the cluster manager's
# 3 -> 2 -> 1 nodes where 1 was asked).
new_case relist
echo localhost:3 >"$scratch/relist.list"
printf '#!/bin/sh\ncat %s\n' "$scratch/relist.list" >"$scratch/relist.sh"
cat >"$scratch/relist_prog.sh" <<EOS
#!/bin/bash
stop=0
trap 'stop=1' USR1
[ "\$GS_FAKE_NP" = 3 ] || exit 0
echo localhost:2 >"$scratch/relist.new" && mv "$scratch/relist.new" "$scratch/relist.list"
for _ in \$(seq 1 400); do [ \$stop = 1 ] && break; sleep 0.05; done
[ \$stop = 1 ] || exit 1
echo localhost:1 >"$scratch/relist.new" && mv "$scratch/relist.new" "$scratch/relist.list"
sleep 1.5
exit 3
EOS
chmod +x "$scratch/relist.sh" "$scratch/relist_prog.sh"
GS_FAKE_ARGV="$scratch/relist.argv" "$G" run -np 3 --elastic 1:3 --discover "$scratch/relist.sh" \
  --discover-every 0.5 --resize-interval 0 --shrink-on-discover --max-restarts 0 \
  --mpirun "$HERE/../cluster/fake_mpirun.sh" -- "$scratch/relist_prog.sh" >"$out" 2>"$err" &
sup=$!
wait_bounded "$sup" 60
rc=$?
sizes=$(grep -o -- '-np [0-9]*' "$scratch/relist.argv" 2>/dev/null | awk '{print $2}' | tr '\n' ' ')
if [ "$rc" = 0 ] && [ "$sizes" = "3 1 " ] &&
   grep -q '^gradsync run: resize 3 -> 1 rank' "$err"; then
  pass "the listing shrank twice while the launch stopped: relaunched on 1 rank at once (launches: $sizes)"
else
  fail "relaunch after two shrinks: exit $rc (want 0), launches of '$sizes' ranks (want '3 1 ')"
  tail -5 "$err"
fi

echo "== the discovery script fails"
cat >"$scratch/flaky.sh" <<EOS
#!/bin/sh
if [ -e "$scratch/flaky.ran" ]; then echo "scheduler down" >&2; exit 7; fi
touch "$scratch/flaky.ran"
echo localhost:2
EOS
chmod +x "$scratch/flaky.sh"
if start_job flaky -np 2 --elastic 2:2 --discover "$scratch/flaky.sh" --discover-every 0.5; then
  wait_bounded "$sup" 100
  rc=$?
  if [ "$rc" = 0 ] && [ "$(grep -c "^gradsync run: warning: discovery script $scratch/flaky.sh exited with status 7; keeping the hosts" "$err")" = 1 ] &&
     epochs_once 2 "$FULL"; then
    pass "script exits 7: one warning naming it, the job finished"
  else
    fail "failing discovery: exit $rc (want 0) and one warning"
  fi
else
  fail "failing discovery: no commit"
  kill "$sup" 2>/dev/null
fi

echo "== the discovery script hangs"
# From its second run on the script lists the host, then hangs (a sleep
# holding its output open). The launch is watched meanwhile: the job ends
# when its training does, the hung script and its sleep are ended with it
# (until 2026-12-01 the supervisor sat in the script's 10 s timeout, the
# job's end was noticed 8 s late, and the sleep outlived the supervisor).
cat >"$scratch/hang.sh" <<EOS
#!/bin/sh
echo localhost:2
if [ -e "$scratch/hang.ran" ]; then exec sleep 299.25; fi
touch "$scratch/hang.ran"
EOS
chmod +x "$scratch/hang.sh"
t0=$(now)
if start_job hang -np 2 --elastic 2:2 --discover "$scratch/hang.sh" --discover-every 0.5; then
  wait_bounded "$sup" 100
  rc=$?
  took=$(sub "$(now)" "$t0")
  sleep 0.5
  left=$(pgrep -f "sleep 299.25" | wc -l)
  # How late the supervisor ended after its launch did (the history's
  # end_s, from the supervisor's start): the job alone takes 3-4 s here (9 s
  # under ASan on a loaded host); the script's timeout is 10 s.
  end_s=$(awk '$1 == "1" && $NF == "done" { print $4 }' "$err")
  late=$(awk -v t="$took" -v e="${end_s:-x}" 'BEGIN { if (e == "x") print "x"; else printf "%.1f", t - e }')
  if [ "$rc" = 0 ] && [ "$left" = 0 ] && [ "$late" != x ] &&
     awk -v l="$late" 'BEGIN { exit !(l < 5) }' && epochs_once 2 "$FULL"; then
    pass "a hanging discovery script: the job ended $late s after its launch (< 5), no sleep left"
  else
    fail "a hanging discovery script: exit $rc (want 0), ended $late s after its launch (want < 5; $took s in all), $left sleep(s) left"
  fi
else
  fail "a hanging discovery script: no commit"
  kill "$sup" 2>/dev/null
fi
pkill -f "sleep 299.25" 2>/dev/null

echo "== SIGTERM while waiting for slots, the discovery script hung"
# The first run lists one slot of a 2:2 job, so the supervisor waits for
# discovery; every later run hangs. A SIGTERM then ends the job at once,
# the script with it (until 2026-12-01 the wait ran the script to its
# 10 s timeout before it looked at the signal).
new_case waithang
cat >"$scratch/waithang.sh" <<EOS
#!/bin/sh
if [ -e "$scratch/waithang.ran" ]; then exec sleep 298.25; fi
touch "$scratch/waithang.ran"
echo localhost:1
EOS
chmod +x "$scratch/waithang.sh"
"$G" run -np 2 --elastic 2:2 --discover "$scratch/waithang.sh" --discover-every 0.2 \
  --min-wait 60 -- "$G" "${TRAIN[@]}" --checkpoint "$ck" >"$out" 2>"$err" &
sup=$!
for _ in $(seq 1 100); do pgrep -f "sleep 298.25" >/dev/null && break; sleep 0.1; done
t0=$(now)
kill -TERM "$sup"
wait_bounded "$sup" 30
rc=$?
took=$(sub "$(now)" "$t0")
sleep 0.3
left=$(pgrep -f "sleep 298.25" | wc -l)
if [ "$rc" = 143 ] && [ "$left" = 0 ] && awk -v t="$took" 'BEGIN { exit !(t < 3) }' &&
   grep -q 'interrupted by signal 15 while waiting for slots' "$err"; then
  pass "SIGTERM while waiting, discovery hung: exit 143 in $took s (< 3), no sleep left"
else
  fail "SIGTERM while waiting, discovery hung: exit $rc (want 143) in $took s (want < 3), $left sleep(s) left; $(tail -2 "$err" | tr '\n' ' ')"
fi
pkill -f "sleep 298.25" 2>/dev/null

echo "== SIGUSR1 to the supervisor"
# A user's stop: passed to the launch's mpirun, the job commits and exits 3,
# a stop the supervisor did not ask for: the job ends with 3, no relaunch.
if start_job usr1 -np 2 --elastic 1:2; then
  kill -USR1 "$sup"
  wait_bounded "$sup" 40
  rc=$?
  if [ "$rc" = 3 ] && ! grep -q '^gradsync run: resize' "$err" &&
     grep -q 'elastic job ended: the job stopped on request (exit 3)' "$err"; then
    pass "SIGUSR1: passed to the ranks, the job committed and ended with 3, no relaunch"
  else
    fail "SIGUSR1 to the supervisor: exit $rc (want 3); $(tail -2 "$err" | tr '\n' ' ')"
  fi
else
  fail "SIGUSR1 to the supervisor: no commit"
  kill "$sup" 2>/dev/null
fi

echo "== SIGTERM to the supervisor"
if start_job stop -np 3 --elastic 2:3; then
  kill -TERM "$sup"
  wait_bounded "$sup" 40
  rc=$?
  sleep 0.5
  left=$(pgrep -f -- "--seed $tag" | wc -l)
  if [ "$rc" = 143 ] && [ "$left" = 0 ] && ! grep -q '^gradsync run: resize' "$err" &&
     grep -q 'elastic job ended: interrupted by signal 15; ranks stopped' "$err"; then
    pass "SIGTERM: forwarded, no relaunch, exit 143, no rank left"
  else
    fail "SIGTERM to the supervisor: exit $rc (want 143), $left rank(s) left (want 0)"
  fi
else
  fail "SIGTERM to the supervisor: no commit"
  kill "$sup" 2>/dev/null
fi
finish_tests
