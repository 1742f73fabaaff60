# The set-up the cluster manager's shell tests share, with stand-in jobs on
# local "nodes" (fake_mpirun.sh, fake_job.sh) or on emulated ones: a scratch
# directory with the spool, the manager's log and the last command's stderr;
# on exit the manager stopped (and waited for), every spool's keepers
# stopped, an emulated pool taken down; pass and fail (which shows the
# stderr, the log and the jobs' logs). Sourced after G is set (the gradsync
# binary, an absolute path); the test's own serve comes after.
# shellcheck shell=bash
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
JOB=$HERE/fake_job.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset GRADSYNC_SPOOL
failures=0
scratch=$(mktemp -d)
spool=$scratch/spool
log=$scratch/serve.log
err=$scratch/err
serve_pid=
# shellcheck source=tests/cluster/keepers.sh
. "$HERE/keepers.sh"
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  # Keepers are session leaders: their sessions go with them.
  for s in "$scratch"/spool*; do [ -d "$s" ] && stop_keepers "$s"; done
  sleep 0.3
  for s in "$scratch"/spool*; do
    if [ -f "$s/emulated/names" ]; then
      sleep 0.7
      "$G" cluster down --force --spool "$s" >/dev/null 2>&1 # (a keeper not yet gone)
    fi
  done
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

pass() { echo "ok    $*"; }
fail() {
  echo "FAIL  $*"
  sed 's/^/      | /' "$err" 2>/dev/null | tail -15
  sed 's/^/      log | /' "$log" 2>/dev/null | tail -25
  for d in "$spool"/jobs/*; do
    [ -f "$d/out.log" ] &&
      grep -v '"epoch"' "$d/out.log" | tail -8 | sed "s#^#      job $(basename "$d") | #"
  done
  failures=$((failures + 1))
}

# Helpers a test may use (or define again its own way): a job's field in
# `gradsync jobs --json`; polling; a job's size held and running; a command
# that must exit 2 with a message.
field() { "$G" jobs --spool "$spool" --json | grep "\"id\":$1," | sed -E "s/.*\"$2\":([^,}]*).*/\1/"; }
wait_for() { # SECONDS COMMAND...: polls every 0.1 s
  local n=$(($1 * 10))
  shift
  for _ in $(seq 1 $n); do "$@" && return 0; sleep 0.1; done
  return 1
}
size_is() { [ "$(field "$1" size)" = "$2" ] && [ "$(field "$1" running_ranks)" = "$2" ]; }
wait_file() { [ -s "$1" ]; }
expect_2() { # WHAT WANT ARGS...: gradsync ARGS exits 2, its stderr holds WANT
  local what=$1 want=$2
  shift 2
  "$G" "$@" >/dev/null 2>"$err"
  local rc=$?
  if [ $rc = 2 ] && grep -q -- "$want" "$err"; then pass "$what: exit 2, '$(head -1 "$err")'"
  else fail "$what: exit $rc, wanted 2 and '$want'"; fi
}
