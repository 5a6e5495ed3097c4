"""The router's ASGI app: a plain ASGI callable (no framework on the request path) built by `create_app`.

Everything lives on one `Router` object made per app: settings, one pooled httpx client (created in the
lifespan), fleet state, pins, the active policy reference, the request-log writer and metrics."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from dataclasses import replace
from datetime import timedelta

import httpx
import orjson

from quantroute.classify import RequestError
from quantroute.clock import utcnow
from quantroute.router.access.keys import Grant, KeyTable, Unknown
from quantroute.router.admin.api import AdminApi
from quantroute.router.admin.peers import WorkerPeers
from quantroute.router.errors import BadRequest, BodyTooLarge, MethodNotAllowed, Overloaded, RequestTimeout, RouterError
from quantroute.router.heap import freeze_startup_heap
from quantroute.router.metrics.registry import RouterMetrics
from quantroute.router.nodes.pool import NodePool, probe_loop
from quantroute.router.nodes.sync import NodeSync, load_nodes
from quantroute.router.nodes.upstream import FastUpstream, HttpxUpstream
from quantroute.router.path import trace
from quantroute.router.path.active_policy import PolicyHolder
from quantroute.router.path.canary import DIRECT
from quantroute.router.path.decide import Decider
from quantroute.router.path.forward import FORWARD_HEADERS, KEYED_FORWARD_HEADERS, Forwarder, ForwardResult
from quantroute.router.path.route import PinMoved, Route
from quantroute.router.path.shadow import Shadower
from quantroute.router.path.tags import route_headers
from quantroute.router.pins.committer import PinCommitter
from quantroute.router.pins.store import PinStore
from quantroute.router.requestlog.privacy import PendingReplay
from quantroute.router.requestlog.retention import retention_loop
from quantroute.router.requestlog.writer import RequestLogWriter
from quantroute.router.responses import send_error
from quantroute.router.settings import RouterSettings, tls_context
from quantroute.router.supervise import supervise
from quantroute.tracing import Tracing

log = logging.getLogger(__name__)

WATCH_AFTER_S = 0.1  # when a request starts watching for its client's disconnect (see Router._forward)
COMPLETION_PATHS = {"/v1/chat/completions": "chat", "/v1/completions": "completion"}


class Router:
    def __init__(self, settings: RouterSettings, *, transport: httpx.AsyncBaseTransport | None = None,
                 engine=None, own_process: bool = False, peers: WorkerPeers | None = None) -> None:
        self.settings = settings
        self.peers = peers  # the other workers behind this port, when there are any (`--workers N`)
        self.own_process = own_process  # the process serves this app alone: tune its GC after startup
        self.transport = transport
        self.engine = engine
        self.metrics = RouterMetrics()
        self.fleet = NodePool(max_inflight=settings.node_max_inflight, max_waiting=settings.node_max_waiting,
                           eject_after=settings.eject_after_failures)
        self.pin_committer = (PinCommitter(engine, timeout_s=settings.pin_commit_timeout_s,
                                           on_batch=self.metrics.pins.committed,
                                           synchronous=settings.pin_synchronous_commit)
                              if engine is not None else None)
        if self.pin_committer is not None:
            self.metrics.pin_touches.counts = self.pin_committer.touch_counts
        self.pins = PinStore(engine, touch_interval_s=settings.pin_touch_interval_s, committer=self.pin_committer,
                             max_cached=settings.pin_cache_max)
        self.holder = PolicyHolder(settings.policies_dir, engine, on_change=self._policy_changed,
                                   on_failure=self.metrics.reload_failures.inc)
        self.writer = RequestLogWriter(engine, batch_size=settings.log_batch_size,
                                       flush_interval_s=settings.log_flush_interval_s,
                                       max_buffered=settings.log_buffer_max,
                                       max_buffered_bytes=settings.log_buffer_max_bytes,
                                       on_drop=self.metrics.log_dropped_rows)
        self.forward_headers = FORWARD_HEADERS if settings.client_auth == "off" else KEYED_FORWARD_HEADERS
        self.shadows = Shadower(self.fleet, engine=engine, storage=settings.prompt_storage,
                                log_batch_size=settings.log_batch_size, flush_interval_s=settings.log_flush_interval_s,
                                registry=self.metrics.registry, forward_headers=self.forward_headers)
        self.node_sync = NodeSync(self.fleet, engine, interval_s=settings.node_refresh_s)
        self.decider = Decider(self.fleet, self.pins, retry_after_s=settings.retry_after_s, metrics=self.metrics,
                               on_miss=self.node_sync.kick,
                               affinity_max_load=settings.node_affinity_max_load if settings.node_affinity else None)
        if settings.client_auth != "off" and engine is None:
            raise ValueError(f"client_auth {settings.client_auth!r} needs the database (the keys are stored there); "
                             "set db_url, or client_auth 'off'")
        self.keys = (KeyTable(engine, required=settings.client_auth == "required",
                              refresh_s=settings.client_keys_refresh_s, retry_after_s=settings.retry_after_s)
                     if settings.client_auth != "off" else None)
        self.client: httpx.AsyncClient | None = None
        self.forwarder: Forwarder | None = None
        self.tracing: Tracing | None = None  # made at startup, in the serving process, when OTEL_* turn it on
        self._tasks: list[asyncio.Task] = []
        self._ids = itertools.count(1)
        self.active = 0  # completions in progress on this replica (max_concurrent_requests)
        self._boot = os.urandom(4).hex()
        self.admin = AdminApi(token=settings.admin_token, holder=self.holder, pool=self.fleet, pins=self.pins,
                              engine=engine, render_metrics=lambda: self.metrics.render(self.fleet, self.writer),
                              read_body=self.read_body, peers=peers)

    # -- lifecycle --------------------------------------------------------------------------------------------
    async def startup(self) -> None:
        s = self.settings
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=512, keepalive_expiry=30)
        timeout = httpx.Timeout(s.upstream_timeout_s, connect=s.connect_timeout_s)
        tls = tls_context(s)
        self.client = httpx.AsyncClient(transport=self.transport, limits=limits, timeout=timeout, verify=tls)
        self.upstream = (HttpxUpstream(self.client, read_timeout=s.upstream_read_timeout_s)
                         if self.transport is not None else
                         FastUpstream(connect_timeout=s.connect_timeout_s, timeout=s.upstream_timeout_s,
                                      read_timeout=s.upstream_read_timeout_s, tls=tls))
        self.shadows.upstream = self.upstream
        self.tracing = Tracing.from_env("quantroute-router")
        self.forwarder = Forwarder(self.upstream, self.fleet, retries=s.retries,
                                   on_upstream_error=self._upstream_error,
                                   forward_headers=self.forward_headers, tracing=self.tracing)
        await asyncio.to_thread(self.holder.load_initial)
        await asyncio.to_thread(load_nodes, self.fleet, fleet_file=s.fleet_file, engine=self.engine)
        if self.keys is not None:
            await asyncio.to_thread(self.keys.refresh)
        loop = asyncio.get_running_loop()

        def spawn(name: str, make) -> None:
            self._tasks.append(loop.create_task(supervise(name, make, on_crash=self.metrics.task_crashes_inc),
                                                name=f"quantroute-{name}"))

        self._tasks = []
        spawn("probes", lambda: probe_loop(self.client, self.fleet, interval=s.probe_interval_s,
                                           timeout=s.probe_timeout_s))
        spawn("request-log", self.writer.run)
        spawn("shadow-log", self.shadows.writer.run)
        if s.watch_pointer:
            spawn("policy-watch", self.holder.watch_pointer)
        if self.pin_committer is not None:
            spawn("pin-commit", self.pin_committer.run)
        if self.engine is not None:
            spawn("policy-poll", lambda: self.holder.poll_db(s.policy_poll_s))
            spawn("node-sync", self.node_sync.run)
            if self.keys is not None:
                spawn("client-keys", self.keys.run)
            spawn("pin-purge", lambda: self.pins.purge_loop(
                interval_s=s.pin_purge_interval_s, batch=s.pin_purge_batch, max_batches=s.pin_purge_max_batches,
                on_purged=self.metrics.pins_purged.inc))
            if s.log_retention_days is not None:
                spawn("log-retention", lambda: retention_loop(self.engine, max_age=timedelta(days=s.log_retention_days),
                                                              interval_s=s.log_retention_interval_s))
        if self.peers is not None:
            worker = await self.peers.start(self.admin.peer_handlers(self.node_sync.refresh))
            log.info("worker %s of this router (pid %d)", worker, os.getpid())
        if self.own_process:
            freeze_startup_heap()

    async def shutdown(self) -> None:
        if self.peers is not None:
            await self.peers.close()
        if self.pin_committer is not None:  # pins claimed by requests still finishing get stored first
            await self.pin_committer.drain(timeout_s=2)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.shadows.close(timeout_s=2)
        await self.writer.close(timeout_s=5)
        if self.client is not None:
            await self.upstream.aclose()
            await self.client.aclose()
        if self.tracing is not None:
            await asyncio.to_thread(self.tracing.shutdown)  # exports the spans still buffered

    def _policy_changed(self, active) -> None:
        self.metrics.policy_version.set(active.version)

    def _upstream_error(self, tier: str, kind: str) -> None:
        self.metrics.upstream_errors.labels(tier, kind).inc()

    # -- ASGI -------------------------------------------------------------------------------------------------
    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            kind = COMPLETION_PATHS.get(path)
            try:
                if kind is not None:
                    if scope["method"] != "POST":
                        raise MethodNotAllowed(f"{path} takes POST")
                    limit = self.settings.max_concurrent_requests
                    if self.active >= limit:
                        self.metrics.rejected.labels("concurrency").inc()
                        raise Overloaded(f"this router replica is at its limit of {limit} concurrent requests; "
                                         "retry after the Retry-After delay",
                                         headers={"Retry-After": str(self.settings.retry_after_s)})
                    self.active += 1
                    try:
                        await self.completion(scope, receive, send, kind, path)
                    finally:
                        self.active -= 1
                else:
                    await self.admin.dispatch(scope, receive, send)
            except RouterError as e:
                await send_error(send, e)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive, send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as e:  # report to the server, which exits
                    log.exception("router startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(e)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def read_body(self, scope, receive) -> bytes:
        limit = self.settings.max_body_bytes
        for k, v in scope["headers"]:
            if k == b"content-length" and int(v or 0) > limit:
                raise BodyTooLarge(f"request body is {int(v)} bytes; the limit is {limit} bytes")
        deadline = self.settings.body_read_timeout_s
        # One timer handle (not asyncio.timeout: a context object and a reschedule per request on the hot path)
        task = asyncio.current_task()
        expired = []
        timer = asyncio.get_running_loop().call_later(deadline, lambda: expired.append(task.cancel()))  # type: ignore[union-attr]  # always inside a request's task
        try:
            return await self._receive_body(receive, limit)
        except asyncio.CancelledError:
            if not expired or task.uncancel() > 0:  # type: ignore[union-attr]  # always inside a request's task
                raise
            self.metrics.rejected.labels("body_timeout").inc()
            raise RequestTimeout(f"the request body did not arrive within {deadline:g}s") from None
        finally:
            timer.cancel()

    @staticmethod
    async def _receive_body(receive, limit: int) -> bytes:
        chunks, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                raise asyncio.CancelledError("client went away")
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(f"request body exceeds the limit of {limit} bytes")
            chunks.append(chunk)
            if not msg.get("more_body"):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def completion(self, scope, receive, send, kind: str, path: str) -> None:
        started = time.perf_counter()
        ts = utcnow()
        body = await self.read_body(scope, receive)
        ap = self.holder.serving  # the version this request lives under, even if a reload lands meanwhile
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise BadRequest(f"request body is not valid JSON: {e}") from None
        raw_headers = scope["headers"]
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in raw_headers}
        request_id = headers.get("x-request-id") or f"{self._boot}-{next(self._ids)}"
        tracing = self.tracing
        out = ForwardResult(span=trace.request_span(tracing, scope, kind, ts) if tracing is not None else None)
        route: Route | None = None
        grant: Grant | None = None
        try:
            if self.keys is not None:
                limit = self.settings.max_concurrent_requests
                known = self.keys.check_known(headers, self.active, limit)  # awaits nothing for a known key
                grant = (await self.keys.check_after_refresh(headers, self.active, limit)
                         if isinstance(known, Unknown) else known)
            decide_ns = time.time_ns() if tracing is not None else 0
            try:
                route = await self.decider.decide(ap, data, headers, kind, grant)
            except RequestError as e:
                raise BadRequest(e.message, param=e.param) from None
            if tracing is not None:
                trace.decided(tracing, out.span, route, decide_ns)
            if not route.waited:
                self.metrics.decision_seconds.observe(time.perf_counter() - started)
            # None for all but a sampled share; never for a tenant with a floor (a shadow may run below it)
            shadow = self.shadows.sample(route, data, len(body)) if grant is None or grant.floor is None else None
            out.capture = shadow is not None
            try:
                await self._forward(route, path, body, raw_headers, receive, send, started, out)
            except PinMoved as moved:  # the stored pin names another node (set by another replica): follow it
                (self.metrics.affinity_moves if moved.affinity else self.metrics.pin_conflicts).inc()
                decide_ns = time.time_ns() if tracing is not None else 0
                route = await self.decider.follow(route)
                if tracing is not None:
                    trace.decided(tracing, out.span, route, decide_ns, follow=True)
                await self._forward(route, path, body, raw_headers, receive, send, started, out)
            if shadow is not None:  # the client has its whole answer: the shadow starts now, and is not awaited
                served = replace(route, node=out.node) if out.node is not None else route
                self.shadows.launch(shadow, route=served, path=path, body=body, headers=raw_headers, served=out.body,
                                    served_status=out.status, request_id=request_id, ts=ts, data=data,
                                    header_map=headers)
        except RouterError as e:
            out.status, out.error = e.status, out.error or e.message[:500]
            if out.committed:
                return
            raise
        finally:
            self._record(ts, started, request_id, data, route, out, headers, len(body), grant)

    async def _forward(self, route: Route, path: str, body: bytes, raw_headers, receive, send, started: float,
                       out: ForwardResult) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a request is forwarded inside its own task (the ASGI server's)")
        state = {"done": False, "gone": False, "moved": False}

        async def watch() -> None:  # a client disconnect cancels the upstream request
            while (await receive())["type"] != "http.disconnect":
                pass
            # After the response's last byte the server answers http.disconnect too: that is a finished request
            # (cancelling it then logged a served answer as a 499 and dropped its shadow)
            if not state["done"] and not out.sent_all:
                state["gone"] = True
                task.cancel()

        pending, gate = self._pin_gate(route, state, task)
        # Most answers are done before a disconnect watcher would do anything: it starts only once the request
        # has run for WATCH_AFTER_S (a task per request is a real share of a short request path); a client that
        # left earlier is seen then, its receive() answering http.disconnect at once.
        loop = asyncio.get_running_loop()
        watcher: list[asyncio.Task] = []
        timer = loop.call_later(WATCH_AFTER_S, lambda: watcher.append(loop.create_task(watch())))
        try:
            await self.forwarder.forward(path=path, body=body, headers=raw_headers, first=route.node,  # type: ignore[union-attr]  # set by startup(), before any request
                                         pick_other=lambda tried: self.decider.pick(route.target, tried), send=send,
                                         response_headers=lambda node: route_headers(route, node),
                                         started=started, out=out, gate=gate)
        except asyncio.CancelledError:
            if state["gone"]:
                task.uncancel()
                out.status, out.error = 499, "client disconnected"
            elif state["moved"]:
                task.uncancel()
                self.decider.check_settled(route, pending)  # raises PinMoved or SessionPinUnavailable
            else:
                raise
        finally:
            state["done"] = True
            timer.cancel()
            for w in watcher:
                w.cancel()
        if out.retries:
            self.metrics.retries.labels(route.tier.value).inc(out.retries)
        if out.committed and out.status < 500:
            self.decider.served(route, out.node)

    def _pin_gate(self, route: Route, state: dict[str, bool], task: asyncio.Task):
        """For a first turn whose pin is still being stored: the pending commit and the gate the forwarder runs
        before the first byte leaves (None, None otherwise). A pin that fails or moves meanwhile cancels `task`."""
        pending = self.decider.pending(route)
        if route.pin is not None and (pending is None or pending.done()):
            self.decider.check_settled(route, pending)  # already settled: a moved pin never goes upstream
            return None, None
        if pending is None:
            return None, None
        timeout = self.settings.pin_commit_timeout_s + 1

        async def settle_first() -> None:
            await self.decider.settle(route, timeout)

        def settled(fut) -> None:  # a pin that failed or moved stops the upstream request at once
            if not state["done"] and not state["gone"] and (fut.cancelled() or fut.exception() is not None
                                                           or self.decider.moved(route)):
                state["moved"] = True
                task.cancel()

        pending.add_done_callback(settled)
        return pending, settle_first

    def _record(self, ts, started: float, request_id: str, data, route: Route | None, out: ForwardResult,
                headers: dict, body_bytes: int, grant: Grant | None = None) -> None:
        """Metrics, and the log row handed to the writer (which prepares it now, or in its thread if large)."""
        if grant is not None and (out.prompt_tokens or out.completion_tokens):
            grant.spend((out.prompt_tokens or 0) + (out.completion_tokens or 0))
        latency_ms = (time.perf_counter() - started) * 1000
        node = out.node or (route.node if route else None)
        status = out.status or 500
        tier = node.tier.value if node else (route.tier.value if route else "")
        deployment = node.deployment if node else ""
        arm = route.arm if route else None
        if out.span is not None:
            trace.finished(out.span, out, route, status)
        self.metrics.finished(tier, deployment, arm or "", status, latency_ms / 1000, out)
        stream = bool(isinstance(data, dict) and data.get("stream"))
        if node is not None and stream and status == 200 and out.ttft is not None:
            # a streamed answer shows the node's TTFT and TPOT (the knee SLO-aware spill watches: path.spill)
            n = out.completion_tokens or 0
            node.observe(ttft_s=out.ttft, tpot_s=(latency_ms / 1000 - out.ttft) / (n - 1) if n > 1 else None)
        if route is not None and route.affinity is not None:
            self.metrics.affinity.labels(tier, route.affinity).inc()
        if route is not None and route.direct:
            arm = DIRECT  # in the log only: guards skip it (metrics keep the arm label empty, as for no canary)
        model = data.get("model") if isinstance(data, dict) else None
        decision = route.decision if route else None
        self.writer.add({
            "ts": ts, "request_id": request_id, "session_key": route.session_key if route else None,
            "model": route.model if route else (model if isinstance(model, str) else ""),
            "deployment": deployment or None, "node": node.key if node else None, "tier": tier or None,
            "arm": arm, "policy_version": route.policy.version if route else None,
            "rules": decision.rule_names if decision else [],
            "score": decision.score if decision else None,
            "status": status, "stream": stream,
            "latency_ms": latency_ms, "ttft_ms": out.ttft * 1000 if out.ttft is not None else None,
            "prompt_tokens": out.prompt_tokens, "completion_tokens": out.completion_tokens,
            "retries": out.retries, "escalated": bool(route and route.escalated), "error": out.error,
            "affinity": route.affinity if route else None, "reason": route.reason if route else None,
            # the pin as stored (its claim resolved before the answer left: another replica's, if it won)
            "pin_created_at": route.pin.created_at if route and route.pin else None,
            # what the dashboard's what-if replay needs to classify this request again under a draft policy,
            # as far as the prompt-storage setting allows (credentials in headers are never kept)
            "replay": PendingReplay(data, headers, self.settings.prompt_storage, self._log_headers(route)),
            "tenant": grant.tenant if grant is not None else None},
            nbytes=body_bytes)

    def _log_headers(self, route: Route | None) -> tuple[str, ...]:
        hp = route.policy.policy.headers if route else None
        extra = (hp.priority_header, hp.latency_budget_header, hp.min_tier_header) if hp else ()
        return (*self.settings.log_headers, *extra)


def create_app(settings: RouterSettings, *, transport: httpx.AsyncBaseTransport | None = None,
               engine=None, use_db: bool = True, own_process: bool = False,
               peers: WorkerPeers | None = None) -> Router:
    """Build a router app. `engine` defaults to one made from `settings.db_url`, which must be at this code's
    schema revision (`quantroute db upgrade` makes it so; SchemaMismatchError otherwise); `use_db=False` runs
    without a database (pins in memory, no request log). `peers`: the other workers behind the same port."""
    if engine is None and use_db:
        from quantroute.db.engine import make_engine, require_schema

        engine = require_schema(make_engine(settings.db_url))
    return Router(settings, transport=transport, engine=engine, own_process=own_process, peers=peers)
