#!/usr/bin/env bash
# prfaas-sim run --log-level: the simulated nodes' logs on stderr, each line stamped with
# virtual seconds; nothing of them without it. Usage: log_level.sh PRFAAS_SIM SOURCE_DIR
set -euo pipefail
sim=$1
cd "$2"
args=(run --config configs/sim/replan-shift.yaml --seed 1 --rate 2 --duration 40
      --output-tokens 64 --json /dev/null)

quiet=$("$sim" "${args[@]}" 2>&1 >/dev/null)
if grep -q 'node=' <<<"$quiet"; then
  echo "FAIL: node logs without --log-level:"
  head -5 <<<"$quiet"
  exit 1
fi

logs=$("$sim" "${args[@]}" --log-level info 2>&1 >/dev/null)
# The re-planner runs every 10 virtual seconds from the first interval on: its decisions
# at t=20, 30 and 40 (the first interval only gathers).
for t in 20 30 40; do
  if ! grep -qE "^t=${t}\.[0-9]{3} (info|warning) node=gw0 inc=1 scheduler_replan reason=" <<<"$logs"; then
    echo "FAIL: no scheduler_replan line stamped t=${t}.xxx; the first lines were:"
    head -20 <<<"$logs"
    exit 1
  fi
done
# Every node line is stamped with virtual time, and the stamps never go back.
if grep 'node=' <<<"$logs" | grep -qvE '^t=[0-9]+\.[0-9]{3} '; then
  echo "FAIL: a node line without its virtual time:"
  grep 'node=' <<<"$logs" | grep -vE '^t=[0-9]+\.[0-9]{3} ' | head -3
  exit 1
fi
if ! grep -oE '^t=[0-9]+\.[0-9]{3}' <<<"$logs" | cut -c3- | sort -c -g; then
  echo "FAIL: virtual time stamps out of order"
  exit 1
fi
# warn hides the info lines (held re-plans) and keeps the warnings.
warn=$("$sim" "${args[@]}" --log-level warn 2>&1 >/dev/null)
if grep -q ' info node=' <<<"$warn"; then
  echo "FAIL: info lines at --log-level warn"
  exit 1
fi
if "$sim" "${args[@]}" --log-level loud >/dev/null 2>&1; then
  echo "FAIL: --log-level loud was accepted"
  exit 1
fi
echo "ok: $(grep -c 'node=' <<<"$logs") node lines at info, stamped in virtual time"
