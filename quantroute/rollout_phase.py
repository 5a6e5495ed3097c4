"""The phases of a rollout: what the state machine (`quantroute.rollout.machine`) decides and the `rollout` table
stores, so both name one enum."""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """A StrEnum, so a phase read from the database formats as the value it was stored as (in messages, logs)."""

    gated = "gated"  # waiting for a passing eval run of the candidate vs the baseline
    awaiting_approval = "awaiting-approval"
    progressing = "progressing"
    paused = "paused"
    promoted = "promoted"
    rolling_back = "rolling-back"  # decided; the version sending traffic back is not confirmed active yet
    rolled_back = "rolled-back"

    @property
    def terminal(self) -> bool:
        return self in (Phase.promoted, Phase.rolled_back)
