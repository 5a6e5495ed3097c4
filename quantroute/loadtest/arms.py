"""The policies the fleet experiment compares, derived from a shipped policy for a given fleet (pure).

- `adapt`: the policy's rules and thresholds with tiers rebuilt from the fleet's deployments (the shipped policy
  names llama3-8b deployment ids; the seed-000 fleet serves llama-13b at fp16 and int4 only). Tiers without nodes
  stay in the ladder with no deployments, so a decision for them escalates to the next served tier above.
- `fp16_only`: the seed's baseline: the same rules, but only the fp16 deployment is listed, so every request
  lands on the FP16 nodes.
- `tuned`: for a fleet with only fp16 and int4 the decision is binary; see TUNED_RULES for what changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from quantroute.classify import compile_policy
from quantroute.fleet import Fleet
from quantroute.loadtest.traffic import TrafficLine
from quantroute.policy.model import DeploymentMeta, Policy, Rule, Threshold, TierSpec
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
