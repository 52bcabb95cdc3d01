#!/usr/bin/env bash
# Installs what is missing, builds, and starts every node of a deployment in one
# process: the embedded default (configs/local.yaml), or `--config FILE` (e.g.
# configs/llama-local.yaml, a GGUF through llama.cpp). Other arguments go to prfaas-node.
set -euo pipefail
cd "$(dirname "$0")/.."
config=configs/local.yaml
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
bash tools/bootstrap.sh
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build build -j"${PRFAAS_JOBS:-2}" --target prfaas-node prfaas_tiny_models
exec build/bin/prfaas-node --config "$config" --all "${args[@]}"
