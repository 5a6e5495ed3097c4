"""Stored prompts follow the prompt-storage setting; credentials in headers are never stored; retention runs
inside the router on a configured age."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from dashboard.queries import replay_rows
from quantroute.clock import utcnow
from quantroute.db.engine import init_db, make_engine
from quantroute.db.engine import session as db_session
from quantroute.db.request_log import RequestLog
from quantroute.router.requestlog.privacy import _SECRET_TEXT, REDACTED, redact_text, replay_record
from tests.conftest import wait_until
from tests.router.conftest import MODEL, make_settings, policies, router_at, sim  # noqa: F401  (fixtures)

SECRET_HEADERS = {"x-api-key": "sk-live-0123456789abcdef", "authorization": "Bearer abc", "x-auth-token": "t0k3n",
                  "x-internal-secret": "s3cr3t", "x-priority": "3", "x-trace-id": "trace-1"}


def test_credentials_in_headers_are_never_kept_even_if_allowlisted():
    rec = replay_record({"messages": []}, SECRET_HEADERS, storage="full",
                        allow=("x-priority", "x-api-key", "authorization"))
    assert rec["headers"] == {"x-priority": "3"}


def test_storage_modes():
    body = {"model": "m", "messages": [{"role": "user", "content": "my key is sk-proj-ABCDEF0123456789xyz, mail "
                                                                   "bob@example.com, card 4111 1111 1111 1111"}]}
    assert replay_record(body, {}, storage="none", allow=()) is None
    assert replay_record(body, {}, storage="full", allow=())["body"] == body
    red = replay_record(body, {}, storage="redacted", allow=())
    content = red["body"]["messages"][0]["content"]
    assert red["redacted"] and "sk-proj" not in content and "bob@" not in content and "4111" not in content
    assert content.startswith("my key is [redacted]")
    assert redact_text("Solve 3x + 5 = 20 step by step") == "Solve 3x + 5 = 20 step by step"


def _rows(url: str) -> list:
    engine = make_engine(url)
    try:
        with engine.connect() as c:
            return [r[0] for r in c.execute(text("SELECT replay FROM request_log ORDER BY id"))]
    finally:
        engine.dispose()


def _wait_rows(db_url: str, n: int) -> list:
    wait_until(lambda: len(_rows(db_url)) >= n, what=f"{n} rows in the request log", timeout=15)
    return _rows(db_url)


@pytest.mark.parametrize("storage", ["redacted", "none"])
def test_the_router_stores_what_the_setting_allows(make_settings, storage):  # noqa: F811  (fixtures imported above)
    settings = make_settings(prompt_storage=storage)
    with router_at(settings) as (url, _):
        r = httpx.post(f"{url}/v1/chat/completions", headers=SECRET_HEADERS, timeout=30, json={
            "model": MODEL, "max_tokens": 4,
            "messages": [{"role": "user", "content": "hi, my token is ghp_0123456789abcdefABCDEF"}]})
        assert r.status_code == 200
        (replay,) = _wait_rows(settings.db_url, 1)
    if isinstance(replay, str):  # SQLite hands JSON back as text
        replay = json.loads(replay)
    if storage == "none":
        assert replay is None
        assert replay_rows(make_engine(settings.db_url)).empty  # the what-if replay: nothing to replay
        return
    assert replay["headers"] == {"x-priority": "3"}
    assert "ghp_" not in str(replay) and "sk-live" not in str(replay) and "abc" not in str(replay["headers"])


def test_retention_runs_inside_the_router(make_settings):  # noqa: F811  (fixtures imported above)
    settings = make_settings(log_retention_days=1 / 24, log_retention_interval_s=0.2)
    engine = make_engine(settings.db_url)
    init_db(engine)
    with db_session(engine) as s:
        s.add(RequestLog(ts=utcnow() - timedelta(hours=2), model=MODEL, status=200, latency_ms=1.0))
        s.add(RequestLog(ts=utcnow() - timedelta(minutes=10), model=MODEL, status=200, latency_ms=1.0))
        s.commit()
    with router_at(settings):
        wait_until(lambda: len(_rows(settings.db_url)) == 1, what="one row left after retention", timeout=15,
                   interval=0.1)
    assert len(_rows(settings.db_url)) == 1  # the old row went, the recent one stayed
    engine.dispose()


SECRETISH = st.text(st.sampled_from(list("ab09 -_+/=@.eyJskAKIA\u0663\n")), max_size=60) | st.sampled_from(
    ["card 4111-1111-1111-1111", "sk-" + "a" * 12, "eyJx.y.z", "a@b.co", "x" * 31 + "+", "\u0663" * 13])


@settings(max_examples=500, deadline=None, database=None)
@given(text=SECRETISH | st.text(max_size=80))
def test_the_prefilter_never_skips_a_string_the_pattern_would_change(text):
    assert redact_text(text) == _SECRET_TEXT.sub(REDACTED, text)


def test_the_queued_row_is_already_redacted_and_stored_so(make_settings):  # noqa: F811  (fixtures imported above)
    """The row is prepared as its request ends (the whole-body prefilter keeps that cheap: most bodies skip the
    pattern), so the raw secret never waits in the writer's buffer; what is stored is the redacted record."""
    settings = make_settings(prompt_storage="redacted", log_flush_interval_s=3600, log_batch_size=2)

    def send() -> None:
        r = httpx.post(f"{url}/v1/chat/completions", headers={"x-priority": "3"}, timeout=30, json={
            "model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "mail bob@example.com"}]})
        assert r.status_code == 200

    with router_at(settings) as (url, app):
        send()
        # the row is queued as the request ends, just after its answer went out: the client can be first
        wait_until(lambda: app.writer.buffer, what="the first request's row queued", timeout=10)
        ((queued, _),) = list(app.writer.buffer)
        assert "bob@example.com" not in repr(queued.row) and "bob@example.com" not in repr(queued.values)
        assert "mail [redacted]" in queued.row["replay"]  # the record, encoded to its stored JSON text
        send()  # a full batch: the writer wakes
        rows = _wait_rows(settings.db_url, 2)
    replay = json.loads(rows[0]) if isinstance(rows[0], str) else rows[0]
    assert replay["body"]["messages"][0]["content"] == "mail [redacted]"
    assert replay["headers"] == {"x-priority": "3"} and replay["redacted"] is True


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False)
                       | SECRETISH | st.text(max_size=40),
                       lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                       max_leaves=20)


@settings(max_examples=400, deadline=None, database=None)
@given(body=st.dictionaries(st.sampled_from(["model", "messages", "prompt", "tools", "user"]), JSONISH, max_size=5))
def test_the_whole_body_prefilter_keeps_exactly_what_the_walk_would(body):
    from quantroute.router.requestlog.privacy import _redact

    assert replay_record(body, {}, storage="redacted", allow=())["body"] == _redact(body)
