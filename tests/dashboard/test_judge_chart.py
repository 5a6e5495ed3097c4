"""The Rollouts page's judge charts (pure builders): each metric's effect and interval against its allowed band."""

from __future__ import annotations

import pytest

from dashboard import charts
from tests.rollout.test_judge import held_verdict


def test_the_dashboard_draws_each_effect_against_its_band():
    frame = charts.judge_frame(held_verdict().judgement.model_dump(mode="json"))
    assert list(frame["metric"]) == ["time per output token", "time to first token", "error rate"]
    assert list(frame["unit"]) == ["%", "%", "pts"] and frame["allowed"].tolist() == pytest.approx([10, 20, 1])
    for _, row in frame.iterrows():
        spec = charts.judge_effect(row).to_dict()
        assert len(spec["layer"]) >= 4
