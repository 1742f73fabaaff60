# Helpers of the benchmarks that drive the cluster manager on emulated nodes
# (real_trace.sh, sim_vs_real.sh), written once. Sourced after bench/lib.sh;
# the caller sets gs (the gradsync binary) and tmp (its scratch directory,
# where the spools live: $tmp/spool*).
# shellcheck shell=bash
# shellcheck source=tests/cluster/keepers.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../tests/cluster/keepers.sh"
serve_pid=

# manager_start SPOOL LOG SERVE-OPTIONS...: `gradsync cluster serve` in the
# background (serve_pid), waiting until its pool is up; exits 1 with its log
# if it does not come up within 2 minutes.
manager_start() {
  local spool=$1 log=$2
  shift 2
  "$gs" cluster serve --spool "$spool" "$@" >"$log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 600); do [ -f "$spool/pool.json" ] && break; sleep 0.2; done
  [ -f "$spool/pool.json" ] || { cat "$log" >&2; exit 1; }
}

# manager_stop SPOOL: the manager stopped, its emulated nodes removed.
manager_stop() {
  if [ -n "$serve_pid" ]; then
    kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
  fi
  serve_pid=
  "$gs" cluster down --spool "$1" >/dev/null 2>&1 || true
}

# The EXIT trap: the manager, every job keeper's process group still running, the
# emulated nodes of every spool, the scratch directory (its spools, with
# every job's events and logs, kept in $CLUSTER_KEEP where that names a
# directory).
manager_cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
  for s in "$tmp"/spool*; do stop_keepers "$s"; done
  sleep 2
  for s in "$tmp"/spool*; do
    [ -f "$s/emulated/names" ] && "$gs" cluster down --spool "$s" >/dev/null 2>&1 || true
  done
  if [ -n "${CLUSTER_KEEP:-}" ]; then
    mkdir -p "$CLUSTER_KEEP" && cp -a "$tmp"/spool* "$tmp"/*.log "$tmp"/*.jsonl "$CLUSTER_KEEP"/ \
      2>/dev/null || true
  fi
  rm -rf "$tmp"
}
