"""guards.failure_limit: a breach below the limit holds the step (recorded, no traffic change), the limit-th
breach in a row rolls back, and a passing evaluation in between starts the count again. Request-log rows are
written directly so each evaluation sees exactly the figures the test means (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from quantroute.clock import utcnow
from quantroute.db.engine import session as db_session
from quantroute.db.request_log import RequestLog
from quantroute.policy.store import PolicyStore
from quantroute.rollout.service import RolloutRefused, RolloutService
from tests.rollout.conftest import CAND, LATENCY_GUARDS, MODEL, arm_of, policy_data, progressing_rollout, write_v1


@pytest.fixture
def svc(tmp_path: Path, engine) -> RolloutService:
    write_v1(tmp_path / "policies", policy_data(guards={**LATENCY_GUARDS, "failure_limit": 2}))
    return progressing_rollout(PolicyStore(tmp_path / "policies", engine), engine)


def log(engine, deployment: str, *, ok: int = 0, errors: int = 0) -> None:
    with db_session(engine) as s:
        s.add_all(RequestLog(ts=utcnow(), model=MODEL, deployment=deployment, arm=arm_of(deployment),
                             status=500 if i < errors else 200,
                             latency_ms=100.0, ttft_ms=10.0) for i in range(ok + errors))
        s.commit()


def breach_events(svc: RolloutService) -> list[str]:
    return [e["message"] for e in svc.status(MODEL).events if e["action"] == "guard_breach" and not e["refused"]]


def test_the_second_breach_in_a_row_rolls_back(svc, engine):
    log(engine, CAND, errors=20)  # candidate error rate 50 % > 5 %
    assert svc.evaluate_guards(MODEL).status == "breach"
    st = svc.status(MODEL)
    assert (st.phase, st.percent, st.aborted_reason, st.breach) == ("progressing", 10, None, None)
    assert breach_events(svc)[-1].startswith("guard breach 1 of 2 at 10%, holding the step")

    with pytest.raises(RolloutRefused, match="rolled back automatically"):  # a person's step is an evaluation too
        svc.step(MODEL, by="alice")
    st = svc.status(MODEL)
    assert st.phase == "rolled-back" and st.aborted_reason.startswith("guard breach: error_rate")
    assert st.breach["breaches"][0]["guard"] == "error_rate"


def test_a_passing_evaluation_between_breaches_starts_the_count_again(svc, engine):
    log(engine, CAND, errors=20)
    assert svc.evaluate_guards(MODEL).status == "breach"
    log(engine, CAND, ok=400)  # 20 errors in 440: 4.5 % <= 5 %
    assert svc.evaluate_guards(MODEL).status == "pass"
    log(engine, CAND, errors=60)  # 80 in 500: 16 %
    with pytest.raises(RolloutRefused, match="breach 1 of 2 before the automatic rollback; the step holds"):
        svc.step(MODEL, by="alice")
    st = svc.status(MODEL)
    assert (st.phase, st.percent) == ("progressing", 10)
    assert [m.split(",")[0] for m in breach_events(svc)] == ["guard breach 1 of 2 at 10%"] * 2
