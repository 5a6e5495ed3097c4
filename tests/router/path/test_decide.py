"""A pinned session keeps its deployment (artifact) when its tier has several; it moves to another deployment of
the same tier only when its own is gone (left the policy, or no healthy node), and that is counted."""

from __future__ import annotations

import httpx

from quantroute.fleet import parse_fleet
from quantroute.sim.runner import running_fleet
from tests.conftest import wait_until
from tests.router.conftest import (
    FLEET,
    FP16,
    INT4,
    INT4_V2,
    INT8,
    MODEL,
    TOLERANT,
    admin,
    chat,
    router_at,
    write_fleet_file,
    write_policy,
)

NODES = {INT4: ("int4-a", "int4-b"), INT4_V2: ("int4-v2",)}


def int4_tiers(*int4: str) -> list[dict]:
    return [{"name": "fp16", "deployments": {MODEL: [FP16]}}, {"name": "int8", "deployments": {MODEL: [INT8]}},
            {"name": "int4", "deployments": {MODEL: list(int4)}}]


def served(url: str, session: str) -> str | None:
    pins = admin(url).get("/admin/sessions").json()["sessions"]
    return next((p["served_deployment"] for p in pins if p["session_key"] == session), None)


def fallbacks(url: str, reason: str) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith("quantroute_pin_deployment_fallbacks_total{") and f'reason="{reason}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_pinned_session_stays_on_its_deployment_while_unpinned_traffic_spreads(router):
    url, _ = router
    unpinned = {chat(url, TOLERANT).headers["x-quantroute-deployment"] for _ in range(30)}
    assert unpinned == {INT4, INT4_V2}  # the tier really has two deployments to choose from
    first = chat(url, TOLERANT, session="s-artifact").headers["x-quantroute-deployment"]
    later = {chat(url, TOLERANT, session="s-artifact").headers["x-quantroute-deployment"] for _ in range(20)}
    assert later == {first}
    assert served(url, "s-artifact") == first
    assert fallbacks(url, "no_healthy_node") == fallbacks(url, "not_in_policy") == 0


def test_pinned_session_moves_once_when_its_deployment_leaves_the_policy(make_settings, policies):
    with router_at(make_settings()) as (url, app):
        first = chat(url, TOLERANT, session="s-policy").headers["x-quantroute-deployment"]
        other = INT4_V2 if first == INT4 else INT4
        write_policy(policies, 2, tiers=int4_tiers(other))
        wait_until(lambda: app.holder.current.version == 2, what="policy 2 to become active")
        r = chat(url, TOLERANT, session="s-policy")
        assert (r.headers["x-quantroute-tier"], r.headers["x-quantroute-deployment"]) == ("int4", other)
        assert fallbacks(url, "not_in_policy") == 1
        write_policy(policies, 3, tiers=int4_tiers(INT4, INT4_V2))  # the first deployment is back
        wait_until(lambda: app.holder.current.version == 3, what="policy 3 to become active")
        again = {chat(url, TOLERANT, session="s-policy").headers["x-quantroute-deployment"] for _ in range(10)}
        assert again == {other}  # no second switch: the pin now names the new deployment
        wait_until(lambda: served(url, "s-policy") == other, what="the pin row to record the new deployment")
        assert fallbacks(url, "not_in_policy") == 1


def test_pinned_session_falls_back_when_its_deployment_has_no_healthy_node(tmp_path, make_settings):
    with running_fleet(parse_fleet(FLEET), time_scale=0.002) as rf:  # its own fleet: this test kills nodes
        settings = make_settings(fleet_file=write_fleet_file(rf, tmp_path / "own-fleet.yaml"))
        with router_at(settings) as (url, app):
            first = chat(url, TOLERANT, session="s-dead").headers["x-quantroute-deployment"]
            other = INT4_V2 if first == INT4 else INT4
            for node_id in NODES[first]:
                rf.kill(node_id)  # returns once the node refuses connections
            r = chat(url, TOLERANT, session="s-dead")
            assert r.status_code == 200, r.text
            assert (r.headers["x-quantroute-tier"], r.headers["x-quantroute-deployment"]) == ("int4", other)
            assert fallbacks(url, "no_healthy_node") == 1
            later = {chat(url, TOLERANT, session="s-dead").headers["x-quantroute-deployment"] for _ in range(5)}
            assert later == {other} and fallbacks(url, "no_healthy_node") == 1
            wait_until(lambda: served(url, "s-dead") == other, what="the pin row to record the new deployment")
