"""Error codes and bodies, admin auth, canary arms, and (with PostgreSQL) two routers sharing pins."""

from __future__ import annotations

import httpx
import pytest

from quantroute.router.path.canary import BASELINE, CANDIDATE, choose_arm
from tests.conftest import wait_until
from tests.router.conftest import (
    INT4,
    INT4_V2,
    MODEL,
    TOKEN,
    TOLERANT,
    admin,
    chat,
    router_at,
    set_faults,
    write_policy,
)


def err(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    body = r.json()["error"]
    assert set(body) == {"message", "type", "param", "code"}
    return body


def test_error_codes_and_openai_error_json(make_settings, sim):
    with router_at(make_settings(max_body_bytes=4096)) as (url, _):
        def post(**kw):
            return httpx.post(url + "/v1/chat/completions", timeout=30, **kw)

        assert "JSON" in err(post(content=b"{nope"), 400)["message"]
        assert err(post(json={"model": MODEL, "messages": TOLERANT, "temperature": "hot"}),
                   400)["param"] == "temperature"
        assert err(post(json={"model": MODEL}), 400)["param"] == "messages"
        assert err(post(json=[1, 2]), 400)["type"] == "invalid_request_error"
        e = err(post(json={"model": "gpt-9", "messages": TOLERANT}), 404)
        assert e["code"] == "model_not_found" and MODEL in e["message"]
        big = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 5000}]}
        assert err(post(json=big), 413)["code"] == "request_too_large"
        for n in ("int4-a", "int4-b", "int4-v2"):
            set_faults(sim, n, error_rate=1.0)
        try:
            e = err(post(json={"model": MODEL, "messages": TOLERANT, "max_tokens": 4}), 502)
            assert e["code"] == "upstream_error" and "3 attempt" in e["message"]
        finally:
            for n in ("int4-a", "int4-b", "int4-v2"):
                set_faults(sim, n, error_rate=0.0)
        assert err(httpx.get(url + "/v1/chat/completions"), 405)


def test_admin_endpoints_need_the_bearer_token(router):
    url, _ = router
    for method, path in [("GET", "/admin/policy"), ("GET", "/admin/nodes"), ("GET", "/admin/sessions"),
                         ("DELETE", "/admin/sessions/x"), ("POST", "/admin/nodes")]:
        assert err(httpx.request(method, url + path), 401)["type"] == "authentication_error"
        assert httpx.request(method, url + path, headers={"authorization": "Bearer wrong"}).status_code == 401
    a = admin(url)
    assert a.get("/admin/policy").json()["version"] == 1
    assert {n["key"] for n in a.get("/admin/nodes").json()["nodes"]} >= {"int4-a", "fp16-a"}


def test_register_node_new_generation_and_tier_check(router, sim):
    url, app = router
    a = admin(url)
    reg = {"url": sim.urls["int4-b"], "model": MODEL, "deployment": INT4, "tier": "int4", "format": "int4",
           "checksum": "sha256:aaa", "node_id": "int4-extra"}
    assert a.post("/admin/nodes", json=reg).json()["generation"] == 1
    assert a.post("/admin/nodes", json=reg).json()["generation"] == 1  # same artifact: same generation
    assert a.post("/admin/nodes", json={**reg, "checksum": "sha256:bbb"}).json()["generation"] == 2
    e = err(a.post("/admin/nodes", json={**reg, "tier": "fp16", "format": "bf16"}), 400)
    assert e["param"] == "tier" and "int4" in e["message"]
    assert err(a.post("/admin/nodes", json={**reg, "url": "not a url"}), 400)["param"] == "url"


def test_canary_arm_is_sticky_per_session_and_tagged(make_settings, policies):
    canary = [{"model": MODEL, "baseline": INT4, "candidate": INT4_V2, "percent": 50}]
    write_policy(policies, 2, canaries=canary)
    with router_at(make_settings()) as (url, _):
        arms = {}
        for i in range(20):
            r = chat(url, TOLERANT, session=f"c-{i}")
            arm = r.headers["x-quantroute-arm"]
            assert r.headers["x-quantroute-deployment"] == (INT4_V2 if arm == CANDIDATE else INT4)
            assert arm == choose_arm(f"c-{i}", 50, MODEL)
            arms[i] = arm
        assert set(arms.values()) == {BASELINE, CANDIDATE}
        for i in range(20):  # sticky
            assert chat(url, TOLERANT, session=f"c-{i}").headers["x-quantroute-arm"] == arms[i]


def test_rolled_back_canary_returns_pinned_candidate_sessions_to_baseline(make_settings, policies):
    """At 0 % every session pinned to the candidate goes back to the baseline at the same tier, and stays
    there when a new canary starts (no second format switch)."""

    canary = {"model": MODEL, "baseline": INT4, "candidate": INT4_V2}
    write_policy(policies, 2, canaries=[{**canary, "percent": 50}])
    with router_at(make_settings()) as (url, _):
        on_candidate = [f"r-{i}" for i in range(40) if choose_arm(f"r-{i}", 50, MODEL) == CANDIDATE][:5]
        for key in on_candidate:
            assert chat(url, TOLERANT, session=key).headers["x-quantroute-deployment"] == INT4_V2
        write_policy(policies, 3, canaries=[{**canary, "percent": 0}])
        wait_until(lambda: chat(url, TOLERANT).headers["x-quantroute-policy-version"] == "3", what="policy 3 to load",
                   timeout=10)
        for key in on_candidate:
            r = chat(url, TOLERANT, session=key)
            assert (r.headers["x-quantroute-arm"], r.headers["x-quantroute-deployment"]) == (BASELINE, INT4)
            assert r.headers["x-quantroute-tier"] == "int4"
        write_policy(policies, 4, canaries=[{**canary, "percent": 50}])
        wait_until(lambda: chat(url, TOLERANT).headers["x-quantroute-policy-version"] == "4", what="policy 4 to load",
                   timeout=20)
        for key in on_candidate:
            assert chat(url, TOLERANT, session=key).headers["x-quantroute-deployment"] == INT4


@pytest.mark.postgres
def test_two_routers_share_pins_through_postgres(make_settings, pg_url):
    s1, s2 = make_settings(db_url=pg_url), make_settings(db_url=pg_url)
    with router_at(s1) as (u1, _), router_at(s2) as (u2, _):
        assert chat(u1, TOLERANT, session="shared").headers["x-quantroute-tier"] == "int4"
        from tests.router.conftest import SENSITIVE

        assert chat(u2, SENSITIVE, session="shared").headers["x-quantroute-tier"] == "int4"
        assert admin(u2).delete("/admin/sessions/shared").json()["unpinned"] is True


_ = TOKEN


def test_deployment_header_pins_one_artifact_of_the_logical_model(make_settings, sim):
    with router_at(make_settings()) as (url, _):
        def post(h):
            return httpx.post(url + "/v1/chat/completions", timeout=30, headers=h,
                              json={"model": MODEL, "messages": TOLERANT, "max_tokens": 4})

        r = post({"x-quantroute-deployment": INT4_V2})
        assert r.status_code == 200 and r.headers["x-quantroute-deployment"] == INT4_V2
        assert r.json()["model"] == INT4_V2
        e = err(post({"x-quantroute-deployment": "llama3-8b-nope"}), 400)
        assert e["param"] == "x-quantroute-deployment" and INT4 in e["message"]
