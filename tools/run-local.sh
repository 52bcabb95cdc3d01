#!/usr/bin/env bash
# Installs what is missing, builds, and starts every node of the embedded default
# deployment (configs/local.yaml) in one process. Extra arguments go to prfaas-node.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/bootstrap.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${PRFAAS_JOBS:-2}" --target prfaas-node
exec build/bin/prfaas-node --config configs/local.yaml --all "$@"
