"""An eval run is one trace when tracing is on: a span over the run and a child per answer, whose `traceparent`
goes with the request (so the router's and the node's spans join the run's trace)."""

from __future__ import annotations

import httpx
import pytest

from quantroute.evals.runner import RunSettings
from quantroute.evals.runs import start_run
from quantroute.evals.suite import load_suite
from quantroute.sim.runner import running_fleet
from quantroute.tracing import Tracing
from tests.conftest import wait_until
from tests.support.otlp import otlp_receiver


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_run_is_a_span_with_a_child_per_answer_sent_on_as_traceparent(engine, tmp_path, monkeypatch):
    suite = load_suite("data/evals/smoke.jsonl")
    with running_fleet("data/fleet.yaml", time_scale=0.005) as fleet, otlp_receiver() as (endpoint, got):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        tracing = Tracing.from_env("quantroute-eval")
        assert tracing is not None
        try:
            view = start_run(suite=suite, baseline=fleet.urls["fp16-a"], candidate=fleet.urls["int4-a"],
                             engine=engine, settings=RunSettings(concurrency=8), runs_dir=tmp_path, tracing=tracing)
        finally:
            tracing.shutdown()
        answers = 2 * len(suite.items)
        wait_until(lambda: len(got.named("quantroute.eval.ask")) == answers, what="a span per answer", timeout=30)
        seen = {nid: httpx.get(fleet.urls[nid] + "/sim/info", timeout=5).json()["traceparents"]
                for nid in ("fp16-a", "int4-a")}
    [run] = got.named("quantroute.eval.run")
    assert run.parent_id == "" and run.service == "quantroute-eval"
    assert run.attributes["quantroute.run_id"] == view.run["id"]
    assert run.attributes["quantroute.gate_passed"] == view.verdict.passed
    asks = got.named("quantroute.eval.ask")
    assert {a.parent_id for a in asks} == {run.span_id} and {a.trace_id for a in asks} == {run.trace_id}
    assert {a.attributes["quantroute.arm"] for a in asks} == {"baseline", "candidate"}
    # each node received the traceparent of the answer it served (its most recent 64 are kept)
    received = {tp.split("-")[2] for tps in seen.values() for tp in tps if tp.split("-")[1] == run.trace_id}
    assert received and received <= {a.span_id for a in asks}
    assert len(received) == min(answers, 2 * 64)
