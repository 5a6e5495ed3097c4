"""Why a rollout action did not happen: refused by the state machine or a precondition, or lost to another
actor who moved the rollout first."""

from __future__ import annotations


class RolloutRefused(Exception):
    """An action the state machine (or a precondition) refused; the message says why and what is allowed."""

    def __init__(self, reason: str, allowed: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.reason, self.allowed = reason, allowed


class RolloutConflict(RolloutRefused):
    """Another actor moved the rollout between this action's read and its write; nothing was done."""
