"""Bind and result processors for the statements the router renders by hand (the pin claim, the request-log
writer): each column type's own, except timestamps on SQLite.

SQLAlchemy stores a SQLite timestamp as text it formats with a %-format of seven named fields and parses back
with a regex. An instruction count of the router (callgrind, new sessions on SQLite) put that formatting alone
at ~57,000 instructions a first turn (four timestamps bound per pin, one per request-log row), a sixth of what
a new session adds to a request. `datetime.isoformat` writes the same text and `datetime.fromisoformat` reads
it in C. The tests hold both to SQLAlchemy's own processors."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Dialect
from sqlmodel.sql.sqltypes import UTCDateTime

Processor = Callable[[Any], Any] | None


def _sqlite_utc_text(value: datetime | None) -> str | None:
    """An aware datetime as SQLAlchemy's SQLite DATETIME stores it: UTC wall time, 'YYYY-MM-DD HH:MM:SS.ffffff'."""
    if value is None:
        return None
    if value.utcoffset() is None:  # the column type's own refusal (sqlmodel's UTCDateTime), word for word
        raise ValueError("Datetime values must have timezone information. Use datetime.now(timezone.utc), or "
                         "annotate the field with NaiveDatetime for naive storage.")
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def _sqlite_utc_value(value: str | None) -> datetime | None:
    """The stored text back as an aware UTC datetime (what the column type returns)."""
    if value is None:
        return None
    dt = datetime.fromisoformat(value)
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def bind_processors(table: Table, columns: tuple[str, ...], dialect: Dialect) -> list[Processor]:
    """One bind processor per column (None where the driver takes the value as it is)."""
    fast = dialect.name == "sqlite"
    return [_sqlite_utc_text if fast and isinstance(table.c[c].type, UTCDateTime)
            else table.c[c].type.dialect_impl(dialect).bind_processor(dialect) for c in columns]


def result_processors(table: Table, columns: tuple[str, ...], dialect: Dialect) -> list[Processor]:
    """One result processor per column (None where the driver's value is the column's)."""
    fast = dialect.name == "sqlite"
    return [_sqlite_utc_value if fast and isinstance(table.c[c].type, UTCDateTime)
            else table.c[c].type.dialect_impl(dialect).result_processor(dialect, None) for c in columns]
