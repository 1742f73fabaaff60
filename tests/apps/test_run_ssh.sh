#!/usr/bin/env bash
# Runs `gradsync run --hosts` for real over ssh: scripts/emulated-hosts.sh
# builds 3 hosts (network namespaces on a bridge, each with its own sshd and
# a key made for the test), and the ranks must start through Open MPI's ssh
# launcher, one in each namespace; `gradsync bench` then all-reduces across
# them; --ssh-control runs the hosts' check on a kept connection. Failure paths: a host whose sshd is stopped ends the run within a
# bounded time with a message naming the host, a bad hostfile exits 2
# naming the line, and a host cut off under a running job ends it (the
# ranks' MPI_Abort seen, mpirun killed) within a bounded time. Everything is removed on exit, also after a failure.
#
# usage: test_run_ssh.sh GRADSYNC
# Exit status: 0 pass, 1 fail, 77 skip (not root, or no `ip`).
# The rank programs below are single-quoted on purpose: the ranks expand them.
# shellcheck disable=SC2016
set -u
G=${1:?usage: test_run_ssh.sh GRADSYNC}
G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
HERE=$(cd "$(dirname "$0")" && pwd)
HOSTS_SH=$HERE/../../scripts/emulated-hosts.sh
unset SLURM_JOB_ID SLURM_NODELIST SLURM_JOB_NODELIST OMPI_MCA_plm_rsh_agent SUDO_UID SUDO_GID
if [ "$(id -u)" != 0 ]; then echo "SKIP  needs root (network namespaces)"; exit 77; fi
if ! command -v ip >/dev/null && [ ! -x /usr/sbin/ip ] && [ ! -x /sbin/ip ]; then
  echo "SKIP  needs ip (iproute2)"; exit 77
fi
export PATH=$PATH:/usr/sbin:/sbin
failures=0
scratch=$(mktemp -d)
out=$scratch/out
dir=$scratch/hosts # scripts/emulated-hosts.sh's own
cleanup() {
  if [ -f "$dir/names" ]; then
    local ns_list
    ns_list=$(cat "$dir/names")
    "$HOSTS_SH" down "$dir"
    for ns in $ns_list; do
      if ip netns list | grep -qw "$ns"; then echo "FAIL  namespace $ns left behind"; fi
    done
  fi
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

pass() { echo "ok    $*"; }
fail() { echo "FAIL  $*"; sed 's/^/      | /' "$out" | tail -25; failures=$((failures + 1)); }

N=3
if ! "$HOSTS_SH" up $N "$dir" >"$out" 2>&1; then
  fail "scripts/emulated-hosts.sh up $N (sshd installed? scripts/install-deps.sh)"
  exit 1
fi
HOSTS=$(cat "$dir/hosts")
SUBNET=$(cat "$dir/subnet")
mapfile -t NAMES < "$dir/names"
pass "$N emulated hosts with sshd: $HOSTS"
RUN=("$G" run --ssh-config "$dir/ssh_config" --iface "$SUBNET")

echo "== one rank on each host, started over ssh"
WHERE='echo "rank=$OMPI_COMM_WORLD_RANK ns=$(ip netns identify $$)"'
start=$SECONDS
timeout 120 "${RUN[@]}" --hosts "$HOSTS" -- sh -c "$WHERE" >"$out" 2>&1
rc=$?
seen=$(grep -oE 'rank=[0-9]+ ns=[^ ]+' "$out" | sort)
want=$(for ((i = 0; i < N; i++)); do echo "rank=$i ns=${NAMES[$i]}"; done | sort)
if [ "$rc" = 0 ] && [ "$seen" = "$want" ]; then
  pass "--hosts: rank i ran in namespace i, $((SECONDS - start)) s"
else
  fail "--hosts: exit $rc; ranks and namespaces '$(echo $seen)', wanted '$(echo $want)'"
fi

echo "== gradsync bench across the hosts"
timeout 180 "${RUN[@]}" --hosts "$HOSTS" -- "$G" bench --algo ring --min-bytes 4K \
  --max-bytes 64K --iters 3 --no-calibrate >"$out" 2>&1
rc=$?
if [ "$rc" = 0 ] && grep -q "$N ranks on $N node(s)" "$out" &&
   [ "$(grep -cE '^ +65536 +ring ' "$out")" = 1 ]; then
  pass "bench: all-reduce on $N ranks on $N nodes"
else
  fail "bench: exit $rc, wanted 0, '$N ranks on $N node(s)' and a 64 KiB ring row"
fi

echo "== --hostfile, two ranks on the first two hosts"
{ echo "# emulated hosts"; head -1 "$dir/hostfile"
  sed -n 2p "$dir/hostfile" | sed -E 's/ slots=([0-9]+)/:\1/'; } > "$scratch/two"
timeout 120 "${RUN[@]}" --hostfile "$scratch/two" -- sh -c "$WHERE" >"$out" 2>&1
rc=$?
seen=$(grep -oE 'rank=[0-9]+ ns=[^ ]+' "$out" | sort)
want=$(for i in 0 1; do echo "rank=$i ns=${NAMES[$i]}"; done | sort)
if [ "$rc" = 0 ] && [ "$seen" = "$want" ]; then
  pass "--hostfile (slots= and host:N lines)"
else
  fail "--hostfile: exit $rc; ranks and namespaces '$(echo $seen)', wanted '$(echo $want)'"
fi

echo "== --ssh-control: the hosts' check over a kept connection (the cluster manager's)"
# A master connection to the first host (ssh -M, logging its sessions):
# the check before mpirun runs its `true` as a session on it; with a
# ControlPath where no master listens, the check connects anew.
first=$(cut -d, -f1 <<<"$HOSTS" | cut -d: -f1)
ssh -F "$dir/ssh_config" -o BatchMode=yes -o ControlMaster=yes -o "ControlPath=$scratch/m-%C" \
  -o ControlPersist=60 -E "$scratch/master.log" -v -fN "$first" >/dev/null 2>&1
timeout 120 "${RUN[@]}" --hosts "$first" --ssh-control "$scratch/m-%C" -- true >"$out" 2>&1
rc=$?
timeout 120 "${RUN[@]}" --hosts "$first" --ssh-control "$scratch/none-%C" -- true >>"$out" 2>&1
rc2=$?
if [ "$rc" = 0 ] && [ "$rc2" = 0 ] && grep -q "Sending command: true" "$scratch/master.log"; then
  pass "--ssh-control: the check ran on the kept connection; with none there, on a new one"
else
  fail "--ssh-control: exit $rc and $rc2; the master's log: $(grep -c "Sending command" \
    "$scratch/master.log" 2>/dev/null) sessions"
fi
ssh -F "$dir/ssh_config" -o "ControlPath=$scratch/m-%C" -O exit "$first" >/dev/null 2>&1

echo "== GRADSYNC_*, OPENBLAS_* and OMP_* reach the remote ranks"
GRADSYNC_TEST_MARK=hello OPENBLAS_TEST_MARK=blas OMP_TEST_MARK=omp timeout 120 \
  "${RUN[@]}" --hosts "$HOSTS" -- \
  sh -c 'echo "mark=$GRADSYNC_TEST_MARK,$OPENBLAS_TEST_MARK,$OMP_TEST_MARK"' >"$out" 2>&1
rc=$?
if [ "$rc" = 0 ] && [ "$(grep -c '^mark=hello,blas,omp$' "$out")" = "$N" ]; then
  pass "GRADSYNC_TEST_MARK, OPENBLAS_TEST_MARK and OMP_TEST_MARK forwarded to all $N ranks"
else
  fail "forwarding: exit $rc, wanted $N lines 'mark=hello,blas,omp'"
fi

echo "== a rank's failure is the run's"
timeout 120 "${RUN[@]}" --hosts "$HOSTS" -- \
  sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 2 ]; then exit 3; fi' >"$out" 2>&1
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "mpirun exited with status" "$out"; then
  pass "rank 2 exits 3: run exits $rc with a message"
else
  fail "rank 2 exits 3: run exit $rc, wanted non-zero and a message"
fi

echo "== a host whose sshd is down"
down_host=$(sed -n 2p "$dir/hostfile" | cut -d' ' -f1)
kill "$(cat "$dir/sshd.1.pid")"
for _ in $(seq 1 50); do
  ip netns exec "${NAMES[1]}" ss -ltn 2>/dev/null | grep -q ":22 " || break
  sleep 0.1
done
start=$SECONDS
timeout 60 "${RUN[@]}" --hostfile "$dir/hostfile" -- /bin/true >"$out" 2>&1
rc=$?
took=$((SECONDS - start))
if [ "$rc" = 2 ] && grep -q "cannot reach host $down_host (.*hostfile:2) over ssh" "$out" &&
   [ "$took" -le 30 ]; then
  pass "sshd down on $down_host: exit 2 in $took s: $(grep 'cannot reach' "$out")"
else
  fail "sshd down on $down_host: exit $rc after $took s, wanted 2 within 30 s naming the host"
fi

echo "== a bad hostfile"
printf '%s\n%s slots=two\n' "$(head -1 "$dir/hostfile" | cut -d' ' -f1)" "$down_host" > "$scratch/bad"
timeout 30 "${RUN[@]}" --hostfile "$scratch/bad" -- /bin/true >"$out" 2>&1
rc=$?
if [ "$rc" = 2 ] && grep -q "bad:2: slots 'two'" "$out"; then
  pass "bad hostfile: exit 2 naming line 2"
else
  fail "bad hostfile: exit $rc, wanted 2 naming line 2"
fi

# A host cut off (its link down: no reset, its ssh client stays up) under a
# training job on hosts 1 and 3: rank 0's watchdog (GRADSYNC_TIMEOUT=10)
# calls MPI_Abort, and Open MPI's mpirun waits for good for the daemon it
# cannot reach; the run must kill it and end (until 2026-12-02 it hung).
echo "== a host cut off under a running job"
cut_host=$(sed -n 3p "$dir/hostfile" | cut -d' ' -f1)
ck=$scratch/cut.ckpt
start=$SECONDS
GRADSYNC_TIMEOUT=10 timeout 150 "${RUN[@]}" --hosts "$(head -1 "$dir/hostfile" | cut -d' ' -f1),$cut_host" -- \
  "$G" train --model mlp --synthetic 8192 --global-batch 48 --epochs 50 --commit-every 5 \
  --straggler 0:+8ms --checkpoint "$ck" >"$out" 2>&1 &
job=$!
for _ in $(seq 1 900); do
  [ -f "$ck/checkpoint.json" ] && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
cut_at=$SECONDS
ip -n "${NAMES[2]}" link set gsh0 down
wait "$job"
rc=$?
took=$((SECONDS - cut_at))
if [ "$rc" = 1 ] && grep -q "mpirun did not end within 10 s of rank [0-9]*'s MPI_Abort" "$out" &&
   [ "$took" -le 60 ]; then
  pass "$cut_host cut off: the run killed mpirun after the abort and exited 1, $took s after the cut"
else
  fail "$cut_host cut off: exit $rc (124: hung) $took s after the cut ($((cut_at - start)) s in), wanted 1 within 60 s and a message"
fi

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
