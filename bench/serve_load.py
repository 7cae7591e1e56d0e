#!/usr/bin/env python3
"""Load on folio serve: N concurrent streaming clients for a fixed time, or a soak.

    python3 bench/serve_load.py load --checkpoint RUN [--streams 1,4,16,64] [--seconds 30]
                                     [--slots 16] [--no-batching] [--max-tokens 128]
    python3 bench/serve_load.py soak --checkpoint RUN [--seconds 600] [--slots 8]
    python3 bench/serve_load.py load --url http://127.0.0.1:PORT [--pid PID] [--body JSON]
                                     [--prompt-ids 1,2,3] [--streams 1,4,16] ...

load: for each N, a fresh `folio serve`, N clients that each stream completions
back to back (max_tokens tokens each) until the time is up. Reports aggregate
tokens/s, p50/p99 time to first token and of the time per token after it (each
request's mean, as events may carry several tokens), errors, 503s, RSS.
With --url, load drives a server that is already running instead (any server with an
OpenAI-compatible streamed /v1/completions, e.g. llama-server), the same clients and
the same figures; --pid names its process for RSS, --body adds fields to every request
(e.g. '{"ignore_eos": true}' so that it generates max_tokens), and --prompt-ids sends the
prompt as token ids, so both servers start from the same tokens whatever their
tokenizers make of the text. --json-only prints the rows alone (one JSON object per
line), for scripts such as bench/peer/llamacpp/server.sh.
soak: mixed clients (streamed and whole completions, tokenize, attention), some
killed at random mid-stream, for --seconds; then checks that /health shows no busy
slot and nothing queued, and prints RSS over time.
The clients only split events and parse the last one, to leave the cores to the
server; they run on the same machine, so they still cost it some CPU.
"""
import argparse
import http.client
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_server(args, extra):
    log = tempfile.NamedTemporaryFile("w+", prefix="folio-serve-load.", suffix=".log", delete=False)
    cmd = [args.binary, "serve", "--checkpoint", args.checkpoint, "--port", "0", "--slots", str(args.slots),
           "--queue", str(args.queue)] + extra
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(400):
        log.seek(0)
        m = re.search(r"on http://127\.0\.0\.1:(\d+)/", log.read())
        if m:
            return proc, int(m.group(1)), " ".join(cmd)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    log.seek(0)
    sys.exit("folio serve did not start: " + log.read())


def refuse(message):
    """Bad options: a clear message and exit 2."""
    print(f"serve_load.py: {message}", file=sys.stderr)
    sys.exit(2)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def stream_once(port, body, stats, lock, kill_after=None, host="127.0.0.1"):
    """One streamed completion; records time to first token, gaps, tokens, status."""
    t0 = time.perf_counter()
    try:
        c = http.client.HTTPConnection(host, port, timeout=60)
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            r.read()
            with lock:
                stats["status"][r.status] = stats["status"].get(r.status, 0) + 1
            c.close()
            return
        buf, last, first, t_first, events, tokens, done = b"", None, None, None, 0, 0, False
        while not done:
            chunk = r.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                if not event.startswith(b"data: "):
                    continue
                data = event[6:]
                if data == b"[DONE]":
                    done = True
                    break
                now = time.perf_counter()
                if b'"usage"' in data:
                    tokens = json.loads(data)["usage"]["completion_tokens"]
                    continue
                events += 1
                if first is None:
                    first = now - t0
                    t_first = now
                last = now
                if kill_after is not None and events >= kill_after:
                    c.sock.shutdown(socket.SHUT_RDWR)
                    c.close()
                    with lock:
                        stats["killed"] += 1
                    return
        c.close()
        with lock:
            if done:
                stats["status"][200] = stats["status"].get(200, 0) + 1
                stats["tokens"] += tokens
                if first is not None:
                    stats["ttft"].append(first)
                if tokens > 1 and first is not None:
                    # per token after the first, for this request: several tokens may
                    # arrive in one event when the client reads slower than they come
                    stats["gaps"].append((last - t_first) / (tokens - 1))
            else:
                stats["errors"] += 1
    except Exception as e:  # a refused or broken connection is an error
        with lock:
            stats["errors"] += 1
            stats["error_kinds"][type(e).__name__] = stats["error_kinds"].get(type(e).__name__, 0) + 1


def pct(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def load(args):
    url = None
    if args.url:
        url = urllib.parse.urlsplit(args.url)
        if url.scheme != "http" or not url.hostname or not url.port:
            refuse(f"--url must be http://HOST:PORT, got {args.url!r}")
    elif not args.checkpoint:
        refuse("load needs --checkpoint (a run to serve) or --url (a server already running)")
    extra = ["--max-tokens", str(args.max_tokens)] + (["--no-batching"] if args.no_batching else [])
    extra += ["--threads", str(args.threads), "--weights", args.weights]
    rows = []
    body = {"prompt": "ROMEO:\n", "max_tokens": args.max_tokens, "temperature": 0.8, "stream": True}
    if args.prompt_ids:
        body["prompt"] = [int(x) for x in args.prompt_ids.split(",")]
    if args.body:
        body.update(json.loads(args.body))
    for n in [int(x) for x in args.streams.split(",")]:
        if args.url:  # a server already running: the same for every N
            host, port, pid = url.hostname, url.port, args.pid
            cmd = f"{args.url} (already running)"
        else:
            proc, port, cmd = start_server(args, extra)
            host, pid = "127.0.0.1", proc.pid
        stats = {"status": {}, "tokens": 0, "ttft": [], "gaps": [], "errors": 0, "error_kinds": {}, "killed": 0}
        lock = threading.Lock()
        stream_once(port, body, {"status": {}, "tokens": 0, "ttft": [], "gaps": [], "errors": 0, "error_kinds": {},
                                 "killed": 0}, lock, host=host)  # warm up
        deadline = time.perf_counter() + args.seconds
        rss = []

        def client():
            while time.perf_counter() < deadline:
                stream_once(port, body, stats, lock, host=host)

        threads = [threading.Thread(target=client) for _ in range(n)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            if pid:
                rss.append(rss_kib(pid))
            time.sleep(0.5)
        elapsed = time.perf_counter() - t0
        if not args.url:
            proc.terminate()
            proc.wait(timeout=30)
        row = {"streams": n, "tokens_per_s": stats["tokens"] / elapsed,
               "ttft_p50_ms": 1e3 * pct(stats["ttft"], 50), "ttft_p99_ms": 1e3 * pct(stats["ttft"], 99),
               "gap_p50_ms": 1e3 * pct(stats["gaps"], 50), "gap_p99_ms": 1e3 * pct(stats["gaps"], 99),
               "ok": stats["status"].get(200, 0), "503": stats["status"].get(503, 0),
               "errors": stats["errors"] + sum(v for k, v in stats["status"].items() if k not in (200, 503)),
               "rss_max_mib": max(rss) / 1024 if rss else float("nan")}
        rows.append(row)
        if not args.json_only:
            print(f"# {cmd}", flush=True)
        print(json.dumps(row), flush=True)
    if args.json_only:
        return
    print("\n| streams | tokens/s | TTFT p50 / p99 (ms) | per token p50 / p99 (ms) | completions | 503 | errors | RSS max (MiB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['streams']} | {r['tokens_per_s']:.0f} | {r['ttft_p50_ms']:.1f} / {r['ttft_p99_ms']:.1f} | "
              f"{r['gap_p50_ms']:.2f} / {r['gap_p99_ms']:.2f} | {r['ok']} | {r['503']} | {r['errors']} | "
              f"{r['rss_max_mib']:.0f} |")


def soak(args):
    proc, port, cmd = start_server(args, ["--max-tokens", "256", "--threads", str(args.threads)])
    print(f"# {cmd}", flush=True)
    stats = {"status": {}, "tokens": 0, "ttft": [], "gaps": [], "errors": 0, "error_kinds": {}, "killed": 0}
    lock = threading.Lock()
    deadline = time.perf_counter() + args.seconds
    rng = random.Random(args.seed)

    def client(i):
        r = random.Random(args.seed + i)
        while time.perf_counter() < deadline:
            kind = r.random()
            if kind < 0.6:  # a stream, a third of them killed mid-way
                kill = r.randint(1, 40) if r.random() < 0.33 else None
                stream_once(port, {"prompt": r.choice(["ROMEO:", "First Citizen:\n", "The "]),
                                   "max_tokens": r.randint(1, 256), "temperature": r.uniform(0, 1.5),
                                   "stream": True}, stats, lock, kill)
            else:
                path, body = r.choice([("/v1/completions", {"prompt": "KING:", "max_tokens": r.randint(1, 64)}),
                                       ("/tokenize", {"content": "To be, or not to be"}),
                                       ("/v1/attention", {"prompt": "To be, or not"})])
                try:
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
                    resp = c.getresponse()
                    resp.read()
                    c.close()
                    with lock:
                        stats["status"][resp.status] = stats["status"].get(resp.status, 0) + 1
                except Exception as e:
                    with lock:
                        stats["errors"] += 1
                        stats["error_kinds"][type(e).__name__] = stats["error_kinds"].get(type(e).__name__, 0) + 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    samples = []
    t0 = time.perf_counter()
    while any(t.is_alive() for t in threads):
        samples.append((time.perf_counter() - t0, rss_kib(proc.pid)))
        time.sleep(10 if args.seconds > 60 else 1)
    time.sleep(1)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/health")
    health = json.loads(c.getresponse().read())
    end_rss = rss_kib(proc.pid)
    proc.terminate()
    code = proc.wait(timeout=30)
    print("RSS (s, MiB):", " ".join(f"{t:.0f}:{k / 1024:.0f}" for t, k in samples))
    print(json.dumps({"health_after": health, "rss_end_mib": end_rss / 1024, "status": stats["status"],
                      "killed_mid_stream": stats["killed"], "errors": stats["errors"],
                      "error_kinds": stats["error_kinds"], "tokens": stats["tokens"], "exit": code}))
    leaked = health["slots_processing"] != 0 or health["queued"] != 0
    print("leaked slots" if leaked else "no leaked slots")
    sys.exit(1 if leaked or code != 0 else 0)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["load", "soak"])
    p.add_argument("--binary", default=os.path.join(HERE, "build", "folio"))
    p.add_argument("--checkpoint", help="the run folio serve serves (not with --url)")
    p.add_argument("--url", help="load: drive this running server (http://HOST:PORT) instead of starting folio serve")
    p.add_argument("--pid", type=int, help="with --url: the server's process, for RSS")
    p.add_argument("--body", help="JSON object merged into every load request")
    p.add_argument("--prompt-ids", help="load: the prompt as comma-separated token ids")
    p.add_argument("--json-only", action="store_true", help="load: print the rows as JSON lines only")
    p.add_argument("--streams", default="1,4,16,64")
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--slots", type=int, default=16)
    p.add_argument("--queue", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--no-batching", action="store_true")
    p.add_argument("--weights", default="f32", help="folio serve --weights (f32 or int8)")
    p.add_argument("--clients", type=int, default=24)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.mode == "soak" and (args.url or not args.checkpoint):
        refuse("soak starts folio serve itself: it needs --checkpoint and takes no --url")
    (load if args.mode == "load" else soak)(args)


if __name__ == "__main__":
    main()
