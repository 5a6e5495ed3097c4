"""Canary judge (pure): is the candidate arm worse than the baseline arm, by more than each metric allows, and how
sure is that? Called on every controller pass with everything both arms logged since the current step began.

Per metric (policy `guards.judge`, `quantroute.policy.model.Judge`):

* tpot and ttft (continuous, skewed, heavy-tailed): the effect is the Hodges-Lehmann shift of log(value),
  candidate minus baseline, reported as a relative change (exp(shift) - 1; +0.12 = 12 % slower). Its interval is
  the Mann-Whitney (Wilcoxon rank-sum) test inverted: the order statistics of the pairwise differences, found by
  bisection on the shift with a sorted baseline (no n*m matrix). The test statistic is scipy's rank-sum U with the
  tie correction.
* error_rate (a proportion: 5xx and requests with no response): the effect is the difference in rates, candidate
  minus baseline, in absolute points; its interval is Newcombe's hybrid score interval (two Wilson intervals),
  which stays sensible at rates near zero where a Wald interval collapses.

Looking often. The controller judges every few seconds; a fixed-sample 95 % test looked at 100 times would
roll back a healthy canary far more often than 5 % of the time. This judge uses always-valid inference rather
than alpha spending: the mixture sequential probability ratio test (mSPRT; Robbins 1970, Johari et al.,
"Always valid inference", 2017) with a normal mixture of scale tau over the effect. For an estimate with
variance V its confidence sequence is estimate +- c(V) * sqrt(V), with

    c(V) = sqrt((V + tau^2) / tau^2 * (2 ln(1/alpha) + ln((V + tau^2) / V))),

and by Ville's inequality the chance that a null effect ever leaves it, over any number of looks at any times,
is at most alpha. Alpha spending would need the number and timing of looks (and the final sample) fixed in
advance; here the controller's interval, restarts and a person's `rollout guards --watch` all add looks, and the
sample a step gets depends on traffic, so only an always-valid method keeps its promise. The rank interval uses
c(V) in place of the normal quantile; tau is the metric's allowed effect (the mixture is tightest for effects of
that size). The data must accumulate for the guarantee to hold, so the judge gets the whole step, not a sliding
window; a new step starts a new sequence, which is why alpha is split over the rollout's steps.

Alpha = 1 - confidence is the false-rollback rate of a whole rollout: split evenly over its steps and the
critical metrics (Bonferroni). A metric

* fails when its interval lies wholly above zero (a real regression) and its estimate exceeds the allowed effect
  (a regression that matters): a healthy candidate is rolled back with probability at most alpha;
* passes when its interval lies wholly below the allowed effect;
* is inconclusive otherwise (too few requests yet), or has no data (an arm without a single sample).

Overall: fail if a critical metric fails (the caller rolls back), marginal if only non-critical ones fail (holds
for a person), pass if every metric passes, else inconclusive (holds). The score is the weighted share of passing
metrics (0-100), as in Kayenta. Each metric also says how many candidate requests its decision needs at the
configured power: the sample at which a healthy candidate's interval reaches below the allowed effect with
probability `power`, projected from the variance seen so far and the current ratio of baseline to candidate
traffic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel
from scipy.stats import norm

from quantroute.policy.model import CONTINUOUS_METRICS, Judge, JudgeMetric
from quantroute.rollout.shift import Floats, hodges_lehmann, rank_sum_z, shift_interval

MetricVerdictName = Literal["pass", "fail", "inconclusive", "no data"]
OverallVerdict = Literal["pass", "marginal", "fail", "inconclusive"]

LABELS = {"tpot": "time per output token", "ttft": "time to first token", "error_rate": "error rate"}
# Values below this (ms) are floored before taking logs: a logged 0 ms is a clock artefact, not infinitely fast.
MIN_MS = 1e-3
MAX_NEEDED = 10_000_000  # candidate requests; beyond this the sample is reported as unreachable
# A baseline many times larger than the candidate adds little (the variance of a shift goes as 1/n_c + 1/n_b):
# beyond this many baseline values per candidate value (and at least MIN_THINNED) every k-th one is kept, which
# bounds the cost of a look at a small canary share.
MAX_BASELINE_RATIO = 8
MIN_THINNED = 2000


class ArmSample(BaseModel):
    """One arm's requests since the step began: per-request TPOT and TTFT (ms) of the successful ones, and how
    many requests there were and how many failed. Rows that are not finite are dropped where they are built."""

    requests: int = 0
    errors: int = 0
    tpot_ms: list[float] = []
    ttft_ms: list[float] = []

    def values(self, metric: str) -> list[float]:
        return self.tpot_ms if metric == "tpot" else self.ttft_ms


class MetricVerdict(BaseModel):
    metric: str
    label: str
    direction: Literal["higher is worse"] = "higher is worse"
    unit: Literal["relative", "points"]
    critical: bool
    weight: float
    allowed: float  # relative (0.10 = +10 %) or points (0.005)
    verdict: MetricVerdictName
    n_baseline: int
    n_candidate: int
    estimate: float | None = None  # candidate vs baseline, in `unit`
    low: float | None = None  # the always-valid interval at the judge's alpha (None: unbounded)
    high: float | None = None
    p_value: float | None = None  # always-valid p of "no difference"
    needed: int | None = None  # candidate samples this metric needs for a decision at the configured power
    detail: str


class Judgement(BaseModel):
    verdict: OverallVerdict
    score: float  # weighted share of passing metrics, 0-100
    confidence: float
    power: float
    alpha: float  # per metric and step, after the split
    metrics: list[MetricVerdict]
    candidate_requests: int
    needed_more: int | None = None  # candidate requests still needed before every metric can be decided
    minutes_more: float | None = None  # at the candidate's current request rate
    summary: str

    @property
    def needs(self) -> str:
        """'needs ~N more candidate requests (~M min at current traffic)', or '' when nothing more is needed."""
        if self.verdict in ("pass", "fail") or self.needed_more is None:
            return "" if self.verdict in ("pass", "fail") else "sample needed unknown until both arms have data"
        if self.needed_more <= 0:
            return ""
        if self.needed_more >= MAX_NEEDED:
            return "needs more candidate requests than this step can plausibly get: widen the allowed effects"
        mins = f" (~{_minutes(self.minutes_more)} at current traffic)" if self.minutes_more is not None else ""
        return f"needs ~{self.needed_more} more candidate requests{mins}"


# ---- the sequential boundary ------------------------------------------------------------------------------

def boundary(v: float, tau: float, alpha: float) -> float:
    """c(V): the half-width of the confidence sequence in standard errors at variance `v` (see the docstring)."""
    if not (v > 0 and math.isfinite(v)):
        return math.inf
    r = (v + tau * tau) / v
    return math.sqrt((v + tau * tau) / (tau * tau) * (2 * math.log(1 / alpha) + math.log(r)))


def always_valid_p(z: float, v: float, tau: float) -> float:
    """1 / the mixture likelihood ratio of H0 (no effect) at standardised statistic z: Ville's bound."""
    if not (v > 0 and math.isfinite(v) and math.isfinite(z)):
        return 1.0
    log_lr = 0.5 * math.log(v / (v + tau * tau)) + z * z * tau * tau / (2 * (v + tau * tau))
    return float(min(1.0, math.exp(-log_lr)))


# ---- continuous metrics: the rank-sum shift (quantroute.rollout.shift) ------------------------------

def _continuous(m: JudgeMetric, base: list[float], cand: list[float], alpha: float, power_z: float,
                ratio: float) -> MetricVerdict:
    b, c = _logs(base), _logs(cand)
    common = dict(metric=m.metric, label=LABELS[m.metric], unit="relative", critical=m.critical, weight=m.weight,
                  allowed=m.allowed, n_baseline=len(b), n_candidate=len(c))
    if len(b) == 0 or len(c) == 0:
        who = " and ".join(a for a, s in (("candidate", c), ("baseline", b)) if len(s) == 0)
        return MetricVerdict(**common, verdict="no data", detail=f"no {LABELS[m.metric]} sample from the {who} yet")
    _, z = rank_sum_z(c, b)
    if math.isnan(z):
        return MetricVerdict(**common, verdict="inconclusive", estimate=0.0,
                             detail=f"every {LABELS[m.metric]} value is equal in both arms: no spread to judge")
    ys = np.sort(b)
    tau = math.log1p(m.allowed)
    est = hodges_lehmann(c, ys)
    lo1, hi1 = shift_interval(c, ys, 1.0)  # +- one standard error: the variance of the shift estimate
    if lo1 is None or hi1 is None or hi1 <= lo1:
        return MetricVerdict(**common, verdict="inconclusive", estimate=math.expm1(est),
                             detail=f"too few samples for an interval ({len(c)} candidate, {len(b)} baseline)")
    v = ((hi1 - lo1) / 2) ** 2
    lo, hi = shift_interval(c, ys, boundary(v, tau, alpha))
    needed = _needed(lambda n: _decides(_scaled(v, len(c), len(b), n, ratio), tau, alpha, power_z), len(c))
    verdict = _decide(est, lo, hi, tau)
    out = MetricVerdict(**common, verdict=verdict, estimate=math.expm1(est), low=_rel(lo), high=_rel(hi),
                        p_value=always_valid_p(z, 1.0, tau / math.sqrt(v)), needed=needed, detail="")
    return out.model_copy(update={"detail": _detail(out)})


def _rel(d: float | None) -> float | None:
    return None if d is None else math.expm1(d)


def _logs(values: Sequence[float]) -> Floats:
    a = np.asarray(values, dtype=float).ravel()
    a = a[np.isfinite(a)]
    out: Floats = np.log(np.maximum(a, MIN_MS))
    return out


# ---- proportions: difference of rates, Newcombe's interval --------------------------------------------------

def wilson(k: int, n: int, z: float) -> tuple[float, float]:
    """Wilson score interval of k successes in n at critical value z (scipy's binomtest 'wilson' at the same
    level)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z / den * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, mid - half), min(1.0, mid + half)


def newcombe(kc: int, nc: int, kb: int, nb: int, z: float) -> tuple[float, float]:
    """Newcombe's hybrid score interval (method 10) for p_c - p_b at critical value z."""
    pc, pb = kc / nc, kb / nb
    lc, uc = wilson(kc, nc, z)
    lb, ub = wilson(kb, nb, z)
    d = pc - pb
    return d - math.sqrt((pc - lc) ** 2 + (ub - pb) ** 2), d + math.sqrt((uc - pc) ** 2 + (pb - lb) ** 2)


def _proportion(m: JudgeMetric, base: ArmSample, cand: ArmSample, alpha: float, power_z: float,
                ratio: float) -> MetricVerdict:
    nb, nc = base.requests, cand.requests
    common = dict(metric=m.metric, label=LABELS[m.metric], unit="points", critical=m.critical, weight=m.weight,
                  allowed=m.allowed, n_baseline=nb, n_candidate=nc)
    if nb <= 0 or nc <= 0:
        who = " and ".join(a for a, n in (("candidate", nc), ("baseline", nb)) if n <= 0)
        return MetricVerdict(**common, verdict="no data", detail=f"no requests from the {who} yet")
    kb, kc = min(max(base.errors, 0), nb), min(max(cand.errors, 0), nc)
    est = kc / nc - kb / nb
    lo1, hi1 = newcombe(kc, nc, kb, nb, 1.0)
    v = ((hi1 - lo1) / 2) ** 2
    tau = m.allowed
    lo, hi = newcombe(kc, nc, kb, nb, boundary(v, tau, alpha))
    pooled = (kc + kb) / (nc + nb)

    def decided(n: int) -> bool:
        nb_n = max(1, round(n * ratio))
        kc_n, kb_n = round(pooled * n), round(pooled * nb_n)
        l1, h1 = newcombe(kc_n, n, kb_n, nb_n, 1.0)
        vn = ((h1 - l1) / 2) ** 2
        _, high = newcombe(kc_n, n, kb_n, nb_n, boundary(vn, tau, alpha) + power_z)
        return high < tau

    z = est / math.sqrt(v) if v > 0 else 0.0
    out = MetricVerdict(**common, verdict=_decide(est, lo, hi, tau), estimate=est, low=lo, high=hi,
                        p_value=always_valid_p(z, v, tau), needed=_needed(decided, nc), detail="")
    return out.model_copy(update={"detail": _detail(out)})


# ---- decisions and the sample still needed ------------------------------------------------------------------

def _decide(est: float, lo: float | None, hi: float | None, allowed: float) -> MetricVerdictName:
    if lo is not None and lo > 0 and est > allowed:
        return "fail"
    if hi is not None and hi < allowed:
        return "pass"
    return "inconclusive"


def _scaled(v: float, nc: int, nb: int, n: int, ratio: float) -> float:
    """The shift's variance at n candidate samples, from the variance at (nc, nb): it scales with
    1/nc + 1/nb, the baseline growing at `ratio` baseline samples per candidate sample."""
    now = 1 / nc + 1 / nb
    later = 1 / n + 1 / max(1.0, n * ratio)
    return v * later / now


def _decides(v: float, tau: float, alpha: float, power_z: float) -> bool:
    """A healthy candidate's upper bound is below tau with probability `power` at this variance."""
    return (boundary(v, tau, alpha) + power_z) * math.sqrt(v) < tau


def _needed(decided: Callable[[int], bool], n_now: int) -> int:
    """The smallest candidate sample at which `decided` holds (monotone in n), at least n_now; MAX_NEEDED when
    not even that many would do."""
    if decided(max(n_now, 1)):
        return max(n_now, 1)
    lo, hi = max(n_now, 1), max(2 * n_now, 2)
    while not decided(hi):
        lo, hi = hi, hi * 2
        if hi >= MAX_NEEDED:
            return MAX_NEEDED
    while hi - lo > max(1, lo // 100):  # to 1 %: it is an estimate
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if decided(mid) else (mid, hi)
    return hi


def judge(baseline: ArmSample, candidate: ArmSample, spec: Judge, *, steps: int = 1,
          candidate_per_min: float | None = None) -> Judgement:
    """The verdict on one look. `steps`: how many steps the rollout has (alpha is split over them);
    `candidate_per_min`: the candidate's current request rate, to turn the sample still needed into minutes."""
    critical = sum(1 for m in spec.metrics if m.critical)
    alpha = (1 - spec.confidence) / max(1, steps) / max(1, critical)
    power_z = float(norm.ppf(spec.power))
    metrics: list[MetricVerdict] = []
    for m in spec.metrics:
        if m.metric in CONTINUOUS_METRICS:
            b, c = baseline.values(m.metric), candidate.values(m.metric)
            b = thinned(b, max(MIN_THINNED, MAX_BASELINE_RATIO * len(c)))
            ratio = len(b) / len(c) if b and c else 1.0
            metrics.append(_continuous(m, b, c, alpha, power_z, ratio))
        else:
            ratio = baseline.requests / candidate.requests if baseline.requests and candidate.requests else 1.0
            metrics.append(_proportion(m, baseline, candidate, alpha, power_z, ratio))
    return _overall(spec, alpha, metrics, candidate, candidate_per_min)


def thinned(values: list[float], at_most: int) -> list[float]:
    """Evenly spaced values, in arrival order, when there are more than `at_most`."""
    if len(values) <= at_most:
        return values
    idx = np.linspace(0, len(values) - 1, at_most).round().astype(int)
    out: list[float] = np.asarray(values, dtype=float)[idx].tolist()
    return out


def _overall(spec: Judge, alpha: float, metrics: list[MetricVerdict], candidate: ArmSample,
             per_min: float | None) -> Judgement:
    if any(m.verdict == "fail" and m.critical for m in metrics):
        verdict: OverallVerdict = "fail"
    elif any(m.verdict == "fail" for m in metrics):
        verdict = "marginal"
    elif all(m.verdict == "pass" for m in metrics):
        verdict = "pass"
    else:
        verdict = "inconclusive"
    total = sum(m.weight for m in metrics)
    score = 100 * sum(m.weight for m in metrics if m.verdict == "pass") / total if total else 0.0
    open_ = [m for m in metrics if m.verdict in ("inconclusive", "no data")]
    more: int | None = 0
    for m in open_:
        if m.needed is None:
            more = None
            break
        # a metric's samples are a share of the candidate's requests (errors have no TPOT, non-streams no TTFT)
        share = m.n_candidate / candidate.requests if candidate.requests and m.n_candidate else 1.0
        more = max(more or 0, math.ceil(max(0, m.needed - m.n_candidate) / max(share, 1e-9)))
    minutes = more / per_min if more is not None and per_min and per_min > 0 else None
    j = Judgement(verdict=verdict, score=round(score, 1), confidence=spec.confidence, power=spec.power,
                  alpha=alpha, metrics=metrics, candidate_requests=candidate.requests,
                  needed_more=min(more, MAX_NEEDED) if more is not None else None, minutes_more=minutes, summary="")
    return j.model_copy(update={"summary": _summary(j)})


# ---- words ----------------------------------------------------------------------------------------------

def fmt_effect(x: float | None, unit: str) -> str:
    if x is None:
        return "unbounded"
    return f"{100 * x:+.1f} %" if unit == "relative" else f"{100 * x:+.2f} pts"


def _detail(m: MetricVerdict) -> str:
    band = f"allowed {fmt_effect(m.allowed, m.unit)}"
    if m.estimate is None:
        return band
    iv = f"[{fmt_effect(m.low, m.unit)}, {fmt_effect(m.high, m.unit)}]"
    return (f"{m.label} {fmt_effect(m.estimate, m.unit)} {iv} vs {band} "
            f"({m.n_candidate} candidate, {m.n_baseline} baseline)")


def _summary(j: Judgement) -> str:
    by = {"fail": "regressed", "pass": "within bounds", "inconclusive": "undecided", "no data": "no data"}
    parts = [f"{m.metric} {by[m.verdict]}: {m.detail}" for m in j.metrics]
    head = {"fail": "fail", "marginal": "marginal (a non-critical metric regressed; holding for a person)",
            "pass": "pass", "inconclusive": "inconclusive, holding the step"}[j.verdict]
    needs = j.needs
    return (f"judge {head} at {100 * j.confidence:g} % confidence, score {j.score:g}; " + "; ".join(parts)
            + (f"; {needs}" if needs else ""))


def _minutes(m: float | None) -> str:
    if m is None:
        return "?"
    if m < 1:
        return "<1 min"
    return f"{m:.0f} min" if m < 120 else f"{m / 60:.1f} h"
