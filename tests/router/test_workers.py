"""`quantroute router --workers N`: what one worker is asked covers every worker behind the port.

An unpin drops the pin from every worker's cache (else a worker that had served the session kept routing it by
the old pin while the others followed the new one), a drain reaches every worker at once, and one scrape of
/metrics carries every worker's series. The first tests run two router apps on their own ports as two workers
(the same peer directory), so a test picks which worker a request reaches; the last runs the real command."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import tempfile
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from quantroute.db.engine import make_engine
from quantroute.router.admin.peers import WorkerPeers
from tests.conftest import wait_until
from tests.router.conftest import SENSITIVE, TOLERANT, admin, chat, kill, router_at, router_process


def samples(metrics: str, name: str) -> list:
    return [s for f in text_string_to_metric_families(metrics) for s in f.samples if s.name == name]


def by_worker(metrics: str, name: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in samples(metrics, name):
        out[s.labels["worker"]] = out.get(s.labels["worker"], 0.0) + s.value
    return out


@pytest.fixture
def run_dir():
    """A short runtime directory: a socket path under pytest's numbered tmp_path can pass AF_UNIX's 107 bytes."""
    d = Path(tempfile.mkdtemp(prefix="qr-run-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def two_workers(make_settings, tmp_path):
    settings = make_settings(node_refresh_s=3600)  # only the peers can spread a node change within the test
    d = tmp_path / "peers"
    d.mkdir()
    with router_at(settings, peers=WorkerPeers(d)) as (a, _), router_at(settings, peers=WorkerPeers(d)) as (b, _):
        yield a, b


def test_an_unpin_on_one_worker_drops_the_pin_from_every_workers_cache(two_workers):
    a, b = two_workers
    assert chat(a, TOLERANT, session="s").headers["x-quantroute-tier"] == "int4"
    r = chat(b, SENSITIVE, session="s")  # worker b now holds the int4 pin in its cache
    assert (r.headers["x-quantroute-tier"], r.headers.get("x-quantroute-pinned")) == ("int4", "true")
    with admin(a) as c:
        res = c.delete("/admin/sessions/s")
    assert res.status_code == 200 and res.json() == {"session_key": "s", "unpinned": True}
    # a new first turn: sensitive on its own, so fp16; every later turn follows it, on whichever worker
    assert chat(a, SENSITIVE, session="s").headers["x-quantroute-tier"] == "fp16"
    for url in (b, a, b):
        r = chat(url, SENSITIVE, session="s")
        assert (r.headers["x-quantroute-tier"], r.headers.get("x-quantroute-pinned")) == ("fp16", "true"), url


def test_a_drain_on_one_worker_reaches_every_worker_at_once(two_workers):
    a, b = two_workers
    with admin(a) as ca, admin(b) as cb:
        assert cb.get("/admin/nodes/int4-a").json()["draining"] is False
        assert ca.post("/admin/nodes/int4-a/drain").status_code == 200
        assert cb.get("/admin/nodes/int4-a").json()["draining"] is True  # not at b's next refresh (an hour)
        assert ca.delete("/admin/nodes/int4-b").status_code == 200
        assert cb.get("/admin/nodes/int4-b").status_code == 404


def test_one_scrape_and_one_node_list_cover_every_worker(two_workers):
    a, b = two_workers
    for url, n in ((a, 3), (b, 2)):
        for _ in range(n):
            assert chat(url, TOLERANT).status_code == 200
    for url in (a, b):  # whichever worker the kernel hands the scrape to
        metrics = httpx.get(url + "/metrics", timeout=10).text
        assert by_worker(metrics, "quantroute_requests_total") == {"0": 3.0, "1": 2.0}
        assert by_worker(metrics, "quantroute_router_worker_up") == {"0": 1.0, "1": 1.0}
        with admin(url) as c:
            nodes = c.get("/admin/nodes").json()["nodes"]
        assert sorted(n["key"] for n in nodes) == ["fp16-a", "int4-a", "int4-b", "int4-v2", "int8-a"]


def test_a_worker_that_cannot_be_reached_fails_an_unpin_by_name(two_workers, tmp_path):
    a, b = two_workers
    chat(b, TOLERANT, session="s")
    (tmp_path / "peers" / "worker-1.sock").unlink()  # b still serves on its port; a cannot reach b
    stray = tmp_path / "peers" / "worker-1.sock"
    with socket.socket(socket.AF_UNIX) as s:  # something that accepts and never answers
        s.bind(str(stray))
        s.listen()
        with admin(a) as c:
            res = c.delete("/admin/sessions/s")
    body = res.json()["error"]
    assert res.status_code == 503 and body["code"] == "workers_unreachable"
    assert "worker 1 did not answer" in body["message"] and "retry the unpin" in body["message"]


def test_the_real_command_with_two_workers(make_settings, run_dir):
    settings = make_settings()
    proc, url = router_process(settings, workers=2, env={"QUANTROUTE_ROUTER_RUNTIME_DIR": str(run_dir)})
    try:
        [peers] = list(run_dir.glob("quantroute-workers-*"))
        assert stat.S_IMODE(peers.stat().st_mode) == 0o700  # only this user reaches the control sockets
        wait_until(lambda: sorted(p.name for p in peers.glob("*.sock")) == ["worker-0.sock", "worker-1.sock"],
                   what="both workers' control sockets", timeout=30, interval=0.1)

        # first turns and later turns on new connections until both workers served the session
        eng = make_engine(settings.db_url)

        def workers_of(session: str, since: int = 0) -> dict[str, set[str]]:
            with eng.connect() as c:
                rows = c.execute(text("select request_id, tier from request_log where session_key = :k "
                                      "order by id"), {"k": session}).all()
            out: dict[str, set[str]] = {}
            for rid, tier in rows[since:]:
                out.setdefault(rid.split("-")[0], set()).add(tier)
            return out

        assert chat(url, TOLERANT, session="w").headers["x-quantroute-tier"] == "int4"
        sent = 1

        def both_served(since: int) -> bool:
            nonlocal sent
            chat(url, SENSITIVE, session="w")
            sent += 1
            return len(workers_of("w", since)) == 2

        wait_until(lambda: both_served(0), what="both workers to serve session w", timeout=60, interval=0)
        assert {t for ts in workers_of("w").values() for t in ts} == {"int4"}
        with admin(url) as c:
            assert c.delete("/admin/sessions/w").json()["unpinned"] is True
        wait_until(lambda: logged(eng, "w") == sent,
                   what="the request log to hold every turn so far", timeout=30, interval=0.05)
        before = sent
        wait_until(lambda: both_served(before), what="both workers to serve session w after the unpin", timeout=60,
                   interval=0)
        after = workers_of("w", before)
        assert after and all(ts == {"fp16"} for ts in after.values()), after  # no worker kept the int4 pin

        metrics = httpx.get(url + "/metrics", timeout=10).text
        assert by_worker(metrics, "quantroute_router_worker_up") == {"0": 1.0, "1": 1.0}
        wait_until(lambda: sum(by_worker(httpx.get(url + "/metrics", timeout=10).text,
                                         "quantroute_requests_total").values()) == sent,
                   what=f"one scrape to count all {sent} requests", timeout=10, interval=0.1)
        eng.dispose()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # a clean stop: the supervisor removes the sockets' directory
        try:
            proc.wait(30)
        finally:
            kill(proc)
    assert not list(run_dir.glob("quantroute-workers-*"))


def logged(eng, session: str) -> int:
    with eng.connect() as c:
        return c.execute(text("select count(*) from request_log where session_key = :k"), {"k": session}).scalar()


def test_several_workers_need_a_directory_they_can_write(make_settings, tmp_path):
    from click.testing import CliRunner

    from quantroute.cli.main import cli
    from quantroute.db.engine import init_db

    settings = make_settings()
    init_db(make_engine(settings.db_url))
    locked = tmp_path / "ro"
    locked.mkdir(mode=0o500)
    if os.access(locked, os.W_OK):  # root writes anywhere: a path under a file cannot be made by anyone
        locked = tmp_path / "a-file"
        locked.write_text("")
    res = CliRunner().invoke(cli, ["router", "--workers", "2", "--db", settings.db_url, "--policies",
                                   str(settings.policies_dir), "--runtime-dir", str(locked)])
    assert res.exit_code == 2, res.output
    assert "QUANTROUTE_ROUTER_RUNTIME_DIR" in res.output and str(locked) in res.output



def test_a_killed_worker_comes_back_under_its_name(make_settings, run_dir):
    settings = make_settings()
    proc, url = router_process(settings, workers=2, env={"QUANTROUTE_ROUTER_RUNTIME_DIR": str(run_dir)})
    try:
        [peers] = list(run_dir.glob("quantroute-workers-*"))
        wait_until(lambda: len(list(peers.glob("*.sock"))) == 2, what="both workers' sockets", timeout=30,
                   interval=0.1)
        children = _children(proc.pid)
        workers = [p for p in children if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(workers) == 2, children
        os.kill(workers[0], signal.SIGKILL)  # no clean-up: its socket file stays, its slot lock goes
        ups: list[dict] = []

        def back() -> bool:
            ups.append(by_worker(httpx.get(url + "/metrics", timeout=10).text, "quantroute_router_worker_up"))
            return ups[-1] == {"0": 1.0, "1": 1.0} and workers[0] not in _children(proc.pid)

        wait_until(back, what=lambda: f"the supervisor to restart the worker (last scrapes: {ups[-3:]})", timeout=60,
                   interval=0.2)
        with admin(url) as c:  # and the pair answers for both again
            assert c.delete("/admin/sessions/nobody").status_code == 404
    finally:
        kill(proc)


def _children(pid: int) -> list[int]:
    return [int(p) for t in Path(f"/proc/{pid}/task").iterdir() for p in (t / "children").read_text().split()]


_FREED_BLOCKS = """
import sys
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6
if sys.argv[1] == "tuned":
    from quantroute.router.workers import tune_process
    tune_process()
keep = []
r0 = rss()
for _ in range(4):  # a large block freed while smaller ones allocated after it live on, as a rebuilt dict's table
    b = bytearray(24 << 20)
    b[::4096] = b"x" * len(b[::4096])
    keep.append([object() for _ in range(20000)])
    del b
print(rss() - r0)
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads RSS from /proc")
def test_a_serving_process_gives_back_the_large_blocks_it_frees():
    """A large block freed (the pin cache's hash table after a rebuild) leaves the process's resident memory; with
    the allocator's defaults it stays resident once the threshold has risen past it."""
    import subprocess
    import sys

    def grown(mode: str) -> float:
        out = subprocess.run([sys.executable, "-c", _FREED_BLOCKS, mode], capture_output=True, text=True, check=True)
        return float(out.stdout)

    untuned = grown("plain")
    if untuned < 20:
        pytest.skip(f"this C library returns freed blocks by itself (+{untuned:.1f} MB): nothing to tune")
    assert grown("tuned") < 8, "freed 24 MB blocks stayed resident"
