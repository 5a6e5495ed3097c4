"""A router's (or node's) /metrics lines as tests read them."""

from __future__ import annotations

import httpx


def series(url: str, *prefixes: str, nonzero: bool = False) -> list[str]:
    """The exposition lines of `url`/metrics that start with one of `prefixes` (`nonzero`: not those at 0)."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return [ln for ln in text.splitlines()
            if ln.startswith(prefixes) and not (nonzero and ln.endswith(" 0.0"))]


def total(lines: list[str]) -> float:
    """The sum of the values of exposition lines."""
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in lines)
