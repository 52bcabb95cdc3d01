#!/usr/bin/env bash
# The nftables example of docs/deployment.md ("A firewall for one node"): nft parses it
# (`nft -c`: checked, not applied), a misspelt copy is refused, and the ports it opens
# are node pd-d0's control, data and admin ports in configs/two-dc/deployment.yaml.
# Exits 77 (skipped) where nft is absent or may not check rulesets here.
# Usage: firewall_example.sh SOURCE_DIR
set -euo pipefail
src=$1
doc=$src/docs/deployment.md
deployment=$src/configs/two-dc/deployment.yaml
node=pd-d0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

awk '/^```nft$/ { on = 1; next } /^```$/ { on = 0 } on' "$doc" >"$scratch/example.nft"
[ -s "$scratch/example.nft" ] || fail "no \`\`\`nft block in $doc"
cat "$scratch/example.nft"

if ! command -v nft >/dev/null; then
  echo "SKIP: nft is not installed (Debian: nftables); the example is not checked"
  exit 77
fi
if ! nft -c -f "$scratch/example.nft" 2>"$scratch/nft.err"; then
  if grep -qi "operation not permitted" "$scratch/nft.err"; then
    echo "SKIP: nft may not check rulesets here: $(cat "$scratch/nft.err")"
    exit 77
  fi
  fail "nft refuses the example: $(cat "$scratch/nft.err")"
fi
echo "ok: nft -c accepts the example"
sed '0,/ accept$/s// acept/' "$scratch/example.nft" >"$scratch/misspelt.nft"
! nft -c -f "$scratch/misspelt.nft" 2>/dev/null || fail "nft -c accepted a misspelt ruleset"

# The node's ports in the deployment file: its entry's control, data and admin lines.
ports=$(awk -v n="$node" '
  /^  - name: / { mine = ($3 == n) }
  mine && /^    (control|data|admin):/ { sub(/.*:/, ""); print }' "$deployment" | sort -n)
[ "$(wc -l <<<"$ports")" = 3 ] || fail "node $node's three ports not found in $deployment: $ports"
opened=$(grep -o 'dport [{ 0-9,]*' "$scratch/example.nft" | grep -o '[0-9]\+' | sort -n -u)
[ "$opened" = "$ports" ] ||
  fail "the example guards ports $(echo $opened), node $node has $(echo $ports)"
echo "ok: the example guards node $node's ports $(echo $ports)"
