#!/usr/bin/env python3
"""Runs an evaluation matrix of prfaas-sim: policies x workloads x seeds, on the same hardware.

  tools/sim-matrix.py --matrix configs/sim/matrix.yaml --sim build/bin/prfaas-sim --out DIR
                      [--jobs 2] [--only WORKLOAD,...] [--seeds 1,2,3]

For every policy and workload it writes a deployment (tools/sim-deployment.py: the matrix
file's hardware, the policy's scheduler parameters, its P/D split), runs `prfaas-sim run`
once per seed, and reports the median over seeds of mean and P90 TTFT, with the
ratio of the first policy (the one under test) to the best baseline in each cell.

Splits. The PD nodes are convertible (a prefill and a decode worker each, one on standby),
so every policy runs on the same machines and only its split differs:
  split: N      N PD nodes start as prefill, the rest decode;
  split: plan   the planner's PrfaaS-PD split for the workload's length law;
  split: homogeneous   the planner's homogeneous-PD split on the PD nodes.
A policy under online re-planning starts where its `split` puts it and moves by itself.

Outputs in DIR: deployments/, runs/ (one JSON per run), matrix.json and matrix.md (the
table). Runs already present in runs/ are reused, so an interrupted matrix resumes.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(msg):
    sys.exit(f"sim-matrix: {msg}")


def load_matrix(path):
    with open(path) as f:
        m = yaml.safe_load(f)
    for key in ("hardware", "policies", "workloads", "seeds", "under_test", "baselines"):
        if key not in m:
            fail(f"{path}: missing '{key}'")
    for name in [m["under_test"]] + m["baselines"]:
        if name not in m["policies"]:
            fail(f"{path}: '{name}' is not a policy of the matrix")
    return m


def planner_split(sim, hw, law, kind, cache):
    """N_p of the planner's plan ('prfaas_pd' or 'homogeneous') for a length law."""
    key = (kind, json.dumps(law, sort_keys=True))
    if key in cache:
        return cache[key]
    profiles = os.path.join(ROOT, "configs", "profiles")
    lengths = {"kind": "lognormal", "mu": law.get("mu", 9.9), "sigma": 1.0,
               "min_tokens": 128, "max_tokens": 131072, "bins": 4000}
    if "trace" in law:
        lengths = {"kind": "trace", "path": os.path.join(ROOT, law["trace"]),
                   "block_tokens": 512, "prefix_cache": "infinite"}
    cfg = {"name": "matrix-split",
           "clusters": {"prfaas": {"profile": f"{profiles}/kimi-linear-1t-h200.yaml",
                                   "instances": hw["prfaas"]},
                        "pd": {"profile": f"{profiles}/kimi-linear-1t-h20.yaml",
                               "instances": hw["pd_nodes"]}},
           "baselines": {"homogeneous_instances": hw["pd_nodes"]},
           "link": {"bandwidth_gbps": hw["link_gbit"]},
           "workload": {"input_lengths": lengths, "output_tokens": law.get("output_tokens", 1024),
                        "decode_slo_tokens_per_s": 40}}
    path = os.path.join(cache["dir"], f"plan-{len(cache)}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    out = subprocess.run([sim, "plan", "--config", path, "--json"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        fail(f"planner failed on {path}: {out.stderr.strip()}")
    plan = json.loads(out.stdout)
    section = plan["plans"]["prfaas_pd" if kind == "plan" else "homogeneous_pd"]
    cache[key] = int(section["n_p"])
    return cache[key]


def deployment(args, m, pol_name, pol, wl_name, wl, splits):
    hw = m["hardware"]
    split = pol.get("split", "plan")
    if not isinstance(split, int):
        split = planner_split(args.sim, hw, wl.get("law", {}), split, splits)
    split = max(0, min(hw["pd_nodes"] - 1, split))
    name = f"{pol_name}--{wl_name}"
    cmd = [sys.executable, os.path.join(ROOT, "tools", "sim-deployment.py"),
           "--name", name, "--prfaas", str(hw["prfaas"]), "--prfaas-nodes", "1",
           "--pd-prefill", "0", "--decode", "0", "--convertible", str(hw["pd_nodes"]),
           "--convertible-prefill", str(split), "--link-gbit", str(hw["link_gbit"]),
           "--max-batch", str(hw.get("max_batch", 20)), "--link-monitors",
           "--policy", pol["policy"], "--threshold", str(pol.get("threshold", 19400))]
    if wl.get("caches"):
        cmd += ["--cache-blocks", str(hw.get("cache_blocks", 16384)), "--directory"]
    if pol.get("offload"):
        cmd += ["--offload", pol["offload"]]
    if pol.get("scheduler"):
        cmd += ["--scheduler", pol["scheduler"]]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    # Profiles by absolute path: the deployment lives outside configs/sim.
    text = text.replace("../profiles/", os.path.join(ROOT, "configs", "profiles") + "/")
    path = os.path.join(args.out, "deployments", name + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    return path, split


def run_one(args, dep, wl, seed, out):
    if os.path.exists(out):
        return out
    cmd = [args.sim, "run", "--config", dep, "--seed", str(seed), "--json", out + ".tmp"]
    cmd += shlex.split(wl["args"].replace("{root}", ROOT))
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        fail(f"run failed ({' '.join(cmd)}): {res.stderr.strip()[-500:]}")
    os.replace(out + ".tmp", out)
    return out


def figures(path):
    with open(path) as f:
        s = json.load(f)["summary"]
    t = s.get("ttft_ms", {})
    return {"mean_s": t.get("mean", float("nan")) / 1e3, "p90_s": t.get("p90", float("nan")) / 1e3,
            "ok": s["requests"]["ok"], "total": s["requests"]["total"]}  # failed: total - ok


def render(m, cells, splits_used):
    pols = [m["under_test"]] + [p for p in m["policies"] if p != m["under_test"]]
    lines = ["| workload | " + " | ".join(pols) + " | under test / best baseline (mean, P90) |",
             "|---" * (len(pols) + 2) + "|"]
    for wl in m["workloads"]:
        row = [wl]
        for p in pols:
            c = cells.get((p, wl))
            if not c:
                row.append("–")
                continue
            lost = f" ({c['failed']} failed)" if c["failed"] else ""
            row.append(f"{c['mean_s']:.2f} / {c['p90_s']:.2f} [{splits_used[(p, wl)]}]{lost}")
        # A baseline that failed requests is not a fair best: its TTFT covers survivors.
        base = [cells[(b, wl)] for b in m["baselines"]
                if (b, wl) in cells and not cells[(b, wl)]["failed"]]
        me = cells.get((m["under_test"], wl))
        if me and base:
            bm = min(b["mean_s"] for b in base)
            bp = min(b["p90_s"] for b in base)
            rm, rp = me["mean_s"] / bm, me["p90_s"] / bp
            ok = "ok" if rm <= 1.10 and rp <= 1.10 and not me["failed"] else "MISS"
            row.append(f"{rm:.2f}x, {rp:.2f}x {ok}")
        else:
            row.append("–")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def plot(m, cells, out):
    """Mean TTFT per workload, one bar per policy (gnuplot; data beside the PNG)."""
    pols = [m["under_test"]] + [p for p in m["policies"] if p != m["under_test"]]
    wls = [w for w in m["workloads"] if any((p, w) in cells for p in pols)]
    dat = out + ".dat"
    with open(dat, "w") as f:
        f.write("# workload " + " ".join(pols) + "\n")
        for w in wls:
            vals = [f"{cells[(p, w)]['mean_s']:.3f}" if (p, w) in cells else "NaN" for p in pols]
            f.write(w + " " + " ".join(vals) + "\n")
    cols = ", ".join(f"'{dat}' using {i + 2}:xtic(1) title '{p}'" for i, p in enumerate(pols))
    script = f"""set terminal pngcairo size 1400,520 font ',10' noenhanced
set output '{out}'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel 'mean TTFT (s, median of seeds; log scale)'
set xtics rotate by -20
set key outside right
plot {cols}
"""
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"sim-matrix: no plot ({e})", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--matrix", required=True)
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "bin", "prfaas-sim"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="workloads to run (comma-separated)")
    ap.add_argument("--seeds", default="", help="override the matrix's seeds (comma-separated)")
    args = ap.parse_args()
    m = load_matrix(args.matrix)
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else m["seeds"]
    only = set(args.only.split(",")) if args.only else None
    for d in ("deployments", "runs", "plans"):
        os.makedirs(os.path.join(args.out, d), exist_ok=True)
    splits = {"dir": os.path.join(args.out, "plans")}
    jobs, splits_used = [], {}
    for wl_name, wl in m["workloads"].items():
        if only and wl_name not in only:
            continue
        for pol_name, pol in m["policies"].items():
            dep, split = deployment(args, m, pol_name, pol, wl_name, wl, splits)
            splits_used[(pol_name, wl_name)] = f"{split}/{m['hardware']['pd_nodes'] - split}"
            for seed in seeds:
                out = os.path.join(args.out, "runs", f"{pol_name}--{wl_name}--{seed}.json")
                jobs.append(((pol_name, wl_name), dep, wl, seed, out))
    done = 0
    results = {}
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        futs = [(key, ex.submit(run_one, args, dep, wl, seed, out))
                for key, dep, wl, seed, out in jobs]
        for key, fut in futs:
            results.setdefault(key, []).append(figures(fut.result()))
            done += 1
            print(f"sim-matrix: {done}/{len(jobs)} runs", file=sys.stderr, flush=True)
    cells = {}
    for key, runs in results.items():
        cells[key] = {"mean_s": statistics.median(r["mean_s"] for r in runs),
                      "p90_s": statistics.median(r["p90_s"] for r in runs),
                      "failed": max(r["total"] - r["ok"] for r in runs), "seeds": len(runs)}
    with open(os.path.join(args.out, "matrix.json"), "w") as f:
        json.dump({"seeds": seeds,
                   "cells": [{"policy": p, "workload": w, "split": splits_used[(p, w)], **c}
                             for (p, w), c in cells.items()]}, f, indent=1)
    table = render(m, cells, splits_used)
    plot(m, cells, os.path.join(args.out, "matrix.png"))
    with open(os.path.join(args.out, "matrix.md"), "w") as f:
        f.write(table)
    print(table)


if __name__ == "__main__":
    main()
