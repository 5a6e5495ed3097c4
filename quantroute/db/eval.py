"""Observed state of paired evals: one `eval_run` per comparison (suite hash, both arms with their artifact
metadata, parameters, code version, statistics and gate verdict) and one `eval_result` per item and arm."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Text, UniqueConstraint, true
from sqlmodel import Field, Session, SQLModel, col, select

from quantroute.clock import utcnow

# Values of eval_run.source: answers from the fleet's registered deployments (resolved by the system), or from
# a URL a person typed (operators only; never opens a rollout's eval gate). See quantroute.evals.targets.
REGISTERED_SOURCE, FREE_URL_SOURCE = "registered", "url"


class EvalRun(SQLModel, table=True):
    """Written by the eval runner; read by `eval report`, the dashboard and canary guards (require_eval_pass)."""

    __tablename__ = "eval_run"
    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    finished_at: datetime | None = None
    status: str = Field(default="running", index=True)  # running | done | failed
    suite_name: str
    suite_path: str = ""
    suite_hash: str = Field(index=True)
    n_items: int = 0
    baseline_deployment: str = Field(index=True)
    candidate_deployment: str = Field(index=True)
    candidate_tier: str | None = Field(default=None, index=True)
    # url, tier, artifact
    baseline: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    candidate: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    # gate config, concurrency
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    code_version: str = ""
    # where the answers came from: "registered" (deployments of the fleet, resolved by the system) or "url"
    # (a free endpoint an operator typed); only registered runs can open a rollout's eval gate
    source: str = Field(default="url", index=True)
    started_by: str = ""
    gate_passed: bool | None = Field(default=None, index=True)
    report: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    verdict: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    results_path: str = ""
    error: str = ""


class EvalResult(SQLModel, table=True):
    """One item answered by one arm (baseline or candidate), graded."""

    __tablename__ = "eval_result"
    __table_args__ = (UniqueConstraint("run_id", "item_id", "arm", name="uq_eval_result_item_arm"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="eval_run.id", index=True)
    item_id: str
    category: str = Field(index=True)
    arm: str  # baseline | candidate
    grader: str = ""  # grader type; json_valid/json_schema results count towards JSON/tool validity
    deployment: str = ""  # as the endpoint reported it in `model`
    answer: str = Field(default="", sa_column=Column(Text, nullable=False))  # long answers: TEXT, not VARCHAR
    finish_reason: str | None = None
    passed: bool = False
    valid: bool = True
    needs_retry: bool = False
    detail: str = ""
    error: str = ""  # transport error after bounded retries (the item then counts as failed)
    attempts: int = 1
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def create_run(*, session: Session, run: EvalRun) -> EvalRun:
    session.add(run)
    session.commit()
    session.refresh(run)
    return run


def add_results(*, session: Session, results: list[EvalResult]) -> None:
    session.add_all(results)
    session.commit()


def finish_run(*, session: Session, run_id: int, status: str, gate_passed: bool | None = None,
               report: dict[str, Any] | None = None, verdict: dict[str, Any] | None = None,
               results_path: str = "", error: str = "") -> EvalRun:
    run = session.get(EvalRun, run_id)
    if run is None:
        raise LookupError(f"no eval run {run_id}")
    run.status, run.gate_passed, run.report, run.verdict = status, gate_passed, report, verdict
    run.results_path, run.error, run.finished_at = results_path or run.results_path, error, utcnow()
    session.add(run)
    session.commit()
    session.refresh(run)
    return run


def get_run(*, session: Session, run_id: int) -> EvalRun | None:
    return session.get(EvalRun, run_id)


def list_runs(*, session: Session, limit: int = 100, candidate_deployment: str | None = None) -> list[EvalRun]:
    q = select(EvalRun)
    if candidate_deployment:
        q = q.where(EvalRun.candidate_deployment == candidate_deployment)
    return list(session.exec(q.order_by(col(EvalRun.id).desc()).limit(limit)))


def results_of(*, session: Session, run_id: int) -> list[EvalResult]:
    return list(session.exec(select(EvalResult).where(EvalResult.run_id == run_id).order_by(col(EvalResult.id))))


def passing_runs_by_tier(*, session: Session, suite_hash: str, baseline_deployment: str) -> dict[str, int]:
    """For each candidate tier, the newest run on the same suite and baseline whose gate passed."""
    q = (select(EvalRun).where(EvalRun.suite_hash == suite_hash, EvalRun.baseline_deployment == baseline_deployment,
                               col(EvalRun.gate_passed) == true(), EvalRun.status == "done")
         .order_by(col(EvalRun.id).desc()))
    out: dict[str, int] = {}
    for run in session.exec(q):
        if run.candidate_tier and run.candidate_tier not in out and run.id is not None:
            out[run.candidate_tier] = run.id
    return out


def latest_passing_run(*, session: Session, candidate_deployment: str) -> EvalRun | None:
    """What canary guards ask: has this deployment passed the gate?"""
    q = (select(EvalRun).where(EvalRun.candidate_deployment == candidate_deployment,
                               col(EvalRun.gate_passed) == true())
         .order_by(col(EvalRun.id).desc()).limit(1))
    return session.exec(q).first()
