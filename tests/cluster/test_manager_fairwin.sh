#!/usr/bin/env bash
# dorm's fairness window in the cluster manager (gradsync cluster serve
# --fairness-window S), with stand-in jobs (fake_job.sh under
# fake_mpirun.sh) on three local "nodes", --restart-penalty 0:
#  - A, B and C (1 node each) hold the 3 nodes; D (exactly 2 nodes) arrives.
#    Every fair share is 0.75: with the shares alone D would wait for them
#    to end (200 s). With a window of 5 s D is owed 0.75 node-seconds a
#    second and each of the others owes 0.25; about 3.5 s after D arrives
#    its target (0.75 + 0.15 s) exceeds two of theirs (0.75 - 0.05 s) by
#    more than two resizes cost, and D starts on 2 nodes in place of two of
#    them;
#  - `gradsync jobs --accounts` names the window;
#  - a bad --fairness-window, or one under another policy: exit 2.
# usage: test_manager_fairwin.sh GRADSYNC      Exit status: 0 pass, 1 fail.
set -u
G=${1:?usage: test_manager_fairwin.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
# shellcheck source=tests/cluster/manager_lib.sh
. "$(dirname "$0")/manager_lib.sh"

printf '127.0.1.1\n127.0.1.2\n127.0.1.3\n' >"$scratch/nodes"

expect_2 "--fairness-window 0" "--fairness-window needs seconds from 1" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --fairness-window 0
expect_2 "--fairness-window soon" "--fairness-window needs seconds from 1" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --fairness-window soon
expect_2 "cluster simulate --fairness-window -1" "--fairness-window: expected a number" \
  cluster simulate --workload x.csv --nodes 2 --fairness-window -1
expect_2 "--fairness-window under static" "it needs --policy dorm" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --policy static --fairness-window 60
expect_2 "cluster simulate --fairness-window under goodput" "it needs --policy dorm" \
  cluster simulate --workload x.csv --nodes 2 --policy goodput --fairness-window 60

"$G" cluster serve --nodes "$scratch/nodes" --spool "$spool" --interval 0.5 --policy dorm \
  --restart-penalty 0 --fairness-window 5 --mpirun "$HERE/fake_mpirun.sh" >>"$log" 2>&1 &
serve_pid=$!
wait_for 5 wait_file "$spool/pool.json" || { fail "the manager did not start"; exit 1; }
ids=()
for name in A B C; do
  ids+=("$("$G" submit --spool "$spool" --min 1 --max 1 --name "$name" \
    --exec -- "$JOB" 2000 "$scratch/$name" 0.1)")
done
for id in "${ids[@]}"; do
  wait_for 20 size_is "$id" 1 || fail "job $id: size $(field "$id" size), wanted 1"
done
t0=$(date +%s.%N)
D=$("$G" submit --spool "$spool" --min 2 --max 2 --name D --exec -- "$JOB" 2000 "$scratch/D" 0.1)
if wait_for 30 wait_file "$scratch/D/launches"; then
  t1=$(date +%s.%N)
  nd=$(awk 'NR == 1 { print $1 }' "$scratch/D/launches")
  waited=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  if [ "$nd" = 2 ]; then
    pass "D (2 nodes) started on 2 nodes ${waited} s after it arrived, the 1-node jobs still running"
  else fail "D started on '$nd' nodes (want 2)"; fi
else fail "D did not start within 30 s (a window of 5 s owes it the nodes in ~3.5 s)"; fi
"$G" jobs --spool "$spool" --accounts >"$scratch/acct_text"
if grep -q "fairness window 5 s" "$scratch/acct_text"; then pass "jobs --accounts names the window"
else fail "jobs --accounts: $(head -3 "$scratch/acct_text")"; fi
"$G" cancel --spool "$spool" "${ids[@]}" "$D" >/dev/null

if [ "$failures" = 0 ]; then echo "all passed"; exit 0; fi
echo "$failures failed"
exit 1
