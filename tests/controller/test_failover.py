"""One leader among controllers, on PostgreSQL: two `quantroute controller` processes share a schema; the leader
decides a guard breach, writes `rolling-back`, and stops there before activating (fault injection: it hangs,
holding the advisory lock) - the standby must not act meanwhile. The leader is then killed (SIGKILL); the standby
takes the lock, activates the version the leader wrote, and says `rolled-back`. Nothing is done twice: one breach,
one rollback version, one activation of it. The timeline is kept in tests/artifacts/controller-failover.txt."""

from __future__ import annotations

import os
import signal

import pytest
from sqlmodel import select

from quantroute.clock import utcnow
from quantroute.db.engine import session as db_session
from quantroute.db.notification import Notification
from quantroute.db.policy_state import PolicyActivation
from quantroute.db.request_log import RequestLog
from quantroute.policy.store import PolicyStore
from tests.conftest import wait_until
from tests.controller.conftest import ARTIFACTS, keep_log, role_of, spawn_controller, stop
from tests.rollout.conftest import CAND, MODEL, policy_data, progressing_rollout, write_v1

pytestmark = pytest.mark.postgres
INTERVAL = 0.5


def test_standby_completes_the_rollback_of_a_killed_leader_and_nothing_happens_twice(pg_url, pg_engine, tmp_path):
    write_v1(tmp_path / "policies", policy_data(auto_advance_s=3600))
    store = PolicyStore(tmp_path / "policies", pg_engine)
    svc = progressing_rollout(store, pg_engine)  # at 10 %, healthy so far
    timeline: list[tuple[str, str]] = []

    def mark(what: str) -> None:
        timeline.append((utcnow().isoformat(timespec="milliseconds")[:23], what))

    logs = {n: tmp_path / f"{n}.log" for n in ("leader", "standby")}
    a = spawn_controller(pg_url, store.dir, logs["leader"], "--name", "ctl-a", "--fault-after-status-write", "hang",
                         interval=INTERVAL)
    b = None
    try:
        wait_until(lambda: role_of(pg_engine, "ctl-a") == "leader", what="ctl-a to lead", timeout=60)
        mark("ctl-a leads")
        b = spawn_controller(pg_url, store.dir, logs["standby"], "--name", "ctl-b", interval=INTERVAL)
        wait_until(lambda: role_of(pg_engine, "ctl-b") == "standby", what="ctl-b to stand by", timeout=60)
        mark("ctl-b stands by")

        with db_session(pg_engine) as s:  # the candidate starts failing
            s.add_all(RequestLog(ts=utcnow(), model=MODEL, deployment=CAND, arm="candidate", status=500,
                                 latency_ms=5.0)
                      for _ in range(30))
            s.commit()
        mark("30 candidate errors logged")
        wait_until(lambda: svc.list(MODEL)[0].phase == "rolling-back", what="ctl-a to decide the rollback", timeout=60)
        mark("rollout row says rolling-back (ctl-a hangs before activating)")
        for _ in range(3):  # a few of ctl-b's passes: it stays standby and acts on nothing
            before = _passes(pg_engine, "ctl-b")
            wait_until(lambda before=before: _passes(pg_engine, "ctl-b") > before, what="a standby pass", timeout=60)
        assert role_of(pg_engine, "ctl-b") == "standby"
        row = svc.list(MODEL)[0]
        assert row.phase == "rolling-back" and store.active().canary_for(MODEL).percent == 10
        assert row.observed_version != row.policy_version

        os.killpg(a.pid, signal.SIGKILL)
        a.wait(10)
        mark("ctl-a killed (SIGKILL)")
        wait_until(lambda: svc.list(MODEL)[0].phase == "rolled-back", what="ctl-b to complete the rollback", timeout=30)
        mark("rollout row says rolled-back")
        wait_until(lambda: role_of(pg_engine, "ctl-b") == "leader",
                   what="ctl-b's heartbeat as leader (after its pass)", timeout=60)
        assert store.active().canary_for(MODEL).percent == 0
    finally:
        for p in (a, b):
            if p is not None:
                stop(p)
        for n, path in logs.items():
            keep_log(path, f"controller-failover-{n}.log")

    st = svc.status(MODEL)
    acted = [(e["at"], e["actor"], e["detail"].get("controller"), e["action"], e["message"]) for e in st.events
             if not e["refused"] and e["actor"] == "controller"]
    assert [(c, a_) for _, _, c, a_, _ in acted] == [("ctl-a", "guard_breach"), ("ctl-b", "reconcile"),
                                                     ("ctl-b", "traffic_moved")]
    rollback_version = st.policy_version
    with db_session(pg_engine) as s:
        activations = list(s.exec(select(PolicyActivation).where(PolicyActivation.version == rollback_version)))
        kinds = [n.kind for n in s.exec(select(Notification).order_by(Notification.id))]
    assert len(activations) == 1 and activations[0].by == "controller"
    assert store.versions()[-1] == rollback_version and sum(  # one version written for the rollback
        "guard_breach" in store.load(v).message for v in store.versions()) == 1
    assert kinds.count("rollback") == 1 and kinds.count("rolled_back") == 1

    lines = [f"{at}  test        {what}" for at, what in timeline]
    lines += [f"{at[:23]}  {ctl:<10}  {action}: {msg}" for at, _, ctl, action, msg in acted]
    lines += [f"{a_.at.isoformat(timespec='milliseconds')[:23]}  ctl-b       activated policy version "
              f"{a_.version}" for a_ in activations]
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "controller-failover.txt").write_text("\n".join(sorted(lines)) + "\n")


def _passes(engine, name: str) -> int:
    from quantroute.db import controller as heartbeat

    with db_session(engine) as s:
        row = s.get(heartbeat.ControllerHeartbeat, name)
        return row.passes if row else 0
