#!/usr/bin/env bash
# The decayed-usage fair share of the cluster manager (gradsync cluster serve
# --usage-halflife, Slurm's PriorityDecayHalfLife and classic fair-share
# factor), with stand-in jobs (fake_job.sh under fake_mpirun.sh) on three
# local "nodes" under dorm, account hog at share 2 and lab at 1:
#  - hog's H1 runs alone on the 3 nodes; when lab's B1 arrives, hog has used
#    all the pool's usage, so its share is lowered (2 x 2^-(1/(2/3)) = 0.71
#    against lab's 1): B1 starts on 2 nodes, H1 shrinks to 1 (without the
#    usage, shares 2 and 1 would give B1 1 node);
#  - as lab's usage grows, the shares come back to 2 and 1: H1 on 2, B1 on 1;
#  - every job's decayed usage in `gradsync jobs --json` (at most its
#    node-seconds) and by account in `gradsync jobs --accounts`; it is
#    journaled: the manager killed with SIGKILL and started again keeps it;
#  - a bad --usage-halflife, and one given twice: exit 2.
# usage: test_manager_usage.sh GRADSYNC      Exit status: 0 pass, 1 fail.
set -u
G=${1:?usage: test_manager_usage.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
# shellcheck source=tests/cluster/manager_lib.sh
. "$(dirname "$0")/manager_lib.sh"

printf '127.0.1.1\n127.0.1.2\n127.0.1.3\n' >"$scratch/nodes"
serve() {
  "$G" cluster serve --nodes "$scratch/nodes" --spool "$spool" --interval 0.5 --policy dorm \
    --restart-penalty 0 --account-share hog:2 --usage-halflife 600 \
    --mpirun "$HERE/fake_mpirun.sh" "$@" >>"$log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 50); do [ -f "$spool/pool.json" ] && return 0; sleep 0.1; done
  return 1
}

expect_2 "--usage-halflife 0" "--usage-halflife needs seconds from 1" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --usage-halflife 0
expect_2 "--usage-halflife twice" "--usage-halflife given twice" cluster serve \
  --spool "$spool" --nodes "$scratch/nodes" --usage-halflife 60 --usage-halflife 60
expect_2 "cluster simulate --usage-halflife soon" "--usage-halflife needs seconds" cluster \
  simulate --workload x.csv --nodes 2 --usage-halflife soon

serve || { fail "the manager did not start"; exit 1; }
H1=$("$G" submit --spool "$spool" --min 1 --max 3 --name H1 --user alice --account hog \
  --exec -- "$JOB" 2000 "$scratch/H1" 0.1)
wait_for 20 size_is "$H1" 3 && pass "hog's H1 alone on the 3 nodes" ||
  fail "H1: size $(field "$H1" size)"
sleep 3
B1=$("$G" submit --spool "$spool" --min 1 --max 3 --name B1 --user bob --account lab \
  --exec -- "$JOB" 2000 "$scratch/B1" 0.1)
wait_for 20 wait_file "$scratch/B1/launches" || fail "B1 did not start"
nb=$(awk 'NR == 1 { print $1 }' "$scratch/B1/launches")
if [ "$nb" = 2 ]; then
  pass "lab's B1 started on 2 nodes: hog's usage lowered its share 2 below lab's 1"
else fail "B1 started on '$nb' nodes (want 2: hog's usage; 1 would be the shares alone)"; fi
# lab's usage grows: the shares come back to 2 and 1
if wait_for 40 size_is "$H1" 2 && wait_for 10 size_is "$B1" 1; then
  pass "the usage evened: H1 back on 2 nodes, B1 on 1 (the shares 2 and 1)"
else fail "H1 on $(field "$H1" size), B1 on $(field "$B1" size) (want 2 and 1)"; fi

"$G" jobs --spool "$spool" --json >"$scratch/jobs1"
"$G" jobs --spool "$spool" --accounts --json >"$scratch/acct"
"$G" jobs --spool "$spool" --accounts >"$scratch/acct_text"
cat "$scratch/acct_text"
check_usage() { # JOBS ACCOUNTS [BEFORE]: decayed usage in (0, node_s], by account the sum
  python3 - "$@" <<'PY'
import json, sys
jobs = [j for j in map(json.loads, open(sys.argv[1])) if "id" in j]
rep = {a["account"]: a for a in json.load(open(sys.argv[2]))["accounts"]}
ok = True
for j in jobs:
    u, n = j.get("usage_node_s"), j["node_s"]
    if u is None or not (0 < u <= n + 0.1):
        print(f"job {j['id']}: usage {u}, node_s {n}"); ok = False
for acct, name in (("hog", "H1"), ("lab", "B1")):
    js = [j for j in jobs if j["name"] == name]
    a = rep.get(acct)
    # (two snapshots: the manager may write one between the two reads)
    if not js or not a or abs(a.get("usage_node_s", -1) - js[0]["usage_node_s"]) > \
            0.1 * js[0]["usage_node_s"] + 1.5:
        print(f"{acct}: {a}, job {js}"); ok = False
if len(sys.argv) > 3:  # after a restart: no usage lost (a little decay, more use)
    before = {j["id"]: j["usage_node_s"] for j in map(json.loads, open(sys.argv[3])) if "id" in j}
    for j in jobs:
        if j["usage_node_s"] < 0.97 * before[j["id"]]:
            print(f"job {j['id']}: usage {j['usage_node_s']} after, {before[j['id']]} before"); ok = False
sys.exit(0 if ok else 1)
PY
}
if check_usage "$scratch/jobs1" "$scratch/acct" && grep -q 'decayed_h' "$scratch/acct_text"; then
  pass "decayed usage by job and by account: $(grep -o '"account":"hog"[^}]*' "$scratch/acct")"
else fail "decayed usage: $(cat "$scratch/acct")"; fi

kill -9 "$serve_pid"
wait "$serve_pid" 2>/dev/null
serve || fail "the manager did not start again"
sleep 1
"$G" jobs --spool "$spool" --json >"$scratch/jobs2"
"$G" jobs --spool "$spool" --accounts --json >"$scratch/acct2"
if check_usage "$scratch/jobs2" "$scratch/acct2" "$scratch/jobs1"; then
  pass "killed and restarted, the manager keeps every job's usage"
else fail "the usage after a restart: $(cat "$scratch/jobs2")"; fi
"$G" cancel --spool "$spool" "$H1" "$B1" >/dev/null

if [ "$failures" = 0 ]; then echo "all passed"; exit 0; fi
echo "$failures failed"
exit 1
