"""The router's request path in-process, without sockets: CPU per request, and instructions under callgrind.

`router_overhead.py` measures the whole router against wrk, so its figures move with the machine's load. This one
drives `Router.__call__` directly (an in-memory ASGI request, an upstream that answers at once, the shipped
default policy, a SQLite request log whose writer is timed separately) and reports CPU time per request: the
decision, forwarding, metrics and the log row, which is what the event loop spends per request besides
uvicorn's and the sockets'. Under callgrind it counts instructions only around the measured requests, a figure
that does not depend on what else runs on the machine:

    python benchmarks/router_request_path.py [--mode none|fixed|new] [--requests 5000]
    valgrind --tool=callgrind --instr-atstart=no python benchmarks/router_request_path.py --callgrind --requests 300

`--concurrency 32 --yields 2` runs 32 requests side by side and has the upstream answer two loop iterations
later, as a socket does: new sessions' pins then go out in batches, as under load (with answers that come back
at once, every first turn waits for its pin's commit, which a real upstream rarely makes it do).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import uvloop

from quantroute.db.engine import init_db, make_engine
from quantroute.node import NodeIdentity
from quantroute.router.app import create_app
from quantroute.router.settings import RouterSettings
from router_overhead import BACKENDS, BODY, REPO

ANSWER = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}).encode()


class Answer:
    """A node's complete JSON answer, already received."""

    status_code = 200

    def header(self, name: bytes, default: bytes = b"") -> bytes:
        return b"application/json" if name == b"content-type" else default

    async def aread(self) -> bytes:
        return ANSWER

    async def aclose(self) -> None:
        pass


class Upstream:
    def __init__(self, yields: int = 0) -> None:
        self.yields = yields

    async def post(self, url, path, body, headers) -> Answer:
        for _ in range(self.yields):  # the answer arrives a loop iteration later, as from a socket
            await asyncio.sleep(0)
        return Answer()

    async def aclose(self) -> None:
        pass


async def run(args, tmp: Path) -> None:
    shutil.copytree(REPO / "policies", tmp / "policies", ignore=shutil.ignore_patterns("active"))
    url = f"sqlite:///{tmp / 'bench.db'}"
    engine = make_engine(url)
    init_db(engine)
    app = create_app(RouterSettings(policies_dir=tmp / "policies", db_url=url, admin_token="x"), engine=engine)
    await app.startup()
    for t in app._tasks:  # the request path alone: no probes, syncs or polls
        t.cancel()
    if app.pin_committer is not None and args.mode != "none":
        asyncio.get_running_loop().create_task(app.pin_committer.run())
    app.upstream = app.forwarder.upstream = Upstream(args.yields)  # type: ignore[union-attr]  # set by startup()
    for i, (deployment, tier, fmt) in enumerate(BACKENDS):
        app.fleet.register(NodeIdentity(url=f"http://127.0.0.1:{9000 + i}", model="llama3-8b", deployment=deployment,
                                        tier=tier, format=fmt))  # type: ignore[arg-type]  # pydantic parses them
    for node in app.fleet.nodes.values():
        node.healthy = True
    body = json.dumps(BODY).encode()
    base = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode())]
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def one(i: int) -> None:
        session = {"none": [], "fixed": [(b"x-session-id", b"fixed")],
                   "new": [(b"x-session-id", uuid.uuid4().hex.encode())]}  # random, as clients' ids are
        scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": base + session[args.mode]}
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        never = asyncio.get_running_loop().create_future()

        async def receive() -> dict:
            if messages:
                return messages.pop()
            await never
            return {"type": "http.disconnect"}

        await app(scope, receive, send)
        never.cancel()

    async def some(n: int) -> None:
        await asyncio.gather(*[one(i) for i in range(n)])

    for _ in range(max(1, 300 // args.concurrency)):  # warm: caches, pins, the writer's prepared statement
        await some(args.concurrency)
    assert sent[-2]["status"] == 200, sent[-2]
    app.writer.buffer.clear()
    gc.collect()
    gc.freeze()  # as `quantroute router` does after startup
    if args.callgrind:
        subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True)
    started = time.process_time()
    for _ in range(args.requests // args.concurrency):
        await some(args.concurrency)
    cpu = time.process_time() - started
    if args.callgrind:
        subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], capture_output=True)
    rows = [r for r, _ in list(app.writer.buffer)[:1000]]
    started = time.process_time()
    for k in range(0, len(rows), 100):
        app.writer._write(rows[k:k + 100])
    writer_cpu = time.process_time() - started
    done = args.requests // args.concurrency * args.concurrency
    print(f"request path ({args.mode}, {args.concurrency} at a time): {cpu / done * 1e6:.1f} us CPU per request; "
          f"request log writer {writer_cpu / max(len(rows), 1) * 1e6:.1f} us CPU per row (100-row batches, its own "
          "thread in the router)")
    app.writer.buffer.clear()
    await app.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("none", "fixed", "new"), default="none",
                    help="session mode, as in router_overhead")
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--concurrency", type=int, default=1, help="requests side by side (pins batch)")
    ap.add_argument("--yields", type=int, default=0, help="loop iterations before the upstream answers")
    ap.add_argument("--callgrind", action="store_true", help="count instructions only around the measured requests")
    args = ap.parse_args()
    if not 1 <= args.concurrency <= args.requests:
        ap.error(f"--concurrency must be between 1 and --requests ({args.requests}); got {args.concurrency}")
    tmp = Path(tempfile.mkdtemp(prefix="qr-path-"))
    try:
        uvloop.run(run(args, tmp))  # the router's loop (uvicorn runs it with loop="uvloop")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
