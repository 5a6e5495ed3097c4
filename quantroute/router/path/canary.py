"""Canary arm choice: a stable hash of the session key (or request id) against the canary percent.

Stable across processes and restarts (no Python `hash()`, which is salted per process), so every replica
puts one session in the same arm."""

from __future__ import annotations

import hashlib

BASELINE = "baseline"
CANDIDATE = "candidate"
DIRECT = "direct"  # logged for a request that named its deployment: no arm, never counted by guards


def bucket(key: str, salt: str = "") -> float:
    """A number in [0, 100) fixed by `key` (and the canary's salt, e.g. its model)."""
    digest = hashlib.blake2b(f"{salt}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 * 100.0


def choose_arm(key: str, percent: float, salt: str = "") -> str:
    """candidate when the key's bucket falls under `percent`; raising the percent only moves baseline
    sessions to the candidate, never the reverse."""
    if percent <= 0:
        return BASELINE
    if percent >= 100:
        return CANDIDATE
    return CANDIDATE if bucket(key, salt) < percent else BASELINE
