#!/usr/bin/env bash
# Tests `gradsync run`: exit statuses, usage errors, the per-node CPU cap
# (--node-cpus, as root with a CPU cgroup), and (as root, where
# network namespaces work) the emulated cluster: GRADSYNC_NODE per rank, a
# rank killed with SIGKILL, that no namespace, bridge or veth is left, and
# least privilege: with SUDO_UID/SUDO_GID set, the ranks run as that user
# without capabilities, and ip and tc never come from PATH.
#
# usage: test_run.sh GRADSYNC [MPI_PROGRAM]
#   GRADSYNC     the gradsync binary
#   MPI_PROGRAM  optional MPI program, run on 2 emulated nodes at 1gbit
# Exit status: 0 pass, 1 fail, 77 skip (the emulated-cluster part cannot run).
# The rank programs below are single-quoted on purpose: the ranks expand them.
# shellcheck disable=SC2016
set -u
G=${1:?usage: test_run.sh GRADSYNC [MPI_PROGRAM]}
PROG=${2:-}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
if [ -n "$PROG" ]; then PROG=$(cd "$(dirname "$PROG")" && pwd)/$(basename "$PROG"); fi
# Plain root unless a check sets these itself, also under `sudo ctest`.
unset SUDO_UID SUDO_GID SUDO_USER
failures=0
out=$(mktemp)
scratch=$(mktemp -d)
made_user=
cleanup() {
  rm -rf "$out" "$scratch"
  if [ -n "$made_user" ]; then userdel "$made_user" >/dev/null 2>&1; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

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

# An mpirun that stays after its ranks have ended (Open MPI's deadlocked so
# in its PMIx server's finalize, its ranks left unreaped): gradsync run kills
# it 10 s after the last rank ended, and exits with the failed rank's status
# (it waited for it for good).
cat >"$scratch/stuck_mpirun" <<'SH'
#!/bin/sh
( exit 0 ) &
( exit 3 ) &
exec sleep 60
SH
chmod +x "$scratch/stuck_mpirun"
t0=$(date +%s)
"$G" run -np 2 --mpirun "$scratch/stuck_mpirun" -- /bin/true >"$out" 2>&1
rc=$? took=$(($(date +%s) - t0))
if [ "$rc" = 3 ] && [ "$took" -le 40 ] &&
   grep -q "mpirun did not exit within 10 s of the end of all 2 of its ranks" "$out" &&
   grep -q "the first of them to fail ended with status 3" "$out"; then
  pass "an mpirun stuck after its ranks ended is killed (exit 3 after $took s)"
else
  fail "an mpirun stuck after its ranks ended: exit $rc after $took s, wanted 3 and a message"
fi

# An mpirun that dies of SIGSEGV after it said a rank failed (Open MPI
# 4.1's did so in its finalize, 1 run in 8): the run's status is the rank's
# (it was 139, the crash's), and the message names both.
cat >"$scratch/crash_mpirun" <<'SH'
#!/bin/sh
cat >&2 <<'MSG'
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[4242,1],1]
  Exit code:    3
--------------------------------------------------------------------------
MSG
kill -SEGV $$
SH
chmod +x "$scratch/crash_mpirun"
crash_case() { # crash_case STATUS MESSAGE WHAT
  "$G" run -np 2 --mpirun "$scratch/crash_mpirun" -- /bin/true >"$out" 2>&1
  local rc=$?
  if [ "$rc" = "$1" ] && grep -q "$2" "$out"; then pass "$3 (exit $rc)"
  else fail "$3: exit $rc, wanted $1: $(tail -2 "$out")"; fi
}
crash_case 3 "rank 1 exited with status 3; mpirun then died of signal 11" \
  "an mpirun that crashes after a rank failed: the rank's status"
# Without a failed rank said first, its crash is the run's status.
printf '#!/bin/sh\nkill -SEGV $$\n' >"$scratch/crash_mpirun"
crash_case 139 "mpirun was killed by signal 11" "an mpirun that crashes alone"

echo "== ranks are not bound to a core"
# Open MPI's default binds a launch's ranks to cores from core 0 when they
# do not outnumber the cores, so that every one-rank job on a machine ran
# on core 0. A rank may run on every core the launcher may.
mine=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
"$G" run -np 1 -- grep Cpus_allowed_list /proc/self/status >"$out" 2>&1
got=$(cut -f2 "$out")
if [ "$got" = "$mine" ]; then pass "run -np 1: the rank may run on cores $got, as the launcher"
else fail "run -np 1: the rank may run on cores '$got', the launcher on $mine"; fi
if [ "$(nproc)" -ge 2 ]; then
  OMPI_MCA_hwloc_base_binding_policy=core "$G" run -np 1 -- \
    grep Cpus_allowed_list /proc/self/status >"$out" 2>&1
  got=$(cut -f2 "$out")
  if [ "$got" != "$mine" ] && [ -n "$got" ]; then
    pass "OMPI_MCA_hwloc_base_binding_policy=core still binds (cores $got)"
  else fail "OMPI_MCA_hwloc_base_binding_policy=core: the rank may run on '$got'"; fi
fi

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
# A directory, and a script whose interpreter is missing, passed the check
# and failed in mpirun's fork (exit 131 and Open MPI's 27 lines).
check_usage "a directory as the program" "'/tmp' cannot be run: is a directory" \
  "$G" run -np 2 -- /tmp
printf '#!/nonexistent/interp\necho hi\n' > "$out.badinterp" && chmod +x "$out.badinterp"
check_usage "a script whose interpreter is missing" \
  "its interpreter /nonexistent/interp (its #! line) is not found" \
  "$G" run -np 2 -- "$out.badinterp"
rm -f "$out.badinterp"

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

echo "== per-node CPU quota (--node-cpus)"
check_usage "--node-cpus 0" "--node-cpus" "$G" run -np 2 --node-cpus 0 -- /bin/true
check_usage "--node-cpus x" "--node-cpus" "$G" run -np 2 --node-cpus x -- /bin/true
if [ "$(id -u)" != 0 ] || { [ ! -w /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] &&
   ! grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; }; then
  echo "SKIP  --node-cpus: needs root and a writable CPU cgroup"
else
  # Each rank busy-loops for 1 s of wall time and prints the CPU time the
  # loop got and the wall time it took (throttled at the end, a loop ends
  # up to a CFS period late). Two ranks on one node capped at 0.3 cores get
  # at most 0.3 s of CPU per second of the longer loop between them, and a
  # CFS period (0.1 s) of slack; uncapped, each would get up to a core.
  BUSY='import os, time
c0 = os.times(); t = time.time()
while time.time() - t < 1.0: pass
c = os.times(); print("cpu=%.3f wall=%.3f" % (c.user + c.system - c0.user - c0.system, time.time() - t))'
  "$G" run -np 2 --per-node 2 --node-cpus 0.3 -- /usr/bin/python3 -c "$BUSY" >"$out" 2>&1 &
  pid=$!
  wait $pid
  rc=$?
  total=$(grep -o 'cpu=[0-9.]*' "$out" | cut -d= -f2 | awk '{ s += $1; n++ } END { if (n == 2) printf "%.3f", s }')
  wall=$(grep -o 'wall=[0-9.]*' "$out" | cut -d= -f2 | awk '$1 > m { m = $1 } END { printf "%.3f", m }')
  if [ "$rc" = 0 ] && [ -n "$total" ] &&
     awk -v t="$total" -v w="$wall" 'BEGIN { exit !(t <= 0.3 * w + 0.1) }'; then
    pass "--node-cpus 0.3: two ranks of one node got $total s of CPU in $wall s"
  else
    fail "--node-cpus 0.3: exit $rc, CPU '$total' s in '$wall' s (wanted at most 0.3 x wall + 0.1 s for both ranks)"
  fi
  if [ -e "/sys/fs/cgroup/cpu/gradsync-$pid" ] || [ -e "/sys/fs/cgroup/gradsync-$pid" ]; then
    fail "--node-cpus: CPU group gradsync-$pid left behind"
  else
    pass "--node-cpus: no CPU group left behind"
  fi
  # The CFS period: 10 ms (a rank that polls while it waits is not held for
  # most of a 100 ms period once its node's quota is spent), or
  # GRADSYNC_CPU_PERIOD_US, lengthened where the quota would fall under the
  # kernel's 1 ms; a bad one is refused before anything runs.
  QUOTA='g=$(awk -F: "\$2 ~ /(^|,)cpu(,|\$)/ { print \$3; exit }" /proc/self/cgroup)
if [ -n "$g" ] && [ -f "/sys/fs/cgroup/cpu$g/cpu.cfs_period_us" ]; then
  echo "quota=$(cat "/sys/fs/cgroup/cpu$g/cpu.cfs_quota_us") period=$(cat "/sys/fs/cgroup/cpu$g/cpu.cfs_period_us")"
else
  g=$(awk -F: "\$1 == 0 { print \$3 }" /proc/self/cgroup)
  set -- $(cat "/sys/fs/cgroup$g/cpu.max"); echo "quota=$1 period=$2"
fi'
  for want in "0.3 - quota=3000 period=10000" "0.05 - quota=1000 period=20000" \
              "0.3 100000 quota=30000 period=100000"; do
    read -r c p q <<<"$want"
    if [ "$p" = - ]; then
      "$G" run -np 1 --node-cpus "$c" -- sh -c "$QUOTA" >"$out" 2>&1
    else
      GRADSYNC_CPU_PERIOD_US=$p "$G" run -np 1 --node-cpus "$c" -- sh -c "$QUOTA" >"$out" 2>&1
    fi
    if [ "$(grep -o 'quota=.*' "$out")" = "$q" ]; then
      pass "--node-cpus $c (GRADSYNC_CPU_PERIOD_US=$p): $q"
    else
      fail "--node-cpus $c (GRADSYNC_CPU_PERIOD_US=$p): wanted $q, got: $(cat "$out")"
    fi
  done
  GRADSYNC_CPU_PERIOD_US=500 "$G" run -np 1 --node-cpus 0.3 -- sh -c 'echo ran' >"$out" 2>&1
  rc=$?
  if [ "$rc" != 0 ] && ! grep -q '^ran' "$out" &&
     grep -q 'GRADSYNC_CPU_PERIOD_US=500: expected microseconds from 1000 to 1000000' "$out"; then
    pass "GRADSYNC_CPU_PERIOD_US=500 refused (exit $rc)"
  else
    fail "GRADSYNC_CPU_PERIOD_US=500: exit $rc: $(cat "$out")"
  fi
  # A launcher killed with SIGKILL leaves its groups: any later local launch
  # removes them (only a later --node-cpus run did). A dead pid's group,
  # made by hand as the killed launcher would have left it.
  sh -c 'exit 0' & dead=$!
  wait $dead
  croot=/sys/fs/cgroup/cpu
  [ -w "$croot/cpu.cfs_quota_us" ] || croot=/sys/fs/cgroup
  if ! kill -0 "$dead" 2>/dev/null && mkdir -p "$croot/gradsync-$dead/node0"; then
    "$G" run -np 1 -- /bin/true >"$out" 2>&1
    if [ ! -e "$croot/gradsync-$dead" ]; then
      pass "a plain launch removes a dead launcher's CPU group"
    else
      fail "a dead launcher's CPU group $croot/gradsync-$dead survived a plain launch"
      rmdir "$croot/gradsync-$dead/node0" "$croot/gradsync-$dead" 2>/dev/null
    fi
  fi
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
"$G" run -np 2 --net 1gbit -- sh -c 'echo "node=$GRADSYNC_NODE uid=$(id -u)"' >"$out" 2>&1 &
pid=$!
wait $pid
rc=$?
nodes=$(grep -o 'node=[0-9]*' "$out" | sort | tr '\n' ' ')
uids=$(grep -o 'uid=[0-9]*' "$out" | sort -u | tr '\n' ' ')
if [ "$rc" = 0 ] && [ "$nodes" = "node=0 node=1 " ] && [ "$uids" = "uid=0 " ]; then
  pass "--net 1gbit: ranks see GRADSYNC_NODE 0 and 1, run as root without sudo"
else
  fail "--net 1gbit: exit $rc, nodes '$nodes', uids '$uids'"
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

echo "== least privilege (--net started through sudo)"
# A throwaway user to be the invoking user, made for this run (so that runs
# side by side do not share one) and removed at exit.
# In the group "users" too, where there is one, so that the ranks must get
# the user's supplementary groups, not only lose root's.
user=gsrun-$$
extra=()
if getent group users >/dev/null; then extra=(--groups users); fi
if useradd --system --no-create-home --shell /usr/sbin/nologin "${extra[@]}" "$user" >/dev/null 2>&1; then
  made_user=$user
fi
# Every rank starts as $G itself, run by the user: the user must be able to
# reach it (a checkout under a private home cannot be).
if ! id "$user" >/dev/null 2>&1; then
  echo "SKIP  least privilege: cannot create a user (useradd)"
elif ! setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups test -x "$G" 2>/dev/null; then
  echo "SKIP  least privilege: $user cannot execute $G (or setpriv is missing)"
else
  cd / || exit 1 # the user's mpirun needs a working directory it can enter
  uid=$(id -u "$user") gid=$(id -g "$user") groups=$(id -G "$user" | tr ' ' '\n' | sort -n | tr '\n' ' ')
  # Each rank prints its ids, groups, effective and permitted capabilities
  # and HOME; root's group 0 must be gone, and no capability left.
  IDS='echo "ids=$(id -u):$(id -g) groups=$(id -G | tr " " "\n" | sort -n | tr "\n" " ")caps=$(awk "/^CapEff|^CapPrm|^CapAmb/{printf \$2}" /proc/self/status) home=$HOME"'
  SUDO_UID=$uid SUDO_GID=$gid "$G" run -np 2 --net 1gbit -- sh -c "$IDS" >"$out" 2>&1 &
  pid=$!
  wait $pid
  rc=$?
  want="ids=$uid:$gid groups=${groups}caps=$(printf '0%.0s' $(seq 48)) home=$(getent passwd "$user" | cut -d: -f6)"
  got=$(grep -c -x -F -- "$want" "$out")
  if [ "$rc" = 0 ] && [ "$got" = 2 ] && [ -z "$(leftovers $pid)" ]; then
    pass "SUDO_UID=$uid SUDO_GID=$gid: both ranks run as $uid:$gid, groups '$groups', no capabilities"
  else
    fail "SUDO_UID=$uid: exit $rc, $got of 2 ranks print '$want', left '$(leftovers $pid)'"
  fi

  # --node-cpus as the user: each rank moves itself into its node's CPU
  # group (files the launcher gave the user), and the groups go afterwards.
  if [ -w /sys/fs/cgroup/cpu/cpu.cfs_quota_us ] ||
     grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    SUDO_UID=$uid SUDO_GID=$gid "$G" run -np 2 --net 1gbit --node-cpus 0.5 -- \
      sh -c 'echo "id=$(id -u) cg=$(grep -o "gradsync-[0-9]*/node[0-9]*" /proc/self/cgroup | head -1)"' \
      >"$out" 2>&1 &
    pid=$!
    wait $pid
    rc=$?
    cgs=$(grep -o 'cg=[^ ]*' "$out" | sort | tr '\n' ' ')
    if [ "$rc" = 0 ] && [ "$cgs" = "cg=gradsync-$pid/node0 cg=gradsync-$pid/node1 " ] &&
       [ "$(grep -c "id=$uid " "$out")" = 2 ] && [ ! -e "/sys/fs/cgroup/cpu/gradsync-$pid" ] &&
       [ ! -e "/sys/fs/cgroup/gradsync-$pid" ]; then
      pass "SUDO_UID=$uid --node-cpus 0.5: the user's ranks in their nodes' CPU groups, removed after"
    else
      fail "SUDO_UID=$uid --node-cpus 0.5: exit $rc, groups '$cgs'"
    fi
  fi

  # gradsync's own collectives between ranks that run as the user (mpirun
  # too).
  SUDO_UID=$uid SUDO_GID=$gid "$G" run -np 2 --net 1gbit -- "$G" bench --op allreduce \
    --min-bytes 4K --max-bytes 64K --iters 2 --budget 1 --no-calibrate >"$out" 2>&1 &
  pid=$!
  wait $pid
  rc=$?
  if [ "$rc" = 0 ] && grep -q 'auto' "$out" && [ -z "$(leftovers $pid)" ]; then
    pass "SUDO_UID=$uid: gradsync bench across 2 nodes as the user"
  else
    fail "SUDO_UID=$uid: gradsync bench as the user: exit $rc, left '$(leftovers $pid)'"
  fi

  # The root launcher still stops the user's mpirun and ranks on SIGTERM.
  SUDO_UID=$uid SUDO_GID=$gid "$G" run -np 2 --net 1gbit -- sleep 30 >"$out" 2>&1 &
  pid=$!
  sleep 2
  kill -TERM $pid
  wait $pid
  rc=$?
  # Killed processes may take a moment to be reaped: up to 5 s.
  for _ in $(seq 50); do pgrep -u "$uid" >/dev/null || break; sleep 0.1; done
  if [ "$rc" != 0 ] && [ -z "$(leftovers $pid)" ] && ! pgrep -u "$uid" >/dev/null; then
    pass "SUDO_UID=$uid, SIGTERM to the launcher: exit $rc, no process of $user left"
  else
    fail "SUDO_UID=$uid, SIGTERM: exit $rc, left '$(leftovers $pid)', $user runs '$(pgrep -u "$uid" -a)'"
  fi

  # What the user cannot reach is an error before anything is built.
  check_usage "SUDO_UID user and a private working directory" "cannot enter" \
    sh -c 'cd "$1" && shift && exec "$@"' sh "$scratch" \
    env SUDO_UID="$uid" SUDO_GID="$gid" "$G" run -np 2 --net 1gbit -- /bin/true
  cp /bin/true "$scratch/private-program"
  check_usage "SUDO_UID user and a program only root can reach" "cannot execute" \
    env SUDO_UID="$uid" SUDO_GID="$gid" "$G" run -np 2 --net 1gbit -- "$scratch/private-program"

  check_usage "SUDO_UID without a passwd entry" "passwd entry" \
    env SUDO_UID=3999999 SUDO_GID=3999999 "$G" run -np 2 --net 1gbit -- /bin/true
fi

# ip and tc run as root, so PATH must not choose them: fakes first on PATH
# would leave a marker.
mkdir -p "$scratch/bin"
for tool in ip tc; do
  printf '#!/bin/sh\ntouch "%s/used-%s"\nexit 1\n' "$scratch" "$tool" >"$scratch/bin/$tool"
  chmod +x "$scratch/bin/$tool"
done
PATH="$scratch/bin:$PATH" "$G" run -np 2 --net 1gbit -- /bin/true >"$out" 2>&1 &
pid=$!
wait $pid
rc=$?
used=
for tool in ip tc; do [ -e "$scratch/used-$tool" ] && used="$used$tool "; done
if [ "$rc" = 0 ] && [ -z "$used" ] && [ -z "$(leftovers $pid)" ]; then
  pass "fake ip and tc first on PATH: not used"
else
  fail "fake ip and tc first on PATH: exit $rc, used '$used', left '$(leftovers $pid)'"
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
