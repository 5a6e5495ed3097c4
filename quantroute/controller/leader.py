"""One leader among controllers: a PostgreSQL session advisory lock held on a dedicated connection, or, on SQLite,
an exclusive `flock` on a file beside the database. Both are released by the operating system or the server when
the holder dies, so a standby trying every pass takes over within one interval of the leader's death."""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path
from typing import Protocol

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine


class LeaderLock(Protocol):
    def acquire(self) -> bool:
        """Take the lock if free, or confirm it is still held. True: this process leads."""

    def release(self) -> None: ...


def derive_key(database: str, schema: str) -> int:
    """A signed 64-bit key from the database and schema: controllers of two schemas on one server (concurrent
    test runs, two demos) never contend for one lock."""
    digest = hashlib.blake2b(f"quantroute-controller:{database}:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresLock:
    def __init__(self, engine: Engine, key: int | None = None) -> None:
        self.engine = engine
        self.key = key
        self.conn: Connection | None = None

    def acquire(self) -> bool:
        if self.conn is not None:
            try:
                self.conn.execute(text("SELECT 1"))  # the session lock lives as long as this connection
                return True
            except Exception:  # noqa: BLE001 - connection lost: so is the lock; try again from scratch
                self.release()
        conn = self.engine.connect()
        try:
            if self.key is None:
                db, schema = conn.execute(text("SELECT current_database(), current_schema()")).one()
                self.key = derive_key(db, schema or "public")
            got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self.key}).scalar()
            conn.commit()
        except Exception:
            conn.close()
            raise
        if got:
            self.conn = conn
            return True
        conn.close()
        return False

    def release(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()  # ends the session, which releases its advisory locks
            except Exception:  # noqa: BLE001 - already broken
                pass
            self.conn = None


class FileLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> bool:
        if self.fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None


def leader_lock(engine: Engine, key: int | None = None) -> LeaderLock:
    if engine.dialect.name == "postgresql":
        return PostgresLock(engine, key)
    db = engine.url.database
    if not db or db == ":memory:":
        raise ValueError("the controller needs a database file or PostgreSQL (an in-memory SQLite has no other "
                         "process to share it with)")
    return FileLock(Path(f"{db}.controller.lock"))
