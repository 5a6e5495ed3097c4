"""Engine factory and schema upgrade. SQLite by default, PostgreSQL for several router replicas."""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy import Table, event, inspect
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, create_engine

from quantroute.clock import aware

DEFAULT_URL = "sqlite:///data/quantroute.db"


def database_url(explicit: str | None = None) -> str:
    """The URL in force: an explicit one, else $DATABASE_URL, else the SQLite file under data/."""
    url = explicit or os.environ.get("DATABASE_URL") or DEFAULT_URL
    # Accept the plain libpq scheme people paste; we ship psycopg 3.
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str | None = None, *, echo: bool = False) -> Engine:
    url = database_url(url)
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        sqlite3.register_adapter(type(None), _null)
        return engine
    return create_engine(url, echo=echo, pool_pre_ping=True, pool_size=10, max_overflow=20)


def _null(_value: None) -> None:
    """sqlite3's adapter for None, which binds NULL as before. CPython 3.11's sqlite3 binds int, float and str
    parameters directly but sends every other value, None included, through its adapter lookup, which without
    an adapter raises and clears two AttributeErrors. A request-log row
    and a session pin bind several NULLs each. The registration is the sqlite3 module's, for the process: it
    changes no value bound, only the path to it, and registering again replaces it with the same function."""
    return None


BUSY_TIMEOUT_MS = 30_000
WAL_SIZE_LIMIT = 16 * 1024 * 1024  # bytes of SQLite WAL kept on disk after a checkpoint


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    # WAL lets the dashboard read while the router writes its request log; busy_timeout turns
    # writer contention into a short wait instead of "database is locked".
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    # In WAL mode NORMAL keeps every commit atomic and survives a process crash; only a power cut can lose the
    # newest commits. It spares an fsync per commit, which the router's request-log writer pays many times a second.
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    # The WAL file keeps the size of its busiest moment unless told otherwise: a burst of first turns (a client's
    # reconnect storm, a seeded benchmark) left it at 80 MB for good. Truncated back to this after a checkpoint.
    cur.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def init_db(engine: Engine) -> None:
    """Create or upgrade the schema to every head (each feature area is its own migration branch), under the
    migration lock. Only `quantroute db upgrade`, the demo and test set-ups call it; processes call `require_schema`."""
    from quantroute.db.schema import upgrade

    upgrade(engine)


def require_schema(engine: Engine) -> Engine:
    """Raise SchemaMismatchError unless the database is at exactly this code's revisions; returns the engine."""
    from quantroute.db.schema import check

    check(engine)
    return engine


def table_of(model: type[SQLModel]) -> Table:
    """The Core table of a table model, for the bulk statements the ORM would be slow at. (SQLAlchemy's mapping
    sets `model.__table__`, but SQLModel does not declare it: read through the mapper, the type is known.)"""
    table = inspect(model).local_table
    if not isinstance(table, Table):
        raise TypeError(f"{model.__name__} is not a table model")
    return table


def require_engine(engine: Engine | None, *, who: str) -> Engine:
    """`engine`, in code that runs only when there is a database (its callers check first); None here is a bug,
    said loudly."""
    if engine is None:
        raise RuntimeError(f"{who} has no database")
    return engine


class Stored(Protocol):
    id: int | None


def stored_id(row: Stored) -> int:
    """The primary key of a row read from, or flushed to, the database: None only before its first flush, so
    a None here is a bug, said loudly instead of a query for `id IS NULL` that finds nothing."""
    if row.id is None:
        raise ValueError(f"{type(row).__name__} has no id: it was never stored")
    return row.id


def session(engine: Engine) -> Session:
    # expire_on_commit=False: rows handed to the UI or the CLI stay readable after the commit.
    return Session(engine, expire_on_commit=False)


def count_rows_before(engine: Engine, table: Table, before: datetime) -> int:
    """Rows of an append-only table (a `ts` column) older than `before`: what a retention run would delete."""
    with engine.connect() as conn:
        q = sa.select(sa.func.count()).select_from(table).where(table.c.ts < aware(before))
        return int(conn.execute(q).scalar_one())


def delete_rows_before(engine: Engine, table: Table, before: datetime, *, batch: int = 10_000) -> int:
    """Delete rows of an append-only table (a `ts` column) older than `before`, `batch` rows per transaction, so
    a writer of the same table (and SQLite's single writer lock) waits at most one short batch. Returns the
    number of rows deleted."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    total = 0
    while True:
        with engine.begin() as conn:
            ids = sa.select(table.c.id).where(table.c.ts < aware(before)).order_by(table.c.id).limit(batch)
            n = conn.execute(sa.delete(table).where(table.c.id.in_(ids.scalar_subquery()))).rowcount
        total += n
        if n < batch:
            return total
