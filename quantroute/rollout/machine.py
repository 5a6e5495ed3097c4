"""The rollout state machine (pure): given the current state and one action, the next state or a refusal.

Like Argo Rollouts, the spec (steps, guards) lives in the policy and the status (phase, step, percent) in
the database; this module only decides. Every action has one case; every refusal says why and what would be
allowed. A transition says whether it changes traffic, so the service knows when to write a policy version.

Phases: gated -> awaiting-approval -> progressing <-> paused -> promoted; any live phase (and promoted) ->
rolling-back -> rolled-back. A rollback is decided in one step but said in two: `rolling-back` is written with the
version that sends traffic back, and only `TrafficMoved` (once that version is active) makes it `rolled-back`,
so a crash between the status write and the activation leaves a rollout that says what is true, and the
controller's next pass completes it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from quantroute.rollout_phase import Phase as Phase  # re-exported: the rollout modules name it from here

LIVE = (Phase.gated, Phase.awaiting_approval, Phase.progressing, Phase.paused, Phase.rolling_back)
GuardStatus = Literal["pass", "breach", "inconclusive"]


@dataclass(frozen=True)
class State:
    """Status of one rollout. step_index -1: no step taken yet (percent 0)."""

    phase: Phase | None  # None: no rollout of this model yet (or only finished ones)
    steps: tuple[float, ...] = ()
    step_index: int = -1
    percent: float = 0.0
    started_by: str = ""

    @property
    def at_last_step(self) -> bool:
        return bool(self.steps) and self.step_index == len(self.steps) - 1


# ---- actions: one small type each ----------------------------------------------------------------------

@dataclass(frozen=True)
class Start:
    by: str
    candidate: str
    baseline: str
    steps: tuple[float, ...]
    missing_metadata: tuple[str, ...] = ()  # artifact fields the candidate lacks in the policy
    eval_failed: str | None = None  # the newest eval verdict of this pair, when it failed


@dataclass(frozen=True)
class EvalPassed:
    run_id: int


@dataclass(frozen=True)
class Approve:
    by: str
    open_items: tuple[str, ...] = ()  # required checklist items still open


@dataclass(frozen=True)
class Step:
    guards: GuardStatus
    why: str = ""  # the guard summary, quoted in a refusal


@dataclass(frozen=True)
class Pause:
    pass


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class Promote:
    guards: GuardStatus
    why: str = ""


@dataclass(frozen=True)
class Rollback:
    reason: str = ""


@dataclass(frozen=True)
class GuardBreach:
    summary: str
    count: int = 1  # consecutive breaching evaluations, this one included
    limit: int = 1  # the canary's guards.failure_limit


@dataclass(frozen=True)
class GuardInconclusive:
    summary: str


@dataclass(frozen=True)
class DwellElapsed:
    guards: GuardStatus
    why: str = ""


@dataclass(frozen=True)
class TrafficMoved:
    """The version that sends traffic back to the baseline is active (observed, not assumed)."""
    version: int


Action = (Start | EvalPassed | Approve | Step | Pause | Resume | Promote | Rollback | GuardBreach
          | GuardInconclusive | DwellElapsed | TrafficMoved)
ACTIONS: tuple[type, ...] = get_args(Action)


def action_name(action: Action | type) -> str:
    cls = action if isinstance(action, type) else type(action)
    return {"EvalPassed": "eval_passed", "GuardBreach": "guard_breach", "GuardInconclusive": "guard_inconclusive",
            "DwellElapsed": "dwell_elapsed", "TrafficMoved": "traffic_moved"}.get(cls.__name__, cls.__name__.lower())


@dataclass(frozen=True)
class Transition:
    state: State
    traffic: bool  # the candidate's share changed: write and activate a new policy version
    message: str
    aborted: str | None = None  # why a rollout ended in rolled-back

    @property
    def phase(self) -> Phase:
        """The phase it leads to: every action leads to one (only "no rollout yet" has none)."""
        if self.state.phase is None:
            raise ValueError("a transition always leads to a phase")
        return self.state.phase


@dataclass(frozen=True)
class Refusal:
    reason: str
    allowed: tuple[str, ...] = field(default=())  # actions valid in the current phase


Outcome = Transition | Refusal


def allowed_actions(phase: Phase | None) -> tuple[str, ...]:
    return {
        None: ("start",),
        Phase.gated: ("eval_passed", "rollback"),
        Phase.awaiting_approval: ("approve", "rollback"),
        Phase.progressing: ("step", "pause", "promote", "rollback", "guard_breach", "guard_inconclusive",
                            "dwell_elapsed"),
        Phase.paused: ("resume", "rollback", "guard_breach", "promote"),
        Phase.promoted: ("start", "rollback"),
        Phase.rolling_back: ("traffic_moved",),
        Phase.rolled_back: ("start",),
    }[phase]


def decide(state: State, action: Action) -> Outcome:
    """The single place that decides what an action does in a phase."""
    name = action_name(action)
    allowed = allowed_actions(state.phase)
    if name not in allowed:
        return Refusal(_not_now(state, name), allowed)
    handler = _HANDLERS[type(action)]
    return handler(state, action)


def _phase(state: State) -> str:
    return "no rollout" if state.phase is None else f"the rollout is {state.phase.value}"


def _not_now(state: State, name: str) -> str:
    hints = {
        "start": "finish it first (promote or roll back)",
        "eval_passed": "the eval gate is only checked while gated",
        "approve": ("it needs a passing eval run of the candidate vs the baseline first"
                    if state.phase == Phase.gated else "approval happens once, while awaiting-approval"),
        "step": ("it is paused; resume first" if state.phase == Phase.paused else
                 "steps start after a reviewer approves"),
        "pause": "only a progressing canary can be paused",
        "resume": "only a paused canary can be resumed",
        "promote": "promotion needs a progressing or paused canary at its last step",
        "rollback": ("it is already rolling back; the controller completes it once the baseline's version is "
                     "active" if state.phase == Phase.rolling_back else "nothing to roll back"),
        "traffic_moved": "only a rollback waits for its traffic to move",
        "guard_breach": "guards only watch a canary with traffic",
        "guard_inconclusive": "guards only hold a progressing canary",
        "dwell_elapsed": "auto-advance only moves a progressing canary",
    }
    return f"{name} refused: {_phase(state)}; {hints[name]}"


def _start(state: State, a: Start) -> Outcome:
    if not a.by.strip():
        return Refusal("start refused: who starts the rollout is required (an authenticated operator)")
    if a.candidate == a.baseline:
        return Refusal(f"start refused: candidate {a.candidate!r} reuses the baseline's deployment id; a quantized "
                       "artifact must be served under its own id")
    if a.missing_metadata:
        return Refusal(f"start refused: the policy's deployments.{a.candidate} lacks "
                       f"{', '.join(a.missing_metadata)}; record the artifact metadata in a new policy version first")
    if a.eval_failed:
        return Refusal(f"start refused: the newest eval run of {a.candidate} vs {a.baseline} failed its gate "
                       f"({a.eval_failed}); fix the artifact and run the eval again")
    if not a.steps:
        return Refusal("start refused: the canary spec has no steps")
    return Transition(State(Phase.gated, tuple(a.steps), -1, 0.0, a.by), False,
                      f"started by {a.by}; waiting for a passing eval run of {a.candidate} vs {a.baseline}")


def _eval_passed(state: State, a: EvalPassed) -> Outcome:
    return Transition(replace(state, phase=Phase.awaiting_approval), False,
                      f"eval gate passed (run {a.run_id}); waiting for a reviewer's approval")


def _approve(state: State, a: Approve) -> Outcome:
    if not a.by.strip():
        return Refusal("approve refused: who approves is required (an authenticated reviewer)")
    if a.by == state.started_by:
        return Refusal(f"approve refused: {a.by} started this rollout; a different reviewer must approve it")
    if a.open_items:
        return Refusal(f"approve refused: required checklist items are open: {', '.join(a.open_items)}")
    first = state.steps[0]
    return Transition(replace(state, phase=Phase.progressing, step_index=0, percent=first), True,
                      f"approved by {a.by}; candidate at {_pct(first)}")


def _advance(state: State, guards: GuardStatus, why: str, verb: str) -> Outcome:
    if state.at_last_step:
        return Refusal(f"{verb} refused: already at the last step ({_pct(state.percent)}); promote instead",
                       allowed_actions(state.phase))
    if guards != "pass":
        held = "held: guards are inconclusive" if guards == "inconclusive" else "guards are breached"
        return Refusal(f"{verb} refused at {_pct(state.percent)}: {held}" + (f" ({why})" if why else ""))
    i = state.step_index + 1
    nxt = state.steps[i]
    return Transition(replace(state, step_index=i, percent=nxt), True,
                      f"{'auto-advanced' if verb == 'dwell_elapsed' else 'stepped'} to {_pct(nxt)} "
                      f"(step {i + 1} of {len(state.steps)})")


def _step(state: State, a: Step) -> Outcome:
    return _advance(state, a.guards, a.why, "step")


def _dwell(state: State, a: DwellElapsed) -> Outcome:
    return _advance(state, a.guards, a.why, "dwell_elapsed")


def _pause(state: State, a: Pause) -> Outcome:
    return Transition(replace(state, phase=Phase.paused), False, f"paused at {_pct(state.percent)}")


def _resume(state: State, a: Resume) -> Outcome:
    return Transition(replace(state, phase=Phase.progressing), False, f"resumed at {_pct(state.percent)}")


def _promote(state: State, a: Promote) -> Outcome:
    if not state.at_last_step:
        rest = ", ".join(_pct(s) for s in state.steps[state.step_index + 1:])
        return Refusal(f"promote refused: at {_pct(state.percent)}; step through {rest} first")
    if a.guards != "pass":
        held = "guards are inconclusive" if a.guards == "inconclusive" else "guards are breached"
        return Refusal(f"promote refused: {held}" + (f" ({a.why})" if a.why else ""))
    return Transition(replace(state, phase=Phase.promoted, percent=100.0), True,
                      "promoted: the candidate now serves 100% and is the baseline of its tier")


def _rollback(state: State, a: Rollback) -> Outcome:
    reason = a.reason or "manual rollback"
    return Transition(replace(state, phase=Phase.rolling_back, percent=0.0), True,
                      f"rolling back from {_pct(state.percent)}: {reason}", aborted=reason)


def _traffic_moved(state: State, a: TrafficMoved) -> Outcome:
    return Transition(replace(state, phase=Phase.rolled_back), False,
                      f"rolled back: policy version {a.version} is active, new sessions go to the baseline")


def _breach(state: State, a: GuardBreach) -> Outcome:
    if a.count < a.limit:
        return Transition(state, False, f"guard breach {a.count} of {a.limit} at {_pct(state.percent)}, holding "
                                        f"the step (rollback at {a.limit}): {a.summary}")
    return Transition(replace(state, phase=Phase.rolling_back, percent=0.0), True,
                      f"guard breach at {_pct(state.percent)}, rolling back automatically: {a.summary}",
                      aborted=f"guard breach: {a.summary}")


def _inconclusive(state: State, a: GuardInconclusive) -> Outcome:
    return Transition(state, False, f"held at {_pct(state.percent)}: {a.summary}")


_HANDLERS: dict[type, Callable[[State, Any], Outcome]] = {
    Start: _start, EvalPassed: _eval_passed, Approve: _approve, Step: _step, Pause: _pause, Resume: _resume,
    Promote: _promote, Rollback: _rollback, GuardBreach: _breach, GuardInconclusive: _inconclusive,
    DwellElapsed: _dwell, TrafficMoved: _traffic_moved,
}


def _pct(x: float) -> str:
    return f"{x:g}%"
