"""Router overhead: the same minimal backend hit directly and through the router, in one run, with wrk.

Full routing is on: policy decision (default-style rules), session pin lookup (x-session-id), request log to
SQLite, metrics. Prints added p50/p99 latency at concurrency 1, req/s at concurrency 32, added time to first
byte for streams, and ratios against the direct run.  `--peers` also runs LiteLLM and the Rust vllm-router
(installed into .peers/ venvs by benchmarks/support/peers.py) against the same backend."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PY = sys.executable
WRK = shutil.which("wrk") or "/usr/bin/wrk"

BODY = {"model": "llama3-8b", "temperature": 0.8,
        "messages": [{"role": "system", "content": "You are a friendly assistant."},
                     {"role": "user", "content": "Write a short poem about the sea, please."}], "max_tokens": 64}
LUA = """
wrk.method = "POST"
wrk.body = [[%s]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["x-session-id"] = "bench-session"
done = function(summary, latency, requests)
  io.write(string.format("RESULT %%d %%d %%d %%d %%d %%d\\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
"""
POLICY = """version: 1
author: bench
created_at: "2026-01-01T00:00:00Z"
tiers:
  - name: fp16
    deployments: {llama3-8b: [bench-bf16]}
  - name: int4
    deployments: {llama3-8b: [bench-int4]}
rules:
  - name: greedy-structured
    weight: 6
    when:
      all:
        - temperature: {max: 0.2}
        - keywords: {any: [code, function, json, sql, python, math, solve, step by step], regex: ['```']}
  - name: long-output
    weight: 6
    when: {output_tokens: {min: 1001}}
  - name: creative-high-temp
    weight: -3
    when:
      all:
        - temperature: {min: 0.7}
        - keywords: {any: [story, poem, haiku, creative, joke]}
  - name: high-entropy-prompt
    weight: 1
    when: {entropy: {min: 5.0}}
thresholds:
  - {min_score: 6, tier: fp16}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def run_wrk(url: str, lua: Path, conns: int, seconds: int, threads: int = 1) -> dict:
    out = subprocess.run([WRK, f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "-s", str(lua), url],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"RESULT (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", out)
    if not m:
        raise RuntimeError(out)
    n, dur, p50, p99, bad_status, sock_err = map(int, m.groups())
    return {"requests": n, "rps": n / (dur / 1e6), "p50_ms": p50 / 1000, "p99_ms": p99 / 1000,
            "non2xx": bad_status, "socket_errors": sock_err}


def ttfb_ms(port: int, path: str, body: bytes, n: int = 300) -> float:
    """Median time from sending a streaming request to the first response byte (fresh connection each)."""
    req = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           f"x-session-id: bench-session\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    samples = []
    for _ in range(n):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t0 = time.perf_counter()
            s.sendall(req)
            s.recv(1)
            samples.append((time.perf_counter() - t0) * 1000)
            while s.recv(65536):
                pass
    return statistics.median(samples)


def start(cmd: list[str], env=None) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=REPO, env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def measure(label: str, port: int, path: str, lua: Path, seconds: int, stream_body: bytes | None) -> dict:
    url = f"http://127.0.0.1:{port}{path}"
    run_wrk(url, lua, 8, 1)  # warm-up: connections, caches, pins
    c1 = run_wrk(url, lua, 1, seconds)
    c32 = run_wrk(url, lua, 32, seconds)
    res = {"label": label, "p50_ms": c1["p50_ms"], "p99_ms": c1["p99_ms"], "rps32": c32["rps"],
           "errors": c1["non2xx"] + c1["socket_errors"] + c32["non2xx"] + c32["socket_errors"]}
    if stream_body is not None:
        res["ttfb_ms"] = ttfb_ms(port, path, stream_body)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--peers", action="store_true", help="also run LiteLLM and vllm-router (installs into .peers/)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="qr-bench-"))
    body = json.dumps(BODY).encode()
    stream_body = json.dumps({**BODY, "stream": True}).encode()
    lua = tmp / "post.lua"
    lua.write_text(LUA % body.decode())
    (tmp / "policies").mkdir()
    (tmp / "policies" / "policy-0001.yaml").write_text(POLICY)
    procs = []
    try:
        bport, bport16, rport = free_port(), free_port(), free_port()
        procs.append(start([PY, str(HERE / "support" / "fast_backend.py"), str(bport), "bench-int4"]))
        procs.append(start([PY, str(HERE / "support" / "fast_backend.py"), str(bport16), "bench-bf16"]))
        procs.append(start([PY, "-m", "quantroute.cli.main", "router", "--policies", str(tmp / "policies"),
                            "--port", str(rport), "--db", f"sqlite:///{tmp / 'bench.db'}", "--admin-token", "bench"]))
        for p in (bport, bport16, rport):
            wait_port(p)
        register(rport, bport, "bench-int4", "int4", "int4")
        register(rport, bport16, "bench-bf16", "fp16", "bf16")
        results = [measure("direct (backend)", bport, "/v1/chat/completions", lua, args.seconds, stream_body),
                   measure("quantroute router", rport, "/v1/chat/completions", lua, args.seconds, stream_body)]
        if args.peers:
            from support.peers import run_peers  # noqa: PLC0415 - only with --peers

            results += run_peers(bport, lua, args.seconds, stream_body, measure, tmp, body=body)
        report(results, tmp / "bench.db", peers=args.peers)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def register(rport: int, bport: int, deployment: str, tier: str, fmt: str) -> None:
    import httpx

    r = httpx.post(f"http://127.0.0.1:{rport}/admin/nodes", headers={"authorization": "Bearer bench"},
                   json={"url": f"http://127.0.0.1:{bport}", "model": "llama3-8b", "deployment": deployment,
                         "tier": tier, "format": fmt})
    r.raise_for_status()


def report(results: list[dict], db: Path, *, peers: bool = False) -> None:
    direct = results[0]
    print(f"{'target':<22}{'p50 ms':>9}{'p99 ms':>9}{'+p50 ms':>9}{'+p99 ms':>9}{'req/s@32':>11}{'x direct':>9}"
          f"{'TTFB ms':>9}{'+TTFB':>8}{'errors':>8}")
    for r in results:
        if "unavailable" in r:
            print(f"{r['label']:<22}  not measured: {r['unavailable']}")
            continue
        print(f"{r['label']:<22}{r['p50_ms']:>9.3f}{r['p99_ms']:>9.3f}{r['p50_ms'] - direct['p50_ms']:>9.3f}"
              f"{r['p99_ms'] - direct['p99_ms']:>9.3f}{r['rps32']:>11.0f}{r['rps32'] / direct['rps32']:>9.2f}"
              f"{r.get('ttfb_ms', float('nan')):>9.3f}{r.get('ttfb_ms', float('nan')) - direct.get('ttfb_ms', 0):>8.3f}"
              f"{r['errors']:>8}")
    if peers:
        from support.peers import REFERENCE  # noqa: PLC0415

        print("reference figures from issue #4 (not measured here): "
              + "; ".join(f"{k} {v}" for k, v in REFERENCE.items()))
    try:
        import sqlite3

        n = sqlite3.connect(db).execute("select count(*) from request_log").fetchone()[0]
        print(f"request_log rows written by the router during the run: {n}")
    except Exception as e:  # noqa: BLE001
        print(f"(request_log not readable: {e})")
    print("targets: +p50 <= 0.3 ms, >= 3000 req/s at 32, +TTFB <= 0.4 ms")


if __name__ == "__main__":
    main()
