"""The shift between two samples (pure): the Mann-Whitney rank-sum statistic with its tie-corrected z, the
Hodges-Lehmann estimate of the shift (the median of the pairwise differences) and its interval by inverting the
rank-sum test. The k-th pairwise difference is found without the n*m matrix once the arms are large: bisection
on the shift over a sorted sample, then the few differences left in the bracket are formed. The canary judge
applies them to log latencies."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy.stats import rankdata

Floats = npt.NDArray[np.float64]
DIRECT_PAIRS = 250_000  # up to this many pairwise differences they are formed outright (2 MB)
MAX_ENUMERATED = 50_000  # differences formed once the bisection's bracket holds no more


def rank_sum_z(x: Sequence[float] | Floats, y: Sequence[float] | Floats) -> tuple[float, float]:
    """Mann-Whitney U of x (scipy's convention) and its tie-corrected z (no continuity correction); z is nan
    when every value is equal."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n1, n2 = len(xa), len(ya)
    ranks = rankdata(np.concatenate([xa, ya]))
    u = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2)
    n = n1 + n2
    _, counts = np.unique(ranks, return_counts=True)
    ties = float((counts ** 3 - counts).sum())
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return u, math.nan
    return u, (u - n1 * n2 / 2) / math.sqrt(var)


def _count_le(x: Floats, ys: Floats, d: float) -> int:
    """How many pairwise differences x_i - y_j are <= d (ys sorted): y_j >= x_i - d."""
    return int(len(x) * len(ys) - np.searchsorted(ys, x - d, side="left").sum())


def kth_difference(x: Floats, ys: Floats, k: int) -> float:
    """The k-th smallest (1-based) of the n*m differences x_i - y_j (ys sorted): formed and partitioned when
    there are few, else found by bisection without forming them."""
    if len(x) * len(ys) <= DIRECT_PAIRS:
        return float(np.partition(np.subtract.outer(x, ys).ravel(), k - 1)[k - 1])
    return kth_by_bisection(x, ys, k)


def kth_by_bisection(x: Floats, ys: Floats, k: int) -> float:
    """The k-th difference of arms too large for the n*m matrix, exactly: bisection on d (counting the differences
    <= d with a sorted searchsorted, O(n log m)) until at most MAX_ENUMERATED differences lie in the bracket, then
    those are formed and partitioned."""
    x = np.sort(x)
    n = len(x)
    lo_f, hi_f = float(x[0] - ys[-1]) - 1.0, float(x[-1] - ys[0]) + 1.0  # every difference is inside
    lo_n, hi_n = 0, n * len(ys)
    while hi_n - lo_n > MAX_ENUMERATED:
        mid = (lo_f + hi_f) / 2
        if not lo_f < mid < hi_f:
            break
        c = _count_le(x, ys, mid)
        if c >= k:
            hi_f, hi_n = mid, c
        else:
            lo_f, lo_n = mid, c
    # the differences in (lo_f, hi_f]: y_j in [x_i - hi_f, x_i - lo_f)
    a = np.searchsorted(ys, x - hi_f, side="left")
    b = np.searchsorted(ys, x - lo_f, side="left")
    lens = b - a
    row = np.repeat(np.arange(n), lens)
    pos = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    inside = x[row] - ys[a[row] + pos]
    return float(np.partition(inside, k - lo_n - 1)[k - lo_n - 1])


def hodges_lehmann(x: Floats, ys: Floats) -> float:
    """Median of the pairwise differences x_i - y_j (ys sorted)."""
    n = len(x) * len(ys)
    if n % 2:
        return kth_difference(x, ys, n // 2 + 1)
    return (kth_difference(x, ys, n // 2) + kth_difference(x, ys, n // 2 + 1)) / 2


def shift_interval(x: Floats, ys: Floats, c: float) -> tuple[float | None, float | None]:
    """The Mann-Whitney test inverted at critical value c: [d_(k+1), d_(N-k)] with k = floor(N/2 - c sigma_U),
    sigma_U without ties (None: unbounded on that side, the sample is too small for this c)."""
    n1, n2 = len(x), len(ys)
    n = n1 * n2
    sigma = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    if not math.isfinite(c):
        return None, None
    k = math.floor(n / 2 - c * sigma)
    if k < 0:
        return None, None
    return kth_difference(x, ys, k + 1), kth_difference(x, ys, n - k)
