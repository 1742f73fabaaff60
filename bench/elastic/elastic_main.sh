#!/usr/bin/env bash
# Elastic training on emulated hosts (issue 38's targets): 4 hosts in network
# namespaces, each with its own sshd and a 1 Gbit/s link shaped both ways
# (scripts/emulated-hosts.sh up 4 DIR 1gbit), the main job's model and
# schedule (CNN, Fashion-MNIST, 4 epochs, warm-up 0.3 epoch, cosine) with a
# global batch of 240 (60 per rank on 4, 80 on 3) and a commit every 50 steps:
#   ref      `gradsync run --hosts` uninterrupted, the peer of the others;
#   net      the same on `gradsync run --net 1gbit` (the emulated cluster);
#   elastic  `gradsync run --hosts --elastic 2:4`, one rank SIGKILLed in
#            epoch 2: the job goes on with 3 ranks from the last commit.
# Reports each run's accuracy and time, the elastic run's restart (kill ->
# detected -> relaunched -> first epoch line of the new launch), its events,
# steps redone and samples per epoch (each once), and the commits' share of
# the reference's training time.
# Writes $BENCH_OUT/elastic.jsonl and elastic.md. Needs root, sshd, tc.
#
# Usage: bench/elastic/elastic_main.sh [EPOCHS]   (default 4)
#   BENCH_QUICK=1: 1 epoch of at most 60 steps.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
epochs=${1:-4}
extra=()
kill_epoch=1 # 0-based: the kill lands inside the second epoch
[ "$BENCH_QUICK" = 1 ] && epochs=1 extra=(--max-steps 60) kill_epoch=0
bench_build gradsync_cli
gs=$(realpath "$BENCH_BUILD/gradsync")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
hosts_dir=$tmp/hosts
cleanup() { scripts/emulated-hosts.sh down "$hosts_dir" >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT
scripts/emulated-hosts.sh up 4 "$hosts_dir" 1gbit >/dev/null
hosts=$(cat "$hosts_dir/hosts")
on_hosts=(--hosts "$hosts" --ssh-config "$hosts_dir/ssh_config" --iface "$(cat "$hosts_dir/subnet")")
train=(train --model cnn --epochs "$epochs" --global-batch 240 --lr 0.05 --warmup-epochs 0.3
       --schedule cosine --policy auto --json --commit-every 50 --resume=auto "${extra[@]}")
out=$BENCH_OUT/elastic.jsonl
: >"$out"
# run NAME LAUNCH...: the job's JSON lines, tagged with the run's name and wall time.
run() {
  local name=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || echo "{\"run\":\"$name\",\"exit\":$?}" >>"$out"
  t1=$(date +%s.%N)
  grep '^{' "$tmp/$name.out" | bench_tag_json run "$name" >>"$out" || true
  echo "{\"run\":\"$name\",\"wall_s\":$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')}" >>"$out"
}
echo "== ref: --hosts, uninterrupted ($(date +%T))" >&2
run ref "$gs" run "${on_hosts[@]}" -- "$gs" "${train[@]}" --checkpoint "$tmp/ref"
echo "== net: --net 1gbit ($(date +%T))" >&2
run net "$gs" run -np 4 --net 1gbit -- "$gs" "${train[@]}" --checkpoint "$tmp/net"
echo "== elastic: --hosts --elastic 2:4, a rank killed in epoch 2 ($(date +%T))" >&2
(
  # The kill: once the job has committed inside epoch 2, SIGKILL the newest
  # rank of this run (the last rank started).
  for _ in $(seq 1 3000); do
    if grep -q "\"epoch\":$kill_epoch," "$tmp/elastic/checkpoint.json" 2>/dev/null &&
       ! grep -q '"samples_in_epoch":0,' "$tmp/elastic/checkpoint.json"; then
      pid=$(pgrep -n -f -- "^$gs train .*--checkpoint $tmp/elastic" || true)
      if [ -n "$pid" ]; then
        date +%s.%N >"$tmp/kill_time"
        kill -9 "$pid"
        break
      fi
    fi
    sleep 0.2
  done
) &
killer=$!
run elastic "$gs" run "${on_hosts[@]}" --elastic 2:4 --events "$tmp/events.jsonl" -- \
  "$gs" "${train[@]}" --checkpoint "$tmp/elastic"
kill $killer 2>/dev/null || true
wait $killer 2>/dev/null || true
bench_tag_json run elastic <"$tmp/events.jsonl" >>"$out" || true
[ -f "$tmp/kill_time" ] && echo "{\"run\":\"elastic\",\"kill_unix\":$(cat "$tmp/kill_time")}" >>"$out"
grep -h "gradsync run" "$tmp/elastic.err" |
  python3 -c 'import json, sys
for l in sys.stdin: print(json.dumps({"run": "elastic", "line": l.rstrip("\n")}))' >>"$out" || true
cmd=$(bench_quote "$gs" run "${on_hosts[@]}" --elastic 2:4 -- "$gs" "${train[@]}")
bench_stamp "$out" "$cmd (and the same without --elastic, and on --net 1gbit)"
md=$BENCH_OUT/elastic.md
python3 bench/elastic/summarize_elastic.py "$out" >"$md"
bench_stamp "$md" "bench/elastic/elastic_main.sh $*"
cat "$md"
