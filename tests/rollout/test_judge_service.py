"""The statistical judge inside the rollout service: request-log rows written directly (real SQLite), the
verdict with its per-metric figures in the status, a regression rolled back, an undecided step held with the
sample it still needs, and a healthy step with enough data advanced by the dwell."""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from quantroute.clock import utcnow
from quantroute.db.engine import session as db_session
from quantroute.db.request_log import RequestLog
from quantroute.policy.store import PolicyStore
from quantroute.rollout.service import RolloutService
from tests.rollout.conftest import BASE, CAND, MODEL, arm_of, policy_data, progressing_rollout, write_v1

JUDGE = {"metrics": [{"metric": "tpot", "allowed": 0.10}, {"metric": "error_rate", "allowed": 0.02}],
         "confidence": 0.95, "power": 0.8}


@pytest.fixture
def svc(tmp_path: Path, engine) -> RolloutService:
    write_v1(tmp_path / "policies", policy_data(guards={"judge": JUDGE, "require_eval_pass": True},
                                                auto_advance_s=1))
    return progressing_rollout(PolicyStore(tmp_path / "policies", engine), engine, expect=None)


def log(engine, deployment: str, n: int, *, factor: float = 1.0, errors: int = 0, seed: int = 0) -> None:
    """n requests of 100 tokens whose TPOT is lognormal around 20 ms times `factor`; the first `errors` fail."""
    rng = np.random.default_rng(seed)
    tpot = rng.lognormal(math.log(20), 0.2, n) * factor
    with db_session(engine) as s:
        s.add_all(RequestLog(ts=utcnow(), model=MODEL, deployment=deployment, arm=arm_of(deployment),
                             status=500 if i < errors else 200, latency_ms=50.0 + 99 * float(t), ttft_ms=50.0,
                             completion_tokens=100, stream=True) for i, t in enumerate(tpot))
        s.commit()


def test_a_tpot_regression_is_rolled_back_with_its_figures(svc, engine):
    log(engine, BASE, 2000, seed=1)
    log(engine, CAND, 200, factor=1.4, seed=2)
    v = svc.evaluate_guards(MODEL)
    assert v.status == "breach" and v.breaches[0].guard == "judge"
    tpot = next(m for m in v.judgement.metrics if m.metric == "tpot")
    assert tpot.verdict == "fail" and 0.3 < tpot.estimate < 0.5 and tpot.low > 0
    st = svc.status(MODEL)
    assert st.phase == "rolled-back" and st.breach["judgement"]["verdict"] == "fail"
    assert "time per output token +" in st.aborted_reason


def test_an_undecided_step_holds_and_says_how_much_more_it_needs(svc, engine):
    log(engine, BASE, 300, seed=3)
    log(engine, CAND, 30, seed=4)
    v = svc.evaluate_guards(MODEL)
    assert v.status == "inconclusive" and v.judgement.needed_more > 0
    assert f"needs ~{v.judgement.needed_more} more candidate requests" in v.summary
    st = svc.status(MODEL)
    assert (st.phase, st.percent) == ("progressing", 10) and st.message.startswith("held at 10%")


def test_a_healthy_step_with_enough_data_advances(svc, engine):
    log(engine, BASE, 30000, seed=5)
    log(engine, CAND, 3000, seed=6)
    svc.clock = lambda: utcnow() + timedelta(seconds=2)  # past the dwell
    svc.journal.clock = svc.clock
    v = svc.evaluate_guards(MODEL)
    assert v.status == "pass", v.summary
    assert svc.status(MODEL).percent == 50


def test_requests_in_the_warm_up_are_not_judged(tmp_path, engine):
    write_v1(tmp_path / "policies", policy_data(guards={"judge": {**JUDGE, "warmup_s": 3600},
                                                        "require_eval_pass": True}))
    svc = progressing_rollout(PolicyStore(tmp_path / "policies", engine), engine, expect=None)
    log(engine, BASE, 2000, seed=1)
    log(engine, CAND, 200, factor=1.4, seed=2)  # a regression, but inside the first hour of the step
    v = svc.evaluate_guards(MODEL)
    assert v.status == "inconclusive" and {m.verdict for m in v.judgement.metrics} == {"no data"}
