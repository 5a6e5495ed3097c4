"""ASGI response helpers shared by the completion path and the admin API: JSON bodies and OpenAI error JSON."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from quantroute.router.errors import RouterError, error_response_parts

JSON = b"application/json"


async def send_error(send, err: RouterError) -> None:
    status, headers, body = error_response_parts(err)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_json(send, status: int, payload, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = orjson.dumps(payload)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", JSON), (b"content-length", str(len(body)).encode()), *extra]})
    await send({"type": "http.response.body", "body": body})


async def send_bytes(send, status: int, body: bytes, content_type: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type)]})
    await send({"type": "http.response.body", "body": body})
