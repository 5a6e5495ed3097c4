"""Later parts of a rollout's life against the simulated fleet with the router running: the guards loop
auto-advancing after the dwell (and holding while the guards are inconclusive), and rolling back a promotion
(the previous baseline serves its tier again through a new policy version)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.rollout.conftest import (
    BASE,
    CAND,
    MODEL,
    N,
    approved,
    near,
    policy_data,
    send,
    sessions,
    wait_logged,
    wait_version,
    write_v1,
)

DWELL_S = 1


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    """Two steps (10 -> 100) and a one-second dwell: the shortest canary the checklist calls gradual."""
    write_v1(tmp_path / "policies", policy_data(steps=[10, 100], auto_advance_s=DWELL_S))
    return tmp_path / "policies"


def dwell_over(svc) -> None:
    """Until the current step has dwelt DWELL_S on the service's own clock (the test asserts no durations)."""
    row = svc.list(MODEL)[0]
    while (svc.clock() - row.step_at).total_seconds() < DWELL_S:
        time.sleep(0.05)


def test_guards_loop_holds_while_inconclusive_and_advances_after_the_dwell(live, db_engine, store):
    url, svc = live
    st = approved(url, svc, db_engine)
    assert (st.phase, st.percent) == ("progressing", 10)
    dwell_over(svc)
    v = svc.evaluate_guards(MODEL)  # dwell over but no traffic yet: inconclusive holds the step
    assert v.status == "inconclusive"
    st = svc.status(MODEL)
    assert (st.phase, st.percent) == ("progressing", 10) and st.message.startswith("held at 10%")
    assert [e["action"] for e in st.events][-1] == "guard_inconclusive"

    rs = send(url, sessions())
    assert near(sum(r.headers.get("x-quantroute-arm") == "candidate" for r in rs) / N, 10, N)
    wait_logged(db_engine, N)
    v = svc.evaluate_guards(MODEL)
    assert v.status == "pass", v.summary
    st = svc.status(MODEL)
    assert (st.phase, st.step_index, st.percent) == ("progressing", 1, 100)
    last = st.events[-1]
    assert (last["action"], last["actor"], last["refused"]) == ("dwell_elapsed", "rollout-guard", False)
    assert "auto-advanced to 100%" in last["message"]
    wait_version(url, st.policy_version)
    assert store.active().canary_for(MODEL).percent == 100
    rs = send(url, sessions(50))
    assert {r.headers["x-quantroute-deployment"] for r in rs} == {CAND}

    # At the last step the loop never promotes on its own: promotion is a person's action.
    dwell_over(svc)
    svc.evaluate_guards(MODEL)
    assert svc.status(MODEL).phase == "progressing"


def test_rolling_back_a_promotion_restores_the_previous_baseline(live, db_engine, store):
    url, svc = live
    approved(url, svc, db_engine)
    send(url, sessions())
    wait_logged(db_engine, N)
    st = svc.step(MODEL, by="alice")
    assert st.percent == 100
    wait_version(url, st.policy_version)
    send(url, sessions(100))
    wait_logged(db_engine, N + 100)
    st = svc.promote(MODEL, by="alice")
    assert st.phase == "promoted"
    promoted_version = st.policy_version
    wait_version(url, promoted_version)
    assert store.active().deployments_for(MODEL, "int4") == [CAND]
    during = sessions(50)  # sessions pinned while the candidate was the tier's only deployment
    assert {r.headers["x-quantroute-deployment"] for r in send(url, during)} == {CAND}

    st = svc.rollback(MODEL, by="alice", reason="quality complaints after promotion")
    assert (st.phase, st.percent) == ("rolled-back", 0)
    assert st.aborted_reason == "quality complaints after promotion"
    assert st.policy_version > promoted_version
    restored = store.load(st.policy_version)
    assert restored.author == "rollout" and restored.parent == promoted_version
    assert restored.deployments_for(MODEL, "int4") == store.load(1).deployments_for(MODEL, "int4") == [BASE, CAND]
    assert BASE in restored.deployments and restored.canary_for(MODEL).percent == 0
    assert not store.is_approved(st.policy_version)  # emergency activation: one action, no approval
    wait_version(url, st.policy_version)
    for batch in (sessions(50), during):  # new sessions, and those pinned during the promotion
        rs = send(url, batch)
        assert all(r.status_code == 200 for r in rs)
        assert {r.headers["x-quantroute-deployment"] for r in rs} == {BASE}
    assert [e["action"] for e in st.events if not e["refused"]][-3:] == ["promote", "rollback", "traffic_moved"]
