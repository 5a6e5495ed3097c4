"""The Rollouts page with the statistical judge: a held canary shows the judge's verdict, the sample it still
needs, each metric's effect chart against its allowed band and the per-metric table (Streamlit's AppTest on a real
SQLite DB and policy store)."""

from __future__ import annotations

from quantroute.policy.store import PolicyStore
from tests.dashboard.conftest import page
from tests.rollout.conftest import BASE, CAND, policy_data, progressing_rollout, write_v1
from tests.rollout.test_judge_service import JUDGE, log


def test_a_held_canary_shows_why(stack, tmp_path, monkeypatch):
    engine, _ = stack
    policies = tmp_path / "judge-policies"
    write_v1(policies, policy_data(guards={"judge": JUDGE, "require_eval_pass": True}))
    monkeypatch.setenv("QUANTROUTE_DASHBOARD_POLICIES_DIR", str(policies))
    progressing_rollout(PolicyStore(policies, engine), engine, expect=None)
    log(engine, BASE, 300, seed=3)
    log(engine, CAND, 30, seed=4)
    at = page("rollouts", "olivia", "operator")
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "Judge: inconclusive" in text and "more candidate requests" in text
    assert "Guards inconclusive" in " ".join(i.value for i in at.info)
    specs = [c.proto.spec for c in at.get("vega_lite_chart")]
    assert sum("time per output token (%)" in s for s in specs) == 1
    assert sum("error rate (pts)" in s for s in specs) == 1
    frame = at.dataframe[0].value
    assert list(frame["metric"]) == ["time per output token", "error rate"]
    assert set(frame["verdict"]) <= {"inconclusive", "pass"}
