"""Node lifecycle under load: in-flight accounting belongs to the node's identity, so re-registrations (identical
or a new generation) while requests run leave the count exact; removal and drain through the admin API."""

from __future__ import annotations

import threading

import httpx

from tests.conftest import wait_until
from tests.faults.conftest import post, register
from tests.faults.rawnode import raw_node
from tests.router.conftest import TOLERANT, router_at


def register_as(url: str, node_url: str, checksum: str) -> None:
    from tests.router.conftest import INT4, MODEL, admin

    r = admin(url).post("/admin/nodes", json={"url": node_url, "model": MODEL, "deployment": INT4, "tier": "int4",
                                              "format": "int4", "method": "awq", "checksum": checksum,
                                              "node_id": "raw-a"})
    assert r.status_code == 201, r.text


def test_inflight_is_exact_across_reregistrations_under_load(make_settings):
    with raw_node("slow", delay_s=0.4) as node, router_at(make_settings(fleet_file=None)) as (url, app):
        register(url, node.url)
        statuses: list[int] = []

        def client() -> None:
            for _ in range(3):
                statuses.append(post(url).status_code)

        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        wait_until(lambda: app.fleet.nodes["raw-a"].inflight > 0, what="requests in flight")
        register_as(url, node.url, "")  # identical
        register_as(url, node.url, "sha256:new")  # a new generation
        register_as(url, node.url, "sha256:new")
        for t in threads:
            t.join(30)
        assert statuses == [200] * 12
        # released just after the response went out: wait for it, but a leak never gets there
        wait_until(lambda: app.fleet.nodes["raw-a"].inflight == 0, what="in-flight back to 0", timeout=5)
        assert app.fleet.nodes["raw-a"].generation == 2
        assert 'quantroute_node_inflight{node="raw-a"} 0.0' in httpx.get(url + "/metrics").text


def test_drain_lets_inflight_finish_then_removes_audited(make_settings):
    from click.testing import CliRunner
    from sqlmodel import select

    from quantroute.cli.main import cli as main
    from quantroute.db.audit import AuditEvent
    from quantroute.db.engine import make_engine, session
    from tests.router.conftest import TOKEN, admin

    settings = make_settings(fleet_file=None)
    with raw_node("slow", delay_s=1.0) as node, router_at(settings) as (url, app):
        register(url, node.url)
        statuses: list[int] = []
        threads = [threading.Thread(target=lambda: statuses.append(post(url).status_code)) for _ in range(3)]
        for t in threads:
            t.start()
        wait_until(lambda: app.fleet.nodes["raw-a"].inflight == 3, what="three requests in flight")
        result: list = []
        drain = threading.Thread(target=lambda: result.append(CliRunner().invoke(
            main, ["node", "drain", "--router", url, "raw-a", "--token", TOKEN, "--by", "olga", "--wait", "30"])))
        drain.start()
        wait_until(lambda: result or app.fleet.nodes["raw-a"].draining, what="draining")
        assert not result, result[0].output
        late = post(url)  # no new request goes to a draining node (it was the only one)
        drain.join(30)
        for t in threads:
            t.join(30)
        assert result[0].exit_code == 0, result[0].output
        assert statuses == [200, 200, 200] and late.status_code == 503
        assert node.posts == 3
        assert "raw-a" not in app.fleet.nodes and admin(url).get("/admin/nodes/raw-a").status_code == 404
        metrics = httpx.get(url + "/metrics").text
        assert 'node="raw-a"' not in metrics
    eng = make_engine(settings.db_url)
    with session(eng) as s:
        events = [(e.action, e.actor) for e in s.exec(select(AuditEvent).where(AuditEvent.subject == "raw-a"))]
    eng.dispose()
    assert ("node.drain", "admin-api:olga") in events and ("node.deregister", "admin-api:olga") in events


def test_deregister_with_a_drain_timeout_leaves_it_draining(make_settings):
    from click.testing import CliRunner

    from quantroute.cli.main import cli as main
    from tests.router.conftest import TOKEN

    with raw_node("silent") as node, router_at(make_settings(fleet_file=None)) as (url, app):
        register(url, node.url)
        def stuck() -> None:  # the node never answers; the client gives up
            try:
                httpx.post(url + "/v1/chat/completions", timeout=5, json={"model": "llama3-8b", "messages": TOLERANT})
            except httpx.HTTPError:
                pass

        t = threading.Thread(target=stuck)
        t.start()
        wait_until(lambda: app.fleet.nodes["raw-a"].inflight == 1, what="a request in flight")
        r = CliRunner().invoke(main, ["node", "drain", "--router", url, "raw-a", "--token", TOKEN, "--wait", "0.3"])
        assert r.exit_code == 1 and "still has requests in flight" in r.output
        assert app.fleet.nodes["raw-a"].draining
        r = CliRunner().invoke(main, ["node", "deregister", "--router", url, "raw-a", "--token", TOKEN])
        assert r.exit_code == 0, r.output
        assert "raw-a" not in app.fleet.nodes
        t.join(10)


def test_removed_node_does_not_come_back_on_other_replicas(make_settings, db_url):
    """Replica B knows int4-a from its fleet file; A removes it. B drops it, and a restarted B does not bring it back
    from the file; a node registered through A and removed there does not come back from the DB either."""
    from tests.router.conftest import admin

    settings = make_settings(db_url=db_url, node_refresh_s=0.2)
    with raw_node("slow") as node, router_at(settings) as (a_url, a), router_at(settings) as (b_url, b):
        register(a_url, node.url)
        wait_until(lambda: "raw-a" in b.fleet.nodes, what="B to pick up raw-a from the DB")
        assert "int4-a" in b.fleet.nodes
        assert admin(a_url).delete("/admin/nodes/int4-a").status_code == 200
        assert admin(a_url).delete("/admin/nodes/raw-a").status_code == 200
        wait_until(lambda: "int4-a" not in b.fleet.nodes and "raw-a" not in b.fleet.nodes, what="B to drop both")
    with router_at(settings) as (url, c):
        assert "int4-a" not in c.fleet.nodes and "raw-a" not in c.fleet.nodes
        assert "int4-b" in c.fleet.nodes
        assert admin(url).get("/admin/nodes/int4-a").status_code == 404
