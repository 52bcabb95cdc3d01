#!/usr/bin/env bash
# prfaas-sim's progress line: drawn on a terminal (script(1) gives the run one), absent
# when stderr is piped. Usage: progress_line.sh PRFAAS_SIM SOURCE_DIR
set -euo pipefail
sim=$1
cd "$2"
if ! command -v script >/dev/null; then
  echo "SKIP: script(1) is not installed"
  exit 77
fi
args=(run --config configs/sim/prfaas-pd.yaml --seed 1 --rate 2 --requests 40 --json /dev/null)

on_tty=$(script -qec "$(printf '%q ' "$sim" "${args[@]}")" /dev/null)
if ! grep -q '40/40 requests  virtual [0-9.]* s  [0-9.]*M events/s  ETA 0 s' <<<"$on_tty"; then
  echo "FAIL: no final progress line on a terminal; the output was:"
  echo "$on_tty"
  exit 1
fi

piped=$("$sim" "${args[@]}" 2>&1 | cat)
if grep -q 'ETA' <<<"$piped"; then
  echo "FAIL: a progress line although stderr was piped:"
  echo "$piped"
  exit 1
fi
if ! grep -q '^prfaas-sim: 40 requests' <<<"$piped"; then
  echo "FAIL: the run's summary line is missing when piped:"
  echo "$piped"
  exit 1
fi
# The chaos sweep: one line over its seeds on a terminal, a line per seed when piped.
chaos=(chaos --config configs/sim/chaos.yaml --seed 1 --seeds 2 --json /dev/null)
# (Two seeds leave some probes unfired, so the sweep itself exits 1: not judged here.)
on_tty=$(script -qec "$(printf '%q ' "$sim" "${chaos[@]}")" /dev/null || true)
if ! grep -q '2/2 seeds  virtual [0-9.]* s  [0-9.]*M events/s  ETA 0 s' <<<"$on_tty"; then
  echo "FAIL: no final progress line of the chaos sweep on a terminal; the output was:"
  echo "$on_tty"
  exit 1
fi
piped=$("$sim" "${chaos[@]}" 2>&1 | cat || true)
if grep -q 'ETA' <<<"$piped" || ! grep -q '^seed 2: ' <<<"$piped"; then
  echo "FAIL: piped, the chaos sweep should print a line per seed and no progress line:"
  echo "$piped"
  exit 1
fi
echo "ok: progress line on a terminal, none when piped (run and chaos)"
