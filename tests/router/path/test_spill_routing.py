"""SLO-aware spill end to end: a real router in front of a simulated fleet whose INT4 node (an RTX 4090) is slower
per token than its FP16 node (an H100), so at a 9 ms TPOT SLO the INT4 tier is at its knee from the first request.
Tolerant requests spill up and say so in the response headers and the request log; sensitive ones stay on FP16;
pinned sessions keep their tier."""

from __future__ import annotations

import openai
import pytest
from sqlmodel import Session, col, select

from quantroute.db.engine import make_engine
from quantroute.db.request_log import RequestLog
from quantroute.fleet import parse_fleet
from quantroute.router.settings import RouterSettings
from quantroute.sim.runner import running_fleet
from tests.conftest import wait_until
from tests.router.conftest import (
    SENSITIVE,
    TOKEN,
    TOLERANT,
    activate_pointer,
    chat,
    router_at,
    write_fleet_file,
    write_policy,
)

MODEL = "llama3-8b"
FP16, INT4 = "llama3-8b-fp16", "llama3-8b-awq-w4a16"
FLEET = f"""
model_shape: {MODEL}
nodes:
  - {{id: fp16-h100, port: 0, hardware: h100-80g, max_num_seqs: 16, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {FP16}, tier: fp16, format: bf16}}}}
  - {{id: int4-4090, port: 0, hardware: rtx-4090, max_num_seqs: 16, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {INT4}, tier: int4, format: int4, method: awq}}}}
"""
TIERS = [{"name": "fp16", "deployments": {MODEL: [FP16]}}, {"name": "int4", "deployments": {MODEL: [INT4]}}]
THRESHOLDS = [{"min_score": 6, "tier": "fp16"}]
# modelled decode step at batch 1: H100 bf16 4.5 ms, RTX 4090 int4 10.8 ms
SPILL = {"tpot_p95_ms": 9}


@pytest.fixture(scope="module")
def slow_int4_fleet():
    # time scale 1: the router observes the modelled TPOTs themselves (its knee estimate scales by them)
    with running_fleet(parse_fleet(FLEET, source="tests/router/spill"), time_scale=1.0) as rf:
        yield rf


@pytest.fixture
def settings(tmp_path, slow_int4_fleet):
    policies = tmp_path / "policies"
    write_policy(policies, 1, tiers=TIERS, thresholds=THRESHOLDS, spill={"enabled": False})
    write_policy(policies, 2, activate=False, tiers=TIERS, thresholds=THRESHOLDS, spill=SPILL)
    return RouterSettings(policies_dir=policies, fleet_file=write_fleet_file(slow_int4_fleet, tmp_path / "fleet.yaml"),
                          db_url=f"sqlite:///{tmp_path / 'router.db'}", admin_token=TOKEN, probe_interval_s=0.1,
                          probe_timeout_s=0.5, log_flush_interval_s=0.05, policy_poll_s=0.2)


def test_tolerant_traffic_spills_up_at_the_knee_sensitive_stays_and_pins_keep_their_tier(settings):
    with router_at(settings) as (url, app):
        pinned = chat(url, TOLERANT, session="s-before")  # spill off (v1): int4, and pinned there
        assert pinned.headers["x-quantroute-tier"] == "int4" and "x-quantroute-reason" not in pinned.headers
        activate_pointer(settings.policies_dir, 2)
        wait_until(lambda: app.holder.current.version == 2, what="policy v2", timeout=10)

        client = openai.OpenAI(base_url=f"{url}/v1", api_key="x")
        raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=TOLERANT, max_tokens=8)
        assert raw.headers["x-quantroute-tier"] == "fp16"
        assert raw.headers["x-quantroute-reason"] == "spilled up: int4 at its knee"

        sensitive = chat(url, SENSITIVE)  # fp16 is its floor: served there, nothing to explain
        assert sensitive.headers["x-quantroute-tier"] == "fp16" and "x-quantroute-reason" not in sensitive.headers

        later = chat(url, TOLERANT + [{"role": "assistant", "content": "ha"}] + TOLERANT, session="s-before")
        assert later.headers["x-quantroute-tier"] == "int4"  # the pin keeps its tier: no spill for later turns
        assert later.headers["x-quantroute-pinned"] == "true" and "x-quantroute-reason" not in later.headers

        first = chat(url, TOLERANT, session="s-after")  # a first turn may spill; its pin is the tier it got
        assert first.headers["x-quantroute-tier"] == "fp16" and first.headers["x-quantroute-reason"].startswith(
            "spilled up")
        again = chat(url, TOLERANT + [{"role": "assistant", "content": "ha"}] + TOLERANT, session="s-after")
        assert again.headers["x-quantroute-tier"] == "fp16" and "x-quantroute-reason" not in again.headers

        engine = make_engine(settings.db_url)

        def logged() -> list[RequestLog]:
            with Session(engine) as s:
                return list(s.exec(select(RequestLog).order_by(col(RequestLog.id))))

        wait_until(lambda: len(logged()) == 6, what="six request-log rows", timeout=10)
        rows = logged()
        assert [(r.tier, r.reason) for r in rows] == [
            ("int4", None), ("fp16", "spilled up: int4 at its knee"), ("fp16", None), ("int4", None),
            ("fp16", "spilled up: int4 at its knee"), ("fp16", None)]
        engine.dispose()
        node = app.fleet.nodes["fp16-h100"]
        assert node.tpot_s is None  # answers that were not streamed show no TPOT
        stream = client.chat.completions.create(model=MODEL, messages=TOLERANT, max_tokens=8, stream=True,
                                                stream_options={"include_usage": True})
        assert sum(1 for _ in stream) > 2
        wait_until(lambda: node.tpot_s is not None and node.ttft_s is not None, what="the node's observed latency",
                   timeout=10)
