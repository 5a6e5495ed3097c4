"""Comparison of one shadow pair: the answer the client got (served) and the one the shadow deployment gave to
the same greedy request. Pure, no I/O; the router calls it off the request path and stores the result.

`agree` is the headline verdict every rate is computed from: for structured outputs, the JSON is structurally
equal; otherwise the normalized texts match or, for math-like outputs, the final numbers agree. The other fields
say how far apart the answers are when they do not (first divergence, length ratio)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel

from quantroute.answers import last_number, normalize, parse_json


class Comparison(BaseModel):
    """What one pair's comparison found; the shadow_pair table stores these fields as columns."""

    exact: bool
    normalized: bool
    diverge_char: int | None = None  # first differing character (None: identical texts)
    diverge_token: int | None = None  # first differing token, when the responses allow it
    token_exact: bool = False  # diverge_token from the servers' own tokens (logprobs), not estimated from usage
    length_ratio: float | None = None  # shadow characters / served characters
    json_like: bool = False
    json_valid_served: bool | None = None
    json_valid_shadow: bool | None = None
    json_equal: bool | None = None
    math_like: bool = False
    number_served: float | None = None
    number_shadow: float | None = None
    numeric_agree: bool | None = None
    agree: bool


def common_prefix(a: Sequence[object], b: Sequence[object]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _looks_json(text: str) -> bool:
    t = text.strip()
    return t.startswith(("{", "[")) or "```json" in t


def _json(text: str) -> tuple[bool, object]:
    try:
        return True, parse_json(text)
    except ValueError:
        return False, None


def _math_like(text: str) -> bool:
    """A final-answer shape: the last non-empty line carries a number (or a \\boxed{} answer)."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return bool(lines) and ("\\boxed{" in text or last_number(lines[-1]) is not None)


def _diverge_token(served: str, at: int | None, served_tokens: Sequence[str] | None,
                   shadow_tokens: Sequence[str] | None, completion_tokens: int | None) -> tuple[int | None, bool]:
    if at is None:
        return None, False
    if served_tokens and shadow_tokens:
        return common_prefix(served_tokens, shadow_tokens), True
    if completion_tokens and served:
        # No token list: place the divergence at the same share of the served answer's token count.
        return min(completion_tokens, round(at / len(served) * completion_tokens)), False
    return None, False


def compare(served: str, shadow: str, *, served_tokens: Sequence[str] | None = None,
            shadow_tokens: Sequence[str] | None = None, completion_tokens: int | None = None) -> Comparison:
    """Compare two answers to the same greedy request. `completion_tokens` is the served answer's usage count,
    used to estimate the divergence in tokens when the responses carry no token lists (logprobs)."""
    exact = served == shadow
    at = None if exact else common_prefix(served, shadow)
    token_at, token_exact = _diverge_token(served, at, served_tokens, shadow_tokens, completion_tokens)
    ratio = len(shadow) / len(served) if served else (1.0 if not shadow else None)
    c = Comparison(exact=exact, normalized=exact or normalize(served) == normalize(shadow), diverge_char=at,
                   diverge_token=token_at, token_exact=token_exact, length_ratio=ratio, agree=False)
    if _looks_json(served) or _looks_json(shadow):
        (ok_a, a), (ok_b, b) = _json(served), _json(shadow)
        c.json_like, c.json_valid_served, c.json_valid_shadow = True, ok_a, ok_b
        c.json_equal = ok_a and ok_b and a == b
    elif _math_like(served):
        c.math_like = True
        c.number_served, c.number_shadow = last_number(served), last_number(shadow)
        if c.number_served is not None and c.number_shadow is not None:
            c.numeric_agree = math.isclose(c.number_served, c.number_shadow, rel_tol=1e-9, abs_tol=1e-9)
    # Structured output is judged by its structure alone: normalization drops the brackets and quotes that make
    # a cut object invalid, so a broken answer would pass for the intact one.
    c.agree = exact or (c.json_equal is True if c.json_like else c.normalized or c.numeric_agree is True)
    return c
