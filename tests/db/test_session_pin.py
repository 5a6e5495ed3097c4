"""Reading and writing session pins through the indexes the table keeps: releasing a canary's pins finds them by
the partial index on candidate-arm pins' model; live pins list newest first; a returning turn's refresh writes no
index entry (on PostgreSQL, a heap-only update). SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
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


def test_live_pins_list_most_recently_used_first(engine):
    with Session(engine) as s:
        s.add_all([_pin("older", arm=None, used_s_ago=120), _pin("newest", arm=None),
                   _pin("middle", arm=None, used_s_ago=60), _pin("gone", arm=None, used_s_ago=7200)])
        s.commit()
        assert [p.session_key for p in list_pins(session=s)] == ["newest", "middle", "older"]
        assert [p.session_key for p in list_pins(session=s, limit=2)] == ["newest", "middle"]


def _indexed_columns(engine) -> dict[str, set[str]]:
    """Each index of session_pin -> the columns it reads (its keys and, for a partial index, its condition)."""
    from sqlalchemy import inspect

    out = {}
    for ix in inspect(engine).get_indexes("session_pin"):
        where = str(ix.get("dialect_options", {}).get(f"{engine.dialect.name}_where", ""))
        out[ix["name"]] = set(ix["column_names"]) | {c for c in _columns() if c in where}
    return out


def _columns() -> list[str]:
    from quantroute.db.engine import table_of

    return [c.name for c in table_of(SessionPin).columns]


def test_no_index_reads_a_column_that_a_refresh_writes(engine):
    """A returning turn's refresh writes the last use and the expiry; an index on either would be rewritten by
    every refresh."""
    from quantroute.db.session_pin import PinClaims

    refresh = PinClaims(engine.dialect).refresh_sql
    written = {c for c in _columns() if f" {c} = " in refresh.split(" WHERE ")[0]}
    assert written == {"last_used", "expires_at"}
    assert {name: cols & written for name, cols in _indexed_columns(engine).items() if cols & written} == {}
    # ... and the primary key and the candidate-arm index are still there
    assert set(_indexed_columns(engine)) >= {"ix_session_pin_candidate_model"}


@pytest.mark.postgres
def test_a_refresh_on_postgresql_is_a_heap_only_update(pg_engine):
    """Refreshing pins rewrites their rows in place on the page (HOT), with no new index tuple: the page keeps
    room for it (the table's fillfactor) and no index covers the columns it writes."""
    from quantroute.db.session_pin import PinClaims

    now = utcnow()
    with Session(pg_engine) as s:
        s.add_all([_pin(f"s-{i}", arm=None) for i in range(50)])
        s.commit()
    claims = PinClaims(pg_engine.dialect)
    with pg_engine.begin() as c:  # a batch of refreshes: sessions spread over the table
        claims.refresh(c, [f"s-{i}" for i in range(0, 50, 5)], now, now + timedelta(hours=1))
        upd, hot = c.execute(text("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
                                  "WHERE relname = 'session_pin'")).one()
    assert (upd, hot) == (10, 10)
