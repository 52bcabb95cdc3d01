#!/usr/bin/env bash
# Installs every Debian package prfaas needs to build, test and run, then builds the
# pinned llama.cpp into its cache (tools/llama-cpp.sh: once per machine and pin).
# Idempotent: when every package is already installed it runs no apt-get at all.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev clang-format
  # the libraries prfaas builds on (what each is for: docs/architecture.md)
  libcaf-dev libprotobuf-dev protobuf-compiler libzmq3-dev cppzmq-dev
  libspdlog-dev catch2 libyaml-cpp-dev libcpp-httplib-dev prometheus-cpp-dev
  libxxhash-dev libcli11-dev nlohmann-json3-dev libssl-dev zlib1g-dev libjemalloc-dev
  libglpk-dev
  # tests and tools: real HTTP clients, namespaces, link emulation, blackholes, plots
  curl iproute2 nftables procps gnuplot-nox python3 iperf3
  # the operator's view, tested for real: a Prometheus server and promtool, a headless
  # browser for the cluster page, python3-yaml for the manifest checks
  prometheus chromium python3-yaml
  # llama.cpp from the npm registry (tools/llama-cpp.sh), a compiler cache outside the
  # tree, and Node.js for the OpenAI SDK test
  npm nodejs git openssl ccache
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# npm and node may come from elsewhere than Debian (a machine's own Node.js); what
# matters is that the commands exist.
for p in npm nodejs; do
  if command -v "${p%js}" >/dev/null 2>&1 || command -v "$p" >/dev/null 2>&1; then
    for i in "${!missing[@]}"; do [ "${missing[$i]}" = "$p" ] && unset 'missing[i]'; done
  fi
done
missing=("${missing[@]}")

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#packages[@]} packages present"
else
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "bootstrap: done"
fi
bash tools/llama-cpp.sh >/dev/null
