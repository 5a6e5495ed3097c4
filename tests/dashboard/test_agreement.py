"""Evals → Live agreement: rates, suggestions and disagreeing pairs from stored shadow pairs; the
suggestion's draft and its what-if replay (AppTest; the browser test clicks through the same)."""

from __future__ import annotations

from datetime import timedelta

from dashboard.pages import agreement
from quantroute.clock import utcnow
from quantroute.db.shadow_pair import pairs_since
from quantroute.policy.loader import load_policy
from quantroute.shadow.analysis import analyse
from tests.dashboard.conftest import page
from tests.shadow.seed import seed_pairs


def test_live_agreement_shows_rates_suggestions_and_pairs_side_by_side(stack):
    engine, _ = stack
    seed_pairs(engine, rule="casual-chat", served="int4", shadow="fp16", n=40, agree=20)
    seed_pairs(engine, rule="greedy-structured", served="fp16", shadow="fp8", n=200, agree=200)
    at = page("agreement", "ana", "analyst")
    assert not at.exception
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "`casual-chat`: weight -2 → **6**" in text and "`greedy-structured`: weight 6 → **3**" in text
    assert "20/40 shadow pairs agree" in text
    by_rule = at.dataframe[1].value
    assert set(by_rule["rule"]) == {"casual-chat", "greedy-structured"}
    assert [e.label for e in at.expander][:1] and all("vs" in e.label for e in at.expander)
    codes = [c.value for c in at.code]
    assert "The answer to item 39 is 12." in codes and "The answer to item 39 is 13." in codes  # side by side
    assert [b.label for b in at.button].count("Open as policy draft with what-if replay") == 2


def test_no_pairs_says_how_to_get_them(stack):
    at = page("agreement", "ana", "analyst")
    assert "shadow.rate" in at.info[0].value


def test_rates_and_trend_frames(stack):
    engine, policies = stack
    seed_pairs(engine, rule="casual-chat", served="int4", shadow="fp16", n=10, agree=4)
    rep = analyse(pairs_since(engine, since=utcnow() - timedelta(hours=1)), load_policy(policies / "policy-0001.yaml"))
    frame = agreement.rates_frame(rep.by_pair)
    assert list(frame["pairs"]) == [10] and list(frame["agreement"]) == [0.4]
    trend = agreement.trend_frame(rep.trend)
    assert trend["pairs"].sum() == 10 and set(trend["pair"]) == {"int4 vs fp16"}
