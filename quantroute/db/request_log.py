"""One row per routed request. Written in batches by the router; read by the dashboard and rollout guards."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index
from sqlalchemy.engine import Engine
from sqlmodel import Field, SQLModel

from quantroute.db.engine import count_rows_before, delete_rows_before, table_of

# Values of request_log.arm and session_pin.arm (the router writes them, quantroute.router.path.canary): canary guards
# count only the first two, the arms the router's hash chose; "direct" marks a request that named its deployment
# itself.
BASELINE_ARM, CANDIDATE_ARM, DIRECT_ARM = "baseline", "candidate", "direct"


class RequestLog(SQLModel, table=True):
    """What the router did with one request and how it went."""

    __tablename__ = "request_log"
    __table_args__ = (Index("ix_request_log_model_ts", "model", "ts"),)
    id: int | None = Field(default=None, primary_key=True)
    ts: datetime = Field(index=True)  # when the request arrived
    request_id: str = ""
    session_key: str | None = None
    # The created_at of the session's pin in force when the request was answered (0960_log_pin_created): which
    # pin, with session_key. Indexed in place of session_key: a first turn's pin is new, so its row appends to
    # the index, where a random session key put it on a random leaf.
    pin_created_at: datetime | None = Field(default=None, index=True)
    model: str  # logical model the client asked for
    deployment: str | None = Field(default=None, index=True)
    node: str | None = None
    tier: str | None = Field(default=None, index=True)
    arm: str | None = None  # baseline | candidate (hash-assigned, when a canary ran) | direct (deployment named)
    policy_version: int | None = None
    rules: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    score: float | None = None
    status: int  # what the client got; a stream cut after its 200 headers (ended by an error event) is a 502
    stream: bool = False
    latency_ms: float
    ttft_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    retries: int = 0
    escalated: bool = False
    # node affinity (0950_node_affinity): kept (the session's last node served it), or fallback_<why> (gone, failed,
    # unhealthy, busy: select.sticky_node) when the least-loaded node of the tier did; None when affinity is off
    # or the turn was a first
    affinity: str | None = None
    # why not the cheapest tier the policy allows (0980_log_route_reason): "spilled up: int4 at its knee",
    # "escalated: int4 full" (router.path.spill); None when it ran there, or a pin chose the tier
    reason: str | None = None
    error: str | None = None
    tenant: str | None = None  # the tenant of the client key the request came with (router client_auth)
    # parsed body + x- headers, for the dashboard's what-if replay (column added by migration 0501, users branch)
    replay: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))


def count_before(engine: Engine, before: datetime) -> int:
    return count_rows_before(engine, table_of(RequestLog), before)


def prune_before(engine: Engine, before: datetime, *, batch: int = 10_000) -> int:
    """Delete request_log rows that arrived before `before`, `batch` rows per transaction, so the router's
    writer (and SQLite's single writer lock) waits at most one short batch. The per-minute rollup keeps
    their counts: prune it separately (request_stats.prune_before). Returns the number of rows deleted."""
    return delete_rows_before(engine, table_of(RequestLog), before, batch=batch)
