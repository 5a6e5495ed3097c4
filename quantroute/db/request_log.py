"""One row per routed request. Written in batches by the router; read by the dashboard and rollout guards."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index
from sqlmodel import Field, SQLModel


class RequestLog(SQLModel, table=True):
    """What the router did with one request and how it went."""

    __tablename__ = "request_log"
    __table_args__ = (Index("ix_request_log_model_ts", "model", "ts"),)
    id: int | None = Field(default=None, primary_key=True)
    ts: datetime = Field(index=True)  # when the request arrived
    request_id: str = ""
    session_key: str | None = Field(default=None, index=True)
    model: str  # logical model the client asked for
    deployment: str | None = Field(default=None, index=True)
    node: str | None = None
    tier: str | None = Field(default=None, index=True)
    arm: str | None = None  # baseline | candidate, when a canary ran
    policy_version: int | None = None
    rules: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    score: float | None = None
    status: int
    stream: bool = False
    latency_ms: float
    ttft_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    retries: int = 0
    escalated: bool = False
    error: str | None = None
    # parsed body + x- headers, for the dashboard's what-if replay (column added by migration 0501, users branch)
    replay: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
