"""End to end through the real openai SDK: headers, tiers, deployment ids, streaming, sessions, capacity."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route

from quantroute.router.testing import serve_app
from tests.conftest import wait_until
from tests.router.conftest import (
    FP16,
    INT4,
    INT4_V2,
    INT8,
    MODEL,
    SENSITIVE,
    TOLERANT,
    admin,
    chat,
    router_at,
    set_faults,
    write_policy,
)
from tests.support.metrics import series, total

HEADERS = ("x-quantroute-tier", "x-quantroute-deployment", "x-quantroute-node", "x-quantroute-policy-version",
           "x-quantroute-rules")


def test_openai_sdk_sync_chat_tags_every_response(router):
    url, _ = router
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused")
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=SENSITIVE, max_tokens=8)
    resp = raw.parse()
    assert all(raw.headers.get(h) is not None for h in HEADERS)
    assert raw.headers["x-quantroute-tier"] == "fp16"
    assert raw.headers["x-quantroute-rules"] == "precise-work"
    assert raw.headers["x-quantroute-policy-version"] == "1"
    assert resp.model == FP16 == raw.headers["x-quantroute-deployment"]
    assert resp.choices[0].message.content

    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=TOLERANT, max_tokens=8)
    assert raw.headers["x-quantroute-tier"] == "int4"
    assert raw.parse().model in {INT4, INT4_V2} == {raw.headers["x-quantroute-deployment"]} | {INT4, INT4_V2}
    assert raw.parse().model == raw.headers["x-quantroute-deployment"]  # never served under the baseline's name
    assert raw.headers["x-quantroute-node"] in {"int4-a", "int4-b", "int4-v2"}


def test_openai_sdk_async_streaming_and_completions(router):
    url, _ = router

    async def go():
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused")
        stream = await client.chat.completions.create(model=MODEL, messages=TOLERANT, max_tokens=16, stream=True,
                                                      stream_options={"include_usage": True})
        chunks = [c async for c in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        comp = await client.completions.with_raw_response.create(model=MODEL, prompt="hello there", max_tokens=8)
        sync_stream = openai.OpenAI(base_url=url + "/v1", api_key="x").completions.create(
            model=MODEL, prompt="write python code", max_tokens=8, stream=True)
        return chunks, text, comp, list(sync_stream)

    chunks, text, comp, sync_chunks = asyncio.run(go())
    assert text and len({c.model for c in chunks}) == 1 and chunks[0].model in {INT4, INT4_V2}
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert comp.headers["x-quantroute-tier"] == "int4" and comp.parse().model in {INT4, INT4_V2}
    assert {c.model for c in sync_chunks} == {FP16}


def test_models_lists_logical_models_and_every_deployment(router):
    url, _ = router
    ids = {m.id for m in openai.OpenAI(base_url=url + "/v1", api_key="x").models.list()}
    assert ids == {MODEL, FP16, INT8, INT4, INT4_V2}


def test_deployment_id_can_be_requested_directly(router):
    url, _ = router
    r = httpx.post(url + "/v1/chat/completions", json={"model": INT8, "messages": SENSITIVE, "max_tokens": 4})
    assert r.status_code == 200 and r.headers["x-quantroute-deployment"] == INT8 and r.json()["model"] == INT8


def test_first_sse_chunk_arrives_while_upstream_still_runs_and_disconnect_cancels_it(make_settings, sim):
    set_faults(sim, "int8-a", latency_factor=100.0)  # ~30 s of decoding: far longer than the test
    try:
        with router_at(make_settings()) as (url, app):
            body = {"model": INT8, "messages": TOLERANT, "max_tokens": 3000, "stream": True, "ignore_eos": True}
            with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30) as r:
                chunks = r.iter_raw()  # kept referenced: a dropped generator closes the connection at once
                first = next(chunks)
                assert first.startswith(b"data:")
                node = app.fleet.nodes["int8-a"]
                # the router still holds the upstream request open (it would take ~30 s to finish)
                assert node.inflight == 1, "upstream finished before the client saw the first chunk"
            # the client closed the stream early: the router cancels the upstream request
            wait_until(lambda: not node.inflight, what="the upstream request cancelled", timeout=10)
            assert node.inflight == 0
    finally:
        set_faults(sim, "int8-a", latency_factor=1.0)


def running_on(sim, node_id: str) -> float:
    text = httpx.get(sim.urls[node_id] + "/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:num_requests_running"))


def test_session_pinned_to_int4_stays_when_a_later_turn_is_sensitive(router):
    url, _ = router
    first = chat(url, TOLERANT, session="s-tolerant")
    assert first.headers["x-quantroute-tier"] == "int4"
    later = chat(url, TOLERANT + [{"role": "assistant", "content": "ha"}] + SENSITIVE, session="s-tolerant")
    assert later.status_code == 200
    assert later.headers["x-quantroute-tier"] == "int4" and later.json()["model"] in {INT4, INT4_V2}
    assert "precise-work" in later.headers["x-quantroute-rules"]  # scored, but the pin wins
    sessions = admin(url).get("/admin/sessions").json()["sessions"]
    assert [s["tier"] for s in sessions if s["session_key"] == "s-tolerant"] == ["int4"]
    # unpinning starts the session over: now the sensitive turn decides
    assert admin(url).delete("/admin/sessions/s-tolerant").json()["unpinned"] is True
    assert chat(url, SENSITIVE, session="s-tolerant").headers["x-quantroute-tier"] == "fp16"


def test_a_response_whose_tier_came_from_the_session_pin_says_so(router):
    """x-quantroute-pinned: true only when an existing pin chose the tier; the first turn (its score chose the
    tier and wrote the pin), requests without a session and the first turn after an unpin carry no such header."""
    url, _ = router
    assert "x-quantroute-pinned" not in chat(url, SENSITIVE).headers
    first = chat(url, TOLERANT, session="s-marked")
    assert first.status_code == 200 and "x-quantroute-pinned" not in first.headers
    later = chat(url, TOLERANT + [{"role": "assistant", "content": "ha"}] + SENSITIVE, session="s-marked")
    assert later.headers["x-quantroute-tier"] == "int4"
    assert later.headers["x-quantroute-pinned"] == "true"  # the rules header names rules that did not decide
    assert admin(url).delete("/admin/sessions/s-marked").json()["unpinned"] is True
    fresh = chat(url, SENSITIVE, session="s-marked")
    assert fresh.headers["x-quantroute-tier"] == "fp16" and "x-quantroute-pinned" not in fresh.headers


def probed(app, timeout=10.0) -> None:
    """Wait for the startup probe of every node, so it cannot undo what the test sets."""
    wait_until(lambda: all(n.last_probe is not None for n in app.fleet.nodes.values()), what="every node's first probe",
               timeout=timeout)


def wait_health(app, node_ids, healthy: bool, timeout=10.0) -> None:
    wait_until(lambda: all(app.fleet.nodes[n].healthy == healthy for n in node_ids),
               what=f"nodes {node_ids} to become healthy={healthy}", timeout=timeout)


def test_pinned_tier_down_waits_then_503_and_unpinned_escalates_only_upward(make_settings, sim, policies):
    # One probe at start, then none: the test ejects nodes itself and no probe brings them back.
    with router_at(make_settings(probe_interval_s=600)) as (url, app):
        assert chat(url, TOLERANT, session="s-pin").headers["x-quantroute-tier"] == "int4"
        probed(app)
        for n in ("int4-a", "int4-b", "int4-v2"):
            app.fleet.nodes[n].healthy = False
        app.fleet.epoch += 1
        r = chat(url, TOLERANT, session="s-pin")
        assert r.status_code == 503
        assert r.headers["retry-after"] == "1"
        assert r.json()["error"]["code"] == "no_capacity" and "pinned" in r.json()["error"]["message"]
        # unpinned tolerant request: escalates to the next tier up (int8), never below int4
        r = chat(url, TOLERANT)
        assert r.status_code == 200 and r.headers["x-quantroute-tier"] == "int8"
        metrics = httpx.get(url + "/metrics").text
        assert 'quantroute_no_capacity_total{pinned="true",tier="int4"} 1.0' in metrics
        assert 'quantroute_escalations_total{from_tier="int4",to_tier="int8"}' in metrics


def test_sensitive_request_never_goes_to_a_lower_tier(make_settings):
    with router_at(make_settings(probe_interval_s=600)) as (url, app):
        probed(app)
        app.fleet.nodes["fp16-a"].healthy = False
        app.fleet.epoch += 1
        r = chat(url, SENSITIVE)
        assert r.status_code == 503 and r.headers["retry-after"] == "1"  # never int8 or int4


def test_pinned_session_waits_for_capacity_then_is_served(make_settings, tmp_path):
    # a wait budget far above the test's own polling: on a loaded machine 300 ms passed before the node was freed
    policies = tmp_path / "policies-long-wait"
    write_policy(policies, 1, sessions={"affinity": True, "ttl_s": 600, "max_wait_ms": 20000, "quiescence_s": 60})
    with router_at(make_settings(policies_dir=policies, node_max_inflight=1, probe_interval_s=600)) as (url, app):
        first = chat(url, TOLERANT, session="s-wait")
        assert first.headers["x-quantroute-tier"] == "int4"
        # the session stays on its deployment (artifact): free a node of that one
        freed = "int4-b" if first.headers["x-quantroute-deployment"] == INT4 else "int4-v2"
        for n in ("int4-a", "int4-b", "int4-v2"):
            app.fleet.nodes[n].inflight += 1  # every int4 node is full
        results = []

        import threading

        t = threading.Thread(target=lambda: results.append(chat(url, TOLERANT, session="s-wait")))
        t.start()
        wait_until(lambda: "quantroute_session_waits_total{tier=\"int4\"} 1.0" in httpx.get(url + "/metrics").text,
                   what="the session's wait counted in /metrics", timeout=5, interval=0.01)
        app.fleet.nodes[freed].inflight -= 1
        app.fleet.notify()
        t.join(10)
        assert results[0].status_code == 200
        assert results[0].headers["x-quantroute-node"] == freed


def test_a_client_that_hangs_up_after_done_while_the_node_still_closes_its_stream_was_served(make_settings, sim,
                                                                                               tmp_path):
    """The openai SDK stops reading at `data: [DONE]` and closes the connection; vLLM may end its chunked stream a
    moment later. The router's disconnect watcher took that close for a client that left: a served stream was
    logged and counted as a 499 (and its shadow dropped: a CI failure of tests/vllm/test_shadow_vllm.py)."""

    async def chat_stream(request: Request) -> StreamingResponse:
        async def events():
            chunk = {"id": "c", "object": "chat.completion.chunk", "model": INT8,
                     "choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": "stop"}]}
            yield f"data: {json.dumps(chunk)}\n\n".encode()
            yield b"data: [DONE]\n\n"
            await asyncio.sleep(0.5)  # the node still closing its stream, past the router's 0.1 s watch

        return StreamingResponse(events(), media_type="text/event-stream")

    async def ok(request: Request) -> PlainTextResponse:
        return PlainTextResponse("vllm:num_requests_waiting 0\nvllm:num_requests_running 0\n")

    app = Starlette(routes=[Route("/health", ok), Route("/metrics", ok),
                            Route("/v1/chat/completions", chat_stream, methods=["POST"])])
    with serve_app(app) as node_url:
        fleet = sim.fleet.model_dump(mode="json")
        node = {**next(n for n in fleet["nodes"] if n["id"] == "int8-a"), "id": "int8-lingers",
                "port": int(node_url.rsplit(":", 1)[1])}
        path = tmp_path / "lingering-fleet.yaml"
        path.write_text(yaml.safe_dump({**fleet, "nodes": [node]}))
        with router_at(make_settings(fleet_file=path)) as (url, _):
            for _ in range(3):
                with httpx.stream("POST", f"{url}/v1/chat/completions", timeout=10, json={
                        "model": INT8, "messages": TOLERANT, "max_tokens": 4, "stream": True}) as r:
                    for line in r.iter_lines():
                        if line == "data: [DONE]":
                            break  # and close the connection, as the SDK does
            def finished() -> list[str] | None:
                lines = series(url, "quantroute_requests_total{")
                return lines if total(lines) == 3 else None

            statuses = wait_until(finished, what="three finished requests", timeout=10)
            assert all('status="200"' in ln for ln in statuses), statuses
