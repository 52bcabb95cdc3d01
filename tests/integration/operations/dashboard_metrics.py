#!/usr/bin/env python3
"""The shipped dashboard and alert rules against a live deployment: every metric, label
and matcher value their queries use is exported by real nodes after a realistic run.

The deployment file is run as is, on free loopback ports, one process per node. Load
comes from `prfaas-bench serve` in phases, each checked to have done what it is for:

  1. mixed       log-normal prompt lengths: both routes (short prompts stay in the PD
                 cluster, long ones are offloaded);
  2. overload    long prompts faster than the PrfaaS prefill node computes them: its
                 queue falls behind and the scheduler raises the threshold t;
  3. failover    long prompts queued on the PrfaaS prefill node when it is killed
                 (SIGKILL): the gateway re-routes them (prefill failovers); the node is
                 restarted;
  4. decode loss long prompts in flight when the decode node is killed and restarted:
                 the gateway moves them (decode resumes);
  5. recovered   the mix again: every request succeeds, on both routes.

Then every node's /metrics is scraped through the scrape configuration that
`prfaas-node prometheus-config` writes (so series carry job, instance and
prfaas_cluster as in Prometheus) and tools/check-dashboard-metrics.py checks
deploy/grafana/prfaas-dashboard.json and deploy/prometheus/prfaas-alerts.yml on them.

Usage: dashboard_metrics.py PRFAAS_NODE PRFAAS_BENCH DEPLOYMENT_YAML
Exit 0 pass, 1 fail, 77 skipped (no python3-yaml).
"""
import ctypes
import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

SKIP = 77
ROOT = Path(__file__).resolve().parents[3]
CHECKER = ROOT / "tools" / "check-dashboard-metrics.py"
DASHBOARD = ROOT / "deploy" / "grafana" / "prfaas-dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "prfaas-alerts.yml"
LONG_PROMPT = 4000  # tokens (bytes: the reference model is byte-level); offloaded
MIXED = ["--workload", "lognormal", "--input-mu", "6.5", "--input-sigma", "1",
         "--input-min", "32", "--input-max", str(LONG_PROMPT)]
LONG = ["--workload", "fixed", "--input-len", str(LONG_PROMPT)]


class Failure(Exception):
    pass


def free_ports(n):
    """n distinct loopback ports free now (held together so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def on_free_ports(text):
    """The deployment text with each loopback port replaced by a free one."""
    ports = sorted(set(re.findall(r"127\.0\.0\.1:(\d+)", text)))
    mapping = dict(zip(ports, map(str, free_ports(len(ports)))))
    return re.sub(r"127\.0\.0\.1:(\d+)", lambda m: "127.0.0.1:" + mapping[m[1]], text)


def die_with_parent():
    """Children get SIGKILL when this process dies, however it dies (Linux)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def http_get(address, path, timeout=2):
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as r:
            return r.read().decode()
    except OSError:
        return None


def metric(text, name, **labels):
    """Sum of the series of `name` carrying `labels` in Prometheus text (None: none)."""
    total = None
    for m in re.finditer(rf"^{name}(?:\{{(.*)\}})? (\S+)$", text or "", re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m[1] or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total = (total or 0) + float(m[2])
    return total


def wait_for(what, predicate, timeout=30.0, step=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    raise Failure(f"timed out after {timeout:.0f} s waiting for {what}")


class Deployment:
    """The deployment's nodes as child processes; stop() ends every one of them."""

    def __init__(self, node_bin, config, scratch, nodes):
        self.node_bin, self.config, self.scratch = node_bin, config, scratch
        self.nodes = nodes  # name -> node entry of the deployment file
        self.procs, self.starts = {}, {}

    def admin(self, name):
        return self.nodes[name]["admin"]

    def log(self, name):
        return self.scratch / f"{name}.{self.starts.get(name, 1)}.log"

    def start(self, name):
        self.starts[name] = self.starts.get(name, 0) + 1
        with open(self.log(name), "wb") as out:
            self.procs[name] = subprocess.Popen(
                [self.node_bin, "--config", str(self.config), "--node", name],
                stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)

    def restart(self, name):
        """Starts `name` again once its ports are free (a killed process's sockets can
        outlive it for a moment: a start that cannot bind exits, and is retried)."""
        for _ in range(20):
            self.start(name)
            try:
                wait_for(f"{name}'s admin endpoint",
                         lambda: http_get(self.admin(name), "/health") is not None
                         or self.procs[name].poll() is not None, timeout=20)
            except Failure:
                break
            if self.procs[name].poll() is None:
                return
            time.sleep(0.5)
        raise Failure(f"{name} did not start again; its log:\n{self.tail(name)}")

    def kill(self, name):
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait()
        print(f"killed {name} (SIGKILL)", flush=True)

    def tail(self, name, lines=15):
        try:
            return "\n".join(self.log(name).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def roles(doc):
    """Node names by role, and the gateway's HTTP address."""
    out = {"prefill": [], "decode": [], "prfaas_prefill": []}
    kinds = {name: c.get("kind") for name, c in doc["clusters"].items()}
    for n in doc["nodes"]:
        for a in n.get("actors", []):
            if a["type"] == "gateway":
                out["gateway"], out["http"] = n["name"], a["listen"]
            elif a["type"] in ("prefill_worker", "decode_worker"):
                out[a["type"].split("_")[0]].append(n["name"])
                if a["type"] == "prefill_worker" and kinds[n["cluster"]] == "prefill-only":
                    out["prfaas_prefill"].append(n["name"])
    return out


def wait_ready(dep, r):
    """Every node answers, sees its peers, and the scheduler can route to every worker."""
    names = list(dep.nodes)
    for name in names:
        def peers_up(name=name):
            health = http_get(dep.admin(name), "/health")
            if not health:
                return False
            peers = json.loads(health).get("peers", [])
            return len(peers) == len(names) - 1 and all(p["state"] == "up" for p in peers)
        wait_for(f"{name} to see every peer up", peers_up)
    gw = dep.admin(r["gateway"])
    for role in ("prefill", "decode"):
        wait_for(f"the scheduler to route to all {role} workers",
                 lambda role=role: (metric(http_get(gw, "/metrics"),
                                           "prfaas_scheduler_routable_workers", role=role) or 0)
                 >= len(r[role]))
    wait_for("the scheduler to offload again (the cross-cluster link up)",
             lambda: metric(http_get(gw, "/metrics"), "prfaas_scheduler_link_up") == 1)


def bench(bench_bin, r, scratch, name, args, seed, duration, rate):
    """Starts `prfaas-bench serve`; returns (process, path of its JSON results)."""
    out = scratch / f"bench-{name}.json"
    cmd = [bench_bin, "serve", "--url", f"http://{r['http']}", "--output-len", "16",
           "--rate", str(rate), "--duration", str(duration), "--seed", str(seed),
           "--timeout", "120", "--json", str(out), *args]
    log = open(scratch / f"bench-{name}.log", "wb")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=die_with_parent), out


def finish(proc, out, name):
    """Waits for a bench run; its results (requests, routes) as a dict."""
    if proc.wait(timeout=240) != 0:
        raise Failure(f"phase {name}: prfaas-bench exited with {proc.returncode}")
    result = json.loads(out.read_text())
    print(f"phase {name}: {result['requests']} routes={result['routes']} "
          f"errors={result['errors']}", flush=True)
    return result


def counter(dep, r, name):
    return metric(http_get(dep.admin(r["gateway"]), "/metrics"), name) or 0


def expect_grew(dep, r, name, before, phase, why):
    now = counter(dep, r, name)
    print(f"phase {phase}: {name} {before:g} -> {now:g}", flush=True)
    if now <= before:
        raise Failure(f"phase {phase}: {name} did not grow ({before:g} -> {now:g}): {why}")


def all_ok(result, phase, routes=("pd", "prfaas")):
    if result["requests"]["failed"]:
        raise Failure(f"phase {phase}: {result['requests']['failed']} requests failed: "
                      f"{result['errors']}")
    for route in routes:
        if not result["routes"].get(route):
            raise Failure(f"phase {phase}: no request took route {route}: {result['routes']}")


def kill_under_load(dep, r, scratch, bench_bin, phase, victim, seed, restart_at_once,
                    victim_busy=False):
    """Long prompts queued on the PrfaaS prefill node, then `victim` killed; restarted
    at once or after the load. `victim_busy`: also wait until the victim works on an
    order (a decode node killed while every request is still in prefill moves none to
    another decode worker: they fail over in prefill instead)."""
    proc, out = bench(bench_bin, r, scratch, phase, LONG, seed, duration=3, rate=8)
    queued = dep.admin(r["prfaas_prefill"][0])
    wait_for(f"phase {phase}: long prompts queued on {r['prfaas_prefill'][0]}",
             lambda: (metric(http_get(queued, "/metrics"), "prfaas_worker_queue_depth") or 0) >= 2,
             timeout=20, step=0.05)
    if victim_busy:
        busy = dep.admin(victim)
        wait_for(f"phase {phase}: {victim} decoding",
                 lambda: (metric(http_get(busy, "/metrics"), "prfaas_worker_active") or 0) >= 1,
                 timeout=20, step=0.05)
    dep.kill(victim)
    if restart_at_once:
        dep.restart(victim)
    result = finish(proc, out, phase)
    if not restart_at_once:
        dep.restart(victim)
    wait_ready(dep, r)
    return result


def run_phases(dep, r, scratch, b):
    all_ok(finish(*bench(b, r, scratch, "mixed", MIXED, 1, duration=6, rate=4), "mixed"), "mixed")

    before = counter(dep, r, "prfaas_scheduler_threshold_changes_total")
    all_ok(finish(*bench(b, r, scratch, "overload", LONG, 2, duration=7, rate=8), "overload"),
           "overload", routes=("prfaas",))
    expect_grew(dep, r, "prfaas_scheduler_threshold_changes_total", before, "overload",
                "the PrfaaS prefill queue never fell behind long enough to move t")

    before = counter(dep, r, "prfaas_gateway_failovers_total")
    kill_under_load(dep, r, scratch, b, "failover", r["prfaas_prefill"][0], 3,
                    restart_at_once=False)
    expect_grew(dep, r, "prfaas_gateway_failovers_total", before, "failover",
                "killing the PrfaaS prefill node under load re-routed nothing")

    before = counter(dep, r, "prfaas_gateway_decode_resumes_total")
    kill_under_load(dep, r, scratch, b, "decode-loss", r["decode"][0], 4, restart_at_once=True,
                    victim_busy=True)
    expect_grew(dep, r, "prfaas_gateway_decode_resumes_total", before, "decode-loss",
                "killing the decode node under load moved no request")

    all_ok(finish(*bench(b, r, scratch, "recovered", MIXED, 5, duration=4, rate=4), "recovered"),
           "recovered")


def check(node_bin, config, scratch):
    """The checker over every node, scraped as Prometheus would; its exit code."""
    scrape = scratch / "prometheus.yml"
    scrape.write_text(subprocess.run([node_bin, "prometheus-config", "--config", str(config)],
                                     check=True, capture_output=True, text=True).stdout)
    return subprocess.run([sys.executable, str(CHECKER), "--dashboard", str(DASHBOARD),
                           "--rules", str(RULES), "--scrape-config", str(scrape)]).returncode


def main(argv):
    if len(argv) != 4:
        print(__doc__)
        return 2
    node_bin, bench_bin, deployment = argv[1:]
    try:
        import yaml
    except ImportError:
        print("SKIP: python3-yaml is not installed (the deployment file and rules are YAML)")
        return SKIP
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # ctest's timeout: clean up
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="prfaas-dashboard-") as tmp:
        scratch = Path(tmp)
        config = scratch / "deployment.yaml"
        config.write_text(on_free_ports(Path(deployment).read_text()))
        doc = yaml.safe_load(config.read_text())
        r = roles(doc)
        dep = Deployment(node_bin, config, scratch, {n["name"]: n for n in doc["nodes"]})
        try:
            for name in dep.nodes:
                dep.start(name)
            wait_ready(dep, r)
            run_phases(dep, r, scratch, bench_bin)
            code = check(node_bin, config, scratch)
        except Failure as e:
            print(f"FAIL: {e}")
            for name in dep.nodes:
                print(f"--- {name} (last lines of {dep.log(name).name})\n{dep.tail(name)}")
            code = 1
        finally:
            dep.stop()
    print(f"{'ok' if code == 0 else 'FAIL'} in {time.monotonic() - started:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
