#!/usr/bin/env bash
# The cluster manager's pool from a Slurm allocation (`gradsync cluster serve
# --slurm`), without Slurm: the variables salloc and sbatch set are set here.
#  - Slurm's hostlist forms: ranges keep their low bound's width
#    (node[08-10]), several brackets multiply (r[1-2]n[1-2]), lists mix
#    ranges and names; slots from SLURM_TASKS_PER_NODE ("2(x2),1"), else 1;
#  - a job runs on the allocation's nodes (stand-in job and mpirun, on the
#    local "nodes" 127.0.1.1-3, as test_manager.sh);
#  - refusals, exit 2 naming what is wrong: outside an allocation, with
#    --nodes too, a malformed list, a node given twice, counts that do not
#    match the nodes.
# usage: test_manager_slurm.sh GRADSYNC      Exit status: 0 pass, 1 fail.
set -u
G=${1:?usage: test_manager_slurm.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
unset SLURM_JOB_NODELIST SLURM_NODELIST SLURM_TASKS_PER_NODE SLURM_JOB_ID
# shellcheck source=tests/cluster/manager_lib.sh
. "$(dirname "$0")/manager_lib.sh"

# serve SPOOL [ENV=VALUE...]: the manager on the Slurm variables given, in
# the background, until its pool.json is written (0) or it exits (1).
serve() {
  local spool=$1
  shift
  : >"$log"
  env "$@" "$G" cluster serve --slurm --spool "$spool" --interval 1 \
    --mpirun "$HERE/fake_mpirun.sh" >>"$log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 50); do
    [ -f "$spool/pool.json" ] && return 0
    kill -0 "$serve_pid" 2>/dev/null || { serve_pid=; return 1; }
    sleep 0.1
  done
  return 1
}
stop() { [ -n "$serve_pid" ] && kill "$serve_pid" && wait "$serve_pid"; serve_pid=; }
pool() { # the pool as "name:slots name:slots ..."
  sed -E 's/.*"nodes":\[//; s/\{"name":"([^"]*)","slots":([0-9]*)\}/\1:\2/g; s/[],}]+$//; s/,/ /g' \
    "$1/pool.json"
}

echo "== the pool from Slurm's variables"
# expect_pool "what" WANT ENV...
expect_pool() {
  local what=$1 want=$2 spool=$scratch/spool$RANDOM
  shift 2
  if serve "$spool" "$@"; then
    local got
    got=$(pool "$spool")
    [ "$got" = "$want" ] && pass "$what: $got" || fail "$what: pool '$got', wanted '$want'"
  else fail "$what: the manager did not start"; fi
  stop
}
expect_pool "ranges keep their width" "node08:1 node09:1 node10:1" \
  SLURM_JOB_ID=7 SLURM_JOB_NODELIST='node[08-10]'
expect_pool "brackets multiply, lists mix ranges and names" \
  "r1n1:1 r1n2:1 r2n1:1 r2n2:1 login:1 c5:1 c7:1 c8:1" \
  SLURM_JOB_NODELIST='r[1-2]n[1-2],login,c[5,7-8]'
expect_pool "slots from SLURM_TASKS_PER_NODE" "gpu1:4 gpu2:4 gpu3:4 cpu01:1" \
  SLURM_JOB_NODELIST='gpu[1-3],cpu01' SLURM_TASKS_PER_NODE='4(x3),1'
expect_pool "Slurm's older SLURM_NODELIST" "a1:1 a2:1" SLURM_NODELIST='a[1-2]'

echo "== a job on the allocation's nodes"
spool=$scratch/spool-job
if serve "$spool" SLURM_JOB_ID=8 SLURM_JOB_NODELIST='127.0.1.[1-2],127.0.1.3' \
   SLURM_TASKS_PER_NODE='2(x2),1'; then
  J=$("$G" submit --spool "$spool" --min 3 --max 3 --exec -- "$HERE/fake_job.sh" 5 \
      "$scratch/job" 0.05 2>"$err")
  for _ in $(seq 1 200); do
    "$G" jobs --spool "$spool" --json | grep -q "\"id\":$J,.*\"state\":\"done\"" && break
    sleep 0.1
  done
  if "$G" jobs --spool "$spool" --json | grep -q "\"id\":$J,.*\"state\":\"done\"" &&
     grep -q '^5 127.0.1.1:2,127.0.1.2:2,127.0.1.3:1$' "$scratch/job/launches"; then
    pass "the job ran on the 3 nodes with their slots: $(cat "$scratch/job/launches")"
  else fail "job $J: $("$G" jobs --spool "$spool" 2>&1 | tail -1); launches: \
$(cat "$scratch/job/launches" 2>/dev/null)"; fi
else fail "the manager did not start on 127.0.1.[1-2],127.0.1.3"; fi
stop

echo "== refusals"
# expect_2 "what" WANT ENV...: serve --slurm exits 2 with a message matching WANT
expect_2() {
  local what=$1 want=$2
  shift 2
  env "$@" "$G" cluster serve --slurm --spool "$scratch/spool-refused" >/dev/null 2>"$err"
  local rc=$?
  if [ $rc = 2 ] && grep -q -- "$want" "$err"; then pass "$what: exit 2, '$(head -1 "$err")'"
  else fail "$what: exit $rc, wanted 2 and '$want'"; fi
}
expect_2 "outside an allocation" "not inside a Slurm allocation" A=1
expect_2 "an unclosed bracket" "SLURM_JOB_NODELIST entry 'node\[1-': a '\[' without its '\]'" \
  SLURM_JOB_NODELIST='node[1-'
expect_2 "a range downwards" "'3-1' is not a number or a range" SLURM_JOB_NODELIST='node[3-1]'
expect_2 "letters in a range" "'a-b' is not a number" SLURM_JOB_NODELIST='node[a-b]'
expect_2 "an empty entry" "an empty entry" SLURM_JOB_NODELIST='node1,,node2'
expect_2 "a node given twice" "host 'n2' is also entry 2" SLURM_JOB_NODELIST='n[1-2],n2'
expect_2 "fewer counts than nodes" "lists 3 nodes, SLURM_TASKS_PER_NODE '2(x2)' counts for 2" \
  SLURM_JOB_NODELIST='n[1-3]' SLURM_TASKS_PER_NODE='2(x2)'
expect_2 "a bad count list" "SLURM_TASKS_PER_NODE '2(x' is not a list" \
  SLURM_JOB_NODELIST='n[1-2]' SLURM_TASKS_PER_NODE='2(x'
"$G" cluster serve --slurm --nodes /dev/null --spool "$scratch/spool-refused" >/dev/null 2>"$err"
rc=$?
[ $rc = 2 ] && grep -q "give the pool: --nodes HOSTFILE, --slurm or --emulated N" "$err" &&
  pass "--slurm with --nodes: exit 2, '$(head -1 "$err")'" ||
  fail "--slurm with --nodes: exit $rc"
[ ! -e "$scratch/spool-refused/pool.json" ] && pass "no refused manager served" ||
  fail "a refused manager wrote a pool"

[ "$failures" = 0 ] && echo "all passed" && exit 0
echo "$failures failure(s)"
exit 1
