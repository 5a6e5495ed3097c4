"""One row per shadow pair: a sampled greedy request, the deployment that served the client and the one
its shadow went to, how the shadow went, and how the two answers compared. Written in batches by the router
(`router.path.shadow`), never into request_log: shadow load stays out of every user-traffic figure (request stats,
rollups, canary guards' arm windows, capacity). Read by `quantroute shadow report`, the dashboard's Live agreement
tab and the `min_live_agreement` rollout guard. Retention follows the request log's."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import JSON, Column, Index
from sqlalchemy.engine import Engine
from sqlmodel import Field, SQLModel

from quantroute.clock import aware
from quantroute.db.engine import count_rows_before, delete_rows_before, table_of

# Columns the router's writer inserts (everything but the id), in table order.
COLUMNS = ("ts", "request_id", "model", "policy_version", "rules", "arm", "kind", "stream", "served_tier",
           "served_deployment", "served_node", "shadow_tier", "shadow_deployment", "shadow_node", "shadow_status",
           "shadow_latency_ms", "shadow_error", "served_tokens", "shadow_tokens", "compared", "exact", "normalized",
           "diverge_char", "diverge_token", "token_exact", "length_ratio", "json_like", "json_valid_served",
           "json_valid_shadow", "json_equal", "math_like", "number_served", "number_shadow", "numeric_agree",
           "agree", "bodies")


class ShadowPair(SQLModel, table=True):
    """A served answer and its shadow, compared (comparison columns are NULL when the shadow failed)."""

    __tablename__ = "shadow_pair"
    __table_args__ = (Index("ix_shadow_pair_model_ts", "model", "ts"),)
    id: int | None = Field(default=None, primary_key=True)
    ts: datetime = Field(index=True)  # when the client's request arrived
    request_id: str = ""
    model: str
    policy_version: int | None = None
    rules: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    arm: str | None = None  # the served request's canary arm (baseline | candidate), None without a canary
    kind: str = "tier"  # tier (served tier vs a configured shadow tier) | canary (one arm vs the other)
    stream: bool = False
    served_tier: str
    served_deployment: str
    served_node: str | None = None
    shadow_tier: str
    shadow_deployment: str
    shadow_node: str | None = None
    shadow_status: int = 0  # the shadow's HTTP status; 0: no response (timeout, connection failure)
    shadow_latency_ms: float | None = None
    shadow_error: str | None = None
    served_tokens: int | None = None
    shadow_tokens: int | None = None
    compared: bool = False  # both answers were read; the columns below are set only then
    exact: bool | None = None
    normalized: bool | None = None
    diverge_char: int | None = None
    diverge_token: int | None = None
    token_exact: bool | None = None
    length_ratio: float | None = None
    json_like: bool | None = None
    json_valid_served: bool | None = None
    json_valid_shadow: bool | None = None
    json_equal: bool | None = None
    math_like: bool | None = None
    number_served: float | None = None
    number_shadow: float | None = None
    numeric_agree: bool | None = None
    agree: bool | None = Field(default=None, index=True)
    # {"request": the body as prompt storage keeps it, "served": text, "shadow": text}; None with storage "none"
    bodies: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))


def _table() -> sa.Table:
    return table_of(ShadowPair)


def prune_before(engine: Engine, before: datetime, *, batch: int = 10_000) -> int:
    """Delete pairs older than `before`, `batch` rows per transaction (as the request log's retention)."""
    return delete_rows_before(engine, _table(), before, batch=batch)


def count_before(engine: Engine, before: datetime) -> int:
    return count_rows_before(engine, _table(), before)


ANALYSIS_COLUMNS = ("id", "ts", "request_id", "model", "policy_version", "rules", "arm", "kind", "served_tier",
                    "served_deployment", "shadow_tier", "shadow_deployment", "shadow_status", "shadow_latency_ms",
                    "compared", "exact", "normalized", "diverge_char", "diverge_token", "length_ratio",
                    "json_like", "json_equal", "math_like", "numeric_agree", "agree")


def pairs_since(engine: Engine, *, since: datetime, until: datetime | None = None, model: str | None = None,
                limit: int = 200_000) -> list[dict[str, Any]]:
    """Pairs (without bodies) from `since`, newest first, as plain dicts for the pure analysis."""
    t = _table()
    q = sa.select(*[t.c[c] for c in ANALYSIS_COLUMNS]).where(t.c.ts >= aware(since))
    if until is not None:
        q = q.where(t.c.ts <= aware(until))
    if model is not None:
        q = q.where(t.c.model == model)
    with engine.connect() as conn:
        rows = conn.execute(q.order_by(t.c.id.desc()).limit(limit)).mappings().all()
    return [{**r, "ts": aware(r["ts"])} for r in rows]


def disagreeing(engine: Engine, *, since: datetime, rule: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Compared pairs that disagree, newest first, with their bodies (when the router kept them)."""
    t = _table()
    q = (sa.select(t).where(t.c.ts >= aware(since), t.c.compared.is_(True), t.c.agree.is_(False))
         .order_by(t.c.id.desc()).limit(limit if rule is None else limit * 20))
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(q).mappings().all()]
    if rule is not None:  # rules is a JSON list: filtered here, the same on SQLite and PostgreSQL
        rows = [r for r in rows if rule in (r["rules"] or [])][:limit]
    return rows


def arm_agreement(engine: Engine, *, model: str, deployment: str, arm: str, reference_tier: str, start: datetime,
                  end: datetime) -> tuple[int, int]:
    """(pairs, agreeing pairs) of requests the router's hash put in `arm` and `deployment` served, shadowed to the
    reference tier, compared, in [start, end]: what the `min_live_agreement` guard judges."""
    t = _table()
    q = (sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(sa.case((t.c.agree.is_(True), 1), else_=0)), 0))
         .where(t.c.model == model, t.c.served_deployment == deployment, t.c.arm == arm,
                t.c.shadow_tier == reference_tier, t.c.compared.is_(True),
                t.c.ts >= aware(start), t.c.ts <= aware(end)))
    with engine.connect() as conn:
        n, k = conn.execute(q).one()
    return int(n), int(k)
