"""Traces through real processes: a client's request, the router (`quantroute router`) and the simulated vLLM
node (`quantroute sim`), both exporting to a local OTLP/HTTP receiver turned on by the standard OTEL_* variables.
The spans link parent to child across the three, and the node receives the router's `traceparent`. Off (no
OTEL_* variables), a router holds no tracer and passes the client's own `traceparent` on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from quantroute.ports import free_port
from quantroute.router.settings import RouterSettings
from tests.conftest import wait_until
from tests.router.conftest import FP16, INT4, MODEL, TOKEN, kill, policy_data, router_at, router_process, write_policy
from tests.support.otlp import Receiver, Span, otlp_receiver

CLIENT_TRACE, CLIENT_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


def fleet_file(path: Path) -> Path:
    nodes = [("fp16-a", FP16, "fp16", "bf16"), ("int4-a", INT4, "int4", "int4"), ("int4-b", INT4, "int4", "int4")]
    path.write_text(yaml.safe_dump({"model_shape": "llama3-8b", "nodes": [
        {"id": nid, "port": free_port(), "hardware": "a100-80g", "max_num_seqs": 16, "max_model_len": 4096,
         "deployment": {"model": MODEL, "id": dep, "tier": tier, "format": fmt}} for nid, dep, tier, fmt in nodes]}))
    return path


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A receiver, and a sim and a router exporting to it."""
    tmp = tmp_path_factory.mktemp("traced")
    with otlp_receiver() as (endpoint, got):
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        fleet = fleet_file(tmp / "fleet.yaml")
        sim = subprocess.Popen([sys.executable, "-m", "quantroute.cli.main", "sim", "--fleet", str(fleet),
                                "--time-scale", "0.002"], env={**os.environ, **otel}, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=(tmp / "sim.log").open("w"))
        urls = {n["id"]: f"http://127.0.0.1:{n['port']}" for n in yaml.safe_load(fleet.read_text())["nodes"]}
        try:
            for url in urls.values():
                wait_until(lambda u=url: httpx.get(u + "/health", timeout=2).status_code == 200,
                           what=lambda: f"the sim:\n{(tmp / 'sim.log').read_text()}", timeout=120,
                           ignore=(httpx.HTTPError,))
            policies = tmp / "policies"
            write_policy(policies, 1, tiers=[{"name": "fp16", "deployments": {MODEL: [FP16]}},
                                             {"name": "int4", "deployments": {MODEL: [INT4]}}],
                         thresholds=policy_data(1)["thresholds"][:1])
            settings = RouterSettings(policies_dir=policies, fleet_file=fleet, db_url=f"sqlite:///{tmp / 'r.db'}",
                                      admin_token=TOKEN)
            router, url = router_process(settings, workers=1, env=otel)
            try:
                yield {"router": url, "nodes": urls, "got": got}
            finally:
                kill(router)
        finally:
            kill(sim)


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def one_trace(got: Receiver, trace_id: str, *, upstream: int = 1) -> dict[str, list[Span]]:
    """The router's and the node's spans of one trace, once all have arrived (the exporters batch)."""
    def spans() -> dict[str, list[Span]] | None:
        with got.lock:
            mine = [s for s in got.spans if s.trace_id == trace_id]
        by_name: dict[str, list[Span]] = {}
        for s in mine:
            by_name.setdefault(s.name, []).append(s)
        done = (len(by_name.get("quantroute.upstream", [])) == upstream and "llm_request" in by_name
                and "POST /v1/chat/completions" in by_name and "quantroute.decide" in by_name)
        return by_name if done else None

    return wait_until(spans, what=lambda: f"the spans of trace {trace_id} ({len(got.spans)} spans in all)",
                      timeout=60)


@pytest.mark.slow
def test_a_request_is_one_trace_from_the_client_through_the_router_into_the_node(traced):
    got = traced["got"]
    raw = client(traced["router"]).chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "hi, tell me a joke"}], max_tokens=8,
        extra_headers={"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01", "x-session-id": "traced-1"})
    served_by = raw.headers["x-quantroute-node"]
    spans = one_trace(got, CLIENT_TRACE)
    [request] = spans["POST /v1/chat/completions"]
    assert (request.service, request.kind, request.parent_id) == ("quantroute-router", "SERVER", CLIENT_SPAN)
    assert request.attributes["http.response.status_code"] == 200 and not request.error
    assert request.attributes["quantroute.node"] == served_by
    [decide] = spans["quantroute.decide"]
    assert decide.parent_id == request.span_id
    assert decide.attributes["quantroute.tier"] == "int4" and "casual" in decide.attributes["quantroute.rules"]
    assert decide.attributes["quantroute.session"] is True and decide.attributes["quantroute.pin"] == "claimed"
    assert decide.attributes["quantroute.pinned"] is False and decide.attributes["quantroute.placement"] == "first"
    [attempt] = spans["quantroute.upstream"]
    assert (attempt.kind, attempt.parent_id) == ("CLIENT", request.span_id)
    assert attempt.attributes["quantroute.node"] == served_by
    assert attempt.attributes["http.response.status_code"] == 200 and attempt.attributes["quantroute.ttft_ms"] > 0
    # the node continued the trace under the attempt, from the traceparent it received
    [node] = spans["llm_request"]
    assert (node.service, node.parent_id) == ("quantroute-sim", attempt.span_id)
    info = httpx.get(traced["nodes"][served_by] + "/sim/info", timeout=5).json()
    assert f"00-{CLIENT_TRACE}-{attempt.span_id}-01" in info["traceparents"]
    assert f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01" not in info["traceparents"]  # the client's own is replaced
    print(f"trace {CLIENT_TRACE}: {request.name} <- {decide.name} (tier int4, rules "
          f"{decide.attributes['quantroute.rules']}), {attempt.name} -> {served_by} <- {node.name} ({node.service})")

    # the session's next turn comes from its pin, and says so
    again = "a" * 32
    client(traced["router"]).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "write python code step by step"}], max_tokens=8,
        extra_headers={"traceparent": f"00-{again}-{CLIENT_SPAN}-01", "x-session-id": "traced-1"})
    [decide] = one_trace(got, again)["quantroute.decide"]
    assert decide.attributes["quantroute.pinned"] is True and decide.attributes["quantroute.pin"] == "followed"
    assert decide.attributes["quantroute.tier"] == "int4"


@pytest.mark.slow
def test_a_retried_request_has_a_span_per_attempt_and_a_request_without_traceparent_starts_a_trace(traced):
    got = traced["got"]
    nodes = traced["nodes"]
    httpx.post(nodes["int4-a"] + "/sim/faults", json={"error_rate": 1.0}, timeout=5).raise_for_status()
    try:
        retried: list[Span] = []
        for _ in range(20):  # until one lands on int4-a first (the router picks among the two)
            before = len(got.named("POST /v1/chat/completions"))
            raw = client(traced["router"]).chat.completions.with_raw_response.create(
                model=MODEL, messages=[{"role": "user", "content": "hi, a joke"}], max_tokens=4)
            assert raw.headers["x-quantroute-node"] == "int4-b"
            wait_until(lambda n=before: len(got.named("POST /v1/chat/completions")) > n, what="the request span",
                       timeout=30)
            retried = [s for s in got.named("POST /v1/chat/completions", **{"quantroute.retries": 1})
                       if s.parent_id == ""]  # no traceparent from this client: the router starts the trace
            if retried:
                break
        assert retried, "no request went to int4-a first"
        request = retried[0]
        spans = one_trace(got, request.trace_id, upstream=2)
        first, second = sorted(spans["quantroute.upstream"], key=lambda s: s.attributes["quantroute.attempt"])
        assert {first.parent_id, second.parent_id} == {request.span_id}
        assert first.attributes["quantroute.node"] == "int4-a" and first.error
        assert first.attributes["http.response.status_code"] == 500
        assert second.attributes["quantroute.node"] == "int4-b" and not second.error
        assert second.attributes["http.response.status_code"] == 200
        # each attempt sent its own traceparent: int4-a's span continues the first attempt, int4-b's the second
        parents = {s.parent_id for s in spans["llm_request"]}
        assert parents == {first.span_id, second.span_id}
    finally:
        httpx.post(nodes["int4-a"] + "/sim/faults", json={"error_rate": 0.0}, timeout=5)


def test_without_otel_variables_the_router_has_no_tracer_and_passes_the_clients_traceparent_on(router, sim):
    url, app = router
    assert app.tracing is None and app.forwarder.tracing is None
    sent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    r = httpx.post(f"{url}/v1/chat/completions", headers={"traceparent": sent}, timeout=30,
                   json={"model": MODEL, "messages": [{"role": "user", "content": "hi, a joke"}], "max_tokens": 4})
    assert r.status_code == 200
    info = httpx.get(sim.urls[r.headers["x-quantroute-node"]] + "/sim/info", timeout=5).json()
    assert info["traceparents"][-1] == sent


def test_a_request_not_sampled_makes_no_spans_and_tells_the_node_not_to_sample(make_settings, sim, monkeypatch):
    with otlp_receiver() as (endpoint, got):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
        with router_at(make_settings()) as (url, app):
            assert app.tracing is not None
            r = httpx.post(f"{url}/v1/chat/completions", timeout=30, json={
                "model": MODEL, "messages": [{"role": "user", "content": "hi, a joke"}], "max_tokens": 4})
            assert r.status_code == 200
            sent = httpx.get(sim.urls[r.headers["x-quantroute-node"]] + "/sim/info", timeout=5).json()["traceparents"]
        # the router's shutdown flushed its exporter: nothing was recorded
        assert got.spans == []
    version, trace_id, span_id, flags = sent[-1].split("-")
    assert (version, len(trace_id), len(span_id)) == ("00", 32, 16)
    assert int(flags, 16) & 1 == 0  # not sampled (the SDK may set W3C level 2's random-trace-id bit, 02)
