# shellcheck shell=bash
# Shared by every benchmark driver (source it; it is not run on its own).
#
# Every file a driver writes under bench/results/ says what it measured: the
# commit, whether the tree was clean, the date, the driver's command line,
# the exact command that produced the file, and the machine (CPU, cores,
# kernel, Open MPI, compiler, load). bench_init records these once at the
# start; bench_stamp writes them into a result file in the file's own format:
#
#   .jsonl  a first line {"stamp": {...}} (the summarizers skip it)
#   .json   a "stamp" key first in the top-level object
#   .md     a quoted block after the title, between <!-- bench stamp --> marks
#   .txt    leading "# key: value" lines
#
# Stamping again replaces the old stamp. A tree with uncommitted changes to
# tracked files (bench/results/ aside, which the drivers rewrite) is refused,
# since its results could not be reproduced from a commit; BENCH_ALLOW_DIRTY=1
# runs anyway and marks every file "DIRTY".
#
# Settings every driver honours:
#   BENCH_OUT=DIR        where result files go (default bench/results)
#   BENCH_BUILD=DIR      the build directory (default build)
#   BENCH_QUICK=1        a short smoke run of the same steps (recorded)
#   BENCH_ALLOW_DIRTY=1  measure a tree with uncommitted changes (recorded)
#   BENCH_COPY_OF=SHA    this tree is a copy without .git of a clean checkout
#                        of SHA (bench/device/run.sh on the lent machine)
#   BENCH_PREBUILT=1     use the build directory's binaries as they are
#                        (built elsewhere from the same commit; recorded)

# bench_init DRIVER [ARGS...]: call first, with "$0" "$@". Moves to the
# repository's root, checks the tree and records the environment.
bench_init() {
  local driver
  driver=$(realpath "$1")
  shift
  # (the repository's root is where bench/lib.sh is, .git or none)
  cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
  BENCH_OUT=${BENCH_OUT:-bench/results}
  BENCH_BUILD=${BENCH_BUILD:-build}
  BENCH_QUICK=${BENCH_QUICK:-0}
  mkdir -p "$BENCH_OUT"
  local rel
  rel=$(realpath --relative-to=. "$driver")
  BENCH_S_DRIVER=$(printf '%q ' "$rel" "$@")
  BENCH_S_DRIVER=${BENCH_S_DRIVER% }
  [ "$BENCH_QUICK" = 1 ] && BENCH_S_DRIVER="BENCH_QUICK=1 $BENCH_S_DRIVER"
  [ "${BENCH_PREBUILT:-0}" = 1 ] && BENCH_S_DRIVER="BENCH_PREBUILT=1 $BENCH_S_DRIVER"
  BENCH_S_STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  BENCH_S_COMMIT=$(git rev-parse HEAD 2>/dev/null || echo unknown)
  local changes=
  if [ "$BENCH_S_COMMIT" != unknown ]; then
    changes=$(git status --porcelain --untracked-files=no -- . ':(exclude)bench/results' 2>&1)
  elif [ -n "${BENCH_COPY_OF:-}" ]; then
    BENCH_S_COMMIT=$BENCH_COPY_OF
    BENCH_S_DRIVER="BENCH_COPY_OF=$BENCH_COPY_OF $BENCH_S_DRIVER"
  else
    changes="not a git checkout"
  fi
  BENCH_S_CLEAN=1
  if [ -n "$changes" ]; then
    BENCH_S_CLEAN=0
    if [ "${BENCH_ALLOW_DIRTY:-0}" != 1 ]; then
      echo "bench: the tree has uncommitted changes; results must come from a commit:" >&2
      printf '%s\n' "$changes" | sed 's/^/  /' | head -20 >&2
      echo "bench: commit them, or set BENCH_ALLOW_DIRTY=1 to measure anyway (marked DIRTY)" >&2
      exit 2
    fi
    echo "bench: WARNING: uncommitted changes; every result file is marked DIRTY" >&2
  fi
  BENCH_S_CPU=$(LC_ALL=C lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
  [ -n "$BENCH_S_CPU" ] || BENCH_S_CPU=$(sed -n 's/^model name\t*: //p' /proc/cpuinfo | head -1)
  BENCH_S_CORES=$(nproc)
  BENCH_S_KERNEL=$(uname -sr)
  BENCH_S_MPI=$(mpirun --version 2>/dev/null | head -1)
  BENCH_S_CC=$(cc --version 2>/dev/null | head -1)
  export BENCH_OUT BENCH_BUILD BENCH_QUICK BENCH_S_DRIVER BENCH_S_STARTED BENCH_S_COMMIT \
    BENCH_S_CLEAN BENCH_S_CPU BENCH_S_CORES BENCH_S_KERNEL BENCH_S_MPI BENCH_S_CC
}

# bench_build TARGET...: brings the build directory up to date with the tree,
# so that what runs is what the stamp's commit says. Refuses a build
# directory configured from another source tree.
bench_build() {
  local src
  if [ "${BENCH_PREBUILT:-0}" = 1 ]; then
    echo "bench: BENCH_PREBUILT=1: using the binaries in $BENCH_BUILD as they are" >&2
    return 0
  fi
  # (a build directory not configured yet has no cache: sed fails, and
  # under set -e that must not end the driver)
  src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BENCH_BUILD/CMakeCache.txt" \
        2>/dev/null || true)
  if [ -z "$src" ]; then
    cmake -S . -B "$BENCH_BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null || {
      echo "bench: configuring $BENCH_BUILD failed (cmake -S . -B $BENCH_BUILD)" >&2
      exit 2
    }
  elif [ "$(cd "$src" && pwd -P)" != "$(pwd -P)" ]; then
    echo "bench: $BENCH_BUILD was configured from $src, not from $(pwd -P)" >&2
    exit 2
  fi
  local t args=()
  for t in "$@"; do args+=(--target "$t"); done
  cmake --build "$BENCH_BUILD" -j"$(nproc)" "${args[@]}" >/dev/null || {
    echo "bench: building ${*} in $BENCH_BUILD failed" >&2
    exit 2
  }
}

# bench_stamp FILE COMMAND: stamps FILE (see the top) with the environment
# recorded by bench_init and COMMAND, the exact command that produced it.
bench_stamp() {
  BENCH_S_COMMAND=$2 BENCH_S_LOAD=$(cut -d' ' -f1-3 /proc/loadavg) \
    BENCH_S_DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) python3 - "$1" <<'PY' || exit 2
import json, os, sys

path = sys.argv[1]
e = lambda k: os.environ.get("BENCH_S_" + k, "")
stamp = {
    "commit": e("COMMIT"), "clean": e("CLEAN") == "1", "date": e("DATE"),
    "started": e("STARTED"), "driver": e("DRIVER"), "command": e("COMMAND"),
    "quick": os.environ.get("BENCH_QUICK") == "1",
    "env": {"cpu": e("CPU"), "cores": int(e("CORES") or 0), "kernel": e("KERNEL"),
            "mpi": e("MPI"), "compiler": e("CC"), "loadavg": e("LOAD")},
}
with open(path) as f:
    text = f.read()
if path.endswith(".jsonl"):
    lines = [l for l in text.splitlines(True) if not l.startswith('{"stamp"')]
    text = json.dumps({"stamp": stamp}) + "\n" + "".join(lines)
elif path.endswith(".json"):
    obj = json.loads(text)
    obj.pop("stamp", None)
    text = json.dumps({"stamp": stamp, **obj}, indent=2) + "\n"
elif path.endswith(".md"):
    begin, end = "<!-- bench stamp -->", "<!-- /bench stamp -->"
    if begin in text and end in text:
        text = text[:text.index(begin)] + text[text.index(end) + len(end):].lstrip("\n")
    env = stamp["env"]
    state = ("clean tree" if stamp["clean"]
             else "**DIRTY tree: uncommitted changes, not reproducible from this commit**")
    block = (f"{begin}\n> Measured at commit `{stamp['commit']}` ({state}) on {stamp['date']}"
             f"{' (QUICK smoke run: not for comparison)' if stamp['quick'] else ''}.\\\n"
             f"> Driver: `{stamp['driver']}`\\\n"
             f"> Command: `{stamp['command']}`\\\n"
             f"> Environment: {env['cpu']}, {env['cores']} cores, {env['kernel']}, "
             f"{env['mpi']}, {env['compiler']}, load {env['loadavg']}.\n{end}\n\n")
    lines = text.splitlines(True)
    if lines and lines[0].startswith("# "):
        rest = "".join(lines[1:]).lstrip("\n")
        text = lines[0] + "\n" + block + rest
    else:
        text = block + text
else:
    lines = [l for l in text.splitlines(True) if not l.startswith("# stamp ")]
    head = [f"# stamp {k}: {json.dumps(v) if isinstance(v, (bool, int)) else v}\n"
            for k, v in stamp.items() if k != "env"]
    head += [f"# stamp env.{k}: {v}\n" for k, v in stamp["env"].items()]
    text = "".join(head) + "".join(lines)
with open(path, "w") as f:
    f.write(text)
PY
}

# bench_tag_json KEY VALUE [KEY VALUE...]: copies the JSON-object lines of
# stdin to stdout, each with "KEY": "VALUE" added (a driver's loop
# variables, such as the link rate, which the program does not know); other
# lines are dropped.
bench_tag_json() {
  python3 -c '
import json, sys
tags = dict(zip(sys.argv[1::2], sys.argv[2::2]))
for line in sys.stdin:
    if line.startswith("{"):
        row = json.loads(line)
        row.update(tags)
        print(json.dumps(row), flush=True)' "$@"
}

# bench_quote COMMAND...: prints COMMAND quoted as a shell would need it (for
# bench_stamp), without running it.
bench_quote() {
  local q
  q=$(printf '%q ' "$@")
  printf '%s\n' "${q% }"
}
