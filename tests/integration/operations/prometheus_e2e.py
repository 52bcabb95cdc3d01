#!/usr/bin/env python3
"""The operator's view, end to end: a real Prometheus scrapes every node of a running
deployment while `prfaas-bench serve` loads it, and what Prometheus then says about
the gateway agrees with what the bench measured at the client.

  1. `prfaas-node prometheus-config` for the deployment (1 s interval) passes
     `promtool check config`; a private `prometheus` on a free loopback port (the
     package's own service may hold :9090) scrapes it and sees every node `up`.
  2. `prfaas-bench serve` sends a mix of short and long prompts (>= 50 on each route:
     short ones stay in the PD cluster, long ones are offloaded), then we wait for a
     scrape of every target that started after the load ended.
  3. For each route, `histogram_quantile` over prfaas_gateway_ttft_seconds for p50 and
     p99 lands exactly in the bucket of the gateway's own per-request TTFT (the
     `prfaas` object of each response) at Prometheus's rank, and in no higher bucket
     than the client's TTFT at that rank: the gateway times from acceptance, the
     client from sending, so per request the client's figure is the larger (checked
     for every request). How much larger depends on the client's own scheduling on a
     busy machine, so the bench's percentiles are printed beside them, not judged.
  4. Finished requests by route, as Prometheus counts them (e2e histogram with
     outcome="ok", and the TTFT histogram), equal the bench's route split exactly.

Usage: prometheus_e2e.py PRFAAS_NODE PRFAAS_BENCH DEPLOYMENT_YAML
Exit 0 pass, 1 fail, 77 skipped (no prometheus/promtool, or no python3-yaml).
"""
import json
import math
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from fractions import Fraction
from pathlib import Path

SKIP = 77
SCRAPE_INTERVAL = "1s"
MIN_PER_ROUTE = 50
QUANTILES = (0.5, 0.99)
# Two processes read the machine's clock at slightly different points of a request.
CLOCK_SLACK_S = 0.002
# Prompt lengths straddle the deployment's offload threshold (t = 256 tokens, ~1 token
# per byte with the reference model): log-normal around 256, so both routes get a
# good share. Four output tokens keep the run short.
BENCH_WORKLOAD = [
    "--workload", "lognormal", "--input-mu", str(math.log(256)), "--input-sigma", "0.8",
    "--input-min", "32", "--input-max", "2048", "--output-len", "4",
    "--arrival", "poisson", "--rate", "12", "--requests", "240", "--seed", "7",
    "--timeout", "60",
]  # fmt: skip


class Failed(Exception):
    """A check that failed, or a step that could not be done; the message says which."""


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(SKIP)


# ---------------------------------------------------------------------------- deployment


def deployment_facts(path):
    """What the test needs from the deployment file: nodes with their admin endpoints,
    the gateway's HTTP address, the node running the scheduler, the worker counts."""
    import yaml  # python3-yaml; checked for in main()

    dep = yaml.safe_load(Path(path).read_text())
    facts = {"nodes": [], "gateway": None, "scheduler_admin": None,
             "prefill_workers": 0, "decode_workers": 0}  # fmt: skip
    for node in dep.get("nodes") or []:
        facts["nodes"].append({"name": node["name"], "admin": node.get("admin")})
        for actor in node.get("actors") or []:
            kind = actor.get("type")
            if kind == "gateway":
                facts["gateway"] = actor["listen"]
            elif kind == "scheduler":
                facts["scheduler_admin"] = node.get("admin")
            elif kind == "prefill_worker":
                facts["prefill_workers"] += 1
            elif kind == "decode_worker":
                facts["decode_workers"] += 1
    if not facts["gateway"] or not facts["scheduler_admin"]:
        raise Failed(f"{path}: no gateway or no scheduler with an admin endpoint")
    if any(not n["admin"] for n in facts["nodes"]):
        raise Failed(f"{path}: every node needs an admin endpoint to be scraped")
    return facts


# ------------------------------------------------------------------------------- plumbing


def http_get(url, timeout=2.0):
    """(status, body) of a GET; (None, error text) when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (OSError, ValueError) as e:
        return None, str(e)


def wait_for(what, probe, timeout_s, step_s=0.2):
    """Polls probe() until it returns a true value, which is returned."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise Failed(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(step_s)


def free_loopback_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Processes:
    """The processes this test started; stopped in reverse start order, also on failure."""

    def __init__(self, scratch):
        self.scratch = scratch
        self.started = []  # (name, Popen, log path)

    def start(self, name, argv):
        log = self.scratch / f"{name}.log"
        with open(log, "wb") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL)  # fmt: skip
        self.started.append((name, p, log))
        return p

    def check_alive(self):
        for name, p, log in self.started:
            if p.poll() is not None:
                raise Failed(f"{name} exited with status {p.returncode}; see {log}")

    def stop(self):
        for _, p, _ in reversed(self.started):
            if p.poll() is None:
                p.terminate()
        for _, p, _ in reversed(self.started):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def print_logs(self, lines=15):
        for name, _, log in self.started:
            text = log.read_text(errors="replace").splitlines()
            print(f"--- last {lines} lines of {name} ({log})")
            print("\n".join(text[-lines:]))


# -------------------------------------------------------------------------- the deployment


def scheduler_ready(facts):
    """True once the scheduler has heard from every prefill and decode worker."""
    status, text = http_get(f"http://{facts['scheduler_admin']}/metrics")
    if status != 200:
        return False
    want = {"prefill": facts["prefill_workers"], "decode": facts["decode_workers"]}
    for role, n in want.items():
        pattern = r'^prfaas_scheduler_routable_workers\{[^}]*role="%s"[^}]*\} (\S+)$' % role
        m = re.search(pattern, text, re.M)
        if not m or float(m.group(1)) < n:
            return False
    return True


def start_deployment(procs, node_bin, deployment, facts):
    for n in facts["nodes"]:
        procs.start(n["name"], [node_bin, "--config", deployment, "--node", n["name"]])
    for n in facts["nodes"]:
        url = f"http://{n['admin']}/health"

        def healthy(url=url):
            procs.check_alive()
            return http_get(url)[0] == 200

        wait_for(f"{n['name']} {url} to answer 200", healthy, 60)
    wait_for("every worker to be routable (prfaas_scheduler_routable_workers)",
             lambda: procs.check_alive() or scheduler_ready(facts), 60)  # fmt: skip
    models = f"http://{facts['gateway']}/v1/models"
    wait_for(f"{models} to answer 200", lambda: http_get(models)[0] == 200, 30)
    print(f"deployment up: {', '.join(n['name'] for n in facts['nodes'])}; "
          f"gateway http://{facts['gateway']}")  # fmt: skip


# ------------------------------------------------------------------------------ Prometheus


def scrape_config(node_bin, deployment, scratch):
    """The scrape config prfaas-node writes for the deployment, checked by promtool."""
    path = scratch / "prometheus.yml"
    out = subprocess.run([node_bin, "prometheus-config", "--config", deployment,
                          "--interval", SCRAPE_INTERVAL],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    if out.returncode != 0:
        raise Failed(f"prometheus-config failed ({out.returncode}): {out.stderr}")
    path.write_text(out.stdout)
    check = subprocess.run(["promtool", "check", "config", str(path)],
                           capture_output=True, text=True, timeout=30)  # fmt: skip
    print(f"promtool check config: exit {check.returncode}")
    print((check.stdout + check.stderr).strip())
    if check.returncode != 0:
        raise Failed("promtool check config rejected the output of prometheus-config")
    return path


class Prometheus:
    """A private Prometheus server on a free loopback port and its HTTP API."""

    def __init__(self, procs, config, scratch):
        port = free_loopback_port()
        self.base = f"http://127.0.0.1:{port}"
        self.proc = procs.start("prometheus", [
            "prometheus", f"--config.file={config}",
            f"--storage.tsdb.path={scratch / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
        ])  # fmt: skip
        self.procs = procs

    def api(self, path, **params):
        url = f"{self.base}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        status, body = http_get(url, timeout=10)
        if status != 200:
            raise Failed(f"GET {url}: {status} {body[:300]}")
        reply = json.loads(body)
        if reply.get("status") != "success":
            raise Failed(f"GET {url}: {reply}")
        return reply["data"]

    def query(self, expr):
        """An instant query at now: a list of (labels, value)."""
        data = self.api("/api/v1/query", query=expr)
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    def targets(self):
        return self.api("/api/v1/targets", state="active")["activeTargets"]

    def wait_ready(self):
        def ready():
            self.procs.check_alive()
            return http_get(f"{self.base}/-/ready")[0] == 200

        wait_for(f"prometheus at {self.base} to be ready", ready, 60)


def scrape_time(target):
    """A target's lastScrape as seconds since the epoch (0 if never scraped)."""
    text = re.sub(r"(\.\d{6})\d+", r"\1", target["lastScrape"]).replace("Z", "+00:00")
    stamp = datetime.fromisoformat(text).timestamp()
    return stamp if stamp > 0 else 0.0


def wait_all_up(prom, facts):
    """Every node's admin endpoint is an active target and up; nothing else is scraped."""
    want = sorted(n["admin"] for n in facts["nodes"])

    def all_up():
        prom.procs.check_alive()
        targets = prom.targets()
        if sorted(t["labels"]["instance"] for t in targets) != want:
            return False
        return all(t["health"] == "up" for t in targets)

    wait_for(f"targets {want} all up in Prometheus", all_up, 60)
    print(f"prometheus {prom.base}: {len(want)} targets up: {', '.join(want)}")


def wait_scrape_after(prom, since):
    """Waits for a completed scrape of every target that started after `since` (epoch s),
    visible to queries (its `up` sample carries that time)."""

    def scraped():
        targets = prom.targets()
        return all(t["health"] == "up" and scrape_time(t) > since for t in targets)

    wait_for("a scrape of every target after the load ended", scraped, 30)
    wait_for("the final scrape to be queryable",
             lambda: all(v > since for _, v in prom.query("timestamp(up)")), 15)  # fmt: skip
    oldest = min(scrape_time(t) for t in prom.targets())
    print(f"final scrape: every target last scraped {oldest - since:.2f} s or more "
          "after the load ended")  # fmt: skip


# ----------------------------------------------------------------------------------- load


def nearest_rank(values, q):
    """prfaas-bench's percentile rule (apps/prfaas-bench/stats.hpp): nearest rank."""
    v = sorted(values)
    rank = int(q * (len(v) - 1) + 0.5)
    return v[min(rank, len(v) - 1)]


def run_load(bench_bin, facts, scratch):
    """Runs prfaas-bench serve; returns its JSON report and the epoch time it ended."""
    report = scratch / "bench.json"
    argv = [bench_bin, "serve", "--url", f"http://{facts['gateway']}", *BENCH_WORKLOAD,
            "--json", str(report), "--per-request"]  # fmt: skip
    print("load: " + " ".join(Path(a).name if a == bench_bin else a for a in argv))
    started = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    ended = time.time()
    print(out.stdout.rstrip())
    if out.returncode != 0:
        raise Failed(f"prfaas-bench serve failed ({out.returncode}): {out.stderr}")
    print(f"load took {time.monotonic() - started:.1f} s")
    return json.loads(report.read_text()), ended


def bench_by_route(report):
    """Per route, from the bench's per-request results: the count of ok requests, the
    client's TTFTs and the gateway's own TTFTs (the response's `prfaas` object), in s."""
    routes = {}
    for r in report["per_request"]:
        if r["status"] != "ok" or "prfaas" not in r:
            continue
        entry = routes.setdefault(r["prfaas"]["route"], {"count": 0, "client": [], "server": []})
        entry["count"] += 1
        entry["client"].append(r["ttft_ms"] / 1e3)
        entry["server"].append(r["prfaas"]["ttft_ms"] / 1e3)
    return routes


# --------------------------------------------------------------------------------- checks


class Checks:
    def __init__(self):
        self.results = []  # (ok, text)

    def add(self, ok, text):
        self.results.append((bool(ok), text))
        print(f"  [{'PASS' if ok else 'FAIL'}] {text}")

    def passed(self):
        return all(ok for ok, _ in self.results)


def bucket_bounds(prom):
    """The TTFT histogram's bucket upper bounds, as exposed (le labels), +Inf last."""
    les = {m["le"] for m, _ in prom.query("prfaas_gateway_ttft_seconds_bucket")}
    if "+Inf" not in les or len(les) < 3:
        raise Failed(f"prfaas_gateway_ttft_seconds_bucket has buckets {sorted(les)}")
    return sorted(float(le) for le in les)


def bucket_of(bounds, value):
    """Index of the bucket (le semantics: lower < value <= upper) holding value."""
    return next(i for i, upper in enumerate(bounds) if value <= upper)


def bucket_text(bounds, i):
    lower = bounds[i - 1] if i > 0 else 0.0
    return f"({lower * 1e3:g}, {bounds[i] * 1e3:g}] ms"


def check_requests(checks, report, routes):
    total, ok = report["requests"]["total"], report["requests"]["ok"]
    checks.add(total == ok and report["requests"]["failed"] == 0,
               f"bench: {ok} of {total} requests ok, errors {report['errors'] or 'none'}")  # fmt: skip
    checks.add(report["routes"] == {r: e["count"] for r, e in routes.items()},
               f"bench route split {report['routes']} = its per-request routes")  # fmt: skip
    for route, e in sorted(routes.items()):
        checks.add(e["count"] >= MIN_PER_ROUTE,
                   f"route {route}: {e['count']} requests (>= {MIN_PER_ROUTE})")  # fmt: skip
    checks.add(set(routes) == {"pd", "prfaas"}, f"bench saw routes {sorted(routes)}")


def check_counts(checks, prom, routes):
    """Prometheus's finished requests by route equal the bench's route split."""
    ok = {m.get("route", "?"): v for m, v in prom.query(
        'sum by (route) (prfaas_gateway_e2e_seconds_count{outcome="ok"})')}  # fmt: skip
    ttft = {m.get("route", "?"): v for m, v in prom.query(
        "sum by (route) (prfaas_gateway_ttft_seconds_count)")}  # fmt: skip
    bench = {r: float(e["count"]) for r, e in routes.items()}
    checks.add(ok == bench, f"prometheus e2e count (outcome=ok) by route {ok} = bench {bench}")
    checks.add(ttft == bench, f"prometheus TTFT count by route {ttft} = bench {bench}")
    if sum(ok.values()) and sum(bench.values()):
        share_p = Fraction(int(ok.get("prfaas", 0)), int(sum(ok.values())))
        share_b = Fraction(int(bench.get("prfaas", 0)), int(sum(bench.values())))
        checks.add(share_p == share_b, f"offload share: prometheus {float(share_p):.4f} "
                   f"({share_p}) = bench {float(share_b):.4f} ({share_b})")  # fmt: skip
    return ok


def check_client_after_server(checks, routes):
    """Every request: the client's TTFT is at least the gateway's (the client starts its
    clock before the gateway accepts and stops it after the first token has left)."""
    for route, e in sorted(routes.items()):
        late = [(c, s) for c, s in zip(e["client"], e["server"]) if c + CLOCK_SLACK_S < s]
        checks.add(not late, f"route {route}: client TTFT >= gateway TTFT for all "
                   f"{len(e['client'])} requests" + (f" (not for {late[:3]})" if late else ""))  # fmt: skip


def check_quantiles(checks, prom, routes, bounds):
    """Per route and quantile: Prometheus's estimate lands in the bucket of the gateway's
    own TTFT at Prometheus's rank, and in no higher bucket than the client's figure at
    that rank (per request the client's TTFT is the larger). How far above the client's
    figure is is timing (the client's own scheduling), so it is printed, not judged."""
    rows = []
    for q in QUANTILES:
        expr = f"histogram_quantile({q}, sum by (le, route) (prfaas_gateway_ttft_seconds_bucket))"
        estimates = {m.get("route", "?"): v for m, v in prom.query(expr)}
        for route, e in sorted(routes.items()):
            est = estimates.get(route)
            bench = nearest_rank(e["client"], q)
            # The observation Prometheus's rank q*n falls on, from the gateway's own figures,
            # and the client's figure at the same rank.
            rank = max(1, math.ceil(q * len(e["server"]))) - 1
            server = sorted(e["server"])[rank]
            client = sorted(e["client"])[rank]
            if est is None or math.isnan(est):
                checks.add(False, f"route {route} p{q * 100:g}: no estimate from Prometheus")
                continue
            ib, ip, isv, ic = (bucket_of(bounds, v) for v in (bench, est, server, client))
            rows.append((route, q, bench, est, ib, ip))
            checks.add(ip == isv, f"route {route} p{q * 100:g}: prometheus {est * 1e3:.2f} ms "
                       f"in {bucket_text(bounds, ip)} = bucket of the gateway's own TTFT at "
                       f"that rank ({server * 1e3:.2f} ms)")  # fmt: skip
            checks.add(ip <= ic, f"route {route} p{q * 100:g}: prometheus bucket no higher "
                       f"than the client's TTFT at that rank ({client * 1e3:.2f} ms in "
                       f"{bucket_text(bounds, ic)}); bench p{q * 100:g} {bench * 1e3:.2f} ms "
                       f"in {bucket_text(bounds, ib)}")  # fmt: skip
    return rows


def print_summary(routes, counts, rows, bounds):
    print("\nsummary (TTFT in ms; bench = client side, nearest rank; prometheus = "
          "histogram_quantile over the final scrape)")  # fmt: skip
    print(f"  {'route':8} {'bench n':>8} {'prom n':>8} {'q':>5} {'bench':>9} {'prom':>9}  "
          f"{'bench bucket':>20} {'prom bucket':>20}")  # fmt: skip
    for route, q, bench, est, ib, ip in sorted(rows, key=lambda r: r[:2]):
        print(f"  {route:8} {routes[route]['count']:8d} {counts.get(route, 0):8.0f} "
              f"{'p' + format(q * 100, 'g'):>5} {bench * 1e3:9.2f} {est * 1e3:9.2f}  "
              f"{bucket_text(bounds, ib):>20} {bucket_text(bounds, ip):>20}")  # fmt: skip


# ----------------------------------------------------------------------------------- main


def run(node_bin, bench_bin, deployment, scratch):
    facts = deployment_facts(deployment)
    procs = Processes(scratch)
    try:
        config = scrape_config(node_bin, deployment, scratch)
        start_deployment(procs, node_bin, deployment, facts)
        prom = Prometheus(procs, config, scratch)
        prom.wait_ready()
        wait_all_up(prom, facts)
        report, load_end = run_load(bench_bin, facts, scratch)
        wait_scrape_after(prom, load_end)
        procs.check_alive()
        routes = bench_by_route(report)
        bounds = bucket_bounds(prom)
        checks = Checks()
        print("checks:")
        check_requests(checks, report, routes)
        counts = check_counts(checks, prom, routes)
        check_client_after_server(checks, routes)
        rows = check_quantiles(checks, prom, routes, bounds)
        print_summary(routes, counts, rows, bounds)
        if not checks.passed():
            procs.print_logs()
        return checks.passed()
    except Failed:
        procs.print_logs()
        raise
    finally:
        procs.stop()


def main(argv):
    if len(argv) != 4:
        print(__doc__)
        return 2
    node_bin, bench_bin, deployment = argv[1:]
    missing = [tool for tool in ("prometheus", "promtool") if shutil.which(tool) is None]
    if missing:
        skip(f"{' and '.join(missing)} not installed (Debian package prometheus): "
             "the end-to-end scrape test needs a real Prometheus")  # fmt: skip
    try:
        import yaml  # noqa: F401
    except ImportError:
        skip("python3-yaml not installed: the deployment file cannot be read")
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="prfaas-prometheus-e2e-"))
    try:
        ok = run(node_bin, bench_bin, deployment, scratch)
    except (Failed, subprocess.TimeoutExpired) as e:
        print(f"FAIL: {e}\n(scratch kept: {scratch})")
        return 1
    took = time.monotonic() - started
    if not ok:
        print(f"FAIL ({took:.0f} s; scratch kept: {scratch})")
        return 1
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"ok: Prometheus agrees with prfaas-bench serve ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
