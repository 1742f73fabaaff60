#!/usr/bin/env bash
# A node lost for real under the cluster manager: 2 emulated nodes
# (`cluster serve --emulated 2`, policy static), one gradsync train job of 1
# to 2 nodes running on both; node 2 dies (its sshd and every process in its
# namespace SIGKILLed). Checked: the manager finds the node lost (its ssh
# check fails) and takes it out of the job's partition, the job goes on on
# node 1 from its last commit and finishes, every epoch's samples once, and
# `gradsync jobs` shows the job done on 1 node with a resize and no restart
# spent (the manager's --restart-budget is 0). Before:
# the checks reuse one connection per node; after: the stopped manager
# leaves none open.
# usage: test_manager_node_lost.sh GRADSYNC
# Exit status: 0 pass, 1 fail, 77 skip (not root, no ip or sshd).
set -u
G=${1:?usage: test_manager_node_lost.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
unset SLURM_JOB_ID SLURM_NODELIST SLURM_JOB_NODELIST OMPI_MCA_plm_rsh_agent SUDO_UID SUDO_GID
export PATH=$PATH:/usr/sbin:/sbin OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ "$(id -u)" != 0 ]; then echo "SKIP  needs root (network namespaces)"; exit 77; fi
if ! command -v ip >/dev/null; then echo "SKIP  needs ip (iproute2)"; exit 77; fi
if [ ! -x /usr/sbin/sshd ]; then echo "SKIP  needs sshd (openssh-server)"; exit 77; fi
# shellcheck source=tests/cluster/manager_lib.sh
. "$(dirname "$0")/manager_lib.sh"
state() { "$G" jobs --spool "$spool" --json | grep "\"id\":$1," | sed -E 's/.*"state":"([a-z]*)".*/\1/'; }
field() { "$G" jobs --spool "$spool" --json | grep "\"id\":$1," | sed -E "s/.*\"$2\":([^,}]*).*/\1/"; }
wait_for() {
  local t=$1
  shift
  for _ in $(seq 1 $((t * 5))); do "$@" && return 0; sleep 0.2; done
  return 1
}
is_state() { [ "$(state "$1")" = "$2" ]; }

"$G" cluster serve --emulated 2 --spool "$spool" --interval 2 --commit-every 10 \
  --restart-budget 0 >"$log" 2>&1 &
serve_pid=$!
ready() { [ -f "$spool/pool.json" ] || ! kill -0 "$serve_pid" 2>/dev/null; }
wait_for 120 ready
[ -f "$spool/pool.json" ] || { fail "the manager did not start"; exit 1; }
# The health checks (every 2 s here) go through one ssh connection per node
# kept open, not a new connection (a key exchange on the node) every time:
# node 1 accepts at most one new connection in 10 s of checks.
opens() {
  ip netns exec "$(sed -n 1p "$spool/emulated/names")" nstat -asz TcpPassiveOpens |
    awk '/TcpPassiveOpens/ { print $2 }'
}
sleep 3
o1=$(opens)
sleep 10
o2=$(opens)
if [ -n "$o1" ] && [ -n "$o2" ] && [ $((o2 - o1)) -le 1 ]; then
  pass "10 s of health checks: node 1 accepted $((o2 - o1)) new connection(s)"
else fail "10 s of health checks: node 1 accepted '$o1' -> '$o2' connections"; fi
# Fashion-MNIST, global batch 48: 1250 steps an epoch; 2 epochs.
J=$("$G" submit --spool "$spool" --min 1 --max 2 -- --model mlp --global-batch 48 --epochs 2 \
  --seed 3 --json --data-cache "$scratch/cache")
wait_for 120 grep -q '"size":2' "$spool/jobs/$J/events.1.jsonl" 2>/dev/null ||
  fail "the job did not start on 2 nodes"
wait_for 120 test -s "$spool/jobs/$J/ckpt/checkpoint.json" || fail "the job did not commit"
sleep 2
ns=$(sed -n 2p "$spool/emulated/names")
node2=$(sed -n 2p "$spool/emulated/hostfile" | cut -d' ' -f1)
kill -9 "$(cat "$spool/emulated/sshd.1.pid")"
for p in $(ip netns pids "$ns"); do kill -9 "$p" 2>/dev/null; done
lost() { grep -q "node $node2: lost" "$log"; }
wait_for 30 lost && pass "the manager found node 2 ($node2) lost" ||
  fail "node 2 ($node2) not found lost"
wait_for 300 is_state "$J" done || fail "the job did not finish: $(state "$J")"
last=$(cat "$spool/jobs/$J"/events.*.jsonl | grep '"event":"launch"' | tail -1)
hosts=$(sed -E 's/.*"hosts":"([^"]*)".*/\1/' <<<"$last")
# Who dropped node 2 first decides how: its supervisor, finding the host
# unreachable, names it among the hosts it left out for good (what the
# manager reads to take a node back); or the manager, finding it lost first,
# took it out of the partition, so that discovery no longer lists it and the
# supervisor has nothing to leave out (CI saw this order).
if [[ $last == *"\"left_out\":\"$node2\""* ]]; then
  how="left out by its supervisor"
elif grep -q "job $J: a node of its partition is lost" "$log" &&
     awk -v j="job $J: " 'index($0, j "a node of its partition is lost") { cut = 1 }
          index($0, j "launch on") { last_launch_after_cut = cut }
          END { exit !last_launch_after_cut }' "$log"; then
  how="taken out of its partition by the manager before the relaunch"
else
  how=
fi
# The node's loss is a resize, not a restart: the manager runs with
# --restart-budget 0, so a counted restart would have failed the job.
if [[ $last == *'"size":1,'* ]] && [[ $hosts != *"$node2"* ]] && [ -n "$how" ] &&
   [ "$(field "$J" restarts)" = 0 ] && [ "$(field "$J" resizes)" -ge 1 ]; then
  pass "the job went on without node 2: last launch $hosts (node 2 $how), $(field "$J" resizes) resize(s), no restart spent"
else fail "the job's last launch: $last; restarts $(field "$J" restarts), resizes $(field "$J" resizes)"; fi
out=$spool/jobs/$J/out.log
n=0
for e in 1 2; do
  [ "$(grep -c "^{\"epoch\":$e,.*\"samples\":60000," "$out")" = 1 ] && n=$((n + 1))
done
[ "$n" = 2 ] && pass "both epochs used their 60000 samples once" ||
  fail "$n of 2 epochs with 60000 samples once"
"$G" jobs --spool "$spool"
kill "$serve_pid" && wait "$serve_pid"
serve_pid=
left=$(pgrep -f -- "$spool/mux" || true)
[ -z "$left" ] && pass "the stopped manager left no ssh connection open" ||
  fail "the stopped manager left ssh connections: $(ps -o pid=,args= -p "${left//$'\n'/,}")"
[ "$failures" = 0 ] && echo "all passed" && exit 0
echo "$failures failure(s)"
exit 1
