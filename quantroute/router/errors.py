"""Typed API errors, rendered once as OpenAI's error JSON with the right status code."""

from __future__ import annotations

from collections.abc import Sequence

import orjson


class RouterError(Exception):
    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.headers = headers or {}

    def body(self) -> bytes:
        return orjson.dumps({"error": {"message": self.message, "type": self.type,
                                       "param": self.param, "code": self.code}})


class BadRequest(RouterError):
    status = 400
    type = "invalid_request_error"


class Unauthorized(RouterError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class Forbidden(RouterError):
    """The key is valid but may not do this (a deployment below its tenant's tier floor)."""

    status = 403
    type = "invalid_request_error"
    code = "tier_below_floor"


class RateLimited(RouterError):
    """Over a tenant's or key's requests or tokens per minute; Retry-After says when it has room again."""

    status = 429
    type = "requests"  # OpenAI's: "requests" or "tokens", the limit that was reached
    code = "rate_limit_exceeded"

    def __init__(self, message: str, *, kind: str, retry_after_s: int) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after_s)})
        self.type = kind


class NotFound(RouterError):
    status = 404
    type = "invalid_request_error"
    code = "model_not_found"


class MethodNotAllowed(RouterError):
    status = 405
    type = "invalid_request_error"


class BodyTooLarge(RouterError):
    status = 413
    type = "invalid_request_error"
    code = "request_too_large"


class RequestTimeout(RouterError):
    status = 408
    type = "invalid_request_error"
    code = "request_timeout"


class Overloaded(RouterError):
    """This replica is at its concurrency limit: another replica (or a retry after Retry-After) can serve."""

    status = 503
    type = "server_error"
    code = "overloaded"


class NoCapacity(RouterError):
    status = 503
    type = "server_error"
    code = "no_capacity"


class WorkersUnreachable(RouterError):
    """An admin change reached some of this router's workers, not all: the message names the others."""

    status = 503
    type = "server_error"
    code = "workers_unreachable"


class SessionPinUnavailable(RouterError):
    """A new session's pin could not be stored (database down or slow): answering anyway could let the
    session's next turn land on another tier, so the request fails and the client retries."""

    status = 503
    type = "server_error"
    code = "session_pin_unavailable"


class UpstreamFailed(RouterError):
    status = 502
    type = "server_error"
    code = "upstream_error"


def error_response_parts(err: RouterError,
                         extra_headers: Sequence[tuple[bytes, bytes]] = ()) -> tuple[int, list, bytes]:
    """(status, raw headers, body) for an ASGI response."""
    body = err.body()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in err.headers.items()]
    headers += list(extra_headers)
    return err.status, headers, body
