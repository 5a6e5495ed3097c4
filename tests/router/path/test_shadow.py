"""Shadow comparison in the router: never on the client's path, counted apart from user traffic, and
on the simulator its agreement figures are the quality model's."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import yaml
from sqlalchemy import func, select

from quantroute.clock import utcnow
from quantroute.db.engine import make_engine, table_of
from quantroute.db.request_log import RequestLog
from quantroute.db.request_stats import RequestStatsMinute
from quantroute.db.shadow_pair import ShadowPair
from quantroute.rollout.facts import arm_window
from quantroute.router.testing import serve_app
from quantroute.shadow.analysis import wilson
from quantroute.sim.quality import load_quality
from quantroute.tiers import Tier
from tests.router.conftest import FP16, INT4, INT4_V2, MODEL, admin, chat, router_at, write_policy
from tests.router.path.shadow_support import HangingNode
from tests.support.waiting import wait_until

GREEDY_CODE = [{"role": "user", "content": "Write python code for the report"}]


def metric(url: str, name: str, **labels) -> float:
    """Sum of a metric's samples whose labels include `labels`."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, value = line.rsplit(" ", 1)
            if all(f'{k}="{v}"' in head for k, v in labels.items()):
                total += float(value)
    return total


def count(engine, table) -> int:
    with engine.connect() as c:
        return int(c.execute(select(func.count()).select_from(table_of(table))).scalar_one())


def shadow_policy(policies: Path, version: int = 1, **shadow) -> None:
    spec = {"rate": 1.0, "max_concurrent": 16, "max_target_load": 1000, "timeout_s": 30,
            "pairs": [{"served": ["int8", "int4"], "shadow": "fp16"}, {"served": ["fp16"], "shadow": "int4"}]}
    write_policy(policies, version, shadow={**spec, **shadow})


@pytest.fixture
def hanging(sim, tmp_path):
    """The sim's fp16 node and a hanging int4 node, as the router's fleet file."""
    node = HangingNode(INT4)
    with serve_app(node.app) as url:
        fleet = sim.fleet.model_dump(mode="json")
        fp16 = next(n for n in fleet["nodes"] if n["id"] == "fp16-a")
        hang = {**fp16, "id": "int4-hang", "port": int(url.rsplit(":", 1)[1]),
                "deployment": {**fp16["deployment"], "id": INT4, "tier": "int4", "format": "int4"}}
        path = tmp_path / "hang-fleet.yaml"
        path.write_text(yaml.safe_dump({**fleet, "nodes": [fp16, hang]}))
        try:
            yield node, path
        finally:
            node.released.set()


def test_a_hanging_shadow_never_delays_or_alters_the_client(make_settings, policies, hanging, sim):
    node, fleet_file = hanging
    shadow_policy(policies, max_concurrent=3)
    settings = make_settings(fleet_file=fleet_file)
    with router_at(settings) as (url, _):
        direct = httpx.post(sim.urls["fp16-a"] + "/v1/chat/completions", timeout=30,
                            json={"model": MODEL, "messages": GREEDY_CODE, "max_tokens": 8, "temperature": 0})
        for i in range(5):
            r = chat(url, GREEDY_CODE, temperature=0, stream=i % 2 == 1)
            # the client's request completed while every earlier shadow is still held by the node that hangs
            assert node.held >= min(i, 3) and not node.released.is_set()
            assert r.status_code == 200 and r.headers["x-quantroute-tier"] == "fp16"
            if i == 0:  # the client's answer is the fp16 node's own (the non-shadow path's), unchanged
                assert r.json()["choices"][0]["message"]["content"] == direct.json()["choices"][0]["message"]["content"]
            if i < 3:
                wait_until(lambda i=i: node.held == i + 1, what=f"shadow {i + 1} to reach the hanging node")
        assert node.arrived == 3  # max_concurrent: the other two sampled requests were not shadowed
        assert metric(url, "quantroute_shadow_skipped_total", reason="busy") == 2
        assert metric(url, "quantroute_shadow_inflight") == 3
        nodes = {n["key"]: n for n in admin(url).get("/admin/nodes").json()["nodes"]}
        assert nodes["int4-hang"]["shadow_inflight"] == 3 and nodes["int4-hang"]["inflight"] == 0
        node.released.set()
        engine = make_engine(settings.db_url)
        wait_until(lambda: count(engine, ShadowPair) == 3, timeout=30, what="three shadow pairs stored")
        with engine.connect() as c:
            rows = c.execute(select(table_of(ShadowPair))).mappings().all()
        assert {(r["served_tier"], r["shadow_tier"], r["shadow_deployment"]) for r in rows} == {("fp16", "int4", INT4)}
        assert all(r["compared"] and not r["agree"] and not r["exact"] and r["shadow_status"] == 200 for r in rows)
        assert all(r["rules"] == ["precise-work"] and r["policy_version"] == 1 for r in rows)
        assert all(r["bodies"]["shadow"] == "a late, different answer" for r in rows)  # redacted storage keeps text
        assert metric(url, "quantroute_shadow_inflight") == 0
        assert count(engine, RequestLog) == 5  # the user requests only


def test_a_shadow_that_hangs_past_its_timeout_is_abandoned_and_recorded(make_settings, policies, hanging):
    node, fleet_file = hanging
    shadow_policy(policies, timeout_s=0.3)
    settings = make_settings(fleet_file=fleet_file, prompt_storage="none")
    with router_at(settings) as (url, _):
        assert chat(url, GREEDY_CODE, temperature=0).status_code == 200
        engine = make_engine(settings.db_url)
        wait_until(lambda: count(engine, ShadowPair) == 1, timeout=30, what="the timed-out pair")
        with engine.connect() as c:
            row = c.execute(select(table_of(ShadowPair))).mappings().one()
        assert row["shadow_status"] == 0 and not row["compared"] and row["agree"] is None
        assert "no complete answer within 0.3s" in row["shadow_error"] and row["bodies"] is None
        wait_until(lambda: node.abandoned == 1, what="the node to see the shadow's connection closed")
        assert metric(url, "quantroute_shadow_requests_total", outcome="timeout") == 1


def test_ineligible_requests_are_never_shadowed(make_settings, policies, hanging):
    node, fleet_file = hanging
    shadow_policy(policies, streams=False, max_output_tokens=64)
    with router_at(make_settings(fleet_file=fleet_file)) as (url, _):
        assert chat(url, GREEDY_CODE, temperature=0.7).status_code == 200  # sampled, not greedy
        assert chat(url, GREEDY_CODE).status_code == 200  # no temperature: the API's default 1.0
        assert chat(url, GREEDY_CODE, temperature=0, stream=True).status_code == 200  # streams are off
        assert chat(url, GREEDY_CODE, temperature=0, max_tokens=65).status_code == 200  # too long an answer
        assert chat(url, GREEDY_CODE, temperature=0, model=FP16).status_code == 200  # named its deployment
        assert chat(url, GREEDY_CODE, temperature=0).status_code == 200  # eligible
        wait_until(lambda: node.arrived == 1, what="one shadow")
        time.sleep(0.3)
        assert node.arrived == 1


def test_shadow_traffic_is_counted_apart_from_user_traffic(make_settings, policies, sim):
    canary = {"model": MODEL, "baseline": INT4, "candidate": INT4_V2, "steps": [50, 100], "percent": 50}
    write_policy(policies, 1, canaries=[canary], shadow={
        "rate": 1.0, "max_concurrent": 16, "max_target_load": 1000,
        "pairs": [{"served": ["int8", "int4"], "shadow": "fp16"}, {"served": ["fp16"], "shadow": "int4"}]})
    settings = make_settings()
    start = utcnow()
    with router_at(settings) as (url, _):
        tiers = []
        for i in range(24):
            messages = GREEDY_CODE if i % 3 == 0 else [{"role": "user", "content": f"hi, tell me a joke {i}"}]
            r = chat(url, messages, session=f"s{i}", temperature=0)
            assert r.status_code == 200
            tiers.append((r.headers["x-quantroute-tier"], r.headers.get("x-quantroute-arm")))
        engine = make_engine(settings.db_url)
        wait_until(lambda: count(engine, ShadowPair) == 24, timeout=30, what="24 shadow pairs")
        wait_until(lambda: count(engine, RequestLog) >= 24, timeout=30, what="the request log")
        time.sleep(0.3)  # a late shadow row would show below
        assert count(engine, RequestLog) == 24
        with engine.connect() as c:
            rolled = c.execute(select(func.sum(RequestStatsMinute.requests))).scalar_one()
            by_tier = dict(c.execute(select(RequestLog.tier, func.count()).group_by(RequestLog.tier)).all())
        assert rolled == 24  # the per-minute rollup counts the clients' requests only
        assert by_tier == {t: sum(1 for x, _ in tiers if x == t) for t in {x for x, _ in tiers}}
        assert metric(url, "quantroute_requests_total") == 24
        assert metric(url, "quantroute_shadow_requests_total") == 24
        for arm, dep in (("baseline", INT4), ("candidate", INT4_V2)):
            stats = arm_window(engine, model=MODEL, deployment=dep, arm=arm, start=start, end=utcnow())
            assert stats.requests == sum(1 for t, a in tiers if t == "int4" and a == arm)
        nodes = admin(url).get("/admin/nodes").json()["nodes"]
        assert all(n["inflight"] == 0 and n["shadow_inflight"] == 0 for n in nodes)


def test_agreement_on_the_simulator_matches_the_quality_model(make_settings, policies, sim):
    shadow_policy(policies, max_concurrent=64)
    settings = make_settings()
    table = load_quality()
    cases = {  # (served tier, shadow tier, task): prompts
        ("fp16", "int4", "code"): [f"Write python code for report number {i}" for i in range(100)],
        ("int4", "fp16", "chat"): [f"hi, tell me a joke about the number {i}" for i in range(100)],
        ("int4", "fp16", "json"): [f"hey, reply in JSON with ideas for party {i}" for i in range(60)]}
    with router_at(settings) as (url, _):
        def ask(served: str, prompt: str) -> None:
            r = chat(url, [{"role": "user", "content": prompt}], temperature=0, max_tokens=400)
            assert r.status_code == 200 and r.headers["x-quantroute-tier"] == served, (prompt, r.headers)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda sp: ask(*sp), [(s, p) for (s, _, _), ps in cases.items() for p in ps]))
        engine = make_engine(settings.db_url)
        total = sum(len(p) for p in cases.values())
        wait_until(lambda: count(engine, ShadowPair) == total, timeout=60, what=f"{total} shadow pairs")
        with engine.connect() as c:
            rows = c.execute(select(table_of(ShadowPair))).mappings().all()
    assert all(r["compared"] for r in rows)
    for (served, shadow, task), prompts in cases.items():
        mine = [r for r in rows if r["served_tier"] == served and r["bodies"]["request"]["body"]["messages"][0]
                ["content"] in set(prompts)]
        assert len(mine) == len(prompts) and all(r["shadow_tier"] == shadow for r in mine)
        agree = sum(1 for r in mine if r["agree"])
        expected = table.p_agree(Tier.int4, task)
        lo, hi = wilson(agree, len(mine), level=0.99)  # 99 %: three comparisons in one test
        assert lo <= expected <= hi, f"{served} vs {shadow} on {task}: {agree}/{len(mine)}, model {expected}"
        assert sum(1 for r in mine if r["exact"]) == agree  # a drifted answer differs in its result too
        if task == "json":
            assert all(r["json_like"] for r in mine) and all(r["json_equal"] == r["agree"] for r in mine)


def test_canary_pairs_send_each_arm_to_the_other_arms_deployment(make_settings, policies, sim):
    canary = {"model": MODEL, "baseline": INT4, "candidate": INT4_V2, "steps": [50, 100], "percent": 50}
    write_policy(policies, 1, canaries=[canary], shadow={"rate": 1.0, "max_concurrent": 16, "max_target_load": 1000,
                                                        "pairs": [{"canary": True}]})
    settings = make_settings()
    with router_at(settings) as (url, _):
        arms = set()
        for i in range(16):
            r = chat(url, [{"role": "user", "content": f"hi, tell me a joke {i}"}], session=f"c{i}", temperature=0)
            assert r.status_code == 200 and r.headers["x-quantroute-tier"] == "int4"
            arms.add(r.headers["x-quantroute-arm"])
        assert arms == {"baseline", "candidate"}
        engine = make_engine(settings.db_url)
        wait_until(lambda: count(engine, ShadowPair) == 16, timeout=30, what="16 canary pairs")
        with engine.connect() as c:
            rows = c.execute(select(table_of(ShadowPair))).mappings().all()
    other = {INT4: INT4_V2, INT4_V2: INT4}
    assert all(r["kind"] == "canary" and r["shadow_deployment"] == other[r["served_deployment"]] for r in rows)
    assert {(r["arm"], r["served_deployment"]) for r in rows} == {("baseline", INT4), ("candidate", INT4_V2)}
