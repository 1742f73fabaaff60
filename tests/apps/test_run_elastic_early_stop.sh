#!/usr/bin/env bash
# A stop asked of an elastic job before its program runs (docs/ELASTIC.md,
# "A stop that comes too early"), under gradsync run --elastic:
#
#   grow     hosts Open MPI takes for remote, reached through a stand-in ssh
#            agent that waits 3 s before running its command here; discovery
#            lists one more slot once the agent was asked to start mpirun's
#            daemon (0.2 s later the supervisor sees it), so that the
#            SIGUSR1 asking the job to stop reaches mpirun before its daemon
#            has called back. Open MPI 4.1's mpirun then exits 0 without
#            starting the program: the job must not end there as done, but
#            be relaunched larger and train every epoch.
#   shrink   the same with --shrink-on-discover, discovery listing one slot
#            fewer (as the cluster manager takes a node back).
#   rank     local ranks whose program waits 1.5 s before it can take
#            SIGUSR1 (a wrapper script), discovery listing one more slot once
#            the wrapper runs: the request kills them (signal 10);
#            that is a stop, not a failure: no restart counted, no slot lost,
#            relaunched larger.
#
# usage: test_run_elastic_early_stop.sh GRADSYNC
set -u
G=${1:?usage: test_run_elastic_early_stop.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset SLURM_JOB_ID SLURM_NODELIST SLURM_JOB_NODELIST OMPI_MCA_plm_rsh_agent
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/apps/elastic_lib.sh
. "$HERE/elastic_lib.sh"

# 2048 samples, global batch 48: 42 steps, 2016 samples an epoch.
TRAIN=(train --model mlp --synthetic 2048 --global-batch 48 --epochs 2 --commit-every 5
       --resume=auto --json)
FULL=2016
# A name that resolves nowhere: Open MPI starts a daemon "there" over the
# agent, which runs it here.
NODE=gsearlynode1

cat >"$scratch/agent.sh" <<'EOS'
#!/bin/sh
# A slow ssh: HOST COMMAND... -> COMMAND, here, 3 s later. Asked to start
# mpirun's daemon (not gradsync run's check of the host), it says so first.
case "$*" in *orted*) touch "${0%/*}/started" ;; esac
sleep 3
shift
exec sh -c "$*"
EOS
cat >"$scratch/slow_start.sh" <<'EOS'
#!/bin/sh
# The program, 1.5 s late: a SIGUSR1 before then kills this shell.
touch "${0%/*}/started"
sleep 1.5
exec "$@"
EOS
chmod +x "$scratch/agent.sh" "$scratch/slow_start.sh"

# listing NAME FIRST THEN: a discovery script printing FIRST (HOST:SLOTS)
# until the agent or the wrapper said it started ($scratch/started), THEN
# after.
listing() {
  rm -f "$scratch/started"
  cat >"$scratch/$1.sh" <<EOS
#!/bin/sh
if [ -e "$scratch/started" ]; then echo $3; else echo $2; fi
EOS
  chmod +x "$scratch/$1.sh"
}

# early CASE [PROG-PREFIX...] -- RUN-OPTIONS...: runs the job (the program
# after PROG-PREFIX) to its end, at most 90 s; sets rc.
early() {
  local name=$1 prefix=()
  shift
  while [ "$1" != -- ]; do prefix+=("$1"); shift; done
  shift
  new_case "$name"
  "$G" run "$@" --discover-every 0.2 --resize-interval 0 --events "$ev" -- \
    "${prefix[@]}" "$G" "${TRAIN[@]}" --checkpoint "$ck" >"$out" 2>"$err" &
  sup=$!
  wait_bounded "$sup" 90
  rc=$?
}

# Daemons started by a first launch's agent outlive its mpirun (they fail to
# call back and exit): wait for them, bounded, so that no case sees another's.
agents_gone() {
  for _ in $(seq 1 100); do
    pgrep -f -- "$scratch/agent.sh" >/dev/null || return 0
    sleep 0.1
  done
}

EARLY='mpirun exited 0 before the program stopped on request'

# agent_case CASE FROM TO RESIZE DONE [RUN-OPTIONS...]: a job on $NODE
# through the slow agent, discovery going from FROM to TO slots; passes when
# it ends 0, its resize line (RESIZE, up to the reason) names mpirun's early
# exit, and every epoch was trained once.
agent_case() {
  local name=$1 from=$2 to=$3 resize=$4 done=$5
  shift 5
  echo "== $name before mpirun's daemon called back"
  listing "$name" "$NODE:$from" "$NODE:$to"
  OMPI_MCA_plm_rsh_agent=$scratch/agent.sh early "$name" -- --elastic 1:2 \
    --hosts "$NODE:$from" --discover "$scratch/$name.sh" "$@"
  agents_gone
  local unit=ranks
  [ "$to" = 1 ] && unit=rank
  if [ "$rc" = 0 ] && grep -q "^gradsync run: resize $from -> $to $unit ($resize; $EARLY" "$err" &&
     epochs_once 2 "$FULL"; then
    pass "$name: mpirun's exit 0 taken for a stop, $done, every epoch trained"
  else
    fail "$name: exit $rc (want 0), a resize line $from -> $to naming mpirun's early exit, every epoch ($(grep -c '^{"epoch"' "$out") epoch line(s))"
  fi
}

agent_case grow 1 2 "discovery lists 2 slots: growing from 1" "relaunched on 2 ranks"
agent_case shrink 2 1 "discovery lists fewer slots of $NODE than the launch uses there: shrinking from 2" \
  "relaunched on 1 rank" --shrink-on-discover

echo "== ranks killed by the stop's SIGUSR1 before they could take it"
listing rank localhost:1 localhost:2
early rank "$scratch/slow_start.sh" -- --elastic 1:2 --discover "$scratch/rank.sh"
if [ "$rc" = 0 ] && grep -q "^gradsync run: resize 1 -> 2 ranks (discovery lists 2 slots: growing from 1; rank 0 on localhost was killed by the request's signal 10" "$err" &&
   grep -q '^gradsync run: elastic job history: 2 launches, 0 restarts after failures, 1 resize on request, 0 relaunches after a lost host' "$err" &&
   epochs_once 2 "$FULL"; then
  pass "rank: killed by SIGUSR1 at start-up is a stop: no restart, no slot lost, 2 ranks"
else
  fail "rank: exit $rc (want 0), a resize 1 -> 2, 0 restarts, every epoch ($(grep -c '^{"epoch"' "$out") epoch line(s))"
fi
finish_tests
