"""What a rollout event says to the outside (pure): which events notify, and the JSON body a webhook receives.

The body is what Slack-compatible incoming webhooks accept (`text`, a one-line summary a person reads in a
channel) plus structured fields for generic receivers (`event`, `model`, `rollout_id`, phase and percent before
and after, policy versions, who acted, and the guard figures that caused it)."""

from __future__ import annotations

from typing import Any

from quantroute.rollout.judge import Judgement

# rollout event action -> notification kinds, in the order they are sent
KINDS: dict[str, tuple[str, ...]] = {
    "eval_passed": ("gate_passed", "awaiting_approval"),
    "approve": ("step",),
    "step": ("step",),
    "dwell_elapsed": ("step",),
    "guard_breach": ("breach",),
    "guard_inconclusive": ("held",),
    "rollback": ("rollback",),
    "traffic_moved": ("rolled_back",),
    "promote": ("promotion",),
    "reconcile": ("reconcile",),
}

TITLES = {"gate_passed": "eval gate passed", "awaiting_approval": "awaiting a reviewer's approval",
          "step": "canary step", "breach": "guard breach", "held": "step held", "rollback": "rolling back",
          "rolled_back": "rolled back", "promotion": "promoted", "reconcile": "controller reconciled"}


def kinds_for(action: str, phase_after: str | None) -> tuple[str, ...]:
    """A breach that reaches the failure limit is a rollback (the held ones are breaches)."""
    if action == "guard_breach" and phase_after == "rolling-back":
        return ("breach", "rollback")
    return KINDS.get(action, ())


def payload(kind: str, *, model: str, rollout_id: int | None, candidate: str, baseline: str, actor: str,
            action: str, at: str, message: str, phase_before: str | None, phase_after: str | None,
            percent_before: float | None, percent_after: float | None, version_before: int | None,
            version_after: int | None, detail: dict[str, Any]) -> dict[str, Any]:
    figures = _figures(detail.get("verdict"))
    text = f"[quantroute] {model}: {TITLES[kind]} - {candidate} vs {baseline}: {message} (by {actor})"
    return {"text": text, "event": kind, "action": action, "model": model, "rollout_id": rollout_id,
            "candidate": candidate, "baseline": baseline, "actor": actor, "at": at,
            "phase_before": phase_before, "phase": phase_after, "percent_before": percent_before,
            "percent": percent_after, "version_before": version_before, "version_after": version_after,
            "message": message, "figures": figures}


def _figures(verdict: dict[str, Any] | None) -> dict[str, Any] | None:
    """The guard figures behind an action: status, each breached guard with value and limit, per-arm stats, and
    with the statistical judge each metric's effect, interval and verdict and the sample the step still needs."""
    if not verdict:
        return None
    out = {"status": verdict.get("status"),
           "breaches": [{k: b.get(k) for k in ("guard", "value", "limit", "detail")}
                        for b in verdict.get("breaches") or []],
           "candidate": verdict.get("candidate"), "baseline": verdict.get("baseline"),
           "window": verdict.get("window")}
    j = verdict.get("judgement")
    if j:
        out["judge"] = {"verdict": j.get("verdict"), "score": j.get("score"), "confidence": j.get("confidence"),
                        "needed_more": j.get("needed_more"), "minutes_more": j.get("minutes_more"),
                        "needs": needs_text(j),
                        "metrics": [{k: m.get(k) for k in ("metric", "verdict", "critical", "unit", "allowed",
                                                           "estimate", "low", "high", "n_candidate", "n_baseline",
                                                           "needed")} for m in j.get("metrics") or []]}
    return out


def needs_text(j: dict[str, Any]) -> str:
    """The judge's 'needs ~N more candidate requests (~M min at current traffic)' from its JSON form."""
    return Judgement.model_validate(j).needs
