"""Rollouts against the simulated fleet with the router running: the observed share of new sessions follows
each step; a bad candidate is rolled back by its guards; a manual rollback returns everyone to the baseline."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import wait_until
from tests.rollout.conftest import (
    BASE,
    CAND,
    LATENCY_GUARDS,
    MODEL,
    N,
    approved,
    candidate_share,
    near,
    send,
    sessions,
    set_faults,
    wait_logged,
    wait_version,
)


def test_good_candidate_goes_from_gate_to_promoted(live, db_engine, store):
    url, svc = live
    st = approved(url, svc, db_engine)
    sent = 0
    for percent in (10, 50, 100):
        assert st.percent == percent
        rs = send(url, sessions())
        sent += N
        assert all(r.status_code == 200 for r in rs)
        share = candidate_share(rs)
        assert near(share, percent, N), (percent, share)
        served = {r.headers["x-quantroute-deployment"] for r in rs if r.headers["x-quantroute-arm"] == "candidate"}
        assert served == {CAND}
        wait_logged(db_engine, sent)
        if percent < 100:
            st = svc.step(MODEL, by="alice")
            wait_version(url, st.policy_version)
    st = svc.promote(MODEL, by="alice")
    assert st.phase == "promoted"
    wait_version(url, st.policy_version)
    active = store.active()
    assert active.canary_for(MODEL) is None and active.deployments_for(MODEL, "int4") == [CAND]
    rs = send(url, sessions(50))
    assert {r.headers["x-quantroute-deployment"] for r in rs} == {CAND}
    assert [e["action"] for e in st.events if not e["refused"]] == [
        "start", "eval_passed", "approve", "step", "step", "promote"]


@pytest.mark.parametrize("fault,guard,policies", [
    ({"error_rate": 0.3}, "error_rate", {}),
    # 3 s on every candidate request against a baseline p95 of ~0.1 s (noise has reached 0.65 s): far past 3x
    ({"extra_latency_ms": 3000}, "p95_latency_ratio", {"guards": LATENCY_GUARDS})], indirect=["policies"])
def test_bad_candidate_is_rolled_back_by_its_guard(live, sim, db_engine, store, fault, guard, policies):
    url, svc = live
    set_faults(sim, "int4-v2", **fault)
    approved(url, svc, db_engine)
    send(url, sessions())
    wait_logged(db_engine, N)
    verdict = svc.evaluate_guards(MODEL)
    assert verdict.status == "breach" and guard in [b.guard for b in verdict.breaches], verdict.summary
    st = svc.status(MODEL)
    assert st.phase == "rolled-back" and guard in st.aborted_reason
    assert st.breach["window"]["start"] and st.breach["candidate"]["requests"] >= 10
    assert [(e["actor"], e["action"]) for e in st.events[-2:]] == [("rollout-guard", "guard_breach"),
                                                                    ("rollout-guard", "traffic_moved")]
    wait_version(url, st.policy_version)
    assert store.active().canary_for(MODEL).percent == 0
    rs = send(url, sessions(100))
    # new sessions carry no arm at 0 %; every response is the baseline deployment
    assert {r.headers.get("x-quantroute-arm") for r in rs} <= {None, "baseline"}
    assert {r.headers["x-quantroute-deployment"] for r in rs} == {BASE}


def test_manual_rollback_midway_returns_all_traffic_to_baseline(live, db_engine):
    url, svc = live
    approved(url, svc, db_engine)
    pinned = sessions(200)
    rs = send(url, pinned)
    on_candidate = [s for s, r in zip(pinned, rs) if r.headers["x-quantroute-arm"] == "candidate"]
    assert on_candidate  # ~10% of 200
    st = svc.rollback(MODEL, by="alice", reason="manual test")
    assert st.phase == "rolled-back"

    def on_baseline() -> bool:
        rs = send(url, on_candidate + sessions(50))
        return all(r.headers.get("x-quantroute-arm") in (None, "baseline")
                   and r.headers["x-quantroute-deployment"] == BASE for r in rs)

    # generous bound; the point is that it converges
    wait_until(on_baseline, what="traffic to return to the baseline", timeout=10, interval=0.02)
    # pinned sessions kept their tier and moved to the baseline arm
    pins = httpx.get(url + "/admin/sessions", headers={"authorization": "Bearer rollout-test-token"}).json()
    arms = {p["session_key"]: (p["tier"], p["arm"]) for p in pins["sessions"]}
    assert all(arms[s] == ("int4", "baseline") for s in on_candidate)
