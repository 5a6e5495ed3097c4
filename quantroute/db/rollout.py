"""Observed state of rollouts: one `rollout` row per canary of a candidate (its status), an append-only
`rollout_event` per action, and `rollout_check` rows for checklist items a named person ticked.
The spec (steps, guards, percent) lives in the policy version; these tables say what happened."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Dialect, Index, UniqueConstraint, text, update
from sqlalchemy.types import TypeDecorator
from sqlmodel import AutoString, Field, Session, SQLModel, col, select

from quantroute.clock import aware, utcnow
from quantroute.db.engine import table_of
from quantroute.rollout_phase import Phase

# Phases of a rollout that still owns its model's canary (Phase minus the terminal ones).
LIVE_PHASES = ("gated", "awaiting-approval", "progressing", "paused", "rolling-back")
_LIVE = text(f"phase IN ({', '.join(repr(p) for p in LIVE_PHASES)})")


class PhaseColumn(TypeDecorator[Phase]):
    """A phase stored as its value in a plain string column (what the migrations made), read back as a Phase."""

    impl = AutoString
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else Phase(value).value

    def process_result_value(self, value: str | None, dialect: Dialect) -> Phase | None:
        return None if value is None else Phase(value)


class Rollout(SQLModel, table=True):
    """Status of one canary; written by the rollout service, read by the CLI and the dashboard."""

    __tablename__ = "rollout"
    # At most one live rollout per model, enforced by the database: concurrent starts can all pass the service's
    # read-then-decide check, and only this index makes every insert but one fail.
    __table_args__ = (Index("uq_rollout_live_model", "model", unique=True, sqlite_where=_LIVE,
                            postgresql_where=_LIVE),)
    id: int | None = Field(default=None, primary_key=True)
    model: str = Field(index=True)
    candidate: str = Field(index=True)
    baseline: str
    phase: Phase = Field(sa_type=PhaseColumn, index=True)
    step_index: int = -1
    percent: float = 0.0
    steps: list[float] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    started_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    step_at: datetime = Field(default_factory=utcnow)  # when the current percent took effect (dwell, windows)
    started_by: str
    approved_by: str | None = None
    eval_run_id: int | None = None  # the passing run that opened the gate
    start_version: int | None = None  # active policy version when it started
    policy_version: int | None = None  # the version that carries the current percent
    message: str = ""
    aborted_reason: str | None = None
    breach: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))  # guard verdict
    # [{percent, at, version}] so guards can find the window before the candidate took all traffic
    history: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    # The staircase load test must have met every limit at this concurrency (checklist); None: any step.
    target_concurrency: int | None = None
    # Bumped by every status write; a write names the revision it decided on (see `swap_rollout`).
    revision: int = 0
    # Consecutive breaching guard evaluations; the rollback comes at the canary's guards.failure_limit.
    breach_streak: int = 0
    # Desired vs observed: `policy_version` is the version that carries the desired percent; `observed_version`
    # is set only once that version was seen active (by the actor that activated it, or the controller's next
    # pass). Written outside the compare-and-swap (see `mark_observed`), so it never bumps `revision`.
    observed_version: int | None = None
    observed_at: datetime | None = None

    def fix_times(self) -> Rollout:
        self.started_at, self.updated_at = aware(self.started_at), aware(self.updated_at)
        self.step_at, self.observed_at = aware(self.step_at), aware(self.observed_at)
        return self

    @property
    def converged(self) -> bool:
        """The router-visible state is the desired one (nothing for a controller to finish)."""
        return self.policy_version is None or self.observed_version == self.policy_version


class RolloutEvent(SQLModel, table=True):
    """One row per action on a rollout, refused ones included (who tried what, and why it was refused)."""

    __tablename__ = "rollout_event"
    id: int | None = Field(default=None, primary_key=True)
    rollout_id: int = Field(foreign_key="rollout.id", index=True)
    at: datetime = Field(default_factory=utcnow, index=True)
    actor: str
    action: str
    phase_before: str | None = None
    phase_after: str | None = None
    percent_before: float | None = None
    percent_after: float | None = None
    version_before: int | None = None
    version_after: int | None = None
    refused: bool = False
    message: str = ""
    detail: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class RolloutCheck(SQLModel, table=True):
    """A checklist item ticked by a named person (items the system can know are computed, not stored)."""

    __tablename__ = "rollout_check"
    __table_args__ = (UniqueConstraint("rollout_id", "item", name="uq_rollout_check_item"),)
    id: int | None = Field(default=None, primary_key=True)
    rollout_id: int = Field(foreign_key="rollout.id", index=True)
    item: str
    ticked_by: str
    at: datetime = Field(default_factory=utcnow)
    note: str = ""


def create_rollout(*, session: Session, rollout: Rollout) -> Rollout:
    session.add(rollout)
    session.flush()
    return rollout


def get_rollout(*, session: Session, rollout_id: int) -> Rollout | None:
    row = session.get(Rollout, rollout_id, populate_existing=True)
    return row.fix_times() if row else None


def swap_rollout(*, session: Session, rollout: Rollout, revision: int) -> bool:
    """Compare-and-swap: write `rollout`'s status as revision `revision + 1`, only if the stored row is still
    at `revision`. False when another actor wrote it meanwhile (nothing is written; the caller re-reads).
    One UPDATE ... WHERE revision = :seen, so SQLite's writer lock and PostgreSQL's row lock decide the race."""
    values = rollout.model_dump(exclude={"id", "revision", "observed_version", "observed_at"})
    values["revision"] = revision + 1
    table = table_of(Rollout)
    result = session.exec(update(table).where(table.c.id == rollout.id, table.c.revision == revision)
                             .values(**values))
    if result.rowcount != 1:
        return False
    rollout.revision = revision + 1
    return True


def mark_observed(*, session: Session, rollout_id: int, version: int) -> bool:
    """Record that `version` was seen active, only while it is still the rollout's desired version (a later
    transition's own activation records itself). Idempotent; no revision bump, so no status write loses a race."""
    table = table_of(Rollout)
    result = session.exec(update(table).where(table.c.id == rollout_id, table.c.policy_version == version)
                             .values(observed_version=version, observed_at=utcnow()))
    return result.rowcount == 1


def unconverged(*, session: Session) -> list[Rollout]:
    """Rollouts whose desired version is not yet observed active, any phase (a promotion or rollback whose
    activation did not happen is unfinished work), and every live one."""
    q = select(Rollout).where((col(Rollout.phase).in_(LIVE_PHASES))
                              | ((col(Rollout.policy_version).is_not(None))
                                 & ((col(Rollout.observed_version).is_(None))
                                    | (col(Rollout.observed_version) != Rollout.policy_version))))
    return [r.fix_times() for r in session.exec(q.order_by(col(Rollout.id)))]


def current_rollout(*, session: Session, model: str) -> Rollout | None:
    """The newest rollout of `model` (live or finished)."""
    q = select(Rollout).where(Rollout.model == model).order_by(col(Rollout.id).desc()).limit(1)
    row = session.exec(q).first()
    return row.fix_times() if row else None


def list_rollouts(*, session: Session, model: str | None = None, limit: int = 50) -> list[Rollout]:
    q = select(Rollout)
    if model:
        q = q.where(Rollout.model == model)
    return [r.fix_times() for r in session.exec(q.order_by(col(Rollout.id).desc()).limit(limit))]


def add_event(*, session: Session, event: RolloutEvent) -> RolloutEvent:
    session.add(event)
    return event


def events_of(*, session: Session, rollout_id: int) -> list[RolloutEvent]:
    q = select(RolloutEvent).where(RolloutEvent.rollout_id == rollout_id).order_by(col(RolloutEvent.id))
    return list(session.exec(q))


def tick(*, session: Session, rollout_id: int, item: str, by: str, note: str = "") -> RolloutCheck:
    existing = session.exec(select(RolloutCheck).where(RolloutCheck.rollout_id == rollout_id,
                                                       RolloutCheck.item == item)).first()
    if existing is not None:
        return existing
    row = RolloutCheck(rollout_id=rollout_id, item=item, ticked_by=by, note=note)
    session.add(row)
    return row


def ticks_of(*, session: Session, rollout_id: int) -> dict[str, RolloutCheck]:
    rows = session.exec(select(RolloutCheck).where(RolloutCheck.rollout_id == rollout_id))
    return {r.item: r for r in rows}
