#!/usr/bin/env bash
# The cluster manager (gradsync cluster serve, submit, jobs, cancel) with
# stand-in jobs (fake_job.sh under a stand-in mpirun, fake_mpirun.sh, on
# three local "nodes" 127.0.1.1-3), so that every case takes seconds:
#  - bad submissions and bad serve options: exit 2, naming what is wrong
#    (among them sizes a job cannot run on: a global batch no size divides,
#    a parameter-server job with no node left for a worker);
#  - the manager killed with SIGKILL while jobs run, and started again: every
#    job is adopted and finishes once, never two copies at once;
#  - a job's keeper killed: the job is relaunched from its last commit;
#  - a node lost (drained): its job shrinks to the nodes left and finishes;
#  - a job that always fails: failed after its restart budget, the others
#    unaffected;
#  - a submission read twice (a crash between journal and removal): no change;
#  - cancel of a queued and of a running job;
#  - a rank killed on one node of a job: its supervisor leaves the node out
#    for good, and the manager gives the node to a queued job at once;
#  - per-user and per-account limits: submissions above them refused, static
#    keeping them without a held job holding the line; a job's account;
#  - nested accounts (science/physics/hep): bad paths refused, --min above an
#    ancestor's limit refused, a parent's limit holding back a sub-account's
#    job with room of its own, the full path in gradsync jobs;
#  - dependencies (submit --after): a job waits for others to be done, and is
#    cancelled when one fails; bad --after refused;
#  - time limits (submit --time): a job stopped at its limit (timeout).
# usage: test_manager.sh GRADSYNC      Exit status: 0 pass, 1 fail.
set -u
G=${1:?usage: test_manager.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
# shellcheck source=tests/cluster/manager_lib.sh
. "$(dirname "$0")/manager_lib.sh"

printf '127.0.1.1\n127.0.1.2\n127.0.1.3 slots=1\n' >"$scratch/nodes"
serve() {
  "$G" cluster serve --nodes "$scratch/nodes" --spool "$spool" --interval 1 \
    --restart-budget 2 --mpirun "$HERE/fake_mpirun.sh" "$@" >>"$log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 50); do [ -f "$spool/pool.json" ] && return 0; sleep 0.1; done
  return 1
}
submit() { "$G" submit --spool "$spool" "$@" 2>"$err"; }
new_spool() { # DIR: the manager and its jobs' keepers stopped; the next serve uses DIR
  kill "$serve_pid" 2>/dev/null
  wait "$serve_pid" 2>/dev/null
  stop_keepers "$spool"
  spool=$1
}
state() { "$G" jobs --spool "$spool" --json | awk -v id="$1" -F'"state":"' \
  '$0 ~ "\"id\":" id "," { split($2, a, "\""); print a[1] }'; }
field() { "$G" jobs --spool "$spool" --json | grep "\"id\":$1," | sed -E "s/.*\"$2\":([^,}]*).*/\1/"; }
wait_state() { # ID STATE SECONDS
  for _ in $(seq 1 $(($3 * 10))); do [ "$(state "$1")" = "$2" ] && return 0; sleep 0.1; done
  return 1
}
wait_file() { for _ in $(seq 1 $(($2 * 10))); do [ -s "$1" ] && return 0; sleep 0.1; done; return 1; }

# expect_usage "what" ARGS...: exit 2 and a message matching $want
expect_2() {
  local what=$1 want=$2
  shift 2
  "$G" "$@" >/dev/null 2>"$err"
  local rc=$?
  if [ $rc = 2 ] && grep -q -- "$want" "$err"; then pass "$what: exit 2, '$(head -1 "$err")'"
  else fail "$what: exit $rc, wanted 2 and '$want'"; fi
}

echo "== refusals"
expect_2 "submit with no manager" "no cluster manager serves" submit --spool "$spool" -- --epochs 1
expect_2 "serve without a pool" "give the pool" cluster serve --spool "$spool"
expect_2 "serve with an unknown policy" "unknown policy" cluster serve --spool "$spool" \
  --nodes "$scratch/nodes" --policy nope
expect_2 "serve with a bad interval" "--interval needs seconds" cluster serve --spool "$spool" \
  --nodes "$scratch/nodes" --interval 0
expect_2 "serve with a bad restart penalty" "--restart-penalty needs seconds" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --restart-penalty soon
expect_2 "serve with a bad user share" "--user-share needs USER:SHARE" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --user-share alice
expect_2 "serve with a user's share twice" "user 'alice' given twice" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --user-share alice:2 --user-share alice:3
# The jobs' mpirun is found at the start, not at every job's launch (until
# 2026-12-06 the manager served and every job failed on it).
expect_2 "serve with a missing --mpirun" "--mpirun $scratch/no-mpirun: is not found" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --mpirun "$scratch/no-mpirun"
expect_2 "serve with an unwritable --round-log" \
  "--round-log $scratch/none/rounds.jsonl: cannot open it" cluster serve --spool "$spool" \
  --nodes "$scratch/nodes" --round-log "$scratch/none/rounds.jsonl"
serve --round-log "$scratch/rounds.jsonl" || { fail "the manager did not start"; exit 1; }
expect_2 "a second manager on one spool" "another manager serves it" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes"
expect_2 "--min above --max" "--min 3 is more than --max 2" submit --spool "$spool" --min 3 \
  --max 2 -- --epochs 1
expect_2 "--min above the pool" "more than the pool's 3 nodes" submit --spool "$spool" \
  --min 4 --max 4 -- --epochs 1
expect_2 "--min 1.5" "--min needs a node count" submit --spool "$spool" --min 1.5 -- --epochs 1
expect_2 "--max 0" "--max needs a node count" submit --spool "$spool" --max 0 -- --epochs 1
expect_2 "--weight -1" "--weight needs" submit --spool "$spool" --weight -1 -- --epochs 1
expect_2 "--user 'a b'" "--user needs one user" submit --spool "$spool" --user 'a b' -- --epochs 1
expect_2 "no job after --" "missing the job" submit --spool "$spool" --min 1
expect_2 "an unknown option" "unknown option '--gpus'" submit --spool "$spool" --gpus 2 -- x
expect_2 "bad train options" "the job's options: --epochs 'x'" submit --spool "$spool" -- \
  --model mlp --epochs x
expect_2 "a global batch no size divides" "divides the job's --global-batch 7" submit \
  --spool "$spool" --min 2 --max 3 -- --model mlp --global-batch 7
expect_2 "a parameter-server job with no node for a worker" \
  "leaves a worker beside the job's --ps 1 server" submit --spool "$spool" --min 1 --max 1 -- \
  --model mlp --ps 1 --sync bsp
expect_2 "the same, its options as --ps=1 (getopt's other form)" \
  "leaves a worker beside the job's --ps 1 server" submit --spool "$spool" --min 1 --max 1 -- \
  --model mlp --ps=1 --sync bsp
expect_2 "a parameter-server job whose workers divide no global batch" \
  "leaves workers beside the job's --ps 1 server that divide its --global-batch 7" submit \
  --spool "$spool" --min 3 --max 3 -- --model mlp --ps 1 --sync bsp --global-batch 7
expect_2 "a commit at a step of an asynchronous parameter-server job" \
  "the job's options: --sync asp: its workers run different step counts" submit \
  --spool "$spool" --min 2 --max 2 -- --model mlp --ps 1 --sync asp --commit-every 5
expect_2 "a bad --commit-every" "the job's options: --commit-every '0' must be" submit \
  --spool "$spool" -- --model mlp --commit-every 0
expect_2 "an unknown train option" "the job's options" submit --spool "$spool" -- --bogus
# A checkpoint directory that cannot be made: refused at submit (until
# 2026-12-06 accepted, then launched until the restart budget was spent).
expect_2 "a checkpoint under a missing directory" \
  "the job's options: --checkpoint $scratch/none/ck: cannot create the directory" submit \
  --spool "$spool" -- --model mlp --checkpoint "$scratch/none/ck"
expect_2 "the same of a DLRM job" \
  "the job's options: --checkpoint $scratch/none/ck: cannot create the directory" submit \
  --spool "$spool" -- --model dlrm --tables kaggle:0.001 --checkpoint "$scratch/none/ck"
# A plain --resume: a new job's own directory holds no checkpoint (it
# failed at every launch until its restart budget was spent).
expect_2 "a plain --resume without --checkpoint" "the job's options: --resume: a new job has no" \
  submit --spool "$spool" -- --model mlp --resume
expect_2 "a program without --exec" "give gradsync train's options" submit --spool "$spool" -- \
  train --epochs 1
expect_2 "--exec of a missing file" "not an executable file" submit --spool "$spool" --exec \
  -- /nonexistent/prog
expect_2 "--exec of a name not on PATH" "--exec gs-no-such-prog: no such program on PATH" \
  submit --spool "$spool" --exec -- gs-no-such-prog
expect_2 "cancel of no job" "no job 99" cancel --spool "$spool" 99
expect_2 "cancel of 'abc'" "not a job id" cancel --spool "$spool" abc
if [ -z "$("$G" jobs --spool "$spool" --json)" ]; then pass "nothing was queued by the refusals"
else fail "refused submissions were queued"; fi

echo "== three jobs; the manager SIGKILLed and restarted; a keeper killed; a node lost"
A=$(submit --min 1 --max 2 --name A --user alice --exec -- "$JOB" 60 "$scratch/A" 0.1)
B=$(submit --min 1 --max 1 --name B --exec -- "$JOB" 50 "$scratch/B" 0.1)
# C's name: longer than the NAME column, in letters of two bytes.
C=$(submit --min 1 --max 1 --name "Ć-ćwiczenie-øvelse" --exec -- "$JOB" 10 "$scratch/C" 0.1 1)
[ "$A" = 1 ] && [ "$B" = 2 ] && [ "$C" = 3 ] && pass "submit printed ids 1 2 3" ||
  fail "submit printed '$A' '$B' '$C'"
ua=$(field "$A" user) ub=$(field "$B" user)
if [ "$ua" = '"alice"' ] && [ "$ub" = "\"$(id -un)\"" ]; then
  pass "jobs' users: A $ua (--user), B $ub (the submitter's login)"
else fail "jobs' users: A $ua, B $ub (want alice and $(id -un))"; fi
wait_file "$scratch/A/step" 20 && wait_file "$scratch/B/step" 20 ||
  fail "jobs A and B did not start"
if grep -q '^2 127.0.1.1:1,127.0.1.2:1$' "$scratch/A/launches"; then
  pass "A started at its max on 2 nodes, B on the third; C waits (static, FIFO)"
else fail "A's first launch: $(cat "$scratch/A/launches")"; fi
[ "$(state 3)" = queued ] && pass "C queued" || fail "C is '$(state 3)'"
# The round log: the rounds that started A on 2 nodes and kept C waiting,
# each job as the policy saw it.
if grep -q '"policy":"static","nodes":3,.*"name":"A","cur":0,"size":2,"min":1,"max":2' \
     "$scratch/rounds.jsonl" &&
   grep -q '"name":"Ć-ćwiczenie-øvelse","cur":0,"size":0,"min":1,"max":1' "$scratch/rounds.jsonl"
then pass "--round-log: A given 2 nodes, C none, in the rounds' lines"
else fail "--round-log: $(head -c 600 "$scratch/rounds.jsonl")"; fi
exec 3>&2 2>/dev/null # not bash's "Killed" line
kill -9 "$serve_pid"
wait "$serve_pid"
exec 2>&3 3>&-
sleep 1
a_before=$(cat "$scratch/A/step")
serve || fail "the manager did not start again"
sleep 1
if grep -q "job 1: adopted" "$log" && grep -q "job 2: adopted" "$log"; then
  pass "restarted manager adopted A and B (A at step $a_before then $(cat "$scratch/A/step"))"
else fail "no adoption after the restart"; fi
# B's keeper killed: B is relaunched from its last commit.
kpid=$(cut -d' ' -f1 "$spool/jobs/2/lock")
kill -9 "$kpid"
# A's second node lost.
"$G" cluster drain --spool "$spool" 127.0.1.2 2>"$err" || fail "cluster drain"
wait_state 1 done 40 || fail "A did not finish: $(state 1)"
wait_state 2 done 40 || fail "B did not finish: $(state 2)"
wait_state 3 failed 40 || fail "C did not fail: $(state 3)"
if grep -q '^1 127.0.1.1:1$' "$scratch/A/launches" && [ "$(field 1 resizes)" -ge 1 ]; then
  pass "A shrank to 127.0.1.1 when 127.0.1.2 was drained ($(field 1 resizes) resize)"
else fail "A did not shrink: $(tr '\n' ';' <"$scratch/A/launches") resizes $(field 1 resizes)"; fi
if [ "$(field 2 restarts)" = 1 ] && [ "$(wc -l <"$scratch/B/launches")" = 2 ]; then
  pass "B relaunched once after its keeper was killed"
else fail "B: restarts $(field 2 restarts), launches $(wc -l <"$scratch/B/launches")"; fi
# Said as it was: the keeper died; no status of the supervisor's with a
# signal that is not its (until 2026-12-02 "status 137 (interrupted by
# signal 15; ranks stopped)").
if grep -q "job 2: its keeper died without an exit status" "$log" &&
   ! grep -q "job 2: its supervisor ended with status 137" "$log"; then
  pass "B's log: $(grep -o "job 2: its keeper died.*" "$log" | head -1)"
else fail "B's log after its keeper was killed: $(grep "job 2: " "$log" | tail -3)"; fi
for j in A B; do
  n=$([ "$j" = A ] && echo 60 || echo 50)
  if [ "$(cat "$scratch/$j/finished")" = "$n" ] && [ ! -e "$scratch/$j/errors" ]; then
    pass "$j finished once, at step $n, never two copies at once"
  else fail "$j: finished '$(cat "$scratch/$j/finished" 2>/dev/null)' errors '$(cat "$scratch/$j/errors" 2>/dev/null)'"; fi
done
if [ "$(field 3 restarts)" = 2 ] && "$G" jobs --spool "$spool" --json | grep '"id":3,' |
   grep -q 'restart budget (2) is spent'; then
  pass "C failed after its restart budget of 2, A and B unaffected"
else fail "C: restarts $(field 3 restarts), $("$G" jobs --spool "$spool" --json | grep '"id":3,')"; fi
# The table counts characters, not bytes: C's name cut to 14 of them and
# its STATE under the header's (until 2026-12-06 cut and padded by bytes:
# 4 columns short, and a letter split where the cut fell inside it).
table=$("$G" jobs --spool "$spool")
row=$(grep '^   3 ' <<<"$table") head=$(head -1 <<<"$table")
at_row=$(LC_ALL=C.UTF-8 bash -c 'p=${1%%failed*}; echo ${#p}' _ "$row")
at_head=$(LC_ALL=C.UTF-8 bash -c 'p=${1%%STATE*}; echo ${#p}' _ "$head")
if grep -q "  Ć-ćwiczenie-øv " <<<"$row" && [ "$at_row" = "$at_head" ]; then
  pass "jobs: a name of 18 letters in 27 bytes cut to 14 letters, its row aligned"
else fail "jobs: C's row '$row' (its state at $at_row, the header's at $at_head)"; fi

echo "== a request read twice (the manager died between journaling it and removing it)"
printf '{"op":"submit","id":1,"name":"again","min":1,"max":1,"exec":true,"args":["%s","5","%s"],"cwd":"/","time":1}' \
  "$JOB" "$scratch/again" >"$spool/incoming/.t" && mv "$spool/incoming/.t" "$spool/incoming/0-again-submit-1.json"
for _ in $(seq 1 30); do [ -e "$spool/incoming/0-again-submit-1.json" ] || break; sleep 0.1; done
sleep 0.5
if [ ! -e "$spool/incoming/0-again-submit-1.json" ] && [ "$("$G" jobs --spool "$spool" --json | wc -l)" = 3 ] &&
   [ "$(state 1)" = done ] && [ ! -e "$scratch/again" ]; then
  pass "a submission whose id is known is taken and changes nothing"
else fail "the repeated submission: $("$G" jobs --spool "$spool" --json | wc -l) jobs, job 1 $(state 1)"; fi

echo "== cancel"
"$G" cluster undrain --spool "$spool" 127.0.1.2
D=$(submit --min 3 --max 3 --name D --exec -- "$JOB" 400 "$scratch/D" 0.1)
E=$(submit --min 1 --name E --exec -- "$JOB" 400 "$scratch/E" 0.1)
wait_file "$scratch/D/step" 20 || fail "D did not start"
[ "$(state "$E")" = queued ] || fail "E is '$(state "$E")', not queued"
# A bad id among good ones cancels nothing (exit 2).
"$G" cancel --spool "$spool" "$E" 99999 2>"$err"
rc=$?
sleep 1.5
if [ $rc = 2 ] && grep -q "no job 99999" "$err" && grep -q "nothing cancelled" "$err" &&
   [ "$(state "$E")" = queued ]; then pass "cancel of E and of no job: exit 2, E still queued"
else fail "cancel of E and 99999: exit $rc, E '$(state "$E")' ($(head -2 "$err"))"; fi
"$G" cancel --spool "$spool" "$E" "$D" 2>"$err" || fail "cancel exited $?"
wait_state "$E" cancelled 10 && pass "queued E cancelled" || fail "E: $(state "$E")"
wait_state "$D" cancelled 20 && pass "running D cancelled" || fail "D: $(state "$D")"
[ ! -e "$scratch/D/running" ] && pass "D's program ended" || fail "D's program still runs"
"$G" cancel --spool "$spool" "$D" 2>"$err"
[ $? = 1 ] && grep -q "already ended" "$err" && pass "cancel of an ended job: exit 1" ||
  fail "cancel of an ended job"
expect_2 "--after a cancelled job" "--after $D: job $D has ended (cancelled)" submit \
  --spool "$spool" --after "$D" -- --model mlp
"$G" jobs --spool "$spool" >"$err" 2>&1 && grep -q 'cancelled' "$err" &&
  pass "gradsync jobs prints the table" || fail "gradsync jobs"

echo "== a rank killed on one node: its supervisor leaves the node out, the manager gives it back"
# F runs 6 s, G starts within a manager's interval (1 s) of F's relaunch.
F=$(submit --min 1 --max 2 --name F --exec -- "$JOB" 60 "$scratch/F" 0.1 kill:127.0.1.2)
wait_file "$scratch/F/step" 20 || fail "F did not start"
G2=$(submit --min 2 --max 2 --name G --exec -- "$JOB" 20 "$scratch/G" 0.1)
wait_file "$scratch/G/step" 30
if [ -s "$scratch/G/step" ] && [ ! -e "$scratch/F/finished" ] &&
   grep -q "job $F: its supervisor left node 127.0.1.2 out" "$log" &&
   grep -q '^1 127.0.1.1:1$' "$scratch/F/launches"; then
  pass "F relaunched on 127.0.1.1 alone; 127.0.1.2 went back to the pool and G started while F ran" \
       "(G's first launch: $(head -1 "$scratch/G/launches"))"
else
  fail "F's launches: $(tr '\n' ';' <"$scratch/F/launches"); G: $(state "$G2")," \
       "$(cat "$scratch/G/launches" 2>/dev/null)"
fi
wait_state "$F" done 60 || fail "F did not finish: $(state "$F")"
wait_state "$G2" done 60 || fail "G did not finish: $(state "$G2")"
[ "$(cat "$scratch/F/finished" 2>/dev/null)" = 60 ] && [ ! -e "$scratch/F/errors" ] &&
  pass "F finished once, at step 60" || fail "F: finished '$(cat "$scratch/F/finished" 2>/dev/null)'"

echo "== a rank killed in a one-node job: relaunched at once on its node"
# Its supervisor leaves a killed rank's slot out; with no other slot it
# used to wait the manager's --min-wait (30 s) holding the node, then fail
# (a restart counted by the manager). Now the slot is used again at once.
K=$(submit --min 1 --max 1 --name K --exec -- "$JOB" 12 "$scratch/K" 0.1 kill:first)
wait_state "$K" done 40 || fail "K did not finish: $(state "$K")"
relaunch_s=$(grep -h '"event":"launch"' "$spool/jobs/$K"/events.*.jsonl 2>/dev/null |
  sed -E 's/.*"time":([0-9.]+).*/\1/' | awk 'NR == 1 { a = $1 } NR == 2 { printf "%.1f", $1 - a }')
if [ "$(wc -l <"$scratch/K/launches")" = 2 ] &&
   [ "$(cut -d' ' -f2 "$scratch/K/launches" | sort -u | wc -l)" = 1 ] &&
   [ "$(cat "$scratch/K/finished" 2>/dev/null)" = 12 ] &&
   awk -v t="$relaunch_s" 'BEGIN { exit !(t != "" && t < 10) }'; then
  pass "K relaunched on its one node $relaunch_s s after its launch began, finished at step 12"
else
  fail "K: launches $(tr '\n' ';' <"$scratch/K/launches"), relaunch after '$relaunch_s' s," \
       "finished '$(cat "$scratch/K/finished" 2>/dev/null)'"
fi

echo "== every node of a running job drained: preempted and queued, no restart spent"
# With no node left the policy skipped it (0 nodes wanted of 0 held): its
# supervisor waited 30 s for slots, failed and spent a restart (or failed
# the job with no budget left). Then a cancel after that preemption: the
# preemption's SIGTERM time was kept, and the cancel SIGKILLed the keeper at
# once (no exit status, no history) instead of stopping it.
PR=$(submit --min 1 --max 1 --name PR --exec -- "$JOB" 400 "$scratch/PR" 0.1)
wait_file "$scratch/PR/step" 20 || fail "PR did not start"
for n in 127.0.1.1 127.0.1.2 127.0.1.3; do
  "$G" cluster drain --spool "$spool" "$n" 2>"$err" || fail "cluster drain $n"
done
if wait_state "$PR" queued 10 && grep -q "job $PR: preempted (no node of its partition is left)" "$log" &&
   [ "$(field "$PR" restarts)" = 0 ]; then
  pass "PR, every node of the pool drained, preempted and queued within 10 s, 0 restarts"
else fail "PR after the pool was drained: $(state "$PR"), restarts $(field "$PR" restarts)"; fi
for n in 127.0.1.1 127.0.1.2 127.0.1.3; do "$G" cluster undrain --spool "$spool" "$n" 2>"$err"; done
wait_state "$PR" running 20 || fail "PR did not start again: $(state "$PR")"
wait_file "$scratch/PR/step" 5
sleep 1
"$G" cancel --spool "$spool" "$PR" 2>"$err" || fail "cancel PR: exit $?"
if wait_state "$PR" cancelled 20 && ! grep -q "job $PR: its keeper (pid [0-9]*) is gone without an exit status" "$log"; then
  pass "PR cancelled after its preemption with a SIGTERM: its keeper ended with a status"
else fail "PR's cancel after a preemption: $(state "$PR"); $(grep "job $PR:" "$log" | tail -3 | tr '\n' ';')"; fi

echo "== a job just submitted is listed at once, every time"
# The manager takes a request file and writes its snapshot later in its
# loop: until 2026-11-30 the job was in neither for that time (missed in 10
# of 40 submissions of a busy manager), and a script that submits and then
# reads `gradsync jobs` did not find its job.
missed=0
for k in $(seq 1 20); do
  id=$(submit --min 1 --max 3 --name "quick$k" --exec -- "$JOB" 3 "$scratch/Q$k" 0.05)
  for _ in 1 2 3 4 5; do
    "$G" jobs --spool "$spool" --json | grep -q "\"id\":$id," || { missed=$((missed + 1)); break; }
  done
done
[ "$missed" = 0 ] && pass "20 jobs, each listed in the 5 listings right after its submission" ||
  fail "$missed of 20 jobs missing from gradsync jobs right after their submission"

echo "== an --exec program's progress (progress.json in \$GRADSYNC_ELASTIC_DIR)"
# The manager points the program's commits at its job directory; a program
# that reports its progress there is shown and measured as a gradsync train
# job is (until 2026-12-01 an --exec job stayed unmeasured, linear, at
# progress '-'). 30 steps of 0.1 s and 10 samples: about 100 samples/s.
P=$(submit --min 1 --max 1 --name P --exec -- "$JOB" 30 "$scratch/P" 0.1 progress)
wait_file "$scratch/P/step" 20 || fail "job P did not start"
mid=
for _ in $(seq 1 40); do
  mid=$(field "$P" progress)
  [[ $mid =~ ^0\.[0-9]+$ ]] && break
  sleep 0.1
done
wait_state "$P" done 30 || fail "job P: '$(state "$P")', not done"
speed=$(field "$P" speed)
if [[ $mid =~ ^0\.[0-9]+$ ]] && [ "$(field "$P" progress)" = 1 ] &&
   [ -s "$spool/jobs/$P/ckpt/progress.json" ] &&
   python3 -c 'import json, sys; r = json.loads("{" + sys.argv[1] + "}")["1"]; sys.exit(not 30 < r < 110)' \
     "$(echo "$speed" | sed 's/^{//')"; then
  pass "an --exec job's progress.json: progress $mid while running, 1 at the end, speed $speed"
else fail "an --exec job's progress: '$mid' while running, '$(field "$P" progress)' at the end," \
  "speed '$speed', $(ls "$spool/jobs/$P/ckpt" 2>&1)"; fi
# Its start-up measured from its launch's first two reports (the seconds
# to training at speed, less the samples trained meanwhile), and the price
# of a resize not yet measured (serve's default, no --restart-penalty): its
# start-up plus the pool's measured stops (each job with both: its mean
# resize less its start-up, at least 0), 30 s before any start-up
# (gs_cluster_restart_prior; until 2026-12-05 a fixed 30 s). A job that
# sleeps 2 s before its 30 steps of 0.1 s: a start-up of about 2 s.
S=$(submit --min 1 --max 1 --name S --exec -- "$JOB" 30 "$scratch/S" 0.1 progress 2)
wait_state "$S" done 30 || fail "job S: '$(state "$S")', not done"
sleep 1.5 # a policy round after its end prices it too
if "$G" jobs --spool "$spool" --json | python3 -c '
import json, sys
jobs = [json.loads(l) for l in sys.stdin if l.startswith("{")]
jobs = jobs[0]["jobs"] if len(jobs) == 1 and "jobs" in jobs[0] else jobs
s = [j for j in jobs if j["id"] == int(sys.argv[1])][0]
both = [j for j in jobs if j.get("restart_s") is not None and j.get("startup_s") is not None]
stop = sum(max(j["restart_s"] - j["startup_s"], 0) for j in both) / len(both) if both else 0
su, price = s.get("startup_s"), s.get("restart_price_s")
print("start-up", su, "price", price, "stop", round(stop, 2), "of", len(both), "job(s)")
sys.exit(not (su is not None and 1.6 < su < 4 and s.get("restart_s") is None and
              price is not None and abs(price - (su + stop)) < 0.05))
' "$S" >"$err" 2>&1 &&
   "$G" jobs --spool "$spool" | grep -Eq "^ *$S  S .* ~[0-9]+\.[0-9] "; then
  pass "a job's start-up measured and its resize priced from it: $(cat "$err")"
else fail "job S's start-up and price: $(cat "$err"); $("$G" jobs --spool "$spool" | grep -E "^ *$S ")"; fi
# One whose progress.json is no report: the manager says so once, in its
# log, and leaves the job unmeasured; the job itself runs to its end.
Q=$(submit --min 1 --max 1 --name Q --exec -- "$JOB" 20 "$scratch/Q" 0.1 badprogress)
wait_state "$Q" done 30 || fail "job Q: '$(state "$Q")', not done"
said=$(grep -c "job $Q: .*progress.json is not a progress report (it needs the numbers epoch" "$log")
qspeed=$("$G" jobs --spool "$spool" --json | python3 -c 'import json, sys
for l in sys.stdin:
    j = json.loads(l)
    if j["id"] == int(sys.argv[1]): print(json.dumps(j["speed"]))' "$Q")
if [ "$said" = 1 ] && [ "$(field "$Q" progress)" = null ] && [ "$qspeed" = "{}" ]; then
  pass "a progress.json that is no report: said once in the log, the job done and unmeasured"
else fail "a bad progress.json: said $said times, progress '$(field "$Q" progress)'," \
  "speed '$qspeed'"; fi

echo "== an --exec program's profile (profile.json in \$GRADSYNC_ELASTIC_DIR): predicted"
# With the pool's network known, a profile beside the program's progress
# (gradsync.torch.elastic's State writes its engine's) is priced as a
# gradsync train job's is, at the profile's batch a rank on every size
# (until 2026-12-01 only train jobs were predicted). BERT-base's profile: 4
# samples a rank in 0.974 s forward and 2.274 s backward, so on one node of
# one slot 4 / 3.248 = 1.23 samples/s; on 2 and 3 nodes more, but well
# below linear: its 440 MB of gradients cross a 1 Gbit/s link.
new_spool "$scratch/spool_exec"
serve --net 1gbit || fail "the manager with --net did not start"
R=$(submit --min 1 --max 3 --name R --exec -- "$JOB" 20 "$scratch/R" 0.1 \
  "profile:$HERE/../../profiles/bert_base.json")
wait_state "$R" done 30 || fail "job R: '$(state "$R")', not done"
rprior=$("$G" jobs --spool "$spool" --json | python3 -c 'import json, sys
for l in sys.stdin:
    j = json.loads(l)
    if j["id"] == int(sys.argv[1]): print(json.dumps(j.get("prior")))' "$R")
if python3 -c 'import json, sys
p = json.loads(sys.argv[1])
one, two, three = p["1"], p["2"], p["3"]
# jobs --json prints 2 digits
sys.exit(not (abs(one - 4 / 3.247766) < 0.05 * one and one < two < 0.9 * 2 * one and
              two < three < 0.9 * 3 * one))' \
     "$rprior" 2>/dev/null && grep -q "job $R: predicted samples/s by nodes" "$log"; then
  pass "an --exec job's profile.json: predicted samples/s by nodes $rprior"
else fail "an --exec job's prediction: '$rprior' (want sizes 1 to 3, 1.23 on 1)"; fi
# A profile.json that is no profile: one line in the log naming the file
# and what is wrong, no prediction, the job runs to its end.
printf '{"name": "half", "forward_s": 0.1}\n' >"$scratch/bad_profile.json"
BP=$(submit --min 1 --max 3 --name BP --exec -- "$JOB" 20 "$scratch/BP" 0.1 \
  "profile:$scratch/bad_profile.json")
wait_state "$BP" done 30 || fail "job BP: '$(state "$BP")', not done"
said=$(grep -c "job $BP: its profile .*/jobs/$BP/ckpt/profile.json: .*tensors" "$log")
bprior=$("$G" jobs --spool "$spool" --json | python3 -c 'import json, sys
for l in sys.stdin:
    j = json.loads(l)
    if j["id"] == int(sys.argv[1]): print(json.dumps(j.get("prior")))' "$BP")
if [ "$said" = 1 ] && { [ "$bprior" = null ] || [ "$bprior" = "{}" ]; }; then
  pass "a profile.json that is no profile: said once in the log, no prediction, the job done"
else fail "a bad profile.json: said $said times, prior '$bprior'"; fi

echo "== the commits asked of jobs: gradsync train's by time, DLRM's by steps"
# gradsync train takes a stop at its checks (about 0.5 s apart) with time
# commits, so a resize does not wait for 20 steps of a slow job (until
# 2026-12-05 every job got --commit-every 20). The stand-in mpirun writes
# each command it is given to GS_FAKE_ARGV.
new_spool "$scratch/spool_commit"
export GS_FAKE_ARGV=$scratch/argv
serve || fail "the manager did not start"
T=$(submit --min 1 --max 1 --name T -- --model mlp --synthetic 256 --batch 16 --epochs 1 \
  --max-steps 2)
D=$(submit --min 1 --max 1 --name D -- --model dlrm --tables kaggle:0.001 --epochs 1)
wait_state "$T" done 60 || fail "job T: '$(state "$T")', not done"
for _ in $(seq 1 100); do grep -q -- "--model dlrm" "$scratch/argv" 2>/dev/null && break; sleep 0.1; done
"$G" cancel --spool "$spool" "$D" >/dev/null 2>&1
if grep -- "--model mlp" "$scratch/argv" | grep -q -- "--commit-every 10s --resume=auto" &&
   grep -- "--model dlrm" "$scratch/argv" | grep -q -- "--commit-every 20 --resume=auto"; then
  pass "a train job was given --commit-every 10s, a DLRM job --commit-every 20"
else fail "the commits asked: $(grep -o -- "--model [a-z]*\|--commit-every [0-9s]*" "$scratch/argv" | tr '\n' ' ')"; fi
new_spool "$scratch/spool_commit2"
: >"$scratch/argv"
serve --commit-every 7 || fail "the manager with --commit-every 7 did not start"
T2=$(submit --min 1 --max 1 --name T2 -- --model mlp --synthetic 256 --batch 16 --epochs 1 \
  --max-steps 2)
wait_state "$T2" done 60 || fail "job T2: '$(state "$T2")', not done"
if grep -- "--model mlp" "$scratch/argv" | grep -q -- "--commit-every 7 --resume=auto"; then
  pass "serve --commit-every 7: a train job commits every 7 steps"
else fail "serve --commit-every 7: $(grep -o -- "--commit-every [0-9s]*" "$scratch/argv")"; fi
unset GS_FAKE_ARGV
expect_2 "serve --commit-every 0s" "--commit-every '0s': seconds must be" cluster serve \
  --spool "$scratch/spool_x" --nodes "$scratch/nodes" --commit-every 0s

echo "== a train job's progress and speed between its commits (progress.json)"
# gradsync train --commit-every Ts reports its position at each check
# (about 0.5 s apart) in progress.json; the manager shows and measures the
# job from it while no commit is made (its own --commit-every 1000s: none
# inside its one epoch of 4096 steps of 2 ms or more). Until 2026-12-05 the
# manager read commits only, so frequent commits were the price of its
# measurements.
new_spool "$scratch/spool_report"
serve || fail "the manager did not start"
R=$(submit --min 1 --max 1 --name R -- --model mlp --synthetic 65536 --batch 16 --epochs 1 \
  --straggler 0:+2ms --commit-every 1000s)
rprog= rspeed=  # field cuts at the first , or }: {"1":SPEED
for _ in $(seq 1 300); do
  rprog=$(field "$R" progress) rspeed=$(field "$R" speed)
  [[ $rprog =~ ^0\.[0-9]+$ ]] && [[ $rspeed =~ ^\{\"1\":[0-9.e+]+$ ]] && break
  sleep 0.1
done
rckpt=$(ls "$spool/jobs/$R/ckpt" 2>&1 | tr '\n' ' ')
"$G" cancel --spool "$spool" "$R" >/dev/null 2>&1
if [[ $rprog =~ ^0\.[0-9]+$ ]] && [[ $rspeed =~ ^\{\"1\":[0-9.e+]+$ ]] &&
   [[ " $rckpt" != *" checkpoint.json "* ]] && [[ " $rckpt" == *" progress.json "* ]]; then
  pass "a train job with no commit yet: progress $rprog, speed $rspeed from its progress.json"
else fail "a train job's reports: progress '$rprog', speed '$rspeed', its directory: $rckpt"; fi

echo "== per-user limits and accounts (serve --user-limit, --account-share; submit --account)"
new_spool "$scratch/spool2"
expect_2 "serve with an unknown network" "--net: unknown network 'bogus'" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --net bogus
expect_2 "serve with a bad user limit" "--user-limit needs USER:NODES" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --user-limit alice:0
expect_2 "serve with a user's limit twice" "user 'alice' given twice" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --user-limit alice:1 --user-limit alice:2
expect_2 "serve with a bad account share" "--account-share needs ACCOUNT:SHARE" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --account-share physics:0
serve --user-limit alice:1 --user-limit '*:2' --account-share physics:2 ||
  { fail "the manager did not start"; exit 1; }
expect_2 "a bad --account" "--account needs one account" submit --spool "$spool" \
  --account 'a b' -- --epochs 1
expect_2 "--min above the user's limit" "more than user alice's limit of 1 node" submit \
  --spool "$spool" --user alice --min 2 --max 3 -- --epochs 1
expect_2 "--min above the others' limit" "more than user bob's limit of 2 nodes" submit \
  --spool "$spool" --user bob --min 3 --max 3 -- --epochs 1
# static: alice's first job at her limit (1 of its 2), her second held by
# it without holding the line: bob's job behind it starts, at his limit (2 of 3).
L1=$(submit --min 1 --max 2 --name L1 --user alice --account physics --exec -- "$JOB" 30 \
  "$scratch/L1" 0.1)
L2=$(submit --min 1 --max 2 --name L2 --user alice --exec -- "$JOB" 5 "$scratch/L2" 0.05)
L3=$(submit --min 1 --max 3 --name L3 --user bob --exec -- "$JOB" 30 "$scratch/L3" 0.1)
wait_file "$scratch/L1/step" 20 && wait_file "$scratch/L3/step" 20 ||
  fail "jobs L1 and L3 did not start"
n1=$(awk 'NR == 1 { print $1 }' "$scratch/L1/launches")
n3=$(awk 'NR == 1 { print $1 }' "$scratch/L3/launches")
if [ "$n1" = 1 ] && [ "$n3" = 2 ] && [ "$(state "$L2")" = queued ]; then
  pass "alice's L1 on 1 node (her limit), L2 queued behind it, bob's L3 on 2 (the '*' limit)"
else fail "L1 on '$n1' nodes, L3 on '$n3', L2 '$(state "$L2")' (want 1, 2, queued)"; fi
acct=$(field "$L1" account)
if [ "$acct" = '"physics"' ] && "$G" jobs --spool "$spool" | grep -q 'alice/phys'; then
  pass "L1's account: $acct (gradsync jobs: alice/physics)"
else fail "L1's account '$acct'"; fi
if wait_state "$L1" done 30 && wait_state "$L2" done 30; then
  n2=$(awk 'NR == 1 { print $1 }' "$scratch/L2/launches")
  [ "$n2" = 1 ] && pass "L2 ran after L1, on 1 node" || fail "L2 first ran on '$n2' nodes"
else fail "L1 '$(state "$L1")', L2 '$(state "$L2")' (want done)"; fi

echo "== per-account limits (serve --account-limit)"
new_spool "$scratch/spool3"
expect_2 "serve with a bad account limit" "--account-limit needs ACCOUNT:NODES" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --account-limit physics:0
expect_2 "serve with an account's limit twice" "account 'physics' given twice" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --account-limit physics:1 --account-limit physics:2
serve --account-limit physics:2 || { fail "the manager did not start"; exit 1; }
expect_2 "--min above the account's limit" "more than account physics's limit of 2 nodes" \
  submit --spool "$spool" --user bob --account physics --min 3 --max 3 -- --epochs 1
# static: alice's A1 holds physics's 2 nodes; bob's A2, physics's too, waits
# on the account without holding the line: carol's A3 (no account) starts.
A1=$(submit --min 2 --max 2 --name A1 --user alice --account physics --exec -- "$JOB" 30 \
  "$scratch/A1" 0.1)
A2=$(submit --min 1 --max 1 --name A2 --user bob --account physics --exec -- "$JOB" 5 \
  "$scratch/A2" 0.05)
A3=$(submit --min 1 --max 1 --name A3 --user carol --exec -- "$JOB" 30 "$scratch/A3" 0.1)
wait_file "$scratch/A1/step" 20 && wait_file "$scratch/A3/step" 20 ||
  fail "jobs A1 and A3 did not start"
n1=$(awk 'NR == 1 { print $1 }' "$scratch/A1/launches")
if [ "$n1" = 2 ] && [ "$(state "$A2")" = queued ] && [ "$(state "$A3")" = running ]; then
  pass "A1 on physics's 2 nodes, bob's A2 queued on the account, carol's A3 running on the third"
else fail "A1 on '$n1' nodes, A2 '$(state "$A2")', A3 '$(state "$A3")' (want 2, queued, running)"; fi
if wait_state "$A1" done 30 && wait_state "$A2" done 30; then
  pass "A2 ran after A1"
else fail "A1 '$(state "$A1")', A2 '$(state "$A2")' (want done)"; fi
wait_state "$A3" done 30 || fail "A3 '$(state "$A3")' (want done)"
sleep 1.2 # a snapshot after the ends
# The usage by account (jobs --accounts): each job charged the nodes it held
# for as long as it ran (A1: 2 nodes), physics its two jobs' node-seconds,
# carol (no account) by user; the parts of all held add up to 1.
"$G" jobs --spool "$spool" --json >"$scratch/acct_jobs"
"$G" jobs --spool "$spool" --accounts --json >"$scratch/acct_json"
"$G" jobs --spool "$spool" --accounts >"$scratch/acct_text"
cat "$scratch/acct_text"
if python3 - "$scratch/acct_jobs" "$scratch/acct_json" "$A1" "$A2" "$A3" <<'PY'
import json, sys
jobs = {j["id"]: j for j in map(json.loads, open(sys.argv[1]))}
rep = {a["account"]: a for a in json.load(open(sys.argv[2]))["accounts"]}
a1, a2, a3 = (jobs[int(x)] for x in sys.argv[3:6])
ok = True
for j, n in ((a1, 2), (a2, 1), (a3, 1)):  # node-seconds: nodes x run time
    if abs(j["node_s"] - n * j["run_s"]) > 0.1 * n * j["run_s"] + 0.5 or j["fair_node_s"] <= 0:
        print(f"job {j['id']}: node_s {j['node_s']}, {n} x run_s {j['run_s']}, "
              f"fair {j['fair_node_s']}"); ok = False
ph, ca = rep.get("physics"), rep.get("user carol")
if not ph or not ca or ph["jobs"] != 2 or ph["done"] != 2 or ca["jobs"] != 1 \
        or abs(ph["node_s"] - a1["node_s"] - a2["node_s"]) > 0.15 \
        or abs(ph["used_share"] + ca["used_share"] - 1) > 1e-3 \
        or ph["running"] != 0 or ph["nodes"] != 0:
    print("report:", rep); ok = False
sys.exit(0 if ok else 1)
PY
then
  pass "jobs --accounts: physics $(grep -o '"account":"physics"[^}]*' "$scratch/acct_json")"
else fail "jobs --accounts: $(cat "$scratch/acct_json")"; fi
if grep -q '^  physics  *2  *0  *0 ' "$scratch/acct_text" && grep -q '^  user carol ' "$scratch/acct_text" &&
   grep -q 'account (or user).*(policy static)' "$scratch/acct_text"; then
  pass "jobs --accounts as a table: $(grep physics "$scratch/acct_text")"
else fail "jobs --accounts as a table: $(cat "$scratch/acct_text")"; fi
expect_2 "--accounts twice" "option --accounts given more than once" jobs --spool "$spool" \
  --accounts --accounts

echo "== nested accounts (submit --account science/physics; limits on parents)"
new_spool "$scratch/spool3n"
expect_2 "serve with an empty level in an account's limit" \
  "--account-limit science//hep:2: account 'science//hep': an empty level" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --account-limit science//hep:2
expect_2 "serve with a '/' at an account share's end" "a '/' at its end" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --account-share science/:2
serve --account-limit science:2 --account-limit science/physics:3 --account-share science:3 \
  --account-share science/physics:2 || { fail "the manager did not start"; exit 1; }
expect_2 "--account with an empty level" "got 'science//hep': an empty level" \
  submit --spool "$spool" --account science//hep -- --epochs 1
expect_2 "--account with a leading /" "got '/science': a '/' at its start" \
  submit --spool "$spool" --account /science -- --epochs 1
expect_2 "--account with a trailing /" "got 'science/': a '/' at its end" \
  submit --spool "$spool" --account science/ -- --epochs 1
expect_2 "--account 9 levels deep" "more than 8 levels" \
  submit --spool "$spool" --account a/b/c/d/e/f/g/h/i -- --epochs 1
expect_2 "--account with a bad level" "level 2 ('ph ys') is not" \
  submit --spool "$spool" --account 'science/ph ys' -- --epochs 1
expect_2 "--min above an ancestor's limit" \
  "more than account science's limit of 2 nodes (cluster serve --account-limit), which holds science/physics/hep" \
  submit --spool "$spool" --user bob --account science/physics/hep --min 3 --max 3 -- --epochs 1
# static: alice's N1 (science's own) holds science's 2 nodes; bob's N2 in
# science/physics, which has room of its own (3), waits on science's limit
# without holding the line: carol's N3 (no account) starts.
N1=$(submit --min 2 --max 2 --name N1 --user alice --account science --exec -- "$JOB" 30 \
  "$scratch/N1" 0.1)
N2=$(submit --min 1 --max 1 --name N2 --user bob --account science/physics/hep --exec -- \
  "$JOB" 5 "$scratch/N2" 0.05)
N3=$(submit --min 1 --max 1 --name N3 --user carol --exec -- "$JOB" 30 "$scratch/N3" 0.1)
wait_file "$scratch/N1/step" 20 && wait_file "$scratch/N3/step" 20 ||
  fail "jobs N1 and N3 did not start"
n1=$(awk 'NR == 1 { print $1 }' "$scratch/N1/launches")
if [ "$n1" = 2 ] && [ "$(state "$N2")" = queued ] && [ "$(state "$N3")" = running ]; then
  pass "N1 on science's 2 nodes, N2 (science/physics/hep) queued on science's limit, N3 running"
else fail "N1 on '$n1' nodes, N2 '$(state "$N2")', N3 '$(state "$N3")' (want 2, queued, running)"; fi
acct=$(field "$N2" account)
if [ "$acct" = '"science/physics/hep"' ] &&
   "$G" jobs --spool "$spool" | grep -q ' bob/science/physics/hep  *queued'; then
  pass "N2's account: $acct, in full in gradsync jobs (bob/science/physics/hep)"
else fail "N2's account '$acct'; gradsync jobs: $("$G" jobs --spool "$spool" | grep N2)"; fi
if wait_state "$N1" done 30 && wait_state "$N2" done 30; then
  pass "N2 ran after N1"
else fail "N1 '$(state "$N1")', N2 '$(state "$N2")' (want done)"; fi

echo "== dependencies (submit --after, Slurm's --dependency=afterok)"
jval() { # ID KEY: the job's value, as Python prints it
  "$G" jobs --spool "$spool" --json | python3 -c 'import json, sys
for l in sys.stdin:
    j = json.loads(l)
    if j["id"] == int(sys.argv[1]): print(j.get(sys.argv[2]))' "$1" "$2"
}
new_spool "$scratch/spool4"
serve || { fail "the manager did not start"; exit 1; }
expect_2 "--after 0" "--after needs job ids from 1" submit --spool "$spool" --after 0 -- --epochs 1
expect_2 "--after 1,1" "none twice" submit --spool "$spool" --after 1,1 -- --epochs 1
expect_2 "--after 2," "--after needs job ids" submit --spool "$spool" --after 2, -- --epochs 1
expect_2 "--after a job not yet submitted" "--after 7: no job 7 on the manager" \
  submit --spool "$spool" --after 7 -- --epochs 1
# D1 runs after L1 (8 s) though nodes are free, and starts once L1 is done;
# E1 after F1, which fails: cancelled, and E2 after E1 with it; the jobs
# kept across a SIGKILL of the manager.
L1=$(submit --min 1 --max 1 --name L1 --exec -- "$JOB" 80 "$scratch/dep_L1" 0.1)
D1=$(submit --min 1 --max 1 --name D1 --after "$L1" --exec -- "$JOB" 5 "$scratch/dep_D1" 0.05)
F1=$(submit --min 1 --max 1 --name F1 --exec -- "$JOB" 5 "$scratch/dep_F1" 0.05 1)
E1=$(submit --min 1 --max 1 --name E1 --after "$F1,$L1" --exec -- "$JOB" 5 "$scratch/dep_E1" 0.05)
E2=$(submit --min 1 --max 1 --name E2 --after "$E1" --exec -- "$JOB" 5 "$scratch/dep_E2" 0.05)
wait_file "$scratch/dep_L1/step" 20 || fail "L1 did not start"
sleep 1.5
dmsg=$(jval "$D1" message)
dafter=$(jval "$D1" after)
if [ "$(state "$D1")" = queued ] && [ ! -e "$scratch/dep_D1/launches" ] &&
   [ "$dmsg" = "waiting for job $L1 (running)" ] && [ "$dafter" = "[$L1]" ]; then
  pass "D1 queued behind L1 with nodes free: $dmsg"
else fail "D1 '$(state "$D1")', message $dmsg, after '$dafter' (want queued, waiting for job $L1)"; fi
exec 3>&2 2>/dev/null # not bash's "Killed" line
kill -9 "$serve_pid"
wait "$serve_pid"
exec 2>&3 3>&-
serve || fail "the manager did not start again"
if wait_state "$E1" cancelled 30 && wait_state "$E2" cancelled 30 &&
   [ "$(jval "$E1" message)" = "job $F1, which it runs after, failed" ] &&
   [ "$(jval "$E2" message)" = "job $E1, which it runs after, was cancelled" ] &&
   [ ! -e "$scratch/dep_E1/launches" ] && [ ! -e "$scratch/dep_E2/launches" ]; then
  pass "E1 cancelled when F1 failed, E2 with it: '$(jval "$E1" message)', '$(jval "$E2" message)'"
else fail "E1 '$(state "$E1")' '$(jval "$E1" message)', E2 '$(state "$E2")' '$(jval "$E2" message)'"; fi
if wait_state "$L1" done 30 && wait_state "$D1" done 30 &&
   python3 -c 'import sys; sys.exit(not float(sys.argv[2]) >= float(sys.argv[1]))' \
     "$(jval "$L1" end_time)" "$(jval "$D1" start_time)"; then
  pass "D1 started once L1 was done (across the manager's restart)"
else fail "L1 '$(state "$L1")', D1 '$(state "$D1")' (want both done, D1 after L1)"; fi
# A request that names a job the manager does not know (written by hand,
# as a client that skipped submit's check would): refused, with why.
# (a real submission time: "time":1 is refused as no time since 2026-12-02)
printf '{"op":"submit","id":90,"name":"orphan","min":1,"max":1,"exec":true,"args":["%s","5","%s"],"after":[88],"cwd":"/","time":%s}' \
  "$JOB" "$scratch/dep_orphan" "$(date +%s)" >"$spool/incoming/.t" &&
  mv "$spool/incoming/.t" "$spool/incoming/0-orphan-submit-90.json"
wait_state 90 failed 20 || true
if [ "$(state 90)" = failed ] && [ "$(jval 90 message)" = "it runs after job 88, which this manager does not know" ] &&
   [ ! -e "$scratch/dep_orphan" ]; then
  pass "a request after an unknown job: failed at once, '$(jval 90 message)'"
else fail "the request after job 88: '$(state 90)', '$(jval 90 message)'"; fi

echo "== time limits (submit --time, Slurm's formats)"
expect_2 "--time 0" "--time needs one time limit above 0" submit --spool "$spool" --time 0 -- --epochs 1
expect_2 "--time 1:2:3:4" "--time needs one time limit" submit --spool "$spool" --time 1:2:3:4 \
  -- --epochs 1
expect_2 "--time 2-" "--time needs one time limit" submit --spool "$spool" --time 2- -- --epochs 1
# Minutes alone above 366 days (until 2026-12-06 accepted, then dropped by
# the manager's own check).
expect_2 "--time 1000000" "--time 1000000: 694 days in all; a limit is at most 366 days" \
  submit --spool "$spool" --time 1000000 -- --epochs 1
# T1 (40 steps of 0.1 s) under a limit of 0:02 (M:S, 2 s): stopped at about
# 2 s on nodes, state timeout, its last commit kept; K1 after it is
# cancelled; T2 under 1:00:00 (H:M:S) runs to its end.
T1=$(submit --min 1 --max 1 --name T1 --time 0:02 --exec -- "$JOB" 40 "$scratch/dep_T1" 0.1)
K1=$(submit --min 1 --max 1 --name K1 --after "$T1" --exec -- "$JOB" 5 "$scratch/dep_K1" 0.05)
T2=$(submit --min 1 --max 1 --name T2 --time 1:00:00 --exec -- "$JOB" 10 "$scratch/dep_T2" 0.05)
wait_state "$T1" timeout 30 || true
t1step=$(cat "$scratch/dep_T1/step" 2>/dev/null)
t1run=$(jval "$T1" run_s)
if [ "$(state "$T1")" = timeout ] && [ "$(jval "$T1" time_limit_s)" = 2 ] &&
   [[ $(jval "$T1" message) == "its time limit of 0:00:02 was reached after "* ]] &&
   [ -n "$t1step" ] && [ "$t1step" -ge 5 ] && [ "$t1step" -lt 40 ] &&
   python3 -c 'import sys; sys.exit(not 1.9 <= float(sys.argv[1]) < 8)' "$t1run" &&
   grep -q "job $T1: its time limit of 0:00:02 is reached: stopping it" "$log"; then
  pass "T1 stopped at its limit after $t1run s on nodes, at step $t1step of 40: '$(jval "$T1" message)'"
else fail "T1 '$(state "$T1")', run $t1run s, step '$t1step', '$(jval "$T1" message)'"; fi
if wait_state "$K1" cancelled 20 && [ "$(jval "$K1" message)" = "job $T1, which it runs after, reached its time limit" ] &&
   wait_state "$T2" done 20 && [ "$(jval "$T2" time_limit_s)" = 3600 ]; then
  pass "K1 cancelled after T1's timeout; T2 under 1:00:00 done"
else fail "K1 '$(state "$K1")' '$(jval "$K1" message)', T2 '$(state "$T2")'"; fi
"$G" cancel --spool "$spool" "$T1" >/dev/null 2>"$err"
[ $? = 1 ] && grep -q "has already ended (timeout)" "$err" &&
  pass "cancel of a timed-out job: exit 1, '$(head -1 "$err")'" ||
  fail "cancel of a timed-out job: '$(cat "$err")'"

echo "== gradsync jobs --user, --state (squeue's -u, -t)"
# On this spool: L1, D1, T2 done; F1 failed; E1, E2, K1 cancelled; T1 timeout;
# the request after job 88 failed; all root's.
ids() { "$G" jobs --spool "$spool" --json "$@" | python3 -c 'import json, sys
print(" ".join(str(i) for i in sorted(json.loads(l)["id"] for l in sys.stdin)))'; }
if [ "$(ids --state timeout)" = "$T1" ] && [ "$(ids --state failed,timeout)" = "$F1 $T1 90" ] &&
   [ "$(ids --state cancelled --user "$(id -un)")" = "$E1 $E2 $K1" ] &&
   [ -z "$(ids --user nobody_here)" ] &&
   "$G" jobs --spool "$spool" --state done | awk 'NR > 1' | grep -q " D1 "; then
  pass "--state timeout: $(ids --state timeout); --state failed,timeout: $(ids --state failed,timeout); --user with --state cancelled: $(ids --state cancelled --user "$(id -un)")"
else fail "jobs filters: timeout '$(ids --state timeout)', failed,timeout '$(ids --state failed,timeout)'," \
  "cancelled '$(ids --state cancelled --user "$(id -un)")', nobody '$(ids --user nobody_here)'"; fi
expect_2 "jobs --state bogus" "--state needs states from queued" jobs --spool "$spool" --state bogus
expect_2 "jobs --state done," "--state needs states" jobs --spool "$spool" --state done,
expect_2 "jobs --user 'a b'" "--user needs one user" jobs --spool "$spool" --user "a b"

[ "$failures" = 0 ] && echo "all passed" && exit 0
echo "$failures failure(s)"
exit 1
