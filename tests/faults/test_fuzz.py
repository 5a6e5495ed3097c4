"""Property-based fuzzing of what clients control: any JSON value, any nesting, any text, any header value.
The classifier either decides or raises its typed RequestError (a 400 naming the field); the router never answers
500 and always answers OpenAI's error JSON for a 4xx/5xx; the request log keeps committing through all of it."""

from __future__ import annotations

import json
import math

import httpx
import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from quantroute.classify import RequestError, compile_policy
from quantroute.policy.loader import load_policy
from tests.conftest import REPO, wait_until
from tests.router.conftest import MODEL, router_at

TEXT = st.text(st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    ["", "\x00", "code", "step by step", "json", "x" * 3000, "é✓中文", "\u202e", "```python"])
SCALARS = st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False) | TEXT
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=25)
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant", "tool"]) | TEXT,
                                 "content": TEXT | JSON})
FIELDS = {"model": st.just(MODEL) | TEXT | JSON, "messages": st.lists(MESSAGE, max_size=4) | JSON,
          "prompt": TEXT | JSON, "temperature": SCALARS, "max_tokens": SCALARS | st.integers(),
          "stream": SCALARS, "tools": JSON, "response_format": JSON}
BODY = st.fixed_dictionaries({}, optional=FIELDS) | JSON
HEADERS = st.dictionaries(st.sampled_from(["x-priority", "x-latency-budget-ms", "x-min-tier", "x-session-id"]),
                          st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=20).map(str.strip),
                          max_size=4)

POLICY = compile_policy(load_policy(REPO / "policies" / "policy-0001.yaml"))


@settings(max_examples=150, deadline=None, database=None)
@given(body=BODY, headers=HEADERS, kind=st.sampled_from(["chat", "completion", None]))
def test_classifier_decides_or_names_the_field(body, headers, kind):
    try:
        decision = POLICY.classify(body, headers, kind)
    except RequestError as e:
        assert e.message
        return
    assert decision.tier is not None


def nested(depth: int) -> bytes:
    return b'{"model": "' + MODEL.encode() + b'", "messages": ' + b"[" * depth + b"]" * depth + b"}"


HOSTILE = [nested(1000), nested(1023), b'{"model": "llama\\u00003-8b", "messages": []}',
           b'{"model": "' + MODEL.encode() + b'", "messages": [{"role": "user", "content": "a\\u0000b"}]}',
           b'{"model": "\\ud800", "messages": []}', b"\xff\xfe", b"", b"null", b"[]", b'"x"', b"{" * 5000]


def _finite(v):
    """`v` with each non-finite float as null, as orjson writes it."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v


def encode(body) -> bytes:
    """A generated body as a client would send it. orjson refuses an integer beyond 64 bits, which a client may
    well send (the router reads it as a float): such a body goes through json instead (with the non-finite floats
    as null, as orjson writes them, so that every body is JSON). CI once failed on `max_tokens=-2**63 - 1`
    raised by this encoder, not by the router."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(_finite(body), ensure_ascii=False, allow_nan=False).encode()


def check(r: httpx.Response) -> None:
    assert r.status_code != 500 and r.status_code < 600, r.text
    if r.status_code >= 400:
        err = r.json()["error"]
        assert err["message"] and err["type"], r.text


def test_router_never_500s_and_the_log_keeps_committing(make_settings):
    with router_at(make_settings(log_flush_interval_s=0.05)) as (url, app), httpx.Client(base_url=url,
                                                                                     timeout=30) as c:
        sent = 0
        for raw in HOSTILE:
            check(c.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"}))
            sent += 1

        @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(body=BODY, headers=HEADERS, path=st.sampled_from(["/v1/chat/completions", "/v1/completions"]))
        @example(body={"max_tokens": -2**63 - 1, "temperature": float("inf")}, headers={}, path="/v1/completions")
        def one(body, headers, path):
            nonlocal sent
            body_bytes = encode(body)
            check(c.post(path, content=body_bytes, headers={**headers, "content-type": "application/json"}))
            sent += 1

        one()
        ok = c.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                                                  "max_tokens": 4})
        assert ok.status_code == 200
        # every request that parsed as JSON is logged (bodies that are not JSON are refused before routing)
        wait_until(lambda: app.writer.written + app.writer.dropped >= 1 + sent - 4 and not app.writer.buffer,
                   what=lambda: f"every parsed request logged (written, dropped, sent: "
                                f"{app.writer.written, app.writer.dropped, sent})", timeout=20)
        assert app.writer.dropped == 0 and app.writer.write_errors == 0
