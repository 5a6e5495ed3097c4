"""A simulated fleet behind a router, each in its own process, for the fleet experiment and load tests.

Three processes (fleet, router, load generator) keep the three event loops off each other's GIL, which matters on
a 2-core machine: token pacing in the simulator must not wait for the client's parsing.

    with fleet_stack(load_fleet("data/fleet-seed000.yaml"), policy, time_scale=2.0) as stack:
        await replay(stack.router_url, traffic, ...)

The router gets a policies dir holding only `policy` (as version 1) and a fleet file with the nodes' actual
ports; it runs without a database (pins in memory) unless `db_url` is given.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from quantroute.fleet import Fleet
from quantroute.policy.loader import dump_policy
from quantroute.policy.model import Policy

START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class FleetStack:
    router_url: str
    fleet: Fleet  # with the ports actually bound

    @property
    def node_urls(self) -> dict[str, str]:
        return {n.id: n.url for n in self.fleet.nodes}


def _fleet_child(fleet_data: dict, time_scale: float, seed: int, conn) -> None:
    import asyncio

    from quantroute.sim.runner import serving_fleet

    async def main() -> None:
        async with serving_fleet(Fleet.model_validate(fleet_data), time_scale=time_scale, seed=seed) as rf:
            conn.send(rf.fleet.model_dump(mode="json"))
            await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until the parent says stop

    try:
        asyncio.run(main())
    except BaseException as e:  # noqa: BLE001 - tell the parent why, instead of leaving it waiting
        with contextlib.suppress(Exception):
            conn.send({"error": repr(e)})


def _router_child(settings_data: dict, conn) -> None:
    from quantroute.router.settings import RouterSettings
    from quantroute.router.testing import running_router

    try:
        settings = RouterSettings(**settings_data)
        if settings.db_url is not None:  # a harness stands in for `quantroute db upgrade`
            from quantroute.db.engine import init_db, make_engine

            init_db(make_engine(settings.db_url))
        with running_router(settings, use_db=settings.db_url is not None) as url:
            conn.send(url)
            conn.recv()
    except BaseException as e:  # noqa: BLE001 - tell the parent why, instead of leaving it waiting
        with contextlib.suppress(Exception):
            conn.send({"error": repr(e)})


@contextlib.contextmanager
def _child(target, *args) -> Iterator:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(*args, child), daemon=True)
    # "spawn" re-runs the parent's __main__ in the child. The children here need nothing from it, and the host
    # may have replaced __main__ with a script that must not run twice (pytest after Streamlit's AppTest, a
    # notebook), so the child is started against an empty main module.
    real_main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        proc.start()
    finally:
        sys.modules["__main__"] = real_main
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not parent.poll(0.1):
            if not proc.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{target.__name__} did not start (exit code {proc.exitcode}); "
                                   "scripts that use fleet_stack need an `if __name__ == '__main__':` guard")
        msg = parent.recv()
        if isinstance(msg, dict) and "error" in msg:
            raise RuntimeError(f"{target.__name__} failed: {msg['error']}")
        yield msg
    finally:
        with contextlib.suppress(OSError, BrokenPipeError):
            parent.send("stop")
        proc.join(15)
        if proc.is_alive():
            proc.terminate()  # only our own child, by its handle
            proc.join(5)


@contextlib.contextmanager
def fleet_stack(fleet: Fleet, policy: Policy, *, time_scale: float = 1.0, seed: int = 0,
                db_url: str | None = None, router_view: Callable[[Fleet], Fleet] | None = None,
                **router_settings) -> Iterator[FleetStack]:
    """Start the fleet, then a router in front of it; both stopped on exit. `router_settings` are
    RouterSettings fields (e.g. node_max_inflight); `router_view` rewrites the fleet file the router reads
    (the nodes as bound, so with their ports), not the nodes themselves."""
    with tempfile.TemporaryDirectory(prefix="quantroute-stack-") as tmp:
        policies = Path(tmp) / "policies"
        policies.mkdir()
        (policies / "policy-0001.yaml").write_text(dump_policy(policy.model_copy(update={"version": 1,
                                                                                           "parent": None})))
        with _child(_fleet_child, fleet.model_dump(mode="json"), time_scale, seed) as fleet_data:
            bound = Fleet.model_validate(fleet_data)
            fleet_file = Path(tmp) / "fleet.yaml"
            view = router_view(bound) if router_view is not None else bound
            fleet_file.write_text(yaml.safe_dump(view.model_dump(mode="json"), sort_keys=False))
            settings = {"policies_dir": str(policies), "fleet_file": str(fleet_file), "db_url": db_url,
                        "watch_pointer": False, **router_settings}
            with _child(_router_child, settings) as router_url:
                yield FleetStack(router_url=router_url, fleet=bound)
