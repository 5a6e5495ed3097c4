"""Starting and stopping whole fleets: the thread runner, the async variant, the shipped fleet files."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest

from quantroute.sim.runner import running_fleet, serving_fleet
from quantroute.sim.server import FleetServer, bind

from .conftest import make_fleet

DATA = Path(__file__).resolve().parents[2] / "data"


def refuses(url: str) -> bool:
    try:
        httpx.get(url + "/health", timeout=1)
    except httpx.ConnectError:
        return True
    return False


def test_the_demo_fleet_serves_every_node_on_free_ports_and_stops_cleanly():
    with running_fleet(DATA / "fleet.yaml", time_scale=0.01) as rf:
        urls = rf.urls
        assert len(urls) == 7 and all(":181" not in u for u in urls.values())  # free ports, not the file's
        for node_id, url in urls.items():
            assert httpx.get(url + "/health").status_code == 200
            assert httpx.get(url + "/v1/models").json()["data"][0]["id"] == rf.node(node_id).deployment.id
    assert all(refuses(u) for u in urls.values())


def test_seed000_fleet_starts():
    with running_fleet(DATA / "fleet-seed000.yaml", time_scale=0.01) as rf:
        r = httpx.post(rf.urls["int4-1"] + "/v1/completions", json={"model": "llama-13b", "prompt": "x",
                                                                    "max_tokens": 3})
        assert r.json()["model"] == "llama-13b-gptq-w4a16"


def test_kill_returns_once_the_node_refuses_connections():
    # A test that kills a node goes on at once: no poll of its own (CI once saw a reset while one still polled).
    with running_fleet(make_fleet(), time_scale=0.01) as rf:
        rf.kill("small")
        assert not rf.server.listening("small") and rf.server.listening("fp16")
        assert refuses(rf.urls["small"]) and not refuses(rf.urls["fp16"])


def test_kill_in_the_fleets_own_loop_says_what_to_call_instead():
    async def main() -> None:
        async with serving_fleet(make_fleet(), time_scale=0.01) as rf:
            with pytest.raises(RuntimeError, match=r"server.kill\(node_id\)"):
                rf.kill("small")
            assert rf.server.listening("small")  # nothing was stopped

    asyncio.run(main())


def test_async_variant():
    async def main() -> list[int]:
        async with serving_fleet(make_fleet(), time_scale=0.01) as rf:
            async with httpx.AsyncClient() as c:
                rs = await asyncio.gather(*(c.post(u + "/v1/completions",
                                                   json={"model": "llama3-8b", "prompt": "a", "max_tokens": 4})
                                            for u in rf.urls.values()))
            return [r.status_code for r in rs], list(rf.urls.values())

    codes, urls = asyncio.run(main())
    assert codes == [200, 200, 200] and all(refuses(u) for u in urls)


def test_a_taken_port_is_reported_with_what_to_do():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}.*set it to 0"):
            bind("127.0.0.1", port)
    with pytest.raises(ValueError, match="time_scale must be > 0"):
        FleetServer(make_fleet(), time_scale=0)
