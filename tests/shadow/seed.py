"""Stored shadow pairs for tests of what reads them (report, guard facts, dashboard)."""

from __future__ import annotations

from datetime import timedelta

from quantroute.clock import utcnow
from quantroute.db.engine import session
from quantroute.db.shadow_pair import ShadowPair

DEPS = {"fp16": "llama3-8b-fp16", "fp8": "llama3-8b-fp8-dynamic", "int8": "llama3-8b-w8a8-int8",
        "int4": "llama3-8b-awq-w4a16"}


def seed_pairs(engine, *, rule: str, served: str, shadow: str, n: int, agree: int, arm: str | None = None,
               served_deployment: str | None = None, bodies: bool = True, age_s: float = 0,
               spread_s: float = 1.0) -> None:
    now = utcnow() - timedelta(seconds=age_s)
    rows = []
    for i in range(n):
        ok = i < agree
        served_text = f"The answer to item {i} is 12."
        shadow_text = served_text if ok else f"The answer to item {i} is 13."
        rows.append(ShadowPair(
            ts=now - timedelta(seconds=i * spread_s), request_id=f"{rule}-{served}-{i}", model="llama3-8b",
            policy_version=1, rules=[rule], arm=arm, kind="tier", served_tier=served,
            served_deployment=served_deployment or DEPS[served], served_node=f"{served}-a", shadow_tier=shadow,
            shadow_deployment=DEPS[shadow], shadow_node=f"{shadow}-a", shadow_status=200, shadow_latency_ms=40.0,
            compared=True, exact=ok, normalized=ok, diverge_char=None if ok else len(served_text) - 3,
            length_ratio=1.0, json_like=False, math_like=True, number_served=12, number_shadow=12 if ok else 13,
            numeric_agree=ok, agree=ok,
            bodies={"request": {"body": {"messages": [{"role": "user", "content": f"item {i}"}]}},
                    "served": served_text, "shadow": shadow_text} if bodies else None))
    with session(engine) as s:
        s.add_all(rows)
        s.commit()
