"""Greedy answers outside the eval suites: each deployment gives the FP16 answer with the quality table's
probability for its tier and task type, decided per prompt; a drifted answer differs in its result."""

from __future__ import annotations

import json

import pytest

from quantroute.answers import last_number
from quantroute.shadow.analysis import wilson
from quantroute.sim.quality import load_quality, task_type
from quantroute.sim.text import greedy_answer
from quantroute.tiers import Tier

TABLE = load_quality()
KEYS = [f"prompt {i}" for i in range(1500)]


def answers(task: str, tier: Tier, dep: str) -> list[str]:
    return [greedy_answer(k, task, tier=tier, deployment_id=dep, table=TABLE) for k in KEYS]


def test_the_table_has_agreement_rows_below_fp16():
    assert TABLE.p_agree(Tier.fp16, "code") == 1.0
    assert TABLE.p_agree(Tier.int4, "math") < TABLE.p_agree(Tier.int8, "math") < TABLE.p_agree(Tier.fp8, "math") < 1


@pytest.mark.parametrize("task", ["chat", "code", "math", "json"])
@pytest.mark.parametrize("tier", [Tier.int4, Tier.int8])
def test_agreement_with_fp16_is_the_tables_probability(task, tier):
    ref = answers(task, Tier.fp16, "dep-fp16")
    assert ref == answers(task, Tier.fp16, "another-fp16")  # every FP16 deployment gives the reference
    got = answers(task, tier, f"dep-{tier.value}")
    agree = sum(a == b for a, b in zip(ref, got))
    lo, hi = wilson(agree, len(KEYS), level=0.99)
    assert lo <= TABLE.p_agree(tier, task) <= hi, (agree, len(KEYS))
    assert got == answers(task, tier, f"dep-{tier.value}")  # deterministic per prompt


def test_drift_is_nested_by_tier():
    ref = answers("code", Tier.fp16, "f")
    int8 = {k for k, a, b in zip(KEYS, ref, answers("code", Tier.int8, "i8")) if a != b}
    int4 = {k for k, a, b in zip(KEYS, ref, answers("code", Tier.int4, "i4")) if a != b}
    assert len(int8 & int4) >= 0.95 * len(int8)


def test_a_drifted_answer_differs_in_its_result():
    ref_m, got_m = answers("math", Tier.fp16, "f"), answers("math", Tier.int4, "i4")
    drifted = [(a, b) for a, b in zip(ref_m, got_m) if a != b]
    assert drifted and all(last_number(a) != last_number(b) for a, b in drifted)
    ref_j, got_j = answers("json", Tier.fp16, "f"), answers("json", Tier.int4, "i4")
    for a, b in zip(ref_j, got_j):
        if a != b:
            try:
                assert json.loads(b) != json.loads(a)
            except ValueError:
                pass  # a cut object: broken JSON


def test_task_type_from_the_prompt():
    def chat(text: str, **kw) -> dict:
        return {"messages": [{"role": "user", "content": text}], **kw}

    assert task_type(chat("Reply in JSON please")) == "json"
    assert task_type(chat("hello", response_format={"type": "json_object"})) == "json"
    assert task_type(chat("What is 12 * 7?")) == "math"
    assert task_type(chat("Write a python function")) == "code"
    assert task_type({"prompt": "Once upon a time"}) == "chat"
