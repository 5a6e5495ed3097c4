"""A client that disconnects mid-generation aborts its request, streamed or not, as vLLM's server does: the
sequence leaves the batch (its slot free for the next request) and gives back its KV blocks, and it is never
counted as a finished request."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import wait_until


def info(url: str) -> dict:
    return httpx.get(url + "/sim/info", timeout=10).json()


def finished(url: str) -> float:
    """vllm:request_success_total over every finish reason."""
    total = 0.0
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("vllm:request_success_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def send(url: str, body: dict) -> socket.socket:
    """A completion request on a raw connection, left open (nothing read yet)."""
    parts = urlsplit(url)
    data = json.dumps(body).encode()
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_client_that_disconnects_frees_its_slot_and_kv_blocks(sim, stream):
    url = sim.urls["small"]  # max_num_seqs 2
    # a long generation (~1,500 tokens at a node slowed 100x): it is surely running when the client leaves
    httpx.post(url + "/sim/faults", json={"latency_factor": 100}, timeout=10).raise_for_status()
    try:
        idle = info(url)
        done_before = finished(url)
        body = {"model": "llama3-8b", "prompt": f"leave early {stream}", "max_tokens": 1500, "ignore_eos": True,
                "stream": stream}
        sock = send(url, body)
        running = wait_until(lambda: (i := info(url))["running"] == 1 and i, what="the request running",
                             timeout=10, interval=0.01)
        assert running["kv_blocks_used"] > idle["kv_blocks_used"]
        if stream:
            assert sock.recv(1)  # the stream has started
        sock.close()
        left = wait_until(lambda: (i := info(url))["running"] == 0 and i, what="the sequence aborted",
                          timeout=10, interval=0.01)
        # its own blocks are free; what stays is its prompt's full blocks, kept evictable in the prefix cache
        assert left["kv_blocks_used"] == left["prefix_cache_blocks"] == left["prefix_cache_evictable"]
        assert left["waiting"] == 0
        assert finished(url) == done_before  # aborted, not run to its end
        # the slot is free: a short request is served at once
        httpx.post(url + "/sim/faults", json={"latency_factor": 1}, timeout=10).raise_for_status()
        r = httpx.post(url + "/v1/completions", json={"model": "llama3-8b", "prompt": "next", "max_tokens": 4},
                       timeout=30)
        assert r.status_code == 200 and finished(url) == done_before + 1
    finally:
        httpx.post(url + "/sim/faults", json={"latency_factor": 1}, timeout=10)
