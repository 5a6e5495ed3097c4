from sqlalchemy import inspect
from sqlmodel import Session

from quantroute.db import audit
from quantroute.db.engine import database_url, init_db


def test_migrations_create_core_tables_and_are_idempotent(engine):
    names = set(inspect(engine).get_table_names())
    assert {"audit_event", "policy_approval", "policy_activation", "alembic_version"} <= names
    init_db(engine)  # second upgrade is a no-op, not an error


def test_audit_event_round_trip(engine):
    with Session(engine) as s:
        audit.record(s, actor="ana", action="policy.approve", subject="policy-0002", version_after=2,
                     detail={"note": "looks right"})
        s.commit()
    with Session(engine) as s:
        [ev] = audit.list_events(s, action_prefix="policy.")
        assert (ev.actor, ev.subject, ev.version_after, ev.detail) == ("ana", "policy-0002", 2, {"note": "looks right"})


def test_database_url_normalises_plain_postgres_scheme(monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert database_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert database_url(None) == "sqlite:///data/quantroute.db"
    monkeypatch.setenv("DATABASE_URL", "sqlite:///x.db")
    assert database_url(None) == "sqlite:///x.db"


def test_sqlite_binds_none_through_a_registered_adapter_and_stores_null(tmp_path):
    """CPython 3.11's sqlite3 sends None through its adapter lookup, which without an adapter raises and clears
    two AttributeErrors per NULL bound (pins and request-log rows bind several): a SQLite engine registers
    the adapter, and NULL is stored exactly as before."""
    import sqlite3

    from sqlalchemy import text

    from quantroute.db.engine import make_engine

    eng = make_engine(f"sqlite:///{tmp_path / 'n.db'}")
    try:
        assert sqlite3.adapters[(type(None), sqlite3.PrepareProtocol)](None) is None
        with eng.begin() as c:
            c.execute(text("CREATE TABLE t (v TEXT)"))
            c.execute(text("INSERT INTO t (v) VALUES (:v)"), {"v": None})
            assert c.execute(text("SELECT count(*) FROM t WHERE v IS NULL")).scalar_one() == 1
    finally:
        eng.dispose()
