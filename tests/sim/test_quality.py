"""The quality model: seeded right/wrong answers per tier and category, reproducible run to run."""

from __future__ import annotations

import json

import httpx

from quantroute.sim import quality
from quantroute.sim.quality import EvalItem, answer, corrupt, load_quality, load_suites, prompt_key
from quantroute.tiers import Tier

from .conftest import SUITE

TABLE = load_quality()


def test_the_shipped_table_puts_int4_worst_on_sensitive_categories():
    for cat in ("math", "code", "json", "long_context"):
        p = {t: TABLE.p_err(t, cat) for t in Tier}
        assert p[Tier.int4] > p[Tier.int8] >= p[Tier.fp8] >= p[Tier.fp16] > 0
        assert p[Tier.int4] - p[Tier.fp16] >= 0.05  # more than a 2-point gate
    assert TABLE.p_err(Tier.int8, "chat") - TABLE.p_err(Tier.fp16, "chat") <= 0.01  # near-lossless
    assert TABLE.p_err(Tier.fp16, "some-new-category") == TABLE.tiers[Tier.fp16]["default"]


def test_error_rates_over_many_items_follow_the_table_and_repeat_exactly():
    items = [EvalItem(id=f"q{i}", category="math", reference=f"{i}") for i in range(2000)]

    def wrong(tier, dep):
        return sum(not answer(it, tier=tier, deployment_id=dep, table=TABLE)[1] for it in items)

    fp16, int4 = wrong(Tier.fp16, "llama3-8b-fp16"), wrong(Tier.int4, "llama3-8b-awq-w4a16")
    assert abs(fp16 / 2000 - TABLE.p_err(Tier.fp16, "math")) < 0.02
    assert abs(int4 / 2000 - TABLE.p_err(Tier.int4, "math")) < 0.025
    assert int4 > fp16 and wrong(Tier.int4, "llama3-8b-awq-w4a16") == int4
    shifted = sum(not answer(it, tier=Tier.int4, deployment_id="llama3-8b-awq-w4a16", table=TABLE, seed=1)[1]
                  for it in items)
    assert shifted != int4  # another seed, another (equally likely) draw


def test_corruptions_change_the_answer_the_way_a_grader_notices():
    assert corrupt("The answer is 42") == "The answer is 43"
    broken = corrupt('{"name": "get_weather", "arguments": {"city": "Oslo"}}')
    try:
        json.loads(broken)
        raise AssertionError("still valid JSON")
    except ValueError:
        pass
    code = "def f(x):\n    y = x * 2\n    return y"
    assert corrupt(code) == "def f(x):\n    return y"
    assert corrupt("Paris") != "Paris"


def test_suite_index_by_last_user_message_or_prompt(suites):
    index = load_suites(suites)
    assert set(index) == {"What is 6 times 7?", "Complete: def add(a, b):"}
    assert prompt_key({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                    {"role": "user", "content": [{"type": "text", "text": " c "}]}]}) == "c"
    assert load_suites(str(suites) + ".missing") == {}


def test_nodes_answer_eval_prompts_with_the_reference_or_the_wrong_answer(sim):
    msgs = SUITE[0]["messages"]
    expected = {}
    for node, dep, tier in (("fp16", "llama3-8b-fp16", Tier.fp16), ("int4", "llama3-8b-awq-w4a16", Tier.int4)):
        got = {httpx.post(sim.urls[node] + "/v1/chat/completions",
                          json={"model": "llama3-8b", "messages": msgs, "temperature": 0}).json()
               ["choices"][0]["message"]["content"] for _ in range(2)}
        item = EvalItem(id="m1", category="math", reference="42", wrong="48")
        expected[node] = answer(item, tier=tier, deployment_id=dep, table=TABLE)[0]
        assert got == {expected[node]} and got <= {"42", "48"}
    r = httpx.post(sim.urls["int4"] + "/v1/completions",
                   json={"model": "llama3-8b", "prompt": SUITE[1]["prompt"], "max_tokens": 100}).json()
    assert r["choices"][0]["text"] in (SUITE[1]["reference"], corrupt(SUITE[1]["reference"]))
    assert r["choices"][0]["finish_reason"] == "stop"
    assert quality.unit_hash("a", 1) == quality.unit_hash("a", 1) != quality.unit_hash("a", 2)


def test_errors_nest_by_tier_and_match_the_table_per_category(tmp_path):
    """Quantization noise tips over items that are already hard: int4 misses what fp16 misses (bar the
    half-rank jitter at the boundary), and each category misses about p * n items, not a hash's luck."""
    import math
    items = [{"id": f"m{i}", "category": "math", "messages": [{"role": "user", "content": f"q{i}"}],
              "reference": str(i)} for i in range(40)]
    suite = tmp_path / "s.jsonl"
    suite.write_text("\n".join(json.dumps(x) for x in items))
    idx = list(load_suites(str(suite)).values())
    wrong = {}
    for tier, dep in ((Tier.fp16, "d-fp16"), (Tier.int4, "d-int4"), (Tier.int4, "d-int4-v2")):
        wrong[dep] = {it.id for it in idx if not answer(it, tier=tier, deployment_id=dep, table=TABLE)[1]}
        p = TABLE.p_err(tier, "math")
        assert abs(len(wrong[dep]) - p * 40) <= 1, (dep, len(wrong[dep]))
    assert len(wrong["d-fp16"] - wrong["d-int4"]) <= 1
    assert len(wrong["d-int4"] ^ wrong["d-int4-v2"]) <= 2  # same tier: differ at most at the boundary
    assert math.isclose(sorted(it.difficulty for it in idx)[0], 0.5 / 40)
