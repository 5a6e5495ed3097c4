"""The tiny model's tasks (scripts/tiny_tasks.py): the committed suite and calibration set are what the generators
make, soft targets put the stated weights on the answer and a near miss the graders reject, json eval prompts never
reach training, and the suite's precise prompts are the ones the default policy keeps off int4."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from itertools import islice
from pathlib import Path

import pytest
import yaml

from quantroute.evals.graders import grade
from quantroute.evals.suite import load_suite

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts/tiny_tasks.py"


@pytest.fixture(scope="module")
def tasks():
    spec = importlib.util.spec_from_file_location("tiny_tasks", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["tiny_tasks"] = module  # dataclasses resolve the module by name
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("tiny_tasks", None)


def test_committed_suite_and_calibration_set_are_what_the_generators_make(tasks):
    suite = (REPO / "data/evals/tiny-skills.jsonl").read_text().splitlines()
    assert suite == tasks.suite_lines(tasks.eval_tasks() + tasks.COVERAGE)
    assert (REPO / "data/calibration/tiny-skills-train.jsonl").read_text().splitlines() == tasks.calibration_lines()
    loaded = load_suite(REPO / "data/evals/tiny-skills.jsonl")
    counts = {c: sum(1 for i in loaded.items if i.category == c) for c in tasks.CATEGORIES}
    assert counts == {c: 120 for c in tasks.CATEGORIES} and len(loaded.items) == 489


def test_every_item_grades_its_reference_right_and_its_near_miss_wrong(tasks):
    for item in load_suite(REPO / "data/evals/tiny-skills.jsonl").items:
        if "untrained" in item.tags:
            continue
        assert grade(item, item.reference).passed, item.id
        assert not grade(item, item.wrong).passed, item.id


def test_soft_targets_weigh_the_answer_and_the_near_miss(tasks):
    stream = tasks.training_tasks(1, set())
    seen = set()
    for task in islice(stream, 400):
        replies = tasks.targets(task)
        assert sum(w for _, w in replies) == pytest.approx(1.0)
        if task.category in tasks.SOFT:
            soft = tasks.SOFT[task.category]
            assert replies == [(task.answer, 1 - soft), (task.wrong, soft)]
            assert task.wrong != task.answer
        else:
            assert replies == [(task.answer, 1.0)]
        seen.add(task.category)
    assert seen == set(tasks.CATEGORIES)
    math = next(t for t in tasks.training_tasks(2, set()) if t.category == "math")
    a, b = (int(x) for x in re.findall(r"\d+", math.prompt))
    assert (math.answer, math.wrong) == (str(a * b), str(a * (b + 1)))  # the slip one row over


def test_held_out_json_prompts_never_reach_training(tasks):
    held = {t.prompt for t in tasks.eval_tasks() if t.category == "json"}
    trained = {t.prompt for t in islice(tasks.training_tasks(3, held), 20_000) if t.category == "json"}
    assert trained and not trained & held


def test_the_default_policy_keeps_every_math_item_on_the_top_tier(tasks):
    """greedy-structured matches each math prompt (its arithmetic regex), so greedy math is routed to bf16."""
    policy = yaml.safe_load((REPO / "policies/policy-0001.yaml").read_text())
    rule = next(r for r in policy["rules"] if r["name"] == "greedy-structured")
    patterns = next(c["keywords"]["regex"] for c in rule["when"]["all"] if "keywords" in c)
    for line in (REPO / "data/evals/tiny-skills.jsonl").read_text().splitlines():
        item = json.loads(line)
        if item["category"] == "math":
            assert any(re.search(p, item["prompt"]) for p in patterns), item["prompt"]
