#!/usr/bin/env bash
# Makes a CURVE key pair for every node of the manifests beside this script and writes
# copies of the manifests with the keys filled in, ready for `kubectl apply -f OUT/`:
# each public key in place of its placeholder in the ConfigMap, and a Secret holding
# every node's key file in place of 11-curve-keys.yaml.
#
#   deploy/kubernetes/keys.sh OUT
#
# The nodes are the ones the ConfigMap has placeholders for. Key files go to OUT/keys/
# (mode 0600, written by `prfaas-node keygen`); a node whose key file is already there
# keeps it, so running the script again after editing the manifests changes no key.
# OUT/keys/ and OUT/11-curve-keys.yaml are secret: whoever has a node's key file can
# join the deployment as that node. PRFAAS_NODE_BIN names the prfaas-node to run
# (default: prfaas-node on PATH).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
node_bin=${PRFAAS_NODE_BIN:-prfaas-node}
[ $# = 1 ] || { echo "usage: $0 OUT" >&2; exit 2; }
out=$1
placeholder=REPLACE-WITH-PUBLIC-KEY-OF-
secret=11-curve-keys.yaml

nodes=$(grep -ho "\"$placeholder[A-Za-z0-9_.-]*\"" "$here"/*.yaml | tr -d '"' |
  sed "s/^$placeholder//" | sort -u)
[ -n "$nodes" ] || { echo "keys.sh: no \"$placeholder<node>\" in $here/*.yaml" >&2; exit 1; }
mkdir -p "$out/keys"
chmod 700 "$out/keys"

# Each node's key file (made once) and its public key, as keygen writes it:
# public_key: "<40 Z85 characters>". The table: node TAB public key, one per line.
table="$out/keys/public-keys.tsv"
: >"$table"
for n in $nodes; do
  key="$out/keys/$n.key"
  [ -f "$key" ] || "$node_bin" keygen --node "$n" --out "$key" >/dev/null 2>&1
  pub=$(sed -n 's/^public_key: *"\(.*\)"$/\1/p' "$key")
  [ ${#pub} = 40 ] || { echo "keys.sh: no public_key in $key" >&2; exit 1; }
  printf '%s\t%s\n' "$n" "$pub" >>"$table"
done

# The manifests, each "<placeholder><node>" replaced by that node's key. awk's index()
# and substr(), not sed: a Z85 key may hold & / $ and other characters sed would read.
for f in "$here"/*.yaml; do
  name=$(basename "$f")
  [ "$name" = "$secret" ] && continue
  awk -F '\t' -v p="$placeholder" '
    FNR == NR { key[$1] = $2; next }
    { line = $0; done_ = ""
      while ((i = index(line, "\"" p)) > 0) {
        rest = substr(line, i + 1 + length(p)); j = index(rest, "\"")
        node = substr(rest, 1, j - 1)
        if (!(node in key)) { print "keys.sh: no key for " node > "/dev/stderr"; exit 1 }
        done_ = done_ substr(line, 1, i) key[node]
        line = substr(rest, j)
      }
      print done_ line }' "$table" "$f" >"$out/$name"
done

# The Secret: every node's key file under <node>.key, as 11-curve-keys.yaml names them.
{
  sed -n '/^apiVersion:/,/^stringData:/p' "$here/$secret"
  for n in $nodes; do
    echo "  $n.key: |"
    sed 's/^/    /' "$out/keys/$n.key"
  done
} >"$out/$secret"
chmod 600 "$out/$secret"

if grep -l 'REPLACE-WITH-' "$out"/*.yaml; then
  echo "keys.sh: placeholders left in the files above" >&2
  exit 1
fi
echo "keys.sh: keys for $(echo $nodes | wc -w) nodes ($(echo $nodes)); kubectl apply -f $out/" >&2
