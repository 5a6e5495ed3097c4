"""Serve a router on a free loopback port in a background thread, for tests and benchmarks.

    with running_router(settings) as base_url:
        openai.OpenAI(base_url=base_url + "/v1", api_key="x")...
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import uvicorn

from quantroute.ports import free_port
from quantroute.router.app import Router, create_app
from quantroute.router.settings import RouterSettings


@contextlib.contextmanager
def serve_app(app, port: int | None = None, *, host: str = "127.0.0.1") -> Iterator[str]:
    port = port or free_port()
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", http="httptools",
                            loop="asyncio", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"router-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"server on port {port} did not start")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def running_router(settings: RouterSettings, *, app: Router | None = None, port: int | None = None,
                   **create_kw) -> Iterator[str]:
    """Start `create_app(settings)` (or the given app) on `port` or a free port; yields the base URL (no /v1)."""
    app = app or create_app(settings, **create_kw)
    with serve_app(app, port) as url:
        yield url
