"""Serves every node of a fleet file from one asyncio loop: one uvicorn server (and port) per node."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import threading
from pathlib import Path

import uvicorn

from quantroute.catalog import DATA_DIR, load_hardware, load_models
from quantroute.fleet import Fleet, NodeSpec
from quantroute.sim import quality
from quantroute.sim.node import NodeSettings, create_node_app
from quantroute.tracing import Tracing


class _NodeServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self):
        # Each uvicorn server would take over SIGINT/SIGTERM for itself alone; the fleet handles them for all.
        yield


def bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port} ({e.strerror}); free the port or set it to 0") from None
    return sock


class FleetServer:
    """Binds every node's socket at construction (so URLs are known before serving), then `serve()` runs them.
    With `free_ports`, every node gets a free port whatever the file says."""

    def __init__(self, fleet: Fleet, *, time_scale: float = 1.0, suites: str = quality.DEFAULT_SUITES,
                 seed: int = 0, free_ports: bool = False, data_dir: Path = DATA_DIR, tracing: Tracing | None = None):
        if time_scale <= 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        hardware, models = load_hardware(data_dir), load_models(data_dir)
        table = quality.load_quality(data_dir / "quality.yaml")
        index = quality.load_suites(suites)
        self.started = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop serving the nodes, once `serve` runs
        self._sockets: dict[str, socket.socket] = {}  # node id -> its listening socket
        self.servers: dict[str, uvicorn.Server] = {}
        nodes: list[NodeSpec] = []
        try:
            for spec in fleet.nodes:
                sock = bind(spec.host, 0 if free_ports else spec.port)
                self._sockets[spec.id] = sock
                node = spec.model_copy(update={"port": sock.getsockname()[1]})
                nodes.append(node)
                settings = NodeSettings(node=node, shape=models[fleet.shape_for(node)], gpu=hardware[node.hardware],
                                        time_scale=time_scale, suites=index, quality=table, seed=seed,
                                        on_die=functools.partial(self.kill, node.id), tracing=tracing)
                config = uvicorn.Config(create_node_app(settings), log_level="warning", access_log=False,
                                        lifespan="on", timeout_graceful_shutdown=1)
                self.servers[node.id] = _NodeServer(config)
        except BaseException:
            self.close_sockets()
            raise
        self.fleet = fleet.model_copy(update={"nodes": nodes})
        self.suite_items = len(index)

    @property
    def urls(self) -> dict[str, str]:
        return {n.id: n.url for n in self.fleet.nodes}

    def kill(self, node_id: str) -> None:
        """Stop one node's server: it stops listening, as a crashed vLLM would. Returns at once; the node's
        loop closes the socket at its next tick (see `listening`)."""
        self.servers[node_id].should_exit = True

    def listening(self, node_id: str) -> bool:
        """Whether the node's socket is still open: uvicorn closes it first thing when it shuts down, and from
        then on connections to the node are refused."""
        return self._sockets[node_id].fileno() != -1

    def stop(self) -> None:
        for server in self.servers.values():
            server.should_exit = True

    def close_sockets(self) -> None:
        for sock in self._sockets.values():
            sock.close()

    async def serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        tasks = [asyncio.create_task(s.serve(sockets=[self._sockets[nid]]), name=f"node-{nid}")
                 for nid, s in self.servers.items()]
        try:
            while not all(s.started for s in self.servers.values()):
                done = [t for t in tasks if t.done()]
                if done:  # a node failed to start: surface its error
                    self.stop()
                    done[0].result()
                    raise RuntimeError(f"{done[0].get_name()} stopped during start-up")
                await asyncio.sleep(0.01)
            self.started.set()
            await asyncio.gather(*tasks)
        finally:
            self.stop()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.close_sockets()
