"""Starting and stopping whole fleets: the thread runner, the async variant, the shipped fleet files."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from pathlib import Path

import httpx
import pytest

from quantroute.sim.runner import running_fleet, serving_fleet
from quantroute.sim.server import FleetServer, bind

from .conftest import make_fleet

DATA = Path(__file__).resolve().parents[2] / "data"


def refuses(url: str) -> bool:
    """True once nothing listens on url. A reset means the node is still going down: a connection the kernel
    queued before the listening socket closed is dropped unanswered, so that is not yet a refusal."""
    try:
        httpx.get(url + "/health", timeout=1)
    except httpx.ConnectError:
        return True
    except (httpx.ReadError, httpx.RemoteProtocolError):
        return False
    return False


def test_a_reset_while_a_node_goes_down_is_not_yet_a_refusal():
    # The kernel resets connections still queued when a listening socket closes; CI once saw that mid-kill.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def reset_one() -> None:
            conn, _ = listener.accept()
            conn.recv(1024)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
            conn.close()

        worker = threading.Thread(target=reset_one, daemon=True)
        worker.start()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        assert refuses(url) is False
        worker.join(5)
    assert refuses(url) is True


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


def test_kill_one_node():
    with running_fleet(make_fleet(), time_scale=0.01) as rf:
        rf.kill("small")
        for _ in range(100):
            if refuses(rf.urls["small"]):
                break
            asyncio.run(asyncio.sleep(0.02))
        assert refuses(rf.urls["small"]) and not refuses(rf.urls["fp16"])


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
