#!/usr/bin/env bash
# Runs configs/two-dc/deployment.yaml across two network namespaces joined by a veth
# pair whose both ends are rate-limited with `tc tbf` — real kernel TCP over a real
# constrained link between "datacenters":
#   dc-a (10.77.0.1): prfaas-0, the PrfaaS prefill cluster
#   dc-b (10.77.0.2): pd-gw (gateway, scheduler), pd-p0, pd-d0 — the PD cluster
#
#   tools/netns-two-dc.sh [--rate 1gbit] [--threshold N]
#       start, print how to reach the gateway, run until Ctrl-C (then clean up)
#   tools/netns-two-dc.sh --probe PROMPT... [--max-tokens N]
#       start, send each prompt (non-streaming, greedy, token ids returned), print one
#       JSON response per line on stdout, clean up, exit 0
#   tools/netns-two-dc.sh --hold FILE
#       start, write the namespaces, veth ends and addresses to FILE (shell
#       assignments: NS_A NS_B VETH_A VETH_B IP_A IP_B RATE) for a test that changes
#       the link while it drives traffic; run until SIGTERM (then clean up)
#   --config FILE   another deployment: its node prfaas-0 goes to dc-a, every other to dc-b
#                   (configs/llama-two-dc.yaml: a GGUF through llama.cpp)
#
# Needs root and a kernel that allows namespaces; where `ip netns add` is refused it
# prints "skipped: <reason>" and exits 77 (ctest's skip code). netem is not needed.
set -euo pipefail
cd "$(dirname "$0")/.."

rate=1gbit
threshold=256
max_tokens=16
probe=()
hold=
mode=run
config=configs/two-dc/deployment.yaml
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --threshold) threshold=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; shift 2 ;;
    --hold) mode=hold; hold=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --probe) mode=probe; shift; while [ $# -gt 0 ] && [[ "$1" != --* ]]; do probe+=("$1"); shift; done ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "netns-two-dc: unknown argument $1" >&2; exit 2 ;;
  esac
done

node_bin=${PRFAAS_NODE:-build/bin/prfaas-node}
[ -x "$node_bin" ] || { echo "netns-two-dc: $node_bin not built (run tools/test.sh or cmake --build build)" >&2; exit 2; }
command -v curl >/dev/null || { echo "netns-two-dc: curl missing (tools/bootstrap.sh installs it)" >&2; exit 2; }

id=$$
ns_a=prfaas-a-$id
ns_b=prfaas-b-$id
veth_a=pfa$id
veth_b=pfb$id
ip_a=10.77.0.1
ip_b=10.77.0.2
work=$(mktemp -d /tmp/prfaas-netns.XXXXXX)
pids=()

cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
  if [ "${PRFAAS_KEEP_LOGS:-0}" = 1 ]; then echo "logs kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! err=$(ip netns add "$ns_a" 2>&1); then
  echo "skipped: cannot create a network namespace: $err"
  exit 77
fi
ip netns add "$ns_b"
ip link add "$veth_a" type veth peer name "$veth_b"
ip link set "$veth_a" netns "$ns_a"
ip link set "$veth_b" netns "$ns_b"
ip -n "$ns_a" addr add $ip_a/24 dev "$veth_a"
ip -n "$ns_b" addr add $ip_b/24 dev "$veth_b"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$veth_a" up
ip -n "$ns_b" link set "$veth_b" up
# The link: a token bucket on each end (each direction), like a leased line.
ip netns exec "$ns_a" tc qdisc add dev "$veth_a" root tbf rate "$rate" burst 256kb latency 50ms
ip netns exec "$ns_b" tc qdisc add dev "$veth_b" root tbf rate "$rate" burst 256kb latency 50ms

# The committed deployment with prfaas-0 on dc-a's address and the PD nodes on dc-b's.
awk -v a="$ip_a" -v b="$ip_b" -v t="$threshold" '
  /^  - name: / { node = $3 }
  { if (node == "prfaas-0") gsub(/127\.0\.0\.1/, a); else gsub(/127\.0\.0\.1/, b) }
  { sub(/ threshold: [0-9]+/, " threshold: " t) }
  { print }' "$config" > "$work/netns.yaml"


start() { # ns node
  ip netns exec "$1" "$node_bin" --config "$work/netns.yaml" --node "$2" >"$work/$2.log" 2>&1 &
  pids+=($!)
}
# Every node of the file: prfaas-0 on dc-a, the others on dc-b. The gateway's node (it
# runs the scheduler too in the committed layouts) is asked when all is up.
nodes=$(awk '/^  - name: /{print $3}' "$config")
gw_admin=$(awk '/^  - name: /{admin=""} /^    admin: /{admin=$2} /type: gateway/{print admin; exit}' "$config" | sed 's/.*://')
gw_http=$(grep -o 'type: gateway.*listen: [0-9.]*:[0-9]*' "$config" | head -1 | sed 's/.*://')
for n in $nodes; do
  if [ "$n" = prfaas-0 ]; then start "$ns_a" "$n"; else start "$ns_b" "$n"; fi
done
peers=$(( $(wc -w <<<"$nodes") - 1 ))

in_b() { ip netns exec "$ns_b" "$@"; }
ready=0
for _ in $(seq 1 600); do
  health=$(in_b curl -s --max-time 1 "http://$ip_b:$gw_admin/health" || true)
  metrics=$(in_b curl -s --max-time 1 "http://$ip_b:$gw_admin/metrics" || true)
  # Every peer up, and the scheduler has heard from a prefill and a decode worker whose
  # engines are built (a real model loads for seconds).
  if [ -n "$health" ] && ! grep -q '"state":"down"\|"state":"suspect"' <<<"$health" \
     && [ "$(grep -o '"state":"up"' <<<"$health" | wc -l)" -ge "$peers" ] \
     && grep -q '^prfaas_scheduler_routable_workers{[^}]*role="decode"[^}]*} [1-9]' <<<"$metrics" \
     && grep -q '^prfaas_scheduler_routable_workers{[^}]*role="prefill"[^}]*} [1-9]' <<<"$metrics"; then
    ready=1; break
  fi
  sleep 0.1
done
if [ $ready -ne 1 ]; then
  echo "netns-two-dc: the deployment did not come up; logs:" >&2
  tail -n 20 "$work"/*.log >&2
  exit 1
fi

model=$(in_b curl -s --max-time 5 "http://$ip_b:$gw_http/v1/models" | sed 's/.*"id":"\([^"]*\)".*/\1/')
if [ "$mode" = probe ]; then
  for p in "${probe[@]}"; do
    body=$(printf '{"model":"%s","prompt":"%s","max_tokens":%d,"temperature":0,"ignore_eos":true,"return_token_ids":true}' "$model" "$p" "$max_tokens")
    in_b curl -s --max-time 60 "http://$ip_b:$gw_http/v1/completions" -H 'Content-Type: application/json' -d "$body"
    echo
  done
  exit 0
fi

if [ "$mode" = hold ]; then
  printf 'NS_A=%s\nNS_B=%s\nVETH_A=%s\nVETH_B=%s\nIP_A=%s\nIP_B=%s\nRATE=%s\nLOGS=%s\n' \
    "$ns_a" "$ns_b" "$veth_a" "$veth_b" "$ip_a" "$ip_b" "$rate" "$work" >"$hold.tmp"
  mv "$hold.tmp" "$hold" # appears whole
fi

echo "two-dc deployment up: dc-a=$ns_a ($ip_a) dc-b=$ns_b ($ip_b), link $rate each way"
echo "try:  ip netns exec $ns_b curl -N http://$ip_b:$gw_http/v1/completions -H 'Content-Type: application/json' \\"
echo "        -d '{\"model\":\"$model\",\"prompt\":\"Hello\",\"max_tokens\":32,\"stream\":true}'"
echo "logs: $work (removed on exit; PRFAAS_KEEP_LOGS=1 keeps them). Ctrl-C stops everything."
wait -n "${pids[@]}" || true
echo "netns-two-dc: a node exited; stopping" >&2
exit 1
