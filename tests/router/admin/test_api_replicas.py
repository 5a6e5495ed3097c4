"""The admin client over two router replicas sharing PostgreSQL (each with its own pin cache and probes):
reads merge both views, an unpin reaches both caches, a replica that is down is named, and both replicas'
request logs land in the one database."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from quantroute.admin_client import RouterAdmin, RouterUnavailable, counter_by_label, split_urls
from quantroute.db.engine import make_engine
from tests.conftest import wait_until
from tests.router.conftest import SENSITIVE, TOKEN, TOLERANT, chat, router_at


def test_split_urls_takes_a_list_or_a_comma_separated_string():
    assert split_urls("http://a:1/, http://b:2") == ["http://a:1", "http://b:2"]
    assert split_urls(["http://a:1"]) == ["http://a:1"]
    with pytest.raises(ValueError, match="at least one base URL"):
        split_urls(" , ")


@pytest.mark.postgres
def test_two_replicas_through_one_client(make_settings, pg_url):
    with router_at(make_settings(db_url=pg_url)) as (u1, _), router_at(make_settings(db_url=pg_url)) as (u2, _):
        # one session through both replicas: pinned to int4 by its first (tolerant) turn, so both caches hold it
        assert chat(u1, TOLERANT, session="s-shared").headers["x-quantroute-tier"] == "int4"
        assert chat(u2, SENSITIVE, session="s-shared").headers["x-quantroute-tier"] == "int4"
        client = RouterAdmin(f"{u1},{u2}", TOKEN)
        try:
            assert [p["session_key"] for p in client.sessions()] == ["s-shared"]
            served = counter_by_label(client.metrics_text(), "quantroute_requests_total", "tier")
            assert served == {"int4": 2.0}  # one request on each replica, summed
            assert client.policy()["replicas"] == {u1: 1, u2: 1}
            assert {n["key"] for n in client.nodes()} and all(n["healthy"] for n in client.nodes())

            assert client.unpin("s-shared") is True
            # replica 2 forgot its cached pin too: the sensitive turn now pins the session afresh at fp16
            assert chat(u2, SENSITIVE, session="s-shared").headers["x-quantroute-tier"] == "fp16"
            assert client.unpin("never-pinned") is False
        finally:
            client.close()

        engine = make_engine(pg_url)
        try:
            def shared_rows() -> int:
                with engine.connect() as c:
                    q = text("SELECT COUNT(*) FROM request_log WHERE session_key = 's-shared'")
                    return c.execute(q).scalar_one()

            # the writers flush in batches, off the request path
            wait_until(lambda: shared_rows() == 3, what="3 logged requests of session s-shared", timeout=10,
                       interval=0.1)
            assert shared_rows() == 3
            with engine.connect() as c:
                replay = c.execute(text("SELECT replay FROM request_log WHERE tier = 'fp16'")).scalar_one()
            # the replay keeps the body (default: redacted, nothing to mask here) and only the classifier's headers
            assert replay["body"]["messages"] == SENSITIVE and "x-session-id" not in replay["headers"]
        finally:
            engine.dispose()

        # replica 2 stops: reads and the unpin name it; the unpin still reached replica 1
        chat(u1, TOLERANT, session="s-second")
        dead = f"{u2.rsplit(':', 1)[0]}:1"
        client = RouterAdmin([u1, dead], TOKEN, timeout_s=1)
        try:
            with pytest.raises(RouterUnavailable, match=f"router at {dead} unreachable"):
                client.sessions()
            with pytest.raises(RouterUnavailable, match="did not reach every replica"):
                client.unpin("s-second")
            with RouterAdmin(u1, TOKEN) as one:
                assert "s-second" not in {p["session_key"] for p in one.sessions()}
        finally:
            client.close()


def test_nodes_merge_health_and_sum_in_flight_across_replicas():
    """Two replicas' views of the same node: healthy only if both say so, in-flight is the sum."""
    import httpx

    views = {"a": [{"key": "n1", "healthy": True, "inflight": 2, "waiting": 1},
                   {"key": "n2", "healthy": True, "inflight": 0, "waiting": 0}],
             "b": [{"key": "n1", "healthy": False, "inflight": 3, "waiting": 4}]}

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == "Bearer tok"
        return httpx.Response(200, json={"nodes": views[request.url.host]})

    client = RouterAdmin(["http://a", "http://b"], "tok", transport=httpx.MockTransport(handler))
    got = {n["key"]: n for n in client.nodes()}
    assert got["n1"] == {"key": "n1", "healthy": False, "inflight": 5, "waiting": 4}
    assert got["n2"]["healthy"] is True and got["n2"]["inflight"] == 0


def test_shadow_in_flight_counts_add_up_too():
    from quantroute.node import merge_node_views

    [n] = merge_node_views([[{"key": "n1", "healthy": True, "inflight": 1, "shadow_inflight": 2}],
                            [{"key": "n1", "healthy": True, "inflight": 0, "shadow_inflight": 1}]])
    assert (n["inflight"], n["shadow_inflight"], n["healthy"]) == (1, 3, True)
