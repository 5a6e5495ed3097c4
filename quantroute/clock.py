"""Time helpers every layer shares: the one clock (timezone-aware UTC) and the repair of naive datetimes."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def aware(dt: datetime) -> datetime:
    """`dt` with UTC attached when it has no zone: SQLite hands back naive datetimes even for timezone-aware
    columns, and every comparison here is between aware ones."""
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
