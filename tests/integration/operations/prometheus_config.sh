#!/usr/bin/env bash
# prfaas-node prometheus-config on a deployment file: every node's admin endpoint is a
# target exactly once, labelled with its cluster; promtool (if installed) accepts the
# file; a broken deployment file is refused with a configuration error.
# Usage: prometheus_config.sh PRFAAS_NODE DEPLOYMENT_YAML
set -euo pipefail
node_bin=$1
deployment=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

"$node_bin" prometheus-config --config "$deployment" --interval 2s >"$scratch/prometheus.yml"
cat "$scratch/prometheus.yml"

grep -q '^  scrape_interval: 2s$' "$scratch/prometheus.yml" || { echo "FAIL: interval"; exit 1; }
admins=$(sed -n 's/^ *admin: *\([^ #]*\).*/\1/p' "$deployment")
[ -n "$admins" ] || { echo "FAIL: the deployment file names no admin endpoint"; exit 1; }
for a in $admins; do
  n=$(grep -c "targets: \[\"$a\"\]" "$scratch/prometheus.yml" || true)
  [ "$n" = 1 ] || { echo "FAIL: admin endpoint $a is a target $n times"; exit 1; }
done
targets=$(grep -c 'targets: \[' "$scratch/prometheus.yml")
[ "$targets" = "$(wc -w <<<"$admins")" ] || { echo "FAIL: $targets targets"; exit 1; }
grep -q 'prfaas_cluster: "prfaas"' "$scratch/prometheus.yml" || { echo "FAIL: no cluster label"; exit 1; }

if command -v promtool >/dev/null; then
  promtool check config "$scratch/prometheus.yml"
else
  echo "promtool not installed: the syntax check by Prometheus itself is skipped"
fi

printf 'deployment: broken\nnodes: [{name: a}]\n' >"$scratch/broken.yaml"
if "$node_bin" prometheus-config --config "$scratch/broken.yaml" 2>"$scratch/err"; then
  echo "FAIL: a broken deployment file was accepted"
  exit 1
fi
grep -q 'configuration error' "$scratch/err" || { echo "FAIL: no clear error:"; cat "$scratch/err"; exit 1; }
echo "ok: $targets targets"
