#!/usr/bin/env bash
# Fetches, verifies and builds the pinned llama.cpp once into a cache outside the work
# tree, and prints the folder CMake reads it from (-DPRFAAS_LLAMA_DIR).
#
# Debian 12 does not package llama.cpp. The npm registry carries it inside the package
# node-llama-cpp, as the git bundle of the llama.cpp release that package binds
# (llama/gitRelease.bundle). We fetch that one tarball with `npm pack`, check it against
# the pinned sha512, clone the bundle and build the CPU backend as shared libraries plus
# llama-server and llama-bench (for the side-by-side benchmark). Nothing is installed
# outside the cache; no download other than the npm registry.
#
# Built without llamafile's tinyBLAS (-DGGML_LLAMAFILE=OFF): ggml uses it for every
# matrix product of two or more columns and its own dot products for one, and the two
# add in different orders, so a sequence decoded in a batch of two got logits ~1e-4
# away from the same sequence alone — enough to change a sampled token. Without it a
# sequence's tokens do not depend on what it is batched with (docs/llama.md,
# "Batch invariance"); prompt processing and decode speed were unchanged within 2% on
# the bench model (F16) with llama-bench.
#
# The pin (bump all three together; see docs/llama.md "Bumping llama.cpp"):
#   PIN_VERSION    node-llama-cpp version       (npm view node-llama-cpp version)
#   PIN_INTEGRITY  its tarball's dist.integrity (npm view node-llama-cpp@V dist.integrity)
#   PIN_RELEASE    the release its bundle holds (package/llama/binariesGithubRelease.json)
#
# The cache: ${PRFAAS_CACHE:-/var/cache/prfaas} (root) or ~/.cache/prfaas, one folder per
# pin and machine (the build is -march=native: a CPU with other flags gets its own), with
# a `complete` stamp written last, so an interrupted build is redone, never half-used.
# PRFAAS_LLAMA_CUDA=1 adds the CUDA backend where nvcc exists (nothing in the tests needs it).
#
#   tools/llama-cpp.sh            build if needed, print the folder
#   tools/llama-cpp.sh --dir      print the folder it would use (no build)
set -euo pipefail

PIN_VERSION=3.22.1
PIN_INTEGRITY='sha512-bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw=='
PIN_RELEASE=v0.5.0

if [ "$(id -u)" -eq 0 ]; then default_cache=/var/cache/prfaas; else default_cache=$HOME/.cache/prfaas; fi
cache=${PRFAAS_CACHE:-$default_cache}
cuda=0
if [ "${PRFAAS_LLAMA_CUDA:-0}" = 1 ] && command -v nvcc >/dev/null; then cuda=1; fi
# What the binaries depend on besides the pin: the CPU's flags, the compiler, CUDA or not,
# and how this script lays the build out (layout=2: libraries find each other through
# $ORIGIN, so a cache folder that is moved or restored elsewhere still loads; llamafile=off).
machine_key=$( (grep -m1 '^flags' /proc/cpuinfo || true; c++ --version | head -1; echo "cuda=$cuda"
  echo "layout=2"; echo "llamafile=off") |
  sha256sum | cut -c1-12)
dir="$cache/llama.cpp-$PIN_RELEASE-npm$PIN_VERSION-$machine_key"

if [ "${1:-}" = --dir ]; then echo "$dir"; exit 0; fi
if [ -f "$dir/complete" ]; then echo "$dir"; exit 0; fi

log() { echo "llama-cpp: $*" >&2; }
for tool in npm git cmake ninja c++ openssl; do
  command -v "$tool" >/dev/null || { log "needs $tool (tools/bootstrap.sh installs it)"; exit 1; }
done
started=$(date +%s)
rm -rf "$dir"
mkdir -p "$dir/dl"
log "fetching node-llama-cpp@$PIN_VERSION from the npm registry"
(cd "$dir/dl" && npm pack --silent "node-llama-cpp@$PIN_VERSION" >/dev/null)
tarball="$dir/dl/node-llama-cpp-$PIN_VERSION.tgz"
got="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$got" != "$PIN_INTEGRITY" ]; then
  log "integrity mismatch for node-llama-cpp-$PIN_VERSION.tgz: got $got, pinned $PIN_INTEGRITY"
  exit 1
fi
tar -xzf "$tarball" -C "$dir/dl" package/llama/gitRelease.bundle package/llama/binariesGithubRelease.json
release=$(sed -n 's/.*"release": *"\([^"]*\)".*/\1/p' "$dir/dl/package/llama/binariesGithubRelease.json")
if [ "$release" != "$PIN_RELEASE" ]; then
  log "the bundle holds llama.cpp $release, pinned $PIN_RELEASE"
  exit 1
fi
git -c advice.detachedHead=false clone -q "$dir/dl/package/llama/gitRelease.bundle" "$dir/src"
rm -rf "$dir/dl"

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
log "building llama.cpp $PIN_RELEASE (CPU backend$([ $cuda = 1 ] && echo ' + CUDA'), shared libraries, llama-server, llama-bench)"
cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON -DGGML_NATIVE=ON -DGGML_LLAMAFILE=OFF -DGGML_CUDA=$([ $cuda = 1 ] && echo ON || echo OFF) \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
  >"$dir/configure.log" 2>&1 || { log "configure failed; see $dir/configure.log"; exit 1; }
cmake --build "$dir/build" -j"${PRFAAS_JOBS:-2}" --target llama llama-common llama-server llama-bench \
  >"$dir/build.log" 2>&1 || { log "build failed; see $dir/build.log"; exit 1; }
echo "$PIN_RELEASE npm:node-llama-cpp@$PIN_VERSION built $(date -u +%FT%TZ) in $(( $(date +%s) - started )) s" \
  >"$dir/complete"
log "done in $(( $(date +%s) - started )) s: $dir"
echo "$dir"
