"""A controller pass is a trace when OTEL_* variables turn tracing on: a span per pass (role, actions) with a child
per model it reconciled, exported to a local OTLP/HTTP receiver."""

from __future__ import annotations

from pathlib import Path

import pytest

from quantroute.controller.loop import Controller
from quantroute.controller.settings import ControllerSettings
from quantroute.policy.store import PolicyStore
from quantroute.tracing import Tracing
from tests.conftest import wait_until
from tests.rollout.conftest import MODEL, policy_data, progressing_rollout, write_v1
from tests.support.otlp import otlp_receiver


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_each_pass_is_a_span_with_a_child_per_model_reconciled(engine, tmp_path: Path, monkeypatch):
    policies = tmp_path / "policies"
    write_v1(policies, policy_data(auto_advance_s=3600))
    progressing_rollout(PolicyStore(policies, engine), engine)
    with otlp_receiver() as (endpoint, got):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        tracing = Tracing.from_env("quantroute-controller")
        ctl = Controller(ControllerSettings(db_url=str(engine.url), policies_dir=policies, name="traced"),
                         engine=engine, tracing=tracing)
        try:
            actions = ctl.run_pass()
        finally:
            ctl.close()
            assert tracing is not None
            tracing.shutdown()
        wait_until(lambda: len(got.spans) >= 2, what="the controller's spans", timeout=30)
    [pass_] = got.named("quantroute.controller.pass")
    assert pass_.service == "quantroute-controller" and pass_.parent_id == ""
    assert pass_.attributes["quantroute.role"] == "leader" and pass_.attributes["quantroute.controller"] == "traced"
    assert list(pass_.attributes.get("quantroute.actions", [])) == actions
    [model] = got.named("quantroute.controller.reconcile")
    assert model.parent_id == pass_.span_id and model.trace_id == pass_.trace_id
    assert model.attributes["gen_ai.request.model"] == MODEL and not model.error
