"""The rank-sum shift against scipy on fixed samples: U and its z, the Hodges-Lehmann estimate, the exact k-th
pairwise difference (outright and by bisection) and the interval that inverts the test."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import mannwhitneyu, norm

from quantroute.rollout import shift

RNG = np.random.default_rng(7)
X = RNG.lognormal(3.0, 0.4, 37)
Y = RNG.lognormal(2.9, 0.5, 61)


@pytest.mark.parametrize("x,y", [(X, Y), (np.round(X), np.round(Y))], ids=["continuous", "ties"])
def test_rank_sum_matches_scipy(x, y):
    u, z = shift.rank_sum_z(x, y)
    ref = mannwhitneyu(x, y, alternative="two-sided", method="asymptotic", use_continuity=False)
    assert u == pytest.approx(ref.statistic)
    assert 2 * norm.sf(abs(z)) == pytest.approx(ref.pvalue, rel=1e-9)


def test_hodges_lehmann_is_the_median_pairwise_difference():
    for x, y in ((X, Y), (X[:10], Y[:7]), (X[:1], Y[:2])):
        ys = np.sort(y)
        assert shift.hodges_lehmann(x, ys) == pytest.approx(float(np.median(np.subtract.outer(x, y))), abs=1e-12)


def test_kth_difference_is_exact():
    d = np.sort(np.subtract.outer(X, Y).ravel())
    ys = np.sort(Y)
    for k in (1, 2, 100, 1000, len(d) // 2, len(d) - 1, len(d)):
        assert shift.kth_difference(X, ys, k) == d[k - 1]
        assert shift.kth_by_bisection(X, ys, k) == d[k - 1]


def test_shift_interval_inverts_scipys_test():
    """At critical value c the interval is the set of shifts the rank-sum test does not reject at the matching
    level: just inside each end scipy's p is above it, just outside below."""
    c = 1.96
    level = 2 * norm.sf(c)
    lo, hi = shift.shift_interval(X, np.sort(Y), c)
    d = np.sort(np.subtract.outer(X, Y).ravel())
    eps = 1e-9
    inside = [lo + eps, hi - eps]
    outside = [d[np.searchsorted(d, lo) - 1] - eps if np.searchsorted(d, lo) > 0 else lo - 1, hi + eps]
    for s in inside:
        assert mannwhitneyu(X - s, Y, method="asymptotic", use_continuity=False).pvalue >= level * 0.999
    for s in outside:
        assert mannwhitneyu(X - s, Y, method="asymptotic", use_continuity=False).pvalue < level * 1.05
