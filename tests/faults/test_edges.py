"""The router's edges: /ready beside /health, a deadline for reading request bodies, a concurrency limit that
answers a clear 503, all in OpenAI's error shape."""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlsplit

import httpx

from tests.conftest import wait_until
from tests.faults.conftest import post, register
from tests.faults.rawnode import raw_node
from tests.router.conftest import router_at


def test_ready_says_why_until_every_served_model_has_a_healthy_node(make_settings):
    with raw_node("slow") as node, router_at(make_settings(fleet_file=None)) as (url, app):
        r = httpx.get(url + "/ready")
        assert r.status_code == 503 and "llama3-8b" in r.json()["problems"][0]
        assert httpx.get(url + "/health").status_code == 200  # alive, just not ready
        register(url, node.url)
        assert httpx.get(url + "/ready").json() == {"status": "ready", "problems": []}
        app.fleet.nodes["raw-a"].draining = True
        assert httpx.get(url + "/ready").status_code == 503


def test_a_body_that_does_not_arrive_in_time_gets_a_408(make_settings):
    with router_at(make_settings(body_read_timeout_s=0.5)) as (url, app):
        u = urlsplit(url)
        with socket.create_connection((u.hostname, u.port), timeout=10) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                      b"content-length: 100\r\n\r\n{\"model\": ")  # and then nothing
            t0 = time.monotonic()
            data = b""
            while not data.endswith(b"}}") and time.monotonic() - t0 < 10:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        assert data.startswith(b"HTTP/1.1 408") and b'"code":"request_timeout"' in data
        assert 'quantroute_requests_rejected_total{reason="body_timeout"} 1.0' in httpx.get(url + "/metrics").text


def test_concurrency_limit_answers_a_clear_503(make_settings):
    # the node holds each answer 3 s: long enough for the third request to arrive on a loaded machine
    with raw_node("slow", delay_s=3.0) as node, router_at(
            make_settings(fleet_file=None, max_concurrent_requests=2)) as (url, app):
        register(url, node.url)
        results: list[httpx.Response] = []
        threads = [threading.Thread(target=lambda: results.append(post(url))) for _ in range(2)]
        for t in threads:
            t.start()
        wait_until(lambda: app.active == 2, what="two requests in progress")
        r = post(url)
        for t in threads:
            t.join(30)
        assert r.status_code == 503 and r.json()["error"]["code"] == "overloaded" and r.headers["retry-after"]
        assert "limit of 2 concurrent requests" in r.json()["error"]["message"]
        assert sorted(x.status_code for x in results) == [200, 200]
        wait_until(lambda: app.active == 0, what="no request in progress", timeout=5)  # released just after the answer
        assert post(url).status_code == 200


def test_pin_cache_is_bounded_and_evicted_pins_come_back_from_the_db(make_settings):
    from tests.router.conftest import SENSITIVE, TOLERANT, chat

    with router_at(make_settings(pin_cache_max=3)) as (url, app):
        assert chat(url, TOLERANT, session="evict-0").headers["x-quantroute-tier"] == "int4"
        for i in range(1, 8):
            assert chat(url, TOLERANT, session=f"evict-{i}").status_code == 200
        assert len(app.pins.cache) <= 3 and "evict-0" not in app.pins.cache
        # its next turn finds the stored pin again: same tier whatever this turn's own score
        assert chat(url, SENSITIVE, session="evict-0").headers["x-quantroute-tier"] == "int4"
