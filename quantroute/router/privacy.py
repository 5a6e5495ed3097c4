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
# and token alphabets. Prose mostly has none, and these checks are C-speed scans, so most strings skip the
# many-branch pattern (its cost per string was most of the log's cost per request).
_TOKEN_RUN = re.compile(r"[-\w+/]{12}")
_DIGITS = "0123456789"


def _may_hold_secret(text: str) -> bool:
    if not text.isascii():  # \d and \w are Unicode-wide: let the full pattern decide
        return True
    return ("@" in text or "eyJ" in text or _TOKEN_RUN.search(text) is not None
            or sum(map(text.count, _DIGITS)) >= 13)


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
    """What `replay_record` needs, by reference: the request log's writer builds the record in its batch, off
    the event loop (the router never changes a parsed body or its headers after routing)."""

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
    kept = body if storage == "full" else _redact(body)
    out: dict[str, Any] = {"body": kept, "headers": stored_headers(headers, allow)}
    if storage == "redacted":
        out["redacted"] = True
    return out
