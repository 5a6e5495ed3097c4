"""Reading session pins through the indexes the table keeps (0970_pin_indexes): releasing a canary's pins finds
them by the partial index on candidate-arm pins' model, and live pins list newest first through the expiry index.
SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text
from sqlmodel import Session, select

from quantroute.clock import utcnow
from quantroute.db.session_pin import SessionPin, list_pins
from quantroute.rollout.pins import release_candidate_pins
from quantroute.router.path.canary import BASELINE, CANDIDATE


def _pin(key: str, *, arm: str | None, model: str = "m", used_s_ago: float = 0,
         deployment: str | None = None) -> SessionPin:
    """A pin last used `used_s_ago` seconds ago, live for an hour from then."""
    used = utcnow() - timedelta(seconds=used_s_ago)
    return SessionPin(session_key=key, model=model, tier="int4", arm=arm, deployment=deployment,
                      served_deployment="d-old", created_at=used, last_used=used,
                      expires_at=used + timedelta(hours=1))


def _plan(engine, sql: str, params: dict) -> str:
    with engine.begin() as c:
        if engine.dialect.name == "sqlite":
            return " ".join(str(r[-1]) for r in c.execute(text(f"EXPLAIN QUERY PLAN {sql}"), params))
        # A table this small is scanned whatever indexes it has: ask whether the index can serve the query
        # (SET LOCAL: for this transaction only, not for the pooled connection's later users).
        c.execute(text("SET LOCAL enable_seqscan = off"))
        return " ".join(r[0] for r in c.execute(text(f"EXPLAIN {sql}"), params))


def test_releasing_a_canary_moves_only_its_candidate_pins_and_finds_them_by_the_partial_index(engine):
    with Session(engine) as s:
        s.add_all([_pin("c1", arm=CANDIDATE), _pin("c2", arm=CANDIDATE), _pin("b1", arm=BASELINE),
                   _pin("other-model", arm=CANDIDATE, model="m2"),
                   _pin("named", arm=CANDIDATE, deployment="d-cand")])  # named its deployment: keeps it
        s.commit()
    assert release_candidate_pins(engine, model="m") == 2
    with Session(engine) as s:
        got = {p.session_key: (p.arm, p.served_deployment) for p in s.exec(select(SessionPin))}
    assert got == {"c1": (BASELINE, None), "c2": (BASELINE, None), "b1": (BASELINE, "d-old"),
                   "other-model": (CANDIDATE, "d-old"), "named": (CANDIDATE, "d-old")}

    # The service's statement; the arm is a bound parameter there too, as the partial index must allow. The
    # router's own value (router.canary) is bound: the index's arm must be the one the router writes.
    plan = _plan(engine, "SELECT session_key FROM session_pin WHERE model = :model AND arm = :arm "
                         "AND deployment IS NULL", {"model": "m", "arm": CANDIDATE})
    assert "ix_session_pin_candidate_model" in plan


def test_live_pins_list_most_recently_used_first_through_the_expiry_index(engine):
    with Session(engine) as s:
        s.add_all([_pin("older", arm=None, used_s_ago=120), _pin("newest", arm=None),
                   _pin("middle", arm=None, used_s_ago=60), _pin("gone", arm=None, used_s_ago=7200)])
        s.commit()
        assert [p.session_key for p in list_pins(session=s)] == ["newest", "middle", "older"]
        assert [p.session_key for p in list_pins(session=s, limit=2)] == ["newest", "middle"]
    plan = _plan(engine, "SELECT session_key FROM session_pin WHERE expires_at > :now "
                         "ORDER BY expires_at DESC LIMIT 10", {"now": utcnow()})
    assert "ix_session_pin_expires_at" in plan
    assert "TEMP B-TREE" not in plan.upper() and "Sort" not in plan  # no sort of every live pin
