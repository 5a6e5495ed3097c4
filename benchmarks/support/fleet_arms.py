"""The arms the fleet experiment compares: fleets and policies derived from a shipped policy for a given fleet (pure).

- `adapt`: the policy's rules and thresholds with tiers rebuilt from the fleet's deployments (the shipped policy
  names llama3-8b deployment ids; the seed-000 fleet serves llama-13b at fp16 and int4 only). Tiers without nodes
  stay in the ladder with no deployments, so a decision for them escalates to the next served tier above.
- `fp16_only`: the seed's baseline: the same rules, but only the fp16 deployment is listed, so every request
  lands on the FP16 nodes.
- `tuned`: for a fleet with only fp16 and int4 the decision is binary; see TUNED_RULES for what changes.
- `all_fp16`: the same nodes, every one serving the FP16 deployment: the equal-hardware baseline.
- `blind` with `blind_view`: precision-blind least-loaded routing over all nodes, no policy: the router sees every
  node as one tier (its fleet view relabels the INT4 deployment), so each request goes to the least-loaded node
  whatever its precision. The throughput ceiling, with no quality protection.
- `threshold_grid`: policies with one threshold (score >= t needs FP16, below runs on INT4) for every score the
  traffic produces, with and without TUNED_RULES, each with the tiers it sends the traffic to (pins respected).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from quantroute.classify import compile_policy
from quantroute.fleet import Fleet, NodeSpec
from quantroute.loadtest.traffic import TrafficLine
from quantroute.policy.model import DeploymentMeta, Policy, Rule, Threshold, TierSpec
from quantroute.quality_cost import request_category
from quantroute.tiers import Tier, cheapest_served_tier

# Why these: greedy decoding is where quantization noise flips the winning token (seed 000), so temperature <= 0.2
# alone is worth a higher tier; rewriting tasks (summaries, extraction, translation) must stay faithful to a
# source. With no fp8/int8 nodes, the int8 band (score 0..2) escalated to fp16 under the default policy; the tuned
# policy sends score <= 0 to int4 instead and everything from 1 up to fp16.
TUNED_RULES = [
    {"name": "greedy-decoding", "weight": 3, "description": "Temperature <= 0.2 (seed 000: greedy decoding).",
     "when": {"temperature": {"max": 0.2}}},
    {"name": "faithful-rewrite", "weight": 1, "description": "Summaries, extraction and translation.",
     "when": {"keywords": {"scope": "prompt", "any": ["summarise", "summarize", "summary", "extract",
                                                      "translate", "tl;dr"]}}},
]
TUNED_THRESHOLDS = [{"min_score": 1, "tier": "fp16"}]


def adapt(policy: Policy, fleet: Fleet, *, only: set[Tier] | None = None, message: str = "") -> Policy:
    """`policy` with tiers and deployment metadata taken from `fleet` (tiers outside `only` get no deployments)."""
    tiers = []
    for t in policy.tiers:
        deps: dict[str, list[str]] = {}
        for n in fleet.nodes:
            d = n.deployment
            if d.tier == t.name and (only is None or t.name in only) and d.id not in deps.get(d.model, []):
                deps.setdefault(d.model, []).append(d.id)
        tiers.append(TierSpec(name=t.name, cost=t.cost, deployments=deps))
    metas = {n.deployment.id: DeploymentMeta(model=n.deployment.model, format=n.deployment.format,
                                             method=n.deployment.method, checksum=n.deployment.checksum,
                                             calibration_set=n.deployment.calibration_set or "",
                                             eval_suite=n.deployment.eval_suite or "")
             for n in fleet.nodes if only is None or n.deployment.tier in only}
    return policy.model_copy(update={"tiers": tiers, "deployments": metas, "canaries": [],
                                     "message": message or policy.message})


def fp16_only(policy: Policy, fleet: Fleet) -> Policy:
    return adapt(policy, fleet, only={Tier.fp16}, message="baseline: every request on the FP16 nodes")


def tuned(policy: Policy, fleet: Fleet) -> Policy:
    base = adapt(policy, fleet, message="tuned for an fp16 + int4 fleet: greedy and rewrite tasks on fp16, "
                                        "score <= 0 on int4")
    rules = [*base.rules, *(Rule.model_validate(r) for r in TUNED_RULES)]
    return base.model_copy(update={"rules": rules,
                                   "thresholds": [Threshold.model_validate(t) for t in TUNED_THRESHOLDS]})


def served_tiers(policy: Policy, model: str) -> set[Tier]:
    return {t.name for t in policy.tiers if t.deployments.get(model)}


def needed_tiers(policy: Policy, lines: Iterable[TrafficLine]) -> Counter:
    """Per request, the cheapest served tier its own decision allows (ignoring pins and load): what the traffic
    *needs* from this fleet under this policy."""
    compiled = compile_policy(policy)
    out: Counter = Counter()
    for ln in lines:
        model = ln.body["model"]
        kind = "chat" if "messages" in ln.body else "completion"
        tier = cheapest_served_tier(compiled.classify(ln.body, ln.headers, kind).tier, served_tiers(policy, model))
        out[tier.value if tier else "none"] += 1
    return out


def top_tier_share(policy: Policy, lines: Iterable[TrafficLine]) -> tuple[float, bool]:
    """Share of requests needing the top (fp16) tier, and whether the policy's fleet-composition warning fires
    (seed 000: above ~70 % it is a fleet-composition problem, not a scheduling one)."""
    counts = needed_tiers(policy, lines)
    total = sum(counts.values())
    share = counts.get(Tier.fp16.value, 0) / total if total else 0.0
    return share, share > policy.fleet_warning.top_tier_share


def _fp16_deployment(fleet: Fleet, model: str):
    dep = next((n.deployment for n in fleet.nodes if n.deployment.tier == Tier.fp16 and n.deployment.model == model),
               None)
    if dep is None:
        raise ValueError(f"the fleet has no fp16 deployment of {model!r} to put on every node")
    return dep


def all_fp16(fleet: Fleet) -> Fleet:
    """Every node serving its model's FP16 deployment, on the same hardware: the equal-hardware baseline."""
    nodes = [n if n.deployment.tier == Tier.fp16 else n.model_copy(
        update={"deployment": _fp16_deployment(fleet, n.deployment.model)}) for n in fleet.nodes]
    return fleet.model_copy(update={"nodes": nodes})


def blind_view(fleet: Fleet) -> Fleet:
    """The fleet as the router sees it in the precision-blind arm: every deployment labelled FP16 (same ids, so
    the nodes still answer to them), so one tier holds every node and least-loaded picks among all of them.
    Only the router's view: the simulated nodes keep their real formats and speeds."""
    def fp16(n: NodeSpec) -> NodeSpec:
        if n.deployment.tier == Tier.fp16:
            return n
        return n.model_copy(update={"deployment": n.deployment.model_copy(update={"tier": Tier.fp16,
                                                                                   "format": "fp16"})})
    return fleet.model_copy(update={"nodes": [fp16(n) for n in fleet.nodes]})


def blind(policy: Policy, fleet: Fleet) -> Policy:
    """No rules, no thresholds: every request to the one tier of `blind_view(fleet)`."""
    base = adapt(policy, blind_view(fleet), message="precision-blind: least-loaded node of any precision")
    return base.model_copy(update={"rules": [], "thresholds": [Threshold(min_score=0, tier=Tier.fp16)]})


def with_threshold(policy: Policy, min_score: float, *, extra_rules: bool) -> Policy:
    rules = [*policy.rules, *(Rule.model_validate(r) for r in TUNED_RULES)] if extra_rules else list(policy.rules)
    return policy.model_copy(update={
        "rules": rules, "thresholds": [Threshold(min_score=min_score, tier=Tier.fp16)],
        "message": f"grid: score >= {min_score:g} on fp16, below on int4"
                   + (" (with the greedy / rewrite rules)" if extra_rules else "")})


def served_pairs(policy: Policy, lines: Sequence[TrafficLine]) -> list[tuple[str, str]]:
    """(eval category, tier) for every line as the policy would route it with room everywhere: each request's
    cheapest allowed served tier, and a session's later turns on its first turn's tier (the pin)."""
    compiled = compile_policy(policy)
    first: dict[str, str] = {}
    out = []
    for ln in lines:
        kind = "chat" if "messages" in ln.body else "completion"
        tier = cheapest_served_tier(compiled.classify(ln.body, ln.headers, kind).tier,
                                    served_tiers(policy, ln.body["model"]))
        name = tier.value if tier else "none"
        if ln.session is not None:
            name = first.setdefault(ln.session, name)
        out.append((request_category(ln.body), name))
    return out


@dataclass(frozen=True)
class GridPoint:
    threshold: float
    extra_rules: bool
    policy: Policy
    pairs: list[tuple[str, str]]  # (category, tier) per request, as served_pairs

    @property
    def int4_share(self) -> float:
        return sum(t == Tier.int4.value for _, t in self.pairs) / len(self.pairs) if self.pairs else 0.0

    @property
    def label(self) -> str:
        return f"t={self.threshold:g}" + ("+rules" if self.extra_rules else "")


def threshold_grid(policy: Policy, lines: Sequence[TrafficLine]) -> list[GridPoint]:
    """One point per distinct threshold the traffic's scores allow (each score, and one above them all), with
    the policy's rules and with TUNED_RULES added; most INT4 first."""
    points = []
    for extra in (False, True):
        probe = with_threshold(policy, 0, extra_rules=extra)
        compiled = compile_policy(probe)
        scores = sorted({compiled.classify(ln.body, ln.headers, "chat" if "messages" in ln.body else "completion")
                         .score for ln in lines})
        for t in [*scores, scores[-1] + 1] if scores else [0.0]:
            pol = with_threshold(policy, t, extra_rules=extra)
            points.append(GridPoint(t, extra, pol, served_pairs(pol, lines)))
    return sorted(points, key=lambda p: (-p.int4_share, p.threshold, p.extra_rules))
