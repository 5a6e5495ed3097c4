"""Session pin rows as the committer takes them (the `session_pin` columns), for the pin claim tests."""

from __future__ import annotations

from datetime import timedelta

from quantroute.clock import utcnow


def pin_row(key: str, tier: str = "int4") -> dict:
    """A new pin of `key` on `tier`, live for an hour."""
    now = utcnow()
    return {"session_key": key, "model": "llama3-8b", "tier": tier, "arm": None, "deployment": None,
            "served_deployment": f"d-{tier}", "last_node": None, "policy_version": 1, "created_at": now,
            "last_used": now, "expires_at": now + timedelta(hours=1)}
