"""Concurrent actors on one rollout (a guards loop, two dashboard users): every status write is a compare-and-swap
on the row's revision, so two steps from the same state advance once, and nothing steps after a rollback.
Runs on SQLite and, with QUANTROUTE_TEST_POSTGRES set, on PostgreSQL (the `engine` fixture)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import select

from quantroute.clock import utcnow
from quantroute.db.engine import init_db, make_engine
from quantroute.db.engine import session as db_session
from quantroute.db.policy_state import PolicyActivation
from quantroute.db.request_log import RequestLog
from quantroute.db.rollout import LIVE_PHASES, Rollout
from quantroute.db.schema import alembic_config
from quantroute.policy.files import read_pointer
from quantroute.policy.store import PolicyStore
from quantroute.rollout import activation, facts
from quantroute.rollout.machine import Phase
from quantroute.rollout.service import RolloutConflict, RolloutRefused, RolloutService
from tests.conftest import add_users, wait_until
from tests.rollout.conftest import BASE, CAND, MODEL, PEOPLE, policy_data, progressing_rollout, record_eval, write_v1


class HeldService(RolloutService):
    """Calls `hold` once, right after its first guard evaluation: the action has read the row (and judged the
    guards) but not written yet, which is where a concurrent actor can slip in."""

    def __init__(self, store: PolicyStore, hold: Callable[[], None], **kw) -> None:
        super().__init__(store, **kw)
        self._hold: Callable[[], None] | None = hold

    def _verdict(self, row):
        v = super()._verdict(row)
        hold, self._hold = self._hold, None
        if hold is not None:
            hold()
        return v


@pytest.fixture
def store(tmp_path: Path, engine) -> PolicyStore:
    write_v1(tmp_path / "policies", policy_data(auto_advance_s=1))
    add_users(engine, **PEOPLE)
    return PolicyStore(tmp_path / "policies", engine)


@pytest.fixture
def progressing(store, engine) -> RolloutService:
    """A rollout at its first step (10 %) with enough healthy traffic on both arms for the guards to pass."""
    return progressing_rollout(store, engine)


def in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except Exception as e:  # noqa: BLE001 - handed to the test
            out["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def one_wins(*actions: Callable[[], object]) -> tuple[object, Exception]:
    """Run the actions in threads at once; exactly one must return and one raise. (value, error)."""
    runs = [in_thread(fn) for fn in actions]
    for t, _ in runs:
        t.join(60)
    outs = [out for _, out in runs]
    won = [o["value"] for o in outs if "value" in o]
    lost = [o["error"] for o in outs if "error" in o]
    assert len(won) == 1 and len(lost) == 1, outs
    return won[0], lost[0]


def activations(engine) -> list[int]:
    with db_session(engine) as s:
        return [a.version for a in s.exec(select(PolicyActivation).order_by(PolicyActivation.id))]


def in_force(store: PolicyStore) -> float:
    """The canary percent the routers serve (the DB's active version and the pointer file agree)."""
    assert read_pointer(store.pointer_path) == store.active_version()
    return store.active().canary_for(MODEL).percent


def test_two_steps_from_the_same_state_advance_once(progressing, store, engine):
    barrier = threading.Barrier(2, timeout=30)
    actors = [HeldService(store, barrier.wait) for _ in range(2)]
    _, lost = one_wins(*(lambda svc=svc, who=who: svc.step(MODEL, by=who) for svc, who in zip(actors, ("ann", "ben"))))
    assert isinstance(lost, RolloutConflict) and "changed while you acted" in lost.reason
    assert "now progressing at 50%" in lost.reason
    st = progressing.status(MODEL)
    assert (st.phase, st.step_index, st.percent) == ("progressing", 1, 50)
    steps = [e for e in st.events if e["action"] == "step"]
    assert [e["refused"] for e in steps] == [False, True]
    assert in_force(store) == 50
    assert len(activations(engine)) == 2  # the approval's 10 % and one step's 50 %


def test_a_step_decided_before_a_rollback_is_refused_after_it(progressing, store, engine):
    read, rolled_back = threading.Event(), threading.Event()
    stepper = HeldService(store, lambda: (read.set(), rolled_back.wait(30)))
    t, out = in_thread(lambda: stepper.step(MODEL, by="ann"))
    assert read.wait(30)
    progressing.rollback(MODEL, by="ben", reason="looks wrong")
    rolled_back.set()
    t.join(60)
    assert isinstance(out.get("error"), RolloutConflict), out
    assert "now rolled-back at 0%" in out["error"].reason
    st = progressing.status(MODEL)
    assert (st.phase, st.percent) == ("rolled-back", 0)
    assert not [e for e in st.events if e["action"] == "step" and not e["refused"]]
    assert in_force(store) == 0


def test_rollback_racing_a_step_always_ends_rolled_back(progressing, store, engine):
    barrier = threading.Barrier(2, timeout=30)
    stepper = HeldService(store, barrier.wait)
    step_t, step_out = in_thread(lambda: stepper.step(MODEL, by="ann"))
    rb_t, rb_out = in_thread(lambda: (barrier.wait(), RolloutService(store).rollback(MODEL, by="ben"))[1])
    step_t.join(60)
    rb_t.join(60)
    assert "value" in rb_out, rb_out  # the rollback always goes through
    assert "value" in step_out or isinstance(step_out["error"], RolloutRefused)
    st = progressing.status(MODEL)
    assert (st.phase, st.percent) == ("rolled-back", 0)
    done = [e["action"] for e in st.events if not e["refused"]]
    assert done[-2:] == ["rollback", "traffic_moved"] and done[:3] == ["start", "eval_passed", "approve"]
    assert in_force(store) == 0


def test_a_step_whose_activation_stalls_past_a_rollback_does_not_stay_in_force(progressing, store, engine,
                                                                                monkeypatch):
    """The hardest order: the step wins its swap, then stalls before activating; the rollback swaps and
    activates; the step's late activation is then overtaken by the rollback's version again (settle)."""
    swapped, rolled_back = threading.Event(), threading.Event()
    original = activation.activate

    def slow_for_steps(store_, row, version, *, by, rollback):
        if not rollback:
            swapped.set()
            rolled_back.wait(30)
        return original(store_, row, version, by=by, rollback=rollback)

    monkeypatch.setattr(activation, "activate", slow_for_steps)
    t, out = in_thread(lambda: progressing.step(MODEL, by="ann"))
    assert swapped.wait(30)
    RolloutService(store).rollback(MODEL, by="ben", reason="stop")
    rolled_back.set()
    t.join(60)
    assert "value" in out, out  # the step did win its revision; it just activated late
    st = progressing.status(MODEL)
    assert (st.phase, st.percent) == ("rolled-back", 0)
    assert in_force(store) == 0
    assert activations(engine)[-1] == st.policy_version


def test_a_step_that_overtakes_a_rollback_finishes_it_when_it_settles(progressing, store, engine, monkeypatch):
    """The order that left a rollback half done: the step wins its swap, the rollback swaps and activates, the
    step's activation overtakes it, the rollback looks for its version (the step's is active) and returns still
    rolling back; then the step settles, activating the rollback's version again. Settling finishes the
    rollback, so traffic moved is recorded without waiting for the controller."""
    rb_activated, step_activated, rb_returned = threading.Event(), threading.Event(), threading.Event()
    original_activate, original_settle = activation.activate, activation.settle

    def ordered_activate(store_, row, version, *, by, rollback):
        if rollback:
            original_activate(store_, row, version, by=by, rollback=rollback)
            rb_activated.set()
            assert step_activated.wait(30)
            return None
        assert rb_activated.wait(30)
        out = original_activate(store_, row, version, by=by, rollback=rollback)
        step_activated.set()
        return out

    def settle_after_the_rollback_returned(*args, **kw):
        if kw["by"] != "ben":  # the step's settle; the rollback's own finds nothing to do
            assert rb_returned.wait(30)
        return original_settle(*args, **kw)

    monkeypatch.setattr(activation, "activate", ordered_activate)
    monkeypatch.setattr(activation, "settle", settle_after_the_rollback_returned)
    t, out = in_thread(lambda: progressing.step(MODEL, by="ann"))
    wait_until(lambda: progressing.status(MODEL).percent > 10, what="the step's swap to 50 %")
    half = RolloutService(store).rollback(MODEL, by="ben", reason="stop")
    rb_returned.set()
    t.join(60)
    assert "value" in out, out
    assert half.phase == "rolling-back"  # this order did happen: the rollback saw the step's version active
    st = progressing.status(MODEL)
    assert (st.phase, st.percent) == ("rolled-back", 0)
    assert in_force(store) == 0 and activations(engine)[-1] == st.policy_version


def test_an_auto_advance_that_loses_to_a_person_keeps_the_guards_loop_running(progressing, store):
    """The guards loop (dwell elapsed, guards pass) reads the rollout at 10 %; a person steps to 50 % before
    the loop writes: the auto-advance is refused, not applied on top, and the loop gets its verdict back."""
    ann = RolloutService(store)
    loop = HeldService(store, lambda: ann.step(MODEL, by="ann"), clock=lambda: utcnow() + timedelta(seconds=5))
    v = loop.evaluate_guards(MODEL)
    assert v is not None and v.status == "pass"
    st = ann.status(MODEL)
    assert (st.step_index, st.percent) == (1, 50)
    dwell = [e for e in st.events if e["action"] == "dwell_elapsed"]
    assert len(dwell) == 1 and dwell[0]["refused"] and "changed while you acted" in dwell[0]["message"]


def test_the_revision_column_upgrades_existing_rows(db_url, tmp_path):
    from alembic import command

    eng = make_engine(db_url)
    try:
        command.upgrade(alembic_config(eng), "0600_rollouts")
        now = utcnow()
        with eng.begin() as c:
            c.execute(text("INSERT INTO rollout (model, candidate, baseline, phase, step_index, percent, steps, "
                           "started_at, updated_at, step_at, started_by, message, history) VALUES (:m, :c, :b, "
                           "'gated', -1, 0, '[10]', :t, :t, :t, 'alice', '', '[]')"),
                      {"m": MODEL, "c": CAND, "b": BASE, "t": now})
        init_db(eng)
        with eng.connect() as c:
            assert c.execute(text("SELECT revision FROM rollout")).scalar_one() == 0
    finally:
        eng.dispose()


def test_a_breach_found_while_a_person_rolls_back_leaves_one_rollback(progressing, store, engine):
    with db_session(engine) as s:  # the candidate starts failing
        s.add_all(RequestLog(ts=utcnow(), model=MODEL, deployment=CAND, arm="candidate", status=500,
                               latency_ms=5.0)
                  for _ in range(20))
        s.commit()
    ann = RolloutService(store)
    loop = HeldService(store, lambda: ann.rollback(MODEL, by="ann", reason="saw the errors first"))
    v = loop.evaluate_guards(MODEL)  # the loop keeps running: no exception
    assert v.status == "breach"
    st = ann.status(MODEL)
    assert (st.phase, st.aborted_reason) == ("rolled-back", "saw the errors first")
    assert [e["action"] for e in st.events if not e["refused"]][-2:] == ["rollback", "traffic_moved"]
    assert sum(e["action"] == "guard_breach" and not e["refused"] for e in st.events) == 0
    assert in_force(store) == 0


def test_two_starts_at_once_make_one_rollout(store, engine, monkeypatch):
    """Both starts read "no live rollout" before either writes; the database's one-live-rollout index lets one
    insert through and the other gets a conflict naming who holds the model."""
    record_eval(engine, passed=True)
    barrier = threading.Barrier(2, timeout=30)
    original = facts.eval_gate

    waited: set[int] = set()

    def gate_after_both_read(*a, **kw):  # start's own gate check only; opening the gate calls it again
        if threading.get_ident() not in waited:
            waited.add(threading.get_ident())
            barrier.wait()
        return original(*a, **kw)

    monkeypatch.setattr(facts, "eval_gate", gate_after_both_read)
    won, lost = one_wins(*(lambda who=who: RolloutService(store).start(MODEL, candidate=CAND, by=who)
                            for who in ("ann", "ben")))
    assert isinstance(lost, RolloutConflict) and "another rollout of 'llama3-8b'" in lost.reason
    assert f"started by {won.started_by}" in lost.reason
    with db_session(engine) as s:
        rows = s.exec(select(Rollout).where(Rollout.model == MODEL)).all()
    assert [r.id for r in rows] == [won.id]
    # the loser can act on the winner's rollout (it is an ordinary live rollout)
    monkeypatch.setattr(facts, "eval_gate", original)
    assert RolloutService(store).status(MODEL).phase == "awaiting-approval"


def test_live_phases_are_the_machines_non_terminal_phases():
    assert set(LIVE_PHASES) == {p.value for p in Phase if not p.terminal}


def test_upgrading_closes_duplicate_live_rollouts_before_indexing(db_url):
    """A database written before the index may hold two live rollouts of a model; the service acted on the
    newest, so the upgrade keeps it and closes the older one, saying why."""
    from alembic import command

    eng = make_engine(db_url)
    try:
        command.upgrade(alembic_config(eng), "0602_rollout_target_concurrency")
        now = utcnow()
        with eng.begin() as c:
            for who in ("alice", "bob"):
                c.execute(text("INSERT INTO rollout (model, candidate, baseline, phase, step_index, percent, steps, "
                               "started_at, updated_at, step_at, started_by, message, history, revision) VALUES "
                               "(:m, :c, :b, 'progressing', 0, 10, '[10]', :t, :t, :t, :who, '', '[]', 0)"),
                          {"m": MODEL, "c": CAND, "b": BASE, "t": now, "who": who})
        init_db(eng)
        with eng.connect() as c:
            rows = c.execute(text("SELECT started_by, phase, aborted_reason FROM rollout ORDER BY id")).all()
        assert rows[0][:2] == ("alice", "rolled-back") and "superseded by rollout" in rows[0][2]
        assert tuple(rows[1]) == ("bob", "progressing", None)
    finally:
        eng.dispose()
