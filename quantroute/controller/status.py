"""What people are told about the controller (pure: the leader's heartbeat row and the clock in, one line out).
The Rollouts page and `quantroute rollout status/guards` show it: a canary nobody watches does not roll back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from quantroute.db.controller import ControllerHeartbeat

STALE_PASSES = 3  # a leader that missed this many passes is reported absent


@dataclass(frozen=True)
class Line:
    ok: bool
    text: str


def heartbeat_line(row: ControllerHeartbeat | None, now: datetime) -> Line:
    if row is None:
        return Line(False, "controller: none has run against this database - canaries are not watched: guards "
                           "do not roll back and steps do not advance on their own. Start `quantroute controller`.")
    age = max(0.0, row.age_s(now))
    where = f"leader {row.name}, every {row.interval_s:g} s"
    if age > max(STALE_PASSES * row.interval_s, row.interval_s + 10):
        return Line(False, f"controller: no pass for {_ago(age)} ({where}) - canaries are not watched: guards do "
                           "not roll back and steps do not advance on their own.")
    err = f"; last pass reported: {row.last_error}" if row.last_error else ""
    return Line(not row.last_error, f"controller: alive, last pass {_ago(age)} ago ({where}){err}")


def _ago(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"
