"""A lean HTTP/1.1 client for the hot path: keep-alive connection pools per node on asyncio protocols,
responses parsed by httptools (the parser uvicorn uses).

Why not httpx here: on this path it costs more than the rest of the router together (pool bookkeeping,
header models, anyio streams). httpx remains the client for probes and admin calls, and tests that inject
an httpx transport get the httpx path (`HttpxUpstream`)."""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httptools
import httpx


class UpstreamError(Exception):
    """Connect failure or a broken connection; retryable when nothing reached the client yet."""


class UpstreamTimeout(UpstreamError):
    """The node sent no response headers in time, or sent them and then nothing for longer than the body read
    timeout."""


class _Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.queue: asyncio.Queue = asyncio.Queue()
        self.headers: list[tuple[bytes, bytes]] = []
        self.status = 0
        self.closed = False
        self.reusable = False
        self._headers_done: asyncio.Future | None = None

    # protocol callbacks
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(UpstreamError(f"bad HTTP from node: {e}"))

    def connection_lost(self, exc) -> None:
        self.closed = True
        self._fail(UpstreamError(f"connection closed by node{': ' + str(exc) if exc else ''}"))

    def stalled(self, timeout: float) -> None:
        """Body read timeout: fail the reader and drop the connection (its state is unknown)."""
        if self.closed:
            return
        self.reusable = False
        self.queue.put_nowait(UpstreamTimeout(f"node sent nothing for {timeout:g}s after its response headers"))
        if self.transport is not None:
            self.transport.close()

    def drop(self) -> None:
        """Close the connection, if it ever opened (a dropped connection is never reused)."""
        if self.transport is not None:
            self.transport.close()

    def _fail(self, err: Exception) -> None:
        if self._headers_done is not None and not self._headers_done.done():
            self._headers_done.set_exception(err)
        self.queue.put_nowait(err)

    # parser callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        if self._headers_done is not None and not self._headers_done.done():
            self._headers_done.set_result(None)

    def on_body(self, body: bytes) -> None:
        self.queue.put_nowait(body)

    def on_message_complete(self) -> None:
        self.reusable = self.parser.should_keep_alive()
        self.queue.put_nowait(None)

    # request
    def start(self, head: bytes, body: bytes) -> asyncio.Future:
        self.headers = []
        self.status = 0
        self.reusable = False
        self.parser = httptools.HttpResponseParser(self)
        self._headers_done = asyncio.get_running_loop().create_future()
        if self.transport is None:
            raise UpstreamError("not connected to the node")
        self.transport.write(head + body)
        return self._headers_done


class Response:
    """Status and headers are ready; iterate `aiter_raw()` for the body. Always `aclose()`."""

    def __init__(self, pool: Pool, conn: _Conn, read_timeout: float | None = None) -> None:
        self.pool = pool
        self.conn = conn
        self.read_timeout = read_timeout
        self.status_code = conn.status
        self._headers = conn.headers
        self._done = False

    def header(self, name: bytes, default: bytes = b"") -> bytes:
        for k, v in self._headers:
            if k == name:
                return v
        return default

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        q = self.conn.queue
        while True:
            item = q.get_nowait() if not q.empty() else await self._wait(q)
            if item is None:
                self._done = True
                return
            if isinstance(item, Exception):
                raise item
            yield item

    async def _wait(self, q: asyncio.Queue):
        if self.read_timeout is None:
            return await q.get()
        # A timer handle rather than asyncio.wait_for: no extra task per chunk on the hot path.
        timer = asyncio.get_running_loop().call_later(self.read_timeout, self.conn.stalled, self.read_timeout)
        try:
            return await q.get()
        finally:
            if timer is not None:
                timer.cancel()

    async def aread(self) -> bytes:
        # the loop of aiter_raw without an async generator per response (most bodies are already queued)
        q = self.conn.queue
        chunks: list[bytes] = []
        while True:
            item = q.get_nowait() if not q.empty() else await self._wait(q)
            if item is None:
                self._done = True
                return b"".join(chunks)
            if isinstance(item, Exception):
                raise item
            chunks.append(item)

    async def aclose(self) -> None:
        conn, self.conn = self.conn, None  # type: ignore[assignment]  # None marks a closed response
        if conn is None:
            return
        if self._done and conn.reusable and not conn.closed and conn.queue.empty():
            self.pool.idle.append(conn)
        elif conn.transport is not None:
            conn.transport.close()


class Pool:
    """Keep-alive connections to one node (TLS for an https:// URL)."""

    def __init__(self, base_url: str, connect_timeout: float, max_idle: int = 256,
                 read_timeout: float | None = None, tls: ssl.SSLContext | None = None) -> None:
        u = urlsplit(base_url)
        self.read_timeout = read_timeout
        https = u.scheme == "https"
        # an https node without a context still gets TLS with the system trust store, never plain HTTP
        self.tls = (tls or ssl.create_default_context()) if https else None
        self.host, self.port = u.hostname or "127.0.0.1", u.port or (443 if https else 80)
        self.host_header = (u.netloc or self.host).encode()
        self.prefix = u.path.rstrip("/").encode()
        self.connect_timeout = connect_timeout
        self.idle: deque[_Conn] = deque(maxlen=max_idle)

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        hostname = self.host if self.tls is not None else None  # checked against the certificate
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(_Conn, self.host, self.port, ssl=self.tls,
                                                                    server_hostname=hostname),
                                             self.connect_timeout)
        except (TimeoutError, OSError) as e:  # ssl.SSLError (a bad certificate) is an OSError
            raise UpstreamError(f"connect to {self.host}:{self.port} failed: {type(e).__name__}: {e}") from None
        return conn

    async def post(self, path: bytes, body: bytes, headers: list[tuple[bytes, bytes]], timeout: float) -> Response:
        head = b"".join([b"POST ", self.prefix, path, b" HTTP/1.1\r\nhost: ", self.host_header,
                         b"\r\ncontent-length: ", str(len(body)).encode(), b"\r\n",
                         *[k + b": " + v + b"\r\n" for k, v in headers], b"\r\n"])
        while self.idle:
            conn = self.idle.pop()
            if conn.closed:
                continue
            try:
                await self._start(conn, head, body, timeout)
            except _Stale:
                # A kept-alive connection the node closed meanwhile: the request never reached it; use a new one.
                continue
            return Response(self, conn, self.read_timeout)
        conn = await self._connect()
        try:
            await self._start(conn, head, body, timeout)
        except _Stale as e:
            raise UpstreamError(str(e)) from None
        return Response(self, conn, self.read_timeout)

    @staticmethod
    async def _start(conn: _Conn, head: bytes, body: bytes, timeout: float) -> None:
        """Send the request and wait for the response headers. Whatever ends the wait early (the node's timeout,
        the client going away: a cancellation) closes the connection, so the node sees the request aborted
        and frees its slot; a closed connection is never reused."""
        # A timer handle on the headers future (not asyncio.wait_for: a waiter future, a callback and a partial
        # per request on the hot path).
        timer = None
        try:
            headers_done = conn.start(head, body)
            timer = asyncio.get_running_loop().call_later(timeout, _expire, headers_done)
            await headers_done
        except UpstreamError as e:
            conn.drop()
            raise _Stale(str(e)) from None
        except _HeadersLate:
            conn.drop()
            raise UpstreamTimeout(f"node sent no response headers within {timeout:g}s") from None
        except BaseException:
            conn.drop()
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def close(self) -> None:
        while self.idle:
            c = self.idle.pop()
            if c.transport is not None:
                c.transport.close()


class _HeadersLate(Exception):
    """The response headers did not come within the timeout (set on the headers future by its timer)."""


def _expire(headers_done: asyncio.Future) -> None:
    if not headers_done.done():
        headers_done.set_exception(_HeadersLate())


class _Stale(Exception):
    """The connection broke before any response byte: on a kept-alive one, the request can go on a fresh one."""


class FastUpstream:
    """`timeout`: wait for response headers; `read_timeout`: longest silence between body chunks after them."""

    def __init__(self, *, connect_timeout: float, timeout: float, read_timeout: float | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self.read_timeout = read_timeout
        self.tls = tls
        self.pools: dict[str, Pool] = {}

    async def post(self, base_url: str, path: str, body: bytes, headers: list[tuple[bytes, bytes]]) -> Response:
        pool = self.pools.get(base_url)
        if pool is None:
            pool = self.pools[base_url] = Pool(base_url, self.connect_timeout, read_timeout=self.read_timeout,
                                               tls=self.tls)
        return await pool.post(path.encode(), body, headers, self.timeout)

    async def aclose(self) -> None:
        for p in self.pools.values():
            p.close()


class _HttpxResponse:
    def __init__(self, resp: httpx.Response, read_timeout: float | None = None) -> None:
        self.resp = resp
        self.status_code = resp.status_code
        self.read_timeout = read_timeout

    def header(self, name: bytes, default: bytes = b"") -> bytes:
        v = self.resp.headers.get(name.decode())
        return v.encode() if v is not None else default

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        chunks = self.resp.aiter_raw()
        try:
            while True:
                try:
                    c = await asyncio.wait_for(chunks.__anext__(), self.read_timeout)
                except StopAsyncIteration:
                    return
                yield c
        except TimeoutError:
            raise UpstreamTimeout(f"node sent nothing for {self.read_timeout:g}s after its response headers") from None
        except httpx.TransportError as e:
            raise UpstreamError(f"{type(e).__name__}: {e}") from None

    async def aread(self) -> bytes:
        return b"".join([c async for c in self.aiter_raw()])

    async def aclose(self) -> None:
        await self.resp.aclose()


class HttpxUpstream:
    """The same interface over an httpx client (used when a test injects an httpx transport)."""

    def __init__(self, client: httpx.AsyncClient, read_timeout: float | None = None) -> None:
        self.client = client
        self.read_timeout = read_timeout

    async def post(self, base_url: str, path: str, body: bytes, headers: list[tuple[bytes, bytes]]):
        req = self.client.build_request("POST", base_url + path, content=body, headers=headers)
        try:
            return _HttpxResponse(await self.client.send(req, stream=True), self.read_timeout)
        except httpx.TransportError as e:
            raise UpstreamError(f"{type(e).__name__}: {e}") from None

    async def aclose(self) -> None:
        pass
