"""Failures and restarts: a node killed under load, pins surviving a restart, the DB going away (pins strict:
stored or the request fails), hot reload."""

from __future__ import annotations

import threading
import time

import httpx
from sqlalchemy import text

from quantroute.db.engine import make_engine
from quantroute.fleet import parse_fleet
from quantroute.sim.runner import running_fleet
from tests.conftest import wait_until
from tests.router.conftest import (
    FLEET,
    SENSITIVE,
    TOLERANT,
    activate_pointer,
    admin,
    chat,
    router_at,
    write_fleet_file,
    write_policy,
)


def test_node_killed_under_load_no_client_error_for_non_streamed(tmp_path, make_settings):
    with running_fleet(parse_fleet(FLEET), time_scale=0.002) as rf:  # its own fleet: this test kills a node
        settings = make_settings(fleet_file=write_fleet_file(rf, tmp_path / "own-fleet.yaml"))
        with router_at(settings) as (url, app):
            stop = threading.Event()
            results: list[int] = []

            def worker(i: int) -> None:
                with httpx.Client(timeout=30) as c:
                    while not stop.is_set():
                        r = c.post(url + "/v1/chat/completions", headers={"x-session-id": f"kill-{i}"},
                                   json={"model": "llama3-8b", "messages": TOLERANT, "max_tokens": 8})
                        results.append(r.status_code)

            threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            while len(results) < 50:
                time.sleep(0.01)
            rf.kill("int4-a")
            n_at_kill = len(results)
            while len(results) < n_at_kill + 150:
                time.sleep(0.01)
            stop.set()
            for t in threads:
                t.join(30)
            assert set(results) == {200}, f"client saw {sorted(set(results))}"
            assert app.fleet.nodes["int4-a"].healthy is False  # ejected
            assert app.fleet.nodes["int4-a"].failures >= 2


def test_restart_keeps_pins(make_settings):
    settings = make_settings()
    with router_at(settings) as (url, _):
        assert chat(url, TOLERANT, session="s-restart").headers["x-quantroute-tier"] == "int4"
    with router_at(settings) as (url, _):  # a new process-equivalent: empty cache, same DB
        r = chat(url, SENSITIVE, session="s-restart")
        assert r.headers["x-quantroute-tier"] == "int4"


def test_request_log_rows_written(make_settings):
    settings = make_settings()
    with router_at(settings) as (url, app):
        chat(url, TOLERANT, session="s-log")
        chat(url, SENSITIVE)
        httpx.post(url + "/v1/chat/completions", json={"model": "nope", "messages": TOLERANT})
        wait_until(lambda: app.writer.written >= 3, what="3 requests logged", timeout=10)
    eng = make_engine(settings.db_url)
    with eng.connect() as c:
        rows = c.execute(text("select session_key, model, deployment, node, tier, policy_version, rules, status, "
                              "latency_ms, prompt_tokens, completion_tokens, retries "
                              "from request_log order by id")).all()
    eng.dispose()
    assert [(r.session_key, r.tier, r.status) for r in rows] == [("s-log", "int4", 200), (None, "fp16", 200),
                                                                 (None, None, 404)]
    assert rows[1].rules == '["precise-work"]' and rows[0].policy_version == 1
    assert rows[0].prompt_tokens > 0 and rows[0].completion_tokens > 0 and rows[0].latency_ms > 0


def test_db_down_keeps_unpinned_and_cached_sessions_but_fails_first_turns_it_cannot_pin(make_settings):
    with router_at(make_settings(log_batch_size=5, log_buffer_max=20, pin_commit_timeout_s=0.3)) as (url, app):
        assert chat(url, TOLERANT, session="s-before").headers["x-quantroute-tier"] == "int4"  # stored, cached
        dead = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=1")
        live, app.writer.engine, app.pin_committer.engine = app.pin_committer.engine, dead, dead
        statuses = [chat(url, TOLERANT).status_code for _ in range(30)]
        assert set(statuses) == {200}  # no session, no pin: the request log drops rows, requests go on
        r = chat(url, SENSITIVE, session="s-before")
        assert r.status_code == 200 and r.headers["x-quantroute-tier"] == "int4"  # its pin is in the cache
        r = chat(url, TOLERANT, session="s-new")  # a first turn whose pin cannot be stored: never answered
        assert r.status_code == 503 and r.headers["retry-after"]
        assert r.json()["error"]["code"] == "session_pin_unavailable"
        assert "s-new" not in app.pins.cache  # nothing half-pinned: the retry claims again
        wait_until(lambda: app.writer.dropped, what="a dropped request-log row", timeout=10)
        metrics = httpx.get(url + "/metrics").text
        assert "quantroute_request_log_dropped_total 0.0" not in metrics

        app.pin_committer.engine = live  # the DB is back: the client's retry gets its first turn and its pin
        assert chat(url, TOLERANT, session="s-new").headers["x-quantroute-tier"] == "int4"
    with router_at(make_settings()) as (url, _):  # a fresh process: the pin is in the DB
        assert chat(url, SENSITIVE, session="s-new").headers["x-quantroute-tier"] == "int4"


def test_a_pin_commit_that_fails_for_a_moment_is_retried_and_the_request_succeeds(make_settings, db_url):
    with router_at(make_settings(db_url=db_url, pin_commit_timeout_s=20)) as (url, app):
        live = app.pin_committer.engine
        app.pin_committer.engine = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=1")
        result: list[httpx.Response] = []
        t = threading.Thread(target=lambda: result.append(chat(url, TOLERANT, session="s-blip")))
        t.start()
        # it failed and was retried at least once
        wait_until(lambda: app.pin_committer.errors >= 2, what="a failed pin commit retried", timeout=10)
        assert not result  # the answer waits for its pin
        app.pin_committer.engine = live
        t.join(30)
        assert result[0].status_code == 200 and result[0].headers["x-quantroute-tier"] == "int4"
    with router_at(make_settings(db_url=db_url)) as (url, _):
        assert chat(url, SENSITIVE, session="s-blip").headers["x-quantroute-tier"] == "int4"


def test_invalid_policy_keeps_last_good_and_shows_the_error(make_settings, policies):
    with router_at(make_settings()) as (url, app):
        bad = policies / "policy-0002.yaml"
        bad.write_text("version: 2\nauthor: x\ncreated_at: '2026-01-01T00:00:00Z'\ntiers: []\nthresholds: []\n")
        activate_pointer(policies, 2)
        wait_until(lambda: app.holder.failures, what="the failed reload of version 2", timeout=10)
        view = admin(url).get("/admin/policy").json()
        assert view["version"] == 1 and view["last_error_version"] == 2 and "tiers" in view["last_error"]
        assert chat(url, TOLERANT).headers["x-quantroute-policy-version"] == "1"
        assert "quantroute_policy_reload_failures_total 1.0" in httpx.get(url + "/metrics").text
        write_policy(policies, 3)  # a good one after the bad one is picked up
        wait_until(lambda: app.holder.current.version == 3, what="version 3 active", timeout=10)


def test_fifty_activations_under_steady_load(make_settings, policies):
    for v in range(2, 52):
        write_policy(policies, v, activate=False)
    with router_at(make_settings(policy_poll_s=60)) as (url, app):
        stop = threading.Event()
        records: list[tuple[float, float, int, int]] = []  # (start, end, status, version)

        def worker() -> None:
            with httpx.Client(timeout=30) as c:
                while not stop.is_set():
                    t0 = time.monotonic()
                    r = c.post(url + "/v1/chat/completions", json={"model": "llama3-8b", "messages": TOLERANT,
                                                                   "max_tokens": 4})
                    records.append((t0, time.monotonic(), r.status_code,
                                    int(r.headers.get("x-quantroute-policy-version", -1))))

        threads = [threading.Thread(target=worker) for _ in range(6)]
        for t in threads:
            t.start()
        written: dict[int, float] = {1: 0.0}
        seen: dict[int, float] = {}
        for v in range(2, 52):
            written[v] = time.monotonic()
            activate_pointer(policies, v)
            wait_until(lambda v=v: app.holder.current.version == v, what=f"version {v} active", timeout=10,
                       interval=0.002)
            seen[v] = time.monotonic()
            time.sleep(0.02)
        stop.set()
        for t in threads:
            t.join(30)
    assert records and {s for _, _, s, _ in records} == {200}
    # The router switched to v somewhere in [written[v], seen[v]] and away from it by seen[v+1]:
    # each response's version must have been active at some instant of its request's lifetime.
    seen[52] = float("inf")
    for start, end, _, v in records:
        assert 1 <= v <= 51
        assert written[v] <= end and start <= seen[v + 1] if v >= 2 else start <= seen[2]
    versions = {v for *_, v in records}
    assert len(versions) > 10  # the load really spanned the activations
    print(f"\nreload under load: {len(records)} requests, 50 activations, 0 failed, {len(versions)} versions seen")
