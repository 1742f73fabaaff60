#!/usr/bin/env bash
# The cluster manager's sizes for fixed-size train jobs and its
# administration commands, with stand-in jobs on three local "nodes"
# (127.0.1.1-3, fake_mpirun.sh), so that every case takes seconds:
#  - a gradsync train job without --global-batch or --scale-lr linear runs
#    at one size, the largest of its --min:--max the pool holds (its
#    --resume refuses a checkpoint from another rank count): submit says so,
#    the manager logs it and narrows the job; with either option, or an
#    --exec job, the range stays;
#  - serve --nodes FILE's errors name cluster serve and --nodes; a spool that
#    is a regular file is named as such, not as a held lock;
#  - serve --emulated N on a spool whose emulated pool has another number of
#    nodes is refused (exit 2), naming both; the same N reuses the pool;
#  - cluster down refused while a manager serves the spool (its pid named);
#    down, drain and undrain --help print their usage; a drain of a node not
#    in the pool is refused (exit 2), and sends no request;
#  - gradsync run --elastic applies the same rule to gradsync train;
#  - the log's wording: "job N: done", "job N: cancelled" (no doubled
#    state), "request to undrain";
#  - gradsync jobs' WAIT_S and RUN_S never negative for a job that just
#    started (a start stamped to the nanosecond, after the listing's clock).
# usage: test_manager_admin.sh GRADSYNC      Exit status: 0 pass, 1 fail.
set -u
G=${1:?usage: test_manager_admin.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
# shellcheck source=tests/cluster/manager_lib.sh
. "$(dirname "$0")/manager_lib.sh"
out=$scratch/out

printf '127.0.1.1\n127.0.1.2\n127.0.1.3\n' >"$scratch/nodes"
serve() {
  "$G" cluster serve --nodes "$scratch/nodes" --spool "$spool" --interval 1 \
    --restart-budget 2 --mpirun "$HERE/fake_mpirun.sh" "$@" >>"$log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 50); do [ -f "$spool/pool.json" ] && return 0; sleep 0.1; done
  return 1
}
submit() { "$G" submit --spool "$spool" "$@" 2>"$err"; }
state() { "$G" jobs --spool "$spool" --json | awk -v id="$1" -F'"state":"' \
  '$0 ~ "\"id\":" id "," { split($2, a, "\""); print a[1] }'; }
field() {
  "$G" jobs --spool "$spool" --json | grep "\"id\":$1," | sed -E "s/.*\"$2\":([^,}]*).*/\1/"
}
wait_state() { # ID STATE SECONDS
  for _ in $(seq 1 $(($3 * 10))); do [ "$(state "$1")" = "$2" ] && return 0; sleep 0.1; done
  return 1
}
wait_log() { # PATTERN SECONDS
  for _ in $(seq 1 $(($2 * 10))); do grep -q -- "$1" "$log" && return 0; sleep 0.1; done
  return 1
}
# expect CODE "what" "wanted text" ARGS...: gradsync ARGS exits CODE with the text in its
# stdout or stderr
expect() {
  local code=$1 what=$2 want=$3
  shift 3
  "$G" "$@" >"$out" 2>"$err"
  local rc=$?
  if [ $rc = "$code" ] && grep -qF -- "$want" "$out" "$err"; then
    pass "$what: exit $code, '$(head -1 "$err" "$out" | grep -v '^==>' | grep . | head -1)'"
  else
    fail "$what: exit $rc, wanted $code and '$want'"
  fi
}

echo "== serve --nodes FILE and --spool: what failed, where"
printf '' >"$scratch/h_empty"
printf 'a slots=0\n' >"$scratch/h_slots0"
printf 'a\nb\na\n' >"$scratch/h_dup"
expect 2 "--nodes of a missing file" \
  "gradsync cluster serve: --nodes $scratch/none: cannot read it" \
  cluster serve --spool "$spool" --nodes "$scratch/none"
expect 2 "--nodes of an empty file" "gradsync cluster serve: --nodes $scratch/h_empty: the file" \
  cluster serve --spool "$spool" --nodes "$scratch/h_empty"
expect 2 "--nodes with slots=0" "gradsync cluster serve: --nodes $scratch/h_slots0:1: slots '0'" \
  cluster serve --spool "$spool" --nodes "$scratch/h_slots0"
expect 2 "--nodes with a host twice" "gradsync cluster serve: --nodes $scratch/h_dup:3: host 'a'" \
  cluster serve --spool "$spool" --nodes "$scratch/h_dup"
if grep -q -- "--hostfile\|gradsync run" "$err"; then fail "serve --nodes names run's --hostfile"
else pass "serve --nodes names neither gradsync run nor --hostfile"; fi
: >"$scratch/afile"
expect 2 "a spool that is a regular file" "spool $scratch/afile: not a directory" \
  cluster serve --spool "$scratch/afile" --nodes "$scratch/nodes"
if grep -q "another manager" "$err"; then fail "a regular file reported as a held lock"
else pass "a regular file is not reported as another manager's lock"; fi

echo "== serve --emulated N on a spool whose emulated pool has another size"
# SPOOL/emulated as scripts/emulated-hosts.sh leaves it (names, hostfile),
# of 3 stand-in nodes: --emulated 2 is refused before anything is served;
# --emulated 3 (a restart) reuses them. Root only (--emulated is).
if [ "$(id -u)" = 0 ]; then
  emu=$scratch/emu
  mkdir -p "$emu/emulated"
  printf 'gsh-1-1\ngsh-1-2\ngsh-1-3\n' >"$emu/emulated/names"
  printf '127.0.1.1 slots=1\n127.0.1.2 slots=1\n127.0.1.3 slots=1\n' >"$emu/emulated/hostfile"
  timeout 10 "$G" cluster serve --emulated 2 --spool "$emu" --interval 1 \
    --mpirun "$HERE/fake_mpirun.sh" >"$out" 2>"$err"
  rc=$?
  if [ $rc = 2 ] && grep -qF -- "--emulated 2: the spool's pool ($emu/emulated) has 3 nodes, \
--emulated asks 2: use another --spool or \`gradsync cluster down\` first" "$err" &&
     [ ! -e "$emu/pool.json" ]; then
    pass "--emulated 2 on a spool of 3 emulated nodes refused: $(head -c 120 "$err")"
  else fail "--emulated 2 on a spool of 3 emulated nodes: exit $rc"; fi
  timeout 4 "$G" cluster serve --emulated 3 --spool "$emu" --interval 1 \
    --mpirun "$HERE/fake_mpirun.sh" >"$out" 2>"$err"
  if grep -q '"name":"127.0.1.3"' "$emu/pool.json" 2>/dev/null; then
    pass "--emulated 3 on the same spool (a restart) serves its 3 nodes"
  else fail "--emulated 3 on a spool of 3 emulated nodes: $(cat "$err")"; fi
else
  pass "serve --emulated's size check skipped: not root"
fi

echo "== jobs' WAIT_S and RUN_S for a job that just started"
mkdir -p "$scratch/fake"
now=$(date +%s.%N)
printf '{"policy":"static","manager_pid":1,"nodes":[{"name":"n1","slots":1}]}' \
  >"$scratch/fake/pool.json"
# Stamped to the nanosecond a moment after the listing's clock (another
# host's clock ahead, or time() truncating now below a start just made).
awk -v t="$now" 'BEGIN { printf "{\"jobs\":[{\"id\":1,\"name\":\"x\",\"user\":\"u\",\"state\":" \
  "\"running\",\"size\":1,\"min\":1,\"max\":1,\"submit_time\":%.3f,\"start_time\":%.3f}]}", \
  t + 0.6, t + 0.9 }' >"$scratch/fake/jobs.json"
"$G" jobs --spool "$scratch/fake" >"$out" 2>"$err"
if awk 'NR == 2 { for (i = 1; i <= NF; i++) if ($i ~ /^-[0-9]/) bad = 1; ok = 1 }
        END { exit !(ok && !bad) }' "$out"; then
  pass "WAIT_S and RUN_S not negative: $(sed -n 2p "$out" | tr -s ' ' | cut -c1-80)"
else fail "a negative time in: $(cat "$out")"; fi

echo "== cluster down, drain, undrain: usage, refusals"
serve || { fail "the manager did not start"; exit 1; }
expect 0 "cluster down --help" "usage: gradsync cluster down" cluster down --help
expect 0 "cluster drain --help" "usage: gradsync cluster drain" cluster drain --help
expect 0 "cluster undrain --help" "usage: gradsync cluster undrain" cluster undrain --help
expect 2 "drain of a node not in the pool" "no node 'nosuchnode' in the pool of $spool" \
  cluster drain --spool "$spool" nosuchnode
expect 2 "undrain of a node not in the pool" "its nodes: 127.0.1.1, 127.0.1.2, 127.0.1.3" \
  cluster undrain --spool "$spool" nosuchnode
expect 2 "drain --bogus" "unknown option '--bogus'" cluster drain --spool "$spool" --bogus
sleep 1.5
if grep -q "unknown node\|node --help" "$log"; then fail "a refused drain reached the manager"
else pass "no request reached the manager from --help or a refused drain"; fi
expect 2 "cluster down under a running manager" "a cluster manager (pid $serve_pid) serves $spool" \
  cluster down --spool "$spool"
# A spool that is a file, or none: named as serve names it (it was the
# script's "names not found", exit 1).
expect 2 "cluster down of a file" "spool $scratch/nodes: not a directory" \
  cluster down --spool "$scratch/nodes"
expect 2 "cluster down of no spool" "spool $scratch/none: no such directory" \
  cluster down --spool "$scratch/none"
if kill -0 "$serve_pid" 2>/dev/null; then pass "the manager still runs after the refused down"
else fail "the manager is gone after down"; fi
# An undrain request for a node the manager does not know (a pool changed
# between the client's look and the manager's): logged by its verb.
printf '{"op":"resume","node":"ghost"}' >"$spool/incoming/.t" &&
  mv "$spool/incoming/.t" "$spool/incoming/0-ghost-node.json"
if wait_log "request to undrain unknown node ghost: ignored" 10; then
  pass "the log says undrain, not resume"
else fail "no 'request to undrain' line"; fi
# A cancel of a job the manager does not know (gradsync cancel refuses one;
# a request written by hand gets here): logged, ignored (it left no line).
printf '{"op":"cancel","id":4242}' >"$spool/incoming/.t" &&
  mv "$spool/incoming/.t" "$spool/incoming/0-ghost-cancel.json"
if wait_log "request to cancel unknown job 4242: ignored" 10; then
  pass "a cancel of an unknown job is logged"
else fail "no 'request to cancel unknown job' line"; fi

echo "== a train job that cannot change size runs at one size"
H=$(submit --min 1 --max 1 --name hold --exec -- "$JOB" 2000 "$scratch/hold" 0.1)
T1=$(submit --min 1 --max 2 --after "$H" -- --model mlp --epochs 1)
if grep -q "runs at 2 nodes only, not 1 to 2: without --global-batch or --scale-lr linear" \
   "$err" && grep -q "add --global-batch G or --scale-lr linear" "$err"; then
  pass "submit says the job runs at 2 nodes only, naming the fix"
else fail "submit's note: $(cat "$err")"; fi
T2=$(submit --min 1 --max 5 --after "$H" -- --model mlp --epochs 1)
T3=$(submit --min 1 --max 2 --after "$H" -- --model mlp --epochs 1 --global-batch 64)
T4=$(submit --min 1 --max 2 --after "$H" -- --model mlp --epochs 1 --scale-lr linear)
T5=$(submit --min 1 --max 2 --after "$H" --exec -- "$JOB" 5 "$scratch/t5" 0.1)
wait_log "job $T5 (" 10
if grep -q "job $T1: 2 to 2 nodes, not 1 to 2: it runs at one size" "$log" &&
   [ "$(field "$T1" min)" = 2 ] && [ "$(field "$T1" max)" = 2 ]; then
  pass "the manager narrowed job $T1 to 2:2 and logged why"
else fail "job $T1: $(field "$T1" min):$(field "$T1" max)"; fi
if [ "$(field "$T2" min)" = 3 ] && [ "$(field "$T2" max)" = 3 ]; then
  pass "--max 5 on a pool of 3: the largest the pool holds, 3:3"
else fail "job $T2: $(field "$T2" min):$(field "$T2" max)"; fi
for j in "$T3" "$T4" "$T5"; do
  if [ "$(field "$j" min)" = 1 ] && [ "$(field "$j" max)" = 2 ]; then
    pass "job $j (--global-batch, --scale-lr linear or --exec) keeps 1:2"
  else fail "job $j: $(field "$j" min):$(field "$j" max)"; fi
done
# A parameter-server job: a worker beside its server (2 to 3), and one size
# (3); --scale-lr linear is no fix for it (its training refuses it).
T6=$(submit --min 1 --max 3 --after "$H" -- --model mlp --ps 1 --sync bsp)
if grep -q "runs at 3 nodes only, not 1 to 3: .*; add --global-batch G to let it resize$" "$err"
then pass "submit of a parameter-server job: 3 nodes only, --global-batch the fix"
else fail "submit's note for a parameter-server job: $(cat "$err")"; fi
if wait_log "job $T6: 3 to 3 nodes, not 1 to 3: it needs a worker beside its --ps 1 server; it \
runs at one size" 10 && [ "$(field "$T6" min)" = 3 ]; then
  pass "the manager gave job $T6 both reasons and 3:3"
else fail "job $T6: $(field "$T6" min):$(field "$T6" max)"; fi
# DLRM jobs: submit checks their options and runs nothing (until
# 2026-12-01 it trained the whole job in one process first, and wrote its
# checkpoint where submit ran); one without --global-batch is told only of
# --global-batch (the DLRM trainer has no --scale-lr); one with --plan runs
# on the plan's ranks.
mkdir -p "$scratch/sub" && cd "$scratch/sub" || exit 1
t0=$SECONDS
D1=$(submit --min 1 --max 2 --after "$H" -- --model dlrm --steps 200000 --epochs 1 \
  --checkpoint job-checkpoint)
took=$((SECONDS - t0))
if [ -n "$D1" ] && [ "$took" -le 3 ] && [ -z "$(ls)" ] &&
   grep -q "runs at 2 nodes only, not 1 to 2: .*; add --global-batch G to let it resize$" "$err"; then
  pass "submit of a DLRM job: checked in $took s, nothing written, --global-batch the fix"
else fail "submit of a DLRM job: id '$D1', $took s, files: $(ls | tr '\n' ' '), $(cat "$err")"; fi
"$G" shard --tables kaggle:0.001 --ranks 2 --batch 64 --lookup 1e-8,1e-10,1e-9,0,0,0,0,0,0,0 \
  --out "$scratch/plan2.json" >/dev/null 2>&1
D2=$(submit --min 1 --max 3 --after "$H" -- --model dlrm --plan "$scratch/plan2.json" \
  --global-batch 64)
if [ -n "$D2" ] && grep -q "runs at 2 nodes only, not 1 to 3: its --plan is made for 2 ranks" "$err" &&
   [ "$(field "$D2" min)" = 2 ] && [ "$(field "$D2" max)" = 2 ]; then
  pass "submit of a DLRM job with a 2-rank --plan: 2:2"
else fail "DLRM --plan: id '$D2', $(field "$D2" min):$(field "$D2" max), $(cat "$err")"; fi
submit --max 1 -- --model dlrm --plan "$scratch/plan2.json" --global-batch 64 >/dev/null
rc=$?
if [ "$rc" = 2 ] && grep -q "the job's --plan is made for 2 ranks: no size of 1 to 1 nodes" "$err"; then
  pass "a 2-rank --plan under --max 1: exit 2"
else fail "a 2-rank --plan under --max 1: exit $rc, $(cat "$err")"; fi
cd "$scratch" || exit 1
"$G" cancel --spool "$spool" "$T1" "$T2" "$T3" "$T4" "$T5" "$T6" "$D1" "$D2" 2>"$err" || fail "cancel"

echo "== the supervisor's rule (gradsync run --elastic of gradsync train)"
train=(train --model mlp --epochs 1 --max-steps 2 --synthetic 256)
timeout 60 "$G" run --hosts 127.0.0.1:2 --elastic 1:4 --max-restarts 0 \
  --mpirun "$HERE/fake_mpirun.sh" -- "$G" "${train[@]}" >"$out" 2>"$err"
if grep -q "elastic: 2 ranks only, not 1 to 4: without --global-batch or --scale-lr linear" \
   "$err"; then pass "run --elastic 1:4 on 2 slots: 2 ranks only, saying why"
else fail "run --elastic: no one-size note"; fi
timeout 60 "$G" run --hosts 127.0.0.1:2 --elastic 1:4 --max-restarts 0 \
  --mpirun "$HERE/fake_mpirun.sh" -- "$G" "${train[@]}" --scale-lr linear >"$out" 2>"$err"
if grep -q "ranks only" "$err"; then fail "run --elastic narrowed a --scale-lr linear job"
else pass "run --elastic with --scale-lr linear keeps its range"; fi
# A DLRM job with a 2-rank --plan runs on 2 ranks (relaunched on 1 it exited
# 2, restart after restart, until the budget was spent); sizes without 2
# are refused.
dl=(train --model dlrm --plan "$scratch/plan2.json" --global-batch 64 --steps 2 --epochs 1)
timeout 60 "$G" run --hosts 127.0.0.1:2 --elastic 1:2 --max-restarts 0 \
  --mpirun "$HERE/fake_mpirun.sh" -- "$G" "${dl[@]}" >"$out" 2>"$err"
if grep -q "elastic: 2 ranks only, not 1 to 2: the program's --plan is made for 2 ranks" "$err"
then pass "run --elastic 1:2 of a DLRM job with a 2-rank plan: 2 ranks only"
else fail "run --elastic of a DLRM --plan job: $(grep -m2 elastic "$err")"; fi
timeout 60 "$G" run --hosts 127.0.0.1:4 --elastic 3:4 --mpirun "$HERE/fake_mpirun.sh" -- \
  "$G" "${dl[@]}" >"$out" 2>"$err"
rc=$?
if [ "$rc" = 2 ] && grep -q "the program's --plan is made for 2 ranks, outside these sizes" "$err"
then pass "run --elastic 3:4 of a DLRM job with a 2-rank plan: exit 2"
else fail "run --elastic 3:4 of a DLRM --plan job: exit $rc, $(cat "$err")"; fi

echo "== the log's wording"
D=$(submit --min 1 --max 1 --name quick --exec -- "$JOB" 3 "$scratch/quick" 0.1)
wait_state "$D" done 30 || fail "job $D did not finish: $(state "$D")"
"$G" cancel --spool "$spool" "$H" 2>"$err" || fail "cancel $H"
wait_state "$H" cancelled 30 || fail "job $H was not cancelled: $(state "$H")"
sleep 0.5
if grep -q "job $D: done$" "$log" && grep -q "job $H: cancelled$" "$log" &&
   ! grep -q "(done)\|(cancelled)" "$log"; then
  pass "'job $D: done' and 'job $H: cancelled', no doubled state"
else fail "the log: $(grep "job $D: \|job $H: " "$log" | tr '\n' ';')"; fi

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
exit 0
