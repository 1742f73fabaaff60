#!/usr/bin/env bash
# Jobs that write no progress (their remaining time unknown) under a
# resizing manager, with stand-in jobs (fake_job.sh under fake_mpirun.sh)
# on two local "nodes", --interval 2 and the 30 s restart prior:
#  - dorm: X (1-2 nodes) holds both; Y (1-2 nodes) arrives: its minimum fits
#    in its fair share, so X shrinks and Y starts within seconds (it used to
#    wait until X ended: X's horizon was taken to be the 2 s interval);
#  - while Y's start waits for the node X gives back, the rounds see Y at
#    the size answered (--round-log);
#  - Z (exactly 2 nodes, its fair share 2/3) waits, and `gradsync jobs` says
#    why (needs, free nodes, the jobs holding them, the policy's reason);
#  - cancel -- ID: `--` ends the options;
#  - a temporary file of a dead writer is removed at the start;
#  - goodput: X left alone on 1 of 2 nodes says why it is not grown;
#  - a round log that cannot be written (/dev/full) ends the log, not the
#    manager, saying why.
# usage: test_manager_pending.sh GRADSYNC      Exit status: 0 pass, 1 fail.
set -u
G=${1:?usage: test_manager_pending.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
# shellcheck source=tests/cluster/manager_lib.sh
. "$(dirname "$0")/manager_lib.sh"

printf '127.0.1.1\n127.0.1.2\n' >"$scratch/nodes"
msg() { "$G" jobs --spool "$spool" --json | grep -o "\"id\":$1,.*" | sed -E 's/.*"message":"([^"]*)".*/\1/'; }
msg_has() { msg "$1" | grep -q -- "$2"; }
serve() { # POLICY [SERVE OPTIONS]
  "$G" cluster serve --nodes "$scratch/nodes" --spool "$spool" --interval 2 --policy "$@" \
    --mpirun "$HERE/fake_mpirun.sh" >>"$log" 2>&1 &
  serve_pid=$!
  wait_for 5 wait_file "$spool/pool.json" || { fail "the manager did not start"; exit 1; }
}

# Temporary files of dead writers (a manager SIGKILLed between a write and
# its rename) go at the start; a live writer's stay.
mkdir -p "$spool"
dead=$(sh -c 'echo $$')
: >"$spool/jobs.json.tmp.$dead"
: >"$spool/jobs.json.tmp.$$"
serve dorm --round-log "$scratch/rounds.jsonl"
if [ ! -e "$spool/jobs.json.tmp.$dead" ] && [ -e "$spool/jobs.json.tmp.$$" ]; then
  pass "a dead writer's jobs.json.tmp.$dead removed at the start, a live one's kept"
else fail "temporary files at the start: $(ls "$spool" | grep tmp | tr '\n' ' ')"; fi
rm -f "$spool/jobs.json.tmp.$$"
# X's steps of 2 s: asked to shrink, it gives its node back at the end of
# its step, up to 2 s later, and Y's start waits for it meanwhile.
X=$("$G" submit --spool "$spool" --min 1 --max 2 --name X --exec -- "$JOB" 3000 "$scratch/X" 2)
wait_for 20 size_is "$X" 2 || fail "X: size $(field "$X" size), wanted 2"
Y=$("$G" submit --spool "$spool" --min 1 --max 2 --name Y --exec -- "$JOB" 3000 "$scratch/Y" 0.1)
if wait_for 20 size_is "$Y" 1; then pass "dorm: Y started on 1 node beside X (no progress written)"
else fail "dorm: Y size $(field "$Y" size), X $(field "$X" size) ('$(msg "$Y")'): Y waits for X"; fi
# While Y's start waits for X's node, the rounds (one a second) see Y at the
# size answered, as a resize of it would be priced, not as a job still to
# be placed (until 2026-12-07 they saw it at 0 nodes, and could give the
# node coming free to another job: answers taken back).
"$G" jobs --spool "$spool" --json >"$scratch/jobs.json" # (one job a line)
waited=$(/usr/bin/python3 - "$scratch/jobs.json" "$scratch/rounds.jsonl" "$Y" <<'PY'
import json, sys
ys = [j["start_time"] for j in map(json.loads, open(sys.argv[1])) if j["id"] == int(sys.argv[3])]
n = 0
for line in open(sys.argv[2]):
    r = json.loads(line)
    n += any(j["name"] == "Y" and j["cur"] == 1 and j["size"] == 1 and r["t"] < ys[0]
             for j in r["jobs"])
print(n)
PY
)
if [ "${waited:-0}" -ge 1 ]; then
  pass "dorm: $waited round(s) while Y's start waited saw it at the 1 node answered"
else fail "rounds before Y's start: $waited of $(grep -c '"name":"Y"' "$scratch/rounds.jsonl") with Y, none at 1 node: $(grep '"name":"Y"' "$scratch/rounds.jsonl" | head -3)"; fi
Z=$("$G" submit --spool "$spool" --min 2 --max 2 --name Z --exec -- "$JOB" 30 "$scratch/Z" 0.1)
if wait_for 10 msg_has "$Z" "waiting: needs 2 nodes, 0 free; nodes held by jobs $X, $Y (policy dorm: its fair share 0.67 is below its --min 2)"; then
  pass "Z's pending reason: $(msg "$Z")"
else fail "Z's message: '$(msg "$Z")'"; fi
if "$G" cancel --spool "$spool" -- "$X" "$Y" "$Z" >/dev/null 2>"$err"; then pass "cancel -- IDS"
else fail "cancel -- IDS: exit $?"; fi
wait_for 20 eval '[ "$(field "$X" state)" = "\"cancelled\"" ]' || fail "X not cancelled"
kill "$serve_pid" && wait "$serve_pid" 2>/dev/null
serve_pid=
stop_keepers "$spool"
rm -rf "$spool"

# A round log that cannot be written (a full disk) ends the log, with a
# line saying why, not the manager.
full=
[ -c /dev/full ] && full=/dev/full
serve goodput ${full:+--round-log $full}
X=$("$G" submit --spool "$spool" --min 1 --max 2 --name X2 --exec -- "$JOB" 3000 "$scratch/X2" 0.1)
wait_for 20 size_is "$X" 2 || fail "X2: size $(field "$X" size), wanted 2"
Y=$("$G" submit --spool "$spool" --min 1 --max 2 --name Y2 --exec -- "$JOB" 20 "$scratch/Y2" 0.1)
wait_for 30 eval '[ "$(field "$Y" state)" = "\"done\"" ]' || fail "Y2 did not end"
if wait_for 10 msg_has "$X" "not grown onto 1 idle node: policy goodput"; then
  pass "goodput: X2 on $(field "$X" size) node(s) says why: $(msg "$X")"
else fail "goodput: X2 size $(field "$X" size), message '$(msg "$X")'"; fi
"$G" cancel --spool "$spool" "$X" >/dev/null
if [ -z "$full" ]; then pass "(no /dev/full here: a log's failed write not tried)"
elif grep -q -- "--round-log /dev/full: cannot write (No space left on device): the log stops here" "$log"
then pass "a round log that cannot be written: the log stops, the jobs went on"
else fail "no line on the round log's failed write in the manager's log"; fi

if [ "$failures" = 0 ]; then echo "all passed"; exit 0; fi
echo "$failures failed"
exit 1
