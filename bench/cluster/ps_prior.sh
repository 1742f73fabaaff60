#!/usr/bin/env bash
# The cluster manager's prediction of a parameter-server job against its
# measured speed (issue 39; docs/CLUSTER_MANAGER.md, "Predicted before it is
# measured"): `gradsync cluster serve --emulated 3 --rate 1gbit --net 1gbit`,
# one rank a node, and for each model (mlp, cnn), protocol (bsp, asp) and
# size (2 and 3 nodes: one server and 1 or 2 workers) a job alone, pinned to
# that size (`submit --min N --max N`), synthetic data, global batch 48.
# Each job's worker profiles its steps and the manager prices the profile
# (`"prior"` in `gradsync jobs --json`: a BSP round, or gs_cost_ps_async's
# asynchronous steps under asp); its commits give the measured samples/s
# (`"speed"`: an asp job commits at epochs' ends only, so its speed counts
# each epoch's test pass and commit, which a bsp job's commits every 20
# steps mostly leave out), and its own epochs' training rate (the median
# `images_per_s` of its epochs after the first, test pass excluded) is the
# like-for-like measure of a step's speed. REPS rounds (default 2), the order of the protocols
# alternating. Writes $BENCH_OUT/cluster_ps_prior.jsonl and .md. Needs root
# and sshd.
# Usage: bench/cluster/ps_prior.sh [REPS]      BENCH_QUICK=1: 1 round, mlp only.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"
bench_init "$0" "$@"
bench_build gradsync_cli
gs=$(realpath "$BENCH_BUILD/gradsync")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset GRADSYNC_SPOOL
reps=${1:-2}
models=(mlp cnn)
[ "$BENCH_QUICK" = 1 ] && reps=1 models=(mlp)
tmp=$(mktemp -d)
# shellcheck source=SCRIPTDIR/manager_lib.sh
. "$(dirname "$0")/manager_lib.sh"
trap manager_cleanup EXIT
spool=$tmp/spool
manager_start "$spool" "$tmp/serve.log" --emulated 3 --rate 1gbit --net 1gbit --interval 2
out=$BENCH_OUT/cluster_ps_prior.jsonl
: >"$out"
for r in $(seq 1 "$reps"); do
  syncs=(bsp asp)
  [ $((r % 2)) = 0 ] && syncs=(asp bsp)
  for model in "${models[@]}"; do
    # enough steps for the profile (steps 3-52) and several commits after it
    epochs=12
    [ "$model" = cnn ] && epochs=3
    for sync in "${syncs[@]}"; do
      for n in 2 3; do
        echo "== round $r: $model $sync on $n nodes ($(date +%T))" >&2
        id=$("$gs" submit --spool "$spool" --min "$n" --max "$n" --name "$model-$sync-$n" -- \
          --model "$model" --ps 1 --sync "$sync" --synthetic 4096 --global-batch 48 \
          --epochs "$epochs" --seed "$r" --json)
        line=
        for _ in $(seq 1 1800); do
          line=$("$gs" jobs --spool "$spool" --json | python3 -c '
import json, sys
for l in sys.stdin:
    j = json.loads(l) if l.startswith("{") else {}
    if j.get("id") == int(sys.argv[1]):
        print(json.dumps(j))' "$id")
          [[ $line == *'"state": "done"'* || $line == *'"state":"done"'* ||
             $line == *'"state": "failed"'* || $line == *'"state":"failed"'* ]] && break
          sleep 1
        done
        python3 - "$line" "$r" "$model" "$sync" "$n" "$spool/jobs/$id/out.log" >>"$out" <<'PY'
import json, statistics, sys
j = json.loads(sys.argv[1])
n = sys.argv[5]
rates = []
try:
    for l in open(sys.argv[6]):
        if l.startswith('{"epoch"'):
            e = json.loads(l)
            if e["epoch"] > 1:
                rates.append(e["images_per_s"])
except OSError:
    pass
print(json.dumps({"round": int(sys.argv[2]), "model": sys.argv[3], "sync": sys.argv[4],
                  "nodes": int(n), "state": j["state"],
                  "measured": j.get("speed", {}).get(n), "predicted": j.get("prior", {}).get(n),
                  "trained": statistics.median(rates) if rates else None,
                  "resizes": j.get("resizes"), "restarts": j.get("restarts")}))
PY
      done
    done
  done
done
bench_stamp "$out" "$(bench_quote "$gs" cluster serve --emulated 3 --rate 1gbit --net 1gbit)"
python3 - "$out" >"$BENCH_OUT/cluster_ps_prior.md" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"round"')]
print("# A parameter-server job's predicted speed against its measured one\n")
print("`gradsync cluster serve --emulated 3 --rate 1gbit --net 1gbit` (one rank a node); each "
      "job alone, pinned to its size, one server (`--ps 1`), synthetic data, global batch 48. "
      "**predicted**: the manager's prior from the job's own profile (`\"prior\"`: a worker's "
      "compute and a BSP round on the server, `gs_cost_ps`; under asp gs_cost_ps_async's "
      "steps, each worker's exchange under the other's compute); **manager**: samples/s "
      "between its commits (`\"speed\"`; an asp job commits at epochs' ends only, so its "
      "speed counts each epoch's test pass and commit, which a bsp job's commits every 20 "
      "steps mostly leave out); **trained**: the job's own epochs' training rate (median "
      "`images_per_s` of the epochs after the first), the like-for-like measure of a step. "
      "Medians over the rounds, each round's in brackets. Absolute speeds on a shared 2-core "
      "host vary from run to run.\n")
print("| model | sync | nodes (workers) | predicted samples/s | manager | trained | predicted / "
      "trained | predicted 3 nodes / 2 | trained 3 / 2 |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
med = lambda v: statistics.median(v) if v else float("nan")
def get(m, s, n, k):
    return [r[k] for r in rows if r["model"] == m and r["sync"] == s and r["nodes"] == n
            and r["state"] == "done" and r.get(k)]
fmt = lambda v: f"{med(v):,.0f} ({', '.join(f'{x:,.0f}' for x in v)})"
models = sorted({r["model"] for r in rows}, key=["mlp", "cnn"].index)
for m in models:
    for s in ("bsp", "asp"):
        for n in (2, 3):
            p, x, t = get(m, s, n, "predicted"), get(m, s, n, "measured"), get(m, s, n, "trained")
            ratio = med(p) / med(t) if p and t else float("nan")
            if n == 2:
                p3, t3 = get(m, s, 3, "predicted"), get(m, s, 3, "trained")
                shape = (f"| {med(p3) / med(p):.2f} | {med(t3) / med(t):.2f} "
                         if p and t and p3 and t3 else "| - | - ")
            else:
                shape = "| | "
            print(f"| {m} | {s} | {n} ({n - 1}) | {fmt(p)} | {fmt(x)} | {fmt(t)} | {ratio:.2f} "
                  f"{shape}|")
bad = [r for r in rows if r["state"] != "done" or not r["measured"] or not r["predicted"]]
if bad:
    print(f"\n{len(bad)} job(s) ended without a measurement or a prediction: "
          + "; ".join(f"{r['model']} {r['sync']} {r['nodes']} nodes round {r['round']}: "
                      f"{r['state']}" for r in bad))
print("\nasp against bsp on the same nodes, predicted and trained:\n")
for m in models:
    for n in (2, 3):
        pb, pa = get(m, "bsp", n, "predicted"), get(m, "asp", n, "predicted")
        tb, ta = get(m, "bsp", n, "trained"), get(m, "asp", n, "trained")
        if pb and pa and tb and ta:
            print(f"- {m} on {n} nodes ({n - 1} worker{'s' if n > 2 else ''}): predicted "
                  f"{med(pa) / med(pb):.2f}x, trained {med(ta) / med(tb):.2f}x")
PY
bench_stamp "$BENCH_OUT/cluster_ps_prior.md" "$(bench_quote "$gs" cluster serve --emulated 3 --rate 1gbit --net 1gbit)"
cat "$BENCH_OUT/cluster_ps_prior.md"
