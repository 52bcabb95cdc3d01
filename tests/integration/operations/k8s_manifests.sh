#!/usr/bin/env bash
# deploy/kubernetes/ checked by tools/check-k8s-manifests.py (what it checks: its
# docstring), three ways:
#  1. as shipped: consistent with configs/two-dc/deployment.yaml, and every node's start
#     script, run as its pod runs it plus --check, makes prfaas-node refuse the
#     placeholder keys;
#  2. filled by deploy/kubernetes/keys.sh (real keys from prfaas-node keygen): the same,
#     and now prfaas-node --check accepts every node's file;
#  3. doctored copies, one mistake each: the checker must fail and name the mistake.
# Exits 77 (skipped) where python3 has no yaml module.
# Usage: k8s_manifests.sh PRFAAS_NODE SOURCE_DIR
set -euo pipefail
node_bin=$(realpath "$1")
src=$2
if ! python3 -c 'import yaml' 2>/dev/null; then
  echo "SKIP: python3 has no yaml module (Debian: python3-yaml); the manifests are not checked"
  exit 77
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
shipped=$src/deploy/kubernetes
filled=$scratch/filled
check() { python3 "$src/tools/check-k8s-manifests.py" "$1" \
  --reference "$src/configs/two-dc/deployment.yaml" --node-bin "$node_bin"; }

check "$shipped" | tee "$scratch/out"
grep -q "refuses the placeholders" "$scratch/out"

PRFAAS_NODE_BIN=$node_bin bash "$shipped/keys.sh" "$filled"
check "$filled" | tee "$scratch/out"
grep -q "accepts its file" "$scratch/out"
for k in "$filled"/keys/*.key "$filled/11-curve-keys.yaml"; do
  [ "$(stat -c %a "$k")" = 600 ] || { echo "FAIL: $k is mode $(stat -c %a "$k"), not 600"; exit 1; }
done

# doctor BASE WHAT EXPECTED EDIT...: a copy of BASE with EDIT run in it (a shell
# command) must fail the checker with EXPECTED in its report.
failures=0
doctor() {
  local base=$1 what=$2 expected=$3
  shift 3
  rm -rf "$scratch/doc"
  cp -r "$base" "$scratch/doc"
  rm -rf "$scratch/doc/keys"
  (cd "$scratch/doc" && eval "$*")
  if diff -r -q "$base" "$scratch/doc" -x keys >/dev/null; then
    echo "FAIL: doctored ($what): the edit changed nothing"
    failures=$((failures + 1))
  elif check "$scratch/doc" >"$scratch/doc.out" 2>&1; then
    echo "FAIL: doctored ($what): passed the checker"
    failures=$((failures + 1))
  elif ! grep -qF -- "$expected" "$scratch/doc.out"; then
    echo "FAIL: doctored ($what): failed, but without naming \"$expected\":"
    sed 's/^/  /' "$scratch/doc.out"
    failures=$((failures + 1))
  else
    echo "ok: doctored ($what) fails: $(grep -F -- "$expected" "$scratch/doc.out" | head -n 1)"
  fi
}

doctor "$shipped" "a container port" "node pd-gw: container ports" \
  "sed -i 's/containerPort: 7401/containerPort: 7411/' 21-pd-gw.yaml"
doctor "$shipped" "a node without workload" "node pd-d0: 0 workloads run --node pd-d0" \
  "rm 23-pd-d0.yaml"
doctor "$shipped" "two workloads for one node" "node pd-gw: 2 workloads run --node pd-gw" \
  "sed -i 's/\"--node\", \"pd-p0\"/\"--node\", \"pd-gw\"/' 22-pd-p0.yaml"
doctor "$shipped" "a probe on the data port" "readinessProbe must GET /health on the admin port 9300" \
  "sed -i '0,/port: admin }/s//port: data }/' 20-prfaas-0.yaml"
doctor "$shipped" "an address without its Service" "address pd-p0.prfaas.svc names no Service" \
  "sed -i 's/^  name: pd-p0$/  name: pd-p1/' 22-pd-p0.yaml"
doctor "$shipped" "a node mounting another's key" "must be a Secret volume with the one item pd-d0.key" \
  "sed -i 's/key: pd-d0.key, path: pd-d0.key/key: pd-gw.key, path: pd-gw.key/' 23-pd-d0.yaml"
doctor "$shipped" "a port unlike two-dc's" "deployment.yaml.nodes.pd-p0.data is 7412, the reference's is 7402" \
  "sed -i 's|tcp://pd-p0.prfaas.svc:7402|tcp://pd-p0.prfaas.svc:7412|' 10-deployment-file.yaml"
doctor "$shipped" "a scrape annotation" "prometheus.io/port is 9302, node pd-d0's admin port is 9303" \
  "sed -i 's/prometheus.io\/port: \"9303\"/prometheus.io\/port: \"9302\"/' 23-pd-d0.yaml"
doctor "$shipped" "a Service hiding unready pods" "node pd-d0: publishNotReadyAddresses must be true" \
  "sed -i '/publishNotReadyAddresses/d' 23-pd-d0.yaml"
doctor "$shipped" "a pod told the wrong host" "node pd-gw: PRFAAS_HOST is 'pd-p0.prfaas.svc'" \
  "sed -i 's/value: pd-gw.prfaas.svc/value: pd-p0.prfaas.svc/' 21-pd-gw.yaml"
doctor "$shipped" "a gateway on loopback" "which a Service cannot reach" \
  "sed -i 's/listen: 0.0.0.0:8000/listen: 127.0.0.1:8000/' 10-deployment-file.yaml"
doctor "$shipped" "a document without a name" "30-gateway.yaml#0: no metadata.name" \
  "sed -i '/^  name: gateway$/d' 30-gateway.yaml"
doctor "$filled" "two public keys swapped" "node pd-gw: the Secret's key file does not hold" \
  "python3 -c '
import re; s = open(\"10-deployment-file.yaml\").read()
a, b = re.findall(r\"public_key: \\\"([^\\\"]+)\\\"\", s)[:2]
open(\"10-deployment-file.yaml\", \"w\").write(s.replace(a, \"~\").replace(b, a).replace(\"~\", b))'"
doctor "$filled" "a file prfaas-node refuses" "prfaas-node --check refused the file start.sh wrote" \
  "sed -i 's/misses: 5, suspect_misses: 2/misses: 1, suspect_misses: 2/' 10-deployment-file.yaml"
doctor "$filled" "a start script that misses the admin address" "only this node's hosts become its IP" \
  "sed -i 's/(c == \"\\/\" || c == \" \" ? ip : host)/(c == \"\\/\" ? ip : host)/' 10-deployment-file.yaml"

if [ "$failures" != 0 ]; then
  echo "FAIL: $failures doctored copies were not caught as they should be"
  exit 1
fi
echo "ok: the shipped and the filled manifests pass; every doctored copy is caught"
