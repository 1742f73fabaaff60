#!/usr/bin/env bash
# Tests `gradsync run`: exit statuses, usage errors, and (as root, where
# network namespaces work) the emulated cluster: GRADSYNC_NODE per rank, a
# rank killed with SIGKILL, and that no namespace, bridge or veth is left.
#
# usage: test_run.sh GRADSYNC [MPI_PROGRAM]
#   GRADSYNC     the gradsync binary
#   MPI_PROGRAM  optional MPI program, run on 2 emulated nodes at 1gbit
# Exit status: 0 pass, 1 fail, 77 skip (the emulated-cluster part cannot run).
set -u
G=${1:?usage: test_run.sh GRADSYNC [MPI_PROGRAM]}
PROG=${2:-}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
failures=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

pass() { echo "ok    $*"; }
fail() { echo "FAIL  $*"; sed 's/^/      | /' "$out" | tail -20; failures=$((failures + 1)); }

# expect_rc WANT DESCRIPTION -- COMMAND...: runs COMMAND, output into $out.
expect_rc() {
  local want=$1 what=$2
  shift 3
  "$@" >"$out" 2>&1
  local rc=$?
  if [ "$rc" = "$want" ]; then pass "$what (exit $rc)"; else fail "$what: exit $rc, wanted $want"; fi
}

# Names of everything a run with launcher pid $1 creates; empty when clean.
leftovers() {
  { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^gs-$1-[0-9]+$"
    ip -o link show 2>/dev/null | grep -oE "gsbr$1\b|gs$1n[0-9]+\b"; } | sort -u
}

echo "== exit statuses"
expect_rc 0 "run -np 2 -- /bin/true" -- "$G" run -np 2 -- /bin/true
"$G" run -np 2 -- /bin/false >"$out" 2>&1
rc=$?
if [ "$rc" != 0 ] && grep -q "exited with status" "$out"; then
  pass "run -np 2 -- /bin/false (exit $rc, message given)"
else
  fail "run -np 2 -- /bin/false: exit $rc, wanted non-zero and a message"
fi
expect_rc 0 "run --help" -- "$G" run --help

echo "== usage errors exit 2 with a message"
check_usage() {
  local what=$1 pattern=$2
  shift 2
  "$@" >"$out" 2>&1
  local rc=$?
  if [ "$rc" = 2 ] && grep -qi -- "$pattern" "$out"; then
    pass "$what (exit 2: $(head -1 "$out"))"
  else
    fail "$what: exit $rc, wanted 2 and a message matching '$pattern'"
  fi
}
check_usage "no -np" "-np" "$G" run -- /bin/true
check_usage "-np 0" "-np" "$G" run -np 0 -- /bin/true
check_usage "--net bogus" "--net" "$G" run -np 2 --net bogus -- /bin/true
check_usage "nothing after --" "program" "$G" run -np 2 --
check_usage "unknown option" "unknown option" "$G" run -np 2 --frobnicate -- /bin/true
check_usage "-np 3 --per-node 2" "divisible" "$G" run -np 3 --per-node 2 -- /bin/true
check_usage "missing program" "not found" "$G" run -np 2 -- /nonexistent/program

echo "== a rank killed with SIGKILL (local launch)"
KILLER='if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then kill -9 $$; fi; sleep 30'
start=$SECONDS
timeout 60 "$G" run -np 2 -- sh -c "$KILLER" >"$out" 2>&1
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ]; then
  pass "killed rank: exit $rc after $((SECONDS - start)) s"
else
  fail "killed rank: exit $rc (124 means it hung)"
fi

echo "== emulated cluster (--net)"
if [ "$(id -u)" != 0 ] || ! command -v tc >/dev/null 2>&1 ||
   ! ip netns add "gs-probe-$$" >/dev/null 2>&1; then
  echo "SKIP  emulated cluster: needs root, ip and tc, and working network namespaces"
  [ "$failures" = 0 ] && exit 77
  exit 1
fi
ip netns del "gs-probe-$$"

# GRADSYNC_NODE per rank, and clean up afterwards. The launcher runs in the
# background so that its pid, which names what it builds, is known.
"$G" run -np 2 --net 1gbit -- sh -c 'echo "node=$GRADSYNC_NODE"' >"$out" 2>&1 &
pid=$!
wait $pid
rc=$?
nodes=$(grep -o 'node=[0-9]*' "$out" | sort | tr '\n' ' ')
if [ "$rc" = 0 ] && [ "$nodes" = "node=0 node=1 " ]; then
  pass "--net 1gbit: ranks see GRADSYNC_NODE 0 and 1"
else
  fail "--net 1gbit: exit $rc, nodes '$nodes'"
fi
left=$(leftovers $pid)
if [ -z "$left" ]; then pass "--net 1gbit: nothing left behind"; else fail "left behind: $left"; fi

"$G" run -np 4 --per-node 2 --net 100mbit -- sh -c 'echo "node=$GRADSYNC_NODE"' >"$out" 2>&1 &
pid=$!
wait $pid
rc=$?
nodes=$(grep -o 'node=[0-9]*' "$out" | sort | tr '\n' ' ')
if [ "$rc" = 0 ] && [ "$nodes" = "node=0 node=0 node=1 node=1 " ] && [ -z "$(leftovers $pid)" ]; then
  pass "--per-node 2: 4 ranks on 2 nodes, nothing left behind"
else
  fail "--per-node 2: exit $rc, nodes '$nodes', left '$(leftovers $pid)'"
fi

"$G" run -np 2 --net 1gbit -- /bin/false >"$out" 2>&1 &
pid=$!
wait $pid
rc=$?
if [ "$rc" != 0 ] && [ -z "$(leftovers $pid)" ]; then
  pass "--net with a failing program: exit $rc, nothing left behind"
else
  fail "--net with a failing program: exit $rc, left '$(leftovers $pid)'"
fi

# The launcher runs directly in the background (its pid names the cluster),
# watched for at most 60 s.
start=$SECONDS
"$G" run -np 2 --net 1gbit -- sh -c "$KILLER" >"$out" 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null && [ $((SECONDS - start)) -lt 60 ]; do sleep 0.2; done
hung=0
if kill -0 $pid 2>/dev/null; then hung=1; kill -KILL $pid; fi
wait $pid
rc=$?
if [ "$hung" = 0 ] && [ "$rc" != 0 ] && [ -z "$(leftovers $pid)" ]; then
  pass "--net, killed rank: exit $rc after $((SECONDS - start)) s, nothing left behind"
else
  fail "--net, killed rank: exit $rc, hung $hung, left '$(leftovers $pid)'"
fi

"$G" run -np 2 --net 1gbit -- sleep 30 >"$out" 2>&1 &
pid=$!
sleep 2
kill -TERM $pid
wait $pid
rc=$?
if [ "$rc" != 0 ] && [ -z "$(leftovers $pid)" ]; then
  pass "--net, SIGTERM to the launcher: exit $rc, ranks and cluster gone"
else
  fail "--net, SIGTERM to the launcher: exit $rc, left '$(leftovers $pid)'"
fi

if [ -n "$PROG" ]; then
  "$G" run -np 2 --net 1gbit -- "$PROG" >"$out" 2>&1 &
  pid=$!
  wait $pid
  rc=$?
  if [ "$rc" = 0 ] && [ -z "$(leftovers $pid)" ]; then
    pass "MPI program $(basename "$PROG") on 2 emulated nodes"
  else
    fail "MPI program $(basename "$PROG") on 2 emulated nodes: exit $rc"
  fi
fi

if [ "$failures" != 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
