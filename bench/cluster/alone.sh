#!/usr/bin/env bash
# A job alone under the cluster manager against the same job under plain
# `gradsync run` (issue 39: within 5%), on the same 2 emulated nodes (network
# namespaces with an sshd each, 1 Gbit/s links, built by `gradsync cluster
# serve --emulated 2`): mlp on Fashion-MNIST, 2 epochs, global batch 48.
# Plain: `gradsync run --hosts H1,H2 --cost-cache DIR -- gradsync train ...`,
# timed from start to exit (with the calibration kept, as the manager keeps
# its jobs': both calibrate in the first pair only). Managed: `gradsync submit --min 2 --max 2 -- ...`, timed from the
# submission to the job's end as `gradsync jobs` records them (the manager
# adds its commits, by time at its default, and --resume=auto; the job runs under its
# keeper and elastic supervisor). REPS pairs (default 3), alternating.
# Writes $BENCH_OUT/cluster_alone.jsonl and cluster_alone.md. Needs root
# and sshd.
# Usage: bench/cluster/alone.sh [REPS]      BENCH_QUICK=1: 1 pair, 1 epoch of 200 steps.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
bench_build gradsync_cli
gs=$(realpath "$BENCH_BUILD/gradsync")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset GRADSYNC_SPOOL
reps=${1:-3}
train=(--model mlp --global-batch 48 --epochs 2 --seed 1 --json)
[ "$BENCH_QUICK" = 1 ] && reps=1 train=(--model mlp --global-batch 48 --epochs 1 --max-steps 200 --seed 1 --json)
tmp=$(mktemp -d)
spool=$tmp/spool
serve_pid=
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
  sleep 1
  [ -f "$spool/emulated/names" ] && "$gs" cluster down --spool "$spool" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
train+=(--data-cache "$tmp/cache")
"$gs" train --model mlp --epochs 1 --max-steps 1 --data-cache "$tmp/cache" >/dev/null 2>&1
"$gs" cluster serve --emulated 2 --rate 1gbit --spool "$spool" --interval 5 >"$tmp/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 1 600); do [ -f "$spool/pool.json" ] && break; sleep 0.2; done
[ -f "$spool/pool.json" ] || { cat "$tmp/serve.log" >&2; exit 1; }
emu=$spool/emulated
on_hosts=(--hosts "$(cat "$emu/hosts")" --ssh-config "$emu/ssh_config" --iface "$(cat "$emu/subnet")")
out=$BENCH_OUT/cluster_alone.jsonl
: >"$out"
now() { date +%s.%N; }
for r in $(seq 1 "$reps"); do
  t0=$(now)
  "$gs" run "${on_hosts[@]}" --cost-cache "$tmp/cost" -- "$gs" train "${train[@]}" \
    >"$tmp/plain.$r" 2>&1
  t1=$(now)
  acc=$(grep '"summary"' "$tmp/plain.$r" | sed -E 's/.*"test_accuracy":([0-9.]+).*/\1/')
  trs=$(grep '"summary"' "$tmp/plain.$r" | sed -E 's/.*"train_s":([0-9.]+).*/\1/')
  echo "{\"rep\":$r,\"how\":\"plain\",\"wall_s\":$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'),\"train_s\":$trs,\"test_accuracy\":$acc}" >>"$out"
  id=$("$gs" submit --spool "$spool" --min 2 --max 2 --name "alone-$r" -- "${train[@]}")
  # Its end, from the manager's snapshot (one line of JSON) once a second: a
  # `gradsync jobs` every 0.5 s cost about 35 ms of CPU each, 3.5% of the
  # host's 2 cores beside the managed job alone (the plain run had none).
  for _ in $(seq 1 3600); do
    st=$(grep -oE "\{\"id\":$id,\"name\":\"[^\"]*\",\"user\":\"[^\"]*\",\"state\":\"[a-z]*\"" \
      "$spool/jobs.json" 2>/dev/null | sed -E 's/.*"state":"([a-z]*)"$/\1/' || true)
    [[ $st == done || $st == failed ]] && break
    sleep 1
  done
  line=$("$gs" jobs --spool "$spool" --json | grep "\"id\":$id," || true)
  python3 - "$line" "$spool/jobs/$id/out.log" "$r" >>"$out" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
acc = train_s = commits = None
for l in open(sys.argv[2]):
    if l.startswith('{"summary"'):
        s = json.loads(l)["summary"]
        acc, train_s, commits = s["test_accuracy"], s["train_s"], s.get("commits", 0)
print(json.dumps({"rep": int(sys.argv[3]), "how": "managed", "state": j["state"],
                  "wall_s": round(j["end_time"] - j["submit_time"], 3),
                  "train_s": train_s, "commits": commits,
                  "resizes": j["resizes"], "restarts": j["restarts"], "test_accuracy": acc}))
PY
done
python3 - "$out" "${train[*]}" >"$BENCH_OUT/cluster_alone.md" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"rep"')]
p = [r["wall_s"] for r in rows if r["how"] == "plain"]
m = [r["wall_s"] for r in rows if r["how"] == "managed"]
print("# A job alone under the cluster manager against plain gradsync run\n")
print(f"`gradsync train {sys.argv[2].split(' --data-cache')[0]}` on 2 emulated nodes (1 Gbit/s, "
      "an sshd each): plain `gradsync run --hosts --cost-cache DIR` (start to exit) against `gradsync submit "
      "--min 2 --max 2` to the manager on the same nodes (submission to end, as `gradsync "
      "jobs` records them; the manager's commits, keeper and elastic supervisor). Both keep "
      "the calibration (the manager its spool's, plain its --cost-cache): only the first pair "
      "calibrates. Pairs alternate. Training: the job's own `train_s` (its epochs, commits "
      "included); the rest of each time is start-up and ending.\n")
print("| rep | plain (s) | managed (s) | managed / plain | training: plain, managed (s) | commits |")
print("| --- | --- | --- | --- | --- | --- |")
for a, b in zip([r for r in rows if r["how"] == "plain"], [r for r in rows if r["how"] == "managed"]):
    print(f"| {a['rep']} | {a['wall_s']:.2f} | {b['wall_s']:.2f} | {b['wall_s'] / a['wall_s']:.3f} | "
          f"{a.get('train_s') or 0:.2f}, {b.get('train_s') or 0:.2f} | {b.get('commits')} |")
if p and m:
    tp = [r.get("train_s") or 0 for r in rows if r["how"] == "plain"]
    tm = [r.get("train_s") or 0 for r in rows if r["how"] == "managed"]
    print(f"| median | {statistics.median(p):.2f} | {statistics.median(m):.2f} | "
          f"{statistics.median(m) / statistics.median(p):.3f} | "
          f"{statistics.median(tp):.2f}, {statistics.median(tm):.2f} | |")
PY
bench_stamp "$out" "$(bench_quote bench/cluster/alone.sh "$@")"
bench_stamp "$BENCH_OUT/cluster_alone.md" "$(bench_quote bench/cluster/alone.sh "$@")"
cat "$BENCH_OUT/cluster_alone.md"
