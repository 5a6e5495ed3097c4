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
