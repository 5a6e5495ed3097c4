"""The demo stack with two router replicas on PostgreSQL (a fresh schema on the test server): both replicas
serve traffic into the one database, a policy activation reaches both, and the admin client sees one fleet.
(The single-router SQLite stack is exercised end to end by tests/dashboard/test_browser.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from quantroute.admin_client import RouterAdmin, counter_by_label
from quantroute.db.engine import make_engine
from quantroute.demo import simulated as demo
from quantroute.policy.store import PolicyStore
from tests.conftest import REPO, wait_until


@pytest.mark.postgres
@pytest.mark.slow
def test_two_replicas_share_one_postgres_schema(tmp_path, pg_url):
    with demo.demo_stack(tmp_path / "rt", dashboard=False, time_scale=0.05, concurrency=1, db_url=pg_url,
                         replicas=2) as stack:
        assert len(stack.router_urls) == 2
        assert {"router-1", "router-2", "traffic-1", "traffic-2"} <= set(stack.procs)
        # secrets: the logins file is the owner's alone, and no process shows the admin token in its argv
        assert (stack.dir / "logins.json").stat().st_mode & 0o777 == 0o600
        for p in stack.procs.values():
            assert stack.admin_token.encode() not in Path(f"/proc/{p.pid}/cmdline").read_bytes()
        admin = RouterAdmin(stack.router_urls, stack.admin_token)
        engine = make_engine(pg_url)
        try:
            wait_until(lambda: all(n["healthy"] for n in admin.nodes()),
                       what="every node healthy on both replicas", timeout=30, interval=0.3)

            def served_by_each() -> list[float] | None:  # each replica has its own traffic generator
                per = []
                for u in stack.router_urls:
                    with RouterAdmin(u, stack.admin_token) as one:
                        per.append(sum(counter_by_label(one.metrics_text(), "quantroute_requests_total",
                                                        "tier").values()))
                return per if all(per) else None

            wait_until(served_by_each, what="requests through both replicas", timeout=30, interval=0.3)

            def logged() -> bool:
                with engine.connect() as c:
                    return c.execute(text("SELECT COUNT(*) FROM request_log")).scalar_one() > 10

            wait_until(logged, what="both replicas' request logs in the shared schema", timeout=30, interval=0.3)
            # a reviewed version, activated once, in the shared database
            store = PolicyStore(stack.dir / "policies", engine)
            active = store.active()
            version = store.new(parent=active.version, author="olivia", message="replicas test", policy=active)
            store.approve(version, by="rahul")
            store.activate(version, by="rahul")
            wait_until(lambda: set(admin.policy()["replicas"].values()) == {version},
                       what=f"both replicas serving version {version}", timeout=30, interval=0.3)
        finally:
            admin.close()
            engine.dispose()


@pytest.mark.postgres
def test_fresh_schema_starts_empty_every_time(pg_url):
    from sqlalchemy.engine import make_url

    server = make_url(pg_url)._replace(query={}).render_as_string(hide_password=False)
    url = demo.fresh_schema_url(server, "qr_fresh_test")
    engine = make_engine(url)
    try:
        with engine.begin() as c:
            c.execute(text("CREATE TABLE leftover (x int)"))
        engine.dispose()
        url = demo.fresh_schema_url(server, "qr_fresh_test")
        engine = make_engine(url)
        with engine.connect() as c:
            assert c.execute(text("SELECT to_regclass('leftover')")).scalar_one() is None
            assert c.execute(text("SELECT current_schema()")).scalar_one() == "qr_fresh_test"
    finally:
        engine.dispose()
        admin = make_engine(server)
        with admin.begin() as c:
            c.execute(text('DROP SCHEMA IF EXISTS "qr_fresh_test" CASCADE'))
        admin.dispose()


def test_fresh_schema_refuses_anything_but_postgres():
    with pytest.raises(ValueError, match="'sqlite' is not PostgreSQL"):
        demo.fresh_schema_url("sqlite:///x.db")


def test_demo_cli_names_a_bad_option():
    out = subprocess.run([sys.executable, "-m", "quantroute.demo", "--replicas", "0"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--replicas: 0 is not a number of routers >= 1" in out.stderr
    out = subprocess.run([sys.executable, "-m", "quantroute.demo", "--db", "sqlite:///x.db"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "is not PostgreSQL" in out.stderr
