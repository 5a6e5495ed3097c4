"""Make a request-log row storable whatever the client sent: pure functions, no I/O.

A client controls most of a row (the model name, headers, the whole body kept for the what-if replay). What the
router accepts is not always what a database stores: orjson parses 1,024 levels of nesting, the JSON encoder
behind the column gives up near 1,000 (RecursionError); PostgreSQL refuses NUL in text; a lone surrogate cannot
be encoded as UTF-8 at all. One such row used to fail its whole batch again and again. So every string is
cleaned and every JSON value bounded in depth and size here, before the insert, on every database alike."""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 32  # a chat body needs ~5 levels; tools schemas a dozen
MAX_STRING = 16_384  # chars per string inside a JSON column
MAX_JSON_CHARS = 262_144  # chars of strings per JSON column; what-if replay of a larger body is not useful
MAX_TEXT = 1_024  # chars per plain text column (model, session key, request id, error)
TRUNCATED = "\u2026"  # what stands for a cut subtree or the rest of a string


def clean_text(s: str, limit: int | None = None) -> str:
    """NUL becomes U+FFFD (PostgreSQL refuses it in text and JSON alike); lone surrogates, which UTF-8 cannot
    carry, become U+FFFD too; over `limit` chars the rest is cut."""
    if limit is not None and len(s) > limit:
        s = s[:limit] + TRUNCATED
    if s.isascii():
        return s.replace("\x00", "\ufffd") if "\x00" in s else s
    s = s.replace("\x00", "\ufffd")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        # surrogatepass writes the lone half out; decoding it back replaces what cannot pair
        s = s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return s


class _Budget:
    __slots__ = ("chars", "cut")

    def __init__(self, chars: int) -> None:
        self.chars = chars
        self.cut = False


def _bound(v: Any, depth: int, budget: _Budget) -> Any:
    if isinstance(v, str):
        if len(v) > MAX_STRING or len(v) > budget.chars:
            budget.cut = True
        s = clean_text(v, min(MAX_STRING, max(budget.chars, 0)))
        budget.chars -= len(s)
        return s
    if v is None or isinstance(v, (bool, int, float)):
        return v
    if depth >= MAX_DEPTH:
        budget.cut = True
        return TRUNCATED
    if isinstance(v, dict):
        return {clean_text(str(k), MAX_TEXT): _bound(x, depth + 1, budget) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_bound(x, depth + 1, budget) for x in v]
    budget.cut = True  # not a JSON value (the parser never makes one; a caller might)
    return clean_text(repr(v), MAX_TEXT)


def bound_json(value: Any, *, max_chars: int = MAX_JSON_CHARS) -> tuple[Any, bool]:
    """(a copy every JSON encoder and database accepts, whether anything was cut)."""
    budget = _Budget(max_chars)
    out = _bound(value, 0, budget)
    return out, budget.cut


def storable_row(row: dict, json_columns: tuple[str, ...] = ("rules", "replay")) -> dict:
    """A copy of `row` with every text cleaned and every JSON value bounded. A cut JSON object says so with
    `"truncated": true` (the what-if replay skips such bodies rather than classify half a request)."""
    out = dict(row)
    for k, v in row.items():
        if isinstance(v, str):
            out[k] = clean_text(v, MAX_TEXT)
        elif k in json_columns and v is not None:
            bounded, cut = bound_json(v)
            if cut and isinstance(bounded, dict):
                bounded["truncated"] = True
            out[k] = bounded
    return out
