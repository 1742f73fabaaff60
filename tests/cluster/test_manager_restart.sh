#!/usr/bin/env bash
# What the cluster manager keeps of jobs across a SIGKILL and a restart,
# and the listing of submissions no manager has taken yet, with stand-in
# jobs on three local "nodes" (127.0.1.1-3, fake_mpirun.sh):
#  - an ended job's progress, last commit and measured speeds are journaled
#    when it ends: `jobs --json` shows the same after the manager is killed
#    and started again (until 2026-12-01 they came back null and {});
#  - a job that ends while no manager runs gets its keeper's exit file's
#    time as its end, not the restart's, and its run_s stops there (it was
#    the restart's time: run_s 19.7 s for a job of 10.7 s), and so do the
#    node-seconds charged to it (jobs --accounts);
#  - a submission no manager has taken yet is listed with the keys of every
#    other job (nodes, submit_time, after, time_limit_s, run_s, message,
#    dir, ...), its own values, and a message that says why it waits; a
#    cancel of one says that it waits for a manager (exit 0);
#  - a running job adopted by a manager restarted with a smaller --nodes
#    pool: its nodes file drops the node no longer in the pool and the job
#    shrinks onto the pool (until 2026-12-02 the file kept the node and the
#    job trained on it to its end, its speed counted at the smaller size);
#    that shrink of an --exec job is measured from its progress reports,
#    and the measured cost is kept across a SIGKILL of the manager while
#    the job runs.
# usage: test_manager_restart.sh GRADSYNC      Exit status: 0 pass, 1 fail.
set -u
G=${1:?usage: test_manager_restart.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
# shellcheck source=tests/cluster/manager_lib.sh
. "$(dirname "$0")/manager_lib.sh"

printf '127.0.1.1\n127.0.1.2\n127.0.1.3\n' >"$scratch/nodes"
serve() {
  "$G" cluster serve --nodes "${NODES:-$scratch/nodes}" --spool "$spool" --interval 1 \
    --mpirun "$HERE/fake_mpirun.sh" "$@" >>"$log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 50); do [ -f "$spool/pool.json" ] && return 0; sleep 0.1; done
  return 1
}
submit() { "$G" submit --spool "$spool" "$@" 2>"$err"; }
line() { "$G" jobs --spool "$spool" --json | grep "\"id\":$1,"; }
state() { line "$1" | sed -E 's/.*"state":"([^"]*)".*/\1/'; }
# field ID KEY: a job's value of KEY in `jobs --json` (python3: objects too)
field() {
  line "$1" | python3 -c 'import json, sys
print(json.dumps(json.loads(sys.stdin.read())[sys.argv[1]], sort_keys=True))' "$2"
}
wait_state() { # ID STATE SECONDS
  for _ in $(seq 1 $(($3 * 10))); do [ "$(state "$1")" = "$2" ] && return 0; sleep 0.1; done
  return 1
}

serve || { fail "the manager did not start"; exit 1; }

echo "== an ended job's progress, commit and speed across a SIGKILL of the manager"
# 30 steps of 0.1 s, each a commit of 10 samples in progress.json: measured.
A=$(submit --min 1 --max 1 --name A --exec -- "$JOB" 30 "$scratch/A" 0.1 progress)
wait_state "$A" done 60 || fail "job A did not end (state '$(state "$A")')"
sleep 1.2 # a snapshot after the end
before=""
for k in progress commit speed end_time run_s status; do
  before="$before $k=$(field "$A" "$k")"
done
kill -9 "$serve_pid"
wait "$serve_pid" 2>/dev/null
serve || { fail "the manager did not start again"; exit 1; }
sleep 1.5
after=""
for k in progress commit speed end_time run_s status; do after="$after $k=$(field "$A" "$k")"; done
if [ "$before" = "$after" ] && [[ $before == *"progress=1 "* ]] &&
   [[ $before != *"speed={}"* ]] && [[ $before == *'commit="epoch 1, sample 300"'* ]]; then
  pass "job A the same after the restart:$after"
else fail "job A before the restart:$before; after:$after"; fi

echo "== a job that ends while no manager runs: its end from its exit file"
B=$(submit --min 1 --max 1 --name B --exec -- "$JOB" 15 "$scratch/B" 0.2 progress)
wait_state "$B" running 30 || fail "job B did not start (state '$(state "$B")')"
kill -9 "$serve_pid"
wait "$serve_pid" 2>/dev/null
serve_pid=
for _ in $(seq 1 100); do ls "$spool/jobs/$B"/exit.* >/dev/null 2>&1 && break; sleep 0.1; done
exitf=$(ls "$spool/jobs/$B"/exit.* 2>/dev/null | head -1)
[ -n "$exitf" ] || fail "job B wrote no exit file"
sleep 5 # down well after B ended: run_s taken at the restart would be 8 s or more
# Meanwhile the listing says that its states are the last snapshot's, and
# runs the times to it (until 2026-12-06 B's RUN_S grew as if it ran).
"$G" jobs --spool "$spool" >"$scratch/stale.out" 2>"$err"
brun=$(awk -v id="$B" '$1 == id {print $12}' "$scratch/stale.out")
if grep -q "note: no manager serves this spool now: the states and times are as of its last snapshot" "$err" &&
   [ -n "$brun" ] && [ "$brun" -le 4 ]; then
  pass "jobs with no manager: the snapshot's states, B's RUN_S $brun ($(cut -c1-80 "$err"))"
else fail "jobs with no manager: B's RUN_S '$brun', stderr '$(cat "$err")'"; fi
serve || { fail "the manager did not start again"; exit 1; }
wait_state "$B" done 30 || fail "job B not done after the restart (state '$(state "$B")')"
mt=$(python3 -c 'import os,sys; print(os.stat(sys.argv[1]).st_mtime)' "$exitf")
en=$(field "$B" end_time)
st=$(field "$B" start_time)
rs=$(field "$B" run_s)
pr=$(field "$B" progress)
ns=$(field "$B" node_s)
if python3 -c 'import sys; mt, en, st, rs, ns = map(float, sys.argv[1:6])
sys.exit(0 if abs(en - mt) < 0.5 and rs < 3.0 + 3 and rs <= en - st + 0.5 and
         abs(ns - rs) < 0.6 else 1)' \
   "$mt" "$en" "$st" "$rs" "$ns" && [ "$pr" = 1 ]; then
  pass "job B: end_time $en (its exit file's $mt), run_s $rs, node_s $ns, progress $pr"
else fail "job B: end_time $en, its exit file's mtime $mt, run_s $rs, node_s $ns, progress $pr"; fi

echo "== a submission no manager has taken yet: the keys of every job"
kill "$serve_pid"
wait "$serve_pid" 2>/dev/null
serve_pid=
C=$(submit --min 1 --max 1 --after "$A" --time 5:00 --name C --exec -- "$JOB" 1 "$scratch/C")
keys_of() {
  line "$1" | python3 -c 'import json, sys
print(" ".join(sorted(json.loads(sys.stdin.read()))))'
}
queued_keys=$(keys_of "$A" | tr ' ' '\n' | grep -v '^status$' | tr '\n' ' ' | sed 's/ $//')
ck=$(keys_of "$C")
vals="$(field "$C" after) $(field "$C" time_limit_s) $(field "$C" nodes) $(field "$C" message)"
sub=$(field "$C" submit_time)
text=$("$G" jobs --spool "$spool" | grep "^ *$C ")
want_vals="[$A] 300 [] \"submitted; no manager has taken it yet\""
if [ "$ck" = "$queued_keys" ] && [ "$vals" = "$want_vals" ] &&
   [ "$sub" != null ] && [[ $text == *"submitted; no manager has taken it yet"* ]] &&
   [ "$(echo "$text" | awk '{print $11}')" != - ]; then # WAIT_S
  pass "job C not taken: the keys of a job, after/time/message its own ($vals)"
else fail "job C: keys '$ck' (a job's: '$queued_keys'), values '$vals', submit_time $sub," \
  "text '$text'"; fi
X=$(submit --min 1 --max 1 --name X --exec -- "$JOB" 1 "$scratch/X")
"$G" cancel --spool "$spool" "$X" 2>"$err"
rc=$?
if [ "$rc" = 0 ] && grep -q "no manager serves $spool now: the cancel of job $X waits in" "$err"
then pass "cancel with no manager: exit 0, '$(cat "$err")'"
else fail "cancel with no manager: exit $rc, '$(cat "$err")'"; fi
serve || { fail "the manager did not start again"; exit 1; }
wait_state "$C" done 30 || fail "job C did not run once taken (state '$(state "$C")')"
wait_state "$X" cancelled 30 || fail "job X not cancelled once served (state '$(state "$X")')"
ck2=$(keys_of "$C" | tr ' ' '\n' | grep -v '^status$' | tr '\n' ' ' | sed 's/ $//')
if [ "$ck2" = "$ck" ]; then pass "job C taken: the same keys"
else fail "job C taken: keys '$ck2', before '$ck'"; fi

echo "== a running job adopted by a manager with a smaller pool: shrinks onto the pool"
P=$(submit --min 1 --max 3 --name P --exec -- "$JOB" 150 "$scratch/P" 0.2 progress)
for _ in $(seq 1 100); do grep -q '^3 ' "$scratch/P/launches" 2>/dev/null && break; sleep 0.1; done
grep -q '^3 ' "$scratch/P/launches" 2>/dev/null || fail "P did not start on 3 nodes: $(cat "$scratch/P/launches" 2>/dev/null)"
kill "$serve_pid" # SIGTERM: its jobs keep running
wait "$serve_pid" 2>/dev/null
serve_pid=
head -2 "$scratch/nodes" >"$scratch/nodes2"
NODES=$scratch/nodes2 serve || { fail "the manager did not start on 2 nodes"; exit 1; }
for _ in $(seq 1 150); do
  grep -q '^2 127.0.1.1:1,127.0.1.2:1$' "$scratch/P/launches" && break
  sleep 0.1
done
nodes=$(tr '\n' ' ' <"$spool/jobs/$P/nodes")
if grep -q "job $P: adopted" "$log" && [ "$nodes" = "127.0.1.1:1 127.0.1.2:1 " ] &&
   grep -q "job $P: its nodes 127.0.1.3 are not in the pool; it shrinks to 2" "$log" &&
   grep -q '^2 127.0.1.1:1,127.0.1.2:1$' "$scratch/P/launches"; then
  pass "P adopted, its nodes file '$nodes', relaunched on 2 nodes"
else fail "P: nodes file '$nodes', launches $(tr '\n' ';' <"$scratch/P/launches")"; fi
# What its shrink cost, measured from its progress reports (an --exec
# program's progress.json, written at each commit, says where it stopped:
# until 2026-12-07 the supervisor read only gradsync train's commits, its
# resize events had no commit, and an --exec job's resizes were never
# measured), and kept across a SIGKILL of the manager while it runs.
for _ in $(seq 1 100); do [ "$(field "$P" restart_s)" != null ] && break; sleep 0.1; done
prs=$(field "$P" restart_s) prb=$(field "$P" restart_s_by_size)
ev=$(grep -h '"event":"resize"' "$spool/jobs/$P"/events.*.jsonl | tail -1)
kill -9 "$serve_pid"
wait "$serve_pid" 2>/dev/null
serve_pid=
NODES=$scratch/nodes2 serve || { fail "the manager did not start again"; exit 1; }
sleep 1.2 # a snapshot of the restarted manager
if [[ $ev == *'"commit_epoch":0,'* ]] && [ "$prs" != null ] &&
   awk -v r="$prs" 'BEGIN { exit !(r >= 0 && r < 10) }' && [ "$prb" = '{"2": '"$prs"'}' ] &&
   [ "$(field "$P" restart_s)" = "$prs" ] && [ "$(field "$P" restart_s_by_size)" = "$prb" ] &&
   [ "$(state "$P")" = running ]; then
  pass "P's shrink measured from its reports ($prs s, by size $prb), the same after a SIGKILL" \
       "of the manager while P runs"
else fail "P's shrink: restart_s '$prs' by size '$prb' (after the restart '$(field "$P" restart_s)'" \
  "'$(field "$P" restart_s_by_size)', state $(state "$P")); its resize event: $ev"; fi
"$G" cancel --spool "$spool" "$P" 2>"$err"
wait_state "$P" cancelled 30 || fail "P not cancelled (state '$(state "$P")')"

echo "== a job that ends while no manager runs keeps its measured speed"
# (until 2026-12-10 only an ended job's speeds were journaled: one that ended
# while no manager ran lost them; an ended job's RESTART_S went on changing
# with the pool's prior)
# E writes no progress: its price is the pool's prior, which D's start-up
# of 2 s moves; E's, once it ended, stays as it was.
E=$(submit --min 1 --max 1 --name E --exec -- "$JOB" 5 "$scratch/E" 0.1)
wait_state "$E" done 30 || fail "job E not done (state '$(state "$E")')"
sleep 1.2
eprice=$(field "$E" restart_price_s)
D=$(submit --min 1 --max 1 --name D --exec -- "$JOB" 40 "$scratch/D" 0.1 progress 2)
for _ in $(seq 1 100); do [ "$(field "$D" speed)" != "{}" ] && break; sleep 0.1; done
dspeed=$(field "$D" speed)
kill -9 "$serve_pid"
wait "$serve_pid" 2>/dev/null
serve_pid=
for _ in $(seq 1 100); do ls "$spool/jobs/$D"/exit.* >/dev/null 2>&1 && break; sleep 0.1; done
NODES=$scratch/nodes2 serve || { fail "the manager did not start again"; exit 1; }
wait_state "$D" done 30 || fail "job D not done after the restart (state '$(state "$D")')"
sleep 1.2
if [ "$dspeed" != "{}" ] && [ "$(field "$D" speed)" != "{}" ]; then
  pass "job D: speed $dspeed while running, $(field "$D" speed) after ending with no manager"
else fail "job D: speed '$dspeed' while running, '$(field "$D" speed)' after the restart"; fi
if [ "$eprice" != null ] && [ "$(field "$E" restart_price_s)" = "$eprice" ]; then
  pass "ended job E: its restart price fixed at its end ($eprice), D's start-up $(field "$D" startup_s) s"
else fail "ended job E: restart_price_s $eprice at its end, $(field "$E" restart_price_s) later" \
  "(D's start-up $(field "$D" startup_s))"; fi

[ "$failures" -eq 0 ] && echo "all passed" || echo "$failures failed"
[ "$failures" -eq 0 ]
