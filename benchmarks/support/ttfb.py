"""Time to the first byte of a streamed answer, one fresh connection a request, over a raw socket (no client
library between the clock and the bytes)."""

from __future__ import annotations

import socket
import statistics
import time
import uuid


def ttfb_ms(port: int, path: str, body: bytes, mode: str, n: int = 200, ids: list[str] | None = None, *,
            authorization: str | None = None) -> float:
    """Median time from sending a streaming request to the first response byte (fresh connection each). `ids`:
    the session ids to send, one a request (the returning and chat modes' traces). `authorization`: an
    Authorization header to send too (mode keys)."""
    tag = uuid.uuid4().hex[:10]
    samples = []
    auth = f"Authorization: {authorization}\r\n" if authorization else ""
    for i in range(n):
        session = {"none": "", "fixed": f"x-session-id: ttfb-{tag}\r\n", "new": f"x-session-id: ttfb-{tag}-{i}\r\n"}
        header = f"x-session-id: {ids[i % len(ids)]}\r\n" if ids else session[mode]
        req = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{header}{auth}"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t0 = time.perf_counter()
            s.sendall(req)
            s.recv(1)
            samples.append((time.perf_counter() - t0) * 1000)
            while s.recv(65536):
                pass
    return statistics.median(samples)
