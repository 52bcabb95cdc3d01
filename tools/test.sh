#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole ctest suite.
#   tools/test.sh              everything but the slow soak/chaos sweeps (what CI runs)
#   PRFAAS_SLOW=1 tools/test.sh   also the slow label
# A second, sanitized build (ASan + UBSan) runs the tests labelled `asan`: the code that
# parses untrusted bytes (KV chunks, wire frames, configs).
# With clang and libFuzzer present (tools/bootstrap.sh installs both), a third build runs
# each fuzzer in fuzz/ for PRFAAS_FUZZ_SECONDS (default 20) from its seed corpus;
# PRFAAS_SKIP_FUZZ=1 skips that.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/bootstrap.sh

jobs=${PRFAAS_JOBS:-2}
# A compiler cache outside the tree (~/.cache/ccache) makes rebuilds cheap. Its keys use
# paths relative to the checkout and not the build folder, so a fresh clone elsewhere (as
# CI makes) still hits; debug info may then name the folder of the first clone.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build build -j"$jobs"

label_args=(-LE slow)
if [ "${PRFAAS_SLOW:-0}" = 1 ]; then label_args=(); fi
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600 "${label_args[@]}"

if [ "${PRFAAS_SKIP_ASAN:-0}" != 1 ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPRFAAS_SANITIZE=ON "${launcher[@]}" >/dev/null
  cmake --build build-asan -j"$jobs" --target prfaas_asan_tests
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 600 -L asan -LE slow
fi

fuzz_runtime=$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null | head -1 || true)
if [ "${PRFAAS_SKIP_FUZZ:-0}" != 1 ] && command -v clang++ >/dev/null && [ -n "$fuzz_runtime" ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DPRFAAS_FUZZ=ON -DPRFAAS_BUILD_TESTS=OFF "${launcher[@]}" >/dev/null
  cmake --build build-fuzz -j"$jobs" --target fuzz_wire fuzz_http_request fuzz_http_server
  for target in wire http_request http_server; do
    # New inputs go to a scratch folder; the seed corpus in the repository is only read.
    scratch=$(mktemp -d)
    build-fuzz/bin/fuzz_$target -max_total_time="${PRFAAS_FUZZ_SECONDS:-20}" -max_len=4096 \
      -artifact_prefix="$scratch/" -print_final_stats=1 "$scratch" "fuzz/corpus/$target" 2>&1 |
      grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+== ERROR|SUMMARY)' || true
    crashed=$(ls "$scratch"/crash-* "$scratch"/leak-* "$scratch"/timeout-* 2>/dev/null | head -1 || true)
    if [ -n "$crashed" ]; then
      echo "fuzz_$target found an input that fails: $crashed (kept)"
      exit 1
    fi
    rm -rf "$scratch"
  done
fi
