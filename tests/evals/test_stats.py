import numpy as np
import pytest

from quantroute.evals.stats import Pair, build_report, compare, mcnemar_exact, paired_bootstrap_ci


def table(both: int, only_base_ok: int, only_cand_ok: int, neither: int, category: str = "math") -> list[Pair]:
    """A 2x2 paired table: both pass / only baseline passes / only candidate passes / both fail."""
    rows = ([(True, True)] * both + [(True, False)] * only_base_ok + [(False, True)] * only_cand_ok
            + [(False, False)] * neither)
    return [Pair(item_id=f"{category}-{i}", category=category, base_pass=b, cand_pass=c)
            for i, (b, c) in enumerate(rows)]


def test_mcnemar_exact_against_hand_worked_values():
    # 9 vs 1 discordant: 2 * (C(10,9) + C(10,10)) / 2^10 = 22/1024
    assert mcnemar_exact(9, 1) == pytest.approx(22 / 1024)
    # 3 vs 0: 2 * 1/8
    assert mcnemar_exact(3, 0) == pytest.approx(0.25)
    assert mcnemar_exact(5, 5) == pytest.approx(1.0)
    assert mcnemar_exact(0, 0) == 1.0


def test_compare_on_a_known_table():
    c = compare("math", table(both=30, only_base_ok=9, only_cand_ok=1, neither=10), seed=7)
    assert c.n == 50
    assert c.base_rate == pytest.approx(39 / 50) and c.cand_rate == pytest.approx(31 / 50)
    assert c.delta == pytest.approx(-8 / 50)
    assert (c.only_cand_fail, c.only_base_fail, c.net_loss) == (9, 1, 8)
    assert c.p_value == pytest.approx(22 / 1024)
    assert c.ci_low < c.delta < c.ci_high < 0  # a real drop: the whole CI is below zero


def test_bootstrap_is_seeded_and_brackets_the_delta():
    diffs = np.array([-1] * 6 + [1] * 2 + [0] * 42, dtype=float)
    a, b = paired_bootstrap_ci(diffs, seed=3), paired_bootstrap_ci(diffs, seed=3)
    assert a == b
    assert a != paired_bootstrap_ci(diffs, seed=4)
    assert a[0] < diffs.mean() < a[1]
    # The standard error of a mean of 50 such differences is about 0.05; the 95% CI spans roughly +-2 SE.
    assert 0.12 < a[1] - a[0] < 0.28


def test_no_difference_gives_a_degenerate_interval_and_p_one():
    c = compare("chat", table(both=10, only_base_ok=0, only_cand_ok=0, neither=2), seed=0)
    assert (c.delta, c.ci_low, c.ci_high, c.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_report_slices_by_category_and_counts_validity_and_retries():
    pairs = table(8, 2, 0, 0, "math") + [
        Pair(item_id="j1", category="json", base_pass=True, cand_pass=False, checks_validity=True, cand_valid=False,
             cand_retry=True),
        Pair(item_id="j2", category="json", base_pass=True, cand_pass=True, checks_validity=True),
    ]
    r = build_report(pairs, category_order=["math", "json"], seed=1)
    assert [c.name for c in r.categories] == ["math", "json"]
    assert r.overall.n == 12 and r.overall.only_cand_fail == 3
    assert r.overall.validity_n == 2 and r.overall.base_validity == 1.0 and r.overall.cand_validity == 0.5
    assert r.overall.only_cand_invalid == 1
    assert r.category("json").cand_retry_rate == 0.5 and r.category("math").cand_retry_rate == 0.0
    assert build_report(pairs, seed=1) == build_report(pairs, seed=1)
