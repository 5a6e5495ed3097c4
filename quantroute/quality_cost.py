"""What a routing arm costs in quality (pure): the share of each eval category's traffic served per tier, times
that tier's pass-rate change on the category in a paired eval against FP16, is the arm's expected quality loss
per category, in points of pass rate.

    loss[c] = sum over tiers t of  share(c on t) x (pass rate of FP16 on c - pass rate of t on c)

The deltas come from eval runs stored in the DB (`deltas_from_report` reads a run's report); traffic is put in
eval categories by `request_category`, a keyword reading of the request (the traffic files label requests
tolerant / neutral / sensitive, not by task). A category the eval has no items for takes the overall delta.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from quantroute.tiers import Tier

CATEGORIES = ("math", "code", "json", "structured", "multilingual", "long_context", "chat", "safety")
OVERALL = "overall"
LONG_PROMPT_CHARS = 1500  # beyond this a request is mostly reading: the eval's long-context category

_CODE = re.compile(r"\b(sql|postgresql|select|python|typescript|javascript|bash|regex|nginx|golang|go engineer|"
                   r"code|function|script|react|devops|engineer|celery|middleware)\b")
_MULTILINGUAL = re.compile(r"translat|antworte|réponds|responde|auf deutsch|en français|en español")
_MATH = re.compile(r"\b(solve|step by step|math|interest|equation|how many ways|percent)\b|\d\s*[%^*/+]\s*\d|\d%")
_STRUCTURED = re.compile(r"\b(classify|extract|summari[sz]e|bullets|categories|table|csv)\b")


def content_text(content: Any) -> str:
    """A chat message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def request_category(body: Mapping[str, Any]) -> str:
    """The eval category a request's task belongs to (first match: JSON output, tool calls, code, another
    language, math, a long document, extraction or classification; otherwise chat)."""
    if "messages" in body:
        msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        text = " ".join(content_text(m.get("content")) for m in msgs if m.get("role") in ("system", "user"))
    else:
        prompt = body.get("prompt")
        text = prompt if isinstance(prompt, str) else " ".join(map(str, prompt or []))
    low = text.lower()
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema") or "json" in low:
        return "json"
    if body.get("tools"):
        return "structured"
    if _CODE.search(low):
        return "code"
    if _MULTILINGUAL.search(low):
        return "multilingual"
    if _MATH.search(low):
        return "math"
    if len(text) > LONG_PROMPT_CHARS:
        return "long_context"
    if _STRUCTURED.search(low):
        return "structured"
    return "chat"


class TierDeltas(BaseModel):
    """Pass-rate change of one tier against FP16 (candidate - baseline, as a fraction; negative = worse), per
    eval category and overall, and which eval run it came from."""

    tier: Tier
    deployment: str
    run_id: int | None = None
    overall: float
    categories: dict[str, float] = Field(default_factory=dict)

    def delta(self, category: str) -> float:
        return self.categories.get(category, self.overall)


def deltas_from_report(report: Mapping[str, Any], *, tier: Tier, deployment: str,
                       run_id: int | None = None) -> TierDeltas:
    """From an eval run's stored report (`quantroute.evals.stats.Report`, as JSON)."""
    cats = {c["name"]: float(c["delta"]) for c in report.get("categories", []) if c.get("n", 0) > 0}
    return TierDeltas(tier=tier, deployment=deployment, run_id=run_id, overall=float(report["overall"]["delta"]),
                      categories=cats)


def served_counts(pairs: Iterable[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """(category, tier) per served request -> category -> tier -> requests."""
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for category, tier in pairs:
        out[category][tier] += 1
    return {c: dict(n) for c, n in sorted(out.items())}


class QualityCost(BaseModel):
    """An arm's expected quality loss: points of pass rate per category and over all its traffic (weighted by
    how much of the traffic each category is), and the share of each category that ran below FP16."""

    loss_pts: dict[str, float]  # category -> expected loss, points (positive = worse than all-FP16)
    share_below_fp16: dict[str, float]
    requests: dict[str, int]
    overall_pts: float
    worst_category: str | None

    @property
    def worst_pts(self) -> float:
        return self.loss_pts[self.worst_category] if self.worst_category else 0.0


def quality_cost(counts: Mapping[str, Mapping[str, int]], deltas: Mapping[str, TierDeltas]) -> QualityCost:
    """`counts`: category -> tier -> requests; `deltas`: tier -> its deltas against FP16 (FP16 itself costs 0;
    a tier without an eval run is an error: its cost would be unknown, not zero)."""
    loss: dict[str, float] = {}
    below: dict[str, float] = {}
    reqs: dict[str, int] = {}
    total_loss = 0.0
    total = 0
    for cat, by_tier in counts.items():
        n = sum(by_tier.values())
        if n == 0:
            continue
        pts = 0.0
        low = 0
        for tier, k in by_tier.items():
            if tier == Tier.fp16.value:
                continue
            if tier not in deltas:
                raise ValueError(f"no eval deltas for tier {tier!r} (served {k} {cat} requests); "
                                 f"known: {', '.join(sorted(deltas)) or 'none'}")
            pts += k / n * -deltas[tier].delta(cat) * 100
            low += k
        loss[cat], below[cat], reqs[cat] = pts, low / n, n
        total_loss += pts * n
        total += n
    worst = max(loss, key=lambda c: loss[c]) if loss else None
    return QualityCost(loss_pts=loss, share_below_fp16=below, requests=reqs,
                       overall_pts=total_loss / total if total else 0.0, worst_category=worst)
