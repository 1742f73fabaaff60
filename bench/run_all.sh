#!/usr/bin/env bash
# Regenerates every file in bench/results/, one driver per step:
#
#   allreduce  bench/allreduce_sweep.sh      collectives against MPI (2, 4, 8 nodes, shm)
#   replay     bench/replay_sweep.sh         scheduling policies, six profiles, 4 and 8 nodes
#   train      bench/train/train_vs_ddp.sh   gradsync train against PyTorch DDP, 4 nodes
#   nn         bench/nn/throughput.sh 7      the C models against PyTorch, one thread
#   plan       bench/plan_overhead.sh        planning time per policy
#
# Each file is stamped with the commit (the tree must be clean), the exact
# command, the date and the machine (bench/lib.sh). Run it as root (the
# emulated cluster needs it) on a quiet machine: the full set takes about two
# hours on two cores (replay 1.5 h, allreduce 15 min, train 5 min, nn 3 min);
# --quick runs every step briefly (about 8 minutes), to check the drivers.
#
# Usage: bench/run_all.sh [--quick] [--only STEP,...] [--skip STEP,...]
#                         [--build DIR] [--out DIR] [--list]
#   --quick       BENCH_QUICK=1: short smoke runs, stamped as such
#   --only S,...  run only these steps (in the order above)
#   --skip S,...  run all steps but these
#   --build DIR   build directory (default build; brought up to date first)
#   --out DIR     where result files go (default bench/results)
# Exit status: 0 if every step succeeded, else 1 (the other steps still run).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

steps=(allreduce replay train nn plan)
# One function per step; its first line of words is what the progress line
# shows. The replay step keeps the settings the committed results used: the
# three small models in 3 rounds, the three large ones (10-18 s per
# iteration) in one round of 4 iterations.
describe() {
  case $1 in
    allreduce) echo "bench/allreduce_sweep.sh $build" ;;
    replay) if [ "$quick" = 1 ]; then echo "bench/replay_sweep.sh"; else
              echo "bench/replay_sweep.sh -p googlenet -p densenet201 -p resnet50 -r 3;" \
                   "bench/replay_sweep.sh -p resnet152 -p bert_base -p vgg16 -i 4"; fi ;;
    train) echo "bench/train/train_vs_ddp.sh" ;;
    nn) if [ "$quick" = 1 ]; then echo "bench/nn/throughput.sh $build"; else
          echo "bench/nn/throughput.sh $build 7"; fi ;;
    plan) echo "bench/plan_overhead.sh" ;;
  esac
}
run_step() {
  case $1 in
    allreduce) bench/allreduce_sweep.sh "$build" ;;
    replay) if [ "$quick" = 1 ]; then bench/replay_sweep.sh; else
              bench/replay_sweep.sh -p googlenet -p densenet201 -p resnet50 -r 3 &&
                bench/replay_sweep.sh -p resnet152 -p bert_base -p vgg16 -i 4; fi ;;
    train) bench/train/train_vs_ddp.sh ;;
    nn) if [ "$quick" = 1 ]; then bench/nn/throughput.sh "$build"; else
          bench/nn/throughput.sh "$build" 7; fi ;;
    plan) bench/plan_overhead.sh ;;
  esac
}
only="" skip=""
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --quick) export BENCH_QUICK=1 ;;
    --only) only=${2:?--only needs a list of steps}; shift ;;
    --skip) skip=${2:?--skip needs a list of steps}; shift ;;
    --build) export BENCH_BUILD=${2:?--build needs a directory}; shift ;;
    --out) export BENCH_OUT=${2:?--out needs a directory}; shift ;;
    --list) printf '%s\n' "${steps[@]}"; exit 0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_all: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
quick=${BENCH_QUICK:-0}
build=${BENCH_BUILD:-build}
for s in ${only//,/ } ${skip//,/ }; do
  if [[ " ${steps[*]} " != *" $s "* ]]; then
    echo "run_all: unknown step '$s'; steps: ${steps[*]}" >&2
    exit 2
  fi
done

# A dirty tree fails here once rather than in every step.
# shellcheck source=SCRIPTDIR/lib.sh
. bench/lib.sh
bench_init "$0" "$@"

chosen=()
for s in "${steps[@]}"; do
  if [ -n "$only" ] && [[ ",$only," != *",$s,"* ]]; then continue; fi
  if [[ ",$skip," == *",$s,"* ]]; then continue; fi
  chosen+=("$s")
done
[ ${#chosen[@]} -gt 0 ] || { echo "run_all: no step left to run" >&2; exit 2; }

logdir=$(mktemp -d /tmp/gradsync-bench.XXXXXX)
mode=""
[ "$quick" = 1 ] && mode=" (quick)"
echo "run_all: ${#chosen[@]} step(s)$mode: ${chosen[*]}; logs in $logdir"
failed=() i=0 t_all=$SECONDS
for s in "${chosen[@]}"; do
  i=$((i + 1))
  t0=$SECONDS
  echo "[$i/${#chosen[@]}] $s: $(describe "$s") (started $(date +%T))"
  # The drivers print their progress on stderr (shown indented and kept),
  # the results on stdout (kept).
  run_step "$s" >"$logdir/$s.out" 2> >(tee "$logdir/$s.err" | sed "s/^/      /" >&2)
  rc=$?
  if [ "$rc" = 0 ]; then
    echo "[$i/${#chosen[@]}] $s: done in $((SECONDS - t0)) s"
  else
    echo "[$i/${#chosen[@]}] $s: FAILED (exit $rc) after $((SECONDS - t0)) s; see $logdir/$s.err"
    failed+=("$s")
  fi
done
echo "run_all: $((${#chosen[@]} - ${#failed[@]})) of ${#chosen[@]} step(s) done in $((SECONDS - t_all)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_all: failed: ${failed[*]}"
  exit 1
fi
