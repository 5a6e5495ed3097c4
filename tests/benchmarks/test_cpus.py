"""`router_paired.py --db-cpus`: PostgreSQL on cores of its own for a run, everything the bench starts on the
others, and every mask put back afterwards (the server is shared with the rest of the suite)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sqlalchemy import text

from quantroute.db.engine import make_engine
from tests.conftest import REPO


@pytest.fixture
def cpus(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from support import cpus

    return cpus


def test_a_cpu_list_reads_as_taskset_writes_it_and_anything_else_is_named(cpus):
    assert cpus.parse_cpus("1") == {1}
    assert cpus.parse_cpus("0,2-3") == {0, 2, 3}
    for bad in ("", "one", "1-", "-1", "1,,2", "3-2"):
        with pytest.raises(ValueError, match="is not a CPU list"):
            cpus.parse_cpus(bad)


@pytest.mark.postgres
def test_the_database_runs_on_its_cpus_and_the_bench_on_the_rest_until_the_run_ends(cpus, pg_url):
    mine = os.sched_getaffinity(0)
    if len(mine) < 2:
        pytest.skip("needs two CPUs")
    server = cpus.postgres_server_pid(pg_url)
    assert server is not None  # the test database runs on this host
    before = os.sched_getaffinity(server)
    db = {max(mine)}
    for bad in (mine, {max(mine) + 1}):  # no CPU left for the bench; a CPU this process may not use
        with pytest.raises(SystemExit, match="give CPUs among"):
            with cpus.database_on_cpus(pg_url, bad):
                pass
    assert os.sched_getaffinity(0) == mine and os.sched_getaffinity(server) == before
    with cpus.database_on_cpus(pg_url, db) as rest:
        assert rest == mine - db and os.sched_getaffinity(0) == rest
        assert os.sched_getaffinity(server) == db
        started = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                                 capture_output=True, text=True, check=True).stdout
        assert started.strip() == str(sorted(rest))  # what the bench starts (wrk, backends, routers)
        eng = make_engine(pg_url)
        try:
            with eng.connect() as c:  # a connection made now: its backend inherits the server's mask
                assert os.sched_getaffinity(c.execute(text("select pg_backend_pid()")).scalar_one()) == db
        finally:
            eng.dispose()
    assert os.sched_getaffinity(0) == mine and os.sched_getaffinity(server) == before
