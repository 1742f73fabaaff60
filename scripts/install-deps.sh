#!/usr/bin/env bash
# Installs what gradsync needs from Debian's packages, if missing.
# Usage: scripts/install-deps.sh [--with-torch]
#   --with-torch also installs PyTorch (CPU) and torchvision, used by the
#   profiler tool, the PyTorch peers of some benchmarks and the Python
#   binding's tests and examples (python3-dev and python3-numpy, which the
#   binding builds against, are always installed).
set -euo pipefail

pkgs=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libcjson-dev
      libcmocka-dev libopenblas-dev liblapacke-dev libdnnl-dev zlib1g-dev iproute2 procps
      dataset-fashion-mnist python3-dev python3-numpy gnuplot-nox
      openssh-client openssh-server libglpk-dev)
for arg in "$@"; do
  case "$arg" in
    --with-torch) pkgs+=(python3-torch python3-torchvision) ;;
    *) echo "install-deps: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
