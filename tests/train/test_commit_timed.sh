#!/usr/bin/env bash
# gradsync train --commit-every Ts (commits by time, as the cluster manager
# asks of its jobs), end to end on 2 ranks:
#   - commits come by time, not at every step nor never, and leave the
#     training as it is: the end bitwise the uninterrupted run's;
#   - the checks report the run's position in progress.json between commits;
#   - SIGUSR1 stops the job inside an epoch at the next check (about 0.5 s
#     apart) even when no commit would be due for 1000 s, and that stop
#     resumes bitwise to the uninterrupted run's end;
#   - the option's checks: seconds out of range, steps and a checkpoint.
# Usage: test_commit_timed.sh GRADSYNC CKPT_COMPARE
# shellcheck source=tests/train/commit_lib.sh
. "$(dirname "$0")/commit_lib.sh"

# 2 ranks x 16, 4096 samples: 128 steps an epoch; 2 ms more a step on rank
# 0 makes an epoch last 0.3 s or more.
args="--model mlp --synthetic 4096 --batch 16 --epochs 2 --policy wfbp --schedule cosine \
--straggler 0:+2ms --json"
train ref || bad "the uninterrupted run failed: $(tail -3 "$tmp/ref.log")"

# Every 0.05 s: a few commits an epoch (their checks ~0.05 s apart).
if train often --commit-every 0.05s; then
  n=$(sed -nE 's/.*"commits":([0-9]+),.*/\1/p' "$tmp/often.log")
  if [ -n "$n" ] && [ "$n" -ge 2 ] && [ "$n" -lt 200 ]; then
    ok "--commit-every 0.05s: $n commits in 256 steps (by time: neither none nor every step)"
  else
    bad "--commit-every 0.05s: ${n:-no} commits in 256 steps"
  fi
  if "$cmp_ckpt" mlp "$tmp/ref/checkpoint.gsck" "$tmp/often/checkpoint.gsck" \
       > "$tmp/often.cmp" 2>&1; then
    ok "timed commits leave the training bitwise as the uninterrupted run's"
  else
    bad "timed commits changed the training: $(cat "$tmp/often.cmp")"
  fi
else
  bad "--commit-every 0.05s failed: $(tail -3 "$tmp/often.log")"
fi

# SIGUSR1 with no commit due for 1000 s: the next check takes it, inside
# an epoch of 4096 steps (65536 samples; the epoch takes 8 s or more).
OMPI_MCA_rmaps_base_oversubscribe=1 mpirun -np 2 "$gs" train --model mlp --synthetic 65536 \
  --batch 16 --epochs 100 --policy wfbp --straggler 0:+2ms --checkpoint "$tmp/usr1" \
  --commit-every 1000s > "$tmp/usr1.log" 2>&1 &
pid=$!
# The first progress line ("loss") comes at the epoch's first step; a
# second later the run is about an eighth into epoch 1, far from its end
# (whose stop would be an epoch's, not a check's).
for _ in $(seq 1 300); do grep -q "loss" "$tmp/usr1.log" 2>/dev/null && break; sleep 0.1; done
sleep 1
# Its checks report its position in progress.json (what a cluster manager
# reads between commits), and no commit is made yet.
report=$(cat "$tmp/usr1/progress.json" 2>&1)
if /usr/bin/python3 -c 'import json, sys
r = json.loads(sys.argv[1])
sys.exit(not (r["epoch"] == 0 and 0 < r["samples_in_epoch"] < 65536 and r["epoch_samples"] == 65536
              and r["epochs"] == 100 and r["global_batch"] == 32))' "$report" 2>/dev/null &&
   [ ! -e "$tmp/usr1/checkpoint.json" ]; then
  ok "between commits, the checks' report: $report"
else
  bad "progress.json between commits: '$report'; $(ls "$tmp/usr1" 2>&1 | tr '\n' ' ')"
fi
t0=$(date +%s.%N)
kill -USR1 $pid
wait $pid
rc=$?
dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if [ $rc = 3 ] && grep -q "stopped after global step [0-9]* (committed in .*, as asked)" \
     "$tmp/usr1.log" && awk -v d="$dt" 'BEGIN { exit !(d < 5) }'; then
  ok "SIGUSR1 with --commit-every 1000s: stopped inside the epoch ${dt} s later, exit 3"
else
  bad "SIGUSR1 with --commit-every 1000s: exit $rc after $dt s: $(tr '\r' '\n' < "$tmp/usr1.log" | grep -m3 "stopped\|error\|summary")"
fi

# Stopped by SIGUSR1 at a timed check, then resumed: bitwise the end of
# the uninterrupted run.
"$gs" run -np 2 -- "$gs" train $args --checkpoint "$tmp/cut" --commit-every 0.1s \
  > "$tmp/cut1.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do [ -e "$tmp/cut/checkpoint.json" ] && break; sleep 0.05; done
kill -USR1 $pid
wait $pid
rc=$?
if [ $rc = 3 ] && train cut --commit-every 0.1s --resume &&
   "$cmp_ckpt" mlp "$tmp/ref/checkpoint.gsck" "$tmp/cut/checkpoint.gsck" > "$tmp/cut.cmp" 2>&1
then
  ok "stopped at a timed check (exit 3) and resumed: bitwise the uninterrupted run's end"
else
  bad "stop and resume by time: exit $rc: $(cat "$tmp/cut.cmp" 2>/dev/null) $(tail -2 "$tmp/cut1.log") $(tail -2 "$tmp/cut.log")"
fi

# The option's checks: a usage error (2) naming the option.
expect2() { # expect2 WHAT PATTERN ARGS...
  local what=$1 pat=$2 out rc
  shift 2
  out=$("$gs" train "$@" 2>&1); rc=$?
  if [ $rc = 2 ] && echo "$out" | grep -q -- "$pat"; then
    ok "$what: exit 2"
  else
    bad "$what: exit $rc: $(echo "$out" | head -2)"
  fi
}
expect2 "--commit-every 0s" "--commit-every '0s': seconds must be" --model mlp \
  --checkpoint "$tmp/x" --commit-every 0s
expect2 "--commit-every xs" "--commit-every 'xs': seconds must be" --model mlp \
  --checkpoint "$tmp/x" --commit-every xs
expect2 "--commit-every 5s without --checkpoint" "--commit-every needs --checkpoint" \
  --model mlp --commit-every 5s

echo "$passes passed, $fails failed"
[ $fails = 0 ]
