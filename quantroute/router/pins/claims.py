"""Where the pin committer's statements run: one kept connection, chosen by database.

- PostgreSQL (a psycopg URL, as everywhere in quantroute): an asyncpg connection in the event loop, so a batch of
  pins costs one round trip and no thread hop (a worker thread waits for the GIL behind a busy event loop).
  Without asyncpg installed, the threaded path below.
- SQLite: the statement runs in the event loop on a kept sqlite3 connection that never waits: no busy timeout
  (a write lock held elsewhere answers SQLITE_BUSY at once) and no WAL checkpoints (the request log's writer
  checkpoints, in its thread). A batch that finds the write lock taken tries again after a short pause on the
  loop's clock, until the lock is free or the claims' time is up. Batches are small at a router's rates, so a
  thread hop per batch would cost more than the statement itself.
- Anything else: a kept SQLAlchemy connection in autocommit mode, used from a worker thread.

Either way a batch is one statement of `PinClaims`, its own transaction: the read-or-create upsert of new pins
(`claim`), an update moving live pins' expiry (`refresh`), the upsert that writes back a returning turn's pin
with a node move or whose row was gone (`claim(..., touch=True)`), or one step of the sweep for expired pins
(`purge`: a read of the range's end, then its delete).
On SQLite that makes the router's pin writes one writer in the event loop: a purge run elsewhere held the write
lock that claims then waited for."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.engine import Connection, Engine

from quantroute.clock import utcnow
from quantroute.db.session_pin import PinClaims

if TYPE_CHECKING:
    import asyncpg  # the postgres extra: imported where a claim needs it

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class TransientError(Exception):
    """The connection or the database failed (not one row): the batch is worth retrying as it is."""


SQLITE_BUSY, SQLITE_LOCKED = 5, 6


def busy(e: sqlite3.OperationalError) -> bool:
    """Another connection holds a lock this statement needs (the statement was rolled back whole)."""
    return (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED)  # the primary code


# Per session, on the pin connection only: the request log and everything else keep the server's setting
ASYNC_COMMIT = "SET synchronous_commit = off"


class ThreadedClaims:
    def __init__(self, engine: Engine, *, synchronous: bool = True) -> None:
        self.engine = engine
        self.claims = PinClaims(engine.dialect)
        self.synchronous = synchronous
        self._conn: Connection | None = None

    async def claim(self, rows: list[dict], timeout_s: float, *, touch: bool = False) -> list[dict]:
        return await asyncio.to_thread(self._call, lambda c: self.claims.claim(c, rows, utcnow(), touch=touch))

    async def refresh(self, keys: list[str], used: datetime, expires: datetime, timeout_s: float) \
            -> dict[str, tuple[str | None, datetime]]:
        return await asyncio.to_thread(self._call, lambda c: self.claims.refresh(c, keys, used, expires))

    async def purge(self, before: datetime, after: str, window: int, timeout_s: float) -> tuple[int, str | None]:
        return await asyncio.to_thread(self._call, lambda c: self.claims.purge(c, before, after, window))

    def _call(self, fn: Callable[[Connection], _T]) -> _T:
        if self._conn is None:
            self._conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            if self.engine.dialect.name == "postgresql" and not self.synchronous:
                self._conn.exec_driver_sql(ASYNC_COMMIT)
        try:
            return fn(self._conn)
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


class SqliteClaims:
    """Claims on the event loop (see the module's note). A batch that finds the write lock taken (a request-log
    batch, another worker's claim) waits for it on the loop's clock: the loop serves other requests meanwhile
    and tries again after a pause that starts at 50 us and doubles up to 1 ms, until the claims' time is up.

    The wait is ours, not SQLite's busy timeout: SQLite's handler sleeps 1, 2, 5, 10 ms... between tries, far
    longer than the request-log commit usually in the way, and keeps trying for the whole busy timeout, however
    short the claims' own deadline. Retrying on the loop rather than in a thread: a failed try is only the
    statement's bind and one lock attempt."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.claims = PinClaims(engine.dialect)
        self._conn: sqlite3.Connection | None = None
        self.inline = 0  # batches written at the first try / tries that found the lock taken (what tests read)
        self.busy = 0

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            pooled = self.engine.raw_connection()  # the engine's pragmas (WAL, synchronous=NORMAL) applied
            conn = pooled.driver_connection
            pooled.detach()  # ours alone: never handed to another caller by the pool
            if not isinstance(conn, sqlite3.Connection):
                raise TypeError(f"the SQLite pin path needs a sqlite3 connection, got {type(conn).__name__}")
            conn.isolation_level = None  # autocommit: the statement is its own transaction
            conn.execute("PRAGMA busy_timeout=0")
            # Checkpointing copies the WAL into the database file (and syncs it): milliseconds the event loop must
            # not spend. Per connection: the request log's writer still checkpoints, in its own thread.
            conn.execute("PRAGMA wal_autocheckpoint=0")
            self._conn = conn
        return self._conn

    async def claim(self, rows: list[dict], timeout_s: float, *, touch: bool = False) -> list[dict]:
        sql, params, ours = self.claims.statement(rows, utcnow(), touch=touch)
        fetched = await self._run(sql, params, timeout_s, lambda cur: cur.fetchall())
        return self.claims.stored(fetched, ours)

    async def refresh(self, keys: list[str], used: datetime, expires: datetime, timeout_s: float) \
            -> dict[str, tuple[str | None, datetime]]:
        rows = await self._run(self.claims.refresh_sql, self.claims.refresh_params(keys, used, expires), timeout_s,
                               lambda cur: cur.fetchall())
        return self.claims.refreshed(rows)

    async def purge(self, before: datetime, after: str, window: int, timeout_s: float) -> tuple[int, str | None]:
        """`PinClaims.purge`: the range's end (a read: no write lock), then the delete."""
        c = self.claims
        found = await self._run(c.purge_bound_sql, (after, window - 1), timeout_s, lambda cur: cur.fetchone())
        upto = found[0] if found else None
        n = await self._run(c.purge_rest_sql if upto is None else c.purge_range_sql,
                            c.purge_params(after, upto, before), timeout_s, lambda cur: cur.rowcount)
        return n, upto

    async def _run(self, sql: str, params: tuple, timeout_s: float, read: Callable[[sqlite3.Cursor], _T]) -> _T:
        deadline = time.monotonic() + timeout_s
        pause = 50e-6
        first = True
        while True:
            try:
                got = read(self._connection().execute(sql, params))
                break
            except sqlite3.OperationalError as e:
                if not busy(e):
                    self._drop()
                    raise TransientError(f"{type(e).__name__}: {e}") from e
                # Another connection holds the write lock: the statement was rolled back whole. Wait without
                # blocking the loop; give up (TransientError: the committer retries or fails the claims) once
                # the claims' deadline has passed.
                self.busy += 1
                first = False
                if time.monotonic() + pause > deadline:
                    raise TransientError(f"{type(e).__name__}: {e}") from e
            except Exception:
                self._drop()
                raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1e-3)
        if first:
            self.inline += 1
        return got

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception as e:  # noqa: BLE001 - it is being thrown away
                log.debug("closing the pin connection: %s", e)

    async def aclose(self) -> None:
        self._drop()


class AsyncpgClaims:
    """PostgreSQL claims in the event loop through asyncpg, on one kept connection: the statement goes out from
    the committer's own task and its answer is parsed by asyncpg's protocol (C) as it arrives.

    asyncpg rather than psycopg's async connection, which waits on the socket through a generator, a future and
    an add_reader/remove_reader pair per wait. The rest of the router (request log, dashboard, migrations) keeps
    psycopg through SQLAlchemy: the URL is the same."""

    def __init__(self, engine: Engine, *, synchronous: bool = True) -> None:
        self.synchronous = synchronous
        url = engine.url
        query = dict(url.query)
        # libpq's connect_timeout has no asyncpg name (asyncpg would send it to the server as a setting, which
        # refuses it): it bounds the connect here. The rest of the query (sslmode, options=-csearch_path=...,
        # application_name) asyncpg reads as libpq does.
        raw = query.pop("connect_timeout", "")
        try:
            self.connect_timeout_s = float(raw) if isinstance(raw, str) and raw else None
            if not isinstance(raw, str):  # given more than once
                raise ValueError
        except ValueError:
            raise ValueError(f"connect_timeout in the database URL must be one number of seconds, got {raw!r}") \
                from None
        self.dsn = url.set(drivername="postgresql", query=query).render_as_string(hide_password=False)
        self.claims = PinClaims(engine.dialect)
        self._conn: asyncpg.Connection | None = None

    async def claim(self, rows: list[dict], timeout_s: float, *, touch: bool = False) -> list[dict]:
        sql, params, ours = self.claims.numbered(rows, utcnow(), touch=touch)
        return self.claims.stored(await self._run(sql, params, timeout_s, "fetch"), ours)

    async def refresh(self, keys: list[str], used: datetime, expires: datetime, timeout_s: float) \
            -> dict[str, tuple[str | None, datetime]]:
        return self.claims.refreshed(await self._run(self.claims.numbered_refresh_sql, (used, expires, keys),
                                                     timeout_s, "fetch"))

    async def purge(self, before: datetime, after: str, window: int, timeout_s: float) -> tuple[int, str | None]:
        """`PinClaims.purge`, in two round trips."""
        bound, in_range, rest = self.claims.numbered_purge
        upto = await self._run(bound, (after, window - 1), timeout_s, "fetchval")
        status = await self._run(rest, (after, before), timeout_s, "execute") if upto is None else \
            await self._run(in_range, (after, upto, before), timeout_s, "execute")
        return int(status.split()[-1]), upto  # "DELETE n"

    async def _run(self, sql: str, params: tuple, timeout_s: float, how: str):
        """`conn.fetch` (rows) or `conn.execute` (the status text) of one statement, bounded by `timeout_s`."""
        import asyncpg

        try:
            conn = self._conn
            if conn is None or conn.is_closed():
                conn = self._conn = await self._connect(timeout_s)
            # Bounded: a hung server must not hold every later pin behind this batch. A timeout scope, not
            # wait_for: wait_for runs the query in a task of its own, which sends it and reads its answer a loop
            # iteration later each, and a busy router's iteration is long. asyncpg prepares the statement once
            # per connection (its statement cache) and binds the JSON text and `now` as they are.
            async with asyncio.timeout(timeout_s):
                return await getattr(conn, how)(sql, *params)
        except Exception as e:
            await self.aclose()  # a broken or unknown-state connection is never reused
            # The connection's failures (the socket, a timeout, asyncpg's interface errors, the SQLSTATE classes
            # below, a cached statement a schema change invalidated) are worth retrying as they are; anything
            # else is about the rows (the committer splits the batch).
            if isinstance(e, (TimeoutError, OSError, asyncpg.InterfaceError, asyncpg.InvalidCachedStatementError)) \
                    or (isinstance(e, asyncpg.PostgresError) and transient_state(e.sqlstate)):
                raise TransientError(f"{type(e).__name__}: {e}") from e
            raise

    async def _connect(self, timeout_s: float) -> asyncpg.Connection:
        """A new connection. Every failure to connect is the connection's (TransientError), as with psycopg, where
        a refused login is an OperationalError too: the batch waits and retries as it is, rather than being
        split and failed row by row with a connection attempt per half."""
        import asyncpg

        settings = {} if self.synchronous else {"synchronous_commit": "off"}
        try:
            return await asyncpg.connect(self.dsn, timeout=min(timeout_s, self.connect_timeout_s or timeout_s),
                                         server_settings=settings)
        except Exception as e:  # every kind: see above
            raise TransientError(f"connecting: {type(e).__name__}: {e}") from e

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            # terminate, not close: close waits for the server's goodbye, and a claim that timed out or failed
            # left the connection in an unknown state
            try:
                conn.terminate()
            except Exception as e:  # noqa: BLE001 - it is being thrown away (e.g. its event loop is gone)
                log.debug("closing the pin connection: %s", e)


def transient_state(sqlstate: str | None) -> bool:
    """The SQLSTATE classes psycopg reports as OperationalError, which SQLAlchemy-driven claims retry too: the
    connection (08, asyncpg's PostgresConnectionError and its subclasses), a rollback the server chose (40:
    deadlock, serialization), resources (53), operator intervention such as a shutdown (57) and system errors
    (58). Anything else is about the rows."""
    return (sqlstate or "")[:2] in ("08", "40", "53", "57", "58")


Claims = ThreadedClaims | SqliteClaims | AsyncpgClaims


def claims_for(engine: Engine, *, synchronous: bool = True) -> Claims:
    """`synchronous=False` (PostgreSQL): the pin connection commits without waiting for the WAL flush
    (`synchronous_commit = off`): a commit is visible to other connections at once all the same, so replicas
    agree as before, but a crash of the database server can lose the last ~0.6 s of pins. SQLite's pin
    connection never waits for a flush either way (synchronous=NORMAL in WAL mode)."""
    if engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg":
        try:
            import asyncpg  # noqa: F401 - the postgres extra installs it next to psycopg
        except ImportError:
            log.warning("asyncpg is not installed (pip install 'quantroute[postgres]'): pins are claimed from a "
                        "worker thread through psycopg, which costs a thread hop per batch")
        else:
            return AsyncpgClaims(engine, synchronous=synchronous)
    if engine.dialect.name == "sqlite" and engine.dialect.driver == "pysqlite":
        return SqliteClaims(engine)
    return ThreadedClaims(engine, synchronous=synchronous)
