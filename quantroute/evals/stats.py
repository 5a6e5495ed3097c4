"""Paired statistics for a baseline/candidate eval (pure: no I/O).

Each item was asked of both arms, so the comparison is paired: the delta is the mean of per-item differences,
its 95 % CI comes from resampling items (both answers together), and the significance test is the exact
McNemar test, which looks only at the discordant items (pass in one arm, fail in the other)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel
from scipy.stats import binomtest

BOOTSTRAP_SAMPLES = 4000


class Pair(BaseModel):
    """One item's outcome in both arms."""
    item_id: str
    category: str
    base_pass: bool
    cand_pass: bool
    base_retry: bool = False
    cand_retry: bool = False
    checks_validity: bool = False  # graded as JSON / JSON schema (tool-call arguments)
    base_valid: bool = True
    cand_valid: bool = True


class Comparison(BaseModel):
    """Statistics of one slice (a category or "overall"). Rates are fractions; delta = candidate - baseline."""
    name: str
    n: int
    base_rate: float
    cand_rate: float
    delta: float
    ci_low: float
    ci_high: float
    p_value: float  # exact McNemar, two-sided
    only_cand_fail: int  # passed in the baseline, failed in the candidate
    only_base_fail: int  # failed in the baseline, passed in the candidate
    base_retry_rate: float
    cand_retry_rate: float
    validity_n: int = 0
    base_validity: float | None = None
    cand_validity: float | None = None
    only_cand_invalid: int = 0
    only_base_invalid: int = 0

    @property
    def net_loss(self) -> int:
        return self.only_cand_fail - self.only_base_fail


class Report(BaseModel):
    overall: Comparison
    categories: list[Comparison]
    seed: int

    def category(self, name: str) -> Comparison | None:
        return next((c for c in self.categories if c.name == name), None)


def mcnemar_exact(only_cand_fail: int, only_base_fail: int) -> float:
    """Two-sided exact McNemar p-value: under no difference each discordant item is a fair coin."""
    n = only_cand_fail + only_base_fail
    if n == 0:
        return 1.0
    return float(binomtest(only_cand_fail, n, 0.5).pvalue)


def paired_bootstrap_ci(diffs: np.ndarray, *, seed: int, samples: int = BOOTSTRAP_SAMPLES,
                        level: float = 0.95) -> tuple[float, float]:
    """Percentile CI of the mean per-item difference, resampling items with replacement."""
    n = len(diffs)
    if n == 0:
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(samples, n))
    means = diffs[idx].mean(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def rate(xs: Sequence[float] | npt.NDArray[np.float64]) -> float:
    """The mean of pass/fail flags; 0.0 for none."""
    return float(np.mean(xs)) if len(xs) else 0.0


def compare(name: str, pairs: list[Pair], *, seed: int = 0) -> Comparison:
    n = len(pairs)
    base = np.array([p.base_pass for p in pairs], dtype=float)
    cand = np.array([p.cand_pass for p in pairs], dtype=float)
    only_cand = sum(1 for p in pairs if p.base_pass and not p.cand_pass)
    only_base = sum(1 for p in pairs if p.cand_pass and not p.base_pass)
    low, high = paired_bootstrap_ci(cand - base, seed=seed)
    checked = [p for p in pairs if p.checks_validity]
    return Comparison(
        name=name, n=n, base_rate=rate(base), cand_rate=rate(cand), delta=rate(cand) - rate(base),
        ci_low=low, ci_high=high, p_value=mcnemar_exact(only_cand, only_base),
        only_cand_fail=only_cand, only_base_fail=only_base,
        base_retry_rate=rate([p.base_retry for p in pairs]), cand_retry_rate=rate([p.cand_retry for p in pairs]),
        validity_n=len(checked),
        base_validity=rate([p.base_valid for p in checked]) if checked else None,
        cand_validity=rate([p.cand_valid for p in checked]) if checked else None,
        only_cand_invalid=sum(1 for p in checked if p.base_valid and not p.cand_valid),
        only_base_invalid=sum(1 for p in checked if p.cand_valid and not p.base_valid),
    )


def build_report(pairs: list[Pair], *, category_order: list[str] | None = None, seed: int = 0) -> Report:
    """Overall and per-category comparisons. The same seed gives the same CIs."""
    names = list(dict.fromkeys(category_order or [])) + sorted({p.category for p in pairs})
    names = [c for c in dict.fromkeys(names) if any(p.category == c for p in pairs)]
    # Each slice gets its own stream derived from the seed, so adding a category does not move the others' CIs.
    cats = [compare(c, [p for p in pairs if p.category == c], seed=seed + 1 + i) for i, c in enumerate(names)]
    return Report(overall=compare("overall", pairs, seed=seed), categories=cats, seed=seed)
