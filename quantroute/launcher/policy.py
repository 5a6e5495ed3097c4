"""A policy for a real fleet: the shipped default's rules and thresholds (precise work on high-fidelity
tiers, chatter on INT4), with the tiers, deployments and canary replaced by the fleet's own artifacts.
Where the fleet lacks a tier a threshold names, the threshold moves to the next more faithful tier it has.
Pure: dicts in, a validated policy dict out."""

from __future__ import annotations

import copy
from typing import Any

from quantroute.policy.loader import validate_data

TIER_ORDER = ("fp16", "fp8", "int8", "int4")


def fleet_policy(base: dict[str, Any], *, model: str, tiers: dict[str, list[str]],
                 deployments: dict[str, dict[str, Any]], canary: dict[str, Any] | None = None,
                 message: str = "real fleet", spill: bool = True) -> dict[str, Any]:
    """`base` (e.g. policies/policy-0001.yaml as loaded) with `tiers` (tier -> deployment ids of `model`),
    `deployments` (id -> DeploymentMeta fields) and at most one canary of `model` (None: no canary).
    `spill` False turns SLO-aware spill off: for nodes that share one host's cores, where another tier's node
    has no headroom of its own and spill would only make the tier a request gets follow the host's load."""
    data = copy.deepcopy(base)
    costs = {t["name"]: t.get("cost") for t in data.get("tiers", [])}
    data["tiers"] = [{"name": t, "deployments": {model: list(tiers[t])}, **({"cost": costs[t]} if costs.get(t) else {})}
                     for t in TIER_ORDER if tiers.get(t)]
    data["deployments"] = {dep: {"model": model, **meta} for dep, meta in deployments.items()}
    data["thresholds"] = _thresholds(data.get("thresholds", []), [t["name"] for t in data["tiers"]])
    if not data["thresholds"]:
        raise ValueError(f"tiers: {', '.join(tiers)} meet none of the policy's thresholds; a fleet needs a tier at "
                         "least as faithful as the lowest threshold's")
    present = [t["name"] for t in data["tiers"]]
    escalation = data.get("escalation") or {}
    if escalation.get("max_tier") and escalation["max_tier"] not in present:
        escalation["max_tier"] = present[0]  # the most faithful tier the fleet has
    data["canaries"] = [canary] if canary else []
    if not spill:
        data["spill"] = {**(data.get("spill") or {}), "enabled": False}
    data.update(version=1, parent=None, message=message)
    validate_data(data, source="fleet policy")
    return data


def _thresholds(thresholds: list[dict[str, Any]], present: list[str]) -> list[dict[str, Any]]:
    """Each threshold's tier, or the next more faithful tier the fleet has ("at least fp8" with no fp8 node
    is met by fp16, never by int8); a tier reached from several scores keeps its lowest score."""
    lowest: dict[str, float] = {}
    for th in thresholds:
        required = TIER_ORDER.index(th["tier"])
        admitted = [t for t in present if TIER_ORDER.index(t) <= required]
        if admitted:
            tier = admitted[-1]
            lowest[tier] = min(lowest.get(tier, th["min_score"]), th["min_score"])
    return [{"min_score": score, "tier": tier} for tier, score in sorted(lowest.items(), key=lambda x: -x[1])]
