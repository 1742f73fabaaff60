#!/bin/sh
# gradsync train over parameter servers, resumed from a checkpoint with
# nothing left to train (an elastic relaunch after the job's last epoch,
# docs/ELASTIC.md): the workers say so and end at once, and so must the
# servers, which no worker ever sends a step. Until 2026-12-07 the servers
# waited for the workers' finish message until GRADSYNC_TIMEOUT and the job
# ended with exit 1 (under BSP, ASP and the switch policies alike).
#   test_train_resume.sh GRADSYNC
set -u
gs=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GRADSYNC_CALIBRATE=0 GRADSYNC_TIMEOUT=30
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=1; }
args="--model mlp --synthetic 384 --batch 32"
# np servers sync
for spec in "3 1 bsp" "4 2 asp" "3 1 switch:offline:0.5"; do
  set -- $spec
  np=$1 servers=$2 sync=$3
  dir=$tmp/$np-$sync
  # shellcheck disable=SC2086
  if ! timeout 120 "$gs" run -np "$np" -- "$gs" train $args --ps "$servers" --sync "$sync" \
       --checkpoint "$dir" > "$tmp/first.log" 2>&1; then
    bad "--ps $servers --sync $sync: the first run failed: $(tail -3 "$tmp/first.log")"
    continue
  fi
  # The summary's counts in the singular where they are one.
  case $servers:$sync in
    1:bsp) want="1 parameter server, sync bsp: .* 0 switches" ;;
    1:switch*) want="1 parameter server, sync switch:offline:0.5: .* 1 switch:" ;;
    *) want="$servers parameter servers, sync $sync: .* 0 switches" ;;
  esac
  grep -q "$want" "$tmp/first.log" ||
    bad "--ps $servers --sync $sync: the summary lacks '$want': $(grep "parameter server" "$tmp/first.log")"
  start=$(date +%s)
  # shellcheck disable=SC2086
  timeout 120 "$gs" run -np "$np" -- "$gs" train $args --ps "$servers" --sync "$sync" \
    --checkpoint "$dir" --resume > "$tmp/again.log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  if [ "$rc" -eq 0 ] && [ "$took" -lt 20 ] &&
     grep -q "nothing left to train" "$tmp/again.log"; then
    ok "--ps $servers --sync $sync: resumed with nothing left to train: exit 0 in $took s"
  else
    bad "--ps $servers --sync $sync: resumed with nothing left: exit $rc after $took s: $(tail -4 "$tmp/again.log")"
  fi
done
# Resumed past Sync-Switch's switch (1 epoch, BSP's half of it done, then 2
# epochs: BSP's share is the first epoch), the run goes on under ASP from its
# first step. Until 2026-12-07 it began with one BSP step ("bsp_steps":1):
# the answer to its first pull named the protocol a run starts with.
dir=$tmp/3-switch:offline:0.5
# shellcheck disable=SC2086
if timeout 120 "$gs" run -np 3 -- "$gs" train $args --ps 1 --sync switch:offline:0.5 \
     --checkpoint "$dir" --resume --epochs 2 --json > "$tmp/past.log" 2>&1 &&
   grep -q '"bsp_steps":0,"asp_steps":[1-9]' "$tmp/past.log"; then
  ok "switch:offline:0.5 resumed past its switch: every step under ASP"
else
  bad "switch:offline:0.5 resumed past its switch: $(grep -o '"bsp_steps":[0-9]*,"asp_steps":[0-9]*' "$tmp/past.log") $(tail -2 "$tmp/past.log")"
fi
exit $fails
