"""The policy schema: pydantic models are the single description of a policy YAML file.

A policy version is desired state (which tiers a request may use, how sessions and canaries behave). What
happened (approvals, activations, canary status) lives in the database, never in these files."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from quantroute.policy.condition import Condition, Strict
from quantroute.tiers import TIER_ORDER, Tier


class Rule(Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9_.-]*$")]
    description: str = ""
    weight: float
    when: Condition
    enabled: bool = True


# ---- tiers, deployments, thresholds ----------------------------------------------------------------------

class TierSpec(Strict):
    name: Tier
    # logical model -> deployment ids of that model at this tier
    deployments: dict[str, list[str]] = Field(default_factory=dict)
    cost: float | None = Field(default=None, gt=0, description="relative cost per token, informative")


class DeploymentMeta(Strict):
    """Artifact metadata. A quantized checkpoint without calibration and eval metadata is untraceable."""

    model: str
    format: str = ""
    method: str = "none"
    calibration_set: str = ""
    eval_suite: str = ""
    checksum: str = ""


class Threshold(Strict):
    """A score at or above min_score requires at least `tier`."""

    min_score: float
    tier: Tier


class OutputEstimate(Strict):
    """How to estimate output length when the client sends no max_tokens."""

    default_tokens: int = Field(default=256, ge=1)
    long_keywords: list[str] = Field(default_factory=lambda: ["detailed", "comprehensive", "in depth",
                                                              "essay", "report", "full implementation"])
    long_tokens: int = Field(default=1500, ge=1)
    # "write 3000 words" -> ~1.33 tokens per word
    tokens_per_word: float = Field(default=1.33, gt=0)


class Sessions(Strict):
    affinity: bool = True
    header: str = Field(default="x-session-id", min_length=1)
    ttl_s: int = Field(default=3600, ge=1)
    on_full: Literal["wait"] = "wait"
    max_wait_ms: int = Field(default=2000, ge=0)
    quiescence_s: int = Field(default=60, ge=0)


class Escalation(Strict):
    enabled: bool = True
    max_tier: Tier = Tier.fp16  # the highest-fidelity tier an unpinned request may be escalated to


class HeaderPolicy(Strict):
    allow_lower: bool = False  # may x-min-tier lower the minimum tier below what the score requires?
    priority_header: str = "x-priority"
    latency_budget_header: str = "x-latency-budget-ms"
    min_tier_header: str = "x-min-tier"


class LiveAgreementGuard(Strict):
    """The candidate's agreement with the reference (top) tier on shadow pairs must not fall below the
    baseline's by more than `max_drop`; with fewer than `min_pairs` pairs in either arm the guard is
    inconclusive, which holds the step."""

    max_drop: float = Field(default=0.02, ge=0, le=1, description="largest allowed drop in agreement rate "
                            "(0.02 = 2 points) of the candidate below the baseline")
    min_pairs: int = Field(default=30, ge=1, description="shadow pairs each arm needs in the window")


JudgeMetricName = Literal["tpot", "ttft", "error_rate"]
# relative effects (0.10 = +10 %) for the continuous metrics, absolute points (0.005 = +0.5 points) for proportions
CONTINUOUS_METRICS: tuple[str, ...] = ("tpot", "ttft")


class JudgeMetric(Strict):
    """One metric the statistical judge compares between the arms. `allowed`: the largest regression tolerated,
    relative for tpot and ttft (0.10 = the candidate may be 10 % slower), in absolute points for error_rate
    (0.005 = 0.5 points more errors). `critical`: a failure rolls back; a non-critical one holds (marginal)."""

    metric: JudgeMetricName
    allowed: float
    critical: bool = True
    weight: float = 1.0

    @field_validator("allowed")
    @classmethod
    def _allowed(cls, v: float) -> float:
        if not (math.isfinite(v) and 0 < v <= 10):
            raise ValueError(f"allowed = {v}: an allowed effect must be > 0 (and at most 10, i.e. +1000 %); "
                             "e.g. 0.10 for +10 % TPOT or 0.005 for +0.5 points of errors")
        return v

    @field_validator("weight")
    @classmethod
    def _weight(cls, v: float) -> float:
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"weight = {v}: a metric's weight in the score must be > 0")
        return v

    @model_validator(mode="after")
    def _points(self) -> JudgeMetric:
        if self.metric not in CONTINUOUS_METRICS and self.allowed >= 1:
            raise ValueError(f"allowed = {self.allowed}: {self.metric} is a proportion, its allowed effect is in "
                             "absolute points in (0, 1), e.g. 0.005 for +0.5 points")
        return self


def _default_judge_metrics() -> list[JudgeMetric]:
    return [JudgeMetric(metric="tpot", allowed=0.10), JudgeMetric(metric="ttft", allowed=0.20),
            JudgeMetric(metric="error_rate", allowed=0.01)]


class Judge(Strict):
    """The statistical form of the canary guards (rollout/judge.py): per metric a rank test (tpot, ttft) or a
    two-proportion comparison (error_rate) of the candidate arm against the baseline arm since the step began,
    with always-valid intervals, so looking on every controller pass does not raise the false-rollback rate.
    `confidence`: 1 - the false-rollback rate allowed over the whole rollout (split over its steps and critical
    metrics); `power`: the chance a healthy step's sample suffices, used to say how many requests a step needs."""

    metrics: list[JudgeMetric] = Field(default_factory=_default_judge_metrics, min_length=1)
    confidence: float = 0.95
    power: float = 0.8
    # Seconds after each step starts whose requests are not judged: a new node or cache warming up is slow for a
    # while, and the judge takes everything since the step began as one sample.
    warmup_s: int = 0

    @field_validator("warmup_s")
    @classmethod
    def _warmup(cls, v: int) -> int:
        if not 0 <= v <= 86_400:
            raise ValueError(f"warmup_s = {v}: seconds in [0, 86400] after a step starts that are not judged")
        return v

    @field_validator("confidence", "power")
    @classmethod
    def _open_unit(cls, v: float, info: ValidationInfo) -> float:
        if not (math.isfinite(v) and 0.5 < v < 1):
            raise ValueError(f"{info.field_name} = {v}: must be in (0.5, 1), e.g. 0.95")
        return v

    @field_validator("metrics")
    @classmethod
    def _unique(cls, ms: list[JudgeMetric]) -> list[JudgeMetric]:
        names = [m.metric for m in ms]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"metric {dup[0]!r} is listed twice; each metric once")
        if not any(m.critical for m in ms):
            raise ValueError("no metric is critical: at least one must be, or nothing can roll the canary back")
        return ms


class Guards(Strict):
    max_error_rate: float = Field(default=0.02, ge=0, le=1)
    max_p95_latency_ratio: float = Field(default=1.5, gt=0)
    max_ttft_ratio: float = Field(default=1.5, gt=0)
    window_s: int = Field(default=300, ge=1)
    min_requests: int = Field(default=50, ge=1)
    require_eval_pass: bool = True
    # Consecutive breaching evaluations before the automatic rollback (Argo's failureLimit, Flagger's
    # threshold). Below it a breach holds the step; a passing or inconclusive evaluation resets the count.
    failure_limit: int = Field(default=1, ge=1)
    # Live shadow agreement with the reference tier; absent = not guarded (and not in the stored
    # content, so versions written before it keep their hashes)
    min_live_agreement: LiveAgreementGuard | None = None
    # The statistical form (Judge): when set it replaces the ratio checks above (max_error_rate,
    # max_p95_latency_ratio, max_ttft_ratio, min_requests); window_s then only bounds the charts. Absent = the
    # ratio form (and not in the stored content, so earlier versions keep their hashes).
    judge: Judge | None = None


DEFAULT_STEPS: tuple[float, ...] = (1, 5, 10, 25, 50, 100)  # percent of the model's traffic per canary step


class CanarySpec(Strict):
    model: str
    baseline: str
    candidate: str
    steps: list[float] = Field(default_factory=lambda: list(DEFAULT_STEPS), min_length=1)
    percent: float = Field(default=0, ge=0, le=100)
    guards: Guards = Field(default_factory=Guards)
    auto_advance_s: int | None = Field(default=None, ge=1)

    @field_validator("steps")
    @classmethod
    def _steps(cls, steps: list[float]) -> list[float]:
        for i, s in enumerate(steps):
            if not 0 < s <= 100:
                raise ValueError(f"steps[{i}] = {s}: each step is a percent in (0, 100]")
        if any(b <= a for a, b in zip(steps, steps[1:])):
            raise ValueError(f"steps must increase strictly, got {steps}")
        return steps


class ShadowPairSpec(Strict):
    """Where a sampled request's shadow goes: requests served at one of `served` tiers are also sent to the
    `shadow` tier (a lower tier: is it good enough? the top tier: how far is the served tier from it?), or, with
    `canary`, requests served by either arm of a running canary are also sent to the other arm's deployment."""

    served: list[Tier] = Field(default_factory=list)
    shadow: Tier | None = None
    canary: bool = False

    @model_validator(mode="after")
    def _one_kind(self) -> ShadowPairSpec:
        if self.canary:
            if self.served or self.shadow is not None:
                raise ValueError("a canary pair takes no served or shadow tiers (it pairs the two arms)")
        elif not self.served or self.shadow is None:
            raise ValueError("give served tiers and a shadow tier, or canary: true")
        elif self.shadow in self.served:
            raise ValueError(f"the shadow tier {self.shadow.value!r} is also a served tier: a deployment is not "
                             "compared with its own tier")
        return self


def _default_pairs() -> list[ShadowPairSpec]:
    return [ShadowPairSpec(served=[Tier.fp8, Tier.int8, Tier.int4], shadow=Tier.fp16),
            ShadowPairSpec(served=[Tier.fp16], shadow=Tier.int4)]


class Shadow(Strict):
    """Shadow comparison on live traffic: a share of eligible requests is also sent, after the
    client's answer, to a second deployment; the two answers are compared and stored. It never delays or changes
    the client's response, and shadow requests are counted apart from user traffic everywhere."""

    rate: float = Field(default=0.0, ge=0, le=1, description="share of eligible requests shadowed")
    max_temperature: float = Field(default=0.0, ge=0, le=2, description="eligible up to this temperature "
                                   "(0: greedy only, where two deployments of one model should agree)")
    streams: bool = Field(default=True, description="streamed requests are eligible too")
    max_request_bytes: int = Field(default=65_536, ge=1, description="larger request bodies are not shadowed")
    max_output_tokens: int | None = Field(default=1024, ge=1, description="requests asking for more are not "
                                          "shadowed (unset: any)")
    max_target_load: float = Field(default=4.0, ge=0, description="shadow only to a node whose load (router "
                                   "in-flight + shadows + scraped waiting + 8 x KV-cache usage, per speed) is "
                                   "at most this")
    max_concurrent: int = Field(default=4, ge=1, description="shadow requests in flight per router replica")
    timeout_s: float = Field(default=60.0, gt=0, description="a shadow request still running after this is "
                             "abandoned (and recorded as a timeout)")
    pairs: list[ShadowPairSpec] = Field(default_factory=_default_pairs, min_length=1)


class Spill(Strict):
    """SLO-aware spill: a request whose cheapest allowed tier is at its knee (its nodes would serve the next
    request slower than the SLO) goes up to a higher tier's node with headroom; never down. A node's knee comes
    from the capacity model for its hardware and format (the decode step at its batch), scaled by the TPOT and
    TTFT the router recently observed on it, and from its queue and KV-cache use. Pinned sessions keep their
    tier: only a session's first turn (or a request without one) may spill, and its pin is the tier it got."""

    enabled: bool = True
    tpot_p95_ms: float | None = Field(default=30.0, gt=0, description="the TPOT a node's next request should "
                                      "stay under (ms); unset: TPOT is not watched")
    ttft_p95_ms: float | None = Field(default=None, gt=0, description="the TTFT a node's recent requests should "
                                      "stay under (ms); unset: TTFT is not watched")
    max_kv_usage: float = Field(default=0.95, gt=0, le=1, description="a node whose KV cache is this full is at "
                                "its knee (a new sequence would wait for room)")


class FleetWarning(Strict):
    top_tier_share: float = Field(default=0.7, gt=0, le=1)


# ---- the policy -------------------------------------------------------------------------------------------

class Policy(Strict):
    version: int = Field(ge=1)
    parent: int | None = None
    author: str = Field(min_length=1)
    created_at: datetime
    message: str = ""
    content_hash: str | None = None

    tiers: list[TierSpec] = Field(min_length=1)
    deployments: dict[str, DeploymentMeta] = Field(default_factory=dict)
    rules: list[Rule] = Field(default_factory=list)
    thresholds: list[Threshold] = Field(min_length=1)
    output_estimate: OutputEstimate = Field(default_factory=OutputEstimate)
    sessions: Sessions = Field(default_factory=Sessions)
    escalation: Escalation = Field(default_factory=Escalation)
    headers: HeaderPolicy = Field(default_factory=HeaderPolicy)
    canaries: list[CanarySpec] = Field(default_factory=list)
    fleet_warning: FleetWarning = Field(default_factory=FleetWarning)
    # absent = no shadow traffic (and not in the stored content, so earlier versions keep their hashes)
    shadow: Shadow | None = None
    # absent = the defaults (spill on, TPOT 30 ms); left out of the stored content while default, for the hashes
    spill: Spill = Field(default_factory=Spill)

    # -- lookups used by the router, rollouts and the dashboard

    def tier_ladder(self) -> list[Tier]:
        return [t.name for t in self.tiers]

    def models(self) -> set[str]:
        return {m for t in self.tiers for m in t.deployments}

    def deployments_for(self, model: str, tier: Tier) -> list[str]:
        for t in self.tiers:
            if t.name == tier:
                return list(t.deployments.get(model, []))
        return []

    def deployment_tier(self, deployment: str) -> Tier | None:
        for t in self.tiers:
            for deps in t.deployments.values():
                if deployment in deps:
                    return t.name
        return None

    def deployment_model(self, deployment: str) -> str | None:
        for t in self.tiers:
            for model, deps in t.deployments.items():
                if deployment in deps:
                    return model
        return None

    def canary_for(self, model: str) -> CanarySpec | None:
        return next((c for c in self.canaries if c.model == model), None)

    def minimum_tier(self, score: float) -> Tier:
        """The tier of the highest threshold the score reaches; below every threshold: the cheapest tier."""
        return tier_for_score(self.score_tiers(), self.cheapest_tier(), score)

    def score_tiers(self) -> tuple[tuple[float, Tier], ...]:
        """(min_score, tier) of every threshold, highest first (equal scores: in file order)."""
        return tuple(sorted(((th.min_score, th.tier) for th in self.thresholds), key=lambda x: -x[0]))

    def cheapest_tier(self) -> Tier:
        return max(self.tier_ladder(), key=lambda t: t.rank)


def tier_for_score(score_tiers: tuple[tuple[float, Tier], ...], floor: Tier, score: float) -> Tier:
    """The tier of the first (highest) threshold `score` reaches, else `floor`. The classifier keeps the two
    tables per compiled policy and calls this per request."""
    for min_score, tier in score_tiers:
        if score >= min_score:
            return tier
    return floor


def tier_rank_ok(ladder: list[Tier]) -> bool:
    return [t.rank for t in ladder] == sorted(t.rank for t in ladder)


NEG_INF = -math.inf
ALL_TIERS = TIER_ORDER
