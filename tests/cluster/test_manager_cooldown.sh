#!/usr/bin/env bash
# A node that comes back from being lost cools down before it gets a job
# (gradsync cluster serve --node-cooldown), and one that flaps waits longer.
# Two nodes, nodeA and nodeB, reached through a stand-in ssh on PATH that
# fails for a node while SCRATCH/down.NODE exists (the manager's health
# checks and the jobs' supervisors both use it); the jobs are stand-ins
# (fake_job.sh through fake_mpirun.sh). One job of 1 to 2 nodes under
# goodput, restarts unpriced so that it grows back as soon as it may.
# Checked: nodeB lost shrinks the job to nodeA; back, it is "cooling" in
# `gradsync cluster nodes` and the job stays on one node for the cool-down,
# then grows back to two; lost again within the hour, its cool-down doubles;
# the manager killed and restarted keeps the cool-down (it is journaled);
# `cluster undrain` ends it at once.
# usage: test_manager_cooldown.sh GRADSYNC
set -u
G=${1:?usage: test_manager_cooldown.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
# shellcheck source=tests/cluster/manager_lib.sh
. "$(dirname "$0")/manager_lib.sh"

# The stand-in ssh: `ssh [options] NODE [command]` succeeds unless
# SCRATCH/down.NODE exists; `-O exit` (closing a kept connection) succeeds.
mkdir -p "$scratch/bin"
cat >"$scratch/bin/ssh" <<EOF
#!/usr/bin/env bash
for a in "\$@"; do
  case \$a in
    node[A-Z]) [ -e "$scratch/down.\$a" ] && exit 255; exit 0 ;;
  esac
done
exit 0
EOF
chmod +x "$scratch/bin/ssh"
export PATH=$scratch/bin:$PATH
printf 'nodeA\nnodeB\n' >"$scratch/nodes"

COOL=4
serve() {
  "$G" cluster serve --nodes "$scratch/nodes" --spool "$spool" --interval 0.5 --policy goodput \
    --restart-penalty 0 --node-cooldown $COOL --mpirun "$HERE/fake_mpirun.sh" >>"$log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 50); do [ -f "$spool/pool.json" ] && return 0; sleep 0.1; done
  return 1
}
field() { "$G" jobs --spool "$spool" --json | grep "\"id\":$1," | sed -E "s/.*\"$2\":([^,}]*).*/\1/"; }
node_state() { "$G" cluster nodes --spool "$spool" --json | grep "\"name\":\"$1\"" |
  sed -E 's/.*"state":"([a-z]+)".*/\1/'; }
node_field() { "$G" cluster nodes --spool "$spool" --json | grep "\"name\":\"$1\"" |
  sed -E "s/.*\"$2\":([0-9.]+).*/\\1/"; }
wait_for() { # SECONDS COMMAND...: polls every 0.1 s
  local n=$(($1 * 10))
  shift
  for _ in $(seq 1 $n); do "$@" && return 0; sleep 0.1; done
  return 1
}
size_is() { [ "$(field "$J" size)" = "$1" ] && [ "$(field "$J" running_ranks)" = "$1" ]; }
state_is() { [ "$(node_state "$1")" = "$2" ]; }

# The option's refusals first.
"$G" cluster serve --nodes "$scratch/nodes" --spool "$spool" --node-cooldown -1 \
  >/dev/null 2>"$scratch/err"
rc=$?
if [ $rc = 2 ] && grep -q -- "--node-cooldown needs seconds" "$scratch/err"; then
  pass "--node-cooldown -1: exit 2, '$(head -1 "$scratch/err")'"
else fail "--node-cooldown -1: exit $rc: $(cat "$scratch/err")"; fi

serve || { fail "the manager did not start"; exit 1; }
J=$("$G" submit --spool "$spool" --min 1 --max 2 --name long --exec -- "$JOB" 600 "$scratch/J" 0.1)
wait_for 20 size_is 2 && pass "job $J runs on both nodes" || fail "job $J: size $(field "$J" size)"

# Lost: the job shrinks to nodeA.
: >"$scratch/down.nodeB"
wait_for 20 state_is nodeB down && pass "nodeB lost: $(node_state nodeB)" ||
  fail "nodeB: '$(node_state nodeB)' (want down)"
wait_for 20 size_is 1 && pass "the job shrank to 1 node" || fail "job size $(field "$J" size)"

# Back: cooling for COOL s, the job stays on one node, then grows.
rm -f "$scratch/down.nodeB"
wait_for 20 state_is nodeB cooling && pass "nodeB back: cooling" ||
  fail "nodeB: '$(node_state nodeB)' (want cooling)"
back=$(date +%s.%N)
"$G" cluster nodes --spool "$spool"
# Looked at 1 s before the cool-down ends (the node's cool_until), however
# long the commands above took on a loaded host.
until1=$(node_field nodeB cool_until)
wait1=$(awk -v u="$until1" -v n="$(date +%s.%N)" 'BEGIN { w = u - n - 1; printf "%.2f", w > 0 ? w : 0 }')
sleep "$wait1"
if size_is 1; then pass "no job on nodeB 1 s before its cool-down ends"
else fail "the job grew during nodeB's cool-down: size $(field "$J" size), cool_until $until1, now $(date +%s.%N)"; fi
wait_for 20 size_is 2 && pass "the job grew back to 2 nodes" || fail "job size $(field "$J" size)"
waited=$(awk -v a="$back" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if awk -v w="$waited" -v c=$COOL 'BEGIN { exit !(w >= c - 1) }'; then
  pass "it grew ${waited} s after nodeB was seen back (cool-down $COOL s)"
else fail "it grew ${waited} s after nodeB was back (cool-down $COOL s)"; fi
grep -q "node nodeB: cooled down" "$log" && pass "the log says nodeB cooled down" ||
  fail "no 'cooled down' in the log"

# Lost again within the hour: twice the cool-down; kept across a restart of
# the manager; undrain ends it.
: >"$scratch/down.nodeB"
wait_for 20 state_is nodeB down || fail "nodeB not lost the second time: $(node_state nodeB)"
rm -f "$scratch/down.nodeB"
wait_for 20 state_is nodeB cooling || fail "nodeB not cooling the second time"
losses=$(node_field nodeB losses)
left=$(awk -v u="$(node_field nodeB cool_until)" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", u - n }')
if [ "$losses" = 2 ] && awk -v l="$left" -v c=$COOL 'BEGIN { exit !(l > c && l <= 2 * c) }'; then
  pass "lost twice: cool-down of $((2 * COOL)) s ($left s left)"
else fail "lost $losses times, $left s of cool-down left (want 2, ${COOL}-$((2 * COOL)))"; fi
kill -9 "$serve_pid"
wait "$serve_pid" 2>/dev/null
serve || fail "the manager did not start again"
if state_is nodeB cooling && size_is 1; then pass "restarted, the manager keeps nodeB cooling"
else fail "after a restart: nodeB $(node_state nodeB), job size $(field "$J" size)"; fi
"$G" cluster undrain --spool "$spool" nodeB
wait_for 3 state_is nodeB up && pass "undrain ended the cool-down" ||
  fail "after undrain: nodeB $(node_state nodeB)"
wait_for 10 size_is 2 && pass "the job is on both nodes again" || fail "job size $(field "$J" size)"
"$G" cancel --spool "$spool" "$J" >/dev/null

if [ "$failures" = 0 ]; then echo "all passed"; exit 0; fi
echo "$failures failed"
exit 1
