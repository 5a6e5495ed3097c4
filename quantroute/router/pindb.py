"""Where the pin committer's statements run: one kept connection, chosen by database.

- PostgreSQL through psycopg: an async psycopg connection in the event loop, so a batch of pins costs one
  round trip and no thread hop (a worker thread waits for the GIL behind a busy event loop; the profile showed
  the hop and the pool's ping and BEGIN/COMMIT round trips dominating a first turn's latency).
- Anything else (SQLite): a kept SQLAlchemy connection in autocommit mode, used from a worker thread (sqlite3
  blocks, and may wait on the file's write lock).

Either way the statement is `PinClaims`' one read-or-create upsert, its own transaction."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection, Engine

from quantroute.clock import utcnow
from quantroute.db.session_pin import PinClaims

if TYPE_CHECKING:
    import psycopg  # the postgres extra: imported where a claim needs it

log = logging.getLogger(__name__)


class TransientError(Exception):
    """The connection or the database failed (not one row): the batch is worth retrying as it is."""


class ThreadedClaims:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.claims = PinClaims(engine.dialect)
        self._conn: Connection | None = None

    async def claim(self, rows: list[dict], timeout_s: float) -> list[dict]:
        return await asyncio.to_thread(self._claim, rows)

    def _claim(self, rows: list[dict]) -> list[dict]:
        if self._conn is None:
            self._conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            if self.engine.dialect.name != "sqlite":
                return self.claims.claim(self._conn, rows, utcnow())
            # sqlite3 directly (autocommit: the statement is its own transaction): SQLAlchemy's execution path
            # cost more than the statement, in a thread that holds the GIL the event loop needs meanwhile
            sql, params = self.claims.statement(rows, utcnow())
            try:
                fetched = self._conn.connection.driver_connection.execute(sql, params).fetchall()  # type: ignore[union-attr]  # a live pysqlite connection
            except sqlite3.OperationalError as e:  # locked, busy, I/O: the database's state, not these rows'
                raise TransientError(f"{type(e).__name__}: {e}") from e
            return self.claims.stored(fetched)
        except Exception:
            self._drop()  # a broken or unknown-state connection is never reused
            raise

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception as e:  # noqa: BLE001 - it is being thrown away
                log.debug("closing the pin connection: %s", e)

    async def aclose(self) -> None:
        self._drop()


class AsyncPgClaims:
    def __init__(self, engine: Engine) -> None:
        # libpq takes the URL (with its query: connect_timeout, options=-csearch_path=...) as it is
        self.conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.claims = PinClaims(engine.dialect)
        self._conn: psycopg.AsyncConnection[tuple[Any, ...]] | None = None  # autocommit (tuple rows)

    async def claim(self, rows: list[dict], timeout_s: float) -> list[dict]:
        import psycopg

        try:
            conn = self._conn
            if conn is None or conn.closed:
                conn = await asyncio.wait_for(psycopg.AsyncConnection.connect(self.conninfo, autocommit=True),
                                              timeout_s)
                self._conn = conn
            sql, params = self.claims.statement(rows, utcnow())
            # bounded: a hung server must not hold every later pin behind this batch
            cur = await asyncio.wait_for(conn.execute(sql, params), timeout_s)
            return self.claims.stored(await cur.fetchall())
        except (TimeoutError, psycopg.OperationalError, psycopg.InterfaceError) as e:
            await self.aclose()
            raise TransientError(f"{type(e).__name__}: {e}") from e
        except Exception:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except Exception as e:  # noqa: BLE001 - it is being thrown away
                log.debug("closing the pin connection: %s", e)


def claims_for(engine: Engine) -> ThreadedClaims | AsyncPgClaims:
    if engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg":
        return AsyncPgClaims(engine)
    return ThreadedClaims(engine)
