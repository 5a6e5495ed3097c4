"""The schema's revision: upgraded once, by `quantroute db upgrade`, under a lock; checked by every process at start.

Replicas that each ran the Alembic upgrade at start raced each other (two `CREATE TABLE`s, a half-applied
revision). Now one command upgrades, holding a lock that a second upgrader waits on, and every other process
compares the database's revisions with the ones it was built with and refuses to start on a mismatch."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Engine

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


class SchemaMismatchError(RuntimeError):
    """The database's schema revision is not the one this quantroute was built for; the message says what to do."""


def alembic_config(engine: Engine):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def code_heads() -> set[str]:
    """The newest revision of every migration branch this code ships."""
    from alembic.script import ScriptDirectory

    return set(ScriptDirectory(str(MIGRATIONS_DIR)).get_heads())


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {r.revision for r in ScriptDirectory(str(MIGRATIONS_DIR)).walk_revisions()}


def db_revisions(engine: Engine) -> set[str] | None:
    """The revisions stamped in the database; None when it has no schema at all."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn)
        if not ctx._has_version_table():
            return None
        return set(ctx.get_current_heads())


def lock_key(database: str, schema: str) -> int:
    """A signed 64-bit advisory-lock key per database and schema, so test runs in other schemas never wait on us."""
    digest = hashlib.blake2b(f"quantroute.migrate:{database}:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@contextlib.contextmanager
def migration_lock(engine: Engine) -> Iterator[None]:
    """PostgreSQL: a session advisory lock keyed by database and schema. SQLite: an flock beside the file."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            database, schema = conn.execute(text("SELECT current_database(), current_schema()")).one()
            key = lock_key(database, schema)
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                conn.commit()
        return
    path = engine.url.database
    if engine.dialect.name != "sqlite" or not path or path == ":memory:":
        yield
        return
    lock_path = Path(path).with_name(Path(path).name + ".migrate.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def upgrade(engine: Engine) -> None:
    """Upgrade every migration branch to its head, one upgrader at a time (the second finds nothing to do)."""
    from alembic import command

    with migration_lock(engine):
        command.upgrade(alembic_config(engine), "heads")


def check(engine: Engine) -> None:
    """Refuse to run against a schema that is missing, older or newer than this code's migrations."""
    where = engine.url.render_as_string(hide_password=True)
    have = db_revisions(engine)
    if not have:
        raise SchemaMismatchError(f"{where} has no quantroute schema: run `quantroute db upgrade` first "
                                  "(once, before starting routers, the controller or the dashboard)")
    want = code_heads()
    if have == want:
        return
    unknown = have - known_revisions()
    if unknown:
        raise SchemaMismatchError(
            f"{where} is at schema revision(s) {', '.join(sorted(unknown))}, newer than this quantroute knows "
            f"(its newest: {', '.join(sorted(want))}): upgrade quantroute on this host before starting it")
    raise SchemaMismatchError(
        f"{where} is at schema revision(s) {', '.join(sorted(have))}, older than this quantroute's "
        f"(missing: {', '.join(sorted(want - have))}): run `quantroute db upgrade` first")
