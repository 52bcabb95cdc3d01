#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole ctest suite.
#   tools/test.sh              everything but the slow soak/chaos sweeps (what CI runs)
#   PRFAAS_SLOW=1 tools/test.sh   also the slow label
# A second, sanitized build (ASan + UBSan) runs the tests labelled `asan`: the code that
# parses untrusted bytes (KV chunks, wire frames, configs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/bootstrap.sh

jobs=${PRFAAS_JOBS:-2}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"

label_args=(-LE slow)
if [ "${PRFAAS_SLOW:-0}" = 1 ]; then label_args=(); fi
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600 "${label_args[@]}"

if [ "${PRFAAS_SKIP_ASAN:-0}" != 1 ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPRFAAS_SANITIZE=ON >/dev/null
  cmake --build build-asan -j"$jobs" --target prfaas_asan_tests
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 600 -L asan -LE slow
fi
