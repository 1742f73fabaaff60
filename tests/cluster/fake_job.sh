#!/usr/bin/env bash
# A stand-in for a training job in the cluster manager's tests: STEPS steps of
# STEP_S seconds, each committed (DIR/step), resuming from the last commit;
# SIGUSR1 stops it after the current step with exit 3, as gradsync train
# does. Every launch's world goes to DIR/launches ("np hosts"). A second copy
# running at once is recorded in DIR/errors. With FAIL=1 it fails at once;
# with FAIL=kill:HOST, the first launch that includes HOST ends after 3
# steps as mpirun does when rank 1 there is killed by SIGABRT (its line on
# stderr, status 134); kill:first, the first host of its first launch. With
# FAIL=progress it does not fail but reports its
# progress at each commit as an --exec program may, in
# $GRADSYNC_ELASTIC_DIR/progress.json: one epoch of STEPS x 10 samples;
# with FAIL=badprogress it writes one that is no report (no epoch_samples);
# with FAIL=profile:FILE it reports its progress and puts FILE there as its
# profile.json at its first commit, as gradsync.torch.elastic's State does.
# STARTUP_S: a launch from step 0 sleeps that long first (its start-up).
# usage: fake_job.sh STEPS DIR [STEP_S] [FAIL] [STARTUP_S]
steps=$1 dir=$2 step_s=${3:-0.1} fail=${4:-0} startup_s=${5:-0}
mkdir -p "$dir"
if ! mkdir "$dir/running" 2>/dev/null; then
  echo "two copies at once (pid $$)" >>"$dir/errors"
  exit 1
fi
trap 'rmdir "$dir/running"' EXIT
stop=0
trap 'stop=1' USR1
trap 'exit 143' TERM
echo "$GS_FAKE_NP $GS_FAKE_HOSTS" >>"$dir/launches"
[ "$fail" = 1 ] && exit 1
s=$(cat "$dir/step" 2>/dev/null || echo 0)
[ "$s" = 0 ] && sleep "$startup_s"
while [ "$s" -lt "$steps" ]; do
  sleep "$step_s"
  s=$((s + 1))
  echo "$s" >"$dir/step.tmp" && mv "$dir/step.tmp" "$dir/step"
  if [ "$fail" = badprogress ] && [ -n "${GRADSYNC_ELASTIC_DIR:-}" ]; then
    mkdir -p "$GRADSYNC_ELASTIC_DIR"
    printf '{"epoch": 0, "samples_in_epoch": %d}\n' $((s * 10)) >"$GRADSYNC_ELASTIC_DIR/progress.json"
  fi
  if [[ $fail == progress || $fail == profile:* ]] && [ -n "${GRADSYNC_ELASTIC_DIR:-}" ]; then
    mkdir -p "$GRADSYNC_ELASTIC_DIR"
    if [[ $fail == profile:* ]] && [ ! -e "$GRADSYNC_ELASTIC_DIR/profile.json" ]; then
      cp "${fail#profile:}" "$GRADSYNC_ELASTIC_DIR/profile.tmp" &&
        mv "$GRADSYNC_ELASTIC_DIR/profile.tmp" "$GRADSYNC_ELASTIC_DIR/profile.json"
    fi
    printf '{"epoch": 0, "samples_in_epoch": %d, "epoch_samples": %d, "epochs": 1}\n' \
      $((s * 10)) $((steps * 10)) >"$GRADSYNC_ELASTIC_DIR/progress.tmp" &&
      mv "$GRADSYNC_ELASTIC_DIR/progress.tmp" "$GRADSYNC_ELASTIC_DIR/progress.json"
  fi
  [ "$stop" = 1 ] && exit 3
  case $fail in
    kill:*)
      host=${fail#kill:}
      [ "$host" = first ] && host=${GS_FAKE_HOSTS%%:*}
      if [ "$s" -ge 3 ] && [[ ",$GS_FAKE_HOSTS" == *",$host:"* ]] && [ ! -e "$dir/killed" ]; then
        : >"$dir/killed"
        echo "mpirun noticed that process rank 1 with PID 0 on node $host exited on signal 6 (Aborted)." >&2
        exit 134
      fi ;;
  esac
done
echo "$s" >>"$dir/finished"
exit 0
