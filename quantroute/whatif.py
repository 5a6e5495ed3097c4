"""What-if replay: classify logged requests under the active policy and under a draft, and say what changes.

Pure (no I/O): the dashboard hands in the rows (each a request body and its x- headers, as the router logged
them) and gets back per-request outcomes plus the rules responsible for every tier change. Both policies are
re-run on the same requests, so the comparison is not confounded by pins, escalations or canaries that shaped
the tier actually served."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from quantroute.classify import RequestError, compile_policy
from quantroute.policy.model import Policy


@dataclass(frozen=True)
class WhatIfOutcome:
    request_id: Any
    active_tier: str
    draft_tier: str
    active_score: float
    draft_score: float
    causes: tuple[str, ...]  # rules whose firing or weight differs between the two, for a changed tier

    @property
    def changed(self) -> bool:
        return self.active_tier != self.draft_tier


@dataclass
class WhatIfReport:
    outcomes: list[WhatIfOutcome] = field(default_factory=list)
    skipped: int = 0  # rows the classifier refused (malformed bodies are logged too)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def changed(self) -> list[WhatIfOutcome]:
        return [o for o in self.outcomes if o.changed]

    def transitions(self) -> Counter[tuple[str, str]]:
        return Counter((o.active_tier, o.draft_tier) for o in self.changed)

    def causes(self) -> Counter[str]:
        return Counter(c for o in self.changed for c in o.causes)

    def tier_counts(self) -> dict[str, Counter[str]]:
        return {"active": Counter(o.active_tier for o in self.outcomes),
                "draft": Counter(o.draft_tier for o in self.outcomes)}


def reclassify(active: Policy, draft: Policy, rows: Iterable[tuple[Any, Mapping[str, Any]]]) -> WhatIfReport:
    """rows: (request id, {"body": {...}, "headers": {...}}) pairs."""
    a, d = compile_policy(active), compile_policy(draft)
    report = WhatIfReport()
    for rid, payload in rows:
        body, headers = payload.get("body"), payload.get("headers") or {}
        try:
            da, dd = a.classify(body, headers), d.classify(body, headers)
        except RequestError:
            report.skipped += 1
            continue
        causes: tuple[str, ...] = ()
        if da.tier != dd.tier:
            wa = {r.name: r.weight for r in da.rules}
            wd = {r.name: r.weight for r in dd.rules}
            causes = tuple(sorted(n for n in wa.keys() | wd.keys() if wa.get(n) != wd.get(n)))
            if not causes:
                causes = ("thresholds",)  # same rules, same weights: the score maps to another tier
        report.outcomes.append(WhatIfOutcome(rid, da.tier.value, dd.tier.value, da.score, dd.score, causes))
    return report
