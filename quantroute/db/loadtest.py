"""Observed state of staircase load tests: one `loadtest_run` per staircase and one `loadtest_step` per step.
Written by `quantroute loadtest`; read by the dashboard and by the rollout checklist ("staircase load test run at
the target concurrency")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, true
from sqlmodel import Field, Session, SQLModel, col, select

from quantroute.clock import utcnow
from quantroute.db.engine import stored_id


class StepFigures(SQLModel):
    """The scalar figures of one step: the one description shared by the `loadtest_step` table and the load tester's
    `loadtest.stats.StepStats` (defined here, with the table, so the DB layer imports nothing above it)."""

    index: int
    concurrency: int | None = None
    rate: float | None = None
    window_s: float
    requests: int
    errors: int
    error_rate: float
    req_s: float
    output_tok_s: float
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p95_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p95_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p95_ms: float | None = None
    e2e_p99_ms: float | None = None
    breach: str | None = Field(default=None, description="Why the staircase stopped at this step, with figures")


class LoadTestRun(SQLModel, table=True):
    """One staircase: what was tested, with which limits, and where it stopped."""

    __tablename__ = "loadtest_run"
    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    finished_at: datetime | None = None
    url: str = Field(index=True)
    model: str
    deployment: str | None = Field(default=None, index=True)  # label, or the one deployment every response named
    source: str = ""  # traffic or prompts file
    mode: str = "concurrency"  # concurrency (closed loop) | rate (open loop)
    staircase: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    step_seconds: float
    warmup_seconds: float
    slo: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    stop_reason: str | None = None  # None: every step passed
    stopped_at: int | None = None  # index of the breaching step
    max_ok_concurrency: int | None = None  # highest step that met every limit (closed loop)
    max_ok_rate: float | None = None  # same for open loop
    max_ok_tok_s: float | None = None
    out_dir: str = ""


class LoadTestStep(StepFigures, table=True):
    """The figures of one step: StepFigures (shared with the load tester's StepStats) plus where it belongs."""

    __tablename__ = "loadtest_step"
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="loadtest_run.id", index=True)
    tiers: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    nodes: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    deployments: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    passed: bool


STEP_FIELDS = [c for c in LoadTestStep.model_fields if c not in ("id", "run_id", "passed")]


def save_result(*, session: Session, result, out_dir: str = "") -> LoadTestRun:
    """Store a `quantroute.loadtest.runner.LoadTestResult` (run and steps) in the caller's transaction."""
    cfg, best = result.config, result.best
    run = LoadTestRun(
        created_at=result.started_at, finished_at=result.finished_at, url=cfg.url, model=cfg.model,
        deployment=result.deployment, source=cfg.source, mode="rate" if cfg.rate else "concurrency",
        staircase=list(cfg.staircase), step_seconds=cfg.step_seconds, warmup_seconds=cfg.warmup_seconds,
        slo=cfg.slo.model_dump(), stop_reason=result.stop_reason, stopped_at=result.stopped_at,
        max_ok_concurrency=best.concurrency if best else None, max_ok_rate=best.rate if best else None,
        max_ok_tok_s=best.output_tok_s if best else None, out_dir=out_dir)
    session.add(run)
    session.flush()
    for s in result.steps:
        data = s.model_dump(include=set(STEP_FIELDS))
        session.add(LoadTestStep(run_id=stored_id(run), passed=s.breach is None, **data))
    return run


def list_runs(session: Session, *, url: str | None = None, deployment: str | None = None,
              model: str | None = None, limit: int = 50) -> list[LoadTestRun]:
    """Newest first, optionally filtered."""
    q = select(LoadTestRun)
    if url is not None:
        q = q.where(LoadTestRun.url == url)
    if deployment is not None:
        q = q.where(LoadTestRun.deployment == deployment)
    if model is not None:
        q = q.where(LoadTestRun.model == model)
    return list(session.exec(q.order_by(col(LoadTestRun.created_at).desc(), col(LoadTestRun.id).desc())
                             .limit(limit)))


def latest_run(session: Session, *, url: str | None = None, deployment: str | None = None,
               model: str | None = None) -> LoadTestRun | None:
    runs = list_runs(session, url=url, deployment=deployment, model=model, limit=1)
    return runs[0] if runs else None


def run_steps(session: Session, *, run_id: int) -> list[LoadTestStep]:
    q = select(LoadTestStep).where(LoadTestStep.run_id == run_id).order_by(col(LoadTestStep.index))
    return list(session.exec(q))


def passed_at_concurrency(session: Session, *, concurrency: int, deployment: str | None = None,
                          model: str | None = None, url: str | None = None) -> LoadTestRun | None:
    """The newest run with a step at `concurrency` or more that met every limit: the rollout checklist's
    "staircase load test run at the target concurrency". None when there is no such run."""
    q = (select(LoadTestRun).join(LoadTestStep, col(LoadTestStep.run_id) == col(LoadTestRun.id))
         .where(col(LoadTestStep.passed) == true(), col(LoadTestStep.concurrency) >= concurrency))
    if deployment is not None:
        q = q.where(LoadTestRun.deployment == deployment)
    if model is not None:
        q = q.where(LoadTestRun.model == model)
    if url is not None:
        q = q.where(LoadTestRun.url == url)
    return session.exec(q.order_by(col(LoadTestRun.created_at).desc(), col(LoadTestRun.id).desc()).limit(1)).first()
