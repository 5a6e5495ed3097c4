"""A rollout's status as the CLI and the dashboard show it (one model: the service builds it, pages render it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from quantroute.rollout import checklist as cl
from quantroute.rollout.guards import GuardVerdict


class RolloutStatus(BaseModel):
    """Everything a person needs to judge a rollout: status, gate, checklist, guards and the event trail."""

    id: int
    model: str
    candidate: str
    baseline: str
    phase: str
    steps: list[float]
    step_index: int
    percent: float
    started_at: datetime
    updated_at: datetime
    started_by: str
    approved_by: str | None
    target_concurrency: int | None = None  # for the staircase checklist item; None: any concurrency
    policy_version: int | None
    message: str
    aborted_reason: str | None
    breach: dict[str, Any] | None
    gate: str
    checklist: list[cl.ItemView]
    guards: GuardVerdict | None
    events: list[dict[str, Any]]
