"""The policy tuner (pure): the thresholds and rule weights that give a fleet the most capacity at a named SLO
while the expected quality loss stays within a budget (points over all traffic and in the worst eval category).

Inputs: the active policy, a traffic sample (the request log's replays or a traffic file), the per-category
pass-rate deltas of each quantized tier against FP16 from stored eval runs, the fleet's nodes and the capacity
model. Everything else is arithmetic:

- Each request is classified once; its score under other rule weights is the sum of the weights of the rules that
  fired (a weight changes a score, not whether a rule fires), so thousands of candidates cost little.
- A candidate's tiers: each request's cheapest served tier at or above its minimum (the header floor kept), and a
  session's later turns on its first turn's tier (pins), as with room everywhere. Spill only moves traffic up, so
  the quality loss predicted from these tiers is an upper bound of what the router serves.
- A node's capacity at the SLO (capacity model): the largest batch whose decode step meets the TPOT limit (or the
  batch / KV limit for TTFT and throughput SLOs), in output tok/s. With spill up, tier t's demand may use the
  capacity of t and every tier above it: the fleet sustains X = min over r of C(tiers at least as faithful as r) /
  D(share of output tokens whose floor is at least as faithful as r). Without spill each tier serves its own.
- Guard: a candidate that would serve any request of a labelled sensitive set below its floor is out.
- Search: coordinate descent from the active policy over each threshold (every score the traffic produces) and
  each rule's weight (off, or x0.5, x1, x1.5, x2 of its declared weight, thresholds re-swept), a few passes. A
  rule the policy has but disables is a proposal the tuner may switch on. The best candidate within
  the budget wins; ties go to the smaller loss.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel

from quantroute.capacity import GpuSpec, ModelShape, WeightFormat, decode_step_s, max_concurrency, prefill_s
from quantroute.classify import RequestError, compile_policy
from quantroute.policy.model import Policy, Rule, Threshold
from quantroute.quality_cost import QualityCost, TierDeltas, content_text, quality_cost, request_category
from quantroute.slo import NamedSlo
from quantroute.tiers import TIER_ORDER, Tier, cheapest_served_tier

WEIGHT_STEPS = (0.0, 0.5, 1.5, 2.0)
CHARS_PER_TOKEN = 4  # a prompt's tokens, estimated from its text (English averages ~4 characters a token)


@dataclass(frozen=True)
class TuneRequest:
    body: Mapping[str, Any]
    headers: Mapping[str, str]
    session: str | None = None


@dataclass(frozen=True)
class NodeModel:
    """One node as the capacity model sees it."""

    tier: Tier
    gpu: GpuSpec
    fmt: WeightFormat
    max_batch: int


class MissingEvals(ValueError):
    """Tiers (and categories) the traffic would use with no stored eval run to price them."""

    def __init__(self, missing: Mapping[str, Sequence[str]], hint: str = "") -> None:
        self.missing = {t: list(c) for t, c in missing.items()}
        parts = [f"{t} ({'no eval run at all' if not cats else 'categories ' + ', '.join(cats)})"
                 for t, cats in self.missing.items()]
        super().__init__("no eval data for " + "; ".join(parts) + (f". {hint}" if hint else ""))


class SloUnmeetable(ValueError):
    """No policy meets the SLO on this fleet; `best_ms` is the best the fleet achieves (one sequence a node)."""

    def __init__(self, slo: NamedSlo, best_ms: float, what: str) -> None:
        self.best_ms = best_ms
        super().__init__(f"no policy meets {slo.label} on this fleet: the best achievable {what} is "
                         f"{best_ms:.1f} ms (one sequence on the fastest node)")


class Candidate(BaseModel):
    label: str
    weights: dict[str, float]
    thresholds: list[Threshold]
    capacity_tok_s: float
    tier_share: dict[str, float]  # share of requests per tier (cheapest allowed, pins kept)
    quality: QualityCost
    within: bool


class TuneResult(BaseModel):
    slo: NamedSlo
    active: Candidate
    best: Candidate | None
    candidates: list[Candidate]  # within the budget first, most capacity first
    tier_capacity: dict[str, float]  # tok/s each tier sustains at the SLO
    context_tokens: int
    requests: int
    skipped: int  # requests the classifier refused


# ---- capacity ------------------------------------------------------------------------------------------------

def node_capacity(node: NodeModel, shape: ModelShape, slo: NamedSlo, *, context: int, prompt: int) -> float:
    """Output tok/s one node sustains at the SLO: its largest batch that meets it (0: none does)."""
    fit = min(node.max_batch, max_concurrency(shape, node.fmt, node.gpu, context))
    if fit < 1:
        return 0.0
    if slo.ttft_p95_ms is not None and prefill_s(shape, node.gpu, prompt) * 1000 > slo.ttft_p95_ms:
        return 0.0

    def step(b: int) -> float:
        return decode_step_s(shape, node.fmt, node.gpu, batch=b, context_tokens=b * context)

    batch = fit
    if slo.tpot_p95_ms is not None:
        limit = slo.tpot_p95_ms / 1000
        batch = max((b for b in range(1, fit + 1) if step(b) <= limit), default=0)
        if batch == 0:
            return 0.0
    return batch / step(batch)


def tier_capacity(nodes: Sequence[NodeModel], shape: ModelShape, slo: NamedSlo, *, context: int,
                  prompt: int) -> dict[Tier, float]:
    """Tok/s per tier at the SLO; raises SloUnmeetable when no node meets it."""
    out: dict[Tier, float] = {}
    for n in nodes:
        out[n.tier] = out.get(n.tier, 0.0) + node_capacity(n, shape, slo, context=context, prompt=prompt)
    if nodes and not any(out.values()):
        if slo.tpot_p95_ms is not None:
            best = min(decode_step_s(shape, n.fmt, n.gpu, batch=1, context_tokens=context) for n in nodes)
            raise SloUnmeetable(slo, best * 1000, "TPOT")
        best = min(prefill_s(shape, n.gpu, prompt) for n in nodes)
        raise SloUnmeetable(slo, best * 1000, "TTFT")
    return out


def fleet_capacity(demand: Sequence[float], capacity: Sequence[float], *, spill: bool) -> float:
    """Output tok/s the fleet sustains for a demand split (share of output tokens per tier rank, rank 0 = fp16)
    given tok/s per tier rank. With spill a rank's demand may use every more faithful rank's capacity too."""
    if spill:
        x = math.inf
        d = c = 0.0
        for r in range(len(demand)):
            d += demand[r]
            c += capacity[r]
            if d > 0:
                x = min(x, c / d)
        return 0.0 if math.isinf(x) else x
    ratios = [capacity[r] / demand[r] for r in range(len(demand)) if demand[r] > 0]
    return min(ratios) if ratios else 0.0


# ---- the traffic, classified once ------------------------------------------------------------------------------

class Traffic:
    """What every candidate needs from the traffic, as arrays: fired rules, header floors, sessions, categories,
    output tokens."""

    def __init__(self, policy: Policy, requests: Sequence[TuneRequest], fleet_tiers: set[Tier] | None = None) -> None:
        # every rule, disabled ones too: the tuner may switch on a rule an operator left disabled as a proposal
        compiled = compile_policy(policy.model_copy(update={
            "rules": [r.model_copy(update={"enabled": True}) for r in policy.rules]}))
        self.rules = [r.name for r in policy.rules]
        col = {n: i for i, n in enumerate(self.rules)}
        fired: list[np.ndarray] = []
        header: list[int] = []
        out: list[float] = []
        cats: list[str] = []
        prompt: list[float] = []
        models: list[str] = []
        first: list[int] = []
        self.skipped = 0
        seen: dict[str, int] = {}
        for req in requests:
            kind = "chat" if "messages" in req.body else "completion"
            try:
                d = compiled.classify(req.body, req.headers, kind)
            except RequestError:
                self.skipped += 1
                continue
            row = np.zeros(len(self.rules))
            for f in d.rules:
                row[col[f.name]] = 1.0
            fired.append(row)
            header.append(d.header_tier.rank if d.header_tier is not None else len(TIER_ORDER))
            out.append(float(d.output_estimate))
            cats.append(request_category(req.body))
            prompt.append(len(_prompt_text(req.body)) / CHARS_PER_TOKEN)
            models.append(str(req.body.get("model", "")))
            first.append(seen.setdefault(req.session, len(first)) if req.session is not None else len(first))
        self.n = len(out)
        self.fired = np.array(fired).reshape(self.n, len(self.rules))
        self.header = np.array(header, dtype=int)
        self.out = np.array(out)
        self.categories = sorted(set(cats))
        self.cat = np.array([self.categories.index(c) for c in cats], dtype=int)
        self.first = np.array(first, dtype=int)
        self.prompt_tokens = float(np.mean(prompt)) if prompt else 0.0
        self.context_tokens = int(np.mean(np.array(prompt) + self.out / 2)) if prompt else 1
        self.models = models
        self.served = _served_table(policy, models, fleet_tiers)  # the tuner never changes tiers or deployments
        self.allow_lower = policy.headers.allow_lower

    def ranks(self, policy: Policy, weights: np.ndarray, thresholds: Sequence[Threshold]) -> np.ndarray:
        """Each request's tier rank as served with room everywhere: score -> minimum tier, header floor, the
        cheapest served tier at or above it, a session's turns on its first turn's tier. -1: nothing serves it."""
        scores = self.fired @ weights
        floor = policy.cheapest_tier().rank
        rank = np.full(self.n, floor, dtype=int)
        # the tier of the highest threshold a score reaches: apply the thresholds lowest first, later ones win
        for th in sorted(thresholds, key=lambda t: t.min_score):
            rank = np.where(scores >= th.min_score, th.tier.rank, rank)
        has = self.header < len(TIER_ORDER)
        rank = np.where(has & ((self.header < rank) | self.allow_lower), self.header, rank)
        rank = self.served[np.arange(self.n), rank]
        out: np.ndarray = rank[self.first]
        return out


def _prompt_text(body: Mapping[str, Any]) -> str:
    if "messages" in body:
        return " ".join(content_text(m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict))
    p = body.get("prompt")
    return p if isinstance(p, str) else " ".join(map(str, p or []))


def _served_table(policy: Policy, models: Sequence[str], fleet_tiers: set[Tier] | None) -> np.ndarray:
    """[request, minimum rank] -> the rank of its model's cheapest served tier at or above (-1: none): a tier the
    policy lists deployments for and, when given, the fleet has nodes at."""
    per_model: dict[str, list[int]] = {}
    for m in set(models):
        served = {t.name for t in policy.tiers if t.deployments.get(m)
                  and (fleet_tiers is None or t.name in fleet_tiers)}
        per_model[m] = [(lambda t: t.rank if t is not None else -1)(cheapest_served_tier(tier, served))
                        for tier in TIER_ORDER]
    return np.array([per_model[m] for m in models], dtype=int).reshape(len(models), len(TIER_ORDER))


# ---- the search --------------------------------------------------------------------------------------------------

@dataclass
class _Eval:
    weights: tuple[float, ...]
    thresholds: tuple[tuple[float, Tier], ...]
    capacity: float
    overall: float
    worst: float
    within: bool


class Tuner:
    def __init__(self, policy: Policy, requests: Sequence[TuneRequest], deltas: Mapping[str, TierDeltas],
                 nodes: Sequence[NodeModel], shape: ModelShape, slo: NamedSlo, *, budget_pts: float,
                 category_budget_pts: float, guard: Sequence[TuneRequest] = (), guard_floor: Tier = Tier.fp8,
                 eval_hint: str = "") -> None:
        self.policy, self.slo = policy, slo
        self.budget, self.category_budget = budget_pts, category_budget_pts
        fleet_tiers = {n.tier for n in nodes}
        self.traffic = Traffic(policy, requests, fleet_tiers)
        # the labelled sensitive set: a candidate that serves any of them below `guard_floor` (on this fleet: below
        # the cheapest served tier at or above it) is out, whatever its quality cost
        self.guard = Traffic(policy, [TuneRequest(g.body, g.headers) for g in guard], fleet_tiers) if guard else None
        self.guard_floor = (self.guard.served[:, guard_floor.rank] if self.guard is not None
                            else np.zeros(0, dtype=int))
        if self.traffic.n == 0:
            raise ValueError("no request in the traffic sample could be classified: nothing to tune for")
        self.deltas = dict(deltas)
        self._check_evals(fleet_tiers, eval_hint)
        caps = tier_capacity(nodes, shape, slo, context=self.traffic.context_tokens,
                             prompt=int(self.traffic.prompt_tokens))
        self.capacity = [caps.get(t, 0.0) for t in TIER_ORDER]
        self.spill = policy.spill.enabled
        # loss in points per request served at rank r in category c (0 at fp16)
        t = self.traffic
        self.loss = np.zeros((len(t.categories), len(TIER_ORDER)))
        for ci, c in enumerate(t.categories):
            for tier in TIER_ORDER[1:]:
                if tier.value in self.deltas:
                    self.loss[ci, tier.rank] = -self.deltas[tier.value].delta(c) * 100
        self.cat_n = np.bincount(t.cat, minlength=len(t.categories)).astype(float)
        self.seen: dict[tuple[tuple[float, ...], tuple[tuple[float, Tier], ...]], _Eval] = {}

    def _check_evals(self, served: set[Tier], hint: str) -> None:
        missing: dict[str, list[str]] = {}
        for tier in sorted(served - {Tier.fp16}, key=lambda x: x.rank):
            d = self.deltas.get(tier.value)
            if d is None:
                missing[tier.value] = []
                continue
            gaps = [c for c in self.traffic.categories if c not in d.categories]
            if gaps:
                missing[tier.value] = gaps
        if missing:
            raise MissingEvals(missing, hint)

    def evaluate(self, weights: Sequence[float], thresholds: Sequence[tuple[float, Tier]]) -> _Eval:
        key = (tuple(weights), tuple(thresholds))
        got = self.seen.get(key)
        if got is not None:
            return got
        t = self.traffic
        ranks = t.ranks(self.policy, np.array(weights, dtype=float),
                        [Threshold(min_score=s, tier=tier) for s, tier in thresholds])
        ok = ranks >= 0
        demand = np.bincount(ranks[ok], weights=t.out[ok], minlength=len(TIER_ORDER))
        demand = demand / demand.sum() if demand.sum() else demand
        cap = fleet_capacity(list(demand), self.capacity, spill=self.spill)
        per_req = self.loss[t.cat[ok], ranks[ok]]
        cat_loss = np.bincount(t.cat[ok], weights=per_req, minlength=len(t.categories)) / np.maximum(self.cat_n, 1)
        overall = float(per_req.sum() / max(ok.sum(), 1))
        worst = float(cat_loss.max()) if len(cat_loss) else 0.0
        within = overall <= self.budget + 1e-9 and worst <= self.category_budget + 1e-9
        if within and self.guard is not None:
            g = self.guard.ranks(self.policy, np.array(weights, dtype=float),
                                 [Threshold(min_score=s, tier=tier) for s, tier in thresholds])
            within = not bool(((g >= 0) & (g > self.guard_floor)).any())
        got = _Eval(key[0], key[1], cap, overall, worst, within)
        self.seen[key] = got
        return got

    def _better(self, a: _Eval, b: _Eval | None) -> bool:
        if b is None:
            return True
        if a.within != b.within:
            return a.within
        if not a.within:  # neither within: closer to the budget first
            return (a.overall, a.worst) < (b.overall, b.worst)
        if abs(a.capacity - b.capacity) > 1e-6 * max(b.capacity, 1.0):
            return a.capacity > b.capacity
        return (a.overall, a.worst) < (b.overall, b.worst)

    def _sweep(self, weights: list[float], thresholds: list[tuple[float, Tier]], best: _Eval) -> tuple[
            list[tuple[float, Tier]], _Eval]:
        """Each threshold over every score the traffic produces under `weights` (and one above them all)."""
        scores = sorted(set((self.traffic.fired @ np.array(weights, dtype=float)).tolist()))
        values = [*scores, (scores[-1] + 1) if scores else 0.0]
        for k in range(len(thresholds)):
            for v in values:
                trial = list(thresholds)
                trial[k] = (v, thresholds[k][1])
                e = self.evaluate(weights, trial)
                if self._better(e, best):
                    best, thresholds = e, trial
        return thresholds, best

    def run(self, passes: int = 2) -> TuneResult:
        declared = {r.name: r.weight for r in self.policy.rules}
        start = [r.weight if r.enabled else 0.0 for r in self.policy.rules]
        proposals = [r.weight for r in self.policy.rules]  # every disabled rule switched on
        thresholds0 = [(th.min_score, th.tier) for th in self.policy.thresholds]
        active = self.evaluate(start, thresholds0)
        best = active
        # from the active policy, and from it with every proposal on: single changes from one rarely reach the other
        for weights in ([start, proposals] if proposals != start else [start]):
            thresholds = list(thresholds0)
            local = self.evaluate(weights, thresholds)
            for _ in range(passes):
                thresholds, local = self._sweep(weights, thresholds, local)
                for i, name in enumerate(self.traffic.rules):
                    for w in sorted({0.0, *(declared[name] * m for m in WEIGHT_STEPS), declared[name]}
                                    - {weights[i]}):
                        trial = list(weights)
                        trial[i] = w
                        th, e = self._sweep(trial, thresholds, self.evaluate(trial, thresholds))
                        if self._better(e, local):
                            local, weights, thresholds = e, trial, th
            if self._better(local, best):
                best = local
        ranked = sorted(self.seen.values(), key=lambda e: (not e.within, -e.capacity, e.overall, e.worst))
        unique: list[_Eval] = []
        for e in ranked:  # one per distinct outcome (many weight settings route the traffic the same way)
            if not any(abs(u.capacity - e.capacity) < 1e-6 and abs(u.overall - e.overall) < 1e-9
                       and abs(u.worst - e.worst) < 1e-9 for u in unique):
                unique.append(e)
        chosen = best if best.within else None
        return TuneResult(
            slo=self.slo, active=self.candidate(active, "active"), best=self.candidate(chosen, "best")
            if chosen else None, candidates=[self.candidate(e, f"#{i + 1}") for i, e in enumerate(unique[:12])],
            tier_capacity={t.value: c for t, c in zip(TIER_ORDER, self.capacity) if c},
            context_tokens=self.traffic.context_tokens, requests=self.traffic.n, skipped=self.traffic.skipped)

    def candidate(self, e: _Eval, label: str) -> Candidate:
        t = self.traffic
        ranks = t.ranks(self.policy, np.array(e.weights, dtype=float),
                        [Threshold(min_score=s, tier=tier) for s, tier in e.thresholds])
        counts: dict[str, dict[str, int]] = {}
        for c, r in zip(t.cat.tolist(), ranks.tolist()):
            if r >= 0:
                tier = TIER_ORDER[r].value
                counts.setdefault(t.categories[c], {}).setdefault(tier, 0)
                counts[t.categories[c]][tier] += 1
        share = {TIER_ORDER[r].value: float((ranks == r).sum()) / t.n for r in range(len(TIER_ORDER))
                 if (ranks == r).any()}
        return Candidate(label=label, weights=dict(zip(t.rules, e.weights)),
                         thresholds=[Threshold(min_score=s, tier=tier) for s, tier in e.thresholds],
                         capacity_tok_s=e.capacity, tier_share=share,
                         quality=quality_cost(counts, {k: v for k, v in self.deltas.items()}), within=e.within)


def tuned_policy(active: Policy, cand: Candidate, slo: NamedSlo, *, version: int, author: str,
                 created_at: Any, budget: str) -> Policy:
    """The draft: the active policy with the candidate's weights and thresholds, and spill aimed at the SLO."""
    rules: list[Rule] = []
    for r in active.rules:
        w = cand.weights.get(r.name, r.weight if r.enabled else 0.0)
        if w == 0.0:  # off: a disabled rule keeps its declared weight, for a later tune to try again
            rules.append(r.model_copy(update={"enabled": False}) if r.enabled else r)
        else:
            rules.append(r.model_copy(update={"weight": w, "enabled": True}) if (w, True) != (r.weight, r.enabled)
                         else r)
    spill = active.spill
    if slo.tpot_p95_ms is not None or slo.ttft_p95_ms is not None:
        spill = spill.model_copy(update={"enabled": True, "tpot_p95_ms": slo.tpot_p95_ms,
                                         "ttft_p95_ms": slo.ttft_p95_ms})
    message = (f"tuned for {slo.label} within {budget}: predicted {cand.capacity_tok_s:,.0f} tok/s, expected loss "
               f"{cand.quality.overall_pts:.2f} pts overall / {cand.quality.worst_pts:.2f} worst "
               f"({cand.quality.worst_category or '-'})")
    return active.model_copy(update={"version": version, "parent": active.version, "author": author,
                                     "created_at": created_at, "message": message, "content_hash": None,
                                     "rules": rules, "thresholds": list(cand.thresholds), "spill": spill})
