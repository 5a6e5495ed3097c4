"""Canary guards (pure): compare the candidate arm with the baseline arm over one window of the request log.

Verdicts: pass, breach (which guard, the figures, the window) or inconclusive. Inconclusive means too few
requests to judge; like Argo's inconclusive analysis it holds the step and never passes it. Ratios need both
arms; the error-rate limit is absolute, so it can breach on the candidate's figures alone.

The eval guard (`guards.require_eval_pass`, on by default) judges eval runs, it does not start them: the
service passes the verdict of the newest finished run of the candidate vs the baseline on the pinned suite
recorded since the rollout started (`quantroute eval run`, or the dashboard's Evals page, while it is live).
When that run failed it is a breach on its own, whatever the traffic sample; a newer passing run clears it.

The live agreement guard (`guards.min_live_agreement`, optional) judges shadow pairs: of each arm's
requests shadowed to the reference (top) tier, the share whose answers agreed. The candidate's share may fall
below the baseline's by at most `max_drop`; with fewer than `min_pairs` pairs in either arm it is inconclusive.

Two forms judge the traffic. The ratio form (max_error_rate, the p95 ratios, min_requests over a sliding window)
is the default. With `guards.judge` the statistical judge (`judge.py`) replaces it: per-metric tests on
everything both arms logged since the step began, with always-valid intervals; a critical metric that fails is a
breach, anything short of a pass holds the step. The eval and live agreement guards apply to both forms."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from quantroute.policy.model import Guards, LiveAgreementGuard
from quantroute.rollout.judge import ArmSample, Judgement, judge


class ArmStats(BaseModel):
    """One arm's figures over the window (latencies in milliseconds; None when no sample has one)."""

    requests: int
    errors: int = 0
    p95_latency_ms: float | None = None
    p95_ttft_ms: float | None = None

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


class AgreementStats(BaseModel):
    """One arm's shadow pairs against the reference tier over the window: how many, how many agreed."""

    pairs: int
    agree: int = 0

    @property
    def rate(self) -> float:
        return self.agree / self.pairs if self.pairs else 0.0


class Window(BaseModel):
    start: datetime
    end: datetime
    baseline_start: datetime | None = None  # when the baseline reference is an earlier window (candidate at 100%)
    baseline_end: datetime | None = None


class Breach(BaseModel):
    guard: Literal["error_rate", "p95_latency_ratio", "ttft_ratio", "eval", "live_agreement", "judge"]
    value: float
    limit: float
    detail: str


class GuardVerdict(BaseModel):
    status: Literal["pass", "breach", "inconclusive"]
    breaches: list[Breach] = []
    window: Window | None = None
    baseline: ArmStats | None = None
    candidate: ArmStats | None = None
    agreement: dict[str, AgreementStats] | None = None  # baseline / candidate, when the guard is configured
    judgement: Judgement | None = None  # the statistical form (guards.judge): per-metric effects and intervals
    summary: str


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100): an observed value, stable for small samples."""
    if not values:
        return None
    xs = sorted(values)
    rank = max(1, -(-len(xs) * q // 100))  # ceil(n * q / 100)
    return xs[int(rank) - 1]


def _ratio(cand: float | None, base: float | None) -> float | None:
    if cand is None or base is None or base <= 0:
        return None
    return cand / base


def evaluate(baseline: ArmStats, candidate: ArmStats, guards: Guards, window: Window | None = None,
             eval_failure: str | None = None,
             agreement: tuple[AgreementStats, AgreementStats] | None = None,
             samples: tuple[ArmSample, ArmSample] | None = None, steps: int = 1,
             candidate_per_min: float | None = None) -> GuardVerdict:
    """`eval_failure`: the verdict of a fresh eval run of the candidate that failed (guards.require_eval_pass);
    `agreement`: (baseline, candidate) shadow pairs against the reference tier (guards.min_live_agreement);
    `samples`: (baseline, candidate) per-request samples since the step began, judged when guards.judge is set
    (the ratio checks are then skipped); `steps` and `candidate_per_min` go to the judge."""
    live = guards.min_live_agreement if agreement is not None else None

    def verdict(status: Literal["pass", "breach", "inconclusive"], breaches: list[Breach],
                summary: str, judgement: Judgement | None = None) -> GuardVerdict:
        shown = {"baseline": agreement[0], "candidate": agreement[1]} if agreement is not None else None
        return GuardVerdict(status=status, breaches=breaches, window=window, baseline=baseline,
                            candidate=candidate, agreement=shown, judgement=judgement, summary=summary)

    breaches: list[Breach] = []
    if eval_failure and guards.require_eval_pass:
        breaches.append(Breach(guard="eval", value=1, limit=0, detail=f"a fresh eval run failed: {eval_failure}"))
    few_pairs = _live_agreement(live, agreement, breaches)
    if guards.judge is not None:
        base_s, cand_s = samples if samples is not None else (ArmSample(), ArmSample())
        j = judge(base_s, cand_s, guards.judge, steps=steps, candidate_per_min=candidate_per_min)
        breaches += [Breach(guard="judge", value=m.estimate or 0.0, limit=m.allowed, detail=m.detail)
                     for m in j.metrics if m.verdict == "fail" and m.critical]
        if breaches:
            return verdict("breach", breaches, "; ".join(f"{b.guard}: {b.detail}" for b in breaches), j)
        if j.verdict != "pass":
            return verdict("inconclusive", [], j.summary, j)
        if few_pairs:
            return verdict("inconclusive", [], _few_pairs(few_pairs), j)
        return verdict("pass", [], j.summary, j)
    n_min = guards.min_requests
    if candidate.requests >= n_min and candidate.error_rate > guards.max_error_rate:
        breaches.append(Breach(guard="error_rate", value=candidate.error_rate, limit=guards.max_error_rate,
                               detail=(f"candidate error rate {candidate.error_rate:.1%} ({candidate.errors}/"
                                       f"{candidate.requests}) > {guards.max_error_rate:.1%} (baseline "
                                       f"{baseline.error_rate:.1%} of {baseline.requests})")))
    both = candidate.requests >= n_min and baseline.requests >= n_min
    if both:
        breaches += ratio_breaches(baseline, candidate, guards)
    if breaches:
        return verdict("breach", breaches, "; ".join(f"{b.guard}: {b.detail}" for b in breaches))
    if not both:
        short = [f"{arm} {s.requests}/{n_min}" for arm, s in (("candidate", candidate), ("baseline", baseline))
                 if s.requests < n_min]
        return verdict("inconclusive", [], f"too few requests in the window ({', '.join(short)} needed); "
                                           "holding the step")
    if few_pairs:
        return verdict("inconclusive", [], _few_pairs(few_pairs))
    summary = _pass_summary(baseline, candidate)
    if live is not None and agreement is not None:
        summary += f", live agreement {agreement[1].rate:.1%} vs {agreement[0].rate:.1%}"
    return verdict("pass", [], summary)


def ratio_breaches(baseline: ArmStats, candidate: ArmStats, guards: Guards) -> list[Breach]:
    """The p95 latency and TTFT ratio checks of the ratio form."""
    out: list[Breach] = []
    for guard, key, limit in (("p95_latency_ratio", "p95_latency_ms", guards.max_p95_latency_ratio),
                              ("ttft_ratio", "p95_ttft_ms", guards.max_ttft_ratio)):
        c, b = getattr(candidate, key), getattr(baseline, key)
        r = _ratio(c, b)
        if r is not None and r > limit:
            what = "p95 latency" if key == "p95_latency_ms" else "p95 TTFT"
            out.append(Breach(guard=guard, value=r, limit=limit,
                              detail=f"candidate {what} {c:.0f} ms / baseline {b:.0f} ms = {r:.2f}x > {limit:g}x"))
    return out


def _live_agreement(live: LiveAgreementGuard | None, agreement: tuple[AgreementStats, AgreementStats] | None,
                    breaches: list[Breach]) -> list[str]:
    """Appends the live agreement breach, if any; returns the arms with too few shadow pairs."""
    if live is None or agreement is None:
        return []
    base_a, cand_a = agreement
    few = [f"{arm} {a.pairs}/{live.min_pairs}" for arm, a in (("candidate", cand_a), ("baseline", base_a))
           if a.pairs < live.min_pairs]
    drop = base_a.rate - cand_a.rate
    if not few and drop > live.max_drop:
        breaches.append(Breach(guard="live_agreement", value=drop, limit=live.max_drop,
                               detail=(f"candidate agrees with the reference tier on {cand_a.rate:.1%} of "
                                       f"{cand_a.pairs} shadow pairs, baseline on {base_a.rate:.1%} of "
                                       f"{base_a.pairs}: {100 * drop:.1f} points lower > {100 * live.max_drop:g}")))
    return few


def _few_pairs(few: list[str]) -> str:
    return (f"too few shadow pairs against the reference tier ({', '.join(few)} needed) for the live agreement "
            "guard; holding the step")


def _pass_summary(b: ArmStats, c: ArmStats) -> str:
    parts = [f"errors {c.error_rate:.1%} vs {b.error_rate:.1%}"]
    for label, key in (("p95", "p95_latency_ms"), ("TTFT p95", "p95_ttft_ms")):
        r = _ratio(getattr(c, key), getattr(b, key))
        if r is not None:
            parts.append(f"{label} {r:.2f}x")
    return f"pass (candidate {c.requests}, baseline {b.requests} requests): " + ", ".join(parts)


def arm_stats(rows: list[tuple[int, float, float | None]]) -> ArmStats:
    """From (status, latency_ms, ttft_ms) rows. An error is a 5xx, or a failed request with no response
    (status 0); 4xx are the client's mistakes and 499 the client leaving: they are left out altogether (not
    in the request count either), so a flood of invalid requests cannot dilute an arm's error rate."""
    rows = [r for r in rows if not 400 <= r[0] < 500]
    errors = sum(1 for status, _, _ in rows if status >= 500 or status == 0)
    lat = [lat for status, lat, _ in rows if status < 400]
    ttft = [t for status, _, t in rows if t is not None and status < 400]
    return ArmStats(requests=len(rows), errors=errors, p95_latency_ms=percentile(lat, 95),
                    p95_ttft_ms=percentile(ttft, 95))


def arm_sample(rows: list[tuple[int, float, float | None, int | None]]) -> ArmSample:
    """The judge's per-request sample from (status, latency_ms, ttft_ms, completion_tokens) rows, counted like
    `arm_stats` (4xx left out; 5xx and status 0 are errors). TPOT of a successful request: (latency - TTFT) /
    (tokens - 1) when the TTFT was measured (streams) and it has two tokens or more, else latency / tokens; a
    request with no output tokens or a figure that is not finite gives none."""
    rows = [r for r in rows if not 400 <= r[0] < 500]
    errors = sum(1 for r in rows if r[0] >= 500 or r[0] == 0)
    tpot: list[float] = []
    ttft: list[float] = []
    for status, lat, t, tokens in rows:
        if status >= 400 or status == 0:
            continue
        if t is not None and math.isfinite(t) and t >= 0:
            ttft.append(float(t))
        if tokens is None or tokens < 1 or lat is None or not math.isfinite(lat):
            continue
        if t is not None and math.isfinite(t) and tokens >= 2 and lat >= t:
            tpot.append((lat - t) / (tokens - 1))
        else:
            tpot.append(lat / tokens)
    return ArmSample(requests=len(rows), errors=errors, tpot_ms=tpot, ttft_ms=ttft)
