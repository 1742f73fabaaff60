#!/usr/bin/env bash
# The cluster manager for real: 2 emulated nodes (network namespaces with an
# sshd each, scripts/emulated-hosts.sh, built by `cluster serve --emulated`)
# and two gradsync train jobs under a resizing policy (dorm by default;
# GS_CLUSTER_TEST_POLICY overrides). Job 1 (1 to 2 nodes) starts alone on
# both nodes; job 2 (1 node) arrives: job 1 shrinks to one node at its next
# commit and job 2 runs on the other; when job 2 is done, job 1 grows back.
# With --net 1gbit the manager predicts each job's speed from the profile
# its engine writes; with --share-speeds a third job of job 2's kind starts
# from job 2's speeds. The restart is not priced (--restart-penalty 0: dorm's objective as Dorm
# has it), so that dorm resizes whatever job 1's remaining time; the price
# is tested in tests/cluster/test_cluster_policy.c and the simulator's.
# A parameter-server job follows, submitted for 1 to 2 nodes: the manager
# runs it on 2 (a server and a worker) and predicts it from the profile its
# worker writes. Checked: both jobs done, job 1's launches 2 -> 1 -> 2 nodes and its
# resizes in `gradsync jobs`, every epoch of job 1 (Fashion-MNIST, 4 epochs)
# used every sample once, and its final accuracy within 1 point (and test
# loss within 5%) of the same training uninterrupted on 2 local ranks (the
# sampler is keyed by position and the global batch is kept). Floating
# point sums in another order are all that differ, and SGD amplifies them;
# the jobs decay their rate (cosine) so that the end is not one noisy step
# of a constant rate: with a constant rate this job ended -1.82 to +0.44
# points and -6.0% to +14.8% of test loss from the uninterrupted run, with
# the cosine schedule -0.36 and -0.21 points, +0.3% and +0.2% (2026-11-29).
# usage: test_manager_emulated.sh GRADSYNC
# Exit status: 0 pass, 1 fail, 77 skip (not root, no ip or sshd, or the
# policy is not in this build).
set -u
G=${1:?usage: test_manager_emulated.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
POLICY=${GS_CLUSTER_TEST_POLICY:-dorm}
unset SLURM_JOB_ID SLURM_NODELIST SLURM_JOB_NODELIST OMPI_MCA_plm_rsh_agent SUDO_UID SUDO_GID
export PATH=$PATH:/usr/sbin:/sbin OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ "$(id -u)" != 0 ]; then echo "SKIP  needs root (network namespaces)"; exit 77; fi
if ! command -v ip >/dev/null; then echo "SKIP  needs ip (iproute2)"; exit 77; fi
if [ ! -x /usr/sbin/sshd ]; then echo "SKIP  needs sshd (openssh-server)"; exit 77; fi
# shellcheck source=tests/cluster/manager_lib.sh
. "$(dirname "$0")/manager_lib.sh"
state() { "$G" jobs --spool "$spool" --json | grep "\"id\":$1," | sed -E 's/.*"state":"([a-z]*)".*/\1/'; }
field() { "$G" jobs --spool "$spool" --json | grep "\"id\":$1," | sed -E "s/.*\"$2\":([^,}]*).*/\1/"; }
# The sizes of job $1's launches, in order, from its supervisors' events.
launches() { cat "$spool/jobs/$1"/events.*.jsonl 2>/dev/null | grep '"event":"launch"' |
  sed -E 's/.*"size":([0-9]+).*/\1/' | tr '\n' ' '; }
wait_for() { # SECONDS COMMAND...
  local t=$1
  shift
  for _ in $(seq 1 $((t * 5))); do "$@" && return 0; sleep 0.2; done
  return 1
}

"$G" cluster serve --emulated 2 --spool "$spool" --policy "$POLICY" --interval 2 --restart-penalty 0 \
  --commit-every 10 --net 1gbit --share-speeds >"$log" 2>&1 &
serve_pid=$!
ready() { [ -f "$spool/pool.json" ] || ! kill -0 "$serve_pid" 2>/dev/null; }
wait_for 120 ready
if ! kill -0 "$serve_pid" 2>/dev/null; then
  if grep -q "unknown policy" "$log"; then echo "SKIP  policy $POLICY is not in this build"; exit 77; fi
  fail "the manager did not start"
  exit 1
fi
pass "manager on 2 emulated nodes, policy $POLICY"

# Fashion-MNIST, global batch 48: 1250 steps an epoch; 4 epochs.
TRAIN=(--model mlp --global-batch 48 --epochs 4 --seed 7 --schedule cosine --json --data-cache "$scratch/cache")
J1=$("$G" submit --spool "$spool" --min 1 --max 2 --name first -- "${TRAIN[@]}")
wait_for 60 grep -q '"size":2' "$spool/jobs/$J1/events.1.jsonl" 2>/dev/null ||
  fail "job 1 did not start on 2 nodes"
wait_for 60 test -s "$spool/jobs/$J1/ckpt/checkpoint.json" || fail "job 1 did not commit"
# --commit-every of its own, without --checkpoint: the manager adds that.
J2=$("$G" submit --spool "$spool" --min 1 --max 1 --name second -- --model mlp \
  --synthetic 2048 --batch 32 --epochs 1 --commit-every 16 --json) ||
  fail "job 2 (--commit-every without --checkpoint) refused: $J2"
wait_for 120 grep -q '"event":"launch"' "$spool/jobs/$J2/events.1.jsonl" 2>/dev/null ||
  fail "job 2 did not start: $(state "$J2")"
is_state() { [ "$(state "$1")" = "$2" ]; }
wait_for 300 is_state "$J2" done || fail "job 2 did not finish: $(state "$J2")"
wait_for 300 is_state "$J1" done || fail "job 1 did not finish: $(state "$J1")"
# A third job of job 2's kind (another length and seed): --share-speeds
# starts it from job 2's measured speeds. Its --max 3 is beyond the pool
# (its curve stops at the pool's 2: until 2026-11-30 the manager wrote a
# measured job's curve up to --max, past the end of its arrays); --scale-lr
# linear lets it change size, so that its range is kept (without it, it
# would run at the pool's 2 only).
J3=$("$G" submit --spool "$spool" --min 1 --max 3 --name third -- --model mlp \
  --synthetic 2048 --batch 32 --epochs 2 --seed 3 --commit-every 16 --scale-lr linear --json) ||
  fail "job 3 refused: $J3"
if wait_for 60 grep -q "job $J3: starts from job $J2's speeds" "$log" &&
   ! grep -q "job $J2: starts from" "$log"; then
  pass "job 3 started from job 2's speeds (the same kind); job 2 borrowed none of job 1's"
else fail "job 3 did not borrow job 2's speeds"; fi
wait_for 120 is_state "$J3" done || fail "job 3 did not finish: $(state "$J3")"
# A parameter-server job (one server; its options in getopt's --ps=1 form)
# submitted for 1 to 2 nodes: on one
# node it would have no worker (until 2026-12-01 the manager launched it
# with --elastic 1:2, which its supervisor refused), so the manager runs
# it on 2 to 2.
J4=$("$G" submit --spool "$spool" --min 1 --max 2 --name ps -- --model mlp --ps=1 --sync bsp \
  --synthetic 2048 --batch 32 --epochs 2 --max-steps=40 --json) ||
  fail "the parameter-server job refused: $J4"
wait_for 120 is_state "$J4" done || fail "the parameter-server job did not finish: $(state "$J4")"
out4=$spool/jobs/$J4/out.log
ps_epochs=$(grep -c '^{"epoch":[12],.*"samples":1280,' "$out4")
if [ "$(field "$J4" min)" = 2 ] && grep -q "job $J4: 2 to 2 nodes, not 1 to 2: it needs a worker" \
     "$log" && [ "$(launches "$J4")" = "2 " ] && [ "$ps_epochs" = 2 ] &&
   grep -q '"summary".*"servers":1' "$out4"; then
  pass "the parameter-server job ran on 2 nodes (1 server, 1 worker), not 1: 2 epochs of" \
       "1280 (--max-steps 40)"
else fail "the parameter-server job: min $(field "$J4" min), launches '$(launches "$J4")'," \
  "$ps_epochs epochs of 1280"; fi
# Its worker profiled its steps (no engine) and the manager predicted it
# from that: no speed on 1 node (no worker), one on 2.
if [ -s "$spool/jobs/$J4/ckpt/profile.json" ] &&
   grep -q "parameter-server worker" "$spool/jobs/$J4/ckpt/profile.json" &&
   grep -Eq "job $J4: predicted samples/s by nodes \(1gbit, [0-9]+ ms\): 2:[0-9.]+$" "$log"; then
  pass "the parameter-server job's prediction from its worker's profile:" \
       "$(grep "job $J4: predicted" "$log" | sed 's/.*: //')"
else fail "the parameter-server job's profile or prediction:" \
  "$(grep "job $J4: \(predicted\|no prediction\)" "$log")"; fi
# An asynchronous parameter-server job (ASP): no step is common to its
# workers, so the manager gives it no --commit-every (until 2026-12-01 it
# did, and every launch was refused: failed after its restart budget); it
# commits at its epochs' ends and is predicted from its profile too.
J5=$("$G" submit --spool "$spool" --min 2 --max 2 --name asp -- --model mlp --ps 1 --sync asp \
  --synthetic 2048 --batch 32 --epochs 3 --json) || fail "the ASP job refused: $J5"
wait_for 120 is_state "$J5" done || fail "the ASP job did not finish: $(state "$J5")"
out5=$spool/jobs/$J5/out.log
if [ "$(state "$J5")" = done ] && [ "$(field "$J5" restarts)" = 0 ] &&
   [ "$(grep -c '^{"epoch":[123],' "$out5")" = 3 ] &&
   grep -q '"summary".*"sync":"asp".*"asp_steps":[1-9]' "$out5" &&
   grep -Eq "job $J5: predicted samples/s by nodes \(1gbit, [0-9]+ ms\): 2:[0-9.]+$" "$log"; then
  pass "the ASP job ran its 3 epochs under the manager with no restart, predicted:" \
       "$(grep "job $J5: predicted" "$log" | sed 's/.*: //')"
else fail "the ASP job: state $(state "$J5"), restarts $(field "$J5" restarts):" \
  "$(grep -v '^{' "$out5" | tail -3)"; fi
sizes=$(launches "$J1")
if [[ "$sizes" =~ ^2\ 1\ (1\ )*2 ]] && [ "$(field "$J1" resizes)" -ge 2 ]; then
  pass "job 1 ran on 2, shrank to 1 for job 2, grew back to 2 (launch sizes: $sizes;" \
       "$(field "$J1" resizes) resizes in gradsync jobs)"
else fail "job 1's launch sizes '$sizes', resizes $(field "$J1" resizes)"; fi
"$G" jobs --spool "$spool"
# Its speed measured on both sizes (two commits of one launch each), what
# the goodput policy's curve is fitted to.
speed=$("$G" jobs --spool "$spool" --json | grep "\"id\":$J1," | sed -E 's/.*"speed":\{([^}]*)\}.*/\1/')
if [[ $speed =~ \"1\":[0-9.]+ ]] && [[ $speed =~ \"2\":[0-9.]+ ]]; then
  pass "job 1's samples/s measured on 1 and 2 nodes: $speed"
else fail "job 1's measured speeds: '$speed' (want sizes 1 and 2)"; fi
# What the cost model predicted of it on 1 and 2 nodes (--net 1gbit), from
# the profile its engine wrote beside its checkpoint.
prior=$("$G" jobs --spool "$spool" --json | grep "\"id\":$J1," | sed -E 's/.*"prior":\{([^}]*)\}.*/\1/')
if [[ $prior =~ \"1\":[0-9.]+ ]] && [[ $prior =~ \"2\":[0-9.]+ ]] &&
   [ -s "$spool/jobs/$J1/ckpt/profile.json" ] && grep -q "job $J1: predicted samples/s" "$log"; then
  pass "job 1's predicted samples/s on 1 and 2 nodes: $prior"
else fail "job 1's prediction: '$prior' (want sizes 1 and 2)"; fi
# What its resizes cost, measured by the manager from each relaunch's first
# two commits (from the stop request: reaching the commit, stopping, the
# relaunch's start-up): more than nothing and less than a minute here.
rs=$("$G" jobs --spool "$spool" --json | grep "\"id\":$J1," | sed -E 's/.*"restart_s":([0-9.]+|null).*/\1/')
if [[ $rs =~ ^[0-9.]+$ ]] && awk -v r="$rs" 'BEGIN { exit !(r > 0 && r < 60) }'; then
  pass "job 1's restarts measured: ${rs} s each"
else fail "job 1's measured restart: '$rs' (want 0 < s < 60)"; fi
# and its start-up (its first launch to training at speed, the prior of a
# resize not yet measured when --restart-penalty is not given)
su=$(field "$J1" startup_s)
if [[ $su =~ ^[0-9.]+$ ]] && awk -v r="$su" 'BEGIN { exit !(r > 0 && r < 60) }'; then
  pass "job 1's start-up measured: ${su} s"
else fail "job 1's measured start-up: '$su' (want 0 < s < 60)"; fi
# and by the nodes each relaunch started on (goodput's price of a growth)
rb=$("$G" jobs --spool "$spool" --json | grep "\"id\":$J1," |
  sed -E 's/.*"restart_s_by_size":\{([^}]*)\}.*/\1/')
if [[ $rb =~ ^\"[12]\":[0-9.]+(,\"[12]\":[0-9.]+)?$ ]]; then
  pass "job 1's restarts by size: $rb"
else fail "job 1's restarts by size: '$rb' (want 1 or 2 nodes)"; fi
# The calibration of the 2-node set, saved under the spool by the first
# 2-node launch for the launches after it (run --cost-cache).
ncost=$(ls "$spool/cost" 2>/dev/null | grep -c '^cost-[0-9a-f]\{16\}\.json$')
if [ "$ncost" -ge 1 ] && grep -q '"ranks":[[:space:]]*2' "$spool"/cost/cost-*.json; then
  pass "the 2-node calibration kept in the spool ($ncost file(s))"
else fail "no calibration kept in $spool/cost: $(ls -a "$spool/cost" 2>&1)"; fi
out1=$spool/jobs/$J1/out.log
# Every epoch's samples once: the sampler by position (docs/TRAIN.md).
epochs=0
for e in 1 2 3 4; do
  [ "$(grep -c "^{\"epoch\":$e,.*\"samples\":60000," "$out1")" = 1 ] && epochs=$((epochs + 1))
done
acc=$(grep '"summary"' "$out1" | tail -1 | sed -E 's/.*"test_accuracy":([0-9.]+).*/\1/')
if [ "$epochs" = 4 ] && [ -n "$acc" ]; then
  pass "job 1: 4 epochs of 60000 samples each across its resizes, accuracy $acc"
else fail "job 1: $epochs epochs of 60000 samples, accuracy '$acc'"; fi
# The same training, uninterrupted, on one machine's 2 ranks.
ref=$scratch/ref
"$G" run -np 2 -- "$G" train "${TRAIN[@]}" >"$ref" 2>&1
ref_acc=$(grep '"summary"' "$ref" | tail -1 | sed -E 's/.*"test_accuracy":([0-9.]+).*/\1/')
loss() { grep '^{"epoch":4,' "$1" | tail -1 | sed -E 's/.*"test_loss":([0-9.e-]+).*/\1/'; }
l1=$(loss "$out1") lref=$(loss "$ref")
if [ -n "$ref_acc" ] && [ -n "$l1" ] && [ -n "$lref" ] &&
   awk -v a="$acc" -v b="$ref_acc" -v l="$l1" -v r="$lref" \
     'BEGIN { d = a - b; q = l / r; exit !(d <= 0.01 && d >= -0.01 && q < 1.05 && q > 0.95) }'; then
  pass "job 1 ends as the uninterrupted run: accuracy $acc ($ref_acc), test loss $l1 ($lref)"
else fail "job 1: accuracy $acc, test loss '$l1'; uninterrupted: '$ref_acc', '$lref'"; fi
[ "$failures" = 0 ] && echo "all passed" && exit 0
echo "$failures failure(s)"
exit 1
