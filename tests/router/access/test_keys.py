"""Client API keys at the router, through real routers and the real `openai` SDK: 401 for a missing, malformed,
unknown, revoked or expired key (OpenAI's error JSON, nothing of the key logged or stored), a tenant's tier
floor over whatever the request says (pinned sessions too), 429 with Retry-After over a limit, revocation
across two replicas on PostgreSQL, and usage per tenant that adds up to the request log."""

from __future__ import annotations

import contextlib
import json
import logging
from datetime import timedelta

import httpx
import openai
import pytest
import yaml
from sqlalchemy import text
from sqlmodel import select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from quantroute.clock import utcnow
from quantroute.db.engine import init_db, make_engine
from quantroute.db.engine import session as db_session
from quantroute.db.request_log import RequestLog
from quantroute.db.request_stats import TenantUsageMinute
from quantroute.db.tenant import ClientKey, bump_revision
from quantroute.router.testing import serve_app
from quantroute.tenants import create_key, revoke_key, set_tenant
from tests.conftest import add_users, wait_until
from tests.router.conftest import FP16, INT4, INT8, MODEL, SENSITIVE, TOLERANT, router_at, write_policy

OPERATOR = "olga"


def setup_db(url: str):
    eng = make_engine(url)
    init_db(eng)
    add_users(eng, **{OPERATOR: "operator"})
    return eng


def client(url: str, key: str | None) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=key or "", max_retries=0)


def ask(url: str, key: str | None, messages=TOLERANT, session: str | None = None, **headers: str) -> httpx.Response:
    h = {**({"authorization": f"Bearer {key}"} if key else {}), **({"x-session-id": session} if session else {}),
         **headers}
    return httpx.post(f"{url}/v1/chat/completions", headers=h, timeout=30,
                      json={"model": MODEL, "messages": messages, "max_tokens": 8})


def logged(eng) -> list[RequestLog]:
    with db_session(eng) as s:
        return list(s.exec(select(RequestLog)))


def every_text_in_the_database(eng) -> str:
    """Every table's rows as text: a key must appear nowhere (only its hash and prefix are stored)."""
    from sqlalchemy import inspect

    out = []
    with eng.connect() as c:
        for table in inspect(eng).get_table_names():
            out += [repr(tuple(r)) for r in c.execute(text(f'SELECT * FROM "{table}"'))]
    return "\n".join(out)


def test_bad_keys_get_401_as_openai_errors_and_the_key_is_never_logged_or_stored(make_settings, caplog):
    settings = make_settings(client_auth="required")
    eng = setup_db(settings.db_url)
    good = create_key(eng, actor=OPERATOR, tenant="acme").key
    soon = create_key(eng, actor=OPERATOR, tenant="acme", expires_at=utcnow() + timedelta(hours=1))
    gone = create_key(eng, actor=OPERATOR, tenant="acme").key
    revoke_key(eng, actor=OPERATOR, prefix=gone)
    caplog.set_level(logging.DEBUG, logger="quantroute")  # the router's own logs (the SDK's would show the key)
    caplog.set_level(logging.DEBUG, logger="uvicorn")
    with router_at(settings) as (url, _):
        ok = client(url, good).chat.completions.create(model=MODEL, messages=TOLERANT, max_tokens=4)
        assert ok.choices[0].message.content
        with db_session(eng) as s:  # the key's expiry passes (moved back rather than waited for)
            row = s.get(ClientKey, soon.row.id)
            row.expires_at = row.updated_at = utcnow() - timedelta(seconds=1)
            s.add(row)
            bump_revision(session=s)
            s.commit()
        wait_until(lambda: ask(url, soon.key).status_code == 401, what="the expired key refused", timeout=10)
        missing = ask(url, None)  # (the SDK refuses to send no key at all)
        assert missing.status_code == 401 and missing.json()["error"]["type"] == "authentication_error"
        cases = {"malformed": "not-a-quantroute-key", "unknown": "qk_" + "x" * 43, "revoked": gone,
                 "expired": soon.key}
        for why, key in cases.items():
            with pytest.raises(openai.AuthenticationError) as e:
                client(url, key).chat.completions.create(model=MODEL, messages=TOLERANT, max_tokens=4)
            err = e.value.body
            assert e.value.status_code == 401 and err["type"] == "authentication_error", (why, err)
            assert err["code"] == "invalid_api_key" and err["message"], (why, err)
            assert key[4:] not in err["message"], why
        raw = ask(url, "Basic " + good)  # not a bearer token: malformed, not a crash
        assert raw.status_code == 401 and raw.json()["error"]["code"] == "invalid_api_key"
        wait_until(lambda: len(logged(eng)) >= 7, what="the requests logged", timeout=10)
    stored = every_text_in_the_database(eng)
    for key in (good, gone, soon.key):
        assert key not in stored and key[11:] not in stored
        assert key not in caplog.text and key[11:] not in caplog.text
    assert {r.status for r in logged(eng)} == {200, 401}
    assert {r.tenant for r in logged(eng) if r.status == 200} == {"acme"}


def test_without_a_key_optional_passes_and_off_ignores_keys(make_settings):
    settings = make_settings(client_auth="optional")
    eng = setup_db(settings.db_url)
    with router_at(settings) as (url, _):
        assert ask(url, None).status_code == 200
        bad = ask(url, "qk_" + "y" * 43)  # a key that is sent must be valid
        assert bad.status_code == 401
    with router_at(make_settings()) as (url, app):  # client_auth off: the key is not even looked at
        assert app.keys is None and ask(url, "qk_" + "y" * 43).status_code == 200
    eng.dispose()


def test_a_tenant_floor_holds_whatever_the_request_says_and_for_pinned_sessions(make_settings):
    settings = make_settings(client_auth="optional", client_keys_refresh_s=0.2)
    eng = setup_db(settings.db_url)
    key = create_key(eng, actor=OPERATOR, tenant="bank", tier_floor="int8").key
    with router_at(settings) as (url, _):
        r = ask(url, key, **{"x-min-tier": "int4"})  # a header asking for less changes nothing
        assert r.status_code == 200 and r.headers["x-quantroute-tier"] == "int8"
        # a session pinned at int4 without a key is not followed by the tenant (pins are per tenant)
        assert ask(url, None, session="shared").headers["x-quantroute-tier"] == "int4"
        assert ask(url, key, session="shared").headers["x-quantroute-tier"] == "int8"
        again = ask(url, key, session="shared")
        assert again.headers["x-quantroute-tier"] == "int8" and again.headers.get("x-quantroute-pinned") == "true"
        # naming a deployment below the floor is refused, not served
        named = httpx.post(f"{url}/v1/chat/completions", headers={"authorization": f"Bearer {key}"}, timeout=30,
                           json={"model": INT4, "messages": TOLERANT, "max_tokens": 4})
        assert named.status_code == 403 and named.json()["error"]["code"] == "tier_below_floor"
        assert "int8" in named.json()["error"]["message"]
        # a tenant without a floor pins a session at int4; raising its floor moves its next turn up
        free = create_key(eng, actor=OPERATOR, tenant="shop").key
        assert ask(url, free, session="s").headers["x-quantroute-tier"] == "int4"
        assert ask(url, free, session="s").headers.get("x-quantroute-pinned") == "true"
        set_tenant(eng, actor=OPERATOR, name="shop", tier_floor="fp16")
        wait_until(lambda: ask(url, free, session="s").headers["x-quantroute-tier"] == "fp16",
                   what="the raised floor applied to the pinned session", timeout=10)
        r = ask(url, free, session="s")
        assert r.headers["x-quantroute-tier"] == "fp16" and r.headers["x-quantroute-deployment"] == FP16
    with db_session(eng) as s:
        rows = list(s.exec(select(RequestLog).where(RequestLog.tenant == "bank", RequestLog.status == 200)))
    assert rows and all(r.tier == "int8" for r in rows)
    eng.dispose()


def test_over_a_limit_is_a_429_with_retry_after(make_settings):
    settings = make_settings(client_auth="required")
    eng = setup_db(settings.db_url)
    rpm = create_key(eng, actor=OPERATOR, tenant="small", rpm=2).key
    set_tenant(eng, actor=OPERATOR, name="thrifty", tpm=5)
    tpm = create_key(eng, actor=OPERATOR, tenant="thrifty").key
    with router_at(settings) as (url, _):
        assert [ask(url, rpm).status_code for _ in range(2)] == [200, 200]
        with pytest.raises(openai.RateLimitError) as e:
            client(url, rpm).chat.completions.create(model=MODEL, messages=TOLERANT, max_tokens=4)
        assert e.value.status_code == 429 and e.value.body["code"] == "rate_limit_exceeded"
        assert e.value.body["type"] == "requests" and "key qk_" in e.value.body["message"]
        assert int(e.value.response.headers["retry-after"]) >= 1
        assert ask(url, tpm).status_code == 200  # its tokens are counted once the answer is in
        over = ask(url, tpm)
        assert over.status_code == 429 and over.json()["error"]["type"] == "tokens"
        assert "tenant thrifty" in over.json()["error"]["message"] and int(over.headers["retry-after"]) >= 1
    eng.dispose()


def test_usage_per_tenant_adds_up_to_the_request_log(make_settings):
    settings = make_settings(client_auth="optional")
    eng = setup_db(settings.db_url)
    a = create_key(eng, actor=OPERATOR, tenant="a").key
    b = create_key(eng, actor=OPERATOR, tenant="b", tier_floor="fp16").key
    with router_at(settings) as (url, _):
        for key, messages in [(a, TOLERANT), (a, SENSITIVE), (b, TOLERANT), (None, TOLERANT), (a, TOLERANT)]:
            assert ask(url, key, messages).status_code == 200
        wait_until(lambda: len(logged(eng)) == 5, what="5 logged requests", timeout=10)
    with db_session(eng) as s:
        usage = list(s.exec(select(TenantUsageMinute)))
    got: dict[tuple, list[int]] = {}
    for u in usage:
        v = got.setdefault((u.tenant, u.model, u.tier), [0, 0, 0])
        v[0] += u.requests
        v[1] += u.prompt_tokens
        v[2] += u.completion_tokens
    want: dict[tuple, list[int]] = {}
    for r in logged(eng):
        v = want.setdefault((r.tenant or "", r.model, r.tier or ""), [0, 0, 0])
        v[0] += 1
        v[1] += r.prompt_tokens or 0
        v[2] += r.completion_tokens or 0
    assert got == want
    assert got[("a", MODEL, "int4")][0] == 2 and got[("b", MODEL, "fp16")][0] == 1
    assert got[("a", MODEL, "int4")][2] > 0  # tokens counted, not just requests
    eng.dispose()


@pytest.mark.postgres
def test_a_revocation_reaches_both_replicas_within_seconds(make_settings, pg_url):
    eng = setup_db(pg_url)
    key = create_key(eng, actor=OPERATOR, tenant="acme").key
    settings = [make_settings(db_url=pg_url, client_auth="required", client_keys_refresh_s=0.5) for _ in range(2)]
    with router_at(settings[0]) as (u1, _), router_at(settings[1]) as (u2, _):
        assert ask(u1, key).status_code == ask(u2, key).status_code == 200
        revoked_at = utcnow()
        revoke_key(eng, actor=OPERATOR, prefix=key[:11])
        for url in (u1, u2):
            wait_until(lambda url=url: ask(url, key).status_code == 401, what=f"{url} refusing the revoked key",
                       timeout=10, interval=0.05)
        assert (utcnow() - revoked_at).total_seconds() < 5
        # a key created after both started works on both at once (a miss reads the table again)
        fresh = create_key(eng, actor=OPERATOR, tenant="acme").key
        assert ask(u1, fresh).status_code == ask(u2, fresh).status_code == 200
    eng.dispose()


@contextlib.contextmanager
def recording_nodes(sim, tmp_path):
    """Two nodes (int8 and fp16) that answer every chat request and keep the headers each one arrived with."""
    seen: list[tuple[str, dict[str, str]]] = []

    def node_app(node_id: str) -> Starlette:
        async def chat_answer(request: Request) -> JSONResponse:
            seen.append((node_id, dict(request.headers)))
            return JSONResponse({"id": "c", "object": "chat.completion", "created": 0, "model": INT8, "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})

        async def ok(request: Request) -> PlainTextResponse:
            return PlainTextResponse("vllm:num_requests_waiting 0\nvllm:num_requests_running 0\n")

        return Starlette(routes=[Route("/health", ok), Route("/metrics", ok),
                                 Route("/v1/chat/completions", chat_answer, methods=["POST"])])

    with serve_app(node_app("int8-a")) as int8_url, serve_app(node_app("fp16-a")) as fp16_url:
        fleet = sim.fleet.model_dump(mode="json")
        nodes = [{**n, "port": int(url.rsplit(":", 1)[1])} for n in fleet["nodes"]
                 for node_id, url in (("int8-a", int8_url), ("fp16-a", fp16_url)) if n["id"] == node_id]
        path = tmp_path / "recording-fleet.yaml"
        path.write_text(yaml.safe_dump({**fleet, "nodes": nodes}))
        yield path, seen


def test_a_client_key_never_reaches_the_nodes_nor_their_shadows(make_settings, sim, policies, tmp_path):
    # chatter goes to int8, and every greedy int8 answer is shadowed to fp16: that request must not carry the key
    write_policy(policies, 1, thresholds=[{"min_score": 6, "tier": "fp16"}, {"min_score": -100, "tier": "int8"}],
                 shadow={"rate": 1.0, "max_concurrent": 4, "max_target_load": 1000, "timeout_s": 30,
                                      "pairs": [{"served": ["int8"], "shadow": "fp16"}]})
    settings = make_settings(client_auth="required")
    eng = setup_db(settings.db_url)
    key = create_key(eng, actor=OPERATOR, tenant="bank").key
    with recording_nodes(sim, tmp_path) as (fleet_file, seen):
        with router_at(settings.model_copy(update={"fleet_file": fleet_file})) as (url, _):
            answer = client(url, key).chat.completions.create(model=MODEL, messages=TOLERANT, max_tokens=4,
                                                              temperature=0, extra_headers={"x-request-id": "req-1"})
            assert answer.choices[0].message.content == "ok"
            wait_until(lambda: len(seen) == 2, what="the request and its shadow at the nodes", timeout=10)
        assert sorted(node for node, _ in seen) == ["fp16-a", "int8-a"]
        for _, headers in seen:
            assert "authorization" not in headers and key not in json.dumps(headers)
        assert dict(seen)["int8-a"]["x-request-id"] == "req-1"  # the other headers still pass
        # with client_auth off the router holds no credential of its own: a node's own API key passes through
        seen.clear()
        with router_at(make_settings(fleet_file=fleet_file)) as (url, _):
            r = httpx.post(f"{url}/v1/chat/completions", headers={"authorization": "Bearer node-secret"}, timeout=30,
                           json={"model": MODEL, "messages": TOLERANT, "max_tokens": 4, "temperature": 0})
            assert r.status_code == 200
            wait_until(lambda: len(seen) == 2, what="the request and its shadow at the nodes", timeout=10)
        assert [h["authorization"] for _, h in seen] == ["Bearer node-secret"] * 2
    eng.dispose()
