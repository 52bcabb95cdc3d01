#!/usr/bin/env python3
"""Several PrfaaS and PD clusters in simulation: the M x N figures of docs/simulation.md.

Runs one deployment with every gateway's clients at once (`prfaas-sim run --gateway
all`), then each PD cluster alone at its share of the rate (the same deployment, the
same links, the other clusters idle), with the same seed, link outage and workload, and
prints per PD cluster its TTFT against its TTFT alone, and per link the KV it carried
while every link was up against its rate.

  tools/sim-clusters.py --config configs/sim/two-by-three.yaml --rate 6.2 \\
      --duration 600 --link-down 200:60:prfaas0,pd1 --seeds 1 2 3
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import yaml


def run(sim, config, args, out):
    cmd = [sim, "run", "--config", config, "--json", out] + args
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"sim-clusters: {' '.join(cmd)} failed: {res.stderr.strip()[-400:]}")
    with open(out) as f:
        return json.load(f)


def outage_windows(link_downs):
    """[(start, end)] of every --link-down."""
    out = []
    for text in link_downs:
        start, seconds = text.split(":")[:2]
        out.append((float(start), float(start) + float(seconds)))
    return out


def carried_while_up(result, windows):
    """Per PrfaaS -> PD link: mean Gbit/s over the samples outside every outage."""
    ts = result["timeseries"]
    t = ts["t_s"]
    out = {}
    for key, series in ts["links"].items():
        src = key.split("->")[0]
        if not src.startswith("prfaas"):
            continue
        total, span = 0.0, 0.0
        for i, g in enumerate(series["gbps"]):
            t0 = t[i - 1] if i else 0.0
            if any(t0 < e and t[i] > s for s, e in windows):
                continue
            total += g * (t[i] - t0)
            span += t[i] - t0
        out[key] = total / span if span else 0.0
    return out


def link_rates(config):
    with open(config) as f:
        dep = yaml.safe_load(f)
    rates = {}
    for link in dep.get("links", []):
        a, b = link["between"]
        gbit = float(str(link["rate"]).replace("gbit", ""))
        rates[(a, b)] = rates[(b, a)] = gbit
    kinds = {n: c["kind"] for n, c in dep["clusters"].items()}
    gateways = [f"{n['name']}/gw" for n in dep["nodes"]
                if any(a["type"] == "gateway" for a in n.get("actors", []))]
    return rates, kinds, gateways, {n["name"]: n["cluster"] for n in dep["nodes"]}


def one_seed(a, seed, tmp):
    rates, kinds, gateways, cluster_of = link_rates(a.config)
    common = ["--rate", str(a.rate), "--duration", str(a.duration), "--seed", str(seed),
              "--output-tokens", str(a.output_tokens)]
    for d in a.link_down:
        common += ["--link-down", d]
    both = run(a.sim, a.config, common + ["--gateway", "all"], os.path.join(tmp, f"all-{seed}.json"))
    alone = {}
    for gw in gateways:
        args = list(common)
        args[1] = str(a.rate / len(gateways))
        r = run(a.sim, a.config, args + ["--gateway", gw], os.path.join(tmp, f"{gw.replace('/', '_')}-{seed}.json"))
        alone[cluster_of[gw.split("/")[0]]] = r["summary"]["ttft_ms"]["mean"]
    return both, alone, rates, kinds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--sim", default="build/bin/prfaas-sim")
    ap.add_argument("--rate", type=float, required=True, help="total req/s over all PD clusters")
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--output-tokens", type=int, default=1024)
    ap.add_argument("--link-down", action="append", default=[], help="START:SECONDS:A,B")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in a.seeds:
            both, alone, rates, kinds = one_seed(a, seed, tmp)
            carried = carried_while_up(both, outage_windows(a.link_down))
            print(f"seed {seed}: {both['summary']['requests']['ok']} of "
                  f"{both['summary']['issued']} requests ok")
            print("  PD cluster  requests  offloaded  mean TTFT (s)  alone (s)  ratio   prefilled in")
            fig = {"seed": seed, "clusters": {}, "links": {}, "outages": both.get("link_outages", [])}
            for c, v in sorted(both["by_cluster"].items()):
                mean = v["ttft_ms"]["mean"] / 1e3
                ratio = mean / (alone[c] / 1e3)
                where = ", ".join(f"{k} {n}" for k, n in sorted(v["prefill_clusters"].items()))
                print(f"  {c:10}  {v['requests']:8}  {v['routes'].get('prfaas', 0):9}  "
                      f"{mean:13.2f}  {alone[c] / 1e3:9.2f}  {ratio:5.2f}   {where}")
                fig["clusters"][c] = {"mean_ttft_s": mean, "alone_mean_ttft_s": alone[c] / 1e3,
                                      "ratio": ratio, "prefill_clusters": v["prefill_clusters"]}
            print("  link (PrfaaS -> PD)    rate (Gbit/s)  carried while all up (Gbit/s)  "
                  "share of the PD cluster's offload KV  share of its link rate")
            by_pd = {}
            for key, g in carried.items():
                src, dst = key.split("->")
                by_pd.setdefault(dst, {})[src] = g
            for dst, srcs in sorted(by_pd.items()):
                total = sum(srcs.values())
                rate_total = sum(rates.get((s, dst), 0) for s in srcs)
                for src, g in sorted(srcs.items()):
                    r = rates.get((src, dst), 0)
                    share = g / total if total else 0
                    print(f"  {src + ' -> ' + dst:22} {r:13g}  {g:29.3f}  {share:36.2f}  "
                          f"{r / rate_total if rate_total else 0:22.2f}")
                    fig["links"][key_of(src, dst)] = {"rate_gbps": r, "carried_gbps": g,
                                                      "share": share}
            for o in fig["outages"]:
                print(f"  outage {o['link']} from {o['start_s']:g} s for {o['seconds']:g} s: "
                      f"{o['arrived']} arrived at its PD end, {o['prefilled_across']} prefilled "
                      f"across it, {o['failed_over']} failed over" +
                      (f" (the last {o['last_failed_over_s']:.1f} s into it)"
                       if o['failed_over'] else ""))
            figures.append(fig)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figures, f, indent=1)


def key_of(src, dst):
    return f"{src}->{dst}"


if __name__ == "__main__":
    main()
