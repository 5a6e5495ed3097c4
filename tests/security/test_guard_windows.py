"""Canary guards count only the traffic the router's hash put in each arm: a client cannot dilute a bad
candidate with direct requests or invalid ones, nor trip a rollback with a few slow direct requests."""

from __future__ import annotations

import httpx
from sqlmodel import select

from quantroute.clock import utcnow
from quantroute.db.engine import session as db_session
from quantroute.db.request_log import RequestLog
from quantroute.rollout import facts
from quantroute.rollout.guards import arm_stats
from tests.rollout.conftest import (  # noqa: F401  (fixtures)
    BASE,
    CAND,
    MODEL,
    approved,
    db_engine,
    live,
    policies,
    send,
    sim,
    store,
    wait_logged,
)


def test_4xx_leave_the_error_rate_and_latency_alone():
    rows = [(500, 100.0, 10.0)] * 10 + [(400, 1.0, None)] * 90 + [(200, 100.0, 10.0)] * 10 + [(499, 9e9, None)]
    s = arm_stats(rows)
    assert (s.requests, s.errors) == (20, 10)  # 50 %: 90 invalid requests did not make it 10 %
    assert s.p95_latency_ms == 100.0


def _log(engine, arm: str | None, deployment: str, status: int, n: int, latency_ms: float = 100.0) -> None:
    with db_session(engine) as s:
        s.add_all(RequestLog(ts=utcnow(), model=MODEL, deployment=deployment, arm=arm, status=status,
                             latency_ms=latency_ms, ttft_ms=10.0) for _ in range(n))
        s.commit()


def test_direct_requests_to_the_candidate_do_not_count(db_engine):  # noqa: F811  (fixtures imported above)
    _log(db_engine, "candidate", CAND, 500, 5)  # the candidate fails the traffic the router sent it
    _log(db_engine, "direct", CAND, 200, 200)  # someone floods it directly with cheap requests
    _log(db_engine, None, CAND, 200, 50)  # sessions pinned there before the canary ran
    _log(db_engine, "direct", BASE, 200, 3, latency_ms=60_000.0)  # a few slow direct requests to the baseline
    now = utcnow()
    window = dict(model=MODEL, start=now.replace(year=now.year - 1), end=now)
    cand = facts.arm_window(db_engine, deployment=CAND, arm="candidate", **window)
    assert (cand.requests, cand.errors) == (5, 5)
    base = facts.arm_window(db_engine, deployment=BASE, arm="baseline", **window)
    assert base.requests == 0


def test_the_router_labels_direct_traffic(live, db_engine):  # noqa: F811  (fixtures imported above)
    url, svc = live
    approved(url, svc, db_engine)  # and served: requests sent before the reload were routed with no canary arm
    body = {"max_tokens": 4, "messages": [{"role": "user", "content": "hi, tell me a joke"}]}
    by_id = httpx.post(url + "/v1/chat/completions", json={"model": CAND, **body}, timeout=30)
    by_header = httpx.post(url + "/v1/chat/completions", json={"model": MODEL, **body}, timeout=30,
                           headers={"x-quantroute-deployment": CAND})
    assert by_id.status_code == by_header.status_code == 200
    assert "x-quantroute-arm" not in by_id.headers
    hashed = send(url, [f"s{i}" for i in range(20)])
    wait_logged(db_engine, 22)
    with db_session(db_engine) as s:
        rows = list(s.exec(select(RequestLog.arm, RequestLog.deployment)))
    assert [r for r in rows if r[0] == "direct"] == [("direct", CAND), ("direct", CAND)]
    assert {r[0] for r in rows if r[0] != "direct"} <= {"candidate", "baseline"}
    assert len([r for r in rows if r[0] != "direct"]) == len(hashed)
