"""Session-to-node affinity: a pinned session's turn goes to the node that served its last turn (its KV prefix is
cached there) while that node is healthy, has room and is below the load threshold; otherwise to the least-loaded
node of the tier, and the fallback and its reason are in the request log and the metrics. Across replicas sharing
PostgreSQL the last node travels with the pin."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import httpx
import pytest
from sqlmodel import Session, col, select

from quantroute.db.engine import make_engine
from quantroute.db.request_log import RequestLog
from quantroute.fleet import parse_fleet
from quantroute.router.path.select import BUSY, FAILED, GONE, UNHEALTHY, sticky_node, utilization
from quantroute.sim.runner import running_fleet
from tests.router.conftest import FP16, INT4, MODEL, TOLERANT, admin, chat, router_at

FLEET = f"""
model_shape: llama3-8b
nodes:
  - {{id: fp16-a, port: 0, hardware: a100-80g, max_num_seqs: 16, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {FP16}, tier: fp16, format: bf16}}}}
""" + "".join(f"""  - {{id: int4-{x}, port: 0, hardware: a100-80g, max_num_seqs: 16, max_model_len: 4096,
      deployment: {{model: {MODEL}, id: {INT4}, tier: int4, format: int4, method: awq}}}}
""" for x in "abc")


@pytest.fixture(scope="module")
def sim():  # overrides the package's fleet: three nodes of one int4 deployment, so a session can change node
    with running_fleet(parse_fleet(FLEET, source="tests/router/path/test_decide_affinity.py"), time_scale=0.002) as rf:
        yield rf


@dataclass
class View:
    key: str
    inflight: int = 0
    waiting: int = 0
    kv_usage: float = 0.0
    speed: float = 1.0
    max_inflight: int = 10
    max_waiting: int = 2
    healthy: bool = True

    @property
    def available(self) -> bool:
        return self.healthy


def test_sticky_node_keeps_the_last_node_until_it_is_gone_unhealthy_or_busy():
    a, b = View("a"), View("b")
    assert sticky_node([a, b], "a", max_load=0.8) == (a, None)
    assert sticky_node([a, b], "zz", max_load=0.8) == (None, GONE)
    assert sticky_node([a, b], "a", max_load=0.8, exclude={"a"}) == (None, FAILED)
    assert sticky_node([View("a", healthy=False), b], "a", max_load=0.8) == (None, UNHEALTHY)
    assert sticky_node([View("a", inflight=8), b], "a", max_load=0.8) == (None, BUSY)  # 8 of 10 slots
    assert sticky_node([View("a", inflight=7), b], "a", max_load=0.8)[1] is None
    assert sticky_node([View("a", kv_usage=0.85), b], "a", max_load=0.8) == (None, BUSY)
    assert sticky_node([View("a", waiting=2), b], "a", max_load=0.8) == (None, BUSY)  # full: queueing inside
    assert utilization(View("a", inflight=3, kv_usage=0.5)) == 0.5


def node_of(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    return r.headers["x-quantroute-node"]


def metric(url: str, name: str, **labels) -> float:
    total = 0.0
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def logged(db_url: str, session: str, n: int) -> list[tuple[str | None, str | None]]:
    """(node, affinity) of the session's request-log rows, oldest first, once `n` are written."""
    engine = make_engine(db_url)
    deadline = time.monotonic() + 10
    try:
        while True:
            with Session(engine) as s:
                rows = list(s.exec(select(RequestLog).where(col(RequestLog.session_key) == session)
                                   .order_by(col(RequestLog.id))))
            if len(rows) >= n or time.monotonic() > deadline:
                return [(r.node, r.affinity) for r in rows]
            time.sleep(0.05)
    finally:
        engine.dispose()


def test_pinned_turns_stay_on_their_node_and_the_log_says_so(make_settings):
    settings = make_settings(node_affinity=True)
    with router_at(settings) as (url, _):
        for s in range(6):
            assert len({node_of(chat(url, TOLERANT, session=f"stay-{s}")) for _ in range(5)}) == 1
        assert metric(url, "quantroute_node_affinity_total", outcome="kept") == 6 * 4
        assert metric(url, "quantroute_node_affinity_total", outcome="fallback_busy") == 0
        rows = logged(settings.db_url, "stay-0", 5)
        assert [a for _, a in rows] == [None, "kept", "kept", "kept", "kept"]  # a first turn has no last node
        pin = next(p for p in admin(url).get("/admin/sessions").json()["sessions"] if p["session_key"] == "stay-0")
        assert pin["last_node"] == rows[0][0]


def test_without_affinity_a_sessions_turns_spread_over_the_tier(make_settings):
    settings = make_settings()  # node_affinity defaults to off
    with router_at(settings) as (url, _):
        spread = [len({node_of(chat(url, TOLERANT, session=f"free-{s}")) for _ in range(5)}) for s in range(10)]
        assert max(spread) > 1  # each turn picks afresh among three idle nodes
        assert metric(url, "quantroute_node_affinity_total") == 0
        assert {a for _, a in logged(settings.db_url, "free-0", 5)} == {None}


def test_a_busy_or_unhealthy_last_node_gives_way_and_the_fallback_is_recorded(make_settings):
    settings = make_settings(node_affinity=True, node_affinity_max_load=0.5, node_max_inflight=2)
    with router_at(settings) as (url, app):
        first = node_of(chat(url, TOLERANT, session="fb"))
        app.fleet.nodes[first].inflight += 1  # one of two slots taken: utilization 0.5 reaches the threshold
        try:
            second = node_of(chat(url, TOLERANT, session="fb"))
        finally:
            app.fleet.nodes[first].inflight -= 1
        assert second != first
        assert node_of(chat(url, TOLERANT, session="fb")) == second  # the session's node is now the new one
        app.fleet.nodes[second].draining = True  # takes no new request: not available
        try:
            fourth = node_of(chat(url, TOLERANT, session="fb"))
        finally:
            app.fleet.nodes[second].draining = False
        assert fourth != second
        assert metric(url, "quantroute_node_affinity_total", outcome="fallback_busy") == 1
        assert metric(url, "quantroute_node_affinity_total", outcome="fallback_unhealthy") == 1
        assert logged(settings.db_url, "fb", 4) == [(first, None), (second, "fallback_busy"), (second, "kept"),
                                                     (fourth, "fallback_unhealthy")]


@pytest.mark.postgres
def test_affinity_holds_when_turns_alternate_between_two_replicas_on_postgres(make_settings, pg_url):
    # probes that tolerate a loaded machine: a node ejected by one replica only would be a (correct) fallback there
    robust = dict(db_url=pg_url, node_affinity=True, probe_timeout_s=5.0, eject_after_failures=20)
    s1, s2 = make_settings(**robust), make_settings(**robust)
    with router_at(s1) as (u1, _), router_at(s2) as (u2, _):
        run = uuid.uuid4().hex[:6]
        for n in range(16):
            # turn 2 is replica 2's first sight of the session: it routes it as a first turn, its pin claim
            # returns replica 1's pin with the last node, and the request follows it there
            nodes = [node_of(chat(u, TOLERANT, session=f"rep-{run}-{n}")) for u in (u1, u2, u1, u2, u2)]
            assert len(set(nodes)) == 1, (n, nodes)
        # with three nodes, replica 2's own pick for 16 sessions matched the pin's node every time with
        # probability (1/3)^16: the re-route happened
        assert metric(u2, "quantroute_node_affinity_moves_total") > 0
        assert metric(u2, "quantroute_pin_conflicts_total") == 0  # same tier, arm and deployment: no conflict
