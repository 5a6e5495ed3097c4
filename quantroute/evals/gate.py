"""The eval gate (pure): does the candidate deployment do the job as well as the baseline?

Fails when the overall pass rate drops more than `threshold`, when a category drops more than its threshold,
or when JSON/tool-call validity drops. A suite is finite: in a 20-item category one item is 5 points, so no
check fails on a net difference of fewer than `min_items` items (default 2); such drops are reported as notes,
never hidden. A failing verdict names the next-higher precision tier to try (seed 004: "if it regresses,
infra picks the next-higher precision tier") and whether a passing run for it exists."""

from __future__ import annotations

from pydantic import BaseModel, Field

from quantroute.evals.stats import Comparison, Report
from quantroute.tiers import TIER_ORDER, Tier


class GateConfig(BaseModel):
    threshold: float = Field(default=0.02, ge=0, le=1)  # largest allowed overall drop (fraction: 0.02 = 2 points)
    category_thresholds: dict[str, float] = Field(default_factory=dict)  # per category; default: `threshold`
    validity_threshold: float = Field(default=0.0, ge=0, le=1)  # largest allowed drop of JSON/tool validity
    min_items: int = Field(default=2, ge=1)  # smallest net item difference that can fail a check

    def for_category(self, name: str) -> float:
        return self.category_thresholds.get(name, self.threshold)


class Reason(BaseModel):
    check: str  # overall | category | validity
    scope: str  # "overall" or the category name
    drop: float  # points lost, as a fraction (positive = worse)
    threshold: float
    net_items: int
    p_value: float | None = None
    message: str


class Verdict(BaseModel):
    passed: bool
    reasons: list[Reason] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    candidate_tier: Tier | None = None
    next_tier: Tier | None = None  # the next-higher precision tier to try when failing
    next_tier_passing_run: int | None = None  # id of a passing run whose candidate is at `next_tier`

    def summary(self) -> str:
        if self.passed:
            return "PASS"
        lines = ["FAIL: " + "; ".join(r.message for r in self.reasons)]
        if self.next_tier is not None:
            have = (f"run {self.next_tier_passing_run} already passed at {self.next_tier.value}"
                    if self.next_tier_passing_run is not None else f"no passing run at {self.next_tier.value} yet")
            lines.append(f"next: try the {self.next_tier.value} tier ({have})")
        elif self.candidate_tier is not None:
            lines.append(f"the candidate is already at {self.candidate_tier.value}; nothing higher to try")
        return "\n".join(lines)


def next_higher_tier(tier: Tier | None) -> Tier | None:
    """fp16 > fp8 > int8 > int4: the next tier up in fidelity, None at the top or when unknown."""
    if tier is None or tier.rank == 0:
        return None
    return TIER_ORDER[tier.rank - 1]


def _pts(x: float) -> str:
    return f"{x * 100:.1f} pts"


def _check(c: Comparison, check: str, threshold: float, cfg: GateConfig) -> tuple[Reason | None, str | None]:
    drop, net = -c.delta, c.net_loss
    if drop <= threshold + 1e-12:
        return None, None
    label = "overall" if check == "overall" else c.name
    if net < cfg.min_items:
        return None, (f"{label}: -{_pts(drop)} from {net} item(s) net, below the {cfg.min_items}-item minimum "
                      f"of a {c.n}-item slice; not gating")
    return Reason(check=check, scope=c.name, drop=drop, threshold=threshold, net_items=net, p_value=c.p_value,
                  message=(f"{label} pass rate dropped {_pts(drop)} (> {_pts(threshold)}; {c.only_cand_fail} "
                           f"fail only in candidate vs {c.only_base_fail} only in baseline; "
                           f"McNemar p={c.p_value:.3g})")), None


def _validity(c: Comparison, cfg: GateConfig) -> tuple[Reason | None, str | None]:
    if not c.validity_n or c.base_validity is None or c.cand_validity is None:
        return None, None
    drop = c.base_validity - c.cand_validity
    net = c.only_cand_invalid - c.only_base_invalid
    if drop <= cfg.validity_threshold + 1e-12:
        return None, None
    if net < cfg.min_items:
        return None, (f"JSON/tool validity: -{_pts(drop)} from {net} item(s) net over {c.validity_n} checked; "
                      "not gating")
    return Reason(check="validity", scope="json", drop=drop, threshold=cfg.validity_threshold, net_items=net,
                  message=(f"JSON/tool validity dropped {_pts(drop)} ({c.base_validity:.1%} -> "
                           f"{c.cand_validity:.1%}; {c.only_cand_invalid} invalid only in candidate)")), None


def evaluate(report: Report, cfg: GateConfig, *, candidate_tier: Tier | None = None,
             passing_runs: dict[Tier, int] | None = None) -> Verdict:
    """`passing_runs`: for each tier, the id of a passing run with a candidate at that tier (looked up by the
    caller, so this stays pure)."""
    reasons: list[Reason] = []
    notes: list[str] = []
    checks = [_check(report.overall, "overall", cfg.threshold, cfg)]
    checks += [_check(c, "category", cfg.for_category(c.name), cfg) for c in report.categories]
    checks.append(_validity(report.overall, cfg))
    for reason, note in checks:
        if reason:
            reasons.append(reason)
        if note:
            notes.append(note)
    unknown = sorted(set(cfg.category_thresholds) - {c.name for c in report.categories})
    if unknown:
        notes.append(f"category thresholds for categories not in this suite: {', '.join(unknown)}")
    passed = not reasons
    nxt = None if passed else next_higher_tier(candidate_tier)
    return Verdict(passed=passed, reasons=reasons, notes=notes, candidate_tier=candidate_tier, next_tier=nxt,
                   next_tier_passing_run=(passing_runs or {}).get(nxt) if nxt else None)


def parse_category_thresholds(values: list[str] | tuple[str, ...]) -> dict[str, float]:
    """`["math=0.03", "code=3%"]` -> {"math": 0.03, "code": 0.03}; errors name the bad value."""
    out: dict[str, float] = {}
    for v in values:
        name, sep, num = v.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"category threshold {v!r}: expected CATEGORY=DROP, e.g. math=0.03")
        try:
            x = float(num.strip().rstrip("%")) / (100 if num.strip().endswith("%") else 1)
        except ValueError:
            raise ValueError(f"category threshold {v!r}: {num!r} is not a number (use 0.03 or 3%)") from None
        if not 0 <= x <= 1:
            raise ValueError(f"category threshold {v!r}: must be between 0 and 1 (a fraction: 0.03 = 3 points)")
        out[name.strip()] = x
    return out
