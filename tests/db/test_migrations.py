"""The migrations and the SQLModel models describe the same schema: after upgrading to every head, Alembic's
autogenerate finds nothing to change (a column, index or type added to a model without a migration fails here)."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

import quantroute.db.tables  # noqa: F401 - every table module registers its models


def test_migrated_schema_matches_the_models(engine):
    with engine.connect() as c:
        diff = compare_metadata(MigrationContext.configure(c, opts={"compare_type": True}), SQLModel.metadata)
    assert diff == []


def test_0960_names_logged_requests_by_their_live_pin_and_swaps_the_session_key_index(db_url):
    """Upgrading a database that has pins and log rows (SQLite and PostgreSQL): rows of a session with a live
    pin get that pin's creation time, others none; the session-key index goes, the pin-time index comes; and
    downgrading puts the index back."""
    from datetime import timedelta

    from alembic import command
    from sqlalchemy import inspect, text

    from quantroute.clock import utcnow
    from quantroute.db.engine import make_engine
    from quantroute.db.schema import alembic_config

    eng = make_engine(db_url)
    try:
        command.upgrade(alembic_config(eng), "0950_node_affinity")
        created = utcnow() - timedelta(minutes=3)
        with eng.begin() as c:
            c.execute(text("INSERT INTO session_pin (session_key, model, tier, created_at, last_used, expires_at) "
                           "VALUES ('s-live', 'm', 'int4', :t, :t, :e)"),
                      {"t": created, "e": utcnow() + timedelta(hours=1)})
            for i, key in enumerate(["s-live", "s-live", "s-gone", None]):
                c.execute(text("INSERT INTO request_log (ts, request_id, session_key, model, rules, status, stream, "
                               "latency_ms, retries, escalated) VALUES (:ts, :rid, :key, 'm', '[]', 200, false, "
                               "1.0, 0, false)"), {"ts": utcnow(), "rid": f"r-{i}", "key": key})
        command.upgrade(alembic_config(eng), "0960_log_pin_created")
        with eng.connect() as c:
            got = dict(c.execute(text("SELECT request_id, pin_created_at FROM request_log")).all())
        assert [got[f"r-{i}"] is not None for i in range(4)] == [True, True, False, False]
        with eng.connect() as c:  # the pin's own value, as the database holds it
            same = c.execute(text("SELECT COUNT(*) FROM request_log r JOIN session_pin p "
                                  "ON r.pin_created_at = p.created_at AND r.session_key = p.session_key")).scalar()
        assert same == 2
        indexes = {ix["name"] for ix in inspect(eng).get_indexes("request_log")}
        assert "ix_request_log_pin_created_at" in indexes and "ix_request_log_session_key" not in indexes
        command.downgrade(alembic_config(eng), "0950_node_affinity")
        indexes = {ix["name"] for ix in inspect(eng).get_indexes("request_log")}
        assert "ix_request_log_session_key" in indexes and "ix_request_log_pin_created_at" not in indexes
    finally:
        eng.dispose()


def test_0970_keeps_the_pins_and_swaps_their_indexes(db_url):
    """Upgrading a database with pins (SQLite and PostgreSQL): the pins stay; the model, tier and last-use indexes
    go and the partial index on candidate-arm pins' model comes; downgrading restores the old set."""
    from datetime import timedelta

    from alembic import command
    from sqlalchemy import inspect, text

    from quantroute.clock import utcnow
    from quantroute.db.engine import make_engine
    from quantroute.db.schema import alembic_config

    old = {"ix_session_pin_model", "ix_session_pin_tier", "ix_session_pin_last_used", "ix_session_pin_expires_at"}
    eng = make_engine(db_url)
    try:
        command.upgrade(alembic_config(eng), "0960_log_pin_created")
        now = utcnow()
        with eng.begin() as c:
            for key, arm in (("s-base", "baseline"), ("s-cand", "candidate"), ("s-none", None)):
                c.execute(text("INSERT INTO session_pin (session_key, model, tier, arm, created_at, last_used, "
                               "expires_at) VALUES (:k, 'm', 'int4', :arm, :t, :t, :e)"),
                          {"k": key, "arm": arm, "t": now, "e": now + timedelta(hours=1)})
        assert {ix["name"] for ix in inspect(eng).get_indexes("session_pin")} == old

        command.upgrade(alembic_config(eng), "0970_pin_indexes")
        assert {ix["name"] for ix in inspect(eng).get_indexes("session_pin")} == \
            {"ix_session_pin_expires_at", "ix_session_pin_candidate_model"}
        with eng.connect() as c:
            kept = dict(c.execute(text("SELECT session_key, arm FROM session_pin")).all())
        assert kept == {"s-base": "baseline", "s-cand": "candidate", "s-none": None}

        command.downgrade(alembic_config(eng), "0960_log_pin_created")
        assert {ix["name"] for ix in inspect(eng).get_indexes("session_pin")} == old
    finally:
        eng.dispose()


def test_1000_drops_the_expiry_index_and_keeps_the_pins(db_url):
    """Upgrading a database with pins (SQLite and PostgreSQL): the pins stay, the index on their expiry goes and
    on PostgreSQL the table keeps room on its pages for refreshes; downgrading restores the index."""
    from datetime import timedelta

    from alembic import command
    from sqlalchemy import inspect, text

    from quantroute.clock import utcnow
    from quantroute.db.engine import make_engine
    from quantroute.db.schema import alembic_config

    def indexes() -> set[str]:
        return {ix["name"] for ix in inspect(eng).get_indexes("session_pin")}

    def options() -> list[str]:
        if eng.dialect.name != "postgresql":
            return []
        with eng.connect() as c:
            return list(c.execute(text("SELECT reloptions FROM pg_class WHERE oid = 'session_pin'::regclass"))
                        .scalar() or [])

    eng = make_engine(db_url)
    try:
        command.upgrade(alembic_config(eng), "0990_tenants")
        now = utcnow()
        with eng.begin() as c:
            c.execute(text("INSERT INTO session_pin (session_key, model, tier, created_at, last_used, expires_at) "
                           "VALUES ('s-1', 'm', 'int4', :t, :t, :e)"), {"t": now, "e": now + timedelta(hours=1)})
        assert "ix_session_pin_expires_at" in indexes()

        command.upgrade(alembic_config(eng), "1000_pin_expiry_unindexed")
        assert indexes() == {"ix_session_pin_candidate_model"}
        assert options() == (["fillfactor=80"] if eng.dialect.name == "postgresql" else [])
        with eng.connect() as c:
            assert c.execute(text("SELECT session_key FROM session_pin")).scalars().all() == ["s-1"]

        command.downgrade(alembic_config(eng), "0990_tenants")
        assert indexes() == {"ix_session_pin_expires_at", "ix_session_pin_candidate_model"}
        assert options() == []
    finally:
        eng.dispose()
