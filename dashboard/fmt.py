"""Human forms of values for the pages (pure, no Streamlit): timestamps to the second, percentages, versions,
tiers in fidelity order, and the one-sentence outcomes of rollout actions."""

from __future__ import annotations

from typing import Any

import pandas as pd

from quantroute.tiers import TIER_ORDER

TIERS = [t.value for t in TIER_ORDER]  # fidelity order: fp16 > fp8 > int8 > int4
DASH = "–"


def when(value: Any) -> str:
    """A timestamp as "2026-11-30 09:47:05 UTC" (no microseconds, no ISO "T"); blank when missing."""
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NaT or value == "":
        return ""
    ts = pd.Timestamp(value)
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return ts.strftime("%Y-%m-%d %H:%M:%S UTC")


def whens(df: pd.DataFrame, *cols: str) -> pd.DataFrame:
    """The same frame with `cols` as human timestamps (columns absent are skipped)."""
    out = df.copy()
    for c in cols:
        if c in out.columns:
            out[c] = out[c].map(when)
    return out


def pct(x: float | None) -> str:
    """A share in percent ("0 %", "2.5 %", "100 %"): as many decimals as the value has, at most two."""
    return DASH if x is None else f"{round(float(x), 2):g} %"


def version(v: Any) -> str:
    return DASH if v is None or (isinstance(v, float) and pd.isna(v)) else f"v{int(v)}"


def change(before: str, after: str) -> str:
    """"a → b", or just "a" when nothing changed, or "–" when neither is known."""
    if before == after:
        return before
    return f"{before} → {after}"


def tier_rank(tier: Any) -> int:
    return TIERS.index(tier) if tier in TIERS else len(TIERS)


def by_fidelity(df: pd.DataFrame, col: str = "tier", *then: str) -> pd.DataFrame:
    """Rows in tier fidelity order (fp16 first), unknown tiers last; `then` breaks ties."""
    if df.empty:
        return df
    keyed = df.assign(_rank=df[col].map(tier_rank))
    return keyed.sort_values(["_rank", *then], kind="stable").drop(columns="_rank").reset_index(drop=True)


# ---- rollouts --------------------------------------------------------------------------------------------

def step_text(st_: Any) -> str:
    """Where a rollout stands in its steps; a finished one says how it ended instead of a step number."""
    n = len(st_.steps)
    if st_.phase == "rolled-back":
        return "rolled back"
    if st_.phase == "rolling-back":
        return "rolling back"
    if st_.phase == "promoted":
        return "promoted"
    if st_.phase in ("gated", "awaiting-approval"):
        return f"not started (0 of {n})"
    return f"{st_.step_index + 1} of {n}"


def _share(st_: Any) -> str:
    return f"{st_.candidate} now gets {pct(st_.percent)} of new {st_.model} sessions at its tier"


def rollout_done(action: str, st_: Any, by: str, *, items: list[str] | None = None) -> str:
    """One sentence for a rollout action that succeeded, with the figures that matter (share, step, version)."""
    v = f"policy version {st_.policy_version}" if st_.policy_version else "no new policy version"
    if action == "start":
        if st_.phase == "awaiting-approval":
            return (f"Rollout of {st_.candidate} started by {by}; its eval gate passed, so a reviewer other than "
                    f"{st_.started_by} can now approve it.")
        return (f"Rollout of {st_.candidate} started by {by}; it waits for a passing eval run of the candidate "
                "on its pinned suite before a reviewer can approve it.")
    if action == "check_gate":
        return (f"Eval gate of {st_.candidate} checked: {st_.phase}" + (
            f"; a reviewer other than {st_.started_by} can approve it." if st_.phase == "awaiting-approval"
            else "."))
    if action == "approve":
        return f"Rollout approved by {by}: {_share(st_)} (step {step_text(st_)}, {v})."
    if action == "step":
        return f"Stepped by {by}: {_share(st_)} (step {step_text(st_)}, {v})."
    if action == "pause":
        return f"Rollout of {st_.candidate} paused by {by} at {pct(st_.percent)}; it takes no step until resumed."
    if action == "resume":
        return f"Rollout of {st_.candidate} resumed by {by} at {pct(st_.percent)} (step {step_text(st_)})."
    if action == "promote":
        return f"{st_.candidate} promoted by {by}: it now serves all new {st_.model} sessions at its tier ({v})."
    if action == "rollback" and st_.phase == "rolling-back":
        return (f"Rollback of {st_.candidate} decided by {by}: all {st_.model} traffic at its tier returns to "
                f"{st_.baseline} once {v} is active; the controller confirms it.")
    if action == "rollback":
        return (f"Rollout of {st_.candidate} rolled back by {by}: all {st_.model} traffic at its tier returns to "
                f"{st_.baseline} ({v}).")
    if action == "tick":
        done = sum(i.done for i in st_.checklist)
        return (f"{by} ticked {len(items or [])} checklist item(s); {done} of {len(st_.checklist)} are done.")
    return f"Rollout {action} done by {by}."
