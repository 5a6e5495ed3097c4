"""The controller heals what a crash left half done. The old service wrote `rolled-back` before activating the
version that moves traffic; a crash (or a DB or pointer-file error) in between left the candidate serving its
share under a rollout that claimed to be rolled back. Now the row says `rolling-back` until the version is
observed active, and the controller's next pass activates it and only then says `rolled-back`.
SQLite and PostgreSQL (the `engine` fixture); no router: the active version is what routers load."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlmodel import select

from quantroute.controller.loop import Controller
from quantroute.controller.settings import ControllerSettings
from quantroute.db.audit import AuditEvent
from quantroute.db.engine import session as db_session
from quantroute.db.notification import Notification
from quantroute.policy.store import PolicyStore
from quantroute.rollout.service import HEAL_GRACE_S, RolloutService
from tests.rollout.conftest import MODEL, policy_data, progressing_rollout, write_v1


class Crash(Exception):
    """Stands for the process dying between the status write and the activation."""


def crash(row) -> None:
    raise Crash(f"crashed after writing rollout {row.id} as {row.phase}")


def after_grace() -> None:
    """The controller leaves a status write alone for a moment (its own actor is activating it)."""
    time.sleep(HEAL_GRACE_S)


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    write_v1(tmp_path / "policies", policy_data(auto_advance_s=3600))
    return tmp_path / "policies"


@pytest.fixture
def svc(policies: Path, engine) -> RolloutService:
    return progressing_rollout(PolicyStore(policies, engine), engine)


@pytest.fixture
def controller(policies: Path, engine, tmp_path: Path):
    ctl = Controller(ControllerSettings(db_url=str(engine.url), policies_dir=policies, interval_s=0.1,
                                        name="test-controller", lock_key=_key(tmp_path)), engine=engine)
    yield ctl
    ctl.close()


def _key(tmp_path: Path) -> int:
    return hash(str(tmp_path)) & 0x7FFFFFFF  # a key of this test's own (PostgreSQL runs share a server)


def in_force(store: PolicyStore) -> float:
    return store.active().canary_for(MODEL).percent


def test_crash_between_rollback_status_write_and_activation_is_healed_by_the_next_pass(svc, engine, controller):
    store = svc.store
    assert in_force(store) == 10
    crashing = RolloutService(store, after_status_write=crash)
    with pytest.raises(Crash):
        crashing.rollback(MODEL, by="alice", reason="answers look off")
    st = svc.status(MODEL)
    # the defect: the old code said "rolled-back" here while the candidate still had 10 % of new sessions
    assert in_force(store) == 10
    assert st.phase == "rolling-back" and st.phase != "rolled-back"
    row = svc.list(MODEL)[0]
    assert row.observed_version != row.policy_version  # desired (0 %) not observed

    after_grace()
    actions = controller.run_pass()
    assert controller.role == "leader"
    assert in_force(store) == 0
    st = svc.status(MODEL)
    assert (st.phase, st.percent) == ("rolled-back", 0)
    assert any("never activated" in a for a in actions) and any("rolled back" in a for a in actions)
    done = [(e["actor"], e["action"]) for e in st.events if not e["refused"]]
    assert done[-3:] == [("alice", "rollback"), ("controller", "reconcile"), ("controller", "traffic_moved")]
    healed = next(e for e in st.events if e["action"] == "reconcile")
    assert healed["detail"]["controller"] == "test-controller" and healed["detail"]["desired"] == st.policy_version
    row = svc.list(MODEL)[0]
    assert row.observed_version == row.policy_version

    assert controller.run_pass() == []  # idempotent: nothing left to do
    with db_session(engine) as s:
        audit = [a.action for a in s.exec(select(AuditEvent).where(AuditEvent.actor == "controller"))]
        kinds = [n.kind for n in s.exec(select(Notification).order_by(Notification.id))]
    assert audit == ["policy.emergency", "rollout.reconcile", "rollout.traffic_moved"]  # the activation, then why
    assert kinds[-3:] == ["rollback", "reconcile", "rolled_back"]


def test_crash_between_step_status_write_and_activation_is_healed(svc, controller):
    store = svc.store
    with pytest.raises(Crash):
        RolloutService(store, after_status_write=crash).step(MODEL, by="alice")
    assert svc.status(MODEL).percent == 50 and in_force(store) == 10  # desired 50, observed 10
    after_grace()
    controller.run_pass()
    assert in_force(store) == 50
    row = svc.list(MODEL)[0]
    assert row.observed_version == row.policy_version == store.active_version()


def test_a_standby_does_not_act(svc, policies, engine, controller, tmp_path):
    store = svc.store
    with pytest.raises(Crash):
        RolloutService(store, after_status_write=crash).rollback(MODEL, by="alice")
    controller.lock.acquire()  # the leader holds the lock but has not passed yet
    other = Controller(ControllerSettings(db_url=str(engine.url), policies_dir=policies, name="standby",
                                          lock_key=_key(tmp_path)), engine=engine)
    try:
        after_grace()
        assert other.run_pass() == [] and other.role == "standby"
        assert svc.status(MODEL).phase == "rolling-back" and in_force(store) == 10
        assert controller.run_pass() and in_force(store) == 0
    finally:
        other.close()
