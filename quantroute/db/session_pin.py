"""Session pins: the tier (and canary arm) a session's first request fixed. Shared by router replicas."""

from __future__ import annotations

from datetime import datetime, timedelta

import orjson
from sqlalchemy import Index, text, update
from sqlalchemy.engine import Connection, Dialect
from sqlmodel import Field, Session, SQLModel, col, delete, select

from quantroute.clock import aware, utcnow
from quantroute.db.engine import table_of
from quantroute.db.processors import bind_processors, result_processors
from quantroute.db.request_log import CANDIDATE_ARM

# Only pins on a canary's candidate arm are found by model (releasing them when the canary rolls back): a partial
# index, so the other first turns do not write an entry for it.
_ON_CANDIDATE = text(f"arm = '{CANDIDATE_ARM}'")


class SessionPin(SQLModel, table=True):
    """Written by the router on a session's first request; read by every replica and the dashboard."""

    __tablename__ = "session_pin"
    # Indexes: the key and the model of candidate-arm pins only. Every index is written on each first turn, and on
    # SQLite that write is the router's own CPU: no index that no query needs. Nothing a returning turn's refresh
    # writes (last use, expiry) is indexed, so a refresh rewrites one row and no index entry (on PostgreSQL a
    # heap-only update); the purge sweeps expired pins by key range instead (`PinClaims.purge`).
    __table_args__ = (Index("ix_session_pin_candidate_model", "model", sqlite_where=_ON_CANDIDATE,
                            postgresql_where=_ON_CANDIDATE),)
    session_key: str = Field(primary_key=True)
    model: str
    tier: str
    arm: str | None = None
    deployment: str | None = None  # set when the session asked for a deployment id directly
    # The deployment (artifact) that served the session: later requests prefer it while it has a healthy node,
    # so a session does not switch format between deployments of its tier (column from 0101_pin_deployment).
    served_deployment: str | None = None
    # The node that served the session's last turn, where its KV prefix is cached: with node affinity on, later
    # turns prefer it while it is healthy and not busy (column from 0950_node_affinity). Written when it changes.
    last_node: str | None = None
    policy_version: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    last_used: datetime = Field(default_factory=utcnow)
    expires_at: datetime  # last_used + the policy's sessions.ttl_s


# Columns a claim takes from the new row only where the stored pin has expired (the session starts over); a live
# pin keeps them, so the replica that committed first decides the session's tier, arm and deployment.
_CLAIMED = ("model", "tier", "arm", "deployment", "served_deployment", "last_node", "policy_version", "created_at")
_COLUMNS = ("session_key", *_CLAIMED, "last_used", "expires_at")
_OURS_END = 1 + len(_CLAIMED)  # a row's claimed columns are [1:_OURS_END]
_CREATED, _LAST_USED = _COLUMNS.index("created_at"), _COLUMNS.index("last_used")


def touch_row(key: str, model: str, tier: str, arm: str | None, deployment: str | None,
              served_deployment: str | None, moved_to: str | None, policy_version: int | None, created_at: datetime,
              now: datetime, ttl_s: float) -> dict:
    """A returning turn's refresh of a cached pin, as `PinClaims` takes it with `touch=True`: the pin's own values
    (written only where the stored row has expired or is gone: the session is alive here, so its pin comes back),
    last used `now`, expiring `ttl_s` later. `moved_to`: the node this replica moved the session to, else None
    (the stored last node stays: another replica may have moved it)."""
    return {"session_key": key, "model": model, "tier": tier, "arm": arm, "deployment": deployment,
            "served_deployment": served_deployment, "last_node": moved_to, "policy_version": policy_version,
            "created_at": created_at, "last_used": now, "expires_at": now + timedelta(seconds=ttl_s)}


def claim_row(key: str, model: str, tier: str, arm: str | None, deployment: str | None,
              served_deployment: str | None, node: str | None, policy_version: int | None, now: datetime,
              ttl_s: float) -> dict:
    """A new pin as `PinClaims` takes it (the `session_pin` columns, column -> value): created and last used
    `now`, expiring `ttl_s` seconds later. Positional: a router calls it on every first turn."""
    return {"session_key": key, "model": model, "tier": tier, "arm": arm, "deployment": deployment,
            "served_deployment": served_deployment, "last_node": node, "policy_version": policy_version,
            "created_at": now, "last_used": now, "expires_at": now + timedelta(seconds=ttl_s)}


class PinClaims:
    """Read-or-create many pins in one statement, prepared once per dialect: `claim` returns the pin in force for
    each key (ours, or the one another replica or worker stored first), refreshed (`last_used`, `expires_at`)
    either way, as column -> value dicts.

    `INSERT ... ON CONFLICT (session_key) DO UPDATE ... RETURNING`: a live pin keeps its values (only its expiry
    moves), an expired one is replaced, so one round trip both reads and creates. The SQL text is rendered by
    hand and cached per batch size, and values go through the columns' own bind and result processors: the
    same values SQLAlchemy would write, without compiling a statement per batch (compiling a multi-row upsert
    costs as much as running it). Keys are sorted so two replicas claiming overlapping keys lock
    rows in the same order (no deadlock on PostgreSQL). The caller owns the transaction; each key at most once.

    On PostgreSQL through psycopg the rows travel as one JSON parameter (`json_populate_recordset`): one
    statement text whatever the batch size, so psycopg splits it into placeholders once (a cached query) and the
    server plans it once (a prepared statement). With a VALUES form psycopg would split the query text per batch
    in Python (it caches only statements of up to 50 parameters; a pin has 11), and the server would prepare a
    statement per batch size. orjson writes the JSON in C; timestamps go as
    ISO 8601 with their offset, which the `timestamptz` columns read exactly. The router's pin connection runs the
    same statement through asyncpg, and a VALUES row for a batch of one (`numbered`; see router/pins/claims.py)."""

    def __init__(self, dialect: Dialect) -> None:
        table = table_of(SessionPin)
        self.mark = "?" if dialect.paramstyle == "qmark" else "%s"
        self.bind = bind_processors(table, _COLUMNS, dialect)
        self.result = result_processors(table, _COLUMNS, dialect)
        self.bind_now = self.bind[-1]
        self.bind_first = [None if i == _LAST_USED else f for i, f in enumerate(self.bind)]  # see `statement`
        self._sql: dict[tuple[int, bool], str] = {}  # the VALUES form by (batch size, touch)
        # The JSON form: the table's own row type names the columns' types, so nothing here must keep in step.
        # psycopg's takes `now` once per claimed column; asyncpg's (see `numbered`) numbers its parameters, so
        # `now` is bound once as $2.
        pg = dialect.name == "postgresql"
        psycopg = pg and dialect.driver == "psycopg"
        self.json_sql = {t: self._json_upsert(self.mark, self.mark, touch=t) if psycopg else "" for t in (False, True)}
        self.numbered_sql = {t: self._json_upsert("$1", "$2", touch=t) if pg else "" for t in (False, True)}
        # One pin (every batch at low concurrency): a VALUES row with the pin's columns as parameters, one
        # statement text for the only size it takes, so the server skips the JSON function on a first turn's
        # critical path. Batches keep the JSON form: one text for any size, and the server's fixed cost is shared.
        n = len(_COLUMNS)
        self.numbered_one = {t: self._upsert(f"VALUES ({', '.join(f'${i}' for i in range(1, n + 1))})",
                                             f"${n + 1}", touch=t) if pg else "" for t in (False, True)}
        # A refresh of live pins: their expiry moves, nothing else (`refresh_params`). The keys go as one parameter
        # (SQLite: a JSON array read by json_each; PostgreSQL: an array), so one statement text serves any batch.
        t = SessionPin.__tablename__
        keys = (f"IN (SELECT value FROM json_each({self.mark}))" if dialect.name == "sqlite" else
                f"= ANY({self.mark})")
        self.refresh_sql = (f"UPDATE {t} SET last_used = {self.mark}, expires_at = {self.mark} WHERE session_key "
                            f"{keys} RETURNING session_key, last_node, created_at")
        self.numbered_refresh_sql = (f"UPDATE {t} SET last_used = $1, expires_at = $2 WHERE session_key = "
                                     "ANY($3::text[]) RETURNING session_key, last_node, created_at") if pg else ""
        self.sqlite = dialect.name == "sqlite"
        # SQLite batches of more than one pin: the rows as one JSON array of arrays (json_each), one statement text
        # for any size. A VALUES text per batch size cost each its own prepared statement in sqlite3's cache (up
        # to 128 kept): ~40 MB of the router's memory once batches had taken every size up to 256, at the same
        # speed per row.
        sel = ", ".join(f"value ->> {i}" for i in range(len(_COLUMNS)))
        self.sqlite_json_sql = {t: self._upsert(f"SELECT {sel} FROM json_each({self.mark}) WHERE true", touch=t)
                                for t in (False, True)} if self.sqlite else {}
        self.created_result = self.result[_CREATED]
        # The purge's sweep (`purge`): the end of the next range of keys, then the expired pins in that range (or
        # in the rest of the table, past the last range). asyncpg's texts number their parameters.
        self.purge_bound_sql, self.purge_range_sql, self.purge_rest_sql = self._sweep(self.mark, self.mark, self.mark)
        self.numbered_purge = self._sweep("$1", "$2", "$3") if pg else ("", "", "")

    def _json_upsert(self, rows: str, now: str, *, touch: bool = False) -> str:
        """The claim of the rows in the JSON parameter `rows`."""
        return self._upsert(f"SELECT {', '.join(_COLUMNS)} FROM json_populate_recordset("
                            f"NULL::{SessionPin.__tablename__}, {rows}::json)", now, touch=touch)

    def _upsert(self, rows: str, now: str = "", *, touch: bool = False) -> str:
        """The claim around `rows` (a VALUES list or a SELECT); `now` is the placeholder compared with each
        claimed column's expiry [the driver's mark: its parameters follow the rows', once per claimed column].
        `touch`: a returning turn's refresh (`touch_row`): the same, except that a live pin takes the row's last
        node when it names one (this replica moved the session) and keeps its own otherwise."""
        t, m, cols = SessionPin.__tablename__, now or self.mark, ", ".join(_COLUMNS)
        fresh = [f"{c} = CASE WHEN {t}.expires_at <= {m} THEN excluded.{c} ELSE "
                 + (f"COALESCE(excluded.{c}, {t}.{c})" if touch and c == "last_node" else f"{t}.{c}") + " END"
                 for c in _CLAIMED]
        return (f"INSERT INTO {t} ({cols}) {rows} ON CONFLICT (session_key) DO UPDATE SET {', '.join(fresh)}, "
                f"last_used = excluded.last_used, expires_at = excluded.expires_at RETURNING {cols}")

    def refresh_params(self, keys: list[str], used: datetime, expires: datetime) -> tuple:
        """`refresh_sql`'s parameters: every key's pin last used `used`, expiring at `expires`."""
        if self.bind_now:
            return self.bind_now(used), self.bind_now(expires), orjson.dumps(keys).decode() if self.sqlite else keys
        return used, expires, orjson.dumps(keys).decode() if self.sqlite else keys

    def refreshed(self, rows) -> dict[str, tuple[str | None, datetime]]:
        """`refresh_sql`'s rows: key -> (its last node, its creation time, aware)."""
        f = self.created_result
        return {r[0]: (r[1], aware(f(r[2]) if f else r[2])) for r in rows}

    @staticmethod
    def _sweep(p1: str, p2: str, p3: str) -> tuple[str, str, str]:
        """The purge's statements with these placeholders, numbered from the first in each: the end of the range
        of keys after p1 (OFFSET p2); the delete of pins expired before p3 in (p1, p2]; the same past p1 (before
        p2), for the last range."""
        t = SessionPin.__tablename__
        return (f"SELECT session_key FROM {t} WHERE session_key > {p1} ORDER BY session_key LIMIT 1 OFFSET {p2}",
                f"DELETE FROM {t} WHERE session_key > {p1} AND session_key <= {p2} AND expires_at < {p3}",
                f"DELETE FROM {t} WHERE session_key > {p1} AND expires_at < {p2}")

    def purge_params(self, after: str, upto: str | None, before: datetime) -> tuple:
        """The purge DELETE's parameters: `purge_range_sql`'s, or `purge_rest_sql`'s when `upto` is None."""
        stamp = self.bind_now(before) if self.bind_now else before
        return (after, stamp) if upto is None else (after, upto, stamp)

    def sql(self, n: int, touch: bool = False) -> str:
        """The VALUES form for `n` rows."""
        text = self._sql.get((n, touch))
        if text is None:
            row = f"({', '.join([self.mark] * len(_COLUMNS))})"
            text = self._sql[(n, touch)] = self._upsert(f"VALUES {', '.join([row] * n)}", touch=touch)
        return text

    def statement(self, pins: list[dict], now: datetime, *, touch: bool = False) \
            -> tuple[str, tuple, dict[str, tuple[tuple, dict]]]:
        """(SQL text in the driver's paramstyle, parameters, what each key's row holds if it is ours) for one
        batch; `pins` must not be empty. The third part is for `stored`: key -> (the claimed columns as the
        driver returns them, the pin). `touch`: the rows are refreshes (`touch_row`), see `_upsert`."""
        ordered = sorted(pins, key=lambda p: p["session_key"])
        stamp = self.bind_now(now) if self.bind_now else now
        if self.json_sql[touch]:
            rows, ours = self._json(ordered)
            return self.json_sql[touch], (rows, *[stamp] * len(_CLAIMED)), ours
        params: list = []
        ours = {}
        bind_used = self.bind[_LAST_USED]
        as_json = self.sqlite and len(pins) > 1
        for p in ordered:
            values = [f(p[c]) if f else p[c] for c, f in zip(_COLUMNS, self.bind_first)]
            if bind_used is not None:  # a first turn's last use is its creation: one timestamp bound, not two
                used = p["last_used"]
                values[_LAST_USED] = values[_CREATED] if used is p["created_at"] else bind_used(used)
            ours[p["session_key"]] = (tuple(values[1:_OURS_END]), p)
            if as_json:
                params.append(values)
            else:
                params += values
        if as_json:
            return self.sqlite_json_sql[touch], (orjson.dumps(params).decode(), *[stamp] * len(_CLAIMED)), ours
        params += [stamp] * len(_CLAIMED)
        return self.sql(len(pins), touch), tuple(params), ours

    def numbered(self, pins: list[dict], now: datetime, *, touch: bool = False) \
            -> tuple[str, tuple, dict[str, tuple[tuple, dict]]]:
        """`statement` for asyncpg on PostgreSQL: the JSON form with numbered parameters, (the rows as JSON,
        `now`), or for a single pin the VALUES form, (its columns..., `now`); asyncpg binds Python values itself
        (an aware datetime for `timestamptz`) and prepares each of the two texts once per connection."""
        if len(pins) == 1:
            p = pins[0]
            return self.numbered_one[touch], (*[p[c] for c in _COLUMNS], now), \
                {p["session_key"]: (tuple([p[c] for c in _CLAIMED]), p)}
        rows, ours = self._json(sorted(pins, key=lambda p: p["session_key"]))
        return self.numbered_sql[touch], (rows, now), ours

    @staticmethod
    def _json(ordered: list[dict]) -> tuple[str, dict[str, tuple[tuple, dict]]]:
        rows = orjson.dumps([{c: p[c] for c in _COLUMNS} for p in ordered]).decode()
        return rows, {p["session_key"]: (tuple([p[c] for c in _CLAIMED]), p) for p in ordered}

    def stored(self, rows, ours: dict[str, tuple[tuple, dict]] | None = None) -> list[dict]:
        """The RETURNING rows as column -> value dicts, datetimes aware. A row whose claimed columns are what this
        batch wrote for its key (`ours`, from `statement`) is that pin's own dict: nearly every first turn's, and
        comparing the driver's values costs a fraction of converting them (last_used and expires_at are the
        batch's either way)."""
        out = []
        for r in rows:
            mine = ours.get(r[0]) if ours else None
            if mine is not None and r[1:_OURS_END] == mine[0]:
                out.append(mine[1])
                continue
            d = {c: (f(v) if f else v) for c, v, f in zip(_COLUMNS, r, self.result)}
            d["created_at"], d["last_used"], d["expires_at"] = map(aware, (d["created_at"], d["last_used"],
                                                                          d["expires_at"]))
            out.append(d)
        return out

    def claim(self, conn: Connection, pins: list[dict], now: datetime, *, touch: bool = False) -> list[dict]:
        if not pins:
            return []
        sql, params, ours = self.statement(pins, now, touch=touch)
        return self.stored(conn.exec_driver_sql(sql, params).all(), ours)

    def refresh(self, conn: Connection, keys: list[str], used: datetime, expires: datetime) \
            -> dict[str, tuple[str | None, datetime]]:
        return self.refreshed(conn.exec_driver_sql(self.refresh_sql, self.refresh_params(keys, used, expires)).all())

    def purge(self, conn: Connection, before: datetime, after: str, window: int) -> tuple[int, str | None]:
        """One step of the sweep for expired pins: delete those that expired before `before` among the `window`
        keys that follow `after` (all keys past `after` when fewer are left). Returns (pins deleted, the last key
        of the range, or None when the range reached the end of the table: the next sweep starts from "").

        By key range, not through an index on the expiry: such an index is rewritten by every returning turn's
        refresh, where the sweep reads each pin once per purge run. Each step reads at most `window` keys of the
        primary key's index plus their rows, so a step holds its locks briefly whatever the table's size. The
        expiry test is on the DELETE itself: on PostgreSQL a pin another replica refreshed meanwhile is re-checked
        and kept."""
        upto = conn.exec_driver_sql(self.purge_bound_sql, (after, window - 1)).scalar()
        sql = self.purge_rest_sql if upto is None else self.purge_range_sql
        return int(conn.exec_driver_sql(sql, self.purge_params(after, upto, before)).rowcount or 0), upto


def claim_pins(*, conn: Connection, pins: list[dict], now: datetime) -> list[dict]:
    """`PinClaims(...).claim` for one call (tests, tools); the router keeps one `PinClaims` per engine."""
    return PinClaims(conn.dialect).claim(conn, pins, now)


def set_served_deployment(*, session: Session, session_key: str, deployment: str) -> None:
    session.exec(update(SessionPin).where(col(SessionPin.session_key) == session_key)
                 .values(served_deployment=deployment))
    session.commit()


def rearm_pin(*, session: Session, session_key: str, arm: str) -> None:
    """Move a pinned session to another canary arm at the same tier; it picks its deployment afresh."""
    session.exec(update(SessionPin).where(col(SessionPin.session_key) == session_key)
                 .values(arm=arm, served_deployment=None))
    session.commit()


def delete_pin(*, session: Session, session_key: str) -> bool:
    res = session.exec(delete(SessionPin).where(col(SessionPin.session_key) == session_key))
    session.commit()
    return bool(res.rowcount)


def list_pins(*, session: Session, limit: int = 1000, now: datetime | None = None) -> list[SessionPin]:
    """Live pins, the most recently used first: ordered by expiry, which is the last use plus the policy's session
    TTL (one value for the fleet's active policy). Neither column is indexed (a refresh writes both on the
    router's path), so this reads every pin and keeps the newest `limit`: a page of the dashboard, not a hot path.
    (`last_used` is itself written at most every `pin_touch_interval_s`, so the order is not exact to the
    second.)"""
    q = select(SessionPin).where(SessionPin.expires_at > (now or utcnow()))
    return list(session.exec(q.order_by(col(SessionPin.expires_at).desc()).limit(limit)))


def purge_expired_pins(*, session: Session, before: datetime, after: str = "", window: int = 1000) \
        -> tuple[int, str | None]:
    """One step of the sweep (`PinClaims.purge`) in `session`'s transaction, committed: delete the pins that
    expired before `before` among the `window` keys after `after`. Returns (how many went, where the next step
    starts; None once the sweep reached the end of the table)."""
    got = PinClaims(session.get_bind().dialect).purge(session.connection(), before, after, window)
    session.commit()
    return got
