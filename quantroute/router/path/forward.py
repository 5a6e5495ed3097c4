"""Forwarding one request to a node: original body bytes unchanged, SSE passed through chunk by chunk.

Retries go to another node of the same tier (and arm) on a connect error, a broken connection or a 5xx,
as long as no byte has reached the client. Non-streamed responses are read whole before anything is sent
(they are small), so a node dying mid-answer is still retried; streams are committed at their first byte."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from quantroute.router.errors import UpstreamFailed
from quantroute.router.nodes.pool import Node, NodePool
from quantroute.router.nodes.upstream import UpstreamError, UpstreamTimeout
from quantroute.router.path import trace
from quantroute.tracing import Tracing

MAX_CAPTURE_BYTES = 1024 * 1024  # a larger answer is not kept for a shadow comparison

# Client headers worth passing on; everything else (host, length, encodings, hop-by-hop) is ours to set.
FORWARD_HEADERS = frozenset({b"authorization", b"content-type", b"accept", b"x-request-id", b"traceparent",
                             b"openai-organization", b"openai-project"})
# With client keys on, Authorization carries the client's key: the router's credential, which a node (or its
# access log) must never see.
KEYED_FORWARD_HEADERS = FORWARD_HEADERS - {b"authorization"}

Send = Callable[[dict], Awaitable[None]]
Gate = Callable[[], Awaitable[None]]  # awaited before the first byte of a response leaves; may raise


@dataclass(slots=True)
class ForwardResult:
    """What happened upstream, for the request log and metrics."""

    status: int = 0
    node: Node | None = None
    retries: int = 0
    ttft: float | None = None  # seconds from request start to the first byte sent to the client
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    committed: bool = False  # a response start went to the client
    timed_out: bool = False  # the last failed attempt was a body read timeout
    capture: bool = False  # keep a copy of the answer sent to the client (a shadow will compare it)
    body: bytes | None = None  # that copy (None: not captured, or larger than MAX_CAPTURE_BYTES)
    # The last byte of the response went to the server: from then on the ASGI server answers receive() with
    # http.disconnect (the response is complete), which is no client leaving and must not cancel anything.
    sent_all: bool = False
    upstream_status: int = 0  # the last node's answer, 5xx included (0: no answer)
    span: Any = None  # the request's span, when tracing is on


def upstream_headers(raw: list[tuple[bytes, bytes]],
                     allowed: frozenset[bytes] = FORWARD_HEADERS) -> list[tuple[bytes, bytes]]:
    out = [(k, v) for k, v in raw if k in allowed]
    if not any(k == b"content-type" for k, _ in out):
        out.append((b"content-type", b"application/json"))
    return out


def usage_from(body: bytes) -> tuple[int | None, int | None]:
    """prompt/completion tokens from a JSON response or the last SSE chunk that carries `usage`."""
    # bytes.find, not `in`: on CPython 3.11 `b"..." in data` first tries its operand as an integer and raises
    # and clears a TypeError
    if body.find(b'"usage"') < 0:
        return None, None
    for line in reversed(body.split(b"\n")):
        line = line.strip()
        if line.startswith(b"data:"):
            line = line[5:].strip()
        if line.find(b'"usage"') < 0:
            continue
        try:
            usage = orjson.loads(line).get("usage") or {}
        except (orjson.JSONDecodeError, AttributeError):
            continue
        if not isinstance(usage, dict):
            return None, None
        return _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    return None, None


def _count(v) -> int | None:
    """A token count as the log's integer column and the counters take it; anything else is unknown."""
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31 else None


class Forwarder:
    def __init__(self, upstream, fleet: NodePool, *, retries: int, on_upstream_error=None,
                 forward_headers: frozenset[bytes] = FORWARD_HEADERS, tracing: Tracing | None = None) -> None:
        self.upstream = upstream  # FastUpstream or HttpxUpstream
        self.forward_headers = forward_headers
        self.fleet = fleet
        self.retries = retries
        self.on_upstream_error = on_upstream_error  # (tier, kind) -> None
        self.tracing = tracing

    async def forward(self, *, path: str, body: bytes, headers: list[tuple[bytes, bytes]], first: Node,
                      pick_other: Callable[[set[str]], Node | None], send: Send,
                      response_headers: Callable[[Node], list[tuple[bytes, bytes]]], started: float,
                      out: ForwardResult, gate: Gate | None = None) -> None:
        """Send to `first`; on a retryable failure ask `pick_other(tried)` for another node. `gate` runs once a
        node answered and before anything is sent to the client (a new session's pin is stored meanwhile)."""
        node: Node | None = first
        tried: set[str] = set()
        fwd_headers = upstream_headers(headers, self.forward_headers)
        last_error = "no node"
        tracing = self.tracing if out.span is not None else None
        while node is not None:
            tried.add(node.key)
            out.node = node
            node.inflight += 1
            hop, hop_headers = (trace.attempt(tracing, out, node, len(tried), fwd_headers) if tracing is not None
                                else (None, fwd_headers))
            done = False
            try:
                done = await self._attempt(node, path, body, hop_headers, send, response_headers, started, out, gate)
            finally:
                node.inflight -= 1
                self.fleet.notify()
                if hop is not None:
                    trace.attempt_done(hop, out, done)
            if done:
                return
            last_error = out.error or "upstream failure"
            if len(tried) > self.retries:
                break
            node = pick_other(tried)
            if node is not None:
                out.retries += 1
        raise UpstreamFailed(f"upstream failed after {len(tried)} attempt(s): {last_error}",
                             code="upstream_timeout" if out.timed_out else None)

    async def _attempt(self, node: Node, path: str, body: bytes, headers, send: Send, response_headers,
                       started: float, out: ForwardResult, gate: Gate | None) -> bool:
        """True when a response (any status < 500) went to the client; False to retry elsewhere."""
        try:
            resp = await self.upstream.post(node.url, path, body, headers)
        except UpstreamTimeout as e:  # no response headers in time, counted against the node like any failure
            out.timed_out = True
            self._failed(node, "timeout", str(e), out)
            return False
        except UpstreamError as e:
            self._failed(node, "connect", str(e), out)
            return False
        out.upstream_status = resp.status_code
        try:
            if resp.status_code >= 500:
                await resp.aread()
                self._failed(node, "5xx", f"node answered {resp.status_code}", out)
                return False
            ctype = resp.header(b"content-type", b"application/json")
            if gate is not None:
                await gate()
            if ctype.startswith(b"text/event-stream"):
                await self._stream(resp, node, ctype, send, response_headers, started, out)
            else:
                try:
                    data = await resp.aread()
                except UpstreamError as e:
                    out.timed_out = isinstance(e, UpstreamTimeout)
                    self._failed(node, "timeout" if out.timed_out else "read", str(e), out)
                    return False
                out.status = resp.status_code
                out.committed = True
                hdrs = [(b"content-type", ctype), (b"content-length", str(len(data)).encode())]
                await send({"type": "http.response.start", "status": resp.status_code,
                            "headers": hdrs + response_headers(node)})
                out.ttft = time.perf_counter() - started
                out.sent_all = True
                await send({"type": "http.response.body", "body": data})
                if out.capture and len(data) <= MAX_CAPTURE_BYTES:
                    out.body = data
                if resp.status_code == 200:
                    out.prompt_tokens, out.completion_tokens = usage_from(data)
            if node.failures:
                self.fleet.record_success(node)
            return True
        finally:
            await resp.aclose()

    async def _stream(self, resp, node: Node, ctype: bytes, send: Send, response_headers,
                      started: float, out: ForwardResult) -> None:
        out.status = resp.status_code
        out.committed = True
        await send({"type": "http.response.start", "status": resp.status_code,
                    "headers": [(b"content-type", ctype), (b"cache-control", b"no-cache")] + response_headers(node)})
        tail = last = b""
        kept: list[bytes] | None = [] if out.capture else None
        size = 0
        try:
            async for chunk in resp.aiter_raw():
                if out.ttft is None:
                    out.ttft = time.perf_counter() - started
                if chunk.find(b'"usage"') >= 0:  # not `in`: see usage_from
                    tail = chunk
                last = chunk
                if chunk.rstrip().endswith(b"data: [DONE]"):
                    # The client has the whole answer: it may hang up now (the openai SDK does) while the node
                    # is still closing its stream, and that is a served request, not a client that left
                    out.sent_all = True
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if kept is not None:  # a copy for the shadow comparison, bounded
                    size += len(chunk)
                    if size <= MAX_CAPTURE_BYTES:
                        kept.append(chunk)
                    else:
                        kept = None
        except UpstreamError as e:
            # Bytes already went out, so no retry: end the stream with an error event (OpenAI's SDKs raise on
            # a `data: {"error": ...}` event) rather than let a cut stream pass for a finished one.
            out.timed_out = isinstance(e, UpstreamTimeout)
            out.error = f"stream broken: {e}"
            self._count(node, "timeout" if out.timed_out else "stream")
            err = UpstreamFailed(f"{node.key}: {e}", code="upstream_timeout" if out.timed_out else None)
            # Logged and counted as the 502 it is (the 200 in the headers described a stream that then
            # failed), so the fleet's error rates, the rollup and the canary guards all see it.
            out.status = err.status
            sep = b"" if not last or last.endswith(b"\n\n") else b"\n\n"  # close a half-sent event first
            await send({"type": "http.response.body", "body": sep + b"data: " + err.body() + b"\n\n",
                        "more_body": True})
        out.sent_all = True
        await send({"type": "http.response.body", "body": b""})
        if kept is not None and out.status == 200:
            out.body = b"".join(kept)
        if tail:
            out.prompt_tokens, out.completion_tokens = usage_from(tail)

    def _failed(self, node: Node, kind: str, message: str, out: ForwardResult) -> None:
        out.error = f"{node.key}: {message}"[:500]
        self.fleet.record_failure(node, message)
        self._count(node, kind)

    def _count(self, node: Node, kind: str) -> None:
        if self.on_upstream_error:
            self.on_upstream_error(node.tier.value, kind)
