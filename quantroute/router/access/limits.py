"""Rate limits as token buckets: a limit of N per minute holds up to N and refills N/60 a second, so a burst of
N passes and then N a minute, evenly. Requests take 1 before they are forwarded; tokens are known only once
the answer is in, so a token bucket lets a request in while it is not empty and is charged afterwards (it may
go below zero: the next requests wait for it to refill). Pure: the caller passes the time."""

from __future__ import annotations

import math


class Bucket:
    __slots__ = ("per_minute", "level", "at")

    def __init__(self, per_minute: int, now: float) -> None:
        self.per_minute = per_minute
        self.level = float(per_minute)
        self.at = now

    def _refill(self, now: float) -> None:
        if now > self.at:
            self.level = min(float(self.per_minute), self.level + (now - self.at) * self.per_minute / 60.0)
            self.at = now

    def wait_s(self, now: float, need: float) -> float:
        """0 when `need` can be taken now, else the seconds until it can."""
        self._refill(now)
        if self.level >= need:
            return 0.0
        return (need - self.level) * 60.0 / self.per_minute

    def take(self, amount: float) -> None:
        self.level -= amount


def retry_after(seconds: float) -> int:
    """Whole seconds for a Retry-After header: never 0 (a client would retry at once)."""
    return max(1, math.ceil(seconds))
