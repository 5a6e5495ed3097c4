"""The state machine's full table: every phase x action is allowed (with its effect) or refused with a reason."""

from __future__ import annotations

import pytest

from quantroute.rollout import machine as m
from quantroute.rollout.machine import Phase, Refusal, State, Transition, decide

STEPS = (1.0, 5.0, 25.0, 100.0)


def state(phase: Phase | None, i: int = -1) -> State:
    return State(phase, STEPS if phase else (), i, STEPS[i] if i >= 0 else 0.0, "alice")


SAMPLE: dict[type, m.Action] = {
    m.Start: m.Start(by="alice", candidate="c", baseline="b", steps=STEPS),
    m.EvalPassed: m.EvalPassed(run_id=7),
    m.Approve: m.Approve(by="bob"),
    m.Step: m.Step(guards="pass"),
    m.Pause: m.Pause(),
    m.Resume: m.Resume(),
    m.Promote: m.Promote(guards="pass"),
    m.Rollback: m.Rollback(reason="why not"),
    m.GuardBreach: m.GuardBreach(summary="error_rate: 9%"),
    m.GuardInconclusive: m.GuardInconclusive(summary="3/50"),
    m.DwellElapsed: m.DwellElapsed(guards="pass"),
    m.TrafficMoved: m.TrafficMoved(version=4),
}

# (phase, step index) -> {action: expected phase after, or None for a refusal}
P, G, A, PR, PA, PM, RG, RB = None, Phase.gated, Phase.awaiting_approval, Phase.progressing, Phase.paused, \
    Phase.promoted, Phase.rolling_back, Phase.rolled_back
TABLE: dict[tuple[Phase | None, int], dict[type, Phase | None]] = {
    (P, -1): {m.Start: G},
    (G, -1): {m.EvalPassed: A, m.Rollback: RG},
    (A, -1): {m.Approve: PR, m.Rollback: RG},
    (PR, 1): {m.Step: PR, m.Pause: PA, m.Rollback: RG, m.GuardBreach: RG, m.GuardInconclusive: PR,
              m.DwellElapsed: PR},  # promote refused: not at the last step
    (PR, 3): {m.Pause: PA, m.Promote: PM, m.Rollback: RG, m.GuardBreach: RG, m.GuardInconclusive: PR},
    (PA, 1): {m.Resume: PR, m.Rollback: RG, m.GuardBreach: RG},
    (PA, 3): {m.Resume: PR, m.Rollback: RG, m.GuardBreach: RG, m.Promote: PM},
    (PM, 3): {m.Start: G, m.Rollback: RG},
    (RG, -1): {m.TrafficMoved: RB},  # a second rollback is refused: it is under way
    (RB, -1): {m.Start: G},
}
CASES = [(ph, i, cls) for (ph, i) in TABLE for cls in m.ACTIONS]


@pytest.mark.parametrize("phase,index,cls", CASES,
                         ids=[f"{ph.value if ph else 'none'}@{i}-{m.action_name(c)}" for ph, i, c in CASES])
def test_every_phase_and_action(phase, index, cls):
    expected = TABLE[(phase, index)].get(cls)
    out = decide(state(phase, index), SAMPLE[cls])
    if expected is None:
        assert isinstance(out, Refusal), out
        assert "refused" in out.reason and len(out.reason) > 20
    else:
        assert isinstance(out, Transition), out
        assert out.state.phase == expected
        assert out.message


def test_traffic_changes_only_when_percent_changes():
    a = decide(state(A), m.Approve(by="bob"))
    assert a.traffic and a.state.percent == 1.0 and a.state.step_index == 0
    s = decide(state(PR, 1), m.Step(guards="pass"))
    assert s.traffic and s.state.percent == 25.0
    assert not decide(state(PR, 1), m.Pause()).traffic
    assert not decide(state(PR, 1), m.GuardInconclusive(summary="x")).traffic
    rb = decide(state(PA, 2), m.Rollback(reason="bad answers"))
    assert rb.traffic and rb.state.percent == 0 and rb.aborted == "bad answers"
    br = decide(state(PR, 1), m.GuardBreach(summary="error_rate: 9% > 2%"))
    assert br.state.percent == 0 and "error_rate" in br.aborted


def test_approval_by_the_starter_is_refused():
    out = decide(state(A), m.Approve(by="alice"))
    assert isinstance(out, Refusal) and "alice started this rollout" in out.reason


def test_approval_refused_while_checklist_items_are_open():
    out = decide(state(A), m.Approve(by="bob", open_items=("license verified", "staircase load test")))
    assert isinstance(out, Refusal) and "license verified" in out.reason


@pytest.mark.parametrize("guards", ["inconclusive", "breach"])
def test_step_and_dwell_and_promote_held_unless_guards_pass(guards):
    for action in (m.Step(guards=guards, why="3/50"), m.DwellElapsed(guards=guards)):
        out = decide(state(PR, 1), action)
        assert isinstance(out, Refusal) and guards[:6] in out.reason
    out = decide(state(PR, 3), m.Promote(guards=guards))
    assert isinstance(out, Refusal)


def test_no_step_past_the_last():
    out = decide(state(PR, 3), m.Step(guards="pass"))
    assert isinstance(out, Refusal) and "promote instead" in out.reason


def test_promote_names_the_remaining_steps():
    out = decide(state(PR, 1), m.Promote(guards="pass"))
    assert isinstance(out, Refusal) and "25%, 100%" in out.reason


@pytest.mark.parametrize("start,needle", [
    (m.Start(by="alice", candidate="b", baseline="b", steps=STEPS), "reuses the baseline"),
    (m.Start(by="alice", candidate="c", baseline="b", steps=STEPS, missing_metadata=("checksum",)), "checksum"),
    (m.Start(by="alice", candidate="c", baseline="b", steps=STEPS, eval_failed="FAIL: math -8 pts"), "math -8"),
    (m.Start(by=" ", candidate="c", baseline="b", steps=STEPS), "who starts the rollout"),
])
def test_start_refusals(start, needle):
    out = decide(state(None), start)
    assert isinstance(out, Refusal) and needle in out.reason


def test_refusals_list_what_is_allowed():
    out = decide(state(G), m.Approve(by="bob"))
    assert isinstance(out, Refusal) and out.allowed == ("eval_passed", "rollback")
    assert "passing eval run" in out.reason


@pytest.mark.parametrize("phase", [PR, PA])
def test_a_breach_below_the_failure_limit_holds_and_at_it_rolls_back(phase):
    held = decide(state(phase, 1), m.GuardBreach(summary="error_rate: 9% > 2%", count=1, limit=2))
    assert isinstance(held, Transition) and held.state == state(phase, 1) and not held.traffic
    assert held.aborted is None and "guard breach 1 of 2 at 5%, holding the step" in held.message
    rb = decide(state(phase, 1), m.GuardBreach(summary="error_rate: 9% > 2%", count=2, limit=2))
    assert rb.state.phase == RG and rb.traffic and rb.aborted == "guard breach: error_rate: 9% > 2%"


def test_a_rollback_is_said_done_only_when_its_traffic_moved():
    """Rolling back is two transitions: the decision (traffic changes, phase rolling-back, still live) and the
    observation that the version sending traffic back is active (rolling-back -> rolled-back, no traffic)."""
    rb = decide(state(PR, 1), m.Rollback(reason="bad"))
    assert rb.state.phase == RG and rb.traffic and not rb.state.phase.terminal and "rolling back" in rb.message
    again = decide(rb.state, m.Rollback(reason="again"))
    assert isinstance(again, Refusal) and "already rolling back" in again.reason
    done = decide(rb.state, m.TrafficMoved(version=7))
    assert done.state.phase == RB and not done.traffic and "version 7 is active" in done.message
