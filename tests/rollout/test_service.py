"""The service against a real database and policy store, without a router: start refusals, the eval gate,
the checklist, approval rules, versions written per traffic change, audit events, pins released."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from quantroute.auth import PermissionDenied
from quantroute.clock import utcnow
from quantroute.db.audit import AuditEvent
from quantroute.db.engine import session as db_session
from quantroute.db.node import NodeRow, upsert_node
from quantroute.db.session_pin import SessionPin
from quantroute.db.user import update_user
from quantroute.rollout.service import RolloutRefused, RolloutService
from tests.conftest import add_users
from tests.rollout.conftest import (
    BASE,
    CAND,
    MODEL,
    PEOPLE,
    PERSON_ITEMS,
    policy_data,
    record_eval,
    record_staircase,
    write_v1,
)


@pytest.fixture
def svc(store, db_engine) -> RolloutService:
    with db_session(db_engine) as s:  # registered nodes, health unknown without a router
        for key, dep, url in (("int4-a", BASE, "http://127.0.0.1:1/a"), ("int4-v2", CAND, "http://127.0.0.1:1/c")):
            upsert_node(session=s, row=NodeRow(key=key, url=url, model=MODEL, deployment=dep, tier="int4",
                                               format="int4"))
    return RolloutService(store)


def ready_for_approval(svc: RolloutService, db_engine) -> None:
    record_eval(db_engine, passed=True)
    record_staircase(db_engine)
    svc.start(MODEL, candidate=CAND, by="alice")
    svc.tick(MODEL, PERSON_ITEMS + ["baseline_healthy"], by="carol")


def test_start_waits_at_the_gate_until_a_passing_eval_run(svc, db_engine):
    st = svc.start(MODEL, candidate=CAND, by="alice")
    assert st.phase == "gated" and "no finished eval run" in st.gate
    with pytest.raises(RolloutRefused, match="eval gate is closed"):
        svc.approve(MODEL, by="bob")
    run = record_eval(db_engine, passed=True)
    st = svc.check_gate(MODEL)
    assert st.phase == "awaiting-approval" and f"run {run} " in st.gate


def test_a_candidate_failing_its_eval_gate_cannot_start(svc, db_engine):
    record_eval(db_engine, passed=False)
    with pytest.raises(RolloutRefused, match="failed its gate.*math pass rate dropped"):
        svc.start(MODEL, candidate=CAND, by="alice")
    assert svc.list(MODEL) == []


def test_a_failing_run_after_a_passing_one_closes_the_gate(svc, db_engine):
    svc.start(MODEL, candidate=CAND, by="alice")
    record_eval(db_engine, passed=True)
    record_eval(db_engine, passed=False)
    with pytest.raises(RolloutRefused, match="failed"):
        svc.check_gate(MODEL)
    assert svc.status(MODEL).phase == "gated"


def test_runs_on_another_suite_do_not_open_the_gate(svc, db_engine):
    record_eval(db_engine, passed=True, suite="smoke")
    st = svc.start(MODEL, candidate=CAND, by="alice")
    assert st.phase == "gated" and "pinned suite 'golden-v1'" in st.gate and "'smoke'" in st.gate


def test_start_refuses_the_baseline_id_and_missing_metadata(tmp_path, db_engine, store, svc):
    with pytest.raises(RolloutRefused, match="reuses the baseline"):
        svc.start(MODEL, candidate=BASE, by="alice")
    with pytest.raises(RolloutRefused, match="names candidate"):
        svc.start(MODEL, candidate="llama3-8b-something-else", by="alice")
    data = policy_data()
    data["deployments"][CAND] = {"model": MODEL, "format": "int4", "method": "awq"}
    write_v1(tmp_path / "p2", data)
    from quantroute.db.engine import init_db, make_engine
    from quantroute.policy.store import PolicyStore

    # its own database: version 1 of this store is the file above (a shared database already holds another one)
    other = make_engine(f"sqlite:///{tmp_path / 'p2.db'}")
    init_db(other)
    add_users(other, **PEOPLE)
    with pytest.raises(RolloutRefused, match="lacks calibration_set, eval_suite, checksum"):
        RolloutService(PolicyStore(tmp_path / "p2", other)).start(MODEL, candidate=CAND, by="alice")
    other.dispose()


def test_approval_by_the_starter_is_refused(svc, db_engine):
    ready_for_approval(svc, db_engine)
    with pytest.raises(PermissionDenied, match="rollout.approve is not allowed for role operator"):
        svc.approve(MODEL, by="alice")
    with db_session(db_engine) as s:  # a starter who became a reviewer since is still not a second pair of eyes
        update_user(session=s, name="alice", role="reviewer")
    with pytest.raises(RolloutRefused, match="alice started this rollout"):
        svc.approve(MODEL, by="alice")
    st = svc.status(MODEL)
    assert st.phase == "awaiting-approval"
    assert st.events[-1]["refused"] and st.events[-1]["actor"] == "alice"


def test_approval_refused_while_a_required_item_is_open(svc, db_engine):
    record_eval(db_engine, passed=True)
    svc.start(MODEL, candidate=CAND, by="alice")
    svc.tick(MODEL, PERSON_ITEMS, by="carol")  # baseline health unknown without a router: still open
    with pytest.raises(RolloutRefused, match="open: staircase_load_test, baseline_healthy"):
        svc.approve(MODEL, by="bob")
    with pytest.raises(RolloutRefused, match="staircase_load_test is checked by the system"):
        svc.tick(MODEL, ["staircase_load_test"], by="carol")  # the system knows there is no run
    record_staircase(db_engine)
    svc.tick(MODEL, ["baseline_healthy"], by="carol")
    assert svc.approve(MODEL, by="bob").phase == "progressing"


def test_staircase_item_follows_the_load_tester_runs(store, db_engine):
    from quantroute.rollout.facts import staircase_fact

    assert staircase_fact(db_engine, CAND, None).ok is False
    record_staircase(db_engine, ok_up_to=8)
    assert staircase_fact(db_engine, CAND, None).ok is True
    f = staircase_fact(db_engine, CAND, 16)
    assert f.ok is False and "concurrency 16" in f.detail
    record_staircase(db_engine, ok_up_to=32)
    assert staircase_fact(db_engine, CAND, 16).ok is True
    assert staircase_fact(db_engine, BASE, None).ok is False  # another deployment's run does not count


def test_system_items_cannot_be_ticked_by_a_person(svc, db_engine):
    svc.start(MODEL, candidate=CAND, by="alice")
    with pytest.raises(RolloutRefused, match="eval_gate is checked by the system"):
        svc.tick(MODEL, ["eval_gate"], by="carol")
    with pytest.raises(RolloutRefused, match="unknown checklist item"):
        svc.tick(MODEL, ["vibes"], by="carol")


def test_checklist_ticks_name_who(svc, db_engine):
    ready_for_approval(svc, db_engine)
    items = {i.key: i for i in svc.checklist(MODEL).items}
    assert items["eval_gate"].by == "system" and items["artifact_metadata"].by == "system"
    assert "sha256:c4" in items["artifact_metadata"].detail
    assert items["kernel_support"].by == "carol"
    assert items["eval_coverage"].done and items["isolated_node"].done
    assert not items["peak_slo"].done and not items["peak_slo"].required


def test_approve_step_rollback_write_versions_and_audit(svc, db_engine, store):
    ready_for_approval(svc, db_engine)
    st = svc.approve(MODEL, by="bob")
    assert (st.phase, st.percent) == ("progressing", 10)
    v = store.active_version()
    assert v == 2 and store.active().canary_for(MODEL).percent == 10
    assert store.is_approved(v) and store.load(v).author == "rollout"
    with pytest.raises(RolloutRefused, match="inconclusive"):  # no traffic at all: the step holds
        svc.step(MODEL, by="alice")
    with db_session(db_engine) as s:  # a session pinned on the candidate arm before the rollback
        now = utcnow()
        s.add(SessionPin(session_key="s1", model=MODEL, tier="int4", arm="candidate",
                         expires_at=now + timedelta(hours=1)))
        s.add(SessionPin(session_key="s2", model=MODEL, tier="int4", arm="baseline",
                         expires_at=now + timedelta(hours=1)))
        s.commit()
    st = svc.rollback(MODEL, by="alice", reason="answers look off")
    assert (st.phase, st.percent, st.aborted_reason) == ("rolled-back", 0, "answers look off")
    assert store.active_version() == 3 and store.active().canary_for(MODEL).percent == 0
    assert not store.is_approved(3)  # emergency activation, no approval needed
    with db_session(db_engine) as s:
        assert {p.session_key: p.arm for p in s.exec(select(SessionPin))} == {"s1": "baseline", "s2": "baseline"}
        actions = [e.action for e in s.exec(select(AuditEvent).order_by(AuditEvent.id))]
        rb = s.exec(select(AuditEvent).where(AuditEvent.action == "rollout.rollback")).one()
    assert (rb.version_before, rb.version_after, rb.actor) == (2, 3, "alice")
    for a in ("rollout.start", "rollout.eval_passed", "rollout.approve", "policy.emergency", "rollout.release_pins"):
        assert a in actions
    with pytest.raises(RolloutRefused, match="no rollout of 'llama3-8b' in progress"):
        svc.step(MODEL, by="alice")


def test_a_step_approved_by_the_rollouts_approval_is_audited_as_the_stepper_not_the_reviewer(svc, db_engine, store):
    """The reviewer's approval of the rollout covers its steps; the audit event of a step's version names who
    stepped, when they did, and whose approval covers it (not the reviewer, who did nothing then)."""
    from quantroute.rollout import activation, versions

    ready_for_approval(svc, db_engine)
    svc.approve(MODEL, by="bob")
    row = svc._row(MODEL)
    v = store.write_system_version(parent=store.active_version(), author="rollout", message="next step",
                                   policy=versions.with_percent(store.active(), MODEL, 50))
    activation.activate(store, row, v, by="alice", rollback=False)
    assert store.active_version() == v
    with db_session(db_engine) as s:
        approvals = list(s.exec(select(AuditEvent).where(AuditEvent.action == "policy.approve")
                                .order_by(AuditEvent.id)))
    first, step = approvals[-2], approvals[-1]
    assert (first.actor, first.detail.get("implicit")) == ("bob", None)  # bob approved the rollout himself
    assert step.actor == "alice" and step.version_after == v
    assert step.detail["implicit"] is True and step.detail["covered_by"] == "bob"
    assert "bob's approval of rollout" in step.detail["comment"]


def test_rollback_works_from_the_gate_without_writing_a_version(svc, store):
    svc.start(MODEL, candidate=CAND, by="alice")
    st = svc.rollback(MODEL, by="alice")
    assert st.phase == "rolled-back" and store.versions() == [1]
    st = svc.start(MODEL, candidate=CAND, by="alice")  # a finished rollout can be started again
    assert st.phase == "gated" and len(svc.list(MODEL)) == 2


def test_a_failing_eval_run_during_the_rollout_rolls_it_back(svc, db_engine, store):
    """require_eval_pass: the guards read eval runs recorded after the start (e.g. a nightly `quantroute eval`
    on the pinned suite); the newest failing one is a breach on its own, whatever the traffic sample."""
    ready_for_approval(svc, db_engine)
    svc.approve(MODEL, by="bob")
    assert svc.evaluate_guards(MODEL).status == "inconclusive"  # no traffic; the gate's passing run is fine
    run = record_eval(db_engine, passed=False)
    v = svc.evaluate_guards(MODEL)
    assert v.status == "breach" and [b.guard for b in v.breaches] == ["eval"]
    assert f"run {run}: math pass rate dropped" in v.breaches[0].detail
    st = svc.status(MODEL)
    assert st.phase == "rolled-back" and "eval" in st.aborted_reason and st.breach["breaches"][0]["guard"] == "eval"
    assert store.active().canary_for(MODEL).percent == 0


def test_a_newer_passing_eval_run_clears_the_eval_guard(svc, db_engine):
    ready_for_approval(svc, db_engine)
    svc.approve(MODEL, by="bob")
    record_eval(db_engine, passed=False)
    record_eval(db_engine, passed=True)  # the newest run on the pinned suite decides
    assert svc.guard_verdict(MODEL).status == "inconclusive"


def test_without_require_eval_pass_a_failing_run_is_no_breach(tmp_path, db_engine, svc):
    from quantroute.policy.store import PolicyStore

    data = policy_data()
    data["canaries"][0]["guards"]["require_eval_pass"] = False
    write_v1(tmp_path / "p2", data)
    other = RolloutService(PolicyStore(tmp_path / "p2", db_engine))
    ready_for_approval(other, db_engine)
    other.approve(MODEL, by="bob")
    record_eval(db_engine, passed=False)
    v = other.evaluate_guards(MODEL)
    assert v.status == "inconclusive" and not v.breaches
    assert other.status(MODEL).phase == "progressing"


def test_target_concurrency_is_kept_on_the_rollout_and_drives_the_staircase_item(svc, db_engine):
    record_eval(db_engine, passed=True)
    record_staircase(db_engine, ok_up_to=8)  # passes at 4 and 8, not at 16
    st = svc.start(MODEL, candidate=CAND, by="alice", target_concurrency=16)
    assert st.target_concurrency == 16 and svc.list(MODEL)[0].target_concurrency == 16
    item = {i.key: i for i in st.checklist}["staircase_load_test"]
    assert not item.done and "concurrency 16" in item.detail
    svc.tick(MODEL, PERSON_ITEMS + ["baseline_healthy"], by="carol")
    with pytest.raises(RolloutRefused, match="open: staircase_load_test"):
        svc.approve(MODEL, by="bob")
    record_staircase(db_engine, ok_up_to=32)
    assert svc.approve(MODEL, by="bob").phase == "progressing"


def test_without_a_target_any_passing_staircase_step_ticks_the_item(svc, db_engine):
    record_staircase(db_engine, ok_up_to=8)
    st = svc.start(MODEL, candidate=CAND, by="alice")
    item = {i.key: i for i in st.checklist}["staircase_load_test"]
    assert st.target_concurrency is None and item.done and "no target set" in item.detail


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_target_concurrency_must_be_a_positive_whole_number(svc, bad):
    with pytest.raises(RolloutRefused, match="target_concurrency must be a whole number"):
        svc.start(MODEL, candidate=CAND, by="alice", target_concurrency=bad)
    assert svc.list(MODEL) == []
