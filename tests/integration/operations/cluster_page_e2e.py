#!/usr/bin/env python3
"""The cluster page (/ui) in a real browser, against a running deployment.

Starts every node of a deployment file (the two-dc one in ctest), sends load through
the gateway, and loads the page of one node in Debian's headless chromium. Assertions
are on the DOM the page's script rendered (--dump-dom after it ran), not on the JSON
behind it:
  * every node of the file is drawn with data-state="up", every declared link too;
  * the threshold card shows the planned t, the last-requests table has rows, and the
    latency table has a row per route;
  * after `kill -9` of the PrfaaS prefill node the page shows it down within the
    failure detector's bound plus one refresh (checked against a generous multiple,
    the measured figure printed), and `prfaas-node status` exits non-zero meanwhile;
  * restarted, it is drawn up again and `status` exits 0.
A screenshot of each state is written to ARTEFACTS (cluster-page-{up,down,restarted}.png).

Usage: cluster_page_e2e.py PRFAAS_NODE PRFAAS_BENCH DEPLOYMENT_YAML ARTEFACTS_DIR
Exit codes: 0 pass, 1 fail, 77 skipped (no chromium or python3-yaml).
"""

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import prometheus_e2e as e2e  # noqa: E402  (the deployment plumbing is shared)

REFRESH_S = 2.0  # the page's own refresh (REFRESH_MS in the page)
GENEROUS = 3.0  # the machine is shared: bounds are checked at this multiple
PREFILL_NODE = "prfaas-0"
LOAD = ["--workload", "lognormal", "--input-mu", "5.5", "--input-sigma", "0.8",
        "--input-min", "32", "--input-max", "2048", "--output-len", "4",
        "--arrival", "poisson", "--rate", "10", "--requests", "40", "--seed", "3",
        "--timeout", "60"]  # fmt: skip


def browser():
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    return None


class Page:
    """One node's /ui, rendered by headless chromium."""

    def __init__(self, chromium, url, scratch):
        self.chromium, self.url, self.scratch = chromium, url, scratch

    def _run(self, *args):
        argv = [self.chromium, "--headless", "--no-sandbox", "--disable-gpu",
                f"--user-data-dir={self.scratch / 'chromium'}",
                "--virtual-time-budget=3000", "--window-size=1280,1100", *args, self.url]  # fmt: skip
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise e2e.Failed(f"chromium exited {r.returncode}: {r.stderr[-500:]}")
        return r.stdout

    def dom(self):
        return self._run("--dump-dom")

    def screenshot(self, path):
        self._run(f"--screenshot={path}")
        print(f"screenshot: {path}")


def states(dom, attr):
    """{name: data-state} of the elements carrying `attr` (data-node or data-link)."""
    return dict(re.findall(rf'{attr}="([^"]+)"[^>]*?data-state="([^"]*)"', dom))


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        raise e2e.Failed(what)


def link_names(deployment):
    import yaml

    dep = yaml.safe_load(Path(deployment).read_text())
    return ["-".join(l["between"]) for l in dep.get("links") or []]


def detector_bound_s(deployment):
    """interval × misses of the failure detector (how long a silent peer stays up)."""
    import yaml

    fd = yaml.safe_load(Path(deployment).read_text()).get("failure_detector") or {}
    interval = fd.get("interval", "1s")
    seconds = float(interval[:-2]) / 1000 if interval.endswith("ms") else float(interval[:-1])
    return seconds * int(fd.get("misses", 3))


def check_all_up(page, facts, links):
    dom = page.dom()
    nodes = states(dom, "data-node")
    for n in facts["nodes"]:
        check(nodes.get(n["name"]) == "up", f"node {n['name']} drawn up ({nodes.get(n['name'])})")
    drawn = states(dom, "data-link")
    for l in links:
        check(drawn.get(l) == "up", f"link {l} drawn up ({drawn.get(l)})")
    return dom


def check_serving(dom):
    m = re.search(r'id="threshold-card"[^>]*data-threshold="(\d+)"', dom)
    check(m is not None and int(m.group(1)) == 256, "the threshold card shows t = 256")
    rows = re.search(r'<table id="requests">(.*?)</table>', dom, re.S)
    n = rows.group(1).count("<tr>") - 1 if rows else 0
    check(n >= 1, f"the last-requests table has rows ({n})")
    latency = re.search(r'<table id="latency">(.*?)</table>', dom, re.S)
    text = latency.group(1) if latency else ""
    for route in ("pd", "prfaas"):
        check(f"<td>{route}</td>" in text, f"the latency table has a {route} row")


def status_code(node_bin, deployment):
    r = subprocess.run([node_bin, "status", "--config", deployment], capture_output=True,
                       text=True, timeout=30)  # fmt: skip
    print(r.stdout.rstrip())
    return r.returncode


def wait_drawn(page, node, state, limit_s):
    """Seconds until `node` is drawn in `state` (the start of the render that showed it)."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        at = time.monotonic() - start
        if states(page.dom(), "data-node").get(node) == state:
            return at
    raise e2e.Failed(f"{node} not drawn {state} within {limit_s:.0f} s")


def run(node_bin, bench_bin, deployment, artefacts, scratch, chromium):
    facts = e2e.deployment_facts(deployment)
    links = link_names(deployment)
    procs = e2e.Processes(scratch)
    try:
        e2e.start_deployment(procs, node_bin, deployment, facts)
        viewer = next(n for n in facts["nodes"] if n["name"] != PREFILL_NODE)
        page = Page(chromium, f"http://{viewer['admin']}/ui", scratch)
        r = subprocess.run([bench_bin, "serve", "--url", f"http://{facts['gateway']}", *LOAD],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        check(r.returncode == 0, f"prfaas-bench serve ran ({r.stdout.strip()[-200:]})")
        time.sleep(REFRESH_S + 0.5)  # one observer sample after the load
        dom = check_all_up(page, facts, links)
        check_serving(dom)
        page.screenshot(artefacts / "cluster-page-up.png")
        check(status_code(node_bin, deployment) == 0, "prfaas-node status exits 0, all up")

        victim = next(p for name, p, _ in procs.started if name == PREFILL_NODE)
        victim.kill()  # SIGKILL: no goodbye to its peers
        victim.wait()
        bound = detector_bound_s(deployment) + REFRESH_S
        took = wait_drawn(page, PREFILL_NODE, "down", 60)
        print(f"{PREFILL_NODE} drawn down by the render started {took:.2f} s after kill -9 "
              f"(detector bound + one refresh = {bound:.1f} s)")  # fmt: skip
        check(took <= GENEROUS * bound, f"drawn down within {GENEROUS:g} x {bound:.1f} s")
        page.screenshot(artefacts / "cluster-page-down.png")
        check(status_code(node_bin, deployment) != 0, "prfaas-node status exits non-zero")

        procs.start(PREFILL_NODE + "-restarted",
                    [node_bin, "--config", deployment, "--node", PREFILL_NODE])  # fmt: skip
        took = wait_drawn(page, PREFILL_NODE, "up", 60)
        print(f"{PREFILL_NODE} drawn up by the render started {took:.2f} s after its restart")
        e2e.wait_for("status to exit 0 after the restart",
                     lambda: status_code(node_bin, deployment) == 0, 30, 1.0)  # fmt: skip
        # The link monitors call the link up again after their recovery dwell.
        e2e.wait_for("every link drawn up again",
                     lambda: all(states(page.dom(), "data-link").get(l) == "up" for l in links),
                     60, 0.5)  # fmt: skip
        check_all_up(page, facts, links)
        page.screenshot(artefacts / "cluster-page-restarted.png")
    except e2e.Failed:
        procs.print_logs()
        raise
    finally:
        procs.stop()


def main(argv):
    if len(argv) != 5:
        print(__doc__)
        return 2
    chromium = browser()
    if not chromium:
        e2e.skip("chromium not installed (Debian package chromium; tools/bootstrap.sh installs it)")
    try:
        import yaml  # noqa: F401
    except ImportError:
        e2e.skip("python3-yaml not installed")
    artefacts = Path(argv[4])
    artefacts.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="prfaas-cluster-page-") as tmp:
        try:
            run(argv[1], argv[2], argv[3], artefacts, Path(tmp), chromium)
        except e2e.Failed as f:
            print(f"FAIL: {f}")
            return 1
    print("ok: the cluster page draws the deployment, a killed node and its restart")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
