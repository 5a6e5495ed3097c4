"""Session pins: the tier (and canary arm) a session's first request fixed. Shared by router replicas."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import case, update
from sqlalchemy.engine import Connection
from sqlmodel import Field, Session, SQLModel, delete, select

from quantroute.db.audit import utcnow


class SessionPin(SQLModel, table=True):
    """Written by the router on a session's first request; read by every replica and the dashboard."""

    __tablename__ = "session_pin"
    session_key: str = Field(primary_key=True)
    model: str = Field(index=True)
    tier: str = Field(index=True)
    arm: str | None = None
    deployment: str | None = None  # set when the session asked for a deployment id directly
    # The deployment (artifact) that served the session: later requests prefer it while it has a healthy node,
    # so a session does not switch format between deployments of its tier (column from 0101_pin_deployment).
    served_deployment: str | None = None
    policy_version: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    last_used: datetime = Field(default_factory=utcnow, index=True)
    expires_at: datetime = Field(index=True)


def _aware(dt: datetime) -> datetime:
    # SQLite hands back naive datetimes even for timezone-aware columns.
    from datetime import timezone

    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def get_pin(*, session: Session, session_key: str, now: datetime | None = None) -> SessionPin | None:
    pin = session.get(SessionPin, session_key)
    if pin is None:
        return None
    pin.created_at, pin.last_used, pin.expires_at = map(_aware, (pin.created_at, pin.last_used, pin.expires_at))
    return pin if pin.expires_at > (now or utcnow()) else None


# Columns a claim takes from the new row only where the stored pin has expired (the session starts over); a live
# pin keeps them, so the replica that committed first decides the session's tier, arm and deployment.
_CLAIMED = ("model", "tier", "arm", "deployment", "served_deployment", "policy_version", "created_at")


def claim_pins(*, conn: Connection, pins: list[dict], now: datetime) -> list[SessionPin]:
    """Read-or-create many pins in one statement; returns the pin in force for each key (ours, or the one
    another replica or worker stored first), refreshed (`last_used`, `expires_at`) either way.

    `INSERT ... ON CONFLICT (session_key) DO UPDATE ... RETURNING`: a live pin keeps its values (only its expiry
    moves), an expired one is replaced, so one round trip both reads and creates. Keys are sorted so two
    replicas claiming overlapping keys lock rows in the same order (no deadlock on PostgreSQL). The caller owns
    the transaction; each key appears at most once."""
    if not pins:
        return []
    table = SessionPin.__table__  # type: ignore[attr-defined]
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    stmt = insert(table).values(sorted(pins, key=lambda p: p["session_key"]))
    expired = table.c.expires_at <= now
    fresh = {c: case((expired, stmt.excluded[c]), else_=table.c[c]) for c in _CLAIMED}
    stmt = stmt.on_conflict_do_update(
        index_elements=[table.c.session_key],
        set_={**fresh, "last_used": stmt.excluded.last_used, "expires_at": stmt.excluded.expires_at},
    ).returning(*table.c)
    out = []
    for row in conn.execute(stmt).mappings():
        pin = SessionPin(**row)
        pin.created_at, pin.last_used, pin.expires_at = map(_aware, (pin.created_at, pin.last_used, pin.expires_at))
        out.append(pin)
    return out


def touch_pin(*, session: Session, session_key: str, ttl_s: int, now: datetime | None = None) -> None:
    now = now or utcnow()
    pin = session.get(SessionPin, session_key)
    if pin is not None:
        pin.last_used = now
        pin.expires_at = now + timedelta(seconds=ttl_s)
        session.commit()


def set_served_deployment(*, session: Session, session_key: str, deployment: str) -> None:
    session.exec(update(SessionPin).where(SessionPin.session_key == session_key)  # type: ignore[call-overload]
                 .values(served_deployment=deployment))
    session.commit()


def rearm_pin(*, session: Session, session_key: str, arm: str) -> None:
    """Move a pinned session to another canary arm at the same tier; it picks its deployment afresh."""
    session.exec(update(SessionPin).where(SessionPin.session_key == session_key)  # type: ignore[call-overload]
                 .values(arm=arm, served_deployment=None))
    session.commit()


def delete_pin(*, session: Session, session_key: str) -> bool:
    res = session.exec(delete(SessionPin).where(SessionPin.session_key == session_key))  # type: ignore[call-overload]
    session.commit()
    return bool(res.rowcount)


def list_pins(*, session: Session, limit: int = 1000, now: datetime | None = None) -> list[SessionPin]:
    q = select(SessionPin).where(SessionPin.expires_at > (now or utcnow()))
    return list(session.exec(q.order_by(SessionPin.last_used.desc()).limit(limit)))  # type: ignore[union-attr]


def purge_expired_pins(*, session: Session, before: datetime, batch: int = 1000) -> int:
    """Delete at most `batch` pins that expired before `before`; returns how many went. Bounded so one call
    holds its locks briefly: call again while it returns `batch`. The outer `expires_at` test matters on
    PostgreSQL: a pin another replica refreshed while this ran is re-checked and kept."""
    keys = select(SessionPin.session_key).where(SessionPin.expires_at < before).limit(batch)
    res = session.exec(delete(SessionPin).where(  # type: ignore[call-overload]
        SessionPin.session_key.in_(keys.scalar_subquery()), SessionPin.expires_at < before))  # type: ignore[attr-defined]
    session.commit()
    return int(res.rowcount or 0)
