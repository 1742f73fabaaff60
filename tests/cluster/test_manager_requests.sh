#!/usr/bin/env bash
# Request files in SPOOL/incoming that no client of this build writes: the
# manager checks every field's type and range (src/cluster/spool.c,
# spool_check_request), refuses a bad request with a log line naming the
# file and the field, and moves it to SPOOL/rejected (not read again).
# Until 2026-12-02 "id":2147483648 made job -2147483648, "args":"oops" ran a
# default training, "time":1 a wait of 57 years, "min":-3 a job refused as
# "sizes -3:1", and a cancel of id -1 said nothing. A good request still
# runs (a stand-in job on one local "node").
# usage: test_manager_requests.sh GRADSYNC      Exit status: 0 pass, 1 fail.
set -u
G=${1:?usage: test_manager_requests.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
# shellcheck source=tests/cluster/manager_lib.sh
. "$(dirname "$0")/manager_lib.sh"
printf '127.0.1.1\n' >"$scratch/nodes"
"$G" cluster serve --nodes "$scratch/nodes" --spool "$spool" --interval 1 \
  --mpirun "$HERE/fake_mpirun.sh" >>"$log" 2>&1 &
serve_pid=$!
for _ in $(seq 1 50); do [ -f "$spool/pool.json" ] && break; sleep 0.1; done
[ -f "$spool/pool.json" ] || { fail "the manager did not start"; exit 1; }

now=$(date +%s)
sub='"op":"submit","name":"bad","min":1,"max":1,"weight":1,"user":"u","exec":false,"cwd":"/","args":[]'
# FIELD|REQUEST (cJSON reads a key's first value: the bad one comes first)
cases=(
  "id|{$sub,\"id\":2147483648,\"time\":$now}"
  "args|{\"args\":\"oops\",$sub,\"id\":101,\"time\":$now}"
  "time|{$sub,\"id\":102,\"time\":1}"
  "min|{\"min\":-3,$sub,\"id\":103,\"time\":$now}"
  "max|{\"max\":0.5,$sub,\"id\":104,\"time\":$now}"
  "user|{\"user\":\"a b\",$sub,\"id\":105,\"time\":$now}"
  "account|{\"account\":\"science//hep\",$sub,\"id\":107,\"time\":$now}"
  "after|{$sub,\"id\":106,\"time\":$now,\"after\":[\"1\"]}"
  "id|{\"op\":\"cancel\",\"id\":-1}"
  "op|{\"op\":\"explode\",\"id\":1}"
)
mkdir -p "$spool/incoming"
k=0
for c in "${cases[@]}"; do
  k=$((k + 1))
  printf '%s' "${c#*|}" >"$spool/incoming/.t$k" && mv "$spool/incoming/.t$k" "$spool/incoming/0.$k-bad.json"
done
sleep 3
k=0
for c in "${cases[@]}"; do
  k=$((k + 1))
  f=${c%%|*}
  if grep -q "request 0.$k-bad.json: refused: its $f is " "$log" &&
     [ -f "$spool/rejected/0.$k-bad.json" ] && [ ! -e "$spool/incoming/0.$k-bad.json" ]; then
    pass "refused, its $f named, moved to rejected/: ${c#*|}"
  else fail "request ${c#*|}: not refused for its $f"; fi
done
if "$G" jobs --spool "$spool" --json | grep -q '"id":'; then
  fail "a job was made: $("$G" jobs --spool "$spool" --json)"
else pass "no job made of them"; fi
# (an account's path, as submit --account science/physics/hep writes it)
J=$("$G" submit --spool "$spool" --min 1 --max 1 --account science/physics/hep --exec -- \
  "$JOB" 2 "$scratch/J" 0.1 2>"$err")
for _ in $(seq 1 100); do [ -s "$scratch/J/finished" ] && break; sleep 0.1; done
if [ -s "$scratch/J/finished" ] && ! grep -q "request .*submit-$J.*refused" "$log"; then
  pass "a good submission (job $J) still runs"
else fail "job $J did not run"; fi

[ "$failures" -eq 0 ] && echo "all passed" || echo "$failures failed"
[ "$failures" -eq 0 ]
