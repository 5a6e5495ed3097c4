"""Graders: one function per grader spec, each answering three questions about one response:
passed (correct), valid (well-formed for its grader's format) and needs_retry (a user or agent would have had
to regenerate it: empty, truncated at max_tokens, or invalid for its format)."""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

from pydantic import BaseModel

from quantroute.answers import fenced, last_number, normalize, parse_json
from quantroute.evals import sandbox
from quantroute.evals.suite import (
    FORMAT_GRADERS,
    CodeGrader,
    ContainsGrader,
    EvalItem,
    ExactGrader,
    JsonSchemaGrader,
    JsonValidGrader,
    NormalizedGrader,
    NumericGrader,
    RegexGrader,
)


class Grade(BaseModel):
    passed: bool
    valid: bool  # well-formed for the grader's format (always True for free-text graders)
    needs_retry: bool
    detail: str = ""


def subset_mismatch(expected: Any, actual: Any, path: str = "$") -> str | None:
    """Where `actual` fails to contain `expected` (dicts by key, lists elementwise, strings case-insensitively)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object"
        for k, v in expected.items():
            if k not in actual:
                return f"{path}.{k}: missing"
            if (why := subset_mismatch(v, actual[k], f"{path}.{k}")) is not None:
                return why
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{path}: expected a list of {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            if (why := subset_mismatch(e, a, f"{path}[{i}]")) is not None:
                return why
        return None
    if isinstance(expected, str) and isinstance(actual, str):
        same = expected.strip().casefold() == actual.strip().casefold()
        return None if same else f"{path}: {actual!r} != {expected!r}"
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        return None if math.isclose(expected, actual, rel_tol=1e-9, abs_tol=1e-9) else f"{path}: {actual} != {expected}"
    return None if expected == actual else f"{path}: {actual!r} != {expected!r}"


def grade(item: EvalItem, answer: str, finish_reason: str | None = "stop") -> Grade:
    """Grade one response. `finish_reason` "length" (truncated) counts as needing a retry."""
    g = item.grader
    if not answer.strip():
        return Grade(passed=False, valid=g.type not in FORMAT_GRADERS, needs_retry=True, detail="empty answer")
    passed, valid, detail = _GRADERS[type(g)](g, answer)
    truncated = finish_reason == "length"
    return Grade(passed=passed, valid=valid, needs_retry=truncated or not valid,
                 detail=("truncated; " if truncated else "") + detail)


def _exact(g: ExactGrader, answer: str) -> tuple[bool, bool, str]:
    ok = answer.strip() in [e.strip() for e in g.expected]
    return ok, True, "" if ok else f"expected {g.expected[0]!r}"


def _normalized(g: NormalizedGrader, answer: str) -> tuple[bool, bool, str]:
    ok = normalize(answer) in {normalize(e) for e in g.expected}
    return ok, True, "" if ok else f"expected {g.expected[0]!r} (normalized)"


def _numeric(g: NumericGrader, answer: str) -> tuple[bool, bool, str]:
    value = last_number(answer)
    if value is None:
        return False, False, "no number in the answer"
    ok = abs(value - g.expected) <= g.tolerance
    return ok, True, "" if ok else f"got {value:g}, expected {g.expected:g} ± {g.tolerance:g}"


def _regex(g: RegexGrader, answer: str) -> tuple[bool, bool, str]:
    flags = 0
    for c in g.flags:
        flags |= {"i": re.I, "m": re.M, "s": re.S}[c]
    rx = re.compile(g.pattern, flags)
    ok = bool(rx.fullmatch(answer.strip()) if g.fullmatch else rx.search(answer))
    return ok, True, "" if ok else f"no match for /{g.pattern}/"


def _contains(g: ContainsGrader, answer: str) -> tuple[bool, bool, str]:
    fold = (lambda s: s) if g.case_sensitive else (lambda s: unicodedata.normalize("NFKC", s).casefold())
    text = fold(answer)
    missing = [s for s in g.all_of if fold(s) not in text]
    if missing:
        return False, True, f"missing {missing[0]!r}"
    if g.any_of and not any(fold(s) in text for s in g.any_of):
        return False, True, f"none of {g.any_of[:3]!r}..."
    present = [s for s in g.none_of if fold(s) in text]
    if present:
        return False, True, f"must not contain {present[0]!r}"
    return True, True, ""


def _json_valid(g: JsonValidGrader, answer: str) -> tuple[bool, bool, str]:
    try:
        data = parse_json(answer)
    except ValueError as e:
        return False, False, f"invalid JSON: {e}"
    why = subset_mismatch(g.expect, data) if g.expect is not None else None
    return why is None, True, why or ""


def _json_schema(g: JsonSchemaGrader, answer: str) -> tuple[bool, bool, str]:
    from jsonschema import Draft202012Validator

    try:
        data = parse_json(answer)
    except ValueError as e:
        return False, False, f"invalid JSON: {e}"
    error = next(iter(Draft202012Validator(g.schema_).iter_errors(data)), None)
    if error is not None:
        where = "$" + "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        return False, False, f"schema: {where}: {error.message}"[:300]
    why = subset_mismatch(g.expect, data) if g.expect is not None else None
    return why is None, True, why or ""


def extract_code(answer: str) -> str:
    body = fenced(answer, "python", "py", "python3")
    return body if body is not None else answer.strip()


def _code(g: CodeGrader, answer: str) -> tuple[bool, bool, str]:
    code = extract_code(answer)
    try:
        compile(code, "<answer>", "exec")
    except SyntaxError as e:
        return False, False, f"syntax error line {e.lineno}: {e.msg}"
    if not re.search(rf"\b(?:def|class)\s+{re.escape(g.entry_point)}\b", code):
        return False, False, f"no def or class {g.entry_point}"
    r = sandbox.run_tests(code, entry_point=g.entry_point, tests=g.tests, timeout_s=g.timeout_s)
    if r.ok:
        return True, True, f"{r.passed}/{r.total} tests"
    detail = r.error or (r.failures[0] if r.failures else "")
    return False, True, f"{r.passed}/{r.total} tests; {detail}"[:300]


_GRADERS: dict[type, Any] = {
    ExactGrader: _exact, NormalizedGrader: _normalized, NumericGrader: _numeric, RegexGrader: _regex,
    ContainsGrader: _contains, JsonValidGrader: _json_valid, JsonSchemaGrader: _json_schema, CodeGrader: _code,
}
