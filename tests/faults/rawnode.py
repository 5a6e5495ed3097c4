"""A raw asyncio HTTP/1.1 server that misbehaves on purpose, in a background thread: for the faults a real
vLLM shows under load (no answer until generation ends, a kept-alive connection that goes quiet) and that the
simulator, a well-behaved server, cannot show. GETs (/health, /metrics) are always answered."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
import time
from collections.abc import Iterator

import orjson

COMPLETION = orjson.dumps({"id": "raw-1", "object": "chat.completion", "model": "raw", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})


class RawNode:
    """mode: "silent" never answers a POST; "once_per_conn" answers the first POST of each connection and
    goes silent on any later POST on that connection (a stale kept-alive connection); "slow" answers every POST
    after `delay_s`."""

    def __init__(self, mode: str, ssl_context: ssl.SSLContext | None = None, delay_s: float = 0.5) -> None:
        self.mode = mode
        self.delay_s = delay_s
        self.ssl = ssl_context
        self.posts = 0
        self.open_conns = 0
        self.closed_after_post: list[float] = []  # when a connection that carried a POST was closed by the peer
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open_conns += 1
        posted = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method = lines[0].split(" ")[0]
                length = next((int(x.split(":", 1)[1]) for x in lines if x.lower().startswith("content-length:")), 0)
                if length:
                    await reader.readexactly(length)
                if method == "GET":
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                    await writer.drain()
                    continue
                self.posts += 1
                posted += 1
                if self.mode == "silent" or (self.mode == "once_per_conn" and posted > 1):
                    await reader.read()  # until the peer closes
                    break
                if self.mode == "slow":
                    await asyncio.sleep(self.delay_s)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                             + str(len(COMPLETION)).encode() + b"\r\n\r\n" + COMPLETION)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if posted:
                self.closed_after_post.append(time.monotonic())
            self.open_conns -= 1
            writer.close()

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        loop.run_until_complete(self._main())
        loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.ssl)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        server.close()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in others:
            t.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def stop(self) -> None:
        if self._loop is not None:  # never started: nothing to stop
            self._loop.call_soon_threadsafe(self._stop.set)

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl else 'http'}://127.0.0.1:{self.port}"


@contextlib.contextmanager
def raw_node(mode: str, ssl_context: ssl.SSLContext | None = None, delay_s: float = 0.5) -> Iterator[RawNode]:
    node = RawNode(mode, ssl_context, delay_s)
    t = threading.Thread(target=node._run, daemon=True, name=f"rawnode-{mode}")
    t.start()
    node._ready.wait(10)
    try:
        yield node
    finally:
        node.stop()
        t.join(5)
