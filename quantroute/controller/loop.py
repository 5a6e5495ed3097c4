"""The controller's loop (I/O): every interval, take or confirm the leader lock; as leader reconcile every
unfinished rollout through the rollout service (the same functions the CLI and the dashboard call, so guards
are decided in one place), then deliver webhooks; as leader or standby, record the heartbeat.

    ctl = Controller(settings)          # builds its engine, store, service, lock and metrics from settings
    ctl.run(stop)                       # until `stop` (a threading.Event) is set
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from datetime import datetime

import httpx
from sqlalchemy.engine import Engine

from quantroute.admin_client import RouterAdmin
from quantroute.clock import utcnow
from quantroute.controller import webhooks
from quantroute.controller.leader import LeaderLock, leader_lock
from quantroute.controller.metrics import ControllerMetrics
from quantroute.controller.settings import ControllerSettings
from quantroute.controller.status import Line, heartbeat_line
from quantroute.db import controller as heartbeat
from quantroute.db import rollout as rdb
from quantroute.db.engine import session as db_session
from quantroute.policy.store import PolicyStore
from quantroute.rollout.service import CONTROLLER, RolloutService
from quantroute.tracing import Tracing

log = logging.getLogger("quantroute.controller")


class Controller:
    def __init__(self, settings: ControllerSettings, *, engine: Engine | None = None,
                 tracing: Tracing | None = None) -> None:
        from quantroute.db.engine import make_engine, require_schema

        self.settings = settings
        self.tracing = tracing  # a span per pass and per model reconciled, when OTEL_* variables turn it on
        # `quantroute db upgrade` migrates; a controller refuses a schema that is not its own (SchemaMismatchError)
        self.engine = engine or require_schema(make_engine(settings.db_url))
        self.name = settings.name or f"{socket.gethostname()}:{os.getpid()}"
        self.router = RouterAdmin(settings.routers, settings.admin_token) if settings.routers else None
        self.service = RolloutService(PolicyStore(settings.policies_dir, self.engine), router=self.router,
                                      actor_detail={"controller": self.name},
                                      after_status_write=self._fault_hook())
        self.lock: LeaderLock = leader_lock(self.engine, settings.lock_key)
        self.metrics = ControllerMetrics()
        self.http = httpx.Client(timeout=settings.webhook_timeout_s)
        self.backoff = webhooks.Backoff(settings.webhook_backoff_s, settings.webhook_max_attempts,
                                        settings.webhook_max_age_s)
        self.started_at = utcnow()
        self.passes = 0
        self.role = "standby"

    def _fault_hook(self):
        fault = self.settings.fault_after_status_write
        if fault is None:
            return None

        def hook(row: rdb.Rollout) -> None:
            log.warning("fault injection: %s after writing rollout %s as %s (version %s not activated)",
                        fault, row.id, row.phase, row.policy_version)
            if fault == "exit":
                os._exit(70)
            while True:  # hang, holding the leader lock, until killed
                time.sleep(3600)
        return hook

    # ---- one pass ------------------------------------------------------------------------------------------

    def run_pass(self) -> list[str]:
        """Reconcile once if leading. Returns the actions taken ('model: what'), for logs and tests."""
        if self.tracing is None:
            return self._pass()
        with self.tracing.span("quantroute.controller.pass", {"quantroute.controller": self.name}) as span:
            actions = self._pass()
            Tracing.annotate(span, {"quantroute.role": self.role, "quantroute.actions": actions})
            return actions

    def _span(self, name: str, attributes: dict):
        return self.tracing.span(name, attributes) if self.tracing is not None else contextlib.nullcontext()

    def _pass(self) -> list[str]:
        try:
            leading = self.lock.acquire()
        except Exception as e:  # noqa: BLE001 - the DB is unreachable: nobody acts through us this pass
            log.error("leader lock: %s", e)
            leading = False
        if leading != (self.role == "leader"):
            log.info("%s is now %s", self.name, "leader" if leading else "standby")
        self.role = "leader" if leading else "standby"
        actions: list[str] = []
        error = None
        if leading:
            actions, error = self._reconcile_all()
            self._deliver()
        self.passes += 1
        try:
            with db_session(self.engine) as s:
                heartbeat.beat(session=s, name=self.name, role=self.role, interval_s=self.settings.interval_s,
                               started_at=self.started_at, error=error)
                s.commit()
        except Exception as e:  # noqa: BLE001 - the next pass tries again
            log.error("heartbeat: %s", e)
        m = self.metrics
        m.leader.set(1 if leading else 0)
        m.passes.labels(role=self.role).inc()
        m.actions.inc(len(actions))
        m.last_pass.set(time.time())
        return actions

    def _models(self) -> list[str]:
        with db_session(self.engine) as s:
            return list(dict.fromkeys(r.model for r in rdb.unconverged(session=s)))

    def _reconcile_all(self) -> tuple[list[str], str | None]:
        actions, error = [], None
        for model in self._models():
            with self._span("quantroute.controller.reconcile", {"gen_ai.request.model": model}) as span:
                try:
                    done = [str(what) for what in self.service.reconcile(model, by=CONTROLLER)]
                except Exception as e:
                    error = f"{model}: {type(e).__name__}: {e}"
                    self.metrics.errors.inc()
                    log.exception("reconciling %s", model)
                    if span is not None:
                        Tracing.annotate(span, error=error)
                    continue
                if span is not None:
                    Tracing.annotate(span, {"quantroute.actions": done})
            for what in done:
                actions.append(f"{model}: {what}")
                log.info("%s: %s", model, what)
        return actions, error

    def _deliver(self) -> None:
        if not self.settings.webhooks:
            return
        try:
            out = webhooks.deliver(self.engine, self.http, self.settings.webhooks, self.backoff)
        except Exception:
            log.exception("webhook delivery")
            return
        self.metrics.webhook_delivered.inc(out.delivered)
        self.metrics.webhook_failures.inc(out.failed_attempts)
        if out.failed_attempts:
            log.warning("webhooks: %d delivered, %d failed tries, %d given up", out.delivered,
                        out.failed_attempts, out.gave_up)

    # ---- the loop ------------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        interval = self.settings.interval_s
        log.info("controller %s: every %gs, database %s", self.name, interval,
                 self.engine.url.render_as_string(hide_password=True))
        try:
            while not stop.is_set():
                t0 = time.monotonic()
                self.run_pass()
                stop.wait(max(0.0, interval - (time.monotonic() - t0)))
        finally:
            self.close()

    def close(self) -> None:
        self.lock.release()
        self.http.close()
        if self.router is not None:
            self.router.close()


def run_forever(settings: ControllerSettings) -> None:
    """The CLI's entry: SIGTERM and SIGINT end the loop after the current pass."""
    tracing = Tracing.from_env("quantroute-controller")
    ctl = Controller(settings, tracing=tracing)
    if settings.metrics_port is not None:
        server = ctl.metrics.serve(settings.metrics_port, settings.metrics_host)
        log.info("metrics on http://%s:%d/metrics", settings.metrics_host, server.server_port)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        ctl.run(stop)
    finally:
        if tracing is not None:
            tracing.shutdown()


def leader_status(engine: Engine, now: datetime | None = None) -> Line:
    """The line people see about the controller, from the leader's newest heartbeat."""
    with db_session(engine) as s:
        row = heartbeat.latest(session=s, role="leader")
    return heartbeat_line(row, now or utcnow())
