import pytest

from quantroute.evals.graders import grade
from quantroute.evals.suite import EvalItem, load_suite

SCHEMA = {"type": "object", "required": ["name", "arguments"],
          "properties": {"name": {"const": "get_weather"},
                         "arguments": {"type": "object", "required": ["city"],
                                       "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}


def item(grader: dict, category: str = "chat") -> EvalItem:
    return EvalItem.model_validate({"id": "t", "category": category, "prompt": "q", "grader": grader, "reference": "x"})


@pytest.mark.parametrize("grader,good,bad", [
    ({"type": "exact", "expected": "Paris"}, "  Paris\n", "paris"),
    ({"type": "normalized", "expected": ["Vielen Dank!"]}, "vielen   dank", "Danke"),
    ({"type": "numeric", "expected": 1284.6, "tolerance": 0.01}, "Total: 1,284.60 EUR", "Total: 1,248.60"),
    ({"type": "numeric", "expected": -3}, "x = \\boxed{-3} so x is negative 3", "the answer is 3"),
    ({"type": "regex", "pattern": r"\bOPS-\d{4}\b"}, "ticket OPS-5582.", "ticket OPS-55"),
    ({"type": "regex", "pattern": r"yes", "flags": "i", "fullmatch": True}, " Yes ", "yes, but"),
    ({"type": "contains", "all_of": ["kyoto", "april"], "none_of": ["tokyo"]}, "Kyoto in April",
     "Tokyo in April, Kyoto"),
    ({"type": "contains", "any_of": ["sorry", "apolog"]}, "We apologise.", "Thanks."),
    ({"type": "json_valid", "expect": {"a": [1, 2]}}, '```json\n{"a": [1, 2], "b": 0}\n```', '{"a": [2, 1]}'),
    ({"type": "json_schema", "schema": SCHEMA, "expect": {"arguments": {"city": "lisbon"}}},
     '{"name": "get_weather", "arguments": {"city": "Lisbon", "days": 3}}',
     '{"name": "get_weather", "arguments": {"city": "Porto"}}'),
])
def test_each_grader_passes_good_and_fails_bad(grader, good, bad):
    it = item(grader)
    assert grade(it, good).passed, grade(it, good).detail
    assert not grade(it, bad).passed


def test_validity_and_retry_for_format_graders():
    it = item({"type": "json_schema", "schema": SCHEMA}, "json")
    broken = grade(it, '{"name": "get_weather", "arguments": {"city": "Lisbon"')
    assert (broken.passed, broken.valid, broken.needs_retry) == (False, False, True)
    schema_bad = grade(it, '{"name": "get_weather", "arguments": {"days": "3"}}')
    assert not schema_bad.valid and "city" in schema_bad.detail
    wrong_value = grade(it, '{"name": "get_weather", "arguments": {"city": "Porto"}}')
    assert wrong_value.valid and not wrong_value.needs_retry
    assert grade(it, "").needs_retry and not grade(it, "").valid
    truncated = grade(item({"type": "contains", "all_of": ["a"]}), "a b c", finish_reason="length")
    assert truncated.passed and truncated.needs_retry
    assert grade(item({"type": "numeric", "expected": 1}), "no digits here").needs_retry


CODE = {"type": "code", "entry_point": "add", "tests": ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"],
        "timeout_s": 3}


def code_grade(answer: str):
    return grade(item(CODE, "code"), answer)


def test_code_grader_runs_the_answers_function():
    assert code_grade("```python\ndef add(a, b):\n    return a + b\n```").passed
    off_by_one = code_grade("def add(a, b):\n    return a + b + 1\n")
    assert not off_by_one.passed and off_by_one.valid and "0/2" in off_by_one.detail
    assert not code_grade("def add(a, b) return a + b").valid  # syntax error: counts towards retries
    assert not code_grade("def plus(a, b):\n    return a + b").valid


@pytest.mark.parametrize("body,why", [
    ("    while True:\n        pass", "timed out"),
    ("    import socket\n    socket.create_connection(('127.0.0.1', 22))\n    return a + b", "socket"),
    ("    import urllib.request\n    urllib.request.urlopen('http://127.0.0.1:9/')\n    return a + b", "socket"),
    ("    import os\n    os.fork()\n    return a + b", "os.fork"),
    ("    import os\n    os.system('touch /tmp/qr-sandbox-pwned')\n    return a + b", "os.system"),
    ("    import shutil\n    shutil.rmtree('/usr/share/doc')\n    return a + b", "not allowed"),
    ("    x = 'a' * (4 << 30)\n    return a + b", "MemoryError"),
])
def test_hostile_code_is_contained(tmp_path, body, why):
    victim = tmp_path.parent / "qr-sandbox-victim"
    victim.mkdir(exist_ok=True)
    g = code_grade(f"def add(a, b):\n{body}\n")
    assert not g.passed and why in g.detail, g.detail
    assert victim.exists()


def test_writes_outside_the_sandbox_are_blocked_inside_allowed(tmp_path):
    target = tmp_path / "escaped.txt"
    g = code_grade(f"def add(a, b):\n    open({str(target)!r}, 'w').write('x')\n    return a + b\n")
    assert not g.passed and "not allowed" in g.detail and not target.exists()
    assert code_grade("def add(a, b):\n    open('scratch.txt', 'w').write('ok')\n    return a + b\n").passed


def test_faked_results_are_not_believed():
    g = code_grade('import os, sys\nprint(\'{"passed": 2, "total": 2, "failures": [], "error": null}\')\n'
                   "sys.stdout.flush()\nos._exit(0)\ndef add(a, b):\n    return 0\n")
    assert not g.passed and "no result" in g.detail


def test_every_shipped_reference_passes_and_every_wrong_fails():
    suite = load_suite("data/evals/smoke.jsonl")
    for it in suite.items:
        assert grade(it, it.reference).passed, (it.id, grade(it, it.reference).detail)
        if it.wrong is not None:
            assert not grade(it, it.wrong).passed, it.id
