"""Session pin rows as the committer takes them, for the pin claim tests."""

from __future__ import annotations

from quantroute.clock import utcnow
from quantroute.db.session_pin import claim_row


def pin_row(key: str, tier: str = "int4") -> dict:
    """A new pin of `key` on `tier`, live for an hour."""
    return claim_row(key, "llama3-8b", tier, None, None, f"d-{tier}", None, 1, utcnow(), 3600)
