#!/usr/bin/env bash
# The data-plane benchmark over a real constrained link: two network namespaces
# joined by a veth pair, `tc tbf` at --rate on both ends (netem is not available
# in this kernel), the `prfaas-bench transfer` server in one namespace and the
# client in the other. Prints the client's figures: payload throughput, link
# utilisation (achieved / rate), raw ZeroMQ over the same link, and control-plane
# round trips while the data plane fills the link.
#
#   tools/netns-bench-transfer.sh [--bench PATH] [--rate 1gbit] [--connections 4]
#                                 [--pace RATE|none] [--chunk BYTES]
#                                 [-- extra prfaas-bench transfer options]
#
# Needs root and network namespaces; where `ip netns add` is refused it prints
# "skipped: <reason>" and exits 0. Everything it creates is removed on exit.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
bench="${PRFAAS_BENCH:-$here/build/bin/prfaas-bench}"
rate=1gbit
connections=4
# Pacing a little under the link keeps the tbf queue short, so control-plane
# round trips that share the link do not wait behind bulk bytes: 930 Mbit/s of
# payload is ~970 Mbit/s on the wire with TCP/IP headers. The pacer releases whole
# chunks, so smaller chunks pace more smoothly: with 4 MiB chunks at 950mbit the
# RTT p99 under load was ~10 ms, with 256 KiB at 930mbit ~2 ms (same utilisation).
pace=930mbit
chunk=262144
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bench) bench=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --pace) pace=$2; shift 2 ;;
    --chunk) chunk=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$bench" ]] || { echo "no prfaas-bench at $bench (build it, or pass --bench PATH)" >&2; exit 2; }

id=$$
ns_src="pfdp-src-$id"
ns_dst="pfdp-dst-$id"
veth_src="pfs$id"
veth_dst="pfd$id"
ip_src=10.213.0.1
ip_dst=10.213.0.2
port=17000
server_pid=""

cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  ip netns del "$ns_src" 2>/dev/null || true
  ip netns del "$ns_dst" 2>/dev/null || true # deleting a namespace removes its veth end
}

if ! err=$(ip netns add "$ns_src" 2>&1); then
  echo "skipped: cannot create a network namespace (ip netns add: ${err:-refused})"
  exit 0
fi
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$ns_dst"
ip link add "$veth_src" type veth peer name "$veth_dst"
ip link set "$veth_src" netns "$ns_src"
ip link set "$veth_dst" netns "$ns_dst"
ip -n "$ns_src" addr add "$ip_src/24" dev "$veth_src"
ip -n "$ns_dst" addr add "$ip_dst/24" dev "$veth_dst"
for ns in "$ns_src" "$ns_dst"; do ip -n "$ns" link set lo up; done
ip -n "$ns_src" link set "$veth_src" up
ip -n "$ns_dst" link set "$veth_dst" up

for pair in "$ns_src:$veth_src" "$ns_dst:$veth_dst"; do
  if ! err=$(ip netns exec "${pair%%:*}" tc qdisc add dev "${pair##*:}" root tbf \
               rate "$rate" burst 256kb latency 20ms 2>&1); then
    echo "skipped: tc tbf is not available ($err)"
    exit 0
  fi
done
echo "link: veth $ns_src ($ip_src) <-> $ns_dst ($ip_dst), tbf rate $rate on both ends"
ip netns exec "$ns_src" tc qdisc show dev "$veth_src"

pace_args=()
[[ "$pace" != none ]] && pace_args=(--pace "$pace")
ip netns exec "$ns_dst" "$bench" transfer --listen "tcp://$ip_dst:$port" --client-host "$ip_src" \
  --connections "$connections" --chunk "$chunk" &
server_pid=$!
ip netns exec "$ns_src" "$bench" transfer --peer-endpoint "tcp://$ip_dst:$port" --client-host "$ip_src" \
  --connections "$connections" --link-rate "$rate" --chunk "$chunk" --repeat 1 "${pace_args[@]}" \
  "${extra[@]}"
