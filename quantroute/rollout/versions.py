"""Policy versions a rollout writes (pure: Policy in, Policy out; the store stamps and validates them).

Each traffic change is a new immutable version: the canary's percent, the promotion (the candidate takes the
baseline's place in its tier and the canary spec is retired) or the restoration after rolling a promotion back."""

from __future__ import annotations

from quantroute.policy.model import CanarySpec, DeploymentMeta, Policy

REQUIRED_METADATA = ("format", "method", "calibration_set", "eval_suite", "checksum")


def missing_metadata(policy: Policy, deployment: str) -> tuple[str, ...]:
    """Artifact fields a candidate must carry before it may take traffic (an artifact without calibration and
    eval metadata cannot be traced). `method: none` is no quantization method, so it counts as missing."""
    meta: DeploymentMeta | None = policy.deployments.get(deployment)
    if meta is None:
        return tuple(f"deployments.{deployment}.{f}" for f in REQUIRED_METADATA)
    out = []
    for f in REQUIRED_METADATA:
        v = getattr(meta, f)
        if not v or (f == "method" and v == "none"):
            out.append(f)
    return tuple(out)


def with_percent(policy: Policy, model: str, percent: float) -> Policy:
    """The same policy with `model`'s canary at `percent`."""
    canaries = [c.model_copy(update={"percent": percent}) if c.model == model else c for c in policy.canaries]
    if not any(c.model == model for c in policy.canaries):
        raise ValueError(f"canaries: no canary for model {model!r} in policy version {policy.version}")
    return policy.model_copy(update={"canaries": canaries})


def promoted(policy: Policy, model: str) -> Policy:
    """The candidate replaces the baseline in its tier (same position, so the tier keeps its order of
    preference); the baseline's metadata stays in the earlier versions; the canary spec is retired."""
    spec: CanarySpec | None = policy.canary_for(model)
    if spec is None:
        raise ValueError(f"canaries: no canary for model {model!r} in policy version {policy.version}")
    tiers = []
    for t in policy.tiers:
        deps = t.deployments.get(model)
        if deps and spec.baseline in deps:
            new = [spec.candidate if d == spec.baseline else d for d in deps if d != spec.candidate]
            t = t.model_copy(update={"deployments": {**t.deployments, model: new}})
        tiers.append(t)
    deployments = {k: v for k, v in policy.deployments.items() if k != spec.baseline}
    return policy.model_copy(update={"tiers": tiers, "deployments": deployments,
                                     "canaries": [c for c in policy.canaries if c.model != model]})


def restored(policy: Policy, before: Policy, model: str) -> Policy:
    """Undo a promotion: tiers, metadata and canary spec as they were before the rollout, canary at 0%."""
    spec = before.canary_for(model)
    if spec is None:
        raise ValueError(f"canaries: policy version {before.version} has no canary for {model!r} to restore")
    canaries = [c for c in policy.canaries if c.model != model] + [spec.model_copy(update={"percent": 0})]
    return policy.model_copy(update={"tiers": before.tiers, "deployments": before.deployments,
                                     "canaries": canaries})
