"""Analysis of stored shadow pairs (pure): agreement rates with Wilson confidence intervals per deployment pair,
per rule and over time, and the rules the evidence says to move: rules whose traffic on the cheapest tier
disagrees with the reference (top) tier (candidates to raise) and rules routed to the top tier whose lower-tier
shadow almost always agrees (candidates to lower). Each suggestion carries its evidence and the one weight change
that would make the rule, alone, require the other tier; a what-if replay shows what it does with the others.

Only compared pairs count (both answers read); a pair counts under every rule that fired for its request."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel
from scipy.stats import binomtest

from quantroute.policy.model import Policy
from quantroute.tiers import Tier

NO_RULE = "(no rule)"


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of k successes in n; (0, 1) without data."""
    if n <= 0:
        return 0.0, 1.0
    ci = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


class Rate(BaseModel):
    """Agreement of one group of pairs."""

    key: dict[str, str]
    pairs: int
    agree: int
    exact: int = 0
    rate: float
    ci_low: float
    ci_high: float


class Suggestion(BaseModel):
    direction: Literal["raise", "lower"]
    rule: str
    served_tier: str
    shadow_tier: str
    rate: Rate
    current_weight: float
    proposed_weight: float | None  # None: no weight of this rule alone would help (said in `note`)
    target_tier: str  # the tier the rule alone would require with the proposed weight
    evidence: str
    note: str = ""


class Report(BaseModel):
    pairs: int  # compared pairs in the window
    failed: int  # shadows without a comparable answer (timeouts, errors)
    by_pair: list[Rate]
    by_rule: list[Rate]
    trend: list[Rate]
    raise_: list[Suggestion]
    lower: list[Suggestion]


def _rate(key: dict[str, str], rows: list[Mapping[str, Any]]) -> Rate:
    n = len(rows)
    k = sum(1 for r in rows if r["agree"])
    lo, hi = wilson(k, n)
    return Rate(key=key, pairs=n, agree=k, exact=sum(1 for r in rows if r.get("exact")), rate=k / n if n else 0.0,
                ci_low=lo, ci_high=hi)


def _group(rows: Iterable[Mapping[str, Any]], fields: tuple[str, ...]) -> list[Rate]:
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(str(r[f]) for f in fields), []).append(r)
    return [_rate(dict(zip(fields, k)), v) for k, v in sorted(groups.items())]


def compared(pairs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [p for p in pairs if p.get("compared") and p.get("agree") is not None]


def by_rule(pairs: Iterable[Mapping[str, Any]]) -> list[Rate]:
    exploded = [{**p, "rule": rule} for p in pairs for rule in (p.get("rules") or [NO_RULE])]
    return _group(exploded, ("rule", "served_tier", "shadow_tier"))


def trend(pairs: Iterable[Mapping[str, Any]], bucket_s: int) -> list[Rate]:
    def bucket(ts: datetime) -> str:
        return datetime.fromtimestamp(int(ts.timestamp()) // bucket_s * bucket_s, ts.tzinfo).isoformat()

    rows = [{**p, "bucket": bucket(p["ts"]), "pair": f"{p['served_tier']} vs {p['shadow_tier']}"} for p in pairs]
    return _group(rows, ("bucket", "pair"))


def _weight_for(policy: Policy, tier: Tier) -> float | None:
    """The smallest weight with which a rule alone requires `tier` (None when no score maps to it)."""
    scores = sorted(th.min_score for th in policy.thresholds if th.tier == tier)
    if scores:
        return scores[0]
    below = min((th.min_score for th in policy.thresholds), default=0.0) - 1
    return below if policy.minimum_tier(below) == tier else None


def _evidence(r: Rate, served: str, shadow: str) -> str:
    return (f"{r.agree}/{r.pairs} shadow pairs agree ({r.rate:.1%}, 95 % CI {r.ci_low:.1%} to {r.ci_high:.1%}; "
            f"{r.exact} exact): served at {served}, shadow at {shadow}")


def suggestions(rates: list[Rate], policy: Policy, *, min_pairs: int = 30, raise_below: float = 0.9,
                lower_above: float = 0.95) -> tuple[list[Suggestion], list[Suggestion]]:
    """(raise, lower). Raise: served at the cheapest tier, shadowed to the top tier, agreement surely below
    `raise_below` (CI high under it); worst first. Lower: served at the top tier, shadowed to a lower tier,
    agreement surely above `lower_above` (CI low over it); best first."""
    ladder = policy.tier_ladder()
    top, cheapest = ladder[0], ladder[-1]
    weights = {r.name: r.weight for r in policy.rules}
    up: list[Suggestion] = []
    down: list[Suggestion] = []
    for r in rates:
        rule, served, shadow = r.key["rule"], r.key["served_tier"], r.key["shadow_tier"]
        if rule not in weights or r.pairs < min_pairs:
            continue
        w = weights[rule]
        if served == cheapest.value and shadow == top.value and r.ci_high < raise_below:
            target = _weight_for(policy, top)
            s = Suggestion(direction="raise", rule=rule, served_tier=served, shadow_tier=shadow, rate=r,
                           current_weight=w, proposed_weight=target, target_tier=top.value,
                           evidence=_evidence(r, served, shadow))
            if target is None or target <= w:
                s.proposed_weight = None
                s.note = (f"the rule's weight {w:g} already requires {top.value} on its own: this traffic reached "
                          f"{served} through other rules' negative weights or session pins")
            up.append(s)
        elif served == top.value and shadow != top.value and r.ci_low > lower_above:
            target = _weight_for(policy, Tier(shadow))
            if target is not None and target < w:
                down.append(Suggestion(direction="lower", rule=rule, served_tier=served, shadow_tier=shadow, rate=r,
                                       current_weight=w, proposed_weight=target, target_tier=shadow,
                                       evidence=_evidence(r, served, shadow)))
    up.sort(key=lambda s: (s.rate.ci_high, s.rate.rate))
    down.sort(key=lambda s: (-s.rate.ci_low, -s.rate.rate))
    return up, down


def analyse(pairs: Iterable[Mapping[str, Any]], policy: Policy, *, bucket_s: int = 3600, min_pairs: int = 30,
            raise_below: float = 0.9, lower_above: float = 0.95) -> Report:
    every = list(pairs)
    ok = compared(every)
    rules = by_rule(ok)
    up, down = suggestions(rules, policy, min_pairs=min_pairs, raise_below=raise_below, lower_above=lower_above)
    return Report(pairs=len(ok), failed=len(every) - len(ok),
                  by_pair=_group(ok, ("served_tier", "served_deployment", "shadow_tier", "shadow_deployment")),
                  by_rule=rules, trend=trend(ok, bucket_s), raise_=up, lower=down)


def apply_suggestion(policy_data: dict[str, Any], s: Suggestion) -> dict[str, Any]:
    """A draft (policy YAML data) with the suggested weight: the rest as it was."""
    if s.proposed_weight is None:
        raise ValueError(f"no weight change is proposed for rule {s.rule!r}: {s.note}")
    draft = copy.deepcopy(policy_data)
    rule = next((r for r in draft.get("rules", []) if r.get("name") == s.rule), None)
    if rule is None:
        raise ValueError(f"rule {s.rule!r} is not in the policy; valid: "
                         + ", ".join(r.get("name", "?") for r in draft.get("rules", [])))
    rule["weight"] = s.proposed_weight
    draft["message"] = (f"{s.direction} rule {s.rule} (weight {s.current_weight:g} -> {s.proposed_weight:g}, "
                        f"alone it requires {s.target_tier}): live agreement {s.evidence}")
    return draft
