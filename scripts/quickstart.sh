#!/usr/bin/env bash
# Installs what is missing, builds gradsync, and runs the main job: a 4-rank
# allreduce benchmark on an emulated 4-node cluster with 1 Gbit/s links,
# printed as a table against MPI's own allreduce measured in the same run.
# Needs root for the emulated network (network namespaces and tc).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
exec build/gradsync run -np 4 --net 1gbit -- build/gradsync bench --op allreduce \
  --min-bytes 4K --max-bytes 64M "$@"
