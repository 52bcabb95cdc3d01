#!/usr/bin/env python3
"""What watching a deployment costs: prfaas-bench serve on configs/bench-profile.yaml,
runs of two builds interleaved (before, after, before, after, ...), the "after" runs
watched the way an operator would watch them: a private Prometheus scraping every
node each second, and the cluster page open (its /ui fetched once, then /cluster every
2 s, as the page's own script does). The load generator is the same binary for both
(the first one given), so only the nodes differ.

  tools/bench-operator-overhead.py BEFORE_BIN_DIR AFTER_BIN_DIR [--runs 3] [--duration 45]

Prints each run's runtime overhead p50 (TTFT - engine prefill - exposed wire time, per
request, as prfaas-bench reports it), TTFT p50 and throughput, then the medians and
their ratio. Needs prometheus (Debian package) for the watched runs.
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

CONFIG = "configs/bench-profile.yaml"
ADMINS = ["127.0.0.1:9500", "127.0.0.1:9501", "127.0.0.1:9502", "127.0.0.1:9503"]
GATEWAY = "http://127.0.0.1:8000"
PAGE_NODE = "127.0.0.1:9501"
PROM_PORT = 9391


def get(url, timeout=2.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except OSError:
        return None


def wait_for(what, probe, limit_s=60):
    deadline = time.monotonic() + limit_s
    while not probe():
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.2)


class Watchers:
    """Prometheus scraping every node each second and a poller standing in for the page."""

    def __init__(self, node_bin, scratch):
        cfg = subprocess.run([node_bin, "prometheus-config", "--config", CONFIG, "--interval", "1s"],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        (scratch / "prometheus.yml").write_text(cfg)
        self.prom = subprocess.Popen(
            ["prometheus", f"--config.file={scratch / 'prometheus.yml'}",
             f"--storage.tsdb.path={scratch / 'tsdb'}", f"--web.listen-address=127.0.0.1:{PROM_PORT}",
             "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        wait_for("prometheus", lambda: get(f"http://127.0.0.1:{PROM_PORT}/-/ready") == 200)
        self.stop_flag = threading.Event()
        self.pages = 0
        self.thread = threading.Thread(target=self._page, daemon=True)
        self.thread.start()

    def _page(self):
        get(f"http://{PAGE_NODE}/ui")
        while not self.stop_flag.wait(2.0):
            if get(f"http://{PAGE_NODE}/cluster", timeout=5) == 200:
                self.pages += 1

    def stop(self):
        self.stop_flag.set()
        self.thread.join()
        self.prom.terminate()
        self.prom.wait()
        return self.pages


def one_run(bin_dir, bench_bin, watched, duration, scratch):
    nodes = subprocess.Popen([str(Path(bin_dir) / "prfaas-node"), "--config", CONFIG, "--all"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        for a in ADMINS:
            wait_for(a, lambda a=a: get(f"http://{a}/health") == 200)
        wait_for("the gateway", lambda: get(f"{GATEWAY}/v1/models") == 200)
        time.sleep(2)  # the scheduler hears every worker's first load report
        watchers = Watchers(str(Path(bin_dir) / "prfaas-node"), scratch) if watched else None
        out = scratch / "serve.json"
        subprocess.run([bench_bin, "serve", "--url", GATEWAY, "--workload", "fixed",
                        "--input-len", "512", "--output-len", "512", "--arrival", "poisson",
                        "--rate", "4.5", "--duration", str(duration), "--seed", "1",
                        "--json", str(out)], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        pages = watchers.stop() if watchers else 0
        s = json.loads(out.read_text())  # the summary is the top level
        return {"overhead_p50": s["overhead_ms"]["p50"], "ttft_p50": s["ttft_ms"]["p50"],
                "throughput": s["throughput"]["requests_per_s"] if isinstance(s["throughput"], dict)
                else s["throughput"], "pages": pages}  # fmt: skip
    finally:
        nodes.terminate()
        nodes.wait()
        shutil.rmtree(scratch / "tsdb", ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=45)
    a = ap.parse_args()
    if not shutil.which("prometheus"):
        sys.exit("prometheus is not installed (Debian package prometheus)")
    bench = str(Path(a.before) / "prfaas-bench")
    results = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="prfaas-overhead-") as tmp:
        for i in range(a.runs):
            for side, bin_dir in (("before", a.before), ("after", a.after)):
                r = one_run(bin_dir, bench, side == "after", a.duration, Path(tmp))
                results[side].append(r)
                print(f"run {i + 1} {side:6s}: overhead p50 {r['overhead_p50']:.2f} ms, TTFT p50 "
                      f"{r['ttft_p50']:.1f} ms, {r['throughput']} req/s"
                      + (f", {r['pages']} /cluster reads" if side == "after" else ""), flush=True)  # fmt: skip
    med = {k: statistics.median(r["overhead_p50"] for r in v) for k, v in results.items()}
    ttft = {k: statistics.median(r["ttft_p50"] for r in v) for k, v in results.items()}
    print(f"median overhead p50: before {med['before']:.2f} ms, after (watched) {med['after']:.2f} ms"
          f" = {med['after'] / med['before']:.3f}x; TTFT p50 {ttft['before']:.1f} -> {ttft['after']:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
