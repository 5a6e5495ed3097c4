import json

import pytest

from quantroute.evals.suite import SuiteError, load_suite, parse_suite

GOOD = {"id": "m1", "category": "math", "prompt": "What is 6 x 7?", "grader": {"type": "numeric", "expected": 42},
        "reference": "42", "wrong": "48"}


def lines(*items) -> str:
    return "\n".join(i if isinstance(i, str) else json.dumps(i) for i in items) + "\n"


def test_bad_lines_are_all_reported_with_line_numbers_and_fields():
    bad_category = {**GOOD, "id": "m2", "prompt": "x", "category": "maths"}
    bad_grader = {**GOOD, "id": "m3", "prompt": "y", "grader": {"type": "numeric"}}
    with pytest.raises(SuiteError) as e:
        parse_suite(lines(GOOD, bad_category, "{not json", bad_grader), source="s.jsonl")
    issues = [(i.line, i.field) for i in e.value.issues]
    assert issues == [(2, "category"), (3, ""), (4, "grader.expected")]
    assert "s.jsonl:2: category:" in str(e.value) and "nothing was run" in str(e.value)


def test_duplicate_ids_and_prompts_and_missing_prompt_are_errors():
    with pytest.raises(SuiteError) as e:
        parse_suite(lines(GOOD, {**GOOD, "prompt": "other"}, {**GOOD, "id": "m9"},
                          {k: v for k, v in GOOD.items() if k != "prompt"} | {"id": "m10"}))
    msgs = [(i.line, i.field, i.message) for i in e.value.issues]
    assert msgs[0][:2] == (2, "id") and "line 1" in msgs[0][2]
    assert msgs[1][:2] == (3, "messages")
    assert msgs[2][0] == 4 and "exactly one of messages or prompt" in msgs[2][2]


def test_invalid_json_schema_in_a_grader_is_rejected():
    item = {**GOOD, "category": "json", "grader": {"type": "json_schema", "schema": {"type": "nope"}}}
    with pytest.raises(SuiteError) as e:
        parse_suite(lines(item))
    assert e.value.issues[0].field == "grader.schema" and "JSON Schema" in e.value.issues[0].message


def test_hash_ignores_formatting_but_not_content():
    a = parse_suite(lines(GOOD))
    b = parse_suite(json.dumps(GOOD, indent=None, separators=(", ", ": "), sort_keys=True) + "\n\n# comment\n")
    c = parse_suite(lines({**GOOD, "reference": "The answer is 42"}))
    assert a.hash == b.hash != c.hash


def test_missing_file_is_a_suite_error(tmp_path):
    with pytest.raises(SuiteError, match="cannot read"):
        load_suite(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("name", ["golden", "smoke"])
def test_shipped_suites_load_and_cover_every_category(name):
    suite = load_suite(f"data/evals/{name}.jsonl")
    assert suite.categories() == ["math", "code", "json", "structured", "multilingual", "long_context", "chat",
                                  "safety"]
    if name == "golden":
        assert len(suite.items) >= 150
        assert sum(i.category == "json" for i in suite.items) >= 20
    assert max(len(i.last_user_text) for i in suite.items) < 6000
