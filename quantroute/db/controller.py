"""The rollout controller's heartbeat: one row per controller process (leader or standby), rewritten every pass.
The Rollouts page and `quantroute controller status` read the leader's row to say whether anyone is watching."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlmodel import Field, Session, SQLModel, col, select

from quantroute.clock import utcnow


class ControllerHeartbeat(SQLModel, table=True):
    """Written by each controller process after every pass; read by the dashboard and the CLI."""

    __tablename__ = "controller_heartbeat"
    name: str = Field(primary_key=True)  # host:pid, unique per process
    role: str  # leader | standby
    started_at: datetime = Field(default_factory=utcnow)
    last_pass_at: datetime = Field(default_factory=utcnow)
    interval_s: float
    passes: int = 0
    last_error: str | None = None

    def age_s(self, now: datetime) -> float:
        at = self.last_pass_at if self.last_pass_at.tzinfo else self.last_pass_at.replace(tzinfo=UTC)
        return (now - at).total_seconds()


def beat(*, session: Session, name: str, role: str, interval_s: float, started_at: datetime,
         error: str | None = None) -> ControllerHeartbeat:
    row = session.get(ControllerHeartbeat, name)
    if row is None:
        row = ControllerHeartbeat(name=name, role=role, started_at=started_at, interval_s=interval_s)
    row.role, row.interval_s, row.last_error = role, interval_s, error
    row.last_pass_at, row.passes = utcnow(), row.passes + 1
    session.add(row)
    return row


def latest(*, session: Session, role: str | None = None) -> ControllerHeartbeat | None:
    """The most recent heartbeat (of a role): the leader's is what says whether rollouts are watched."""
    q = select(ControllerHeartbeat)
    if role:
        q = q.where(ControllerHeartbeat.role == role)
    return session.exec(q.order_by(col(ControllerHeartbeat.last_pass_at).desc()).limit(1)).first()
