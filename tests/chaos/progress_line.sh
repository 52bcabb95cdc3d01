#!/usr/bin/env bash
# prfaas-chaos run's progress line: on a terminal (script(1) gives the run one) a line
# redrawn with the load's seconds, the faults and the requests ended, the fault events
# printed above it. (Piped, the scenario tests of this folder run without a terminal
# and must not show it: their FAIL_REGULAR_EXPRESSION.) Usage: progress_line.sh
# PRFAAS_CHAOS SCENARIO
set -euo pipefail
chaos=$1
scenario=$2
if ! command -v script >/dev/null; then
  echo "SKIP: script(1) is not installed"
  exit 77
fi
set +e
out=$(script -qec "$(printf '%q ' "$chaos" run "$scenario")" /dev/null)
code=$?
set -e
fail() {
  echo "FAIL: $1; the output was:"
  echo "$out"
  exit 1
}
if grep -q '^skipped: ' <<<"$out"; then
  echo "$out"
  exit 77
fi
[ "$code" -eq 0 ] || fail "prfaas-chaos exited $code"
grep -q 'prfaas-chaos progress: load [0-9]*/8 s  faults [0-9] applied, [0-9] undone of 1  requests ended [0-9?]*  ETA [0-9]* s' <<<"$out" ||
  fail "no progress line"
grep -q 'faults 1 applied, 1 undone of 1  requests ended [0-9]' <<<"$out" ||
  fail "the line never showed the fault undone with a request count"
grep -q '^prfaas-chaos: applied kill' <<<"$(tr '\r' '\n' <<<"$out" | sed 's/\x1b\[K//g')" ||
  fail "the fault event is not on a line of its own"
echo "ok: prfaas-chaos draws its progress line on a terminal"
