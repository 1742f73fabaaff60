#!/usr/bin/env bash
# cmake --install puts the package where the documented PYTHONPATH finds it,
# and its extension finds the installed libgradsync (relative RPATH), for a
# prefix chosen at install time. Usage: test_install.sh BUILD_DIR PYTHON PYDIR
set -euo pipefail
build=$1 py=$2 pydir=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cd "$tmp"
PYTHONPATH="$tmp/prefix/$pydir" "$py" -c '
import gradsync, gradsync._C as c, sys
assert gradsync.__file__.startswith(sys.argv[1]), gradsync.__file__
assert issubclass(gradsync.GradsyncError, RuntimeError)
print("installed package:", gradsync.__file__, "extension:", c.__file__)' "$tmp/prefix"

# Without PyTorch (sys.modules["torch"] = None makes "import torch" fail as
# on an interpreter without it), gradsync imports, and gradsync.torch fails
# with a ModuleNotFoundError that says what to install and what still works.
PYTHONPATH="$tmp/prefix/$pydir" "$py" -c '
import sys
sys.modules["torch"] = None
import gradsync
try:
    import gradsync.torch
except ModuleNotFoundError as e:
    msg = str(e)
    assert e.name == "torch", e.name
    for want in ("needs PyTorch", "scripts/install-deps.sh --with-torch",
                 "work without it"):
        assert want in msg, f"{want!r} not in: {msg}"
    print("without torch:", msg)
else:
    raise SystemExit("FAIL: gradsync.torch imported without torch")'
