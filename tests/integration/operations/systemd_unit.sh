#!/usr/bin/env bash
# deploy/systemd/prfaas-node@.service, instantiated as prfaas-node@pd-gw.service:
#  * `systemd-analyze verify` loads it without a warning. verify insists that the
#    ExecStart binary exist, and the unit names the installed one
#    (/usr/local/bin/prfaas-node, where `cmake --install` puts it); the copy verified
#    here runs the built prfaas-node instead, its only change. Two doctored copies
#    show the check can fail: a misspelt directive and a missing binary.
#  * `systemd-analyze security --offline` rates its exposure "OK" or better (below
#    4.0 of 10); the same unit without its hardening does not.
#  * its restart policy matches prfaas-node's exit codes, taken from the binary: no
#    restart after a configuration error, a restart after a runtime failure (an
#    endpoint already in use).
# Works without systemd as PID 1 (systemd-analyze reads unit files offline); exits 77
# (skipped) where systemd-analyze is not installed.
# Usage: systemd_unit.sh PRFAAS_NODE SOURCE_DIR
set -euo pipefail
node_bin=$(realpath "$1")
src=$2
unit=$src/deploy/systemd/prfaas-node@.service
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze is not installed (Debian: systemd); the unit is not checked"
  exit 77
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

installed=$(sed -n 's/^ExecStart=\([^ ]*\) .*/\1/p' "$unit")
[ -n "$installed" ] || fail "no ExecStart= in $unit"
instance=$scratch/prfaas-node@pd-gw.service
sed "s|^ExecStart=$installed |ExecStart=$node_bin |" "$unit" >"$instance"
grep -q "^ExecStart=$node_bin --config .* --node %i$" "$instance" ||
  fail "ExecStart is not '<prfaas-node> --config FILE --node %i': $(grep ^ExecStart "$instance")"

# verify: exit 0 and not a word about the unit. Prints what it said; 0 when clean.
verify() {
  local rc=0
  systemd-analyze verify "$1" >"$scratch/verify.out" 2>&1 || rc=$?
  sed 's/^/  systemd-analyze: /' "$scratch/verify.out"
  [ "$rc" = 0 ] && ! grep -q "$(basename "$1")" "$scratch/verify.out"
}
verify "$instance" || fail "systemd-analyze verify complains about the unit"
echo "ok: systemd-analyze verify accepts $(basename "$instance")"

doctored=$scratch/doctored/prfaas-node@pd-gw.service
mkdir -p "$(dirname "$doctored")"
sed 's/^RestartSec=/RestartSecs=/' "$instance" >"$doctored"
! verify "$doctored" || fail "a misspelt directive (RestartSecs=) went unnoticed"
sed "s|^ExecStart=$node_bin |ExecStart=$scratch/no-such-prfaas-node |" "$instance" >"$doctored"
! verify "$doctored" || fail "a missing ExecStart binary went unnoticed"
echo "ok: a misspelt directive and a missing binary are both caught"

# Exposure: below 40 of 100 ("OK" or better), and not without the hardening block.
systemd-analyze security --offline=yes --threshold=39 "$instance" | tail -n 1 ||
  fail "exposure above OK: $(systemd-analyze security --offline=yes "$instance" | tail -n 1)"
sed '/^# Hardening/,$d' "$instance" >"$doctored"
if systemd-analyze security --offline=yes --threshold=39 "$doctored" >/dev/null 2>&1; then
  fail "the unit without its hardening also passes the exposure check"
fi
echo "ok: exposure OK with the hardening, above OK without it"

# Exit codes, from the binary itself, against the unit's restart policy.
no_restart=" $(sed -n 's/^RestartPreventExitStatus=//p' "$unit") "
grep -q '^Restart=on-failure$' "$unit" || fail "Restart= is not on-failure"
printf 'deployment: broken\nnodes: [{name: a}]\n' >"$scratch/broken.yaml"
rc=0
"$node_bin" --config "$scratch/broken.yaml" --node a 2>/dev/null || rc=$?
[ "$rc" != 0 ] || fail "prfaas-node accepted a broken deployment file"
[[ "$no_restart" == *" $rc "* ]] ||
  fail "a configuration error exits $rc, which RestartPreventExitStatus=$no_restart restarts"
echo "ok: a configuration error exits $rc: no restart"

# A runtime failure: the control endpoint's port is taken (by a listener held here;
# the data endpoint gets a port that was free a moment ago).
exec {hold}< <(exec python3 -c '
import socket, time
held = socket.socket(); held.bind(("127.0.0.1", 0)); held.listen(1)
free = socket.socket(); free.bind(("127.0.0.1", 0)); port = free.getsockname()[1]; free.close()
print(held.getsockname()[1], port, flush=True); time.sleep(60)')
holder=$!
trap 'kill "$holder" 2>/dev/null; rm -rf "$scratch"' EXIT
read -r -u "$hold" taken free
cat >"$scratch/taken.yaml" <<EOF
deployment: taken
nodes:
  - { name: a, control: "tcp://127.0.0.1:$taken", data: "tcp://127.0.0.1:$free" }
EOF
rc=0
timeout 20 "$node_bin" --config "$scratch/taken.yaml" --node a 2>"$scratch/taken.err" || rc=$?
grep -q "cannot bind" "$scratch/taken.err" || fail "no bind failure reported: $(cat "$scratch/taken.err")"
[ "$rc" != 0 ] && [[ "$no_restart" != *" $rc "* ]] ||
  fail "a runtime failure exits $rc, which the unit does not restart"
echo "ok: a runtime failure (endpoint in use) exits $rc: restarted"
