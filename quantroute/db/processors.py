"""Bind and result processors for the statements the router renders by hand (the pin claim, the request-log
writer): each column type's own, except timestamps on SQLite.

SQLAlchemy stores a SQLite timestamp as text it formats with a %-format of seven named fields and parses back
with a regex. An instruction count of the router (callgrind, new sessions on SQLite) put that formatting at
~30,000 instructions a first turn (four timestamps bound per pin, one per request-log row), ~2 % of the request.
`datetime.isoformat` writes the same text and `datetime.fromisoformat` reads it, in C. The tests hold both to
SQLAlchemy's own processors."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Dialect
from sqlmodel.sql.sqltypes import UTCDateTime

Processor = Callable[[Any], Any] | None


def _sqlite_utc_text(theirs: Callable[[Any], Any]) -> Callable[[datetime | None], str | None]:
    """An aware datetime as SQLAlchemy's SQLite DATETIME stores it (UTC wall time, 'YYYY-MM-DD HH:MM:SS.ffffff');
    a naive one goes to the column type's own processor, which refuses it."""

    def process(value: datetime | None) -> str | None:
        if value is not None and value.tzinfo is UTC:  # the router's own clock: the text before "+00:00"
            return value.isoformat(" ", "microseconds")[:26]
        if value is None or value.utcoffset() is None:
            return theirs(value)
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")

    return process


def _sqlite_utc_value(value: str | None) -> datetime | None:
    """The stored text back as an aware UTC datetime (what the column type returns)."""
    if value is None:
        return None
    dt = datetime.fromisoformat(value)
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def _fast(table: Table, column: str, dialect: Dialect) -> bool:
    return dialect.name == "sqlite" and isinstance(table.c[column].type, UTCDateTime)


def bind_processors(table: Table, columns: tuple[str, ...], dialect: Dialect) -> list[Processor]:
    """One bind processor per column (None where the driver takes the value as it is)."""
    procs = [table.c[c].type.dialect_impl(dialect).bind_processor(dialect) for c in columns]
    return [_sqlite_utc_text(p) if p is not None and _fast(table, c, dialect) else p for c, p in zip(columns, procs)]


def result_processors(table: Table, columns: tuple[str, ...], dialect: Dialect) -> list[Processor]:
    """One result processor per column (None where the driver's value is the column's)."""
    return [_sqlite_utc_value if _fast(table, c, dialect)
            else table.c[c].type.dialect_impl(dialect).result_processor(dialect, None) for c in columns]
