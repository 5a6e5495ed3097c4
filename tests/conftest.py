"""Shared fixtures: real databases (a SQLite file per test; PostgreSQL when QUANTROUTE_TEST_POSTGRES is set)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text

from quantroute.db.engine import init_db, make_engine
from quantroute.ports import free_port as free_port  # re-exported: tests take shared helpers from conftest
from tests.support.waiting import wait_until as wait_until  # re-exported, as free_port

REPO = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("QUANTROUTE_TEST_POSTGRES")



@pytest.fixture
def fresh_sqlite_url(tmp_path: Path) -> str:
    """A SQLite file with no schema yet."""
    return f"sqlite:///{tmp_path / 'quantroute.db'}"


@pytest.fixture
def sqlite_url(fresh_sqlite_url: str) -> str:
    """A SQLite file at the current schema, as `quantroute db upgrade` leaves it."""
    eng = make_engine(fresh_sqlite_url)
    init_db(eng)
    eng.dispose()
    return fresh_sqlite_url


@pytest.fixture
def pg_url():
    """A fresh schema in the real PostgreSQL, dropped afterwards. Skips when no PostgreSQL is configured."""
    if not PG_URL:
        pytest.skip("QUANTROUTE_TEST_POSTGRES not set")
    schema = f"t_{uuid.uuid4().hex[:10]}"
    admin = make_engine(PG_URL)
    with admin.begin() as c:
        c.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    with admin.begin() as c:
        c.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request, tmp_path: Path) -> str:
    """Runs a DB test on SQLite and, where configured, on PostgreSQL too."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'quantroute.db'}"
    return request.getfixturevalue("pg_url")


def _migrated(url: str):
    eng = make_engine(url)
    init_db(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def engine(db_url: str):
    yield from _migrated(db_url)


@pytest.fixture
def pg_engine(pg_url: str):
    """A migrated fresh schema in the real PostgreSQL (skips without one)."""
    yield from _migrated(pg_url)


def add_users(engine, **roles: str) -> None:
    """People the services check actors against (`name=role`); no password (the services never ask for one).
    Names already present keep their row."""
    from quantroute.db.engine import session
    from quantroute.db.user import User, get_user

    with session(engine) as s:
        for name, role in roles.items():
            if get_user(session=s, name=name) is None:
                s.add(User(name=name, role=role))
        s.commit()
