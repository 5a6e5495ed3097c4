"""Shape and mix checks for the hand-written request data: data/requests/labelled.jsonl and data/traffic/*.jsonl.
(Whether the classifier agrees with the labels is tests/test_classify_labelled.py's business.)"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from quantroute.tiers import TIER_ORDER, parse_tier

DATA = Path(__file__).resolve().parent.parent / "data"
LABELLED = DATA / "requests" / "labelled.jsonl"
TIERS = {t.value for t in TIER_ORDER}
CLASSES = {"tolerant", "neutral", "sensitive"}
ROLES = {"system", "user", "assistant", "tool"}
HEADERS = {"x-priority", "x-latency-budget-ms", "x-min-tier"}

# file -> (line count range, {class: (min share, max share)}, (min prompt chars, max prompt chars))
TRAFFIC = {
    "mixed.jsonl": ((280, 320), {"tolerant": (0.55, 0.65), "neutral": (0.10, 0.20), "sensitive": (0.20, 0.30)},
                    (50, 3000)),
    "sensitive-heavy.jsonl": ((90, 110), {"tolerant": (0.0, 0.15), "neutral": (0.0, 0.15),
                                          "sensitive": (0.75, 0.85)}, (1, 4000)),
    "chat-only.jsonl": ((90, 110), {"tolerant": (0.95, 1.0), "neutral": (0.0, 0.05), "sensitive": (0.0, 0.0)},
                        (1, 4000)),
}


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        assert raw.strip(), f"{path.name}:{n}: blank line"
        try:
            rows.append(json.loads(raw))
        except json.JSONDecodeError as e:
            pytest.fail(f"{path.name}:{n}: not JSON: {e}")
    return rows


def prompt_chars(body: dict) -> int:
    if "prompt" in body:
        p = body["prompt"]
        return sum(map(len, p)) if isinstance(p, list) else len(p)
    total = 0
    for m in body["messages"]:
        c = m.get("content") or ""
        total += len(c) if isinstance(c, str) else sum(len(part["text"]) for part in c)
    return total


def body_problems(body: dict) -> list[str]:
    """Everything wrong with one OpenAI request body, named by field."""
    problems = []
    if body.get("model") != "llama3-8b":
        problems.append(f"model is {body.get('model')!r}, expected 'llama3-8b'")
    has_messages, has_prompt = "messages" in body, "prompt" in body
    if has_messages == has_prompt:
        problems.append("needs exactly one of messages / prompt")
    if has_prompt:
        p = body["prompt"]
        if not (isinstance(p, str) and p) and not (isinstance(p, list) and p and all(isinstance(x, str) for x in p)):
            problems.append("prompt must be a non-empty string or list of strings")
    if has_messages:
        msgs = body["messages"]
        if not isinstance(msgs, list) or not msgs:
            problems.append("messages must be a non-empty list")
        else:
            for i, m in enumerate(msgs):
                if m.get("role") not in ROLES:
                    problems.append(f"messages[{i}].role {m.get('role')!r} not in {sorted(ROLES)}")
                c = m.get("content")
                ok = (isinstance(c, str) and c) or (c is None and m.get("tool_calls")) or (
                    isinstance(c, list) and c and all(p.get("type") == "text" and p.get("text") for p in c))
                if not ok:
                    problems.append(f"messages[{i}].content must be text, a list of text parts, or None with "
                                    "tool_calls")
            if msgs[-1].get("role") not in {"user", "tool"}:
                problems.append("the last message must be from the user (or a tool result)")
    t = body.get("temperature")
    if t is not None and not (isinstance(t, (int, float)) and 0 <= t <= 2):
        problems.append(f"temperature {t!r} outside 0..2")
    mt = body.get("max_tokens")
    if mt is not None and not (isinstance(mt, int) and mt > 0):
        problems.append(f"max_tokens {mt!r} is not a positive integer")
    return problems


def header_problems(headers: dict) -> list[str]:
    problems = [f"unknown header {k!r}; valid: {sorted(HEADERS)}" for k in headers if k not in HEADERS]
    if "x-priority" in headers and not (headers["x-priority"].isdigit() and 1 <= int(headers["x-priority"]) <= 10):
        problems.append(f"x-priority {headers['x-priority']!r} must be 1..10")
    if "x-latency-budget-ms" in headers and not headers["x-latency-budget-ms"].isdigit():
        problems.append(f"x-latency-budget-ms {headers['x-latency-budget-ms']!r} must be a positive integer")
    if "x-min-tier" in headers:
        try:
            parse_tier(headers["x-min-tier"])
        except ValueError as e:
            problems.append(str(e))
    return problems


# --- labelled requests -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def labelled() -> list[dict]:
    return read_jsonl(LABELLED)


def test_labelled_lines_have_the_documented_shape(labelled: list[dict]) -> None:
    problems = []
    for row in labelled:
        rid = row.get("id", "?")
        keys = set(row)
        if not {"id", "body", "expected_tier", "why"} <= keys <= {"id", "body", "headers", "expected_tier", "why"}:
            problems.append(f"{rid}: keys {sorted(keys)}")
        if row.get("expected_tier") not in TIERS:
            problems.append(f"{rid}: expected_tier {row.get('expected_tier')!r} not in {sorted(TIERS)}")
        if not (isinstance(row.get("why"), str) and row["why"].strip()):
            problems.append(f"{rid}: why must be a sentence")
        problems += [f"{rid}: {p}" for p in body_problems(row.get("body", {}))]
        problems += [f"{rid}: {p}" for p in header_problems(row.get("headers", {}))]
    assert not problems, "\n".join(problems)


def test_labelled_ids_and_bodies_are_unique(labelled: list[dict]) -> None:
    assert len(labelled) >= 170
    ids = Counter(row["id"] for row in labelled)
    assert not [i for i, n in ids.items() if n > 1], "duplicate ids"
    bodies = Counter(json.dumps(row["body"], sort_keys=True) for row in labelled)
    assert max(bodies.values()) == 1, "two lines share a body"


def test_labelled_tier_shares_follow_the_brief(labelled: list[dict]) -> None:
    shares = {t: n / len(labelled) for t, n in Counter(row["expected_tier"] for row in labelled).items()}
    expected = {"fp16": (0.25, 0.35), "fp8": (0.10, 0.20), "int8": (0.15, 0.25), "int4": (0.30, 0.40)}
    for tier, (lo, hi) in expected.items():
        assert lo <= shares.get(tier, 0) <= hi, f"{tier}: {shares.get(tier, 0):.0%} not in {lo:.0%}..{hi:.0%}"


def test_client_floors_are_respected_by_the_labels(labelled: list[dict]) -> None:
    """A label below the client's x-min-tier or a priority >= 9 not at fp16 would contradict the rubric."""
    for row in labelled:
        tier = parse_tier(row["expected_tier"])
        headers = row.get("headers", {})
        if "x-min-tier" in headers:
            assert tier.rank <= parse_tier(headers["x-min-tier"]).rank, row["id"]
        if int(headers.get("x-priority", "5")) >= 9:
            assert tier.value == "fp16", row["id"]


# --- traffic mixes ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=sorted(TRAFFIC))
def traffic(request: pytest.FixtureRequest) -> tuple[str, list[dict]]:
    return request.param, read_jsonl(DATA / "traffic" / request.param)


def test_traffic_lines_have_the_documented_shape(traffic: tuple[str, list[dict]]) -> None:
    name, rows = traffic
    _, _, (min_chars, max_chars) = TRAFFIC[name]
    problems = []
    for n, row in enumerate(rows, start=1):
        where = f"{name}:{n}"
        if set(row) != {"session", "turn", "class", "body", "headers"}:
            problems.append(f"{where}: keys {sorted(row)}")
            continue
        if row["class"] not in CLASSES:
            problems.append(f"{where}: class {row['class']!r} not in {sorted(CLASSES)}")
        if not (row["session"] is None or (isinstance(row["session"], str) and row["session"].startswith("s-"))):
            problems.append(f"{where}: session must be null or 's-NNNN'")
        if row["session"] is None and row["turn"] != 1:
            problems.append(f"{where}: a single request is turn 1")
        problems += [f"{where}: {p}" for p in body_problems(row["body"])]
        problems += [f"{where}: {p}" for p in header_problems(row["headers"])]
        mt = row["body"].get("max_tokens")
        if not (isinstance(mt, int) and 32 <= mt <= 1500):
            problems.append(f"{where}: max_tokens {mt!r} must be 32..1500")
        chars = prompt_chars(row["body"])
        if not min_chars <= chars <= max_chars:
            problems.append(f"{where}: prompt has {chars} chars, expected {min_chars}..{max_chars}")
    assert not problems, "\n".join(problems)


def test_traffic_lines_are_unique_and_shares_in_range(traffic: tuple[str, list[dict]]) -> None:
    name, rows = traffic
    (lo_n, hi_n), shares, _ = TRAFFIC[name]
    assert lo_n <= len(rows) <= hi_n, f"{name}: {len(rows)} lines"
    dumped = Counter(json.dumps(r, sort_keys=True) for r in rows)
    assert max(dumped.values()) == 1, f"{name}: duplicate lines"
    counts = Counter(r["class"] for r in rows)
    for cls, (lo, hi) in shares.items():
        share = counts[cls] / len(rows)
        assert lo <= share <= hi, f"{name}: {cls} is {share:.0%}, expected {lo:.0%}..{hi:.0%}"


def test_sessions_are_consecutive_and_carry_their_history(traffic: tuple[str, list[dict]]) -> None:
    """Turns 1..n in file order; turn k resends turn k-1's messages plus an assistant reply."""
    name, rows = traffic
    by_session: dict[str, list[dict]] = {}
    for r in rows:
        if r["session"] is not None:
            by_session.setdefault(r["session"], []).append(r)
    assert by_session, f"{name}: no multi-turn sessions"
    for sid, turns in by_session.items():
        assert [t["turn"] for t in turns] == list(range(1, len(turns) + 1)), f"{name} {sid}: turns out of order"
        assert 2 <= len(turns) <= 6, f"{name} {sid}: {len(turns)} turns"
        for prev, cur in zip(turns, turns[1:]):
            before, after = prev["body"]["messages"], cur["body"]["messages"]
            assert after[:len(before)] == before, f"{name} {sid} turn {cur['turn']}: history differs"
            reply = after[len(before)]
            assert reply["role"] == "assistant" and reply["content"], f"{name} {sid}: missing assistant turn"


def test_mixed_has_sessions_that_turn_sensitive() -> None:
    """These exercise session pinning: the first turn is tolerant, a later one is sensitive."""
    rows = read_jsonl(DATA / "traffic" / "mixed.jsonl")
    classes: dict[str, list[str]] = {}
    for r in rows:
        if r["session"]:
            classes.setdefault(r["session"], []).append(r["class"])
    pivots = [s for s, cs in classes.items() if cs[0] == "tolerant" and "sensitive" in cs[1:]]
    assert len(pivots) >= 5
