"""A request's spans, when tracing is on (quantroute.tracing): the request (a child of the caller's `traceparent`),
its decision (rules fired, tier, pin) and each upstream attempt (node, status, TTFT), whose `traceparent` goes to
the node so vLLM's spans continue the trace. With tracing off, callers hold no Tracing and call nothing here."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from quantroute.router.nodes.pool import Node
from quantroute.tracing import Tracing

if TYPE_CHECKING:
    from quantroute.router.path.route import Route


class ForwardResult(Protocol):
    """What the spans read of forward.ForwardResult (which imports this module)."""

    span: Any
    upstream_status: int
    node: Node | None
    retries: int
    ttft: float | None
    error: str | None
    prompt_tokens: int | None
    completion_tokens: int | None


def request_span(tracing: Tracing, scope: dict, kind: str, started: datetime) -> Any:
    parent = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"traceparent"), None)
    return tracing.start(f"POST {scope['path']}", traceparent=parent, kind="server",
                         start_ns=int(started.timestamp() * 1e9),
                         attributes={"http.request.method": "POST", "url.path": scope["path"],
                                     "quantroute.kind": kind})


def decided(tracing: Tracing, request: Any, route: Route, start_ns: int, *, follow: bool = False) -> None:
    """The decision as a child span of the request, from `start_ns` to now (none for a request not sampled)."""
    if not request.is_recording():
        return
    d = route.decision
    span = tracing.start("quantroute.decide", parent=request, start_ns=start_ns, attributes={
        "gen_ai.request.model": route.model, "quantroute.tier": route.tier.value, "quantroute.rules": d.rule_names,
        "quantroute.score": d.score, "quantroute.min_tier": d.tier.value,
        "quantroute.policy_version": route.policy.version, "quantroute.session": route.session_key is not None,
        "quantroute.pin": route.pin_state.value, "quantroute.pinned": route.from_pin,
        "quantroute.placement": route.placement.value, "quantroute.follow": follow})
    tracing.end(span, {"quantroute.arm": route.arm, "quantroute.affinity": route.affinity,
                       "quantroute.node": route.node.key})


def attempt(tracing: Tracing, out: ForwardResult, node: Node, number: int,
            headers: list[tuple[bytes, bytes]]) -> tuple[Any, list[tuple[bytes, bytes]]]:
    """A span for one upstream attempt, and the headers to send with it: the caller's `traceparent` replaced by
    the attempt's own, so the node's spans are its children. A request not sampled makes no span here and sends
    its own traceparent (flagged not sampled, so the node does not sample it either)."""
    headers = [h for h in headers if h[0] != b"traceparent"]
    if not out.span.is_recording():
        return None, [*headers, (b"traceparent", Tracing.traceparent(out.span))]
    out.upstream_status = 0
    span = tracing.start("quantroute.upstream", parent=out.span, kind="client", attributes={
        "quantroute.node": node.key, "quantroute.tier": node.tier.value, "quantroute.deployment": node.deployment,
        "quantroute.attempt": number, "server.address": node.url})
    return span, [*headers, (b"traceparent", Tracing.traceparent(span))]


def attempt_done(span: Any, out: ForwardResult, served: bool) -> None:
    Tracing.end(span, {"http.response.status_code": out.upstream_status or None,
                       "quantroute.ttft_ms": out.ttft * 1000 if served and out.ttft is not None else None},
                error=None if served else (out.error or "upstream failure"))


def finished(span: Any, out: ForwardResult, route: Route | None, status: int) -> None:
    if not span.is_recording():
        span.end()
        return
    node = out.node or (route.node if route else None)
    Tracing.end(span, {
        "http.response.status_code": status, "quantroute.tier": node.tier.value if node else None,
        "quantroute.node": node.key if node else None, "quantroute.retries": out.retries,
        "quantroute.ttft_ms": out.ttft * 1000 if out.ttft is not None else None,
        "gen_ai.usage.input_tokens": out.prompt_tokens, "gen_ai.usage.output_tokens": out.completion_tokens},
        error=(out.error or f"status {status}") if status >= 500 else None)
