"""What the request log may keep of a request (pure: applied when the log row is built).

The what-if replay needs the parsed body and the headers the classifier reads; nothing else is kept:
- bodies per `prompt_storage`: `full` as sent, `redacted` with secret-looking and personal strings masked
  (API keys, long tokens, e-mail addresses, card-like numbers) so the classifier still sees the prose, or
  `none` (no replay data at all; the replay then says there is nothing to replay);
- headers only from an allowlist (the classifier's headers), and never one whose name looks like a credential,
  whatever the allowlist says."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

PromptStorage = Literal["full", "redacted", "none"]
PROMPT_STORAGE_MODES = ("full", "redacted", "none")
DEFAULT_HEADER_ALLOWLIST = ("x-priority", "x-latency-budget-ms", "x-min-tier")
REDACTED = "[redacted]"

SECRET_HEADER = re.compile(r"auth|token|secret|key|passw|cookie|credential|signature", re.I)
_SECRET_TEXT = re.compile(
    r"\b(?:sk|pk|rk|ghp|gho|ghs|xox[abpr]|AKIA|AIza|hf)[-_A-Za-z0-9]{12,}"  # provider key shapes
    r"|\beyJ[-_A-Za-z0-9]+\.[-_A-Za-z0-9]+\.[-_A-Za-z0-9]*"  # JWTs
    r"|\b[A-Za-z0-9+/_-]{32,}={0,2}"  # long opaque tokens (hex, base64)
    r"|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"  # e-mail addresses
    r"|\b(?:\d[ -]?){12,18}\d\b")  # card and account numbers


# Every secret shape above holds one of these: an '@', "eyJ", 13 digits, or 12 characters in a row from the key
# and token alphabets. Prose mostly has none, and these checks are C-speed passes over the bytes (translate,
# split), so most texts skip the many-branch pattern, which would otherwise be most of the log's cost per request.
_TOKEN_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/")
_RUNS = bytes(i if i in _TOKEN_CHARS or i > 127 else 32 for i in range(256))  # everything else splits runs
_DIGITS = b"0123456789"


def _ascii_may_hold_secret(raw: bytes) -> bool:
    # find, not `in`: CPython 3.11's bytes `in` raises and clears a TypeError first (proxy.usage_from)
    return (raw.find(b"@") >= 0 or raw.find(b"eyJ") >= 0 or len(raw) - len(raw.translate(None, _DIGITS)) >= 13
            or max(map(len, raw.translate(_RUNS).split()), default=0) >= 12)


def _may_hold_secret(text: str) -> bool:
    if not text.isascii():  # \d and \w are Unicode-wide: let the full pattern decide
        return True
    return _ascii_may_hold_secret(text.encode("ascii"))


def _body_may_hold_secret(body: Any) -> bool:
    """The prefilter over a whole body at once: its JSON text holds every string of the body unescaped as far as
    the prefilter looks (escaping touches neither ASCII letters, digits, '-+/_@' nor their runs) and no fewer
    digits, so a text that passes clears every string in it; one pass instead of a walk per string."""
    try:
        raw = orjson.dumps(body)
    except (orjson.JSONEncodeError, TypeError):  # not plain JSON: the walk decides
        return True
    return not raw.isascii() or _ascii_may_hold_secret(raw)


def redact_text(text: str) -> str:
    return _SECRET_TEXT.sub(REDACTED, text) if _may_hold_secret(text) else text


def _redact(value: Any, depth: int = 0) -> Any:
    if depth > 32:
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [_redact(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: _redact(v, depth + 1) for k, v in value.items()}
    return value


def stored_headers(headers: Mapping[str, str], allow: Iterable[str]) -> dict[str, str]:
    allowed = {h.lower() for h in allow}
    return {k: v for k, v in headers.items() if k.lower() in allowed and not SECRET_HEADER.search(k)}


@dataclass(slots=True, frozen=True)
class PendingReplay:
    """What `replay_record` needs, by reference: the request log's writer builds the record when it prepares the
    row, as the request ends, or later in its thread for a large body (the router never changes a parsed body or
    its headers after routing)."""

    body: Any
    headers: Mapping[str, str]
    storage: PromptStorage
    allow: tuple[str, ...]

    def record(self) -> dict[str, Any] | None:
        return replay_record(self.body, self.headers, storage=self.storage, allow=self.allow)


def replay_record(body: Any, headers: Mapping[str, str], *, storage: PromptStorage,
                  allow: Iterable[str]) -> dict[str, Any] | None:
    """The request log's `replay` column for one request: None when nothing may be kept."""
    if storage == "none" or not isinstance(body, dict):
        return None
    kept = body if storage == "full" or not _body_may_hold_secret(body) else _redact(body)
    out: dict[str, Any] = {"body": kept, "headers": stored_headers(headers, allow)}
    if storage == "redacted":
        out["redacted"] = True
    return out
