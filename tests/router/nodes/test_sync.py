"""Replicas: a router picks up nodes that another replica registered after it started (two apps, one DB:
SQLite, and PostgreSQL where configured)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import wait_until
from tests.router.conftest import INT8, MODEL, TOLERANT, admin, chat, router_at, write_policy


def fleet_without(rf, path: Path, node_id: str) -> Path:
    data = rf.fleet.model_dump(mode="json")
    data["nodes"] = [n for n in data["nodes"] if n["id"] != node_id]
    path.write_text(yaml.safe_dump(data))
    return path


def register_on(url: str, rf, node_id: str, deployment: str, tier: str, fmt: str) -> None:
    r = admin(url).post("/admin/nodes", json={"url": rf.urls[node_id], "model": MODEL, "deployment": deployment,
                                              "tier": tier, "format": fmt, "node_id": node_id})
    assert r.status_code == 201, r.text


def test_replica_picks_up_a_node_registered_elsewhere_by_periodic_refresh(tmp_path, make_settings, sim, db_url):
    partial = fleet_without(sim, tmp_path / "partial.yaml", "int8-a")
    with router_at(make_settings(fleet_file=partial, node_refresh_s=0.1, db_url=db_url)) as (url_a, app_a), \
            router_at(make_settings(fleet_file=partial, db_url=db_url)) as (url_b, _):
        assert "int8-a" not in app_a.fleet.nodes
        int4 = app_a.fleet.nodes["int4-a"]
        register_on(url_b, sim, "int8-a", INT8, "int8", "int8")
        wait_until(lambda: "int8-a" in app_a.fleet.nodes, what="replica A to see the node B registered", timeout=10)
        assert app_a.fleet.nodes["int4-a"] is int4  # unchanged nodes are not re-registered (state kept)
        r = chat(url_a, TOLERANT, model=INT8)
        assert r.status_code == 200 and r.headers["x-quantroute-node"] == "int8-a"


def test_replica_refreshes_nodes_when_a_request_finds_none(tmp_path, make_settings, policies, sim, db_url):
    write_policy(policies, 1, sessions={"affinity": True, "ttl_s": 600, "max_wait_ms": 10_000, "quiescence_s": 60})
    partial = fleet_without(sim, tmp_path / "partial.yaml", "int8-a")
    with router_at(make_settings(fleet_file=partial, node_refresh_s=3600, db_url=db_url)) as (url_a, app_a), \
            router_at(make_settings(fleet_file=partial, db_url=db_url)) as (url_b, _):
        register_on(url_b, sim, "int8-a", INT8, "int8", "int8")
        assert "int8-a" not in app_a.fleet.nodes and app_a.node_sync.refreshes == 0
        r = chat(url_a, TOLERANT, session="s-miss", model=INT8)  # the deployment id: no escalation possible
        assert r.status_code == 200, r.text
        assert r.headers["x-quantroute-node"] == "int8-a" and app_a.node_sync.refreshes >= 1
