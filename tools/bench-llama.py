#!/usr/bin/env python3
"""prfaas on llama.cpp side by side with llama.cpp's own server, same GGUF, same machine,
same run.

    tools/bench-llama.py --trace data/traces/mooncake_synthetic_trace.jsonl [--runs 3] [--model GGUF] [--json OUT]

Both serve the same GGUF (by default build/models/bench-qwen35-f16.gguf, written by
prfaas-gguf --size bench on first use: Qwen3.5-0.8B's shape, random weights) through
their OpenAI-compatible endpoints, measured by this one client:

  single-stream decode  tokens/s of one stream (32-token prompt, 128 tokens, greedy),
                        between its first and its last token; median of 3 requests
  8-stream aggregate    8 concurrent streams like the above: output tokens / wall time
  TTFT 4K               time to the first token of a fresh 4096-token prompt
  shared prefix         requests of the trace whose first block another request shares
                        (Mooncake hash_ids: equal ids are a shared 512-token block), in
                        order, scaled to --block-tokens per id, a few output tokens each,
                        one at a time: prompt tokens each server reused from its cache
                        (prfaas: usage.prompt_tokens_details.cached_tokens; llama-server:
                        timings.cache_n)
  prefix reuse (prfaas) engine prefill time of a 2304-token prompt whose first 2112 tokens
                        are cached, over the same prompt uncached

Runs interleave the two servers (prfaas first in even runs); every figure is the median
of --runs runs. The settings:

  prfaas        configs/llama-local.yaml's topology in one process (prfaas-node --all):
                PrfaaS prefill node, PD prefill and decode workers (max_batch 8: a
                decode step of 8 streams, 8 queued prompts prefilled together), on the
                GGUF with context 8192, batch/ubatch 512, 2 threads per worker; 4K
                prompts are offloaded (threshold 256) and their state crosses the
                emulated link.
                Its prefill workers keep a recurrent-state checkpoint every
                --checkpoint-tokens (checkpoint_blocks) and load the weights into
                llama.cpp's extra buffer types (AMX, repacked layouts: faster prefill
                where the CPU has them; --prfaas-extra-buffer-types), its decode worker
                does not (docs/llama.md, "Extra buffer types"). Its contexts run without
                flash attention (docs/llama.md, "Batch invariance").
  llama-server  -np 8 -t 2 -tb 2 -b 512 -ub 512 -c 65536 (8192 a slot), flash attention
                and extra buffer types at its defaults (auto, on; --llama-server-arg to
                change them), context checkpoints on for hybrid reuse (-ctxcp 32
                -cms <checkpoint tokens>), prompt cache in RAM (its default 8 GiB), no web UI.
"""

import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def llama_dir():
    return subprocess.check_output(["bash", os.path.join(ROOT, "tools/llama-cpp.sh"), "--dir"], text=True).strip()


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_http(port, path, timeout, ok=lambda body: True):
    end = time.time() + timeout
    while time.time() < end:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            r = c.getresponse()
            body = r.read().decode(errors="replace")
            if r.status == 200 and ok(body):
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


class server:
    """A running server: prfaas (one process, llama-local topology) or llama-server."""

    def __init__(self, kind, model, block_tokens, checkpoint_tokens, workdir, peer_args=(), extra_bufts="prefill"):
        self.kind = kind
        self.port = free_port()
        self.log = open(os.path.join(workdir, kind + ".log"), "w")
        if kind == "prfaas":
            with open(os.path.join(ROOT, "configs/llama-local.yaml")) as f:
                text = f.read()
            ports = {}
            def repl(m):
                old = int(m.group(1))
                ports.setdefault(old, free_port())
                return "127.0.0.1:%d" % ports[old]
            text = re.sub(r"127\.0\.0\.1:([0-9]+)", repl, text)
            text = re.sub(r"gguf: .*", "gguf: " + model, text)
            text = re.sub(r"context: [0-9]+", "context: 8192", text)
            text = re.sub(r"threads: [0-9]+", "threads: 2", text)
            text = re.sub(r"block_tokens: [0-9]+", "block_tokens: %d" % block_tokens, text)
            # As llama-server's -np 8: up to 8 queued prompts prefilled together.
            text = re.sub(r"(type: prefill_worker, )", r"\1max_batch: 8, ", text)
            # The weight layout of each worker (docs/llama.md, "Extra buffer types").
            if extra_bufts in ("prefill", "all"):
                text = re.sub(r"(type: prefill_worker, )", r"\1extra_buffer_types: true, ", text)
            if extra_bufts == "all":
                text = re.sub(r"(type: decode_worker, )", r"\1extra_buffer_types: true, ", text)
            text = re.sub(r"checkpoint_blocks: [0-9]+", "checkpoint_blocks: %d" % (checkpoint_tokens // block_tokens), text)
            self.port = ports[8000]
            self.admin = ports[9101]
            cfg = os.path.join(workdir, "prfaas.yaml")
            with open(cfg, "w") as f:
                f.write(text)
            argv = [os.path.join(ROOT, "build/bin/prfaas-node"), "--config", cfg, "--all"]
        else:
            argv = [os.path.join(llama_dir(), "build/bin/llama-server"), "-m", model, "--port", str(self.port),
                    "-np", "8", "-t", "2", "-tb", "2", "-b", "512", "-ub", "512", "-c", str(8192 * 8),
                    "-ctxcp", "32", "-cms", str(checkpoint_tokens), "--no-webui"] + list(peer_args)
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        # Ready when the scheduler routes to the decode worker and both prefill workers
        # (each builds its context of max_batch sequences on its own thread).
        ready = (wait_http(self.admin, "/metrics", 180, lambda b: re.search(
                     r'prfaas_scheduler_routable_workers\{[^}]*role="decode"[^}]*\} 1', b) is not None
                     and re.search(r'prfaas_scheduler_routable_workers\{[^}]*role="prefill"[^}]*\} 2', b)
                     is not None)
                 if kind == "prfaas" else wait_http(self.port, "/health", 180))
        if not ready:
            code = self.proc.poll()
            self.stop()
            with open(self.log.name) as f:
                tail = f.readlines()[-30:]
            raise RuntimeError("%s did not become ready (%s); the end of its log:\n%s" % (
                kind, "exited with %d" % code if code is not None else "still running after 180 s",
                "".join(tail)))
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("GET", "/v1/models")
        self.model_id = json.loads(c.getresponse().read())["data"][0]["id"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def stream(port, model_id, prompt, max_tokens, extra=None):
    """One streamed completion: (first-token time, last-token time, tokens, final usage/timings)."""
    body = {"model": model_id, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    body.update(extra or {})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.perf_counter()
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, r.read()[:300]))
    first = last = None
    chunks = 0
    final = {}
    buf = b""
    while True:
        line = r.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            break
        ev = json.loads(data)
        for key in ("usage", "timings", "prfaas"):
            if key in ev and ev[key]:
                final[key] = ev[key]
        for ch in ev.get("choices", []):
            if ch.get("text"):
                now = time.perf_counter()
                first = first or now
                last = now
                chunks += 1
    tokens = final.get("usage", {}).get("completion_tokens", chunks)
    return {"start": start, "first": first, "last": last, "tokens": tokens, "final": final}


def complete(port, model_id, prompt, max_tokens):
    body = {"model": model_id, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError("HTTP %d: %s" % (r.status, data[:300]))
    return json.loads(data)


def pd_prefill_decodes(srv):
    """prfaas: the PD prefill worker's llama_decode calls so far (None for llama-server)."""
    if srv.kind != "prfaas":
        return None
    c = http.client.HTTPConnection("127.0.0.1", srv.admin, timeout=10)
    c.request("GET", "/metrics")
    body = c.getresponse().read().decode(errors="replace")
    m = re.search(r'prfaas_engine_llama_prefill_decodes_total\{[^}]*worker="pdp0"[^}]*\} ([0-9.e+]+)', body)
    return float(m.group(1)) if m else 0.0


def random_prompt(rng, n, vocab):
    return [rng.randrange(vocab) for _ in range(n)]


def shared_prefix_requests(trace, count, block_tokens, vocab, seed):
    """Token prompts from a Mooncake trace: each hash id a fixed block of tokens. The
    requests taken are those whose first block another request of the trace's first
    2000 shares (conversations and shared system prompts), in the trace's order."""
    rows = []
    with open(trace) as f:
        for line in f:
            rows.append(json.loads(line))
            if len(rows) >= 2000:
                break
    first = {}
    for r in rows:
        if r["hash_ids"]:
            first[r["hash_ids"][0]] = first.get(r["hash_ids"][0], 0) + 1
    blocks = {}
    out = []
    for r in rows:
        ids = r["hash_ids"]
        if len(out) >= count:
            break
        if not ids or first[ids[0]] < 2:
            continue
        n = max(1, r["input_length"] * block_tokens // 512)
        toks = []
        for h in ids:
            if h not in blocks:
                brng = random.Random(seed * 1000003 + h)
                blocks[h] = [brng.randrange(vocab) for _ in range(block_tokens)]
            toks.extend(blocks[h])
        out.append(toks[:n])
    return out


def measure(srv, model_id, args, run, vocab, shared):
    rng = random.Random(1000 + run)
    res = {}
    # Warm-up: one short request (pages of the weights, first-use allocations).
    complete(srv.port, model_id, random_prompt(rng, 16, vocab), 4)
    # Single-stream decode.
    rates = []
    for _ in range(3):
        s = stream(srv.port, model_id, random_prompt(rng, 32, vocab), args.decode_tokens)
        rates.append((s["tokens"] - 1) / (s["last"] - s["first"]))
    res["single_stream_tps"] = statistics.median(rates)
    # 8 streams at once.
    outs = [None] * 8
    prompts = [random_prompt(rng, 32, vocab) for _ in range(8)]
    def one(i):
        outs[i] = stream(srv.port, model_id, prompts[i], args.decode_tokens)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    decodes = pd_prefill_decodes(srv)
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t1 = time.perf_counter()
    res["eight_stream_tps"] = sum(o["tokens"] for o in outs) / (t1 - t0)
    if decodes is not None:  # prfaas: llama_decode calls the PD prefill worker took for the 8
        res["eight_stream_prefill_decodes"] = pd_prefill_decodes(srv) - decodes
    # TTFT of a fresh 4K prompt (the same prompt for both servers in this run).
    prompt4k = random_prompt(random.Random(50000 + run), 4096, vocab)
    s = stream(srv.port, model_id, prompt4k, 1)
    res["ttft_4k_s"] = s["first"] - s["start"]
    # Shared-prefix workload, one request at a time.
    reused = 0
    total = 0
    t0 = time.perf_counter()
    for p in shared:
        r = complete(srv.port, model_id, p, args.shared_output)
        total += r["usage"]["prompt_tokens"]
        if srv.kind == "prfaas":
            reused += r["usage"]["prompt_tokens_details"]["cached_tokens"]
        else:
            reused += r.get("timings", {}).get("cache_n", 0)
    res["shared_prompt_tokens"] = total
    res["shared_reused_tokens"] = reused
    res["shared_wall_s"] = time.perf_counter() - t0
    if srv.kind == "prfaas":
        # Prefix reuse: 2304 tokens uncached, then the same with 2112 (92%) cached.
        base = random_prompt(random.Random(70000 + run), 2304, vocab)
        cold = complete(srv.port, model_id, base, 1)["prfaas"]["engine_prefill_ms"]
        warm_prompt = base[:2112] + random_prompt(random.Random(80000 + run), 192, vocab)
        warm = complete(srv.port, model_id, warm_prompt, 1)
        res["reuse_cached_tokens"] = warm["prfaas"]["cached_tokens"]
        res["reuse_time_ratio"] = warm["prfaas"]["engine_prefill_ms"] / cold
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", required=True, help="Mooncake-format JSONL (timestamp, input_length, output_length, hash_ids)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--model", default=os.path.join(ROOT, "build/models/bench-qwen35-f16.gguf"))
    ap.add_argument("--shared-requests", type=int, default=30)
    ap.add_argument("--block-tokens", type=int, default=32, help="tokens per trace hash id (the trace's 512, scaled)")
    ap.add_argument("--checkpoint-tokens", type=int, default=512,
                    help="recurrent-state checkpoint spacing, both servers (prfaas checkpoint_blocks, llama-server -cms)")
    ap.add_argument("--shared-output", type=int, default=4)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--llama-server-arg", action="append", default=[], metavar="ARG",
                    help="one more llama-server argument (repeatable), e.g. --llama-server-arg=--no-repack")
    ap.add_argument("--prfaas-extra-buffer-types", choices=["prefill", "none", "all"], default="prefill",
                    help="which prfaas workers load the weights into llama.cpp's extra buffer types "
                         "(AMX, repacked layouts) where the CPU has them: the prefill workers (default), "
                         "none, or the decode worker too")
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args()

    if not os.path.exists(args.model):
        log("writing %s (prfaas-gguf --size bench)" % args.model)
        os.makedirs(os.path.dirname(args.model), exist_ok=True)
        subprocess.check_call([os.path.join(ROOT, "build/bin/prfaas-gguf"), "--arch", "qwen35", "--size", "bench",
                               "--type", "f16", "-o", args.model])
    vocab = 151936
    shared = shared_prefix_requests(args.trace, args.shared_requests, args.block_tokens, vocab, 7)
    workdir = tempfile.mkdtemp(prefix="prfaas-bench-llama-")
    results = {"prfaas": [], "llama-server": []}
    try:
        for run in range(args.runs):
            order = ["prfaas", "llama-server"] if run % 2 == 0 else ["llama-server", "prfaas"]
            for kind in order:
                log("run %d: %s" % (run + 1, kind))
                srv = server(kind, args.model, args.block_tokens, args.checkpoint_tokens, workdir,
                             args.llama_server_arg, args.prfaas_extra_buffer_types)
                try:
                    r = measure(srv, srv.model_id, args, run, vocab, shared)
                finally:
                    srv.stop()
                log("  " + json.dumps(r))
                results[kind].append(r)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    def med(kind, key):
        return statistics.median(r[key] for r in results[kind])

    rows = [("single-stream decode (tokens/s)", "single_stream_tps", True),
            ("8-stream aggregate (tokens/s)", "eight_stream_tps", True),
            ("TTFT, 4096-token prompt (s)", "ttft_4k_s", False),
            ("shared prefix: reused prompt tokens", "shared_reused_tokens", True)]
    print("%d interleaved runs, medians; %s; prfaas extra buffer types: %s%s" % (
          args.runs, os.path.basename(args.model), args.prfaas_extra_buffer_types,
          "; llama-server also " + " ".join(args.llama_server_arg) if args.llama_server_arg else ""))
    print("%-40s %14s %14s %9s" % ("", "prfaas", "llama-server", "ratio"))
    verdicts = []
    for label, key, higher in rows:
        a, b = med("prfaas", key), med("llama-server", key)
        ratio = a / b if b else float("inf")
        print("%-40s %14.2f %14.2f %8.3fx" % (label, a, b, ratio))
    total = med("prfaas", "shared_prompt_tokens")
    print("%-40s %14d" % ("shared prefix: prompt tokens in all", total))
    print("%-40s %14.3f   (target <= 0.2; %d of 2304 tokens cached)" % (
        "prefix reuse: cached / uncached prefill", med("prfaas", "reuse_time_ratio"), med("prfaas", "reuse_cached_tokens")))
    checks = [("single-stream decode >= 95%", med("prfaas", "single_stream_tps") >= 0.95 * med("llama-server", "single_stream_tps")),
              ("8-stream aggregate >= 95%", med("prfaas", "eight_stream_tps") >= 0.95 * med("llama-server", "eight_stream_tps")),
              ("TTFT within 5%", med("prfaas", "ttft_4k_s") <= 1.05 * med("llama-server", "ttft_4k_s")),
              ("reused tokens >= llama-server's",
               None if med("prfaas", "shared_reused_tokens") == 0 and med("llama-server", "shared_reused_tokens") == 0
               else med("prfaas", "shared_reused_tokens") >= med("llama-server", "shared_reused_tokens")),
              ("prefix reuse time ratio <= 0.2", med("prfaas", "reuse_time_ratio") <= 0.2)]
    for name, ok in checks:
        # Neither server reusing anything says nothing: too few requests share a prefix
        # as long as a recurrent-state checkpoint (--checkpoint-tokens).
        verdict = ("not measured: no reuse on either side (more --shared-requests)" if ok is None
                   else "meets target" if ok else "MISSES target")
        print("  %-36s %s" % (name, verdict))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(results, llama_server_extra_args=args.llama_server_arg,
                           prfaas_extra_buffer_types=args.prfaas_extra_buffer_types), f, indent=1)


if __name__ == "__main__":
    main()
