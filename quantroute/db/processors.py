"""Bind and result processors for the statements the router renders by hand (the pin claim, the request-log
writer): each column type's own, except timestamps on SQLite.

SQLAlchemy stores a SQLite timestamp as text it formats with a %-format of seven named fields and parses back
with a regex, both slow in Python, and a first turn binds several timestamps. `datetime.fromisoformat` reads the
same text in C. `datetime.isoformat` writes it in C too, but through libc's printf machinery per field, still
costly. The router's timestamps come in runs within the same second, so the text up to the second is formatted
once and kept (a few hundred entries at most) and only the microseconds are formatted per value. The tests hold
both to SQLAlchemy's own processors."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Dialect
from sqlmodel.sql.sqltypes import UTCDateTime

Processor = Callable[[Any], Any] | None


PREFIXES_KEPT = 256  # seconds whose text a processor keeps (a batch binds a few: now, creation, expiry)


def _sqlite_utc_text(theirs: Callable[[Any], Any]) -> Callable[[datetime | None], str | None]:
    """An aware datetime as SQLAlchemy's SQLite DATETIME stores it (UTC wall time, 'YYYY-MM-DD HH:MM:SS.ffffff');
    a naive one goes to the column type's own processor, which refuses it."""
    prefixes: dict[tuple[int, ...], str] = {}  # (year, ..., second) -> 'YYYY-MM-DD HH:MM:SS.'

    def process(value: datetime | None) -> str | None:
        if value is not None and value.tzinfo is UTC:  # the router's own clock
            second = (value.year, value.month, value.day, value.hour, value.minute, value.second)
            prefix = prefixes.get(second)
            if prefix is None:
                if len(prefixes) >= PREFIXES_KEPT:
                    prefixes.clear()
                prefix = prefixes[second] = value.isoformat(" ", "seconds")[:19] + "."
            return prefix + f"{value.microsecond:06d}"
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
