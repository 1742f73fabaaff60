#!/usr/bin/env bash
# The simulator's pictures, one command (issue 13, "Pictures"), as PNG and
# SVG through gnuplot (Debian's gnuplot-nox):
#   bench/results/sim_efficiency.{png,svg}: scaling efficiency T_1 / T_iter
#     against workers (4 .. 2048) for every policy: ResNet-50 (its profile's
#     layer times scaled so that one iteration computes in 0.1 s, a
#     GPU-class device: the CPU profile's 1.7 s would hide any network) on
#     the 10GbE preset, one worker per node, no jitter;
#   bench/results/sim_efficiency_jitter.{png,svg}: the same from 16 workers
#     with 8 per node (hierarchical all-reduce) and compute jitter CV 0.05 per worker
#     and iteration (20 iterations, seed 1), where stragglers appear;
#   bench/results/sim_gantt.{png,svg}: one simulated iteration of ResNet-50
#     (the same compute), mgwfbp, 64 workers on 10GbE with jitter 0.05: worker 0, the straggler
#     and the network stream (from the --trace Chrome trace).
# The data behind each picture is kept beside it (.dat), and
# bench/results/sim_plots.md records the commands and the environment.
#
# Usage: bench/sim_plots.sh [BUILD_DIR]
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init "$0" "$@"
BENCH_BUILD=${1:-$BENCH_BUILD}
command -v gnuplot >/dev/null || { echo "sim_plots: gnuplot is missing (scripts/install-deps.sh installs gnuplot-nox)" >&2; exit 2; }
bench_build gradsync_cli
gs="$BENCH_BUILD/gradsync"
out=$BENCH_OUT
prof=profiles/resnet50.json
t1=0.1
scale=$(python3 -c "
import json
d = json.load(open('$prof'))
print($t1 / (d['forward_s'] + sum(t['backward_s'] for t in d['tensors'])))")
policies=(wfbp single bucket mgwfbp optimal dear)
workers=(4 8 16 32 64 128 256 512 1024 2048)

# efficiency NAME PER_NODE_MAX JITTER ITERS: the table behind one picture.
efficiency() {
  local name=$1 kmax=$2 jit=$3 iters=$4 dat="$out/$1.dat"
  printf 'workers %s\n' "${policies[*]}" > "$dat"
  local from=${5:-4}
  for n in "${workers[@]}"; do
    [ "$n" -ge "$from" ] || continue
    local k=$(( n < kmax ? n : kmax )) row="$n" algo=()
    # Nodes of several workers: the hierarchical all-reduce, named (since
    # 2026-12-07 simulate's default is the communicator's choice).
    [ "$k" -gt 1 ] && algo=(--algo hier)
    "$gs" simulate --profile "$prof" --workers "$n" --per-node "$k" --net 10GbE "${algo[@]}" \
      --compute-scale "$scale" --jitter "$jit" --iters "$iters" --seed 1 --json > "$tmp/e.jsonl"
    for p in "${policies[@]}"; do
      row="$row $(python3 -c "
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r['spec'] == sys.argv[2]: print('%.3f' % (100 * r['efficiency']))" "$tmp/e.jsonl" "$p")"
    done
    echo "$row" >> "$dat"
  done
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
efficiency sim_efficiency 1 0 1
gnuplot -e "DATA='$out/sim_efficiency.dat'; OUT='$out/sim_efficiency'; TITLE='ResNet-50 (161 tensors, 25.6M parameters, compute 0.1 s per iteration), 10GbE preset, 1 worker per node, no jitter'" bench/sim_efficiency.gp
# From 16 workers (2 nodes): on a single node the cost module prices the
# flat algorithms on the links between nodes, which would be a step there.
efficiency sim_efficiency_jitter 8 0.05 20 16
gnuplot -e "DATA='$out/sim_efficiency_jitter.dat'; OUT='$out/sim_efficiency_jitter'; TITLE='ResNet-50 (compute 0.1 s), 10GbE preset, 8 workers per node (hierarchical), jitter CV 0.05, 20 iterations'" bench/sim_efficiency.gp

# The Gantt picture from the Chrome trace.
"$gs" simulate --profile "$prof" --workers 64 --per-node 8 --net 10GbE --algo hier --policy mgwfbp \
  --compute-scale "$scale" \
  --jitter 0.05 --iters 3 --seed 1 --trace "$tmp/trace.json" > "$tmp/gantt.txt"
rows=$(python3 - "$tmp/trace.json" "$out/sim_gantt.dat" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
names = {e["pid"]: e["args"]["name"] for e in d["traceEvents"] if e["ph"] == "M"}
pids = sorted(p for p in names if p > 0)
row = {0: 0}
for i, p in enumerate(pids):
    row[p] = i + 1
kind = {"fwd": 0, "forward": 0, "bwd": 1, "backward": 1, "wait": 2}
n = 0
with open(sys.argv[2], "w") as f:
    f.write("# row start_ms end_ms kind name\n")
    for e in d["traceEvents"]:
        if e["ph"] != "X":
            continue
        if e["pid"] == 0:
            k = 3 + n % 2
            n += 1
        else:
            k = kind.get(e["name"].split()[0], 1)
        f.write(f"{row[e['pid']]} {e['ts'] / 1e3:.6f} {(e['ts'] + e['dur']) / 1e3:.6f} {k} "
                f"{e['name'].replace(' ', '_')}\n")
print(", ".join([f'"network" 0'] + [f'"{names[p]}" {row[p]}' for p in pids]))
PY
)
gnuplot -e "DATA='$out/sim_gantt.dat'; OUT='$out/sim_gantt'; ROWS='$rows'; TITLE='One simulated iteration: ResNet-50 (compute 0.1 s), mgwfbp, 64 workers (8 per node) on 10GbE, jitter CV 0.05'" bench/sim_gantt.gp

cmd=$(bench_quote bench/sim_plots.sh "$@")
{
  echo "# The simulator's pictures"
  echo
  echo "Made by \`bench/sim_plots.sh\` (gnuplot scripts bench/sim_efficiency.gp and"
  echo "bench/sim_gantt.gp). Simulated, not measured: docs/SIMULATE.md says what the"
  echo "model holds and leaves out. Efficiency is T_1 / T_iter, T_1 being one worker's"
  echo "forward + backward without communication. The ResNet-50 profile's layer times"
  echo "(measured on a CPU, 1.72 s per iteration) are scaled to 0.1 s per iteration"
  echo "(--compute-scale), a GPU-class device, so that the network matters."
  echo
  echo "![scaling efficiency](sim_efficiency.png)"
  echo
  echo "Data (efficiency in %, no jitter, 1 worker per node):"
  echo
  echo '```'
  cat "$out/sim_efficiency.dat"
  echo '```'
  echo
  echo "![scaling efficiency with jitter](sim_efficiency_jitter.png)"
  echo
  echo "Data (efficiency in %, jitter CV 0.05, 8 workers per node, from 2 nodes). With"
  echo 'stragglers, `optimal` (the exact minimum of the jitter-free model) is not always'
  echo "the fastest: bucket beats it from 32 to 512 workers in this run; a plan optimal"
  echo "for equal workers is not one for the slowest of N."
  echo "mgwfbp's rule merges everything into one message from 512"
  echo "workers on, as the MG-WFBP paper observed of its ring model."
  echo
  echo '```'
  cat "$out/sim_efficiency_jitter.dat"
  echo '```'
  echo
  echo "![one iteration](sim_gantt.png)"
  echo
  echo "The run behind the Gantt picture:"
  echo
  echo '```'
  cat "$tmp/gantt.txt"
  echo '```'
} > "$out/sim_plots.md"
bench_stamp "$out/sim_plots.md" "$cmd"
ls -la "$out"/sim_efficiency* "$out"/sim_gantt*
