#!/usr/bin/env python3
"""folio serve under hostile input, from outside, on a tiny trained checkpoint.

Each check sends something a careless or malicious client might: a 100 MB body, a
flood of headers, a client that trickles its request, a 1 MB prompt, 1,000
connections opened and dropped, max_tokens of 10^9, NaN, negative and huge
temperatures, a prompt that is not UTF-8, a stop string that is half a character,
a wrong key. Every answer must be the designed one (an OpenAI error object with the
right status), /health must answer between every check, and the server's RSS after
the burst must come back near where it started.
    test_serve_hostile.py FOLIO_BINARY
"""
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

folio = sys.argv[1]
here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
work = tempfile.mkdtemp(prefix="folio-serve-hostile.")
failures = []


def check(ok, what):
    print(("ok      " if ok else "FAILED  ") + what, flush=True)
    if not ok:
        failures.append(what)


with open(os.path.join(here, "data", "tinyshakespeare.txt"), "rb") as f:
    corpus = f.read(20000)
with open(os.path.join(work, "corpus.txt"), "wb") as f:
    f.write(corpus)
subprocess.run([folio, "train", "--data", os.path.join(work, "corpus.txt"), "--out", os.path.join(work, "run"),
                "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16", "--batch-size", "4",
                "--max-iters", "10", "--eval-interval", "10", "--eval-iters", "2", "--quiet", "--threads", "1"],
               check=True)
log = open(os.path.join(work, "serve.log"), "w+")
server = subprocess.Popen([folio, "serve", "--checkpoint", os.path.join(work, "run"), "--port", "0", "--threads", "1",
                           "--api-key", "hostile-key", "--max-tokens", "64", "--max-body", str(2 << 20),
                           "--slots", "2", "--queue", "4"], stdout=log, stderr=subprocess.STDOUT)
port = None
for _ in range(200):
    log.seek(0)
    m = re.search(r"on http://127\.0\.0\.1:(\d+)/", log.read())
    if m:
        port = int(m.group(1))
        break
    time.sleep(0.05)
if port is None:
    log.seek(0)
    sys.exit("folio serve did not start: " + log.read())
AUTH = {"Authorization": "Bearer hostile-key", "Content-Type": "application/json"}


def rss_kib():
    with open(f"/proc/{server.pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def request(method, path, body=None, headers=None, timeout=20):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), data


def healthy(after):
    status, _, body = request("GET", "/health", timeout=5)
    check(status == 200 and json.loads(body)["status"] == "ok", f"/health answers after {after}")


def expect_error(status_wanted, body, what, headers=AUTH, fragment=""):
    status, _, data = request("POST", "/v1/completions", body, headers)
    try:
        err = json.loads(data)["error"]
        shaped = err["code"] == status_wanted and "message" in err and "type" in err
        said = fragment in err["message"]
    except (ValueError, KeyError, TypeError):
        shaped = said = False
    check(status == status_wanted and shaped and said, f"{what}: {status} {data[:120]!r}")
    healthy(what)


def raw(payload_chunks, read=True, timeout=10):
    """Sends bytes on a raw connection; returns what came back (b"" on reset)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        for chunk in payload_chunks:
            s.sendall(chunk)
        if not read:
            return b""
        out = b""
        while True:
            part = s.recv(65536)
            if not part:
                break
            out += part
            if b"\r\n\r\n" in out and len(out) > 200:
                break
        return out
    except (ConnectionResetError, BrokenPipeError, socket.timeout):
        return b""
    finally:
        s.close()


try:
    healthy("start")
    request("POST", "/v1/completions", json.dumps({"prompt": "ROMEO:", "max_tokens": 64}), AUTH)  # warm up
    baseline = rss_kib()

    # Bad fields.
    expect_error(400, b"{\"prompt\": ", "malformed JSON", fragment="not valid JSON")
    expect_error(400, json.dumps({"prompt": ["a", "b"]}), "a wrong type", fragment="prompt")
    expect_error(400, json.dumps({"prompt": "a", "max_tokens": 10**9}), "max_tokens 10^9", fragment="max_tokens")
    expect_error(400, b'{"prompt": "a", "temperature": NaN}', "NaN temperature", fragment="not valid JSON")
    expect_error(400, json.dumps({"prompt": "a", "temperature": -0.5}), "negative temperature", fragment="temperature")
    expect_error(400, json.dumps({"prompt": "a", "temperature": 1e308}), "huge temperature", fragment="temperature")
    expect_error(400, b'{"prompt": "ROMEO\xff\xfe"}', "a non-UTF-8 prompt", fragment="UTF-8")
    expect_error(400, b'{"prompt": "a", "stop": "\xc3"}', "a stop string that is half a character", fragment="UTF-8")
    expect_error(400, json.dumps({"prompt": "a" * 1_000_000}), "a 1 MB prompt", fragment="limit")
    expect_error(401, json.dumps({"prompt": "a"}), "a wrong key",
                 headers={"Authorization": "Bearer nope", "Content-Type": "application/json"}, fragment="wrong API key")
    status, _, _ = request("GET", "/etc/passwd")
    check(status == 401, "a path that names a file is just an unknown route behind the key")
    status, _, data = request("GET", "/../../etc/passwd", headers=AUTH)
    check(status in (400, 404) and b"root:" not in data, f"no file is ever served: {status}")
    healthy("paths")

    # A 100 MB body: refused with 413 from its Content-Length, without being held.
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hostile-key\r\n"
            f"Content-Type: application/json\r\nContent-Length: {100 << 20}\r\n\r\n").encode()
    got = raw([head, b"x" * (1 << 20)] + [b"x" * (1 << 20)] * 99)
    check(got == b"" or got.startswith(b"HTTP/1.1 413"), f"a 100 MB body: {got[:40]!r}")
    healthy("a 100 MB body")

    # A flood of headers: 20,000 of them, 1.3 MB.
    flood = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-Flood-%d: %s\r\n" % (i, b"y" * 50)
                                                            for i in range(20000)) + b"\r\n"
    got = raw([flood])
    check(got == b"" or got.startswith(b"HTTP/1.1 "), f"a header flood of 20,000 headers: answered {got[:30]!r}")
    healthy("a header flood")

    # A slow client trickling its headers, while others are served.
    def trickle():
        raw([b"POST /v1/completions HTTP/1.1\r\n"] + [b"X-Slow: 1\r\n"] * 1, read=True, timeout=15)
    slow = threading.Thread(target=trickle)
    slow.start()
    t0 = time.time()
    healthy("a slow client connected")
    status, _, _ = request("POST", "/v1/completions", json.dumps({"prompt": "a", "max_tokens": 8}), AUTH)
    check(status == 200 and time.time() - t0 < 5, "a completion is served while a slow client trickles")
    slow.join()

    # 1,000 connections opened and dropped, some mid-request.
    for i in range(1000):
        s = socket.create_connection(("127.0.0.1", port))
        if i % 2:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro")
        s.close()
    healthy("1,000 connections opened and dropped")

    # Streams dropped mid-way free their slots.
    for _ in range(20):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("POST", "/v1/completions", json.dumps({"prompt": "ROMEO:", "max_tokens": 64, "stream": True}), AUTH)
        r = c.getresponse()
        r.read(20)
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
    deadline = time.time() + 5
    while time.time() < deadline:
        h = json.loads(request("GET", "/health")[2])
        if h["slots_processing"] == 0 and h["queued"] == 0:
            break
        time.sleep(0.05)
    check(h["slots_processing"] == 0 and h["queued"] == 0, f"dropped streams left no busy slot: {h}")

    # Memory after the burst: within 32 MiB of where it started.
    time.sleep(1)
    after = rss_kib()
    check(after - baseline < 32 << 10, f"RSS {baseline} KiB before the burst, {after} KiB after")
    healthy("everything")
finally:
    server.terminate()
    try:
        code = server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.kill()
        code = "killed"
    check(code == 0, f"SIGTERM: exit {code}")
    shutil.rmtree(work, ignore_errors=True)

if failures:
    sys.exit(f"{len(failures)} checks failed")
print("all hostile-input checks passed")
