"""The router's own upstream client (`FastUpstream`) against httpx on the router's hot path, in the same run.

Both send the same POST to the same minimal backend (benchmarks/support/fast_backend.py, in its own process) and
read the whole answer, the way the forwarder does: non-streamed and streamed (8 SSE chunks), at concurrency 1
(per-request cost) and 32 (throughput), on uvloop as the router runs. Rounds alternate the two clients so load
from the rest of the machine falls on both; each figure is the median of the rounds, and the ratio is
httpx's time over ours (> 1: ours is faster).

    python benchmarks/upstream_client.py [--requests 1000] [--rounds 3]"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import uvloop

from quantroute.ports import free_port
from quantroute.router.nodes.upstream import FastUpstream, HttpxUpstream
from support.procs import wait_port

HERE = Path(__file__).resolve().parent
BODY = orjson.dumps({"model": "llama3-8b", "messages": [{"role": "user", "content": "Write a short poem."}],
                     "max_tokens": 64})
STREAM_BODY = orjson.dumps({"model": "llama3-8b", "stream": True,
                            "messages": [{"role": "user", "content": "Write a short poem."}]})
HEADERS = [(b"content-type", b"application/json")]


def make_clients(base: str):
    fast = FastUpstream(connect_timeout=2, timeout=30, read_timeout=30)
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=None, max_keepalive_connections=512),
                               timeout=httpx.Timeout(30, connect=2))
    return {"own": (fast, fast.aclose), "httpx": (HttpxUpstream(client, read_timeout=30), client.aclose)}


async def one(upstream, base: str, body: bytes) -> None:
    resp = await upstream.post(base, "/v1/chat/completions", body, HEADERS)
    try:
        if resp.status_code != 200:
            raise RuntimeError(f"backend answered {resp.status_code}")
        async for _ in resp.aiter_raw():
            pass
    finally:
        await resp.aclose()


async def run(upstream, base: str, body: bytes, n: int, conc: int) -> float:
    """Seconds per request (wall time / n) for n requests at `conc` concurrency."""
    left = n

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one(upstream, base, body)

    await one(upstream, base, body)  # connect outside the timing
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    return (time.perf_counter() - t0) / n


async def bench(base: str, requests: int, rounds: int) -> dict:
    clients = make_clients(base)
    results: dict[tuple, list[float]] = {}
    cases = [("json", BODY), ("stream", STREAM_BODY)]
    for r in range(rounds):
        order = list(clients) if r % 2 == 0 else list(reversed(clients))
        for name in order:
            upstream, _ = clients[name]
            for kind, body in cases:
                for conc in (1, 32):
                    n = requests // (4 if conc == 1 else 1)
                    results.setdefault((name, kind, conc), []).append(await run(upstream, base, body, n, conc))
    for _, close in clients.values():
        await close()
    return {k: statistics.median(v) for k, v in results.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1000, help="requests per measurement at c=32 (c=1: a quarter)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    port = free_port()
    backend = subprocess.Popen([sys.executable, str(HERE / "support" / "fast_backend.py"), str(port)])
    try:
        wait_port(port, timeout=30, proc=backend)
        med = uvloop.run(bench(f"http://127.0.0.1:{port}", args.requests, args.rounds))
    finally:
        backend.terminate()
        backend.wait(10)
    print(f"upstream client on the router's path: median of {args.rounds} alternating rounds, same backend")
    print(f"{'case':<14}{'own µs/req':>12}{'httpx µs/req':>14}{'httpx/own':>11}")
    for kind in ("json", "stream"):
        for conc in (1, 32):
            own, hx = med[("own", kind, conc)], med[("httpx", kind, conc)]
            print(f"{kind + ' c=' + str(conc):<14}{own * 1e6:>12.0f}{hx * 1e6:>14.0f}{hx / own:>10.2f}x")


if __name__ == "__main__":
    main()
