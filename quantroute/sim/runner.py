"""Start a whole simulated fleet for a test or the demo and stop it cleanly afterwards.

    with running_fleet(load_fleet("data/fleet.yaml"), time_scale=0.01) as rf:
        client = OpenAI(base_url=rf.urls["int4-a"] + "/v1", api_key="x")

Nodes get free ports by default (tests must never depend on fixed ports); pass `free_ports=False` to use the
ports in the file. `rf.fleet` is the fleet with the actual ports, so `rf.fleet.node(id).url` works too.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

from quantroute.fleet import Fleet, NodeSpec, load_fleet
from quantroute.sim import quality
from quantroute.sim.server import FleetServer

START_TIMEOUT_S = 30.0


@dataclass
class RunningFleet:
    fleet: Fleet  # ports as actually bound
    server: FleetServer

    @property
    def urls(self) -> dict[str, str]:
        return self.server.urls

    def node(self, node_id: str) -> NodeSpec:
        return self.fleet.node(node_id)

    def kill(self, node_id: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Stop one node and return once it has stopped listening: connections to it are refused from then on.
        It waits for the fleet's own loop to close the socket, so call it from another thread (`running_fleet`);
        in `serving_fleet`'s loop, call `server.kill` and let the loop run until `server.listening` is False."""
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is not None and here is self.server.loop:
            raise RuntimeError("RunningFleet.kill waits for the fleet's event loop, and this is that loop: call "
                               "server.kill(node_id) and await until server.listening(node_id) is False")
        self.server.kill(node_id)
        deadline = time.monotonic() + timeout_s
        while self.server.listening(node_id):
            if time.monotonic() > deadline:
                raise TimeoutError(f"node {node_id!r} still listens {timeout_s:g} s after it was killed")
            time.sleep(0.005)


def _as_fleet(fleet: Fleet | str | Path) -> Fleet:
    return fleet if isinstance(fleet, Fleet) else load_fleet(fleet)


@contextlib.contextmanager
def running_fleet(fleet: Fleet | str | Path, *, time_scale: float = 1.0, suites: str = quality.DEFAULT_SUITES,
                  seed: int = 0, free_ports: bool = True) -> Iterator[RunningFleet]:
    """The fleet served from a background thread with its own event loop; stopped and joined on exit."""
    server = FleetServer(_as_fleet(fleet), time_scale=time_scale, suites=suites, seed=seed, free_ports=free_ports)
    loop = asyncio.new_event_loop()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            loop.run_until_complete(server.serve())
        except BaseException as e:  # noqa: BLE001 - reported to the caller's thread below
            failure.append(e)
        finally:
            server.started.set()
            loop.close()

    thread = threading.Thread(target=run, name="quantroute-sim", daemon=True)
    thread.start()
    if not server.started.wait(START_TIMEOUT_S) or failure:
        loop.call_soon_threadsafe(server.stop) if not loop.is_closed() else None
        thread.join(START_TIMEOUT_S)
        raise RuntimeError("the simulated fleet did not start") from (failure[0] if failure else None)
    try:
        yield RunningFleet(fleet=server.fleet, server=server)
    finally:
        with contextlib.suppress(RuntimeError):  # the loop may already be closed if every node died
            loop.call_soon_threadsafe(server.stop)
        thread.join(START_TIMEOUT_S)


@contextlib.asynccontextmanager
async def serving_fleet(fleet: Fleet | str | Path, *, time_scale: float = 1.0,
                        suites: str = quality.DEFAULT_SUITES, seed: int = 0,
                        free_ports: bool = True) -> AsyncIterator[RunningFleet]:
    """The same in the caller's event loop, for async tests and the demo."""
    server = FleetServer(_as_fleet(fleet), time_scale=time_scale, suites=suites, seed=seed, free_ports=free_ports)
    task = asyncio.create_task(server.serve())
    while not server.started.is_set():
        if task.done():
            task.result()
            raise RuntimeError("the simulated fleet stopped during start-up")
        await asyncio.sleep(0.01)
    try:
        yield RunningFleet(fleet=server.fleet, server=server)
    finally:
        server.stop()
        await task
