#!/usr/bin/env bash
# gradsync bench --link: each size gets one 'link' row (plain MPI_Sendrecv of
# the collective's bus bytes, every rank to the next at once), measured
# first; every other row's link_share is the link's time over its own; the
# text table has the of_link column. For allreduce, alltoall and alltoallv
# (bus factors 2(p-1)/p and (p-1)/p; alltoallv's blocks through the v
# interface, checked as alltoall's) on 3 ranks, and the link row's size is
# the row's.
# Usage: test_bench_link.sh GRADSYNC MPIEXEC
set -u
gs=$1
mpiexec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GRADSYNC_CALIBRATE=0
python=/usr/bin/python3
[ -x "$python" ] || python=python3
fails=0
for op in allreduce alltoall alltoallv; do
  if ! "$mpiexec" -np 3 --oversubscribe "$gs" bench --op "$op" --link --json \
       --min-bytes 4K --max-bytes 64K --iters 3 --no-calibrate >"$tmp/$op.jsonl" 2>"$tmp/err"; then
    echo "FAIL $op: bench --link exited non-zero: $(tail -3 "$tmp/err")"
    fails=$((fails + 1))
    continue
  fi
  if ! "$python" - "$tmp/$op.jsonl" "$op" <<'PY'; then
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"op"' in l]
op = sys.argv[2]
by = {}
for r in rows:
    by.setdefault(r["bytes"], []).append(r)
assert len(by) == 3, f"expected 3 sizes, got {sorted(by)}"
for size, rs in sorted(by.items()):
    assert rs[0]["algo"] == "link", f"{size}: first row is {rs[0]['algo']}, not link"
    links = [r for r in rs if r["algo"] == "link"]
    assert len(links) == 1, f"{size}: {len(links)} link rows"
    link = links[0]
    assert link["check"] == "none" and "speedup_vs_mpi" not in link, link
    assert link["op"] == op and link["busbw_GBps"] > 0, link
    assert abs(link["link_share"] - 1) < 1e-3, link
    others = rs[1:]
    assert {r["algo"] for r in others} >= {"mpi", "auto"}, [r["algo"] for r in others]
    for r in others:
        assert r["check"] == "ok", r
        want = link["time_us"] / r["time_us"]
        assert abs(r["link_share"] - want) <= 2e-3 * want + 1e-4, (r, want)
print(f"ok   {op}: {len(rows)} rows, a link row first in each of {len(by)} sizes")
PY
    echo "FAIL $op: rows of --link"
    fails=$((fails + 1))
  fi
done
# The table: the column and the link row with '-' for vs_mpi.
if "$mpiexec" -np 2 --oversubscribe "$gs" bench --link --algo ring --min-bytes 4K \
     --max-bytes 4K --iters 2 --no-calibrate >"$tmp/table" 2>&1 &&
   grep -q ' of_link$' "$tmp/table" &&
   grep -Eq '^ +4096  link .* - .* 100%$' "$tmp/table" &&
   grep -Eq '^ +4096  ring .*%$' "$tmp/table"; then
  echo "ok   the table has of_link and the link row"
else
  echo "FAIL the table of --link:"; cat "$tmp/table"
  fails=$((fails + 1))
fi
# Without --link nothing changes: no link row, no link_share.
if "$mpiexec" -np 2 --oversubscribe "$gs" bench --json --algo ring --min-bytes 4K \
     --max-bytes 4K --iters 2 --no-calibrate >"$tmp/plain" 2>&1 &&
   ! grep -q '"link' "$tmp/plain" && grep -q '"algo":"ring"' "$tmp/plain"; then
  echo "ok   no link row without --link"
else
  echo "FAIL without --link:"; cat "$tmp/plain"
  fails=$((fails + 1))
fi
exit $((fails > 0))
