#!/usr/bin/env bash
# One network vocabulary (docs/NETWORK.md): the same --net name gives the same
# link in `run` (the rate tc shapes to) and `plan` (the preset's cost); an
# unknown name fails in both with the list of names; `plan --cost FILE` reads
# a cost file and refuses one measured on another cluster.
# usage: test_net_names.sh GRADSYNC PROFILE
set -u
G=$1
prof=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# An unknown name: both verbs exit 2 and list the names.
for verb in "run -np 2 --net 1gb -- /bin/true" "plan --profile $prof --workers 4 --net 1gb"; do
  # shellcheck disable=SC2086
  "$G" $verb >"$tmp/out" 2>&1
  rc=$?
  if [ $rc = 2 ] && grep -q "100mbit, 1gbit, 10gbit, 25gbit, 100gbit" "$tmp/out" &&
     grep -q "1GbE" "$tmp/out"; then
    pass "$verb: exit 2 with the list of names"
  else
    fail "$verb: exit $rc: $(head -c 400 "$tmp/out")"
  fi
done

# --burst: a bucket smaller than one packet, or not a number, is refused.
for bad in 100 1514x 67108865; do
  "$G" run -np 2 --net 1gbit --burst $bad -- /bin/true >"$tmp/out" 2>&1
  rc=$?
  if [ $rc = 2 ] && grep -q -- "--burst needs the bucket size" "$tmp/out"; then
    pass "run --burst $bad: exit 2"
  else
    fail "run --burst $bad: exit $rc: $(head -c 300 "$tmp/out")"
  fi
done

# --gso: outside 1514..65536, or not a number, is refused; so are --burst
# and --gso without --net (they shape the emulated links).
for bad in 1000 65537 16k; do
  "$G" run -np 2 --net 1gbit --gso $bad -- /bin/true >"$tmp/out" 2>&1
  rc=$?
  if [ $rc = 2 ] && grep -q -- "--gso needs the largest packet" "$tmp/out"; then
    pass "run --gso $bad: exit 2"
  else
    fail "run --gso $bad: exit $rc: $(head -c 300 "$tmp/out")"
  fi
done
for opt in "--burst 70000" "--gso 8192"; do
  # shellcheck disable=SC2086
  "$G" run -np 2 $opt -- /bin/true >"$tmp/out" 2>&1
  rc=$?
  if [ $rc = 2 ] && grep -q -- "${opt% *} shapes the emulated links: it needs --net" "$tmp/out"; then
    pass "run $opt without --net: exit 2"
  else
    fail "run $opt without --net: exit $rc: $(head -c 300 "$tmp/out")"
  fi
done

# The same name in plan: a rate and its alias give the same plan.
for pair in "1gbit 1GbE" "10gbit 10GbE"; do
  set -- $pair
  "$G" plan --profile "$prof" --workers 4 --net "$1" --json >"$tmp/a" 2>&1
  ra=$?
  "$G" plan --profile "$prof" --workers 4 --net "$2" --json >"$tmp/b" 2>&1
  rb=$?
  if [ $ra = 0 ] && [ $rb = 0 ] && cmp -s "$tmp/a" "$tmp/b"; then
    pass "plan --net $1 = --net $2"
    cp "$tmp/a" "$tmp/plan_$1"
  else
    fail "plan --net $1 (exit $ra) and --net $2 (exit $rb) differ"
  fi
done
# ...and a different rate gives a different plan.
"$G" plan --profile "$prof" --workers 4 --net 100mbit --json >"$tmp/c" 2>&1
if cmp -s "$tmp/a" "$tmp/c"; then fail "plan --net 100mbit = --net 10gbit"; else
  pass "plan --net 100mbit differs from 10gbit"; fi

# The same name in run: the rate tc is given (printed by -v) is the one the
# cost module's table gives (1gbit = 1000000000bit); needs root, ip and tc.
if [ "$(id -u)" = 0 ] && command -v tc >/dev/null; then
  for name in 1gbit 1GbE; do
    "$G" run -v -np 2 --net $name -- /bin/true >"$tmp/run" 2>&1
    rc=$?
    if [ $rc = 0 ] && grep -q "tbf rate 1000000000bit" "$tmp/run"; then
      pass "run --net $name shapes to 1000000000bit"
    else
      fail "run --net $name: exit $rc: $(grep -m2 tbf "$tmp/run")"
    fi
  done
  # link_case DESCRIPTION PATTERN... -- RUN-ARGS: every PATTERN on at least
  # 4 lines of `run -v` (both ends of 2 nodes' links).
  link_case() {
    local what=$1 pats=() p ok=1
    shift
    while [ "$1" != -- ]; do pats+=("$1"); shift; done
    shift
    "$G" run -v -np 2 "$@" -- /bin/true >"$tmp/run" 2>&1
    local rc=$?
    [ $rc = 0 ] || ok=0
    for p in "${pats[@]}"; do [ "$(grep -c -- "$p" "$tmp/run")" -ge 4 ] || ok=0; done
    if [ $ok = 1 ]; then
      pass "$what"
    else
      fail "$what: exit $rc: $(grep -m3 -e tbf -e gso "$tmp/run")"
    fi
  }
  # The default link: GSO packets of at most 16 KiB on both ends of every
  # node's veth, and a bucket of one such packet and one more frame.
  link_case "run --net 1gbit: 16384-byte packets, 18000-byte buckets on every link" \
    "tbf rate 1000000000bit burst 18000 " "gso_max_size 16384" -- --net 1gbit
  link_case "run --gso 65536: the bucket follows the packet (67152 bytes)" \
    "tbf rate 1000000000bit burst 67152 " "gso_max_size 65536" -- --net 1gbit --gso 65536
  link_case "run --burst 70000: every link's bucket is 70000 bytes" \
    "tbf rate 100000000bit burst 70000 " -- --net 100mbit --burst 70000
else
  echo "SKIP run --net (needs root and tc)"
fi

# plan --cost FILE: a file as gs_cost_save writes it, for 4 ranks on 4 nodes,
# with the 10gbit preset's numbers (one alpha and beta; the calibrated
# 1gbit preset's per-cluster rows and engine cost are not a cost file's).
cat >"$tmp/cost.json" <<'J'
{"ranks": 4, "nodes": 4, "alpha": 2.5e-5, "beta": 9.4117647058823527e-10, "alpha_local": 1e-6,
 "beta_local": 2e-10, "gamma": 2e-10, "fit": {}}
J
"$G" plan --profile "$prof" --workers 4 --cost "$tmp/cost.json" --json >"$tmp/d" 2>&1
rc=$?
if [ $rc = 0 ] && cmp -s "$tmp/d" "$tmp/plan_10gbit"; then
  pass "plan --cost (the 10gbit preset's numbers) = plan --net 10gbit"
elif [ $rc = 0 ]; then
  fail "plan --cost differs from --net 10gbit: $(diff "$tmp/d" "$tmp/plan_10gbit" | head -c 300)"
else
  fail "plan --cost: exit $rc: $(head -c 300 "$tmp/d")"
fi
"$G" plan --profile "$prof" --workers 8 --cost "$tmp/cost.json" >"$tmp/e" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "measured on 4 ranks" "$tmp/e"; then
  pass "plan --cost on another cluster: exit 2, says where it was measured"
else
  fail "plan --cost --workers 8: exit $rc: $(head -c 300 "$tmp/e")"
fi
"$G" plan --profile "$prof" --workers 4 --cost "$tmp/cost.json" --net 1gbit >"$tmp/e" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "either --net or --cost" "$tmp/e"; then pass "--net with --cost refused"
else fail "--net with --cost: exit $rc"; fi
"$G" plan --profile "$prof" --workers 4 --cost "$tmp/missing.json" >"$tmp/e" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "missing.json" "$tmp/e"; then pass "--cost missing file: exit 2, named"
else fail "--cost missing file: exit $rc"; fi

[ $failures = 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all passed"
