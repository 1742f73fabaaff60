#!/usr/bin/env bash
# gradsync run --elastic on local ranks (docs/ELASTIC.md).
#
#   kill   a rank killed with SIGKILL after the first commit: the job goes on
#          on 3 ranks (4 slots less the killed one; 3 divides the global batch
#          48), finishes with
#          exit 0, every epoch's JSON line appears once with every sample, and
#          the supervisor printed a resize line; the restart is timed (kill ->
#          detected -> relaunched -> first commit of the new launch).
#   grow   discovery lists localhost:2, then garbage (a warning, the job goes
#          on), then localhost:4: the job commits and stops (SIGUSR1, exit 3)
#          and continues on 4 ranks.
#
#   ps     a parameter-server job (--ps 1 --sync bsp, --elastic 3:4) whose
#          server, rank 3, is killed with SIGKILL: relaunched on 3 ranks (2
#          workers, and rank 2 now the server, its shard cut afresh from the
#          commit's whole momentum), every epoch's samples once.
#
#   net    kill -9 of a rank on the emulated nodes (--net 1gbit): the job
#          goes on on 3 of them, and the namespaces are gone at the end
#          (only when asked; exit 77 without root or ip).
#
#   dlrm   a DLRM job (gradsync train --model dlrm) with a rank killed: the
#          resize line names the commit (its dlrm.json), the relaunch on 1
#          rank re-shards the 2-rank commit, each epoch once.
#
# usage: test_run_elastic.sh GRADSYNC [kill|grow|ps|dlrm|all|net]
# Exit status: 0 pass, 1 fail.
set -u
G=${1:?usage: test_run_elastic.sh GRADSYNC [kill|grow|all|net]}
WHICH=${2:-all}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset SLURM_JOB_ID SLURM_NODELIST SLURM_JOB_NODELIST
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/apps/elastic_lib.sh
. "$HERE/elastic_lib.sh"

# 8192 samples, global batch 48: 170 steps, 8160 samples an epoch, 2 epochs.
# Rank 0 sleeps 30 ms after each step, so that the job lasts 10 s at least
# however fast the host (CI's ran 3 epochs of twice the samples in 2.7 s
# with no sleep, before discovery could grow it); the growth takes some 4 s
# (the first commit, the garbage's warning, the relaunch). Until 2026-12-06
# 3 epochs of 16384 samples and 8 ms: 36 s, most of it on 4 ranks after
# the growth.
TRAIN=(train --model mlp --synthetic 8192 --global-batch 48 --epochs 2 --commit-every 5
       --resume=auto --json --straggler 0:+30ms)
FULL=8160
RANGE=2:4
# The kills need no time after the first commit: the same run with a
# sleep of 8 ms.
KTRAIN=(train --model mlp --synthetic 8192 --global-batch 48 --epochs 2 --commit-every 5
        --resume=auto --json --straggler 0:+8ms)
KFULL=8160

# kill_rank3 CASE RUN-OPTIONS...: a job of 4 ranks under --elastic 2:4
# whose rank 3 is killed with SIGKILL after its first commit; sets rc (the
# supervisor's exit), sup, t_kill, and reports a failure to start. Returns
# 1 when there was no commit or no rank to kill.
kill_rank3() {
  local name=$1
  shift
  new_case "$name"
  tag=$(unique_tag)
  victim=
  "$G" run -np 4 "$@" --elastic "$RANGE" --events "$ev" -- "$G" "${KTRAIN[@]}" --checkpoint "$ck" \
    --seed "$tag" >"$out" 2>"$err" &
  sup=$!
  wait_commit 60 && victim=$(rank_pid "$tag" 3)
  if [ -z "${victim:-}" ]; then
    fail "no commit or no rank found within 60 s"
    kill "$sup" 2>/dev/null
    return 1
  fi
  t_kill=$(now)
  kill -9 "$victim"
  wait_bounded "$sup" 120
  rc=$?
}

# What both kills must show: a resize 4 -> 3 naming the kill, every epoch's
# samples once, a summary of 3 ranks.
resized_to_3() {
  [ "$rc" = 0 ] && grep -q '^gradsync run: resize 4 -> 3 ranks (rank 3 on .* killed by signal 9)' "$err" &&
    epochs_once 2 "$KFULL" && grep -q '"summary":{[^}]*"ranks":3' "$out"
}

if [ "$WHICH" = kill ] || [ "$WHICH" = all ]; then
  echo "== kill -9 of a rank under --elastic 2:4"
  if kill_rank3 kill; then
    t_fail=$(event_time failure)
    t_launch=$(event_time launch 2)
    t_commit=$(first_commit_after "$t_launch")
    if resized_to_3; then
      pass "kill -9 of rank 3: resized 4 -> 3, finished, 2 epochs of $KFULL samples each"
    else
      fail "kill -9: exit $rc (want 0), a resize line 4 -> 3, epochs of $KFULL samples, 3 ranks"
    fi
    echo "      restart: kill -> detected $(sub "$t_fail" "$t_kill") s, -> relaunched" \
         "$(sub "$t_launch" "$t_fail") s, -> first commit (5 steps) of the new launch" \
         "$(sub "$t_commit" "$t_launch") s; kill -> first commit $(sub "$t_commit" "$t_kill") s"
  fi
fi

# On the emulated cluster (needs root and ip; only when asked: it has a
# ctest of its own, cli_run_elastic_net, that may skip).
if [ "$WHICH" = net ]; then
  if [ "$(id -u)" != 0 ] || { ! command -v ip >/dev/null && [ ! -x /usr/sbin/ip ] && [ ! -x /sbin/ip ]; }; then
    echo "SKIP  needs root and ip (network namespaces)"
    exit 77
  fi
  echo "== kill -9 of a rank under --net 1gbit --elastic 2:4"
  if kill_rank3 net --net 1gbit; then
    left=$(ip netns list 2>/dev/null | grep -c "^gs-$sup-")
    # Where the ranks run: the emulated nodes, not this machine's name
    # (the lines, the history and the events said "localhost:4").
    named=0
    grep -q '^gradsync run: elastic: 4 ranks on 4 emulated nodes at 1gbit' "$err" &&
      grep -qE '^  2 +3 .* 3 emulated nodes ' "$err" &&
      grep -q '"event":"resize".*"hosts":"3 emulated nodes"' "$ev" && named=1
    if resized_to_3 && [ "$left" = 0 ] && [ $named = 1 ]; then
      pass "emulated nodes: resized 4 -> 3, finished, 2 epochs of $KFULL samples each, namespaces removed, the nodes named"
    else
      fail "--net --elastic: exit $rc (want 0), a resize line 4 -> 3, epochs of $KFULL samples, 3 ranks, $left namespace(s) left (want 0), the emulated nodes named ($named)"
      grep '^gradsync run: elastic\|emulated\|localhost' "$err" "$ev" | head -5
    fi
  fi
  finish_tests
fi

if [ "$WHICH" = ps ] || [ "$WHICH" = all ]; then
  echo "== kill -9 of the parameter server (rank 3) under --ps 1 --sync bsp --elastic 3:4"
  saved=("${KTRAIN[@]}")
  KTRAIN+=(--ps 1 --sync bsp)
  RANGE=3:4
  if kill_rank3 ps; then
    if [ "$rc" = 0 ] &&
       grep -q '^gradsync run: resize 4 -> 3 ranks (rank 3 on .* killed by signal 9)' "$err" &&
       grep -q 'elastic: sizes 3 and 4, those of 3 to 4 whose workers' "$err" && epochs_once 2 "$KFULL" &&
       grep -q '"servers":1' "$out"; then
      pass "kill -9 of the server: resized 4 -> 3 (2 workers, 1 server), 2 epochs of $KFULL samples each"
    else
      fail "--ps 1 kill -9 of the server: exit $rc (want 0), a resize line 4 -> 3, epochs of $KFULL samples"
      tail -5 "$err"
    fi
  fi
  KTRAIN=("${saved[@]}")
  RANGE=2:4
fi

if [ "$WHICH" = grow ] || [ "$WHICH" = all ]; then
  echo "== discovery grows the job from 2 to 4 ranks"
  new_case grow
  tag=$(unique_tag)
  list=$scratch/grow.hosts
  echo localhost:2 >"$list"
  printf '#!/bin/sh\ncat %s\n' "$list" >"$scratch/discover.sh"
  chmod +x "$scratch/discover.sh"
  "$G" run -np 2 --elastic 2:4 --discover "$scratch/discover.sh" --discover-every 0.5 \
    --resize-interval 1 --events "$ev" -- "$G" "${TRAIN[@]}" --checkpoint "$ck" \
    --seed "$tag" >"$out" 2>"$err" &
  sup=$!
  # Each list replaced by a rename, never rewritten in place: a discovery
  # reading the file while `>` rewrites it once saw "localhost:4" followed
  # by the old line's tail ("ine"), a host that does not exist.
  if wait_commit 60; then
    echo "not a host line" >"$list.new" && mv "$list.new" "$list"
    # The supervisor has read it (its warning) before the good list comes.
    for _ in $(seq 1 100); do
      grep -q "not a host line" "$err" && break
      sleep 0.1
    done
    t_listed=$(now)
    echo localhost:4 >"$list.new" && mv "$list.new" "$list"
  fi
  wait_bounded "$sup" 120
  rc=$?
  t_launch=$(event_time launch 2)
  warnings=$(grep -c "^gradsync run: warning: discovery script .*discover.sh: line 1: 'not a host line'" "$err")
  if [ "$rc" = 0 ] && grep -q '^gradsync run: resize 2 -> 4 ranks (discovery lists 4 slots' "$err" &&
     grep -q 'Exit code: *3' "$err" && [ "$warnings" = 1 ] && epochs_once 2 "$FULL" &&
     grep -q '"summary":{[^}]*"ranks":4' "$out"; then
    pass "grew 2 -> 4 through a commit and exit 3; garbage from the script: one warning"
  else
    fail "grow: exit $rc (want 0), a resize 2 -> 4 after exit 3, $warnings warning(s) (want 1)"
  fi
  echo "      growth: listed -> relaunched $(sub "$t_launch" "${t_listed:-0}") s"
fi

if [ "$WHICH" = all ] || [ "$WHICH" = dlrm ]; then
  echo "== dlrm: a rank killed, relaunched on 1 rank from the 2-rank commit"
  # The supervisor reads the DLRM trainer's manifest (dlrm.json) as it reads
  # gradsync train's checkpoint.json: the resize line names the commit it
  # resumes from (until 2026-12-01: "from no known commit", and the cluster
  # manager could not see a DLRM job's progress); the 1-rank relaunch
  # re-shards the 2-rank commit and trains both epochs to their end. Each
  # launch is given its lookup cost (--lookup): measuring it takes seconds
  # where the caches are large, and this is not about it.
  new_case dlrm
  "$G" run -np 2 --elastic 1:2 --events "$ev" -- "$G" train --model dlrm --global-batch 64 \
    --steps 5000 --epochs 2 --commit-every 50 --resume=auto --json --lookup 4e-8,4e-10 \
    --checkpoint "$ck" >"$out" 2>"$err" &
  sup=$!
  for _ in $(seq 1 300); do [ -s "$ck/dlrm.json" ] && break; sleep 0.1; done
  sleep 1
  victim=$(pgrep -n -f -- "train --model dlrm --global-batch 64 .*--checkpoint $ck")
  [ -n "$victim" ] && kill -KILL "$victim"
  wait_bounded "$sup" 120
  rc=$?
  e1=$(grep -c '^{"epoch": 1, "train_loss"' "$out")
  e2=$(grep -c '^{"epoch": 2, "train_loss"' "$out")
  if [ "$rc" = 0 ] && [ -n "$victim" ] &&
     grep -q '^gradsync run: resize 2 -> 1 rank (.*killed by signal 9): resuming from the commit at \(epoch [12], sample [0-9]* of the epoch\|the end of epoch 1\)' "$err" &&
     grep -q '"from_ranks": 2' "$out" && [ "$e1" = 1 ] && [ "$e2" = 1 ]; then
    pass "dlrm: resized 2 -> 1 from its commit ($(grep -o 'resuming from the commit at [^,]*\(, sample [0-9]*\)\?' "$err")), both epochs once"
  else
    fail "dlrm: exit $rc (want 0), a resize 2 -> 1 naming the commit, epochs $e1 and $e2 (want 1 and 1)"
  fi
fi
finish_tests
