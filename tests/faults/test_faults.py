"""Fault injection against real servers under load (simulated vLLM nodes, a real router, a real DB). After each
fault: no request lost, in-flight back to 0 on every node, and the request log holds a row per request sent."""

from __future__ import annotations

import time

import pytest
import yaml

from quantroute.db.engine import make_engine
from tests.conftest import wait_until
from tests.faults.load import Load, logged
from tests.router.conftest import activate_pointer, policy_data, router_at, set_faults, write_policy


def settle(app, db_url: str, load: Load) -> None:
    wait_until(lambda: all(n.inflight == 0 for n in app.fleet.nodes.values()), what="in-flight back to 0")
    rows: list[int] = []
    wait_until(lambda: not app.writer.buffer and rows.append(logged(db_url, load.prefix)) is None
               and rows[-1] == load.sent,
               what=lambda: f"{load.sent} rows logged (have {rows[-1:]}, buffer {len(app.writer.buffer)}, "
               f"written {app.writer.written}, dropped {app.writer.dropped_by_reason}, "
               f"errors {app.writer.write_errors})", timeout=30)


def write_version(policies, v: int) -> None:
    if v % 4:
        write_policy(policies, v, activate=False)
        return
    data = policy_data(v)
    data["rules"][0]["when"] = {"keywords": {"regex": ["(?i)code", "python"]}}
    (policies / f"policy-{v:04d}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def test_hundred_activations_under_load_some_invalid(make_settings, policies):
    """Every fourth version cannot load (its regexes only fail joined; written by hand, past validation). Each
    file is written just before its activation and removed after (a stored version loads from the DB; the
    router imports the directory's new files on a pointer change, so a full directory would be re-read 100
    times)."""
    settings = make_settings(policy_poll_s=60)
    with router_at(settings) as (url, app), Load(url, prefix="act") as load:
        for v in range(2, 102):
            write_version(policies, v)
            failures = app.holder.failures
            activate_pointer(policies, v)
            if v % 4 == 0:
                wait_until(lambda f=failures: app.holder.failures > f, what=f"version {v} refused", timeout=30)
            else:
                wait_until(lambda v=v: app.holder.current.version == v, what=f"version {v} active", timeout=30)
            (policies / f"policy-{v:04d}.yaml").unlink()
    assert app.holder.failures == 25 and app.holder.current.version == 101
    assert set(load.statuses) == {200}, load.statuses
    settle(app, settings.db_url, load)


@pytest.mark.parametrize("db", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_db_unavailable_and_back(make_settings, db, request):
    db_url = request.getfixturevalue("pg_url") if db == "postgres" else None
    settings = make_settings(**({"db_url": db_url} if db_url else {}))
    with router_at(settings) as (url, app):
        real = app.writer.engine
        dead = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=1")
        with Load(url, prefix="dbdown", max_requests=60) as load:
            app.writer.engine = app.pins.engine = dead
            wait_until(lambda: load.sent >= 40 and app.writer.write_errors > 0,
                       what="requests while the DB is down", timeout=60)
            app.writer.engine = app.pins.engine = real
        assert set(load.statuses) == {200}, load.statuses
        settle(app, settings.db_url, load)
        assert app.writer.dropped == 0
        dead.dispose()


def test_flapping_node_costs_no_request(make_settings, sim):
    settings = make_settings()
    with router_at(settings) as (url, app), Load(url, prefix="flap", max_requests=300) as load:
        try:
            for i in range(10):
                set_faults(sim, "int4-a", error_rate=1.0 if i % 2 == 0 else 0.0)
                time.sleep(0.2)
        finally:
            set_faults(sim, "int4-a", error_rate=0.0)
    assert set(load.statuses) == {200}, load.statuses
    settle(app, settings.db_url, load)
