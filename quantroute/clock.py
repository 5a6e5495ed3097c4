"""Time helpers every layer shares: the one clock (timezone-aware UTC) and the repair of naive datetimes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload


def utcnow() -> datetime:
    return datetime.now(UTC)


@overload
def aware(dt: datetime) -> datetime: ...


@overload
def aware(dt: None) -> None: ...


def aware(dt: datetime | None) -> datetime | None:
    """`dt` with UTC attached when it has no zone: SQLite hands back naive datetimes even for timezone-aware
    columns, and every comparison here is between aware ones. None (a nullable column) stays None."""
    if dt is None:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
