"""Unattended rollouts: the simulated fleet, the router and `quantroute controller` (a real process) running, no
CLI in the foreground. After a person's approval a healthy candidate walks its steps on its own; a faulty one
(errors, then latency) is rolled back on its own at its failure_limit-th breaching pass, with the guard named, and
new sessions go back to the baseline. Controller logs are kept in tests/artifacts/ (the transcripts)."""

from __future__ import annotations

import threading
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.controller.conftest import keep_log, spawn_controller, stop
from tests.rollout.conftest import BASE, LATENCY_GUARDS, MODEL, TOKEN, approved, policy_data, send, set_faults, write_v1

GUARDS = {"max_error_rate": 0.05, "max_p95_latency_ratio": 1000.0, "max_ttft_ratio": 1000.0, "window_s": 120,
          "min_requests": 10, "require_eval_pass": True}


@pytest.fixture
def policies(request, tmp_path: Path) -> Path:
    over = {"steps": [10, 50, 100], "auto_advance_s": 1, "guards": GUARDS, **getattr(request, "param", {})}
    write_v1(tmp_path / "policies", policy_data(**over))
    return tmp_path / "policies"


@contextmanager
def traffic(url: str, *, batch: int = 40, max_batches: int = 200):
    """New sessions in batches on a background thread (bounded), like clients that keep arriving."""
    done = threading.Event()

    def run() -> None:
        for _ in range(max_batches):
            if done.is_set():
                return
            send(url, [uuid.uuid4().hex for _ in range(batch)], concurrency=8)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join(120)


@contextmanager
def controller(db_engine, policies: Path, url: str, tmp_path: Path, artifact: str):
    log = tmp_path / "controller.log"
    proc = spawn_controller(str(db_engine.url), policies, log, "--router", url, "--admin-token", TOKEN)
    try:
        yield proc
    finally:
        stop(proc)
        keep_log(log, artifact)


def row_of(svc):
    return svc.list(MODEL)[0]


def test_healthy_candidate_advances_on_its_own(live, db_engine, store, policies, tmp_path):
    url, svc = live
    approved(url, svc, db_engine)  # the people's part: start, checklist, a reviewer's approval -> 10 %
    with controller(db_engine, policies, url, tmp_path, "controller-good-rollout.log"), traffic(url):
        wait_until(lambda: row_of(svc).percent == 100, what="the canary to walk to 100 %", timeout=180)
        wait_until(lambda: row_of(svc).converged, what="100 % to be observed active", timeout=60)
    st = svc.status(MODEL)
    assert st.phase == "progressing" and store.active().canary_for(MODEL).percent == 100
    moved = [e for e in st.events if e["action"] == "dwell_elapsed"]
    assert [(e["actor"], e["percent_before"], e["percent_after"]) for e in moved] == [
        ("controller", 10, 50), ("controller", 50, 100)]
    for e in moved:  # the figures that let it advance, and which controller acted
        assert e["detail"]["verdict"]["status"] == "pass" and e["detail"]["controller"]
        assert e["detail"]["verdict"]["candidate"]["requests"] >= GUARDS["min_requests"]


@pytest.mark.parametrize("fault,guard,policies", [
    ({"error_rate": 0.4}, "error_rate", {"guards": {**GUARDS, "failure_limit": 2}}),
    ({"extra_latency_ms": 3000}, "p95_latency_ratio", {"guards": LATENCY_GUARDS})], indirect=["policies"],
    ids=["error_rate", "latency"])
def test_faulty_candidate_is_rolled_back_on_its_own(live, sim, db_engine, store, policies, tmp_path,
                                                    fault, guard):
    url, svc = live
    limit = store.active().canary_for(MODEL).guards.failure_limit
    approved(url, svc, db_engine)
    set_faults(sim, "int4-v2", **fault)
    with controller(db_engine, policies, url, tmp_path, f"controller-rollback-{guard}.log"), traffic(url):
        wait_until(lambda: row_of(svc).phase == "rolled-back", what="the controller to roll back", timeout=180)
    st = svc.status(MODEL)
    assert st.percent == 0 and guard in st.aborted_reason and store.active().canary_for(MODEL).percent == 0
    breaches = [e for e in st.events if e["action"] == "guard_breach"]
    # held at each breaching pass below the limit, rolled back at the limit-th one in a row
    assert [e["phase_after"] for e in breaches] == ["progressing"] * (limit - 1) + ["rolling-back"]
    assert all(e["actor"] == "controller" and guard in [b["guard"] for b in e["detail"]["verdict"]["breaches"]]
               for e in breaches)
    assert [e["action"] for e in st.events][-1] == "traffic_moved"
    rs = send(url, [uuid.uuid4().hex for _ in range(60)])
    assert {r.headers["x-quantroute-deployment"] for r in rs} == {BASE}
