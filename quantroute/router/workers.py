"""Serving the router: one process, or `workers` processes sharing one listening socket.

Workers are separate processes (uvicorn's supervisor spawns them and restarts one that dies), so each keeps its
own caches and reads the same database, exactly as replicas on several hosts do: pins, node registrations and
policy activations reach every worker through the DB. That is why several workers need a database: without one
each worker would keep pins of its own and a session's second turn could land on a worker that never saw it.
What the DB does not carry (a cached pin an unpin must drop, every worker's counters for one scrape, in-flight
counts) goes between the workers over control sockets (peers.py)."""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import tempfile
from typing import Any

from quantroute.router.settings import RouterSettings

# How the supervisor hands the settings to workers it spawns (fresh interpreters: nothing else is inherited).
SETTINGS_ENV = "QUANTROUTE_WORKER_SETTINGS"
# The request log's writer runs in a thread; at CPython's default 5 ms switch interval a batch being written
# would hold the event loop off the GIL for up to 5 ms at each of a request's syscalls.
SWITCH_INTERVAL_S = 0.0005
# glibc serves blocks from this size up with pages of their own, given back when freed. Its default threshold
# rises to the largest block freed, so the pin cache's hash table (~21 MB at 200,000 pins), rebuilt as sessions
# turn over, came from the heap after its first rebuild, where a freed table's pages stay resident: RSS stepped
# up by the table's size once more. A threshold set once stays put.
MMAP_THRESHOLD_BYTES = 1 << 20
M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
LOG_LEVEL_ENV = "QUANTROUTE_WORKER_LOG_LEVEL"
# The directory of the workers' control sockets (peers.py), made by the supervisor, removed when it exits
PEERS_DIR_ENV = "QUANTROUTE_WORKER_PEERS_DIR"


class WorkersNeedDatabase(ValueError):
    """Several workers without a database would each keep their own pins."""


class WorkersNeedRuntimeDir(ValueError):
    """Several workers talk over Unix sockets in a directory they can write."""


def tune_process() -> None:
    """Interpreter and allocator settings of a process that serves requests (see SWITCH_INTERVAL_S and
    MMAP_THRESHOLD_BYTES). The allocator's only where the C library has glibc's `mallopt`."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not a glibc-like C library
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def serve(settings: RouterSettings, *, workers: int = 1, use_db: bool = True, log_level: str = "warning") -> None:
    import uvicorn

    from quantroute.router.app import create_app

    def run(app: Any, **more: Any) -> None:
        # log_config=None: uvicorn's loggers go through the root logger (text or JSON lines, quantroute.logs);
        # proxy_headers=False: nothing here reads the client address, and the middleware rewriting it from
        # X-Forwarded-* ran on every request
        uvicorn.run(app, host=settings.host, port=settings.port, http="httptools", loop="uvloop", log_level=log_level,
                    access_log=False, timeout_graceful_shutdown=5, log_config=None, proxy_headers=False, **more)

    tune_process()
    if workers == 1:
        run(create_app(settings, use_db=use_db, own_process=True))
        return
    if not use_db:
        raise WorkersNeedDatabase(f"--workers {workers} needs a database (drop --no-db): each worker is its own "
                                  "process and workers share session pins only through the database")
    from quantroute.db.engine import make_engine, require_schema

    # refuse a schema that is not ours once, here, with one clear message rather than one per worker
    require_schema(make_engine(settings.db_url)).dispose()
    os.environ[SETTINGS_ENV] = settings.model_dump_json()
    os.environ[LOG_LEVEL_ENV] = log_level
    try:  # mode 0700: only this user reaches the sockets
        peers_dir = tempfile.mkdtemp(prefix="quantroute-workers-", dir=settings.runtime_dir)
    except OSError as e:
        raise WorkersNeedRuntimeDir(
            f"--workers {workers}: cannot make the workers' control socket directory in "
            f"{settings.runtime_dir or tempfile.gettempdir()} ({e.strerror}); set runtime_dir "
            "(QUANTROUTE_ROUTER_RUNTIME_DIR) to a writable directory, e.g. a volume in a container") from None
    os.environ[PEERS_DIR_ENV] = peers_dir
    try:
        run("quantroute.router.workers:app_from_env", factory=True, workers=workers)
    finally:
        shutil.rmtree(peers_dir, ignore_errors=True)


def app_from_env():
    """uvicorn's factory in each worker process: the supervisor's settings, schema already checked."""
    from quantroute.logs import configure_logging
    from quantroute.router.admin.peers import WorkerPeers
    from quantroute.router.app import create_app

    settings = RouterSettings.model_validate_json(os.environ[SETTINGS_ENV])
    configure_logging(os.environ.get(LOG_LEVEL_ENV, settings.log_level), json_lines=settings.log_json)
    tune_process()  # a fresh interpreter: the supervisor's settings are not inherited
    return create_app(settings, own_process=True, peers=WorkerPeers(os.environ[PEERS_DIR_ENV]))
