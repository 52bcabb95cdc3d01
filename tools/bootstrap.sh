#!/usr/bin/env bash
# Installs every Debian package prfaas needs to build, test and run.
# Idempotent: when every package is already installed it does nothing (no apt-get update).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  # the stack (DESIGN.md §1)
  libcaf-dev libprotobuf-dev protobuf-compiler libzmq3-dev cppzmq-dev
  libspdlog-dev catch2 libyaml-cpp-dev libcpp-httplib-dev prometheus-cpp-dev
  libxxhash-dev libcli11-dev nlohmann-json3-dev libssl-dev zlib1g-dev libjemalloc-dev
  # tests and tools: real HTTP clients, namespaces, link emulation, blackholes, plots
  curl iproute2 nftables procps gnuplot-nox python3
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#packages[@]} packages present"
  exit 0
fi

echo "bootstrap: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "bootstrap: done"
