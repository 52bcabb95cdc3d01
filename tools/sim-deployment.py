#!/usr/bin/env python3
"""Writes a simulation deployment (the prfaas-node schema) for `prfaas-sim run`.

One node per instance — N_prfaas PrfaaS prefill instances (H200), N_p PD prefill
instances and N_d decode instances (H20) — plus one gateway node with the gateway and
the scheduler, joined by one cross-cluster link. The case-study files in configs/sim/
are made by this script; the header of each says with which arguments.

  tools/sim-deployment.py --prfaas 4 --pd-prefill 3 --decode 5 --policy prfaas \
      --threshold 19400 > configs/sim/prfaas-pd.yaml
"""
import argparse
import shlex
import sys


def link_rates(a, m, n):
    """rates[j][i]: Gbit/s of PD cluster j's link to PrfaaS cluster i (0 = none)."""
    if not a.links:
        return [[a.link_gbit] * m for _ in range(n)]
    rows = [r for r in a.links.split(";")]
    if len(rows) != n:
        sys.exit(f"sim-deployment: --links has {len(rows)} PD clusters, --pd-clusters says {n}")
    rates = []
    for j, r in enumerate(rows):
        try:
            row = [float(x) for x in r.split(",")]
        except ValueError:
            sys.exit(f"sim-deployment: --links: PD cluster {j}: not numbers: {r!r}")
        if len(row) != m or any(x < 0 for x in row):
            sys.exit(f"sim-deployment: --links: PD cluster {j} needs {m} rates >= 0, got {r!r}")
        rates.append(row)
    return rates


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="sim")
    ap.add_argument("--prfaas", type=int, default=4, help="PrfaaS prefill instances (H200)")
    ap.add_argument("--pd-prefill", type=int, default=3, help="PD-P instances (H20)")
    ap.add_argument("--decode", type=int, default=5, help="PD-D instances (H20)")
    ap.add_argument("--gateways", type=int, default=1, help="gateway + scheduler nodes")
    ap.add_argument("--prfaas-nodes", type=int, default=0,
                    help="nodes the PrfaaS instances share (0 = one node each); a link monitor "
                         "sees only its own node's transfers")
    ap.add_argument("--per-node", type=int, default=1,
                    help="PD prefill and decode instances per node (a host with that many "
                         "instances; fewer nodes means fewer all-to-all heartbeats)")
    ap.add_argument("--kv-content", default="tokens", choices=["tokens", "zeros"],
                    help="KV payload bytes: derived from the tokens, or zeros of the right size "
                         "(only sizes count in a simulation; zeros skip per-token work)")
    ap.add_argument("--policy", default="prfaas")
    ap.add_argument("--threshold", type=int, default=19400)
    ap.add_argument("--offload", default="threshold", choices=["threshold", "cost"],
                    help="prfaas policy: offload by the length threshold or by expected time")
    ap.add_argument("--link-gbit", type=float, default=100)
    ap.add_argument("--max-batch", type=int, default=20)
    ap.add_argument("--kv-scale", default="0.0001")
    ap.add_argument("--cache-blocks", type=int, default=0)
    ap.add_argument("--load-interval", default="100ms")
    ap.add_argument("--heartbeat", default="1s")
    ap.add_argument("--link-monitors", action="store_true",
                    help="a link monitor at each end feeding the scheduler")
    ap.add_argument("--directory", action="store_true",
                    help="a KV directory on the gateway node; workers announce, the scheduler asks")
    ap.add_argument("--event-steps", type=int, default=1,
                    help="decode steps whose tokens go out in one message")
    ap.add_argument("--layers-per-push", type=int, default=1,
                    help="layers whose KV chunks a prefill worker sends in one data-plane message")
    ap.add_argument("--convertible", type=int, default=0,
                    help="more PD nodes, each with a prefill and a decode worker of which one is "
                         "on standby: the nodes the long-term controller may convert")
    ap.add_argument("--convertible-prefill", type=int, default=0,
                    help="how many of the convertible nodes start serving prefill (the rest decode)")
    ap.add_argument("--scheduler", default="",
                    help="more scheduler parameters, as YAML flow pairs "
                         "(e.g. 'replan_interval: 10s, convert_interval: 5s')")
    ap.add_argument("--prfaas-clusters", type=int, default=1,
                    help="PrfaaS clusters (prfaas0, prfaas1, ...), each with --prfaas instances")
    ap.add_argument("--pd-clusters", type=int, default=1,
                    help="PD clusters (pd0, pd1, ...), each with its own gateway and scheduler "
                         "and --pd-prefill / --decode / --convertible instances")
    ap.add_argument("--links", default="",
                    help="with several clusters: each PD cluster's link rates to each PrfaaS "
                         "cluster in Gbit/s, PD clusters separated by ';' (e.g. "
                         "'100,20;20,5;5,100'; 0 = no link); default --link-gbit for every pair")
    ap.add_argument("--pd-shares", default="",
                    help="with several PD clusters: each one's share (clusters.<name>.share: "
                         "weighted fair queueing at the PrfaaS workers), comma-separated")
    ap.add_argument("--fair-share", choices=["share", "link_rate"], default="share",
                    help="link_rate: weigh each PD cluster at a PrfaaS cluster by the part of "
                         "its link bandwidth that leads there, times its share (fair_share:)")
    a = ap.parse_args()
    if a.convertible_prefill > a.convertible:
        sys.exit("sim-deployment: --convertible-prefill exceeds --convertible")
    if a.prfaas + a.pd_prefill + a.convertible_prefill == 0 or \
            a.decode + a.convertible - a.convertible_prefill == 0:
        sys.exit("sim-deployment: needs at least one prefill and one decode instance")

    out = []
    w = out.append
    w(f"# Made by: tools/sim-deployment.py {shlex.join(sys.argv[1:])}")
    w(f"deployment: {a.name}")
    w(f"failure_detector: {{ interval: {a.heartbeat}, misses: 10, suspect_misses: 5 }}")
    w("transport: { retry_interval: 500ms, request_timeout: 10s }")
    w("model:")
    w("  name: kimi-linear-1t")
    w("  engine: profile")
    w("  profile: ../profiles/kimi-linear-1t-h20.yaml")
    w(f"  kv_scale: {a.kv_scale}")
    if a.kv_content != "tokens":
        w(f"  kv_content: {a.kv_content}")
    w("  block_tokens: 512")
    w("  max_context: 140000")
    multi = a.prfaas_clusters > 1 or a.pd_clusters > 1
    prfaas_names = ([f"prfaas{i}" for i in range(a.prfaas_clusters)] if multi else ["prfaas"]) \
        if a.prfaas else []
    pd_names = [f"pd{j}" for j in range(a.pd_clusters)] if multi else ["pd"]
    rates = link_rates(a, len(prfaas_names), len(pd_names))
    w("clusters:")
    for c in prfaas_names:
        w(f"  {c}: {{ kind: prefill-only }}")
    shares = [int(x) for x in a.pd_shares.split(",")] if a.pd_shares else []
    if shares and len(shares) != len(pd_names):
        sys.exit(f"sim-deployment: --pd-shares has {len(shares)} values for {len(pd_names)} "
                 "PD clusters")
    for j, c in enumerate(pd_names):
        w(f"  {c}: {{ kind: pd, share: {shares[j]} }}" if shares else f"  {c}: {{ kind: pd }}")
    if a.fair_share != "share":
        w(f"fair_share: {a.fair_share}")
    if any(r > 0 for row in rates for r in row):
        w("links:")
        for j, pd in enumerate(pd_names):
            for i, pf in enumerate(prfaas_names):
                if rates[j][i] > 0:
                    w(f"  - {{ between: [{pf}, {pd}], rate: {rates[j][i]:g}gbit, connections: 4 }}")
    w("nodes:")
    port = [7000]

    def node(name, cluster, actors):
        port[0] += 1
        w(f"  - name: {name}")
        w(f"    cluster: {cluster}")
        w(f'    control: "tcp://127.0.0.1:{port[0]}"')
        w(f'    data: "tcp://127.0.0.1:{port[0] + 30000}"')
        w("    actors:")
        for actor in actors:
            w(f"      - {actor}")

    def directory(where):
        return f", directory: {where}" if a.directory else ""

    push = f", layers_per_push: {a.layers_per_push}" if a.layers_per_push != 1 else ""

    monitor = ("{ type: link_monitor, name: %s, peer_cluster: %s, probe_interval: 500ms, "
               "publish_interval: 1s%s }")
    offload = f"offload: {a.offload}, " if a.offload != "threshold" else ""
    per = max(1, a.per_node)
    # Node names: as ever with one cluster of each kind; prefixed by the cluster with more.
    pre = (lambda c: f"{c}-") if multi else (lambda c: "")
    dir_node = f"{pre(pd_names[0])}gw0/dir"  # one directory for all clusters

    def name(kind, i):  # one instance per node keeps the plain name
        return kind if per == 1 else f"{kind}{i}"

    def monitor_name(peer):
        return f"lm-{peer}" if multi else "lm"

    def emit_prfaas(i):
        pf = prfaas_names[i]
        p = pre(pf)
        nodes = a.prfaas_nodes or a.prfaas
        for k in range(nodes):
            actors = []
            for x in range(k, a.prfaas, nodes):
                actors.append(f"{{ type: prefill_worker, name: pf{x}, max_queue: 1000000, "
                              f"cache_blocks: {a.cache_blocks}{push}{directory(dir_node)}, "
                              "profile: ../profiles/kimi-linear-1t-h200.yaml }")
            if a.link_monitors and k == 0:
                for j, pd in enumerate(pd_names):
                    if rates[j][i] > 0:
                        actors.append(monitor % (monitor_name(pd), pd,
                                                 f", subscribers: {pre(pd)}gw0/sched"))
            node(f"{p}prfaas{k}" if multi else f"prfaas{k}", pf, actors)
    for j, pd in enumerate(pd_names):
        p = pre(pd)
        linked = [pf for i, pf in enumerate(prfaas_names) if rates[j][i] > 0]
        standby = [f"{p}pdx{k}/dec" if k < a.convertible_prefill else f"{p}pdx{k}/pf"
                   for k in range(a.convertible)]
        extra = (f", standby: \"{','.join(standby)}\"" if standby else "") + \
            (f", {a.scheduler}" if a.scheduler else "")
        for g in range(a.gateways):
            actors = [f"{{ type: gateway, name: gw, request_timeout: 3600s, max_inflight: 1000000, "
                      f"max_output_tokens: 16384 }}",
                      f"{{ type: scheduler, name: sched, policy: {a.policy}, "
                      f"threshold: {a.threshold}, {offload}load_interval: {a.load_interval}"
                      f"{directory(dir_node if multi else 'dir')}{extra} }}"]
            if a.directory and j == 0:
                actors.append("{ type: kv_directory, name: dir }")
            if a.link_monitors:
                # With several clusters the PD end reports to its scheduler too: a cut
                # link's far end cannot (the one-cluster files keep their monitors as
                # they were; there the failure detector tells a cut link).
                subs = f", subscribers: {p}gw0/sched" if multi else ""
                for pf in linked:
                    actors.append(monitor % (monitor_name(pf), pf, subs))
            node(f"{p}gw{g}", pd, actors)
        if not multi and prfaas_names:
            emit_prfaas(0)  # the order one cluster of each kind always had
        for k in range(0, a.pd_prefill, per):
            node(f"{p}pdp{k // per}", pd,
                 [f"{{ type: prefill_worker, name: {name('pf', i)}, max_queue: 1000000, "
                  f"cache_blocks: {a.cache_blocks}{push}{directory(dir_node)} }}"
                  for i in range(k, min(k + per, a.pd_prefill))])
        for k in range(0, a.decode, per):
            node(f"{p}dec{k // per}", pd,
                 [f"{{ type: decode_worker, name: {name('dec', i)}, max_batch: {a.max_batch}, "
                  f"max_queue: 1000000, event_steps: {a.event_steps} }}"
                  for i in range(k, min(k + per, a.decode))])
        for k in range(a.convertible):
            node(f"{p}pdx{k}", pd,
                 [f"{{ type: prefill_worker, name: pf, max_queue: 1000000, "
                  f"cache_blocks: {a.cache_blocks}{push}{directory(dir_node)} }}",
                  f"{{ type: decode_worker, name: dec, max_batch: {a.max_batch}, "
                  f"max_queue: 1000000, event_steps: {a.event_steps} }}"])

    if multi:
        for i in range(len(prfaas_names)):
            emit_prfaas(i)
    print("\n".join(out))


if __name__ == "__main__":
    main()
