"""The targets scripts/check_real_gap.py holds real artifacts to (pure: from the tables of two eval runs)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts/check_real_gap.py"


@pytest.fixture(scope="module")
def gap():
    spec = importlib.util.spec_from_file_location("check_real_gap", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(passed: bool, **deltas: tuple[float, float]) -> dict:
    """A table as `check_real_gap.table` writes it: slice -> (delta, McNemar p)."""
    rows: dict = {name: {"n": 300, "bf16": 0.95, "candidate": 0.95 + d, "delta": d, "ci": [d - 0.01, d + 0.01],
                         "p_value": p, "lost": 0, "gained": 0} for name, (d, p) in deltas.items()}
    rows["gate"] = {"passed": passed, "summary": "PASS" if passed else "FAIL: overall dropped"}
    rows["run_id"] = 1
    return rows


GOOD_INT8 = dict(overall=(-0.002, 1.0), math=(-0.003, 1.0), structured=(0.0, 1.0), chat=(0.0, 1.0))
GOOD_INT4 = dict(overall=(-0.045, 0.001), math=(-0.09, 0.001), structured=(-0.05, 0.01), chat=(-0.008, 1.0))


def test_artifacts_with_the_gap_meet_every_target(gap):
    assert gap.targets(run(True, **GOOD_INT8), run(False, **GOOD_INT4)) == []


def test_an_int4_loss_too_small_or_not_significant_is_named(gap):
    small = run(False, **{**GOOD_INT4, "overall": (-0.02, 0.01)})
    assert any("int4 moves the overall pass rate -2.0 points" in m for m in gap.targets(run(True, **GOOD_INT8), small))
    unsure = run(False, **{**GOOD_INT4, "overall": (-0.04, 0.2)})
    assert any("p=0.2" in m for m in gap.targets(run(True, **GOOD_INT8), unsure))


def test_int4_losing_most_outside_math_and_structured_is_named(gap):
    misplaced = run(False, **{**GOOD_INT4, "chat": (-0.12, 0.001)})
    missed = gap.targets(run(True, **GOOD_INT8), misplaced)
    assert any("loses most on chat" in m for m in missed)
    assert any("int4 moves chat -12.0 points" in m for m in missed)


def test_int8_losing_a_point_or_a_category_significantly_is_named(gap):
    missed = gap.targets(run(False, **{**GOOD_INT8, "overall": (-0.015, 0.1)}), run(False, **GOOD_INT4))
    assert missed == ["int8 moves the overall pass rate -1.5 points; the target is within 1 point"]
    missed = gap.targets(run(False, **{**GOOD_INT8, "math": (-0.05, 0.02)}), run(False, **GOOD_INT4))
    assert missed == ["int8 loses math significantly: -5.0 points (p=0.02)"]


def test_a_gate_that_fails_int8_on_a_loss_within_noise_is_not_a_miss(gap):
    """3 of 120 answers lost (2.5 points, McNemar p = 0.25) fail the 2-point gate, as vLLM's W8A8 kernels did on an
    AVX2 host: int8 still shows no significant loss, which is what the real tiers are there to show."""
    noise = run(False, **{**GOOD_INT8, "overall": (-0.006, 0.25), "math": (-0.025, 0.25)})
    assert gap.targets(noise, run(False, **GOOD_INT4)) == []


def test_a_gate_that_passes_int4_is_named(gap):
    assert gap.targets(run(True, **GOOD_INT8), run(True, **GOOD_INT4)) == ["the gate passes int4"]


def test_the_untaught_categories_come_from_the_suites_tags(gap):
    from quantroute.evals.suite import load_suite

    assert gap.untrained(load_suite(gap.SUITE)) == {"code", "multilingual", "long_context"}
