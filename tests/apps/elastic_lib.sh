# Helpers of the elastic tests (test_run_elastic.sh, test_run_elastic_faults.sh,
# test_run_elastic_early_stop.sh),
# written once. Sourced; the caller sets G. Every wait here is bounded.
# shellcheck shell=bash
failures=0
scratch=$(mktemp -d)
poller=
cleanup() {
  [ -n "$poller" ] && kill "$poller" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

pass() { echo "ok    $*"; }
fail() {
  echo "FAIL  $*"
  sed 's/^/      | /' "$err" | tail -25
  failures=$((failures + 1))
}
finish_tests() {
  [ "$failures" = 0 ] && echo "all passed" && exit 0
  echo "$failures failure(s)"
  exit 1
}

now() { date +%s.%N; }
sub() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (a == 0 || b == 0) print "?"; else printf "%.2f", a - b }'; }

# A fresh case: its output, errors, events and checkpoint directory, and a
# poller that logs the time of every commit (checkpoint.json's mtime).
new_case() {
  [ -n "$poller" ] && kill "$poller" 2>/dev/null
  out=$scratch/$1.out err=$scratch/$1.err ev=$scratch/$1.events ck=$scratch/$1.ckpt
  commits=$scratch/$1.commits
  : >"$commits"
  (
    last=
    for _ in $(seq 1 6000); do # 5 minutes at most
      m=$(stat -c '%.9Y' "$ck/checkpoint.json" 2>/dev/null)
      if [ -n "$m" ] && [ "$m" != "$last" ]; then echo "$m" >>"$commits"; last=$m; fi
      sleep 0.05
    done
  ) &
  poller=$!
}

# A seed unique to this case, so that pgrep finds its ranks only.
unique_tag() { echo $((100000 + RANDOM * 7 + $$ % 1000)); }

# Waits (at most $1 s) for the first commit.
wait_commit() {
  for _ in $(seq 1 $(($1 * 10))); do
    [ -s "$commits" ] && return 0
    sleep 0.1
  done
  return 1
}

# The pid of rank $2 of the job whose seed is $1 (its OMPI_COMM_WORLD_RANK).
rank_pid() {
  local p
  for p in $(pgrep -f -- "--seed $1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" &&
       tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | grep -qx train; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# Waits for process $1 (a child of this shell) at most $2 s; kills it after
# that. Returns its exit status (124 when it had to be killed).
wait_bounded() {
  local pid=$1 i
  for i in $(seq 1 $(($2 * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "      (still running after $2 s: killed)"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    return 124
  fi
  wait "$pid"
}

# The wall-clock time of the first event $1 (of launch $2 when given).
event_time() {
  local sel='.'
  if [ -n "${2:-}" ]; then sel="\"launch\":$2,"; fi
  grep "\"event\":\"$1\"" "$ev" 2>/dev/null | grep -- "$sel" | head -1 |
    sed -E 's/.*"time":([0-9.]+).*/\1/'
}

# The first commit logged after time $1.
first_commit_after() {
  awk -v t="${1:-0}" '$1 > t { print; exit }' "$commits"
}

# epochs_at_most_once E N: no epoch line twice, and epoch E's once with N
# samples. For a killed mpirun, whose forwarding of the ranks' last lines may
# die with it: an epoch it finished can lose its line, none can gain one.
epochs_at_most_once() {
  local e
  for e in $(seq 1 "$1"); do
    if [ "$(grep -c "^{\"epoch\":$e," "$out")" -gt 1 ]; then
      echo "      epoch $e: more than one line"
      return 1
    fi
  done
  if [ "$(grep -c "^{\"epoch\":$1,.*\"samples\":$2," "$out")" != 1 ]; then
    echo "      epoch $1: no line with $2 samples"
    return 1
  fi
}

# Every epoch 1..$1 has exactly one JSON line, with $2 samples.
epochs_once() {
  local e n
  for e in $(seq 1 "$1"); do
    n=$(grep -c "^{\"epoch\":$e,.*\"samples\":$2," "$out")
    if [ "$n" != 1 ] || [ "$(grep -c "^{\"epoch\":$e," "$out")" != 1 ]; then
      echo "      epoch $e: $n line(s) with $2 samples"
      return 1
    fi
  done
}
