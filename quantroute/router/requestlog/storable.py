"""Make a request-log row storable whatever the client sent: pure functions, no I/O.

A client controls most of a row (the model name, headers, the whole body kept for the what-if replay). What the
router accepts is not always what a database stores: orjson parses 1,024 levels of nesting, the JSON encoder
behind the column gives up near 1,000 (RecursionError); PostgreSQL refuses NUL in text; a lone surrogate cannot
be encoded as UTF-8 at all. One such row would fail its whole batch at every retry. So every string is
cleaned and every JSON value bounded in depth and size here, before the insert, on every database alike.

Almost every value is storable as it is, and walking a body in Python costs far more than encoding it (the
writer's thread holds the GIL the event loop needs meanwhile). So a JSON value is first encoded by orjson, which
refuses lone surrogates and anything that is not JSON; when that works, the text carries no NUL, every key is
short and there are too few brackets for the depth bound, nothing needs cutting and the value is kept as is
(`_as_is`). Only the rest takes the walk."""

from __future__ import annotations

import json
from typing import Any

import orjson

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


# datetimes, dataclasses and subclasses of str/int/dict/list are not what a JSON parser makes: the walk handles them
_STRICT = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def _keys_short(v: Any) -> bool:
    """Every object key within MAX_TEXT chars (containers only: strings are bounded by the encoded length)."""
    if isinstance(v, dict):
        return all(len(k) <= MAX_TEXT and _keys_short(x) for k, x in v.items())
    if isinstance(v, list):
        return all(_keys_short(x) for x in v)
    return True


def _as_is(value: Any, max_chars: int) -> bytes | None:
    """`value` encoded, when it is storable unchanged; None when it needs the walk."""
    try:
        text = orjson.dumps(value, option=_STRICT)
    except (orjson.JSONEncodeError, TypeError):  # lone surrogates, non-str keys, huge ints, non-JSON objects
        return None
    # Fewer brackets in the whole text than MAX_DEPTH bounds the nesting; a text shorter than every character
    # bound bounds every string in it; an escaped NUL is the only way one can appear in orjson's output.
    if (len(text) > min(MAX_STRING, max_chars) or text.count(b"[") + text.count(b"{") >= MAX_DEPTH
            or text.find(b"\\u0000") >= 0 or (len(text) > MAX_TEXT and not _keys_short(value))):
        return None
    return text


def bound_json(value: Any, *, max_chars: int = MAX_JSON_CHARS) -> tuple[Any, bool]:
    """(a copy every JSON encoder and database accepts, whether anything was cut)."""
    if _as_is(value, max_chars) is not None:
        return value, False
    return _walk(value, max_chars)


def _walk(value: Any, max_chars: int) -> tuple[Any, bool]:
    """The bounding walk: (the bounded copy, whether anything was cut)."""
    budget = _Budget(max_chars)
    return _bound(value, 0, budget), budget.cut


def json_text(value: Any) -> str:
    """The stored text of a bounded JSON value (compact, UTF-8 as is)."""
    try:
        return orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError):  # integers beyond 64 bits: the standard encoder takes them
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def storable_row(row: dict, json_columns: tuple[str, ...] = ("rules", "replay"), *, encode: bool = False) -> dict:
    """A copy of `row` with every text cleaned and every JSON value bounded. A cut JSON object says so with
    `"truncated": true` (the what-if replay skips such bodies rather than classify half a request).
    `encode`: JSON values come out as their stored text (the writer binds that; the value is encoded once)."""
    out = dict(row)
    for k, v in row.items():
        if k in json_columns:
            if v is None:
                continue
            if isinstance(v, str):  # a bare string is JSON too, cut like any text column
                v = clean_text(v, MAX_TEXT)
                out[k] = json_text(v) if encode else v
                continue
            text = _as_is(v, MAX_JSON_CHARS)
            if text is not None:
                out[k] = text.decode() if encode else v
                continue
            bounded, cut = _walk(v, MAX_JSON_CHARS)  # (_as_is already said no: not bound_json, which asks again)
            if cut and isinstance(bounded, dict):
                bounded["truncated"] = True
            out[k] = json_text(bounded) if encode else bounded
        elif isinstance(v, str):
            out[k] = clean_text(v, MAX_TEXT)
    return out
