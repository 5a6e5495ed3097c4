"""The Policy page's Tune action: the tuner's proposal for an SLO opens as the draft with its diff (saved only by
the usual step, never activated), and missing evals are said, with the runs that would fill them."""

from __future__ import annotations

import yaml

from quantroute.db.engine import session
from quantroute.db.eval import EvalRun
from quantroute.policy.store import PolicyStore
from tests.dashboard.conftest import page
from tests.policy.test_tune_cli import DELTAS, FP16, INT4


def fleet_file(tmp_path):
    node = {"port": 0, "hardware": "a100-80g", "max_num_seqs": 64, "max_model_len": 4096}
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"model_shape": "llama3-8b", "nodes": [
        {**node, "id": "f", "deployment": {"model": "llama3-8b", "id": FP16, "tier": "fp16", "format": "bf16"}},
        {**node, "id": "q", "deployment": {"model": "llama3-8b", "id": INT4, "tier": "int4", "format": "int4"}}]}))
    return path


def test_tune_opens_the_proposal_as_a_draft_with_its_diff(stack, tmp_path, monkeypatch):
    engine, policies = stack
    monkeypatch.setenv("QUANTROUTE_DASHBOARD_FLEET_FILE", str(fleet_file(tmp_path)))
    at = page("policy", "olivia", "operator")
    at.button(key="tune_run").click().run()
    assert [e.value for e in at.error] and "no eval data for int4 (no eval run at all)" in at.error[0].value
    assert f"--candidate <url>#{INT4}" in at.error[0].value

    report = {"overall": {"delta": -0.038}, "categories": [{"name": c, "delta": d, "n": 20} for c, d in DELTAS.items()]}
    with session(engine) as s:
        s.add(EvalRun(status="done", suite_name="golden", suite_hash="h", baseline_deployment=FP16,
                      candidate_deployment=INT4, candidate_tier="int4", report=report))
        s.commit()
    at.selectbox(key="tune_slo").set_value("tpot50")
    at.number_input(key="tune_budget").set_value(1.0)
    at.number_input(key="tune_category").set_value(12.0)
    at.button(key="tune_run").click().run()
    assert not at.exception
    notes = [i.value for i in at.info]
    assert any(n.startswith("Draft opened below: tuned for TPOT p95 <= 50 ms") for n in notes), notes
    frames = [d.value for d in at.dataframe]
    candidates = next(f for f in frames if "predicted tok/s" in f.columns)
    assert candidates["candidate"].tolist()[:2] == ["active", "#1"]
    diff = next(f for f in frames if "path" in f.columns)
    assert "spill.tpot_p95_ms" in diff["path"].tolist()  # the draft aims spill at the SLO tuned for
    assert PolicyStore(policies, engine).versions() == [1]  # nothing saved, nothing activated
